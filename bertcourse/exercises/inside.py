"""Exercises of notebook 08: ``word_piece_targets`` and ``value_weighted_norms``.

``word_piece_targets`` is the first half of an experiment: a role of the learner's own (the other
pieces of a token's word), which the notebook's next cell scores on every head, so that the learner
finds its head and asks whether it is a new one. Its mistakes: the token itself counted, the pieces
of one word told apart from its first piece, only the neighbouring piece, only the earlier pieces,
the same token string instead of the same word. ``value_weighted_norms`` is the value side of
attention, ||a_ij v_j W_O^h|| (Kobayashi et al. 2020), which the notebook uses without showing its
code. Its mistakes: W_O left out, the weight reshaped without its transpose, the head's rows of the
weight instead of its columns, the attention left out or the norm indexed by the query, a squared norm.

The exercises notebook 08 asked for before, ``role_score``, ``attention_rollout`` and ``mean_pooling``,
stay checkable by name (``registry.RETIRED``): the package's own functions imported in the notebook
answered them. Their cases vary one property at a time: role scores with one target per query or
several, with and without head axes; mean pooling with the padding at the end, at the start (left
padding) and in holes inside the sentence, so that a mean over the first n tokens is caught.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..inside import attention_rollout, role_score, role_targets, value_weighted_norms, word_piece_targets
from ..pooling import mean_pooling
from .diagnosis import equals_one_of
from .random_inputs import seeded_randn
from .records import Case, Exercise, Mistake


def _attention(g, *shape):
    """Random attention weights of ``shape`` (..., seq, seq): each row a softmax, so it sums to 1."""
    return (seeded_randn(g, *shape) * 2.0).softmax(dim=-1)


# --- role_score ----------------------------------------------------------------------------------

_PAIR = ["[CLS]", "where", "is", "it", "?", "[SEP]", "over", "there", ".", "[SEP]"]
_REPEATS = ["[CLS]", "the", "dog", "and", "the", "cat", "and", "the", "bird", "[SEP]"]


def _role_cases(g):
    """One property at a time: head axes in front or not, one target per query or several."""
    six = ["[CLS]", "a", "b", "c", "d", "[SEP]"]
    return [
        Case(
            "one map, 6 tokens, previous-token targets (one per query; the first query has none)",
            (_attention(g, 6, 6), role_targets(six)["previous token"]),
            ("unbatched",),
        ),
        Case(
            "3 heads, 6 tokens, previous-token targets (one per query; the first query has none)",
            (_attention(g, 3, 6, 6), role_targets(six)["previous token"]),
            ("batched",),
        ),
        Case(
            "one map, a sentence pair of 10 tokens, [SEP] targets (two keys for every query)",
            (_attention(g, 10, 10), role_targets(_PAIR)["[SEP]"]),
            ("unbatched",),
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


def _role_explain(case, value, expected):
    """Which other reading of the role the learner's score is (the largest target weight, a median, hits)."""
    attention, targets = case.args
    has = targets.any(dim=-1)  # (seq,) the queries with a target
    on_targets = attention * targets  # (..., seq, seq)
    picks = torch.nn.functional.one_hot(attention.argmax(dim=-1), attention.shape[-1]).bool() & targets
    return equals_one_of(
        value,
        expected,
        (
            (
                "the mean over the queries of each query's *largest* target weight: add the weights over its "
                "targets instead",
                lambda: on_targets.amax(dim=-1)[..., has].mean(dim=-1),
            ),
            (
                "the *median* over the queries of the weight on their targets: take the mean",
                lambda: on_targets.sum(dim=-1)[..., has].median(dim=-1).values,
            ),
            (
                "the share of queries whose largest weight falls on a target: the score is the weight itself, "
                "not a hit count",
                lambda: picks.any(dim=-1)[..., has].float().mean(dim=-1),
            ),
            (
                "the weight on every target divided by the number of targets: divide by the number of queries "
                "that have one",
                lambda: on_targets.sum(dim=(-2, -1)) / targets.sum(),
            ),
        ),
    )


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
    explain=_role_explain,
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


def _per_head_rollout(attentions, residual):
    """Each head rolled out through the layers on its own, the heads averaged at the end."""
    rollout = None
    for layer_maps in attentions:
        mixing = layer_maps
        if residual:
            mixing = 0.5 * mixing + 0.5 * torch.eye(mixing.shape[-1])
        rollout = mixing if rollout is None else mixing @ rollout
    return rollout.mean(dim=-3)


