"""Exercises of notebook 13, which only make sense with a whole model beside a reference: ``first_difference``
(the first step of a forward pass where two runs part, the heart of the capstone's report) and
``relative_error_by_layer`` (how large an error is against the signal, layer after layer: does a slip made once
grow through the stack?).

Their mistakes: for the first difference, a NaN let through (``NaN > tol`` is False), an absolute tolerance
only (the MLM logits, tens in size, then differ by rounding), the tolerance taken relative to the learner's own
values, the step with the largest difference or the last differing one instead of the first (later steps only
inherit the error), a step the learner never computed skipped, the learner's order walked instead of the
model's, shapes left to broadcast; for the relative error, the absolute norm, the division by the learner's
norm, an elementwise ratio (dividing by entries near 0), the largest entries' ratio, the squared norms, the
mean of the tokens' own ratios, and one number for all the layers together.
"""

from __future__ import annotations

import torch

from ..capstone.differences import first_difference, relative_error_by_layer
from .random_inputs import seeded_randn
from .records import Case, Exercise, Mistake

# --- first_difference ----------------------------------------------------------------------------


def _steps(g):
    """The steps of a small model's forward pass, in order: values of about 1 and MLM logits of about 20."""
    return {
        "embeddings": seeded_randn(g, 2, 3, 4),
        "layer 0: Q, K and V": tuple(seeded_randn(g, 2, 3, 4) for _ in range(3)),
        "layer 0: attention scores": seeded_randn(g, 2, 2, 3, 3),
        "layer 0: feed-forward": seeded_randn(g, 2, 3, 4),
        "MLM head": seeded_randn(g, 2, 3, 10, scale=20.0),
    }


def _copy(steps, noise_of=None):
    """The same steps, each a fresh tensor; ``noise_of(name, tensor)`` may change one."""
    out = {}
    for name, value in steps.items():
        if isinstance(value, tuple):
            out[name] = tuple(t.clone() for t in value)
        else:
            out[name] = value.clone() if noise_of is None else noise_of(name, value.clone())
    return out


def _first_cases(g):
    theirs = _steps(g)
    rounding = _copy(theirs, lambda name, t: t + 1e-6 * seeded_randn(g, *t.shape))  # float32 rounding: far below 1e-4
    one_off = _copy(theirs, lambda name, t: t + 0.01 if name == "layer 0: attention scores" else t)

    def two_off(name, t):  # a wrong score, and the error it passes on grown larger in the MLM head
        return t + {"layer 0: attention scores": 0.01, "MLM head": 5.0}.get(name, 0.0)

    large_logits = _copy(theirs, lambda name, t: t * (1 + 5e-5) if name == "MLM head" else t)  # within rtol
    with_nan = _copy(theirs, lambda name, t: torch.where(t > 1.5, float("nan"), t) if name == "embeddings" else t)
    never = _copy(theirs)
    del never["layer 0: attention scores"]
    qkv = _copy(theirs)
    q, k, v = qkv["layer 0: Q, K and V"]
    qkv["layer 0: Q, K and V"] = (q, k + 0.5, v)
    reordered = _copy(theirs, lambda name, t: t + 0.5 if name in ("layer 0: feed-forward", "embeddings") else t)
    reordered = {name: reordered[name] for name in reversed(list(reordered))}  # recorded in another order
    extra = {"layer 0: a step of yours only": seeded_randn(g, 3), **_copy(theirs)}
    pair = {"a": torch.ones(2, 3), "b": torch.ones(2, 3)}
    broadcast = {"a": torch.ones(1, 3), "b": torch.ones(2, 3)}  # one row where the reference has two equal rows
    two_of_three = _copy(theirs)
    two_of_three["layer 0: Q, K and V"] = (q, k)  # a tuple of two where the reference has three
    logits_off = _copy(theirs, lambda name, t: t * (1 + 5e-4) if name == "MLM head" else t)  # within rtol 1e-3
    relative_theirs = {"a": torch.tensor([1.0, 2.0, -1.0]), "b": torch.tensor([0.5])}
    relative_ours = {"a": torch.tensor([1.0, 2.0, -1.5]), "b": torch.tensor([0.5])}
    return [
        Case("every step off by float32 rounding (1e-6)", (rounding, theirs, 1e-4, 1e-4)),
        Case("the same steps, atol and rtol left out", (rounding, theirs), ("defaults",)),
        Case("the attention scores off by 0.01", (one_off, theirs, 1e-4, 1e-4)),
        Case("the scores off by 0.01, the MLM logits then off by 5", (_copy(theirs, two_off), theirs, 1e-4, 1e-4)),
        Case("the MLM logits (about 20) off by 5e-5 of their size", (large_logits, theirs, 1e-4, 1e-4)),
        Case("NaN in some of your embeddings", (with_nan, theirs, 1e-4, 1e-4)),
        Case("a step you never computed", (never, theirs, 1e-4, 1e-4)),
        Case("K (the second of Q, K and V) off by 0.5", (qkv, theirs, 1e-4, 1e-4)),
        Case("two steps off, yours recorded in reverse order", (reordered, theirs, 1e-4, 1e-4)),
        Case("a step of yours that the reference has not", (extra, theirs, 1e-4, 1e-4)),
        Case("shape (1, 3) where the reference has (2, 3), its rows alike", (broadcast, pair, 1e-4, 1e-4)),
        Case("atol 0, rtol 0.4: 1.5 where the reference has -1", (relative_ours, relative_theirs, 0.0, 0.4)),
        Case("Q, K and V as two tensors where the reference has three", (two_of_three, theirs, 1e-4, 1e-4)),
        Case(
            "atol 1e-6, rtol 1e-3: the MLM logits (about 20) off by 5e-4 of their size",
            (logits_off, theirs, 1e-6, 1e-3),
        ),
    ]


