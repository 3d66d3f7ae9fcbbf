"""Masks: which keys each query may look at.

One convention everywhere in this package: a mask is a **boolean** tensor and
``True`` means "may attend". This is the convention of
``torch.nn.functional.scaled_dot_product_attention`` and, as 1/0, of Hugging Face's
``attention_mask``. PyTorch's ``nn.MultiheadAttention(key_padding_mask=...)`` uses the
opposite (True = ignore); convert at that border with ``~mask``, and read its ``attn_mask`` (a bool
True = blocked, or a float mask added to the scores) with ``mask_from_torch``.

Masked scores are filled with ``torch.finfo(dtype).min`` rather than ``-1e9``:
``-1e9`` does not fit in fp16 (its range ends at -65504) and ``masked_fill`` raises.

A query row whose keys are *all* masked attends to nothing: this package returns
zero attention weights and a zero output for it, instead of NaN (``-inf`` fill) or
a uniform average over padding (finite fill). BERT never produces such a row (every
sentence has at least [CLS]), so this only matters for hand-made masks.
"""

from __future__ import annotations

import torch

from ._validation import (
    can_check_values,
    describe,
    is_int,
    require_integer_tensor,
    require_mask,
    require_positive_int,
    require_tensor,
)


def padding_mask(lengths, max_len: int | None = None) -> torch.Tensor:
    """Key-padding mask from sentence lengths.

    lengths: ints, shape (batch,), e.g. ``[5, 3]``.
    Returns a bool tensor of shape (batch, max_len), True at real tokens (position < length).
    ``max_len`` defaults to the longest length.
    """
    if isinstance(lengths, (list, tuple)):
        if not all(is_int(n) for n in lengths):
            raise TypeError(f"`lengths` must be a flat list of ints, one per sentence, got {describe(lengths)}.")
        lengths = torch.tensor(lengths, dtype=torch.long)
    require_integer_tensor("lengths", lengths, hint="Lengths count tokens: convert with `.long()`.")
    if lengths.dim() != 1:
        raise ValueError(f"`lengths` must be 1-D, one length per sentence, got {describe(lengths)}.")
    if lengths.numel() == 0:
        raise ValueError("`lengths` is empty: pass one length per sentence, e.g. `[5, 3]`.")
    if can_check_values(lengths) and (lengths < 0).any():
        raise ValueError(f"`lengths` must be >= 0, got {lengths.tolist()}.")
    if max_len is None:
        max_len = int(lengths.max())  # the default needs the value, wherever the lengths are
        if max_len == 0:
            raise ValueError("`lengths` are all 0, so the padded length is unknown: pass `max_len`.")
    require_positive_int("max_len", max_len)
    if can_check_values(lengths) and int(lengths.max()) > max_len:
        raise ValueError(f"`max_len`={max_len} is shorter than the longest sentence ({int(lengths.max())} tokens).")
    return _padding_mask(lengths, max_len)


def _padding_mask(lengths, max_len):
    """True where the position comes before the sentence's end: position < length."""
    positions = torch.arange(max_len, device=lengths.device)  # (max_len,)
    return positions[None, :] < lengths[:, None]  # (1, max_len) < (batch, 1) -> (batch, max_len)


def mask_from_attention_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Hugging Face's 0/1 ``attention_mask`` (batch, seq) -> our bool mask (batch, seq)."""
    require_mask("attention_mask", attention_mask)
    return _mask_from_attention_mask(attention_mask)


def _mask_from_attention_mask(attention_mask):
    """1 marks a real token, which may be attended to: True."""
    return attention_mask != 0  # (batch, seq) bool


