r"""The position-wise feed-forward block: Linear(d, 4d) -> GELU -> Linear(4d, d).

Each token goes through the same two-layer MLP on its own (no mixing between tokens;
that is attention's job). BERT widens to ``intermediate_size`` = 4 x d_model (3072 for
BERT-base) and uses the *exact* GELU,

.. math:: \mathrm{GELU}(x) = x \cdot \Phi(x) = \tfrac{x}{2}\left(1 + \mathrm{erf}(x / \sqrt{2})\right),

not the tanh approximation. ``gelu`` below writes the formula out; the module calls
``torch.nn.functional.gelu``, the same function in one fused kernel (a test checks that
they agree).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ._validation import describe, require_positive_int, require_tensor


def gelu(x: torch.Tensor) -> torch.Tensor:
    """Exact GELU: x * Phi(x), with Phi the standard normal CDF."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def feed_forward(
    x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor
) -> torch.Tensor:
    """GELU(x @ w1 + b1) @ w2 + b2.

    x: (..., d_model); w1: (d_model, d_ff); b1: (d_ff,); w2: (d_ff, d_model); b2: (d_model,).
    Returns (..., d_model).
    """
    require_tensor("x", x, min_dim=1)
    require_tensor("w1", w1, ndim=2)
    require_tensor("w2", w2, ndim=2)
    if w1.shape[0] != x.shape[-1] or w2.shape != (w1.shape[1], x.shape[-1]):
        raise ValueError(
            f"expected w1 (d_model, d_ff) and w2 (d_ff, d_model) with d_model = x.shape[-1] = {x.shape[-1]}, "
            f"got w1 {describe(w1)} and w2 {describe(w2)}."
        )
    hidden = gelu(x @ w1 + b1)  # (..., d_ff)
    return hidden @ w2 + b2  # (..., d_model)


class FeedForward(nn.Module):
    """BERT's feed-forward block; ``intermediate`` widens, ``output`` narrows back."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        require_positive_int("d_model", d_model)
        require_positive_int("d_ff", d_ff)
        self.intermediate = nn.Linear(d_model, d_ff)
        self.output = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output(F.gelu(self.intermediate(x)))  # (..., d_ff) -> (..., d_model)
