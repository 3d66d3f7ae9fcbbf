"""A WordPiece tokenizer for a BERT ``vocab.txt``, returning what ``BertModel`` takes.

Tokenization is not what this course teaches, so the splitting itself is done by the
``tokenizers`` library (the engine behind Hugging Face's fast tokenizers). This wrapper
adds BERT's framing -- ``[CLS] sentence A [SEP] sentence B [SEP]`` with segment ids 0 for
A and 1 for B -- padding with ``[PAD]`` plus a 0/1 ``attention_mask``, and truncation to
the model's 512 positions.
"""

from __future__ import annotations

from pathlib import Path

import torch


class WordPieceTokenizer:
    """``tok(texts, pairs=None, max_length=512)`` -> dict of (batch, seq) long tensors:
    ``input_ids``, ``token_type_ids``, ``attention_mask``."""

    def __init__(self, vocab_file, lowercase: bool = True):
        from tokenizers import BertWordPieceTokenizer

        self._tokenizer = BertWordPieceTokenizer(str(vocab_file), lowercase=lowercase)
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        self.pad_token_id = self._tokenizer.token_to_id("[PAD]")

    @classmethod
    def from_folder(cls, folder) -> WordPieceTokenizer:
        vocab = Path(folder) / "vocab.txt"
        if not vocab.is_file():
            raise FileNotFoundError(f"no vocab.txt in the weights folder {Path(folder).name!r}.")
        return cls(vocab)

    @property
    def vocab_size(self) -> int:
        return self._tokenizer.get_vocab_size()

    def tokenize(self, text: str) -> list[str]:
        """Word pieces of ``text``, with [CLS] and [SEP]: ``['[CLS]', 'the', 'cat', '[SEP]']``."""
        return self._tokenizer.encode(text).tokens

    def convert_ids_to_tokens(self, ids) -> list[str]:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        return [self._tokenizer.id_to_token(int(i)) for i in ids]

    def decode(self, ids) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        return self._tokenizer.decode(ids)

    def __call__(self, texts, pairs=None, max_length: int = 512) -> dict[str, torch.Tensor]:
        if isinstance(texts, str):
            texts = [texts]
        if isinstance(pairs, str):
            pairs = [pairs]
        if not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
            raise TypeError(f"`texts` must be a string or a list of strings, got {type(texts).__name__}.")
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"`pairs` must have one entry per text ({len(texts)}), got {len(pairs)}.")
        self._tokenizer.enable_truncation(max_length=max_length)
        if pairs is None:
            encodings = self._tokenizer.encode_batch(list(texts))
        else:
            encodings = self._tokenizer.encode_batch(list(zip(texts, pairs, strict=False)))
        longest = max(len(e.ids) for e in encodings)
        batch = {"input_ids": [], "token_type_ids": [], "attention_mask": []}
        for e in encodings:
            padding = longest - len(e.ids)
            batch["input_ids"].append(e.ids + [self.pad_token_id] * padding)
            batch["token_type_ids"].append(e.type_ids + [0] * padding)
            batch["attention_mask"].append([1] * len(e.ids) + [0] * padding)
        return {name: torch.tensor(rows, dtype=torch.long) for name, rows in batch.items()}
