"""ember.scipy.signal: jax.scipy.signal's convolutions (fftconvolve by ember.numpy.fft; convolve/correlate direct
by lax.conv_general_dilated or by FFT; convolve2d/correlate2d), detrend (by lstsq) and the spectral functions stft,
istft, csd and welch, with jax.scipy.signal's signatures, modes and dtypes."""
from __future__ import annotations

import importlib
import math
import operator
import warnings
from functools import partial
from typing import Any, Callable, Sequence

import numpy as np

from ember import lax
from ember import numpy as enp
from ember._api import jit
from ember._core import dtypes as dt
from ember._core.checks import static_int

_MODES = ("full", "same", "valid")


def _inexact_pair(name: str, in1: Any, in2: Any) -> tuple[Any, Any]:
    in1, in2 = enp.asarray(in1), enp.asarray(in2)
    d = enp.result_type(in1, in2, 0.0)
    return in1.astype(d), in2.astype(d)


def _check_mode(name: str, mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"scipy.signal.{name}: mode must be one of {list(_MODES)}, got {mode!r}")


def _check_ndims(name: str, in1: Any, in2: Any) -> None:
    if in1.ndim != in2.ndim:
        raise ValueError(f"scipy.signal.{name}: in1 and in2 must have the same number of dimensions, got shapes "
                         f"{in1.shape} and {in2.shape}")


def _valid_swap(name: str, s1: Sequence[int], s2: Sequence[int]) -> bool:
    """Whether 'valid' mode swaps the inputs (in2 at least as large in every dimension); an error when neither
    input is at least as large as the other in every dimension."""
    if all(a >= b for a, b in zip(s1, s2)):
        return False
    if all(a <= b for a, b in zip(s1, s2)):
        return True
    raise ValueError(f"scipy.signal.{name}: one input must be at least as large as the other in every dimension, "
                     f"got shapes {tuple(s1)} and {tuple(s2)}")


# ---------------------------------------------------------------------------------------------------------------
# convolution by FFT
def fftconvolve(in1: Any, in2: Any, mode: str = "full", axes: int | Sequence[int] | None = None) -> Any:
    """The N-dimensional convolution of in1 and in2 by FFT (rfftn for real inputs) along axes (default all; the
    other axes must match and are convolved separately); mode 'full', 'same' (in1's size) or 'valid'."""
    in1, in2 = _inexact_pair("fftconvolve", in1, in2)
    _check_ndims("fftconvolve", in1, in2)
    _check_mode("fftconvolve", mode)
    nd = in1.ndim
    if axes is None:
        axes = tuple(range(nd))
    else:
        axes = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
        if any(not -nd <= operator.index(a) < max(nd, 1) for a in axes):
            raise ValueError(f"scipy.signal.fftconvolve: axes {axes} out of bounds for {nd} dimensions")
        axes = tuple(sorted({operator.index(a) % nd for a in axes}))
    mapped = [i for i in range(nd) if i not in axes]
    if any(in1.shape[i] != in2.shape[i] for i in mapped):
        raise ValueError(f"scipy.signal.fftconvolve: the axes not convolved must match, got shapes {in1.shape} and "
                         f"{in2.shape} with axes {axes}")
    if mode == "valid" and _valid_swap("fftconvolve", [in1.shape[i] for i in axes], [in2.shape[i] for i in axes]):
        in1, in2 = in2, in1
    return _fftconvolve(in1, in2, mode, axes)


