"""Exercises of notebook 03: ``padding_mask``, ``causal_mask``, ``masked_softmax``, ``key_padding_mask`` and
``mask_from_torch``.

Notebook 03 asks for ``masked_softmax`` and ``mask_from_torch`` (PyTorch's two ``attn_mask`` kinds read in
this course's convention); ``key_padding_mask``, whose answer two of its cells show, stays checkable by name.

Their mistakes are the classic mask slips: the convention inverted (True = blocked), an off-by-one,
swapped axes, the wrong triangle, an additive mask of 0 and -inf instead of booleans; and for the
masked softmax, the fill values that break in float16 or on a row with no key allowed.
"""

from __future__ import annotations

import math

import torch

from ..attention import masked_softmax
from ..masks import causal_mask, key_padding_mask, mask_from_torch, padding_mask
from .random_inputs import seeded_randn
from .records import Case, Exercise, Knob, Mistake


def _padding_cases(g):
    return [
        Case("3 sentences of lengths 3, 5, 1, max_len 7", (torch.tensor([3, 5, 1]), 7), ("non-square",)),
        Case("the longest sentence fills max_len: lengths 4, 2, max_len 4", (torch.tensor([4, 2]), 4), ("non-square",)),
        Case("an empty sentence: lengths 0, 2, max_len 3", (torch.tensor([0, 2]), 3), ("non-square",)),
        Case("as many sentences as positions: lengths 1, 3, 2, max_len 3", (torch.tensor([1, 3, 2]), 3), ("square",)),
        Case(
            "max_len left out, so it is the longest length: lengths 2, 5",
            (torch.tensor([2, 5]),),
            ("defaults", "None given", "non-square"),
        ),
        Case(
            "the same lengths 2, 5 with max_len=None written out",
            (torch.tensor([2, 5]), None),
            ("None given", "non-square"),
        ),
        Case("the same lengths 2, 5 with max_len 5", (torch.tensor([2, 5]), 5), ("non-square",)),
    ]


def _padding_inverted(lengths, max_len=None):
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.arange(max_len)[None, :] >= lengths[:, None]


def _padding_off_by_one(lengths, max_len=None):
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.arange(max_len)[None, :] <= lengths[:, None]


def _padding_positions_from_1(lengths, max_len=None):
    max_len = int(lengths.max()) if max_len is None else max_len
    return torch.arange(1, max_len + 1)[None, :] < lengths[:, None]  # the last real token marked as padding


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


def _padding_explain(case, value, expected):
    """The first wrong row: its length, where it should be True, and where the learner's is."""
    if not isinstance(value, torch.Tensor) or value.dtype != torch.bool or value.shape != expected.shape:
        return None
    if value.dim() != 2:
        return None
    wrong = (value != expected).any(dim=-1).nonzero()
    if not len(wrong):
        return None
    row = int(wrong[0, 0])
    length = int(expected[row].sum())
    mine = [int(i) for i in value[row].nonzero()[:, 0]]
    shown = ", ".join(map(str, mine)) if mine else "no position"
    return (
        f"Row {row} is a sentence of length {length}: True at positions 0 to {length - 1} only; yours is True at "
        f"{shown}."
    )


