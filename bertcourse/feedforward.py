r"""The position-wise feed-forward block: Linear(d, 4d) -> GELU -> Linear(4d, d).

Each token goes through the same two-layer MLP on its own (no mixing between tokens;
that is attention's job). BERT widens to ``intermediate_size`` = 4 x d_model (3072 for
BERT-base). Hugging Face's BERT (``hidden_act="gelu"``, the weights this course loads) uses the
*exact* GELU,

.. math:: \mathrm{GELU}(x) = x \cdot \Phi(x) = \tfrac{x}{2}\left(1 + \mathrm{erf}(x / \sqrt{2})\right);

Google's original TensorFlow code computed the tanh approximation. The two differ by less
than 1e-3: invisible in a plot, enough to fail a 1e-5 comparison. ``gelu`` below writes the
formula out; ``feed_forward`` and the ``FeedForward`` module call ``torch.nn.functional.gelu``,
the same function in one fused kernel, which stores no intermediate (x / sqrt 2, erf, ...)
for the backward pass (a test checks that they agree).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ._validation import (
    require_float_tensor,
    require_layer_input,
    require_positive_int,
    require_shape,
    require_size,
)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """Exact GELU: x * Phi(x), with Phi the standard normal CDF."""
    require_float_tensor("x", x)
    return _gelu(x)


def _gelu(x):
    """x * Phi(x), with Phi(x) = (1 + erf(x / sqrt(2))) / 2."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))  # the shape of x


def feed_forward(
    x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor
) -> torch.Tensor:
    """GELU(x @ w1 + b1) @ w2 + b2.

    x: (..., d_model); w1: (d_model, d_ff); b1: (d_ff,); w2: (d_ff, d_model); b2: (d_model,).
    Returns (..., d_model).
    """
    require_float_tensor("x", x, min_dim=1)
    for name, w in (("w1", w1), ("w2", w2)):
        require_float_tensor(name, w, ndim=2, like=x, like_name="`x`")
    d_model, d_ff = w1.shape
    require_size("x", x, -1, d_model, f"last dimension d_model = w1.shape[0] = {d_model}")
    require_shape("w2", w2, (d_ff, d_model), symbols="(d_ff, d_model)", why=f"to undo `w1` {(d_model, d_ff)}")
    require_shape("b1", b1, (d_ff,), why="one bias per output feature")
    require_shape("b2", b2, (d_model,), why="one bias per output feature")
    return _feed_forward(x, w1, b1, w2, b2)


def _feed_forward(x, w1, b1, w2, b2):
    """Widen to d_ff, apply GELU, narrow back to d_model: every token on its own."""
    hidden = F.gelu(x @ w1 + b1)  # (..., d_ff)
    return hidden @ w2 + b2  # (..., d_model)


class FeedForward(nn.Module):
    """BERT's feed-forward block; ``intermediate`` widens, ``output`` narrows back.

    ``forward`` checks only its input's metadata (width, dtype; ``feed_forward`` checks
    everything) and hands the ``nn.Linear`` layers their own (out, in) weights, so nothing
    is transposed.
    """

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        require_positive_int("d_model", d_model)
        require_positive_int("d_ff", d_ff)
        self.intermediate = nn.Linear(d_model, d_ff)
        self.output = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        require_layer_input("x", x, self.intermediate.in_features, self.intermediate.weight)
        hidden = F.gelu(self.intermediate(x))  # (..., d_ff): GELU(x W1^T + b1)
        return self.output(hidden)  # (..., d_model)
