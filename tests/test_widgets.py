"""Every control of every explorer is moved from Python, and what was drawn is checked against the package.

Runs without a browser or a kernel, in ipywidgets 7 and 8 alike: the explorers redraw
inside the control's change, so ``explorer.drawn`` can be read right after ``.value`` is set.
"""

import math

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from ipywidgets import Checkbox, Label
from matplotlib import patheffects
from matplotlib.collections import LineCollection
from torch.testing import assert_close

import bertcourse as bc
from bertcourse import experiments
from bertcourse.widgets import (
    AttentionExplorer,
    MaskingExplorer,
    PositionalEncodingExplorer,
    ResidualExplorer,
    ScalingExplorer,
    gradient_norms_per_layer,
)
from bertcourse.widgets._base import DEFAULT_TEXT

matplotlib.use("Agg")

pytestmark = [
    # plt.show() on Agg warns where a display exists (a desktop); there is nothing to show in tests.
    pytest.mark.filterwarnings("ignore:FigureCanvasAgg is non-interactive:UserWarning"),
    # ipywidgets 7 (Colab's) calls APIs that newer ipykernels deprecate; not ours to fix.
    pytest.mark.filterwarnings("ignore:The `ipykernel.comm.Comm` class has been deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`ipykernel.pylab.backend_inline` is deprecated:DeprecationWarning"),
]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(scope="module")
def pretrained():
    return bc.load_pretrained()


@pytest.fixture
def attention_explorer(pretrained):
    model, tok = pretrained
    return AttentionExplorer(model, tok)


def reference_attentions(pretrained, text):
    model, tok = pretrained
    batch = tok(text)
    with torch.no_grad():
        out = model(batch["input_ids"], attention_mask=batch["attention_mask"], output_attentions=True)
    return tok.convert_ids_to_tokens(batch["input_ids"][0]), out.attentions


def image_of(figure):
    """The data of the first heatmap in ``figure``."""
    (image,) = [ax.images[0] for ax in figure.axes if ax.images][:1]
    return np.asarray(image.get_array())


# --- ScalingExplorer --------------------------------------------------------------------------------------


def test_scaling_explorer_draws_one_softmax_row_with_its_entropy_and_gradient():
    explorer = ScalingExplorer(num_keys=16, d_k=64, scaled=True, seed=0)
    drawn = explorer.drawn
    assert drawn["matrix"].shape == (1, 16)
    assert_close(drawn["matrix"].sum(), torch.tensor(1.0))
    assert_close(drawn["matrix"][0], torch.softmax(drawn["scores"], dim=-1))
    weights = drawn["matrix"][0]
    assert drawn["entropy"] == pytest.approx(float(-(weights * weights.log()).sum()), abs=1e-5)
    jacobian = torch.autograd.functional.jacobian(lambda s: torch.softmax(s, dim=-1), drawn["scores"])
    assert drawn["grad_norm"] == pytest.approx(float(jacobian.norm()), abs=1e-6)
    assert drawn["max_entropy"] == pytest.approx(math.log(16))
    assert drawn["title"].startswith("$d_k$ = 64, scores / $\\sqrt{d_k}$: entropy ")  # mathtext throughout
    assert f"softmax Jacobian norm {drawn['grad_norm']:.3f}" in drawn["title"]
    assert drawn["figure"]._suptitle.get_text() == drawn["title"]  # get_suptitle(): matplotlib 3.8 on
    ax_scores = drawn["figure"].axes[0]
    assert ax_scores.get_title() == f"scores $q \\cdot k / \\sqrt{{d_k}}$ (std {drawn['score_std']:.2f})"


def test_scaling_explorer_draws_exactly_softmax_saturation():
    explorer = ScalingExplorer(num_keys=12, d_k=256, scaled=False, seed=4)
    measured = experiments.softmax_saturation(256, scaled=False, num_keys=12, seed=4)
    drawn = explorer.drawn
    assert torch.equal(drawn["scores"], measured["scores"])
    assert torch.equal(drawn["matrix"][0], measured["weights"])
    for key in ("entropy", "max_entropy", "score_std"):
        assert drawn[key] == measured[key]
    assert drawn["grad_norm"] == measured["jacobian_norm"]
    ax_scores, ax_weights = drawn["figure"].axes
    np.testing.assert_array_equal([bar.get_height() for bar in ax_scores.patches], measured["scores"].numpy())
    np.testing.assert_array_equal([bar.get_height() for bar in ax_weights.patches], measured["weights"].numpy())


def test_scaling_explorer_d_k_slider_runs_from_2_to_1024_and_redraws():
    explorer = ScalingExplorer(d_k=64)
    assert explorer.d_k.options[0] == 2 and explorer.d_k.options[-1] == 1024
    explorer.scaled.value = False
    std_64 = explorer.drawn["score_std"]
    explorer.d_k.value = 1024
    assert explorer.drawn["title"].startswith("$d_k$ = 1024, unscaled scores")
    assert explorer.drawn["figure"].axes[0].get_title().startswith("scores $q \\cdot k$ (std ")
    assert explorer.drawn["score_std"] > 2 * std_64  # unscaled scores spread like sqrt(d_k)


