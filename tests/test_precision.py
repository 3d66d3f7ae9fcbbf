"""Number formats, what autocast runs in which dtype, fp16's fates for a model's gradients, real fp16 training
with and without a scaler, and a loss scaler by hand that steps as GradScaler does, to the bit, for any scale."""

from __future__ import annotations

import pytest
import torch

import bertcourse as bc
from bertcourse.distributed import demo_config, make_dataset
from bertcourse.distributed.data import rank_batch
from bertcourse.precision import (
    LossScaler,
    autocast_dtypes,
    flat_gradients,
    format_facts,
    format_fates,
    neighbours,
    precision_dtype,
    round_trip,
    safe_loss_scale,
    train_in_precision,
    training_step_cost,
)
from bertcourse.training import make_optimizer


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
    assert mixed["native_layer_norm"] == [torch.float32]  # every LayerNorm of the encoder reads an fp32 sum
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_cpu_autocast_runs_a_layer_norm_in_the_dtype_it_receives_and_the_loss_in_fp32():
    norm = torch.nn.LayerNorm(8)
    x = torch.randn(2, 8)
    assert autocast_dtypes(lambda: norm(x.bfloat16()))["native_layer_norm"] == [torch.bfloat16]  # not cast up
    assert autocast_dtypes(lambda: norm(x))["native_layer_norm"] == [torch.float32]
    torch.manual_seed(0)
    model = bc.BertForPreTraining(demo_config()).eval()
    seen = autocast_dtypes(lambda: model(**make_dataset(rows=2)), "cpu", torch.bfloat16)
    assert torch.bfloat16 in seen["native_layer_norm"]  # the MLM head's LayerNorm reads a bf16 GELU
    assert seen["_log_softmax"] == [torch.float32] and seen["nll_loss_forward"] == [torch.float32]


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


def unscaled_gradients(scaler, steps=6):
    """The gradients each step's optimizer sees, after the scaler unscaled them (no inf: every step is taken)."""
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(32, 16)
    seen = []
    for _ in range(steps):
        optimizer.zero_grad()
        scaler.scale(model(x).sin().square().mean()).backward()
        scaler.unscale_(optimizer)
        seen.append(torch.cat([p.grad.flatten().clone() for p in model.parameters()]))
        scaler.step(optimizer)
        scaler.update()
    return seen, model.weight.detach(), scaler.get_scale()


@pytest.mark.parametrize("init_scale", [1000.0, 0.1, 2.0**16, 3.0])
def test_the_scaler_by_hand_equals_grad_scaler_to_the_bit_for_any_scale(init_scale):
    ours = unscaled_gradients(LossScaler(init_scale=init_scale, growth_interval=2))
    theirs = unscaled_gradients(torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=2))
    assert all(torch.equal(a, b) for a, b in zip(ours[0], theirs[0], strict=True))
    assert torch.equal(ours[1], theirs[1]) and ours[2] == theirs[2]
    assert LossScaler(init_scale=init_scale).get_scale() == torch.tensor(init_scale).item()  # the fp32 scale


def test_dividing_by_a_python_float_is_not_grad_scalers_arithmetic():
    """The control of the test above: the division LossScaler used to do rounds differently at a scale of 1000."""
    grads = torch.randn(10_000, generator=torch.Generator().manual_seed(0)) * 1000
    divided = grads / 1000.0
    multiplied = grads * torch.tensor(1000.0).double().reciprocal().float()
    assert not torch.equal(divided, multiplied)
    assert torch.equal(grads / 1024.0, grads * torch.tensor(1024.0).double().reciprocal().float())  # 2^k: same


