"""BERT's input layer: token + learned position + token-type (segment) embeddings, summed,
then LayerNorm and dropout.

No sinusoids: BERT learns its 512 positions (``bertcourse.positional``). The segment
(token-type) embedding tells sentence A from sentence B in a pair ([CLS] A [SEP] B [SEP]).
``position_ids`` (as in Hugging Face's ``BertEmbeddings``) picks each token's row of the position
table; left out, token t of every sentence gets row t, which is right unless a sentence is padded
on the left.
``check_token_ids`` is what ``BertModel`` checks of its ids, once, at its border.
"""

from __future__ import annotations

import torch
from torch import nn

from ._validation import (
    can_check_values,
    describe,
    require_float_tensor,
    require_integer_tensor,
    require_sequence_fits,
    require_shape,
    require_size,
)
from .config import BertConfig
from .layernorm import LayerNorm, _layer_norm
from .positional import LearnedPositionEmbedding


def bert_embeddings(
    input_ids: torch.Tensor,
    token_type_ids: torch.Tensor,
    word_embeddings: torch.Tensor,
    position_embeddings: torch.Tensor,
    token_type_embeddings: torch.Tensor,
    ln_weight: torch.Tensor,
    ln_bias: torch.Tensor,
    eps: float = 1e-12,
    position_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """LayerNorm(word[input_ids] + position[position_ids] + token_type[token_type_ids]).

    input_ids, token_type_ids: (batch, seq) long. The three tables are (rows, hidden)
    matrices; ln_weight, ln_bias: (hidden,). position_ids: (batch, seq) or (seq,) long, each
    token's row of the position table; None gives 0..seq-1 to every sentence. Returns
    (batch, seq, hidden). Dropout, which BERT applies next during training, is left to the
    module. ``token_type_ids=None`` puts every token in segment A.
    """
    require_float_tensor("word_embeddings", word_embeddings, ndim=2)
    hidden = word_embeddings.shape[1]
    for name, table in (("position_embeddings", position_embeddings), ("token_type_embeddings", token_type_embeddings)):
        require_float_tensor(name, table, ndim=2)
        require_size(name, table, 1, hidden, f"shape (rows, hidden) with hidden = {hidden} (from `word_embeddings`)")
    require_shape("ln_weight", ln_weight, (hidden,), symbols="(hidden,)")
    require_shape("ln_bias", ln_bias, (hidden,), symbols="(hidden,)")
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
    if position_ids is not None:
        _check_position_ids(position_ids, input_ids, position_embeddings.shape[0])
    return _bert_embeddings(
        input_ids,
        token_type_ids,
        word_embeddings,
        position_embeddings,
        token_type_embeddings,
        ln_weight,
        ln_bias,
        eps,
        position_ids,
    )


def _bert_embeddings(
    input_ids,
    token_type_ids,
    word_embeddings,
    position_embeddings,
    token_type_embeddings,
    ln_weight,
    ln_bias,
    eps=1e-12,
    position_ids=None,
):
    """Look up a row in each of the three tables, add them, and normalise the sum with LayerNorm."""
    if position_ids is None:
        position_ids = torch.arange(input_ids.shape[1], device=input_ids.device)  # (seq,): 0..seq-1, every sentence
    words = word_embeddings[input_ids]  # (batch, seq, hidden): row input_ids[b, t] of the table
    positions = position_embeddings[position_ids]  # (seq, hidden) or (batch, seq, hidden): one row per token
    segments = token_type_embeddings[token_type_ids]  # (batch, seq, hidden)
    return _layer_norm(words + positions + segments, ln_weight, ln_bias, eps)  # (batch, seq, hidden)


class BertEmbeddings(nn.Module):
    """input_ids, token_type_ids (batch, seq) -> (batch, seq, hidden).

    ``forward`` trusts its caller (``BertModel`` checks the ids once, with ``check_token_ids``)
    and computes ``_bert_embeddings`` with its own modules: the fused ``LayerNorm``, then dropout.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = LearnedPositionEmbedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.layer_norm = LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)  # (batch, seq): every token in segment A
        table = self.position_embeddings.weight  # (max_positions, hidden)
        positions = table[: input_ids.shape[1]] if position_ids is None else table[position_ids]  # (..., seq, hidden)
        summed = (
            self.word_embeddings(input_ids)  # (batch, seq, hidden)
            + positions  # broadcast over the batch when (seq, hidden)
            + self.token_type_embeddings(token_type_ids)  # (batch, seq, hidden)
        )
        return self.dropout(self.layer_norm(summed))  # (batch, seq, hidden)


def check_token_ids(input_ids, token_type_ids, *, vocab_size, type_vocab_size, max_position_embeddings, device) -> None:
    """Everything BERT needs of its ids, checked before any lookup: integer (batch, seq) ids,
    at least one token, no more than the position table holds, inside the vocabulary (read on the
    CPU only: see ``bertcourse._validation``), on the model's device; token types likewise."""
    require_integer_tensor("input_ids", input_ids, hint=_IDS_HINT)
    if input_ids.dim() != 2:
        hint = " Add a batch axis with `input_ids.unsqueeze(0)`." if input_ids.dim() == 1 else ""
        raise ValueError(f"`input_ids` must have shape (batch, seq), got {describe(input_ids)}.{hint}")
    if input_ids.shape[1] == 0:
        raise ValueError("`input_ids` has 0 tokens: a BERT input holds at least [CLS] and [SEP].")
    require_sequence_fits(input_ids.shape[1], max_position_embeddings)
    _check_ids_in_range("input_ids", input_ids, vocab_size, "vocab_size")
    if input_ids.device != torch.device(device):
        raise ValueError(
            f"`input_ids` is on {input_ids.device} but the model's weights are on {device}: "
            "move the batch with `.to(device)`."
        )
    if token_type_ids is not None:
        require_integer_tensor("token_type_ids", token_type_ids, hint=_IDS_HINT)
        check_same_shape("token_type_ids", token_type_ids, input_ids)
        _check_ids_in_range("token_type_ids", token_type_ids, type_vocab_size, "type_vocab_size")


def _check_position_ids(position_ids, input_ids, max_position_embeddings) -> None:
    """Raise unless ``position_ids`` is an integer (batch, seq) or (seq,) tensor of rows of the position table."""
    require_integer_tensor("position_ids", position_ids, hint="Positions are counted 0, 1, 2, ... as `torch.long`.")
    if position_ids.shape not in (input_ids.shape, input_ids.shape[1:]):
        batch, seq = input_ids.shape
        raise ValueError(
            f"`position_ids` must have shape (batch, seq) = {(batch, seq)} or (seq,) = {(seq,)} like `input_ids`, "
            f"got {describe(position_ids)}."
        )
    why = "Each position is a row of the position table: count from 0, one per real token."
    _check_ids_in_range("position_ids", position_ids, max_position_embeddings, "max_position_embeddings", why)


_IDS_HINT = "Token ids come from the tokenizer; convert with `.long()` if you built them by hand."


def check_same_shape(name, x, input_ids):
    """Raise unless ``x`` (token types, an attention mask) has the shape of ``input_ids``."""
    if x.shape != input_ids.shape:
        raise ValueError(f"`{name}` must have the shape of `input_ids` {tuple(input_ids.shape)}, got {describe(x)}.")


def _check_ids_in_range(name, ids, size, size_name, why="Were these ids made with another model's tokenizer?"):
    """Raise unless every id is in 0..size-1; a value check, so on the CPU only."""
    if not can_check_values(ids) or ids.numel() == 0:
        return
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= size:
        bad = low if low < 0 else high
        raise ValueError(
            f"`{name}` contains {bad}, outside the range 0..{size - 1} allowed by {size_name}={size}. {why}"
        )
