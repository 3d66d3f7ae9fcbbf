"""Benchmarks of the course's code against Hugging Face and PyTorch, on the CPU.

    python -m bertcourse.bench [--only SECTION] [--repeats N] [--threads N] [section options]

Each section is a module of this subpackage with ``run(args) -> list[dict]`` (and optionally
``add_arguments(parser)``); it prints its own report. Hugging Face ``transformers`` is needed
(a development requirement, not a course one).
"""

from __future__ import annotations

import argparse
import importlib

import torch

SECTIONS = ["forward", "training", "pretraining", "long_inputs"]


def main(argv=None) -> dict[str, list[dict]]:
    parser = argparse.ArgumentParser(prog="python -m bertcourse.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=SECTIONS, action="append", help="run only this section (repeatable)")
    parser.add_argument("--repeats", type=int, default=20, help="alternating timed runs per setting")
    parser.add_argument("--batch", type=int, default=8, help="sentences per batch (MiniLM sections)")
    parser.add_argument("--seq", type=int, default=128, help="tokens per sentence (MiniLM sections)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: PyTorch's)")
    modules = {name: importlib.import_module(f"{__package__}.{name}") for name in SECTIONS}
    for module in modules.values():
        if hasattr(module, "add_arguments"):
            module.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.threads:
        torch.set_num_threads(args.threads)

    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()  # no "Loading weights" bars from from_pretrained on stderr
    return {name: modules[name].run(args) for name in (args.only or SECTIONS)}


if __name__ == "__main__":
    main()
