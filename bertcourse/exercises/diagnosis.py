"""Wording what is wrong when no catalogued mistake explains it.

The catalogue names the mistakes we foresaw. For the others, a message can still point at the fix:

- ``value_problem`` compares one output with the right one: its type, layout, device, shape and
  dtype first, then how the values relate (a constant factor, a sign, an offset, a transpose,
  slices in another order such as permuted heads, dropout left on, only a few rows wrong, close but
  not within the tolerance);
- ``error_problem`` words an exception: its type and first line, the learner's line, the shapes of
  the learner's tensors at that line when shapes are the trouble, and a hint per common error
  (``if mask:``, ``view`` after a transpose, a constant that overflows float16, ...);
- ``cases_summary`` says which kind of case fails (batched? masked? float16? a default left out?)
  when the failing cases share something the passing ones lack.

Every message is deterministic (no ids, timings or paths): nbval compares notebook outputs.
"""

from __future__ import annotations

import dis
import inspect
import itertools
import math
import numbers
import os
import re
import sysconfig
import traceback

import torch

import bertcourse

from .records import Case
from .sandbox import TimedOut, UnreadableOutput

# Frames from these folders are ours (all of bertcourse/) or PyTorch's, never the learner's code.
_LIBRARY_DIRS = tuple(os.path.dirname(os.path.abspath(path)) + os.sep for path in (bertcourse.__file__, torch.__file__))
# ... nor are those of the standard library and the installed packages (NumPy, say).
_OTHER_LIBRARY_DIRS = (os.path.dirname(os.path.abspath(os.__file__)) + os.sep,) + tuple(
    os.path.abspath(p) + os.sep for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
)
_RAISE_OPCODES = {dis.opmap[name] for name in ("RAISE_VARARGS", "RERAISE") if name in dis.opmap}


def is_skeleton(error: BaseException | None) -> bool:
    """True for the skeleton's own ``raise NotImplementedError``: a raise statement in the learner's code.

    A ``NotImplementedError`` that PyTorch raises (``"bitwise_or_cpu" not implemented for 'Float'``, from
    ``mask | 1.0``) or that a library raises is an attempt that failed, not a function left untouched.
    """
    if not isinstance(error, NotImplementedError):
        return False
    tb = error.__traceback__
    if tb is None:
        return True  # raised without a frame of its own: nothing says it is anyone else's
    while tb.tb_next is not None:
        tb = tb.tb_next
    filename = os.path.abspath(tb.tb_frame.f_code.co_filename)
    if filename.startswith(_LIBRARY_DIRS + _OTHER_LIBRARY_DIRS):
        return False
    code = tb.tb_frame.f_code.co_code
    if 0 <= tb.tb_lasti < len(code):
        return code[tb.tb_lasti] in _RAISE_OPCODES  # a `raise` statement, not an operation that failed in C
    line = traceback.extract_tb(tb, limit=1)[0].line or ""
    return line.strip().startswith("raise")


# --- exceptions -------------------------------------------------------------------------------

# The kinds of failure two calls can share, each recognised by words of its message, most specific first.
_ERROR_KINDS = (
    ("ambiguous truth value", ("is ambiguous",)),
    ("view of a non-contiguous tensor", ("view size is not compatible",)),
    ("overflow", ("without overflow",)),
    ("boolean mask needed", ("only supports boolean masks", "expected mask dtype to be bool")),
    ("dtype", ("same dtype", "expected scalar type", "Expected object of scalar type", "not implemented for")),
    ("device", ("same device", "Expected all tensors to be on")),
    ("index", ("out of bounds", "index out of range", "too many indices", "only integer tensors")),
    (
        "shape",
        (
            "shapes cannot be multiplied",
            "must match the size",
            "must match the existing size",
            "Expected size",
            "invalid for input of size",
            "Dimension out of range",
            "expects a tensor with <= 2 dimensions",
            "must be a matrix",
            "number of dimensions",
            "Sizes of tensors must match",
            "size mismatch",
            "does not match the shape",
            "broadcast",
            "must have shape",
            "dimensions, got",
            "must have the same",
            "inconsistent tensor size",
            "stack expects each tensor",
            "number of dims",
        ),
    ),
    ("signature", ("positional argument", "keyword argument")),
)


def error_kind(error: BaseException) -> str | None:
    """The kind of failure (e.g. "shape", "ambiguous truth value"), or None when the message is not one we know."""
    text = first_line(error)
    for kind, words in _ERROR_KINDS:
        if any(word in text for word in words):
            return kind
    return None


def same_failure(mine: BaseException | None, theirs: BaseException | None) -> bool:
    """Both calls failed the same way: the same kind of error, or the same type and message (numbers aside).

    A missing part (the skeleton's ``NotImplementedError``) and a time-out never pass for anything else.
    """
    if mine is None or theirs is None or isinstance(mine, TimedOut) or is_skeleton(mine):
        return False
    kind = error_kind(mine)
    if kind is not None:
        return kind == error_kind(theirs)
    digits = re.compile(r"\d+")
    return type(mine) is type(theirs) and digits.sub("#", first_line(mine)) == digits.sub("#", first_line(theirs))


_ERROR_HINTS = (
    (
        "is ambiguous",
        "a tensor was asked for one True/False (`if mask:`, `and`, `or`, `not`): test an optional argument "
        "with `if mask is not None:`, and combine boolean tensors with `&`, `|` and `~`.",
    ),
    (
        "tensors used as indices must be long",
        "an index tensor holds floats: `torch.tensor([])` of an empty list is float32, so give it "
        "`dtype=torch.long` (or index with the list itself).",
    ),
    (
        "view size is not compatible",
        "`.view` needs a contiguous tensor; after a transpose use `.reshape(...)` instead.",
    ),
    (
        "without overflow",
        "a constant does not fit the dtype: float16 ends at ±65504, so `-1e9` overflows. "
        "`torch.finfo(scores.dtype).min` fits every dtype.",
    ),
    (
        "only supports boolean masks",
        "`masked_fill` needs a boolean mask; a 0/1 mask becomes one with `mask == 1`.",
    ),
    (
        "same dtype",
        "two tensors of different dtypes meet: a tensor you created has the default float32 (or float64 from "
        "NumPy). Create it like the inputs, e.g. `torch.zeros(..., dtype=x.dtype)`.",
    ),
    (
        "expected scalar type",
        "two tensors of different dtypes meet: create new tensors with the inputs' dtype (`dtype=x.dtype`).",
    ),
    (
        "not implemented for",
        "PyTorch has no version of this operation for that dtype: `|`, `&`, `^` and `~` take booleans (or "
        "integers), so compare first (`mask == 1`) or convert (`.bool()`); arithmetic such as `1 - mask` takes "
        "numbers, not booleans.",
    ),
    (
        "torch.return_types",
        "`.max(dim)` (like `.min(dim)`, `.sort`, `.topk` and `.median(dim)`) returns a pair (values, indices): "
        "take `.values`, or use `.amax(dim)` for the values alone.",
    ),
    (
        "same device",
        "create new tensors on the inputs' device: `torch.zeros(..., device=x.device)`.",
    ),
    (
        "shapes cannot be multiplied",
        "for `a @ b` the last size of `a` must equal the first (row) size of `b`: which one comes first, "
        "and does one need a transpose?",
    ),
    (
        "Expected size for first two dimensions",
        "in a batched `@` the batch axes of both sides must agree and the inner sizes must match.",
    ),
    (
        "expects a tensor with <= 2 dimensions",
        "`.t()` works on 2-D matrices only; `x.transpose(-2, -1)` works whatever the batch axes in front.",
    ),
    (
        "Dimension out of range",
        "an axis the tensor does not have: count axes from the end (`dim=-1`, `transpose(-2, -1)`), so the "
        "same code works with and without batch axes.",
    ),
    (
        "invalid for input of size",
        "the new shape must hold exactly as many entries as the tensor: compute its sizes from `x.shape`.",
    ),
    (
        "must match the size",
        "two tensors do not broadcast together: compare their shapes axis by axis, from the right.",
    ),
    (
        "index out of range in self",
        "an id is past the end of the table it looks up: which table do you index, with which ids?",
    ),
    (
        "out of bounds",
        "an index is past the end of an axis: print the shapes and the indices you use.",
    ),
    (
        "positional argument",
        "your function must take the arguments the exercise describes, in that order; an optional one "
        "(like `mask=None`) needs a default value.",
    ),
    (
        "keyword argument",
        "your function must take the arguments the exercise describes, with the names and defaults shown "
        "in the skeleton.",
    ),
    (
        "is not defined",
        "import or define every name your function uses, in a cell you have run (e.g. `import math`).",
    ),
    (
        "has no attribute",
        "a value is not of the type you expect: print its `type(...)`.",
    ),
    (
        "maximum recursion depth",
        "your function calls itself without end: does it share its name with the function it means to call?",
    ),
)


