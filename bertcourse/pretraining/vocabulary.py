"""A WordPiece vocabulary of our own, its special tokens, and documents as token ids.

A model trained from scratch needs a vocabulary fitted to its text: ``train_wordpiece`` fits one
with BERT's normalisation and writes ``vocab.txt`` (read by ``bertcourse.WordPieceTokenizer``);
``SpecialIds`` names the ids MLM and NSP need; ``tokenize_documents`` turns documents into lists of
sentences, each a tensor of ids without [CLS] or [SEP].
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from .._validation import describe, require_positive_int
from ..corpus import split_sentences
from ..tokenizer import WordPieceTokenizer
from .checks import require_texts

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
VOCAB_SIZE = 2000  # notebook 09's vocabulary


def train_wordpiece(texts, folder, vocab_size: int = VOCAB_SIZE, min_frequency: int = 2) -> WordPieceTokenizer:
    """Train a WordPiece vocabulary on ``texts`` with BERT's normalisation (lowercase, accents
    stripped, punctuation split) and special tokens; write ``folder/vocab.txt``; return its tokenizer.

    The ``tokenizers`` trainer numbers tokens of equal count in an arbitrary order, so the file
    lists the special tokens first and every other token in sorted order: the same vocabulary, and
    the same ids, on every run.
    """
    from tokenizers import BertWordPieceTokenizer

    texts = require_texts("texts", texts)
    require_positive_int("vocab_size", vocab_size)
    require_positive_int("min_frequency", min_frequency)
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"`vocab_size` must be above the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}.")
    trainer = BertWordPieceTokenizer(lowercase=True)
    trainer.train_from_iterator(
        texts,
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,
    )
    learned = sorted(set(trainer.get_vocab()) - set(SPECIAL_TOKENS))
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab_file = folder / "vocab.txt"
    vocab_file.write_text("".join(token + "\n" for token in (*SPECIAL_TOKENS, *learned)), encoding="utf-8")
    return WordPieceTokenizer(vocab_file)


@dataclasses.dataclass(frozen=True)
class SpecialIds:
    """The ids of the special tokens of a vocabulary, and its size."""

    pad: int
    unk: int
    cls: int
    sep: int
    mask: int
    vocab_size: int

    @classmethod
    def from_tokenizer(cls, tokenizer: WordPieceTokenizer) -> SpecialIds:
        if not isinstance(tokenizer, WordPieceTokenizer):
            raise TypeError(f"`tokenizer` must be a bc.WordPieceTokenizer, got {describe(tokenizer)}.")
        tokens = tokenizer.convert_ids_to_tokens(list(range(tokenizer.vocab_size)))
        missing = [token for token in SPECIAL_TOKENS if token not in tokens]
        if missing:
            raise ValueError(
                f"the tokenizer's vocabulary has no {', '.join(missing)}: MLM needs [MASK] (and [CLS], [SEP], "
                "[PAD], [UNK]) as tokens of the vocabulary. Train one with `train_wordpiece`, which adds them."
            )
        ids = {token: tokens.index(token) for token in SPECIAL_TOKENS}
        return cls(
            pad=ids["[PAD]"],
            unk=ids["[UNK]"],
            cls=ids["[CLS]"],
            sep=ids["[SEP]"],
            mask=ids["[MASK]"],
            vocab_size=len(tokens),
        )

    @property
    def ids(self) -> torch.Tensor:
        """(5,) the special ids: never selected for MLM, never a random replacement."""
        return torch.tensor([self.pad, self.unk, self.cls, self.sep, self.mask])

    def ordinary_ids(self) -> torch.Tensor:
        """(vocab_size - 5,) every other id: the candidates for the 10% random replacement."""
        every = torch.arange(self.vocab_size)
        return every[~torch.isin(every, self.ids)]


def tokenize_documents(tokenizer: WordPieceTokenizer, texts) -> list[list[torch.Tensor]]:
    """Documents -> sentences -> 1-D long tensors of token ids, without [CLS] or [SEP].

    Sentences come from ``corpus.split_sentences``; a sentence longer than 510 pieces is cut there.
    """
    if not isinstance(tokenizer, WordPieceTokenizer):
        raise TypeError(f"`tokenizer` must be a bc.WordPieceTokenizer, got {describe(tokenizer)}.")
    texts = require_texts("texts", texts)
    sentences = [split_sentences(text) for text in texts]
    flat = [sentence for document in sentences for sentence in document]
    pieces = []
    for start in range(0, len(flat), 1024):
        batch = tokenizer(flat[start : start + 1024])  # [CLS] ids [SEP] [PAD]...
        lengths = batch["attention_mask"].sum(dim=1)  # (chunk,)
        pieces += [ids[1 : int(n) - 1].clone() for ids, n in zip(batch["input_ids"], lengths, strict=True)]
    documents, start = [], 0
    for document in sentences:
        documents.append([ids for ids in pieces[start : start + len(document)] if len(ids)])
        start += len(document)
    return documents


def require_specials(specials) -> None:
    if not isinstance(specials, SpecialIds):
        raise TypeError(
            f"`specials` must be a SpecialIds (`SpecialIds.from_tokenizer(tokenizer)`), got {describe(specials)}."
        )
