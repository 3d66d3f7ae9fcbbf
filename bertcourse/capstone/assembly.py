"""The learner's pieces assembled into BERT: every step of a forward pass calls a piece by name.

``AssembledBert`` is a ``BertModel``: the same modules hold the same parameters under the same names (so
the training loop, weight decay groups and ``save_pretrained`` work unchanged), but ``forward`` never
calls those modules; it reads their parameters and hands them to the pieces:

    embeddings        bert_embeddings(ids, types, word, position, type tables, LayerNorm)
    each layer        post_ln_layer(x, attention, feed_forward, LN1, LN2), with
      attention(h)      qkv_from_linear -> split_heads (q, k, v) -> scaled_dot_product_attention
                        -> merge_heads -> W_O (the output projection, nn.Linear's own formula)
      feed_forward(h)   feed_forward(h, W1, b1, W2, b2), nn.Linear's (out, in) weights transposed
    pooler            the reference's tanh(W h[CLS] + b) (no exercise asks for it)
    MLM head          mlm_head(hidden, dense, LayerNorm, word table, decoder bias)

The weights are loaded through the learner's ``hf_to_ours`` (``assemble``), never through the package's
table. When a ``Recorder`` is recording, each step's output is kept under its name, and three smaller
pieces are run beside the larger ones on the same tensors: ``attention_scores`` and ``masked_softmax``
beside ``scaled_dot_product_attention``, ``layer_norm`` beside ``bert_embeddings`` and ``post_ln_layer``.
They do not feed the model (the larger piece does, and a learner's larger piece may call them), but they
are compared like the rest, so that a wrong small piece is named as itself.

Dropout: the pieces have none, so the assembled model is the reference model with dropout off.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..bert import BertModel, BertModelOutput
from ..config import BertConfig
from ..exercises import registry  # by module: the registry imports this package's references
from ..heads import BertForPreTraining, BertMLMHead
from ..weights import read_config, read_weights, weights_folder
from .pieces import Pieces


class PieceFailed(Exception):
    """A piece raised inside the assembled model: which step, which piece, and the error it raised."""

    def __init__(self, step: str, piece: str, error: BaseException):
        super().__init__(f"{step}: `{piece}` raised {type(error).__name__}: {error}")
        self.step, self.piece, self.error = step, piece, error


class Recorder:
    """Calls the pieces; while ``steps`` is a dict, keeps every step's output under its name, in order,
    with the piece that computed it (``pieces_of``)."""

    def __init__(self, pieces: Pieces):
        self.pieces = pieces
        self.steps: dict | None = None
        self.pieces_of: dict = {}

    @property
    def recording(self) -> bool:
        return self.steps is not None

    def call(self, step: str, piece: str, *args):
        """``pieces[piece](*args)``, recorded as ``step``; an error names the step and the piece."""
        try:
            value = self.pieces[piece](*args)
        except PieceFailed:
            raise  # a piece called inside this one (attention inside post_ln_layer) failed: it is named already
        except Exception as error:
            raise PieceFailed(step, piece, error) from error
        return self.keep(step, piece, value)

    def keep(self, step: str, piece: str | None, value):
        """Record ``value`` as the output of ``step`` (computed by ``piece``, or by the assembly when None)."""
        if self.steps is not None:
            self.steps[step] = value
            self.pieces_of[step] = piece
        return value

    def beside(self, step: str, piece: str, *args):
        """Run a smaller piece on the model's tensors, only while recording; what it gives does not feed the model."""
        if self.recording:
            return self.call(step, piece, *args)
        return None