PADDING_MASK = Exercise(
    name="padding_mask",
    reference=padding_mask,
    prompt="your function receives `lengths`, a 1-D long tensor with one sentence length per row, and `max_len`, "
    "an int or left out (`max_len=None`: then the longest length); it returns a bool tensor (batch, max_len) "
    "that is True at real tokens (position < length) and False at padding.",
    start="compare every position 0, 1, ..., max_len - 1 with every sentence's length, by broadcasting.",
    make_cases=_padding_cases,
    axes={"": ("sentence rows", "position columns")},
    explain=_padding_explain,
    solution_body="""
    if max_len is None:
        max_len = int(lengths.max())  # the longest sentence
    return _padding_mask(lengths, max_len)
    """,
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
            "positions counted from 1 (each sentence's last token marked as padding)",
            "a sentence of length n covers positions 0 ... n - 1: compare `torch.arange(max_len)`, which starts at 0, "
            "with the lengths, `positions < length`.",
            _padding_positions_from_1,
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
    start="start from a square of True values and keep the part on and below the diagonal.",
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


# --- masked softmax, safe in every dtype ------------------------------------------------------


def _masked_softmax_cases(g):
    fully_masked = torch.ones(2, 4, 5, dtype=torch.bool)
    fully_masked[1, 2] = False  # query 2 of sentence 1 may attend to no key
    fully_masked[0, :, 3:] = False
    very_negative = seeded_randn(g, 2, 3, 4).half() * 100 - 20000  # real float16 scores far below -1e4
    return [
        Case(
            "one sentence, 4 queries, 6 keys, a random mask",
            (seeded_randn(g, 4, 6), _random_bool(g, 4, 6)),
            ("masked", "unbatched"),
        ),
        Case(
            "a batch of 2 with a padding mask (batch, 1, k_len) that broadcasts over the queries",
            (seeded_randn(g, 2, 3, 5), padding_mask(torch.tensor([5, 2]), 5)[:, None, :]),
            ("masked", "batched"),
        ),
        Case(
            "a query row whose keys are all masked (sentence 1, query 2): its weights must be 0",
            (seeded_randn(g, 2, 4, 5), fully_masked),
            ("masked", "batched", "fully masked row"),
        ),
        Case(
            "float16 scores with a padding mask",
            (seeded_randn(g, 2, 3, 4).half(), padding_mask(torch.tensor([4, 1]), 4)[:, None, :]),
            ("masked", "batched", "float16"),
        ),
        Case(
            "float16 scores near -20000: a fill of -1e4 would beat the real keys",
            (very_negative, padding_mask(torch.tensor([2, 3]), 4)[:, None, :]),
            ("masked", "batched", "float16"),
        ),
        Case(
            "bfloat16 scores, a causal mask of 4 x 4",
            (seeded_randn(g, 2, 4, 4).bfloat16(), causal_mask(4)),
            ("masked", "batched", "bfloat16"),
        ),
        Case("no mask given: a plain softmax over the keys", (seeded_randn(g, 3, 4),), ("no mask", "unbatched")),
        Case(
            "float32 scores near -1e6: a fill that merely fits float16 (-65504) is not low enough here",
            (seeded_randn(g, 2, 3) * 1000 - 1e6, torch.tensor([[True, True, False], [True, False, True]])),
            ("masked", "unbatched"),
        ),
    ]


def _random_bool(g, *shape):
    """Random True/False in which every row allows its first key and blocks its last one."""
    mask = torch.rand(*shape, generator=g) < 0.5
    mask[..., 0] = True
    mask[..., -1] = False
    return mask


def _masked_minus_inf(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf)
    return torch.softmax(scores, dim=-1)  # a row of -inf only gives NaN


def _masked_finite_fill_only(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1)  # a row with no allowed key comes out uniform


def _masked_minus_1e9(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)  # overflows float16
    return _zero_rows_without_keys(torch.softmax(scores, dim=-1), mask)


def _masked_minus_1e4(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e4)  # fits float16, but is not below every real score
    return _zero_rows_without_keys(torch.softmax(scores, dim=-1), mask)


def _masked_float32_minimum(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(torch.float32).min)  # overflows float16
    return _zero_rows_without_keys(torch.softmax(scores, dim=-1), mask)


def _masked_inverted(scores, mask=None):
    if mask is not None:
        mask = ~mask
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return _zero_rows_without_keys(torch.softmax(scores, dim=-1), mask)


def _masked_after_softmax(scores, mask=None):
    weights = torch.softmax(scores, dim=-1)
    return weights if mask is None else weights * mask


def _masked_renormalised_after_softmax(scores, mask=None):
    weights = torch.softmax(scores, dim=-1)
    if mask is None:
        return weights
    kept = weights * mask
    return kept / kept.sum(dim=-1, keepdim=True)  # 0 / 0 on a row with no key


def _masked_if_mask(scores, mask=None):
    if mask:  # raises for a mask of more than one entry
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1)


def _zero_rows_without_keys(weights, mask):
    return weights if mask is None else weights * mask.any(dim=-1, keepdim=True)


