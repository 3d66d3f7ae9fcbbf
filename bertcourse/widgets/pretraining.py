"""The explorers of notebook 09: what a masked language model guesses, and what it is shown.

    FillMaskExplorer(model, tokenizer)   type a sentence with [MASK]: the model's top 5 guesses for
                                         each [MASK], with their probabilities
    MLMMaskingExplorer(tokenizer)        a sentence under BERT's 80/10/10 rule: which tokens are
                                         selected, what the model sees in their place, what it must
                                         predict; a seed slider draws another masking

The numbers come from ``bertcourse.pretraining.fill_mask`` and ``masking_view`` (plain functions,
importable without ipywidgets), so tests check them from Python. Bad input -- no [MASK], an empty
sentence, one longer than the model reads -- is answered once, in the figure where the picture would be
(``message_figure``, as the saliency and window explorers do), and in ``drawn["message"]``, never a traceback. The
message names what the learner typed as the box does: "the sentence".
"""

from __future__ import annotations

import textwrap

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np

from .._validation import counted, require_int_in_range
from ..pretraining import fill_mask, masking_view
from ._base import WIDE, Explorer, nothing_drawn, sentence_box

FILL_MASK_TEXT = "The film is a [MASK] about a young [MASK]."
MASKING_TEXT = "A detective returns to his home town and finds the old house empty."
# The masking table's labels: 9 points at matplotlib's 100 dpi are 12.5 px, and a table line of ROW_INCHES (plus
# its row names) stays narrower than JupyterLab's output area in a window 1400 px wide, so it is not shrunk.
LABEL_POINTS = 9
ROW_INCHES = 8.2
KIND_COLOURS = {"not selected": "#f0f0f0", "[MASK]": "#fdae61", "random": "#d7191c", "kept": "#1a9641"}
MAX_MASKS = 4


def _nothing_drawn(error: Exception, **values) -> dict:
    """What an explorer of this module draws for bad input: the package's message, in the figure only,
    with the argument ``text`` called what the box calls it."""
    message = str(error).replace("`text`", "the sentence")
    return nothing_drawn(message[:1].upper() + message[1:], height=1.2, **values)


class FillMaskExplorer(Explorer):
    """The top-5 predictions of a ``BertForPreTraining`` for every [MASK] of a sentence you type.

    Controls: ``text`` (press Enter). ``drawn``: matrix (masks, 5) probabilities, predictions (per
    [MASK], a list of (token, probability)), title, figure, message.
    """

    def __init__(self, model, tokenizer, text: str = FILL_MASK_TEXT):
        if not hasattr(model, "mlm"):
            raise TypeError(f"`model` must be a BertForPreTraining (it has the MLM head), got {type(model).__name__}.")
        self.model, self.tokenizer = model, tokenizer
        self.text = sentence_box(text)
        self._assemble({"text": self.text}, [self.text])

    def _draw(self, text: str) -> dict:
        try:
            predictions = fill_mask(self.model, self.tokenizer, text, top_k=5)
            if len(predictions) > MAX_MASKS:
                raise ValueError(f"`text` has {len(predictions)} [MASK]s; this explorer shows at most {MAX_MASKS}.")
        except (TypeError, ValueError) as error:
            return _nothing_drawn(error, text=text)
        figure, axes = plt.subplots(
            1, len(predictions), figsize=(3.2 * len(predictions) + 0.6, 2.6), layout="constrained", squeeze=False
        )
        # one scale for every [MASK]: up to the largest probability, so that a shy model's bars still show
        top = min(1.0, max(0.05, 1.3 * max(p for guesses in predictions for _, p in guesses)))
        for number, (ax, guesses) in enumerate(zip(axes[0], predictions, strict=True), start=1):
            tokens, probabilities = zip(*guesses, strict=True)
            ax.barh(range(len(tokens))[::-1], probabilities, color="tab:blue")
            ax.set_yticks(range(len(tokens))[::-1], tokens)
            ax.set_xlim(0, top)
            ax.set_xlabel("probability")
            ax.set_title(f"[MASK] number {number}")
            for y, p in zip(range(len(tokens))[::-1], probabilities, strict=True):
                ax.text(p + 0.01 * top, y, f"{p:.2f}", va="center", fontsize=8)
        title = f"top 5 guesses for: {text}"
        figure.suptitle(textwrap.shorten(title, 110))
        return {
            "matrix": np.array([[p for _, p in guesses] for guesses in predictions]),
            "predictions": predictions,
            "title": title,
            "figure": figure,
            "message": None,
        }


