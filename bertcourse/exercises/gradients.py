"""What a build piece's values cannot show: the gradient that training sends back through it.

A LayerNorm whose mean and variance are detached, or a feed-forward block run under ``torch.no_grad()``,
gives the right numbers, and the model that uses it then trains wrong (or not at all). So once a build
piece's values are right on every case, ``gradient_problem`` runs it once more on each float32 case with
its tensor inputs as leaves that require a gradient, backpropagates a fixed random weighting of its output,
and compares the gradient of each input the exercise names (``Exercise.gradients``) with the reference's.
Half-precision cases are left out: their rounding is not what this looks for. An input edited in place is
named by the value check before this runs.
"""

from __future__ import annotations

import torch

from .diagnosis import first_line
from .records import Case, Exercise
from .sandbox import TimedOut, call

_NO_GRAPH = "no graph"  # what ``_backward`` returns when the output does not depend on the inputs through autograd


def _leaves(exercise: Exercise, case: Case, names: list[str]) -> list[int]:
    """The positions of the arguments of ``exercise.gradients`` that ``case`` passes as float32 or float64 tensors."""
    return [
        i
        for i, (name, arg) in enumerate(zip(names, case.args, strict=False))
        if name in exercise.gradients and isinstance(arg, torch.Tensor) and arg.dtype in (torch.float32, torch.float64)
    ]


def _output_tensors(value) -> list[torch.Tensor]:
    """The floating tensors of an output: the tensor itself, or those of a tuple or list."""
    items = value if isinstance(value, (tuple, list)) else (value,)
    return [item for item in items if isinstance(item, torch.Tensor) and item.is_floating_point()]


def _backward(fn, positions: list[int]):
    """``fn`` wrapped: it makes the inputs at ``positions`` leaves, calls ``fn`` and returns the gradient of a fixed
    random weighting of its output with respect to each of them (None where none reaches it), or ``_NO_GRAPH``."""

    def run(*args):
        args = list(args)
        for i in positions:
            args[i] = args[i].detach().clone().requires_grad_(True)  # a clone: an inference tensor cannot require grad
        outputs = _output_tensors(fn(*args))
        if not any(output.requires_grad for output in outputs):
            return _NO_GRAPH
        generator = torch.Generator().manual_seed(0)
        loss = sum(
            (output * torch.randn(output.shape, generator=generator, dtype=output.dtype)).sum()
            for output in outputs
            if output.requires_grad
        )
        leaves = [args[i] for i in positions]
        return tuple(torch.autograd.grad(loss, leaves, allow_unused=True))

    return run


_REFERENCE: dict[tuple[str, int], object] = {}  # (exercise, case) -> the reference's gradients, computed once


def _reference_gradients(exercise: Exercise, index: int, case: Case, positions: list[int], names: list[str]):
    key = (exercise.name, index)
    if key not in _REFERENCE:
        _REFERENCE[key] = call(_backward(exercise.reference, positions), case.args, names).value
    return _REFERENCE[key]


def gradient_problem(exercise: Exercise, fn, cases: list[Case], names: list[str]) -> str | None:
    """What is wrong with the gradients of ``fn`` (whose values are right), or None when they are the reference's."""
    for index, case in enumerate(cases):
        positions = _leaves(exercise, case, names)
        if not positions or any(
            isinstance(arg, torch.Tensor) and arg.dtype in (torch.float16, torch.bfloat16) for arg in case.args
        ):
            continue
        expected = _reference_gradients(exercise, index, case, positions, names)
        if not isinstance(expected, tuple):
            continue  # the reference's output carries no gradient on this case (a mask, an index)
        outcome = call(_backward(fn, positions), case.args, names)
        if isinstance(outcome.error, TimedOut):
            return None  # the values already ran in time; a slow backward pass is not a wrong answer
        if outcome.error is not None:
            return (
                f"your values are right, but backpropagating through your function raised "
                f"{type(outcome.error).__name__} ({first_line(outcome.error)}) on test case {index + 1} "
                f"({case.label}). Training runs backward through every piece."
            )
        if outcome.value == _NO_GRAPH:
            return (
                "your values are right, but no gradient flows back through your function: its output does not "
                "depend on its inputs as far as autograd can see. Something cut the graph: `torch.no_grad()`, "
                "`.detach()`, `.item()`, `.numpy()`, or a new tensor built from numbers (`torch.tensor(...)`). "
                "Training needs the gradient."
            )
        for position, mine, theirs in zip(positions, outcome.value, expected, strict=True):
            argument = names[position]
            if theirs is None:
                continue
            if mine is None:
                return (
                    f"your values are right, but no gradient reaches `{argument}` (test case {index + 1}, "
                    f"{case.label}): backpropagation treats it as a constant. Something detached it "
                    "(`.detach()`, `.item()`, `.data`, a NumPy round trip) or ran under `torch.no_grad()`."
                )
            scale = theirs.abs().max().item() or 1.0
            if not torch.allclose(mine, theirs, rtol=1e-3, atol=1e-4 * scale, equal_nan=True):
                return (
                    f"your values are right, but the gradient with respect to `{argument}` is not the reference's "
                    f"(test case {index + 1}, {case.label}; largest difference {_size(mine, theirs, scale)} of its "
                    "largest entry): backpropagation treats part of your computation as a constant. A statistic "
                    "computed from a detached copy (`x.detach().mean()`, `.item()`, `.data`, a NumPy round trip) "
                    "does that: its value is right, and no gradient flows through it."
                )
    return None


def _size(mine: torch.Tensor, theirs: torch.Tensor, scale: float) -> str:
    """The largest difference as a rounded share of the largest entry: a figure that holds on every machine."""
    share = ((mine - theirs).abs().max().item()) / scale
    return f"{share:.0%}" if share >= 0.01 else "under 1%"
