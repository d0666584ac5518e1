"""Polynomials, 1-D signal functions and window functions of ember.numpy: poly*, convolve, correlate, interp,
gradient, trapezoid, unwrap, bartlett/blackman/hamming/hanning/kaiser. polyfit (by lstsq), roots (the eigenvalues
of the companion matrix) and poly of a matrix (its eigvals) use ember's linear algebra (factorizations)."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as _np

from ember import _prims as lax
from ember._api.jit import jit
from ember._core import Tracer, aval_of
from ember._core import dtypes as dt
from ember._core.checks import normalize_axis, static_int

from ember._numpy.creation import arange, ones
from ember._numpy.cumulative import cumsum
from ember._numpy.factorizations import eigvals, inv, lstsq
from ember._numpy.linalg import dot, outer, vander
from ember._numpy.manipulation import diag
from ember._numpy.mathfuncs import i0
from ember._numpy.promotion import _as_array, _operand_array, _promote, _to_inexact
from ember._numpy.reductions import all as all_, argmin, sum as sum_
from ember._numpy.selection import roll, take, where
from ember._numpy.shape import atleast_1d, concatenate, moveaxis, ndim, ravel, reshape, shape
from ember._numpy.sorting import argsort, searchsorted
from ember._numpy.ufuncs import (absolute, add, cos, divide, equal, greater, less, multiply, negative, remainder, sqrt,
                                 subtract)


_array = _operand_array


def _vector(name: str, a: Any, index: int = 0) -> Any:
    a = _array(name, a, index)
    if ndim(a) > 1:
        raise ValueError(f"{name}: argument {index} must be 1-D, got shape {shape(a)}")
    return ravel(a)


# ---------------------------------------------------------------------------------------------------------------
# Convolution
def _complex_conv(a: Any, v: Any, pad: tuple[int, int]) -> Any:
    """The 1-D correlation of complex a and v from their parts, in one real convolution: a's parts as a batch of
    two, v's as two output features, so that all four products of parts come out together."""
    n, m = shape(a)[0], shape(v)[0]
    lhs = reshape(lax.concatenate([lax.real(a), lax.imag(a)], 0), (2, 1, n))
    rhs = reshape(lax.concatenate([lax.real(v), lax.imag(v)], 0), (2, 1, m))
    out = lax.conv_general_dilated(lhs, rhs, (1,), [pad])  # out[b, o]: part b of a with part o of v
    rr, ri, ir, ii = (reshape(lax.slice(out, (b, o, 0), (b + 1, o + 1, shape(out)[2])), (-1,))
                      for b in (0, 1) for o in (0, 1))
    return lax.complex(lax.sub(rr, ii), lax.add(ri, ir))


