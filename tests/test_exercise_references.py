"""The package functions that the exercises of notebooks 01-07 use as references: each agrees with
PyTorch, Hugging Face or the package's own modules, refuses bad input with a clear error, and has a
core that reads like the textbook (the rule of tests/test_cores.py)."""

import ast
import functools
import inspect
import math
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import bertcourse as bc
from bertcourse import attention, encoder, heads, masks, multihead, positional
from bertcourse.weights import hf_to_ours

NEW = {
    attention: ["qkv_from_linear", "linear_scores", "stable_softmax", "masked_softmax", "flexible_attention"],
    masks: ["key_padding_mask", "mask_from_torch"],
    positional: ["alibi_bias", "sinusoidal_positions"],
    multihead: ["split_fused_qkv", "torch_multi_head_attention"],
    encoder: ["post_ln_layer", "pre_ln_layer", "parallel_layer", "pre_ln_stack"],
    heads: ["mlm_head"],
}
PAIRS = [(module, name) for module, names in NEW.items() for name in names]
CHECK_WORDS = ("raise", "require_", "check_", "isinstance", "describe(")


@pytest.mark.parametrize(("module", "name"), PAIRS, ids=[f"{m.__name__}.{n}" for m, n in PAIRS])
def test_the_public_function_checks_then_calls_a_core_that_reads_like_the_textbook(module, name):
    public, core = getattr(module, name), getattr(module, f"_{name}")
    assert f"_{name}(" in inspect.getsource(public)
    source = textwrap.dedent(inspect.getsource(core))
    function = ast.parse(source).body[0]
    docstring = ast.get_docstring(function)
    assert docstring and len(docstring.splitlines()) <= 2
    body = source.splitlines()[function.body[0].end_lineno :]
    assert not any(word in line for word in CHECK_WORDS for line in body), body
    lines = source.splitlines()
    for node in ast.walk(function):
        if isinstance(node, (ast.Assign, ast.Return)) and ".shape" not in ast.unparse(node):
            assert "  # " in lines[node.end_lineno - 1], lines[node.end_lineno - 1]


# --- 01 -----------------------------------------------------------------------------------------


def test_qkv_from_linear_is_what_three_linear_layers_compute():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    layers = [nn.Linear(8, 4), nn.Linear(8, 4), nn.Linear(8, 6)]
    parameters = [p for layer in layers for p in (layer.weight, layer.bias)]
    with torch.no_grad():
        for ours, layer in zip(attention.qkv_from_linear(x, *parameters), layers, strict=True):
            torch.testing.assert_close(ours, layer(x))


def test_qkv_from_linear_refuses_our_own_layout_by_name():
    x, w, b = torch.randn(5, 8), torch.randn(8, 4), torch.randn(4)
    with pytest.raises(
        ValueError, match=r"`w_q` must have .*nn.Linear's shape \(out, in\) with in = x.shape\[-1\] = 8"
    ):
        attention.qkv_from_linear(x, w, b, w, b, w, b)
    with pytest.raises(ValueError, match="`b_k` must have"):
        attention.qkv_from_linear(x, w.T, b, w.T, torch.randn(3), w.T, b)


def test_linear_scores_are_the_scores_of_what_two_linear_layers_compute():
    torch.manual_seed(0)
    x = torch.randn(2, 5, 8)
    query, key = nn.Linear(8, 4), nn.Linear(8, 4)
    with torch.no_grad():
        scores = attention.linear_scores(x, query.weight, query.bias, key.weight, key.bias)
        torch.testing.assert_close(scores, query(x) @ key(x).transpose(-2, -1))
    with pytest.raises(ValueError, match=r"`w_k` must have .*nn.Linear's shape \(out, in\)"):
        attention.linear_scores(x, query.weight, query.bias, key.weight.T, key.bias)


