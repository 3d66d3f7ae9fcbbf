"""Exercises of notebook 09: ``mlm_corrupt`` (BERT's own objective, asked with ``use`` so that the live run trains
with the learner's masking), ``masked_only_accuracy`` (its stretch exercise), and the exercises it asked before.

Each combines ideas the notebook shows without giving their code. Their mistakes are the slips of MLM
masking and metrics: labels on every token, 0 instead of -100, labels taken after the corruption, every
selected token masked, the 80/10/10 shares read backwards, random tokens where nothing was selected; an
accuracy on every selected position (a model scores there by copying the token it sees), the prediction
compared with the input, a mean over every position, the argmax over the wrong axis, a count or a Python
float, 0 instead of NaN with no [MASK]. Messages for the wrong answers nobody catalogued say which positions
a wrong accuracy counted (``explain``).

The exercises notebook 09 asked for before, ``truncate_pair``, ``mlm_accuracy``, ``lr_multiplier`` and
``whole_word_mask``, stay checkable by name (``registry.RETIRED``): a truncation that forgets the three
special tokens, cuts one segment only, the wrong end or the wrong segment on a tie; an accuracy over every
position instead of the selected ones; a schedule with no warm-up, a warm-up one step ahead or one step
long, a decay measured from step 0 or over total_steps, a factor below 0 past the end, a division by zero
without warm-up, a cosine; whole-word masking that stops at the first piece or the next one, leaks into the
next word, carries a word across rows, or selects the pieces of unselected words.
"""

from __future__ import annotations

import math

import torch

