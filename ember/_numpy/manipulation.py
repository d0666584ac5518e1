"""Array manipulation of ember.numpy beyond shape.py: the stack family (column_stack, dstack, block, concat),
tile, repeat, broadcast_arrays, append/insert/delete, pad (every numpy mode), resize, unstack, trim_zeros,
choose, place/put/fill_diagonal (as jax.numpy: functional, inplace=False), diagonal/diag/diagflat/trace, and the
function appliers (apply_along_axis, apply_over_axes, vectorize, piecewise)."""
from __future__ import annotations

import builtins
import functools
import re
from typing import Any, Callable, Sequence

import numpy as _np

from ember import _prims as lax
from ember._api.vmap import vmap
from ember._core import Tracer, aval_of, is_python_scalar
from ember._core import dtypes as dt
from ember._core.checks import normalize_axis, static_int, static_ints

from ember._numpy import reductions, statistics
from ember._numpy.creation import asarray
from ember._numpy.cumulative import cumsum
from ember._numpy.promotion import _operand_array, _broadcast_shapes, _broadcast_to_shape, _promote
from ember._numpy.reductions import sum as sum_
from ember._numpy.selection import take, where
from ember._numpy.shape import (broadcast_to, concatenate, diagonal, expand_dims, moveaxis, ndim, ravel,
                                reshape, shape, transpose)
from ember._numpy.sorting import searchsorted
from ember._numpy.ufuncs import add, clip, logical_not, logical_or, multiply, remainder, rint, subtract, trunc


_array = _operand_array


# ---------------------------------------------------------------------------------------------------------------
# Joining
def atleast_3d(*arys: Any) -> Any:
    """Each input viewed with at least three dimensions: (N,) -> (1, N, 1), (M, N) -> (M, N, 1)."""
    out = []
    for i, a in enumerate(arys):
        a = _array("atleast_3d", a, i)
        if ndim(a) == 0:
            a = reshape(a, (1, 1, 1))
        elif ndim(a) == 1:
            a = reshape(a, (1, shape(a)[0], 1))
        elif ndim(a) == 2:
            a = reshape(a, shape(a) + (1,))
        out.append(a)
    return out[0] if len(out) == 1 else out


def column_stack(tup: Sequence[Any]) -> Any:
    """1-D arrays as columns of a 2-D array; 2-D arrays stacked as they are (along axis 1)."""
    arrays = [_array("column_stack", a, i) for i, a in enumerate(tup)]
    arrays = [reshape(a, (-1, 1)) if ndim(a) < 2 else a for a in arrays]
    return concatenate(arrays, axis=1)


def dstack(tup: Sequence[Any]) -> Any:
    """Arrays stacked along the third axis (after atleast_3d)."""
    arrays = [atleast_3d(_array("dstack", a, i)) for i, a in enumerate(tup)]
    return concatenate(arrays, axis=2)


def concat(arrays: Sequence[Any], /, *, axis: int | None = 0) -> Any:
    """The array API's concatenate; axis=None flattens first."""
    if axis is None:
        return concatenate([ravel(a) for a in arrays], axis=0)
    return concatenate(arrays, axis=axis)


def block(arrays: Any) -> Any:
    """An array assembled from nested lists of blocks (numpy's block): the innermost lists join along the last
    axis, the next along the second to last, and so on."""
    def depth(x: Any) -> int:
        if isinstance(x, list):
            if not x:
                raise ValueError("block: lists cannot be empty")
            depths = {depth(e) for e in x}
            if len(depths) != 1:
                raise ValueError("block: list depths are mismatched")
            return 1 + depths.pop()
        if isinstance(x, tuple):
            raise TypeError("block: blocks are given as lists, not tuples")
        return 0

    list_depth = depth(arrays)
    leaves: list[Any] = []

    def collect(x: Any) -> None:
        if isinstance(x, list):
            for e in x:
                collect(e)
        else:
            leaves.append(x)
    collect(arrays)
    promoted = iter(_promote("block", *leaves))
    result_ndim = builtins.max(list_depth, builtins.max(ndim(_array("block", e)) for e in leaves))

    def assemble(x: Any, level: int) -> Any:
        if not isinstance(x, list):
            a = next(promoted)
            a = _array("block", a)
            return reshape(a, (1,) * (result_ndim - ndim(a)) + shape(a))
        parts = [assemble(e, level + 1) for e in x]
        return concatenate(parts, axis=-(list_depth - level))
    return assemble(arrays, 0)


def permute_dims(a: Any, /, axes: Sequence[int]) -> Any:
    """The array API's transpose: a with its axes permuted."""
    return transpose(a, axes)


