"""Selecting and placing elements, as jax.numpy: take, take_along_axis, put_along_axis, nonzero and its kin
(argwhere, flatnonzero, the one-argument where, compress, extract) with `size=` for traced programs, select, flip,
roll, rot90, tril/triu/tri and diff."""
from __future__ import annotations

import builtins
from typing import Any, Sequence

import numpy as _np

from ember import _prims as lax
from ember._control import associative_scan
from ember._core import Tracer, aval_of, is_python_scalar
from ember._core import dtypes as dt
from ember._core.checks import normalize_axes, normalize_axis, static_int
from ember._prims.indexing import GatherDimensionNumbers, ScatterDimensionNumbers, default_fill_value
from ember._runtime.array import asarray

from ember._numpy.indexing import _read, _wrapped
from ember._numpy.promotion import _as_operand, _broadcast_shapes, _promote
from ember._numpy.shape import (_physical, broadcast_to, concatenate, expand_dims, ravel, reshape, shape, stack,
                                swapaxes)
from ember._core.pytree import PHYSICAL
from ember._numpy.ufuncs import _where, clip, not_equal, remainder, subtract


def _axis_or_flat(op: str, a: Any, axis: Any) -> tuple[Any, int]:
    a = _as_operand(a, op, 0)
    if axis is None:
        return ravel(a), 0
    return a, normalize_axis(op, static_int(op, "axis", axis), len(shape(a)))


def _int_indices(op: str, indices: Any) -> Any:
    indices = _as_operand(indices, op, 1)
    if is_python_scalar(indices):
        if not isinstance(indices, int) or isinstance(indices, bool):
            raise TypeError(f"{op}: indices must be integers, got {indices!r}")
        return asarray(_np.array(indices, _np.int32))
    if not dt.is_int(aval_of(indices).dtype):
        raise TypeError(f"{op}: indices must be an integer array, got {aval_of(indices).str_short()}")
    return indices


def _take_mode(op: str, mode: Any) -> str:
    if mode is None:
        return "fill"
    if mode == "raise":
        raise NotImplementedError(f"{op}: mode 'raise' needs the index values on the host; use 'fill', 'clip', "
                                  "'wrap' or 'promise_in_bounds'")
    if mode not in ("fill", "clip", "wrap", "promise_in_bounds"):
        raise ValueError(f"{op}: mode must be 'fill', 'clip', 'wrap' or 'promise_in_bounds', got {mode!r}")
    return mode


def take(a: Any, indices: Any, axis: int | None = None, out: None = None, mode: str | None = None,
         unique_indices: bool = False, indices_are_sorted: bool = False, fill_value: Any = None) -> Any:
    """Elements of a at indices along axis (a flattened when axis is None), like jax.numpy.take: negative indices
    count from the end; out-of-bounds ones give fill_value (NaN for floats) under the default mode "fill", the
    nearest element under "clip", wrap around under "wrap"."""
    if out is not None:
        raise NotImplementedError("take: out= is not supported (ember arrays are immutable)")
    mode = _take_mode("take", mode)
    a, axis = _axis_or_flat("take", a, axis)
    indices = _int_indices("take", indices)
    if mode == "wrap":
        indices = remainder(indices, _np.array(builtins.max(shape(a)[axis], 1), aval_of(indices).dtype))
        mode = "promise_in_bounds"
    elif mode == "clip":  # take's "clip" clamps negative indices to 0 too, rather than counting from the end
        indices = clip(indices, 0, builtins.max(shape(a)[axis] - 1, 0))
    index = (builtins.slice(None),) * axis + (indices,)
    return _read(a, index, "take", mode, fill_value, indices_are_sorted, unique_indices)


def _along_axis(op: str, arr: Any, indices: Any, axis: Any) -> tuple[Any, Any, int]:
    """arr and indices broadcast against each other in every dimension but axis (numpy's rule)."""
    arr, axis = _axis_or_flat(op, arr, axis)
    indices = _int_indices(op, indices)
    if axis is not None and len(shape(indices)) != len(shape(arr)):
        raise ValueError(f"{op}: indices {aval_of(indices).str_short()} must have the rank of arr "
                         f"{aval_of(arr).str_short()}")
    if len(shape(indices)) != len(shape(arr)):
        indices = ravel(indices)
    a_shape, i_shape = list(shape(arr)), list(shape(indices))
    a_shape[axis] = i_shape[axis] = 1
    common = list(_broadcast_shapes(op, tuple(a_shape), tuple(i_shape)))
    arr = broadcast_to(arr, tuple(common[:axis] + [shape(arr)[axis]] + common[axis + 1:]))
    indices = broadcast_to(indices, tuple(common[:axis] + [shape(indices)[axis]] + common[axis + 1:]))
    return arr, indices, axis


