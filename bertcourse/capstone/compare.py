"""Where the assembled model first goes wrong: every step against Hugging Face's, on the same weights.

``hugging_face_steps`` runs ``transformers``' BERT (eager attention, so that it returns its attention maps)
with hooks on its modules and names what each gives as the assembled model names its steps: the
embeddings; in every layer the layer's input, Q, K and V, the heads (its own tensors viewed as heads,
plain ``view`` and ``transpose``), the raw scores ``q kᵀ``, the attention maps, the attention's output
by heads and merged, W_O, the first LayerNorm, the feed-forward block, the layer's output; the MLM logits.

``compare`` records the assembled model's steps on the same batch and walks them in order. The first
step beyond ``atol + rtol * |Hugging Face's value|`` is the report: the step, the piece that computed it,
what that piece's own check says (the catalogued mistake it looks like), and the notebook to go back to.
Steps before it matched, so the piece that computed it saw the right input. When every step matches, the
report gives the largest difference of the model's output.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import torch

from ..exercises.records import Listing
from .assembly import PieceFailed, WeightsDoNotFit, assemble, misplaced_weights
from .differences import beyond_tolerance, first_difference, tolerance_used
from .pieces import PIECES, Pieces, notebook_of

ATOL = 1e-4  # a step differs beyond atol + rtol * |Hugging Face's value|: float32 rounding stays far below
RTOL = 1e-4


def hugging_face_steps(model, batch: dict) -> dict:
    """Every step of ``transformers``' ``BertModel`` or ``BertForPreTraining`` on ``batch``, by the assembled
    model's step names. ``model`` must run eager attention (``attn_implementation="eager"``)."""
    bert = getattr(model, "bert", model)
    heads = bert.config.num_attention_heads
    found, handles = {}, []

    def hook(module, name, *, pre=False):
        def keep(_, args, output=None):
            value = args[0] if pre else output
            found[name] = value[0] if isinstance(value, tuple) else value

        if pre:
            handles.append(module.register_forward_pre_hook(keep))
        else:
            handles.append(module.register_forward_hook(keep))

    hook(bert.embeddings.LayerNorm, "embeddings: LayerNorm")
    hook(bert.embeddings, "embeddings")
    for index, layer in enumerate(bert.encoder.layer):
        where = f"layer {index}"
        hook(layer, f"{where}: input", pre=True)
        for part in ("query", "key", "value"):
            hook(getattr(layer.attention.self, part), f"{where}: {part}")
        hook(layer.attention.self, f"{where}: context")
        hook(layer.attention.output.dense, f"{where}: W_O")
        hook(layer.attention.output, f"{where}: first residual and LayerNorm")
        hook(layer.output.dense, f"{where}: feed-forward")
        hook(layer, f"{where}: second residual and LayerNorm")
    try:
        with torch.no_grad():
            out = model(**batch, output_attentions=True)
    finally:
        for handle in handles:
            handle.remove()
    attentions = out.attentions
    if hasattr(out, "prediction_logits"):
        found["MLM head"] = out.prediction_logits
    steps = {"embeddings: LayerNorm": found["embeddings: LayerNorm"], "embeddings": found["embeddings"]}
    for index in range(len(bert.encoder.layer)):
        where = f"layer {index}"
        q, k, v = (found[f"{where}: {part}"] for part in ("query", "key", "value"))  # 3 x (batch, seq, hidden)
        split = [_as_heads(t, heads) for t in (q, k, v)]  # 3 x (batch, heads, seq, d_head)
        context = found[f"{where}: context"]  # (batch, seq, hidden)
        steps[f"{where}: what post_ln_layer gives the attention"] = found[f"{where}: input"]
        steps[f"{where}: Q, K and V"] = (q, k, v)
        for name, t in zip("qkv", split, strict=True):
            steps[f"{where}: heads split ({name})"] = t
        steps[f"{where}: attention scores"] = split[0] @ split[1].transpose(-2, -1)  # (batch, heads, seq, seq)
        steps[f"{where}: masked softmax"] = attentions[index]
        steps[f"{where}: attention"] = (_as_heads(context, heads), attentions[index])
        steps[f"{where}: heads merged"] = context
        steps[f"{where}: W_O"] = found[f"{where}: W_O"]
        steps[f"{where}: LayerNorm"] = found[f"{where}: first residual and LayerNorm"]
        steps[f"{where}: first residual and LayerNorm"] = found[f"{where}: first residual and LayerNorm"]
        steps[f"{where}: feed-forward"] = found[f"{where}: feed-forward"]
        steps[f"{where}: second residual and LayerNorm"] = found[f"{where}: second residual and LayerNorm"]
    if "MLM head" in found:
        steps["MLM head"] = found["MLM head"]
    return steps


