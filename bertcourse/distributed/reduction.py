"""The loss of the global batch from what each rank holds: a (sum, count) pair per rank, all-reduced.

DDP averages the ranks' gradients, so the global batch's loss is the mean of the ranks' losses only
when every rank's loss is a mean over the same number of items. BERT's MLM loss is a mean over the
masked tokens, and with 15% drawn at random the ranks hold different counts: the mean of the ranks'
means then weighs a rank with few masked tokens as much as one with many. The right global figure
adds the sums and the counts first (two all-reduces, or one of a stacked pair) and divides once. A
rank with no masked token contributes (0, 0): its own mean would be 0 / 0, NaN, but the global
figure is unharmed. That is the loss to log. The gradients need the global count as well, all-reduced
before ``backward``: each rank then backpropagates its sum times world_size / global count, and DDP's
average divides the world_size out again.
"""

from __future__ import annotations

import torch

from .._validation import describe, require_float_tensor


def global_mean_loss(sums: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """The mean loss over every item of the global batch, from each rank's (sum of its items' losses,
    number of items): ``sums`` (world_size,) float, ``counts`` (world_size,) int. Returns a 0-dim tensor
    of ``sums``' dtype: NaN when no rank holds an item."""
    require_float_tensor("sums", sums, ndim=1)
    if not isinstance(counts, torch.Tensor) or counts.dtype.is_floating_point or counts.dtype == torch.bool:
        raise TypeError(
            f"`counts` must be a tensor of integers (how many items each rank holds), got {describe(counts)}."
        )
    if counts.shape != sums.shape:
        raise ValueError(
            f"`counts` must have the shape of `sums` {tuple(sums.shape)}: one per rank, got {describe(counts)}."
        )
    if bool((counts < 0).any()):
        raise ValueError(f"`counts` must not be negative, got {counts.tolist()}.")
    return _global_mean_loss(sums, counts)


def _global_mean_loss(sums, counts):
    total = sums.sum()  # () what all_reduce(SUM) of the sums gives every rank
    items = counts.sum()  # () the same for the counts
    return total / items.to(sums.dtype)  # () one division, each item weighed once
