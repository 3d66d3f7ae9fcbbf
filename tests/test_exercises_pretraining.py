"""The exercises of notebook 09: learner code written differently from the package is judged as the package's,
and realistic wrong answers that the catalogue does not list get a message that names the mistake or the failing
property (the generic checks of every exercise, the registry, verdicts, hints and solutions, are in
test_exercises.py)."""

import ast
import inspect
import textwrap

import numpy as np
import pytest
import torch

from bertcourse.exercises import EXERCISES, check, registry
from bertcourse.pretraining import masked_only_accuracy, masking, metrics, mlm_accuracy, whole_word_mask
from bertcourse.pretraining.metrics import selected_kinds
from bertcourse.training import lr_multiplier

# --- the exercises notebook 09 asked for before: still checkable by name -------------------------


def corrupt_with_a_loop(input_ids, selected, draws, random_ids, mask_token_id):
    corrupted, labels = input_ids.clone().view(-1), torch.full_like(input_ids, -100).view(-1)
    for index in range(input_ids.numel()):
        if selected.view(-1)[index]:
            labels[index] = input_ids.view(-1)[index]
            draw = draws.view(-1)[index]
            if draw < 0.8:
                corrupted[index] = mask_token_id
            elif draw < 0.9:
                corrupted[index] = random_ids.view(-1)[index]
    return corrupted.view(input_ids.shape), labels.view(input_ids.shape)


def corrupt_in_python_floats(input_ids, selected, draws, random_ids, mask_token_id):
    """Pure Python: each float32 draw compared with 0.8 and 0.9 as a Python float (float32(0.9) < 0.9 there)."""
    pairs = zip(
        input_ids.flatten().tolist(),
        selected.flatten().tolist(),
        draws.flatten().tolist(),
        random_ids.flatten().tolist(),
        strict=True,
    )
    corrupted, labels = [], []
    for token, chosen, draw, random_id in pairs:
        corrupted.append(token if not chosen else mask_token_id if draw < 0.8 else random_id if draw < 0.9 else token)
        labels.append(token if chosen else -100)
    return torch.tensor(corrupted).view(input_ids.shape), torch.tensor(labels).view(input_ids.shape)


def corrupt_in_python_rows(input_ids, selected, draws, random_ids, mask_token_id):
    """The same, row by row: it assumes a batch axis."""
    rows = zip(input_ids.tolist(), selected.tolist(), draws.tolist(), random_ids.tolist(), strict=True)
    corrupted = [
        [t if not c else mask_token_id if d < 0.8 else r if d < 0.9 else t for t, c, d, r in zip(*row, strict=True)]
        for row in rows
    ]
    return torch.tensor(corrupted), torch.where(selected, input_ids, -100)


def test_mlm_corrupt_in_python_floats_is_judged_as_in_float32():
    """No draw sits where float32 and Python floats disagree (float32(0.9) is below 0.9 as a Python float), so a
    pure-Python answer is right; one that loops over rows fails only the case without a batch axis, and is told so
    because that case is the batched one with its batch axis taken away."""
    assert check("mlm_corrupt", corrupt_in_python_floats).status == "correct"
    message = check("mlm_corrupt", corrupt_in_python_rows).message
    assert "exactly those where there is no batch axis" in message, message
    assert "Wrong on case 2 of" in message


