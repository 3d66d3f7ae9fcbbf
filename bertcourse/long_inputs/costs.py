"""Time and peak memory of attention methods at growing lengths, and the power law they follow (notebook 11).

``measure_costs`` times each method on one head of random queries, keys and values at each length and
measures its peak memory with ``peak_memory``; ``cost_slopes`` fits cost ~ n^p on log-log axes and returns
p for the time and for the memory; ``plot_costs`` draws both. What the measurements are:

- time: the CPU time of one call (``time.process_time``), the best of a few after a warm-up call, so that
  other programs running on the machine count as little as they can;
- peak memory: the most bytes PyTorch's allocator handed out during the call, above what it held before
  (``peak_memory``), so the inputs built before the call do not count.

Both run on one thread (``on_one_thread``): a fused kernel's scratch buffers grow with the threads.
Times vary from machine to machine and from run to run; a slope tells n from n^2 (1 or 2), not more.
"""

from __future__ import annotations

import time
from functools import partial

import torch

from .._validation import describe, is_int, require_positive_int
from .memory import peak_memory


def on_one_thread(fn):
    """``fn()`` with PyTorch on one thread; the caller's thread count is given back after, even on an error."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn()
    finally:
        torch.set_num_threads(threads)


def cpu_seconds(fn, repeats: int = 3) -> float:
    """The least CPU time (seconds) of ``repeats`` calls of ``fn()`` on one thread, after one warm-up call."""
    require_positive_int("repeats", repeats)

    def best():
        fn()  # warm-up: the first call pays for allocations and lazy initialisation
        times = []
        for _ in range(repeats):
            start = time.process_time()
            fn()
            times.append(time.process_time() - start)
        return min(times)

    return on_one_thread(best)


def measure_costs(methods: dict, lengths, d: int = 64, repeats: int = 3) -> dict:
    """{name: (seconds per call, peak bytes)}, two lists with one entry per length, for each attention method.

    ``methods``: {name: fn(q, k, v)}; each is called on one head, q, k, v of shape (1, 1, n, d), drawn from
    a generator seeded with n (every method sees the same inputs).
    """
    require_positive_int("d", d)
    lengths = _require_lengths(lengths)
    costs = {name: ([], []) for name in methods}
    for n in lengths:
        generator = torch.Generator().manual_seed(n)
        q, k, v = (torch.randn(1, 1, n, d, generator=generator) for _ in range(3))  # (1, 1, n, d) each
        for name, method in methods.items():
            call = partial(method, q, k, v)  # method(q, k, v), ready to be called without arguments
            seconds, peaks = costs[name]
            seconds.append(cpu_seconds(call, repeats))
            peaks.append(on_one_thread(partial(peak_memory, call)))
    return costs


def loglog_slope(lengths, values) -> float:
    """The exponent p of values ~ n^p: the slope of the least-squares line through (log n, log value)."""
    lengths = _require_lengths(lengths)
    if len(lengths) < 2 or len(values) != len(lengths) or min(values) <= 0:
        raise ValueError(
            f"need two or more lengths and one positive value per length, got {len(lengths)} lengths and "
            f"{describe(list(values))}."
        )
    x = torch.tensor(lengths, dtype=torch.float64).log()
    y = torch.tensor([float(value) for value in values], dtype=torch.float64).log()
    return float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())


def cost_slopes(costs: dict, lengths, fit_from: int = 512) -> dict:
    """{name: (time exponent, memory exponent)} of ``measure_costs``'s result, fitted on the lengths >= fit_from.

    Below a few hundred tokens fixed overheads (a call, a thread's scratch buffer) weigh most, so the fit
    starts at ``fit_from``.
    """
    lengths = _require_lengths(lengths)
    kept = [i for i, n in enumerate(lengths) if n >= fit_from]
    fitted_lengths = [lengths[i] for i in kept]
    return {
        name: (
            loglog_slope(fitted_lengths, [seconds[i] for i in kept]),
            loglog_slope(fitted_lengths, [peaks[i] for i in kept]),
        )
        for name, (seconds, peaks) in costs.items()
    }


def plot_costs(costs: dict, lengths, title: str, fit_from: int = 512):
    """Time and peak memory against n on log-log axes, one line per method, its fitted slope in the legend.

    Returns the figure; end the cell with ``plt.show()``.
    """
    import matplotlib.pyplot as plt

    lengths = _require_lengths(lengths)
    slopes = cost_slopes(costs, lengths, fit_from)
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for name, (seconds, peaks) in costs.items():
        time_slope, memory_slope = slopes[name]
        left.loglog(lengths, [1e3 * s for s in seconds], "o-", label=f"{name} (slope {time_slope:.2f})")
        right.loglog(lengths, [p / 2**20 for p in peaks], "o-", label=f"{name} (slope {memory_slope:.2f})")
    for ax, unit in ((left, "CPU time per call (ms, one thread)"), (right, "peak memory (MiB, PyTorch's allocator)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length n (tokens)")
        ax.set_ylabel(unit)
        ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    figure.suptitle(f"{title}; slopes fitted from n = {fit_from}")
    figure.tight_layout()
    return figure


def _require_lengths(lengths) -> list[int]:
    lengths = list(lengths)
    if not lengths or not all(is_int(n) and n > 0 for n in lengths):
        raise ValueError(f"`lengths` must be positive ints, got {describe(lengths)}.")
    return lengths
