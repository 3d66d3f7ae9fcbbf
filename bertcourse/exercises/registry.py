"""Every exercise by name, in course order, and the functions a notebook calls on them.

``check`` hands the learner's function to the engine and remembers the verdict; ``solution`` shows
the reference's core; ``prompt`` says what the learner's function receives and returns;
``progress`` lists every exercise checked in this kernel with its latest verdict. An unknown name
raises ``ValueError``: that is the notebook author's error, not the learner's.

An exercise is written in one place: its ``Exercise`` constant in the catalogue module of its concept.
``EXERCISES`` collects every catalogue's constants (a new part of the course adds its module to
``CATALOGUES``), and the tests derive their lists from it and from the notebooks' check cells.
"""

from __future__ import annotations

import inspect
import json
import os
import sys

from . import (
    attention,
    bert,
    capstone,
    finetuning,
    inside,
    layernorm_ffn,
    long_inputs,
    masks,
    multihead,
    positional,
    precision,
    pretraining,
)
from .diagnosis import first_line, kind
from .engine import run_check
from .records import CORRECT, NOT_ATTEMPTED, WRONG, CheckResult, Exercise, Listing

# The catalogue modules, one per concept. Each defines its exercises as module constants; nothing else lists them.
CATALOGUES = (
    attention,
    masks,
    positional,
    multihead,
    layernorm_ffn,
    bert,
    inside,
    pretraining,
    finetuning,
    long_inputs,
    precision,
    capstone,
)


def _defined_in(module) -> list[Exercise]:
    """The exercises ``module`` defines, in the order it defines them."""
    return [value for value in vars(module).values() if isinstance(value, Exercise)]


# Every exercise in course order: by notebook, then in the order its catalogue defines them.
EXERCISES: dict[str, Exercise] = {
    exercise.name: exercise
    for exercise in sorted(
        (exercise for module in CATALOGUES for exercise in _defined_in(module)), key=lambda e: e.notebook
    )
}

# Exercises that no notebook asks for any more, kept checkable by name (a learner may have typed them):
# a cell or a hint of notebook 09 answered them, or (08) the package functions that notebook imports, or (12)
# a one-liner and a copy of LossScaler.update, or (11) a hint that gave the loop, a cell the construction,
# or (01-06) a cell of the notebook that asked for them.
RETIRED = frozenset(
    {
        "mlm_corrupt",
        "truncate_pair",
        "mlm_accuracy",
        "role_score",
        "attention_rollout",
        "mean_pooling",
        "average_gradients",
        "scaler_update",
        "window_spans",
        "local_global_mask",
        "qkv_from_linear",
        "scaled_dot_product_attention",
        "key_padding_mask",
        "sinusoidal_position_encoding",
        "multi_head_attention",
        "post_ln_layer",
        "pre_ln_layer",
    }
)
# The exercises each notebook asks for, in its order: its check cells name exactly these (a test reads them).
NOTEBOOK_ASKS = {
    "01": ("linear_scores", "attention_scores"),
    "02": ("flexible_attention", "stable_softmax"),
    "03": ("masked_softmax", "mask_from_torch"),
    "04": ("sinusoidal_positions", "alibi_bias"),
    "05": ("split_fused_qkv", "torch_multi_head_attention"),
    "06": ("parallel_layer", "pre_ln_stack"),
    "07": ("mlm_head", "hf_to_ours", "count_parameters"),
    "08": ("word_piece_targets", "value_weighted_norms"),
    "09": ("masked_only_accuracy", "lr_multiplier", "whole_word_mask"),
    "10": ("classification_logits", "choose_on_dev", "predict_labels"),
    "11": ("average_token_outputs", "merge_softmax_blocks", "longformer_mask"),
    "12": ("global_mean_loss", "safe_loss_scale"),
    "13": ("first_difference", "relative_error_by_layer"),
}

# The latest verdict of every exercise checked in this kernel, in the order they were first met.
RESULTS: dict[str, CheckResult] = {}
# Set by the grader (``python -m bertcourse.exercises grade``): every verdict is appended to this file.
VERDICTS_FILE_VARIABLE = "BERTCOURSE_VERDICTS_FILE"


