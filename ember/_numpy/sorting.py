"""Sorting and searching, as jax.numpy: sort, argsort (stable, descending), lexsort, partition, argpartition,
searchsorted and unique, on ember.lax.sort (floats in a total order: NaNs last)."""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import numpy as _np

from ember import _prims as lax
from ember._control import associative_scan
from ember._core import Tracer, aval_of
from ember._core import dtypes as dt
from ember._core.checks import normalize_axis, static_int
from ember._prims.indexing import ScatterDimensionNumbers

from ember._numpy.promotion import _as_operand, _promote
from ember._numpy.selection import nonzero, take
from ember._numpy.shape import moveaxis, ravel, reshape, shape, stack


def _axis(op: str, a: Any, axis: int | None) -> tuple[Any, int]:
    a = _as_operand(a, op, 0)
    if axis is None:
        return ravel(a), 0
    if not shape(a):
        raise ValueError(f"{op}: axis {axis} is out of bounds for a 0-d array")
    return a, normalize_axis(op, static_int(op, "axis", axis), len(shape(a)))


def _check_kind(op: str, kind: Any, order: Any) -> None:
    if order is not None:
        raise ValueError(f"{op}: order= (structured arrays) is not supported")
    if kind not in (None, "quicksort", "mergesort", "heapsort", "stable"):
        raise ValueError(f"{op}: unknown kind {kind!r}")


def sort(a: Any, axis: int | None = -1, *, kind: str | None = None, order: None = None, stable: bool = True,
         descending: bool = False) -> Any:
    """a sorted along axis (flattened when None), like jax.numpy.sort: NaNs last, -0.0 and 0.0 equal; descending
    reverses the order (ties keep their original order when stable)."""
    _check_kind("sort", kind, order)
    a, axis = _axis("sort", a, axis)
    if dt.is_complex(aval_of(a).dtype):  # numpy's lexicographic order: by real part, then imaginary part
        keys = (lax.real(a), lax.imag(a), a)
        if descending:
            return lax.rev(lax.sort(tuple(lax.rev(k, (axis,)) for k in keys), axis, stable, 2)[2], (axis,))
        return lax.sort(keys, axis, stable, 2)[2]
    if descending:
        return lax.rev(lax.sort(lax.rev(a, (axis,)), axis, stable), (axis,))
    return lax.sort(a, axis, stable)


def argsort(a: Any, axis: int | None = -1, *, kind: str | None = None, order: None = None, stable: bool = True,
            descending: bool = False) -> Any:
    """The int32 indices that sort a along axis (like jax.numpy.argsort); descending keeps ties in their original
    order when stable."""
    _check_kind("argsort", kind, order)
    a, axis = _axis("argsort", a, axis)
    n = shape(a)[axis]
    index_dtype = dt.default_int_dtype() if n < 2 ** 31 else _np.dtype(_np.int64)  # int64 with enable_x64, as JAX
    iota = lax.broadcasted_iota(index_dtype, shape(a), axis)
    keys = (lax.real(a), lax.imag(a)) if dt.is_complex(aval_of(a).dtype) else (a,)  # (lexicographic, as numpy)
    if descending:  # sort the reversed array ascending, reverse back, and map reversed positions to original ones
        idx = lax.sort(tuple(lax.rev(k, (axis,)) for k in keys) + (iota,), axis, stable, len(keys))[-1]
        idx = lax.rev(idx, (axis,))
        return lax.sub(lax.full(shape(idx), n - 1, index_dtype), idx)
    return lax.sort(keys + (iota,), axis, stable, len(keys))[-1]


def sort_complex(a: Any) -> Any:
    """a sorted along its last axis in numpy's lexicographic order on (real, imag), as a complex array (numpy's and
    jax.numpy's sort_complex: real input becomes complex64, or complex128 from 64-bit input)."""
    a = _as_operand(a, "sort_complex", 0)
    out = sort(a, axis=-1)
    return lax.convert_element_type(out, dt.complex_dtype(dt.to_inexact_dtype(aval_of(out).dtype)))


