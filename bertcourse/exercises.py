r"""Exercise checkers that tell a learner *which* mistake they made.

In a notebook::

    from bertcourse.exercises import check, solution

    def my_layer_norm(x, weight, bias, eps):
        raise NotImplementedError  # the learner's code goes here

    check("layer_norm", my_layer_norm)  # shows: not attempted / correct / wrong, and why
    solution("layer_norm")  # shows the reference source

How a check works:

1. Each exercise builds a few seeded test cases (batched and unbatched, with and without
   masks, odd sizes, fp32) from its own ``torch.Generator``: the global random state of
   the notebook is never touched.
2. The learner's function runs on a copy of every case's inputs; the reference is
   **always the package function of the same name** (one source of truth).
3. ``NotImplementedError`` on the first case means "not attempted yet"; right answers on
   every case mean "correct".
4. Otherwise the output is compared with a catalogue of known mistakes, each a small
   function that implements the wrong variant. A mistake matches when, on every case,
   it gives the learner's output or fails the same way (a forgotten transpose raises a
   shape error on non-square inputs, so the cases include a square one where it runs),
   with at least one equal output. The first match names the mistake and hints at the
   fix; the cases are built so that each mistake differs from the reference and from
   every other mistake. With no match, the first failing case is reported: an
   exception, a wrong type, shape or dtype, NaN, or the largest difference.

The cases, the reference outputs and the mistakes' outputs are computed once per
exercise and cached: they are seeded, so they never change.

A checker never raises, whatever the learner's function does or returns; only an unknown
exercise name raises (``ValueError``), since that is the notebook author's error. Every
message is deterministic (no timings, ids or paths), because nbval compares the output
of every committed notebook cell.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import math
import numbers
import os
import traceback
from collections.abc import Callable

import torch
import torch.nn.functional as F

from .attention import _teaching_attention, attention_scores, qkv_projection, scaled_dot_product_attention
from .bert import bert_embeddings
from .config import BertConfig
from .counting import count_parameters, linear_parameters, parameter_breakdown
from .feedforward import feed_forward, gelu
from .layernorm import layer_norm
from .masks import causal_mask, padding_mask
from .multihead import merge_heads, multi_head_attention, split_heads
from .positional import sinusoidal_position_encoding

__all__ = ["EXERCISES", "CheckResult", "Exercise", "Mistake", "check", "prompt", "solution"]

NOT_ATTEMPTED, CORRECT, WRONG = "not_attempted", "correct", "wrong"

_SEED = 0

# What PyTorch and the package raise for tensors of the wrong shape.
_SHAPE_ERRORS = (RuntimeError, ValueError, IndexError)

# Frames from these folders are ours or PyTorch's, never the learner's code.
_LIBRARY_DIRS = tuple(os.path.dirname(os.path.abspath(path)) + os.sep for path in (__file__, torch.__file__))


# ---------------------------------------------------------------------------------------------
# What the learner sees
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, repr=False)
class CheckResult:
    """The verdict of ``check``: ``status`` is "not_attempted", "correct" or "wrong".

    ``mistake`` names the catalogued mistake the output matched, if any. As the last
    expression of a cell it shows ``message``.
    """

    exercise: str
    status: str
    message: str
    mistake: str | None = None

    @property
    def passed(self) -> bool:
        return self.status == CORRECT

    def __repr__(self) -> str:
        return self.message

    __str__ = __repr__

    def _repr_markdown_(self) -> str:
        return self.message.replace("\n", "  \n")


@dataclasses.dataclass(frozen=True, repr=False)
class Listing:
    """Text that a notebook shows as Markdown (``markdown``) and a terminal as plain ``text``."""

    text: str
    markdown: str

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__

    def _repr_markdown_(self) -> str:
        return self.markdown


# ---------------------------------------------------------------------------------------------
# The registry's building blocks
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    """One test input: ``args`` are passed positionally, in the order of the reference's signature."""

    label: str
    args: tuple


@dataclasses.dataclass(frozen=True)
class Mistake:
    """A known wrong variant: ``wrong`` has the learner's signature and returns what that mistake gives."""

    name: str
    hint: str
    wrong: Callable


@dataclasses.dataclass(frozen=True)
class Exercise:
    """One exercise: the reference (a package function), its test cases and its catalogue of mistakes.

    ``outputs`` names the items when the function returns a tuple (e.g. ("output", "weights")).
    ``extra_solution`` lists helpers whose source ``solution`` shows after the reference's.
    """

    name: str
    reference: Callable
    prompt: str
    start: str
    make_cases: Callable[[torch.Generator], list[Case]]
    mistakes: tuple[Mistake, ...]
    outputs: tuple[str, ...] = ()
    atol: float = 1e-5
    rtol: float = 1e-5
    extra_solution: tuple[Callable, ...] = ()

    def cases(self) -> list[Case]:
        return self.make_cases(torch.Generator().manual_seed(_SEED))

    def argument_names(self) -> list[str]:
        return list(inspect.signature(self.reference).parameters)


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------


def check(name: str, fn) -> CheckResult:
    """Run the learner's ``fn`` on the test cases of exercise ``name`` and diagnose the result.

    Returns a ``CheckResult`` (status "not_attempted", "correct" or "wrong", and a message).
    Never raises because of ``fn``; raises ``ValueError`` for an unknown exercise name.
    """
    exercise = _lookup(name)
    if not callable(fn):
        return CheckResult(
            name,
            WRONG,
            f'❌ Wrong: pass your function itself, without calling it: `check("{name}", my_function)`. '
            f"Got {_kind(fn)} instead.",
        )
    try:
        return _run_check(exercise, fn)
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # the learner's objects can break anything; a checker never raises
        return CheckResult(
            name, WRONG, f"❌ Wrong: your output could not be checked ({type(error).__name__}: {_first_line(error)})."
        )


def solution(name: str) -> Listing:
    """The reference source of exercise ``name`` (the package function), shown as a Python code block."""
    exercise = _lookup(name)
    sources = [inspect.getsource(f) for f in (exercise.reference, *exercise.extra_solution)]
    source = "\n\n".join(s.rstrip("\n") for s in sources) + "\n"
    return Listing(source, f"```python\n{source}```")


def prompt(name: str) -> Listing:
    """What the learner's function for exercise ``name`` receives and must return."""
    exercise = _lookup(name)
    text = f"Exercise `{name}`: {exercise.prompt}"
    return Listing(text, text)


def _lookup(name) -> Exercise:
    if name not in EXERCISES:
        known = ", ".join(EXERCISES)
        raise ValueError(f"unknown exercise {name!r}; the known exercises are: {known}.")
    return EXERCISES[name]


# ---------------------------------------------------------------------------------------------
# The checking engine
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Outcome:
    """What one call gave: a value, or the exception it raised."""

    value: object = None
    error: BaseException | None = None
    changed_argument: str | None = None  # an input the call modified in place


@functools.cache
def _prepared(name: str) -> tuple[list[Case], list]:
    """The cases of exercise ``name`` and the reference's outputs on them (built once: they are seeded)."""
    exercise = EXERCISES[name]
    cases = exercise.cases()
    return cases, [exercise.reference(*copy.deepcopy(case.args)) for case in cases]


@functools.cache
def _mistake_outcomes(name: str) -> dict[str, list[_Outcome]]:
    """What every catalogued mistake of exercise ``name`` gives on each case (built once)."""
    exercise = EXERCISES[name]
    cases, names = _prepared(name)[0], exercise.argument_names()
    return {mistake.name: [_call(mistake.wrong, case.args, names) for case in cases] for mistake in exercise.mistakes}


