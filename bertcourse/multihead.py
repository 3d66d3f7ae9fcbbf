"""Multi-head attention: several small attentions side by side, then one output projection.

The model width ``d_model`` is cut into ``num_heads`` slices of ``d_head = d_model /
num_heads`` features (BERT-base: 768 = 12 x 64). Each head runs scaled dot-product
attention on its own slice, so each can learn a different pattern. The steps:

1. project x to Q, K, V with three (d_model x d_model) linear maps -- the same
   parameters as one big head;
2. **split heads**: (batch, seq, d_model) -> (batch, heads, seq, d_head);
3. attention inside each head (scale by sqrt(d_head), not sqrt(d_model));
4. **merge heads**: (batch, heads, seq, d_head) -> (batch, seq, d_model);
5. the output projection W_O mixes the heads. Without it the heads never talk to each
   other, and the block is not BERT's.

The linear layers are named ``query``, ``key``, ``value``, ``output`` so that loading
Hugging Face weights is a readable rename (see ``bertcourse.weights``).
"""

from __future__ import annotations

import torch
from torch import nn

from ._validation import (
    describe,
    require_divisible,
    require_float_tensor,
    require_layer_input,
    require_probability,
    require_shape,
    require_tensor,
)
from .attention import _fast_attention, _scaled_dot_product_attention
from .masks import broadcast_mask, require_mask_shape


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(batch, seq, d_model) -> (batch, heads, seq, d_head).

    ``view`` alone is not enough: it gives (batch, seq, heads, d_head); the transpose
    puts heads before seq so that each head attends over the whole sequence.
    """
    require_tensor("x", x, ndim=3)
    require_divisible(x.shape[-1], num_heads)
    return _split_heads(x, num_heads)


def _split_heads(x, num_heads):
    """Cut the features into heads, then move the head axis in front of the sequence."""
    batch, seq, d_model = x.shape
    heads = x.view(batch, seq, num_heads, d_model // num_heads)  # (batch, seq, heads, d_head)
    return heads.transpose(1, 2)  # (batch, heads, seq, d_head)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(batch, heads, seq, d_head) -> (batch, seq, heads * d_head); the inverse of ``split_heads``."""
    require_tensor("x", x, ndim=4)
    return _merge_heads(x)


def _merge_heads(x):
    """Move the sequence axis back in front, then lay the heads side by side."""
    batch, heads, seq, d_head = x.shape
    tokens_first = x.transpose(1, 2)  # (batch, seq, heads, d_head)
    return tokens_first.reshape(batch, seq, heads * d_head)  # (batch, seq, d_model)


