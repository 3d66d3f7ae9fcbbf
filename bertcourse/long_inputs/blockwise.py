r"""Exact attention without the n x n matrix: key/value blocks and an online softmax.

Explicit attention builds the scores S = Q K^T / sqrt(d_k), (n, n), then softmax(S), (n, n), then
multiplies by V. At n = 8,192 in fp32 each of those matrices is 256 MiB per head. But no query
needs its whole row at once. Take the keys and values in blocks of ``block_size``; for every
query keep three running quantities over the blocks seen so far:

- m, the largest score (the running max),
- l = sum_j exp(s_j - m), the softmax's denominator relative to m (the running sum),
- o = sum_j exp(s_j - m) v_j, the numerator of the output, relative to m.

A new block with its own (m_b, l_b, o_b) merges in exactly, because exp(s - m) = exp(s - m_b) *
exp(m_b - m):

.. math::

    m = \max(m_a, m_b), \quad l = l_a e^{m_a - m} + l_b e^{m_b - m}, \quad
    o = o_a e^{m_a - m} + o_b e^{m_b - m}

and after the last block the output is o / l: the softmax's exact result, never more than
(n x block_size) scores alive at once. This is the idea of FlashAttention (Dao et al., 2022),
which tiles the queries too so that a tile fits a GPU's on-chip memory; PyTorch's
``scaled_dot_product_attention`` does the same in C++ on the CPU and in CUDA on a GPU.

Masks follow the package's convention (bool, True = may attend). Masked scores are -inf here,
not ``fill_value``: a block whose keys are all masked for a query has m = -inf, and every
exponential is taken against a *safe* max (0 where m is -inf), so it contributes exactly 0. A
query whose keys are all masked ends with l = 0 and gets the package's answer: a zero output
(``bertcourse.masks``).
"""

from __future__ import annotations

import math

import torch

from .._validation import describe, require_float_tensor, require_positive_int
from ..attention import require_qkv
from ..masks import broadcast_mask


def block_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None, *, block_size: int = 128
) -> torch.Tensor:
    """softmax(Q K^T / sqrt(d_k)) V computed over key/value blocks of ``block_size`` with an online softmax.

    q: (..., q_len, d_k), k: (..., k_len, d_k), v: (..., k_len, d_v); ``mask`` bool, broadcastable
    to (..., q_len, k_len), True = may attend (a padding mask (batch, k_len) needs
    ``expand_padding_mask`` first). Returns (..., q_len, d_v), equal to
    ``scaled_dot_product_attention`` to 1e-5 in fp32; a query with every key masked gets zeros.
    """
    require_qkv(q, k, v)
    require_positive_int("block_size", block_size)
    if mask is not None:
        mask = broadcast_mask(mask, (*q.shape[:-1], k.shape[-2])).to(q.device)  # to (..., q_len, k_len)
    return _block_attention(q, k, v, mask, block_size)


def _block_attention(q, k, v, mask, block_size):
    q = q / math.sqrt(q.shape[-1])  # (..., q_len, d_k): scale the queries once
    state = None
    for start in range(0, k.shape[-2], block_size):
        stop = start + block_size
        scores = q @ k[..., start:stop, :].transpose(-2, -1)  # (..., q_len, block): this block's scores only
        if mask is not None:
            scores = scores.masked_fill(~mask[..., start:stop], -math.inf)  # (..., q_len, block)
        block = softmax_block_state(scores, v[..., start:stop, :])  # (m, l, o) of this block
        state = block if state is None else _merge_softmax_blocks(*state, *block)
    _, total, output = state  # (..., q_len, 1), (..., q_len, 1), (..., q_len, d_v)
    return torch.where(total > 0, output / total.clamp(min=torch.finfo(total.dtype).tiny), 0.0)  # (..., q_len, d_v)


def softmax_block_state(scores: torch.Tensor, v: torch.Tensor):
    """The online-softmax state of one block: (running max m, running sum l, unnormalised output o).

    scores: (..., q_len, block), masked entries -inf; v: (..., block, d_v).
    Returns m, l: (..., q_len, 1) and o: (..., q_len, d_v), with l and o relative to m.
    """
    block_max = scores.amax(dim=-1, keepdim=True)  # (..., q_len, 1); -inf where every key is masked
    exponentials = torch.exp(scores - _safe_max(block_max))  # (..., q_len, block), each <= 1
    return block_max, exponentials.sum(dim=-1, keepdim=True), exponentials @ v  # m, l, o


def merge_softmax_blocks(
    max_a: torch.Tensor,
    sum_a: torch.Tensor,
    out_a: torch.Tensor,
    max_b: torch.Tensor,
    sum_b: torch.Tensor,
    out_b: torch.Tensor,
):
    """Merge the online-softmax states of two blocks of keys into the state of both: (m, l, o).

    max_*, sum_*: (..., q_len, 1), the running max and the sum of exp(score - max) of each block;
    out_*: (..., q_len, d_v), the sum of exp(score - max) * value. Returns the same three for the
    union of the two blocks; out / sum is then the attention output over both.
    """
    for name, x in (("max_a", max_a), ("sum_a", sum_a), ("out_a", out_a), ("max_b", max_b), ("sum_b", sum_b)):
        require_float_tensor(name, x, min_dim=1, like=out_b, like_name="`out_b`")
    require_float_tensor("out_b", out_b, min_dim=1)
    shape = (*out_a.shape[:-1], 1)
    for name, x in (("max_a", max_a), ("sum_a", sum_a), ("max_b", max_b), ("sum_b", sum_b)):
        if tuple(x.shape) != shape:
            raise ValueError(f"`{name}` must have shape (..., q_len, 1) = {shape} to match `out_a`, got {describe(x)}.")
    if out_b.shape != out_a.shape:
        raise ValueError(f"`out_b` must have the shape of `out_a` {tuple(out_a.shape)}, got {describe(out_b)}.")
    return _merge_softmax_blocks(max_a, sum_a, out_a, max_b, sum_b, out_b)


def _merge_softmax_blocks(max_a, sum_a, out_a, max_b, sum_b, out_b):
    new_max = torch.maximum(max_a, max_b)  # (..., q_len, 1): the larger of the two maxima
    scale_a = torch.exp(max_a - _safe_max(new_max))  # (..., q_len, 1): e^(m_a - m), 0 for an empty block
    scale_b = torch.exp(max_b - _safe_max(new_max))  # (..., q_len, 1): e^(m_b - m)
    new_sum = sum_a * scale_a + sum_b * scale_b  # (..., q_len, 1)
    new_out = out_a * scale_a + out_b * scale_b  # (..., q_len, d_v)
    return new_max, new_sum, new_out


def _safe_max(running_max):
    """The max to subtract: 0 where every key so far was masked (-inf), so exp gives 0 and never NaN."""
    return torch.where(running_max == -math.inf, 0.0, running_max)  # (..., q_len, 1)
