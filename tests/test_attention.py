"""Scaled dot-product attention: teaching path, fast path and PyTorch agree; masks behave."""

import math

import pytest
import torch
import torch.nn.functional as F

import bertcourse as bc


def random_qkv(*lead, q_len=5, k_len=7, d_k=8, d_v=6, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*lead, q_len, d_k, generator=g).to(dtype)
    k = torch.randn(*lead, k_len, d_k, generator=g).to(dtype)
    v = torch.randn(*lead, k_len, d_v, generator=g).to(dtype)
    return q, k, v


def test_qkv_projection_is_x_times_each_matrix():
    x = torch.randn(2, 4, 6)
    w_q, w_k, w_v = torch.randn(6, 3), torch.randn(6, 3), torch.randn(6, 5)
    q, k, v = bc.qkv_projection(x, w_q, w_k, w_v)
    torch.testing.assert_close(q, torch.einsum("bnd,de->bne", x, w_q))
    torch.testing.assert_close(k, torch.einsum("bnd,de->bne", x, w_k))
    assert v.shape == (2, 4, 5)


def test_attention_scores_are_unscaled_dot_products():
    q, k, _ = random_qkv(2, q_len=3, k_len=4)
    scores = bc.attention_scores(q, k)
    assert scores.shape == (2, 3, 4)
    assert scores[1, 2, 3] == pytest.approx(float(q[1, 2] @ k[1, 3]), abs=1e-5)


@pytest.mark.parametrize("lead", [(), (3,), (2, 4)])
@pytest.mark.parametrize("masked", [False, True])
def test_matches_pytorch_sdpa_fp32(lead, masked):
    q, k, v = random_qkv(*lead)
    mask = torch.rand(*lead, 5, 7, generator=torch.Generator().manual_seed(1)) > 0.3 if masked else None
    if masked:
        mask[..., 0] = True  # every query may attend somewhere (PyTorch gives NaN otherwise)
    ours, weights = bc.scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=mask), atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(*lead, 5))
    if masked:
        assert (weights[~mask] == 0).all()


