"""Argument checks shared by every module: clear errors before any computation.

A learner who passes the wrong thing should read *which* argument was wrong, what
arrived and what was expected -- never a bare ``RuntimeError: mat1 and mat2 shapes
cannot be multiplied`` from deep inside PyTorch. Each check that several concepts share is written
once, here; a check about one concept lives beside it (``masks.require_mask_shape``, ``config.require_config``).

The rule, in three parts:

1. **The teaching line first.** A public concept function (``layer_norm``,
   ``split_heads``, ...) checks its arguments with these helpers, then calls its core
   ``_<name>`` in the same module: the formula as a textbook writes it, with a shape
   comment on every tensor line and no check at all. ``solution(name)`` shows that core.
2. **Check once, at the border.** A model (``BertModel``, the heads) checks its input
   once, values included; the modules inside (``EncoderLayer``, ``Encoder``,
   ``BertEmbeddings``) trust their callers and call the cores directly. The three layers
   a learner also calls on tensors of their own (``MultiHeadAttention``, ``LayerNorm``,
   ``FeedForward``) check only what their input's metadata says, with
   ``require_layer_input``: rank, width, dtype, a few comparisons of Python ints that read
   no value and that ``torch.compile`` folds into its guards. Constructors check their
   settings, since they run once.
3. **Values only where reading them is free.** Shapes and dtypes are known without
   touching the data, so those checks always run. A check that reads *values*
   (``int(ids.max())``, ``bool(mask.all())``) runs only when ``can_check_values(x)``:
   on the CPU, outside ``torch.compile``. On a GPU such a read waits for the device
   (a synchronisation); while compiling it would break the graph.
"""

from __future__ import annotations

import torch


def describe(x) -> str:
    """A short description of ``x`` for an error message: shape and dtype for tensors."""
    if isinstance(x, torch.Tensor):
        return f"a tensor of shape {tuple(x.shape)} and dtype {x.dtype}"
    return f"{type(x).__name__} {x!r}"[:120]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun that agrees with it, for a message: "1 token", "2 tokens", "0 tokens".

    ``plural`` is for a noun that does not just take an "s" (``counted(n, "query", "queries")``)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def can_check_values(x: torch.Tensor) -> bool:
    """Whether a check may read ``x``'s *values* (not just its shape) without a cost.

    Reading a value back (``int(ids.max())``, ``bool(mask.all())``) is free on the CPU, but on a
    GPU it waits for the device (a synchronisation), and under ``torch.compile`` it breaks the
    graph. So value checks run on CPU tensors outside compilation only; shape and dtype checks
    always run.
    """
    return x.device.type == "cpu" and not torch.compiler.is_compiling()


def is_int(value) -> bool:
    """Whether ``value`` is a Python int and not a bool (``True`` is an int to Python, not a size)."""
    return isinstance(value, int) and not isinstance(value, bool)


def require_positive_int(name: str, value) -> None:
    """Raise unless ``value`` is a positive Python int (sizes, head counts, lengths)."""
    if not is_int(value):
        raise TypeError(f"`{name}` must be a positive int, got {describe(value)}.")
    if value <= 0:
        raise ValueError(f"`{name}` must be a positive int, got {value}.")


def require_int_in_range(name: str, value, low: int, high: int) -> None:
    """Raise unless ``value`` is an int from ``low`` to ``high``, both included (a slider's initial value:
    one the slider could not show is an error, not a silent clamp)."""
    if not is_int(value) or not low <= value <= high:
        raise ValueError(f"`{name}` must be an int from {low} to {high}, got {value!r}.")


def require_seed(seed) -> None:
    """Raise unless ``seed`` is a non-negative int (``torch.manual_seed`` refuses negative ones)."""
    if not is_int(seed) or seed < 0:
        raise ValueError(f"`seed` must be a non-negative int, got {seed!r}.")


def require_index(name: str, value, size: int, what: str) -> None:
    """Raise unless ``value`` indexes one of the model's ``size`` ``what`` (layers, heads, tokens): 0 to size - 1."""
    if not is_int(value):
        raise TypeError(f"`{name}` must be an int, got {describe(value)}.")
    if not 0 <= value < size:
        raise ValueError(f"`{name}` must be from 0 to {size - 1} (the model has {size} {what}), got {value}.")


