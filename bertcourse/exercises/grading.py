"""Grading learners' notebooks for an instructor: ``python -m bertcourse.exercises grade PATH...``.

Each notebook runs top to bottom in a fresh kernel of this interpreter (so ``bertcourse`` is the
one installed here), in its own folder, read into memory: the file itself is never written. Every
``check`` in that kernel appends its verdict to a file the grader names (``registry.VERDICTS_FILE_VARIABLE``
in the kernel's environment), so verdicts survive a kernel that hangs or dies later. The exercises a
notebook holds are the names its cells pass to ``check(...)``, so an exercise whose check cell never
ran is still listed ("not checked").

A learner's cell may fail, hang or kill the kernel; none of that stops the grading:

- a cell that raises is noted and the next cell runs (as "Run all" with errors allowed);
- a cell that runs past its time limit is interrupted, noted, and the next cell runs; once the
  notebook's whole time budget is spent, its remaining cells are skipped;
- a kernel that dies ends that notebook; the exercises not checked by then say so.

Grading runs the submitted code with the instructor's rights: run it in a sandbox (a container or
a throwaway virtual machine), never on a machine with secrets.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from . import registry
from .registry import EXERCISES

CORRECT_WORD = "correct"
_CHECK_CALL = re.compile(r"""\bcheck\(\s*["']([A-Za-z_][A-Za-z0-9_]*)["']""")
_STATUS_WORDS = {"not_attempted": "not attempted", "correct": CORRECT_WORD, "wrong": "wrong"}


@dataclasses.dataclass
class Row:
    """One exercise of one notebook: its status word and what to say about it."""

    exercise: str
    status: str  # "correct", "wrong", "not attempted" or "not checked"
    detail: str = ""


@dataclasses.dataclass
class NotebookGrade:
    path: Path
    rows: list[Row]
    notes: list[str]  # what went wrong while running the notebook, in order

    @property
    def all_correct(self) -> bool:
        return bool(self.rows) and all(row.status == CORRECT_WORD for row in self.rows)


def grade_notebook(path: Path, timeout: float = 600.0, cell_timeout: float = 120.0) -> NotebookGrade:
    """Run the notebook at ``path`` in a fresh kernel and grade every exercise it checks; never raises."""
    try:
        import nbformat

        notebook = nbformat.read(path, as_version=4)
    except Exception as error:
        return NotebookGrade(path, [], [f"could not be read ({type(error).__name__}: {_first_line(error)})"])
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    names = list(dict.fromkeys(name for cell in code for name in _CHECK_CALL.findall(cell.source)))
    results, notes = _run(notebook, path, timeout, cell_timeout)
    stopped = any("skipped" in note or "died" in note or "could not be run" in note for note in notes)
    rows = [_row(name, results.get(name), stopped) for name in names]
    rows += [_row(name, result, stopped) for name, result in results.items() if name not in names]
    if not rows:
        notes.append("no exercise found: no cell calls `check(...)`")
    return NotebookGrade(path, rows, notes)


def _row(name: str, result, stopped: bool) -> Row:
    if name not in EXERCISES:
        return Row(name, "not checked", "no exercise of this name in this version of bertcourse")
    if result is None:
        why = "the notebook stopped before its check cell" if stopped else "its check cell raised before checking"
        return Row(name, "not checked", why)
    status, mistake, message = result
    word = _STATUS_WORDS.get(status, status)
    if word == "wrong":
        if mistake:
            return Row(name, word, mistake)
        lines = message.removeprefix("❌ Wrong").lstrip(": ").split("\n")
        detail = lines[0] if len(lines) < 3 else f"{lines[0].removesuffix('.')}: {lines[2]}"
        return Row(name, word, detail if len(detail) <= 160 else detail[:157] + "...")
    return Row(name, word)


def _run(notebook, path: Path, timeout: float, cell_timeout: float) -> tuple[dict | None, list[str]]:
    """Execute the learner's cells; return the verdicts the kernel's checks recorded, and the notes."""
    from nbclient import NotebookClient

    notes: list[str] = []
    client = NotebookClient(
        notebook,
        km=_kernel_manager(),
        timeout=int(cell_timeout),
        allow_errors=True,
        interrupt_on_timeout=True,
        error_on_timeout={"ename": "CellTimeoutError", "evalue": "interrupted", "traceback": []},
        resources={"metadata": {"path": str(path.parent.resolve())}},
        record_timing=False,
    )
    with tempfile.TemporaryDirectory() as folder:
        verdicts = Path(folder) / "verdicts.jsonl"
        verdicts.touch()
        previous = os.environ.get(registry.VERDICTS_FILE_VARIABLE)
        os.environ[registry.VERDICTS_FILE_VARIABLE] = str(verdicts)  # the kernel inherits it
        try:
            _execute(client, notebook, timeout, cell_timeout, notes)
        finally:
            if previous is None:
                os.environ.pop(registry.VERDICTS_FILE_VARIABLE, None)
            else:
                os.environ[registry.VERDICTS_FILE_VARIABLE] = previous
        return _read_verdicts(verdicts), notes


def _execute(client, notebook, timeout: float, cell_timeout: float, notes: list[str]) -> None:
    from nbclient.exceptions import DeadKernelError

    deadline = time.monotonic() + timeout
    stuck = 0
    try:
        with client.setup_kernel(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
            for index, cell in enumerate(notebook.cells):
                if cell.cell_type != "code":
                    continue
                remaining = deadline - time.monotonic()
                if remaining < 1:
                    notes.append(f"its time budget of {timeout:g} s ran out before cell {index}; the rest was skipped")
                    return
                client.timeout = max(1, int(min(cell_timeout, remaining)))
                started = time.monotonic()
                client.execute_cell(cell, index)
                timed_out = time.monotonic() - started >= client.timeout
                notes.extend(_cell_notes(cell, index, timed_out, client.timeout))
                stuck = stuck + 1 if timed_out else 0
                if stuck == 2:
                    notes.append(f"the kernel stopped answering after cell {index - 1}; the rest was skipped")
                    return
    except DeadKernelError:
        notes.append("the kernel died (a cell ended the Python process, or ran out of memory)")
    except Exception as error:
        notes.append(f"could not be run to the end ({type(error).__name__}: {_first_line(error)})")


def _cell_notes(cell, index: int, timed_out: bool, limit: int) -> list[str]:
    if timed_out:
        return [f"cell {index} ran past {limit} s and was interrupted"]
    errors = [output for output in cell.get("outputs", []) if output.get("output_type") == "error"]
    if not errors:
        return []
    return [f"cell {index} raised {errors[0].get('ename')}: {_first_line(errors[0].get('evalue', ''))}"]


def _read_verdicts(path: Path) -> dict:
    """The latest verdict per exercise, from the lines the kernel's ``check`` calls appended."""
    verdicts = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
            verdicts[record["exercise"]] = (record["status"], record["mistake"], record["message"])
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a kernel that died while writing
    return verdicts


def _kernel_manager():
    """A kernel manager whose every kernel is this interpreter's ipykernel (where bertcourse is installed)."""
    from ipykernel.kernelspec import RESOURCES, get_kernel_dict
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager

    class ThisInterpreter(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            return KernelSpec(resource_dir=RESOURCES, **get_kernel_dict())

    return AsyncKernelManager(kernel_name="python3", kernel_spec_manager=ThisInterpreter())


def report(grades: list[NotebookGrade]) -> str:
    """The table an instructor reads: one row per notebook and exercise, then the notes and a total."""
    table = []
    for grade in grades:
        name = grade.path.name
        for row in grade.rows:
            table.append((name, row.exercise, row.status + (f": {row.detail}" if row.detail else "")))
        for note in grade.notes:
            table.append((name, "-", f"note: {note}"))
    widths = [max([len(header), *(len(r[i]) for r in table)]) for i, header in enumerate(("notebook", "exercise"))]
    lines = [f"{'notebook'.ljust(widths[0])}  {'exercise'.ljust(widths[1])}  status"]
    lines += [f"{a.ljust(widths[0])}  {b.ljust(widths[1])}  {c}" for a, b, c in table]
    rows = [row for grade in grades for row in grade.rows]
    correct = sum(row.status == CORRECT_WORD for row in rows)
    lines.append(f"{correct} of {len(rows)} exercises correct in {len(grades)} notebook{'s' * (len(grades) != 1)}.")
    return "\n".join(lines)


def _first_line(error) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else "(no message)")[:200]
