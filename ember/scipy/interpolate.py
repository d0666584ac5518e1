"""ember.scipy.interpolate: jax.scipy.interpolate's RegularGridInterpolator (linear and nearest-neighbour
interpolation on a rectilinear grid), a pytree usable under jit, vmap and grad."""
from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np

from ember import numpy as enp
from ember._api.jit import jit
from ember._core.pytree import register_pytree_node
from ember.scipy._util import check_arraylike, promote_inexact

_METHODS = ("linear", "nearest")


def _points_array(xi: Any, ndim: int) -> Any:
    """The query points as one (..., ndim) array: a tuple of coordinate arrays is broadcast and stacked, a 1-D
    array is read as rows of ndim coordinates."""
    if isinstance(xi, tuple) and len(xi) == 1:
        xi = xi[0]
    if isinstance(xi, tuple):
        check_arraylike("RegularGridInterpolator", *xi)
        coords = enp.broadcast_arrays(*xi)
        return enp.stack([enp.asarray(c, dtype=float) for c in coords], axis=-1)
    check_arraylike("RegularGridInterpolator", xi)
    xi = enp.asarray(xi)
    return xi.reshape(-1, ndim) if xi.ndim == 1 else xi


class RegularGridInterpolator:
    """Interpolate values given on a regular (rectilinear) grid at arbitrary points, as
    jax.scipy.interpolate.RegularGridInterpolator (scipy.interpolate.RegularGridInterpolator's linear and nearest
    methods).

    points: a sequence of N strictly increasing 1-D arrays, the grid's coordinates along each axis; values: an
    array whose first N axes are the grid's (trailing axes are interpolated alike); method: "linear" or
    "nearest"; fill_value: the value at points outside the grid (NaN by default), or None to extrapolate.
    bounds_error=True is a NotImplementedError, as in JAX (an error that depends on the values cannot be raised
    under jit). Calling the interpolator with points xi of shape (..., N) (or a tuple of N broadcastable coordinate
    arrays) returns an array of shape xi.shape[:-1] + values.shape[N:]. It is a pytree (leaves: the grid, the
    values, fill_value), so it can be passed through jit and vmap and differentiated in its values and points.
    """

    def __init__(self, points: Any, values: Any, method: str = "linear", bounds_error: bool = False,
                 fill_value: Any = np.nan):
        if method not in _METHODS:
            raise ValueError(f"method {method!r} is not defined (RegularGridInterpolator: 'linear' or 'nearest')")
        self.method = method
        self.bounds_error = bounds_error
        if bounds_error:
            raise NotImplementedError("`bounds_error` takes no effect under JIT (RegularGridInterpolator: give "
                                      "bounds_error=False and a fill_value, or fill_value=None to extrapolate)")
        check_arraylike("RegularGridInterpolator", values)
        values = enp.asarray(values)
        if len(points) > values.ndim:
            raise ValueError(f"there are {len(points)} point arrays, but values has {values.ndim} dimensions")
        (values,) = promote_inexact(values)
        if fill_value is not None:
            check_arraylike("RegularGridInterpolator", fill_value)
            fill_value = enp.asarray(fill_value)
            if not enp.can_cast(fill_value.dtype, values.dtype, casting="same_kind"):
                raise ValueError(f"fill_value must be either 'None' or of a type compatible with values "
                                 f"(RegularGridInterpolator: fill_value of dtype {fill_value.dtype}, values of "
                                 f"dtype {values.dtype})")
        self.fill_value = fill_value
        check_arraylike("RegularGridInterpolator", *points)
        self.grid = tuple(enp.asarray(p) for p in points)
        for i, g in enumerate(self.grid):
            if g.ndim != 1 or g.shape[0] != values.shape[i]:
                raise ValueError(f"RegularGridInterpolator: points[{i}] must be 1-D with values.shape[{i}] = "
                                 f"{values.shape[i]} entries, got shape {g.shape}")
        self.values = values

    def __call__(self, xi: Any, method: str | None = None) -> Any:
        """The interpolated values at xi (shape (..., N), or a tuple of N coordinate arrays); method overrides the
        interpolator's."""
        method = self.method if method is None else method
        if method not in _METHODS:
            raise ValueError(f"method {method!r} is not defined (RegularGridInterpolator: 'linear' or 'nearest')")
        ndim = len(self.grid)
        xi = _points_array(xi, ndim)
        if xi.shape[-1] != ndim:
            raise ValueError(f"the requested sample points xi have dimension {xi.shape[-1]}, but this "
                             f"RegularGridInterpolator has dimension {ndim}")
        lead = xi.shape[:-1]
        result = _interpolate(self.grid, self.values, self.fill_value, xi.reshape(-1, ndim), method)
        return result.reshape(lead + self.values.shape[ndim:])


@functools.partial(jit, static_argnums=(4,))
def _interpolate(grid: tuple[Any, ...], values: Any, fill_value: Any, flat: Any, method: str) -> Any:
    """The interpolated values at the points flat (M, N): (M,) + values.shape[N:]."""
    ndim = len(grid)
    cells, fractions, outside = [], [], enp.zeros(flat.shape[:1], dtype=bool)
    for axis, g in enumerate(grid):
        x = flat[:, axis]
        # the cell [g[i], g[i + 1]] holding x (the first or last cell for points beyond the grid)
        i = enp.clip(enp.searchsorted(g, x) - 1, 0, g.shape[0] - 2)
        cells.append(i)
        fractions.append((x - g[i]) / (g[i + 1] - g[i]))
        outside = outside | (x < g[0]) | (x > g[-1])
    trailing = (slice(None),) + (None,) * (values.ndim - ndim)
    if method == "linear":
        result: Any = enp.asarray(0.0)
        for corner in itertools.product((0, 1), repeat=ndim):
            weight: Any = enp.asarray(1.0)
            for side, t in zip(corner, fractions):
                weight = weight * (t if side else 1 - t)
            index = tuple(i + side for i, side in zip(cells, corner))
            result = result + values[index] * weight[trailing]
    else:
        result = values[tuple(enp.where(t <= 0.5, i, i + 1) for i, t in zip(cells, fractions))]
    if fill_value is not None:
        mask = outside.reshape(outside.shape + (1,) * (result.ndim - 1))
        result = enp.where(mask, fill_value, result)
    return result


def _unflatten(aux: tuple[str, bool], children: tuple[Any, Any, Any]) -> RegularGridInterpolator:
    # (rebuilt without __init__'s checks: under transformations the leaves may be tracers or placeholders)
    obj = object.__new__(RegularGridInterpolator)
    obj.grid, obj.values, obj.fill_value = children
    obj.method, obj.bounds_error = aux
    return obj


register_pytree_node(RegularGridInterpolator,
                     lambda obj: ((obj.grid, obj.values, obj.fill_value), (obj.method, obj.bounds_error)),
                     _unflatten)

__all__ = ["RegularGridInterpolator"]
