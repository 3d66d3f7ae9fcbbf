"""The engine's rules, each proven here: the package's own code for an exercise is never judged correct,
no learner code keeps a check waiting, the skeleton's NotImplementedError is told apart from PyTorch's,
tolerances follow the arithmetic of each case, one number is compared as one number, the case-kind
summary names a kind only when the case set isolates it, and ``solution`` shows every step."""

import functools
import inspect
import math
import re
import sys
import threading
import time

import pytest
import torch
import torch.nn.functional as F

import bertcourse as bc
from bertcourse.exercises import EXERCISES, check, diagnosis, engine, sandbox, solution
from bertcourse.exercises.engine import prepared
from bertcourse.pooling import mean_pooling
from bertcourse.weights import hf_to_ours

NAMES = list(EXERCISES)


# --- the package's own code is not the learner's ------------------------------------------------


def own_code_message(name, fn):
    result = check(name, fn)
    assert result.status == "wrong", result.message
    assert result.message.startswith("❌ Wrong: this calls bertcourse's own `"), result.message
    assert f"which computes `{name}` for you" in result.message
    return result


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_itself_is_told_it_is_the_packages(name):
    result = own_code_message(name, EXERCISES[name].reference)
    reference = EXERCISES[name].reference
    assert result.mistake == f"calls bertcourse's own {reference.__module__}.{reference.__qualname__}"


def my_mean_pooling(last_hidden_state, attention_mask=None):
    return mean_pooling(last_hidden_state, attention_mask)


@pytest.mark.parametrize(
    ("name", "fn", "reached"),
    [
        ("hf_to_ours", hf_to_ours, "bertcourse.weights.hf_to_ours"),  # my_hf_to_ours = hf_to_ours
        ("count_parameters", bc.count_parameters, "bertcourse.counting.count_parameters"),  # an alias
        ("mean_pooling", my_mean_pooling, "bertcourse.pooling.mean_pooling"),  # a def that calls it
        ("mean_pooling", lambda h, m=None: bc.pooling.mean_pooling(h, m), "bertcourse.pooling.mean_pooling"),
        (
            "multi_head_attention",
            functools.partial(bc.multi_head_attention),
            "bertcourse.multihead.multi_head_attention",
        ),
        (
            "multi_head_attention",
            lambda x, w_q, w_k, w_v, w_o, num_heads, mask=None: bc.multi_head_attention(
                x, w_q, w_k, w_v, w_o, num_heads, mask
            ),
            "bertcourse.multihead.multi_head_attention",
        ),
        (  # the core itself, reached without the public function's checks
            "masked_softmax",
            lambda scores, mask=None: bc.attention._masked_softmax(scores, mask),
            "bertcourse.attention._masked_softmax",
        ),
        (  # the module class of the same name
            "layer_norm",
            lambda x, w, b, eps=1e-12: bc.LayerNorm(x.shape[-1], eps=eps).requires_grad_(False)(x) * w + b,
            "bertcourse.layernorm.LayerNorm.forward",
        ),
    ],
)
def test_a_function_that_is_or_calls_the_packages_own_is_told_so(name, fn, reached):
    result = own_code_message(name, fn)
    assert result.mistake == f"calls bertcourse's own {reached}"
    with engine.judging_the_package():  # the same function, judged like any other, is right
        assert check(name, fn).status == "correct"


def post_ln_with_the_packages_layer_norm(x, attention, feed_forward, g1, b1, g2, b2, eps=1e-12):
    h = bc.layer_norm(x + attention(x), g1, b1, eps)
    return bc.layer_norm(h + feed_forward(h), g2, b2, eps)


def attention_with_the_packages_masked_softmax(q, k, v, mask=None):
    weights = bc.attention.masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), mask)
    return weights @ v, weights


def mha_with_the_packages_pieces(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q, k, v = (bc.split_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
    if mask is not None and mask.dim() == 2 and mask.shape[0] != mask.shape[1]:
        mask = mask[:, None, None, :]  # (batch, 1, 1, seq): a padding mask for every head and query
    context, _ = bc.scaled_dot_product_attention(q, k, v, mask)
    return bc.merge_heads(context) @ w_o


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("post_ln_layer", post_ln_with_the_packages_layer_norm),  # layer_norm is another exercise's
        ("scaled_dot_product_attention", attention_with_the_packages_masked_softmax),  # so is masked_softmax
        ("multi_head_attention", mha_with_the_packages_pieces),  # split_heads, sdpa and merge_heads too
        ("stable_softmax", lambda scores, dim=-1: (scores - scores.amax(dim, keepdim=True)).softmax(dim)),
    ],
)
def test_other_exercises_package_functions_may_be_called(name, fn):
    result = check(name, fn)
    assert result.status == "correct", result.message


