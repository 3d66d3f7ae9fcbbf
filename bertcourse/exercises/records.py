"""What a check shows the learner, and what an exercise is made of.

``CheckResult`` and ``Listing`` are what ``check``, ``solution`` and ``prompt`` return; each shows
itself as the last expression of a notebook cell. ``Case``, ``Mistake`` and ``Exercise`` are the
building blocks of the catalogue modules.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable

import torch

NOT_ATTEMPTED, CORRECT, WRONG = "not_attempted", "correct", "wrong"
_SEED = 0  # every exercise draws its cases from a generator seeded with this


@dataclasses.dataclass(frozen=True, repr=False)
class CheckResult:
    """The verdict of ``check``: ``status`` is "not_attempted", "correct" or "wrong".

    ``mistake`` names the catalogued mistake the output matched, if any. As the last
    expression of a cell it shows ``message``.
    """

    exercise: str
    status: str
    message: str
    mistake: str | None = None

    @property
    def passed(self) -> bool:
        return self.status == CORRECT

    def __repr__(self) -> str:
        return self.message

    __str__ = __repr__

    def _repr_markdown_(self) -> str:
        return self.message.replace("\n", "  \n")


@dataclasses.dataclass(frozen=True, repr=False)
class Listing:
    """Text that a notebook shows as Markdown (``markdown``) and a terminal as plain ``text``."""

    text: str
    markdown: str

    def __repr__(self) -> str:
        return self.text

    __str__ = __repr__

    def _repr_markdown_(self) -> str:
        return self.markdown


@dataclasses.dataclass(frozen=True)
class Case:
    """One test input: ``args`` are passed positionally, in the order of the reference's signature."""

    label: str
    args: tuple


@dataclasses.dataclass(frozen=True)
class Mistake:
    """A known wrong variant: ``wrong`` has the learner's signature and returns what that mistake gives."""

    name: str
    hint: str
    wrong: Callable


@dataclasses.dataclass(frozen=True)
class Exercise:
    """One exercise: the reference (a package function), its test cases and its catalogue of mistakes.

    ``outputs`` names the items when the function returns a tuple (e.g. ("output", "weights")).
    ``extra_solution`` lists helpers whose source ``solution`` shows after the reference's.
    """

    name: str
    reference: Callable
    prompt: str
    start: str
    make_cases: Callable[[torch.Generator], list[Case]]
    mistakes: tuple[Mistake, ...]
    outputs: tuple[str, ...] = ()
    atol: float = 1e-5
    rtol: float = 1e-5
    extra_solution: tuple[Callable, ...] = ()

    def cases(self) -> list[Case]:
        return self.make_cases(torch.Generator().manual_seed(_SEED))

    def argument_names(self) -> list[str]:
        return list(inspect.signature(self.reference).parameters)
