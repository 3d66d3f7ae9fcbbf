"""One training step of our BertForPreTraining against Hugging Face's, on the same weights, on the CPU.

A step is what pretraining repeats: forward pass in training mode (dropout on), the MLM loss on
15% of the positions, backward pass, AdamW step. MiniLM sizes (the real weights, fresh heads),
batch 8 x 128, fp32, alternating runs, medians. Both losses are computed by the same function
from the models' logits, so only the models differ.
"""

from __future__ import annotations

import tempfile

import torch
import torch.nn.functional as F

from .._validation import counted
from ..heads import BertForPreTraining
from ..pretrained import default_weights_dir
from .forward import random_batch
from .timing import median_times


def mlm_labels(input_ids: torch.Tensor, fraction: float = 0.15) -> torch.Tensor:
    """The ids themselves at a seeded ``fraction`` of the positions, -100 elsewhere."""
    generator = torch.Generator().manual_seed(1)
    selected = torch.rand(input_ids.shape, generator=generator) < fraction  # (batch, seq)
    return torch.where(selected, input_ids, torch.full_like(input_ids, -100))


def training_step(model, optimizer, inputs: dict, labels: torch.Tensor) -> float:
    optimizer.zero_grad(set_to_none=True)
    logits = model(**inputs).prediction_logits  # (batch, seq, vocab)
    loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    loss.backward()
    optimizer.step()
    return loss.item()


def run(args) -> list[dict]:
    import transformers

    ours = BertForPreTraining.from_pretrained(default_weights_dir()).train()
    with tempfile.TemporaryDirectory() as folder:
        ours.save_pretrained(folder)  # the same weights, heads included, for both
        theirs = transformers.BertForPreTraining.from_pretrained(folder).train()
    inputs = random_batch(ours.config.vocab_size, args.batch, args.seq)
    labels = mlm_labels(inputs["input_ids"])
    optimizers = [torch.optim.AdamW(model.parameters(), lr=1e-5) for model in (ours, theirs)]
    print(
        f"BertForPreTraining training step (forward, MLM loss, backward, AdamW), all-MiniLM-L6-v2 sizes, "
        f"batch {args.batch} x {args.seq}, fp32, CPU, {counted(torch.get_num_threads(), 'thread')}; "
        f"medians of {counted(args.repeats, 'alternating step')}"
    )
    mine, hf = median_times(
        lambda: training_step(ours, optimizers[0], inputs, labels),
        lambda: training_step(theirs, optimizers[1], inputs, labels),
        args.repeats,
        warmup=2,
    )
    ratio = mine / hf
    print(
        f"  {'training step':15s} ours {mine * 1e3:7.1f} ms   Hugging Face (sdpa) {hf * 1e3:7.1f} ms   "
        f"{ratio=:.2f} (ours / theirs in time, lower is better)"
    )
    return [{"setting": "training step", "ours_ms": mine * 1e3, "theirs_ms": hf * 1e3, "ratio": ratio}]
