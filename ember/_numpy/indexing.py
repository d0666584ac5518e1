"""Basic indexing (ints, slices with positive steps, None, Ellipsis): the __getitem__ of Array and Tracer."""
from __future__ import annotations

import builtins
import operator
from typing import Any

import numpy as _np

from ember._runtime.array import Array
from ember._core import Tracer
from ember import _prims as lax

from ember._numpy.shape import shape


def _getitem(x: Any, index: Any) -> Any:
    if not isinstance(index, tuple):
        index = (index,)
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
            if isinstance(i, Tracer) or (isinstance(i, Array) and i.ndim > 0) or isinstance(i, list | _np.ndarray):
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