MASKED_SOFTMAX = Exercise(
    name="masked_softmax",
    reference=masked_softmax,
    prompt="your function receives `scores` (..., q_len, k_len) of any float dtype and an optional bool `mask` "
    "that broadcasts to them, True = may attend (default None: every key allowed); it returns the attention "
    "weights, the softmax over the keys in which every masked key gets weight 0, in the dtype of `scores`. "
    "It must work in float16 and bfloat16, and a query row with no key allowed gets all-zero weights "
    "(neither NaN nor a uniform row).",
    start="decide first which score a blocked key gets, one that fits every dtype; the rows that allow no key "
    "come last.",
    make_cases=_masked_softmax_cases,
    axes={"": ("query rows", "key columns")},
    notebook="03",
    gradients=("scores",),
    mistakes=(
        Mistake(
            "a fill of -inf",
            "-inf gives masked keys weight 0, but a row whose keys are all masked becomes exp(-inf) / 0 = NaN: fill "
            "with the finite `torch.finfo(scores.dtype).min` and zero the rows that allow no key.",
            _masked_minus_inf,
        ),
        Mistake(
            "no rule for a row with every key masked",
            "with a finite fill, a row whose keys are all masked comes out uniform (every key equally "
            "'attended'): set such rows to 0, e.g. multiply by `mask.any(dim=-1, keepdim=True)`.",
            _masked_finite_fill_only,
        ),
        Mistake(
            "a fill value of -1e9",
            "-1e9 does not fit in float16 (its range ends at -65504), so `masked_fill` raises: "
            "`torch.finfo(scores.dtype).min` is the most negative number of every dtype.",
            _masked_minus_1e9,
        ),
        Mistake(
            "a fill value of -1e4",
            "-1e4 fits in float16 but is not the smallest score there can be: real scores below it lose to the "
            "masked keys. `torch.finfo(scores.dtype).min` is below every real score.",
            _masked_minus_1e4,
        ),
        Mistake(
            "float32's minimum used for every dtype",
            "`torch.finfo(torch.float32).min` overflows float16: ask the scores' own dtype, "
            "`torch.finfo(scores.dtype).min`.",
            _masked_float32_minimum,
        ),
        Mistake(
            "the mask inverted",
            "in this course True means *may attend*: fill the scores where the mask is False, with `~mask`.",
            _masked_inverted,
        ),
        Mistake(
            "the mask applied after the softmax",
            "zeroing weights after the softmax leaves rows that no longer sum to 1; fill the scores before it.",
            _masked_after_softmax,
        ),
        Mistake(
            "the weights zeroed and renormalised after the softmax",
            "renormalising is right where a key is allowed, but a row with no key allowed divides 0 by 0: fill the "
            "scores before the softmax, then zero the rows that allow no key.",
            _masked_renormalised_after_softmax,
        ),
        Mistake(
            "`if mask:` instead of `if mask is not None:`",
            "`if mask:` asks a whole tensor for one True/False and raises; test whether a mask was given with "
            "`if mask is not None:`.",
            _masked_if_mask,
        ),
    ),
)


# --- Hugging Face's attention_mask -> PyTorch's key_padding_mask ------------------------------


def _key_padding_cases(g):
    end_padded = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])  # (2, 4)
    return [
        Case(
            "Hugging Face's long 0/1 mask, 2 sentences of lengths 4 and 2, padded at the end",
            (end_padded,),
            ("non-square",),
        ),
        Case(
            "the same sentences padded at the start (left padding, as for generation), long",
            (end_padded.flip(-1),),
            ("non-square",),
        ),
        Case("the same mask as int32", (end_padded.int(),), ("non-square",)),
        Case("the same mask as this course's bool, True = may attend", (end_padded.bool(),), ("non-square",)),
        Case("the same mask as float 0./1.", (end_padded.float(),), ("non-square",)),
        Case(
            "a long mask of 3 sentences of 3 tokens, one with no padding",
            (torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1]]),),
            ("square",),
        ),
    ]


def _kpm_not_inverted(attention_mask):
    return attention_mask.bool()


def _kpm_bitwise_not(attention_mask):
    return ~attention_mask  # on integers, ~1 = -2 and ~0 = -1: both "true"


def _kpm_one_minus(attention_mask):
    return 1 - attention_mask  # the right values, in the mask's dtype


def _kpm_one_minus_as_bool(attention_mask):
    return (1 - attention_mask).bool()  # raises on a bool mask: no `-` for bool tensors


def _kpm_padding_at_the_end(attention_mask):
    lengths = attention_mask.sum(dim=-1)
    return torch.arange(attention_mask.shape[-1])[None, :] >= lengths[:, None]


