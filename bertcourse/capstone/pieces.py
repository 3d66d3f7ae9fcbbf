"""The learner's pieces, by exercise name, each one the learner's own or the package's reference.

The capstone assembles BERT from twelve functions of notebooks 01-07, under their exercise names and
signatures (``PIECES``, in the order the model runs them). ``load_pieces`` reads them from a module of
the learner's (``my_bert.py``, or any object or dict with those names) and runs ``check`` on each:
a function that is missing or still raises the skeleton's ``NotImplementedError`` is swapped for the
package's reference of the same name, so the model always runs; every other function is used as it is,
right or wrong, so that a wrong piece shows where it goes wrong in place. ``Pieces`` remembers which
functions are the learner's and the verdict of each check, for the table and for the report.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import os
import sys
import traceback
import types
from pathlib import Path

from .._validation import describe
from ..exercises import registry  # by module, read at call time: the registry imports this package's references
from ..exercises.records import NOT_ATTEMPTED, CheckResult, Listing

# Every piece of the assembled model, in the order a forward pass first calls it.
PIECES = (
    "hf_to_ours",
    "bert_embeddings",
    "qkv_from_linear",
    "split_heads",
    "attention_scores",
    "masked_softmax",
    "scaled_dot_product_attention",
    "merge_heads",
    "layer_norm",
    "feed_forward",
    "post_ln_layer",
    "mlm_head",
)

# The notebook each piece comes from, to send a learner back to it.
NOTEBOOK_FILES = {
    "01": "01_qkv_projections.ipynb",
    "02": "02_scaled_dot_product_attention.ipynb",
    "03": "03_masking.ipynb",
    "04": "04_positional_encoding.ipynb",
    "05": "05_multi_head_attention.ipynb",
    "06": "06_layernorm_residual_ffn.ipynb",
    "07": "07_full_bert.ipynb",
    "08": "08_inside_bert.ipynb",
    "09": "09_pretraining.ipynb",
    "10": "10_fine_tuning.ipynb",
    "11": "11_long_inputs.ipynb",
    "12": "12_precision_and_scale.ipynb",
    "13": "13_your_bert.ipynb",
}


def notebook_of(name: str) -> str:
    """The notebook that piece ``name`` comes from, as "notebook 02 (02_scaled_dot_product_attention.ipynb)"."""
    number = registry.EXERCISES[name].notebook
    return f"notebook {number} ({NOTEBOOK_FILES[number]})"


@dataclasses.dataclass(frozen=True)
class Pieces:
    """The function used for every piece (``functions``), which of them are the learner's (``mine``), the
    verdict of ``check`` on each function the learner gave (``verdicts``; the skeleton's are "not attempted"),
    the learner's pieces that call others still unwritten (``borrowed``: those run as the reference), and
    ``problem``: why a file gave no pieces at all (it does not import)."""

    functions: dict
    mine: frozenset
    verdicts: dict
    borrowed: dict = dataclasses.field(default_factory=dict)  # piece -> the unwritten pieces it calls
    problem: str | None = None  # why the learner's file gave no pieces (it does not import), in one line

    def __getitem__(self, name: str):
        return self.functions[name]

    def replaced(self, **functions) -> Pieces:
        """The same pieces with some swapped for other functions, each counted as the learner's (``replaced(
        scaled_dot_product_attention=my_wrong_attention)``): how a test or a notebook cell tries one piece in place.

        The new functions are checked, but their verdicts are not recorded (``progress()``, the grader): a piece
        tried in place is an experiment, the learner's file is the answer."""
        with _not_recorded():
            tried = load_pieces(functions)  # checks the new functions only
        return dataclasses.replace(
            self,
            functions={**self.functions, **{name: tried.functions[name] for name in tried.mine}},
            mine=self.mine | tried.mine,
            verdicts={**self.verdicts, **{name: tried.verdicts[name] for name in tried.mine}},
        )

    def table(self) -> Listing:
        """One row per piece: where it comes from, whose function the model uses, and its check's verdict."""
        rows = []
        for name in PIECES:
            verdict = self.verdicts.get(name)
            if name in self.mine:
                used, said = "yours", verdict_words(verdict)
                if self.borrowed.get(name):
                    calls = ", ".join(f"`{other}`" for other in self.borrowed[name])
                    said += f"; it calls {calls}, not written yet: the reference runs there"
            else:
                used, said = "reference", "not attempted" if verdict is not None else "not in your file"
            rows.append((registry.EXERCISES[name].notebook, name, used, said))
        mine = len(self.mine)
        head = f"{mine} of {len(PIECES)} pieces are yours; the other {len(PIECES) - mine} are the package's reference."
        if self.problem:
            head = f"{self.problem}\nUntil it imports, every piece is the package's reference."
        width = max(len(name) for _, name, _, _ in rows)
        text = "\n".join([head, *(f"{nb}  {name.ljust(width)}  {used:9s}  {said}" for nb, name, used, said in rows)])
        table = ["| notebook | piece | used | check |", "|---|---|---|---|"]
        table += [f"| [{nb}]({NOTEBOOK_FILES[nb]}) | `{name}` | {used} | {said} |" for nb, name, used, said in rows]
        return Listing(text, "\n".join([head, "", *table]))


def verdict_words(verdict: CheckResult | None) -> str:
    """A check's verdict in the few words of a table's cell: "✅ correct", "❌ wrong (its mistake)"."""
    if verdict is None:
        return "not checked"
    if verdict.passed:
        return "✅ correct"
    return f"❌ wrong ({verdict.mistake})" if verdict.mistake else "❌ wrong"