@partial(jit, static_argnums=(2, 3))
def _fftconvolve(in1: Any, in2: Any, mode: str, axes: tuple[int, ...]) -> Any:
    nd = in1.ndim
    s1, s2 = [in1.shape[i] for i in axes], [in2.shape[i] for i in axes]
    full = [a + b - 1 for a, b in zip(s1, s2)]
    if all(a == 1 or b == 1 for a, b in zip(s1, s2)):
        conv = in1 * in2  # (every convolved axis has a length-1 operand: a broadcast product)
    elif dt.is_complex(in1.dtype):
        conv = enp.fft.ifftn(enp.fft.fftn(in1, full, axes) * enp.fft.fftn(in2, full, axes), full, axes)
    else:
        conv = enp.fft.irfftn(enp.fft.rfftn(in1, full, axes) * enp.fft.rfftn(in2, full, axes), full, axes)
    out = {"full": full, "same": s1, "valid": [a - b + 1 for a, b in zip(s1, s2)]}[mode]
    start, limit = [0] * nd, list(conv.shape)
    for ax, f, o in zip(axes, full, out):
        start[ax] = (f - o) // 2
        limit[ax] = start[ax] + o
    return lax.slice(conv, start, limit)


# ---------------------------------------------------------------------------------------------------------------
# direct convolution (lax.conv_general_dilated)
def _conv(lhs: Any, rhs: Any, padding: list[tuple[int, int]]) -> Any:
    """The correlation of lhs with rhs (same rank) with this padding; complex operands by their parts in one real
    convolution: lhs's parts as a batch of two, rhs's as two output features."""
    strides = (1,) * lhs.ndim
    if not dt.is_complex(lhs.dtype):
        return lax.conv_general_dilated(lhs[None, None], rhs[None, None], strides, padding)[0, 0]
    out = lax.conv_general_dilated(enp.stack([lhs.real, lhs.imag])[:, None], enp.stack([rhs.real, rhs.imag])[:, None],
                                   strides, padding)  # out[b, o]: part b of lhs with part o of rhs
    return lax.complex(out[0, 0] - out[1, 1], out[0, 1] + out[1, 0])


def _convolve_nd(name: str, in1: Any, in2: Any, mode: str) -> Any:
    _check_mode(name, mode)
    in1, in2 = enp.asarray(in1), enp.asarray(in2)
    _check_ndims(name, in1, in2)
    if in1.size == 0 or in2.size == 0:
        raise ValueError(f"scipy.signal.{name}: inputs cannot be empty, got shapes {in1.shape} and {in2.shape}")
    in1, in2 = _inexact_pair(name, in1, in2)
    _valid_swap(name, in1.shape, in2.shape)
    return _direct(in1, in2, mode)