from ..pretraining import IGNORE_INDEX, masked_only_accuracy, mlm_accuracy, mlm_corrupt, truncate_pair, whole_word_mask
from ..pretraining.metrics import selected_kinds
from ..training import lr_multiplier
from .diagnosis import equals_one_of
from .random_inputs import seeded_randn
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
    # 0.8 itself is in the random range whether the draw is compared as float32 (torch) or as a Python float; a
    # draw of float32(0.9) is not (0.9f < 0.9 as Python floats, not as float32), so the draw past 0.9 is the next
    # float32 above, and both ways of comparing agree on every draw
    every_branch[2][0] = torch.tensor([0.05, 0.3, 0.79, 0.8, 0.85, 0.89, 0.9000001, 0.95, 0.99, 0.1, 0.15, 0.5])
    single = tuple(arg[0] if isinstance(arg, torch.Tensor) else arg for arg in every_branch)  # (12,): no batch axis
    twice = tuple(arg.repeat(2, 1) if isinstance(arg, torch.Tensor) else arg for arg in every_branch)  # (2, 12)
    return [
        Case("one sentence of 12 tokens, all selected, draws in every range", every_branch, ("batched",)),
        Case("the same sentence without a batch axis, (12,)", single, ("unbatched",)),
        Case("the same sentence twice, as a batch of 2", twice, ("batched",)),
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


def _corrupt_explain(case, values, expected):
    """The first wrong position of either output: whether it is selected, its draw, what it gets, what yours is."""
    input_ids, selected, draws, random_ids, mask_token_id = case.args
    if not all(isinstance(v, torch.Tensor) and v.shape == input_ids.shape for v in values):
        return None
    for name, mine, right in zip(("input_ids", "labels"), values, expected, strict=True):
        wrong = (mine != right).nonzero()
        if not len(wrong):
            continue
        where = tuple(int(i) for i in wrong[0])
        index = list(where) if len(where) > 1 else where[0]
        draw, yours, want = float(draws[where]), int(mine[where]), int(right[where])
        if not bool(selected[where]):
            state = "is not selected"
        else:
            kind = (
                "below 0.8: [MASK]"
                if draw < 0.8
                else ("from 0.8 to 0.9: its random id" if draw < 0.9 else "0.9 or above: it stays itself")
            )
            state = f"is selected, with draw {draw:.7g} ({kind})"
        seen = {
            int(mask_token_id): f"the [MASK] id {int(mask_token_id)}",
            int(random_ids[where]): f"its random id {int(random_ids[where])}",
            int(input_ids[where]): f"its own token {int(input_ids[where])}",
            IGNORE_INDEX: "-100",
        }
        return (
            f"Position {index} {state}: its `{name}` entry is {seen.get(want, want)}; yours is "
            f"{seen.get(yours, yours)}."
        )
    return None


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
    explain_outputs=_corrupt_explain,
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


def _truncate_explain(case, values, expected):
    """What the learner's cut pair is: too long, room left over, the cuts shared otherwise, or the wrong end cut."""
    a, b, max_length = case.args
    if not all(isinstance(v, torch.Tensor) and v.dim() == 1 for v in values):
        return None
    (mine_a, mine_b), (right_a, right_b) = values, expected
    kept, right = (len(mine_a), len(mine_b)), (len(right_a), len(right_b))
    total = kept[0] + kept[1] + 3
    if total > max_length:
        return (
            f"With yours, `[CLS] a [SEP] b [SEP]` has {kept[0]} + {kept[1]} + 3 = {total} tokens, more than "
            f"max_length = {max_length}."
        )
    if total < right[0] + right[1] + 3:
        return (
            f"Yours keep {kept[0]} + {kept[1]} tokens, but {right[0] + right[1]} fit (max_length {max_length} "
            "minus the 3 special tokens): stop cutting as soon as the pair fits."
        )
    if kept != right:
        return (
            f"The total is right, but you kept {kept[0]} of a's {len(a)} tokens and {kept[1]} of b's {len(b)}; "
            f"longest first keeps {right[0]} and {right[1]}: one token at a time, the one that is longer *now* "
            "loses its last token (b on a tie), so the two end up as equal as the cut allows."
        )
    for name, mine, original, n in (("a", mine_a, a, kept[0]), ("b", mine_b, b, kept[1])):
        if n and not torch.equal(mine, original[:n]):
            if torch.equal(mine, original[len(original) - n :]):
                return f"`{name}` is its last {n} tokens: cut at the end, keep the first ones (`{name}[:len_{name}]`)."
            return f"`{name}` is not the first {n} tokens of the input `{name}`: keep `{name}[:len_{name}]`."
    return None


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
    explain_outputs=_truncate_explain,
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
            (
                "this exercise asks for the deterministic rule that keeps the beginnings, `a[:len_a]` "
                "(fine-tuning's `longest_first`); BERT's pretraining script cuts the front or the back at random."
            ),
            _truncate_the_starts,
        ),
        Mistake(
            "A cut on a tie",
            "when both are equally long, the course's rule cuts B (`if len_a > len_b: cut a, else: cut b`).",
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
    logits = seeded_randn(g, batch, seq, vocab)  # (batch, seq, vocab)
    labels = torch.randint(0, vocab, (batch, seq), generator=g)
    right = torch.rand(batch, seq, generator=g) < 0.5
    labels = torch.where(right, logits.argmax(dim=-1), labels)  # about half of them predicted right
    selected = torch.rand(batch, seq, generator=g) < share
    return (logits, torch.where(selected, labels, IGNORE_INDEX))


def _accuracy_with_id_zero(g, batch, seq, vocab):
    """An accuracy case whose labels hold token id 0 (an ordinary token in such a vocabulary), predicted right."""
    logits, labels = _accuracy_case(g, batch, seq, vocab, share=0.5)
    zero = torch.zeros(batch, seq, dtype=torch.bool)
    zero[:, 1::3] = True  # some positions, selected here, whose original token is id 0
    logits = logits + 8.0 * zero[..., None] * torch.nn.functional.one_hot(torch.zeros_like(labels), vocab)
    return (logits, torch.where(zero, 0, labels))


def _accuracy_cases(g):
    return [
        Case("a batch of 2 x 8 tokens, vocabulary of 7", _accuracy_case(g, 2, 8, 7), ("batched",)),
        Case("one sentence of 12 tokens, vocabulary of 5", _accuracy_case(g, 1, 12, 5), ("batched",)),
        Case("a batch of 3 x 10 tokens, vocabulary of 30, 15% selected", _accuracy_case(g, 3, 10, 30, 0.15)),
        Case(
            "a batch of 2 x 9 tokens, vocabulary of 6: token id 0 is the label of some selected positions",
            _accuracy_with_id_zero(g, 2, 9, 6),
        ),
    ]


def _accuracy_over_every_position(prediction_logits, labels):
    return (prediction_logits.argmax(dim=-1) == labels).float().mean()


def _accuracy_ignored_counted_right(prediction_logits, labels):
    return ((prediction_logits.argmax(dim=-1) == labels) | (labels == IGNORE_INDEX)).float().mean()


def _accuracy_positive_labels(prediction_logits, labels):
    selected = labels > 0
    return (prediction_logits.argmax(dim=-1) == labels)[selected].float().mean()


def _accuracy_a_count(prediction_logits, labels):
    selected = labels != IGNORE_INDEX
    return (prediction_logits.argmax(dim=-1) == labels)[selected].float().sum()


def _accuracy_explain(case, value, expected):
    """Which other number the learner's accuracy is: the label's probability, a mean of sentences, a top-2 hit."""
    logits, labels = case.args
    selected = labels != IGNORE_INDEX
    right = logits.argmax(dim=-1) == labels  # (batch, seq)
    label_ids = labels.clamp(min=0)[..., None]
    rows = [right[b][selected[b]].float().mean() for b in range(len(labels)) if bool(selected[b].any())]
    return equals_one_of(
        value,
        expected,
        (
            (
                "the mean probability of the label: the accuracy counts the positions whose *highest* logit is it",
                lambda: logits.softmax(dim=-1).gather(-1, label_ids)[..., 0][selected].mean(),
            ),
            (
                "the mean of each sentence's own accuracy: average over the selected positions of the whole batch "
                "at once",
                lambda: torch.stack(rows).mean(),
            ),
            (
                "the share of selected positions whose label is among the two highest logits: take the argmax alone",
                lambda: (logits.topk(2, dim=-1).indices == labels[..., None]).any(dim=-1)[selected].float().mean(),
            ),
        ),
    )


MLM_ACCURACY = Exercise(
    name="mlm_accuracy",
    reference=mlm_accuracy,
    prompt="your function receives `prediction_logits` (batch, seq, vocab) and `labels` (batch, seq): a token id "
    "at the selected positions, -100 elsewhere. It returns a 0-d float tensor: the share of selected positions "
    "whose highest logit is the label.",
    start="`selected = labels != -100`; `correct = prediction_logits.argmax(dim=-1) == labels`; then average "
    "`correct` over the selected positions only.",
    make_cases=_accuracy_cases,
    explain=_accuracy_explain,
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
        Mistake(
            "the selected positions taken as `labels > 0`",
            "token id 0 is a token like any other, and a label can be 0: the positions to leave out are those "
            "labelled -100, so select `labels != -100`.",
            _accuracy_positive_labels,
        ),
    ),
)


