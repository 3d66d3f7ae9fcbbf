"""The explorers of notebooks 01-07; see ``bertcourse.widgets`` for how every explorer works."""

from __future__ import annotations

import math

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from matplotlib import patheffects
from matplotlib.patches import Rectangle
from matplotlib.ticker import LogLocator

from .._validation import require_positive_int
from ..attention import attention_scores, qkv_projection, scaled_dot_product_attention
from ..masks import causal_mask, combine_masks, padding_mask
from ..plots import plot_attention, plot_head_view, plot_heads_grid, plot_position_encoding
from ..positional import sinusoidal_position_encoding
from ._base import DEFAULT_TEXT, WIDE, _Explorer, _require_in_range, checkbox


class ScalingExplorer(_Explorer):
    """One query's softmax over ``num_keys`` random keys, with and without the 1/sqrt(d_k) scale.

    q and k have unit-variance entries, so q.k has variance d_k: without the scale, large d_k
    makes the scores spread out, the softmax saturates to one key (low entropy) and its
    gradient d softmax / d scores vanishes.

    Controls: ``d_k`` (2 ... 1024, powers of two), ``scaled`` (divide by sqrt(d_k)), ``seed``.
    ``drawn``: matrix (1, num_keys) -- the query's row of attention weights --, scores
    (num_keys,) after any scaling, score_std, entropy (nats), max_entropy (log num_keys),
    grad_norm (Frobenius norm of the softmax Jacobian), title, figure.
    """

    D_K_CHOICES = tuple(2**power for power in range(1, 11))  # 2, 4, ..., 1024

    def __init__(self, num_keys: int = 16, d_k: int = 64, scaled: bool = True, seed: int = 0):
        require_positive_int("num_keys", num_keys)
        if d_k not in self.D_K_CHOICES:
            raise ValueError(f"`d_k` must be one of {self.D_K_CHOICES}, got {d_k!r}.")
        _require_in_range("seed", seed, 0, 99)
        self.num_keys = num_keys
        self.d_k = widgets.SelectionSlider(options=list(self.D_K_CHOICES), value=d_k, description="d_k")
        self.scaled = checkbox(scaled, "divide scores by √d_k")
        self.seed = widgets.IntSlider(value=seed, min=0, max=99, description="seed")
        controls = {"d_k": self.d_k, "scaled": self.scaled, "seed": self.seed}
        self._assemble(controls, [widgets.HBox([self.d_k, self.scaled, self.seed])])

    def _draw(self, d_k: int, scaled: bool, seed: int) -> dict:
        generator = torch.Generator().manual_seed(seed)
        q = torch.randn(1, d_k, generator=generator)  # (1, d_k): one query
        k = torch.randn(self.num_keys, d_k, generator=generator)  # (num_keys, d_k)
        scores = attention_scores(q, k)[0]  # (num_keys,), variance d_k
        if scaled:
            scores = scores / math.sqrt(d_k)  # variance 1 again
        weights = torch.softmax(scores, dim=-1)  # (num_keys,)
        entropy = float(torch.special.entr(weights).sum())  # -sum p log p, with 0 log 0 = 0
        jacobian = torch.diag(weights) - torch.outer(weights, weights)  # d weights_i / d scores_j
        grad_norm = float(torch.linalg.matrix_norm(jacobian))
        max_entropy = math.log(self.num_keys)
        how = r"scores / $\sqrt{d_k}$" if scaled else "unscaled scores"
        title = (
            f"$d_k$ = {d_k}, {how}: entropy {entropy:.2f} of at most {max_entropy:.2f} nats, "
            f"gradient norm {grad_norm:.3f}"
        )
        figure, (ax_scores, ax_weights) = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
        keys = range(self.num_keys)
        ax_scores.bar(keys, scores.numpy(), color="tab:gray")
        score_formula = r"$q \cdot k / \sqrt{d_k}$" if scaled else r"$q \cdot k$"
        ax_scores.set_title(f"scores {score_formula} (std {float(scores.std()):.2f})")
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
            "score_std": float(scores.std()),
            "entropy": entropy,
            "max_entropy": max_entropy,
            "grad_norm": grad_norm,
            "title": title,
            "figure": figure,
        }


