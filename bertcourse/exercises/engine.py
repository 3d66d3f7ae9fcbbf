"""The checking engine: run the learner's function on every case, match the outcome, pick the message.

``run_check`` takes the steps listed in the docstring of ``bertcourse.exercises``. The learner's
function runs through ``sandbox.call`` (fixed state, time limit, plain values back); the
reference's outputs and the mistakes' outcomes are computed once per exercise, in the same fixed
state, and cached. ``_matches`` decides whether a catalogued mistake explains the learner's
outcome; ``case_problem`` words what is wrong with one case, with the helpers of ``diagnosis``.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import os
import sys

import torch

import bertcourse

from . import diagnosis, sandbox
from .gradients import gradient_problem
from .records import CORRECT, NOT_ATTEMPTED, WRONG, Case, CheckResult, Exercise
from .sandbox import Outcome, TimedOut, Watch, call, fixed_state

_PACKAGE_DIR = os.path.dirname(os.path.abspath(bertcourse.__file__)) + os.sep
_JUDGE_THE_PACKAGE = [False]  # True inside ``judging_the_package()``


@contextlib.contextmanager
def judging_the_package():
    """Judge the package's own functions like any other: how the tests prove that every reference passes.

    Outside it, a learner's function that is, or calls, the package's code for the exercise's concept is
    told so and never judged correct.
    """
    previous = _JUDGE_THE_PACKAGE[0]
    _JUDGE_THE_PACKAGE[0] = True
    try:
        yield
    finally:
        _JUDGE_THE_PACKAGE[0] = previous


@functools.cache
def concept_codes(exercise: Exercise) -> tuple[frozenset, frozenset]:
    """(the code objects of ``exercise``'s concept, those of every other exercise's reference and core).

    The concept is the reference, its core and helpers (what ``solution`` shows) and a module class of the
    same name; a helper that is another exercise's reference or core belongs to that exercise, which a
    learner may call (``bc.layer_norm`` inside an encoder layer).
    """
    from .registry import EXERCISES  # the registry imports this module

    def code(function):
        return getattr(function, "__code__", None)

    def main(other: Exercise) -> set:
        module = sys.modules[other.reference.__module__]
        return {code(other.reference), code(getattr(module, other.core_name(), None))} - {None}

    others = set().union(*(main(other) for other in EXERCISES.values() if other.name != exercise.name))
    helpers = {code(f) for f in exercise.concept_functions()} - {None}
    own = main(exercise) | (helpers - others)
    return frozenset(own), frozenset(others - own)


def _watch(exercise: Exercise) -> Watch | None:
    if _JUDGE_THE_PACKAGE[0]:
        return None
    own, others = concept_codes(exercise)
    return Watch(own, others, _PACKAGE_DIR)


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


def _named_args(cases: list[Case], names: list[str], name: str) -> list:
    """The value of argument ``name`` in every case that passes it."""
    where = names.index(name)
    return [case.args[where] for case in cases if where < len(case.args)]


def run_check(exercise: Exercise, fn) -> CheckResult:
    cases, expected, names = prepared(exercise)
    learner: list[Outcome] = []
    for index, case in enumerate(cases):
        outcome = call(fn, case.args, names, watch=_watch(exercise))
        if not learner and diagnosis.is_skeleton(outcome.error):
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

    reached = next((o.reached for o in learner if o.reached), None)
    problems = [case_problem(exercise, case, o, e) for case, o, e in zip(cases, learner, expected, strict=True)]
    if not any(problems):
        if reached and reached.endswith(".__init__"):  # a package module built, whose parameters answer it
            built = reached.removesuffix(".__init__")
            return CheckResult(
                exercise.name,
                WRONG,
                f"❌ Wrong: this builds bertcourse's own `{built}`, which holds the answer to `{exercise.name}`, so "
                "the results are the package's, not yours: work it out from the inputs, without building the "
                "model.",
                mistake=f"builds bertcourse's own {built}",
            )
        if reached and not reached.startswith("bertcourse."):  # a library function that is the whole answer
            return CheckResult(
                exercise.name,
                WRONG,
                f"❌ Wrong: this calls PyTorch's `{reached}`, which computes `{exercise.name}` for you, so the "
                "results are PyTorch's, not yours: write the formula yourself. (Other PyTorch functions are fine.)",
                mistake=f"calls {reached}",
            )
        if reached:
            return CheckResult(
                exercise.name,
                WRONG,
                f"❌ Wrong: this calls bertcourse's own `{reached}`, which computes `{exercise.name}` for you, so "
                "the results are the package's, not yours: write it yourself. (Other bertcourse functions, "
                "such as those of earlier exercises, are fine to call.)",
                mistake=f"calls bertcourse's own {reached}",
            )
        changed = next((o.changed_argument for o in learner if o.changed_argument), None)
        if changed and any(isinstance(arg, torch.nn.Module) for arg in _named_args(cases, names, changed)):
            return CheckResult(
                exercise.name,
                WRONG,
                f"❌ Wrong: your results are right, but your function gives `{changed}` back changed: in another "
                "mode (train or eval) or with other weights. Note its mode first (`was_training = model.training`) "
                "and restore it at the end (`model.train(was_training)`).",
                mistake="the model not given back as it came",
            )
        if changed:
            return CheckResult(
                exercise.name,
                WRONG,
                f"❌ Wrong: your results are right, but your function changes its input `{changed}` in place. "
                "Build new tensors instead (`x = x - mean`, not `x -= mean`; avoid methods ending in `_`).",
            )
        cut = gradient_problem(exercise, fn, cases, names) if exercise.gradients else None
        if cut:
            return CheckResult(exercise.name, WRONG, f"❌ Wrong: {cut}", mistake="the gradient cut")
        checked = ", gradients included" if exercise.gradients else ""
        return CheckResult(
            exercise.name,
            CORRECT,
            f"✅ Correct: `{exercise.name}` matches the reference on all {len(cases)} test cases{checked}.",
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
    inside = _calls_note(exercise, fn, case, names)
    if inside:
        lines.append(inside)
    if _random(exercise, fn, case, names, learner[index]):
        lines.append(
            "Your function gives other numbers when the random generator is seeded otherwise: something in it is "
            "random (dropout left on, `torch.rand`?), and the exercise's answer is not."
        )
    summary = diagnosis.cases_summary(cases, [problem is not None for problem in problems], names, exercise.reference)
    if summary:
        lines.append(summary)
    if reached:
        lines.append(
            f"Note: this calls {'bertcourse' if reached.startswith('bertcourse.') else 'PyTorch'}'s own "
            f"`{reached}`, which computes `{exercise.name}` for you: the check is for code you write yourself."
        )
    return CheckResult(exercise.name, WRONG, "\n".join(lines))


def _random(exercise: Exercise, fn, case: Case, names: list[str], first: Outcome) -> bool:
    """True when the learner's output on ``case`` changes with the seed of the random generators (the reference's
    never does: the check seeds every call the same, so a random answer would otherwise look merely wrong)."""
    if first.error is not None:
        return False
    saved = sandbox._SEED
    try:
        sandbox._SEED = saved + 1
        again = call(fn, case.args, names)
    finally:
        sandbox._SEED = saved
    if again.error is not None:
        return False
    try:
        return not _identical(again.value, first.value)
    except Exception:
        return False


def _identical(a, b) -> bool:
    """The same output twice: equal tensors (NaN where NaN was), containers item by item, anything else by ==."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if (
            not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor))
            or a.shape != b.shape
            or a.dtype != b.dtype
        ):
            return False
        if a.layout != torch.strided or b.layout != torch.strided or a.device != b.device:
            return True  # nothing to compare here safely: not called random
        return sandbox._equal_with_nan(a, b)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True  # NaN twice
    return bool(a == b)


