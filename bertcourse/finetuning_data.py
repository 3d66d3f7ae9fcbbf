"""From the offline corpus to fine-tuning batches, the baselines a fine-tuned model must beat, and two small
tasks derived from the corpus for the token-level heads.

Sentence classification (notebook 10's main task) reads the fresh/rotten reviews of
``corpus.review_split()``, the one split of the course; test reviews are never tuned on::

    collate = ReviewCollator(tokenizer, max_length=128)             # (text, label) examples -> a batch with labels
    batches = SeededBatches(split.train, 32, collate, seed=0)        # bertcourse.training's data order
    history = train(model, batches, steps=32, lr=3e-4, warmup_steps=3)
    evaluate(model, review_batches(split.test, tokenizer), classification_metrics)   # {"loss", "accuracy"}

The baselines are plain models trained with the same loop, so that every row of notebook 10's table
was trained the same way:

- ``majority_class``: always the most frequent training label;
- ``BagOfWords``: logistic regression on word counts, one row of weights per word of the training
  vocabulary (a review's logits are the sum of its words' rows plus a bias), in torch;
- ``sentence_features`` + ``LinearProbe``: a frozen encoder's mean-pooled sentence vectors (or its
  [CLS] vector, or its pooler output) and a linear layer trained on them, the encoder untouched.

No labelled named-entity or question-answering data ships with the course's packages, so the two
token-level heads are shown on tasks *derived* from the plot summaries, mechanically, and named for
what they are:

- **capitalised-name tagging** (``name_tagging_examples``): the model reads the lowercased text
  (the tokenizer is uncased) and tags each word that the writer capitalised in mid-sentence: B-NAME
  for the first word of a run of capitalised words, I-NAME for the next ones, O otherwise. It is a
  stand-in for named entities (it also tags "American" or "Christmas"), and it has real word-level
  labels, which is what the alignment problem needs. The first word of a sentence, and a word after an
  opening quote, is capitalised whatever it is: it gets no label (-100).
- **who-questions** (``who_questions``): a sentence of a plot summary that opens with a name (a word
  that is capitalised elsewhere in mid-sentence of the same summary) and goes on with a lowercase word
  becomes a question, "Who" + the rest of the sentence + "?", and the answer is that name, in the
  summary. The model must find the sentence the question paraphrases and point at its subject: the
  machinery of extractive QA (a question and a passage, windows with a stride, start and end logits,
  a decoded span), on a task far easier than reading comprehension.

For tagging, ``encode_words`` tokenizes already-split words and keeps each piece's word id, and
``TaggingCollator`` aligns the word labels to the pieces (``finetuning.align_word_labels``). For
questions, ``question_windows`` cuts a passage into windows that each fit the model beside the
question (``long_inputs.window_spans``: ``window`` counts the passage's tokens in a window,
``stride`` is how far a window moves), and maps the answer to token positions in each window
(position 0, the [CLS] token, where the window does not hold the whole answer: Hugging Face's
convention for SQuAD); ``training_windows`` and ``WindowCollator`` turn every window of every
question into training rows, and ``decode_answer`` takes the best valid span over all the
windows of a passage (``finetuning.best_span``).

Word ids and character offsets come from ``WordPieceTokenizer.encodings``.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ._validation import counted, describe, is_int, require_float_tensor, require_positive_int
from .corpus import LABELS, split_sentences
from .finetuning import IGNORE_INDEX, align_word_labels, best_span
from .long_inputs.windows import check_window, window_spans
from .pooling import mean_pooling
from .tokenizer import WordPieceTokenizer

NAME_LABELS = ("O", "B-NAME", "I-NAME")
FEATURES = ("mean", "cls", "pooler")


# --- sentence classification on the reviews ------------------------------------------------------


class ReviewCollator:
    """``collate(examples, generator=None) -> batch``: (text, label) pairs -> the tokenizer's tensors and ``labels``.

    Texts are cut to ``max_length`` word pieces ([CLS] and [SEP] included). The generator is unused
    (there is nothing random in a classification batch); ``training.SeededBatches`` passes one.
    """

    def __init__(self, tokenizer: WordPieceTokenizer, max_length: int = 128, num_labels: int = len(LABELS)):
        _require_tokenizer(tokenizer)
        require_positive_int("max_length", max_length)
        require_positive_int("num_labels", num_labels)
        self.tokenizer, self.max_length, self.num_labels = tokenizer, max_length, num_labels

    def __call__(self, examples, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        texts, labels = _require_labelled_texts("examples", examples, self.num_labels)
        batch = self.tokenizer(texts, max_length=self.max_length)
        return {**batch, "labels": torch.tensor(labels)}


def review_batches(examples, tokenizer: WordPieceTokenizer, *, batch_size: int = 64, max_length: int = 128):
    """Fixed evaluation batches of (text, label) examples, shortest texts first (less padding, same figures)."""
    collate = ReviewCollator(tokenizer, max_length)
    _require_labelled_texts("examples", examples, collate.num_labels)
    require_positive_int("batch_size", batch_size)
    ordered = sorted(examples, key=lambda example: len(example[0]))
    return [collate(ordered[i : i + batch_size]) for i in range(0, len(ordered), batch_size)]


def classification_metrics(batch: dict, output) -> dict[str, tuple[torch.Tensor, int]]:
    """What ``training.evaluate`` averages for a classifier: the loss and the accuracy, weighted by examples."""
    labels = batch["labels"]
    correct = output.logits.argmax(dim=-1) == labels  # (batch,)
    return {"loss": (output.loss, len(labels)), "accuracy": (correct.float().mean(), len(labels))}


def predict_probabilities(model, tokenizer: WordPieceTokenizer, texts, *, batch_size: int = 64, max_length: int = 128):
    """(n_texts, num_labels) class probabilities of a sequence classifier, in eval mode and without gradients.

    The model's own mode is given back afterwards.
    """
    _require_tokenizer(tokenizer)
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, (list, tuple)) or not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError(
            f"`texts` must be a non-empty list of strings (an empty batch has nothing to predict), "
            f"got {describe(texts)}."
        )
    require_positive_int("batch_size", batch_size)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            parts = []
            for i in range(0, len(texts), batch_size):
                batch = _on_device(tokenizer(list(texts[i : i + batch_size]), max_length=max_length), model)
                parts.append(model(**batch).logits.softmax(dim=-1).cpu())  # (chunk, num_labels)
    finally:
        model.train(was_training)
    return torch.cat(parts)  # (n_texts, num_labels)


def majority_class(labels) -> int:
    """The most frequent label of the training set (the smaller label on a tie): the first baseline."""
    if not isinstance(labels, (list, tuple)) or not labels or not all(is_int(y) for y in labels):
        raise ValueError(f"`labels` must be a non-empty list of int labels, got {describe(labels)}.")
    counts = Counter(labels)
    return min(counts, key=lambda label: (-counts[label], label))


# --- the bag of words ------------------------------------------------------------------------


_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[^\w\s]")


def words_of(text: str) -> list[str]:
    """Lowercased words and punctuation marks: ``"Don't go!"`` -> ``["don't", "go", "!"]``."""
    if not isinstance(text, str):
        raise TypeError(f"`text` must be a string, got {describe(text)}.")
    return _WORD.findall(text.lower())


@dataclasses.dataclass
class LinearOutput:
    """What the baselines return: ``logits`` (batch, num_labels) and, with labels, the cross-entropy ``loss``."""

    logits: torch.Tensor
    loss: torch.Tensor | None = None


class BagOfWords(nn.Module):
    """Logistic regression on word counts: logits = sum over the review's words of W[word] + b.

    ``vocabulary``: the words that get a row of weights (index 0 is every other word, and padding,
    and gets none). ``BagOfWords.from_texts(texts, min_count=2)`` keeps the training words seen at
    least twice. ``bow.collate(examples, generator=None)`` turns (text, label) pairs into
    ``{"word_ids", "labels"}``, so ``training.train`` and ``training.evaluate`` run it like BERT.
    """

    def __init__(self, vocabulary: Sequence[str], num_labels: int = len(LABELS)):
        super().__init__()
        if isinstance(vocabulary, str) or not vocabulary or not all(isinstance(w, str) for w in vocabulary):
            raise ValueError(f"`vocabulary` must be a non-empty list of words, got {describe(vocabulary)}.")
        require_positive_int("num_labels", num_labels)
        self.vocabulary = list(vocabulary)
        self.index = {word: i + 1 for i, word in enumerate(self.vocabulary)}  # 0: an unknown word, or padding
        self.num_labels = num_labels
        self.weights = nn.Embedding(len(self.vocabulary) + 1, num_labels, padding_idx=0)
        self.bias = nn.Parameter(torch.zeros(num_labels))
        nn.init.zeros_(self.weights.weight)

    @classmethod
    def from_texts(cls, texts, min_count: int = 2, num_labels: int = len(LABELS)) -> BagOfWords:
        if isinstance(texts, str) or not texts or not all(isinstance(t, str) for t in texts):
            raise ValueError(f"`texts` must be a non-empty list of strings, got {describe(texts)}.")
        require_positive_int("min_count", min_count)
        counts = Counter(word for text in texts for word in words_of(text))
        return cls(sorted(word for word, n in counts.items() if n >= min_count), num_labels)

    def collate(self, examples, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        texts, labels = _require_labelled_texts("examples", examples, self.num_labels)
        rows = [[self.index.get(word, 0) for word in words_of(text)] or [0] for text in texts]
        word_ids = torch.zeros(len(rows), max(len(row) for row in rows), dtype=torch.long)  # (batch, longest)
        for i, row in enumerate(rows):
            word_ids[i, : len(row)] = torch.tensor(row)
        return {"word_ids": word_ids, "labels": torch.tensor(labels)}

    def forward(self, word_ids: torch.Tensor, labels: torch.Tensor | None = None) -> LinearOutput:
        logits = self.weights(word_ids).sum(dim=1) + self.bias  # (batch, num_labels): padding's row is 0
        return LinearOutput(logits, None if labels is None else F.cross_entropy(logits, labels))


# --- the frozen probe ------------------------------------------------------------------------


def sentence_features(
    encoder, tokenizer: WordPieceTokenizer, texts, *, batch_size: int = 64, max_length: int = 128
) -> dict[str, torch.Tensor]:
    """A frozen encoder's three candidate sentence vectors, from one pass: {"mean", "cls", "pooler"}, each
    (n_texts, hidden): the mean of the token vectors (padding left out), the raw [CLS] vector, the pooler's
    tanh(W h_[CLS] + b). Texts go shortest first (less padding) and come back in their own order.
    """
    _require_tokenizer(tokenizer)
    if isinstance(texts, str) or not isinstance(texts, (list, tuple)) or not texts:
        raise ValueError(f"`texts` must be a non-empty list of strings, got {describe(texts)}.")
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    parts = {name: [] for name in FEATURES}
    was_training = encoder.training
    encoder.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(order), batch_size):
                batch = tokenizer([texts[i] for i in order[start : start + batch_size]], max_length=max_length)
                out = encoder(**_on_device(batch, encoder))
                mask = batch["attention_mask"].to(out.last_hidden_state.device)
                parts["mean"].append(mean_pooling(out.last_hidden_state, mask).cpu())  # (chunk, hidden)
                parts["cls"].append(out.last_hidden_state[:, 0].cpu())  # (chunk, hidden)
                parts["pooler"].append(out.pooler_output.cpu())  # (chunk, hidden)
    finally:
        encoder.train(was_training)
    back = torch.empty(len(order), dtype=torch.long)
    back[torch.tensor(order)] = torch.arange(len(order))  # where each text's row went
    return {name: torch.cat(rows)[back] for name, rows in parts.items()}


class LinearProbe(nn.Module):
    """A linear layer on fixed features: forward(features, labels=None) -> LinearOutput.

    ``probe.collate(examples)`` stacks (feature row, label) pairs into ``{"features", "labels"}``.
    """

    def __init__(self, hidden_size: int, num_labels: int = len(LABELS)):
        super().__init__()
        require_positive_int("hidden_size", hidden_size)
        require_positive_int("num_labels", num_labels)
        self.num_labels = num_labels
        self.classifier = nn.Linear(hidden_size, num_labels)

    @staticmethod
    def examples(features: torch.Tensor, labels) -> list[tuple[torch.Tensor, int]]:
        """(feature row, label) pairs for ``SeededBatches``."""
        require_float_tensor("features", features, ndim=2)
        if len(labels) != len(features):
            raise ValueError(
                f"`labels` must have one label per row of `features` ({len(features)}), got {len(labels)}."
            )
        return list(zip(features, labels, strict=True))

    def collate(self, examples, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        if not isinstance(examples, (list, tuple)) or not examples:
            raise ValueError(
                f"`examples` is an empty batch: pass at least one (features, label) pair, got {describe(examples)}."
            )
        return {"features": torch.stack([f for f, _ in examples]), "labels": torch.tensor([y for _, y in examples])}

    def forward(self, features: torch.Tensor, labels: torch.Tensor | None = None) -> LinearOutput:
        logits = self.classifier(features)  # (batch, num_labels)
        return LinearOutput(logits, None if labels is None else F.cross_entropy(logits, labels))


# --- token classification: capitalised-name tagging ----------------------------------------------

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


def encode_words(tokenizer: WordPieceTokenizer, sentences, *, max_length: int = 128):
    """Already-split sentences (lists of words) -> (batch for the model, word ids of every row).

    ``word_ids[row][piece]`` is the index of the word that piece comes from, None for [CLS], [SEP] and
    padding: what ``align_word_labels`` and ``word_predictions`` read. Rows are cut to ``max_length``.
    """
    _require_tokenizer(tokenizer)
    if not isinstance(sentences, (list, tuple)) or not sentences:
        raise ValueError(f"`sentences` is an empty batch: pass at least one list of words, got {describe(sentences)}.")
    for words in sentences:
        _require_words(words)
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
        _require_tokenizer(tokenizer)
        require_positive_int("num_labels", num_labels)
        require_positive_int("max_length", max_length)
        self.tokenizer, self.num_labels, self.max_length = tokenizer, num_labels, max_length

    def __call__(self, examples, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        if not isinstance(examples, (list, tuple)) or not examples:
            raise ValueError(
                f"`examples` is an empty batch: pass at least one (words, labels) pair, got {describe(examples)}."
            )
        for words, labels in examples:
            _require_words(words)
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


def _answer_tokens(text: str) -> list[str]:
    """SQuAD's normalisation: lowercase, no punctuation, no articles (a, an, the), split on white space."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return [word for word in text.split() if word not in ("a", "an", "the")]


