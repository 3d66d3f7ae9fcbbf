"""The build thread: the learner's own pieces of BERT, run by the cells that come after them.

In notebooks 01-07 the learner writes the pieces of BERT. Each is asked in two cells: a skeleton that
defines ``my_layer_norm`` (its body ``raise NotImplementedError``), and one call::

    layer_norm = use("layer_norm", my_layer_norm)

``use`` checks the function (``check``, gradients included for a build piece), prints the verdict and one line
that says whose function the cells below run, and returns the learner's function when it passes, the package's
reference otherwise. So the notebook runs to its end whatever the learner wrote: right, wrong or not yet, and a
right piece is the one the later cells use. A learner's function that passed its check and still raises later
(on an input the check did not try) is reported in one line, and the reference answers that call and every
later one: a run never stops on a piece that was already judged.
"""

from __future__ import annotations

import functools

from .diagnosis import first_line
from .registry import EXERCISES, check


def use(name: str, fn):
    """Check ``fn`` as exercise ``name`` and return the function the notebook should run from here on:
    ``fn`` (guarded, see the module's docstring) when it passes, the package's reference otherwise."""
    result = check(name, fn)  # raises ValueError for an unknown name: the notebook's error, not the learner's
    reference = EXERCISES[name].reference
    print(result.message)
    if result.passed:
        print(f"→ The cells below run your `{name}`.")
        return _guarded(name, fn, reference)
    if result.status == "not_attempted":
        print(f"→ The cells below run the package's `{name}` until you write yours.")
    else:
        print(f"→ The cells below run the package's `{name}` until yours passes.")
    return reference


def _guarded(name: str, fn, reference):
    """``fn``, except that the first exception it raises is reported in one line and the reference takes over."""
    failed = []

    @functools.wraps(fn)
    def piece(*args, **kwargs):
        if not failed:
            try:
                return fn(*args, **kwargs)
            except Exception as error:
                failed.append(error)
                print(
                    f"⚠️ Your `{name}` raised {type(error).__name__} ({first_line(error)}) here; the package's "
                    f"`{name}` runs in its place from now on. Run its `use` cell again once you have fixed it."
                )
        return reference(*args, **kwargs)

    return piece