def _as_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    batch, seq, hidden = x.shape
    return x.view(batch, seq, heads, hidden // heads).transpose(1, 2)  # (batch, heads, seq, d_head)


@dataclasses.dataclass(frozen=True, repr=False)
class Report:
    """What ``compare`` found: the first step that differs (None when every step matched), its piece, the
    largest difference there (or of the whole output), the steps that matched, and the words a learner reads."""

    step: str | None
    piece: str | None
    difference: float
    matched: tuple[str, ...]
    text: str
    used: tuple[tuple[str, float], ...] = ()  # (step, its largest |difference| / tolerance), every step computed

    @property
    def worst_matched(self) -> float:
        """The largest share of the tolerance that a matched step uses (below 1: rounding's room)."""
        matched = set(self.matched)
        return max((ratio for step, ratio in self.used if step in matched), default=0.0)

    @property
    def matches(self) -> bool:
        return self.step is None

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__


def compare(pieces: Pieces, hf_model, batch: dict, *, folder=None, pretraining: bool = False) -> Report:
    """The assembled model from ``pieces`` (weights from ``folder``, as ``assemble`` takes it) against
    ``hf_model``, ``transformers``' model on the same weights, step by step on ``batch``."""
    theirs = hugging_face_steps(hf_model, batch)
    try:
        model = assemble(pieces, folder, pretraining=pretraining)
    except WeightsDoNotFit as error:
        return _report(pieces, "weights renamed", "hf_to_ours", math.inf, (), f"the weights do not fit: {error}.")
    except PieceFailed as error:
        return _failed(pieces, error, ())
    misplaced = misplaced_weights(pieces, model.weight_sources, pretraining) if "hf_to_ours" in pieces.mine else []
    if misplaced:
        others = f" (and {len(misplaced) - 1} more)" if len(misplaced) > 1 else ""
        problem = f"every key loads (the shapes fit), but {misplaced[0]}{others}."
        return _report(pieces, "weights renamed", "hf_to_ours", math.inf, (), problem)
    recorder = model.recorder if not pretraining else model.bert.recorder
    recorder.steps, recorder.pieces_of = {}, {}
    failed = None
    try:
        with torch.no_grad():
            model(**batch)
    except PieceFailed as error:
        failed = error  # a step that raised: but an earlier step may already differ, and be the cause
    finally:
        ours, pieces_of = recorder.steps, recorder.pieces_of
        recorder.steps = None
    if failed is not None:
        theirs = {step: value for step, value in theirs.items() if step in ours}  # the steps computed before it
    step = first_difference(ours, theirs, ATOL, RTOL)  # the exercise of notebook 13: the first step beyond tolerance
    used = tuple((name, tolerance_used(ours[name], theirs[name], ATOL, RTOL)) for name in theirs if name in ours)
    return dataclasses.replace(_compared(pieces, ours, theirs, pieces_of, step, failed), used=used)


def _compared(pieces, ours, theirs, pieces_of, step, failed) -> Report:
    matched = tuple(itertools.takewhile(lambda name: name != step, theirs))  # every step before it matched
    upstream = tuple(dict.fromkeys(pieces_of[name] for name in matched if pieces_of.get(name) in pieces.mine))
    if failed is not None and step is None:
        return _failed(pieces, failed, matched)
    if step is not None and step not in ours:
        piece = _caller_of(step)
        return _report(pieces, step, piece, math.inf, matched, f"your `{piece}` never computed this step.")
    if step is not None:
        problem, difference = _difference(ours[step], theirs[step], _item_names(step))
        return _report(pieces, step, pieces_of[step], difference, matched, problem, upstream)
    output = next(reversed(theirs))
    _, largest = _difference(ours[output], theirs[output])
    lines = [
        f"Every step matches Hugging Face's ({len(matched)} steps, the attention maps included): the largest "
        f"difference of the last step ({output}) is below {_bound(largest)}."
    ]
    for name in (name for name in PIECES if name in pieces.mine and not pieces.verdicts[name].passed):
        lines += [
            f"But your `{name}` fails its own check, which tries inputs (and gradients) this batch does not:",
            pieces.verdicts[name].message,
            f"Go back to {notebook_of(name)}.",
        ]
    return Report(None, None, largest, matched, "\n".join(lines))


def _caller_of(step: str) -> str:
    """The piece whose call leads to ``step``: the layer's pieces are called by ``post_ln_layer``."""
    return "post_ln_layer" if step.startswith("layer ") else "bert_embeddings"


def _item_names(step: str) -> tuple[str, ...] | None:
    """What the tensors of a tuple step are, in order (None: "item 1", "item 2", ...)."""
    if step.endswith(": Q, K and V"):
        return ("Q", "K", "V")
    if step.endswith(": attention"):
        return ("the output", "the attention weights")
    return None


def _difference(mine, theirs, names=None) -> tuple[str | None, float]:
    """(what differs, in words, or None; the largest |mine - theirs|) for a tensor or a tuple of tensors (whose
    items ``names`` calls by name)."""
    if isinstance(theirs, tuple):
        if not isinstance(mine, (tuple, list)) or len(mine) != len(theirs):
            return f"it gave {_kind(mine)} instead of {len(theirs)} tensors.", math.inf
        results = [_difference(m, t) for m, t in zip(mine, theirs, strict=True)]
        names = names or [f"item {i + 1}" for i in range(len(theirs))]
        problems = [f"{names[i]}: {problem}" for i, (problem, _) in enumerate(results) if problem]
        return (" ".join(problems) or None), max(d for _, d in results)
    if not isinstance(mine, torch.Tensor):
        return f"it gave {_kind(mine)} instead of a tensor.", math.inf
    if mine.shape != theirs.shape:
        return f"shape {tuple(mine.shape)} instead of {tuple(theirs.shape)}.", math.inf
    gap = (mine.detach().float() - theirs.float()).abs()
    largest = float(gap.nan_to_num(nan=math.inf).max()) if gap.numel() else 0.0
    if beyond_tolerance(mine, theirs, ATOL, RTOL):
        return f"max |yours - Hugging Face's| = {largest:.2g}.", largest
    return None, largest


def _kind(value) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return f"a {type(value).__name__}"


def _bound(value: float) -> str:
    """The power of ten just above ``value``: a bound that holds on every machine, not a noisy figure."""
    return "1e-9" if value < 1e-9 else f"1e{math.ceil(math.log10(value)) if value > 0 else -9}"


def _failed(pieces: Pieces, error: PieceFailed, matched) -> Report:
    problem = f"it raised {type(error.error).__name__}: {str(error.error).splitlines()[0] if str(error.error) else ''}"
    return _report(pieces, error.step, error.piece, math.inf, tuple(matched), problem)


def _report(
    pieces: Pieces, step: str, piece: str | None, difference: float, matched, problem: str, upstream=()
) -> Report:
    """The words of a report. ``upstream``: the learner's pieces among those that computed the matched steps."""
    lines = [f"First difference: {step}. {problem}"]
    grew = piece is not None and piece not in pieces.mine and bool(upstream)  # a reference piece, after yours
    if matched:
        before = "The step before it matches" if len(matched) == 1 else f"The {len(matched)} steps before it match"
        lines.append(
            f"{before} Hugging Face's" + (" within tolerance." if grew else ", so this step's input was right.")
        )
    if piece is None:
        lines.append("The assembly computes this step itself, from what your pieces gave it.")
    elif grew:
        names = ", ".join(f"`{name}`" for name in upstream)
        lines.append(
            f"This step runs the package's `{piece}`, which is right: a difference of one of your pieces, too small "
            f"to see at its own step, grew until here. Look at your pieces that ran before it: {names}."
        )
    elif piece not in pieces.mine:
        lines.append(f"This step runs the package's `{piece}`: look at what your pieces gave it.")
    else:
        verdict = pieces.verdicts[piece]
        lines.append(f"It is your `{piece}`. Its check, on its own:")
        lines.append(verdict.message)
        if verdict.passed:
            lines.append(
                "Right alone but wrong in place: look at what it receives here (a mask of the other convention, "
                "a dtype, a batch axis, a `(batch, 1, 1, seq)` mask) and what the next piece expects of it."
            )
        lines.append(f"Go back to {notebook_of(piece)}.")
    mine = ", ".join(f"`{name}`" for name in sorted(pieces.mine)) or "none"
    lines.append(f"Your pieces in this model: {mine}; every other piece is the package's reference.")
    return Report(step, piece, difference, tuple(matched), "\n".join(lines))


def summary(report: Report) -> Listing:
    """The report as a Listing (Markdown in a notebook)."""
    return Listing(report.text, report.text.replace("\n", "  \n"))
