"""Two pieces of masked language modelling that notebook 09 asks the learner to write (09).

``whole_word_mask``: whole-word masking, as in Google's BERT release of 2019: when the first piece of a
word is selected for masking, every ``##`` piece of that word is selected too, so that the model
cannot guess ``##ing`` from the visible ``read`` of the same word.

``masked_only_accuracy``: the MLM accuracy on the positions that show ``[MASK]``. Of the selected
positions, 10% show the right token unchanged and a model scores there by copying what it sees; only
at ``[MASK]`` must it read the context (``bertcourse.pretraining.metrics.selected_kinds`` splits them by kind, and this
is its ``mask`` kind).

Each public function checks its arguments, then calls its core (``_<name>``), which
``bertcourse.exercises.solution`` shows. Their home is this module until the pretraining subpackage
takes them in.
"""

from __future__ import annotations

import torch

from ._validation import describe, require_integer_tensor, require_tensor
from .heads import IGNORE_INDEX


def whole_word_mask(selected_starts: torch.Tensor, is_continuation: torch.Tensor) -> torch.Tensor:
    """(batch, seq) bool: ``selected_starts`` with every ``##`` piece selected where its word's start is.

    A piece's word starts at the nearest position at or to its left, in the same row, that is not a
    continuation; the first position of a row always starts a word (a row may begin with ``##`` pieces).
    """
    for name, x in (("selected_starts", selected_starts), ("is_continuation", is_continuation)):
        require_tensor(name, x, ndim=2)
        if x.dtype != torch.bool:
            raise TypeError(f"`{name}` must be a bool tensor, got {describe(x)}.")
    if selected_starts.shape != is_continuation.shape:
        raise ValueError(
            f"`selected_starts` {describe(selected_starts)} and `is_continuation` {describe(is_continuation)} "
            "must have one shape (batch, seq)."
        )
    return _whole_word_mask(selected_starts, is_continuation)


def _whole_word_mask(selected_starts, is_continuation):
    """Each piece takes the selection of its word's first piece: the last word start at or left of it in its row."""
    positions = torch.arange(is_continuation.shape[-1], device=is_continuation.device)  # (seq,)
    own_start = torch.where(is_continuation, 0, positions)  # (batch, seq): a word start names itself, a ## piece 0
    word_start = own_start.cummax(dim=-1).values  # (batch, seq): the position where each piece's word starts
    return selected_starts.gather(-1, word_start)  # (batch, seq)


def masked_only_accuracy(
    prediction_logits: torch.Tensor, labels: torch.Tensor, input_ids: torch.Tensor, mask_token_id: int
) -> torch.Tensor:
    """The share of the selected positions that show ``[MASK]`` whose highest logit is the label: a 0-d tensor.

    NaN when no selected position shows ``[MASK]``, as ``mlm_accuracy`` on no selected position.
    """
    require_tensor("prediction_logits", prediction_logits, ndim=3)
    require_integer_tensor("labels", labels)
    require_integer_tensor("input_ids", input_ids)
    if prediction_logits.shape[:-1] != labels.shape or input_ids.shape != labels.shape:
        raise ValueError(
            f"`prediction_logits` must be (batch, seq, vocab) and `labels`, `input_ids` (batch, seq), got "
            f"{describe(prediction_logits)}, {describe(labels)} and {describe(input_ids)}."
        )
    if isinstance(mask_token_id, bool) or not isinstance(mask_token_id, int):
        raise TypeError(f"`mask_token_id` must be an int, got {describe(mask_token_id)}.")
    return _masked_only_accuracy(prediction_logits, labels, input_ids, mask_token_id)


def _masked_only_accuracy(prediction_logits, labels, input_ids, mask_token_id):
    """Accuracy on the selected positions (label != -100) that show [MASK]; the kept and random ones left out."""
    selected = labels != IGNORE_INDEX  # (batch, seq): the positions in the loss
    shows_mask = selected & (input_ids == mask_token_id)  # (batch, seq): of those, the ones the model sees as [MASK]
    correct = prediction_logits.argmax(dim=-1) == labels  # (batch, seq)
    return correct[shows_mask].float().mean()  # (): NaN when no position shows [MASK]


__all__ = ["IGNORE_INDEX", "masked_only_accuracy", "whole_word_mask"]