# --- masked_only_accuracy ------------------------------------------------------------------------


def _masked_case(g, batch, seq, vocab, mask_token_id=MASK_ID, kinds=(0.6, 0.2, 0.2), mask_last=False):
    """A batch as the collator makes it, and a model that copies the token it sees and guesses at [MASK].

    ``kinds`` are the shares of the selected positions that show [MASK], a random token and the token kept;
    every [MASK] in ``input_ids`` is at a selected position, as in real batches. The ordinary tokens are the
    ids above [MASK] and the other special tokens or, with ``mask_last`` (RoBERTa's <mask> is its last id), every
    id below [MASK], id 0 among them and planted at every other position.
    """
    first, end = (0, mask_token_id) if mask_last else (mask_token_id + 1, vocab)  # the ordinary ids: [first, end)
    text = torch.randint(first, end, (batch, seq), generator=g)  # (batch, seq) the original tokens
    if mask_last:
        text[:, ::2] = 0
    selected = torch.rand(batch, seq, generator=g) < 0.5
    draws = torch.rand(batch, seq, generator=g)
    shows_mask = selected & (draws < kinds[0])
    shows_random = selected & (draws >= kinds[0]) & (draws < kinds[0] + kinds[1])
    other = first + (text - first + torch.randint(1, end - first, (batch, seq), generator=g)) % (end - first)
    input_ids = torch.where(shows_mask, mask_token_id, torch.where(shows_random, other, text))
    guess = torch.randint(first, end, (batch, seq), generator=g)  # a wrong or lucky guess at [MASK]
    guess = torch.where(torch.rand(batch, seq, generator=g) < 0.3, mask_token_id, guess)  # or [MASK] itself
    right = torch.rand(batch, seq, generator=g) < 0.5
    prediction = torch.where(shows_mask, torch.where(right, text, guess), input_ids)  # elsewhere: copy what it sees
    logits = seeded_randn(g, batch, seq, vocab)
    logits = logits + 6.0 * torch.nn.functional.one_hot(prediction, vocab)  # (batch, seq, vocab)
    labels = torch.where(selected, text, IGNORE_INDEX)
    return (logits, labels, input_ids, mask_token_id)


