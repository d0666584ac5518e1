"""Reductions of ember.numpy: sum, max/amax, min/amin, mean, var, std, all, any, argmax, argmin."""
from __future__ import annotations

import builtins
import math
from typing import Any

from ember._core import dtypes as dt
from ember._core import aval_of, is_python_scalar, scalar_literal
from ember._core.dtypes import bool_
from ember import _prims as lax
from ember._core.checks import normalize_axes, normalize_axis
from ember._runtime.eager import fast_static

from ember._numpy.promotion import _as_bool
from ember._prims.checks import TWO_BIT_FAILS, refuse_narrow
from ember._prims.reduction import _highest, _lowest
from ember._numpy.shape import expand_dims, ndim, ravel, shape
from ember._numpy.promotion import _broadcast_shapes, _broadcast_to_shape, _operand_array
from ember._numpy.ufuncs import _where, add, equal, maximum, minimum, multiply


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


def _no_out(name: str, out: Any) -> None:
    if out is not None:
        raise TypeError(f"{name}: the out argument is not supported (ember arrays are immutable)")


def _mask(name: str, a: Any, where: Any) -> Any:
    """where as a boolean mask of a's shape (broadcast; as numpy, it may not change a's shape)."""
    mask = _as_bool(where)
    if is_python_scalar(mask):
        mask = scalar_literal(mask, bool_, False)
    if _broadcast_shapes(name, shape(mask), shape(a)) != shape(a):
        raise ValueError(f"{name}: where of shape {shape(mask)} does not broadcast to the array's shape {shape(a)}")
    return mask if shape(mask) == shape(a) else _broadcast_to_shape(mask, shape(a))


def _masked(name: str, a: Any, where: Any, fill: Any) -> Any:
    """a with fill where `where` is False."""
    if where is None:
        return a
    return lax.select(_mask(name, a, where), a, lax.full_like(a, fill))


def _sum_dtype(name: str, a: Any, dtype: Any, promote_integers: bool) -> tuple[Any, bool]:
    """The result dtype and weak type of sum and prod: booleans and narrow integers widen to the default int (as
    JAX; not with promote_integers=False)."""
    d, weak = aval_of(a).dtype, aval_of(a).weak_type
    if dtype is not None:
        return dt.check_user_dtype(dtype, name), False
    if promote_integers:
        dt.refuse_narrow_int_promotion(name, d)
    if d == bool_ or (promote_integers and dt.is_int(d) and d.itemsize < dt.default_int_dtype().itemsize):
        return (dt.default_int_dtype() if dt.is_signed_int(d) or d == bool_ else dt.default_uint_dtype()), False
    return d, weak


def _with_initial(name: str, result: Any, initial: Any, combine: Any) -> Any:
    if initial is None:
        return result
    return lax.convert_element_type(combine(result, initial), aval_of(result).dtype, aval_of(result).weak_type)


@fast_static
def sum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,  # noqa: A001
        initial: Any = None, where: Any = None, promote_integers: bool = True) -> Any:
    """numpy's sum; float16 and bfloat16 accumulate in float32 (the result keeps the dtype), booleans and small
    integers sum as int32 or uint32 (as JAX; with promote_integers=False in their own dtype)."""
    _no_out("sum", out)
    a = _as_array("sum", a)
    d, weak = _sum_dtype("sum", a, dtype, promote_integers)
    axes = normalize_axes("sum", axis, ndim(a))
    result = _keep(a, _sum_as(_masked("sum", a, where, 0), axes, d, weak), axes, keepdims)
    return _with_initial("sum", result, initial, add)


@fast_static
def prod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
         initial: Any = None, where: Any = None, promote_integers: bool = True) -> Any:
    """numpy's product, with sum's dtype rules (float16 and bfloat16 multiply in float32)."""
    _no_out("prod", out)
    a = _as_array("prod", a)
    d, weak = _sum_dtype("prod", a, dtype, promote_integers)
    axes = normalize_axes("prod", axis, ndim(a))
    acc = _accumulation_dtype(d)
    x = lax.convert_element_type(_masked("prod", a, where, 1), acc, weak)
    result = _keep(a, lax.convert_element_type(lax.reduce_prod(x, axes), d, weak), axes, keepdims)
    return _with_initial("prod", result, initial, multiply)


def _refuse_empty(name: str, a: Any, axis: Any, operation: str) -> None:
    """numpy's error for a reduction without identity (max, argmax, ...) over an empty axis, naming the function
    called (nanmax, ptp, ...) and the operation."""
    axes = normalize_axes(name, axis, ndim(a))
    if builtins.any(shape(a)[i] == 0 for i in axes):
        what = (f"attempt to get {operation} of an empty sequence" if operation.startswith("arg") else
                f"zero-size array to reduction operation {operation} which has no identity")
        raise ValueError(f"{name}: {what}")


