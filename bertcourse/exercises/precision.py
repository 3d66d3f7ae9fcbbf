"""Exercises of notebook 12: ``global_mean_loss`` (the global batch's loss from each rank's (sum, count)
pair) and ``safe_loss_scale`` (the largest power-of-two loss scale at which no fp16 gradient overflows,
and what fp16 still flushes to 0 there). Each combines two ideas of the notebook: the all-reduce with
the unequal masked-token counts of BERT's loss; the fp16 format's limits with loss scaling.

Their mistakes: the mean of the ranks' means (what DDP's equal-weight average amounts to, right only for
equal counts),
the sum or the mean of the sums, an integer division; for the scale, 65,504 taken as the overflow point
(fp16 rounds everything below 65,520 down to it), the smallest gradient instead of the largest, the
exponent one too high, the exponent returned instead of the scale, 2^-24 taken as the flush point
(values above 2^-25 round up to 2^-24), the flushed fraction counted over all entries, zeros
included, and the gradients cast to fp16 before they are scaled (1e-9 is 0 and 1e5 inf already).

The earlier exercises of notebook 12, ``average_gradients`` (DDP's all-reduce, simulated: a one-liner
whose hint gave the sum) and ``scaler_update`` (one step of dynamic loss scaling, which
``precision.LossScaler.update`` spells out), stay checkable by name (``registry.RETIRED``).
"""

from __future__ import annotations

import math

import torch

from ..distributed.reduction import global_mean_loss
from ..precision import average_gradients, safe_loss_scale, scaler_update
from .diagnosis import equals_one_of
from .random_inputs import seeded_randn
from .records import Case, Exercise, Mistake

# --- global_mean_loss ----------------------------------------------------------------------------


def _global_cases(g):
    counts_equal = torch.tensor([6, 6])
    counts_unequal = torch.tensor([2, 9])
    return [
        Case("2 ranks holding 6 masked tokens each", (seeded_randn(g, 2).abs() * 6, counts_equal)),
        Case("the same 2 ranks, holding 2 and 9 masked tokens", (torch.tensor([3.1, 40.5]), counts_unequal)),
        Case(
            "4 ranks holding 5, 1, 7 and 3 masked tokens",
            (torch.tensor([9.5, 4.25, 20.0, 6.0]), torch.tensor([5, 1, 7, 3])),
        ),
        Case(
            "3 ranks, the second with no masked token: (0, 0)",
            (torch.tensor([7.5, 0.0, 11.0]), torch.tensor([3, 0, 4])),
        ),
        Case("1 rank: the global batch is its batch", (torch.tensor([12.0]), torch.tensor([5]))),
    ]


def _global_mean_of_means(sums, counts):
    return (sums / counts).mean()


def _global_sum_of_sums(sums, counts):
    return sums.sum()


def _global_mean_of_sums(sums, counts):
    return sums.mean()


def _global_sum_over_world_size_times_count(sums, counts):
    return sums.sum() / (len(counts) * counts[0].to(sums.dtype))


def _global_integer_division(sums, counts):
    return torch.div(sums.sum().floor().long(), counts.sum(), rounding_mode="floor").to(sums.dtype)


def _global_nan_ranks_dropped(sums, counts):
    return (sums / counts).nanmean()


def _global_explain(case, value, expected):
    """What the case's ranks hold: their counts, their sums and their own means (never the formula)."""
    sums, counts = case.args
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        return None
    means = ["NaN" if int(c) == 0 else round(float(s) / int(c), 3) for s, c in zip(sums, counts, strict=True)]
    held = f"Here the ranks hold {counts.tolist()} items, with loss sums {[round(float(x), 3) for x in sums]}"
    if len(set(counts.tolist())) == 1:
        return f"{held}: as many items each, so their own means {means} weigh alike."
    return f"{held}: their own means are {means}, over different numbers of items."


