"""Index grids and index helpers of ember.numpy: indices, meshgrid, mgrid/ogrid, r_/c_, s_/index_exp, ix_,
the triangle and diagonal index functions, ravel_multi_index and unravel_index."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as _np

from ember import _prims as lax
from ember._core import Tracer, aval_of
from ember._core import dtypes as dt
from ember._core.checks import static_int, static_ints

from ember._numpy.creation import asarray, ones
from ember._numpy.promotion import _as_operand, _promote
from ember._numpy.selection import nonzero, where
from ember._numpy.shape import concatenate, ndim, reshape, shape, stack, transpose
from ember._numpy.ufuncs import add, clip, floor_divide, less, multiply, remainder


def _int_dtype(dtype: Any) -> Any:
    return dt.default_int_dtype() if dtype is None else dt.check_user_dtype(dtype, "indices")


def indices(dimensions: Sequence[int], dtype: Any = None, sparse: bool = False) -> Any:
    """The grid of indices of an array of shape dimensions: (len(dimensions),) + dimensions, or with sparse a
    tuple of broadcastable arrays."""
    dims = static_ints("indices", "dimensions", dimensions)
    d = _int_dtype(dtype)
    if sparse:
        return tuple(reshape(lax.iota(d, n), tuple(n if j == i else 1 for j in range(len(dims))))
                     for i, n in enumerate(dims))
    if not dims:
        return lax.full((0,), 0, d)
    return stack([lax.broadcasted_iota(d, dims, i) for i in range(len(dims))])


def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> list[Any]:
    """Coordinate matrices from 1-D coordinate vectors ('xy': Cartesian, the first two axes swapped; 'ij': matrix
    indexing)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    arrays = [_as_operand(x, "meshgrid", i) for i, x in enumerate(xi)]
    arrays = [reshape(_promote("meshgrid", a)[0], (-1,)) for a in arrays]
    sizes = [shape(a)[0] for a in arrays]
    n = len(arrays)
    out_shape = list(sizes)
    if indexing == "xy" and n > 1:
        out_shape[0], out_shape[1] = out_shape[1], out_shape[0]
    result = []
    for i, a in enumerate(arrays):
        axis = i
        if indexing == "xy" and n > 1 and i < 2:
            axis = 1 - i
        if sparse:
            result.append(reshape(a, tuple(sizes[i] if j == axis else 1 for j in range(n))))
        else:
            result.append(lax.broadcast_in_dim(a, tuple(out_shape), (axis,)))
    return result


def _slice_values(name: str, s: Any) -> _np.ndarray:
    """The values of a slice of mgrid/ogrid/r_: numpy's arange, or with a complex step (5j) linspace."""
    if not isinstance(s, slice):
        raise TypeError(f"{name}: index with slices like [0:5] or [0:1:5j], got {s!r}")
    start = 0 if s.start is None else s.start
    step = 1 if s.step is None else s.step
    if isinstance(step, complex):
        return _np.linspace(start, s.stop, int(abs(step)))
    return _np.arange(start, s.stop, step)


class _Grid:
    def __init__(self, sparse: bool, name: str) -> None:
        self.sparse, self.name = sparse, name

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return asarray(_grid_dtype(_slice_values(self.name, key)))
        values = [_grid_dtype(_slice_values(self.name, k)) for k in key]
        d = dt.result_type(*[v.dtype for v in values])
        grids = meshgrid(*[asarray(v.astype(d)) for v in values], indexing="ij", sparse=self.sparse)
        return grids if self.sparse else stack(grids)

    def __repr__(self) -> str:
        return f"ember.numpy.{self.name}"


def _grid_dtype(values: _np.ndarray) -> _np.ndarray:
    """The default dtypes (int32/float32 without x64) for numpy's int64/float64 grid values."""
    if values.dtype.kind == "f":
        return values.astype(dt.default_float_dtype())
    return values.astype(dt.default_int_dtype())


mgrid = _Grid(False, "mgrid")
ogrid = _Grid(True, "ogrid")