def test_scaling_on_keeps_softmax_soft_for_large_d_k_and_its_gradient_alive():
    explorer = ScalingExplorer(d_k=1024, scaled=True)
    scaled = dict(explorer.drawn)
    explorer.scaled.value = False
    unscaled = explorer.drawn
    assert "unscaled scores" in unscaled["title"]
    assert scaled["entropy"] > 1.0 > 0.01 > unscaled["entropy"]  # unscaled: nearly one-hot
    assert scaled["grad_norm"] > 0.1 > 1e-3 > unscaled["grad_norm"]  # unscaled: vanishing gradient
    assert scaled["score_std"] == pytest.approx(1.0, abs=0.5)
    assert unscaled["score_std"] == pytest.approx(32.0, rel=0.5)
    assert_close(unscaled["scores"] / 32.0, scaled["scores"])  # same q and k, only the scale differs


def test_scaling_explorer_seed_slider_draws_new_vectors_reproducibly():
    explorer = ScalingExplorer(seed=0)
    first = explorer.drawn["matrix"]
    explorer.seed.value = 1
    assert not torch.allclose(explorer.drawn["matrix"], first)
    explorer.seed.value = 0
    assert_close(explorer.drawn["matrix"], first)


def test_scaling_explorer_refuses_a_d_k_off_the_slider():
    with pytest.raises(ValueError, match=r"`d_k` must be one of \(2, 4, .*1024\), got 100"):
        ScalingExplorer(d_k=100)


# --- MaskingExplorer --------------------------------------------------------------------------------------


def test_masking_with_padding_zeroes_the_pad_columns_and_real_rows_sum_to_one():
    explorer = MaskingExplorer(lengths=(6, 4, 2), padding=True, causal=False, sentence=1)
    drawn = explorer.drawn
    assert drawn["tokens"] == ["dogs", "bark", "at", "night", "[PAD]", "[PAD]"]
    assert drawn["matrix"].shape == (6, 6)
    assert (drawn["matrix"][:, 4:] == 0).all()
    assert (drawn["matrix"][:, :4] > 0).all()
    assert_close(drawn["matrix"][:4].sum(dim=-1), torch.ones(4))
    assert_close(drawn["mask"], bc.padding_mask([4], 6).expand(6, 6))
    assert (
        drawn["title"]
        == "batch: lengths 6, 4, 2, padded to 6\nsentence 2: 4 tokens + 2 [PAD]; padding mask on, causal mask off"
    )

    panels = [ax for ax in drawn["figure"].axes if ax.images]
    np.testing.assert_array_equal(panels[0].images[0].get_array(), drawn["mask"].float().numpy())
    assert panels[0].images[0].get_clim() == (0, 1)  # yellow = 1 = may attend, whatever the mask holds
    np.testing.assert_allclose(panels[1].images[0].get_array(), drawn["matrix"].numpy())
    assert panels[1].images[0].get_clim() == (0, 1)  # the weights keep one scale across settings
    assert drawn["pad_weight"] == 0.0
    assert panels[1].get_title() == "attention weights (on [PAD]: 0.00 per real query)"
    assert [t.get_text() for t in panels[1].get_xticklabels()] == drawn["tokens"]


def test_masking_explorer_says_when_a_sentence_not_shown_changes():
    explorer = MaskingExplorer(lengths=(6, 4, 2), padding=True, sentence=1)
    explorer.lengths[2].value = 3  # sentence 3, not the one drawn
    assert explorer.drawn["title"].startswith("batch: lengths 6, 4, 3, padded to 6\n")
    assert explorer.drawn["tokens"] == ["dogs", "bark", "at", "night", "[PAD]", "[PAD]"]


@pytest.mark.parametrize(("padding", "causal"), [(True, False), (False, True)])
def test_masking_explorer_draws_exactly_masked_attention(padding, causal):
    explorer = MaskingExplorer(lengths=(5, 3, 7), padding=padding, causal=causal, sentence=2, seed=2)
    measured = experiments.masked_attention([5, 3, 7], padding, causal, max_len=9, seed=2)
    assert torch.equal(explorer.drawn["matrix"], measured["weights"][2])
    assert torch.equal(explorer.drawn["mask"], measured["mask"][2])
    explorer.sentence.value = 1
    assert torch.equal(explorer.drawn["matrix"], measured["weights"][1])


def test_masking_without_padding_lets_real_tokens_attend_to_pad():
    explorer = MaskingExplorer(lengths=(6, 4, 2), padding=True, sentence=1)
    explorer.padding.value = False
    drawn = explorer.drawn
    assert (drawn["matrix"][:, 4:] > 0).all()
    assert drawn["mask"].all()
    assert "padding mask off" in drawn["title"]
    expected = float(drawn["matrix"][:4, 4:].sum(dim=-1).mean())
    assert drawn["pad_weight"] == pytest.approx(expected) and drawn["pad_weight"] > 0
    weights_panel = [ax for ax in drawn["figure"].axes if ax.images][1]
    assert f"on [PAD]: {expected:.2f} per real query" in weights_panel.get_title()
    mask_image = [ax for ax in drawn["figure"].axes if ax.images][0].images[0]
    assert mask_image.get_clim() == (0, 1)  # an all-True mask is all yellow, not a colour picked by autoscaling