class _Recorder:
    """A function argument of a case that notes the first inputs it is called with (the same one after a deep copy)."""

    def __init__(self, function, keep: int = 8):
        self.function, self.keep, self.inputs = function, keep, []

    def __call__(self, *args, **kwargs):
        if len(self.inputs) < self.keep:
            first = args[0] if args else next(iter(kwargs.values()), None)
            self.inputs.append(sandbox.plain(first).clone() if isinstance(first, torch.Tensor) else first)
        return self.function(*args, **kwargs)

    def __deepcopy__(self, memo):
        return self


def _calls_note(exercise: Exercise, fn, case: Case, names: list[str]) -> str | None:
    """What ``exercise.explain_calls`` says of the function arguments the learner's function called on ``case``."""
    if exercise.explain_calls is None:
        return None
    recorders = {}
    args = list(case.args)

    def plain_function(value) -> bool:
        return callable(value) and not isinstance(value, (torch.Tensor, torch.nn.Module, type))

    for index, argument in enumerate(args):
        if plain_function(argument):
            recorders[names[index]] = args[index] = _Recorder(argument)
        elif isinstance(argument, list) and all(isinstance(item, tuple) for item in argument):
            rows = []  # a list of tuples that hold functions (a stack's layers): each function recorded
            for i, item in enumerate(argument):
                row = []
                for j, part in enumerate(item):
                    if plain_function(part):
                        part = recorders[f"{names[index]}[{i}][{j}]"] = _Recorder(part)
                    row.append(part)
                rows.append(tuple(row))
            args[index] = rows
    if not recorders:
        return None
    outcome = call(fn, tuple(args), names)
    if isinstance(outcome.error, TimedOut):
        return None
    try:
        with fixed_state():
            return exercise.explain_calls(case, {name: r.inputs for name, r in recorders.items()})
    except Exception:
        return None


def _matches(exercise: Exercise, learner: list[Outcome], wrong) -> bool:
    """True when the mistake explains the learner's outcome on every case.

    It must also give at least one equal output, or fail on every case with the same telling kind of
    error (``view`` after a transpose, ``if mask:``): a shape error alone comes from too many slips.
    """
    cases, expected, _ = prepared(exercise)
    equal_outputs, kinds = 0, set()
    for mine, theirs, case, right in zip(learner, wrong, cases, expected, strict=True):
        if mine.error is not None or theirs.error is not None:
            if not diagnosis.same_failure(mine.error, theirs.error):
                return False
            kinds.add(diagnosis.error_kind(mine.error))
            continue
        if not _same_output(exercise, case, mine.value, theirs.value, right):
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


