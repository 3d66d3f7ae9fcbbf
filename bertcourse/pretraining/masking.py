"""MLM's masking: 15% of the ordinary tokens selected; of those, 80% [MASK], 10% random, 10% kept.

The label is the original token at the selected positions and -100 everywhere else, so the loss
counts the selected positions only. [CLS], [SEP], [PAD] (and [UNK], [MASK]) are never selected;
the random replacement is an ordinary token. ``mask_tokens`` draws every random number from the
``torch.Generator`` it is given, so the same generator state gives the same masks on every
machine; a fresh draw at every step is RoBERTa's *dynamic masking*. ``mlm_corrupt`` is the
80/10/10 rule on given draws. ``whole_word_mask`` is the whole-word masking of Google's BERT release of
2019: when the first piece of a word is selected, every ``##`` piece of that word is selected too, so the
model cannot guess ``##ing`` from the visible first piece of the same word.
"""

from __future__ import annotations

import torch

from .._validation import describe, require_integer_tensor, require_tensor
from ..heads import IGNORE_INDEX
from .checks import require_generator, require_share
from .vocabulary import SpecialIds, require_specials

MASK_SHARE, RANDOM_SHARE = 0.8, 0.1  # of the selected tokens; the remaining 10% stay unchanged


def mask_tokens(
    input_ids: torch.Tensor,
    specials: SpecialIds,
    *,
    generator: torch.Generator,
    probability: float = 0.15,
    corrupt=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking: returns (the ids the model sees, the labels), both shaped like ``input_ids``.

    ``probability`` of the non-special tokens are selected (each independently, as Hugging Face's
    collator does; BERT's own code picks exactly 15% per sequence). The draws come from
    ``generator``, on its device, then move to the ids' device. ``corrupt`` applies the 80/10/10 rule
    to those draws, with ``mlm_corrupt``'s signature (notebook 09 passes the learner's); None: the package's.
    """
    require_integer_tensor("input_ids", input_ids, hint="Token ids come from the tokenizer.")
    require_specials(specials)
    require_generator(generator)
    require_share("probability", probability)
    require_corrupt(corrupt)
    shape, device = input_ids.shape, generator.device
    maskable = ~torch.isin(input_ids, specials.ids.to(input_ids.device))  # (batch, seq): no [CLS] [SEP] [PAD]
    selected = torch.rand(shape, generator=generator, device=device).to(input_ids.device) < probability
    draws = torch.rand(shape, generator=generator, device=device).to(input_ids.device)  # which of 80/10/10
    ordinary = specials.ordinary_ids().to(device)
    random_ids = ordinary[torch.randint(len(ordinary), shape, generator=generator, device=device)]
    random_ids = random_ids.to(input_ids.device)
    if corrupt is None:
        return _mlm_corrupt(input_ids, selected & maskable, draws, random_ids, specials.mask)
    return corrupt(input_ids, selected & maskable, draws, random_ids, specials.mask)


def require_corrupt(corrupt) -> None:
    """``corrupt`` is None (the package's 80/10/10 rule) or a function with ``mlm_corrupt``'s signature."""
    if corrupt is not None and not callable(corrupt):
        raise TypeError(
            "`corrupt` must be None or a function (input_ids, selected, draws, random_ids, mask_token_id) -> "
            f"(corrupted, labels), as `mlm_corrupt`, got {describe(corrupt)}."
        )


def mlm_corrupt(
    input_ids: torch.Tensor, selected: torch.Tensor, draws: torch.Tensor, random_ids: torch.Tensor, mask_token_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The 80/10/10 rule on given random draws: (corrupted ids, labels).

    ``selected`` (bool) marks the positions to predict; ``draws`` (uniform in [0, 1)) decide what
    each selected position shows: [MASK] below 0.8, ``random_ids`` from 0.8 to 0.9, itself above.
    Labels are the original ids where selected, -100 elsewhere.
    """
    require_integer_tensor("input_ids", input_ids)
    for name, tensor in (("selected", selected), ("draws", draws), ("random_ids", random_ids)):
        require_tensor(name, tensor)
        if tensor.shape != input_ids.shape:
            raise ValueError(
                f"`{name}` must have the shape of `input_ids` {tuple(input_ids.shape)}, got {describe(tensor)}."
            )
    if selected.dtype != torch.bool:
        raise TypeError(f"`selected` must be a bool tensor (True = predict this token), got {describe(selected)}.")
    if not draws.dtype.is_floating_point:
        raise TypeError(f"`draws` must hold uniform floats in [0, 1), got {describe(draws)}.")
    require_integer_tensor("random_ids", random_ids)
    if isinstance(mask_token_id, bool) or not isinstance(mask_token_id, int):
        raise TypeError(f"`mask_token_id` must be an int, got {describe(mask_token_id)}.")
    return _mlm_corrupt(input_ids, selected, draws, random_ids, mask_token_id)


def _mlm_corrupt(input_ids, selected, draws, random_ids, mask_token_id):
    labels = torch.where(selected, input_ids, IGNORE_INDEX)  # (batch, seq): predict only the selected
    to_mask = selected & (draws < MASK_SHARE)  # (batch, seq): 80% of them -> [MASK]
    to_random = selected & (draws >= MASK_SHARE) & (draws < MASK_SHARE + RANDOM_SHARE)  # 10% -> random
    corrupted = torch.where(to_mask, mask_token_id, input_ids)  # (batch, seq)
    corrupted = torch.where(to_random, random_ids, corrupted)  # (batch, seq); the last 10% stay as they are
    return corrupted, labels


def mlm_accuracy(prediction_logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The share of selected positions (label != -100) whose highest logit is the label: a 0-d tensor."""
    require_tensor("prediction_logits", prediction_logits)
    require_integer_tensor("labels", labels)
    if prediction_logits.dim() != labels.dim() + 1 or prediction_logits.shape[:-1] != labels.shape:
        raise ValueError(
            f"`prediction_logits` must be (batch, seq, vocab) for `labels` {tuple(labels.shape)}, "
            f"got {describe(prediction_logits)}."
        )
    return _mlm_accuracy(prediction_logits, labels)


def _mlm_accuracy(prediction_logits, labels):
    selected = labels != IGNORE_INDEX  # (batch, seq)
    correct = prediction_logits.argmax(dim=-1) == labels  # (batch, seq)
    return correct[selected].float().mean()  # (): NaN when nothing is selected


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