def error_problem(error: BaseException) -> str:
    """One case's exception in plain words, with the learner's line, their tensors' shapes and a hint."""
    if is_skeleton(error):
        return "Your function still raises NotImplementedError for this case."
    if isinstance(error, TimedOut):
        return "Your function was still running after the time limit and was stopped: a loop that never ends?"
    if isinstance(error, UnreadableOutput):
        return f"What your function returned could not be read as a plain tensor ({first_line(error)})."
    line = first_line(error)
    frame = _learner_frame(error)
    text = f"Your function raised {type(error).__name__}: {line}"
    if frame is not None and frame[1]:
        text += f" (line {frame[0]}: `{frame[1]}`)"
    if frame is not None and error_kind(error) in ("shape", "view of a non-contiguous tensor", "dtype"):
        tensors = _tensor_locals(frame[2])
        if tensors:
            text += f"\nYour tensors at that line: {tensors}."
    hint = next((hint for pattern, hint in _ERROR_HINTS if pattern in line), None)
    return text + (f"\nHint: {hint}" if hint else "")


def _learner_frame(error: BaseException):
    """(line number, source line, locals) of the last frame of the learner's code in the traceback, or None."""
    tb, found = error.__traceback__, None
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_LIBRARY_DIRS):
            found = tb
        tb = tb.tb_next
    if found is None:
        return None
    summary = traceback.extract_tb(found, limit=1)[0]
    return summary.lineno, (summary.line or "").strip(), dict(found.tb_frame.f_locals)


def _tensor_locals(variables: dict) -> str:
    """'scores (2, 3, 4, 6), mask (2, 6) bool' for the tensors among ``variables`` (at most 6)."""
    shown = [
        f"{name} {describe_input(value)}"
        for name, value in variables.items()
        if isinstance(value, torch.Tensor) and not name.startswith("_")
    ]
    return ", ".join(shown[:6])


def first_line(error: BaseException) -> str:
    try:
        lines = str(error).strip().splitlines()
    except Exception:
        return "(no message)"
    text = lines[0] if lines else "(no message)"
    return text if len(text) <= 200 else text[:197] + "..."


# --- values -----------------------------------------------------------------------------------


def tolerance(exercise, dtype: torch.dtype, case: Case | None = None) -> tuple[float, float]:
    """(atol, rtol) for outputs of ``dtype``: the exercise's own, widened to the rounding of float16 and bfloat16,
    and for ``case`` to the rounding of its inputs in that dtype.

    An input of size |s| is only known to |s|·ε (ε the dtype's spacing at 1): a softmax over scores near
    1000 computed through ``logsumexp`` is 1e-5 off in float32, within 1000·ε ≈ 1.2e-4. So the absolute
    tolerance is at least ε times the case's typical largest input (the 90th percentile of the magnitudes
    of the finite entries of its tensors, so that a lone fill value such as -1e9 does not count), up to
    ``_MOST_ROUNDING``.
    """
    widest = {torch.float16: 2e-3, torch.bfloat16: 2e-2}.get(dtype, 0.0)
    atol, rtol = max(exercise.atol, widest), max(exercise.rtol, widest)
    if case is not None and dtype.is_floating_point:
        atol = max(atol, min(input_scale(case) * torch.finfo(dtype).eps, _MOST_ROUNDING))
    return atol, rtol


# The widest the rounding of the inputs widens a tolerance: past it (float16 scores near -20000 are only
# known to 16), the inputs' rounding would excuse any answer, and the reference's exact one is the target.
_MOST_ROUNDING = 1e-3


def input_scale(case: Case) -> float:
    """The typical largest magnitude among the case's floating-point tensors (0 when there are none).

    Python numbers (an eps, a scale) are settings, not data whose rounding the output carries."""
    found = _SCALES.get(id(case))
    if found is not None and found[0] is case:
        return found[1]
    scale = 0.0
    for value in _floats(case.args):
        finite = value[torch.isfinite(value)].abs().double()
        if finite.numel():
            scale = max(scale, float(torch.quantile(finite, 0.9)) if finite.numel() > 1 else float(finite[0]))
    _SCALES[id(case)] = (case, scale)
    return scale


_SCALES: dict[int, tuple] = {}  # the cases are built once per exercise; their scales too


def _floats(value):
    if isinstance(value, torch.Tensor):
        if value.dtype.is_floating_point and value.layout == torch.strided and value.device.type != "meta":
            yield value.detach()
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _floats(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _floats(item)


def same_value(exercise, value, other, case: Case | None = None) -> bool:
    """Equal values (within the tolerance of ``other``'s dtype for ``case``; NaN equals NaN), whatever the dtypes."""
    if isinstance(other, torch.Tensor):
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(other.shape):
            return False
        if value.dtype.is_complex or value.layout != torch.strided or value.device.type == "meta":
            return False
        atol, rtol = tolerance(exercise, other.dtype, case)
        a, b = value.detach().cpu().double(), other.detach().cpu().double()
        return bool(torch.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True))
    if other is None or isinstance(other, str):
        return type(value) is type(other) and value == other
    if isinstance(other, float):
        if not is_real(value):
            return False
        if math.isnan(other) or math.isnan(value):
            return math.isnan(other) and math.isnan(value)
        atol = exercise.atol
        if case is not None:
            atol = max(atol, min(input_scale(case) * torch.finfo(torch.float32).eps, _MOST_ROUNDING))
        return math.isclose(float(value), other, rel_tol=exercise.rtol, abs_tol=atol)
    return is_integral(value) and int(value) == other


