"""Random inputs that several catalogue modules draw.

Each comes from the exercise's own seeded ``torch.Generator``, so the notebook's global random
state is never touched.
"""

from __future__ import annotations

import torch


def seeded_randn(g: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=g, dtype=torch.float32) * scale


def seeded_weight(g: torch.Generator, d_in: int, d_out: int) -> torch.Tensor:
    return seeded_randn(g, d_in, d_out, scale=d_in**-0.5)  # keeps activations near unit variance


def seeded_ln_params(g, d):
    return 1.0 + seeded_randn(g, d, scale=0.5), seeded_randn(g, d, scale=0.5)  # gamma, beta
