"""Judging MLM where it counts: on the [MASK] positions, against baselines that ignore the context.

Of the selected tokens, 80% show [MASK], 10% a random token and 10% themselves. A model can score
well on all selected tokens together without reading any context: it copies the visible token at
the unchanged 10%. So every figure here is split by what the model saw (``KINDS``):

- ``mask``: the position shows [MASK]; only the context can tell the word;
- ``random``: it shows another, random token;
- ``kept``: it shows the right token (a random draw that hits the original counts here too).

The baselines use the same positions. ``most frequent`` always answers the most frequent training
token; ``unigram`` is the distribution of the training tokens (add-one smoothed), the best a model
can do that knows nothing but the token counts; ``copy`` sees its own position only: at [MASK] the
unigram distribution, at a visible token v half its mass on v (the kept and the random shares are
equal) and half on the unigram. A model that learns from context beats these on ``mask``; a model
that beats them on all positions but not on ``mask`` has learnt to copy.

``position`` knows where the gap is and nothing else: the distribution of the training tokens at each
position of the pair (``position_baseline``), so in pairs of 16 tokens it knows that position 1
starts sentence A and that the last positions tend to end B. A model that beats the unigram model
only by that much has learnt the layout of a pair, not the words around the gap.

``masked_only_accuracy`` is the ``mask`` kind's accuracy as one function (notebook 09's exercise).

``nsp_by_text_kind`` splits NSP's recall by the kind of text each sentence came from (a plot summary,
a review): a model that answers NotNext when the two kinds differ has learnt the kind, not the order.

``swap_context`` and ``WatchedMetrics`` test whether the model reads the context at all: the same [MASK]
positions, the same answers, scored once in their own pair and once in another pair's words. A model that
ignores the context loses nothing in another pair; one that reads it does worse there. ``WatchedMetrics``
also records how much attention each head gives [SEP] (``sep_attention_<layer>_<head>``), beside the
share uniform attention would give it (``sep_uniform``).

``continuation`` is the [MASK] positions whose answer is a word piece that continues a word
(``##ing``): the neighbouring piece all but decides it, so it is the first place context shows.
"""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

from .._validation import describe, require_integer_tensor, require_positive_int, require_tensor
from ..heads import IGNORE_INDEX
from ..tokenizer import WordPieceTokenizer
from .masking import MASK_SHARE, RANDOM_SHARE
from .pairs import MAX_LENGTH, collate_pairs, pair_positions, require_max_length, sample_nsp_pairs
from .vocabulary import SpecialIds, require_specials

KINDS = ("mask", "random", "kept")
COPY_SHARE = (1 - MASK_SHARE - RANDOM_SHARE) / (1 - MASK_SHARE)  # of the visible selected tokens, kept: 0.5
POSITION_WEIGHT = 0.5  # the position's own counts against the unigram model, in ``position_baseline``


def selected_kinds(input_ids: torch.Tensor, labels: torch.Tensor, mask_token_id: int) -> dict[str, torch.Tensor]:
    """{kind: (batch, seq) bool}: the selected positions (label != -100) split by what the model saw."""
    selected = labels != IGNORE_INDEX  # (batch, seq)
    shows_mask = selected & (input_ids == mask_token_id)  # (batch, seq)
    kept = selected & (input_ids == labels)  # (batch, seq)
    return {"mask": shows_mask, "random": selected & ~shows_mask & ~kept, "kept": kept}


def continuation_ids(tokenizer: WordPieceTokenizer) -> torch.Tensor:
    """(n,) the ids of the pieces that continue a word: those written ``##...``."""
    if not isinstance(tokenizer, WordPieceTokenizer):
        raise TypeError("`tokenizer` must be a bc.WordPieceTokenizer.")
    tokens = tokenizer.convert_ids_to_tokens(list(range(tokenizer.vocab_size)))
    return torch.tensor([i for i, token in enumerate(tokens) if token.startswith("##")], dtype=torch.long)


