"""The exercise checkers: the reference passes, every catalogued mistake gets its own hint,
mistakes nobody catalogued still get a useful message, and nothing a learner's function does or
returns makes a checker raise, hang, print or change the notebook's state."""

import ast
import dataclasses
import json
import math
import random
import re
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import bertcourse as bc
from bertcourse.exercises import (
    EXERCISES,
    CheckResult,
    check,
    diagnosis,
    engine,
    progress,
    prompt,
    registry,
    sandbox,
    solution,
)

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

# The exercises each notebook asks for, read from its check and use cells (the others stay checkable by name).
NOTEBOOK_FILES = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHECK_CELL = re.compile(r'^(?:\w+ = use|check)\("(\w+)", my_\w+\)\s*$', re.M)


def asked_by(path: Path) -> list[str]:
    """The exercise names of the notebook's check and use cells (``check("name", my_name)``,
    ``name = use("name", my_name)``), in order."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [
        name for cell in cells if cell["cell_type"] == "code" for name in CHECK_CELL.findall("".join(cell["source"]))
    ]


NOTEBOOK_EXERCISES = {path.name[:2]: asked_by(path) for path in NOTEBOOK_FILES}
NEW_EXERCISES = {name for names in NOTEBOOK_EXERCISES.values() for name in names} - COURSE_EXERCISES

# The mistakes the course promises to recognise, by the name of the function that makes them.
REQUIRED_MISTAKES = {
    "qkv_projection": {"_qkv_weights_transposed", "_qkv_k_and_v_swapped"},
    "attention_scores": {"_scores_keys_not_transposed", "_scores_keys_times_queries", "_scores_all_axes_reversed"},
    "scaled_dot_product_attention": {
        "_sdpa_no_scaling",
        "_sdpa_scaled_by_d_k",
        "_sdpa_softmax_over_queries",
        "_sdpa_softmax_over_dim_1",
        "_sdpa_precedence_in_the_scale",
        "_sdpa_scaled_after_softmax",
        "_sdpa_scaled_by_sqrt_d_v",
        "_sdpa_scaled_by_8",
        "_sdpa_outputs_swapped",
        "_sdpa_if_mask",
        "_sdpa_fill_minus_1e9",
        "_sdpa_mask_inverted",
        "_sdpa_mask_ignored",
        "_sdpa_keys_not_transposed",
    },
    "padding_mask": {"_padding_inverted", "_padding_off_by_one", "_padding_default_not_handled"},
    "causal_mask": {"_causal_upper_triangle", "_causal_diagonal_masked"},
    "sinusoidal_position_encoding": {
        "_sinusoid_sin_cos_swapped",
        "_sinusoid_i_instead_of_2i",
        "_sinusoid_exponent_not_divided",
        "_sinusoid_exponent_doubled",
        "_sinusoid_integer_exponent",
        "_sinusoid_positions_from_1",
    },
    "split_heads": {"_split_no_transpose", "_split_plain_view", "_split_sequence_axis"},
    "merge_heads": {"_merge_no_transpose", "_merge_view_after_transpose"},
    "multi_head_attention": {
        "_mha_no_output_projection",
        "_mha_scaled_by_sqrt_d_model",
        "_mha_split_without_transpose",
        "_mha_if_mask",
    },
    "layer_norm": {
        "_ln_over_batch",
        "_ln_unbiased_variance",
        "_ln_eps_outside_sqrt",
        "_ln_no_gamma_beta",
        "_ln_annotated_transformer",
        "_ln_gamma_beta_swapped",
    },
    "feed_forward": {"_ffn_relu", "_ffn_tanh_gelu", "_ffn_no_biases", "_ffn_residual_inside", "_ffn_dropout_left_on"},
    "bert_embeddings": {
        "_embeddings_no_positions",
        "_embeddings_no_token_types",
        "_embeddings_no_layer_norm",
        "_embeddings_sinusoidal",
    },
    "qkv_from_linear": {"_linear_not_transposed", "_linear_no_biases"},
    "stable_softmax": {"_softmax_naive", "_softmax_global_max", "_softmax_dim_ignored"},
    "masked_softmax": {
        "_masked_minus_inf",
        "_masked_finite_fill_only",
        "_masked_minus_1e9",
        "_masked_minus_1e4",
        "_masked_float32_minimum",
        "_masked_if_mask",
    },
    "key_padding_mask": {"_kpm_not_inverted", "_kpm_bitwise_not", "_kpm_one_minus"},
    "alibi_bias": {"_alibi_h_from_zero", "_alibi_no_interleaving", "_alibi_signed_offset"},
    "split_fused_qkv": {"_fused_heads_first", "_fused_no_transpose"},
    "post_ln_layer": {"_post_as_pre", "_post_norm_before_adding", "_post_feed_forward_reads_x", "_post_default_eps"},
    "pre_ln_layer": {"_pre_as_post", "_pre_residual_from_the_normalised", "_pre_output_normalised"},
    "mlm_head": {"_mlm_no_decoder_bias", "_mlm_dense_not_transposed", "_mlm_norm_before_gelu", "_mlm_softmax"},
    "hf_to_ours": {
        "_rename_prefix_kept",
        "_rename_old_names_kept",
        "_rename_derived_kept",
        "_rename_output_norm_first",
    },
    "first_difference": {
        "_first_nan_passes",
        "_first_absolute_only",
        "_first_relative_to_yours",
        "_first_largest",
        "_first_last",
        "_first_missing_skipped",
        "_first_your_order",
        "_first_shapes_broadcast",
    },
    "relative_error_by_layer": {"_relative_absolute", "_relative_by_yours", "_relative_elementwise"},
    "count_parameters": {
        "_count_no_biases",
        "_count_no_layer_norm",
        "_count_no_pooler",
        "_count_one_layer",
        "_count_ffn_square",
        "_count_no_positions",
        "_count_no_output_projection",
        "_count_one_layer_norm_per_layer",
    },
}

# The kinds of case each exercise must hold, so that the mistakes that hide in one kind show.
REQUIRED_TAGS = {
    "qkv_projection": {"batched", "square", "non-square"},
    "attention_scores": {"batched", "square", "non-square"},
    "scaled_dot_product_attention": {"batched", "masked", "no mask", "square", "non-square", "float16", "bfloat16"},
    "padding_mask": {"defaults", "square", "non-square"},
    "sinusoidal_position_encoding": {"square", "non-square", "odd"},
    "qkv_from_linear": {"batched", "unbatched", "square", "non-square", "float16"},
    "stable_softmax": {"batched", "square", "float16", "defaults"},
    "masked_softmax": {"batched", "unbatched", "masked", "no mask", "fully masked row", "float16", "bfloat16"},
    "alibi_bias": {"not a power of two", "square", "non-square"},
    "split_fused_qkv": {"batched", "square", "non-square"},
    "post_ln_layer": {"batched", "masked", "defaults"},
    "pre_ln_layer": {"batched", "masked", "defaults"},
    "mlm_head": {"batched", "unbatched", "defaults"},
    "hf_to_ours": {"defaults"},
    "split_heads": {"batched", "square", "non-square"},
    "merge_heads": {"batched", "square", "non-square"},
    "multi_head_attention": {"batched", "masked", "no mask"},
    "layer_norm": {"batched", "defaults"},
    "feed_forward": {"batched", "square", "non-square"},
    "bert_embeddings": {"batched", "defaults"},
}
KNOWN_TAGS = {
    "batched",
    "unbatched",
    "odd",
    "not a power of two",
    "masked",
    "no mask",
    "fully masked row",
    "float16",
    "bfloat16",
    "square",
    "non-square",
    "defaults",
    "None given",
}


def not_implemented(*args):
    raise NotImplementedError


def wrong_message(name, fn):
    result = check(name, fn)
    assert result.status == "wrong", result.message
    assert result.mistake is None, result.message
    return result.message


# --- the registry -------------------------------------------------------------------------------


def test_registry_holds_every_exercise_of_the_course():
    assert set(NAMES) >= COURSE_EXERCISES | NEW_EXERCISES


def test_the_registry_says_what_each_notebook_asks_as_its_check_cells_do():
    """NOTEBOOK_ASKS is the one list of the exercises a notebook asks for; the notebooks' check cells agree."""
    assert {number: tuple(names) for number, names in NOTEBOOK_EXERCISES.items() if names} == registry.NOTEBOOK_ASKS
    assert registry.RETIRED.isdisjoint(name for names in registry.NOTEBOOK_ASKS.values() for name in names)


