"""ember.ops: segment reductions (like jax.ops), the sums, extremes and products of the rows of data grouped by
segment id: the building block of graph networks, sparse models and ragged batches."""
from __future__ import annotations

from typing import Any, Callable

import numpy as _np

from ember import _prims as lax
from ember._core import Tracer, aval_of
from ember._core import dtypes as dt
from ember._core.checks import static_int
from ember._numpy.promotion import _as_operand
from ember._prims.indexing import ScatterDimensionNumbers

__all__ = ["segment_sum", "segment_prod", "segment_max", "segment_min"]


def _segment(op: str, scatter: Callable[..., Any], identity: Callable[[_np.dtype], Any], data: Any,
             segment_ids: Any, num_segments: int | None, indices_are_sorted: bool, unique_indices: bool,
             mode: Any) -> Any:
    data, ids = _as_operand(data, op, 0), _as_operand(segment_ids, op, 1)
    d_aval, i_aval = aval_of(data), aval_of(ids)
    if not dt.is_int(i_aval.dtype):
        raise TypeError(f"{op}: segment_ids must be integers, got {i_aval.str_short()}")
    if i_aval.ndim != 1 or d_aval.ndim < 1 or i_aval.shape[0] != d_aval.shape[0]:
        raise ValueError(f"{op}: segment_ids {i_aval.str_short()} must be 1-D with one id per row of data "
                         f"{d_aval.str_short()}")
    if num_segments is None:
        if isinstance(ids, Tracer):
            raise ValueError(f"{op}: num_segments is needed inside jit/vmap/grad (the number of segments would "
                             "depend on the values of segment_ids)")
        values = _np.asarray(ids)
        num_segments = int(values.max()) + 1 if values.size else 0
    num_segments = static_int(op, "num_segments", num_segments)
    init = lax.full((num_segments,) + d_aval.shape[1:], identity(d_aval.dtype), d_aval.dtype)
    dnums = ScatterDimensionNumbers(tuple(range(1, d_aval.ndim)), (0,), (0,))
    return scatter(init, lax.reshape(ids, (i_aval.shape[0], 1)), data, dnums, indices_are_sorted=indices_are_sorted,
                   unique_indices=unique_indices, mode=mode)


_lowest, _highest = dt.lowest, dt.highest


def _make(name: str, scatter: Callable[..., Any], identity: Callable[[_np.dtype], Any], what: str) -> Any:
    def fn(data: Any, segment_ids: Any, num_segments: int | None = None, indices_are_sorted: bool = False,
           unique_indices: bool = False, bucket_size: int | None = None, mode: Any = None) -> Any:
        return _segment(name, scatter, identity, data, segment_ids, num_segments, indices_are_sorted,
                        unique_indices, mode)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"The {what} of the rows of data per segment id, shape (num_segments,) + data.shape[1:] (like "
                  f"jax.ops.{name}). Ids outside [0, num_segments) are dropped (mode=\"clip\" clamps them); "
                  "num_segments is needed under jit (eagerly it defaults to max(segment_ids) + 1). bucket_size is "
                  "accepted for JAX compatibility and ignored.")
    return fn


segment_sum = _make("segment_sum", lax.scatter_add, lambda dtype: 0, "sum (0 for an empty segment)")
segment_prod = _make("segment_prod", lax.scatter_mul, lambda dtype: 1, "product (1 for an empty segment)")
segment_max = _make("segment_max", lax.scatter_max, _lowest, "maximum (-inf, or the lowest integer, when empty)")
segment_min = _make("segment_min", lax.scatter_min, _highest, "minimum (+inf, or the highest integer, when empty)")
