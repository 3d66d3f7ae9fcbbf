"""``python -m bertcourse.pretraining``: notebook 09's recipe from a terminal, and the run that ships.

python -m bertcourse.pretraining --steps 600  # the notebook's run
python -m bertcourse.pretraining --steps 4000 --eval-every 100 --save bertcourse/pretraining/tiny_bert
"""

from __future__ import annotations

import argparse
import json
import tempfile

import torch

from .recipe import SHIPPED_STEPS, STEPS, pretrain, save_run


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bertcourse.pretraining", description="Pretrain the tiny BERT.")
    parser.add_argument(
        "--steps",
        type=int,
        default=STEPS,
        help=f"training steps ({STEPS}: the notebook's run; {SHIPPED_STEPS}: the shipped run)",
    )
    parser.add_argument("--save", default=None, help="write the model, vocabulary and run.json into this folder")
    parser.add_argument("--eval-every", type=int, default=None, help="steps between evaluations (default: a tenth)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as temporary:
        run = pretrain(temporary, steps=args.steps, eval_every=args.eval_every, seed=args.seed)
    if args.save:
        save_run(run, args.save)
    print(f"{args.steps} steps in {run.seconds:.0f} s on {torch.get_num_threads()} threads")
    print(json.dumps({"held_out": run.held_out, "held_out_short": run.held_out_short}, indent=1))


if __name__ == "__main__":
    main()