class AssembledBert(BertModel):
    """``BertModel`` whose forward calls the pieces; the same arguments and the same ``BertModelOutput``."""

    def __init__(self, config: BertConfig, recorder: Recorder):
        super().__init__(config)
        self.recorder = recorder

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
    ) -> BertModelOutput:
        mask = self._check_inputs(input_ids, attention_mask, token_type_ids)  # (batch, 1, 1, seq) or None
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)  # (batch, seq): every token in segment A
        run, e, eps = self.recorder, self.embeddings, self.config.layer_norm_eps
        if run.recording:  # the learner's layer_norm on the three rows' sum, beside a bert_embeddings that may call it
            words = e.word_embeddings.weight[input_ids]  # (batch, seq, hidden)
            segments = e.token_type_embeddings.weight[token_type_ids]  # (batch, seq, hidden)
            summed = words + segments + e.position_embeddings.weight[: input_ids.shape[1]]  # (batch, seq, hidden)
            run.beside("embeddings: LayerNorm", "layer_norm", summed, e.layer_norm.weight, e.layer_norm.bias, eps)
        x = run.call(
            "embeddings",
            "bert_embeddings",
            input_ids,
            token_type_ids,
            e.word_embeddings.weight,
            e.position_embeddings.weight,
            e.token_type_embeddings.weight,
            e.layer_norm.weight,
            e.layer_norm.bias,
            eps,
        )  # (batch, seq, hidden)
        hidden_states, attentions = [x], []
        for index, layer in enumerate(self.encoder.layers):
            x, weights = self._layer(f"layer {index}", layer, x, mask)  # (batch, seq, hidden)
            hidden_states.append(x)
            attentions.append(weights)
        return BertModelOutput(
            last_hidden_state=x,
            pooler_output=None if self.pooler is None else self.pooler(x),
            attentions=tuple(attentions) if output_attentions else (),
            hidden_states=tuple(hidden_states) if output_hidden_states else (),
        )

    def _layer(self, where: str, layer, x: torch.Tensor, mask: torch.Tensor | None):
        """One encoder layer: the learner's ``post_ln_layer`` around an attention and a feed-forward block
        built from the learner's pieces. Returns (output, attention weights)."""
        run, a, ff = self.recorder, layer.attention, layer.feed_forward
        eps, heads = self.config.layer_norm_eps, self.config.num_attention_heads
        seen = {}

        def attention(h):
            run.keep(f"{where}: what post_ln_layer gives the attention", "post_ln_layer", h)
            q, k, v = run.call(
                f"{where}: Q, K and V",
                "qkv_from_linear",
                h,
                a.query.weight,
                a.query.bias,
                a.key.weight,
                a.key.bias,
                a.value.weight,
                a.value.bias,
            )  # 3 x (batch, seq, hidden)
            q, k, v = (
                run.call(f"{where}: heads split ({name})", "split_heads", t, heads)
                for name, t in (("q", q), ("k", k), ("v", v))
            )  # 3 x (batch, heads, seq, d_head)
            scores = run.beside(f"{where}: attention scores", "attention_scores", q, k)  # (batch, heads, seq, seq)
            if scores is not None:
                run.beside(f"{where}: masked softmax", "masked_softmax", scores / math.sqrt(q.shape[-1]), mask)
            context, weights = run.call(
                f"{where}: attention", "scaled_dot_product_attention", q, k, v, mask
            )  # (batch, heads, seq, d_head), (batch, heads, seq, seq)
            seen["weights"] = weights
            merged = run.call(f"{where}: heads merged", "merge_heads", context)  # (batch, seq, hidden)
            seen["attended"] = run.keep(f"{where}: W_O", None, F.linear(merged, a.output.weight, a.output.bias))
            return seen["attended"]  # (batch, seq, hidden)

        def feed_forward(h):
            if run.recording and "attended" in seen:
                run.beside(
                    f"{where}: LayerNorm",
                    "layer_norm",
                    x + seen["attended"],
                    layer.attention_norm.weight,
                    layer.attention_norm.bias,
                    eps,
                )
            run.keep(f"{where}: first residual and LayerNorm", "post_ln_layer", h)  # what feeds the block
            return run.call(
                f"{where}: feed-forward",
                "feed_forward",
                h,
                ff.intermediate.weight.T,
                ff.intermediate.bias,
                ff.output.weight.T,
                ff.output.bias,
            )  # (batch, seq, hidden)

        out = run.call(
            f"{where}: second residual and LayerNorm",
            "post_ln_layer",
            x,
            attention,
            feed_forward,
            layer.attention_norm.weight,
            layer.attention_norm.bias,
            layer.output_norm.weight,
            layer.output_norm.bias,
            eps,
        )  # (batch, seq, hidden)
        return out, seen.get("weights")