def _masked_cases(g):
    return [
        Case(
            "a batch of 2 x 10 tokens, vocabulary of 12: [MASK], random and kept positions, a model that copies "
            "what it sees",
            _masked_case(g, 2, 10, 12),
        ),
        Case(
            "the same sizes, every selected position shows [MASK] (none random, none kept)",
            _masked_case(g, 2, 10, 12, kinds=(1.0, 0.0, 0.0)),
        ),
        Case(
            "the same sizes, no position shows [MASK] (the selected ones are random or kept): NaN",
            _masked_case(g, 2, 10, 12, kinds=(0.0, 0.5, 0.5)),
        ),
        Case("the same sizes, [MASK] is id 103 in a vocabulary of 120", _masked_case(g, 2, 10, 120, 103)),
        Case(
            "the same sizes, [MASK] is the last id (11), as RoBERTa's <mask>: id 0 is an ordinary token",
            _masked_case(g, 2, 10, 12, 11, mask_last=True),
        ),
        Case("one sentence of 10 tokens, vocabulary of 12", _masked_case(g, 1, 10, 12)),
        Case(
            "a batch of 2 x 9 tokens, vocabulary of 9: as many positions as token ids",
            _masked_case(g, 2, 9, 9),
        ),
    ]


def _masked_positions(labels, input_ids, mask_token_id):
    return (labels != IGNORE_INDEX) & (input_ids == mask_token_id)


def _masked_all_selected(prediction_logits, labels, input_ids, mask_token_id):
    return mlm_accuracy(prediction_logits, labels)


def _masked_against_input_ids(prediction_logits, labels, input_ids, mask_token_id):
    shows_mask = _masked_positions(labels, input_ids, mask_token_id)
    return (prediction_logits.argmax(dim=-1) == input_ids)[shows_mask].float().mean()


def _masked_over_every_position(prediction_logits, labels, input_ids, mask_token_id):
    shows_mask = _masked_positions(labels, input_ids, mask_token_id)
    return ((prediction_logits.argmax(dim=-1) == labels) & shows_mask).float().mean()


def _masked_argmax_over_positions(prediction_logits, labels, input_ids, mask_token_id):
    shows_mask = _masked_positions(labels, input_ids, mask_token_id)
    return (prediction_logits.argmax(dim=1) == labels)[shows_mask].float().mean()


def _masked_python_float(prediction_logits, labels, input_ids, mask_token_id):
    return masked_only_accuracy(prediction_logits, labels, input_ids, mask_token_id).item()


def _masked_a_count(prediction_logits, labels, input_ids, mask_token_id):
    shows_mask = _masked_positions(labels, input_ids, mask_token_id)
    return (prediction_logits.argmax(dim=-1) == labels)[shows_mask].sum()


def _masked_zero_without_mask(prediction_logits, labels, input_ids, mask_token_id):
    shows_mask = _masked_positions(labels, input_ids, mask_token_id)
    hits = ((prediction_logits.argmax(dim=-1) == labels) & shows_mask).sum()
    return hits / shows_mask.sum().clamp(min=1)


def _masked_positive_labels(prediction_logits, labels, input_ids, mask_token_id):
    shows_mask = (labels > 0) & (input_ids == mask_token_id)
    return (prediction_logits.argmax(dim=-1) == labels)[shows_mask].float().mean()


