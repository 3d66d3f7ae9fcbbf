"""The exercises of notebook 08: learner code written differently from the package is judged as the package's,
realistic wrong answers get a message that names the mistake, and the retired exercises' case sets catch what
they missed (the generic checks of every exercise, the registry, verdicts, hints and solutions, are in
test_exercises.py)."""

import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F

from bertcourse.exercises import check, registry

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "08_inside_bert.ipynb"
SOLUTION = re.compile(r"<details>\s*<summary>Solution</summary>\s*```python\n(.*?)```\s*</details>", re.S)


def test_notebook_asks_for_the_new_exercises_and_its_solutions_pass():
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    asks = re.compile(r'^(?:check|\w+ = use)\("(\w+)", my_\1\)$')  # check(...) or a use(...) later cells run
    checks = [m.group(1) for c in cells if c.cell_type == "code" for m in [asks.match(c.source.strip())] if m]
    assert checks == list(registry.NOTEBOOK_ASKS["08"])
    solutions = [m.group(1) for c in cells if c.cell_type == "markdown" for m in SOLUTION.finditer(c.source)]
    assert len(solutions) == 2
    for name, source in zip(registry.NOTEBOOK_ASKS["08"], solutions, strict=True):
        namespace = {"torch": torch}
        exec(source, namespace)
        assert check(name, namespace[f"my_{name}"]).status == "correct", name


def test_no_cell_imports_or_calls_the_answers():
    code = "\n".join(c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == "code")
    for name in registry.NOTEBOOK_ASKS["08"]:
        assert f"inside.{name}" not in code and f"import {name}" not in code, name
    assert "inside._" not in code  # nor the cores behind them


def test_retired_names_are_still_checked():
    for name in ("role_score", "attention_rollout", "mean_pooling"):
        assert name in registry.RETIRED and name in registry.EXERCISES


# --- word_piece_targets ---------------------------------------------------------------------------------


def pieces_with_a_loop(tokens):
    n = len(tokens)
    word, current = [], -1
    for token in tokens:
        if not token.startswith("##"):
            current += 1
        word.append(current)
    return torch.tensor([[i != j and word[i] == word[j] for j in range(n)] for i in range(n)])


def pieces_by_spans(tokens):
    targets = torch.zeros(len(tokens), len(tokens), dtype=torch.bool)
    start = 0
    for end in range(1, len(tokens) + 1):
        if end == len(tokens) or not tokens[end].startswith("##"):
            targets[start:end, start:end] = True
            start = end
    return targets & ~torch.eye(len(tokens), dtype=torch.bool)


@pytest.mark.parametrize("fn", [pieces_with_a_loop, pieces_by_spans])
def test_word_piece_targets_written_differently_pass(fn):
    assert check("word_piece_targets", fn).status == "correct"


def pieces_diagonal_kept(tokens):
    return pieces_by_spans(tokens) | torch.eye(len(tokens), dtype=torch.bool)


def pieces_to_the_left(tokens):
    return torch.tril(pieces_by_spans(tokens), diagonal=-1)


def pieces_next_door(tokens):
    n = len(tokens)
    near = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n - 1):
        if tokens[i + 1].startswith("##"):
            near[i, i + 1] = near[i + 1, i] = True
    return near


def pieces_hash_only(tokens):
    hashed = torch.tensor([t.startswith("##") for t in tokens])
    return pieces_by_spans(tokens) & hashed[:, None] & hashed[None, :]


def pieces_same_string(tokens):
    n = len(tokens)
    return torch.tensor([[i != j and tokens[i] == tokens[j] for j in range(n)] for i in range(n)])


def pieces_as_floats(tokens):
    return pieces_by_spans(tokens).float() * 2


def pieces_word_start_wrong(tokens):
    word = torch.tensor([t.startswith("##") for t in tokens]).cumsum(dim=0)  # counts the ## pieces, not the words
    positions = torch.arange(len(tokens))
    return (word[:, None] == word[None, :]) & (positions[:, None] != positions[None, :])


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (pieces_diagonal_kept, "the token itself counted"),
        (pieces_to_the_left, "only the earlier pieces"),
        (pieces_next_door, "only the neighbouring pieces"),
        (pieces_hash_only, "the word's first piece left out"),
        (pieces_same_string, "the same token string"),
        (pieces_as_floats, "bool"),
        (pieces_word_start_wrong, "the first wrong entry is query"),
    ],
)
def test_word_piece_targets_wrong_answers_are_named(fn, words):
    result = check("word_piece_targets", fn)
    assert result.status == "wrong" and words in result.message, result.message


# --- value_weighted_norms -------------------------------------------------------------------------------


def norms_with_a_loop(attention, values, output_weight):
    heads, d_k = values.shape[-3], values.shape[-1]
    parts = []
    for h in range(heads):
        w_o_h = output_weight[:, h * d_k : (h + 1) * d_k]  # (hidden, d_k): head h's columns
        lengths = (values[..., h, :, :] @ w_o_h.T).norm(dim=-1)  # (..., seq)
        parts.append(attention[..., h, :, :] * lengths[..., None, :])
    return torch.stack(parts, dim=-3)


def norms_with_einsum(attention, values, output_weight):
    heads, d_k = values.shape[-3], values.shape[-1]
    w = output_weight.view(-1, heads, d_k)  # (hidden, heads, d_k)
    sent = torch.einsum("...hsd,ohd->...hso", values, w)
    return torch.einsum("...hqk,...hk->...hqk", attention, sent.norm(dim=-1))


@pytest.mark.parametrize("fn", [norms_with_a_loop, norms_with_einsum])
def test_value_weighted_norms_written_differently_pass(fn):
    assert check("value_weighted_norms", fn).status == "correct"


