"""The explorer of notebook 11: where sliding windows fall, and which window each token's output comes from.

Type a text, choose the window and the stride, and see every window as a row over the text's
tokens: light where the window covers a token, dark where that window is the one the token's
output is taken from (the window where it sits most centrally). The picture is drawn from
``bertcourse.long_inputs``' ``window_spans`` and ``central_windows``, so what it shows is what
the package computes. A choice that cannot work (a stride not smaller than the window, an empty
text, a text too long to draw) is said in the figure, not raised.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib.colors import ListedColormap

from .._validation import counted
from ..long_inputs.windows import central_windows, check_window, content_ids, window_spans
from ._base import NOTHING_TO_DRAW, WIDE, _Explorer, message_figure

DEFAULT_LONG_TEXT = (
    "Hamlet, Prince of Denmark, meets the ghost of his father on the castle walls at night, "
    "and learns that his uncle Claudius poured poison into the sleeping king's ear."
)
COLOURS = ListedColormap(["#f2f2f2", "#9ecae1", "#08519c"])  # not covered, covered, the token's output


class WindowExplorer(_Explorer):
    """Sliding windows over a text you type: which tokens each window covers, and each token's window.

    ``tokenizer``: a ``bertcourse.WordPieceTokenizer`` (e.g. from ``bertcourse.load_pretrained()``).
    Controls: ``text`` (a box of several lines, where Enter starts a new line: the picture redraws when
    you click outside it), ``window`` and ``stride`` (in tokens; the stride is how far a window moves).
    ``drawn``: matrix -- (n_windows, n_tokens), 0 = not covered, 1 = covered, 2 = the token's output
    comes from this window --, tokens, spans (n_windows, 2), owner (the
    window of each token's output), message (None, or why nothing could be drawn), title, figure.
    """

    MAX_TOKENS = 120  # more tokens than this would not be readable as tick labels
    MAX_WINDOW = 48

    def __init__(self, tokenizer, text: str = DEFAULT_LONG_TEXT, window: int = 12, stride: int = 8):
        check_window(window, stride)
        if window > self.MAX_WINDOW:
            raise ValueError(f"`window` must be at most {self.MAX_WINDOW} tokens in this explorer, got {window}.")
        self.tokenizer = tokenizer
        self.text = widgets.Textarea(
            value=text, description="text", continuous_update=False, layout=widgets.Layout(width="720px", height="64px")
        )
        self.window = widgets.IntSlider(
            value=window, min=2, max=self.MAX_WINDOW, description="window", continuous_update=False, style=WIDE
        )
        self.stride = widgets.IntSlider(
            value=stride, min=1, max=self.MAX_WINDOW, description="stride", continuous_update=False, style=WIDE
        )
        controls = {"text": self.text, "window": self.window, "stride": self.stride}
        self._assemble(controls, [self.text, widgets.HBox([self.window, self.stride])])

    def _draw(self, text: str, window: int, stride: int) -> dict:
        tokens, spans, message = self._windows(text, window, stride)
        if message is not None:
            figure, title = message_figure(message, height=1.6), NOTHING_TO_DRAW
            return {
                "matrix": None,
                "tokens": tokens,
                "spans": None,
                "owner": None,
                "message": message,
                "title": title,
                "figure": figure,
            }
        owner = central_windows(spans)  # (n_tokens,)
        positions = torch.arange(len(tokens))  # (n_tokens,)
        covered = (positions >= spans[:, :1]) & (positions < spans[:, 1:])  # (n_windows, n_tokens)
        matrix = covered.long()
        matrix[owner, positions] = 2
        title = (
            f"window {window}, stride {stride}: {counted(spans.shape[0], 'window')} over "
            f"{counted(len(tokens), 'token')}, overlap {window - stride}"
        )
        figure, ax = plt.subplots(figsize=(min(2 + 0.16 * len(tokens), 16), 1.2 + 0.3 * spans.shape[0]))
        ax.imshow(matrix.numpy(), cmap=COLOURS, vmin=0, vmax=2, aspect="auto", interpolation="nearest")
        ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=8)
        ax.set_yticks(range(spans.shape[0]), [f"window {i}: [{s}, {e})" for i, (s, e) in enumerate(spans.tolist())])
        ax.set_xlabel("token (dark: its output comes from this window, where it sits most centrally)")
        ax.set_title(title)
        figure.tight_layout()
        return {
            "matrix": matrix,
            "tokens": tokens,
            "spans": spans,
            "owner": owner,
            "message": None,
            "title": title,
            "figure": figure,
        }

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