# --- 02 -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["none", "bool", "additive", "lowest"])
@pytest.mark.parametrize("scale", [None, 0.3])
def test_flexible_attention_is_pytorchs_sdpa_with_its_weights(kind, scale):
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 5)
    kept = torch.rand(4, 6) < 0.6
    kept[:, 0] = True
    mask = {
        "none": None,
        "bool": kept,
        "additive": torch.zeros(4, 6).masked_fill(~kept, -math.inf),
        "lowest": torch.zeros(4, 6).masked_fill(~kept, torch.finfo(torch.float32).min),
    }[kind]
    output, weights = attention.flexible_attention(q, k, v, mask, scale)
    torch.testing.assert_close(output, F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale))
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 4))


def test_flexible_attention_names_a_bad_scale_and_a_float_mask_that_does_not_broadcast():
    q = torch.randn(4, 8)
    with pytest.raises(TypeError, match="`scale` must be a number or None"):
        attention.flexible_attention(q, q, q, None, "0.5")
    with pytest.raises(ValueError, match="a float `mask` must broadcast to the scores"):
        attention.flexible_attention(q, q, q, torch.zeros(3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_stable_softmax_equals_torch_softmax_even_for_scores_of_1000(dtype):
    scores = torch.tensor([[1000.0, 999.0, 0.0], [-1000.0, -1001.0, -math.inf]]).to(dtype)
    ours = attention.stable_softmax(scores)
    assert ours.dtype == dtype and not ours.isnan().any()
    torch.testing.assert_close(ours, torch.softmax(scores, dim=-1))
    torch.testing.assert_close(attention.stable_softmax(scores, dim=0), torch.softmax(scores, dim=0))
    naive = torch.exp(scores) / torch.exp(scores).sum(-1, keepdim=True)
    assert naive.isnan().any()  # what the shift prevents


def test_stable_softmax_names_a_bad_axis():
    with pytest.raises(ValueError, match=r"`dim` must be an axis of `scores` \(a tensor of shape \(2, 3\)"):
        attention.stable_softmax(torch.zeros(2, 3), dim=2)


# --- 03 -----------------------------------------------------------------------------------------


def test_masked_softmax_zeroes_a_row_without_keys_and_fits_float16():
    scores = torch.randn(2, 3, 4).half() * 100 - 20000  # real scores below -1e4
    mask = torch.ones(2, 3, 4, dtype=torch.bool)
    mask[0, 1] = False
    mask[1, :, 2:] = False
    weights = attention.masked_softmax(scores, mask)
    assert weights.dtype == torch.float16
    assert (weights[0, 1] == 0).all() and (weights[~mask] == 0).all()
    torch.testing.assert_close(weights.sum(-1)[mask.any(-1)], torch.ones(5, dtype=torch.float16))
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 4, 8), torch.randn(2, 4, 5)
    _, sdpa_weights = bc.scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(attention.masked_softmax(q @ k.mT / math.sqrt(8), mask), sdpa_weights)
    torch.testing.assert_close(attention.masked_softmax(q @ k.mT), torch.softmax(q @ k.mT, dim=-1))


def test_masked_softmax_names_a_mask_that_does_not_broadcast():
    with pytest.raises(ValueError, match="cannot broadcast to the attention scores"):
        attention.masked_softmax(torch.zeros(2, 3, 4), torch.ones(2, 5, dtype=torch.bool))


def test_key_padding_mask_gives_nn_multihead_attention_what_our_mask_gives_ours():
    torch.manual_seed(0)
    hf_mask = torch.tensor([[1, 1, 1, 0], [0, 1, 1, 1]])  # right and left padding
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(2, 4, 8)
    with torch.no_grad():
        theirs, _ = mha(x, x, x, key_padding_mask=masks.key_padding_mask(hf_mask))
    w_q, w_k, w_v = (w.T for w in mha.in_proj_weight.chunk(3))
    with torch.no_grad():
        q, k, v = (
            bc.split_heads(x @ w + b, 2) for w, b in zip((w_q, w_k, w_v), mha.in_proj_bias.chunk(3), strict=True)
        )
        context, _ = bc.scaled_dot_product_attention(q, k, v, bc.expand_padding_mask(hf_mask.bool()))
        ours = bc.merge_heads(context) @ mha.out_proj.weight.T + mha.out_proj.bias
    torch.testing.assert_close(ours, theirs)
    for dtype in (torch.long, torch.int32, torch.float32, torch.bool):
        assert torch.equal(masks.key_padding_mask(hf_mask.to(dtype)), hf_mask == 0)
    with pytest.raises(ValueError, match="must be boolean or hold only 0/1"):
        masks.key_padding_mask(torch.tensor([[0.0, -math.inf]]))


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.float16, torch.bfloat16])
def test_mask_from_torch_reads_both_kinds_as_nn_multihead_attention_does(dtype):
    torch.manual_seed(0)
    blocked = torch.tensor([[False, True, False, True, False]]).expand(5, 5)  # (q, k): keys 1 and 3 blocked
    attn_mask = blocked if dtype == torch.bool else torch.zeros(5, 5, dtype=dtype).masked_fill(blocked, -math.inf)
    ours = masks.mask_from_torch(attn_mask)
    assert ours.dtype == torch.bool and torch.equal(ours, ~blocked)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = torch.randn(1, 5, 8)
    with torch.no_grad():
        theirs, _ = mha(x, x, x, attn_mask=attn_mask.float() if dtype != torch.bool else attn_mask)
        again, _ = mha(x, x, x, attn_mask=~ours)  # our mask back in PyTorch's boolean convention
    torch.testing.assert_close(theirs, again)
    lowest = torch.zeros(2, dtype=dtype if dtype != torch.bool else torch.float16)
    lowest[1] = torch.finfo(lowest.dtype).min
    assert masks.mask_from_torch(lowest).tolist() == [True, False]
    with pytest.raises(TypeError, match="`attn_mask` must be boolean"):
        masks.mask_from_torch(torch.zeros(3, dtype=torch.long))


