"""Answers to the build exercises, as a learner types them into a notebook's skeleton cell.

Notebooks are committed unsolved, but a learner runs them solved or wrong. ``tests/test_notebook_answers.py``
puts these answers in place of the skeleton cells and runs the notebook (COURSE.md section 5):

- ``RIGHT[name]``: the source of a skeleton cell answered right, written differently from the package's
  reference (einsum, ``torch.var_mean``, ``torch.nn.functional``...), so that it proves the later cells give
  the committed outputs with the learner's own function, not only with the reference.
- ``WRONG[name]``: ``(label, source)`` pairs, each a realistic mistake; with any of them the notebook still
  runs to its end, and the exercise's ``use`` or ``check`` cell says it is wrong.

Each source defines the function the notebook's skeleton defines (``my_<name>``) and imports what it needs
beyond ``torch``, so that it runs in the notebook and on its own. An answer to an encoder layer may call
``layer_norm`` by plain name, as a learner does: in the notebook the ``use`` cell of ``layer_norm`` binds it,
and the unit test binds it to ``bertcourse.layer_norm``.
"""

from __future__ import annotations

RIGHT: dict[str, str] = {}
WRONG: dict[str, list[tuple[str, str]]] = {}

# --- notebook 06 ---------------------------------------------------------------------------------

RIGHT["layer_norm"] = """\
def my_layer_norm(x, weight, bias, eps=1e-12):
    variance, mean = torch.var_mean(x, dim=-1, keepdim=True, unbiased=False)  # (..., 1) each
    return (x - mean) * torch.rsqrt(variance + eps) * weight + bias  # (..., d)
"""

WRONG["layer_norm"] = [
    (
        "unbiased variance",
        """\
def my_layer_norm(x, weight, bias, eps=1e-12):
    mean = x.mean(-1, keepdim=True)
    variance = x.var(-1, keepdim=True)
    return (x - mean) / torch.sqrt(variance + eps) * weight + bias
""",
    ),
    (
        "eps outside the square root",
        """\
def my_layer_norm(x, weight, bias, eps=1e-12):
    mean = x.mean(-1, keepdim=True)
    std = ((x - mean) ** 2).mean(-1, keepdim=True).sqrt()
    return weight * (x - mean) / (std + eps) + bias
""",
    ),
]

RIGHT["feed_forward"] = """\
import math


def my_feed_forward(x, w1, b1, w2, b2):
    h = torch.einsum("...d,df->...f", x, w1) + b1  # (..., d_ff)
    h = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))  # the exact GELU, x * Phi(x)
    return torch.einsum("...f,fd->...d", h, w2) + b2  # (..., d_model)
"""

WRONG["feed_forward"] = [
    (
        "ReLU",
        """\
def my_feed_forward(x, w1, b1, w2, b2):
    return torch.relu(x @ w1 + b1) @ w2 + b2
""",
    ),
    (
        "tanh GELU",
        """\
import math


def my_feed_forward(x, w1, b1, w2, b2):
    h = x @ w1 + b1
    h = 0.5 * h * (1 + torch.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)))
    return h @ w2 + b2
""",
    ),
]

RIGHT["post_ln_layer"] = """\
def my_post_ln_layer(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    width = x.shape[-1:]
    h = torch.nn.functional.layer_norm(x + attention(x), width, ln1_weight, ln1_bias, eps)
    return torch.nn.functional.layer_norm(h + feed_forward(h), width, ln2_weight, ln2_bias, eps)
"""

WRONG["post_ln_layer"] = [
    (
        "Pre-LN layout",
        """\
def my_post_ln_layer(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = x + attention(layer_norm(x, ln1_weight, ln1_bias, eps))
    return h + feed_forward(layer_norm(h, ln2_weight, ln2_bias, eps))
""",
    ),
    (
        "no residual around the feed-forward",
        """\
def my_post_ln_layer(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = layer_norm(x + attention(x), ln1_weight, ln1_bias, eps)
    return layer_norm(feed_forward(h), ln2_weight, ln2_bias, eps)
""",
    ),
]

