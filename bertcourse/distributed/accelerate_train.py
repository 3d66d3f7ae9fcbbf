"""The seed article's Accelerate loop, complete and corrected: the same training as ``train``.

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m bertcourse.distributed.accelerate_train --out run

The article's four lines (``prepare``, ``backward``) leave out what a real run needs; here is all of it:

- ``Accelerator(mixed_precision="bf16")`` (``"no"`` for fp32, ``"fp16"`` adds a GradScaler on
  GPUs): the forward pass of the prepared model runs under ``torch.autocast``; the weights stay fp32.
- ``accelerator.prepare(model, optimizer, loader)``: DDP around the model, the device, and a loader
  that gives rank r the batches r, r + w, ...: with ``batch_size = global_batch // w`` the w ranks
  together read one global batch per step, the same rows ``train``'s DistributedSampler gives.
- ``accelerator.backward(loss)`` (it scales the loss when fp16 needs it), then
  ``accelerator.clip_grad_norm_`` (it unscales first), ``optimizer.step()``.
- The learning-rate schedule is **not** passed to ``prepare``: in every process a prepared scheduler
  steps ``num_processes`` times at every step (``AcceleratedScheduler.step`` with ``split_batches=False``),
  which would run 09's warm-up twice as fast on 2 processes.
- ``accelerator.gather_for_metrics(loss)``: every rank's loss, for a loss of the global batch.
- ``accelerator.wait_for_everyone()``, then on the main process only
  ``accelerator.unwrap_model(model).save_pretrained(out)``: the model without its DDP wrapper,
  written once.

``accelerate launch --multi_gpu --num_processes 2 -m bertcourse.distributed.accelerate_train --device cuda``
starts it on GPUs; on CPUs ``accelerate launch --cpu`` starts several processes only through MPI, so
on this machine torchrun starts it: ``Accelerator`` reads the same environment either way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, DistributedSampler

from ..heads import BertForPreTraining
from ..training import linear_warmup_decay, make_optimizer
from .data import demo_config, make_dataset
from .train import FAILURE_MARK

MIXED_PRECISION = {"fp32": "no", "bf16": "bf16", "fp16": "fp16"}


def train_accelerate(
    out,
    *,
    steps: int = 8,
    global_batch: int = 32,
    lr: float = 1e-3,
    seed: int = 0,
    precision: str = "fp32",
    progress: bool = True,
    device: str = "cpu",
):
    """Train with Accelerate; the main process writes ``out/model`` and ``out/result.json`` (and prints
    the loss 4 times in the run unless ``progress=False``); on the CPU unless ``device="cuda"``."""
    if precision not in MIXED_PRECISION:
        raise ValueError(f"`precision` must be one of {sorted(MIXED_PRECISION)}, got {precision!r}.")
    accelerator = Accelerator(mixed_precision=MIXED_PRECISION[precision], cpu=device != "cuda")
    world_size = accelerator.num_processes
    if global_batch % world_size:
        raise ValueError(f"`global_batch`={global_batch} is not divisible by the world size {world_size}.")
    dataset = make_dataset(seed=seed)
    if steps * global_batch > len(dataset["input_ids"]):
        raise ValueError(f"{steps} steps of {global_batch} rows need more than the dataset's one epoch.")
    order = list(DistributedSampler(range(len(dataset["input_ids"])), num_replicas=1, rank=0, seed=seed))  # epoch 0
    rows = [{name: value[i] for name, value in dataset.items()} for i in order]
    loader = DataLoader(rows, batch_size=global_batch // world_size)
    torch.manual_seed(seed)
    model = BertForPreTraining(demo_config())
    optimizer = make_optimizer(model, lr)
    scheduler = linear_warmup_decay(optimizer, steps // 4, steps)  # stepped by hand, once per step
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    model.train()
    losses = []
    for _, batch in zip(range(steps), loader, strict=False):
        loss = model(**batch).loss
        optimizer.zero_grad(set_to_none=True)
        accelerator.backward(loss)
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        losses.append(float(accelerator.gather_for_metrics(loss.detach()[None]).float().mean()))
        if progress and accelerator.is_main_process and len(losses) % max(steps // 4, 1) == 0:
            print(f"step {len(losses)}: loss {losses[-1]:.3f}", flush=True)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        out = Path(out)
        accelerator.unwrap_model(model).save_pretrained(out / "model")
        result = {"world_size": world_size, "precision": precision, "loss": losses}
        (out / "result.json").write_text(json.dumps(result) + "\n", encoding="utf-8")
    accelerator.end_training()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--global-batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args(argv)
    try:
        train_accelerate(
            args.out,
            steps=args.steps,
            global_batch=args.global_batch,
            lr=args.lr,
            seed=args.seed,
            precision=args.precision,
            device=args.device,
        )
    except Exception as error:
        traceback.print_exc()
        rank = int(os.environ.get("RANK", 0))
        print(f"{FAILURE_MARK}{rank}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
