"""Exercises of notebook 06: ``layer_norm``, ``feed_forward``, ``post_ln_layer``, ``pre_ln_layer``,
``parallel_layer`` and ``pre_ln_stack``.

Notebook 06 asks for its three build pieces, ``layer_norm``, ``feed_forward`` and ``post_ln_layer`` (each
handed to later cells by ``use``, gradients compared too), and the stretch ``parallel_layer`` (GPT-J's and
PaLM's layer: both sub-layers read one normalised copy). ``pre_ln_layer`` and ``pre_ln_stack`` (Pre-LN layers
and the final LayerNorm such a stack needs) stay checkable by name.

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

from ..encoder import parallel_layer, post_ln_layer, pre_ln_layer, pre_ln_stack
from ..feedforward import feed_forward, gelu
from ..layernorm import layer_norm
from ..masks import padding_mask
from ..multihead import multi_head_attention
from .diagnosis import equals_one_of
from .random_inputs import seeded_ln_params, seeded_randn, seeded_weight
from .records import Case, Exercise, Knob, Mistake


def _layer_norm_cases(g):
    return [
        Case(
            "one sentence of 5 tokens, d 8, eps 1e-12",
            (seeded_randn(g, 5, 8, scale=3.0) + 2.0, *seeded_ln_params(g, 8), 1e-12),
            ("non-square",),
        ),
        Case(
            "batch of 2, odd width d 7, eps 1e-5",
            (seeded_randn(g, 2, 4, 7, scale=3.0) - 1.0, *seeded_ln_params(g, 7), 1e-5),
            ("batched", "non-square"),
        ),
        Case(
            "a large eps = 0.5, so where eps goes matters",
            (seeded_randn(g, 3, 6), *seeded_ln_params(g, 6), 0.5),
            ("non-square",),
        ),
        Case(
            "eps left out, so it is BERT's 1e-12: batch of 2, 3 tokens, d 5, tiny values (about 0.003)",
            (seeded_randn(g, 2, 3, 5, scale=0.003), *seeded_ln_params(g, 5)),
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


def _layer_norm_explain(case, value, expected):
    """Another normalisation the learner's output is, or else what its rows are once bias and weight are undone."""
    x, weight, bias, *rest = case.args
    eps = rest[0] if rest else 1e-12
    centred = x - x.mean(dim=-1, keepdim=True)
    said = equals_one_of(
        value,
        expected,
        (
            (
                "x / sqrt(mean(x²) + eps) * weight + bias, RMSNorm: LayerNorm subtracts each row's mean first",
                lambda: x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight + bias,
            ),
            (
                "the centred x divided by its mean absolute deviation: divide by sqrt(variance + eps), the variance "
                "being the mean of the *squared* deviations",
                lambda: centred / (centred.abs().mean(-1, True) + eps) * weight + bias,
            ),
            (
                "the centred x divided by sqrt(mean |x - mean| + eps): the variance is the mean of the *squared* "
                "deviations",
                lambda: centred / torch.sqrt(centred.abs().mean(-1, True) + eps) * weight + bias,
            ),
            (
                "the LayerNorm of x * weight, plus bias: normalise first, then scale by weight",
                lambda: _ln(x * weight, None, None, eps) + bias,
            ),
            ("the normalised x times weight *minus* bias: add bias", lambda: _ln(x, weight, -bias, eps)),
            *(
                [
                    (
                        "the LayerNorm with PyTorch's eps 1e-5: `eps` is left out here, and its default is 1e-12",
                        lambda: _ln(x, weight, bias, 1e-5),
                    )
                ]
                if not rest
                else []
            ),
        ),
    )
    plain = isinstance(value, torch.Tensor) and value.layout == torch.strided and value.device.type == "cpu"
    if said or not plain or value.shape != expected.shape or not value.is_floating_point() or bool((weight == 0).any()):
        return said
    undone = (value.double() - bias) / weight  # what was normalised, if weight and bias came last
    mean, var = undone.mean(dim=-1), undone.var(dim=-1, unbiased=False)
    if float(mean.abs().max()) > 1e-3:
        return (
            f"Undoing bias and weight, your rows have means up to {float(mean.abs().max()):.3g}, not 0: LayerNorm "
            "subtracts each vector's own mean, over its last axis."
        )
    target = x.double().var(dim=-1, unbiased=False) / (x.double().var(dim=-1, unbiased=False) + eps)  # (...,)
    if not torch.allclose(var, target, atol=1e-3, rtol=1e-3):
        return (
            f"Undoing bias and weight, your rows have mean 0 but variances {float(var.min()):.3g} to "
            f"{float(var.max()):.3g}, where LayerNorm's are var / (var + eps), {float(target.min()):.3g} to "
            f"{float(target.max()):.3g} here (eps = {eps:g}): divide by sqrt(biased variance + eps)."
        )
    return None


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
    explain=_layer_norm_explain,
    notebook="06",
    answered_by=(F.layer_norm,),  # PyTorch's LayerNorm is the whole answer (nn.LayerNorm calls it too)
    gradients=("x", "weight", "bias"),
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
            "one sentence of 5 tokens, d_model 6, d_ff 24",
            (seeded_randn(g, 5, 6), *_ffn_params(g, 6, 24)),
            ("non-square",),
        ),
        Case(
            "batch of 2, odd sizes d_model 5, d_ff 7",
            (seeded_randn(g, 2, 3, 5), *_ffn_params(g, 5, 7)),
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
        Case(
            "random square weights, d_model = d_ff = 6: a square case that is no identity",
            (seeded_randn(g, 4, 6), *_ffn_params(g, 6, 6)),
            ("square",),
        ),
    ]


