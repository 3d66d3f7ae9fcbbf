"""The measurements behind the explorers, tested as plain functions: no ipywidgets, no matplotlib.

Each is checked against the same computation written out by hand (or against PyTorch's
autograd, or Hugging Face's model), for its claims (scaling keeps the softmax soft; masks
zero what they hide), for determinism under a seed, and for clear errors.
"""

import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import bertcourse as bc
from bertcourse.experiments import (
    attention_maps,
    gradient_norms_per_layer,
    masked_attention,
    sinusoid_wavelength,
    softmax_saturation,
)
from bertcourse.pretrained import default_weights_dir


def test_experiments_import_without_ipywidgets_or_matplotlib():
    blocked = ("ipywidgets", "matplotlib", "IPython")
    script = (
        "import sys\n"
        f"for name in {blocked!r}:\n"
        "    sys.modules[name] = None  # any import of it, or of a submodule, raises ImportError\n"
        "import bertcourse.experiments as experiments\n"
        "experiments.softmax_saturation(8)\n"
        "experiments.masked_attention([3, 2])\n"
        "experiments.gradient_norms_per_layer(3, residual=True)\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"


# --- softmax_saturation -----------------------------------------------------------------------------------


def test_softmax_saturation_is_the_softmax_of_one_query_against_random_keys():
    measured = softmax_saturation(64, scaled=True, num_keys=16, seed=5)
    generator = torch.Generator().manual_seed(5)
    q = torch.randn(1, 64, generator=generator)
    k = torch.randn(16, 64, generator=generator)
    scores = (q @ k.T)[0] / 8.0  # sqrt(64)
    assert_close(measured["scores"], scores)
    assert_close(measured["weights"], torch.softmax(scores, dim=-1))
    assert measured["entropy"] == pytest.approx(float(-(measured["weights"] * measured["weights"].log()).sum()))
    assert measured["max_entropy"] == pytest.approx(math.log(16))
    assert measured["score_std"] == pytest.approx(float(scores.std()))
    assert set(measured) == {"scores", "weights", "entropy", "max_entropy", "jacobian_norm", "score_std"}


@pytest.mark.parametrize("scaled", [True, False])
def test_softmax_saturation_jacobian_norm_is_autograds(scaled):
    measured = softmax_saturation(256, scaled=scaled, seed=2)
    jacobian = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, dim=-1), measured["scores"])
    assert measured["jacobian_norm"] == pytest.approx(float(jacobian.norm()), abs=1e-7)


def test_scaling_keeps_the_softmax_soft_and_its_gradient_alive_at_d_k_1024():
    scaled = softmax_saturation(1024, scaled=True)
    unscaled = softmax_saturation(1024, scaled=False)
    assert_close(unscaled["scores"] / 32.0, scaled["scores"])  # the same q and keys, only the scale differs
    assert scaled["entropy"] > 1.0 > 0.01 > unscaled["entropy"]  # unscaled: nearly one-hot
    assert scaled["entropy"] > 100 * unscaled["entropy"]
    assert scaled["jacobian_norm"] > 0.1 > 1e-3 > unscaled["jacobian_norm"]  # unscaled: a vanishing gradient
    assert scaled["score_std"] == pytest.approx(1.0, abs=0.5)
    assert unscaled["score_std"] == pytest.approx(32.0, rel=0.5)


def test_softmax_saturation_is_deterministic_and_leaves_the_global_random_state_alone():
    torch.manual_seed(0)
    state = torch.get_rng_state()
    first = softmax_saturation(32, seed=7)
    assert torch.equal(torch.get_rng_state(), state)
    again = softmax_saturation(32, seed=7)
    assert torch.equal(first["weights"], again["weights"]) and first["entropy"] == again["entropy"]
    assert not torch.equal(softmax_saturation(32, seed=8)["weights"], first["weights"])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"d_k": 0}, ValueError, r"`d_k` must be a positive int, got 0"),
        ({"d_k": 8, "num_keys": 2.0}, TypeError, r"`num_keys` must be a positive int"),
        ({"d_k": 8, "scaled": "yes"}, TypeError, r"`scaled` must be True or False, got str 'yes'"),
        ({"d_k": 8, "seed": -1}, ValueError, r"`seed` must be a non-negative int, got -1"),
    ],
)
def test_softmax_saturation_refuses_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        softmax_saturation(**kwargs)


