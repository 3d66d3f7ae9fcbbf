"""Realistic answers to the exercises of notebooks 08-12 that had none of their own (the retired ones a learner
may still check by name among them): six or more wrong answers the catalogue does not list, each of which must
get a message that names the mistake, the failing property or a structural fact (and none a misleading one),
and two or more right answers written differently from the reference, none rejected. Each entry is
(what the learner did, their function, words the message must hold)."""

import math
import re

import pytest
import torch
import torch.nn.functional as F

from bertcourse.exercises import EXERCISES, check

WRONG: dict[str, list] = {}
RIGHT: dict[str, list] = {}
# Phrases that would mislead on any of these answers: relations and readings that do not apply here.
MISLEADING = ("cosine similarity", "a causal mask where none belongs", "exp of the right value", "may attend")


# --- 08 role_score (retired) -----------------------------------------------------------------------


def _role(attention, targets):
    return (attention * targets).sum(dim=-1)[..., targets.any(dim=-1)].mean(dim=-1)


WRONG["role_score"] = [
    (
        "the largest target weight",
        lambda a, t: (a * t).amax(dim=-1)[..., t.any(dim=-1)].mean(dim=-1),
        r"each query's \*largest\* target weight",
    ),
    ("one sum over every axis", lambda a, t: (a * t).sum() / t.any(dim=-1).sum(), r"leading axes \(3,\) are missing"),
    ("divided by the targets", lambda a, t: (a * t).sum(dim=(-2, -1)) / t.sum(), "divided by the number of targets"),
    (
        "argmax hits",
        lambda a, t: (F.one_hot(a.argmax(-1), a.shape[-1]).bool() & t).any(-1)[..., t.any(-1)].float().mean(-1),
        "not a hit count",
    ),
    (
        "the median",
        lambda a, t: (a * t).sum(dim=-1)[..., t.any(dim=-1)].median(dim=-1).values,
        r"the \*median\* over the queries",
    ),
    ("in percent", lambda a, t: 100 * _role(a, t), "multiplied by exactly 100"),
]
RIGHT["role_score"] = [
    _role,
    lambda a, t: torch.einsum("...ij,ij->...", a, t.float()) / t.any(dim=-1).sum(),
]


# --- 08 attention_rollout (retired): the wrong answers are in test_exercises_inside.py ----------------


def _rollout_from_identity(attentions, residual=True):
    seq = attentions.shape[-1]
    result = torch.eye(seq)
    for layer_maps in attentions:
        mixing = layer_maps.mean(dim=-3)
        if residual:
            mixing = mixing + torch.eye(seq)
            mixing = mixing / mixing.sum(dim=-1, keepdim=True)
        result = mixing @ result
    return result


def _rollout_reversed_product(attentions, residual=True):
    mixings = [a.mean(-3) * 0.5 + 0.5 * torch.eye(a.shape[-1]) if residual else a.mean(-3) for a in attentions]
    result = mixings[-1]
    for mixing in reversed(mixings[:-1]):
        result = result @ mixing  # A_L @ ... @ A_1, built from the top
    return result


RIGHT["attention_rollout"] = [_rollout_from_identity, _rollout_reversed_product]


# --- 08 mean_pooling (retired) -----------------------------------------------------------------------


def _pool(h, m=None):
    if m is None:
        return h.mean(dim=1)
    weights = m.to(h.dtype).unsqueeze(-1)
    return (h * weights).sum(dim=1) / weights.sum(dim=1)


def _pool_without_cls(h, m=None):
    m = torch.ones(h.shape[:2]) if m is None else m.float().clone()
    m[:, 0] = 0
    return (h * m.unsqueeze(-1)).sum(1) / m.sum(1, keepdim=True)