def test_the_registry_collects_every_exercise_its_catalogues_define_in_course_order():
    """An exercise is written once, as a constant of its catalogue module; the registry finds it there."""
    exercise_type = type(EXERCISES["layer_norm"])
    defined = [value for module in registry.CATALOGUES for value in vars(module).values()]
    defined = [value.name for value in defined if isinstance(value, exercise_type)]
    assert sorted(defined) == sorted(NAMES), "an exercise defined twice, or one the registry does not collect"
    numbers = [EXERCISES[name].notebook for name in NAMES]
    assert numbers == sorted(numbers), "EXERCISES is not in the order of the notebooks"


def test_every_function_a_catalogue_defines_is_used():
    """No dead code in the catalogues: each function a catalogue module defines is named somewhere in the
    exercises package besides its own definition (as a mistake, a case set, a variant or a helper)."""
    package = Path(registry.__file__).parent
    named = set()
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                named.add(node.id)
            elif isinstance(node, ast.Attribute):
                named.add(node.attr)
            elif isinstance(node, ast.ImportFrom):
                named.update(alias.name for alias in node.names)
    unused = [
        f"{module.__name__}.{node.name}"
        for module in registry.CATALOGUES
        for node in ast.parse(Path(module.__file__).read_text(encoding="utf-8")).body
        if isinstance(node, ast.FunctionDef) and node.name not in named
    ]
    assert not unused, f"functions no exercise uses: {unused}"


@pytest.mark.parametrize("notebook", sorted(NOTEBOOK_EXERCISES))
def test_every_notebook_asks_for_two_to_four_exercises(notebook):
    names = NOTEBOOK_EXERCISES[notebook]
    assert 2 <= len(names) <= 4
    assert all(EXERCISES[name].notebook == notebook for name in names)


@pytest.mark.parametrize("name", NAMES)
def test_reference_is_the_package_function_of_the_same_name(name):
    reference = EXERCISES[name].reference
    assert reference.__module__.startswith("bertcourse.") and not reference.__module__.startswith(
        "bertcourse.exercises"
    )
    assert getattr(sys.modules[reference.__module__], name) is reference
    if name in COURSE_EXERCISES:
        assert getattr(bc, name) is reference


@pytest.mark.parametrize("name", NAMES)
def test_catalogue_has_at_least_three_mistakes_with_distinct_names_and_hints(name):
    mistakes = EXERCISES[name].mistakes
    assert len(mistakes) >= 3
    assert len({m.name for m in mistakes}) == len(mistakes)
    assert len({m.hint for m in mistakes}) == len(mistakes)
    assert REQUIRED_MISTAKES.get(name, set()) <= {m.wrong.__name__ for m in mistakes}