def _rollout_explain(case, value, expected):
    """What the learner's rollout is: rows that do not sum to 1, or the rollout of other layers or settings."""
    if not isinstance(value, torch.Tensor) or value.shape != expected.shape or not value.is_floating_point():
        return None
    attentions, residual = case.args[0], (case.args[1] if len(case.args) > 1 else True)
    value = value.float()
    sums = value.sum(dim=-1)
    if not torch.allclose(sums, torch.ones_like(sums), atol=1e-3):
        return (
            "Every mixing matrix (each layer's mean over heads, then 0.5 * A + 0.5 * I) has rows that sum to 1, so "
            "their product has too: renormalise the rows of each mixing (`dim=-1`)."
        )
    layers = len(attentions)
    candidates = [
        (f"the rollout with residual={not residual}", lambda: attention_rollout(attentions, not residual)),
        (
            "each head rolled out on its own and the heads averaged at the end: average each layer's heads first, "
            "then multiply the layers",
            lambda: _per_head_rollout(attentions, residual),
        ),
    ]
    if layers > 1:
        candidates += [
            (
                f"the rollout of layers 2 to {layers}: the first layer is left out",
                lambda: attention_rollout(attentions[1:], residual),
            ),
            (
                f"the rollout of layers 1 to {layers - 1}: the last layer is left out",
                lambda: attention_rollout(attentions[:-1], residual),
            ),
        ]
    for text, make in candidates:
        other = make()
        if not torch.allclose(other, expected, atol=1e-5) and torch.allclose(value, other, atol=1e-5, rtol=1e-4):
            return f"It equals {text}."
    return None


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
    explain=_rollout_explain,
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
    """One property at a time, from a right-padded batch: the mask's dtype, left padding, holes, no padding, None."""
    return [
        Case(
            "2 sentences of 5 and 3 tokens, padded at the end to 5, a 0/1 long mask, hidden 4",
            (seeded_randn(g, 2, 5, 4), torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])),
            ("batched", "masked"),
        ),
        Case(
            "the same, with a bool mask",
            (seeded_randn(g, 2, 5, 4), torch.tensor([[True] * 5, [True, True, True, False, False]])),
            ("batched", "masked"),
        ),
        Case(
            "2 sentences of 5 and 3 tokens, the padding at the start (left padding), a 0/1 long mask, hidden 4",
            (seeded_randn(g, 2, 5, 4), torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])),
            ("batched", "masked"),
        ),
        Case(
            "2 sentences of 5 and 3 tokens, the second with holes in its mask (1, 0, 1, 0, 1), hidden 4",
            (seeded_randn(g, 2, 5, 4), torch.tensor([[1, 1, 1, 1, 1], [1, 0, 1, 0, 1]])),
            ("batched", "masked"),
        ),
        Case(
            "2 sentences of 5 tokens, no padding (a mask of ones), hidden 4",
            (seeded_randn(g, 2, 5, 4), torch.ones(2, 5, dtype=torch.long)),
            ("batched", "masked"),
        ),
        Case("attention_mask left out: 2 sentences of 5 tokens, hidden 4", (seeded_randn(g, 2, 5, 4),), ("defaults",)),
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


def _pooling_first_tokens(last_hidden_state, attention_mask=None):
    counts = _mask_or_ones(last_hidden_state, attention_mask).sum(dim=1).long()
    return torch.stack([row[:count].mean(dim=0) for row, count in zip(last_hidden_state, counts, strict=True)])


def _pooling_cut_at_the_first_pad(last_hidden_state, attention_mask=None):
    mask = _mask_or_ones(last_hidden_state, attention_mask)
    ends = [int(row.argmin()) if (row == 0).any() else len(row) for row in mask]
    return torch.stack([row[:end].mean(dim=0) for row, end in zip(last_hidden_state, ends, strict=True)])


def _pooling_default_not_handled(last_hidden_state, attention_mask=None):
    mask = attention_mask[:, :, None].float()  # None[:, :, None] raises TypeError
    return (last_hidden_state * mask).sum(dim=1) / mask.sum(dim=1)


