"""Rotary position embeddings: the formula, the relative-position property, parity with Hugging Face, errors."""

import math

import pytest
import torch

from bertcourse.rotary import apply_rotary


def test_each_pair_turns_by_position_times_its_frequency():
    x = torch.randn(5, 6, dtype=torch.float64)  # (seq, d)
    rotated = apply_rotary(x)
    for pos in range(5):
        for i in range(3):
            angle = pos * 10000.0 ** (-2 * i / 6)
            a, b = x[pos, 2 * i].item(), x[pos, 2 * i + 1].item()
            assert rotated[pos, 2 * i].item() == pytest.approx(a * math.cos(angle) - b * math.sin(angle), abs=1e-6)
            assert rotated[pos, 2 * i + 1].item() == pytest.approx(a * math.sin(angle) + b * math.cos(angle), abs=1e-6)


def test_equals_complex_multiplication():
    """The RoFormer/LLaMA reference form: each pair is a complex number times e^{i pos omega}."""
    x = torch.randn(2, 3, 7, 8)  # (batch, heads, seq, d)
    omega = 10000.0 ** (-torch.arange(0, 8, 2, dtype=torch.float32) / 8)  # (4,)
    turn = torch.polar(torch.ones(7, 4), torch.arange(7.0)[:, None] * omega)  # (seq, 4) complex
    expected = torch.view_as_real(torch.view_as_complex(x.reshape(2, 3, 7, 4, 2)) * turn).flatten(-2)
    torch.testing.assert_close(apply_rotary(x), expected)


def test_scores_depend_only_on_the_distance():
    q, k = torch.randn(16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)
    for distance in (0, 1, 7, -3):
        scores = []
        for start in (5, 40, 300):
            positions = torch.tensor([start, start + distance])
            rotated = apply_rotary(torch.stack([q, k]), positions)  # row 0: q at start, row 1: k at start + distance
            scores.append(rotated[0] @ rotated[1])
        torch.testing.assert_close(torch.stack(scores), scores[0].expand(3), atol=1e-9, rtol=0)


def test_keeps_lengths_and_position_zero_is_the_identity():
    x = torch.randn(3, 10, 12)
    rotated = apply_rotary(x)
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(rotated[:, 0], x[:, 0])
    torch.testing.assert_close(apply_rotary(x, torch.arange(10)), rotated)
    torch.testing.assert_close(
        apply_rotary(x, torch.arange(10.0) + 0.5)[:, 0], apply_rotary(x[:, :1], torch.tensor([0.5]))[:, 0]
    )


def test_matches_hugging_face_llama_rotary_on_permuted_features():
    """Hugging Face pairs feature i with i + d/2 ("rotate half"): the same rotation after a permutation."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    d, seq = 8, 6
    config = transformers.LlamaConfig(hidden_size=2 * d, num_attention_heads=2, max_position_embeddings=64)
    q = torch.randn(1, 2, seq, d)  # (batch, heads, seq, d)
    to_halves = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])  # pair (2i, 2i+1) -> (i, i + d/2)
    position_ids = torch.arange(seq)[None]  # (1, seq)
    try:
        rotary = LlamaRotaryEmbedding(config=config)  # transformers 4.45 on: built from the config
    except TypeError:
        rotary = LlamaRotaryEmbedding(d, max_position_embeddings=64)  # earlier: from the head size
    cos, sin = rotary(q, position_ids)  # (1, seq, d) each
    theirs, _ = apply_rotary_pos_emb(q[..., to_halves], q[..., to_halves], cos, sin)
    torch.testing.assert_close(apply_rotary(q)[..., to_halves], theirs)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_dtype_follows_the_input(dtype):
    x = torch.randn(4, 8)
    rotated = apply_rotary(x.to(dtype))
    assert rotated.dtype == dtype
    torch.testing.assert_close(rotated.float(), apply_rotary(x), atol=0.05, rtol=0)


def test_bad_input_is_rejected_with_a_clear_error():
    with pytest.raises(TypeError, match=r"`x` must be a torch.Tensor, got list"):
        apply_rotary([[1.0, 2.0]])
    with pytest.raises(ValueError, match=r"`x` must have at least 2 dimensions"):
        apply_rotary(torch.randn(4))
    with pytest.raises(TypeError, match=r"`x` must hold floating-point numbers"):
        apply_rotary(torch.ones(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match=r"even number of features d.*d = 5"):
        apply_rotary(torch.randn(3, 5))
    with pytest.raises(ValueError, match=r"`positions` must give one position per row of `x`: shape \(3,\)"):
        apply_rotary(torch.randn(3, 4), torch.arange(4))
    with pytest.raises(ValueError, match=r"`positions` must have 1 dimensions"):
        apply_rotary(torch.randn(3, 4), torch.arange(3)[None])
    with pytest.raises(TypeError, match=r"`positions` must hold integers or floats"):
        apply_rotary(torch.randn(3, 4), torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"`base` must be a positive number.*got float -1.0"):
        apply_rotary(torch.randn(3, 4), base=-1.0)