def value_problem(exercise, case: Case, subject: str, value, expected: torch.Tensor, axes=()) -> str | None:
    """What is wrong with one output tensor, in plain words; None when it is right.

    ``axes`` names the output's last axes (e.g. ("queries", "keys")) for the messages.
    """
    if not isinstance(value, torch.Tensor):
        return type_problem(subject, value, "a torch.Tensor")
    if value.layout != torch.strided:
        return f"{subject} is a {value.layout} tensor; expected an ordinary (dense) one: `.to_dense()`."
    if value.device != expected.device:
        return (
            f"{subject} is on the device `{value.device}`, but the inputs are on `{expected.device}`: create new "
            "tensors on the inputs' device (`device=x.device`), never on a fixed one."
        )
    if tuple(value.shape) != tuple(expected.shape):
        moved = _axes_moved(value, expected, axes)
        if moved:
            return f"{subject} has shape {tuple(value.shape)}; expected {tuple(expected.shape)}. {moved}"
        return _shape_problem(subject, tuple(value.shape), tuple(expected.shape), axes)
    if value.dtype != expected.dtype:
        return _dtype_problem(exercise, case, subject, value, expected)
    if value.dtype.is_complex:
        return f"{subject} holds complex numbers; expected {expected.dtype}."
    if value.dtype.is_floating_point:
        for bad, test in (("NaN", torch.isnan), ("inf", torch.isinf)):
            where = test(value) & ~test(expected)
            count = int(where.sum())
            if count:
                place = _where(where, axes)
                return (
                    f"{subject} contains {bad} in {_entries(count, value.numel())}{place}; the right answer has "
                    f"none there. {_NON_FINITE_HINT[bad]}"
                )
    if same_value(exercise, value, expected, case):
        return None
    unchanged = _an_input(case, value)
    if unchanged is not None:
        return f"{subject} is one of the inputs, unchanged (argument {unchanged + 1}): nothing was computed from it."
    if value.dtype == torch.bool:
        return _mask_problem(subject, value, expected, axes)
    return _numbers_problem(exercise, case, subject, value, expected, axes)


_NON_FINITE_HINT = {
    "NaN": "NaN comes from 0/0, from inf/inf (an exp that overflowed: subtract the row's maximum first), from the "
    "square root of a negative number, or from a softmax over a row whose scores are all -inf.",
    "inf": "inf comes from a division by 0, or from a number too large for the dtype (float16 ends at 65504).",
}


def _an_input(case: Case, value: torch.Tensor) -> int | None:
    """The index of an argument that ``value`` equals exactly, if any."""
    for index, argument in enumerate(case.args):
        same_kind = (
            isinstance(argument, torch.Tensor) and argument.shape == value.shape and argument.dtype == value.dtype
        )
        if same_kind and bool(torch.equal(argument, value)):
            return index
    return None


def _shape_problem(subject: str, got: tuple, want: tuple, axes=()) -> str:
    text = f"{subject} has shape {got}; expected {want}."
    if len(got) == len(want):
        differing = [i for i in range(len(got)) if got[i] != want[i]]
        if len(differing) == 1:
            i = differing[0]
            name = _axis_name(i, len(got), axes)
            if name.startswith("entries along"):
                name = f"axis {i}"
            ratio = want[i] / got[i] if got[i] else 0
            more = (
                f" ({ratio:g} times too few: is every part there?)"
                if ratio > 1 and ratio == int(ratio)
                else f" ({1 / ratio:g} times too many)"
                if 0 < ratio < 1 and 1 / ratio == int(1 / ratio)
                else ""
            )
            return text + f" Only the {name} differ: {got[i]} instead of {want[i]}{more}."
    if len(got) == len(want) >= 2 and got[:-2] == want[:-2] and got[-2:] == want[-2:][::-1]:
        return text + " The last two axes are swapped: a transpose too many, or too few?"
    if len(got) < len(want) and want[len(want) - len(got) :] == got:
        return text + (
            f" The leading axes {want[: len(want) - len(got)]} are missing: a `[0]` or a `squeeze()`? Or a sum, "
            "mean or max over them (a `dim` left out, or `keepdim=True` forgotten)?"
        )
    if len(got) < len(want) and want[: len(got)] == got:
        return text + " The last axes are missing: did a sum or a mean run over an axis it should keep?"
    if len(got) == len(want) + 1:
        i = next((i for i in range(len(got)) if got[i] == 1 and got[:i] + got[i + 1 :] == want), None)
        if i is not None:
            return text + f" An extra axis of size 1 at position {i}: a `keepdim=True` or a `[None]` too many?"
    if math.prod(got) == math.prod(want):
        return text + " The same number of entries in another shape: check each `view`, `reshape` and `permute`."
    return text


def _axes_moved(value: torch.Tensor, expected: torch.Tensor, axes) -> str | None:
    """For an output of the wrong shape: 'It is the right answer with its axes in another order: ...' when a
    permutation of the right answer's axes gives it, or 'the right numbers in another arrangement' when it holds
    exactly the right numbers; else None."""
    if value.dim() != expected.dim() or value.numel() != expected.numel() or value.dtype.is_complex:
        return None
    v, e = value.detach().cpu().double(), expected.detach().cpu().double()
    names = [_axis_name(i, e.dim(), axes).replace(f"entries along axis {i}", f"axis {i}") for i in range(e.dim())]
    for order in itertools.permutations(range(e.dim())):
        moved = e.permute(order)
        if moved.shape == v.shape and bool(torch.allclose(v, moved, atol=1e-5, rtol=1e-5, equal_nan=True)):
            yours, right = ", ".join(names[i] for i in order), ", ".join(names)
            return (
                f"It is the right answer with its axes in another order: yours are ({yours}), the right order is "
                f"({right}). A `transpose` or `permute` of the wrong axes, or one missing?"
            )
    if sorted(v.shape) == sorted(e.shape) and value.dtype.is_floating_point and _same_numbers(v, e):
        return (
            "It holds exactly the right numbers in another arrangement: an axis cut into its parts in the wrong "
            "order (a `view` whose sizes are swapped), or a `reshape` where a `transpose` belongs?"
        )
    return None


def _same_numbers(v: torch.Tensor, e: torch.Tensor) -> bool:
    """``v`` holds the numbers of ``e`` (mostly distinct ones, so that a match is no coincidence), in any order."""
    if v.numel() != e.numel() or v.numel() < 4 or not bool(torch.isfinite(e).all()):
        return False
    if e.flatten().unique().numel() <= e.numel() // 2:
        return False
    return bool(torch.allclose(v.flatten().sort().values, e.flatten().sort().values, atol=1e-5, rtol=1e-5))


def _dtype_problem(exercise, case: Case, subject: str, value: torch.Tensor, expected: torch.Tensor) -> str:
    same_values = _castable(value) and same_value(exercise, value, expected, case)
    start = f"{subject} has the right values but dtype" if same_values else f"{subject} has dtype"
    if expected.dtype == torch.bool:
        return (
            f"{start} {value.dtype}; a mask must be boolean (torch.bool). "
            "Comparisons such as `<` give booleans directly."
        )
    text = f"{start} {value.dtype}; expected {expected.dtype}"
    inputs = {a.dtype for a in case.args if isinstance(a, torch.Tensor) and a.dtype.is_floating_point}
    if inputs == {expected.dtype}:
        return (
            f"{text}, the dtype of the inputs. Keep it: create new tensors with `dtype=x.dtype` "
            "(a new tensor is float32 by default, and float64 when it comes from NumPy)."
        )
    return text + "."


