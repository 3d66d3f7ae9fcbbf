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

import ast
import dis
import inspect
import json
import math
import os
import sys
import textwrap

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
# a cell or a hint of notebook 09 answered them (or they were cut for its sitting), or (08) the package
# functions that notebook imports, or (12) a one-liner and a copy of LossScaler.update, or (11) a hint that
# gave the loop, a cell the construction,
# or (01-06) a cell of the notebook that asked for them, or (02: flexible_attention, 04: alibi_bias, 05, 06) one
# stretch exercise per notebook.
RETIRED = frozenset(
    {
        "truncate_pair",
        "mlm_accuracy",
        "role_score",
        "attention_rollout",
        "mean_pooling",
        "average_gradients",
        "scaler_update",
        "window_spans",
        "local_global_mask",
        "linear_scores",
        "flexible_attention",
        "key_padding_mask",
        "sinusoidal_position_encoding",
        "alibi_bias",
        "multi_head_attention",
        "torch_multi_head_attention",
        "pre_ln_layer",
        "pre_ln_stack",
        "lr_multiplier",
        "whole_word_mask",
    }
)
# The exercises each notebook asks for, in its order: its check cells name exactly these (a test reads them).
NOTEBOOK_ASKS = {
    "01": ("qkv_from_linear", "attention_scores"),
    "02": ("scaled_dot_product_attention", "stable_softmax"),
    "03": ("masked_softmax", "mask_from_torch"),
    "04": ("bert_embeddings", "sinusoidal_positions"),
    "05": ("split_heads", "merge_heads", "split_fused_qkv"),
    "06": ("layer_norm", "feed_forward", "post_ln_layer", "parallel_layer"),
    "07": ("mlm_head", "hf_to_ours", "count_parameters"),
    "08": ("word_piece_targets", "value_weighted_norms"),
    "09": ("mlm_corrupt", "masked_only_accuracy"),
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
    """Exercise ``name``'s reference core as code that defines the learner's ``my_<name>``: pasted in place of the
    notebook's skeleton cell, it passes ``check(name, my_<name>)``.

    The core is what the package's public function calls once it has checked its arguments, so the listing holds
    the concept alone: the imports and constants it uses, the core, every private package function it calls (at any
    depth), then ``my_<name>`` with the reference's parameters and defaults (less its keyword-only options), which
    calls the core. Other package functions that it uses are imported: they are not this exercise's code, so a check
    lets them be called.
    """
    exercise = _lookup(name)
    public = exercise.reference
    module = sys.modules[public.__module__]
    missing = next((helper for helper in exercise.solution_names() if getattr(module, helper, None) is None), None)
    if missing is not None:
        text = (
            f"The solution of `{name}` is not available: `{module.__name__}` has no `{missing}` "
            "in this version of the package."
        )
        return Listing(text, text)
    learner = _learner_function(exercise)
    learner_code = next(c for c in compile(learner, "<listing>", "exec").co_consts if inspect.iscode(c))
    used_by_learner = _resolved(_loaded_globals(learner_code), vars(module))
    functions = _shown_functions([getattr(module, helper) for helper in exercise.solution_names()], used_by_learner)
    defined = {function.__name__ for function in functions}
    needs = {}  # name -> (value, the module where the listing's code finds it)
    for used, where in [(used_by_learner, module.__name__), *((_globals_used(f), f.__module__) for f in functions)]:
        for used_name, value in used.items():
            if used_name not in defined:
                needs.setdefault(used_name, (value, where))
    setup = "\n".join(_setup_lines(needs))
    parts = [_header(exercise, len(functions) > 1) + (f"\n\n{setup}" if setup else "")]
    parts += [inspect.getsource(function).rstrip("\n") for function in functions]
    source = "\n\n\n".join([*parts, learner]) + "\n"
    return Listing(source, f"```python\n{source}```")


_LINE = 120  # the longest line of a listing, as in the package


def _header(exercise: Exercise, helpers: bool) -> str:
    public, core = exercise.reference, exercise.core_name()
    where = f"{public.__module__}.{public.__name__}"
    if core == public.__name__:
        said = f"The package's {where} (it has no argument checks to leave out)"
        said += ", and the helpers it calls." if helpers else "."
    else:
        said = f"The package's {where} checks its arguments, then calls {core}, shown here"
        said += " with the helpers it calls." if helpers else "."
    said += f" Pasted in place of your skeleton cell, this defines my_{exercise.name}."
    return textwrap.fill(said, width=_LINE, initial_indent="# ", subsequent_indent="# ")


def _learner_function(exercise: Exercise) -> str:
    """``def my_<name>(...)`` with the learner's parameters and defaults (``Exercise.learner_parameters``); its body
    calls the core with the arguments of the same names, or is the exercise's ``solution_body``."""
    parameters = exercise.learner_parameters()
    signature = []  # each parameter as the reference writes it (without annotations), with its `/` and `*`
    for index, p in enumerate(parameters):
        if p.kind is p.KEYWORD_ONLY and not any(
            q.kind in (q.VAR_POSITIONAL, q.KEYWORD_ONLY) for q in parameters[:index]
        ):
            signature.append("*")
        signature.append(str(p))
        if p.kind is p.POSITIONAL_ONLY and (index + 1 == len(parameters) or parameters[index + 1].kind is not p.kind):
            signature.append("/")
    name = f"my_{exercise.name}"
    if exercise.solution_body:
        body = textwrap.indent(textwrap.dedent(exercise.solution_body).strip("\n"), "    ")
    else:
        core = getattr(sys.modules[exercise.reference.__module__], exercise.core_name())
        given = {p.name for p in parameters}
        arguments = [  # a parameter of the core that the reference lacks keeps the core's default
            f"{p.name}={p.name}" if p.kind is p.KEYWORD_ONLY else p.name
            for p in inspect.signature(core).parameters.values()
            if p.name in given or p.default is p.empty
        ]
        body = "    return " + _call(exercise.core_name(), arguments, len("    return "), indent=4)
    return f"def {_call(name, signature, len('def '), indent=0)}:\n{body}"


def _call(function: str, arguments: list[str], column: int, indent: int) -> str:
    """``function(arguments)`` on one line from ``column``, or its arguments on lines of their own (indented from
    ``indent``) when that line would be too long."""
    line = f"{function}({', '.join(arguments)})"
    if column + len(line) + 1 <= _LINE:
        return line
    inner = " " * (indent + 4)
    joined = f"{inner}{', '.join(arguments)}"
    if len(joined) <= _LINE:
        return f"{function}(\n{joined}\n{' ' * indent})"
    return f"{function}(\n" + "".join(f"{inner}{argument},\n" for argument in arguments) + f"{' ' * indent})"


def _shown_functions(shown: list, used_by_learner: dict) -> list:
    """The functions the listing shows: ``shown`` (the core and the helpers ``solution_names`` gives), then every
    private package function that these or ``my_<name>`` call, at any depth (``_layer_norm`` in a layer), each once."""
    shown = list(shown)
    pending = [used_by_learner, *(_globals_used(function) for function in shown)]
    while pending:
        for name, value in pending.pop(0).items():
            if name.startswith("_") and _package_function(value) and value not in shown:
                shown.append(value)
                pending.append(_globals_used(value))
    return shown


def _package_function(value) -> bool:
    return inspect.isfunction(value) and value.__module__.split(".")[0] == "bertcourse"


def _globals_used(function) -> dict:
    """The global names ``function`` uses, with their values in its module: in its body, the functions and
    comprehensions nested in it, and the defaults and annotations of its parameters (a pasted copy evaluates them)."""
    names = _loaded_globals(function.__code__)
    definition = ast.parse(textwrap.dedent(inspect.getsource(function))).body[0]
    arguments = definition.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
    evaluated = [*arguments.defaults, *arguments.kw_defaults, definition.returns]
    evaluated += [argument.annotation for argument in every if argument is not None]
    for part in evaluated:
        if part is not None:
            names += [node.id for node in ast.walk(part) if isinstance(node, ast.Name)]
    return _resolved(names, function.__globals__)


def _resolved(names: list[str], namespace: dict) -> dict:
    """Each of ``names`` that ``namespace`` defines, with its value (the others are builtins)."""
    return {name: namespace[name] for name in dict.fromkeys(names) if name in namespace}


def _loaded_globals(code) -> list[str]:
    names = [i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")]
    for constant in code.co_consts:
        if inspect.iscode(constant):
            names += _loaded_globals(constant)
    return names


def _setup_lines(needs: dict) -> list[str]:
    """The listing's imports (the standard library, other libraries, bertcourse: a group each, as ruff sorts them),
    then its constants, written out when they are made of literals."""
    groups: list[set] = [set(), set(), set()]
    constants = []
    for name, (value, where) in needs.items():
        literal = None if inspect.ismodule(value) or callable(value) else _literal(value)
        if literal is not None:
            constants.append(_assignment(name, value, literal))
            continue
        line = _import(name, value, where)
        top = line.split()[1].split(".")[0]
        groups[0 if top in sys.stdlib_module_names else 2 if top == "bertcourse" else 1].add(line)
    blocks = ["\n".join(sorted(group, key=lambda line: (line.startswith("from"), line))) for group in groups if group]
    if constants:
        blocks.append("\n".join(constants))
    return ["\n\n".join(blocks)] if blocks else []


def _import(name: str, value, where: str) -> str:
    """How the listing imports ``name``: a module by its own name, anything else from the module that defines it
    (or, if that module is private or does not hold it under that name, from ``where`` the core finds it)."""
    if inspect.ismodule(value):
        parent, _, last = value.__name__.rpartition(".")
        if value.__name__ == name:
            return f"import {name}"
        return f"from {parent} import {name}" if last == name else f"import {value.__name__} as {name}"
    home = getattr(value, "__module__", None)
    if (
        not isinstance(home, str)
        or getattr(sys.modules.get(home), name, None) is not value
        or any(part.startswith("_") for part in home.split("."))
    ):
        home = where
    return f"from {home} import {name}"


def _literal(value) -> str | None:
    """``value`` written as Python source if it is made of literals (a set sorted, so that the text never changes);
    None otherwise."""
    if value is None or isinstance(value, (bool, int)):
        return repr(value)
    if isinstance(value, str):
        plain = value.isprintable() and '"' not in value and "\\" not in value
        return f'"{value}"' if plain else repr(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else None
    if isinstance(value, dict):
        pairs = [(_literal(key), _literal(item)) for key, item in value.items()]
        if any(key is None or item is None for key, item in pairs):
            return None
        return "{" + ", ".join(f"{key}: {item}" for key, item in pairs) + "}"
    items = _literal_items(value)
    if items is None:
        return None
    opening, closing = _brackets(value)
    return opening + ", ".join(items) + ("," if isinstance(value, tuple) and len(items) == 1 else "") + closing


def _literal_items(value) -> list[str] | None:
    if not isinstance(value, (tuple, list, set, frozenset)):
        return None
    items = [_literal(item) for item in value]
    if any(item is None for item in items):
        return None
    return sorted(items) if isinstance(value, (set, frozenset)) else items


def _brackets(value) -> tuple[str, str]:
    if isinstance(value, tuple):
        return "(", ")"
    if isinstance(value, list):
        return "[", "]"
    if isinstance(value, set) and value:
        return "{", "}"
    return f"{type(value).__name__}({{", "})" if value else f"{type(value).__name__}(", ")"


def _assignment(name: str, value, literal: str) -> str:
    """``NAME = value``; a tuple, list, set or dict that is too long for one line gets one item a line."""
    line = f"{name} = {literal}"
    if len(line) <= _LINE or not value or not isinstance(value, (tuple, list, set, frozenset, dict)):
        return line
    if isinstance(value, dict):
        items, (opening, closing) = [f"{_literal(k)}: {_literal(v)}" for k, v in value.items()], ("{", "}")
    else:
        items, (opening, closing) = _literal_items(value), _brackets(value)
    return "\n".join([f"{name} = {opening}", *(f"    {item}," for item in items), closing])


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
