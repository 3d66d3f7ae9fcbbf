"""The measurements behind the explorers of notebooks 01-07, as pure, seeded functions.

An explorer (``bertcourse.widgets``) is a picture of a number; this module computes the
number. Each function here takes plain arguments (sizes, switches, a seed, a model), returns
tensors and floats, and gives the same result for the same arguments, so it can be called
from a script, asserted in a test, or reused in a later notebook without a widget in sight:

    softmax_saturation(d_k, scaled)              one query's softmax over random keys: entropy, Jacobian (02)
    masked_attention(lengths, padding, causal)   a padded batch through masked attention (03)
    sinusoid_wavelength(dimension, d_model)      how many positions one turn of a sinusoid column takes (04)
    gradient_norms_per_layer(depth, residual)    the gradient reaching each layer of a deep stack (06)
    attention_maps(model, tokenizer, text)       a real BERT's attention maps for a sentence (01, 05, 07)

Why apart from the widgets: drawing and measuring change for different reasons, and a
measurement should be testable (and usable) where ipywidgets and matplotlib are not
installed. So this module imports neither; a test proves it.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._validation import describe, require_positive_int, require_seed
from .attention import attention_scores, qkv_projection, scaled_dot_product_attention
from .masks import causal_mask, combine_masks, padding_mask

__all__ = [
    "attention_maps",
    "gradient_norms_per_layer",
    "masked_attention",
    "sinusoid_wavelength",
    "softmax_saturation",
]


def softmax_saturation(d_k: int, scaled: bool = True, num_keys: int = 16, seed: int = 0) -> dict:
    """One query's attention weights over ``num_keys`` random keys, and how saturated the softmax is.

    q and the keys have independent N(0, 1) entries, so the score q.k has variance d_k:
    unscaled, a large d_k spreads the scores out, the softmax puts almost all its weight
    on one key and its gradient vanishes; divided by sqrt(d_k) (``scaled``) the scores
    have variance 1 whatever d_k is. ``seed`` fixes q and the keys (a generator of its
    own: the global random state is left alone), and the same q and keys are used with
    and without the scale.

    Returns a dict: ``scores`` (num_keys,) after any scaling, ``weights`` (num_keys,) their
    softmax, ``entropy`` -sum p log p in nats, ``max_entropy`` log(num_keys) (uniform
    weights), ``jacobian_norm`` the Frobenius norm of d weights / d scores, and
    ``score_std`` the standard deviation of the scores.
    """
    require_positive_int("d_k", d_k)
    require_positive_int("num_keys", num_keys)
    _require_bool("scaled", scaled)
    require_seed(seed)
    return _softmax_saturation(d_k, scaled, num_keys, seed)


def _softmax_saturation(d_k, scaled, num_keys, seed):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(1, d_k, generator=generator)  # (1, d_k): one query
    k = torch.randn(num_keys, d_k, generator=generator)  # (num_keys, d_k)
    scores = attention_scores(q, k)[0]  # (num_keys,), variance d_k
    if scaled:
        scores = scores / math.sqrt(d_k)  # (num_keys,), variance 1 again
    weights = torch.softmax(scores, dim=-1)  # (num_keys,)
    jacobian = torch.diag(weights) - torch.outer(weights, weights)  # (num_keys, num_keys): d weights_i / d scores_j
    return {
        "scores": scores,
        "weights": weights,
        "entropy": float(torch.special.entr(weights).sum()),  # -sum p log p, with 0 log 0 = 0
        "max_entropy": math.log(num_keys),
        "jacobian_norm": float(torch.linalg.matrix_norm(jacobian)),
        "score_std": float(scores.std()),
    }


def masked_attention(
    lengths, padding: bool = True, causal: bool = False, *, max_len: int | None = None, d_model: int = 8, seed: int = 0
) -> dict:
    """A padded batch of random token vectors through scaled dot-product attention, masks on or off.

    Sentence b has ``lengths[b]`` real tokens and is padded to the longest with [PAD], whose
    vector is one shared random vector. Each sentence draws ``max_len`` random vectors
    (default ``max(lengths)``) and is cut to its length, so with a fixed ``max_len`` a
    shorter length shows the same sentence, shortened. W_Q, W_K and W_V are random
    (d_model, d_model) matrices scaled by 1/sqrt(d_model); ``seed`` fixes everything (a
    generator of its own). ``padding`` hides the [PAD] keys from every query, ``causal``
    hides the keys after each query.

    Returns a dict: ``weights`` (batch, seq, seq) the attention weights, ``mask`` (batch, seq,
    seq) bool, True = may attend (all True when no mask is on), ``real`` (batch, seq) bool,
    True at real tokens; seq = max(lengths).
    """
    if (
        not isinstance(lengths, (list, tuple))
        or not lengths
        or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in lengths)
    ):
        raise ValueError(f"`lengths` must be a non-empty list of positive ints, one per sentence, got {lengths!r}.")
    if max_len is None:
        max_len = max(lengths)
    require_positive_int("max_len", max_len)
    if max(lengths) > max_len:
        raise ValueError(f"`lengths` must be at most `max_len`={max_len}, got {list(lengths)}.")
    _require_bool("padding", padding)
    _require_bool("causal", causal)
    require_positive_int("d_model", d_model)
    require_seed(seed)
    return _masked_attention(list(lengths), padding, causal, max_len, d_model, seed)


def _masked_attention(lengths, padding, causal, max_len, d_model, seed):
    generator = torch.Generator().manual_seed(seed)
    vectors = torch.randn(len(lengths), max_len, d_model, generator=generator)  # (batch, max_len, d)
    pad_vector = torch.randn(d_model, generator=generator)  # (d,): every [PAD] looks the same
    w_q, w_k, w_v = torch.randn(3, d_model, d_model, generator=generator) / math.sqrt(d_model)  # (d, d) each
    seq_len = max(lengths)
    real = padding_mask(lengths, seq_len)  # (batch, seq): True at real tokens
    x = torch.where(real[..., None], vectors[:, :seq_len], pad_vector)  # (batch, seq, d)
    q, k, v = qkv_projection(x, w_q, w_k, w_v)  # (batch, seq, d) each
    mask = combine_masks(
        real[:, None, :] if padding else None,  # (batch, 1, seq): no query looks at a [PAD] key
        causal_mask(seq_len) if causal else None,  # (seq, seq): no query looks ahead
    )
    _, weights = scaled_dot_product_attention(q, k, v, mask)  # (batch, seq, seq)
    if mask is None:
        mask = torch.ones(seq_len, seq_len, dtype=torch.bool)  # (seq, seq): every key allowed
    return {
        "weights": weights,  # (batch, seq, seq)
        "mask": mask.expand(len(lengths), seq_len, seq_len).clone(),  # (batch, seq, seq)
        "real": real,  # (batch, seq)
    }


def sinusoid_wavelength(dimension: int, d_model: int) -> float:
    """How many positions one full turn of column ``dimension`` of the sinusoidal table takes.

    Columns 2i (sin) and 2i + 1 (cos) share the frequency 1 / 10000^(2i / d_model), so
    the wavelength is 2 pi 10000^(2i / d_model): 2 pi (about 6.3 positions) for columns 0
    and 1, growing geometrically to almost 2 pi 10000 for the last pair.
    """
    require_positive_int("d_model", d_model)
    if isinstance(dimension, bool) or not isinstance(dimension, int) or not 0 <= dimension < d_model:
        raise ValueError(f"`dimension` must be an int from 0 to {d_model - 1} (d_model - 1), got {dimension!r}.")
    pair = dimension // 2  # dimensions 2i (sin) and 2i + 1 (cos) share a frequency
    return 2 * math.pi * 10000.0 ** (2 * pair / d_model)


def gradient_norms_per_layer(
    depth: int, residual: bool, layer_norm: bool = False, width: int = 64, seed: int = 0, weight_scale: float = 1.0
) -> torch.Tensor:
    """Gradient norm of each layer's weight in a stack of ``depth`` Linear + tanh layers, after one backward pass.

    The experiment of notebook 06, section 3. Layer l computes ``h = tanh(W_l h + b_l)``, or
    ``h = h + tanh(W_l h + b_l)`` with ``residual``; with ``layer_norm``, a LayerNorm
    without learned scale or shift (eps 1e-12) then normalises each layer's output, as
    BERT's Post-LN does. The stack starts from PyTorch's default initialisation, takes a
    batch of 32 random vectors of size ``width`` and one mean squared error against 32
    random targets, all in float64 so that tiny gradients are exact enough to print.
    ``weight_scale`` multiplies every weight after that initialisation (1: PyTorch's default;
    sqrt(3): Glorot's uniform init for a square layer), the scale that decides whether a
    plain stack's gradient vanishes.

    ``seed`` fixes the weights and the data: every setting of ``residual`` and
    ``layer_norm`` runs on the same ones, and the caller's random state is left as
    it was. Returns (depth,) float64: entry 0 is the layer nearest the input.
    """
    require_positive_int("depth", depth)
    require_positive_int("width", width)
    _require_bool("residual", residual)
    _require_bool("layer_norm", layer_norm)
    require_seed(seed)
    if isinstance(weight_scale, bool) or not isinstance(weight_scale, (int, float)) or not 0 < weight_scale < math.inf:
        raise ValueError(f"`weight_scale` must be a positive number, got {weight_scale!r}.")
    return _gradient_norms_per_layer(depth, residual, layer_norm, width, seed, float(weight_scale))


def _gradient_norms_per_layer(depth, residual, layer_norm, width, seed, weight_scale=1.0):
    with torch.random.fork_rng(devices=[]), torch.enable_grad():  # restores the CPU generator afterwards
        torch.default_generator.manual_seed(seed)  # as torch.manual_seed(seed) does on the CPU
        layers = [torch.nn.Linear(width, width, dtype=torch.float64) for _ in range(depth)]
        with torch.no_grad():
            for layer in layers:
                layer.weight *= weight_scale  # 1: PyTorch's default initialisation, unchanged
        h = torch.randn(32, width, dtype=torch.float64)  # (batch, width)
        target = torch.randn(32, width, dtype=torch.float64)  # (batch, width)
        for layer in layers:
            h = h + torch.tanh(layer(h)) if residual else torch.tanh(layer(h))  # (batch, width)
            if layer_norm:
                h = F.layer_norm(h, (width,), eps=1e-12)  # (batch, width): each vector back to mean 0, variance 1
        F.mse_loss(h, target).backward()
    return torch.stack([layer.weight.grad.norm() for layer in layers])  # (depth,)


def attention_maps(model, tokenizer, text: str, pair: str | None = None) -> tuple[list[str], list[torch.Tensor]]:
    """Run ``model`` once on ``text``: its tokens and one (heads, seq, seq) CPU float tensor per layer.

    With ``pair``, the input is the sentence pair ``[CLS] text [SEP] pair [SEP]``, with segment
    ids 0 and 1 (``tokenizer(text, pairs=pair)``).

    ``model`` is a ``bertcourse.BertModel`` (or a Hugging Face BERT loaded with
    ``attn_implementation="eager"``) in eval mode, ``tokenizer`` its tokenizer: called on
    ``text``, it returns (1, seq) ``input_ids``, ``attention_mask`` and ``token_type_ids``.
    The model runs without gradients on its own device; the maps come back to the CPU.
    A model in training mode is refused (dropout would make every map random), and so is
    one that returns no maps.
    """
    if not isinstance(text, str):
        raise TypeError(f"`text` must be a string (one sentence), got {describe(text)}.")
    if pair is not None and not isinstance(pair, str):
        raise TypeError(f"`pair` must be a string (the second sentence) or None, got {describe(pair)}.")
    if getattr(model, "training", False):
        raise ValueError(
            "`model` is in training mode, so dropout would randomise every map: call `model.eval()` first "
            "(`load_pretrained()` returns it in eval mode)."
        )
    return _attention_maps(model, tokenizer, text, pair)


def _attention_maps(model, tokenizer, text, pair=None):
    batch = tokenizer(text) if pair is None else tokenizer(text, pairs=pair)  # (1, seq) tensors
    device = next(model.parameters()).device
    with torch.no_grad():
        out = model(
            input_ids=batch["input_ids"].to(device),
            attention_mask=batch["attention_mask"].to(device),
            token_type_ids=batch["token_type_ids"].to(device),
            output_attentions=True,
        )
    if not out.attentions or out.attentions[0] is None:
        raise ValueError(
            "`model` returned no attention maps. A Hugging Face model must be loaded with "
            'attn_implementation="eager" to return them.'
        )
    tokens = tokenizer.convert_ids_to_tokens(batch["input_ids"][0])
    attentions = [layer_maps[0].detach().cpu().float() for layer_maps in out.attentions]  # (heads, seq, seq) each
    return tokens, attentions


def _require_bool(name: str, value) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"`{name}` must be True or False, got {describe(value)}.")
