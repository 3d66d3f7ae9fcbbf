"""The exercises of notebook 11: learner code written differently from the package is judged as the package's,
realistic wrong answers nobody catalogued get a message that names what is wrong (a structural reading of a
mask, which tokens of a merge are wrong), and the retired names still check (the generic checks of every
exercise, the registry, verdicts, hints and solutions, are in test_exercises.py)."""

import math
import re
from pathlib import Path

import nbformat
import pytest
import torch

from bertcourse.exercises import EXERCISES, check, registry

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "11_long_inputs.ipynb"
SOLUTION = re.compile(r"<details>\s*<summary>Solution</summary>\s*```python\n(.*?)```\s*</details>", re.S)


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


def average_with_index_add(last_hidden_state, spans):
    n_tokens = int(spans[:, 1].max())
    total = torch.zeros(n_tokens, last_hidden_state.shape[-1])
    count = torch.zeros(n_tokens)
    for w, (start, end) in enumerate(spans.tolist()):
        index = torch.arange(start, end)
        total.index_add_(0, index, last_hidden_state[w, 1 : 1 + end - start])
        count.index_add_(0, index, torch.ones(end - start))
    return total / count[:, None]


def average_by_gathering(last_hidden_state, spans):
    rows = []
    for i in range(int(spans[:, 1].max())):
        holding = [(w, i - s + 1) for w, (s, e) in enumerate(spans.tolist()) if s <= i < e]
        rows.append(torch.stack([last_hidden_state[w, r] for w, r in holding]).mean(dim=0))
    return torch.stack(rows)


def longformer_with_where(attention_mask, is_global, width):
    seq = attention_mask.shape[1]
    i = torch.arange(seq).view(1, seq, 1)
    j = torch.arange(seq).view(1, 1, seq)
    near = (i - j).abs() <= width
    touches = is_global.unsqueeze(2) | is_global.unsqueeze(1)
    return torch.where(attention_mask.unsqueeze(1) == 1, near | touches, False)


def longformer_with_loops(attention_mask, is_global, width):
    batch, seq = attention_mask.shape
    mask = torch.zeros(batch, seq, seq, dtype=torch.bool)
    for b in range(batch):
        for i in range(seq):
            for j in range(seq):
                allowed = abs(i - j) <= width or bool(is_global[b, i]) or bool(is_global[b, j])
                mask[b, i, j] = allowed and bool(attention_mask[b, j])
    return mask


CORRECT = [
    ("window_spans", spans_with_a_loop),
    ("merge_softmax_blocks", merge_with_logsumexp),
    ("local_global_mask", mask_with_loops),
    ("average_token_outputs", average_with_index_add),
    ("average_token_outputs", average_by_gathering),
    ("longformer_mask", longformer_with_where),
    ("longformer_mask", longformer_with_loops),
]


@pytest.mark.parametrize(("name", "fn"), CORRECT, ids=[fn.__name__ for _, fn in CORRECT])
def test_other_correct_solutions_are_accepted(name, fn):
    result = check(name, fn)
    assert result.status == "correct", result.message


def skeleton(*args):
    raise NotImplementedError  # replace this line with your code


def test_notebook_11_asks_for_the_new_exercises_and_the_old_names_still_check():
    assert registry.NOTEBOOK_ASKS["11"] == ("average_token_outputs", "merge_softmax_blocks", "longformer_mask")
    assert {"window_spans", "local_global_mask"} <= registry.RETIRED
    assert registry.RETIRED.isdisjoint(registry.NOTEBOOK_ASKS["11"])
    for name in ("window_spans", "local_global_mask", *registry.NOTEBOOK_ASKS["11"]):
        assert EXERCISES[name].notebook == "11"
        assert check(name, skeleton).status == "not_attempted"
    assert all(check(name, fn).passed for name, fn in CORRECT)


def test_the_new_references_are_not_in_the_namespace_the_notebook_imports():
    from bertcourse import long_inputs as li

    assert not hasattr(li, "average_token_outputs") and not hasattr(li, "longformer_mask")


def _positions(n):
    p = torch.arange(n)
    return p[:, None] - p[None, :]


def _globals(n, positions):
    g = torch.zeros(n, dtype=torch.bool)
    g[list(positions)] = True
    return g


def average_reads_one_row_late(last_hidden_state, spans):
    total = torch.zeros(int(spans[:, 1].max()), last_hidden_state.shape[-1])
    count = torch.zeros(total.shape[0], 1)
    for w, (s, e) in enumerate(spans.tolist()):
        total[s:e] += last_hidden_state[w, 2 : 2 + e - s]
        count[s:e] += 1
    return total / count


