"""The explorer of notebook 10: type a review, see what a fine-tuned classifier predicts and which tokens push it.

Each word piece of the review is drawn as coloured text: green where the piece pushes the prediction
towards the chosen class, red where it pushes away, pale yellow where it hardly matters. Two ways to score
a piece, both from ``bertcourse.finetuning``:

- **gradient × input** (``gradient_x_input``): how the log-probability of the class would change,
  to first order, if the piece's *word* embedding were scaled to zero (its position and token-type
  embeddings stay); one backward pass.
- **occlusion** (``occlusion``): how much the probability of the class drops when the piece is
  left out of the input; one forward pass per piece (run as one batch).

The two often disagree, and not only on details (on the default review of a model fine-tuned as in
notebook 10 their correlation over the pieces was measured at 0.09): the gradient is a local, linear
view; occlusion asks a real counterfactual, but a piece left out also changes its neighbours' context.
Bad input (an empty box, a review longer than the explorer draws) is said in the figure, not raised.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib
import matplotlib.pyplot as plt
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize

from ..finetuning import BertForSequenceClassification, gradient_x_input, occlusion
from ._base import WIDE, Explorer, nothing_drawn

DEFAULT_REVIEW = "A witty, touching film, although the second half drags on far too long."
METHODS = ("gradient × input", "occlusion")
COLOURS = matplotlib.colormaps["RdYlGn"]


class SaliencyExplorer(Explorer):
    """A review you type, the classifier's probability, and each word piece coloured by how it pushes it.

    ``model``: a ``bertcourse.finetuning.BertForSequenceClassification`` (fine-tuned); ``tokenizer``: its
    ``WordPieceTokenizer``; ``target``: the class whose probability is shown (by default the last one,
    "fresh" for the reviews). Controls: ``text`` (press Enter or leave the box), ``method``
    (``METHODS``). ``drawn``: matrix -- (n_pieces,) the scores of the pieces between [CLS] and [SEP] --,
    tokens, probability (of ``target``), predicted (the label the model picks), message (None, or why
    nothing could be drawn), title, figure.
    """

    MAX_TOKENS = 80  # more pieces than this would not be readable as coloured text

    def __init__(self, model, tokenizer, text: str = DEFAULT_REVIEW, method: str = METHODS[0], target=None):
        if not isinstance(model, BertForSequenceClassification):
            raise TypeError(f"`model` must be a BertForSequenceClassification, got {type(model).__name__}.")
        if method not in METHODS:
            raise ValueError(f"`method` must be one of {METHODS}, got {method!r}.")
        target = model.num_labels - 1 if target is None else target
        if isinstance(target, bool) or not isinstance(target, int) or not 0 <= target < model.num_labels:
            raise ValueError(
                f"`target` must be a class index 0..{model.num_labels - 1} ({', '.join(model.label_names)}), "
                f"got {target!r}."
            )
        self.model, self.tokenizer, self.target = model, tokenizer, target
        # One line, so that Enter redraws (in a Textarea, Enter adds a newline and nothing happens);
        # continuous_update=False: one redraw on Enter or on leaving the box, not one per key.
        self.text = widgets.Text(
            value=text, description="review", continuous_update=False, layout=widgets.Layout(width="720px")
        )
        self.method = widgets.ToggleButtons(options=list(METHODS), value=method, description="score", style=WIDE)
        self._assemble({"text": self.text, "method": self.method}, [self.text, self.method])

    def _draw(self, text: str, method: str) -> dict:
        message = self._problem(text)
        if message is not None:
            return nothing_drawn(message, tokens=[], probability=None, predicted=None)
        batch = self.tokenizer(text)
        if method == METHODS[0]:
            scores = gradient_x_input(self.model, batch, self.target)[0]  # (seq,)
        else:
            scores = occlusion(self.model, batch, self.target)  # (seq,)
        was_training = self.model.training
        self.model.eval()
        try:
            probabilities = self.model(**batch).logits.detach().softmax(dim=-1)[0]  # (num_labels,)
        finally:
            self.model.train(was_training)
        tokens = self.tokenizer.convert_ids_to_tokens(batch["input_ids"][0])[1:-1]
        scores = scores[1:-1]  # (n_pieces,): [CLS] and [SEP] left out
        probability = float(probabilities[self.target])
        predicted = self.model.label_names[int(probabilities.argmax())]
        name = self.model.label_names[self.target]
        title = (
            f"P({name}) = {probability:.2f}, predicted: {predicted} · {method}: "
            f"green pushes towards {name}, red away from it"
        )
        figure = self._coloured_text(tokens, scores, title)
        return {
            "matrix": scores,
            "tokens": tokens,
            "probability": probability,
            "predicted": predicted,
            "message": None,
            "title": title,
            "figure": figure,
        }

    def _problem(self, text: str) -> str | None:
        if not text.strip():
            return "Type a review first: the box is empty."
        n = len(self.tokenizer.tokenize(text)) - 2
        if n > self.MAX_TOKENS:
            return f"The review has {n} word pieces; this explorer draws at most {self.MAX_TOKENS}: shorten it."
        return None

    @staticmethod
    def _coloured_text(tokens, scores, title):
        """Word pieces as monospace text on coloured boxes, wrapped into lines of at most 60 characters."""
        largest = float(scores.abs().max()) or 1.0
        norm = Normalize(vmin=-largest, vmax=largest)
        lines, line, width = [], [], 0
        for token, score in zip(tokens, scores.tolist(), strict=True):
            if line and width + len(token) + 1 > 60:
                lines.append(line)
                line, width = [], 0
            line.append((token, score))
            width += len(token) + 1
        lines.append(line)
        figure, ax = plt.subplots(figsize=(10, 0.9 + 0.45 * len(lines)))
        ax.set_xlim(0, 61)
        ax.set_ylim(len(lines), -0.6)
        for row, pieces in enumerate(lines):
            x = 0
            for token, score in pieces:
                ax.text(
                    x,
                    row,
                    token,
                    family="monospace",
                    fontsize=12,
                    va="center",
                    bbox={"boxstyle": "square,pad=0.15", "facecolor": COLOURS(norm(score)), "edgecolor": "none"},
                )
                x += len(token) + 1
        ax.set_axis_off()
        ax.set_title(title, fontsize=10)
        colourbar = figure.colorbar(ScalarMappable(norm=norm, cmap=COLOURS), ax=ax, fraction=0.03, pad=0.01)
        colourbar.set_label("score")
        return figure
