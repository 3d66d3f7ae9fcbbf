"""One Transformer encoder layer, and a stack of them.

A layer is two sub-layers, each wrapped in a residual connection and a LayerNorm:

- **Post-LN** (BERT, and the original Transformer): ``x = LN(x + Sublayer(x))``.
- **Pre-LN** (GPT-2 and many tutorials, often without saying so): ``x = x + Sublayer(LN(x))``.

Post-LN is the default here because it is what BERT's weights were trained with; loading
them into a Pre-LN layer gives wrong numbers with no error. Pre-LN keeps an untouched
residual path from input to output, which is why it trains more easily when deep.

Dropout (``dropout_p``, BERT's ``hidden_dropout_prob``, 0.1) is applied to each sub-layer's
output before the residual addition, and ``attention_dropout_p`` (``attention_probs_dropout_prob``)
to the attention weights; both are inactive in ``eval()`` mode. ``dropout_p`` is always a
probability and ``dropout`` always an ``nn.Dropout``.

``post_ln_layer`` and ``pre_ln_layer`` write the two layouts as functions of their pieces (the
attention and the feed-forward block as functions, the LayerNorms' parameters), for reading and
for the exercises of notebook 06; so do ``parallel_layer`` (GPT-J's and PaLM's third layout: both
sub-layers read one normalised copy) and ``pre_ln_stack`` (Pre-LN layers and the final LayerNorm
that such a stack needs, since nothing inside it normalises the residual stream).

The constructors check their settings; ``forward`` trusts its caller (``BertModel`` checks its
input once, at its border) and runs the sub-layers, which check only their input's metadata.
"""

from __future__ import annotations

import torch
from torch import nn

from ._validation import describe, require_float_tensor, require_positive_int, require_probability, require_shape
from .feedforward import FeedForward
from .layernorm import LayerNorm, _layer_norm
from .multihead import MultiHeadAttention


def post_ln_layer(
    x: torch.Tensor,
    attention,
    feed_forward,
    ln1_weight: torch.Tensor,
    ln1_bias: torch.Tensor,
    ln2_weight: torch.Tensor,
    ln2_bias: torch.Tensor,
    eps: float = 1e-12,
) -> torch.Tensor:
    """BERT's encoder layer from its pieces, without dropout: h = LN1(x + attention(x)), LN2(h + feed_forward(h)).

    x: (batch, seq, d_model); ``attention`` and ``feed_forward`` are functions from (batch, seq, d_model)
    to the same shape (e.g. ``bc.multi_head_attention`` and ``bc.feed_forward`` with their weights bound);
    ln*_weight, ln*_bias: (d_model,), the LayerNorms' gamma and beta. Returns (batch, seq, d_model).
    """
    _check_layer_pieces(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias)
    return _post_ln_layer(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps)