def require_probability(name: str, p) -> None:
    """Raise unless ``p`` is a probability in [0, 1) (dropout: 1 would drop everything)."""
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        raise TypeError(f"`{name}` must be a probability in [0, 1), got {describe(p)}.")
    if not 0.0 <= p < 1.0:
        raise ValueError(f"`{name}` must be a probability in [0, 1), got {p!r}.")


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


def require_float_tensor(
    name: str,
    x,
    *,
    min_dim: int | None = None,
    ndim: int | None = None,
    like: torch.Tensor | None = None,
    like_name: str = "",
) -> None:
    """Raise unless ``x`` is a tensor of the given rank holding floating-point numbers (of ``like``'s dtype)."""
    require_tensor(name, x, min_dim=min_dim, ndim=ndim)
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


def require_size(name: str, x: torch.Tensor, dim: int, size: int, expected: str) -> None:
    """Raise unless ``x.shape[dim] == size``; ``expected`` says it in words ("last dimension d = 8")."""
    if x.shape[dim] != size:
        raise ValueError(f"`{name}` must have {expected}, got {describe(x)}.")


HALF_DTYPES = (torch.float16, torch.bfloat16)


def require_layer_input(name: str, x, width: int, weight: torch.Tensor, *, ndim: int | None = None) -> None:
    """The border check of a layer's forward, on metadata only: a float tensor (of rank ``ndim``) whose last
    axis is the layer's ``width``, in the dtype of the layer's ``weight``. A half-precision input beside
    float32 weights is autocast at work (notebook 12) and passes."""
    require_float_tensor(name, x, ndim=ndim, min_dim=None if ndim else 1)
    if x.shape[-1] != width:
        raise ValueError(
            f"`{name}` must have last dimension d_model = {width}, the width this layer was built with, "
            f"got {describe(x)}."
        )
    if x.dtype != weight.dtype and x.dtype not in HALF_DTYPES and weight.dtype not in HALF_DTYPES:
        raise TypeError(
            f"`{name}` has dtype {x.dtype} but the layer's weights have {weight.dtype}: convert one of them, "
            f"e.g. `{name}.to({weight.dtype})` (or the layer with `.to({x.dtype})`)."
        )


def require_shape(name: str, x, shape: tuple[int, ...], *, symbols: str = "", why: str = "") -> None:
    """Raise unless ``x`` is a tensor of exactly ``shape``; ``symbols`` names the axes ("(d_model, d_ff)")."""
    require_tensor(name, x, ndim=len(shape))
    if tuple(x.shape) != tuple(shape):
        named = f"{symbols} = " if symbols else ""
        reason = f", {why}" if why else ""
        raise ValueError(f"`{name}` must have shape {named}{tuple(shape)}{reason}, got {describe(x)}.")


def require_mask(name: str, mask) -> None:
    """Raise unless ``mask`` is a boolean tensor or holds only 0/1 (1 = may attend).

    The 0/1 test reads values, so it runs only when ``can_check_values(mask)``.
    """
    require_tensor(name, mask)
    if mask.dtype == torch.bool or not can_check_values(mask):
        return
    if mask.numel() and not ((mask == 0) | (mask == 1)).all():
        values = torch.unique(mask)[:6].tolist()
        raise ValueError(
            f"`{name}` must be boolean or hold only 0/1 (1 = may attend), got values {values} "
            f"in {describe(mask)}. Additive masks (0 / -inf) are not accepted: pass `{name} == 0` instead."
        )


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


def require_sequence_fits(seq_len: int, max_position_embeddings: int, name: str = "input_ids") -> None:
    """Raise a ValueError that explains BERT's length limit when ``seq_len`` is past the position table."""
    if seq_len > max_position_embeddings:
        raise ValueError(
            f"`{name}` has {seq_len} tokens, but the model has learned positions only for "
            f"max_position_embeddings={max_position_embeddings} tokens: learned position embeddings "
            "cannot extrapolate. Truncate the input (tokenizer `max_length=...`) or split a long text "
            "into overlapping windows (a sliding window) and combine the results."
        )
