"""The explorers of notebook 12, driven from Python: the number-format explorer draws what precision.neighbours
says of the typed number in each format, the loss-scale explorer draws the gradients' histogram and
precision.format_fates at every scale, and bad input is a message in the figure, never an exception."""

import math

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from bertcourse import precision
from bertcourse.widgets import LossScaleExplorer, NumberFormatExplorer

matplotlib.use("Agg")

pytestmark = [
    pytest.mark.filterwarnings("ignore:FigureCanvasAgg is non-interactive:UserWarning"),
    pytest.mark.filterwarnings("ignore:The `ipykernel.comm.Comm` class has been deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`ipykernel.pylab.backend_inline` is deprecated:DeprecationWarning"),
]


def test_the_number_explorer_draws_each_formats_neighbours_of_the_typed_number():
    explorer = NumberFormatExplorer()
    assert explorer.text.value == "3e-8"
    rows = explorer.drawn["rows"]
    assert rows == [precision.neighbours(3e-8, d) for d in (torch.float32, torch.float16, torch.bfloat16)]
    assert rows[1]["stored"] == 2.0**-24 and rows[1]["fate"] == "subnormal"  # fp16 rounds 3e-8 up
    assert explorer.drawn["matrix"].shape == (3, 3)
    assert explorer.drawn["title"] == "3e-08 in three formats"
    assert [ax.get_title().split(" ")[0] for ax in explorer.drawn["figure"].axes] == ["fp32", "fp16", "bf16"]
    assert plt.fignum_exists(explorer.drawn["figure"].number) is False  # closed after it was shown


@pytest.mark.parametrize(
    ("text", "fp16_fate", "bf16_fate"),
    [
        ("70000", "overflow", "normal"),
        ("65,519", "normal", "normal"),
        ("1e-8", "flushed to 0", "normal"),
        ("1e-5", "subnormal", "normal"),
        ("0", "zero", "zero"),
        ("-2.5", "normal", "normal"),
    ],
)
def test_typing_a_number_redraws_with_its_fates(text, fp16_fate, bf16_fate):
    explorer = NumberFormatExplorer()
    explorer.text.value = text
    _, fp16, bf16 = explorer.drawn["rows"]
    assert (fp16["fate"], bf16["fate"]) == (fp16_fate, bf16_fate)
    assert fp16_fate in explorer.drawn["figure"].axes[1].get_title()


def test_a_number_a_format_stores_exactly_is_said_exact_not_its_own_two_neighbours():
    explorer = NumberFormatExplorer()
    explorer.text.value = "70000"
    fp32_title, fp16_title, bf16_title = (ax.get_title() for ax in explorer.drawn["figure"].axes)
    assert fp32_title.endswith("; exact") and "neighbours" not in fp32_title
    assert bf16_title.endswith("neighbours 69632 and 70144")  # bf16 keeps 8 bits: steps of 512 up there


@pytest.mark.parametrize("text", ["abc", "inf", "nan", ""])
def test_a_text_that_is_not_a_finite_number_is_a_message(text):
    explorer = NumberFormatExplorer()
    explorer.text.value = text
    drawn = explorer.drawn
    assert drawn["rows"] is None and drawn["title"] == "nothing to draw"
    assert drawn["message"].startswith("Type a finite number, such as 1e-8 or 70000")
    assert drawn["figure"].axes[0].texts[0].get_text().replace("\n", " ") == drawn["message"]  # wrapped at 90
    explorer.text.value = "1.5"
    assert explorer.drawn["message"] is None


@pytest.fixture(scope="module")
def gradients():
    g = torch.Generator().manual_seed(0)
    return torch.randn(5000, generator=g) * torch.logspace(-12, -1, 5000).pow(1.0)  # (5000,) from 1e-12 to 0.1


