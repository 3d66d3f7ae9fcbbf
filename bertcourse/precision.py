"""Lower precision: what fp16 and bf16 keep and lose, what ``torch.autocast`` changes, and loss scaling.

Three 16-bit facts carry the whole lesson:

- **fp16** has 10 mantissa bits (fine steps) but 5 exponent bits: nothing above 65,504, and
  nothing below about 6e-8 (2^-24, its smallest subnormal). Small gradients underflow to 0.
- **bf16** has fp32's 8 exponent bits (the same range, up to 3.4e38) but only 7 mantissa bits:
  1 + 2^-8 rounds back to 1. Nothing overflows or underflows that would not in fp32.
- ``torch.autocast(device_type, dtype)`` runs chosen ops (matrix products, linear layers) in the
  lower precision and keeps others (reductions, norms, losses) in fp32; the weights stay fp32.
  Which ops go where is a per-device policy: ``autocast_dtypes`` shows it on a real model.

**Loss scaling** is fp16's answer to underflow: multiply the loss by a large factor S before
``backward`` (every gradient is then S times larger and clears 2^-24), divide the gradients by S
before the optimizer step, and skip the step when a gradient overflowed to inf or NaN, halving S;
after ``growth_interval`` good steps, double S. ``LossScaler`` writes those four moves out; a test
shows it takes the same steps, skips the same ones and keeps the same scale as
``torch.amp.GradScaler``. bf16 needs none of it: its range is fp32's.

``torch.cuda.amp.autocast`` and ``torch.cuda.amp.GradScaler`` (what many tutorials, and one of
the course's seed articles, import) are deprecated: ``torch.autocast("cuda", ...)`` and
``torch.amp.GradScaler("cuda")`` are the same thing for every device.
"""

from __future__ import annotations

import math
from collections import Counter

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ._validation import describe, require_float_tensor, require_positive_int

PRECISIONS = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def precision_dtype(name: str) -> torch.dtype:
    """``"fp32"``, ``"fp16"`` or ``"bf16"`` -> the torch dtype; any other name is explained."""
    if name not in PRECISIONS:
        raise ValueError(f"`precision` must be one of {sorted(PRECISIONS)}, got {name!r}.")
    return PRECISIONS[name]


def format_facts(dtype: torch.dtype) -> dict[str, float | int]:
    """Range and precision of a floating-point dtype, from ``torch.finfo``: largest value, smallest
    normal and subnormal numbers, the gap after 1 (eps), and the bits of exponent and mantissa."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"`dtype` must be a floating-point torch.dtype, got {describe(dtype)}.")
    info = torch.finfo(dtype)
    mantissa_bits = round(-math.log2(info.eps))
    return {
        "max": info.max,
        "smallest_normal": info.smallest_normal,
        "smallest_subnormal": info.smallest_normal * info.eps,
        "eps": info.eps,
        "exponent_bits": info.bits - 1 - mantissa_bits,
        "mantissa_bits": mantissa_bits,
    }


def round_trip(values, dtype: torch.dtype) -> list[float]:
    """Each value stored in ``dtype`` and read back as a Python float: what that format keeps of it."""
    format_facts(dtype)  # checks the dtype
    return torch.tensor(values, dtype=torch.float64).to(dtype).double().tolist()


class _OpDtypes(TorchDispatchMode):
    """Records the dtype each ATen op returns, below autocast (so after its casts)."""

    def __init__(self):
        super().__init__()
        self.seen: Counter = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        first = out[0] if isinstance(out, (tuple, list)) and out else out
        if isinstance(first, torch.Tensor) and first.dtype.is_floating_point:
            self.seen[(func.overloadpacket.__name__, first.dtype)] += 1
        return out


def autocast_dtypes(run, device_type: str = "cpu", dtype: torch.dtype | None = torch.bfloat16) -> dict[str, list]:
    """The output dtype of every floating-point ATen op that ``run()`` executes, under
    ``torch.autocast(device_type, dtype)`` (or without autocast when ``dtype`` is None).

    Returns {op name: sorted list of the dtypes it produced}, e.g. ``{"mm": [torch.bfloat16],
    "native_layer_norm": [torch.float32], ...}``. ``run`` is a function of no arguments, such as
    ``lambda: model(**batch)``.
    """
    if not callable(run):
        raise TypeError(
            f"`run` must be a function of no arguments, e.g. `lambda: model(**batch)`, got {describe(run)}."
        )
    if dtype is not None:
        format_facts(dtype)
    recorder = _OpDtypes()
    with torch.autocast(device_type=device_type, dtype=dtype, enabled=dtype is not None), recorder:
        run()
    found: dict[str, set] = {}
    for op, op_dtype in recorder.seen:
        found.setdefault(op, set()).add(op_dtype)
    return {op: sorted(dtypes, key=str) for op, dtypes in sorted(found.items())}


class LossScaler:
    """Dynamic loss scaling written out: the four moves of ``torch.amp.GradScaler``.

    Use it as GradScaler is used::

        scaler.scale(loss).backward()   # gradients come out `scale` times too large
        scaler.unscale_(optimizer)      # divide them back (clip the gradient norm after this)
        scaler.step(optimizer)          # skipped when a gradient is inf or NaN
        scaler.update()                 # halve the scale after a skip; double it after
                                        # `growth_interval` good steps in a row
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
    ):
        if not (isinstance(init_scale, (int, float)) and init_scale > 0):
            raise ValueError(f"`init_scale` must be a positive number, got {init_scale!r}.")
        if not (isinstance(growth_factor, (int, float)) and growth_factor > 1):
            raise ValueError(f"`growth_factor` must be above 1, got {growth_factor!r}.")
        if not (isinstance(backoff_factor, (int, float)) and 0 < backoff_factor < 1):
            raise ValueError(f"`backoff_factor` must be between 0 and 1, got {backoff_factor!r}.")
        require_positive_int("growth_interval", growth_interval)
        self.scale_value = float(init_scale)
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = growth_interval
        self.good_steps = 0  # good steps in a row since the scale last changed
        self.found_inf = False
        self.skipped_steps = 0
        self._unscaled = False

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self.scale_value  # () : every gradient of it is `scale` times larger

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        """Divide every gradient by the scale, and note whether any of them is inf or NaN."""
        if self._unscaled:
            raise RuntimeError("unscale_() was already called since the last update(): call it once per step.")
        self.found_inf = False
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.grad.div_(self.scale_value)
                self.found_inf |= not bool(torch.isfinite(p.grad).all())
        self._unscaled = True

    def step(self, optimizer: torch.optim.Optimizer) -> bool:
        """The optimizer's step, unless a gradient overflowed; returns whether the step was taken."""
        if not self._unscaled:
            self.unscale_(optimizer)
        if self.found_inf:
            self.skipped_steps += 1
            return False
        optimizer.step()
        return True

    def update(self) -> None:
        """Back off after an overflow; grow after ``growth_interval`` good steps in a row."""
        if self.found_inf:
            self.scale_value *= self.backoff_factor
            self.good_steps = 0
        else:
            self.good_steps += 1
            if self.good_steps == self.growth_interval:
                self.scale_value *= self.growth_factor
                self.good_steps = 0
        self._unscaled = False

    def get_scale(self) -> float:
        return self.scale_value


