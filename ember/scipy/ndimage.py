"""ember.scipy.ndimage: jax.scipy.ndimage's map_coordinates, interpolation of an array at arbitrary coordinates
with JAX's orders (0: nearest, 1: linear) and modes ('constant', 'nearest', 'wrap', 'mirror', 'reflect').

As in JAX, 'constant' behaves as SciPy's 'grid-constant' (a sample outside the array is cval, and a linear
interpolation between a border sample and an outside one mixes in cval) and 'wrap' as SciPy's 'grid-wrap' (period
= the array's length); 'nearest', 'mirror' and 'reflect' are SciPy's. Order 0 rounds halves away from zero.
Integer inputs are interpolated in the default float dtype and rounded back to their dtype. Differentiable in the
input (and, for order 1, in the coordinates)."""
from __future__ import annotations

import itertools
from functools import partial
from typing import Any, Callable, Sequence

import numpy as np

from ember import numpy as enp
from ember._api.jit import jit
from ember._core import dtypes as dt


def _mirror(index: Any, size: int) -> Any:
    """Reflection about the edge samples: ... 2 1 | 0 1 2 ... n-1 | n-2 n-3 ... (period 2(n - 1))."""
    if size == 1:
        return enp.zeros_like(index)
    period = 2 * (size - 1)
    folded = enp.remainder(index, period)
    return enp.where(folded >= size, period - folded, folded)


def _reflect(index: Any, size: int) -> Any:
    """Reflection about the edges: ... 1 0 | 0 1 ... n-1 | n-1 n-2 ... (period 2n)."""
    period = 2 * size
    folded = enp.remainder(index, period)
    return enp.where(folded >= size, period - 1 - folded, folded)


_MODES: dict[str, Callable[[Any, int], Any]] = {
    "constant": lambda index, size: enp.clip(index, 0, size - 1),
    "nearest": lambda index, size: enp.clip(index, 0, size - 1),
    "wrap": lambda index, size: enp.remainder(index, size),
    "mirror": _mirror,
    "reflect": _reflect,
}


def _round_half_away(x: Any) -> Any:
    return enp.sign(x) * enp.floor(enp.abs(x) + 0.5)


def map_coordinates(input: Any, coordinates: Sequence[Any], order: int, mode: str = "constant",  # noqa: A002
                    cval: Any = 0.0) -> Any:
    """input interpolated at the points coordinates (a sequence of input.ndim arrays of one shape, the result's):
    order 0 takes the nearest sample, order 1 interpolates linearly between the 2^ndim neighbours; samples
    outside input follow mode (see the module docstring), cval filling them with 'constant'."""
    try:
        array = enp.asarray(input)
    except Exception as err:
        raise TypeError(f"map_coordinates: input must be an array, got {type(input).__name__}") from err
    if isinstance(coordinates, (str, bytes)) or not isinstance(coordinates, Sequence | np.ndarray) and \
            not hasattr(coordinates, "__len__"):
        raise TypeError("map_coordinates: coordinates must be a sequence of arrays, one per dimension of input")
    if len(coordinates) != array.ndim:
        raise ValueError(f"map_coordinates: coordinates must be a sequence of length input.ndim, but "
                         f"{len(coordinates)} != {array.ndim}")
    if mode not in _MODES:
        raise NotImplementedError(f"map_coordinates: mode {mode!r} is not supported; the supported modes are "
                                  f"{sorted(_MODES)} (as in JAX)")
    if isinstance(order, bool) or order not in (0, 1):
        raise NotImplementedError(f"map_coordinates: order must be 0 or 1 (as in JAX), got {order!r}")
    if dt.is_bool(array.dtype) or not (dt.is_int(array.dtype) or dt.is_float(array.dtype)
                                       or dt.is_complex(array.dtype)):
        raise TypeError(f"map_coordinates: input must have a numeric dtype, got {array.dtype}")
    coords = [enp.asarray(c) for c in coordinates]
    for c in coords:
        if dt.is_complex(c.dtype):
            raise TypeError("map_coordinates: coordinates must be real")
    coords = enp.broadcast_arrays(*coords) if coords else coords
    return _interpolate(array, tuple(coords), order, mode, enp.asarray(cval))


@partial(jit, static_argnums=(2, 3))
def _interpolate(array: Any, coords: tuple[Any, ...], order: int, mode: str, cval: Any) -> Any:
    """map_coordinates on checked arguments, as one program."""
    work_dtype = array.dtype if not dt.is_int(array.dtype) else dt.default_float_dtype()
    real_dtype = np.float64 if work_dtype in (np.float64, np.complex128) else np.float32
    coords = [c.astype(real_dtype) if not dt.is_int(c.dtype) else c for c in coords]
    data = array.astype(work_dtype)
    fix = _MODES[mode]

    # per dimension: the (index, weight) pairs of the neighbours
    per_dim = []
    for c, size in zip(coords, array.shape):
        if order == 0:
            nodes = [(_round_half_away(c).astype(np.int32) if not dt.is_int(c.dtype) else c.astype(np.int32), None)]
        else:
            if dt.is_int(c.dtype):
                c = c.astype(real_dtype)
            lower = enp.floor(c)
            upper_weight = c - lower
            index = lower.astype(np.int32)
            nodes = [(index, 1.0 - upper_weight), (index + 1, upper_weight)]
        per_dim.append([(fix(i, size), (i >= 0) & (i < size), w) for i, w in nodes])

    result = None
    cval = cval.astype(work_dtype)
    for combination in itertools.product(*per_dim):
        indices = tuple(i for i, _, _ in combination)
        sample = data[indices] if indices else data
        if mode == "constant":
            inside = combination[0][1]
            for _, valid, _ in combination[1:]:
                inside = inside & valid
            sample = enp.where(inside, sample, cval)
        weight = None
        for _, _, w in combination:
            if w is not None:
                weight = w if weight is None else weight * w
        term = sample if weight is None else sample * weight.astype(work_dtype)
        result = term if result is None else result + term
    if dt.is_int(array.dtype):
        result = _round_half_away(result)
    return result.astype(array.dtype)


__all__ = ["map_coordinates"]
