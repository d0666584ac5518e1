"""Array creation of ember.numpy: array, asarray, full, zeros, ones, *_like, arange, linspace, eye, identity."""
from __future__ import annotations

import builtins
from typing import Any

import numpy as _np

from ember._core import dtypes as dt
from ember._runtime.array import array as _host_array, check_order
from ember._core import Tracer, aval_of, is_python_scalar
from ember import _prims as lax
from ember._core import scalar_literal
from ember._core.checks import static_ints

from ember._numpy.dtypes import int32
from ember._numpy.promotion import _as_operand, _promote
from ember._numpy.shape import astype, broadcast_to, stack


def _holds_tracers(x: Any) -> bool:
    return builtins.any(_holds_tracers(e) if isinstance(e, list | tuple) else isinstance(e, Tracer) for e in x)


def _stack_nested(x: Any) -> Any:
    """A nested sequence holding traced values, stacked level by level in the common dtype of its elements."""
    items = [_stack_nested(e) if isinstance(e, list | tuple) else e for e in x]
    return stack(_promote("array", *items))


def array(object: Any, dtype: Any = None, copy: bool | None = True, order: str | None = "K",  # noqa: A002
          ndmin: int = 0) -> Any:
    """An array from an array, a scalar or a nested sequence (numpy's dtype rules, 32-bit defaults); under a
    transformation, a nested sequence of traced values is stacked (jnp.array([x, 2 * x])). copy follows numpy 2:
    True gives a new array, None copies only when needed, False raises ValueError when a copy is needed (see
    ember._runtime.array.array); a tracer leaked out of a finished staging raises UnexpectedTracerError."""
    return _array_of("array", object, dtype, copy, order, ndmin)


def asarray(a: Any, dtype: Any = None, order: str | None = None, *, copy: bool | None = None) -> Any:
    """array without a copy unless one is needed (copy=None), or as copy says."""
    return _array_of("asarray", a, dtype, copy, order, 0)


def _array_of(op: str, object: Any, dtype: Any, copy: bool | None, order: str | None, ndmin: int) -> Any:  # noqa: A002
    if isinstance(object, list | tuple) and _holds_tracers(object):
        check_order(op, order)
        if copy is False:
            raise ValueError(f"{op}: unable to avoid a copy (stacking a sequence of traced values) while creating "
                             "an array with copy=False")
        stacked = _stack_nested(object)
        result = stacked if dtype is None else astype(stacked, dtype)
        return _host_array(result, ndmin=ndmin, copy=None, op=op)
    return _host_array(object, dtype, copy, order, ndmin, op=op)


def full(shape: Any, fill_value: Any, dtype: Any = None) -> Any:
    shape = static_ints("full", "shape", shape)
    fill = _as_operand(fill_value)
    if dtype is None:
        dtype = dt.dtype_and_weak(fill)[0]
    if not is_python_scalar(fill) and aval_of(fill).shape != ():
        return broadcast_to(astype(fill, dtype), shape)
    return lax.full(shape, fill, dtype)


def zeros(shape: Any, dtype: Any = None) -> Any:
    return lax.full(static_ints("zeros", "shape", shape), 0, dt.default_float_dtype() if dtype is None else dtype)


def ones(shape: Any, dtype: Any = None) -> Any:
    return lax.full(static_ints("ones", "shape", shape), 1, dt.default_float_dtype() if dtype is None else dtype)


def zeros_like(x: Any, dtype: Any = None) -> Any:
    return zeros(aval_of(_as_operand(x)).shape, dtype or aval_of(_as_operand(x)).dtype)


def ones_like(x: Any, dtype: Any = None) -> Any:
    return ones(aval_of(_as_operand(x)).shape, dtype or aval_of(_as_operand(x)).dtype)


def full_like(x: Any, fill_value: Any, dtype: Any = None) -> Any:
    return full(aval_of(_as_operand(x)).shape, fill_value, dtype or aval_of(_as_operand(x)).dtype)


def arange(start: Any, stop: Any = None, step: Any = None, dtype: Any = None) -> Any:
    for v in (start, stop, step):
        if isinstance(v, Tracer):
            raise TypeError("arange: start, stop and step must be concrete numbers (the length of the result "
                            "must be known when tracing)")
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    values = _np.arange(start, stop, step)
    if dtype is None:  # Python numbers give the default dtypes; typed numpy scalars count (np.int64(5): int64)
        dtype = dt.result_type(*(_scalar_arg("arange", v) for v in (start, stop, step)))
        if not dt.is_float(dtype) and values.dtype.kind == "f":
            dtype = dt.to_inexact_dtype(dtype)
    dtype = dt.canonicalize_dtype(dtype)
    n = len(values)
    if builtins.all(isinstance(v, int) for v in (start, stop, step)):
        ramp = lax.iota(dtype, n)
        if (start, step) == (0, 1):
            return ramp
        return lax.add(lax.mul(ramp, scalar_literal(step, dtype)), scalar_literal(start, dtype))
    return asarray(values.astype(dtype))


def _scalar_arg(name: str, v: Any) -> Any:
    """A start/stop/step argument for its dtype: Python numbers, numpy scalars and 0-d arrays."""
    if is_python_scalar(v) or isinstance(v, _np.generic) or (isinstance(v, _np.ndarray) and v.ndim == 0):
        return v
    if isinstance(v, Tracer):
        raise TypeError(f"{name}: start, stop and step must be concrete numbers, got a traced value {v!r}")
    if hasattr(v, "aval") and v.aval.shape == ():  # a concrete ember Array
        return v
    raise TypeError(f"{name}: start, stop and step must be scalars, got {type(v).__name__} {v!r:.60}")


def linspace(start: float, stop: float, num: int = 50, endpoint: bool = True, dtype: Any = None) -> Any:
    if dtype is None:  # the default float, or float64 for a typed numpy 64-bit start or stop
        dtype = dt.to_inexact_dtype(dt.result_type(_scalar_arg("linspace", start), _scalar_arg("linspace", stop),
                                                   float))
    dtype = dt.canonicalize_dtype(dtype)
    return asarray(_np.linspace(start, stop, num, endpoint=endpoint).astype(dtype))


def eye(n: int, m: int | None = None, k: int = 0, dtype: Any = None) -> Any:
    m = n if m is None else m
    dtype = dt.canonicalize_dtype(dtype) if dtype is not None else dt.default_float_dtype()
    rows = lax.broadcasted_iota(int32, (n, m), 0)
    cols = lax.broadcasted_iota(int32, (n, m), 1)
    return lax.convert_element_type(lax.eq(lax.add(rows, k), cols), dtype)


def identity(n: int, dtype: Any = None) -> Any:
    return eye(n, dtype=dtype)