def matrix_transpose(x: Any, /) -> Any:
    """x with its last two axes swapped (x.mT)."""
    x = _array("matrix_transpose", x)
    if ndim(x) < 2:
        raise ValueError(f"matrix_transpose: x must have at least 2 dimensions, got shape {shape(x)}")
    perm = list(range(ndim(x)))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    return transpose(x, perm)


def rollaxis(a: Any, axis: int, start: int = 0) -> Any:
    """numpy's rollaxis: axis moved to lie before start."""
    a = _array("rollaxis", a)
    n = ndim(a)
    axis = normalize_axis("rollaxis", axis, n)
    if not -n <= start <= n:
        raise ValueError(f"rollaxis: start {start} is out of bounds for an array of {n} dimensions")
    start = start + n if start < 0 else start
    if axis < start:
        start -= 1
    return moveaxis(a, axis, start)


def unstack(x: Any, /, *, axis: int = 0) -> tuple[Any, ...]:
    """The slices of x along axis, as a tuple."""
    x = _array("unstack", x)
    if ndim(x) == 0:
        raise ValueError("unstack: x must have at least one dimension")
    return lax.unstack(x, normalize_axis("unstack", axis, ndim(x)))


def broadcast_arrays(*args: Any) -> list[Any]:
    """The arguments broadcast to their common shape."""
    arrays = [_array("broadcast_arrays", a, i) for i, a in enumerate(args)]
    target = _broadcast_shapes("broadcast_arrays", *(shape(a) for a in arrays))
    return [_broadcast_to_shape(a, target) if shape(a) != target else a for a in arrays]


# ---------------------------------------------------------------------------------------------------------------
# Repetition
def tile(A: Any, reps: Any) -> Any:  # noqa: N803
    """A repeated reps times along each axis (numpy's tile)."""
    a = _array("tile", A)
    reps = (reps,) if isinstance(reps, int) else static_ints("tile", "reps", reps)
    reps = (1,) * (ndim(a) - len(reps)) + tuple(reps)
    a = reshape(a, (1,) * (len(reps) - ndim(a)) + shape(a))
    if builtins.any(r < 0 for r in reps):
        raise ValueError(f"tile: reps must be non-negative, got {reps}")
    return lax.tile(a, reps)


