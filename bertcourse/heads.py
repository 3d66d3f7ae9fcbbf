"""The pretraining heads on top of ``BertModel``: masked language modelling and next-sentence prediction.

- ``BertMLMHead``: dense -> GELU -> LayerNorm -> decoder whose weight *is* the word
  embedding matrix (tied), plus its own bias; one logit per vocabulary word.
- the NSP head (``BertForPreTraining.nsp``): a linear map from the pooled vector to 2
  logits (IsNext / NotNext).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from .bert import BertModel, BertModelOutput, init_bert_weights
from .config import BertConfig
from .layernorm import LayerNorm


@dataclasses.dataclass
class BertPreTrainingOutput:
    prediction_logits: torch.Tensor  # (batch, seq, vocab): MLM
    seq_relationship_logits: torch.Tensor  # (batch, 2): NSP
    bert: BertModelOutput


class BertMLMHead(nn.Module):
    """Masked-language-model head: dense -> GELU -> LayerNorm -> tied decoder + bias."""

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.layer_norm = LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.word_embeddings = word_embeddings  # shared, not copied: the decoder's weight
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        h = self.layer_norm(F.gelu(self.dense(hidden_states)))  # (batch, seq, hidden)
        return h @ self.word_embeddings.weight.T + self.bias  # (batch, seq, vocab)


class BertForPreTraining(nn.Module):
    """BertModel + MLM head + NSP head. forward(...) -> BertPreTrainingOutput."""

    def __init__(self, config: BertConfig | None = None):
        super().__init__()
        self.bert = BertModel(config)
        c = self.bert.config
        self.config = c
        self.mlm = BertMLMHead(c, self.bert.embeddings.word_embeddings)
        self.nsp = nn.Linear(c.hidden_size, 2)
        for module in (self.mlm.dense, self.mlm.layer_norm, self.nsp):
            module.apply(lambda m: init_bert_weights(m, c.initializer_range))

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, output_attentions=False):
        out = self.bert(input_ids, attention_mask, token_type_ids, output_attentions=output_attentions)
        return BertPreTrainingOutput(
            prediction_logits=self.mlm(out.last_hidden_state),
            seq_relationship_logits=self.nsp(out.pooler_output),
            bert=out,
        )
