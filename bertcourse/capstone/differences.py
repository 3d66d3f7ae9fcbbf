r"""How far apart two runs of one model are: the first step that differs, and the error layer by layer.

Two questions a learner asks of an assembled model beside Hugging Face's, and the two exercises of
notebook 13:

- ``first_difference(ours, theirs, atol, rtol)``: walking the steps in the order the model computes them
  (``theirs``' order), the name of the first whose values differ beyond tolerance, or None. A step
  differs when an entry is off by more than ``atol + rtol * |theirs|`` (``torch.allclose``'s rule, with the
  reference on the right), when it holds a NaN, when its shape is not the reference's, or when ``ours``
  never computed it. The *first* such step matters, not the largest: every step after a wrong one reads a
  wrong input, so later differences are consequences, and the largest is usually the last.
- ``relative_error_by_layer(ours, theirs)``: for each of two equally long sequences of hidden states (one
  ``(batch, seq, hidden)`` tensor per layer), :math:`\lVert o_\ell - t_\ell \rVert_F / \lVert t_\ell \rVert_F`,
  the size of the error against the size of the signal. It shows how an error made once grows, or not, as
  the layers pass it on; an elementwise ratio would divide by entries near 0 and mean nothing.

``compare`` (in ``compare.py``) uses ``beyond_tolerance`` for every step, so the report and the exercise
hold the same rule.
"""

from __future__ import annotations

import torch

from .._validation import describe


def beyond_tolerance(mine, theirs: torch.Tensor, atol: float, rtol: float) -> bool:
    """True when ``mine`` differs from tensor ``theirs``: not a tensor, another shape, a NaN, or an entry beyond
    ``atol + rtol * |theirs|``."""
    return not isinstance(mine, torch.Tensor) or _beyond_tolerance(mine, theirs, atol, rtol)


def _beyond_tolerance(mine, theirs, atol, rtol):
    if mine.shape != theirs.shape:
        return True  # never broadcast: a (1, seq) tensor is not a (batch, seq) one
    gap = (mine.detach().double() - theirs.detach().double()).abs()  # (...): NaN where either is NaN
    return bool((gap.isnan() | (gap > atol + rtol * theirs.detach().double().abs())).any())


def tolerance_used(mine, theirs, atol: float, rtol: float) -> float:
    """The largest ``|mine - theirs| / (atol + rtol * |theirs|)`` over every entry of a tensor or a tuple of
    tensors: below 1 the step matches, and how far below says how much room rounding leaves. Infinite for a NaN,
    another shape, or anything that is not a tensor."""
    pairs = zip(mine, theirs, strict=False) if isinstance(theirs, tuple) else [(mine, theirs)]
    if isinstance(theirs, tuple) and (not isinstance(mine, (tuple, list)) or len(mine) != len(theirs)):
        return float("inf")
    worst = 0.0
    for m, t in pairs:
        if not isinstance(m, torch.Tensor) or m.shape != t.shape:
            return float("inf")
        t = t.detach().double()
        ratio = (m.detach().double() - t).abs() / (atol + rtol * t.abs())  # (...): NaN where either is NaN
        if ratio.numel():
            worst = max(worst, float(ratio.nan_to_num(nan=float("inf")).max()))
    return worst


def first_difference(ours: dict, theirs: dict, atol: float = 1e-4, rtol: float = 1e-4) -> str | None:
    """The name of the first step of ``theirs`` (in its order) that ``ours`` gives differently, or None.

    ours, theirs: {step name: tensor, or a tuple of tensors}, ``theirs`` the reference's steps in the order
    the model computes them; ``ours`` may lack some (a step never computed differs) and hold others (ignored).
    atol, rtol: an entry differs beyond ``atol + rtol * |theirs|``; a NaN always differs, and so does anything
    of ``ours`` that is not a tensor.
    """
    ours, theirs = _check_steps("ours", ours), _check_steps("theirs", theirs, reference=True)
    for name, value in (("atol", atol), ("rtol", rtol)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ValueError(f"`{name}` must be a number >= 0, got {value!r}.")
    return _first_difference(ours, theirs, atol, rtol)


def _check_steps(name: str, steps, reference: bool = False) -> dict:
    """{step: tuple of tensors}: a single tensor as a tuple of one, and (in ``ours``) anything that is not a tensor
    as a NaN, which differs from everything."""
    if not isinstance(steps, dict):
        raise TypeError(f"`{name}` must be a dict of step name -> tensor, got {describe(steps)}.")
    checked = {}
    for step, value in steps.items():
        items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
        if reference and not all(isinstance(item, torch.Tensor) for item in items):
            raise TypeError(f"`{name}[{step!r}]` must be a tensor or a tuple of tensors, got {describe(value)}.")
        checked[step] = tuple(item if isinstance(item, torch.Tensor) else torch.tensor(float("nan")) for item in items)
    return checked


def _first_difference(ours, theirs, atol, rtol):
    for step, expected in theirs.items():  # the reference's order: the order the model computes its steps
        if step not in ours:
            return step  # never computed: it differs
        mine = ours[step]  # a tuple of tensors (one, or Q, K and V): the step differs if one of them does
        if len(mine) != len(expected) or any(
            _beyond_tolerance(m, e, atol, rtol) for m, e in zip(mine, expected, strict=True)
        ):
            return step
    return None  # every step within tolerance


def relative_error_by_layer(ours, theirs) -> torch.Tensor:
    """(layers,) float: ``‖ours[l] - theirs[l]‖ / ‖theirs[l]‖`` (Frobenius norms over every entry) per layer.

    ours, theirs: equally long tuples or lists of tensors of one shape each, e.g. the ``hidden_states`` of two
    models on one batch, ``(batch, seq, hidden)`` per layer (the embeddings first).
    """
    for name, value in (("ours", ours), ("theirs", theirs)):
        if not isinstance(value, (tuple, list)) or not value or not all(isinstance(t, torch.Tensor) for t in value):
            raise TypeError(f"`{name}` must be a non-empty tuple of tensors (one per layer), got {describe(value)}.")
    if len(ours) != len(theirs):
        raise ValueError(f"`ours` has {len(ours)} layers and `theirs` {len(theirs)}: pass the same layers of both.")
    for index, (mine, reference) in enumerate(zip(ours, theirs, strict=True)):
        if mine.shape != reference.shape:
            raise ValueError(
                f"layer {index}: `ours` has shape {tuple(mine.shape)}, `theirs` {tuple(reference.shape)}: "
                "the same batch through both models gives the same shapes."
            )
    return _relative_error_by_layer(ours, theirs)


def _relative_error_by_layer(ours, theirs):
    errors = [
        torch.linalg.vector_norm(o.float() - t.float()) / torch.linalg.vector_norm(t.float())  # (): over every entry
        for o, t in zip(ours, theirs, strict=True)
    ]
    return torch.stack(errors)  # (layers,)