# --- masked_attention -------------------------------------------------------------------------------------


def masked_attention_written_out(lengths, padding, causal, max_len, d_model=8, seed=0):
    """The same experiment by hand: random vectors, [PAD] vector, projections, masked softmax."""
    generator = torch.Generator().manual_seed(seed)
    vectors = torch.randn(len(lengths), max_len, d_model, generator=generator)
    pad = torch.randn(d_model, generator=generator)
    w_q, w_k, w_v = torch.randn(3, d_model, d_model, generator=generator) / math.sqrt(d_model)
    seq = max(lengths)
    real = torch.arange(seq)[None, :] < torch.tensor(lengths)[:, None]  # (batch, seq)
    x = torch.where(real[..., None], vectors[:, :seq], pad)
    scores = (x @ w_q) @ (x @ w_k).transpose(1, 2) / math.sqrt(d_model)  # (batch, seq, seq)
    allowed = torch.ones(len(lengths), seq, seq, dtype=torch.bool)
    if padding:
        allowed &= real[:, None, :]
    if causal:
        allowed &= torch.ones(seq, seq).tril().bool()
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1), allowed


@pytest.mark.parametrize(("padding", "causal"), [(False, False), (True, False), (False, True), (True, True)])
def test_masked_attention_is_the_masked_softmax_written_out(padding, causal):
    measured = masked_attention([6, 4, 2], padding, causal, max_len=9, seed=3)
    weights, allowed = masked_attention_written_out([6, 4, 2], padding, causal, max_len=9, seed=3)
    assert measured["weights"].shape == measured["mask"].shape == (3, 6, 6)
    assert_close(measured["weights"], weights)
    assert torch.equal(measured["mask"], allowed)
    assert torch.equal(measured["real"], bc.padding_mask([6, 4, 2], 6))


def test_masked_attention_padding_mask_gives_pad_keys_no_weight():
    with_mask = masked_attention([6, 4, 2], padding=True)["weights"]
    without = masked_attention([6, 4, 2], padding=False)["weights"]
    assert (with_mask[1, :, 4:] == 0).all() and (with_mask[2, :, 2:] == 0).all()
    assert (without[1, :, 4:] > 0).all()  # unmasked, real queries look at [PAD]
    assert_close(with_mask.sum(dim=-1), torch.ones(3, 6))


