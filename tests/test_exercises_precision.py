"""The exercises of notebook 12: global_mean_loss and safe_loss_scale accept learner code written differently
from the package and answer realistic wrong answers that the catalogue does not list with a message that names
what fails; the earlier average_gradients and scaler_update stay checkable by name (the generic checks of every
exercise, the registry, verdicts, hints and solutions, are in test_exercises.py)."""

import math

import pytest
import torch

from bertcourse import precision
from bertcourse.distributed import global_mean_loss
from bertcourse.exercises import EXERCISES, check, registry

# --- the exercises notebook 12 asked for before: still checkable by name -------------------------


def average_with_a_loop(replica_gradients):
    mean = sum(replica_gradients[r] for r in range(len(replica_gradients))) / len(replica_gradients)
    return torch.stack([mean] * len(replica_gradients))


def scaler_written_out(scaled_gradients, scale, good_steps, growth_interval):
    unscaled = scaled_gradients / scale
    if torch.isinf(unscaled).any() or torch.isnan(unscaled).any():
        return unscaled, torch.tensor(scale / 2), torch.tensor(0)
    good_steps += 1
    if good_steps == growth_interval:
        return unscaled, torch.tensor(scale * 2), torch.tensor(0)
    return unscaled, torch.tensor(float(scale)), torch.tensor(good_steps)


# --- the new exercises: right answers written differently ----------------------------------------


def global_with_a_loop(sums, counts):
    total, items = torch.zeros((), dtype=sums.dtype), 0
    for rank_sum, rank_count in zip(sums, counts, strict=True):
        total, items = total + rank_sum, items + int(rank_count)
    return total / items


def global_weighted_means(sums, counts):
    weights = counts.to(sums.dtype) / counts.sum()  # each rank's share of the items
    means = torch.where(counts > 0, sums / counts.clamp(min=1), 0.0)
    return (weights * means).sum()


def safe_by_logarithm(gradients):
    largest = float(gradients.abs().max())
    k = 40 if largest == 0 else max(-24, min(40, math.floor(math.log2(65519.99 / largest))))
    scaled = (gradients.double() * 2.0**k).half()
    nonzero = gradients != 0
    return 2.0**k, float(((scaled == 0) & nonzero).sum()) / max(int(nonzero.sum()), 1)


def safe_from_the_top_in_fp32(gradients):
    k = 40
    while k > -24 and not torch.isfinite((gradients * 2.0**k).half()).all():
        k -= 1
    stored = (gradients * 2.0**k).half()
    lost, kept = int(((stored == 0) & (gradients != 0)).sum()), int((gradients != 0).sum())
    return 2.0**k, lost / kept if kept else 0.0


CORRECT = [
    ("average_gradients", average_with_a_loop),
    ("scaler_update", scaler_written_out),
    ("global_mean_loss", global_with_a_loop),
    ("global_mean_loss", global_weighted_means),
    ("safe_loss_scale", safe_by_logarithm),
    ("safe_loss_scale", safe_from_the_top_in_fp32),
]


@pytest.mark.parametrize(("name", "fn"), CORRECT, ids=[fn.__name__ for _, fn in CORRECT])
def test_learner_code_written_differently_is_accepted(name, fn):
    result = check(name, fn)
    assert result.status == "correct", result.message


# --- realistic wrong answers the catalogue does not list -----------------------------------------


def global_means_clamped(sums, counts):
    return (sums / counts.clamp(min=1)).mean()


def global_over_the_largest_count(sums, counts):
    return sums.sum() / counts.max()


def global_means_summed(sums, counts):
    return (sums / counts).nansum()


def global_one_too_many(sums, counts):
    return sums.sum() / (counts.sum() + 1)


def global_as_a_python_float(sums, counts):
    return float(sums.sum() / counts.sum())


def global_median_of_means(sums, counts):
    return (sums / counts.clamp(min=1)).median()


def safe_flush_below_the_smallest_normal(gradients):
    scale, _ = safe_by_logarithm(gradients)
    nonzero = gradients != 0
    return scale, float(((gradients.double().abs() * scale < 2**-14) & nonzero).sum()) / int(nonzero.sum())


def safe_share_in_percent(gradients):
    scale, share = safe_by_logarithm(gradients)
    return scale, 100 * share


def safe_as_tensors(gradients):
    scale, share = safe_by_logarithm(gradients)
    return torch.tensor(scale), torch.tensor(share)


def safe_share_kept(gradients):
    scale, share = safe_by_logarithm(gradients)
    return scale, 1 - share


def safe_scale_from_the_mean(gradients):
    k = max(-24, min(40, math.floor(math.log2(65519 / float(gradients.abs().mean())))))
    scaled = (gradients.double() * 2.0**k).half()
    nonzero = gradients != 0
    return 2.0**k, float(((scaled == 0) & nonzero).sum()) / int(nonzero.sum())