def _masked_explain(case, value, expected):
    """What the learner's number is, among the shares a slip gives, or else what this case holds."""
    logits, labels, input_ids, mask_token_id = case.args
    kinds = selected_kinds(input_ids, labels, mask_token_id)
    right = logits.argmax(dim=-1) == labels  # (batch, seq)
    selected = labels != IGNORE_INDEX
    shows_mask = kinds["mask"]
    rows = [right[b][shows_mask[b]].float().mean() for b in range(len(labels))]
    candidates = (
        ("the accuracy on the [MASK] and the kept positions together", right[shows_mask | kinds["kept"]]),
        ("the accuracy on the [MASK] and the random positions together", right[shows_mask | kinds["random"]]),
        ("the accuracy on the kept positions", right[kinds["kept"]]),
        ("the accuracy on the random positions", right[kinds["random"]]),
        ("the accuracy on the positions that show a token (random and kept)", right[kinds["random"] | kinds["kept"]]),
        ("the accuracy over every position, unselected ones (label -100) included", right.flatten()),
    )
    values = [(text, chosen.float().mean()) for text, chosen in candidates]
    values += [
        (
            "the right [MASK] predictions divided by the number of *selected* positions",
            (right & shows_mask).sum() / selected.sum(),
        ),
        ("one minus the accuracy: the share predicted wrong", 1 - expected),
        (
            "the mean of each sentence's own accuracy: average over the [MASK] positions of the whole batch at once",
            torch.stack(rows).nanmean(),
        ),
    ]
    mine = _one_number(value)
    if mine is None:
        return None
    named = [] if mine in (0.0, 1.0) or math.isnan(mine) else values  # 0 and 1 are what too many slips give
    for text, candidate in named:
        if not math.isclose(float(candidate), float(expected), abs_tol=1e-6) and math.isclose(
            mine, float(candidate), abs_tol=1e-6
        ):
            return f"It equals {text}."
    counts = (
        f"Here {int(shows_mask.sum())} of the {int(selected.sum())} selected positions show [MASK] "
        f"({int(kinds['random'].sum())} show a random token, {int(kinds['kept'].sum())} their own)"
    )
    if not bool(shows_mask.any()):
        return f"{counts}: with no [MASK] position there is no accuracy to take, and the mean of nothing is NaN."
    return f"{counts}, and {int((right & shows_mask).sum())} of the [MASK] ones are predicted right."


def _one_number(value) -> float | None:
    if isinstance(value, torch.Tensor):
        if value.numel() != 1 or value.dtype.is_complex or value.layout != torch.strided or value.device.type != "cpu":
            return None
        return float(value.reshape(()))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


MASKED_ONLY_ACCURACY = Exercise(
    name="masked_only_accuracy",
    reference=masked_only_accuracy,
    prompt="your function receives `prediction_logits` (batch, seq, vocab), `labels` (batch, seq: the original "
    "token at the selected positions, -100 elsewhere), `input_ids` (batch, seq: what the model saw, after the "
    "80/10/10 corruption) and an int `mask_token_id`. It returns a 0-d float tensor: the share of the selected "
    "positions that show [MASK] whose highest logit is the label. The selected positions that show a random token "
    "or their own token do not count; with no [MASK] position the answer is NaN (as `mlm_accuracy`'s with no "
    "selected position). As in real batches, every [MASK] in `input_ids` is at a selected position.",
    start="first find the positions that count: which two facts about a position, one from `labels` and one from "
    "`input_ids`, make it one of them?",
    make_cases=_masked_cases,
    notebook="09",
    explain=_masked_explain,
    mistakes=(
        Mistake(
            "the accuracy on every selected position (the old `mlm_accuracy`)",
            "a model scores at the kept positions by copying the token it sees: count only the selected positions "
            "whose input is `mask_token_id`.",
            _masked_all_selected,
        ),
        Mistake(
            "the prediction compared with `input_ids`",
            "at a [MASK] position `input_ids` holds [MASK] itself; the answer is the original token, in `labels`.",
            _masked_against_input_ids,
        ),
        Mistake(
            "an average over every position",
            "the right [MASK] predictions are divided by the number of all positions: take the mean over the "
            "[MASK] positions only (index with the boolean mask before the mean).",
            _masked_over_every_position,
        ),
        Mistake(
            "the argmax over the positions (dim=1)",
            "the prediction at each position is the highest of its `vocab` logits: the argmax runs over the last "
            "axis, `dim=-1`.",
            _masked_argmax_over_positions,
        ),
        Mistake(
            "a Python float",
            "return the 0-d tensor itself, without `.item()` or `float(...)`.",
            _masked_python_float,
        ),
        Mistake(
            "a count instead of a share",
            "divide the number of right [MASK] predictions by the number of [MASK] positions.",
            _masked_a_count,
        ),
        Mistake(
            "0 where no position shows [MASK]",
            "with no [MASK] position there is no accuracy: 0 would read as a model that is always wrong. The mean "
            "of no values is NaN (0 / 0), which is what the exercise asks for; do not clamp the count.",
            _masked_zero_without_mask,
        ),
        Mistake(
            "the selected positions taken as `labels > 0`",
            "token id 0 is a token like any other (RoBERTa's <mask> is its last id, and every id below it is a "
            "token), so a label can be 0: the unselected positions are those labelled -100, `labels != -100`.",
            _masked_positive_labels,
        ),
    ),
)

