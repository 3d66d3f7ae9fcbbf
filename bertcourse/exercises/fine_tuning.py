"""Exercises of notebook 10: ``align_word_labels`` and ``best_span``.

Their mistakes are the word-piece slips of fine-tuning: a word's label copied onto every piece (or
put on its last piece), special tokens labelled as words, labels read by piece position instead of
by word; an answer decoded from two separate argmaxes (its end may come before its start), without
a maximum length or one token too long, spilling into the question, a one-token answer refused, an
end returned one past the answer.
"""

from __future__ import annotations

import torch

from ..finetuning import align_word_labels, best_span
from ..heads import IGNORE_INDEX
from .random_inputs import _randn
from .records import Case, Exercise, Mistake

# --- align_word_labels ---------------------------------------------------------------------------


def _align_cases(g):
    return [
        Case("[CLS] w0 w1 w1 w2 [SEP]: word 1 in two pieces", ([None, 0, 1, 1, 2, None], [0, 1, 2])),
        Case(
            "word 0 in three pieces, then padding",
            ([None, 0, 0, 0, 1, 2, None, None, None], [1, 0, 2]),
            ("masked",),
        ),
        Case(
            "word 0 has no label (-100), words 1 and 3 in two pieces", ([None, 0, 1, 1, 2, 3, 3, None], [-100, 1, 2, 0])
        ),
        Case("every word one piece", ([None, 0, 1, 2, None], [2, 0, 1])),
        Case("truncated: word 2 did not fit", ([None, 0, 1, 1, None], [1, 2, 0])),
    ]


def _pieces_labelled(word_ids, word_labels, first_only, specials):
    labels, previous = [], None
    for word in word_ids:
        if word is None:
            labels.append(specials)
        elif first_only(word, previous):
            labels.append(word_labels[word])
        else:
            labels.append(IGNORE_INDEX)
        previous = word
    return torch.tensor(labels)


def _align_every_piece(word_ids, word_labels):
    return _pieces_labelled(word_ids, word_labels, lambda word, previous: True, IGNORE_INDEX)


def _align_last_piece(word_ids, word_labels):
    following = [*word_ids[1:], None]
    labels = [
        IGNORE_INDEX if word is None or word == after else word_labels[word]
        for word, after in zip(word_ids, following, strict=True)
    ]
    return torch.tensor(labels)


def _align_specials_labelled_o(word_ids, word_labels):
    return _pieces_labelled(word_ids, word_labels, lambda word, previous: word != previous, 0)


def _align_by_position(word_ids, word_labels):
    labels = [IGNORE_INDEX] * len(word_ids)
    for piece in range(1, len(word_ids)):
        if word_ids[piece] is not None and piece - 1 < len(word_labels):
            labels[piece] = word_labels[piece - 1]  # piece i read as word i - 1
    return torch.tensor(labels)


ALIGN_WORD_LABELS = Exercise(
    name="align_word_labels",
    reference=align_word_labels,
    prompt="your function receives `word_ids`, a list with one entry per word piece (the index of the word the "
    "piece comes from, or None for [CLS], [SEP] and padding), and `word_labels`, a list of ints, one label per "
    "word (-100 for a word without a label); it returns a long tensor (n_pieces,): each word's label on its "
    "first piece, and -100 on the word's other pieces and on every piece that is no word.",
    start="walk through `word_ids` keeping the previous entry: a piece starts a word when its id is not None "
    "and differs from the previous one.",
    make_cases=_align_cases,
    axes={"": ("pieces",)},
    notebook="10",
    mistakes=(
        Mistake(
            "the word's label on every one of its pieces",
            "only a word's first piece carries its label; give its other pieces -100, or a long word counts "
            "several times in the loss and one name is read back as several.",
            _align_every_piece,
        ),
        Mistake(
            "the label on the word's last piece",
            "label the *first* piece of each word (the piece whose word id differs from the previous piece's).",
            _align_last_piece,
        ),
        Mistake(
            "[CLS], [SEP] and padding labelled 0 (a real class)",
            "a piece that is no word (word id None) gets -100, so that the loss skips it.",
            _align_specials_labelled_o,
        ),
        Mistake(
            "labels read by piece position (piece i gets the label of word i - 1)",
            "look the label up by the piece's word id, `word_labels[word_ids[i]]`: after a word of two pieces, "
            "pieces and words no longer line up.",
            _align_by_position,
        ),
    ),
)

# --- best_span -----------------------------------------------------------------------------------


def _span_case(g, seq, question, max_len, plants, batch=None, empty_rows=()):
    """Random logits for [CLS] question [SEP] passage [SEP] with planted values (row, 'start'/'end', pos, value)."""
    shape = (seq,) if batch is None else (batch, seq)
    start, end = _randn(g, *shape), _randn(g, *shape)
    mask = torch.zeros(shape, dtype=torch.bool)
    mask[..., question + 2 : seq - 1] = True  # the passage: after [CLS] question [SEP], before the last [SEP]
    for row in empty_rows:
        mask[row] = False
    for row, which, position, value in plants:
        target = start if which == "start" else end
        if batch is None:
            target[position] = value
        else:
            target[row, position] = value
    return (start, end, mask, max_len)


