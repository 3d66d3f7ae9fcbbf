"""Timing implementations fairly: warm them up, then run them alternately and compare medians.

Running ours, theirs, ours, theirs, ... in one process means a change of machine load (another
program, a thermal limit) hits both alike; the median ignores the odd slow run. The ratio of the
medians is the figure to trust, not the absolute times.
"""

from __future__ import annotations

import statistics
import time


def median_times(run_ours, run_theirs, repeats: int, warmup: int = 3) -> tuple[float, float]:
    """Median seconds of ``run_ours()`` and ``run_theirs()`` over ``repeats`` alternating runs."""
    medians = alternating_medians({"ours": run_ours, "theirs": run_theirs}, repeats, warmup)
    return medians["ours"], medians["theirs"]


def alternating_medians(runs: dict, repeats: int, warmup: int = 3) -> dict:
    """{name: median seconds of ``runs[name]()``}: every run warmed up ``warmup`` times, then ``repeats`` rounds
    in which each runs once, in turn."""
    for _ in range(warmup):
        for run in runs.values():
            run()
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}
