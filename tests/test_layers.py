"""LayerNorm, GELU feed-forward and the encoder layer, against PyTorch's own modules."""

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import bertcourse as bc


@pytest.mark.parametrize("eps", [1e-12, 1e-5])
def test_layer_norm_matches_torch(eps):
    torch.manual_seed(0)
    x = torch.randn(3, 5, 16) * 4 + 2
    ours = bc.LayerNorm(16, eps=eps)
    reference = nn.LayerNorm(16, eps=eps)
    with torch.no_grad():
        for p in (ours.weight, ours.bias):
            p.normal_()
        reference.weight.copy_(ours.weight)
        reference.bias.copy_(ours.bias)
    torch.testing.assert_close(ours(x), reference(x), atol=1e-5, rtol=1e-5)


def test_layer_norm_shape_error():
    with pytest.raises(ValueError, match=r"`weight` must have shape \(d,\) = \(8,\)"):
        bc.layer_norm(torch.randn(2, 8), torch.ones(4), torch.zeros(8))


def test_gelu_is_the_exact_erf_form():
    x = torch.linspace(-6, 6, 101)
    torch.testing.assert_close(bc.gelu(x), F.gelu(x))
    assert (bc.gelu(x) - F.gelu(x, approximate="tanh")).abs().max() > 1e-4


def test_feed_forward_is_gelu_between_two_linear_maps():
    torch.manual_seed(0)
    block = bc.FeedForward(8, 32)
    x = torch.randn(2, 3, 8)
    w1, b1 = block.intermediate.weight.T, block.intermediate.bias
    w2, b2 = block.output.weight.T, block.output.bias
    expected = bc.gelu(x @ w1 + b1) @ w2 + b2  # the formula, with the erf GELU written out
    torch.testing.assert_close(bc.feed_forward(x, w1, b1, w2, b2), expected)
    torch.testing.assert_close(block(x), expected)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda b, x: bc.feed_forward(torch.randn(2, 3, 5), *b.args), r"`x` must have last dimension d_model = w1"),
        (lambda b, x: bc.feed_forward(x, *b.args[:2], b.args[0], b.args[3]), r"`w2` must have shape \(d_ff, d_model\)"),
        (lambda b, x: bc.feed_forward(x, b.args[0], torch.zeros(8), *b.args[2:]), r"`b1` must have shape \(32,\)"),
        (lambda b, x: bc.feed_forward(x, b.args[0], None, *b.args[2:]), r"`b1` must be a torch.Tensor, got NoneType"),
        (lambda b, x: bc.feed_forward(x.half(), *b.args), r"`w1` has dtype torch.float32 but `x` has torch.float16"),
    ],
)
def test_feed_forward_errors_name_the_argument(call, match):
    block = bc.FeedForward(8, 32)
    block.args = (block.intermediate.weight.T, block.intermediate.bias, block.output.weight.T, block.output.bias)
    with pytest.raises((ValueError, TypeError), match=match):
        call(block, torch.randn(2, 3, 8))


def test_layer_norm_names_the_input_and_keeps_its_dtype():
    with pytest.raises(ValueError, match=r"`weight` must have shape \(d,\) = \(4,\), got a tensor of shape \(8,\)"):
        bc.layer_norm(torch.randn(2, 4), torch.ones(8), torch.zeros(8))
    for fused in (True, False):
        assert bc.LayerNorm(4, fused=fused)(torch.randn(2, 4).half()).dtype == torch.float16
    with pytest.raises(TypeError, match="`x` must hold floating-point numbers"):
        bc.layer_norm(torch.ones(2, 4, dtype=torch.long), torch.ones(4), torch.zeros(4))