def _post_ln_layer(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    """Each sub-layer adds to the residual stream, and the sum is normalised: LN(x + Sublayer(x))."""
    h = _layer_norm(x + attention(x), ln1_weight, ln1_bias, eps)  # (batch, seq, d_model)
    return _layer_norm(h + feed_forward(h), ln2_weight, ln2_bias, eps)  # (batch, seq, d_model)


def pre_ln_layer(
    x: torch.Tensor,
    attention,
    feed_forward,
    ln1_weight: torch.Tensor,
    ln1_bias: torch.Tensor,
    ln2_weight: torch.Tensor,
    ln2_bias: torch.Tensor,
    eps: float = 1e-12,
) -> torch.Tensor:
    """The Pre-LN layer (GPT-2, many tutorials) from the same pieces: h = x + attention(LN1(x)), then
    h + feed_forward(LN2(h)).

    Arguments as in ``post_ln_layer``. The residual stream itself is never normalised here.
    """
    _check_layer_pieces(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias)
    return _pre_ln_layer(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps)


def _pre_ln_layer(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    """Each sub-layer reads a normalised copy and adds to the untouched residual stream: x + Sublayer(LN(x))."""
    h = x + attention(_layer_norm(x, ln1_weight, ln1_bias, eps))  # (batch, seq, d_model)
    return h + feed_forward(_layer_norm(h, ln2_weight, ln2_bias, eps))  # (batch, seq, d_model)


def parallel_layer(
    x: torch.Tensor, attention, feed_forward, ln_weight: torch.Tensor, ln_bias: torch.Tensor, eps: float = 1e-12
) -> torch.Tensor:
    """The parallel layer of GPT-J and PaLM: x + attention(LN(x)) + feed_forward(LN(x)), one LayerNorm shared.

    Both sub-layers read the same normalised copy of x, side by side, and both add to x itself.
    Arguments as in ``post_ln_layer``, with a single LayerNorm's gamma and beta. Returns (batch, seq, d_model).
    """
    _check_layer_pieces(
        x, attention, feed_forward, ln_weight, ln_bias, ln_weight, ln_bias, names=("ln_weight", "ln_bias")
    )
    return _parallel_layer(x, attention, feed_forward, ln_weight, ln_bias, eps)


def _parallel_layer(x, attention, feed_forward, ln_weight, ln_bias, eps=1e-12):
    """One normalised copy feeds both sub-layers; both outputs join the untouched residual stream."""
    normalised = _layer_norm(x, ln_weight, ln_bias, eps)  # (batch, seq, d_model)
    return x + attention(normalised) + feed_forward(normalised)  # (batch, seq, d_model)


def pre_ln_stack(
    x: torch.Tensor, layers, final_weight: torch.Tensor, final_bias: torch.Tensor, eps: float = 1e-12
) -> torch.Tensor:
    """A stack of Pre-LN layers and the final LayerNorm that a Pre-LN model puts after the last one.

    ``layers`` is a list of tuples ``(attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias)``,
    one per layer, as ``pre_ln_layer`` takes them; final_weight, final_bias: (d_model,). Returns
    (batch, seq, d_model): LN_final of the residual stream after the last layer.
    """
    if not isinstance(layers, (list, tuple)) or not layers:
        raise TypeError(f"`layers` must be a non-empty list of 6-tuples of layer pieces, got {describe(layers)}.")
    for index, pieces in enumerate(layers):
        if not isinstance(pieces, (list, tuple)) or len(pieces) != 6:
            raise TypeError(
                f"`layers[{index}]` must be (attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias), "
                f"got {describe(pieces)}."
            )
        names = tuple(f"layers[{index}]: {name}" for name in ("ln1_weight", "ln1_bias", "ln2_weight", "ln2_bias"))
        _check_layer_pieces(x, *pieces, names=names)
    _check_layer_pieces(
        x, *layers[0][:2], final_weight, final_bias, final_weight, final_bias, names=("final_weight", "final_bias")
    )
    return _pre_ln_stack(x, layers, final_weight, final_bias, eps)


def _pre_ln_stack(x, layers, final_weight, final_bias, eps=1e-12):
    """Every layer adds to the residual stream; only the final LayerNorm normalises the stream itself."""
    for pieces in layers:
        x = _pre_ln_layer(x, *pieces, eps)  # (batch, seq, d_model)
    return _layer_norm(x, final_weight, final_bias, eps)  # (batch, seq, d_model)


def _check_layer_pieces(
    x,
    attention,
    feed_forward,
    ln1_weight,
    ln1_bias,
    ln2_weight,
    ln2_bias,
    names=("ln1_weight", "ln1_bias", "ln2_weight", "ln2_bias"),
):
    require_float_tensor("x", x, ndim=3)
    for name, function in (("attention", attention), ("feed_forward", feed_forward)):
        if not callable(function):
            raise TypeError(
                f"`{name}` must be a function of x, (batch, seq, d_model) -> same, got {describe(function)}."
            )
    for name, parameter in zip(names * 2, (ln1_weight, ln1_bias, ln2_weight, ln2_bias), strict=False):
        require_float_tensor(name, parameter, like=x, like_name="`x`")
        require_shape(name, parameter, (x.shape[-1],), symbols="(d_model,)")


class EncoderLayer(nn.Module):
    """Self-attention + feed-forward, each with residual, dropout and LayerNorm.

    forward(x, mask=None, need_weights=False) -> (x, weights); x: (batch, seq, d_model).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout_p: float = 0.1,
        attention_dropout_p: float = 0.1,
        eps: float = 1e-12,
        norm_first: bool = False,
    ):
        super().__init__()
        require_probability("dropout_p", dropout_p)
        require_probability("attention_dropout_p", attention_dropout_p)
        self.norm_first = norm_first
        self.attention = MultiHeadAttention(d_model, num_heads, dropout_p=attention_dropout_p)
        self.attention_norm = LayerNorm(d_model, eps=eps)
        self.feed_forward = FeedForward(d_model, d_ff)
        self.output_norm = LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False):
        if self.norm_first:
            attended, weights = self.attention(self.attention_norm(x), mask, need_weights)
            x = x + self.dropout(attended)  # (batch, seq, d_model)
            x = x + self.dropout(self.feed_forward(self.output_norm(x)))  # (batch, seq, d_model)
            return x, weights
        attended, weights = self.attention(x, mask, need_weights)
        x = self.attention_norm(x + self.dropout(attended))  # (batch, seq, d_model)
        x = self.output_norm(x + self.dropout(self.feed_forward(x)))  # (batch, seq, d_model)
        return x, weights


class Encoder(nn.Module):
    """``num_layers`` encoder layers applied in turn; collects each layer's attention weights."""

    def __init__(self, num_layers: int, **layer_kwargs):
        super().__init__()
        require_positive_int("num_layers", num_layers)
        self.layers = nn.ModuleList(EncoderLayer(**layer_kwargs) for _ in range(num_layers))

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        need_weights: bool = False,
        need_hidden_states: bool = False,
    ):
        """Returns (x, hidden_states, attentions): hidden_states has the input and every layer's
        output, attentions one (batch, heads, seq, seq) tensor per layer; each is empty unless asked
        for. (Keeping every layer's output alive when nobody asked costs memory and, on the CPU, time.)"""
        hidden_states = [x] if need_hidden_states else []
        attentions = []
        for layer in self.layers:
            x, weights = layer(x, mask, need_weights)
            if need_hidden_states:
                hidden_states.append(x)
            if need_weights:
                attentions.append(weights)
        return x, tuple(hidden_states), tuple(attentions)