# --- lr_multiplier -------------------------------------------------------------------------------


def _lr_cases(g):
    return [
        Case("step 0 of a 10-step warm-up (total 100): the start", (0, 10, 100)),
        Case("step 3, in the warm-up of 10 steps (total 100)", (3, 10, 100)),
        Case("step 9, the last warm-up step (warm-up 10, total 100)", (9, 10, 100)),
        Case("step 10 = warmup_steps: the peak (total 100)", (10, 10, 100)),
        Case("step 55, halfway through the decay (warm-up 10, total 100)", (55, 10, 100)),
        Case("step 99, the last step before total_steps (warm-up 10, total 100)", (99, 10, 100)),
        Case("step 100 = total_steps: the end (warm-up 10)", (100, 10, 100)),
        Case("step 130, past total_steps = 100 (warm-up 10)", (130, 10, 100)),
        Case("step 0 with warmup_steps = 0 (total 50): no warm-up", (0, 0, 50)),
        Case("step 20 with warmup_steps = 0 (total 50): no warm-up", (20, 0, 50)),
        Case("step 7 of a short run: warm-up 4, total 12", (7, 4, 12)),
        Case("step 2 of a short run: warm-up 4, total 12", (2, 4, 12)),
    ]


def _lr_no_warmup(step, warmup_steps, total_steps):
    return max(0.0, (total_steps - step) / total_steps)


def _lr_warmup_one_step_ahead(step, warmup_steps, total_steps):
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    return lr_multiplier(step, warmup_steps, total_steps)


def _lr_warmup_one_step_long(step, warmup_steps, total_steps):
    return lr_multiplier(step, warmup_steps + 1, total_steps)


def _lr_decay_from_step_zero(step, warmup_steps, total_steps):
    if step < warmup_steps:
        return step / warmup_steps
    return max(0.0, (total_steps - step) / total_steps)


def _lr_decay_never_reaches_zero(step, warmup_steps, total_steps):
    if step < warmup_steps:
        return step / warmup_steps
    return max(0.0, 1 - (step - warmup_steps) / total_steps)


def _lr_negative_past_the_end(step, warmup_steps, total_steps):
    if step < warmup_steps:
        return step / warmup_steps
    return (total_steps - step) / (total_steps - warmup_steps)


def _lr_divides_by_zero(step, warmup_steps, total_steps):
    return max(0.0, min(step / warmup_steps, (total_steps - step) / (total_steps - warmup_steps)))


def _lr_cosine(step, warmup_steps, total_steps):
    if step < warmup_steps:
        return step / warmup_steps
    progress = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
    return 0.5 * (1 + math.cos(math.pi * progress))


def _lr_explain(case, value, expected):
    """Where the case's step stands in the schedule, and what the multiplier does there (never the formula)."""
    step, warmup_steps, total_steps = case.args
    if warmup_steps == 0:
        where = "With warmup_steps = 0 there is no warm-up: the decay starts at 1 at step 0."
    elif step < warmup_steps:
        where = (
            f"Step {step} is in the warm-up (steps 0 to {warmup_steps - 1}), where the multiplier rises in equal "
            f"steps from 0 at step 0 to 1 at step {warmup_steps}."
        )
    elif step == warmup_steps:
        where = f"Step {step} = warmup_steps is the peak: the multiplier is exactly 1 there."
    elif step <= total_steps:
        where = (
            f"Step {step} is in the decay, where the multiplier falls in equal steps from 1 at step {warmup_steps} "
            f"to 0 at step {total_steps}."
        )
    else:
        where = f"Step {step} is past total_steps = {total_steps}: the multiplier stays at 0, never below."
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        where += " A learning rate below 0 would climb the loss."
    return where


