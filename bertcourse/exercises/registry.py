"""Every exercise by name, in course order, and the functions a notebook calls on them.

``check`` hands the learner's function to the engine and remembers the verdict; ``solution`` shows
the reference's core; ``prompt`` says what the learner's function receives and returns;
``progress`` lists every exercise checked in this kernel with its latest verdict. An unknown name
raises ``ValueError``: that is the notebook author's error, not the learner's.

Each later part of the course adds its catalogue module here: one import and its exercises in
``EXERCISES``, in course order.
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

EXERCISES: dict[str, Exercise] = {
    exercise.name: exercise
    for exercise in (
        attention.QKV_PROJECTION,
        attention.QKV_FROM_LINEAR,
        attention.LINEAR_SCORES,
        attention.ATTENTION_SCORES,
        attention.SCALED_DOT_PRODUCT_ATTENTION,
        attention.FLEXIBLE_ATTENTION,
        attention.STABLE_SOFTMAX,
        masks.PADDING_MASK,
        masks.CAUSAL_MASK,
        masks.MASKED_SOFTMAX,
        masks.KEY_PADDING_MASK,
        masks.MASK_FROM_TORCH,
        positional.SINUSOIDAL_POSITION_ENCODING,
        positional.SINUSOIDAL_POSITIONS,
        positional.ALIBI_BIAS,
        multihead.SPLIT_HEADS,
        multihead.MERGE_HEADS,
        multihead.SPLIT_FUSED_QKV,
        multihead.MULTI_HEAD_ATTENTION,
        multihead.TORCH_MULTI_HEAD_ATTENTION,
        layernorm_ffn.LAYER_NORM,
        layernorm_ffn.FEED_FORWARD,
        layernorm_ffn.POST_LN_LAYER,
        layernorm_ffn.PRE_LN_LAYER,
        layernorm_ffn.PARALLEL_LAYER,
        layernorm_ffn.PRE_LN_STACK,
        bert.BERT_EMBEDDINGS,
        bert.MLM_HEAD,
        bert.HF_TO_OURS,
        bert.COUNT_PARAMETERS,
        inside.ROLE_SCORE,
        inside.ATTENTION_ROLLOUT,
        inside.MEAN_POOLING,
        inside.WORD_PIECE_TARGETS,
        inside.VALUE_WEIGHTED_NORMS,
        pretraining.MLM_CORRUPT,
        pretraining.TRUNCATE_PAIR,
        pretraining.MLM_ACCURACY,
        pretraining.MASKED_ONLY_ACCURACY,
        pretraining.LR_MULTIPLIER,
        pretraining.WHOLE_WORD_MASK,
        finetuning.CLASSIFICATION_LOGITS,
        finetuning.CHOOSE_ON_DEV,
        finetuning.PREDICT_LABELS,
        finetuning.ALIGN_WORD_LABELS,
        finetuning.BEST_SPAN,
        long_inputs.WINDOW_SPANS,
        long_inputs.MERGE_SOFTMAX_BLOCKS,
        long_inputs.LOCAL_GLOBAL_MASK,
        long_inputs.AVERAGE_TOKEN_OUTPUTS,
        long_inputs.LONGFORMER_MASK,
        precision.AVERAGE_GRADIENTS,
        precision.SCALER_UPDATE,
        precision.GLOBAL_MEAN_LOSS,
        precision.SAFE_LOSS_SCALE,
        capstone.FIRST_DIFFERENCE,
        capstone.RELATIVE_ERROR_BY_LAYER,
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
# The exercises a reworked notebook asks for, in its order (its check cells name these).
NOTEBOOK_ASKS = {
    "01": ("linear_scores", "attention_scores"),
    "02": ("flexible_attention", "stable_softmax"),
    "03": ("masked_softmax", "mask_from_torch"),
    "04": ("sinusoidal_positions", "alibi_bias"),
    "05": ("split_fused_qkv", "torch_multi_head_attention"),
    "06": ("parallel_layer", "pre_ln_stack"),
    "08": ("word_piece_targets", "value_weighted_norms"),
    "09": ("masked_only_accuracy", "lr_multiplier", "whole_word_mask"),
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
