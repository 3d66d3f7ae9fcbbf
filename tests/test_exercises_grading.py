"""Grading learners' notebooks: one row per notebook and exercise, a hanging cell or a dying kernel
reported and never fatal, the file never written, and an exit code that says whether all is correct."""

import contextlib
import io

import nbformat
import pytest

from bertcourse.exercises import check, registry
from bertcourse.exercises.__main__ import main

CELL_TIMEOUT = "20"  # the first cell imports torch, which takes seconds on a busy machine

IMPORTS = "import time\nimport torch\nimport bertcourse as bc\nfrom bertcourse.exercises import check"
CORRECT = (
    "def my_causal_mask(n):\n"
    "    return torch.ones(n, n, dtype=torch.bool).tril()\n\n"
    "check('causal_mask', my_causal_mask)"
)
WRONG = (
    "def my_padding_mask(lengths, max_len=None):\n"
    "    max_len = int(lengths.max()) if max_len is None else max_len\n"
    "    return torch.arange(max_len)[None, :] >= lengths[:, None]\n\n"
    "check('padding_mask', my_padding_mask)"
)
NOT_ATTEMPTED = (
    "def my_layer_norm(x, weight, bias, eps=1e-12):\n"
    "    raise NotImplementedError\n\n"
    "check('layer_norm', my_layer_norm)"
)
HANGS = "while True:\n    time.sleep(0.1)"
RAISES = "1 / 0"
SPLIT = "check('split_heads', lambda x, h: x.view(*x.shape[:-1], h, -1).transpose(-3, -2))"
UNFORESEEN = "check('merge_heads', lambda x: x)"
NEVER_REACHED = "check('merge_heads', lambda x: bc.merge_heads(x))"


def notebook(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A learner's notebook")]
    nb.cells += [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(nb, path)
    return path


def rows(output):
    return [line.split(None, 2) for line in output.strip().split("\n")[1:-1]]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("class")
    learner = notebook(
        folder / "learner.ipynb", IMPORTS, CORRECT, WRONG, HANGS, NOT_ATTEMPTED, RAISES, SPLIT, UNFORESEEN
    )
    dies = notebook(folder / "dies.ipynb", IMPORTS, CORRECT, "import os\nos._exit(3)", NEVER_REACHED)
    before = {path: (path.read_bytes(), path.stat().st_mtime_ns) for path in (learner, dies)}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["grade", str(learner), str(dies), "--cell-timeout", CELL_TIMEOUT])
    return code, out.getvalue(), before


def test_one_row_per_notebook_and_exercise_with_its_status(graded):
    _, output, _ = graded
    table = rows(output)
    assert output.split("\n")[0].split() == ["notebook", "exercise", "status"]
    assert table[:7] == [
        ["learner.ipynb", "causal_mask", "correct"],
        ["learner.ipynb", "padding_mask", "wrong: the mask inverted (True = padding)"],
        ["learner.ipynb", "layer_norm", "not attempted"],
        ["learner.ipynb", "split_heads", "correct"],
        [
            "learner.ipynb",
            "merge_heads",
            "wrong: on test case 1 of 3 (batch of 2, 3 heads, 5 tokens, d_head 4): Your output has shape (2, 3, 5, 4); "
            "expected (2, 5, 12). The same number of entries in another...",
        ],
        ["learner.ipynb", "-", f"note: cell 4 ran past {CELL_TIMEOUT} s and was interrupted"],
        ["learner.ipynb", "-", "note: cell 6 raised ZeroDivisionError: division by zero"],
    ]
    assert output.strip().endswith("3 of 7 exercises correct in 2 notebooks.")


def test_a_kernel_that_dies_is_reported_and_the_exercises_it_never_reached_say_so(graded):
    _, output, _ = graded
    table = [row for row in rows(output) if row[0] == "dies.ipynb"]
    assert table == [
        ["dies.ipynb", "causal_mask", "correct"],
        ["dies.ipynb", "merge_heads", "not checked: the notebook stopped before its check cell"],
        ["dies.ipynb", "-", "note: the kernel died (a cell ended the Python process, or ran out of memory)"],
    ]


def test_the_exit_code_says_whether_every_exercise_is_correct(graded, tmp_path, capsys):
    code, _, _ = graded
    assert code == 1
    good = notebook(tmp_path / "good.ipynb", IMPORTS, CORRECT, SPLIT)
    assert main(["grade", str(good), "--cell-timeout", CELL_TIMEOUT]) == 0
    assert capsys.readouterr().out.strip().endswith("2 of 2 exercises correct in 1 notebook.")


def test_the_notebooks_are_never_written(graded):
    _, _, before = graded
    for path, (content, mtime) in before.items():
        assert (path.read_bytes(), path.stat().st_mtime_ns) == (content, mtime)


def test_an_unreadable_notebook_is_a_row_not_a_crash(tmp_path, capsys):
    broken = tmp_path / "broken.ipynb"
    broken.write_text("{not json")
    assert main(["grade", str(broken)]) == 1
    assert "broken.ipynb  -         note: could not be read (" in capsys.readouterr().out


def test_every_check_appends_its_verdict_when_the_grader_asks(tmp_path, monkeypatch):
    target = tmp_path / "verdicts.jsonl"
    monkeypatch.setenv(registry.VERDICTS_FILE_VARIABLE, str(target))
    check("causal_mask", lambda n: __import__("torch").ones(n, n, dtype=__import__("torch").bool).tril())
    assert '"exercise": "causal_mask", "status": "correct"' in target.read_text()
