"""Exercises of notebook 04: ``sinusoidal_position_encoding``, ``sinusoidal_positions`` and ``alibi_bias``.

Notebook 04 asks for ``sinusoidal_positions`` (the vectors of given position ids, of any shape, for any
width and base) and ``alibi_bias``; ``sinusoidal_position_encoding``, which section 2's cell and a slice
answer, stays checkable by name.

Each sinusoid mistake changes one piece of the formula: sin and cos swapped, the exponent's i, 2i or
d_model, positions from 1, or all sines before all cosines instead of interleaved; the cases include
odd widths, whose last sine has no cosine partner. The ALiBi mistakes get the slopes (a head count
that is not a power of two, h from 0) or the distance (signed, a bonus) wrong.
"""

from __future__ import annotations

import math

import torch

from ..positional import _sinusoidal_positions, alibi_bias, sinusoidal_position_encoding, sinusoidal_positions
from .diagnosis import equals_one_of
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


# --- ALiBi: a linear penalty on distance --------------------------------------------------------


def _alibi_cases(g):
    return [
        Case("8 heads (a power of two), 5 tokens", (8, 5), ("non-square",)),
        Case("2 heads, 3 tokens", (2, 3), ("non-square",)),
        Case("12 heads, as BERT-base has: not a power of two", (12, 4), ("not a power of two", "non-square")),
        Case("6 heads, 6 tokens", (6, 6), ("not a power of two", "square")),
        Case("one head, 4 tokens", (1, 4), ("non-square",)),
    ]


def _slopes(num_heads, first_h=1, interleave=True):
    """The ALiBi slopes, counting h from ``first_h``, with the paper's rule for H not a power of two (or not)."""
    if not interleave:
        return 2.0 ** (-8.0 * torch.arange(first_h, num_heads + first_h, dtype=torch.float32) / num_heads)
    closest = 2 ** int(math.log2(num_heads))
    h = torch.arange(first_h, closest + first_h, dtype=torch.float32)
    odd = 2 * torch.arange(num_heads - closest, dtype=torch.float32) + 1
    return torch.cat([2.0 ** (-8.0 * h / closest), 2.0 ** (-8.0 * odd / (2 * closest))])


def _offsets(seq_len):
    position = torch.arange(seq_len, dtype=torch.float32)
    return position[None, :] - position[:, None]  # (seq, seq): j - i


def _alibi_variant(settings, num_heads, seq_len):
    """ALiBi with each of its parts chosen by ``settings`` (the knobs below)."""
    slopes = {
        "paper": lambda: _slopes(num_heads),
        "every count": lambda: _slopes(num_heads, interleave=False),
        "from h = 0": lambda: _slopes(num_heads, first_h=0),
        "2^-h": lambda: 2.0 ** -torch.arange(1, num_heads + 1, dtype=torch.float32),
    }[settings["slopes"]]()
    offset = _offsets(seq_len)
    distance = {"|i - j|": torch.minimum(offset, -offset), "j - i": offset, "i - j": -offset}[settings["distance"]]
    bias = slopes[:, None, None] * distance * settings["sign"]
    return bias.permute(1, 2, 0) if settings["layout"] == "heads last" else bias


_ALIBI_KNOBS = (
    Knob(
        "slopes",
        (
            ("paper", "", ""),
            (
                "every count",
                "2^(-8h/H) for a head count that is not a power of two",
                "for H heads not a power of two, take the slopes of the power of two below, then every other slope "
                "of the next power of two.",
            ),
            ("from h = 0", "slopes counted from h = 0", "h runs from 1 to H: the first slope is 2^(-8/H), not 1."),
            ("2^-h", "the slopes 2^(-h)", "the exponent is -8h/H: the slopes run down to 2^-8 whatever H is."),
        ),
    ),
    Knob(
        "distance",
        (
            ("|i - j|", "", ""),
            ("j - i", "the signed offset j - i", "an encoder reads both ways: penalise |i - j|, whichever side."),
            ("i - j", "the signed offset i - j", "an encoder reads both ways: penalise |i - j|, whichever side."),
        ),
    ),
    Knob("sign", ((1.0, "", ""), (-1.0, "a bonus for distance", "the bias is a penalty: -m_h |i - j| <= 0."))),
    Knob("layout", (("heads first", "", ""), ("heads last", "the heads on the last axis", "(heads, seq, seq)."))),
)


