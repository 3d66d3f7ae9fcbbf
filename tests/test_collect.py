"""collect(): the learner's pieces from their saved notebooks (and Colab's "Copy of ..." copies), my_bert.py or
pasted source, each checked; a skeleton is no answer; a cell that does not run is said and is the reference; a
piece that calls another by its plain name gets the learner's; the report names files only; drive_folder()
mounts Drive in Colab only; bad input gets clear errors."""

import importlib
import os
import shutil
import sys
import types
from pathlib import Path

import nbformat
import pytest
import torch

import bertcourse as bc
from bertcourse.capstone import PIECES, Collected, assemble, collect, drive_folder, skeleton
from bertcourse.exercises import registry

collect_module = importlib.import_module("bertcourse.capstone.collect")  # the attribute is the function
NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NB01, NB02, NB05, NB06 = (
    "01_qkv_projections.ipynb",
    "02_scaled_dot_product_attention.ipynb",
    "05_multi_head_attention.ipynb",
    "06_layernorm_residual_ffn.ipynb",
)

SETUP = """import sys

if "google.colab" in sys.modules:
    %pip install -q bertcourse

import torch
import torch.nn.functional as F
import bertcourse as bc
"""

LAYER_NORM = """def my_layer_norm(x, weight, bias, eps=1e-12):
    mean = x.mean(dim=-1, keepdim=True)
    variance = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(variance + eps) * weight + bias
"""

LAYER_NORM_UNBIASED = """def my_layer_norm(x, weight, bias, eps=1e-12):
    mean = x.mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(x.var(dim=-1, keepdim=True) + eps) * weight + bias
"""

FEED_FORWARD_RELU = """def my_feed_forward(x, w1, b1, w2, b2):
    return F.relu(x @ w1 + b1) @ w2 + b2

my_feed_forward(torch.ones(2, 4), torch.ones(4, 8), torch.zeros(8), torch.ones(8, 4), torch.zeros(4))
"""

POST_LN_SKELETON = """\
def my_post_ln_layer(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    '''h = LN1(x + attention(x)); LN2(h + feed_forward(h)).'''
    raise NotImplementedError  # your code goes here
"""

POST_LN = """def my_post_ln_layer(x, attention, feed_forward, ln1_weight, ln1_bias, ln2_weight, ln2_bias, eps=1e-12):
    h = layer_norm(x + attention(x), ln1_weight, ln1_bias, eps)
    return layer_norm(h + feed_forward(h), ln2_weight, ln2_bias, eps)
"""

SPLIT_MERGE = """%%time
def my_split_heads(x, num_heads):
    batch, seq, d_model = x.shape
    return x.view(batch, seq, num_heads, d_model // num_heads).transpose(1, 2)

def my_merge_heads(x):
    batch, heads, seq, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, seq, heads * d_head)
"""


