"""Shared helpers for writing primitive rules: argument checks with clear errors, scalar coercion."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember import _dtypes as dt
from ember._core import Tracer, aval_of, is_python_scalar
from ember._dtypes import ShapedArray
from ember._ir import Literal


def describe(aval: ShapedArray) -> str:
    return aval.str_short()


def check_dtype(op: str, aval: ShapedArray, allowed: str, arg: str = "operand") -> None:
    """allowed: a string of kinds, 'f' float, 'i' signed int, 'u' unsigned int, 'b' bool."""
    kind = ("f" if dt.is_float(aval.dtype) else "b" if dt.is_bool(aval.dtype)
            else "i" if dt.is_signed_int(aval.dtype) else "u")
    if kind not in allowed:
        names = {"f": "floating-point", "i": "signed integer", "u": "unsigned integer", "b": "boolean"}
        wanted = " or ".join(names[k] for k in allowed)
        raise TypeError(f"{op}: {arg} must be {wanted}, got {describe(aval)}")


def check_same_dtypes(op: str, avals: Sequence[ShapedArray]) -> None:
    if len({a.dtype for a in avals}) > 1:
        got = ", ".join(describe(a) for a in avals)
        raise TypeError(f"{op}: operands must have the same dtype, got {got} "
                        "(use ember.numpy for automatic promotion, or lax.convert_element_type)")


def elementwise_shape(op: str, avals: Sequence[ShapedArray]) -> tuple[int, ...]:
    """Operands of an elementwise op have one shape, except that rank-0 operands broadcast."""
    shapes = {a.shape for a in avals if a.shape != ()}
    if len(shapes) > 1:
        got = ", ".join(describe(a) for a in avals)
        raise TypeError(f"{op}: operands must have equal shapes (or be scalars), got {got} "
                        "(use ember.numpy for numpy-style broadcasting)")
    return shapes.pop() if shapes else ()


def all_weak(avals: Sequence[ShapedArray]) -> bool:
    return all(a.weak_type for a in avals)


def coerce_scalars(op: str, args: Sequence[Any]) -> list[Any]:
    """Python scalars given to a strict lax op take the dtype of the op's array operands (weakly, like JAX)."""
    ref = next((aval_of(a) for a in args if not is_python_scalar(a)), None)
    if ref is None:
        return list(args)
    return [weak_scalar(a, ref.dtype, ref.weak_type) if is_python_scalar(a) else a for a in args]


def weak_scalar(value: Any, dtype: np.dtype, weak: bool = True) -> Literal:
    """A scalar literal of a given dtype, weakly typed by default."""
    dtype = dt.canonicalize_dtype(dtype)
    if type(value) is int and dt.is_int(dtype):
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise OverflowError(f"Python int {value} is too large to convert to {dtype.name}")
    return Literal(np.asarray(value).astype(dtype)[()], ShapedArray((), dtype, weak))


def static_int(op: str, name: str, value: Any) -> int:
    if isinstance(value, Tracer):
        raise TypeError(f"{op}: {name} must be a static Python int, got a traced value {value!r}")
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{op}: {name} must be an int, got {value!r}")
    return int(value)


def static_ints(op: str, name: str, values: Any) -> tuple[int, ...]:
    if isinstance(values, int | np.integer):
        values = (values,)
    try:
        return tuple(static_int(op, name, v) for v in values)
    except TypeError as err:
        if "static" in str(err) or "must be an int" in str(err):
            raise
        raise TypeError(f"{op}: {name} must be a sequence of ints, got {values!r}") from err


def normalize_axis(op: str, axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{op}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim
