"""The explorers of notebook 12: what a number format keeps of a value, and what it keeps of a model's gradients.

    NumberFormatExplorer()               type a number: its fp32, fp16 and bf16 neighbours, the value each
                                         stores, the relative error, and overflow, flush to 0 and subnormals
    LossScaleExplorer(gradients)         a histogram of a model's gradients times a loss scale against fp16's
                                         (or bf16's) limits: what is flushed to 0, what is subnormal, what
                                         overflows, as the scale slider moves

Every figure is drawn from ``bertcourse.precision`` (``neighbours``, ``format_fates``), so what the
explorers show is what the package computes; tests check it from Python. A text that is not a finite
number is answered in the figure, not raised.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch

from .._validation import require_int_in_range
from ..precision import PRECISIONS, format_facts, format_fates, neighbours
from ._base import WIDE, Explorer, nothing_drawn

FATE_COLOURS = {
    "flushed to 0": "#d7191c",
    "subnormal": "#fdae61",
    "normal": "#1a9641",
    "overflow": "#7b3294",
    "zero": "#bababa",
}
FORMATS = ("fp32", "fp16", "bf16")


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.2f}%"


class NumberFormatExplorer(Explorer):
    """A number you type, as fp32, fp16 and bf16 store it.

    Controls: ``text`` (a number such as ``1e-8`` or ``70000``; press Enter). ``drawn``: rows (one dict per
    format from ``precision.neighbours``: value, stored, below, above, relative_error, fate), matrix (3, 3):
    below, stored and above per format, message (None, or why nothing could be drawn), title, figure.
    """

    def __init__(self, text: str = "3e-8"):
        self.text = widgets.Text(value=text, description="number", continuous_update=False, style=WIDE)
        self._assemble({"text": self.text}, [self.text])

    def _draw(self, text: str) -> dict:
        try:
            value = float(text.replace(",", "").replace("_", ""))
        except ValueError:
            value = None
        if value is None or not math.isfinite(value):
            message = f"Type a finite number, such as 1e-8 or 70000: {text!r} is not one."
            return nothing_drawn(message, rows=None)
        rows = [neighbours(value, PRECISIONS[name]) for name in FORMATS]
        matrix = torch.tensor([[row["below"], row["stored"], row["above"]] for row in rows], dtype=torch.float64)
        figure, axes = plt.subplots(len(FORMATS), 1, figsize=(9, 4.2))
        for ax, name, row in zip(axes, FORMATS, rows, strict=True):
            self._number_line(ax, name, row)
        title = f"{value:.7g} in three formats"
        figure.suptitle(title)
        figure.tight_layout()
        return {"rows": rows, "matrix": matrix, "message": None, "title": title, "figure": figure}

    @staticmethod
    def _number_line(ax, name: str, row: dict) -> None:
        """One format: the value (black), its two neighbours (grey ticks) and the stored one (coloured)."""
        value, below, above, stored = row["value"], row["below"], row["above"], row["stored"]
        finite = [x for x in (below, above, value) if math.isfinite(x)]
        low, high = min(finite), max(finite)
        pad = (high - low) * 0.25 or abs(value) * 0.25 or 1e-45
        ax.set_xlim(low - pad, high + pad)
        ax.axhline(0, color="#999999", lw=1)
        for x in (below, above):
            if math.isfinite(x):
                ax.plot([x, x], [-0.3, 0.3], color="#636363", lw=2)
        colour = FATE_COLOURS[row["fate"]]
        if math.isfinite(stored):
            ax.plot([stored], [0], "o", ms=11, color=colour, label="stored")
        ax.plot([value], [0], "x", ms=10, mew=2, color="black", label="typed")
        shown = "inf" if math.isinf(stored) else f"{stored:.8g}"
        around = "exact" if below == above else f"neighbours {below:.8g} and {above:.8g}"
        ax.set_title(
            f"{name} ({format_facts(PRECISIONS[name])['decimal_digits']:.1f} digits): stores {shown}, "
            f"relative error {row['relative_error']:.2g}, {row['fate']}; {around}",
            fontsize=9,
            color=colour if row["fate"] != "normal" else "black",
        )
        ax.set_yticks([])
        ax.ticklabel_format(axis="x", style="sci", scilimits=(-3, 4), useOffset=False)


class LossScaleExplorer(Explorer):
    """A model's gradients times a loss scale 2^k, as a histogram of log2|g x 2^k| against a format's limits.

    ``gradients``: a float tensor of true gradients (e.g. ``precision.flat_gradients(model, batch)``).
    Controls: ``scale_exponent`` (k, from -10 to 40), ``precision`` ("fp16" or "bf16"). ``drawn``:
    fates (``precision.format_fates`` of the gradients at that scale), matrix (the histogram's counts),
    edges (its bin edges in log2), scale, skipped (whether any gradient overflows, so that a dynamic
    scaler skips the whole step), title, figure.
    """

    LOW, HIGH = -10, 40

    def __init__(self, gradients: torch.Tensor, scale_exponent: int = 0, precision: str = "fp16"):
        if not isinstance(gradients, torch.Tensor) or not gradients.dtype.is_floating_point:
            raise TypeError(f"`gradients` must be a float tensor, got {type(gradients).__name__}.")
        if not bool((gradients != 0).any()):
            raise ValueError("`gradients` are all 0: there is nothing to draw.")
        require_int_in_range("scale_exponent", scale_exponent, self.LOW, self.HIGH)
        if precision not in ("fp16", "bf16"):
            raise ValueError(f"`precision` must be 'fp16' or 'bf16', got {precision!r}.")
        self.gradients = gradients.detach().double().flatten()  # (n,)
        self._log2 = self.gradients[self.gradients != 0].abs().log2().numpy()  # (n_nonzero,)
        self.scale_exponent = widgets.IntSlider(
            value=scale_exponent, min=self.LOW, max=self.HIGH, description="loss scale 2^k, k =", style=WIDE
        )
        self.precision = widgets.ToggleButtons(options=["fp16", "bf16"], value=precision, description="format")
        controls = {"scale_exponent": self.scale_exponent, "precision": self.precision}
        self._assemble(controls, [widgets.HBox([self.scale_exponent, self.precision])])

    def _draw(self, scale_exponent: int, precision: str) -> dict:
        dtype = PRECISIONS[precision]
        facts = format_facts(dtype)
        scale = 2.0**scale_exponent
        fates = format_fates(self.gradients, dtype, scale)
        shifted = self._log2 + scale_exponent  # log2 |g x scale| of the non-zero gradients
        flush, subnormal, normal, overflow = (
            math.log2(facts["smallest_subnormal"]) - 1,  # at or below half the smallest subnormal: 0
            math.log2(facts["smallest_subnormal"]),
            math.log2(facts["smallest_normal"]),
            math.log2(facts["max"] * (1 + facts["eps"] / 4)),  # from here up the value rounds to inf
        )
        low = min(float(shifted.min()), flush) - 2
        high = max(float(shifted.max()), overflow) + 2
        edges = np.linspace(low, high, 90)
        counts, _ = np.histogram(shifted, bins=edges)
        figure, ax = plt.subplots(figsize=(9, 3.6))
        ax.axvspan(low, flush, color=FATE_COLOURS["flushed to 0"], alpha=0.15)
        ax.axvspan(flush, normal, color=FATE_COLOURS["subnormal"], alpha=0.15)
        ax.axvspan(overflow, high, color=FATE_COLOURS["overflow"], alpha=0.15)
        ax.stairs(counts, edges, fill=True, color="#3182bd")
        lines = (
            (flush, f"0 at or below 2^{flush:.0f}", "right"),
            (subnormal, "smallest subnormal", "left"),
            (normal, "smallest normal", "left"),
            (overflow, "inf from here", "right"),
        )
        for x, label, side in lines:
            ax.axvline(x, color="#444444", lw=1, ls="--")
            ax.text(x, counts.max() * 1.05, label, rotation=90, va="bottom", ha=side, fontsize=8)
        ax.set_xlim(low, high)
        ax.set_ylim(0, counts.max() * 2.3)  # room above the bars for the rotated labels
        ax.set_xlabel(f"log2 |gradient x 2^{scale_exponent}|")
        ax.set_ylabel("gradient entries")
        skipped = fates["overflow"] > 0  # one inf anywhere and a dynamic scaler skips the whole step
        title = (
            f"{precision} at loss scale 2^{scale_exponent}: {_percent(fates['flushed to 0'])} flushed to 0, "
            f"{_percent(fates['subnormal'])} subnormal, {_percent(fates['overflow'])} overflow; "
            f"step skipped: {'yes' if skipped else 'no'}"
        )
        ax.set_title(title, fontsize=10)
        figure.tight_layout()
        return {
            "fates": fates,
            "matrix": counts,
            "edges": edges,
            "scale": scale,
            "skipped": skipped,
            "title": title,
            "figure": figure,
        }