def _run_check(exercise: Exercise, fn) -> CheckResult:
    cases, expected = _prepared(exercise.name)
    names = exercise.argument_names()
    learner = []
    for case in cases:
        outcome = _call(fn, case.args, names)
        if not learner and isinstance(outcome.error, NotImplementedError):
            return CheckResult(
                exercise.name,
                NOT_ATTEMPTED,
                "⏳ Not attempted yet: replace `raise NotImplementedError` with your code. "
                f"Start with: {exercise.start}",
            )
        learner.append(outcome)

    problems = [_case_problem(exercise, outcome, exp) for outcome, exp in zip(learner, expected, strict=True)]
    if not any(problems):
        changed = next((o.changed_argument for o in learner if o.changed_argument), None)
        if changed:
            return CheckResult(
                exercise.name,
                WRONG,
                f"❌ Wrong: your results are right, but your function changes its input `{changed}` in place. "
                "Build new tensors instead (`x = x - mean`, not `x -= mean`; avoid methods ending in `_`).",
            )
        return CheckResult(
            exercise.name,
            CORRECT,
            f"✅ Correct: `{exercise.name}` matches the reference on all {len(cases)} test cases.",
        )

    for mistake in exercise.mistakes:
        if _matches(exercise, learner, _mistake_outcomes(exercise.name)[mistake.name]):
            return CheckResult(
                exercise.name,
                WRONG,
                f"❌ Wrong: looks like {mistake.name}. Hint: {mistake.hint}",
                mistake=mistake.name,
            )

    index = next(i for i, problem in enumerate(problems) if problem)
    case = cases[index]
    return CheckResult(
        exercise.name,
        WRONG,
        f"❌ Wrong on test case {index + 1} of {len(cases)} ({case.label}).\n"
        f"Inputs: {_describe_arguments(case.args, names)}.\n{problems[index]}",
    )


def _call(fn, args: tuple, names: list[str]) -> _Outcome:
    """Call ``fn`` on a deep copy of ``args``; catch what it raises; note an input it changed."""
    fresh = copy.deepcopy(args)
    try:
        outcome = _Outcome(value=fn(*fresh))
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # even SystemExit: a learner's `exit()` must not end the check
        outcome = _Outcome(error=error)
    for name, before, after in zip(names, args, fresh, strict=False):  # names also lists omitted optional arguments
        if not _same_input(before, after):
            outcome.changed_argument = name
            break
    return outcome


def _same_input(before, after) -> bool:
    try:
        if isinstance(before, torch.Tensor):
            return isinstance(after, torch.Tensor) and before.shape == after.shape and torch.equal(before, after)
        return bool(before == after)
    except Exception:
        return False


def _matches(exercise: Exercise, learner: list[_Outcome], wrong: list[_Outcome]) -> bool:
    """True when the mistake explains the learner's outcome on every case, with at least one equal output."""
    equal_outputs = 0
    for mine, theirs in zip(learner, wrong, strict=True):
        if mine.error is not None or theirs.error is not None:
            if not _same_failure(mine.error, theirs.error):
                return False
            continue
        if not _same_output(exercise, mine.value, theirs.value):
            return False
        equal_outputs += 1
    return equal_outputs > 0


def _same_failure(mine: BaseException | None, theirs: BaseException | None) -> bool:
    """Both calls failed the same way: the same exception type, or both a shape error from PyTorch or the package.

    A missing part (``NotImplementedError``) or a wrong signature (``TypeError``) never passes for a shape error.
    """
    if mine is None or theirs is None or isinstance(mine, NotImplementedError):
        return False
    return type(mine) is type(theirs) or (isinstance(mine, _SHAPE_ERRORS) and isinstance(theirs, _SHAPE_ERRORS))


def _same_output(exercise: Exercise, value, other) -> bool:
    if exercise.outputs:
        if not isinstance(value, (tuple, list)) or len(value) != len(other):
            return False
        return all(_same_value(exercise, v, o) for v, o in zip(value, other, strict=True))
    return _same_value(exercise, value, other)


def _same_value(exercise: Exercise, value, other) -> bool:
    """Equal values (within the exercise's tolerance; NaN equals NaN), whatever the dtypes."""
    if isinstance(other, torch.Tensor):
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(other.shape):
            return False
        if value.dtype.is_complex:
            return False
        a, b = value.detach().cpu().double(), other.detach().cpu().double()
        return bool(torch.allclose(a, b, atol=exercise.atol, rtol=exercise.rtol, equal_nan=True))
    return _is_int(value) and int(value) == other


def _case_problem(exercise: Exercise, outcome: _Outcome, expected) -> str | None:
    """What is wrong with one case's outcome, in plain words; None when it is right."""
    if outcome.error is not None:
        return _error_problem(outcome.error)
    value = outcome.value
    if exercise.outputs:
        names = ", ".join(exercise.outputs)
        if not isinstance(value, (tuple, list)):
            return f"Your function returned {_kind(value)}; expected a tuple ({names})."
        if len(value) != len(expected):
            return (
                f"Your function returned a {type(value).__name__} of {_items(len(value))}; "
                f"expected {len(expected)}: ({names})."
            )
        for name, item, exp in zip(exercise.outputs, value, expected, strict=True):
            problem = _value_problem(exercise, f"`{name}`", item, exp)
            if problem:
                return problem
        return None
    if isinstance(expected, int):
        return _count_problem(value, expected)
    return _value_problem(exercise, "Your output", value, expected)


def _value_problem(exercise: Exercise, subject: str, value, expected: torch.Tensor) -> str | None:
    if not isinstance(value, torch.Tensor):
        return _type_problem(subject, value, "a torch.Tensor")
    if tuple(value.shape) != tuple(expected.shape):
        return f"{subject} has shape {tuple(value.shape)}; expected {tuple(expected.shape)}."
    value = value.detach().cpu()
    if value.dtype != expected.dtype:
        return _dtype_problem(exercise, subject, value, expected)
    if value.dtype.is_floating_point:
        for bad, test in (("NaN", torch.isnan), ("inf", torch.isinf)):
            count = int(test(value).sum())
            if count and not bool(test(expected).any()):
                return f"{subject} contains {bad} in {count} of {value.numel()} entries; the right answer has none."
    if _same_value(exercise, value, expected):
        return None
    if value.dtype == torch.bool:
        differ = value != expected
        first = tuple(differ.nonzero()[0].tolist())
        return (
            f"{subject} differs in {int(differ.sum())} of {value.numel()} entries; the first is at index "
            f"{_index(first)}: expected {bool(expected[first])}, got {bool(value[first])}."
        )
    difference = (value.double() - expected.double()).abs()
    difference = torch.nan_to_num(difference, nan=math.inf)
    where = _index(torch.unravel_index(difference.argmax(), difference.shape))
    return (
        f"{subject} has the right shape but wrong values: the largest absolute difference is "
        f"{float(difference.max()):.3g}, at index {where}."
    )


def _dtype_problem(exercise: Exercise, subject: str, value: torch.Tensor, expected: torch.Tensor) -> str:
    same_values = not value.dtype.is_complex and _same_value(exercise, value, expected)
    start = f"{subject} has the right values but dtype" if same_values else f"{subject} has dtype"
    if expected.dtype == torch.bool:
        return (
            f"{start} {value.dtype}; a mask must be boolean (torch.bool, True = may attend). "
            "Comparisons such as `<` give booleans directly."
        )
    return f"{start} {value.dtype}; expected {expected.dtype}."


