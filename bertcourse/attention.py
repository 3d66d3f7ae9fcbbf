r"""Q/K/V projections and scaled dot-product attention.

.. math:: \mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V

Each public function checks its arguments, then calls its core ``_<name>``: the formula
alone, with a shape comment on every line (the rule is in ``bertcourse._validation``).
Two cores compute attention:

- the **teaching path**, ``_scaled_dot_product_attention``, writes every step out (scores,
  scale, mask, softmax, weighted sum) and returns the attention weights, so they can be plotted;
- the **fast path**, ``_fast_attention``, calls ``torch.nn.functional.scaled_dot_product_attention``,
  which fuses the steps and never materialises the weights. It is taken when the caller
  says it does not need the weights (``need_weights=False``).

Both agree to 1e-6 in fp32 (a test proves it). Masks follow the package convention:
boolean, True = may attend (see ``bertcourse.masks``).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._validation import (
    can_check_values,
    describe,
    is_int,
    require_float_tensor,
    require_probability,
    require_size,
)
from .masks import broadcast_mask, fill_value


def qkv_projection(x: torch.Tensor, w_q: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor):
    """Project token vectors to queries, keys and values: Q = X W_Q, K = X W_K, V = X W_V.

    x: (..., seq, d_model); w_q, w_k: (d_model, d_k); w_v: (d_model, d_v).
    Returns (q, k, v) of shapes (..., seq, d_k), (..., seq, d_k), (..., seq, d_v).
    (``nn.Linear`` stores the transposed matrix, (out, in), and computes x @ W.T + b.)
    """
    require_float_tensor("x", x, min_dim=2)
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        require_float_tensor(name, w, ndim=2, like=x, like_name="`x`")
        require_size(name, w, 0, x.shape[-1], f"shape (d_model, d_out) with d_model = x.shape[-1] = {x.shape[-1]}")
    if w_q.shape[1] != w_k.shape[1]:
        raise ValueError(
            f"`w_q` and `w_k` must project to the same width d_k (queries are dotted with keys), "
            f"got {w_q.shape[1]} and {w_k.shape[1]}."
        )
    return _qkv_projection(x, w_q, w_k, w_v)


def _qkv_projection(x, w_q, w_k, w_v):
    """Three matrix products, one per role: Q = X W_Q, K = X W_K, V = X W_V."""
    return x @ w_q, x @ w_k, x @ w_v  # (..., seq, d_k), (..., seq, d_k), (..., seq, d_v)


def qkv_from_linear(
    x: torch.Tensor,
    w_q: torch.Tensor,
    b_q: torch.Tensor,
    w_k: torch.Tensor,
    b_k: torch.Tensor,
    w_v: torch.Tensor,
    b_v: torch.Tensor,
):
    """Queries, keys and values from three ``nn.Linear`` layers' ``.weight`` and ``.bias``.

    x: (..., seq, d_model); w_q, w_k: (d_k, d_model) and w_v: (d_v, d_model), in ``nn.Linear``'s
    (out, in) layout; b_q, b_k: (d_k,), b_v: (d_v,). Returns (q, k, v) as ``nn.Linear`` computes
    them, ``x @ W.T + b``: shapes (..., seq, d_k), (..., seq, d_k), (..., seq, d_v).
    """
    _check_linear_projections(x, {"q": (w_q, b_q), "k": (w_k, b_k), "v": (w_v, b_v)})
    return _qkv_from_linear(x, w_q, b_q, w_k, b_k, w_v, b_v)


def _qkv_from_linear(x, w_q, b_q, w_k, b_k, w_v, b_v):
    """What each nn.Linear computes: x W^T + b, with W stored as (out, in)."""
    q = x @ w_q.T + b_q  # (..., seq, d_model) @ (d_model, d_k) -> (..., seq, d_k)
    k = x @ w_k.T + b_k  # (..., seq, d_k)
    v = x @ w_v.T + b_v  # (..., seq, d_v)
    return q, k, v  # (..., seq, d_k), (..., seq, d_k), (..., seq, d_v)


def linear_scores(x: torch.Tensor, w_q: torch.Tensor, b_q: torch.Tensor, w_k: torch.Tensor, b_k: torch.Tensor):
    """The raw attention scores of two ``nn.Linear`` projections: (x W_Q^T + b_Q)(x W_K^T + b_K)^T.

    x: (..., seq, d_model); w_q, w_k: (d_k, d_model) in ``nn.Linear``'s (out, in) layout; b_q, b_k: (d_k,).
    Returns (..., seq, seq): row i holds query i's score against every key, unscaled.
    """
    _check_linear_projections(x, {"q": (w_q, b_q), "k": (w_k, b_k)})
    return _linear_scores(x, w_q, b_q, w_k, b_k)


def _linear_scores(x, w_q, b_q, w_k, b_k):
    """Each layer computes x W^T + b; every query is then dotted with every key."""
    q = x @ w_q.T + b_q  # (..., seq, d_model) @ (d_model, d_k) -> (..., seq, d_k)
    k = x @ w_k.T + b_k  # (..., seq, d_k)
    return q @ k.transpose(-2, -1)  # (..., seq, d_k) @ (..., d_k, seq) -> (..., seq, seq)


def attention_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Raw (unscaled) scores Q K^T: how well each query matches each key.

    q: (..., q_len, d_k), k: (..., k_len, d_k). Returns (..., q_len, k_len).
    """
    require_qk(q, k)
    return _attention_scores(q, k)