@pytest.mark.parametrize("name", NAMES)
def test_cases_are_tagged_with_what_they_test(name):
    cases = EXERCISES[name].cases()
    tags = {tag for case in cases for tag in case.tags}
    assert len(cases) >= 3
    assert tags <= KNOWN_TAGS
    assert REQUIRED_TAGS.get(name, set()) <= tags
    assert EXERCISES[name].notebook


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


def test_swapped_arguments_are_explained():
    with pytest.raises(ValueError, match=r'the exercise name comes first.*check\("layer_norm", my_layer_norm\)'):
        check(lambda x, weight, bias, eps: x, "layer_norm")


# --- the three verdicts -------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_reference_is_correct(name):
    with engine.judging_the_package():  # outside it, the package's own function is told to write its own
        result = check(name, EXERCISES[name].reference)
    assert isinstance(result, CheckResult)
    assert (result.status, result.passed, result.mistake) == ("correct", True, None), result.message
    cases = len(EXERCISES[name].cases())
    checked = ", gradients included" if EXERCISES[name].gradients else ""
    assert result.message == f"✅ Correct: `{name}` matches the reference on all {cases} test cases{checked}."


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
    assert (result.status, result.mistake) == ("wrong", mistake.name), result.message
    assert result.message == f"❌ Wrong: looks like {mistake.name}. Hint: {mistake.hint}"


# --- learner code written differently from the package ------------------------------------------


def attention_with_inf_fill(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    weights = F.softmax(scores, dim=-1)
    return weights @ v, weights


def attention_scaling_queries_first(q, k, v, mask=None):
    scores = (q / math.sqrt(q.shape[-1])) @ k.mT
    if mask is not None:
        scores = torch.where(mask, scores, torch.finfo(q.dtype).min)
    weights = scores.softmax(-1)
    return weights @ v, weights


def attention_with_inverted_inf_mask(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask, float("-inf"))  # True treated as "ignore"
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


def layer_norm_with_std(x, weight, bias, eps=1e-12):
    return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.std(-1, keepdim=True) ** 2 + eps) * weight + bias


def sinusoids_with_loops(max_len, d_model):
    table = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for i in range(0, d_model, 2):
            table[pos, i] = math.sin(pos / 10000 ** (i / d_model))
            if i + 1 < d_model:
                table[pos, i + 1] = math.cos(pos / 10000 ** (i / d_model))
    return table