class _Concatenator:
    """r_ and c_: arrays, scalars and slices concatenated along an axis, as numpy's index tricks. A first string
    entry is a directive: "axis", "axis,ndmin" or "axis,ndmin,trans1d" (where the axes of an entry with fewer
    than ndmin dimensions go: numpy's rule), or "r" / "c" (a 1-D result as a row / a column: 2-D arrays, as
    JAX, where numpy makes matrices)."""

    def __init__(self, axis: int, ndmin: int, trans1d: int, name: str) -> None:
        self.axis, self.ndmin, self.trans1d, self.name = axis, ndmin, trans1d, name

    def _directive(self, directive: str) -> tuple[int, int, int, str | None]:
        """(axis, ndmin, trans1d, "r", "c" or None) that the directive sets."""
        if directive in ("r", "c"):
            return self.axis, self.ndmin, self.trans1d, directive
        fields = directive.split(",")
        try:
            numbers = [int(f) for f in fields[:3]]
        except ValueError:
            raise ValueError(f"{self.name}: unknown special directive {directive!r}") from None
        if len(numbers) == 1:
            return numbers[0], self.ndmin, self.trans1d, None
        return numbers[0], numbers[1], numbers[2] if len(fields) == 3 else self.trans1d, None

    def __getitem__(self, key: Any) -> Any:
        items = key if isinstance(key, tuple) else (key,)
        axis, ndmin, trans1d, matrix = self.axis, self.ndmin, self.trans1d, None
        if items and isinstance(items[0], str):
            axis, ndmin, trans1d, matrix = self._directive(items[0])
            items = items[1:]
        parts = []
        for item in items:
            if isinstance(item, str):
                raise ValueError(f"{self.name}: a string directive must be the first entry, got {item!r} later")
            if isinstance(item, slice):
                parts.append(asarray(_grid_dtype(_slice_values(self.name, item))))
            else:
                parts.append(_promote(self.name, _as_operand(item, self.name, 0))[0])
        parts = [_with_ndmin(p, ndmin, trans1d) for p in _promote(self.name, *parts)]
        out = concatenate(parts, axis=axis)
        if matrix is not None and ndim(out) == 1:
            out = reshape(out, (1, -1) if matrix == "r" else (-1, 1))
        return out

    def __repr__(self) -> str:
        return f"ember.numpy.{self.name}"


def _with_ndmin(x: Any, ndmin: int, trans1d: int) -> Any:
    """x with leading axes of length 1 up to ndmin dimensions, its own axes then moved to start at trans1d (numpy's
    rule for r_/c_; -1: left at the end)."""
    nd = ndim(x)
    if nd >= ndmin:
        return x
    x = reshape(x, (1,) * (ndmin - nd) + shape(x))
    if trans1d == -1:
        return x
    added = ndmin - nd
    start = trans1d + added + 1 if trans1d < 0 else trans1d
    axes = list(range(ndmin))
    return transpose(x, axes[:start] + axes[added:] + axes[start:added])


r_ = _Concatenator(0, 1, -1, "r_")
c_ = _Concatenator(-1, 2, 0, "c_")


class _IndexExpression:
    def __init__(self, maketuple: bool) -> None:
        self.maketuple = maketuple

    def __getitem__(self, item: Any) -> Any:
        if self.maketuple and not isinstance(item, tuple):
            return (item,)
        return item


index_exp = _IndexExpression(True)
s_ = _IndexExpression(False)


def ix_(*args: Any) -> tuple[Any, ...]:
    """An open mesh from 1-D integer (or boolean, on concrete values) sequences, for cross-product indexing."""
    out = []
    n = len(args)
    for i, a in enumerate(args):
        a = _as_operand(a, "ix_", i)
        a = _promote("ix_", a)[0] if not hasattr(a, "shape") else a
        if ndim(a) != 1:
            raise ValueError(f"ix_: arguments must be 1-D, argument {i} has shape {shape(a)}")
        if aval_of(a).dtype == _np.dtype(bool):
            a = nonzero(a)[0]
        out.append(reshape(a, tuple(-1 if j == i else 1 for j in range(n))))
    return tuple(out)


def _triangle_indices(name: str, n: int, k: int, m: int | None, upper: bool) -> tuple[Any, Any]:
    n = static_int(name, "n", n)
    k = static_int(name, "k", k)
    m = n if m is None else static_int(name, "m", m)
    mask = _np.triu(_np.ones((n, m), bool), k) if upper else _np.tril(_np.ones((n, m), bool), k)
    rows, cols = _np.nonzero(mask)
    d = dt.default_int_dtype()
    return asarray(rows.astype(d)), asarray(cols.astype(d))


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Any, Any]:
    """The (row, column) indices of the lower triangle of an (n, m) array (diagonal offset k)."""
    return _triangle_indices("tril_indices", n, k, m, upper=False)


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple[Any, Any]:
    """The (row, column) indices of the upper triangle of an (n, m) array (diagonal offset k)."""
    return _triangle_indices("triu_indices", n, k, m, upper=True)


def _square_2d(name: str, arr: Any) -> tuple[int, int]:
    s = shape(_as_operand(arr, name, 0))
    if len(s) != 2:
        raise ValueError(f"{name}: arr must be 2-D, got shape {s}")
    return s