def _extreme(name: str, reducer: Any, combine: Any, identity: Any) -> Any:
    def fn(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, initial: Any = None,
           where: Any = None) -> Any:
        _no_out(name, out)
        a = _as_array(name, a)
        axes = normalize_axes(name, axis, ndim(a))
        if initial is None:
            if where is not None:
                raise ValueError(f"{name}: reduction with where= needs an initial value (as numpy)")
            _refuse_empty(name, a, axes, name)
        a_masked = _masked(name, a, where, identity(aval_of(a).dtype)) if where is not None else a
        reduce = _lexicographic(reducer, identity) if dt.is_complex(aval_of(a).dtype) else reducer
        return _with_initial(name, _keep(a, reduce(a_masked, axes), axes, keepdims), initial, combine)
    fn.__name__ = fn.__qualname__ = name
    return fast_static(fn)


def _lexicographic(reducer: Any, identity: Any) -> Any:
    """reduce_max/reduce_min of complex numbers in numpy's lexicographic order: the extreme real part, then among
    the elements that have it, the extreme imaginary part."""
    def reduce(a: Any, axes: tuple[int, ...]) -> Any:
        re, im = lax.real(a), lax.imag(a)
        kept = tuple(i for i in range(ndim(a)) if i not in axes)
        best_re = reducer(re, axes)
        ties = lax.eq(re, lax.broadcast_in_dim(best_re, shape(a), kept))
        candidates = lax.select(ties, im, lax.full_like(im, identity(aval_of(im).dtype)))
        return lax.complex(best_re, reducer(candidates, axes))
    return reduce


max = amax = _extreme("max", lax.reduce_max, maximum, _lowest)  # noqa: A001
min = amin = _extreme("min", lax.reduce_min, minimum, _highest)  # noqa: A001


def _count(a: Any, axes: tuple[int, ...]) -> int:
    return math.prod(shape(a)[i] for i in axes)  # (a symbolic dimension's product is one too: ember.export)


def _float_result(name: str, a: Any, dtype: Any) -> tuple[Any, Any, bool]:
    """(result dtype, computation dtype, weak type) of mean, var and std: integer and boolean inputs give
    a float dtype (float64 for 64-bit integers, else float32, as JAX); float16 and bfloat16 compute in float32."""
    d, weak = aval_of(a).dtype, aval_of(a).weak_type
    if dtype is not None:
        out, weak = dt.check_user_dtype(dtype, name), False
    else:
        out = dt.to_inexact_dtype(d, name)
    computation = _accumulation_dtype(dt.to_inexact_dtype(out, name))
    return out, computation, weak


_as_array = _operand_array


def _counts(name: str, a: Any, axes: tuple[int, ...], where: Any, computation: Any, weak: bool) -> Any:
    """How many elements each reduction covers: a static count, or (with where=) the mask's sum."""
    if where is None:
        return scalar_literal(_count(a, axes), computation, weak)
    mask = lax.convert_element_type(_mask(name, a, where), computation, weak)
    return lax.reduce_sum(mask, axes)


@fast_static
def mean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, *,
         where: Any = None) -> Any:
    """numpy's mean: integer inputs give float32 (as JAX); float16 and bfloat16 sum in float32 and divide there
    (so the count cannot overflow), giving their own dtype back. With where=, the mean of the selected elements."""
    _no_out("mean", out)
    a = _as_array("mean", a)
    out_dtype, computation, weak = _float_result("mean", a, dtype)
    axes = normalize_axes("mean", axis, ndim(a))
    x = _masked("mean", lax.convert_element_type(a, computation, weak), where, 0)
    result = lax.div(lax.reduce_sum(x, axes), _counts("mean", a, axes, where, computation, weak))
    return _keep(a, lax.convert_element_type(result, out_dtype, weak), axes, keepdims)


def _var(name: str, a: Any, axis: Any, dtype: Any, out: Any, ddof: Any, where: Any, mean: Any, correction: Any
         ) -> tuple[Any, Any, tuple[int, ...], Any, bool]:
    """The variance in the computation dtype, with what var and std need to finish it."""
    _no_out(name, out)
    if correction is not None:
        if ddof != 0:
            raise ValueError(f"{name}: pass ddof or correction, not both (got ddof={ddof}, correction={correction})")
        ddof = correction
    a = _as_array(name, a)
    if dtype is not None and not dt.is_inexact(dt.parse_dtype(dtype)):
        raise ValueError(f"{name}: the dtype argument must be a floating-point or complex dtype (as JAX), got "
                         f"{dt.parse_dtype(dtype).name} for an array {aval_of(a).str_short()}")
    result_dtype, computation, weak = _float_result(name, a, dtype)
    axes = normalize_axes(name, axis, ndim(a))
    x = lax.convert_element_type(a, computation, weak)
    count = _counts(name, a, axes, where, computation, weak)
    kept = tuple(i for i in range(ndim(a)) if i not in axes)
    if mean is None:
        mean_ = lax.div(lax.reduce_sum(_masked(name, x, where, 0), axes), count)
        mean_ = lax.broadcast_in_dim(mean_, shape(a), kept)
    else:  # a precomputed mean (JAX's mean=), with the reduced axes kept
        mean_ = _broadcast_to_shape(lax.convert_element_type(_as_array(name, mean), computation, weak), shape(a))
    centered = _masked(name, lax.sub(x, mean_), where, 0)
    if dt.is_complex(computation):  # |x - mean|^2, real: a complex array's variance is real (numpy, JAX)
        count, computation = lax.real(count), dt.real_dtype(computation)
        result_dtype = dt.real_dtype(result_dtype)
        re, im = lax.real(centered), lax.imag(centered)
        squares = lax.add(lax.mul(re, re), lax.mul(im, im))
    else:
        squares = lax.mul(centered, centered)
    divisor = maximum(lax.sub(count, scalar_literal(ddof, computation, weak)), 0)  # as numpy: never negative
    divisor = lax.convert_element_type(divisor, computation, weak)
    return lax.div(lax.reduce_sum(squares, axes), divisor), a, axes, result_dtype, weak


