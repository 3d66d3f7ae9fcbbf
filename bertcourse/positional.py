r"""Positional information: sinusoidal encodings (the original Transformer) and learned
absolute position embeddings (what BERT actually uses).

Attention is blind to order: permute the tokens and the outputs are permuted the same
way. Adding a vector that depends on the position fixes that.

Sinusoidal (Vaswani et al., 2017), for position ``pos`` and feature pair ``i``:

.. math:: PE_{pos, 2i} = \sin(pos / 10000^{2i/d}), \quad PE_{pos, 2i+1} = \cos(pos / 10000^{2i/d})

It needs no parameters and is defined for any position. BERT does **not** use it: BERT
learns a table of ``max_position_embeddings`` (512) vectors, one per position, and so
cannot read a token past position 511 -- hence truncation or sliding windows.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ._validation import require_positive_int


def sinusoidal_position_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The sinusoidal table of shape (max_len, d_model); even columns sin, odd columns cos.

    Works for odd ``d_model`` too: the last (even) column is a sine with no cosine partner.
    """
    require_positive_int("max_len", max_len)
    require_positive_int("d_model", d_model)
    position = torch.arange(max_len, dtype=torch.float32)[:, None]  # (max_len, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # (ceil(d/2),)
    frequency = torch.exp(-math.log(10000.0) * two_i / d_model)  # 1 / 10000^(2i/d)
    angle = position * frequency  # (max_len, ceil(d/2))
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return table  # (max_len, d_model)


class LearnedPositionEmbedding(nn.Module):
    """A trainable table of ``max_len`` position vectors, as in BERT (``position_embeddings``).

    forward(seq_len) -> (seq_len, d_model). Raises a clear error past the table's end.
    """

    def __init__(self, max_len: int, d_model: int):
        super().__init__()
        require_positive_int("max_len", max_len)
        require_positive_int("d_model", d_model)
        self.max_len = max_len
        self.table = nn.Embedding(max_len, d_model)

    def forward(self, seq_len: int) -> torch.Tensor:
        check_sequence_fits(seq_len, self.max_len)
        positions = torch.arange(seq_len, device=self.table.weight.device)  # (seq_len,)
        return self.table(positions)  # (seq_len, d_model)


def check_sequence_fits(seq_len: int, max_position_embeddings: int, name: str = "input_ids") -> None:
    """Raise a ValueError that explains BERT's length limit when ``seq_len`` is past the table."""
    if seq_len > max_position_embeddings:
        raise ValueError(
            f"`{name}` has {seq_len} tokens, but the model has learned positions only for "
            f"max_position_embeddings={max_position_embeddings} tokens: learned position embeddings "
            "cannot extrapolate. Truncate the input (tokenizer `max_length=...`) or split a long text "
            "into overlapping windows (a sliding window) and combine the results."
        )
