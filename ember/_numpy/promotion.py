"""Operand conversion, dtype promotion (JAX's lattice, weak Python scalars) and broadcasting for ember.numpy."""
from __future__ import annotations

import builtins
import warnings
from typing import Any, Sequence

import numpy as _np

from ember._core import dtypes as dt
from ember._core.config import config
from ember._core.primitive import user_stacklevel
from ember._runtime.array import asarray
from ember._core import ArrayMethods, ShapedArray, aval_of, is_python_scalar
from ember._core.dtypes import bool_
from ember._core import Literal
from ember import _prims as lax
from ember._core import scalar_literal


def _is_array(x: Any) -> bool:
    """A concrete Array or a tracer (the one base class of both: a single C-level check)."""
    return isinstance(x, ArrayMethods)


def _describe(x: Any) -> str:
    if isinstance(x, _np.ndarray):
        return f"a numpy array of shape {x.shape} and dtype {dt.describe_dtype(x.dtype)}"
    if isinstance(x, _np.generic):
        return f"a numpy {type(x).__name__} scalar"
    return f"a value of type {type(x).__name__} ({x!r:.60})"


def _as_operand(x: Any, name: str | None = None, index: int | None = None) -> Any:
    """Arrays and Python scalars pass through; numpy values (typed operands, of any byte order) are checked and
    pass through; nested lists become arrays. name and index (the op and the operand's position) go into errors."""
    if _is_array(x) or is_python_scalar(x) or isinstance(x, Literal):
        return x
    try:
        if isinstance(x, _np.ndarray | _np.generic):
            dt.parse_dtype(x.dtype)
            return x
        return asarray(x)
    except TypeError as err:
        if name is None:
            raise
        where = f"{name}: operand {index}" if index is not None else name
        raise TypeError(f"{where} is {_describe(x)}, which ember cannot use: {err}") from None


def result_type(*args: Any) -> _np.dtype:
    """The dtype numpy operations on args give (ember's promotion; a 64-bit result is narrowed to 32 bits
    without enable_x64, as jax.numpy.result_type's)."""
    return dt.canonical_dtype(dt.result_type(*args))


def promote_types(a: Any, b: Any) -> _np.dtype:
    """The dtype of an operation on arrays of dtypes a and b (the Python types int and float count as weak)."""
    return dt.promote_types(dt.dtype_and_weak(a), dt.dtype_and_weak(b))[0]


def _promote(name: str, *args: Any, inexact: bool = False) -> list[Any]:
    """Convert the operands to their common dtype (JAX's lattice with weak Python scalars and ember's 64-bit rule,
    see ember._core.dtypes); with inexact, to a floating-point one (int64 / int64 is float64, int32 / int32
    float32, as JAX's promote_args_inexact)."""
    args = [_as_operand(a, name, i) for i, a in enumerate(args)]
    typed = [dt.dtype_and_weak(a) for a in args]
    if not inexact and len({d for d, _ in typed}) == 1 and not builtins.any(is_python_scalar(a) for a in args):
        return args  # one dtype already
    target, weak = dt.promote_types(*typed)
    if inexact:
        target = dt.to_inexact_dtype(target, name)
    out = []
    for a, (d, w) in zip(args, typed):
        if is_python_scalar(a):
            out.append(scalar_literal(a, target, weak))
        elif d != target:
            out.append(lax.convert_element_type(a, target, weak))
        else:
            out.append(a)
    return out


def _literal_aval(typed: list[tuple[_np.dtype, bool]], inexact: bool = False) -> ShapedArray:
    """The aval of the literal _promote makes of a Python scalar among operands of these (dtype, weak type)s: the
    fast path of an eager elementwise operation (ember._runtime.eager.fast_binary) gives it that dtype."""
    target, weak = dt.promote_types(*typed)
    if inexact:
        target = dt.to_inexact_dtype(target)
    return ShapedArray((), target, weak)