@fast_static
def var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0, keepdims: bool = False, *,
        where: Any = None, mean: Any = None, correction: Any = None) -> Any:
    """numpy's var (same signature, plus the array API's correction=); computed in float32 for float16 and
    bfloat16 inputs (as JAX)."""
    v, a, axes, result_dtype, weak = _var("var", a, axis, dtype, out, ddof, where, mean, correction)
    return _keep(a, lax.convert_element_type(v, result_dtype, weak), axes, keepdims)


@fast_static
def std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0, keepdims: bool = False, *,
        where: Any = None, mean: Any = None, correction: Any = None) -> Any:
    """numpy's std (same signature as var): the square root of var, taken before casting back to the result
    dtype."""
    v, a, axes, result_dtype, weak = _var("std", a, axis, dtype, out, ddof, where, mean, correction)
    return _keep(a, lax.convert_element_type(lax.sqrt(v), result_dtype, weak), axes, keepdims)


@fast_static
def all(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, *, where: Any = None) -> Any:  # noqa: A001
    _no_out("all", out)
    a = _as_array("all", _as_bool(a))
    axes = normalize_axes("all", axis, ndim(a))
    return _keep(a, lax.reduce_min(_masked("all", a, where, True), axes), axes, keepdims)


@fast_static
def any(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, *, where: Any = None) -> Any:  # noqa: A001
    _no_out("any", out)
    a = _as_array("any", _as_bool(a))
    axes = normalize_axes("any", axis, ndim(a))
    return _keep(a, lax.reduce_max(_masked("any", a, where, False), axes), axes, keepdims)


def _arg_extreme(name: str, extreme: Any) -> Any:
    def fn(a: Any, axis: int | None = None, out: Any = None, keepdims: bool | None = None) -> Any:
        _no_out(name, out)
        a = _as_array(name, a)
        flat_ndim = None  # with axis=None: the input's rank, for keepdims' (1,) * ndim (numpy, JAX)
        if axis is None:
            flat_ndim = ndim(a)
            a, axis = ravel(a), 0
        axis = normalize_axis(name, axis, ndim(a))
        _refuse_empty(name, a, axis, name)
        n = shape(a)[axis]
        refuse_narrow(name, aval_of(a), "2", "operand", TWO_BIT_FAILS)  # (as the primitive: JAX's fails to compile)
        if aval_of(a).dtype in dt.NARROW_FLOATS:
            # the argmax primitive, as JAX's: float8_e8m0fnu's max identity is NaN, so the max of its values is NaN,
            # which none equals (JAX's index is then 0)
            first = (lax.argmax if name == "argmax" else lax.argmin)(a, axis, dt.default_int_dtype())
            if not keepdims:
                return first
            return lax.reshape(first, (1,) * flat_ndim) if flat_ndim is not None else expand_dims(first, axis)
        hit = equal(a, extreme(a, axis, keepdims=True))
        if dt.is_float(aval_of(a).dtype):
            # numpy: the first NaN is the extreme. Pick NaNs explicitly where a slice has one, whatever the
            # maximum of a slice with NaNs is (reduce_max need not propagate NaN)
            nans = lax.ne(a, a)
            has_nan = lax.reduce_max(nans, (axis,))
            hit = _where(expand_dims(has_nan, axis), nans, hit)
        index = lax.broadcasted_iota(dt.default_int_dtype(), shape(a), axis)
        candidates = _where(hit, index, n)
        first = lax.reduce_min(candidates, (axis,))
        if not keepdims:
            return first
        return lax.reshape(first, (1,) * flat_ndim) if flat_ndim is not None else expand_dims(first, axis)
    fn.__name__ = fn.__qualname__ = name
    return fast_static(fn)


argmax = _arg_extreme("argmax", max)
argmin = _arg_extreme("argmin", min)


__all__ = ["all", "amax", "amin", "any", "argmax", "argmin", "max", "mean", "min", "std", "sum", "var", "prod"]
