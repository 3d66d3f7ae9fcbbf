"""The Exercises sections of notebooks 01-07 as a learner meets them: 2-4 exercises each, every
skeleton committed unsolved (its check cell shows "not attempted"), every collapsed solution judged
correct by its check, and start hints that say where to begin without handing out the code."""

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
SOLUTION = re.compile(r"<details>\s*<summary>Solution</summary>\s*```python\n(.*?)```\s*</details>", re.S)


def exercises(path):
    """(name, skeleton cell, check cell, solution code) for each exercise of the notebook's Exercises section."""
    cells = nbformat.read(path, as_version=4).cells
    start = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("## Exercises"))
    end = next(i for i, c in enumerate(cells) if i > start and c.source.startswith("## Summary"))
    found = []
    for i in range(start, end):
        match = CHECK_CELL.match(cells[i].source.strip()) if cells[i].cell_type == "code" else None
        if match:
            solution = SOLUTION.search(cells[i + 1].source)
            found.append((match.group(1), match.group(2), cells[i - 1], cells[i], solution and solution.group(1)))
    return found


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
        (output,) = check_cell.outputs
        text = output["data"]["text/plain"]
        assert text == "⏳ Not attempted yet: replace `raise NotImplementedError` with your code. " + (
            f"Start with: {EXERCISES[name].start}"
        ), name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem[:2] for p in NOTEBOOKS])
def test_every_collapsed_solution_passes_its_check(path):
    for name, function, _, _, solution in exercises(path):
        assert solution, f"{name}: no collapsed solution under its check cell"
        namespace = {"math": math, "torch": torch, "F": F, "bc": bc}
        exec(solution, namespace)
        result = check(name, namespace[function])
        assert result.passed, (name, result.message)


@pytest.mark.parametrize("name", sorted({name for p in NOTEBOOKS for name, *_ in exercises(p)}))
def test_start_hints_say_where_to_begin_not_the_code(name):
    spans = re.findall(r"`([^`]*)`", EXERCISES[name].start)
    assert not any("=" in span or "(" in span for span in spans), EXERCISES[name].start