def _count_problem(value, expected: int) -> str | None:
    if isinstance(value, torch.Tensor):
        return "Your count is a tensor; return a Python int (`.item()` converts a one-element tensor)."
    if not _is_int(value):
        return _type_problem("Your count", value, "an int")
    if int(value) == expected:
        return None
    return f"Your count is {int(value):,}; expected {expected:,} (off by {int(value) - expected:+,})."


def _type_problem(subject: str, value, wanted: str) -> str:
    if value is None:
        return f"{subject} is None: did you forget to `return` it?"
    if type(value).__module__ == "numpy":
        return f"{subject} is a NumPy {type(value).__name__}; expected {wanted}. Stay with torch operations."
    if inspect.isgenerator(value):
        return f"{subject} is a generator; expected {wanted}. Did you write `yield` instead of `return`?"
    return f"{subject} is {_kind(value)}; expected {wanted}."


_ERROR_HINTS = (
    (
        "view size is not compatible",
        "`.view` needs a contiguous tensor; after a transpose use `.reshape(...)` instead.",
    ),
    (
        "shapes cannot be multiplied",
        "print the shapes of both sides of each `@`: which one comes first, and does one need a transpose?",
    ),
    (
        "positional argument",
        "your function must take the arguments the exercise describes, in that order; an optional one "
        "(like `mask=None`) needs a default value.",
    ),
    (
        "must match the size of tensor",
        "two tensors do not broadcast together: print their shapes just before that line.",
    ),
)


def _error_problem(error: BaseException) -> str:
    if isinstance(error, NotImplementedError):
        return "Your function still raises NotImplementedError for this case."
    first_line = _first_line(error)
    text = f"Your function raised {type(error).__name__}: {first_line}{_learner_line(error)}"
    hints = [hint for pattern, hint in _ERROR_HINTS if pattern in first_line]
    return text + (f"\nHint: {hints[0]}" if hints else "")


def _learner_line(error: BaseException) -> str:
    """' (line 3: `scores = q @ k`)' for the last line of the learner's code in the traceback, else ''."""
    frames = [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not os.path.abspath(frame.filename).startswith(_LIBRARY_DIRS)
    ]
    if not frames or not frames[-1].line:
        return ""
    return f" (line {frames[-1].lineno}: `{frames[-1].line.strip()}`)"


def _first_line(error: BaseException) -> str:
    try:
        lines = str(error).strip().splitlines()
    except Exception:
        return "(no message)"
    text = lines[0] if lines else "(no message)"
    return text if len(text) <= 200 else text[:197] + "..."


def _describe_arguments(args: tuple, names: list[str]) -> str:
    return ", ".join(f"{name} {_describe_input(value)}" for name, value in zip(names, args, strict=False))


