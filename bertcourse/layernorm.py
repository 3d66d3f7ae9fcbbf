r"""Layer normalisation, written from scratch.

For each token vector separately (over its ``d_model`` features, never over the batch):

.. math:: \mathrm{LN}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta

with the *biased* variance (divide by d, not d - 1) and ``eps`` inside the square root,
exactly as ``torch.nn.LayerNorm`` computes it. BatchNorm, by contrast, normalises each
feature over the batch, so a sentence's output (in training mode) depends on the other sentences in the batch.

BERT uses ``eps = 1e-12``; PyTorch's default is ``1e-5``. This package defaults to
BERT's value: pass ``eps`` explicitly when comparing with PyTorch.

``layer_norm`` checks its arguments and calls ``_layer_norm``, the formula step by step.
The ``LayerNorm`` module is what the model uses, and it chooses speed: by default
(``fused=True``) it calls ``torch.nn.functional.layer_norm``, one kernel that computes the
same numbers without keeping the centred and normalised copies of the input for the
backward pass (written out, each step's full-size result is stored and paid for again when
training). ``LayerNorm(d, fused=False)`` runs the from-scratch core instead; a test shows
the two paths agree, outputs and gradients, to 1e-6 in fp32 -- as attention's fast path
agrees with its teaching path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ._validation import require_float_tensor, require_layer_input, require_positive_int, require_shape


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Normalise the last axis of x (..., d) to mean 0 and variance 1, then scale and shift.

    weight (gamma) and bias (beta): (d,). Returns (..., d).
    """
    require_float_tensor("x", x, min_dim=1)
    for name, p in (("weight", weight), ("bias", bias)):
        require_shape(name, p, (x.shape[-1],), symbols="(d,)")
    return _layer_norm(x, weight, bias, eps)


def _layer_norm(x, weight, bias, eps=1e-12):
    """Subtract each token's mean, divide by its standard deviation, then scale by gamma and shift by beta."""
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    centered = x - mean  # (..., d)
    variance = centered.square().mean(dim=-1, keepdim=True)  # (..., 1), biased: divide by d
    normalized = centered / torch.sqrt(variance + eps)  # (..., d), eps inside the square root
    return (weight * normalized + bias).to(x.dtype)  # (..., d), in x's dtype even if gamma and beta are fp32


class LayerNorm(nn.Module):
    """LayerNorm over the last axis with learnable gamma (``weight``) and beta (``bias``).

    ``fused=True`` (the default, what the model uses) runs PyTorch's fused kernel;
    ``fused=False`` runs the from-scratch ``_layer_norm``. Same parameters, same numbers.
    ``forward`` checks only its input's metadata (width, dtype); ``layer_norm`` checks everything.
    """

    def __init__(self, d_model: int, eps: float = 1e-12, fused: bool = True):
        super().__init__()
        require_positive_int("d_model", d_model)
        self.eps = eps
        self.fused = fused
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        require_layer_input("x", x, self.weight.shape[0], self.weight)
        if self.fused:
            return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)  # (..., d)
        return _layer_norm(x, self.weight, self.bias, self.eps)  # (..., d)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}" + ("" if self.fused else ", fused=False")
