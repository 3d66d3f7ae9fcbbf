"""Exercises of notebooks 01 and 02: ``qkv_projection``, ``qkv_from_linear``, ``linear_scores``,
``attention_scores``, ``scaled_dot_product_attention``, ``flexible_attention`` and ``stable_softmax``.

Notebook 01 asks for ``qkv_from_linear`` and ``attention_scores`` (build pieces), notebook 02 for
``scaled_dot_product_attention`` (its build piece, masked through ``masked_softmax``) and ``stable_softmax``;
``linear_scores`` (01's two pieces composed) and ``flexible_attention`` (02's former stretch) stay checkable by
name. Their cases vary one property at a time from a base case (batched, square, float16, a mask, an argument left
out), so that the kind of case named as failing is the cause.

``softmax_attend``, the shared tail of the wrong attentions, serves notebook 05's mistakes too.
"""

from __future__ import annotations

import math

import torch

from ..attention import (
    attention_scores,
    flexible_attention,
    linear_scores,
    qkv_from_linear,
    qkv_projection,
    scaled_dot_product_attention,
    stable_softmax,
)
from ..masks import padding_mask
from .diagnosis import equals_one_of
from .random_inputs import seeded_randn, seeded_weight
from .records import Case, Exercise, Knob, Mistake

# --- 01: Q, K, V projections ------------------------------------------------------------------


def _qkv_cases(g):
    return [
        Case(
            "one sentence of 5 tokens, d_model 8, d_k 4, d_v 6",
            (seeded_randn(g, 5, 8), *_qkv_weights(g, 8, 4, 6)),
            ("non-square",),
        ),
        Case(
            "a batch of 2 sentences", (seeded_randn(g, 2, 5, 8), *_qkv_weights(g, 8, 4, 6)), ("batched", "non-square")
        ),
        Case(
            "odd sizes with square weights, d_model = d_k = d_v = 7",
            (seeded_randn(g, 3, 5, 7), *_qkv_weights(g, 7, 7, 7)),
            ("batched", "square"),
        ),
    ]


def _qkv_weights(g, d_model, d_k, d_v):
    return seeded_weight(g, d_model, d_k), seeded_weight(g, d_model, d_k), seeded_weight(g, d_model, d_v)


def _qkv_weights_transposed(x, w_q, w_k, w_v):
    return x @ w_q.T, x @ w_k.T, x @ w_v.T


def _qkv_k_and_v_swapped(x, w_q, w_k, w_v):
    return x @ w_q, x @ w_v, x @ w_k


def _qkv_q_and_k_swapped(x, w_q, w_k, w_v):
    return x @ w_k, x @ w_q, x @ w_v


def _qkv_one_weight_for_all(x, w_q, w_k, w_v):
    return x @ w_q, x @ w_q, x @ w_q


QKV_PROJECTION = Exercise(
    name="qkv_projection",
    reference=qkv_projection,
    prompt="your function receives `x` (..., seq, d_model) and three matrices `w_q`, `w_k` (d_model, d_k) "
    "and `w_v` (d_model, d_v); it returns the tuple `(q, k, v)` with `q = x @ w_q` and so on.",
    start="each of the three is one matrix product of `x` with its own matrix.",
    make_cases=_qkv_cases,
    outputs=("q", "k", "v"),
    axes={name: ("token rows", "feature columns") for name in ("q", "k", "v")},
    notebook="01",
    mistakes=(
        Mistake(
            "the weights transposed (`x @ w.T`)",
            "the matrices here are stored as (d_model, d_k): use `x @ w_q` as it is. "
            "(`nn.Linear` stores the transpose and computes `x @ W.T`.)",
            _qkv_weights_transposed,
        ),
        Mistake(
            "K and V swapped",
            "the keys come from `w_k` and the values from `w_v`; return them in the order (q, k, v).",
            _qkv_k_and_v_swapped,
        ),
        Mistake(
            "Q and K swapped",
            "the queries come from `w_q` and the keys from `w_k`; return them in the order (q, k, v).",
            _qkv_q_and_k_swapped,
        ),
        Mistake(
            "one matrix used for all three projections",
            "each projection has its own matrix: `x @ w_q`, `x @ w_k`, `x @ w_v`.",
            _qkv_one_weight_for_all,
        ),
    ),
)


# --- 01: Q, K, V from nn.Linear -------------------------------------------------------------


def _linear_cases(g):
    return [
        Case(
            "one sentence of 5 tokens, d_model 8, d_k 4, d_v 6",
            (seeded_randn(g, 5, 8), *_linear_weights(g, 8, 4, 6)),
            ("unbatched", "non-square"),
        ),
        Case(
            "a batch of 2 sentences",
            (seeded_randn(g, 2, 5, 8), *_linear_weights(g, 8, 4, 6)),
            ("batched", "non-square"),
        ),
        Case(
            "square weights, d_model = d_k = d_v = 6 (a transpose too few still runs)",
            (seeded_randn(g, 2, 3, 6), *_linear_weights(g, 6, 6, 6)),
            ("batched", "square"),
        ),
        Case(
            "float16: a batch of 2, d_model 8, d_k = d_v = 4",
            tuple(t.half() for t in (seeded_randn(g, 2, 3, 8), *_linear_weights(g, 8, 4, 4))),
            ("batched", "float16", "non-square"),
        ),
    ]


def _linear_weights(g, d_model, d_k, d_v):
    """w_q, b_q, w_k, b_k, w_v, b_v in nn.Linear's (out, in) layout."""
    w_q, w_k, w_v = (seeded_weight(g, d_model, d).T.contiguous() for d in (d_k, d_k, d_v))
    return w_q, seeded_randn(g, d_k), w_k, seeded_randn(g, d_k), w_v, seeded_randn(g, d_v)


def _linear_not_transposed(x, w_q, b_q, w_k, b_k, w_v, b_v):
    return x @ w_q + b_q, x @ w_k + b_k, x @ w_v + b_v


def _linear_no_biases(x, w_q, b_q, w_k, b_k, w_v, b_v):
    return x @ w_q.T, x @ w_k.T, x @ w_v.T


def _linear_biases_swapped(x, w_q, b_q, w_k, b_k, w_v, b_v):
    return x @ w_q.T + b_k, x @ w_k.T + b_q, x @ w_v.T + b_v


def _linear_2d_transpose(x, w_q, b_q, w_k, b_k, w_v, b_v):
    return tuple(w @ x.T + b[:, None] for w, b in ((w_q, b_q), (w_k, b_k), (w_v, b_v)))  # (d, seq): x.T