def _castable(value: torch.Tensor) -> bool:
    return not value.dtype.is_complex


def _mask_problem(subject: str, value: torch.Tensor, expected: torch.Tensor, axes) -> str:
    differ = value != expected
    first = tuple(differ.nonzero()[0].tolist())
    text = (
        f"{subject} differs in {_entries(int(differ.sum()), value.numel())}; the first is at index "
        f"{_index(first)}: expected {bool(expected[first])}, got {bool(value[first])}."
    )
    if bool(differ.all()):
        return text + " It is exactly the right mask inverted: in this course True means *may attend*."
    relation = _mask_pattern(value) or _rearranged(value, expected, axes) or _localised(differ, axes)
    return text + (f" {relation}" if relation else "")


def _mask_pattern(value: torch.Tensor) -> str | None:
    """What a wrong boolean mask is, when it is a simple pattern: all True, the diagonal, a triangle."""
    if bool(value.all()):
        return "Your mask is True everywhere: it blocks nothing."
    if not bool(value.any()):
        return "Your mask is False everywhere: it allows nothing."
    if value.dim() < 2 or value.shape[-1] != value.shape[-2]:
        return None
    n = value.shape[-1]
    ones = torch.ones(n, n, dtype=torch.bool)
    if bool((value == torch.eye(n, dtype=torch.bool)).all()):
        return "Only its diagonal is True: every token may attend to itself alone."
    for name, triangle in (("tril", ones.tril), ("triu", ones.triu)):
        for diagonal in range(-n + 1, n):
            if bool((value == triangle(diagonal)).all()):
                return f"It equals `torch.{name}(ones, diagonal={diagonal})`."
    return None


def _numbers_problem(exercise, case: Case, subject: str, value: torch.Tensor, expected: torch.Tensor, axes) -> str:
    v, e = value.double(), expected.double()
    if e.numel() == 1:  # one number: show it, and a relation only where the numbers support one
        mine, right = float(v.reshape(())), float(e.reshape(()))
        return f"{subject} is {mine:.6g}; expected {right:.6g}.{one_number_relation(mine, right)}"
    atol, rtol = tolerance(exercise, expected.dtype, case)
    allowed = atol + rtol * e.abs()
    both_same = (v == e) | (torch.isnan(v) & torch.isnan(e))  # inf against inf, NaN against NaN
    bad = ~both_same & ~(torch.isfinite(e) & ((v - e).abs() <= allowed))  # an infinity is right only when equal
    special = bad & ~(torch.isfinite(e) & torch.isfinite(v))
    if bool(special.any()):  # a difference to an infinity or a NaN is no number: show both values
        where = tuple(special.nonzero()[0].tolist())
        return (
            f"{subject} has the right shape but wrong values in {_entries(int(bad.sum()), v.numel())}; at index "
            f"{_index(where)} the right value is {float(e[where]):.4g} and yours is {float(v[where]):.4g}."
        )
    difference = torch.where(both_same, torch.zeros_like(v), (v - e).abs())  # inf - inf is no difference
    where = _index(torch.unravel_index(difference.argmax(), difference.shape))
    text = (
        f"{subject} has the right shape but wrong values: the largest absolute difference is "
        f"{float(difference.max()):.3g}, at index {where}."
    )
    if not bool(torch.isfinite(e).all() and torch.isfinite(v).all()):
        return text  # an inf or a NaN in the right place on both sides: no factor or offset to speak of
    relation = (
        _scaled(v, e, case)
        or _scaled_per_slice(v, e, axes)
        or _dropout(v, e)
        or _offset(v, e)
        or _row_offset(v, e, axes)
        or _rearranged(v, e, axes, atol=atol, rtol=rtol)
        or _shuffled(v, e)
        or _not_a_distribution(v, e)
        or _close(difference, e, bad, (atol, rtol), axes)
        or _localised(bad, axes)
    )
    return text + (f" {relation}" if relation else "")


def _not_a_distribution(v: torch.Tensor, e: torch.Tensor) -> str | None:
    """Where every row of the right answer is a distribution (entries >= 0 summing to 1, or all 0 for a row that
    sees nothing): the learner's rows that do not sum to 1, or weight where the right answer has exactly 0."""
    if e.dim() < 1 or e.shape[-1] < 2 or bool((e < 0).any()):
        return None
    rows = (e.sum(dim=-1) - 1).abs() <= 1e-4
    empty = e.abs().amax(dim=-1) == 0
    if not bool((rows | empty).all()) or not bool(rows.any()):
        return None
    sums = v.sum(dim=-1)[rows]
    if bool(((sums - 1).abs() > 1e-3).any()):
        return (
            f"Its rows sum to {float(sums.min()):.3g} to {float(sums.max()):.3g}, not 1: each row of the right answer "
            "is a distribution (entries >= 0 that sum to 1), as a softmax over the last axis gives."
        )
    negative = rows[..., None] & (v < -1e-3)
    if bool(negative.any()):
        return (
            f"Its rows sum to 1, but {_entries(int(negative.sum()), v.numel())} are negative: each row of the right "
            "answer is a distribution, whose entries (a softmax's exp(s) / sum) are never below 0."
        )
    ones = (v.abs() > 1e-6).sum(dim=-1) == 1
    if bool(ones[rows].all()) and bool(((e > 1e-6).sum(dim=-1)[rows] > 1).any()):
        return (
            "Its rows sum to 1, but each puts all its weight on one entry (an argmax, one-hot): a softmax gives "
            "every allowed key some weight, exp(s - max) / sum."
        )
    power = _softmax_power(v, e, rows)
    if power is not None:
        return (
            f"Each row is the right one raised to the power {power} and renormalised: the softmax of the scores "
            f"times {power} before the exp{_power_name(power)}."
        )
    top = (e == e.amax(dim=-1, keepdim=True)) & rows[..., None]
    if bool(top.any()) and bool((v[top].abs() <= 1e-6).all()):
        return (
            "Its rows sum to 1, but where the right answer has its largest weight, yours has 0: the highest score "
            "gets the largest weight, exp(s - max) = exp(0) = 1 before the division (`torch.exp`, not `torch.expm1`)."
        )
    leaks = (e == 0) & rows[..., None] & (v.abs() > 1e-3)
    if bool(leaks.any()):
        return (
            f"Its rows sum to 1, but it puts weight on {_entries(int(leaks.sum()), v.numel())} where the right answer "
            "has exactly 0 (masked keys?): a masked score must be -inf (or the dtype's lowest value) before the "
            "softmax, so that its weight is 0; adding or multiplying a 0/1 mask leaves it a finite score."
        )
    return None