@partial(jit, static_argnums=(2,))
def _direct(in1: Any, in2: Any, mode: str) -> Any:
    shape_o = in2.shape
    if all(a <= b for a, b in zip(in1.shape, in2.shape)):
        in1, in2 = in2, in1
    k = in2.shape
    if mode == "valid":
        padding = [(0, 0) for _ in k]
    elif mode == "same":
        padding = [(s - 1 - (so - 1) // 2, s - so + (so - 1) // 2) for s, so in zip(k, shape_o)]
    else:
        padding = [(s - 1, s - 1) for s in k]
    return _conv(in1, enp.flip(in2), padding)


def convolve(in1: Any, in2: Any, mode: str = "full", method: str = "auto", precision: Any = None) -> Any:
    """The N-dimensional convolution of in1 and in2 (mode 'full', 'same' or 'valid'); method 'direct' (and
    'auto', as JAX) by lax.conv_general_dilated, 'fft' by fftconvolve."""
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    if method in ("auto", "direct"):
        return _convolve_nd("convolve", in1, in2, mode)
    raise ValueError(f"scipy.signal.convolve: method must be 'auto', 'direct' or 'fft', got {method!r}")


def correlate(in1: Any, in2: Any, mode: str = "full", method: str = "auto", precision: Any = None) -> Any:
    """The N-dimensional cross-correlation: convolve(in1, flip(conj(in2)))."""
    if method not in ("auto", "direct", "fft"):
        raise ValueError(f"scipy.signal.correlate: method must be 'auto', 'direct' or 'fft', got {method!r}")
    in2 = enp.asarray(in2)
    return convolve(in1, enp.flip(enp.conj(in2)), mode, method=method)


def _check_2d(name: str, in1: Any, in2: Any, boundary: str, fillvalue: Any) -> tuple[Any, Any]:
    if boundary != "fill" or fillvalue != 0:
        raise NotImplementedError(f"scipy.signal.{name}: only boundary='fill' with fillvalue=0 is supported (as "
                                  f"JAX), got boundary={boundary!r}, fillvalue={fillvalue!r}")
    in1, in2 = enp.asarray(in1), enp.asarray(in2)
    if in1.ndim != 2 or in2.ndim != 2:
        raise ValueError(f"scipy.signal.{name}: needs 2-D inputs, got shapes {in1.shape} and {in2.shape}")
    return in1, in2


def convolve2d(in1: Any, in2: Any, mode: str = "full", boundary: str = "fill", fillvalue: Any = 0,
               precision: Any = None) -> Any:
    """The 2-D convolution (boundary='fill' with fillvalue 0 only, as JAX)."""
    in1, in2 = _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    return _convolve_nd("convolve2d", in1, in2, mode)


def correlate2d(in1: Any, in2: Any, mode: str = "full", boundary: str = "fill", fillvalue: Any = 0,
                precision: Any = None) -> Any:
    """The 2-D cross-correlation (boundary='fill' with fillvalue 0 only), scipy's result for every mode and
    either input the larger."""
    in1, in2 = _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    swap = all(a <= b for a, b in zip(in1.shape, in2.shape))
    same_shape = in1.shape == in2.shape
    if mode == "same" or (mode == "valid" and not (swap and not same_shape)) or (mode == "full" and not swap):
        return enp.flip(_convolve_nd("correlate2d", enp.flip(in1), enp.conj(in2), mode))
    out = _convolve_nd("correlate2d", enp.flip(in2), enp.conj(in1), mode)
    return enp.conj(out) if mode == "full" else out


# ---------------------------------------------------------------------------------------------------------------
# detrending
def detrend(data: Any, axis: int = -1, type: str = "linear", bp: Any = 0,  # noqa: A002 (scipy's name)
            overwrite_data: None = None) -> Any:
    """data less its mean ('constant') or less its least-squares line ('linear'), piecewise between the
    breakpoints bp (static) along axis."""
    if overwrite_data is not None:
        raise NotImplementedError("scipy.signal.detrend: overwrite_data is not supported (as JAX)")
    if type not in ("constant", "linear"):
        raise ValueError(f"scipy.signal.detrend: type must be 'linear' or 'constant', got {type!r}")
    data = enp.asarray(data)
    data = data.astype(enp.result_type(data, 0.0))
    axis = static_int("scipy.signal.detrend", "axis", axis)
    if not -max(data.ndim, 1) <= axis < max(data.ndim, 1):
        raise ValueError(f"scipy.signal.detrend: axis {axis} is out of bounds for data of shape {data.shape}")
    n = data.shape[axis % data.ndim]
    bps = tuple(int(b) for b in np.sort(np.unique(np.r_[0, bp, n])))
    if bps[0] < 0 or bps[-1] > n:
        raise ValueError(f"scipy.signal.detrend: breakpoints must lie in [0, {n}] (the length along axis), got {bp}")
    return _detrend(data, axis % data.ndim, type, bps)


@partial(jit, static_argnums=(1, 2, 3))
def _detrend(data: Any, axis: int, type: str, bps: tuple[int, ...]) -> Any:  # noqa: A002
    if type == "constant":
        return data - data.mean(axis, keepdims=True)
    n = data.shape[axis]
    moved = enp.moveaxis(data, axis, 0)
    flat = enp.reshape(moved, (n, -1))
    pieces = []
    for lo, hi in zip(bps[:-1], bps[1:]):
        npts = int(hi - lo)
        a = enp.stack([enp.ones(npts, flat.dtype), enp.arange(1, npts + 1, dtype=flat.dtype) / npts], axis=1)
        piece = flat[int(lo):int(hi)]
        coef = enp.linalg.lstsq(a, piece)[0]
        pieces.append(piece - a @ coef)
    return enp.moveaxis(enp.reshape(enp.concatenate(pieces, 0), moved.shape), 0, axis)


# ---------------------------------------------------------------------------------------------------------------
# spectral analysis: windowed FFTs of overlapping segments
def _get_window(name: str, window: Any, n: int, dtype: np.dtype) -> Any:
    """The window of length n: 'hann' computed here, other names (and (name, param) tuples) from scipy's
    get_window."""
    if isinstance(window, str) and window == "hann":
        return enp.ones(1, dtype) if n == 1 else (enp.sin(enp.linspace(0, math.pi, n, endpoint=False)) ** 2
                                                  ).astype(dtype)
    try:
        get_window = importlib.import_module("scipy.signal").get_window  # (scipy: optional, loaded on use)
    except ImportError:
        raise ImportError(f"scipy.signal.{name}: window={window!r} needs scipy (pip install scipy); 'hann' and "
                          "array windows do not") from None
    return enp.asarray(get_window(window, n), dtype)


def _segment_window(name: str, window: Any, nperseg: int | None, input_length: int, dtype: np.dtype
                    ) -> tuple[Any, Any, int]:
    """(window array or None, window name or None, nperseg): a named window of nperseg samples (at most the input's
    length), or an array window whose length nperseg must match."""
    if isinstance(window, (str, tuple)):
        n = input_length if nperseg is None else nperseg
        if n > input_length:
            warnings.warn(f"scipy.signal.{name}: nperseg={n} is greater than the input length {input_length}, "
                          f"using nperseg={input_length}", stacklevel=4)
            n = input_length
        return None, window, n
    win = enp.asarray(window).astype(dtype)
    n = win.size if nperseg is None else nperseg
    if win.ndim != 1:
        raise ValueError(f"scipy.signal.{name}: window must be 1-D, got shape {win.shape}")
    if input_length < win.size:
        raise ValueError(f"scipy.signal.{name}: the window ({win.size}) is longer than the input ({input_length})")
    if n != win.size:
        raise ValueError(f"scipy.signal.{name}: nperseg={n} differs from the window's length {win.size}")
    return win, None, n


def _odd_ext(x: Any, n: int) -> Any:
    """x extended by n points at each end of its last axis, by odd (point) symmetry about the end points."""
    if n < 1:
        return x
    left, right = x[..., :1], x[..., -1:]
    return enp.concatenate([2 * left - enp.flip(x[..., 1:n + 1], -1), x,
                            2 * right - enp.flip(x[..., -(n + 1):-1], -1)], -1)


def _pad_last(x: Any, n: int, mode: str) -> Any:
    return enp.pad(x, [(0, 0)] * (x.ndim - 1) + [(n, n)], mode)


_BOUNDARIES: dict[Any, Callable[[Any, int], Any]] = {
    "even": lambda x, n: _pad_last(x, n, "reflect"), "odd": _odd_ext,
    "constant": lambda x, n: _pad_last(x, n, "edge"), "zeros": lambda x, n: _pad_last(x, n, "constant"),
    None: lambda x, n: x,
}


def _segment_ffts(x: Any, win: Any, detrend_func: Callable[[Any], Any], nperseg: int, noverlap: int, nfft: int,
                  twosided: bool) -> Any:
    """The FFTs (..., segments, frequencies) of x's detrended, windowed segments of nperseg samples, nperseg -
    noverlap apart."""
    starts = np.arange(0, x.shape[-1] - nperseg + 1, nperseg - noverlap)
    segments = x[..., starts[:, None] + np.arange(nperseg)[None, :]]
    segments = detrend_func(segments)
    if dt.is_complex(win.dtype) and not dt.is_complex(segments.dtype):
        segments = segments.astype(dt.complex_dtype(segments.dtype))
    segments = win * segments
    return enp.fft.fft(segments, n=nfft) if twosided else enp.fft.rfft(segments.real, n=nfft)


def _spectral(name: str, x: Any, y: Any, fs: Any, window: Any, nperseg: int | None, noverlap: int | None,
              nfft: int | None, detrend_type: Any, return_onesided: bool, scaling: str, axis: int, mode: str,
              boundary: str | None = None, padded: bool = False) -> tuple[Any, Any, Any]:
    """(frequencies, segment times, result): the STFT (mode 'stft') or the (cross) periodograms of each segment
    (mode 'psd'), along the last axis, frequencies at axis (scipy's _spectral_helper, as jax.scipy.signal). The
    arguments are checked here; _spectral_ffts computes, compiled once per signature."""
    if boundary not in _BOUNDARIES:
        raise ValueError(f"scipy.signal.{name}: boundary must be one of {list(_BOUNDARIES)}, got {boundary!r}")
    if scaling not in ("density", "spectrum"):
        raise ValueError(f"scipy.signal.{name}: scaling must be 'density' or 'spectrum', got {scaling!r}")
    if not (isinstance(detrend_type, str) or callable(detrend_type) or not detrend_type):
        raise ValueError(f"scipy.signal.{name}: detrend must be a string, a function or False, got "
                         f"{detrend_type!r}")
    if isinstance(detrend_type, str) and detrend_type not in ("constant", "linear"):
        raise ValueError(f"scipy.signal.{name}: detrend must be 'linear' or 'constant', got {detrend_type!r}")
    x = enp.asarray(x)
    axis = static_int(f"scipy.signal.{name}", "axis", axis)
    if not -max(x.ndim, 1) <= axis < max(x.ndim, 1):
        raise ValueError(f"scipy.signal.{name}: axis {axis} is out of bounds for x of shape {x.shape}")
    axis %= max(x.ndim, 1)
    if y is None:
        x = x.astype(enp.result_type(x, 0.0))
        outer = x.shape[:axis] + x.shape[axis + 1:]
    else:
        x, y = _inexact_pair(name, x, y)
        if x.ndim != y.ndim:
            raise ValueError(f"scipy.signal.{name}: x and y must have the same rank, got shapes {x.shape} and "
                             f"{y.shape}")
        try:
            outer = tuple(np.broadcast_shapes(x.shape[:axis] + x.shape[axis + 1:],
                                              y.shape[:axis] + y.shape[axis + 1:]))
        except ValueError:
            raise ValueError(f"scipy.signal.{name}: x of shape {x.shape} and y of shape {y.shape} do not broadcast "
                             "together") from None
    result_dtype = dt.complex_dtype(x.dtype)
    freq_dtype = np.dtype(np.finfo(result_dtype).dtype)
    if nperseg is not None:
        nperseg = static_int(f"scipy.signal.{name}", "nperseg", nperseg)
        if nperseg < 1:
            raise ValueError(f"scipy.signal.{name}: nperseg must be a positive integer, got {nperseg}")
    win, window_name, nperseg = _segment_window(name, window, nperseg, x.shape[axis], x.dtype)
    noverlap = nperseg // 2 if noverlap is None else static_int(f"scipy.signal.{name}", "noverlap", noverlap)
    nfft = nperseg if nfft is None else static_int(f"scipy.signal.{name}", "nfft", nfft)
    if x.size == 0 or (y is not None and y.size == 0):
        n = x.shape[axis] if y is None else min(x.shape[axis], y.shape[axis])
        out_shape = outer[:axis] + (n,) + outer[axis:]
        return (enp.zeros(out_shape, freq_dtype), enp.zeros(out_shape, freq_dtype),
                enp.zeros(out_shape, result_dtype))
    if nfft < nperseg:
        raise ValueError(f"scipy.signal.{name}: nfft ({nfft}) must be at least nperseg ({nperseg})")
    if noverlap >= nperseg:
        raise ValueError(f"scipy.signal.{name}: noverlap ({noverlap}) must be less than nperseg ({nperseg})")
    if boundary == "odd" and nperseg // 2 > max(x.shape[axis], 0 if y is None else y.shape[axis]) - 1:
        raise ValueError(f"scipy.signal.{name}: boundary='odd' extends by nperseg // 2 = {nperseg // 2} points, "
                         f"more than the input's length less one")
    twosided = not return_onesided
    if return_onesided and (dt.is_complex(x.dtype) or (y is not None and dt.is_complex(y.dtype))):
        warnings.warn(f"scipy.signal.{name}: the input is complex: switching to return_onesided=False",
                      stacklevel=3)
        twosided = True
    return _spectral_ffts(x, y, win, fs, window_name, nperseg, noverlap, nfft, detrend_type, twosided, scaling,
                          axis, mode, boundary, padded)


@partial(jit, static_argnums=tuple(range(4, 15)))
def _spectral_ffts(x: Any, y: Any, win: Any, fs: Any, window_name: Any, nperseg: int, noverlap: int, nfft: int,
                   detrend_type: Any, twosided: bool, scaling: str, axis: int, mode: str, boundary: str | None,
                   padded: bool) -> tuple[Any, Any, Any]:
    result_dtype = dt.complex_dtype(x.dtype)
    freq_dtype = np.dtype(np.finfo(result_dtype).dtype)
    if win is None:
        win = _get_window("spectral", window_name, nperseg, x.dtype)
    x = enp.moveaxis(x, axis, -1)
    if y is not None:
        y = enp.moveaxis(y, axis, -1)
        length = max(x.shape[-1], y.shape[-1])  # the shorter zero-padded to the longer
        x, y = (enp.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, length - v.shape[-1])]) for v in (x, y))
    nstep = nperseg - noverlap
    ext = _BOUNDARIES[boundary]
    x, y = ext(x, nperseg // 2), None if y is None else ext(y, nperseg // 2)
    if padded:  # to a whole number of segments
        nadd = (-(x.shape[-1] - nperseg) % nstep) % nperseg
        x = enp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, nadd)])
        y = None if y is None else enp.pad(y, [(0, 0)] * (y.ndim - 1) + [(0, nadd)])
    if isinstance(detrend_type, str):
        def detrend_func(d: Any) -> Any:
            return detrend(d, axis=-1, type=detrend_type)
    elif callable(detrend_type):
        detrend_func = detrend_type
    else:
        def detrend_func(d: Any) -> Any:
            return d
    scale = 1.0 / (fs * (win * win).sum()) if scaling == "density" else 1.0 / win.sum() ** 2
    if mode == "stft":
        scale = enp.sqrt(scale)
    scale = enp.asarray(scale).astype(dt.complex_dtype(enp.asarray(scale).dtype))
    freqs = (enp.fft.fftfreq if twosided else enp.fft.rfftfreq)(nfft, 1 / fs, dtype=freq_dtype)
    result = _segment_ffts(x, win, detrend_func, nperseg, noverlap, nfft, twosided)
    if y is not None:
        result = enp.conj(result) * _segment_ffts(y, win, detrend_func, nperseg, noverlap, nfft, twosided)
    elif mode == "psd":
        result = enp.conj(result) * result
    result = result * scale
    if not twosided and mode == "psd":  # the negative frequencies folded onto the positive ones
        end = None if nfft % 2 else -1
        result = result.at[..., 1:end].multiply(2)
    time = enp.arange(nperseg / 2, x.shape[-1] - nperseg / 2 + 1, nstep, dtype=freq_dtype) / fs
    if boundary is not None:
        time = time - (nperseg / 2) / fs
    result = result.astype(result_dtype)
    if y is None and mode != "stft":
        result = result.real
    return freqs, time, enp.moveaxis(result, -1, axis)