def take_along_axis(arr: Any, indices: Any, axis: int | None = -1, mode: str | None = None,
                    fill_value: Any = None) -> Any:
    """arr[..., indices, ...] matched position by position along axis (like jax.numpy.take_along_axis): the other
    dimensions of arr and indices broadcast; negative indices count from the end; mode as in take."""
    mode = _take_mode("take_along_axis", mode)
    arr, indices, axis = _along_axis("take_along_axis", arr, indices, axis)
    n = shape(arr)[axis]
    if n == 0 and _np.prod(shape(indices)):  # every index is out of bounds of an empty axis
        if mode != "fill":
            raise IndexError(f"take_along_axis: indices into axis {axis} of size 0 (mode {mode!r})")
        dtype = aval_of(arr).dtype
        return lax.full(shape(indices), default_fill_value(dtype) if fill_value is None else fill_value, dtype)
    if mode == "wrap":
        indices = remainder(indices, _np.array(builtins.max(n, 1), aval_of(indices).dtype))
        mode = "promise_in_bounds"
    indices = _wrapped(indices, n, _np.dtype(_np.int32) if aval_of(indices).dtype.itemsize < 8 or
                       not dt.x64_enabled() else _np.dtype(_np.int64))
    rank = len(shape(arr))
    others = tuple(d for d in range(rank) if d != axis)
    dnums = GatherDimensionNumbers((), (axis,), (axis,), others, others)
    return lax.gather(arr, reshape(indices, shape(indices) + (1,)), dnums, (1,) * rank, mode=mode,
                      fill_value=fill_value)


def put_along_axis(arr: Any, indices: Any, values: Any, axis: int | None, inplace: bool = True, *,
                   mode: str | None = None) -> Any:
    """arr with values written at indices along axis (like jax.numpy.put_along_axis, which needs inplace=False:
    ember arrays are immutable). Out-of-bounds indices are dropped unless mode="clip"."""
    if inplace:
        raise ValueError("put_along_axis: ember arrays are immutable; pass inplace=False to get the updated array")
    original_shape = shape(_as_operand(arr))
    target, indices, axis_n = _along_axis("put_along_axis", arr, indices, axis)
    if shape(target) != (original_shape if axis is not None else (builtins.int(_np.prod(original_shape)),)):
        raise ValueError(f"put_along_axis: indices {shape(indices)} must not broadcast arr {original_shape}")
    n = shape(target)[axis_n]
    indices = _wrapped(indices, n, _np.dtype(_np.int32) if not dt.x64_enabled() else aval_of(indices).dtype)
    values = _as_operand(values)
    dtype = aval_of(target).dtype
    values = broadcast_to(values if aval_of(values).dtype == dtype else lax.convert_element_type(values, dtype),
                          shape(indices))
    rank = len(shape(target))
    others = tuple(d for d in range(rank) if d != axis_n)
    dnums = ScatterDimensionNumbers((), (axis_n,), (axis_n,), others, others)
    out = lax.scatter(target, reshape(indices, shape(indices) + (1,)), values, dnums, mode=mode)
    return reshape(out, original_shape) if axis is None else out


# ---------------------------------------------------------------------------------------------------------------
# nonzero and kin: data-dependent sizes, concrete eagerly, `size=` under tracing
def _static_size(op: str, size: Any) -> int | None:
    return None if size is None else static_int(op, "size", size)


def _nonzero_flat(op: str, a: Any, size: int | None) -> tuple[Any, int, Any]:
    """(flat positions of the nonzero elements of a, the number kept, their count): positions computed from the
    concrete value when size is None, else on the device, padded to size."""
    a = _as_operand(a, op, 0)
    flat_mask = ravel(a) if dt.is_bool(aval_of(a).dtype) else _not_zero(ravel(a))
    if size is None:
        if isinstance(a, Tracer):
            raise ValueError(
                f"{op}: the number of nonzero elements of {aval_of(a).str_short()} depends on its values, which a "
                f"traced program (jit, vmap, grad) cannot have: pass size=n (and fill_value=) for a fixed-size result")
        positions = _np.flatnonzero(_np.asarray(flat_mask)).astype(_np.int32)
        return asarray(positions), len(positions), None
    n = shape(flat_mask)[0]
    counts = associative_scan(lax.add, lax.convert_element_type(flat_mask, _np.int32))  # inclusive prefix sums
    total = lax.reduce_sum(lax.convert_element_type(flat_mask, _np.int32), (0,)) if n else \
        lax.full((), 0, _np.int32)
    # each nonzero element goes to slot (its count - 1); the others to slot `size`, out of bounds and dropped
    slots = lax.select(flat_mask, lax.sub(counts, lax.full((n,), 1, _np.int32)), lax.full((n,), size, _np.int32))
    dnums = ScatterDimensionNumbers((), (0,), (0,))
    positions = lax.scatter(lax.full((size,), 0, _np.int32), reshape(slots, (n, 1)), lax.iota(_np.int32, n), dnums,
                            mode="drop", unique_indices=True)
    return positions, size, total