class PretrainingMetrics:
    """``metrics(batch, output) -> {name: (value, weight)}``, what ``training.evaluate`` averages.

    For each kind of selected position (``mask``, ``random``, ``kept``), and for all of them
    (``mlm``): ``<kind>_loss`` and ``<kind>_accuracy``, weighted by the number of such positions, so
    the averages are over every held-out position of that kind. ``continuation_*``: the [MASK]
    positions whose answer is a ``##`` piece (given ``continuations``). NSP: loss, accuracy, and the
    recall of each class (``nsp_recall_is_next``, ``nsp_recall_not_next``); their mean is the
    balanced accuracy, which a model that always answers one class cannot lift above 50%.
    """

    def __init__(self, specials: SpecialIds, continuations: torch.Tensor | None = None):
        require_specials(specials)
        if continuations is not None:
            require_integer_tensor("continuations", continuations)
        self.specials = specials
        self.continuations = continuations

    def __call__(self, batch: dict, output) -> dict[str, tuple[torch.Tensor, int]]:
        labels, logits = batch["labels"], output.prediction_logits  # (batch, seq), (batch, seq, vocab)
        where = {"mlm": labels != IGNORE_INDEX, **selected_kinds(batch["input_ids"], labels, self.specials.mask)}
        if self.continuations is not None:
            where["continuation"] = where["mask"] & torch.isin(labels, self.continuations.to(labels.device))
        figures = {}
        for kind, chosen in where.items():
            count = int(chosen.sum())
            if count:
                kind_logits, kind_labels = logits[chosen].float(), labels[chosen]  # (count, vocab), (count,)
                figures[f"{kind}_loss"] = (F.cross_entropy(kind_logits, kind_labels), count)
                figures[f"{kind}_accuracy"] = ((kind_logits.argmax(dim=-1) == kind_labels).float().mean(), count)
        if output.seq_relationship_logits is not None and "next_sentence_label" in batch:
            truth = batch["next_sentence_label"]  # (batch,)
            right = output.seq_relationship_logits.argmax(dim=-1) == truth  # (batch,)
            figures["nsp_loss"] = (F.cross_entropy(output.seq_relationship_logits.float(), truth), len(truth))
            figures["nsp_accuracy"] = (right.float().mean(), len(truth))
            for label, name in ((0, "is_next"), (1, "not_next")):
                count = int((truth == label).sum())
                if count:
                    figures[f"nsp_recall_{name}"] = (right[truth == label].float().mean(), count)
        return figures


def swap_context(batch: dict, specials: SpecialIds, shift: int = 1) -> tuple[dict, torch.Tensor]:
    """Each pair's [MASK] positions put into the words of another pair: (model inputs, scored (batch, seq) bool).

    Row ``i`` takes the input of row ``i - shift`` (its tokens, token types and attention mask, its own
    masks included) and gets [MASK] at its own [MASK] positions. ``scored``: those of row ``i``'s [MASK]
    positions where the other pair has an ordinary token, so that the position, the answer and the layout
    stay and only the words around change. Compare the loss there with the loss in the pair's own words.
    """
    require_specials(specials)
    labels, seen = batch["labels"], batch["input_ids"]  # (batch, seq) each
    original = torch.where(labels != IGNORE_INDEX, labels, seen)  # (batch, seq): the texts before masking
    donor = {k: batch[k].roll(shift, dims=0) for k in ("input_ids", "attention_mask", "token_type_ids")}
    donor_ordinary = donor["attention_mask"].bool() & ~torch.isin(
        original.roll(shift, dims=0), specials.ids.to(seen.device)
    )  # (batch, seq)
    scored = selected_kinds(seen, labels, specials.mask)["mask"] & donor_ordinary  # (batch, seq)
    donor["input_ids"] = torch.where(scored, specials.mask, donor["input_ids"])  # (batch, seq)
    return donor, scored


