"""Word labels and word pieces, and the capitalised-name tagging task of notebook 10.

- **word labels -> piece labels** (``align_word_labels``): a word cut into several pieces keeps its
  label on its *first* piece; its other pieces, [CLS], [SEP] and padding get -100, which the loss
  skips. Labelling every piece would count a long word several times in the loss and, read back,
  turn one name into several. ``word_predictions`` reads a tagger's output back the same way: one
  prediction per word, from its first piece.
- **capitalised-name tagging** (``name_tagging_examples``): no labelled named-entity data ships with
  the course's packages, so the task is derived from the plot summaries, mechanically. The model reads
  the lowercased text (the tokenizer is uncased) and tags each word that the writer capitalised in
  mid-sentence: B-NAME for the first word of a run of capitalised words, I-NAME for the next ones, O
  otherwise. It is a stand-in for named entities (it also tags "American" or "Christmas"), and it has
  real word-level labels, which is what the alignment problem needs. The first word of a sentence, and
  a word after an opening quote, is capitalised whatever it is: it gets no label (-100).

``encode_words`` tokenizes already-split words and keeps each piece's word id
(``WordPieceTokenizer.encodings``); ``TaggingCollator`` aligns the word labels to the pieces;
``name_spans`` and ``entity_scores`` judge whole names, as named-entity scores do; ``name_word_list`` and
``word_list_labels`` are the baseline with the same labels and no model: a list of the words labelled names.
"""

from __future__ import annotations

import re

import torch

from .._validation import (
    describe,
    is_int,
    require_positive_int,
    require_tensor,
)
from ..corpus import split_sentences
from ..heads import IGNORE_INDEX
from ..tokenizer import WordPieceTokenizer
from .checks import require_tokenizer, require_words


def align_word_labels(word_ids, word_labels, num_labels: int | None = None) -> torch.Tensor:
    """One label per word piece from one label per word: the word's label on its first piece, -100 elsewhere.

    ``word_ids``: for each piece of the input, the index of the word it comes from, or None for [CLS],
    [SEP] and padding (what a ``tokenizers`` encoding's ``.word_ids`` holds). ``word_labels``: one class
    index per word (-100 for a word without a label). With ``num_labels``, every label must be a class.
    Returns a long tensor (n_pieces,).
    """
    word_ids = _require_word_ids(word_ids)
    if not isinstance(word_labels, (list, tuple)) or not all(is_int(label) for label in word_labels):
        raise TypeError(f"`word_labels` must be a list of int labels, one per word, got {describe(word_labels)}.")
    n_words = max((w for w in word_ids if w is not None), default=-1) + 1
    if len(word_labels) < n_words:
        raise ValueError(
            f"`word_labels` has {len(word_labels)} labels, but the pieces come from {n_words} words: "
            "give one label per word (-100 for a word without one)."
        )
    if num_labels is not None:
        require_positive_int("num_labels", num_labels)
        outside = [label for label in word_labels if label != IGNORE_INDEX and not 0 <= label < num_labels]
        if outside:
            raise ValueError(
                f"`word_labels` contains {outside[0]}, outside the classes 0..{num_labels - 1}; "
                f"{IGNORE_INDEX} marks a word without a label."
            )
    return _align_word_labels(word_ids, list(word_labels))


def _align_word_labels(word_ids, word_labels):
    labels, previous = [], None
    for word in word_ids:
        if word is None:
            labels.append(IGNORE_INDEX)  # [CLS], [SEP], padding: no word, no label
        elif word != previous:
            labels.append(word_labels[word])  # the first piece of a word carries its label
        else:
            labels.append(IGNORE_INDEX)  # the word's other pieces: skipped by the loss
        previous = word
    return torch.tensor(labels, dtype=torch.long)  # (n_pieces,)


def word_predictions(piece_predictions: torch.Tensor, word_ids) -> torch.Tensor:
    """A tagger's prediction for each word, read from the word's first piece: a long tensor (n_words,).

    ``piece_predictions``: (n_pieces,), e.g. ``logits[0].argmax(-1)``; ``word_ids`` as in ``align_word_labels``.
    Words are listed in the order of their first pieces.
    """
    word_ids = _require_word_ids(word_ids)
    require_tensor("piece_predictions", piece_predictions, ndim=1)
    if len(piece_predictions) != len(word_ids):
        raise ValueError(
            f"`piece_predictions` must have one entry per piece ({len(word_ids)}), got {describe(piece_predictions)}."
        )
    firsts = [i for i, w in enumerate(word_ids) if w is not None and (i == 0 or word_ids[i - 1] != w)]
    return piece_predictions[torch.tensor(firsts, dtype=torch.long)]  # (n_words,)