def _qkv_linear_explain(case, values, expected):
    """What each wrong item of the learner's (q, k, v) is, in terms of its layer's weight and bias."""
    x, *params = case.args
    said = []
    for index, name in enumerate(("q", "k", "v")):
        if index >= len(values) or not isinstance(values[index], torch.Tensor):
            continue
        weight, bias = params[2 * index], params[2 * index + 1]
        found = equals_one_of(
            values[index],
            expected[index],
            (
                (f"x @ w_{name}.T *minus* b_{name}: nn.Linear adds its bias", lambda w=weight, b=bias: x @ w.T - b),
                (
                    f"(x + b_{name}) @ w_{name}.T: the bias is added after the product",
                    lambda w=weight, b=bias: (x + b[: x.shape[-1]]) @ w.T if b.shape[0] == x.shape[-1] else None,
                ),
                (
                    f"x @ w_{name}.T + b_{name}, divided by √d_k: the scaling belongs to the scores, not here",
                    lambda w=weight, b=bias: (x @ w.T + b) / math.sqrt(params[0].shape[0]),
                ),
            ),
        )
        if found:
            said.append(f"`{name}`: {found[len('It equals ') :]}")
    return " ".join(said) or None


QKV_FROM_LINEAR = Exercise(
    name="qkv_from_linear",
    reference=qkv_from_linear,
    prompt="your function receives `x` (..., seq, d_model) and the `.weight` and `.bias` of three `nn.Linear` "
    "layers: `w_q`, `b_q`, `w_k`, `b_k`, `w_v`, `b_v`, each weight in nn.Linear's (out, in) layout, (d_k, d_model) "
    "or (d_v, d_model); it returns `(q, k, v)` exactly as the three layers would compute them.",
    start="nn.Linear stores its weight as (out, in): decide on which side of `x` it goes, in which orientation.",
    make_cases=_linear_cases,
    outputs=("q", "k", "v"),
    axes={name: ("token rows", "feature columns") for name in ("q", "k", "v")},
    explain_outputs=_qkv_linear_explain,
    notebook="01",
    gradients=("x", "w_q", "b_q", "w_k", "b_k", "w_v", "b_v"),
    mistakes=(
        Mistake(
            "the weights used as they are stored, without a transpose",
            "nn.Linear keeps W as (out, in) and computes `x @ W.T + b`; `x @ W` only runs when W is square, "
            "and then gives the wrong numbers.",
            _linear_not_transposed,
        ),
        Mistake(
            "the biases left out",
            "each nn.Linear adds its bias after the product: `x @ w.T + b`.",
            _linear_no_biases,
        ),
        Mistake(
            "the result transposed: (features, tokens)",
            "keep the tokens as rows: `x @ w.T` gives (..., seq, d_k); `w @ x.T` gives its transpose.",
            _linear_2d_transpose,
        ),
        Mistake(
            "the query and key biases swapped",
            "each projection adds its own bias: `b_q` to the queries, `b_k` to the keys.",
            _linear_biases_swapped,
        ),
    ),
)


# --- 01: the scores of two nn.Linear projections --------------------------------------------


def _linear_scores_cases(g):
    return [
        Case(
            "one sentence of 5 tokens, d_model 8, d_k 4",
            (seeded_randn(g, 5, 8), *_linear_weights(g, 8, 4, 4)[:4]),
            ("unbatched", "non-square"),
        ),
        Case(
            "the same sizes, a batch of 2 sentences",
            (seeded_randn(g, 2, 5, 8), *_linear_weights(g, 8, 4, 4)[:4]),
            ("batched", "non-square"),
        ),
        Case(
            "one sentence, square weights: d_model = d_k = 6 (a transpose too few still runs)",
            (seeded_randn(g, 5, 6), *_linear_weights(g, 6, 6, 6)[:4]),
            ("unbatched", "square"),
        ),
        Case(
            "one sentence of 5 tokens, d_model 8, d_k 4, in float16",
            tuple(t.half() for t in (seeded_randn(g, 5, 8), *_linear_weights(g, 8, 4, 4)[:4])),
            ("unbatched", "float16", "non-square"),
        ),
        Case(
            "one sentence of 3 tokens, d_model 8, d_k 4 (fewer tokens than features)",
            (seeded_randn(g, 3, 8), *_linear_weights(g, 8, 4, 4)[:4]),
            ("unbatched", "non-square"),
        ),
    ]


def _linear_scores_variant(settings, x, w_q, b_q, w_k, b_k):
    """The scores of two nn.Linear projections with each part chosen by ``settings`` (the knobs below)."""
    if settings["dtype"] == "float32":
        x, w_q, b_q, w_k, b_k = (t.float() for t in (x, w_q, b_q, w_k, b_k))
    if settings["weights"] == "as stored":
        w_q, w_k = w_q.T, w_k.T
    bias_q, bias_k = {"both": (b_q, b_k), "none": (0, 0), "query only": (b_q, 0), "key only": (0, b_k)}.get(
        settings["biases"], (b_k, b_q)
    )
    if settings["weights"] == "shared":
        w_k, bias_k = w_q, bias_q
    q, k = x @ w_q.T + bias_q, x @ w_k.T + bias_k
    scores = {
        "q k^T": lambda: q @ k.transpose(-2, -1),
        "k q^T": lambda: k @ q.transpose(-2, -1),
        "k.T": lambda: q @ _reverse_axes(k),
        "q^T k": lambda: q.transpose(-2, -1) @ k,
    }[settings["product"]]()
    scores = scores / {"1": 1.0, "sqrt d_k": math.sqrt(q.shape[-1]), "d_k": q.shape[-1]}[settings["scale"]]
    return torch.softmax(scores, dim=-1) if settings["softmax"] else scores