class WatchedMetrics(PretrainingMetrics):
    """``PretrainingMetrics`` plus two probes of ``model`` at each evaluation (it runs the model again):

    ``swap_loss``: the [MASK] loss with another pair's words around the gap (``swap_context``), and
    ``swap_own_loss``: the loss at the same positions in their own pair; ``sep_attention_<layer>_<head>``:
    the mean share of attention an ordinary token (a word or [MASK]) gives the [SEP] tokens, and
    ``sep_uniform``: the share uniform attention over the real tokens would give them.
    """

    def __init__(self, model, specials: SpecialIds, continuations: torch.Tensor | None = None):
        super().__init__(specials, continuations)
        if not callable(model):
            raise TypeError(f"`model` must be the BertForPreTraining being trained, got {describe(model)}.")
        self.model = model

    def __call__(self, batch: dict, output) -> dict[str, tuple[torch.Tensor, int]]:
        figures = super().__call__(batch, output)
        inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
        swapped, scored = swap_context(batch, self.specials)
        count = int(scored.sum())
        if count:
            answers = batch["labels"][scored]  # (count,)
            swapped_logits = self.model(**swapped).prediction_logits[scored].float()  # (count, vocab)
            figures["swap_loss"] = (F.cross_entropy(swapped_logits, answers), count)
            figures["swap_own_loss"] = (F.cross_entropy(output.prediction_logits[scored].float(), answers), count)
        real = batch["attention_mask"].bool()  # (batch, seq)
        queries = real & ~torch.isin(batch["input_ids"], self.specials.ids.to(real.device)) | (
            batch["input_ids"] == self.specials.mask
        )  # (batch, seq): words and [MASK]
        is_sep = batch["input_ids"] == self.specials.sep  # (batch, seq)
        n = int(queries.sum())
        if n:
            attentions = self.model(**inputs, output_attentions=True).bert.attentions  # layers x (b, heads, q, k)
            for layer, weights in enumerate(attentions):
                to_sep = (weights * is_sep[:, None, None, :]).sum(-1)  # (batch, heads, q)
                for head in range(weights.shape[1]):
                    figures[f"sep_attention_{layer}_{head}"] = (to_sep[:, head][queries].float().mean(), n)
            uniform = is_sep.sum(-1, keepdim=True) / real.sum(-1, keepdim=True)  # (batch, 1)
            figures["sep_uniform"] = (uniform.expand_as(queries)[queries].float().mean(), n)
        return figures


def neighbour_attention(model, batches) -> torch.Tensor:
    """(layers, heads, 2): each head's mean attention from a token to the token before it and to the one after.

    Over every real token of ``batches`` that has a real neighbour on that side ([CLS], [SEP], [MASK]
    included). Uniform attention over a pair of ``n`` real tokens gives each neighbour ``1/n``; a
    previous-token head gives the token before most of its attention.
    """
    device = _device_of(model)
    was_training = model.training
    model.eval()
    sums, counts = None, torch.zeros(2)
    try:
        with torch.no_grad():
            for batch in batches:
                inputs = {k: batch[k].to(device) for k in ("input_ids", "attention_mask", "token_type_ids")}
                weights = torch.stack(model(**inputs, output_attentions=True).bert.attentions).cpu()  # (L, b, H, q, k)
                real = batch["attention_mask"].bool()  # (batch, seq)
                pairs = real[:, 1:] & real[:, :-1]  # (batch, seq - 1): position i + 1 and i both real
                before = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)  # (L, b, H, seq - 1): i + 1 -> i
                after = torch.diagonal(weights, offset=1, dim1=-2, dim2=-1)  # (L, b, H, seq - 1): i -> i + 1
                both = torch.stack([before, after], dim=-1)  # (L, b, H, seq - 1, 2)
                total = (both * pairs[None, :, None, :, None]).sum(dim=(1, 3)).double()  # (L, H, 2)
                sums = total if sums is None else sums + total
                counts += int(pairs.sum())
    finally:
        model.train(was_training)
    if sums is None or not counts[0]:
        raise ValueError("`batches` hold no two neighbouring real tokens: there is nothing to measure.")
    return (sums / counts.double()).float()


def balanced_nsp_accuracy(figures: dict[str, float]) -> float:
    """The mean of the two NSP recalls of ``evaluate``'s figures: 50% for a model that answers one class."""
    return (figures["nsp_recall_is_next"] + figures["nsp_recall_not_next"]) / 2


