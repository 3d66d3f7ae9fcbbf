"""A training loop a learner can read in one sitting, and that resumes exactly.

Notebook 09 pretrains with it, notebook 10 fine-tunes with it, notebook 12 wraps the model (DDP,
autocast) and calls the same pieces::

    batches = SeededBatches(examples, batch_size, collate, seed=0)   # batch(step): a pure function of the step
    history = train(model, batches, steps=600, lr=2e-3, warmup_steps=60,
                    eval_batches=held_out, eval_every=150, metrics=PretrainingMetrics(specials),
                    checkpoint_dir="run", checkpoint_every=150, resume=True)

``model`` is any ``nn.Module`` whose ``forward(**batch)`` returns an object with a scalar ``.loss``
(``BertForPreTraining`` with labels, a classifier with labels, a Hugging Face model); every other
scalar attribute whose name ends in ``loss`` (``mlm_loss``, ``nsp_loss``) is recorded too.

What each piece does, and the mistake it avoids:

- ``parameter_groups`` / ``make_optimizer``: AdamW, with weight decay on the weight matrices and
  embeddings but **not** on biases or LayerNorm weights (decaying a LayerNorm gain pulls it to 0,
  shrinking every activation it normalises; BERT excludes them).
- ``linear_warmup_decay``: the learning rate rises linearly from 0 over ``warmup_steps``, then
  falls linearly to 0 at the last step (``lr_multiplier``; Hugging Face's
  ``get_linear_schedule_with_warmup``). Adam's early moment estimates are noisy: warm-up keeps the
  first steps small.
- ``train_step(model, batch, optimizer, scheduler, clip_norm=1.0, autocast_dtype=None, scaler=None)``:
  forward, backward, clip the gradient norm, step the optimizer, step the schedule; returns the
  losses, the learning rate and the gradient norm as floats. ``autocast_dtype`` runs the forward
  pass under ``torch.autocast``; ``scaler`` is a ``torch.amp.GradScaler`` for fp16. A loop of your
  own (notebook 12's DDP) calls this function.
- ``evaluate(model, batches, metrics)``: ``model.eval()`` (dropout off) and ``torch.no_grad()``,
  then the model's previous mode back. ``metrics(batch, output)`` returns {name: (value, weight)};
  the result is each weighted mean over the batches (by default the losses, one weight per batch).
- ``SeededBatches``: the data order. Batch number ``step`` is built from the examples of a
  permutation seeded by (seed, epoch) and collated with a generator seeded by (seed, step): so
  it is the same batch however the run got to that step. ``rank``/``world_size`` give each
  process of a distributed run its rows of the same global batch (``shard_batch``).
- Checkpoints (``save_checkpoint``/``load_checkpoint``): the model with its own
  ``save_pretrained`` (config.json + model.safetensors, readable by ``transformers``), plus
  ``training_state.pt`` (optimizer, schedule, grad scaler and the global random state, which
  drives dropout) and ``trainer_state.json`` (the step and the history). Resuming from step k
  gives the same weights and the same losses as a run that never stopped (tested, exactly, on the
  CPU). ``training_state.pt`` holds tensors and numbers only and is read with
  ``torch.load(weights_only=True)``, which refuses anything else.
- Progress: in a notebook a live loss plot (redrawn in place, one PNG, no widget) whose title says the
  seconds so far and about how many are left, with the held-out [MASK]-only loss when the metrics
  have it; in a terminal one printed line per evaluation; ``progress=False`` for nothing.
- ``fastest_thread_count``: PyTorch starts one thread per core, which on a busy machine makes every
  step wait for the slowest core; it times a step at each count and keeps the fastest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from torch import nn

from ._validation import describe, require_positive_int
from .layernorm import LayerNorm

TRAINING_STATE_FILE = "training_state.pt"
TRAINER_STATE_FILE = "trainer_state.json"


# --- data order ----------------------------------------------------------------------------------


def seeded_generator(*parts) -> torch.Generator:
    """A CPU generator seeded by any tuple of ints and strings: ``seeded_generator(0, "batch", 17)``."""
    digest = hashlib.sha256(repr(parts).encode("utf-8")).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") >> 1)


def shard_batch(batch: dict, rank: int, world_size: int) -> dict:
    """Rows ``rank, rank + world_size, ...`` of every tensor of ``batch``: one process's share."""
    if not (isinstance(world_size, int) and world_size >= 1 and isinstance(rank, int) and 0 <= rank < world_size):
        raise ValueError(f"`rank` must be an int in 0..world_size-1, got rank={rank!r}, world_size={world_size!r}.")
    return {name: value[rank::world_size] for name, value in batch.items()}