def average_halves_everything(last_hidden_state, spans):
    total = torch.zeros(int(spans[:, 1].max()), last_hidden_state.shape[-1])
    for w, (s, e) in enumerate(spans.tolist()):
        total[s:e] += last_hidden_state[w, 1 : 1 + e - s]
    return total / 2


def average_maximum(last_hidden_state, spans):
    out = torch.full((int(spans[:, 1].max()), last_hidden_state.shape[-1]), -1e9)
    for w, (s, e) in enumerate(spans.tolist()):
        out[s:e] = torch.maximum(out[s:e], last_hidden_state[w, 1 : 1 + e - s])
    return out


def average_of_window_means(last_hidden_state, spans):
    out = torch.zeros(int(spans[:, 1].max()), last_hidden_state.shape[-1])
    for w, (s, e) in enumerate(spans.tolist()):
        out[s:e] = last_hidden_state[w, 1 : 1 + e - s].mean(dim=0)
    return out


def average_first_two_windows_only(last_hidden_state, spans):
    total = torch.zeros(int(spans[:, 1].max()), last_hidden_state.shape[-1])
    count = torch.zeros(total.shape[0], 1)
    for w, (s, e) in enumerate(spans.tolist()):
        if w < 2:
            total[s:e] += last_hidden_state[w, 1 : 1 + e - s]
            count[s:e] += 1
        else:
            total[s:e], count[s:e] = last_hidden_state[w, 1 : 1 + e - s], 1
    return total / count


def average_in_float64(last_hidden_state, spans):
    return average_by_gathering(last_hidden_state, spans).double()


def mask_one_sided_ahead(attention_mask, is_global, width):
    o = _positions(attention_mask.shape[1])
    band = (o <= 0) & (o >= -width)
    return (band | is_global[:, :, None] | is_global[:, None, :]) & attention_mask.bool()[:, None, :]


def mask_lopsided(attention_mask, is_global, width):
    o = _positions(attention_mask.shape[1])
    band = (o <= width) & (o > -width)
    return (band | is_global[:, :, None] | is_global[:, None, :]) & attention_mask.bool()[:, None, :]


def mask_globals_read_padding(attention_mask, is_global, width):
    band = _positions(attention_mask.shape[1]).abs() <= width
    return ((band | is_global[:, None, :]) & attention_mask.bool()[:, None, :]) | is_global[:, :, None]


def mask_diagonal_missing(attention_mask, is_global, width):
    o = _positions(attention_mask.shape[1])
    band = (o.abs() <= width) & (o != 0)
    return (band | is_global[:, :, None] | is_global[:, None, :]) & attention_mask.bool()[:, None, :]


def mask_first_text_only(attention_mask, is_global, width):
    band = _positions(attention_mask.shape[1]).abs() <= width
    return (band | is_global[0][:, None] | is_global[0][None, :]) & attention_mask[0].bool()[None, :]


def mask_global_rows_only_by_loop(attention_mask, is_global, width):
    mask = (_positions(attention_mask.shape[1]).abs() <= width).repeat(attention_mask.shape[0], 1, 1)
    for b, i in is_global.nonzero().tolist():
        mask[b, i, :] = True
    return mask & attention_mask.bool()[:, None, :]


def local_one_sided_ahead(seq_len, width, global_positions):
    o, g = _positions(seq_len), _globals(seq_len, global_positions)
    return ((o <= 0) & (o >= -width)) | g[:, None] | g[None, :]


def local_diagonal_missing(seq_len, width, global_positions):
    o, g = _positions(seq_len), _globals(seq_len, global_positions)
    return ((o.abs() <= width) & (o != 0)) | g[:, None] | g[None, :]


def local_lopsided(seq_len, width, global_positions):
    o, g = _positions(seq_len), _globals(seq_len, global_positions)
    return ((o <= width + 1) & (o >= -width)) | g[:, None] | g[None, :]


WRONG = [
    ("average_token_outputs", average_reads_one_row_late, "from the row 1 after theirs"),
    ("average_token_outputs", average_halves_everything, "their row times a factor"),
    ("average_token_outputs", average_maximum, "tokens in an overlap are wrong"),
    ("average_token_outputs", average_of_window_means, "Even tokens that only one window holds are wrong"),
    ("average_token_outputs", average_first_two_windows_only, "2 of the 4 tokens in an overlap are wrong"),
    ("average_token_outputs", average_in_float64, "dtype torch.float64"),
    ("longformer_mask", mask_one_sided_ahead, "your band is one-sided"),
    ("longformer_mask", mask_lopsided, "your band is lopsided"),
    ("longformer_mask", mask_globals_read_padding, "only the global tokens' rows reach padding keys"),
    ("longformer_mask", mask_diagonal_missing, "your band allows offsets i - j -2, -1, 1, 2"),
    ("longformer_mask", mask_first_text_only, "leading axes (1,) are missing"),
    ("longformer_mask", mask_global_rows_only_by_loop, "the global columns missing"),
    ("local_global_mask", local_one_sided_ahead, "only keys ahead of the query"),
    ("local_global_mask", local_diagonal_missing, "Your band allows offsets i - j -1, 1"),
    ("local_global_mask", local_lopsided, "Your band is lopsided"),
]
MISLEADING = ("times a factor", "batch axis", "transpose")


