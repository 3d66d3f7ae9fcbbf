"""The explorers of notebook 08: every head at once, and the vectors behind one attention weight.

    ModelViewExplorer(model, tokenizer)    all layers x heads as small maps for a sentence you type;
                                           one head enlarged, with its token labels (bertviz's model view)
    NeuronViewExplorer(model, tokenizer)   one head's query and key vectors, q * k element by element,
                                           the score q . k / sqrt(d_k) and the softmax over the row
                                           (bertviz's neuron view), in the head's dimensions or in its
                                           own directions (the singular directions of W_Q W_K^T)

bertviz draws these views in the browser with JavaScript from a CDN, so they stay blank offline and
in JupyterLab; its neuron view needs bertviz's own copies of the models. These are drawn with
matplotlib from our model's own values (``bertcourse.experiments.attention_maps`` and
``bertcourse.inside.neuron_view``), so they work offline, everywhere, for any model the package
loads.

Speed: the model runs once per sentence, and the maps are kept; the model view draws the 72 small
maps as *one* image (the maps side by side with thin gaps) rather than 72 axes, which is what makes
a redraw take a fraction of a second instead of several seconds.

Bad input -- an empty sentence, one longer than the model's 512 positions, a layer or head the model
does not have -- is answered with a message where the picture would be (``_base.nothing_drawn``), never a
traceback; ``drawn["message"]`` holds it, and is None when the picture was drawn.
"""

from __future__ import annotations

import math

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import clear_output
from matplotlib.patches import Rectangle

from .._validation import require_index, require_int_in_range
from ..experiments import attention_maps
from ..inside import bert_of, neuron_view, sentence_tokens
from ..plots import plot_attention
from ._base import DEFAULT_TEXT, Explorer, layer_and_head, nothing_drawn, sentence_box

MAX_TOKEN_LABELS = 40  # an enlarged map labels every token up to this length, then every second, ...
COLORMAP = "viridis"
# Fixed placements, no layout engine: a constrained layout would double the time of every redraw.
# Token labels that reach past the figure's edge are kept by the inline backend's tight bounding box.
MODEL_VIEW_GRID = {"width_ratios": [1.5, 1.0], "left": 0.05, "right": 0.97, "bottom": 0.1, "top": 0.92, "wspace": 0.25}
BASES = {"dimensions": "dimensions", "directions of W_Q W_K^T": "directions"}  # label -> value
NEURON_VIEW_GRID = {"left": 0.1, "right": 0.97, "bottom": 0.16, "top": 0.9, "hspace": 0.75, "wspace": 0.3}