def test_masked_attention_with_a_fixed_max_len_shortens_the_same_sentences():
    long = masked_attention([6, 4, 2], max_len=9)
    shorter_second = masked_attention([6, 3, 2], max_len=9)
    assert torch.equal(long["weights"][0], shorter_second["weights"][0])  # sentence 1 is untouched
    assert not torch.equal(long["weights"][1], shorter_second["weights"][1])
    assert torch.equal(masked_attention([6, 4, 2], max_len=9)["weights"], long["weights"])  # deterministic
    assert not torch.equal(masked_attention([6, 4, 2], max_len=9, seed=1)["weights"], long["weights"])


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((3,), {}, r"`lengths` must be a non-empty list of positive ints, one per sentence, got 3"),
        (([4, 0],), {}, r"`lengths` must be .* got \[4, 0\]"),
        (([],), {}, r"`lengths` must be a non-empty list"),
        (([6, 4],), {"max_len": 5}, r"`lengths` must be at most `max_len`=5, got \[6, 4\]"),
    ],
)
def test_masked_attention_refuses_bad_lengths(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        masked_attention(*args, **kwargs)


# --- sinusoid_wavelength ----------------------------------------------------------------------------------


@pytest.mark.parametrize("dimension", [0, 1, 4, 31, 60, 63])
def test_sinusoid_wavelength_is_the_period_of_the_tables_column(dimension):
    wavelength = sinusoid_wavelength(dimension, 64)
    positions = torch.arange(200, dtype=torch.float64)
    wave = torch.sin if dimension % 2 == 0 else torch.cos
    expected = wave(2 * math.pi * positions / wavelength).float()
    assert_close(bc.sinusoidal_position_encoding(200, 64)[:, dimension], expected, atol=1e-4, rtol=0)


def test_sinusoid_wavelength_runs_from_2_pi_to_almost_2_pi_10000():
    assert sinusoid_wavelength(0, 64) == pytest.approx(2 * math.pi)
    assert sinusoid_wavelength(1, 64) == sinusoid_wavelength(0, 64)  # sin and cos of a pair share it
    assert sinusoid_wavelength(60, 64) == pytest.approx(2 * math.pi * 10000 ** (60 / 64))
    assert 512 / sinusoid_wavelength(60, 64) < 0.02  # BERT's 512 positions: under 2% of one turn


def test_sinusoid_wavelength_refuses_a_dimension_outside_the_table():
    with pytest.raises(ValueError, match=r"`dimension` must be an int from 0 to 63 \(d_model - 1\), got 64"):
        sinusoid_wavelength(64, 64)


# --- gradient_norms_per_layer -----------------------------------------------------------------------------


def gradient_norms_written_out(depth, residual, layer_norm=False, width=64, seed=0, weight_scale=1.0):
    """Notebook 06's measurement, as the notebook writes it (global seed, float64), one backward pass by hand."""
    torch.manual_seed(seed)
    layers = [torch.nn.Linear(width, width, dtype=torch.float64) for _ in range(depth)]
    with torch.no_grad():
        for layer in layers:
            layer.weight *= weight_scale
    h = torch.randn(32, width, dtype=torch.float64)
    target = torch.randn(32, width, dtype=torch.float64)
    for layer in layers:
        h = h + torch.tanh(layer(h)) if residual else torch.tanh(layer(h))
        if layer_norm:
            h = F.layer_norm(h, (width,), eps=1e-12)
    F.mse_loss(h, target).backward()
    return torch.tensor([layer.weight.grad.norm().item() for layer in layers], dtype=torch.float64)


@pytest.mark.parametrize("residual", [False, True])
@pytest.mark.parametrize("layer_norm", [False, True])
def test_gradient_norms_per_layer_is_notebook_06s_measurement(residual, layer_norm):
    norms = gradient_norms_per_layer(12, residual, layer_norm, width=16, seed=3)
    assert norms.shape == (12,) and norms.dtype == torch.float64
    assert torch.equal(norms, gradient_norms_written_out(12, residual, layer_norm, width=16, seed=3))


@pytest.mark.parametrize("weight_scale", [0.5, 3**0.5, 3.0])
def test_gradient_norms_per_layer_scales_the_initial_weights(weight_scale):
    norms = gradient_norms_per_layer(12, False, width=16, seed=3, weight_scale=weight_scale)
    expected = gradient_norms_written_out(12, False, width=16, seed=3, weight_scale=weight_scale)
    assert torch.equal(norms, expected)
    assert not torch.equal(norms, gradient_norms_per_layer(12, False, width=16, seed=3))


def test_gradient_norms_per_layer_leaves_the_callers_random_state_and_grad_mode_alone():
    torch.manual_seed(1234)
    state = torch.get_rng_state()
    with torch.no_grad():  # the measurement needs a backward pass even inside no_grad
        norms = gradient_norms_per_layer(5, residual=True)
    assert torch.equal(torch.get_rng_state(), state)
    assert (norms > 0).all() and not norms.requires_grad
    assert torch.equal(gradient_norms_per_layer(5, residual=True, seed=1), gradient_norms_per_layer(5, True, seed=1))
    assert not torch.equal(gradient_norms_per_layer(5, True, seed=1), norms)


def test_gradient_norms_without_residuals_vanish_towards_the_input():
    plain = gradient_norms_per_layer(30, residual=False)
    residual = gradient_norms_per_layer(30, residual=True)
    assert plain[0] / plain[-1] < 1e-4
    assert 0.1 < residual[0] / residual[-1] < 10


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"depth": 0, "residual": True}, ValueError, r"`depth` must be a positive int, got 0"),
        ({"depth": 3, "residual": True, "width": 0}, ValueError, r"`width` must be a positive int, got 0"),
        ({"depth": 3, "residual": None}, TypeError, r"`residual` must be True or False, got NoneType None"),
        ({"depth": 3, "residual": True, "seed": 1.5}, ValueError, r"`seed` must be a non-negative int, got 1.5"),
        ({"depth": 3, "residual": True, "weight_scale": 0}, ValueError, r"`weight_scale` must be a positive number"),
        ({"depth": 3, "residual": True, "weight_scale": True}, ValueError, r"`weight_scale` must be a positive"),
    ],
)
def test_gradient_norms_per_layer_refuses_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        gradient_norms_per_layer(**kwargs)


