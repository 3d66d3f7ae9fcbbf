"""Realistic answers to the exercises of notebooks 01-07, none of them in the catalogue: wrong ones as a
learner writes them (each with the words its message must hold to name the mistake, the failing property
or a structural fact, and, where a message used to mislead, the words it must not hold), and right ones
written differently from the reference. At least 90% of the wrong answers of each exercise must be named,
none misleadingly, and no right answer may be rejected."""

import functools
import math
import re

import pytest
import torch
import torch.nn.functional as F

import bertcourse as bc
from bertcourse.exercises import EXERCISES, check, registry
from bertcourse.multihead import split_fused_qkv
from bertcourse.weights import ENCODER_NAMES


def _ln(x, weight, bias, eps):
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


# --- 01 linear_scores ---------------------------------------------------------------------------


def _proj(x, w, b):
    return x @ w.T + b


WRONG = {
    "linear_scores": [
        ("k.T on a batch", lambda x, wq, bq, wk, bk: _proj(x, wq, bq) @ _proj(x, wk, bk).T, r"`k\.T`"),
        (
            "scaled",
            lambda x, wq, bq, wk, bk: _proj(x, wq, bq) @ _proj(x, wk, bk).mT / math.sqrt(wq.shape[0]),
            r"scaled by √d_k",
        ),
        ("no key bias", lambda x, wq, bq, wk, bk: _proj(x, wq, bq) @ (x @ wk.T).mT, r"key bias left out"),
        ("x @ W", lambda x, wq, bq, wk, bk: (x @ wq + bq) @ (x @ wk + bk).mT, r"without a transpose"),
        ("softmax", lambda x, wq, bq, wk, bk: torch.softmax(_proj(x, wq, bq) @ _proj(x, wk, bk).mT, -1), r"softmax"),
        (
            "float32",
            lambda x, wq, bq, wk, bk: (
                _proj(x.float(), wq.float(), bq.float()) @ _proj(x.float(), wk.float(), bk.float()).mT
            ),
            r"float32",
        ),
        ("qT k", lambda x, wq, bq, wk, bk: _proj(x, wq, bq).mT @ _proj(x, wk, bk), r"over the tokens"),
        ("biases swapped", lambda x, wq, bq, wk, bk: _proj(x, wq, bk) @ _proj(x, wk, bq).mT, r"biases swapped"),
        ("weight on the left", lambda x, wq, bq, wk, bk: (wq @ x.mT).mT @ (wk @ x.mT), r"biases left out"),
        ("keys first", lambda x, wq, bq, wk, bk: _proj(x, wk, bk) @ _proj(x, wq, bq).mT, r"keys times queries"),
    ],
}
RIGHT = {
    "linear_scores": [
        lambda x, wq, bq, wk, bk: bc.attention_scores(F.linear(x, wq, bq), F.linear(x, wk, bk)),
        lambda x, wq, bq, wk, bk: torch.einsum("...id,...jd->...ij", F.linear(x, wq, bq), F.linear(x, wk, bk)),
    ],
}

# --- 01 attention_scores: the prompt now says that `@` passes -----------------------------------

WRONG["attention_scores"] = [
    ("broadcast, summed over the keys", lambda q, k: (q[..., :, None, :] * k[..., None, :, :]).sum(-2), r"shape"),
    (
        "broadcast, axes swapped",
        lambda q, k: (q[..., None, :, :] * k[..., :, None, :]).sum(-1),
        r"transposed|keys times queries",
    ),
    ("scaled", lambda q, k: (q[..., :, None, :] * k[..., None, :, :]).sum(-1) / math.sqrt(q.shape[-1]), r"√d_k"),
    ("mean instead of sum", lambda q, k: (q[..., :, None, :] * k[..., None, :, :]).mean(-1), r"times|factor|1/"),
    ("k.T", lambda q, k: q @ k.T, r"`k\.T`"),
    ("transpose(0, 1)", lambda q, k: q @ k.transpose(0, 1), r"transpose\(0, 1\)"),
]
RIGHT["attention_scores"] = [
    lambda q, k: (q.unsqueeze(-2) * k.unsqueeze(-3)).sum(dim=-1),
    lambda q, k: q @ k.transpose(-2, -1),
]


# --- 02 flexible_attention --------------------------------------------------------------------


def _attend(scores, v):
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def _scaled(q, k, scale):
    return q @ k.mT * (q.shape[-1] ** -0.5 if scale is None else scale)


def _fl_divides(q, k, v, mask=None, scale=None):
    scale = scale or 1 / math.sqrt(q.shape[-1])
    scores = q @ k.mT / scale
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min) if mask.dtype == torch.bool else scores + mask
    return _attend(scores, v)


def _fl_float_as_bool(q, k, v, mask=None, scale=None):
    scores = _scaled(q, k, scale)
    if mask is not None:
        scores = scores.masked_fill(~mask.bool(), torch.finfo(scores.dtype).min)
    return _attend(scores, v)


def _fl_equal_zero_everywhere(q, k, v, mask=None, scale=None):
    scores = _scaled(q, k, scale)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, torch.finfo(scores.dtype).min)
    return _attend(scores, v)


def _fl_always_added(q, k, v, mask=None, scale=None):
    scores = _scaled(q, k, scale)
    return _attend(scores if mask is None else scores + mask, v)


def _fl_default_over_d_k(q, k, v, mask=None, scale=None):
    scores = q @ k.mT * (1 / q.shape[-1] if scale is None else scale)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min) if mask.dtype == torch.bool else scores + mask
    return _attend(scores, v)


def _fl_minus_1e9(q, k, v, mask=None, scale=None):
    scores = _scaled(q, k, scale)
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9) if mask.dtype == torch.bool else scores + mask
    return _attend(scores, v)


def _fl_float_multiplied(q, k, v, mask=None, scale=None):
    scores = _scaled(q, k, scale)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min) if mask.dtype == torch.bool else scores * mask
    return _attend(scores, v)


def _fl_in_float32(q, k, v, mask=None, scale=None):
    scores = _scaled(q.float(), k.float(), scale)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else scores + mask.float()
    return _attend(scores, v.float())


def _fl_notebook_02(q, k, v, mask=None, scale=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return _attend(scores, v)


def _fl_right_masked_fill(q, k, v, mask=None, scale=None):
    scale = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    bias = torch.zeros((), dtype=q.dtype)
    if mask is not None and mask.dtype is torch.bool:
        bias = torch.where(mask, 0.0, torch.finfo(q.dtype).min).to(q.dtype)
    elif mask is not None:
        bias = mask
    weights = torch.softmax(torch.matmul(q, k.mT) * scale + bias, dim=-1)
    return torch.matmul(weights, v), weights


def _fl_right_minus_inf(q, k, v, mask=None, scale=None):
    scores = _scaled(q, k, scale)
    if mask is not None:
        scores = scores.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else scores + mask
    return _attend(scores, v)


WRONG["flexible_attention"] = [
    ("notebook 02's answer", _fl_notebook_02, r"no `scale`, and a boolean mask assumed"),
    ("divides by scale", _fl_divides, r"divided by `scale`"),
    ("float mask read as bool", _fl_float_as_bool, r"float mask read as a boolean"),
    ("== 0 everywhere", _fl_equal_zero_everywhere, r"float mask read as a boolean"),
    ("every mask added", _fl_always_added, r"boolean mask added"),
    ("default 1/d_k", _fl_default_over_d_k, r"default scale of 1/d_k"),
    ("-1e9", _fl_minus_1e9, r"float16"),
    ("float mask multiplied", _fl_float_multiplied, r"float mask multiplied"),
    ("computed in float32", _fl_in_float32, r"float32"),
]
RIGHT["flexible_attention"] = [_fl_right_masked_fill, _fl_right_minus_inf]


# --- 03 mask_from_torch, key_padding_mask, padding_mask ------------------------------------------


def _tm_lengths(attn_mask):
    blocked = attn_mask if attn_mask.dtype == torch.bool else attn_mask != 0
    return torch.arange(attn_mask.shape[-1]) < (~blocked).sum(-1)[..., None]


WRONG["mask_from_torch"] = [
    ("isfinite", lambda m: ~m if m.dtype == torch.bool else torch.isfinite(m), r"only -inf read as blocked"),
    ("!= -inf", lambda m: ~m if m.dtype == torch.bool else m != float("-inf"), r"only -inf read as blocked"),
    ("no inversion", lambda m: m if m.dtype == torch.bool else m == 0, r"not inverted"),
    ("~ everywhere", lambda m: ~m, r"`~` on a float mask"),
    ("> -1e9", lambda m: ~m if m.dtype == torch.bool else m > -1e9, r"float16's -65504"),
    ("float result", lambda m: (~m).float() if m.dtype == torch.bool else (m == 0).float(), r"float result"),
    ("lengths assumed", _tm_lengths, r"padding assumed to sit at the end"),
    ("bool() on floats", lambda m: ~m if m.dtype == torch.bool else m.bool(), r"`\.bool\(\)` on a float mask"),
    ("< 0", lambda m: ~m if m.dtype == torch.bool else m < 0, r"inverted|`\.bool\(\)`"),
]
RIGHT["mask_from_torch"] = [
    lambda m: ~m if m.dtype == torch.bool else m == 0,
    lambda m: m.logical_not() if m.dtype is torch.bool else m > torch.finfo(m.dtype).min / 2,
    lambda m: ~m.bool(),
]

WRONG["key_padding_mask"] = [
    ("(1 - m).bool()", lambda m: (1 - m).bool(), r"raises on this course's bool mask", r"stays long"),
    ("1 - m", lambda m: 1 - m, r"`1 - attention_mask`"),
    ("~m.bool() on the length", lambda m: torch.arange(m.shape[-1]) >= m.sum(-1, keepdim=True), r"padding assumed"),
]
RIGHT["key_padding_mask"] = [lambda m: m == 0, lambda m: ~m.bool(), lambda m: m.logical_not()]

RIGHT["padding_mask"] = [
    lambda lengths, max_len=None: torch.arange(int(lengths.max()) if max_len is None else max_len) < lengths[:, None],
]


# --- 04 sinusoidal_positions ------------------------------------------------------------------


def _angles(position_ids, d_model, base, two_i=None):
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32) if two_i is None else two_i
    return position_ids.float()[..., None] * base ** (-two_i / d_model)


