"""The exercises of notebook 11: learner code written differently from the package is judged as the package's
(the generic checks of every exercise, the registry, verdicts, hints and solutions, are in test_exercises.py)."""

import pytest
import torch

from bertcourse.exercises import check


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
