"""The re-execution script writes the same notebook twice: widget ids derived from the notebook, not drawn at random,
so that re-executing after a prose change leaves the widget state out of the diff, and the widget state JupyterLab
would save for the notebook unrun, so that opening and saving it changes nothing (issue 33)."""

import hashlib
import shutil
import sys
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))
import execute_notebooks  # noqa: E402 -- the script beside this file


def widget_notebook(path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import ipywidgets as widgets\nwidgets.VBox([widgets.IntSlider(3)])")]
    nbformat.write(nb, path)
    return path


def test_two_re_executions_write_the_same_widget_ids(tmp_path):
    (tmp_path / "first").mkdir()
    first = widget_notebook(tmp_path / "first" / "07_demo.ipynb")
    second = tmp_path / "second" / "07_demo.ipynb"
    second.parent.mkdir()
    shutil.copy(first, second)
    for path in (first, second):
        execute_notebooks.execute(path)
    assert first.read_bytes() == second.read_bytes()
    nb = nbformat.read(first, as_version=4)
    view = nb.cells[0].outputs[0]["data"][execute_notebooks.WIDGET_VIEW]
    derived = {hashlib.sha256(f"07_demo:{i}".encode()).hexdigest()[:32] for i in range(20)}
    assert view["model_id"] in derived  # the name and place in nbclient's state, not a random id
    # the state JupyterLab saves for it unrun: opening and saving it leaves it as it is
    assert nb.metadata["widgets"] == {execute_notebooks.WIDGET_STATE: execute_notebooks.UNRUN_WIDGET_STATE}


def test_stable_ids_replace_every_reference_and_nothing_else():
    old = ["a" * 32, "b" * 32]
    nb = nbformat.v4.new_notebook()
    nb.metadata["widgets"] = {
        execute_notebooks.WIDGET_STATE: {
            "state": {old[0]: {"state": {"children": [f"IPY_MODEL_{old[1]}"]}}, old[1]: {"state": {"value": 3}}}
        }
    }
    nb.cells = [nbformat.v4.new_markdown_cell("a" * 31)]
    renamed = execute_notebooks.stable_widget_ids(nb, "01_demo")
    state = renamed.metadata["widgets"][execute_notebooks.WIDGET_STATE]["state"]
    first, second = list(state)
    assert not set(state) & set(old)
    assert state[first]["state"]["children"] == [f"IPY_MODEL_{second}"]
    assert renamed.cells[0].source == "a" * 31
    again = execute_notebooks.stable_widget_ids(nb, "01_demo")
    assert list(again.metadata["widgets"][execute_notebooks.WIDGET_STATE]["state"]) == [first, second]
