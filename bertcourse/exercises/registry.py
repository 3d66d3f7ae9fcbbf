"""Every exercise by name, in course order, and the three functions a notebook calls on them.

``check`` hands the learner's function to the engine, ``solution`` shows the reference source,
``prompt`` what the learner's function receives and returns. An unknown name raises ``ValueError``.
"""

from __future__ import annotations

import inspect

from . import attention, bert, layernorm_ffn, masks, multihead, positional
from .engine import _first_line, _kind, _run_check
from .records import WRONG, CheckResult, Exercise, Listing

EXERCISES: dict[str, Exercise] = {
    exercise.name: exercise
    for exercise in (
        attention.QKV_PROJECTION,
        attention.ATTENTION_SCORES,
        attention.SCALED_DOT_PRODUCT_ATTENTION,
        masks.PADDING_MASK,
        masks.CAUSAL_MASK,
        positional.SINUSOIDAL_POSITION_ENCODING,
        multihead.SPLIT_HEADS,
        multihead.MERGE_HEADS,
        multihead.MULTI_HEAD_ATTENTION,
        layernorm_ffn.LAYER_NORM,
        layernorm_ffn.FEED_FORWARD,
        bert.BERT_EMBEDDINGS,
        bert.COUNT_PARAMETERS,
    )
}


def check(name: str, fn) -> CheckResult:
    """Run the learner's ``fn`` on the test cases of exercise ``name`` and diagnose the result.

    Returns a ``CheckResult`` (status "not_attempted", "correct" or "wrong", and a message).
    Never raises because of ``fn``; raises ``ValueError`` for an unknown exercise name.
    """
    exercise = _lookup(name)
    if not callable(fn):
        return CheckResult(
            name,
            WRONG,
            f'❌ Wrong: pass your function itself, without calling it: `check("{name}", my_function)`. '
            f"Got {_kind(fn)} instead.",
        )
    try:
        return _run_check(exercise, fn)
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # the learner's objects can break anything; a checker never raises
        return CheckResult(
            name, WRONG, f"❌ Wrong: your output could not be checked ({type(error).__name__}: {_first_line(error)})."
        )


def solution(name: str) -> Listing:
    """The reference source of exercise ``name`` (the package function), shown as a Python code block."""
    exercise = _lookup(name)
    sources = [inspect.getsource(f) for f in (exercise.reference, *exercise.extra_solution)]
    source = "\n\n".join(s.rstrip("\n") for s in sources) + "\n"
    return Listing(source, f"```python\n{source}```")


def prompt(name: str) -> Listing:
    """What the learner's function for exercise ``name`` receives and must return."""
    exercise = _lookup(name)
    text = f"Exercise `{name}`: {exercise.prompt}"
    return Listing(text, text)


def _lookup(name) -> Exercise:
    if callable(name):
        raise ValueError('the exercise name comes first, then your function: check("layer_norm", my_layer_norm).')
    if not isinstance(name, str) or name not in EXERCISES:
        known = ", ".join(EXERCISES)
        raise ValueError(f"unknown exercise {name!r}; the known exercises are: {known}.")
    return EXERCISES[name]
