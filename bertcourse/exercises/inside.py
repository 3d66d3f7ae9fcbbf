"""Exercises of notebook 08: ``role_score``, ``attention_rollout`` and ``mean_pooling``.

Their mistakes are the slips of measuring a model: a score divided by every query instead of the
queries that have a target, a map read by its columns, a sum of targets turned into a mean; a
rollout without the residual identity, multiplied in the wrong order or fed the heads' sum; a
sentence embedding that averages the padding in, divides by the padded length, or is normalised
too early.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..inside import attention_rollout, role_score, role_targets
from ..pooling import mean_pooling
from .random_inputs import _randn
from .records import Case, Exercise, Mistake


def _attention(g, *shape):
    """Random attention weights of ``shape`` (..., seq, seq): each row a softmax, so it sums to 1."""
    return (_randn(g, *shape) * 2.0).softmax(dim=-1)


# --- role_score ----------------------------------------------------------------------------------

_PAIR = ["[CLS]", "where", "is", "it", "?", "[SEP]", "over", "there", ".", "[SEP]"]
_REPEATS = ["[CLS]", "the", "dog", "and", "the", "cat", "and", "the", "bird", "[SEP]"]


def _role_cases(g):
    return [
        Case(
            "one head, 6 tokens, previous-token targets (the first query has none)",
            (_attention(g, 6, 6), role_targets(["[CLS]", "a", "b", "c", "d", "[SEP]"])["previous token"]),
            ("unbatched",),
        ),
        Case(
            "3 heads, a sentence pair of 10 tokens, [SEP] targets (two keys for every query)",
            (_attention(g, 3, 10, 10), role_targets(_PAIR)["[SEP]"]),
            ("batched",),
        ),
        Case(
            "2 layers x 4 heads, 10 tokens, same-word targets: 'the' has two other copies, most words none",
            (_attention(g, 2, 4, 10, 10), role_targets(_REPEATS)["same word elsewhere"]),
            ("batched",),
        ),
    ]


def _role_mean_over_every_query(attention, targets):
    return (attention * targets).sum(dim=-1).mean(dim=-1)


def _role_no_mean(attention, targets):
    return (attention * targets).sum(dim=(-2, -1))


def _role_map_read_by_columns(attention, targets):
    on_targets = (attention.transpose(-2, -1) * targets).sum(dim=-1)
    return on_targets.sum(dim=-1) / targets.any(dim=-1).sum()


def _role_mean_over_targets(attention, targets):
    per_query = (attention * targets).sum(dim=-1) / targets.sum(dim=-1).clamp(min=1)
    return per_query.sum(dim=-1) / targets.any(dim=-1).sum()


def _role_targets_inverted(attention, targets):
    return (attention * ~targets).sum(dim=(-2, -1)) / targets.any(dim=-1).sum()


ROLE_SCORE = Exercise(
    name="role_score",
    reference=role_score,
    prompt="your function receives `attention`, weights of shape (..., seq, seq) whose rows are queries and "
    "columns keys (one head, or (layers, heads, seq, seq)), and `targets`, a bool (seq, seq) matrix, True at "
    "(i, j) when key j is a target of query i; it returns a tensor of shape (...): the attention each query "
    "gives to its targets, added over its targets and averaged over the queries that have at least one target.",
    start="multiply `attention` by `targets` (True counts as 1) and add up each query's row with `.sum(dim=-1)`.",
    make_cases=_role_cases,
    extra_solution=("_role_mass",),
    notebook="08",
    mistakes=(
        Mistake(
            "a mean over every query",
            "a query without a target (the first token has no previous one) takes no part: divide by the number "
            "of queries that have one, `targets.any(dim=-1).sum()`.",
            _role_mean_over_every_query,
        ),
        Mistake(
            "a sum with no mean",
            "the score is a share of attention, between 0 and 1: divide the total by the number of counted queries.",
            _role_no_mean,
        ),
        Mistake(
            "the map read by its columns",
            "row i of `attention` is query i, as in `targets`: multiply them as they are, no transpose.",
            _role_map_read_by_columns,
        ),
        Mistake(
            "a mean over each query's targets",
            "a query with two targets gives them *together* its share: add over the targets, do not average.",
            _role_mean_over_targets,
        ),
        Mistake(
            "the targets inverted",
            "count the attention on the targets (where `targets` is True), not on every other key.",
            _role_targets_inverted,
        ),
    ),
)


# --- attention_rollout ---------------------------------------------------------------------------


def _rollout_cases(g):
    return [
        Case(
            "3 layers, 2 sentences, 4 heads, 5 tokens",
            (_attention(g, 3, 2, 4, 5, 5),),
            ("batched", "defaults"),
        ),
        Case(
            "2 layers, one sentence without a batch axis: 3 heads, 6 tokens",
            (_attention(g, 2, 3, 6, 6),),
            ("unbatched", "defaults"),
        ),
        Case("1 layer, 2 heads, 4 tokens", (_attention(g, 1, 2, 4, 4),), ("defaults",)),
        Case(
            "residual=False: 3 layers, 1 sentence, 2 heads, 5 tokens",
            (_attention(g, 3, 1, 2, 5, 5), False),
            ("batched",),
        ),
    ]


def _rollout(attentions, fuse, residual, step):
    rollout = None
    for layer_maps in attentions:
        mixing = step(fuse(layer_maps), residual)
        rollout = mixing if rollout is None else mixing @ rollout
    return rollout


def _with_identity(mixing, residual):
    if not residual:
        return mixing
    mixing = 0.5 * mixing + 0.5 * torch.eye(mixing.shape[-1])
    return mixing / mixing.sum(dim=-1, keepdim=True)


def _mean_heads(layer_maps):
    return layer_maps.mean(dim=-3)


def _rollout_no_residual(attentions, residual=True):
    return _rollout(attentions, _mean_heads, False, _with_identity)


def _rollout_residual_always(attentions, residual=True):
    return _rollout(attentions, _mean_heads, True, _with_identity)


def _rollout_wrong_order(attentions, residual=True):
    rollout = None
    for layer_maps in attentions:
        mixing = _with_identity(_mean_heads(layer_maps), residual)
        rollout = mixing if rollout is None else rollout @ mixing
    return rollout


def _rollout_heads_summed(attentions, residual=True):
    return _rollout(attentions, lambda maps: maps.sum(dim=-3), residual, _with_identity)


def _rollout_heads_max(attentions, residual=True):
    return _rollout(attentions, lambda maps: maps.amax(dim=-3), residual, _with_identity)


def _rollout_identity_added_whole(attentions, residual=True):
    def step(mixing, residual):
        return mixing + torch.eye(mixing.shape[-1]) if residual else mixing

    return _rollout(attentions, _mean_heads, residual, step)


def _rollout_last_layer_only(attentions, residual=True):
    return _with_identity(_mean_heads(attentions[-1]), residual)


ATTENTION_ROLLOUT = Exercise(
    name="attention_rollout",
    reference=attention_rollout,
    prompt="your function receives `attentions`, the attention weights of every layer stacked into one tensor "
    "(layers, ..., heads, seq, seq), first layer first (`for layer_maps in attentions` walks through them), and "
    "`residual` (default True); it returns (..., seq, seq): each "
    "layer's heads averaged, then, if `residual`, 0.5 * A + 0.5 * I with rows renormalised to sum to 1, and the "
    "layers multiplied, the last layer on the left: A_L @ ... @ A_2 @ A_1.",
    start="average one layer's heads with `.mean(dim=-3)`, and make the identity with `torch.eye(seq)`.",
    make_cases=_rollout_cases,
    axes={"": ("position rows", "input-token columns")},
    notebook="08",
    mistakes=(
        Mistake(
            "the residual identity left out",
            "the residual path carries each token past the attention: mix 0.5 * A + 0.5 * I before multiplying.",
            _rollout_no_residual,
        ),
        Mistake(
            "the identity added even with residual=False",
            "add the identity only when `residual` is True; False is plain attention through the layers.",
            _rollout_residual_always,
        ),
        Mistake(
            "the layers multiplied in the wrong order",
            "a layer acts on what the layers below it made: the new layer goes on the left, `mixing @ rollout`.",
            _rollout_wrong_order,
        ),
        Mistake(
            "the heads summed instead of averaged",
            "average the heads, `.mean(dim=-3)`: their sum has rows that add up to the number of heads.",
            _rollout_heads_summed,
        ),
        Mistake(
            "the maximum over heads",
            "the paper's rollout averages the heads (`.mean(dim=-3)`); the maximum is another method.",
            _rollout_heads_max,
        ),
        Mistake(
            "A + I without halving and renormalising",
            "A + I has rows that sum to 2, so the product grows layer by layer: use 0.5 * A + 0.5 * I "
            "(then rows sum to 1).",
            _rollout_identity_added_whole,
        ),
        Mistake(
            "only the last layer",
            "roll the attention through every layer: multiply each layer's mixing onto the product of the ones below.",
            _rollout_last_layer_only,
        ),
    ),
)


# --- mean_pooling --------------------------------------------------------------------------------


def _pooling_cases(g):
    return [
        Case(
            "2 sentences of 5 and 3 tokens, padded to 5, a 0/1 long mask, hidden 4",
            (_randn(g, 2, 5, 4), torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])),
            ("batched", "masked"),
        ),
        Case(
            "3 sentences of 4, 1 and 2 tokens, a bool mask, hidden 6",
            (_randn(g, 3, 4, 6), torch.tensor([[True] * 4, [True] + [False] * 3, [True, True, False, False]])),
            ("batched", "masked"),
        ),
        Case("1 sentence of 4 tokens, no padding, hidden 3", (_randn(g, 1, 4, 3), torch.ones(1, 4, dtype=torch.long))),
        Case("attention_mask left out: 2 sentences of 3 tokens, hidden 4", (_randn(g, 2, 3, 4),), ("defaults",)),
    ]


def _mask_or_ones(hidden, attention_mask):
    if attention_mask is None:
        return torch.ones(hidden.shape[:2])
    return attention_mask.float()


def _pooling_mask_ignored(last_hidden_state, attention_mask=None):
    return last_hidden_state.mean(dim=1)


def _pooling_divided_by_length(last_hidden_state, attention_mask=None):
    mask = _mask_or_ones(last_hidden_state, attention_mask)[:, :, None]
    return (last_hidden_state * mask).sum(dim=1) / last_hidden_state.shape[1]


def _pooling_normalised(last_hidden_state, attention_mask=None):
    return F.normalize(mean_pooling(last_hidden_state, attention_mask), dim=-1)


def _pooling_mask_inverted(last_hidden_state, attention_mask=None):
    mask = 1.0 - _mask_or_ones(last_hidden_state, attention_mask)[:, :, None]
    return (last_hidden_state * mask).sum(dim=1) / mask.sum(dim=1)


def _pooling_over_features(last_hidden_state, attention_mask=None):
    mask = _mask_or_ones(last_hidden_state, attention_mask)
    return last_hidden_state.mean(dim=-1) * mask


def _pooling_cls_vector(last_hidden_state, attention_mask=None):
    return last_hidden_state[:, 0]


def _pooling_default_not_handled(last_hidden_state, attention_mask=None):
    mask = attention_mask[:, :, None].float()  # None[:, :, None] raises TypeError
    return (last_hidden_state * mask).sum(dim=1) / mask.sum(dim=1)


MEAN_POOLING = Exercise(
    name="mean_pooling",
    reference=mean_pooling,
    prompt="your function receives `last_hidden_state` (batch, seq, hidden), BERT's token vectors, and "
    "`attention_mask` (batch, seq), 1 or True at real tokens and 0 or False at padding, or None (every token "
    "is real); it returns (batch, hidden): the mean of each sentence's real token vectors ([CLS] and [SEP] "
    "included, as in sentence-transformers). Every sentence has at least one real token.",
    start="turn the mask into numbers of the hidden states' dtype and give it a last axis of size 1: "
    "`mask[:, :, None]`, shape (batch, seq, 1).",
    make_cases=_pooling_cases,
    axes={"": ("sentence rows", "feature columns")},
    notebook="08",
    mistakes=(
        Mistake(
            "the padding averaged in",
            "a plain `.mean(dim=1)` counts the [PAD] vectors too: weight each token by its mask first.",
            _pooling_mask_ignored,
        ),
        Mistake(
            "a division by the padded length",
            "divide by the number of *real* tokens of each sentence, `mask.sum(dim=1)`, not by `seq`.",
            _pooling_divided_by_length,
        ),
        Mistake(
            "the mean normalised to length 1",
            "normalising is the next step of the recipe (`bertcourse.pooling.normalize`); return the plain mean here.",
            _pooling_normalised,
        ),
        Mistake(
            "the mask inverted (the padding averaged)",
            "1 (True) marks a real token: keep the tokens where the mask is 1.",
            _pooling_mask_inverted,
        ),
        Mistake(
            "a mean over the features",
            "average over the tokens, axis 1 of (batch, seq, hidden), so one vector per sentence remains.",
            _pooling_over_features,
        ),
        Mistake(
            "the [CLS] vector",
            "sentence-transformers averages every real token; `last_hidden_state[:, 0]` is the [CLS] vector alone.",
            _pooling_cls_vector,
        ),
        Mistake(
            "the default `attention_mask=None` not handled",
            "when the caller leaves the mask out it is None: every token is real then, so use a mask of ones.",
            _pooling_default_not_handled,
        ),
    ),
)
