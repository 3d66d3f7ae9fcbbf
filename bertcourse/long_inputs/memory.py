"""Peak memory of one call, measured for real: what PyTorch's allocator handed out at the most.

A formula (4 bytes per score, n x n scores, times the matrices alive at once) says what *should*
be allocated; a measurement says what was, including temporaries a formula forgets and buffers a
fused kernel keeps to itself. ``peak_memory(fn)`` runs ``fn()`` once and returns the largest number of bytes
that PyTorch's allocator had handed out during the call, above what was already allocated when
it started: the inputs you built before do not count; the temporaries, the kernels' scratch
buffers and the output do.

How: on the CPU, ``torch.profiler`` with ``profile_memory=True`` records every allocation and
free of PyTorch's CPU allocator with the allocator's running total after it; the peak is the
largest running total minus the total before the first event. The events are read from the
profiler's event tree (``experimental_event_tree``), the record PyTorch's own memory timeline
(``torch.profiler._memory_profiler``) is built from: the summary tables net each operator's
allocations and frees, so a kernel's scratch buffer, freed before it returns, would vanish there.
On a GPU the CUDA allocator keeps the same statistic itself (``torch.cuda.max_memory_allocated``).

What it does not see: memory that a library allocates on its own (a BLAS's private buffers),
Python objects, and what the operating system keeps for the process. Two tools that look right
and are not (notebook 11 shows the first): ``tracemalloc`` traces Python's allocator only and sees
none of a tensor's data; ``resource.getrusage(...).ru_maxrss`` is the process's high-water mark
since it started, which never goes down, so after one big call every later one reads the same.
"""

from __future__ import annotations

import os

import torch
from torch.profiler import ProfilerActivity, profile

from .._validation import describe


def peak_memory(fn, device="cpu") -> int:
    """Bytes: the peak of PyTorch's allocator during ``fn()``, above its level when the call started.

    ``fn`` takes no arguments (wrap a call in a ``lambda``); what it returns is dropped after the
    measurement. ``device``: "cpu" (measured with ``torch.profiler``) or a CUDA device.
    """
    if not callable(fn):
        raise TypeError(f"`fn` must be a function of no arguments, e.g. `lambda: f(x)`, got {describe(fn)}.")
    device = torch.device(device)
    if device.type == "cuda":
        return _peak_cuda(fn, device)
    if device.type != "cpu":
        raise ValueError(f"`device` must be a CPU or CUDA device, got {device}.")
    return _peak_cpu(fn)


def _peak_cpu(fn) -> int:
    # Kineto, the profiler's engine, prints a line on stderr at every start and stop unless its
    # log level is above all of its messages (6). It reads the setting when first started.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as recording:
        fn()
    events = sorted(_allocations(recording.profiler.kineto_results.experimental_event_tree()))
    if not events:
        return 0
    _, first_size, first_total = events[0]
    before = first_total - first_size  # what the allocator held when the call started
    return max(total for _, _, total in events) - before


def _allocations(roots) -> list[tuple[int, int, int]]:
    """(time, bytes allocated (< 0 for a free), allocator total after it) of every allocation event."""
    found, stack = [], list(roots)
    while stack:
        event = stack.pop()
        fields = event.extra_fields
        if type(fields).__name__ == "_ExtraFields_Allocation":
            found.append((event.start_time_ns, fields.alloc_size, fields.total_allocated))
        stack.extend(event.children)
    return found


def _peak_cuda(fn, device) -> int:
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    before = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - before
