"""ember.scipy.fft: jax.scipy.fft's discrete cosine transforms dct, idct, dctn and idctn, with JAX's signatures:
type 2 only (as JAX; the inverse transform idct is the type-3 DCT scaled to invert dct), norm None ('backward',
the same) or 'ortho', n / s padding with zeros or truncating. Real inputs give real outputs of their float dtype
(integers and booleans become the default float); a complex input is transformed part by part, as JAX.

The transforms are built on ember.numpy.fft with Makhoul's reordering (IEEE Trans. ASSP 28, 1980): for the DCT-II
of x (length N), v = (x_0, x_2, x_4, ..., x_5, x_3, x_1), y_k = 2 Re(exp(-i pi k / (2N)) FFT(v)_k); the inverse
builds V_k = exp(i pi k / (2N)) (y_k - i y_(N-k)) / 2 (y_N = 0), inverts the FFT and undoes the reordering. So
one length-N complex FFT per transformed axis, and derivatives and batching come from the FFT's."""
from __future__ import annotations

import math
import operator
from typing import Any, Sequence

import numpy as np

from ember import lax
from ember import numpy as enp
from ember._api.jit import jit
from ember._core import dtypes as dt

_NORMS = (None, "backward", "ortho")


def _check(name: str, x: Any, type: int, norm: Any) -> Any:  # noqa: A002  (JAX's argument name)
    if type != 2:
        raise NotImplementedError(f"{name}: only DCT type 2 is implemented (as in JAX), got type={type!r}")
    if norm not in _NORMS:
        raise ValueError(f"{name}: norm must be None, 'backward' or 'ortho', got {norm!r}")
    try:
        x = enp.asarray(x)
    except Exception as err:
        raise TypeError(f"{name}: x must be an array, got {type_name(x)}") from err
    if not (dt.is_float(x.dtype) or dt.is_complex(x.dtype)):
        if not (dt.is_int(x.dtype) or dt.is_bool(x.dtype)):
            raise TypeError(f"{name}: x must have a numeric dtype, got {x.dtype}")
        x = x.astype(dt.default_float_dtype())
    return x


def type_name(value: Any) -> str:
    return type(value).__name__


def _axis(name: str, axis: Any, ndim: int) -> int:
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"{name}: axis must be an integer, got {axis!r}") from None
    if not -ndim <= axis < ndim:
        raise ValueError(f"{name}: axis {axis} is out of bounds for an array of {ndim} dimensions")
    return axis % ndim


def _resize(name: str, x: Any, n: Any, axis: int) -> Any:
    """x zero-padded or truncated to length n along axis."""
    if n is None:
        return x
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"{name}: n must be an integer, got {n!r}") from None
    if n < 1:
        raise ValueError(f"{name}: the transform length n must be at least 1, got {n}")
    size = x.shape[axis]
    if n < size:
        return lax.slice_in_dim(x, 0, n, axis=axis)
    if n > size:
        widths = [(0, 0)] * x.ndim
        widths[axis] = (0, n - size)
        return enp.pad(x, widths)
    return x


def _shape_along(n: int, axis: int, ndim: int) -> tuple[int, ...]:
    return tuple(n if a == axis else 1 for a in range(ndim))


def _twiddle(n: int, axis: int, ndim: int, sign: float, dtype: Any) -> Any:
    """exp(sign i pi k / (2n)), k = 0 .. n-1, shaped to broadcast along axis."""
    k = np.arange(n)
    values = np.exp(sign * 1j * np.pi * k / (2 * n)).reshape(_shape_along(n, axis, ndim))
    return enp.asarray(values.astype(np.complex128 if dtype == np.float64 else np.complex64))


def _ortho_scale(n: int, axis: int, ndim: int, dtype: Any) -> Any:
    """The factors that make the DCT-II orthonormal: sqrt(1/(4n)) for k = 0, sqrt(1/(2n)) beyond."""
    scale = np.full(n, math.sqrt(0.5 / n))
    scale[0] = math.sqrt(0.25 / n)
    return enp.asarray(scale.reshape(_shape_along(n, axis, ndim)).astype(dtype))