_LINEAR_SCORES_KNOBS = (
    Knob(
        "weights",
        (
            ("transposed", "", ""),
            (
                "as stored",
                "the weights used as they are stored, without a transpose",
                "nn.Linear keeps W as (out, in) and computes `x @ W.T + b`.",
            ),
            ("shared", "the query weights used for the keys too", "the keys come from `w_k` and `b_k`."),
        ),
    ),
    Knob(
        "biases",
        (
            ("both", "", ""),
            ("none", "the biases left out", "each nn.Linear adds its bias after the product."),
            ("query only", "the key bias left out", "the keys get their bias `b_k` too."),
            ("key only", "the query bias left out", "the queries get their bias `b_q` too."),
            ("swapped", "the two biases swapped", "`b_q` goes with the queries, `b_k` with the keys."),
        ),
    ),
    Knob(
        "product",
        (
            ("q k^T", "", ""),
            ("k q^T", "keys times queries (the scores transposed)", "rows are queries: `q @ k.transpose(-2, -1)`."),
            (
                "k.T",
                "a transpose for 2-D matrices only (`k.T`)",
                "`.T` reverses every axis of a batch; `k.transpose(-2, -1)` swaps the last two.",
            ),
            (
                "q^T k",
                "the product over the tokens (`qᵀ k`, features by features)",
                "a score pairs a query token with a key token: the product runs over the d_k features.",
            ),
        ),
    ),
    Knob(
        "scale",
        (
            ("1", "", ""),
            (
                "sqrt d_k",
                "the scores scaled by √d_k",
                "this exercise asks for the raw scores; the scale is notebook 02's.",
            ),
            ("d_k", "the scores divided by d_k", "this exercise asks for the raw scores, unscaled."),
        ),
    ),
    Knob(
        "softmax",
        (
            (False, "", ""),
            (True, "a softmax applied", "this exercise asks for the raw scores; the softmax is notebook 02's."),
        ),
    ),
    Knob(
        "dtype",
        (
            ("input", "", ""),
            ("float32", "the scores computed in float32", "keep the inputs' dtype (no `.float()`)."),
        ),
    ),
)


def _ls_not_transposed(x, w_q, b_q, w_k, b_k):
    return (x @ w_q + b_q) @ (x @ w_k + b_k).transpose(-2, -1)  # runs only for square weights


def _ls_no_biases(x, w_q, b_q, w_k, b_k):
    return (x @ w_q.T) @ (x @ w_k.T).transpose(-2, -1)


def _ls_scaled(x, w_q, b_q, w_k, b_k):
    return (x @ w_q.T + b_q) @ (x @ w_k.T + b_k).transpose(-2, -1) / math.sqrt(w_q.shape[0])


def _ls_keys_times_queries(x, w_q, b_q, w_k, b_k):
    return (x @ w_k.T + b_k) @ (x @ w_q.T + b_q).transpose(-2, -1)


def _linear_scores_explain(case, value, expected):
    """Which other score the learner's is: minus a squared distance, or the biases' product added afterwards."""
    x, w_q, b_q, w_k, b_k = case.args
    q, k = x @ w_q.T + b_q, x @ w_k.T + b_k
    return equals_one_of(
        value,
        expected,
        (
            (
                "minus the squared distance between each query and key: the score is their dot product, `q @ k.mT`",
                lambda: -((q[..., :, None, :] - k[..., None, :, :]) ** 2).sum(-1),
            ),
            (
                "(x @ w_q.T) @ (x @ w_k.T).mT plus b_q · b_k: each bias is added to its projection before the product",
                lambda: (x @ w_q.T) @ (x @ w_k.T).mT + b_q @ b_k,
            ),
        ),
    )


LINEAR_SCORES = Exercise(
    name="linear_scores",
    reference=linear_scores,
    prompt="your function receives `x` (..., seq, d_model) and the `.weight` and `.bias` of two `nn.Linear` layers, "
    "`w_q`, `b_q` (the queries) and `w_k`, `b_k` (the keys), each weight in nn.Linear's (out, in) layout "
    "(d_k, d_model); it returns the raw scores (..., seq, seq) of the queries and keys those layers compute: "
    "row i, column j is query i dotted with key j, without any scaling or softmax, in the input's dtype.",
    start="two steps: what each layer computes from `x` (mind how nn.Linear stores its matrix), then every query "
    "against every key.",
    make_cases=_linear_scores_cases,
    knobs=_LINEAR_SCORES_KNOBS,
    variant=_linear_scores_variant,
    axes={"": ("query rows", "key columns")},
    explain=_linear_scores_explain,
    notebook="01",
    mistakes=(
        Mistake(
            "the weights used as they are stored, without a transpose",
            "nn.Linear keeps W as (out, in) and computes `x @ W.T + b`; `x @ W` runs only when W is square, and "
            "then gives the wrong numbers.",
            _ls_not_transposed,
        ),
        Mistake(
            "the biases left out",
            "each nn.Linear adds its bias after the product: the queries are `x @ w_q.T + b_q`, the keys likewise.",
            _ls_no_biases,
        ),
        Mistake(
            "the scores scaled by √d_k",
            "this exercise asks for the raw scores; the division by √d_k comes in notebook 02.",
            _ls_scaled,
        ),
        Mistake(
            "keys times queries (the scores transposed)",
            "rows are queries and columns are keys: the queries come first, `q @ k.transpose(-2, -1)`.",
            _ls_keys_times_queries,
        ),
    ),
)


# --- 01: attention scores ---------------------------------------------------------------------


def _scores_cases(g):
    return [
        Case("one sentence: 4 queries, 6 keys, d_k 8", (seeded_randn(g, 4, 8), seeded_randn(g, 6, 8)), ("non-square",)),
        Case(
            "batch of 2, 3 heads",
            heads := (seeded_randn(g, 2, 3, 4, 8), seeded_randn(g, 2, 3, 6, 8)),
            ("batched", "non-square"),
        ),
        Case(
            "batch of 2: 4 queries, 6 keys, d_k 8 (three axes, not square)",
            (seeded_randn(g, 2, 4, 8), seeded_randn(g, 2, 6, 8)),
            ("batched", "non-square"),
        ),
        Case(
            "square: 5 queries, 5 keys, d_k 5",
            (seeded_randn(g, 2, 5, 5), seeded_randn(g, 2, 5, 5)),
            ("batched", "square"),
        ),
        Case(
            "a cube: batch of 3, 3 queries, 3 keys, d_k 3 (every axis swap runs)",
            (seeded_randn(g, 3, 3, 3), seeded_randn(g, 3, 3, 3)),
            ("batched", "square"),
        ),
        Case(
            "the batch of 2, 3 heads in float16 (the scores stay float16)",
            tuple(t.half() for t in heads),
            ("batched", "non-square", "float16"),
        ),
    ]


def _scores_keys_not_transposed(q, k):
    return q @ k


def _scores_keys_times_queries(q, k):
    return k @ q.transpose(-2, -1)