def test_masking_causal_gives_zeros_above_the_diagonal():
    explorer = MaskingExplorer(lengths=(6, 4, 2), padding=False, causal=False, sentence=0)
    future = ~bc.causal_mask(6)  # (6, 6): True above the diagonal
    assert (explorer.drawn["matrix"][future] > 0).all()
    explorer.causal.value = True
    drawn = explorer.drawn
    assert (drawn["matrix"][future] == 0).all()
    assert_close(drawn["matrix"].sum(dim=-1), torch.ones(6))
    assert_close(drawn["mask"], bc.causal_mask(6))
    assert drawn["title"].endswith("causal mask on")


def test_masking_padding_and_causal_together_combine():
    explorer = MaskingExplorer(lengths=(6, 4, 2), padding=True, causal=True, sentence=1)
    expected = bc.causal_mask(6) & bc.padding_mask([4], 6)  # (6, 6): past keys that are real
    assert_close(explorer.drawn["mask"], expected)
    assert (explorer.drawn["matrix"][~expected] == 0).all()
    assert_close(explorer.drawn["matrix"].sum(dim=-1), torch.ones(6))


def test_masking_sentence_selector_shows_another_sentence_of_the_same_batch():
    explorer = MaskingExplorer(lengths=(6, 4, 2), padding=True, sentence=1)
    explorer.sentence.value = 2
    drawn = explorer.drawn
    assert drawn["sentence"] == 2
    assert drawn["tokens"] == ["birds", "sing"] + ["[PAD]"] * 4
    assert (drawn["matrix"][:, 2:] == 0).all()
    explorer.sentence.value = 0
    assert explorer.drawn["tokens"] == ["the", "cat", "sat", "on", "the", "mat"]
    assert (explorer.drawn["matrix"] > 0).all()  # the longest sentence has no padding


def test_masking_length_sliders_change_the_batch():
    explorer = MaskingExplorer(lengths=(6, 4, 2), padding=True, sentence=1)
    explorer.lengths[0].value = 3  # the longest is now sentence 2 (4 tokens): no padding for it
    assert explorer.drawn["lengths"] == [3, 4, 2]
    assert explorer.drawn["matrix"].shape == (4, 4)
    assert "[PAD]" not in explorer.drawn["tokens"]
    explorer.lengths[1].value = 1
    assert explorer.drawn["tokens"] == ["dogs", "[PAD]", "[PAD]"]
    assert_close(explorer.drawn["matrix"][:, 0], torch.ones(3))  # one real key takes all the attention
    explorer.lengths[2].value = 9
    assert explorer.drawn["matrix"].shape == (9, 9)


def test_masking_explorer_refuses_bad_lengths():
    with pytest.raises(ValueError, match=r"`lengths` must be 3 ints from 1 to 9, got \(6, 4\)"):
        MaskingExplorer(lengths=(6, 4))


# --- PositionalEncodingExplorer ---------------------------------------------------------------------------


def positional_axes(drawn):
    return {ax.get_title(): ax for ax in drawn["figure"].axes}


def test_positional_explorer_highlights_the_row_and_column_of_the_table():
    explorer = PositionalEncodingExplorer(max_len=50, d_model=64, position=10, dimension=4)
    table = bc.sinusoidal_position_encoding(50, 64)
    drawn = explorer.drawn
    assert_close(drawn["matrix"], table)
    assert_close(drawn["row"], table[10])
    assert_close(drawn["column"], table[:, 4])
    assert drawn["value"] == pytest.approx(float(table[10, 4]))
    assert drawn["wavelength"] == experiments.sinusoid_wavelength(4, 64)
    assert drawn["wavelength"] == pytest.approx(2 * math.pi * 10000 ** (4 / 64))
    assert drawn["turns"] == pytest.approx(50 / drawn["wavelength"])
    assert drawn["title"] == f"position 10, dimension 4 (sin, wavelength 11.2): value {float(table[10, 4]):.3f}"
    axes = positional_axes(drawn)
    np.testing.assert_allclose(axes["sinusoidal position encoding"].images[0].get_array(), table.numpy())
    patches = axes["sinusoidal position encoding"].patches
    highlights = [(p.get_xy(), p.get_width(), p.get_height()) for p in patches]
    assert highlights == [((-0.5, 9.5), 64, 1), ((3.5, -0.5), 1, 50)]
    for patch in patches:  # lime on a black edge: visible on red, blue and white stripes alike
        assert matplotlib.colors.to_hex(patch.get_edgecolor()) == "#00ff00"
        assert patch.get_linewidth() >= 2.5
        assert [type(effect) for effect in patch.get_path_effects()] == [patheffects.Stroke, patheffects.Normal]
    near = axes["dimension 4 (sin) near position 10"]
    assert drawn["window"] == range(0, 49)  # 24 on each side, shifted to start at position 0
    np.testing.assert_array_equal(near.lines[0].get_xdata(), np.arange(49))
    np.testing.assert_allclose(near.lines[0].get_ydata(), table[:49, 4].numpy())
    assert near.get_ylim() == (-1.1, 1.1)
    every = axes["over all 50 positions: 4.47 turns"]
    np.testing.assert_allclose(every.lines[0].get_ydata(), table[:, 4].numpy())
    for ax in (near, every):
        assert (ax.lines[1].get_xdata()[0], ax.lines[1].get_ydata()[0]) == (10, pytest.approx(drawn["value"]))
    vector_line = axes["position 10: its vector"].lines[0]
    np.testing.assert_allclose(vector_line.get_ydata(), table[10].numpy())


