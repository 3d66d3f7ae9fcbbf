"""Exercises of notebook 11: ``window_spans``, ``merge_softmax_blocks`` and ``local_global_mask``.

Their mistakes are the slips of long inputs: windows without overlap, Hugging Face's overlap read
as the step, a text's tail left in no window; two online-softmax states added without rescaling
to a common maximum; a band one token too narrow or one-sided, a global token that attends to
everything but that nobody attends to (or the reverse).
"""

from __future__ import annotations

import math

import torch

from ..long_inputs import local_global_mask, merge_softmax_blocks, softmax_block_state, window_spans
from .random_inputs import _randn
from .records import Case, Exercise, Mistake

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
        scores = _randn(g, *scores_shape, scale=3.0)  # (..., q_len, block)
        for row in masked_rows:
            if block in masked_in:
                scores[..., row, :] = -math.inf
        v = _randn(g, *scores_shape[:-2], scores_shape[-1], d_v)  # (..., block, d_v)
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


def _merge_sum_not_rescaled(max_a, sum_a, out_a, max_b, sum_b, out_b):
    new_max = torch.maximum(max_a, max_b)
    scale_a, scale_b = torch.exp(max_a - new_max), torch.exp(max_b - new_max)
    return new_max, sum_a + sum_b, out_a * scale_a + out_b * scale_b


def _merge_out_not_rescaled(max_a, sum_a, out_a, max_b, sum_b, out_b):
    new_max = torch.maximum(max_a, max_b)
    scale_a, scale_b = torch.exp(max_a - new_max), torch.exp(max_b - new_max)
    return new_max, sum_a * scale_a + sum_b * scale_b, out_a + out_b


def _merge_max_of_a_kept(max_a, sum_a, out_a, max_b, sum_b, out_b):
    scale_b = torch.exp(max_b - max_a)
    return max_a, sum_a + sum_b * scale_b, out_a + out_b * scale_b


def _merge_nan_without_safe_max(max_a, sum_a, out_a, max_b, sum_b, out_b):
    new_max = torch.maximum(max_a, max_b)
    scale_a, scale_b = torch.exp(max_a - new_max), torch.exp(max_b - new_max)  # -inf - -inf = NaN
    return new_max, sum_a * scale_a + sum_b * scale_b, out_a * scale_a + out_b * scale_b


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
            _merge_sum_not_rescaled,
        ),
        Mistake(
            "the sum rescaled but not the output",
            "the output (the numerator) needs the same factor as the sum.",
            _merge_out_not_rescaled,
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
