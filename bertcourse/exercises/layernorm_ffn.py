"""Exercises of notebook 06: ``layer_norm``, ``feed_forward``, ``post_ln_layer`` and ``pre_ln_layer``.

The cases tell close variants apart: a large eps shows where eps goes, and an identity feed-forward
on -4 ... 4 shows the activation itself, exact GELU against ReLU and GELU's tanh approximation. The
encoder layers get their sub-layers as functions (the package's multi-head attention and
feed-forward block with random weights bound), so every mistake is one of arrangement: where the
residual is added, what is normalised, which LayerNorm is which.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from ..encoder import post_ln_layer, pre_ln_layer
from ..feedforward import feed_forward, gelu
from ..layernorm import layer_norm
from ..masks import padding_mask
from ..multihead import multi_head_attention
from .random_inputs import _ln_params, _randn, _weights
from .records import Case, Exercise, Knob, Mistake


def _layer_norm_cases(g):
    return [
        Case(
            "one sentence of 5 tokens, d 8, eps 1e-12",
            (_randn(g, 5, 8, scale=3.0) + 2.0, *_ln_params(g, 8), 1e-12),
            ("non-square",),
        ),
        Case(
            "batch of 2, odd width d 7, eps 1e-5",
            (_randn(g, 2, 4, 7, scale=3.0) - 1.0, *_ln_params(g, 7), 1e-5),
            ("batched", "non-square"),
        ),
        Case(
            "a large eps = 0.5, so where eps goes matters",
            (_randn(g, 3, 6), *_ln_params(g, 6), 0.5),
            ("non-square",),
        ),
        Case(
            "eps left out, so it is BERT's 1e-12: batch of 2, 3 tokens, d 5, tiny values (about 0.003)",
            (_randn(g, 2, 3, 5, scale=0.003), *_ln_params(g, 5)),
            ("defaults", "batched", "non-square"),
        ),
    ]


def _ln_over_batch(x, weight, bias, eps=1e-12):
    mean = x.mean(dim=0, keepdim=True)
    variance = x.var(dim=0, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(variance + eps) * weight + bias


def _ln_unbiased_variance(x, weight, bias, eps=1e-12):
    mean = x.mean(dim=-1, keepdim=True)
    variance = x.var(dim=-1, keepdim=True)  # unbiased: divides by d - 1
    return (x - mean) / torch.sqrt(variance + eps) * weight + bias


def _ln_eps_outside_sqrt(x, weight, bias, eps=1e-12):
    mean = x.mean(dim=-1, keepdim=True)
    variance = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / (torch.sqrt(variance) + eps) * weight + bias


def _ln_eps_ignored(x, weight, bias, eps=1e-12):
    mean = x.mean(dim=-1, keepdim=True)
    variance = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(variance) * weight + bias


def _ln_annotated_transformer(x, weight, bias, eps=1e-12):
    mean = x.mean(dim=-1, keepdim=True)
    std = x.std(dim=-1, keepdim=True)  # unbiased, and eps added to the std
    return weight * (x - mean) / (std + eps) + bias


def _ln_gamma_beta_swapped(x, weight, bias, eps=1e-12):
    mean = x.mean(dim=-1, keepdim=True)
    variance = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(variance + eps) * bias + weight


def _ln_over_everything(x, weight, bias, eps=1e-12):
    mean = x.mean()
    variance = x.var(unbiased=False)
    return (x - mean) / torch.sqrt(variance + eps) * weight + bias


def _ln_no_gamma_beta(x, weight, bias, eps=1e-12):
    mean = x.mean(dim=-1, keepdim=True)
    variance = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) / torch.sqrt(variance + eps)


def _layer_norm_variant(settings, x, weight, bias, eps=1e-12):
    """LayerNorm with each of its parts chosen by ``settings`` (see the knobs below)."""
    dims = {"features": (-1,), "tokens": (-2,), "everything": tuple(range(x.dim()))}[settings["axis"]]
    mean = x.mean(dim=dims, keepdim=True) if settings["centre"] else 0.0
    variance = x.var(dim=dims, keepdim=True, unbiased=settings["unbiased"])
    spread = {
        "sqrt(var + eps)": lambda: torch.sqrt(variance + eps),
        "std + eps": lambda: torch.sqrt(variance) + eps,
        "var + eps": lambda: variance + eps,
        "std": lambda: torch.sqrt(variance),
    }[settings["spread"]]()
    normalised = (x - mean) / spread
    return {
        "gamma x + beta": lambda: normalised * weight + bias,
        "none": lambda: normalised,
        "swapped": lambda: normalised * bias + weight,
        "(x + beta) gamma": lambda: (normalised + bias) * weight,
    }[settings["affine"]]()


_LAYER_NORM_KNOBS = (
    Knob(
        "axis",
        (
            ("features", "", ""),
            ("tokens", "normalising over the tokens", "normalise each vector over its own features, `dim=-1`."),
            ("everything", "normalising over every entry", "normalise each vector on its own: `dim=-1`, not all axes."),
        ),
    ),
    Knob("centre", ((True, "", ""), (False, "the mean not subtracted", "subtract each vector's mean first."))),
    Knob(
        "spread",
        (
            ("sqrt(var + eps)", "", ""),
            ("std + eps", "eps added to the standard deviation", "divide by `torch.sqrt(variance + eps)`."),
            ("var + eps", "a division by the variance", "divide by the square root of the variance (plus eps)."),
            ("std", "eps ignored", "add `eps` to the variance under the square root."),
        ),
    ),
    Knob("unbiased", ((False, "", ""), (True, "the unbiased variance", "divide by d, not d - 1: `unbiased=False`."))),
    Knob(
        "affine",
        (
            ("gamma x + beta", "", ""),
            ("none", "gamma and beta left out", "scale and shift at the end: `normalised * weight + bias`."),
            ("swapped", "gamma and beta swapped", "`weight` scales and `bias` shifts."),
            ("(x + beta) gamma", "beta added before gamma scales", "scale first, then shift: `* weight + bias`."),
        ),
    ),
)


LAYER_NORM = Exercise(
    name="layer_norm",
    reference=layer_norm,
    prompt="your function receives `x` (..., d), `weight` (gamma) and `bias` (beta) of shape (d,) and a float "
    "`eps`; it returns (..., d): each vector normalised over its own d features to mean 0 and variance 1 "
    "(biased variance, eps inside the square root), times `weight`, plus `bias`.",
    start="each vector's mean over its own features, the last axis, first.",
    make_cases=_layer_norm_cases,
    knobs=_LAYER_NORM_KNOBS,
    variant=_layer_norm_variant,
    axes={"": ("token rows", "feature columns")},
    notebook="06",
    mistakes=(
        Mistake(
            "normalising over the batch",
            "LayerNorm normalises each token over its features, the last axis: `dim=-1`, not `dim=0`.",
            _ln_over_batch,
        ),
        Mistake(
            "the unbiased variance",
            "`x.var()` and `x.std()` divide by d - 1 by default; LayerNorm divides by d: "
            "`x.var(dim=-1, keepdim=True, unbiased=False)`.",
            _ln_unbiased_variance,
        ),
        Mistake(
            "eps outside the square root",
            "add eps to the variance, then take the root: `torch.sqrt(variance + eps)`.",
            _ln_eps_outside_sqrt,
        ),
        Mistake(
            "eps ignored",
            "add `eps` to the variance before the square root; it keeps the division safe.",
            _ln_eps_ignored,
        ),
        Mistake(
            "the Annotated Transformer's `(x - mean) / (std + eps)`",
            "that LayerNorm divides by the unbiased std plus eps; BERT's (and PyTorch's) divides by "
            "`torch.sqrt(variance + eps)`, with the biased variance (`unbiased=False`).",
            _ln_annotated_transformer,
        ),
        Mistake(
            "gamma and beta swapped",
            "`weight` (gamma) scales and `bias` (beta) shifts: `normalised * weight + bias`.",
            _ln_gamma_beta_swapped,
        ),
        Mistake(
            "normalising over every entry at once",
            "each token is normalised over its own features: `x.mean(dim=-1, keepdim=True)`, not `x.mean()`.",
            _ln_over_everything,
        ),
        Mistake(
            "forgetting gamma and beta",
            "after normalising, scale and shift: `normalised * weight + bias`.",
            _ln_no_gamma_beta,
        ),
    ),
)


def _ffn_cases(g):
    # GELU's tanh approximation is off by 5e-4 near 2.7: a grid over -4 ... 4 shows it
    grid = torch.linspace(-4.0, 4.0, 17, dtype=torch.float32)[None, :]  # (1, 17)
    identity = torch.eye(17, dtype=torch.float32)
    return [
        Case(
            "one sentence of 5 tokens, d_model 6, d_ff 24", (_randn(g, 5, 6), *_ffn_params(g, 6, 24)), ("non-square",)
        ),
        Case(
            "batch of 2, odd sizes d_model 5, d_ff 7",
            (_randn(g, 2, 3, 5), *_ffn_params(g, 5, 7)),
            ("batched", "non-square"),
        ),
        Case(
            "identity weights and zero biases: the activation itself on -4 ... 4",
            (
                grid,
                identity,
                torch.zeros(17, dtype=torch.float32),
                identity.clone(),
                torch.zeros(17, dtype=torch.float32),
            ),
            ("square",),
        ),
    ]


def _ffn_params(g, d_model, d_ff):
    return _weights(g, d_model, d_ff), _randn(g, d_ff), _weights(g, d_ff, d_model), _randn(g, d_model)


def _ffn_relu(x, w1, b1, w2, b2):
    return torch.relu(x @ w1 + b1) @ w2 + b2


def _ffn_tanh_gelu(x, w1, b1, w2, b2):
    return F.gelu(x @ w1 + b1, approximate="tanh") @ w2 + b2


def _ffn_no_biases(x, w1, b1, w2, b2):
    return gelu(x @ w1) @ w2


def _ffn_residual_inside(x, w1, b1, w2, b2):
    return x + gelu(x @ w1 + b1) @ w2 + b2


def _ffn_dropout_left_on(x, w1, b1, w2, b2):
    return F.dropout(gelu(x @ w1 + b1), p=0.1) @ w2 + b2  # F.dropout drops unless training=False


def _ffn_weights_transposed(x, w1, b1, w2, b2):
    return gelu(x @ w2.T + b1) @ w1.T + b2


def _ffn_gelu_after_output(x, w1, b1, w2, b2):
    return gelu(gelu(x @ w1 + b1) @ w2 + b2)


def _ffn_variant(settings, x, w1, b1, w2, b2):
    """The feed-forward block with each of its parts chosen by ``settings``."""
    activation = {
        "gelu": gelu,
        "relu": torch.relu,
        "tanh gelu": lambda h: F.gelu(h, approximate="tanh"),
        "sigmoid": torch.sigmoid,
        "none": lambda h: h,
    }[settings["activation"]]
    first = x @ w1 + (b1 if settings["b1"] else 0.0)
    output = activation(first) @ w2 + (b2 if settings["b2"] else 0.0)
    return {
        "none": lambda: output,
        "residual": lambda: x + output,
        "layer norm": lambda: F.layer_norm(output, output.shape[-1:]),
        "activation": lambda: activation(output),
    }[settings["after"]]()


_FFN_KNOBS = (
    Knob(
        "activation",
        (
            ("gelu", "", ""),
            ("relu", "ReLU instead of GELU", "BERT uses the exact GELU, `F.gelu`."),
            ("tanh gelu", "GELU's tanh approximation", "use the exact (erf) GELU, without `approximate='tanh'`."),
            ("sigmoid", "a sigmoid instead of GELU", "the activation is GELU, x·Φ(x), not a sigmoid."),
            ("none", "no activation", "put GELU between the two linear maps."),
        ),
    ),
    Knob("b1", ((True, "", ""), (False, "the first bias left out", "add `b1` after `x @ w1`."))),
    Knob("b2", ((True, "", ""), (False, "the second bias left out", "add `b2` after `@ w2`."))),
    Knob(
        "after",
        (
            ("none", "", ""),
            ("residual", "a residual added inside the block", "the block ends with `@ w2 + b2`; the layer adds x."),
            ("layer norm", "a LayerNorm at the end", "the LayerNorm belongs to the encoder layer, not to the block."),
            ("activation", "an activation after the second layer", "the activation sits between the linear maps only."),
        ),
    ),
)


FEED_FORWARD = Exercise(
    name="feed_forward",
    reference=feed_forward,
    prompt="your function receives `x` (..., d_model), `w1` (d_model, d_ff), `b1` (d_ff,), `w2` "
    "(d_ff, d_model), `b2` (d_model,); it returns `GELU(x @ w1 + b1) @ w2 + b2`, shape (..., d_model), "
    "with the exact (erf) GELU.",
    start="the first linear map with its bias, then the activation BERT uses.",
    make_cases=_ffn_cases,
    knobs=_FFN_KNOBS,
    variant=_ffn_variant,
    axes={"": ("token rows", "feature columns")},
    notebook="06",
    mistakes=(
        Mistake(
            "ReLU instead of GELU",
            "BERT uses GELU, `torch.nn.functional.gelu`, which is smooth and lets small negatives through.",
            _ffn_relu,
        ),
        Mistake(
            "the tanh approximation of GELU",
            "this course matches Hugging Face's BERT, whose GELU is the exact one, x·Φ(x) with erf: "
            "`F.gelu(h)`, without `approximate='tanh'`.",
            _ffn_tanh_gelu,
        ),
        Mistake(
            "missing biases",
            "both linear maps have a bias: `x @ w1 + b1` and `hidden @ w2 + b2`.",
            _ffn_no_biases,
        ),
        Mistake(
            "GELU after the second layer too",
            "the activation sits between the two linear maps only; the block ends with `@ w2 + b2`.",
            _ffn_gelu_after_output,
        ),
        Mistake(
            "the residual added inside the block",
            "the block is only `GELU(x @ w1 + b1) @ w2 + b2`; the encoder layer adds `x` back around it, "
            "with the LayerNorm.",
            _ffn_residual_inside,
        ),
        Mistake(
            "dropout left on",
            "`F.dropout` drops entries unless `training=False`; the block asked for here has no dropout "
            "(in a model, `model.eval()` turns it off).",
            _ffn_dropout_left_on,
        ),
        Mistake(
            "w1 and w2 used as each other's transposes",
            "`w1` is (d_model, d_ff) and goes first, `x @ w1`; `w2` is (d_ff, d_model) and comes second.",
            _ffn_weights_transposed,
        ),
    ),
)


# --- one encoder layer from its pieces, Post-LN and Pre-LN -------------------------------------


def _layer_cases(g):
    return [
        Case(
            "batch of 2, 5 tokens, d_model 8, 2 heads, eps 1e-12", _layer_args(g, 2, 5, 8, 2, eps=1e-12), ("batched",)
        ),
        Case(
            "one sentence of 4 tokens, d_model 6, 3 heads, the attention masks padding (length 3), eps 1e-12",
            _layer_args(g, 1, 4, 6, 3, eps=1e-12, lengths=[3]),
            ("masked",),
        ),
        Case(
            "a large eps = 0.5, so where each LayerNorm sits shows", _layer_args(g, 2, 3, 4, 2, eps=0.5), ("batched",)
        ),
        Case(
            "eps left out, so it is BERT's 1e-12: tiny inputs (about 0.003)",
            _layer_args(g, 2, 3, 4, 1, eps=None, scale=0.003),
            ("batched", "defaults"),
        ),
    ]


def _layer_args(g, batch, seq, d_model, heads, eps, lengths=None, scale=1.0):
    """x, attention, feed_forward, ln1 gamma and beta, ln2 gamma and beta (and eps, unless it is left out)."""
    mask = None if lengths is None else padding_mask(torch.tensor(lengths), seq)[:, None, None, :]
    w_q, w_k, w_v, w_o = (_weights(g, d_model, d_model) * scale for _ in range(4))
    attention = functools.partial(multi_head_attention, w_q=w_q, w_k=w_k, w_v=w_v, w_o=w_o, num_heads=heads, mask=mask)
    w1, w2 = _weights(g, d_model, 2 * d_model) * scale, _weights(g, 2 * d_model, d_model) * scale
    ffn = functools.partial(
        feed_forward, w1=w1, b1=_randn(g, 2 * d_model, scale=scale), w2=w2, b2=_randn(g, d_model, scale=scale)
    )
    args = (
        _randn(g, batch, seq, d_model, scale=scale),
        attention,
        ffn,
        *_ln_params(g, d_model),
        *_ln_params(g, d_model),
    )
    return args if eps is None else (*args, eps)


def _ln(x, weight, bias, eps):
    return layer_norm(x, weight, bias, eps)


def _post_as_pre(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = x + attention(_ln(x, ln1_weight, ln1_bias, eps))
    return h + feed_forward(_ln(h, ln2_weight, ln2_bias, eps))


def _post_no_residuals(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = _ln(attention(x), ln1_weight, ln1_bias, eps)
    return _ln(feed_forward(h), ln2_weight, ln2_bias, eps)


def _post_second_residual_missing(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = _ln(x + attention(x), ln1_weight, ln1_bias, eps)
    return _ln(feed_forward(h), ln2_weight, ln2_bias, eps)


def _post_norm_before_adding(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = x + _ln(attention(x), ln1_weight, ln1_bias, eps)
    return h + _ln(feed_forward(h), ln2_weight, ln2_bias, eps)


def _post_feed_forward_reads_x(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = _ln(x + attention(x), ln1_weight, ln1_bias, eps)
    return _ln(h + feed_forward(x), ln2_weight, ln2_bias, eps)


def _post_first_norm_twice(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = _ln(x + attention(x), ln1_weight, ln1_bias, eps)
    return _ln(h + feed_forward(h), ln1_weight, ln1_bias, eps)


def _post_norms_swapped(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = _ln(x + attention(x), ln2_weight, ln2_bias, eps)
    return _ln(h + feed_forward(h), ln1_weight, ln1_bias, eps)


def _post_last_norm_missing(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = _ln(x + attention(x), ln1_weight, ln1_bias, eps)
    return h + feed_forward(h)


def _post_default_eps(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = F.layer_norm(x + attention(x), x.shape[-1:], ln1_weight, ln1_bias)  # PyTorch's default eps, 1e-5
    return F.layer_norm(h + feed_forward(h), x.shape[-1:], ln2_weight, ln2_bias)


def _layer_variant(settings, x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    """An encoder layer from its pieces with its arrangement chosen by ``settings``."""
    eps = {"given": eps, "default": 1e-5, "ignored": 1e-12}[settings["eps"]]
    norms = {
        "1, 2": ((ln1_weight, ln1_bias), (ln2_weight, ln2_bias)),
        "2, 1": ((ln2_weight, ln2_bias), (ln1_weight, ln1_bias)),
        "1, 1": ((ln1_weight, ln1_bias), (ln1_weight, ln1_bias)),
    }[settings["norms"]]
    first, second = (attention, feed_forward) if settings["order"] == "attention first" else (feed_forward, attention)
    keep_first, keep_second = {"both": (1, 1), "none": (0, 0), "first": (1, 0), "second": (0, 1)}[settings["residuals"]]
    if settings["layout"] == "parallel":
        return _ln(x + first(x) + second(x), *norms[1], eps)
    if settings["layout"] == "post":
        h = _ln(keep_first * x + first(x), *norms[0], eps)
        source = h if settings["second reads"] == "h" else x
        out = keep_second * h + second(source)
        return _ln(out, *norms[1], eps) if settings["last norm"] else out
    h = keep_first * x + first(_ln(x, *norms[0], eps))
    source = h if settings["second reads"] == "h" else x
    out = keep_second * h + second(_ln(source, *norms[1], eps))
    if settings["last norm"] == "plain":
        return F.layer_norm(out, out.shape[-1:], eps=eps)
    return _ln(out, *norms[1], eps) if settings["last norm"] else out


def _layer_knobs(layout: str) -> tuple[Knob, ...]:
    other = "pre" if layout == "post" else "post"
    layouts = {
        "post": ("the Post-LN layout", "Pre-LN normalises each sub-layer's input and never the residual stream."),
        "pre": ("the Pre-LN layout", "BERT is Post-LN: add first, then normalise the sum, `LN1(x + attention(x))`."),
    }
    last_norm = (True, "", "") if layout == "post" else (False, "", "")
    wrong_last_norm = (
        ((False, "the last LayerNorm missing", "the layer ends with `LN2(h + feed_forward(h))`."),)
        if layout == "post"
        else (
            (True, "the output normalised too", "a Pre-LN layer ends with the residual addition."),
            ("plain", "a LayerNorm without parameters at the end", "a Pre-LN layer ends with the residual addition."),
        )
    )
    parallel = (
        "parallel",
        "the two sub-layers side by side (GPT-J's parallel layout)",
        "the sub-layers run one after the other: the feed-forward block reads the attention's result.",
    )
    return (
        Knob("layout", ((layout, "", ""), (other, *layouts[other]), parallel)),
        Knob(
            "residuals",
            (
                ("both", "", ""),
                ("none", "no residual connections", "each sub-layer's output is added to its input."),
                ("first", "the second residual missing", "the feed-forward block has its residual too."),
                ("second", "the first residual missing", "the attention has its residual too."),
            ),
        ),
        Knob(
            "norms",
            (
                ("1, 2", "", ""),
                (
                    "2, 1",
                    "the two LayerNorms swapped",
                    "`ln1_*` goes with the attention, `ln2_*` with the feed-forward.",
                ),
                ("1, 1", "the first LayerNorm used twice", "each sub-layer has its own LayerNorm."),
            ),
        ),
        Knob(
            "second reads",
            (
                ("h", "", ""),
                ("x", "the feed-forward block fed x", "the feed-forward block reads the attention's result."),
            ),
        ),
        Knob(
            "order",
            (
                ("attention first", "", ""),
                ("feed-forward first", "the feed-forward block before the attention", "the attention comes first."),
            ),
        ),
        Knob("last norm", (last_norm, *wrong_last_norm)),
        Knob(
            "eps",
            (
                ("given", "", ""),
                ("default", "PyTorch's default eps", "pass `eps` on to every LayerNorm (1e-5 is PyTorch's default)."),
                ("ignored", "`eps` not passed on", "pass the `eps` you are given on to every LayerNorm."),
            ),
        ),
    )


POST_LN_LAYER = Exercise(
    name="post_ln_layer",
    reference=post_ln_layer,
    prompt="your function receives `x` (batch, seq, d_model), two functions `attention` and `feed_forward` "
    "(each maps (batch, seq, d_model) to the same shape), the gamma and beta of two LayerNorms, `ln1_weight`, "
    "`ln1_bias` (after the attention) and `ln2_weight`, `ln2_bias` (after the feed-forward block), each "
    "(d_model,), and `eps` (default 1e-12); it returns BERT's Post-LN encoder layer without dropout, "
    "(batch, seq, d_model).",
    start="the attention sub-layer alone first: what its output is added to, and where BERT puts the LayerNorm.",
    make_cases=_layer_cases,
    knobs=_layer_knobs("post"),
    variant=_layer_variant,
    axes={"": ("batch", "token rows", "feature columns")},
    notebook="06",
    mistakes=(
        Mistake(
            "the Pre-LN layout",
            "BERT is Post-LN: add first, then normalise the sum, `LN1(x + attention(x))`; Pre-LN, "
            "`x + attention(LN1(x))`, is GPT-2's layout and gives wrong numbers with BERT's weights.",
            _post_as_pre,
        ),
        Mistake(
            "no residual connections",
            "each sub-layer's input is added back to its output before the LayerNorm: `LN1(x + attention(x))`.",
            _post_no_residuals,
        ),
        Mistake(
            "the second residual missing",
            "the feed-forward block has its residual too: `LN2(h + feed_forward(h))`.",
            _post_second_residual_missing,
        ),
        Mistake(
            "the sub-layer's output normalised before the residual is added",
            "normalise the sum, not the sub-layer alone: `LN1(x + attention(x))`, not `x + LN1(attention(x))`.",
            _post_norm_before_adding,
        ),
        Mistake(
            "the feed-forward block fed x instead of the attention's result",
            "the two sub-layers run one after the other: the feed-forward block reads "
            "h = LN1(x + attention(x)) and adds to h.",
            _post_feed_forward_reads_x,
        ),
        Mistake(
            "the first LayerNorm used twice",
            "each sub-layer has its own LayerNorm: `ln1_*` after the attention, `ln2_*` after the feed-forward block.",
            _post_first_norm_twice,
        ),
        Mistake(
            "the two LayerNorms swapped",
            "`ln1_*` belongs after the attention, `ln2_*` after the feed-forward block.",
            _post_norms_swapped,
        ),
        Mistake(
            "the last LayerNorm missing",
            "the layer ends with a LayerNorm too: `LN2(h + feed_forward(h))`.",
            _post_last_norm_missing,
        ),
        Mistake(
            "PyTorch's default LayerNorm eps",
            "pass `eps` on to both LayerNorms: BERT's is 1e-12, `F.layer_norm`'s default 1e-5.",
            _post_default_eps,
        ),
    ),
)


def _pre_as_post(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = _ln(x + attention(x), ln1_weight, ln1_bias, eps)
    return _ln(h + feed_forward(h), ln2_weight, ln2_bias, eps)


def _pre_residual_from_the_normalised(
    x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12
):
    normalised = _ln(x, ln1_weight, ln1_bias, eps)
    h = normalised + attention(normalised)
    normalised = _ln(h, ln2_weight, ln2_bias, eps)
    return normalised + feed_forward(normalised)


def _pre_output_normalised(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = x + attention(_ln(x, ln1_weight, ln1_bias, eps))
    return _ln(h + feed_forward(h), ln2_weight, ln2_bias, eps)


def _pre_no_residuals(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = attention(_ln(x, ln1_weight, ln1_bias, eps))
    return feed_forward(_ln(h, ln2_weight, ln2_bias, eps))


def _pre_feed_forward_reads_x(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = x + attention(_ln(x, ln1_weight, ln1_bias, eps))
    return h + feed_forward(_ln(x, ln2_weight, ln2_bias, eps))


def _pre_first_norm_twice(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = x + attention(_ln(x, ln1_weight, ln1_bias, eps))
    return h + feed_forward(_ln(h, ln1_weight, ln1_bias, eps))


PRE_LN_LAYER = Exercise(
    name="pre_ln_layer",
    reference=pre_ln_layer,
    prompt="your function receives the same arguments as `post_ln_layer` (`x`, `attention`, `feed_forward`, "
    "`ln1_weight`, `ln1_bias`, `ln2_weight`, `ln2_bias`, `eps`=1e-12); it returns the Pre-LN layer of GPT-2 "
    "and many tutorials: each sub-layer reads a LayerNorm'ed copy of the residual stream and adds its "
    "output to the stream itself, (batch, seq, d_model).",
    start="the attention sub-layer alone first: which tensor it reads, and which one its output is added to.",
    make_cases=_layer_cases,
    knobs=_layer_knobs("pre"),
    variant=_layer_variant,
    axes={"": ("batch", "token rows", "feature columns")},
    notebook="06",
    mistakes=(
        Mistake(
            "the Post-LN layout",
            "that is BERT's layer; Pre-LN normalises the sub-layer's input, `x + attention(LN1(x))`, and never the "
            "residual stream.",
            _pre_as_post,
        ),
        Mistake(
            "the residual taken from the normalised copy",
            "add the sub-layer's output to x itself, `x + attention(LN1(x))`, not to LN1(x): the residual stream "
            "is never normalised in Pre-LN.",
            _pre_residual_from_the_normalised,
        ),
        Mistake(
            "the output normalised as well",
            "a Pre-LN layer ends with the residual addition; models put one final LayerNorm after the whole "
            "stack, not in each layer.",
            _pre_output_normalised,
        ),
        Mistake(
            "no residual connections",
            "each sub-layer adds its output to the residual stream: `x + attention(LN1(x))`.",
            _pre_no_residuals,
        ),
        Mistake(
            "the feed-forward block fed the layer's input",
            "the feed-forward block reads LN2 of h = x + attention(LN1(x)), the stream after the attention.",
            _pre_feed_forward_reads_x,
        ),
        Mistake(
            "the first LayerNorm used twice",
            "each sub-layer has its own LayerNorm: `ln1_*` before the attention, `ln2_*` before the "
            "feed-forward block.",
            _pre_first_norm_twice,
        ),
    ),
)