def _require_word_ids(word_ids) -> list:
    if isinstance(word_ids, torch.Tensor) or not isinstance(word_ids, (list, tuple)):
        raise TypeError(
            "`word_ids` must be a list with one entry per piece: the index of its word, or None for "
            f"[CLS], [SEP] and padding, got {describe(word_ids)}."
        )
    if not word_ids:
        raise ValueError("`word_ids` is empty: an encoded text has at least its [CLS] and [SEP] pieces.")
    for w in word_ids:
        if w is not None and not (is_int(w) and w >= 0):
            raise TypeError(f"`word_ids` must hold word indices (ints >= 0) or None, got {w!r}.")
    return list(word_ids)


NAME_LABELS = ("O", "B-NAME", "I-NAME")


_TOKEN = re.compile(r"\w+|[^\w\s]")  # words and single punctuation marks, as BERT's pre-tokenizer splits them


_OPENERS = {'"', "“", "‘", ":"}  # what a capitalised word may follow without being a name


def name_tagging_examples(texts) -> list[tuple[list[str], list[int]]]:
    """(words, labels) for every sentence of ``texts``: labels index ``NAME_LABELS`` (O, B-NAME, I-NAME).

    A word is *capitalised* when it is alphabetic and starts with a capital letter; "I" is not. The
    first word of a sentence and a word after an opening quote or a colon are capitalised whatever
    they are, so they get -100 (no label). A capitalised word is B-NAME, or I-NAME when the word
    before it is capitalised too and has a label ("Jack Sparrow": B-NAME I-NAME).
    """
    if isinstance(texts, str) or not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
        raise TypeError(f"`texts` must be a list of strings, got {describe(texts)}.")
    examples = []
    for text in texts:
        for sentence in split_sentences(text):
            words = _TOKEN.findall(sentence)
            if len(words) >= 2:
                examples.append((words, _name_labels(words)))
    return examples


def _name_labels(words: list[str]) -> list[int]:
    labels = []
    for i, word in enumerate(words):
        capital = word.isalpha() and word[0].isupper() and word != "I"
        if i == 0 or words[i - 1] in _OPENERS:
            labels.append(IGNORE_INDEX)  # capitalised by position, whatever the word is
        elif not capital:
            labels.append(NAME_LABELS.index("O"))
        elif labels[-1] in (NAME_LABELS.index("B-NAME"), NAME_LABELS.index("I-NAME")):
            labels.append(NAME_LABELS.index("I-NAME"))
        else:
            labels.append(NAME_LABELS.index("B-NAME"))
    return labels


def name_word_list(examples) -> set[str]:
    """A word-list rule's list: the lowercased words that ``examples`` ((words, labels) pairs) label B-NAME or
    I-NAME more often than O. The baseline a tagger must beat with the same labels: a lookup, no context."""
    if not isinstance(examples, (list, tuple)):
        raise TypeError(f"`examples` must be a list of (words, labels) pairs, got {describe(examples)}.")
    named, plain = {}, {}
    for words, labels in examples:
        require_words(words)
        for word, label in zip(words, labels, strict=True):
            counts = plain if label == NAME_LABELS.index("O") else named if label > 0 else None
            if counts is not None:
                counts[word.lower()] = counts.get(word.lower(), 0) + 1
    return {word for word, n in named.items() if n > plain.get(word, 0)}


def word_list_labels(words, word_list) -> list[int]:
    """The word-list rule's labels for one sentence, read lowercased (as the uncased tagger reads it): a listed
    word is B-NAME, or I-NAME right after another listed word; every other word is O."""
    require_words(words)
    labels = []
    for word in words:
        listed = word.lower() in word_list
        after_name = bool(labels) and labels[-1] != NAME_LABELS.index("O")
        labels.append(NAME_LABELS.index("I-NAME" if after_name else "B-NAME") if listed else NAME_LABELS.index("O"))
    return labels