class ModelViewExplorer(Explorer):
    """Every head of every layer for a sentence you type, and one of them enlarged.

    Left: a grid of small maps, one row per layer and one column per head (rows are queries,
    columns keys, as in every map of the course), all on one colour scale from 0 to 1. Right: the
    head picked with ``layer`` and ``head``, framed in the grid, with its token labels, on the same
    scale. Type a sentence and press Enter; the model runs once per sentence.

    Controls: ``text``, ``layer``, ``head``. ``drawn``: matrix -- ``maps[layer, head]`` (seq, seq) --,
    maps (layers, heads, seq, seq), mosaic (the grid image as drawn, NaN in the gaps), tokens, layer,
    head, title, figure, message.
    """

    CACHED_TEXTS = 16  # sentences whose maps are kept

    def __init__(self, model, tokenizer, text: str = DEFAULT_TEXT, layer: int = 0, head: int = 0):
        bert = bert_of(model)  # a BertModel (or a model holding one) in eval mode, else a clear error
        self.model, self.tokenizer = model, tokenizer
        self._cache: dict[str, tuple[list[str], torch.Tensor]] = {}
        num_layers, num_heads = bert.config.num_hidden_layers, bert.config.num_attention_heads
        self.layer, self.head = layer_and_head(layer, head, num_layers, num_heads)
        self.text = sentence_box(text)
        controls = {"text": self.text, "layer": self.layer, "head": self.head}
        rows = [self.text, widgets.HBox([self.layer, self.head])]
        self._assemble(controls, rows)

    def maps_for(self, text: str) -> tuple[list[str], torch.Tensor]:
        """(tokens, maps (layers, heads, seq, seq) on the CPU) for ``text``; the model runs once per text."""
        if text not in self._cache:
            tokens = sentence_tokens(self.model, self.tokenizer, text)  # empty or too long: ValueError
            _, per_layer = attention_maps(self.model, self.tokenizer, text)  # layers x (heads, seq, seq)
            if len(self._cache) >= self.CACHED_TEXTS:
                del self._cache[next(iter(self._cache))]  # forget the oldest sentence
            self._cache[text] = (tokens, torch.stack(per_layer))
        return self._cache[text]

    def _draw(self, text: str, layer: int, head: int) -> dict:
        values = {"text": text, "layer": layer, "head": head}
        try:
            tokens, maps = self.maps_for(text)
            require_index("layer", layer, maps.shape[0], "layers")
            require_index("head", head, maps.shape[1], "heads")
        except (TypeError, ValueError) as error:
            return nothing_drawn(str(error), **values)
        num_layers, num_heads, seq, _ = maps.shape
        mosaic, gap = heads_mosaic(maps)
        figure, (ax_grid, ax_head) = plt.subplots(1, 2, figsize=(10.0, 4.6), gridspec_kw=MODEL_VIEW_GRID)
        ax_grid.imshow(mosaic, cmap=_colormap(), vmin=0.0, vmax=1.0, interpolation="nearest", aspect="auto")
        step = seq + gap
        ax_grid.set_xticks([h * step + (seq - 1) / 2 for h in range(num_heads)], range(num_heads), fontsize=8)
        ax_grid.set_yticks([layer_ * step + (seq - 1) / 2 for layer_ in range(num_layers)], range(num_layers))
        ax_grid.tick_params(length=0)
        ax_grid.set_xlabel("head")
        ax_grid.set_ylabel("layer")
        heads = "head" if num_layers * num_heads == 1 else "heads"
        ax_grid.set_title(f"all {num_layers} x {num_heads} {heads}, one colour scale", fontsize=10)
        ax_grid.add_patch(
            Rectangle(
                (head * step - 0.5 - gap / 2, layer * step - 0.5 - gap / 2),
                seq + gap,
                seq + gap,
                fill=False,
                edgecolor="#ff5a1f",
                linewidth=2.0,
            )
        )
        matrix = maps[layer, head]  # (seq, seq)
        title = f"layer {layer}, head {head}"
        plot_attention(matrix, tokens, ax=ax_head, title=title, vmin=0.0, vmax=1.0)
        _thin_token_labels(ax_head, tokens)
        return {
            "matrix": matrix,
            "maps": maps,
            "mosaic": mosaic,
            "tokens": tokens,
            "layer": layer,
            "head": head,
            "title": title,
            "figure": figure,
            "message": None,
        }


def heads_mosaic(maps: torch.Tensor) -> tuple[np.ndarray, int]:
    """(layers, heads, seq, seq) maps -> one image with the maps side by side, and the gap between them.

    Map (l, h) fills rows l * (seq + gap) ... and columns h * (seq + gap) ...; the gaps are NaN
    (drawn as the background). The gap is at least one cell, and about a tenth of a map.
    """
    num_layers, num_heads, seq, _ = maps.shape
    gap = max(1, round(seq / 10))
    step = seq + gap
    mosaic = np.full((num_layers * step - gap, num_heads * step - gap), np.nan, dtype=np.float32)
    values = maps.detach().cpu().float().numpy()
    for layer in range(num_layers):
        for head in range(num_heads):
            mosaic[layer * step : layer * step + seq, head * step : head * step + seq] = values[layer, head]
    return mosaic, gap


