r"""Local attention with global tokens (Longformer's pattern), and a version that computes only the band.

Full attention compares every token with every other: n x n scores. In a long text most of a
token's context is near it, so Longformer (Beltagy et al., 2020) lets each token attend only to
the tokens at most ``width`` positions away -- a **band** of 2 * width + 1 diagonals -- and adds a
few **global** tokens ([CLS], a question) that attend to every token and that every token attends
to. The mask is built from the package's mask functions (``bertcourse.masks``: boolean, True =
may attend); with it, ``bertcourse.scaled_dot_product_attention`` gives local attention, but
still computes all n x n scores and throws most away. ``longformer_mask`` builds the same pattern
for a padded batch whose texts each have their own global tokens (Longformer makes every token of
a question global): the reference of notebook 11's third exercise, not re-exported by
``bertcourse.long_inputs``, so that the notebook's namespace does not answer it.

``local_attention`` computes only the band. The queries are cut into blocks of ``block_size``;
the keys a block can see lie in a window of block_size + 2 * width positions around it, so one
batched product of (block_size x d) by (d x (block_size + 2 * width)) per block gives every score
of the band (and a few outside it, masked). The work and the memory are
n * (block_size + 2 * width + globals) instead of n * n: linear in n. Global keys are a few extra
columns for every block; global queries get a full row each.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .._validation import describe, is_int, require_positive_int
from ..attention import require_qk, require_qkv
from ..masks import as_bool_mask, combine_masks, fill_value


def banded_mask(seq_len: int, width: int, device=None) -> torch.Tensor:
    """(seq_len, seq_len) bool, True where query i may attend to key j: |i - j| <= width."""
    require_positive_int("seq_len", seq_len)
    _require_width(width)
    return _banded_mask(seq_len, width, device)


def _banded_mask(seq_len, width, device=None):
    positions = torch.arange(seq_len, device=device)  # (seq,)
    offset = positions[:, None] - positions[None, :]  # (seq, seq): i - j, how far key j is behind query i
    return combine_masks(offset <= width, offset >= -width)  # (seq, seq): at most `width` behind and ahead


def local_global_mask(seq_len: int, width: int, global_positions=(), device=None) -> torch.Tensor:
    """The band of ``banded_mask`` plus global tokens: (seq_len, seq_len) bool, True = may attend.

    A global token's row is all True (it attends to every token) and so is its column (every token
    attends to it). ``global_positions``: ints in [0, seq_len), e.g. ``[0]`` for [CLS].
    """
    require_positive_int("seq_len", seq_len)
    _require_width(width)
    positions = _global_positions(global_positions, seq_len)
    return _local_global_mask(seq_len, width, positions.to(device))


def _local_global_mask(seq_len, width, global_positions):
    device = global_positions.device
    is_global = torch.zeros(seq_len, dtype=torch.bool, device=device)  # (seq,)
    is_global[global_positions] = True
    band = _banded_mask(seq_len, width, device)  # (seq, seq)
    return band | is_global[:, None] | is_global[None, :]  # (seq, seq): global rows and global columns


def longformer_mask(attention_mask: torch.Tensor, is_global: torch.Tensor, width: int) -> torch.Tensor:
    """Local + global attention for a padded batch: (batch, seq, seq) bool, True = query i may attend to key j.

    ``attention_mask`` (batch, seq): 1 (or True) at real tokens, 0 at padding, as a tokenizer returns
    it. ``is_global`` (batch, seq) bool: each text's global tokens ([CLS], a question's tokens).
    Key j is allowed for query i when j is a real token and |i - j| <= width, or i or j is global in
    that text. Padding keys are never allowed; the rows of padding queries follow the same rule
    (their outputs are ignored), as the course's padding masks hide keys only.
    """
    mask = as_bool_mask("attention_mask", attention_mask)  # checks that it is bool or 0/1
    if mask.dim() != 2:
        raise ValueError(f"`attention_mask` must be (batch, seq), got {describe(attention_mask)}.")
    if not isinstance(is_global, torch.Tensor) or is_global.dtype != torch.bool or is_global.shape != mask.shape:
        raise ValueError(
            f"`is_global` must be a bool tensor of the shape of `attention_mask` {tuple(mask.shape)}, "
            f"got {describe(is_global)}."
        )
    _require_width(width)
    return _longformer_mask(attention_mask, is_global, width)


def _longformer_mask(attention_mask, is_global, width):
    real = attention_mask != 0  # (batch, seq): True at real tokens, for a 0/1 or a bool mask
    band = _banded_mask(real.shape[-1], width, real.device)  # (seq, seq): |i - j| <= width
    either_global = is_global[:, :, None] | is_global[:, None, :]  # (batch, seq, seq): a global row or column
    return (band | either_global) & real[:, None, :]  # (batch, seq, seq): never a padding key


def local_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    width: int,
    global_positions=(),
    *,
    block_size: int = 64,
) -> torch.Tensor:
    """Self-attention in which each token sees the keys at most ``width`` away, plus the global tokens.

    q, k: (..., seq, d_k), v: (..., seq, d_v), the same seq (self-attention). Equal to
    ``scaled_dot_product_attention(q, k, v, local_global_mask(seq, width, global_positions))``,
    but only the band is computed, block by block: time and memory grow as seq, not seq ** 2.
    Returns (..., seq, d_v).
    """
    _check_self_attention(q, k, v)
    _require_width(width)
    require_positive_int("block_size", block_size)
    positions = _global_positions(global_positions, q.shape[-2]).to(q.device)
    return _local_attention(q, k, v, min(width, q.shape[-2] - 1), positions, block_size)


def _local_attention(q, k, v, width, global_positions, block_size):
    n, b, w = q.shape[-2], block_size, width
    n_blocks = -(-n // b)
    extra = n_blocks * b - n  # padding that makes the queries a whole number of blocks
    q = q / math.sqrt(q.shape[-1])  # (..., n, d_k): scale the queries once, not every score
    q_blocks = F.pad(q, (0, 0, 0, extra)).unflatten(-2, (n_blocks, b))  # (..., n_blocks, b, d_k)
    k_windows = F.pad(k, (0, 0, w, w + extra)).unfold(-2, b + 2 * w, b)  # (..., n_blocks, d_k, b + 2w)
    v_windows = (
        F.pad(v, (0, 0, w, w + extra)).unfold(-2, b + 2 * w, b).transpose(-2, -1)
    )  # (..., n_blocks, b + 2w, d_v)
    scores = q_blocks @ k_windows  # (..., n_blocks, b, b + 2w): only the scores near the diagonal

    query = torch.arange(n_blocks * b, device=q.device).view(n_blocks, b, 1)  # (n_blocks, b, 1): position i
    key = (torch.arange(n_blocks, device=q.device) * b - w).view(n_blocks, 1, 1) + torch.arange(
        b + 2 * w, device=q.device
    )  # (n_blocks, 1, b + 2w): position j of each key in the block's window
    allowed = ((query - key).abs() <= w) & (key >= 0) & (key < n)  # (n_blocks, b, b + 2w): the band, inside the text
    is_global = torch.zeros(n, dtype=torch.bool, device=q.device)  # (n,)
    is_global[global_positions] = True
    allowed = allowed & ~is_global[key.clamp(0, n - 1)]  # (n_blocks, b, b + 2w): global keys come next, once
    scores = scores.masked_fill(~allowed, fill_value(scores.dtype))  # (..., n_blocks, b, b + 2w)

    k_global, v_global = k[..., global_positions, :], v[..., global_positions, :]  # (..., g, d_k), (..., g, d_v)
    global_scores = q_blocks @ k_global.transpose(-2, -1).unsqueeze(
        -3
    )  # (..., n_blocks, b, g): every query, every global key
    scores = torch.cat([scores, global_scores], dim=-1)  # (..., n_blocks, b, b + 2w + g)
    values = torch.cat([v_windows, v_global.unsqueeze(-3).expand(*v_windows.shape[:-2], -1, -1)], dim=-2)
    # values: (..., n_blocks, b + 2w + g, d_v)
    weights = torch.softmax(scores, dim=-1)  # (..., n_blocks, b, b + 2w + g)
    output = (weights @ values).flatten(-3, -2)[..., :n, :]  # (..., n, d_v)

    q_global = q[..., global_positions, :]  # (..., g, d_k): global queries see every key
    global_output = torch.softmax(q_global @ k.transpose(-2, -1), dim=-1) @ v  # (..., g, d_v)
    return output.index_copy(-2, global_positions, global_output)  # (..., n, d_v)


def _check_self_attention(q, k, v) -> None:
    require_qk(q, k)
    if k.shape[-2] != q.shape[-2]:
        raise ValueError(
            f"`q` and `k` must have the same length (local attention is self-attention: query i and key i are "
            f"the same token), got q {tuple(q.shape)} and k {tuple(k.shape)}."
        )
    require_qkv(q, k, v)


def _require_width(width) -> None:
    if not is_int(width) or width < 0:
        raise ValueError(
            f"`width` must be an int >= 0 (how many keys on each side a token sees; 0 = itself only), got {width!r}."
        )


def _global_positions(global_positions, seq_len: int) -> torch.Tensor:
    """Check the global positions and return them as a sorted long tensor (g,)."""
    if isinstance(global_positions, torch.Tensor):
        if global_positions.dtype not in (torch.long, torch.int) or global_positions.dim() != 1:
            raise ValueError(f"`global_positions` must be a 1-D tensor of ints, got {describe(global_positions)}.")
        values = global_positions.tolist()
    elif isinstance(global_positions, (list, tuple)) and all(is_int(p) for p in global_positions):
        values = list(global_positions)
    else:
        raise TypeError(f"`global_positions` must be a list of ints such as [0], got {describe(global_positions)}.")
    outside = [p for p in values if not 0 <= p < seq_len]
    if outside:
        raise ValueError(
            f"`global_positions` {outside} are outside the sequence: positions go from 0 to {seq_len - 1}."
        )
    if len(set(values)) != len(values):
        raise ValueError(f"`global_positions` lists a position twice: {values}.")
    return torch.tensor(sorted(values), dtype=torch.long)