_PUNCTUATION = set("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def answer_f1(prediction: str, truth: str) -> float:
    """SQuAD's token F1 between a predicted answer and the true one: the overlap of their (normalised) words,
    so "Bret" against "Bret Packard" scores 0.67 where exact match scores 0."""
    predicted, true = _answer_tokens(prediction), _answer_tokens(truth)
    if not predicted or not true:
        return float(predicted == true)
    common = sum((Counter(predicted) & Counter(true)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(true)
    return 2 * precision * recall / (precision + recall)


# --- question answering: who-questions ----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class QAExample:
    """A question, its passage, and the answer: ``context[answer_start : answer_start + len(answer)]``."""

    question: str
    context: str
    answer_start: int
    answer: str

    @property
    def answer_end(self) -> int:
        return self.answer_start + len(self.answer)  # one past the answer's last character


_OPENING_NAME = re.compile(r"([A-Z][a-z]+(?: [A-Z][a-z]+){0,2}) ([a-z][^.!?]*[^.!?\s])[.!]")
# Capitalised at the start of a sentence, and in titles ("The Ring"), but never a person.
_NOT_NAME_WORDS = (
    "A An The This That These Those His Her Its Their Our My Your When After Before While As But And Or So Then "
    "In On At Of For With From By To One Two Three Now Later Meanwhile Soon There Here It He She They We You"
)
_NOT_NAMES = frozenset(_NOT_NAME_WORDS.split())


def who_questions(texts) -> list[QAExample]:
    """Who-questions derived from plot summaries, with their answers (see the module's docstring).

    A sentence "Name goes on with lowercase words." whose first word also stands capitalised in
    mid-sentence elsewhere in the same summary (so it is a name, not "The" or "When") becomes the
    question "Who goes on with lowercase words?"; the answer is the name, at its place in the summary.
    """
    if isinstance(texts, str) or not isinstance(texts, (list, tuple)) or not all(isinstance(t, str) for t in texts):
        raise TypeError(f"`texts` must be a list of strings, got {describe(texts)}.")
    examples = []
    for text in texts:
        names = {
            w for words, labels in name_tagging_examples([text]) for w, y in zip(words, labels, strict=True) if y > 0
        }
        cursor = 0
        for sentence in split_sentences(text):
            start = text.find(sentence, cursor)
            cursor = start + len(sentence)
            match = _OPENING_NAME.fullmatch(sentence)
            if match is None or not _is_subject_name(match.group(1), match.group(2), names):
                continue
            question = f"Who {match.group(2)}?"
            examples.append(QAExample(question=question, context=text, answer_start=start, answer=match.group(1)))
    return examples


def _is_subject_name(name: str, rest: str, names: set[str]) -> bool:
    """Whether a sentence's opening words are a name that is its subject: "Anna is followed ..." but not
    "The assembled team ..." (a title word) or "Sam and the kids ..." (a subject of two)."""
    first = name.split()[0]
    return first in names and first not in _NOT_NAMES and rest.split()[0] not in ("and", "or", "nor", "but")


@dataclasses.dataclass
class QuestionWindows:
    """What ``question_windows`` returns for one (question, passage) pair.

    ``batch``: model inputs for the n windows, ``[CLS] question [SEP] window of the passage [SEP]``,
    token types 0 then 1; ``context_mask`` (n, seq) True at the passage's tokens; ``offsets`` (n, seq, 2)
    each token's [start, end) characters in the passage (0, 0 elsewhere); ``start_positions`` and
    ``end_positions`` (n,) the answer's first and last token in each window, 0 ([CLS]) where the window
    does not hold the whole answer (None without an answer); ``spans`` (n, 2) each window's [start, end)
    in the passage's tokens.
    """

    batch: dict[str, torch.Tensor]
    context_mask: torch.Tensor
    offsets: torch.Tensor
    spans: torch.Tensor
    start_positions: torch.Tensor | None = None
    end_positions: torch.Tensor | None = None


def question_windows(
    tokenizer: WordPieceTokenizer,
    question: str,
    context: str,
    *,
    max_length: int = 128,
    stride: int | None = None,
    answer_start: int | None = None,
    answer_end: int | None = None,
) -> QuestionWindows:
    """Cut ``context`` into windows that each fit ``max_length`` beside ``question``.

    Each window holds ``window = max_length - len(question pieces) - 3`` pieces of the passage and moves
    by ``stride`` pieces (default: three quarters of a window), so neighbours overlap and an answer near
    a window's edge is whole in the next one. With ``answer_start`` / ``answer_end`` (characters in the
    passage, end excluded), the answer's token positions in each window are computed too.
    """
    _require_tokenizer(tokenizer)
    for name, text in (("question", question), ("context", context)):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"`{name}` must be a non-empty string, got {describe(text)}.")
    require_positive_int("max_length", max_length)
    q, c = tokenizer.encodings([question, context], special_tokens=False)
    window = max_length - len(q.ids) - 3  # [CLS] question [SEP] window [SEP]
    if window < 2:
        room = max(window, 0)
        raise ValueError(
            f"the question has {counted(len(q.ids), 'word piece')}; with [CLS], [SEP] and [SEP] that is "
            f"{len(q.ids) + 3} of max_length={max_length}, which leaves {counted(room, 'piece')} for the passage "
            f"(a window needs at least 2): shorten the question or raise `max_length` to at least {len(q.ids) + 5}."
        )
    stride = max(window * 3 // 4, 1) if stride is None else stride
    check_window(window, stride)
    if (answer_start is None) != (answer_end is None):
        raise ValueError("pass both `answer_start` and `answer_end` (characters in the passage), or neither.")
    if answer_start is not None and not (
        is_int(answer_start) and is_int(answer_end) and 0 <= answer_start < answer_end <= len(context)
    ):
        raise ValueError(
            f"`answer_start`={answer_start!r} and `answer_end`={answer_end!r} must be character positions with "
            f"0 <= answer_start < answer_end <= len(context) = {len(context)}."
        )
    spans = window_spans(len(c.ids), window, stride)  # (n, 2)
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    n, seq = len(spans), max_length if len(spans) > 1 else len(q.ids) + 3 + len(c.ids)
    input_ids = torch.full((n, seq), tokenizer.pad_token_id)  # (n, seq)
    token_type_ids = torch.zeros(n, seq, dtype=torch.long)  # (n, seq)
    attention_mask = torch.zeros(n, seq, dtype=torch.long)  # (n, seq)
    context_mask = torch.zeros(n, seq, dtype=torch.bool)  # (n, seq)
    offsets = torch.zeros(n, seq, 2, dtype=torch.long)  # (n, seq, 2)
    first = len(q.ids) + 2  # where the passage starts in every window
    piece_offsets = torch.tensor(c.offsets, dtype=torch.long).view(-1, 2)  # (n_pieces, 2)
    for row, (start, end) in enumerate(spans.tolist()):
        ids = [cls_id, *q.ids, sep_id, *c.ids[start:end], sep_id]
        input_ids[row, : len(ids)] = torch.tensor(ids)
        attention_mask[row, : len(ids)] = 1
        token_type_ids[row, first : len(ids)] = 1  # the passage and its [SEP]
        context_mask[row, first : first + end - start] = True
        offsets[row, first : first + end - start] = piece_offsets[start:end]
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
    result = QuestionWindows(batch=batch, context_mask=context_mask, offsets=offsets, spans=spans)
    if answer_start is not None:
        result.start_positions, result.end_positions = _answer_positions(result, answer_start, answer_end)
    return result


def _answer_positions(windows: QuestionWindows, answer_start: int, answer_end: int):
    """(n,) first and last token of the answer in each window; 0 ([CLS]) where the window lacks part of it."""
    inside = windows.context_mask  # (n, seq)
    starts_here = inside & (windows.offsets[..., 0] <= answer_start) & (windows.offsets[..., 1] > answer_start)
    ends_here = inside & (windows.offsets[..., 0] < answer_end) & (windows.offsets[..., 1] >= answer_end)
    has_both = starts_here.any(dim=1) & ends_here.any(dim=1)  # (n,)
    start = torch.where(has_both, starts_here.float().argmax(dim=1), 0)  # (n,)
    end = torch.where(has_both, ends_here.float().argmax(dim=1), 0)  # (n,)
    return start, end


def training_windows(tokenizer: WordPieceTokenizer, examples, *, max_length: int = 128, stride: int | None = None):
    """Every window of every question as one training row: a dict of 1-D tensors ``input_ids``,
    ``attention_mask``, ``token_type_ids``, ``start_positions`` and ``end_positions`` (both 0 in a window
    without the whole answer, which teaches the model to point at [CLS] there). ``WindowCollator`` pads them."""
    if not isinstance(examples, (list, tuple)) or not examples or not all(isinstance(e, QAExample) for e in examples):
        raise ValueError(f"`examples` must be a non-empty list of QAExample, got {describe(examples)}.")
    rows = []
    for example in examples:
        windows = question_windows(
            tokenizer,
            example.question,
            example.context,
            max_length=max_length,
            stride=stride,
            answer_start=example.answer_start,
            answer_end=example.answer_end,
        )
        for row in range(len(windows.spans)):
            length = int(windows.batch["attention_mask"][row].sum())
            rows.append(
                {
                    **{name: value[row, :length] for name, value in windows.batch.items()},
                    "start_positions": windows.start_positions[row],
                    "end_positions": windows.end_positions[row],
                }
            )
    return rows


class WindowCollator:
    """``collate(rows, generator=None) -> batch``: the rows of ``training_windows``, padded to the longest."""

    def __init__(self, tokenizer: WordPieceTokenizer):
        _require_tokenizer(tokenizer)
        self.pad_token_id = tokenizer.pad_token_id

    def __call__(self, rows, generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        if not isinstance(rows, (list, tuple)) or not rows:
            raise ValueError(f"`rows` is an empty batch: pass at least one window, got {describe(rows)}.")
        longest = max(len(row["input_ids"]) for row in rows)
        batch = {}
        for name, fill in (("input_ids", self.pad_token_id), ("attention_mask", 0), ("token_type_ids", 0)):
            batch[name] = torch.full((len(rows), longest), fill, dtype=torch.long)  # (batch, longest)
            for i, row in enumerate(rows):
                batch[name][i, : len(row[name])] = row[name]
        for name in ("start_positions", "end_positions"):
            batch[name] = torch.stack([row[name] for row in rows])  # (batch,)
        return batch


def decode_answer(
    windows: QuestionWindows,
    start_logits: torch.Tensor,
    end_logits: torch.Tensor,
    context: str,
    max_answer_length: int = 30,
) -> tuple[str, int, int, float]:
    """The best answer over all the windows of one passage: (text, start char, end char, score).

    Each window's best valid span (``best_span``) is scored start_logit + end_logit; the best window wins.
    """
    n, seq = windows.context_mask.shape
    for name, logits in (("start_logits", start_logits), ("end_logits", end_logits)):
        require_float_tensor(name, logits, ndim=2)
        if tuple(logits.shape) != (n, seq):
            raise ValueError(
                f"`{name}` must be (n_windows, seq) = {(n, seq)}, one row per window, got {describe(logits)}."
            )
    spans = best_span(start_logits, end_logits, windows.context_mask, max_answer_length)  # (n, 2)
    rows = torch.arange(n)
    scores = start_logits[rows, spans[:, 0]] + end_logits[rows, spans[:, 1]]  # (n,)
    scores = scores.masked_fill(~windows.context_mask.any(dim=1), float("-inf"))
    best = int(scores.argmax())
    first, last = spans[best].tolist()
    start_char, end_char = int(windows.offsets[best, first, 0]), int(windows.offsets[best, last, 1])
    return context[start_char:end_char], start_char, end_char, float(scores[best])


# --- checks --------------------------------------------------------------------------------------


def _on_device(batch: dict, model) -> dict:
    """The batch's tensors on the model's device (a model on a GPU, a tokenizer's tensors on the CPU)."""
    device = next(model.parameters()).device
    return {name: value.to(device) for name, value in batch.items()}


def _require_tokenizer(tokenizer) -> None:
    if not isinstance(tokenizer, WordPieceTokenizer):
        raise TypeError(f"`tokenizer` must be a bc.WordPieceTokenizer, got {describe(tokenizer)}.")


def _require_words(words) -> None:
    if isinstance(words, str) or not isinstance(words, (list, tuple)) or not words:
        raise TypeError(f"each sentence must be a non-empty list of words (strings), got {describe(words)}.")
    if not all(isinstance(w, str) and w.strip() for w in words):
        raise TypeError(f"each word must be a non-empty string, got {describe(words)}.")


def _require_labelled_texts(name: str, examples, num_labels: int) -> tuple[list[str], list[int]]:
    """(texts, labels) of a non-empty list of (text, label) pairs with labels in 0..num_labels-1."""
    if not isinstance(examples, (list, tuple)) or not examples:
        raise ValueError(f"`{name}` is an empty batch: pass at least one (text, label) pair, got {describe(examples)}.")
    texts, labels = [], []
    for example in examples:
        if not (isinstance(example, (list, tuple)) and len(example) == 2 and isinstance(example[0], str)):
            raise TypeError(f"each of `{name}` must be a (text, label) pair, got {describe(example)}.")
        text, label = example
        if not is_int(label) or not 0 <= label < num_labels:
            raise ValueError(
                f"`{name}` holds the label {label!r} for {text[:40]!r}: labels are class indices 0..{num_labels - 1}."
            )
        texts.append(text)
        labels.append(label)
    return texts, labels
