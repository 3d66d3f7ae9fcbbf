"""Where BERT's parameters are: counted from the config, module by module.

BERT-base has about 110M parameters. ``parameter_breakdown`` derives every count from
the shapes of the weight matrices, so it can be read next to the architecture; a test
proves it equals ``sum(p.numel() for p in BertModel(config).parameters())``. Each public
function checks its argument and calls its core ``_<name>`` (the rule: ``bertcourse._validation``).
"""

from __future__ import annotations

from ._validation import require_positive_int
from .config import BertConfig, require_config


def linear_parameters(d_in: int, d_out: int) -> int:
    """A d_in -> d_out linear layer: a (d_out, d_in) weight and a (d_out,) bias."""
    require_positive_int("d_in", d_in)
    require_positive_int("d_out", d_out)
    return _linear_parameters(d_in, d_out)


def _linear_parameters(d_in, d_out):
    """d_in x d_out weights, plus one bias per output."""
    return d_in * d_out + d_out


def parameter_breakdown(config: BertConfig) -> dict[str, int]:
    """Parameter counts of ``BertModel(config)`` by part (embeddings, per-layer blocks x layers, pooler)."""
    _require_a_config(config)
    return _parameter_breakdown(config)


def _parameter_breakdown(config):
    """Every weight matrix, bias and LayerNorm of BERT, counted from the config's sizes."""
    d, d_ff, n_layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    layer_norm = 2 * d  # gamma and beta
    return {
        "word embeddings": config.vocab_size * d,
        "position embeddings": config.max_position_embeddings * d,
        "token type embeddings": config.type_vocab_size * d,
        "embedding LayerNorm": layer_norm,
        "attention Q, K, V (all layers)": n_layers * 3 * _linear_parameters(d, d),
        "attention output W_O (all layers)": n_layers * _linear_parameters(d, d),
        "attention LayerNorm (all layers)": n_layers * layer_norm,
        "feed-forward (all layers)": n_layers * (_linear_parameters(d, d_ff) + _linear_parameters(d_ff, d)),
        "feed-forward LayerNorm (all layers)": n_layers * layer_norm,
        "pooler": _linear_parameters(d, d),
    }


def count_parameters(config: BertConfig) -> int:
    """Total parameters of ``BertModel(config)``: 109,482,240 for BERT-base."""
    _require_a_config(config)
    return _count_parameters(config)


def _count_parameters(config):
    """The sum of the parts: embeddings, every layer, the pooler."""
    return sum(_parameter_breakdown(config).values())


def _require_a_config(config) -> None:
    """The counts need the sizes, so here (unlike ``BertModel(None)``) a config is required."""
    if config is None:
        raise TypeError("`config` must be a BertConfig, got None: try `BertConfig.bert_base()`.")
    require_config(config)