def _pooling_explain(case, value, expected):
    """Which other pooling the learner's output is: a sum, a maximum, the mean without [CLS], a batch-wide count."""
    hidden = case.args[0]
    mask = case.args[1] if len(case.args) > 1 and case.args[1] is not None else torch.ones(hidden.shape[:2])
    real = mask.to(hidden.dtype)[:, :, None]  # (batch, seq, 1)
    no_cls = real.clone()
    no_cls[:, 0] = 0
    return equals_one_of(
        value,
        expected,
        (
            (
                "the sum of the real token vectors: divide by each sentence's number of real tokens",
                lambda: (hidden * real).sum(dim=1),
            ),
            (
                "the maximum over the real tokens (max pooling): the exercise asks for their mean",
                lambda: hidden.masked_fill(real == 0, float("-inf")).amax(dim=1),
            ),
            (
                "the mean without the first token ([CLS]): [CLS] and [SEP] are included",
                lambda: (hidden * no_cls).sum(dim=1) / no_cls.sum(dim=1),
            ),
            (
                "the sum of each sentence's real vectors divided by the real tokens of the *whole batch*: divide "
                "by each sentence's own count, `mask.sum(dim=1)`",
                lambda: (hidden * real).sum(dim=1) / real.sum(),
            ),
        ),
    )


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
    explain=_pooling_explain,
    solution_body="""
    if attention_mask is None:  # every token is real
        attention_mask = torch.ones(last_hidden_state.shape[:2], dtype=torch.bool, device=last_hidden_state.device)
    return _mean_pooling(last_hidden_state, attention_mask != 0)  # (batch, seq) bool, from a bool or 0/1 mask
    """,
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
            "the mean of the first n tokens (padding assumed at the end)",
            "the mask marks real tokens wherever they stand: the padding may come first (left padding) or leave "
            "holes, so weight every position by its own mask value instead of taking the first n vectors.",
            _pooling_first_tokens,
        ),
        Mistake(
            "the sentence cut at its first padding position",
            "a 0 in the mask need not end the sentence (left padding, holes): keep every position whose mask is 1.",
            _pooling_cut_at_the_first_pad,
        ),
        Mistake(
            "the default `attention_mask=None` not handled",
            "when the caller leaves the mask out it is None: every token is real then, so use a mask of ones.",
            _pooling_default_not_handled,
        ),
    ),
)


# --- word_piece_targets -------------------------------------------------------------------------


def _word_piece_cases(g):
    return [
        Case(
            "6 tokens, no word split into pieces: no query has a target",
            (["[CLS]", "the", "cat", "sat", ".", "[SEP]"],),
        ),
        Case(
            "7 tokens, one word of two pieces in the middle: 'catalogue ##d'",
            (["[CLS]", "she", "catalogue", "##d", "it", ".", "[SEP]"],),
        ),
        Case(
            "9 tokens, a word of five pieces right after [CLS]: 'un ##bel ##ie ##va ##bly'",
            (["[CLS]", "un", "##bel", "##ie", "##va", "##bly", "true", ".", "[SEP]"],),
        ),
        Case(
            "12 tokens, two split words side by side, and the same word twice ('photos ##yn ##thesis' ... 'photos')",
            (["[CLS]", "the", "photos", "##yn", "##thesis", "kit", "##s", "need", "photos", "of", "it", "[SEP]"],),
        ),
        Case(
            "11 tokens, a split word that comes back: 'shard ##s' twice",
            (["[CLS]", "shard", "##s", "and", "more", "shard", "##s", "here", "too", ".", "[SEP]"],),
        ),
    ]


def _word_ids(tokens):
    return torch.tensor([not token.startswith("##") for token in tokens]).cumsum(dim=0)


def _wp_self_included(tokens):
    word = _word_ids(tokens)
    return word[:, None] == word[None, :]


def _wp_pieces_only(tokens):
    pieces = torch.tensor([token.startswith("##") for token in tokens])
    return word_piece_targets(tokens) & pieces[:, None] & pieces[None, :]


def _wp_neighbours_only(tokens):
    positions = torch.arange(len(tokens))
    return word_piece_targets(tokens) & ((positions[:, None] - positions[None, :]).abs() == 1)


def _wp_earlier_only(tokens):
    positions = torch.arange(len(tokens))
    return word_piece_targets(tokens) & (positions[None, :] < positions[:, None])


def _wp_first_piece_only(tokens):
    starts = torch.tensor([not token.startswith("##") for token in tokens])
    return word_piece_targets(tokens) & starts[None, :]


def _wp_same_token(tokens):
    positions = torch.arange(len(tokens))
    same = torch.tensor([[a == b for b in tokens] for a in tokens])
    return same & (positions[:, None] != positions[None, :])


def _wp_same_word_anywhere(tokens):
    words, current = [], ""
    for token in tokens:
        current = current + token[2:] if token.startswith("##") else token
        words.append(current)
    spelled = []
    for index in range(len(tokens)):
        end = index
        while end + 1 < len(tokens) and tokens[end + 1].startswith("##"):
            end += 1
        spelled.append(words[end])
    word = _word_ids(tokens)
    positions = torch.arange(len(tokens))
    text_same = torch.tensor([[a == b for b in spelled] for a in spelled])
    split = torch.tensor([(word == w).sum() > 1 for w in word])
    return text_same & split[:, None] & (positions[:, None] != positions[None, :])


