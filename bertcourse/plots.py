"""Pictures of attention: heatmaps with token labels, a head view, position tables, all heads at once.

Every function takes torch tensors (on any device, of any dtype, with or without
gradients: they are detached, moved to the CPU and cast to float) or numpy arrays, checks
the shapes first, and draws with plain matplotlib, so the pictures show in Colab, Binder,
JupyterLab and on GitHub alike, offline, with no JavaScript. Each returns what it drew on
(an ``Axes`` or a ``Figure``), so a notebook can add to it; end the cell with ``plt.show()``.

    plot_attention(weights, tokens)          one (q_len, k_len) map, queries down, keys across
    plot_head_view(weights, tokens)          lines from each token (left) to the tokens it attends to (right)
    plot_position_encoding(table)            a (positions, dims) table, e.g. the sinusoids
    plot_heads_grid(layer_weights, tokens)   every head of one layer, (heads, seq, seq)

bertviz draws an interactive head view in the browser. It is not a requirement of this
course, because its views load JavaScript from a CDN and stay blank offline; ours do not.
A learner who has it (``pip install bertviz``, online) can hand it our model's attentions
as they are -- one (batch, heads, seq, seq) tensor per layer, batch of 1::

    from bertviz import head_view

    model, tok = bertcourse.load_pretrained()
    batch = tok("The cat sat on the mat because it was tired.")
    out = model(batch["input_ids"], attention_mask=batch["attention_mask"], output_attentions=True)
    head_view(out.attentions, tok.convert_ids_to_tokens(batch["input_ids"][0]))
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.collections import LineCollection

from ._validation import counted

HEAD_VIEW_COLOR = (0.12, 0.47, 0.71)  # matplotlib's default blue, as RGB
HEADS_GRID_MAX_SIZE = (12.0, 6.0)  # inches (width, height): a laptop's notebook shows this whole, unshrunk
HEADS_GRID_LABEL_SIZE = 8.0  # points: the token labels of a heads grid
HEADS_GRID_MIN_LABEL_SIZE = 5.0  # points: a long sentence's labels shrink to this, then some are left out
_AXIS_LABEL_ROOM = 0.3  # inches for "query (attending)" left of the labels, "key (attended to)" below them
_TICK_ROOM = 0.1  # inches between a panel and its token labels
_SUPTITLE_ROOM = 0.4  # inches above the panels for the title
_EDGE = 0.1  # inches of white above the panels when there is no title
_PANEL_TITLE_ROOM = 0.28  # inches above each panel for "head 3"
_COLUMN_GAP = 0.08  # inches between two panels of a row
_COLORBAR_WIDTH = 0.14  # inches
_CHARACTER_WIDTH = 0.62  # of the font size: room per character of a token label
_COLORBAR_ROOM = _COLUMN_GAP + _COLORBAR_WIDTH + 0.75  # inches right of the panels: gap, colourbar, its ticks and label


def plot_attention(
    weights, tokens, key_tokens=None, ax=None, title=None, *, colorbar_label="attention weight", vmin=None, vmax=None
):
    """Heatmap of a (q_len, k_len) attention matrix: row i is where query token i looks.

    tokens label the rows (queries); key_tokens label the columns (keys) and default to
    tokens (self-attention). Works for raw scores too: pass ``colorbar_label="score"``,
    or ``colorbar_label=None`` for no colorbar. The colour scale runs from the smallest to
    the largest value drawn, unless ``vmin`` and ``vmax`` fix its ends: ``vmin=0, vmax=1``
    puts several weight maps (or a 0/1 mask) on one scale. Returns the Axes.
    """
    matrix = as_array("weights", weights, ndim=2, shape_doc="(q_len, k_len)")
    q_len, k_len = matrix.shape
    tokens = as_token_list("tokens", tokens)
    require_length("tokens", tokens, q_len, "the number of rows (queries) of `weights`")
    if key_tokens is None:
        if k_len != q_len:
            raise ValueError(
                f"`weights` has {counted(q_len, 'row (query)', 'rows (queries)')} but "
                f"{counted(k_len, 'column (key)', 'columns (keys)')}, so `tokens` cannot label "
                "both axes: pass `key_tokens`, one label per key."
            )
        key_tokens = tokens
    else:
        key_tokens = as_token_list("key_tokens", key_tokens)
        require_length("key_tokens", key_tokens, k_len, "the number of columns (keys) of `weights`")
    if ax is None:
        size = (min(1.5 + 0.4 * k_len, 14.0), min(1.0 + 0.35 * q_len, 14.0))
        _, ax = plt.subplots(figsize=size, layout="constrained")
    image = ax.imshow(matrix, cmap="viridis", vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(k_len), key_tokens, rotation=90)
    ax.set_yticks(range(q_len), tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    if title is not None:
        ax.set_title(title)
    if colorbar_label is not None:
        ax.figure.colorbar(image, ax=ax, label=colorbar_label)
    return ax


def plot_head_view(weights, tokens, ax=None, title=None):
    """One head as lines: each token on the left is joined to every token it attends to on the right.

    weights: (seq, seq) attention weights in [0, 1]. A line's opacity is its weight, and
    its width grows with it; a zero weight (a masked key) draws no line. Returns the Axes.
    """
    matrix = as_array("weights", weights, ndim=2, shape_doc="(seq, seq)")
    seq_len = matrix.shape[0]
    if matrix.shape[1] != seq_len:
        raise ValueError(
            f"`weights` must be a square (seq, seq) self-attention matrix for a head view, got shape "
            f"{matrix.shape}; use plot_attention for (q_len, k_len) maps."
        )
    if matrix.size and (matrix.min() < 0 or matrix.max() > 1 + 1e-6):
        raise ValueError(
            f"`weights` must hold attention weights in [0, 1] (softmax outputs), got values from "
            f"{matrix.min():.3g} to {matrix.max():.3g}; raw scores need a softmax first."
        )
    tokens = as_token_list("tokens", tokens)
    require_length("tokens", tokens, seq_len, "the size of `weights`")
    if ax is None:
        _, ax = plt.subplots(figsize=(4.0, min(0.8 + 0.3 * seq_len, 16.0)), layout="constrained")
    queries, keys = np.nonzero(matrix > 0)  # one line per (query, key) pair with some weight
    line_weights = np.clip(matrix[queries, keys], 0.0, 1.0)
    segments = [[(0.0, -q), (1.0, -k)] for q, k in zip(queries, keys, strict=True)]
    colors = [(*HEAD_VIEW_COLOR, w) for w in line_weights]  # RGBA: alpha = attention weight
    ax.add_collection(LineCollection(segments, colors=colors, linewidths=0.5 + 3.5 * line_weights))
    for position, token in enumerate(tokens):
        ax.text(-0.05, -position, token, ha="right", va="center")
        ax.text(1.05, -position, token, ha="left", va="center")
    ax.text(-0.05, 1, "query", ha="right", va="center", fontweight="bold")
    ax.text(1.05, 1, "key", ha="left", va="center", fontweight="bold")
    ax.set_xlim(-0.6, 1.6)
    ax.set_ylim(-seq_len, 1.6)
    ax.axis("off")
    if title is not None:
        ax.set_title(title)
    return ax


def plot_position_encoding(table, ax=None, title=None):
    """Heatmap of a (positions, dims) position table: one row per position, one column per feature.

    Red is positive, blue negative, on a scale symmetric around zero, so sinusoids and
    learned BERT position embeddings read the same way. Returns the Axes.
    """
    values = as_array("table", table, ndim=2, shape_doc="(max_len, d_model)")
    if ax is None:
        _, ax = plt.subplots(figsize=(7.0, 4.0), layout="constrained")
    limit = float(np.abs(values).max()) if values.size else 1.0
    limit = limit or 1.0  # an all-zero table still needs a colour scale
    image = ax.imshow(values, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto", interpolation="nearest")
    ax.set_xlabel("dimension")
    ax.set_ylabel("position")
    ax.set_title(title if title is not None else "position encoding")
    ax.figure.colorbar(image, ax=ax, label="value")
    return ax


def plot_heads_grid(layer_weights, tokens, title=None):
    """Every head of one layer side by side: layer_weights (heads, seq, seq). Returns the Figure.

    All panels share one colour scale (0 to the largest weight), so heads compare fairly;
    its colourbar stands right of the last column. The grid is the one with the largest
    panels inside ``HEADS_GRID_MAX_SIZE`` (12 heads: two rows of six), so a laptop shows the
    whole layer without scrolling or shrinking it. Only the first column carries query
    labels and only the bottom panels key labels: ``HEADS_GRID_LABEL_SIZE`` points, smaller
    for a long sentence, and for a very long one only every second (third, ...) token.

    The panels are placed by arithmetic, not by a layout engine: a layout engine measures
    every label on every draw, which made the figure several times slower to show.
    """
    weights = as_array("layer_weights", layer_weights, ndim=3, shape_doc="(heads, seq, seq)")
    num_heads, q_len, k_len = weights.shape
    if num_heads == 0:
        raise ValueError("`layer_weights` must hold at least one head, got shape (0, ...).")
    if q_len != k_len:
        raise ValueError(f"`layer_weights` must be self-attention maps (heads, seq, seq), got shape {weights.shape}.")
    if q_len == 0:
        raise ValueError(f"`layer_weights` must hold at least one token, got shape {weights.shape}.")
    tokens = as_token_list("tokens", tokens)
    require_length("tokens", tokens, q_len, "the sequence length of `layer_weights`")
    label_room = label_width_inches(tokens, HEADS_GRID_LABEL_SIZE) + _TICK_ROOM  # at most, beside the panels
    top = _SUPTITLE_ROOM if title is not None else _EDGE
    rows, columns, panel = heads_grid_shape(
        num_heads,
        q_len,
        HEADS_GRID_MAX_SIZE[0] - _AXIS_LABEL_ROOM - label_room - _COLORBAR_ROOM,
        HEADS_GRID_MAX_SIZE[1] - top - _AXIS_LABEL_ROOM - label_room,
    )
    row_height = panel * 72 / q_len  # points (72 to the inch) between two token labels
    label_size = max(HEADS_GRID_MIN_LABEL_SIZE, min(HEADS_GRID_LABEL_SIZE, 0.9 * row_height))
    label_step = math.ceil(label_size / (0.9 * row_height))  # label every token, or every second, ...: no overlap
    ticks, tick_labels = range(0, q_len, label_step), tokens[::label_step]
    label_room = label_width_inches(tick_labels, label_size) + _TICK_ROOM  # as drawn
    left = bottom = _AXIS_LABEL_ROOM + label_room
    width = min(left + columns * panel + (columns - 1) * _COLUMN_GAP + _COLORBAR_ROOM, HEADS_GRID_MAX_SIZE[0])
    height = min(top + rows * (_PANEL_TITLE_ROOM + panel) + bottom, HEADS_GRID_MAX_SIZE[1])  # min: rounding only
    figure = plt.figure(figsize=(width, height))
    vmax = float(weights.max()) or 1.0
    for head in range(num_heads):
        row, column = divmod(head, columns)
        x0 = left + column * (panel + _COLUMN_GAP)  # inches from the left edge
        y0 = bottom + (rows - 1 - row) * (_PANEL_TITLE_ROOM + panel)  # inches from the bottom edge
        ax = figure.add_axes((x0 / width, y0 / height, panel / width, panel / height))
        image = ax.imshow(weights[head], cmap="viridis", vmin=0.0, vmax=vmax, aspect="auto", interpolation="nearest")
        ax.set_title(f"head {head}", fontsize=9, pad=3)
        if head + columns >= num_heads:  # no head below: this panel labels the keys
            ax.set_xticks(ticks, tick_labels, rotation=90, fontsize=label_size)
        else:
            ax.set_xticks([])
        if column == 0:
            ax.set_yticks(ticks, tick_labels, fontsize=label_size)
        else:
            ax.set_yticks([])
    panels_right = left + columns * panel + (columns - 1) * _COLUMN_GAP
    panels_height = rows * panel + (rows - 1) * _PANEL_TITLE_ROOM
    colorbar_axes = figure.add_axes(
        ((panels_right + _COLUMN_GAP) / width, bottom / height, _COLORBAR_WIDTH / width, panels_height / height)
    )
    figure.colorbar(image, cax=colorbar_axes, label="attention weight")
    figure.supxlabel("key (attended to)", x=(left + panels_right) / 2 / width, y=0.02, va="bottom")
    figure.supylabel("query (attending)", x=0.04 / width, ha="left", y=(bottom + panels_height / 2) / height)
    if title is not None:
        figure.suptitle(title, x=(left + panels_right) / 2 / width, y=1 - 0.08 / height, va="top")
    return figure


def heads_grid_shape(num_heads: int, seq_len: int, room_width: float, room_height: float) -> tuple[int, int, float]:
    """(rows, columns, panel inches) of the grid with the largest square panels that fit the room.

    A panel is at most ``1.2 + 0.2 * seq_len`` inches (a short sentence needs no more); of
    two grids with equal panels, the one with fewer rows wins.
    """
    best = None
    for columns in range(1, num_heads + 1):
        rows = math.ceil(num_heads / columns)
        panel = min(
            1.2 + 0.2 * seq_len,
            (room_width - (columns - 1) * _COLUMN_GAP) / columns,
            room_height / rows - _PANEL_TITLE_ROOM,
        )
        if best is None or (panel, -rows) > (best[2], -best[0]):
            best = (rows, columns, panel)
    return best


def label_width_inches(texts: list[str], size: float) -> float:
    """A generous width, in inches, for the longest of ``texts`` at ``size`` points.

    Counted from the number of characters (0.62 of the font size each, a little more than
    DejaVu Sans' average), not measured by a renderer: the figure's size then depends only
    on the tokens, never on a font library's version, so a notebook's "<Figure size ...>"
    output is the same on every machine.
    """
    return max(len(text) for text in texts) * _CHARACTER_WIDTH * size / 72


def as_array(name: str, x, *, ndim: int, shape_doc: str) -> np.ndarray:
    """A float numpy copy of a tensor or array, checked to have ``ndim`` dimensions."""
    if isinstance(x, torch.Tensor):
        array = x.detach().cpu().float().numpy()
    else:
        try:
            array = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"`{name}` must be a torch tensor or a numpy array, got {type(x).__name__}.") from None
    if array.ndim != ndim:
        hint = ""
        if array.ndim > ndim:
            hint = " Pick one map first, e.g. `attentions[layer][0, head]` for one sentence and one head."
        raise ValueError(f"`{name}` must be {ndim}-D {shape_doc}, got shape {array.shape}.{hint}")
    return array


def as_token_list(name: str, tokens) -> list[str]:
    """``tokens`` as a list of strings; a bare string is refused (it is a sentence, not tokens)."""
    if isinstance(tokens, str):
        raise TypeError(
            f"`{name}` must be a list of token strings, got the string {tokens[:40]!r}; "
            "split it first, e.g. `tokenizer.tokenize(text)`."
        )
    try:
        return [str(token) for token in tokens]
    except TypeError:
        raise TypeError(f"`{name}` must be a list of token strings, got {type(tokens).__name__}.") from None


def require_length(name: str, tokens: list[str], expected: int, what: str) -> None:
    if len(tokens) != expected:
        raise ValueError(
            f"`{name}` has {counted(len(tokens), 'label')} but {what} is {expected}: pass one label per token."
        )