def test_a_wrong_answer_that_calls_the_package_gets_its_diagnosis_and_a_note():
    result = check("split_heads", lambda x, h: bc.split_heads(x, h).flip(1))
    assert "The heads are the right ones in another order" in result.message
    assert result.message.endswith(
        "Note: this calls bertcourse's own `bertcourse.multihead.split_heads`, which computes `split_heads` for "
        "you: the check is for code you write yourself."
    )


def flexible_on_the_packages_sdpa(q, k, v, mask=None, scale=None):
    if mask is not None and mask.dtype != torch.bool:
        scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale) + mask
        weights = torch.softmax(scores, dim=-1)
        return weights @ v, weights
    if scale is not None:  # sdpa divides by √d_k: give it q scaled so that the product is scaled by `scale`
        q = q * (scale * math.sqrt(q.shape[-1]))
    return bc.scaled_dot_product_attention(q, k, v, mask)


def test_flexible_attention_may_build_on_notebook_02s_attention_as_its_prompt_says():
    """The prompt allows bc.scaled_dot_product_attention (another exercise's reference, notebook 02's building
    block); the scale and the float mask stay the learner's. The package's flexible_attention is delegation."""
    assert "`bc.scaled_dot_product_attention`" in EXERCISES["flexible_attention"].prompt
    result = check("flexible_attention", flexible_on_the_packages_sdpa)
    assert result.status == "correct", result.message
    own_code_message(
        "flexible_attention",
        lambda q, k, v, mask=None, scale=None: bc.attention.flexible_attention(q, k, v, mask, scale),
    )


@pytest.mark.parametrize("name", NAMES)
def test_each_concept_holds_its_reference_and_core_and_no_other_exercises(name):
    own, others = engine.concept_codes(EXERCISES[name])
    exercise = EXERCISES[name]
    core = getattr(sys.modules[exercise.reference.__module__], exercise.core_name())
    assert {exercise.reference.__code__, core.__code__} <= own
    for other in EXERCISES.values():
        if other.name != name and other.reference is not exercise.reference:
            assert other.reference.__code__ not in own, other.name
    assert not own & others


# --- no learner code keeps a check waiting --------------------------------------------------------


def retry_with_a_bare_except(x, weight, bias, eps=1e-12):
    while True:
        try:  # noqa: SIM105 -- as a learner writes it
            time.sleep(0.01)
        except:  # noqa: E722 -- the learner's bare except catches the time-out too
            pass


def retry_catching_base_exception(x, weight, bias, eps=1e-12):
    while True:
        try:
            while True:
                pass
        except BaseException:
            continue


def give_up_quietly(x, weight, bias, eps=1e-12):
    try:
        while True:
            time.sleep(0.01)
    except BaseException:
        return torch.zeros_like(x)  # returns something after swallowing the time-out


@pytest.mark.parametrize("fn", [retry_with_a_bare_except, retry_catching_base_exception, give_up_quietly])
def test_no_except_clause_swallows_the_time_limit(monkeypatch, fn):
    monkeypatch.setattr(sandbox, "CALL_TIME_LIMIT_S", 0.3)
    start = time.perf_counter()
    result = check("layer_norm", fn)
    assert time.perf_counter() - start < 3
    assert result.status == "wrong"
    assert "your function was still running after 0.3 s and was stopped" in result.message
    deadline = time.perf_counter() + 3
    while any(t.name == "bertcourse-check" for t in threading.enumerate()) and time.perf_counter() < deadline:
        time.sleep(0.05)
    assert not any(t.name == "bertcourse-check" for t in threading.enumerate())  # the thread itself ended too


# --- the skeleton's NotImplementedError and PyTorch's ---------------------------------------------


def skeleton(attention_mask):
    raise NotImplementedError


def helper_left_as_a_skeleton(attention_mask):
    raise NotImplementedError("my helper comes later")