@contextlib.contextmanager
def _not_recorded():
    """Checks inside leave no trace: the kernel's verdicts and the grader's file are as they were."""
    results = dict(registry.RESULTS)
    verdicts_file = os.environ.pop(registry.VERDICTS_FILE_VARIABLE, None)
    try:
        yield
    finally:
        registry.RESULTS.clear()
        registry.RESULTS.update(results)
        if verdicts_file is not None:
            os.environ[registry.VERDICTS_FILE_VARIABLE] = verdicts_file


def load_pieces(source=None, *, record: bool = True) -> Pieces:
    """The twelve pieces from ``source``: a module, a path to a ``.py`` file, a dict of functions by name, or
    None (every piece the reference). Each function found is checked; one still unwritten is replaced.
    ``record=False``: the checks leave no verdict for ``progress()`` or the grader (a scratch file, a demo).

    A file that does not import gives no pieces and says why in one line (``problem``, shown by ``table()``).
    In a module, each piece is checked alone (the other pieces it calls bound to the references meanwhile), a
    function ``my_<name>`` (an answer pasted as a notebook wrote it) is the piece ``name``, and a written piece that
    calls one still unwritten (``scaled_dot_product_attention`` calling an unwritten ``masked_softmax``) runs with
    the reference in that place: the module's name is bound to it."""
    if not record:
        with _not_recorded():
            return load_pieces(source)
    if isinstance(source, (str, os.PathLike)):
        try:
            source = _import_file(Path(source))
        except ImportFailed as failure:
            return Pieces(dict(_references()), frozenset(), {}, problem=str(failure))
    functions_found = _functions_of(source)
    functions, mine, verdicts = dict(_references()), set(), {}
    for name in PIECES:
        function = functions_found.get(name)
        if function is None:
            continue
        if not callable(function):
            raise TypeError(f"`{name}` in your pieces must be a function, got {describe(function)}.")
        with _others_as_references(source, name):  # each piece judged alone, not by the pieces it calls
            verdicts[name] = registry.check(name, function)
    unwritten = {name for name, verdict in verdicts.items() if verdict.status == NOT_ATTEMPTED}
    if isinstance(source, types.ModuleType):
        for name in unwritten:
            setattr(source, name, registry.EXERCISES[name].reference)  # a written piece calling it runs the reference
    borrowed = {}
    for name, verdict in verdicts.items():
        if verdict.status != NOT_ATTEMPTED:
            functions[name] = functions_found[name]
            mine.add(name)
            calls = sorted(unwritten & set(_names_used(functions_found[name])), key=PIECES.index)
            if calls:
                borrowed[name] = tuple(calls)
    return Pieces(functions, frozenset(mine), verdicts, borrowed)


def _references() -> dict:
    return {name: registry.EXERCISES[name].reference for name in PIECES}


def _names_used(function) -> tuple[str, ...]:
    """The global names ``function``'s code reads (its own and its nested functions')."""
    code = getattr(function, "__code__", None)
    if code is None:
        return ()
    names, stack = set(), [code]
    while stack:
        current = stack.pop()
        names.update(current.co_names)
        stack.extend(const for const in current.co_consts if isinstance(const, types.CodeType))
    return tuple(names)


@contextlib.contextmanager
def _others_as_references(source, name: str):
    """Inside, every piece of module ``source`` but ``name`` is bound to the package's reference: a learner's piece
    that calls another is checked on its own (a wrong ``layer_norm`` fails ``layer_norm``, not ``post_ln_layer``)."""
    if not isinstance(source, types.ModuleType):
        yield
        return
    saved = {other: getattr(source, other) for other in PIECES if other != name and hasattr(source, other)}
    try:
        for other in saved:
            setattr(source, other, registry.EXERCISES[other].reference)
        yield
    finally:
        for other, function in saved.items():
            setattr(source, other, function)


def _functions_of(source) -> dict:
    if source is None:
        return {}
    if isinstance(source, dict):
        unknown = sorted(set(source) - set(PIECES))
        if unknown:
            raise ValueError(f"unknown pieces {unknown}; the pieces are: {', '.join(PIECES)}.")
        return dict(source)
    if isinstance(source, types.ModuleType):  # an answer pasted as the notebook wrote it, my_<name>, counts too
        for name in PIECES:
            if callable(getattr(source, f"my_{name}", None)):
                setattr(source, name, getattr(source, f"my_{name}"))
    if isinstance(source, types.ModuleType) or hasattr(source, "__dict__"):
        return {name: getattr(source, name) for name in PIECES if hasattr(source, name)}
    raise TypeError(
        f"`source` must be a module, the path of a .py file, a dict of functions or None, got {describe(source)}."
    )


def _import_file(path: Path) -> types.ModuleType:
    """The module in file ``path``, read afresh on every call (so that an edited file is read again)."""
    if path.suffix != ".py":
        raise ValueError(f"`source` must be a .py file, got {path.name!r}.")
    if not path.is_file():
        raise FileNotFoundError(
            f"`source`: there is no file {path.name!r} here. `bertcourse.capstone.start()` writes one to fill in."
        )
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop(path.stem, None)
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        raise ImportFailed(path, error) from error
    return module


class ImportFailed(Exception):
    """The learner's file raised while it was imported: its name, the line, the error, in one line."""

    def __init__(self, path: Path, error: Exception):
        line = getattr(error, "lineno", None) if isinstance(error, SyntaxError) else None
        if line is None:
            frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == str(path)]
            line = frames[-1].lineno if frames else None
        where = f"{path.name}, line {line}" if line else path.name
        message = error.msg if isinstance(error, SyntaxError) else str(error)
        super().__init__(f"{where} does not import: {type(error).__name__}: {message}")