LR_MULTIPLIER = Exercise(
    name="lr_multiplier",
    reference=lr_multiplier,
    prompt="your function receives three ints, `step` (0, 1, 2, ...; it may go past the end), `warmup_steps` "
    "(0 or more, below `total_steps`) and `total_steps`. It returns a Python float: the factor on the peak learning "
    "rate at `step`, rising linearly from 0 at step 0 to 1 at step `warmup_steps`, then falling linearly to 0 at "
    "`total_steps`, and 0 after that. With `warmup_steps = 0` there is no warm-up: the factor is 1 at step 0.",
    start="split the steps into the phases the curve of section 7 shows, and write each phase's straight line "
    "from the two points where it starts and ends.",
    make_cases=_lr_cases,
    notebook="09",
    core="lr_multiplier",
    explain=_lr_explain,
    mistakes=(
        Mistake(
            "a decay from step 0 (no warm-up)",
            "for the first `warmup_steps` steps the factor rises from 0 to 1; the decay starts only at `warmup_steps`.",
            _lr_no_warmup,
        ),
        Mistake(
            "the warm-up one step ahead",
            "at step 0 the factor is 0, not 1 / warmup_steps: it reaches 1 at step `warmup_steps`, not one step "
            "earlier.",
            _lr_warmup_one_step_ahead,
        ),
        Mistake(
            "the warm-up one step too long",
            "the factor reaches 1 at step `warmup_steps` itself, not one step later.",
            _lr_warmup_one_step_long,
        ),
        Mistake(
            "the decay measured from step 0",
            "the decay runs from 1 at `warmup_steps` to 0 at `total_steps`: its length is total_steps - "
            "warmup_steps, so the factor is exactly 1 at the peak, with no drop.",
            _lr_decay_from_step_zero,
        ),
        Mistake(
            "a decay that never reaches 0",
            "the decay lasts total_steps - warmup_steps steps, not total_steps: the factor must be 0 at `total_steps`.",
            _lr_decay_never_reaches_zero,
        ),
        Mistake(
            "a factor below 0 past total_steps",
            "after `total_steps` the line goes on below 0, and a negative learning rate climbs the loss: clamp "
            "the factor at 0.",
            _lr_negative_past_the_end,
        ),
        Mistake(
            "a division by zero when warmup_steps = 0",
            "with no warm-up there is no warm-up fraction to compute: divide by `warmup_steps` only for steps "
            "inside the warm-up (there are none when it is 0).",
            _lr_divides_by_zero,
        ),
        Mistake(
            "a cosine decay",
            "this schedule falls along a straight line (BERT's and Hugging Face's "
            "`get_linear_schedule_with_warmup`), not along a cosine.",
            _lr_cosine,
        ),
    ),
)

# --- whole_word_mask -----------------------------------------------------------------------------


def _words(*rows):
    """(selected_starts, is_continuation) from rows of words, each word (pieces, selected).

    A row may begin with ("##", n, selected): n continuation pieces cut from a word of the text before.
    """
    starts, continuation = [], []
    for row in rows:
        row_starts, row_continuation = [], []
        for word in row:
            if word[0] == "##":
                _, pieces, selected = word
                row_starts += [selected] + [False] * (pieces - 1)
                row_continuation += [True] * pieces
            else:
                pieces, selected = word
                row_starts += [selected] + [False] * (pieces - 1)
                row_continuation += [False] + [True] * (pieces - 1)
        starts.append(row_starts)
        continuation.append(row_continuation)
    return torch.tensor(starts), torch.tensor(continuation)


def _wwm_cases(g):
    return [
        Case(
            "one row: words of 1, 2, 3 and 2 pieces, the 2- and 3-piece words selected",
            _words([(1, False), (2, True), (3, True), (2, False)]),
        ),
        Case(
            "a batch of 3 rows, selected and unselected words of 1 to 3 pieces",
            _words(
                [(2, False), (1, True), (3, True), (1, False), (2, False)],
                [(1, True), (3, False), (2, True), (1, False), (2, False)],
                [(3, False), (2, False), (1, False), (2, True), (1, True)],
            ),
        ),
        Case(
            "one row: a long word of 6 pieces, selected, between two unselected words",
            _words([(2, False), (6, True), (1, False)]),
        ),
        Case(
            "one row: a selected word of 3 pieces followed at once by an unselected word of 3 pieces",
            _words([(1, False), (3, True), (3, False), (1, False)]),
        ),
        Case(
            "a batch of 2 rows, nothing selected",
            _words([(2, False), (1, False), (3, False)], [(1, False), (3, False), (2, False)]),
        ),
        Case(
            "a batch of 2 rows, the second row begins with 2 ## pieces (not selected) below a row that ends in a "
            "selected word",
            _words([(1, False), (1, False), (3, True)], [("##", 2, False), (2, False), (1, True)]),
        ),
        Case(
            "one row that begins with 2 ## pieces, selected at position 0",
            _words([("##", 2, True), (2, False), (1, False)]),
        ),
        Case("one row: no ## piece at all, two words selected", _words([(1, True), (1, False), (1, True), (1, False)])),
    ]