def _makhoul_order(n: int) -> np.ndarray:
    """The even-indexed entries ascending, then the odd-indexed ones descending."""
    return np.concatenate([np.arange(0, n, 2), np.arange(2 * (n // 2) - 1, 0, -2)]).astype(np.int32)


def _dct_real(x: Any, axis: int, norm: Any) -> Any:
    n = x.shape[axis]
    v = enp.take(x, enp.asarray(_makhoul_order(n)), axis=axis)
    spectrum = enp.fft.fft(v, axis=axis)
    y = 2.0 * enp.real(_twiddle(n, axis, x.ndim, -1.0, x.dtype) * spectrum)
    if norm == "ortho":
        y = y * _ortho_scale(n, axis, x.ndim, x.dtype)
    return y.astype(x.dtype)


def _idct_real(y: Any, axis: int, norm: Any) -> Any:
    n = y.shape[axis]
    if norm == "ortho":
        y = y / _ortho_scale(n, axis, y.ndim, y.dtype)
    # V_k = exp(i pi k / 2n) (y_k - i y_(n-k)) / 2, y_n = 0
    reversed_tail = enp.take(y, enp.asarray(np.concatenate([[0], np.arange(n - 1, 0, -1)]).astype(np.int32)),
                             axis=axis)
    mask = enp.asarray((np.arange(n) > 0).reshape(_shape_along(n, axis, y.ndim)))
    reversed_tail = enp.where(mask, reversed_tail, enp.zeros_like(reversed_tail))
    spectrum = _twiddle(n, axis, y.ndim, 1.0, y.dtype) * lax.complex(y, -reversed_tail) * 0.5
    v = enp.real(enp.fft.ifft(spectrum, axis=axis))
    # undo the reordering: x_(2j) = v_j, x_(2j+1) = v_(n-1-j)
    inverse = np.empty(n, np.int32)
    inverse[_makhoul_order(n)] = np.arange(n)
    return enp.take(v, enp.asarray(inverse.astype(np.int32)), axis=axis).astype(y.dtype)


# one program per shape, axis and norm when called eagerly
_dct_jit = jit(_dct_real, static_argnums=(1, 2))
_idct_jit = jit(_idct_real, static_argnums=(1, 2))


def _per_part(fn: Any, x: Any, *args: Any) -> Any:
    if dt.is_complex(x.dtype):
        return lax.complex(fn(enp.real(x), *args), fn(enp.imag(x), *args))
    return fn(x, *args)


def dct(x: Any, type: int = 2, n: int | None = None, axis: int = -1,  # noqa: A002
        norm: str | None = None) -> Any:
    """The type-2 discrete cosine transform along axis: y_k = 2 sum_j x_j cos(pi k (2j + 1) / (2N)) (norm=None
    or 'backward'), times sqrt(1/(4N)) at k = 0 and sqrt(1/(2N)) beyond with norm='ortho'. n zero-pads or
    truncates x along axis first."""
    x = _check("dct", x, type, norm)
    axis = _axis("dct", axis, x.ndim)
    x = _resize("dct", x, n, axis)
    return _per_part(_dct_jit, x, axis, norm)


def idct(x: Any, type: int = 2, n: int | None = None, axis: int = -1,  # noqa: A002
         norm: str | None = None) -> Any:
    """The inverse of dct (type 2) along axis: the type-3 DCT x_j = (y_0 + 2 sum_(k>=1) y_k cos(pi k (2j + 1) /
    (2N))) / (2N) with norm=None or 'backward', the orthonormal one with 'ortho'. n zero-pads or truncates x
    along axis first."""
    x = _check("idct", x, type, norm)
    axis = _axis("idct", axis, x.ndim)
    x = _resize("idct", x, n, axis)
    return _per_part(_idct_jit, x, axis, norm)


def _axes_and_sizes(name: str, x: Any, s: Any, axes: Any) -> tuple[list[int], list[Any]]:
    if s is not None:
        try:
            s = [operator.index(s)] if not isinstance(s, Sequence) and np.ndim(s) == 0 else [operator.index(v)
                                                                                          for v in s]
        except TypeError:
            raise TypeError(f"{name}: s must be a sequence of integers, got {s!r}") from None
        if len(s) > x.ndim:
            raise ValueError(f"{name}: s must have at most x.ndim ({x.ndim}) elements, got {len(s)}")
    if axes is None:
        axes = list(range(x.ndim - len(s), x.ndim)) if s is not None else list(range(x.ndim))
    else:
        axes = [_axis(name, a, x.ndim) for a in ([axes] if np.ndim(axes) == 0 else axes)]
        if len(set(axes)) != len(axes):
            raise ValueError(f"{name}: axes must be unique, got {axes}")
    if s is not None and len(s) != len(axes):
        raise ValueError(f"{name}: s and axes must have the same length, got {len(s)} and {len(axes)}")
    return axes, (s if s is not None else [None] * len(axes))


def dctn(x: Any, type: int = 2, s: Sequence[int] | None = None,  # noqa: A002
         axes: Sequence[int] | None = None, norm: str | None = None) -> Any:
    """The type-2 DCT over several axes (all by default; the last len(s) when only s is given): dct along each
    in turn, s giving each one's length."""
    x = _check("dctn", x, type, norm)
    axes, sizes = _axes_and_sizes("dctn", x, s, axes)
    for axis, size in zip(axes, sizes):
        x = _per_part(_dct_jit, _resize("dctn", x, size, axis), axis, norm)
    return x


def idctn(x: Any, type: int = 2, s: Sequence[int] | None = None,  # noqa: A002
          axes: Sequence[int] | None = None, norm: str | None = None) -> Any:
    """The inverse of dctn: idct along each of the axes in turn."""
    x = _check("idctn", x, type, norm)
    axes, sizes = _axes_and_sizes("idctn", x, s, axes)
    for axis, size in zip(axes, sizes):
        x = _per_part(_idct_jit, _resize("idctn", x, size, axis), axis, norm)
    return x


__all__ = ["dct", "dctn", "idct", "idctn"]
