"""The pretraining heads on top of ``BertModel``: masked language modelling and next-sentence prediction.

- ``BertMLMHead``: dense -> GELU -> LayerNorm -> decoder whose weight *is* the word
  embedding matrix (tied), plus its own bias; one logit per vocabulary word.
- the NSP head (``BertForPreTraining.nsp``): a linear map from the pooled vector to 2
  logits (0 = IsNext, 1 = NotNext, as in Hugging Face).

With labels, ``BertForPreTraining`` also returns the losses of pretraining: the MLM loss is the
cross-entropy over the *selected* positions only (label -100 everywhere else, Hugging Face's
convention), the NSP loss the cross-entropy of the pair label. The labels are checked at the
border, like the ids (their values only on the CPU, see ``bertcourse.bert``).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from ._validation import (
    can_check_values,
    describe,
    require_float_tensor,
    require_integer_tensor,
    require_shape,
    require_size,
)
from .bert import BertModel, BertModelOutput, init_bert_weights
from .config import BertConfig
from .layernorm import LayerNorm, _layer_norm
from .weights import PRETRAINING_HEAD_NAMES, HFWeightsMixin

IGNORE_INDEX = -100  # a label that takes no part in the loss (Hugging Face's and PyTorch's convention)


@dataclasses.dataclass
class BertPreTrainingOutput:
    """What ``BertForPreTraining`` returns; the losses are None when their labels are not given."""

    prediction_logits: torch.Tensor  # (batch, seq, vocab): MLM
    seq_relationship_logits: torch.Tensor  # (batch, 2): NSP
    bert: BertModelOutput
    loss: torch.Tensor | None = None  # mlm_loss + nsp_loss, or the one that was asked for
    mlm_loss: torch.Tensor | None = None  # ()
    nsp_loss: torch.Tensor | None = None  # ()


def mlm_head(
    hidden: torch.Tensor,
    dense_weight: torch.Tensor,
    dense_bias: torch.Tensor,
    ln_weight: torch.Tensor,
    ln_bias: torch.Tensor,
    word_embeddings: torch.Tensor,
    decoder_bias: torch.Tensor,
    eps: float = 1e-12,
) -> torch.Tensor:
    """The MLM head as a function: LayerNorm(GELU(hidden @ W_d^T + b_d)) @ E^T + b, one score per vocabulary word.

    ``BertMLMHead`` computes the same with its modules (and the fused LayerNorm); this is the formula
    written out, for reading and for notebook 07's exercise.

    hidden: (..., hidden_size), the encoder's output; dense_weight: (hidden_size, hidden_size) in
    ``nn.Linear``'s (out, in) layout, dense_bias and the LayerNorm's ln_weight, ln_bias: (hidden_size,);
    word_embeddings: (vocab, hidden_size), the input embedding table, which is also the decoder
    (tied); decoder_bias: (vocab,), the decoder's own bias. Returns (..., vocab) logits.
    """
    require_float_tensor("hidden", hidden, min_dim=1)
    d = hidden.shape[-1]
    require_float_tensor("dense_weight", dense_weight, like=hidden, like_name="`hidden`")
    require_shape("dense_weight", dense_weight, (d, d), symbols="(hidden_size, hidden_size)")
    for name, vector in (("dense_bias", dense_bias), ("ln_weight", ln_weight), ("ln_bias", ln_bias)):
        require_float_tensor(name, vector, like=hidden, like_name="`hidden`")
        require_shape(name, vector, (d,), symbols="(hidden_size,)")
    require_float_tensor("word_embeddings", word_embeddings, ndim=2, like=hidden, like_name="`hidden`")
    require_size("word_embeddings", word_embeddings, 1, d, f"shape (vocab, hidden_size) with hidden_size = {d}")
    require_float_tensor("decoder_bias", decoder_bias, like=hidden, like_name="`hidden`")
    require_shape("decoder_bias", decoder_bias, (word_embeddings.shape[0],), symbols="(vocab,)")
    return _mlm_head(hidden, dense_weight, dense_bias, ln_weight, ln_bias, word_embeddings, decoder_bias, eps)


def _mlm_head(hidden, dense_weight, dense_bias, ln_weight, ln_bias, word_embeddings, decoder_bias, eps=1e-12):
    """Transform each vector, then score it against every word's input embedding (the tied decoder)."""
    h = F.gelu(hidden @ dense_weight.T + dense_bias)  # (..., hidden): the dense layer, exact GELU
    h = _layer_norm(h, ln_weight, ln_bias, eps)  # (..., hidden)
    return h @ word_embeddings.T + decoder_bias  # (..., hidden) @ (hidden, vocab) -> (..., vocab)


