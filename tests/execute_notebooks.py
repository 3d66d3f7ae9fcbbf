"""Re-execute notebooks in place, each in a fresh kernel, top to bottom.

    python tests/execute_notebooks.py                 # every notebook
    python tests/execute_notebooks.py notebooks/03_masking.ipynb

Committed notebooks must be in exactly the state this leaves them in: nbval compares their
outputs (``python -m pytest --nbval --nbval-current-env tests notebooks``). So the kernel is the
one nbval's ``--nbval-current-env`` starts, this interpreter's ipykernel, whatever kernels the
machine has installed, and it starts in the notebook's folder, as nbval's does. Prints each
notebook's wall time; stops at the first cell that raises.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from ipykernel.kernelspec import RESOURCES, get_kernel_dict
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
KERNEL_NAME = "python3"


class CurrentEnvironmentKernels(KernelSpecManager):
    """Every kernel name resolves to this interpreter's ipykernel (as nbval's current-env kernel does)."""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        return KernelSpec(resource_dir=RESOURCES, **get_kernel_dict())


def execute(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)  # timestamps left by earlier runs or by JupyterLab
    kernel = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=CurrentEnvironmentKernels())
    client = NotebookClient(
        nb,
        km=kernel,
        timeout=300,
        kernel_name=KERNEL_NAME,
        resources={"metadata": {"path": str(path.parent)}},
        coalesce_streams=True,  # one printout per cell, not pieces split by flushes
        record_timing=False,  # no per-cell timestamps: re-running leaves no noise in the diff
    )
    start = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - start
    nbformat.write(nb, path)
    return elapsed


def main(argv: list[str]) -> None:
    paths = [Path(p).resolve() for p in argv] or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if not paths:
        sys.exit(f"no notebooks found in {NOTEBOOKS}")
    for path in paths:
        print(f"{path.name}: {execute(path):.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
