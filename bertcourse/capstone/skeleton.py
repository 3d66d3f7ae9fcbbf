"""``start(folder=".")``: the learner's own file of pieces, written once from a skeleton.

The file, ``my_bert.py``, holds one function per piece of ``PIECES``, under its exercise name and with
the notebook's parameters (``Exercise.learner_parameters``); each body raises ``NotImplementedError`` and
its docstring is the exercise's prompt. A learner pastes the answers of notebooks 01-07 into it, or writes
them there, one at a time: ``load_pieces("my_bert.py")`` uses the reference for every function that still
raises.

``start`` never overwrites the file, and writes nothing anywhere else. It says the same sentence
whether it wrote the file now or found it, so that the notebook that calls it shows the same output
on every run (``StartResult.created`` tells the two apart).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import textwrap
from pathlib import Path

from .._validation import describe
from ..exercises import registry  # by module: the registry imports this package's references
from .pieces import NOTEBOOK_FILES, PIECES

FILE_NAME = "my_bert.py"

_HEADER = '''"""My BERT: the pieces of notebooks 01-07, in one file (notebook 13 assembles them).

Replace each `raise NotImplementedError` with your code, or paste your answer from the notebook named
above the function. A function that still raises is replaced by the package's reference when the model
is assembled, so the model always runs. Inside a function you may call your other functions: write
`scaled_dot_product_attention` with your `attention_scores` and `masked_softmax`, `post_ln_layer` with
your `layer_norm`.
"""

import math

import torch
import torch.nn.functional as F

import bertcourse as bc
'''


@dataclasses.dataclass(frozen=True, repr=False)
class StartResult:
    """Where the learner's file is, and whether ``start`` wrote it now (``created``) or found it there."""

    path: Path
    created: bool

    def __repr__(self) -> str:
        return (
            f"{self.path.name} is ready next to this notebook, with {len(PIECES)} functions to fill in: start() "
            "writes it only when it is missing and never overwrites it. Open it, write a piece, run the cells below."
        )

    __str__ = __repr__


def skeleton() -> str:
    """The text of the skeleton file: a header, then one function per piece, in the order the model calls them."""
    parts = [_HEADER]
    for name in PIECES:
        exercise = registry.EXERCISES[name]
        signature = inspect.Signature(exercise.learner_parameters())
        text = exercise.prompt[0].upper() + exercise.prompt[1:]
        prompt = textwrap.fill(text, width=100, initial_indent="    ", subsequent_indent="    ")
        parts.append(
            f"\n\n# notebook {exercise.notebook}: {NOTEBOOK_FILES[exercise.notebook]}\n"
            f"def {name}{signature}:\n"
            f'    """\n{prompt}\n    """\n'
            "    raise NotImplementedError  # your code goes here\n"
        )
    return "".join(parts)


def start(folder=".") -> StartResult:
    """Write ``my_bert.py`` into ``folder`` (default: the notebook's folder) unless it exists; never overwrite."""
    if not isinstance(folder, (str, os.PathLike)):
        raise TypeError(f"`folder` must be a folder path (str or Path), got {describe(folder)}.")
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"`folder` {str(folder)!r} is not a folder: pass the notebook's folder, or nothing.")
    path = folder / FILE_NAME
    try:
        with open(path, "x", encoding="utf-8") as file:  # "x": fails if the file exists, so nothing is overwritten
            file.write(skeleton())
    except FileExistsError:
        return StartResult(path, created=False)
    return StartResult(path, created=True)
