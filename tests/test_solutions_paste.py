"""``solution(name)`` prints code that passes ``check(name)`` when pasted into the notebook as it is (issue 34, item 4).

A notebook's skeleton cell defines ``my_<name>`` with the reference's parameters and defaults, less its keyword-only
options (``Exercise.learner_parameters``); the learner pastes the listing in place of that cell. So each listing is
run here in an empty namespace (it brings its own imports, constants and helpers), and the ``my_<name>`` it defines
must have those parameters and pass the check.
"""

import inspect

import pytest

from bertcourse.exercises import EXERCISES, check, solution

NAMES = list(EXERCISES)


def _parameters(function) -> list[tuple]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def pasted(name: str):
    """The ``my_<name>`` that the listing defines once run as a notebook cell, in a fresh namespace."""
    namespace = {}
    exec(compile(solution(name).text, f"<pasted solution of {name}>", "exec"), namespace)  # noqa: S102
    return namespace[f"my_{name}"]


@pytest.mark.parametrize("name", NAMES)
def test_the_pasted_solution_passes_the_check(name):
    mine = pasted(name)
    assert _parameters(mine) == [(p.name, p.kind, p.default) for p in EXERCISES[name].learner_parameters()], (
        inspect.signature(mine)
    )
    result = check(name, mine)
    assert result.passed, f"{result.message}\n\nThe listing:\n{solution(name).text}"


@pytest.mark.parametrize("name", NAMES)
def test_the_listing_shows_the_same_code_as_markdown(name):
    shown = solution(name)
    assert shown.markdown == f"```python\n{shown.text}```"
    assert f"\ndef my_{name}(" in shown.text
    assert "is not available" not in shown.text
