"""The teaching line first: every public concept function checks its arguments and then calls its
core ``_<name>``, which reads like the textbook: a docstring of one or two lines, no check at all,
and a shape comment on every line that makes a tensor. ``solution(name)`` shows these cores."""

import ast
import inspect
import textwrap

import pytest

from bertcourse import attention, counting, embeddings, feedforward, layernorm, masks, multihead, positional

PUBLIC = {
    attention: ["qkv_projection", "attention_scores", "scaled_dot_product_attention"],
    masks: [
        "padding_mask",
        "mask_from_attention_mask",
        "causal_mask",
        "as_bool_mask",
        "combine_masks",
        "expand_padding_mask",
    ],
    positional: ["sinusoidal_position_encoding"],
    multihead: ["split_heads", "merge_heads", "multi_head_attention"],
    layernorm: ["layer_norm"],
    feedforward: ["gelu", "feed_forward"],
    embeddings: ["bert_embeddings"],
    counting: ["linear_parameters", "parameter_breakdown", "count_parameters"],
}
PAIRS = [(module, name) for module, names in PUBLIC.items() for name in names]
CHECK_WORDS = ("raise", "require_", "check_", "isinstance", "describe(")


def ids(pair):
    return f"{pair[0].__name__.rsplit('.', 1)[-1]}.{pair[1]}"


@pytest.mark.parametrize("module, name", PAIRS, ids=[ids(p) for p in PAIRS])
def test_the_public_function_calls_its_core(module, name):
    public, core = getattr(module, name), getattr(module, f"_{name}")
    assert f"_{name}(" in inspect.getsource(public)
    assert not set(inspect.signature(core).parameters) - set(inspect.signature(public).parameters)


@pytest.mark.parametrize("module, name", PAIRS, ids=[ids(p) for p in PAIRS])
def test_the_core_reads_like_the_textbook(module, name):
    core = getattr(module, f"_{name}")
    source = textwrap.dedent(inspect.getsource(core))
    function = ast.parse(source).body[0]
    docstring = ast.get_docstring(function)
    assert docstring and len(docstring.splitlines()) <= 2, docstring
    body_lines = source.splitlines()[function.body[0].end_lineno :]
    for word in CHECK_WORDS:
        assert not any(word in line for line in body_lines), (word, body_lines)
    if module is counting:
        return  # integers, not tensors: nothing has a shape
    lines = source.splitlines()
    for node in ast.walk(function):
        if isinstance(node, (ast.Assign, ast.Return)) and ".shape" not in ast.unparse(node):
            assert "  # " in lines[node.end_lineno - 1], lines[node.end_lineno - 1]
