"""``collect()``: the learner's pieces, gathered from where they wrote them; every piece not found is the reference.

Notebook 07 assembles BERT from the twelve pieces the learner wrote in notebooks 01-07, and notebook 13 does
again. Each piece sits in the notebook that asked for it, in a cell that defines ``my_<piece>``; ``collect``
reads it there, so that nobody copies code by hand. Where the notebooks are depends on where they run:

- JupyterLab, Binder: the notebooks are saved in one folder, the current one: ``collect()``.
- Colab: each notebook runs on a machine of its own, and "File > Save a copy in Drive" saves it in Drive's
  "Colab Notebooks" folder: ``collect(drive_folder())``, in one opt-in cell that mounts Drive. Or the
  learner pastes their functions: ``collect(pasted=source)``.

For each piece the first of these sources that has it *written* wins; a function whose body is still the
skeleton's ``raise NotImplementedError`` is no answer, so it never hides an answer further down:

1. ``pasted``, what the learner hands over now, on purpose: a string of their ``def my_...`` functions, or
   a dict of functions by piece name (07's own pieces, from its kernel);
2. ``my_bert.py`` in the folder: notebook 13's file (``start()``), written after the notebooks;
3. the piece's notebook in the folder (``06_layernorm_residual_ffn.ipynb``, or a copy that Colab or a browser
   named ``Copy of 06_layernorm_residual_ffn.ipynb`` or ``06_layernorm_residual_ffn (1).ipynb``: the most
   recently saved of them).

Of a notebook, only the cells that define the pieces run, never the others, in a namespace like the setup
cell's (``torch``, ``F``, ``nn``, ``math``, ``bc``) where every piece has its plain name: the learner's own
where ``collect`` found it, else the reference, so that a ``post_ln_layer`` that calls ``layer_norm`` gets
theirs, as in their notebook. IPython's ``%`` and ``!`` lines are left out, and so are bare expressions and
``assert`` lines (a trial call, a print: they show, they do not define). A cell that fails to run is said,
and its piece is the reference.

``load_pieces`` then checks each function found. The result, ``Collected``, is the ``Pieces`` the model is
assembled from, and shows one line per piece: where it came from (or "not found") and its check's verdict.
It names files, never a folder or a time: nbval compares the output.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import inspect
import io
import json
import linecache
import math
import os
import re
import textwrap
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import bertcourse

from .._validation import describe
from ..exercises import registry  # by module, read at call time: the registry imports this package's references
from ..exercises.records import Listing
from .pieces import NOTEBOOK_FILES, PIECES, Pieces, load_pieces, verdict_words
from .skeleton import FILE_NAME

PASTED = "pasted"
NOT_FOUND = "not found"
TRIED_IN_PLACE = "tried in place"
DRIVE_MOUNT_POINT = Path("/content/drive")  # where Colab mounts Google Drive
COLAB_NOTEBOOKS = ("MyDrive", "Colab Notebooks")  # below it, where "Save a copy in Drive" saves a notebook
NOTHING_FOUND = (
    "No piece written yet was found here. In Colab, save a copy of each notebook in Drive and pass its folder, "
    "collect(drive_folder()), or paste your functions: collect(pasted=...)."
)


@dataclasses.dataclass(frozen=True, repr=False)
class Collected(Pieces):
    """The ``Pieces`` the model is assembled from, and where each came from (``sources``: piece -> a file name,
    "my_bert.py", "pasted", or why the reference is used) and what went wrong on the way (``notes``: a cell that
    did not run, a file that is not a notebook, or that nothing was found). Shows itself as one line per piece."""

    sources: dict = dataclasses.field(default_factory=dict)
    notes: tuple = ()

    def table(self) -> Listing:
        """One row per piece: its notebook, where it came from, whose function the model uses, its check's verdict."""
        rows = [(registry.EXERCISES[name].notebook, name, self.sources[name], *self._used(name)) for name in PIECES]
        mine = len(self.mine)
        head = f"{mine} of {len(PIECES)} pieces are yours; the other {len(PIECES) - mine} are the package's reference."
        notes = self.notes  # a cell that did not run, a copy chosen among several, nothing found
        name_width = max(len(name) for name in PIECES)
        from_width = max(len(found) for _, _, found, _, _ in rows)
        lines = [
            f"{nb}  {name.ljust(name_width)}  {found.ljust(from_width)}  {used:9s}  {said}".rstrip()
            for nb, name, found, used, said in rows
        ]
        table = ["| notebook | piece | from | used | check |", "|---|---|---|---|---|"]
        table += [
            f"| [{nb}]({NOTEBOOK_FILES[nb]}) | `{name}` | {found} | {used} | {said} |"
            for nb, name, found, used, said in rows
        ]
        text = "\n".join([head, *lines, *notes])
        markdown = "\n".join([head, "", *table, *([""] if notes else []), *(f"- {note}" for note in notes)])
        return Listing(text, markdown)

    def replaced(self, **functions) -> Collected:
        """As ``Pieces.replaced``; the "from" column says "tried in place" for each piece swapped in."""
        tried = super().replaced(**functions)
        swapped = {name: TRIED_IN_PLACE for name in functions if name in tried.mine}
        return dataclasses.replace(tried, sources={**self.sources, **swapped})

    def _used(self, name: str) -> tuple[str, str]:
        verdict = self.verdicts.get(name)
        if name in self.mine:
            return "yours", verdict_words(verdict)
        return "reference", "not attempted" if verdict is not None else ""

    def __repr__(self) -> str:
        return self.table().text

    __str__ = __repr__

    def _repr_markdown_(self) -> str:
        return self.table().markdown


