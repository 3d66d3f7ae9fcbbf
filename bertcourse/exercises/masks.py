"""Exercises of notebook 03: ``padding_mask`` and ``causal_mask``.

Their mistakes are the classic mask slips: the convention inverted (True = blocked), an off-by-one,
swapped axes, the wrong triangle, an additive mask of 0 and -inf instead of booleans.
"""

from __future__ import annotations

import math

import torch

from ..masks import causal_mask, padding_mask
from .records import Case, Exercise, Mistake


def _padding_cases(g):
    return [
        Case("3 sentences of lengths 3, 5, 1, max_len 7", (torch.tensor([3, 5, 1]), 7), ("non-square",)),
        Case("the longest sentence fills max_len: lengths 4, 2, max_len 4", (torch.tensor([4, 2]), 4), ("non-square",)),
        Case("an empty sentence: lengths 0, 2, max_len 3", (torch.tensor([0, 2]), 3), ("non-square",)),
        Case("as many sentences as positions: lengths 1, 3, 2, max_len 3", (torch.tensor([1, 3, 2]), 3), ("square",)),
        Case(
            "max_len left out, so it is the longest length: lengths 2, 5",
            (torch.tensor([2, 5]),),
            ("defaults", "non-square"),
        ),
    ]


def _padding_inverted(lengths, max_len=None):
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.arange(max_len)[None, :] >= lengths[:, None]


def _padding_off_by_one(lengths, max_len=None):
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.arange(max_len)[None, :] <= lengths[:, None]


def _padding_axes_swapped(lengths, max_len=None):
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.arange(max_len)[:, None] < lengths[None, :]


def _padding_max_len_ignored(lengths, max_len=None):
    return torch.arange(int(lengths.max()))[None, :] < lengths[:, None]


def _padding_default_not_handled(lengths, max_len=None):
    return torch.arange(max_len)[None, :] < lengths[:, None]  # torch.arange(None) raises


def _padding_default_max_len_plus_one(lengths, max_len=None):
    if max_len is None:
        max_len = int(lengths.max()) + 1
    return torch.arange(max_len)[None, :] < lengths[:, None]


PADDING_MASK = Exercise(
    name="padding_mask",
    reference=padding_mask,
    prompt="your function receives `lengths`, a 1-D long tensor with one sentence length per row, and an int "
    "`max_len`; it returns a bool tensor (batch, max_len) that is True at real tokens (position < length) "
    "and False at padding.",
    start="`torch.arange(max_len)` gives the positions 0, 1, ..., max_len - 1; compare them with `lengths[:, None]`.",
    make_cases=_padding_cases,
    axes={"": ("sentence rows", "position columns")},
    notebook="03",
    mistakes=(
        Mistake(
            "the mask inverted (True = padding)",
            "in this course True means *may attend*: real tokens are True, padding is False.",
            _padding_inverted,
        ),
        Mistake(
            "an off-by-one (`<=`)",
            "positions start at 0, so a sentence of length n covers positions 0 ... n - 1: use `<`.",
            _padding_off_by_one,
        ),
        Mistake(
            "the axes swapped, (max_len, batch)",
            "one row per sentence: compare `positions[None, :]` with `lengths[:, None]`.",
            _padding_axes_swapped,
        ),
        Mistake(
            "`max_len` ignored",
            "the mask must have `max_len` columns, even when every sentence is shorter.",
            _padding_max_len_ignored,
        ),
        Mistake(
            "the default `max_len=None` not handled",
            "when the caller leaves `max_len` out it is None: use the longest length then, `int(lengths.max())`.",
            _padding_default_not_handled,
        ),
        Mistake(
            "the default `max_len` one too long",
            "by default the mask is as wide as the longest sentence, `int(lengths.max())`, with no extra column.",
            _padding_default_max_len_plus_one,
        ),
    ),
)


def _causal_cases(g):
    return [Case("4 tokens", (4,)), Case("a single token", (1,)), Case("7 tokens", (7,))]


def _causal_float(seq_len):
    return torch.ones(seq_len, seq_len).tril()


def _causal_upper_triangle(seq_len):
    return torch.ones(seq_len, seq_len, dtype=torch.bool).triu()


def _causal_diagonal_masked(seq_len):
    return torch.ones(seq_len, seq_len, dtype=torch.bool).tril(diagonal=-1)


def _causal_inverted(seq_len):
    return torch.ones(seq_len, seq_len, dtype=torch.bool).triu(diagonal=1)


def _causal_additive(seq_len):
    allowed = torch.ones(seq_len, seq_len, dtype=torch.bool).tril()
    return torch.zeros(seq_len, seq_len).masked_fill(~allowed, -math.inf)


CAUSAL_MASK = Exercise(
    name="causal_mask",
    reference=causal_mask,
    prompt="your function receives `seq_len`, an int; it returns a bool tensor (seq_len, seq_len) in which "
    "query i may attend to keys 0 ... i: True on and below the diagonal.",
    start="`torch.ones(seq_len, seq_len, dtype=torch.bool)`, then keep its lower triangle with `torch.tril`.",
    make_cases=_causal_cases,
    axes={"": ("query rows", "key columns")},
    notebook="03",
    mistakes=(
        Mistake(
            "the upper triangle",
            "query i (row i) may look back at keys 0 ... i, the lower triangle: `torch.tril`.",
            _causal_upper_triangle,
        ),
        Mistake(
            "the diagonal masked",
            "every token may attend to itself: keep the diagonal (`torch.tril` with `diagonal=0`).",
            _causal_diagonal_masked,
        ),
        Mistake(
            "the mask inverted (True = future)",
            "in this course True means *may attend*: the past and the token itself are True.",
            _causal_inverted,
        ),
        Mistake(
            "an additive mask (0 and -inf)",
            "this course's masks are booleans, True = may attend; the -inf fill happens inside attention.",
            _causal_additive,
        ),
        Mistake(
            "a float mask of 0 and 1",
            "`torch.ones(...)` is float32 by default; make the mask boolean with `dtype=torch.bool` "
            "(True = may attend).",
            _causal_float,
        ),
    ),
)
