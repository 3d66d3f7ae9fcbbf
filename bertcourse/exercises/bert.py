"""Exercises of BERT's own parts: ``bert_embeddings`` (notebook 04), and notebook 07's ``mlm_head``,
``hf_to_ours`` and ``count_parameters``.

Each embedding mistake leaves out, replaces or shifts one of the three summed tables, or skips the
LayerNorm; each counting mistake leaves out or miscounts one part of the model (biases, LayerNorms,
the pooler, the segment table, the layers, the feed-forward width). The MLM head's mistakes reorder or
drop its steps or untie its decoder; the renaming mistakes are the string slips of a hand-written
rename table (the ``bert.`` prefix, old LayerNorm names, the two LayerNorms of a layer confused).
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

from ..bert import BertModel
from ..config import BertConfig
from ..counting import count_parameters, parameter_breakdown
from ..embeddings import BertEmbeddings, bert_embeddings
from ..encoder import Encoder, EncoderLayer
from ..heads import mlm_head
from ..layernorm import layer_norm
from ..positional import sinusoidal_positions
from ..weights import hf_to_ours
from .diagnosis import equals_one_of, is_integral
from .random_inputs import seeded_ln_params, seeded_randn
from .records import Case, Exercise, Knob, Mistake


def _embedding_cases(g):
    batch_of_2 = (
        torch.randint(0, 20, (2, 5), generator=g),
        torch.tensor([[0, 0, 0, 1, 1], [0, 0, 1, 1, 1]]),
        *_embedding_tables(g, 8, segments=2),
        1e-12,
    )
    one_sentence = (torch.randint(0, 20, (1, 7), generator=g), torch.zeros(1, 7, dtype=torch.long))
    return [
        Case("batch of 2, 5 tokens, two segments, hidden 8", batch_of_2, ("batched",)),
        Case("one sentence of 7 tokens, one segment, hidden 8", (*one_sentence, *_embedding_tables(g, 8, 2), 1e-12)),
        Case(
            "eps left out, so it is BERT's 1e-12: batch of 2, 3 tokens, hidden 4, tiny table entries (about 0.001)",
            (
                torch.randint(0, 20, (2, 3), generator=g),
                torch.tensor([[0, 1, 1], [0, 0, 1]]),
                *(table * 0.001 for table in _embedding_tables(g, 4, segments=2)[:3]),
                *seeded_ln_params(g, 4),
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
        Case(
            "the batch of 2 with `position_ids` (batch, seq): sentence 1 padded on the left by 2, positions "
            "0, 0, 0, 1, 2",
            (*batch_of_2, torch.tensor([[0, 0, 0, 1, 2], [0, 1, 2, 3, 4]])),
        ),
        Case(
            "one sentence of 7 tokens with `position_ids` (seq,) = 3 ... 9: a window that starts at position 3",
            (*one_sentence, *_embedding_tables(g, 8, 2), 1e-12, torch.arange(3, 10)),
        ),
    ]


def _embedding_tables(g, hidden, segments):
    """word (20, hidden), position (10, hidden), token type (segments, hidden), LayerNorm gamma and beta."""
    return (
        seeded_randn(g, 20, hidden),
        seeded_randn(g, 10, hidden),
        seeded_randn(g, segments, hidden),
        *seeded_ln_params(g, hidden),
    )


def _rows(position, input_ids, position_ids):
    """The position rows the reference adds: ``position[position_ids]``, rows 0..seq-1 when ``position_ids`` is None."""
    return position[torch.arange(input_ids.shape[1]) if position_ids is None else position_ids]


def _embeddings_no_positions(
    input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12, position_ids=None
):
    return layer_norm(word[input_ids] + token_type[token_type_ids], ln_weight, ln_bias, eps)


def _embeddings_no_token_types(
    input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12, position_ids=None
):
    return layer_norm(word[input_ids] + _rows(position, input_ids, position_ids), ln_weight, ln_bias, eps)


def _embeddings_no_layer_norm(
    input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12, position_ids=None
):
    return word[input_ids] + _rows(position, input_ids, position_ids) + token_type[token_type_ids]


def _embeddings_position_ids_ignored(
    input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12, position_ids=None
):
    summed = word[input_ids] + position[: input_ids.shape[1]] + token_type[token_type_ids]
    return layer_norm(summed, ln_weight, ln_bias, eps)


def _embeddings_sinusoidal(
    input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12, position_ids=None
):
    seq_len, hidden = input_ids.shape[1], word.shape[1]
    places = torch.arange(seq_len) if position_ids is None else position_ids
    summed = word[input_ids] + sinusoidal_positions(places, hidden) + token_type[token_type_ids]
    return layer_norm(summed, ln_weight, ln_bias, eps)


def _embeddings_positions_from_1(
    input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12, position_ids=None
):
    seq_len = input_ids.shape[1]
    rows = position[1 : seq_len + 1] if position_ids is None else position[position_ids]
    return layer_norm(word[input_ids] + rows + token_type[token_type_ids], ln_weight, ln_bias, eps)


def _embeddings_positions_by_ids(
    input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12, position_ids=None
):
    summed = word[input_ids] + position[input_ids % position.shape[0]] + token_type[token_type_ids]
    return layer_norm(summed, ln_weight, ln_bias, eps)


def _embeddings_layer_norm_on_words_only(
    input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12, position_ids=None
):
    normed = layer_norm(word[input_ids], ln_weight, ln_bias, eps)
    return normed + _rows(position, input_ids, position_ids) + token_type[token_type_ids]


def _embeddings_dropout_left_on(
    input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12, position_ids=None
):
    summed = word[input_ids] + _rows(position, input_ids, position_ids) + token_type[token_type_ids]
    return F.dropout(layer_norm(summed, ln_weight, ln_bias, eps), p=0.1)


def _embeddings_default_eps(
    input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12, position_ids=None
):
    summed = word[input_ids] + _rows(position, input_ids, position_ids) + token_type[token_type_ids]
    return F.layer_norm(summed, summed.shape[-1:], ln_weight, ln_bias)  # PyTorch's default eps, 1e-5


def _embeddings_variant(
    settings, input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, eps=1e-12, position_ids=None
):
    """BERT's embeddings with each part chosen by ``settings`` (the knobs below)."""
    seq_len, hidden = input_ids.shape[1], word.shape[1]
    places = torch.arange(seq_len) if position_ids is None else position_ids  # (seq,) or (batch, seq)
    positions = {
        "table": lambda: position[places],
        "ids ignored": lambda: position[:seq_len],
        "none": lambda: 0,
        "from 1": lambda: position[1 : seq_len + 1] if position_ids is None else position[places],
        "sinusoidal": lambda: sinusoidal_positions(places, hidden),
        "by token id": lambda: position[input_ids % position.shape[0]],
    }[settings["positions"]]()
    types = {
        "table": lambda: token_type[token_type_ids],
        "none": lambda: 0,
        "first row": lambda: token_type[0],
    }[settings["token types"]]()
    eps = {"given": eps, "default": 1e-5, "ignored": 1e-12}[settings["eps"]]
    words = word[input_ids]
    if settings["norm"] == "words only":
        return layer_norm(words, ln_weight, ln_bias, eps) + positions + types
    summed = words + positions + types
    if settings["norm"] == "none":
        return summed
    if settings["norm"] == "plain":
        return F.layer_norm(summed, summed.shape[-1:], eps=eps)
    if settings["norm"] == "swapped":
        return layer_norm(summed, ln_bias, ln_weight, eps)
    if settings["norm"] == "over tokens":
        mean, variance = summed.mean(1, keepdim=True), summed.var(1, unbiased=False, keepdim=True)  # (batch, 1, hidden)
        return (summed - mean) / torch.sqrt(variance + eps) * ln_weight + ln_bias
    return layer_norm(summed, ln_weight, ln_bias, eps)


