"""Benchmark: our BertModel against Hugging Face's on the real MiniLM weights, on the CPU.

    python -m bertcourse.bench [--batch 8] [--seq 128] [--repeats 20] [--threads N]

Batch 8 x 128 tokens, fp32, ``torch.no_grad()``. Both models are warmed up, then timed
*alternately* in the same process (ours, theirs, ours, theirs, ...) so that a change in
machine load hits both alike; the medians are compared. Two settings:

- fast path: no attention maps (ours: PyTorch's fused SDPA kernel; theirs: its default
  ``sdpa`` attention implementation);
- attention maps: ``output_attentions=True`` (ours: the teaching path; theirs: ``eager``).

Hugging Face ``transformers`` is needed (a development requirement, not a course one).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from .pretrained import default_weights_dir, load_pretrained


def _median_times(run_ours, run_theirs, repeats: int, warmup: int = 3) -> tuple[float, float]:
    for _ in range(warmup):
        run_ours()
        run_theirs()
    ours, theirs = [], []
    for _ in range(repeats):
        for run, times in ((run_ours, ours), (run_theirs, theirs)):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
    return statistics.median(ours), statistics.median(theirs)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: PyTorch's)")
    args = parser.parse_args(argv)

    import transformers

    transformers.logging.set_verbosity_error()
    if args.threads:
        torch.set_num_threads(args.threads)
    ours, _ = load_pretrained()
    folder = str(default_weights_dir())
    theirs = {
        impl: transformers.BertModel.from_pretrained(folder, attn_implementation=impl).eval()
        for impl in ("sdpa", "eager")
    }
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(1000, ours.config.vocab_size, (args.batch, args.seq), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    token_type_ids = torch.zeros_like(input_ids)
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}

    print(
        f"BertModel forward, all-MiniLM-L6-v2, batch {args.batch} x {args.seq} tokens, fp32, CPU, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}, transformers {transformers.__version__}; "
        f"medians of {args.repeats} alternating runs"
    )
    results = []
    with torch.no_grad():
        for label, impl, maps in (("fast path", "sdpa", False), ("attention maps", "eager", True)):
            mine, hf = _median_times(
                lambda maps=maps: ours(**inputs, output_attentions=maps),
                lambda impl=impl, maps=maps: theirs[impl](**inputs, output_attentions=maps),
                args.repeats,
            )
            ratio = mine / hf
            results.append({"setting": label, "ours_ms": mine * 1e3, "theirs_ms": hf * 1e3, "ratio": ratio})
            print(f"  {label:15s} ours {mine * 1e3:7.1f} ms   Hugging Face ({impl}) {hf * 1e3:7.1f} ms   {ratio=:.2f}")
    return results


if __name__ == "__main__":
    main()
