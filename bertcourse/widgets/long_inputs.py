"""The explorer of notebook 11: where sliding windows fall, which window each token's output comes from,
and, with a model, which window answers a query.

Type a text, choose the window and the stride, and see every window as a row over the text's
tokens: light where the window covers a token, dark where that window is the one the token's
output is taken from (the window where it sits most centrally). Given the model, the explorer
also embeds every window as section 3.5 does (each window framed by [CLS] and [SEP], mean-pooled,
normalised) and a query you type, and draws each window's cosine with the query beside its row:
the highest is the passage a semantic search returns. Move the stride and watch the answer's
window change, or a sentence split between two windows lose to a window that holds it whole.

The picture is drawn from ``bertcourse.long_inputs``' ``window_spans``, ``central_windows`` and
``window_batch`` and ``bertcourse.pooling.sentence_embeddings``, so what it shows is what the
package computes. A choice that cannot work (a stride not smaller than the window, an empty text,
a text too long to draw) is said in the figure, not raised.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.colors import ListedColormap

from .._validation import counted
from ..long_inputs.windows import central_windows, check_window, content_ids, window_batch, window_spans
from ..pooling import sentence_embeddings
from ._base import WIDE, Explorer, nothing_drawn

DEFAULT_LONG_TEXT = (
    "Hamlet, Prince of Denmark, meets the ghost of his father on the castle walls at night. The ghost says "
    "that his brother Claudius poured poison into his ear while he slept in the garden. Hamlet pretends to be "
    "mad and stages a play that shows the murder, to watch the new king's face. Later a gravedigger hands him "
    "the skull of Yorick, the jester he loved as a child."
)
DEFAULT_QUERY = "Who was the jester?"
# Token labels of 9 points at matplotlib's 100 dpi are 12.5 px; TOKEN_INCHES a token and TOKENS_PER_PANEL a panel
# keep the picture narrower than JupyterLab's output area in a window 1400 px wide, so it is not shrunk.
LABEL_POINTS = 9
TOKEN_INCHES = 0.19
TOKENS_PER_PANEL = 30
COLOURS = ListedColormap(["#f2f2f2", "#9ecae1", "#08519c"])  # not covered, covered, the token's output


class WindowExplorer(Explorer):
    """Sliding windows over a text you type: which tokens each window covers, each token's window, and
    (given ``model``) each window's cosine with a query.

    ``tokenizer``: a ``bertcourse.WordPieceTokenizer`` (e.g. from ``bertcourse.load_pretrained()``);
    ``model``: the matching ``BertModel``, or None for the windows alone.
    Controls: ``text`` (a box of several lines, where Enter starts a new line: the picture redraws when
    you click outside it), ``window`` and ``stride`` (in tokens; the stride is how far a window moves,
    not Hugging Face's overlap), and with a model ``query`` (redraws on Enter).
    ``drawn``: matrix -- (n_windows, n_tokens), 0 = not covered, 1 = covered, 2 = the token's output
    comes from this window --, tokens, spans (n_windows, 2), owner (the window of each token's output),
    similarities ((n_windows,) cosines of the windows' embeddings with the query's, or None), best (the
    window with the highest cosine, or None), message (None, or why nothing could be drawn), title, figure.
    """

    MAX_TOKENS = 120  # more tokens than this would not be readable as tick labels
    MAX_WINDOW = 48

    def __init__(
        self,
        tokenizer,
        model=None,
        text: str = DEFAULT_LONG_TEXT,
        query: str = DEFAULT_QUERY,
        window: int = 16,
        stride: int = 12,
    ):
        check_window(window, stride)
        if window > self.MAX_WINDOW:
            raise ValueError(f"`window` must be at most {self.MAX_WINDOW} tokens in this explorer, got {window}.")
        self.tokenizer, self.model = tokenizer, model
        self.text = widgets.Textarea(
            value=text, description="text", continuous_update=False, layout=widgets.Layout(width="720px", height="80px")
        )
        self.window = widgets.IntSlider(
            value=window, min=2, max=self.MAX_WINDOW, description="window", continuous_update=False, style=WIDE
        )
        self.stride = widgets.IntSlider(
            value=stride, min=1, max=self.MAX_WINDOW, description="stride", continuous_update=False, style=WIDE
        )
        controls = {"text": self.text, "window": self.window, "stride": self.stride}
        rows = [self.text, widgets.HBox([self.window, self.stride])]
        if model is not None:
            self.query = widgets.Text(
                value=query, description="query", continuous_update=False, layout=widgets.Layout(width="720px")
            )
            controls["query"] = self.query
            rows.insert(1, self.query)
        self._assemble(controls, rows)

    def _draw(self, text: str, window: int, stride: int, query: str = "") -> dict:
        tokens, spans, message = self._windows(text, window, stride)
        if message is not None:
            return nothing_drawn(
                message, height=1.6, tokens=tokens, spans=None, owner=None, similarities=None, best=None
            )
        owner = central_windows(spans)  # (n_tokens,)
        positions = torch.arange(len(tokens))  # (n_tokens,)
        covered = (positions >= spans[:, :1]) & (positions < spans[:, 1:])  # (n_windows, n_tokens)
        matrix = covered.long()
        matrix[owner, positions] = 2
        similarities = self._similarities(text, spans, query)  # (n_windows,) or None
        best = None if similarities is None else int(similarities.argmax())
        title = (
            f"window {window}, stride {stride}: {counted(spans.shape[0], 'window')} over "
            f"{counted(len(tokens), 'token')}, overlap {window - stride}"
        )
        if best is not None:
            title += f"; the query's best window: {best} (cosine {float(similarities[best]):.2f})"
        figure = self._figure(tokens, spans, matrix, similarities, best, title)
        return {
            "matrix": matrix,
            "tokens": tokens,
            "spans": spans,
            "owner": owner,
            "similarities": similarities,
            "best": best,
            "message": None,
            "title": title,
            "figure": figure,
        }

    def _similarities(self, text: str, spans: torch.Tensor, query: str):
        """Each window's cosine with the query, as section 3.5's search computes it; None without a model or query."""
        if self.model is None or not query.strip():
            return None
        ids = content_ids(self.tokenizer, text)  # (n_tokens,)
        device = next(self.model.parameters()).device
        windows = {name: t.to(device) for name, t in window_batch(ids, spans, self.tokenizer).items()}
        asked = {name: t.to(device) for name, t in self.tokenizer([query]).items()}
        with torch.no_grad():
            window_vectors = sentence_embeddings(self.model, windows)  # (n_windows, hidden), unit rows
            query_vector = sentence_embeddings(self.model, asked)[0]  # (hidden,)
        return (window_vectors @ query_vector).cpu()  # (n_windows,): cosines

    @staticmethod
    def _figure(tokens, spans, matrix, similarities, best, title):
        """The map wrapped as text is: at most TOKENS_PER_PANEL tokens a panel, the panels one under another (each
        with every window's row), so that the picture is shown at its own size and its token labels stay readable;
        with a query, each window's cosine beside the first panel."""
        n_windows, n_tokens = spans.shape[0], len(tokens)
        n_panels = -(-n_tokens // TOKENS_PER_PANEL)
        per_panel = -(-n_tokens // n_panels)  # the panels as even as they can be
        row_inches = 0.22 if n_windows <= 12 else max(0.08, 2.6 / n_windows)
        map_inches = TOKEN_INCHES * per_panel
        columns = 1 if similarities is None else 2
        figure, axes = plt.subplots(
            n_panels,
            columns,
            figsize=(1.6 + map_inches + 2.0 * (columns - 1), 0.7 + n_panels * (row_inches * n_windows + 1.0)),
            gridspec_kw={"width_ratios": [map_inches, 1.8][:columns]},
            squeeze=False,
            layout="constrained",
        )
        labels = [f"window {i}: [{s}, {e})" for i, (s, e) in enumerate(spans.tolist())]
        for panel, row in enumerate(axes):
            ax, start = row[0], panel * per_panel
            shown = matrix[:, start : start + per_panel].numpy()
            ax.imshow(shown, cmap=COLOURS, vmin=0, vmax=2, aspect="auto", interpolation="nearest")
            ax.set_xlim(-0.5, per_panel - 0.5)  # the last panel's columns as wide as the others'
            ax.set_xticks(range(shown.shape[1]), tokens[start : start + per_panel], rotation=90, fontsize=LABEL_POINTS)
            ax.set_yticks(range(n_windows), labels, fontsize=LABEL_POINTS if row_inches >= 0.15 else 6)
            if columns == 2 and panel > 0:
                row[1].set_axis_off()
        axes[-1, 0].set_xlabel(
            "token (dark: its output comes from this window, where it sits most centrally)", fontsize=LABEL_POINTS
        )
        if similarities is not None:
            bars = axes[0, 1]
            colours = ["#d95f02" if w == best else "#bdbdbd" for w in range(n_windows)]
            bars.barh(range(n_windows), similarities.numpy(), color=colours)
            bars.set_ylim(axes[0, 0].get_ylim())  # each bar beside its window's row
            bars.set_yticks([])
            bars.set_xlabel("cosine with the query", fontsize=LABEL_POINTS)
            bars.set_xlim(min(0.0, float(similarities.min()) - 0.05), 1.0)
            bars.tick_params(labelsize=LABEL_POINTS)
            bars.grid(axis="x", alpha=0.3)
        figure.suptitle(title, fontsize=10)
        return figure

    def _windows(self, text: str, window: int, stride: int):
        """(tokens, spans, None), or (tokens, None, why nothing can be drawn): the package's own error message."""
        if not text.strip():
            return [], None, "Type a text first: the box is empty."
        tokens = self.tokenizer.convert_ids_to_tokens(content_ids(self.tokenizer, text))
        if len(tokens) > self.MAX_TOKENS:
            return (
                tokens,
                None,
                f"The text has {len(tokens)} tokens; this explorer draws at most {self.MAX_TOKENS}: shorten it.",
            )
        try:
            return tokens, window_spans(len(tokens), window, stride), None
        except ValueError as error:
            return tokens, None, str(error)