def test_positional_explorer_says_when_a_wave_turns_too_often_to_see_over_all_positions():
    explorer = PositionalEncodingExplorer(dimension=0)  # 512 positions, 81.5 turns: a band at the panel's width
    assert "over all 512 positions: 81.5 turns\ntoo many to see at this width" in positional_axes(explorer.drawn)
    explorer.dimension.value = 20  # 4.58 turns: a wave
    assert "over all 512 positions: 4.58 turns" in positional_axes(explorer.drawn)


def test_positional_explorer_offset_turns_a_feature_pair_by_the_same_angle_from_any_start():
    explorer = PositionalEncodingExplorer(position=10, dimension=4, offset=5)
    drawn = explorer.drawn
    omega = 1 / 10000 ** (4 / 64)  # pair 2 of a 64-wide table
    assert drawn["offset"] == 5 and drawn["angle"] == pytest.approx(5 * omega)
    table = drawn["matrix"]
    assert_close(drawn["pair_points"][0], table[[10, 15]][:, 4:6])  # (sin, cos) of pair 2 at positions 10 and 15
    assert_close(drawn["pair_points"][1], table[[0, 5]][:, 4:6])  # and at 0 and 5
    for before, after in drawn["pair_points"]:  # the same turn from either start
        turned = math.atan2(before[0], before[1]) - math.atan2(after[0], after[1])
        assert math.cos(turned) == pytest.approx(math.cos(drawn["angle"]), abs=1e-5)
    circle = positional_axes(drawn)[f"offset k = 5: pair 2 turns by {math.degrees(5 * omega):.1f}°"]
    assert circle.get_xlabel() == "dimension 4 (sin)"
    explorer.offset.value = 0
    assert_close(explorer.drawn["pair_points"][:, 0], explorer.drawn["pair_points"][:, 1])  # no offset, no turn


def test_positional_explorer_sliders_move_the_highlight():
    explorer = PositionalEncodingExplorer(max_len=50, d_model=64)
    table = bc.sinusoidal_position_encoding(50, 64)
    assert (explorer.position.max, explorer.dimension.max) == (49, 63)
    explorer.position.value = 33
    assert_close(explorer.drawn["row"], table[33])
    assert explorer.drawn["position"] == 33
    assert explorer.drawn["window"] == range(1, 50)  # the window stops at the last position
    explorer.dimension.value = 1
    assert_close(explorer.drawn["column"], table[:, 1])
    assert explorer.drawn["value"] == pytest.approx(float(table[33, 1]))
    assert explorer.drawn["wavelength"] == pytest.approx(2 * math.pi)  # pair 0: the fastest wave
    assert "(cos, wavelength 6.3)" in explorer.drawn["title"]


def test_positional_explorer_has_bert_s_512_positions_so_slow_waves_move():
    explorer = PositionalEncodingExplorer()
    assert explorer.position.max == 511
    assert explorer.position.continuous_update is False  # 512 steps: redrawn on release, not on every one
    assert explorer.drawn["matrix"].shape == (512, 64)
    explorer.dimension.value = 60
    explorer.position.value = 400
    drawn = explorer.drawn
    assert drawn["window"] == range(376, 425)
    assert drawn["turns"] == pytest.approx(512 / (2 * math.pi * 10000 ** (60 / 64)))
    axes = positional_axes(drawn)
    every = axes[f"over all 512 positions: {drawn['turns']:.3g} turns"]
    column = drawn["column"]
    assert float(column[511] - column[0]) > 0.08  # sin(p / 5623) rises over 512 positions ...
    low, high = every.get_ylim()
    assert high - low < 0.2  # ... and the y axis is fitted to it, so the rise fills the panel
    assert every.get_ylabel() == "value (scale fitted)"
    assert drawn["title"].startswith("position 400, dimension 60 (sin, wavelength 35,332.9): value ")
    assert low <= float(column.min()) and high >= float(column.max())
    every.figure.canvas.draw()
    assert every.yaxis.get_offset_text().get_text() == ""  # tick labels in plain numbers


# --- gradient_norms_per_layer and ResidualExplorer -------------------------------------------------------


def test_gradient_norms_per_layer_is_still_importable_from_widgets():
    assert gradient_norms_per_layer is experiments.gradient_norms_per_layer  # notebook 06 imports it from here


def plotted_line(drawn):
    (ax,) = drawn["figure"].axes
    (line,) = ax.lines
    return ax, line