def notebook(path: Path, *sources: str) -> Path:
    """A saved notebook: a title, the setup cell, then one code cell per source (cell 3 is the first of them)."""
    cells = [nbformat.v4.new_markdown_cell("# A notebook"), nbformat.v4.new_code_cell(SETUP)]
    cells += [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return path


def lines_of(collected: Collected) -> dict:
    """Each piece's line of the report, by piece, its columns split on runs of spaces."""
    rows = {}
    for line in repr(collected).splitlines()[1:]:
        columns = [column.strip() for column in line.split("  ") if column.strip()]
        if len(columns) >= 4 and columns[1] in PIECES:
            rows[columns[1]] = columns
    return rows


@pytest.fixture
def learner(tmp_path):
    """A learner's folder: 06 solved in part, 05 only as a Drive copy, 01 with a cell that does not parse."""
    notebook(tmp_path / NB06, "x = torch.ones(3)", LAYER_NORM, FEED_FORWARD_RELU, POST_LN_SKELETON)
    notebook(tmp_path / NB05, "def my_split_heads(x, num_heads):\n    raise NotImplementedError\n")
    copy = notebook(tmp_path / f"Copy of {NB05}", "!nvidia-smi", SPLIT_MERGE)
    os.utime(copy, ns=(2_000_000_000 * 10**9, 2_000_000_000 * 10**9))  # saved after the original
    notebook(tmp_path / NB01, "def my_attention_scores(q, k):\n    return q @ k.transpose(-2, -1\n")
    return tmp_path


def test_the_learners_notebooks_are_read_checked_and_said(learner):
    collected = collect(learner)
    assert collected.mine == {"layer_norm", "feed_forward", "split_heads", "merge_heads"}
    assert collected.verdicts["layer_norm"].passed and collected.verdicts["split_heads"].passed
    assert collected.verdicts["feed_forward"].mistake == "ReLU instead of GELU"
    assert "post_ln_layer" not in collected.verdicts  # a skeleton is not checked: it is no answer
    for name in PIECES:
        reference = registry.EXERCISES[name].reference
        assert (collected[name] is reference) == (name not in collected.mine)
    rows = lines_of(collected)
    assert rows["layer_norm"] == ["06", "layer_norm", NB06, "yours", "✅ correct"]
    assert rows["feed_forward"] == ["06", "feed_forward", NB06, "yours", "❌ wrong (ReLU instead of GELU)"]
    assert rows["post_ln_layer"] == ["06", "post_ln_layer", f"not written yet in {NB06}", "reference"]
    assert rows["split_heads"][2] == rows["merge_heads"][2] == f"Copy of {NB05}"
    assert rows["attention_scores"] == ["01", "attention_scores", f"{NB01}, cell 3: did not run", "reference"]
    assert rows["mlm_head"] == ["07", "mlm_head", "not found", "reference"]
    assert repr(collected).splitlines()[0] == "4 of 12 pieces are yours; the other 8 are the package's reference."
    assert collected.notes == (  # in the order of the notebooks
        f"{NB01}, cell 3 (def my_attention_scores) did not run: SyntaxError: '(' was never closed (line 2). "
        "The reference is used for attention_scores.",
        f"2 files here are {NB05} or a copy of it: Copy of {NB05}, saved last, is read.",
    )
    markdown = collected._repr_markdown_()
    assert f"| [06]({NB06}) | `layer_norm` | {NB06} | yours | ✅ correct |" in markdown
    assert str(learner) not in repr(collected) + markdown  # file names only: nbval compares the output
    assert repr(collect(learner)) == repr(collected)  # and the same every time


def test_a_piece_that_calls_another_by_its_plain_name_gets_the_learners(tmp_path):
    notebook(tmp_path / NB06, LAYER_NORM_UNBIASED, POST_LN)
    collected = collect(tmp_path)
    assert collected["post_ln_layer"].__globals__["layer_norm"] is collected["layer_norm"]
    assert collected.verdicts["layer_norm"].mistake == "the unbiased variance"
    assert not collected.verdicts["post_ln_layer"].passed  # it runs their wrong layer_norm, as in their notebook

    notebook(tmp_path / NB06, POST_LN)
    collected = collect(tmp_path)  # their layer_norm is not written: post_ln_layer calls the reference
    assert collected["post_ln_layer"].__globals__["layer_norm"] is bc.layer_norm
    assert collected.verdicts["post_ln_layer"].passed


def test_only_the_defining_cells_run_and_their_trial_lines_do_not(tmp_path, capsys):
    trial = LAYER_NORM + "print('trial')\nassert False\nlayer_norm = use('layer_norm', my_layer_norm)\n"
    notebook(tmp_path / NB06, "raise RuntimeError('another cell')", "def my_layer_norm(x):\n    return x\n", trial)
    collected = collect(tmp_path)
    assert collected.verdicts["layer_norm"].passed  # the last cell that writes it wins
    assert collected.notes == ()
    assert "trial" not in capsys.readouterr().out

    notebook(tmp_path / NB06, LAYER_NORM + "y = my_layer_norm(x, w, b)\n")  # x is the notebook's, not here
    collected = collect(tmp_path)
    assert collected["layer_norm"] is bc.layer_norm and "layer_norm" not in collected.mine
    assert collected.notes == (
        f"{NB06}, cell 3 (def my_layer_norm) did not run: NameError: name 'x' is not defined (line 5). "
        "The reference is used for layer_norm.",
    )
    assert lines_of(collected)["layer_norm"][2] == f"{NB06}, cell 3: did not run"


def test_my_bert_py_comes_before_the_notebooks_and_pasted_before_both(tmp_path):
    notebook(tmp_path / NB06, LAYER_NORM, FEED_FORWARD_RELU)
    written = skeleton().replace(
        "def feed_forward(x, w1, b1, w2, b2):",
        "def feed_forward(x, w1, b1, w2, b2):\n    return F.gelu(x @ w1 + b1) @ w2 + b2\n\n\ndef _unused(x):",
    )
    (tmp_path / "my_bert.py").write_text(written, encoding="utf-8")
    collected = collect(tmp_path)
    assert collected.sources["feed_forward"] == "my_bert.py" and collected.verdicts["feed_forward"].passed
    assert collected.sources["layer_norm"] == NB06  # my_bert.py's layer_norm is the skeleton: it hides nothing
    assert collected.sources["mlm_head"] == "not written yet in my_bert.py"

    collected = collect(tmp_path, pasted=LAYER_NORM_UNBIASED)
    assert collected.sources["layer_norm"] == "pasted"
    assert collected.verdicts["layer_norm"].mistake == "the unbiased variance"
    assert collected.sources["feed_forward"] == "my_bert.py"

    def my_layer_norm(x, weight, bias, eps=1e-12):
        raise NotImplementedError

    pasted = {"my_layer_norm": my_layer_norm, "feed_forward": bc.feed_forward, "merge_heads": lambda x: x}
    collected = collect(tmp_path, pasted=pasted)  # a skeleton and a reference are no answer
    assert collected.sources["layer_norm"] == NB06 and collected.sources["feed_forward"] == "my_bert.py"
    assert collected.sources["merge_heads"] == "pasted" and not collected.verdicts["merge_heads"].passed


def test_nothing_found_is_the_reference_said_so_and_the_model_still_assembles(tmp_path):
    collected = collect(tmp_path)
    assert collected.mine == frozenset() and collected.verdicts == {}
    assert set(collected.sources.values()) == {"not found"}
    assert collected.notes == (collect_module.NOTHING_FOUND,)
    assert repr(collected).splitlines()[-1] == collect_module.NOTHING_FOUND
    assert isinstance(assemble(collected), torch.nn.Module)


def test_the_committed_notebooks_are_unsolved_and_collect_reads_them(tmp_path):
    for path in NOTEBOOKS.glob("0[1-7]_*.ipynb"):
        shutil.copy(path, tmp_path / path.name)
    collected = collect(tmp_path)
    assert collected.mine == frozenset()
    assert collected.notes == (collect_module.NOTHING_FOUND,)  # no cell failed, no copy, no unreadable file


def test_a_file_that_is_not_a_notebook_is_said_and_skipped(tmp_path):
    (tmp_path / NB02).write_text("{ not json", encoding="utf-8")
    collected = collect(tmp_path, pasted="def my_merge_heads(x):\n    return x.flatten(-2)\n")
    assert collected.notes == (f"{NB02} could not be read as a notebook (JSONDecodeError), so it was skipped.",)


def test_pasted_source_that_does_not_run_is_said(tmp_path):
    collected = collect(tmp_path, pasted="def my_layer_norm(x, weight, bias, eps=1e-12):\n    return x +\n")
    assert collected["layer_norm"] is bc.layer_norm
    assert collected.sources["layer_norm"] == "pasted: did not run"
    assert collected.notes == (
        "The pasted source did not run: SyntaxError: invalid syntax (line 2). The reference is used for layer_norm.",
    )


def test_drive_folder_mounts_drive_in_colab(tmp_path, monkeypatch):
    mounted = []

    def mount(path):
        mounted.append(path)
        Path(path, "MyDrive", "Colab Notebooks").mkdir(parents=True)

    colab = types.ModuleType("google.colab")
    colab.drive = types.SimpleNamespace(mount=mount)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setattr(collect_module, "DRIVE_MOUNT_POINT", tmp_path / "drive")
    folder = drive_folder()
    assert mounted == [str(tmp_path / "drive")]
    assert folder == tmp_path / "drive" / "MyDrive" / "Colab Notebooks"
    notebook(folder / f"Copy of {NB06}", LAYER_NORM)
    assert collect(folder).sources["layer_norm"] == f"Copy of {NB06}"


def test_drive_folder_outside_colab_and_without_the_folder_says_so(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "google.colab", None)  # import google.colab fails, as outside Colab
    with pytest.raises(RuntimeError, match="for Google Colab only"):
        drive_folder()
    colab = types.ModuleType("google.colab")
    colab.drive = types.SimpleNamespace(mount=lambda path: None)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setattr(collect_module, "DRIVE_MOUNT_POINT", tmp_path / "drive")
    with pytest.raises(FileNotFoundError, match="no 'Colab Notebooks' folder"):
        drive_folder()


def test_bad_input_gets_clear_errors(tmp_path):
    with pytest.raises(TypeError, match=r"`folder` must be a folder path \(str or Path\) or None, got int 3"):
        collect(3)
    with pytest.raises(FileNotFoundError, match="`folder` 'missing' is not a folder"):
        collect("missing")
    with pytest.raises(TypeError, match=r"`pasted` must be Python source \(a str .*\) or a dict .*, got list"):
        collect(tmp_path, pasted=[bc.layer_norm])
    with pytest.raises(ValueError, match="`pasted` has a key 'my_layernorm', which is no piece; the pieces are: "):
        collect(tmp_path, pasted={"my_layernorm": bc.layer_norm})
    with pytest.raises(TypeError, match=r"`pasted\['layer_norm'\]` must be a function, got str"):
        collect(tmp_path, pasted={"layer_norm": "def my_layer_norm(x): ..."})


def test_a_piece_tried_in_place_keeps_the_table_and_says_so(tmp_path):
    collected = collect(tmp_path)
    tried = collected.replaced(feed_forward=bc.feed_forward, merge_heads=lambda x: x)
    assert isinstance(tried, Collected) and tried.notes == collected.notes
    assert tried.sources["feed_forward"] == tried.sources["merge_heads"] == collect_module.TRIED_IN_PLACE
    assert tried.sources["layer_norm"] == "not found" and collected.sources["feed_forward"] == "not found"
    assert "tried in place" in repr(tried) and not tried.verdicts["merge_heads"].passed
