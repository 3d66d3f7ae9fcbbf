"""Start a multi-process job from Python, and never leave a process behind.

``run_job(command, timeout)`` starts the command in a new process group (``start_new_session``),
captures its output, and kills the whole group when it returns, fails or runs past ``timeout``:
torchrun's workers are the launcher's children, and killing only the launcher would leave them
running, blocked in a collective, holding the cores. A worker that raised prints
``WORKER FAILED rank=R: <error>`` (``train.main``); ``run_job`` raises ``WorkerError`` naming
that rank and error, instead of torchrun's long report. A worker that crashed outside Python (a C++
exception in a communication thread, a segfault) has no Python error to name: the ``RuntimeError``
quotes the lines where it said why, which torchrun's report leaves out. A job that does not end in
time raises ``JobTimeout``: a hang becomes an error.

``torchrun_command(nproc, module, args)`` builds ``python -m torch.distributed.run --standalone
--nproc_per_node=N -m module ...``: CPU ranks with gloo, whether or not a GPU is visible, unless
``gpus=True`` (then ``--device cuda`` for the module: nccl, one GPU per rank). It refuses more processes
than this machine has CPU cores (or GPUs, when asked for): ranks sharing a device only slow each other down.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys

import torch

from .._validation import require_positive_int

FAILURE = re.compile(r"WORKER FAILED rank=(\d+): (.*)")
NATIVE_CRASH = re.compile(r"terminate called|what\(\):|Fatal Python error|Segmentation fault")


class WorkerError(RuntimeError):
    """A rank of the job raised; ``rank`` and ``error`` say which and what."""

    def __init__(self, rank: int, error: str, output: str):
        super().__init__(f"rank {rank} failed: {error}")
        self.rank, self.error, self.output = rank, error, output


class JobTimeout(RuntimeError):
    """The job ran past its timeout; its processes were killed."""


def available_slots(gpus: bool = False) -> tuple[int, str]:
    """(how many ranks this machine can run one per device, what the devices are): GPUs if ``gpus``."""
    if gpus:
        return (torch.cuda.device_count() if torch.cuda.is_available() else 0), "GPUs"
    return os.cpu_count() or 1, "CPU cores"


def torchrun_command(nproc: int, module: str, args=(), *, gpus: bool = False) -> list[str]:
    """``python -m torch.distributed.run --standalone --nproc_per_node=nproc -m module *args``.

    The ranks run on the CPU (gloo) even where a GPU is visible; ``gpus=True`` adds ``--device cuda``
    to the module's arguments (``train`` and ``accelerate_train`` read it: nccl, one GPU per rank)."""
    require_positive_int("nproc", nproc)
    slots, what = available_slots(gpus)
    if nproc > slots:
        raise ValueError(
            f"`nproc`={nproc} is more processes than this machine's {slots} {what}: "
            f"ranks sharing a device only slow each other down; use at most {slots}."
        )
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    return [*launcher, "-m", module, *(str(a) for a in args), *(["--device", "cuda"] if gpus else [])]


def run_job(command: list[str], timeout: float = 60.0) -> str:
    """Run ``command`` with a timeout in its own process group; return its output (stdout and stderr).

    Raises ``WorkerError`` when a worker reported an exception, ``JobTimeout`` past ``timeout``
    seconds, ``RuntimeError`` for any other failure. The process group is killed in every case.
    """
    if not (isinstance(command, list) and command and all(isinstance(part, str) for part in command)):
        raise TypeError(f"`command` must be a non-empty list of strings, got {command!r}.")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"`timeout` must be a positive number of seconds, got {timeout!r}.")
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}  # torchrun's default, said
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True, env=env
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        output, _ = process.communicate()
        raise JobTimeout(
            f"the job did not finish within {timeout} s; its processes were killed. Last output:\n{output[-2000:]}"
        ) from None
    finally:
        _kill_group(process)
    if process.returncode != 0:
        failure = FAILURE.search(output)
        if failure:
            raise WorkerError(int(failure.group(1)), failure.group(2).strip(), output)
        crash = "".join(f"\n  {line}" for line in output.splitlines() if NATIVE_CRASH.search(line))
        cause = f" A process crashed outside Python:{crash}" if crash else ""
        raise RuntimeError(f"the job exited with code {process.returncode}.{cause} Last output:\n{output[-2000:]}")
    return output


def _kill_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group has already exited
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