def norms_values_only(attention, values, output_weight):
    return attention * torch.linalg.vector_norm(values, dim=-1).unsqueeze(-2)


def norms_rows_view(attention, values, output_weight):
    heads, d_k = values.shape[-3], values.shape[-1]
    w = output_weight.view(heads, d_k, -1)  # the weight's numbers in the wrong order
    return attention * (values @ w).norm(dim=-1)[..., None, :]


def norms_without_attention(attention, values, output_weight):
    return norms_with_a_loop(torch.ones_like(attention), values, output_weight)


def norms_transposed(attention, values, output_weight):
    return norms_with_a_loop(attention, values, output_weight).transpose(-2, -1)


def norms_squared(attention, values, output_weight):
    return norms_with_a_loop(attention, values, output_weight) ** 2 / attention


def norms_whole_w_o(attention, values, output_weight):
    merged = values.transpose(-3, -2).flatten(-2)  # (..., seq, heads * d_k)
    lengths = (merged @ output_weight.T).norm(dim=-1)  # (..., seq): every head together
    return attention * lengths[..., None, None, :]


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (norms_values_only, "W_O left out"),
        (norms_rows_view, "reshaped without its transpose"),
        (norms_without_attention, "the attention weight left out"),
        (norms_squared, "a squared norm"),
        (norms_transposed, "Wrong"),
        (norms_whole_w_o, "Wrong"),
    ],
)
def test_value_weighted_norms_wrong_answers_are_named(fn, words):
    result = check("value_weighted_norms", fn)
    assert result.status == "wrong" and words in result.message, result.message


# --- the retired exercises: their cases now catch what they missed ------------------------------------------


def pooling_first_tokens(last_hidden_state, attention_mask=None):
    if attention_mask is None:
        return last_hidden_state.mean(dim=1)
    lengths = attention_mask.sum(dim=1)
    return torch.stack([h[: int(n)].mean(dim=0) for h, n in zip(last_hidden_state, lengths, strict=True)])


def pooling_with_where(last_hidden_state, attention_mask=None):
    if attention_mask is None:
        return last_hidden_state.mean(dim=1)
    mask = attention_mask.bool()[:, :, None]
    kept = torch.where(mask, last_hidden_state, torch.zeros(()))
    return kept.sum(dim=1) / mask.sum(dim=1)


def test_mean_pooling_that_assumes_padding_at_the_end_is_caught():
    result = check("mean_pooling", pooling_first_tokens)
    assert result.status == "wrong" and result.mistake.startswith("the mean of the first n tokens"), result.message
    assert check("mean_pooling", pooling_with_where).status == "correct"
    assert check("mean_pooling", lambda h, m=None: F.normalize(pooling_with_where(h, m), dim=1)).mistake.startswith(
        "the mean normalised"
    )


def role_mean_over_targets(attention, targets):
    per_query = (attention * targets).sum(dim=-1) / targets.sum(dim=-1).clamp(min=1)
    return per_query.sum(dim=-1) / targets.any(dim=-1).sum()


def test_role_score_cases_separate_head_axes_from_several_targets():
    result = check("role_score", role_mean_over_targets)
    assert result.mistake == "a mean over each query's targets"
    assert "batch (or head) axes" not in result.message
    from bertcourse.exercises.inside import ROLE_SCORE

    cases = ROLE_SCORE.cases()
    several = [int(case.args[1].sum(dim=-1).max()) > 1 for case in cases]
    batched = ["batched" in case.tags for case in cases]
    assert {(s, b) for s, b in zip(several, batched, strict=True)} == {(0, 0), (0, 1), (1, 0), (1, 1)}


def test_rollout_still_passes_a_solution_written_differently():
    def rollout(attentions, residual=True):
        seq = attentions.shape[-1]
        result = torch.eye(seq)
        for layer_maps in attentions:
            mixing = layer_maps.mean(dim=-3)
            if residual:
                mixing = (mixing + torch.eye(seq)) / 2
            result = mixing @ result
        return result

    assert check("attention_rollout", rollout).status == "correct"


def _rollout_by(fuse, mix, layers=slice(None), right_to_left=True):
    def rollout(attentions, residual=True):
        result = None
        for layer_maps in attentions[layers]:
            mixing = fuse(layer_maps)
            mixing = mix(mixing) if residual else mixing
            result = mixing if result is None else (mixing @ result if right_to_left else result @ mixing)
        return result

    return rollout


def _halfway(a):
    return 0.5 * a + 0.5 * torch.eye(a.shape[-1])


def _heads_mean(maps):
    return maps.mean(dim=-3)


def rollout_per_head_then_averaged(attentions, residual=True):
    return _rollout_by(lambda maps: maps, _halfway)(attentions, residual).mean(dim=-3)


ROLLOUT_WRONG = [
    (
        _rollout_by(_heads_mean, lambda a: (a + torch.eye(a.shape[-1])) / (a + torch.eye(a.shape[-1])).sum(-2, True)),
        "Its rows sum to",
    ),
    (_rollout_by(_heads_mean, lambda a: 0.5 * a + torch.eye(a.shape[-1])), "renormalise the rows of each mixing"),
    (_rollout_by(_heads_mean, _halfway, slice(1, None)), "the first layer is left out"),
    (_rollout_by(_heads_mean, _halfway, slice(None, -1)), "the last layer is left out"),
    (rollout_per_head_then_averaged, "each head rolled out on its own"),
    (
        lambda attentions, residual=True: _rollout_by(_heads_mean, _halfway)(attentions, not residual),
        "It equals the rollout with residual=False",
    ),
]


@pytest.mark.parametrize(("fn", "words"), ROLLOUT_WRONG)
def test_a_wrong_rollout_is_read_structurally(fn, words):
    result = check("attention_rollout", fn)
    assert result.status == "wrong" and words in result.message, result.message