def split_fused_qkv(qkv: torch.Tensor, num_heads: int):
    """A fused projection ``x @ [W_Q | W_K | W_V]`` (batch, seq, 3 * d_model) -> q, k, v by heads.

    One matrix product computes all three projections (``nn.MultiheadAttention``'s ``in_proj_weight``
    and nanoGPT's ``c_attn`` are such a fused matrix); its output holds Q, K and V side by side along
    the features. Returns (q, k, v), each (batch, num_heads, seq, d_head) with
    d_head = d_model // num_heads, as ``split_heads`` gives them.
    """
    require_float_tensor("qkv", qkv, ndim=3)
    if qkv.shape[-1] % 3:
        raise ValueError(
            f"`qkv` must hold Q, K and V side by side, so its last size must be 3 * d_model, got {describe(qkv)}."
        )
    require_divisible(qkv.shape[-1] // 3, num_heads)
    return _split_fused_qkv(qkv, num_heads)


def _split_fused_qkv(qkv, num_heads):
    """Cut the features into Q, K and V first, then each of them into heads."""
    q, k, v = qkv.chunk(3, dim=-1)  # 3 x (batch, seq, d_model)
    return _split_heads(q, num_heads), _split_heads(k, num_heads), _split_heads(v, num_heads)  # 3 x (b, h, s, d_head)


def multi_head_attention(
    x: torch.Tensor,
    w_q: torch.Tensor,
    w_k: torch.Tensor,
    w_v: torch.Tensor,
    w_o: torch.Tensor,
    num_heads: int,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Multi-head self-attention with plain matrices (no biases), for reading and for exercises.

    x: (batch, seq, d_model); w_q, w_k, w_v, w_o: (d_model, d_model), used as x @ w.
    mask: bool, broadcastable to (batch, heads, seq, seq), True = may attend.
    Returns (batch, seq, d_model).
    """
    require_float_tensor("x", x, ndim=3)
    batch, seq, d_model = x.shape
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o)):
        require_float_tensor(name, w, ndim=2, like=x, like_name="`x`")
        require_shape(name, w, (d_model, d_model), symbols="(d_model, d_model)")
    require_divisible(d_model, num_heads)
    if mask is not None:
        mask = broadcast_mask(mask, (batch, num_heads, seq, seq)).to(x.device)
    return _multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads, mask)


def _multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    """Project, split into heads, attend in each head, merge the heads, mix them with W_O."""
    q = _split_heads(x @ w_q, num_heads)  # (batch, heads, seq, d_head)
    k = _split_heads(x @ w_k, num_heads)  # (batch, heads, seq, d_head)
    v = _split_heads(x @ w_v, num_heads)  # (batch, heads, seq, d_head)
    context, _ = _scaled_dot_product_attention(q, k, v, mask)  # (batch, heads, seq, d_head)
    return _merge_heads(context) @ w_o  # (batch, seq, d_model)


def torch_multi_head_attention(
    x: torch.Tensor,
    in_proj_weight: torch.Tensor,
    in_proj_bias: torch.Tensor,
    out_proj_weight: torch.Tensor,
    out_proj_bias: torch.Tensor,
    num_heads: int,
    key_padding_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """What ``nn.MultiheadAttention(batch_first=True)`` computes, from its own parameters.

    x: (batch, seq, d_model); in_proj_weight: (3 * d_model, d_model), W_Q, W_K, W_V stacked in the
    (out, in) layout; in_proj_bias: (3 * d_model,); out_proj_weight: (d_model, d_model) and
    out_proj_bias: (d_model,), ``out_proj``'s. key_padding_mask: bool (batch, seq), True = *ignore*
    this key, PyTorch's convention. Returns the attention output (batch, seq, d_model).
    """
    require_float_tensor("x", x, ndim=3)
    batch, seq, d_model = x.shape
    for name, parameter, shape, symbols in (
        ("in_proj_weight", in_proj_weight, (3 * d_model, d_model), "(3 * d_model, d_model)"),
        ("in_proj_bias", in_proj_bias, (3 * d_model,), "(3 * d_model,)"),
        ("out_proj_weight", out_proj_weight, (d_model, d_model), "(d_model, d_model)"),
        ("out_proj_bias", out_proj_bias, (d_model,), "(d_model,)"),
    ):
        require_float_tensor(name, parameter, like=x, like_name="`x`")
        require_shape(name, parameter, shape, symbols=symbols)
    require_divisible(d_model, num_heads)
    if key_padding_mask is not None:
        require_shape("key_padding_mask", key_padding_mask, (batch, seq), symbols="(batch, seq)")
        if key_padding_mask.dtype != torch.bool:
            raise TypeError(f"`key_padding_mask` must be boolean (True = ignore), got {describe(key_padding_mask)}.")
    return _torch_multi_head_attention(
        x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, key_padding_mask
    )


def _torch_multi_head_attention(
    x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, key_padding_mask=None
):
    """One fused projection, cut into Q, K, V and heads; PyTorch's mask flipped to ours; out_proj last."""
    q, k, v = _split_fused_qkv(x @ in_proj_weight.T + in_proj_bias, num_heads)  # 3 x (batch, heads, seq, d_head)
    mask = None if key_padding_mask is None else ~key_padding_mask[:, None, None, :]  # (batch, 1, 1, seq)
    context, _ = _scaled_dot_product_attention(q, k, v, mask)  # (batch, heads, seq, d_head)
    return _merge_heads(context) @ out_proj_weight.T + out_proj_bias  # (batch, seq, d_model)


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention as in BERT: Q/K/V projections with bias, heads, W_O.

    forward(x, mask=None, need_weights=False) -> (output, weights)
    x: (batch, seq, d_model); mask: bool broadcastable to (batch, heads, seq, seq), on x's device.
    output: (batch, seq, d_model); weights: (batch, heads, seq, seq), or None when
    ``need_weights`` is False (then the fused fast path runs). ``dropout_p`` drops attention
    weights in training mode.

    The constructor checks its settings; ``forward`` checks only the metadata of ``x`` and
    ``mask`` (rank, width, dtype, a mask that broadcasts) and calls the cores directly, so
    nothing is read back from a GPU and ``torch.compile`` sees one graph. The values of a
    mask (0/1) are checked by ``BertModel`` at its border, or by the public functions
    (``split_heads``, ``scaled_dot_product_attention``) on a tensor of your own.
    """

    def __init__(self, d_model: int, num_heads: int, dropout_p: float = 0.0):
        super().__init__()
        require_divisible(d_model, num_heads)
        require_probability("dropout_p", dropout_p)
        self.d_model = d_model
        self.num_heads = num_heads
        self.dropout_p = dropout_p
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, d_model)
        self.value = nn.Linear(d_model, d_model)
        self.output = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False):
        require_layer_input("x", x, self.d_model, self.query.weight, ndim=3)
        if mask is not None:
            require_mask_shape("mask", mask, (x.shape[0], self.num_heads, x.shape[1], x.shape[1]))
        q = _split_heads(self.query(x), self.num_heads)  # (batch, heads, seq, d_head)
        k = _split_heads(self.key(x), self.num_heads)  # (batch, heads, seq, d_head)
        v = _split_heads(self.value(x), self.num_heads)  # (batch, heads, seq, d_head)
        dropout_p = self.dropout_p if self.training else 0.0
        if need_weights:  # the teaching path, which returns the attention maps too
            context, weights = _scaled_dot_product_attention(q, k, v, mask, dropout_p)  # maps (batch, heads, seq, seq)
        else:  # the fused kernel
            context, weights = _fast_attention(q, k, v, mask, dropout_p), None  # (batch, heads, seq, d_head), no maps
        return self.output(_merge_heads(context)), weights  # (batch, seq, d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, num_heads={self.num_heads}, d_head={self.d_model // self.num_heads}"
