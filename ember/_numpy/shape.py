"""Shapes of ember.numpy: shape queries, astype, reshape, transpose, broadcast_to, concatenate, stack, diagonal,
split (array_split, hsplit, vsplit, dsplit)."""
from __future__ import annotations

import builtins
import math
from typing import Any, Sequence

import numpy as _np

from ember._core import dtypes as dt
from ember._runtime.array import asarray, device_put
from ember._core import Tracer, aval_of, is_python_scalar
from ember import _prims as lax
from ember._core.checks import normalize_axis, static_dims, static_int, static_ints
from ember._core.shape_poly import is_symbolic_dim
from ember._runtime.eager import fast_static
from ember._core.pytree import PHYSICAL

from ember._numpy.promotion import (_as_operand, _broadcast_shapes, _broadcast_to_shape, _operand_array,
                                    _promote)


def shape(x: Any) -> tuple[int, ...]:
    if type(x) in PHYSICAL:  # (a typed key array: its keys' shape, as JAX's)
        return x.shape
    return aval_of(_as_operand(x)).shape


def ndim(x: Any) -> int:
    return len(shape(x))


def size(x: Any, axis: int | Sequence[int] | None = None) -> int:
    """The number of elements of x, or the product of its sizes along axis (an int or a sequence of them)."""
    dims = shape(x)
    if axis is None:
        return math.prod(dims)  # (exact; a product of symbolic dimensions is one too: ember.export)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return math.prod(dims[normalize_axis("size", a, len(dims))] for a in axes)


@fast_static
def astype(x: Any, dtype: Any, /, *, copy: bool = False, device: Any = None) -> Any:
    """x converted to dtype (the array API's astype: copy is accepted; ember arrays are immutable, so a copy is
    never observable; device= places the result)."""
    if type(x) in PHYSICAL:  # (a typed key array: to its own dtype only, as JAX's)
        if dtype == x.dtype and device is None:
            return x
        try:
            name = _np.dtype(dtype).name
        except TypeError:
            name = dtype
        raise ValueError(f"Cannot convert_element_type from {x.dtype} to {name}")
    x = _as_operand(x)
    dtype = dt.check_user_dtype(dtype, "astype")
    if is_python_scalar(x):
        out = asarray(x, dtype)
    else:
        out = lax.convert_element_type(x, dtype, False) if aval_of(x).dtype != dtype or aval_of(x).weak_type else x
    if device is not None:
        out = device_put(out, device)
    return out


@fast_static
def reshape(a: Any, shape: Any = None, order: str = "C", *, newshape: Any = None, copy: bool | None = None,
            out_sharding: Any = None) -> Any:
    """a with a new shape (one dimension may be -1), as jax.numpy's and the array API's reshape; newshape= is
    numpy 1's name for shape (JAX removed it; ember still takes it); copy=False is allowed (reshapes never copy
    observably: ember arrays are immutable)."""
    if newshape is not None:
        if shape is not None:
            raise TypeError("reshape: pass the new shape once, as shape or newshape=")
        shape = newshape
    if shape is None:
        raise TypeError("reshape: the new shape is missing")
    if out_sharding is not None:  # (JAX's explicit sharding mode: how the result is split)
        if order != "C":
            raise NotImplementedError("reshape: out_sharding= with order='F'")
        a = _as_operand(a)
        sizes = list(static_dims("reshape", "shape", shape))
        if -1 in sizes:
            known = math.prod(d for d in sizes if is_symbolic_dim(d) or d != -1)
            sizes[sizes.index(-1)] = size(a) // max(known, 1)
        return lax.reshape(a, tuple(sizes), out_sharding)
    return _reshape(a, shape, order)


def _reshape(a: Any, newshape: Any, order: str) -> Any:
    """a reshaped, its elements read and written in C (last index fastest) or F (first index fastest) order."""
    if order == "A":
        raise NotImplementedError("reshape: order='A' is not supported (as JAX); use 'C' or 'F'")
    if order not in ("C", "F"):
        raise ValueError(f"reshape: order must be 'C' or 'F', got {order!r}")
    a = _as_operand(a)
    new = list(static_dims("reshape", "shape", newshape))
    total = size(a)
    if new.count(-1) > 1:
        raise ValueError(f"reshape: can only specify one unknown dimension, got {tuple(new)}")
    if -1 in new:
        known = math.prod(d for d in new if is_symbolic_dim(d) or d != -1)
        if known == 0 or total % known:  # (symbolic: a remainder that may be nonzero is inconclusive)
            raise ValueError(f"reshape: cannot reshape array of shape {shape(a)} into shape {tuple(new)}")
        new[new.index(-1)] = total // known
    if math.prod(new) != total:
        raise ValueError(f"reshape: cannot reshape array of shape {shape(a)} ({total} elements) into shape "
                         f"{tuple(new)}")
    if order == "C":
        return lax.reshape(a, tuple(new))
    # F order is C order on the axes reversed
    flipped = lax.reshape(lax.transpose(a, tuple(reversed(range(ndim(a))))), tuple(reversed(new)))
    return lax.transpose(flipped, tuple(reversed(range(len(new)))))