# --- notebook 01 (its helper writes here) ----------------------------------------------------------

RIGHT["qkv_from_linear"] = """\
def my_qkv_from_linear(x, w_q, b_q, w_k, b_k, w_v, b_v):
    return tuple(torch.nn.functional.linear(x, w, b) for w, b in ((w_q, b_q), (w_k, b_k), (w_v, b_v)))
"""

WRONG["qkv_from_linear"] = [
    (
        "the weights as they are stored",
        """\
def my_qkv_from_linear(x, w_q, b_q, w_k, b_k, w_v, b_v):
    return x @ w_q + b_q, x @ w_k + b_k, x @ w_v + b_v
""",
    ),
    (
        "no biases",
        """\
def my_qkv_from_linear(x, w_q, b_q, w_k, b_k, w_v, b_v):
    return x @ w_q.T, x @ w_k.T, x @ w_v.T
""",
    ),
]

RIGHT["attention_scores"] = """\
def my_attention_scores(q, k):
    return torch.einsum("...id,...jd->...ij", q, k)  # (..., q_len, k_len): one dot product per pair
"""

WRONG["attention_scores"] = [
    (
        "the keys not transposed",
        """\
def my_attention_scores(q, k):
    return q @ k
""",
    ),
    (
        "k.T on a batch",
        """\
def my_attention_scores(q, k):
    return q @ k.T
""",
    ),
]

# --- notebook 05 (its helper writes here) ----------------------------------------------------------

RIGHT["split_heads"] = """\
def my_split_heads(x, num_heads):
    batch, seq, d_model = x.shape
    return x.reshape(batch, seq, num_heads, -1).permute(0, 2, 1, 3)  # (batch, heads, seq, d_head)
"""

WRONG["split_heads"] = [
    (
        "a view without the transpose",
        """\
def my_split_heads(x, num_heads):
    batch, seq, d_model = x.shape
    return x.view(batch, seq, num_heads, d_model // num_heads)
""",
    ),
    (
        "a plain view to (batch, heads, seq, d_head)",
        """\
def my_split_heads(x, num_heads):
    batch, seq, d_model = x.shape
    return x.view(batch, num_heads, seq, d_model // num_heads)
""",
    ),
]

RIGHT["merge_heads"] = """\
def my_merge_heads(x):
    return torch.cat(x.unbind(dim=1), dim=-1)  # the heads side by side, in head order: (batch, seq, heads * d_head)
"""

WRONG["merge_heads"] = [
    (
        "a reshape without transposing back",
        """\
def my_merge_heads(x):
    batch, heads, seq, d_head = x.shape
    return x.reshape(batch, seq, heads * d_head)
""",
    ),
    (
        "view after the transpose",
        """\
def my_merge_heads(x):
    batch, heads, seq, d_head = x.shape
    return x.transpose(1, 2).view(batch, seq, heads * d_head)
""",
    ),
]

# --- notebook 03 ---------------------------------------------------------------------------------

RIGHT["masked_softmax"] = """\
def my_masked_softmax(scores, mask=None):
    if mask is None:
        return scores.softmax(dim=-1)
    lowest = scores.new_tensor(torch.finfo(scores.dtype).min)  # a 0-d tensor of the scores' dtype
    weights = torch.where(mask, scores, lowest).softmax(dim=-1)  # (..., q_len, k_len)
    return torch.where(mask.any(dim=-1, keepdim=True), weights, torch.zeros_like(weights))  # no key: all 0
"""

WRONG["masked_softmax"] = [
    (
        "a fill of -inf",
        """\
def my_masked_softmax(scores, mask=None):
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1)
""",
    ),
    (
        "a fill of -1e9",
        """\
def my_masked_softmax(scores, mask=None):
    if mask is None:
        return torch.softmax(scores, dim=-1)
    weights = torch.softmax(scores.masked_fill(~mask, -1e9), dim=-1)
    return weights * mask.any(dim=-1, keepdim=True)
""",
    ),
]