GLOBAL_MEAN_LOSS = Exercise(
    name="global_mean_loss",
    reference=global_mean_loss,
    prompt="your function receives `sums` (world_size,) float, each rank's sum of its masked tokens' losses, "
    "and `counts` (world_size,) int, how many masked tokens each rank holds (possibly 0); it returns a 0-dim "
    "tensor: the mean loss over every masked token of the global batch, as one process holding the whole "
    "batch would compute it.",
    start="think of what two all-reduces (of the sums, and of the counts) would leave on every rank.",
    make_cases=_global_cases,
    notebook="12",
    explain=_global_explain,
    mistakes=(
        Mistake(
            "the mean of the ranks' means",
            "that is DDP's average of the ranks' losses: right only when every rank holds as many items. "
            "Weigh each item once: all the losses added, divided by all the items.",
            _global_mean_of_means,
        ),
        Mistake(
            "the mean of the ranks' means, the NaN of an empty rank skipped",
            "skipping the rank with no item still weighs every other rank alike; add the sums and the counts first.",
            _global_nan_ranks_dropped,
        ),
        Mistake(
            "all the sums added but never divided",
            "a sum grows with the batch: divide by the number of items it adds up.",
            _global_sum_of_sums,
        ),
        Mistake(
            "the mean of the sums (divided by the number of ranks)",
            "divide by the number of items, not the number of ranks.",
            _global_mean_of_sums,
        ),
        Mistake(
            "the count of the first rank taken for every rank",
            "the ranks hold different counts: add them up.",
            _global_sum_over_world_size_times_count,
        ),
        Mistake(
            "an integer division",
            "the loss is a real number: divide floats, not integers.",
            _global_integer_division,
        ),
    ),
)

# --- safe_loss_scale -----------------------------------------------------------------------------


def _safe_cases(g):
    gradients = seeded_randn(g, 200) * 10  # (200,) gradients up to about 30: the largest sets the scale at 2^11
    gradients[:20] *= 1e-12  # 20 of them around 1e-11: even at 2^11 some stay below 2^-25
    with_zeros = gradients.clone()
    with_zeros[100:150] = 0.0  # 50 exact zeros: nothing to flush there
    near_limit = torch.tensor([65510.0, 1e-3, -2e-7, 5e-9])  # 65,510 fits fp16 (it rounds to 65,504)
    round_up = torch.tensor([40000.0, 2.0**-24 * 0.75, -(2.0**-24) * 0.6, 2.0**-26])  # above 2^-25: up to 2^-24
    return [
        Case("200 gradients, the largest about 30, 20 of them near 1e-11", (gradients,)),
        Case("the same gradients, 50 of them exactly 0", (with_zeros,)),
        Case("a gradient of 65,510, which fp16 stores as 65,504", (near_limit,)),
        Case("gradients of 0.75 x 2^-24, -0.6 x 2^-24 and 2^-26 beside a 40,000", (round_up,)),
        Case("a gradient matrix (3, 4) of large values", (seeded_randn(g, 3, 4) * 300,)),
        Case("a largest gradient of 1e-3 beside gradients of 1e-9 and 2e-9", (torch.tensor([1e-3, 1e-9, 2e-9, 5e-4]),)),
        Case("a gradient of 100,000, inf in fp16 before any scale", (torch.tensor([1e5, 1.0]),)),
    ]


def _with_scale(gradients, scale):
    scaled = (gradients.double() * scale).half()
    nonzero = gradients != 0
    return scale, float(((scaled == 0) & nonzero).sum()) / max(int(nonzero.sum()), 1)


def _exponent_for(largest, limit):
    return max(-24, min(40, math.floor(math.log2(limit / largest)))) if largest else 40


def _safe_limit_65504(gradients):
    return _with_scale(gradients, 2.0 ** _exponent_for(float(gradients.abs().max()), 65504.0))


def _safe_smallest_gradient(gradients):
    smallest = float(gradients[gradients != 0].abs().min())
    return _with_scale(gradients, 2.0 ** _exponent_for(smallest, 65519.0))


def _safe_one_too_high(gradients):
    scale, _ = safe_loss_scale(gradients)
    return _with_scale(gradients, scale * 2)


def _safe_cast_before_scaling(gradients):
    halves = gradients.half()  # (...) fp16 first: 1e-9 is 0 and 1e5 is inf before any scale
    k = 40
    while k > -24 and bool(torch.isinf(halves.abs().max() * 2.0**k)):
        k -= 1
    nonzero = gradients != 0
    flushed = ((halves * 2.0**k) == 0) & nonzero
    return 2.0**k, float(flushed.sum()) / max(int(nonzero.sum()), 1)


def _safe_exponent_returned(gradients):
    scale, fraction = safe_loss_scale(gradients)
    return float(math.log2(scale)), fraction


def _safe_flush_below_2_24(gradients):
    scale, _ = safe_loss_scale(gradients)
    nonzero = gradients != 0
    flushed = (gradients.double().abs() * scale < 2.0**-24) & nonzero
    return scale, float(flushed.sum()) / max(int(nonzero.sum()), 1)


def _safe_fraction_of_all_entries(gradients):
    scale, _ = safe_loss_scale(gradients)
    flushed = ((gradients.double() * scale).half() == 0) & (gradients != 0)
    return scale, float(flushed.sum()) / gradients.numel()


