"""A learner's run is solved or wrong: the notebooks run to their end either way (COURSE.md section 5).

Notebooks are committed unsolved, so nbval alone only ever sees "not attempted yet". Here the build exercises
of ``tests/notebook_answers.py`` are put in place of their skeleton cells, in a copy of the notebook:

- **right answers**, all of a notebook's at once: the copy runs under nbval in strict mode, so every cell's
  output equals the committed one, except the ``use``/``check`` cells' (tagged ``nbval-ignore-output`` in the
  copy: they now say "correct"). After each such cell the copy has one more cell, committed with the output
  ``True``: for a ``use`` cell, that the name it binds now runs the learner's function; for a ``check`` cell,
  that the check passes in the notebook. So the later cells gave the committed outputs *with the learner's
  function*.
- **wrong answers**, one run each, the other skeletons left as committed: the copy is executed (nbclient,
  as ``tests/execute_notebooks.py`` does) and every cell must run; the exercise's ``use``/``check`` cell
  says wrong ("❌"), and a ``use`` cell says, and does, that the package's function runs below.

A notebook whose skeletons for the data's exercises do not exist yet is skipped. The harness itself is tested
on small notebooks written here, in a temporary folder. Select these tests with ``-k answers``.

    python -m pytest -q tests/test_notebook_answers.py
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import math
import re
import subprocess
import sys
from pathlib import Path

import execute_notebooks
import nbformat
import pytest
import torch
import torch.nn.functional as F
from notebook_answers import RIGHT, WRONG
from torch import nn

import bertcourse as bc
from bertcourse.exercises import EXERCISES, check

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
# A use cell (`layer_norm = use("layer_norm", my_layer_norm)`) or a check cell (`check("layer_norm", my_layer_norm)`).
VERDICT_CALL = re.compile(
    r'^[ \t]*(?:(?P<bound>\w+)[ \t]*=[ \t]*)?(?P<call>use|check)\(\s*"(?P<name>\w+)"\s*,\s*(?P<function>my_\w+)\s*\)',
    re.MULTILINE,
)
# Any cell whose output names whose function runs: its output changes with the answer.
NAMES_WHO_RUNS = re.compile(r"\b(?:use|check)\(")
WRONG_MARK = "❌"
# A use cell's line for a function that fails: the package's function (the reference) runs below.
REFERENCE_RUNS_BELOW = re.compile(r"package's|reference", re.IGNORECASE)
PROBE_TAG = "answers-probe"
RUN_TIMEOUT_S = 1200


@dataclasses.dataclass(frozen=True)
class Asked:
    """One build exercise as a notebook asks it: its skeleton cell and the use or check cell after it."""

    name: str
    function: str  # my_<name>
    skeleton: int  # cell indices
    verdict: int
    call: str  # "use" or "check"
    bound: str | None  # the name a use cell binds (`layer_norm = use(...)`)


def is_skeleton(source: str, function: str) -> bool:
    """Whether the cell defines ``function`` with a body that only raises NotImplementedError (after a docstring)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == function:
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            if len(body) == 1 and isinstance(body[0], ast.Raise):
                exc = body[0].exc
                exc = exc.func if isinstance(exc, ast.Call) else exc
                return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def defined_function(source: str) -> str:
    """The name of the one function an answer's source defines."""
    (name,) = [node.name for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)]
    return name


def asked_exercises(nb: nbformat.NotebookNode) -> dict[str, Asked]:
    """Every exercise whose use or check cell follows its skeleton cell, by name (the first such pair)."""
    found: dict[str, Asked] = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for match in VERDICT_CALL.finditer(cell.source):
            name, function = match["name"], match["function"]
            if name in found:
                continue
            skeletons = [
                i for i in range(index) if nb.cells[i].cell_type == "code" and is_skeleton(nb.cells[i].source, function)
            ]
            if skeletons:
                found[name] = Asked(name, function, skeletons[-1], index, match["call"], match["bound"])
    return found