def lexsort(keys: Sequence[Any], axis: int = -1) -> Any:
    """The int32 indices that sort by the last key, then the one before it, ... (like numpy.lexsort)."""
    keys = [_as_operand(k, "lexsort", i) for i, k in enumerate(keys)]
    if not keys:
        raise TypeError("lexsort: needs at least one key")
    if len({shape(k) for k in keys}) != 1:
        raise ValueError("lexsort: all keys need the same shape, got " + ", ".join(str(shape(k)) for k in keys))
    ndim = len(shape(keys[0]))
    if ndim == 0:
        raise TypeError("lexsort: keys must have at least one dimension")
    axis = normalize_axis("lexsort", static_int("lexsort", "axis", axis), ndim)
    iota = lax.broadcasted_iota(dt.default_int_dtype(), shape(keys[0]), axis)
    return lax.sort(tuple(keys[::-1]) + (iota,), axis, True, len(keys))[-1]


def partition(a: Any, kth: int, axis: int = -1) -> Any:
    """a with its kth smallest element at position kth along axis, the smaller ones before it in ascending order
    and the larger ones after it in descending order (the layout jax.numpy.partition returns)."""
    a, axis = _axis("partition", a, axis)
    n = shape(a)[axis]
    k = _kth("partition", kth, n) % n
    s = lax.sort(a, axis, True)
    upper = lax.rev(lax.slice_in_dim(s, k + 1, n, axis=axis), (axis,))
    return lax.concatenate([lax.slice_in_dim(s, 0, k + 1, axis=axis), upper], axis)


def argpartition(a: Any, kth: int, axis: int = -1) -> Any:
    """Indices that partition a around its kth element (the layout jax.numpy.argpartition returns): those of the
    kth + 1 smallest in ascending order of value (ties by index), then the others in increasing index order."""
    a, axis = _axis("argpartition", a, axis)
    n = shape(a)[axis]
    k = _kth("argpartition", kth, n) % n
    perm = lax.convert_element_type(argsort(a, axis), _np.int32)  # int32 in either mode, as JAX
    rest = lax.sort(lax.slice_in_dim(perm, k + 1, n, axis=axis), axis, True)
    return lax.concatenate([lax.slice_in_dim(perm, 0, k + 1, axis=axis), rest], axis)


def _kth(op: str, kth: Any, n: int) -> int:
    k = static_int(op, "kth", kth)
    if not -n <= k < n:
        raise ValueError(f"{op}: kth {k} is out of bounds for an axis of size {n}")
    return k


def _less(a: Any, b: Any) -> Any:
    """a < b in the sort's total order (NaN largest); of complex numbers, lexicographic on (real, imag)."""
    if dt.is_complex(aval_of(a).dtype):
        ra, rb = lax.real(a), lax.real(b)
        return lax.bitwise_or(_less(ra, rb), lax.bitwise_and(lax.eq(ra, rb), _less(lax.imag(a), lax.imag(b))))
    lt = lax.lt(a, b)
    if not dt.is_float(aval_of(a).dtype):
        return lt
    return lax.bitwise_or(lt, lax.bitwise_and(lax.eq(a, a), lax.ne(b, b)))


def searchsorted(a: Any, v: Any, side: str = "left", sorter: Any = None, *, method: str = "scan") -> Any:
    """Where v's elements would go in the sorted 1-D a to keep it sorted (like jax.numpy.searchsorted): int32
    indices; side "left" gives the first suitable position, "right" the last; NaNs sort last. method "scan" is a
    binary search (log2(len(a)) steps), "compare_all" compares every pair (fast for short a), "sort" sorts a and v
    together."""
    a = _as_operand(a, "searchsorted", 0)
    v = _as_operand(v, "searchsorted", 1)
    if len(shape(a)) != 1:
        raise ValueError(f"searchsorted: a must be 1-D, got {aval_of(a).str_short()}")
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if method not in ("scan", "scan_unrolled", "compare_all", "sort"):
        raise ValueError(f"searchsorted: method must be 'scan', 'scan_unrolled', 'compare_all' or 'sort', "
                         f"got {method!r}")
    if sorter is not None:
        a = take(a, sorter, mode="promise_in_bounds")
    a, v = _promote("searchsorted", a, v)
    if dt.is_python_scalar(v):
        v = lax.full((), v, aval_of(a).dtype)
    n = shape(a)[0]
    v_shape = shape(v)

    def goes_after(x: Any) -> Any:  # whether v goes after an element x of a
        return _less(x, v) if side == "left" else lax.bitwise_not(_less(v, x))
    if method == "compare_all" or n == 0:
        flat = ravel(v)
        a_b = lax.broadcast_in_dim(a, (shape(flat)[0], n), (1,))
        v_b = lax.broadcast_in_dim(flat, (shape(flat)[0], n), (0,))
        after = _less(a_b, v_b) if side == "left" else lax.bitwise_not(_less(v_b, a_b))
        return reshape(lax.reduce_sum(lax.convert_element_type(after, _np.int32), (1,)), v_shape)
    # binary search: lo <= answer <= hi, halving hi - lo each step
    lo = lax.full(v_shape, 0, _np.int32)
    hi = lax.full(v_shape, n, _np.int32)
    for _ in range(max(1, math.ceil(math.log2(n + 1)))):
        mid = lax.div(lax.add(lo, hi), lax.full(v_shape, 2, _np.int32))
        x = take(a, lax.min(mid, lax.full(v_shape, n - 1, _np.int32)), mode="promise_in_bounds")
        right = lax.bitwise_and(goes_after(x), lax.lt(mid, hi))
        lo = lax.select(right, lax.add(mid, lax.full(v_shape, 1, _np.int32)), lo)
        hi = lax.select(right, hi, mid)
    return lo