def _attention_scores(q, k):
    """Every query dotted with every key: Q K^T."""
    return q @ k.transpose(-2, -1)  # (..., q_len, d_k) @ (..., d_k, k_len) -> (..., q_len, k_len)


def stable_softmax(scores: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax along ``dim`` that survives any finite scores: exp(s - max) / sum exp(s - max).

    Subtracting each slice's maximum leaves the result unchanged (the factor exp(-max) cancels) and
    makes the largest exponent exp(0) = 1, so scores of 1000 (or of 12 in float16) cannot overflow.
    Equals ``torch.softmax(scores, dim)``, dtype included.
    """
    require_float_tensor("scores", scores, min_dim=1)
    if not is_int(dim) or not -scores.dim() <= dim < scores.dim():
        raise ValueError(f"`dim` must be an axis of `scores` ({describe(scores)}), got {dim!r}.")
    return _stable_softmax(scores, dim)


def _stable_softmax(scores, dim=-1):
    """Shift by the maximum so that the largest exponent is exp(0) = 1, then normalise."""
    shifted = scores - scores.amax(dim=dim, keepdim=True)  # (...): every entry <= 0
    exponentials = torch.exp(shifted)  # (...): in (0, 1], the maximum gives exactly 1
    return exponentials / exponentials.sum(dim=dim, keepdim=True)  # (...): each slice sums to 1


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Attention weights from ``scores`` (..., q_len, k_len) and a bool ``mask`` (True = may attend).

    Masked scores become the dtype's most negative number (``fill_value``: safe in float16 and
    bfloat16, where -1e9 overflows), the softmax runs over the keys, and a query row with no key
    allowed gets all-zero weights (instead of NaN from -inf, or a uniform row from a finite fill).
    ``mask`` must broadcast to ``scores``; None means every key is allowed.
    """
    require_float_tensor("scores", scores, min_dim=2)
    if mask is not None:
        mask = broadcast_mask(mask, scores.shape).to(scores.device)
    return _masked_softmax(scores, mask)


def _masked_softmax(scores, mask=None):
    """Fill the masked scores, softmax over the keys, zero the rows that may attend to nothing."""
    if mask is None:
        return torch.softmax(scores, dim=-1)  # (..., q_len, k_len)
    scores = scores.masked_fill(~mask, fill_value(scores.dtype))  # (..., q_len, k_len), masked -> most negative
    weights = torch.softmax(scores, dim=-1)  # (..., q_len, k_len), each row sums to 1
    return _zero_fully_masked_rows(weights, mask)  # (..., q_len, k_len), rows with no allowed key -> 0


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    need_weights: bool = True,
    dropout_p: float = 0.0,
):
    """softmax(Q K^T / sqrt(d_k)) V, with an optional boolean mask (True = may attend).

    q: (..., q_len, d_k), k: (..., k_len, d_k), v: (..., k_len, d_v); the leading dims
    (batch, heads, ...) must match. ``mask`` must broadcast to (..., q_len, k_len).
    Returns ``(output, weights)``: output (..., q_len, d_v) and weights (..., q_len, k_len),
    or ``(output, None)`` on the fast path (``need_weights=False``).
    ``dropout_p`` drops attention weights (BERT uses 0.1 in training); pass 0.0 in eval.
    A query row with every key masked gets zero weights and a zero output.
    """
    require_qkv(q, k, v)
    require_probability("dropout_p", dropout_p)
    if mask is not None:
        mask = broadcast_mask(mask, (*q.shape[:-1], k.shape[-2])).to(q.device)  # to (..., q_len, k_len)
    if not need_weights:
        return _fast_attention(q, k, v, mask, dropout_p), None
    return _scaled_dot_product_attention(q, k, v, mask, dropout_p)


def _scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    """The teaching path: every step of softmax(Q K^T / sqrt(d_k)) V written out; returns the weights too."""
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)  # (..., q_len, k_len)
    weights = _masked_softmax(scores, mask)  # (..., q_len, k_len), each row sums to 1 (or is 0: no key allowed)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)  # (..., q_len, k_len)
    return weights @ v, weights  # (..., q_len, d_v), (..., q_len, k_len)