KEY_PADDING_MASK = Exercise(
    name="key_padding_mask",
    reference=key_padding_mask,
    prompt="your function receives Hugging Face's `attention_mask` (batch, seq): 1 (or True) at real tokens, 0 "
    "(or False) at padding, as long, int, float or bool; it returns PyTorch's `key_padding_mask` for "
    "`nn.MultiheadAttention`: a bool tensor (batch, seq) that is True where a key must be *ignored*.",
    start="Hugging Face's 1 means a real token and PyTorch's True means ignore: which entries are True here?",
    make_cases=_key_padding_cases,
    axes={"": ("sentence rows", "position columns")},
    notebook="03",
    mistakes=(
        Mistake(
            "the mask converted but not inverted",
            "`key_padding_mask` is True where a key is *ignored*, the opposite of Hugging Face's 1: "
            "`attention_mask == 0`.",
            _kpm_not_inverted,
        ),
        Mistake(
            "`~` on an integer mask",
            "on integers `~` is a bitwise not (`~1 == -2`, `~0 == -1`), which is never a boolean: compare "
            "instead, `attention_mask == 0`.",
            _kpm_bitwise_not,
        ),
        Mistake(
            "`1 - attention_mask`",
            "`1 - attention_mask` is right for 0/1 numbers, but PyTorch has no `-` for a bool tensor, so it raises "
            "on this course's bool mask (and without `.bool()` a long result is not a mask either): "
            "`attention_mask == 0` works for every dtype.",
            _kpm_one_minus,
        ),
        Mistake(
            "`(1 - attention_mask).bool()`",
            "right for 0/1 numbers of every dtype, but PyTorch has no `-` for a bool tensor, so it raises on this "
            "course's bool mask: `attention_mask == 0` works for every dtype.",
            _kpm_one_minus_as_bool,
        ),
        Mistake(
            "the padding assumed to sit at the end",
            "tokenizers may pad on the left too: read each position's own 0 or 1 rather than a length.",
            _kpm_padding_at_the_end,
        ),
    ),
)


# --- PyTorch's attn_mask (bool True = blocked, or float added) -> this course's bool mask -------------


def _torch_mask_cases(g):
    lowest = torch.finfo(torch.float32).min
    end = torch.tensor([[False, False, False, True, True], [False, False, False, False, True]])  # (2, 5)
    start = torch.tensor([[True, True, False, False, False], [False, False, False, False, False]])  # (2, 5)
    return [
        Case("a boolean mask (True = blocked), padding at the end: 2 rows of 5", (end,), ("non-square",)),
        Case("a boolean mask (True = blocked), padding at the start", (start,), ("non-square",)),
        Case("a boolean causal mask (True above the diagonal): 4 x 4", (torch.ones(4, 4).triu(1).bool(),), ("square",)),
        Case(
            "a boolean mask (True = blocked) with batch and head axes: (2, 1, 3, 5)",
            (torch.rand(2, 1, 3, 5, generator=g) < 0.4,),
            ("batched", "non-square"),
        ),
        Case("a float mask, 0 and -inf, padding at the end", (torch.zeros(2, 5).masked_fill(end, -math.inf),), ()),
        Case(
            "a float mask, 0 and float32's most negative number (as Hugging Face builds it)",
            (torch.zeros(2, 5).masked_fill(end, lowest),),
            (),
        ),
        Case(
            "a float16 mask, 0 and float16's most negative number (-65504)",
            (torch.zeros(2, 5, dtype=torch.float16).masked_fill(end, torch.finfo(torch.float16).min),),
            ("float16",),
        ),
        Case(
            "a bfloat16 mask, 0 and -inf",
            (torch.zeros(2, 5, dtype=torch.bfloat16).masked_fill(end, -math.inf),),
            ("bfloat16",),
        ),
    ]


def _torch_mask_variant(settings, attn_mask):
    """The conversion with its two branches chosen by ``settings`` (the knobs below)."""
    if attn_mask.dtype == torch.bool:
        allowed = {"invert": lambda m: ~m, "keep": lambda m: m, "all": lambda m: torch.ones_like(m)}[settings["bool"]](
            attn_mask
        )
    else:
        rule = settings["float"]
        if rule == "above the minimum":
            allowed = attn_mask > torch.finfo(attn_mask.dtype).min
        elif rule == "not -inf":
            allowed = ~torch.isinf(attn_mask)
        elif rule == "bool":
            allowed = attn_mask.bool()
        elif rule == "above float32's minimum":
            allowed = attn_mask > torch.finfo(torch.float32).min
        elif rule == "above -1e9":
            allowed = attn_mask > -1e9
        else:
            allowed = attn_mask < 0
    return allowed.float() if settings["output"] == "float" else allowed