def _same_output(exercise: Exercise, case: Case, value, other, right) -> bool:
    """The learner's output ``value`` is the mistake's ``other`` (``right`` is the reference's output).

    Values compare whatever the dtypes, except where the mistake's dtype is part of the mistake (it differs
    from the right one: a mask left as integers), which the learner's output must then share.
    """
    if exercise.outputs:
        if not isinstance(value, (tuple, list)) or not isinstance(other, (tuple, list)) or len(value) != len(other):
            return False
        rights = right if isinstance(right, (tuple, list)) and len(right) == len(other) else [None] * len(other)
        return all(_same_item(exercise, case, v, o, r) for v, o, r in zip(value, other, rights, strict=True))
    return _same_item(exercise, case, value, other, right)


def _same_item(exercise: Exercise, case: Case, value, other, right) -> bool:
    tensors = isinstance(other, torch.Tensor) and isinstance(right, torch.Tensor)
    if tensors and other.dtype != right.dtype and (not isinstance(value, torch.Tensor) or value.dtype != other.dtype):
        return False
    return diagnosis.same_value(exercise, value, other, case)


def case_problem(exercise: Exercise, case: Case, outcome: Outcome, expected) -> str | None:
    """What is wrong with one case's outcome, in plain words; None when it is right."""
    if outcome.error is not None:
        return diagnosis.error_problem(outcome.error)
    value = outcome.value
    if outcome.returned and not (exercise.outputs and len(exercise.outputs) == 2):
        return (
            f"Your function returned a `{outcome.returned}`: the pair (values, indices) that `.max(dim)`, "
            "`.min(dim)`, `.sort`, `.topk` and `.median(dim)` give. Take its `.values` (or its `.indices`), or use "
            "`.amax(dim)` for the values alone."
        )
    if exercise.outputs:
        names = ", ".join(exercise.outputs)
        if not isinstance(value, (tuple, list)):
            return f"Your function returned {diagnosis.kind(value)}; expected a tuple ({names})."
        if len(value) != len(expected):
            return (
                f"Your function returned a {type(value).__name__} of {diagnosis.items(len(value))}; "
                f"expected {len(expected)}: ({names})."
            )
        order = _reordered(exercise, case, value, expected)
        if order is not None:
            return (
                f"Your function returned the right items in the order ({', '.join(order)}); return them as ({names})."
            )
        problems = [
            _item_problem(exercise, case, f"`{name}`", item, exp, exercise.axes.get(name, ()))
            for name, item, exp in zip(exercise.outputs, value, expected, strict=True)
        ]
        problems = [
            problem + _twin(exercise, case, index, value[index], expected) if problem else problem
            for index, problem in enumerate(problems)
        ]
        text = "\n".join(problem for problem in problems if problem) or None
        if text and exercise.explain_outputs is not None:
            extra = _explained(exercise.explain_outputs, case, value, expected)
            if extra:
                text = f"{text}\n{extra}"
        return text
    return _item_problem(exercise, case, "Your output", value, expected, exercise.axes.get("", ()))


def _twin(exercise: Exercise, case: Case, index: int, item, expected) -> str:
    """' It equals the right `q`.' when a wrong output item is another item's right value (one part used twice)."""
    for other, (name, right) in enumerate(zip(exercise.outputs, expected, strict=True)):
        if other != index and diagnosis.same_value(exercise, item, right, case):
            return f" It equals the right `{name}`: the same part taken twice?"
    return ""


def _item_problem(exercise: Exercise, case: Case, subject: str, value, expected, axes) -> str | None:
    if isinstance(expected, torch.Tensor):
        problem = diagnosis.value_problem(exercise, case, subject, value, expected, axes)
    elif isinstance(expected, float):
        problem = diagnosis.number_problem(exercise, subject, value, expected, case)
    elif isinstance(expected, int):
        problem = diagnosis.count_problem(value, expected)
    else:
        problem = diagnosis.text_problem(subject, value, expected)
    if problem and exercise.explain is not None:
        extra = _explained(exercise.explain, case, value, expected)
        if extra:
            problem = f"{problem} {extra}"
    return problem


def _explained(explain, case: Case, value, expected) -> str | None:
    """What an exercise's ``explain`` says of a wrong output; None if it cannot read that output (a tensor on
    another device, a sparse one, a subclass): the message already says what is wrong with it."""
    try:
        with fixed_state():
            return explain(case, value, expected)
    except Exception:
        return None


def _reordered(exercise: Exercise, case: Case, value, expected) -> list[str] | None:
    """The output names in the order the learner returned them, if that is a reordering of the right items."""
    remaining = list(range(len(expected)))
    order = []
    for item in value:
        match = next((j for j in remaining if diagnosis.same_value(exercise, item, expected[j], case)), None)
        if match is None:
            return None
        remaining.remove(match)
        order.append(match)
    if order == sorted(order):
        return None
    return [exercise.outputs[j] for j in order]