def _explain_word_piece_targets(case, value, expected):
    if not isinstance(value, torch.Tensor) or value.shape != expected.shape:
        return None
    tokens = case.args[0]
    wrong = (value.bool() != expected).nonzero().tolist()
    if not wrong:
        return None
    i, j = wrong[0]
    should = "should be" if bool(expected[i, j]) else "should not be"
    return f"the first wrong entry is query {i} {tokens[i]!r}, key {j} {tokens[j]!r}: it {should} a target."


WORD_PIECE_TARGETS = Exercise(
    name="word_piece_targets",
    reference=word_piece_targets,
    prompt="your function receives `tokens`, a list of WordPiece tokens of one sentence ([CLS] and [SEP] included; "
    "a token that starts with '##' continues the word before it); it returns a bool tensor (seq, seq), True at "
    "(i, j) when j is not i and tokens j and i are pieces of the same word ('catalogue', '##d'). A word of one "
    "piece, a special token or a punctuation mark has no target.",
    start="number the words: a token that does not start with '##' begins a new word, and a running count "
    "(`torch.cumsum`) over those beginnings gives every piece its word's number.",
    make_cases=_word_piece_cases,
    axes={"": ("query rows", "key columns")},
    explain=_explain_word_piece_targets,
    notebook="08",
    mistakes=(
        Mistake(
            "the token itself counted as a target",
            "a piece is not its own target: leave out j = i (the diagonal).",
            _wp_self_included,
        ),
        Mistake(
            "the word's first piece left out",
            "the first piece ('catalogue' of 'catalogue ##d') is a piece of the word too: it is a target of "
            "the '##' pieces, and they are its targets.",
            _wp_pieces_only,
        ),
        Mistake(
            "only the neighbouring pieces",
            "every other piece of the word is a target, not only the one next to it: a word of five pieces "
            "gives each piece four targets.",
            _wp_neighbours_only,
        ),
        Mistake(
            "only the earlier pieces",
            "the role looks both ways: the first piece's targets are the pieces after it.",
            _wp_earlier_only,
        ),
        Mistake(
            "only the word's first piece as a target",
            "every other piece of the word is a target, the '##' pieces too.",
            _wp_first_piece_only,
        ),
        Mistake(
            "the same token string instead of the same word",
            "two tokens that are spelled alike but stand in different words are not targets; pieces of one "
            "word are, however they are spelled.",
            _wp_same_token,
        ),
        Mistake(
            "the same whole word anywhere in the sentence",
            "only the pieces of *this* occurrence of the word count: a second 'shard ##s' further on is another word.",
            _wp_same_word_anywhere,
        ),
    ),
)


# --- value_weighted_norms -----------------------------------------------------------------------


def _value_case(g, leading, heads, seq, d_k, hidden):
    attention = _attention(g, *leading, heads, seq, seq)
    values = seeded_randn(g, *leading, heads, seq, d_k)
    values[..., 0, :] *= 0.05  # key 0 sends a short vector, as [CLS] does in the sink heads
    return (attention, values, seeded_randn(g, hidden, heads * d_k))


def _value_cases(g):
    return [
        Case(
            "one sentence: 2 heads, 5 tokens, d_k 3, hidden 6 (= heads x d_k)",
            _value_case(g, (), 2, 5, 3, 6),
            ("unbatched", "square"),
        ),
        Case(
            "a batch of 2 sentences: 2 heads, 5 tokens, d_k 3, hidden 6",
            _value_case(g, (2,), 2, 5, 3, 6),
            ("batched", "square"),
        ),
        Case(
            "one sentence: 2 heads, 5 tokens, d_k 3, hidden 4 (not heads x d_k)",
            _value_case(g, (), 2, 5, 3, 4),
            ("unbatched", "non-square"),
        ),
        Case(
            "one sentence: 4 heads, 6 tokens, d_k 2, hidden 8",
            _value_case(g, (), 4, 6, 2, 8),
            ("unbatched", "square"),
        ),
    ]


def _per_head_weight(output_weight, heads, d_k):
    return output_weight.T.reshape(heads, d_k, -1)


def _vwn_no_output_projection(attention, values, output_weight):
    return attention * values.norm(dim=-1)[..., None, :]