def _cumsum_int(x: Any) -> Any:
    return associative_scan(lax.add, x)


def unique(ar: Any, return_index: bool = False, return_inverse: bool = False, return_counts: bool = False,
           axis: int | None = None, *, equal_nan: bool = True, size: int | None = None, fill_value: Any = None,
           sorted: bool = True) -> Any:  # noqa: A002
    """The sorted unique elements of ar (like jax.numpy.unique), optionally with the index of each one's first
    occurrence, the inverse (ar's elements as indices into the result, shaped like ar) and the counts. Eagerly the
    number of unique elements is the data's; inside jit/vmap/grad pass size= (extra entries are fill_value, by
    default the smallest unique value; their index is the first one's and their count 0)."""
    op = "unique"
    ar = _as_operand(ar, op, 0)
    if axis is None:
        flat = ravel(ar)
        rows, row_shape, moved = flat, (), None
    else:
        axis = normalize_axis(op, static_int(op, "axis", axis), len(shape(ar)))
        moved = moveaxis(ar, axis, 0)
        row_shape = shape(moved)[1:]
        rows = reshape(moved, (shape(moved)[0], math.prod(row_shape)))
    n = shape(rows)[0]
    if size is None and isinstance(ar, Tracer):
        raise ValueError(f"{op}: the number of unique elements of {aval_of(ar).str_short()} depends on its values, "
                         "which a traced program (jit, vmap, grad) cannot have: pass size=n (and fill_value=)")
    iota = lax.iota(_np.int32, n)
    columns = [rows] if axis is None else [lax.reshape(lax.slice_in_dim(rows, k, k + 1, axis=1), (n,))
                                            for k in range(shape(rows)[1])]
    complex_rows = dt.is_complex(aval_of(rows).dtype)  # (sorted by parts, lexicographically; the values carried)
    keys = [p for c in columns for p in (lax.real(c), lax.imag(c))] if complex_rows else columns
    sorted_all = lax.sort(tuple(keys) + (tuple(columns) if complex_rows else ()) + (iota,), 0, True, len(keys))
    sorted_keys, perm = sorted_all[:len(keys)], sorted_all[-1]
    sorted_cols = sorted_all[len(keys):-1] if complex_rows else sorted_keys
    if n == 0:
        first = lax.full((0,), True, dt.bool_)
    else:
        differs = None
        for c in sorted_keys:
            hi, lo = lax.slice_in_dim(c, 1, n), lax.slice_in_dim(c, 0, n - 1)
            d = lax.ne(hi, lo)
            if dt.is_float(aval_of(c).dtype) and equal_nan:
                d = lax.bitwise_and(d, lax.bitwise_not(lax.bitwise_and(lax.ne(hi, hi), lax.ne(lo, lo))))
            differs = d if differs is None else lax.bitwise_or(differs, d)
        start = lax.full((1,), True, dt.bool_)
        first = lax.concatenate([start, differs], 0) if differs is not None else start
    positions = nonzero(first, size=size, fill_value=0)[0]
    count = shape(positions)[0]
    total = lax.reduce_sum(lax.convert_element_type(first, _np.int32), (0,)) if n else lax.full((), 0, _np.int32)
    valid = lax.lt(lax.iota(_np.int32, count), lax.full((count,), total, _np.int32)) if size is not None else None
    values = take(stack(sorted_cols, axis=-1) if axis is not None else sorted_cols[0], positions, axis=0,
                  mode="promise_in_bounds") if n else (lax.full((0,) + ((len(columns),) if axis is not None else ()),
                                                                0, aval_of(rows).dtype))
    if valid is not None and count:
        if fill_value is None:
            fill = lax.broadcast_in_dim(lax.slice_in_dim(values, 0, 1, axis=0), shape(values),
                                        tuple(range(len(shape(values)))))
        else:
            fill = lax.full(shape(values), fill_value, aval_of(values).dtype) if not hasattr(fill_value, "shape") \
                else lax.broadcast_in_dim(_as_operand(fill_value), shape(values), ())
        mask = lax.broadcast_in_dim(valid, shape(values), (0,))
        values = lax.select(mask, values, fill)
    if axis is not None:
        values = moveaxis(reshape(values, (count,) + row_shape), 0, axis)
    if not (return_index or return_inverse or return_counts):
        return values
    result = [values]
    index_dtype = dt.default_int_dtype()  # the index arrays: int64 with enable_x64, as JAX
    if return_index:
        index = take(perm, positions, mode="promise_in_bounds") if n else lax.full((0,), 0, _np.int32)
        if valid is not None and count:
            index = lax.select(valid, index, lax.broadcast_in_dim(lax.slice_in_dim(index, 0, 1), (count,), (0,))
                               if n else lax.full((count,), 0, _np.int32))
        result.append(index)
    if return_inverse or return_counts:
        scatter_dims = ScatterDimensionNumbers((), (0,), (0,))
        # each sorted element's group: the number of group starts up to it, less one
        group = lax.sub(_cumsum_int(lax.convert_element_type(first, _np.int32)), lax.full((n,), 1, _np.int32)) \
            if n else lax.full((0,), 0, _np.int32)
    if return_inverse:
        inverse = lax.scatter(lax.full((n,), 0, _np.int32), reshape(perm, (n, 1)), group, scatter_dims,
                              unique_indices=True)
        result.append(reshape(inverse, shape(ar)) if axis is None else inverse)
    if return_counts:  # groups beyond size are dropped
        counts = lax.scatter_add(lax.full((count,), 0, _np.int32), reshape(group, (n, 1)),
                                 lax.full((n,), 1, _np.int32), scatter_dims, mode="drop")
        result.append(counts)
    return tuple(r if k == 0 or aval_of(r).dtype == index_dtype else lax.convert_element_type(r, index_dtype)
                 for k, r in enumerate(result))


