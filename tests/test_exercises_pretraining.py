"""The exercises of notebook 09: learner code written differently from the package is judged as the package's
(the generic checks of every exercise, the registry, verdicts, hints and solutions, are in test_exercises.py)."""

import pytest
import torch

from bertcourse.exercises import check


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
