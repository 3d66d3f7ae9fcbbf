"""Notebooks only get shorter: markdown words and code lines only go down (COURSE.md section 3).

For each notebook, four counts: markdown words (whitespace-split words of the markdown cells' source) and code
lines (non-blank lines of the code cells), before the first markdown cell that is a "Going deeper" heading (the
core path, read in one sitting) and in all. ``tests/notebook_size.json`` holds each count's ceiling; a count above
its ceiling fails. A count below it passes silently: lower the ceilings with

    python tests/test_notebook_size.py --update

which rewrites the JSON with today's counts where they are lower, never higher (and adds a notebook that is
not in it yet). Notebooks in ``REBUILT`` must also meet section 3's limits: markdown words before "Going
deeper" and in all, cells before "Going deeper".
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CEILINGS = Path(__file__).resolve().with_name("notebook_size.json")
COUNTS = ("core_markdown_words", "core_code_lines", "all_markdown_words", "all_code_lines")
GOING_DEEPER = re.compile(r"#+\s*Going deeper", re.IGNORECASE)
# Notebooks rebuilt to section 3's shape, by number ("06"): they meet its limits below.
REBUILT: set[str] = {"01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12", "13"}
# Section 3: (markdown words before "Going deeper", markdown words in all, cells before "Going deeper");
# None where the course sets no limit.
LIMITS = {
    **dict.fromkeys(("01", "02", "03", "04", "05", "06", "07"), (2500, 3500, 50)),
    **dict.fromkeys(("08", "09", "10", "11", "12"), (3500, 4500, 60)),
    "13": (3000, None, None),
}


def core_length(cells: list[nbformat.NotebookNode]) -> int:
    """How many cells come before the first markdown cell that starts with a "Going deeper" heading."""
    for index, cell in enumerate(cells):
        if cell.cell_type == "markdown" and GOING_DEEPER.match(cell.source.strip()):
            return index
    return len(cells)


def markdown_words(cells) -> int:
    return sum(len(cell.source.split()) for cell in cells if cell.cell_type == "markdown")


def code_lines(cells) -> int:
    return sum(1 for cell in cells if cell.cell_type == "code" for line in cell.source.splitlines() if line.strip())


def measure(path: Path) -> dict[str, int]:
    """The four counts of a notebook, plus its cells before "Going deeper" (``core_cells``)."""
    cells = nbformat.read(path, as_version=4).cells
    core = cells[: core_length(cells)]
    return {
        "core_markdown_words": markdown_words(core),
        "core_code_lines": code_lines(core),
        "all_markdown_words": markdown_words(cells),
        "all_code_lines": code_lines(cells),
        "core_cells": len(core),
    }


def read_ceilings() -> dict[str, dict[str, int]]:
    return json.loads(CEILINGS.read_text())


def update() -> None:
    """Lower each ceiling to today's count where that is lower; add notebooks that have none. Never raises one."""
    ceilings = read_ceilings() if CEILINGS.exists() else {}
    for path in NOTEBOOKS:
        now = measure(path)
        old = ceilings.get(path.name, {})
        ceilings[path.name] = {count: min(now[count], old.get(count, now[count])) for count in COUNTS}
        for count in COUNTS:
            if now[count] < old.get(count, now[count]):
                print(f"{path.name}: {count} {old[count]} -> {now[count]}")
    CEILINGS.write_text(json.dumps(dict(sorted(ceilings.items())), indent=2) + "\n")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_words_and_code_lines_do_not_grow(path: Path) -> None:
    ceilings = read_ceilings()
    assert path.name in ceilings, f"{path.name} has no ceilings: run python tests/test_notebook_size.py --update"
    now = measure(path)
    grown = [
        f"{path.name}: {count} is {now[count]}, its ceiling {ceilings[path.name][count]}"
        for count in COUNTS
        if now[count] > ceilings[path.name][count]
    ]
    assert not grown, "; ".join(grown) + ". Words and code lines only go down: cut, do not add."


def test_rebuilt_notebooks_meet_the_course_limits() -> None:
    if not REBUILT:
        pytest.skip("no notebook is marked rebuilt yet (REBUILT in tests/test_notebook_size.py)")
    found = {path.stem[:2]: path for path in NOTEBOOKS}
    problems = []
    for number in sorted(REBUILT):
        assert number in found, f"REBUILT names notebook {number}, which does not exist"
        now = measure(found[number])
        core_words, all_words, core_cells = LIMITS[number]
        for what, value, limit in (
            ("markdown words before Going deeper", now["core_markdown_words"], core_words),
            ("markdown words in all", now["all_markdown_words"], all_words),
            ("cells before Going deeper", now["core_cells"], core_cells),
        ):
            if limit is not None and value > limit:
                problems.append(f"{found[number].name}: {value} {what}, at most {limit} (COURSE.md section 3)")
    assert not problems, "\n".join(problems)


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_notebook_size.py --update  (lowers tests/notebook_size.json's ceilings)")
    update()
