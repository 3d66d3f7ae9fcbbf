r"""Sentence embeddings: masked mean pooling of BERT's token vectors, then normalisation.

BERT gives one vector per token. A sentence needs one vector. The [CLS] vector and the
pooler's tanh(W h_[CLS]) were trained for next-sentence prediction, not for similarity, and
all-MiniLM-L6-v2's pooler was never trained at all (its bias is exactly 0). The recipe of
sentence-transformers, which this model was trained with, is the *mean of the token vectors*:

.. math::

    e = \frac{\sum_i m_i h_i}{\max(\sum_i m_i,\ 10^{-9})}, \qquad
    \hat e = \frac{e}{\max(\lVert e\rVert_2,\ 10^{-12})}

where :math:`m_i` is 1 for a real token and 0 for padding. Two details matter:

- **The mask.** A padded batch holds rows of [PAD] tokens whose vectors are not zero. A plain
  ``hidden.mean(dim=1)`` averages them in, so the same sentence gets another embedding when
  it sits next to a longer one. Multiplying by the mask first removes them.
- **The clamps.** A row with no real token (a hand-made mask) would divide 0 by 0. The
  denominator is clamped at 1e-9 (the embedding becomes 0), and the norm at 1e-12, exactly as
  in sentence-transformers' ``Pooling`` and ``Normalize`` modules, so the results agree.

``cosine_similarity`` of two normalised embeddings is their dot product.
"""

from __future__ import annotations

import torch

from ._validation import describe, require_float_tensor, require_tensor
from .masks import as_bool_mask


def mean_pooling(last_hidden_state: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Mean of the token vectors of each sentence, padding left out.

    last_hidden_state: (batch, seq, hidden), e.g. ``BertModel(...).last_hidden_state``.
    attention_mask: (batch, seq), bool or 0/1, True/1 at real tokens (the tokenizer's
    ``attention_mask``); None means every position is a real token.
    Returns (batch, hidden). A sentence with no real token gets the zero vector.
    """
    mask = _check_pooling_inputs(last_hidden_state, attention_mask)
    return _mean_pooling(last_hidden_state, mask)


def _mean_pooling(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The textbook lines: weight each token by its mask, sum, divide by the count of real tokens."""
    weights = mask[:, :, None].to(hidden.dtype)  # (batch, seq, 1): 1 at real tokens, 0 at padding
    summed = (hidden * weights).sum(dim=1)  # (batch, hidden)
    counts = weights.sum(dim=1).clamp(min=1e-9)  # (batch, 1), never 0
    return summed / counts  # (batch, hidden)


def normalize(embeddings: torch.Tensor) -> torch.Tensor:
    """Scale each row to unit length (L2), as sentence-transformers' ``Normalize`` module does.

    embeddings: (batch, hidden) or (hidden,). A zero row stays zero (the norm is clamped at 1e-12).
    """
    require_tensor("embeddings", embeddings, min_dim=1)
    require_float_tensor("embeddings", embeddings)
    return _normalize(embeddings)


def _normalize(embeddings: torch.Tensor) -> torch.Tensor:
    norms = embeddings.norm(dim=-1, keepdim=True).clamp(min=1e-12)  # (..., 1)
    return embeddings / norms  # (..., hidden), each row of length 1


def sentence_embeddings(model, batch: dict[str, torch.Tensor], *, normalized: bool = True) -> torch.Tensor:
    """The sentence-transformers recipe end to end: encode, mean-pool with the mask, normalise.

    model: a ``BertModel`` (or anything returning ``.last_hidden_state`` from the same keywords);
    batch: the tokenizer's output, a dict with ``input_ids`` and ``attention_mask`` (and
    optionally ``token_type_ids``). Returns (batch, hidden), unit rows unless ``normalized=False``.
    For all-MiniLM-L6-v2 this equals ``SentenceTransformer("all-MiniLM-L6-v2").encode(...)``.
    """
    if not isinstance(batch, dict) or "input_ids" not in batch:
        raise TypeError(
            f"`batch` must be the tokenizer's output, a dict with 'input_ids' and 'attention_mask', "
            f"got {describe(batch)}."
        )
    unknown = set(batch) - {"input_ids", "attention_mask", "token_type_ids"}
    if unknown:
        raise ValueError(
            f"`batch` has keys {sorted(unknown)} that the model does not take: "
            "expected 'input_ids', 'attention_mask' and optionally 'token_type_ids'."
        )
    attention_mask = batch.get("attention_mask")
    hidden = model(**batch).last_hidden_state  # (batch, seq, hidden)
    embeddings = mean_pooling(hidden, attention_mask)  # (batch, hidden)
    return _normalize(embeddings) if normalized else embeddings


def cosine_similarity(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Cosine of the angle between the rows of ``a`` (n, d) and of ``b`` (m, d): an (n, m) matrix.

    1 means the same direction, 0 orthogonal, -1 opposite. Vectors (d,) are treated as one row.
    """
    for name, x in (("a", a), ("b", b)):
        require_tensor(name, x)
        require_float_tensor(name, x)
        if x.dim() not in (1, 2):
            raise ValueError(f"`{name}` must be one vector (d,) or rows (n, d), got {describe(x)}.")
    a2, b2 = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])  # (n, d), (m, d)
    if a2.shape[-1] != b2.shape[-1]:
        raise ValueError(f"`a` and `b` must have the same width d, got {describe(a)} and {describe(b)}.")
    if a2.dtype != b2.dtype:
        raise TypeError(f"`a` and `b` must have the same dtype, got {a2.dtype} and {b2.dtype}.")
    return _normalize(a2) @ _normalize(b2).T  # (n, m)


def _check_pooling_inputs(last_hidden_state, attention_mask) -> torch.Tensor:
    """Check shapes and return the mask as bool (batch, seq); None becomes all True."""
    require_tensor("last_hidden_state", last_hidden_state, ndim=3)
    require_float_tensor("last_hidden_state", last_hidden_state)
    batch, seq = last_hidden_state.shape[:2]
    if attention_mask is None:
        return torch.ones(batch, seq, dtype=torch.bool, device=last_hidden_state.device)
    mask = as_bool_mask("attention_mask", attention_mask)
    if mask.shape != (batch, seq):
        raise ValueError(
            f"`attention_mask` must have shape (batch, seq) = {(batch, seq)} to match `last_hidden_state` "
            f"{tuple(last_hidden_state.shape)}, got {describe(attention_mask)}."
        )
    if mask.device != last_hidden_state.device:
        raise ValueError(
            f"`attention_mask` is on {mask.device} but `last_hidden_state` is on {last_hidden_state.device}: "
            "move one of them with `.to(...)`."
        )
    return mask