def safe_scale_halved(gradients):
    scale, _ = safe_by_logarithm(gradients)
    scaled = (gradients.double() * scale / 2).half()
    nonzero = gradients != 0
    return scale / 2, float(((scaled == 0) & nonzero).sum()) / int(nonzero.sum())


WRONG = [
    ("global_mean_loss", global_means_clamped, "over different numbers of items"),
    ("global_mean_loss", global_over_the_largest_count, "as many items each"),
    ("global_mean_loss", global_means_summed, "as many items each"),
    ("global_mean_loss", global_one_too_many, "Here the ranks hold [6, 6] items"),
    ("global_mean_loss", global_as_a_python_float, "torch.Tensor"),
    ("global_mean_loss", global_median_of_means, "Here the ranks hold"),
    ("safe_loss_scale", safe_flush_below_the_smallest_normal, "are subnormal (2^-24 to 2^-14): fp16 keeps them"),
    ("safe_loss_scale", safe_share_in_percent, "A share of the non-zero gradients lies between 0 and 1"),
    ("safe_loss_scale", safe_as_tensors, "return a Python float"),
    ("safe_loss_scale", safe_share_kept, "That is the share fp16 keeps"),
    ("safe_loss_scale", safe_scale_from_the_mean, "inf in fp16"),
    ("safe_loss_scale", safe_scale_halved, "At twice your scale the largest gradient"),
]
MISLEADING = ("transposed", "may attend", "batch axis", "padding")


@pytest.mark.parametrize(("name", "fn", "words"), WRONG, ids=[fn.__name__ for _, fn, _ in WRONG])
def test_an_unforeseen_wrong_answer_gets_a_message_that_names_what_fails(name, fn, words):
    result = check(name, fn)
    assert result.status == "wrong" and result.mistake is None, result.message
    assert words in result.message, result.message
    assert not any(word in result.message for word in MISLEADING), result.message


def test_notebook_12_asks_for_the_new_exercises_and_the_old_names_still_check():
    assert registry.NOTEBOOK_ASKS["12"] == ("global_mean_loss", "safe_loss_scale")
    assert {"average_gradients", "scaler_update"} <= registry.RETIRED
    assert registry.RETIRED.isdisjoint(registry.NOTEBOOK_ASKS["12"])
    for name in ("average_gradients", "scaler_update", *registry.NOTEBOOK_ASKS["12"]):
        assert EXERCISES[name].notebook == "12"  # each passes with learner code (above)
    for name in registry.NOTEBOOK_ASKS["12"]:
        assert sum(n == name for n, *_ in WRONG) >= 6 and sum(n == name for n, _ in CORRECT) >= 2


def test_the_cases_vary_one_property_at_a_time():
    first, unequal, _, empty_rank, one_rank = (case.args for case in EXERCISES["global_mean_loss"].cases())
    assert len(set(first[1].tolist())) == 1 and len(set(unequal[1].tolist())) == 2  # equal counts, then unequal
    assert first[0].shape == unequal[0].shape  # the same 2 ranks
    assert int(empty_rank[1].min()) == 0 and len(one_rank[0]) == 1
    gradients, with_zeros, *_ = (case.args[0] for case in EXERCISES["safe_loss_scale"].cases())
    differ = gradients != with_zeros
    assert bool((with_zeros[differ] == 0).all()) and int(differ.sum()) == 50  # only the zeros added
    assert precision.safe_loss_scale(gradients)[0] == precision.safe_loss_scale(with_zeros)[0]


# --- the references ------------------------------------------------------------------------------


def test_the_scaler_update_agrees_with_the_loss_scaler():
    scaler = precision.LossScaler(init_scale=1024.0, growth_interval=2)
    scale, good = 1024.0, 0
    for gradient in (torch.ones(3), torch.tensor([1.0, float("inf"), 0.0]), torch.ones(3), torch.ones(3)):
        model = torch.nn.Linear(3, 1, bias=False)
        model.weight.grad = (gradient * scaler.get_scale())[None].clone()
        scaler.unscale_(torch.optim.SGD(model.parameters(), lr=0.0))
        scaler.update()
        _, new_scale, new_good = precision.scaler_update(gradient * scale, scale, good, 2)
        scale, good = float(new_scale), int(new_good)
        assert (scale, good) == (scaler.get_scale(), scaler.good_steps)