def _walk(ours, theirs, differs):
    for step, expected in theirs.items():
        if step not in ours:
            return step
        mine = ours[step]
        if isinstance(expected, tuple) and len(mine) != len(expected):
            return step
        pairs = zip(mine, expected, strict=True) if isinstance(expected, tuple) else [(mine, expected)]
        if any(differs(m, e) for m, e in pairs):
            return step
    return None


def _first_nan_passes(ours, theirs, atol=1e-4, rtol=1e-4):
    return _walk(ours, theirs, lambda m, e: bool(((m - e).abs() > atol + rtol * e.abs()).any()))


def _first_tolerances_swapped(ours, theirs, atol=1e-4, rtol=1e-4):
    return _walk(ours, theirs, lambda m, e: m.shape != e.shape or not bool(torch.isclose(m, e, atol, rtol).all()))


def _first_absolute_only(ours, theirs, atol=1e-4, rtol=1e-4):
    return _walk(ours, theirs, lambda m, e: not bool(((m - e).abs() <= atol).all()))


def _first_relative_to_yours(ours, theirs, atol=1e-4, rtol=1e-4):
    return _walk(ours, theirs, lambda m, e: not bool(((m - e).abs() <= atol + rtol * m.abs()).all()))


def _gaps(ours, theirs, atol, rtol):
    """{step: largest |ours - theirs|} of the steps beyond tolerance, in the reference's order."""
    found = {}
    for step, expected in theirs.items():
        if step not in ours:
            continue
        mine = ours[step]
        if isinstance(expected, tuple) and len(mine) != len(expected):
            found[step] = float("inf")
            continue
        pairs = list(zip(mine, expected, strict=True)) if isinstance(expected, tuple) else [(mine, expected)]
        if any(m.shape != e.shape or not torch.allclose(m, e, rtol=rtol, atol=atol) for m, e in pairs):
            found[step] = max(float((m - e).abs().nan_to_num(nan=1e30).max()) for m, e in pairs)
    return found


def _first_largest(ours, theirs, atol=1e-4, rtol=1e-4):
    gaps = _gaps(ours, theirs, atol, rtol)
    return max(gaps, key=gaps.get) if gaps else None


def _first_last(ours, theirs, atol=1e-4, rtol=1e-4):
    gaps = _gaps(ours, theirs, atol, rtol)
    return list(gaps)[-1] if gaps else None


def _first_missing_skipped(ours, theirs, atol=1e-4, rtol=1e-4):
    present = {step: value for step, value in theirs.items() if step in ours}
    return first_difference(ours, present, atol, rtol)


