"""``python -m bertcourse.exercises grade PATH...``: grade learners' notebooks (see ``grading``).

Prints one row per notebook and exercise (correct, wrong and the mistake, not attempted, not
checked) and exits with 0 only when every exercise of every notebook is correct. Grading executes
the submitted code: run it in a sandbox.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .grading import grade_notebook, report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bertcourse.exercises",
        description="Grade learners' notebooks. This runs their code: do it in a sandbox.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    grade = commands.add_parser("grade", help="run each notebook in a fresh kernel and grade its exercises")
    grade.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="notebooks (.ipynb) to grade")
    grade.add_argument("--timeout", type=float, default=600.0, help="seconds per notebook (default 600)")
    grade.add_argument("--cell-timeout", type=float, default=120.0, help="seconds per cell (default 120)")
    args = parser.parse_args(argv)
    grades = []
    for path in args.paths:
        grades.append(grade_notebook(path, timeout=args.timeout, cell_timeout=args.cell_timeout))
        print(f"graded {path.name}", file=sys.stderr, flush=True)
    print(report(grades))
    return 0 if all(g.all_correct for g in grades) else 1


if __name__ == "__main__":
    sys.exit(main())
