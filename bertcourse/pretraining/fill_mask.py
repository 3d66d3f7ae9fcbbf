"""Looking at a pretrained model: what it guesses for each [MASK], and what it sees of a sentence.

``fill_mask`` is Hugging Face's fill-mask pipeline in a few lines (eval mode, no gradients, the top
``k`` tokens with their probabilities); ``masking_view`` labels each token of one sentence with
what the 80/10/10 rule did to it, for notebook 09's masking explorer.
"""

from __future__ import annotations

import dataclasses

import torch

from .._validation import describe, require_positive_int
from ..heads import IGNORE_INDEX
from ..tokenizer import WordPieceTokenizer
from .masking import mask_tokens
from .vocabulary import SpecialIds


def fill_mask(model, tokenizer: WordPieceTokenizer, text: str, top_k: int = 5) -> list[list[tuple[str, float]]]:
    """For each [MASK] of ``text``, the ``top_k`` (token, probability) the MLM head predicts, best first.

    The model runs in eval mode (dropout off) without gradients, then goes back to its mode.
    """
    if not hasattr(model, "mlm"):
        raise TypeError(f"`model` must be a BertForPreTraining (it has the MLM head), got {describe(model)}.")
    specials = SpecialIds.from_tokenizer(tokenizer)
    require_positive_int("top_k", top_k)
    input_ids = _sentence_ids(tokenizer, text, model.config.max_position_embeddings)  # (1, seq)
    where = (input_ids[0] == specials.mask).nonzero().flatten()  # (masks,)
    if not len(where):
        hint = " Write it in capitals: [MASK]." if "[mask]" in text.lower() else ""
        raise ValueError(f"`text` has no [MASK]: put [MASK] where the model should guess a word.{hint}")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            device = next(model.parameters()).device
            logits = model(input_ids.to(device)).prediction_logits[0, where.to(device)]  # (masks, vocab)
    finally:
        model.train(was_training)
    top = logits.float().softmax(dim=-1).topk(min(top_k, logits.shape[-1]), dim=-1)  # (masks, top_k) each
    return [
        list(zip(tokenizer.convert_ids_to_tokens(ids.tolist()), probabilities.tolist(), strict=True))
        for ids, probabilities in zip(top.indices.cpu(), top.values.cpu(), strict=True)
    ]


@dataclasses.dataclass(frozen=True)
class MaskingView:
    """One sentence under the 80/10/10 rule: per token, what it was, what the model sees, its label
    (None where nothing is predicted) and its kind: "not selected", "[MASK]", "random", "kept"."""

    tokens: list[str]
    seen: list[str]
    labels: list[str | None]
    kinds: list[str]


def masking_view(tokenizer: WordPieceTokenizer, text: str, *, seed: int = 0, probability: float = 0.15) -> MaskingView:
    """What the model sees of ``text`` when it is masked with ``mask_tokens`` and generator seed ``seed``."""
    specials = SpecialIds.from_tokenizer(tokenizer)
    input_ids = _sentence_ids(tokenizer, text, 512)  # (1, seq)
    seen, labels = mask_tokens(
        input_ids, specials, generator=torch.Generator().manual_seed(seed), probability=probability
    )
    tokens = tokenizer.convert_ids_to_tokens(input_ids[0].tolist())
    kinds = []
    for original, shown, label in zip(input_ids[0].tolist(), seen[0].tolist(), labels[0].tolist(), strict=True):
        if label == IGNORE_INDEX:
            kinds.append("not selected")
        elif shown == specials.mask:
            kinds.append("[MASK]")
        elif shown != original:
            kinds.append("random")
        else:
            kinds.append("kept")
    return MaskingView(
        tokens=tokens,
        seen=tokenizer.convert_ids_to_tokens(seen[0].tolist()),
        labels=[None if kind == "not selected" else token for kind, token in zip(kinds, tokens, strict=True)],
        kinds=kinds,
    )


def _sentence_ids(tokenizer: WordPieceTokenizer, text, max_length: int) -> torch.Tensor:
    """(1, seq) ids of ``[CLS] text [SEP]``; a clear error for an empty text or one the model cannot read."""
    if not isinstance(text, str):
        raise TypeError(f"`text` must be a string, got {describe(text)}.")
    if not text.strip():
        raise ValueError("`text` is empty: type a sentence.")
    input_ids = tokenizer([text])["input_ids"]  # (1, seq), at most 512
    if input_ids.shape[1] > max_length:
        raise ValueError(
            f"`text` is {input_ids.shape[1]} tokens long with [CLS] and [SEP]; this model reads at most {max_length}."
        )
    return input_ids
