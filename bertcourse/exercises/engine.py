"""The checking engine: run the learner's function on every case, match the outcome, pick the message.

``run_check`` takes the steps listed in the docstring of ``bertcourse.exercises``. The learner's
function runs through ``sandbox.call`` (fixed state, time limit, plain values back); the
reference's outputs and the mistakes' outcomes are computed once per exercise, in the same fixed
state, and cached. ``_matches`` decides whether a catalogued mistake explains the learner's
outcome; ``case_problem`` words what is wrong with one case, with the helpers of ``diagnosis``.
"""

from __future__ import annotations

import copy
import functools
import itertools

import torch

from . import diagnosis, sandbox
from .records import CORRECT, NOT_ATTEMPTED, WRONG, Case, CheckResult, Exercise
from .sandbox import Outcome, TimedOut, call, fixed_state


@functools.cache
def prepared(exercise: Exercise) -> tuple[list[Case], list, list[str]]:
    """The cases of ``exercise``, the reference's outputs on them and the argument names (built once)."""
    with fixed_state():
        cases = exercise.cases()
        expected = [exercise.reference(*copy.deepcopy(case.args)) for case in cases]
    return cases, expected, exercise.argument_names(cases)


@functools.cache
def mistake_outcomes(exercise: Exercise) -> dict[str, list[Outcome]]:
    """What every catalogued mistake of ``exercise`` gives on each case (built once)."""
    cases, _, names = prepared(exercise)
    return {
        mistake.name: [call(mistake.wrong, case.args, names, time_limit=60.0) for case in cases]
        for mistake in exercise.mistakes
    }


def run_check(exercise: Exercise, fn) -> CheckResult:
    cases, expected, names = prepared(exercise)
    learner: list[Outcome] = []
    for index, case in enumerate(cases):
        outcome = call(fn, case.args, names)
        if not learner and isinstance(outcome.error, NotImplementedError):
            return CheckResult(
                exercise.name,
                NOT_ATTEMPTED,
                "⏳ Not attempted yet: replace `raise NotImplementedError` with your code. "
                f"Start with: {exercise.start}",
            )
        if isinstance(outcome.error, TimedOut):
            return CheckResult(
                exercise.name,
                WRONG,
                f"❌ Wrong: on test case {index + 1} of {len(cases)} ({case.label}) your function was still running "
                f"after {sandbox.CALL_TIME_LIMIT_S:g} s and was stopped. The cases are tiny, so a right answer "
                "takes milliseconds: look for a loop that never ends.",
            )
        learner.append(outcome)

    problems = [case_problem(exercise, case, o, e) for case, o, e in zip(cases, learner, expected, strict=True)]
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
        if _matches(exercise, learner, mistake_outcomes(exercise)[mistake.name]):
            return CheckResult(
                exercise.name,
                WRONG,
                f"❌ Wrong: looks like {mistake.name}. Hint: {mistake.hint}",
                mistake=mistake.name,
            )

    combination = _knob_match(exercise, learner)
    if combination is not None:
        slips, hints = combination
        return CheckResult(
            exercise.name,
            WRONG,
            f"❌ Wrong: looks like {' and '.join(slips)}. Hint: {' '.join(hints)}",
            mistake=" and ".join(slips),
        )

    index = next(i for i, problem in enumerate(problems) if problem)
    case = cases[index]
    lines = [
        f"❌ Wrong on test case {index + 1} of {len(cases)} ({case.label}).",
        f"Inputs: {diagnosis.describe_arguments(case.args, names)}.",
        problems[index],
    ]
    summary = diagnosis.cases_summary(cases, [problem is not None for problem in problems])
    if summary:
        lines.append(summary)
    return CheckResult(exercise.name, WRONG, "\n".join(lines))


def _matches(exercise: Exercise, learner: list[Outcome], wrong) -> bool:
    """True when the mistake explains the learner's outcome on every case.

    It must also give at least one equal output, or fail on every case with the same telling kind of
    error (``view`` after a transpose, ``if mask:``): a shape error alone comes from too many slips.
    """
    equal_outputs, kinds = 0, set()
    for mine, theirs in zip(learner, wrong, strict=True):
        if mine.error is not None or theirs.error is not None:
            if not diagnosis.same_failure(mine.error, theirs.error):
                return False
            kinds.add(diagnosis.error_kind(mine.error))
            continue
        if not _same_output(exercise, mine.value, theirs.value):
            return False
        equal_outputs += 1
    return equal_outputs > 0 or (len(kinds) == 1 and kinds.isdisjoint({None, "shape", "signature"}))