def _alibi_h_from_zero(num_heads, seq_len):
    offset = _offsets(seq_len)
    return _slopes(num_heads, first_h=0)[:, None, None] * torch.minimum(offset, -offset)


def _alibi_no_interleaving(num_heads, seq_len):
    offset = _offsets(seq_len)
    return _slopes(num_heads, interleave=False)[:, None, None] * torch.minimum(offset, -offset)


def _alibi_signed_offset(num_heads, seq_len):
    return _slopes(num_heads)[:, None, None] * _offsets(seq_len)  # j - i: a bonus for the keys after the query


def _alibi_positive(num_heads, seq_len):
    return _slopes(num_heads)[:, None, None] * _offsets(seq_len).abs()


def _alibi_heads_last(num_heads, seq_len):
    offset = _offsets(seq_len)
    return torch.minimum(offset, -offset)[:, :, None] * _slopes(num_heads)


def _alibi_power_of_h(num_heads, seq_len):
    offset = _offsets(seq_len)
    slopes = 2.0 ** -torch.arange(1, num_heads + 1, dtype=torch.float32)
    return slopes[:, None, None] * torch.minimum(offset, -offset)


def _alibi_explain(case, value, expected):
    """The first wrong head's bias from query 0 to the first keys, against the right one, and what differs."""
    if not isinstance(value, torch.Tensor) or value.shape != expected.shape or not value.is_floating_point():
        return None
    v, e = value.double(), expected.double()
    wrong = [h for h in range(e.shape[0]) if not torch.allclose(v[h], e[h], atol=1e-5, rtol=1e-4)]
    if not wrong or e.shape[-1] < 3:
        return None
    head = wrong[0]
    mine, right = v[head, 0, :6], e[head, 0, :6]
    slope = float(-right[1])
    shown = ", ".join(f"{float(x) + 0.0:.4g}" for x in mine)  # + 0.0: -0 shown as 0
    text = (
        f"Head {head}'s bias from query 0 to keys 0, 1, 2, ... is {shown} in yours; the right one falls by its "
        f"slope m = {slope:.4g} at each step: {', '.join(f'{float(x) + 0.0:.4g}' for x in right)}."
    )
    steps = mine.diff()
    if not torch.allclose(steps, steps[:1].expand_as(steps), atol=1e-6, rtol=1e-4):
        return text + " Yours does not change by the same step at every distance: the penalty is linear, -m |i - j|."
    if not torch.allclose(v[head], v[head].mT, atol=1e-6):
        return text + " Yours is not symmetric (bias[i, j] != bias[j, i]): the penalty depends on |i - j| only."
    return text


ALIBI_BIAS = Exercise(
    name="alibi_bias",
    reference=alibi_bias,
    prompt="your function receives `num_heads` and `seq_len` (ints); it returns the ALiBi bias, a float32 tensor "
    "(num_heads, seq_len, seq_len) with `bias[h, i, j] = -m_h * |i - j|`, to be added to head h's scores. The "
    "slopes are m_h = 2^(-8h/H) for h = 1 ... H when H = num_heads is a power of two; otherwise the H' = largest "
    "power of two below H gives its H' slopes, and the remaining H - H' slopes are every other slope of 2H' "
    "heads, starting with the first: 2^(-8 * 1/(2H')), 2^(-8 * 3/(2H')), ...",
    start="the slopes first, for a power of two; then the distances |i - j| of every pair of positions.",
    make_cases=_alibi_cases,
    knobs=_ALIBI_KNOBS,
    variant=_alibi_variant,
    axes={"": ("heads", "query rows", "key columns")},
    explain=_alibi_explain,
    notebook="04",
    extra_solution=("_alibi_slopes",),
    mistakes=(
        Mistake(
            "slopes counted from h = 0",
            "h runs from 1 to H, so the first slope is 2^(-8/H) and the last 2^(-8); h = 0 would give a slope of 1.",
            _alibi_h_from_zero,
        ),
        Mistake(
            "2^(-8h/H) for a head count that is not a power of two",
            "the formula holds for a power of two; for 12 heads take the 8 slopes of 8 heads, then every other slope "
            "of 16 heads (2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5).",
            _alibi_no_interleaving,
        ),
        Mistake(
            "the signed offset j - i",
            "the bias depends on the distance, whichever side the key is on: `-(i - j).abs()`.",
            _alibi_signed_offset,
        ),
        Mistake(
            "a bonus instead of a penalty",
            "the bias lowers the score of distant keys: -m_h |i - j|, never positive.",
            _alibi_positive,
        ),
        Mistake(
            "the heads on the last axis",
            "return (num_heads, seq_len, seq_len), one (seq, seq) bias per head, as the scores (batch, heads, q, k) "
            "want it.",
            _alibi_heads_last,
        ),
        Mistake(
            "the slopes 2^(-h)",
            "the exponent is -8h/H: with H heads the slopes run from 2^(-8/H) down to 2^(-8), whatever H is.",
            _alibi_power_of_h,
        ),
    ),
)