def _ffn_params(g, d_model, d_ff):
    return (
        seeded_weight(g, d_model, d_ff),
        seeded_randn(g, d_ff),
        seeded_weight(g, d_ff, d_model),
        seeded_randn(g, d_model),
    )


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
        "silu": F.silu,
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
            ("silu", "SiLU (x·sigmoid(x)) instead of GELU", "BERT's activation is GELU, x·Φ(x) with Φ the normal CDF."),
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


def _ffn_explain(case, value, expected):
    """Which other arrangement of the block the learner's output is."""
    x, w1, b1, w2, b2 = case.args
    return equals_one_of(
        value,
        expected,
        (
            (
                "GELU applied to the input before the first linear map: it goes between the two maps, "
                "`GELU(x @ w1 + b1) @ w2 + b2`",
                lambda: (gelu(x) @ w1 + b1) @ w2 + b2,
            ),
            (
                "b1 added after the activation: it belongs inside, `GELU(x @ w1 + b1)`",
                lambda: (gelu(x @ w1) + b1) @ w2 + b2,
            ),
            (
                "the activation after the second map instead of between the two: `GELU(x @ w1 + b1) @ w2 + b2`",
                lambda: gelu((x @ w1 + b1) @ w2 + b2),
            ),
            ("the block with b2 added twice: add it once, after `@ w2`", lambda: gelu(x @ w1 + b1) @ w2 + 2 * b2),
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
    explain=_ffn_explain,
    notebook="06",
    gradients=("x", "w1", "b1", "w2", "b2"),
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
            "the same sizes, the attention masks padding (lengths 5 and 3)",
            _layer_args(g, 2, 5, 8, 2, eps=1e-12, lengths=[5, 3]),
            ("batched", "masked"),
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
    w_q, w_k, w_v, w_o = (seeded_weight(g, d_model, d_model) * scale for _ in range(4))
    attention = functools.partial(multi_head_attention, w_q=w_q, w_k=w_k, w_v=w_v, w_o=w_o, num_heads=heads, mask=mask)
    w1, w2 = seeded_weight(g, d_model, 2 * d_model) * scale, seeded_weight(g, 2 * d_model, d_model) * scale
    ffn = functools.partial(
        feed_forward,
        w1=w1,
        b1=seeded_randn(g, 2 * d_model, scale=scale),
        w2=w2,
        b2=seeded_randn(g, d_model, scale=scale),
    )
    args = (
        seeded_randn(g, batch, seq, d_model, scale=scale),
        attention,
        ffn,
        *seeded_ln_params(g, d_model),
        *seeded_ln_params(g, d_model),
    )
    return args if eps is None else (*args, eps)


def _ln(x, weight, bias, eps):
    if weight is None:  # a LayerNorm without its gamma and beta, as a slip writes it
        return F.layer_norm(x, x.shape[-1:], eps=eps)
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
    given = eps
    eps = {"given": given, "default": 1e-5, "ignored": 1e-12, "first default": given, "second default": given}[
        settings["eps"]
    ]
    eps1 = 1e-5 if settings["eps"] == "first default" else eps
    eps2 = 1e-5 if settings["eps"] == "second default" else eps
    norms = {
        "1, 2": ((ln1_weight, ln1_bias), (ln2_weight, ln2_bias)),
        "2, 1": ((ln2_weight, ln2_bias), (ln1_weight, ln1_bias)),
        "1, 1": ((ln1_weight, ln1_bias), (ln1_weight, ln1_bias)),
    }[settings["norms"]]
    if not settings["affine"]:
        norms = ((None, None), (None, None))
    first, second = (attention, feed_forward) if settings["order"] == "attention first" else (feed_forward, attention)
    keep_first, keep_second = {"both": (1, 1), "none": (0, 0), "first": (1, 0), "second": (0, 1)}[settings["residuals"]]
    if settings["layout"] == "parallel":
        return _ln(x + first(x) + second(x), *norms[1], eps)
    if settings["layout"] == "post":
        reads = _ln(x, *norms[0], eps1) if settings["sub-layers read"] == "normalised" else x
        h = _ln(keep_first * x + first(reads), *norms[0], eps1)
        source = h if settings["second reads"] == "h" else x
        added = h if settings["second residual"] == "h" else x
        out = keep_second * added + second(source)
        return _ln(out, *norms[1], eps2) if settings["last norm"] else out
    first_in = x if settings["sub-layers read"] == "no first norm" else _ln(x, *norms[0], eps1)
    stream = settings.get("stream", "stream")
    h = keep_first * (first_in if stream in ("normalised", "first normalised") else x) + first(first_in)
    source = h if settings["second reads"] == "h" else x
    added = h if settings["second residual"] == "h" else x
    second_in = source if settings["sub-layers read"] == "no second norm" else _ln(source, *norms[1], eps2)
    added = second_in if stream in ("normalised", "second normalised") else added
    out = keep_second * added + second(second_in)
    if settings["last norm"] == "plain":
        return F.layer_norm(out, out.shape[-1:], eps=eps2)
    return _ln(out, *norms[1], eps2) if settings["last norm"] else out


def _named_input(value, known) -> str:
    """What a sub-layer was called on: the name of the first of ``known`` (name, tensor) pairs it equals."""
    if not isinstance(value, torch.Tensor):
        return "something that is not a tensor"
    for text, tensor in known:
        if value.shape == tensor.shape and torch.allclose(value.double(), tensor.double(), atol=1e-5, rtol=1e-4):
            return text
    return "something else"


def _layer_calls(layout: str):
    """``explain_calls`` for an encoder layer built from its pieces: how often each sub-layer was called, on what."""

    def explain(case, calls):
        if layout == "parallel":
            x, attention, feed_forward, weight, bias, *rest = case.args
            eps = rest[0] if rest else 1e-12
            n = _ln(x, weight, bias, eps)
            known = [("LN(x)", n), ("x", x)]
            wanted = {"attention": "LN(x)", "feed_forward": "LN(x)"}
        else:
            x, attention, feed_forward, w1, b1, w2, b2, *rest = case.args
            eps = rest[0] if rest else 1e-12
            n1 = _ln(x, w1, b1, eps)
            if layout == "post":
                h = _ln(x + attention(x), w1, b1, eps)
                known = [("x", x), ("LN1(x)", n1), ("h = LN1(x + attention(x))", h), ("LN2(h)", _ln(h, w2, b2, eps))]
                known += [("x + attention(x), before LN1", x + attention(x)), ("attention(x)", attention(x))]
                wanted = {"attention": "x", "feed_forward": "h = LN1(x + attention(x))"}
            else:
                h = x + attention(n1)
                known = [("x", x), ("LN1(x)", n1), ("h = x + attention(LN1(x))", h), ("LN2(h)", _ln(h, w2, b2, eps))]
                known += [("LN2(x)", _ln(x, w2, b2, eps)), ("LN1(h)", _ln(h, w1, b1, eps))]
                known.append(("attention(LN1(x))", attention(n1)))
                wanted = {"attention": "LN1(x)", "feed_forward": "LN2(h), with h = x + attention(LN1(x))"}

        said = {
            name: [_named_input(value, known) for value in calls.get(name, [])]
            for name in ("attention", "feed_forward")
        }
        if all(said[name] == [wanted[name].split(",")[0]] for name in said):
            return (
                "Inside your layer each sub-layer was called once, on the right input (attention on "
                f"{wanted['attention']}, feed_forward on {wanted['feed_forward']}): what differs is what is added "
                "to their outputs, or what is normalised after them."
            )
        parts = []
        for name, inputs in said.items():
            times = {0: "never called", 1: "called once"}.get(len(inputs), f"called {len(inputs)} times")
            parts.append(f"`{name}` {times}" + (f", on {', then '.join(inputs)}" if inputs else ""))
        return (
            f"Inside your layer: {'; '.join(parts)}. The right layer calls each once: attention on "
            f"{wanted['attention']}, feed_forward on {wanted['feed_forward']}."
        )

    return explain


def _stack_calls(case, calls):
    """``explain_calls`` for a Pre-LN stack: the first layer whose sub-layers were not called once on the right
    input, and what they were fed; or that every layer's were."""
    x, layers, final_weight, final_bias, *rest = case.args
    eps = rest[0] if rest else 1e-12
    stream = x
    for i, (attention, ffn, w1, b1, w2, b2) in enumerate(layers):
        n1 = _ln(stream, w1, b1, eps)
        h = stream + attention(n1)
        n2 = _ln(h, w2, b2, eps)
        known = [
            (f"LN1 of the stream entering layer {i}", n1),
            (f"the stream entering layer {i}, not normalised", stream),
            (f"LN2 of the stream after layer {i}'s attention", n2),
            (f"the stream after layer {i}'s attention, not normalised", h),
            ("LN1 of the stack's input x", _ln(x, w1, b1, eps)),
            ("the stack's input x", x),
        ]

        fed = {
            part: [_named_input(v, known) for v in calls.get(f"layers[{i}][{j}]", [])]
            for j, part in ((0, "attention"), (1, "feed_forward"))
        }
        wanted = {"attention": known[0][0], "feed_forward": known[2][0]}
        if any(fed[part] != [wanted[part]] for part in fed):
            parts = []
            for part, inputs in fed.items():
                times = {0: "never called", 1: "called once"}.get(len(inputs), f"called {len(inputs)} times")
                parts.append(f"its `{part}` {times}" + (f", on {', then '.join(inputs)}" if inputs else ""))
            return (
                f"Inside your stack, layer {i} (of {len(layers)}): {'; '.join(parts)}. Each layer's attention reads "
                "LN1 of the stream entering that layer, its feed_forward LN2 of the stream after its attention."
            )
        stream = h + ffn(n2)
    return (
        f"Inside your stack every layer's sub-layers were called once, on the right inputs, in order ({len(layers)} "
        "layers): what differs comes after the last layer (the final LayerNorm) or in what is added to the stream."
    )


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
    reads = (
        (
            ("x", "", ""),
            (
                "normalised",
                "the attention fed LN1(x)",
                "in Post-LN the attention reads x as it is; LN1 comes after the addition, `LN1(x + attention(x))`.",
            ),
        )
        if layout == "post"
        else (
            ("both norms", "", ""),
            ("no first norm", "the attention fed x without LN1", "the attention reads `LN1(x)`."),
            ("no second norm", "the feed-forward block fed h without LN2", "the feed-forward block reads `LN2(h)`."),
        )
    )
    parallel = (
        "parallel",
        "the two sub-layers side by side (GPT-J's parallel layout)",
        "the sub-layers run one after the other: the feed-forward block reads the attention's result.",
    )
    stream = (
        ()
        if layout == "post"
        else (
            Knob(
                "stream",
                (
                    ("stream", "", ""),
                    (
                        "normalised",
                        "the residual taken from the normalised copy",
                        "add each sub-layer's output to the stream itself, `x + attention(LN1(x))`: the residual "
                        "stream is never normalised in Pre-LN.",
                    ),
                    (
                        "first normalised",
                        "the attention's residual taken from LN1(x)",
                        "add the attention's output to x itself, `h = x + attention(LN1(x))`, not to LN1(x).",
                    ),
                    (
                        "second normalised",
                        "the feed-forward block's residual taken from LN2(h)",
                        "add the feed-forward output to h itself, `h + feed_forward(LN2(h))`, not to LN2(h).",
                    ),
                ),
            ),
        )
    )
    return (
        *stream,
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
            "second residual",
            (
                ("h", "", ""),
                (
                    "x",
                    "the feed-forward block's residual taken from x",
                    "the feed-forward block's output is added to h, the stream after the attention, not to x.",
                ),
            ),
        ),
        Knob("sub-layers read", reads),
        Knob(
            "affine",
            (
                (True, "", ""),
                (
                    False,
                    "LayerNorms without their gamma and beta",
                    "apply each LayerNorm's gamma and beta: `bc.layer_norm(h, ln1_weight, ln1_bias, eps)`.",
                ),
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
                ("first default", "PyTorch's default eps in the first LayerNorm", "pass `eps` on to LN1 too."),
                ("second default", "PyTorch's default eps in the second LayerNorm", "pass `eps` on to LN2 too."),
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
    explain_calls=_layer_calls("post"),
    notebook="06",
    gradients=("x", "ln1_weight", "ln1_bias", "ln2_weight", "ln2_bias"),
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
    explain_calls=_layer_calls("pre"),
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


# --- GPT-J's parallel layer, and a Pre-LN stack with its final LayerNorm ------------------------


def _parallel_cases(g):
    def pieces(eps, lengths=None, scale=1.0):
        x, attention, ffn, ln_weight, ln_bias, *_ = _layer_args(g, 2, 5, 8, 2, eps=None, lengths=lengths, scale=scale)
        return (x, attention, ffn, ln_weight, ln_bias) + (() if eps is None else (eps,))

    return [
        Case("batch of 2, 5 tokens, d_model 8, 2 heads, eps 1e-12", pieces(1e-12), ("batched",)),
        Case(
            "the same sizes, the attention masks padding (lengths 5 and 3)",
            pieces(1e-12, [5, 3]),
            ("batched", "masked"),
        ),
        Case("the same sizes, a large eps = 0.5, so where the LayerNorm sits shows", pieces(0.5), ("batched",)),
        Case(
            "the same sizes, eps left out, so it is BERT's 1e-12: tiny inputs (about 0.003)",
            pieces(None, scale=0.003),
            ("batched", "defaults"),
        ),
    ]


def _parallel_variant(settings, x, attention, feed_forward, ln_weight, ln_bias, eps=1e-12):
    """A parallel layer with each part chosen by ``settings`` (the knobs below)."""
    eps = {"given": eps, "default": 1e-5, "ignored": 1e-12}[settings["eps"]]
    normalised = _ln(x, ln_weight, ln_bias, eps) if settings["affine"] else F.layer_norm(x, x.shape[-1:], eps=eps)
    attended = attention({"normalised": normalised, "x": x}[settings["attention reads"]])
    if settings["order"] == "sequential":
        ffn_out = feed_forward(_ln(x + attended, ln_weight, ln_bias, eps))
    else:
        ffn_out = feed_forward({"normalised": normalised, "x": x}[settings["ffn reads"]])
    stream = {"x": x, "normalised": normalised, "none": 0}[settings["residual"]]
    out = stream + attended + ffn_out
    return _ln(out, ln_weight, ln_bias, eps) if settings["output norm"] else out


_PARALLEL_KNOBS = (
    Knob(
        "attention reads",
        (
            ("normalised", "", ""),
            ("x", "the attention fed x itself", "the attention reads the normalised copy, `LN(x)`."),
        ),
    ),
    Knob(
        "ffn reads",
        (
            ("normalised", "", ""),
            ("x", "the feed-forward block fed x itself", "the feed-forward block reads the normalised copy, `LN(x)`."),
        ),
    ),
    Knob(
        "affine",
        (
            (True, "", ""),
            (
                False,
                "the LayerNorm without its gamma and beta",
                "apply `ln_weight` and `ln_bias` after normalising (`bc.layer_norm(x, ln_weight, ln_bias, eps)`).",
            ),
        ),
    ),
    Knob(
        "order",
        (
            ("side by side", "", ""),
            (
                "sequential",
                "the feed-forward block after the attention (the Pre-LN layer)",
                "in the parallel layer the feed-forward block reads the same `LN(x)` as the attention, not its result.",
            ),
        ),
    ),
    Knob(
        "residual",
        (
            ("x", "", ""),
            (
                "normalised",
                "the residual taken from the normalised copy",
                "the sub-layers' outputs are added to x itself, never normalised.",
            ),
            ("none", "no residual", "add both sub-layers' outputs to x."),
        ),
    ),
    Knob(
        "output norm",
        (
            (False, "", ""),
            (True, "the output normalised", "the layer ends with the addition: the stream itself stays unnormalised."),
        ),
    ),
    Knob(
        "eps",
        (
            ("given", "", ""),
            ("default", "PyTorch's default eps", "pass `eps` on to the LayerNorm (1e-5 is PyTorch's default)."),
            ("ignored", "`eps` not passed on", "pass the `eps` you are given on to the LayerNorm."),
        ),
    ),
)


def _parallel_as_pre_ln(x, attention, feed_forward, ln_weight, ln_bias, eps=1e-12):
    h = x + attention(_ln(x, ln_weight, ln_bias, eps))
    return h + feed_forward(_ln(h, ln_weight, ln_bias, eps))


def _parallel_post_ln(x, attention, feed_forward, ln_weight, ln_bias, eps=1e-12):
    return _ln(x + attention(x) + feed_forward(x), ln_weight, ln_bias, eps)


def _parallel_residual_from_normalised(x, attention, feed_forward, ln_weight, ln_bias, eps=1e-12):
    normalised = _ln(x, ln_weight, ln_bias, eps)
    return normalised + attention(normalised) + feed_forward(normalised)


def _parallel_default_eps(x, attention, feed_forward, ln_weight, ln_bias, eps=1e-12):
    normalised = F.layer_norm(x, x.shape[-1:], ln_weight, ln_bias)  # PyTorch's default eps, 1e-5
    return x + attention(normalised) + feed_forward(normalised)


PARALLEL_LAYER = Exercise(
    name="parallel_layer",
    reference=parallel_layer,
    prompt="your function receives `x` (batch, seq, d_model), two functions `attention` and `feed_forward` (each "
    "maps (batch, seq, d_model) to the same shape), the gamma and beta of ONE LayerNorm, `ln_weight` and "
    "`ln_bias` (d_model,), and `eps` (default 1e-12); it returns GPT-J's and PaLM's parallel layer, "
    "(batch, seq, d_model): both sub-layers read the same LayerNorm'ed copy of x, side by side, and both "
    "outputs are added to x itself.",
    start="normalise once; then ask what each sub-layer reads and what its output is added to.",
    make_cases=_parallel_cases,
    knobs=_PARALLEL_KNOBS,
    variant=_parallel_variant,
    axes={"": ("batch", "token rows", "feature columns")},
    explain_calls=_layer_calls("parallel"),
    notebook="06",
    mistakes=(
        Mistake(
            "the sub-layers one after the other (a Pre-LN layer with one LayerNorm)",
            "in the parallel layer the feed-forward block does not wait for the attention: both read `LN(x)`, "
            "and `x + attention(LN(x)) + feed_forward(LN(x))` is the whole layer.",
            _parallel_as_pre_ln,
        ),
        Mistake(
            "a Post-LN parallel layer, LN(x + attention(x) + feed_forward(x))",
            "this layer is Pre-LN: the sub-layers read the normalised copy and the sum is left unnormalised.",
            _parallel_post_ln,
        ),
        Mistake(
            "the residual taken from the normalised copy",
            "add the sub-layers' outputs to x itself, not to LN(x): the residual stream is never normalised.",
            _parallel_residual_from_normalised,
        ),
        Mistake(
            "PyTorch's default LayerNorm eps",
            "pass `eps` on to the LayerNorm: the default here is 1e-12, `F.layer_norm`'s 1e-5.",
            _parallel_default_eps,
        ),
    ),
)


def _stack_cases(g):
    def stack(num_layers, eps, lengths=None, scale=1.0):
        layers = []
        for _ in range(num_layers):
            x, *pieces = _layer_args(g, 2, 5, 8, 2, eps=None, lengths=lengths, scale=scale)
            layers.append(tuple(pieces))
        final = seeded_ln_params(g, 8)
        return (x, layers, *final) + (() if eps is None else (eps,))

    return [
        Case("2 layers, batch of 2, 5 tokens, d_model 8, 2 heads, eps 1e-12", stack(2, 1e-12), ("batched",)),
        Case("the same, 3 layers", stack(3, 1e-12), ("batched",)),
        Case("the same, 1 layer", stack(1, 1e-12), ("batched",)),
        Case("2 layers, the attention masks padding (lengths 5 and 3)", stack(2, 1e-12, [5, 3]), ("batched", "masked")),
        Case("2 layers, a large eps = 0.5, so where each LayerNorm sits shows", stack(2, 0.5), ("batched",)),
        Case(
            "2 layers, eps left out, so it is 1e-12: tiny inputs (about 0.003)",
            stack(2, None, scale=0.003),
            ("batched", "defaults"),
        ),
    ]


def _stack_variant(settings, x, layers, final_weight, final_bias, eps=1e-12):
    """A Pre-LN stack with each part chosen by ``settings`` (the knobs below)."""
    eps = {"given": eps, "default": 1e-5, "ignored": 1e-12}[settings["eps"]]
    chosen = {"all": layers, "first": layers[:1], "last": layers[-1:], "all but the last": layers[:-1]}[
        settings["layers"]
    ]
    stream = x
    for attend, feed, ln1_weight, ln1_bias, ln2_weight, ln2_bias in chosen:
        second = (ln1_weight, ln1_bias) if settings["norms"] == "1, 1" else (ln2_weight, ln2_bias)
        h = x if settings["reads"] == "x" else stream
        if settings["layer"] == "post":
            h = _ln(h + attend(h), ln1_weight, ln1_bias, eps)
            stream = _ln(h + feed(h), *second, eps)
        else:
            normalised = _ln(h, ln1_weight, ln1_bias, eps)
            h = (normalised if settings["residual"] == "normalised" else h) + attend(normalised)
            normalised = _ln(h, *second, eps)
            stream = (normalised if settings["residual"] == "normalised" else h) + feed(normalised)
        if settings["final"] == "every layer":
            stream = _ln(stream, final_weight, final_bias, eps)
    if settings["final"] == "once":
        return _ln(stream, final_weight, final_bias, eps if settings["final eps"] == "given" else 1e-12)
    if settings["final"] == "last ln2":
        return _ln(stream, *chosen[-1][4:], eps)
    if settings["final"] == "plain":
        return F.layer_norm(stream, stream.shape[-1:], eps=eps)
    return stream


_STACK_KNOBS = (
    Knob(
        "final",
        (
            ("once", "", ""),
            ("none", "the final LayerNorm missing", "a Pre-LN stack ends with one LayerNorm after its last layer."),
            (
                "every layer",
                "the final LayerNorm after every layer",
                "the final LayerNorm comes once, after the last layer: inside the stack the stream is never "
                "normalised.",
            ),
            (
                "plain",
                "a final LayerNorm without its gamma and beta",
                "the final LayerNorm has its own parameters, `final_weight` and `final_bias`.",
            ),
            (
                "last ln2",
                "the last layer's `ln2_*` used as the final LayerNorm",
                "the final LayerNorm has its own parameters, `final_weight` and `final_bias`.",
            ),
        ),
    ),
    Knob(
        "residual",
        (
            ("stream", "", ""),
            (
                "normalised",
                "the residual taken from the normalised copy",
                "add each sub-layer's output to the stream itself, `x + attention(LN1(x))`, not to LN1(x).",
            ),
        ),
    ),
    Knob(
        "final eps",
        (
            ("given", "", ""),
            ("ignored", "`eps` not passed on to the final LayerNorm", "the final LayerNorm takes `eps` too."),
        ),
    ),
    Knob(
        "norms",
        (
            ("1, 2", "", ""),
            ("1, 1", "each layer's `ln1_*` used twice", "the feed-forward block reads LN2: `ln2_weight`, `ln2_bias`."),
        ),
    ),
    Knob(
        "reads",
        (
            ("stream", "", ""),
            (
                "x",
                "every layer fed the stack's input",
                "each layer reads the previous layer's output: `x = layer(x)` in the loop.",
            ),
        ),
    ),
    Knob(
        "layers",
        (
            ("all", "", ""),
            ("first", "only the first layer", "run every layer of `layers`, in order."),
            ("last", "only the last layer", "run every layer of `layers`, in order."),
            ("all but the last", "the last layer left out", "run every layer of `layers`, the last one too."),
        ),
    ),
    Knob(
        "layer",
        (
            ("pre", "", ""),
            ("post", "Post-LN layers", "each layer of this stack is Pre-LN: `x + attention(LN1(x))`, then the FFN."),
        ),
    ),
    Knob(
        "eps",
        (
            ("given", "", ""),
            ("default", "PyTorch's default eps", "pass `eps` on to every LayerNorm (1e-5 is PyTorch's default)."),
            ("ignored", "`eps` not passed on", "pass the `eps` you are given on to every LayerNorm."),
        ),
    ),
)


def _stack_no_final_norm(x, layers, final_weight, final_bias, eps=1e-12):
    for pieces in layers:
        x = pre_ln_layer(x, *pieces, eps)
    return x


def _stack_final_norm_every_layer(x, layers, final_weight, final_bias, eps=1e-12):
    for pieces in layers:
        x = _ln(pre_ln_layer(x, *pieces, eps), final_weight, final_bias, eps)
    return x


def _stack_layers_read_the_input(x, layers, final_weight, final_bias, eps=1e-12):
    for pieces in layers:
        out = pre_ln_layer(x, *pieces, eps)  # every layer reads x: only the last one counts
    return _ln(out, final_weight, final_bias, eps)


def _stack_post_ln(x, layers, final_weight, final_bias, eps=1e-12):
    for pieces in layers:
        x = post_ln_layer(x, *pieces, eps)
    return _ln(x, final_weight, final_bias, eps)


PRE_LN_STACK = Exercise(
    name="pre_ln_stack",
    reference=pre_ln_stack,
    prompt="your function receives `x` (batch, seq, d_model), `layers`, a list of tuples `(attention, feed_forward, "
    "ln1_weight, ln1_bias, ln2_weight, ln2_bias)` (one per layer, each as `pre_ln_layer` takes them), the gamma "
    "and beta of a final LayerNorm, `final_weight` and `final_bias` (d_model,), and `eps` (default 1e-12); it "
    "returns (batch, seq, d_model): x through every Pre-LN layer in order (each sub-layer reads a LayerNorm'ed "
    "copy of the stream and adds to the stream), then the final LayerNorm. You may use `bc.layer_norm`.",
    start="one Pre-LN layer first, as section 6 writes it; then the loop, and ask where the stream is normalised.",
    make_cases=_stack_cases,
    knobs=_STACK_KNOBS,
    variant=_stack_variant,
    axes={"": ("batch", "token rows", "feature columns")},
    explain_calls=_stack_calls,
    notebook="06",
    mistakes=(
        Mistake(
            "the final LayerNorm missing",
            "in a Pre-LN stack nothing normalises the residual stream, which grows with depth: one LayerNorm "
            "after the last layer (`final_weight`, `final_bias`) ends the stack.",
            _stack_no_final_norm,
        ),
        Mistake(
            "the final LayerNorm after every layer",
            "the final LayerNorm comes once, after the last layer; normalising the stream after every layer turns "
            "the stack back into a Post-LN one.",
            _stack_final_norm_every_layer,
        ),
        Mistake(
            "every layer fed the stack's input",
            "each layer reads the previous layer's output: write `x = layer(x)` in the loop, or only the last "
            "layer counts.",
            _stack_layers_read_the_input,
        ),
        Mistake(
            "Post-LN layers",
            "the layers of this stack are Pre-LN: each sub-layer reads `LN(x)` and adds to x itself.",
            _stack_post_ln,
        ),
    ),
)