def stft(x: Any, fs: Any = 1.0, window: Any = "hann", nperseg: int = 256, noverlap: int | None = None,
         nfft: int | None = None, detrend: Any = False, return_onesided: bool = True, boundary: str | None = "zeros",
         padded: bool = True, axis: int = -1) -> tuple[Any, Any, Any]:
    """(frequencies, segment times, Zxx): the short-time Fourier transform of x along axis, 'spectrum' scaled
    (scipy.signal.stft, as jax.scipy.signal)."""
    return _spectral("stft", x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                     "spectrum", axis, "stft", boundary, padded)


def _averaged(name: str, x: Any, y: Any, fs: Any, window: Any, nperseg: int | None, noverlap: int | None,
              nfft: int | None, detrend: Any, return_onesided: bool, scaling: str, axis: int, average: str
              ) -> tuple[Any, Any]:
    if average not in ("mean", "median"):
        raise ValueError(f"scipy.signal.{name}: average must be 'median' or 'mean', got {average!r}")
    freqs, _, pxy = _spectral(name, x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, scaling,
                              axis, "psd")
    if y is not None:
        pxy = pxy.astype(dt.complex_dtype(pxy.dtype))
    if pxy.ndim < 2 or pxy.size == 0:
        return freqs, pxy
    if pxy.shape[-1] == 1:
        return freqs, enp.reshape(pxy, pxy.shape[:-1])
    return freqs, _average_segments(pxy, average)