def _scores_already_scaled(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def _scores_all_axes_reversed(q, k):
    return q @ _reverse_axes(k)


def _scores_matrix_transpose(q, k):
    return q @ k.t()  # raises for more than 2 dimensions


def _scores_first_two_axes_swapped(q, k):
    return q @ k.transpose(0, 1)


def _scores_softmax_applied(q, k):
    return torch.softmax(q @ k.transpose(-2, -1), dim=-1)


def _reverse_axes(x):
    return x.permute(*reversed(range(x.dim())))  # what `x.T` does to a tensor of any rank


_BATCHED_TRANSPOSE_HINT = (
    "your code works for one matrix but not for a batch: `.T`, `.t()` and `torch.mm` are meant for 2-D "
    "matrices; `k.transpose(-2, -1)` and `@` work whatever the batch axes in front."
)


ATTENTION_SCORES = Exercise(
    name="attention_scores",
    reference=attention_scores,
    prompt="your function receives queries `q` (..., q_len, d_k) and keys `k` (..., k_len, d_k); it returns "
    "the raw scores `q @ kᵀ` of shape (..., q_len, k_len), without any scaling: entry (i, j) is query i dotted "
    "with key j, whatever batch or head axes come in front.",
    start="each score is the dot product of one query with one key; count the axes from the end, so that batch "
    "and head axes in front pass through.",
    make_cases=_scores_cases,
    axes={"": ("query rows", "key columns")},
    notebook="01",
    gradients=("q", "k"),
    mistakes=(
        Mistake(
            "the keys not transposed (`q @ k`)",
            "each query is dotted with each key, so the keys need their last two axes swapped: "
            "`q @ k.transpose(-2, -1)`.",
            _scores_keys_not_transposed,
        ),
        Mistake(
            "keys times queries (`k @ qᵀ`)",
            "rows are queries and columns are keys: put `q` first, `q @ k.transpose(-2, -1)`.",
            _scores_keys_times_queries,
        ),
        Mistake(
            "scores already scaled by √d_k",
            "this exercise asks for the raw scores; the division by √d_k comes in the next notebook.",
            _scores_already_scaled,
        ),
        Mistake(
            "a transpose for 2-D matrices only (`k.T`)",
            _BATCHED_TRANSPOSE_HINT,
            _scores_all_axes_reversed,
        ),
        Mistake(
            "a transpose for 2-D matrices only (`k.t()`)",
            "`.t()` refuses anything but a 2-D matrix; `k.transpose(-2, -1)` swaps the last two axes whatever "
            "the batch and head axes in front.",
            _scores_matrix_transpose,
        ),
        Mistake(
            "the first two axes transposed (`k.transpose(0, 1)`)",
            "axes 0 and 1 are the last two only for a 2-D matrix; with batch axes in front, "
            "`k.transpose(-2, -1)` counts from the end and always swaps tokens and features.",
            _scores_first_two_axes_swapped,
        ),
        Mistake(
            "a softmax applied to the scores",
            "this exercise asks for the raw scores; the softmax turns them into weights in the next notebook.",
            _scores_softmax_applied,
        ),
    ),
)


# --- 02: scaled dot-product attention ---------------------------------------------------------


def _sdpa_cases(g):
    return [
        Case(
            "one sentence, no mask: 4 queries, 6 keys, d_k 8, d_v 5",
            (seeded_randn(g, 4, 8), seeded_randn(g, 6, 8), seeded_randn(g, 6, 5)),
            ("no mask", "non-square"),
        ),
        Case(
            "batch of 2, 2 heads, no mask: 5 queries, 6 keys, d_k 8, d_v 3",
            (seeded_randn(g, 2, 2, 5, 8), seeded_randn(g, 2, 2, 6, 8), seeded_randn(g, 2, 2, 6, 3)),
            ("no mask", "batched", "non-square"),
        ),
        Case(
            "one sentence with a random mask: 5 queries, 6 keys, d_k 4, d_v 7",
            (seeded_randn(g, 5, 4), seeded_randn(g, 6, 4), seeded_randn(g, 6, 7), _random_mask(g, 5, 6)),
            ("masked", "non-square"),
        ),
        Case(
            "batch of 2 with a padding mask (lengths 4 and 3)",
            (
                seeded_randn(g, 2, 5, 8),
                seeded_randn(g, 2, 6, 8),
                seeded_randn(g, 2, 6, 5),
                padding_mask(torch.tensor([4, 3]), 6)[:, None],
            ),
            ("masked", "batched", "non-square"),
        ),
        Case(
            "batch of 2, 2 heads, square (6 queries, 6 keys, d_k 6), random mask",
            (
                seeded_randn(g, 2, 2, 6, 6),
                seeded_randn(g, 2, 2, 6, 6),
                seeded_randn(g, 2, 2, 6, 3),
                _random_mask(g, 2, 1, 6, 6),
            ),
            ("masked", "batched", "square"),
        ),
        Case(
            "float16: batch of 2 with a padding mask (lengths 5 and 2), d_k 16",
            (
                seeded_randn(g, 2, 3, 16).half(),
                seeded_randn(g, 2, 6, 16).half(),
                seeded_randn(g, 2, 6, 4).half(),
                padding_mask(torch.tensor([5, 2]), 6)[:, None],
            ),
            ("masked", "batched", "float16", "non-square"),
        ),
        Case(
            "bfloat16: one sentence with a random mask, 4 queries, 5 keys, d_k 12",
            (
                seeded_randn(g, 4, 12).bfloat16(),
                seeded_randn(g, 5, 12).bfloat16(),
                seeded_randn(g, 5, 2).bfloat16(),
                _random_mask(g, 4, 5),
            ),
            ("masked", "bfloat16", "non-square"),
        ),
    ]


def _random_mask(g: torch.Generator, *shape: int) -> torch.Tensor:
    """A random bool mask in which every row allows its first key and blocks its last one."""
    mask = torch.rand(*shape, generator=g) < 0.5
    mask[..., 0] = True
    mask[..., -1] = False
    return mask


def softmax_attend(scores, v, mask=None, dim=-1):
    """Mask the scores, softmax along ``dim``, weight the values: the shared tail of the variants below."""
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=dim)
    return weights @ v, weights


def _sdpa_no_scaling(q, k, v, mask=None):
    return softmax_attend(q @ k.transpose(-2, -1), v, mask)


def _sdpa_scaled_by_d_k(q, k, v, mask=None):
    return softmax_attend(q @ k.transpose(-2, -1) / q.shape[-1], v, mask)


def _sdpa_multiplied_by_sqrt_d_k(q, k, v, mask=None):
    return softmax_attend(q @ k.transpose(-2, -1) * math.sqrt(q.shape[-1]), v, mask)


def _sdpa_softmax_over_queries(q, k, v, mask=None):
    return softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v, mask, dim=-2)


def _sdpa_keys_not_transposed(q, k, v, mask=None):
    return softmax_attend(q @ k / math.sqrt(q.shape[-1]), v, mask)