class MLMMaskingExplorer(Explorer):
    """A sentence under BERT's masking: each token, what the model sees in its place, and its label.

    Grey: not selected (label -100, not in the loss); orange: replaced by [MASK]; red: replaced by a
    random token; green: selected but kept as it is. Controls: ``text``, ``seed`` (another draw),
    ``probability`` (the share selected, BERT's 0.15). ``drawn``: matrix (3, seq) -- 0/1 rows
    for selected, [MASK], random --, view (the ``MaskingView``), title, figure, message.
    """

    def __init__(self, tokenizer, text: str = MASKING_TEXT, seed: int = 0, probability: float = 0.15):
        require_int_in_range("seed", seed, 0, 99)
        if not isinstance(probability, (int, float)) or not 0.0 <= probability <= 1.0:
            raise ValueError(f"`probability` must be a number from 0 to 1, got {probability!r}.")
        self.tokenizer = tokenizer
        self.text = sentence_box(text)
        self.seed = widgets.IntSlider(value=seed, min=0, max=99, description="seed")
        self.probability = widgets.FloatSlider(
            value=probability, min=0.0, max=1.0, step=0.05, description="selected share", style=WIDE
        )
        controls = {"text": self.text, "seed": self.seed, "probability": self.probability}
        self._assemble(controls, [self.text, widgets.HBox([self.seed, self.probability])])

    def _draw(self, text: str, seed: int, probability: float) -> dict:
        try:
            view = masking_view(self.tokenizer, text, seed=seed, probability=probability)
        except (TypeError, ValueError) as error:
            return _nothing_drawn(error, text=text, seed=seed)
        n = len(view.tokens)
        rows = (("original", view.tokens), ("model sees", view.seen), ("label", [t or "-100" for t in view.labels]))
        # Each token a column as wide as its longest text, the columns wrapped into lines of at most ROW_INCHES:
        # the picture is then shown at its own size (not shrunk to fit the page) and its labels stay readable.
        widths = [max(0.62, 0.085 * max(len(tokens[x]) for _, tokens in rows) + 0.16) for x in range(n)]
        starts, lines = [0.0] * n, [0] * n
        for x in range(1, n):
            starts[x], lines[x] = starts[x - 1] + widths[x - 1], lines[x - 1]
            if starts[x] + widths[x] > ROW_INCHES:
                starts[x], lines[x] = 0.0, lines[x] + 1
        n_lines = lines[-1] + 1
        figure, ax = plt.subplots(figsize=(ROW_INCHES + 1.2, 0.9 + 1.1 * n_lines), layout="constrained")
        for line in range(n_lines):
            for y, (_, tokens) in enumerate(rows):
                for x in (x for x in range(n) if lines[x] == line):
                    kind, top = view.kinds[x], 3.5 * (n_lines - line) - 1 - y
                    colour = KIND_COLOURS[kind] if y > 0 else "#ffffff"
                    ax.add_patch(
                        plt.Rectangle(
                            (starts[x], top), widths[x] - 0.05, 0.9, facecolor=colour, edgecolor="#999999", lw=0.5
                        )
                    )
                    light = y > 0 and kind in ("random", "kept")
                    ax.text(
                        starts[x] + (widths[x] - 0.05) / 2,
                        top + 0.45,
                        tokens[x],
                        ha="center",
                        va="center",
                        fontsize=LABEL_POINTS,
                        color="white" if light else "black",
                    )
        ax.set_xlim(0, ROW_INCHES)
        ax.set_ylim(0.45, 3.5 * n_lines - 0.05)  # from the last line's bottom to the first's top
        ticks = [
            (3.5 * (n_lines - line) - 1 - y + 0.45, name) for line in range(n_lines) for y, (name, _) in enumerate(rows)
        ]
        ax.set_yticks([t for t, _ in ticks], [name for _, name in ticks], fontsize=LABEL_POINTS)
        ax.set_xticks([])
        ax.tick_params(length=0)
        for side in ax.spines.values():
            side.set_visible(False)
        handles = [plt.Rectangle((0, 0), 1, 1, facecolor=c, edgecolor="#999999") for c in KIND_COLOURS.values()]
        ax.legend(handles, KIND_COLOURS, ncol=4, fontsize=LABEL_POINTS, loc="lower center", bbox_to_anchor=(0.5, 1.0))
        selected = sum(kind != "not selected" for kind in view.kinds)
        title = f"seed {seed}: {selected} of {counted(n - 2, 'token')} selected (probability {probability:.2f})"
        ax.set_title(title, fontsize=10, pad=24)
        matrix = np.array(
            [
                [kind != "not selected" for kind in view.kinds],
                [k == "[MASK]" for k in view.kinds],
                [k == "random" for k in view.kinds],
            ],
            dtype=float,
        )
        return {"matrix": matrix, "view": view, "title": title, "figure": figure, "message": None}