@partial(jit, static_argnums=(1,))
def _average_segments(pxy: Any, average: str) -> Any:
    if average == "mean":
        return pxy.mean(axis=-1)
    ii = np.arange(2.0, pxy.shape[-1], 2)  # the median: scipy's bias of a median of periodograms against the mean
    bias = 1 + np.sum(1.0 / (ii + 1) - 1.0 / ii)
    if dt.is_complex(pxy.dtype):
        pxy = lax.complex(enp.median(pxy.real, axis=-1), enp.median(pxy.imag, axis=-1))
    else:
        pxy = enp.median(pxy, axis=-1)
    return pxy / enp.asarray(bias, pxy.dtype)


def csd(x: Any, y: Any, fs: Any = 1.0, window: Any = "hann", nperseg: int | None = None,
        noverlap: int | None = None, nfft: int | None = None, detrend: Any = "constant", return_onesided: bool = True,
        scaling: str = "density", axis: int = -1, average: str = "mean") -> tuple[Any, Any]:
    """(frequencies, Pxy): the cross power spectral density of x and y by Welch's method (y None: x's own),
    averaging the segments' periodograms by 'mean' or 'median'."""
    return _averaged("csd", x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, scaling, axis,
                     average)


def welch(x: Any, fs: Any = 1.0, window: Any = "hann", nperseg: int | None = None, noverlap: int | None = None,
          nfft: int | None = None, detrend: Any = "constant", return_onesided: bool = True, scaling: str = "density",
          axis: int = -1, average: str = "mean") -> tuple[Any, Any]:
    """(frequencies, Pxx): the power spectral density of x by Welch's method."""
    freqs, pxx = _averaged("welch", x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided, scaling,
                           axis, average)
    return freqs, pxx.real