class BertMLMHead(nn.Module):
    """Masked-language-model head: dense -> GELU -> LayerNorm -> tied decoder + bias (``mlm_head``)."""

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.layer_norm = LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.word_embeddings = word_embeddings  # shared, not copied: the decoder's weight
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        h = self.layer_norm(F.gelu(self.dense(hidden_states)))  # (batch, seq, hidden)
        return F.linear(h, self.word_embeddings.weight, self.bias)  # (batch, seq, vocab): h @ E^T + b


class BertForPreTraining(HFWeightsMixin, nn.Module):
    """BertModel + MLM head + NSP head.

    forward(input_ids, attention_mask=None, token_type_ids=None, labels=None, next_sentence_label=None,
    output_attentions=False, output_hidden_states=False) -> BertPreTrainingOutput.
    ``labels``: (batch, seq) token ids to predict, -100 where nothing is predicted;
    ``next_sentence_label``: (batch,) 0 = B follows A, 1 = B is random.
    """

    hf_head_names = PRETRAINING_HEAD_NAMES
    hf_architecture = "BertForPreTraining"

    def __init__(self, config: BertConfig | None = None):
        super().__init__()
        self.bert = BertModel(config)
        c = self.bert.config
        self.config = c
        self.mlm = BertMLMHead(c, self.bert.embeddings.word_embeddings)
        self.nsp = nn.Linear(c.hidden_size, 2)
        for module in (self.mlm.dense, self.mlm.layer_norm, self.nsp):
            module.apply(lambda m: init_bert_weights(m, c.initializer_range))

    def forward(
        self,
        input_ids,
        attention_mask=None,
        token_type_ids=None,
        labels=None,
        next_sentence_label=None,
        output_attentions=False,
        output_hidden_states=False,
    ) -> BertPreTrainingOutput:
        self._check_labels(input_ids, labels, next_sentence_label)
        out = self.bert(
            input_ids,
            attention_mask,
            token_type_ids,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )
        prediction_logits = self.mlm(out.last_hidden_state)  # (batch, seq, vocab)
        seq_relationship_logits = self.nsp(out.pooler_output)  # (batch, 2)
        mlm_loss = nsp_loss = None
        if labels is not None:
            mlm_loss = F.cross_entropy(
                prediction_logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE_INDEX
            )  # mean over the selected positions only
        if next_sentence_label is not None:
            nsp_loss = F.cross_entropy(seq_relationship_logits, next_sentence_label)
        losses = [loss for loss in (mlm_loss, nsp_loss) if loss is not None]
        return BertPreTrainingOutput(
            prediction_logits=prediction_logits,
            seq_relationship_logits=seq_relationship_logits,
            bert=out,
            loss=sum(losses[1:], losses[0]) if losses else None,
            mlm_loss=mlm_loss,
            nsp_loss=nsp_loss,
        )

    def _check_labels(self, input_ids, labels, next_sentence_label) -> None:
        if labels is not None:
            require_integer_tensor("labels", labels, hint="MLM labels are token ids, -100 where nothing is predicted.")
            if isinstance(input_ids, torch.Tensor) and labels.shape != input_ids.shape:
                raise ValueError(
                    f"`labels` must have the shape of `input_ids` {tuple(input_ids.shape)}, one label per token "
                    f"(-100 where nothing is predicted), got {describe(labels)}."
                )
            if can_check_values(labels):
                outside = labels[(labels != IGNORE_INDEX) & ((labels < 0) | (labels >= self.config.vocab_size))]
                if outside.numel():
                    raise ValueError(
                        f"`labels` contains {int(outside[0])}: a label is a token id in "
                        f"0..{self.config.vocab_size - 1} or {IGNORE_INDEX} for a position that is not predicted."
                    )
        if next_sentence_label is not None:
            require_integer_tensor("next_sentence_label", next_sentence_label, hint="0 = IsNext, 1 = NotNext.")
            batch = input_ids.shape[0] if isinstance(input_ids, torch.Tensor) and input_ids.dim() else None
            if next_sentence_label.shape != (batch,):
                raise ValueError(
                    f"`next_sentence_label` must have shape (batch,) = ({batch},), one label per pair, "
                    f"got {describe(next_sentence_label)}."
                )
            if (
                can_check_values(next_sentence_label)
                and not ((next_sentence_label == 0) | (next_sentence_label == 1)).all()
            ):
                raise ValueError(
                    f"`next_sentence_label` must hold 0 (B follows A) or 1 (B is random), "
                    f"got {next_sentence_label.tolist()[:8]}."
                )
