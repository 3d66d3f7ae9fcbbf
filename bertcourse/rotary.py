r"""Rotary position embeddings (RoPE): relative positions as exact rotations (notebook 04).

Sinusoids *added* to the token vectors make :math:`PE_p \cdot PE_q` a function of
:math:`p - q` alone, but a layer never sees that dot product: it sees
:math:`(x_i + PE_p) W_Q \cdot (x_j + PE_q) W_K`, and once :math:`W_Q` and :math:`W_K` act the
distance alone no longer decides. RoPE (Su et al., 2021, "RoFormer") moves the position into
the score itself. After the projections it turns each feature pair :math:`(2i, 2i+1)` of a
query or key at position :math:`p` by the angle :math:`p\,\omega_i`, with the sinusoids'
frequencies :math:`\omega_i = base^{-2i/d}`:

.. math:: R_p q \cdot R_s k = q^\top R_p^\top R_s\, k = q^\top R_{s-p}\, k

so the score depends on the positions only through their difference, exactly, whatever the
content and whatever :math:`W_Q, W_K`. Rotations keep lengths, so nothing else changes.

Pairs are adjacent features, as in the paper and in notebook 04's sinusoids. Many libraries
(Hugging Face's LLaMA, GPT-NeoX) pair feature :math:`i` with :math:`i + d/2` instead ("rotate
half"): the same rotations on permuted features (``tests/test_rotary.py`` checks it against
``transformers``). BERT does not use RoPE; it learns absolute positions (``positional.py``).
"""

from __future__ import annotations

import torch

from ._validation import describe, require_float_tensor, require_tensor


def apply_rotary(x: torch.Tensor, positions: torch.Tensor | None = None, base: float = 10000.0) -> torch.Tensor:
    """Rotate each feature pair (2i, 2i+1) of ``x`` by the angle ``position * base**(-2i / d)``.

    x: (..., seq, d) queries or keys, d even. positions: (seq,) the position of each row
    (integers or floats); default 0, 1, ..., seq - 1. Returns a tensor like ``x``: same shape,
    dtype and device, every row as long as before. Apply it to the queries and the keys, after
    their projections and before the scores.
    """
    require_tensor("x", x, min_dim=2)
    require_float_tensor("x", x)
    seq, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(
            f"`x` must have an even number of features d, one pair per rotation, got {describe(x)}: d = {d}."
        )
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not base > 0:
        raise ValueError(f"`base` must be a positive number (10000.0 in RoFormer and LLaMA), got {describe(base)}.")
    if positions is None:
        positions = torch.arange(seq, device=x.device)  # (seq,)
    else:
        require_tensor("positions", positions, ndim=1)
        if positions.dtype.is_complex or positions.dtype == torch.bool:
            raise TypeError(f"`positions` must hold integers or floats, got {describe(positions)}.")
        if positions.shape[0] != seq:
            raise ValueError(
                f"`positions` must give one position per row of `x`: shape ({seq},) for x of shape "
                f"{tuple(x.shape)} (..., seq, d), got {describe(positions)}."
            )
        positions = positions.to(x.device)
    return _apply_rotary(x, positions, float(base))


def _apply_rotary(x: torch.Tensor, positions: torch.Tensor, base: float) -> torch.Tensor:
    """RoPE as in the formula: angles from the sinusoids' frequencies, then a 2x2 rotation per pair."""
    d = x.shape[-1]
    exact = torch.promote_types(x.dtype, torch.float32)  # angles in float32 at least, float64 for float64
    two_i = torch.arange(0, d, 2, dtype=exact, device=x.device)  # (d/2,)
    omega = base ** (-two_i / d)  # (d/2,): one frequency per pair, 1 down to nearly 1/base
    angle = positions.to(exact)[:, None] * omega  # (seq, d/2)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)  # (seq, d/2) each
    even, odd = x[..., 0::2], x[..., 1::2]  # (..., seq, d/2) each: the two features of every pair
    turned = torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1)  # (..., seq, d/2, 2)
    return turned.flatten(-2)  # (..., seq, d): pairs back side by side