def or_with_a_float(attention_mask):
    return ~(attention_mask.bool() | 0.0)  # PyTorch: "bitwise_or_cpu" not implemented for 'Float'


def test_a_notimplementederror_from_pytorch_is_an_attempt_not_the_skeleton():
    assert check("key_padding_mask", skeleton).status == "not_attempted"
    assert check("key_padding_mask", lambda m: helper_left_as_a_skeleton(m)).status == "not_attempted"
    result = check("key_padding_mask", or_with_a_float)
    assert result.status == "wrong", result.message
    assert "Your function raised NotImplementedError: \"bitwise_or_cpu\" not implemented for 'Float'" in result.message
    assert "`|`, `&`, `^` and `~` take booleans" in result.message
    assert "still raises NotImplementedError" not in result.message
    for error in (NotImplementedError(), None, ValueError()):
        assert diagnosis.is_skeleton(error) is (error is not None and type(error) is NotImplementedError)


def test_a_mask_of_the_right_dtype_is_not_matched_to_a_mistake_whose_dtype_is_the_mistake():
    result = check("key_padding_mask", lambda m: (1 - m).bool())  # bool, right wherever `1 - m` runs
    assert "stays" not in result.message and "long" not in (result.mistake or ""), result.message
    exercise = EXERCISES["key_padding_mask"]
    case = exercise.cases()[0]
    right = torch.tensor([[False, True]])
    left_long = right.long()  # what a mistake that keeps the integers gives
    assert not engine._same_item(exercise, case, right, left_long, right)  # a bool answer is not that mistake
    assert engine._same_item(exercise, case, left_long.clone(), left_long, right)  # a long one is
    assert engine._same_item(exercise, case, right.float(), right, right)  # the values alone, when dtype is no slip


# --- tolerances from the arithmetic ---------------------------------------------------------------


def softmax_through_logsumexp(scores, dim=-1):
    return torch.exp(scores - torch.logsumexp(scores, dim=dim, keepdim=True))


def test_a_softmax_through_logsumexp_is_within_float32_rounding_of_large_scores():
    cases, expected, _ = prepared(EXERCISES["stable_softmax"])
    large = next(i for i, case in enumerate(cases) if diagnosis.input_scale(case) >= 500)
    mine = softmax_through_logsumexp(*cases[large].args)
    off = float((mine - expected[large]).abs().max())
    assert 1e-6 < off < diagnosis.input_scale(cases[large]) * torch.finfo(torch.float32).eps  # beyond atol 1e-6
    assert check("stable_softmax", softmax_through_logsumexp).status == "correct"


def test_the_inputs_rounding_widens_a_tolerance_only_so_far():
    exercise = EXERCISES["layer_norm"]
    small = diagnosis.Case("about 1", (torch.ones(4),))
    large = diagnosis.Case("about 1000", (torch.full((4,), 1000.0),))
    huge = diagnosis.Case("float16 near -20000: known only to 16", (torch.full((4,), -20000.0).half(),))
    assert diagnosis.tolerance(exercise, torch.float32, small) == (exercise.atol, exercise.rtol)
    assert diagnosis.tolerance(exercise, torch.float32, large)[0] == pytest.approx(1000 * 2**-23)
    assert diagnosis.tolerance(exercise, torch.float16, huge)[0] == 2e-3  # float16's own, not 20000 x its eps


def test_close_but_outside_the_tolerance_says_so_with_the_numbers():
    message = check(
        "layer_norm", lambda x, w, b, eps=1e-12: F.layer_norm(x, x.shape[-1:], w, b, eps).bfloat16().float()
    ).message
    assert "That is close, but outside the tolerance (1e-05) plus 1e-05 × |right value|: at index [" in message
    assert "An approximation (such as GELU's tanh form) or a lower precision somewhere?" in message


# --- one number, infinities, pairs ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("mine", "right", "said"),
    [
        (0.3779, 0.5126, ""),  # any two numbers have a ratio: it means nothing
        (0.25, 0.5, " It is the right value multiplied by exactly 1/2."),
        (30.0, 0.3, " It is the right value multiplied by exactly 100."),
        (1536.0, 768.0, " It is the right value multiplied by exactly 2."),
        (-0.7, 0.7, " It is minus the right value: a sign is flipped."),
        (0.125, 0.875, " It is 1 minus the right value."),
        (math.exp(2.5), 2.5, " It is exp of the right value."),
        (0.3, math.inf, ""),
        (1.0, 0.0, ""),  # a count of 1 where 0 is right: exp(0) = 1 means nothing
    ],
)
def test_one_number_is_related_to_the_right_one_only_when_the_numbers_say_so(mine, right, said):
    assert diagnosis.one_number_relation(mine, right) == said


