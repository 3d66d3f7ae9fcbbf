"""``python -m bertcourse.pretraining``: notebook 09's recipe from a terminal, the run that ships, its control.

    python -m bertcourse.pretraining --steps 600  # the notebook's run
    python -m bertcourse.pretraining --steps 4000 --eval-every 100 --save bertcourse/pretraining/tiny_bert
    python -m bertcourse.pretraining --steps 600 --eval-every 50 --control bertcourse/pretraining/length_control.json
    python -m bertcourse.pretraining --steps 4000 --eval-every 100 --short-share 0 --save /tmp/long_control

``--control FILE`` trains the recipe twice, once as it is and once with every step on pairs of the full
length (``short_share=0``), everything else equal, and writes both runs' evaluations and final
figures to ``FILE``: the evidence that short pairs first is what lets the tiny BERT leave the plateau.
``--short-share 0`` trains a single arm at full length throughout: with ``--steps 4000`` it is the control
of the shipped run, whose ``run.json`` ships as ``long_control.json`` (``recipe.load_long_control``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
from pathlib import Path

import torch

from .recipe import SHIPPED_STEPS, SHORT_SHARE, STEPS, pretrain, save_run


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bertcourse.pretraining", description="Pretrain the tiny BERT.")
    parser.add_argument(
        "--steps", type=int, default=STEPS, help=f"training steps ({STEPS}: the notebook's; {SHIPPED_STEPS}: shipped)"
    )
    parser.add_argument("--eval-every", type=int, default=None, help="steps between evaluations (default: a tenth)")
    parser.add_argument("--save", default=None, help="write the model, vocabulary and run.json into this folder")
    parser.add_argument("--control", default=None, help="train with and without short pairs; write both to this JSON")
    parser.add_argument(
        "--short-share", type=float, default=SHORT_SHARE, help=f"share of steps on short pairs ({SHORT_SHARE})"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the initial weights and of the batches and their masks (0)"
    )
    args = parser.parse_args(argv)
    arms = {"short_first": SHORT_SHARE, "full_length": 0.0} if args.control else {"recipe": args.short_share}
    record = {}
    for arm, share in arms.items():
        with tempfile.TemporaryDirectory() as temporary:
            run = pretrain(temporary, steps=args.steps, short_share=share, eval_every=args.eval_every, seed=args.seed)
        print(f"{arm}: {args.steps} steps in {run.seconds:.0f} s on {torch.get_num_threads()} threads")
        print(json.dumps({"held_out": run.held_out, "held_out_short": run.held_out_short}, indent=1))
        if args.save:
            save_run(run, args.save)
        record[arm] = {
            "recipe": run.recipe,
            "seconds": round(run.seconds, 1),
            "evals": run.history.evals,
            "held_out": run.held_out,
            "held_out_short": run.held_out_short,
        }
    if args.control:
        record["machine"] = {
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__.split("+")[0],
            "python": platform.python_version(),
        }
        Path(args.control).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
