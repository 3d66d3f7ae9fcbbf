"""The exercise checkers: the reference passes, every catalogued mistake gets its own hint,
and nothing a learner's function does or returns makes a checker raise."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import bertcourse as bc
from bertcourse.exercises import EXERCISES, CheckResult, check, prompt, solution

NAMES = list(EXERCISES)
MISTAKES = [
    pytest.param(name, mistake, id=f"{name}:{mistake.wrong.__name__}")
    for name in NAMES
    for mistake in EXERCISES[name].mistakes
]

COURSE_EXERCISES = {
    "qkv_projection",
    "attention_scores",
    "scaled_dot_product_attention",
    "padding_mask",
    "causal_mask",
    "sinusoidal_position_encoding",
    "split_heads",
    "merge_heads",
    "multi_head_attention",
    "layer_norm",
    "feed_forward",
    "bert_embeddings",
    "count_parameters",
}

# The mistakes the course promises to recognise, by the name of the function that makes them.
REQUIRED_MISTAKES = {
    "qkv_projection": {"_qkv_weights_transposed", "_qkv_k_and_v_swapped"},
    "attention_scores": {"_scores_keys_not_transposed", "_scores_keys_times_queries"},
    "scaled_dot_product_attention": {
        "_sdpa_no_scaling",
        "_sdpa_scaled_by_d_k",
        "_sdpa_softmax_over_queries",
        "_sdpa_mask_inverted",
        "_sdpa_mask_ignored",
        "_sdpa_keys_not_transposed",
    },
    "padding_mask": {"_padding_inverted", "_padding_off_by_one"},
    "causal_mask": {"_causal_upper_triangle", "_causal_diagonal_masked"},
    "sinusoidal_position_encoding": {
        "_sinusoid_sin_cos_swapped",
        "_sinusoid_i_instead_of_2i",
        "_sinusoid_exponent_not_divided",
        "_sinusoid_positions_from_1",
    },
    "split_heads": {"_split_no_transpose", "_split_plain_view", "_split_sequence_axis"},
    "merge_heads": {"_merge_no_transpose"},
    "multi_head_attention": {
        "_mha_no_output_projection",
        "_mha_scaled_by_sqrt_d_model",
        "_mha_split_without_transpose",
    },
    "layer_norm": {"_ln_over_batch", "_ln_unbiased_variance", "_ln_eps_outside_sqrt", "_ln_no_gamma_beta"},
    "feed_forward": {"_ffn_relu", "_ffn_tanh_gelu", "_ffn_no_biases"},
    "bert_embeddings": {
        "_embeddings_no_positions",
        "_embeddings_no_token_types",
        "_embeddings_no_layer_norm",
        "_embeddings_sinusoidal",
    },
    "count_parameters": {
        "_count_no_biases",
        "_count_no_layer_norm",
        "_count_no_pooler",
        "_count_one_layer",
        "_count_ffn_square",
    },
}


def not_implemented(*args):
    raise NotImplementedError


# --- the registry -------------------------------------------------------------------------------


def test_registry_holds_every_exercise_of_the_course():
    assert set(NAMES) == COURSE_EXERCISES


@pytest.mark.parametrize("name", NAMES)
def test_reference_is_the_package_function_of_the_same_name(name):
    assert EXERCISES[name].reference is getattr(bc, name)


@pytest.mark.parametrize("name", NAMES)
def test_catalogue_has_at_least_three_mistakes_with_distinct_names_and_hints(name):
    mistakes = EXERCISES[name].mistakes
    assert len(mistakes) >= 3
    assert len({m.name for m in mistakes}) == len(mistakes)
    assert len({m.hint for m in mistakes}) == len(mistakes)
    assert REQUIRED_MISTAKES[name] <= {m.wrong.__name__ for m in mistakes}


@pytest.mark.parametrize("name", NAMES)
def test_prompt_says_what_the_function_receives_and_returns(name):
    text = repr(prompt(name))
    assert text.startswith(f"Exercise `{name}`: your function receives")
    assert "return" in text


def test_unknown_name_is_a_value_error_listing_the_known_names():
    with pytest.raises(ValueError, match="unknown exercise 'layernorm'") as error:
        check("layernorm", not_implemented)
    assert all(name in str(error.value) for name in NAMES)
    with pytest.raises(ValueError, match="known exercises"):
        solution("attention")


# --- the three verdicts -------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_reference_is_correct(name):
    result = check(name, EXERCISES[name].reference)
    assert isinstance(result, CheckResult)
    assert (result.status, result.passed, result.mistake) == ("correct", True, None)
    cases = len(EXERCISES[name].cases())
    assert result.message == f"✅ Correct: `{name}` matches the reference on all {cases} test cases."


@pytest.mark.parametrize("name", NAMES)
def test_skeleton_is_not_attempted_with_a_hint_to_start(name):
    result = check(name, not_implemented)
    assert result.status == "not_attempted"
    assert result.message.startswith("⏳ Not attempted yet: replace `raise NotImplementedError` with your code.")
    assert result.message.endswith(f"Start with: {EXERCISES[name].start}")
    assert "\n" not in result.message


@pytest.mark.parametrize(("name", "mistake"), MISTAKES)
def test_each_catalogued_mistake_is_caught_with_its_own_hint(name, mistake):
    result = check(name, mistake.wrong)
    assert (result.status, result.mistake) == ("wrong", mistake.name)
    assert result.message == f"❌ Wrong: looks like {mistake.name}. Hint: {mistake.hint}"
    others = [m for m in EXERCISES[name].mistakes if m is not mistake]
    assert not any(other.hint in result.message for other in others)


# --- learner code written differently from the package ------------------------------------------


def attention_with_inf_fill(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    weights = F.softmax(scores, dim=-1)
    return weights @ v, weights


def attention_with_inverted_inf_mask(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))  # True treated as "ignore"
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def layer_norm_with_std(x, weight, bias, eps):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.std(-1, keepdim=True) ** 2 + eps) * weight + bias


def sinusoids_with_loops(max_len, d_model):
    table = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for i in range(0, d_model, 2):
            table[pos, i] = math.sin(pos / 10000 ** (i / d_model))
            table[pos, i + 1] = math.cos(pos / 10000 ** (i / d_model))
    return table


def mha_with_pytorch_kernel(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q, k, v = (bc.split_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
    return bc.merge_heads(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)) @ w_o


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("attention_scores", lambda q, k: torch.einsum("...qd,...kd->...qk", q, k)),
        ("scaled_dot_product_attention", attention_with_inf_fill),
        ("padding_mask", lambda lengths, max_len: torch.stack([torch.arange(max_len) < n for n in lengths])),
        ("causal_mask", lambda n: torch.tril(torch.ones(n, n)).bool()),
        ("sinusoidal_position_encoding", sinusoids_with_loops),
        ("split_heads", lambda x, h: x.reshape(*x.shape[:2], h, -1).permute(0, 2, 1, 3)),
        ("multi_head_attention", mha_with_pytorch_kernel),
        ("layer_norm", lambda x, w, b, eps: F.layer_norm(x, x.shape[-1:], w, b, eps)),
        ("feed_forward", lambda x, w1, b1, w2, b2: F.gelu(x @ w1 + b1) @ w2 + b2),
    ],
)
def test_correct_solutions_written_differently_pass(name, fn):
    assert check(name, fn).status == "correct"


def tanh_gelu_block(x, w1, b1, w2, b2):
    return F.gelu(x @ w1 + b1, approximate="tanh") @ w2 + b2


@pytest.mark.parametrize(
    ("name", "fn", "mistake"),
    [
        ("scaled_dot_product_attention", attention_with_inverted_inf_mask, "the mask inverted"),
        ("layer_norm", layer_norm_with_std, "the unbiased variance"),
        ("feed_forward", tanh_gelu_block, "the tanh approximation of GELU"),
        ("causal_mask", lambda n: torch.triu(torch.ones(n, n, dtype=torch.bool)), "the upper triangle"),
        ("merge_heads", lambda x: x.reshape(x.shape[0], x.shape[2], -1), "a reshape without transposing back"),
    ],
)
def test_mistakes_written_differently_are_recognised(name, fn, mistake):
    assert check(name, fn).mistake == mistake


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
def test_a_2d_only_transpose_is_recognised_from_its_errors_on_batches():
    result = check("attention_scores", lambda q, k: q @ k.T)
    assert result.mistake == "a transpose for 2-D matrices only (`k.T`)"


# --- a clear message for each way of going wrong ------------------------------------------------


def wrong_message(name, fn):
    result = check(name, fn)
    assert result.status == "wrong"
    assert result.mistake is None
    return result.message


def test_unknown_wrong_values_report_the_first_case_its_inputs_and_the_largest_difference():
    message = wrong_message("layer_norm", lambda x, weight, bias, eps: x * 2)
    first, inputs, problem = message.split("\n")
    assert first == "❌ Wrong on test case 1 of 3 (one sentence of 5 tokens, d 8, eps 1e-12)."
    assert inputs == "Inputs: x (5, 8), weight (8,), bias (8,), eps = 1e-12."
    assert problem.startswith("Your output has the right shape but wrong values: the largest absolute difference is ")


def test_wrong_shape_reports_expected_and_received():
    assert wrong_message("layer_norm", lambda x, w, b, eps: x[..., :2]).endswith(
        "Your output has shape (5, 2); expected (5, 8)."
    )


@pytest.mark.parametrize(
    ("returned", "problem"),
    [
        (None, "Your output is None: did you forget to `return` it?"),
        ([1.0, 2.0], "Your output is a list; expected a torch.Tensor."),
        ("mean", "Your output is a str; expected a torch.Tensor."),
        (np.zeros((5, 8), dtype=np.float32), "Your output is a NumPy ndarray; expected a torch.Tensor."),
    ],
)
def test_wrong_types_are_named(returned, problem):
    assert problem in wrong_message("layer_norm", lambda x, w, b, eps: returned)


def test_a_generator_is_named():
    message = wrong_message("layer_norm", lambda x, w, b, eps: (row for row in x))
    assert message.endswith(
        "Your output is a generator; expected a torch.Tensor. Did you write `yield` instead of `return`?"
    )


def test_nan_and_inf_are_named():
    assert "Your output contains NaN in 40 of 40 entries" in wrong_message(
        "layer_norm", lambda x, w, b, eps: x * math.nan
    )
    assert "Your output contains inf in 40 of 40 entries" in wrong_message(
        "layer_norm", lambda x, w, b, eps: x * math.inf
    )


def test_dtypes_are_named_and_a_right_integer_mask_gets_told_to_be_boolean():
    assert wrong_message("layer_norm", lambda x, w, b, eps: x.double()).endswith(
        "Your output has dtype torch.float64; expected torch.float32."
    )
    message = wrong_message("padding_mask", lambda lengths, max_len: (torch.arange(max_len) < lengths[:, None]).long())
    assert "Your output has the right values but dtype torch.int64; a mask must be boolean" in message


def test_a_wrong_boolean_mask_reports_the_first_differing_entry():
    message = wrong_message("causal_mask", lambda n: torch.ones(n, n, dtype=torch.bool))
    assert message.endswith(
        "Your output differs in 6 of 16 entries; the first is at index [0, 1]: expected False, got True."
    )


def test_tuples_of_the_wrong_kind_or_length():
    one = wrong_message("scaled_dot_product_attention", lambda q, k, v, mask=None: q)
    assert one.endswith("Your function returned a Tensor; expected a tuple (output, weights).")
    short = wrong_message("qkv_projection", lambda x, w_q, w_k, w_v: (x @ w_q,))
    assert short.endswith("Your function returned a tuple of 1 item; expected 3: (q, k, v).")
    item = wrong_message("scaled_dot_product_attention", lambda q, k, v, mask=None: (v[..., :1, :], None))
    assert "`output` has shape (1, 5); expected (4, 5)." in item


def test_an_integer_count_is_required_and_an_error_in_it_is_quantified():
    assert wrong_message("count_parameters", lambda config: 1.5).endswith("Your count is a float; expected an int.")
    assert "return a Python int" in wrong_message("count_parameters", lambda config: torch.tensor(3))
    assert wrong_message("count_parameters", lambda config: 100_000_000).endswith(
        "Your count is 100,000,000; expected 109,482,240 (off by -9,482,240)."
    )
    assert check("count_parameters", lambda config: np.int64(bc.count_parameters(config))).status == "correct"


def learner_that_raises(x, weight, bias, eps):
    mean = x.mean(dim=-1, keepdim=True)
    raise ValueError(f"stuck after the mean {tuple(mean.shape)}")


def test_an_exception_reports_its_type_message_and_the_learners_line_without_a_traceback():
    message = wrong_message("layer_norm", learner_that_raises)
    problem = message.split("\n")[-1]
    assert problem.startswith("Your function raised ValueError: stuck after the mean (5, 1) (line ")
    assert problem.endswith(': `raise ValueError(f"stuck after the mean {tuple(mean.shape)}")`)')
    assert "Traceback" not in message and "bertcourse" not in message


def test_known_pytorch_errors_come_with_a_hint():
    message = wrong_message("merge_heads", lambda x: x.transpose(1, 2).view(x.shape[0], x.shape[2], -1))
    assert message.endswith("Hint: `.view` needs a contiguous tensor; after a transpose use `.reshape(...)` instead.")
    no_mask = wrong_message("scaled_dot_product_attention", lambda q, k, v: bc.scaled_dot_product_attention(q, k, v))
    assert "takes 3 positional arguments but 4 were given" in no_mask
    assert "an optional one (like `mask=None`) needs a default value." in no_mask


def test_not_implemented_after_the_first_case_is_a_missing_part():
    def unmasked_only(q, k, v, mask=None):
        if mask is not None:
            raise NotImplementedError("masks later")
        return bc.scaled_dot_product_attention(q, k, v)

    message = wrong_message("scaled_dot_product_attention", unmasked_only)
    assert message.startswith("❌ Wrong on test case 2 of 3")
    assert message.endswith("Your function still raises NotImplementedError for this case.")


def test_changing_an_input_in_place_is_wrong_even_with_the_right_output():
    def in_place(x, weight, bias, eps):
        x -= x.mean(dim=-1, keepdim=True)
        return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight + bias

    message = wrong_message("layer_norm", in_place)
    assert message.startswith("❌ Wrong: your results are right, but your function changes its input `x` in place.")


def test_passing_the_result_instead_of_the_function():
    result = check("causal_mask", bc.causal_mask(3))
    assert result.status == "wrong"
    assert result.message.startswith('❌ Wrong: pass your function itself, without calling it: `check("causal_mask", ')


# --- never raises, never disturbs, always the same text -----------------------------------------


class Hostile:
    """Every comparison, conversion and container method raises."""

    def _boom(self, *args, **kwargs):
        raise RuntimeError("hostile")

    __eq__ = __ne__ = __lt__ = __bool__ = __len__ = __iter__ = __int__ = __float__ = __index__ = __repr__ = _boom
    __hash__ = None


class HostileTuple(tuple):
    def __len__(self):
        raise RuntimeError("hostile length")


class HostileTensor(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError("hostile tensor")


def recurse_forever(*args):
    return recurse_forever(*args)


def zero_every_input(*args):
    for arg in args:
        if isinstance(arg, torch.Tensor) and arg.is_floating_point():
            arg.zero_()
    return args[0]


def call_exit(*args):
    raise SystemExit(1)


WEIRD = [
    lambda *args: None,
    lambda *args: [1, 2],
    lambda *args: "a string",
    lambda *args: np.ones(3),
    lambda *args: (i for i in range(3)),
    lambda *args: Hostile(),
    lambda *args: HostileTuple((torch.zeros(2), torch.zeros(2))),
    lambda *args: torch.zeros(2, 3).as_subclass(HostileTensor),
    lambda *args: (Hostile(), Hostile(), Hostile()),
    lambda *args: torch.full((2, 3), math.inf),
    lambda *args: torch.zeros(2, 3, dtype=torch.complex64),
    lambda *args: torch.tensor(math.nan),
    lambda *args: 42,
    lambda *args: True,
    lambda: None,
    recurse_forever,
    zero_every_input,
    call_exit,
]


@pytest.mark.parametrize("name", NAMES)
def test_no_learner_function_makes_a_checker_raise(name):
    for fn in WEIRD:
        result = check(name, fn)
        assert result.status == "wrong", (fn, result.message)
        assert result.message.startswith("❌ Wrong")
        assert " at 0x" not in result.message


def test_results_display_the_same_text_every_time():
    first = check("split_heads", lambda x, h: x.view(x.shape[0], h, x.shape[1], -1))
    again = check("split_heads", lambda x, h: x.view(x.shape[0], h, x.shape[1], -1))
    assert repr(first) == repr(again) == str(first) == first.message
    assert first._repr_markdown_() == first.message
    wrong = check("layer_norm", lambda x, w, b, eps: x)
    assert wrong._repr_markdown_() == wrong.message.replace("\n", "  \n")


def test_checking_leaves_the_global_random_state_alone():
    state = torch.get_rng_state()
    check("multi_head_attention", bc.multi_head_attention)
    check("bert_embeddings", not_implemented)
    assert torch.equal(torch.get_rng_state(), state)


# --- solutions ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_solution_shows_the_reference_source_as_a_python_block(name):
    shown = solution(name)
    assert repr(shown).startswith(f"def {name}(")
    assert shown._repr_markdown_() == f"```python\n{shown.text}```"


def test_solutions_include_the_helpers_that_hold_the_formula():
    assert "def _teaching_attention(" in solution("scaled_dot_product_attention").text
    assert "def parameter_breakdown(" in solution("count_parameters").text


def test_swapped_arguments_are_explained():
    with pytest.raises(ValueError, match=r'the exercise name comes first.*check\("layer_norm", my_layer_norm\)'):
        check(lambda x, weight, bias, eps: x, "layer_norm")