def check(name: str, fn) -> CheckResult:
    """Run the learner's ``fn`` on the test cases of exercise ``name`` and diagnose the result.

    Returns a ``CheckResult`` (status "not_attempted", "correct" or "wrong", and a message).
    Never raises because of ``fn``; raises ``ValueError`` for an unknown exercise name.
    """
    exercise = _lookup(name)
    if not callable(fn):
        result = CheckResult(
            name,
            WRONG,
            f'❌ Wrong: pass your function itself, without calling it: `check("{name}", my_function)`. '
            f"Got {kind(fn)} instead.",
        )
    else:
        try:
            result = run_check(exercise, fn)
        except KeyboardInterrupt:
            raise
        except BaseException as error:  # the learner's objects can break anything; a checker never raises
            result = CheckResult(
                name,
                WRONG,
                f"❌ Wrong: your output could not be checked ({type(error).__name__}: {first_line(error)}).",
            )
    _remember(result)
    return result


def _remember(result: CheckResult) -> None:
    RESULTS[result.exercise] = result
    path = os.environ.get(VERDICTS_FILE_VARIABLE)
    if path:
        record = {"exercise": result.exercise, "status": result.status, "mistake": result.mistake}
        with open(path, "a", encoding="utf-8") as file:
            file.write(json.dumps({**record, "message": result.message}) + "\n")


def solution(name: str) -> Listing:
    """The core of exercise ``name``'s reference (and its helpers), shown as a Python code block.

    The core is what the package's public function calls once it has checked its arguments, so the
    listing holds the concept alone.
    """
    exercise = _lookup(name)
    public = exercise.reference
    module = sys.modules[public.__module__]
    parts = []
    for helper in exercise.solution_names():
        function = getattr(module, helper, None)
        if function is None:
            text = (
                f"The solution of `{name}` is not available: `{module.__name__}` has no `{helper}` "
                "in this version of the package."
            )
            return Listing(text, text)
        parts.append(inspect.getsource(function).rstrip("\n"))
    if exercise.core_name() == public.__name__:
        note = f"# The package's {module.__name__}.{public.__name__}, and the helpers it calls:"
    else:
        note = f"# The package's public {module.__name__}.{public.__name__} also checks its arguments, then calls:"
    source = note + "\n" + "\n\n\n".join(parts) + "\n"
    return Listing(source, f"```python\n{source}```")


def prompt(name: str) -> Listing:
    """What the learner's function for exercise ``name`` receives and must return."""
    exercise = _lookup(name)
    text = f"Exercise `{name}`: {exercise.prompt}"
    return Listing(text, text)


_STATUS_WORDS = {CORRECT: "✅ correct", WRONG: "❌ wrong", NOT_ATTEMPTED: "⏳ not attempted"}


def progress() -> Listing:
    """Every exercise checked in this kernel, with its latest verdict (and the mistake, if one was named)."""
    if not RESULTS:
        text = "No exercise checked yet in this session: run a `check(...)` cell first."
        return Listing(text, text)
    correct = sum(result.passed for result in RESULTS.values())
    rows = []
    for name, result in RESULTS.items():
        notebook = EXERCISES[name].notebook
        where = f"{notebook} " if notebook else ""
        mistake = f" ({result.mistake})" if result.mistake else ""
        rows.append((f"{where}{name}", f"{_STATUS_WORDS[result.status]}{mistake}"))
    width = max(len(left) for left, _ in rows)
    head = (
        f"{correct} of {len(RESULTS)} exercises checked in this session are correct ({len(EXERCISES)} in the course)."
    )
    text = "\n".join([head, *(f"{left.ljust(width)}  {right}" for left, right in rows)])
    table = ["| exercise | status |", "|---|---|", *(f"| `{left}` | {right} |" for left, right in rows)]
    return Listing(text, "\n".join([head, "", *table]))


def _lookup(name) -> Exercise:
    if callable(name):
        raise ValueError('the exercise name comes first, then your function: check("layer_norm", my_layer_norm).')
    if not isinstance(name, str) or name not in EXERCISES:
        known = ", ".join(EXERCISES)
        raise ValueError(f"unknown exercise {name!r}; the known exercises are: {known}.")
    return EXERCISES[name]