def test_a_wrong_one_number_tensor_shows_both_values_and_no_factor():
    case = diagnosis.Case("one number", (torch.tensor(0.3),))
    exercise = EXERCISES["layer_norm"]
    text = diagnosis.value_problem(exercise, case, "Your output", torch.tensor(0.3779), torch.tensor(0.5126))
    assert text == "Your output is 0.3779; expected 0.5126."


def test_a_difference_against_an_infinity_is_shown_as_the_two_values():
    case = diagnosis.Case("scores", (torch.zeros(2, 3),))
    expected = torch.tensor([[0.0, -math.inf, 1.0], [2.0, 3.0, 4.0]])
    mine = torch.tensor([[0.0, -3.0e38, 1.0], [2.0, 3.0, 4.0]])
    text = diagnosis.value_problem(EXERCISES["layer_norm"], case, "Your output", mine, expected)
    assert text == (
        "Your output has the right shape but wrong values in 1 of 6 entries; at index [0, 1] the right value is "
        "-inf and yours is -3e+38."
    )
    assert "1.8e+308" not in text


def test_max_over_an_axis_used_as_a_tensor_gets_a_hint():
    returned = check("stable_softmax", lambda scores, dim=-1: scores.max(dim)).message
    assert "Your function returned a `torch.return_types.max`: the pair (values, indices)" in returned
    assert "Take its `.values`" in returned
    used = check("stable_softmax", lambda s, dim=-1: (s - s.max(dim, keepdim=True)).exp()).message
    assert "Hint: `.max(dim)` (like `.min(dim)`, `.sort`, `.topk` and `.median(dim)`) returns a pair" in used


# --- the case-kind summary names only what the case set isolates ----------------------------------


def summary_for(name, failing):
    cases, _, names = prepared(EXERCISES[name])
    return diagnosis.cases_summary(cases, [failing(case) for case in cases], names, EXERCISES[name].reference) or ""


def test_a_kind_that_fails_by_coincidence_is_not_named():
    # attention_rollout: the residual=True cases are exactly those that leave `residual` out
    coincidence = summary_for("attention_rollout", lambda case: len(case.args) == 1)
    assert "exactly those where" not in coincidence
    # mlm_head: the one unbatched case also has its own sizes
    unbatched = summary_for("mlm_head", lambda case: "unbatched" in case.tags)
    assert "batch axis" not in unbatched and "exactly" not in unbatched


def differ_alone_as_the_tag_says(tag, first, second, names, reference):
    """The test's own reading of "varied alone", written out per kind of tag."""
    a, b = first.args, second.args
    if tag == "defaults":
        signature = inspect.signature(reference).parameters
        return (
            len(a) < len(b)
            and all(diagnosis._same(b[k], signature[names[k]].default) for k in range(len(a), len(b)))
            and all(diagnosis._same(x, y) for x, y in zip(a, b, strict=False))
        )
    shared = [k for k in range(min(len(a), len(b))) if diagnosis._same(a[k], b[k])]
    changed = [k for k in range(max(len(a), len(b))) if k not in shared]
    if tag in ("masked", "no mask"):
        with_mask, without = (a, b) if tag == "masked" else (b, a)
        (k,) = changed
        return isinstance(with_mask[k], torch.Tensor) and (k >= len(without) or without[k] is None)
    if tag in ("float16", "bfloat16"):
        return all(a[k].dtype == getattr(torch, tag) and torch.equal(b[k].to(a[k].dtype), a[k]) for k in changed)
    if tag in ("batched", "unbatched"):
        big, small = (a, b) if tag == "batched" else (b, a)
        return all(any(torch.equal(item, small[k]) for item in big[k].reshape(-1, *small[k].shape)) for k in changed)
    if tag in ("square", "non-square", "odd", "not a power of two"):
        return all(
            isinstance(a[k], int) or (isinstance(a[k], torch.Tensor) and a[k].shape != b[k].shape) for k in changed
        )
    return len(changed) == 1