# --- attention_maps ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pretrained():
    return bc.load_pretrained()


def test_attention_maps_are_the_models_attentions_for_the_sentence(pretrained):
    model, tok = pretrained
    text = "Paris is the capital of France."
    tokens, maps = attention_maps(model, tok, text)
    batch = tok(text)
    with torch.no_grad():
        out = model(batch["input_ids"], attention_mask=batch["attention_mask"], output_attentions=True)
    assert tokens == ["[CLS]", "paris", "is", "the", "capital", "of", "france", ".", "[SEP]"]
    assert len(maps) == model.config.num_hidden_layers
    for ours, reference in zip(maps, out.attentions, strict=True):
        assert ours.shape == (model.config.num_attention_heads, 9, 9) and ours.device.type == "cpu"
        assert torch.equal(ours, reference[0])
    assert not maps[0].requires_grad


def test_attention_maps_of_hugging_faces_eager_model_match_ours(pretrained):
    transformers = pytest.importorskip("transformers")
    model, tok = pretrained
    theirs = transformers.BertModel.from_pretrained(str(default_weights_dir()), attn_implementation="eager").eval()
    text = "The cat sat on the mat because it was tired."
    our_tokens, our_maps = attention_maps(model, tok, text)
    their_tokens, their_maps = attention_maps(theirs, tok, text)
    assert our_tokens == their_tokens
    for ours, reference in zip(our_maps, their_maps, strict=True):
        assert_close(ours, reference, atol=1e-5, rtol=1e-4)


def test_attention_maps_refuse_a_model_in_training_mode(pretrained):
    model, tok = pretrained
    with pytest.raises(ValueError, match=r"training mode.*model.eval\(\)"):
        attention_maps(bc.BertModel(model.config), tok, "Hello.")


def test_attention_maps_refuse_a_model_that_returns_no_maps(pretrained):
    _, tok = pretrained

    class NoMaps(torch.nn.Module):  # like a Hugging Face model under its default sdpa attention
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))

        def forward(self, **inputs):
            return type("Out", (), {"attentions": ()})()

    with pytest.raises(ValueError, match=r"returned no attention maps.*eager"):
        attention_maps(NoMaps().eval(), tok, "Hello.")


def test_attention_maps_refuse_a_list_of_sentences(pretrained):
    model, tok = pretrained
    with pytest.raises(TypeError, match=r"`text` must be a string \(one sentence\), got list"):
        attention_maps(model, tok, ["one", "two"])
