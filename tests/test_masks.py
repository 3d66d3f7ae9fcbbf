"""Masks: one convention (bool, True = may attend), clear errors, safe fill values."""

import pytest
import torch

import bertcourse as bc


def test_padding_mask_from_lengths():
    mask = bc.padding_mask(torch.tensor([3, 1]), max_len=4)
    assert mask.dtype == torch.bool
    assert mask.tolist() == [[True, True, True, False], [True, False, False, False]]
    assert bc.padding_mask([2, 3]).shape == (2, 3)  # max_len defaults to the longest


def test_padding_mask_from_hugging_face_attention_mask():
    hf = torch.tensor([[1, 1, 0], [1, 1, 1]])
    assert bc.mask_from_attention_mask(hf).tolist() == [[True, True, False], [True, True, True]]
    with pytest.raises(ValueError, match="`attention_mask` must be boolean or hold only 0/1"):
        bc.mask_from_attention_mask(torch.tensor([[1, 2]]))


def test_causal_mask_is_lower_triangular_with_diagonal():
    assert bc.causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]


def test_combine_and_expand_padding_with_causal():
    padding = bc.expand_padding_mask(bc.padding_mask([3, 2]))  # (2, 1, 1, 3)
    combined = bc.combine_masks(padding, bc.causal_mask(3), None)
    assert combined.shape == (2, 1, 3, 3)
    assert combined[1, 0].tolist() == [[True, False, False], [True, True, False], [True, True, False]]
    assert bc.combine_masks(None) is None
    with pytest.raises(ValueError, match="cannot be broadcast together"):
        bc.combine_masks(torch.ones(2, 3, dtype=torch.bool), torch.ones(4, 4, dtype=torch.bool))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_fill_value_fits_the_dtype_and_softmax_gives_exact_zero(dtype):
    scores = torch.tensor([2.0, 1.0, 0.5], dtype=dtype).masked_fill(
        torch.tensor([False, True, False]), bc.fill_value(dtype)
    )
    weights = torch.softmax(scores.float(), dim=-1)
    assert weights[1] == 0.0 and torch.isfinite(scores).all()


def test_minus_1e9_overflows_fp16_which_is_why_we_do_not_use_it():
    with pytest.raises(RuntimeError):
        torch.zeros(2, dtype=torch.float16).masked_fill(torch.tensor([True, False]), -1e9)


@pytest.mark.parametrize(
    "call, match",
    [
        (
            lambda: bc.padding_mask(torch.tensor([1.5, 2.0])),
            "`lengths` must hold integers \\(torch.long\\).*Lengths count tokens",
        ),
        (lambda: bc.padding_mask(torch.tensor([[1, 2]])), "`lengths` must be 1-D"),
        (lambda: bc.padding_mask([2.7, 1.2]), "`lengths` must be a flat list of ints"),
        (lambda: bc.padding_mask([]), "`lengths` is empty"),
        (lambda: bc.padding_mask([0, 0]), "`lengths` are all 0.*pass `max_len`"),
        (lambda: bc.padding_mask([-1, 2]), "`lengths` must be >= 0"),
        (lambda: bc.padding_mask([5, 2], max_len=3), "`max_len`=3 is shorter than the longest sentence"),
        (lambda: bc.causal_mask(0), "`seq_len` must be a positive int, got 0"),
        (lambda: bc.expand_padding_mask(torch.ones(2, 2, 2, dtype=torch.bool)), r"`mask` must be a key-padding"),
    ],
)
def test_mask_errors_name_the_argument(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
