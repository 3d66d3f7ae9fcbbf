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


def test_feed_forward_function_matches_module():
    torch.manual_seed(0)
    block = bc.FeedForward(8, 32)
    x = torch.randn(2, 3, 8)
    w1, b1 = block.intermediate.weight.T, block.intermediate.bias
    w2, b2 = block.output.weight.T, block.output.bias
    torch.testing.assert_close(bc.feed_forward(x, w1, b1, w2, b2), block(x))
    with pytest.raises(ValueError, match="expected w1 \\(d_model, d_ff\\)"):
        bc.feed_forward(x, w2, b1, w1, b2)


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
