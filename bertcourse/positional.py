r"""Positional information: sinusoidal encodings (the original Transformer) and learned
absolute position embeddings (what BERT actually uses).

Attention is blind to order: permute the tokens and the outputs are permuted the same
way. Adding a vector that depends on the position fixes that.

Sinusoidal (Vaswani et al., 2017), for position ``pos`` and feature pair ``i``:

.. math:: PE_{pos, 2i} = \sin(pos / 10000^{2i/d}), \quad PE_{pos, 2i+1} = \cos(pos / 10000^{2i/d})

It needs no parameters and is defined for any position. BERT does **not** use it: BERT
learns a table of ``max_position_embeddings`` (512) vectors, one per position, and so
cannot read a token past position 511 -- hence truncation or sliding windows.

Relative positions can also live in the attention itself: rotary embeddings (RoPE) turn the
queries and keys, and ALiBi (``alibi_bias``) adds a penalty that grows with the distance
to the scores. Neither is BERT's; both let a model read past the length it was trained on.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._validation import can_check_values, require_integer_tensor, require_positive_int, require_sequence_fits


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


def sinusoidal_positions(position_ids: torch.Tensor, d_model: int, base: float = 10000.0) -> torch.Tensor:
    """The sinusoidal vector of every position in ``position_ids`` (any shape), for any width and base.

    position_ids: an integer tensor, e.g. (batch, seq) positions counted from each sentence's first
    real token; d_model may be odd (the last column is then a sine without its cosine). Column 2i holds
    sin(pos * base^(-2i/d)), column 2i + 1 the cosine of the same angle. Returns
    (*position_ids.shape, d_model) float32; ``base=10000`` gives the rows of ``sinusoidal_position_encoding``.
    """
    require_integer_tensor("position_ids", position_ids)
    require_positive_int("d_model", d_model)
    if isinstance(base, bool) or not isinstance(base, (int, float)) or base <= 1:
        raise ValueError(f"`base` must be a number above 1 (the original Transformer's is 10000), got {base!r}.")
    return _sinusoidal_positions(position_ids, d_model, base)


def _sinusoidal_positions(position_ids, d_model, base=10000.0):
    """sin(pos / base^(2i/d)) in column 2i, cos of the same angle in column 2i + 1, for every position given."""
    position = position_ids.to(torch.float32)[..., None]  # (..., 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32, device=position_ids.device)  # (ceil(d/2),)
    frequency = torch.exp(-math.log(base) * two_i / d_model)  # (ceil(d/2),): 1 / base^(2i/d)
    angle = position * frequency  # (..., ceil(d/2))
    table = torch.zeros(*position_ids.shape, d_model, device=position_ids.device)  # (..., d_model)
    table[..., 0::2] = torch.sin(angle)  # even columns: (..., ceil(d/2))
    table[..., 1::2] = torch.cos(angle[..., : d_model // 2])  # odd columns: (..., floor(d/2))
    return table  # (..., d_model)


def alibi_bias(num_heads: int, seq_len: int) -> torch.Tensor:
    """ALiBi (Press et al., 2022): no position vectors, a penalty on the scores that grows with distance.

    Returns (num_heads, seq_len, seq_len) float32, ``bias[h, i, j] = -m_h * |i - j|``, to be added to
    head h's scores before the softmax; the symmetric form, for an encoder that reads both ways (the
    paper's causal models keep j <= i only). The slopes form a geometric sequence,
    m_h = 2^(-8h/H) for h = 1 ... H heads when H is a power of two; otherwise the slopes of the
    nearest power of two below, then every other slope of the next one (as in the paper and BLOOM).
    """
    require_positive_int("num_heads", num_heads)
    require_positive_int("seq_len", seq_len)
    return _alibi_bias(num_heads, seq_len)


def _alibi_bias(num_heads, seq_len):
    """Each head penalises distance linearly, with its own slope: -m_h |i - j|."""
    slopes = _alibi_slopes(num_heads)  # (heads,)
    position = torch.arange(seq_len, dtype=torch.float32)  # (seq,)
    offset = position[None, :] - position[:, None]  # (seq, seq): j - i
    minus_distance = torch.minimum(offset, -offset)  # (seq, seq): -|i - j|
    return slopes[:, None, None] * minus_distance  # (heads, seq, seq)


def _alibi_slopes(num_heads):
    """2^(-8h/H) for the largest power of two H <= num_heads, then every other slope of 2H."""
    closest = 2 ** int(math.log2(num_heads))
    slopes = 2.0 ** (-8.0 * torch.arange(1, closest + 1, dtype=torch.float32) / closest)  # (closest,)
    odd = 2 * torch.arange(num_heads - closest, dtype=torch.float32) + 1  # (heads - closest,): 1, 3, 5, ...
    return torch.cat([slopes, 2.0 ** (-8.0 * odd / (2 * closest))])  # (heads,)


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