def _first_your_order(ours, theirs, atol=1e-4, rtol=1e-4):
    for step, mine in ours.items():  # the learner's order, not the model's
        if step in theirs and first_difference({step: mine}, {step: theirs[step]}, atol, rtol) is not None:
            return step
    return None


def _first_shapes_broadcast(ours, theirs, atol=1e-4, rtol=1e-4):
    return _walk(ours, theirs, lambda m, e: not torch.allclose(m, e, rtol=rtol, atol=atol))


FIRST_DIFFERENCE = Exercise(
    name="first_difference",
    reference=first_difference,
    prompt="your function receives `ours` and `theirs`, two dicts {step name: tensor, or a tuple of tensors} of "
    "one forward pass each, `theirs` the reference's steps in the order the model computes them (`ours` may lack "
    "a step, or hold extra ones), and the tolerances `atol` and `rtol` (default 1e-4 each); it returns the name of "
    "the first step of `theirs`, in its order, that `ours` gives differently, or None when every step matches. A "
    "step differs when `ours` lacks it, when a tensor's shape (or a tuple's length) is not the reference's, when it "
    "holds a NaN, or when an entry is off by more than atol + rtol * |theirs|; a tuple step differs when one of its "
    "tensors does.",
    start="walk `theirs` in order; for one step, compute |ours - theirs| and compare it with the tolerance.",
    make_cases=_first_cases,
    notebook="13",
    mistakes=(
        Mistake(
            "a NaN let through",
            "every comparison with NaN is False, so `(gap > tolerance).any()` passes a NaN: test `.isnan()` too, or "
            "ask whether every entry is within tolerance (`<=`), which a NaN is not.",
            _first_nan_passes,
        ),
        Mistake(
            "an absolute tolerance only",
            "the MLM logits are about 20 in size, so float32 rounds them by more than 1e-4: add rtol times the "
            "reference's size to the tolerance.",
            _first_absolute_only,
        ),
        Mistake(
            "atol and rtol swapped",
            "`torch.isclose(a, b, atol, rtol)` passes atol as rtol: its third parameter is `rtol`. Name them: "
            "`torch.isclose(a, b, rtol=rtol, atol=atol)`, or write `|a - b| <= atol + rtol * |b|` yourself.",
            _first_tolerances_swapped,
        ),
        Mistake(
            "the tolerance relative to your values",
            "the tolerance scales with the reference's values (|theirs|), not yours: a wrong large value of yours "
            "would otherwise widen its own tolerance.",
            _first_relative_to_yours,
        ),
        Mistake(
            "the step with the largest difference",
            "every step after a wrong one reads a wrong input, so the errors grow: the largest is a consequence. "
            "Return the first step that differs.",
            _first_largest,
        ),
        Mistake(
            "the last step that differs",
            "stop at the first step that differs, in the reference's order: the steps after it only inherit its error.",
            _first_last,
        ),
        Mistake(
            "a step you never computed skipped",
            "a step of the reference that `ours` lacks was never computed: that is a difference, return it.",
            _first_missing_skipped,
        ),
        Mistake(
            "your steps walked in your order",
            "walk the reference's steps (`theirs`), in its order: yours may be recorded in another order, and hold "
            "steps the reference has not.",
            _first_your_order,
        ),
        Mistake(
            "shapes left to broadcast",
            "`torch.allclose` broadcasts a (1, 3) tensor against a (2, 3) one and calls them close: compare the "
            "shapes first.",
            _first_shapes_broadcast,
        ),
    ),
)

# --- relative_error_by_layer ---------------------------------------------------------------------


def _layers(g, count, *shape, growth=1.0, error=1e-3):
    """(theirs, ours): ``count`` hidden states of ``shape``, each layer's error ``growth`` times the last's.
    Each token has its own size, and a few entries are near 0, so that the ratios people try differ."""
    theirs, ours = [], []
    for layer in range(count):
        sizes = torch.linspace(0.5, 3.0, shape[-2])[:, None]  # (seq, 1): tokens of different sizes
        t = seeded_randn(g, *shape) * sizes
        t[..., 0] = 1e-4  # entries near 0: an elementwise ratio divides by them
        theirs.append(t)
        ours.append(t + error * growth**layer * seeded_randn(g, *shape))
    return tuple(ours), tuple(theirs)