def mha_with_pytorch_kernel(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    q, k, v = (bc.split_heads(x @ w, num_heads) for w in (w_q, w_k, w_v))
    return bc.merge_heads(F.scaled_dot_product_attention(q, k, v, attn_mask=mask)) @ w_o


def padding_mask_with_default(lengths, max_len=None):
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.stack([torch.arange(max_len) < n for n in lengths])


@pytest.mark.parametrize(
    ("name", "fn"),
    [
        ("attention_scores", lambda q, k: torch.einsum("...qd,...kd->...qk", q, k)),
        ("scaled_dot_product_attention", attention_with_inf_fill),
        ("scaled_dot_product_attention", attention_scaling_queries_first),
        ("padding_mask", padding_mask_with_default),
        ("causal_mask", lambda n: torch.tril(torch.ones(n, n)).bool()),
        ("sinusoidal_position_encoding", sinusoids_with_loops),
        ("split_heads", lambda x, h: x.reshape(*x.shape[:2], h, -1).permute(0, 2, 1, 3)),
        ("multi_head_attention", mha_with_pytorch_kernel),
        (
            "layer_norm",
            lambda x, w, b, eps=1e-12: (x - x.mean(-1, keepdim=True)) * w / (x.var(-1, False, True) + eps) ** 0.5 + b,
        ),
        ("feed_forward", lambda x, w1, b1, w2, b2: F.gelu(x @ w1 + b1) @ w2 + b2),
    ],
)
def test_correct_solutions_written_differently_pass(name, fn):
    result = check(name, fn)
    assert result.status == "correct", result.message


def tanh_gelu_block(x, w1, b1, w2, b2):
    return F.gelu(x @ w1 + b1, approximate="tanh") @ w2 + b2


@pytest.mark.parametrize(
    ("name", "fn", "mistake"),
    [
        ("scaled_dot_product_attention", attention_with_inverted_inf_mask, "the mask inverted"),
        ("layer_norm", layer_norm_with_std, "the unbiased variance"),
        ("feed_forward", tanh_gelu_block, "the tanh approximation of GELU"),
        (
            "feed_forward",
            lambda x, w1, b1, w2, b2: torch.nn.Dropout(0.1)(F.gelu(x @ w1 + b1)) @ w2 + b2,
            "dropout left on",
        ),
        ("causal_mask", lambda n: torch.triu(torch.ones(n, n, dtype=torch.bool)), "the upper triangle"),
        ("merge_heads", lambda x: x.reshape(x.shape[0], x.shape[2], -1), "a reshape without transposing back"),
        ("attention_scores", lambda q, k: q @ k.T, "a transpose for 2-D matrices only (`k.T`)"),
        ("attention_scores", lambda q, k: torch.matmul(q, k.t()), "a transpose for 2-D matrices only (`k.t()`)"),
    ],
)
def test_mistakes_written_differently_are_recognised(name, fn, mistake):
    assert check(name, fn).mistake == mistake


# --- solutions show the core --------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_solution_shows_the_core_without_argument_checks(name):
    shown = solution(name)
    assert "is not available" not in shown.text, shown.text  # the module must define the core
    exercise = EXERCISES[name]
    header = " ".join(line.removeprefix("# ") for line in shown.text.split("\n\n")[0].split("\n"))
    assert header.startswith(f"The package's {exercise.reference.__module__}.{name} ")
    if exercise.core_name() == exercise.reference.__name__:  # a public function with no checks to leave out
        assert "(it has no argument checks to leave out)" in header
    else:
        assert f"checks its arguments, then calls {exercise.core_name()}, shown here" in header
    first = next(line for line in shown.text.split("\n") if line.startswith("def "))
    assert first.startswith(f"def {exercise.core_name()}(")  # the core first, my_<name> last (test_solutions_paste)
    for word in ("raise", "require_", "isinstance", "describe("):
        assert word not in shown.text, f"solution({name!r}) shows `{word}`:\n{shown.text}"
    assert shown._repr_markdown_() == f"```python\n{shown.text}```"


def test_solutions_include_the_helpers_that_hold_the_rule():
    assert "def _zero_fully_masked_rows(" in solution("scaled_dot_product_attention").text


def test_a_missing_core_is_said_plainly_and_the_public_function_is_not_shown(monkeypatch):
    exercise = EXERCISES["layer_norm"]
    monkeypatch.setitem(EXERCISES, "layer_norm", type(exercise)(**{**exercise.__dict__, "core": "_no_such_core"}))
    text = solution("layer_norm").text
    assert text == (
        "The solution of `layer_norm` is not available: `bertcourse.layernorm` has no `_no_such_core` "
        "in this version of the package."
    )


# --- messages for mistakes nobody catalogued (item 3) -------------------------------------------


def test_unknown_wrong_values_report_the_first_case_its_inputs_and_the_largest_difference():
    message = wrong_message("layer_norm", lambda x, weight, bias, eps=1e-12: x * 2 + 1)
    first, inputs, problem = message.split("\n")
    assert first == "❌ Wrong on test case 1 of 4 (one sentence of 5 tokens, d 8, eps 1e-12)."
    assert inputs == "Inputs: x (5, 8), weight (8,), bias (8,), eps = 1e-12."
    assert problem.startswith("Your output has the right shape but wrong values: the largest absolute difference is ")


def test_an_argument_left_out_is_named_in_the_inputs():
    message = wrong_message("padding_mask", lambda lengths, max_len=None: bc.padding_mask(lengths, max_len or 8))
    assert "Inputs: lengths (2,), max_len left out (so it takes its default)." in message


def test_a_constant_factor_is_named_with_the_size_it_comes_from():
    message = wrong_message("attention_scores", lambda q, k: q @ k.transpose(-2, -1) / q.shape[-1])
    assert "It is the right answer times 0.125 (= 1/8): a scale factor is off." in message
    root = wrong_message("attention_scores", lambda q, k: q @ k.transpose(-2, -1) * math.sqrt(q.shape[-1]))
    assert "times 2.828 (= √8)" in root


def test_a_flipped_sign_is_named():
    message = wrong_message("feed_forward", lambda x, w1, b1, w2, b2: -(F.gelu(x @ w1 + b1) @ w2 + b2))
    assert "It is exactly minus the right answer: a sign is flipped somewhere." in message


def test_an_offset_is_named():
    message = wrong_message("feed_forward", lambda x, w1, b1, w2, b2: F.gelu(x @ w1 + b1) @ w2 + b2 + 0.5)
    assert "It is the right answer plus 0.5 everywhere: an offset or a bias is off." in message


def test_a_transpose_is_named():
    exercise = EXERCISES["sinusoidal_position_encoding"]
    case = next(case for case in exercise.cases() if "square" in case.tags)
    table = bc.sinusoidal_position_encoding(*case.args)
    problem = diagnosis.value_problem(
        exercise, case, "Your output", table.T, table, ("position rows", "feature columns")
    )
    assert problem.endswith("It is the right answer transposed (position rows and columns swapped).")


def test_heads_in_another_order_are_named():
    message = wrong_message("split_heads", lambda x, h: bc.split_heads(x, h).flip(1))
    assert "The heads are the right ones in another order (your index → the right index: 0→2, 2→0)." in message
    merged = wrong_message("merge_heads", lambda x: bc.merge_heads(x.flip(1)))
    assert "The feature columns are the right ones in another order" in merged
    assert "blocks of 4 moved whole. Are the heads (or halves) in the right order?" in merged


def test_dropout_left_on_is_named_from_the_zeros_and_the_scale():
    message = wrong_message("feed_forward", lambda x, w1, b1, w2, b2: F.dropout(F.gelu(x @ w1 + b1) @ w2 + b2, 0.2))
    assert "are 0 and the others are the right ones times 1.25 = 1/(1 - 0.2): dropout left on?" in message


def test_a_few_wrong_rows_are_located():
    def last_row_wrong(q, k):
        scores = q @ k.transpose(-2, -1)
        scores[..., -1, :] = 0
        return scores

    assert "Only the query rows [3] are wrong; every other entry is right." in wrong_message(
        "attention_scores", last_row_wrong
    )


def test_close_but_outside_the_tolerance_is_named():
    message = wrong_message(
        "layer_norm", lambda x, w, b, eps=1e-12: F.layer_norm(x, x.shape[-1:], w, b, eps) * 1.0001 + 1e-4
    )
    assert "That is close, but outside the tolerance (1e-05)" in message


def test_outputs_in_another_order_are_named():
    message = wrong_message(
        "qkv_projection",
        lambda x, w_q, w_k, w_v: (x @ w_q, x @ w_v, x @ w_k) if x.dim() == 2 else bc.qkv_projection(x, w_q, w_k, w_v),
    )
    assert "Your function returned the right items in the order (q, v, k); return them as (q, k, v)." in message


def with_case(name, make):
    """Exercise ``name`` with one more case, ``make(cases)``: the summary names a kind only when a pair isolates it."""
    exercise = EXERCISES[name]

    def make_cases(g):
        cases = exercise.make_cases(g)
        return [*cases, make(cases)]

    return dataclasses.replace(exercise, make_cases=make_cases)


def isolated_message(name, make, fn):
    result = engine.run_check(with_case(name, make), fn)
    assert result.status == "wrong" and result.mistake is None, result.message
    return result.message


def test_a_failure_on_batched_cases_only_says_so():
    message = isolated_message(
        "attention_scores",
        lambda cases: dataclasses.replace(cases[1], args=tuple(a[0, 0] for a in cases[1].args), tags=("non-square",)),
        lambda q, k: q @ k.transpose(0, 1) if q.dim() == 2 else q @ k.transpose(-2, -1) + 1,
    )
    assert "exactly those where there are batch (or head) axes in front. Hint: count axes from the end" in message


def test_a_failure_on_float16_only_says_so():
    def float32_scores(q, k, v, mask=None):
        output, weights = bc.scaled_dot_product_attention(q, k, v, mask)
        return (output.float(), weights.float()) if q.dtype == torch.float16 else (output, weights)

    def as_float32(cases):
        case = cases[5]
        args = tuple(a.float() if a.dtype == torch.float16 else a for a in case.args)
        return dataclasses.replace(case, args=args, tags=tuple(t for t in case.tags if t != "float16"))

    message = isolated_message("scaled_dot_product_attention", as_float32, float32_scores)
    assert message.startswith("❌ Wrong on test case 6 of 8 (float16")
    assert (
        "`output` has the right values but dtype torch.float32; expected torch.float16, the dtype of the inputs."
        in message
    )
    assert "exactly those where the inputs are float16." in message


def test_a_crash_on_masked_cases_only_says_so_and_names_no_unrelated_mistake():
    def broadcast_slip(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask[..., None], torch.finfo(scores.dtype).min)
        weights = scores.softmax(-1)
        return weights @ v, weights

    def unmasked(cases):
        return dataclasses.replace(cases[2], args=cases[2].args[:3], tags=("no mask", "non-square"))

    message = isolated_message("scaled_dot_product_attention", unmasked, broadcast_slip)
    assert "Your function raised RuntimeError: The size of tensor a" in message
    assert "Your tensors at that line: q (5, 4), k (6, 4), v (6, 7), mask (5, 6) bool, scores (5, 6)." in message
    assert "exactly those where a mask is given." in message


def test_if_mask_is_named_on_its_own_wherever_it_stands():
    def if_mask(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
        if mask:
            pass
        return bc.multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads, mask)

    assert check("multi_head_attention", if_mask).mistake == "`if mask:` instead of `if mask is not None:`"

    def ambiguous_elsewhere(q, k):
        if q:
            return q
        return q @ k.transpose(-2, -1)

    message = wrong_message("attention_scores", ambiguous_elsewhere)
    assert "Hint: a tensor was asked for one True/False (`if mask:`, `and`, `or`, `not`)" in message


def test_a_default_left_unhandled_says_so():
    def pytorch_default(x, weight, bias, eps=1e-5):
        return F.layer_norm(x, x.shape[-1:], weight, bias, eps)

    def eps_given(cases):
        case = next(case for case in cases if "defaults" in case.tags)
        return dataclasses.replace(case, args=(*case.args, 1e-12), tags=tuple(t for t in case.tags if t != "defaults"))

    message = isolated_message("layer_norm", eps_given, pytorch_default)
    assert (
        "exactly those where an argument is left out. Hint: an argument the caller leaves out takes its default"
        in message
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
    assert problem in wrong_message("layer_norm", lambda x, w, b, eps=1e-12: returned)


def test_a_generator_is_named():
    message = wrong_message("layer_norm", lambda x, w, b, eps=1e-12: (row for row in x))
    assert message.split("\n")[2] == (
        "Your output is a generator; expected a torch.Tensor. Did you write `yield` instead of `return`?"
    )


def test_wrong_shapes_are_explained():
    assert "Your output has shape (5, 2); expected (5, 8)." in wrong_message(
        "layer_norm", lambda x, w, b, eps=1e-12: x[..., :2]
    )
    assert "The last two axes are swapped" in wrong_message(
        "attention_scores", lambda q, k: k @ q.transpose(-2, -1) + 1
    )
    assert "The leading axes (2,) are missing: a `[0]` or a `squeeze()`?" in wrong_message(
        "split_heads", lambda x, h: bc.split_heads(x, h)[0]
    )
    assert "An extra axis of size 1 at position 0" in wrong_message("layer_norm", lambda x, w, b, eps=1e-12: x[None])


def test_nan_and_inf_are_named_and_located():
    assert "Your output contains NaN in 40 of 40 entries; the right answer has none there." in wrong_message(
        "layer_norm", lambda x, w, b, eps=1e-12: x * math.nan
    )
    assert "Your output contains inf in 40 of 40 entries" in wrong_message(
        "layer_norm", lambda x, w, b, eps=1e-12: x * math.inf
    )

    def nan_first_row(q, k):
        scores = q @ k.transpose(-2, -1)
        scores[..., 0, :] = math.nan
        return scores

    assert "Your output contains NaN in 6 of 24 entries (all in the query rows [0])" in wrong_message(
        "attention_scores", nan_first_row
    )


def test_dtypes_are_named_and_a_right_integer_mask_gets_told_to_be_boolean():
    assert "Your output has dtype torch.float64; expected torch.float32, the dtype of the inputs." in wrong_message(
        "layer_norm", lambda x, w, b, eps=1e-12: x.double()
    )
    message = wrong_message("padding_mask", lambda lengths, max_len=None: bc.padding_mask(lengths, max_len).long())
    assert "Your output has the right values but dtype torch.int64; a mask must be boolean" in message


def test_a_wrong_boolean_mask_reports_the_first_differing_entry():
    message = wrong_message("causal_mask", lambda n: torch.ones(n, n, dtype=torch.bool))
    assert "Your output differs in 6 of 16 entries; the first is at index [0, 1]: expected False, got True." in message


def test_an_inverted_mask_is_named():
    message = wrong_message(
        "causal_mask",
        lambda n: ~torch.ones(n, n, dtype=torch.bool).tril() if n > 1 else torch.ones(1, 1, dtype=torch.bool),
    )
    assert "It is exactly the right mask inverted: in this course True means *may attend*." in message


def test_tuples_of_the_wrong_kind_or_length():
    one = wrong_message("scaled_dot_product_attention", lambda q, k, v, mask=None: q)
    assert "Your function returned a Tensor; expected a tuple (output, weights)." in one
    short = wrong_message("qkv_projection", lambda x, w_q, w_k, w_v: (x @ w_q,))
    assert "Your function returned a tuple of 1 item; expected 3: (q, k, v)." in short
    item = wrong_message("scaled_dot_product_attention", lambda q, k, v, mask=None: (v[..., :1, :], None))
    assert "`output` has shape (1, 5); expected (4, 5)." in item


def test_an_integer_count_is_required_and_an_error_in_it_is_explained():
    assert "Your count is a float; expected an int." in wrong_message("count_parameters", lambda config: 1.5)
    assert "return a Python int" in wrong_message("count_parameters", lambda config: torch.tensor(3))
    assert "Your count is 100,000,000; expected 109,482,240 (off by -9,482,240)." in wrong_message(
        "count_parameters", lambda config: 100_000_000
    )
    with engine.judging_the_package():
        assert check("count_parameters", lambda config: np.int64(bc.count_parameters(config))).status == "correct"
    thrice = wrong_message("count_parameters", lambda config: bc.count_parameters(config) + 3 * config.hidden_size)
    assert "The difference is 3 × hidden_size." in thrice
    twice = wrong_message("count_parameters", lambda config: bc.count_parameters(config) + 2 * config.hidden_size * 2)
    assert "are as many as the token type embeddings and the embedding LayerNorm together." in twice


def learner_that_raises(x, weight, bias, eps=1e-12):
    mean = x.mean(dim=-1, keepdim=True)
    raise ValueError(f"stuck after the mean {tuple(mean.shape)}")


def test_an_exception_reports_its_type_message_and_the_learners_line_without_a_traceback():
    message = wrong_message("layer_norm", learner_that_raises)
    problem = message.split("\n")[2]
    assert problem.startswith("Your function raised ValueError: stuck after the mean (5, 1) (line ")
    assert problem.endswith(': `raise ValueError(f"stuck after the mean {tuple(mean.shape)}")`)')
    assert "Traceback" not in message and "bertcourse" not in message


def test_known_pytorch_errors_come_with_a_hint():
    message = wrong_message("split_heads", lambda x, h: x.transpose(1, 2).view(x.shape[0], h, x.shape[1], -1))
    assert "Hint: `.view` needs a contiguous tensor; after a transpose use `.reshape(...)` instead." in message
    no_mask = wrong_message("scaled_dot_product_attention", lambda q, k, v: bc.scaled_dot_product_attention(q, k, v))
    assert "takes 3 positional arguments but 4 were given" in no_mask
    assert "an optional one (like `mask=None`) needs a default value." in no_mask
    matmul = wrong_message("qkv_projection", lambda x, w_q, w_k, w_v: (w_q @ x, w_k @ x, w_v @ x))
    assert "Hint: for `a @ b` the last size of `a` must equal the first (row) size of `b`" in matmul
    assert "Your tensors at that line: x (5, 8), w_q (8, 4), w_k (8, 4), w_v (8, 6)." in matmul
    axis = wrong_message("split_heads", lambda x, h: x.view(x.shape[0], x.shape[1], h, -1).transpose(1, 4))
    assert "Hint: an axis the tensor does not have: count axes from the end" in axis
    undefined = wrong_message("layer_norm", lambda x, w, b, eps=1e-12: undefined_name(x))  # noqa: F821
    assert "Hint: import or define every name your function uses" in undefined


def test_not_implemented_after_the_first_case_is_a_missing_part():
    def unmasked_only(q, k, v, mask=None):
        if mask is not None:
            raise NotImplementedError("masks later")
        return bc.scaled_dot_product_attention(q, k, v)

    message = wrong_message("scaled_dot_product_attention", unmasked_only)
    assert message.startswith("❌ Wrong on test case 3 of 7")
    assert "Your function still raises NotImplementedError for this case." in message


def test_changing_an_input_in_place_is_wrong_even_with_the_right_output():
    def in_place(x, weight, bias, eps=1e-12):
        x -= x.mean(dim=-1, keepdim=True)
        return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps) * weight + bias

    message = wrong_message("layer_norm", in_place)
    assert message.startswith("❌ Wrong: your results are right, but your function changes its input `x` in place.")


def test_passing_the_result_instead_of_the_function():
    result = check("causal_mask", bc.causal_mask(3))
    assert result.status == "wrong"
    assert result.message.startswith('❌ Wrong: pass your function itself, without calling it: `check("causal_mask", ')


# --- a checker that cannot be fooled or confused (item 4) ---------------------------------------


class LyingTensor(torch.Tensor):
    """Claims to equal anything and to have the expected shape."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal, torch.Tensor.allclose, torch.Tensor.equal):
            return True
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))

    def __eq__(self, other):
        return True

    __hash__ = torch.Tensor.__hash__


def test_a_tensor_subclass_takes_no_part_in_judging_itself():
    liar = wrong_message("layer_norm", lambda x, w, b, eps=1e-12: torch.zeros_like(x).as_subclass(LyingTensor))
    assert "Your output has the right shape but wrong values" in liar
    with engine.judging_the_package():
        honest = check("layer_norm", lambda x, w, b, eps=1e-12: bc.layer_norm(x, w, b, eps).as_subclass(LyingTensor))
        parameter = check("layer_norm", lambda x, w, b, eps=1e-12: torch.nn.Parameter(bc.layer_norm(x, w, b, eps)))
    assert honest.status == "correct"
    assert parameter.mistake == "the gradient cut"  # a Parameter made of the output is a new leaf: nothing flows back


def test_references_hold_under_another_default_dtype():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        for name in ("sinusoidal_position_encoding", "causal_mask", "padding_mask", "layer_norm"):
            with engine.judging_the_package():
                assert check(name, EXERCISES[name].reference).status == "correct", name
        assert check(
            "sinusoidal_position_encoding", EXERCISES["sinusoidal_position_encoding"].mistakes[0].wrong
        ).mistake
        assert torch.get_default_dtype() == torch.float64
    finally:
        torch.set_default_dtype(previous)


def test_output_on_another_device_is_named():
    message = wrong_message("layer_norm", lambda x, w, b, eps=1e-12: torch.empty(x.shape, device="meta"))
    assert "Your output is on the device `meta`, but the inputs are on `cpu`" in message


def test_a_sparse_output_is_named():
    message = wrong_message("layer_norm", lambda x, w, b, eps=1e-12: bc.layer_norm(x, w, b, eps).to_sparse())
    assert "Your output is a torch.sparse_coo tensor; expected an ordinary (dense) one" in message


def spin_forever(*args):
    while True:
        pass


def sleep_and_swallow(*args):
    while True:
        try:  # noqa: SIM105 -- a learner's broad except must not keep the check waiting
            time.sleep(10)
        except Exception:
            pass


@pytest.mark.parametrize("fn", [spin_forever, sleep_and_swallow])
def test_a_function_that_never_returns_is_stopped_and_reported(monkeypatch, fn):
    monkeypatch.setattr(sandbox, "CALL_TIME_LIMIT_S", 0.3)
    start = time.perf_counter()
    result = check("layer_norm", fn)
    assert time.perf_counter() - start < 3
    assert result.status == "wrong"
    assert result.message.startswith(
        "❌ Wrong: on test case 1 of 4 (one sentence of 5 tokens, d 8, eps 1e-12) your function was still running "
        "after 0.3 s and was stopped."
    )


def test_a_hanging_function_is_stopped_away_from_the_main_thread_too(monkeypatch):
    monkeypatch.setattr(sandbox, "CALL_TIME_LIMIT_S", 0.3)
    results = []
    worker = threading.Thread(target=lambda: results.append(check("layer_norm", lambda *a: time.sleep(5))))
    start = time.perf_counter()
    worker.start()
    worker.join(4)
    assert time.perf_counter() - start < 4
    assert results and "was still running after 0.3 s" in results[0].message


def test_an_alarm_the_notebook_set_is_given_back(monkeypatch):
    import signal

    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *args: fired.append(True))
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        check("layer_norm", EXERCISES["layer_norm"].reference)
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 0
        time.sleep(1.2)
        assert fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def meddle_with_global_state(x, weight, bias, eps=1e-12):
    torch.manual_seed(123)
    random.seed(123)
    np.random.seed(123)
    torch.set_default_dtype(torch.float64)
    torch.set_grad_enabled(False)
    torch.set_num_threads(1)
    return bc.layer_norm(x, weight, bias, eps) + torch.rand(()) * 0


def test_checking_leaves_the_notebooks_state_alone():
    torch.manual_seed(7)
    random.seed(7)
    np.random.seed(7)
    states = (torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy())
    threads = torch.get_num_threads()
    check("multi_head_attention", bc.multi_head_attention)
    check("feed_forward", EXERCISES["feed_forward"].mistakes[-2].wrong)  # dropout draws random numbers
    with engine.judging_the_package():
        result = check("layer_norm", meddle_with_global_state)
    check("bert_embeddings", not_implemented)
    assert result.mistake == "the gradient cut"  # it turns gradients off before it computes its right values
    assert torch.equal(torch.get_rng_state(), states[0])
    assert random.getstate() == states[1]
    assert (np.random.get_state()[1] == states[2]).all()
    assert torch.get_default_dtype() == torch.float32
    assert torch.is_grad_enabled()
    assert torch.get_num_threads() == threads


def test_checking_under_no_grad_or_inference_mode_works_and_keeps_the_mode():
    with torch.no_grad(), engine.judging_the_package():
        assert check("layer_norm", EXERCISES["layer_norm"].reference).status == "correct"
        assert not torch.is_grad_enabled()
    with torch.inference_mode(), engine.judging_the_package():
        assert check("split_heads", EXERCISES["split_heads"].reference).status == "correct"
        assert torch.is_inference_mode_enabled()


def test_random_learner_code_gives_the_same_verdict_every_time():
    def dropout_everywhere(x, w1, b1, w2, b2):
        return F.dropout(F.gelu(F.dropout(x, 0.3) @ w1 + b1), 0.3) @ w2 + b2

    first, again = check("feed_forward", dropout_everywhere), check("feed_forward", dropout_everywhere)
    assert first.message == again.message


class Hostile:
    """Every comparison, conversion and container method raises."""

    def _boom(self, *args, **kwargs):
        raise RuntimeError("hostile")

    __eq__ = __ne__ = __lt__ = __bool__ = __len__ = __iter__ = __int__ = __float__ = __index__ = __repr__ = _boom
    __hash__ = None


class HostileTuple(tuple):
    def __len__(self):
        raise RuntimeError("hostile length")


class HostileInt(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


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


def warn_and_print_to_stderr(*args):
    warnings.warn("a learner's warning", UserWarning, stacklevel=1)
    torch.ones(2, 3, 4).T  # noqa: B018 -- PyTorch's own deprecation warning
    return None


WEIRD = [
    lambda *args: None,
    lambda *args: [1, 2],
    lambda *args: "a string",
    lambda *args: np.ones(3),
    lambda *args: (i for i in range(3)),
    lambda *args: Hostile(),
    lambda *args: HostileTuple((torch.zeros(2), torch.zeros(2))),
    lambda *args: HostileInt(5),
    lambda *args: torch.zeros(2, 3).as_subclass(HostileTensor),
    lambda *args: (Hostile(), Hostile(), Hostile()),
    lambda *args: torch.full((2, 3), math.inf),
    lambda *args: torch.zeros(2, 3, dtype=torch.complex64),
    lambda *args: torch.tensor(math.nan),
    lambda *args: torch.empty(0),
    lambda *args: 42,
    lambda *args: True,
    lambda: None,
    recurse_forever,
    zero_every_input,
    call_exit,
    warn_and_print_to_stderr,
]


@pytest.mark.parametrize("name", NAMES)
def test_no_learner_function_makes_a_checker_raise_or_print(name, capsys):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for fn in WEIRD:
            result = check(name, fn)
            assert result.status == "wrong", (fn, result.message)
            assert result.message.startswith("❌ Wrong")
            assert " at 0x" not in result.message
            assert "Traceback" not in result.message
    assert caught == []
    assert capsys.readouterr() == ("", "")


def test_results_display_the_same_text_every_time():
    first = check("split_heads", lambda x, h: x.view(x.shape[0], h, x.shape[1], -1))
    again = check("split_heads", lambda x, h: x.view(x.shape[0], h, x.shape[1], -1))
    assert repr(first) == repr(again) == str(first) == first.message
    assert first._repr_markdown_() == first.message
    wrong = check("layer_norm", lambda x, w, b, eps=1e-12: x)
    assert wrong._repr_markdown_() == wrong.message.replace("\n", "  \n")


# --- progress -----------------------------------------------------------------------------------


def test_progress_lists_every_exercise_met_with_its_latest_verdict(monkeypatch):
    monkeypatch.setattr(registry, "RESULTS", {})
    assert repr(progress()) == "No exercise checked yet in this session: run a `check(...)` cell first."
    check("layer_norm", not_implemented)
    check("causal_mask", lambda n: torch.ones(n, n, dtype=torch.bool).triu())
    with engine.judging_the_package():
        check("layer_norm", EXERCISES["layer_norm"].reference)
    lines = repr(progress()).split("\n")
    assert lines[0] == f"1 of 2 exercises checked in this session are correct ({len(EXERCISES)} in the course)."
    assert lines[1].split() == ["06", "layer_norm", "✅", "correct"]
    assert lines[2].split()[:4] == ["03", "causal_mask", "❌", "wrong"]
    assert lines[2].endswith("(the upper triangle)")
    assert "| `03 causal_mask` | ❌ wrong (the upper triangle) |" in progress()._repr_markdown_()


# --- two slips at once ---------------------------------------------------------------------------


def test_two_slips_at_once_are_named_together_with_both_hints():
    def unbiased_without_affine(x, weight, bias, eps=1e-12):
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps)

    result = check("layer_norm", unbiased_without_affine)
    assert result.mistake == "the unbiased variance and gamma and beta left out"
    assert result.message == (
        "❌ Wrong: looks like the unbiased variance and gamma and beta left out. Hint: divide by d, not d - 1: "
        "`unbiased=False`. scale and shift at the end: `normalised * weight + bias`."
    )

    def unscaled_over_queries(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1)
        if mask is not None:
            scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        weights = scores.softmax(dim=-2)
        return weights @ v, weights

    assert check("scaled_dot_product_attention", unscaled_over_queries).mistake == (
        "no scaling and the softmax over the queries"
    )


@pytest.mark.parametrize("name", [name for name in NAMES if EXERCISES[name].knobs])
def test_every_knob_setting_differs_from_the_reference(name):
    exercise = EXERCISES[name]
    for knob in exercise.knobs:
        for index in range(1, len(knob.options)):
            settings = {k.name: k.options[0][0] for k in exercise.knobs} | {knob.name: knob.options[index][0]}
            result = check(name, lambda *args, s=settings: exercise.variant(s, *args))
            assert result.status == "wrong", (knob.name, knob.options[index][1])


@pytest.mark.parametrize("name", [name for name in NAMES if EXERCISES[name].knobs])
def test_the_knobs_at_their_first_options_are_the_reference(name):
    exercise = EXERCISES[name]
    settings = {knob.name: knob.options[0][0] for knob in exercise.knobs}
    assert check(name, lambda *args: exercise.variant(settings, *args)).status == "correct"


def test_an_input_that_is_a_list_of_tensors_is_compared_element_by_element():
    maps = [torch.ones(2, 3), torch.zeros(2, 3)]
    assert sandbox._same_input(maps, [m.clone() for m in maps])  # equal: not "changed in place"
    assert sandbox._same_input({"a": maps}, {"a": tuple(m.clone() for m in maps)})
    changed = [maps[0].clone(), maps[1] + 1]
    assert not sandbox._same_input(maps, changed)
    assert not sandbox._same_input(maps, maps[:1])