def _safe_explain(case, value, expected):
    """About a wrong scale: what fp16 makes of the largest gradient at it. About a wrong fraction: which of the
    case's gradients sit where fp16 rounds up rather than to 0, and how many are 0 already."""
    (gradients,) = case.args
    right_scale, right_fraction = safe_loss_scale(gradients)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    if expected == right_scale and expected != right_fraction and value > 0:
        largest = float(gradients.abs().max())
        stored, doubled = (float(torch.tensor(largest * s, dtype=torch.float64).half()) for s in (value, 2 * value))
        if math.isinf(stored):
            return (
                f"At your scale {value:g} the largest gradient, {largest:.6g}, is {largest * value:.6g}: inf in fp16."
            )
        if math.isfinite(doubled):
            return f"At twice your scale the largest gradient, {largest:.6g}, is still finite in fp16 ({doubled:.6g})."
        return None
    if expected == right_fraction and expected != right_scale:
        scaled = gradients.double().abs() * right_scale  # (...) what fp16 is asked to store
        rounded_up = int(((scaled > 2.0**-25) & (scaled < 2.0**-24)).sum())
        subnormal = int(((scaled >= 2.0**-24) & (scaled < 2.0**-14)).sum())
        zeros = int((gradients == 0).sum())
        facts = []
        if value > 1:
            return "A share of the non-zero gradients lies between 0 and 1."
        if math.isclose(value, 1 - expected, abs_tol=1e-9):
            return "That is the share fp16 keeps; the question asks for the share it stores as 0."
        if subnormal:
            facts.append(
                f"{subnormal} scaled gradients are subnormal (2^-24 to 2^-14): fp16 keeps them, with fewer bits"
            )
        if rounded_up:
            facts.append(f"{rounded_up} scaled gradients lie between 2^-25 and 2^-24, where fp16 rounds up to 2^-24")
        if zeros:
            facts.append(f"{zeros} gradients are exactly 0, so fp16 cannot lose them")
        return f"In this case {' and '.join(facts)}." if facts else None
    return None


SAFE_LOSS_SCALE = Exercise(
    name="safe_loss_scale",
    reference=safe_loss_scale,
    prompt="your function receives `gradients`, an fp32 tensor of true (unscaled, finite) gradients; it returns "
    "(scale, fraction) as two Python floats: `scale` the largest power of two 2^k (k an int from -24 to 40) such "
    "that no gradient times `scale`, stored in fp16, becomes inf; `fraction` the share of the non-zero gradients "
    "that fp16 still stores as 0 at that scale (0.0 when every gradient is 0).",
    start="let fp16 itself decide: store the scaled values with `.half()` and look for inf and for 0.",
    make_cases=_safe_cases,
    outputs=("scale", "fraction"),
    notebook="12",
    explain=_safe_explain,
    mistakes=(
        Mistake(
            "65,504 taken as the point where fp16 overflows",
            "65,504 is fp16's largest number, but everything below 65,520 rounds down to it: only from 65,520 up "
            "does a value become inf. Let `.half()` do the rounding.",
            _safe_limit_65504,
        ),
        Mistake(
            "the scale chosen for the smallest gradient, not the largest",
            "the largest gradient is the one that overflows first: the scale must let it fit.",
            _safe_smallest_gradient,
        ),
        Mistake(
            "a scale twice too large (the exponent rounded up)",
            "at that scale the largest gradient overflows: round the exponent down.",
            _safe_one_too_high,
        ),
        Mistake(
            "the gradients cast to fp16 before they are scaled",
            "a gradient of 1e-9 is 0 in fp16 and one of 100,000 is inf, before any scale can save them: scale in "
            "fp32 (or float64) first, then store the product with `.half()`.",
            _safe_cast_before_scaling,
        ),
        Mistake(
            "the exponent k returned instead of the scale 2^k",
            "return the scale itself, 2.0 ** k.",
            _safe_exponent_returned,
        ),
        Mistake(
            "everything below 2^-24 counted as flushed to 0",
            "fp16 rounds to the nearest: a value above 2^-25 becomes 2^-24, its smallest subnormal; only values at "
            "or below 2^-25 become 0. Cast with `.half()` and count the zeros.",
            _safe_flush_below_2_24,
        ),
        Mistake(
            "the flushed share counted over every entry, zeros included",
            "a gradient that is 0 already is not lost: divide by the number of non-zero gradients.",
            _safe_fraction_of_all_entries,
        ),
    ),
)

# --- average_gradients ---------------------------------------------------------------------------


