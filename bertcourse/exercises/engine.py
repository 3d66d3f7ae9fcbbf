"""The checking engine: run the learner's function, match its outcome, word the problem.

The learner's function runs on every case; its outcome is compared with the reference and with
the catalogued mistakes, and the first problem is put into plain words. ``_run_check`` takes the
steps listed in the docstring of ``bertcourse.exercises``; ``_call`` runs one case, ``_matches``
decides whether a mistake explains the outcome, and ``_case_problem`` words what is wrong with
one case.
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

import torch

import bertcourse

from .records import CORRECT, NOT_ATTEMPTED, WRONG, Case, CheckResult, Exercise

# What PyTorch and the package raise for tensors of the wrong shape.
_SHAPE_ERRORS = (RuntimeError, ValueError, IndexError)

# Frames from these folders are ours (all of bertcourse/) or PyTorch's, never the learner's code.
_LIBRARY_DIRS = tuple(os.path.dirname(os.path.abspath(path)) + os.sep for path in (bertcourse.__file__, torch.__file__))


@dataclasses.dataclass
class _Outcome:
    """What one call gave: a value, or the exception it raised."""

    value: object = None
    error: BaseException | None = None
    changed_argument: str | None = None  # an input the call modified in place


@functools.cache
def _prepared(exercise: Exercise) -> tuple[list[Case], list]:
    """The cases of ``exercise`` and the reference's outputs on them (built once: they are seeded)."""
    cases = exercise.cases()
    return cases, [exercise.reference(*copy.deepcopy(case.args)) for case in cases]


@functools.cache
def _mistake_outcomes(exercise: Exercise) -> dict[str, list[_Outcome]]:
    """What every catalogued mistake of ``exercise`` gives on each case (built once)."""
    cases, names = _prepared(exercise)[0], exercise.argument_names()
    return {mistake.name: [_call(mistake.wrong, case.args, names) for case in cases] for mistake in exercise.mistakes}


def _run_check(exercise: Exercise, fn) -> CheckResult:
    cases, expected = _prepared(exercise)
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
        if _matches(exercise, learner, _mistake_outcomes(exercise)[mistake.name]):
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
