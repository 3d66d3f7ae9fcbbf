"""Lower precision: what fp16 and bf16 keep and lose, what ``torch.autocast`` changes, and loss scaling.

Three 16-bit facts carry the whole lesson:

- **fp16** has 10 mantissa bits (about 3.3 decimal digits) but 5 exponent bits: nothing above 65,504
  (a value from 65,520 up becomes inf), normal numbers only down to 2^-14 (6.1e-5); below that the
  *subnormals* keep fewer and fewer bits, down to 2^-24 (6e-8); anything at or below 2^-25 is 0.
  Small gradients lose their digits, then vanish.
- **bf16** has fp32's 8 exponent bits (the same range, up to 3.4e38) but only 7 mantissa bits (about
  2.4 decimal digits): 1 + 2^-8 rounds back to 1. Nothing overflows or underflows that would not in fp32.
- ``torch.autocast(device_type, dtype)`` runs chosen ops (matrix products, linear layers) in the
  lower precision, casts the inputs of a few others (the losses) up to fp32, and lets the rest run in
  the dtype they receive; the weights stay fp32. Which ops go where is a per-device policy: on CUDA,
  softmax and LayerNorm are cast up to fp32; on the CPU they are not, so a LayerNorm that reads a bf16
  tensor runs in bf16 (``autocast_dtypes`` shows it on a real model).

**Loss scaling** is fp16's answer to underflow: multiply the loss by a large factor S before
``backward`` (every gradient is then S times larger and clears 2^-24), divide the gradients by S
before the optimizer step, and skip the step when a gradient overflowed to inf or NaN, halving S;
after ``growth_interval`` good steps, double S. ``LossScaler`` writes those four moves out, with
GradScaler's arithmetic (the scale kept as an fp32 number, the gradients multiplied by its fp32
reciprocal), so that it takes the same steps to the bit as ``torch.amp.GradScaler`` for any scale.
``format_fates`` says what a format does to a tensor of gradients at a given scale (flushed to 0,
subnormal, overflowing), ``flat_gradients`` takes a model's gradients under autocast, and
``train_in_precision`` trains with or without a scaler and counts the gradient entries that came out
0. bf16 needs no scaler: its range is fp32's.

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
        "decimal_digits": (mantissa_bits + 1) * math.log10(2),  # the stored bits and the implicit leading 1
    }


def round_trip(values, dtype: torch.dtype) -> list[float]:
    """Each value stored in ``dtype`` and read back as a Python float: what that format keeps of it."""
    format_facts(dtype)  # checks the dtype
    return torch.tensor(values, dtype=torch.float64).to(dtype).double().tolist()


def neighbours(value, dtype: torch.dtype) -> dict:
    """What ``dtype`` makes of one number: {"stored": the value it keeps, "below" and "above": the two
    representable numbers around ``value`` (equal to "stored" when it is exact), "relative_error" of the
    stored value, "fate": "normal", "subnormal" (fewer mantissa bits), "flushed to 0", "overflow" (inf)
    or "zero"}. ``value`` is a Python number."""
    format_facts(dtype)  # checks the dtype
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"`value` must be a finite Python number, got {describe(value)}.")
    exact = torch.tensor(value, dtype=torch.float64)  # () the number asked about
    stored = exact.to(dtype)  # () rounded to the nearest number of the format
    if math.isinf(float(stored)):
        below = torch.tensor(math.copysign(torch.finfo(dtype).max, value), dtype=dtype)
        above = torch.tensor(math.copysign(math.inf, value), dtype=dtype)
    else:
        towards = torch.tensor(math.inf if float(stored) < value else -math.inf, dtype=dtype)
        other = stored if float(stored) == value else torch.nextafter(stored, towards)  # () the other side
        below, above = sorted((stored, other), key=float)
    fate = _fate(value, float(stored), format_facts(dtype)["smallest_normal"])
    error = abs(float(stored) - value) / abs(value) if value else 0.0
    return {
        "value": value,
        "stored": float(stored),
        "below": float(below),
        "above": float(above),
        "relative_error": error,
        "fate": fate,
    }


def _fate(value: float, stored: float, smallest_normal: float) -> str:
    if value == 0:
        return "zero"
    if math.isinf(stored):
        return "overflow"
    if stored == 0:
        return "flushed to 0"
    return "subnormal" if abs(stored) < smallest_normal else "normal"


FATES = ("zero", "flushed to 0", "subnormal", "normal", "overflow")


def format_fates(values: torch.Tensor, dtype: torch.dtype, scale: float = 1.0) -> dict[str, float]:
    """The fraction of the entries of ``values`` (e.g. a model's gradients, in fp32) that meet each fate
    when multiplied by ``scale`` (a loss scale) and stored in ``dtype``: "zero" (0 already), "flushed to 0"
    (not 0, stored as 0), "subnormal" (below the smallest normal number: fewer mantissa bits), "normal" and
    "overflow" (finite, stored as inf). The fractions add up to 1."""
    require_float_tensor("values", values)
    format_facts(dtype)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
        raise ValueError(f"`scale` must be a positive number, got {scale!r}.")
    exact = values.detach().double().flatten() * scale  # (n,) what the scaled backward would compute
    stored = exact.to(dtype).double()  # (n,) what the format keeps of it
    smallest_normal = format_facts(dtype)["smallest_normal"]
    zero = exact == 0
    overflow = stored.isinf() & exact.isfinite()
    flushed = (stored == 0) & ~zero
    subnormal = (stored != 0) & (stored.abs() < smallest_normal)
    normal = ~(zero | overflow | flushed | subnormal)
    counts = (zero, flushed, subnormal, normal, overflow)
    return {fate: float(mask.double().mean()) for fate, mask in zip(FATES, counts, strict=True)}


def flat_gradients(model, batch: dict, autocast_dtype: torch.dtype | None = None, scale: float = 1.0) -> torch.Tensor:
    """Every parameter's gradient of ``model(**batch).loss`` in one fp32 vector (n_parameters,), taken under
    ``torch.autocast("cpu", autocast_dtype)`` (none when None) with the loss multiplied by ``scale`` before
    ``backward`` and the gradients divided by it after: what an optimizer would see. The model's own
    ``.grad`` are left as they were before the call."""
    if autocast_dtype is not None:
        format_facts(autocast_dtype)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
        raise ValueError(f"`scale` must be a positive number, got {scale!r}.")
    parameters = [p for p in model.parameters() if p.requires_grad]
    saved = [p.grad for p in parameters]
    for p in parameters:
        p.grad = None
    try:
        with torch.autocast("cpu", dtype=autocast_dtype, enabled=autocast_dtype is not None):
            loss = model(**batch).loss  # () fp32: autocast runs the loss in fp32
        (loss * scale).backward()
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in parameters]
        return torch.cat([g.detach().float().flatten() for g in grads]) / scale  # (n_parameters,)
    finally:
        for p, grad in zip(parameters, saved, strict=True):
            p.grad = grad


def train_in_precision(model, batches, optimizer, autocast_dtype: torch.dtype | None = None, scaler=None) -> dict:
    """09's ``train_step`` on each batch of ``batches`` (no clipping), under autocast in ``autocast_dtype``
    (fp32 when None), with ``scaler`` (a ``LossScaler`` or ``torch.amp.GradScaler``) or without. Returns
    {"loss": per step, "zero_fraction": per step, the fraction of gradient entries that reached the
    optimizer as exactly 0, "scale": per step, the scale after the step (None without a scaler)}."""
    from .training import train_step

    record = {"loss": [], "zero_fraction": [], "scale": []}
    for batch in batches:
        values = train_step(model, batch, optimizer, clip_norm=None, autocast_dtype=autocast_dtype, scaler=scaler)
        grads = [p.grad.flatten() for p in model.parameters() if p.grad is not None]  # the unscaled gradients
        zeros = sum(int((g == 0).sum()) for g in grads) / sum(g.numel() for g in grads)
        record["loss"].append(values["loss"])
        record["zero_fraction"].append(zeros)
        record["scale"].append(None if scaler is None else float(scaler.get_scale()))
    return record


def safe_loss_scale(gradients: torch.Tensor) -> tuple[float, float]:
    """The largest power-of-two loss scale 2^k (k an int from -24 to 40) at which none of ``gradients``
    (an fp32 tensor of true, unscaled gradients) overflows when multiplied by it and stored in fp16, and
    the fraction of the non-zero gradients that fp16 still flushes to 0 at that scale.

    Returns (the scale as a float, the fraction as a float; 0.0 when every gradient is 0). What a dynamic
    scaler is looking for by trial and error, computed in one go from the gradients themselves.
    """
    require_float_tensor("gradients", gradients)
    if not bool(torch.isfinite(gradients).all()):
        raise ValueError("`gradients` must be finite: no scale can make an inf or NaN gradient fit.")
    return _safe_loss_scale(gradients)


def _safe_loss_scale(gradients):
    largest = gradients.detach().abs().max().double()  # () the gradient that overflows first
    k = 40
    while k > -24 and torch.isinf((largest * 2.0**k).half()):  # fp16 rounds 65,520 and above to inf
        k -= 1
    scaled = (gradients.detach().double() * 2.0**k).half()  # what fp16 keeps of the scaled gradients
    nonzero = gradients != 0
    flushed = (scaled == 0) & nonzero  # not 0 in fp32, 0 in fp16
    fraction = float(flushed.sum()) / int(nonzero.sum()) if bool(nonzero.any()) else 0.0
    return 2.0**k, fraction


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
    """Dynamic loss scaling written out: the four moves of ``torch.amp.GradScaler``, with its arithmetic.

    Use it as GradScaler is used::

        scaler.scale(loss).backward()   # gradients come out `scale` times too large
        scaler.unscale_(optimizer)      # multiply them by 1 / scale (clip the gradient norm after this)
        scaler.step(optimizer)          # skipped when a gradient is inf or NaN
        scaler.update()                 # halve the scale after a skip; double it after
                                        # `growth_interval` good steps in a row

    The scale is an fp32 number, as in GradScaler: ``init_scale=0.1`` keeps fp32's 0.1 (0.10000000149...),
    not Python's. Unscaling multiplies by the fp32 reciprocal of the scale (computed in float64, then
    rounded), as GradScaler does; dividing by the scale instead rounds differently unless the scale is a
    power of two, and the two scalers would drift apart by one bit at a time.
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
    ):
        if isinstance(init_scale, bool) or not (isinstance(init_scale, (int, float)) and init_scale > 0):
            raise ValueError(f"`init_scale` must be a positive number, got {init_scale!r}.")
        if isinstance(growth_factor, bool) or not (isinstance(growth_factor, (int, float)) and growth_factor > 1):
            raise ValueError(f"`growth_factor` must be above 1, got {growth_factor!r}.")
        if isinstance(backoff_factor, bool) or not (
            isinstance(backoff_factor, (int, float)) and 0 < backoff_factor < 1
        ):
            raise ValueError(f"`backoff_factor` must be between 0 and 1, got {backoff_factor!r}.")
        require_positive_int("growth_interval", growth_interval)
        self._scale = torch.tensor(float(init_scale), dtype=torch.float32)  # () fp32, as GradScaler keeps it
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = growth_interval
        self.good_steps = 0  # good steps in a row since the scale last changed
        self.found_inf = False
        self.skipped_steps = 0
        self._unscaled = False

    @property
    def scale_value(self) -> float:
        return float(self._scale)

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        return loss * self._scale.to(loss.device)  # () : every gradient of it is `scale` times larger

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        """Multiply every gradient by 1 / scale, and note whether any scaled gradient is inf or NaN."""
        if self._unscaled:
            raise RuntimeError("unscale_() was already called since the last update(): call it once per step.")
        inverse = self._scale.double().reciprocal().float()  # () 1 / scale, rounded once to fp32
        self.found_inf = False
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                self.found_inf |= not bool(torch.isfinite(p.grad).all())  # inf or NaN: this step is lost
                p.grad.mul_(inverse.to(p.grad.device))
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
        """Back off after an overflow; grow after ``growth_interval`` good steps in a row (unless the
        grown scale would be inf in fp32)."""
        if self.found_inf:
            self._scale = self._rounded(self.backoff_factor)
            self.good_steps = 0
        else:
            self.good_steps += 1
            if self.good_steps == self.growth_interval:
                grown = self._rounded(self.growth_factor)
                if bool(torch.isfinite(grown)):
                    self._scale = grown
                self.good_steps = 0
        self._unscaled = False

    def _rounded(self, factor: float) -> torch.Tensor:
        """scale x factor, in float64 and then rounded to fp32: GradScaler's update does the same."""
        return torch.tensor(float(self._scale) * factor, dtype=torch.float32)

    def get_scale(self) -> float:
        return float(self._scale)


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
