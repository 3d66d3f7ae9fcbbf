"""Exercise of notebook 04: ``sinusoidal_position_encoding``.

Each mistake changes one piece of the formula: sin and cos swapped, the exponent's i, 2i or d_model,
positions from 1, or all sines before all cosines instead of interleaved.
"""

from __future__ import annotations

import torch

from ..positional import sinusoidal_position_encoding
from .records import Case, Exercise, Mistake


def _sinusoid_cases(g):
    return [
        Case("10 positions, d_model 16", (10, 16), ("non-square",)),
        Case("odd length: 7 positions, d_model 6", (7, 6), ("non-square",)),
        Case("one position, d_model 4", (1, 4), ("non-square",)),
        Case("50 positions, d_model 32", (50, 32), ("non-square",)),
        Case("as many positions as features: 8 positions, d_model 8", (8, 8), ("square",)),
    ]


def _interleave(even: torch.Tensor, odd: torch.Tensor) -> torch.Tensor:
    """(max_len, d/2) and (max_len, d/2) -> (max_len, d) with ``even`` in columns 0, 2, ... and ``odd`` in 1, 3, ..."""
    return torch.stack([even, odd], dim=-1).flatten(start_dim=-2)


def _pair_index(d_model):
    return torch.arange(d_model // 2, dtype=torch.float32)  # i = 0, 1, ..., d/2 - 1


def _sinusoid_sin_cos_swapped(max_len, d_model):
    angle = torch.arange(max_len)[:, None] / 10000 ** (2 * _pair_index(d_model) / d_model)
    return _interleave(torch.cos(angle), torch.sin(angle))


def _sinusoid_i_instead_of_2i(max_len, d_model):
    angle = torch.arange(max_len)[:, None] / 10000 ** (_pair_index(d_model) / d_model)
    return _interleave(torch.sin(angle), torch.cos(angle))


def _sinusoid_exponent_not_divided(max_len, d_model):
    angle = torch.arange(max_len)[:, None] / 10000 ** (2 * _pair_index(d_model))
    return _interleave(torch.sin(angle), torch.cos(angle))


def _sinusoid_exponent_sign(max_len, d_model):
    angle = torch.arange(max_len)[:, None] * 10000 ** (2 * _pair_index(d_model) / d_model)
    return _interleave(torch.sin(angle), torch.cos(angle))


def _sinusoid_positions_from_1(max_len, d_model):
    angle = torch.arange(1, max_len + 1)[:, None] / 10000 ** (2 * _pair_index(d_model) / d_model)
    return _interleave(torch.sin(angle), torch.cos(angle))


def _sinusoid_exponent_doubled(max_len, d_model):
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # already 2i ...
    angle = torch.arange(max_len)[:, None] / 10000 ** (2 * two_i / d_model)  # ... doubled again: 4i / d
    return _interleave(torch.sin(angle), torch.cos(angle))


def _sinusoid_integer_exponent(max_len, d_model):
    two_i = torch.arange(0, d_model, 2)  # integers
    angle = torch.arange(max_len)[:, None] / 10000 ** (two_i // d_model)  # 2i // d is 0: every frequency 1
    return _interleave(torch.sin(angle), torch.cos(angle))


def _sinusoid_precedence(max_len, d_model):
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = torch.arange(max_len)[:, None] / 10000**two_i / d_model  # (pos / 10000^(2i)) / d
    return _interleave(torch.sin(angle), torch.cos(angle))


def _sinusoid_halves(max_len, d_model):
    angle = torch.arange(max_len)[:, None] / 10000 ** (2 * _pair_index(d_model) / d_model)
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)


SINUSOIDAL_POSITION_ENCODING = Exercise(
    name="sinusoidal_position_encoding",
    reference=sinusoidal_position_encoding,
    prompt="your function receives `max_len` and an even `d_model` (ints); it returns the float32 table "
    "(max_len, d_model) with `PE[pos, 2i] = sin(pos / 10000^(2i/d_model))` and "
    "`PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model))`, positions starting at 0.",
    start="positions `torch.arange(max_len)[:, None]` and even feature indices `torch.arange(0, d_model, 2)`.",
    make_cases=_sinusoid_cases,
    axes={"": ("position rows", "feature columns")},
    notebook="04",
    # Right answers differ in rounding: pos / 10000 ** (2i / d) and exp(-2i log(10000) / d) disagree by
    # ~2e-6 at the cases' largest positions; 1e-4 accepts both while every catalogued mistake is far off.
    atol=1e-4,
    rtol=1e-4,
    mistakes=(
        Mistake(
            "sin and cos swapped",
            "even columns (0, 2, ...) hold the sines, odd columns the cosines.",
            _sinusoid_sin_cos_swapped,
        ),
        Mistake(
            "the exponent i/d_model instead of 2i/d_model",
            "the exponent uses the even feature index 2i, as in `torch.arange(0, d_model, 2) / d_model`.",
            _sinusoid_i_instead_of_2i,
        ),
        Mistake(
            "the exponent not divided by d_model",
            "the exponent is 2i / d_model, so the frequencies go from 1 down to about 1/10000.",
            _sinusoid_exponent_not_divided,
        ),
        Mistake(
            "multiplying by 10000^(2i/d_model) instead of dividing",
            "the angle is pos / 10000^(2i/d_model): the frequencies shrink as i grows.",
            _sinusoid_exponent_sign,
        ),
        Mistake(
            "positions starting at 1",
            "the first position is 0 (`torch.arange(max_len)`), so row 0 is sin 0 = 0, cos 0 = 1.",
            _sinusoid_positions_from_1,
        ),
        Mistake(
            "the exponent doubled, 4i/d_model",
            "`torch.arange(0, d_model, 2)` already counts 2i (0, 2, 4, ...): divide it by d_model as it is, "
            "without another factor 2.",
            _sinusoid_exponent_doubled,
        ),
        Mistake(
            "integer division in the exponent",
            "`2i // d_model` rounds down to 0, so every frequency is 1: divide floats, "
            "`torch.arange(0, d_model, 2, dtype=torch.float32) / d_model`.",
            _sinusoid_integer_exponent,
        ),
        Mistake(
            "operator precedence in the exponent (`10000 ** 2 * i / d`)",
            "`**` binds tighter than `*` and `/`: put the whole exponent in parentheses, `10000 ** (2 * i / d_model)`.",
            _sinusoid_precedence,
        ),
        Mistake(
            "all sines first, then all cosines",
            "interleave them: sines in the even columns `table[:, 0::2]`, cosines in the odd ones `table[:, 1::2]`.",
            _sinusoid_halves,
        ),
    ),
)
