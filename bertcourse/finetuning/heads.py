"""Fine-tuning heads: the four shapes of the BERT paper's figure 4, each a small layer on ``BertModel``.

- **one sentence** or **a sentence pair** -> one label: ``BertForSequenceClassification``,
  dropout then a linear layer on the pooled vector tanh(W h_[CLS]) (a pair is simply
  ``[CLS] A [SEP] B [SEP]`` with token types 0/1; the head is the same);
- **every token** -> a label (named entities): ``BertForTokenClassification``, dropout then a
  linear layer on each token's vector;
- **a span of the passage** -> the answer to a question: ``BertForQuestionAnswering``, one linear
  layer giving each token a start logit and an end logit.

Each head has Hugging Face's weight names (``classifier.*``, ``qa_outputs.*``) and its config keys
(``id2label``, ``label2id``), so ``from_pretrained`` reads a ``transformers`` checkpoint of the same
class and ``save_pretrained`` writes one that ``transformers`` (and its ``pipeline``) reads. The
token-level heads are built without the pooler, as in Hugging Face: they never read it.

The pooler of a checkpoint may never have been trained (all-MiniLM-L6-v2's was not: notebook 07);
fine-tuning end to end trains it with the rest, which is why the sequence classifier keeps
Hugging Face's design rather than a representation of its own. Labels are checked at the
border; their values on CPU tensors only (the rule of ``bertcourse._validation``).

``classification_logits`` is the sentence head written out by hand (the exercise's reference), and
``predict_labels`` the predictions of a model in eval mode, without gradients.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from .._validation import (
    can_check_values,
    describe,
    require_float_tensor,
    require_integer_tensor,
    require_positive_int,
)
from ..bert import BertModel, BertModelOutput, init_bert_weights
from ..config import BertConfig
from ..heads import IGNORE_INDEX
from ..weights import HFWeightsMixin


@dataclasses.dataclass
class ClassifierOutput:
    """What the sequence and token classifiers return; ``loss`` is None without labels."""

    logits: torch.Tensor  # (batch, num_labels) or (batch, seq, num_labels)
    bert: BertModelOutput
    loss: torch.Tensor | None = None  # ()


@dataclasses.dataclass
class QuestionAnsweringOutput:
    start_logits: torch.Tensor  # (batch, seq)
    end_logits: torch.Tensor  # (batch, seq)
    bert: BertModelOutput
    loss: torch.Tensor | None = None  # (): the mean of the start and end losses


class _LabelledHead(HFWeightsMixin, nn.Module):
    """What the two classifiers share: ``num_labels``, their names, and the config keys that carry them."""

    hf_head_names = (("classifier.", "classifier."),)

    def __init__(self, config: BertConfig | None, num_labels: int, label_names, add_pooling_layer: bool):
        super().__init__()
        require_positive_int("num_labels", num_labels)
        if num_labels < 2:
            raise ValueError(f"`num_labels` must be at least 2 (a classifier chooses among labels), got {num_labels}.")
        self.label_names = _label_names(label_names, num_labels)
        self.num_labels = num_labels
        self.bert = BertModel(config, add_pooling_layer=add_pooling_layer)
        self.config = self.bert.config
        self.dropout = nn.Dropout(self.config.hidden_dropout_prob)
        self.classifier = nn.Linear(self.config.hidden_size, num_labels)
        init_bert_weights(self.classifier, self.config.initializer_range)

    @classmethod
    def _from_hf_config(cls, values: dict, **kwargs):
        id2label = values.get("id2label")
        if id2label and "num_labels" not in kwargs:
            kwargs["num_labels"] = len(id2label)
            kwargs.setdefault("label_names", [id2label[key] for key in sorted(id2label, key=int)])
        return cls(BertConfig.from_dict(values), **kwargs)

    def hf_config(self) -> dict:
        values = super().hf_config()
        values["id2label"] = dict(enumerate(self.label_names))
        values["label2id"] = {label: i for i, label in enumerate(self.label_names)}
        return values

    def _check_labels(self, labels, shape: tuple[int, ...] | None, what: str) -> None:
        """``shape`` is None when ``input_ids`` is not a tensor: the encoder's own check explains that."""
        require_integer_tensor("labels", labels, hint=f"Labels are class indices 0..{self.num_labels - 1}.")
        if shape is not None and tuple(labels.shape) != shape:
            raise ValueError(f"`labels` must have shape {shape}, {what}, got {describe(labels)}.")
        if can_check_values(labels):
            kept = labels[labels != IGNORE_INDEX]
            outside = kept[(kept < 0) | (kept >= self.num_labels)]
            if outside.numel():
                raise ValueError(
                    f"`labels` contains {int(outside[0])}, outside the classes 0..{self.num_labels - 1} "
                    f"({', '.join(self.label_names)}); {IGNORE_INDEX} marks a position without a label."
                )


