"""Exercises of notebook 09: ``mlm_corrupt``, ``truncate_pair`` and ``mlm_accuracy``.

Their mistakes are the slips of pretraining data: labels on every token (the loss over all tokens),
0 instead of -100, labels taken after the corruption, every selected token masked, the 80/10/10
shares read backwards, random tokens where nothing was selected; a truncation that forgets the three
special tokens, cuts one segment only, the wrong end or the wrong segment on a tie; an accuracy over
every position instead of the selected ones.
"""

from __future__ import annotations

import torch

from ..pretraining import IGNORE_INDEX, mlm_accuracy, mlm_corrupt, truncate_pair
from .random_inputs import _randn
from .records import Case, Exercise, Mistake

MASK_ID = 4

# --- mlm_corrupt ---------------------------------------------------------------------------------


def _corrupt_case(g, shape, share=0.5):
    input_ids = torch.randint(5, 100, shape, generator=g)
    selected = torch.rand(shape, generator=g) < share
    draws = torch.rand(shape, generator=g)
    random_ids = torch.randint(5, 100, shape, generator=g)
    return (input_ids, selected, draws, random_ids, MASK_ID)


def _corrupt_cases(g):
    every_branch = _corrupt_case(g, (1, 12))
    every_branch[1][:] = True
    every_branch[2][0] = torch.tensor([0.05, 0.3, 0.79, 0.8, 0.85, 0.89, 0.9, 0.95, 0.99, 0.1, 0.15, 0.5])
    return [
        Case("one sentence of 12 tokens, all selected, draws in every range", every_branch, ("unbatched",)),
        Case("a batch of 3 sentences of 10 tokens, about half selected", _corrupt_case(g, (3, 10)), ("batched",)),
        Case("a batch of 2 sentences of 16 tokens, about 15% selected", _corrupt_case(g, (2, 16), 0.15), ("batched",)),
    ]


def _corrupt_labels_everywhere(input_ids, selected, draws, random_ids, mask_token_id):
    corrupted, _ = mlm_corrupt(input_ids, selected, draws, random_ids, mask_token_id)
    return corrupted, input_ids.clone()


def _corrupt_labels_zero(input_ids, selected, draws, random_ids, mask_token_id):
    corrupted, _ = mlm_corrupt(input_ids, selected, draws, random_ids, mask_token_id)
    return corrupted, torch.where(selected, input_ids, 0)


def _corrupt_labels_after_corruption(input_ids, selected, draws, random_ids, mask_token_id):
    corrupted, _ = mlm_corrupt(input_ids, selected, draws, random_ids, mask_token_id)
    return corrupted, torch.where(selected, corrupted, IGNORE_INDEX)


def _corrupt_always_mask(input_ids, selected, draws, random_ids, mask_token_id):
    return torch.where(selected, mask_token_id, input_ids), torch.where(selected, input_ids, IGNORE_INDEX)


def _corrupt_shares_reversed(input_ids, selected, draws, random_ids, mask_token_id):
    corrupted = torch.where(selected & (draws < 0.1), mask_token_id, input_ids)
    corrupted = torch.where(selected & (draws >= 0.1) & (draws < 0.2), random_ids, corrupted)
    return corrupted, torch.where(selected, input_ids, IGNORE_INDEX)


def _corrupt_random_where_not_selected(input_ids, selected, draws, random_ids, mask_token_id):
    corrupted = torch.where(selected & (draws < 0.8), mask_token_id, input_ids)
    corrupted = torch.where((draws >= 0.8) & (draws < 0.9), random_ids, corrupted)
    return corrupted, torch.where(selected, input_ids, IGNORE_INDEX)