def token_distribution(train_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """(vocab,) float64: the unigram distribution of ``train_ids``, add-one smoothed (no token has p = 0)."""
    require_integer_tensor("train_ids", train_ids)
    counts = torch.bincount(train_ids.flatten(), minlength=vocab_size).double() + 1.0  # (vocab,)
    return counts / counts.sum()


@dataclasses.dataclass(frozen=True)
class PositionBaseline:
    """A guess from the position alone: ``probabilities`` (seq, vocab) float64 and ``guesses`` (seq,) long."""

    probabilities: torch.Tensor
    guesses: torch.Tensor


def position_baseline(batches, train_ids: torch.Tensor, specials: SpecialIds) -> PositionBaseline:
    """What the position alone predicts, counted on the ordinary tokens of ``batches`` (training pairs).

    At position ``i`` of a pair: the original token (the label where one was selected, else the
    input), [CLS]/[SEP]/padding left out. ``probabilities[i]`` mixes the counts at ``i`` half and half
    with the unigram model of ``train_ids`` (a position seen rarely falls back on word counts, and no
    token gets p = 0); ``guesses[i]`` is the commonest token at ``i``, the most frequent token where
    ``i`` holds none. ``seq`` is the longest batch's length.
    """
    require_specials(specials)
    unigram = token_distribution(train_ids, specials.vocab_size)  # (vocab,)
    batches = list(batches)
    if not batches:
        raise ValueError("`batches` is empty: the position counts need training pairs.")
    seq = max(batch["input_ids"].shape[1] for batch in batches)
    counts = torch.zeros(seq, specials.vocab_size, dtype=torch.float64)  # (seq, vocab)
    for batch in batches:
        labels, seen = batch["labels"], batch["input_ids"]  # (batch, len) each
        original = torch.where(labels != IGNORE_INDEX, labels, seen)  # (batch, len): the text before masking
        ordinary = batch["attention_mask"].bool() & ~torch.isin(original, specials.ids)  # (batch, len)
        rows, where = ordinary.nonzero(as_tuple=True)  # (n,), (n,): the pair and the position of each token
        counts.index_put_((where, original[rows, where]), torch.ones(len(rows), dtype=torch.float64), accumulate=True)
    totals = counts.sum(dim=1, keepdim=True)  # (seq, 1)
    at_position = torch.where(totals > 0, counts / totals.clamp(min=1), unigram)  # (seq, vocab)
    return PositionBaseline(
        probabilities=POSITION_WEIGHT * at_position + (1 - POSITION_WEIGHT) * unigram,  # (seq, vocab)
        guesses=torch.where(totals[:, 0] > 0, counts.argmax(dim=1), unigram.argmax()),  # (seq,)
    )


def mlm_baselines(
    train_ids: torch.Tensor,
    batches,
    specials: SpecialIds,
    continuations=None,
    positions: PositionBaseline | None = None,
) -> dict[str, float]:
    """The context-free baselines on the selected positions of ``batches``, by kind.

    ``<kind>_most_frequent_accuracy`` and ``<kind>_unigram_loss`` for ``mlm`` (all selected),
    ``mask``, ``random``, ``kept`` (and ``continuation`` with ``continuations``); ``copy_loss`` and
    ``copy_accuracy`` on all selected positions. With ``positions`` (a ``position_baseline``), also
    ``<kind>_position_loss`` and ``<kind>_position_accuracy``: the best guess from the position alone.
    ``train_ids``: the pretraining tokens, specials excluded by the caller.
    """
    require_specials(specials)
    if positions is not None:
        if not isinstance(positions, PositionBaseline):
            raise TypeError(f"`positions` must be a pretraining.position_baseline(...), got {describe(positions)}.")
        if positions.probabilities.shape[1] != specials.vocab_size:
            raise ValueError(
                f"`positions` counts a vocabulary of {positions.probabilities.shape[1]}, `specials` one of "
                f"{specials.vocab_size}."
            )
    p = token_distribution(train_ids, specials.vocab_size)  # (vocab,)
    most_frequent = int(p.argmax())
    sums: dict[str, list[float]] = {}

    def add(name, count, loss, right):
        total = sums.setdefault(name, [0, 0.0, 0.0])
        total[0] += count
        total[1] += loss
        total[2] += right

    for batch in batches:
        labels, seen = batch["labels"], batch["input_ids"]  # (batch, seq) each
        if positions is not None and labels.shape[1] > len(positions.guesses):
            raise ValueError(
                f"`positions` covers {len(positions.guesses)} positions, a batch of `batches` has {labels.shape[1]}."
            )
        where = {"mlm": labels != IGNORE_INDEX, **selected_kinds(seen, labels, specials.mask)}
        if continuations is not None:
            where["continuation"] = where["mask"] & torch.isin(labels, continuations)
        for kind, chosen in where.items():
            y = labels[chosen]  # (count,)
            add(kind, len(y), float(-p[y].log().sum()), float((y == most_frequent).sum()))
            if positions is not None:
                at = chosen.nonzero(as_tuple=True)[1]  # (count,): the position of each
                loss = float(-positions.probabilities[at, y].log().sum())
                add(kind + "_position", len(y), loss, float((positions.guesses[at] == y).sum()))
        y, v = labels[where["mlm"]], seen[where["mlm"]]  # (selected,): the answer, what the model saw
        visible = v != specials.mask  # (selected,)
        copy_p = torch.where(visible, (1 - COPY_SHARE) * p[y] + COPY_SHARE * (v == y).double(), p[y])  # (selected,)
        copy_guess = torch.where(visible, v, most_frequent)  # (selected,)
        add("copy", len(y), float(-copy_p.log().sum()), float((copy_guess == y).sum()))
    if "mlm" not in sums or not sums["mlm"][0]:
        raise ValueError("`batches` select no position (every label is -100): there is nothing to compare.")
    figures = {"copy_loss": sums["copy"][1] / sums["copy"][0], "copy_accuracy": sums["copy"][2] / sums["copy"][0]}
    for kind, (count, loss, right) in sums.items():
        if kind == "copy" or not count:
            continue
        if kind.endswith("_position"):
            figures[f"{kind}_loss"] = loss / count
            figures[f"{kind}_accuracy"] = right / count
        else:
            figures[f"{kind}_unigram_loss"] = loss / count
            figures[f"{kind}_most_frequent_accuracy"] = right / count
    return figures


def _device_of(model) -> torch.device:
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def nsp_by_text_kind(
    model, documents, kinds, specials: SpecialIds, *, max_length: int = MAX_LENGTH, draws: int = 4, seed: int = 0
) -> list[dict]:
    """NSP's recall for each (label, kind of A, kind of B): does the model read order, or the kind of text?

    ``kinds[d]`` names document ``d``'s kind (``"plot"``, ``"review"``). Every sentence A of
    ``documents`` gets ``draws`` draws of B (``sample_nsp_pairs``, seeded); the model answers each pair.
    Returns one row per group: ``{"label": "IsNext" | "NotNext", "A": kind, "B": kind, "pairs": n,
    "recall": share answered right}``. A NotNext pair of two kinds is easy by the kind alone; one of the
    same kind needs more than that.
    """
    require_specials(specials)
    require_max_length(max_length)
    if not isinstance(kinds, (list, tuple)) or len(kinds) != len(documents):
        raise ValueError(
            f"`kinds` must name the kind of each of the {len(documents)} documents, got {describe(kinds)}."
        )
    require_positive_int("draws", draws)
    document_of = {id(sentence): d for d, document in enumerate(documents) for sentence in document}
    positions = pair_positions(documents)
    right: dict[tuple[str, str, str], list[int]] = {}
    device = _device_of(model)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for draw in range(draws):
                generator = torch.Generator().manual_seed(seed + draw)
                pairs = sample_nsp_pairs(documents, positions, generator=generator)
                for start in range(0, len(pairs), 64):
                    chunk = pairs[start : start + 64]
                    batch = collate_pairs(chunk, specials, generator=generator, max_length=max_length)
                    inputs = {k: batch[k].to(device) for k in ("input_ids", "attention_mask", "token_type_ids")}
                    answers = model(**inputs).seq_relationship_logits.argmax(dim=-1).cpu()  # (chunk,)
                    for (a, b, label), answer in zip(chunk, answers.tolist(), strict=True):
                        group = ("NotNext" if label else "IsNext", kinds[document_of[id(a)]], kinds[document_of[id(b)]])
                        tally = right.setdefault(group, [0, 0])
                        tally[0] += answer == label
                        tally[1] += 1
    finally:
        model.train(was_training)
    return [
        {"label": label, "A": a, "B": b, "pairs": n, "recall": hits / n}
        for (label, a, b), (hits, n) in sorted(right.items())
    ]


def top_predictions(model, batches, specials: SpecialIds) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's top guess and the answer at every [MASK] position of ``batches``: two (n,) tensors.

    A model that ignores the context gives the same guess everywhere; ``context_figures`` counts.
    """
    require_specials(specials)
    device = _device_of(model)  # the batches stay on the CPU; the model may be on a GPU
    was_training = model.training
    model.eval()
    guesses, answers = [], []
    try:
        with torch.no_grad():
            for batch in batches:
                inputs = {k: batch[k].to(device) for k in ("input_ids", "attention_mask", "token_type_ids")}
                logits = model(**inputs).prediction_logits.cpu()  # (batch, seq, vocab)
                chosen = selected_kinds(batch["input_ids"], batch["labels"], specials.mask)["mask"]
                guesses.append(logits[chosen].argmax(dim=-1))  # (count,)
                answers.append(batch["labels"][chosen])  # (count,)
    finally:
        model.train(was_training)
    return torch.cat(guesses), torch.cat(answers)


def context_figures(guesses: torch.Tensor, answers: torch.Tensor) -> dict[str, float]:
    """How much the top guess at [MASK] changes with the sentence.

    ``distinct``: the number of different top guesses; ``off_mode``: the share of [MASK] positions
    whose guess is not the model's commonest guess (0 for a model that answers one token everywhere;
    a guess from the position alone varies a little, with the position); ``off_mode_right``: the
    share of those that are right.
    """
    require_integer_tensor("guesses", guesses)
    require_integer_tensor("answers", answers)
    if guesses.shape != answers.shape or not len(guesses):
        raise ValueError("`guesses` and `answers` must be two (n,) tensors of the same, non-zero length.")
    mode = int(guesses.mode().values)
    off = guesses != mode  # (n,)
    return {
        "distinct": float(len(guesses.unique())),
        "off_mode": float(off.double().mean()),
        "off_mode_right": float((guesses[off] == answers[off]).double().mean()) if off.any() else 0.0,
    }


def masked_only_accuracy(
    prediction_logits: torch.Tensor, labels: torch.Tensor, input_ids: torch.Tensor, mask_token_id: int
) -> torch.Tensor:
    """The share of the selected positions that show ``[MASK]`` whose highest logit is the label: a 0-d tensor.

    NaN when no selected position shows ``[MASK]``, as ``mlm_accuracy`` on no selected position.
    """
    require_tensor("prediction_logits", prediction_logits, ndim=3)
    require_integer_tensor("labels", labels)
    require_integer_tensor("input_ids", input_ids)
    if prediction_logits.shape[:-1] != labels.shape or input_ids.shape != labels.shape:
        raise ValueError(
            f"`prediction_logits` must be (batch, seq, vocab) and `labels`, `input_ids` (batch, seq), got "
            f"{describe(prediction_logits)}, {describe(labels)} and {describe(input_ids)}."
        )
    if isinstance(mask_token_id, bool) or not isinstance(mask_token_id, int):
        raise TypeError(f"`mask_token_id` must be an int, got {describe(mask_token_id)}.")
    return _masked_only_accuracy(prediction_logits, labels, input_ids, mask_token_id)


def _masked_only_accuracy(prediction_logits, labels, input_ids, mask_token_id):
    """Accuracy on the selected positions (label != -100) that show [MASK]; the kept and random ones left out."""
    selected = labels != IGNORE_INDEX  # (batch, seq): the positions in the loss
    shows_mask = selected & (input_ids == mask_token_id)  # (batch, seq): of those, the ones the model sees as [MASK]
    correct = prediction_logits.argmax(dim=-1) == labels  # (batch, seq)
    return correct[shows_mask].float().mean()  # (): NaN when no position shows [MASK]