def training_step_cost(model, batch: dict, precision: str = "fp32", repeats: int = 5) -> dict[str, float]:
    """One training step of ``model`` on ``batch`` (09's ``train_step``, SGD with learning rate 0 so
    the weights do not move) in ``precision``: {"seconds": the median of ``repeats`` timed steps
    after one warm-up step, "peak_bytes": the allocator's peak during one step}."""
    import time

    from .long_inputs.memory import peak_memory
    from .training import train_step

    dtype = precision_dtype(precision)
    require_positive_int("repeats", repeats)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)

    def step():
        train_step(model, batch, optimizer, clip_norm=None, autocast_dtype=None if dtype is torch.float32 else dtype)

    step()  # warm-up: the first call allocates and, under autocast, casts the weights
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    optimizer.zero_grad(set_to_none=True)  # the profiler sees only blocks allocated inside the step
    return {"seconds": sorted(times)[len(times) // 2], "peak_bytes": peak_memory(step)}


def average_gradients(replica_gradients: torch.Tensor) -> torch.Tensor:
    """What DDP's all-reduce leaves on every replica, simulated in one process.

    ``replica_gradients`` (world_size, ...): row r is replica r's gradient. Returns a tensor of the
    same shape in which every row is the mean of the rows: ``dist.all_reduce(grad)`` (a sum, by
    default) on each replica, then ``grad /= world_size``.
    """
    require_float_tensor("replica_gradients", replica_gradients, min_dim=1)
    return _average_gradients(replica_gradients)


def _average_gradients(replica_gradients):
    world_size = replica_gradients.shape[0]
    total = replica_gradients.sum(dim=0, keepdim=True)  # (1, ...) what all_reduce(SUM) gives every replica
    return (total / world_size).expand_as(replica_gradients).clone()  # (world_size, ...) the same mean on each


def scaler_update(
    scaled_gradients: torch.Tensor, scale: float, good_steps: int, growth_interval: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One step of dynamic loss scaling on one gradient tensor, as ``LossScaler`` and GradScaler do it.

    Returns (the gradients divided by ``scale``, the next scale, the next count of good steps in a
    row): after an inf or NaN the scale halves and the count restarts at 0; otherwise the count
    grows, and when it reaches ``growth_interval`` the scale doubles and the count restarts at 0.
    The scale and the count come back as 0-dim tensors (float32 and int64).
    """
    require_float_tensor("scaled_gradients", scaled_gradients)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
        raise ValueError(f"`scale` must be a positive number, got {scale!r}.")
    require_positive_int("growth_interval", growth_interval)
    if isinstance(good_steps, bool) or not isinstance(good_steps, int) or not 0 <= good_steps < growth_interval:
        raise ValueError(f"`good_steps` must be an int from 0 to growth_interval - 1, got {good_steps!r}.")
    return _scaler_update(scaled_gradients, scale, good_steps, growth_interval)


def _scaler_update(scaled_gradients, scale, good_steps, growth_interval):
    unscaled = scaled_gradients / scale  # (...) the true gradients
    overflow = not bool(torch.isfinite(unscaled).all())  # an inf or NaN anywhere: skip this step
    if overflow:
        scale, good_steps = scale * 0.5, 0  # back off
    elif good_steps + 1 == growth_interval:
        scale, good_steps = scale * 2.0, 0  # growth_interval good steps in a row: try a larger scale
    else:
        good_steps += 1
    return unscaled, torch.tensor(scale, dtype=torch.float32), torch.tensor(good_steps)
