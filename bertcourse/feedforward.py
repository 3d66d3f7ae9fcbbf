r"""The position-wise feed-forward block: Linear(d, 4d) -> GELU -> Linear(4d, d).

Each token goes through the same two-layer MLP on its own (no mixing between tokens;
that is attention's job). BERT widens to ``intermediate_size`` = 4 x d_model (3072 for
BERT-base). Hugging Face's BERT (``hidden_act="gelu"``, the weights this course loads) uses the
*exact* GELU,

.. math:: \mathrm{GELU}(x) = x \cdot \Phi(x) = \tfrac{x}{2}\left(1 + \mathrm{erf}(x / \sqrt{2})\right);

Google's original TensorFlow code computed the tanh approximation. The two differ by less
than 1e-3: invisible in a plot, enough to fail a 1e-5 comparison. ``gelu`` below writes the
formula out; ``feed_forward`` calls ``torch.nn.functional.gelu``, the same function in one
fused kernel (a test checks that they agree).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ._validation import describe, require_float_tensor, require_positive_int, require_tensor


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
    require_float_tensor("x", x)
    for name, w in (("w1", w1), ("w2", w2)):
        require_tensor(name, w, ndim=2)
        require_float_tensor(name, w, like=x, like_name="`x`")
    if w1.shape[0] != x.shape[-1]:
        raise ValueError(f"`x` must have last dimension d_model = w1.shape[0] = {w1.shape[0]}, got {describe(x)}.")
    if w2.shape != (w1.shape[1], w1.shape[0]):
        raise ValueError(
            f"`w2` must have shape (d_ff, d_model) = {(w1.shape[1], w1.shape[0])} to undo `w1` "
            f"{tuple(w1.shape)}, got {describe(w2)}."
        )
    for name, b, size in (("b1", b1, w1.shape[1]), ("b2", b2, w2.shape[1])):
        require_tensor(name, b, ndim=1)
        if b.shape[0] != size:
            raise ValueError(f"`{name}` must have shape ({size},), one bias per output feature, got {describe(b)}.")
    hidden = F.gelu(F.linear(x, w1.T, b1))  # (..., d_ff): x @ w1 + b1, then GELU
    return F.linear(hidden, w2.T, b2)  # (..., d_model)


class FeedForward(nn.Module):
    """BERT's feed-forward block; ``intermediate`` widens, ``output`` narrows back."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        require_positive_int("d_model", d_model)
        require_positive_int("d_ff", d_ff)
        self.intermediate = nn.Linear(d_model, d_ff)
        self.output = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w1, b1 = self.intermediate.weight.T, self.intermediate.bias  # (d_model, d_ff), (d_ff,)
        w2, b2 = self.output.weight.T, self.output.bias  # (d_ff, d_model), (d_model,)
        return feed_forward(x, w1, b1, w2, b2)  # (..., d_model)