def _broadcast_shapes(name: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """numpy's broadcasting of shapes (computed here: numpy's own refuses shapes too large to allocate)."""
    rank = builtins.max(map(len, shapes), default=0)
    result = []
    for dims in zip(*((1,) * (rank - len(s)) + tuple(s) for s in shapes)):
        sizes = set(dims) - {1}
        if len(sizes) > 1:  # (JAX's words)
            raise ValueError(f"{name}: Incompatible shapes for broadcasting: shapes=[{', '.join(map(str, shapes))}]")
        result.append(sizes.pop() if sizes else 1)
    return tuple(result)


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    return _broadcast_shapes("broadcast_shapes", *(tuple(s) for s in shapes))


def _broadcast_to_shape(x: Any, shape: tuple[int, ...]) -> Any:
    x_shape = aval_of(x).shape
    if x_shape == shape:
        return x
    lead = len(shape) - len(x_shape)
    squeezed = [i for i, d in enumerate(x_shape) if d == 1 and shape[lead + i] != 1]
    if squeezed:  # size-1 dims that stretch: drop them, then broadcast_in_dim adds them back at full size
        x = lax.reshape(x, tuple(d for i, d in enumerate(x_shape) if i not in squeezed))
    dims = tuple(lead + i for i in range(len(x_shape)) if i not in squeezed)
    return lax.broadcast_in_dim(x, shape, dims)


def _check_rank_promotion(name: str, shapes: Sequence[tuple[int, ...]]) -> None:
    """numpy_rank_promotion 'warn' or 'raise' (as JAX's): operands of different ranks, scalars aside."""
    mode = config.read_canonical("numpy_rank_promotion")
    if mode == "allow" or len({len(s) for s in shapes if s}) < 2:
        return
    listed = " ".join(map(str, shapes))
    if mode == "raise":
        raise ValueError(f"Operands could not be broadcast together for {name} on shapes {listed} and with the "
                         "config option numpy_rank_promotion='raise' (implicit rank promotion; expand the "
                         "dimensions explicitly, e.g. x[None, :], or set it to 'allow').")
    warnings.warn(f"Following NumPy automatic rank promotion for {name} on shapes {listed}. Set the "
                  "numpy_rank_promotion config option to 'allow' to disable this warning.",
                  stacklevel=user_stacklevel())  # (the user's line, outside ember)


def _elementwise(name: str, *args: Any, inexact: bool = False) -> list[Any]:
    """Promote (with inexact: to a floating-point dtype), then broadcast all non-scalar operands to the common
    shape (rank-0 operands broadcast inside the primitive, keeping the IR small)."""
    args = _promote(name, *args, inexact=inexact)
    shapes = [aval_of(a).shape for a in args]
    if len(set(shapes)) == 1:
        return args
    if len({len(s) for s in shapes}) > 1:
        _check_rank_promotion(name, shapes)
    elif len({s for s in shapes if s}) > 1 and any(len(set(d) - {1}) > 1 for d in zip(*shapes)):
        # operands of one rank go to lax as they are in JAX, whose error is then a TypeError
        raise TypeError(f"{name} got incompatible shapes for broadcasting: "
                        f"{', '.join(str(s) for s in shapes if s)}.")
    shape = _broadcast_shapes(name, *shapes)
    return [a if aval_of(a).shape == () else _broadcast_to_shape(a, shape) for a in args]


def _to_inexact(x: Any, name: str | None = None) -> Any:
    """x converted to a floating-point dtype if it is not one (int64 and uint64 to float64, narrower integers and
    booleans to float32, Python ints to the default float), keeping its weak type."""
    x = _as_operand(x, name, 0 if name else None)
    d, weak = dt.dtype_and_weak(x)
    if dt.is_inexact(d):
        return x
    if is_python_scalar(x):
        return scalar_literal(x, dt.to_inexact_dtype(d, name or ""), weak)
    return lax.convert_element_type(x, dt.to_inexact_dtype(d, name or ""), weak)


def _as_array(x: Any) -> Any:
    """x (an operand) as an ember array of its own dtype and weak type: Python scalars and numpy values are
    placed on the device, arrays and tracers pass through."""
    if is_python_scalar(x):
        return lax.convert_element_type(x, *dt.dtype_and_weak(x))
    if isinstance(x, _np.ndarray | _np.generic):
        return asarray(x)
    return x


def _operand_array(name: str, x: Any, index: int = 0) -> Any:
    """An operand of name (checked as _as_operand does), with a Python scalar made an array of its default dtype."""
    x = _as_operand(x, name, index)
    return _promote(name, x)[0] if is_python_scalar(x) else x


def _as_bool(x: Any) -> Any:
    x = _as_operand(x)
    if is_python_scalar(x):
        return bool(x)
    return x if aval_of(x).dtype == bool_ else lax.convert_element_type(x, bool_)


__all__ = ["broadcast_shapes", "promote_types", "result_type"]