def _softmax_power(v: torch.Tensor, e: torch.Tensor, rows: torch.Tensor) -> str | None:
    """p (as text) when every distribution row of ``v`` is the right row to the power p, renormalised (the softmax
    of the scores times p), for p other than 1; None otherwise."""
    both = (v > 0) & (e > 0) & rows[..., None]
    if not bool(((v > 0) == (e > 0))[rows].all()) or int(both.sum()) < 3:
        return None
    log_v = torch.where(both, v.clamp_min(1e-300).log(), 0.0)
    log_e = torch.where(both, e.clamp_min(1e-300).log(), 0.0)
    count = both.sum(dim=-1, keepdim=True).clamp_min(1)
    x = torch.where(both, log_e - log_e.sum(dim=-1, keepdim=True) / count, 0.0)  # centred within each row
    y = torch.where(both, log_v - log_v.sum(dim=-1, keepdim=True) / count, 0.0)
    energy = float((x * x).sum())
    if energy < 1e-6:
        return None
    p = float((x * y).sum()) / energy
    if abs(p - 1) < 1e-3 or not _near(y, p * x, atol=1e-3, rtol=1e-3):
        return None
    return f"{p:.3g}"


def _power_name(power: str) -> str:
    value = float(power)
    if abs(value + 1) <= 2e-3:
        return ": the scores' sign flipped"
    for n in (2, 3, 5, 6, 8, 12, 32, 64):  # not perfect squares: √4 is 2
        for number, name in ((math.sqrt(n), f"√{n}"), (1 / math.sqrt(n), f"1/√{n}")):
            if abs(value - number) <= 2e-3 * number:
                return f" (= {name}, a scale on the scores)"
    return ""


def one_number_relation(mine: float, right: float) -> str:
    """' It is the right value multiplied by exactly 1/2.' when a simple relation holds exactly (to float32
    rounding), else ''.

    Any wrong number is *some* factor or offset away from the right one, which says nothing; so only a
    relation that such a number rarely meets by chance is named: a sign, one minus it, an exact small
    ratio (p/q with p, q <= 8, or a power of 2 or 10), a square, a square root, a reciprocal, exp or log.
    """
    if not (math.isfinite(mine) and math.isfinite(right)) or mine == right:
        return ""

    def near(a: float, b: float) -> bool:
        return abs(a - b) <= 2e-6 * max(abs(a), abs(b)) + 1e-12

    if near(mine, -right):
        return " It is minus the right value: a sign is flipped."
    if 0 < right <= 1 and near(mine, 1 - right):
        return " It is 1 minus the right value."
    if right != 0 and mine != 0:
        ratio = mine / right
        names = {}
        for q in range(1, 9):
            for p in range(1, 9):
                if math.gcd(p, q) == 1 and p != q:
                    names.setdefault(p / q, f"{p}/{q}" if q > 1 else f"{p}")
        for k in range(1, 13):
            names.setdefault(2.0**k, f"{2**k} (2^{k})")
            names.setdefault(2.0**-k, f"1/{2**k} (1/2^{k})")
        for k in range(1, 7):
            names.setdefault(10.0**k, f"{10**k:,}")
            names.setdefault(10.0**-k, f"1/{10**k:,}")
        for value, name in names.items():
            if near(ratio, value):
                return f" It is the right value multiplied by exactly {name}."
    for relation, name in (
        (lambda x: x * x, "the square of"),
        (lambda x: math.sqrt(x) if x >= 0 else math.nan, "the square root of"),
        (lambda x: 1 / x if x != 0 else math.nan, "the reciprocal of"),
        (lambda x: math.exp(x) if x < 700 else math.nan, "exp of"),
        (lambda x: math.log(x) if x > 0 else math.nan, "the log of"),
    ):
        related = relation(right)
        if name == "exp of" and right == 0:
            continue  # exp(0) = 1: a count of 1 where 0 is right is no exp
        if math.isfinite(related) and related not in (right, 0.0) and near(mine, related):
            return f" It is {name} the right value."
    return ""