def probe_source(asked: Asked) -> str:
    """A cell that prints True when the learner's function passed: the use cell bound it, or its check passes."""
    if asked.call == "use" and asked.bound:
        # use returns the learner's function wrapped (functools.wraps), or the package's function.
        return f'print(getattr({asked.bound}, "__wrapped__", None) is {asked.function})'
    return f'from bertcourse.exercises import check as _check\nprint(_check("{asked.name}", {asked.function}).passed)'


def answered_copy(nb: nbformat.NotebookNode, answers: dict[str, str], probes: bool) -> nbformat.NotebookNode:
    """The notebook with the skeletons of ``answers`` replaced by their sources, the cells that name who runs
    tagged ``nbval-ignore-output``, and (``probes``) a probe cell committed as printing ``True`` after each
    answered exercise's use or check cell."""
    nb = copy.deepcopy(nb)
    asked = asked_exercises(nb)
    for name, source in answers.items():
        function = defined_function(source)
        assert function == asked[name].function, f"{name}: the answer defines {function}, the notebook asks for "
        nb.cells[asked[name].skeleton].source = source
    for cell in nb.cells:
        if cell.cell_type == "code" and NAMES_WHO_RUNS.search(cell.source):
            tags = cell.metadata.setdefault("tags", [])
            if "nbval-ignore-output" not in tags:
                tags.append("nbval-ignore-output")
    if probes:
        for exercise in sorted((asked[name] for name in answers), key=lambda a: -a.verdict):
            probe = nbformat.v4.new_code_cell(probe_source(exercise), metadata={"tags": [PROBE_TAG]})
            probe.outputs = [nbformat.v4.new_output("stream", name="stdout", text="True\n")]
            probe.execution_count = nb.cells[exercise.verdict].execution_count  # nbval: a cell with outputs ran
            nb.cells.insert(exercise.verdict + 1, probe)
    return nb


def run_right(path: Path, answers: dict[str, str], folder: Path) -> subprocess.CompletedProcess:
    """The notebook with ``answers`` in place, under nbval in strict mode, in a subprocess; its result."""
    nb = nbformat.read(path, as_version=4)
    target = folder / path.name
    nbformat.write(answered_copy(nb, answers, probes=True), target)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval", "--nbval-current-env", target.name],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
    )


def assert_right_run_passes(result: subprocess.CompletedProcess) -> None:
    tail = (result.stdout + result.stderr)[-6000:]
    assert result.returncode == 0 and re.search(r"\d+ passed", result.stdout), tail
    assert not re.search(r"\d+ (failed|error)", result.stdout), tail


def execute_copy(nb: nbformat.NotebookNode, folder: Path) -> nbformat.NotebookNode:
    """Run every cell in a fresh kernel of this environment, started in ``folder``, as tests/execute_notebooks.py
    does (and as nbval's --nbval-lax would: cells tagged nbval-skip are left out); raises nbclient's
    CellExecutionError at the first cell that raises."""
    for cell in nb.cells:
        if "nbval-skip" in cell.metadata.get("tags", []):
            cell.source = ""
    return execute_notebooks.run(nb, folder)


