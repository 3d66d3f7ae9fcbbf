"""Exercises of notebook 06: ``layer_norm`` and ``feed_forward``.

The cases tell close variants apart: a large eps shows where eps goes, and an identity feed-forward
on -4 ... 4 shows the activation itself, exact GELU against ReLU and GELU's tanh approximation.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..feedforward import feed_forward, gelu
from ..layernorm import layer_norm
from .random_inputs import _ln_params, _randn, _weights
from .records import Case, Exercise, Mistake


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


LAYER_NORM = Exercise(
    name="layer_norm",
    reference=layer_norm,
    prompt="your function receives `x` (..., d), `weight` (gamma) and `bias` (beta) of shape (d,) and a float "
    "`eps`; it returns (..., d): each vector normalised over its own d features to mean 0 and variance 1 "
    "(biased variance, eps inside the square root), times `weight`, plus `bias`.",
    start="`mean = x.mean(dim=-1, keepdim=True)`.",
    make_cases=_layer_norm_cases,
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


FEED_FORWARD = Exercise(
    name="feed_forward",
    reference=feed_forward,
    prompt="your function receives `x` (..., d_model), `w1` (d_model, d_ff), `b1` (d_ff,), `w2` "
    "(d_ff, d_model), `b2` (d_model,); it returns `GELU(x @ w1 + b1) @ w2 + b2`, shape (..., d_model), "
    "with the exact (erf) GELU.",
    start="`hidden = x @ w1 + b1`, then the exact GELU `torch.nn.functional.gelu(hidden)`.",
    make_cases=_ffn_cases,
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
