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

``call`` runs one case in a worker thread, within a time limit, and catches everything the function
raises. No learner code can keep a check waiting: once the limit has passed, the check reports the
time-out and gives up on the thread, and a trace function makes every line the thread runs from then
on raise ``TimedOut`` again, so that even a bare ``except:`` inside a retry loop cannot swallow it (the
raise from an ``except`` block's own line escapes that block). A thread stuck inside one long C call
ends when that call returns. ``plain`` turns what came back into plain tensors, tuples and ints, so
that an object that overrides comparisons, or a tensor subclass with its own ``__torch_function__``,
takes no part in judging itself.

The same trace function watches for calls into a given set of package functions (``Watch``): a
learner's function that is, or calls, the package's own code for the exercise's concept is told so,
never judged correct.
"""

from __future__ import annotations

import _thread
import contextlib
import copy
import dataclasses
import os
import random
import sys
import sysconfig
import threading
import warnings

import torch

# Frames of these folders (PyTorch's, the standard library's, the installed packages') sit between the
# learner's code and ours without being either (``nn.Module.__call__``, ``functools``).
_LIBRARIES = tuple(os.path.dirname(os.path.abspath(path)) + os.sep for path in (torch.__file__, os.__file__)) + tuple(
    os.path.abspath(p) + os.sep for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
)
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
    reached: str | None = None  # the package function of the concept that the call reached, if watched
    returned: str | None = None  # "torch.return_types.max" when the call returned such a pair


class Watch:
    """Which package function of an exercise's concept a learner's call reaches.

    ``codes`` are the code objects of the concept (the reference, its core and its helpers);
    ``legitimate`` those of other exercises' references and cores. A call into ``codes`` counts
    when the learner's code reached it directly, or through package code none of whose frames is in
    ``legitimate`` (so a layer that calls ``bc.layer_norm`` does not count for ``layer_norm``'s
    helpers reached from another exercise's reference). ``reached`` names the package function the
    learner's code called, e.g. "bertcourse.multihead.multi_head_attention".
    """

    def __init__(self, codes: frozenset, legitimate: frozenset, package_dir: str):
        self.codes = codes
        self.legitimate = legitimate
        self.package_dir = package_dir  # bertcourse's own folder; its exercises/ subfolder is where the check runs
        self.outside = (os.path.join(package_dir, "exercises") + os.sep,)
        self.reached: str | None = None

    def see(self, frame) -> None:
        if self.reached is not None:
            return
        entry, caller = frame, frame.f_back
        while caller is not None:
            filename = os.path.abspath(caller.f_code.co_filename)
            if filename.startswith(self.outside):
                break  # the check's own code called `entry` (the learner's function is the package's)
            if filename.startswith(self.package_dir):
                if caller.f_code in self.legitimate:
                    return  # another exercise's function, which the learner may use, called it
                entry = caller
            elif not filename.startswith(_LIBRARIES):
                break  # the learner's code called `entry`
            caller = caller.f_back
        name = getattr(entry.f_code, "co_qualname", entry.f_code.co_name)
        self.reached = f"{entry.f_globals.get('__name__', '?')}.{name}"


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


def call(fn, args: tuple, names: list[str], time_limit: float | None = None, watch: Watch | None = None) -> Outcome:
    """Call ``fn`` on a deep copy of ``args`` in the fixed state, within the time limit; never raises.

    The outcome's value is made plain (see ``plain``); an input the call changed in place is noted, and
    so is the first package function of ``watch`` that the call reached.
    """
    fresh = copy.deepcopy(args)
    limit = CALL_TIME_LIMIT_S if time_limit is None else time_limit
    with fixed_state():
        value, error, returned = _in_thread(limit, fn, fresh, watch)
    if error is not None:
        outcome = Outcome(error=error)
    else:
        try:
            outcome = Outcome(value=plain(value), returned=returned)
        except Exception as problem:
            outcome = Outcome(error=UnreadableOutput(f"{type(problem).__name__}: {problem}"))
    outcome.reached = None if watch is None else watch.reached
    for name, before, after in zip(names, args, fresh, strict=False):  # names also lists omitted optional arguments
        if not _same_input(before, after):
            outcome.changed_argument = name
            break
    return outcome


_GRACE_S = 0.5  # after a time-out, how long the check waits for the thread to end before giving up on it


class _Stopper:
    """The trace function of a worker thread: it watches for calls into package code and, once ``stop`` is
    called, raises ``TimedOut`` at every line and every call the thread runs.

    Python turns tracing off once a trace function raises, so that a learner's bare ``except:`` could catch
    that one exception and loop on untraced. So the exception raised here turns tracing back on when it
    dies, which is at the end of the ``except`` block that caught it: the next line raises again, and
    one raised inside an ``except`` block escapes it.
    """

    def __init__(self, watch: Watch | None, outermost):
        self.watch = watch
        self.outermost = outermost  # the code of the frame that calls the learner's function: never stopped
        self.stopped = False
        self.running = True
        self.ident: int | None = None  # the worker thread's, once it runs

    def trace(self, frame, event, arg):
        if self.stopped:
            if frame.f_code is _TimeUp.__del__.__code__:
                return None  # the exception that arms the next one must not raise while it does
            raise _TimeUp(self)
        if self.watch is not None and frame.f_code in self.watch.codes:
            self.watch.see(frame)
        return None  # no line events while the call runs: they would slow every line down

    def kill(self, frame, event, arg):
        raise _TimeUp(self)

    def stop(self, thread: threading.Thread) -> None:
        """Make every frame that ``thread`` runs above the outermost one raise ``TimedOut`` at its next line."""
        self.stopped = True
        frame = sys._current_frames().get(thread.ident)
        while frame is not None and frame.f_code is not self.outermost:
            frame.f_trace = self.kill
            frame = frame.f_back


class _TimeUp(TimedOut):
    """The ``TimedOut`` raised in a worker thread past its time limit: once caught and let go, it arms the next."""

    def __init__(self, stopper: _Stopper):
        super().__init__()
        self.stopper = stopper

    def __del__(self):
        # Tracing back on in the worker thread, from where it runs now. No Python call in here: once
        # tracing is on, the trace function would raise in it.
        stopper = self.stopper
        if not (stopper.stopped and stopper.running) or _thread.get_ident() != stopper.ident:
            return
        frame = sys._getframe(1)  # the frame that let go of the exception, then its callers
        while frame is not None and frame.f_code is not stopper.outermost:
            frame.f_trace = stopper.kill
            frame = frame.f_back
        sys.settrace(stopper.trace)


def _in_thread(limit: float, fn, args: tuple, watch: Watch | None):
    """Run ``fn(*args)`` in a worker thread: (value, error, returned type name), ``TimedOut`` past ``limit``."""
    result: dict = {}
    grad = torch.is_grad_enabled()
    stopper = _Stopper(watch, None)

    def work():
        stopper.ident = _thread.get_ident()
        try:
            torch.set_grad_enabled(grad)  # grad mode is per thread
            sys.settrace(stopper.trace)
            result["value"] = fn(*args)
        except BaseException as error:  # even SystemExit: a learner's `exit()` must not end the check
            result["error"] = error
        finally:
            stopper.running = False
            sys.settrace(None)

    stopper.outermost = work.__code__
    worker = threading.Thread(target=work, name="bertcourse-check", daemon=True)
    timed_out = True
    try:
        worker.start()
        worker.join(limit)
        timed_out = worker.is_alive()
    finally:
        if timed_out:  # past the limit, or the notebook's user interrupted the check
            stopper.stop(worker)
            worker.join(_GRACE_S)
    if timed_out:  # whatever the function did once it was stopped (caught it and returned, say)
        return None, TimedOut(), None
    if "error" in result:
        error = result["error"]
        return None, (TimedOut() if isinstance(error, TimedOut) else error), None
    value = result["value"]
    kind = type(value)
    returned = f"{kind.__module__}.{kind.__name__}" if kind.__module__ == "torch.return_types" else None
    return value, None, returned


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


def _equal_with_nan(before: torch.Tensor, after: torch.Tensor) -> bool:
    """``torch.equal``, but a NaN left where it was counts as unchanged (NaN never equals itself)."""
    if before.is_floating_point() or before.is_complex():
        return bool(torch.equal(before.isnan(), after.isnan()) and torch.equal(before.nan_to_num(), after.nan_to_num()))
    return torch.equal(before, after)


def _same_module(before: torch.nn.Module, after) -> bool:
    """The same mode (train or eval) in every submodule, and the same weights and buffers."""
    if not isinstance(after, torch.nn.Module):
        return False
    if [m.training for m in before.modules()] != [m.training for m in after.modules()]:
        return False
    theirs = after.state_dict()
    return before.state_dict().keys() == theirs.keys() and all(
        _equal_with_nan(value, theirs[key]) for key, value in before.state_dict().items()
    )


def _same_input(before, after) -> bool:
    try:
        if isinstance(before, torch.nn.Module):  # a model the case passes in: its mode and its weights
            return _same_module(before, after)
        if callable(before):
            return True  # a function the case passes in (a sub-layer, say): its copy never compares equal
        if isinstance(before, torch.Tensor):
            after = plain(after)
            return (
                isinstance(after, torch.Tensor)
                and before.shape == after.shape
                and before.dtype == after.dtype
                and _equal_with_nan(before, after)
            )
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
