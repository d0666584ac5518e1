"""Set operations and comparisons of whole arrays: isin, union1d, intersect1d, setdiff1d, setxor1d, ediff1d,
isclose, allclose, array_equal, array_equiv. Results whose length depends on values take size= (and
fill_value=) under jit, as in JAX."""
from __future__ import annotations

from typing import Any

import numpy as _np

from ember import _prims as lax
from ember._core import aval_of
from ember._core.pytree import PHYSICAL
from ember._core import dtypes as dt

from ember._numpy.mathfuncs import isinf, isnan
from ember._numpy.promotion import _operand_array, _as_operand, _broadcast_shapes, _elementwise, _promote
from ember._numpy.reductions import any as any_, min as min_
from ember._numpy.selection import compress, take
from ember._numpy.shape import concatenate, ndim, ravel, reshape, shape
from ember._numpy.sorting import argsort, searchsorted, sort, unique
from ember._numpy.ufuncs import equal


_array = _operand_array


def isin(element: Any, test_elements: Any, assume_unique: bool = False, invert: bool = False, *,
         method: str = "auto") -> Any:
    """Whether each element of element is in test_elements (element's shape), by comparing against all of them
    (method 'compare_all') or by sorting ('sort', for large test sets; 'auto' picks)."""
    e, t = _promote("isin", _array("isin", element), _array("isin", test_elements, 1))
    t = ravel(t)
    if method not in ("auto", "compare_all", "sort", "binary_search"):
        raise ValueError(f"isin: method must be 'auto', 'compare_all', 'sort' or 'binary_search', got {method!r}")
    if method == "auto":
        method = "compare_all" if shape(t)[0] <= 256 else "sort"
    if shape(t)[0] == 0:
        found = lax.full(shape(e), False, _np.dtype(bool))
    elif method == "compare_all":
        flat = reshape(e, (-1, 1))
        found = reshape(lax.reduce_max(equal(flat, reshape(t, (1, -1))), (1,)), shape(e))
    else:
        st = sort(t)
        pos = searchsorted(st, ravel(e), side="left")
        pos = lax.min(pos, lax.full_like(pos, shape(st)[0] - 1))
        found = reshape(equal(take(st, pos), ravel(e)), shape(e))
    return lax.bitwise_not(found) if invert else found


def _unique_valid(x: Any) -> tuple[Any, Any]:
    """The sorted unique values of the 1-D x padded to x's length, and which entries are real (works under jit:
    the padding has count 0)."""
    n = shape(x)[0]
    if n == 0:
        return x, lax.full((0,), False, _np.dtype(bool))
    values, counts = unique(x, return_counts=True, size=n)
    return values, lax.gt(counts, lax.full_like(counts, 0))


def _select(values: Any, keep: Any, size: int | None, fill_value: Any) -> Any:
    if size is None:
        return compress(keep, values)
    if fill_value is None:  # as jax.numpy: the smallest selected value (0 if none is)
        if shape(values)[0]:
            big = _np.inf if dt.is_float(aval_of(values).dtype) else dt.iinfo(aval_of(values).dtype).max
            fill_value = lax.select(any_(keep), min_(values, initial=big, where=keep),
                                    lax.full((), 0, aval_of(values).dtype))
        else:
            fill_value = 0
    return compress(keep, values, size=size, fill_value=fill_value)