@fast_static
def ravel(a: Any, order: str = "C") -> Any:
    return reshape(a, (-1,), order)


@fast_static
def transpose(a: Any, axes: Sequence[int] | None = None) -> Any:
    a = _as_operand(a)
    n = ndim(a)
    perm = tuple(reversed(range(n))) if axes is None else tuple(normalize_axis("transpose", int(i), n)
                                                                   for i in axes)
    return lax.transpose(a, perm)


@fast_static
def swapaxes(a: Any, axis1: int, axis2: int) -> Any:
    n = ndim(a)
    perm = list(range(n))
    i, j = normalize_axis("swapaxes", axis1, n), normalize_axis("swapaxes", axis2, n)
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(_as_operand(a), perm)


@fast_static
def moveaxis(a: Any, source: int | Sequence[int], destination: int | Sequence[int]) -> Any:
    """a with the axes source moved to the positions destination (ints or sequences of one length)."""
    n = ndim(a)
    sources = [source] if isinstance(source, int) else list(source)
    destinations = [destination] if isinstance(destination, int) else list(destination)
    if len(sources) != len(destinations):
        raise ValueError(f"moveaxis: source {source!r} and destination {destination!r} must have the same number of "
                         "elements")
    src = [normalize_axis("moveaxis", s, n) for s in sources]
    dst = [normalize_axis("moveaxis", d, n) for d in destinations]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"moveaxis: repeated axis in source {source!r} or destination {destination!r}")
    rest = [i for i in range(n) if i not in src]
    placed = dict(zip(dst, src))
    others = iter(rest)
    perm = [placed[i] if i in placed else next(others) for i in range(n)]
    return lax.transpose(_as_operand(a), perm)


# ---- typed key arrays (and any array type over a physical array: ember._core.pytree.PHYSICAL) -------------------
def _physical(name: str, arrays: Sequence[Any]) -> tuple[list[Any], Any] | None:
    """When arrays are typed key arrays: (their physical arrays, the function making one from a physical array);
    None when none is (the common case: one type look-up per array). A key array with another kind of array is an
    error (JAX: a ValueError of promotion)."""
    if not builtins.any(type(a) in PHYSICAL for a in arrays):
        return None
    kinds = {type(a) for a in arrays if type(a) in PHYSICAL}
    if len(kinds) > 1 or builtins.any(type(a) not in PHYSICAL for a in arrays):
        raise TypeError(f"{name}: cannot combine typed key arrays with other arrays, got "
                        f"{', '.join(sorted({type(a).__name__ for a in arrays}))}")
    if builtins.any(a.dtype != arrays[0].dtype for a in arrays):
        raise TypeError(f"{name}: cannot combine key arrays of different implementations, got "
                        f"{', '.join(str(a.dtype) for a in arrays)}")
    to_physical, from_physical = PHYSICAL[kinds.pop()]
    return [to_physical(a) for a in arrays], lambda data: from_physical(data, arrays[0])


def _keys_expand_dims(a: Any, axis: int | Sequence[int], physical: tuple[list[Any], Any]) -> Any:
    (data,), make = physical
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out_ndim = a.ndim + len(axes)
    return make(expand_dims(data, tuple(normalize_axis("expand_dims", ax, out_ndim) for ax in axes)))


def _keys_squeeze(a: Any, axis: Any, physical: tuple[list[Any], Any]) -> Any:
    (data,), make = physical
    if axis is None:
        axes = tuple(i for i, d in enumerate(a.shape) if d == 1)
    else:
        axes = tuple(normalize_axis("squeeze", ax, a.ndim) for ax in ((axis,) if isinstance(axis, int) else axis))
    return make(squeeze(data, axes))


@fast_static
def expand_dims(a: Any, axis: int | Sequence[int]) -> Any:
    if type(a) in PHYSICAL:
        return _keys_expand_dims(a, axis, _physical("expand_dims", [a]))
    a = _as_operand(a)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out_ndim = ndim(a) + len(axes)
    axes = sorted(normalize_axis("expand_dims", ax, out_ndim) for ax in axes)
    new_shape = list(shape(a))
    for ax in axes:
        new_shape.insert(ax, 1)
    return lax.reshape(a, tuple(new_shape))


