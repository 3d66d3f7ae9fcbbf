"""Exercises of notebook 12: ``average_gradients`` (DDP's all-reduce, simulated) and ``scaler_update``
(one step of dynamic loss scaling).

Their mistakes are the slips of data parallelism and loss scaling: all-reduce's sum taken for the
mean, the mean over the wrong axis, each replica keeping its own gradient; the scale multiplied in
instead of divided out, no back-off after an overflow, the scale grown at every step, the count of
good steps never reset.
"""

from __future__ import annotations

import torch

from ..precision import average_gradients, scaler_update
from .random_inputs import _randn
from .records import Case, Exercise, Mistake

# --- average_gradients ---------------------------------------------------------------------------


def _average_cases(g):
    return [
        Case("2 replicas, a gradient of 5 numbers", (_randn(g, 2, 5),), ("batched",)),
        Case("4 replicas, a weight gradient of shape (3, 2)", (_randn(g, 4, 3, 2),), ("batched",)),
        Case("3 replicas, a gradient of 4 numbers", (_randn(g, 3, 4),), ("batched",)),
    ]


def _average_sum_only(replica_gradients):
    return replica_gradients.sum(dim=0, keepdim=True).expand_as(replica_gradients).clone()


def _average_wrong_axis(replica_gradients):
    flat = replica_gradients.flatten(1)
    return flat.mean(dim=1, keepdim=True).expand_as(flat).reshape(replica_gradients.shape).clone()


def _average_not_shared(replica_gradients):
    return replica_gradients.clone()


AVERAGE_GRADIENTS = Exercise(
    name="average_gradients",
    reference=average_gradients,
    prompt="your function receives `replica_gradients` (world_size, ...), row r the gradient replica r computed "
    "on its own rows; it returns a tensor of the same shape that every replica holds after DDP's all-reduce: "
    "every row the mean of the rows.",
    start="`replica_gradients.sum(dim=0, keepdim=True)` is what `dist.all_reduce` (a sum) leaves on each replica.",
    make_cases=_average_cases,
    notebook="12",
    mistakes=(
        Mistake(
            "all-reduce's sum kept as the gradient",
            "`dist.all_reduce` sums by default: divide by the world size (replica_gradients.shape[0]) to get the mean.",
            _average_sum_only,
        ),
        Mistake(
            "the mean over the numbers of each replica instead of over the replicas",
            "average across dim 0 (the replicas), element by element: each weight keeps its own gradient.",
            _average_wrong_axis,
        ),
        Mistake(
            "each replica keeping its own gradient",
            "without the all-reduce the replicas take different steps and drift apart: give every row the mean.",
            _average_not_shared,
        ),
    ),
)

# --- scaler_update -------------------------------------------------------------------------------


def _scaler_cases(g):
    overflow = _randn(g, 6) * 1024
    overflow[2] = float("inf")
    return [
        Case("finite gradients, scale 1024, 0 good steps of 3", (_randn(g, 6) * 1024, 1024.0, 0, 3)),
        Case(
            "finite gradients, the third good step in a row of 3: the scale doubles", (_randn(g, 5) * 256, 256.0, 2, 3)
        ),
        Case("an inf among the gradients: the step is skipped and the scale halves", (overflow, 65536.0, 1, 3)),
        Case("finite gradients of shape (2, 3), scale 8, growth every 2 steps", (_randn(g, 2, 3) * 8, 8.0, 0, 2)),
    ]


def _scaler_multiplied(scaled_gradients, scale, good_steps, growth_interval):
    _, new_scale, new_good = scaler_update(scaled_gradients, scale, good_steps, growth_interval)
    return scaled_gradients * scale, new_scale, new_good


def _scaler_no_backoff(scaled_gradients, scale, good_steps, growth_interval):
    unscaled, new_scale, new_good = scaler_update(scaled_gradients, scale, good_steps, growth_interval)
    if not torch.isfinite(unscaled).all():
        new_scale = torch.tensor(float(scale))
    return unscaled, new_scale, new_good


def _scaler_grows_every_step(scaled_gradients, scale, good_steps, growth_interval):
    unscaled, new_scale, new_good = scaler_update(scaled_gradients, scale, good_steps, growth_interval)
    if torch.isfinite(unscaled).all():
        new_scale = torch.tensor(scale * 2.0)
    return unscaled, new_scale, new_good


def _scaler_count_not_reset(scaled_gradients, scale, good_steps, growth_interval):
    unscaled, new_scale, new_good = scaler_update(scaled_gradients, scale, good_steps, growth_interval)
    if torch.isfinite(unscaled).all() and good_steps + 1 == growth_interval:
        new_good = torch.tensor(good_steps + 1)
    return unscaled, new_scale, new_good


SCALER_UPDATE = Exercise(
    name="scaler_update",
    reference=scaler_update,
    prompt="your function receives `scaled_gradients` (a float tensor: gradients of the loss times `scale`), "
    "`scale` (a float), `good_steps` (an int: finite steps in a row so far) and `growth_interval` (an int); it "
    "returns (the gradients divided by `scale`, the next scale as a float32 0-dim tensor, the next good-step count "
    "as an int64 0-dim tensor): after an inf or NaN the scale halves and the count is 0; otherwise the count "
    "grows, and when it reaches `growth_interval` the scale doubles and the count is 0.",
    start="`unscaled = scaled_gradients / scale`; `torch.isfinite(unscaled).all()` says whether the step is taken.",
    make_cases=_scaler_cases,
    outputs=("unscaled", "scale", "good_steps"),
    notebook="12",
    mistakes=(
        Mistake(
            "the scale multiplied in instead of divided out",
            "the gradients came out `scale` times too large: divide them by `scale` before the optimizer sees them.",
            _scaler_multiplied,
        ),
        Mistake(
            "no back-off after an overflow",
            "an inf or NaN means the scale is too large: halve it (scale * 0.5), or the next step overflows again.",
            _scaler_no_backoff,
        ),
        Mistake(
            "the scale doubled after every good step",
            "grow only after `growth_interval` good steps in a row, then start counting again from 0.",
            _scaler_grows_every_step,
        ),
        Mistake(
            "the count of good steps not reset after the scale grows",
            "after doubling the scale set the count back to 0: the new scale must earn its own run of good steps.",
            _scaler_count_not_reset,
        ),
    ),
)
