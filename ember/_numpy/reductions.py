"""Reductions of ember.numpy: sum, max/amax, min/amin, mean, var, std, all, any, argmax, argmin."""
from __future__ import annotations

import builtins
from typing import Any

import numpy as _np

from ember._core import dtypes as dt
from ember._core import aval_of, is_python_scalar, scalar_literal
from ember._core.dtypes import bool_
from ember import _prims as lax
from ember._core.checks import normalize_axes, normalize_axis
from ember._runtime.eager import fast_static

from ember._numpy.promotion import _as_bool, _as_operand, _promote
from ember._numpy.shape import expand_dims, ndim, ravel, shape
from ember._numpy.ufuncs import equal, maximum, minimum, where


def _keep(x: Any, reduced: Any, axes: tuple[int, ...], keepdims: bool) -> Any:
    if not keepdims:
        return reduced
    return lax.reshape(reduced, tuple(1 if i in axes else d for i, d in enumerate(shape(x))))


def _accumulation_dtype(d: Any) -> Any:
    """The dtype a sum of dtype d accumulates in: float32 for float16 and bfloat16 (as numpy's and JAX's means
    and JAX's sums), so long sums neither stall nor overflow midway; d itself otherwise."""
    return dt.float32 if d in (dt.float16, dt.bfloat16) else d


def _sum_as(a: Any, axes: tuple[int, ...], out_dtype: Any, weak: bool = False) -> Any:
    """The sum of a over axes, accumulated in _accumulation_dtype(out_dtype), cast to out_dtype."""
    acc = _accumulation_dtype(out_dtype)
    total = lax.reduce_sum(lax.convert_element_type(a, acc, weak), axes)
    return lax.convert_element_type(total, out_dtype, weak)


@fast_static
def sum(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """numpy's sum; float16 and bfloat16 accumulate in float32 (the result keeps the dtype), booleans and small
    integers sum as int32 or uint32 (as JAX)."""
    a = _as_operand(a)
    if is_python_scalar(a):
        a = _promote("sum", a)[0]
    d, weak = aval_of(a).dtype, aval_of(a).weak_type
    if dtype is not None:
        d, weak = dt.canonicalize_dtype(dtype), False
    elif d == bool_ or (dt.is_int(d) and d.itemsize < dt.default_int_dtype().itemsize):
        d, weak = (dt.default_int_dtype() if dt.is_signed_int(d) or d == bool_ else dt.default_uint_dtype()), False
    axes = normalize_axes("sum", axis, ndim(a))
    return _keep(a, _sum_as(a, axes, d, weak), axes, keepdims)


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
    return fast_static(fn)


max = amax = _extreme("max", lax.reduce_max)  # noqa: A001
min = amin = _extreme("min", lax.reduce_min)  # noqa: A001


def _count(a: Any, axes: tuple[int, ...]) -> int:
    return int(_np.prod([shape(a)[i] for i in axes]))


def _float_result(a: Any, dtype: Any) -> tuple[Any, Any, bool]:
    """(result dtype, computation dtype, weak type) of mean, var and std: integer and boolean inputs give
    a float dtype (float64 for 64-bit integers, else float32, as JAX); float16 and bfloat16 compute in float32."""
    d, weak = aval_of(a).dtype, aval_of(a).weak_type
    if dtype is not None:
        out, weak = dt.canonicalize_dtype(dtype), False
    else:
        out = dt.to_inexact_dtype(d)
    computation = _accumulation_dtype(dt.to_inexact_dtype(out))
    return out, computation, weak


def _as_array(name: str, a: Any) -> Any:
    a = _as_operand(a)
    return _promote(name, a)[0] if is_python_scalar(a) else a


@fast_static
def mean(a: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    """numpy's mean: integer inputs give float32 (as JAX); float16 and bfloat16 sum in float32 and divide there
    (so the count cannot overflow), giving their own dtype back."""
    a = _as_array("mean", a)
    out, computation, weak = _float_result(a, dtype)
    axes = normalize_axes("mean", axis, ndim(a))
    total = lax.reduce_sum(lax.convert_element_type(a, computation, weak), axes)
    result = lax.div(total, scalar_literal(_count(a, axes), computation, weak))
    return _keep(a, lax.convert_element_type(result, out, weak), axes, keepdims)


def _var(name: str, a: Any, axis: Any, dtype: Any, out: Any, ddof: int
         ) -> tuple[Any, Any, tuple[int, ...], Any, bool]:
    """The variance in the computation dtype, with what var and std need to finish it."""
    if out is not None:
        raise TypeError(f"{name}: the out argument is not supported (ember arrays are immutable)")
    a = _as_array(name, a)
    if dtype is not None and not dt.is_float(dt.canonicalize_dtype(dtype)):
        raise ValueError(f"{name}: the dtype argument must be a floating-point dtype (as JAX), got "
                         f"{dt.canonicalize_dtype(dtype).name} for an array {aval_of(a).str_short()}")
    result_dtype, computation, weak = _float_result(a, dtype)
    axes = normalize_axes(name, axis, ndim(a))
    x = lax.convert_element_type(a, computation, weak)
    count = _count(a, axes)
    kept = tuple(i for i in range(ndim(a)) if i not in axes)
    mean_ = lax.div(lax.reduce_sum(x, axes), scalar_literal(count, computation, weak))
    centered = lax.sub(x, lax.broadcast_in_dim(mean_, shape(a), kept))
    divisor = scalar_literal(builtins.max(count - ddof, 0), computation, weak)  # as numpy: never negative
    return lax.div(lax.reduce_sum(lax.mul(centered, centered), axes), divisor), a, axes, result_dtype, weak


@fast_static
def var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False
        ) -> Any:
    """numpy's var (same signature); computed in float32 for float16 and bfloat16 inputs (as JAX)."""
    v, a, axes, result_dtype, weak = _var("var", a, axis, dtype, out, ddof)
    return _keep(a, lax.convert_element_type(v, result_dtype, weak), axes, keepdims)


@fast_static
def std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0, keepdims: bool = False
        ) -> Any:
    """numpy's std (same signature): the square root of var, taken before casting back to the result dtype."""
    v, a, axes, result_dtype, weak = _var("std", a, axis, dtype, out, ddof)
    return _keep(a, lax.convert_element_type(lax.sqrt(v), result_dtype, weak), axes, keepdims)