def _vwn_weight_not_transposed(attention, values, output_weight):
    heads, d_k = values.shape[-3], values.shape[-1]
    return attention * (values @ output_weight.reshape(heads, d_k, -1)).norm(dim=-1)[..., None, :]


def _vwn_rows_of_the_weight(attention, values, output_weight):
    heads, d_k = values.shape[-3], values.shape[-1]
    rows = torch.stack([output_weight[h * d_k : (h + 1) * d_k] for h in range(heads)])
    return attention * (values @ rows).norm(dim=-1)[..., None, :]


def _vwn_attention_left_out(attention, values, output_weight):
    heads, d_k = values.shape[-3], values.shape[-1]
    norms = (values @ _per_head_weight(output_weight, heads, d_k)).norm(dim=-1)
    return norms[..., None, :].expand_as(attention)


def _vwn_norm_by_query(attention, values, output_weight):
    heads, d_k = values.shape[-3], values.shape[-1]
    norms = (values @ _per_head_weight(output_weight, heads, d_k)).norm(dim=-1)
    return attention * norms[..., :, None]


def _vwn_squared_norm(attention, values, output_weight):
    heads, d_k = values.shape[-3], values.shape[-1]
    norms = (values @ _per_head_weight(output_weight, heads, d_k)).norm(dim=-1)
    return attention * norms[..., None, :] ** 2


def _norms_explain(case, value, expected):
    """Which other norm the learner's is: an L1 norm, or ||v_j|| times the whole weight's norm."""
    attention, values, output_weight = case.args
    heads, d_k = values.shape[-3], values.shape[-1]
    projected = values @ output_weight.T.reshape(heads, d_k, -1)  # (..., heads, seq, hidden): v_j W_O^h
    return equals_one_of(
        value,
        expected,
        (
            (
                "a_ij times the L1 norm (sum of |entries|) of v_j W_O^h: the length is the Euclidean `.norm(dim=-1)`",
                lambda: attention * projected.abs().sum(dim=-1)[..., None, :],
            ),
            (
                "a_ij ||v_j|| times the norm of the whole W_O: multiply v_j by its head's block of W_O, then take "
                "the norm",
                lambda: attention * (values.norm(dim=-1) * output_weight.norm())[..., None, :],
            ),
        ),
    )


VALUE_WEIGHTED_NORMS = Exercise(
    name="value_weighted_norms",
    reference=value_weighted_norms,
    prompt="your function receives `attention` (..., heads, seq, seq), the attention weights a_ij (rows are "
    "queries), `values` (..., heads, seq, d_k), each head's value vectors v_j, and `output_weight` "
    "(hidden, heads * d_k), the `nn.Linear` weight of the output projection W_O (out x in, so the output is "
    "`merged @ output_weight.T`); it returns (..., heads, seq, seq): the length of what key j adds to query i's "
    "output through head h, ||a_ij v_j W_O^h||, where W_O^h is head h's part of the projection.",
    start="begin with one head: write down which of the merged context's numbers are head h's, then which numbers of "
    "`output_weight` multiply exactly those in `merged @ output_weight.T` (notebook 05); they make W_O^h.",
    make_cases=_value_cases,
    extra_solution=("_value_lengths",),
    axes={"": ("query rows", "key columns")},
    explain=_norms_explain,
    notebook="08",
    mistakes=(
        Mistake(
            "W_O left out (the norm of v_j alone)",
            "what a key adds to the output is v_j W_O^h, not v_j: W_O can stretch some values and shrink others.",
            _vwn_no_output_projection,
        ),
        Mistake(
            "the weight reshaped without its transpose",
            "`output_weight` is (out, in): head h's numbers are its columns, so transpose before splitting it "
            "into heads (`output_weight.T` is (heads * d_k, hidden)).",
            _vwn_weight_not_transposed,
        ),
        Mistake(
            "the head's rows of the weight instead of its columns",
            "the weight of `nn.Linear` is (out, in) and the heads are on the *in* side: take head h's d_k "
            "columns, not d_k rows.",
            _vwn_rows_of_the_weight,
        ),
        Mistake(
            "the attention weight left out",
            "multiply each ||v_j W_O^h|| by the attention a_ij that query i gives key j.",
            _vwn_attention_left_out,
        ),
        Mistake(
            "the norm indexed by the query",
            "the vector that travels is the key's: ||v_j W_O^h|| belongs to column j, so broadcast it along the rows.",
            _vwn_norm_by_query,
        ),
        Mistake(
            "a squared norm",
            "the length is the norm itself, `.norm(dim=-1)`, not its square.",
            _vwn_squared_norm,
        ),
    ),
)