def _near(a: torch.Tensor, b: torch.Tensor, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    scale = float(b.abs().max()) if b.numel() else 0.0
    return bool(torch.allclose(a, b, atol=atol + rtol * scale, rtol=rtol))


def _scaled(v: torch.Tensor, e: torch.Tensor, case: Case) -> str | None:
    if bool((v == 0).all()) and bool((e != 0).any()):
        return "Your output is all zeros."
    energy = float((e * e).sum())
    if energy == 0:
        return None
    factor = float((v * e).sum()) / energy
    if abs(factor - 1) < 1e-3 or not _near(v, factor * e):
        return None
    if abs(factor + 1) < 1e-3:
        return "It is exactly minus the right answer: a sign is flipped somewhere."
    return f"It is the right answer times {factor:.4g}{_constant_name(factor, case)}: a scale factor is off."


def _constant_name(factor: float, case: Case) -> str:
    """' (= 1/√8)' when ``factor`` is a simple expression of a size in the case's inputs, else ''."""
    sizes = sorted(
        {n for a in case.args if isinstance(a, torch.Tensor) for n in a.shape if n > 1}
        | {a for a in case.args if is_integral(a) and a > 1}
        | {2, 8}
    )
    for n in sizes:
        for value, name in ((n, f"{n}"), (1 / n, f"1/{n}"), (math.sqrt(n), f"√{n}"), (1 / math.sqrt(n), f"1/√{n}")):
            if abs(factor - value) <= 1e-3 * abs(value):
                return "" if name == f"{factor:.4g}" else f" (= {name})"
    return ""


def _scaled_per_slice(v: torch.Tensor, e: torch.Tensor, axes) -> str | None:
    """Each slice along one axis is the right one times a factor of its own, or each entry is the right one times
    a factor of its row and one of its column."""
    for axis in range(v.dim()):
        if v.shape[axis] < 2 or v.numel() < 2 * v.shape[axis]:
            continue  # one slice, or slices of one entry each: any wrong number is "a factor of its own"
        others = tuple(a for a in range(v.dim()) if a != axis)
        if _near(e, e.mean(dim=others, keepdim=True).expand_as(e)):
            continue  # each slice of the right answer is one number repeated: any repeated number is a factor of it
        energy = (e * e).sum(dim=others, keepdim=True)
        factor = (v * e).sum(dim=others, keepdim=True) / energy.clamp_min(1e-30)  # one factor per slice
        changed = (factor - 1).abs() > 1e-3
        if _near(v, factor * e) and 2 * int(changed.sum()) > changed.numel():
            return (
                f"Each of your {_axis_name(axis, v.dim(), axes)} is the right one times a factor of its own: a "
                "division by a sum, a norm or a maximum that should not be there, or a slope or scale per slice gone "
                "wrong?"
            )
    repeated = v.dim() >= 2 and any(_near(e, e.mean(dim=axis, keepdim=True).expand_as(e)) for axis in (-1, -2))
    if v.dim() >= 2 and v.shape[-1] > 1 and v.shape[-2] > 1 and not bool((e == 0).any()) and not repeated:
        ratio = v / e
        rows, columns = ratio[..., :, :1], ratio[..., :1, :]
        both_vary = not _near(rows, rows[..., :1, :].expand_as(rows)) and not _near(
            columns, columns[..., :1].expand_as(columns)
        )
        if both_vary and _near(ratio * ratio[..., :1, :1], rows * columns):
            return (
                "Each entry is the right one times a factor of its row and a factor of its column: vectors "
                "normalised (or scaled) before the product, as for a cosine similarity?"
            )
    if v.dim() >= 2 and v.shape[-1] == v.shape[-2] > 1:
        for name, triangle in (("lower", e.tril()), ("upper", e.triu())):
            if _near(v, triangle) and not _near(v, e):
                return f"It is the right answer with only its {name} triangle kept: a causal mask where none belongs?"
    return None


def _dropout(v: torch.Tensor, e: torch.Tensor) -> str | None:
    zeroed = (v == 0) & (e != 0)
    if not 0 < float(zeroed.double().mean()) < 0.6:
        return None
    kept = ~zeroed
    energy = float((e[kept] * e[kept]).sum())
    factor = float((v[kept] * e[kept]).sum()) / energy if energy > 0 else 0.0
    if factor <= 1 or not _near(v[kept], factor * e[kept]):
        return None
    return (
        f"{_entries(int(zeroed.sum()), v.numel())} are 0 and the others are the right ones times {factor:.4g} "
        f"= 1/(1 - {1 - 1 / factor:.2g}): dropout left on? A check, like `model.eval()`, expects none."
    )


def _offset(v: torch.Tensor, e: torch.Tensor) -> str | None:
    shift = v - e
    constant = float(shift.flatten()[0])
    if abs(constant) < 1e-6 or not _near(shift, torch.full_like(shift, constant)):
        return None
    return f"It is the right answer plus {constant:.4g} everywhere: an offset or a bias is off."


def _row_offset(v: torch.Tensor, e: torch.Tensor, axes) -> str | None:
    """The learner's output is the right one plus the same vector on every row (a bias gone wrong)."""
    if v.dim() < 2 or v.shape[-1] < 2 or v.numel() // v.shape[-1] < 2:
        return None
    shift = (v - e).reshape(-1, v.shape[-1])  # one row per token (and batch item)
    if float(shift.abs().max()) < 1e-5 or not _near(shift, shift[:1].expand_as(shift), atol=1e-4):
        return None
    rows = _axis_name(v.dim() - 2, v.dim(), axes)
    return (
        f"All your {rows} differ from the right ones by the same vector: what is added last (a bias) is wrong, "
        "the rest is right."
    )


def _rearranged(v: torch.Tensor, e: torch.Tensor, axes, atol: float = 0.0, rtol: float = 0.0) -> str | None:
    """A transpose of the last two axes, or one axis whose slices come in another order."""

    def equal(a, b):
        return bool(torch.equal(a, b)) if a.dtype == torch.bool else bool(torch.allclose(a, b, atol=atol, rtol=rtol))

    if v.dim() >= 2 and v.shape[-1] == v.shape[-2] > 1 and equal(v, e.transpose(-2, -1)):
        return f"It is the right answer transposed ({_axis_name(v.dim() - 2, v.dim(), axes)} and columns swapped)."
    for axis in range(v.dim()):
        size = v.shape[axis]
        if size < 2:
            continue
        order = []
        for i in range(size):
            mine = v.select(axis, i)
            match = next((j for j in range(size) if j not in order and equal(mine, e.select(axis, j))), None)
            if match is None:
                break
            order.append(match)
        if len(order) == size and order != list(range(size)):
            return _permutation_text(order, _axis_name(axis, v.dim(), axes))
    return None


def _shuffled(v: torch.Tensor, e: torch.Tensor) -> str | None:
    if not _same_numbers(v, e):
        return None
    return (
        "It holds exactly the right numbers in another arrangement: a `view` or `reshape` that reads them in another "
        "order (the parts of an axis interleaved, or a `reshape` where a `transpose` belongs)?"
    )


def _permutation_text(order: list[int], axis: str) -> str:
    size = len(order)
    block = next(
        (b for b in range(size // 2, 1, -1) if size % b == 0 and _moves_in_blocks(order, b)),
        None,
    )
    moves = [f"{i}→{j}" for i, j in enumerate(order) if i != j]
    shown = ", ".join(moves[:6]) + (", ..." if len(moves) > 6 else "")
    text = f"The {axis} are the right ones in another order (your index → the right index: {shown})"
    if block is not None:
        return text + f": blocks of {block} moved whole. Are the heads (or halves) in the right order?"
    halves = list(range(0, size, 2)) + list(range(1, size, 2))
    if order in (halves, sorted(range(size), key=halves.__getitem__)):
        return text + ": interleaved (0, 2, 4, ... then 1, 3, 5, ...) versus side by side."
    return text + "."


def _moves_in_blocks(order: list[int], block: int) -> bool:
    return all(
        order[start + i] == order[start] + i and order[start] % block == 0
        for start in range(0, len(order), block)
        for i in range(block)
    )


def _localised(bad: torch.Tensor, axes) -> str | None:
    """'Only the query rows [3] are wrong; every other entry is right.', or None."""
    slices = _wrong_slices(bad, axes)
    return None if slices is None else f"Only the {slices} are wrong; every other entry is right."


def _wrong_slices(bad: torch.Tensor, axes) -> str | None:
    """'query rows [3]' when the entries flagged in ``bad`` sit in at most half the slices of one axis, else None."""
    best = None
    for axis in range(bad.dim()):
        size = bad.shape[axis]
        if size < 2:
            continue
        wrong = [i for i in range(size) if bool(bad.select(axis, i).any())]
        if len(wrong) < size and (best is None or len(wrong) / size < best[0]):
            best = (len(wrong) / size, axis, wrong)
    if best is None or best[0] > 0.5:
        return None
    _, axis, wrong = best
    return f"{_axis_name(axis, bad.dim(), axes)} {_index(wrong)}"


def _close(difference: torch.Tensor, e: torch.Tensor, bad: torch.Tensor, tolerances: tuple, axes) -> str | None:
    """'That is close, but outside the tolerance ...' when every entry is within 1% of the output's scale."""
    scale = 1.0 + float(e.abs().max())
    if float(difference.max()) > 1e-2 * scale:
        return None
    atol, rtol = tolerances
    allowed = atol + rtol * e.abs()
    worst = torch.where(bad, difference / allowed, torch.zeros_like(difference)).argmax()
    where = torch.unravel_index(worst, difference.shape)
    slices = _wrong_slices(bad, axes)
    place = f", all in the {slices}" if slices else ""
    return (
        f"That is close, but outside the tolerance ({atol:.3g}) plus {rtol:.3g} × |right value|: at index "
        f"{_index(where)} yours is {float(difference[where]):.2g} off where {float(allowed[where]):.2g} is allowed; "
        f"{_entries(int(bad.sum()), bad.numel())} are outside it{place}. An approximation (such as GELU's tanh "
        "form) or a lower precision somewhere?"
    )


def _axis_name(axis: int, ndim: int, axes) -> str:
    """The name of ``axis`` of an ``ndim``-axis output, from ``axes`` (names of the last axes), e.g. 'query rows'."""
    from_end = ndim - axis
    if from_end <= len(axes):
        return axes[len(axes) - from_end]
    return f"entries along axis {axis}"


def _where(bad: torch.Tensor, axes) -> str:
    slices = _wrong_slices(bad, axes)
    return "" if slices is None else f" (all in the {slices})"


# --- other values -----------------------------------------------------------------------------


def text_problem(subject: str, value, expected: str | None) -> str | None:
    """What is wrong with a returned name (a str, or None for "no such thing")."""
    if type(value) is type(expected) and value == expected:
        return None
    shown = repr(value) if isinstance(value, str) or value is None else kind(value)
    if isinstance(value, str) and len(shown) > 100:
        shown = shown[:97] + "..."
    text = f"{subject} is {shown}; expected {expected!r}."
    if isinstance(value, str) and isinstance(expected, str):
        separator = "." if "." in value and "." in expected else ""
        mine, right = (value.split("."), expected.split(".")) if separator else (list(value), list(expected))
        start = 0
        while start < min(len(mine), len(right)) and mine[start] == right[start]:
            start += 1
        end = 0
        while end < min(len(mine), len(right)) - start and mine[-1 - end] == right[-1 - end]:
            end += 1
        differ_mine = separator.join(mine[start : len(mine) - end])
        differ_right = separator.join(right[start : len(right) - end])
        if len(differ_mine) + len(differ_right) < min(len(value), len(expected)):
            return text + f" The part that differs: {differ_mine!r} where the right name has {differ_right!r}."
    if expected is None:
        return text + " None means: this key has no counterpart to load."
    return text


def count_problem(value, expected: int) -> str | None:
    if isinstance(value, torch.Tensor):
        return "Your count is a tensor; return a Python int (`.item()` converts a one-element tensor)."
    if not is_integral(value):
        return type_problem("Your count", value, "an int")
    if int(value) == expected:
        return None
    relation = one_number_relation(float(int(value)), float(expected)) if expected else ""
    return f"Your count is {int(value):,}; expected {expected:,} (off by {int(value) - expected:+,}).{relation}"


def number_problem(exercise, subject: str, value, expected: float, case: Case | None = None) -> str | None:
    """What is wrong with a returned Python float (an int of the right value passes)."""
    if isinstance(value, torch.Tensor):
        return f"{subject} is a tensor; return a Python float (`.item()` converts a one-element tensor)."
    if not is_real(value):
        return type_problem(subject, value, "a float")
    if same_value(exercise, value, expected, case):
        return None
    return f"{subject} is {float(value):.6g}; expected {expected:.6g}.{one_number_relation(float(value), expected)}"


def type_problem(subject: str, value, wanted: str) -> str:
    if value is None:
        return f"{subject} is None: did you forget to `return` it?"
    if type(value).__module__ == "numpy":
        return f"{subject} is a NumPy {type(value).__name__}; expected {wanted}. Stay with torch operations."
    if inspect.isgenerator(value):
        return f"{subject} is a generator; expected {wanted}. Did you write `yield` instead of `return`?"
    return f"{subject} is {kind(value)}; expected {wanted}."


# --- which cases fail -------------------------------------------------------------------------

# What a kind of case tests, in the order a summary prefers them (the most specific first).
_TAG_HINTS = (
    (
        "defaults",
        "an argument is left out",
        "an argument the caller leaves out takes its default: handle it (e.g. `max_len=None` means the longest).",
    ),
    (
        "None given",
        "an optional argument is None (left out or written out)",
        "None asks for the default the prompt names: test it with `is None` (e.g. `if max_len is None: max_len = "
        "int(lengths.max())`).",
    ),
    (
        "no mask",
        "no mask is given",
        "without a mask (`mask=None`) there is nothing to fill: skip the masking step.",
    ),
    (
        "fully masked row",
        "a query row has every key masked",
        "follow the exercise's rule for a query that may attend to no key at all.",
    ),
    (
        "float16",
        "the inputs are float16",
        "work in the inputs' dtype: no hard-coded float32 and no constant that overflows float16, such as "
        "-1e9 (`torch.finfo(dtype).min` fits every dtype).",
    ),
    (
        "bfloat16",
        "the inputs are bfloat16",
        "work in the inputs' dtype: no hard-coded float32; `torch.finfo(dtype)` knows each dtype's range.",
    ),
    (
        "masked",
        "a mask is given",
        "without a mask your answer is right: look at how you apply `mask` (True = may attend).",
    ),
    (
        "batched",
        "there are batch (or head) axes in front",
        "count axes from the end (`dim=-1`, `transpose(-2, -1)`), so that leading batch and head axes pass through.",
    ),
    (
        "unbatched",
        "there is no batch axis",
        "your code assumes a batch axis in front: count axes from the end (`dim=-1`, `transpose(-2, -1)`), "
        "so that the same code works for one sentence.",
    ),
    (
        "odd",
        "a size is odd",
        "an odd size leaves one element without a partner: work out how many of each kind there are.",
    ),
    (
        "not a power of two",
        "a size is not a power of two",
        "a rule stated for powers of two needs its extension for the other sizes.",
    ),
    (
        "non-square",
        "the sizes differ",
        "an axis swapped or a transpose missing shows only when the sizes differ: check which axis is which.",
    ),
    (
        "square",
        "the sizes are equal",
        "with equal sizes a transpose too few (or an axis swapped) still runs, and gives other values: check "
        "which axis is which.",
    ),
)


def cases_summary(cases: list[Case], wrong: list[bool], names=None, reference=None) -> str | None:
    """'Wrong on cases 2, 4 of 5: exactly those where a mask is given. Hint: ...', or None if nothing is shared.

    A kind of case is named only when the case set isolates it: the failing cases are exactly those of
    that kind, and some failing case differs from a passing one by that property alone (``varied_alone``).
    Otherwise the failing cases could share it by coincidence (the only unbatched case may also be the
    only one of odd sizes), and the summary says which cases fail, nothing more.
    """
    failing = [i for i, w in enumerate(wrong) if w]
    passing = [i for i, w in enumerate(wrong) if not w]
    if not passing or not failing:
        return None
    numbers = ", ".join(str(i + 1) for i in failing)
    head = f"Wrong on case{'s' if len(failing) > 1 else ''} {numbers} of {len(cases)}, right on the others"
    known = {tag for tag, _, _ in _TAG_HINTS}
    others = sorted({tag for case in cases for tag in case.tags} - known)
    for tag, description, hint in (*_TAG_HINTS, *((tag, None, None) for tag in others)):
        exactly = all(tag in cases[i].tags for i in failing) and not any(tag in cases[i].tags for i in passing)
        if exactly and varied_alone(cases, tag, names, reference) is not None:
            if description is None:
                return f"{head}: exactly the cases tagged {tag!r}."
            return f"{head}: exactly those where {description}. Hint: {hint}"
    return f"{head}."


# Tags that say the same property the other way round: a pair varies one property with either tag.
_OPPOSITES = {"batched": "unbatched", "unbatched": "batched", "masked": "no mask", "no mask": "masked"}
_OPPOSITES |= {"square": "non-square", "non-square": "square"}
_SIZE_TAGS = {"square", "non-square", "odd", "not a power of two"}


def varied_alone(cases: list[Case], tag: str, names=None, reference=None) -> tuple[int, int] | None:
    """(i, j): a case with ``tag`` and one without that differ in that property alone, or None.

    Their other tags agree (up to the opposite tag, such as "unbatched" for "batched"), and their
    arguments differ only as the property says:

    - "defaults": the same arguments, but one case leaves out the last ones and the other passes their
      default values (read from ``reference``'s signature);
    - "masked" / "no mask": the same arguments except the mask, given in one and None or left out in the other;
    - "float16" / "bfloat16": the same values, cast to that dtype;
    - "batched" / "unbatched": each tensor that differs is one item of the other one's leading axes;
    - sizes ("square", "non-square", "odd", "not a power of two"): only sizes differ (integers, and the
      shapes of tensors of the same dtype);
    - any other tag: exactly one argument differs.
    """
    opposite = _OPPOSITES.get(tag)
    for i, first in enumerate(cases):
        if tag not in first.tags:
            continue
        for j, second in enumerate(cases):
            if tag in second.tags or i == j:
                continue
            rest = {t for t in first.tags if t not in (tag, opposite)}
            if rest != {t for t in second.tags if t not in (tag, opposite)}:
                continue
            if _differ_by(tag, first.args, second.args, names, reference):
                return i, j
    return None


def _differ_by(tag: str, mine: tuple, other: tuple, names, reference) -> bool:
    if tag == "defaults":
        return _defaults_given(mine, other, names, reference)
    if tag in ("masked", "no mask", "fully masked row"):
        with_mask, without = (mine, other) if tag != "no mask" else (other, mine)
        if tag == "fully masked row":
            differing = _differing(mine, other)
            return len(differing) == 1 and all(isinstance(a[differing[0]], torch.Tensor) for a in (mine, other))
        return _mask_left_out(with_mask, without)
    if len(mine) != len(other):
        return False
    differing = _differing(mine, other)
    if not differing:
        return False
    if tag in ("float16", "bfloat16"):
        return all(_cast_of(mine[k], other[k]) for k in differing)
    if tag in ("batched", "unbatched"):
        return all(_one_item_of(mine[k], other[k]) or _one_item_of(other[k], mine[k]) for k in differing)
    if tag in _SIZE_TAGS:
        return all(_sizes_differ(mine[k], other[k]) for k in differing)
    return len(differing) == 1


def _differing(mine: tuple, other: tuple) -> list[int]:
    return [
        k
        for k in range(max(len(mine), len(other)))
        if k >= len(mine) or k >= len(other) or not _same(mine[k], other[k])
    ]


def _same(a, b) -> bool:
    """Equal case arguments: tensors of the same shape, dtype and values, containers item by item."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and bool(
                torch.equal(a, b)
                or (
                    a.dtype.is_floating_point
                    and torch.equal(a.isnan(), b.isnan())
                    and torch.equal(a.nan_to_num(), b.nan_to_num())
                )
            )
        )
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if callable(a) and callable(b):
        return getattr(a, "__code__", a) is getattr(b, "__code__", b)  # the same kind of sub-layer
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


def _defaults_given(mine: tuple, other: tuple, names, reference) -> bool:
    """``mine`` leaves out the last arguments; ``other`` is the same call with their defaults written out."""
    if reference is None or names is None or len(mine) >= len(other) or len(other) > len(names):
        return False
    try:
        parameters = inspect.signature(reference).parameters
    except (TypeError, ValueError):
        return False
    if _differing(mine, other[: len(mine)]):
        return False
    for k in range(len(mine), len(other)):
        default = parameters[names[k]].default
        if default is inspect.Parameter.empty or not _same(other[k], default):
            return False
    return True


def _mask_left_out(with_mask: tuple, without: tuple) -> bool:
    """The same arguments, except one tensor in ``with_mask`` that ``without`` gives as None or leaves out."""
    differing = _differing(with_mask, without)
    if len(differing) != 1:
        return False
    k = differing[0]
    given = with_mask[k] if k < len(with_mask) else None
    absent = without[k] if k < len(without) else None
    return isinstance(given, torch.Tensor) and absent is None and len(without) <= len(with_mask)


def _cast_of(mine, other) -> bool:
    return (
        isinstance(mine, torch.Tensor)
        and isinstance(other, torch.Tensor)
        and mine.dtype.is_floating_point
        and mine.shape == other.shape
        and mine.dtype != other.dtype
        and bool(torch.equal(other.to(mine.dtype), mine) or torch.equal(mine.to(other.dtype), other))
    )


def _one_item_of(batched, single) -> bool:
    """``single`` is one item of ``batched`` along its leading axes (e.g. ``batched[1]`` or ``batched[0, 2]``)."""
    if not (isinstance(batched, torch.Tensor) and isinstance(single, torch.Tensor)):
        return False
    extra = batched.dim() - single.dim()
    if extra < 1 or tuple(batched.shape[extra:]) != tuple(single.shape) or batched.dtype != single.dtype:
        return False
    items = batched.reshape(-1, *single.shape)
    return any(bool(torch.equal(item, single)) for item in items)


def _sizes_differ(mine, other) -> bool:
    if is_integral(mine) and is_integral(other):
        return True
    tensors = isinstance(mine, torch.Tensor) and isinstance(other, torch.Tensor)
    return tensors and mine.dtype == other.dtype and mine.shape != other.shape


# --- small words ------------------------------------------------------------------------------


def describe_arguments(args: tuple, names: list[str]) -> str:
    given = [f"{name} {describe_input(value)}" for name, value in zip(names, args, strict=False)]
    left_out = names[len(args) :]
    if left_out:
        given.append(
            f"{', '.join(left_out)} left out (so {'it takes its' if len(left_out) == 1 else 'they take their'} default)"
        )
    return ", ".join(given)


def describe_input(value) -> str:
    if isinstance(value, torch.Tensor):
        dtype = {torch.bool: " bool", torch.float16: " float16", torch.bfloat16: " bfloat16", torch.float64: " float64"}
        return f"{tuple(value.shape)}" + dtype.get(value.dtype, "")
    if isinstance(value, (int, float)):
        return f"= {value!r}"
    if isinstance(value, str):
        return f"= {value!r}"
    if callable(value):
        return "= a function"
    return f"= a {type(value).__name__}"


def kind(value) -> str:
    """'None', 'a list', 'a str' ...: the type of a learner's value, never its (possibly huge) repr."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def items(count: int) -> str:
    return f"{count} item" if count == 1 else f"{count} items"


def _entries(count: int, total: int) -> str:
    return f"{count} of {total} entries"


def _index(index) -> str:
    return "[" + ", ".join(str(int(i)) for i in index) + "]"


def is_integral(value) -> bool:
    """Whether a learner's output is an integer of any kind (a Python int, ``np.int64``, ...), not a bool; the
    package's own ``_validation.is_int`` accepts Python ints only, as the sizes it checks are."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def equals_one_of(value, expected, candidates) -> str | None:
    """'It equals {text}.' for the first of ``candidates`` ((text, make) pairs, ``make()`` giving a tensor or a
    number) that the learner's ``value`` equals while the right answer does not; None when none does."""
    mine = _as_float_tensor(value)
    right = _as_float_tensor(expected)
    if mine is None or right is None:
        return None
    for text, make in candidates:
        try:
            other = _as_float_tensor(make())
        except Exception:
            continue
        if other is None or other.shape != mine.shape:
            continue
        if other.shape == right.shape and _near(other, right):
            continue
        if _near(mine, other):
            return f"It equals {text}."
    return None


def _as_float_tensor(value) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        if value.is_complex() or value.layout != torch.strided or value.device.type != "cpu":
            return None
        return value.detach().double()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return torch.tensor(float(value), dtype=torch.float64)
    return None
