"""The explorers of notebooks 01-07; see ``bertcourse.widgets`` for how every explorer works.

Each ``_draw`` calls a measurement of ``bertcourse.experiments`` and only draws what it returns,
so every number on screen can be recomputed, and tested, without a widget.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from matplotlib import patheffects
from matplotlib.patches import Rectangle
from matplotlib.ticker import LogLocator

from .._validation import counted, require_int_in_range, require_positive_int, require_seed
from ..experiments import (
    attention_maps,
    gradient_norms_per_layer,
    masked_attention,
    sinusoid_wavelength,
    softmax_saturation,
)
from ..plots import plot_attention, plot_head_view, plot_heads_grid, plot_position_encoding
from ..positional import sinusoidal_position_encoding
from ._base import DEFAULT_TEXT, WIDE, Explorer, checkbox, layer_and_head, sentence_box


class ScalingExplorer(Explorer):
    """One query's softmax over ``num_keys`` random keys, with and without the 1/sqrt(d_k) scale.

    q and k have unit-variance entries, so q.k has variance d_k: without the scale, large d_k
    makes the scores spread out, the softmax saturates to one key (low entropy) and its
    gradient d softmax / d scores vanishes.

    Controls: ``d_k`` (2 ... 1024, powers of two), ``scaled`` (divide by sqrt(d_k)), ``seed``.
    ``drawn``: matrix (1, num_keys) -- the query's row of attention weights --, scores
    (num_keys,) after any scaling, score_std, entropy (nats), max_entropy (log num_keys),
    grad_norm (Frobenius norm of the softmax Jacobian), title, figure: exactly what
    ``bertcourse.experiments.softmax_saturation(d_k, scaled, num_keys, seed)`` measures.
    """

    D_K_CHOICES = tuple(2**power for power in range(1, 11))  # 2, 4, ..., 1024

    def __init__(self, num_keys: int = 16, d_k: int = 64, scaled: bool = True, seed: int = 0):
        require_positive_int("num_keys", num_keys)
        if d_k not in self.D_K_CHOICES:
            raise ValueError(f"`d_k` must be one of {self.D_K_CHOICES}, got {d_k!r}.")
        require_int_in_range("seed", seed, 0, 99)
        self.num_keys = num_keys
        self.d_k = widgets.SelectionSlider(options=list(self.D_K_CHOICES), value=d_k, description="d_k")
        self.scaled = checkbox(scaled, "divide scores by √d_k")
        self.seed = widgets.IntSlider(value=seed, min=0, max=99, description="seed")
        controls = {"d_k": self.d_k, "scaled": self.scaled, "seed": self.seed}
        self._assemble(controls, [widgets.HBox([self.d_k, self.scaled, self.seed])])

    def _draw(self, d_k: int, scaled: bool, seed: int) -> dict:
        measured = softmax_saturation(d_k, scaled, self.num_keys, seed)
        scores, weights = measured["scores"], measured["weights"]  # (num_keys,) each
        entropy, max_entropy, grad_norm = measured["entropy"], measured["max_entropy"], measured["jacobian_norm"]
        how = r"scores / $\sqrt{d_k}$" if scaled else "unscaled scores"
        title = (
            f"$d_k$ = {d_k}, {how}: entropy {entropy:.2f} of at most {max_entropy:.2f} nats, "
            f"softmax Jacobian norm {grad_norm:.3f}"
        )
        figure, (ax_scores, ax_weights) = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
        keys = range(self.num_keys)
        ax_scores.bar(keys, scores.numpy(), color="tab:gray")
        score_formula = r"$q \cdot k / \sqrt{d_k}$" if scaled else r"$q \cdot k$"
        ax_scores.set_title(f"scores {score_formula} (std {measured['score_std']:.2f})")
        ax_scores.set_xlabel("key")
        ax_scores.set_ylabel("score")
        ax_weights.bar(keys, weights.numpy(), color="tab:blue")
        ax_weights.set_ylim(0, 1.05)
        ax_weights.set_title("softmax: the query's attention weights")
        ax_weights.set_xlabel("key")
        ax_weights.set_ylabel("attention weight")
        figure.suptitle(title)
        return {
            "matrix": weights[None, :],  # (1, num_keys)
            "scores": scores,
            "score_std": measured["score_std"],
            "entropy": entropy,
            "max_entropy": max_entropy,
            "grad_norm": grad_norm,
            "title": title,
            "figure": figure,
        }


class MaskingExplorer(Explorer):
    """A padded batch of three sentences through scaled dot-product attention, masks on or off.

    The sentences are cut to the lengths on the sliders and padded with [PAD] to the longest.
    Queries, keys and values come from random vectors (one shared vector for every [PAD]),
    so the picture is about the masks, not about meaning: the numbers are
    ``bertcourse.experiments.masked_attention(lengths, padding, causal, max_len=9, seed=seed)``.

    Controls: ``lengths`` (a list of three sliders, 1 ... max_len), ``padding`` (mask the
    [PAD] keys), ``causal`` (mask future keys, as GPT does), ``sentence`` (which one to draw).
    ``drawn``: matrix (seq, seq) attention weights of the chosen sentence, mask (seq, seq)
    bool (True = may attend), pad_weight (the weight a real query gives the [PAD] keys, on
    average; in the weights panel's title), tokens, lengths, sentence, title, figure. Both
    panels keep one 0-1 colour scale.
    """

    SENTENCES = (
        "the cat sat on the mat because it was tired",
        "dogs bark at night when the moon is full",
        "birds sing in the early morning light every day",
    )

    def __init__(self, lengths=(6, 4, 2), padding: bool = True, causal: bool = False, sentence: int = 1, seed=0):
        self.words = [text.split() for text in self.SENTENCES]
        max_len = min(len(words) for words in self.words)
        if (
            not isinstance(lengths, (list, tuple))
            or len(lengths) != len(self.words)
            or not all(isinstance(n, int) and 1 <= n <= max_len for n in lengths)
        ):
            raise ValueError(
                f"`lengths` must be {counted(len(self.words), 'int')} from 1 to {max_len}, got {lengths!r}."
            )
        require_int_in_range("sentence", sentence, 0, len(self.words) - 1)
        require_seed(seed)
        self._max_len, self._seed = max_len, seed  # of the random batch; not controls
        self.lengths = [
            widgets.IntSlider(value=n, min=1, max=max_len, description=f"sentence {i + 1} length", style=WIDE)
            for i, n in enumerate(lengths)
        ]
        self.padding = checkbox(padding, "padding mask")
        self.causal = checkbox(causal, "causal mask")
        options = [(f"sentence {i + 1}", i) for i in range(len(self.words))]
        self.sentence = widgets.Dropdown(options=options, value=sentence, description="show")
        controls = {f"length_{i}": slider for i, slider in enumerate(self.lengths)}
        controls.update(padding=self.padding, causal=self.causal, sentence=self.sentence)
        rows = [widgets.HBox(self.lengths), widgets.HBox([self.padding, self.causal, self.sentence])]
        self._assemble(controls, rows)

    def _draw(self, padding: bool, causal: bool, sentence: int, **length_values) -> dict:
        lengths = [length_values[f"length_{i}"] for i in range(len(self.lengths))]
        measured = masked_attention(lengths, padding, causal, max_len=self._max_len, seed=self._seed)
        weights, sentence_mask = measured["weights"][sentence], measured["mask"][sentence]  # (seq, seq) each
        seq_len = max(lengths)
        n_real = lengths[sentence]
        tokens = self.words[sentence][:n_real] + ["[PAD]"] * (seq_len - n_real)
        title = (  # the batch first: a slider of a sentence not shown changes this line, if nothing else
            f"batch: lengths {', '.join(map(str, lengths))}, padded to {seq_len}\n"
            f"sentence {sentence + 1}: {counted(n_real, 'token')} + {seq_len - n_real} [PAD]; "
            f"padding mask {'on' if padding else 'off'}, causal mask {'on' if causal else 'off'}"
        )
        figure, (ax_mask, ax_weights) = plt.subplots(1, 2, figsize=(11, 4.8), layout="constrained")
        plot_attention(
            sentence_mask.float(),
            tokens,
            ax=ax_mask,
            title="mask (yellow = may attend)",
            colorbar_label=None,
            vmin=0,
            vmax=1,
        )
        # what the real queries give the [PAD] keys, on average: 0 with the padding mask
        pad_weight = float(weights[:n_real, n_real:].sum(dim=-1).mean()) if seq_len > n_real else 0.0
        plot_attention(
            weights,
            tokens,
            ax=ax_weights,
            title=f"attention weights (on [PAD]: {pad_weight:.2f} per real query)",
            vmin=0,
            vmax=1,
        )  # one 0-1 scale whatever the settings, so that two pictures compare
        figure.suptitle(title)
        return {
            "matrix": weights,  # (seq, seq)
            "mask": sentence_mask,
            "pad_weight": pad_weight,
            "tokens": tokens,
            "lengths": lengths,
            "sentence": sentence,
            "title": title,
            "figure": figure,
        }


class PositionalEncodingExplorer(Explorer):
    """The sinusoidal table with one position (row) and one dimension (column) picked out.

    The table has ``max_len`` positions (512 by default, as many as BERT reads), so the
    slow waves of the high dimensions have room to move. On the right, the dimension's
    wave twice: near the position (a window of ``WINDOW`` positions on a fixed -1 ... 1
    scale, where a fast wave reads clearly) and over all positions (its y axis fitted to
    the wave, where a slow one does: dimension 60 turns only 1.4% of a full wave in 512
    positions); below them, the position's whole vector.

    Bottom right, the offset of notebook 04's section 2: the dimension's pair (2i, 2i + 1)
    as a point on the unit circle at the position and at the position + ``offset``, and at 0
    and ``offset``: both turn by the same angle k omega_i, whatever the start.

    Controls: ``position`` (0 ... max_len - 1; redrawn when the slider is released),
    ``dimension`` (0 ... d_model - 1) and ``offset`` (k, 0 ... 64).
    ``drawn``: matrix (max_len, d_model) the whole table,
    row (d_model,) the position's vector, column (max_len,) the dimension's wave, value
    (their crossing), position, dimension, wavelength (positions per turn, from
    ``bertcourse.experiments.sinusoid_wavelength``), turns (max_len / wavelength), window
    (the range of positions of the near view), offset, angle (k omega_i, radians),
    pair_points (2, 2, 2): for the position and for 0, the (sin, cos) of the pair before and
    after the offset, title, figure.
    """

    WINDOW = 49  # positions in the near view: the position and 24 on each side

    MAX_OFFSET = 64
    MAX_TURNS_DRAWN = 40  # more turns than this over all positions and the panel shows a band, not a wave

    def __init__(self, max_len: int = 512, d_model: int = 64, position: int = 10, dimension: int = 4, offset: int = 5):
        self.table = sinusoidal_position_encoding(max_len, d_model)  # (max_len, d_model)
        require_int_in_range("position", position, 0, max_len - 1)
        require_int_in_range("dimension", dimension, 0, d_model - 1)
        require_int_in_range("offset", offset, 0, self.MAX_OFFSET)
        self.position = widgets.IntSlider(
            value=position, min=0, max=max_len - 1, description="position", continuous_update=False
        )
        self.dimension = widgets.IntSlider(value=dimension, min=0, max=d_model - 1, description="dimension")
        self.offset = widgets.IntSlider(value=offset, min=0, max=self.MAX_OFFSET, description="offset k")
        controls = {"position": self.position, "dimension": self.dimension, "offset": self.offset}
        self._assemble(controls, [widgets.HBox([self.position, self.dimension, self.offset])])

    def _draw(self, position: int, dimension: int, offset: int) -> dict:
        max_len, d_model = self.table.shape
        row = self.table[position]  # (d_model,)
        column = self.table[:, dimension]  # (max_len,)
        value = float(self.table[position, dimension])
        wavelength = sinusoid_wavelength(dimension, d_model)
        turns = max_len / wavelength
        start = min(max(position - self.WINDOW // 2, 0), max(max_len - self.WINDOW, 0))
        window = range(start, min(start + self.WINDOW, max_len))
        wave = "sin" if dimension % 2 == 0 else "cos"
        title = f"position {position}, dimension {dimension} ({wave}, wavelength {wavelength:,.1f}): value {value:.3f}"
        figure = plt.figure(figsize=(12, 5.2), layout="constrained")
        grid = figure.add_gridspec(2, 3, width_ratios=(1.1, 1, 1))
        ax_table = figure.add_subplot(grid[:, 0])
        plot_position_encoding(self.table, ax=ax_table, title="sinusoidal position encoding")
        ax_table.add_patch(highlight((-0.5, position - 0.5), d_model, 1))  # the position's row
        ax_table.add_patch(highlight((dimension - 0.5, -0.5), 1, max_len))  # the dimension's column
        ax_near = figure.add_subplot(grid[0, 1])
        ax_near.plot(window, column[start : window.stop].numpy(), ".-", color="tab:purple")
        ax_near.plot([position], [value], "o", color="black")
        ax_near.set_ylim(-1.1, 1.1)
        ax_near.set_title(f"dimension {dimension} ({wave}) near position {position}")
        ax_near.set_xlabel("position")
        ax_near.set_ylabel("value")
        ax_all = figure.add_subplot(grid[0, 2])
        ax_all.plot(range(max_len), column.numpy(), color="tab:purple")
        ax_all.plot([position], [value], "o", color="black")
        ax_all.ticklabel_format(axis="y", useOffset=False)  # 0.998, 0.999, ... rather than an offset of 9.98e-1
        too_fast = turns > self.MAX_TURNS_DRAWN  # the waves would merge into a band at this panel's width
        ax_all.set_title(
            f"over all {max_len} positions: {turns:.3g} turns" + ("\ntoo many to see at this width" if too_fast else "")
        )
        ax_all.set_xlabel("position")
        ax_all.set_ylabel("value (scale fitted)")
        ax_vector = figure.add_subplot(grid[1, 1])
        ax_vector.plot(range(d_model), row.numpy(), ".-", color="tab:green")
        ax_vector.plot([dimension], [value], "o", color="black")
        ax_vector.set_title(f"position {position}: its vector")
        ax_vector.set_xlabel("dimension")
        ax_vector.set_ylabel("value")
        # the pair (2i, 2i + 1) of the dimension as a point on the unit circle, at p and at p + k: a turn by k omega_i
        pair = dimension // 2
        omega = 1.0 / 10000.0 ** (2 * pair / d_model)
        angle = offset * omega  # radians: the same for every starting position
        starts = torch.tensor([float(position), 0.0])  # (2,): the chosen position, and position 0 for comparison
        ends = starts + offset
        pair_points = torch.stack(
            [torch.stack([torch.sin(t * omega), torch.cos(t * omega)], dim=-1) for t in (starts, ends)], dim=1
        )  # (2 starts, 2 points, 2 coordinates): (sin, cos) of pair i at p and p + k
        ax_circle = figure.add_subplot(grid[1, 2])
        circle = torch.linspace(0, 2 * math.pi, 200)
        ax_circle.plot(torch.sin(circle).numpy(), torch.cos(circle).numpy(), color="lightgray")
        for (before, after), color, label in zip(
            pair_points, ("black", "tab:gray"), (f"{position} → {position + offset}", f"0 → {offset}"), strict=True
        ):
            ax_circle.annotate(
                "", xy=after.tolist(), xytext=before.tolist(), arrowprops={"arrowstyle": "->", "color": color}
            )
            ax_circle.plot(*before.tolist(), "o", color=color, label=label)
        ax_circle.set_aspect("equal")
        ax_circle.set_xlim(-1.25, 1.25)
        ax_circle.set_ylim(-1.25, 1.25)
        ax_circle.set_xlabel(f"dimension {2 * pair} (sin)")
        ax_circle.set_ylabel(f"dimension {2 * pair + 1} (cos)")
        ax_circle.set_title(f"offset k = {offset}: pair {pair} turns by {math.degrees(angle) % 360:.1f}°")
        ax_circle.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))  # beside, not on, the arrows
        figure.suptitle(title)
        return {
            "matrix": self.table,
            "row": row,
            "column": column,
            "value": value,
            "position": position,
            "dimension": dimension,
            "wavelength": wavelength,
            "turns": turns,
            "window": window,
            "offset": offset,
            "angle": angle,
            "pair_points": pair_points,
            "title": title,
            "figure": figure,
        }


def highlight(corner: tuple[float, float], width: float, height: float) -> Rectangle:
    """A lime frame with a black edge: it stands out on red, blue and white alike."""
    edge = [patheffects.Stroke(linewidth=4.5, foreground="black"), patheffects.Normal()]
    return Rectangle(corner, width, height, fill=False, edgecolor="lime", lw=2.5, path_effects=edge)


class ResidualExplorer(Explorer):
    """The gradient that reaches each layer of a deep stack, residual connections on or off.

    Draws ``bertcourse.experiments.gradient_norms_per_layer`` on a log scale: a stack of
    Linear + tanh layers, one backward pass, the gradient norm of each layer's weight. Without residuals every
    layer shrinks the gradient on its way down, so the first layers get orders of magnitude
    less than the last; with them, ``h + F(h)`` gives the gradient an identity path and
    every layer gets one of the same order. A LayerNorm after every layer changes the
    picture too: try it with residuals off.

    Controls: ``depth`` (2 ... 60 layers; redrawn when the slider is released),
    ``residual`` (h + tanh(W h) instead of tanh(W h)), ``layer_norm`` (a LayerNorm after
    every layer), ``weight_scale`` (every weight times 0.5, 1 = PyTorch's default, sqrt(3)
    = Glorot's or 3: the initialisation that notebook 06's section 3 and its Going deeper are about).
    ``drawn``: matrix (depth,) float64, exactly ``gradient_norms_per_layer(depth, residual,
    layer_norm, width, seed, weight_scale)`` (entry 0 is layer 1, nearest the input), depth,
    residual, layer_norm, weight_scale, ratio_first_last (layer 1's gradient norm divided by
    the last layer's), title, figure.
    """

    MAX_DEPTH = 60
    WEIGHT_SCALES = (("0.5", 0.5), ("1 (default)", 1.0), ("√3 (Glorot)", math.sqrt(3)), ("3", 3.0))
    MIN_Y_RANGE = (1e-6, 1e2)  # the y axis spans at least these decades, so a flat curve looks flat

    def __init__(
        self,
        depth: int = 30,
        residual: bool = False,
        layer_norm: bool = False,
        width: int = 64,
        seed: int = 0,
        weight_scale: float = 1.0,
    ):
        if isinstance(depth, bool) or not isinstance(depth, int) or not 2 <= depth <= self.MAX_DEPTH:
            raise ValueError(f"`depth` must be an int from 2 to {self.MAX_DEPTH}, got {depth!r}.")
        scales = [value for _, value in self.WEIGHT_SCALES]
        if weight_scale not in scales:
            raise ValueError(f"`weight_scale` must be one of 0.5, 1.0, math.sqrt(3), 3.0, got {weight_scale!r}.")
        require_positive_int("width", width)
        require_seed(seed)
        self._width, self._seed = width, seed  # of the measured stack; not controls
        self.depth = widgets.IntSlider(
            value=depth, min=2, max=self.MAX_DEPTH, description="layers", continuous_update=False
        )
        self.residual = checkbox(residual, "residual connections")
        self.layer_norm = checkbox(layer_norm, "LayerNorm after every layer")
        self.weight_scale = widgets.SelectionSlider(
            options=list(self.WEIGHT_SCALES), value=weight_scale, description="weights ×", continuous_update=False
        )
        controls = {
            "depth": self.depth,
            "residual": self.residual,
            "layer_norm": self.layer_norm,
            "weight_scale": self.weight_scale,
        }
        rows = [widgets.HBox([self.depth, self.weight_scale]), widgets.HBox([self.residual, self.layer_norm])]
        self._assemble(controls, rows)

    def _draw(self, depth: int, residual: bool, layer_norm: bool, weight_scale: float) -> dict:
        norms = gradient_norms_per_layer(depth, residual, layer_norm, self._width, self._seed, weight_scale)  # (depth,)
        ratio = float(norms[0] / norms[-1])
        block = "h + tanh(W h)" if residual else "tanh(W h)"
        if layer_norm:
            block = f"LN({block})"
        label = dict((value, name) for name, value in self.WEIGHT_SCALES)[weight_scale]
        scale = "" if weight_scale == 1.0 else f", weights × {label}"
        title = f"{depth} layers of h = {block}{scale}: layer 1 / layer {depth} = {ratio:.3g}"
        figure, ax = plt.subplots(figsize=(8, 4.6), layout="constrained")
        ax.semilogy(range(1, depth + 1), norms.numpy(), marker="o", color="tab:green" if residual else "tab:red")
        ax.set_ylim(*self.y_limits(norms))
        ax.yaxis.set_major_locator(LogLocator(base=10, numticks=100))  # a labelled tick at every decade
        ax.set_xlabel("layer (1 = nearest the input)")
        ax.set_ylabel("gradient norm of the layer's weight")
        ax.grid(alpha=0.3, which="major")
        ax.set_title(title)
        return {
            "matrix": norms,
            "depth": depth,
            "residual": residual,
            "layer_norm": layer_norm,
            "weight_scale": weight_scale,
            "ratio_first_last": ratio,
            "title": title,
            "figure": figure,
        }

    @classmethod
    def y_limits(cls, norms: torch.Tensor) -> tuple[float, float]:
        """Whole decades around the norms, and at least ``MIN_Y_RANGE``: every point lies between labelled ticks.

        A factor of 2 of room on each side keeps a point's marker off the frame.
        """
        lowest = min(cls.MIN_Y_RANGE[0], float(norms.min()) / 2)
        highest = max(cls.MIN_Y_RANGE[1], float(norms.max()) * 2)
        return 10.0 ** math.floor(math.log10(lowest)), 10.0 ** math.ceil(math.log10(highest))


class AttentionExplorer(Explorer):
    """The attention maps of a real BERT for a sentence you type.

    ``model`` is a ``bertcourse.BertModel`` (e.g. from ``bertcourse.load_pretrained()``) and
    ``tokenizer`` its tokenizer. The model runs once per sentence, through
    ``bertcourse.experiments.attention_maps``; the maps are kept, so moving the sliders or
    switching views does not run it again.

    Controls: ``text`` (press Enter to run), ``pair`` (an optional second sentence: the
    model then reads ``[CLS] text [SEP] pair [SEP]`` with segment ids 0 and 1; empty for one
    sentence), ``layer``, ``head``, ``view`` ("heatmap", "head view" or "all heads" of the
    layer), ``average_heads`` (the mean over the heads).
    A control that does not apply to what is shown is greyed out, and ``note`` (a label
    beside it) says why. ``drawn``: matrix -- exactly ``out.attentions[layer][0, head]``, or
    its mean over heads (seq, seq), or ``out.attentions[layer][0]`` (heads, seq, seq) for
    "all heads" --, tokens, layer, head (None when averaged or all heads are shown), view,
    note (the label's text), pair, title, figure.
    """

    VIEWS = ("heatmap", "head view", "all heads")
    CACHED_TEXTS = 16  # sentences whose attentions are kept
    ALL_HEADS_NOTE = "all heads are shown: head and average do not apply"
    AVERAGE_NOTE = "the mean over heads is shown: head does not apply"

    def __init__(
        self,
        model,
        tokenizer,
        text: str = DEFAULT_TEXT,
        layer: int = 0,
        head: int = 0,
        view: str = "heatmap",
        average_heads: bool = False,
        pair: str = "",
    ):
        if view not in self.VIEWS:
            raise ValueError(f"`view` must be one of {self.VIEWS}, got {view!r}.")
        if not isinstance(pair, str):
            raise TypeError(f"`pair` must be a string (empty for one sentence), got {pair!r}.")
        self.model = model
        self.tokenizer = tokenizer
        self._cache: dict[tuple[str, str], tuple[list[str], list[torch.Tensor]]] = {}
        _, attentions = self.attentions_for(text, pair)  # refuses a model in training mode, or one with no maps
        num_layers, num_heads = len(attentions), attentions[0].shape[0]
        self.layer, self.head = layer_and_head(layer, head, num_layers, num_heads)  # checked against the model
        self.text = sentence_box(text)
        self.pair = widgets.Text(
            value=pair,
            description="sentence B (then Enter)",
            placeholder="optional: a second sentence, read as segment B",
            continuous_update=False,
            layout=widgets.Layout(width="700px"),
            style={"description_width": "initial"},
        )
        self.view = widgets.ToggleButtons(options=list(self.VIEWS), value=view)
        self.average_heads = widgets.Checkbox(value=average_heads, description="average over heads", indent=False)
        self.note = widgets.Label(value="")
        controls = {
            "text": self.text,
            "pair": self.pair,
            "layer": self.layer,
            "head": self.head,
            "view": self.view,
            "average_heads": self.average_heads,
        }
        wrap = widgets.Layout(flex_flow="row wrap", align_items="center")  # the note moves below on a narrow screen
        rows = [
            self.text,
            self.pair,
            widgets.HBox([self.layer, self.head, self.average_heads, self.note], layout=wrap),
            self.view,
        ]
        self._assemble(controls, rows)

    def attentions_for(self, text: str, pair: str = "") -> tuple[list[str], list[torch.Tensor]]:
        """(tokens, one (heads, seq, seq) CPU tensor per layer) for ``text`` (and ``pair``, when not empty);
        the model runs once per input."""
        key = (text, pair)
        if key not in self._cache:
            measured = attention_maps(self.model, self.tokenizer, text, pair or None)
            if len(self._cache) >= self.CACHED_TEXTS:
                del self._cache[next(iter(self._cache))]  # forget the oldest input
            self._cache[key] = measured
        return self._cache[key]

    def _draw(self, text: str, pair: str, layer: int, head: int, view: str, average_heads: bool) -> dict:
        tokens, attentions = self.attentions_for(text, pair)
        layer_maps = attentions[layer]  # (heads, seq, seq)
        all_heads = view == "all heads"
        self.head.disabled = average_heads or all_heads
        self.average_heads.disabled = all_heads
        self.note.value = self.ALL_HEADS_NOTE if all_heads else self.AVERAGE_NOTE if average_heads else ""
        if all_heads:
            matrix, shown_head = layer_maps, None
            title = f"layer {layer}: all {counted(layer_maps.shape[0], 'head')}"
            figure = plot_heads_grid(matrix, tokens, title=title)
        else:
            if average_heads:
                matrix, shown_head = layer_maps.mean(dim=0), None  # (seq, seq)
                title = f"layer {layer}, mean over {counted(layer_maps.shape[0], 'head')}"
            else:
                matrix, shown_head = layer_maps[head], head  # (seq, seq)
                title = f"layer {layer}, head {head}"
            plot = plot_attention if view == "heatmap" else plot_head_view
            figure = plot(matrix, tokens, title=title).figure
        return {
            "matrix": matrix,
            "tokens": tokens,
            "layer": layer,
            "head": shown_head,
            "view": view,
            "note": self.note.value,
            "pair": pair,
            "title": title,
            "figure": figure,
        }