class NeuronViewExplorer(Explorer):
    """Why one head attends where it does: the query and key vectors behind one attention weight.

    For ``layer``, ``head``, a ``query`` token i and a ``key`` token j: the query vector q_i and
    the key vector k_j (top left, d_k numbers each, red positive and blue negative), their product
    element by element q_i * k_j (top right: the dimensions that push the score up or down), and the
    whole row of the query -- the scores q_i . k / sqrt(d_k) for every key (bottom left) and the
    softmax that turns them into attention weights (bottom right), key j marked.

    ``basis`` chooses the coordinates: "dimensions", the head's 32 numbers as the model computes
    them, or "directions", the same vectors along the singular directions of W_Q W_K^T, strongest
    first (``bertcourse.inside.head_directions``). A dimension depends on an arbitrary choice of axes
    (rotate q and k alike and no score changes); the directions do not, but they change with how the
    bias is folded in (``bias_scale``). The product sums to the same score in both.

    Controls: ``text``, ``layer``, ``head``, ``query``, ``key`` (token positions; the lists follow
    the sentence), ``basis``. ``key=None`` starts on the key the query attends to most. ``drawn``:
    matrix -- (3, d_k): q_i, k_j, q_i * k_j --, q, k, product, score (float), scores (seq,), weights
    (seq,), tokens, layer, head, query, key, basis, title, figure, message.
    """

    CACHED_VIEWS = 32  # (sentence, layer, head) whose vectors are kept

    def __init__(
        self,
        model,
        tokenizer,
        text: str = DEFAULT_TEXT,
        layer: int = 0,
        head: int = 0,
        query: int = 1,
        key: int | None = None,
        basis: str = "dimensions",
    ):
        bert = bert_of(model)
        self.model, self.tokenizer = model, tokenizer
        self._cache: dict[tuple[str, int, int], object] = {}
        num_layers, num_heads = bert.config.num_hidden_layers, bert.config.num_attention_heads
        self.layer, self.head = layer_and_head(layer, head, num_layers, num_heads)
        view = self.view_for(text, layer, head)
        seq = len(view.tokens)
        require_int_in_range("query", query, 0, seq - 1)
        if key is None:
            key = int(view.weights[query].argmax())
        require_int_in_range("key", key, 0, seq - 1)
        if basis not in BASES.values():
            raise ValueError(f"`basis` must be one of {tuple(BASES.values())}, got {basis!r}.")
        self.text = sentence_box(text)
        options = _token_options(view.tokens)
        self.query = widgets.Dropdown(options=options, value=query, description="query")
        self.key = widgets.Dropdown(options=options, value=key, description="key")
        self.basis = widgets.ToggleButtons(
            options=list(BASES.items()), value=basis, description="basis", style={"button_width": "auto"}
        )  # each button as wide as its label: "directions of W_Q W_K^T" whole
        self._tokens = view.tokens
        controls = {
            "text": self.text,
            "layer": self.layer,
            "head": self.head,
            "query": self.query,
            "key": self.key,
            "basis": self.basis,
        }
        rows = [
            self.text,
            widgets.HBox([self.layer, self.head]),
            widgets.HBox([self.query, self.key]),
            self.basis,
        ]
        self._assemble_observed(controls, rows)

    def view_for(self, text: str, layer: int, head: int):
        """``bertcourse.inside.neuron_view`` for these arguments; computed once and kept."""
        if (text, layer, head) not in self._cache:
            if len(self._cache) >= self.CACHED_VIEWS:
                del self._cache[next(iter(self._cache))]
            self._cache[(text, layer, head)] = neuron_view(self.model, self.tokenizer, text, layer, head)
        return self._cache[(text, layer, head)]

    def _assemble_observed(self, controls: dict, rows: list) -> None:
        """Like ``_assemble``, but the explorer observes its controls itself.

        A new sentence changes the token lists of ``query`` and ``key``, which changes their values;
        with ``interactive_output`` each of those changes would redraw in the middle of the first
        redraw, with stale values. Here those changes are held back and the picture is drawn once.
        """
        self.drawn = {}
        self._controls = controls
        self._holding = False
        self.output = widgets.Output()
        for control in controls.values():
            control.observe(self._refresh, names="value")
        self.widget = widgets.VBox([*rows, self.output])
        self._refresh()

    def _refresh(self, change=None) -> None:
        if self._holding:
            return
        with self.output:
            clear_output(wait=True)
            self._redraw(**{name: control.value for name, control in self._controls.items()})

    def _follow_sentence(self, tokens: list[str]) -> tuple[int, int]:
        """Give ``query`` and ``key`` this sentence's tokens, keeping their positions where they still exist."""
        if tokens != self._tokens:
            last = len(tokens) - 1
            query, key = min(self.query.value, last), min(self.key.value, last)
            self._holding = True
            try:
                options = _token_options(tokens)
                self.query.options, self.key.options = options, options
                self.query.value, self.key.value = query, key
            finally:
                self._holding = False
            self._tokens = tokens
        return self.query.value, self.key.value

    def _draw(self, text: str, layer: int, head: int, query: int, key: int, basis: str = "dimensions") -> dict:
        values = {"text": text, "layer": layer, "head": head, "query": query, "key": key, "basis": basis}
        try:
            view = self.view_for(text, layer, head)
        except (TypeError, ValueError) as error:
            return nothing_drawn(str(error), **values)
        query, key = self._follow_sentence(view.tokens)
        tokens = view.tokens
        if basis == "directions":
            q, k = view.q_directions[query], view.k_directions[key]  # (d_k,) each
            axis = f"direction of W_Q W_K^T, strongest first (d_k = {view.d_k})"
        else:
            q, k = view.q[query], view.k[key]  # (d_k,) each
            axis = f"dimension of the head (d_k = {view.d_k})"
        product = view.product(query, key, basis)  # (d_k,)
        scores, weights = view.scores[query], view.weights[query]  # (seq,) each
        score = float(scores[key])
        figure, axes = plt.subplots(2, 2, figsize=(10.0, 6.6), gridspec_kw=NEURON_VIEW_GRID)
        ax_vectors, ax_product, ax_scores, ax_weights = axes.flat
        limit = float(torch.cat([q, k]).abs().max()) or 1.0
        image = ax_vectors.imshow(
            torch.stack([q, k]).numpy(), cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto", interpolation="nearest"
        )
        ax_vectors.set_yticks([0, 1], [f"q of {tokens[query]!r}", f"k of {tokens[key]!r}"])
        ax_vectors.set_xlabel(axis, fontsize=9)
        ax_vectors.set_title("query and key vectors", fontsize=10)
        figure.colorbar(image, ax=ax_vectors, label="value")
        dims = np.arange(view.d_k)
        colors = np.where(product.numpy() >= 0, "#c0392b", "#2e6fbf")
        ax_product.bar(dims, product.numpy(), color=colors)
        ax_product.axhline(0.0, color="black", linewidth=0.6)
        ax_product.set_xlabel(basis[:-1])
        ax_product.set_ylabel("q_i * k_j")
        ax_product.set_title(
            f"q * k: sum {float(product.sum()):.1f}, / sqrt({view.d_k}) = score {score:.2f}", fontsize=10
        )
        _row_bars(ax_scores, scores.numpy(), tokens, key, "score q . k / sqrt(d_k)")
        ax_scores.set_title(f"the scores of query {tokens[query]!r} for every key", fontsize=10)
        _row_bars(ax_weights, weights.numpy(), tokens, key, "attention weight")
        ax_weights.set_ylim(0.0, 1.0)
        weight = float(weights[key])
        ax_weights.set_title(f"softmax of the scores: weight of {tokens[key]!r} = {weight:.2f}", fontsize=10)
        title = f"layer {layer}, head {head}: query {query} {tokens[query]!r}, key {key} {tokens[key]!r}"
        figure.suptitle(title)
        return {
            "matrix": torch.stack([q, k, product]),
            "q": q,
            "k": k,
            "product": product,
            "score": score,
            "scores": scores,
            "weights": weights,
            "tokens": tokens,
            "layer": layer,
            "head": head,
            "query": query,
            "key": key,
            "basis": basis,
            "title": title,
            "figure": figure,
            "message": None,
        }