_IDS_IGNORED_HINT = (
    "when `position_ids` is given, token t gets row `position_ids[..., t]` of the table, "
    "`position_embeddings[position_ids]`; only `position_ids=None` means 0 ... seq - 1."
)

_EMBEDDINGS_KNOBS = (
    Knob(
        "positions",
        (
            ("table", "", ""),
            ("ids ignored", "`position_ids` ignored", _IDS_IGNORED_HINT),
            ("none", "no position embeddings", "add the learned position rows `position_embeddings[position_ids]`."),
            ("from 1", "positions counted from 1", "position 0 is the first row of the table: `position[:seq_len]`."),
            ("sinusoidal", "sinusoidal positions", "BERT learns its positions: take the rows of the `position` table."),
            (
                "by token id",
                "the position table indexed by the token ids",
                "the position table is indexed by the position 0, 1, ..., seq_len - 1, not by the token id.",
            ),
        ),
    ),
    Knob(
        "token types",
        (
            ("table", "", ""),
            ("none", "no token type embeddings", "add `token_type[token_type_ids]`, the segment of each token."),
            (
                "first row",
                "the first token type row for every token",
                "each token's segment id picks its own row: `token_type[token_type_ids]`, not `token_type[0]`.",
            ),
        ),
    ),
    Knob(
        "norm",
        (
            ("sum", "", ""),
            ("none", "no LayerNorm", "the sum of the three embeddings goes through the LayerNorm."),
            ("words only", "the LayerNorm on the word embeddings alone", "normalise the sum of all three."),
            ("plain", "the LayerNorm without its gamma and beta", "apply `ln_weight` and `ln_bias` after normalising."),
            (
                "swapped",
                "gamma and beta swapped",
                "`ln_weight` (gamma) multiplies the normalised vector and `ln_bias` (beta) is added.",
            ),
            (
                "over tokens",
                "the LayerNorm over the tokens instead of the features",
                "normalise each token's vector on its own: the mean and variance over the last axis, `dim=-1`.",
            ),
        ),
    ),
    Knob(
        "eps",
        (
            ("given", "", ""),
            ("default", "PyTorch's default eps", "pass `eps` on to the LayerNorm (1e-5 is PyTorch's default)."),
            ("ignored", "`eps` not passed on", "pass the `eps` you are given on to the LayerNorm."),
        ),
    ),
)