@fast_static
def all(a: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    a = _as_bool(a)
    axes = normalize_axes("all", axis, ndim(a))
    return _keep(a, lax.reduce_min(a, axes), axes, keepdims)


@fast_static
def any(a: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    a = _as_bool(a)
    axes = normalize_axes("any", axis, ndim(a))
    return _keep(a, lax.reduce_max(a, axes), axes, keepdims)


def _arg_extreme(name: str, extreme: Any) -> Any:
    def fn(a: Any, axis: int | None = None, keepdims: bool = False) -> Any:
        a = _as_operand(a)
        flat_ndim = None  # with axis=None: the input's rank, for keepdims' (1,) * ndim (numpy, JAX)
        if axis is None:
            flat_ndim = ndim(a)
            a, axis = ravel(a), 0
        axis = normalize_axis(name, axis, ndim(a))
        n = shape(a)[axis]
        if n == 0:
            raise ValueError(f"{name}: attempt to get {name} of an empty sequence")
        hit = equal(a, extreme(a, axis, keepdims=True))
        if dt.is_float(aval_of(a).dtype):
            # numpy: the first NaN is the extreme. Pick NaNs explicitly where a slice has one, whatever the
            # maximum of a slice with NaNs is (reduce_max need not propagate NaN)
            nans = lax.ne(a, a)
            has_nan = lax.reduce_max(nans, (axis,))
            hit = where(expand_dims(has_nan, axis), nans, hit)
        index = lax.broadcasted_iota(dt.default_int_dtype(), shape(a), axis)
        candidates = where(hit, index, n)
        first = lax.reduce_min(candidates, (axis,))
        if not keepdims:
            return first
        return lax.reshape(first, (1,) * flat_ndim) if flat_ndim is not None else expand_dims(first, axis)
    fn.__name__ = fn.__qualname__ = name
    return fast_static(fn)


argmax = _arg_extreme("argmax", max)
argmin = _arg_extreme("argmin", min)