class SeededBatches:
    """``batches.batch(step)``: batch number ``step`` of an endless, seeded sequence of epochs.

    ``collate(examples, generator) -> dict`` turns a list of examples into a batch; it must take
    every random choice from ``generator``. Each epoch is a fresh permutation of ``examples``, cut
    into ``len(batches)`` full batches (the last incomplete batch is dropped).
    """

    def __init__(
        self,
        examples: Sequence,
        batch_size: int,
        collate: Callable,
        *,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ):
        if not isinstance(examples, Sequence) or not len(examples):
            raise ValueError(f"`examples` must be a non-empty list, got {describe(examples)}.")
        require_positive_int("batch_size", batch_size)
        if batch_size > len(examples):
            raise ValueError(f"`batch_size`={batch_size} is larger than the {len(examples)} examples.")
        if not callable(collate):
            raise TypeError(f"`collate` must be a function (examples, generator) -> batch, got {describe(collate)}.")
        shard_batch({}, rank, world_size)  # checks rank and world_size
        self.examples, self.batch_size, self.collate = examples, batch_size, collate
        self.seed, self.rank, self.world_size = seed, rank, world_size
        self._epoch, self._order = None, None

    def __len__(self) -> int:
        return len(self.examples) // self.batch_size

    def order(self, epoch: int) -> torch.Tensor:
        """(len(examples),) the permutation of epoch ``epoch``."""
        if self._epoch != epoch:
            self._epoch = epoch
            self._order = torch.randperm(len(self.examples), generator=seeded_generator(self.seed, "order", epoch))
        return self._order

    def batch(self, step: int) -> dict:
        epoch, index = divmod(step, len(self))
        chosen = self.order(epoch)[index * self.batch_size : (index + 1) * self.batch_size]  # (batch_size,)
        batch = self.collate([self.examples[i] for i in chosen.tolist()], seeded_generator(self.seed, "batch", step))
        return shard_batch(batch, self.rank, self.world_size) if self.world_size > 1 else batch


# --- optimizer and schedule ----------------------------------------------------------------------


def decay_split(model: nn.Module) -> tuple[list[str], list[str]]:
    """(names that get weight decay, names that do not): biases and LayerNorm weights get none."""
    no_decay = set()
    for module_name, module in model.named_modules():
        for name, _ in module.named_parameters(prefix=module_name, recurse=False):
            if isinstance(module, (LayerNorm, nn.LayerNorm)) or name.endswith("bias"):
                no_decay.add(name)
    names = [name for name, _ in model.named_parameters()]  # each shared (tied) weight once
    return [n for n in names if n not in no_decay], [n for n in names if n in no_decay]


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """AdamW's two parameter groups: decayed weights, and biases + LayerNorm weights with decay 0."""
    if isinstance(weight_decay, bool) or not isinstance(weight_decay, (int, float)) or weight_decay < 0:
        raise ValueError(f"`weight_decay` must be a number >= 0, got {weight_decay!r}.")
    parameters = dict(model.named_parameters())
    decay, no_decay = decay_split(model)
    return [
        {"params": [parameters[n] for n in decay], "weight_decay": float(weight_decay)},
        {"params": [parameters[n] for n in no_decay], "weight_decay": 0.0},
    ]