def _embeddings_explain(case, value, expected):
    """Which other reading of the position table the learner's output is."""
    input_ids, token_type_ids, word, position, token_type, ln_weight, ln_bias, *rest = case.args
    eps = rest[0] if rest else 1e-12
    seq = input_ids.shape[-1]

    def embed(positions):
        return layer_norm(word[input_ids] + positions + token_type[token_type_ids], ln_weight, ln_bias, eps)

    return equals_one_of(
        value,
        expected,
        (
            (
                f"the embeddings with the *last* {seq} rows of the position table: position i is row i, "
                f"`position_embeddings[:{seq}]`",
                lambda: embed(position[-seq:]),
            ),
            (
                "the embeddings with the positions counted from 1: the first token is position 0",
                lambda: embed(position[1 : seq + 1]),
            ),
        ),
    )


BERT_EMBEDDINGS = Exercise(
    name="bert_embeddings",
    reference=bert_embeddings,
    knobs=_EMBEDDINGS_KNOBS,
    variant=_embeddings_variant,
    prompt="your function receives `input_ids` and `token_type_ids` (batch, seq) long, the tables "
    "`word_embeddings` (vocab, hidden), `position_embeddings` (max_positions, hidden), "
    "`token_type_embeddings` (types, hidden), LayerNorm `ln_weight`, `ln_bias` (hidden,), `eps`, and "
    "`position_ids`, (batch, seq) or (seq,) long, or None for 0 ... seq-1 in every sentence; it returns "
    "(batch, seq, hidden): LayerNorm(word[input_ids] + position[position_ids] + token_type[token_type_ids]).",
    start="one row of the word table per token id, first.",
    make_cases=_embedding_cases,
    axes={"": ("batch", "token rows", "feature columns")},
    explain=_embeddings_explain,
    notebook="04",
    gradients=("word_embeddings", "position_embeddings", "token_type_embeddings", "ln_weight", "ln_bias"),
    mistakes=(
        Mistake(
            "no position embeddings",
            "add the learned position vectors `position_embeddings[position_ids]`; without them BERT is blind to "
            "word order.",
            _embeddings_no_positions,
        ),
        Mistake("`position_ids` ignored", _IDS_IGNORED_HINT, _embeddings_position_ids_ignored),
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
            "BERT does not use sinusoids: it learns its positions, `position_embeddings[position_ids]`.",
            _embeddings_sinusoidal,
        ),
        Mistake(
            "learned positions starting at 1",
            "the first token has position 0: with `position_ids=None`, use rows 0 ... seq - 1 of "
            "`position_embeddings`.",
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


def _count_atoms(config) -> dict[str, int]:
    """The parts a count can miss: ``parameter_breakdown``'s, and the pieces of them a slip leaves out (a bias,
    half of every LayerNorm, the token type rows past two)."""
    d, d_ff, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    atoms = dict(parameter_breakdown(config))
    atoms |= {
        "pooler's bias": d,
        "pooler's weight": d * d,
        "attention's biases of Q, K, V and W_O (all layers)": 4 * d * layers,
        "feed-forward biases (all layers)": (d_ff + d) * layers,
        "feed-forward output bias (all layers)": d * layers,
        "feed-forward intermediate bias (all layers)": d_ff * layers,
        "betas (or the gammas) of every LayerNorm: a LayerNorm has both, 2 x hidden": d * (1 + 2 * layers),
        "token type rows past two (type_vocab_size is read from the config, not assumed to be 2)": (
            (config.type_vocab_size - 2) * d
        ),
    }
    return {part: count for part, count in atoms.items() if count > 0}


def _explain_count(case, value, expected) -> str | None:
    """Which parts of the model the difference adds up to: 'That is exactly the position embeddings.'"""
    if not is_integral(value) or int(value) == expected:
        return None
    config = case.args[0]
    missing = expected - int(value)
    layers = config.num_hidden_layers
    how = "missing" if missing > 0 else "extra"
    atoms = _count_atoms(config)
    same = [part for part, count in atoms.items() if count == abs(missing)]
    if len(same) > 1:  # e.g. 2 x 768: the token type embeddings of BERT-base and the embedding LayerNorm alike
        names = ", ".join(f"the {part}" for part in same[:-1]) + f" or the {same[-1]}"
        return f"The {how} {abs(missing):,} are as many as {names}: which of them is {how}?"
    if same:
        twice = ": counted twice?" if missing < 0 else "."
        return f"The {how} {abs(missing):,} are exactly the {same[0]}{twice}"
    parts = parameter_breakdown(config)
    for part, count in parts.items():
        if "(all layers)" in part and layers > 1 and missing == count // layers * (layers - 1):
            return f"The missing {missing:,} are the {part.replace('(all layers)', '')}of {layers - 1} layers."
    pairs = [(a, b) for i, a in enumerate(parts) for b in list(parts)[i + 1 :] if parts[a] + parts[b] == abs(missing)]
    if pairs:
        names = " or ".join(f"the {a} and the {b} together" for a, b in pairs)
        which = f": which pair is {how}?" if len(pairs) > 1 else "."
        return f"The {how} {abs(missing):,} are as many as {names}{which}"
    if missing % config.hidden_size == 0:
        return f"The difference is {abs(missing) // config.hidden_size:,} × hidden_size."
    return None


COUNT_PARAMETERS = Exercise(
    name="count_parameters",
    reference=count_parameters,
    prompt="your function receives a `BertConfig` and returns, as an int, the number of parameters of "
    "`BertModel(config)`: the embeddings with their LayerNorm, every encoder layer (Q, K, V, W_O and the "
    "feed-forward block, each with biases, and two LayerNorms), and the pooler, counted from the config's sizes "
    "without building a model.",
    start="count one linear layer first: a d_in x d_out weight plus d_out biases.",
    make_cases=_count_cases,
    explain=_explain_count,
    # the notebook counts a built model with `numel`: building the package's model (or its parts) answers it
    answered_by=tuple(cls.__init__ for cls in (BertModel, BertEmbeddings, Encoder, EncoderLayer)),
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


# --- the MLM head, its decoder tied to the word embeddings -------------------------------------


def _mlm_cases(g):
    return [
        Case("batch of 2, 3 tokens, hidden 8, vocabulary 11", _mlm_args(g, (2, 3), 8, 11, eps=1e-12), ("batched",)),
        Case("the same sizes, one sentence of 3 tokens", _mlm_args(g, (3,), 8, 11, eps=1e-12), ("unbatched",)),
        Case("the same sizes, a large eps = 0.5", _mlm_args(g, (2, 3), 8, 11, eps=0.5), ("batched",)),
        Case(
            "the same sizes, eps left out, so it is BERT's 1e-12: tiny dense weights (about 0.001)",
            _mlm_args(g, (2, 3), 8, 11, eps=None, dense_scale=0.001),
            ("batched", "defaults"),
        ),
        Case(
            "the same sizes, tiny dense weights (about 0.001) and eps 1e-12 given",
            _mlm_args(g, (2, 3), 8, 11, eps=1e-12, dense_scale=0.001),
            ("batched",),
        ),
    ]


def _mlm_args(g, leading, hidden, vocab, eps, dense_scale=1.0):
    """hidden states, dense weight (out, in) and bias, LayerNorm gamma and beta, word table, decoder bias (, eps)."""
    args = (
        seeded_randn(g, *leading, hidden),
        seeded_randn(g, hidden, hidden, scale=dense_scale / hidden**0.5),
        seeded_randn(g, hidden, scale=dense_scale),
        *seeded_ln_params(g, hidden),
        seeded_randn(g, vocab, hidden),
        seeded_randn(g, vocab),
    )
    return args if eps is None else (*args, eps)


def _mlm_no_gelu(hidden, dense_weight, dense_bias, ln_weight, ln_bias, word_embeddings, decoder_bias, eps=1e-12):
    h = layer_norm(hidden @ dense_weight.T + dense_bias, ln_weight, ln_bias, eps)
    return h @ word_embeddings.T + decoder_bias


def _mlm_relu(hidden, dense_weight, dense_bias, ln_weight, ln_bias, word_embeddings, decoder_bias, eps=1e-12):
    h = layer_norm(torch.relu(hidden @ dense_weight.T + dense_bias), ln_weight, ln_bias, eps)
    return h @ word_embeddings.T + decoder_bias


def _mlm_norm_before_gelu(
    hidden, dense_weight, dense_bias, ln_weight, ln_bias, word_embeddings, decoder_bias, eps=1e-12
):
    h = F.gelu(layer_norm(hidden @ dense_weight.T + dense_bias, ln_weight, ln_bias, eps))
    return h @ word_embeddings.T + decoder_bias


def _mlm_no_layer_norm(hidden, dense_weight, dense_bias, ln_weight, ln_bias, word_embeddings, decoder_bias, eps=1e-12):
    return F.gelu(hidden @ dense_weight.T + dense_bias) @ word_embeddings.T + decoder_bias


def _mlm_no_decoder_bias(
    hidden, dense_weight, dense_bias, ln_weight, ln_bias, word_embeddings, decoder_bias, eps=1e-12
):
    h = layer_norm(F.gelu(hidden @ dense_weight.T + dense_bias), ln_weight, ln_bias, eps)
    return h @ word_embeddings.T


def _mlm_dense_not_transposed(
    hidden, dense_weight, dense_bias, ln_weight, ln_bias, word_embeddings, decoder_bias, eps=1e-12
):
    h = layer_norm(F.gelu(hidden @ dense_weight + dense_bias), ln_weight, ln_bias, eps)
    return h @ word_embeddings.T + decoder_bias


def _mlm_no_transform(hidden, dense_weight, dense_bias, ln_weight, ln_bias, word_embeddings, decoder_bias, eps=1e-12):
    return hidden @ word_embeddings.T + decoder_bias


def _mlm_softmax(hidden, dense_weight, dense_bias, ln_weight, ln_bias, word_embeddings, decoder_bias, eps=1e-12):
    h = layer_norm(F.gelu(hidden @ dense_weight.T + dense_bias), ln_weight, ln_bias, eps)
    return torch.softmax(h @ word_embeddings.T + decoder_bias, dim=-1)


def _mlm_default_eps(hidden, dense_weight, dense_bias, ln_weight, ln_bias, word_embeddings, decoder_bias, eps=1e-12):
    h = F.gelu(hidden @ dense_weight.T + dense_bias)
    return F.layer_norm(h, h.shape[-1:], ln_weight, ln_bias) @ word_embeddings.T + decoder_bias


def _mlm_variant(
    settings, hidden, dense_weight, dense_bias, ln_weight, ln_bias, word_embeddings, decoder_bias, eps=1e-12
):
    """The MLM head with each of its parts chosen by ``settings`` (the knobs below)."""
    activation = {
        "gelu": F.gelu,
        "relu": torch.relu,
        "tanh": lambda h: F.gelu(h, approximate="tanh"),
        "none": lambda h: h,
    }[settings["activation"]]
    dense = hidden @ (dense_weight.T if settings["dense"] == "W.T" else dense_weight) + dense_bias
    gamma, beta = (ln_bias, ln_weight) if settings["norm"] == "swapped" else (ln_weight, ln_bias)
    eps = {"given": eps, "default": 1e-5, "ignored": 1e-12}[settings["eps"]]
    if settings["norm"] == "none":
        h = activation(dense)
    elif settings["order"] == "norm first":
        h = activation(layer_norm(dense, gamma, beta, eps))
    else:
        h = layer_norm(activation(dense), gamma, beta, eps)
    logits = h @ word_embeddings.T + (decoder_bias if settings["bias"] else 0.0)
    return {
        "logits": lambda: logits,
        "softmax": lambda: torch.softmax(logits, dim=-1),
        "log_softmax": lambda: torch.log_softmax(logits, dim=-1),
    }[settings["output"]]()


_MLM_KNOBS = (
    Knob(
        "activation",
        (
            ("gelu", "", ""),
            ("relu", "ReLU instead of GELU", "BERT's head uses the exact GELU."),
            ("tanh", "GELU's tanh approximation", "use the exact (erf) GELU, `F.gelu(h)`."),
            ("none", "no GELU", "dense -> GELU -> LayerNorm."),
        ),
    ),
    Knob("dense", (("W.T", "", ""), ("W", "the dense weight not transposed", "nn.Linear computes `x @ W.T + b`."))),
    Knob(
        "norm",
        (
            ("right", "", ""),
            ("none", "no LayerNorm", "normalise with `ln_weight`, `ln_bias` before the decoder."),
            ("swapped", "the LayerNorm's gamma and beta swapped", "`ln_weight` scales, `ln_bias` shifts."),
        ),
    ),
    Knob("order", (("gelu first", "", ""), ("norm first", "the LayerNorm before the GELU", "GELU, then LayerNorm."))),
    Knob("bias", ((True, "", ""), (False, "the decoder's bias left out", "add `decoder_bias` to the logits."))),
    Knob(
        "output",
        (
            ("logits", "", ""),
            ("softmax", "probabilities instead of logits", "return the logits, before any softmax."),
            ("log_softmax", "log-probabilities instead of logits", "return the logits: the loss adds the log-softmax."),
        ),
    ),
    Knob(
        "eps",
        (
            ("given", "", ""),
            ("default", "PyTorch's default eps", "pass `eps` on to the LayerNorm."),
            ("ignored", "`eps` not passed on", "pass the `eps` you are given on to the LayerNorm."),
        ),
    ),
)


def _mlm_explain(case, value, expected):
    """Which other transform the learner's head applied."""
    hidden, dense_weight, dense_bias, ln_weight, ln_bias, word_embeddings, decoder_bias, *rest = case.args
    eps = rest[0] if rest else 1e-12

    def head(activation=F.gelu, dense_twice=False):
        t = layer_norm(activation(hidden @ dense_weight.T + dense_bias), ln_weight, ln_bias, eps)
        t = t @ dense_weight.T + dense_bias if dense_twice else t
        return t @ word_embeddings.T + decoder_bias

    return equals_one_of(
        value,
        expected,
        (
            (
                "the head with the dense layer applied again after the LayerNorm: dense, GELU, LayerNorm, then the "
                "decoder",
                lambda: head(dense_twice=True),
            ),
            ("the head with SiLU (x·sigmoid(x)) for GELU: BERT's activation is the exact GELU", lambda: head(F.silu)),
        ),
    )


MLM_HEAD = Exercise(
    name="mlm_head",
    reference=mlm_head,
    prompt="your function receives the encoder's output `hidden` (..., hidden_size); the MLM head's dense layer "
    "`dense_weight` (hidden_size, hidden_size) in nn.Linear's (out, in) layout and `dense_bias`; its LayerNorm's "
    "`ln_weight` and `ln_bias`; the word-embedding table `word_embeddings` (vocab, hidden_size), which is also the "
    "decoder's weight (tied); the decoder's own `decoder_bias` (vocab,); and `eps` (default 1e-12). It returns "
    "the logits (..., vocab): dense -> exact GELU -> LayerNorm -> decoder.",
    start="the dense layer is an nn.Linear (weight (out, in)); the decoder is the word table itself.",
    make_cases=_mlm_cases,
    knobs=_MLM_KNOBS,
    variant=_mlm_variant,
    axes={"": ("token rows", "vocabulary columns")},
    explain=_mlm_explain,
    notebook="07",
    gradients=("hidden", "dense_weight", "dense_bias", "ln_weight", "ln_bias", "word_embeddings", "decoder_bias"),
    mistakes=(
        Mistake(
            "no GELU",
            "the head transforms with dense -> GELU -> LayerNorm; the GELU sits between the dense layer and the norm.",
            _mlm_no_gelu,
        ),
        Mistake(
            "ReLU instead of GELU",
            "BERT's head uses the exact GELU, `F.gelu`.",
            _mlm_relu,
        ),
        Mistake(
            "the LayerNorm before the GELU",
            "the order is dense -> GELU -> LayerNorm, then the decoder.",
            _mlm_norm_before_gelu,
        ),
        Mistake(
            "no LayerNorm",
            "the transform ends with its own LayerNorm, `ln_weight` and `ln_bias`, before the decoder.",
            _mlm_no_layer_norm,
        ),
        Mistake(
            "the decoder's bias left out",
            "the decoder shares its weight with the word embeddings but has a bias of its own: `+ decoder_bias`.",
            _mlm_no_decoder_bias,
        ),
        Mistake(
            "the dense weight used without a transpose",
            "nn.Linear computes `x @ W.T + b` with W stored as (out, in); with a square W, `x @ W` runs and is wrong.",
            _mlm_dense_not_transposed,
        ),
        Mistake(
            "the transform skipped",
            "the encoder's output goes through dense -> GELU -> LayerNorm before the decoder scores it against the "
            "word table.",
            _mlm_no_transform,
        ),
        Mistake(
            "probabilities instead of logits",
            "return the scores before any softmax: the loss (`F.cross_entropy`) applies its own log-softmax.",
            _mlm_softmax,
        ),
        Mistake(
            "PyTorch's default LayerNorm eps",
            "pass `eps` on to the LayerNorm: BERT's is 1e-12, `F.layer_norm`'s default 1e-5.",
            _mlm_default_eps,
        ),
    ),
)


# --- Hugging Face's weight names onto ours -----------------------------------------------------


_HF_KEYS = (
    ("embeddings.word_embeddings.weight", (), ()),
    ("embeddings.LayerNorm.weight", (), ()),
    ("encoder.layer.0.attention.self.query.weight", (), ()),
    ("encoder.layer.3.attention.output.dense.bias", (), ()),
    ("encoder.layer.3.attention.output.LayerNorm.weight", (), ()),
    ("encoder.layer.11.intermediate.dense.weight", (), ("two-digit layer",)),
    ("encoder.layer.2.output.dense.weight", (), ()),
    ("encoder.layer.10.output.LayerNorm.bias", (), ("two-digit layer",)),
    ("bert.encoder.layer.1.attention.self.value.bias", (), ("prefixed",)),
    ("embeddings.LayerNorm.gamma", (), ("old name",)),
    ("encoder.layer.5.attention.output.LayerNorm.beta", (), ("old name",)),
    ("pooler.dense.weight", (True,), ("into a model with a head",)),
    ("bert.encoder.layer.4.attention.self.key.weight", (True,), ("prefixed", "into a model with a head")),
    ("embeddings.position_ids", (), ("derived",)),
    ("cls.predictions.decoder.weight", (), ("derived",)),
    ("cls.predictions.transform.dense.weight", (), ("head",)),
    ("cls.predictions.bias", (), ("head",)),
    ("cls.seq_relationship.weight", (True,), ("head", "into a model with a head")),
    ("embeddings.position_embeddings.weight", (), ()),
    ("embeddings.token_type_embeddings.weight", (), ()),
    ("encoder.layer.7.attention.self.query.bias", (), ()),
    ("encoder.layer.0.intermediate.dense.bias", (), ()),
    ("pooler.dense.bias", (), ()),
    ("cls.predictions.transform.LayerNorm.weight", (), ("head",)),
    ("cls.predictions.transform.LayerNorm.gamma", (), ("head", "old name")),
    ("cls.predictions.decoder.bias", (), ("derived",)),
    ("cls.seq_relationship.bias", (), ("head",)),
)


def _rename_cases(g):
    return [
        Case(
            f"{key!r}{', prefixed=True' if extra else ''}{' (' + ', '.join(notes) + ')' if notes else ''}",
            (key, *extra),
            () if extra else ("defaults",),
        )
        for key, extra, notes in _HF_KEYS
    ]


_OURS = (
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
_DERIVED = {"embeddings.position_ids", "cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}


def _by_table(key, prefixed=False, table=_OURS, strip_prefix=True, modern=True, derived=True, layers=True):
    """A hand-written rename with switches for the slips below."""
    if strip_prefix:
        key = key.removeprefix("bert.")
    if modern and key.endswith(".gamma"):
        key = key[: -len("gamma")] + "weight"
    if modern and key.endswith(".beta"):
        key = key[: -len("beta")] + "bias"
    if derived and key in _DERIVED:
        return None
    head = key.startswith("cls.")
    if layers:
        key = key.replace("encoder.layer.", "encoder.layers.")
    for hf, ours in table:
        if hf in key:
            key = key.replace(hf, ours)
            break
    return "bert." + key if prefixed and not head else key


def _rename_prefix_kept(key, prefixed=False):
    return _by_table(key, prefixed, strip_prefix=False)


def _rename_old_names_kept(key, prefixed=False):
    return _by_table(key, prefixed, modern=False)


def _rename_derived_kept(key, prefixed=False):
    return _by_table(key, prefixed, derived=False)


def _rename_prefixed_ignored(key, prefixed=False):
    return _by_table(key, False)


def _rename_layer_kept(key, prefixed=False):
    return _by_table(key, prefixed, layers=False)


def _rename_output_norm_first(key, prefixed=False):
    order = sorted(_OURS, key=lambda pair: pair[0] != ".output.LayerNorm.")  # the shorter pattern tried first
    return _by_table(key, prefixed, table=order)


def _rename_head_prefixed(key, prefixed=False):
    renamed = _by_table(key, False)
    return None if renamed is None else ("bert." + renamed if prefixed else renamed)


HF_TO_OURS = Exercise(
    name="hf_to_ours",
    reference=hf_to_ours,
    prompt="your function receives one weight name `key` of a Hugging Face BERT checkpoint and a flag "
    "`prefixed` (default False: the model we load into is a bare BertModel; True: it keeps its encoder under "
    "`bert.`, as BertForPreTraining does); it returns our name for that weight, or None for a key that is "
    "derived from other weights (the `embeddings.position_ids` buffer and the tied decoder). Keys may carry "
    "Hugging Face's own `bert.` prefix and the old LayerNorm names `gamma`/`beta`. The table of names is in the "
    "notebook; `cls.` keys belong to the pretraining heads, which sit outside `bert.`.",
    start="take the prefix off and modernise the LayerNorm names first; then rename, longest patterns first.",
    make_cases=_rename_cases,
    core="hf_to_ours",
    extra_solution=("rename", "_modern_key"),
    notebook="07",
    mistakes=(
        Mistake(
            "Hugging Face's `bert.` prefix kept",
            "a checkpoint of BertForPreTraining names its encoder weights `bert.encoder...`: remove that prefix "
            "before renaming (and add ours back only when `prefixed`).",
            _rename_prefix_kept,
        ),
        Mistake(
            "the old names `gamma` and `beta` kept",
            "old checkpoints call a LayerNorm's weight `gamma` and its bias `beta`: rename them to `weight` and "
            "`bias` first.",
            _rename_old_names_kept,
        ),
        Mistake(
            "derived keys renamed instead of skipped",
            "`embeddings.position_ids` is a buffer and `cls.predictions.decoder.*` is the word table again (tied): "
            "no weight of ours corresponds, so return None.",
            _rename_derived_kept,
        ),
        Mistake(
            "`prefixed` ignored",
            "with `prefixed=True` the encoder's weights live under `bert.` in our model too: `bert.encoder.layers...`.",
            _rename_prefixed_ignored,
        ),
        Mistake(
            "`encoder.layer.` left as it is",
            "our stack is `encoder.layers.{i}` (an nn.ModuleList called `layers`), Hugging Face's `encoder.layer.{i}`.",
            _rename_layer_kept,
        ),
        Mistake(
            "the attention's LayerNorm renamed by the feed-forward LayerNorm's pattern",
            "`.output.LayerNorm.` is also part of `.attention.output.LayerNorm.`, so the attention's LayerNorm became "
            "`output_norm`: give `.attention.output.LayerNorm.` its own row (`attention_norm`), tried before "
            "the shorter pattern.",
            _rename_output_norm_first,
        ),
        Mistake(
            "the heads put under `bert.` too",
            "only the encoder moves under `bert.`; the pretraining heads are `mlm.` and `nsp.` beside it.",
            _rename_head_prefixed,
        ),
    ),
)
