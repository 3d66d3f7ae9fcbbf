"""Re-execute notebooks in place, each in a fresh kernel, top to bottom.

    python tests/execute_notebooks.py                 # every notebook
    python tests/execute_notebooks.py notebooks/03_masking.ipynb

Committed notebooks must be in exactly the state this leaves them in (nbval compares
their outputs). Prints each notebook's wall time.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def execute(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    elapsed = time.perf_counter() - start
    nbformat.write(nb, path)
    return elapsed


def main(argv: list[str]) -> None:
    paths = [Path(p).resolve() for p in argv] or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    for path in paths:
        print(f"{path.name}: {execute(path):.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