def _sdpa_all_axes_reversed(q, k, v, mask=None):
    return softmax_attend(q @ _reverse_axes(k) / math.sqrt(q.shape[-1]), v, mask)


def _sdpa_softmax_over_dim_1(q, k, v, mask=None):
    return softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v, mask, dim=1)


def _sdpa_precedence_in_the_scale(q, k, v, mask=None):
    return softmax_attend(q @ k.transpose(-2, -1) / q.shape[-1] ** 1 / 2, v, mask)


def _sdpa_scaled_after_softmax(q, k, v, mask=None):
    output, weights = softmax_attend(q @ k.transpose(-2, -1), v, mask)
    weights = weights / math.sqrt(q.shape[-1])
    return weights @ v, weights


def _sdpa_scaled_by_sqrt_d_v(q, k, v, mask=None):
    return softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1]), v, mask)


def _sdpa_scaled_by_8(q, k, v, mask=None):
    return softmax_attend(q @ k.transpose(-2, -1) / 8, v, mask)


def _sdpa_outputs_swapped(q, k, v, mask=None):
    output, weights = softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v, mask)
    return weights, output


def _sdpa_if_mask(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask:  # raises for a mask of more than one entry
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return softmax_attend(scores, v)


def _sdpa_fill_minus_1e9(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)  # overflows float16
    return softmax_attend(scores, v)


def _sdpa_mask_added(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + mask  # True counts as 1: a bonus, not a block
    return softmax_attend(scores, v)


def _sdpa_computed_in_float32(q, k, v, mask=None):
    output, weights = softmax_attend(q.float() @ k.float().transpose(-2, -1) / math.sqrt(q.shape[-1]), v.float(), mask)
    return output, weights


def _sdpa_mask_ignored(q, k, v, mask=None):
    return softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v)


def _sdpa_mask_inverted(q, k, v, mask=None):
    return softmax_attend(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v, None if mask is None else ~mask)


def _sdpa_masked_scores_zero(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, 0.0)
    return softmax_attend(scores, v)


def _sdpa_mask_after_softmax(q, k, v, mask=None):
    weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    if mask is not None:
        weights = weights * mask
    return weights @ v, weights


def _attention_variant(settings, q, k, v, mask=None):
    """Scaled dot-product attention with each of its parts chosen by ``settings`` (the knobs below)."""
    divisor = {
        "sqrt d_k": math.sqrt(q.shape[-1]),
        "1": 1.0,
        "d_k": q.shape[-1],
        "sqrt d_v": math.sqrt(v.shape[-1]),
        "8": 8.0,
        "d_k / 2": q.shape[-1] / 2,
        "sqrt k_len": math.sqrt(k.shape[-2]),
    }[settings["scale"]]
    scores = q @ k.transpose(-2, -1) / divisor
    handling = settings["mask"] if mask is not None else "none"
    if handling == "fill":
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    elif handling == "inverted":
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    elif handling == "zero":
        scores = scores.masked_fill(~mask, 0.0)
    elif handling == "added":
        scores = scores + mask
    weights = torch.softmax(scores, dim=settings["dim"])
    if handling == "after":
        weights = weights * mask
    output = weights @ v
    return (weights, output) if settings["order"] == "swapped" else (output, weights)


_ATTENTION_KNOBS = (
    Knob(
        "scale",
        (
            ("sqrt d_k", "", ""),
            ("1", "no scaling", "divide the scores by √d_k."),
            ("d_k", "a division by d_k", "divide by the square root of d_k."),
            ("sqrt d_v", "a division by √d_v", "the scale is √d_k, the width of the queries and keys."),
            ("8", "a scale of 8", "take d_k from the input: `math.sqrt(q.shape[-1])`."),
            ("d_k / 2", "a division by d_k / 2 (`d_k ** 1/2`)", "`d_k ** 1/2` is d_k / 2: write `d_k ** 0.5`."),
            ("sqrt k_len", "a division by √(number of keys)", "the scale is √d_k, the width of one query."),
        ),
    ),
    Knob(
        "dim",
        (
            (-1, "", ""),
            (-2, "the softmax over the queries", "each query's weights over the keys sum to 1: `dim=-1`."),
            (1, "the softmax over `dim=1`", "count from the end: `dim=-1`."),
        ),
    ),
    Knob(
        "mask",
        (
            ("fill", "", ""),
            ("none", "the mask ignored", "pass `mask` on: `masked_softmax(scores, mask)`."),
            ("inverted", "the mask inverted", "True means *may attend*: fill where the mask is False."),
            ("zero", "masked scores set to 0", "fill with `torch.finfo(scores.dtype).min`, not 0."),
            ("added", "the mask added to the scores", "fill the blocked scores instead of adding the mask."),
            ("after", "the mask applied after the softmax", "mask the scores before the softmax."),
        ),
    ),
    Knob("order", (("right", "", ""), ("swapped", "the outputs swapped", "return `(output, weights)`."))),
)


SCALED_DOT_PRODUCT_ATTENTION = Exercise(
    name="scaled_dot_product_attention",
    reference=scaled_dot_product_attention,
    prompt="your function receives `q` (..., q_len, d_k), `k` (..., k_len, d_k), `v` (..., k_len, d_v) and an "
    "optional boolean `mask` that broadcasts to (..., q_len, k_len), True = may attend; it returns the tuple "
    "`(output, weights)`: `weights = softmax(q @ kᵀ / √d_k)` over the keys (masked keys get weight 0), "
    "shape (..., q_len, k_len), and `output = weights @ v`, shape (..., q_len, d_v).",
    start="the raw scores of notebook 01 first; then the scale, which depends on the width of one query.",
    make_cases=_sdpa_cases,
    knobs=_ATTENTION_KNOBS,
    variant=_attention_variant,
    outputs=("output", "weights"),
    axes={"output": ("query rows", "feature columns"), "weights": ("query rows", "key columns")},
    notebook="02",
    gradients=("q", "k", "v"),
    extra_solution=("_masked_softmax", "_zero_fully_masked_rows"),
    mistakes=(
        Mistake(
            "no scaling",
            "divide the scores by √d_k (`math.sqrt(q.shape[-1])`) before the softmax.",
            _sdpa_no_scaling,
        ),
        Mistake(
            "scaling by d_k instead of √d_k",
            "divide by the square root of d_k: `math.sqrt(q.shape[-1])`.",
            _sdpa_scaled_by_d_k,
        ),
        Mistake(
            "multiplying by √d_k instead of dividing",
            "the scores are divided by √d_k, which makes them smaller.",
            _sdpa_multiplied_by_sqrt_d_k,
        ),
        Mistake(
            "the softmax over the wrong axis",
            "each query's weights over the keys must sum to 1: `torch.softmax(scores, dim=-1)`.",
            _sdpa_softmax_over_queries,
        ),
        Mistake(
            "the keys not transposed",
            "the scores are `q @ k.transpose(-2, -1)`, shape (..., q_len, k_len).",
            _sdpa_keys_not_transposed,
        ),
        Mistake(
            "a transpose for 2-D matrices only (`k.T`)",
            _BATCHED_TRANSPOSE_HINT,
            _sdpa_all_axes_reversed,
        ),
        Mistake(
            "the mask ignored",
            "pass `mask` on to the softmax, `masked_softmax(scores, mask)`, which gives weight 0 to the keys where "
            "`mask` is False (by hand: `scores.masked_fill(~mask, torch.finfo(scores.dtype).min)` first).",
            _sdpa_mask_ignored,
        ),
        Mistake(
            "the mask inverted",
            "in this course True means *may attend*: fill the scores where the mask is False, with `~mask`.",
            _sdpa_mask_inverted,
        ),
        Mistake(
            "masked scores set to 0",
            "a score of 0 still gets weight after the softmax (exp(0) = 1); fill masked scores with "
            "`torch.finfo(scores.dtype).min` instead.",
            _sdpa_masked_scores_zero,
        ),
        Mistake(
            "the mask applied after the softmax",
            "zeroing weights after the softmax leaves rows that no longer sum to 1; mask the scores "
            "before the softmax.",
            _sdpa_mask_after_softmax,
        ),
        Mistake(
            "the softmax over `dim=1`",
            "`dim=1` is the key axis only for one 2-D matrix; with batch or head axes in front it is another "
            "axis. Count from the end: `torch.softmax(scores, dim=-1)`.",
            _sdpa_softmax_over_dim_1,
        ),
        Mistake(
            "operator precedence in the scale (`d_k ** 1/2`)",
            "`d_k ** 1/2` is `(d_k ** 1) / 2`, half of d_k: write `d_k ** 0.5` or `math.sqrt(d_k)`.",
            _sdpa_precedence_in_the_scale,
        ),
        Mistake(
            "the scale applied after the softmax",
            "divide the scores by √d_k *before* the softmax: the point is to keep the softmax from saturating, "
            "and weights divided afterwards no longer sum to 1.",
            _sdpa_scaled_after_softmax,
        ),
        Mistake(
            "scaling by √d_v instead of √d_k",
            "the variance of q·k grows with the width of q and k: divide by √d_k, `math.sqrt(q.shape[-1])`; "
            "d_v, the width of v, plays no part.",
            _sdpa_scaled_by_sqrt_d_v,
        ),
        Mistake(
            "a hard-coded scale of 8 (√64)",
            "8 = √64 is right only for BERT-base's heads of 64; take d_k from the input, `math.sqrt(q.shape[-1])`.",
            _sdpa_scaled_by_8,
        ),
        Mistake(
            "the outputs in the wrong order, (weights, output)",
            "return the tuple as `(output, weights)`, in that order.",
            _sdpa_outputs_swapped,
        ),
        Mistake(
            "`if mask:` instead of `if mask is not None:`",
            "`if mask:` asks a whole tensor for one True/False and raises; test whether a mask was given with "
            "`if mask is not None:`.",
            _sdpa_if_mask,
        ),
        Mistake(
            "a fill value of -1e9",
            "-1e9 does not fit in float16 (its range ends at -65504), so `masked_fill` raises; "
            "`torch.finfo(scores.dtype).min` is the most negative number of every dtype.",
            _sdpa_fill_minus_1e9,
        ),
        Mistake(
            "the boolean mask added to the scores",
            "a boolean mask added to the scores counts True as 1, a small bonus: nothing is blocked. "
            "Fill the blocked scores instead, `scores.masked_fill(~mask, torch.finfo(scores.dtype).min)`.",
            _sdpa_mask_added,
        ),
        Mistake(
            "the attention computed in float32 whatever the inputs",
            "keep the inputs' dtype: float16 and bfloat16 inputs expect outputs of the same dtype (no `.float()`).",
            _sdpa_computed_in_float32,
        ),
    ),
)


# --- 02: attention with PyTorch's two kinds of mask and a scale -------------------------------


def _flexible_cases(g):
    def qkv(*lead, q_len=4, k_len=6, d_k=8, d_v=5):
        return (
            seeded_randn(g, *lead, q_len, d_k),
            seeded_randn(g, *lead, k_len, d_k),
            seeded_randn(g, *lead, k_len, d_v),
        )

    kept = torch.tensor([True, True, False, True, False, True])  # (k_len,): keys 2 and 4 blocked
    additive = torch.zeros(6).masked_fill(~kept, -math.inf)  # (k_len,): 0 keeps, -inf blocks
    lowest = torch.zeros(6).masked_fill(~kept, torch.finfo(torch.float32).min)
    return [
        Case("one sentence, no mask, scale left out: 4 queries, 6 keys, d_k 8", qkv(), ("no mask", "defaults")),
        Case("the same, batch of 2 x 2 heads", qkv(2, 2), ("no mask", "defaults", "batched")),
        Case(
            "one sentence, a random boolean mask (True = may attend), scale left out",
            (*qkv(), _random_mask(g, 4, 6)),
            ("masked", "defaults"),
        ),
        Case(
            "one sentence, a float mask added to the scores (0 keeps, -inf blocks keys 2 and 4), scale left out",
            (*qkv(), additive),
            ("masked", "defaults"),
        ),
        Case("one sentence, no mask, scale=0.5 given", (*qkv(), None, 0.5), ("no mask",)),
        Case(
            "one sentence, a float mask of 0 and float32's most negative number, scale=0.25",
            (*qkv(), lowest, 0.25),
            ("masked",),
        ),
        Case(
            "one sentence in float16, a boolean mask, scale left out",
            tuple(t.half() for t in qkv()) + (_random_mask(g, 4, 6),),
            ("masked", "defaults", "float16"),
        ),
        Case(
            "one sentence in bfloat16, a float mask (0 / -inf), scale left out",
            tuple(t.bfloat16() for t in (*qkv(), additive)),
            ("masked", "defaults", "bfloat16"),
        ),
    ]


def _flexible_variant(settings, q, k, v, mask=None, scale=None):
    """PyTorch-style attention with each of its parts chosen by ``settings`` (the knobs below)."""
    if settings["dtype"] == "float32":
        q, k, v = q.float(), k.float(), v.float()
        mask = mask.float() if mask is not None and mask.dtype != torch.bool else mask
    d_k = q.shape[-1]
    default = {"1/sqrt d_k": 1 / math.sqrt(d_k), "1": 1.0, "1/d_k": 1 / d_k, "sqrt d_k": math.sqrt(d_k)}
    product = q @ k.transpose(-2, -1)
    if scale is None or settings["given scale"] == "ignored":
        scores = product * default[settings["default scale"]]
    elif settings["given scale"] == "divide":
        scores = product / scale
    else:
        scores = product * scale
    if mask is not None and mask.dtype == torch.bool:
        handling = settings["bool mask"]
        if handling == "fill":
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        elif handling == "inverted":
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
        elif handling == "added":
            scores = scores + mask
    elif mask is not None:
        handling = settings["float mask"]
        if handling == "added":
            scores = scores + mask
        elif handling == "as bool":
            scores = scores.masked_fill(~mask.bool(), torch.finfo(scores.dtype).min)
        elif handling == "multiplied":
            scores = scores * mask
        elif handling == "subtracted":
            scores = scores - mask
    weights = torch.softmax(scores, dim=settings["dim"])
    output = weights @ v
    return (weights, output) if settings["order"] == "swapped" else (output, weights)


_FLEXIBLE_KNOBS = (
    Knob(
        "default scale",
        (
            ("1/sqrt d_k", "", ""),
            ("1", "no scale when `scale` is left out", "`scale=None` means 1/√d_k, PyTorch's default."),
            ("1/d_k", "a default scale of 1/d_k", "the default is 1/√d_k: `1 / math.sqrt(q.shape[-1])`."),
            ("sqrt d_k", "a default scale of √d_k", "the default *divides* by √d_k: it multiplies by 1/√d_k."),
        ),
    ),
    Knob(
        "given scale",
        (
            ("multiply", "", ""),
            ("divide", "the scores divided by `scale`", "PyTorch's `scale` multiplies the scores (it is 1/√d_k)."),
            ("ignored", "the given `scale` ignored", "when `scale` is a number, use it instead of 1/√d_k."),
        ),
    ),
    Knob(
        "bool mask",
        (
            ("fill", "", ""),
            ("ignored", "the boolean mask ignored", "fill the scores where a boolean mask is False."),
            ("inverted", "the boolean mask inverted", "in a boolean mask True means *may attend*: fill at `~mask`."),
            ("added", "the boolean mask added", "a boolean mask is filled (`masked_fill`), not added."),
        ),
    ),
    Knob(
        "float mask",
        (
            ("added", "", ""),
            ("ignored", "the float mask ignored", "a float mask is added to the scaled scores."),
            (
                "as bool",
                "the float mask read as a boolean one",
                "in a float mask 0 keeps a key and -inf blocks it, so `mask.bool()` (or `mask == 0` taken as "
                "'blocked') gets it backwards: add a float mask to the scores.",
            ),
            ("multiplied", "the float mask multiplied", "a float mask is *added* to the scores."),
            ("subtracted", "the float mask subtracted", "a float mask is *added*: its -inf blocks."),
        ),
    ),
    Knob(
        "dim",
        (
            (-1, "", ""),
            (-2, "the softmax over the queries", "each query's weights over the keys sum to 1: `dim=-1`."),
        ),
    ),
    Knob("order", (("right", "", ""), ("swapped", "the outputs swapped", "return `(output, weights)`."))),
    Knob(
        "dtype",
        (
            ("input", "", ""),
            ("float32", "the attention computed in float32", "keep the inputs' dtype: no `.float()`."),
        ),
    ),
)


def _flexible_sdpa_of_notebook_02(q, k, v, mask=None, scale=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # `scale` never read
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # `~` raises on a float mask
    return softmax_attend(scores, v)


def _flexible_bool_only(q, k, v, mask=None, scale=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) if scale is None else q @ k.transpose(-2, -1) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)  # `~` raises on a float mask
    return softmax_attend(scores, v)


def _flexible_scale_divides(q, k, v, mask=None, scale=None):
    scores = q @ k.transpose(-2, -1) / (math.sqrt(q.shape[-1]) if scale is None else scale)
    return _flexible_masked(scores, v, mask)


def _flexible_scale_ignored(q, k, v, mask=None, scale=None):
    return _flexible_masked(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), v, mask)


