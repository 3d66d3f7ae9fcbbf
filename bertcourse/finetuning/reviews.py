"""Sentence classification on the fresh/rotten reviews: from examples to batches, metrics, probabilities.

The reviews come from ``corpus.review_split()``, the one split of the course; test reviews are never
tuned on::

    collate = ReviewCollator(tokenizer, max_length=128)             # (text, label) examples -> a batch with labels
    batches = SeededBatches(split.train, 32, collate, seed=0)        # bertcourse.training's data order
    history = train(model, batches, steps=32, lr=3e-4, warmup_steps=3)
    evaluate(model, review_batches(split.test, tokenizer), classification_metrics)   # {"loss", "accuracy"}
"""

from __future__ import annotations

import torch

from .._validation import (
    describe,
    require_positive_int,
)
from ..corpus import LABELS
from ..tokenizer import WordPieceTokenizer
from .checks import on_device, require_labelled_texts, require_tokenizer


class ReviewCollator:
    """``collate(examples, generator=None) -> batch``: (text, label) pairs -> the tokenizer's tensors and ``labels``.

    Texts are cut to ``max_length`` word pieces ([CLS] and [SEP] included). The generator is unused
    (there is nothing random in a classification batch); ``training.SeededBatches`` passes one.
    """

    def __init__(self, tokenizer: WordPieceTokenizer, max_length: int = 128, num_labels: int = len(LABELS)):
        require_tokenizer(tokenizer)
        require_positive_int("max_length", max_length)
        require_positive_int("num_labels", num_labels)
        self.tokenizer, self.max_length, self.num_labels = tokenizer, max_length, num_labels

    def __call__(self, examples, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        texts, labels = require_labelled_texts("examples", examples, self.num_labels)
        batch = self.tokenizer(texts, max_length=self.max_length)
        return {**batch, "labels": torch.tensor(labels)}


def review_batches(examples, tokenizer: WordPieceTokenizer, *, batch_size: int = 64, max_length: int = 128):
    """Fixed evaluation batches of (text, label) examples, shortest texts first (less padding, same figures)."""
    collate = ReviewCollator(tokenizer, max_length)
    require_labelled_texts("examples", examples, collate.num_labels)
    require_positive_int("batch_size", batch_size)
    ordered = sorted(examples, key=lambda example: len(example[0]))
    return [collate(ordered[i : i + batch_size]) for i in range(0, len(ordered), batch_size)]


def classification_metrics(batch: dict, output) -> dict[str, tuple[torch.Tensor, int]]:
    """What ``training.evaluate`` averages for a classifier: the loss and the accuracy, weighted by examples."""
    labels = batch["labels"]
    correct = output.logits.argmax(dim=-1) == labels  # (batch,)
    return {"loss": (output.loss, len(labels)), "accuracy": (correct.float().mean(), len(labels))}


def predict_probabilities(model, tokenizer: WordPieceTokenizer, texts, *, batch_size: int = 64, max_length: int = 128):
    """(n_texts, num_labels) class probabilities of a sequence classifier, in eval mode and without gradients.

    The model's own mode is given back afterwards.
    """
    require_tokenizer(tokenizer)
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, (list, tuple)) or not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError(
            f"`texts` must be a non-empty list of strings (an empty batch has nothing to predict), "
            f"got {describe(texts)}."
        )
    require_positive_int("batch_size", batch_size)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            parts = []
            for i in range(0, len(texts), batch_size):
                batch = on_device(tokenizer(list(texts[i : i + batch_size]), max_length=max_length), model)
                parts.append(model(**batch).logits.softmax(dim=-1).cpu())  # (chunk, num_labels)
    finally:
        model.train(was_training)
    return torch.cat(parts)  # (n_texts, num_labels)