def _convolve(name: str, a: Any, v: Any, mode: str, flip: bool, precision: Any,
              preferred_element_type: Any) -> Any:
    a, v = _promote(name, _vector(name, a), _vector(name, v, 1), inexact=True)
    if shape(a)[0] == 0 or shape(v)[0] == 0:
        raise ValueError(f"{name}: inputs cannot be empty, got shapes {shape(a)} and {shape(v)}")
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"{name}: mode must be 'full', 'same' or 'valid', got {mode!r}")
    d = aval_of(a).dtype
    if d == _np.dtype(bool):
        a, v = (lax.convert_element_type(x, dt.default_int_dtype()) for x in (a, v))
    if not flip and dt.is_complex(d):  # numpy's correlate conjugates v: sum_n a[n + k] * conj(v[n])
        v = lax.conj(v)
    swapped = False
    if shape(v)[0] > shape(a)[0]:
        a, v = v, a
        swapped = True
    n, m = shape(a)[0], shape(v)[0]
    if flip:
        v = lax.rev(v, (0,))
    if mode == "full":
        pad = (m - 1, m - 1)
    elif mode == "same":
        pad = (m // 2, m - 1 - m // 2)
    else:
        pad = (0, 0)
    if dt.is_complex(d):
        out = _complex_conv(a, v, pad)
    else:
        out = reshape(lax.conv_general_dilated(reshape(a, (1, 1, n)), reshape(v, (1, 1, m)), (1,), [pad]), (-1,))
    if not flip and swapped:  # correlate(a, v) with len(v) > len(a): numpy's result reversed
        out = lax.rev(out, (0,))
    if preferred_element_type is not None:
        out = lax.convert_element_type(out, dt.check_user_dtype(preferred_element_type, "convolve"))
    return out


def convolve(a: Any, v: Any, mode: str = "full", *, precision: Any = None,
             preferred_element_type: Any = None) -> Any:
    """The discrete linear convolution of two 1-D arrays (modes 'full', 'same', 'valid', as numpy)."""
    return _convolve("convolve", a, v, mode, True, precision, preferred_element_type)


def correlate(a: Any, v: Any, mode: str = "valid", *, precision: Any = None,
              preferred_element_type: Any = None) -> Any:
    """The cross-correlation of two 1-D arrays (numpy's correlate: sum_n a[n + k] * v[n])."""
    return _convolve("correlate", a, v, mode, False, precision, preferred_element_type)


# ---------------------------------------------------------------------------------------------------------------
# Polynomials (coefficients highest power first, as numpy's poly1d functions)
def polyval(p: Any, x: Any, *, unroll: int = 16) -> Any:
    """p[0] * x**(n-1) + ... + p[n-1], by Horner's rule."""
    p = _vector("polyval", p)
    p, x = _promote("polyval", p, _array("polyval", x, 1))
    y = lax.full(shape(x), 0, aval_of(x).dtype)
    y = lax.convert_element_type(y, aval_of(x).dtype, aval_of(x).weak_type)
    for i in range(shape(p)[0]):
        y = add(multiply(y, x), p[i])
    return y


def polyadd(a1: Any, a2: Any) -> Any:
    a, b = _promote("polyadd", _vector("polyadd", a1), _vector("polyadd", a2, 1))
    n = max(shape(a)[0], shape(b)[0])
    a, b = (lax.pad(x, lax.full((), 0, aval_of(x).dtype), [(n - shape(x)[0], 0, 0)]) for x in (a, b))
    return add(a, b)


def polysub(a1: Any, a2: Any) -> Any:
    a, b = _promote("polysub", _vector("polysub", a1), _vector("polysub", a2, 1))
    return polyadd(a, multiply(b, -1))


def polymul(a1: Any, a2: Any, *, trim_leading_zeros: bool = False) -> Any:
    """The product of two polynomials (their coefficients convolved)."""
    a, b = _promote("polymul", _vector("polymul", a1), _vector("polymul", a2, 1))
    if shape(a)[0] == 0 or shape(b)[0] == 0:  # an empty polynomial is 0 (numpy's poly1d, jax.numpy)
        return lax.full((max(shape(a)[0], 1) + max(shape(b)[0], 1) - 1,), 0, aval_of(a).dtype)
    return convolve(a, b)


def polydiv(u: Any, v: Any, *, trim_leading_zeros: bool = False) -> tuple[Any, Any]:
    """(quotient, remainder) of polynomial division (long division over the static lengths)."""
    u, v = _promote("polydiv", _to_inexact(_vector("polydiv", u)), _to_inexact(_vector("polydiv", v, 1)))
    u, v = _as_array(u), _as_array(v)
    m, n = shape(u)[0] - 1, shape(v)[0] - 1
    if n < 0:
        raise ValueError("polydiv: the divisor v is empty (the zero polynomial)")
    scale = divide(1.0, v[0])
    q = lax.full((max(m - n + 1, 1),), 0, aval_of(u).dtype)
    r = u
    for k in range(0, m - n + 1):
        d = multiply(scale, r[k])
        q = q.at[k].set(d)
        r = r.at[k:k + n + 1].add(multiply(-d, v))
    if m >= n:  # the quotient's positions are zero by construction (as jax.numpy, r keeps u's length)
        r = r.at[:m - n + 1].set(0)
    if trim_leading_zeros:
        if isinstance(r, Tracer):
            raise ValueError("polydiv: trim_leading_zeros=True needs concrete values (not under jit)")
        nz = _np.flatnonzero(_np.asarray(r))
        r = r[nz[0]:] if nz.size else r[-1:]
    return q, r


def polyder(p: Any, m: int = 1) -> Any:
    """The m-th derivative's coefficients."""
    p = _vector("polyder", p)
    m = static_int("polyder", "m", m)
    if m < 0:
        raise ValueError(f"polyder: the order m must be non-negative, got {m}")
    for _ in range(m):
        n = shape(p)[0] - 1
        if n <= 0:
            return lax.full((0,) if n < 0 else (1,), 0, aval_of(p).dtype)[: max(n, 0)] if n < 0 else \
                lax.full((0,), 0, aval_of(p).dtype)
        powers = lax.convert_element_type(lax.rev(lax.add(lax.iota(_np.dtype(_np.int32), n),
                                                          lax.full((n,), 1, _np.dtype(_np.int32))), (0,)),
                                          aval_of(p).dtype)
        p = multiply(p[:-1], powers)
    return p


def polyint(p: Any, m: int = 1, k: Any = None) -> Any:
    """The m-th antiderivative's coefficients, with integration constants k (default 0)."""
    p = _to_inexact(_vector("polyint", p))
    m = static_int("polyint", "m", m)
    if m < 0:
        raise ValueError(f"polyint: the order m must be non-negative, got {m}")
    ks = [0.0] * m if k is None else list(_np.atleast_1d(_np.asarray(k))) if not isinstance(k, Tracer) else [k]
    if len(ks) == 1 and m > 1:
        ks = ks * m
    if len(ks) != m:
        raise ValueError(f"polyint: k must have {m} integration constants, got {len(ks)}")
    for i in range(m):
        n = shape(p)[0]
        divisors = lax.convert_element_type(lax.rev(lax.add(lax.iota(_np.dtype(_np.int32), n),
                                                            lax.full((n,), 1, _np.dtype(_np.int32))), (0,)),
                                            aval_of(p).dtype)
        const = reshape(lax.convert_element_type(_array("polyint", ks[i]), aval_of(p).dtype), (1,))
        p = concatenate([divide(p, divisors), const])
    return p


def poly(seq_of_zeros: Any) -> Any:
    """The coefficients of the monic polynomial with these roots (1-D), or of a square matrix's characteristic
    polynomial (the roots its eigvals, so complex, as jax.numpy)."""
    z = _to_inexact(atleast_1d(_array("poly", seq_of_zeros)))
    square = ndim(z) == 2 and shape(z)[0] == shape(z)[1] and shape(z)[0] != 0
    if ndim(z) != 1 and not square:
        raise ValueError(f"poly: seq_of_zeros must be 1-D or a non-empty square matrix, got shape {shape(z)}")
    return _poly(z)


@jit
def _poly(z: Any) -> Any:
    if ndim(z) == 2:
        z = eigvals(z)
    if shape(z)[0] == 0:  # no roots: the constant 1, a scalar (numpy, jax.numpy)
        return lax.full((), 1, aval_of(z).dtype)
    a = lax.full((1,), 1, aval_of(z).dtype)
    for i in range(shape(z)[0]):
        a = convolve(a, concatenate([lax.full((1,), 1, aval_of(z).dtype), reshape(lax.neg(z[i]), (1,))]))
    return a


def _companion_roots(p: Any) -> Any:
    """The roots of p (p[0] != 0): the eigenvalues of its companion matrix (complex)."""
    n = shape(p)[0]
    if n < 2:
        return lax.full((0,), 0, dt.complex_dtype(aval_of(p).dtype))
    a = diag(ones((n - 2,), aval_of(p).dtype), -1)
    a = a.at[0, :].set(negative(divide(p[1:], p[0])))
    return eigvals(a)


@jit
def _roots_of_prefix(p: Any, leading: Any) -> Any:
    """The roots of p, whose first `leading` (traced) coefficients are zero: the companion matrix's eigenvalues
    of p rolled to start at its first nonzero coefficient, the extra roots NaN, sorted last."""
    n = shape(p)[0]
    p = where(equal(leading, n), 1.0, p)  # all zero: any roots, made NaN below
    found = _companion_roots(roll(p, negative(leading)))
    _, found = lax.sort_key_val(equal(found, 0), found)  # the zero roots the roll made go last
    nan = lax.full((), complex(_np.nan, _np.nan), aval_of(found).dtype)
    return where(less(arange(n - 1), subtract(n - 1, leading)), found, nan)


_roots_stripped = jit(lambda p, leading: _companion_roots(p[leading:]), static_argnums=(1,))


def roots(p: Any, *, strip_zeros: bool = True) -> Any:
    """The (complex) roots of the polynomial with coefficients p, highest power first, as the eigenvalues of its
    companion matrix. Leading zeros are stripped (strip_zeros, needs concrete p: not under jit, grad or vmap), or
    with strip_zeros=False give NaN roots, sorted last (as jax.numpy)."""
    p = _to_inexact(atleast_1d(_array("roots", p)))
    if ndim(p) != 1:
        raise ValueError(f"roots: p must be 1-D, got shape {shape(p)}")
    n = shape(p)[0]
    if n < 2:
        return lax.full((0,), 0, dt.complex_dtype(aval_of(p).dtype))
    if not strip_zeros:
        is_zero = equal(p, 0)
        return _roots_of_prefix(p, where(all_(is_zero), n, argmin(is_zero)))
    if isinstance(p, Tracer):
        raise ValueError("roots: strip_zeros=True needs concrete coefficients (not under jit, grad or vmap); pass "
                         "strip_zeros=False, which gives NaN roots for leading zeros")
    nonzero = _np.flatnonzero(_np.asarray(p))
    return _roots_stripped(p, int(nonzero[0]) if nonzero.size else n)


def polyfit(x: Any, y: Any, deg: int, rcond: float | None = None, full: bool = False, w: Any = None,
            cov: bool | str = False) -> Any:
    """The least-squares polynomial of degree deg through (x, y) (y 1-D, or 2-D for one fit per column), with
    weights w; full adds (residuals, rank, singular values, rcond); cov adds the coefficients' covariance
    (cov='unscaled' leaves out the residual variance), as jax.numpy."""
    x, y = _promote("polyfit", _to_inexact(_array("polyfit", x)), _to_inexact(_array("polyfit", y, 1)))
    deg = static_int("polyfit", "deg", deg)
    if deg < 0:
        raise ValueError(f"polyfit: deg must be >= 0, got {deg}")
    if ndim(x) != 1 or shape(x)[0] == 0:
        raise TypeError(f"polyfit: x must be a non-empty 1-D array, got shape {shape(x)}")
    if ndim(y) not in (1, 2) or shape(y)[0] != shape(x)[0]:
        raise TypeError(f"polyfit: y must be 1-D or 2-D with x's length {shape(x)[0]}, got shape {shape(y)}")
    if w is not None:
        w = _to_inexact(_array("polyfit", w, 5))
        if ndim(w) != 1 or shape(w)[0] != shape(y)[0]:
            raise TypeError(f"polyfit: w must be 1-D with y's length {shape(y)[0]}, got shape {shape(w)}")
    if cov and cov != "unscaled" and not full and shape(x)[0] <= deg + 1:
        raise ValueError(f"polyfit: scaling the covariance needs more data points ({shape(x)[0]}) than the order "
                         f"{deg + 1}")
    rcond = shape(x)[0] * float(dt.finfo(aval_of(x).dtype).eps) if rcond is None else float(rcond)
    return _polyfit(x, y, w, deg, rcond, full, cov)


@jit(static_argnums=(3, 4, 5, 6))
def _polyfit(x: Any, y: Any, w: Any, deg: int, rcond: float, full: bool, cov: bool | str) -> Any:
    order = deg + 1
    lhs, rhs = vander(x, order), y
    if w is not None:
        lhs = multiply(lhs, reshape(w, (-1, 1)))
        rhs = multiply(rhs, reshape(w, (-1, 1)) if ndim(rhs) == 2 else w)
    scale = sqrt(sum_(multiply(lhs, lhs), axis=0))  # unit columns: a better conditioned least-squares problem
    lhs = divide(lhs, scale)
    c, resids, rank, s = lstsq(lhs, rhs, rcond)
    c = divide(c, reshape(scale, (-1, 1)) if ndim(c) == 2 else scale)
    if full:
        return c, resids, rank, s, lax.full((), rcond, aval_of(x).dtype)
    if not cov:
        return c
    vbase = divide(inv(dot(lax.transpose(lhs, (1, 0)), lhs)), outer(scale, scale))
    if cov == "unscaled":
        fac = lax.full((1,), 1, aval_of(vbase).dtype)
    else:
        fac = atleast_1d(divide(resids, shape(x)[0] - order))
    if ndim(y) == 1:
        return c, multiply(vbase, reshape(fac, (1, -1)))
    return c, multiply(reshape(vbase, (*shape(vbase), 1)), reshape(fac, (1, 1, -1)))


# ---------------------------------------------------------------------------------------------------------------
# Interpolation, differences, integration
def interp(x: Any, xp: Any, fp: Any, left: Any = None, right: Any = None, period: Any = None) -> Any:
    """numpy's 1-D piecewise linear interpolation (xp increasing); left/right for x beyond the ends; period for
    periodic xp."""
    x = _to_inexact(_array("interp", x))
    xp, fp = _vector("interp", xp, 1), _vector("interp", fp, 2)
    if shape(xp)[0] != shape(fp)[0] or shape(xp)[0] == 0:
        raise ValueError(f"interp: xp and fp must be non-empty and of one length, got {shape(xp)} and {shape(fp)}")
    x, xp, fp = _promote("interp", x, _to_inexact(xp), _to_inexact(fp))
    if period is not None:
        if left is not None or right is not None:
            raise ValueError("interp: left and right cannot be given with period")
        period = lax.abs(lax.convert_element_type(_array("interp", period), aval_of(x).dtype))
        x = remainder(x, period)
        xp = remainder(xp, period)
        order = argsort(xp)
        xp, fp = take(xp, order), take(fp, order)
        xp = concatenate([subtract(xp[-1:], period), xp, add(xp[0:1], period)])
        fp = concatenate([fp[-1:], fp, fp[0:1]])
    n = shape(xp)[0]
    i = searchsorted(xp, x, side="right")
    i = lax.clamp(lax.full_like(i, 1), i, lax.full_like(i, max(n - 1, 1)))
    x0, x1 = take(xp, i - 1), take(xp, i) if n > 1 else take(xp, i - 1)
    f0, f1 = take(fp, i - 1), take(fp, i) if n > 1 else take(fp, i - 1)
    dx = subtract(x1, x0)
    t = divide(subtract(x, x0), where(lax.eq(dx, lax.full_like(dx, 0)), 1.0, dx))
    out = add(f0, multiply(t, subtract(f1, f0)))
    out = where(lax.eq(dx, lax.full_like(dx, 0)), f0, out)
    if period is None:
        lo = fp[0] if left is None else left
        hi = fp[-1] if right is None else right
        out = where(lax.lt(x, xp[0]), lo, out)
        out = where(lax.gt(x, xp[-1]), hi, out)
    return out


def trapezoid(y: Any, x: Any = None, dx: Any = 1.0, axis: int = -1) -> Any:
    """The integral of y (samples at x, or spacing dx) along axis by the trapezoidal rule."""
    y = _to_inexact(_array("trapezoid", y))
    axis = normalize_axis("trapezoid", axis, ndim(y))
    y = moveaxis(y, axis, -1)
    if x is None:
        widths = dx
    else:
        x = _to_inexact(_array("trapezoid", x, 1))
        if ndim(x) == 1:
            widths = subtract(x[1:], x[:-1])
        else:
            x = moveaxis(x, axis, -1)
            widths = subtract(x[..., 1:], x[..., :-1])
    avg = multiply(add(y[..., 1:], y[..., :-1]), 0.5)
    return sum_(multiply(avg, widths), axis=-1)


def gradient(f: Any, *varargs: Any, axis: int | Sequence[int] | None = None, edge_order: int | None = None
             ) -> Any:
    """numpy's gradient: central differences inside, one-sided (first order) at the edges, along each axis
    (scalar spacings or 1-D coordinate arrays per axis)."""
    f = _to_inexact(_array("gradient", f))
    if edge_order not in (None, 1):
        raise NotImplementedError("gradient: only edge_order=1 is supported (as jax.numpy)")
    nd = ndim(f)
    axes = list(range(nd)) if axis is None else [normalize_axis("gradient", a, nd) for a in
                                                 ((axis,) if isinstance(axis, int) else axis)]
    if len(varargs) == 0:
        spacings: list[Any] = [1.0] * len(axes)
    elif len(varargs) == 1 and _np.ndim(varargs[0]) == 0:
        spacings = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise ValueError(f"gradient: {len(varargs)} spacings for {len(axes)} axes")
    out = []
    for ax, h in zip(axes, spacings):
        n = shape(f)[ax]
        if n < 2:
            raise ValueError(f"gradient: axis {ax} needs at least 2 elements, got shape {shape(f)}")
        g = moveaxis(f, ax, -1)
        if _np.ndim(h) == 0 and not (hasattr(h, "shape") and ndim(h) == 1):
            inner = divide(subtract(g[..., 2:], g[..., :-2]), multiply(h, 2.0))
            first = divide(subtract(g[..., 1:2], g[..., 0:1]), h)
            last = divide(subtract(g[..., -1:], g[..., -2:-1]), h)
        else:
            xs = _to_inexact(_vector("gradient", h))
            if shape(xs)[0] != n:
                raise ValueError(f"gradient: coordinates of length {shape(xs)[0]} for an axis of length {n}")
            dx = subtract(xs[1:], xs[:-1])
            h1, h2 = dx[:-1], dx[1:]
            inner = divide(add(subtract(multiply(multiply(h1, h1), g[..., 2:]), multiply(multiply(h2, h2),
                                                                                         g[..., :-2])),
                               multiply(subtract(multiply(h2, h2), multiply(h1, h1)), g[..., 1:-1])),
                           multiply(multiply(h1, h2), add(h1, h2)))
            first = divide(subtract(g[..., 1:2], g[..., 0:1]), dx[0:1])
            last = divide(subtract(g[..., -1:], g[..., -2:-1]), dx[-1:])
        out.append(moveaxis(concatenate([first, inner, last], axis=-1), -1, ax))
    return out[0] if len(out) == 1 else out


def unwrap(p: Any, discont: Any = None, axis: int = -1, period: Any = 2 * math.pi) -> Any:
    """p with jumps larger than discont (default period / 2) removed by adding multiples of period."""
    p = _to_inexact(_array("unwrap", p))
    axis = normalize_axis("unwrap", axis, ndim(p))
    x = moveaxis(p, axis, -1)
    if shape(x)[-1] < 2:
        return p
    half = divide(period, 2.0)
    discont = half if discont is None else discont
    dd = subtract(x[..., 1:], x[..., :-1])
    ddmod = subtract(remainder(add(dd, half), period), half)
    ddmod = where(lax.bitwise_and(equal(ddmod, negative(half)), greater(dd, 0)), half, ddmod)
    correction = subtract(ddmod, dd)
    correction = where(less(absolute(dd), discont), 0.0, correction)
    fixed = concatenate([x[..., :1], add(x[..., 1:], cumsum(correction, axis=-1))], axis=-1)
    return moveaxis(fixed, -1, axis)


# ---------------------------------------------------------------------------------------------------------------
# Windows
def _window(name: str, M: int) -> tuple[int, Any]:  # noqa: N803
    M = static_int(name, "M", M)
    return M, dt.default_float_dtype()


def _ramp(M: int, d: Any) -> Any:  # noqa: N803
    return lax.iota(d, M)


def bartlett(M: int) -> Any:  # noqa: N803
    """The triangular window of M points."""
    M, d = _window("bartlett", M)
    if M <= 1:
        return lax.full((max(M, 0),), 1, d)
    n = _ramp(M, d)
    return subtract(1.0, lax.abs(divide(subtract(multiply(n, 2.0), M - 1), M - 1)))


def _cosine_window(name: str, M: int, coefficients: Sequence[float]) -> Any:  # noqa: N803
    M, d = _window(name, M)
    if M <= 1:
        return lax.full((max(M, 0),), 1, d)
    n = _ramp(M, d)
    out = lax.full((M,), coefficients[0], d)
    for k, c in enumerate(coefficients[1:], start=1):
        out = add(out, multiply(c * (-1) ** k, cos(multiply(n, 2.0 * math.pi * k / (M - 1)))))
    return out


def blackman(M: int) -> Any:  # noqa: N803
    return _cosine_window("blackman", M, (0.42, 0.5, 0.08))


def hamming(M: int) -> Any:  # noqa: N803
    return _cosine_window("hamming", M, (0.54, 0.46))


def hanning(M: int) -> Any:  # noqa: N803
    return _cosine_window("hanning", M, (0.5, 0.5))


def kaiser(M: int, beta: Any) -> Any:  # noqa: N803
    """The Kaiser window: i0(beta * sqrt(1 - (2n/(M-1) - 1)**2)) / i0(beta)."""
    M, d = _window("kaiser", M)
    if M <= 1:
        return lax.full((max(M, 0),), 1, d)
    n = _ramp(M, d)
    beta = lax.convert_element_type(_array("kaiser", beta, 1), d)
    r = subtract(divide(multiply(n, 2.0), M - 1), 1.0)
    return divide(i0(multiply(beta, sqrt(subtract(1.0, multiply(r, r))))), i0(beta))


__all__ = ["convolve", "correlate", "polyval", "polyadd", "polysub", "polymul", "polydiv", "polyder", "polyint",
           "poly", "polyfit", "roots", "interp", "trapezoid", "gradient", "unwrap", "bartlett", "blackman", "hamming",
           "hanning", "kaiser"]