# --- 04 -----------------------------------------------------------------------------------------


def test_sinusoidal_positions_gives_the_tables_rows_for_any_ids_and_base():
    table = bc.sinusoidal_position_encoding(50, 7)
    ids = torch.tensor([[0, 0, 3, 4], [10, 11, 12, 49]])
    torch.testing.assert_close(positional.sinusoidal_positions(ids, 7), table[ids])
    other = positional.sinusoidal_positions(torch.arange(3), 4, base=100.0)
    angle = torch.arange(3.0)[:, None] * torch.tensor([1.0, 0.1])  # 100^(-0/4), 100^(-2/4)
    torch.testing.assert_close(other, torch.stack([angle.sin(), angle.cos()], -1).flatten(-2))
    with pytest.raises(TypeError, match="`position_ids` must hold integers"):
        positional.sinusoidal_positions(torch.arange(3.0), 4)
    with pytest.raises(ValueError, match="`base` must be a number above 1"):
        positional.sinusoidal_positions(torch.arange(3), 4, base=1)


def test_alibi_slopes_are_blooms_for_every_head_count():
    transformers = pytest.importorskip("transformers")
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    for count in range(1, 17):
        theirs = build_alibi_tensor(torch.ones(1, 2), count, torch.float32)[:, 0, 1]  # (heads,): slope * position 1
        torch.testing.assert_close(-positional.alibi_bias(count, 2)[:, 0, 1], theirs)
    assert transformers.__version__