WRONG["mean_pooling"] = [
    ("the sum", lambda h, m=None: h.sum(1) if m is None else (h * m.unsqueeze(-1)).sum(1), "the sum of the real"),
    (
        "the count without keepdim",
        lambda h, m=None: h.mean(1) if m is None else (h * m.unsqueeze(-1)).sum(1) / m.float().sum(1),
        "two tensors do not broadcast together",
    ),
    (
        "max pooling",
        lambda h, m=None: h.amax(1) if m is None else h.masked_fill(~m.bool().unsqueeze(-1), -1e9).amax(1),
        r"max pooling",
    ),
    ("[CLS] left out", _pool_without_cls, r"the mean without the first token \(\[CLS\]\)"),
    (
        "divided by the batch's count",
        lambda h, m=None: h.mean(1) if m is None else (h * m.unsqueeze(-1)).sum(1) / m.sum(),
        r"real tokens of the \*whole batch\*",
    ),
    ("keepdim", lambda h, m=None: _pool(h, m).unsqueeze(1), "An extra axis of size 1 at position 1"),
]
RIGHT["mean_pooling"] = [
    _pool,
    lambda h, m=None: torch.stack(
        [hi[mi.bool()].mean(0) for hi, mi in zip(h, torch.ones(h.shape[:2]) if m is None else m, strict=True)]
    ),
]


# --- 09 mlm_corrupt (asked again, with use) ------------------------------------------------------------


def _corrupt(input_ids, selected, draws, random_ids, mask_token_id):
    masked = torch.where(selected & (draws < 0.8), mask_token_id, input_ids)
    corrupted = torch.where(selected & (draws >= 0.8) & (draws < 0.9), random_ids, masked)
    return corrupted, torch.where(selected, input_ids, -100)


def _corrupt_in_place(input_ids, selected, draws, random_ids, mask_token_id):
    labels = torch.where(selected, input_ids, -100)
    input_ids[selected & (draws < 0.8)] = mask_token_id
    chosen = selected & (draws >= 0.8) & (draws < 0.9)
    input_ids[chosen] = random_ids[chosen]
    return input_ids, labels


def _corrupt_with(mask_below, random_below, random_first=False):
    def corrupt(input_ids, selected, draws, random_ids, mask_token_id):
        if random_first:  # 10% random first, then 80% [MASK]
            out = torch.where(selected & (draws < 0.1), random_ids, input_ids)
            out = torch.where(selected & (draws >= 0.1) & (draws < 0.9), mask_token_id, out)
        else:
            out = torch.where(selected & mask_below(draws), mask_token_id, input_ids)
            out = torch.where(selected & ~mask_below(draws) & random_below(draws), random_ids, out)
        return out, torch.where(selected, input_ids, -100)

    return corrupt


def _corrupt_fresh_random(input_ids, selected, draws, random_ids, mask_token_id):
    fresh = torch.randint(0, int(input_ids.max()) + 1, input_ids.shape)  # not the random_ids given
    return _corrupt(input_ids, selected, draws, fresh, mask_token_id)


WRONG["mlm_corrupt"] = [
    ("in place", _corrupt_in_place, "changes its input `input_ids` in place"),
    (
        "<= 0.8",
        _corrupt_with(lambda d: d <= 0.8, lambda d: d <= 0.9),
        r"with draw 0.8 \(from 0.8 to 0.9: its random id\): its `input_ids` entry is its random id 8; yours is the "
        r"\[MASK\] id 4",
    ),
    (
        "random above 0.8",
        _corrupt_with(lambda d: d < 0.8, lambda d: d >= 0.8),
        r"\(0.9 or above: it stays itself\): its `input_ids` entry is its own token",
    ),
    (
        "outputs swapped",
        lambda *args: _corrupt(*args)[::-1],
        r"right items in the order \(labels, input_ids\)",
    ),
    (
        "-1 as the ignored label",
        lambda *args: (_corrupt(*args)[0], _corrupt(*args)[1].masked_fill(_corrupt(*args)[1] == -100, -1)),
        r"is not selected: its `labels` entry is -100; yours is -1",
    ),
    ("fresh random ids", _corrupt_fresh_random, r"its `input_ids` entry is its random id 8; yours is 2"),
    (
        "random first",
        _corrupt_with(None, None, random_first=True),
        r"\(below 0.8: \[MASK\]\): its `input_ids` entry is the \[MASK\] id 4; yours is its random id",
    ),
]
RIGHT["mlm_corrupt"] = [_corrupt, lambda *args: tuple(t.clone() for t in _corrupt(*args))]


# --- 09 mlm_accuracy (retired) ------------------------------------------------------------------------