def tril_indices_from(arr: Any, k: int = 0) -> tuple[Any, Any]:
    n, m = _square_2d("tril_indices_from", arr)
    return tril_indices(n, k, m)


def triu_indices_from(arr: Any, k: int = 0) -> tuple[Any, Any]:
    n, m = _square_2d("triu_indices_from", arr)
    return triu_indices(n, k, m)


def diag_indices(n: int, ndim: int = 2) -> tuple[Any, ...]:
    """The indices of the main diagonal of an n x n x ... array of ndim dimensions."""
    n = static_int("diag_indices", "n", n)
    idx = lax.iota(dt.default_int_dtype(), n)
    return (idx,) * static_int("diag_indices", "ndim", ndim)


def diag_indices_from(arr: Any) -> tuple[Any, ...]:
    s = shape(_as_operand(arr, "diag_indices_from", 0))
    if len(s) < 2 or len(set(s)) != 1:
        raise ValueError(f"diag_indices_from: arr must have at least 2 dimensions, all of one length, got {s}")
    return diag_indices(s[0], len(s))


def mask_indices(n: int, mask_func: Any, k: int = 0, *, size: int | None = None) -> tuple[Any, Any]:
    """The indices where mask_func(ones((n, n)), k) is nonzero (e.g. mask_func=triu)."""
    return nonzero(mask_func(ones((n, n), dt.default_int_dtype()), k), size=size)


def ravel_multi_index(multi_index: Sequence[Any], dims: Sequence[int], mode: str = "raise",
                      order: str = "C") -> Any:
    """Flat indices from a tuple of index arrays into an array of shape dims; mode 'raise' (checked on concrete
    values), 'wrap' or 'clip'."""
    dims = static_ints("ravel_multi_index", "dims", dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"ravel_multi_index: {len(multi_index)} index arrays for {len(dims)} dimensions")
    if order not in ("C", "F"):
        raise ValueError(f"ravel_multi_index: order must be 'C' or 'F', got {order!r}")
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"ravel_multi_index: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    idx = [_promote("ravel_multi_index", _as_operand(i, "ravel_multi_index", j))[0]
           for j, i in enumerate(multi_index)]
    for j, i in enumerate(idx):
        if not dt.is_int(aval_of(i).dtype):
            raise TypeError(f"ravel_multi_index: index {j} must be integers, got {aval_of(i).str_short()}")
    idx = _promote("ravel_multi_index", *idx)
    if mode == "raise":
        for j, (i, n) in enumerate(zip(idx, dims)):
            if not isinstance(i, Tracer):
                v = _np.asarray(i)
                if v.size and (v.min() < 0 or v.max() >= n):
                    raise ValueError(f"ravel_multi_index: invalid entry in coordinates array {j} (dimension "
                                     f"of size {n})")
    elif mode == "wrap":
        idx = [remainder(i, n) for i, n in zip(idx, dims)]
    else:
        idx = [clip(i, 0, n - 1) for i, n in zip(idx, dims)]
    order_ = range(len(dims)) if order == "C" else reversed(range(len(dims)))
    strides = {}
    stride = 1
    for axis in reversed(list(order_)):
        strides[axis] = stride
        stride *= dims[axis]
    out = None
    for axis, i in enumerate(idx):
        term = multiply(i, strides[axis])
        out = term if out is None else add(out, term)
    return out


def unravel_index(indices: Any, shape: Sequence[int]) -> tuple[Any, ...]:  # noqa: A002, F811
    """The tuple of index arrays into an array of this shape for flat indices (negative indices count from the
    end; out of range ones are clipped, as jax.numpy)."""
    dims = static_ints("unravel_index", "shape", shape)
    i = _promote("unravel_index", _as_operand(indices, "unravel_index", 0))[0]
    if not dt.is_int(aval_of(i).dtype):
        raise TypeError(f"unravel_index: indices must be integers, got {aval_of(i).str_short()}")
    total = int(_np.prod(dims))
    i = where(less(i, 0), add(i, total), i)
    i = clip(i, 0, max(total - 1, 0))
    out = []
    for n in reversed(dims):
        out.append(remainder(i, n) if n else i)
        i = floor_divide(i, n) if n else i
    return tuple(reversed(out))


__all__ = ["indices", "meshgrid", "mgrid", "ogrid", "r_", "c_", "index_exp", "s_", "ix_", "tril_indices",
           "triu_indices", "tril_indices_from", "triu_indices_from", "diag_indices", "diag_indices_from",
           "mask_indices", "ravel_multi_index", "unravel_index"]
