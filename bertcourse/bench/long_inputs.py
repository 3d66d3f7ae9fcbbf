"""Exact attention three ways, at long lengths: the explicit matrix, PyTorch's SDPA, and block attention.

One head of width ``--head-dim`` (64, as in BERT-base), batch 1, fp32, on the CPU, at each length of
``--lengths`` (1,024, 4,096 and 8,192 tokens). For each: the wall time (medians of alternating runs,
each method against SDPA) and the peak memory of one call, measured with
``bertcourse.long_inputs.peak_memory`` (PyTorch's allocator, through ``torch.profiler``):

- explicit: ``softmax(q @ k.T / sqrt(d)) @ v``, which builds the (n, n) scores and weights;
- SDPA: ``torch.nn.functional.scaled_dot_product_attention``, PyTorch's fused kernel;
- block: ``bertcourse.long_inputs.block_attention``, key/value blocks of ``--block-size`` with an
  online softmax, in Python.

Memory grows with the heads and the batch for all three alike, so the ratios hold for BERT's 12 heads.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F

from .._validation import counted
from ..long_inputs import block_attention, peak_memory
from .timing import median_times

MIB = 2**20


def add_arguments(parser) -> None:
    group = parser.add_argument_group("long_inputs")
    group.add_argument(
        "--lengths", type=_lengths, default=(1024, 4096, 8192), help="sequence lengths, e.g. 1024,4096,8192"
    )
    group.add_argument("--block-size", type=int, default=128, help="keys per block of block attention")
    group.add_argument("--head-dim", type=int, default=64, help="width of the attention head")


def _lengths(text: str) -> tuple[int, ...]:
    parts = text.split(",")
    if not all(part.strip().isdigit() and int(part) > 0 for part in parts):
        raise argparse.ArgumentTypeError(f"must be positive ints separated by commas, e.g. 1024,4096, got {text!r}")
    return tuple(int(part) for part in parts)


def explicit_attention(q, k, v):
    """The (n, n) matrix written out: scores, softmax, weighted sum."""
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v  # (..., n, d)


def run(args) -> list[dict]:
    print(
        f"Attention at long lengths: one head of width {args.head_dim}, batch 1, fp32, CPU, "
        f"{counted(torch.get_num_threads(), 'thread')}, torch {torch.__version__}; block attention with blocks of "
        f"{counted(args.block_size, 'key')}; times are medians of {counted(args.repeats, 'alternating run')} "
        "against SDPA, "
        "memory the allocator's peak during one call"
    )
    results = []
    for n in args.lengths:
        generator = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(1, 1, n, args.head_dim, generator=generator) for _ in range(3))
        methods = {
            "explicit": lambda q=q, k=k, v=v: explicit_attention(q, k, v),
            "SDPA": lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v),
            "block": lambda q=q, k=k, v=v: block_attention(q, k, v, block_size=args.block_size),
        }
        with torch.no_grad():
            block_s, sdpa_s = median_times(methods["block"], methods["SDPA"], args.repeats)
            explicit_s, _ = median_times(methods["explicit"], methods["SDPA"], args.repeats)
            peaks = {name: peak_memory(method) / MIB for name, method in methods.items()}
        row = {
            "setting": f"n={n}",
            "explicit_ms": explicit_s * 1e3,
            "sdpa_ms": sdpa_s * 1e3,
            "block_ms": block_s * 1e3,
            "explicit_mib": peaks["explicit"],
            "sdpa_mib": peaks["SDPA"],
            "block_mib": peaks["block"],
            "memory_ratio": peaks["explicit"] / peaks["block"],
        }
        results.append(row)
        print(
            f"  n={n:<6,d} time: explicit {row['explicit_ms']:8.1f} ms, SDPA {row['sdpa_ms']:8.1f} ms, "
            f"block {row['block_ms']:8.1f} ms (block/SDPA {block_s / sdpa_s:.2f})   peak memory: explicit "
            f"{row['explicit_mib']:7.1f} MiB, SDPA {row['sdpa_mib']:6.1f} MiB, block {row['block_mib']:6.1f} MiB "
            f"(explicit/block {row['memory_ratio']:.1f})"
        )
    return results