def truncate_by_arithmetic(a, b, max_length):
    budget = max_length - 3
    len_a = min(len(a), max(-(-budget // 2), budget - len(b)))  # A keeps half the room (rounded up), or more
    return a[:len_a], b[: budget - len_a]


def accuracy_with_sums(prediction_logits, labels):
    selected = labels != -100
    hits = ((prediction_logits.argmax(-1) == labels) & selected).sum()
    return hits / selected.sum()


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("mlm_corrupt", corrupt_with_a_loop),
        ("truncate_pair", truncate_by_arithmetic),
        ("mlm_accuracy", accuracy_with_sums),
    ],
)
def test_other_correct_solutions_are_accepted(name, fn):
    assert check(name, fn).status == "correct", check(name, fn).message


def test_notebook_09_asks_for_bert_objective_and_the_old_names_still_check():
    assert registry.NOTEBOOK_ASKS["09"] == ("mlm_corrupt", "masked_only_accuracy")
    assert registry.RETIRED.isdisjoint(registry.NOTEBOOK_ASKS["09"])
    retired = ("truncate_pair", "mlm_accuracy", "lr_multiplier", "whole_word_mask")
    for name in (*retired, *registry.NOTEBOOK_ASKS["09"]):
        assert EXERCISES[name].notebook == "09"
    assert set(retired) <= registry.RETIRED  # checkable by name, not asked


# --- the references ------------------------------------------------------------------------------


def test_masked_only_accuracy_is_the_accuracy_on_the_mask_kind_of_selected_kinds():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 20, 9, generator=g)
    text = torch.randint(5, 9, (3, 20), generator=g)
    selected = torch.rand(3, 20, generator=g) < 0.5
    input_ids = torch.where(selected & (torch.rand(3, 20, generator=g) < 0.7), 4, text)
    labels = torch.where(selected, text, -100)
    shows_mask = selected_kinds(input_ids, labels, 4)["mask"]
    only_mask = torch.where(shows_mask, labels, -100)
    assert torch.equal(masked_only_accuracy(logits, labels, input_ids, 4), mlm_accuracy(logits, only_mask))
    assert masked_only_accuracy(logits, labels, text, 4).isnan()  # no [MASK] shown: NaN
    with pytest.raises(ValueError, match="batch, seq, vocab"):
        masked_only_accuracy(logits[:, :3], labels, input_ids, 4)
    with pytest.raises(TypeError, match="mask_token_id"):
        masked_only_accuracy(logits, labels, input_ids, torch.tensor(4))


def test_whole_word_mask_follows_each_word_start_within_its_row():
    starts = torch.tensor([[1, 0, 0, 1, 0, 0, 0], [0, 0, 1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0]]).bool()
    pieces = torch.tensor([[0, 1, 1, 0, 1, 0, 1], [1, 1, 0, 1, 1, 0, 1], [1, 1, 0, 1, 0, 0, 0]]).bool()
    expected = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0, 0]]).bool()
    assert torch.equal(whole_word_mask(starts, pieces), expected)
    with pytest.raises(TypeError, match="bool"):
        whole_word_mask(starts.long(), pieces)
    with pytest.raises(ValueError, match="one shape"):
        whole_word_mask(starts, pieces[:, :3])


def test_lr_multiplier_is_the_schedule_the_exercise_describes():
    assert [lr_multiplier(s, 4, 12) for s in (0, 2, 4, 8, 12, 20)] == [0.0, 0.5, 1.0, 0.5, 0.0, 0.0]
    assert lr_multiplier(0, 0, 50) == 1.0


@pytest.mark.parametrize("name", ["masked_only_accuracy", "whole_word_mask"])
def test_the_public_function_checks_then_calls_a_core_that_reads_like_the_textbook(name):
    home = masking if name == "whole_word_mask" else metrics
    public, core = getattr(home, name), getattr(home, f"_{name}")
    assert f"_{name}(" in inspect.getsource(public)
    source = textwrap.dedent(inspect.getsource(core))
    function = ast.parse(source).body[0]
    assert len(ast.get_docstring(function).splitlines()) <= 2
    lines = source.splitlines()
    body = lines[function.body[0].end_lineno :]
    assert not any(word in line for word in ("raise", "require_", "isinstance", "describe(") for line in body)
    for node in ast.walk(function):
        if isinstance(node, (ast.Assign, ast.Return)):
            assert "  # " in lines[node.end_lineno - 1], lines[node.end_lineno - 1]


# --- correct answers written differently from the package ----------------------------------------