def repeat(a: Any, repeats: Any, axis: int | None = None, *, total_repeat_length: int | None = None) -> Any:
    """Each element of a repeated repeats times (an int, or one count per element along axis); under jit, array
    repeats need total_repeat_length (the static length of the result), as in JAX."""
    a = _array("repeat", a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = normalize_axis("repeat", axis, ndim(a))
    n = shape(a)[axis]
    if is_python_scalar(repeats) or (isinstance(repeats, (_np.ndarray, _np.generic)) and _np.ndim(repeats) == 0):
        r = int(repeats)
        if r < 0:
            raise ValueError(f"repeat: repeats may not be negative, got {r}")
        moved = moveaxis(a, axis, -1)
        b = lax.broadcast_in_dim(moved, shape(moved) + (r,), tuple(range(ndim(moved))))
        b = reshape(b, shape(moved)[:-1] + (n * r,))
        return moveaxis(b, -1, axis)
    reps = _array("repeat", repeats, 1)
    if not dt.is_int(aval_of(reps).dtype):
        raise TypeError(f"repeat: repeats must be integers, got {aval_of(reps).str_short()}")
    reps = ravel(reps)
    if shape(reps)[0] == 1:
        reps = broadcast_to(reps, (n,))
    if shape(reps)[0] != n:
        raise ValueError(f"repeat: {shape(reps)[0]} repeats for an axis of length {n}")
    if total_repeat_length is None:
        if isinstance(reps, Tracer):
            raise ValueError("repeat: under jit, array repeats need total_repeat_length= (the result's length)")
        rv = _np.asarray(reps)
        if (rv < 0).any():
            raise ValueError("repeat: repeats may not be negative")
        total_repeat_length = int(rv.sum())
    total = static_int("repeat", "total_repeat_length", total_repeat_length)
    ends = cumsum(reps)
    # position j of the result takes element searchsorted(ends, j, 'right')
    positions = lax.iota(aval_of(ends).dtype, total)
    src = searchsorted(ends, positions, side="right")
    src = lax.min(src, lax.full_like(src, builtins.max(n - 1, 0)))
    return take(a, src, axis=axis) if n else reshape(a, shape(a)[:axis] + (total,) + shape(a)[axis + 1:])


def resize(a: Any, new_shape: Any) -> Any:
    """a's elements repeated (cyclically) to fill new_shape (numpy's resize)."""
    a = ravel(_array("resize", a))
    new_shape = (new_shape,) if isinstance(new_shape, int) else static_ints("resize", "new_shape", new_shape)
    total = int(_np.prod(new_shape))
    n = shape(a)[0]
    if not n:  # nothing to repeat: zeros (numpy, jax.numpy)
        return lax.full(new_shape, 0, aval_of(a).dtype)
    reps = -(-total // n) if n else 0
    return reshape(tile(a, reps)[:total], new_shape)


# ---------------------------------------------------------------------------------------------------------------
# Insertion and deletion (static positions)
def append(arr: Any, values: Any, axis: int | None = None) -> Any:
    """values appended to arr (both flattened when axis is None)."""
    arr, values = _promote("append", _array("append", arr), _array("append", values, 1))
    if axis is None:
        return concatenate([ravel(arr), ravel(values)])
    return concatenate([arr, values], axis=axis)


def _static_positions(name: str, obj: Any, n: int) -> _np.ndarray:
    if isinstance(obj, Tracer):
        raise TypeError(f"{name}: the positions must be concrete (static) under jit")
    if isinstance(obj, slice):
        return _np.arange(n)[obj]
    positions = _np.asarray(obj)
    if positions.dtype == bool:
        if positions.shape != (n,):
            raise ValueError(f"{name}: a boolean mask must have shape ({n},), got {positions.shape}")
        return _np.nonzero(positions)[0]
    if positions.dtype.kind not in "iu":
        raise TypeError(f"{name}: positions must be integers, got dtype {positions.dtype}")
    return positions


def delete(arr: Any, obj: Any, axis: int | None = None, *, assume_unique_indices: bool = False) -> Any:
    """arr without the entries at obj (ints, a slice, a boolean mask) along axis (flattened when None)."""
    a = _array("delete", arr)
    if axis is None:
        a, axis = ravel(a), 0
    axis = normalize_axis("delete", axis, ndim(a))
    n = shape(a)[axis]
    positions = _static_positions("delete", obj, n)
    if positions.size and (positions.min() < -n or positions.max() >= n):
        raise IndexError(f"delete: index out of bounds for axis {axis} of length {n}")
    keep = _np.ones(n, bool)
    keep[positions % n if n else positions] = False
    return take(a, asarray(_np.nonzero(keep)[0].astype(dt.default_int_dtype())), axis=axis)


def insert(arr: Any, obj: Any, values: Any, axis: int | None = None) -> Any:
    """values inserted into arr before the positions obj along axis (flattened when None), numpy's insert."""
    a = _array("insert", arr)
    if axis is None:
        a, axis = ravel(a), 0
    axis = normalize_axis("insert", axis, ndim(a))
    n = shape(a)[axis]
    scalar_obj = isinstance(obj, int) or (isinstance(obj, (_np.integer,)))
    positions = _static_positions("insert", obj, n + 1) if not isinstance(obj, slice) else _np.arange(n)[obj]
    positions = _np.atleast_1d(positions)
    if positions.size and (positions.min() < -n or positions.max() > n):
        raise IndexError(f"insert: index out of bounds for axis {axis} of length {n}")
    positions = _np.where(positions < 0, positions + n, positions)
    a, vals = _promote("insert", a, _array("insert", values, 2))
    vals = lax.convert_element_type(vals, aval_of(a).dtype, aval_of(a).weak_type)
    k = positions.size
    other = shape(a)[:axis] + shape(a)[axis + 1:]
    if scalar_obj:
        # numpy: with a scalar position, values go in as a block along axis (their own length along it)
        v = reshape(vals, (1,) * (ndim(a) - ndim(vals)) + shape(vals)) if ndim(vals) < ndim(a) else vals
        v = moveaxis(v, 0, axis)
        count = shape(v)[axis]
        v = _broadcast_to_shape(v, shape(a)[:axis] + (count,) + shape(a)[axis + 1:])
        p = int(positions[0])
        before = _take_axis(a, _np.arange(p), axis)
        after = _take_axis(a, _np.arange(p, n), axis)
        return concatenate([before, v, after], axis=axis)
    vshape = other[:axis] + (k,) + other[axis:]
    v = vals
    if ndim(v) == 1 and shape(v)[0] == k and ndim(a) > 1:
        v = reshape(v, (1,) * axis + (k,) + (1,) * (ndim(a) - axis - 1))
    v = broadcast_to(v, vshape)
    order = _np.argsort(positions, kind="stable")
    sorted_pos = positions[order]
    new_positions = sorted_pos + _np.arange(k)
    total = n + k
    is_new = _np.zeros(total, bool)
    is_new[new_positions] = True
    old_index = _np.cumsum(~is_new) - 1
    new_index = _np.zeros(total, _np.int64)
    new_index[new_positions] = order
    combined = concatenate([a, v], axis=axis)
    source = _np.where(is_new, n + new_index, old_index).astype(dt.default_int_dtype())
    return take(combined, asarray(source), axis=axis)


def trim_zeros(filt: Any, trim: str = "fb", axis: Any = None) -> Any:
    """filt without leading ('f') and/or trailing ('b') zeros (concrete values: the length depends on them)."""
    a = _array("trim_zeros", filt)
    if isinstance(a, Tracer):
        raise TypeError("trim_zeros: the result's length depends on the values; it cannot be used under jit")
    v = _np.asarray(a)
    nz = _np.nonzero(v != 0)[0] if v.ndim == 1 else _np.nonzero(v.reshape(v.shape[0], -1).any(axis=1))[0]
    if not nz.size:
        return a[0:0]
    start = int(nz[0]) if "f" in trim.lower() else 0
    stop = int(nz[-1]) + 1 if "b" in trim.lower() else v.shape[0]
    return a[start:stop]


# ---------------------------------------------------------------------------------------------------------------
# Padding
_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap", "linear_ramp", "maximum", "minimum", "mean",
              "median", "empty")


def _pad_widths(name: str, pad_width: Any, nd: int) -> list[tuple[int, int]]:
    if isinstance(pad_width, Tracer):
        raise TypeError(f"{name}: pad_width must be static")
    pw = _np.asarray(pad_width)
    if pw.dtype.kind not in "iu":
        raise TypeError(f"{name}: pad_width must be integers, got {pad_width!r}")
    try:
        pw = _np.broadcast_to(pw, (nd, 2))
    except ValueError:
        raise ValueError(f"{name}: pad_width {pad_width!r} does not fit an array of {nd} dimensions") from None
    if (pw < 0).any():
        raise ValueError(f"{name}: pad widths must be non-negative, got {pad_width!r}")
    return [(int(lo), int(hi)) for lo, hi in pw]


def _per_axis(name: str, value: Any, nd: int) -> list[tuple[Any, Any]]:
    v = _np.asarray(value, dtype=object) if not isinstance(value, Tracer) else None
    if v is None:
        return [(value, value)] * nd
    v = _np.broadcast_to(v, (nd, 2))
    return [(v[i, 0], v[i, 1]) for i in range(nd)]


def pad(array: Any, pad_width: Any, mode: str | Callable[..., Any] = "constant", **kwargs: Any) -> Any:
    """numpy's pad with every mode: constant (constant_values), edge, reflect and symmetric (reflect_type even or
    odd), wrap, linear_ramp (end_values), maximum/minimum/mean/median (stat_length), empty; or a callable."""
    a = _array("pad", array)
    nd = ndim(a)
    widths = _pad_widths("pad", pad_width, nd)
    if callable(mode):
        raise NotImplementedError("pad: a callable mode is not supported (nor is it by jax.numpy under jit)")
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: mode must be one of {', '.join(_PAD_MODES)}, got {mode!r}")
    allowed = {"constant": {"constant_values"}, "linear_ramp": {"end_values"},
               "reflect": {"reflect_type"}, "symmetric": {"reflect_type"},
               **{m: {"stat_length"} for m in ("maximum", "minimum", "mean", "median")}}.get(mode, set())
    unknown = set(kwargs) - allowed
    if unknown:
        raise ValueError(f"pad: unsupported keyword arguments for mode {mode!r}: {sorted(unknown)}")
    if mode in ("constant", "empty"):
        return _pad_constant(a, widths, _per_axis("pad", kwargs.get("constant_values", 0), nd))
    out = a
    for axis, (lo, hi) in enumerate(widths):
        if lo == 0 and hi == 0:
            continue
        if shape(out)[axis] == 0:
            raise ValueError(f"pad: can't extend empty axis {axis} using mode {mode!r}")
        out = _pad_axis(out, axis, lo, hi, mode, kwargs, nd)
    return out


def _pad_constant(x: Any, widths: list[tuple[int, int]], values: list[tuple[Any, Any]]) -> Any:
    """x padded with constants (lax.pad: its sharding type kept, as JAX's jnp.pad): one pad where every side's value
    is the same, else one per side padded; a value that is not a scalar is broadcast over its side's block."""
    d = aval_of(x).dtype
    sides = [(axis, side, width, v) for axis, ((lo, hi), pair) in enumerate(zip(widths, values))
             for side, (width, v) in enumerate(zip((lo, hi), pair)) if width]
    if not sides:
        return x
    if builtins.any(ndim(v) for _, _, _, v in sides):
        for axis, side, width, v in sides:
            s = list(shape(x))
            s[axis] = width
            block = _broadcast_to_shape(lax.convert_element_type(_array("pad", v), d, False), tuple(s))
            x = concatenate([block, x] if side == 0 else [x, block], axis=axis)
        return x
    scalars = [v for _, _, _, v in sides]
    if builtins.all(_same_value(v, scalars[0]) for v in scalars):
        return lax.pad(x, lax.convert_element_type(_array("pad", scalars[0]), d, False),
                       [(lo, hi, 0) for lo, hi in widths])
    for axis, side, width, v in sides:
        config = [(0, 0, 0)] * len(widths)
        config[axis] = (width, 0, 0) if side == 0 else (0, width, 0)
        x = lax.pad(x, lax.convert_element_type(_array("pad", v), d, False), config)
    return x


def _same_value(v: Any, w: Any) -> bool:
    if v is w:
        return True
    if isinstance(v, Tracer) or isinstance(w, Tracer):
        return False
    return type(v) is type(w) and bool(_np.asarray(v) == _np.asarray(w))


def _take_axis(x: Any, idx: _np.ndarray, axis: int) -> Any:
    return take(x, asarray(idx.astype(dt.default_int_dtype())), axis=axis)


def _pad_axis(x: Any, axis: int, lo: int, hi: int, mode: str, kwargs: dict[str, Any], nd: int) -> Any:
    n = shape(x)[axis]
    if mode in ("edge", "wrap", "reflect", "symmetric"):
        idx = _np.arange(-lo, n + hi)
        if mode == "edge":
            src = _np.clip(idx, 0, n - 1)
        elif mode == "wrap":
            src = idx % n
        elif mode == "reflect":
            period = 2 * (n - 1) if n > 1 else 1
            m = _np.abs(idx) % period if n > 1 else _np.zeros_like(idx)
            src = _np.where(m >= n, period - m, m)
        else:  # symmetric
            period = 2 * n
            m = idx % period
            src = _np.where(m >= n, period - 1 - m, m)
        out = _take_axis(x, src, axis)
        if mode in ("reflect", "symmetric") and kwargs.get("reflect_type", "even") == "odd":
            # odd reflection: 2 * edge - reflected value, for the padded parts
            first = _take_axis(x, _np.array([0]), axis)
            last = _take_axis(x, _np.array([n - 1]), axis)
            before = idx < 0
            after = idx >= n
            # odd reflection repeats outward: each period adds the span again; computed with numpy's rule
            # for the common case of one reflection (pad widths up to n - 1)
            if lo > n - 1 or hi > n - 1:
                raise NotImplementedError("pad: reflect_type='odd' with pad widths beyond the axis length")
            lo_part = subtract(multiply(first, 2), _take_axis(out, _np.nonzero(before)[0], axis))
            hi_part = subtract(multiply(last, 2), _take_axis(out, _np.nonzero(after)[0], axis))
            mid = _take_axis(out, _np.nonzero(~before & ~after)[0], axis)
            out = concatenate([lo_part, mid, hi_part], axis=axis)
        return out
    if mode == "linear_ramp":
        ends = _per_axis("pad", kwargs.get("end_values", 0), nd)[axis]
        return _linear_ramp(x, axis, lo, hi, ends)
    # statistics
    stat = kwargs.get("stat_length")
    if stat is None:
        slo = shi = n
    else:
        slo, shi = _per_axis("pad", stat, nd)[axis]
        slo = n if slo is None else builtins.min(int(slo), n)
        shi = n if shi is None else builtins.min(int(shi), n)
    fn = {"maximum": reductions.max, "minimum": reductions.min, "mean": reductions.mean,
          "median": statistics.median}[mode]
    head = _take_axis(x, _np.arange(slo), axis)
    tail = _take_axis(x, _np.arange(n - shi, n), axis)
    vlo = fn(head, axis=axis, keepdims=True)
    vhi = fn(tail, axis=axis, keepdims=True)
    d = aval_of(x).dtype
    if mode in ("mean", "median") and not dt.is_float(d):
        vlo, vhi = rint(vlo), rint(vhi)
    vlo, vhi = (lax.convert_element_type(v, d, False) for v in (vlo, vhi))
    s_lo, s_hi = list(shape(x)), list(shape(x))
    s_lo[axis], s_hi[axis] = lo, hi
    parts = [_broadcast_to_shape(vlo, tuple(s_lo)), x, _broadcast_to_shape(vhi, tuple(s_hi))]
    return concatenate([p for p in parts if shape(p)[axis]], axis=axis)


def _linear_ramp(x: Any, axis: int, lo: int, hi: int, ends: tuple[Any, Any]) -> Any:
    n = shape(x)[axis]
    d = aval_of(x).dtype
    f = dt.to_inexact_dtype(d) if not dt.is_float(d) else d
    parts = []
    s = list(shape(x))
    if lo:
        edge = lax.convert_element_type(_take_axis(x, _np.array([0]), axis), f)
        t = _np.arange(lo) / lo  # 0 at the end value, approaching the edge
        s[axis] = lo
        ramp = lax.broadcast_in_dim(lax.convert_element_type(_array("pad", t.astype(f)), f), tuple(s), (axis,))
        end = lax.convert_element_type(_array("pad", ends[0]), f)
        parts.append(add(end, multiply(ramp, subtract(edge, end))))
    parts.append(lax.convert_element_type(x, f))
    if hi:
        edge = lax.convert_element_type(_take_axis(x, _np.array([n - 1]), axis), f)
        s[axis] = hi
        t = _np.arange(1, hi + 1) / hi  # 1 / hi past the edge, up to 1 at the end value
        ramp = lax.broadcast_in_dim(lax.convert_element_type(_array("pad", t.astype(f)), f), tuple(s), (axis,))
        end = lax.convert_element_type(_array("pad", ends[1]), f)
        parts.append(add(edge, multiply(ramp, subtract(end, edge))))
    out = concatenate(parts, axis=axis)
    if not dt.is_float(d):
        out = trunc(out)
    return lax.convert_element_type(out, d)


# ---------------------------------------------------------------------------------------------------------------
# Choosing and functional updates
def choose(a: Any, choices: Sequence[Any], out: Any = None, mode: str = "raise") -> Any:
    """choices[a[i]][i] for every i (all broadcast together); mode 'raise' (checked on concrete values), 'wrap'
    or 'clip'."""
    if out is not None:
        raise TypeError("choose: the out argument is not supported (ember arrays are immutable)")
    idx = _array("choose", a)
    if not dt.is_int(aval_of(idx).dtype):
        raise TypeError(f"choose: a must be integers, got {aval_of(idx).str_short()}")
    choices = _promote("choose", *choices)
    n = len(choices)
    if mode == "raise":
        if not isinstance(idx, Tracer):
            v = _np.asarray(idx)
            if v.size and (v.min() < 0 or v.max() >= n):
                raise ValueError(f"choose: invalid entry in choice array (choices: {n})")
    elif mode == "wrap":
        idx = remainder(idx, n)
    elif mode == "clip":
        idx = clip(idx, 0, n - 1)
    else:
        raise ValueError(f"choose: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    target = _broadcast_shapes("choose", shape(idx), *(shape(c) for c in choices))
    idx = _broadcast_to_shape(idx, target) if shape(idx) != target else idx
    choices = [_broadcast_to_shape(c, target) if shape(c) != target else c for c in choices]
    idx = lax.convert_element_type(idx, _np.dtype(_np.int32))
    return lax.select_n(idx, *choices)


def _functional(name: str, inplace: bool) -> None:
    if inplace:
        raise ValueError(f"{name}: ember arrays are immutable; pass inplace=False to get the updated copy "
                         f"(as jax.numpy)")


def place(arr: Any, mask: Any, vals: Any, *, inplace: bool = True) -> Any:
    """arr with the positions where mask is True filled by vals in order (cycled); inplace=False is required."""
    _functional("place", inplace)
    a = _array("place", arr)
    m = _array("place", mask, 1)
    if shape(m) != shape(a):
        raise ValueError(f"place: mask of shape {shape(m)} differs from arr's shape {shape(a)}")
    vals = ravel(_array("place", vals, 2))
    flat_mask = ravel(lax.convert_element_type(m, _np.dtype(bool)))
    if shape(vals)[0] == 0:
        return a
    order = lax.sub(cumsum(lax.convert_element_type(flat_mask, dt.default_int_dtype())),
                    lax.full(shape(flat_mask), 1, dt.default_int_dtype()))
    picked = take(lax.convert_element_type(vals, aval_of(a).dtype), remainder(order, shape(vals)[0]))
    return reshape(where(flat_mask, picked, ravel(a)), shape(a))


def put(a: Any, ind: Any, v: Any, mode: str | None = None, *, inplace: bool = True) -> Any:
    """a with the flat positions ind set to v (cycled); inplace=False is required."""
    _functional("put", inplace)
    arr = _array("put", a)
    idx = ravel(_array("put", ind, 1))
    vals = ravel(lax.convert_element_type(_array("put", v, 2), aval_of(arr).dtype))
    k = shape(idx)[0]
    if k == 0:
        return arr
    vals = tile(vals, -(-k // shape(vals)[0]))[:k] if shape(vals)[0] != k else vals
    flat = ravel(arr)
    n = shape(flat)[0]
    if mode == "wrap":
        idx = remainder(idx, n)
    elif mode == "clip":
        idx = clip(idx, 0, n - 1)
    elif mode not in (None, "raise", "fill"):
        raise ValueError(f"put: mode must be 'raise', 'wrap' or 'clip', got {mode!r}")
    return reshape(flat.at[idx].set(vals), shape(arr))


def fill_diagonal(a: Any, val: Any, wrap: bool = False, *, inplace: bool = True) -> Any:
    """a with its main diagonal set to val (cycled); inplace=False is required."""
    _functional("fill_diagonal", inplace)
    arr = _array("fill_diagonal", a)
    s = shape(arr)
    if len(s) < 2:
        raise ValueError(f"fill_diagonal: a must be at least 2-D, got shape {s}")
    if len(s) > 2 and len(set(s)) != 1:
        raise ValueError(f"fill_diagonal: all dimensions must have equal length, got shape {s}")
    if len(s) == 2:
        n_rows, n_cols = s
        step = n_cols + 1
        end = n_rows * n_cols if wrap else builtins.min(n_rows, n_cols) * n_cols
        positions = _np.arange(0, end, step)
    else:
        step = int(_np.sum(_np.cumprod((1,) + s[:-1])))
        positions = _np.arange(0, int(_np.prod(s)), step)
    k = positions.size
    vals = ravel(lax.convert_element_type(_array("fill_diagonal", val, 1), aval_of(arr).dtype))
    if k == 0 or shape(vals)[0] == 0:
        return arr
    vals = tile(vals, -(-k // shape(vals)[0]))[:k]
    return reshape(ravel(arr).at[asarray(positions.astype(dt.default_int_dtype()))].set(vals), s)


# ---------------------------------------------------------------------------------------------------------------
# Diagonals
def diag(v: Any, k: int = 0) -> Any:
    """The k-th diagonal of a 2-D array, or a 2-D array with the 1-D v on its k-th diagonal."""
    v = _array("diag", v)
    k = static_int("diag", "k", k)
    if ndim(v) == 2:
        return diagonal(v, k)
    if ndim(v) != 1:
        raise ValueError(f"diag: v must be 1-D or 2-D, got shape {shape(v)}")
    n = shape(v)[0] + builtins.abs(k)
    rows = lax.broadcasted_iota(_np.dtype(_np.int32), (n, n), 0)
    cols = lax.broadcasted_iota(_np.dtype(_np.int32), (n, n), 1)
    on = lax.eq(lax.sub(cols, rows), lax.full_like(rows, k))
    padded = concatenate([v, lax.full((builtins.abs(k),), 0, aval_of(v).dtype)]) if k else v
    # element of v on row i: i (k >= 0) or column j (k < 0)
    src = rows if k >= 0 else cols
    values = take(padded, lax.min(src, lax.full_like(src, shape(padded)[0] - 1)))
    return lax.select(on, values, lax.full_like(values, 0))


def diagflat(v: Any, k: int = 0) -> Any:
    return diag(ravel(_array("diagflat", v)), k)


def trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None, out: Any = None) -> Any:
    """The sum along a diagonal."""
    if out is not None:
        raise TypeError("trace: the out argument is not supported (ember arrays are immutable)")
    a = _array("trace", a)
    if ndim(a) < 2:
        raise ValueError(f"trace: a must have at least 2 dimensions, got shape {shape(a)}")
    if dtype is None:
        dt.refuse_narrow_int_promotion("trace", aval_of(a).dtype)
    return sum_(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


# ---------------------------------------------------------------------------------------------------------------
# Applying functions
def apply_along_axis(func1d: Callable[..., Any], axis: int, arr: Any, *args: Any, **kwargs: Any) -> Any:
    """func1d applied to the 1-D slices of arr along axis (vmapped over the other axes, as jax.numpy)."""
    a = _array("apply_along_axis", arr)
    nd = ndim(a)
    axis = normalize_axis("apply_along_axis", axis, nd)

    def on_slice(x: Any) -> Any:
        return func1d(x, *args, **kwargs)

    fn: Callable[..., Any] = on_slice
    for _ in range(axis):
        fn = vmap(fn, in_axes=0, out_axes=0)
    for _ in range(axis + 1, nd):
        fn = vmap(fn, in_axes=-1, out_axes=-1)
    return fn(a)


def apply_over_axes(func: Callable[[Any, int], Any], a: Any, axes: Sequence[int]) -> Any:
    """func(a, axis) applied over each axis in turn, keeping the dimensions (numpy's apply_over_axes)."""
    a = _array("apply_over_axes", a)
    for axis in ((axes,) if isinstance(axes, int) else axes):
        b = func(a, axis)
        if ndim(b) == ndim(a):
            a = b
        elif ndim(b) == ndim(a) - 1:
            a = expand_dims(b, axis)
        else:
            raise ValueError("apply_over_axes: func must keep or drop one dimension")
    return a


def vectorize(pyfunc: Callable[..., Any], *, excluded: Any = frozenset(), signature: str | None = None
              ) -> Callable[..., Any]:
    """pyfunc made to broadcast over its array arguments by vmap (numpy's vectorize; with signature, over the
    loop dimensions only, e.g. '(n),(n)->()')."""
    excluded = set(excluded)
    in_core: list[list[str]] | None = None
    if signature is not None:
        try:
            ins, outs = signature.replace(" ", "").split("->")
        except ValueError:
            raise ValueError(f"vectorize: invalid signature {signature!r}") from None
        in_core = [[d for d in grp.split(",") if d] for grp in re.findall(r"\(([^()]*)\)", ins)]

    @functools.wraps(pyfunc)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        static = {i: a for i, a in enumerate(args) if i in excluded}
        names = {k: v for k, v in kwargs.items() if k in excluded}
        dyn_kw = {k: v for k, v in kwargs.items() if k not in excluded}
        if dyn_kw:
            raise ValueError("vectorize: pass the non-excluded arguments positionally")
        positions = [i for i in range(len(args)) if i not in excluded]
        arrays = [_array("vectorize", args[i], i) for i in positions]
        cores = [len(c) for c in in_core] if in_core is not None else [0] * len(arrays)
        if len(cores) != len(arrays):
            raise ValueError(f"vectorize: the signature {signature!r} names {len(cores)} inputs, got {len(arrays)}")
        loop_shapes = [shape(a)[:ndim(a) - c] if c else shape(a) for a, c in zip(arrays, cores)]
        loop = _broadcast_shapes("vectorize", *loop_shapes)
        arrays = [_broadcast_to_shape(a, loop + shape(a)[ndim(a) - c:] if c else loop) for a, c in zip(arrays, cores)]

        def call(*xs: Any) -> Any:
            full = list(args)
            for i, x in zip(positions, xs):
                full[i] = x
            for i, v in static.items():
                full[i] = v
            return pyfunc(*full, **names)

        fn = call
        for _ in loop:
            fn = vmap(fn)
        return fn(*arrays)
    return wrapped


def piecewise(x: Any, condlist: Any, funclist: Sequence[Any], *args: Any, **kw: Any) -> Any:
    """funclist[i](x) where condlist[i] (the last True wins); one extra function is the default (where no
    condition holds); constants stand for constant functions."""
    x = _array("piecewise", x)
    conds = [condlist] if (hasattr(condlist, "dtype") and ndim(condlist) == ndim(x)) or isinstance(condlist, bool) \
        else list(condlist)
    n = len(conds)
    if len(funclist) not in (n, n + 1):
        raise ValueError(f"piecewise: {len(funclist)} functions for {n} conditions (need {n} or {n + 1})")
    d = aval_of(x).dtype

    def value(f: Any) -> Any:
        out = f(x, *args, **kw) if callable(f) else f
        return _broadcast_to_shape(lax.convert_element_type(_array("piecewise", out), d, False), shape(x))

    if len(funclist) == n + 1:
        any_cond = None
        for c in conds:
            any_cond = c if any_cond is None else logical_or(any_cond, c)
        conds = conds + [logical_not(any_cond)]
    result = lax.full(shape(x), 0, d)
    for c, f in zip(conds, funclist):
        result = where(c, value(f), result)
    return result


__all__ = ["atleast_3d", "column_stack", "dstack", "concat", "block", "permute_dims", "matrix_transpose", "rollaxis",
           "unstack", "broadcast_arrays", "tile", "repeat", "resize", "append", "delete", "insert", "trim_zeros",
           "pad", "choose", "place", "put", "fill_diagonal", "diag", "diagflat", "trace", "apply_along_axis",
           "apply_over_axes", "vectorize", "piecewise"]
