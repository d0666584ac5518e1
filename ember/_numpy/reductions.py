"""Reductions of ember.numpy: sum, max/amax, min/amin, mean, var, std, all, any, argmax, argmin."""
from __future__ import annotations

import builtins
from typing import Any

import numpy as _np

from ember._core import dtypes as dt
from ember._core import aval_of, is_python_scalar
from ember._core.dtypes import bool_
from ember import _prims as lax
from ember._core.checks import normalize_axes, normalize_axis

from ember._numpy.promotion import _as_bool, _as_operand, _promote, _to_inexact
from ember._numpy.shape import astype, expand_dims, ndim, ravel, shape
from ember._numpy.ufuncs import divide, equal, logical_or, maximum, minimum, sqrt, square, subtract, where


def _keep(x: Any, reduced: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
    if not keepdims:
        return reduced
    return lax.reshape(reduced, tuple(1 if i in axes else d for i, d in enumerate(shape(x))))


def sum(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    a = _as_operand(a)
    if is_python_scalar(a):
        a = _promote("sum", a)[0]
    d = aval_of(a).dtype
    if dtype is not None:
        a = astype(a, dtype)
    elif d == bool_ or (dt.is_int(d) and d.itemsize < dt.default_int_dtype().itemsize):
        a = astype(a, dt.default_int_dtype() if dt.is_signed_int(d) or d == bool_ else dt.default_uint_dtype())
    axes = normalize_axes("sum", axis, ndim(a))
    return _keep(a, lax.reduce_sum(a, axes), axes, keepdims)


def _extreme(name: str, reducer: Any) -> Any:
    def fn(a: Any, axis: Any = None, keepdims: bool = False, initial: Any = None) -> Any:
        a = _as_operand(a)
        axes = normalize_axes(name, axis, ndim(a))
        if builtins.any(shape(a)[i] == 0 for i in axes) and initial is None:
            raise ValueError(f"{name}: zero-size array to reduction operation {name} which has no identity")
        out = reducer(a, axes)
        if initial is not None:
            out = (maximum if name == "max" else minimum)(out, initial)
        return _keep(a, out, axes, keepdims)
    fn.__name__ = fn.__qualname__ = name
    return fn


max = amax = _extreme("max", lax.reduce_max)  # noqa: A001
min = amin = _extreme("min", lax.reduce_min)  # noqa: A001


def mean(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    a = _to_inexact(_as_operand(a)) if dtype is None else astype(a, dtype)
    axes = normalize_axes("mean", axis, ndim(a))
    count = int(_np.prod([shape(a)[i] for i in axes]))
    return divide(sum(a, axes, keepdims=keepdims), count)


def var(a: Any, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Any:
    a = _to_inexact(_as_operand(a))
    axes = normalize_axes("var", axis, ndim(a))
    centered = subtract(a, mean(a, axes, keepdims=True))
    count = int(_np.prod([shape(a)[i] for i in axes])) - ddof
    return divide(sum(square(centered), axes, keepdims=keepdims), count)


def std(a: Any, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Any:
    return sqrt(var(a, axis, ddof, keepdims))


def all(a: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    a = _as_bool(a)
    axes = normalize_axes("all", axis, ndim(a))
    return _keep(a, lax.reduce_min(a, axes), axes, keepdims)


def any(a: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    a = _as_bool(a)
    axes = normalize_axes("any", axis, ndim(a))
    return _keep(a, lax.reduce_max(a, axes), axes, keepdims)


def _arg_extreme(name: str, extreme: Any) -> Any:
    def fn(a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
        a = _as_operand(a)
        if axis is None:
            a, axis = ravel(a), 0
        axis = normalize_axis(name, axis, ndim(a))
        n = shape(a)[axis]
        if n == 0:
            raise ValueError(f"{name}: attempt to get {name} of an empty sequence")
        best = extreme(a, axis, keepdims=True)
        hit = equal(a, best)
        if dt.is_float(aval_of(a).dtype):  # a NaN is the extreme, as in numpy
            hit = logical_or(hit, lax.ne(a, a))
        index = lax.broadcasted_iota(dt.default_int_dtype(), shape(a), axis)
        candidates = where(hit, index, n)
        first = lax.reduce_min(candidates, (axis,))
        return expand_dims(first, axis) if keepdims else first
    fn.__name__ = fn.__qualname__ = name
    return fn


argmax = _arg_extreme("argmax", max)
argmin = _arg_extreme("argmin", min)
