"""What every explorer shares: controls -> ``interactive_output`` -> one box, and how it shows itself.

An explorer subclass builds its controls, calls ``_assemble`` and implements ``_draw(**values)``,
which draws one matplotlib figure and returns a dict with at least ``"figure"`` (and, by the
course's convention, ``"matrix"`` and ``"title"``: what was drawn, for tests to assert on).

Bad input is said one way in every explorer: ``nothing_drawn(message)`` puts the message in red where the
picture would be, titled "nothing to draw", and in ``drawn["message"]`` (None when the picture was drawn);
never a traceback, never twice. ``sentence_box``, ``layer_and_head`` are the controls several explorers share.
"""

from __future__ import annotations

import textwrap

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display

from .._validation import require_int_in_range

DEFAULT_TEXT = "The cat sat on the mat because it was tired."
WIDE = {"description_width": "initial"}  # room for descriptions longer than a word


def checkbox(value: bool, description: str) -> widgets.Checkbox:
    """A checkbox only as wide as its label, so it does not push the next control in its row to the far right."""
    return widgets.Checkbox(value=value, description=description, indent=False, layout=widgets.Layout(width="auto"))


NOTHING_TO_DRAW = "nothing to draw"


def message_figure(message: str, height: float = 1.4):
    """A figure that says what is wrong with the input, in red, where the picture would be: an explorer
    shows bad input instead of raising in the middle of an interaction."""
    figure, ax = plt.subplots(figsize=(9, height))
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True, fontsize=11, color="#a50f15")
    ax.set_axis_off()
    ax.set_title(NOTHING_TO_DRAW)
    return figure


def nothing_drawn(message: str, height: float = 1.4, **values) -> dict:
    """What an explorer returns for input it cannot draw: ``values``, the message, and its picture."""
    figure = message_figure(textwrap.fill(message, 90), height=height)
    return {**values, "matrix": None, "title": NOTHING_TO_DRAW, "figure": figure, "message": message}


def sentence_box(text: str) -> widgets.Text:
    """The sentence to look at: the explorer redraws when you press Enter or leave the box, and its label says so."""
    return widgets.Text(
        value=text,
        description="sentence (then Enter)",
        continuous_update=False,
        layout=widgets.Layout(width="700px"),
        style={"description_width": "initial"},  # the whole label, not cut to the default width
    )


def layer_and_head(layer: int, head: int, num_layers: int, num_heads: int) -> tuple[widgets.IntSlider, ...]:
    """Two sliders over the model's layers and heads, after checking that the start values exist."""
    require_int_in_range("layer", layer, 0, num_layers - 1)
    require_int_in_range("head", head, 0, num_heads - 1)
    return (
        widgets.IntSlider(value=layer, min=0, max=num_layers - 1, description="layer", continuous_update=False),
        widgets.IntSlider(value=head, min=0, max=num_heads - 1, description="head", continuous_update=False),
    )


class Explorer:
    """Shared plumbing: controls -> ``interactive_output`` -> one box, and how it displays itself."""

    def _assemble(self, controls: dict[str, widgets.Widget], rows: list[widgets.Widget]) -> None:
        self.drawn: dict = {}
        self.output = widgets.interactive_output(self._redraw, controls)  # draws once now, then on every change
        self.widget = widgets.VBox([*rows, self.output])

    def _redraw(self, **values) -> None:
        self.drawn = self._draw(**values)  # each explorer's own picture, and what it shows
        plt.show()
        plt.close(self.drawn["figure"])

    def display(self) -> None:
        """Show the controls and the plot below the current cell."""
        display(self.widget)

    def _ipython_display_(self, **kwargs) -> None:
        self.display()