@pytest.mark.parametrize("name", NAMES)
def test_every_kind_the_summary_names_is_varied_alone_in_some_pair_of_cases(name):
    exercise = EXERCISES[name]
    cases, _, names = prepared(exercise)
    described = {tag: description for tag, description, _ in diagnosis._TAG_HINTS}
    for tag in sorted({tag for case in cases for tag in case.tags}):
        failing = [tag in case.tags for case in cases]
        if all(failing):
            continue
        summary = diagnosis.cases_summary(cases, failing, names, exercise.reference) or ""
        named = (f"where {described[tag]}." if tag in described else f"tagged {tag!r}.") in summary
        pair = diagnosis.varied_alone(cases, tag, names, exercise.reference)
        assert named == (pair is not None), (tag, summary)
        if pair is not None:
            first, second = (cases[i] for i in pair)
            assert tag in first.tags and tag not in second.tags
            assert differ_alone_as_the_tag_says(tag, first, second, names, exercise.reference), (tag, pair)


def test_varied_alone_finds_the_pairs_that_isolate_a_kind():
    x = torch.randn(2, 3, 4)
    cases = [
        diagnosis.Case("batched", (x, 2), ("batched",)),
        diagnosis.Case("one item of it", (x[1], 2), ("unbatched",)),
        diagnosis.Case("float16", (x.half(), 2), ("batched", "float16")),
        diagnosis.Case("other sizes", (torch.randn(5, 4), 3), ("unbatched",)),
    ]
    assert diagnosis.varied_alone(cases, "batched") == (0, 1)
    assert diagnosis.varied_alone(cases, "float16") == (2, 0)
    assert diagnosis.varied_alone(cases[2:], "float16") is None  # nothing but the float16 case is batched
    assert diagnosis.varied_alone([cases[0], cases[3]], "batched") is None  # other sizes, other values
    assert "exactly those where there are batch" in diagnosis.cases_summary(cases, [True, False, True, False])
    assert "exactly" not in diagnosis.cases_summary([cases[0], cases[3]], [True, False])


# --- solution() shows every step ------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_the_solution_shows_every_private_function_of_its_module_that_it_calls(name):
    text = solution(name).text
    module = sys.modules[EXERCISES[name].reference.__module__]
    for called in set(re.findall(r"\b(_[a-z][a-z0-9_]*)\(", text)):
        helper = getattr(module, called, None)
        if inspect.isfunction(helper) and helper.__module__ == module.__name__:
            assert f"def {called}(" in text, f"solution({name!r}) calls {called} without showing it"


def test_the_masked_softmax_solution_shows_how_fully_masked_rows_are_zeroed():
    text = solution("masked_softmax").text
    assert "def _masked_softmax(" in text and "def _zero_fully_masked_rows(" in text


def test_an_input_that_holds_nan_and_is_left_alone_is_unchanged():
    from bertcourse.exercises.sandbox import _same_input

    before = torch.tensor([1.0, float("nan"), float("inf")])
    assert _same_input(before, before.clone())
    changed = before.clone()
    changed[0] = 2.0
    assert not _same_input(before, changed)
    filled = before.clone().nan_to_num_(0.0)  # a learner who overwrote the NaN in place
    assert not _same_input(before, filled)
    assert _same_input(torch.tensor([1, 2]), torch.tensor([1, 2])) and not _same_input(
        torch.tensor([1, 2]), torch.tensor([1.0, 2.0])
    )


# --- a package model built to read the answer off it ------------------------------------------------


def count_by_building_the_model(config):
    return sum(p.numel() for p in bc.BertModel(config).parameters())  # notebook 07's own cell, on the config


def count_on_the_meta_device(config):
    d = config.hidden_size
    with torch.device("meta"):  # one of the package's layers, times the number of layers
        layer = bc.EncoderLayer(d, config.num_attention_heads, config.intermediate_size)
    tables = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * d + 2 * d
    return tables + config.num_hidden_layers * sum(p.numel() for p in layer.parameters()) + d * d + d