def _not_zero(x: Any) -> Any:
    return not_equal(x, 0)


def _unravel(positions: Any, dims: tuple[int, ...]) -> list[Any]:
    out, rest = [], positions
    for k in range(len(dims) - 1, -1, -1):
        d = _np.array(builtins.max(dims[k], 1), _np.int32)
        out.append(lax.rem(rest, lax.full(shape(rest), d, _np.int32)) if k else rest)
        rest = lax.div(rest, lax.full(shape(rest), d, _np.int32))
    return out[::-1]


def _filled(values: Any, valid: Any, fill: Any) -> Any:
    if valid is None:
        return values
    fill = lax.full(shape(values), 0 if fill is None else fill, aval_of(values).dtype) if \
        is_python_scalar(fill) or fill is None or isinstance(fill, _np.generic) else \
        broadcast_to(lax.convert_element_type(_as_operand(fill), aval_of(values).dtype), shape(values))
    return lax.select(valid, values, fill)


def nonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> tuple[Any, ...]:
    """The indices of the nonzero elements of a, one int32 array per dimension (like jax.numpy.nonzero). Eagerly
    without size their count is the data's; with size (needed inside jit/vmap/grad) there are exactly size of
    them: the first ones, then fill_value (0 by default, or one per dimension)."""
    op = "nonzero"
    size = _static_size(op, size)
    a = _as_operand(a, op, 0)
    dims = shape(a)
    if not dims:
        raise ValueError("nonzero: calling nonzero on a 0-d array is not allowed (as numpy and JAX); use "
                         "atleast_1d first")
    positions, n, total = _nonzero_flat(op, a, size)
    valid = None if total is None else lax.lt(lax.iota(_np.int32, n), lax.full((n,), total, _np.int32))
    fills = fill_value if isinstance(fill_value, tuple | list) else (fill_value,) * len(dims)
    if len(fills) != len(dims):
        raise ValueError(f"nonzero: fill_value needs one value per dimension ({len(dims)}), got {len(fills)}")
    index_dtype = dt.default_int_dtype()  # int64 with enable_x64, as JAX
    return tuple(lax.convert_element_type(_filled(p, valid, f), index_dtype) if index_dtype != _np.int32 else
                 _filled(p, valid, f) for p, f in zip(_unravel(positions, dims), fills))