def make_optimizer(model: nn.Module, lr: float, weight_decay: float = 0.01) -> torch.optim.AdamW:
    """``torch.optim.AdamW`` over ``parameter_groups(model, weight_decay)``."""
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not lr > 0:
        raise ValueError(f"`lr` must be a positive number, got {lr!r}.")
    return torch.optim.AdamW(parameter_groups(model, weight_decay), lr=lr)


def lr_multiplier(step: int, warmup_steps: int, total_steps: int) -> float:
    """The factor on the peak learning rate at ``step``: 0 -> 1 over the warm-up, then 1 -> 0 at ``total_steps``."""
    if step < warmup_steps:
        return step / warmup_steps
    return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))


def linear_warmup_decay(optimizer: torch.optim.Optimizer, warmup_steps: int, total_steps: int):
    """A ``LambdaLR`` that follows ``lr_multiplier``; call ``scheduler.step()`` after every optimizer step."""
    require_positive_int("total_steps", total_steps)
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or not 0 <= warmup_steps <= total_steps:
        raise ValueError(f"`warmup_steps` must be an int from 0 to total_steps={total_steps}, got {warmup_steps!r}.")
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_multiplier(step, warmup_steps, total_steps))


# --- one step, and an evaluation ----------------------------------------------------------------


def train_step(
    model: nn.Module,
    batch: dict,
    optimizer: torch.optim.Optimizer,
    scheduler=None,
    *,
    clip_norm: float | None = 1.0,
    autocast_dtype: torch.dtype | None = None,
    scaler=None,
) -> dict[str, float]:
    """One optimisation step on ``batch``; returns {"loss": ..., other losses, "lr": ..., "grad_norm": ...}."""
    with _autocast(model, autocast_dtype):
        output = model(**batch)
    loss = _loss_of(output)
    optimizer.zero_grad(set_to_none=True)
    (scaler.scale(loss) if scaler is not None else loss).backward()
    if scaler is not None:
        scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    grad_norm = torch.nn.utils.clip_grad_norm_(parameters, clip_norm if clip_norm else math.inf)
    lr = optimizer.param_groups[0]["lr"]  # the rate this step used
    if scaler is not None:
        scaler.step(optimizer)  # skipped when the gradients hold inf/NaN
        scaler.update()
    else:
        optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return {**_losses(output), "lr": lr, "grad_norm": float(grad_norm)}


def evaluate(model: nn.Module, batches, metrics: Callable | None = None, *, autocast_dtype=None) -> dict[str, float]:
    """Weighted means of ``metrics(batch, output)`` over ``batches``, in eval mode, without gradients."""
    batches = list(batches)
    if not batches:
        raise ValueError("`batches` is empty: there is nothing to evaluate on.")
    metrics = metrics or output_losses
    was_training = model.training
    model.eval()  # dropout off: the model we evaluate is the model we will use
    totals: dict[str, float] = {}
    weights: dict[str, float] = {}
    try:
        with torch.no_grad(), _autocast(model, autocast_dtype):
            for batch in batches:
                batch = on_device(batch, model)
                for name, (value, weight) in metrics(batch, model(**batch)).items():
                    if weight:
                        totals[name] = totals.get(name, 0.0) + float(value) * weight
                        weights[name] = weights.get(name, 0.0) + weight
    finally:
        model.train(was_training)
    return {name: totals[name] / weights[name] for name in totals}


def output_losses(batch: dict, output) -> dict[str, tuple[torch.Tensor, int]]:
    """The default metrics: every scalar ``*loss`` of the output, one weight per batch."""
    return {name: (value, 1) for name, value in _losses_of(output).items()}


# --- history and checkpoints --------------------------------------------------------------------