def _flexible_if_scale(q, k, v, mask=None, scale=None):
    scores = q @ k.transpose(-2, -1) * (scale or 1.0)  # `scale or 1.0`: None becomes 1, not 1/√d_k
    return _flexible_masked(scores, v, mask)


def _flexible_masked(scores, v, mask):
    if mask is not None and mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    elif mask is not None:
        scores = scores + mask
    return softmax_attend(scores, v)


FLEXIBLE_ATTENTION = Exercise(
    name="flexible_attention",
    reference=flexible_attention,
    prompt="your function receives `q` (..., q_len, d_k), `k` (..., k_len, d_k), `v` (..., k_len, d_v), an "
    "optional `mask` that broadcasts to (..., q_len, k_len) and an optional `scale`; it returns `(output, weights)` "
    "as PyTorch's `F.scaled_dot_product_attention` computes them (which returns the output alone): the scores "
    "`q @ kᵀ` are multiplied by `scale` (by 1/√d_k when `scale` is None); a boolean mask says where a query may "
    "attend (True; the others get weight 0), a float mask is added to the scaled scores (0 keeps a key, -inf or a "
    "most negative number blocks it); then a softmax over the keys, `weights` (..., q_len, k_len), and "
    "`output = weights @ v`, (..., q_len, d_v), in the inputs' dtype. Notebook 02's own building block, "
    "`bc.scaled_dot_product_attention` (a boolean mask, the scale 1/√d_k), may be called: the given `scale` and the "
    "float mask are yours to add.",
    start="the scores and their scale first, with a `scale` of None meaning 1/√d_k; then the two kinds of mask, told "
    "apart by the mask's dtype.",
    make_cases=_flexible_cases,
    knobs=_FLEXIBLE_KNOBS,
    variant=_flexible_variant,
    outputs=("output", "weights"),
    axes={"output": ("query rows", "feature columns"), "weights": ("query rows", "key columns")},
    notebook="02",
    extra_solution=("_masked_softmax", "_zero_fully_masked_rows"),
    mistakes=(
        Mistake(
            "notebook 02's attention: no `scale`, and a boolean mask assumed",
            "two parts are missing: use `scale` when it is given (1/√d_k only when it is None), and add a float "
            "mask to the scores (`~` is not defined for floats; only a boolean mask is filled).",
            _flexible_sdpa_of_notebook_02,
        ),
        Mistake(
            "a boolean mask assumed (`~mask` on a float mask)",
            "a float mask is *added* to the scores: test `mask.dtype == torch.bool` and fill only a boolean mask; "
            "`~` is not defined for floats.",
            _flexible_bool_only,
        ),
        Mistake(
            "the scores divided by `scale`",
            "PyTorch's `scale` is the factor itself (1/√d_k by default): multiply the scores by it.",
            _flexible_scale_divides,
        ),
        Mistake(
            "the given `scale` ignored",
            "when the caller gives `scale`, it replaces 1/√d_k.",
            _flexible_scale_ignored,
        ),
        Mistake(
            "`scale or 1.0`: no default of 1/√d_k",
            "`scale=None` means 1/√d_k: `1 / math.sqrt(q.shape[-1]) if scale is None else scale`.",
            _flexible_if_scale,
        ),
    ),
)