def test_the_loss_scale_explorer_draws_the_fates_of_precision_format_fates(gradients):
    explorer = LossScaleExplorer(gradients)
    drawn = explorer.drawn
    assert drawn["fates"] == precision.format_fates(gradients, torch.float16, 1.0)
    assert drawn["scale"] == 1.0 and int(drawn["matrix"].sum()) == int((gradients != 0).sum())
    assert len(drawn["edges"]) == len(drawn["matrix"]) + 1
    flushed = drawn["fates"]["flushed to 0"]
    assert flushed > 0.1  # 1e-12 to 3e-8: a good part of these gradients
    assert drawn["title"].startswith(f"fp16 at loss scale 2^0: {100 * flushed:.2f}% flushed to 0")
    assert plt.fignum_exists(drawn["figure"].number) is False


def test_moving_the_scale_trades_underflow_for_overflow(gradients):
    explorer = LossScaleExplorer(gradients)
    seen = {}
    for k in (0, 16, 24, 40):
        explorer.scale_exponent.value = k
        seen[k] = explorer.drawn["fates"]
        assert seen[k] == precision.format_fates(gradients, torch.float16, 2.0**k)
        assert explorer.drawn["scale"] == 2.0**k and f"2^{k}:" in explorer.drawn["title"]
    assert seen[16]["flushed to 0"] < seen[0]["flushed to 0"] and seen[0]["overflow"] == 0
    assert seen[40]["overflow"] > 0.5
    explorer.precision.value = "bf16"
    assert explorer.drawn["fates"]["overflow"] == 0 and explorer.drawn["title"].startswith("bf16 at loss scale 2^40")


def test_one_overflow_skips_the_whole_step_and_the_title_says_so(gradients):
    explorer = LossScaleExplorer(gradients)
    assert explorer.drawn["skipped"] is False and explorer.drawn["title"].endswith("step skipped: no")
    one_inf = gradients.clone()
    one_inf[0] = 1e4  # a single gradient that overflows at 2^3
    explorer = LossScaleExplorer(one_inf, scale_exponent=3)
    assert 0 < explorer.drawn["fates"]["overflow"] < 0.01
    assert explorer.drawn["skipped"] is True and explorer.drawn["title"].endswith("step skipped: yes")
    explorer.precision.value = "bf16"
    assert explorer.drawn["skipped"] is False


def test_the_flush_line_names_its_power_of_two(gradients):
    explorer = LossScaleExplorer(gradients)
    labels = [text.get_text() for text in explorer.drawn["figure"].axes[0].texts]
    assert "0 at or below 2^-25" in labels
    explorer.precision.value = "bf16"
    assert "0 at or below 2^-134" in [text.get_text() for text in explorer.drawn["figure"].axes[0].texts]


def test_the_histogram_is_drawn_in_log2_of_the_scaled_gradients(gradients):
    explorer = LossScaleExplorer(gradients, scale_exponent=8)
    drawn = explorer.drawn
    logs = np.log2(gradients[gradients != 0].abs().double().numpy()) + 8
    expected, _ = np.histogram(logs, bins=drawn["edges"])
    assert np.array_equal(drawn["matrix"], expected)
    assert drawn["edges"][0] < math.log2(2.0**-25) and drawn["edges"][-1] > math.log2(65520)  # both limits shown


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"scale_exponent": 50}, ValueError, r"`scale_exponent` must be an int from -10 to 40, got 50"),
        ({"precision": "fp32"}, ValueError, r"`precision` must be 'fp16' or 'bf16', got 'fp32'"),
    ],
)
def test_bad_initial_settings_are_errors(gradients, kwargs, error, match):
    with pytest.raises(error, match=match):
        LossScaleExplorer(gradients, **kwargs)


def test_gradients_that_are_not_a_float_tensor_or_all_zero_are_errors():
    with pytest.raises(TypeError, match=r"`gradients` must be a float tensor, got list"):
        LossScaleExplorer([1.0, 2.0])
    with pytest.raises(ValueError, match=r"`gradients` are all 0"):
        LossScaleExplorer(torch.zeros(4))