class BertForSequenceClassification(_LabelledHead):
    """One label per sentence or sentence pair: dropout(pooled vector) -> linear -> ``num_labels`` logits.

    forward(input_ids, attention_mask=None, token_type_ids=None, labels=None) -> ClassifierOutput;
    ``labels``: (batch,) class indices; the loss is the cross-entropy.
    """

    hf_architecture = "BertForSequenceClassification"

    def __init__(self, config: BertConfig | None = None, num_labels: int = 2, label_names=None):
        super().__init__(config, num_labels, label_names, add_pooling_layer=True)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> ClassifierOutput:
        if labels is not None:
            self._check_labels(labels, _batch_shape(input_ids), "one class per sentence")
        out = self.bert(input_ids, attention_mask, token_type_ids)
        logits = self.classifier(self.dropout(out.pooler_output))  # (batch, num_labels)
        loss = None if labels is None else F.cross_entropy(logits, labels)
        return ClassifierOutput(logits=logits, bert=out, loss=loss)


class BertForTokenClassification(_LabelledHead):
    """One label per token (named entities): dropout(each token's vector) -> linear -> ``num_labels`` logits.

    forward(input_ids, attention_mask=None, token_type_ids=None, labels=None) -> ClassifierOutput;
    ``labels``: (batch, seq), -100 on word pieces after a word's first, on special tokens and padding.
    """

    hf_architecture = "BertForTokenClassification"

    def __init__(self, config: BertConfig | None = None, num_labels: int = 2, label_names=None):
        super().__init__(config, num_labels, label_names, add_pooling_layer=False)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None) -> ClassifierOutput:
        if labels is not None:
            shape = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else None
            self._check_labels(labels, shape, "one label per token, -100 where there is none")
        out = self.bert(input_ids, attention_mask, token_type_ids)
        logits = self.classifier(self.dropout(out.last_hidden_state))  # (batch, seq, num_labels)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX)
        return ClassifierOutput(logits=logits, bert=out, loss=loss)


class BertForQuestionAnswering(HFWeightsMixin, nn.Module):
    """Extractive question answering: each token of ``[CLS] question [SEP] passage [SEP]`` gets a start
    logit and an end logit; the answer is the best valid span.

    forward(input_ids, attention_mask=None, token_type_ids=None, start_positions=None, end_positions=None)
    -> QuestionAnsweringOutput. Positions (batch,) index tokens; as in Hugging Face, a position past the
    sequence is ignored in the loss (an answer cut off by the window).
    """

    hf_head_names = (("qa_outputs.", "qa_outputs."),)
    hf_architecture = "BertForQuestionAnswering"

    def __init__(self, config: BertConfig | None = None):
        super().__init__()
        self.bert = BertModel(config, add_pooling_layer=False)
        self.config = self.bert.config
        self.qa_outputs = nn.Linear(self.config.hidden_size, 2)
        init_bert_weights(self.qa_outputs, self.config.initializer_range)

    def forward(
        self, input_ids, attention_mask=None, token_type_ids=None, start_positions=None, end_positions=None
    ) -> QuestionAnsweringOutput:
        if (start_positions is None) != (end_positions is None):
            raise ValueError("pass both `start_positions` and `end_positions` for a loss, or neither.")
        if start_positions is not None:
            for name, positions in (("start_positions", start_positions), ("end_positions", end_positions)):
                require_integer_tensor(name, positions, hint="Positions index the tokens of the input.")
                shape = _batch_shape(input_ids)
                if shape is not None and tuple(positions.shape) != shape:
                    raise ValueError(
                        f"`{name}` must have shape (batch,) = {shape}, one token index per example, "
                        f"got {describe(positions)}."
                    )
        out = self.bert(input_ids, attention_mask, token_type_ids)
        start_logits, end_logits = self.qa_outputs(out.last_hidden_state).unbind(dim=-1)  # 2 x (batch, seq)
        loss = None
        if start_positions is not None:
            past_the_end = start_logits.shape[1]  # an answer outside the window counts for nothing
            start = F.cross_entropy(start_logits, start_positions.clamp(0, past_the_end), ignore_index=past_the_end)
            end = F.cross_entropy(end_logits, end_positions.clamp(0, past_the_end), ignore_index=past_the_end)
            loss = (start + end) / 2
        return QuestionAnsweringOutput(start_logits=start_logits, end_logits=end_logits, bert=out, loss=loss)


