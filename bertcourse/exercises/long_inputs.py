"""Exercises of notebook 11: ``average_token_outputs``, ``merge_softmax_blocks`` and ``longformer_mask``.

Their mistakes are the slips of long inputs: a window's rows read without the [CLS] offset, a
token's rows summed and not averaged, one window taken where several hold the token; two
online-softmax states added without rescaling to a common maximum; a band one token too narrow,
too wide or one-sided, a global token that attends to everything but that nobody attends to (or
the reverse), padding keys left open, one text's global tokens used for the whole batch.

A wrong mask is read structurally (``_explain_local_mask``): which offsets i - j its band allows,
whether the global rows and columns are whole, whether it is symmetric, whether padding keys are
open. A wrong ``average_token_outputs`` is told which tokens are wrong: those one window holds, or
those in an overlap.

``window_spans`` and ``local_global_mask`` were the notebook's first and third exercises: a hint
gave the loop of the first, and the notebook spelt out the second's construction. They stay
checkable by name (``registry.RETIRED``).
"""

from __future__ import annotations

import math

import torch

from ..long_inputs import local_global_mask, merge_softmax_blocks, softmax_block_state, window_spans
from ..long_inputs.blockwise import _safe_max
from ..long_inputs.local import longformer_mask
from ..long_inputs.windows import average_token_outputs, merge_token_outputs
from .random_inputs import seeded_randn
from .records import Case, Exercise, Knob, Mistake

# --- window_spans -----------------------------------------------------------------------------


def _spans_cases(g):
    return [
        Case("29 tokens, window 10, stride 7", (29, 10, 7)),
        Case("12 tokens, window 5, stride 2", (12, 5, 2)),
        Case("20 tokens, window 8, stride 4: the last window ends exactly at the text's end", (20, 8, 4)),
        Case("6 tokens, window 10, stride 3: one short window", (6, 10, 3)),
    ]


def _spans(starts, n_tokens, window):
    starts = torch.tensor(starts, dtype=torch.long)
    return torch.stack([starts, (starts + window).clamp(max=n_tokens)], dim=1)


def _spans_no_overlap(n_tokens, window, stride):
    return _spans(list(range(0, n_tokens, window)), n_tokens, window)


def _spans_overlap_as_stride(n_tokens, window, stride):
    step = window - stride  # Hugging Face's `stride` is the overlap
    starts = [0]
    while starts[-1] + window < n_tokens:
        starts.append(starts[-1] + step)
    return _spans(starts, n_tokens, window)


def _spans_last_window_missing(n_tokens, window, stride):
    return _spans(list(range(0, max(n_tokens - window, 0) + 1, stride)), n_tokens, window)


def _spans_windows_past_the_end(n_tokens, window, stride):
    return _spans(list(range(0, n_tokens, stride)), n_tokens, window)


def _spans_end_not_clamped(n_tokens, window, stride):
    spans = window_spans(n_tokens, window, stride)
    return torch.stack([spans[:, 0], spans[:, 0] + window], dim=1)


def _spans_inclusive_end(n_tokens, window, stride):
    spans = window_spans(n_tokens, window, stride)
    return torch.stack([spans[:, 0], spans[:, 1] - 1], dim=1)


def _explain_windows(case, value, expected):
    """The first wrong window: where it should start and end, and where the learner's does."""
    n_tokens, window, stride = case.args[:3]
    if not isinstance(value, torch.Tensor) or value.shape != expected.shape or value.dim() != 2:
        return None
    wrong = (value != expected).any(dim=-1).nonzero()
    if not len(wrong):
        return None
    row = int(wrong[0, 0])
    (start, end), (mine_start, mine_end) = expected[row].tolist(), value[row].tolist()
    return (
        f"Window {row} starts at {row} × stride = {start} and ends at min(start + window, n_tokens) = {end}; "
        f"yours is [{mine_start}, {mine_end})."
    )


WINDOW_SPANS = Exercise(
    name="window_spans",
    reference=window_spans,
    prompt="your function receives three ints, `n_tokens`, `window` and `stride`; it returns a long tensor "
    "(n_windows, 2) of [start, end) rows: windows of `window` tokens starting at 0, stride, 2 * stride, ..., "
    "the last one being the first to reach the end of the text (its end clamped to `n_tokens`).",
    start="keep a list of starts, `starts = [0]`, and append `starts[-1] + stride` "
    "while `starts[-1] + window < n_tokens`.",
    make_cases=_spans_cases,
    axes={"": ("window rows", "start/end columns")},
    explain=_explain_windows,
    notebook="11",
    mistakes=(
        Mistake(
            "windows without overlap (each starts where the last one ended)",
            "a window moves by `stride`, not by `window`: neighbours then share window - stride tokens.",
            _spans_no_overlap,
        ),
        Mistake(
            "the overlap used as the step (Hugging Face's meaning of `stride`)",
            "here `stride` is how far a window moves; Hugging Face's tokenizer calls the overlap `stride`.",
            _spans_overlap_as_stride,
        ),
        Mistake(
            "the text's last tokens left in no window",
            "keep adding windows until one reaches `n_tokens`; the last window may be shorter than `window`.",
            _spans_last_window_missing,
        ),
        Mistake(
            "extra windows after one already reached the end",
            "stop at the first window whose end reaches `n_tokens`: later ones hold nothing new.",
            _spans_windows_past_the_end,
        ),
        Mistake(
            "ends past the end of the text",
            "clamp each end to `n_tokens`: `(starts + window).clamp(max=n_tokens)`.",
            _spans_end_not_clamped,
        ),
        Mistake(
            "inclusive ends (end = last index)",
            "a span is [start, end): `end` is one past the last token, so `ids[start:end]` is the window.",
            _spans_inclusive_end,
        ),
    ),
)

