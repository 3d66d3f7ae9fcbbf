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

# --- notebook 04 ---------------------------------------------------------------------------------

RIGHT["bert_embeddings"] = """\
def my_bert_embeddings(
    input_ids, token_type_ids, word_embeddings, position_embeddings, token_type_embeddings, ln_weight, ln_bias,
    eps=1e-12, position_ids=None,
):  # fmt: skip
    if position_ids is None:
        position_ids = torch.arange(input_ids.shape[-1]).expand_as(input_ids)  # (batch, seq): 0..seq-1 in every row
    summed = (
        F.embedding(input_ids, word_embeddings)
        + F.embedding(position_ids, position_embeddings)
        + F.embedding(token_type_ids, token_type_embeddings)
    )  # (batch, seq, hidden)
    return layer_norm(summed, ln_weight, ln_bias, eps)
"""

WRONG["bert_embeddings"] = [
    (
        "position_ids ignored",
        """\
def my_bert_embeddings(
    input_ids, token_type_ids, word_embeddings, position_embeddings, token_type_embeddings, ln_weight, ln_bias,
    eps=1e-12, position_ids=None,
):  # fmt: skip
    seq_len = input_ids.shape[1]
    summed = word_embeddings[input_ids] + position_embeddings[:seq_len] + token_type_embeddings[token_type_ids]
    return layer_norm(summed, ln_weight, ln_bias, eps)
""",
    ),
    (
        "PyTorch's default eps",
        """\
def my_bert_embeddings(
    input_ids, token_type_ids, word_embeddings, position_embeddings, token_type_embeddings, ln_weight, ln_bias,
    eps=1e-12, position_ids=None,
):  # fmt: skip
    if position_ids is None:
        position_ids = torch.arange(input_ids.shape[1])
    summed = word_embeddings[input_ids] + position_embeddings[position_ids] + token_type_embeddings[token_type_ids]
    return torch.nn.functional.layer_norm(summed, summed.shape[-1:], ln_weight, ln_bias)
""",
    ),
]

# --- notebook 07 ---------------------------------------------------------------------------------

RIGHT["mlm_head"] = """\
import math

import torch.nn.functional as F


def my_mlm_head(hidden, dense_weight, dense_bias, ln_weight, ln_bias, word_embeddings, decoder_bias, eps=1e-12):
    h = F.linear(hidden, dense_weight, dense_bias)  # (..., d): nn.Linear's own formula, x W^T + b
    h = 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))  # the exact GELU, x * Phi(x)
    h = layer_norm(h, ln_weight, ln_bias, eps)  # (..., d)
    return torch.einsum("...d,vd->...v", h, word_embeddings) + decoder_bias  # (..., vocab)
"""

WRONG["mlm_head"] = [
    (
        "ReLU instead of GELU",
        """\
def my_mlm_head(hidden, dense_weight, dense_bias, ln_weight, ln_bias, word_embeddings, decoder_bias, eps=1e-12):
    h = torch.relu(hidden @ dense_weight.T + dense_bias)
    h = layer_norm(h, ln_weight, ln_bias, eps)
    return h @ word_embeddings.T + decoder_bias
""",
    ),
    (
        "the decoder's bias left out",
        """\
import torch.nn.functional as F


def my_mlm_head(hidden, dense_weight, dense_bias, ln_weight, ln_bias, word_embeddings, decoder_bias, eps=1e-12):
    h = layer_norm(F.gelu(hidden @ dense_weight.T + dense_bias), ln_weight, ln_bias, eps)
    return h @ word_embeddings.T
""",
    ),
]

RIGHT["hf_to_ours"] = """\
import re


def my_hf_to_ours(key, prefixed=False):
    key = re.sub(r"\\.gamma$", ".weight", re.sub(r"\\.beta$", ".bias", key.removeprefix("bert.")))
    if key == "embeddings.position_ids" or key.startswith("cls.predictions.decoder."):
        return None  # the position buffer and the tied decoder: no weight of their own
    heads = {
        "cls.predictions.transform.dense.": "mlm.dense.",
        "cls.predictions.transform.LayerNorm.": "mlm.layer_norm.",
        "cls.predictions.bias": "mlm.bias",
        "cls.seq_relationship.": "nsp.",
    }
    for theirs, ours in heads.items():
        if key.startswith(theirs):
            return ours + key[len(theirs) :]
    parts = {  # the layer's part after "encoder.layer.{i}.": the longer names first
        "attention.self.": "attention.",
        "attention.output.dense.": "attention.output.",
        "attention.output.LayerNorm.": "attention_norm.",
        "intermediate.dense.": "feed_forward.intermediate.",
        "output.dense.": "feed_forward.output.",
        "output.LayerNorm.": "output_norm.",
    }
    layer = re.match(r"encoder\\.layer\\.(\\d+)\\.(.*)", key)
    if layer:
        number, rest = layer.groups()
        part = next(p for p in parts if rest.startswith(p))
        key = f"encoder.layers.{number}.{parts[part]}{rest[len(part):]}"
    key = key.replace("embeddings.LayerNorm.", "embeddings.layer_norm.")
    return "bert." + key if prefixed else key
"""