@fast_static
def squeeze(a: Any, axis: int | Sequence[int] | None = None) -> Any:
    if type(a) in PHYSICAL:
        return _keys_squeeze(a, axis, _physical("squeeze", [a]))
    a = _as_operand(a)
    s = shape(a)
    if axis is None:
        axes = [i for i, d in enumerate(s) if d == 1]
    else:
        axes = [normalize_axis("squeeze", ax, len(s)) for ax in ((axis,) if isinstance(axis, int) else axis)]
        for ax in axes:
            if s[ax] != 1:
                raise ValueError(f"squeeze: cannot select an axis to squeeze out which has size not equal to one "
                                 f"(axis {ax} of shape {s})")
    return lax.squeeze(a, axes) if axes else lax.reshape(a, s)


@fast_static
def broadcast_to(a: Any, shape: Any) -> Any:
    if type(a) in PHYSICAL:
        (data,), make = _physical("broadcast_to", [a])
        target = static_dims("broadcast_to", "shape", shape)
        return make(broadcast_to(data, target + aval_of(data).shape[a.ndim:]))
    a = _as_operand(a)
    target = static_dims("broadcast_to", "shape", shape)
    if is_python_scalar(a):
        a = _promote("broadcast_to", a)[0]
    got = aval_of(a).shape
    if len(got) > len(target) or _broadcast_shapes("broadcast_to", got, target) != target:
        raise ValueError(f"broadcast_to: cannot broadcast an array of shape {got} to shape {target}")
    return _broadcast_to_shape(a, target)


def concatenate(arrays: Sequence[Any], axis: int | None = 0) -> Any:
    """arrays joined along axis (flattened first when axis is None, as numpy)."""
    physical = _physical("concatenate", list(arrays))
    if physical is not None:  # (typed key arrays: their physical arrays joined)
        datas, make = physical
        if axis is None:
            datas = [reshape(d, (-1,) + aval_of(d).shape[k.ndim:]) for d, k in zip(datas, arrays)]
            return make(concatenate(datas, 0))
        if builtins.any(k.ndim == 0 for k in arrays):
            raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
        return make(concatenate(datas, normalize_axis("concatenate", static_int("concatenate", "axis", axis),
                                                      arrays[0].ndim)))
    arrays = _promote("concatenate", *arrays)
    if axis is None:
        arrays = [ravel(a) for a in arrays]
    if builtins.any(aval_of(a).shape == () for a in arrays):
        raise ValueError("concatenate: zero-dimensional arrays cannot be concatenated")
    axis = static_int("concatenate", "axis", 0 if axis is None else axis)
    return lax.concatenate(arrays, normalize_axis("concatenate", axis, ndim(arrays[0])))


def stack(arrays: Sequence[Any], axis: int = 0) -> Any:
    physical = _physical("stack", list(arrays))
    if physical is not None:  # (typed key arrays: their physical arrays stacked)
        datas, make = physical
        if len({k.shape for k in arrays}) != 1:
            raise ValueError(f"stack: all input arrays must have the same shape, got "
                             f"{sorted({k.shape for k in arrays})}")
        return make(stack(datas, normalize_axis("stack", static_int("stack", "axis", axis), arrays[0].ndim + 1)))
    arrays = [_as_operand(a) for a in arrays]
    if not arrays:
        raise ValueError("stack: need at least one array to stack")
    shapes = {shape(a) for a in arrays}
    if len(shapes) != 1:
        raise ValueError(f"stack: all input arrays must have the same shape, got {sorted(shapes)}")
    axis = normalize_axis("stack", static_int("stack", "axis", axis), ndim(arrays[0]) + 1)
    return lax.stack(_promote("stack", *[asarray(a) if is_python_scalar(a) else a for a in arrays]), axis)