@pytest.mark.parametrize(("name", "fn", "words"), WRONG, ids=[fn.__name__ for _, fn, _ in WRONG])
def test_an_unforeseen_wrong_answer_gets_a_message_that_names_what_is_wrong(name, fn, words):
    result = check(name, fn)
    assert result.status == "wrong", result.message
    assert words in result.message, result.message
    if "factor" not in words:
        assert not any(word in result.message for word in MISLEADING), result.message


def test_at_least_six_unforeseen_answers_and_two_correct_ones_per_new_exercise():
    for name in ("average_token_outputs", "longformer_mask"):
        assert sum(n == name for n, *_ in WRONG) >= 6, name
        assert sum(n == name for n, _ in CORRECT) >= 2, name


def test_the_mask_cases_vary_one_property_at_a_time():
    cases = EXERCISES["longformer_mask"].cases()
    base_mask, base_global, base_width = cases[1].args  # two unpadded texts, [CLS] global, width 2
    padded, question, narrow = cases[2].args, cases[3].args, cases[4].args
    assert not torch.equal(padded[0], base_mask) and torch.equal(padded[1], base_global) and padded[2] == base_width
    assert torch.equal(question[0], base_mask) and not torch.equal(question[1], base_global)
    assert narrow[2] != base_width and torch.equal(narrow[0], cases[0].args[0])


def test_a_merge_that_returns_nan_for_an_empty_row_is_told_how_to_avoid_it():
    def naive(max_a, sum_a, out_a, max_b, sum_b, out_b):
        new_max = torch.maximum(max_a, max_b)
        a, b = torch.exp(max_a - new_max), torch.exp(max_b - new_max)
        return new_max, a * sum_a + b * sum_b, a * out_a + b * out_b

    result = check("merge_softmax_blocks", naive)
    assert result.mistake == "NaN where a query sees no key in either block"
    assert "torch.where(new_max == -math.inf, 0.0, new_max)" in result.message


def test_the_notebook_asks_for_them_in_order_unsolved_and_its_solutions_pass():
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    checks = [re.fullmatch(r'check\("(\w+)", (my_\w+)\)', c.source.strip()) for c in cells if c.cell_type == "code"]
    asked = [m.group(1) for m in checks if m]
    assert tuple(asked) == registry.NOTEBOOK_ASKS["11"]
    for cell in cells:
        if cell.cell_type == "code" and cell.source.startswith("check("):
            (output,) = cell.outputs
            assert output["data"]["text/plain"].startswith("⏳ Not attempted yet"), cell.source
    solutions = [code for c in cells if c.cell_type == "markdown" for code in SOLUTION.findall(c.source)]
    assert len(solutions) == len(asked)
    for name, code in zip(asked, solutions, strict=True):
        namespace = {"math": math, "torch": torch}
        exec(code, namespace)
        result = check(name, namespace[f"my_{name}"])
        assert result.passed, (name, result.message)


def test_a_merge_that_forgets_to_rescale_the_output_is_told_so():
    def out_forgotten(max_a, sum_a, out_a, max_b, sum_b, out_b):
        new_max = torch.maximum(max_a, max_b)
        safe = torch.where(new_max == -math.inf, 0.0, new_max)
        a, b = torch.exp(max_a - safe), torch.exp(max_b - safe)
        return new_max, a * sum_a + b * sum_b, out_a + out_b  # the sum rescaled, the output not

    result = check("merge_softmax_blocks", out_forgotten)
    assert result.mistake == "the sum rescaled but not the output"
    assert "the output (the numerator) needs the same factor as the sum" in result.message


def test_a_merge_that_forgets_the_output_and_the_safe_max_is_told_both():
    def out_forgotten_unsafe(max_a, sum_a, out_a, max_b, sum_b, out_b):
        new_max = torch.maximum(max_a, max_b)
        a, b = torch.exp(max_a - new_max), torch.exp(max_b - new_max)
        return new_max, a * sum_a + b * sum_b, out_a + out_b

    result = check("merge_softmax_blocks", out_forgotten_unsafe)
    assert result.mistake == "the sum rescaled but not the output, and NaN where a query sees no key"
