"""The checks of the pretraining data's borders, one meaning each.

``require_share`` admits [0, 1] (a share of tokens or of pairs may be all or none), unlike
``_validation.require_probability``, which is for dropout and admits [0, 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .._validation import describe


def require_texts(name: str, texts) -> list[str]:
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not all(isinstance(t, str) for t in texts):
        raise TypeError(f"`{name}` must be a list of strings (one document each), got {describe(texts)}.")
    if not any(t.strip() for t in texts):
        raise ValueError(f"`{name}` is an empty corpus: it has no text to learn from.")
    return list(texts)


def require_documents(documents) -> list[list[torch.Tensor]]:
    """A list of documents, each a list of 1-D id tensors (``tokenize_documents``), with at least two
    documents and one sentence that has a next sentence."""
    if not isinstance(documents, (list, tuple)) or not all(isinstance(d, (list, tuple)) for d in documents):
        raise TypeError(
            f"`documents` must be a list of documents, each a list of sentences (1-D id tensors) as "
            f"`tokenize_documents` returns, got {describe(documents)}."
        )
    for document in documents:
        for sentence in document:
            if not isinstance(sentence, torch.Tensor) or sentence.dim() != 1 or sentence.dtype != torch.long:
                raise TypeError(f"every sentence must be a 1-D torch.long tensor of ids, got {describe(sentence)}.")
    if not any(len(document) >= 2 for document in documents):
        raise ValueError(
            "`documents` is an empty corpus for NSP: no document has two sentences, so there is no real next "
            "sentence to learn from."
        )
    if len(documents) < 2:
        raise ValueError("`documents` must hold at least two documents: a NotNext sentence B comes from another one.")
    return list(documents)


def require_positions(positions, documents) -> list[tuple[int, int]]:
    try:
        positions = [(int(d), int(s)) for d, s in positions]
    except (TypeError, ValueError):
        raise TypeError(
            f"`positions` must be a list of (document, sentence) pairs, got {describe(positions)}."
        ) from None
    for d, s in positions:
        if not (0 <= d < len(documents) and 0 <= s < len(documents[d]) - 1):
            raise ValueError(
                f"position ({d}, {s}) is not a sentence with a next sentence in `documents`: take positions from "
                "`pair_positions(documents)`."
            )
    return positions


def require_share(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0 or math.isnan(value):
        raise ValueError(f"`{name}` must be a probability in [0, 1], got {value!r}.")


def require_generator(generator) -> None:
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            "`generator` must be a torch.Generator (e.g. `torch.Generator().manual_seed(0)`), "
            f"got {describe(generator)}."
        )