def copy_into_torch_layer(ours: bc.EncoderLayer, norm_first: bool) -> nn.TransformerEncoderLayer:
    d_model = ours.attention.d_model
    d_ff = ours.feed_forward.intermediate.out_features
    reference = nn.TransformerEncoderLayer(
        d_model, ours.attention.num_heads, d_ff, dropout=0.0, activation="gelu",
        layer_norm_eps=1e-12, batch_first=True, norm_first=norm_first,
    )  # fmt: skip
    attention = ours.attention
    with torch.no_grad():
        reference.self_attn.in_proj_weight.copy_(
            torch.cat([attention.query.weight, attention.key.weight, attention.value.weight])
        )
        reference.self_attn.in_proj_bias.copy_(
            torch.cat([attention.query.bias, attention.key.bias, attention.value.bias])
        )
        reference.self_attn.out_proj.load_state_dict(attention.output.state_dict())
        reference.linear1.load_state_dict(ours.feed_forward.intermediate.state_dict())
        reference.linear2.load_state_dict(ours.feed_forward.output.state_dict())
        reference.norm1.load_state_dict(ours.attention_norm.state_dict())
        reference.norm2.load_state_dict(ours.output_norm.state_dict())
    return reference.eval()


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_torch_transformer_encoder_layer(norm_first):
    torch.manual_seed(0)
    ours = bc.EncoderLayer(32, 4, 64, dropout_p=0.0, attention_dropout_p=0.0, norm_first=norm_first).eval()
    with torch.no_grad():
        for norm in (ours.attention_norm, ours.output_norm):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.normal_()
    reference = copy_into_torch_layer(ours, norm_first)
    x = torch.randn(2, 7, 32)
    keep = bc.padding_mask([7, 5])
    out, _ = ours(x, bc.expand_padding_mask(keep))
    expected = reference(x, src_key_padding_mask=~keep)  # PyTorch: True = ignore
    torch.testing.assert_close(out[0], expected[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[1, :5], expected[1, :5], atol=1e-5, rtol=1e-5)


def test_post_ln_output_is_normalised_pre_ln_is_not():
    torch.manual_seed(0)
    x = torch.randn(1, 4, 16) * 5
    post, _ = bc.EncoderLayer(16, 2, 32, dropout_p=0.0).eval()(x)
    pre, _ = bc.EncoderLayer(16, 2, 32, dropout_p=0.0, norm_first=True).eval()(x)
    torch.testing.assert_close(post.mean(-1), torch.zeros(1, 4), atol=1e-5, rtol=0)
    assert pre.mean(-1).abs().max() > 0.1


def test_fused_layer_norm_equals_the_teaching_path_outputs_and_gradients():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 16) * 4 + 2
    fused, teaching = bc.LayerNorm(16), bc.LayerNorm(16, fused=False)
    with torch.no_grad():
        fused.weight.normal_()
        fused.bias.normal_()
    teaching.load_state_dict(fused.state_dict())
    upstream = torch.randn(3, 5, 16)  # the same gradient arrives from above on both paths
    results = []
    for norm in (fused, teaching):
        xi = x.clone().requires_grad_()
        y = norm(xi)
        (y * upstream).sum().backward()
        results.append((y, xi.grad, norm.weight.grad, norm.bias.grad))
    for a, b in zip(*results, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(results[1][0], bc.layer_norm(x, fused.weight, fused.bias), atol=0, rtol=0)
    assert "fused=False" in repr(teaching) and "fused" not in repr(fused)


def test_dropout_p_is_a_probability_and_dropout_a_module():
    attention = bc.MultiHeadAttention(8, 2, dropout_p=0.2)
    layer = bc.EncoderLayer(8, 2, 16, dropout_p=0.3, attention_dropout_p=0.2)
    assert attention.dropout_p == 0.2 and layer.attention.dropout_p == 0.2
    assert isinstance(layer.dropout, nn.Dropout) and layer.dropout.p == 0.3
    with pytest.raises(ValueError, match=r"`dropout_p` must be a probability in \[0, 1\), got 1.0"):
        bc.MultiHeadAttention(8, 2, dropout_p=1.0)
    with pytest.raises(ValueError, match=r"`attention_dropout_p` must be a probability in \[0, 1\), got 1.5"):
        bc.EncoderLayer(8, 2, 16, attention_dropout_p=1.5)
    with pytest.raises(TypeError, match=r"`dropout_p` must be a probability in \[0, 1\), got bool True"):
        bc.EncoderLayer(8, 2, 16, dropout_p=True)


def small_modules():
    """Each module of the encoder with a small input, as (module, positional args of forward)."""
    torch.manual_seed(0)
    config = bc.BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=24
    )
    x = torch.randn(2, 5, 16)  # (batch, seq, d_model)
    mask = bc.expand_padding_mask(bc.padding_mask([5, 3]))  # (batch, 1, 1, seq)
    ids = torch.randint(0, 50, (2, 5))
    return [
        (bc.MultiHeadAttention(16, 4), (x, mask, False)),
        (bc.MultiHeadAttention(16, 4), (x, mask, True)),
        (bc.LayerNorm(16), (x,)),
        (bc.LayerNorm(16, fused=False), (x,)),
        (bc.FeedForward(16, 24), (x,)),
        (bc.EncoderLayer(16, 4, 24), (x, mask, True)),
        (bc.EncoderLayer(16, 4, 24, norm_first=True), (x, mask)),
        (bc.Encoder(2, d_model=16, num_heads=4, d_ff=24), (x, mask, True, True)),
        (bc.BertEmbeddings(config), (ids, torch.zeros_like(ids))),
    ]