def _label_names(names, num_labels: int) -> list[str]:
    if names is None:
        return [f"LABEL_{i}" for i in range(num_labels)]  # Hugging Face's default names
    if not isinstance(names, (list, tuple)) or not all(isinstance(name, str) for name in names):
        raise TypeError(f"`label_names` must be a list of label names (str), got {describe(names)}.")
    if len(names) != num_labels or len(set(names)) != num_labels:
        raise ValueError(f"`label_names` must name each of the {num_labels} classes once, got {list(names)}.")
    return list(names)


def _batch_shape(input_ids) -> tuple[int] | None:
    return (input_ids.shape[0],) if isinstance(input_ids, torch.Tensor) and input_ids.dim() else None


def classification_logits(
    hidden_states: torch.Tensor,
    pooler_weight: torch.Tensor,
    pooler_bias: torch.Tensor,
    classifier_weight: torch.Tensor,
    classifier_bias: torch.Tensor,
) -> torch.Tensor:
    """BERT's sentence head in eval mode, from the encoder's last hidden states: (..., seq, hidden) -> (..., labels).

    The pooler reads the first token, [CLS]: p = tanh(W_p h_[CLS] + b_p); the classifier is one linear
    layer on p (its dropout does nothing in eval mode). Weights are stored as ``nn.Linear`` stores them,
    (out_features, in_features).
    """
    require_float_tensor("hidden_states", hidden_states, min_dim=2)
    hidden = hidden_states.shape[-1]
    expected = {
        "pooler_weight": (pooler_weight, (hidden, hidden)),
        "pooler_bias": (pooler_bias, (hidden,)),
        "classifier_bias": (classifier_bias, (classifier_weight.shape[0],) if classifier_weight.dim() == 2 else None),
    }
    require_float_tensor("classifier_weight", classifier_weight, ndim=2)
    if classifier_weight.shape[1] != hidden:
        raise ValueError(f"`classifier_weight` must be (num_labels, {hidden}), got {describe(classifier_weight)}.")
    for name, (tensor, shape) in expected.items():
        require_float_tensor(name, tensor)
        if tuple(tensor.shape) != shape:
            raise ValueError(f"`{name}` must have the shape {shape}, got {describe(tensor)}.")
    return _classification_logits(hidden_states, pooler_weight, pooler_bias, classifier_weight, classifier_bias)


def _classification_logits(hidden_states, pooler_weight, pooler_bias, classifier_weight, classifier_bias):
    cls = hidden_states[..., 0, :]  # (..., hidden): the [CLS] token's vector
    pooled = torch.tanh(cls @ pooler_weight.T + pooler_bias)  # (..., hidden): the pooler
    return pooled @ classifier_weight.T + classifier_bias  # (..., num_labels): dropout is the identity in eval mode


def predict_labels(model: nn.Module, batches) -> torch.Tensor:
    """The predicted label of every example of ``batches`` (dicts of the model's inputs), in order: a long tensor (n,).

    In eval mode (dropout off) and without gradients; the model is given back in the mode it was in.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"`model` must be a torch.nn.Module (a classifier), got {describe(model)}.")
    batches = list(batches)
    if not batches or not all(isinstance(batch, dict) for batch in batches):
        raise ValueError(f"`batches` must be a non-empty list of dicts of model inputs, got {describe(batches)}.")
    return _predict_labels(model, batches)


def _predict_labels(model, batches):
    was_training = model.training
    model.eval()  # dropout off: the model we judge is the model we will use
    try:
        with torch.no_grad():  # no graph to build: nothing will call backward
            predictions = [model(**batch).logits.argmax(dim=-1) for batch in batches]  # each (batch,)
    finally:
        model.train(was_training)  # give the model back as we found it
    return torch.cat(predictions)  # (n,)