def flatnonzero(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The positions of the nonzero elements of ravel(a) (like jax.numpy.flatnonzero); size as in nonzero."""
    return nonzero(ravel(_as_operand(a, "flatnonzero", 0)), size=size, fill_value=fill_value)[0]


def where(condition: Any, x: Any = None, y: Any = None, /, *, size: int | None = None,
          fill_value: Any = None) -> Any:
    """Elementwise x where condition else y; with condition alone, nonzero(condition, size=, fill_value=)."""
    if x is None and y is None:
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise ValueError("where: pass both x and y, or neither (then where(condition) is nonzero(condition))")
    if size is not None or fill_value is not None:
        raise ValueError("where: size and fill_value apply only to the one-argument form")
    if type(x) in PHYSICAL or type(y) in PHYSICAL:  # (typed key arrays: their physical arrays selected, the
        (dx, dy), make = _physical("where", [x, y])  # condition on the keys' dims)
        trailing = len(aval_of(dx).shape) - x.ndim
        cond = _as_operand(condition, "where", 0)
        cond = expand_dims(cond, tuple(range(-trailing, 0))) if trailing else cond
        out_keys = _broadcast_shapes("where", shape(cond)[:len(shape(cond)) - trailing], x.shape, y.shape)
        target = out_keys + aval_of(dx).shape[x.ndim:]
        return make(_where(broadcast_to(cond, target), broadcast_to(dx, target), broadcast_to(dy, target)))
    return _where(condition, x, y)


def argwhere(a: Any, *, size: int | None = None, fill_value: Any = None) -> Any:
    """The indices of the nonzero elements of a as rows of an (n, a.ndim) array (like jax.numpy.argwhere)."""
    a = _as_operand(a, "argwhere", 0)
    if not shape(a):  # one row (a nonzero) or none, of no columns
        _, rows, _ = _nonzero_flat("argwhere", reshape(a, (1,)), _static_size("argwhere", size))
        return lax.full((rows, 0), 0, dt.default_int_dtype())
    return stack(nonzero(a, size=size, fill_value=fill_value), axis=-1)


def compress(condition: Any, a: Any, axis: int | None = None, *, size: int | None = None, fill_value: Any = 0,
             out: None = None) -> Any:
    """The slices of a along axis where condition (1-D) is true (like jax.numpy.compress); size as in nonzero."""
    if out is not None:
        raise NotImplementedError("compress: out= is not supported (ember arrays are immutable)")
    condition = _as_operand(condition, "compress", 0)
    if len(shape(condition)) != 1:
        raise ValueError(f"compress: condition must be 1-D, got {aval_of(condition).str_short()}")
    a, axis = _axis_or_flat("compress", a, axis)
    n = shape(a)[axis]
    if shape(condition)[0] > n:
        condition = lax.slice_in_dim(condition, 0, n)
    size = _static_size("compress", size)
    positions, count, total = _nonzero_flat("compress", condition, size)
    taken = take(a, positions, axis=axis, mode="promise_in_bounds")
    if total is None:
        return taken
    valid = lax.lt(lax.iota(_np.int32, count), lax.full((count,), total, _np.int32))
    valid = lax.broadcast_in_dim(valid, shape(taken), (axis,))
    return _filled(taken, valid, fill_value)


def extract(condition: Any, arr: Any, *, size: int | None = None, fill_value: Any = 0) -> Any:
    """The elements of arr where condition is true, flattened (like jax.numpy.extract)."""
    return compress(ravel(_as_operand(condition, "extract", 0)), ravel(_as_operand(arr, "extract", 1)), size=size,
                    fill_value=fill_value)


def select(condlist: Sequence[Any], choicelist: Sequence[Any], default: Any = 0) -> Any:
    """choicelist[k] where condlist[k] is the first true condition, else default (like jax.numpy.select)."""
    if len(condlist) != len(choicelist):
        raise ValueError(f"select: condlist and choicelist must have the same length, got {len(condlist)} and "
                         f"{len(choicelist)}")
    if not condlist:
        raise ValueError("select: condlist must not be empty")
    out = default
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        cond = _as_operand(cond, "select", 0)
        if not dt.is_bool(aval_of(cond).dtype):
            raise TypeError(f"select: condlist entries must be boolean, got {aval_of(cond).str_short()}")
        out = _where(cond, choice, out)
    return out


# ---------------------------------------------------------------------------------------------------------------
# flips, rolls and triangles
def flip(m: Any, axis: int | Sequence[int] | None = None) -> Any:
    """m reversed along axis (all axes when None), like numpy.flip."""
    m = _as_operand(m, "flip", 0)
    axes = normalize_axes("flip", axis, len(shape(m)))
    return lax.rev(m, axes) if axes else m


def fliplr(m: Any) -> Any:
    if len(shape(_as_operand(m))) < 2:
        raise ValueError("fliplr: the array must be at least 2-D")
    return flip(m, 1)


def flipud(m: Any) -> Any:
    if len(shape(_as_operand(m))) < 1:
        raise ValueError("flipud: the array must be at least 1-D")
    return flip(m, 0)


def roll(a: Any, shift: Any, axis: int | Sequence[int] | None = None) -> Any:
    """a with elements shifted along axis, wrapping around (like numpy.roll); shift may be traced."""
    a = _as_operand(a, "roll", 0)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), shape(a))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    shifts = (shift,) * len(axes) if is_python_scalar(shift) or (
        not isinstance(shift, tuple | list) and not shape(_as_operand(shift))) else tuple(shift)
    if not is_python_scalar(shift) and not isinstance(shift, tuple | list) and shape(_as_operand(shift)):
        shifts = tuple(lax.reshape(lax.slice_in_dim(_as_operand(shift), k, k + 1), ()) for k in range(
            shape(_as_operand(shift))[0]))
    if len(shifts) != len(axes):
        raise ValueError(f"roll: shift and axis must have the same length, got {len(shifts)} and {len(axes)}")
    for s, ax in zip(shifts, axes):
        ax = normalize_axis("roll", ax, len(shape(a)))
        n = shape(a)[ax]
        if n == 0:
            continue
        if is_python_scalar(s) or isinstance(s, _np.integer):
            k = builtins.int(s) % n
            if k:
                a = concatenate([lax.slice_in_dim(a, n - k, n, axis=ax), lax.slice_in_dim(a, 0, n - k, axis=ax)], ax)
        else:  # traced: slice the doubled array at (n - shift mod n)
            start = subtract(n, remainder(_as_operand(s), n))
            doubled = concatenate([a, a], ax)
            start = lax.convert_element_type(remainder(start, n), _np.int32)
            a = lax.dynamic_slice_in_dim(doubled, start, n, ax)
    return a


def rot90(m: Any, k: int = 1, axes: tuple[int, int] = (0, 1)) -> Any:
    """m rotated by 90 degrees k times in the plane of axes (like numpy.rot90)."""
    m = _as_operand(m, "rot90", 0)
    ndim = len(shape(m))
    if len(axes) != 2:
        raise ValueError(f"rot90: axes must be two axes, got {axes}")
    a0, a1 = (normalize_axis("rot90", ax, ndim) for ax in axes)
    if a0 == a1:
        raise ValueError(f"rot90: axes must be different, got {axes}")
    k = static_int("rot90", "k", k) % 4
    if k == 0:
        return m
    if k == 2:
        return flip(m, (a0, a1))
    if k == 1:
        return swapaxes(flip(m, a1), a0, a1)
    return flip(swapaxes(m, a0, a1), a1)


def tri(N: int, M: int | None = None, k: int = 0, dtype: Any = None) -> Any:  # noqa: N803
    """An N x M array with ones at and below the k-th diagonal (like numpy.tri); float by default."""
    n = static_int("tri", "N", N)
    m = n if M is None else static_int("tri", "M", M)
    k = static_int("tri", "k", k)
    dtype = dt.check_user_dtype(dtype, "tri") if dtype is not None else dt.default_float_dtype()
    mask = _lower_mask((n, m), k)
    return lax.convert_element_type(mask, dtype)


def _lower_mask(dims: tuple[int, int], k: int) -> Any:
    rows = lax.broadcasted_iota(_np.int32, dims, 0)
    cols = lax.broadcasted_iota(_np.int32, dims, 1)
    return lax.ge(lax.add(rows, lax.full(dims, k, _np.int32)), cols)


def _triangle(op: str, m: Any, k: int, lower: bool) -> Any:
    m = _as_operand(m, op, 0)
    s = shape(m)
    if len(s) < 2:
        raise ValueError(f"{op}: the array must be at least 2-D, got {aval_of(m).str_short()}")
    k = static_int(op, "k", k)
    mask = _lower_mask(s[-2:], k if lower else k - 1)
    if not lower:
        mask = lax.bitwise_not(mask)
    mask = lax.broadcast_in_dim(mask, s, (len(s) - 2, len(s) - 1))
    return lax.select(mask, m, lax.full(s, 0, aval_of(m).dtype))


def tril(m: Any, k: int = 0) -> Any:
    """m with the elements above the k-th diagonal zeroed (last two dimensions), like numpy.tril."""
    return _triangle("tril", m, k, True)


def triu(m: Any, k: int = 0) -> Any:
    """m with the elements below the k-th diagonal zeroed (last two dimensions), like numpy.triu."""
    return _triangle("triu", m, k, False)


def diff(a: Any, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Any:
    """The n-th discrete difference along axis (like numpy.diff), with optional values prepended/appended."""
    a = _as_operand(a, "diff", 0)
    n = static_int("diff", "n", n)
    if n < 0:
        raise ValueError(f"diff: order n must be non-negative, got {n}")
    if not shape(a):
        raise ValueError("diff: requires an input of at least one dimension")
    axis = normalize_axis("diff", axis, len(shape(a)))
    parts = []
    for extra in (prepend, a, append):
        if extra is None:
            continue
        if extra is not a:
            extra = _as_operand(extra)
            if not shape(extra):
                target = list(shape(a))
                target[axis] = 1
                extra = broadcast_to(extra, tuple(target))
        parts.append(extra)
    if len(parts) > 1:
        parts = _promote("diff", *parts)
        a = concatenate(parts, axis)
    for _ in range(n):
        size = shape(a)[axis]
        if size == 0:
            break
        hi, lo = lax.slice_in_dim(a, 1, size, axis=axis), lax.slice_in_dim(a, 0, size - 1, axis=axis)
        a = not_equal(hi, lo) if dt.is_bool(aval_of(a).dtype) else subtract(hi, lo)
    return a


__all__ = ["argwhere", "compress", "diff", "extract", "flatnonzero", "flip", "fliplr", "flipud", "nonzero",
           "put_along_axis", "roll", "rot90", "select", "take", "take_along_axis", "tri", "tril", "triu", "where"]
