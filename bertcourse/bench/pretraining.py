"""Notebook 09's pretraining step, ours against Hugging Face's: tokens per second on the tiny BERT.

A step is what ``bertcourse.training.train_step`` does: forward pass in training mode with the
MLM and NSP labels (both models compute their own losses), backward pass, gradient clipping,
AdamW over the same parameter groups. Both models start from the same weights (ours written with
``save_pretrained``, read by ``transformers.BertForPreTraining.from_pretrained``) and take the same
batch: NSP pairs of a seeded synthetic corpus, collated and masked by ``PretrainingCollator``.
fp32, CPU, alternating steps, medians; the ratio is ours / theirs in time per step (below 1:
ours is faster).

``--pretraining-compile`` adds ours under ``torch.compile`` against ours eager, with the seconds the
first (compiling) step took: whether compiling pays for a run of N steps is N x (eager - compiled)
against that. Measured twice on the course's 2-core machine (1 thread, other jobs running): 96 pairs of
16 tokens, compiled 0.95-1.05x eager's time per step; 32 pairs of 48, 0.82-1.07x; the compiling step
took 82-107 s, 15-17 s with Inductor's cache warm. At best that saves a few seconds of notebook 09's
600 steps (540 of them short) and about 15 s of the shipped 4,000, for more than it costs to
compile: the recipe runs eager.
"""

from __future__ import annotations

import copy
import tempfile
import time

import torch

from .._validation import counted
from ..heads import BertForPreTraining
from ..pretraining import MAX_LENGTH, VOCAB_SIZE, PretrainingCollator, SpecialIds, tiny_config
from ..training import make_optimizer, train_step
from .timing import median_times


def add_arguments(parser) -> None:
    parser.add_argument("--pretraining-batch", type=int, default=32, help="pairs per batch (pretraining section)")
    parser.add_argument("--pretraining-seq", type=int, default=MAX_LENGTH, help="tokens per pair (pretraining section)")
    parser.add_argument(
        "--pretraining-compile", action="store_true", help="also time ours under torch.compile (minutes to compile)"
    )


def synthetic_batch(batch: int, seq: int) -> dict[str, torch.Tensor]:
    """A batch of ``batch`` NSP pairs padded to ``seq`` tokens, from random sentences of random lengths."""
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(seq // 4, seq, (2 * batch + 2, 4), generator=g)
    documents = [[torch.randint(5, VOCAB_SIZE, (int(n),), generator=g) for n in row] for row in lengths]
    specials = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4, vocab_size=VOCAB_SIZE)
    collate = PretrainingCollator(documents, specials, max_length=seq)
    return collate(collate.positions[:batch], torch.Generator().manual_seed(1))


def run(args) -> list[dict]:
    import transformers

    batch = synthetic_batch(args.pretraining_batch, args.pretraining_seq)
    torch.manual_seed(0)
    ours = BertForPreTraining(tiny_config(VOCAB_SIZE, args.pretraining_seq)).train()
    with tempfile.TemporaryDirectory() as folder:
        ours.save_pretrained(folder)
        theirs = transformers.BertForPreTraining.from_pretrained(folder).train()
    optimizers = [make_optimizer(model, 1e-4) for model in (ours, theirs)]
    tokens = batch["input_ids"].numel()
    print(
        f"BertForPreTraining pretraining step (MLM + NSP losses, backward, clipping, AdamW), tiny BERT "
        f"(2 layers, 128 wide, vocabulary {VOCAB_SIZE}), batch {tuple(batch['input_ids'].shape)}, fp32, CPU, "
        f"{counted(torch.get_num_threads(), 'thread')}; medians of {counted(args.repeats, 'alternating step')}"
    )
    mine, hf = median_times(
        lambda: train_step(ours, batch, optimizers[0]),
        lambda: train_step(theirs, batch, optimizers[1]),
        args.repeats,
        warmup=2,
    )
    ratio = mine / hf
    print(
        f"  {'pretraining step':17s} ours {tokens / mine:8.0f} tokens/s   Hugging Face {tokens / hf:8.0f} tokens/s"
        f"   {ratio=:.2f} (ours / theirs in time, lower is better)"
    )
    rows = [
        {
            "setting": "pretraining step",
            "ours_ms": mine * 1e3,
            "theirs_ms": hf * 1e3,
            "ours_tokens_per_s": tokens / mine,
            "theirs_tokens_per_s": tokens / hf,
            "ratio": ratio,
        }
    ]
    if args.pretraining_compile:
        rows.append(compiled_row(ours, batch, args.repeats))
    return rows


def compiled_row(ours, batch: dict, repeats: int) -> dict:
    """Ours compiled (a copy, its own optimizer) against ours eager: time per step and the compiling step's time."""
    eager, compiled_copy = ours, copy.deepcopy(ours)
    compiled = torch.compile(compiled_copy)
    optimizers = [make_optimizer(model, 1e-4) for model in (eager, compiled_copy)]
    started = time.perf_counter()
    train_step(compiled, batch, optimizers[1])  # the first call compiles
    compile_s = time.perf_counter() - started
    eager_s, compiled_s = median_times(
        lambda: train_step(eager, batch, optimizers[0]),
        lambda: train_step(compiled, batch, optimizers[1]),
        repeats,
        warmup=2,
    )
    ratio = compiled_s / eager_s
    print(
        f"  {'torch.compile':17s} ours compiled {compiled_s * 1e3:6.0f} ms, eager {eager_s * 1e3:6.0f} ms per step"
        f"   {ratio=:.2f} (compiled / eager in time, lower is better);"
        f" the first step (compiling) took {compile_s:.0f} s"
    )
    return {
        "setting": "pretraining step, torch.compile",
        "ours_ms": compiled_s * 1e3,
        "theirs_ms": eager_s * 1e3,
        "ratio": ratio,
        "compile_s": compile_s,
    }
