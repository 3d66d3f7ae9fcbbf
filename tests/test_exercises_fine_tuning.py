"""The exercises of notebook 10: learner code written differently from the package is judged as the package's
(the generic checks of every exercise, the registry, verdicts, hints and solutions, are in test_exercises.py)."""

import pytest
import torch

from bertcourse import finetuning
from bertcourse.exercises import check


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