# --- 02: a numerically stable softmax ---------------------------------------------------------


def _softmax_cases(g):
    spread = torch.tensor([[1000.0, 999.0, 990.0, 0.0], [-1000.0, -1001.0, -1003.0, -1010.0]])  # (2, 4)
    return [
        Case("scores of about 1, 3 rows of 5", (seeded_randn(g, 3, 5),), ("defaults", "non-square")),
        Case(
            "scores of 1000 and of -1000, in rows far apart (a shared shift underflows one of them)",
            (spread,),
            ("defaults", "non-square"),
        ),
        Case(
            "a batch of 2 x 2 heads, scores of about 100, dim=-1",
            (seeded_randn(g, 2, 2, 3, 6, scale=100.0), -1),
            ("batched", "non-square"),
        ),
        Case(
            "softmax down the columns: 4 rows of 3, scores of about 500, dim=0",
            (seeded_randn(g, 4, 3, scale=500.0), 0),
            ("non-square",),
        ),
        Case(
            "a square batch, softmax over dim=1: (3, 3, 3), scores of about 50",
            (seeded_randn(g, 3, 3, 3, scale=50.0), 1),
            ("batched", "square"),
        ),
        Case(
            "float16 scores of about 30 (exp(12) already overflows float16)",
            (seeded_randn(g, 2, 6, scale=30.0).half(),),
            ("float16", "defaults", "non-square"),
        ),
        Case(
            "masked keys at -inf in a row of 4",
            (torch.tensor([[0.5, -math.inf, 2.0, -math.inf]]),),
            ("masked", "defaults", "non-square"),
        ),
    ]