@dataclasses.dataclass
class History:
    """What a run recorded: ``train[name][i]`` after step i + 1; ``evals`` one dict per evaluation (with its "step")."""

    step: int = 0
    train: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    evals: list[dict[str, float]] = dataclasses.field(default_factory=list)

    def record(self, values: dict[str, float]) -> None:
        self.step += 1
        for name, value in values.items():
            self.train.setdefault(name, []).append(value)


def save_checkpoint(folder, model: nn.Module, optimizer, scheduler=None, history: History | None = None, scaler=None):
    """Write the model (``save_pretrained``), the training state and the history into ``folder``; return it."""
    model = _unwrap(model)
    if not hasattr(model, "save_pretrained"):
        raise TypeError(
            f"the model must have `save_pretrained` (bertcourse.weights.HFWeightsMixin), got {describe(model)}."
        )
    folder = Path(folder)
    model.save_pretrained(folder)
    state = {
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "scaler": scaler.state_dict() if scaler is not None else None,
        "cpu_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
    }
    torch.save(state, folder / TRAINING_STATE_FILE)
    history = history or History()
    values = {"step": history.step, "train": history.train, "evals": history.evals}
    (folder / TRAINER_STATE_FILE).write_text(json.dumps(values) + "\n", encoding="utf-8")  # written last
    return folder


def load_checkpoint(folder, model: nn.Module, optimizer, scheduler=None, scaler=None) -> History:
    """Load what ``save_checkpoint`` wrote into the existing objects (weights in place) and restore the
    global random state; return the history, whose ``step`` is where to go on from."""
    from .weights import read_weights, weights_folder

    folder = weights_folder(folder, "folder")
    for name in (TRAINING_STATE_FILE, TRAINER_STATE_FILE):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"`folder` {folder.name!r} has no {name}: it is not a checkpoint of `train`.")
    model = _unwrap(model)
    model.load_hf_state_dict(read_weights(folder))
    state = torch.load(folder / TRAINING_STATE_FILE, weights_only=True)
    optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None:
        scheduler.load_state_dict(state["scheduler"])
    if scaler is not None and state["scaler"] is not None:
        scaler.load_state_dict(state["scaler"])
    torch.set_rng_state(state["cpu_rng"])
    if state["cuda_rng"]:
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    values = json.loads((folder / TRAINER_STATE_FILE).read_text(encoding="utf-8"))
    return History(step=values["step"], train=values["train"], evals=values["evals"])


# --- the loop ------------------------------------------------------------------------------------


