"""Exercises of notebook 04: ``sinusoidal_position_encoding`` and ``apply_rotary``.

Each sinusoid mistake changes one piece of the formula: sin and cos swapped, the exponent's i, 2i or
d_model, positions from 1, or all sines before all cosines instead of interleaved; the cases include
odd widths, whose last sine has no cosine partner. Each rotary mistake pairs, turns or counts the
features another way: halves instead of neighbours, the angle's sign, positions from 1 or along
the wrong axis.
"""

from __future__ import annotations

import torch

from ..positional import apply_rotary, sinusoidal_position_encoding
from .random_inputs import _randn
from .records import Case, Exercise, Knob, Mistake


def _sinusoid_cases(g):
    return [
        Case("10 positions, d_model 16", (10, 16), ("non-square",)),
        Case("odd length: 7 positions, d_model 6", (7, 6), ("non-square",)),
        Case("one position, d_model 4", (1, 4), ("non-square",)),
        Case("50 positions, d_model 32", (50, 32), ("non-square",)),
        Case("as many positions as features: 8 positions, d_model 8", (8, 8), ("square",)),
        Case("an odd width: 6 positions, d_model 5 (the last sine has no cosine)", (6, 5), ("odd", "non-square")),
        Case("an odd width: 3 positions, d_model 9", (3, 9), ("odd", "non-square")),
    ]


def _interleave(even: torch.Tensor, odd: torch.Tensor) -> torch.Tensor:
    """(max_len, ceil(d/2)) twice -> (max_len, d) with ``even`` in columns 0, 2, ... and ``odd`` in 1, 3, ...

    The width is 2 * ceil(d/2); callers with an odd d cut the last (cosine) column off with ``[:, :d]``.
    """
    return torch.stack([even, odd], dim=-1).flatten(start_dim=-2)


def _pair_index(d_model):
    return torch.arange((d_model + 1) // 2, dtype=torch.float32)  # i = 0, 1, ..., one per sine column


def _sinusoid_sin_cos_swapped(max_len, d_model):
    angle = torch.arange(max_len)[:, None] / 10000 ** (2 * _pair_index(d_model) / d_model)
    return _interleave(torch.cos(angle), torch.sin(angle))[:, :d_model]


def _sinusoid_i_instead_of_2i(max_len, d_model):
    angle = torch.arange(max_len)[:, None] / 10000 ** (_pair_index(d_model) / d_model)
    return _interleave(torch.sin(angle), torch.cos(angle))[:, :d_model]


def _sinusoid_exponent_not_divided(max_len, d_model):
    angle = torch.arange(max_len)[:, None] / 10000 ** (2 * _pair_index(d_model))
    return _interleave(torch.sin(angle), torch.cos(angle))[:, :d_model]


def _sinusoid_exponent_sign(max_len, d_model):
    angle = torch.arange(max_len)[:, None] * 10000 ** (2 * _pair_index(d_model) / d_model)
    return _interleave(torch.sin(angle), torch.cos(angle))[:, :d_model]


def _sinusoid_positions_from_1(max_len, d_model):
    angle = torch.arange(1, max_len + 1)[:, None] / 10000 ** (2 * _pair_index(d_model) / d_model)
    return _interleave(torch.sin(angle), torch.cos(angle))[:, :d_model]


def _sinusoid_exponent_doubled(max_len, d_model):
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # already 2i ...
    angle = torch.arange(max_len)[:, None] / 10000 ** (2 * two_i / d_model)  # ... doubled again: 4i / d
    return _interleave(torch.sin(angle), torch.cos(angle))[:, :d_model]


def _sinusoid_integer_exponent(max_len, d_model):
    two_i = torch.arange(0, d_model, 2)  # integers
    angle = torch.arange(max_len)[:, None] / 10000 ** (two_i // d_model)  # 2i // d is 0: every frequency 1
    return _interleave(torch.sin(angle), torch.cos(angle))[:, :d_model]


def _sinusoid_precedence(max_len, d_model):
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = torch.arange(max_len)[:, None] / 10000**two_i / d_model  # (pos / 10000^(2i)) / d
    return _interleave(torch.sin(angle), torch.cos(angle))[:, :d_model]


def _sinusoid_halves(max_len, d_model):
    angle = torch.arange(max_len)[:, None] / 10000 ** (2 * _pair_index(d_model) / d_model)
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=-1)[:, :d_model]


def _sinusoid_even_widths_only(max_len, d_model):
    angle = torch.arange(max_len)[:, None] / 10000 ** (torch.arange(0, d_model, 2) / d_model)
    table = torch.zeros(max_len, d_model)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)  # raises for an odd d_model: one cosine column fewer than sines
    return table


def _explain_sinusoid(case, value, expected) -> str | None:
    """'Your frequencies are those of a base of 1000, not 10000.' when the table fits another base."""
    max_len, d_model = case.args
    if not isinstance(value, torch.Tensor) or value.shape != expected.shape or max_len < 2 or d_model < 4:
        return None
    omega = float(torch.asin(value[1, 2].double().clamp(-1, 1)))  # column 2 at position 1: sin(omega_1)
    if omega <= 0:
        return None
    base = omega ** (-d_model / 2)
    if not 1.5 < base < 1e9 or abs(base - 10000) < 1:
        return None
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = torch.arange(max_len, dtype=torch.float64)[:, None] * base ** (-two_i / d_model)
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    if not torch.allclose(value.double(), table, atol=1e-4):
        return None
    return f"Your table is the right formula with a base of {base:.4g} instead of 10000."


