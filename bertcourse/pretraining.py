"""The data of BERT's pretraining: a WordPiece vocabulary, masked tokens (MLM) and sentence pairs (NSP).

From raw documents to the batch ``BertForPreTraining`` learns from, in the order of notebook 09::

    tokenizer = train_wordpiece(texts, folder, vocab_size=2000)     # vocab.txt, read by WordPieceTokenizer
    specials = SpecialIds.from_tokenizer(tokenizer)                  # [PAD] [UNK] [CLS] [SEP] [MASK] ids
    documents = tokenize_documents(tokenizer, texts)                 # documents -> sentences -> token ids
    collate = PretrainingCollator(documents, specials, max_length=48)
    batch = collate(collate.positions[:32], generator)               # what the model takes, with labels

- **MLM** (``mask_tokens``, its core ``mlm_corrupt``): 15% of the tokens that are not special are
  *selected*; of those, 80% become [MASK], 10% a random token, 10% stay as they are. The label is
  the original token at the selected positions and -100 everywhere else, so the loss counts the
  selected positions only. [CLS], [SEP], [PAD] (and [UNK], [MASK]) are never selected. The random
  replacement is a non-special token.
- **NSP** (``sample_nsp_pairs``): sentence A is a sentence of a document that has a next sentence;
  B is that next sentence half of the time (label 0, IsNext) and a random sentence of another
  document otherwise (label 1, NotNext): Hugging Face's label convention. Simplified from BERT,
  which packs several sentences into each segment to fill the length: here a segment is one sentence.
- **Truncation** (``truncate_pair``): while ``[CLS] A [SEP] B [SEP]`` is too long, drop the last
  token of the longer segment, of B when they are equally long: the rule of BERT's original code
  (``truncate_seq_pair``) and of ``transformers``' Python tokenizers. (The Rust ``tokenizers``
  library keeps A's last token on a tie instead; ties are rare.)
- **Collation** (``collate_pairs``): pads to the longest pair of the batch and returns
  ``input_ids``, ``attention_mask`` (1 = real token), ``token_type_ids`` (0 for [CLS] A [SEP],
  1 for B [SEP]), ``labels`` and ``next_sentence_label``: ``model(**batch)`` gives the losses.

Every random choice comes from a ``torch.Generator`` passed in explicitly, never from the global
random state: the same generator state gives the same batch, on every machine. ``training`` derives
one generator per step from the seed and the step number, which is what makes a resumed run
identical to one that never stopped.

``pretrain`` runs the whole recipe of notebook 09 in one call, and ``python -m bertcourse.pretraining
--steps 6000`` the longer run; ``mlm_baselines`` and ``pretraining_metrics`` are what it is judged by.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import torch

from ._validation import describe, require_integer_tensor, require_positive_int, require_tensor
from .config import BertConfig
from .corpus import split_sentences
from .heads import IGNORE_INDEX
from .tokenizer import WordPieceTokenizer

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
VOCAB_SIZE = 2000  # notebook 09's vocabulary
MAX_LENGTH = 48  # notebook 09's [CLS] A [SEP] B [SEP], in tokens
MIN_LENGTH = 8  # [CLS] A [SEP] B [SEP] with a few tokens each: shorter pairs teach nothing
MASK_SHARE, RANDOM_SHARE = 0.8, 0.1  # of the selected tokens; the remaining 10% stay unchanged


# --- the vocabulary ------------------------------------------------------------------------------


def train_wordpiece(texts, folder, vocab_size: int = VOCAB_SIZE, min_frequency: int = 2) -> WordPieceTokenizer:
    """Train a WordPiece vocabulary on ``texts`` with BERT's normalisation (lowercase, accents
    stripped, punctuation split) and special tokens; write ``folder/vocab.txt``; return its tokenizer.

    The ``tokenizers`` trainer numbers tokens of equal count in an arbitrary order, so the file
    lists the special tokens first and every other token in sorted order: the same vocabulary, and
    the same ids, on every run.
    """
    from tokenizers import BertWordPieceTokenizer

    texts = _require_texts("texts", texts)
    require_positive_int("vocab_size", vocab_size)
    require_positive_int("min_frequency", min_frequency)
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"`vocab_size` must be above the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}.")
    trainer = BertWordPieceTokenizer(lowercase=True)
    trainer.train_from_iterator(
        texts,
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        show_progress=False,
    )
    learned = sorted(set(trainer.get_vocab()) - set(SPECIAL_TOKENS))
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab_file = folder / "vocab.txt"
    vocab_file.write_text("".join(token + "\n" for token in (*SPECIAL_TOKENS, *learned)), encoding="utf-8")
    return WordPieceTokenizer(vocab_file)


@dataclasses.dataclass(frozen=True)
class SpecialIds:
    """The ids of the special tokens of a vocabulary, and its size."""

    pad: int
    unk: int
    cls: int
    sep: int
    mask: int
    vocab_size: int

    @classmethod
    def from_tokenizer(cls, tokenizer: WordPieceTokenizer) -> SpecialIds:
        if not isinstance(tokenizer, WordPieceTokenizer):
            raise TypeError(f"`tokenizer` must be a bc.WordPieceTokenizer, got {describe(tokenizer)}.")
        tokens = tokenizer.convert_ids_to_tokens(list(range(tokenizer.vocab_size)))
        missing = [token for token in SPECIAL_TOKENS if token not in tokens]
        if missing:
            raise ValueError(
                f"the tokenizer's vocabulary has no {', '.join(missing)}: MLM needs [MASK] (and [CLS], [SEP], "
                "[PAD], [UNK]) as tokens of the vocabulary. Train one with `train_wordpiece`, which adds them."
            )
        ids = {token: tokens.index(token) for token in SPECIAL_TOKENS}
        return cls(
            pad=ids["[PAD]"],
            unk=ids["[UNK]"],
            cls=ids["[CLS]"],
            sep=ids["[SEP]"],
            mask=ids["[MASK]"],
            vocab_size=len(tokens),
        )

    @property
    def ids(self) -> torch.Tensor:
        """(5,) the special ids: never selected for MLM, never a random replacement."""
        return torch.tensor([self.pad, self.unk, self.cls, self.sep, self.mask])

    def ordinary_ids(self) -> torch.Tensor:
        """(vocab_size - 5,) every other id: the candidates for the 10% random replacement."""
        every = torch.arange(self.vocab_size)
        return every[~torch.isin(every, self.ids)]


def tokenize_documents(tokenizer: WordPieceTokenizer, texts) -> list[list[torch.Tensor]]:
    """Documents -> sentences -> 1-D long tensors of token ids, without [CLS] or [SEP].

    Sentences come from ``corpus.split_sentences``; a sentence longer than 510 pieces is cut there.
    """
    if not isinstance(tokenizer, WordPieceTokenizer):
        raise TypeError(f"`tokenizer` must be a bc.WordPieceTokenizer, got {describe(tokenizer)}.")
    texts = _require_texts("texts", texts)
    sentences = [split_sentences(text) for text in texts]
    flat = [sentence for document in sentences for sentence in document]
    pieces = []
    for start in range(0, len(flat), 1024):
        batch = tokenizer(flat[start : start + 1024])  # [CLS] ids [SEP] [PAD]...
        lengths = batch["attention_mask"].sum(dim=1)  # (chunk,)
        pieces += [ids[1 : int(n) - 1].clone() for ids, n in zip(batch["input_ids"], lengths, strict=True)]
    documents, start = [], 0
    for document in sentences:
        documents.append([ids for ids in pieces[start : start + len(document)] if len(ids)])
        start += len(document)
    return documents


# --- MLM -----------------------------------------------------------------------------------------


def mask_tokens(
    input_ids: torch.Tensor, specials: SpecialIds, *, generator: torch.Generator, probability: float = 0.15
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking: returns (the ids the model sees, the labels), both shaped like ``input_ids``.

    ``probability`` of the non-special tokens are selected (each independently, as Hugging Face's
    collator does; BERT's own code picks exactly 15% per sequence). The draws come from
    ``generator``, on its device, then move to the ids' device.
    """
    require_integer_tensor("input_ids", input_ids, hint="Token ids come from the tokenizer.")
    _require_specials(specials)
    _require_generator(generator)
    _require_probability("probability", probability)
    shape, device = input_ids.shape, generator.device
    maskable = ~torch.isin(input_ids, specials.ids.to(input_ids.device))  # (batch, seq): no [CLS] [SEP] [PAD]
    selected = torch.rand(shape, generator=generator, device=device).to(input_ids.device) < probability
    draws = torch.rand(shape, generator=generator, device=device).to(input_ids.device)  # which of 80/10/10
    ordinary = specials.ordinary_ids().to(device)
    random_ids = ordinary[torch.randint(len(ordinary), shape, generator=generator, device=device)]
    return _mlm_corrupt(input_ids, selected & maskable, draws, random_ids.to(input_ids.device), specials.mask)


