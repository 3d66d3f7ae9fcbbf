"""Answer spans: from start and end logits to an answer, and the who-questions task of notebook 10.

- **start and end logits -> an answer** (``best_span``): not the two argmaxes (the end may come
  before the start), but the best-scoring span with start <= end, at most ``max_answer_length``
  tokens, both ends inside the passage (never in the question, never [CLS]).
- **who-questions** (``who_questions``): no labelled question-answering data ships with the course's
  packages, so the task is derived from the plot summaries. A sentence of a summary that opens with a
  name (a word that is capitalised elsewhere in mid-sentence of the same summary) and goes on with a
  lowercase word becomes a question, "Who" + the rest of the sentence + "?", and the answer is that
  name, in the summary. The model must find the sentence the question paraphrases and point at its
  subject: the machinery of extractive QA (a question and a passage, windows with a stride, start and
  end logits, a decoded span), on a task far easier than reading comprehension.

``question_windows`` cuts a passage into windows that each fit the model beside the question
(``long_inputs.window_spans``: ``window`` counts the passage's tokens in a window, ``stride`` is how
far a window moves), and maps the answer to token positions in each window (position 0, the [CLS]
token, where the window does not hold the whole answer: Hugging Face's convention for SQuAD);
``training_windows`` and ``WindowCollator`` turn every window of every question into training rows,
and ``decode_answer`` takes the best valid span over all the windows of a passage. Character offsets
come from ``WordPieceTokenizer.encodings``; ``answer_f1`` is SQuAD's word-overlap score.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter

import torch

from .._validation import (
    counted,
    describe,
    is_int,
    require_float_tensor,
    require_positive_int,
    require_tensor,
)
from ..corpus import split_sentences
from ..long_inputs.windows import check_window, window_spans
from ..tokenizer import WordPieceTokenizer
from .checks import require_tokenizer
from .tagging import name_tagging_examples


def best_span(
    start_logits: torch.Tensor, end_logits: torch.Tensor, context_mask: torch.Tensor, max_answer_length: int = 30
) -> torch.Tensor:
    """The best valid answer span of each input: a long tensor (..., 2) of [start, end] token indices, end included.

    start_logits, end_logits: (..., seq); context_mask: (..., seq) bool, True at the passage's tokens (not
    the question, not [CLS], [SEP] or padding). A span is valid when start <= end, it has at most
    ``max_answer_length`` tokens and both ends are in the passage; its score is start_logit + end_logit.
    An input without any passage token gets [0, 0], the [CLS] token: "no answer here".
    """
    require_float_tensor("start_logits", start_logits, min_dim=1)
    require_float_tensor("end_logits", end_logits, min_dim=1, like=start_logits, like_name="`start_logits`")
    require_tensor("context_mask", context_mask)
    for name, tensor in (("end_logits", end_logits), ("context_mask", context_mask)):
        if tensor.shape != start_logits.shape:
            raise ValueError(
                f"`{name}` must have the shape of `start_logits` {tuple(start_logits.shape)}, got {describe(tensor)}."
            )
    if context_mask.dtype != torch.bool:
        raise TypeError(f"`context_mask` must be a bool tensor (True = a passage token), got {describe(context_mask)}.")
    require_positive_int("max_answer_length", max_answer_length)
    return _best_span(start_logits, end_logits, context_mask, max_answer_length)


def _best_span(start_logits, end_logits, context_mask, max_answer_length):
    seq = start_logits.shape[-1]
    scores = start_logits[..., :, None] + end_logits[..., None, :]  # (..., seq, seq): span (start i, end j)
    i = torch.arange(seq, device=start_logits.device)  # (seq,)
    length = i[None, :] - i[:, None] + 1  # (seq, seq): j - i + 1 tokens
    valid = (length >= 1) & (length <= max_answer_length)  # (seq, seq): start <= end, not too long
    valid = valid & context_mask[..., :, None] & context_mask[..., None, :]  # (..., seq, seq): both in the passage
    scores = scores.masked_fill(~valid, float("-inf"))  # (..., seq, seq)
    best = scores.flatten(-2).argmax(dim=-1)  # (...,): the best span's flat index; 0 ([CLS]) if none is valid
    return torch.stack([best // seq, best % seq], dim=-1)  # (..., 2): [start, end]


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
    require_tokenizer(tokenizer)
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
        require_tokenizer(tokenizer)
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