SINUSOIDAL_POSITION_ENCODING = Exercise(
    name="sinusoidal_position_encoding",
    reference=sinusoidal_position_encoding,
    prompt="your function receives `max_len` and `d_model` (ints, `d_model` even or odd); it returns the float32 "
    "table (max_len, d_model) with `PE[pos, 2i] = sin(pos / 10000^(2i/d_model))` and "
    "`PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model))`, positions starting at 0. For an odd `d_model` the last "
    "column is a sine with no cosine partner.",
    start="a column of positions times a row of frequencies, one per pair of columns; count how many sine and "
    "how many cosine columns an odd width has.",
    make_cases=_sinusoid_cases,
    explain=_explain_sinusoid,
    axes={"": ("position rows", "feature columns")},
    notebook="04",
    # Right answers differ in rounding: pos / 10000 ** (2i / d) and exp(-2i log(10000) / d) disagree by
    # ~2e-6 at the cases' largest positions; 1e-4 accepts both while every catalogued mistake is far off.
    atol=1e-4,
    rtol=1e-4,
    mistakes=(
        Mistake(
            "a table for even widths only",
            "for an odd d_model there is one sine column more than cosine columns: give the cosines only the "
            "first d_model // 2 angles, e.g. `angle[:, : d_model // 2]`.",
            _sinusoid_even_widths_only,
        ),
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


# --- rotary position embedding ----------------------------------------------------------------


def _rotary_cases(g):
    return [
        Case("one head, 5 positions, d 8", (_randn(g, 5, 8),), ("unbatched", "defaults", "non-square")),
        Case(
            "a batch of 2 x 3 heads, 6 positions, d 4", (_randn(g, 2, 3, 6, 4),), ("batched", "defaults", "non-square")
        ),
        Case("as many positions as features: 6 x 6, base 100", (_randn(g, 6, 6), 100.0), ("unbatched", "square")),
        Case(
            "long positions: 40 positions, d 16, batch of 2",
            (_randn(g, 2, 40, 16),),
            ("batched", "defaults", "non-square"),
        ),
        Case(
            "float16: a batch of 2, 7 positions, d 6", (_randn(g, 2, 7, 6).half(),), ("batched", "float16", "defaults")
        ),
    ]


def _rotary_angles(x, base, positions=None, exponent=None):
    seq, d = x.shape[-2], x.shape[-1]
    positions = torch.arange(seq, dtype=torch.float32) if positions is None else positions
    exponent = torch.arange(0, d, 2, dtype=torch.float32) / d if exponent is None else exponent
    return positions[:, None] * base**-exponent  # (seq, d/2)


def _rotate_pairs(even, odd, angle, sign=1.0):
    cos, sin = torch.cos(angle).to(even.dtype), (sign * torch.sin(angle)).to(even.dtype)
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


def _rotary_halves(x, base=10000.0):
    half = x.shape[-1] // 2
    angle = _rotary_angles(x, base)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)  # GPT-NeoX's pairing


def _rotary_turned_backwards(x, base=10000.0):
    return _rotate_pairs(x[..., 0::2], x[..., 1::2], _rotary_angles(x, base), sign=-1.0)


def _rotary_positions_from_1(x, base=10000.0):
    positions = torch.arange(1, x.shape[-2] + 1, dtype=torch.float32)
    return _rotate_pairs(x[..., 0::2], x[..., 1::2], _rotary_angles(x, base, positions=positions))


def _rotary_exponent_i(x, base=10000.0):
    exponent = torch.arange(x.shape[-1] // 2, dtype=torch.float32) / x.shape[-1]  # i / d instead of 2i / d
    return _rotate_pairs(x[..., 0::2], x[..., 1::2], _rotary_angles(x, base, exponent=exponent))


def _rotary_base_ignored(x, base=10000.0):
    return _rotate_pairs(x[..., 0::2], x[..., 1::2], _rotary_angles(x, 10000.0))


def _rotary_positions_along_axis_0(x, base=10000.0):
    positions = torch.arange(x.shape[0], dtype=torch.float32)  # the first axis, a batch axis for batched input
    angle = _rotary_angles(x, base, positions=positions)
    if x.dim() > 2:
        angle = angle.reshape(x.shape[0], *([1] * (x.dim() - 3)), 1, -1)
    return _rotate_pairs(x[..., 0::2], x[..., 1::2], angle)


def _rotary_not_interleaved_back(x, base=10000.0):
    angle = _rotary_angles(x, base)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.cat([even * cos - odd * sin, even * sin + odd * cos], dim=-1)  # all turned evens, then all odds


def _rotary_variant(settings, x, base=10000.0):
    """RoPE with each of its parts chosen by ``settings`` (the knobs below)."""
    base = base if settings["base"] == "given" else 10000.0
    seq, d = x.shape[-2], x.shape[-1]
    start = 1 if settings["positions"] == "from 1" else 0
    positions = torch.arange(start, seq + start, dtype=torch.float32)
    two_i = torch.arange(0, d, 2, dtype=torch.float32) * {"2i/d": 1.0, "i/d": 0.5, "4i/d": 2.0}[settings["exponent"]]
    angle = settings["factor"] * positions[:, None] * base ** (-two_i / d)
    cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
    if settings["functions"] == "swapped":
        cos, sin = sin, cos
    sin = sin * settings["direction"]
    if settings["pairs"] == "halves":
        first, second = x[..., : d // 2], x[..., d // 2 :]
    else:
        first, second = x[..., 0::2], x[..., 1::2]
    turned = (first * cos - second * sin, first * sin + second * cos)
    if settings["pairs"] == "halves" or settings["back"] == "concatenated":
        return torch.cat(turned, dim=-1)
    return torch.stack(turned, dim=-1).flatten(-2)


_ROTARY_KNOBS = (
    Knob("pairs", (("neighbours", "", ""), ("halves", "pairs of halves", "a pair is features 2i and 2i + 1."))),
    Knob(
        "direction", ((1.0, "", ""), (-1.0, "the pairs turned backwards", "(x, y) -> (x cos - y sin, x sin + y cos)."))
    ),
    Knob(
        "factor",
        (
            (1.0, "", ""),
            (2.0, "the angle doubled", "the angle is p * base^(-2i/d), once."),
            (0.5, "the angle halved", "the angle is p * base^(-2i/d), not half of it."),
        ),
    ),
    Knob("positions", (("from 0", "", ""), ("from 1", "positions from 1", "the first position is 0."))),
    Knob(
        "exponent",
        (
            ("2i/d", "", ""),
            ("i/d", "the exponent i/d", "the exponent is 2i/d, with 2i = 0, 2, 4, ..."),
            ("4i/d", "the exponent 4i/d", "`torch.arange(0, d, 2)` already counts 2i."),
        ),
    ),
    Knob("functions", (("right", "", ""), ("swapped", "cos and sin swapped", "x_2i cos - x_2i+1 sin comes first."))),
    Knob("base", (("given", "", ""), ("ignored", "`base` ignored", "use the `base` you are given."))),
    Knob("back", (("interleaved", "", ""), ("concatenated", "the pairs not interleaved back", "stack and flatten."))),
)


APPLY_ROTARY = Exercise(
    name="apply_rotary",
    reference=apply_rotary,
    prompt="your function receives `x` (..., seq, d), queries or keys with an even d, and a `base` (default "
    "10000.0); it returns x with each pair of features (2i, 2i + 1) of the token at position p (0 ... seq - 1) "
    "turned by the angle p * base^(-2i/d): `x_2i cos - x_2i+1 sin` and `x_2i sin + x_2i+1 cos`, in x's shape "
    "and dtype. Then the score of a turned query at m and a turned key at n depends on m - n only.",
    start="take the even and the odd features apart: they are the two coordinates of each pair.",
    make_cases=_rotary_cases,
    knobs=_ROTARY_KNOBS,
    variant=_rotary_variant,
    axes={"": ("position rows", "feature columns")},
    notebook="04",
    atol=1e-5,
    rtol=1e-4,
    mistakes=(
        Mistake(
            "the pairs made of the two halves (x_i, x_i+d/2)",
            "that is GPT-NeoX's (and Hugging Face LLaMA's) layout; here a pair is two neighbours, features 2i and "
            "2i + 1: `x[..., 0::2]` and `x[..., 1::2]`.",
            _rotary_halves,
        ),
        Mistake(
            "the pairs turned backwards",
            "the turn by angle a maps (x, y) to (x cos a - y sin a, x sin a + y cos a); a minus on the other "
            "sine turns the other way.",
            _rotary_turned_backwards,
        ),
        Mistake(
            "positions starting at 1",
            "the first token has position 0 and is not turned at all: `torch.arange(seq)`.",
            _rotary_positions_from_1,
        ),
        Mistake(
            "the exponent i/d instead of 2i/d",
            "the frequencies are those of the sinusoids: base^(-2i/d), with 2i = 0, 2, 4, ... "
            "(`torch.arange(0, d, 2)`).",
            _rotary_exponent_i,
        ),
        Mistake(
            "`base` ignored",
            "use the `base` you are given; 10000 is only its default.",
            _rotary_base_ignored,
        ),
        Mistake(
            "positions counted along the first axis",
            "the positions run along the tokens, the second-to-last axis (`x.shape[-2]`); the first axis is a "
            "batch axis when there is one.",
            _rotary_positions_along_axis_0,
        ),
        Mistake(
            "the turned pairs not interleaved back",
            "put each turned pair back in its two neighbouring columns: stack the two halves on a new last axis and "
            "flatten it (`torch.stack([a, b], dim=-1).flatten(-2)`), rather than concatenating them.",
            _rotary_not_interleaved_back,
        ),
    ),
)
