"""What each rank trains on, and why the runs can be compared weight for weight.

DistributedDataParallel averages the gradients of the ranks. That equals the gradient of one
process on the whole global batch only if the loss is a mean with the same weight on every rank:
BERT's MLM loss is a mean over the *masked* tokens, so ``make_dataset`` masks exactly
``masked_per_row`` tokens in every row (with 09's 15% random masking, rank 0 might hold 9 masked
tokens and rank 1 hold 14, and the average of their two means is not the mean over all 23). The
tiny config has no dropout, so two runs differ only by their arithmetic.

``rank_batch`` draws the rows through ``torch.utils.data.DistributedSampler``: epoch ``e`` is the
permutation seeded by ``seed + e`` (``set_epoch``), and rank ``r`` of ``w`` reads positions
``r, r + w, r + 2w, ...`` of it. Batch ``k`` of rank ``r`` is therefore part of the window
``[k * global_batch, (k + 1) * global_batch)`` of that permutation, and the ranks together cover
the window exactly: the global batch of one process with ``world_size = 1``.
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch.utils.data import DistributedSampler

from .._validation import require_positive_int
from ..config import BertConfig
from ..heads import IGNORE_INDEX
from ..training import seeded_generator


def demo_config(vocab_size: int = 64, max_length: int = 16) -> BertConfig:
    """The toy BERT of notebook 12's runs: 2 layers, 64 wide, 2 heads, FFN 128, no dropout, so that a multi-process
    run takes seconds (not pretraining's tiny BERT, ``pretraining.tiny_config``, 128 wide)."""
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=max_length,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )


def make_dataset(
    rows: int = 256, length: int = 16, vocab_size: int = 64, masked_per_row: int = 2, seed: int = 0
) -> dict[str, torch.Tensor]:
    """A synthetic pretraining set: each row counts up from a random start (so the masked tokens can
    be learned from their neighbours), ``masked_per_row`` tokens replaced by [MASK] (id 4) with their
    labels, a random NSP label. Returns tensors of ``rows`` rows each."""
    for name, value in (("rows", rows), ("length", length), ("vocab_size", vocab_size)):
        require_positive_int(name, value)
    require_positive_int("masked_per_row", masked_per_row)
    if masked_per_row > length - 2:
        raise ValueError(f"`masked_per_row`={masked_per_row} must leave [CLS] and [SEP]: at most {length - 2}.")
    g = seeded_generator(seed, "dataset")
    start = torch.randint(5, vocab_size, (rows, 1), generator=g)  # (rows, 1)
    tokens = 5 + (start - 5 + torch.arange(length)) % (vocab_size - 5)  # (rows, length) ordinary ids 5..
    tokens[:, 0], tokens[:, -1] = 2, 3  # [CLS] ... [SEP]
    scores = torch.rand(rows, length - 2, generator=g)  # (rows, length - 2)
    masked = 1 + scores.argsort(dim=1)[:, :masked_per_row]  # (rows, masked_per_row) positions, never 0 or last
    labels = torch.full_like(tokens, IGNORE_INDEX).scatter(1, masked, tokens.gather(1, masked))  # (rows, length)
    input_ids = tokens.scatter(1, masked, 4)  # (rows, length)
    return {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "token_type_ids": torch.zeros_like(input_ids),
        "labels": labels,
        "next_sentence_label": torch.randint(0, 2, (rows,), generator=g),
    }


def rank_batch(
    dataset: dict,
    step: int,
    global_batch: int,
    rank: int = 0,
    world_size: int = 1,
    *,
    seed: int = 0,
    set_epoch: bool = True,
    sampler: bool = True,
) -> dict[str, torch.Tensor]:
    """The rows rank ``rank`` of ``world_size`` trains on at ``step``: ``global_batch // world_size`` rows.

    ``set_epoch=False`` and ``sampler=False`` are the two pitfalls, kept to show them: every epoch
    in the same order, and every rank on the same rows (the first ``global_batch // world_size`` of
    the permutation, as a plain shuffled DataLoader gives each process).
    """
    rows = len(dataset["input_ids"])
    require_positive_int("global_batch", global_batch)
    require_positive_int("world_size", world_size)
    if global_batch % world_size:
        raise ValueError(
            f"`global_batch`={global_batch} is not divisible by the world size {world_size}: "
            f"each rank must get the same number of rows (try {math.ceil(global_batch / world_size) * world_size})."
        )
    if global_batch > rows or rows % world_size:
        raise ValueError(f"the {rows} rows must hold one `global_batch`={global_batch} and divide by {world_size}.")
    local = global_batch // world_size
    epoch, index = divmod(step, rows // global_batch)
    replicas, me = (world_size, rank) if sampler else (1, 0)
    order = DistributedSampler(range(rows), num_replicas=replicas, rank=me, shuffle=True, seed=seed, drop_last=True)
    order.set_epoch(epoch if set_epoch else 0)
    chosen = torch.tensor(list(order))[index * local : (index + 1) * local]  # (local,)
    return {name: value[chosen] for name, value in dataset.items()}


def accumulation_step(model, batch: dict, optimizer, scheduler=None, *, micro_batches: int = 2, clip_norm=1.0):
    """One optimizer step on ``batch`` in ``micro_batches`` pieces: each loss divided by their
    number, gradients summed by ``backward``, one step. The same gradient as the whole batch at
    once (losses with equal weights per row), in a fraction of the activation memory.

    Under DDP every ``backward`` all-reduces the gradients; all but the last piece run inside
    ``model.no_sync()``, so the ranks exchange the summed gradient once per step, not once per piece
    (the result is the same, the communication is not)."""
    require_positive_int("micro_batches", micro_batches)
    rows = len(batch["input_ids"])
    if rows % micro_batches:
        raise ValueError(f"the batch of {rows} rows does not split into `micro_batches`={micro_batches}.")
    optimizer.zero_grad(set_to_none=True)
    size = rows // micro_batches
    total = 0.0
    for start in range(0, rows, size):
        part = {name: value[start : start + size] for name, value in batch.items()}  # (size, ...)
        last = start + size == rows
        with contextlib.nullcontext() if last or not hasattr(model, "no_sync") else model.no_sync():
            loss = model(**part).loss / micro_batches  # () one share of the batch's mean
            loss.backward()  # adds to .grad (and, for the last piece under DDP, all-reduces the sum)
        total += float(loss.detach())
    parameters = [p for group in optimizer.param_groups for p in group["params"]]
    grad_norm = torch.nn.utils.clip_grad_norm_(parameters, clip_norm if clip_norm else math.inf)
    lr = optimizer.param_groups[0]["lr"]
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return {"loss": total, "lr": lr, "grad_norm": float(grad_norm)}
