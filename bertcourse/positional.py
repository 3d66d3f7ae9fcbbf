r"""Positional information: sinusoidal encodings (the original Transformer) and learned
absolute position embeddings (what BERT actually uses).

Attention is blind to order: permute the tokens and the outputs are permuted the same
way. Adding a vector that depends on the position fixes that.

Sinusoidal (Vaswani et al., 2017), for position ``pos`` and feature pair ``i``:

.. math:: PE_{pos, 2i} = \sin(pos / 10000^{2i/d}), \quad PE_{pos, 2i+1} = \cos(pos / 10000^{2i/d})

It needs no parameters and is defined for any position. BERT does **not** use it: BERT
learns a table of ``max_position_embeddings`` (512) vectors, one per position, and so
cannot read a token past position 511 -- hence truncation or sliding windows.

Rotary embeddings (RoPE, Su et al., 2021; used by LLaMA and many later models, not by BERT) turn
the sinusoids' rotation into the attention itself: ``apply_rotary`` rotates each pair of query
and key features by an angle proportional to the position, so the dot product of a query at m
and a key at n depends on m - n only.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._validation import (
    can_check_values,
    describe,
    require_float_tensor,
    require_integer_tensor,
    require_positive_int,
    require_sequence_fits,
)


def sinusoidal_position_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The sinusoidal table of shape (max_len, d_model); even columns sin, odd columns cos.

    Works for odd ``d_model`` too: the last (even) column is a sine with no cosine partner.
    """
    require_positive_int("max_len", max_len)
    require_positive_int("d_model", d_model)
    return _sinusoidal_position_encoding(max_len, d_model)


def _sinusoidal_position_encoding(max_len, d_model):
    """sin(pos / 10000^(2i/d)) in column 2i, cos of the same angle in column 2i + 1."""
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (ceil(d/2),)
    frequency = torch.exp(-math.log(10000.0) * two_i / d_model)  # (ceil(d/2),): 1 / 10000^(2i/d)
    angle = position * frequency  # (max_len, ceil(d/2))
    table = torch.zeros(max_len, d_model)  # (max_len, d_model)
    table[:, 0::2] = torch.sin(angle)  # even columns: (max_len, ceil(d/2))
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])  # odd columns: (max_len, floor(d/2))
    return table  # (max_len, d_model)


def apply_rotary(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Rotary position embedding: turn features (2i, 2i + 1) of the token at position p by p * base^(-2i/d).

    x: (..., seq, d) queries or keys, d even; the positions are 0 ... seq - 1. Returns a tensor of
    x's shape and dtype. Rotated queries and keys give scores that depend on the distance only.
    """
    require_float_tensor("x", x, min_dim=2)
    if x.shape[-1] % 2:
        raise ValueError(f"`x` must have an even number of features (they rotate in pairs), got {describe(x)}.")
    if isinstance(base, bool) or not isinstance(base, (int, float)) or base <= 1:
        raise ValueError(f"`base` must be a number larger than 1 (RoPE uses 10000), got {base!r}.")
    return _apply_rotary(x, base)


def _apply_rotary(x, base=10000.0):
    """Rotate each pair of features by its position times the pair's frequency, as sinusoids do."""
    seq, d = x.shape[-2], x.shape[-1]
    position = torch.arange(seq, dtype=torch.float32, device=x.device)[:, None]  # (seq, 1)
    frequency = base ** (-torch.arange(0, d, 2, dtype=torch.float32, device=x.device) / d)  # (d/2,)
    angle = position * frequency  # (seq, d/2): the turn of pair i at position p
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)  # (seq, d/2) each
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., seq, d/2) each: the two features of every pair
    turned_even = even * cos - odd * sin  # (..., seq, d/2)
    turned_odd = even * sin + odd * cos  # (..., seq, d/2)
    return torch.stack([turned_even, turned_odd], dim=-1).flatten(-2)  # (..., seq, d): pairs interleaved again


class LearnedPositionEmbedding(nn.Embedding):
    """A trainable table of ``max_len`` position vectors: BERT's ``position_embeddings``.

    It is an ``nn.Embedding`` (its rows are in ``.weight``, shape (max_len, d_model)), called
    with a sequence length: ``forward(seq_len)`` -> the first ``seq_len`` rows, (seq_len, d_model).
    Like any embedding it also takes a tensor of position ids. Past the table's end it raises
    the error that explains BERT's length limit (for position ids: read on the CPU only, see
    ``bertcourse._validation``). ``BertEmbeddings`` reads ``.weight`` directly.
    """

    def __init__(self, max_len: int, d_model: int):
        require_positive_int("max_len", max_len)
        require_positive_int("d_model", d_model)
        super().__init__(max_len, d_model)

    def forward(self, seq_len) -> torch.Tensor:
        if isinstance(seq_len, torch.Tensor):
            positions = seq_len  # (..., seq) position ids
            require_integer_tensor("positions", positions, hint="Position ids count from 0: use `.long()`.")
            if can_check_values(positions) and positions.numel():
                require_sequence_fits(int(positions.max()) + 1, self.num_embeddings, "positions")
        else:
            require_positive_int("seq_len", seq_len)
            require_sequence_fits(seq_len, self.num_embeddings, "seq_len")
            positions = torch.arange(seq_len, device=self.weight.device)  # (seq_len,)
        return super().forward(positions)  # (..., seq, d_model)