def key_padding_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Hugging Face's 0/1 ``attention_mask`` (batch, seq) -> PyTorch's ``key_padding_mask`` (True = ignore).

    ``nn.MultiheadAttention(key_padding_mask=...)`` and ``nn.TransformerEncoder(src_key_padding_mask=...)``
    want True at the padding: the opposite of Hugging Face's 1 and of this package's True. Works for
    0/1 masks of any dtype (long, int, float) and for our boolean masks, wherever the padding sits.
    """
    require_mask("attention_mask", attention_mask)
    return _key_padding_mask(attention_mask)


def _key_padding_mask(attention_mask):
    """0 marks padding, which must be ignored: True."""
    return attention_mask == 0  # (batch, seq) bool, True = ignore


def mask_from_torch(attn_mask: torch.Tensor) -> torch.Tensor:
    """``nn.MultiheadAttention``'s ``attn_mask`` -> this package's bool mask (True = may attend), same shape.

    PyTorch's module takes two kinds: a boolean mask in which True means *blocked* (the opposite of
    ours), or a float mask that is *added* to the scores, 0 where a key is kept and -inf (or the
    dtype's most negative number) where it is blocked. Any shape; the result has the same shape.
    """
    require_tensor("attn_mask", attn_mask)
    if attn_mask.dtype != torch.bool and not attn_mask.dtype.is_floating_point:
        raise TypeError(
            f"`attn_mask` must be boolean (True = blocked) or float (added: 0 or -inf), got {describe(attn_mask)}."
        )
    return _mask_from_torch(attn_mask)


def _mask_from_torch(attn_mask):
    """Blocked is True in a bool mask; in a float mask, blocked is anything at the dtype's most negative or below."""
    if attn_mask.dtype == torch.bool:
        return ~attn_mask  # (...) bool: True = may attend
    return attn_mask > torch.finfo(attn_mask.dtype).min  # (...) bool: 0 -> True; -inf and finfo.min -> False


def causal_mask(seq_len: int, device=None) -> torch.Tensor:
    """Causal (look-ahead) mask of shape (seq_len, seq_len): query i may attend to keys 0..i.

    GPT uses it; BERT does not (every token sees the whole sentence, both directions).
    """
    require_positive_int("seq_len", seq_len)
    return _causal_mask(seq_len, device)


def _causal_mask(seq_len, device=None):
    """The lower triangle, diagonal included: key j is allowed for query i when j <= i."""
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()  # (seq, seq)


def as_bool_mask(name: str, mask: torch.Tensor) -> torch.Tensor:
    """Check that ``mask`` is boolean or holds only 0/1, and return it as bool."""
    require_mask(name, mask)
    return _as_bool_mask(mask)


def _as_bool_mask(mask):
    """A bool mask as it is; a 0/1 mask as 1 -> True."""
    return mask if mask.dtype == torch.bool else mask != 0  # the shape of mask, bool


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of several masks (None entries are skipped): attend only where all allow.

    Example: ``combine_masks(padding[:, None, None, :], causal_mask(n))`` for a padded GPT batch.
    """
    for i, mask in enumerate(masks):
        if mask is not None:
            require_mask(f"masks[{i}]", mask)
    present = [_as_bool_mask(m) for m in masks if m is not None]
    if not present:
        return None
    try:
        torch.broadcast_shapes(*(m.shape for m in present))
    except RuntimeError:
        shapes = ", ".join(str(tuple(m.shape)) for m in present)
        raise ValueError(f"`masks` cannot be broadcast together: shapes {shapes}.") from None
    return _combine_masks(present)


def _combine_masks(masks):
    """Attend only where every mask allows: a logical AND, broadcast."""
    combined = masks[0]  # bool
    for mask in masks[1:]:
        combined = combined & mask  # bool, the shapes broadcast together
    return combined  # bool, the broadcast shape of all the masks


def expand_padding_mask(mask: torch.Tensor) -> torch.Tensor:
    """Key-padding mask (batch, k_len) -> (batch, 1, 1, k_len), ready for (batch, heads, q, k) scores.

    The two new axes broadcast over heads and over queries: every query of a sentence
    ignores the same padded keys.
    """
    require_mask("mask", mask)
    if mask.dim() != 2:
        raise ValueError(f"`mask` must be a key-padding mask of shape (batch, k_len), got {describe(mask)}.")
    return _expand_padding_mask(_as_bool_mask(mask))


def _expand_padding_mask(mask):
    """New axes for heads and queries, so that one row of keys serves them all."""
    return mask[:, None, None, :]  # (batch, k_len) -> (batch, 1, 1, k_len)


def broadcast_mask(mask: torch.Tensor, scores_shape: tuple[int, ...], name: str = "mask") -> torch.Tensor:
    """Check that ``mask`` broadcasts against attention scores of ``scores_shape`` and return it as bool.

    ``scores_shape`` is (..., q_len, k_len), e.g. (batch, heads, q, k). The rules are
    PyTorch's broadcasting rules, as in ``scaled_dot_product_attention``: a (q, k) causal
    mask works as it is; a (batch, k) padding mask needs its middle axes first
    (``expand_padding_mask``). No copy of the full (batch, heads, q, k) tensor is made.
    """
    require_mask(name, mask)
    require_mask_shape(name, mask, scores_shape)
    return _as_bool_mask(mask)


def require_mask_shape(name: str, mask, scores_shape: tuple[int, ...]) -> None:
    """Raise unless ``mask`` is a tensor that broadcasts to ``scores_shape`` (..., q_len, k_len).

    Metadata only (no value is read), so a layer's forward can afford it on any device and under
    ``torch.compile``; ``broadcast_mask`` adds the check of the values.
    """
    require_tensor(name, mask)
    scores_shape = tuple(scores_shape)
    fits = mask.dim() <= len(scores_shape) and all(
        m in (1, s) for m, s in zip(reversed(mask.shape), reversed(scores_shape), strict=False)
    )
    if not fits:
        hint = ""
        if mask.dim() == 2 and len(scores_shape) >= 3 and mask.shape == (scores_shape[0], scores_shape[-1]):
            hint = (
                " It looks like a (batch, k_len) padding mask: add the middle axes with "
                "`mask[:, None, :]` for (batch, q, k) scores or `expand_padding_mask(mask)` "
                "for (batch, heads, q, k) scores."
            )
        raise ValueError(
            f"`{name}` of shape {tuple(mask.shape)} cannot broadcast to the attention scores of shape "
            f"{scores_shape} (..., q_len, k_len).{hint}"
        )


def fill_value(dtype: torch.dtype) -> float:
    """The score given to masked positions: the most negative finite number of ``dtype``.

    Safe in fp32, fp16 and bf16 (``-1e9`` overflows fp16), and exp(fill - max) is exactly 0.
    """
    return torch.finfo(dtype).min