def calls_into_the_package(run):
    """(file name, function name) of every bertcourse function that ``run()`` calls (Python frames only)."""
    package = str(Path(bc.__file__).parent)
    calls = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(package):
            calls.append((Path(frame.f_code.co_filename).name, frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return calls


# What a layer's forward may check: its input's metadata (rank, width, dtype, a mask that broadcasts).
METADATA_CHECKS = {"require_layer_input", "require_float_tensor", "require_tensor", "require_mask_shape"}


def test_modules_check_only_metadata_and_call_the_cores():
    """A forward pass runs no value check: no helper of _validation but the metadata checks at a layer's
    border and can_check_values (which guards a shortcut), no check_* function, no checked public
    function (each would call _validation). A module that only holds layers checks nothing itself."""
    for module, args in small_modules():
        with torch.no_grad():
            calls = calls_into_the_package(lambda module=module, args=args: module.eval()(*args))
        checks = [
            name
            for file, name in calls
            if name != "can_check_values" and (file == "_validation.py" or "check" in name or "require" in name)
        ]
        assert set(checks) <= METADATA_CHECKS, (type(module).__name__, checks)
        borders = checks.count("require_layer_input")
        layers = sum(isinstance(m, (bc.MultiHeadAttention, bc.LayerNorm, bc.FeedForward)) for m in module.modules())
        assert borders == layers, (type(module).__name__, borders, layers)  # one check per layer, none more
        assert ("multihead.py", "_split_heads") in calls or not isinstance(module, bc.MultiHeadAttention)


LAYERS = [bc.MultiHeadAttention(8, 2), bc.LayerNorm(8), bc.FeedForward(8, 16)]


@pytest.mark.parametrize("layer", LAYERS, ids=lambda layer: type(layer).__name__)
def test_a_layer_called_on_a_tensor_of_the_wrong_width_or_dtype_says_so(layer):
    with pytest.raises(ValueError, match=r"`x` must have last dimension d_model = 8, the width this layer was built"):
        layer(torch.randn(2, 3, 6))
    with pytest.raises(TypeError, match=r"`x` has dtype torch.float64 but the layer's weights have torch.float32"):
        layer(torch.randn(2, 3, 8, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"`x` must hold floating-point numbers"):
        layer(torch.ones(2, 3, 8, dtype=torch.long))
    with pytest.raises(TypeError, match=r"`x` must be a torch.Tensor, got list .*torch.tensor"):
        layer([[0.0] * 8])
    with torch.autocast("cpu", dtype=torch.bfloat16):  # a half input beside float32 weights is autocast's
        layer(torch.randn(2, 3, 8, dtype=torch.bfloat16))


def test_attention_says_which_mask_does_not_fit():
    attention = bc.MultiHeadAttention(8, 2)
    x = torch.randn(2, 3, 8)
    with pytest.raises(ValueError, match=r"`x` must have 3 dimensions, got a tensor of shape \(3, 8\)"):
        attention(x[0])
    with pytest.raises(ValueError, match=r"`mask` of shape \(2, 3\) cannot broadcast .* a \(batch, k_len\) padding"):
        attention(x, torch.ones(2, 3, dtype=torch.bool))
    assert attention(x, torch.ones(2, 1, 1, 3, dtype=torch.bool))[0].shape == (2, 3, 8)


def test_no_value_is_read_back_from_a_device():
    """On the meta device every value read raises, so this is the GPU's rule checked on a CPU:
    a forward pass, and the public functions' checks, read no value from a non-CPU tensor."""
    for module, args in small_modules():
        module.to("meta")(*(a.to("meta") if isinstance(a, torch.Tensor) else a for a in args))
    with torch.device("meta"):
        q = torch.randn(2, 3, 4)
        int_mask = torch.ones(3, 3, dtype=torch.long)
        assert bc.scaled_dot_product_attention(q, q, q, int_mask)[0].device.type == "meta"
        assert bc.scaled_dot_product_attention(q, q, q, int_mask, need_weights=False)[0].device.type == "meta"
        assert bc.mask_from_attention_mask(int_mask).dtype == torch.bool
        assert bc.LearnedPositionEmbedding(8, 4)(torch.arange(5)).shape == (5, 4)
        assert bc.padding_mask(torch.tensor([3, 2]), 4).shape == (2, 4)
        ids = torch.ones(2, 5, dtype=torch.long)
        tables = (torch.randn(9, 4), torch.randn(8, 4), torch.randn(2, 4), torch.ones(4), torch.zeros(4))
        assert bc.bert_embeddings(ids, None, *tables).shape == (2, 5, 4)


def test_every_module_compiles_to_one_graph():
    """fullgraph=True fails on any graph break (a value read, a data-dependent branch); the
    eager backend only traces, so this is quick."""
    for module, args in small_modules():
        module.eval()
        torch._dynamo.reset()
        compiled = torch.compile(module, fullgraph=True, backend="eager")
        with torch.no_grad():
            torch.testing.assert_close(compiled(*args), module(*args), atol=1e-6, rtol=1e-6)
