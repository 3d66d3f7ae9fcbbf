"""LayerNorm, GELU feed-forward and the encoder layer, against PyTorch's own modules."""

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
        (lambda b, x: b(torch.randn(2, 3, 5)), r"`x` must have last dimension d_model = w1.shape\[0\] = 8"),
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


def test_layer_norm_module_names_the_input_and_keeps_its_dtype():
    with pytest.raises(ValueError, match=r"`x` must have last dimension d=8, got a tensor of shape \(2, 4\)"):
        bc.LayerNorm(8)(torch.randn(2, 4))
    assert bc.LayerNorm(4)(torch.randn(2, 4).half()).dtype == torch.float16
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
    ours = bc.EncoderLayer(32, 4, 64, dropout=0.0, attention_dropout=0.0, norm_first=norm_first).eval()
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
    post, _ = bc.EncoderLayer(16, 2, 32, dropout=0.0).eval()(x)
    pre, _ = bc.EncoderLayer(16, 2, 32, dropout=0.0, norm_first=True).eval()(x)
    torch.testing.assert_close(post.mean(-1), torch.zeros(1, 4), atol=1e-5, rtol=0)
    assert pre.mean(-1).abs().max() > 0.1
