"""The full BERT: embeddings, the encoder stack, the pooler, and the pretraining heads.

Every piece was built in an earlier module; this one only wires them together:

- ``BertEmbeddings``: token + learned position + token-type (segment) embeddings, summed,
  then LayerNorm and dropout. No sinusoids: BERT learns its 512 positions.
- ``Encoder`` (``bertcourse.encoder``): ``num_hidden_layers`` Post-LN layers.
- ``BertPooler``: tanh(W h_[CLS] + b), the sentence vector the NSP head reads.
- ``BertMLMHead``: dense -> GELU -> LayerNorm -> decoder whose weight *is* the word
  embedding matrix (tied), plus its own bias; one logit per vocabulary word.
- the NSP head (``BertForPreTraining.nsp``): a linear map from the pooled vector to 2
  logits (IsNext / NotNext).

``BertModel.forward`` checks its input first (integer ids, in the vocabulary, not
longer than the position table) and returns a ``BertOutput`` whose ``attentions`` are a
tuple of (batch, heads, seq, seq) tensors, one per layer: the format Hugging Face and
bertviz use (``bertcourse.plots`` shows how to hand them to bertviz).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F
from torch import nn

from ._validation import describe, require_float_tensor, require_integer_tensor, require_tensor
from .config import BertConfig, require_config
from .encoder import Encoder
from .layernorm import LayerNorm, layer_norm
from .masks import as_bool_mask, expand_padding_mask
from .positional import LearnedPositionEmbedding, check_sequence_fits


@dataclasses.dataclass
class BertOutput:
    """What ``BertModel`` returns. ``attentions`` is empty unless ``output_attentions=True``."""

    last_hidden_state: torch.Tensor  # (batch, seq, hidden)
    pooler_output: torch.Tensor  # (batch, hidden)
    attentions: tuple[torch.Tensor, ...] = ()  # num_layers x (batch, heads, seq, seq)
    hidden_states: tuple[torch.Tensor, ...] = ()  # (num_layers + 1) x (batch, seq, hidden)


@dataclasses.dataclass
class BertPreTrainingOutput:
    prediction_logits: torch.Tensor  # (batch, seq, vocab): MLM
    seq_relationship_logits: torch.Tensor  # (batch, 2): NSP
    bert: BertOutput


def bert_embeddings(
    input_ids: torch.Tensor,
    token_type_ids: torch.Tensor,
    word_embeddings: torch.Tensor,
    position_embeddings: torch.Tensor,
    token_type_embeddings: torch.Tensor,
    ln_weight: torch.Tensor,
    ln_bias: torch.Tensor,
    eps: float = 1e-12,
) -> torch.Tensor:
    """LayerNorm(word[input_ids] + position[0..seq-1] + token_type[token_type_ids]).

    input_ids, token_type_ids: (batch, seq) long. The three tables are (rows, hidden)
    matrices; ln_weight, ln_bias: (hidden,). Returns (batch, seq, hidden). Dropout, which
    BERT applies next during training, is left to the module. ``token_type_ids=None`` puts
    every token in segment A.
    """
    for name, table in (
        ("word_embeddings", word_embeddings),
        ("position_embeddings", position_embeddings),
        ("token_type_embeddings", token_type_embeddings),
    ):
        require_tensor(name, table, ndim=2)
        require_float_tensor(name, table)
        if table.shape[1] != word_embeddings.shape[1]:
            raise ValueError(
                f"`{name}` must have shape (rows, hidden) with hidden = {word_embeddings.shape[1]} "
                f"(from `word_embeddings`), got {describe(table)}."
            )
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)  # every token in segment A
    check_token_ids(
        input_ids,
        token_type_ids,
        vocab_size=word_embeddings.shape[0],
        type_vocab_size=token_type_embeddings.shape[0],
        max_position_embeddings=position_embeddings.shape[0],
        device=word_embeddings.device,
    )
    seq_len = input_ids.shape[1]
    positions = torch.arange(seq_len, device=input_ids.device)  # (seq,)
    summed = (
        F.embedding(input_ids, word_embeddings)  # (batch, seq, hidden): row input_ids[b, t] of the table
        + F.embedding(positions, position_embeddings)  # (seq, hidden), broadcast over the batch
        + F.embedding(token_type_ids, token_type_embeddings)  # (batch, seq, hidden)
    )
    return layer_norm(summed, ln_weight, ln_bias, eps)  # (batch, seq, hidden)


class BertEmbeddings(nn.Module):
    """input_ids, token_type_ids (batch, seq) -> (batch, seq, hidden)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = LearnedPositionEmbedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.layer_norm = LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        embeddings = bert_embeddings(
            input_ids,
            token_type_ids,
            self.word_embeddings.weight,
            self.position_embeddings.weight,
            self.token_type_embeddings.weight,
            self.layer_norm.weight,
            self.layer_norm.bias,
            self.layer_norm.eps,
        )  # (batch, seq, hidden)
        return self.dropout(embeddings)


