"""Operand conversion, dtype promotion (JAX's lattice, weak Python scalars) and broadcasting for ember.numpy."""
from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as _np

from ember._core import dtypes as dt
from ember._runtime.array import asarray
from ember._core import ArrayMethods, aval_of, is_python_scalar
from ember._core.dtypes import bool_
from ember._core import Literal
from ember import _prims as lax
from ember._core import scalar_literal


def _is_array(x: Any) -> bool:
    """A concrete Array or a tracer (the one base class of both: a single C-level check)."""
    return isinstance(x, ArrayMethods)


def _as_operand(x: Any) -> Any:
    """Arrays and Python scalars pass through; numpy values and nested lists become arrays."""
    if _is_array(x) or is_python_scalar(x) or isinstance(x, Literal):
        return x
    if isinstance(x, _np.ndarray | _np.generic):
        return x
    return asarray(x)


def result_type(*args: Any) -> _np.dtype:
    return dt.result_type(*args)


def promote_types(a: Any, b: Any) -> _np.dtype:
    return dt.promote_types((dt.canonicalize_dtype(a), False), (dt.canonicalize_dtype(b), False))[0]


def _promote(name: str, *args: Any) -> list[Any]:
    """Convert the operands to their common dtype (JAX's lattice with weak Python scalars)."""
    args = [_as_operand(a) for a in args]
    typed = [dt.dtype_and_weak(a) for a in args]
    if len({d for d, _ in typed}) == 1 and not builtins.any(is_python_scalar(a) for a in args):
        return args  # one dtype already
    target, weak = dt.promote_types(*typed)
    out = []
    for a, (d, w) in zip(args, typed):
        if is_python_scalar(a):
            out.append(scalar_literal(a, target, weak))
        elif d != target:
            out.append(lax.convert_element_type(a, target, weak))
        else:
            out.append(a)
    return out


def _broadcast_shapes(name: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(_np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"{name}: shapes {', '.join(map(str, shapes))} cannot be broadcast together") from None


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


def _elementwise(name: str, *args: Any) -> list[Any]:
    """Promote, then broadcast all non-scalar operands to the common shape (rank-0 operands broadcast inside
    the primitive, keeping the IR small)."""
    args = _promote(name, *args)
    shapes = [aval_of(a).shape for a in args]
    if len(set(shapes)) == 1:
        return args
    shape = _broadcast_shapes(name, *shapes)
    return [a if aval_of(a).shape == () else _broadcast_to_shape(a, shape) for a in args]


def _to_inexact(x: Any) -> Any:
    x = _as_operand(x)
    d, weak = dt.dtype_and_weak(x)
    if dt.is_float(d):
        return x
    if is_python_scalar(x):
        return scalar_literal(x, dt.DEFAULT_FLOAT, True)
    return lax.convert_element_type(x, dt.DEFAULT_FLOAT, weak)


def _as_bool(x: Any) -> Any:
    x = _as_operand(x)
    if is_python_scalar(x):
        return bool(x)
    return x if aval_of(x).dtype == bool_ else lax.convert_element_type(x, bool_)