def _accuracy(logits, labels):
    chosen = labels != -100
    return (logits.argmax(-1)[chosen] == labels[chosen]).float().mean()


def _accuracy_per_sentence(logits, labels):
    chosen = labels != -100
    hits = (logits.argmax(-1) == labels) & chosen
    return (hits.sum(1) / chosen.sum(1)).mean()


WRONG["mlm_accuracy"] = [
    (
        "the label's probability",
        lambda p, y: p.softmax(-1).gather(-1, y.clamp(min=0)[..., None])[..., 0][y != -100].mean(),
        "the mean probability of the label",
    ),
    ("in percent", lambda p, y: 100 * _accuracy(p, y), "multiplied by exactly 100"),
    ("per sentence", _accuracy_per_sentence, "the mean of each sentence's own accuracy"),
    ("the error rate", lambda p, y: 1 - _accuracy(p, y), "It is 1 minus the right value"),
    (
        "top-2",
        lambda p, y: (p.topk(2, -1).indices == y[..., None]).any(-1)[y != -100].float().mean(),
        "among the two highest logits",
    ),
    ("a Python float", lambda p, y: _accuracy(p, y).item(), "Your output is a float; expected a torch.Tensor"),
]
RIGHT["mlm_accuracy"] = [
    _accuracy,
    lambda p, y: ((p.argmax(-1) == y) & y.ne(-100)).sum() / y.ne(-100).sum(),
]


# --- 09 truncate_pair (retired): the wrong answers are in test_exercises_pretraining.py -----------------


def _truncate_lists(a, b, max_length):
    a, b = a.tolist(), b.tolist()
    while len(a) + len(b) > max_length - 3:
        (a if len(a) > len(b) else b).pop()
    return torch.tensor(a, dtype=torch.long), torch.tensor(b, dtype=torch.long)


def _truncate_by_counts(a, b, max_length):
    excess = max(0, len(a) + len(b) - (max_length - 3))
    len_a, len_b = len(a), len(b)
    for _ in range(excess):
        if len_a > len_b:
            len_a -= 1
        else:
            len_b -= 1
    return a.narrow(0, 0, len_a), b.narrow(0, 0, len_b)


RIGHT["truncate_pair"] = [_truncate_lists, _truncate_by_counts]


# --- 10 align_word_labels ----------------------------------------------------------------------------


def _align(word_ids, word_labels, num_labels=None):
    out, previous = [], None
    for word in word_ids:
        out.append(-100 if word is None or word == previous else word_labels[word])
        previous = word
    return torch.tensor(out, dtype=torch.long)


def _align_specials_zero_at_cls(word_ids, word_labels, num_labels=None):
    out = _align(word_ids, word_labels)
    out[0] = 0  # [CLS] as class 0
    return out


def _align_bio_continuation(word_ids, word_labels, num_labels=None):
    out, previous = [], None
    for word in word_ids:
        if word is None:
            out.append(-100)
        elif word != previous:
            out.append(word_labels[word])
        else:
            out.append(word_labels[word] + 1 if word_labels[word] >= 0 else -100)  # B- label + 1 as its I- label
        previous = word
    return torch.tensor(out)


def _align_unlabelled_word_as_zero(word_ids, word_labels, num_labels=None):
    out = _align(word_ids, word_labels)
    first = [i for i, w in enumerate(word_ids) if w is not None and (i == 0 or word_ids[i - 1] != w)]
    for i in first:
        if word_labels[word_ids[i]] == -100:
            out[i] = 0
    return out


WRONG["align_word_labels"] = [
    ("a list", lambda w, y, n=None: _align(w, y).tolist(), "Your output is a list; expected a torch.Tensor"),
    (
        "[CLS] as class 0",
        _align_specials_zero_at_cls,
        r"Piece 0 is no word \(\[CLS\], \[SEP\] or padding: word id None\): it gets -100; yours is 0",
    ),
    ("int32", lambda w, y, n=None: _align(w, y).int(), "dtype torch.int32; expected torch.int64"),
    ("-1 for ignored", lambda w, y, n=None: _align(w, y).masked_fill(_align(w, y) == -100, -1), "yours is -1"),
    (
        "special pieces dropped",
        lambda w, y, n=None: torch.tensor([y[i] for i in w if i is not None]),
        r"one entry per piece that is a word \(4\)",
    ),
    (
        "an I- label on later pieces",
        _align_bio_continuation,
        r"Piece 3 is the second piece of word 1: it gets -100 \(only a word's first piece carries its label\)",
    ),
    (
        "an unlabelled word as class 0",
        _align_unlabelled_word_as_zero,
        r"Piece 1 is the first piece of word 0, whose label is -100: it gets -100; yours is 0",
    ),
]


def _align_with_first_seen(word_ids, word_labels, num_labels=None):
    first = {}
    for i, word in enumerate(word_ids):
        if word is not None:
            first.setdefault(word, i)
    return torch.tensor([word_labels[w] if w is not None and first[w] == i else -100 for i, w in enumerate(word_ids)])


RIGHT["align_word_labels"] = [_align, _align_with_first_seen]


# --- 10 best_span ------------------------------------------------------------------------------------


def _valid(start_logits, context_mask, max_answer_length):
    i = torch.arange(start_logits.shape[-1])
    length = i[None, :] - i[:, None] + 1
    both = context_mask[..., :, None] & context_mask[..., None, :]
    return (length >= 1) & (length <= max_answer_length) & both


def _span(start_logits, end_logits, context_mask, max_answer_length=30, combine=torch.add, fill=-math.inf):
    seq = start_logits.shape[-1]
    scores = combine(start_logits[..., :, None], end_logits[..., None, :])
    best = scores.masked_fill(~_valid(start_logits, context_mask, max_answer_length), fill).flatten(-2).argmax(-1)
    return torch.stack([best // seq, best % seq], dim=-1)


def _span_batched_only(start_logits, end_logits, context_mask, max_answer_length=30):
    seq = start_logits.shape[-1]
    scores = start_logits[:, :, None] + end_logits[:, None, :]  # (batch, seq, seq): a batch axis assumed
    i = torch.arange(seq)
    length = i[None, :] - i[:, None] + 1
    ok = (length >= 1) & (length <= max_answer_length) & context_mask[:, :, None] & context_mask[:, None, :]
    best = scores.masked_fill(~ok, -math.inf).flatten(1).argmax(1)
    return torch.stack([best // seq, best % seq], dim=-1)


WRONG["best_span"] = [
    ("a tuple", lambda *args: tuple(_span(*args).unbind(-1)), "Your output is a tuple; expected a torch.Tensor"),
    (
        "start times end",
        lambda s, e, m, n=30: _span(s, e, m, n, combine=torch.mul),
        r"is valid and scores start_logit \+ end_logit = -14.15; \[7, 8\] scores -2.5",
    ),
    ("end and start swapped", lambda *args: _span(*args).flip(-1), r"Your span \[9, 8\] starts after it ends"),
    (
        "a batch axis assumed",
        _span_batched_only,
        "exactly those where there is no batch axis",
    ),
    (
        "one token too short",
        lambda s, e, m, n=30: _span(s, e, m, n - 1),
        r"\[7, 9\] scores 7 \(it has 3 tokens, and up to max_answer_length = 3 are allowed\)",
    ),
    (
        "[-1, -1] without a passage",
        lambda s, e, m, n=30: torch.where(m.any(-1, keepdim=True), _span(s, e, m, n), -1),
        r"This input \(input 1\) has no passage token: its answer is \[0, 0\]",
    ),
]
RIGHT["best_span"] = [
    _span,
    lambda s, e, m, n=30: _span(s.log_softmax(-1), e.log_softmax(-1), m, n),  # log p_start + log p_end
    lambda s, e, m, n=30: _span(s, e, m, n, fill=-1e9),
]


# --- 11 merge_softmax_blocks -------------------------------------------------------------------------


def _factors(max_a, max_b, power=torch.exp):
    new_max = torch.maximum(max_a, max_b)
    factor_a = torch.where(max_a == -math.inf, 0.0, power(max_a - new_max))
    factor_b = torch.where(max_b == -math.inf, 0.0, power(max_b - new_max))
    return new_max, factor_a, factor_b


def _merge(max_a, sum_a, out_a, max_b, sum_b, out_b):
    new_max, fa, fb = _factors(max_a, max_b)
    return new_max, fa * sum_a + fb * sum_b, fa * out_a + fb * out_b


def _merge_safe_max(max_a, sum_a, out_a, max_b, sum_b, out_b):
    new_max = torch.max(max_a, max_b)
    safe = torch.where(torch.isinf(new_max), torch.zeros_like(new_max), new_max)
    fa, fb = (max_a - safe).exp(), (max_b - safe).exp()
    return new_max, sum_a * fa + sum_b * fb, out_a * fa + out_b * fb


def _merge_with(change):
    def merge(max_a, sum_a, out_a, max_b, sum_b, out_b):
        return change(max_a, sum_a, out_a, max_b, sum_b, out_b, *_merge(max_a, sum_a, out_a, max_b, sum_b, out_b))

    return merge


def _merge_min(max_a, sum_a, out_a, max_b, sum_b, out_b):
    low = torch.minimum(max_a, max_b)
    fa = torch.where(max_a == -math.inf, 0.0, torch.exp(max_a - low))
    fb = torch.where(max_b == -math.inf, 0.0, torch.exp(max_b - low))
    return low, fa * sum_a + fb * sum_b, fa * out_a + fb * out_b


def _merge_exp2(max_a, sum_a, out_a, max_b, sum_b, out_b):
    new_max, fa, fb = _factors(max_a, max_b, power=torch.exp2)
    return new_max, fa * sum_a + fb * sum_b, fa * out_a + fb * out_b


WRONG["merge_softmax_blocks"] = [
    (
        "the output normalised",
        _merge_with(lambda *args: (args[6], args[7], args[8] / args[7].clamp(min=1e-30))),
        "the division comes once, after the last block",
    ),
    (
        "the outputs averaged",
        _merge_with(lambda ma, sa, oa, mb, sb, ob, m, s, o: (m, s, (oa + ob) / 2)),
        "Your `out` is the mean of out_a and out_b",
    ),
    (
        "the larger sum",
        _merge_with(
            lambda ma, sa, oa, mb, sb, ob, m, s, o: (
                m,
                torch.maximum(*(f * x for f, x in zip(_factors(ma, mb)[1:], (sa, sb), strict=True))),
                o,
            )
        ),
        "Your `sum` is the larger of the two rescaled sums",
    ),
    ("the smaller max", _merge_min, "Your `max` is the smaller of the two maxima"),
    ("the outputs reversed", lambda *args: _merge(*args)[::-1], r"right items in the order \(out, sum, max\)"),
    ("powers of 2", _merge_exp2, "rescaled by powers of 2"),
    (
        "logaddexp as the max",
        _merge_with(lambda ma, sa, oa, mb, sb, ob, m, s, o: (torch.logaddexp(ma, mb), s, o)),
        r"log\(exp\(max_a\) \+ exp\(max_b\)\)",
    ),
]
RIGHT["merge_softmax_blocks"] = [_merge, _merge_safe_max]


# --- 11 window_spans (retired) ----------------------------------------------------------------------


def _windows(n_tokens, window, stride, max_positions=None):
    spans, start = [], 0
    while True:
        spans.append([start, min(start + window, n_tokens)])
        if start + window >= n_tokens:
            return torch.tensor(spans)
        start += stride


def _windows_last_moved_back(n_tokens, window, stride, max_positions=None):
    spans = _windows(n_tokens, window, stride)
    spans[-1] = torch.tensor([max(0, n_tokens - window), n_tokens])  # a full last window, as some libraries do
    return spans


WRONG["window_spans"] = [
    ("a list", lambda *args: _windows(*args).tolist(), "Your output is a list; expected a torch.Tensor"),
    (
        "[start, length]",
        lambda *args: _windows(*args).diff(dim=1, prepend=torch.zeros(len(_windows(*args)), 1, dtype=torch.long)),
        r"Window 1 starts at 1 × stride = 7 and ends at min\(start \+ window, n_tokens\) = 17; yours is \[7, 10\)",
    ),
    ("transposed", lambda *args: _windows(*args).T, "It is the right answer with its axes in another order"),
    ("a full last window", _windows_last_moved_back, r"Window 3 starts at 3 × stride = 21 .*; yours is \[19, 29\)"),
    ("floats", lambda *args: _windows(*args).float(), "dtype torch.float32; expected torch.int64"),
    (
        "ends clamped to the last index",
        lambda n, w, s, m=None: torch.stack([_windows(n, w, s)[:, 0], _windows(n, w, s)[:, 1].clamp(max=n - 1)], 1),
        r"yours is \[21, 28\)",
    ),
]


def _windows_by_arithmetic(n_tokens, window, stride, max_positions=None):
    count = 1 + max(0, math.ceil((n_tokens - window) / stride))
    starts = torch.arange(count) * stride
    return torch.stack([starts, (starts + window).clamp(max=n_tokens)], dim=1)


RIGHT["window_spans"] = [_windows, _windows_by_arithmetic]


# --- 11 local_global_mask (retired): three more wrong answers in test_exercises_long_inputs.py ----------


def _local(seq_len, width, global_positions=(), device=None):
    i = torch.arange(seq_len)
    band = (i[:, None] - i[None, :]).abs() <= width
    is_global = torch.zeros(seq_len, dtype=torch.bool)
    is_global[list(global_positions)] = True
    return band | is_global[:, None] | is_global[None, :]


def _local_index_tensor(seq_len, width, global_positions=(), device=None):
    i = torch.arange(seq_len)
    mask = (i[:, None] - i[None, :]).abs() <= width
    where = torch.tensor(global_positions)  # float32 when the list is empty
    mask[where] = True
    mask[:, where] = True
    return mask


def _local_cls_column_always(seq_len, width, global_positions=(), device=None):
    mask = _local(seq_len, width)
    for p in global_positions:
        mask[p] = True
    mask[:, 0] = True  # every token reads [CLS]: the global columns taken as [CLS]'s
    return mask


WRONG["local_global_mask"] = [
    ("floats", lambda *args: _local(*args).float(), "a mask must be boolean"),
    ("only the first global", lambda s, w, g=(), d=None: _local(s, w, list(g)[:1]), "The row of global token 10"),
    ("lower triangle kept", lambda *args: _local(*args).tril(), "Your band is one-sided"),
    (
        "an additive mask",
        lambda *args: torch.where(_local(*args), 0.0, float("-inf")),
        "a mask must be boolean",
    ),
    ("an index tensor", _local_index_tensor, r"`torch.tensor\(\[\]\)` of an empty list is float32"),
    ("the [CLS] column", _local_cls_column_always, "The column of global token 10 is not all True"),
]
RIGHT["local_global_mask"] = [_local]


def _local_with_loops(seq_len, width, global_positions=(), device=None):
    mask = torch.zeros(seq_len, seq_len, dtype=torch.bool)
    for q in range(seq_len):
        mask[q, max(0, q - width) : q + width + 1] = True
    for p in global_positions:
        mask[p, :] = True
        mask[:, p] = True
    return mask


RIGHT["local_global_mask"].append(_local_with_loops)


# --- 12 average_gradients (retired) ------------------------------------------------------------------

WRONG["average_gradients"] = [
    ("keepdim forgotten", lambda g: g.mean(0), "Or a sum, mean or max over them"),
    ("over the last axis", lambda g: g.mean(-1, keepdim=True).expand_as(g), "each replica's own numbers averaged"),
    ("divided by every number", lambda g: (g.sum(0, keepdim=True) / g.numel()).expand_as(g), r"= 1/5\): a scale"),
    ("the median", lambda g: g.median(0, keepdim=True).values.expand_as(g), "the median of the replicas"),
    ("replica 0's", lambda g: g[:1].expand_as(g), "replica 0's gradient on every row"),
    (
        "divided by world_size - 1",
        lambda g: (g.sum(0, keepdim=True) / (g.shape[0] - 1)).expand_as(g),
        "the sum divided by world_size - 1",
    ),
]
RIGHT["average_gradients"] = [
    lambda g: g.mean(0, keepdim=True).expand_as(g).clone(),
    lambda g: (g.sum(0) / g.shape[0]).repeat(g.shape[0], *([1] * (g.dim() - 1))),
]


# --- 12 scaler_update (retired) ----------------------------------------------------------------------


def _update(gradients, scale, good_steps, growth_interval, halve=0.5, grow_at=None):
    unscaled = gradients / scale
    if not bool(torch.isfinite(gradients).all()):
        return unscaled, torch.tensor(scale * halve), torch.tensor(0)
    good_steps += 1
    if good_steps >= (growth_interval if grow_at is None else grow_at(growth_interval)):
        return unscaled, torch.tensor(scale * 2.0), torch.tensor(0)
    return unscaled, torch.tensor(float(scale)), torch.tensor(good_steps)


def _update_keeps_count_on_overflow(gradients, scale, good_steps, growth_interval):
    unscaled, new_scale, count = _update(gradients, scale, good_steps, growth_interval)
    if not bool(torch.isfinite(gradients).all()):
        count = torch.tensor(good_steps + 1)
    return unscaled, new_scale, count


def _update_zeroes_on_overflow(gradients, scale, good_steps, growth_interval):
    unscaled, new_scale, count = _update(gradients, scale, good_steps, growth_interval)
    if not bool(torch.isfinite(gradients).all()):
        unscaled = torch.zeros_like(gradients)  # what the optimizer would skip, but the exercise returns it
    return unscaled, new_scale, count


WRONG["scaler_update"] = [
    (
        "the scale a Python float",
        lambda *args: (_update(*args)[0], float(_update(*args)[1]), _update(*args)[2]),
        "`scale` is a float; expected a torch.Tensor",
    ),
    (
        "growth one step late",
        lambda g, s, n, i: _update(g, s, n, i, grow_at=lambda i: i + 1),
        "`good_steps` is 3; expected 0",
    ),
    ("the count kept after an overflow", _update_keeps_count_on_overflow, "`good_steps` is 2; expected 0"),
    ("zeros after an overflow", _update_zeroes_on_overflow, "the right value is inf and yours is 0"),
    (
        "the scale in float64",
        lambda *args: (_update(*args)[0], _update(*args)[1].double(), _update(*args)[2]),
        "dtype torch.float64; expected torch.float32",
    ),
    ("quartered on overflow", lambda g, s, n, i: _update(g, s, n, i, halve=0.25), "multiplied by exactly 1/2"),
]


def _update_with_where(gradients, scale, good_steps, growth_interval):
    bad = ~gradients.isfinite().all()
    count = torch.tensor(good_steps + 1)
    grow = (count >= growth_interval) & ~bad
    new_scale = torch.where(bad, scale * 0.5, torch.where(grow, scale * 2.0, float(scale))).float()
    return gradients / scale, new_scale.reshape(()), torch.where(bad | grow, 0, count)


RIGHT["scaler_update"] = [_update, _update_with_where]


# --- 08 word_piece_targets, value_weighted_norms; 10 classification_logits (more in their modules' tests) --


def _same_word(tokens):
    word, current = [], -1
    for token in tokens:
        current += 0 if token.startswith("##") else 1  # a ## piece continues the word before it
        word.append(current)
    words = torch.tensor(word)
    split = torch.tensor([any(t.startswith("##") for t, w in zip(tokens, word, strict=True) if w == v) for v in word])
    same = (words[:, None] == words[None, :]) & split[:, None]
    return same & ~torch.eye(len(tokens), dtype=torch.bool)


WRONG["word_piece_targets"] = [
    ("an int mask", lambda t: _same_word(t).long(), r"dtype torch.int64; a mask must be boolean"),
    ("a list of lists", lambda t: _same_word(t).tolist(), r"Your output is a list; expected a torch.Tensor"),
    (
        "one row per word",
        lambda t: _same_word(t)[[i for i, x in enumerate(t) if not x.startswith("##")]],
        r"Only the query rows differ: 6 instead of 7",
    ),
    (
        "[CLS] and [SEP] as one word",
        lambda t: (
            _same_word(t)
            | torch.tensor(
                [
                    [a in ("[CLS]", "[SEP]") and b in ("[CLS]", "[SEP]") and i != j for j, b in enumerate(t)]
                    for i, a in enumerate(t)
                ]
            )
        ),
        r"query 0 '\[CLS\]', key 5 '\[SEP\]': it should not be a target",
    ),
]
RIGHT["word_piece_targets"] = [_same_word, lambda t: _same_word(list(t)).clone()]


def _weighted_norms(attention, values, output_weight, norm=lambda t: t.norm(dim=-1)):
    heads, d_k = values.shape[-3], values.shape[-1]
    return attention * norm(values @ output_weight.T.reshape(heads, d_k, -1))[..., None, :]


WRONG["value_weighted_norms"] = [
    (
        "an L1 norm",
        lambda a, v, w: _weighted_norms(a, v, w, lambda t: t.abs().sum(-1)),
        r"the L1 norm \(sum of \|entries\|\)",
    ),
    ("the heads summed", lambda a, v, w: _weighted_norms(a, v, w).sum(-3), r"The leading axes \(2,\) are missing"),
    (
        "the norm of the weighted sum",
        lambda a, v, w: (a @ v @ w.T.reshape(v.shape[-3], v.shape[-1], -1)).norm(dim=-1),
        r"The last axes are missing",
    ),
    (
        "||v_j|| times the whole weight's norm",
        lambda a, v, w: a * (v.norm(dim=-1) * w.norm())[..., None, :],
        r"times the norm of the whole W_O",
    ),
]
RIGHT["value_weighted_norms"] = [
    _weighted_norms,
    lambda a, v, w: a * torch.linalg.vector_norm(v @ w.T.reshape(v.shape[-3], v.shape[-1], -1), dim=-1).unsqueeze(-2),
]


def _head10(h, pw, pb, cw, cb, pick=lambda h: h[..., 0, :], activation=torch.tanh):
    return activation(pick(h) @ pw.T + pb) @ cw.T + cb


WRONG["classification_logits"] = [
    ("the maximum over tokens", lambda *a: _head10(*a, pick=lambda h: h.amax(-2)), r"the maximum over the tokens"),
    ("the vector at position 1", lambda *a: _head10(*a, pick=lambda h: h[..., 1, :]), r"the vector at position 1"),
    ("the argmax label", lambda *a: _head10(*a).argmax(-1), r"The last axes are missing"),
    ("GELU in the pooler", lambda *a: _head10(*a, activation=F.gelu), r"GELU in the pooler"),
    (
        "every token classified",
        lambda h, pw, pb, cw, cb: torch.tanh(h @ pw.T + pb) @ cw.T + cb,
        r"shape \(3, 5, 2\); expected \(3, 2\)",
    ),
]
RIGHT["classification_logits"] = [
    _head10,
    lambda h, pw, pb, cw, cb: F.linear(torch.tanh(F.linear(h.select(-2, 0), pw, pb)), cw, cb),
]


# --- the tests ---------------------------------------------------------------------------------------

ENTRIES = [(name, label, fn, words) for name, entries in WRONG.items() for label, fn, words in entries]


@pytest.mark.parametrize(("name", "label", "fn", "words"), ENTRIES, ids=[f"{n}:{lab}" for n, lab, _, _ in ENTRIES])
def test_a_realistic_wrong_answer_is_named_and_never_misleadingly(name, label, fn, words):
    result = check(name, fn)
    assert result.status == "wrong" and result.mistake is None, result.message  # wrong, and not catalogued
    assert re.search(words, result.message), result.message
    assert not any(phrase in result.message for phrase in MISLEADING), result.message


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_right_answers_written_differently_pass(name):
    for fn in RIGHT[name]:
        result = check(name, fn)
        assert result.passed, result.message


@pytest.mark.parametrize("name", sorted(set(WRONG) | set(RIGHT)))
def test_each_exercise_here_has_six_wrong_answers_or_more_elsewhere_and_two_right_ones(name):
    assert EXERCISES[name].notebook in {"08", "09", "10", "11", "12"}
    elsewhere = {"attention_rollout": 6, "truncate_pair": 6, "local_global_mask": 3}  # in their modules' tests
    elsewhere |= {"word_piece_targets": 7, "value_weighted_norms": 6, "classification_logits": 6}
    assert len(WRONG.get(name, [])) + elsewhere.get(name, 0) >= 6, name
    assert len(RIGHT[name]) >= 2, name