# --- the sinusoidal vectors of given positions, any width, any base ---------------------------


def _positions_cases(g):
    counted = torch.arange(6)  # (6,): positions 0 ... 5
    return [
        Case("positions 0 ... 5, d_model 8, base 10000 given", (counted, 8, 10000.0), ()),
        Case("the same, base left out (10000)", (counted, 8), ("defaults",)),
        Case("the same positions as a batch of 2 rows, (2, 6)", (counted.repeat(2, 1), 8, 10000.0), ("batched",)),
        Case("positions 0 ... 5, an odd width: d_model 7", (counted, 7, 10000.0), ("odd",)),
        Case("positions 0 ... 5, d_model 8, base 100", (counted, 8, 100.0), ()),
        Case(
            "the positions of a sentence after 4 left pads: 0, 0, 0, 0, 0, 1 (the pads repeat 0)",
            (torch.tensor([0, 0, 0, 0, 0, 1]), 8, 10000.0),
            (),
        ),
        Case("positions 40 ... 45, d_model 8", (counted + 40, 8, 10000.0), ()),
    ]


def _positions_variant(settings, position_ids, d_model, base=10000.0):
    """Sinusoids of the given positions with each part chosen by ``settings`` (the knobs below)."""
    base = 10000.0 if settings["base"] == "fixed" else base
    if settings["positions"] == "counted":
        position = torch.arange(position_ids.shape[-1], dtype=torch.float32).expand(position_ids.shape)
    else:
        position = position_ids.float() + (1 if settings["positions"] == "from 1" else 0)
    pairs = (d_model + 1) // 2
    two_i = {"2i": 2 * torch.arange(pairs, dtype=torch.float32), "i": torch.arange(pairs, dtype=torch.float32)}[
        settings["exponent"]
    ]
    angle = position[..., None] * base ** (-two_i / d_model)  # (..., pairs)
    first, second = (torch.sin(angle), torch.cos(angle))
    if settings["functions"] == "swapped":
        first, second = second, first
    if settings["layout"] == "halves":
        return torch.cat([first, second[..., : d_model // 2]], dim=-1)
    return torch.stack([first, second], dim=-1).flatten(start_dim=-2)[..., :d_model]


_POSITIONS_KNOBS = (
    Knob(
        "positions",
        (
            ("given", "", ""),
            (
                "counted",
                "the positions counted 0, 1, 2, ... instead of read from `position_ids`",
                "each entry of `position_ids` is its token's position: a padded sentence may start later, or repeat 0.",
            ),
            ("from 1", "positions from 1", "position 0 is the first: use `position_ids` as they are."),
        ),
    ),
    Knob(
        "base",
        (
            ("given", "", ""),
            ("fixed", "the base fixed at 10000", "use the `base` you are given: omega_i = base^(-2i/d)."),
        ),
    ),
    Knob(
        "exponent",
        (
            ("2i", "", ""),
            (
                "i",
                "i instead of 2i in the exponent",
                "the pair index i gives columns 2i and 2i + 1: the exponent is 2i/d.",
            ),
        ),
    ),
    Knob(
        "functions",
        (
            ("sin first", "", ""),
            ("swapped", "sin and cos swapped", "the even columns hold the sines, the odd ones the cosines."),
        ),
    ),
    Knob(
        "layout",
        (
            ("interleaved", "", ""),
            (
                "halves",
                "all sines before all cosines",
                "the columns alternate, sin in 0, 2, 4, ... and cos in 1, 3, 5, ...: interleave them.",
            ),
        ),
    ),
)


def _pos_arange(position_ids, d_model, base=10000.0):
    return _positions_variant(
        {"positions": "counted", "base": "given", "exponent": "2i", "functions": "sin first", "layout": "interleaved"},
        position_ids,
        d_model,
        base,
    )


def _pos_base_fixed(position_ids, d_model, base=10000.0):
    position = position_ids.float()[..., None]  # (..., 1)
    angle = position * 10000.0 ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)  # base not read
    return torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1).flatten(start_dim=-2)[..., :d_model]


def _pos_two_dimensional_only(position_ids, d_model, base=10000.0):
    position = position_ids.float()[:, None]  # (seq, 1) for 1-D ids; a batch gets an axis in the middle
    angle = position * base ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    table = torch.zeros(position.shape[0], d_model)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return table


def _pos_even_width_only(position_ids, d_model, base=10000.0):
    angle = position_ids.float()[..., None] * base ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    table = torch.zeros(*position_ids.shape, d_model)
    table[..., 0::2] = torch.sin(angle)
    table[..., 1::2] = torch.cos(angle)  # one cosine column too many when d_model is odd
    return table


def _positions_explain(case, value, expected):
    """Which other table the learner's is: positions in degrees or scaled, the frequencies inverted."""
    position_ids, d_model, *rest = case.args
    base = rest[0] if rest else 10000.0
    return equals_one_of(
        value,
        expected,
        (
            (
                "the table of the positions in degrees (pos × 180/π): sin and cos take radians, the position itself",
                lambda: _sinusoidal_positions(position_ids * (180 / math.pi), d_model, base),
            ),
            (
                "the table with ω_i = base^(+2i/d_model): the frequencies fall with i, base^(-2i/d_model)",
                lambda: _sinusoidal_positions(position_ids, d_model, 1 / base),
            ),
            (
                "the table of the positions divided by the largest one: use each position as it is",
                lambda: _sinusoidal_positions(position_ids / position_ids.max().clamp(min=1), d_model, base),
            ),
        ),
    )


SINUSOIDAL_POSITIONS = Exercise(
    name="sinusoidal_positions",
    reference=sinusoidal_positions,
    prompt="your function receives `position_ids`, an integer tensor of any shape (e.g. (seq,) or (batch, seq)) "
    "holding each token's position, `d_model` (odd or even) and `base` (default 10000.0); it returns the float32 "
    "tensor (*position_ids.shape, d_model) whose column 2i holds sin(pos · ω_i) and column 2i + 1 cos(pos · ω_i), "
    "ω_i = base^(-2i/d_model), for each token's own pos. With an odd d_model the last column is a sine.",
    start="one angle per position and per pair of columns, by broadcasting a trailing axis onto `position_ids`; "
    "count how many sine and how many cosine columns the width has.",
    make_cases=_positions_cases,
    knobs=_POSITIONS_KNOBS,
    variant=_positions_variant,
    axes={"": ("position rows", "feature columns")},
    atol=1e-4,
    rtol=1e-4,
    explain=_positions_explain,
    notebook="04",
    mistakes=(
        Mistake(
            "the positions counted 0, 1, 2, ... instead of read from `position_ids`",
            "each entry of `position_ids` is its token's position (a left-padded sentence starts later): compute "
            "the angles from `position_ids` itself.",
            _pos_arange,
        ),
        Mistake(
            "the base fixed at 10000",
            "use the `base` you are given: omega_i = base^(-2i/d_model).",
            _pos_base_fixed,
        ),
        Mistake(
            "the position axis taken as axis 0 (`[:, None]`)",
            "`position_ids` may have a batch axis: add the new axis at the end, `position_ids[..., None]`, and "
            "slice the columns with `[..., 0::2]`.",
            _pos_two_dimensional_only,
        ),
        Mistake(
            "a cosine column for every sine (even widths only)",
            "with an odd d_model there is one sine column more than cosine columns: cut the last cosine off, "
            "`angle[..., : d_model // 2]`.",
            _pos_even_width_only,
        ),
    ),
)
