"""Exercises of notebook 07: ``bert_embeddings`` and ``count_parameters``.

Each embedding mistake leaves out, replaces or shifts one of the three summed tables, or skips the
LayerNorm; each counting mistake leaves out or miscounts one part of the model (biases, LayerNorms,
the pooler, the segment table, the layers, the feed-forward width).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

from ..config import BertConfig
from ..counting import count_parameters, parameter_breakdown
from ..embeddings import bert_embeddings
from ..layernorm import layer_norm
from ..positional import sinusoidal_position_encoding
from .diagnosis import is_int
from .random_inputs import _ln_params, _randn
from .records import Case, Exercise, Mistake


def _embedding_cases(g):
    return [
        Case(
            "batch of 2, 5 tokens, two segments, hidden 8",
            (
                torch.randint(0, 20, (2, 5), generator=g),
                torch.tensor([[0, 0, 0, 1, 1], [0, 0, 1, 1, 1]]),
                *_embedding_tables(g, 8, segments=2),
                1e-12,
            ),
            ("batched",),
        ),
        Case(
            "one sentence of 7 tokens, one segment, hidden 8",
            (
                torch.randint(0, 20, (1, 7), generator=g),
                torch.zeros(1, 7, dtype=torch.long),
                *_embedding_tables(g, 8, 2),
                1e-12,
            ),
        ),
        Case(
            "eps left out, so it is BERT's 1e-12: batch of 2, 3 tokens, hidden 4, tiny table entries (about 0.001)",
            (
                torch.randint(0, 20, (2, 3), generator=g),
                torch.tensor([[0, 1, 1], [0, 0, 1]]),
                *(table * 0.001 for table in _embedding_tables(g, 4, segments=2)[:3]),
                *_ln_params(g, 4),
            ),
            ("defaults", "batched"),
        ),
        Case(
            "batch of 3, 4 tokens, odd width 6, three segment types, eps 0.5 (so where eps goes shows)",
            (
                torch.randint(0, 20, (3, 4), generator=g),
                torch.randint(0, 3, (3, 4), generator=g),
                *_embedding_tables(g, 6, segments=3),
                0.5,
            ),
            ("batched",),
        ),
    ]


def _embedding_tables(g, hidden, segments):
    """word (20, hidden), position (10, hidden), token type (segments, hidden), LayerNorm gamma and beta."""
    return (
        _randn(g, 20, hidden),
        _randn(g, 10, hidden),
        _randn(g, segments, hidden),
        *_ln_params(g, hidden),
    )


def _embeddings_no_positions(input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12):
    return layer_norm(word[input_ids] + token_type[token_type_ids], ln_weight, ln_bias, eps)


def _embeddings_no_token_types(input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12):
    seq_len = input_ids.shape[1]
    return layer_norm(word[input_ids] + position[:seq_len], ln_weight, ln_bias, eps)


def _embeddings_no_layer_norm(input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12):
    seq_len = input_ids.shape[1]
    return word[input_ids] + position[:seq_len] + token_type[token_type_ids]


def _embeddings_sinusoidal(input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12):
    seq_len, hidden = input_ids.shape[1], word.shape[1]
    summed = word[input_ids] + sinusoidal_position_encoding(seq_len, hidden) + token_type[token_type_ids]
    return layer_norm(summed, ln_weight, ln_bias, eps)


def _embeddings_positions_from_1(input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12):
    seq_len = input_ids.shape[1]
    summed = word[input_ids] + position[1 : seq_len + 1] + token_type[token_type_ids]
    return layer_norm(summed, ln_weight, ln_bias, eps)


def _embeddings_positions_by_ids(input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12):
    summed = word[input_ids] + position[input_ids % position.shape[0]] + token_type[token_type_ids]
    return layer_norm(summed, ln_weight, ln_bias, eps)


def _embeddings_layer_norm_on_words_only(
    input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12
):
    seq_len = input_ids.shape[1]
    return layer_norm(word[input_ids], ln_weight, ln_bias, eps) + position[:seq_len] + token_type[token_type_ids]


def _embeddings_dropout_left_on(input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12):
    seq_len = input_ids.shape[1]
    summed = word[input_ids] + position[:seq_len] + token_type[token_type_ids]
    return F.dropout(layer_norm(summed, ln_weight, ln_bias, eps), p=0.1)


def _embeddings_default_eps(input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12):
    seq_len = input_ids.shape[1]
    summed = word[input_ids] + position[:seq_len] + token_type[token_type_ids]
    return F.layer_norm(summed, summed.shape[-1:], ln_weight, ln_bias)  # PyTorch's default eps, 1e-5


BERT_EMBEDDINGS = Exercise(
    name="bert_embeddings",
    reference=bert_embeddings,
    prompt="your function receives `input_ids` and `token_type_ids` (batch, seq) long, the tables "
    "`word_embeddings` (vocab, hidden), `position_embeddings` (max_positions, hidden), "
    "`token_type_embeddings` (types, hidden), LayerNorm `ln_weight`, `ln_bias` (hidden,) and `eps`; it "
    "returns (batch, seq, hidden): LayerNorm(word[input_ids] + position[0 ... seq-1] + "
    "token_type[token_type_ids]).",
    start="look up the token vectors with `word_embeddings[input_ids]`.",
    make_cases=_embedding_cases,
    axes={"": ("batch", "token rows", "feature columns")},
    notebook="07",
    mistakes=(
        Mistake(
            "no position embeddings",
            "add the learned position vectors `position_embeddings[:seq]`; without them BERT is blind to word order.",
            _embeddings_no_positions,
        ),
        Mistake(
            "no token type embeddings",
            "add the segment vectors `token_type_embeddings[token_type_ids]` (sentence A or B).",
            _embeddings_no_token_types,
        ),
        Mistake(
            "no LayerNorm",
            "BERT normalises the sum: `layer_norm(summed, ln_weight, ln_bias, eps)`.",
            _embeddings_no_layer_norm,
        ),
        Mistake(
            "sinusoidal instead of learned positions",
            "BERT does not use sinusoids: it learns its positions, `position_embeddings[:seq]`.",
            _embeddings_sinusoidal,
        ),
        Mistake(
            "learned positions starting at 1",
            "the first token has position 0: use rows 0 ... seq - 1 of `position_embeddings`.",
            _embeddings_positions_from_1,
        ),
        Mistake(
            "position rows looked up by token id",
            "positions count places in the sentence, 0 ... seq - 1, whatever the tokens: "
            "`position_embeddings[torch.arange(seq)]`, not `position_embeddings[input_ids]`.",
            _embeddings_positions_by_ids,
        ),
        Mistake(
            "LayerNorm applied to the word vectors only",
            "add the three vectors first, then normalise the sum.",
            _embeddings_layer_norm_on_words_only,
        ),
        Mistake(
            "dropout left on",
            "the function asked for here has no dropout (in a model, `model.eval()` turns it off).",
            _embeddings_dropout_left_on,
        ),
        Mistake(
            "PyTorch's default LayerNorm eps",
            "pass `eps` on to the LayerNorm: BERT uses 1e-12, `F.layer_norm` and `nn.LayerNorm` default to 1e-5.",
            _embeddings_default_eps,
        ),
    ),
)


def _count_cases(g):
    tiny = BertConfig(
        vocab_size=100,
        hidden_size=12,
        num_hidden_layers=3,
        num_attention_heads=3,
        intermediate_size=20,
        max_position_embeddings=16,
        type_vocab_size=3,
    )
    return [
        Case("BERT-base", (BertConfig.bert_base(),)),
        Case("MiniLM-L6: 6 layers, hidden 384", (BertConfig.minilm_l6(),)),
        Case("a tiny config: vocab 100, hidden 12, 3 layers, FFN 20, 16 positions, 3 segment types", (tiny,)),
    ]


def _count_without(config: BertConfig, word: str) -> int:
    """The total without the parts of ``parameter_breakdown`` whose name contains ``word``."""
    return sum(count for part, count in parameter_breakdown(config).items() if word not in part)


def _count_no_biases(config):
    d, d_ff = config.hidden_size, config.intermediate_size
    biases_per_layer = 4 * d + d_ff + d  # Q, K, V, W_O; FFN in and out
    return count_parameters(config) - config.num_hidden_layers * biases_per_layer - d  # and the pooler's


def _count_no_layer_norm(config):
    return _count_without(config, "LayerNorm")


def _count_no_pooler(config):
    return _count_without(config, "pooler")


def _count_no_token_types(config):
    return _count_without(config, "token type")


def _count_one_layer(config):
    return count_parameters(dataclasses.replace(config, num_hidden_layers=1))


def _count_ffn_square(config):
    return count_parameters(dataclasses.replace(config, intermediate_size=config.hidden_size))


def _count_no_positions(config):
    return _count_without(config, "position")


def _count_no_output_projection(config):
    return _count_without(config, "W_O")


def _count_one_layer_norm_per_layer(config):
    return _count_without(config, "attention LayerNorm")


def _explain_count(case, value, expected) -> str | None:
    """Which parts of the model the difference adds up to: 'That is exactly the position embeddings.'"""
    if not is_int(value) or int(value) == expected:
        return None
    config = case.args[0]
    missing = expected - int(value)
    layers = config.num_hidden_layers
    for part, count in parameter_breakdown(config).items():
        per_layer = "(all layers)" in part
        if missing == count:
            return f"The missing {missing:,} are exactly the {part}."
        if missing == -count:
            return f"The extra {-missing:,} are exactly the {part}: counted twice?"
        if per_layer and layers > 1 and missing == count // layers * (layers - 1):
            return f"The missing {missing:,} are the {part.replace('(all layers)', '')}of {layers - 1} layers."
    if missing % config.hidden_size == 0:
        return f"The difference is {abs(missing) // config.hidden_size:,} × hidden_size."
    return None


COUNT_PARAMETERS = Exercise(
    name="count_parameters",
    reference=count_parameters,
    prompt="your function receives a `BertConfig` and returns, as an int, the number of parameters of "
    "`BertModel(config)`: the embeddings with their LayerNorm, every encoder layer (Q, K, V, W_O and the "
    "feed-forward block, each with biases, and two LayerNorms), and the pooler.",
    start="count one linear layer first: a d_in x d_out weight plus d_out biases.",
    make_cases=_count_cases,
    explain=_explain_count,
    notebook="07",
    extra_solution=("_parameter_breakdown", "_linear_parameters"),
    mistakes=(
        Mistake(
            "forgetting the biases",
            "every linear layer has a bias: d_in x d_out weights plus d_out biases.",
            _count_no_biases,
        ),
        Mistake(
            "forgetting the LayerNorm parameters",
            "each LayerNorm has gamma and beta, 2 x hidden: one after the embeddings, two in every layer.",
            _count_no_layer_norm,
        ),
        Mistake(
            "forgetting the pooler",
            "BertModel ends with the pooler, a hidden x hidden linear layer with its bias.",
            _count_no_pooler,
        ),
        Mistake(
            "forgetting the token type embeddings",
            "there is a segment table too: type_vocab_size x hidden.",
            _count_no_token_types,
        ),
        Mistake(
            "counting only one layer",
            "multiply the per-layer count by `config.num_hidden_layers`.",
            _count_one_layer,
        ),
        Mistake(
            "counting the feed-forward block as hidden x hidden",
            "the block widens to `config.intermediate_size` and back: hidden x d_ff and d_ff x hidden, with biases.",
            _count_ffn_square,
        ),
        Mistake(
            "forgetting the position embeddings",
            "BERT learns a table of positions too: max_position_embeddings x hidden.",
            _count_no_positions,
        ),
        Mistake(
            "forgetting the output projection W_O",
            "attention has four linear maps, Q, K, V and the output projection W_O, each hidden x hidden with bias.",
            _count_no_output_projection,
        ),
        Mistake(
            "one LayerNorm per layer instead of two",
            "a Post-LN layer normalises twice: after the attention block and after the feed-forward block.",
            _count_one_layer_norm_per_layer,
        ),
    ),
)
