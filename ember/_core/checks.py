"""Checks of static (Python-level) arguments shared by the primitives and ember.numpy: ints, shapes and axes,
each with a clear error naming the function and the argument."""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ember._core.shape_poly import DimExpr
from ember._core.trace import Tracer


def static_int(op: str, name: str, value: Any) -> int:
    """A static int: a Python or numpy int, or a concrete integer array of one element (anything with __index__)."""
    if isinstance(value, Tracer):
        raise TypeError(f"{op}: {name} must be a static Python int, got a traced value {value!r}")
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{op}: {name} must be an int, got {value!r}")
    return operator.index(value)


def static_ints(op: str, name: str, values: Any) -> tuple[int, ...]:
    """A tuple of static ints from an int or a sequence of ints (shapes, axes, permutations, ...)."""
    if isinstance(values, int | np.integer) and not isinstance(values, bool):
        values = (values,)
    try:
        items = list(values)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int or a sequence of ints, got {values!r}") from None
    return tuple(static_int(op, name, v) for v in items)


def static_dims(op: str, name: str, values: Any) -> tuple[Any, ...]:
    """A shape: static ints, or symbolic dimensions (ember.export's shape polymorphism), from an int, a dimension
    or a sequence of them."""
    if isinstance(values, int | np.integer | DimExpr) and not isinstance(values, bool):
        values = (values,)
    try:
        items = list(values)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int or a sequence of ints, got {values!r}") from None
    return tuple(v if isinstance(v, DimExpr) else static_int(op, name, v) for v in items)


def normalize_axis(op: str, axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"{op}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def normalize_axes(op: str, axes: Any, ndim: int) -> tuple[int, ...]:
    """Sorted non-negative axes from None (all axes), an int or a sequence of ints; duplicates are an error."""
    if axes is None:
        return tuple(range(ndim))
    normalized = tuple(sorted(normalize_axis(op, a, ndim) for a in static_ints(op, "axis", axes)))
    if len(set(normalized)) != len(normalized):
        raise ValueError(f"{op}: duplicate value in 'axis': {axes}")
    return normalized