@dataclasses.dataclass(frozen=True)
class _Found:
    """A piece as one source has it: written or still the skeleton, and its function (None if its code failed)."""

    where: str  # "06_layernorm_residual_ffn.ipynb", "my_bert.py", "pasted"; with the cell, for a cell that failed
    written: bool
    function: object = None

    @property
    def failed(self) -> bool:
        return self.written and self.function is None


def collect(folder=None, *, pasted=None) -> Collected:
    """The learner's twelve pieces from ``folder`` (default: the current one, the notebooks' folder in JupyterLab
    and on Binder), each checked, the reference for each piece not found: see the module's docstring.

    ``folder`` holds the notebooks 01-07 (or their Colab copies, ``drive_folder()``) and perhaps ``my_bert.py``;
    ``pasted`` is Python source with the learner's ``def my_...`` functions, or a dict of functions by piece
    name. Per piece, ``pasted`` comes first, then ``my_bert.py``, then the notebooks."""
    folder = _folder(folder)
    notes: list[str] = []
    namespaces: list[dict] = []
    sources = [_from_pasted(pasted, namespaces, notes), _from_my_bert(folder, namespaces, notes)]
    sources += [_from_notebooks(folder, namespaces, notes)]
    picked = {name: _pick(name, sources) for name in PIECES}
    written = {name: found.function for name, found in picked.items() if found and found.function is not None}
    references = {name: registry.EXERCISES[name].reference for name in PIECES}
    _bind(namespaces, {**references, **written})  # what the learner's functions call while they are checked
    pieces = load_pieces(written)
    _bind(namespaces, pieces.functions)  # ... and what the model calls: a function checked "not attempted" is out
    where = {name: _where(name, picked[name], sources) for name in PIECES}
    if not written and not notes:
        notes.append(NOTHING_FOUND)
    return Collected(**vars(pieces), sources=where, notes=tuple(notes))


def drive_folder() -> Path:
    """Colab only: mount Google Drive (Colab asks for permission) and return its "Colab Notebooks" folder, where
    "File > Save a copy in Drive" saves a notebook; then ``collect(drive_folder())``. Outside Colab it raises."""
    try:
        from google.colab import drive
    except ImportError:
        raise RuntimeError(
            "drive_folder() is for Google Colab only: it mounts your Google Drive there. In JupyterLab or on "
            "Binder your notebooks are in this folder already: call collect() without a folder."
        ) from None
    drive.mount(str(DRIVE_MOUNT_POINT))
    folder = DRIVE_MOUNT_POINT.joinpath(*COLAB_NOTEBOOKS)
    if not folder.is_dir():
        raise FileNotFoundError(
            "your Drive has no 'Colab Notebooks' folder yet: open each of notebooks 01-07 in Colab, use "
            "File > Save a copy in Drive, write your pieces in the copies, then run this cell again."
        )
    return folder


# --- the sources, each a dict: piece -> _Found ----------------------------------------------------------------


def _folder(folder) -> Path:
    if folder is None:
        return Path(".")
    if not isinstance(folder, (str, os.PathLike)):
        raise TypeError(f"`folder` must be a folder path (str or Path) or None, got {describe(folder)}.")
    if not Path(folder).is_dir():
        raise FileNotFoundError(
            f"`folder` {str(folder)!r} is not a folder: pass the folder of your notebooks, or nothing for this one."
        )
    return Path(folder)


def _from_pasted(pasted, namespaces: list, notes: list) -> dict:
    if pasted is None:
        return {}
    if isinstance(pasted, str):
        return _from_source(pasted, PASTED, "<pasted>", ("my_", ""), namespaces, notes)
    if isinstance(pasted, dict):
        return {name: _Found(PASTED, _is_written(f), f) for name, f in _pasted_functions(pasted).items()}
    raise TypeError(
        "`pasted` must be Python source (a str with your `def my_...` functions) or a dict of functions by piece "
        f"name, got {describe(pasted)}."
    )