@pytest.mark.parametrize("fn", [count_by_building_the_model, count_on_the_meta_device])
def test_a_package_model_built_to_count_its_parameters_is_told_so(fn):
    result = check("count_parameters", fn)
    assert result.status == "wrong", result.message
    assert result.message.startswith("❌ Wrong: this builds bertcourse's own `bertcourse."), result.message
    assert "without building the model" in result.message
    with engine.judging_the_package():
        assert check("count_parameters", fn).status == "correct"
    own_modules = torch.nn.TransformerEncoderLayer  # PyTorch's layer, not the package's: the learner's own count

    def count_with_torchs_layer(config):
        d = config.hidden_size
        layer = own_modules(d, config.num_attention_heads, config.intermediate_size)
        tables = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * d + 2 * d
        return tables + config.num_hidden_layers * sum(p.numel() for p in layer.parameters()) + d * d + d

    assert check("count_parameters", count_with_torchs_layer).status == "correct"


def test_a_factor_per_slice_is_named_only_where_a_slice_holds_several_different_numbers():
    exercise = EXERCISES["layer_norm"]
    case = diagnosis.Case("one number per query", (torch.zeros(4, 1),))
    right = torch.tensor([[1.0], [2.0], [3.0], [4.0]])  # (q_len, 1): any wrong column is a factor per row
    text = diagnosis.value_problem(exercise, case, "`sum`", right * torch.tensor([[1.5], [0.5], [2.0], [1.2]]), right)
    assert "factor of its own" not in text
    repeated = torch.tensor([[1.0, 2.0, 3.0]]).expand(2, 3)  # every replica's row the same mean
    mine = torch.tensor([[2.0], [5.0]]).expand(2, 3)  # each row its own number
    text = diagnosis.value_problem(exercise, case, "Your output", mine, repeated)
    assert "factor of its own" not in text and "cosine" not in text
    scaled_rows = torch.randn(3, 4, generator=torch.Generator().manual_seed(0)) * torch.tensor([[1.0], [2.0], [3.0]])
    text = diagnosis.value_problem(
        exercise, case, "Your output", scaled_rows, scaled_rows / torch.tensor([[1.0], [2.0], [3.0]])
    )
    assert "factor of its own" in text  # where the rows hold several numbers, it still says so


# --- an encoder layer's sub-layers: how often each was called, on what ------------------------------


def post_ln_attention_twice(x, attention, feed_forward, g1, b1, g2, b2, eps=1e-12):
    h = bc.layer_norm(x + attention(attention(x)), g1, b1, eps)
    return bc.layer_norm(h + feed_forward(h), g2, b2, eps)


def pre_ln_output_halved(x, attention, feed_forward, g1, b1, g2, b2, eps=1e-12):
    h = x + attention(bc.layer_norm(x, g1, b1, eps))
    return 0.5 * (h + feed_forward(bc.layer_norm(h, g2, b2, eps)))  # the right calls, a wrong sum


def test_a_wrong_layer_is_told_how_often_it_called_each_sub_layer_and_on_what():
    message = check("post_ln_layer", post_ln_attention_twice).message
    assert (
        "Inside your layer: `attention` called 2 times, on x, then attention(x); `feed_forward` called once, on "
        "something else. The right layer calls each once: attention on x, feed_forward on h = LN1(x + attention(x))."
    ) in message
    message = check("pre_ln_layer", pre_ln_output_halved).message
    assert "Inside your layer each sub-layer was called once, on the right input (attention on LN1(x)" in message
    message = check("parallel_layer", parallel_averaged).message
    assert "Inside your layer each sub-layer was called once, on the right input (attention on LN(x)" in message


def parallel_averaged(x, attention, feed_forward, weight, bias, eps=1e-12):
    n = bc.layer_norm(x, weight, bias, eps)
    return x + (attention(n) + feed_forward(n)) / 2  # the right calls, their outputs averaged


def test_a_random_answer_is_told_it_changes_with_the_seed():
    def noisy(x, w, b, eps=1e-12):
        return F.layer_norm(x, x.shape[-1:], w, b, eps) + 0.01 * torch.rand_like(x)

    assert "gives other numbers when the random generator is seeded otherwise" in check("layer_norm", noisy).message
    shifted = check("layer_norm", lambda x, w, b, eps=1e-12: F.layer_norm(x, x.shape[-1:], w, b, eps) * 1.37 + 0.1)
    assert "seeded otherwise" not in shifted.message  # a wrong answer that draws nothing is not called random
    listed = check("word_piece_targets", lambda tokens: [[False] * len(tokens)] * len(tokens))
    assert "is a list" in listed.message and "seeded otherwise" not in listed.message  # lists compare as lists
