"""Argument checks shared by every module: clear errors before any computation.

A learner who passes the wrong thing should read *which* argument was wrong, what
arrived and what was expected -- never a bare ``RuntimeError: mat1 and mat2 shapes
cannot be multiplied`` from deep inside PyTorch. Every public function of the
package calls these helpers first, so nothing is half-computed when an error is raised.
"""

from __future__ import annotations

import torch


def describe(x) -> str:
    """A short description of ``x`` for an error message: shape and dtype for tensors."""
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)} and dtype {x.dtype}"
    return f"{type(x).__name__} {x!r}"[:120]


def require_tensor(name: str, x, *, min_dim: int | None = None, ndim: int | None = None) -> None:
    """Raise ``TypeError`` unless ``x`` is a tensor, ``ValueError`` unless its rank fits."""
    if not isinstance(x, torch.Tensor):
        hint = ""
        if isinstance(x, (list, tuple)) or type(x).__module__ == "numpy":
            hint = " Convert it with `torch.tensor(...)` (or `torch.from_numpy(...)` for a NumPy array)."
        raise TypeError(f"`{name}` must be a torch.Tensor, got {describe(x)}.{hint}")
    if ndim is not None and x.dim() != ndim:
        raise ValueError(f"`{name}` must have {ndim} dimensions, got {describe(x)}.")
    if min_dim is not None and x.dim() < min_dim:
        raise ValueError(f"`{name}` must have at least {min_dim} dimensions, got {describe(x)}.")


def require_float_tensor(name: str, x, *, like: torch.Tensor | None = None, like_name: str = "") -> None:
    """Raise ``TypeError`` unless ``x`` holds floating-point numbers (of ``like``'s dtype, if given)."""
    require_tensor(name, x)
    if not x.dtype.is_floating_point:
        raise TypeError(f"`{name}` must hold floating-point numbers, got {describe(x)}. Convert it with `.float()`.")
    if like is not None and x.dtype != like.dtype:
        raise TypeError(
            f"`{name}` has dtype {x.dtype} but {like_name} has {like.dtype}: convert one of them, "
            f"e.g. `{name}.to({like.dtype})` (or a model with `model.to({x.dtype})`)."
        )


def require_integer_tensor(name: str, x, hint: str = "") -> None:
    """Raise ``TypeError`` unless ``x`` is a torch.long or torch.int tensor (token ids, lengths)."""
    require_tensor(name, x)
    if x.dtype not in (torch.long, torch.int):
        raise TypeError(f"`{name}` must hold integers (torch.long), got {describe(x)}. {hint}".rstrip())


def require_positive_int(name: str, value) -> None:
    """Raise unless ``value`` is a positive Python int (sizes, head counts, lengths)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"`{name}` must be a positive int, got {describe(value)}.")
    if value <= 0:
        raise ValueError(f"`{name}` must be a positive int, got {value}.")


def require_divisible(d_model: int, num_heads: int) -> None:
    """Raise unless the model width splits evenly into heads (768 = 12 x 64 does; 512 / 12 does not)."""
    require_positive_int("d_model", d_model)
    require_positive_int("num_heads", num_heads)
    if d_model % num_heads:
        raise ValueError(
            f"`d_model`={d_model} is not divisible by `num_heads`={num_heads}: each head gets "
            f"d_model / num_heads = {d_model / num_heads:.2f} features, which must be a whole number. "
            "BERT-base uses d_model=768 with 12 heads of 64."
        )


def can_check_values(x: torch.Tensor) -> bool:
    """Whether a check may read ``x``'s *values* (not just its shape) without a cost.

    Reading a value back (``int(ids.max())``, ``bool(mask.all())``) is free on the CPU, but on a
    GPU it waits for the device (a synchronisation), and under ``torch.compile`` it breaks the
    graph. So value checks run on CPU tensors outside compilation only; shape and dtype checks
    always run.
    """
    return x.device.type == "cpu" and not torch.compiler.is_compiling()