def _overlap_and_add(x: Any, step: int) -> Any:
    """The frames x (..., frames, frame length) summed, frame i starting at i * step."""
    *batch, nframes, seglen = x.shape
    out_len = step * (nframes - 1) + seglen
    starts = np.arange(nframes) * step
    index = (starts[:, None] + np.arange(seglen)[None, :]).reshape(-1)
    out = enp.zeros((*batch, out_len), x.dtype)
    return out.at[..., index].add(enp.reshape(x, (*batch, nframes * seglen)))


def istft(Zxx: Any, fs: Any = 1.0, window: Any = "hann", nperseg: int | None = None,  # noqa: N803 (scipy's name)
          noverlap: int | None = None, nfft: int | None = None, input_onesided: bool = True, boundary: bool = True,
          time_axis: int = -1, freq_axis: int = -2) -> tuple[Any, Any]:
    """(times, x): the inverse STFT by weighted overlap-add of the inverse FFTs of Zxx's segments."""
    z = enp.asarray(Zxx)
    if z.ndim < 2:
        raise ValueError(f"scipy.signal.istft: Zxx must be at least 2-D, got shape {z.shape}")
    nd = z.ndim
    freq_axis = static_int("scipy.signal.istft", "freq_axis", freq_axis)
    time_axis = static_int("scipy.signal.istft", "time_axis", time_axis)
    if not (-nd <= freq_axis < nd and -nd <= time_axis < nd):
        raise ValueError(f"scipy.signal.istft: freq_axis {freq_axis} or time_axis {time_axis} out of bounds for "
                         f"Zxx of shape {z.shape}")
    freq_axis, time_axis = freq_axis % nd, time_axis % nd
    if freq_axis == time_axis:
        raise ValueError("scipy.signal.istft: time_axis and freq_axis must differ")
    z = z.astype(dt.complex_dtype(enp.result_type(z, 0.0)))
    n_default = 2 * (z.shape[freq_axis] - 1) if input_onesided else z.shape[freq_axis]
    nperseg = static_int("scipy.signal.istft", "nperseg", nperseg or n_default)
    if nperseg < 1:
        raise ValueError(f"scipy.signal.istft: nperseg must be a positive integer, got {nperseg}")
    if nfft is None:
        nfft = n_default + (1 if input_onesided and nperseg == n_default + 1 else 0)
    nfft = static_int("scipy.signal.istft", "nfft", nfft)
    if nfft < nperseg:
        raise ValueError(f"scipy.signal.istft: the FFT length ({nfft}) must be at least nperseg ({nperseg})")
    noverlap = static_int("scipy.signal.istft", "noverlap", noverlap or nperseg // 2)
    if noverlap >= nperseg:
        raise ValueError(f"scipy.signal.istft: noverlap ({noverlap}) must be less than nperseg ({nperseg})")
    win, window_name = (None, window) if isinstance(window, (str, tuple)) else (enp.asarray(window), None)
    if win is not None and (win.ndim != 1 or win.shape[0] != nperseg):
        raise ValueError(f"scipy.signal.istft: window must be 1-D of length {nperseg}, got shape {win.shape}")
    return _istft(z, win, fs, window_name, nperseg, noverlap, nfft, input_onesided, boundary, time_axis, freq_axis)


@partial(jit, static_argnums=tuple(range(3, 11)))
def _istft(z: Any, win: Any, fs: Any, window_name: Any, nperseg: int, noverlap: int, nfft: int, input_onesided: bool,
           boundary: bool, time_axis: int, freq_axis: int) -> tuple[Any, Any]:
    nd = z.ndim
    if time_axis != nd - 1 or freq_axis != nd - 2:
        outer = tuple(i for i in range(nd) if i not in (time_axis, freq_axis))
        z = enp.transpose(z, outer + (freq_axis, time_axis))
    inverse = enp.fft.irfft if input_onesided else enp.fft.ifft
    xsubs = inverse(z, n=nfft, axis=-2)[..., :nperseg, :]  # (..., frame length, frames)
    win = _get_window("istft", window_name, nperseg, xsubs.dtype) if win is None else win.astype(xsubs.dtype)
    xsubs = xsubs * win.sum()  # (undoes the 'spectrum' scaling)
    frames = enp.swapaxes(xsubs * win[:, None], -2, -1)
    x = _overlap_and_add(frames, nperseg - noverlap)
    norm = _overlap_and_add(enp.broadcast_to(win * win, (xsubs.shape[-1], nperseg)), nperseg - noverlap)
    if boundary:
        x, norm = x[..., nperseg // 2:-(nperseg // 2)], norm[..., nperseg // 2:-(nperseg // 2)]
    x = x / enp.where(norm > 1e-10, norm, 1.0)
    if x.ndim > 1 and time_axis != nd - 1:
        x = enp.moveaxis(x, -1, time_axis - 1 if freq_axis < time_axis else time_axis)
    time = enp.arange(x.shape[0], dtype=np.dtype(np.finfo(x.dtype).dtype)) / fs
    return time, x

__all__ = ["convolve", "convolve2d", "correlate", "correlate2d", "csd", "detrend", "fftconvolve", "istft", "stft",
           "welch"]