# --- merge_softmax_blocks ---------------------------------------------------------------------


def _block_states(g, scores_shape, d_v, masked_rows=(), masked_in=("a",)):
    """The online-softmax states of two blocks of random scores; ``masked_rows`` have every key masked."""
    states = []
    for block in ("a", "b"):
        scores = seeded_randn(g, *scores_shape, scale=3.0)  # (..., q_len, block)
        for row in masked_rows:
            if block in masked_in:
                scores[..., row, :] = -math.inf
        v = seeded_randn(g, *scores_shape[:-2], scores_shape[-1], d_v)  # (..., block, d_v)
        states.extend(softmax_block_state(scores, v))
    return tuple(states)


def _merge_cases(g):
    return [
        Case("4 queries, blocks of 5 and 5 keys, d_v 3", _block_states(g, (4, 5), 3), ("non-square",)),
        Case("a batch of 2 x 3 heads, 6 queries, d_v 4", _block_states(g, (2, 3, 6, 7), 4), ("batched",)),
        Case(
            "query 1 sees no key of block b (its max is -inf)",
            _block_states(g, (3, 4), 2, masked_rows=(1,), masked_in=("b",)),
            ("masked",),
        ),
        Case(
            "query 2 sees no key in either block",
            _block_states(g, (4, 6), 3, masked_rows=(2,), masked_in=("a", "b")),
            ("fully masked row",),
        ),
    ]


def _merge_no_rescaling(max_a, sum_a, out_a, max_b, sum_b, out_b):
    return torch.maximum(max_a, max_b), sum_a + sum_b, out_a + out_b


def _merge_scale_inverted(max_a, sum_a, out_a, max_b, sum_b, out_b):
    new_max = torch.maximum(max_a, max_b)
    scale_a, scale_b = torch.exp(new_max - max_a), torch.exp(new_max - max_b)
    return new_max, sum_a * scale_a + sum_b * scale_b, out_a * scale_a + out_b * scale_b


def _merge_one_rescaled(rescale_sum, safe):
    """A merge that rescales the sum or the output, not both, with or without the safe max."""

    def merge(max_a, sum_a, out_a, max_b, sum_b, out_b):
        new_max = torch.maximum(max_a, max_b)
        subtract = _safe_max(new_max) if safe else new_max  # without it, -inf - (-inf) = NaN where no key is seen
        scale_a, scale_b = torch.exp(max_a - subtract), torch.exp(max_b - subtract)
        if rescale_sum:
            return new_max, sum_a * scale_a + sum_b * scale_b, out_a + out_b
        return new_max, sum_a + sum_b, out_a * scale_a + out_b * scale_b

    return merge


def _merge_max_of_a_kept(max_a, sum_a, out_a, max_b, sum_b, out_b):
    scale_b = torch.exp(max_b - max_a)
    return max_a, sum_a + sum_b * scale_b, out_a + out_b * scale_b


def _merge_nan_without_safe_max(max_a, sum_a, out_a, max_b, sum_b, out_b):
    new_max = torch.maximum(max_a, max_b)
    scale_a, scale_b = torch.exp(max_a - new_max), torch.exp(max_b - new_max)  # -inf - -inf = NaN
    return new_max, sum_a * scale_a + sum_b * scale_b, out_a * scale_a + out_b * scale_b