def mlm_corrupt(
    input_ids: torch.Tensor, selected: torch.Tensor, draws: torch.Tensor, random_ids: torch.Tensor, mask_token_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The 80/10/10 rule on given random draws: (corrupted ids, labels).

    ``selected`` (bool) marks the positions to predict; ``draws`` (uniform in [0, 1)) decide what
    each selected position shows: [MASK] below 0.8, ``random_ids`` from 0.8 to 0.9, itself above.
    Labels are the original ids where selected, -100 elsewhere.
    """
    require_integer_tensor("input_ids", input_ids)
    for name, tensor in (("selected", selected), ("draws", draws), ("random_ids", random_ids)):
        require_tensor(name, tensor)
        if tensor.shape != input_ids.shape:
            raise ValueError(
                f"`{name}` must have the shape of `input_ids` {tuple(input_ids.shape)}, got {describe(tensor)}."
            )
    if selected.dtype != torch.bool:
        raise TypeError(f"`selected` must be a bool tensor (True = predict this token), got {describe(selected)}.")
    if not draws.dtype.is_floating_point:
        raise TypeError(f"`draws` must hold uniform floats in [0, 1), got {describe(draws)}.")
    require_integer_tensor("random_ids", random_ids)
    if isinstance(mask_token_id, bool) or not isinstance(mask_token_id, int):
        raise TypeError(f"`mask_token_id` must be an int, got {describe(mask_token_id)}.")
    return _mlm_corrupt(input_ids, selected, draws, random_ids, mask_token_id)


def _mlm_corrupt(input_ids, selected, draws, random_ids, mask_token_id):
    labels = torch.where(selected, input_ids, IGNORE_INDEX)  # (batch, seq): predict only the selected
    to_mask = selected & (draws < MASK_SHARE)  # (batch, seq): 80% of them -> [MASK]
    to_random = selected & (draws >= MASK_SHARE) & (draws < MASK_SHARE + RANDOM_SHARE)  # 10% -> random
    corrupted = torch.where(to_mask, mask_token_id, input_ids)  # (batch, seq)
    corrupted = torch.where(to_random, random_ids, corrupted)  # (batch, seq); the last 10% stay as they are
    return corrupted, labels


def mlm_accuracy(prediction_logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The share of selected positions (label != -100) whose highest logit is the label: a 0-d tensor."""
    require_tensor("prediction_logits", prediction_logits)
    require_integer_tensor("labels", labels)
    if prediction_logits.dim() != labels.dim() + 1 or prediction_logits.shape[:-1] != labels.shape:
        raise ValueError(
            f"`prediction_logits` must be (batch, seq, vocab) for `labels` {tuple(labels.shape)}, "
            f"got {describe(prediction_logits)}."
        )
    return _mlm_accuracy(prediction_logits, labels)


def _mlm_accuracy(prediction_logits, labels):
    selected = labels != IGNORE_INDEX  # (batch, seq)
    correct = prediction_logits.argmax(dim=-1) == labels  # (batch, seq)
    return correct[selected].float().mean()  # (): NaN when nothing is selected


# --- NSP -----------------------------------------------------------------------------------------


def pair_positions(documents) -> list[tuple[int, int]]:
    """(document, sentence) of every sentence that has a next sentence: the possible sentence A's."""
    documents = _require_documents(documents)
    return [(d, s) for d, document in enumerate(documents) for s in range(len(document) - 1)]


def sample_nsp_pairs(
    documents, positions, *, generator: torch.Generator, next_probability: float = 0.5
) -> list[tuple[torch.Tensor, torch.Tensor, int]]:
    """(A, B, label) for each (document, sentence) position: B is A's next sentence with
    ``next_probability`` (label 0), else a random sentence of another document (label 1)."""
    documents = _require_documents(documents)
    _require_generator(generator)
    _require_probability("next_probability", next_probability)
    positions = _require_positions(positions, documents)
    n = len(positions)
    is_next = torch.rand(n, generator=generator) < next_probability  # (n,)
    other = torch.randint(len(documents) - 1, (n,), generator=generator)  # (n,): another document ...
    where = torch.rand(n, generator=generator)  # (n,): ... and a place in it
    pairs = []
    for (d, s), follows, o, u in zip(positions, is_next.tolist(), other.tolist(), where.tolist(), strict=True):
        if follows:
            pairs.append((documents[d][s], documents[d][s + 1], 0))
        else:
            o += o >= d  # skip A's own document
            pairs.append((documents[d][s], documents[o][int(u * len(documents[o]))], 1))
    return pairs


def truncate_pair(a: torch.Tensor, b: torch.Tensor, max_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Longest first: cut the ends of ``a`` and ``b`` until ``[CLS] a [SEP] b [SEP]`` fits in ``max_length``."""
    for name, ids in (("a", a), ("b", b)):
        require_integer_tensor(name, ids)
        if ids.dim() != 1:
            raise ValueError(f"`{name}` must be one sentence's ids (1-D), got {describe(ids)}.")
    _require_max_length(max_length)
    return _truncate_pair(a, b, max_length)


def _truncate_pair(a, b, max_length):
    budget = max_length - 3  # [CLS] a [SEP] b [SEP]
    len_a, len_b = len(a), len(b)
    while len_a + len_b > budget:
        if len_a > len_b:
            len_a -= 1  # the longer one loses its last token ...
        else:
            len_b -= 1  # ... B on a tie
    return a[:len_a], b[:len_b]


def collate_pairs(
    pairs,
    specials: SpecialIds,
    *,
    generator: torch.Generator,
    max_length: int = MAX_LENGTH,
    mlm_probability: float = 0.15,
):
    """(A, B, label) pairs -> the batch ``BertForPreTraining`` takes, MLM-masked.

    Returns a dict of (batch, seq) long tensors ``input_ids``, ``attention_mask``, ``token_type_ids``,
    ``labels`` and the (batch,) ``next_sentence_label``; seq is the longest pair, at most ``max_length``.
    """
    _require_specials(specials)
    _require_generator(generator)
    _require_max_length(max_length)
    _require_probability("mlm_probability", mlm_probability)
    if not isinstance(pairs, (list, tuple)) or not pairs:
        raise ValueError(f"`pairs` must be a non-empty list of (A, B, label), got {describe(pairs)}.")
    cls, sep = torch.tensor([specials.cls]), torch.tensor([specials.sep])
    rows = []
    for a, b, _ in pairs:
        a, b = _truncate_pair(a, b, max_length)
        rows.append((torch.cat([cls, a, sep, b, sep]), len(a) + 2))  # ids, length of [CLS] A [SEP]
    seq = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), seq), specials.pad)  # (batch, seq)
    token_type_ids = torch.zeros(len(rows), seq, dtype=torch.long)  # (batch, seq)
    attention_mask = torch.zeros(len(rows), seq, dtype=torch.long)  # (batch, seq)
    for i, (ids, first) in enumerate(rows):
        input_ids[i, : len(ids)] = ids
        token_type_ids[i, first : len(ids)] = 1  # B [SEP]
        attention_mask[i, : len(ids)] = 1
    masked, labels = mask_tokens(input_ids, specials, generator=generator, probability=mlm_probability)
    return {
        "input_ids": masked,
        "attention_mask": attention_mask,
        "token_type_ids": token_type_ids,
        "labels": labels,
        "next_sentence_label": torch.tensor([label for _, _, label in pairs]),
    }


class PretrainingCollator:
    """``collator(positions, generator) -> batch``: NSP pairs for the given sentence positions, collated and masked.

    ``collator.positions`` lists every possible sentence A (``pair_positions``): the examples of one
    epoch. ``training.SeededBatches(collator.positions, batch_size, collator, seed)`` orders them.
    """

    def __init__(
        self,
        documents,
        specials: SpecialIds,
        *,
        max_length: int = MAX_LENGTH,
        mlm_probability: float = 0.15,
        next_probability: float = 0.5,
    ):
        self.documents = _require_documents(documents)
        _require_specials(specials)
        _require_max_length(max_length)
        _require_probability("mlm_probability", mlm_probability)
        _require_probability("next_probability", next_probability)
        self.specials = specials
        self.max_length = max_length
        self.mlm_probability = mlm_probability
        self.next_probability = next_probability
        self.positions = pair_positions(self.documents)

    def __call__(self, positions, generator: torch.Generator) -> dict[str, torch.Tensor]:
        pairs = sample_nsp_pairs(self.documents, positions, generator=generator, next_probability=self.next_probability)
        return collate_pairs(
            pairs, self.specials, generator=generator, max_length=self.max_length, mlm_probability=self.mlm_probability
        )


# --- judging pretraining -------------------------------------------------------------------------


def pretraining_metrics(batch: dict, output) -> dict[str, tuple[torch.Tensor, int]]:
    """What ``training.evaluate`` averages for pretraining: {name: (value, weight)}.

    MLM figures are weighted by the number of selected tokens, NSP figures by the number of pairs,
    so the averages are over every held-out masked token and every held-out pair.
    """
    selected = int((batch["labels"] != IGNORE_INDEX).sum())
    pairs = len(batch["next_sentence_label"])
    nsp_correct = output.seq_relationship_logits.argmax(dim=-1) == batch["next_sentence_label"]  # (batch,)
    return {
        "mlm_loss": (output.mlm_loss, selected),
        "mlm_accuracy": (mlm_accuracy(output.prediction_logits, batch["labels"]), selected),
        "nsp_loss": (output.nsp_loss, pairs),
        "nsp_accuracy": (nsp_correct.float().mean(), pairs),
    }


def mlm_baselines(train_ids: torch.Tensor, labels: torch.Tensor, vocab_size: int) -> dict[str, float]:
    """What a model that ignores the context reaches on the masked tokens ``labels`` (-100 skipped).

    From the token counts of ``train_ids`` (the pretraining tokens, specials excluded by the caller):
    ``most_frequent_accuracy`` always answers the most frequent token; ``unigram_accuracy`` answers a
    token drawn from the unigram distribution (sum over tokens of p_train * p_held_out);
    ``unigram_loss`` is the cross-entropy of that distribution: the MLM loss of a model that learnt
    the token frequencies and nothing else (add-one smoothed, so no token has probability 0).
    """
    require_integer_tensor("train_ids", train_ids)
    require_integer_tensor("labels", labels)
    require_positive_int("vocab_size", vocab_size)
    targets = labels[labels != IGNORE_INDEX]  # (n,)
    if not len(targets) or not train_ids.numel():
        raise ValueError("`train_ids` and the selected `labels` must not be empty.")
    counts = torch.bincount(train_ids.flatten(), minlength=vocab_size).double() + 1.0  # (vocab,)
    p = counts / counts.sum()  # (vocab,)
    return {
        "most_frequent_accuracy": float((targets == p.argmax()).double().mean()),
        "unigram_accuracy": float(p[targets].mean()),
        "unigram_loss": float(-p[targets].log().mean()),
    }


# --- looking at a model --------------------------------------------------------------------------


def fill_mask(model, tokenizer: WordPieceTokenizer, text: str, top_k: int = 5) -> list[list[tuple[str, float]]]:
    """For each [MASK] of ``text``, the ``top_k`` (token, probability) the MLM head predicts, best first.

    The model runs in eval mode (dropout off) without gradients, then goes back to its mode.
    """
    if not hasattr(model, "mlm"):
        raise TypeError(f"`model` must be a BertForPreTraining (it has the MLM head), got {describe(model)}.")
    specials = SpecialIds.from_tokenizer(tokenizer)
    require_positive_int("top_k", top_k)
    input_ids = _sentence_ids(tokenizer, text, model.config.max_position_embeddings)  # (1, seq)
    where = (input_ids[0] == specials.mask).nonzero().flatten()  # (masks,)
    if not len(where):
        hint = " Write it in capitals: [MASK]." if "[mask]" in text.lower() else ""
        raise ValueError(f"`text` has no [MASK]: put [MASK] where the model should guess a word.{hint}")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            device = next(model.parameters()).device
            logits = model(input_ids.to(device)).prediction_logits[0, where.to(device)]  # (masks, vocab)
    finally:
        model.train(was_training)
    top = logits.float().softmax(dim=-1).topk(min(top_k, logits.shape[-1]), dim=-1)  # (masks, top_k) each
    return [
        list(zip(tokenizer.convert_ids_to_tokens(ids.tolist()), probabilities.tolist(), strict=True))
        for ids, probabilities in zip(top.indices.cpu(), top.values.cpu(), strict=True)
    ]


@dataclasses.dataclass(frozen=True)
class MaskingView:
    """One sentence under the 80/10/10 rule: per token, what it was, what the model sees, its label
    (None where nothing is predicted) and its kind: "not selected", "[MASK]", "random", "kept"."""

    tokens: list[str]
    seen: list[str]
    labels: list[str | None]
    kinds: list[str]


def masking_view(tokenizer: WordPieceTokenizer, text: str, *, seed: int = 0, probability: float = 0.15) -> MaskingView:
    """What the model sees of ``text`` when it is masked with ``mask_tokens`` and generator seed ``seed``."""
    specials = SpecialIds.from_tokenizer(tokenizer)
    input_ids = _sentence_ids(tokenizer, text, 512)  # (1, seq)
    seen, labels = mask_tokens(
        input_ids, specials, generator=torch.Generator().manual_seed(seed), probability=probability
    )
    tokens = tokenizer.convert_ids_to_tokens(input_ids[0].tolist())
    kinds = []
    for original, shown, label in zip(input_ids[0].tolist(), seen[0].tolist(), labels[0].tolist(), strict=True):
        if label == IGNORE_INDEX:
            kinds.append("not selected")
        elif shown == specials.mask:
            kinds.append("[MASK]")
        elif shown != original:
            kinds.append("random")
        else:
            kinds.append("kept")
    return MaskingView(
        tokens=tokens,
        seen=tokenizer.convert_ids_to_tokens(seen[0].tolist()),
        labels=[None if kind == "not selected" else token for kind, token in zip(kinds, tokens, strict=True)],
        kinds=kinds,
    )


def _sentence_ids(tokenizer: WordPieceTokenizer, text, max_length: int) -> torch.Tensor:
    """(1, seq) ids of ``[CLS] text [SEP]``; a clear error for an empty text or one the model cannot read."""
    if not isinstance(text, str):
        raise TypeError(f"`text` must be a string, got {describe(text)}.")
    if not text.strip():
        raise ValueError("`text` is empty: type a sentence.")
    input_ids = tokenizer([text])["input_ids"]  # (1, seq), at most 512
    if input_ids.shape[1] > max_length:
        raise ValueError(
            f"`text` is {input_ids.shape[1]} tokens long with [CLS] and [SEP]; this model reads at most {max_length}."
        )
    return input_ids


# --- the whole recipe ----------------------------------------------------------------------------


def tiny_config(vocab_size: int, max_length: int = MAX_LENGTH) -> BertConfig:
    """The notebook's tiny BERT: 2 layers, 128 wide, 2 heads of 64, FFN 512, positions = ``max_length``."""
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=512,
        max_position_embeddings=max_length,
    )


@dataclasses.dataclass
class PretrainingRun:
    """What ``pretrain`` returns: the trained model (eval mode), its tokenizer, the loss history,
    the held-out figures and the context-free baselines."""

    model: torch.nn.Module
    tokenizer: WordPieceTokenizer
    history: object  # training.History
    held_out: dict[str, float]
    baselines: dict[str, float]


def pretrain(
    folder,
    *,
    steps: int = 600,
    batch_size: int = 32,
    max_length: int = MAX_LENGTH,
    vocab_size: int = VOCAB_SIZE,
    lr: float = 2e-3,
    warmup_steps: int | None = None,
    eval_every: int | None = None,
    seed: int = 0,
    progress: bool = True,
    device="cpu",
) -> PretrainingRun:
    """Notebook 09's recipe in one call: vocabulary, data, tiny BERT, training, held-out figures.

    The vocabulary (``folder/vocab.txt``) and the weights (``folder/model``) are written into ``folder``.
    Reads only ``corpus.pretraining_texts()``: never a test review. ``steps=600`` is the notebook's
    run (about a minute on two cores); ``steps=6000`` ten times that. During training the
    model is evaluated on the first 256 held-out pairs every ``eval_every`` steps (default: a quarter
    of the run); ``held_out`` is the final evaluation on all of them. ``device``: where it trains.
    """
    from . import corpus
    from .heads import BertForPreTraining
    from .training import SeededBatches, evaluate, train

    require_positive_int("steps", steps)
    folder = Path(folder)
    texts = corpus.pretraining_texts()
    tokenizer = train_wordpiece(texts.train, folder, vocab_size=vocab_size)
    specials = SpecialIds.from_tokenizer(tokenizer)
    train_data = PretrainingCollator(tokenize_documents(tokenizer, texts.train), specials, max_length=max_length)
    held_out = held_out_batches(tokenize_documents(tokenizer, texts.held_out), specials, max_length=max_length)
    torch.manual_seed(seed)
    model = BertForPreTraining(tiny_config(specials.vocab_size, max_length)).to(device)
    history = train(
        model,
        SeededBatches(train_data.positions, batch_size, train_data, seed=seed),
        steps=steps,
        lr=lr,
        warmup_steps=steps // 10 if warmup_steps is None else warmup_steps,
        eval_batches=held_out[:4],
        eval_every=eval_every or max(steps // 4, 1),
        metrics=pretraining_metrics,
        progress=progress,
    )
    model.save_pretrained(folder / "model")
    tokenizer.save_pretrained(folder / "model")
    train_ids = torch.cat([ids for document in train_data.documents for ids in document])
    labels = torch.cat([batch["labels"].flatten() for batch in held_out])
    return PretrainingRun(
        model=model.eval(),
        tokenizer=tokenizer,
        history=history,
        held_out=evaluate(model, held_out, metrics=pretraining_metrics),
        baselines=mlm_baselines(train_ids, labels, specials.vocab_size),
    )


def held_out_batches(
    documents, specials: SpecialIds, *, max_length: int = MAX_LENGTH, batch_size: int = 64, seed: int = 1234
):
    """Fixed evaluation batches: every sentence position of ``documents`` once, masked once, seeded.

    The same batches at every evaluation, so that two evaluations differ only by the model.
    """
    collate = PretrainingCollator(documents, specials, max_length=max_length)
    generator = torch.Generator().manual_seed(seed)
    positions = collate.positions
    return [collate(positions[i : i + batch_size], generator) for i in range(0, len(positions), batch_size)]


# --- checks --------------------------------------------------------------------------------------


def _require_texts(name: str, texts) -> list[str]:
    if isinstance(texts, str) or not isinstance(texts, Sequence) or not all(isinstance(t, str) for t in texts):
        raise TypeError(f"`{name}` must be a list of strings (one document each), got {describe(texts)}.")
    if not any(t.strip() for t in texts):
        raise ValueError(f"`{name}` is an empty corpus: it has no text to learn from.")
    return list(texts)


def _require_documents(documents) -> list[list[torch.Tensor]]:
    """A list of documents, each a list of 1-D id tensors (``tokenize_documents``), with at least two
    documents and one sentence that has a next sentence."""
    if not isinstance(documents, (list, tuple)) or not all(isinstance(d, (list, tuple)) for d in documents):
        raise TypeError(
            f"`documents` must be a list of documents, each a list of sentences (1-D id tensors) as "
            f"`tokenize_documents` returns, got {describe(documents)}."
        )
    for document in documents:
        for sentence in document:
            if not isinstance(sentence, torch.Tensor) or sentence.dim() != 1 or sentence.dtype != torch.long:
                raise TypeError(f"every sentence must be a 1-D torch.long tensor of ids, got {describe(sentence)}.")
    if not any(len(document) >= 2 for document in documents):
        raise ValueError(
            "`documents` is an empty corpus for NSP: no document has two sentences, so there is no real next "
            "sentence to learn from."
        )
    if len(documents) < 2:
        raise ValueError("`documents` must hold at least two documents: a NotNext sentence B comes from another one.")
    return list(documents)


def _require_positions(positions, documents) -> list[tuple[int, int]]:
    try:
        positions = [(int(d), int(s)) for d, s in positions]
    except (TypeError, ValueError):
        raise TypeError(
            f"`positions` must be a list of (document, sentence) pairs, got {describe(positions)}."
        ) from None
    for d, s in positions:
        if not (0 <= d < len(documents) and 0 <= s < len(documents[d]) - 1):
            raise ValueError(
                f"position ({d}, {s}) is not a sentence with a next sentence in `documents`: take positions from "
                "`pair_positions(documents)`."
            )
    return positions


def _require_probability(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0 or math.isnan(value):
        raise ValueError(f"`{name}` must be a probability in [0, 1], got {value!r}.")


def _require_max_length(max_length) -> None:
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < MIN_LENGTH:
        raise ValueError(
            f"`max_length` must be an int of at least {MIN_LENGTH} ([CLS] A [SEP] B [SEP] needs room for both "
            f"sentences), got {max_length!r}."
        )


def _require_generator(generator) -> None:
    if not isinstance(generator, torch.Generator):
        raise TypeError(
            "`generator` must be a torch.Generator (e.g. `torch.Generator().manual_seed(0)`), "
            f"got {describe(generator)}."
        )


def _require_specials(specials) -> None:
    if not isinstance(specials, SpecialIds):
        raise TypeError(
            f"`specials` must be a SpecialIds (`SpecialIds.from_tokenizer(tokenizer)`), got {describe(specials)}."
        )


if __name__ == "__main__":
    import argparse
    import tempfile
    import time

    parser = argparse.ArgumentParser(prog="python -m bertcourse.pretraining", description="Pretrain the tiny BERT.")
    parser.add_argument("--steps", type=int, default=600, help="training steps (600: the notebook's; 6000: ~10 min)")
    parser.add_argument("--folder", default=None, help="where to write vocab.txt and model/ (default: a temp folder)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as temporary:
        run = pretrain(args.folder or temporary, steps=args.steps, seed=args.seed)
    print(f"{args.steps} steps in {time.perf_counter() - start:.0f} s, {torch.get_num_threads()} threads")
    print("held out:", {name: round(value, 3) for name, value in run.held_out.items()})
    print("baselines:", {name: round(value, 3) for name, value in run.baselines.items()})