def _span_cases(g):
    return [
        Case(
            "one input of 12 tokens (question 3), at most 4 tokens: the end's argmax lies before the best start",
            _span_case(g, 12, 3, 4, [(0, "start", 8, 4.0), (0, "end", 6, 5.0), (0, "end", 9, 3.5)]),
            ("unbatched",),
        ),
        Case(
            "a batch of 3 x 16 (question 4), at most 3 tokens: the question and a long span tempt",
            _span_case(
                g,
                16,
                4,
                3,
                [
                    (0, "start", 2, 9.0),
                    (0, "end", 3, 9.0),
                    (0, "start", 7, 3.0),
                    (0, "end", 8, 3.0),
                    (1, "start", 7, 4.0),
                    (1, "end", 11, 6.0),
                    (1, "end", 9, 3.0),
                    (2, "start", 10, 4.0),
                    (2, "end", 13, 4.5),
                    (2, "end", 12, 4.0),
                ],
                batch=3,
            ),
            ("batched",),
        ),
        Case(
            "one input of 10 tokens, at most 5 tokens: a one-token answer is best; the last [SEP] tempts the end",
            _span_case(g, 10, 2, 5, [(0, "start", 6, 6.0), (0, "end", 6, 6.0), (0, "end", 9, 8.0)]),
            ("unbatched",),
        ),
        Case(
            "a batch of 2 x 9, the second input has no passage token: its answer is [0, 0]",
            _span_case(g, 9, 2, 4, [(0, "start", 5, 4.0), (0, "end", 6, 4.0), (1, "start", 3, 5.0)], 2, (1,)),
            ("batched", "fully masked row"),
        ),
    ]


def _span_search(start_logits, end_logits, context_mask, valid_length, start_mask, end_mask):
    seq = start_logits.shape[-1]
    scores = start_logits[..., :, None] + end_logits[..., None, :]
    i = torch.arange(seq)
    length = i[None, :] - i[:, None] + 1
    valid = valid_length(length) & start_mask[..., :, None] & end_mask[..., None, :]
    best = scores.masked_fill(~valid, float("-inf")).flatten(-2).argmax(dim=-1)
    return torch.stack([best // seq, best % seq], dim=-1)


def _span_two_argmaxes(start_logits, end_logits, context_mask, max_answer_length):
    start = start_logits.masked_fill(~context_mask, float("-inf")).argmax(dim=-1)
    end = end_logits.masked_fill(~context_mask, float("-inf")).argmax(dim=-1)
    return torch.stack([start, end], dim=-1)


def _span_no_max_length(start_logits, end_logits, context_mask, max_answer_length):
    return _span_search(start_logits, end_logits, context_mask, lambda n: n >= 1, context_mask, context_mask)


def _span_one_token_too_long(start_logits, end_logits, context_mask, max_answer_length):
    return _span_search(
        start_logits,
        end_logits,
        context_mask,
        lambda n: (n >= 1) & (n <= max_answer_length + 1),
        context_mask,
        context_mask,
    )


def _span_question_allowed(start_logits, end_logits, context_mask, max_answer_length):
    anywhere = torch.ones_like(context_mask)
    return _span_search(
        start_logits, end_logits, context_mask, lambda n: (n >= 1) & (n <= max_answer_length), anywhere, anywhere
    )


def _span_end_not_masked(start_logits, end_logits, context_mask, max_answer_length):
    return _span_search(
        start_logits,
        end_logits,
        context_mask,
        lambda n: (n >= 1) & (n <= max_answer_length),
        context_mask,
        torch.ones_like(context_mask),
    )


def _span_one_token_refused(start_logits, end_logits, context_mask, max_answer_length):
    return _span_search(
        start_logits,
        end_logits,
        context_mask,
        lambda n: (n >= 2) & (n <= max_answer_length),
        context_mask,
        context_mask,
    )


def _span_end_exclusive(start_logits, end_logits, context_mask, max_answer_length):
    spans = best_span(start_logits, end_logits, context_mask, max_answer_length)
    return spans + torch.tensor([0, 1])


BEST_SPAN = Exercise(
    name="best_span",
    reference=best_span,
    prompt="your function receives `start_logits` and `end_logits`, float tensors (..., seq), `context_mask`, a "
    "bool tensor (..., seq) True at the passage's tokens, and `max_answer_length`, an int; it returns a long "
    "tensor (..., 2): for each input the [start, end] (end included) of the span with the highest "
    "start_logit + end_logit among the valid ones: start <= end, at most `max_answer_length` tokens, both ends "
    "in the passage. An input without a passage token gets [0, 0].",
    start="`scores = start_logits[..., :, None] + end_logits[..., None, :]` scores every span (i, j); set the "
    "invalid ones to -inf and take the argmax of `scores.flatten(-2)`.",
    make_cases=_span_cases,
    axes={"": ("[start, end]",)},
    notebook="10",
    mistakes=(
        Mistake(
            "two separate argmaxes (the end may come before the start)",
            "score every span (i, j) with start_logits[i] + end_logits[j] and keep only j >= i: the best end "
            "alone may lie before the best start.",
            _span_two_argmaxes,
        ),
        Mistake(
            "no maximum answer length",
            "a span (i, j) has j - i + 1 tokens; spans longer than `max_answer_length` are not answers.",
            _span_no_max_length,
        ),
        Mistake(
            "answers one token longer than `max_answer_length`",
            "a span (i, j) has j - i + 1 tokens, not j - i: keep j - i + 1 <= max_answer_length.",
            _span_one_token_too_long,
        ),
        Mistake(
            "spans in the question (or on [CLS] and [SEP])",
            "both ends must be passage tokens: `context_mask[..., :, None] & context_mask[..., None, :]`.",
            _span_question_allowed,
        ),
        Mistake(
            "only the start kept inside the passage",
            "the end must be a passage token too, or an answer can run into the final [SEP].",
            _span_end_not_masked,
        ),
        Mistake(
            "a one-token answer refused (start < end)",
            "start == end is a valid answer of one token: keep j >= i, not j > i.",
            _span_one_token_refused,
        ),
        Mistake(
            "the end one past the answer",
            "here `end` is the answer's last token (included), as Hugging Face's `end_positions`.",
            _span_end_exclusive,
        ),
    ),
)