@pytest.mark.parametrize("masked", [False, True])
def test_matches_pytorch_sdpa_bf16(masked):
    q, k, v = random_qkv(2, 3, dtype=torch.bfloat16)
    mask = bc.causal_mask(7)[:5] if masked else None
    ours, _ = bc.scaled_dot_product_attention(q, k, v, mask)
    reference = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask)
    assert ours.dtype == torch.bfloat16
    # bf16 keeps 8 bits of mantissa (~2-3 significant digits): compare with fp32 at 2e-2.
    torch.testing.assert_close(ours.float(), reference, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("mask_kind", ["none", "padding", "causal", "fully_masked_row"])
def test_teaching_and_fast_paths_agree(mask_kind):
    q, k, v = random_qkv(2, 3, q_len=7, k_len=7)
    masks = {
        "none": None,
        "padding": bc.expand_padding_mask(bc.padding_mask([7, 4])),
        "causal": bc.causal_mask(7),
        "fully_masked_row": bc.causal_mask(7) & torch.tensor([False] + [True] * 6)[:, None],
    }
    mask = masks[mask_kind]
    teaching, weights = bc.scaled_dot_product_attention(q, k, v, mask)
    fast, none = bc.scaled_dot_product_attention(q, k, v, mask, need_weights=False)
    assert none is None and weights is not None
    torch.testing.assert_close(fast, teaching, atol=1e-6, rtol=1e-6)


def test_scaling_uses_sqrt_of_key_width():
    q, k, v = random_qkv(q_len=1, k_len=3, d_k=16)
    _, weights = bc.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(weights, torch.softmax(q @ k.T / math.sqrt(16), dim=-1))


def test_mask_accepts_0_1_integers_like_bool():
    q, k, v = random_qkv(q_len=4, k_len=4)
    as_int = bc.causal_mask(4).long()
    torch.testing.assert_close(
        bc.scaled_dot_product_attention(q, k, v, as_int)[0], bc.scaled_dot_product_attention(q, k, v, as_int.bool())[0]
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_masked_rows_in_half_precision_do_not_overflow_or_nan(dtype):
    q, k, v = random_qkv(2, 4, dtype=dtype)
    mask = bc.expand_padding_mask(bc.padding_mask([7, 2]))  # (2, 1, 1, 7)
    fully = torch.zeros(5, 7, dtype=torch.bool)  # every query of every row fully masked
    for m in (mask, fully):
        for need_weights in (True, False):
            out, _ = bc.scaled_dot_product_attention(q, k, v, m, need_weights=need_weights)
            assert out.dtype == dtype
            assert torch.isfinite(out).all()


def test_fully_masked_row_gives_zero_weights_and_zero_output():
    q, k, v = random_qkv(q_len=3, k_len=4)
    mask = torch.tensor([[True, True, False, False], [False] * 4, [True] * 4])
    out, weights = bc.scaled_dot_product_attention(q, k, v, mask)
    assert (weights[1] == 0).all() and (out[1] == 0).all()
    torch.testing.assert_close(weights[0, :2].sum(), torch.tensor(1.0))


def test_dropout_drops_attention_on_both_paths():
    q, k, v = random_qkv(q_len=64, k_len=64)
    torch.manual_seed(0)
    _, weights = bc.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert (weights == 0).float().mean() > 0.3
    plain, _ = bc.scaled_dot_product_attention(q, k, v, need_weights=False)
    dropped, _ = bc.scaled_dot_product_attention(q, k, v, need_weights=False, dropout_p=0.5)
    assert (dropped - plain).abs().max() > 0.1
    with pytest.raises(ValueError, match=r"`dropout_p` must be a probability in \[0, 1\), got -1"):
        bc.scaled_dot_product_attention(q, k, v, dropout_p=-1)


def test_dtypes_are_checked_before_computing():
    q, k, v = random_qkv(q_len=2, k_len=2)
    with pytest.raises(TypeError, match=r"`v` has dtype torch.float16 but `q` has torch.float32"):
        bc.scaled_dot_product_attention(q, k, v.half())
    with pytest.raises(TypeError, match=r"`q` must hold floating-point numbers.*\.float\(\)"):
        bc.scaled_dot_product_attention(q.long(), k.long(), v.long())
    with pytest.raises(TypeError, match=r"`w_k` has dtype torch.float64 but `x` has torch.float32"):
        bc.qkv_projection(torch.randn(3, 4), torch.randn(4, 2), torch.randn(4, 2).double(), torch.randn(4, 2))
    with pytest.raises(TypeError, match=r"`w_q` has dtype torch.float32 but `x` has torch.float16"):
        bc.multi_head_attention(torch.randn(1, 3, 8).half(), *[torch.randn(8, 8)] * 4, num_heads=2)


@pytest.mark.parametrize(
    "q_shape, k_shape, v_shape, argument",
    [
        ((2, 5, 8), (2, 7, 4), (2, 7, 6), "`q` and `k`"),  # widths differ
        ((2, 5, 8), (3, 7, 8), (3, 7, 6), "`q` and `k`"),  # batch differs
        ((2, 5, 8), (2, 7, 8), (2, 6, 6), "`v`"),  # one value per key
        ((8,), (2, 7, 8), (2, 7, 6), "`q`"),  # too few dims
    ],
)
def test_shape_errors_name_the_argument(q_shape, k_shape, v_shape, argument):
    with pytest.raises(ValueError, match=argument):
        bc.scaled_dot_product_attention(torch.randn(q_shape), torch.randn(k_shape), torch.randn(v_shape))


def test_non_tensor_input_is_a_type_error():
    with pytest.raises(TypeError, match="`q` must be a torch.Tensor, got list"):
        bc.scaled_dot_product_attention([[1.0]], torch.randn(1, 1), torch.randn(1, 1))


def test_mask_that_cannot_broadcast_is_explained():
    q, k, v = random_qkv(2, q_len=5, k_len=7)
    with pytest.raises(ValueError, match=r"`mask` of shape \(2, 7\).*padding mask.*mask\[:, None, :\]"):
        bc.scaled_dot_product_attention(q, k, v, bc.padding_mask([7, 3]))
    with pytest.raises(ValueError, match=r"`mask` of shape \(3, 3\) cannot broadcast"):
        bc.scaled_dot_product_attention(q, k, v, torch.ones(3, 3, dtype=torch.bool))


def test_additive_mask_is_rejected_with_advice():
    q, k, v = random_qkv(q_len=2, k_len=2)
    additive = torch.tensor([[0.0, float("-inf")], [0.0, 0.0]])
    with pytest.raises(ValueError, match=r"`mask` must be boolean or hold only 0/1.*Additive masks"):
        bc.scaled_dot_product_attention(q, k, v, additive)