def test_residual_explorer_draws_exactly_the_measured_norms_on_a_log_scale():
    explorer = ResidualExplorer(depth=30, residual=False)
    drawn = explorer.drawn
    assert torch.equal(drawn["matrix"], gradient_norms_per_layer(30, residual=False))
    assert (drawn["depth"], drawn["residual"], drawn["layer_norm"]) == (30, False, False)
    assert drawn["ratio_first_last"] == pytest.approx(float(drawn["matrix"][0] / drawn["matrix"][-1]), rel=1e-12)
    assert drawn["title"] == f"30 layers of h = tanh(W h): layer 1 / layer 30 = {drawn['ratio_first_last']:.3g}"
    ax, line = plotted_line(drawn)
    assert ax.get_yscale() == "log"
    assert ax.get_title() == drawn["title"]
    assert ax.get_xlabel() == "layer (1 = nearest the input)"
    np.testing.assert_array_equal(line.get_xdata(), np.arange(1, 31))
    np.testing.assert_array_equal(line.get_ydata(), drawn["matrix"].numpy())
    low, high = ax.get_ylim()
    assert low <= float(drawn["matrix"].min()) and high >= float(drawn["matrix"].max())
    assert (low, high) == (1e-8, 1e2)  # whole decades: the lowest norm, 4.2e-08, lies above 1e-8


def labelled_decades(ax):
    """The exponents of the labelled y ticks inside the axis limits, e.g. [-6, -5, ..., 2]."""
    ax.figure.canvas.draw()
    low, high = ax.get_ylim()
    ticks = zip(ax.get_yticks(), ax.get_yticklabels(), strict=True)
    return [round(math.log10(tick)) for tick, label in ticks if low <= tick <= high and label.get_text()]


@pytest.mark.parametrize(
    ("depth", "residual", "layer_norm", "decades"),
    [(30, False, False, (-8, 2)), (30, True, False, (-6, 2)), (60, False, False, (-16, 2)), (60, False, True, (-6, 2))],
)
def test_residual_explorer_y_axis_runs_over_whole_decades_each_one_labelled(depth, residual, layer_norm, decades):
    explorer = ResidualExplorer(depth=depth, residual=residual, layer_norm=layer_norm)
    ax, _ = plotted_line(explorer.drawn)
    low, high = decades
    assert ax.get_ylim() == (10.0**low, 10.0**high)
    assert labelled_decades(ax) == list(range(low, high + 1))  # no unlabelled band at either end


def test_residual_explorer_y_limits_leave_room_around_the_points():
    assert ResidualExplorer.y_limits(torch.tensor([3e-3, 0.5])) == (1e-6, 1e2)  # at least MIN_Y_RANGE
    assert ResidualExplorer.y_limits(torch.tensor([1.5e-9, 70.0])) == (1e-10, 1e3)  # a factor of 2 of room
    assert ResidualExplorer.y_limits(torch.tensor([3e-9, 40.0], dtype=torch.float64)) == (1e-9, 1e2)


def test_residual_explorer_depth_slider_sets_the_number_of_layers_drawn():
    explorer = ResidualExplorer(depth=30)
    assert (explorer.depth.min, explorer.depth.max) == (2, 60)
    assert explorer.depth.continuous_update is False  # a deep stack is measured on release, not on every step
    for depth in (5, 60, 2):
        explorer.depth.value = depth
        drawn = explorer.drawn
        assert drawn["depth"] == depth
        assert drawn["matrix"].shape == (depth,)
        assert torch.equal(drawn["matrix"], gradient_norms_per_layer(depth, residual=False))
        np.testing.assert_array_equal(plotted_line(drawn)[1].get_xdata(), np.arange(1, depth + 1))
        assert drawn["title"].startswith(f"{depth} layers of h = tanh(W h): layer 1 / layer {depth} = ")


def test_residuals_keep_the_first_layers_gradient_alive_in_a_deep_stack():
    explorer = ResidualExplorer(depth=60, residual=False)
    without = explorer.drawn
    assert without["ratio_first_last"] < 1e-10  # 60 layers of tanh(W h): layer 1 gets almost nothing
    explorer.depth.value = 30
    assert without["ratio_first_last"] < explorer.drawn["ratio_first_last"] < 1e-4
    explorer.depth.value = 60
    explorer.residual.value = True
    with_residuals = explorer.drawn
    assert with_residuals["residual"] is True
    assert 0.1 < with_residuals["ratio_first_last"] < 10  # every layer gets a gradient of the same order
    assert float(with_residuals["matrix"].max() / with_residuals["matrix"].min()) < 10
    assert torch.equal(with_residuals["matrix"], gradient_norms_per_layer(60, residual=True))
    assert with_residuals["title"].startswith("60 layers of h = h + tanh(W h): ")
    assert plotted_line(with_residuals)[1].get_color() != plotted_line(without)[1].get_color()


