r"""Layer normalisation, written from scratch.

For each token vector separately (over its ``d_model`` features, never over the batch):

.. math:: \mathrm{LN}(x) = \gamma \odot \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta

with the *biased* variance (divide by d, not d - 1) and ``eps`` inside the square root,
exactly as ``torch.nn.LayerNorm`` computes it. BatchNorm, by contrast, normalises each
feature over the batch, so a sentence's output (in training mode) depends on the other sentences in the batch.

BERT uses ``eps = 1e-12``; PyTorch's default is ``1e-5``. This package defaults to
BERT's value: pass ``eps`` explicitly when comparing with PyTorch.
"""

from __future__ import annotations

import torch
from torch import nn

from ._validation import describe, require_float_tensor, require_positive_int, require_tensor


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Normalise the last axis of x (..., d) to mean 0 and variance 1, then scale and shift.

    weight (gamma) and bias (beta): (d,). Returns (..., d).
    """
    require_tensor("x", x, min_dim=1)
    require_float_tensor("x", x)
    for name, p in (("weight", weight), ("bias", bias)):
        require_tensor(name, p, ndim=1)
        if p.shape[0] != x.shape[-1]:
            raise ValueError(f"`{name}` must have shape (d,) = ({x.shape[-1]},), got {describe(p)}.")
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    centered = x - mean  # (..., d)
    variance = centered.square().mean(dim=-1, keepdim=True)  # (..., 1), biased: divide by d
    normalized = centered * torch.rsqrt(variance + eps)  # (..., d), eps inside the square root
    return torch.addcmul(bias, normalized, weight).to(x.dtype)  # bias + normalized * weight, one kernel


class LayerNorm(nn.Module):
    """LayerNorm over the last axis with learnable gamma (``weight``) and beta (``bias``)."""

    def __init__(self, d_model: int, eps: float = 1e-12):
        super().__init__()
        require_positive_int("d_model", d_model)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        require_tensor("x", x, min_dim=1)
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError(f"`x` must have last dimension d={self.weight.shape[0]}, got {describe(x)}.")
        return layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.weight.shape[0]}, eps={self.eps}"