def _explain_merge(case, values, expected):
    """Which known quantity each wrong item of the learner's (max, sum, out) is, when it is one."""
    max_a, sum_a, out_a, max_b, sum_b, out_b = case.args
    if not all(isinstance(v, torch.Tensor) and v.is_floating_point() for v in values):
        return None
    new_max = torch.maximum(max_a, max_b)
    safe = _safe_max(new_max)
    scale_a, scale_b = torch.exp(max_a - safe), torch.exp(max_b - safe)
    candidates = {
        0: (
            (
                "the smaller of the two maxima: the merged max is the larger, `torch.maximum`",
                torch.minimum(max_a, max_b),
            ),
            (
                "log(exp(max_a) + exp(max_b)): the state keeps the larger max, and the sum holds the rest",
                torch.logaddexp(max_a, max_b),
            ),
            ("max_a + max_b: the merged max is the larger of the two, `torch.maximum`", max_a + max_b),
        ),
        1: (
            (
                "the larger of the two rescaled sums: the merged sum adds them",
                torch.maximum(sum_a * scale_a, sum_b * scale_b),
            ),
            (
                "the sums rescaled by powers of 2: the states are relative to exp(max), so rescale with `torch.exp`",
                sum_a * torch.exp2(max_a - safe) + sum_b * torch.exp2(max_b - safe),
            ),
            ("the mean of the rescaled sums: add them, do not average", (sum_a * scale_a + sum_b * scale_b) / 2),
        ),
        2: (
            (
                "the rescaled outputs divided by the merged sum: the state keeps `out` unnormalised (the division "
                "comes once, after the last block)",
                (out_a * scale_a + out_b * scale_b) / (sum_a * scale_a + sum_b * scale_b),
            ),
            ("the mean of out_a and out_b: rescale each by exp(own max - new max) and add them", (out_a + out_b) / 2),
            (
                "the output rescaled by powers of 2: rescale with `torch.exp`, as the sum",
                out_a * torch.exp2(max_a - safe) + out_b * torch.exp2(max_b - safe),
            ),
        ),
    }
    said = []
    for index, name in enumerate(("max", "sum", "out")):
        mine, right = values[index], expected[index]
        if mine.shape != right.shape or torch.allclose(mine, right, atol=1e-5, equal_nan=True):
            continue
        for text, candidate in candidates[index]:
            if not torch.allclose(candidate, right, atol=1e-5, equal_nan=True) and torch.allclose(
                mine, candidate, atol=1e-5, rtol=1e-4, equal_nan=True
            ):
                said.append(f"Your `{name}` is {text}.")
                break
    return " ".join(said) or None


MERGE_SOFTMAX_BLOCKS = Exercise(
    name="merge_softmax_blocks",
    reference=merge_softmax_blocks,
    prompt="your function receives the online-softmax states of two blocks of keys, `max_a, sum_a, out_a, "
    "max_b, sum_b, out_b`: each max and sum (..., q_len, 1), each out (..., q_len, d_v), with sum and out "
    "taken relative to their block's max (a max of -inf means the block had no key for that query, and then "
    "its sum and out are 0). It returns the tuple `(max, sum, out)` of both blocks together.",
    start="`new_max = torch.maximum(max_a, max_b)`, then rescale each block by `torch.exp(max_a - new_max)` "
    "and `torch.exp(max_b - new_max)`.",
    make_cases=_merge_cases,
    outputs=("max", "sum", "out"),
    explain_outputs=_explain_merge,
    extra_solution=("_safe_max",),
    axes={"max": ("query rows", ""), "sum": ("query rows", ""), "out": ("query rows", "feature columns")},
    notebook="11",
    mistakes=(
        Mistake(
            "the two blocks added without rescaling",
            "each block's sum and out are relative to its own max: multiply them by exp(own max - new max) first.",
            _merge_no_rescaling,
        ),
        Mistake(
            "the rescaling factor upside down, exp(new max - own max)",
            "a block whose max is below the new max must shrink: multiply by exp(own max - new max) <= 1.",
            _merge_scale_inverted,
        ),
        Mistake(
            "the output rescaled but not the sum",
            "the sum (the softmax's denominator) needs the same factor as the output.",
            _merge_one_rescaled(rescale_sum=False, safe=True),
        ),
        Mistake(
            "the sum rescaled but not the output",
            "the output (the numerator) needs the same factor as the sum: `out_a * scale_a + out_b * scale_b`.",
            _merge_one_rescaled(rescale_sum=True, safe=True),
        ),
        Mistake(
            "the output rescaled but not the sum, and NaN where a query sees no key",
            "the sum needs the same factor as the output; and where both maxima are -inf, subtract a safe max, "
            "`torch.where(new_max == -math.inf, 0.0, new_max)`.",
            _merge_one_rescaled(rescale_sum=False, safe=False),
        ),
        Mistake(
            "the sum rescaled but not the output, and NaN where a query sees no key",
            "the output needs the same factor as the sum; and where both maxima are -inf, subtract a safe max, "
            "`torch.where(new_max == -math.inf, 0.0, new_max)`.",
            _merge_one_rescaled(rescale_sum=True, safe=False),
        ),
        Mistake(
            "block a's max kept as the new max",
            "the new max is the larger of the two, `torch.maximum(max_a, max_b)`: otherwise exp can overflow.",
            _merge_max_of_a_kept,
        ),
        Mistake(
            "NaN where a query sees no key in either block",
            "both maxima are -inf there, and -inf - (-inf) is NaN: subtract a safe max instead, "
            "`torch.where(new_max == -math.inf, 0.0, new_max)`, so that both factors are exp(-inf) = 0.",
            _merge_nan_without_safe_max,
        ),
    ),
)