MLM_CORRUPT = Exercise(
    name="mlm_corrupt",
    reference=mlm_corrupt,
    prompt="your function receives `input_ids` (long), `selected` (bool, True = this token is to be predicted), "
    "`draws` (floats uniform in [0, 1)), `random_ids` (long), all of one shape, and an int `mask_token_id`. It "
    "returns (corrupted ids, labels): a selected token becomes `mask_token_id` where its draw is below 0.8, its "
    "`random_ids` entry where the draw is from 0.8 to 0.9, and stays itself above; unselected tokens stay "
    "themselves. `labels` holds the original id at selected positions and -100 everywhere else.",
    start="`labels = torch.where(selected, input_ids, -100)`; then one `torch.where` for [MASK] and one for the "
    "random tokens, each combining `selected` with a condition on `draws`.",
    make_cases=_corrupt_cases,
    outputs=("input_ids", "labels"),
    notebook="09",
    mistakes=(
        Mistake(
            "labels on every token (the loss over all tokens)",
            "label only the selected tokens and put -100 everywhere else: otherwise 85% of the loss is copying "
            "tokens the model can see.",
            _corrupt_labels_everywhere,
        ),
        Mistake(
            "0 as the label of unselected tokens",
            "the loss skips the label -100 (`ignore_index`); 0 is a real token id ([PAD]) it would learn to predict.",
            _corrupt_labels_zero,
        ),
        Mistake(
            "labels taken after the corruption",
            "the label is what the token *was*, `input_ids`, not what the model sees ([MASK] or a random token).",
            _corrupt_labels_after_corruption,
        ),
        Mistake(
            "every selected token replaced by [MASK]",
            "only 80% become [MASK]; 10% become the random token and 10% stay, so the model cannot learn that "
            "only [MASK] positions matter.",
            _corrupt_always_mask,
        ),
        Mistake(
            "the shares reversed (10% [MASK], 80% unchanged)",
            "[MASK] where the draw is below 0.8, a random token from 0.8 to 0.9, unchanged from 0.9.",
            _corrupt_shares_reversed,
        ),
        Mistake(
            "random tokens where nothing was selected",
            "combine every condition on `draws` with `selected`: unselected tokens are shown as they are.",
            _corrupt_random_where_not_selected,
        ),
    ),
)

# --- truncate_pair -------------------------------------------------------------------------------


def _pair(g, len_a, len_b, max_length):
    return (torch.randint(5, 100, (len_a,), generator=g), torch.randint(5, 100, (len_b,), generator=g), max_length)


def _truncate_cases(g):
    return [
        Case("A of 10 tokens, B of 4, max_length 12", _pair(g, 10, 4, 12)),
        Case("A of 3 tokens, B of 12, max_length 13", _pair(g, 3, 12, 13)),
        Case("A and B of 7 tokens each, max_length 14", _pair(g, 7, 7, 14)),
        Case("A of 9 tokens, B of 8, max_length 11", _pair(g, 9, 8, 11)),
        Case("A of 5 tokens, B of 6, max_length 20: nothing to cut", _pair(g, 5, 6, 20)),
    ]


def _longest_first(a, b, budget, a_on_tie=False):
    len_a, len_b = len(a), len(b)
    while len_a + len_b > budget:
        if len_a > len_b or (a_on_tie and len_a == len_b):
            len_a -= 1
        else:
            len_b -= 1
    return len_a, len_b


def _truncate_specials_forgotten(a, b, max_length):
    len_a, len_b = _longest_first(a, b, max_length)
    return a[:len_a], b[:len_b]


def _truncate_one_sep(a, b, max_length):
    len_a, len_b = _longest_first(a, b, max_length - 2)
    return a[:len_a], b[:len_b]


def _truncate_a_first(a, b, max_length):
    len_a = max(0, min(len(a), max_length - 3 - len(b)))
    len_b = min(len(b), max_length - 3 - len_a)
    return a[:len_a], b[:len_b]


def _truncate_b_first(a, b, max_length):
    len_b = max(0, min(len(b), max_length - 3 - len(a)))
    len_a = min(len(a), max_length - 3 - len_b)
    return a[:len_a], b[:len_b]


def _truncate_the_starts(a, b, max_length):
    len_a, len_b = _longest_first(a, b, max_length - 3)
    return a[len(a) - len_a :], b[len(b) - len_b :]


def _truncate_a_on_a_tie(a, b, max_length):
    len_a, len_b = _longest_first(a, b, max_length - 3, a_on_tie=True)
    return a[:len_a], b[:len_b]