def test_the_scaler_skips_a_nan_step_as_grad_scaler_does():
    ours = steps_of(lambda: LossScaler(init_scale=1000.0, growth_interval=2), 1.0, set())
    for scaler in (LossScaler(init_scale=1000.0), torch.amp.GradScaler("cpu", init_scale=1000.0)):
        model = torch.nn.Linear(2, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler.scale(model(torch.ones(1, 2)).sum()).backward()
        model.bias.grad[0] = float("nan")
        before = model.weight.detach().clone()
        scaler.step(optimizer)
        scaler.update()
        assert torch.equal(before, model.weight) and scaler.get_scale() == 500.0
    assert ours[1] == [True] * 7


def test_bad_scaler_settings_are_explained():
    with pytest.raises(ValueError, match=r"`backoff_factor` must be between 0 and 1"):
        LossScaler(backoff_factor=2)
    with pytest.raises(TypeError, match=r"`growth_interval` must be a positive int, got bool True"):
        LossScaler(growth_interval=True)


def test_a_training_step_is_measured_in_fp32_and_bf16_and_bf16_takes_less_memory():
    from bertcourse.distributed import demo_config, make_dataset

    torch.manual_seed(0)
    model = bc.BertForPreTraining(demo_config())
    batch = make_dataset(rows=8)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    cost = {name: training_step_cost(model, batch, name, repeats=1) for name in ("fp32", "bf16")}
    assert all(figures["seconds"] > 0 for figures in cost.values())
    assert cost["bf16"]["peak_bytes"] < cost["fp32"]["peak_bytes"]  # bf16 activations take half the bytes
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())  # learning rate 0
    with pytest.raises(ValueError, match=r"`precision` must be one of"):
        training_step_cost(model, batch, "float16")


def test_decimal_digits_of_each_format():
    digits = {name: format_facts(precision_dtype(name))["decimal_digits"] for name in ("fp32", "fp16", "bf16")}
    assert digits == pytest.approx({"fp32": 7.22, "fp16": 3.31, "bf16": 2.41}, abs=0.01)


def test_fp16_flushes_at_2_to_the_minus_25_and_rounds_up_above_it():
    assert round_trip([2.0**-25, 2.0**-26, 1e-8], torch.float16) == [0.0, 0.0, 0.0]  # 2^-25 is a tie: to even, 0
    assert round_trip([3e-8, 2.0**-25 * 1.01], torch.float16) == [2.0**-24, 2.0**-24]  # rounded *up*
    subnormal, normal = round_trip([1.1e-7, 1.1e-4], torch.float16)
    assert abs(subnormal - 1.1e-7) / 1.1e-7 > 0.05 and abs(normal - 1.1e-4) / 1.1e-4 < 2**-11  # subnormals lose bits


def test_neighbours_say_what_each_format_keeps():
    tiny = neighbours(3e-8, torch.float16)
    assert (tiny["below"], tiny["stored"], tiny["above"], tiny["fate"]) == (0.0, 2.0**-24, 2.0**-24, "subnormal")
    assert tiny["relative_error"] == pytest.approx(abs(2.0**-24 - 3e-8) / 3e-8)
    big = neighbours(70000.0, torch.float16)
    assert (big["below"], big["stored"], big["fate"]) == (65504.0, float("inf"), "overflow")
    assert neighbours(65519.0, torch.float16)["stored"] == 65504.0 and neighbours(65520.0, torch.float16)["fate"] == (
        "overflow"
    )
    assert neighbours(1e-8, torch.float16)["fate"] == "flushed to 0"
    one = neighbours(1 + 2**-8, torch.bfloat16)
    assert (one["below"], one["stored"], one["above"]) == (1.0, 1.0, 1 + 2**-7)
    exact = neighbours(0.5, torch.float32)
    assert exact["below"] == exact["stored"] == exact["above"] == 0.5 and exact["relative_error"] == 0
    assert neighbours(0, torch.float16)["fate"] == "zero"
    with pytest.raises(TypeError, match=r"`value` must be a finite Python number, got float inf"):
        neighbours(float("inf"), torch.float16)