def encode_words(tokenizer: WordPieceTokenizer, sentences, *, max_length: int = 128):
    """Already-split sentences (lists of words) -> (batch for the model, word ids of every row).

    ``word_ids[row][piece]`` is the index of the word that piece comes from, None for [CLS], [SEP] and
    padding: what ``align_word_labels`` and ``word_predictions`` read. Rows are cut to ``max_length``.
    """
    require_tokenizer(tokenizer)
    if not isinstance(sentences, (list, tuple)) or not sentences:
        raise ValueError(f"`sentences` is an empty batch: pass at least one list of words, got {describe(sentences)}.")
    for words in sentences:
        require_words(words)
    require_positive_int("max_length", max_length)
    encodings = tokenizer.encodings(sentences, pretokenized=True, max_length=max_length)
    longest = max(len(e.ids) for e in encodings)
    input_ids = torch.full((len(encodings), longest), tokenizer.pad_token_id)  # (batch, seq)
    attention_mask = torch.zeros(len(encodings), longest, dtype=torch.long)  # (batch, seq)
    word_ids = []
    for row, e in enumerate(encodings):
        input_ids[row, : len(e.ids)] = torch.tensor(e.ids)
        attention_mask[row, : len(e.ids)] = 1
        word_ids.append(list(e.word_ids) + [None] * (longest - len(e.ids)))
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": torch.zeros_like(input_ids)}
    return batch, word_ids


class TaggingCollator:
    """``collate(examples, generator=None) -> batch``: (words, word labels) pairs -> model inputs and piece
    ``labels`` (batch, seq), the word's label on its first piece and -100 elsewhere (``align_word_labels``)."""

    def __init__(self, tokenizer: WordPieceTokenizer, num_labels: int = len(NAME_LABELS), max_length: int = 128):
        require_tokenizer(tokenizer)
        require_positive_int("num_labels", num_labels)
        require_positive_int("max_length", max_length)
        self.tokenizer, self.num_labels, self.max_length = tokenizer, num_labels, max_length

    def __call__(self, examples, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        if not isinstance(examples, (list, tuple)) or not examples:
            raise ValueError(
                f"`examples` is an empty batch: pass at least one (words, labels) pair, got {describe(examples)}."
            )
        for words, labels in examples:
            require_words(words)
            if not isinstance(labels, (list, tuple)) or len(labels) != len(words):
                raise ValueError(
                    f"a sentence of {len(words)} words has {describe(labels)} as labels: give one label per word "
                    f"({' '.join(words)[:60]!r})."
                )
        batch, word_ids = encode_words(self.tokenizer, [words for words, _ in examples], max_length=self.max_length)
        batch["labels"] = torch.stack(
            [
                align_word_labels(ids, labels, self.num_labels)
                for ids, (_, labels) in zip(word_ids, examples, strict=True)
            ]
        )  # (batch, seq)
        return batch


def name_spans(labels) -> set[tuple[int, int]]:
    """The names in one sentence's word labels (0 O, 1 B-NAME, 2 I-NAME; -100, a word not judged, read as O):
    the set of (first word, last word) spans. An I-NAME with no name before it starts one, as CoNLL's
    ``conlleval`` reads it."""
    spans, start = set(), None
    for i, label in enumerate([*labels, 0]):  # a final O closes the last name
        if label == 1 or (label == 2 and start is None):
            if start is not None:
                spans.add((start, i - 1))
            start = i
        elif label != 2:
            if start is not None:
                spans.add((start, i - 1))
            start = None
    return spans


def entity_scores(true_labels, predicted_labels) -> dict[str, float]:
    """Entity-level precision, recall and F1 (CoNLL's): a predicted name counts only if its first and last word
    are exactly a true name's. ``true_labels``, ``predicted_labels``: one list of word labels per sentence;
    a prediction on a word whose truth is -100 is not judged (read as O)."""
    found = real = correct = 0
    for truth, predicted in zip(true_labels, predicted_labels, strict=True):
        predicted = [0 if y < 0 else p for y, p in zip(truth, predicted, strict=True)]
        true_names, predicted_names = name_spans(truth), name_spans(predicted)
        found, real, correct = (
            found + len(predicted_names),
            real + len(true_names),
            correct + len(true_names & predicted_names),
        )
    precision, recall = correct / max(found, 1), correct / max(real, 1)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "names": real, "found": found, "correct": correct}
