"""The exercises of notebook 12: learner code written differently from the package is judged as the package's
(the generic checks of every exercise, the registry, verdicts, hints and solutions, are in test_exercises.py)."""

import pytest
import torch

from bertcourse import precision
from bertcourse.exercises import check


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


@pytest.mark.parametrize(
    ("name", "fn"), [("average_gradients", average_with_a_loop), ("scaler_update", scaler_written_out)]
)
def test_learner_code_written_differently_is_accepted(name, fn):
    assert check(name, fn).status == "correct"


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


def test_bad_input_is_explained():
    with pytest.raises(TypeError, match=r"`replica_gradients` must hold floating-point numbers"):
        precision.average_gradients(torch.ones(2, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"`good_steps` must be an int from 0 to growth_interval - 1, got 5"):
        precision.scaler_update(torch.ones(2), 8.0, 5, 3)
    with pytest.raises(ValueError, match=r"`scale` must be a positive number, got 0"):
        precision.scaler_update(torch.ones(2), 0, 0, 3)
