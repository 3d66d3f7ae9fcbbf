"""The exercises of notebook 10: registered, the reference judged correct, a skeleton not attempted, each
catalogued mistake caught with its own hint, and learner code written differently from the package accepted."""

import pytest
import torch

from bertcourse import finetuning
from bertcourse.exercises import EXERCISES, check, solution
from bertcourse.exercises import fine_tuning as catalogue

OURS = [catalogue.ALIGN_WORD_LABELS, catalogue.BEST_SPAN]
MISTAKES = [pytest.param(ex, m, id=f"{ex.name}:{m.wrong.__name__}") for ex in OURS for m in ex.mistakes]


def not_implemented(*args):
    raise NotImplementedError


@pytest.mark.parametrize("exercise", OURS, ids=lambda e: e.name)
def test_registered_under_its_name_with_the_package_function_as_reference(exercise):
    assert EXERCISES[exercise.name] is exercise
    assert exercise.reference is getattr(finetuning, exercise.name)
    assert exercise.notebook == "10"
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


def align_with_a_set(word_ids, word_labels):
    seen, labels = set(), []
    for word in word_ids:
        labels.append(-100 if word is None or word in seen else word_labels[word])
        if word is not None:
            seen.add(word)
    return torch.tensor(labels)


def span_with_loops(start_logits, end_logits, context_mask, max_answer_length):
    flat_start, flat_end = (
        start_logits.reshape(-1, start_logits.shape[-1]),
        end_logits.reshape(-1, end_logits.shape[-1]),
    )
    flat_mask = context_mask.reshape(-1, context_mask.shape[-1])
    spans = []
    for s, e, m in zip(flat_start.tolist(), flat_end.tolist(), flat_mask.tolist(), strict=True):
        best, where = float("-inf"), [0, 0]
        for i in range(len(s)):
            for j in range(i, min(len(s), i + max_answer_length)):
                if m[i] and m[j] and s[i] + e[j] > best:
                    best, where = s[i] + e[j], [i, j]
        spans.append(where)
    return torch.tensor(spans).reshape(*start_logits.shape[:-1], 2)


@pytest.mark.parametrize(("name", "fn"), [("align_word_labels", align_with_a_set), ("best_span", span_with_loops)])
def test_other_correct_solutions_are_accepted(name, fn):
    assert check(name, fn).status == "correct"


def test_a_list_instead_of_a_tensor_is_explained():
    def as_list(word_ids, word_labels):
        return finetuning.align_word_labels(word_ids, word_labels).tolist()

    result = check("align_word_labels", as_list)
    assert result.status == "wrong" and "torch.Tensor" in result.message
