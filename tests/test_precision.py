"""Number formats, what autocast runs in which dtype, and a loss scaler by hand that steps as GradScaler does."""

from __future__ import annotations

import pytest
import torch

import bertcourse as bc
from bertcourse.precision import (
    LossScaler,
    autocast_dtypes,
    format_facts,
    precision_dtype,
    round_trip,
    training_step_cost,
)


def test_the_three_formats_in_numbers():
    fp16, bf16, fp32 = (format_facts(d) for d in (torch.float16, torch.bfloat16, torch.float32))
    assert fp16["max"] == 65504 and (fp16["exponent_bits"], fp16["mantissa_bits"]) == (5, 10)
    assert (bf16["exponent_bits"], bf16["mantissa_bits"]) == (8, 7) and bf16["max"] == pytest.approx(fp32["max"], 1e-2)
    assert fp16["smallest_subnormal"] == 2.0**-24
    assert round_trip([70000.0], torch.float16) == [float("inf")]  # past 65,504
    small_gradient = 1e-8
    assert round_trip([small_gradient], torch.float16) == [0.0]  # below 2^-24: gone
    assert round_trip([small_gradient], torch.bfloat16)[0] == pytest.approx(small_gradient, rel=1e-2)  # kept
    assert round_trip([1 + 2**-8], torch.bfloat16) == [1.0] and round_trip([1 + 2**-7], torch.bfloat16) == [1 + 2**-7]


def test_bad_names_and_dtypes_are_explained():
    assert precision_dtype("bf16") is torch.bfloat16
    with pytest.raises(ValueError, match=r"`precision` must be one of \['bf16', 'fp16', 'fp32'\], got 'fp8'"):
        precision_dtype("fp8")
    with pytest.raises(TypeError, match=r"`dtype` must be a floating-point torch.dtype"):
        format_facts(torch.int64)
    with pytest.raises(TypeError, match=r"`run` must be a function of no arguments"):
        autocast_dtypes(torch.zeros(2))


def test_autocast_runs_the_matrix_products_of_our_model_in_bf16_and_keeps_the_weights_fp32():
    config = bc.BertConfig(
        vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64
    )
    model = bc.BertModel(config).eval()
    ids = torch.randint(0, 50, (2, 7))
    plain = autocast_dtypes(lambda: model(ids), dtype=None)
    mixed = autocast_dtypes(lambda: model(ids, output_attentions=True), dtype=torch.bfloat16)
    assert all(dtypes == [torch.float32] for dtypes in plain.values())
    assert torch.bfloat16 in mixed["addmm"] and torch.bfloat16 in mixed["bmm"]  # linear layers, QK^T and AV
    assert mixed["native_layer_norm"] == [torch.float32]  # CPU autocast keeps LayerNorm in fp32
    assert all(p.dtype == torch.float32 for p in model.parameters())


def steps_of(scaler_factory, losses_scale, inject_inf_at):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = scaler_factory()
    x = torch.randn(8, 4)
    scales, taken = [], []
    for step in range(7):
        optimizer.zero_grad()
        loss = model(x).square().mean() * losses_scale
        scaler.scale(loss).backward()
        if step in inject_inf_at:
            model.weight.grad[0, 0] = float("inf")  # an overflow, as fp16 would make
        before = model.weight.detach().clone()
        scaler.step(optimizer)
        taken.append(not torch.equal(before, model.weight.detach()))
        scaler.update()
        scales.append(scaler.get_scale())
    return scales, taken, model.weight.detach()


def test_the_scaler_by_hand_takes_and_skips_the_same_steps_as_grad_scaler():
    ours = steps_of(lambda: LossScaler(init_scale=2.0**10, growth_interval=2), 1.0, {1, 4})
    theirs = steps_of(lambda: torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=2), 1.0, {1, 4})
    assert ours[0] == theirs[0] == [2.0**10, 2.0**9, 2.0**9, 2.0**10, 2.0**9, 2.0**9, 2.0**10]
    assert ours[1] == theirs[1] == [True, False, True, True, False, True, True]  # the overflowing steps are skipped
    torch.testing.assert_close(ours[2], theirs[2], atol=0, rtol=0)


def test_bad_scaler_settings_are_explained():
    with pytest.raises(ValueError, match=r"`backoff_factor` must be between 0 and 1"):
        LossScaler(backoff_factor=2)
    with pytest.raises(TypeError, match=r"`growth_interval` must be a positive int, got bool True"):
        LossScaler(growth_interval=True)


def test_a_training_step_is_measured_in_fp32_and_bf16_and_bf16_takes_less_memory():
    from bertcourse.distributed import make_dataset, tiny_config

    torch.manual_seed(0)
    model = bc.BertForPreTraining(tiny_config())
    batch = make_dataset(rows=8)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    cost = {name: training_step_cost(model, batch, name, repeats=1) for name in ("fp32", "bf16")}
    assert all(figures["seconds"] > 0 for figures in cost.values())
    assert cost["bf16"]["peak_bytes"] < cost["fp32"]["peak_bytes"]  # bf16 activations take half the bytes
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())  # learning rate 0
    with pytest.raises(ValueError, match=r"`precision` must be one of"):
        training_step_cost(model, batch, "float16")