def test_safe_loss_scale_is_what_a_dynamic_scaler_settles_below():
    """The scale found in one go from the gradients is the largest at which a scaled backward stays finite."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(8, 4)
    loss = layer(torch.randn(16, 8) * 100).square().mean()
    (gradients,) = torch.autograd.grad(loss, [layer.weight])
    scale, _ = precision.safe_loss_scale(gradients)
    assert torch.isfinite((gradients.double() * scale).half()).all()
    assert not torch.isfinite((gradients.double() * scale * 2).half()).all()


def test_casting_to_fp16_before_scaling_is_named():
    """The notebook's solution with the cast moved before the scale: right whenever the largest gradient is
    large, wrong on a largest gradient of 1e-3 (1e-9 is 0 in fp16 already) and on 100,000 (inf already)."""

    def cast_then_scale(gradients):
        halves = gradients.half()
        k = 40
        while k > -24 and torch.isinf(halves.abs().max() * 2.0**k):
            k -= 1
        nonzero = gradients != 0
        flushed = ((halves * 2.0**k) == 0) & nonzero
        return 2.0**k, float(flushed.sum()) / int(nonzero.sum()) if bool(nonzero.any()) else 0.0

    assert cast_then_scale(torch.tensor([1e-3, 1e-9, 2e-9, 5e-4])) == (2.0**25, 0.5)
    assert precision.safe_loss_scale(torch.tensor([1e-3, 1e-9, 2e-9, 5e-4])) == (2.0**25, 0.0)
    assert precision.safe_loss_scale(torch.tensor([1e5, 1.0])) == (0.5, 0.0)
    result = check("safe_loss_scale", cast_then_scale)
    assert result.status == "wrong" and result.mistake == "the gradients cast to fp16 before they are scaled"


def test_bad_input_is_explained():
    with pytest.raises(TypeError, match=r"`replica_gradients` must hold floating-point numbers"):
        precision.average_gradients(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"`good_steps` must be an int from 0 to growth_interval - 1, got 5"):
        precision.scaler_update(torch.ones(2), 8.0, 5, 3)
    with pytest.raises(ValueError, match=r"`scale` must be a positive number, got 0"):
        precision.scaler_update(torch.ones(2), 0, 0, 3)
    with pytest.raises(TypeError, match=r"`counts` must be a tensor of integers"):
        global_mean_loss(torch.ones(2), torch.ones(2))
    with pytest.raises(ValueError, match=r"`counts` must have the shape of `sums` \(2,\): one per rank"):
        global_mean_loss(torch.ones(2), torch.ones(3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"`counts` must not be negative, got \[2, -1\]"):
        global_mean_loss(torch.ones(2), torch.tensor([2, -1]))
    with pytest.raises(TypeError, match=r"`gradients` must hold floating-point numbers"):
        precision.safe_loss_scale(torch.ones(3, dtype=torch.long))


def test_notebook_12_asks_for_them_unsolved_and_its_collapsed_solutions_pass():
    from pathlib import Path

    import torch.nn.functional as F
    from test_exercises_notebooks import exercises

    import bertcourse as bc

    path = Path(__file__).resolve().parent.parent / "notebooks" / "12_precision_and_scale.ipynb"
    found = exercises(path)
    assert tuple(name for name, *_ in found) == registry.NOTEBOOK_ASKS["12"]
    for name, function, skeleton, check_cell, solution in found:
        assert skeleton.source.startswith(f"def {function}(") and "raise NotImplementedError" in skeleton.source
        (output,) = check_cell.outputs
        assert output["data"]["text/plain"].startswith("⏳ Not attempted yet"), name
        namespace = {"math": math, "torch": torch, "F": F, "bc": bc}
        exec(solution, namespace)
        result = check(name, namespace[function])
        assert result.passed, (name, result.message)


def test_a_scaler_update_that_catches_inf_but_not_nan_is_named():
    def inf_only(scaled_gradients, scale, good_steps, growth_interval):
        unscaled = scaled_gradients / scale
        if torch.isinf(unscaled).any():
            return unscaled, torch.tensor(scale / 2, dtype=torch.float32), torch.tensor(0)
        if good_steps + 1 == growth_interval:
            return unscaled, torch.tensor(scale * 2.0, dtype=torch.float32), torch.tensor(0)
        return unscaled, torch.tensor(float(scale), dtype=torch.float32), torch.tensor(good_steps + 1)

    def nan_or_inf(scaled_gradients, scale, good_steps, growth_interval):
        unscaled = scaled_gradients / scale
        if bool(torch.isnan(unscaled).any() | torch.isinf(unscaled).any()):
            return unscaled, torch.tensor(scale / 2, dtype=torch.float32), torch.tensor(0)
        if good_steps + 1 == growth_interval:
            return unscaled, torch.tensor(scale * 2.0, dtype=torch.float32), torch.tensor(0)
        return unscaled, torch.tensor(float(scale), dtype=torch.float32), torch.tensor(good_steps + 1)

    assert "an inf caught, a NaN not" in check("scaler_update", inf_only).message
    assert check("scaler_update", nan_or_inf).status == "correct"