def text_of(cell: nbformat.NotebookNode) -> str:
    """The text a cell's outputs show: streams and text/plain."""
    parts = []
    for output in cell.outputs:
        if output.output_type == "stream":
            parts.append(output.text)
        elif output.output_type in ("execute_result", "display_data"):
            parts.append(output.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def run_wrong(path: Path, name: str, source: str, folder: Path) -> str:
    """The notebook with one wrong answer in place, run to its end; asserts that its use or check cell says
    wrong (and, for a use cell, that the package's function runs below). Returns that cell's text."""
    nb = nbformat.read(path, as_version=4)
    asked = asked_exercises(nb)[name]
    ran = execute_copy(answered_copy(nb, {name: source}, probes=True), folder)
    verdict = text_of(ran.cells[asked.verdict])
    probe = text_of(ran.cells[asked.verdict + 1])
    assert WRONG_MARK in verdict, f"{path.name}, {name}: its {asked.call} cell does not say wrong:\n{verdict}"
    assert probe == "False\n", f"{path.name}, {name}: the wrong answer passed ({asked.call} cell):\n{verdict}"
    if asked.call == "use":
        assert REFERENCE_RUNS_BELOW.search(verdict), f"{path.name}, {name}: no word that the reference runs below"
    return verdict


# --- the notebooks of the answer data -------------------------------------------------------------


def notebook_of(name: str) -> Path:
    (path,) = NOTEBOOKS.glob(f"{EXERCISES[name].notebook}_*.ipynb")
    return path


ANSWERED_NOTEBOOKS = sorted({notebook_of(name) for name in (*RIGHT, *WRONG)})
WRONG_ANSWERS = [(name, label, source) for name, answers in WRONG.items() for label, source in answers]


def asked_in(path: Path) -> dict[str, Asked]:
    """The data's exercises that ``path`` asks; skips the test when it asks none of them yet."""
    asked = asked_exercises(nbformat.read(path, as_version=4))
    data = {name for name in (*RIGHT, *WRONG) if notebook_of(name) == path}
    if not data & set(asked):
        pytest.skip(f"{path.name} has no skeleton and use/check cell yet for {', '.join(sorted(data))}")
    return {name: asked[name] for name in data & set(asked)}


@pytest.mark.parametrize("name", sorted({*RIGHT, *WRONG}))
def test_answers_data_defines_the_notebooks_function(name):
    assert name in EXERCISES, f"{name}: no such exercise"
    sources = ([RIGHT[name]] if name in RIGHT else []) + [source for _, source in WRONG.get(name, [])]
    assert all(defined_function(source) == f"my_{name}" for source in sources)
    labels = [label for label, _ in WRONG.get(name, [])]
    assert len(labels) == len(set(labels)), labels


def standalone(name: str, source: str):
    namespace = {"torch": torch, "F": F, "math": math, "nn": nn, "bc": bc, "layer_norm": bc.layer_norm}
    exec(source, namespace)
    return namespace[f"my_{name}"]


@pytest.mark.parametrize("name", sorted(RIGHT))
def test_answers_right_passes_its_check(name):
    result = check(name, standalone(name, RIGHT[name]))
    assert result.passed, result.message


@pytest.mark.parametrize(
    ("name", "label", "source"), WRONG_ANSWERS, ids=[f"{n}-{label}" for n, label, _ in WRONG_ANSWERS]
)
def test_answers_wrong_fails_its_check_as_a_known_mistake(name, label, source):
    result = check(name, standalone(name, source))
    assert not result.passed, result.message
    assert result.mistake is not None, f"{label}: not a catalogued mistake: {result.message}"


@pytest.mark.parametrize("path", ANSWERED_NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_answers_every_exercise_of_the_data_is_asked_by_its_notebook(path):
    asked = asked_in(path)
    data = {name for name in (*RIGHT, *WRONG) if notebook_of(name) == path}
    assert set(asked) == data, f"{path.name} does not ask {sorted(data - set(asked))}"


@pytest.mark.parametrize("path", ANSWERED_NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_answers_right_notebook_gives_the_committed_outputs(path, tmp_path):
    answers = {name: RIGHT[name] for name in asked_in(path) if name in RIGHT}
    if not answers:
        pytest.skip(f"{path.name}: no right answer in the data for the exercises it asks")
    assert_right_run_passes(run_right(path, answers, tmp_path))


@pytest.mark.parametrize(
    ("name", "label", "source"), WRONG_ANSWERS, ids=[f"{n}-{label}" for n, label, _ in WRONG_ANSWERS]
)
def test_answers_wrong_notebook_runs_to_its_end(name, label, source, tmp_path):
    path = notebook_of(name)
    if name not in asked_in(path):
        pytest.skip(f"{path.name} does not ask {name} yet")
    run_wrong(path, name, source, tmp_path)


# --- the harness itself, on small notebooks written here ------------------------------------------

SKELETON = 'def my_layer_norm(x, weight, bias, eps=1e-12):\n    """Your LayerNorm."""\n    raise NotImplementedError'
LATER = "x = torch.arange(6.0).reshape(2, 3)\nprint(layer_norm(x, torch.ones(3), torch.zeros(3)))"


def fixture_notebook(folder: Path, cells: list[str]) -> Path:
    """A notebook of ``cells``, executed with nbclient and committed, as tests/execute_notebooks.py commits the
    course's notebooks."""
    path = folder / "committed" / "00_fixture.ipynb"
    path.parent.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    nbformat.write(execute_copy(nb, path.parent), path)
    return path


@pytest.fixture(scope="module")
def check_notebook(tmp_path_factory):
    """The Exercises layout: a skeleton, then its check cell; a later cell runs the package's layer_norm."""
    setup = "import torch\nimport bertcourse as bc\nfrom bertcourse.exercises import check\nlayer_norm = bc.layer_norm"
    return fixture_notebook(
        tmp_path_factory.mktemp("check"), [setup, SKELETON, 'check("layer_norm", my_layer_norm)', LATER]
    )


@pytest.fixture(scope="module")
def use_notebook(tmp_path_factory):
    """The build layout: a skeleton, then its use cell; a later cell runs whichever function use returned."""
    if not hasattr(bc.exercises, "use"):
        pytest.skip("bertcourse.exercises has no use() yet")
    setup = "import torch\nfrom bertcourse.exercises import use"
    cells = [setup, SKELETON, 'layer_norm = use("layer_norm", my_layer_norm)', LATER]
    return fixture_notebook(tmp_path_factory.mktemp("use"), cells)


def test_answers_harness_finds_the_exercises_of_a_fixture(check_notebook):
    nb = nbformat.read(check_notebook, as_version=4)
    assert asked_exercises(nb) == {"layer_norm": Asked("layer_norm", "my_layer_norm", 1, 2, "check", None)}
    assert "⏳ Not attempted yet" in text_of(nb.cells[2])
    copied = answered_copy(nb, {"layer_norm": RIGHT["layer_norm"]}, probes=True)
    assert [cell.metadata.get("tags", []) for cell in copied.cells] == [
        [],
        [],
        ["nbval-ignore-output"],
        [PROBE_TAG],
        [],
    ]
    assert copied.cells[1].source == RIGHT["layer_norm"] and nb.cells[1].source == SKELETON


def test_answers_harness_right_run_on_a_check_fixture(check_notebook, tmp_path):
    assert_right_run_passes(run_right(check_notebook, {"layer_norm": RIGHT["layer_norm"]}, tmp_path))


@pytest.mark.parametrize("label", [label for label, _ in WRONG["layer_norm"]])
def test_answers_harness_wrong_run_on_a_check_fixture(check_notebook, tmp_path, label):
    source = dict(WRONG["layer_norm"])[label]
    assert run_wrong(check_notebook, "layer_norm", source, tmp_path).startswith(WRONG_MARK)


def test_answers_harness_right_run_on_a_use_fixture(use_notebook, tmp_path):
    assert_right_run_passes(run_right(use_notebook, {"layer_norm": RIGHT["layer_norm"]}, tmp_path))


def test_answers_harness_wrong_run_on_a_use_fixture(use_notebook, tmp_path):
    run_wrong(use_notebook, "layer_norm", WRONG["layer_norm"][0][1], tmp_path)


def test_answers_harness_right_run_fails_on_a_changed_output(check_notebook, tmp_path):
    """Strict mode is on: a later cell whose committed output differs from the run's fails the right run."""
    nb = nbformat.read(check_notebook, as_version=4)
    committed = nb.cells[-1].outputs[0].text
    assert "1.2247" in committed, committed
    nb.cells[-1].outputs[0].text = committed.replace("1.2247", "1.2248")
    changed = tmp_path / "changed" / check_notebook.name
    changed.parent.mkdir()
    nbformat.write(nb, changed)
    (tmp_path / "run").mkdir()
    result = run_right(changed, {"layer_norm": RIGHT["layer_norm"]}, tmp_path / "run")
    assert result.returncode != 0 and "1 failed" in result.stdout, result.stdout[-3000:]