class MaskingExplorer(_Explorer):
    """A padded batch of three sentences through scaled dot-product attention, masks on or off.

    The sentences are cut to the lengths on the sliders and padded with [PAD] to the longest.
    Queries, keys and values come from random vectors (one shared vector for every [PAD]),
    so the picture is about the masks, not about meaning.

    Controls: ``lengths`` (a list of three sliders, 1 ... max_len), ``padding`` (mask the
    [PAD] keys), ``causal`` (mask future keys, as GPT does), ``sentence`` (which one to draw).
    ``drawn``: matrix (seq, seq) attention weights of the chosen sentence, mask (seq, seq)
    bool (True = may attend), tokens, lengths, sentence, title, figure.
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
            raise ValueError(f"`lengths` must be {len(self.words)} ints from 1 to {max_len}, got {lengths!r}.")
        _require_in_range("sentence", sentence, 0, len(self.words) - 1)
        d_model = 8
        generator = torch.Generator().manual_seed(seed)
        self._vectors = torch.randn(len(self.words), max_len, d_model, generator=generator)  # (batch, max, d)
        self._pad_vector = torch.randn(d_model, generator=generator)  # (d,): every [PAD] looks the same
        self._w_q, self._w_k, self._w_v = torch.randn(3, d_model, d_model, generator=generator) / math.sqrt(d_model)
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
        seq_len = max(lengths)
        real = padding_mask(lengths, seq_len)  # (batch, seq): True at real tokens
        x = torch.where(real[..., None], self._vectors[:, :seq_len], self._pad_vector)  # (batch, seq, d)
        q, k, v = qkv_projection(x, self._w_q, self._w_k, self._w_v)  # (batch, seq, d) each
        mask = combine_masks(
            real[:, None, :] if padding else None,  # (batch, 1, seq): no query looks at a [PAD] key
            causal_mask(seq_len) if causal else None,  # (seq, seq): no query looks ahead
        )
        _, weights = scaled_dot_product_attention(q, k, v, mask)  # (batch, seq, seq)
        if mask is None:
            mask = torch.ones(seq_len, seq_len, dtype=torch.bool)
        sentence_mask = mask.expand(len(lengths), seq_len, seq_len)[sentence]  # (seq, seq)
        n_real = lengths[sentence]
        tokens = self.words[sentence][:n_real] + ["[PAD]"] * (seq_len - n_real)
        title = (
            f"sentence {sentence + 1}: {n_real} tokens + {seq_len - n_real} [PAD]; "
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
        plot_attention(weights[sentence], tokens, ax=ax_weights, title="attention weights")
        figure.suptitle(title)
        return {
            "matrix": weights[sentence],  # (seq, seq)
            "mask": sentence_mask,
            "tokens": tokens,
            "lengths": lengths,
            "sentence": sentence,
            "title": title,
            "figure": figure,
        }


class PositionalEncodingExplorer(_Explorer):
    """The sinusoidal table with one position (row) and one dimension (column) picked out.

    Controls: ``position`` (0 ... max_len - 1) and ``dimension`` (0 ... d_model - 1).
    ``drawn``: matrix (max_len, d_model) the whole table, row (d_model,) the position's
    vector, column (max_len,) the dimension's wave, value (their crossing), position,
    dimension, wavelength (in positions), title, figure.
    """

    def __init__(self, max_len: int = 50, d_model: int = 64, position: int = 10, dimension: int = 4):
        self.table = sinusoidal_position_encoding(max_len, d_model)  # (max_len, d_model)
        _require_in_range("position", position, 0, max_len - 1)
        _require_in_range("dimension", dimension, 0, d_model - 1)
        self.position = widgets.IntSlider(value=position, min=0, max=max_len - 1, description="position")
        self.dimension = widgets.IntSlider(value=dimension, min=0, max=d_model - 1, description="dimension")
        controls = {"position": self.position, "dimension": self.dimension}
        self._assemble(controls, [widgets.HBox([self.position, self.dimension])])

    def _draw(self, position: int, dimension: int) -> dict:
        max_len, d_model = self.table.shape
        row = self.table[position]  # (d_model,)
        column = self.table[:, dimension]  # (max_len,)
        value = float(self.table[position, dimension])
        pair = dimension // 2  # dimensions 2i (sin) and 2i + 1 (cos) share a frequency
        wavelength = 2 * math.pi * 10000.0 ** (2 * pair / d_model)
        wave = "sin" if dimension % 2 == 0 else "cos"
        title = f"position {position}, dimension {dimension} ({wave}, wavelength {wavelength:.1f}): value {value:.3f}"
        figure = plt.figure(figsize=(12, 4.8), layout="constrained")
        grid = figure.add_gridspec(2, 2, width_ratios=(1.2, 1))
        ax_table = figure.add_subplot(grid[:, 0])
        plot_position_encoding(self.table, ax=ax_table, title="sinusoidal position encoding")
        ax_table.add_patch(highlight((-0.5, position - 0.5), d_model, 1))  # the position's row
        ax_table.add_patch(highlight((dimension - 0.5, -0.5), 1, max_len))  # the dimension's column
        ax_wave = figure.add_subplot(grid[0, 1])
        ax_wave.plot(range(max_len), column.numpy(), color="tab:purple")
        ax_wave.plot([position], [value], "o", color="black")
        ax_wave.set_title(f"dimension {dimension} across positions ({wave})")
        ax_wave.set_xlabel("position")
        ax_wave.set_ylabel("value")
        ax_vector = figure.add_subplot(grid[1, 1])
        ax_vector.plot(range(d_model), row.numpy(), ".-", color="tab:green")
        ax_vector.plot([dimension], [value], "o", color="black")
        ax_vector.set_title(f"position {position}: its vector")
        ax_vector.set_xlabel("dimension")
        ax_vector.set_ylabel("value")
        figure.suptitle(title)
        return {
            "matrix": self.table,
            "row": row,
            "column": column,
            "value": value,
            "position": position,
            "dimension": dimension,
            "wavelength": wavelength,
            "title": title,
            "figure": figure,
        }


def highlight(corner: tuple[float, float], width: float, height: float) -> Rectangle:
    """A lime frame with a black edge: it stands out on red, blue and white alike."""
    edge = [patheffects.Stroke(linewidth=4.5, foreground="black"), patheffects.Normal()]
    return Rectangle(corner, width, height, fill=False, edgecolor="lime", lw=2.5, path_effects=edge)


def gradient_norms_per_layer(
    depth: int, residual: bool, layer_norm: bool = False, width: int = 64, seed: int = 0
) -> torch.Tensor:
    """Gradient norm of each layer's weight in a stack of ``depth`` Linear + tanh layers, after one backward pass.

    The experiment of notebook 06, section 4. Layer l computes ``h = tanh(W_l h + b_l)``, or
    ``h = h + tanh(W_l h + b_l)`` with ``residual``; with ``layer_norm``, a LayerNorm
    without learned scale or shift (eps 1e-12) then normalises each layer's output, as
    BERT's Post-LN does. The stack starts from PyTorch's default initialisation, takes a
    batch of 32 random vectors of size ``width`` and one mean squared error against 32
    random targets, all in float64 so that tiny gradients are exact enough to print.

    ``seed`` fixes the weights and the data: every setting of ``residual`` and
    ``layer_norm`` runs on the same ones, and the caller's random state is left as
    it was. Returns (depth,) float64: entry 0 is the layer nearest the input.
    """
    require_positive_int("depth", depth)
    require_positive_int("width", width)
    with torch.random.fork_rng(devices=[]), torch.enable_grad():  # restores the CPU generator afterwards
        torch.default_generator.manual_seed(seed)  # as torch.manual_seed(seed) does on the CPU
        layers = [torch.nn.Linear(width, width, dtype=torch.float64) for _ in range(depth)]
        h = torch.randn(32, width, dtype=torch.float64)  # (batch, width)
        target = torch.randn(32, width, dtype=torch.float64)  # (batch, width)
        for layer in layers:
            h = h + torch.tanh(layer(h)) if residual else torch.tanh(layer(h))  # (batch, width)
            if layer_norm:
                h = F.layer_norm(h, (width,), eps=1e-12)  # (batch, width): each vector back to mean 0, variance 1
        F.mse_loss(h, target).backward()
    return torch.stack([layer.weight.grad.norm() for layer in layers])  # (depth,)


class ResidualExplorer(_Explorer):
    """The gradient that reaches each layer of a deep stack, residual connections on or off.

    Draws ``gradient_norms_per_layer`` on a log scale: a stack of Linear + tanh layers,
    one backward pass, the gradient norm of each layer's weight. Without residuals every
    layer shrinks the gradient on its way down, so the first layers get orders of magnitude
    less than the last; with them, ``h + F(h)`` gives the gradient an identity path and
    every layer gets one of the same order. A LayerNorm after every layer changes the
    picture too: try it with residuals off.

    Controls: ``depth`` (2 ... 60 layers; redrawn when the slider is released),
    ``residual`` (h + tanh(W h) instead of tanh(W h)), ``layer_norm`` (a LayerNorm after
    every layer). ``drawn``: matrix (depth,) float64, exactly
    ``gradient_norms_per_layer(depth, residual, layer_norm, width, seed)`` (entry 0 is
    layer 1, nearest the input), depth, residual, layer_norm, ratio_first_last (layer 1's
    gradient norm divided by the last layer's), title, figure.
    """

    MAX_DEPTH = 60
    MIN_Y_RANGE = (1e-6, 1e2)  # the y axis spans at least these decades, so a flat curve looks flat

    def __init__(
        self, depth: int = 30, residual: bool = False, layer_norm: bool = False, width: int = 64, seed: int = 0
    ):
        if isinstance(depth, bool) or not isinstance(depth, int) or not 2 <= depth <= self.MAX_DEPTH:
            raise ValueError(f"`depth` must be an int from 2 to {self.MAX_DEPTH}, got {depth!r}.")
        require_positive_int("width", width)
        self._width, self._seed = width, seed  # of the measured stack; not controls
        self.depth = widgets.IntSlider(
            value=depth, min=2, max=self.MAX_DEPTH, description="layers", continuous_update=False
        )
        self.residual = checkbox(residual, "residual connections")
        self.layer_norm = checkbox(layer_norm, "LayerNorm after every layer")
        controls = {"depth": self.depth, "residual": self.residual, "layer_norm": self.layer_norm}
        self._assemble(controls, [widgets.HBox([self.depth, self.residual, self.layer_norm])])

    def _draw(self, depth: int, residual: bool, layer_norm: bool) -> dict:
        norms = gradient_norms_per_layer(depth, residual, layer_norm, self._width, self._seed)  # (depth,)
        ratio = float(norms[0] / norms[-1])
        block = "h + tanh(W h)" if residual else "tanh(W h)"
        if layer_norm:
            block = f"LN({block})"
        title = f"{depth} layers of h = {block}: layer 1 / layer {depth} = {ratio:.3g}"
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


class AttentionExplorer(_Explorer):
    """The attention maps of a real BERT for a sentence you type.

    ``model`` is a ``bertcourse.BertModel`` (e.g. from ``bertcourse.load_pretrained()``) and
    ``tokenizer`` its tokenizer. The model runs once per sentence with
    ``output_attentions=True``; the maps are kept, so moving the sliders does not run it again.

    Controls: ``text`` (press Enter to run), ``layer``, ``head``, ``view`` ("heatmap",
    "head view" or "all heads" of the layer), ``average_heads`` (the mean over the heads).
    ``drawn``: matrix -- exactly ``out.attentions[layer][0, head]``, or its mean over heads
    (seq, seq), or ``out.attentions[layer][0]`` (heads, seq, seq) for "all heads" --, tokens,
    layer, head (None when averaged or all heads are shown), view, title, figure.
    """

    VIEWS = ("heatmap", "head view", "all heads")
    CACHED_TEXTS = 16  # sentences whose attentions are kept

    def __init__(
        self,
        model,
        tokenizer,
        text: str = DEFAULT_TEXT,
        layer: int = 0,
        head: int = 0,
        view: str = "heatmap",
        average_heads: bool = False,
    ):
        if view not in self.VIEWS:
            raise ValueError(f"`view` must be one of {self.VIEWS}, got {view!r}.")
        if getattr(model, "training", False):
            raise ValueError(
                "`model` is in training mode, so dropout would randomise every map: call `model.eval()` first "
                "(`load_pretrained()` returns it in eval mode)."
            )
        self.model = model
        self.tokenizer = tokenizer
        self._cache: dict[str, tuple[list[str], list[torch.Tensor]]] = {}
        _, attentions = self.attentions_for(text)
        num_layers, num_heads = len(attentions), attentions[0].shape[0]
        _require_in_range("layer", layer, 0, num_layers - 1)
        _require_in_range("head", head, 0, num_heads - 1)
        self.text = widgets.Text(
            value=text, description="sentence", continuous_update=False, layout=widgets.Layout(width="640px")
        )
        self.layer = widgets.IntSlider(
            value=layer, min=0, max=num_layers - 1, description="layer", continuous_update=False
        )
        self.head = widgets.IntSlider(value=head, min=0, max=num_heads - 1, description="head", continuous_update=False)
        self.view = widgets.ToggleButtons(options=list(self.VIEWS), value=view)
        self.average_heads = widgets.Checkbox(value=average_heads, description="average over heads", indent=False)
        controls = {
            "text": self.text,
            "layer": self.layer,
            "head": self.head,
            "view": self.view,
            "average_heads": self.average_heads,
        }
        rows = [self.text, widgets.HBox([self.layer, self.head, self.average_heads]), self.view]
        self._assemble(controls, rows)

    def attentions_for(self, text: str) -> tuple[list[str], list[torch.Tensor]]:
        """(tokens, one (heads, seq, seq) CPU tensor per layer) for ``text``; the model runs once per text."""
        if text not in self._cache:
            batch = self.tokenizer(text)
            device = next(self.model.parameters()).device
            with torch.no_grad():
                out = self.model(
                    input_ids=batch["input_ids"].to(device),
                    attention_mask=batch["attention_mask"].to(device),
                    token_type_ids=batch["token_type_ids"].to(device),
                    output_attentions=True,
                )
            if not out.attentions or out.attentions[0] is None:
                raise ValueError(
                    "`model` returned no attention maps. A Hugging Face model must be loaded with "
                    'attn_implementation="eager" to return them.'
                )
            tokens = self.tokenizer.convert_ids_to_tokens(batch["input_ids"][0])
            attentions = [layer_maps[0].detach().cpu().float() for layer_maps in out.attentions]  # (heads, seq, seq)
            if len(self._cache) >= self.CACHED_TEXTS:
                del self._cache[next(iter(self._cache))]  # forget the oldest sentence
            self._cache[text] = (tokens, attentions)
        return self._cache[text]

    def _draw(self, text: str, layer: int, head: int, view: str, average_heads: bool) -> dict:
        tokens, attentions = self.attentions_for(text)
        layer_maps = attentions[layer]  # (heads, seq, seq)
        self.head.disabled = average_heads or view == "all heads"
        self.average_heads.disabled = view == "all heads"
        if view == "all heads":
            matrix, shown_head = layer_maps, None
            title = f"layer {layer}: all {layer_maps.shape[0]} heads"
            figure = plot_heads_grid(matrix, tokens, title=title)
        else:
            if average_heads:
                matrix, shown_head = layer_maps.mean(dim=0), None  # (seq, seq)
                title = f"layer {layer}, mean over {layer_maps.shape[0]} heads"
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
            "title": title,
            "figure": figure,
        }
