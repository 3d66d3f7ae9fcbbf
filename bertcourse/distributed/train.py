"""The torchrun script: tiny BERT pretraining, data parallel, with 09's step and checkpoints.

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m bertcourse.distributed.train --out run

torchrun starts one process per rank and gives each ``RANK``, ``WORLD_SIZE`` and the rendezvous
address in its environment; ``init_process_group`` reads them (gloo on CPUs; with ``--device cuda``,
nccl, one GPU per rank: a visible GPU alone does not move the job to it). Each rank builds the same
model (same seed; DDP also broadcasts rank 0's weights), wraps it in ``DistributedDataParallel``,
and trains on its rows of every global batch (``data.rank_batch``): ``backward`` all-reduces the
gradients, averaged, so every rank takes the same optimizer step and the replicas stay equal. Only
rank 0 prints and writes (the checkpoints, the model with ``save_pretrained``, ``result.json``):
every rank writing the same files at once can leave a torn file. Without torchrun (no ``RANK`` in
the environment) ``train_data_parallel`` is the one-process run the DDP run is compared with.

Across machines the same script runs unchanged: ``torchrun --nnodes=2 --nproc_per_node=8
--rdzv-backend=c10d --rdzv-endpoint=HOST:29400 -m bertcourse.distributed.train --device cuda ...`` on each
machine.

``--fail-rank R --fail-step S`` makes rank R raise at step S (the fault tests); a failing worker
prints ``WORKER FAILED rank=R: <error>`` for ``launch.run_job`` to report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

from ..heads import BertForPreTraining
from ..precision import precision_dtype
from ..training import (
    TRAINER_STATE_FILE,
    History,
    linear_warmup_decay,
    load_checkpoint,
    make_optimizer,
    save_checkpoint,
    train_step,
)
from .data import accumulation_step, demo_config, make_dataset, rank_batch

FAILURE_MARK = "WORKER FAILED rank="


def train_data_parallel(
    out,
    *,
    steps: int = 8,
    global_batch: int = 32,
    lr: float = 1e-3,
    seed: int = 0,
    precision: str = "fp32",
    accumulate: int = 1,
    checkpoint_every: int | None = None,
    resume: bool = False,
    fail_rank: int | None = None,
    fail_step: int | None = None,
    progress: bool = True,
    device: str = "cpu",
) -> dict:
    """Train on this process's share; rank 0 writes ``out/model``, ``out/result.json``; returns the result.

    Rank 0 prints the loss 4 times in the run unless ``progress=False``. ``device="cuda"``: one GPU per rank."""
    if device not in ("cpu", "cuda"):
        raise ValueError(f"`device` must be 'cpu' or 'cuda', got {device!r}.")
    autocast_dtype = None if precision == "fp32" else precision_dtype(precision)
    distributed = dist.is_initialized()
    rank, world_size = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    device = torch.device("cuda", rank % torch.cuda.device_count()) if device == "cuda" else torch.device("cpu")
    dataset = make_dataset(seed=seed)
    rank_batch(dataset, 0, global_batch, rank, world_size)  # checks the sizes before anything starts
    torch.manual_seed(seed)
    model = BertForPreTraining(demo_config()).to(device)
    wrapped = torch.nn.parallel.DistributedDataParallel(model) if distributed else model
    optimizer = make_optimizer(model, lr)
    scheduler = linear_warmup_decay(optimizer, steps // 4, steps)
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None  # bf16 needs none
    out = Path(out)
    checkpoint = out / "checkpoint"
    history = History()
    if resume and (checkpoint / TRAINER_STATE_FILE).is_file():
        history = load_checkpoint(checkpoint, model, optimizer, scheduler, scaler)
    wrapped.train()
    first_step = history.step  # 0, or the checkpoint's step when resuming
    started = None
    for step in range(history.step, steps):
        if step == first_step + 1:
            started = time.perf_counter()  # the first step warms up (allocations, thread pools): not timed
        if rank == fail_rank and step == fail_step:
            raise RuntimeError(f"injected failure at step {step}")
        batch = {
            k: v.to(device) for k, v in rank_batch(dataset, step, global_batch, rank, world_size, seed=seed).items()
        }
        if accumulate > 1:
            values = accumulation_step(wrapped, batch, optimizer, scheduler, micro_batches=accumulate)
        else:
            values = train_step(wrapped, batch, optimizer, scheduler, autocast_dtype=autocast_dtype, scaler=scaler)
        loss = torch.tensor(values["loss"], device=device)  # () this rank's loss
        if distributed:
            dist.all_reduce(loss)  # () the sum over the ranks
        values["loss"] = float(loss) / world_size  # the global batch's loss
        history.record(values)
        if checkpoint_every and history.step % checkpoint_every == 0:
            if rank == 0:
                save_checkpoint(checkpoint, model, optimizer, scheduler, history, scaler)
            if distributed:
                dist.barrier()  # no rank goes on before the checkpoint is complete
        if progress and rank == 0 and history.step % max(steps // 4, 1) == 0:
            print(f"step {history.step}: loss {values['loss']:.3f}", flush=True)
    seconds = time.perf_counter() - started if started is not None else None
    result = {
        "world_size": world_size,
        "steps": steps,
        "first_step": first_step,
        "loss": history.train.get("loss", []),
        "seconds": seconds,
        "rows_per_second": (steps - first_step - 1) * global_batch / seconds if seconds else None,
    }
    if rank == 0:
        model.save_pretrained(out / "model")
        (out / "result.json").write_text(json.dumps(result) + "\n", encoding="utf-8")
    return result


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--global-batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--accumulate", type=int, default=1)
    parser.add_argument("--checkpoint-every", type=int)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--fail-rank", type=int)
    parser.add_argument("--fail-step", type=int)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args(argv)
    distributed = "RANK" in os.environ
    rank = int(os.environ.get("RANK", 0))
    try:
        if distributed:
            dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
        train_data_parallel(
            args.out,
            steps=args.steps,
            global_batch=args.global_batch,
            lr=args.lr,
            seed=args.seed,
            precision=args.precision,
            accumulate=args.accumulate,
            checkpoint_every=args.checkpoint_every,
            resume=args.resume,
            fail_rank=args.fail_rank,
            fail_step=args.fail_step,
            device=args.device,
        )
        if distributed:
            dist.barrier()  # rank 0 has written its files; no rank closes its connections while another still works
    except Exception as error:
        traceback.print_exc()
        print(f"{FAILURE_MARK}{rank}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        sys.exit(1)
    finally:
        if distributed and dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