def union1d(ar1: Any, ar2: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique values of either array."""
    a, b = _promote("union1d", _array("union1d", ar1), _array("union1d", ar2, 1))
    return unique(concatenate([ravel(a), ravel(b)]), size=size, fill_value=fill_value)


def intersect1d(ar1: Any, ar2: Any, assume_unique: bool = False, return_indices: bool = False, *,
                size: int | None = None, fill_value: Any = None) -> Any:
    """The sorted unique values in both arrays (with return_indices, also their first positions in each)."""
    a, b = _promote("intersect1d", _array("intersect1d", ar1), _array("intersect1d", ar2, 1))
    a, b = ravel(a), ravel(b)
    ua, valid = _unique_valid(a)
    keep = lax.bitwise_and(valid, isin(ua, b))
    values = _select(ua, keep, size, fill_value)
    if not return_indices:
        return values

    def first_positions(x: Any) -> Any:
        order = argsort(x, stable=True)
        sx = take(x, order)
        pos = searchsorted(sx, values, side="left")
        pos = lax.min(pos, lax.full_like(pos, max(shape(x)[0] - 1, 0)))
        return take(order, pos)
    return values, first_positions(a), first_positions(b)


def setdiff1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
              fill_value: Any = None) -> Any:
    """The sorted unique values of ar1 that are not in ar2."""
    a, b = _promote("setdiff1d", _array("setdiff1d", ar1), _array("setdiff1d", ar2, 1))
    ua, valid = _unique_valid(ravel(a))
    return _select(ua, lax.bitwise_and(valid, isin(ua, b, invert=True)), size, fill_value)


def setxor1d(ar1: Any, ar2: Any, assume_unique: bool = False, *, size: int | None = None,
             fill_value: Any = None) -> Any:
    """The sorted unique values in exactly one of the arrays."""
    a, b = _promote("setxor1d", _array("setxor1d", ar1), _array("setxor1d", ar2, 1))
    ua, va = _unique_valid(ravel(a))
    ub, vb = _unique_valid(ravel(b))
    in_a = lax.bitwise_and(va, isin(ua, b, invert=True))
    in_b = lax.bitwise_and(vb, isin(ub, a, invert=True))
    values = concatenate([ua, ub])
    keep = lax.convert_element_type(concatenate([in_a, in_b]), _np.dtype(_np.int8))
    # the kept values of a and b are disjoint: sorted together (keep carried along), then selected
    values, keep = lax.sort((values, keep), num_keys=1)
    return _select(values, lax.convert_element_type(keep, _np.dtype(bool)), size, fill_value)


def ediff1d(ary: Any, to_end: Any = None, to_begin: Any = None) -> Any:
    """The differences of consecutive elements of the flattened array, with to_begin and to_end around them."""
    a = ravel(_array("ediff1d", ary))
    d = lax.sub(a[1:], a[:-1]) if shape(a)[0] else a
    parts = []
    if to_begin is not None:
        parts.append(ravel(lax.convert_element_type(_array("ediff1d", to_begin), aval_of(d).dtype)))
    parts.append(d)
    if to_end is not None:
        parts.append(ravel(lax.convert_element_type(_array("ediff1d", to_end), aval_of(d).dtype)))
    return concatenate(parts) if len(parts) > 1 else d


# ---------------------------------------------------------------------------------------------------------------
# Comparisons
def isclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Any:
    """|a - b| <= atol + rtol * |b| elementwise; infinities equal only themselves; NaNs equal with equal_nan."""
    a, b = _elementwise("isclose", a, b)
    d = aval_of(a).dtype
    if not dt.is_inexact(d):
        if d == _np.dtype(bool):
            return lax.eq(a, b)
        f = dt.to_inexact_dtype(d)
        a, b = (lax.convert_element_type(v, f, aval_of(v).weak_type) for v in (a, b))
        d = f
    diff = lax.abs(lax.sub(a, b))
    part = dt.real_dtype(d)  # (the tolerance of complex numbers is on their distance: real)
    tol = lax.add(lax.convert_element_type(atol, part), lax.mul(lax.convert_element_type(rtol, part), lax.abs(b)))
    close = lax.le(diff, tol)
    inf_a, inf_b = isinf(a), isinf(b)
    both_inf = lax.bitwise_and(inf_a, inf_b)
    close = lax.select(lax.bitwise_or(inf_a, inf_b), lax.bitwise_and(both_inf, lax.eq(a, b)), close)
    if equal_nan:
        close = lax.bitwise_or(close, lax.bitwise_and(isnan(a), isnan(b)))
    return close


def allclose(a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Any:
    """Whether isclose holds everywhere (a boolean scalar array)."""
    close = isclose(a, b, rtol, atol, equal_nan)
    return lax.reduce_min(close, tuple(range(ndim(close))))


def array_equal(a1: Any, a2: Any, equal_nan: bool = False) -> Any:
    """Whether the arrays have one shape and equal elements (False, not an error, for different shapes)."""
    if type(a1) in PHYSICAL and type(a2) in PHYSICAL:  # (typed key arrays, as JAX compares them)
        if a1.shape != a2.shape:
            return lax.full((), False, _np.dtype(bool))
        eq = a1 == a2
        return lax.reduce_min(eq, tuple(range(ndim(eq))))
    x, y = _as_operand(a1, "array_equal", 0), _as_operand(a2, "array_equal", 1)
    if shape(x) != shape(y):
        return lax.full((), False, _np.dtype(bool))
    x, y = _promote("array_equal", _array("array_equal", x), _array("array_equal", y, 1))
    eq = lax.eq(x, y)
    if equal_nan and dt.is_float(aval_of(x).dtype):
        eq = lax.bitwise_or(eq, lax.bitwise_and(isnan(x), isnan(y)))
    return lax.reduce_min(eq, tuple(range(ndim(eq))))


def array_equiv(a1: Any, a2: Any) -> Any:
    """Whether the arrays are equal after broadcasting (False if they do not broadcast)."""
    x, y = _array("array_equiv", a1), _array("array_equiv", a2, 1)
    try:
        _broadcast_shapes("array_equiv", shape(x), shape(y))
    except ValueError:
        return lax.full((), False, _np.dtype(bool))
    x, y = _elementwise("array_equiv", x, y)
    eq = lax.eq(x, y)
    return lax.reduce_min(eq, tuple(range(ndim(eq))))


__all__ = ["isin", "union1d", "intersect1d", "setdiff1d", "setxor1d", "ediff1d", "isclose", "allclose", "array_equal",
           "array_equiv"]
