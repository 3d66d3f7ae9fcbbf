"""The checks that fine-tuning's data modules share, each with one meaning.

``require_tokenizer``, ``require_words`` and ``require_labelled_texts`` reject bad input at a
function's border with a message that names the argument; ``on_device`` (``bertcourse.training``'s, re-exported) moves a
batch to the model's device.
"""

from __future__ import annotations

from .._validation import (
    describe,
    is_int,
)
from ..tokenizer import WordPieceTokenizer
from ..training import on_device  # noqa: F401  (re-exported: the modules of fine-tuning import it from here)


def require_tokenizer(tokenizer) -> None:
    if not isinstance(tokenizer, WordPieceTokenizer):
        raise TypeError(f"`tokenizer` must be a bc.WordPieceTokenizer, got {describe(tokenizer)}.")


def require_words(words) -> None:
    if isinstance(words, str) or not isinstance(words, (list, tuple)) or not words:
        raise TypeError(f"each sentence must be a non-empty list of words (strings), got {describe(words)}.")
    if not all(isinstance(w, str) and w.strip() for w in words):
        raise TypeError(f"each word must be a non-empty string, got {describe(words)}.")


def require_labelled_texts(name: str, examples, num_labels: int) -> tuple[list[str], list[int]]:
    """(texts, labels) of a non-empty list of (text, label) pairs with labels in 0..num_labels-1."""
    if not isinstance(examples, (list, tuple)) or not examples:
        raise ValueError(f"`{name}` is an empty batch: pass at least one (text, label) pair, got {describe(examples)}.")
    texts, labels = [], []
    for example in examples:
        if not (isinstance(example, (list, tuple)) and len(example) == 2 and isinstance(example[0], str)):
            raise TypeError(f"each of `{name}` must be a (text, label) pair, got {describe(example)}.")
        text, label = example
        if not is_int(label) or not 0 <= label < num_labels:
            raise ValueError(
                f"`{name}` holds the label {label!r} for {text[:40]!r}: labels are class indices 0..{num_labels - 1}."
            )
        texts.append(text)
        labels.append(label)
    return texts, labels
