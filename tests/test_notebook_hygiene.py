"""Committed notebooks are in the state a learner and nbval expect.

Executed top to bottom in one fresh kernel (execution counts 1..n), with no error, nothing on
stderr and no local path in any output; with the Colab badge and the sections every notebook has;
small enough to open quickly; and with nbval tags only where the course allows them: outputs are
ignored only for widget and wall-clock timing cells, and only a Colab-only cell may be skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MAX_BYTES = 2 * 1024 * 1024
REQUIRED_SECTIONS = ["You will learn", "Pitfalls", "Exercises"]
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
# A local path in an output: home and work folders, temporary files, a Windows drive.
LOCAL_PATH = re.compile(r"(?<![\w.])(/root|/tmp|/work|/home|/Users|/private/var)/|\b[A-Za-z]:\\\\?[\w.]")
# Cells whose output nbval may ignore: they show a widget, or a wall-clock timing.
WIDGET_OR_TIMING = re.compile(
    r"widgets\.|explorer|interact|perf_counter|\btime\.|timeit|%%?time\b|fastest_thread_count", re.IGNORECASE
)
# A cell whose figures come from a model trained in the notebook (COURSE.md section 7) says so in a first-line
# comment with its reason; its claims are asserted, in it or in the cells that read its figures.
MACHINE_DEPENDENT = re.compile(r"^# machine-dependent: \S.{10,}", re.MULTILINE)
COLAB_ONLY = '"google.colab" in sys.modules'


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def code_cells(path: Path) -> list[nbformat.NotebookNode]:
    return [cell for cell in read(path).cells if cell.cell_type == "code"]


def output_texts(output: nbformat.NotebookNode) -> list[str]:
    """Every piece of text an output shows (streams, text/* data, tracebacks)."""
    if output.output_type == "stream":
        return [output.text]
    if output.output_type == "error":
        return [output.ename, output.evalue, *output.traceback]
    return [
        value for mime, value in output.get("data", {}).items() if mime.startswith("text/") and isinstance(value, str)
    ]


def tags(cell: nbformat.NotebookNode) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def test_the_course_has_notebooks() -> None:
    assert NOTEBOOKS, "no notebooks/NN_name.ipynb found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_executed_top_to_bottom_in_one_kernel(path: Path) -> None:
    counts = [cell.execution_count for cell in code_cells(path)]
    assert counts == list(range(1, len(counts) + 1)), f"re-run: python tests/execute_notebooks.py {path.name}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_kernelspec_is_the_one_the_kernel_reports(path: Path) -> None:
    # JupyterLab rewrites a kernelspec that differs from the running kernel's, and marks the notebook changed.
    from ipykernel.kernelspec import get_kernel_dict

    spec = nbformat.read(path, as_version=4).metadata.get("kernelspec", {})
    assert spec == {"display_name": get_kernel_dict()["display_name"], "language": "python", "name": "python3"}, spec


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_error_or_stderr_output(path: Path) -> None:
    for index, cell in enumerate(code_cells(path)):
        for output in cell.outputs:
            assert output.output_type != "error", f"code cell {index} raised {output.ename}: {output.evalue}"
            if output.output_type == "stream":
                assert output.name == "stdout", f"code cell {index} wrote to stderr: {output.text[:300]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_local_path_in_outputs(path: Path) -> None:
    for index, cell in enumerate(code_cells(path)):
        for output in cell.outputs:
            for text in output_texts(output):
                found = LOCAL_PATH.search(text)
                assert found is None, (
                    f"code cell {index} shows a local path: ...{text[max(found.start() - 40, 0) : found.end() + 40]}..."
                )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_opens_with_the_colab_badge(path: Path) -> None:
    title = read(path).cells[0]
    assert title.cell_type == "markdown" and COLAB_BADGE in title.source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_has_the_sections_of_every_notebook(path: Path) -> None:
    markdown = "\n".join(cell.source for cell in read(path).cells if cell.cell_type == "markdown")
    missing = [section for section in REQUIRED_SECTIONS if section not in markdown]
    assert not missing, f"missing sections: {missing}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_small_enough(path: Path) -> None:
    size = path.stat().st_size
    assert size <= MAX_BYTES, f"{size / 1e6:.1f} MB: smaller figures (dpi) or fewer images"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_nbval_ignores_only_widget_and_timing_outputs(path: Path) -> None:
    for index, cell in enumerate(code_cells(path)):
        if "nbval-ignore-output" in tags(cell):
            assert WIDGET_OR_TIMING.search(cell.source) or MACHINE_DEPENDENT.match(cell.source), (
                f"code cell {index}: its output must be compared by nbval"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_nbval_skips_only_a_colab_only_cell(path: Path) -> None:
    cells = code_cells(path)
    for index, cell in enumerate(cells):
        if "nbval-skip" in tags(cell):
            assert index > 0 and COLAB_ONLY in cell.source, f"code cell {index}: only a Colab-only cell may be skipped"


def test_hygiene_checks_catch_what_they_look_for() -> None:
    assert LOCAL_PATH.search("saved to /root/.cache/x") and LOCAL_PATH.search("C:\\Users\\me")
    assert not LOCAL_PATH.search("tensor(0.5000) / 2, see notebooks/03_masking.ipynb, ratio 3/4")
    assert WIDGET_OR_TIMING.search("bc.widgets.AttentionExplorer(model, tok)")
    assert WIDGET_OR_TIMING.search("start = time.perf_counter()")
    assert not WIDGET_OR_TIMING.search("print(scores.shape)")
    assert MACHINE_DEPENDENT.match("# machine-dependent: figures of the model trained above\nprint(loss)")
    assert not MACHINE_DEPENDENT.match("print(loss)  # machine-dependent: x") and not MACHINE_DEPENDENT.match(
        "# machine-dependent:"
    )
    stderr = nbformat.v4.new_output("stream", name="stderr", text="warning")
    assert output_texts(stderr) == ["warning"]