def test_layer_norm_checkbox_normalises_after_every_layer():
    explorer = ResidualExplorer(depth=60, residual=False, layer_norm=False)
    explorer.layer_norm.value = True
    drawn = explorer.drawn
    assert drawn["layer_norm"] is True
    assert torch.equal(drawn["matrix"], gradient_norms_per_layer(60, residual=False, layer_norm=True))
    assert 0.1 < drawn["ratio_first_last"] < 10  # renormalised activations keep tanh's gradient alive too
    assert drawn["title"].startswith("60 layers of h = LN(tanh(W h)): ")
    explorer.residual.value = True
    assert explorer.drawn["title"].startswith("60 layers of h = LN(h + tanh(W h)): ")  # Post-LN, as in BERT
    assert torch.equal(explorer.drawn["matrix"], gradient_norms_per_layer(60, residual=True, layer_norm=True))


def test_residual_explorer_weight_scale_is_the_initialisation_of_section_4():
    explorer = ResidualExplorer(depth=30, residual=False)
    assert explorer.weight_scale.value == 1.0 and "weights" not in explorer.drawn["title"]
    assert explorer.drawn["ratio_first_last"] < 1e-4  # PyTorch's default: the plain stack's gradient vanishes
    explorer.weight_scale.value = math.sqrt(3)  # Glorot's scale keeps it
    drawn = explorer.drawn
    assert drawn["weight_scale"] == math.sqrt(3)
    assert torch.equal(drawn["matrix"], gradient_norms_per_layer(30, residual=False, weight_scale=math.sqrt(3)))
    assert 0.1 < drawn["ratio_first_last"] < 10
    assert drawn["title"].startswith("30 layers of h = tanh(W h), weights × √3 (Glorot): layer 1 / layer 30 = ")
    explorer.weight_scale.value = 0.5
    assert explorer.drawn["ratio_first_last"] < 1e-10
    with pytest.raises(ValueError, match="`weight_scale` must be one of"):
        ResidualExplorer(weight_scale=2.0)


def test_residual_explorer_passes_width_and_seed_to_the_measurement():
    explorer = ResidualExplorer(depth=8, residual=True, width=16, seed=7)
    assert torch.equal(explorer.drawn["matrix"], gradient_norms_per_layer(8, True, width=16, seed=7))


@pytest.mark.parametrize("depth", [1, 61, 30.0, True])
def test_residual_explorer_refuses_a_depth_off_the_slider(depth):
    with pytest.raises(ValueError, match=rf"`depth` must be an int from 2 to 60, got {depth!r}"):
        ResidualExplorer(depth=depth)


# --- AttentionExplorer ------------------------------------------------------------------------------------


def test_attention_explorer_draws_exactly_the_models_attention(pretrained, attention_explorer):
    tokens, attentions = reference_attentions(pretrained, DEFAULT_TEXT)
    explorer = attention_explorer
    assert explorer.text.value == DEFAULT_TEXT
    assert (explorer.layer.max, explorer.head.max) == (5, 11)
    explorer.layer.value = 3
    explorer.head.value = 5
    drawn = explorer.drawn
    assert_close(drawn["matrix"], attentions[3][0, 5])
    assert drawn["tokens"] == tokens
    assert (drawn["layer"], drawn["head"], drawn["view"]) == (3, 5, "heatmap")
    assert drawn["title"] == "layer 3, head 5"
    np.testing.assert_allclose(image_of(drawn["figure"]), attentions[3][0, 5].numpy(), rtol=1e-6)
    ax = drawn["figure"].axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == tokens
    assert [t.get_text() for t in ax.get_xticklabels()] == tokens


def test_attention_explorer_average_over_heads_is_the_mean(pretrained, attention_explorer):
    _, attentions = reference_attentions(pretrained, DEFAULT_TEXT)
    explorer = attention_explorer
    explorer.layer.value = 2
    explorer.average_heads.value = True
    assert_close(explorer.drawn["matrix"], attentions[2][0].mean(dim=0))
    assert explorer.drawn["head"] is None
    assert explorer.drawn["title"] == "layer 2, mean over 12 heads"
    assert explorer.head.disabled
    explorer.average_heads.value = False
    assert not explorer.head.disabled
    assert_close(explorer.drawn["matrix"], attentions[2][0, 0])


def test_attention_explorer_new_text_changes_tokens_and_shape(pretrained, attention_explorer):
    text = "Paris is the capital of France."
    tokens, attentions = reference_attentions(pretrained, text)
    explorer = attention_explorer
    explorer.head.value = 7
    explorer.text.value = text
    assert tokens == ["[CLS]", "paris", "is", "the", "capital", "of", "france", ".", "[SEP]"]
    assert explorer.drawn["tokens"] == tokens
    assert explorer.drawn["matrix"].shape == (9, 9)
    assert_close(explorer.drawn["matrix"], attentions[0][0, 7])


def test_attention_explorer_head_view_draws_the_same_map_as_lines(pretrained, attention_explorer):
    tokens, attentions = reference_attentions(pretrained, DEFAULT_TEXT)
    explorer = attention_explorer
    explorer.layer.value = 5
    explorer.view.value = "head view"
    drawn = explorer.drawn
    assert drawn["view"] == "head view"
    assert_close(drawn["matrix"], attentions[5][0, 0])
    (lines,) = [c for ax in drawn["figure"].axes for c in ax.collections if isinstance(c, LineCollection)]
    assert len(lines.get_segments()) == int((attentions[5][0, 0] > 0).sum())
    alphas = np.asarray(lines.get_colors())[:, 3]
    np.testing.assert_allclose(np.sort(alphas), np.sort(attentions[5][0, 0].numpy().ravel()), rtol=1e-5)


