"""The exercises of notebook 11: registered, the reference judged correct, a skeleton not attempted, each
catalogued mistake caught with its own hint, and learner code written differently from the package accepted."""

import pytest
import torch

from bertcourse import long_inputs as li
from bertcourse.exercises import EXERCISES, check, solution
from bertcourse.exercises import long_inputs as catalogue

OURS = [catalogue.WINDOW_SPANS, catalogue.MERGE_SOFTMAX_BLOCKS, catalogue.LOCAL_GLOBAL_MASK]
MISTAKES = [pytest.param(ex, m, id=f"{ex.name}:{m.wrong.__name__}") for ex in OURS for m in ex.mistakes]


def not_implemented(*args):
    raise NotImplementedError


@pytest.mark.parametrize("exercise", OURS, ids=lambda e: e.name)
def test_registered_under_its_name_with_the_package_function_as_reference(exercise):
    assert EXERCISES[exercise.name] is exercise
    assert exercise.reference is getattr(li, exercise.name)
    assert exercise.notebook == "11"
    assert len({m.hint for m in exercise.mistakes}) == len(exercise.mistakes) >= 3


@pytest.mark.parametrize("exercise", OURS, ids=lambda e: e.name)
def test_reference_is_correct_and_a_skeleton_is_not_attempted(exercise):
    assert check(exercise.name, exercise.reference).status == "correct"
    result = check(exercise.name, not_implemented)
    assert result.status == "not_attempted" and result.message.endswith(f"Start with: {exercise.start}")


@pytest.mark.parametrize(("exercise", "mistake"), MISTAKES)
def test_each_catalogued_mistake_gets_its_own_hint(exercise, mistake):
    result = check(exercise.name, mistake.wrong)
    assert (result.status, result.mistake) == ("wrong", mistake.name)
    assert result.message == f"❌ Wrong: looks like {mistake.name}. Hint: {mistake.hint}"


@pytest.mark.parametrize("exercise", OURS, ids=lambda e: e.name)
def test_solution_shows_the_core(exercise):
    assert f"def _{exercise.name}(" in repr(solution(exercise.name))


def spans_with_a_loop(n_tokens, window, stride):
    spans, start = [], 0
    while True:
        spans.append([start, min(start + window, n_tokens)])
        if start + window >= n_tokens:
            return torch.tensor(spans)
        start += stride


def merge_with_logsumexp(max_a, sum_a, out_a, max_b, sum_b, out_b):
    new_max = torch.max(torch.cat([max_a, max_b], dim=-1), dim=-1, keepdim=True).values
    safe = torch.nan_to_num(new_max, neginf=0.0)
    a, b = (max_a - safe).exp(), (max_b - safe).exp()
    return new_max, a * sum_a + b * sum_b, a * out_a + b * out_b


def mask_with_loops(seq_len, width, global_positions):
    mask = torch.zeros(seq_len, seq_len, dtype=torch.bool)
    for i in range(seq_len):
        for j in range(seq_len):
            mask[i, j] = abs(i - j) <= width or i in global_positions or j in global_positions
    return mask


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("window_spans", spans_with_a_loop),
        ("merge_softmax_blocks", merge_with_logsumexp),
        ("local_global_mask", mask_with_loops),
    ],
)
def test_other_correct_solutions_are_accepted(name, fn):
    assert check(name, fn).status == "correct"


def test_a_merge_that_returns_nan_for_an_empty_row_is_told_how_to_avoid_it():
    def naive(max_a, sum_a, out_a, max_b, sum_b, out_b):
        new_max = torch.maximum(max_a, max_b)
        a, b = torch.exp(max_a - new_max), torch.exp(max_b - new_max)
        return new_max, a * sum_a + b * sum_b, a * out_a + b * out_b

    result = check("merge_softmax_blocks", naive)
    assert result.mistake == "NaN where a query sees no key in either block"
    assert "torch.where(new_max == -math.inf, 0.0, new_max)" in result.message