def _describe_input(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{tuple(value.shape)}" + (" bool" if value.dtype == torch.bool else "")
    if isinstance(value, (int, float)):
        return f"= {value!r}"
    return f"= a {type(value).__name__}"


def _kind(value) -> str:
    """'None', 'a list', 'a str' ...: the type of a learner's value, never its (possibly huge) repr."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _items(count: int) -> str:
    return f"{count} item" if count == 1 else f"{count} items"


def _index(index) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


# ---------------------------------------------------------------------------------------------
# The catalogue: cases and known mistakes, exercise by exercise, in course order.
# Each mistake function is the wrong code a learner writes, kept as small as possible.
# ---------------------------------------------------------------------------------------------


def _randn(g: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=torch.float32) * scale


def _weights(g: torch.Generator, d_in: int, d_out: int) -> torch.Tensor:
    return _randn(g, d_in, d_out, scale=d_in**-0.5)  # keeps activations near unit variance


def _random_mask(g: torch.Generator, *shape: int) -> torch.Tensor:
    """A random bool mask in which every row allows its first key and blocks its last one."""
    mask = torch.rand(*shape, generator=g) < 0.5
    mask[..., 0] = True
    mask[..., -1] = False
    return mask


# --- 01: Q, K, V projections ------------------------------------------------------------------


def _qkv_cases(g):
    return [
        Case("one sentence of 5 tokens, d_model 8, d_k 4, d_v 6", (_randn(g, 5, 8), *_qkv_weights(g, 8, 4, 6))),
        Case("a batch of 2 sentences", (_randn(g, 2, 5, 8), *_qkv_weights(g, 8, 4, 6))),
        Case("odd sizes with square weights, d_model = d_k = d_v = 7", (_randn(g, 3, 5, 7), *_qkv_weights(g, 7, 7, 7))),
    ]


def _qkv_weights(g, d_model, d_k, d_v):
    return _weights(g, d_model, d_k), _weights(g, d_model, d_k), _weights(g, d_model, d_v)


def _qkv_weights_transposed(x, w_q, w_k, w_v):
    return x @ w_q.T, x @ w_k.T, x @ w_v.T


def _qkv_k_and_v_swapped(x, w_q, w_k, w_v):
    return x @ w_q, x @ w_v, x @ w_k


def _qkv_q_and_k_swapped(x, w_q, w_k, w_v):
    return x @ w_k, x @ w_q, x @ w_v


def _qkv_one_weight_for_all(x, w_q, w_k, w_v):
    return x @ w_q, x @ w_q, x @ w_q


# --- 01: attention scores ---------------------------------------------------------------------


def _scores_cases(g):
    return [
        Case("one sentence: 4 queries, 6 keys, d_k 8", (_randn(g, 4, 8), _randn(g, 6, 8))),
        Case("batch of 2, 3 heads", (_randn(g, 2, 3, 4, 8), _randn(g, 2, 3, 6, 8))),
        Case("square: 5 queries, 5 keys, d_k 5", (_randn(g, 2, 5, 5), _randn(g, 2, 5, 5))),
    ]


def _scores_keys_not_transposed(q, k):
    return q @ k


def _scores_keys_times_queries(q, k):
    return k @ q.transpose(-2, -1)


def _scores_already_scaled(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def _scores_all_axes_reversed(q, k):
    return q @ _reverse_axes(k)


def _reverse_axes(x):
    return x.permute(*reversed(range(x.dim())))  # what `x.T` does to a tensor of any rank


# --- 02: scaled dot-product attention ---------------------------------------------------------


def _sdpa_cases(g):
    return [
        Case("one sentence, no mask: 4 queries, 6 keys, d_k 8", (_randn(g, 4, 8), _randn(g, 6, 8), _randn(g, 6, 5))),
        Case(
            "batch of 2 with a padding mask (lengths 4 and 3)",
            (
                _randn(g, 2, 5, 8),
                _randn(g, 2, 6, 8),
                _randn(g, 2, 6, 5),
                padding_mask(torch.tensor([4, 3]), 6)[:, None],
            ),
        ),
        Case(
            "batch of 2, 2 heads, square (6 queries, 6 keys, d_k 6), random mask",
            (_randn(g, 2, 2, 6, 6), _randn(g, 2, 2, 6, 6), _randn(g, 2, 2, 6, 3), _random_mask(g, 2, 1, 6, 6)),
        ),
    ]


def _softmax_attend(scores, v, mask=None, dim=-1):
    """Mask the scores, softmax along ``dim``, weight the values: the shared tail of the variants below."""
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=dim)
    return weights @ v, weights


def _sdpa_no_scaling(q, k, v, mask=None):
    return _softmax_attend(q @ k.transpose(-2, -1), v, mask)


def _sdpa_scaled_by_d_k(q, k, v, mask=None):
    return _softmax_attend(q @ k.transpose(-2, -1) / q.shape[-1], v, mask)


def _sdpa_multiplied_by_sqrt_d_k(q, k, v, mask=None):
    return _softmax_attend(q @ k.transpose(-2, -1) * math.sqrt(q.shape[-1]), v, mask)


def _sdpa_softmax_over_queries(q, k, v, mask=None):
    return _softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v, mask, dim=-2)


def _sdpa_keys_not_transposed(q, k, v, mask=None):
    return _softmax_attend(q @ k / math.sqrt(q.shape[-1]), v, mask)


def _sdpa_all_axes_reversed(q, k, v, mask=None):
    return _softmax_attend(q @ _reverse_axes(k) / math.sqrt(q.shape[-1]), v, mask)


def _sdpa_mask_ignored(q, k, v, mask=None):
    return _softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v)


def _sdpa_mask_inverted(q, k, v, mask=None):
    return _softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v, None if mask is None else ~mask)


def _sdpa_masked_scores_zero(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)
    return _softmax_attend(scores, v)


def _sdpa_mask_after_softmax(q, k, v, mask=None):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        weights = weights * mask
    return weights @ v, weights


# --- 03: masks --------------------------------------------------------------------------------


def _padding_cases(g):
    return [
        Case("3 sentences of lengths 3, 5, 1, max_len 7", (torch.tensor([3, 5, 1]), 7)),
        Case("the longest sentence fills max_len: lengths 4, 2, max_len 4", (torch.tensor([4, 2]), 4)),
        Case("an empty sentence: lengths 0, 2, max_len 3", (torch.tensor([0, 2]), 3)),
    ]


def _padding_inverted(lengths, max_len):
    return torch.arange(max_len)[None, :] >= lengths[:, None]


def _padding_off_by_one(lengths, max_len):
    return torch.arange(max_len)[None, :] <= lengths[:, None]


def _padding_axes_swapped(lengths, max_len):
    return torch.arange(max_len)[:, None] < lengths[None, :]


def _padding_max_len_ignored(lengths, max_len):
    return torch.arange(int(lengths.max()))[None, :] < lengths[:, None]


def _causal_cases(g):
    return [Case("4 tokens", (4,)), Case("a single token", (1,)), Case("7 tokens", (7,))]


def _causal_upper_triangle(seq_len):
    return torch.ones(seq_len, seq_len, dtype=torch.bool).triu()


def _causal_diagonal_masked(seq_len):
    return torch.ones(seq_len, seq_len, dtype=torch.bool).tril(diagonal=-1)


def _causal_inverted(seq_len):
    return torch.ones(seq_len, seq_len, dtype=torch.bool).triu(diagonal=1)


def _causal_additive(seq_len):
    allowed = torch.ones(seq_len, seq_len, dtype=torch.bool).tril()
    return torch.zeros(seq_len, seq_len).masked_fill(~allowed, -math.inf)


# --- 04: sinusoidal position encoding ---------------------------------------------------------


def _sinusoid_cases(g):
    return [
        Case("10 positions, d_model 16", (10, 16)),
        Case("odd length: 7 positions, d_model 6", (7, 6)),
        Case("one position, d_model 4", (1, 4)),
        Case("50 positions, d_model 32", (50, 32)),
    ]


def _interleave(even: torch.Tensor, odd: torch.Tensor) -> torch.Tensor:
    """(max_len, d/2) and (max_len, d/2) -> (max_len, d) with ``even`` in columns 0, 2, ... and ``odd`` in 1, 3, ..."""
    return torch.stack([even, odd], dim=-1).flatten(start_dim=-2)


def _pair_index(d_model):
    return torch.arange(d_model // 2, dtype=torch.float32)  # i = 0, 1, ..., d/2 - 1


def _sinusoid_sin_cos_swapped(max_len, d_model):
    angle = torch.arange(max_len)[:, None] / 10000 ** (2 * _pair_index(d_model) / d_model)
    return _interleave(torch.cos(angle), torch.sin(angle))


def _sinusoid_i_instead_of_2i(max_len, d_model):
    angle = torch.arange(max_len)[:, None] / 10000 ** (_pair_index(d_model) / d_model)
    return _interleave(torch.sin(angle), torch.cos(angle))


def _sinusoid_exponent_not_divided(max_len, d_model):
    angle = torch.arange(max_len)[:, None] / 10000 ** (2 * _pair_index(d_model))
    return _interleave(torch.sin(angle), torch.cos(angle))


def _sinusoid_exponent_sign(max_len, d_model):
    angle = torch.arange(max_len)[:, None] * 10000 ** (2 * _pair_index(d_model) / d_model)
    return _interleave(torch.sin(angle), torch.cos(angle))


def _sinusoid_positions_from_1(max_len, d_model):
    angle = torch.arange(1, max_len + 1)[:, None] / 10000 ** (2 * _pair_index(d_model) / d_model)
    return _interleave(torch.sin(angle), torch.cos(angle))


def _sinusoid_halves(max_len, d_model):
    angle = torch.arange(max_len)[:, None] / 10000 ** (2 * _pair_index(d_model) / d_model)
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)


# --- 05: multi-head attention -----------------------------------------------------------------


def _split_cases(g):
    return [
        Case("batch of 2, 6 tokens, d_model 12, 3 heads", (_randn(g, 2, 6, 12), 3)),
        Case("one sentence of 5 tokens, d_model 8, 2 heads", (_randn(g, 1, 5, 8), 2)),
        Case("odd sizes: 7 tokens, d_model 10, 5 heads of 2", (_randn(g, 3, 7, 10), 5)),
    ]


def _split_no_transpose(x, num_heads):
    batch, seq, d_model = x.shape
    return x.view(batch, seq, num_heads, d_model // num_heads)


def _split_plain_view(x, num_heads):
    batch, seq, d_model = x.shape
    return x.view(batch, num_heads, seq, d_model // num_heads)


def _split_sequence_axis(x, num_heads):
    batch, seq, d_model = x.shape
    return x.reshape(batch, num_heads, seq // num_heads, d_model)


def _split_interleaved(x, num_heads):
    batch, seq, d_model = x.shape
    return x.view(batch, seq, d_model // num_heads, num_heads).permute(0, 3, 1, 2)


def _merge_cases(g):
    return [
        Case("batch of 2, 3 heads, 5 tokens, d_head 4", (_randn(g, 2, 3, 5, 4),)),
        Case("one sentence, 2 heads, 3 tokens, d_head 2", (_randn(g, 1, 2, 3, 2),)),
        Case("as many heads as tokens: 4 heads, 4 tokens, d_head 3", (_randn(g, 2, 4, 4, 3),)),
    ]


def _merge_no_transpose(x):
    batch, heads, seq, d_head = x.shape
    return x.reshape(batch, seq, heads * d_head)


def _merge_heads_summed(x):
    return x.sum(dim=1)


def _merge_interleaved(x):
    batch, heads, seq, d_head = x.shape
    return x.permute(0, 2, 3, 1).reshape(batch, seq, heads * d_head)


def _mha_cases(g):
    return [
        Case("batch of 2, 5 tokens, d_model 8, 2 heads, no mask", (_randn(g, 2, 5, 8), *_mha_weights(g, 8), 2)),
        Case(
            "batch of 2, 6 tokens, d_model 12, 3 heads, padding mask (lengths 6 and 4)",
            (_randn(g, 2, 6, 12), *_mha_weights(g, 12), 3, padding_mask(torch.tensor([6, 4]), 6)[:, None, None, :]),
        ),
        Case(
            "one sentence of 4 tokens, d_model 6, 3 heads of 2, causal mask",
            (_randn(g, 1, 4, 6), *_mha_weights(g, 6), 3, causal_mask(4)),
        ),
    ]


def _mha_weights(g, d_model):
    return tuple(_weights(g, d_model, d_model) for _ in range(4))


def _mha_heads(x, w_q, w_k, w_v, num_heads):
    return (split_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))  # 3 x (batch, heads, seq, d_head)


def _mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q, k, v = _mha_heads(x, w_q, w_k, w_v, num_heads)
    return merge_heads(scaled_dot_product_attention(q, k, v, mask)[0])


def _mha_scaled_by_sqrt_d_model(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q, k, v = _mha_heads(x, w_q, w_k, w_v, num_heads)
    context, _ = _softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1]), v, mask)
    return merge_heads(context) @ w_o


def _mha_split_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    batch, seq, d_model = x.shape
    q, k, v = ((x @ w).view(batch, seq, num_heads, d_model // num_heads) for w in (w_q, w_k, w_v))
    context, _ = _softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(d_model // num_heads), v, mask)
    return context.reshape(batch, seq, d_model) @ w_o


def _mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q, k, v = _mha_heads(x, w_q, w_k, w_v, num_heads)
    context, _ = scaled_dot_product_attention(q, k, v, mask)  # (batch, heads, seq, d_head)
    return context.reshape(x.shape) @ w_o


def _mha_mask_ignored(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q, k, v = _mha_heads(x, w_q, w_k, w_v, num_heads)
    return merge_heads(scaled_dot_product_attention(q, k, v)[0]) @ w_o


# --- 06: LayerNorm and the feed-forward block -------------------------------------------------


def _layer_norm_cases(g):
    return [
        Case("one sentence of 5 tokens, d 8, eps 1e-12", (_randn(g, 5, 8, scale=3.0) + 2.0, *_ln_params(g, 8), 1e-12)),
        Case("batch of 2, odd width d 7, eps 1e-5", (_randn(g, 2, 4, 7, scale=3.0) - 1.0, *_ln_params(g, 7), 1e-5)),
        Case("a large eps = 0.5, so where eps goes matters", (_randn(g, 3, 6), *_ln_params(g, 6), 0.5)),
    ]


def _ln_params(g, d):
    return 1.0 + _randn(g, d, scale=0.5), _randn(g, d, scale=0.5)  # gamma, beta


def _ln_over_batch(x, weight, bias, eps):
    mean = x.mean(dim=0, keepdim=True)
    variance = x.var(dim=0, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(variance + eps) * weight + bias


def _ln_unbiased_variance(x, weight, bias, eps):
    mean = x.mean(dim=-1, keepdim=True)
    variance = x.var(dim=-1, keepdim=True)  # unbiased: divides by d - 1
    return (x - mean) / torch.sqrt(variance + eps) * weight + bias


def _ln_eps_outside_sqrt(x, weight, bias, eps):
    mean = x.mean(dim=-1, keepdim=True)
    variance = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / (torch.sqrt(variance) + eps) * weight + bias


def _ln_eps_ignored(x, weight, bias, eps):
    mean = x.mean(dim=-1, keepdim=True)
    variance = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(variance) * weight + bias


def _ln_no_gamma_beta(x, weight, bias, eps):
    mean = x.mean(dim=-1, keepdim=True)
    variance = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(variance + eps)


def _ffn_cases(g):
    grid = torch.linspace(-4.0, 4.0, 17, dtype=torch.float32)[
        None, :
    ]  # (1, 17): GELU's tanh approximation is off by 5e-4 near 2.7
    identity = torch.eye(17, dtype=torch.float32)
    return [
        Case("one sentence of 5 tokens, d_model 6, d_ff 24", (_randn(g, 5, 6), *_ffn_params(g, 6, 24))),
        Case("batch of 2, odd sizes d_model 5, d_ff 7", (_randn(g, 2, 3, 5), *_ffn_params(g, 5, 7))),
        Case(
            "identity weights and zero biases: the activation itself on -4 ... 4",
            (
                grid,
                identity,
                torch.zeros(17, dtype=torch.float32),
                identity.clone(),
                torch.zeros(17, dtype=torch.float32),
            ),
        ),
    ]


def _ffn_params(g, d_model, d_ff):
    return _weights(g, d_model, d_ff), _randn(g, d_ff), _weights(g, d_ff, d_model), _randn(g, d_model)


def _ffn_relu(x, w1, b1, w2, b2):
    return torch.relu(x @ w1 + b1) @ w2 + b2


def _ffn_tanh_gelu(x, w1, b1, w2, b2):
    return F.gelu(x @ w1 + b1, approximate="tanh") @ w2 + b2


def _ffn_no_biases(x, w1, b1, w2, b2):
    return gelu(x @ w1) @ w2


def _ffn_gelu_after_output(x, w1, b1, w2, b2):
    return gelu(gelu(x @ w1 + b1) @ w2 + b2)


# --- 07: the full BERT ------------------------------------------------------------------------


def _embedding_cases(g):
    return [
        Case(
            "batch of 2, 5 tokens, two segments, hidden 8",
            (
                torch.randint(0, 20, (2, 5), generator=g),
                torch.tensor([[0, 0, 0, 1, 1], [0, 0, 1, 1, 1]]),
                *_embedding_tables(g, 8, segments=2),
                1e-12,
            ),
        ),
        Case(
            "one sentence of 7 tokens, one segment, hidden 8",
            (
                torch.randint(0, 20, (1, 7), generator=g),
                torch.zeros(1, 7, dtype=torch.long),
                *_embedding_tables(g, 8, 2),
                1e-12,
            ),
        ),
        Case(
            "batch of 3, 4 tokens, odd width 6, three segment types",
            (
                torch.randint(0, 20, (3, 4), generator=g),
                torch.randint(0, 3, (3, 4), generator=g),
                *_embedding_tables(g, 6, segments=3),
                1e-12,
            ),
        ),
    ]


def _embedding_tables(g, hidden, segments):
    """word (20, hidden), position (10, hidden), token type (segments, hidden), LayerNorm gamma and beta."""
    return (
        _randn(g, 20, hidden),
        _randn(g, 10, hidden),
        _randn(g, segments, hidden),
        *_ln_params(g, hidden),
    )


def _embeddings_no_positions(input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps):
    return layer_norm(word[input_ids] + token_type[token_type_ids], ln_weight, ln_bias, eps)


def _embeddings_no_token_types(input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps):
    seq_len = input_ids.shape[1]
    return layer_norm(word[input_ids] + position[:seq_len], ln_weight, ln_bias, eps)


def _embeddings_no_layer_norm(input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps):
    seq_len = input_ids.shape[1]
    return word[input_ids] + position[:seq_len] + token_type[token_type_ids]


def _embeddings_sinusoidal(input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps):
    seq_len, hidden = input_ids.shape[1], word.shape[1]
    summed = word[input_ids] + sinusoidal_position_encoding(seq_len, hidden) + token_type[token_type_ids]
    return layer_norm(summed, ln_weight, ln_bias, eps)


def _embeddings_positions_from_1(input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps):
    seq_len = input_ids.shape[1]
    summed = word[input_ids] + position[1 : seq_len + 1] + token_type[token_type_ids]
    return layer_norm(summed, ln_weight, ln_bias, eps)


def _count_cases(g):
    tiny = BertConfig(
        vocab_size=100,
        hidden_size=12,
        num_hidden_layers=3,
        num_attention_heads=3,
        intermediate_size=20,
        max_position_embeddings=16,
        type_vocab_size=3,
    )
    return [
        Case("BERT-base", (BertConfig.bert_base(),)),
        Case("MiniLM-L6: 6 layers, hidden 384", (BertConfig.minilm_l6(),)),
        Case("a tiny config: vocab 100, hidden 12, 3 layers, FFN 20, 16 positions, 3 segment types", (tiny,)),
    ]


def _count_without(config: BertConfig, word: str) -> int:
    """The total without the parts of ``parameter_breakdown`` whose name contains ``word``."""
    return sum(count for part, count in parameter_breakdown(config).items() if word not in part)


def _count_no_biases(config):
    d, d_ff = config.hidden_size, config.intermediate_size
    biases_per_layer = 4 * d + d_ff + d  # Q, K, V, W_O; FFN in and out
    return count_parameters(config) - config.num_hidden_layers * biases_per_layer - d  # and the pooler's


def _count_no_layer_norm(config):
    return _count_without(config, "LayerNorm")


def _count_no_pooler(config):
    return _count_without(config, "pooler")


def _count_no_token_types(config):
    return _count_without(config, "token type")


def _count_one_layer(config):
    return count_parameters(dataclasses.replace(config, num_hidden_layers=1))


def _count_ffn_square(config):
    return count_parameters(dataclasses.replace(config, intermediate_size=config.hidden_size))


_BATCHED_TRANSPOSE_HINT = (
    "your code works for one matrix but not for a batch: `.T`, `.t()` and `torch.mm` are meant for 2-D "
    "matrices; `k.transpose(-2, -1)` and `@` work whatever the batch axes in front."
)

# --- the registry ------------------------------------------------------------------------------

EXERCISES: dict[str, Exercise] = {
    exercise.name: exercise
    for exercise in (
        Exercise(
            name="qkv_projection",
            reference=qkv_projection,
            prompt="your function receives `x` (..., seq, d_model) and three matrices `w_q`, `w_k` (d_model, d_k) "
            "and `w_v` (d_model, d_v); it returns the tuple `(q, k, v)` with `q = x @ w_q` and so on.",
            start="`q = x @ w_q`, then the same for `k` and `v`.",
            make_cases=_qkv_cases,
            outputs=("q", "k", "v"),
            mistakes=(
                Mistake(
                    "the weights transposed (`x @ w.T`)",
                    "the matrices here are stored as (d_model, d_k): use `x @ w_q` as it is. "
                    "(`nn.Linear` stores the transpose and computes `x @ W.T`.)",
                    _qkv_weights_transposed,
                ),
                Mistake(
                    "K and V swapped",
                    "the keys come from `w_k` and the values from `w_v`; return them in the order (q, k, v).",
                    _qkv_k_and_v_swapped,
                ),
                Mistake(
                    "Q and K swapped",
                    "the queries come from `w_q` and the keys from `w_k`; return them in the order (q, k, v).",
                    _qkv_q_and_k_swapped,
                ),
                Mistake(
                    "one matrix used for all three projections",
                    "each projection has its own matrix: `x @ w_q`, `x @ w_k`, `x @ w_v`.",
                    _qkv_one_weight_for_all,
                ),
            ),
        ),
        Exercise(
            name="attention_scores",
            reference=attention_scores,
            prompt="your function receives queries `q` (..., q_len, d_k) and keys `k` (..., k_len, d_k); it returns "
            "the raw scores `q @ kᵀ` of shape (..., q_len, k_len), without any scaling.",
            start="`k.transpose(-2, -1)` swaps the last two axes of `k`.",
            make_cases=_scores_cases,
            mistakes=(
                Mistake(
                    "the keys not transposed (`q @ k`)",
                    "each query is dotted with each key, so the keys need their last two axes swapped: "
                    "`q @ k.transpose(-2, -1)`.",
                    _scores_keys_not_transposed,
                ),
                Mistake(
                    "keys times queries (`k @ qᵀ`)",
                    "rows are queries and columns are keys: put `q` first, `q @ k.transpose(-2, -1)`.",
                    _scores_keys_times_queries,
                ),
                Mistake(
                    "scores already scaled by √d_k",
                    "this exercise asks for the raw scores; the division by √d_k comes in the next notebook.",
                    _scores_already_scaled,
                ),
                Mistake(
                    "a transpose for 2-D matrices only (`k.T`)",
                    _BATCHED_TRANSPOSE_HINT,
                    _scores_all_axes_reversed,
                ),
            ),
        ),
        Exercise(
            name="scaled_dot_product_attention",
            reference=scaled_dot_product_attention,
            prompt="your function receives `q` (..., q_len, d_k), `k` (..., k_len, d_k), `v` (..., k_len, d_v) and an "
            "optional boolean `mask` that broadcasts to (..., q_len, k_len), True = may attend; it returns the tuple "
            "`(output, weights)`: `weights = softmax(q @ kᵀ / √d_k)` over the keys (masked keys get weight 0), "
            "shape (..., q_len, k_len), and `output = weights @ v`, shape (..., q_len, d_v).",
            start="`scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])`.",
            make_cases=_sdpa_cases,
            outputs=("output", "weights"),
            extra_solution=(_teaching_attention,),
            mistakes=(
                Mistake(
                    "no scaling",
                    "divide the scores by √d_k (`math.sqrt(q.shape[-1])`) before the softmax.",
                    _sdpa_no_scaling,
                ),
                Mistake(
                    "scaling by d_k instead of √d_k",
                    "divide by the square root of d_k: `math.sqrt(q.shape[-1])`.",
                    _sdpa_scaled_by_d_k,
                ),
                Mistake(
                    "multiplying by √d_k instead of dividing",
                    "the scores are divided by √d_k, which makes them smaller.",
                    _sdpa_multiplied_by_sqrt_d_k,
                ),
                Mistake(
                    "the softmax over the wrong axis",
                    "each query's weights over the keys must sum to 1: `torch.softmax(scores, dim=-1)`.",
                    _sdpa_softmax_over_queries,
                ),
                Mistake(
                    "the keys not transposed",
                    "the scores are `q @ k.transpose(-2, -1)`, shape (..., q_len, k_len).",
                    _sdpa_keys_not_transposed,
                ),
                Mistake(
                    "a transpose for 2-D matrices only (`k.T`)",
                    _BATCHED_TRANSPOSE_HINT,
                    _sdpa_all_axes_reversed,
                ),
                Mistake(
                    "the mask ignored",
                    "where `mask` is False, set the score to a very negative number before the softmax: "
                    "`scores.masked_fill(~mask, torch.finfo(scores.dtype).min)`.",
                    _sdpa_mask_ignored,
                ),
                Mistake(
                    "the mask inverted",
                    "in this course True means *may attend*: fill the scores where the mask is False, with `~mask`.",
                    _sdpa_mask_inverted,
                ),
                Mistake(
                    "masked scores set to 0",
                    "a score of 0 still gets weight after the softmax (exp(0) = 1); fill masked scores with "
                    "`torch.finfo(scores.dtype).min` instead.",
                    _sdpa_masked_scores_zero,
                ),
                Mistake(
                    "the mask applied after the softmax",
                    "zeroing weights after the softmax leaves rows that no longer sum to 1; mask the scores "
                    "before the softmax.",
                    _sdpa_mask_after_softmax,
                ),
            ),
        ),
        Exercise(
            name="padding_mask",
            reference=padding_mask,
            prompt="your function receives `lengths`, a 1-D long tensor with one sentence length per row, and an int "
            "`max_len`; it returns a bool tensor (batch, max_len) that is True at real tokens (position < length) "
            "and False at padding.",
            start="`torch.arange(max_len)` gives the positions 0, 1, ..., max_len - 1; compare them with "
            "`lengths[:, None]`.",
            make_cases=_padding_cases,
            mistakes=(
                Mistake(
                    "the mask inverted (True = padding)",
                    "in this course True means *may attend*: real tokens are True, padding is False.",
                    _padding_inverted,
                ),
                Mistake(
                    "an off-by-one (`<=`)",
                    "positions start at 0, so a sentence of length n covers positions 0 ... n - 1: use `<`.",
                    _padding_off_by_one,
                ),
                Mistake(
                    "the axes swapped, (max_len, batch)",
                    "one row per sentence: compare `positions[None, :]` with `lengths[:, None]`.",
                    _padding_axes_swapped,
                ),
                Mistake(
                    "`max_len` ignored",
                    "the mask must have `max_len` columns, even when every sentence is shorter.",
                    _padding_max_len_ignored,
                ),
            ),
        ),
        Exercise(
            name="causal_mask",
            reference=causal_mask,
            prompt="your function receives `seq_len`, an int; it returns a bool tensor (seq_len, seq_len) in which "
            "query i may attend to keys 0 ... i: True on and below the diagonal.",
            start="`torch.ones(seq_len, seq_len, dtype=torch.bool)`, then keep its lower triangle with `torch.tril`.",
            make_cases=_causal_cases,
            mistakes=(
                Mistake(
                    "the upper triangle",
                    "query i (row i) may look back at keys 0 ... i, the lower triangle: `torch.tril`.",
                    _causal_upper_triangle,
                ),
                Mistake(
                    "the diagonal masked",
                    "every token may attend to itself: keep the diagonal (`torch.tril` with `diagonal=0`).",
                    _causal_diagonal_masked,
                ),
                Mistake(
                    "the mask inverted (True = future)",
                    "in this course True means *may attend*: the past and the token itself are True.",
                    _causal_inverted,
                ),
                Mistake(
                    "an additive mask (0 and -inf)",
                    "this course's masks are booleans, True = may attend; the -inf fill happens inside attention.",
                    _causal_additive,
                ),
            ),
        ),
        Exercise(
            name="sinusoidal_position_encoding",
            reference=sinusoidal_position_encoding,
            prompt="your function receives `max_len` and an even `d_model` (ints); it returns the float32 table "
            "(max_len, d_model) with `PE[pos, 2i] = sin(pos / 10000^(2i/d_model))` and "
            "`PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model))`, positions starting at 0.",
            start="positions `torch.arange(max_len)[:, None]` and even feature indices `torch.arange(0, d_model, 2)`.",
            make_cases=_sinusoid_cases,
            atol=1e-4,
            rtol=1e-4,
            mistakes=(
                Mistake(
                    "sin and cos swapped",
                    "even columns (0, 2, ...) hold the sines, odd columns the cosines.",
                    _sinusoid_sin_cos_swapped,
                ),
                Mistake(
                    "the exponent i/d_model instead of 2i/d_model",
                    "the exponent uses the even feature index 2i, as in `torch.arange(0, d_model, 2) / d_model`.",
                    _sinusoid_i_instead_of_2i,
                ),
                Mistake(
                    "the exponent not divided by d_model",
                    "the exponent is 2i / d_model, so the frequencies go from 1 down to about 1/10000.",
                    _sinusoid_exponent_not_divided,
                ),
                Mistake(
                    "multiplying by 10000^(2i/d_model) instead of dividing",
                    "the angle is pos / 10000^(2i/d_model): the frequencies shrink as i grows.",
                    _sinusoid_exponent_sign,
                ),
                Mistake(
                    "positions starting at 1",
                    "the first position is 0 (`torch.arange(max_len)`), so row 0 is sin 0 = 0, cos 0 = 1.",
                    _sinusoid_positions_from_1,
                ),
                Mistake(
                    "all sines first, then all cosines",
                    "interleave them: sines in the even columns `table[:, 0::2]`, cosines in the odd ones "
                    "`table[:, 1::2]`.",
                    _sinusoid_halves,
                ),
            ),
        ),
        Exercise(
            name="split_heads",
            reference=split_heads,
            prompt="your function receives `x` (batch, seq, d_model) and `num_heads`, which divides d_model; it "
            "returns (batch, num_heads, seq, d_head) with d_head = d_model // num_heads, head h holding features "
            "h * d_head ... (h + 1) * d_head - 1 of every token.",
            start="`x.view(batch, seq, num_heads, d_model // num_heads)`, then move the heads axis before seq.",
            make_cases=_split_cases,
            mistakes=(
                Mistake(
                    "a view without the transpose",
                    "after `x.view(batch, seq, num_heads, d_head)`, swap seq and heads with `.transpose(1, 2)`.",
                    _split_no_transpose,
                ),
                Mistake(
                    "a plain view to (batch, heads, seq, d_head)",
                    "the shape is right but tokens and features are scrambled: view as (batch, seq, heads, d_head) "
                    "first, then `.transpose(1, 2)`.",
                    _split_plain_view,
                ),
                Mistake(
                    "splitting the sequence axis",
                    "heads split the features (the last axis), not the tokens: every head sees every token.",
                    _split_sequence_axis,
                ),
                Mistake(
                    "interleaved heads, a view as (d_head, num_heads)",
                    "each head takes a contiguous slice of the features: view as (batch, seq, num_heads, d_head), "
                    "heads before d_head.",
                    _split_interleaved,
                ),
            ),
        ),
        Exercise(
            name="merge_heads",
            reference=merge_heads,
            prompt="your function receives `x` (batch, heads, seq, d_head); it returns (batch, seq, heads * d_head), "
            "each token's head outputs concatenated in head order: the inverse of `split_heads`.",
            start="undo `split_heads` in reverse order: `x.transpose(1, 2)` first, then `.reshape(...)`.",
            make_cases=_merge_cases,
            mistakes=(
                Mistake(
                    "a reshape without transposing back",
                    "bring seq before heads with `x.transpose(1, 2)` first, then "
                    "`.reshape(batch, seq, heads * d_head)`.",
                    _merge_no_transpose,
                ),
                Mistake(
                    "the heads summed instead of concatenated",
                    "the heads are put side by side (concatenated), which restores the width heads * d_head.",
                    _merge_heads_summed,
                ),
                Mistake(
                    "interleaved heads, d_head before heads",
                    "after the transpose the order is (batch, seq, heads, d_head): reshape that, without moving "
                    "d_head in front of heads.",
                    _merge_interleaved,
                ),
            ),
        ),
        Exercise(
            name="multi_head_attention",
            reference=multi_head_attention,
            prompt="your function receives `x` (batch, seq, d_model), four matrices `w_q`, `w_k`, `w_v`, `w_o` "
            "(d_model, d_model) used as `x @ w`, `num_heads`, and an optional bool `mask` broadcastable to "
            "(batch, heads, seq, seq), True = may attend; it returns (batch, seq, d_model): project, split into "
            "heads, attend in each head (scaled by √d_head), merge the heads, multiply by `w_o`.",
            start="`q = split_heads(x @ w_q, num_heads)`, and the same for k and v.",
            make_cases=_mha_cases,
            mistakes=(
                Mistake(
                    "no output projection W_O",
                    "after merging the heads, multiply by `w_o`: it mixes what the heads found.",
                    _mha_no_output_projection,
                ),
                Mistake(
                    "scaling by √d_model instead of √d_head",
                    "each head is an attention of width d_head = d_model // num_heads: divide by √d_head.",
                    _mha_scaled_by_sqrt_d_model,
                ),
                Mistake(
                    "splitting heads without the transpose",
                    "after `.view(batch, seq, num_heads, d_head)` use `.transpose(1, 2)`, so that each head attends "
                    "over the tokens, not over the other heads.",
                    _mha_split_without_transpose,
                ),
                Mistake(
                    "merging heads without the transpose",
                    "the context is (batch, heads, seq, d_head): `.transpose(1, 2)` before the reshape to "
                    "(batch, seq, d_model).",
                    _mha_merge_without_transpose,
                ),
                Mistake(
                    "the mask ignored",
                    "pass `mask` on to the attention of every head; it broadcasts over the heads axis.",
                    _mha_mask_ignored,
                ),
            ),
        ),
        Exercise(
            name="layer_norm",
            reference=layer_norm,
            prompt="your function receives `x` (..., d), `weight` (gamma) and `bias` (beta) of shape (d,) and a float "
            "`eps`; it returns (..., d): each vector normalised over its own d features to mean 0 and variance 1 "
            "(biased variance, eps inside the square root), times `weight`, plus `bias`.",
            start="`mean = x.mean(dim=-1, keepdim=True)`.",
            make_cases=_layer_norm_cases,
            mistakes=(
                Mistake(
                    "normalising over the batch",
                    "LayerNorm normalises each token over its features, the last axis: `dim=-1`, not `dim=0`.",
                    _ln_over_batch,
                ),
                Mistake(
                    "the unbiased variance",
                    "`x.var()` and `x.std()` divide by d - 1 by default; LayerNorm divides by d: "
                    "`x.var(dim=-1, keepdim=True, unbiased=False)`.",
                    _ln_unbiased_variance,
                ),
                Mistake(
                    "eps outside the square root",
                    "add eps to the variance, then take the root: `torch.sqrt(variance + eps)`.",
                    _ln_eps_outside_sqrt,
                ),
                Mistake(
                    "eps ignored",
                    "add `eps` to the variance before the square root; it keeps the division safe.",
                    _ln_eps_ignored,
                ),
                Mistake(
                    "forgetting gamma and beta",
                    "after normalising, scale and shift: `normalised * weight + bias`.",
                    _ln_no_gamma_beta,
                ),
            ),
        ),
        Exercise(
            name="feed_forward",
            reference=feed_forward,
            prompt="your function receives `x` (..., d_model), `w1` (d_model, d_ff), `b1` (d_ff,), `w2` "
            "(d_ff, d_model), `b2` (d_model,); it returns `GELU(x @ w1 + b1) @ w2 + b2`, shape (..., d_model), "
            "with the exact (erf) GELU.",
            start="`hidden = x @ w1 + b1`, then the exact GELU `torch.nn.functional.gelu(hidden)`.",
            make_cases=_ffn_cases,
            mistakes=(
                Mistake(
                    "ReLU instead of GELU",
                    "BERT uses GELU, `torch.nn.functional.gelu`, which is smooth and lets small negatives through.",
                    _ffn_relu,
                ),
                Mistake(
                    "the tanh approximation of GELU",
                    "BERT's GELU is the exact one, x·Φ(x) with erf: `F.gelu(h)`, without `approximate='tanh'`.",
                    _ffn_tanh_gelu,
                ),
                Mistake(
                    "missing biases",
                    "both linear maps have a bias: `x @ w1 + b1` and `hidden @ w2 + b2`.",
                    _ffn_no_biases,
                ),
                Mistake(
                    "GELU after the second layer too",
                    "the activation sits between the two linear maps only; the block ends with `@ w2 + b2`.",
                    _ffn_gelu_after_output,
                ),
            ),
        ),
        Exercise(
            name="bert_embeddings",
            reference=bert_embeddings,
            prompt="your function receives `input_ids` and `token_type_ids` (batch, seq) long, the tables "
            "`word_embeddings` (vocab, hidden), `position_embeddings` (max_positions, hidden), "
            "`token_type_embeddings` (types, hidden), LayerNorm `ln_weight`, `ln_bias` (hidden,) and `eps`; it "
            "returns (batch, seq, hidden): LayerNorm(word[input_ids] + position[0 ... seq-1] + "
            "token_type[token_type_ids]).",
            start="look up the token vectors with `word_embeddings[input_ids]`.",
            make_cases=_embedding_cases,
            mistakes=(
                Mistake(
                    "no position embeddings",
                    "add the learned position vectors `position_embeddings[:seq]`; without them BERT is "
                    "blind to word order.",
                    _embeddings_no_positions,
                ),
                Mistake(
                    "no token type embeddings",
                    "add the segment vectors `token_type_embeddings[token_type_ids]` (sentence A or B).",
                    _embeddings_no_token_types,
                ),
                Mistake(
                    "no LayerNorm",
                    "BERT normalises the sum: `layer_norm(summed, ln_weight, ln_bias, eps)`.",
                    _embeddings_no_layer_norm,
                ),
                Mistake(
                    "sinusoidal instead of learned positions",
                    "BERT does not use sinusoids: it learns its positions, `position_embeddings[:seq]`.",
                    _embeddings_sinusoidal,
                ),
                Mistake(
                    "learned positions starting at 1",
                    "the first token has position 0: use rows 0 ... seq - 1 of `position_embeddings`.",
                    _embeddings_positions_from_1,
                ),
            ),
        ),
        Exercise(
            name="count_parameters",
            reference=count_parameters,
            prompt="your function receives a `BertConfig` and returns, as an int, the number of parameters of "
            "`BertModel(config)`: the embeddings with their LayerNorm, every encoder layer (Q, K, V, W_O and the "
            "feed-forward block, each with biases, and two LayerNorms), and the pooler.",
            start="count one linear layer first: a d_in x d_out weight plus d_out biases.",
            make_cases=_count_cases,
            extra_solution=(parameter_breakdown, linear_parameters),
            mistakes=(
                Mistake(
                    "forgetting the biases",
                    "every linear layer has a bias: d_in x d_out weights plus d_out biases.",
                    _count_no_biases,
                ),
                Mistake(
                    "forgetting the LayerNorm parameters",
                    "each LayerNorm has gamma and beta, 2 x hidden: one after the embeddings, two in every layer.",
                    _count_no_layer_norm,
                ),
                Mistake(
                    "forgetting the pooler",
                    "BertModel ends with the pooler, a hidden x hidden linear layer with its bias.",
                    _count_no_pooler,
                ),
                Mistake(
                    "forgetting the token type embeddings",
                    "there is a segment table too: type_vocab_size x hidden.",
                    _count_no_token_types,
                ),
                Mistake(
                    "counting only one layer",
                    "multiply the per-layer count by `config.num_hidden_layers`.",
                    _count_one_layer,
                ),
                Mistake(
                    "counting the feed-forward block as hidden x hidden",
                    "the block widens to `config.intermediate_size` and back: hidden x d_ff and d_ff x hidden, "
                    "with biases.",
                    _count_ffn_square,
                ),
            ),
        ),
    )
}
