"""Positional encodings: sinusoids from the formula, learned positions and their limit."""

import math

import pytest
import torch

import bertcourse as bc


@pytest.mark.parametrize("d_model", [8, 7, 1])
def test_sinusoids_match_the_formula_entry_by_entry(d_model):
    table = bc.sinusoidal_position_encoding(6, d_model)
    assert table.shape == (6, d_model)
    for pos in range(6):
        for j in range(d_model):
            angle = pos / 10000 ** ((j - j % 2) / d_model)
            expected = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            assert table[pos, j].item() == pytest.approx(expected, abs=1e-5)


def test_relative_position_is_a_fixed_rotation():
    table = bc.sinusoidal_position_encoding(50, 16).double()
    k = 5
    frequencies = torch.exp(-math.log(10000.0) * torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    rotated = torch.empty_like(table[:-k])
    cos, sin = torch.cos(k * frequencies), torch.sin(k * frequencies)
    rotated[:, 0::2] = table[:-k, 0::2] * cos + table[:-k, 1::2] * sin
    rotated[:, 1::2] = table[:-k, 1::2] * cos - table[:-k, 0::2] * sin
    torch.testing.assert_close(rotated, table[k:], atol=1e-5, rtol=0)


def test_learned_positions_and_their_limit():
    positions = bc.LearnedPositionEmbedding(8, 4)
    assert positions(5).shape == (5, 4)
    torch.testing.assert_close(positions(torch.tensor([[0, 2]])), positions.weight[[0, 2]][None])
    with pytest.raises(ValueError, match=r"`seq_len` has 9 tokens.*max_position_embeddings=8.*sliding window"):
        positions(9)
    with pytest.raises(ValueError, match=r"`positions` has 9 tokens"):
        positions(torch.tensor([0, 8]))
    with pytest.raises(ValueError, match=r"`seq_len` must be a positive int, got -1"):
        positions(-1)
    with pytest.raises(TypeError, match=r"`seq_len` must be a positive int, got float 2.5"):
        positions(2.5)


def test_bad_sizes_are_rejected():
    with pytest.raises(ValueError, match="`d_model` must be a positive int, got 0"):
        bc.sinusoidal_position_encoding(4, 0)
    with pytest.raises(TypeError, match="`max_len` must be a positive int"):
        bc.sinusoidal_position_encoding(4.0, 8)