# --- local_global_mask ------------------------------------------------------------------------


def _local_cases(g):
    return [
        Case("8 tokens, width 1, [CLS] global", (8, 1, [0])),
        Case("11 tokens, width 3, tokens 0 and 10 global", (11, 3, [0, 10])),
        Case("9 tokens, width 2, token 4 global", (9, 2, [4])),
        Case("6 tokens, width 0, no global token", (6, 0, [])),
    ]


def _offsets(seq_len):
    positions = torch.arange(seq_len)
    return positions[:, None] - positions[None, :]  # i - j


def _is_global(seq_len, global_positions):
    is_global = torch.zeros(seq_len, dtype=torch.bool)
    is_global[list(global_positions)] = True
    return is_global


def _local_globals_forgotten(seq_len, width, global_positions):
    return _offsets(seq_len).abs() <= width


def _local_global_rows_only(seq_len, width, global_positions):
    return (_offsets(seq_len).abs() <= width) | _is_global(seq_len, global_positions)[:, None]


def _local_global_columns_only(seq_len, width, global_positions):
    return (_offsets(seq_len).abs() <= width) | _is_global(seq_len, global_positions)[None, :]


def _local_band_too_narrow(seq_len, width, global_positions):
    is_global = _is_global(seq_len, global_positions)
    return (_offsets(seq_len).abs() < width) | is_global[:, None] | is_global[None, :]


def _local_band_one_sided(seq_len, width, global_positions):
    offsets, is_global = _offsets(seq_len), _is_global(seq_len, global_positions)
    return ((offsets >= 0) & (offsets <= width)) | is_global[:, None] | is_global[None, :]