def _relative_cases(g):
    growing = _layers(g, 4, 2, 3, 8, growth=10.0)
    steady = _layers(g, 3, 2, 5, 6, growth=1.0, error=0.1)
    single = _layers(g, 1, 4, 6, growth=1.0, error=0.05)
    theirs = _layers(g, 2, 2, 3, 4)[1]
    same = (tuple(t.clone() for t in theirs), theirs)
    return [
        Case("4 layers (2, 3, 8), the error 10 times larger each layer", growing, ("batched",)),
        Case("3 layers (2, 5, 6), the same error size in each", steady, ("batched",)),
        Case("1 layer of shape (4, 6): one sentence", single, ("unbatched",)),
        Case("2 layers, ours equal to theirs", same, ("batched",)),
    ]


def _relative_absolute(ours, theirs):
    return torch.stack([torch.linalg.vector_norm(o - t) for o, t in zip(ours, theirs, strict=True)])


def _relative_by_yours(ours, theirs):
    return torch.stack(
        [torch.linalg.vector_norm(o - t) / torch.linalg.vector_norm(o) for o, t in zip(ours, theirs, strict=True)]
    )


def _relative_elementwise(ours, theirs):
    return torch.stack([((o - t).abs() / t.abs()).mean() for o, t in zip(ours, theirs, strict=True)])


def _relative_largest_entries(ours, theirs):
    return torch.stack([(o - t).abs().max() / t.abs().max() for o, t in zip(ours, theirs, strict=True)])


def _relative_squared(ours, theirs):
    return torch.stack([((o - t) ** 2).sum() / (t**2).sum() for o, t in zip(ours, theirs, strict=True)])


def _relative_mean_of_tokens(ours, theirs):
    return torch.stack(
        [
            (torch.linalg.vector_norm(o - t, dim=-1) / torch.linalg.vector_norm(t, dim=-1)).mean()
            for o, t in zip(ours, theirs, strict=True)
        ]
    )


def _relative_one_number(ours, theirs):
    o, t = torch.stack(list(ours)), torch.stack(list(theirs))
    return (torch.linalg.vector_norm(o - t) / torch.linalg.vector_norm(t)).expand(len(ours))


RELATIVE_ERROR_BY_LAYER = Exercise(
    name="relative_error_by_layer",
    reference=relative_error_by_layer,
    prompt="your function receives `ours` and `theirs`, two equally long tuples of tensors, one per layer (the "
    "hidden states of two models on one batch, each (batch, seq, hidden) or (seq, hidden), the same shape in both "
    "at each layer); it returns a float tensor (layers,): for each layer, the Frobenius norm of ours - theirs over "
    "every entry divided by the Frobenius norm of theirs.",
    start="one layer first: `torch.linalg.vector_norm` of a tensor takes every entry; then one value per layer.",
    make_cases=_relative_cases,
    notebook="13",
    mistakes=(
        Mistake(
            "the norm of the difference, not divided",
            "an absolute size says nothing until you compare it with the signal: divide by the norm of `theirs`.",
            _relative_absolute,
        ),
        Mistake(
            "the division by your norm",
            "divide by the reference's norm (`theirs`): a wrong model's own size is not the yardstick.",
            _relative_by_yours,
        ),
        Mistake(
            "an elementwise ratio",
            "|ours - theirs| / |theirs| entry by entry divides by entries near 0 and explodes: divide the norms, "
            "over every entry of the layer at once.",
            _relative_elementwise,
        ),
        Mistake(
            "the ratio of the largest entries",
            "the largest entries are one number each: take the norm over every entry (`vector_norm`), not `.max()`.",
            _relative_largest_entries,
        ),
        Mistake(
            "the squared norms",
            "a sum of squares is the norm squared: take its square root (`vector_norm` does), or the ratio is squared.",
            _relative_squared,
        ),
        Mistake(
            "the mean of each token's own ratio",
            "one norm over the whole layer, every token at once: averaging the tokens' ratios weighs a small token's "
            "error like a large one's.",
            _relative_mean_of_tokens,
        ),
        Mistake(
            "one number for all the layers",
            "one value per layer: compute the ratio of each layer's pair on its own.",
            _relative_one_number,
        ),
    ),
)
