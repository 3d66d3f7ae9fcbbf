"""The exercises of notebook 09: registered, the reference judged correct, a skeleton not attempted, each
catalogued mistake caught with its own hint, and learner code written differently from the package accepted."""

import pytest
import torch

from bertcourse import pretraining
from bertcourse.exercises import EXERCISES, check, solution
from bertcourse.exercises import pretraining as catalogue

OURS = [catalogue.MLM_CORRUPT, catalogue.TRUNCATE_PAIR, catalogue.MLM_ACCURACY]
MISTAKES = [pytest.param(ex, m, id=f"{ex.name}:{m.wrong.__name__}") for ex in OURS for m in ex.mistakes]


def not_implemented(*args):
    raise NotImplementedError


@pytest.mark.parametrize("exercise", OURS, ids=lambda e: e.name)
def test_registered_under_its_name_with_the_package_function_as_reference(exercise):
    assert EXERCISES[exercise.name] is exercise
    assert exercise.reference is getattr(pretraining, exercise.name)
    assert exercise.notebook == "09"
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


def corrupt_with_a_loop(input_ids, selected, draws, random_ids, mask_token_id):
    corrupted, labels = input_ids.clone().view(-1), torch.full_like(input_ids, -100).view(-1)
    for index in range(input_ids.numel()):
        if selected.view(-1)[index]:
            labels[index] = input_ids.view(-1)[index]
            draw = draws.view(-1)[index]
            if draw < 0.8:
                corrupted[index] = mask_token_id
            elif draw < 0.9:
                corrupted[index] = random_ids.view(-1)[index]
    return corrupted.view(input_ids.shape), labels.view(input_ids.shape)


def truncate_by_arithmetic(a, b, max_length):
    budget = max_length - 3
    len_a = min(len(a), max(-(-budget // 2), budget - len(b)))  # A keeps half the room (rounded up), or more
    return a[:len_a], b[: budget - len_a]


def accuracy_with_sums(prediction_logits, labels):
    selected = labels != -100
    hits = ((prediction_logits.argmax(-1) == labels) & selected).sum()
    return hits / selected.sum()


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("mlm_corrupt", corrupt_with_a_loop),
        ("truncate_pair", truncate_by_arithmetic),
        ("mlm_accuracy", accuracy_with_sums),
    ],
)
def test_other_correct_solutions_are_accepted(name, fn):
    assert check(name, fn).status == "correct", check(name, fn).message