def _average_cases(g):
    return [
        Case("2 replicas, a gradient of 5 numbers", (seeded_randn(g, 2, 5),), ("batched",)),
        Case("4 replicas, a weight gradient of shape (3, 2)", (seeded_randn(g, 4, 3, 2),), ("batched",)),
        Case("3 replicas, a gradient of 4 numbers", (seeded_randn(g, 3, 4),), ("batched",)),
    ]


def _average_sum_only(replica_gradients):
    return replica_gradients.sum(dim=0, keepdim=True).expand_as(replica_gradients).clone()


def _average_wrong_axis(replica_gradients):
    flat = replica_gradients.flatten(1)
    return flat.mean(dim=1, keepdim=True).expand_as(flat).reshape(replica_gradients.shape).clone()


def _average_not_shared(replica_gradients):
    return replica_gradients.clone()


def _average_explain(case, value, expected):
    """Which other reduction of the replicas the learner's rows are."""
    (gradients,) = case.args
    world = gradients.shape[0]
    return equals_one_of(
        value,
        expected,
        (
            (
                "replica 0's gradient on every row: average over the replicas, axis 0",
                lambda: gradients[:1].expand_as(gradients),
            ),
            (
                "the median of the replicas: DDP averages them, `.mean(dim=0, keepdim=True)`",
                lambda: gradients.median(dim=0, keepdim=True).values.expand_as(gradients),
            ),
            (
                "each replica's own numbers averaged (over its last axis): average over the replicas, axis 0",
                lambda: gradients.mean(dim=-1, keepdim=True).expand_as(gradients),
            ),
            (
                f"the sum divided by world_size - 1 = {world - 1}: divide by world_size = {world}",
                lambda: (gradients.sum(dim=0, keepdim=True) / (world - 1)).expand_as(gradients),
            ),
        ),
    )


AVERAGE_GRADIENTS = Exercise(
    name="average_gradients",
    reference=average_gradients,
    prompt="your function receives `replica_gradients` (world_size, ...), row r the gradient replica r computed "
    "on its own rows; it returns a tensor of the same shape that every replica holds after DDP's all-reduce: "
    "every row the mean of the rows.",
    start="`replica_gradients.sum(dim=0, keepdim=True)` is what `dist.all_reduce` (a sum) leaves on each replica.",
    make_cases=_average_cases,
    explain=_average_explain,
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
    overflow = seeded_randn(g, 6) * 1024
    overflow[2] = float("inf")
    undefined = seeded_randn(g, 6) * 1024
    undefined[4] = float("nan")  # inf - inf in the backward pass: no inf anywhere, and still no step
    return [
        Case("finite gradients, scale 1024, 0 good steps of 3", (seeded_randn(g, 6) * 1024, 1024.0, 0, 3)),
        Case(
            "finite gradients, the third good step in a row of 3: the scale doubles",
            (seeded_randn(g, 5) * 256, 256.0, 2, 3),
        ),
        Case("an inf among the gradients: the step is skipped and the scale halves", (overflow, 65536.0, 1, 3)),
        Case("a NaN among the gradients, no inf: the step is skipped and the scale halves", (undefined, 65536.0, 1, 3)),
        Case("finite gradients of shape (2, 3), scale 8, growth every 2 steps", (seeded_randn(g, 2, 3) * 8, 8.0, 0, 2)),
    ]


def _scaler_multiplied(scaled_gradients, scale, good_steps, growth_interval):
    _, new_scale, new_good = scaler_update(scaled_gradients, scale, good_steps, growth_interval)
    return scaled_gradients * scale, new_scale, new_good


def _scaler_no_backoff(scaled_gradients, scale, good_steps, growth_interval):
    unscaled, new_scale, new_good = scaler_update(scaled_gradients, scale, good_steps, growth_interval)
    if not torch.isfinite(unscaled).all():
        new_scale = torch.tensor(float(scale))
    return unscaled, new_scale, new_good


def _scaler_inf_only(scaled_gradients, scale, good_steps, growth_interval):
    unscaled = scaled_gradients / scale
    if torch.isinf(unscaled).any():  # a NaN is neither inf nor caught
        return unscaled, torch.tensor(scale * 0.5), torch.tensor(0)
    if good_steps + 1 == growth_interval:
        return unscaled, torch.tensor(scale * 2.0), torch.tensor(0)
    return unscaled, torch.tensor(float(scale)), torch.tensor(good_steps + 1)


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
            "an inf caught, a NaN not",
            "a NaN (from inf - inf or 0 * inf in the backward pass) is an overflow too: test with "
            "`torch.isfinite(...).all()`, which is False for inf and NaN alike, not with `isinf`.",
            _scaler_inf_only,
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