def test_attention_explorer_all_heads_view_draws_the_whole_layer(pretrained, attention_explorer):
    tokens, attentions = reference_attentions(pretrained, DEFAULT_TEXT)
    explorer = attention_explorer
    explorer.layer.value = 1
    explorer.view.value = "all heads"
    drawn = explorer.drawn
    assert_close(drawn["matrix"], attentions[1][0])
    assert drawn["head"] is None
    assert drawn["title"] == "layer 1: all 12 heads"
    assert explorer.head.disabled and explorer.average_heads.disabled
    assert explorer.note.value == drawn["note"] == "all heads are shown: head and average do not apply"
    head_axes = [ax for ax in drawn["figure"].axes if ax.get_title().startswith("head")]
    assert len(head_axes) == 12
    np.testing.assert_allclose(head_axes[11].images[0].get_array(), attentions[1][0, 11].numpy(), rtol=1e-6)
    assert {ax.images[0].get_clim() for ax in head_axes} == {(0.0, float(attentions[1][0].max()))}  # one scale
    width, height = drawn["figure"].get_size_inches()
    assert width <= 12.0 and height <= 6.0  # fits a laptop's window whole
    assert len({ax.get_position().y0 for ax in head_axes}) == 2  # two rows of six
    explorer.view.value = "heatmap"
    assert not explorer.head.disabled and not explorer.average_heads.disabled
    assert explorer.note.value == "" and explorer.drawn["note"] == ""
    assert drawn is not explorer.drawn and explorer.drawn["matrix"].shape == (13, 13)


def test_attention_explorer_says_why_a_control_is_greyed_out(attention_explorer):
    explorer = attention_explorer
    (note,) = [leaf for leaf in widget_leaves(explorer.widget) if isinstance(leaf, Label)]
    assert note is explorer.note
    row = next(child for child in explorer.widget.children if explorer.head in getattr(child, "children", ()))
    assert list(row.children[-2:]) == [explorer.average_heads, note]  # beside the controls it explains
    assert row.layout.flex_flow == "row wrap"  # and below them on a narrow screen, not off its edge
    assert note.value == ""
    explorer.average_heads.value = True
    assert explorer.head.disabled and not explorer.average_heads.disabled
    assert note.value == "the mean over heads is shown: head does not apply"
    explorer.view.value = "all heads"
    assert note.value == "all heads are shown: head and average do not apply"
    explorer.view.value = "head view"
    assert note.value == "the mean over heads is shown: head does not apply"
    explorer.average_heads.value = False
    assert note.value == "" and not explorer.head.disabled


def test_attention_explorer_draws_exactly_attention_maps(pretrained, attention_explorer):
    model, tok = pretrained
    text = "Paris is the capital of France."
    tokens, maps = experiments.attention_maps(model, tok, text)
    explorer = attention_explorer
    explorer.text.value = text
    explorer.layer.value = 4
    explorer.view.value = "all heads"
    assert explorer.drawn["tokens"] == tokens
    assert torch.equal(explorer.drawn["matrix"], maps[4])
    assert explorer.attentions_for(text)[1][4] is explorer.drawn["matrix"]  # kept, not run again


def test_attention_explorer_reads_a_sentence_pair_with_its_segments(pretrained):
    model, tok = pretrained
    text, pair = "The cat sat on the mat.", "It was very comfortable."
    explorer = AttentionExplorer(model, tok, text=text, pair=pair, layer=0, head=5)
    tokens, maps = experiments.attention_maps(model, tok, text, pair)
    batch = tok(text, pairs=pair)
    with torch.no_grad():
        expected = model(**batch, output_attentions=True).attentions[0][0, 5]  # segment ids 0 and 1
    assert explorer.drawn["tokens"] == tokens and tokens.count("[SEP]") == 2
    assert torch.equal(explorer.drawn["matrix"], maps[0][5])
    torch.testing.assert_close(explorer.drawn["matrix"], expected)
    assert explorer.drawn["pair"] == pair
    explorer.pair.value = ""  # one sentence again
    assert explorer.drawn["tokens"].count("[SEP]") == 1
    with pytest.raises(TypeError, match="`pair` must be a string"):
        experiments.attention_maps(model, tok, text, ["two"])


def test_attention_explorer_runs_the_model_once_per_text(pretrained):
    model, tok = pretrained
    calls = []
    hook = model.register_forward_hook(lambda *args: calls.append(1))
    try:
        explorer = AttentionExplorer(model, tok, text="A short one.")
        assert len(calls) == 1
        explorer.layer.value = 4
        explorer.head.value = 3
        explorer.average_heads.value = True
        explorer.view.value = "head view"
        assert len(calls) == 1  # sliders reuse the stored attentions
        explorer.text.value = "Another sentence."
        explorer.text.value = "A short one."
        assert len(calls) == 2  # the first sentence was remembered
    finally:
        hook.remove()


