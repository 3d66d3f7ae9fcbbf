"""Exercises of notebook 05: ``split_heads``, ``merge_heads``, ``split_fused_qkv``, ``multi_head_attention`` and
``torch_multi_head_attention``.

Notebook 05 asks for its two build pieces, ``split_heads`` and ``merge_heads``, and for ``split_fused_qkv`` as its
optional stretch; ``multi_head_attention`` (which the notebook assembles from the learner's pieces) and
``torch_multi_head_attention`` (what ``nn.MultiheadAttention`` computes from its own parameters and its own mask
convention) stay checkable by name. The most common bug of all, a
reshape straight to (batch, heads, seq, d_head) without the transpose, has a named mistake in each.

Many mistakes here keep the right shape and scramble the order of tokens, heads or features (a plain
view instead of a view and a transpose, interleaved heads); only the values give them away.
"""

from __future__ import annotations

import math

import torch

from ..attention import scaled_dot_product_attention
from ..masks import causal_mask, padding_mask
from ..multihead import merge_heads, multi_head_attention, split_fused_qkv, split_heads, torch_multi_head_attention
from .attention import softmax_attend
from .random_inputs import seeded_randn, seeded_weight
from .records import Case, Exercise, Knob, Mistake


def _split_cases(g):
    return [
        Case("batch of 2, 6 tokens, d_model 12, 3 heads", (seeded_randn(g, 2, 6, 12), 3), ("batched", "non-square")),
        Case("one sentence of 5 tokens, d_model 8, 2 heads", (seeded_randn(g, 1, 5, 8), 2), ("non-square",)),
        Case(
            "odd sizes: 7 tokens, d_model 10, 5 heads of 2", (seeded_randn(g, 3, 7, 10), 5), ("batched", "non-square")
        ),
        Case(
            "as many tokens as heads and as d_head: 3 tokens, 3 heads of 3",
            (seeded_randn(g, 2, 3, 9), 3),
            ("batched", "square"),
        ),
    ]


