"""Realistic wrong answers that the catalogue does not list, at least five per exercise of notebooks
01-07: each must be judged wrong, and the table records whether its message is *specific*, i.e.
names the mistake or the fix (a catalogued mistake that explains it, a hint, or a diagnosis such as
"a constant factor", "the heads in another order", "only on the float16 cases") rather than only
"wrong values, largest difference ...". The counts go into the issue's closing note; a change to
the engine that makes a message more or less specific shows up here.
"""

import math

import pytest
import torch
import torch.nn.functional as F

import bertcourse as bc
from bertcourse.attention import masked_softmax, qkv_from_linear
from bertcourse.exercises import check
from bertcourse.heads import mlm_head
from bertcourse.weights import hf_to_ours

# Phrases that name the mistake or the fix.
SPECIFIC = (
    "Hint:",
    "It is the right answer",
    "It is exactly",
    "are the right ones in another order",
    "Only the",
    "That is close",
    "dropout left on",
    "The last two axes are swapped",
    "leading axes",
    "The last axes are missing",
    "An extra axis",
    "The same number of entries in another shape",
    "right values but dtype",
    "the dtype of the inputs",
    "right items in the order",
    "The missing",
    "The extra",
    "The difference is",
    "NaN comes from",
    "inf comes from",
    "did you forget to `return`",
    "a mask must be boolean",
    "exactly those where",
    "Your tensors at that line",
    "expected a tuple",
    "on the device",
    "in place",
    "return a Python int",
    "was still running",
    "Your mask is",
    "Only its diagonal",
    "It equals `torch.",
    "Each of your",
    "Each entry is",
    "expected a torch.Tensor",
    "expected an int",
    "items; expected",
    "item; expected",
    "Your table is the right formula",
    "one of the inputs, unchanged",
    "The part that differs",
    "None means",
    "It holds exactly the right numbers in another arrangement",
    "It equals the right `",
    "Its rows sum to",
    "bias from query 0 to keys",
    "Inside your layer",
    "It equals ",
    "differ from the right ones by the same vector",
    "is a sentence of length",
    "is seeded otherwise",
)


def is_specific(result) -> bool:
    return result.mistake is not None or any(phrase in result.message for phrase in SPECIFIC)


def _scores(q, k):
    return q @ k.transpose(-2, -1)


def _attend(scores, v, mask=None):
    weights = masked_softmax(scores, mask)
    return weights @ v, weights


def _heads(x, w, h):
    return bc.split_heads(x @ w, h)


# (exercise, what the learner did, their function)


def _rows(position, input_ids, position_ids):
    """The position rows of a right ``bert_embeddings``: rows 0..seq-1 unless ``position_ids`` says otherwise."""
    return position[torch.arange(input_ids.shape[1]) if position_ids is None else position_ids]


