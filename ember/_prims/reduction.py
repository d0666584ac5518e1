"""reduce_max and reduce_min, made by the reduction family (shape.py), with one derivative description: the
weights that send the derivative to the positions holding the extreme value, split evenly among ties (as JAX)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember._core import Primitive, aval_of
from ember._core import dtypes as dt
from ember._prims.elementwise import div, eq, mul
from ember._prims.shape import broadcast_in_dim, convert_element_type, kept_dims, reduce_axes, reduce_sum, reduction


def _extreme_weights(x: Any, out: Any, axes: tuple[int, ...]) -> Any:
    """1/count at the positions of x holding the reduced value (count: how many hold it), 0 elsewhere."""
    shape, dtype = aval_of(x).shape, aval_of(x).dtype
    kept = kept_dims(len(shape), axes)
    # count in float32 at least: a float16 count is inexact above 2048, a bfloat16 one above 256
    counting = np.dtype(np.float32) if dtype.itemsize < 4 else dtype
    mask = convert_element_type(eq(x, broadcast_in_dim(out, shape, kept)), counting)
    counts = broadcast_in_dim(reduce_sum(mask, axes), shape, kept)
    return convert_element_type(div(mask, counts), dtype)


def _extreme_derivative(prim: Primitive) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """JVP: the tangent's weighted sum; VJP: the cotangent broadcast back, weighted (see _extreme_weights)."""
    def jvp(primals: Sequence[Any], tangents: Sequence[Any], *, axes: tuple[int, ...]) -> tuple[list[Any], list[Any]]:
        x, t = primals[0], tangents[0]
        out = prim.bind(x, axes=axes)
        if t is None:
            return [out], [None]
        return [out], [reduce_sum(mul(t, _extreme_weights(x, out, axes)), axes)]

    def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, axes: tuple[int, ...]
            ) -> list[Any]:
        shape = aval_of(ins[0]).shape
        return [mul(broadcast_in_dim(cts[0], shape, kept_dims(len(shape), axes)),
                    _extreme_weights(ins[0], outs[0], axes))]
    return jvp, vjp


def _lowest(dtype: np.dtype) -> Any:
    if dt.is_bool(dtype):
        return False
    return -np.inf if dt.is_float(dtype) else np.iinfo(dtype).min


def _highest(dtype: np.dtype) -> Any:
    if dt.is_bool(dtype):
        return True
    return np.inf if dt.is_float(dtype) else np.iinfo(dtype).max


reduce_max_p = reduction("reduce_max", "fiub", _lowest, lambda dtype: "or" if dt.is_bool(dtype) else "maximum",
                         _extreme_derivative)
reduce_min_p = reduction("reduce_min", "fiub", _highest, lambda dtype: "and" if dt.is_bool(dtype) else "minimum",
                         _extreme_derivative)


def reduce_max(x: Any, axes: Sequence[int] | None = None) -> Any:
    return reduce_max_p.bind(x, axes=reduce_axes("reduce_max", x, axes))


def reduce_min(x: Any, axes: Sequence[int] | None = None) -> Any:
    return reduce_min_p.bind(x, axes=reduce_axes("reduce_min", x, axes))
