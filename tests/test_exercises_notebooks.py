"""The exercises of notebooks 01-07 as a learner meets them: 2-4 each, every skeleton committed unsolved (the
cell under it, a `check` or a build piece's `use`, shows "not attempted"), every collapsed solution judged
correct by its check, and start hints that say where to begin without handing out the code. A build piece asked
mid-notebook (`layer_norm = use("layer_norm", my_layer_norm)`) has no collapsed solution: `solution(name)` prints
one that passes (tests/test_solutions_paste.py)."""

import math
import re
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F

import bertcourse as bc
from bertcourse.exercises import EXERCISES, check

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("0[1-7]_*.ipynb"))
CHECK_CELL = re.compile(r'^check\("(\w+)", (my_\w+)\)$')
USE_CELL = re.compile(r'^(\w+) = use\("(\w+)", (my_\w+)\)$')
SOLUTION = re.compile(r"<details>\s*<summary>Solution</summary>\s*```python\n(.*?)```\s*</details>", re.S)


def exercises(path):
    """(name, skeleton cell, check or use cell, collapsed solution or None) for each exercise of the notebook:
    the check cells of its Exercises section and the use cells of its build pieces, in order."""
    cells = nbformat.read(path, as_version=4).cells
    found = []
    for i, cell in enumerate(cells):
        if cell.cell_type != "code":
            continue
        used = USE_CELL.match(cell.source.strip())
        if used:
            assert used.group(1) == used.group(2), f"{used.group(2)} is bound to another name"
            found.append((used.group(2), used.group(3), cells[i - 1], cell, None))
            continue
        match = CHECK_CELL.match(cell.source.strip())
        if match:
            solution = SOLUTION.search(cells[i + 1].source) if i + 1 < len(cells) else None
            found.append((match.group(1), match.group(2), cells[i - 1], cell, solution and solution.group(1)))
    return found


def shown(cell) -> str:
    """What a check or use cell showed: the check's result (text/plain) or what `use` printed."""
    return "".join(output.get("text", "") or output.get("data", {}).get("text/plain", "") for output in cell.outputs)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem[:2] for p in NOTEBOOKS])
def test_each_notebook_has_two_to_four_exercises_of_its_own(path):
    found = exercises(path)
    assert 2 <= len(found) <= 4, [name for name, *_ in found]
    assert all(EXERCISES[name].notebook == path.stem[:2] for name, *_ in found)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem[:2] for p in NOTEBOOKS])
def test_skeletons_are_committed_unsolved_and_their_checks_say_so(path):
    for name, function, skeleton, check_cell, _ in exercises(path):
        assert skeleton.source.startswith(f"def {function}(")
        assert "raise NotImplementedError" in skeleton.source
        first_line = shown(check_cell).splitlines()[0]
        assert first_line == "⏳ Not attempted yet: replace `raise NotImplementedError` with your code. " + (
            f"Start with: {EXERCISES[name].start}"
        ), name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem[:2] for p in NOTEBOOKS])
def test_every_collapsed_solution_passes_its_check(path):
    for name, function, _, check_cell, solution in exercises(path):
        if check_cell.source.startswith(f"{name} = use("):
            continue  # a build piece: solution(name) is its solution
        assert solution, f"{name}: no collapsed solution under its check cell"
        namespace = {"math": math, "torch": torch, "F": F, "bc": bc}
        exec(solution, namespace)
        result = check(name, namespace[function])
        assert result.passed, (name, result.message)


@pytest.mark.parametrize("name", sorted({name for p in NOTEBOOKS for name, *_ in exercises(p)}))
def test_start_hints_say_where_to_begin_not_the_code(name):
    spans = re.findall(r"`([^`]*)`", EXERCISES[name].start)
    assert not any("=" in span or "(" in span for span in spans), EXERCISES[name].start
