"""Notebook 09's recipe in one call, and the longer run of the same recipe that ships with the package.

The recipe, and why. The length is measured by a committed control (``--control``, notebook 09 plots
it); the other choices come from exploratory runs while the recipe was written (one seed each, 600 to
1,200 steps, the figures not shipped):

- **Short pairs first, then long ones.** BERT trained 90% of its steps on sequences of 128 tokens and
  the last 10% on 512. We do the same at our scale: ``SHORT_LENGTH`` (16) tokens for ``SHORT_SHARE`` of
  the steps, then ``MAX_LENGTH`` (48): in 16 tokens a [MASK]'s neighbours are a larger part of what it
  can attend to. In the committed control, 600 steps at 48 tokens stayed within about
  0.1 nats of the unigram line; short pairs first was 0.30 below it on 16-token pairs.
- The same number of tokens per step in both phases: ``SHORT_BATCH`` pairs of 16, ``BATCH`` of 48.
- AdamW at a peak of ``LR`` = 1e-3, 10% warm-up, linear decay. In the exploratory runs at 48 tokens,
  5e-3 did not even learn to copy the visible token in 400 steps, and 2e-3, 1e-3, 5e-4, no dropout, no
  NSP loss and a 40% masking rate all stayed near the unigram line.
- At 4,000 steps the shipped run's control (``long_control.json``: the same recipe and seed with every
  pair at 48 tokens) leaves the unigram line too, but less far: on held-out pairs of 48 tokens its
  [MASK] loss is 0.24 nats below the unigram model's, the shipped run's 0.64 (one seed each).
- Masks drawn afresh for every batch (RoBERTa's *dynamic masking*): ``training.SeededBatches`` seeds
  each batch's generator by its step.

``pretrain(folder, steps=600)`` runs it (notebook 09, live); ``python -m bertcourse.pretraining --steps 4000
--eval-every 100 --save bertcourse/pretraining/tiny_bert`` runs the longer version and writes the model, its
vocabulary and ``run.json`` (the recipe, the time it took, the held-out figures), which ``load_shipped_run``
reads back. ``held_out_figures`` is how both are judged: every held-out pair, the
[MASK] positions apart from the rest, against the context-free baselines of ``metrics``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import time
from pathlib import Path

import torch

from .._validation import describe, is_int, require_positive_int
from ..config import BertConfig
from ..tokenizer import WordPieceTokenizer
from .checks import require_share
from .metrics import (
    PositionBaseline,
    PretrainingMetrics,
    context_figures,
    continuation_ids,
    mlm_baselines,
    position_baseline,
    top_predictions,
)
from .pairs import MAX_LENGTH, PretrainingCollator, require_max_length
from .vocabulary import VOCAB_SIZE, SpecialIds, tokenize_documents, train_wordpiece

SHORT_LENGTH = 16  # phase 1: [CLS] A [SEP] B [SEP] in 16 tokens (BERT: 128)
SHORT_SHARE = 0.9  # of the steps in phase 1 (BERT: 90%)
SHORT_BATCH, BATCH = 96, 32  # pairs per step in each phase: about the same number of tokens
LR = 1e-3
STEPS = 600  # notebook 09's live run
SHIPPED_STEPS = 4000  # the run that ships with the package
EVAL_PAIRS = 512  # held-out pairs of the evaluations during training
SHIPPED_RUN = Path(__file__).with_name("tiny_bert")
RUN_FILE = "run.json"
LENGTH_CONTROL = Path(__file__).with_name("length_control.json")  # ``python -m bertcourse.pretraining --control``
LONG_CONTROL = Path(__file__).with_name("long_control.json")  # the shipped run's control: 48 tokens throughout


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


class LengthPhases:
    """``batches.batch(step)``: short pairs before ``switch_step``, long ones from it on (BERT's schedule).

    Both are ``training.SeededBatches``, so every batch stays a pure function of its step, and a
    resumed run is the run that never stopped.
    """

    def __init__(self, short, long, switch_step: int):
        for name, batches in (("short", short), ("long", long)):
            if not hasattr(batches, "batch"):
                raise TypeError(f"`{name}` must have a `batch(step)` method, got {describe(batches)}.")
        if not is_int(switch_step) or switch_step < 0:
            raise ValueError(f"`switch_step` must be an int >= 0, got {switch_step!r}.")
        self.short, self.long, self.switch_step = short, long, switch_step

    def batch(self, step: int) -> dict:
        return (self.short if step < self.switch_step else self.long).batch(step)


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


@dataclasses.dataclass
class PretrainingData:
    """The tokenized corpus of one vocabulary: what training reads and what judges it."""

    tokenizer: WordPieceTokenizer
    specials: SpecialIds
    documents: list
    held_out_documents: list
    train_ids: torch.Tensor  # (n,) every training token: the counts of the baselines
    continuations: torch.Tensor  # (k,) the ids of the ## pieces


def pretraining_data(tokenizer: WordPieceTokenizer) -> PretrainingData:
    """Tokenize ``corpus.pretraining_texts()`` with ``tokenizer``: training and held-out documents."""
    from .. import corpus

    texts = corpus.pretraining_texts()
    specials = SpecialIds.from_tokenizer(tokenizer)
    documents = tokenize_documents(tokenizer, texts.train)
    return PretrainingData(
        tokenizer=tokenizer,
        specials=specials,
        documents=documents,
        held_out_documents=tokenize_documents(tokenizer, texts.held_out),
        train_ids=torch.cat([ids for document in documents for ids in document]),
        continuations=continuation_ids(tokenizer),
    )


def position_counts(data: PretrainingData, max_length: int, draws: int = 4) -> PositionBaseline:
    """``position_baseline`` on every training sentence A at ``max_length``, ``draws`` times (other B's, seeded)."""
    pairs = [
        batch
        for draw in range(draws)
        for batch in held_out_batches(data.documents, data.specials, max_length=max_length, batch_size=512, seed=draw)
    ]
    return position_baseline(pairs, data.train_ids, data.specials)


def held_out_figures(model, data: PretrainingData, max_length: int) -> dict[str, dict[str, float]]:
    """Every held-out pair at ``max_length``: {"model": ..., "baselines": ..., "context": ...}.

    ``model``: ``PretrainingMetrics`` averaged over all held-out positions (by kind); ``baselines``:
    ``mlm_baselines`` on the same positions, the position baseline counted on every training pair at
    ``max_length`` (``position_counts``); ``context``: ``context_figures`` of the [MASK] guesses.
    """
    from ..training import evaluate

    batches = held_out_batches(data.held_out_documents, data.specials, max_length=max_length)
    metrics = PretrainingMetrics(data.specials, data.continuations)
    positions = position_counts(data, max_length)
    return {
        "model": evaluate(model, batches, metrics),
        "baselines": mlm_baselines(data.train_ids, batches, data.specials, data.continuations, positions),
        "context": context_figures(*top_predictions(model, batches, data.specials)),
    }


@dataclasses.dataclass
class PretrainingRun:
    """What ``pretrain`` returns: the trained model (eval mode), its tokenizer, the history, the held-out
    figures at the full length (``held_out``) and at the short length (``held_out_short``), the recipe
    and the seconds the training took."""

    model: torch.nn.Module
    tokenizer: WordPieceTokenizer
    history: object  # training.History
    held_out: dict[str, dict[str, float]]
    held_out_short: dict[str, dict[str, float]]
    recipe: dict
    seconds: float


def pretrain(
    folder,
    *,
    steps: int = STEPS,
    short_share: float = SHORT_SHARE,
    short_length: int = SHORT_LENGTH,
    max_length: int = MAX_LENGTH,
    short_batch_size: int = SHORT_BATCH,
    batch_size: int = BATCH,
    vocab_size: int = VOCAB_SIZE,
    lr: float = LR,
    warmup_steps: int | None = None,
    eval_every: int | None = None,
    seed: int = 0,
    progress: bool = True,
    device="cpu",
) -> PretrainingRun:
    """Notebook 09's recipe in one call: vocabulary, data, tiny BERT, two phases of training, held-out figures.

    Every argument is checked before anything is written or trained. The vocabulary
    (``folder/vocab.txt``) and the weights (``folder/model``) are written into ``folder``. Reads only
    ``corpus.pretraining_texts()``: never a test review. During training the model is evaluated on
    ``EVAL_PAIRS`` held-out pairs of ``short_length`` tokens every ``eval_every`` steps (default: a
    tenth of the run); the final figures cover every held-out pair.
    """
    from ..heads import BertForPreTraining
    from ..training import SeededBatches, train

    require_positive_int("steps", steps)
    require_share("short_share", short_share)
    require_max_length(short_length)
    require_max_length(max_length)
    if short_length > max_length:
        raise ValueError(f"`short_length`={short_length} must not exceed `max_length`={max_length}.")
    require_positive_int("short_batch_size", short_batch_size)
    require_positive_int("batch_size", batch_size)
    if not is_int(seed):
        raise TypeError(f"`seed` must be an int, got {describe(seed)}.")
    require_positive_int("vocab_size", vocab_size)
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not 0 < lr < 1:
        raise ValueError(f"`lr` must be a learning rate in (0, 1), got {lr!r}.")
    warmup_steps = steps // 10 if warmup_steps is None else warmup_steps
    if not is_int(warmup_steps) or not 0 <= warmup_steps <= steps:
        raise ValueError(f"`warmup_steps` must be an int from 0 to steps={steps}, got {warmup_steps!r}.")
    if eval_every is not None:
        require_positive_int("eval_every", eval_every)
    device = torch.device(device)

    folder = Path(folder)
    from .. import corpus

    data = pretraining_data(train_wordpiece(corpus.pretraining_texts().train, folder, vocab_size=vocab_size))
    short = PretrainingCollator(data.documents, data.specials, max_length=short_length)
    long = PretrainingCollator(data.documents, data.specials, max_length=max_length)
    switch_step = round(short_share * steps)
    batches = LengthPhases(
        SeededBatches(short.positions, short_batch_size, short, seed=seed),
        SeededBatches(long.positions, batch_size, long, seed=seed),
        switch_step,
    )
    eval_batches = held_out_batches(data.held_out_documents, data.specials, max_length=short_length)
    torch.manual_seed(seed)
    model = BertForPreTraining(tiny_config(data.specials.vocab_size, max_length)).to(device)
    started = time.perf_counter()
    history = train(
        model,
        batches,
        steps=steps,
        lr=lr,
        warmup_steps=warmup_steps,
        eval_batches=eval_batches[: max(1, EVAL_PAIRS // 64)],
        eval_every=eval_every or max(steps // 10, 1),
        metrics=PretrainingMetrics(data.specials, data.continuations),
        progress=progress,
    )
    seconds = time.perf_counter() - started
    model.save_pretrained(folder / "model")
    data.tokenizer.save_pretrained(folder / "model")
    model.eval()
    recipe = {
        "steps": steps,
        "short_steps": switch_step,
        "short_length": short_length,
        "max_length": max_length,
        "short_batch_size": short_batch_size,
        "batch_size": batch_size,
        "vocab_size": vocab_size,
        "lr": lr,
        "warmup_steps": warmup_steps,
        "seed": seed,
    }
    return PretrainingRun(
        model=model,
        tokenizer=data.tokenizer,
        history=history,
        held_out=held_out_figures(model, data, max_length),
        held_out_short=held_out_figures(model, data, short_length),
        recipe=recipe,
        seconds=seconds,
    )


def save_run(run: PretrainingRun, folder) -> Path:
    """Write the model, its vocabulary and ``run.json`` (recipe, seconds, machine, history, figures) into ``folder``."""
    folder = Path(folder)
    run.model.save_pretrained(folder)
    run.tokenizer.save_pretrained(folder)
    record = {
        "recipe": run.recipe,
        "seconds": round(run.seconds, 1),
        "machine": {
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__.split("+")[0],
            "python": platform.python_version(),
        },
        "evals": run.history.evals,
        "held_out": run.held_out,
        "held_out_short": run.held_out_short,
    }
    (folder / RUN_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return folder


def load_shipped_run(folder=SHIPPED_RUN):
    """The longer run that ships with the package: (model in eval mode, tokenizer, the record of ``run.json``)."""
    from ..heads import BertForPreTraining

    folder = Path(folder)
    if not (folder / RUN_FILE).is_file():
        raise FileNotFoundError(
            f"no {RUN_FILE} in {folder.name!r}: the shipped run is made by "
            f"`python -m bertcourse.pretraining --steps {SHIPPED_STEPS} --save {folder.name}`."
        )
    model = BertForPreTraining.from_pretrained(folder).eval()
    tokenizer = WordPieceTokenizer.from_folder(folder)
    return model, tokenizer, json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))


def _load_record(path: Path, how: str) -> dict:
    if not path.is_file():
        raise FileNotFoundError(f"no {path.name}: it is made by {how}.")
    return json.loads(path.read_text(encoding="utf-8"))


def load_length_control(path=LENGTH_CONTROL) -> dict:
    """The committed control: the notebook's recipe trained as it is and with every step at full length."""
    path = Path(path)
    return _load_record(
        path, f"`python -m bertcourse.pretraining --steps {STEPS} --eval-every 50 --control {path.name}`"
    )


def load_long_control(path=LONG_CONTROL) -> dict:
    """The shipped run's control: its recipe, as many steps, every pair at full length (``run.json``'s fields)."""
    return _load_record(
        Path(path),
        f"the run.json of `python -m bertcourse.pretraining --steps {SHIPPED_STEPS} --eval-every 100 "
        "--short-share 0 --save FOLDER`",
    )


def break_out_step(evals: list[dict], baseline_loss: float, margin: float = 0.1, consecutive: int = 2):
    """The first evaluated step from which ``consecutive`` evaluations in a row have a [MASK]-only loss
    ``margin`` nats below ``baseline_loss`` (None if none): one noisy evaluation is not a break-out. Pass the
    strongest context-free baseline on the same positions (the position baseline, ``mlm_baselines``)."""
    require_positive_int("consecutive", consecutive)
    below = [e["mask_loss"] < baseline_loss - margin for e in evals]
    return next(
        (evals[i]["step"] for i in range(len(evals) - consecutive + 1) if all(below[i : i + consecutive])), None
    )
