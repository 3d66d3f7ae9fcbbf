"""The baselines a fine-tuned model must beat, trained with the same loop as the models.

- ``majority_class``: always the most frequent training label;
- ``BagOfWords``: logistic regression on word counts, one row of weights per word of the training
  vocabulary (a review's logits are the sum of its words' rows plus a bias), in torch;
- ``sentence_features`` + ``LinearProbe``: a frozen encoder's mean-pooled sentence vectors (or its
  [CLS] vector, or its pooler output) and a linear layer trained on them, the encoder untouched.

Each is a plain ``nn.Module`` (or a label), so every row of notebook 10's table was trained and judged
the same way.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .._validation import (
    describe,
    is_int,
    require_float_tensor,
    require_positive_int,
)
from ..corpus import LABELS
from ..pooling import mean_pooling
from ..tokenizer import WordPieceTokenizer
from .checks import on_device, require_labelled_texts, require_tokenizer

FEATURES = ("mean", "cls", "pooler")


def majority_class(labels) -> int:
    """The most frequent label of the training set (the smaller label on a tie): the first baseline."""
    if not isinstance(labels, (list, tuple)) or not labels or not all(is_int(y) for y in labels):
        raise ValueError(f"`labels` must be a non-empty list of int labels, got {describe(labels)}.")
    counts = Counter(labels)
    return min(counts, key=lambda label: (-counts[label], label))


_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[^\w\s]")


def words_of(text: str) -> list[str]:
    """Lowercased words and punctuation marks: ``"Don't go!"`` -> ``["don't", "go", "!"]``."""
    if not isinstance(text, str):
        raise TypeError(f"`text` must be a string, got {describe(text)}.")
    return _WORD.findall(text.lower())


@dataclasses.dataclass
class LinearOutput:
    """What the baselines return: ``logits`` (batch, num_labels) and, with labels, the cross-entropy ``loss``."""

    logits: torch.Tensor
    loss: torch.Tensor | None = None


class BagOfWords(nn.Module):
    """Logistic regression on word counts: logits = sum over the review's words of W[word] + b.

    ``vocabulary``: the words that get a row of weights (index 0 is every other word, and padding,
    and gets none). ``BagOfWords.from_texts(texts, min_count=2)`` keeps the training words seen at
    least twice. ``bow.collate(examples, generator=None)`` turns (text, label) pairs into
    ``{"word_ids", "labels"}``, so ``training.train`` and ``training.evaluate`` run it like BERT.
    """

    def __init__(self, vocabulary: Sequence[str], num_labels: int = len(LABELS)):
        super().__init__()
        if isinstance(vocabulary, str) or not vocabulary or not all(isinstance(w, str) for w in vocabulary):
            raise ValueError(f"`vocabulary` must be a non-empty list of words, got {describe(vocabulary)}.")
        require_positive_int("num_labels", num_labels)
        self.vocabulary = list(vocabulary)
        self.index = {word: i + 1 for i, word in enumerate(self.vocabulary)}  # 0: an unknown word, or padding
        self.num_labels = num_labels
        self.weights = nn.Embedding(len(self.vocabulary) + 1, num_labels, padding_idx=0)
        self.bias = nn.Parameter(torch.zeros(num_labels))
        nn.init.zeros_(self.weights.weight)

    @classmethod
    def from_texts(cls, texts, min_count: int = 2, num_labels: int = len(LABELS)) -> BagOfWords:
        if isinstance(texts, str) or not texts or not all(isinstance(t, str) for t in texts):
            raise ValueError(f"`texts` must be a non-empty list of strings, got {describe(texts)}.")
        require_positive_int("min_count", min_count)
        counts = Counter(word for text in texts for word in words_of(text))
        return cls(sorted(word for word, n in counts.items() if n >= min_count), num_labels)

    def collate(self, examples, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        texts, labels = require_labelled_texts("examples", examples, self.num_labels)
        rows = [[self.index.get(word, 0) for word in words_of(text)] or [0] for text in texts]
        word_ids = torch.zeros(len(rows), max(len(row) for row in rows), dtype=torch.long)  # (batch, longest)
        for i, row in enumerate(rows):
            word_ids[i, : len(row)] = torch.tensor(row)
        return {"word_ids": word_ids, "labels": torch.tensor(labels)}

    def forward(self, word_ids: torch.Tensor, labels: torch.Tensor | None = None) -> LinearOutput:
        logits = self.weights(word_ids).sum(dim=1) + self.bias  # (batch, num_labels): padding's row is 0
        return LinearOutput(logits, None if labels is None else F.cross_entropy(logits, labels))


def sentence_features(
    encoder, tokenizer: WordPieceTokenizer, texts, *, batch_size: int = 64, max_length: int = 128
) -> dict[str, torch.Tensor]:
    """A frozen encoder's three candidate sentence vectors, from one pass: {"mean", "cls", "pooler"}, each
    (n_texts, hidden): the mean of the token vectors (padding left out), the raw [CLS] vector, the pooler's
    tanh(W h_[CLS] + b). Texts go shortest first (less padding) and come back in their own order.
    """
    require_tokenizer(tokenizer)
    if isinstance(texts, str) or not isinstance(texts, (list, tuple)) or not texts:
        raise ValueError(f"`texts` must be a non-empty list of strings, got {describe(texts)}.")
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    parts = {name: [] for name in FEATURES}
    was_training = encoder.training
    encoder.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(order), batch_size):
                batch = tokenizer([texts[i] for i in order[start : start + batch_size]], max_length=max_length)
                out = encoder(**on_device(batch, encoder))
                mask = batch["attention_mask"].to(out.last_hidden_state.device)
                parts["mean"].append(mean_pooling(out.last_hidden_state, mask).cpu())  # (chunk, hidden)
                parts["cls"].append(out.last_hidden_state[:, 0].cpu())  # (chunk, hidden)
                parts["pooler"].append(out.pooler_output.cpu())  # (chunk, hidden)
    finally:
        encoder.train(was_training)
    back = torch.empty(len(order), dtype=torch.long)
    back[torch.tensor(order)] = torch.arange(len(order))  # where each text's row went
    return {name: torch.cat(rows)[back] for name, rows in parts.items()}


class LinearProbe(nn.Module):
    """A linear layer on fixed features: forward(features, labels=None) -> LinearOutput.

    ``probe.collate(examples)`` stacks (feature row, label) pairs into ``{"features", "labels"}``.
    """

    def __init__(self, hidden_size: int, num_labels: int = len(LABELS)):
        super().__init__()
        require_positive_int("hidden_size", hidden_size)
        require_positive_int("num_labels", num_labels)
        self.num_labels = num_labels
        self.classifier = nn.Linear(hidden_size, num_labels)

    @staticmethod
    def examples(features: torch.Tensor, labels) -> list[tuple[torch.Tensor, int]]:
        """(feature row, label) pairs for ``SeededBatches``."""
        require_float_tensor("features", features, ndim=2)
        if len(labels) != len(features):
            raise ValueError(
                f"`labels` must have one label per row of `features` ({len(features)}), got {len(labels)}."
            )
        return list(zip(features, labels, strict=True))

    def collate(self, examples, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        if not isinstance(examples, (list, tuple)) or not examples:
            raise ValueError(
                f"`examples` is an empty batch: pass at least one (features, label) pair, got {describe(examples)}."
            )
        return {"features": torch.stack([f for f, _ in examples]), "labels": torch.tensor([y for _, y in examples])}

    def forward(self, features: torch.Tensor, labels: torch.Tensor | None = None) -> LinearOutput:
        logits = self.classifier(features)  # (batch, num_labels)
        return LinearOutput(logits, None if labels is None else F.cross_entropy(logits, labels))
