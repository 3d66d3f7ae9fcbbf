"""The assembled model at work: a review classifier trained through the learner's pieces, beside the reference's.

``classifier_pair(pieces, trainable_layers)`` returns two classifiers of the course's reviews that differ in
one thing only, the encoder: the first runs the learner's pieces (``assemble``), the second the package's
``BertModel``. Both start from MiniLM's weights and a head at zero (the same start, with no random draw); both have no
dropout (the pieces have none, so the reference's is turned off too: otherwise the two runs would differ by
the random masks, not by the code).

The head is sentence-transformers' recipe (the mean of the token vectors, padding left out) under one linear
layer, not the pooler: MiniLM's pooler was never trained (notebook 07). Only the encoder layers named in
``trainable_layers`` (and the head) learn; the others are frozen. The gradient still flows back through every
piece of the trainable layers, so a piece that is not differentiable, or computes a wrong gradient, shows
there; training the whole of MiniLM takes minutes on a laptop CPU, the last layer seconds.

``MeanPooledClassifier.forward(**batch)`` returns ``finetuning.heads.ClassifierOutput`` (``logits``, ``loss``),
so ``bertcourse.training``'s loop and ``finetuning``'s evaluation take it unchanged.
"""

from __future__ import annotations

import dataclasses

import torch.nn.functional as F
from torch import nn

from .._validation import describe, is_int
from ..bert import BertModel
from ..finetuning.heads import ClassifierOutput
from ..pooling import mean_pooling
from .assembly import assemble
from .pieces import Pieces


class MeanPooledClassifier(nn.Module):
    """``encoder`` (a ``BertModel``), the mean of its token vectors, one linear layer: ``num_labels`` logits.

    forward(input_ids, attention_mask=None, token_type_ids=None, labels=None) -> ClassifierOutput; ``labels``:
    (batch,) class indices, the loss is the cross-entropy. Only the encoder layers ``trainable_layers`` and the
    head have ``requires_grad``.
    """

    def __init__(self, encoder: BertModel, num_labels: int = 2, trainable_layers=()):
        super().__init__()
        if not isinstance(encoder, BertModel):
            raise TypeError(f"`encoder` must be a BertModel (or the assembled one), got {describe(encoder)}.")
        layers = encoder.config.num_hidden_layers
        if not all(is_int(i) and 0 <= i < layers for i in trainable_layers):
            raise ValueError(f"`trainable_layers` must hold layer numbers 0..{layers - 1}, got {trainable_layers!r}.")
        self.bert, self.config = encoder, encoder.config
        self.classifier = nn.Linear(self.config.hidden_size, num_labels)
        nn.init.zeros_(self.classifier.weight)  # from zero, as a logistic regression starts: every review scores
        nn.init.zeros_(self.classifier.bias)  # alike, so the untrained model predicts one class for all of them
        trainable = tuple(f"encoder.layers.{i}." for i in trainable_layers)
        for name, parameter in self.bert.named_parameters():
            parameter.requires_grad_(name.startswith(trainable))

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> ClassifierOutput:
        out = self.bert(input_ids, attention_mask, token_type_ids)
        sentences = mean_pooling(out.last_hidden_state, attention_mask)  # (batch, hidden): padding left out
        logits = self.classifier(sentences)  # (batch, num_labels)
        loss = None if labels is None else F.cross_entropy(logits, labels)
        return ClassifierOutput(logits=logits, bert=out, loss=loss)


def classifier_pair(pieces: Pieces, trainable_layers=(5,), folder=None):
    """(the classifier on the pieces' encoder, the same on the package's ``BertModel``): MiniLM's weights (or
    ``folder``'s), the head at zero, no dropout in either, the same layers trainable."""
    if not isinstance(pieces, Pieces):
        raise TypeError(f"`pieces` must come from `load_pieces(...)`, got {describe(pieces)}.")
    from ..pretrained import default_weights_dir

    yours = assemble(pieces, folder)
    no_dropout = dataclasses.replace(yours.config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    reference = BertModel(no_dropout)
    loaded = BertModel.from_pretrained(default_weights_dir() if folder is None else folder)
    reference.load_state_dict(loaded.state_dict())
    return (
        MeanPooledClassifier(yours, 2, trainable_layers),
        MeanPooledClassifier(reference, 2, trainable_layers),
    )
