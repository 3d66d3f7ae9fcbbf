"""Where the learner's function runs: a fixed state, a time limit, plain values back.

A check must judge every learner the same way, and leave their notebook as it found it. So each
call to a learner's function (and the building of the cases and of the reference's outputs) runs
inside ``fixed_state()``:

- the default dtype is float32 and the default device the CPU, whatever the notebook set (the
  reference itself would otherwise be judged wrong after ``torch.set_default_dtype(torch.float64)``);
- gradients are on, as in a fresh session, and inference mode is off;
- torch runs on one thread: the cases are tiny, and threads would only wait for each other;
- the random generators are seeded with the same number before every call, so a learner's dropout
  draws the same mask every time and a message never changes between runs;
- warnings are recorded and dropped, since they print file paths and would reach nbval;
- afterwards the default dtype and device, the grad mode, the thread count and the states of
  torch's, Python's and NumPy's generators are exactly what they were.

``call`` runs one case with a time limit (a signal-based alarm on the main thread, where Jupyter
runs cells; a worker thread elsewhere) and catches everything the function raises. ``plain`` turns
what came back into plain tensors, tuples and ints, so that an object that overrides comparisons, or
a tensor subclass with its own ``__torch_function__``, takes no part in judging itself.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import random
import signal
import sys
import threading
import warnings

import torch

CALL_TIME_LIMIT_S = 5.0  # the cases are tiny: a right answer takes milliseconds
_SEED = 0


class UnreadableOutput(Exception):
    """What a call gives when its value cannot be made plain (a tensor subclass that refuses, say)."""


class TimedOut(BaseException):  # noqa: N818 -- a BaseException, so that a learner's `except Exception` lets it through
    """Raised inside a learner's function that ran past the time limit."""


@dataclasses.dataclass
class Outcome:
    """What one call gave: a value (made plain), or the exception it raised."""

    value: object = None
    error: BaseException | None = None
    changed_argument: str | None = None  # an input the call modified in place


@contextlib.contextmanager
def fixed_state():
    """Run the body under the state a check assumes; give the notebook its own state back afterwards."""
    saved_dtype, saved_grad = torch.get_default_dtype(), torch.is_grad_enabled()
    saved_device = _default_device()
    moved = saved_device.type != "cpu"  # setting the CPU when it is the default already would add a hook to every call
    saved_threads = torch.get_num_threads()
    saved_torch_rng, saved_python_rng = torch.get_rng_state(), random.getstate()
    saved_cuda_rng = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    numpy = sys.modules.get("numpy")
    saved_numpy_rng = numpy.random.get_state() if numpy is not None else None
    try:
        torch.set_default_dtype(torch.float32)
        torch.set_num_threads(1)  # the cases are tiny: threads only wait for each other on a busy machine
        if moved:
            torch.set_default_device("cpu")
        torch.manual_seed(_SEED)
        random.seed(_SEED)
        with torch.inference_mode(False), torch.enable_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch.set_default_dtype(saved_dtype)
        if moved or _default_device().type != "cpu":
            torch.set_default_device(saved_device)
        torch.set_grad_enabled(saved_grad)
        torch.set_num_threads(saved_threads)
        torch.set_rng_state(saved_torch_rng)
        if saved_cuda_rng is not None:
            torch.cuda.set_rng_state_all(saved_cuda_rng)
        random.setstate(saved_python_rng)
        if saved_numpy_rng is not None:
            numpy.random.set_state(saved_numpy_rng)


def _default_device() -> torch.device:
    """``torch.get_default_device()`` (torch 2.3 and later); the CPU on torch 2.2, which cannot change it."""
    getter = getattr(torch, "get_default_device", None)
    return torch.device("cpu") if getter is None else getter()


def call(fn, args: tuple, names: list[str], time_limit: float | None = None) -> Outcome:
    """Call ``fn`` on a deep copy of ``args`` in the fixed state, within the time limit; never raises.

    The outcome's value is made plain (see ``plain``); an input the call changed in place is noted.
    """
    fresh = copy.deepcopy(args)
    limit = CALL_TIME_LIMIT_S if time_limit is None else time_limit
    try:
        with fixed_state():
            value = _within(limit, fn, fresh)
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # even SystemExit: a learner's `exit()` must not end the check
        outcome = Outcome(error=error)
    else:
        try:
            outcome = Outcome(value=plain(value))
        except Exception as error:
            outcome = Outcome(error=UnreadableOutput(f"{type(error).__name__}: {error}"))
    for name, before, after in zip(names, args, fresh, strict=False):  # names also lists omitted optional arguments
        if not _same_input(before, after):
            outcome.changed_argument = name
            break
    return outcome


def _within(limit: float, fn, args: tuple):
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        return _with_alarm(limit, fn, args)
    return _in_thread(limit, fn, args)


def _with_alarm(limit: float, fn, args: tuple):
    """Run ``fn(*args)``; raise ``TimedOut`` inside it once ``limit`` seconds have passed (and every 0.5 s after)."""

    def alarm(signum, frame):
        raise TimedOut

    previous_handler = signal.signal(signal.SIGALRM, alarm)
    previous_timer = signal.setitimer(signal.ITIMER_REAL, limit, 0.5)
    try:
        return fn(*args)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_timer[0]:
            signal.setitimer(signal.ITIMER_REAL, *previous_timer)


def _in_thread(limit: float, fn, args: tuple):
    """Run ``fn(*args)`` in a worker thread; give up waiting after ``limit`` seconds (the thread is left behind)."""
    result: dict = {}
    state = (torch.get_default_dtype(), torch.is_grad_enabled())

    def work():
        torch.set_grad_enabled(state[1])  # grad mode is per thread
        try:
            result["value"] = fn(*args)
        except BaseException as error:
            result["error"] = error

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        raise TimedOut
    if "error" in result:
        raise result["error"]
    return result["value"]


def plain(value):
    """``value`` with every tensor a plain ``torch.Tensor`` (detached, subclass and overrides dropped),
    tuples and lists rebuilt as plain ones, and ints as plain ints; anything else as it came."""
    if type(value) is torch.Tensor:
        return value.detach()
    if isinstance(value, torch.Tensor):
        with torch._C.DisableTorchFunction():
            return torch.Tensor.as_subclass(value, torch.Tensor).detach()
    if isinstance(value, tuple):
        return tuple(plain(tuple.__getitem__(value, i)) for i in range(tuple.__len__(value)))
    if isinstance(value, list):
        return [plain(list.__getitem__(value, i)) for i in range(list.__len__(value))]
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int.__int__(value)
    return value


def _same_input(before, after) -> bool:
    try:
        if callable(before):
            return True  # a function the case passes in (a sub-layer, say): its copy never compares equal
        if isinstance(before, torch.Tensor):
            after = plain(after)
            return isinstance(after, torch.Tensor) and before.shape == after.shape and torch.equal(before, after)
        if isinstance(before, (list, tuple)):  # a list of tensors (one map per layer, say): element by element
            return (
                isinstance(after, (list, tuple))
                and len(before) == len(after)
                and all(_same_input(b, a) for b, a in zip(before, after, strict=True))
            )
        if isinstance(before, dict):
            return (
                isinstance(after, dict)
                and before.keys() == after.keys()
                and all(_same_input(before[key], after[key]) for key in before)
            )
        return bool(before == after)
    except Exception:
        return False