def _shift_right(x):
    return torch.cat([torch.zeros_like(x[..., :1]), x[..., :-1]], dim=-1)


def _wwm_starts_only(selected_starts, is_continuation):
    return selected_starts.clone()


def _wwm_next_piece_only(selected_starts, is_continuation):
    return selected_starts | (is_continuation & _shift_right(selected_starts))


def _wwm_leaks_into_the_next_word(selected_starts, is_continuation):
    selected = whole_word_mask(selected_starts, is_continuation)
    return selected | _shift_right(selected)


def _wwm_across_rows(selected_starts, is_continuation):
    flat = whole_word_mask(selected_starts.reshape(1, -1), is_continuation.reshape(1, -1))
    return flat.reshape(selected_starts.shape)


def _wwm_every_continuation(selected_starts, is_continuation):
    return selected_starts | is_continuation


def _wwm_explain(case, value, expected):
    """What the first wrong position is: a word start, or a ## piece of a selected or unselected word."""
    selected_starts, is_continuation = case.args
    if not isinstance(value, torch.Tensor) or value.shape != expected.shape or value.layout != torch.strided:
        return None
    if value.device != expected.device or value.dtype.is_complex:
        return None
    if value.dtype != torch.bool:
        return "Here True means *selected for masking*."
    differ = (value.bool() != expected).nonzero()
    if not len(differ):
        return None
    row, position = (int(i) for i in differ[0])
    start = position
    while start > 0 and bool(is_continuation[row, start]):
        start -= 1
    chosen = "selected" if bool(selected_starts[row, start]) else "not selected"
    if start == position and bool(is_continuation[row, position]):
        return (
            f"Position {position} of row {row} is a ## piece at the very start of its row: with no word start to "
            f"its left in the row, it starts a word itself, {chosen} in `selected_starts`."
        )
    if start == position:
        return f"Position {position} of row {row} starts a word, {chosen} in `selected_starts`: it keeps that value."
    return (
        f"Position {position} of row {row} is a ## piece of the word that starts at position {start} of the same "
        f"row, which is {chosen}."
    )


WHOLE_WORD_MASK = Exercise(
    name="whole_word_mask",
    reference=whole_word_mask,
    prompt="your function receives two bool tensors of one shape (batch, seq): `selected_starts`, True at the "
    "first pieces of the words chosen for masking (False at every ## piece, except perhaps position 0), and "
    "`is_continuation`, True at the pieces that continue a word (`##ing`). It returns a bool tensor (batch, seq): "
    "whole-word masking, where a ## piece is selected exactly when the first piece of its word is. A piece's word "
    "starts at the nearest position at or to its left, in the same row, that is not a continuation; the first "
    "position of a row always starts a word, even a ## piece (a row cut from the middle of a text). The cases are "
    "all 2-D.",
    start="work one row through on paper, left to right: for a ## piece, which earlier position decides whether "
    "it is selected?",
    make_cases=_wwm_cases,
    notebook="09",
    axes={"": ("rows", "positions")},
    explain=_wwm_explain,
    mistakes=(
        Mistake(
            "only the first pieces selected",
            "whole-word masking selects every ## piece of a chosen word too: a visible `##ing` beside the [MASK] "
            "would give the word away.",
            _wwm_starts_only,
        ),
        Mistake(
            "only the piece after each first piece selected",
            "a word can have many ## pieces: every one up to the next word start follows the word's first piece.",
            _wwm_next_piece_only,
        ),
        Mistake(
            "the piece after a selected word selected too",
            "a word ends before the next piece that is not a continuation: that piece starts the next word and "
            "keeps its own value of `selected_starts`.",
            _wwm_leaks_into_the_next_word,
        ),
        Mistake(
            "the words carried across rows",
            "each row is its own text: a ## piece at the start of a row does not belong to the last word of the "
            "row above. Work along the last axis of each row, without flattening the batch.",
            _wwm_across_rows,
        ),
        Mistake(
            "the ## pieces of unselected words selected too",
            "a ## piece is selected only when the first piece of *its own* word is selected, not every ## piece.",
            _wwm_every_continuation,
        ),
    ),
)
