"""Notebook 13 with a learner's ``my_bert.py``: right pieces written differently, and each piece wrong.

The committed notebook runs with the untouched skeleton, every piece the reference, so nbval never sees a
learner's file. Here ``my_bert.py`` is written from ``tests/notebook_answers.py``:

- every piece right (``RIGHT``: einsum, ``torch.var_mean``, ``torch.nn.functional``...): notebook 13 runs to its
  end, its table says twelve pieces of twelve are the learner's and correct, and its report matches;
- every piece wrong at once (the first realistic mistake of ``WRONG`` for each): the notebook still runs to its
  end, no cell stops on the learner's pieces;
- one piece wrong, the eleven others right, for each piece: ``compare`` names the wrong piece at its own step,
  or, where the batch cannot show it (an MLM head on MiniLM, which has none), says that the piece fails its own
  check although every step matches. So do three mistakes an earlier batch hid or blamed on another piece: two
  LayerNorms swapped by ``hf_to_ours``, a wrong ``layer_norm`` called inside the learner's ``bert_embeddings``,
  and a ``merge_heads`` that confuses the head and sequence axes.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import execute_notebooks
import nbformat
import pytest
import transformers
from notebook_answers import RIGHT, WRONG

import bertcourse as bc
from bertcourse.capstone import PIECES, compare, load_pieces, skeleton
from bertcourse.pretrained import default_weights_dir

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "13_your_bert.ipynb"


def _as_piece(name: str, source: str) -> str:
    """An answer of ``notebook_answers`` (it defines ``my_<name>``) as the function of ``my_bert.py``, where the
    pieces it imports from the package (as notebook 02's answers take 03's ``masked_softmax``) are the file's own."""
    lines = [line for line in source.splitlines() if not re.fullmatch(r"from bertcourse import \w+", line)]
    return "\n".join(lines).replace(f"def my_{name}(", f"def {name}(") + "\n"


def learner_file(wrong: dict[str, str] | None = None) -> str:
    """``my_bert.py`` with every piece answered right, except those of ``wrong`` ({piece: source})."""
    wrong = wrong or {}
    answers = [_as_piece(name, wrong.get(name, RIGHT[name])) for name in PIECES]
    return skeleton() + "\n\n# --- the learner's answers, replacing the skeleton's functions\n\n" + "\n\n".join(answers)


def first_mistakes() -> dict[str, str]:
    return {name: WRONG[name][0][1] for name in PIECES}


def _run_notebook(folder: Path, my_bert: str) -> nbformat.NotebookNode:
    shutil.copy(NOTEBOOK, folder / NOTEBOOK.name)
    (folder / "my_bert.py").write_text(my_bert)
    nb = nbformat.read(folder / NOTEBOOK.name, as_version=4)
    execute_notebooks.run(nb, folder)  # raises at the first cell that raises
    return nb


def _text(nb: nbformat.NotebookNode, marker: str) -> str:
    """Every text output of the first code cell whose source holds ``marker``."""
    cell = next(cell for cell in nb.cells if cell.cell_type == "code" and marker in cell.source)
    parts = []
    for output in cell.outputs:
        parts.append(output.get("text", "") or output.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def test_every_piece_right_the_notebook_runs_on_them(tmp_path):
    nb = _run_notebook(tmp_path, learner_file())
    table = _text(nb, "pieces.table()")
    assert table.startswith("12 of 12 pieces are yours"), table
    assert table.count("✅ correct") == 12, table
    report = _text(nb, "report = compare(pieces, hf, batch)")
    assert report.startswith("Every step matches"), report
    assert "section 4 runs the pieces of your table" in _text(nb, "working = pieces if report.matches")


def test_every_piece_wrong_the_notebook_still_runs_to_its_end(tmp_path):
    nb = _run_notebook(tmp_path, learner_file(first_mistakes()))
    table = _text(nb, "pieces.table()")
    assert table.startswith("12 of 12 pieces are yours") and "✅" not in table, table
    report = _text(nb, "report = compare(pieces, hf, batch)")
    assert report.startswith("First difference: embeddings: LayerNorm") and "your `layer_norm`" in report, report
    assert "the package's pieces until yours pass" in _text(nb, "working = pieces if report.matches")


@pytest.fixture(scope="module")
def setting():
    _, tokenizer = bc.load_pretrained()
    sentences = ["The cat sat on the mat.", "A dog slept.", "The children played football in the park after school."]
    batch = tokenizer(sentences, ["It purred.", "It was tired.", "They won."])  # as notebook 13's batch
    hf = transformers.BertModel.from_pretrained(default_weights_dir(), attn_implementation="eager").eval()
    return hf, batch


def _report(tmp_path, setting, wrong: dict[str, str]):
    path = tmp_path / "my_bert.py"
    path.write_text(learner_file(wrong))
    pieces = load_pieces(path, record=False)
    assert pieces.mine == set(PIECES) and pieces.problem is None
    return compare(pieces, *setting)


@pytest.mark.parametrize("piece", PIECES)
def test_one_wrong_piece_among_right_ones_is_named(tmp_path, setting, piece):
    report = _report(tmp_path, setting, {piece: first_mistakes()[piece]})
    if report.matches:  # the batch cannot show it: the report must still name the piece
        assert f"But your `{piece}` fails its own check" in report.text, report.text
    else:
        assert report.piece == piece, report.text
        assert f"It is your `{piece}`. Its check, on its own:\n❌" in report.text, report.text


HIDDEN = {
    "hf_to_ours": (
        """\
import bertcourse.weights


def my_hf_to_ours(key, prefixed=False):
    name = bertcourse.weights.hf_to_ours(key, prefixed)
    if name is not None and "attention_norm" in name:
        return name.replace("attention_norm", "output_norm")  # the two LayerNorms of a layer swapped
    if name is not None and "output_norm" in name:
        return name.replace("output_norm", "attention_norm")
    return name
""",
        "weights renamed",
    ),
    "layer_norm": (
        """\
def my_layer_norm(x, weight, bias, eps=1e-12):
    return weight * (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + eps) + bias
""",
        "embeddings: LayerNorm",
    ),
    "merge_heads": (
        """\
def my_merge_heads(x):
    batch, seq, heads, d_head = x.shape  # the axes read in the wrong order: heads and seq swapped
    return x.transpose(1, 2).reshape(batch, seq, heads * d_head)
""",
        "layer 0: heads merged",
    ),
}


@pytest.mark.parametrize("piece", sorted(HIDDEN))
def test_mistakes_an_earlier_batch_hid_or_blamed_elsewhere_are_named(tmp_path, setting, piece):
    source, step = HIDDEN[piece]
    report = _report(tmp_path, setting, {piece: source})
    assert (report.step, report.piece) == (step, piece), report.text