_MAX_SLIPS = 2  # combinations of at most this many slips are tried: more would name a different formula


def _knob_match(exercise: Exercise, learner: list[Outcome]) -> tuple[list[str], list[str]] | None:
    """The slips and hints of the first combination of the exercise's knobs that explains the learner's outcome."""
    if not exercise.knobs:
        return None
    choices = [range(len(knob.options)) for knob in exercise.knobs]
    combinations = [c for c in itertools.product(*choices) if 0 < sum(i != 0 for i in c) <= _MAX_SLIPS]
    combinations.sort(key=lambda c: sum(i != 0 for i in c))
    for combination in combinations:
        outcomes = (_variant_outcome(exercise, combination, index) for index in range(len(learner)))
        if _matches(exercise, learner, outcomes):
            chosen = [knob.options[i] for knob, i in zip(exercise.knobs, combination, strict=True) if i]
            return [slip for _, slip, _ in chosen], [hint for _, _, hint in chosen]
    return None


@functools.cache
def _variant_outcome(exercise: Exercise, combination: tuple[int, ...], index: int) -> Outcome:
    """What the exercise's formula gives on case ``index`` with the knobs set as in ``combination`` (built once)."""
    cases, _, names = prepared(exercise)
    settings = {knob.name: knob.options[i][0] for knob, i in zip(exercise.knobs, combination, strict=True)}
    return call(functools.partial(exercise.variant, settings), cases[index].args, names, time_limit=60.0)


def _same_output(exercise: Exercise, value, other) -> bool:
    if exercise.outputs:
        if not isinstance(value, (tuple, list)) or len(value) != len(other):
            return False
        return all(diagnosis.same_value(exercise, v, o) for v, o in zip(value, other, strict=True))
    return diagnosis.same_value(exercise, value, other)


def case_problem(exercise: Exercise, case: Case, outcome: Outcome, expected) -> str | None:
    """What is wrong with one case's outcome, in plain words; None when it is right."""
    if outcome.error is not None:
        return diagnosis.error_problem(outcome.error)
    value = outcome.value
    if exercise.outputs:
        names = ", ".join(exercise.outputs)
        if not isinstance(value, (tuple, list)):
            return f"Your function returned {diagnosis.kind(value)}; expected a tuple ({names})."
        if len(value) != len(expected):
            return (
                f"Your function returned a {type(value).__name__} of {diagnosis.items(len(value))}; "
                f"expected {len(expected)}: ({names})."
            )
        order = _reordered(exercise, value, expected)
        if order is not None:
            return (
                f"Your function returned the right items in the order ({', '.join(order)}); return them as ({names})."
            )
        problems = [
            _item_problem(exercise, case, f"`{name}`", item, exp, exercise.axes.get(name, ()))
            for name, item, exp in zip(exercise.outputs, value, expected, strict=True)
        ]
        return "\n".join(problem for problem in problems if problem) or None
    return _item_problem(exercise, case, "Your output", value, expected, exercise.axes.get("", ()))


def _item_problem(exercise: Exercise, case: Case, subject: str, value, expected, axes) -> str | None:
    if isinstance(expected, torch.Tensor):
        problem = diagnosis.value_problem(exercise, case, subject, value, expected, axes)
    elif isinstance(expected, float):
        problem = diagnosis.number_problem(exercise, subject, value, expected)
    elif isinstance(expected, int):
        problem = diagnosis.count_problem(value, expected)
    else:
        problem = diagnosis.text_problem(subject, value, expected)
    if problem and exercise.explain is not None:
        extra = exercise.explain(case, value, expected)
        if extra:
            problem = f"{problem} {extra}"
    return problem


def _reordered(exercise: Exercise, value, expected) -> list[str] | None:
    """The output names in the order the learner returned them, if that is a reordering of the right items."""
    remaining = list(range(len(expected)))
    order = []
    for item in value:
        match = next((j for j in remaining if diagnosis.same_value(exercise, item, expected[j])), None)
        if match is None:
            return None
        remaining.remove(match)
        order.append(match)
    if order == sorted(order):
        return None
    return [exercise.outputs[j] for j in order]