class AssembledMLMHead(BertMLMHead):
    """The MLM head with the same parameters as the reference's, computed by the learner's ``mlm_head``."""

    def __init__(self, config: BertConfig, word_embeddings, recorder: Recorder):
        super().__init__(config, word_embeddings)
        self.recorder = recorder

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.recorder.call(
            "MLM head",
            "mlm_head",
            hidden_states,
            self.dense.weight,
            self.dense.bias,
            self.layer_norm.weight,
            self.layer_norm.bias,
            self.word_embeddings.weight,
            self.bias,
            self.layer_norm.eps,
        )  # (batch, seq, vocab)


class AssembledBertForPreTraining(BertForPreTraining):
    """``BertForPreTraining`` with the assembled encoder and MLM head (the NSP head is the reference's)."""

    def __init__(self, config: BertConfig, recorder: Recorder):
        super().__init__(config)
        self.bert = AssembledBert(config, recorder)
        self.mlm = AssembledMLMHead(self.bert.config, self.bert.embeddings.word_embeddings, recorder)


class WeightsDoNotFit(ValueError):
    """The learner's ``hf_to_ours`` gave names that do not fit the model: the first wrong key, and why."""

    def __init__(self, message: str, key: str):
        super().__init__(message)
        self.key = key


def assemble(pieces: Pieces, folder=None, *, pretraining: bool = False):
    """BERT built from ``pieces`` with the weights of the Hugging Face folder ``folder`` (default: the offline
    MiniLM), renamed by the learner's ``hf_to_ours``; in ``eval()`` mode. ``pretraining=True`` builds the
    model with its MLM and NSP heads (for a checkpoint that has them, such as notebook 09's tiny BERT)."""
    if not isinstance(pieces, Pieces):
        raise TypeError(f"`pieces` must come from `load_pieces(...)`, got {type(pieces).__name__}.")
    from ..pretrained import default_weights_dir

    folder = weights_folder(default_weights_dir() if folder is None else folder, "folder")
    config = BertConfig.from_dict(read_config(folder))
    recorder = Recorder(pieces)
    model = AssembledBertForPreTraining(config, recorder) if pretraining else AssembledBert(config, recorder)
    weights, model.weight_sources = renamed_weights(pieces, read_weights(folder), model)
    model.load_state_dict(weights, strict=False)
    return model.eval()


def misplaced_weights(pieces: Pieces, weight_sources: dict, prefixed: bool) -> list[str]:
    """Where the learner's ``hf_to_ours`` put a key of the file into another weight than the reference's renaming
    does (two LayerNorms swapped load without an error: their shapes are equal), one line each."""
    reference = registry.EXERCISES["hf_to_ours"].reference
    expected = {reference(key, prefixed): key for key in weight_sources.values()}
    expected.pop(None, None)
    return [
        f"`{name}` got the file's `{key}`; the reference's renaming puts `{expected[name]}` there"
        for name, key in weight_sources.items()
        if expected.get(name, key) != key
    ]


def renamed_weights(pieces: Pieces, hf_state: dict, model) -> tuple[dict, dict]:
    """(the file's weights under the names the learner's ``hf_to_ours`` gives, and for each name the file's key
    it came from); every weight of the model must be given once, and only those (the tied decoder is the word
    table)."""
    prefixed = isinstance(model, BertForPreTraining)
    ours = model.state_dict()
    renamed, sources = {}, {}
    for key, tensor in hf_state.items():
        try:
            name = pieces["hf_to_ours"](key, prefixed)
        except Exception as error:
            raise PieceFailed("weights renamed", "hf_to_ours", error) from error
        if name is None:
            continue
        if name not in ours or name in renamed:
            why = "no weight of our model has that name" if name not in ours else "another key got it already"
            raise WeightsDoNotFit(f"`{key}` -> {name!r}: {why}", key)
        if tuple(tensor.shape) != tuple(ours[name].shape):
            raise WeightsDoNotFit(
                f"`{key}` -> {name!r}: its shape {tuple(tensor.shape)} is not that weight's {tuple(ours[name].shape)}",
                key,
            )
        renamed[name] = tensor
        sources[name] = key
    tied = {"mlm.word_embeddings.weight"}
    missing = sorted(set(ours) - set(renamed) - tied)
    if missing:
        raise WeightsDoNotFit(f"no key of the file was renamed to {missing[0]!r}", missing[0])
    return renamed, sources