ANSWERS = [
    # --- 01 qkv_projection
    ("qkv_projection", "one tensor, q k v concatenated", lambda x, a, b, c: torch.cat([x @ a, x @ b, x @ c], -1)),
    ("qkv_projection", "q pre-scaled by 1/sqrt(d_k)", lambda x, a, b, c: (x @ a / a.shape[-1] ** 0.5, x @ b, x @ c)),
    ("qkv_projection", "a bias of ones added", lambda x, a, b, c: (x @ a + 1, x @ b + 1, x @ c + 1)),
    ("qkv_projection", "elementwise product", lambda x, a, b, c: (x * a, x * b, x * c)),
    ("qkv_projection", "only q and k returned", lambda x, a, b, c: (x @ a, x @ b)),
    ("qkv_projection", "v from w_k", lambda x, a, b, c: (x @ a, x @ b, x @ b)),
    # --- 01 qkv_from_linear
    (
        "qkv_from_linear",
        "bias added before the product",
        lambda x, wq, bq, wk, bk, wv, bv: ((x + bq[:1]) @ wq.T, (x + bk[:1]) @ wk.T, (x + bv[:1]) @ wv.T),
    ),
    (
        "qkv_from_linear",
        "F.linear with the weight transposed",
        lambda x, wq, bq, wk, bk, wv, bv: (F.linear(x, wq.T, bq), F.linear(x, wk.T, bk), F.linear(x, wv.T, bv)),
    ),
    (
        "qkv_from_linear",
        "k and v swapped",
        lambda x, wq, bq, wk, bk, wv, bv: (x @ wq.T + bq, x @ wv.T + bv, x @ wk.T + bk),
    ),
    (
        "qkv_from_linear",
        "computed in float32 whatever the input",
        lambda x, *p: tuple(t.float() for t in qkv_from_linear(x.float(), *(t.float() for t in p))),
    ),
    (
        "qkv_from_linear",
        "the bias of q used for all three",
        lambda x, wq, bq, wk, bk, wv, bv: (x @ wq.T + bq, x @ wk.T + bq, x @ wv.T + bq[: wv.shape[0]]),
    ),
    (
        "qkv_from_linear",
        "torch.nn.Linear built inside with fresh weights",
        lambda x, wq, bq, wk, bk, wv, bv: tuple(
            torch.nn.Linear(x.shape[-1], w.shape[0]).to(x.dtype)(x) for w in (wq, wk, wv)
        ),
    ),
    # --- 01 attention_scores
    ("attention_scores", "summed over the keys", lambda q, k: (q @ k.transpose(-2, -1)).sum(-1)),
    ("attention_scores", "divided by d_k", lambda q, k: q @ k.transpose(-2, -1) / q.shape[-1]),
    ("attention_scores", "cosine similarity", lambda q, k: F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).mT),
    ("attention_scores", "torch.bmm", lambda q, k: torch.bmm(q, k.transpose(1, 2))),
    ("attention_scores", "elementwise products summed", lambda q, k: (q * k).sum(-1)),
    ("attention_scores", "queries against themselves", lambda q, k: q @ q.transpose(-2, -1)),
    # --- 02 scaled_dot_product_attention
    (
        "scaled_dot_product_attention",
        "weights times v transposed",
        lambda q, k, v, mask=None: (lambda w: (w @ v.mT, w))(masked_softmax(_scores(q, k) / q.shape[-1] ** 0.5, mask)),
    ),
    (
        "scaled_dot_product_attention",
        "scaled by the square root of the number of keys",
        lambda q, k, v, mask=None: _attend(_scores(q, k) / k.shape[-2] ** 0.5, v, mask),
    ),
    (
        "scaled_dot_product_attention",
        "weights from the unmasked scores, output masked",
        lambda q, k, v, mask=None: (
            _attend(_scores(q, k) / q.shape[-1] ** 0.5, v, mask)[0],
            torch.softmax(_scores(q, k) / q.shape[-1] ** 0.5, -1),
        ),
    ),
    (
        "scaled_dot_product_attention",
        "dropout on the weights",
        lambda q, k, v, mask=None: (lambda w: (F.dropout(w, 0.1) @ v, F.dropout(w, 0.1)))(
            masked_softmax(_scores(q, k) / q.shape[-1] ** 0.5, mask)
        ),
    ),
    (
        "scaled_dot_product_attention",
        "computed in float64",
        lambda q, k, v, mask=None: _attend(_scores(q.double(), k.double()) / q.shape[-1] ** 0.5, v.double(), mask),
    ),
    (
        "scaled_dot_product_attention",
        "weights returned transposed",
        lambda q, k, v, mask=None: (lambda o, w: (o, w.mT))(*_attend(_scores(q, k) / q.shape[-1] ** 0.5, v, mask)),
    ),
    # --- 02 stable_softmax
    (
        "stable_softmax",
        "the minimum subtracted",
        lambda s, dim=-1: (lambda e: e / e.sum(dim, keepdim=True))(torch.exp(s - s.amin(dim, keepdim=True))),
    ),
    (
        "stable_softmax",
        "sum without keepdim",
        lambda s, dim=-1: (lambda e: e / e.sum(dim))(torch.exp(s - s.amax(dim, keepdim=True))),
    ),
    (
        "stable_softmax",
        "the maximum clamped to 80",
        lambda s, dim=-1: (lambda e: e / e.sum(dim, keepdim=True))(torch.exp(s.clamp(max=80))),
    ),
    (
        "stable_softmax",
        "exp minus one",
        lambda s, dim=-1: (lambda e: e / e.sum(dim, keepdim=True))(torch.expm1(s - s.amax(dim, keepdim=True))),
    ),
    ("stable_softmax", "sigmoid instead of softmax", lambda s, dim=-1: torch.sigmoid(s)),
    (
        "stable_softmax",
        "normalised by the maximum, not the sum",
        lambda s, dim=-1: torch.exp(s - s.amax(dim, keepdim=True)),
    ),
    # --- 03 padding_mask
    (
        "padding_mask",
        "the first sentence only",
        lambda lengths, max_len=None: torch.arange(max_len or int(lengths.max())) < lengths[0],
    ),
    (
        "padding_mask",
        "a float mask",
        lambda lengths, max_len=None: (torch.arange(max_len or int(lengths.max()))[None] < lengths[:, None]).float(),
    ),
    (
        "padding_mask",
        "default max_len = the number of sentences",
        lambda lengths, max_len=None: torch.arange(max_len or len(lengths))[None] < lengths[:, None],
    ),
    (
        "padding_mask",
        "a list of lists",
        lambda lengths, max_len=None: [[i < n for i in range(max_len or int(lengths.max()))] for n in lengths],
    ),
    (
        "padding_mask",
        "every row as long as the longest",
        lambda lengths, max_len=None: (torch.arange(max_len or int(lengths.max())) < lengths.max()).expand(
            len(lengths), -1
        ),
    ),
    # --- 03 causal_mask
    ("causal_mask", "one key ahead allowed", lambda n: torch.ones(n, n, dtype=torch.bool).tril(1)),
    ("causal_mask", "with a batch axis", lambda n: torch.ones(1, n, n, dtype=torch.bool).tril()),
    ("causal_mask", "a long 0/1 mask", lambda n: torch.tril(torch.ones(n, n, dtype=torch.long))),
    ("causal_mask", "every key allowed", lambda n: torch.ones(n, n, dtype=torch.bool)),
    ("causal_mask", "only the diagonal", lambda n: torch.eye(n, dtype=torch.bool)),
    # --- 03 masked_softmax
    (
        "masked_softmax",
        "-inf fill, NaN replaced by 0 only where the mask allows",
        lambda s, mask=None: torch.softmax(s if mask is None else s.masked_fill(~mask, -math.inf), -1).nan_to_num(0.5),
    ),
    (
        "masked_softmax",
        "a mask of 0 and 1 added to the scores",
        lambda s, mask=None: torch.softmax(s if mask is None else s + mask, -1),
    ),
    (
        "masked_softmax",
        "the fill of float16 for every dtype",
        lambda s, mask=None: (
            torch.softmax(s if mask is None else s.masked_fill(~mask, -65504.0), -1)
            * (1 if mask is None else mask.any(-1, keepdim=True))
        ),
    ),
    ("masked_softmax", "the mask required", lambda s, mask: masked_softmax(s, mask)),
    (
        "masked_softmax",
        "the scores multiplied by the mask",
        lambda s, mask=None: torch.softmax(s if mask is None else s * mask, -1),
    ),
    (
        "masked_softmax",
        "computed in float32 and left there",
        lambda s, mask=None: masked_softmax(s.float(), mask),
    ),
    # --- 03 key_padding_mask
    (
        "key_padding_mask",
        "not for left padding and not inverted",
        lambda m: torch.arange(m.shape[-1])[None] < m.sum(-1)[:, None],
    ),
    ("key_padding_mask", "logical_not of a long mask as long", lambda m: torch.logical_not(m).long()),
    ("key_padding_mask", "one row only", lambda m: m[0] == 0),
    ("key_padding_mask", "a float mask of 1s at padding", lambda m: (m == 0).float()),
    ("key_padding_mask", "inverted twice", lambda m: ~(m == 0)),
    # --- 04 sinusoidal_position_encoding
    (
        "sinusoidal_position_encoding",
        "cos columns with their own odd index",
        lambda n, d: (
            torch.stack(
                [
                    torch.sin(torch.arange(n)[:, None] / 10000 ** (torch.arange(d) / d)),
                    torch.cos(torch.arange(n)[:, None] / 10000 ** (torch.arange(d) / d)),
                ],
                0,
            )[torch.arange(d) % 2, :, torch.arange(d)].T
        ),
    ),
    ("sinusoidal_position_encoding", "base 1000", lambda n, d: _sinusoids(n, d, base=1000.0)),
    ("sinusoidal_position_encoding", "float64 from NumPy", lambda n, d: _sinusoids(n, d).double()),
    ("sinusoidal_position_encoding", "transposed", lambda n, d: _sinusoids(n, d).T),
    (
        "sinusoidal_position_encoding",
        "only sines",
        lambda n, d: torch.sin(torch.arange(n)[:, None] / 10000 ** (2 * (torch.arange(d) // 2) / d)),
    ),
    ("sinusoidal_position_encoding", "positions counted backwards", lambda n, d: _sinusoids(n, d).flip(0)),
    # --- 04 alibi_bias
    (
        "alibi_bias",
        "a power-of-two rule rounded up",
        lambda h, n: bc.positional.alibi_bias(2 ** math.ceil(math.log2(h)), n)[:h],
    ),
    (
        "alibi_bias",
        "squared distances",
        lambda h, n: -_slopes(h)[:, None, None] * (torch.arange(n)[:, None] - torch.arange(n)[None]) ** 2,
    ),
    ("alibi_bias", "one slope for every head", lambda h, n: bc.positional.alibi_bias(1, n).expand(h, n, n)),
    ("alibi_bias", "float64 slopes", lambda h, n: bc.positional.alibi_bias(h, n).double()),
    ("alibi_bias", "the slopes in reverse order", lambda h, n: bc.positional.alibi_bias(h, n).flip(0)),
    ("alibi_bias", "a causal mask built in", lambda h, n: bc.positional.alibi_bias(h, n).tril()),
    # --- 05 split_heads
    (
        "split_heads",
        "(batch, heads, d_head, seq)",
        lambda x, h: x.view(x.shape[0], x.shape[1], h, -1).permute(0, 2, 3, 1),
    ),
    ("split_heads", "the heads stacked in front", lambda x, h: torch.stack(x.chunk(h, -1), 0)),
    ("split_heads", "d_head = num_heads // d_model", lambda x, h: x.view(x.shape[0], x.shape[1], h, h // x.shape[-1])),
    (
        "split_heads",
        "12 heads whatever num_heads",
        lambda x, h: (
            x.reshape(x.shape[0], x.shape[1], 12, -1).transpose(1, 2)
            if x.shape[-1] % 12 == 0
            else x.view(x.shape[0], x.shape[1], 12, -1)
        ),
    ),
    ("split_heads", "a tuple of chunks", lambda x, h: x.chunk(h, -1)),
    # --- 05 merge_heads
    ("merge_heads", "the heads averaged", lambda x: x.mean(1)),
    ("merge_heads", "d_head and seq swapped", lambda x: x.transpose(2, 3).reshape(x.shape[0], x.shape[2], -1)),
    ("merge_heads", "heads concatenated along the tokens", lambda x: torch.cat(x.unbind(1), 1)),
    ("merge_heads", "everything flattened", lambda x: x.transpose(1, 2).flatten(1)),
    ("merge_heads", "the heads in reverse order", lambda x: bc.merge_heads(x.flip(1))),
    # --- 05 split_fused_qkv
    (
        "split_fused_qkv",
        "q, k, v in the order k, q, v",
        lambda t, h: (lambda q, k, v: (k, q, v))(*bc.multihead.split_fused_qkv(t, h)),
    ),
    ("split_fused_qkv", "not split into heads", lambda t, h: t.chunk(3, -1)),
    (
        "split_fused_qkv",
        "one tensor of shape (3, b, h, s, d)",
        lambda t, h: torch.stack(bc.multihead.split_fused_qkv(t, h)),
    ),
    ("split_fused_qkv", "the heads of q for all three", lambda t, h: (bc.multihead.split_fused_qkv(t, h)[0],) * 3),
    (
        "split_fused_qkv",
        "a view without transposing",
        lambda t, h: tuple(p.reshape(p.shape[0], h, p.shape[1], -1) for p in t.chunk(3, -1)),
    ),
    # --- 05 multi_head_attention
    (
        "multi_head_attention",
        "no scaling",
        lambda x, a, b, c, o, h, mask=None: (
            bc.merge_heads(_attend(_scores(_heads(x, a, h), _heads(x, b, h)), _heads(x, c, h), mask)[0]) @ o
        ),
    ),
    (
        "multi_head_attention",
        "a causal mask always",
        lambda x, a, b, c, o, h, mask=None: bc.multi_head_attention(x, a, b, c, o, h, bc.causal_mask(x.shape[1])),
    ),
    (
        "multi_head_attention",
        "returns (output, weights)",
        lambda x, a, b, c, o, h, mask=None: (bc.multi_head_attention(x, a, b, c, o, h, mask), None),
    ),
    (
        "multi_head_attention",
        "num_heads ignored: one head",
        lambda x, a, b, c, o, h, mask=None: bc.multi_head_attention(x, a, b, c, o, 1, mask),
    ),
    (
        "multi_head_attention",
        "merge with view",
        lambda x, a, b, c, o, h, mask=None: (
            _attend(_scores(_heads(x, a, h), _heads(x, b, h)) / (x.shape[-1] // h) ** 0.5, _heads(x, c, h), mask)[0]
            .transpose(1, 2)
            .view(x.shape)
            @ o
        ),
    ),
    (
        "multi_head_attention",
        "softmax over the queries",
        lambda x, a, b, c, o, h, mask=None: (
            bc.merge_heads(
                torch.softmax(
                    (_scores(_heads(x, a, h), _heads(x, b, h)) / (x.shape[-1] // h) ** 0.5).masked_fill(
                        ~mask if mask is not None else torch.zeros((), dtype=torch.bool), torch.finfo(x.dtype).min
                    ),
                    -2,
                )
                @ _heads(x, c, h)
            )
            @ o
        ),
    ),
    # --- 06 layer_norm
    (
        "layer_norm",
        "over the tokens",
        lambda x, w, b, eps=1e-12: (
            (x - x.mean(-2, keepdim=True)) / torch.sqrt(x.var(-2, keepdim=True, unbiased=False) + eps) * w + b
        ),
    ),
    (
        "layer_norm",
        "the unbiased variance and eps outside",
        lambda x, w, b, eps=1e-12: (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) * w + b,
    ),
    (
        "layer_norm",
        "the mean not subtracted",
        lambda x, w, b, eps=1e-12: x / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps) * w + b,
    ),
    (
        "layer_norm",
        "divided by the variance",
        lambda x, w, b, eps=1e-12: (
            (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True, unbiased=False) + eps) * w + b
        ),
    ),
    (
        "layer_norm",
        "bias added before the scale",
        lambda x, w, b, eps=1e-12: (F.layer_norm(x, x.shape[-1:], eps=eps) + b) * w,
    ),
    ("layer_norm", "the default eps 1e-5", lambda x, w, b, eps=1e-5: F.layer_norm(x, x.shape[-1:], w, b, eps)),
    # --- 06 feed_forward
    ("feed_forward", "sigmoid", lambda x, w1, b1, w2, b2: torch.sigmoid(x @ w1 + b1) @ w2 + b2),
    (
        "feed_forward",
        "the activation after the second layer only",
        lambda x, w1, b1, w2, b2: F.gelu((x @ w1 + b1) @ w2 + b2),
    ),
    ("feed_forward", "b2 added twice", lambda x, w1, b1, w2, b2: F.gelu(x @ w1 + b1) @ w2 + 2 * b2),
    ("feed_forward", "b1 left out", lambda x, w1, b1, w2, b2: F.gelu(x @ w1) @ w2 + b2),
    (
        "feed_forward",
        "GELU with erf(h / 2) for erf(h / √2)",
        lambda x, w1, b1, w2, b2: (lambda h: 0.5 * h * (1 + torch.erf(h / 2)))(x @ w1 + b1) @ w2 + b2,
    ),
    (
        "feed_forward",
        "a LayerNorm at the end",
        lambda x, w1, b1, w2, b2: F.layer_norm(F.gelu(x @ w1 + b1) @ w2 + b2, (x.shape[-1],)),
    ),
    # --- 06 post_ln_layer
    (
        "post_ln_layer",
        "the attention run twice",
        lambda x, a, f, g1, b1, g2, b2, eps=1e-12: bc.layer_norm(
            bc.layer_norm(x + a(a(x)), g1, b1, eps) + f(bc.layer_norm(x + a(a(x)), g1, b1, eps)), g2, b2, eps
        ),
    ),
    (
        "post_ln_layer",
        "both sub-layers on x in parallel",
        lambda x, a, f, g1, b1, g2, b2, eps=1e-12: bc.layer_norm(x + a(x) + f(x), g2, b2, eps),
    ),
    (
        "post_ln_layer",
        "the residual doubled",
        lambda x, a, f, g1, b1, g2, b2, eps=1e-12: (lambda h: bc.layer_norm(2 * h + f(h), g2, b2, eps))(
            bc.layer_norm(2 * x + a(x), g1, b1, eps)
        ),
    ),
    (
        "post_ln_layer",
        "eps not passed on",
        lambda x, a, f, g1, b1, g2, b2, eps=1e-12: bc.encoder.post_ln_layer(x, a, f, g1, b1, g2, b2),
    ),
    (
        "post_ln_layer",
        "the feed-forward block first",
        lambda x, a, f, g1, b1, g2, b2, eps=1e-12: bc.encoder.post_ln_layer(x, f, a, g1, b1, g2, b2, eps),
    ),
    # --- 06 pre_ln_layer
    (
        "pre_ln_layer",
        "a final LayerNorm with new parameters",
        lambda x, a, f, g1, b1, g2, b2, eps=1e-12: F.layer_norm(
            bc.encoder.pre_ln_layer(x, a, f, g1, b1, g2, b2, eps), x.shape[-1:], eps=eps
        ),
    ),
    (
        "pre_ln_layer",
        "the two LayerNorms swapped",
        lambda x, a, f, g1, b1, g2, b2, eps=1e-12: bc.encoder.pre_ln_layer(x, a, f, g2, b2, g1, b1, eps),
    ),
    (
        "pre_ln_layer",
        "both sub-layers read LN1(x)",
        lambda x, a, f, g1, b1, g2, b2, eps=1e-12: (
            x + a(bc.layer_norm(x, g1, b1, eps)) + f(bc.layer_norm(x, g1, b1, eps))
        ),
    ),
    ("pre_ln_layer", "the layer's input returned", lambda x, a, f, g1, b1, g2, b2, eps=1e-12: x),
    (
        "pre_ln_layer",
        "eps not passed on",
        lambda x, a, f, g1, b1, g2, b2, eps=1e-12: bc.encoder.pre_ln_layer(x, a, f, g1, b1, g2, b2, 1e-5),
    ),
    # --- 04 bert_embeddings (q: position_ids)
    (
        "bert_embeddings",
        "the segment table indexed by position",
        lambda i, t, w, p, s, g, b, eps=1e-12, q=None: bc.layer_norm(
            w[i] + _rows(p, i, q) + s[: i.shape[1]] if s.shape[0] >= i.shape[1] else w[i] + _rows(p, i, q), g, b, eps
        ),
    ),
    (
        "bert_embeddings",
        "the sum averaged",
        lambda i, t, w, p, s, g, b, eps=1e-12, q=None: bc.layer_norm((w[i] + _rows(p, i, q) + s[t]) / 3, g, b, eps),
    ),
    (
        "bert_embeddings",
        "positions from the last row",
        lambda i, t, w, p, s, g, b, eps=1e-12, q=None: bc.layer_norm(w[i] + p[-i.shape[1] :] + s[t], g, b, eps),
    ),
    (
        "bert_embeddings",
        "LayerNorm without gamma and beta",
        lambda i, t, w, p, s, g, b, eps=1e-12, q=None: F.layer_norm(
            w[i] + _rows(p, i, q) + s[t], (w.shape[1],), eps=eps
        ),
    ),
    (
        "bert_embeddings",
        "one-hot matmul in float64",
        lambda i, t, w, p, s, g, b, eps=1e-12, q=None: bc.layer_norm(
            F.one_hot(i, w.shape[0]).double() @ w.double() + _rows(p, i, q).double() + s[t].double(),
            g.double(),
            b.double(),
            eps,
        ),
    ),
    # --- 07 mlm_head
    (
        "mlm_head",
        "an untied decoder from the dense weight",
        lambda h, dw, db, g, b, e, eb, eps=1e-12: bc.layer_norm(F.gelu(h @ dw.T + db), g, b, eps) @ dw.T,
    ),
    (
        "mlm_head",
        "the decoder bias added before the decoder",
        lambda h, dw, db, g, b, e, eb, eps=1e-12: (bc.layer_norm(F.gelu(h @ dw.T + db), g, b, eps)) @ e.T + eb.mean(),
    ),
    (
        "mlm_head",
        "tanh GELU",
        lambda h, dw, db, g, b, e, eb, eps=1e-12: (
            bc.layer_norm(F.gelu(h @ dw.T + db, approximate="tanh"), g, b, eps) @ e.T + eb
        ),
    ),
    (
        "mlm_head",
        "log-softmax returned",
        lambda h, dw, db, g, b, e, eb, eps=1e-12: torch.log_softmax(mlm_head(h, dw, db, g, b, e, eb, eps), -1),
    ),
    (
        "mlm_head",
        "the LayerNorm's parameters swapped",
        lambda h, dw, db, g, b, e, eb, eps=1e-12: mlm_head(h, dw, db, b, g, e, eb, eps),
    ),
    # --- 07 hf_to_ours
    ("hf_to_ours", "every key kept as it is", lambda key, prefixed=False: key),
    ("hf_to_ours", "dots replaced by underscores", lambda key, prefixed=False: key.replace(".", "_")),
    (
        "hf_to_ours",
        "the right name, always prefixed",
        lambda key, prefixed=False: None if hf_to_ours(key) is None else "bert." + hf_to_ours(key),
    ),
    ("hf_to_ours", "'' instead of None for derived keys", lambda key, prefixed=False: hf_to_ours(key, prefixed) or ""),
    (
        "hf_to_ours",
        "self. not dropped",
        lambda key, prefixed=False: (
            None
            if hf_to_ours(key, prefixed) is None
            else hf_to_ours(key, prefixed).replace(".attention.query", ".attention.self.query")
        ),
    ),
    # --- 07 count_parameters
    (
        "count_parameters",
        "the tied decoder counted on top",
        lambda c: bc.count_parameters(c) + c.vocab_size * c.hidden_size,
    ),
    ("count_parameters", "the pooler's bias missing", lambda c: bc.count_parameters(c) - c.hidden_size),
    ("count_parameters", "a float count", lambda c: float(bc.count_parameters(c))),
    ("count_parameters", "BERT-base's number for every config", lambda c: 109_482_240),
    (
        "count_parameters",
        "the feed-forward without biases",
        lambda c: bc.count_parameters(c) - c.num_hidden_layers * (c.intermediate_size + c.hidden_size),
    ),
]


def _sinusoids(n, d, base=10000.0):
    angle = torch.arange(n)[:, None] / base ** (torch.arange(0, d, 2) / d)
    table = torch.zeros(n, d)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d // 2])
    return table


def _slopes(h):
    return -bc.positional.alibi_bias(h, 2)[:, 0, 1]


# The answers whose message is only generic ("wrong values, the largest difference is ..."): the
# engine's blind spots, kept in view. An answer that moves in or out of this set fails its test.
GENERIC = {
    "hf_to_ours:dots replaced by underscores",
    "feed_forward:GELU with erf(h / 2) for erf(h / √2)",  # the block is right but for its activation's constant
    # The summary once named the kind of case these fail on; no pair of cases varies that kind alone (the
    # masked cases also differ in their sizes from the unmasked ones, the eps left out comes with tiny
    # inputs), so it no longer does: generic until the case sets isolate it.
    "multi_head_attention:a causal mask always",
}
IDS = [f"{name}:{what}" for name, what, _ in ANSWERS]


@pytest.mark.parametrize(
    ("name", "fn", "answer"), [(n, f, i) for (n, _, f), i in zip(ANSWERS, IDS, strict=True)], ids=IDS
)
def test_an_unforeseen_wrong_answer_is_judged_wrong(name, fn, answer):
    result = check(name, fn)
    assert result.status == "wrong", result.message
    assert is_specific(result) == (answer not in GENERIC), result.message


def test_at_least_five_unforeseen_answers_per_exercise_of_notebooks_01_to_07():
    counts = {}
    for name, *_ in ANSWERS:
        counts[name] = counts.get(name, 0) + 1
    assert min(counts.values()) >= 5, counts
    assert set(IDS) >= GENERIC