def train(
    model: nn.Module,
    batches: SeededBatches,
    *,
    steps: int,
    lr: float = 1e-3,
    weight_decay: float = 0.01,
    warmup_steps: int = 0,
    clip_norm: float | None = 1.0,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler=None,
    eval_batches=None,
    eval_every: int | None = None,
    metrics: Callable | None = None,
    checkpoint_dir=None,
    checkpoint_every: int | None = None,
    resume: bool = False,
    progress: bool = True,
    autocast_dtype: torch.dtype | None = None,
    scaler=None,
) -> History:
    """Train ``model`` for ``steps`` steps on ``batches.batch(0), batches.batch(1), ...``; return the History.

    The optimizer defaults to ``make_optimizer(model, lr, weight_decay)`` and the schedule to
    ``linear_warmup_decay(optimizer, warmup_steps, steps)``. With ``eval_batches``, the model is
    evaluated before the first step, every ``eval_every`` steps and after the last. With
    ``checkpoint_dir``, a checkpoint is written every ``checkpoint_every`` steps and after the
    last; ``resume=True`` goes on from the checkpoint there, if there is one.
    """
    require_positive_int("steps", steps)
    if not hasattr(batches, "batch"):
        raise TypeError(f"`batches` must have a `batch(step)` method (a SeededBatches), got {describe(batches)}.")
    for name, value in (("eval_every", eval_every), ("checkpoint_every", checkpoint_every)):
        if value is not None:
            require_positive_int(name, value)
    if eval_batches is not None:
        eval_batches = list(eval_batches)
    optimizer = optimizer or make_optimizer(model, lr, weight_decay)
    scheduler = scheduler or linear_warmup_decay(optimizer, warmup_steps, steps)
    history = History()
    if resume and checkpoint_dir is not None and (Path(checkpoint_dir) / TRAINER_STATE_FILE).is_file():
        history = load_checkpoint(checkpoint_dir, model, optimizer, scheduler, scaler)
    show = _progress(progress, steps)

    def evaluate_now():
        history.evals.append(
            {"step": history.step, **evaluate(model, eval_batches, metrics, autocast_dtype=autocast_dtype)}
        )

    if eval_batches is not None and history.step == 0:
        evaluate_now()
    model.train()  # dropout on while training
    for step in range(history.step, steps):
        batch = on_device(batches.batch(step), model)
        history.record(
            train_step(
                model, batch, optimizer, scheduler, clip_norm=clip_norm, autocast_dtype=autocast_dtype, scaler=scaler
            )
        )
        last = history.step == steps
        if eval_batches is not None and (last or (eval_every and history.step % eval_every == 0)):
            evaluate_now()
        if checkpoint_dir is not None and (last or (checkpoint_every and history.step % checkpoint_every == 0)):
            save_checkpoint(checkpoint_dir, model, optimizer, scheduler, history, scaler)
        show(history)
    show(history, final=True)
    return history


# --- threads -------------------------------------------------------------------------------------


def fastest_thread_count(step: Callable[[], object], candidates=None, repeats: int = 2) -> int:
    """Time ``step()`` (one training step) ``repeats`` times at each thread count and set the fastest.

    PyTorch uses one thread per core. On a machine whose cores are busy with other work, those
    threads wait for each other at every operation: measured on a 2-core machine with two other
    jobs running, a tiny BERT's step took 0.6-0.9 s on 1 thread and 3.6-3.9 s on 2. So we measure
    rather than guess. ``candidates`` defaults to 1 and the current count. Returns the count it set.
    """
    candidates = sorted(set(candidates or (1, torch.get_num_threads())))
    for count in candidates:
        require_positive_int("candidates", count)
    require_positive_int("repeats", repeats)
    timings = {}
    for count in candidates:
        torch.set_num_threads(count)
        step()  # a warm-up: the first step at a thread count pays for its setup
        started = time.perf_counter()
        for _ in range(repeats):
            step()
        timings[count] = time.perf_counter() - started
    best = min(timings, key=timings.get)
    torch.set_num_threads(best)
    return best


# --- helpers -------------------------------------------------------------------------------------


def _unwrap(model: nn.Module) -> nn.Module:
    """The model inside a DistributedDataParallel (or DataParallel) wrapper."""
    return model.module if isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)) else model


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def on_device(batch: dict, model: nn.Module) -> dict:
    """The batch's tensors on the model's device (a model on a GPU, a tokenizer's tensors on the CPU); other
    entries as they are."""
    device = _device(model)
    return {name: value.to(device) if isinstance(value, torch.Tensor) else value for name, value in batch.items()}


def _autocast(model: nn.Module, dtype):
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=_device(model).type, dtype=dtype)


def _losses_of(output) -> dict[str, torch.Tensor]:
    """Every scalar tensor attribute (or key) of ``output`` whose name ends in "loss"."""
    if isinstance(output, dict):
        items = output.items()
    elif dataclasses.is_dataclass(output):
        items = ((f.name, getattr(output, f.name)) for f in dataclasses.fields(output))
    else:
        items = vars(output).items() if hasattr(output, "__dict__") else ()
    return {
        name: value
        for name, value in items
        if name.endswith("loss") and isinstance(value, torch.Tensor) and value.dim() == 0
    }


