"""numpy.fft on the `fft` primitive (ember._prims.fft): fft/ifft/rfft/irfft, their 2-D and n-D forms, hfft/ihfft,
norm= ("backward", "ortho", "forward"), and the helpers fftfreq, rfftfreq, fftshift, ifftshift. As jax.numpy.fft:
real inputs become complex64 (complex128 from float64), rfft refuses complex inputs, and at most three axes are
transformed at once. ember.numpy.fft re-exports these (they are not ember.numpy names)."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as _np

from ember import _prims as lax
from ember._core import aval_of
from ember._core import dtypes as dt
from ember._core.checks import normalize_axis, static_int

from ember._numpy.promotion import _operand_array, _to_inexact
from ember._numpy.shape import moveaxis
from ember._numpy.creation import arange
from ember._numpy.selection import roll

_NORMS = ("backward", "ortho", "forward")
_INVERSE = {"FFT": False, "RFFT": False, "IFFT": True, "IRFFT": True}


def _check_norm(name: str, norm: str | None) -> str:
    norm = "backward" if norm is None else norm
    if norm not in _NORMS:
        raise ValueError(f"{name}: norm must be one of {_NORMS} (or None), got {norm!r}")
    return norm


def _scale(x: Any, norm: str, inverse: bool, n: int) -> Any:
    """XLA's FFT is unscaled and its inverse scaled by 1/n (norm="backward"); the other norms rescale."""
    if norm == "backward" or n == 0:
        return x
    factor = math.sqrt(n) if norm == "ortho" else float(n)
    value = factor if inverse else 1.0 / factor  # ("ortho": 1/sqrt(n) both ways; "forward": 1/n forward only)
    return lax.mul(x, lax.full((), value, aval_of(x).dtype))


def _resize(x: Any, axis: int, size: int) -> Any:
    """x cut or zero-padded at the end of axis to size (numpy's n= and s=)."""
    shape = aval_of(x).shape
    have = shape[axis]
    if have == size:
        return x
    if have > size:
        return lax.slice_in_dim(x, 0, size, axis=axis)
    config = [(0, 0, 0)] * len(shape)
    config[axis] = (0, size - have, 0)
    return lax.pad(x, lax.full((), 0, aval_of(x).dtype), config)


def _operand(name: str, a: Any, fft_type: str) -> Any:
    """The operand in the dtype the transform takes: complex for FFT/IFFT/IRFFT, float32/float64 for RFFT."""
    x = _to_inexact(_operand_array(name, a), name)
    d = aval_of(x).dtype
    if fft_type == "RFFT":
        if dt.is_complex(d):
            raise TypeError(f"{name}: complex input is not supported (as jax.numpy.fft; numpy drops the imaginary "
                            f"part), got {aval_of(x).str_short()}")
        return x if d in (dt.float32, dt.float64) else lax.convert_element_type(x, dt.float32)
    if dt.is_complex(d):
        return x
    return lax.convert_element_type(x, dt.complex_dtype(d))


def _axes_and_sizes(name: str, x: Any, s: Sequence[int] | None, axes: Sequence[int] | None
                    ) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """numpy's s/axes rules: axes default to the last len(s) axes (all axes without s)."""
    ndim = aval_of(x).ndim
    if s is not None:
        s = tuple(static_int(name, "s", n) for n in s)
    if axes is None:
        axes = tuple(range(ndim - len(s), ndim)) if s is not None else tuple(range(ndim))
    axes = tuple(normalize_axis(name, static_int(name, "axes", a), ndim) for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{name}: repeated axes {axes} are not supported")
    if s is not None and len(s) != len(axes):
        raise ValueError(f"{name}: s {s} and axes {axes} must have the same length")
    if s is not None and any(n < 1 for n in s):
        raise ValueError(f"{name}: invalid number of FFT data points {s}")
    return axes, s


def _fftn(name: str, a: Any, fft_type: str, s: Sequence[int] | None, axes: Sequence[int] | None,
          norm: str | None) -> Any:
    """The transform of a over axes (each cut or padded to s), with axes moved last around the primitive."""
    norm = _check_norm(name, norm)
    x = _operand(name, a, fft_type)
    if aval_of(x).ndim == 0:
        raise ValueError(f"{name}: needs an array of at least one dimension, got {aval_of(x).str_short()}")
    axes, s = _axes_and_sizes(name, x, s, axes)
    if not axes:
        return x
    if len(axes) > 3:
        raise ValueError(f"{name}: at most 3 axes can be transformed at once (as jax.numpy.fft), got axes {axes}")
    shape = aval_of(x).shape
    if fft_type == "IRFFT":
        out_last = s[-1] if s is not None else 2 * (shape[axes[-1]] - 1)
        if out_last < 1:
            raise ValueError(f"{name}: invalid number of data points {out_last} along axis {axes[-1]} of "
                             f"{aval_of(x).str_short()}")
        lengths = tuple(s[:-1]) + (out_last,) if s is not None else tuple(shape[a] for a in axes[:-1]) + (out_last,)
        sizes = lengths[:-1] + (out_last // 2 + 1,)
    else:
        lengths = tuple(s) if s is not None else tuple(shape[a] for a in axes)
        sizes = lengths
    for axis, size in zip(axes, sizes):
        x = _resize(x, axis, size)
    if any(n == 0 for n in lengths):
        raise ValueError(f"{name}: invalid number of FFT data points {lengths}")
    k = len(axes)
    ndim = aval_of(x).ndim
    last = tuple(range(ndim - k, ndim))
    moved = moveaxis(x, axes, last)
    out = lax.fft(moved, fft_type, lengths)
    return _scale(moveaxis(out, last, axes), norm, _INVERSE[fft_type], math.prod(lengths))


def _one_axis(n: int | None, axis: int) -> tuple[tuple[int, ...] | None, tuple[int, ...]]:
    return (None if n is None else (n,)), (axis,)


# ---------------------------------------------------------------------------------------------------------------
# One axis
def fft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The discrete Fourier transform along axis (numpy.fft.fft)."""
    return _fftn("fft", a, "FFT", *_one_axis(n, axis), norm)


def ifft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The inverse discrete Fourier transform along axis (numpy.fft.ifft)."""
    return _fftn("ifft", a, "IFFT", *_one_axis(n, axis), norm)


def rfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The FFT of real input: the n // 2 + 1 non-negative frequencies (numpy.fft.rfft)."""
    return _fftn("rfft", a, "RFFT", *_one_axis(n, axis), norm)


def irfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The inverse of rfft: n real values (2 * (m - 1) by default) from m non-negative frequencies."""
    return _fftn("irfft", a, "IRFFT", *_one_axis(n, axis), norm)


_SWAPPED = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def hfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The FFT of a signal with Hermitian symmetry, given by its non-negative half: real output of n values
    (numpy.fft.hfft: irfft of the conjugate, with the opposite normalization)."""
    norm = _check_norm("hfft", norm)
    return irfft(lax.conj(_operand("hfft", a, "FFT")), n, axis, _SWAPPED[norm])


def ihfft(a: Any, n: int | None = None, axis: int = -1, norm: str | None = None) -> Any:
    """The inverse of hfft: the non-negative half of the spectrum of real input (numpy.fft.ihfft)."""
    norm = _check_norm("ihfft", norm)
    return lax.conj(rfft(a, n, axis, _SWAPPED[norm]))


# ---------------------------------------------------------------------------------------------------------------
# Several axes
def fftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None, norm: str | None = None) -> Any:
    """The n-dimensional FFT over axes (all by default; at most three)."""
    return _fftn("fftn", a, "FFT", s, axes, norm)


def ifftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Any:
    return _fftn("ifftn", a, "IFFT", s, axes, norm)


def rfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None) -> Any:
    """The n-dimensional FFT of real input: the last axis keeps its non-negative frequencies."""
    return _fftn("rfftn", a, "RFFT", s, axes, norm)