def test_alibi_bias_is_a_symmetric_penalty_that_grows_with_distance():
    bias = positional.alibi_bias(4, 6)  # (4, 6, 6)
    assert bias.shape == (4, 6, 6) and bias.dtype == torch.float32
    torch.testing.assert_close(bias, bias.transpose(-2, -1))
    assert (bias.diagonal(dim1=-2, dim2=-1) == 0).all() and (bias <= 0).all()
    torch.testing.assert_close(bias[:, 0, 3], 3 * bias[:, 0, 1])
    torch.testing.assert_close(-bias[:, 0, 1], torch.tensor([0.25, 0.0625, 0.015625, 0.00390625]))
    with pytest.raises(TypeError, match="`num_heads` must be a positive int"):
        positional.alibi_bias(2.0, 3)


# --- 05 -----------------------------------------------------------------------------------------


def test_split_fused_qkv_splits_nn_multihead_attentions_in_projection():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(12, 3, batch_first=True, bias=False)
    x = torch.randn(2, 5, 12)
    with torch.no_grad():
        fused = x @ mha.in_proj_weight.T  # (2, 5, 36): Q | K | V
        w_q, w_k, w_v = (w.T for w in mha.in_proj_weight.chunk(3))
        for ours, w in zip(multihead.split_fused_qkv(fused, 3), (w_q, w_k, w_v), strict=True):
            torch.testing.assert_close(ours, bc.split_heads(x @ w, 3))
    with pytest.raises(ValueError, match="its last size must be 3 \\* d_model"):
        multihead.split_fused_qkv(torch.zeros(2, 5, 13), 1)
    with pytest.raises(ValueError, match="not divisible by `num_heads`"):
        multihead.split_fused_qkv(torch.zeros(2, 5, 15), 2)


@pytest.mark.parametrize("padded", [False, True])
def test_torch_multi_head_attention_is_what_the_module_computes(padded):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
    x = torch.randn(2, 5, 8)
    ignore = torch.tensor([[False] * 5, [True, True, False, False, False]]) if padded else None
    with torch.no_grad():
        theirs, _ = mha(x, x, x, key_padding_mask=ignore, need_weights=False)
        ours = multihead.torch_multi_head_attention(
            x, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias, 2, ignore
        )
    torch.testing.assert_close(ours, theirs)
    with pytest.raises(TypeError, match="`key_padding_mask` must be boolean"):
        multihead.torch_multi_head_attention(
            x, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias, 2, torch.zeros(2, 5)
        )


# --- 06 -----------------------------------------------------------------------------------------


def layer_pieces(layer):
    """The sub-layers of a bc.EncoderLayer (eval mode) as functions, and its LayerNorms' parameters."""
    return (
        lambda h: layer.attention(h)[0],
        layer.feed_forward,
        layer.attention_norm.weight,
        layer.attention_norm.bias,
        layer.output_norm.weight,
        layer.output_norm.bias,
    )


@pytest.mark.parametrize(("function", "norm_first"), [(encoder.post_ln_layer, False), (encoder.pre_ln_layer, True)])
def test_the_layer_from_its_pieces_equals_bc_encoder_layer(function, norm_first):
    torch.manual_seed(0)
    layer = bc.EncoderLayer(8, 2, 16, norm_first=norm_first).eval()
    x = torch.randn(2, 5, 8)
    with torch.no_grad():
        torch.testing.assert_close(function(x, *layer_pieces(layer)), layer(x)[0])


def test_post_ln_layer_from_the_functions_of_notebooks_05_and_06():
    torch.manual_seed(0)
    x = torch.randn(2, 4, 6)
    w_q, w_k, w_v, w_o = (torch.randn(6, 6) / 6**0.5 for _ in range(4))
    attend = functools.partial(bc.multi_head_attention, w_q=w_q, w_k=w_k, w_v=w_v, w_o=w_o, num_heads=3)
    w1, b1, w2, b2 = torch.randn(6, 12), torch.randn(12), torch.randn(12, 6), torch.randn(6)
    ffn = functools.partial(bc.feed_forward, w1=w1, b1=b1, w2=w2, b2=b2)
    gamma, beta = torch.rand(6) + 0.5, torch.randn(6)
    h = F.layer_norm(x + attend(x), (6,), gamma, beta, 1e-12)
    expected = F.layer_norm(h + ffn(h), (6,), gamma, beta, 1e-12)
    torch.testing.assert_close(encoder.post_ln_layer(x, attend, ffn, gamma, beta, gamma, beta), expected)


