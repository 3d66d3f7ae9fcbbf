"""``MistakeExplorer``: any catalogued mistake of any piece, put in place, and the report it gets.

Each piece's exercise catalogues the wrong answers people write (``EXERCISES[name].mistakes``, each a function
with the learner's signature). The explorer lists them all, piece by piece in the order the model calls them;
choosing one swaps that wrong function in for the piece (``Pieces.replaced``, so nothing is recorded as the
learner's) and shows ``compare``'s report on the explorer's batch. Some mistakes show at their own step, some one
step later (a small piece whose output only a larger one reads), and some not at all: a mistake that only changes
fp16 numbers, or fully masked rows, leaves an fp32 batch without such rows exactly right. For those the text says
so, and why (``why_unchanged``), with what the piece's own check says of it.

Two menus: the piece, then one of its mistakes. ``explorer.piece.value = "split_heads"`` then
``explorer.mistake.value = ("split_heads", 0)`` chooses from Python; ``explorer.drawn`` holds the ``Report`` and its
text, drawn as a picture of monospaced text (a notebook opened without running it shows that picture).
"""

from __future__ import annotations

import textwrap

import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import display

from .._validation import describe
from ..exercises import registry
from .compare import compare
from .pieces import PIECES, Pieces


def mistake_options(pretraining: bool = False) -> list[tuple[str, tuple[str, int]]]:
    """(label, (piece, index of the mistake in its exercise's catalogue)) for every catalogued mistake; those of
    ``mlm_head`` only with ``pretraining`` (a model without an MLM head never runs it)."""
    return [
        (f"{name}: {mistake.name}", (name, index))
        for name in PIECES
        if pretraining or name != "mlm_head"
        for index, mistake in enumerate(registry.EXERCISES[name].mistakes)
    ]


def why_unchanged(piece: str, mistake: str) -> str:
    """Why a catalogued mistake leaves every step of an fp32 MiniLM batch right: what it changes is not there."""
    if piece == "hf_to_ours":
        return (
            "the keys it renames wrongly are not in this checkpoint: MiniLM's keys carry no `bert.` prefix, no "
            "`gamma` or `beta` and no heads (notebook 09's tiny BERT, with `BertForPreTraining`, has prefixed keys)"
        )
    if "d_v" in mistake:
        return "MiniLM's heads have d_v = d_k = 32, so √d_v is √d_k"
    if "float32" in mistake and "whatever" in mistake:
        return "this batch is float32 already"
    if "renormalised" in mistake:
        return (
            "the softmax already gives masked keys a weight of 0, so zeroing them and renormalising changes nothing "
            "in a row with a key to attend to; only a row whose every key is masked would divide 0 by 0"
        )
    if any(word in mistake for word in ("fill", "-inf", "every key masked", "minimum")):
        return (
            "a fill value, or the rule for a row whose every key is masked, matters only in fp16 or bf16 or in such "
            "a row; this batch is float32 and every row has a real token to attend to"
        )
    if piece == "layer_norm" and "eps" in mistake:
        return "ε = 1e-12 beside variances near 1: where it goes changes nothing that float32 can hold"
    return "what it changes does not occur in this batch"


_NO_GLYPH = {"❌ ": "", "✅ ": "", "⏳ ": ""}  # matplotlib's DejaVu fonts have no emoji (it would warn on stderr)


def report_figure(text: str, width: int = 118):
    """The report as a picture of monospaced text: what a notebook opened without running it still shows."""
    for emoji, plain in _NO_GLYPH.items():
        text = text.replace(emoji, plain)
    lines = [wrapped for line in text.split("\n") for wrapped in (textwrap.wrap(line, width) or [""])]
    figure = plt.figure(figsize=(11, 0.15 * len(lines) + 0.2))
    ax = figure.add_axes((0, 0, 1, 1))  # a figure without axes is not drawn inline
    ax.set_axis_off()
    ax.text(0.005, 0.99, "\n".join(lines), va="top", ha="left", family="monospace", fontsize=8.5)
    return figure


class MistakeExplorer:
    """Two dropdowns, a piece and one of its catalogued mistakes (of the pieces ``hf_model`` runs); below them, the
    report of ``compare`` with that mistake in place of its piece (the other pieces as ``pieces`` has them). For
    notebook 09's tiny BERT, pass ``transformers.BertForPreTraining`` and ``folder``: then ``mlm_head``'s mistakes are
    listed too."""

    def __init__(
        self, pieces: Pieces, hf_model, batch: dict, start=("scaled_dot_product_attention", 0), *, folder=None
    ):
        if not isinstance(pieces, Pieces):
            raise TypeError(f"`pieces` must come from `load_pieces(...)`, got {describe(pieces)}.")
        self.pretraining = hasattr(hf_model, "cls")  # transformers' BertForPreTraining: its heads under `cls.`
        options = mistake_options(self.pretraining)
        if start not in [value for _, value in options]:
            raise ValueError(f"`start` must be (piece, mistake index) of a catalogued mistake, got {start!r}.")
        self.pieces, self.hf_model, self.batch, self.folder = pieces, hf_model, batch, folder
        self._options = options
        self.piece = widgets.Dropdown(
            options=list(dict.fromkeys(name for _, (name, _) in options)),
            value=start[0],
            description="piece",
            layout=widgets.Layout(width="340px"),  # the longest name, scaled_dot_product_attention, whole
        )
        self.mistake = widgets.Dropdown(
            options=self._options_of(start[0]), value=start, description="mistake", layout=widgets.Layout(width="560px")
        )
        self.piece.observe(self._piece_chosen, names="value")
        self.drawn: dict = {}
        self.output = widgets.interactive_output(self._redraw, {"choice": self.mistake})
        self.widget = widgets.VBox([widgets.HBox([self.piece, self.mistake]), self.output])

    def _options_of(self, piece: str) -> list:
        """The mistakes of one piece, labelled by their names alone."""
        return [(label.split(": ", 1)[1], value) for label, value in self._options if value[0] == piece]

    def _piece_chosen(self, change) -> None:
        options = self._options_of(change["new"])
        self.mistake.options = options  # the value becomes the piece's first mistake, drawn at once

    def _redraw(self, choice) -> None:
        name, index = choice
        wrong = registry.EXERCISES[name].mistakes[index]
        tried = self.pieces.replaced(**{name: wrong.wrong})
        report = compare(tried, self.hf_model, self.batch, folder=self.folder, pretraining=self.pretraining)
        text = f"`{name}` written with {wrong.name}, in place:\n\n{report}"
        if report.matches:
            verdict = tried.verdicts[name]
            text = (
                f"`{name}` written with {wrong.name}, in place:\n\nThis mistake changes nothing on this batch: "
                f"{why_unchanged(name, wrong.name)}. {report}\nIts own check tries other inputs and catches it:\n"
                f"{verdict.message}"
            )
        figure = report_figure(text)
        self.drawn = {"piece": name, "mistake": wrong.name, "report": report, "text": text, "figure": figure}
        plt.show()
        plt.close(figure)

    def _ipython_display_(self) -> None:
        display(self.widget)