def diagonal(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """The diagonal (offset above/below the main one) over axis1 and axis2, as a last axis."""
    a = _operand_array("diagonal", a)
    nd = ndim(a)
    if nd < 2:
        raise ValueError(f"diagonal: a must have at least 2 dimensions, got shape {shape(a)}")
    axis1 = normalize_axis("diagonal", axis1, nd)
    axis2 = normalize_axis("diagonal", axis2, nd)
    if axis1 == axis2:
        raise ValueError("diagonal: axis1 and axis2 cannot be the same")
    offset = static_int("diagonal", "offset", offset)
    x = transpose(a, [i for i in range(nd) if i not in (axis1, axis2)] + [axis1, axis2])
    n, m = shape(x)[-2:]
    rows, cols = (builtins.min(-offset, n), 0) if offset < 0 else (0, builtins.min(offset, m))
    k = builtins.min(n - rows, m - cols)
    # the leading k x k block from (rows, cols), flattened: its diagonal is every (k + 1)-th element
    x = lax.slice_in_dim(lax.slice_in_dim(x, rows, rows + k, axis=nd - 2), cols, cols + k, axis=nd - 1)
    flat = reshape(x, shape(x)[:-2] + (k * k,))
    return lax.slice_in_dim(flat, 0, k * k, stride=k + 1, axis=nd - 2) if k else flat


def hstack(arrays: Sequence[Any]) -> Any:
    arrays = [atleast_1d(a) for a in arrays]
    return concatenate(arrays, 0 if ndim(arrays[0]) == 1 else 1)


def vstack(arrays: Sequence[Any]) -> Any:
    return concatenate([atleast_2d(a) for a in arrays], 0)


def atleast_1d(a: Any) -> Any:
    a = _as_operand(a)
    return reshape(a, (1,)) if ndim(a) == 0 else a


def atleast_2d(a: Any) -> Any:
    a = atleast_1d(a)
    return reshape(a, (1,) + shape(a)) if ndim(a) == 1 else a


def _split_bounds(op: str, n: int, indices_or_sections: Any, equal: bool) -> list[tuple[int, int]]:
    """(start, stop) of each piece of an axis of length n, as numpy: a number of sections (equal ones for split;
    array_split gives the first n % sections pieces one more element), or split points, each piece being the
    Python slice [previous point:point] (negative points count from the end, points past the end are clipped,
    a point before the previous one gives an empty piece)."""
    if isinstance(indices_or_sections, Tracer):
        raise TypeError(f"{op}: indices_or_sections must be static (Python ints or a sequence of them), got a "
                        f"traced value {indices_or_sections!r}")
    if _np.ndim(indices_or_sections) == 0:
        sections = static_int(op, "indices_or_sections", indices_or_sections)
        if sections <= 0:
            raise ValueError(f"{op}: the number of sections must be larger than 0, got {sections}")
        if equal and n % sections:
            raise ValueError(f"{op}: array split does not result in an equal division (an axis of length {n} "
                             f"into {sections} sections); use array_split for unequal pieces")
        each, extra = divmod(n, sections)
        sizes = [each + 1] * extra + [each] * (sections - extra)
        starts = [builtins.sum(sizes[:k]) for k in range(sections)]
        return [(lo, lo + size) for lo, size in zip(starts, sizes)]
    points = static_ints(op, "indices_or_sections", indices_or_sections)
    bounds = []
    for lo, hi in zip((0,) + points, points + (n,)):
        lo, hi, _ = builtins.slice(lo, hi).indices(n)
        bounds.append((lo, builtins.max(lo, hi)))
    return bounds


def _split_along(op: str, a: Any, indices_or_sections: Any, axis: int, equal: bool) -> list[Any]:
    a = _as_operand(a)
    if is_python_scalar(a) or isinstance(a, _np.generic):
        a = asarray(a)
    axis = normalize_axis(op, axis, ndim(a))
    bounds = _split_bounds(op, shape(a)[axis], indices_or_sections, equal)
    return [lax.slice_in_dim(a, lo, hi, axis=axis) for lo, hi in bounds]


def split(a: Any, indices_or_sections: Any, axis: int = 0) -> list[Any]:
    """Split into equal sections, or at split points (numpy's rules, see _split_bounds)."""
    return _split_along("split", a, indices_or_sections, axis, equal=True)


def array_split(a: Any, indices_or_sections: Any, axis: int = 0) -> list[Any]:
    """As split, but a number of sections need not divide the axis (the first pieces are one longer)."""
    return _split_along("array_split", a, indices_or_sections, axis, equal=False)


def _split_min_ndim(op: str, a: Any, least: int) -> Any:
    a = _as_operand(a)
    if ndim(a) < least:
        raise ValueError(f"{op} only works on arrays of {least} or more dimensions, got an array of shape {shape(a)}")
    return a


def hsplit(a: Any, indices_or_sections: Any) -> list[Any]:
    """split along axis 1 (axis 0 for 1-d arrays)."""
    a = _split_min_ndim("hsplit", a, 1)
    return _split_along("hsplit", a, indices_or_sections, 1 if ndim(a) > 1 else 0, equal=True)


def vsplit(a: Any, indices_or_sections: Any) -> list[Any]:
    """split along axis 0 of an array of 2 or more dimensions."""
    return _split_along("vsplit", _split_min_ndim("vsplit", a, 2), indices_or_sections, 0, equal=True)


def dsplit(a: Any, indices_or_sections: Any) -> list[Any]:
    """split along axis 2 of an array of 3 or more dimensions."""
    return _split_along("dsplit", _split_min_ndim("dsplit", a, 3), indices_or_sections, 2, equal=True)


__all__ = ["array_split", "astype", "atleast_1d", "atleast_2d", "broadcast_to", "concatenate", "dsplit", "expand_dims",
           "hsplit", "hstack", "moveaxis", "ndim", "ravel", "reshape", "shape", "size", "split", "squeeze", "stack",
           "swapaxes", "transpose", "vsplit", "vstack", "diagonal"]