def _loss_of(output) -> torch.Tensor:
    loss = _losses_of(output).get("loss")
    if loss is None:
        raise ValueError(
            f"the model returned {type(output).__name__} without a scalar `.loss`: give it its labels in the batch "
            "(`labels`, and `next_sentence_label` for pretraining)."
        )
    return loss


def _losses(output) -> dict[str, float]:
    return {name: float(value.detach()) for name, value in _losses_of(output).items()}


def _progress(progress: bool, steps: int):
    """A function ``show(history, final=False)``: a live plot in a notebook, printed lines elsewhere, or nothing."""
    if not progress:
        return lambda history, final=False: None
    return _LivePlot(steps) if _in_notebook() else _PrintedProgress(steps)


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


class _PrintedProgress:
    def __init__(self, steps: int):
        self.steps, self.printed = steps, 0

    def __call__(self, history: History, final: bool = False) -> None:
        for evaluation in history.evals[self.printed :]:
            figures = "  ".join(f"{name} {value:.3f}" for name, value in evaluation.items() if name != "step")
            print(f"step {evaluation['step']}/{self.steps}  held out: {figures}")
        self.printed = len(history.evals)
        if final:
            losses = "  ".join(f"{name} {values[-1]:.3f}" for name, values in history.train.items() if "loss" in name)
            print(f"step {history.step}/{self.steps}  last batch: {losses}")


class _LivePlot:
    """The training losses (and held-out ones, as dots) redrawn in place: at most about 10 times per run,
    and at most once every ``min_seconds`` (one drawing takes a few tenths of a second, which a run of
    short steps would otherwise spend mostly on its plot); always at the end."""

    min_seconds = 5.0

    def __init__(self, steps: int):
        from IPython.display import display

        self.steps, self.every = steps, max(steps // 10, 1)
        self.started, self.first_step = None, 0
        self.handle = display(self._image(History()), display_id=True)
        self.drawn_at = time.perf_counter()

    def __call__(self, history: History, final: bool = False) -> None:
        if self.started is None:
            self.started, self.first_step = time.perf_counter(), history.step
        due = history.step % self.every == 0 and time.perf_counter() - self.drawn_at >= self.min_seconds
        if final or due:
            self.handle.update(self._image(history))
            self.drawn_at = time.perf_counter()

    def _timing(self, history: History) -> str:
        """ "12 s so far, about 40 s left": the steps done in this call, and the rest at their pace."""
        if self.started is None or history.step <= self.first_step:
            return ""
        elapsed = time.perf_counter() - self.started
        left = elapsed / (history.step - self.first_step) * (self.steps - history.step)
        return f" · {elapsed:.0f} s so far" + (f", about {left:.0f} s left" if history.step < self.steps else "")

    def _image(self, history: History):
        from IPython.display import Image
        from matplotlib.figure import Figure

        figure = Figure(figsize=(7, 3.2), layout="constrained")  # not pyplot's: the inline backend leaves it alone
        ax = figure.subplots()
        for name, values in history.train.items():
            if name.endswith("loss"):
                (line,) = ax.plot(range(1, len(values) + 1), values, lw=1, label=f"train {name}")
                held = [(e["step"], e[name]) for e in history.evals if name in e]
                if held:
                    ax.plot(*zip(*held, strict=True), "o", color=line.get_color(), label=f"held-out {name}")
        masked = [(e["step"], e["mask_loss"]) for e in history.evals if "mask_loss" in e]
        if masked:  # pretraining: the held-out loss where the model saw [MASK], the figure that needs context
            ax.plot(*zip(*masked, strict=True), "s-", color="black", ms=4, lw=1, label="held-out [MASK]-only loss")
        ax.set_xlim(0, self.steps)
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.set_title(f"training: step {history.step} of {self.steps}{self._timing(history)}")
        if history.train:
            ax.legend(fontsize=8)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=80)
        return Image(data=buffer.getvalue(), format="png")