def accuracy_without_the_label_test(prediction_logits, labels, input_ids, mask_token_id):
    at_mask = input_ids == mask_token_id  # every [MASK] is selected: the prompt says so
    return (prediction_logits.argmax(-1)[at_mask] == labels[at_mask]).float().mean()


def accuracy_by_sums(prediction_logits, labels, input_ids, mask_token_id):
    counted = (labels != -100) & (input_ids == mask_token_id)
    hits = (prediction_logits.max(dim=-1).indices == labels) & counted
    return hits.sum() / counted.sum()  # 0 / 0 is NaN for tensors


def accuracy_from_selected_kinds(prediction_logits, labels, input_ids, mask_token_id):
    kept_out = torch.where(selected_kinds(input_ids, labels, mask_token_id)["mask"], labels, -100)
    return mlm_accuracy(prediction_logits, kept_out)


def lr_with_min(step, warmup_steps, total_steps):
    up = step / warmup_steps if warmup_steps else 1.0
    down = (total_steps - step) / (total_steps - warmup_steps)
    return max(0.0, min(up, down))


def lr_as_one_minus_progress(step, warmup_steps, total_steps):
    if step < warmup_steps:
        return step / warmup_steps
    if step >= total_steps:
        return 0
    return 1 - (step - warmup_steps) / (total_steps - warmup_steps)


def lr_by_interpolation(step, warmup_steps, total_steps):
    if warmup_steps == 0:
        return float(np.interp(step, [0, total_steps], [1.0, 0.0]))
    return float(np.interp(step, [0, warmup_steps, total_steps], [0.0, 1.0, 0.0]))


def whole_words_with_a_loop(selected_starts, is_continuation):
    out = selected_starts.clone()
    for row in range(out.shape[0]):
        for i in range(1, out.shape[1]):
            if is_continuation[row, i]:
                out[row, i] = out[row, i - 1]
    return out


def whole_words_by_word_ids(selected_starts, is_continuation):
    starts = ~is_continuation
    starts[:, 0] = True  # a row's first piece starts a word
    word = starts.long().cumsum(dim=1) - 1  # (batch, seq): the number of each piece's word in its row
    chosen = torch.zeros(word.shape[0], word.shape[1], dtype=torch.bool)
    for row in range(word.shape[0]):
        chosen[row, : int(starts[row].sum())] = selected_starts[row][starts[row]]
    return chosen.gather(1, word)


def whole_words_by_shifting(selected_starts, is_continuation):
    out = selected_starts
    for _ in range(out.shape[-1]):
        before = torch.nn.functional.pad(out[:, :-1], (1, 0))
        out = out | (is_continuation & before)
    return out


CORRECT = [
    ("masked_only_accuracy", accuracy_without_the_label_test),
    ("masked_only_accuracy", accuracy_by_sums),
    ("masked_only_accuracy", accuracy_from_selected_kinds),
    ("lr_multiplier", lr_with_min),
    ("lr_multiplier", lr_as_one_minus_progress),
    ("lr_multiplier", lr_by_interpolation),
    ("whole_word_mask", whole_words_with_a_loop),
    ("whole_word_mask", whole_words_by_word_ids),
    ("whole_word_mask", whole_words_by_shifting),
]


@pytest.mark.parametrize(("name", "fn"), CORRECT, ids=[fn.__name__ for _, fn in CORRECT])
def test_correct_answers_written_differently_are_accepted(name, fn):
    result = check(name, fn)
    assert result.passed, result.message


# --- realistic wrong answers outside the catalogue -----------------------------------------------


def accuracy_with_the_kept_ones(prediction_logits, labels, input_ids, mask_token_id):
    counted = (labels != -100) & ((input_ids == mask_token_id) | (input_ids == labels))
    return (prediction_logits.argmax(-1) == labels)[counted].float().mean()


def accuracy_without_the_kept_ones(prediction_logits, labels, input_ids, mask_token_id):
    counted = (labels != -100) & (input_ids != labels)  # the random ones stay in
    return (prediction_logits.argmax(-1) == labels)[counted].float().mean()