def _truncate_halves(a, b, max_length):
    budget = max_length - 3
    if len(a) + len(b) <= budget:
        return a, b
    return a[: budget // 2], b[: budget - budget // 2]


TRUNCATE_PAIR = Exercise(
    name="truncate_pair",
    reference=truncate_pair,
    prompt="your function receives two 1-D long tensors `a` and `b` (the ids of sentences A and B, without "
    "special tokens) and an int `max_length`; it returns (a, b) cut so that `[CLS] a [SEP] b [SEP]` has at most "
    "`max_length` tokens: one token at a time, remove the last token of the longer one (of b when they are "
    "equally long).",
    start="count the room left for a and b, `max_length - 3`; keep two lengths and lower one of them in a "
    "`while` loop; return `a[:len_a], b[:len_b]`.",
    make_cases=_truncate_cases,
    outputs=("a", "b"),
    notebook="09",
    mistakes=(
        Mistake(
            "the three special tokens forgotten",
            "[CLS] and a [SEP] after each sentence take 3 of the `max_length` places: a and b share `max_length - 3`.",
            _truncate_specials_forgotten,
        ),
        Mistake(
            "room for only two special tokens",
            "a pair has three: `[CLS] a [SEP] b [SEP]`, so a and b share `max_length - 3` places.",
            _truncate_one_sep,
        ),
        Mistake(
            "A cut first, B only when A is gone",
            "cut the *longer* sentence, one token at a time, so that neither is cut to nothing while the other "
            "stays long.",
            _truncate_a_first,
        ),
        Mistake(
            "B cut first, A only when B is gone",
            "cut the *longer* sentence, one token at a time: a short B keeps its tokens while a long A is cut.",
            _truncate_b_first,
        ),
        Mistake(
            "the starts cut instead of the ends",
            "keep the beginnings, `a[:len_a]`: the end of A is what leads into B.",
            _truncate_the_starts,
        ),
        Mistake(
            "A cut on a tie",
            "when both are equally long, BERT's rule cuts B (`if len_a > len_b: cut a, else: cut b`).",
            _truncate_a_on_a_tie,
        ),
        Mistake(
            "half of the room given to each sentence",
            "a short sentence keeps all its tokens; only the longer one gives up tokens, one at a time.",
            _truncate_halves,
        ),
    ),
)

# --- mlm_accuracy --------------------------------------------------------------------------------


def _accuracy_case(g, batch, seq, vocab, share=0.4):
    logits = _randn(g, batch, seq, vocab)  # (batch, seq, vocab)
    labels = torch.randint(0, vocab, (batch, seq), generator=g)
    right = torch.rand(batch, seq, generator=g) < 0.5
    labels = torch.where(right, logits.argmax(dim=-1), labels)  # about half of them predicted right
    selected = torch.rand(batch, seq, generator=g) < share
    return (logits, torch.where(selected, labels, IGNORE_INDEX))


def _accuracy_cases(g):
    return [
        Case("a batch of 2 x 8 tokens, vocabulary of 7", _accuracy_case(g, 2, 8, 7), ("batched",)),
        Case("one sentence of 12 tokens, vocabulary of 5", _accuracy_case(g, 1, 12, 5), ("batched",)),
        Case("a batch of 3 x 10 tokens, vocabulary of 30, 15% selected", _accuracy_case(g, 3, 10, 30, 0.15)),
    ]


def _accuracy_over_every_position(prediction_logits, labels):
    return (prediction_logits.argmax(dim=-1) == labels).float().mean()


def _accuracy_ignored_counted_right(prediction_logits, labels):
    return ((prediction_logits.argmax(dim=-1) == labels) | (labels == IGNORE_INDEX)).float().mean()


def _accuracy_a_count(prediction_logits, labels):
    selected = labels != IGNORE_INDEX
    return (prediction_logits.argmax(dim=-1) == labels)[selected].float().sum()


MLM_ACCURACY = Exercise(
    name="mlm_accuracy",
    reference=mlm_accuracy,
    prompt="your function receives `prediction_logits` (batch, seq, vocab) and `labels` (batch, seq): a token id "
    "at the selected positions, -100 elsewhere. It returns a 0-d float tensor: the share of selected positions "
    "whose highest logit is the label.",
    start="`selected = labels != -100`; `correct = prediction_logits.argmax(dim=-1) == labels`; then average "
    "`correct` over the selected positions only.",
    make_cases=_accuracy_cases,
    notebook="09",
    mistakes=(
        Mistake(
            "an average over every position",
            "unselected positions (label -100) have no answer: take `correct[selected]` before the mean.",
            _accuracy_over_every_position,
        ),
        Mistake(
            "unselected positions counted as right",
            "the positions with label -100 are not predicted at all: leave them out, do not count them as right.",
            _accuracy_ignored_counted_right,
        ),
        Mistake(
            "a count instead of a share",
            "divide by the number of selected positions: `.float().mean()` over `correct[selected]`.",
            _accuracy_a_count,
        ),
    ),
)