def _pasted_functions(pasted: dict) -> dict:
    """The dict's functions by piece name (``my_layer_norm`` is ``layer_norm``), less the package's references
    (what ``use`` hands back for a piece that failed its check is no answer)."""
    functions = {}
    for key, function in pasted.items():
        name = key.removeprefix("my_") if isinstance(key, str) else key
        if name not in PIECES:
            raise ValueError(f"`pasted` has a key {key!r}, which is no piece; the pieces are: {', '.join(PIECES)}.")
        if not callable(function):
            raise TypeError(f"`pasted[{key!r}]` must be a function, got {describe(function)}.")
        if function is not registry.EXERCISES[name].reference:
            functions[name] = function
    return functions


def _from_my_bert(folder: Path, namespaces: list, notes: list) -> dict:
    path = folder / FILE_NAME
    if not path.is_file():
        return {}
    return _from_source(path.read_text(encoding="utf-8"), FILE_NAME, str(path), ("",), namespaces, notes)


def _from_source(source: str, where: str, filename: str, prefixes: tuple, namespaces: list, notes: list) -> dict:
    """The pieces that ``source`` (my_bert.py, or pasted) defines under one of ``prefixes``, run in a namespace."""
    source = _without_magics(source)
    defined = _defined(source, prefixes)
    if not any(written for _, written in defined.values()):
        return {name: _Found(where, False) for name in defined}
    namespace = _setup_namespace()
    namespaces.append(namespace)
    error = _run(source, filename, namespace)
    if error:
        failed = ", ".join(name for name, (_, written) in defined.items() if written)
        what = "The pasted source" if where == PASTED else where
        notes.append(f"{what} did not run: {error}. The reference is used for {failed}.")
    return {
        name: _Found(where, written, namespace[function] if written and not error else None)
        for name, (function, written) in defined.items()
    }


def _from_notebooks(folder: Path, namespaces: list, notes: list) -> dict:
    notebooks = sorted(path for path in folder.iterdir() if path.suffix == ".ipynb" and path.is_file())
    found = {}
    for number in sorted({registry.EXERCISES[name].notebook for name in PIECES}):
        path = _latest_copy(notebooks, NOTEBOOK_FILES[number], notes)
        if path is not None:
            names = tuple(name for name in PIECES if registry.EXERCISES[name].notebook == number)
            found.update(_from_notebook(path, names, namespaces, notes))
    return found


def _latest_copy(notebooks: list, file_name: str, notes: list) -> Path | None:
    """The notebook saved as ``file_name`` or as a copy of it ("Copy of ...", "... (1)"): the last one saved."""
    stem = re.escape(file_name.removesuffix(".ipynb"))
    copy = re.compile(rf"(Copy of )*{stem} ?(\(\d+\))?\.ipynb")
    matching = [path for path in notebooks if copy.fullmatch(path.name)]
    if not matching:
        return None
    latest = max(matching, key=lambda path: (path.stat().st_mtime_ns, path.name))
    if len(matching) > 1:
        notes.append(f"{len(matching)} files here are {file_name} or a copy of it: {latest.name}, saved last, is read.")
    return latest


def _from_notebook(path: Path, names: tuple, namespaces: list, notes: list) -> dict:
    """The pieces ``names`` from the last cell of notebook ``path`` that defines each; only those cells run."""
    cells = _code_cells(path, notes)
    if cells is None:
        return {}
    last = {}  # piece -> (cell number, source, function name): the last cell that writes it, else a skeleton's
    for number, source in cells:
        source = _without_magics(source)
        for name, (function, written) in _defined(source, ("my_",), names).items():
            if written or name not in last:
                last[name] = (number, source, function, written)
    found = {name: _Found(path.name, False) for name, (_, _, _, written) in last.items() if not written}
    namespace = _setup_namespace()
    namespaces.append(namespace)
    for number, source in sorted({(n, s) for n, s, _, written in last.values() if written}):
        written_here = [(name, function) for name, (n, _, function, w) in last.items() if n == number and w]
        error = _run(source, f"<{path.name}, cell {number}>", namespace)
        if error:
            what = " and ".join(f"def my_{name}" for name, _ in written_here)
            pieces = ", ".join(name for name, _ in written_here)
            notes.append(
                f"{path.name}, cell {number} ({what}) did not run: {error}. The reference is used for {pieces}."
            )
        for name, function in written_here:
            where = f"{path.name}, cell {number}" if error else path.name
            found[name] = _Found(where, True, None if error else namespace[function])
    return found


