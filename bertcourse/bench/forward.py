"""Our BertModel against Hugging Face's on the real MiniLM weights: one forward pass, on the CPU.

Batch 8 x 128 tokens, fp32, ``torch.no_grad()``, alternating runs, medians. Two settings:

- fast path: no attention maps (ours: PyTorch's fused SDPA kernel; theirs: its default
  ``sdpa`` attention implementation);
- attention maps: ``output_attentions=True`` (ours: the teaching path; theirs: ``eager``).
"""

from __future__ import annotations

import torch

from .._validation import counted
from ..pretrained import default_weights_dir, load_pretrained
from .timing import median_times


def random_batch(vocab_size: int, batch: int, seq: int) -> dict[str, torch.Tensor]:
    """A seeded batch of real-vocabulary ids with no padding (ids >= 1000 skip the special tokens)."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(1000, vocab_size, (batch, seq), generator=generator)  # (batch, seq)
    return {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "token_type_ids": torch.zeros_like(input_ids),
    }


def run(args) -> list[dict]:
    import transformers

    ours, _ = load_pretrained()
    folder = str(default_weights_dir())
    theirs = {
        impl: transformers.BertModel.from_pretrained(folder, attn_implementation=impl).eval()
        for impl in ("sdpa", "eager")
    }
    inputs = random_batch(ours.config.vocab_size, args.batch, args.seq)
    print(
        f"BertModel forward, all-MiniLM-L6-v2, batch {args.batch} x {counted(args.seq, 'token')}, fp32, CPU, "
        f"{counted(torch.get_num_threads(), 'thread')}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}; medians of {counted(args.repeats, 'alternating run')}"
    )
    results = []
    with torch.no_grad():
        for label, impl, maps in (("fast path", "sdpa", False), ("attention maps", "eager", True)):
            mine, hf = median_times(
                lambda maps=maps: ours(**inputs, output_attentions=maps),
                lambda impl=impl, maps=maps: theirs[impl](**inputs, output_attentions=maps),
                args.repeats,
            )
            ratio = mine / hf
            results.append({"setting": label, "ours_ms": mine * 1e3, "theirs_ms": hf * 1e3, "ratio": ratio})
            print(
                f"  {label:15s} ours {mine * 1e3:7.1f} ms   Hugging Face ({impl}) {hf * 1e3:7.1f} ms   "
                f"{ratio=:.2f} (ours / theirs in time, lower is better)"
            )
    return results
