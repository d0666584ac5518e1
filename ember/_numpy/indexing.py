"""Basic indexing (ints, slices with positive steps, None, Ellipsis, scalar booleans): the __getitem__ of Array
and Tracer."""
from __future__ import annotations

import builtins
import operator
from typing import Any

import numpy as _np

from ember._runtime.array import Array
from ember._core import Tracer
from ember import _prims as lax

from ember._numpy.shape import shape


def _is_bool_scalar(i: Any) -> bool:
    """A scalar boolean index (True, np.True_, a 0-d numpy bool array): numpy's 0-d boolean mask, which adds an
    axis of length 1 (True) or 0 (False) and consumes no axis of the array."""
    return isinstance(i, builtins.bool | _np.bool_) or (isinstance(i, _np.ndarray) and i.ndim == 0
                                                          and i.dtype == _np.bool_)


def _getitem(x: Any, index: Any) -> Any:
    if not isinstance(index, tuple):
        index = (index,)
    if builtins.any(_is_bool_scalar(i) for i in index):
        return _getitem_with_bools(x, index)
    return _basic_getitem(x, index)


def _getitem_with_bools(x: Any, index: tuple[Any, ...]) -> Any:
    """numpy's rule for scalar booleans: each is an advanced index (a 0-d mask), and so are the integers beside
    them. Together they give one axis, of length 1 when every boolean is True, else 0; it stands where the first
    advanced index stood when the advanced indices are consecutive in the index, else in front."""
    advanced = [k for k, i in enumerate(index) if _is_bool_scalar(i) or (
        i is not None and i is not Ellipsis and not isinstance(i, builtins.slice))]
    length = 1 if builtins.all(builtins.bool(i) for i in index if _is_bool_scalar(i)) else 0
    rest = tuple(i for i in index if not _is_bool_scalar(i))
    result = _basic_getitem(x, rest)
    position = 0
    if advanced == list(range(advanced[0], advanced[-1] + 1)):  # consecutive: the axis stays in place
        n_real = builtins.sum(1 for i in rest if i is not None and i is not Ellipsis)
        for i in index[:advanced[0]]:
            position += len(shape(x)) - n_real if i is Ellipsis else 1
    out_shape = shape(result)
    result = lax.reshape(result, out_shape[:position] + (1,) + out_shape[position:])
    if length == 0:
        result = lax.slice_in_dim(result, 0, 0, axis=position)
    return result


def _basic_getitem(x: Any, index: tuple[Any, ...]) -> Any:
    s = shape(x)
    n_real = builtins.sum(1 for i in index if i is not None and i is not Ellipsis)
    if builtins.sum(1 for i in index if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_real > len(s):
        raise IndexError(f"too many indices for array of shape {s}: {len(index)} given")
    expanded: list[Any] = []
    for i in index:
        if i is Ellipsis:
            expanded.extend([builtins.slice(None)] * (len(s) - n_real))
        else:
            expanded.append(i)
    expanded.extend([builtins.slice(None)] * (len(s) - builtins.sum(1 for i in expanded if i is not None)))
    starts, limits, strides, out_shape, dim = [], [], [], [], 0
    for i in expanded:
        if i is None:
            out_shape.append(1)
            continue
        size_d = s[dim]
        if isinstance(i, builtins.slice):
            start, stop, step = i.indices(size_d)
            if step < 0:
                raise NotImplementedError("indexing with a negative slice step is not supported yet")
            stop = builtins.max(stop, start)
            starts.append(start)
            limits.append(stop)
            strides.append(step)
            out_shape.append(len(range(start, stop, step)))
        else:
            if isinstance(i, Tracer) or (type(i) is Array and i.ndim > 0) or isinstance(i, list | _np.ndarray):
                raise NotImplementedError(
                    "indexing with arrays (gather) is not supported yet; use static ints and slices")
            try:
                k = operator.index(i)
            except TypeError:
                raise TypeError(f"invalid index {i!r} of type {type(i).__name__}") from None
            if not -size_d <= k < size_d:
                raise IndexError(f"index {k} is out of bounds for axis {dim} with size {size_d}")
            k %= size_d
            starts.append(k)
            limits.append(k + 1)
            strides.append(1)
        dim += 1
    sliced = lax.slice(x, starts, limits, strides)
    if tuple(out_shape) != shape(sliced):
        sliced = lax.reshape(sliced, tuple(out_shape))
    return sliced
