"""Re-execute notebooks in place, each in a fresh kernel, top to bottom.

    python tests/execute_notebooks.py                 # every notebook
    python tests/execute_notebooks.py notebooks/03_masking.ipynb
    python tests/execute_notebooks.py --restate notebooks/03_masking.ipynb   # the widget state only, no run

Committed notebooks must be in exactly the state this leaves them in: nbval compares their
outputs (``python -m pytest --nbval --nbval-current-env tests notebooks``). So the kernel is the
one nbval's ``--nbval-current-env`` starts, this interpreter's ipykernel, whatever kernels the
machine has installed, and it starts in the notebook's folder, as nbval's does. Prints each
notebook's wall time; stops at the first cell that raises.

Widgets are committed so that a notebook that has not been run shows them as they were drawn, and
so that opening and saving it in JupyterLab leaves its file byte-identical (issue 33):

- each widget's output carries, beside the widget view, the picture it drew
  (``image/png``, taken from its Output widget in that state). A notebook opened without
  running it is untrusted: JupyterLab and Notebook 7 then refuse the widget view (it is not
  a "safe" output) and show the richest safe type instead, which is now this picture rather
  than the widget's text form (``VBox(children=...``); GitHub's viewer shows it too;
- the widget state in the metadata is the one JupyterLab writes for a notebook none of whose
  widgets is live, ``{"state": {}, "version_major": 2, "version_minor": 0}`` (``UNRUN_WIDGET_STATE``).
  With "Save Widget State Automatically" on (the README's set-up) JupyterLab's widget manager saves only
  the models of the running kernel (``get_state_sync`` keeps ``comm_live`` models), and it marks a
  notebook modified as soon as it loads a model from the file (``register_model`` calls ``setDirty``).
  Committed with nbclient's full state, a notebook opened without running it was therefore marked
  modified, and its first save, or autosave, emptied that state: reading alone rewrote the file. The
  full state is only used by a trusted notebook, which a clone is not, and the pictures above stand in
  for it; nbclient's state is still recorded while running, to find those pictures and to give the
  widgets stable ids.

What this cannot do: a notebook the learner ran and saved holds new widgets, whose state
JupyterLab writes only with "Save Widget State Automatically" on (the README says so, and
``tests/test_browser.py`` checks that such a notebook reopens without "Error displaying widget").
"""

from __future__ import annotations

import hashlib
import json
import re
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
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
PICTURE = "image/png"
# What JupyterLab saves as the widget state of a notebook none of whose widgets is live (opened, not run).
UNRUN_WIDGET_STATE = {"state": {}, "version_major": 2, "version_minor": 0}
# The kernel as it names itself ("Python 3 (ipykernel)"): JupyterLab rewrites a notebook whose committed
# kernelspec says otherwise, so an untouched notebook would open marked as changed.
KERNELSPEC = {"display_name": get_kernel_dict()["display_name"], "language": "python", "name": KERNEL_NAME}


class CurrentEnvironmentKernels(KernelSpecManager):
    """Every kernel name resolves to this interpreter's ipykernel (as nbval's current-env kernel does)."""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        return KernelSpec(resource_dir=RESOURCES, **get_kernel_dict())


def execute(path: Path) -> float:
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    run(nb, path.parent)
    elapsed = time.perf_counter() - start
    add_widget_pictures(nb)
    nbformat.write(as_jupyterlab_saves_it(stable_widget_ids(nb, path.stem)), path)
    return elapsed


