"""What a check shows the learner, and what an exercise is made of.

``CheckResult`` and ``Listing`` are what ``check``, ``solution`` and ``prompt`` return; each shows
itself as the last expression of a notebook cell. ``Case``, ``Mistake`` and ``Exercise`` are the
building blocks of the catalogue modules.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
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
    """One test input: ``args`` are passed positionally, in the order of the reference's signature.

    ``tags`` say what kind of case it is, so that a message can say which kind fails: "batched",
    "unbatched", "masked", "no mask", "fully masked row", "float16", "bfloat16", "square",
    "non-square", "defaults" (an optional argument left out), or any other word. A message names a
    kind only when some pair of cases differs in that property alone (``diagnosis.varied_alone``: the
    same arguments with the default written out, the mask left out, the inputs cast, one item of
    the batch, other sizes; for another tag, one argument changed), so build cases in such pairs.
    """

    label: str
    args: tuple
    tags: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Mistake:
    """A known wrong variant: ``wrong`` has the learner's signature and returns what that mistake gives."""

    name: str
    hint: str
    wrong: Callable


@dataclasses.dataclass(frozen=True)
class Knob:
    """One part of a formula that a learner can get wrong in several ways.

    ``options`` are (value, slip, hint) triples, the right one first (its slip and hint are empty).
    An exercise's ``variant(settings, *args)`` computes the formula with ``settings[knob.name]`` set to
    one of the values, so that combinations of slips (two at once, say) are recognised too.
    """

    name: str
    options: tuple[tuple[object, str, str], ...]


@dataclasses.dataclass(frozen=True)
class Exercise:
    """One exercise: the reference (a package function), its test cases and its catalogue of mistakes.

    ``outputs`` names the items when the function returns a tuple (e.g. ("output", "weights")).
    ``solution`` shows the reference's core: the function ``core`` (by default ``_<name>``) of the
    reference's module, then the helpers named in ``extra_solution``, from the same module, then the learner's
    ``my_<name>`` with ``learner_parameters``: it calls the core with the arguments of the same names, or runs
    ``solution_body`` where the public function prepares an argument first (a default computed, a list made a tensor).
    ``axes`` names the last axes of each output (key: the output's name, or "" for a single output),
    e.g. ``{"weights": ("query rows", "key columns")}``, for messages such as "only the query rows [3]".
    ``explain``, if given, is called as ``explain(case, value, expected)`` on a wrong output that no
    mistake explains, and returns a sentence about it or None. ``knobs`` and ``variant`` (see ``Knob``)
    describe the formula's parts, so that a combination of slips is named when no single mistake
    matches. ``explain_outputs``, for an exercise with ``outputs``, is called as
    ``explain_outputs(case, values, expected)`` with every item at once, on a case whose items are wrong
    in a way no mistake explains, and returns a sentence about them together (the two cut lengths of a
    truncated pair, say) or None. ``answered_by`` lists other package code that answers the exercise for
    the learner (a ``BertModel`` built to count its parameters): it counts as the concept's own.
    ``explain_calls``, for an exercise whose cases pass functions (an encoder layer's sub-layers), is called as
    ``explain_calls(case, calls)`` when no mistake explains a wrong answer: ``calls`` maps each function
    argument's name to the first inputs the learner's function called it with, in order; it returns a
    sentence (which sub-layer was called how often, on what) or None. ``notebook`` is "01", "02", ...
    ``gradients`` names the inputs of a build piece whose gradients must be the reference's too, once its values
    are right (``gradients.gradient_problem``): a detached statistic gives right values and trains wrong.
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
    core: str = ""
    extra_solution: tuple[str, ...] = ()
    solution_body: str = ""
    axes: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    explain: Callable | None = None
    knobs: tuple[Knob, ...] = ()
    variant: Callable | None = None
    explain_outputs: Callable | None = None
    answered_by: tuple[Callable, ...] = ()
    explain_calls: Callable | None = None
    notebook: str = ""
    gradients: tuple[str, ...] = ()

    def __hash__(self) -> int:
        return hash(self.name)

    def cases(self) -> list[Case]:
        return self.make_cases(torch.Generator().manual_seed(_SEED))

    def argument_names(self, cases: list[Case]) -> list[str]:
        """The reference's positional parameters that the cases pass (some cases may leave the last ones out)."""
        positional = [
            p.name
            for p in inspect.signature(self.reference).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        return positional[: max(len(case.args) for case in cases)]

    def learner_parameters(self) -> list[inspect.Parameter]:
        """The parameters of the learner's ``my_<name>``: the reference's, without annotations, up to its
        keyword-only ones, which are options of the package's API (``need_weights``), not part of the exercise."""
        return [
            p.replace(annotation=p.empty)
            for p in inspect.signature(self.reference).parameters.values()
            if p.kind not in (p.KEYWORD_ONLY, p.VAR_KEYWORD)
        ]

    def core_name(self) -> str:
        return self.core or f"_{self.name}"

    def solution_names(self) -> tuple[str, ...]:
        """The functions ``solution`` shows, in order: the core, the helpers of ``extra_solution``, then every
        other private function of the reference's module that these call (at any depth), so that no step
        of the exercise hides behind a name the listing does not show."""
        module = sys.modules[self.reference.__module__]
        names = list(dict.fromkeys((self.core_name(), *self.extra_solution)))
        index = 0
        while index < len(names):
            function = getattr(module, names[index], None)
            index += 1
            code = getattr(function, "__code__", None)
            for called in () if code is None else _names_used(code):
                helper = getattr(module, called, None)
                if (
                    called.startswith("_")
                    and called not in names
                    and inspect.isfunction(helper)
                    and helper.__module__ == module.__name__
                    and not called.startswith(("_check", "_require"))  # argument checks are not the concept
                ):
                    names.append(called)
        return tuple(names)

    def concept_functions(self) -> tuple[Callable, ...]:
        """The package's own code for this exercise: the reference, the functions ``solution`` shows, and the
        ``forward`` of a module class of the same name in the same module (``LayerNorm`` for ``layer_norm``)."""
        module = sys.modules[self.reference.__module__]
        found = [self.reference, *self.answered_by]
        found += [f for f in (getattr(module, name, None) for name in self.solution_names()) if callable(f)]
        wanted = self.reference.__name__.replace("_", "").lower()
        for name, value in vars(module).items():
            if inspect.isclass(value) and value.__module__ == module.__name__ and name.lower() == wanted:
                found += [vars(value)[method] for method in ("forward", "__call__") if method in vars(value)]
        return tuple(dict.fromkeys(found))


def _names_used(code) -> list[str]:
    """The global names a code object and the functions nested in it use."""
    names = list(code.co_names)
    for constant in code.co_consts:
        if inspect.iscode(constant):
            names += _names_used(constant)
    return names