class BertPooler(nn.Module):
    """tanh(dense(h_[CLS])): (batch, seq, hidden) -> (batch, hidden)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden_states[:, 0]))  # (batch, hidden)


class BertModel(nn.Module):
    """BERT's encoder: forward(input_ids, attention_mask=None, token_type_ids=None,
    output_attentions=False, output_hidden_states=False) -> BertOutput."""

    def __init__(self, config: BertConfig | None = None):
        super().__init__()
        require_config(config)
        self.config = config or BertConfig()
        c = self.config
        self.embeddings = BertEmbeddings(c)
        self.encoder = Encoder(
            c.num_hidden_layers,
            d_model=c.hidden_size,
            num_heads=c.num_attention_heads,
            d_ff=c.intermediate_size,
            dropout=c.hidden_dropout_prob,
            attention_dropout=c.attention_probs_dropout_prob,
            eps=c.layer_norm_eps,
        )
        self.pooler = BertPooler(c)
        self.apply(lambda module: init_bert_weights(module, c.initializer_range))

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> BertOutput:
        mask = self._check_inputs(input_ids, attention_mask, token_type_ids)
        x = self.embeddings(input_ids, token_type_ids)  # (batch, seq, hidden)
        x, hidden_states, attentions = self.encoder(
            x, mask, need_weights=output_attentions, need_hidden_states=output_hidden_states
        )
        return BertOutput(
            last_hidden_state=x, pooler_output=self.pooler(x), attentions=attentions, hidden_states=hidden_states
        )

    def _check_inputs(self, input_ids, attention_mask, token_type_ids):
        """Validate everything before computing anything; return the (batch, 1, 1, seq) mask or None."""
        c = self.config
        check_token_ids(
            input_ids,
            token_type_ids,
            vocab_size=c.vocab_size,
            type_vocab_size=c.type_vocab_size,
            max_position_embeddings=c.max_position_embeddings,
            device=self.embeddings.word_embeddings.weight.device,
        )
        if attention_mask is None:
            return None
        mask = as_bool_mask("attention_mask", attention_mask)
        _check_same_shape("attention_mask", mask, input_ids)
        if bool(mask.all()):
            return None  # nothing to mask: let the fused kernel run unmasked
        return expand_padding_mask(mask.to(input_ids.device))  # (batch, 1, 1, seq)


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


def init_bert_weights(module: nn.Module, std: float = 0.02) -> None:
    """BERT's initialisation: weights ~ N(0, 0.02), biases 0, LayerNorm gamma 1 / beta 0,
    and the padding token's embedding 0."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=std)
        nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=std)
        if module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()
    elif isinstance(module, LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


def check_token_ids(input_ids, token_type_ids, *, vocab_size, type_vocab_size, max_position_embeddings, device) -> None:
    """Everything BERT needs of its ids, checked before any lookup: integer (batch, seq) ids,
    at least one token, no more than the position table holds, inside the vocabulary, on the
    model's device; token types likewise."""
    require_integer_tensor("input_ids", input_ids, hint=_IDS_HINT)
    if input_ids.dim() != 2:
        hint = " Add a batch axis with `input_ids.unsqueeze(0)`." if input_ids.dim() == 1 else ""
        raise ValueError(f"`input_ids` must have shape (batch, seq), got {describe(input_ids)}.{hint}")
    if input_ids.shape[1] == 0:
        raise ValueError("`input_ids` has 0 tokens: a BERT input holds at least [CLS] and [SEP].")
    check_sequence_fits(input_ids.shape[1], max_position_embeddings)
    _check_ids_in_range("input_ids", input_ids, vocab_size, "vocab_size")
    if input_ids.device != torch.device(device):
        raise ValueError(
            f"`input_ids` is on {input_ids.device} but the model's weights are on {device}: "
            "move the batch with `.to(device)`."
        )
    if token_type_ids is not None:
        require_integer_tensor("token_type_ids", token_type_ids, hint=_IDS_HINT)
        _check_same_shape("token_type_ids", token_type_ids, input_ids)
        _check_ids_in_range("token_type_ids", token_type_ids, type_vocab_size, "type_vocab_size")


_IDS_HINT = "Token ids come from the tokenizer; convert with `.long()` if you built them by hand."


def _check_same_shape(name, x, input_ids):
    if x.shape != input_ids.shape:
        raise ValueError(f"`{name}` must have the shape of `input_ids` {tuple(input_ids.shape)}, got {describe(x)}.")


def _check_ids_in_range(name, ids, size, size_name):
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= size:
        bad = low if low < 0 else high
        raise ValueError(
            f"`{name}` contains {bad}, outside the range 0..{size - 1} allowed by {size_name}={size}. "
            "Were these ids made with another model's tokenizer?"
        )