def _code_cells(path: Path, notes: list) -> list | None:
    """(cell number, from 1, source) of each code cell of notebook ``path``; None, said, if it is not one."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        return [
            (number, "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"])
            for number, cell in enumerate(cells, 1)
            if cell.get("cell_type") == "code"
        ]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as error:
        notes.append(f"{path.name} could not be read as a notebook ({type(error).__name__}), so it was skipped.")
        return None


# --- reading and running the learner's code -------------------------------------------------------------------


def _without_magics(source: str) -> str:
    """``source`` with each IPython line (``%pip ...``, ``!ls``) made ``pass``: the line numbers stay."""
    lines = source.splitlines()
    for index, line in enumerate(lines):
        if line.lstrip().startswith(("%", "!")):
            lines[index] = line[: len(line) - len(line.lstrip())] + "pass"
    return "\n".join(lines) + "\n"


def _defined(source: str, prefixes: tuple, names: tuple = PIECES) -> dict:
    """piece -> (function name, written) for each piece of ``names`` that ``source`` defines at top level as
    ``prefix + piece`` (the first prefix that does wins). Source that does not parse counts as written: running
    it says what is wrong."""
    try:
        defined = {node.name: not _is_skeleton(node) for node in ast.parse(source).body if _is_function(node)}
    except SyntaxError:
        header = re.compile(r"^def ([A-Za-z_]\w*)\s*\(", re.MULTILINE)
        defined = {function: True for function in header.findall(source)}
    found = {}
    for prefix in reversed(prefixes):
        found.update({name: (prefix + name, defined[prefix + name]) for name in names if prefix + name in defined})
    return found


def _is_function(node) -> bool:
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))


def _is_skeleton(function: ast.FunctionDef) -> bool:
    """Whether the function's body, past its docstring, is only ``raise NotImplementedError``."""
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0].value, "value", None), str):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Raise):
        return False
    error = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return isinstance(error, ast.Name) and error.id == "NotImplementedError"


def _is_written(function) -> bool:
    """Whether a function handed over in a dict is more than the skeleton (True when its source is not at hand)."""
    try:
        node = ast.parse(textwrap.dedent(inspect.getsource(function))).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return True
    return not (_is_function(node) and _is_skeleton(node))


def _setup_namespace() -> dict:
    """What a notebook's setup cell gives its cells, and every piece by its plain name (the reference, for now)."""
    namespace = {"__name__": "__main__", "torch": torch, "F": F, "nn": nn, "math": math, "bc": bertcourse}
    namespace.update({name: registry.EXERCISES[name].reference for name in PIECES})
    return namespace


def _runs(statement: ast.stmt) -> bool:
    """Whether ``collect`` runs a top-level statement: not a bare expression or an ``assert`` (a trial call, a
    print), nor an assignment to a piece's plain name (``layer_norm = use(...)``: ``collect`` binds those)."""
    if isinstance(statement, (ast.Expr, ast.Assert)):
        return False
    if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        return not any(isinstance(target, ast.Name) and target.id in PIECES for target in targets)
    return True


def _run(source: str, filename: str, namespace: dict) -> str | None:
    """Run ``source``'s definitions in ``namespace`` (its output hidden); what went wrong, in words, or None."""
    try:
        tree = ast.parse(source, filename)
        tree.body = [statement for statement in tree.body if _runs(statement)]
        code = compile(tree, filename, "exec")
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # for a check's messages
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            exec(code, namespace)
    except SyntaxError as error:
        return f"{type(error).__name__}: {error.msg} (line {error.lineno})"
    except (Exception, SystemExit) as error:
        line = _line_in(error, filename)
        return f"{type(error).__name__}: {_first_line(error)}" + (f" (line {line})" if line else "")
    return None


def _line_in(error: BaseException, filename: str) -> int | None:
    tb, line = error.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return (lines[0] if lines else "(no message)")[:200]


# --- choosing, binding, saying where ----------------------------------------------------------------------------


def _pick(name: str, sources: list) -> _Found | None:
    """The first source, in order of precedence, where piece ``name`` is written (run or failed), else None."""
    return next((source[name] for source in sources if name in source and source[name].written), None)


def _bind(namespaces: list, functions: dict) -> None:
    """Every piece under its plain name, and its ``my_`` name, in each namespace the learner's code runs in."""
    for namespace in namespaces:
        for name, function in functions.items():
            namespace[name] = namespace[f"my_{name}"] = function


def _where(name: str, found: _Found | None, sources: list) -> str:
    if found is None:
        unwritten = [source[name].where for source in sources if name in source]
        return f"not written yet in {', '.join(unwritten)}" if unwritten else NOT_FOUND
    return f"{found.where}: did not run" if found.failed else found.where