WRONG["hf_to_ours"] = [
    (
        "`prefixed` ignored",
        """\
def my_hf_to_ours(key, prefixed=False):
    key = key.removeprefix("bert.")
    if key.endswith(".gamma"):
        key = key[: -len("gamma")] + "weight"
    if key.endswith(".beta"):
        key = key[: -len("beta")] + "bias"
    if key in ("embeddings.position_ids", "cls.predictions.decoder.weight", "cls.predictions.decoder.bias"):
        return None
    key = key.replace("encoder.layer.", "encoder.layers.")
    for theirs, ours in [
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
    ]:
        if theirs in key:
            return key.replace(theirs, ours)
    return key
""",
    ),
    (
        "the shorter LayerNorm pattern first",
        """\
def my_hf_to_ours(key, prefixed=False):
    key = key.removeprefix("bert.").replace(".gamma", ".weight").replace(".beta", ".bias")
    if key in ("embeddings.position_ids", "cls.predictions.decoder.weight", "cls.predictions.decoder.bias"):
        return None
    head = key.startswith("cls.")
    key = key.replace("encoder.layer.", "encoder.layers.")
    for theirs, ours in [
        ("embeddings.LayerNorm.", "embeddings.layer_norm."),
        (".attention.self.", ".attention."),
        (".output.LayerNorm.", ".output_norm."),
        (".attention.output.dense.", ".attention.output."),
        (".intermediate.dense.", ".feed_forward.intermediate."),
        (".output.dense.", ".feed_forward.output."),
        ("cls.predictions.transform.dense.", "mlm.dense."),
        ("cls.predictions.transform.LayerNorm.", "mlm.layer_norm."),
        ("cls.predictions.bias", "mlm.bias"),
        ("cls.seq_relationship.", "nsp."),
    ]:
        if theirs in key:
            key = key.replace(theirs, ours)
            break
    return "bert." + key if prefixed and not head else key
""",
    ),
]

RIGHT["count_parameters"] = """\
def my_count_parameters(config):
    d, d_ff, n = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    rows = config.vocab_size + config.max_position_embeddings + config.type_vocab_size
    weights = rows * d + n * (4 * d * d + 2 * d * d_ff) + d * d  # tables; Q, K, V, W_O, FFN; pooler
    biases = n * (4 * d + d_ff + d) + d  # every linear map's bias
    norms = 2 * d * (1 + 2 * n)  # gamma and beta: the embeddings' LayerNorm and two per layer
    return weights + biases + norms
"""

WRONG["count_parameters"] = [
    (
        "forgetting the biases",
        """\
def my_count_parameters(config):
    d, d_ff, n = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    tables = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * d
    layer = 4 * d * d + 2 * d * d_ff + 2 * 2 * d
    return tables + 2 * d + n * layer + d * d
""",
    ),
    (
        "forgetting the pooler",
        """\
def my_count_parameters(config):
    d, d_ff = config.hidden_size, config.intermediate_size
    tables = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * d
    layer = 4 * (d * d + d) + (d * d_ff + d_ff) + (d_ff * d + d) + 4 * d
    return tables + 2 * d + config.num_hidden_layers * layer
""",
    ),
]

# --- notebook 02 ---------------------------------------------------------------------------------

RIGHT["scaled_dot_product_attention"] = """\
from bertcourse import masked_softmax


def my_scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5  # (..., q_len, k_len)
    weights = masked_softmax(scores, mask)  # (..., q_len, k_len)
    return torch.matmul(weights, v), weights  # (..., q_len, d_v), (..., q_len, k_len)
"""

WRONG["scaled_dot_product_attention"] = [
    (
        "the mask ignored",
        """\
import math

from bertcourse import attention_scores


def my_scaled_dot_product_attention(q, k, v, mask=None):
    weights = torch.softmax(attention_scores(q, k) / math.sqrt(q.shape[-1]), dim=-1)
    return weights @ v, weights
""",
    ),
    (
        "k.T",
        """\
import math

from bertcourse import masked_softmax


def my_scaled_dot_product_attention(q, k, v, mask=None):
    weights = masked_softmax(q @ k.T / math.sqrt(q.shape[-1]), mask)
    return weights @ v, weights
""",
    ),
]

# --- notebook 09 ---------------------------------------------------------------------------------

RIGHT["mlm_corrupt"] = """\
def my_mlm_corrupt(input_ids, selected, draws, random_ids, mask_token_id):
    labels = input_ids.masked_fill(~selected, -100)  # the original id where selected
    to_mask = selected & (draws < 0.8)
    to_random = selected & (draws >= 0.8) & (draws < 0.9)
    corrupted = input_ids.clone()
    corrupted[to_mask] = mask_token_id
    corrupted[to_random] = random_ids[to_random]
    return corrupted, labels
"""

WRONG["mlm_corrupt"] = [
    (
        "labels on every token",
        """\
def my_mlm_corrupt(input_ids, selected, draws, random_ids, mask_token_id):
    corrupted = torch.where(selected & (draws < 0.8), mask_token_id, input_ids)
    corrupted = torch.where(selected & (draws >= 0.8) & (draws < 0.9), random_ids, corrupted)
    return corrupted, input_ids.clone()
""",
    ),
    (
        "labels taken after the corruption",
        """\
def my_mlm_corrupt(input_ids, selected, draws, random_ids, mask_token_id):
    corrupted = torch.where(selected & (draws < 0.8), mask_token_id, input_ids)
    corrupted = torch.where(selected & (draws >= 0.8) & (draws < 0.9), random_ids, corrupted)
    return corrupted, torch.where(selected, corrupted, -100)
""",
    ),
]