def _row_bars(ax, values: np.ndarray, tokens: list[str], marked: int, ylabel: str) -> None:
    colors = ["#ff5a1f" if position == marked else "#7f8c8d" for position in range(len(tokens))]
    ax.bar(np.arange(len(tokens)), values, color=colors)
    ax.axhline(0.0, color="black", linewidth=0.6)
    ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=8)
    ax.set_xlabel("key")
    ax.set_ylabel(ylabel)
    _thin_token_labels(ax, tokens, axes="x")


def _token_options(tokens: list[str]) -> list[tuple[str, int]]:
    return [(f"{position}: {token}", position) for position, token in enumerate(tokens)]


def _thin_token_labels(ax, tokens: list[str], axes: str = "xy") -> None:
    """Label every token of a short sentence; of a long one every second, third, ... so labels never overlap."""
    step = math.ceil(len(tokens) / MAX_TOKEN_LABELS)
    if step == 1:
        return
    ticks = range(0, len(tokens), step)
    labels = tokens[::step]
    if "x" in axes:
        ax.set_xticks(ticks, labels, rotation=90, fontsize=8)
    if "y" in axes:
        ax.set_yticks(ticks, labels, fontsize=8)


def _colormap():
    return plt.get_cmap(COLORMAP).with_extremes(bad="white")  # NaN, the gaps between the small maps, is white