def test_the_parallel_layer_and_the_pre_ln_stack_from_their_pieces():
    torch.manual_seed(0)
    layers = [bc.EncoderLayer(8, 2, 16, norm_first=True).eval() for _ in range(3)]
    x = torch.randn(2, 5, 8)
    gamma, beta = torch.rand(8) + 0.5, torch.randn(8)
    with torch.no_grad():
        expected = x
        for layer in layers:
            expected = layer(expected)[0]
        expected = F.layer_norm(expected, (8,), gamma, beta, 1e-12)
        stack = encoder.pre_ln_stack(x, [layer_pieces(layer) for layer in layers], gamma, beta)
        torch.testing.assert_close(stack, expected)
        attend, ffn, *_ = layer_pieces(layers[0])
        normalised = F.layer_norm(x, (8,), gamma, beta, 1e-12)
        torch.testing.assert_close(
            encoder.parallel_layer(x, attend, ffn, gamma, beta), x + attend(normalised) + ffn(normalised)
        )
    ones = torch.ones(8)
    with pytest.raises(ValueError, match=r"`final_bias` must have shape \(d_model,\)"):
        encoder.pre_ln_stack(x, [layer_pieces(layers[0])], ones, torch.ones(3))
    with pytest.raises(TypeError, match=r"`layers\[0\]` must be \(attention, feed_forward"):
        encoder.pre_ln_stack(x, [layer_pieces(layers[0])[:4]], ones, ones)


def test_the_layers_name_a_missing_function_and_a_wrong_parameter():
    x, ones = torch.zeros(1, 2, 4), torch.ones(4)
    with pytest.raises(TypeError, match="`feed_forward` must be a function of x"):
        encoder.post_ln_layer(x, lambda h: h, None, ones, ones, ones, ones)
    with pytest.raises(ValueError, match=r"`ln2_bias` must have shape \(d_model,\) = \(4,\)"):
        encoder.pre_ln_layer(x, lambda h: h, lambda h: h, ones, ones, ones, torch.ones(3))


# --- 07 -----------------------------------------------------------------------------------------


def test_mlm_head_equals_the_models_head_with_its_decoder_tied():
    torch.manual_seed(0)
    config = bc.BertConfig(
        vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16
    )
    model = bc.BertForPreTraining(config).eval()
    head = model.mlm
    hidden = torch.randn(2, 3, 8)
    with torch.no_grad():
        ours = heads.mlm_head(
            hidden,
            head.dense.weight,
            head.dense.bias,
            head.layer_norm.weight,
            head.layer_norm.bias,
            model.bert.embeddings.word_embeddings.weight,
            head.bias,
        )
        torch.testing.assert_close(ours, head(hidden))
    with pytest.raises(ValueError, match=r"`decoder_bias` must have shape \(vocab,\) = \(30,\)"):
        heads.mlm_head(
            hidden, *(torch.ones(8, 8), torch.ones(8), torch.ones(8), torch.ones(8)), torch.ones(30, 8), torch.ones(8)
        )


def test_hf_to_ours_names_every_weight_of_a_transformers_checkpoint():
    transformers = pytest.importorskip("transformers")
    sizes = dict(vocab_size=30, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16)
    theirs = transformers.BertForPreTraining(transformers.BertConfig(**sizes)).state_dict()
    ours = set(bc.BertForPreTraining(bc.BertConfig(**sizes)).state_dict())
    renamed = {hf_to_ours(key, prefixed=True) for key in theirs} - {None}
    assert renamed == ours - {"mlm.word_embeddings.weight"}  # the tied decoder: the word table itself
