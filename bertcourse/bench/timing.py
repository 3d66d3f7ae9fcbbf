"""Timing two implementations fairly: warm both up, then run them alternately and compare medians.

Running ours, theirs, ours, theirs, ... in one process means a change of machine load (another
program, a thermal limit) hits both alike; the median ignores the odd slow run. The ratio of the
medians is the figure to trust, not the absolute times.
"""

from __future__ import annotations

import statistics
import time


def median_times(run_ours, run_theirs, repeats: int, warmup: int = 3) -> tuple[float, float]:
    """Median seconds of ``run_ours()`` and ``run_theirs()`` over ``repeats`` alternating runs."""
    for _ in range(warmup):
        run_ours()
        run_theirs()
    ours, theirs = [], []
    for _ in range(repeats):
        for run, times in ((run_ours, ours), (run_theirs, theirs)):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
    return statistics.median(ours), statistics.median(theirs)
