"""Multi-head attention: split/merge, against torch.nn.MultiheadAttention with copied weights."""

import pytest
import torch
from torch import nn

import bertcourse as bc


def test_split_and_merge_are_inverses_with_the_right_shapes():
    x = torch.randn(2, 5, 12)
    heads = bc.split_heads(x, 3)
    assert heads.shape == (2, 3, 5, 4)
    torch.testing.assert_close(heads[:, 1], x[..., 4:8])  # head 1 is features 4..7 of every token
    torch.testing.assert_close(bc.merge_heads(heads), x)


def copy_into_torch_mha(ours: bc.MultiHeadAttention) -> nn.MultiheadAttention:
    reference = nn.MultiheadAttention(ours.d_model, ours.num_heads, batch_first=True)
    with torch.no_grad():
        reference.in_proj_weight.copy_(torch.cat([ours.query.weight, ours.key.weight, ours.value.weight]))
        reference.in_proj_bias.copy_(torch.cat([ours.query.bias, ours.key.bias, ours.value.bias]))
        reference.out_proj.weight.copy_(ours.output.weight)
        reference.out_proj.bias.copy_(ours.output.bias)
    return reference.eval()


@pytest.mark.parametrize("padded", [False, True])
def test_matches_torch_multihead_attention(padded):
    torch.manual_seed(0)
    ours = bc.MultiHeadAttention(24, 4).eval()
    reference = copy_into_torch_mha(ours)
    x = torch.randn(3, 6, 24)
    keep = bc.padding_mask([6, 4, 2]) if padded else torch.ones(3, 6, dtype=torch.bool)  # True = attend
    out, weights = ours(x, bc.expand_padding_mask(keep), need_weights=True)
    # PyTorch's key_padding_mask says True = IGNORE: the opposite convention, hence ~keep.
    expected, expected_weights = reference(x, x, x, key_padding_mask=~keep, average_attn_weights=False)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(weights, expected_weights, atol=1e-6, rtol=1e-5)
    fast, none = ours(x, bc.expand_padding_mask(keep))
    assert none is None
    torch.testing.assert_close(fast, out, atol=1e-6, rtol=1e-6)


def test_functional_form_matches_the_module_without_biases():
    torch.manual_seed(0)
    module = bc.MultiHeadAttention(16, 4).eval()
    for linear in (module.query, module.key, module.value, module.output):
        nn.init.zeros_(linear.bias)
    x = torch.randn(2, 5, 16)
    mask = bc.causal_mask(5)
    expected, _ = module(x, mask)
    w = [lin.weight.T for lin in (module.query, module.key, module.value, module.output)]
    torch.testing.assert_close(bc.multi_head_attention(x, *w, num_heads=4, mask=mask), expected, atol=1e-6, rtol=1e-5)


def test_head_count_must_divide_width():
    with pytest.raises(ValueError, match=r"`d_model`=512 is not divisible by `num_heads`=12.*768"):
        bc.MultiHeadAttention(512, 12)


def test_wrong_input_width_is_explained():
    with pytest.raises(ValueError, match=r"`w_q` must have shape \(d_model, d_model\) = \(16, 16\)"):
        bc.multi_head_attention(torch.randn(2, 3, 16), *[torch.randn(24, 24)] * 4, num_heads=4)
    with pytest.raises(ValueError, match=r"`w_o` must have shape \(d_model, d_model\)"):
        bc.multi_head_attention(torch.randn(1, 2, 4), *[torch.randn(4, 4)] * 3, torch.randn(4, 3), num_heads=2)