def test_attention_explorer_sets_its_controls_from_arguments(pretrained):
    model, tok = pretrained
    explorer = AttentionExplorer(model, tok, text="Hello world.", layer=4, head=2, view="head view")
    assert (explorer.layer.value, explorer.head.value, explorer.view.value) == (4, 2, "head view")
    assert explorer.text.continuous_update is False  # the model runs on Enter, not on every key
    assert explorer.drawn["title"] == "layer 4, head 2"
    with pytest.raises(ValueError, match=r"`view` must be one of \('heatmap', 'head view', 'all heads'\)"):
        AttentionExplorer(model, tok, view="graph")


# --- shared behaviour -------------------------------------------------------------------------------------


@pytest.fixture
def ipython_shell(tmp_path, monkeypatch):
    """A throwaway IPython shell, as in a notebook; removed afterwards so no other test sees it."""
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path))
    shell = InteractiveShell.instance()
    yield shell
    InteractiveShell.clear_instance()


def widget_leaves(box):
    """Every widget inside ``box`` that is not itself a box."""
    leaves = []
    for child in box.children:
        leaves.extend(widget_leaves(child) if hasattr(child, "children") else [child])
    return leaves


def test_checkboxes_are_only_as_wide_as_their_labels(pretrained):
    explorers = [ScalingExplorer(), MaskingExplorer(), ResidualExplorer(depth=2)]
    checkboxes = [
        leaf for explorer in explorers for leaf in widget_leaves(explorer.widget) if isinstance(leaf, Checkbox)
    ]
    assert [box.description for box in checkboxes] == [
        "divide scores by √d_k",
        "padding mask",
        "causal mask",
        "residual connections",
        "LayerNorm after every layer",
    ]
    for box in checkboxes:  # a stretched checkbox would push the next control in its row to the far right
        assert (box.layout.width, box.indent) == ("auto", False)


def test_each_explorer_shows_its_widget_as_the_last_expression_of_a_cell(pretrained, ipython_shell):
    model, tok = pretrained
    explorers = [
        ScalingExplorer(),
        MaskingExplorer(),
        PositionalEncodingExplorer(),
        ResidualExplorer(),
        AttentionExplorer(model, tok),
    ]
    for explorer in explorers:
        assert explorer.output in widget_leaves(explorer.widget)  # the controls and, below them, the plot
        assert {"matrix", "title", "figure"} <= explorer.drawn.keys()
        ipython_shell.user_ns["explorer"] = explorer
        with capture_output() as captured:
            ipython_shell.run_cell("explorer")
        assert [output.data[WIDGET_VIEW]["model_id"] for output in captured.outputs] == [explorer.widget.model_id]
        with capture_output() as captured:
            result_data, _ = ipython_shell.display_formatter.format(explorer)
        assert result_data == {}  # the widget is the whole output: no text repr as an execute_result
        with capture_output() as captured:
            explorer.display()
        assert [output.data[WIDGET_VIEW]["model_id"] for output in captured.outputs] == [explorer.widget.model_id]


def test_redrawing_closes_every_figure(attention_explorer):
    plt.close("all")
    attention_explorer.layer.value = 1
    attention_explorer.view.value = "head view"
    attention_explorer.view.value = "all heads"
    assert plt.get_fignums() == []


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda m, t: AttentionExplorer(m, t, layer=10), r"`layer` must be an int from 0 to 5, got 10"),
        (lambda m, t: AttentionExplorer(m, t, head=-1), r"`head` must be an int from 0 to 11, got -1"),
        (lambda m, t: PositionalEncodingExplorer(position=512), r"`position` must be an int from 0 to 511, got 512"),
        (lambda m, t: MaskingExplorer(seed=-2), r"`seed` must be a non-negative int, got -2"),
        (lambda m, t: ResidualExplorer(seed="0"), r"`seed` must be a non-negative int, got '0'"),
        (lambda m, t: PositionalEncodingExplorer(dimension=-3), r"`dimension` must be an int from 0 to 63"),
        (lambda m, t: ScalingExplorer(seed=500), r"`seed` must be an int from 0 to 99, got 500"),
        (lambda m, t: MaskingExplorer(lengths=3), r"`lengths` must be 3 ints"),
        (lambda m, t: MaskingExplorer(sentence=5), r"`sentence` must be an int from 0 to 2, got 5"),
    ],
)
def test_initial_values_outside_a_control_are_errors_not_silent_clamps(pretrained, make, match):
    model, tokenizer = pretrained
    with pytest.raises(ValueError, match=match):
        make(model, tokenizer)


def test_attention_explorer_refuses_models_that_cannot_give_faithful_maps(pretrained):
    model, tokenizer = pretrained
    with pytest.raises(ValueError, match=r"training mode.*model.eval\(\)"):
        AttentionExplorer(bc.BertModel(model.config), tokenizer)

    class NoMaps(torch.nn.Module):  # like a Hugging Face model under its default sdpa attention
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))

        def forward(self, **inputs):
            return type("Out", (), {"attentions": ()})()

    with pytest.raises(ValueError, match=r"returned no attention maps.*eager"):
        AttentionExplorer(NoMaps().eval(), tokenizer)