def test_format_fates_count_each_fate_from_the_cast_itself():
    values = torch.tensor([0.0, 1e-9, 3e-8, 1e-6, 1e-3, 1.0, 70000.0, -1e-9])
    fates = format_fates(values, torch.float16)
    assert fates == pytest.approx(
        {"zero": 1 / 8, "flushed to 0": 2 / 8, "subnormal": 2 / 8, "normal": 2 / 8, "overflow": 1 / 8}
    )
    scaled = format_fates(values, torch.float16, scale=2.0**-2)
    assert scaled["overflow"] == 0 and scaled["normal"] == pytest.approx(3 / 8)
    assert format_fates(values, torch.bfloat16) == pytest.approx(
        {"zero": 1 / 8, "flushed to 0": 0, "subnormal": 0, "normal": 7 / 8, "overflow": 0}
    )
    with pytest.raises(ValueError, match=r"`scale` must be a positive number, got 0"):
        format_fates(values, torch.float16, scale=0)


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return bc.BertForPreTraining(demo_config()), make_dataset(rows=32)


def test_flat_gradients_are_the_models_gradients_and_leave_its_grads_alone(tiny):
    model, batch = tiny
    model.zero_grad(set_to_none=True)
    model(**batch).loss.backward()
    expected = torch.cat([p.grad.flatten() for p in model.parameters()])
    marker = [p.grad.clone() for p in model.parameters()]
    assert torch.equal(flat_gradients(model, batch), expected)
    assert all(torch.equal(p.grad, m) for p, m in zip(model.parameters(), marker, strict=True))
    model.zero_grad(set_to_none=True)


def test_real_fp16_autocast_gradients_underflow_and_a_loss_scale_rescues_them(tiny):
    model, batch = tiny
    exact = flat_gradients(model, batch)
    assert 0.004 < format_fates(exact, torch.float16)["flushed to 0"] < 0.02  # this model's gradients at scale 1
    lost = {}
    for scale in (1.0, 2.0**16):
        fp16 = flat_gradients(model, batch, torch.float16, scale)
        lost[scale] = float(((fp16 == 0) & (exact != 0)).double().mean())
    assert lost[1.0] > 0.001 and lost[2.0**16] < lost[1.0] / 10
    assert not torch.isfinite(flat_gradients(model, batch, torch.float16, 2.0**24)).all()  # too large: inf


def test_fp16_training_without_a_scaler_loses_gradients_and_drifts_from_fp32():
    data = make_dataset(seed=0)
    batches = [rank_batch(data, step, 32, 0, 1, seed=0) for step in range(4)]

    def run(dtype, scaler):
        torch.manual_seed(0)
        model = bc.BertForPreTraining(demo_config())
        return model, train_in_precision(model, batches, make_optimizer(model, 1e-3), dtype, scaler)

    reference, fp32 = run(None, None)
    plain, unscaled = run(torch.float16, None)
    scaled_model, scaled = run(torch.float16, LossScaler(init_scale=2.0**16))
    assert min(unscaled["zero_fraction"]) > 2 * max(fp32["zero_fraction"])
    assert max(scaled["zero_fraction"]) < 1.1 * max(fp32["zero_fraction"])
    assert scaled["scale"] == [2.0**16] * 4 and unscaled["scale"] == [None] * 4

    def drift(model):
        return sum(
            float((a - b).detach().abs().sum()) for a, b in zip(model.parameters(), reference.parameters(), strict=True)
        )

    assert drift(plain) > 3 * drift(scaled_model)


def test_safe_loss_scale_is_the_largest_power_of_two_that_fits_fp16():
    assert safe_loss_scale(torch.tensor([1.0, -3.0])) == (2.0**14, 0.0)  # 3 x 2^14 = 49,152 fits, 2^15 does not
    assert safe_loss_scale(torch.tensor([65510.0, 5e-9, -2e-7, 0.0])) == (1.0, 1 / 3)  # 65,510 -> 65,504
    assert safe_loss_scale(torch.tensor([40000.0, 0.75 * 2**-24, 2.0**-26])) == (1.0, 1 / 3)  # 2^-26 alone is lost
    assert safe_loss_scale(torch.zeros(3)) == (2.0**40, 0.0)
    with pytest.raises(ValueError, match=r"`gradients` must be finite"):
        safe_loss_scale(torch.tensor([1.0, float("nan")]))