def _local_width_as_band_width(seq_len, width, global_positions):
    is_global = _is_global(seq_len, global_positions)
    return (_offsets(seq_len).abs() <= width // 2) | is_global[:, None] | is_global[None, :]


def _local_inverted(seq_len, width, global_positions):
    return ~local_global_mask(seq_len, width, global_positions)


def _band_offsets(mask, rows, columns):
    """The offsets i - j that ``mask`` (seq, seq) allows for every pair of ``rows`` and ``columns`` at that offset."""
    offsets = _offsets(mask.shape[-1])
    pairs = rows[:, None] & columns[None, :]  # (seq, seq): the pairs the band alone decides
    allowed = set()
    for offset in sorted(set(offsets[pairs].tolist())):
        at = pairs & (offsets == offset)
        if bool(mask[at].all()):
            allowed.add(offset)
    return allowed


def _describe_offsets(allowed):
    if not allowed:
        return "no offset at all"
    low, high = min(allowed), max(allowed)
    if allowed == set(range(low, high + 1)):
        return f"offsets i - j from {low} to {high}"
    return "offsets i - j " + ", ".join(str(o) for o in sorted(allowed))


def _mask_structure(value, expected, width, is_global, real):
    """Sentences about what differs between a learner's mask and the right one, both (seq, seq) bool."""
    found = []
    plain = ~is_global & real  # tokens the band alone decides for
    wrong_band = (value != expected) & ~is_global[:, None] & plain[None, :]
    if bool(wrong_band.any()):
        allowed = _band_offsets(value, ~is_global, plain)
        right = set(range(-width, width + 1))
        low, high = (min(allowed), max(allowed)) if allowed else (None, None)
        if allowed == set(range(-width + 1, width)):
            found.append(
                f"your band is one too narrow: it allows {_describe_offsets(allowed)}, not -{width} to {width}."
            )
        elif allowed == set(range(-width - 1, width + 2)):
            found.append(f"your band is one too wide: it allows {_describe_offsets(allowed)}, not -{width} to {width}.")
        elif allowed and (low == 0 or high == 0) and low != high:
            side = "behind the query (i - j >= 0)" if low == 0 else "ahead of the query (i - j <= 0)"
            found.append(
                f"your band is one-sided: it allows {_describe_offsets(allowed)}, only keys {side}; BERT reads both "
                f"ways, -{width} to {width}."
            )
        elif allowed and -low != high:
            found.append(
                f"your band is lopsided: it allows {_describe_offsets(allowed)}; the same `width` on both sides, "
                f"-{width} to {width}."
            )
        elif allowed != right:
            found.append(f"your band allows {_describe_offsets(allowed)}; it should allow -{width} to {width}.")
    for position in is_global.nonzero().flatten().tolist():
        if not bool(value[position][real].all()):
            found.append(f"the row of global token {position} is not all True: a global token reads every token.")
        if not bool(value[:, position].all()):
            found.append(f"the column of global token {position} is not all True: every token reads a global token.")
    open_padding = value & ~real[None, :]  # (seq, seq): padding keys the learner allows
    if bool(open_padding.any()):
        if bool(is_global.any()) and not bool(open_padding[~is_global].any()):
            found.append(
                "only the global tokens' rows reach padding keys: a padding key is never attended, not even by a "
                "global token."
            )
        else:
            found.append("keys at padding positions are allowed: a padding key is never attended.")
    if bool((value != value.T)[real[:, None] & real[None, :]].any()) and not found:
        found.append("your mask is not symmetric: if i may read j, j may read i (|i - j| is the same both ways).")
    return found


def _explain_local_mask(case, value, expected):
    """Structural reading of a wrong (seq, seq) mask of ``local_global_mask``."""
    if not isinstance(value, torch.Tensor) or value.dtype != torch.bool or value.shape != expected.shape:
        return None
    seq_len, width, global_positions = case.args
    found = _mask_structure(
        value, expected, width, _is_global(seq_len, global_positions), torch.ones(seq_len, dtype=torch.bool)
    )
    if not found:
        return None
    text = " ".join(found)
    return text[0].upper() + text[1:]


def _local_variant(settings, seq_len, width, global_positions):
    """local_global_mask with its parts chosen by ``settings`` (see the knobs below)."""
    offsets, is_global = _offsets(seq_len), _is_global(seq_len, global_positions)
    band = {
        "<= width": lambda: offsets.abs() <= width,
        "< width": lambda: offsets.abs() < width,
        "<= width + 1": lambda: offsets.abs() <= width + 1,
        "behind only": lambda: (offsets >= 0) & (offsets <= width),
    }[settings["band"]]()
    rows = is_global[:, None] if settings["rows"] else torch.zeros(seq_len, 1, dtype=torch.bool)
    columns = is_global[None, :] if settings["columns"] else torch.zeros(1, seq_len, dtype=torch.bool)
    return band | rows | columns


_BAND_KNOB = Knob(
    "band",
    (
        ("<= width", "", ""),
        ("< width", "a band one key too narrow", "a key exactly `width` away is inside the band: `<= width`."),
        ("<= width + 1", "a band one key too wide", "the band stops at `width` keys on each side: `<= width`."),
        ("behind only", "a one-sided band", "allow keys behind *and* ahead: `(i - j).abs() <= width`."),
    ),
)
_ROWS_KNOB = Knob(
    "rows", ((True, "", ""), (False, "the global rows missing", "a global token reads every token: its whole row."))
)
_COLUMNS_KNOB = Knob(
    "columns",
    ((True, "", ""), (False, "the global columns missing", "every token reads a global token: its whole column.")),
)


LOCAL_GLOBAL_MASK = Exercise(
    name="local_global_mask",
    reference=local_global_mask,
    prompt="your function receives `seq_len` and `width` (ints) and `global_positions` (a list of ints); it "
    "returns a bool tensor (seq_len, seq_len), True where query i may attend to key j: when |i - j| <= width, "
    "and in the whole row and the whole column of every global position.",
    start="`positions = torch.arange(seq_len)`; `positions[:, None] - positions[None, :]` is i - j for every pair.",
    make_cases=_local_cases,
    axes={"": ("query rows", "key columns")},
    extra_solution=("_banded_mask",),
    solution_body="""
    positions = torch.as_tensor(global_positions, dtype=torch.long, device=device)  # (g,), from a list of ints
    return _local_global_mask(seq_len, width, positions)
    """,
    explain=_explain_local_mask,
    knobs=(_BAND_KNOB, _ROWS_KNOB, _COLUMNS_KNOB),
    variant=_local_variant,
    notebook="11",
    mistakes=(
        Mistake(
            "the global tokens forgotten",
            "a global token's row and column are all True: it attends to every token and every token attends to it.",
            _local_globals_forgotten,
        ),
        Mistake(
            "global rows only (nobody attends to the global tokens)",
            "add the global columns too: `is_global[None, :]`, so that every token can read [CLS].",
            _local_global_rows_only,
        ),
        Mistake(
            "global columns only (the global tokens see only their band)",
            "add the global rows too: `is_global[:, None]`, so that [CLS] reads the whole text.",
            _local_global_columns_only,
        ),
        Mistake(
            "a band one key too narrow (`<` instead of `<=`)",
            "a key exactly `width` positions away is still inside the band: use `<= width`.",
            _local_band_too_narrow,
        ),
        Mistake(
            "a one-sided band (only keys behind the query)",
            "BERT reads both ways: allow keys up to `width` behind *and* ahead, `(i - j).abs() <= width`.",
            _local_band_one_sided,
        ),
        Mistake(
            "`width` read as the band's total width",
            "`width` is how far a token sees on *each* side: the band is 2 * width + 1 wide.",
            _local_width_as_band_width,
        ),
        Mistake(
            "the mask inverted (True = blocked)",
            "in this course True means *may attend*: the band and the global rows and columns are True.",
            _local_inverted,
        ),
    ),
)

# --- average_token_outputs --------------------------------------------------------------------


def _average_case(g, n_tokens, window, stride, hidden=5, extra_positions=0):
    spans = window_spans(n_tokens, window, stride)  # (n_windows, 2)
    longest = int((spans[:, 1] - spans[:, 0]).max())
    return (seeded_randn(g, spans.shape[0], longest + 2 + extra_positions, hidden), spans)


def _average_cases(g):
    return [
        Case("14 tokens in 3 windows of 6 (stride 4), hidden 5", _average_case(g, 14, 6, 4)),
        Case("15 tokens: the last window is shorter, its rows after [SEP] are padding", _average_case(g, 15, 6, 4)),
        Case("12 tokens, windows of 6 with stride 2: most tokens are in three windows", _average_case(g, 12, 6, 2)),
        Case("5 tokens in one window of 8: nothing to average", _average_case(g, 5, 8, 3)),
        Case(
            "14 tokens in 3 windows of 6, the batch padded to 12 positions",
            _average_case(g, 14, 6, 4, extra_positions=4),
        ),
    ]


def _windows_holding(spans):
    """(n_tokens,) how many windows hold each token."""
    count = torch.zeros(int(spans[:, 1].max()), dtype=torch.long)
    for start, end in spans.tolist():
        count[start:end] += 1
    return count


def _average_no_cls_offset(last_hidden_state, spans):
    total = last_hidden_state.new_zeros(int(spans[:, 1].max()), last_hidden_state.shape[-1])
    count = last_hidden_state.new_zeros(total.shape[0], 1)
    for w, (start, end) in enumerate(spans.tolist()):
        total[start:end] += last_hidden_state[w, : end - start]
        count[start:end] += 1
    return total / count


def _average_sum_not_mean(last_hidden_state, spans):
    total = last_hidden_state.new_zeros(int(spans[:, 1].max()), last_hidden_state.shape[-1])
    for w, (start, end) in enumerate(spans.tolist()):
        total[start:end] += last_hidden_state[w, 1 : 1 + end - start]
    return total


def _average_over_every_window(last_hidden_state, spans):
    return _average_sum_not_mean(last_hidden_state, spans) / spans.shape[0]


def _average_last_window_wins(last_hidden_state, spans):
    out = last_hidden_state.new_zeros(int(spans[:, 1].max()), last_hidden_state.shape[-1])
    for w, (start, end) in enumerate(spans.tolist()):
        out[start:end] = last_hidden_state[w, 1 : 1 + end - start]
    return out


def _average_first_window_wins(last_hidden_state, spans):
    out = last_hidden_state.new_zeros(int(spans[:, 1].max()), last_hidden_state.shape[-1])
    for w, (start, end) in reversed(list(enumerate(spans.tolist()))):
        out[start:end] = last_hidden_state[w, 1 : 1 + end - start]
    return out


def _average_central_window_only(last_hidden_state, spans):
    return merge_token_outputs(last_hidden_state, spans)


def _average_glued(last_hidden_state, spans):
    window = int(spans[0, 1] - spans[0, 0])
    rows = last_hidden_state[:, 1 : 1 + window].reshape(-1, last_hidden_state.shape[-1])  # windows end to end
    return rows[: int(spans[:, 1].max())]


def _explain_average(case, value, expected):
    """Which tokens are wrong (those that one window holds, or only those in an overlap), and how."""
    if not isinstance(value, torch.Tensor) or value.shape != expected.shape or value.dtype != expected.dtype:
        return None
    last_hidden_state, spans = case.args
    wrong = ~torch.isclose(value, expected, atol=1e-5, rtol=1e-5).all(dim=-1)  # (n_tokens,)
    shared = _windows_holding(spans) > 1  # (n_tokens,): tokens in an overlap
    if bool(wrong[~shared].any()):
        return _explain_single_tokens(value, last_hidden_state, spans, shared)
    if bool(wrong[shared].any()):
        return (
            f"The tokens that one window holds are right; {int(wrong[shared].sum())} of the "
            f"{int(shared.sum())} tokens in an overlap are wrong: each gets the mean of its rows over every "
            "window that holds it."
        )
    return None


def _explain_single_tokens(value, last_hidden_state, spans, shared):
    """A token that one window holds must be that window's row 1 + i - start: which row did the learner take?"""
    singles = [(w, i) for w, (start, end) in enumerate(spans.tolist()) for i in range(start, end) if not shared[i]]
    for shift in (-1, 1, -2, 2):
        rows = [1 + i - spans[w, 0] + shift for w, i in singles]
        if all(0 <= r < last_hidden_state.shape[1] for r in rows) and all(
            torch.allclose(value[i], last_hidden_state[w, r], atol=1e-5)
            for (w, i), r in zip(singles, rows, strict=True)
        ):
            return (
                f"The tokens that one window holds come from the row {abs(shift)} {'before' if shift < 0 else 'after'} "
                "theirs: token i of window w sits at row 1 + i - start_w (row 0 is [CLS])."
            )
    ratios = [value[i] / last_hidden_state[w, 1 + i - spans[w, 0]] for w, i in singles]
    if all(torch.allclose(r, r[0].expand_as(r), rtol=1e-4) for r in ratios):
        return (
            "The tokens that one window holds are their row times a factor: a token in one window is that row "
            "itself, divided by a count of 1."
        )
    return (
        "Even tokens that only one window holds are wrong: each must be exactly its window's row 1 + i - start_w "
        "(row 0 is [CLS])."
    )


AVERAGE_TOKEN_OUTPUTS = Exercise(
    name="average_token_outputs",
    reference=average_token_outputs,
    prompt="your function receives `last_hidden_state` (n_windows, seq, hidden), the model's output on the windows "
    "of a long text (each window framed as [CLS] tokens [SEP] and padded), and `spans` (n_windows, 2), the long "
    "[start, end) of each window in the text; it returns (n_tokens, hidden), n_tokens = the last end: for every "
    "token of the text, the mean of its output vectors over all the windows that hold it.",
    start="a zero tensor for the sums and one for the counts, then a loop over the windows; where in a window's "
    "rows does the text's token `start` sit?",
    make_cases=_average_cases,
    axes={"": ("token rows", "feature columns")},
    explain=_explain_average,
    notebook="11",
    mistakes=(
        Mistake(
            "the rows read without the [CLS] offset",
            "row 0 of every window is [CLS]: token i of window w sits at row 1 + i - start_w.",
            _average_no_cls_offset,
        ),
        Mistake(
            "the rows summed, not averaged",
            "divide each token's sum by the number of windows that hold it.",
            _average_sum_not_mean,
        ),
        Mistake(
            "every token divided by the number of windows",
            "divide by how many windows hold *that* token (1 outside the overlaps), not by all windows.",
            _average_over_every_window,
        ),
        Mistake(
            "the last window that holds a token overwrites the others",
            "add a token's rows from every window that holds it, then divide: `+=`, not `=`.",
            _average_last_window_wins,
        ),
        Mistake(
            "the first window that holds a token kept",
            "a token in an overlap has a row in each window: average them all.",
            _average_first_window_wins,
        ),
        Mistake(
            "the most central window only (section 3.4's rule)",
            "this exercise asks for the other merge: the mean over every window that holds the token.",
            _average_central_window_only,
        ),
        Mistake(
            "the windows glued end to end",
            "windows overlap: token i of window w is row 1 + i - start_w, not the (w * window + r)-th row overall.",
            _average_glued,
        ),
    ),
)

# --- longformer_mask --------------------------------------------------------------------------


def _lf_case(lengths, seq, global_rows):
    """(attention_mask (batch, seq) long 0/1, is_global (batch, seq) bool) for texts of ``lengths`` tokens."""
    attention_mask = (torch.arange(seq)[None, :] < torch.tensor(lengths)[:, None]).long()
    is_global = torch.zeros(len(lengths), seq, dtype=torch.bool)
    for row, positions in enumerate(global_rows):
        is_global[row, list(positions)] = True
    return attention_mask, is_global


def _lf_cases(g):
    return [
        Case("one text of 9 tokens, width 2, [CLS] global", (*_lf_case([9], 9, [[0]]), 2)),
        Case("two texts of 9 tokens, width 2, [CLS] global in both", (*_lf_case([9, 9], 9, [[0], [0]]), 2)),
        Case(
            "two texts, the second of 6 tokens padded to 9, width 2, [CLS] global",
            (*_lf_case([9, 6], 9, [[0], [0]]), 2),
            ("masked",),
        ),
        Case(
            "two texts of 9 tokens, width 2, a 3-token question global in the first, [CLS] only in the second",
            (*_lf_case([9, 9], 9, [[0, 1, 2], [0]]), 2),
        ),
        Case("one text of 9 tokens, width 1, [CLS] global", (*_lf_case([9], 9, [[0]]), 1)),
        Case("one text of 9 tokens, width 2, no global token", (*_lf_case([9], 9, [[]]), 2)),
    ]


def _lf_variant(settings, attention_mask, is_global, width):
    """longformer_mask with its parts chosen by ``settings`` (see the knobs below)."""
    seq = attention_mask.shape[-1]
    real = attention_mask != 0
    globals_ = is_global if settings["globals"] == "per text" else is_global[:1].expand_as(is_global)
    band = _local_variant(settings, seq, width, [])  # (seq, seq): the band alone
    rows = globals_[:, :, None] if settings["rows"] else torch.zeros_like(globals_)[:, :, None]
    columns = globals_[:, None, :] if settings["columns"] else torch.zeros_like(globals_)[:, None, :]
    mask = band | rows | columns  # (batch, seq, seq)
    if settings["padding"] == "keys":
        mask = mask & real[:, None, :]
    elif settings["padding"] == "keys and queries":
        mask = mask & real[:, None, :] & real[:, :, None]
    return mask


_LF_KNOBS = (
    _BAND_KNOB,
    _ROWS_KNOB,
    _COLUMNS_KNOB,
    Knob(
        "padding",
        (
            ("keys", "", ""),
            ("none", "padding keys left open", "AND the mask with the real keys: `attention_mask[:, None, :]`."),
            (
                "keys and queries",
                "the padding queries' rows blocked too",
                "hide padding keys only, as the course's padding masks do: a padding query's row follows the rule.",
            ),
        ),
    ),
    Knob(
        "globals",
        (
            ("per text", "", ""),
            ("first text's", "the first text's global tokens used for every text", "each text has its own globals."),
        ),
    ),
)


def _lf_band_and_globals_only(attention_mask, is_global, width):
    positions = torch.arange(attention_mask.shape[-1])
    band = (positions[:, None] - positions[None, :]).abs() <= width
    return band | is_global[:, :, None] | is_global[:, None, :]


def _lf_padding_on_queries_too(attention_mask, is_global, width):
    real = attention_mask.bool()
    return _lf_band_and_globals_only(attention_mask, is_global, width) & real[:, None, :] & real[:, :, None]


def _lf_globals_forgotten(attention_mask, is_global, width):
    positions = torch.arange(attention_mask.shape[-1])
    band = (positions[:, None] - positions[None, :]).abs() <= width
    return band[None] & attention_mask.bool()[:, None, :]


def _lf_first_texts_globals(attention_mask, is_global, width):
    return (
        _lf_band_and_globals_only(attention_mask, is_global[:1].expand_as(is_global), width)
        & (attention_mask.bool()[:, None, :])
    )


def _lf_padding_on_queries_only(attention_mask, is_global, width):
    return _lf_band_and_globals_only(attention_mask, is_global, width) & attention_mask.bool()[:, :, None]


def _lf_inverted(attention_mask, is_global, width):
    return ~longformer_mask(attention_mask, is_global, width)


def _lf_long_mask(attention_mask, is_global, width):
    return _lf_band_and_globals_only(attention_mask, is_global, width) * attention_mask[:, None, :]


def _explain_longformer(case, value, expected):
    """Structural reading of a wrong (batch, seq, seq) mask, text by text: the first text that differs."""
    if not isinstance(value, torch.Tensor) or value.dtype != torch.bool or value.shape != expected.shape:
        return None
    attention_mask, is_global, width = case.args
    for row in range(value.shape[0]):
        if torch.equal(value[row], expected[row]):
            continue
        found = _mask_structure(value[row], expected[row], width, is_global[row], attention_mask[row] != 0)
        if found:
            return f"In text {row}: " + " ".join(found)
    return None


LONGFORMER_MASK = Exercise(
    name="longformer_mask",
    reference=longformer_mask,
    prompt="your function receives `attention_mask` (batch, seq), a long tensor of 1 at real tokens and 0 at "
    "padding, `is_global` (batch, seq), a bool tensor True at each text's global tokens, and an int `width`; it "
    "returns a bool tensor (batch, seq, seq), True where query i of a text may attend to key j: key j must be a "
    "real token, and then |i - j| <= width, or i or j is one of that text's global tokens. Padding hides keys "
    "only: a padding query's row follows the same rule.",
    start="three pieces of shape (seq, seq) or (batch, seq, seq), each broadcast from smaller tensors: which "
    "pairs are near each other, which pairs touch a global token, which keys are real.",
    make_cases=_lf_cases,
    axes={"": ("query rows", "key columns")},
    explain=_explain_longformer,
    knobs=_LF_KNOBS,
    variant=_lf_variant,
    notebook="11",
    mistakes=(
        Mistake(
            "padding keys left open",
            "a padding key is never attended: AND the mask with the real keys, `attention_mask[:, None, :]`.",
            _lf_band_and_globals_only,
        ),
        Mistake(
            "the padding queries' rows blocked too",
            "hide the padding keys only, as the course's padding masks do: a padding query's row follows the rule.",
            _lf_padding_on_queries_too,
        ),
        Mistake(
            "the padding mask applied to the queries instead of the keys",
            "padding hides *keys*: the mask of the real tokens goes on the last axis, `[:, None, :]`.",
            _lf_padding_on_queries_only,
        ),
        Mistake(
            "the global tokens forgotten",
            "a global token's row and column are True: it reads every token and every token reads it.",
            _lf_globals_forgotten,
        ),
        Mistake(
            "the first text's global tokens used for every text",
            "each text has its own global tokens: broadcast `is_global` per row, `is_global[:, :, None]`.",
            _lf_first_texts_globals,
        ),
        Mistake(
            "the mask inverted (True = blocked)",
            "in this course True means *may attend*.",
            _lf_inverted,
        ),
        Mistake(
            "a 0/1 long mask instead of a bool one",
            "the mask must be bool: `attention_mask.bool()` before combining, or `!= 0`.",
            _lf_long_mask,
        ),
    ),
)