def _interleaved(angle, d_model):
    return torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(-2)[..., :d_model]


def _sp_notebook_table(position_ids, d_model, base=10000.0):
    angle = position_ids.float()[:, None] * base ** (-torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)
    table = torch.zeros(len(position_ids), d_model)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return table


def _sp_odd_unhandled(position_ids, d_model, base=10000.0):
    angle = _angles(position_ids, d_model, base)
    table = torch.zeros(*position_ids.shape, d_model)
    table[..., 0::2] = angle.sin()
    table[..., 1::2] = angle.cos()
    return table


WRONG["sinusoidal_positions"] = [
    ("the notebook's table, 1-D only", _sp_notebook_table, r"axis 0"),
    (
        "the package's table, counted",
        lambda p, d, base=10000.0: bc.sinusoidal_position_encoding(p.shape[-1], d).expand(*p.shape, d),
        r"counted 0, 1, 2",
    ),
    (
        "the package's table, indexed",
        lambda p, d, base=10000.0: bc.sinusoidal_position_encoding(int(p.max()) + 1, d)[p],
        r"base fixed at 10000",
    ),
    (
        "i for 2i",
        lambda p, d, base=10000.0: _interleaved(_angles(p, d, base, torch.arange((d + 1) // 2).float()), d),
        r"i instead of 2i",
    ),
    (
        "halves",
        lambda p, d, base=10000.0: torch.cat([_angles(p, d, base).sin(), _angles(p, d, base).cos()], -1)[..., :d],
        r"all sines before all cosines",
    ),
    ("odd width unhandled", _sp_odd_unhandled, r"even widths only|odd"),
    (
        "sin and cos swapped",
        lambda p, d, base=10000.0: torch.stack([_angles(p, d, base).cos(), _angles(p, d, base).sin()], -1).flatten(-2)[
            ..., :d
        ],
        r"sin and cos swapped",
    ),
    ("positions from 1", lambda p, d, base=10000.0: _interleaved(_angles(p + 1, d, base), d), r"positions from 1"),
]
RIGHT["sinusoidal_positions"] = [
    lambda p, d, base=10000.0: _interleaved(_angles(p, d, base), d),
    lambda p, d, base=10000.0: torch.where(
        torch.arange(d) % 2 == 0,
        (p[..., None].float() * base ** (-(torch.arange(d) - torch.arange(d) % 2).float() / d)).sin(),
        (p[..., None].float() * base ** (-(torch.arange(d) - torch.arange(d) % 2).float() / d)).cos(),
    ),
]


# --- 05 torch_multi_head_attention, split_fused_qkv, split_heads, multi_head_attention -----------


def _tmha(split="view", merge="transpose", mask="flip", scale="d_head", out_t=True, out_bias=True, in_bias=True):
    def forward(x, w, b, w_o, b_o, heads, key_padding_mask=None):
        batch, seq, d_model = x.shape
        d_head = d_model // heads
        q, k, v = (x @ w.T + (b if in_bias else 0)).chunk(3, dim=-1)

        def cut(t):
            if split == "reshape":
                return t.reshape(batch, heads, seq, d_head)
            return t.view(batch, seq, heads, d_head).transpose(1, 2)

        q, k, v = cut(q), cut(k), cut(v)
        scores = q @ k.mT / math.sqrt(d_head if scale == "d_head" else d_model)
        if key_padding_mask is not None and mask != "ignored":
            blocked = key_padding_mask[:, None, None, :]
            scores = scores.masked_fill(blocked if mask == "flip" else ~blocked, torch.finfo(scores.dtype).min)
        context = scores.softmax(-1) @ v
        if merge == "reshape":
            context = context.reshape(batch, seq, d_model)
        else:
            context = context.transpose(1, 2).reshape(batch, seq, d_model)
        return context @ (w_o.T if out_t else w_o) + (b_o if out_bias else 0)

    return forward


def _tmha_module(x, w, b, w_o, b_o, heads, key_padding_mask=None):
    module = torch.nn.MultiheadAttention(x.shape[-1], heads, batch_first=True).eval()
    with torch.no_grad():
        module.in_proj_weight.copy_(w)
        module.in_proj_bias.copy_(b)
        module.out_proj.weight.copy_(w_o)
        module.out_proj.bias.copy_(b_o)
        return module(x, x, x, key_padding_mask=key_padding_mask, need_weights=False)[0]


def _tmha_einsum(x, w, b, w_o, b_o, heads, key_padding_mask=None):
    d_model = x.shape[-1]
    d_head = d_model // heads
    w_q, w_k, w_v = w.split(d_model)
    b_q, b_k, b_v = b.split(d_model)

    def cut(t):
        return t.unflatten(-1, (heads, d_head)).permute(0, 2, 1, 3)

    q, k, v = cut(x @ w_q.T + b_q), cut(x @ w_k.T + b_k), cut(x @ w_v.T + b_v)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / d_head**0.5
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    out = torch.einsum("bhqk,bhkd->bhqd", scores.softmax(-1), v).permute(0, 2, 1, 3).flatten(-2)
    return out @ w_o.T + b_o


def _tmha_pieces(x, w, b, w_o, b_o, heads, key_padding_mask=None):
    q, k, v = split_fused_qkv(F.linear(x, w, b), heads)
    mask = None if key_padding_mask is None else ~key_padding_mask[:, None, None, :]
    context, _ = bc.scaled_dot_product_attention(q, k, v, mask)
    return F.linear(bc.merge_heads(context), w_o, b_o)


_PLAIN = r"without the transpose|another order"
WRONG["torch_multi_head_attention"] = [
    ("reshape without transpose, both ways", _tmha(split="reshape", merge="reshape"), _PLAIN),
    ("reshape without transpose, split only", _tmha(split="reshape"), _PLAIN),
    ("mask used as 'may attend'", _tmha(mask="not flipped"), r"used as 'may attend'"),
    ("sqrt d_model", _tmha(scale="d_model"), r"√d_model"),
    ("out_proj not transposed", _tmha(out_t=False), r"out_proj's weight not transposed"),
    ("no out_proj bias", _tmha(out_bias=False), r"out_proj's bias left out"),
    ("mask ignored", _tmha(mask="ignored"), r"key_padding_mask ignored"),
    ("merge without transpose", _tmha(merge="reshape"), r"merged without the transpose"),
    ("no in_proj bias", _tmha(in_bias=False), r"in_proj_bias left out"),
]
RIGHT["torch_multi_head_attention"] = [_tmha_module, _tmha_einsum, _tmha_pieces]

WRONG["split_fused_qkv"] = [
    (
        "reshape without transpose",
        lambda qkv, h: tuple(p.reshape(qkv.shape[0], h, qkv.shape[1], -1) for p in qkv.chunk(3, -1)),
        r"reshape to \(batch, heads, seq, d_head\) without the transpose",
    ),
]
WRONG["split_heads"] = [
    (
        "reshape without transpose",
        lambda x, h: x.reshape(x.shape[0], h, x.shape[1], -1),
        r"\(batch, heads, seq, d_head\)",
    ),
]


def _mha_plain(x, w_q, w_k, w_v, w_o, heads, mask=None):
    batch, seq, d_model = x.shape
    q, k, v = ((x @ w).reshape(batch, heads, seq, d_model // heads) for w in (w_q, w_k, w_v))
    context, _ = bc.scaled_dot_product_attention(q, k, v, mask)
    return context.reshape(batch, seq, d_model) @ w_o


WRONG["multi_head_attention"] = [("reshape without transpose", _mha_plain, r"without the transpose")]


# --- 06 parallel_layer, pre_ln_stack, post_ln_layer ---------------------------------------------


def _par_right_inline(x, attention, feed_forward, ln_weight, ln_bias, eps=1e-12):
    mean = x.mean(-1, keepdim=True)
    variance = x.var(-1, keepdim=True, unbiased=False)
    h = (x - mean) / torch.sqrt(variance + eps) * ln_weight + ln_bias
    return sum([x, attention(h), feed_forward(h)])


WRONG["parallel_layer"] = [
    (
        "one after the other",
        lambda x, a, f, w, b, eps=1e-12: (lambda h: h + f(_ln(h, w, b, eps)))(x + a(_ln(x, w, b, eps))),
        r"one after the other",
    ),
    ("post-LN", lambda x, a, f, w, b, eps=1e-12: _ln(x + a(x) + f(x), w, b, eps), r"Post-LN parallel"),
    ("ffn reads x", lambda x, a, f, w, b, eps=1e-12: x + a(_ln(x, w, b, eps)) + f(x), r"feed-forward block fed x"),
    (
        "eps not passed",
        lambda x, a, f, w, b, eps=1e-12: x + a(bc.layer_norm(x, w, b)) + f(bc.layer_norm(x, w, b)),
        r"`eps` not passed on",
    ),
    (
        "output normalised",
        lambda x, a, f, w, b, eps=1e-12: _ln(x + a(_ln(x, w, b, eps)) + f(_ln(x, w, b, eps)), w, b, eps),
        r"output normalised",
    ),
    ("no residual", lambda x, a, f, w, b, eps=1e-12: a(_ln(x, w, b, eps)) + f(_ln(x, w, b, eps)), r"no residual"),
    (
        "no gamma and beta",
        lambda x, a, f, w, b, eps=1e-12: x + a(_ln(x, None, None, eps)) + f(_ln(x, None, None, eps)),
        r"without its gamma and beta",
    ),
    (
        "residual from LN(x)",
        lambda x, a, f, w, b, eps=1e-12: (lambda n: n + a(n) + f(n))(_ln(x, w, b, eps)),
        r"residual taken from the normalised",
    ),
]
RIGHT["parallel_layer"] = [
    lambda x, a, f, w, b, eps=1e-12: (lambda n: x + a(n) + f(n))(_ln(x, w, b, eps)),
    _par_right_inline,
]


def _stack(layer="pre", final="once", ln2="ln2", residual="stream", keep=slice(None), final_eps=True, reads="stream"):
    def forward(x, layers, final_weight, final_bias, eps=1e-12):
        stream = x
        for attention, feed_forward, w1, b1, w2, b2 in layers[keep]:
            second = (w2, b2) if ln2 == "ln2" else (w1, b1)
            h = x if reads == "x" else stream
            if layer == "post":
                h = _ln(h + attention(h), w1, b1, eps)
                stream = _ln(h + feed_forward(h), *second, eps)
            else:
                n = _ln(h, w1, b1, eps)
                h = (n if residual == "normalised" else h) + attention(n)
                n = _ln(h, *second, eps)
                stream = (n if residual == "normalised" else h) + feed_forward(n)
            if final == "every layer":
                stream = _ln(stream, final_weight, final_bias, eps)
        if final == "once":
            return _ln(stream, final_weight, final_bias, eps if final_eps else 1e-5)
        if final == "last ln2":
            return _ln(stream, *layers[-1][4:], eps)
        return stream

    return forward


def _stack_right_pieces(x, layers, final_weight, final_bias, eps=1e-12):
    for attention, feed_forward, w1, b1, w2, b2 in layers:
        x = x + attention(bc.layer_norm(x, w1, b1, eps))
        x = x + feed_forward(bc.layer_norm(x, w2, b2, eps))
    return bc.layer_norm(x, final_weight, final_bias, eps)


def _stack_right_reduce(x, layers, final_weight, final_bias, eps=1e-12):
    def layer(h, pieces):
        attention, feed_forward, w1, b1, w2, b2 = pieces
        h = h + attention(F.layer_norm(h, h.shape[-1:], w1, b1, eps))
        return h + feed_forward(F.layer_norm(h, h.shape[-1:], w2, b2, eps))

    return F.layer_norm(functools.reduce(layer, layers, x), x.shape[-1:], final_weight, final_bias, eps)


WRONG["pre_ln_stack"] = [
    ("no final LayerNorm", _stack(final="none"), r"final LayerNorm missing"),
    ("final LayerNorm every layer", _stack(final="every layer"), r"after every layer"),
    ("ln1 twice", _stack(ln2="ln1"), r"`ln1_\*` used twice"),
    ("residual from LN(x)", _stack(residual="normalised"), r"residual taken from the normalised"),
    ("final LayerNorm at PyTorch's eps", _stack(final_eps=False), r"eps"),
    ("last layer left out", _stack(keep=slice(None, -1)), r"last layer left out"),
    ("last ln2 as the final one", _stack(final="last ln2"), r"`ln2_\*` used as the final"),
    ("Post-LN layers", _stack(layer="post"), r"Post-LN"),
    ("every layer reads x", _stack(reads="x"), r"fed the stack's input"),
]
RIGHT["pre_ln_stack"] = [_stack_right_pieces, _stack_right_reduce]


def _post(first_eps=None, second_from="h", attention_reads="x", affine=True):
    def forward(x, attention, feed_forward, w1, b1, w2, b2, eps=1e-12):
        if not affine:
            w1 = b1 = w2 = b2 = None
        reads = _ln(x, w1, b1, eps) if attention_reads == "normalised" else x
        h = _ln(x + attention(reads), w1, b1, eps if first_eps is None else first_eps)
        return _ln((h if second_from == "h" else x) + feed_forward(h), w2, b2, eps)

    return forward


WRONG["post_ln_layer"] = [
    ("first LayerNorm at PyTorch's eps", _post(first_eps=1e-5), r"default eps in the first LayerNorm"),
    ("second residual from x", _post(second_from="x"), r"residual taken from x"),
    ("attention fed LN1(x)", _post(attention_reads="normalised"), r"attention fed LN1\(x\)"),
    ("no gamma and beta", _post(affine=False), r"without their gamma and beta"),
    (
        "normalised before adding",
        lambda x, a, f, w1, b1, w2, b2, eps=1e-12: (lambda h: h + _ln(f(h), w2, b2, eps))(x + _ln(a(x), w1, b1, eps)),
        r"normalised before the residual",
    ),
    ("parallel", lambda x, a, f, w1, b1, w2, b2, eps=1e-12: _ln(x + a(x) + f(x), w2, b2, eps), r"side by side"),
]


def _pre(first_norm=True, second_norm=True, ffn_reads="h", eps_of=None):
    def forward(x, attention, feed_forward, w1, b1, w2, b2, eps=1e-12):
        eps = eps if eps_of is None else eps_of
        h = x + attention(_ln(x, w1, b1, eps) if first_norm else x)
        source = h if ffn_reads == "h" else x
        return h + feed_forward(_ln(source, w2, b2, eps) if second_norm else source)

    return forward


WRONG["pre_ln_layer"] = [
    ("attention without LN1", _pre(first_norm=False), r"attention fed x without LN1"),
    ("feed-forward without LN2", _pre(second_norm=False), r"fed h without LN2"),
    ("feed-forward reads LN2(x)", _pre(ffn_reads="x"), r"fed the layer's input"),
    ("PyTorch's eps", _pre(eps_of=1e-5), r"default eps"),
]


def _mlm(activation=F.gelu, norm_first=False, bias=True, eps_of=None, transpose=True):
    def forward(hidden, dense_weight, dense_bias, ln_weight, ln_bias, word_embeddings, decoder_bias, eps=1e-12):
        eps = eps if eps_of is None else eps_of
        h = hidden @ (dense_weight.T if transpose else dense_weight) + dense_bias
        h = activation(_ln(h, ln_weight, ln_bias, eps)) if norm_first else _ln(activation(h), ln_weight, ln_bias, eps)
        return h @ word_embeddings.T + (decoder_bias if bias else 0)

    return forward


WRONG["mlm_head"] = [
    ("GELU's tanh form", _mlm(activation=lambda t: F.gelu(t, approximate="tanh")), r"tanh approximation"),
    ("LayerNorm first, no decoder bias", _mlm(norm_first=True, bias=False), r"LayerNorm before the GELU"),
    ("eps not passed", _mlm(eps_of=1e-12), r"`eps` not passed on"),
    ("ReLU", _mlm(activation=torch.relu), r"ReLU"),
    ("dense not transposed, no bias", _mlm(transpose=False, bias=False), r"dense weight not transposed"),
]
RIGHT["mlm_head"] = [
    lambda h, dw, db, lw, lb, we, dbias, eps=1e-12: F.linear(_ln(F.gelu(F.linear(h, dw, db)), lw, lb, eps), we, dbias)
]


# --- 07 count_parameters, hf_to_ours, bert_embeddings -------------------------------------------


def _count(config, embedding_norm=True, token_types=True):
    d, d_ff = config.hidden_size, config.intermediate_size
    tables = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size * token_types) * d
    layer = 4 * (d * d + d) + (d * d_ff + d_ff) + (d_ff * d + d) + 4 * d
    return tables + 2 * d * embedding_norm + config.num_hidden_layers * layer + d * d + d


WRONG["count_parameters"] = [
    (
        "no embedding LayerNorm",
        lambda config: _count(config, embedding_norm=False),
        r"as many as the token type embeddings or the embedding LayerNorm|embedding LayerNorm",
        r"exactly the token type embeddings",
    ),
]
RIGHT["count_parameters"] = [lambda config: _count(config)]


_RENAMES = (  # notebook 07's solution: Hugging Face -> ours; of two patterns that overlap, the longer first
    ("embeddings.LayerNorm.", "embeddings.layer_norm."),
    (".attention.self.", ".attention."),
    (".attention.output.dense.", ".attention.output."),
    (".attention.output.LayerNorm.", ".attention_norm."),
    (".intermediate.dense.", ".feed_forward.intermediate."),
    (".output.dense.", ".feed_forward.output."),
    (".output.LayerNorm.", ".output_norm."),
    ("cls.predictions.transform.dense.", "mlm.dense."),
    ("cls.predictions.transform.LayerNorm.", "mlm.layer_norm."),
    ("cls.predictions.bias", "mlm.bias"),
    ("cls.seq_relationship.", "nsp."),
)


def _rename_without(missing):
    """Notebook 07's solution with one pair of its table left out (a table a learner typed, one row short)."""

    def rename(key, prefixed=False):
        key = key.removeprefix("bert.")
        if key.endswith(".gamma"):
            key = key.removesuffix("gamma") + "weight"
        if key.endswith(".beta"):
            key = key.removesuffix("beta") + "bias"
        if key in ("embeddings.position_ids", "cls.predictions.decoder.weight", "cls.predictions.decoder.bias"):
            return None
        key = key.replace("encoder.layer.", "encoder.layers.")
        for theirs, ours in _RENAMES:
            if theirs != missing and theirs in key:
                key = key.replace(theirs, ours)
                break
        head = key.startswith(("mlm.", "nsp."))
        return "bert." + key if prefixed and not head else key

    return rename


WRONG["hf_to_ours"] = [
    (f"table without {missing}", _rename_without(missing), r"expected|attention's LayerNorm") for missing, _ in _RENAMES
]
RIGHT["hf_to_ours"] = [_rename_without(None)]


def _embed(positions="table", types=True, norm="sum", eps_given=True):
    def forward(
        input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12, position_ids=None
    ):
        seq = input_ids.shape[1]
        ids = torch.arange(seq) if position_ids is None else position_ids
        pos = {"table": position[ids], "none": 0, "from 1": position[ids + 1 if position_ids is None else ids]}[
            positions
        ]
        summed = word[input_ids] + pos + (token_type[token_type_ids] if types else 0)
        if norm == "none":
            return summed
        if norm == "plain":
            return F.layer_norm(summed, summed.shape[-1:], eps=eps)
        return F.layer_norm(summed, summed.shape[-1:], ln_weight, ln_bias, eps if eps_given else 1e-5)

    return forward


WRONG["bert_embeddings"] = [
    ("no gamma and beta", _embed(norm="plain"), r"without its gamma and beta"),
    (
        "positions from 1 and no token types",
        _embed(positions="from 1", types=False),
        r"from 1.*token type|token type.*from 1",
    ),
    (
        "no LayerNorm, no positions",
        _embed(positions="none", norm="none"),
        r"no position embeddings and no LayerNorm|no LayerNorm",
    ),
]
RIGHT["bert_embeddings"] = [_embed()]


# --- the exercises with the fewest realistic answers: more of them -------------------------------

_MOVED = r"axes in another order"
_SHUFFLED = r"exactly the right numbers in another arrangement"


def _view(t, heads):
    return t.view(t.shape[0], t.shape[1], heads, t.shape[2] // heads)  # (batch, seq, heads, d_head)


WRONG["split_heads"] += [
    ("the last two axes transposed", lambda x, h: _view(x, h).transpose(-1, -2), _MOVED),
    ("permute(0, 2, 3, 1)", lambda x, h: _view(x, h).permute(0, 2, 3, 1), _MOVED),
    ("d_head and heads swapped in the view", lambda x, h: x.view(*x.shape[:2], -1, h).transpose(1, 2), _SHUFFLED),
    ("no transpose at all", lambda x, h: x.reshape(*x.shape[:2], h, -1), r"without the transpose"),
    ("heads stacked in front of the batch", lambda x, h: torch.stack(x.chunk(h, dim=-1)), _MOVED),
    ("transpose(0, 2)", lambda x, h: _view(x, h).transpose(0, 2), _MOVED),
    ("interleaved by unflatten", lambda x, h: x.unflatten(-1, (-1, h)).permute(0, 3, 1, 2), r"interleaved"),
]
RIGHT["split_heads"] = [
    lambda x, h: torch.stack(x.chunk(h, dim=-1), dim=1),
    lambda x, h: x.unflatten(-1, (h, -1)).permute(0, 2, 1, 3),
    lambda x, h: torch.einsum("bshd->bhsd", x.reshape(*x.shape[:2], h, -1)),
]


def _thirds(qkv):
    return qkv.chunk(3, dim=-1)


WRONG["split_fused_qkv"] += [
    (
        "returned as k, q, v",
        lambda qkv, h: (lambda q, k, v: (k, q, v))(*(_view(p, h).transpose(1, 2) for p in _thirds(qkv))),
        r"in the order \(k, q, v\)",
    ),
    ("transpose(1, 3)", lambda qkv, h: tuple(_view(p, h).transpose(1, 3) for p in _thirds(qkv)), _MOVED),
    ("one stacked tensor", lambda qkv, h: qkv.view(*qkv.shape[:2], 3, h, -1).permute(2, 0, 3, 1, 4), r"a tuple"),
    (
        "interleaved heads",
        lambda qkv, h: tuple(p.view(*p.shape[:2], -1, h).permute(0, 3, 1, 2) for p in _thirds(qkv)),
        _SHUFFLED,
    ),
    (
        "the first third three times",
        lambda qkv, h: tuple(_view(qkv[..., : qkv.shape[-1] // 3], h).transpose(1, 2) for _ in range(3)),
        r"It equals the right `q`",
    ),
    (
        "a per-head layout (Megatron's)",
        lambda qkv, h: tuple(qkv.view(*qkv.shape[:2], h, 3, -1).permute(3, 0, 2, 1, 4)),
        r"heads cut before q, k and v",
    ),
]
RIGHT["split_fused_qkv"] = [
    lambda qkv, h: tuple(qkv.unflatten(-1, (3, h, -1)).permute(2, 0, 3, 1, 4)),
    lambda qkv, h: tuple(p.unflatten(-1, (h, -1)).transpose(1, 2) for p in qkv.split(qkv.shape[-1] // 3, dim=-1)),
    lambda qkv, h: tuple(qkv.reshape(qkv.shape[0], qkv.shape[1], 3, h, -1).permute(2, 0, 3, 1, 4)),
]


def _mha(split="view", merge="transpose", scale="d_head", mask="fill", output="w_o"):
    def forward(x, w_q, w_k, w_v, w_o, num_heads, mask_=None):
        batch, seq, d_model = x.shape
        d_head = d_model // num_heads

        def cut(t):  # (batch, seq, d_model) -> (batch, heads, seq, d_head)
            if split == "reshape":
                return t.reshape(batch, num_heads, seq, d_head)
            if split == "interleaved":
                return t.view(batch, seq, d_head, num_heads).permute(0, 3, 1, 2)
            return t.view(batch, seq, num_heads, d_head).transpose(1, 2)

        q, k, v = cut(x @ w_q), cut(x @ w_k), cut(x @ w_v)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d_model if scale == "d_model" else d_head)
        if mask_ is not None and mask == "fill":
            scores = scores.masked_fill(~mask_, torch.finfo(scores.dtype).min)
        elif mask_ is not None and mask == "added":
            scores = scores + mask_
        elif mask_ is not None and mask == "multiplied":
            scores = scores * mask_
        elif mask_ is not None and mask == "inverted":
            scores = scores.masked_fill(mask_, -1e9)
        weights = scores.softmax(-1)
        if mask_ is not None and mask == "after softmax":
            weights = weights * mask_
        context = weights @ v  # (batch, heads, seq, d_head)
        merged = context.reshape(batch, seq, d_model) if merge == "reshape" else context.transpose(1, 2).flatten(2)
        return merged @ (w_o.T if output == "w_o.T" else w_o)

    return forward


def _mha_right_per_head(x, w_q, w_k, w_v, w_o, num_heads, mask=None):
    d_head = x.shape[-1] // num_heads
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    heads = []
    for h in range(num_heads):
        part = slice(h * d_head, (h + 1) * d_head)
        scores = q[..., part] @ k[..., part].mT / math.sqrt(d_head)  # (batch, seq, seq)
        if mask is not None:
            scores = scores.masked_fill(~mask.reshape(-1, *mask.shape[-2:]), float("-inf"))
        heads.append(scores.softmax(-1) @ v[..., part])
    return torch.cat(heads, dim=-1) @ w_o


WRONG["multi_head_attention"] += [
    ("reshape without transpose, split only", _mha(split="reshape"), r"without the transpose"),
    ("merge without transpose", _mha(merge="reshape"), r"merging heads without the transpose"),
    ("√d_model", _mha(scale="d_model"), r"√d_model"),
    ("bool mask added", _mha(mask="added"), r"boolean mask added"),
    ("scores multiplied by the mask", _mha(mask="multiplied"), r"multiplied by the mask"),
    ("mask after the softmax", _mha(mask="after softmax"), r"after the softmax"),
    ("w_o.T", _mha(output="w_o.T"), r"W_O transposed"),
    ("interleaved heads", _mha(split="interleaved"), r"interleaved heads"),
    ("mask inverted, -1e9", _mha(mask="inverted"), r"mask inverted"),
]
RIGHT["multi_head_attention"] = [
    lambda x, wq, wk, wv, wo, h, m=None: (
        bc.merge_heads(bc.scaled_dot_product_attention(*(bc.split_heads(x @ w, h) for w in (wq, wk, wv)), m)[0]) @ wo
    ),
    _mha_right_per_head,
]


def _count_parts(config, embedding_norm=True, pooler=True, pooler_bias=True, norms=2, norm_size=2, qkvo=4, ffn_bias=2):
    d, d_ff, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    tables = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * d
    ffn = d * d_ff + d_ff * d + (d_ff if ffn_bias > 0 else 0) + (d if ffn_bias > 1 else 0)
    layer = qkvo * (d * d + d) + ffn + norms * norm_size * d
    return tables + norm_size * d * embedding_norm + layers * layer + pooler * (d * d + d * pooler_bias)


WRONG["count_parameters"] += [
    ("LayerNorm counted as hidden, not 2 x hidden", lambda c: _count_parts(c, norm_size=1), r"betas \(or the gammas\)"),
    ("the pooler without its bias", lambda c: _count_parts(c, pooler_bias=False), r"pooler's bias"),
    ("the FFN's output bias left out", lambda c: _count_parts(c, ffn_bias=1), r"feed-forward output bias"),
    (
        "type_vocab_size assumed to be 2",
        lambda c: _count_parts(c) - (c.type_vocab_size - 2) * c.hidden_size,
        r"token type rows past two",
    ),
    ("a float", lambda c: float(_count_parts(c)), r"a float; expected an int"),
    (
        "no embedding LayerNorm, no pooler",
        lambda c: _count_parts(c, embedding_norm=False, pooler=False),
        r"embedding LayerNorm and the pooler",
    ),
    ("three LayerNorms a layer", lambda c: _count_parts(c, norms=3), r"extra .* LayerNorm"),
    ("Q, K, V only", lambda c: _count_parts(c, qkvo=3), r"output projection W_O"),
    ("no pooler", lambda c: _count_parts(c, pooler=False), r"pooler"),
]
RIGHT["count_parameters"] += [
    lambda c: (
        lambda d, f, n: (
            (c.vocab_size + c.max_position_embeddings + c.type_vocab_size + 2) * d
            + n * (4 * d * d + 2 * d * f + 9 * d + f)
            + d * d
            + d
        )
    )(c.hidden_size, c.intermediate_size, c.num_hidden_layers),
]


def _positions(lengths, max_len):
    return torch.arange(int(lengths.max()) if max_len is None else max_len)


WRONG["padding_mask"] = [
    (">= instead of <", lambda lengths, max_len=None: _positions(lengths, max_len) >= lengths[:, None], r"inverted"),
    (
        "an int mask",
        lambda lengths, max_len=None: (_positions(lengths, max_len) < lengths[:, None]).long(),
        r"right values but dtype torch\.int64",
    ),
    (
        "a float mask",
        lambda lengths, max_len=None: (_positions(lengths, max_len) < lengths[:, None]).float(),
        r"right values but dtype torch\.float32",
    ),
    (
        "positions from 1",
        lambda lengths, max_len=None: _positions(lengths, max_len) + 1 < lengths[:, None],
        r"positions counted from 1",
    ),
    (
        "`max_len or 0`",
        lambda lengths, max_len=None: torch.arange(max_len or 0) < lengths[:, None],
        r"an optional argument is None",
    ),
    (
        "the batch size as the default width",
        lambda lengths, max_len=None: torch.arange(len(lengths) if max_len is None else max_len) < lengths[:, None],
        r"an optional argument is None",
    ),
    (
        "positions as a column",
        lambda lengths, max_len=None: _positions(lengths, max_len)[:, None] < lengths,
        r"axes swapped",
    ),
    (
        "a loop with n - 1",
        lambda lengths, max_len=None: torch.stack([_positions(lengths, max_len) < n - 1 for n in lengths]),
        r"positions counted from 1|last token marked as padding",
    ),
]
RIGHT["padding_mask"] += [
    lambda lengths, max_len=None: torch.stack(
        [
            torch.cat(
                [
                    torch.ones(int(n), dtype=torch.bool),
                    torch.zeros((int(lengths.max()) if max_len is None else max_len) - int(n), dtype=torch.bool),
                ]
            )
            for n in lengths
        ]
    ),
    lambda lengths, max_len=None: (
        torch.arange(lengths.max() if max_len is None else max_len).expand(len(lengths), -1).lt(lengths.unsqueeze(1))
    ),
]

WRONG["key_padding_mask"] += [
    ("== 1", lambda m: m == 1, r"not inverted"),
    ("~ on the long mask", lambda m: ~m, r"`~` on an integer mask"),
    ("(m == 0).long()", lambda m: (m == 0).long(), r"right values but dtype torch\.int64"),
    ("(m == 0).float()", lambda m: (m == 0).float(), r"right values but dtype torch\.float32"),
    ("m.bool()", lambda m: m.bool(), r"not inverted"),
    ("logical_not, then int", lambda m: torch.logical_not(m).int(), r"right values but dtype torch\.int32"),
    ("> 0", lambda m: m > 0, r"not inverted"),
    ("(m < 1) in the mask's dtype", lambda m: (m < 1).to(m.dtype), r"right values but dtype"),
]


def _embeddings(positions="table", types="table", norm="sum", eps_of=None, dropout=False):
    def forward(
        input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12, position_ids=None
    ):
        seq = input_ids.shape[1]
        eps = eps if eps_of is None else eps_of
        if position_ids is None:
            pos = position[1 : seq + 1] if positions == "from 1" else position[:seq]
        else:
            pos = position[position_ids] if positions != "ids ignored" else position[:seq]
        kind = {"table": lambda: token_type[token_type_ids], "first": lambda: token_type[0], "none": lambda: 0}[types]()
        if norm == "words only":
            return _ln(word[input_ids], ln_weight, ln_bias, eps) + pos + kind
        summed = word[input_ids] + pos + kind
        if norm == "none":
            return summed
        if norm == "over tokens":
            mean, variance = summed.mean(1, keepdim=True), summed.var(1, unbiased=False, keepdim=True)
            return (summed - mean) / torch.sqrt(variance + eps) * ln_weight + ln_bias
        out = _ln(summed, ln_bias, ln_weight, eps) if norm == "swapped" else _ln(summed, ln_weight, ln_bias, eps)
        return F.dropout(out, 0.1) if dropout else out

    return forward


WRONG["bert_embeddings"] += [
    ("positions from 1", _embeddings(positions="from 1"), r"positions starting at 1"),
    ("the segment embedding left out", _embeddings(types="none"), r"no token type embeddings"),
    ("gamma and beta swapped", _embeddings(norm="swapped"), r"gamma and beta swapped"),
    ("PyTorch's eps", _embeddings(eps_of=1e-5), r"default LayerNorm eps"),
    ("the dropout left on", _embeddings(dropout=True), r"dropout left on"),
    ("token_type[0] for every token", _embeddings(types="first"), r"first token type row"),
    ("LayerNorm on the words, then add", _embeddings(norm="words only"), r"word vectors only"),
    ("LayerNorm over the tokens", _embeddings(norm="over tokens"), r"over the tokens"),
]
WRONG["bert_embeddings"] += [
    ("position_ids ignored", _embeddings(positions="ids ignored"), r"`position_ids` ignored"),
]
RIGHT["bert_embeddings"] += [
    lambda ids, types, word, position, token_type, w, b, eps=1e-12, position_ids=None: bc.layer_norm(
        F.embedding(ids, word)
        + F.embedding(torch.arange(ids.shape[1]) if position_ids is None else position_ids, position)
        + F.embedding(types, token_type),
        w,
        b,
        eps,
    ),
    lambda ids, types, word, position, token_type, w, b, eps=1e-12, position_ids=None: (
        lambda s: (s - s.mean(-1, keepdim=True)) * torch.rsqrt(s.var(-1, unbiased=False, keepdim=True) + eps) * w + b
    )(
        word[ids]
        + (
            position[: ids.shape[1]].unsqueeze(0)
            if position_ids is None
            else position.index_select(0, position_ids.flatten()).view(*position_ids.shape, -1)
        )
        + token_type[types]
    ),
]

WRONG["pre_ln_layer"] += [
    (
        "the two LayerNorms swapped",
        lambda x, a, f, w1, b1, w2, b2, eps=1e-12: _pre()(x, a, f, w2, b2, w1, b1, eps),
        r"two LayerNorms swapped",
    ),
    (
        "no gamma and beta",
        lambda x, a, f, w1, b1, w2, b2, eps=1e-12: (lambda h: h + f(_ln(h, None, None, eps)))(
            x + a(_ln(x, None, None, eps))
        ),
        r"without their gamma and beta",
    ),
    (
        "second residual from x",
        lambda x, a, f, w1, b1, w2, b2, eps=1e-12: (lambda h: x + f(_ln(h, w2, b2, eps)))(x + a(_ln(x, w1, b1, eps))),
        r"residual taken from x",
    ),
    (
        "no residual around the feed-forward block",
        lambda x, a, f, w1, b1, w2, b2, eps=1e-12: (lambda h: f(_ln(h, w2, b2, eps)))(x + a(_ln(x, w1, b1, eps))),
        r"second residual missing",
    ),
    ("eps not passed on", _pre(eps_of=1e-12), r"`eps` not passed on"),
    (
        "PyTorch's eps in LN2 only",
        lambda x, a, f, w1, b1, w2, b2, eps=1e-12: (lambda h: h + f(_ln(h, w2, b2, 1e-5)))(x + a(_ln(x, w1, b1, eps))),
        r"default eps in the second LayerNorm",
    ),
    (
        "the attention's residual added to LN1(x)",
        lambda x, a, f, w1, b1, w2, b2, eps=1e-12: (lambda n: (lambda h: h + f(_ln(h, w2, b2, eps)))(n + a(n)))(
            _ln(x, w1, b1, eps)
        ),
        r"residual taken from LN1\(x\)",
    ),
    (
        "the feed-forward block's residual added to LN2(h)",
        lambda x, a, f, w1, b1, w2, b2, eps=1e-12: (lambda n: n + f(n))(_ln(x + a(_ln(x, w1, b1, eps)), w2, b2, eps)),
        r"residual taken from LN2\(h\)",
    ),
]
RIGHT["pre_ln_layer"] = [
    lambda x, a, f, w1, b1, w2, b2, eps=1e-12: (lambda h: h + f(F.layer_norm(h, h.shape[-1:], w2, b2, eps)))(
        x + a(F.layer_norm(x, x.shape[-1:], w1, b1, eps))
    ),
    lambda x, a, f, w1, b1, w2, b2, eps=1e-12: (lambda h: torch.add(h, f(bc.layer_norm(h, w2, b2, eps))))(
        torch.add(x, a(bc.layer_norm(x, w1, b1, eps)))
    ),
]

COMPLETED = (  # the exercises with 0-4 realistic wrong answers before; retired ones among them too
    "split_heads",
    "split_fused_qkv",
    "multi_head_attention",
    "count_parameters",
    "padding_mask",
    "key_padding_mask",
    "bert_embeddings",
    "pre_ln_layer",
    "pre_ln_stack",  # reworked while notebook 06 asked for it; retired when 06 kept one stretch exercise
    "torch_multi_head_attention",  # reworked while notebook 05 asked for it; retired when 05 kept one stretch
    "linear_scores",  # reworked while notebook 01 asked for it; retired when 01 asked its two build pieces
    "flexible_attention",  # reworked while notebook 02 asked for it; retired when 02 asked scaled_dot_product_attention
)


# --- 02 stable_softmax, 03 masked_softmax, 04 alibi_bias: answers outside the catalogue -----------------


def _softmax(s, dim=-1):
    e = torch.exp(s - s.amax(dim, keepdim=True))
    return e / e.sum(dim, keepdim=True)


def _shifted_exp(s, dim=-1, shift=torch.amax, power=1.0):
    e = torch.exp(power * (s - shift(s, dim, keepdim=True)))
    return e / e.sum(dim, keepdim=True)


WRONG["stable_softmax"] = [
    (
        "keepdim forgotten on the sum",
        lambda s, dim=-1: torch.exp(s - s.amax(dim, keepdim=True)) / torch.exp(s - s.amax(dim, keepdim=True)).sum(dim),
        r"two tensors do not broadcast together",
    ),
    (
        "one sum over every entry",
        lambda s, dim=-1: torch.exp(s - s.amax(dim, keepdim=True)) / torch.exp(s - s.amax(dim, keepdim=True)).sum(),
        r"is the right one times a factor of its own",
    ),
    ("the minimum subtracted", lambda s, dim=-1: _shifted_exp(s, dim, torch.amin), r"inf/inf \(an exp that overflowed"),
    ("float64 throughout", lambda s, dim=-1: _softmax(s.double(), dim), r"dtype torch.float64; expected torch.float32"),
    ("the softmax of -s", lambda s, dim=-1: _softmax(-s, dim), r"the scores' sign flipped"),
    ("exp(2 (s - max))", lambda s, dim=-1: _shifted_exp(s, dim, power=2.0), r"the softmax of the scores times 2"),
    (
        "a raw softmax with its NaN zeroed",
        lambda s, dim=-1: torch.nan_to_num(torch.exp(s) / torch.exp(s).sum(dim, keepdim=True)),
        r"Your output is all zeros",
    ),
    (
        "a one-hot argmax",
        lambda s, dim=-1: F.one_hot(s.argmax(dim), s.shape[dim]).to(s.dtype).movedim(-1, dim),
        r"all its weight on one entry \(an argmax, one-hot\)",
    ),
]
RIGHT["stable_softmax"] = [
    lambda s, dim=-1: torch.exp(s - torch.logsumexp(s, dim, keepdim=True)),
    lambda s, dim=-1: (
        (s - s.max(dim, keepdim=True).values).exp().div((s - s.max(dim, keepdim=True).values).exp().sum(dim, True))
    ),
]


def _masked(s, m=None):
    if m is None:
        return s.softmax(-1)
    return s.masked_fill(~m, float("-inf")).softmax(-1).nan_to_num(0.0)


WRONG["masked_softmax"] = [
    (
        "the softmax over the queries",
        lambda s, m=None: (s if m is None else s.masked_fill(~m, float("-inf"))).softmax(-2).nan_to_num(0.0),
        r"Its rows sum to .* not 1",
    ),
    ("a float32 result", lambda s, m=None: _masked(s.float(), m), r"dtype torch.float32; expected torch.float16"),
    (
        "masked scores set to 0",
        lambda s, m=None: s.softmax(-1) if m is None else s.masked_fill(~m, 0.0).softmax(-1),
        r"puts weight on .* where the right answer has exactly 0",
    ),
    (
        "exp times the mask, no maximum",
        lambda s, m=None: s.softmax(-1) if m is None else (lambda e: e / e.sum(-1, keepdim=True))(s.exp() * m),
        r"NaN in 5 of 40 entries \(all in the query rows \[2\]\).*NaN comes from 0/0",
    ),
    (
        "the maximum over every key, then the mask",
        lambda s, m=None: (
            s.softmax(-1)
            if m is None
            else (lambda e: e / e.sum(-1, keepdim=True).clamp(min=1e-12))((s - s.amax(-1, keepdim=True)).exp() * m)
        ),
        r"contains NaN in 8 of 24 entries",
    ),
    (
        "the log of the mask added, in float32",
        lambda s, m=None: s.softmax(-1) if m is None else (s + m.float().log()).softmax(-1).nan_to_num(0.0),
        r"dtype torch.float32; expected torch.float16",
    ),
]
RIGHT["masked_softmax"] = [
    _masked,
    lambda s, m=None: (
        s.softmax(-1) if m is None else s.masked_fill(~m, torch.finfo(s.dtype).min).softmax(-1) * m
    ),  # masked keys and empty rows both 0
    lambda s, m=None: (
        (s.float() if m is None else s.float().masked_fill(~m, float("-inf"))).softmax(-1).nan_to_num(0.0).to(s.dtype)
    ),
]


def _slopes(h, base_of=lambda c: c, exp=lambda x: 2.0**x):
    closest = 2 ** int(math.log2(h))
    first = [exp(-8 * (i + 1) / base_of(closest)) for i in range(closest)]
    rest = [exp(-8 * (2 * i + 1) / (2 * closest)) for i in range(h - closest)]
    return torch.tensor(first + rest)


def _alibi(h, n, slopes=None):
    m = _slopes(h) if slopes is None else slopes
    position = torch.arange(n)
    return -m[:, None, None] * (position[None, :] - position[:, None]).abs()


WRONG["alibi_bias"] = [
    (
        "squared distances",
        lambda h, n: _alibi(h, n) * (torch.arange(n)[None, :] - torch.arange(n)[:, None]).abs(),
        r"does not change by the same step at every distance",
    ),
    (
        "e instead of 2 as the base",
        lambda h, n: _alibi(h, n, _slopes(h, exp=math.exp)),
        r"is 0, -0.3679, -0.7358.*falls by its slope m = 0.5",
    ),
    (
        "the extra slopes in reverse",
        lambda h, n: torch.cat(
            [_alibi(h, n)[: 2 ** int(math.log2(h))], _alibi(h, n)[2 ** int(math.log2(h)) :].flip(0)]
        ),
        r"The heads are the right ones in another order",
    ),
    ("int64", lambda h, n: _alibi(h, n).round().long(), r"dtype torch.int64; expected torch.float32"),
    ("one head only", lambda h, n: _alibi(h, n)[0], r"The leading axes \(8,\) are missing"),
    (
        "a causal mask in the bias",
        lambda h, n: _alibi(h, n).masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf")),
        r"contains inf",
    ),
    (
        "2H's slopes for every head",
        lambda h, n: _alibi(h, n, _slopes(h, base_of=lambda c: 2 * c)),
        r"is 0, -0.7071, -1.414.*falls by its slope m = 0.5",
    ),
]


def _alibi_by_loops(num_heads, seq_len):
    closest = 2 ** math.floor(math.log2(num_heads))
    every = [2 ** (-8 * (i + 1) / (2 * closest)) for i in range(2 * closest)]
    slopes = [2 ** (-8 * (i + 1) / closest) for i in range(closest)] + every[0::2][: num_heads - closest]
    bias = torch.zeros(num_heads, seq_len, seq_len)
    for h, m in enumerate(slopes):
        for i in range(seq_len):
            for j in range(seq_len):
                bias[h, i, j] = -m * abs(i - j)
    return bias


RIGHT["alibi_bias"] = [_alibi, _alibi_by_loops]


# --- 01, 03, 05, 06, 07: the exercises no notebook asks for now, answers outside the catalogue -------------


def _lin(x, w, b):
    return x @ w.T + b


WRONG["qkv_from_linear"] = [
    (
        "float32 on a float16 input",
        lambda x, wq, bq, wk, bk, wv, bv: tuple(
            _lin(x.float(), w.float(), b.float()) for w, b in ((wq, bq), (wk, bk), (wv, bv))
        ),
        r"`q` has the right values but dtype torch.float32; expected torch.float16",
    ),
    (
        "the biases subtracted",
        lambda x, wq, bq, wk, bk, wv, bv: (x @ wq.T - bq, x @ wk.T - bk, x @ wv.T - bv),
        r"`q`: x @ w_q.T \*minus\* b_q",
    ),
    (
        "v from the key layer",
        lambda x, wq, bq, wk, bk, wv, bv: (_lin(x, wq, bq), _lin(x, wk, bk), _lin(x, wk, bk)),
        r"It equals the right `k`: the same part taken twice",
    ),
    (
        "q scaled by 1/sqrt(d_k)",
        lambda x, wq, bq, wk, bk, wv, bv: (_lin(x, wq, bq) / math.sqrt(wq.shape[0]), _lin(x, wk, bk), _lin(x, wv, bv)),
        r"divided by √d_k: the scaling belongs to the scores",
    ),
    (
        "one fused tensor",
        lambda x, wq, bq, wk, bk, wv, bv: torch.cat([_lin(x, wq, bq), _lin(x, wk, bk), _lin(x, wv, bv)], -1),
        r"returned a Tensor; expected a tuple \(q, k, v\)",
    ),
]
RIGHT["qkv_from_linear"] = [
    lambda x, wq, bq, wk, bk, wv, bv: tuple(F.linear(x, w, b) for w, b in ((wq, bq), (wk, bk), (wv, bv))),
    lambda x, wq, bq, wk, bk, wv, bv: tuple(
        torch.addmm(b, x.reshape(-1, x.shape[-1]), w.T).reshape(*x.shape[:-1], -1)
        for w, b in ((wq, bq), (wk, bk), (wv, bv))
    ),
    lambda x, wq, bq, wk, bk, wv, bv: [_lin(x, wq, bq), _lin(x, wk, bk), _lin(x, wv, bv)],  # a list passes too
]
RIGHT["qkv_projection"] = [
    lambda x, a, b, c: tuple(torch.einsum("...sd,de->...se", x, w) for w in (a, b, c)),
    lambda x, a, b, c: tuple(torch.matmul(x, w) for w in (a, b, c)),
]
WRONG["causal_mask"] = [
    ("a Python list", lambda n: [[j <= i for j in range(n)] for i in range(n)], r"is a list; expected a torch.Tensor"),
    ("one row", lambda n: torch.ones(n, dtype=torch.bool), r"shape \(4,\); expected \(4, 4\)"),
    ("int8", lambda n: torch.ones(n, n).tril().to(torch.int8), r"dtype torch.int8; a mask must be boolean"),
    (
        "one token too many",
        lambda n: torch.ones(n + 1, n + 1, dtype=torch.bool).tril(),
        r"shape \(5, 5\); expected \(4, 4\)",
    ),
]
RIGHT["causal_mask"] = [
    lambda n: torch.arange(n)[None, :] <= torch.arange(n)[:, None],
    lambda n: ~torch.ones(n, n, dtype=torch.bool).triu(1),
]
RIGHT["sinusoidal_position_encoding"] = [
    lambda n, d: torch.stack(
        [
            torch.sin(torch.arange(n)[:, None] / 10000 ** (torch.arange(0, d, 2) / d)),
            torch.cos(torch.arange(n)[:, None] / 10000 ** (torch.arange(0, d, 2) / d)),
        ],
        dim=-1,
    ).flatten(-2)[:, :d],
    lambda n, d: torch.tensor(
        [
            [
                math.sin(p / 10000 ** (2 * (i // 2) / d)) if i % 2 == 0 else math.cos(p / 10000 ** (2 * (i // 2) / d))
                for i in range(d)
            ]
            for p in range(n)
        ]
    ),
]
WRONG["merge_heads"] = [
    ("the heads on an axis of their own", lambda x: x.transpose(1, 2), r"shape \(2, 5, 3, 4\); expected \(2, 5, 12\)"),
    ("the last two axes flattened", lambda x: x.flatten(-2), r"shape \(2, 3, 20\); expected \(2, 5, 12\)"),
]
RIGHT["merge_heads"] = [
    lambda x: x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1),
    lambda x: torch.cat(x.unbind(1), -1),
]


def _layer_norm(x, w, b, eps=1e-12):
    m = x.mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(((x - m) ** 2).mean(-1, keepdim=True) + eps) * w + b


WRONG["layer_norm"] = [
    (
        "the mean absolute deviation",
        lambda x, w, b, eps=1e-12: (
            (x - x.mean(-1, True)) / torch.sqrt((x - x.mean(-1, True)).abs().mean(-1, True) + eps) * w + b
        ),
        r"the variance is the mean of the \*squared\* deviations",
    ),
    (
        "weight before normalising",
        lambda x, w, b, eps=1e-12: _layer_norm(x * w, torch.ones_like(w), b, eps),
        r"the LayerNorm of x \* weight, plus bias",
    ),
    ("the bias subtracted", lambda x, w, b, eps=1e-12: _layer_norm(x, w, -b, eps), r"weight \*minus\* bias"),
    (
        "float64",
        lambda x, w, b, eps=1e-12: _layer_norm(x.double(), w.double(), b.double(), eps),
        r"dtype torch.float64; expected torch.float32",
    ),
    (
        "RMSNorm",
        lambda x, w, b, eps=1e-12: x / torch.sqrt((x * x).mean(-1, True) + eps) * w + b,
        r"RMSNorm: LayerNorm subtracts each row's mean first",
    ),
]
RIGHT["layer_norm"] = [
    _layer_norm,
    lambda x, w, b, eps=1e-12: (
        (x - x.mean(-1, True)) * torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + eps) * w + b
    ),
]
WRONG["feed_forward"] = [
    (
        "GELU of the input",
        lambda x, w1, b1, w2, b2: (F.gelu(x) @ w1 + b1) @ w2 + b2,
        r"GELU applied to the input before the first linear map",
    ),
    (
        "b1 after the activation",
        lambda x, w1, b1, w2, b2: (F.gelu(x @ w1) + b1) @ w2 + b2,
        r"b1 added after the activation",
    ),
    (
        "float64",
        lambda x, w1, b1, w2, b2: F.gelu(x.double() @ w1.double() + b1.double()) @ w2.double() + b2.double(),
        r"dtype torch.float64; expected torch.float32",
    ),
    ("the hidden layer returned", lambda x, w1, b1, w2, b2: F.gelu(x @ w1 + b1), r"shape \(5, 24\); expected \(5, 6\)"),
]
RIGHT["feed_forward"] = [
    lambda x, w1, b1, w2, b2: F.linear(F.gelu(F.linear(x, w1.T, b1)), w2.T, b2),
    lambda x, w1, b1, w2, b2: (lambda h: 0.5 * h * (1 + torch.erf(h / math.sqrt(2))))(x @ w1 + b1) @ w2 + b2,
]
RIGHT["post_ln_layer"] = [
    lambda x, a, f, g1, b1, g2, b2, eps=1e-12: (lambda h: F.layer_norm(h + f(h), h.shape[-1:], g2, b2, eps))(
        F.layer_norm(x + a(x), x.shape[-1:], g1, b1, eps)
    ),
    lambda x, a, f, g1, b1, g2, b2, eps=1e-12: (lambda h: bc.layer_norm(torch.add(h, f(h)), g2, b2, eps))(
        bc.layer_norm(torch.add(x, a(x)), g1, b1, eps)
    ),
]


def _mlm_by_functional(h, dw, db, lw, lb, we, dbias, eps=1e-12):
    t = F.gelu(F.linear(h, dw, db))
    return F.layer_norm(t, t.shape[-1:], lw, lb, eps) @ we.T + dbias


RIGHT["mlm_head"].append(_mlm_by_functional)


def _rename_by_regex(key, prefixed=False):
    """The same renaming as one regular expression per name family, the layer number captured."""
    key = re.sub(r"^bert\.", "", key)
    key = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", key))
    if key == "embeddings.position_ids" or key.startswith("cls.predictions.decoder."):
        return None
    rules = (
        (r"^embeddings\.LayerNorm\.", "embeddings.layer_norm."),
        (r"^encoder\.layer\.(\d+)\.attention\.self\.", r"encoder.layers.\1.attention."),
        (r"^encoder\.layer\.(\d+)\.attention\.output\.dense\.", r"encoder.layers.\1.attention.output."),
        (r"^encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.", r"encoder.layers.\1.attention_norm."),
        (r"^encoder\.layer\.(\d+)\.intermediate\.dense\.", r"encoder.layers.\1.feed_forward.intermediate."),
        (r"^encoder\.layer\.(\d+)\.output\.dense\.", r"encoder.layers.\1.feed_forward.output."),
        (r"^encoder\.layer\.(\d+)\.output\.LayerNorm\.", r"encoder.layers.\1.output_norm."),
        (r"^cls\.predictions\.transform\.dense\.", "mlm.dense."),
        (r"^cls\.predictions\.transform\.LayerNorm\.", "mlm.layer_norm."),
        (r"^cls\.predictions\.bias$", "mlm.bias"),
        (r"^cls\.seq_relationship\.", "nsp."),
    )
    for pattern, replacement in rules:
        key, count = re.subn(pattern, replacement, key)
        if count:
            break
    return "bert." + key if prefixed and not key.startswith(("mlm.", "nsp.")) else key


RIGHT["hf_to_ours"].append(_rename_by_regex)


# --- the exercises notebooks 01-06 ask for: answers written after their catalogues and knob grids ---------
# (each gets a message that no listed mistake or knob combination gives; test_exercises_unforeseen.py keeps
# those that get only the largest difference)


def _ln_scores(x, w, b):
    return x @ w.T + b


WRONG["linear_scores"] += [
    ("a list of rows", lambda x, wq, bq, wk, bk: list(_ln_scores(x, wq, bq) @ _ln_scores(x, wk, bk).mT), r"is a list"),
    (
        "cosine similarity",
        lambda x, wq, bq, wk, bk: (
            F.normalize(_ln_scores(x, wq, bq), dim=-1) @ F.normalize(_ln_scores(x, wk, bk), dim=-1).mT
        ),
        r"as for a cosine similarity",
    ),
    (
        "minus squared distances",
        lambda x, wq, bq, wk, bk: (
            -((_ln_scores(x, wq, bq)[..., :, None, :] - _ln_scores(x, wk, bk)[..., None, :, :]) ** 2).sum(-1)
        ),
        r"minus the squared distance between each query and key",
    ),
    (
        "the biases' product added last",
        lambda x, wq, bq, wk, bk: (x @ wq.T) @ (x @ wk.T).mT + bq @ bk,
        r"plus b_q · b_k: each bias is added to its projection",
    ),
    (
        "only the diagonal",
        lambda x, wq, bq, wk, bk: (_ln_scores(x, wq, bq) * _ln_scores(x, wk, bk)).sum(-1),
        r"shape \(5,\); expected \(5, 5\)",
    ),
]
WRONG["mask_from_torch"] += [
    ("a list", lambda m: (~m if m.dtype == torch.bool else m == 0).tolist(), r"is a list"),
    (
        "one row per batch",
        lambda m: (~m if m.dtype == torch.bool else m == 0).any(-2),
        r"leading axes \(2,\) are missing",
    ),
]
RIGHT["mask_from_torch"].append(lambda m: ~m if m.dtype == torch.bool else m.exp() > 0)  # exp(-inf) = exp(min) = 0
WRONG["sinusoidal_positions"] += [
    (
        "positions in degrees",
        lambda p, d, base=10000.0: _sin_table(p * (180 / math.pi), d, base),
        r"the positions in degrees",
    ),
    (
        "float64",
        lambda p, d, base=10000.0: _sin_table(p, d, base).double(),
        r"dtype torch.float64; expected torch.float32",
    ),
    (
        "a cosine last for odd widths",
        lambda p, d, base=10000.0: (
            torch.cat([_sin_table(p, d - 1, base), torch.cos(p.float()[..., None] * base ** (-(d - 1) / d))], -1)
            if d % 2
            else _sin_table(p, d, base)
        ),
        r"exactly those where a size is odd",
    ),
    (
        "positions over their maximum",
        lambda p, d, base=10000.0: _sin_table(p / p.max().clamp(min=1), d, base),
        r"the positions divided by the largest one",
    ),
]


def _sin_table(position_ids, d, base):
    position = position_ids.float()[..., None]
    angle = position * base ** (-torch.arange(0, d, 2).float() / d)
    table = torch.zeros(*position.shape[:-1], d)
    table[..., 0::2] = torch.sin(angle)
    table[..., 1::2] = torch.cos(angle[..., : d // 2])
    return table


def _ln06(t, w, b, eps):
    return F.layer_norm(t, t.shape[-1:], w, b, eps)


WRONG["parallel_layer"] += [
    (
        "the outputs averaged",
        lambda x, a, f, w, b, eps=1e-12: (lambda n: x + (a(n) + f(n)) / 2)(_ln06(x, w, b, eps)),
        r"each sub-layer was called once, on the right input",
    ),
    (
        "the feed-forward fed the attention's output",
        lambda x, a, f, w, b, eps=1e-12: (lambda n: (lambda o: x + o + f(o))(a(n)))(_ln06(x, w, b, eps)),
        r"`feed_forward` called once, on something else",
    ),
    (
        "a product of the sub-layers",
        lambda x, a, f, w, b, eps=1e-12: (lambda n: x + a(n) * f(n))(_ln06(x, w, b, eps)),
        r"each sub-layer was called once, on the right input",
    ),
]


def _stack06(x, layers, final_weight, final_bias, eps=1e-12, reverse=False, halve=False):
    stream = x
    for attention, ffn, w1, b1, w2, b2 in layers[::-1] if reverse else layers:
        stream = stream + attention(_ln06(stream, w1, b1, eps))
        stream = stream + ffn(_ln06(stream, w2, b2, eps))
        stream = stream / 2 if halve else stream
    return _ln06(stream, final_weight, final_bias, eps)


WRONG["pre_ln_stack"] += [
    (
        "the layers in reverse order",
        lambda x, L, fw, fb, eps=1e-12: _stack06(x, L, fw, fb, eps, reverse=True),
        r"Inside your stack, layer 0 \(of 2\): its `attention` called once, on something else",
    ),
    (
        "the stream halved after each layer",
        lambda x, L, fw, fb, eps=1e-12: _stack06(x, L, fw, fb, eps, halve=True),
        r"layer 1 \(of 2\): its `attention` called once, on LN1 of the stream entering layer 1; its `feed_forward`",
    ),
    (
        "the final gamma and beta swapped",
        lambda x, L, fw, fb, eps=1e-12: _stack06(x, L, fb, fw, eps),
        r"every layer's sub-layers were called once, on the right inputs, in order",
    ),
    (
        "each layer on x, the outputs summed",
        lambda x, L, fw, fb, eps=1e-12: _ln06(sum(_stack06(x, [layer], fw, fb, eps) for layer in L), fw, fb, eps),
        r"its `attention` called once, on LN1 of the stack's input x",
    ),
]
WRONG["torch_multi_head_attention"] += [
    (
        "the weights returned too",
        lambda x, wi, bi, wo, bo, h, kpm=None: (_tmha(x, wi, bi, wo, bo, h, kpm), None),
        r"Your output is a tuple; expected a torch.Tensor",
    ),
    (
        "padded keys filled with 0",
        lambda x, wi, bi, wo, bo, h, kpm=None: _tmha(x, wi, bi, wo, bo, h, kpm, fill=0.0),
        r"Only the batch \[1\] are wrong",
    ),
]


def _tmha(x, w_in, b_in, w_out, b_out, heads, key_padding_mask=None, fill=float("-inf"), dropout=False, relu=False):
    batch, seq, d = x.shape
    q, k, v = (t.view(batch, seq, heads, d // heads).transpose(1, 2) for t in (x @ w_in.T + b_in).chunk(3, -1))
    scores = q @ k.transpose(-2, -1) / math.sqrt(d // heads)
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, None, :], fill)
    weights = F.dropout(scores.softmax(-1), 0.1) if dropout else scores.softmax(-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, seq, d)
    return (out.relu() if relu else out) @ w_out.T + b_out


WRONG["torch_multi_head_attention"] += [
    ("dropout on the weights", lambda *args: _tmha(*args, dropout=True), r"random generator is seeded otherwise"),
    (
        "a ReLU before out_proj",
        lambda *args: _tmha(*args, relu=True),
        r"ReLU",
    ),  # only the largest difference: not named
]
WRONG["sinusoidal_positions"].append(
    (  # float32's sines of angles up to 10^4 differ from the reference's past the tolerance: not named
        "the frequencies base^(+2i/d)",
        lambda p, d, base=10000.0: (lambda angle: torch.stack([angle.sin(), angle.cos()], -1).flatten(-2)[..., :d])(
            p.float()[..., None] * base ** (torch.arange(0, d, 2).float() / d)
        ),
        r"base\^\(\+2i/d_model\)",
    )
)


WRONG["flexible_attention"] += [
    (
        "the scale squared",
        lambda q, k, v, m=None, s=None: _fl(q, k, v, m, (1 / math.sqrt(q.shape[-1]) if s is None else s) ** 2),
        r"the softmax of the scores times 0.354 before the exp \(= 1/√8",
    ),
    (
        "the weights transposed",
        lambda q, k, v, m=None, s=None: (lambda o, w: (o, w.mT))(*_fl(q, k, v, m, s)),
        r"axes in another order",
    ),
    (
        "the output alone",
        lambda q, k, v, m=None, s=None: _fl(q, k, v, m, s)[0],
        r"expected a tuple \(output, weights\)",
    ),
]


def _fl(q, k, v, mask=None, scale=None):
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    weights = scores.softmax(-1)
    return weights @ v, weights


def _mlm07(h, dw, db, lw, lb, we, dbias, eps=1e-12, act=F.gelu, dense_twice=False):
    t = F.layer_norm(act(h @ dw.T + db), (h.shape[-1],), lw, lb, eps)
    t = t @ dw.T + db if dense_twice else t
    return t @ we.T + dbias


WRONG["mlm_head"] += [
    (
        "the dense layer again after the LayerNorm",
        lambda *a: _mlm07(*a, dense_twice=True),
        r"the dense layer applied again",
    ),
    ("logits over √hidden", lambda *a: _mlm07(*a) / math.sqrt(a[0].shape[-1]), r"times 0.3536 \(= 1/√8\)"),
    ("SiLU", lambda *a: _mlm07(*a, act=F.silu), r"SiLU \(x·sigmoid\(x\)\) for GELU"),
    ("the argmax ids", lambda *a: _mlm07(*a).argmax(-1), r"The last axes are missing"),
]
WRONG["mask_from_torch"] += [
    (
        "the float mask's own dtype kept",
        lambda m: ~m if m.dtype == torch.bool else (m == 0).to(m.dtype),
        r"a mask must be boolean",
    ),
    (  # only where it differs, not why: not named
        "a causal mask added",
        lambda m: (~m if m.dtype == torch.bool else m == 0) & torch.ones(m.shape[-2:], dtype=torch.bool).tril(),
        r"causal",
    ),
]


# --- the tests ------------------------------------------------------------------------------------

REWORKED = (
    "mask_from_torch",
    "sinusoidal_positions",
    "parallel_layer",
)


def _named(name, entries):
    named, misleading, messages = 0, [], []
    for label, fn, expected, *forbidden in entries:
        result = check(name, fn)
        messages.append((label, result.message))
        if result.status != "wrong":
            misleading.append((label, result.message))
            continue
        if forbidden and re.search(forbidden[0], result.message):
            misleading.append((label, result.message))
        elif re.search(expected, result.message):
            named += 1
    return named, misleading, messages


@pytest.mark.parametrize("name", sorted(WRONG))
def test_realistic_wrong_answers_are_named_and_never_misleadingly(name):
    entries = WRONG[name]
    named, misleading, messages = _named(name, entries)
    assert not misleading, misleading
    assert named >= math.ceil(0.9 * len(entries)), messages


@pytest.mark.parametrize("name", REWORKED)
def test_each_reworked_exercise_has_six_wrong_and_two_right_answers_of_its_own(name):
    assert len(WRONG[name]) >= 6 and len(RIGHT[name]) >= 2
    assert name in {asked for names in registry.NOTEBOOK_ASKS.values() for asked in names}


@pytest.mark.parametrize("name", COMPLETED)
def test_each_completed_exercise_has_six_wrong_and_two_right_answers(name):
    assert len(WRONG[name]) >= 6 and len(RIGHT[name]) >= 2


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_right_answers_written_differently_pass(name):
    for fn in RIGHT[name]:
        result = check(name, fn)
        assert result.passed, result.message


def test_the_exercises_a_cell_answered_stay_checkable_by_name():
    for name in ("key_padding_mask", "multi_head_attention"):  # scaled_dot_product_attention: 02's build piece again
        assert name in registry.RETIRED and name in EXERCISES
        assert not any(name in names for names in registry.NOTEBOOK_ASKS.values())


_OPPOSITE = {"masked": "no mask", "no mask": "masked", "batched": "unbatched", "unbatched": "batched"}
_OPPOSITE |= {"square": "non-square", "non-square": "square"}


ASKED_0107 = [name for notebook in ("01", "02", "03", "04", "05", "06") for name in registry.NOTEBOOK_ASKS[notebook]]
ASKED_0107 += ["mlm_head", "hf_to_ours", "count_parameters"]  # notebook 07's


@pytest.mark.parametrize("name", ASKED_0107)
def test_each_case_varies_one_property_from_another(name):
    """Every tag a summary can name is carried by some case that differs from another case in that tag only."""
    cases = EXERCISES[name].cases()
    for tag in {tag for case in cases for tag in case.tags}:
        pair = {tag, _OPPOSITE.get(tag, tag)}  # "masked" and "no mask" are one property
        with_tag = [set(case.tags) - pair for case in cases if tag in case.tags]
        without = [set(case.tags) - pair for case in cases if tag not in case.tags]
        if not without:
            continue
        assert any(a == b for a in with_tag for b in without), (name, tag)


def test_every_name_family_of_the_renaming_table_is_in_some_case():
    keys = [case.args[0] for case in EXERCISES["hf_to_ours"].cases()]
    families = [hf.replace("{i}.", "") for hf, _ in ENCODER_NAMES] + [
        "cls.predictions.transform.dense.",
        "cls.predictions.transform.LayerNorm.",
        "cls.predictions.bias",
        "cls.predictions.decoder.weight",
        "cls.predictions.decoder.bias",
        "cls.seq_relationship.",
        "embeddings.position_ids",
    ]
    for family in families:
        prefix, _, rest = family.partition("encoder.layer.")
        assert any(
            (family in key) if not rest else (key.split("encoder.layer.")[-1].split(".", 1)[-1].startswith(rest))
            for key in keys
        ), family