def as_jupyterlab_saves_it(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` with the widget state JupyterLab writes when it saves it unrun (``UNRUN_WIDGET_STATE``), where it has
    widgets: open and save then change nothing. Call it after ``add_widget_pictures``, which reads the state."""
    if "widgets" in nb.metadata:
        nb.metadata["widgets"] = {WIDGET_STATE: json.loads(json.dumps(UNRUN_WIDGET_STATE))}
    return nb


def restate(path: Path) -> None:
    """Rewrite an executed notebook's widget state as ``execute`` now leaves it, without running it (its outputs
    already carry their pictures)."""
    missing = [index for index, _ in unpictured_widget_outputs(nbformat.read(path, as_version=4))]
    if missing:
        sys.exit(f"{path.name}: widget outputs without their picture in cells {missing}: re-execute it instead")
    nbformat.write(as_jupyterlab_saves_it(nbformat.read(path, as_version=4)), path)


def unpictured_widget_outputs(nb: nbformat.NotebookNode) -> list[tuple[int, dict]]:
    return [
        (index, output)
        for index, cell in enumerate(nb.cells)
        for output in cell.get("outputs", [])
        if WIDGET_VIEW in output.get("data", {}) and PICTURE not in output["data"]
    ]


def run(nb: nbformat.NotebookNode, folder: Path) -> nbformat.NotebookNode:
    """Execute ``nb`` in place, top to bottom, in a fresh kernel of this interpreter started in ``folder``, and shut
    the kernel down (nbclient leaves a kernel manager it is given running); raises nbclient's CellExecutionError at
    the first cell that raises."""
    for cell in nb.cells:
        cell.metadata.pop("execution", None)  # timestamps left by earlier runs or by JupyterLab
    kernel = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=CurrentEnvironmentKernels())
    client = NotebookClient(
        nb,
        km=kernel,
        timeout=300,
        kernel_name=KERNEL_NAME,
        resources={"metadata": {"path": str(folder)}},
        coalesce_streams=True,  # one printout per cell, not pieces split by flushes
        record_timing=False,  # no per-cell timestamps: re-running leaves no noise in the diff
        store_widget_state=True,  # the widgets' state in the metadata: they render before the notebook is run
    )
    try:
        client.execute()
    finally:
        if kernel.has_kernel:
            kernel.shutdown_kernel(now=True)
    nb.metadata["kernelspec"] = KERNELSPEC
    return nb


def stable_widget_ids(nb: nbformat.NotebookNode, name: str) -> nbformat.NotebookNode:
    """``nb`` with every widget model id replaced by one derived from the notebook's name and the id's place in
    the widget state: a re-execution then writes the same ids, so a change to a notebook's prose does not
    rewrite its widget state in the diff. The ids are random 32-digit hex strings, so a textual replacement
    changes them alone."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    renamed = {old: hashlib.sha256(f"{name}:{i}".encode()).hexdigest()[:32] for i, old in enumerate(state)}
    if not renamed:
        return nb
    text = json.dumps(nb)
    text = re.sub("|".join(renamed), lambda match: renamed[match.group(0)], text)
    return nbformat.from_dict(json.loads(text))


def widget_picture(state: dict, model_id: str) -> str | None:
    """The first picture inside the widget ``model_id`` (its own Output widget, or one of its children's)."""
    model = state.get(model_id)
    if model is None:
        return None
    values = model["state"]
    for output in values.get("outputs", []):
        if PICTURE in output.get("data", {}):
            return output["data"][PICTURE]
    for child in values.get("children", []):
        picture = widget_picture(state, child.removeprefix("IPY_MODEL_"))
        if picture is not None:
            return picture
    return None


def add_widget_pictures(nb: nbformat.NotebookNode) -> None:
    """Give every widget output the picture its widget drew, as a static fallback beside the widget view."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view is None:
                continue
            picture = widget_picture(state, view["model_id"])
            if picture is not None:
                output["data"][PICTURE] = picture


def main(argv: list[str]) -> None:
    """``--restate`` first: rewrite the widget state of the notebooks named (or all), without running them."""
    only_state = argv[:1] == ["--restate"]
    argv = argv[1:] if only_state else argv
    paths = [Path(p).resolve() for p in argv] or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if not paths:
        sys.exit(f"no notebooks found in {NOTEBOOKS}")
    for path in paths:
        if only_state:
            restate(path)
            print(f"{path.name}: widget state as JupyterLab saves it", flush=True)
        else:
            print(f"{path.name}: {execute(path):.1f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