def flexible_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, scale: float | None = None
):
    """Attention with PyTorch's two kinds of mask and an optional scale, returning the weights too.

    As ``torch.nn.functional.scaled_dot_product_attention``: a boolean ``mask`` says where a query
    may attend (True), a float ``mask`` is *added* to the scaled scores (0 keeps a key, -inf blocks it);
    ``scale`` multiplies the scores and defaults to 1/sqrt(d_k). q: (..., q_len, d_k), k: (..., k_len, d_k),
    v: (..., k_len, d_v). Returns ``(output, weights)``, (..., q_len, d_v) and (..., q_len, k_len).
    """
    require_qkv(q, k, v)
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))):
        raise TypeError(f"`scale` must be a number or None (then 1/sqrt(d_k)), got {describe(scale)}.")
    if mask is not None and mask.dtype != torch.bool:
        require_float_tensor("mask", mask, like=q, like_name="`q` (a float mask is added to the scores)")
        scores_shape = (*q.shape[:-1], k.shape[-2])
        try:
            torch.broadcast_shapes(mask.shape, scores_shape)
        except RuntimeError:
            raise ValueError(
                f"a float `mask` must broadcast to the scores {scores_shape} (..., q_len, k_len), got {describe(mask)}."
            ) from None
    elif mask is not None:
        mask = broadcast_mask(mask, (*q.shape[:-1], k.shape[-2])).to(q.device)
    return _flexible_attention(q, k, v, mask, scale)


def _flexible_attention(q, k, v, mask=None, scale=None):
    """A float mask is added to the scaled scores; a boolean one is filled, as in ``_masked_softmax``."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale  # PyTorch's default: 1/sqrt(d_k)
    scores = q @ k.transpose(-2, -1) * scale  # (..., q_len, k_len)
    if mask is not None and mask.dtype != torch.bool:
        scores, mask = scores + mask, None  # (..., q_len, k_len): 0 keeps a key, -inf blocks it
    weights = _masked_softmax(scores, mask)  # (..., q_len, k_len)
    return weights @ v, weights  # (..., q_len, d_v), (..., q_len, k_len)


def _fast_attention(q, k, v, mask=None, dropout_p=0.0):
    """The fast path: PyTorch's fused kernel computes the same output; the weights are never built."""
    output = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)  # (..., q_len, d_v)
    if mask is not None:
        output = _zero_fully_masked_rows(output, mask)  # (..., q_len, d_v)
    return output  # (..., q_len, d_v)


def _zero_fully_masked_rows(x, mask):
    """Zero the rows of ``x`` whose query may attend to no key at all (instead of NaN or a uniform row)."""
    row_attends = mask.any(dim=-1, keepdim=True)  # (..., q_len, 1)
    if can_check_values(mask) and bool(row_attends.all()):
        return x  # seen on the CPU: no such row, nothing to zero
    return torch.where(row_attends, x, torch.zeros((), dtype=x.dtype, device=x.device))  # the shape of x


def _check_linear_projections(x, layers: dict) -> None:
    """``x`` and each role's (weight, bias) as ``nn.Linear`` stores them; the queries and keys of one width."""
    require_float_tensor("x", x, min_dim=2)
    for role, (weight, bias) in layers.items():
        w_name, b_name = f"w_{role}", f"b_{role}"
        require_float_tensor(w_name, weight, ndim=2, like=x, like_name="`x`")
        require_size(
            w_name, weight, 1, x.shape[-1], f"nn.Linear's shape (out, in) with in = x.shape[-1] = {x.shape[-1]}"
        )
        require_float_tensor(b_name, bias, ndim=1, like=x, like_name="`x`")
        require_size(b_name, bias, 0, weight.shape[0], f"shape (out,) with out = {w_name}.shape[0] = {weight.shape[0]}")
    (w_q, _), (w_k, _) = layers["q"], layers["k"]
    if w_q.shape[0] != w_k.shape[0]:
        raise ValueError(
            f"`w_q` and `w_k` must project to the same width d_k (queries are dotted with keys), "
            f"got {w_q.shape[0]} and {w_k.shape[0]} rows."
        )


def require_qkv(q, k, v):
    """``require_qk``, and one value per key in ``v``: what every attention over (q, k, v) checks."""
    require_qk(q, k)
    require_float_tensor("v", v, min_dim=2, like=q, like_name="`q`")
    if v.shape[:-1] != k.shape[:-1]:
        raise ValueError(
            f"`v` must have one value per key: shape (..., k_len, d_v) with (..., k_len) = "
            f"{tuple(k.shape[:-1])} from `k`, got {describe(v)}."
        )


def require_qk(q, k):
    """The checks ``attention_scores`` and ``scaled_dot_product_attention`` share."""
    require_float_tensor("q", q, min_dim=2)
    require_float_tensor("k", k, min_dim=2, like=q, like_name="`q`")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"`q` and `k` must have the same width d_k (each query is dotted with each key), "
            f"got q {tuple(q.shape)} and k {tuple(k.shape)}."
        )
    if q.shape[:-2] != k.shape[:-2]:
        raise ValueError(
            f"`q` and `k` must have the same leading (batch, heads) dims, got q {tuple(q.shape)} "
            f"and k {tuple(k.shape)}."
        )