def _split_no_transpose(x, num_heads):
    batch, seq, d_model = x.shape
    return x.view(batch, seq, num_heads, d_model // num_heads)


def _split_plain_view(x, num_heads):
    batch, seq, d_model = x.shape
    return x.view(batch, num_heads, seq, d_model // num_heads)


def _split_sequence_axis(x, num_heads):
    batch, seq, d_model = x.shape
    return x.reshape(batch, num_heads, seq // num_heads, d_model)


def _split_transpose_wrong_axes(x, num_heads):
    batch, seq, d_model = x.shape
    return x.view(batch, seq, num_heads, d_model // num_heads).transpose(1, 3)


def _split_interleaved(x, num_heads):
    batch, seq, d_model = x.shape
    return x.view(batch, seq, d_model // num_heads, num_heads).permute(0, 3, 1, 2)


SPLIT_HEADS = Exercise(
    name="split_heads",
    reference=split_heads,
    prompt="your function receives `x` (batch, seq, d_model) and `num_heads`, which divides d_model; it "
    "returns (batch, num_heads, seq, d_head) with d_head = d_model // num_heads, head h holding features "
    "h * d_head ... (h + 1) * d_head - 1 of every token.",
    start="cut the last axis into (heads, d_head) first, then move the heads axis in front of the tokens.",
    make_cases=_split_cases,
    axes={"": ("batch", "heads", "token rows", "feature columns")},
    notebook="05",
    gradients=("x",),
    mistakes=(
        Mistake(
            "a view without the transpose",
            "after `x.view(batch, seq, num_heads, d_head)`, swap seq and heads with `.transpose(1, 2)`.",
            _split_no_transpose,
        ),
        Mistake(
            "a plain view to (batch, heads, seq, d_head)",
            "the shape is right but tokens and features are scrambled: view as (batch, seq, heads, d_head) "
            "first, then `.transpose(1, 2)`.",
            _split_plain_view,
        ),
        Mistake(
            "splitting the sequence axis",
            "heads split the features (the last axis), not the tokens: every head sees every token.",
            _split_sequence_axis,
        ),
        Mistake(
            "interleaved heads, a view as (d_head, num_heads)",
            "each head takes a contiguous slice of the features: view as (batch, seq, num_heads, d_head), "
            "heads before d_head.",
            _split_interleaved,
        ),
        Mistake(
            "the heads axis swapped with d_head (`.transpose(1, 3)`)",
            "after the view, (batch, seq, heads, d_head), swap seq and heads: `.transpose(1, 2)`.",
            _split_transpose_wrong_axes,
        ),
    ),
)


def _merge_cases(g):
    return [
        Case("batch of 2, 3 heads, 5 tokens, d_head 4", (seeded_randn(g, 2, 3, 5, 4),), ("batched", "non-square")),
        Case("one sentence, 2 heads, 3 tokens, d_head 2", (seeded_randn(g, 1, 2, 3, 2),), ("non-square",)),
        Case(
            "as many heads as tokens: 4 heads, 4 tokens, d_head 3",
            (seeded_randn(g, 2, 4, 4, 3),),
            ("batched", "square"),
        ),
    ]


def _merge_no_transpose(x):
    batch, heads, seq, d_head = x.shape
    return x.reshape(batch, seq, heads * d_head)


def _merge_heads_summed(x):
    return x.sum(dim=1)


def _merge_view_after_transpose(x):
    batch, heads, seq, d_head = x.shape
    return x.transpose(1, 2).view(batch, seq, heads * d_head)  # raises: the transpose is not contiguous


def _merge_first_head_only(x):
    return x[:, 0]


def _merge_interleaved(x):
    batch, heads, seq, d_head = x.shape
    return x.permute(0, 2, 3, 1).reshape(batch, seq, heads * d_head)


MERGE_HEADS = Exercise(
    name="merge_heads",
    reference=merge_heads,
    prompt="your function receives `x` (batch, heads, seq, d_head); it returns (batch, seq, heads * d_head), "
    "each token's head outputs concatenated in head order: the inverse of `split_heads`.",
    start="undo `split_heads`, its steps in reverse order.",
    make_cases=_merge_cases,
    axes={"": ("batch", "token rows", "feature columns")},
    notebook="05",
    gradients=("x",),
    mistakes=(
        Mistake(
            "a reshape without transposing back",
            "bring seq before heads with `x.transpose(1, 2)` first, then `.reshape(batch, seq, heads * d_head)`.",
            _merge_no_transpose,
        ),
        Mistake(
            "the heads summed instead of concatenated",
            "the heads are put side by side (concatenated), which restores the width heads * d_head.",
            _merge_heads_summed,
        ),
        Mistake(
            "interleaved heads, d_head before heads",
            "after the transpose the order is (batch, seq, heads, d_head): reshape that, without moving "
            "d_head in front of heads.",
            _merge_interleaved,
        ),
        Mistake(
            "`view` after the transpose",
            "a transposed tensor is not contiguous, so `.view` refuses it: use `.reshape(...)` "
            "(or `.contiguous().view(...)`).",
            _merge_view_after_transpose,
        ),
        Mistake(
            "only the first head kept",
            "every head contributes d_head features: lay all of them side by side, (batch, seq, heads * d_head).",
            _merge_first_head_only,
        ),
    ),
)


# --- a fused Q/K/V projection, split ---------------------------------------------------------


def _fused_cases(g):
    return [
        Case("batch of 2, 5 tokens, d_model 8, 2 heads", (seeded_randn(g, 2, 5, 24), 2), ("batched", "non-square")),
        Case("one sentence of 3 tokens, d_model 6, 3 heads of 2", (seeded_randn(g, 1, 3, 18), 3), ("non-square",)),
        Case(
            "as many tokens as heads and as d_head: 3 tokens, 3 heads of 3",
            (seeded_randn(g, 2, 3, 27), 3),
            ("batched", "square"),
        ),
        Case(
            "one head: batch of 2, 4 tokens, d_model 5",
            (seeded_randn(g, 2, 4, 15), 1),
            ("batched", "odd", "non-square"),
        ),
    ]


def _fused_heads_first(qkv, num_heads):
    batch, seq, width = qkv.shape
    per_head = qkv.view(batch, seq, num_heads, width // num_heads).transpose(1, 2)  # (b, h, s, 3 d_head)
    return per_head.chunk(3, dim=-1)  # a q, k, v per head: Megatron's layout, not this one


def _fused_no_transpose(qkv, num_heads):
    batch, seq, width = qkv.shape
    return tuple(part.view(batch, seq, num_heads, -1) for part in qkv.chunk(3, dim=-1))


def _fused_plain_reshape(qkv, num_heads):
    batch, seq, width = qkv.shape
    return tuple(part.reshape(batch, num_heads, seq, -1) for part in qkv.chunk(3, dim=-1))  # no transpose


def _fused_chunked_along_tokens(qkv, num_heads):
    return tuple(split_heads(part, num_heads) for part in qkv.chunk(3, dim=1))


def _fused_interleaved(qkv, num_heads):
    batch, seq, width = qkv.shape
    q, k, v = qkv.view(batch, seq, width // 3, 3).unbind(-1)  # every third feature
    return split_heads(q, num_heads), split_heads(k, num_heads), split_heads(v, num_heads)


SPLIT_FUSED_QKV = Exercise(
    name="split_fused_qkv",
    reference=split_fused_qkv,
    prompt="your function receives `qkv` (batch, seq, 3 * d_model), the output of one fused projection "
    "`x @ torch.cat([w_q, w_k, w_v], dim=1)` (as `nn.MultiheadAttention`'s `in_proj_weight` computes), and "
    "`num_heads`; it returns the tuple `(q, k, v)`, each (batch, num_heads, seq, d_head) with "
    "d_head = d_model // num_heads, as `split_heads` would give for `x @ w_q`, `x @ w_k`, `x @ w_v`.",
    start="cut the last axis into its three equal parts first.",
    make_cases=_fused_cases,
    outputs=("q", "k", "v"),
    axes={name: ("batch", "heads", "token rows", "feature columns") for name in ("q", "k", "v")},
    notebook="05",
    mistakes=(
        Mistake(
            "the heads cut before q, k and v",
            "here Q, K and V sit side by side, each d_model wide, and only then is each cut into heads: chunk "
            "into three first (Megatron-LM stores a q, k, v per head instead; this is not that layout).",
            _fused_heads_first,
        ),
        Mistake(
            "the heads not moved in front of the tokens",
            "after the view, (batch, seq, heads, d_head), swap seq and heads with `.transpose(1, 2)`.",
            _fused_no_transpose,
        ),
        Mistake(
            "a reshape to (batch, heads, seq, d_head) without the transpose",
            "a reshape straight to (batch, heads, seq, d_head) keeps the right shape but gives head 0 the first "
            "tokens' features instead of the first d_head features of every token: the heads come out in another "
            "order. View as (batch, seq, heads, d_head), then `.transpose(1, 2)` (notebook 05's pitfall 2).",
            _fused_plain_reshape,
        ),
        Mistake(
            "the three parts cut along the tokens",
            "Q, K and V sit side by side along the features, the last axis: `qkv.chunk(3, dim=-1)`.",
            _fused_chunked_along_tokens,
        ),
        Mistake(
            "every third feature taken (interleaved)",
            "the first d_model features are Q, the next d_model K, the last d_model V: three contiguous blocks.",
            _fused_interleaved,
        ),
    ),
)


def _mha_cases(g):
    first = (seeded_randn(g, 2, 5, 8), *_mha_weights(g, 8), 2)
    padded = (seeded_randn(g, 2, 6, 12), *_mha_weights(g, 12), 3)
    return [
        Case("batch of 2, 5 tokens, d_model 8, 2 heads, no mask", first, ("no mask", "batched")),
        Case(
            "batch of 2, 6 tokens, d_model 12, 3 heads, padding mask (lengths 6 and 4)",
            (*padded, padding_mask(torch.tensor([6, 4]), 6)[:, None, None, :]),
            ("masked", "batched"),
        ),
        Case(
            "one sentence of 4 tokens, d_model 6, 3 heads of 2, causal mask",
            (seeded_randn(g, 1, 4, 6), *_mha_weights(g, 6), 3, causal_mask(4)),
            ("masked",),
        ),
        Case("the inputs of case 2 without the mask", padded, ("no mask", "batched")),
    ]


def _mha_weights(g, d_model):
    return tuple(seeded_weight(g, d_model, d_model) for _ in range(4))


def _mha_heads(x, w_q, w_k, w_v, num_heads):
    return (split_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))  # 3 x (batch, heads, seq, d_head)


def _mha_no_output_projection(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q, k, v = _mha_heads(x, w_q, w_k, w_v, num_heads)
    return merge_heads(scaled_dot_product_attention(q, k, v, mask)[0])


def _mha_scaled_by_sqrt_d_model(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q, k, v = _mha_heads(x, w_q, w_k, w_v, num_heads)
    context, _ = softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(x.shape[-1]), v, mask)
    return merge_heads(context) @ w_o


def _mha_split_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    batch, seq, d_model = x.shape
    q, k, v = ((x @ w).view(batch, seq, num_heads, d_model // num_heads) for w in (w_q, w_k, w_v))
    context, _ = softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(d_model // num_heads), v, mask)
    return context.reshape(batch, seq, d_model) @ w_o


def _mha_plain_reshape(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    batch, seq, d_model = x.shape
    q, k, v = ((x @ w).reshape(batch, num_heads, seq, d_model // num_heads) for w in (w_q, w_k, w_v))
    context, _ = softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(d_model // num_heads), v, mask)
    return context.reshape(batch, seq, d_model) @ w_o  # the same plain reshape back


def _mha_plain_reshape_merged_right(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    batch, seq, d_model = x.shape
    q, k, v = ((x @ w).reshape(batch, num_heads, seq, d_model // num_heads) for w in (w_q, w_k, w_v))
    context, _ = softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(d_model // num_heads), v, mask)
    return merge_heads(context) @ w_o


def _mha_merge_without_transpose(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q, k, v = _mha_heads(x, w_q, w_k, w_v, num_heads)
    context, _ = scaled_dot_product_attention(q, k, v, mask)  # (batch, heads, seq, d_head)
    return context.reshape(x.shape) @ w_o


def _mha_if_mask(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q, k, v = _mha_heads(x, w_q, w_k, w_v, num_heads)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask:  # raises for a mask of more than one entry
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return merge_heads(softmax_attend(scores, v)[0]) @ w_o


def _mha_mask_inverted(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q, k, v = _mha_heads(x, w_q, w_k, w_v, num_heads)
    return merge_heads(scaled_dot_product_attention(q, k, v, None if mask is None else ~mask)[0]) @ w_o


def _mha_w_o_transposed(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q, k, v = _mha_heads(x, w_q, w_k, w_v, num_heads)
    context = scaled_dot_product_attention(q, k, v, mask)[0]  # (batch, heads, seq, d_head)
    return merge_heads(context) @ w_o.T


def _mha_mask_ignored(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q, k, v = _mha_heads(x, w_q, w_k, w_v, num_heads)
    return merge_heads(scaled_dot_product_attention(q, k, v)[0]) @ w_o


def _mha_variant(settings, x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    """Multi-head attention with each of its parts chosen by ``settings`` (the knobs below)."""
    heads = num_heads if settings["heads"] == "given" else 1
    if settings["split"] == "interleaved":
        q, k, v = (_split_interleaved(x @ w, heads) for w in (w_q, w_k, w_v))
    else:
        q, k, v = _mha_heads(x, w_q, w_k, w_v, heads)
    divisor = {
        "sqrt d_head": math.sqrt(q.shape[-1]),
        "1": 1.0,
        "sqrt d_model": math.sqrt(x.shape[-1]),
        "d_head": q.shape[-1],
    }[settings["scale"]]
    scores = q @ k.transpose(-2, -1) / divisor
    if mask is not None and settings["mask"] == "added":
        scores = scores + mask
    elif mask is not None and settings["mask"] == "multiplied":
        scores = scores * mask
    elif mask is not None and settings["mask"] in ("right", "inverted"):
        blocked = mask if settings["mask"] == "inverted" else ~mask
        scores = scores.masked_fill(blocked, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=settings["dim"])
    if mask is not None and settings["mask"] == "after softmax":
        weights = weights * mask
    context = weights @ v
    merged = merge_heads(context)
    return {"w_o": lambda: merged @ w_o, "none": lambda: merged, "w_o.T": lambda: merged @ w_o.T}[settings["output"]]()


_MHA_KNOBS = (
    Knob(
        "scale",
        (
            ("sqrt d_head", "", ""),
            ("1", "no scaling", "divide each head's scores by √d_head."),
            ("sqrt d_model", "a scale of √d_model", "each head's width is d_head = d_model // num_heads: √d_head."),
            ("d_head", "a division by d_head", "divide by the square root of d_head."),
        ),
    ),
    Knob("heads", (("given", "", ""), ("one", "a single head", "split into `num_heads` heads."))),
    Knob("dim", ((-1, "", ""), (-2, "the softmax over the queries", "softmax over the keys, `dim=-1`."))),
    Knob(
        "mask",
        (
            ("right", "", ""),
            ("ignored", "the mask ignored", "pass the mask to every head's attention."),
            ("inverted", "the mask inverted", "True means *may attend*: block where it is False."),
            (
                "added",
                "the boolean mask added to the scores",
                "a boolean mask adds 1 where a key is allowed and blocks nothing: fill the blocked scores, "
                "`scores.masked_fill(~mask, torch.finfo(scores.dtype).min)`.",
            ),
            (
                "multiplied",
                "the scores multiplied by the mask",
                "a score of 0 still gets weight after the softmax (exp(0) = 1): fill the blocked scores with the most "
                "negative number instead, `scores.masked_fill(~mask, torch.finfo(scores.dtype).min)`.",
            ),
            (
                "after softmax",
                "the mask applied after the softmax",
                "zeroing weights after the softmax leaves rows that no longer sum to 1: block the scores before it.",
            ),
        ),
    ),
    Knob(
        "split",
        (
            ("contiguous", "", ""),
            (
                "interleaved",
                "interleaved heads (a view as (d_head, num_heads))",
                "each head takes a contiguous slice of the features: view as (batch, seq, num_heads, d_head), heads "
                "before d_head, then `.transpose(1, 2)`.",
            ),
        ),
    ),
    Knob(
        "output",
        (
            ("w_o", "", ""),
            ("none", "no output projection", "multiply the merged heads by `w_o`."),
            ("w_o.T", "W_O transposed", "use `w_o` as it is: `merged @ w_o`."),
        ),
    ),
)


MULTI_HEAD_ATTENTION = Exercise(
    name="multi_head_attention",
    reference=multi_head_attention,
    prompt="your function receives `x` (batch, seq, d_model), four matrices `w_q`, `w_k`, `w_v`, `w_o` "
    "(d_model, d_model) used as `x @ w`, `num_heads`, and an optional bool `mask` broadcastable to "
    "(batch, heads, seq, seq), True = may attend; it returns (batch, seq, d_model): project, split into "
    "heads, attend in each head (scaled by √d_head), merge the heads, multiply by `w_o`.",
    start="project `x` three times and split each projection into heads; attend; undo the split last.",
    make_cases=_mha_cases,
    knobs=_MHA_KNOBS,
    variant=_mha_variant,
    axes={"": ("batch", "token rows", "feature columns")},
    notebook="05",
    mistakes=(
        Mistake(
            "no output projection W_O",
            "after merging the heads, multiply by `w_o`: it mixes what the heads found.",
            _mha_no_output_projection,
        ),
        Mistake(
            "scaling by √d_model instead of √d_head",
            "each head is an attention of width d_head = d_model // num_heads: divide by √d_head.",
            _mha_scaled_by_sqrt_d_model,
        ),
        Mistake(
            "splitting heads without the transpose",
            "after `.view(batch, seq, num_heads, d_head)` use `.transpose(1, 2)`, so that each head attends "
            "over the tokens, not over the other heads.",
            _mha_split_without_transpose,
        ),
        Mistake(
            "a reshape to (batch, heads, seq, d_head) without the transpose (split and merge)",
            "a reshape straight to (batch, heads, seq, d_head) keeps the right shape but gives head 0 the first "
            "tokens' features instead of the first d_head features of every token: the heads come out in another "
            "order. View as (batch, seq, heads, d_head), then `.transpose(1, 2)` (notebook 05's pitfall 2).",
            _mha_plain_reshape,
        ),
        Mistake(
            "a reshape to (batch, heads, seq, d_head) without the transpose (split only)",
            "the merge is right, but the split is a reshape straight to (batch, heads, seq, d_head), which puts "
            "the heads (and the tokens inside them) in another order: view as (batch, seq, heads, d_head), then "
            "`.transpose(1, 2)`.",
            _mha_plain_reshape_merged_right,
        ),
        Mistake(
            "merging heads without the transpose",
            "the context is (batch, heads, seq, d_head): `.transpose(1, 2)` before the reshape to "
            "(batch, seq, d_model).",
            _mha_merge_without_transpose,
        ),
        Mistake(
            "the mask ignored",
            "pass `mask` on to the attention of every head; it broadcasts over the heads axis.",
            _mha_mask_ignored,
        ),
        Mistake(
            "`if mask:` instead of `if mask is not None:`",
            "`if mask:` asks a whole tensor for one True/False and raises; test whether a mask was given with "
            "`if mask is not None:`.",
            _mha_if_mask,
        ),
        Mistake(
            "the mask inverted",
            "in this course True means *may attend*: block the keys where the mask is False (`~mask`).",
            _mha_mask_inverted,
        ),
        Mistake(
            "W_O transposed",
            "the matrices here are used as `x @ w`, so the last step is `merged @ w_o`, without `.T`.",
            _mha_w_o_transposed,
        ),
    ),
)


# --- nn.MultiheadAttention's computation, from its own parameters ----------------------------


def _torch_mha_cases(g):
    def pieces(d_model):
        in_proj = torch.cat([seeded_weight(g, d_model, d_model).T for _ in range(3)])  # (3 d_model, d_model), (out, in)
        return (
            in_proj,
            seeded_randn(g, 3 * d_model, scale=0.5),
            seeded_weight(g, d_model, d_model).T,
            seeded_randn(g, d_model, scale=0.5),
        )

    end = torch.tensor([[False] * 5, [False, False, False, True, True]])  # (2, 5): True = ignore
    return [
        Case(
            "batch of 2, 5 tokens, d_model 8, 2 heads, no mask",
            (seeded_randn(g, 2, 5, 8), *pieces(8), 2),
            ("batched", "no mask", "non-square"),
        ),
        Case(
            "the same sizes with a key_padding_mask (sentence 2 padded at the end; True = ignore)",
            (seeded_randn(g, 2, 5, 8), *pieces(8), 2, end),
            ("batched", "masked", "non-square"),
        ),
        Case(
            "the same sizes, sentence 2 padded at the start",
            (seeded_randn(g, 2, 5, 8), *pieces(8), 2, end.flip(-1)),
            ("batched", "masked", "non-square"),
        ),
        Case(
            "the same sizes, 4 heads of 2",
            (seeded_randn(g, 2, 5, 8), *pieces(8), 4),
            ("batched", "no mask", "non-square"),
        ),
        Case(
            "the same sizes, 1 head",
            (seeded_randn(g, 2, 5, 8), *pieces(8), 1),
            ("batched", "no mask", "non-square"),
        ),
        Case(
            "4 tokens, 2 heads of 4 (as many tokens as d_head: a transposed head still runs)",
            (seeded_randn(g, 2, 4, 8), *pieces(8), 2),
            ("batched", "no mask", "square"),
        ),
    ]


def _torch_mha_variant(
    settings, x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, key_padding_mask=None
):
    """``nn.MultiheadAttention``'s computation with each part chosen by ``settings`` (the knobs below)."""
    batch, seq, d_model = x.shape
    d_head = d_model // num_heads
    weight = in_proj_weight if settings["in_proj"] == "T" else in_proj_weight.T  # "as stored": x @ W
    qkv = x @ weight.T + (in_proj_bias if settings["in_bias"] else 0)
    q, k, v = qkv.chunk(3, dim=-1) if settings["cut"] == "blocks" else qkv.view(batch, seq, d_model, 3).unbind(-1)

    def split(t):
        if settings["split"] == "plain reshape":
            return t.reshape(batch, num_heads, seq, d_head)
        return t.view(batch, seq, num_heads, d_head).transpose(1, 2)

    q, k, v = split(q), split(k), split(v)
    divisor = {"sqrt d_head": math.sqrt(d_head), "sqrt d_model": math.sqrt(d_model), "1": 1.0}[settings["scale"]]
    scores = q @ k.transpose(-2, -1) / divisor
    if key_padding_mask is not None and settings["mask"] != "ignored":
        allowed = {
            "flipped": lambda m: ~m[:, None, None, :],
            "as allowed": lambda m: m[:, None, None, :],
            "on the queries": lambda m: ~m[:, None, :, None],
        }[settings["mask"]](key_padding_mask)
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    context = torch.softmax(scores, dim=-1) @ v  # (batch, heads, seq, d_head)
    merged = context.reshape(batch, seq, d_model) if settings["merge"] == "plain reshape" else merge_heads(context)
    out = {"T": out_proj_weight.T, "as stored": out_proj_weight}[settings["out_proj"]]
    return merged @ out + (out_proj_bias if settings["out_bias"] else 0)


_TORCH_MHA_KNOBS = (
    Knob(
        "split",
        (
            ("view and transpose", "", ""),
            (
                "plain reshape",
                "a reshape to (batch, heads, seq, d_head) without the transpose",
                "View as (batch, seq, heads, d_head), then `.transpose(1, 2)`: a plain reshape "
                "puts the heads in another order.",
            ),
        ),
    ),
    Knob(
        "merge",
        (
            ("transpose", "", ""),
            (
                "plain reshape",
                "the heads merged without the transpose",
                "The context (batch, heads, seq, d_head) needs `.transpose(1, 2)` before the reshape to "
                "(batch, seq, d_model).",
            ),
        ),
    ),
    Knob(
        "mask",
        (
            ("flipped", "", ""),
            (
                "as allowed",
                "the key_padding_mask used as 'may attend'",
                "PyTorch's `key_padding_mask` is True where a key is *ignored*: block where it is True.",
            ),
            (
                "ignored",
                "the key_padding_mask ignored",
                "Block the padded keys in every head: "
                "`key_padding_mask[:, None, None, :]` broadcasts over heads and queries.",
            ),
            (
                "on the queries",
                "the mask laid along the queries",
                "The mask says which *keys* to ignore: `[:, None, None, :]`, the last axis of the scores.",
            ),
        ),
    ),
    Knob(
        "scale",
        (
            ("sqrt d_head", "", ""),
            (
                "sqrt d_model",
                "scaling by √d_model instead of √d_head",
                "Each head is an attention of width d_head: divide by √(d_model // num_heads).",
            ),
            ("1", "no scaling", "Divide the scores of each head by √d_head."),
        ),
    ),
    Knob(
        "in_proj",
        (
            ("T", "", ""),
            (
                "as stored",
                "the in_proj_weight not transposed",
                "It is stored (out, in) = (3 d_model, d_model): `x @ in_proj_weight.T`.",
            ),
        ),
    ),
    Knob("in_bias", ((True, "", ""), (False, "the in_proj_bias left out", "Add `in_proj_bias` after the product."))),
    Knob(
        "cut",
        (
            ("blocks", "", ""),
            (
                "interleaved",
                "every third feature taken as Q, K, V",
                "Q, K and V are three contiguous blocks of d_model features: `.chunk(3, dim=-1)`.",
            ),
        ),
    ),
    Knob(
        "out_proj",
        (
            ("T", "", ""),
            (
                "as stored",
                "out_proj's weight not transposed",
                "`out_proj` is an nn.Linear: `merged @ out_proj_weight.T + out_proj_bias`.",
            ),
        ),
    ),
    Knob("out_bias", ((True, "", ""), (False, "out_proj's bias left out", "Add `out_proj_bias` at the end."))),
)


def _tmha_not_flipped(
    x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, key_padding_mask=None
):
    q, k, v = split_fused_qkv(x @ in_proj_weight.T + in_proj_bias, num_heads)
    mask = None if key_padding_mask is None else key_padding_mask[:, None, None, :]  # True taken as "may attend"
    context, _ = softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v, mask)
    return merge_heads(context) @ out_proj_weight.T + out_proj_bias


def _tmha_weights_as_stored(
    x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, key_padding_mask=None
):
    q, k, v = split_fused_qkv(x @ in_proj_weight.T + in_proj_bias, num_heads)
    mask = None if key_padding_mask is None else ~key_padding_mask[:, None, None, :]
    context, _ = softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v, mask)
    return merge_heads(context) @ out_proj_weight + out_proj_bias  # runs: out_proj is square


def _tmha_plain_reshape(
    x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, key_padding_mask=None
):
    batch, seq, d_model = x.shape
    parts = (x @ in_proj_weight.T + in_proj_bias).chunk(3, dim=-1)
    q, k, v = (part.reshape(batch, num_heads, seq, d_model // num_heads) for part in parts)
    mask = None if key_padding_mask is None else ~key_padding_mask[:, None, None, :]
    context, _ = softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v, mask)
    return context.reshape(batch, seq, d_model) @ out_proj_weight.T + out_proj_bias


TORCH_MULTI_HEAD_ATTENTION = Exercise(
    name="torch_multi_head_attention",
    reference=torch_multi_head_attention,
    prompt="your function receives `x` (batch, seq, d_model) and the parameters of an `nn.MultiheadAttention` "
    "(batch_first=True): `in_proj_weight` (3 * d_model, d_model), W_Q, W_K and W_V stacked in nn.Linear's (out, in) "
    "layout, `in_proj_bias` (3 * d_model,), `out_proj_weight` (d_model, d_model) and `out_proj_bias` (d_model,) "
    "of its `out_proj`; then `num_heads` and an optional bool `key_padding_mask` (batch, seq) in PyTorch's "
    "convention, True = *ignore* this key; it returns the module's attention output (batch, seq, d_model).",
    start="one fused projection gives Q, K and V side by side, as in exercise 1; the mask's convention is PyTorch's, "
    "the opposite of this course's.",
    make_cases=_torch_mha_cases,
    knobs=_TORCH_MHA_KNOBS,
    variant=_torch_mha_variant,
    axes={"": ("batch", "token rows", "feature columns")},
    notebook="05",
    mistakes=(
        Mistake(
            "the key_padding_mask used as 'may attend'",
            "PyTorch's `key_padding_mask` is True where a key is *ignored*, the opposite of this course's masks: "
            "flip it, `~key_padding_mask[:, None, None, :]`.",
            _tmha_not_flipped,
        ),
        Mistake(
            "out_proj's weight not transposed",
            "`out_proj` is an nn.Linear, stored (out, in): `merged @ out_proj_weight.T + out_proj_bias`. Being "
            "square, the weight runs either way and gives wrong numbers one way.",
            _tmha_weights_as_stored,
        ),
        Mistake(
            "a reshape to (batch, heads, seq, d_head) without the transpose",
            "a reshape straight to (batch, heads, seq, d_head) puts the heads, and the tokens in them, in another "
            "order: view as (batch, seq, heads, d_head), then `.transpose(1, 2)`, and undo it the same way.",
            _tmha_plain_reshape,
        ),
    ),
)
