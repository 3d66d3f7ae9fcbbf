"""A WordPiece tokenizer for a BERT ``vocab.txt``, returning what ``BertModel`` takes.

Tokenization is not what this course teaches, so the splitting itself is done by the
``tokenizers`` library (the engine behind Hugging Face's fast tokenizers). This wrapper
adds BERT's framing -- ``[CLS] sentence A [SEP] sentence B [SEP]`` with segment ids 0 for
A and 1 for B -- padding with ``[PAD]`` plus a 0/1 ``attention_mask``, and truncation to
the model's 512 positions.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import torch

from ._validation import describe, is_int


class WordPieceTokenizer:
    """``tok(texts, pairs=None, max_length=512)`` -> dict of (batch, seq) long tensors:
    ``input_ids``, ``token_type_ids``, ``attention_mask``."""

    def __init__(self, vocab_file, lowercase: bool = True):
        from tokenizers import BertWordPieceTokenizer

        self.lowercase = lowercase
        self._tokenizer = BertWordPieceTokenizer(str(vocab_file), lowercase=lowercase)
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        self.pad_token_id = self._tokenizer.token_to_id("[PAD]")
        self.cls_token_id = self._tokenizer.token_to_id("[CLS]")
        self.sep_token_id = self._tokenizer.token_to_id("[SEP]")

    @classmethod
    def from_folder(cls, folder) -> WordPieceTokenizer:
        """The tokenizer of a Hugging Face BERT folder: its ``vocab.txt``, lowercased unless its
        ``tokenizer_config.json`` says ``"do_lower_case": false`` (a cased model)."""
        folder = Path(folder)
        vocab = folder / "vocab.txt"
        if not vocab.is_file():
            raise FileNotFoundError(f"no vocab.txt in the weights folder {folder.name!r}.")
        settings = folder / "tokenizer_config.json"
        lowercase = (
            json.loads(settings.read_text(encoding="utf-8")).get("do_lower_case", True) if settings.is_file() else True
        )
        return cls(vocab, lowercase=lowercase)

    def save_pretrained(self, folder) -> Path:
        """Write ``vocab.txt`` (one token per line, in id order) and ``tokenizer_config.json`` into
        ``folder``, as Hugging Face's BERT tokenizer does, so ``transformers`` reads them too."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        vocab = self._tokenizer.get_vocab()
        tokens = sorted(vocab, key=vocab.__getitem__)
        (folder / "vocab.txt").write_text("".join(token + "\n" for token in tokens), encoding="utf-8")
        settings = {"tokenizer_class": "BertTokenizer", "do_lower_case": self.lowercase, "model_max_length": 512}
        (folder / "tokenizer_config.json").write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
        return folder

    @property
    def vocab_size(self) -> int:
        return self._tokenizer.get_vocab_size()

    def tokenize(self, text: str) -> list[str]:
        """Word pieces of ``text``, with [CLS] and [SEP]: ``['[CLS]', 'the', 'cat', '[SEP]']``."""
        return self._tokenizer.encode(text).tokens

    def convert_ids_to_tokens(self, ids) -> list[str]:
        return [self._tokenizer.id_to_token(i) for i in _one_sentence(ids)]

    def decode(self, ids) -> str:
        return self._tokenizer.decode(_one_sentence(ids))

    def __call__(self, texts, pairs=None, max_length: int = 512) -> dict[str, torch.Tensor]:
        texts = _as_strings("texts", texts)
        specials = 2 if pairs is None else 3  # [CLS] A [SEP] (B [SEP])
        if not is_int(max_length) or max_length <= specials:
            raise ValueError(
                f"`max_length` must be an int above {specials} ([CLS] and [SEP] take {specials} places), "
                f"got {max_length!r}."
            )
        if pairs is not None:
            pairs = _as_strings("pairs", pairs)
            if len(pairs) != len(texts):
                raise ValueError(f"`pairs` must have one entry per text ({len(texts)}), got {len(pairs)}.")
        with self._truncated_to(max_length):
            encodings = self._tokenizer.encode_batch(texts if pairs is None else list(zip(texts, pairs, strict=True)))
        longest = max(len(e.ids) for e in encodings)
        batch = {"input_ids": [], "token_type_ids": [], "attention_mask": []}
        for e in encodings:
            padding = longest - len(e.ids)
            batch["input_ids"].append(e.ids + [self.pad_token_id] * padding)
            batch["token_type_ids"].append(e.type_ids + [0] * padding)
            batch["attention_mask"].append([1] * len(e.ids) + [0] * padding)
        return {name: torch.tensor(rows, dtype=torch.long) for name, rows in batch.items()}

    def encodings(self, texts, *, pretokenized: bool = False, max_length: int | None = None, special_tokens=True):
        """The engine's encodings of ``texts``, one per text, for code that needs more than the ids.

        Each has ``.ids``, ``.tokens``, ``.word_ids`` (the word each piece comes from, None for [CLS]
        and [SEP]) and ``.offsets`` (each piece's characters in its text). ``pretokenized=True`` takes
        lists of words instead of strings; ``max_length`` cuts each row (with its [CLS] and [SEP]);
        ``special_tokens=False`` leaves [CLS] and [SEP] out.
        """
        if pretokenized:
            if not (isinstance(texts, (list, tuple)) and texts and all(_is_word_list(words) for words in texts)):
                raise ValueError(f"`texts` must be a non-empty list of lists of words, got {describe(texts)}.")
            texts = [list(words) for words in texts]
        else:
            texts = _as_strings("texts", texts)
        if max_length is not None and (not is_int(max_length) or max_length < 1):
            raise ValueError(f"`max_length` must be a positive int or None, got {max_length!r}.")
        with self._truncated_to(max_length):
            return self._tokenizer.encode_batch(
                texts, is_pretokenized=pretokenized, add_special_tokens=bool(special_tokens)
            )

    @contextlib.contextmanager
    def _truncated_to(self, max_length: int | None):
        """Truncation for one call only: the engine keeps its settings between calls."""
        if max_length is not None:
            self._tokenizer.enable_truncation(max_length=max_length)
        try:
            yield
        finally:
            self._tokenizer.no_truncation()


def _is_word_list(words) -> bool:
    return isinstance(words, (list, tuple)) and bool(words) and all(isinstance(w, str) for w in words)


def _as_strings(name: str, texts) -> list[str]:
    """One string or a non-empty list of strings -> a list of strings; anything else is explained."""
    if isinstance(texts, str):
        return [texts]
    if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
        raise TypeError(f"`{name}` must be a string or a list of strings, got {describe(texts)}.")
    if not texts:
        raise ValueError(f"`{name}` is an empty list: pass at least one string.")
    return list(texts)


def _one_sentence(ids) -> list[int]:
    """A 1-D tensor or list of ids -> a list of ints (a batch must be indexed first: ``ids[0]``)."""
    if isinstance(ids, torch.Tensor):
        if ids.dim() != 1:
            raise ValueError(f"`ids` must be one sentence's ids (1-D), got {describe(ids)}: pass `ids[0]`.")
        return ids.tolist()
    if not isinstance(ids, (list, tuple)) or not all(is_int(i) for i in ids):
        raise TypeError(f"`ids` must be a 1-D tensor or a list of ints, got {describe(ids)}.")
    return list(ids)