def accuracy_per_sentence(prediction_logits, labels, input_ids, mask_token_id):
    counted = (labels != -100) & (input_ids == mask_token_id)
    right = prediction_logits.argmax(-1) == labels
    return torch.stack([right[row][counted[row]].float().mean() for row in range(len(labels))]).mean()


def error_rate(prediction_logits, labels, input_ids, mask_token_id):
    counted = (labels != -100) & (input_ids == mask_token_id)
    return (prediction_logits.argmax(-1) != labels)[counted].float().mean()


def hits_over_every_selected(prediction_logits, labels, input_ids, mask_token_id):
    hits = (prediction_logits.argmax(-1) == labels) & (input_ids == mask_token_id)
    return hits.sum() / (labels != -100).sum()


def integer_division(prediction_logits, labels, input_ids, mask_token_id):
    counted = (labels != -100) & (input_ids == mask_token_id)
    return ((prediction_logits.argmax(-1) == labels) & counted).sum() // counted.sum().clamp(min=1)


def mask_id_hard_coded(prediction_logits, labels, input_ids, mask_token_id):
    counted = (labels != -100) & (input_ids == 4)
    return (prediction_logits.argmax(-1) == labels)[counted].float().mean()


def probability_of_the_label(prediction_logits, labels, input_ids, mask_token_id):
    counted = (labels != -100) & (input_ids == mask_token_id)
    p = prediction_logits.softmax(-1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    return p[counted].mean()


def lr_integer_division(step, warmup_steps, total_steps):
    if step < warmup_steps:
        return step // warmup_steps
    return max(0.0, (total_steps - step) / (total_steps - warmup_steps))


def lr_as_a_tensor(step, warmup_steps, total_steps):
    return torch.tensor(lr_with_min(step, warmup_steps, total_steps))


def lr_quadratic_warmup(step, warmup_steps, total_steps):
    if step < warmup_steps:
        return (step / warmup_steps) ** 2
    return max(0.0, (total_steps - step) / (total_steps - warmup_steps))


def lr_ends_one_step_early(step, warmup_steps, total_steps):
    if step < warmup_steps:
        return step / warmup_steps
    return max(0.0, (total_steps - 1 - step) / (total_steps - 1 - warmup_steps))


def lr_in_percent(step, warmup_steps, total_steps):
    return 100 * lr_with_min(step, warmup_steps, total_steps)


def lr_absolute_value_past_the_end(step, warmup_steps, total_steps):
    if step < warmup_steps:
        return step / warmup_steps
    return abs((total_steps - step) / (total_steps - warmup_steps))


def lr_divides_at_the_peak(step, warmup_steps, total_steps):
    if step <= warmup_steps:
        return step / warmup_steps  # 0 / 0 at step 0 when there is no warm-up
    return max(0.0, (total_steps - step) / (total_steps - warmup_steps))


def _before(x):
    return torch.nn.functional.pad(x[:, :-1], (1, 0))


def pieces_without_their_start(selected_starts, is_continuation):
    return is_continuation & _before(selected_starts)


def word_ids_wrap_at_a_leading_piece(selected_starts, is_continuation):
    word = (~is_continuation).long().cumsum(dim=1) - 1  # -1 for the pieces before the row's first start
    out = torch.zeros_like(selected_starts)
    for row in range(len(word)):
        positions = torch.nonzero(~is_continuation[row])[:, 0]
        out[row] = selected_starts[row][positions[word[row]]]
    return out


def two_rounds_of_shifting(selected_starts, is_continuation):
    out = selected_starts
    for _ in range(2):  # words of up to 3 pieces
        out = out | (is_continuation & _before(out))
    return out


def an_integer_mask(selected_starts, is_continuation):
    return whole_words_with_a_loop(selected_starts, is_continuation).long()


def the_first_row_for_every_row(selected_starts, is_continuation):
    first = whole_words_with_a_loop(selected_starts[:1], is_continuation[:1])
    return first.expand_as(selected_starts).clone()


def index_off_by_one(selected_starts, is_continuation):
    out = selected_starts.clone()
    for i in range(1, out.shape[1]):
        out[:, i] |= is_continuation[:, i - 1] & out[:, i - 1]  # the previous piece's flag, not this one's
    return out


# (exercise, their function, words the message must hold: the mistake or the property that fails)
WRONG = [
    ("masked_only_accuracy", accuracy_with_the_kept_ones, "It equals the accuracy on the [MASK] and the kept"),
    ("masked_only_accuracy", accuracy_without_the_kept_ones, "It equals the accuracy on the [MASK] and the random"),
    ("masked_only_accuracy", accuracy_per_sentence, "It equals the mean of each sentence's own accuracy"),
    ("masked_only_accuracy", error_rate, "It equals one minus the accuracy"),
    ("masked_only_accuracy", hits_over_every_selected, "divided by the number of *selected* positions"),
    ("masked_only_accuracy", integer_division, "dtype torch.int64; expected torch.float32"),
    ("masked_only_accuracy", mask_id_hard_coded, "(the same sizes, [MASK] is id 103 in a vocabulary of 120)"),
    ("masked_only_accuracy", probability_of_the_label, "of the [MASK] ones are predicted right"),
    ("lr_multiplier", lr_integer_division, "is in the warm-up"),
    ("lr_multiplier", lr_as_a_tensor, "return a Python float"),
    ("lr_multiplier", lr_quadratic_warmup, "rises in equal steps"),
    ("lr_multiplier", lr_ends_one_step_early, "falls in equal steps from 1 at step 10 to 0 at step 100"),
    ("lr_multiplier", lr_in_percent, "Your output is 30; expected 0.3."),
    ("lr_multiplier", lr_absolute_value_past_the_end, "past total_steps = 100: the multiplier stays at 0"),
    ("lr_multiplier", lr_divides_at_the_peak, "ZeroDivisionError"),
    ("whole_word_mask", pieces_without_their_start, "starts a word, selected in `selected_starts`"),
    ("whole_word_mask", word_ids_wrap_at_a_leading_piece, "a ## piece at the very start of its row"),
    ("whole_word_mask", two_rounds_of_shifting, "(one row: a long word of 6 pieces"),
    ("whole_word_mask", an_integer_mask, "Here True means *selected for masking*."),
    ("whole_word_mask", the_first_row_for_every_row, "Position 0 of row 1 starts a word"),
    ("whole_word_mask", index_off_by_one, "is a ## piece of the word that starts at position"),
]
MISLEADING = ("times", "a scale factor", "an offset", "transposed", "inverted", "may attend")


@pytest.mark.parametrize(("name", "fn", "words"), WRONG, ids=[fn.__name__ for _, fn, _ in WRONG])
def test_an_unforeseen_wrong_answer_gets_a_message_that_names_what_fails(name, fn, words):
    result = check(name, fn)
    assert result.status == "wrong" and result.mistake is None, result.message
    assert words in result.message, result.message
    assert not any(word in result.message for word in MISLEADING), result.message


def test_at_least_six_unforeseen_answers_per_new_exercise():
    for name in ("masked_only_accuracy", "lr_multiplier", "whole_word_mask"):  # new when 09 first asked them
        assert sum(n == name for n, *_ in WRONG) >= 6, name
        assert sum(n == name for n, _ in CORRECT) >= 2, name


def test_the_cases_vary_one_property_at_a_time():
    accuracy = EXERCISES["masked_only_accuracy"].cases()
    first = accuracy[0].args
    for case in accuracy[1:4]:  # the kinds of position shown, then the [MASK] id; the sizes stay
        assert case.label.startswith("the same sizes") and case.args[1].shape == first[1].shape
    assert {case.args[3] for case in accuracy} == {4, 103, 11}  # 11: the last id, as RoBERTa's <mask>
    schedules = [case.args[1:] for case in EXERCISES["lr_multiplier"].cases()]
    assert schedules.count((10, 100)) == 8  # one schedule, the step moving through its phases
    assert set(schedules) == {(10, 100), (0, 50), (4, 12)}


def test_lr_multiplier_accepts_an_int_where_the_value_is_whole():
    assert lr_as_one_minus_progress(130, 10, 100) == 0 and isinstance(lr_as_one_minus_progress(130, 10, 100), int)
    assert check("lr_multiplier", lr_as_one_minus_progress).passed


def accuracy_on_positive_labels(prediction_logits, labels):
    picked = labels.ge(1)  # as if no token had id 0
    return prediction_logits.argmax(-1).eq(labels).float()[picked].mean()


def masked_accuracy_on_positive_labels(prediction_logits, labels, input_ids, mask_token_id):
    picked = labels.gt(0) & input_ids.eq(mask_token_id)
    return prediction_logits.argmax(-1).eq(labels)[picked].float().mean()


def test_an_accuracy_that_takes_labels_above_0_as_the_selected_ones_is_caught():
    for name, fn in (
        ("mlm_accuracy", accuracy_on_positive_labels),
        ("masked_only_accuracy", masked_accuracy_on_positive_labels),
    ):
        cases = EXERCISES[name].cases()
        assert any(bool((case.args[1] == 0).any()) for case in cases), name  # a selected label 0 in some case
        result = check(name, fn)
        assert result.mistake == "the selected positions taken as `labels > 0`", result.message
    assert check("mlm_accuracy", lambda p, y: p.argmax(-1).eq(y)[y.ge(0)].float().mean()).passed


def truncate_the_shorter(a, b, max_length):
    len_a, len_b = len(a), len(b)
    while len_a + len_b > max_length - 3 and min(len_a, len_b) > 0:
        if len_a < len_b:
            len_a -= 1
        else:
            len_b -= 1
    return a[:len_a], b[:len_b]


def truncate_the_longer_only(a, b, max_length):
    room = max_length - 3
    if len(a) + len(b) <= room:
        return a, b
    if len(a) > len(b):
        return a[: max(0, room - len(b))], b
    return a, b[: max(0, room - len(a))]


def truncate_proportionally(a, b, max_length):
    room, total = max_length - 3, len(a) + len(b)
    if total <= room:
        return a, b
    len_a = round(len(a) * room / total)
    return a[:len_a], b[: room - len_a]


def truncate_b_from_its_start(a, b, max_length):
    len_a, len_b = len(a), len(b)
    while len_a + len_b > max_length - 3:
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    return a[:len_a], b[len(b) - len_b :]


def truncate_one_round_too_many(a, b, max_length):
    len_a, len_b = len(a), len(b)
    while len_a + len_b >= max_length - 3:
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    return a[:len_a], b[:len_b]


def truncate_without_the_sep_between(a, b, max_length):
    len_a, len_b = len(a), len(b)
    while len_a + len_b > max_length - 1:  # only [CLS] counted
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    return a[:len_a], b[:len_b]


TRUNCATE_WRONG = [
    (truncate_the_shorter, "more than max_length = 12"),
    (truncate_the_longer_only, "longest first keeps 6 and 5: one token at a time"),
    (truncate_proportionally, "you kept 6 of a's 10 tokens and 3 of b's 4; longest first keeps 5 and 4"),
    (truncate_b_from_its_start, "`b` is its last 7 tokens: cut at the end"),
    (truncate_one_round_too_many, "Yours keep 4 + 4 tokens, but 9 fit"),
    (truncate_without_the_sep_between, "has 7 + 4 + 3 = 14 tokens, more than max_length = 12"),
]


@pytest.mark.parametrize(("fn", "words"), TRUNCATE_WRONG, ids=[fn.__name__ for fn, _ in TRUNCATE_WRONG])
def test_truncate_pair_says_what_the_cut_pair_is(fn, words):
    result = check("truncate_pair", fn)
    assert result.status == "wrong" and result.mistake is None, result.message
    assert words in result.message, result.message