def _softmax_naive(scores, dim=-1):
    exponentials = torch.exp(scores)
    return exponentials / exponentials.sum(dim=dim, keepdim=True)


def _softmax_global_max(scores, dim=-1):
    exponentials = torch.exp(scores - scores.max())
    return exponentials / exponentials.sum(dim=dim, keepdim=True)


def _softmax_max_over_last_axis(scores, dim=-1):
    exponentials = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return exponentials / exponentials.sum(dim=dim, keepdim=True)


def _softmax_dim_ignored(scores, dim=-1):
    exponentials = torch.exp(scores - scores.amax(dim=-1, keepdim=True))
    return exponentials / exponentials.sum(dim=-1, keepdim=True)


def _softmax_mean_subtracted(scores, dim=-1):
    exponentials = torch.exp(scores - scores.mean(dim=dim, keepdim=True))
    return exponentials / exponentials.sum(dim=dim, keepdim=True)


def _softmax_divided_by_max(scores, dim=-1):
    exponentials = torch.exp(scores / scores.amax(dim=dim, keepdim=True))
    return exponentials / exponentials.sum(dim=dim, keepdim=True)


def _softmax_log(scores, dim=-1):
    shifted = scores - scores.amax(dim=dim, keepdim=True)
    return shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))


def _softmax_in_float32(scores, dim=-1):
    scores = scores.float()
    exponentials = torch.exp(scores - scores.amax(dim=dim, keepdim=True))
    return exponentials / exponentials.sum(dim=dim, keepdim=True)


STABLE_SOFTMAX = Exercise(
    name="stable_softmax",
    reference=stable_softmax,
    prompt="your function receives `scores`, a float tensor of any shape, and an axis `dim` (default -1); it "
    "returns the softmax along `dim`, exp(s) / sum exp(s), the same shape and dtype as `scores`, without "
    "overflowing or dividing 0 by 0 for scores as large as 1000 (or 30 in float16). Do not use `torch.softmax`.",
    start="find each slice's largest score along `dim` first, and keep its axis so that it broadcasts.",
    make_cases=_softmax_cases,
    notebook="02",
    atol=1e-6,
    rtol=1e-5,
    mistakes=(
        Mistake(
            "exp of the raw scores",
            "exp(1000) is inf in float32 (and exp(12) in float16), and inf / inf is NaN: subtract each slice's "
            "maximum first; the factor exp(-max) cancels between the top and the bottom of the fraction.",
            _softmax_naive,
        ),
        Mistake(
            "one maximum for the whole tensor",
            "subtract the maximum of each slice along `dim` (`scores.amax(dim=dim, keepdim=True)`): a single "
            "global maximum leaves a row far below it with exp(-2000) = 0 everywhere, and 0 / 0.",
            _softmax_global_max,
        ),
        Mistake(
            "the maximum taken over the last axis whatever `dim` is",
            "take the maximum along the same `dim` as the sum.",
            _softmax_max_over_last_axis,
        ),
        Mistake(
            "`dim` ignored",
            "the softmax runs along `dim`, which is not always the last axis: use it for the maximum and the sum.",
            _softmax_dim_ignored,
        ),
        Mistake(
            "the mean subtracted instead of the maximum",
            "with the mean, the largest score can still sit hundreds above the shift and overflow; only the "
            "maximum makes every exponent <= 0.",
            _softmax_mean_subtracted,
        ),
        Mistake(
            "the scores divided by their maximum",
            "shifting (subtracting) leaves softmax unchanged; dividing changes it. Subtract the maximum.",
            _softmax_divided_by_max,
        ),
        Mistake(
            "the log-softmax",
            "return the probabilities themselves, exp(shifted) / sum, not their logarithm.",
            _softmax_log,
        ),
        Mistake(
            "the softmax computed in float32 whatever the input",
            "return the input's dtype: float16 scores expect float16 weights.",
            _softmax_in_float32,
        ),
    ),
)