_TORCH_MASK_KNOBS = (
    Knob(
        "bool",
        (
            ("invert", "", ""),
            (
                "keep",
                "a boolean mask kept as it is",
                "PyTorch's boolean `attn_mask` is True where a key is *blocked*: ours is its opposite, `~attn_mask`.",
            ),
        ),
    ),
    Knob(
        "float",
        (
            ("above the minimum", "", ""),
            (
                "not -inf",
                "only -inf read as blocked",
                "a float mask may block with the dtype's most negative number instead of -inf (Hugging Face "
                "does): treat anything at `torch.finfo(attn_mask.dtype).min` or below as blocked.",
            ),
            (
                "bool",
                "`.bool()` on a float mask",
                "`.bool()` turns 0 into False and -inf into True: in a float mask 0 is the key that is kept.",
            ),
            (
                "above float32's minimum",
                "float32's minimum for every dtype",
                "float16's most negative number is -65504, far above float32's: use `torch.finfo(attn_mask.dtype)`.",
            ),
            (
                "above -1e9",
                "a fixed threshold of -1e9",
                "float16 blocks with -65504, above -1e9: compare with the mask's own dtype's minimum.",
            ),
            (
                "negative",
                "the float mask inverted (`< 0` as allowed)",
                "0 keeps a key: a key may be attended to where the float mask is 0.",
            ),
        ),
    ),
    Knob(
        "output",
        (
            ("bool", "", ""),
            ("float", "a float result", "return a boolean mask: comparisons give booleans directly."),
        ),
    ),
)


def _tm_not_inverted(attn_mask):
    return attn_mask if attn_mask.dtype == torch.bool else attn_mask == 0


def _tm_invert_everything(attn_mask):
    return ~attn_mask  # raises on a float mask


def _tm_float_as_bool(attn_mask):
    return ~attn_mask if attn_mask.dtype == torch.bool else attn_mask.bool()


def _tm_only_minus_inf(attn_mask):
    return ~attn_mask if attn_mask.dtype == torch.bool else ~torch.isinf(attn_mask)


def _tm_padding_at_the_end(attn_mask):
    blocked = attn_mask if attn_mask.dtype == torch.bool else attn_mask != 0
    kept = (~blocked).sum(dim=-1)  # (...): how many keys are kept
    return torch.arange(attn_mask.shape[-1]) < kept[..., None]


def _tm_float32_minimum(attn_mask):
    return ~attn_mask if attn_mask.dtype == torch.bool else attn_mask > torch.finfo(torch.float32).min


MASK_FROM_TORCH = Exercise(
    name="mask_from_torch",
    reference=mask_from_torch,
    prompt="your function receives `attn_mask` as `nn.MultiheadAttention` takes it, of any shape: either boolean, "
    "True where a key is *blocked*, or float (float32, float16 or bfloat16), *added* to the scores, 0 where a key "
    "is kept and -inf or the dtype's most negative number where it is blocked; it returns this course's mask of "
    "the same shape: bool, True where a query *may attend*.",
    start="tell the two kinds apart by the mask's dtype first; then ask, for each kind, which value means blocked.",
    make_cases=_torch_mask_cases,
    knobs=_TORCH_MASK_KNOBS,
    variant=_torch_mask_variant,
    axes={"": ("query rows", "key columns")},
    notebook="03",
    mistakes=(
        Mistake(
            "the boolean mask not inverted",
            "PyTorch's boolean `attn_mask` means *blocked* where it is True; ours means *may attend*: `~attn_mask`.",
            _tm_not_inverted,
        ),
        Mistake(
            "`~` on a float mask",
            "`~` works on booleans only: a float mask needs a comparison (which values block a key?).",
            _tm_invert_everything,
        ),
        Mistake(
            "`.bool()` on a float mask",
            "`.bool()` turns 0 into False and -inf into True, the opposite of what a float mask means: 0 keeps a key.",
            _tm_float_as_bool,
        ),
        Mistake(
            "only -inf read as blocked",
            "a float mask may block with the dtype's most negative number instead of -inf (Hugging Face's does): "
            "compare with `torch.finfo(attn_mask.dtype).min`.",
            _tm_only_minus_inf,
        ),
        Mistake(
            "a fixed threshold that float16's -65504 passes (float32's minimum, or -1e9)",
            "float16's most negative number is -65504: compare with `torch.finfo(attn_mask.dtype).min`, the "
            "mask's own.",
            _tm_float32_minimum,
        ),
        Mistake(
            "the padding assumed to sit at the end",
            "a mask may block any key, at the start (left padding) or anywhere (a causal or random mask): read each "
            "entry's own value rather than a count of blocked keys.",
            _tm_padding_at_the_end,
        ),
    ),
)