def irfftn(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str | None = None) -> Any:
    return _fftn("irfftn", a, "IRFFT", s, axes, norm)


def fft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    return _fftn("fft2", a, "FFT", s, axes, norm)


def ifft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    return _fftn("ifft2", a, "IFFT", s, axes, norm)


def rfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    return _fftn("rfft2", a, "RFFT", s, axes, norm)


def irfft2(a: Any, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1), norm: str | None = None) -> Any:
    return _fftn("irfft2", a, "IRFFT", s, axes, norm)


# ---------------------------------------------------------------------------------------------------------------
# Frequencies and shifts
def _frequency_dtype(name: str, dtype: Any) -> _np.dtype:
    dtype = dt.default_float_dtype() if dtype is None else dt.check_user_dtype(dtype, name)
    if not dt.is_float(dtype):
        raise ValueError(f"{name}: dtype must be a floating-point dtype, got {dtype.name}")
    return dtype


def fftfreq(n: int, d: Any = 1.0, *, dtype: Any = None, device: Any = None) -> Any:
    """The sample frequencies of fft: [0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)."""
    n = static_int("fftfreq", "n", n)
    if n < 1:
        raise ValueError(f"fftfreq: n must be positive, got {n}")
    dtype = _frequency_dtype("fftfreq", dtype)
    k = arange(n, dtype=dtype)
    k = lax.select(lax.ge(k, lax.full((), (n - 1) // 2 + 1, dtype)), lax.sub(k, lax.full((), float(n), dtype)), k)
    return lax.div(k, lax.convert_element_type(lax.mul(_operand_array("fftfreq", d), float(n)), dtype))


def rfftfreq(n: int, d: Any = 1.0, *, dtype: Any = None, device: Any = None) -> Any:
    """The sample frequencies of rfft: [0, 1, ..., n // 2] / (d * n)."""
    n = static_int("rfftfreq", "n", n)
    if n < 1:
        raise ValueError(f"rfftfreq: n must be positive, got {n}")
    dtype = _frequency_dtype("rfftfreq", dtype)
    return lax.div(arange(n // 2 + 1, dtype=dtype),
                   lax.convert_element_type(lax.mul(_operand_array("rfftfreq", d), float(n)), dtype))


def _shift(name: str, x: Any, axes: int | Sequence[int] | None, sign: int) -> Any:
    x = _operand_array(name, x)
    shape = aval_of(x).shape
    if axes is None:
        axes = tuple(range(len(shape)))
    elif isinstance(axes, int | _np.integer):
        axes = (int(axes),)
    axes = tuple(normalize_axis(name, static_int(name, "axes", a), len(shape)) for a in axes)
    shifts = tuple(sign * (shape[a] // 2) for a in axes)
    return roll(x, shifts, axes) if axes else x


def fftshift(x: Any, axes: int | Sequence[int] | None = None) -> Any:
    """The zero frequency moved to the center: a roll by n // 2 along each axis (all by default)."""
    return _shift("fftshift", x, axes, 1)


def ifftshift(x: Any, axes: int | Sequence[int] | None = None) -> Any:
    """The inverse of fftshift: a roll by -(n // 2) along each axis."""
    return _shift("ifftshift", x, axes, -1)


FFT_NAMES = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn",
             "rfftn", "irfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift")