class UniqueAllResult(NamedTuple):
    values: Any
    indices: Any
    inverse_indices: Any
    counts: Any


class UniqueCountsResult(NamedTuple):
    values: Any
    counts: Any


class UniqueInverseResult(NamedTuple):
    values: Any
    inverse_indices: Any


def unique_values(x: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The array API's unique_values: unique(x)."""
    return unique(x, size=size, fill_value=fill_value)


def unique_counts(x: Any, *, size: int | None = None, fill_value: Any = None) -> UniqueCountsResult:
    """The array API's unique_counts: (values, counts)."""
    return UniqueCountsResult(*unique(x, return_counts=True, size=size, fill_value=fill_value))


def unique_inverse(x: Any, *, size: int | None = None, fill_value: Any = None) -> UniqueInverseResult:
    """The array API's unique_inverse: (values, inverse_indices), the inverse shaped like x."""
    return UniqueInverseResult(*unique(x, return_inverse=True, size=size, fill_value=fill_value))


def unique_all(x: Any, *, size: int | None = None, fill_value: Any = None) -> UniqueAllResult:
    """The array API's unique_all: (values, indices, inverse_indices, counts)."""
    return UniqueAllResult(*unique(x, return_index=True, return_inverse=True, return_counts=True, size=size,
                                   fill_value=fill_value))


__all__ = ["sort", "argsort", "sort_complex", "lexsort", "partition", "argpartition", "searchsorted", "unique",
           "unique_values", "unique_counts", "unique_inverse", "unique_all"]
