"""More kernels behind ember.scipy.special (the error-function family, Fresnel and sine/cosine integrals, Bessel J
of integer order, Owen's T, the Gauss hypergeometric function, spherical harmonics), with the same contract as
ember.scipy._special_impl: functions of arrays of one dtype (float32 or float64, or the matching complex dtype)
and one shape, written with ember.numpy and ember.lax, custom derivatives where a function is computed piecewise
or by an iteration.

Algorithms (all written for ember; no code is taken from JAX or SciPy):
  wofz        the Faddeeva function w(z) = exp(-z^2) erfc(-iz). In the upper half-plane Weideman's rational
              approximation (SIAM J. Numer. Anal. 31, 1994): w(z) = 2 p(Z) / (L - iz)^2 + 1 / (sqrt(pi) (L - iz)),
              Z = (L + iz) / (L - iz), whose N polynomial coefficients are the Fourier coefficients of
              exp(-t^2) (L^2 + t^2) at t = L tan(theta / 2) (computed here with numpy's FFT at import); for |z| >= 8
              Laplace's continued fraction w(z) = (i / sqrt(pi)) / (z - (1/2) / (z - 1 / (z - (3/2) / ...))),
              which keeps the relative error small where w decays like 1/z; in the lower half-plane
              w(z) = 2 exp(-z^2) - w(-z). Measured against scipy: 3e-14 (float64, N = 40), 1e-6 (float32, N = 20)
  erfcx,      erfcx(x) = w(ix), dawsn(x) = sqrt(pi)/2 Im w(x) for real x; Dawson's integral by its Maclaurin
  dawsn       series sum_k (-2)^k x^(2k+1) / (2k+1)!! below 0.2, where w's absolute error would be a large
              relative one
  fresnel     the Maclaurin series of S and C for |x| <= 1.5; beyond, C + iS = (1 + i)/2 (1 - exp(i pi x^2 / 2)
              w((1 + i) sqrt(pi) x / 2)), with x^2 split exactly into two floats (Dekker) so that the phase is
              reduced modulo 4 without rounding error
  sici        the Maclaurin series of Si and Ci - gamma - log x for |x| <= 4; beyond, E1(ix) = -Ci(x) + i (Si(x)
              - pi/2) from the continued fraction E1(z) = e^-z / (z + 1 - 1 / (z + 3 - 4 / (z + 5 - ...))),
              evaluated from a fixed depth (40 in float64, 20 in float32)
  bessel_jn   J_0 .. J_v: the power series' first two terms for |z| < 1e-8 (float64; 1e-4 in float32); Miller's
              backward recurrence J_(k-1) = (2k / z) J_k - J_(k+1) normalized by J_0 + 2 sum J_2k = 1, from a start
              order chosen so that J_start(z) is far below rounding, while |z| <= max(25, v) (12 in float32);
              beyond, Hankel's asymptotic expansion of J_0 and J_1 and the forward recurrence (stable for n < |z|)
  owens_t     T(h, a) = exp(-h^2/2) / (2 pi) int_0^a exp(-h^2 x^2 / 2) / (1 + x^2) dx for |a| <= 1 by 24-point
              Gauss-Legendre quadrature on [0, min(a, 8.5 / h)] (the integrand is below float64's rounding beyond),
              and for |a| > 1 the identity T(h, a) = (Q(h) + Q(ah)) / 2 - Q(h) Q(ah) - T(ah, 1/a), Q = 1 - ndtr
  hyp2f1      Gauss's series, summed until it converges, after Pfaff's transformation x -> x / (x - 1) for x < 0
              and Euler's (1 - x)^(c - a - b) 2F1(c - a, c - b; c; x) where c - a - b < 0; the terminating
              polynomials for a or b a non-positive integer; Gauss's sum at x = 1
"""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np

from ember import lax
from ember import numpy as enp
from ember._control.custom import pure_custom_jvp
from ember.scipy._special_impl import _const, _is64, ndtr
from ember.scipy._special_impl import gamma as _impl_gamma

_SQRT_PI = math.sqrt(math.pi)
_EULER_GAMMA = 0.57721566490153286061


def _complex(re: Any, im: Any) -> Any:
    return lax.complex(re, im)


def _real_dtype(z: Any) -> Any:
    return np.float64 if z.dtype == np.complex128 else np.float32


# ---------------------------------------------------------------------------------------------------------------
# The Faddeeva function and what derives from it: wofz, erfcx, dawsn
@lru_cache(maxsize=None)
def _weideman(n: int) -> tuple[float, tuple[float, ...]]:
    """Weideman's L = sqrt(N / sqrt(2)) and the N coefficients a_N .. a_1 (highest power first) of his rational
    approximation: the discrete Fourier coefficients of f(theta) = exp(-t^2) (L^2 + t^2), t = L tan(theta / 2),
    sampled at theta = k pi / M for |k| < M = 2N (f = 0 at theta = pi)."""
    m = 2 * n
    scale = math.sqrt(n / math.sqrt(2.0))
    k = np.arange(-m + 1, m)
    t = scale * np.tan(k * np.pi / (2 * m))
    samples = np.concatenate([[0.0], np.exp(-t * t) * (scale * scale + t * t)])
    spectrum = np.real(np.fft.fft(np.fft.fftshift(samples))) / (2 * m)
    return scale, tuple(float(c) for c in spectrum[1:n + 1][::-1])


def _wofz_upper(z: Any) -> Any:
    """w(z) for Im z >= 0 and finite z."""
    f64 = z.dtype == np.complex128
    scale, coefficients = _weideman(40 if f64 else 20)
    re, im = enp.real(z), enp.imag(z)
    iz = _complex(-im, re)
    denominator = scale - iz
    big_z = (scale + iz) / denominator
    acc = enp.full_like(z, coefficients[0])
    for c in coefficients[1:]:
        acc = acc * big_z + c
    near = 2.0 * acc / (denominator * denominator) + (1.0 / _SQRT_PI) / denominator
    # Laplace's continued fraction for |z| >= 8, from a fixed depth
    far_region = enp.abs(z) >= 8.0
    zf = enp.where(far_region, z, enp.full_like(z, 10j))
    f = zf
    for k in range(20 if f64 else 10, 0, -1):
        f = zf - (0.5 * k) / f
    far = _complex(enp.zeros_like(re), enp.full_like(re, 1.0 / _SQRT_PI)) / f
    return enp.where(far_region, far, near)


def _exp_minus_square(z: Any) -> Any:
    """exp(-z^2) from its real and imaginary parts (an exactly real result stays real where it overflows)."""
    x, y = enp.real(z), enp.imag(z)
    magnitude = enp.exp((y - x) * (y + x))
    phase = -2.0 * x * y
    return _complex(magnitude * enp.cos(phase), enp.where(phase == 0, enp.zeros_like(x), magnitude * enp.sin(phase)))


def _wofz_value(z: Any) -> Any:
    x, y = enp.real(z), enp.imag(z)
    finite = enp.isfinite(x) & enp.isfinite(y)
    upper = y >= 0
    zs = enp.where(finite, z, enp.zeros_like(z))
    zu = enp.where(upper, zs, -zs)
    w = _wofz_upper(zu)
    e = _exp_minus_square(zs)
    # (componentwise: a complex product with 2 would turn an infinite part times 0 into NaN)
    out = enp.where(upper, w, _complex(2.0 * enp.real(e) - enp.real(w), 2.0 * enp.imag(e) - enp.imag(w)))
    # infinite z: 0 in the closed upper half-plane and on the real axis; exp(-z^2) (inf) below it (as SciPy)
    zero = enp.zeros_like(z)
    below = _complex(enp.full_like(x, np.inf), enp.zeros_like(x))
    infinite = (enp.isinf(x) | enp.isinf(y)) & ~(enp.isnan(x) | enp.isnan(y))
    out = enp.where(infinite, enp.where((y >= 0) | enp.isinf(x) & ~enp.isinf(y), zero, below), out)
    nan = _complex(enp.full_like(x, np.nan), enp.full_like(x, np.nan))
    return enp.where(enp.isnan(x) | enp.isnan(y), nan, out)


@pure_custom_jvp
def wofz(z: Any) -> Any:
    return _wofz_value(z)


@wofz.defjvp
def _wofz_jvp(primals: Any, tangents: Any) -> Any:
    (z,), (t,) = primals, tangents
    w = wofz(z)
    two_over_sqrt_pi = _complex(enp.zeros_like(enp.real(z)), enp.full_like(enp.real(z), 2.0 / _SQRT_PI))
    return w, t * (two_over_sqrt_pi - 2.0 * z * w)


def _cx(x: Any) -> Any:
    return _complex(x, enp.zeros_like(x))


def _erfcx_value(x: Any) -> Any:
    out = enp.real(_wofz_value(_complex(enp.zeros_like(x), x)))
    return enp.where(x == -np.inf, _const(x, np.inf), out)


@pure_custom_jvp
def erfcx(x: Any) -> Any:
    return _erfcx_value(x)


@erfcx.defjvp
def _erfcx_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    out = erfcx(x)
    slope = enp.where(enp.isinf(x), enp.zeros_like(x), 2.0 * x * out - 2.0 / _SQRT_PI)
    return out, t * slope


def _dawsn_value(x: Any) -> Any:
    small = enp.abs(x) < 0.2
    xs = enp.where(small, x, 0.1)
    x2 = xs * xs
    term, total = xs, xs
    for k in range(1, 12 if _is64(x) else 6):
        term = term * (-2.0 * x2) / (2 * k + 1)
        total = total + term
    from_w = (0.5 * _SQRT_PI) * enp.imag(_wofz_value(_cx(enp.where(small, 1.0, x))))
    return enp.where(small, total, from_w)


@pure_custom_jvp
def dawsn(x: Any) -> Any:
    return _dawsn_value(x)


@dawsn.defjvp
def _dawsn_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    out = dawsn(x)
    return out, t * enp.where(enp.isinf(x), enp.zeros_like(x), 1.0 - 2.0 * x * out)


# ---------------------------------------------------------------------------------------------------------------
# Fresnel integrals S(x) = int_0^x sin(pi t^2 / 2) dt, C(x) = int_0^x cos(pi t^2 / 2) dt
def _square_mod_4(x: Any) -> Any:
    """x^2 modulo 4 (x >= 0), with x^2 = hi + lo split exactly (Veltkamp/Dekker) so that the reduction, done on
    each exact part, loses nothing; 0 where x^2 is a multiple of 4 for every float that large."""
    f64 = _is64(x)
    limit = 2.0 ** 53 if f64 else 2.0 ** 24           # beyond: x is an even integer, x^2 a multiple of 4
    xs = enp.where(x < limit, x, 0.0)
    split = xs * (2.0 ** 27 + 1.0 if f64 else 2.0 ** 12 + 1.0)
    high = split - (split - xs)
    low = xs - high
    # x^2 = high^2 + 2 high low + low^2, each product exact
    r = enp.fmod(high * high, 4.0) + enp.fmod(2.0 * high * low, 4.0) + low * low
    return enp.fmod(r, 4.0)


def _fresnel_value(x: Any) -> tuple[Any, Any]:
    f64 = _is64(x)
    ax = enp.abs(x)
    small = ax <= 1.5
    # Maclaurin: S = sum_k (-1)^k (pi/2)^(2k+1) x^(4k+3) / ((2k+1)! (4k+3)),
    #            C = sum_k (-1)^k (pi/2)^(2k) x^(4k+1) / ((2k)! (4k+1))
    xs = enp.where(small, ax, 1.0)
    u = (0.5 * math.pi) * xs * xs
    term = xs                                          # (pi/2)^n x^(2n+1) / n!, n = 0, 1, 2, ...
    s_sum, c_sum = enp.zeros_like(x), enp.zeros_like(x)
    for n in range(34 if f64 else 22):               # the last term (3.54^n / n!) below rounding
        sign = -1.0 if (n // 2) % 2 else 1.0
        if n % 2:
            s_sum = s_sum + sign * term / (2 * n + 1)
        else:
            c_sum = c_sum + sign * term / (2 * n + 1)
        term = term * u / (n + 1)
    # beyond: C + iS = (1 + i)/2 (1 - exp(i pi x^2 / 2) w((1 + i) sqrt(pi) x / 2))
    large = ~small & (ax < np.inf)
    xl = enp.where(large, ax, 2.0)
    phase = (0.5 * math.pi) * _square_mod_4(xl)
    e = _complex(enp.cos(phase), enp.sin(phase))
    arg = (0.5 * _SQRT_PI) * xl
    g = e * _wofz_value(_complex(arg, arg))
    gr, gi = enp.real(g), enp.imag(g)
    # (1 + i)/2 (1 - gr - i gi) = ((1 - gr + gi) + i (1 - gr - gi)) / 2
    c_large = 0.5 * (1.0 - gr + gi)
    s_large = 0.5 * (1.0 - gr - gi)
    s = enp.where(small, s_sum, enp.where(large, s_large, _const(x, 0.5)))
    c = enp.where(small, c_sum, enp.where(large, c_large, _const(x, 0.5)))
    negative = x < 0
    s, c = enp.where(negative, -s, s), enp.where(negative, -c, c)
    nan = enp.isnan(x)
    return enp.where(nan, x, s), enp.where(nan, x, c)


@pure_custom_jvp
def fresnel(x: Any) -> tuple[Any, Any]:
    return _fresnel_value(x)


@fresnel.defjvp
def _fresnel_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    s, c = fresnel(x)
    phase = (0.5 * math.pi) * _square_mod_4(enp.abs(x))
    return (s, c), (t * enp.sin(phase), t * enp.cos(phase))


# ---------------------------------------------------------------------------------------------------------------
# Sine and cosine integrals Si(x) = int_0^x sin t / t dt, Ci(x) = gamma + log x + int_0^x (cos t - 1) / t dt
def _sici_value(x: Any) -> tuple[Any, Any]:
    f64 = _is64(x)
    ax = enp.abs(x)
    small = ax <= 4.0
    xs = enp.where(small, ax, 1.0)
    term = xs                                          # x^(2k+1) / (2k+1)!
    si_sum, ci_sum = enp.zeros_like(x), enp.zeros_like(x)
    for k in range(16 if f64 else 10):
        sign = -1.0 if k % 2 else 1.0
        si_sum = si_sum + sign * term / (2 * k + 1)
        term = term * xs / (2 * k + 2)                 # x^(2k+2) / (2k+2)!
        ci_sum = ci_sum - sign * term / (2 * k + 2)
        term = term * xs / (2 * k + 3)
    ci_small = _EULER_GAMMA + enp.log(enp.where(xs > 0, xs, 1.0)) + ci_sum
    # |x| > 4: E1(ix) = exp(-ix) / (ix + 1 - 1 / (ix + 3 - 4 / (ix + 5 - ...)))
    large = ~small & (ax < np.inf)
    xl = enp.where(large, ax, 5.0)
    z = _complex(enp.zeros_like(x), xl)
    depth = 40 if f64 else 20
    f = z + float(2 * depth + 1)
    for j in range(depth, 0, -1):
        f = z + float(2 * j - 1) - float(j * j) / f
    e1 = _complex(enp.cos(xl), -enp.sin(xl)) / f
    si_large = 0.5 * math.pi + enp.imag(e1)
    ci_large = -enp.real(e1)
    si = enp.where(small, si_sum, enp.where(large, si_large, _const(x, 0.5 * math.pi)))
    ci = enp.where(small, ci_small, enp.where(large, ci_large, enp.zeros_like(x)))
    si = enp.where(x < 0, -si, si)
    ci = enp.where(x == 0, _const(x, -np.inf), ci)
    ci = enp.where(x == -np.inf, _const(x, np.nan), ci)         # (SciPy: Ci(-inf) is NaN, Ci(-x) = Ci(x) else)
    nan = enp.isnan(x)
    return enp.where(nan, x, si), enp.where(nan, x, ci)


@pure_custom_jvp
def sici(x: Any) -> tuple[Any, Any]:
    return _sici_value(x)


@sici.defjvp
def _sici_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    si, ci = sici(x)
    zero = x == 0
    safe = enp.where(zero, 1.0, x)
    d_si = enp.where(zero, enp.ones_like(x), enp.sin(safe) / safe)
    d_ci = enp.where(zero, _const(x, np.inf), enp.cos(safe) / safe)
    return (si, ci), (t * d_si, t * d_ci)


# ---------------------------------------------------------------------------------------------------------------
# Bessel functions of the first kind J_0 .. J_v of real argument
def _miller_start(v: int, limit: float, f64: bool) -> int:
    """A start order N for the backward recurrence at |z| <= limit: J_N(limit) ~ (limit/2)^N / N! far below
    rounding (1e-40 in float64, 1e-20 in float32), and N > v."""
    target = -40.0 if f64 else -20.0
    n = int(max(limit, v)) + 2
    while n * math.log10(0.5 * math.e * limit / n) - 0.5 * math.log10(2 * math.pi * n) > target:
        n += 1
    return n + 4


def _hankel_j01(a: Any) -> tuple[Any, Any]:
    """J_0(a) and J_1(a) for large a > 0 from Hankel's expansion sqrt(2 / (pi a)) (P cos chi - Q sin chi),
    chi = a - (nu/2 + 1/4) pi, with the terms t_k = prod_{j<=k} (4 nu^2 - (2j - 1)^2) / (8 j a)."""
    terms = 20 if _is64(a) else 10
    out = []
    c, s = enp.cos(a), enp.sin(a)
    root = enp.sqrt(2.0 / (math.pi * a))
    for nu in (0, 1):
        mu = 4.0 * nu * nu
        t = enp.ones_like(a)
        p, q = enp.ones_like(a), enp.zeros_like(a)
        for k in range(1, terms + 1):
            t = t * ((mu - (2 * k - 1) ** 2) / (8.0 * k)) / a
            sign = 1.0 if (k // 2) % 2 == 0 else -1.0
            if k % 2:
                q = q + sign * t
            else:
                p = p + sign * t
        # cos(a - pi/4) = (c + s)/sqrt 2, sin(a - pi/4) = (s - c)/sqrt 2; for nu = 1 a further -pi/2
        cos_chi, sin_chi = ((c + s), (s - c)) if nu == 0 else ((s - c), -(c + s))
        out.append(root * math.sqrt(0.5) * (p * cos_chi - q * sin_chi))
    return out[0], out[1]


def bessel_jn_orders(z: Any, v: int, n_iter: int) -> Any:
    """J_0(z) .. J_v(z) stacked on a new leading axis."""
    f64 = _is64(z)
    a = enp.abs(z)
    limit = max(25.0 if f64 else 12.0, float(v))
    tiny = 1e-8 if f64 else 1e-4
    # |z| < tiny: J_n(a) = (a/2)^n / n! (1 - (a/2)^2 / (n + 1))
    a_t = enp.where(a < tiny, a, 0.0)
    half = 0.5 * a_t
    series = []
    power = enp.ones_like(z)
    for n in range(v + 1):
        series.append(power * (1.0 - half * half / (n + 1)))
        power = power * half / (n + 1)
    # tiny <= |z| <= limit: Miller's backward recurrence, rescaled as it grows, the orders <= v kept
    miller = (a >= tiny) & (a <= limit)
    am = enp.where(miller, a, 1.0)
    start = max(int(n_iter), _miller_start(v, limit, f64))
    big = 1e150 if f64 else 1e15
    zero = enp.zeros_like(z)

    def step(i: Any, carry: Any) -> Any:
        upper, current, total, kept = carry            # f_(k+1), f_k, J_0 + 2 sum J_2j so far (j*2 >= k), f_0..v
        k = (start - i).astype(z.dtype)                # k = start .. 1: produce f_(k-1)
        lower = 2.0 * k / am * current - upper
        km1 = k - 1.0
        even = enp.fmod(km1, 2.0) == 0
        total = total + enp.where(even, enp.where(km1 == 0, 1.0, 2.0), 0.0) * lower
        index = (start - i - 1)
        kept = lax.dynamic_update_slice(kept, enp.expand_dims(lower, 0), (enp.minimum(index, v),) + (0,) * z.ndim)
        rescale = enp.abs(lower) > big
        factor = enp.where(rescale, 1.0 / big, 1.0)
        return current * factor, lower * factor, total * factor, kept * factor

    kept0 = enp.zeros((v + 1,) + tuple(z.shape), z.dtype)
    first = _const(z, 1e-30 if f64 else 1e-10)
    # orders above v are written to slot v and then overwritten by order v itself, so only the orders <= v remain
    even_start = 1.0 if start % 2 == 0 else 0.0
    carry = (zero, first, 2.0 * even_start * first, kept0)
    _, _, total, kept = lax.fori_loop(0, start, step, carry)
    miller_values = kept / total
    # |z| > limit: Hankel's expansion for J_0, J_1 and the forward recurrence (v < |z| there)
    hankel = a > limit
    ah = enp.where(hankel, a, limit + 1.0)
    j0, j1 = _hankel_j01(ah)
    forward = [j0, j1]
    for n in range(1, v):
        forward.append(2.0 * n / ah * forward[n] - forward[n - 1])
    rows = []
    for n in range(v + 1):
        value = enp.where(a < tiny, series[n], enp.where(hankel, forward[n], miller_values[n]))
        value = enp.where(a == np.inf, enp.zeros_like(z), value)
        if n % 2:
            value = enp.where(z < 0, -value, value)
        rows.append(enp.where(enp.isnan(z), z, value))
    return enp.stack(rows)


# ---------------------------------------------------------------------------------------------------------------
# Owen's T function
_GL24 = np.polynomial.legendre.leggauss(24)


def _owens_t_core(h: Any, a: Any) -> Any:
    """T(h, a) for h >= 0, 0 <= a <= 1 (finite)."""
    nodes, weights = _GL24
    upper = enp.minimum(a, 8.5 / enp.maximum(h, 1e-30))
    total = enp.zeros_like(h)
    for x_i, w_i in zip(nodes, weights):
        x = 0.5 * upper * (float(x_i) + 1.0)
        total = total + float(w_i) * enp.exp(-0.5 * (h * x) ** 2) / (1.0 + x * x)
    return enp.exp(-0.5 * h * h) * (0.5 * upper * total) / (2.0 * math.pi)


def _upper_tail(x: Any) -> Any:
    return ndtr(-x)


def _owens_t_value(h: Any, a: Any) -> Any:
    ah_, aa = enp.abs(h), enp.abs(a)
    invert = aa > 1
    a_c = enp.where(invert, 1.0 / enp.where(invert, aa, 1.0), aa)
    prod = enp.where(aa == np.inf, enp.where(ah_ == 0, 0.0, np.inf), aa * ah_)
    h_c = enp.where(invert, prod, ah_)
    finite = enp.isfinite(h_c)
    core = _owens_t_core(enp.where(finite, h_c, 0.0), a_c)
    core = enp.where(finite, core, enp.zeros_like(h))
    q_h, q_ah = _upper_tail(ah_), _upper_tail(prod)
    out = enp.where(invert, 0.5 * (q_h + q_ah) - q_h * q_ah - core, core)
    out = enp.where(a < 0, -out, out)
    return enp.where(enp.isnan(h) | enp.isnan(a), _const(h, np.nan), out)


@pure_custom_jvp
def owens_t(h: Any, a: Any) -> Any:
    return _owens_t_value(h, a)


@owens_t.defjvp
def _owens_t_jvp(primals: Any, tangents: Any) -> Any:
    (h, a), (th, ta) = primals, tangents
    # dT/dh = -phi(h) erf(a h / sqrt 2) / 2, dT/da = exp(-h^2 (1 + a^2) / 2) / (2 pi (1 + a^2))
    phi = enp.exp(-0.5 * h * h) / math.sqrt(2.0 * math.pi)
    d_h = -0.5 * phi * lax.erf(a * h * math.sqrt(0.5))
    d_a = enp.exp(-0.5 * h * h * (1.0 + a * a)) / (2.0 * math.pi * (1.0 + a * a))
    return owens_t(h, a), th * d_h + ta * d_a



# ---------------------------------------------------------------------------------------------------------------
# The Gauss hypergeometric function 2F1(a, b; c; x) for real x <= 1
def _is_nonpositive_int(v: Any) -> Any:
    return (v <= 0) & (v == enp.round(v))


def _gauss_series(a: Any, b: Any, c: Any, z: Any) -> tuple[Any, Any]:
    """sum_k (a)_k (b)_k / ((c)_k k!) z^k, summed until the terms are below rounding (or end: a polynomial), and
    whether it got there within the cap (3000 terms in float64, 1000 in float32: |z| <= 0.99 and moderate
    parameters converge well within it)."""
    eps = float(enp.finfo(z.dtype).eps)
    cap = 3000 if _is64(z) else 1000

    def done(k: Any, s: Any, t: Any) -> Any:
        kf = k.astype(z.dtype)
        shrinking = enp.abs((a + kf) * (b + kf) * z) < enp.abs((c + kf) * (kf + 1.0))
        return (t == 0) | (shrinking & (enp.abs(t) <= eps * enp.abs(s))) | ~enp.isfinite(s)

    def cond(carry: Any) -> Any:
        k, s, t = carry
        return (k < cap) & ~enp.all(done(k, s, t))

    def body(carry: Any) -> Any:
        k, s, t = carry
        kf = k.astype(z.dtype)
        ck = c + kf
        ratio = (a + kf) * (b + kf) / (enp.where(ck == 0, 1.0, ck) * (kf + 1.0)) * z
        t = enp.where(t == 0, t, t * ratio)            # (an ended polynomial stays ended past a pole of c)
        return k + 1, s + t, t
    k, s, t = lax.while_loop(cond, body, (enp.asarray(0, dtype=np.int32), enp.ones_like(z), enp.ones_like(z)))
    return s, done(k, s, t)


def _gamma(v: Any) -> Any:
    return _impl_gamma(v)


def _hyp2f1_value(a: Any, b: Any, c: Any, x: Any) -> Any:
    eps = float(enp.finfo(x.dtype).eps)
    one = enp.ones_like(x)
    a_poly, b_poly = _is_nonpositive_int(a), _is_nonpositive_int(b)
    polynomial = a_poly | b_poly
    # the degree: the smaller of -a, -b that is a non-positive integer
    degree = enp.minimum(enp.where(a_poly, -a, np.inf), enp.where(b_poly, -b, np.inf))
    # c a pole: inf, unless the polynomial ends before it (degree < -c), or at it (degree == -c) for |x| <= 1
    # (SciPy's convention for the 0/0 term)
    c_pole = _is_nonpositive_int(c) & ~(polynomial & ((degree < -c) | ((degree == -c) & (enp.abs(x) <= 1))))
    d = c - a - b
    # regions: a polynomial anywhere (summed as it is); x == 1 Gauss's sum; 0 <= x < 0.9 the series (after
    # Euler's transformation where c - a - b < 0); 0.9 <= x < 1 the 1 - x transformation (unless c - a - b is an
    # integer: the series); x < 0 Pfaff's transformation to z = x / (x - 1) in (0, 1), taking the parameter pair
    # whose c - a' - b' is >= 0, and for x < -1 the 1/x transformation (unless a - b is an integer)
    near_one = (x >= 0.9) & (x < 1) & (enp.abs(d - enp.round(d)) > 1e3 * eps)
    inverse = (x < -1) & (enp.abs(a - b - enp.round(a - b)) > 1e3 * eps)
    use_series = ~near_one & ~inverse & ~polynomial & (x < 1) & ~c_pole
    euler = (x >= 0) & (d < 0)
    swap = b < a                                        # Pfaff with (a, c - b) if a <= b, else (b, c - a)
    pa, pb = enp.where(swap, b, a), enp.where(swap, c - a, c - b)
    xs = enp.where(use_series, x, 0.0)
    z = enp.where(xs < 0, xs / (xs - 1.0), xs)
    sa = enp.where(xs < 0, pa, enp.where(euler, c - a, a))
    sb = enp.where(xs < 0, pb, enp.where(euler, c - b, b))
    sc = enp.where(use_series, c, 1.0)
    # the polynomials are summed directly (any x), with the same series
    sa, sb = enp.where(polynomial, a, sa), enp.where(polynomial, b, sb)
    sc = enp.where(polynomial & ~c_pole, c, sc)
    z = enp.where(polynomial & (x < np.inf) & (x > -np.inf), x, z)
    # 0.9 <= x < 1: F = G(c) G(d) / (G(c-a) G(c-b)) F(a, b; 1 - d; 1 - x)
    #                 + (1 - x)^d G(c) G(-d) / (G(a) G(b)) F(c - a, c - b; 1 + d; 1 - x)
    xn = enp.where(near_one, x, 0.95)
    an, bn, cn = (enp.where(near_one, v, w) for v, w in ((a, 0.5), (b, 0.5), (c, 2.25)))
    dn = cn - an - bn
    w = 1.0 - xn
    # x < -1: F = G(c) G(b - a) / (G(b) G(c - a)) (-x)^-a F(a, a - c + 1; a - b + 1; 1/x)
    #           + G(c) G(a - b) / (G(a) G(c - b)) (-x)^-b F(b, b - c + 1; b - a + 1; 1/x)
    xi = enp.where(inverse, x, -2.0)
    ai, bi, ci = (enp.where(inverse, v, w) for v, w in ((a, 0.5), (b, 0.25), (c, 2.25)))
    u = 1.0 / xi
    # c - a or c - b a non-positive integer: Euler's transformation gives (1 - x)^d times a polynomial, for every
    # x where that is real (x < 1, or d an integer)
    ca_poly, cb_poly = _is_nonpositive_int(c - a), _is_nonpositive_int(c - b)
    euler_poly = (ca_poly | cb_poly) & ~polynomial & ~c_pole & ((x < 1) | (d == enp.round(d))) & (x != 1)
    xe = enp.where(euler_poly, x, 0.5)
    # x == 1: Gauss's sum
    x1 = (x == 1) & ~polynomial
    dg = enp.where(x1 & (d > 0), d, 1.0)
    cg = enp.where(x1, c, 2.0)
    a1, b1 = enp.where(x1, a, 0.5), enp.where(x1, b, 0.5)
    # every series in one loop and every gamma function in one program (XLA's compile time grows with the number
    # of operations)
    series = [(sa, sb, sc, z), (an, bn, 1.0 - dn, w), (cn - an, cn - bn, 1.0 + dn, w),
              (ai, ai - ci + 1.0, ai - bi + 1.0, u), (bi, bi - ci + 1.0, bi - ai + 1.0, u),
              (enp.where(euler_poly, c - a, 0.0), enp.where(euler_poly, c - b, 0.0), enp.where(euler_poly, c, 1.0),
               xe)]
    sums, oks = _gauss_series(*(enp.stack(column) for column in zip(*series)))
    (main, f1, f2, h1, h2, poly), (converged, ok1, ok2, ok3, ok4, _) = list(sums), list(oks)
    gamma_args = [cn, dn, -dn, ci, bi - ai, ai - bi, cg, dg, enp.where(x1 & (d < 0), -d, 1.0)]
    rgamma_args = [cn - an, cn - bn, an, bn, bi, ci - ai, ai, ci - bi, cg - a1, cg - b1, a1, b1]
    poles = [_is_nonpositive_int(v) for v in rgamma_args]
    values = list(_gamma(enp.stack(gamma_args + [enp.where(p, 1.0, v) for p, v in zip(poles, rgamma_args)])))
    g_cn, g_dn, g_mdn, g_ci, g_ba, g_ab, g_cg, g_dg, g_sign = values[:9]
    r_can, r_cbn, r_an, r_bn, r_bi, r_cai, r_ai, r_cbi, r_ca1, r_cb1, r_a1, r_b1 = [
        enp.where(p, enp.zeros_like(x), 1.0 / g) for p, g in zip(poles, values[9:])]

    prefactor = enp.where(xs < 0, enp.exp(-pa * enp.log1p(-xs)),
                          enp.where(euler, enp.exp(d * enp.log1p(-xs)), one))
    value = enp.where(polynomial, main, prefactor * main)
    value = enp.where(converged | polynomial, value, _const(x, np.nan))
    term1 = g_cn * g_dn * r_can * r_cbn * f1
    term2 = enp.exp(dn * enp.log(w)) * g_cn * g_mdn * r_an * r_bn * f2
    v_near = enp.where(ok1 & ok2, term1 + term2, _const(x, np.nan))
    log_mx = enp.log(-xi)
    part1 = g_ci * g_ba * r_bi * r_cai * enp.exp(-ai * log_mx) * h1
    part2 = g_ci * g_ab * r_ai * r_cbi * enp.exp(-bi * log_mx) * h2
    v_inverse = enp.where(ok3 & ok4, part1 + part2, _const(x, np.nan))
    value = enp.where(near_one & ~polynomial & ~c_pole, v_near, value)
    value = enp.where(inverse & ~polynomial & ~c_pole, v_inverse, value)
    # x == 1: Gauss's sum for c - a - b > 0; diverging where c - a - b <= 0, with the sign of
    # G(c) G(a + b - c) / (G(a) G(b)) (G(0) read as 1); x > 1: inf (as SciPy and JAX)
    gauss = g_cg * g_dg * r_ca1 * r_cb1
    sign = enp.sign(g_cg) * enp.sign(g_sign) * enp.sign(r_a1) * enp.sign(r_b1)
    value = enp.where(x1, enp.where(d > 0, gauss, sign * np.inf), value)
    value = enp.where((x > 1) & ~polynomial, _const(x, np.inf), value)
    value = enp.where(c_pole, _const(x, np.inf), value)
    base = 1.0 - xe
    power = enp.exp(d * enp.log(enp.abs(base)))
    power = enp.where((base < 0) & (enp.fmod(d, 2.0) != 0), -power, power)
    value = enp.where(euler_poly, power * poly, value)
    nan = enp.isnan(a) | enp.isnan(b) | enp.isnan(c) | enp.isnan(x)
    value = enp.where(nan, _const(x, np.nan), value)
    # x == 0, or a == 0 or b == 0 (for any x, also NaN, as SciPy and JAX): 1
    return enp.where((x == 0) | (((a == 0) | (b == 0)) & (c != 0)), one, value)


@pure_custom_jvp
def hyp2f1(a: Any, b: Any, c: Any, x: Any) -> Any:
    return _hyp2f1_value(a, b, c, x)


@hyp2f1.defjvp
def _hyp2f1_jvp(primals: Any, tangents: Any) -> Any:
    (a, b, c, x), (ta, tb, tc, tx) = primals, tangents
    # in x: a b / c 2F1(a + 1, b + 1; c + 1; x); in a, b, c: central differences of the value (step
    # eps^(1/3) max(1, |p|): about 1e-10 relative in float64, 1e-4 in float32); all seven values in one program
    step = float(enp.finfo(x.dtype).eps) ** (1.0 / 3.0)
    points, steps = [(a, b, c, x), (a + 1.0, b + 1.0, c + 1.0, x)], []
    for k in range(3):
        p = [a, b, c]
        h = step * enp.maximum(enp.abs(p[k]), 1.0)
        up, down = list(p), list(p)
        up[k], down[k] = p[k] + h, p[k] - h
        points += [(*up, x), (*down, x)]
        steps.append(h)
    values = _hyp2f1_value(*(enp.stack(column) for column in zip(*points)))
    tangent = tx * (a * b / c) * values[1]
    for k, t in enumerate((ta, tb, tc)):
        tangent = tangent + t * (values[2 + 2 * k] - values[3 + 2 * k]) / (2.0 * steps[k])
    return values[0], tangent


# ---------------------------------------------------------------------------------------------------------------
# loggamma for complex arguments: scipy's principal branch (one cut, along the negative real axis)
# Stirling's series log Gamma(w) = (w - 1/2) log w - w + log(2 pi) / 2 + sum_k B_2k / (2k (2k - 1) w^(2k - 1)),
# its first eight terms, whose error is below 4e-16 for |w| >= 8.5
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156, -3617 / 122400)
_SHIFT = 8


def _loggamma_right(w: Any) -> Any:
    """The principal log Gamma(w) for Re w >= 1/2: Stirling's series at w + 8, less log w + ... + log(w + 7)
    (each log is analytic in the right half-plane, so the sum is the continuous branch)."""
    z = w + _SHIFT
    inv = 1 / z
    inv2 = inv * inv
    series = _STIRLING[-1] * inv2
    for c in _STIRLING[-2:0:-1]:
        series = (series + c) * inv2
    series = (series + _STIRLING[0]) * inv
    logs = enp.log(w)
    for k in range(1, _SHIFT):
        logs = logs + enp.log(w + k)
    return (z - 0.5) * enp.log(z) - z + 0.5 * math.log(2 * math.pi) + series - logs


def _log_sin_pi_upper(z: Any) -> Any:
    """The branch of log sin(pi z) analytic in the closed upper half-plane (Im z >= 0) that makes Euler's
    reflection formula hold for the principal log Gamma: sin(pi z) = (i/2) e^(-i pi z) (1 - e^(2 pi i z)), and
    |e^(2 pi i z)| <= 1 there, so log(1 - e^(2 pi i z)) is log1p's principal value; the phase of e^(2 pi i x) is
    taken of x - floor(x), exactly."""
    x, y = enp.real(z), enp.imag(z)
    frac = x - enp.floor(x)
    decay = enp.exp(-2 * math.pi * y)
    turn = _complex(decay * enp.cos(2 * math.pi * frac), decay * enp.sin(2 * math.pi * frac))
    return -1j * math.pi * z + enp.log1p(-turn) - math.log(2.0) + 0.5j * math.pi


def complex_loggamma(z: Any) -> Any:
    """The principal branch of log Gamma(z) for complex z (complex64 or complex128), scipy's: analytic but on the
    negative real axis, where the value is the limit from above (from below for a negative zero imaginary part);
    NaN at the poles 0, -1, -2, ... and for NaN. Stirling's series after a shift of 8 for Re z >= 1/2, Euler's
    reflection formula log pi - log sin(pi z) - log Gamma(1 - z) left of it, conj(loggamma(conj z)) below the real
    axis; exactly gammaln on the positive real axis. Differentiable (the derivative is digamma(z))."""
    x, y = enp.real(z), enp.imag(z)
    bad = enp.isnan(x) | enp.isnan(y) | ((y == 0) & (x <= 0) & (x == enp.floor(x))) | enp.isinf(x)
    positive_real = (y == 0) & (x > 0) & ~bad
    lower = enp.signbit(y)
    zu = enp.where(lower, enp.conj(z), z)                       # the upper half-plane's mirror image
    zu = enp.where(bad, enp.ones_like(zu), zu)                  # (a harmless placeholder: no NaN in gradients)
    reflect = enp.real(zu) < 0.5
    right = _loggamma_right(enp.where(reflect, 1 - zu, zu))
    zr = enp.where(reflect, zu, _complex(_const(x, 0.25), _const(x, 0.5)).astype(z.dtype))
    upper = enp.where(reflect, math.log(math.pi) - _log_sin_pi_upper(zr) - right, right)
    value = enp.where(lower, enp.conj(upper), upper)
    # on the positive real axis the value is lgamma's exactly; the derivative stays the complex path's (digamma(z)
    # in every direction of the tangent)
    real_value = lax.lgamma(enp.where(positive_real, x, enp.ones_like(x)))
    exact = lax.stop_gradient(_complex(real_value, enp.zeros_like(real_value)).astype(z.dtype))
    value = enp.where(positive_real, exact + (value - lax.stop_gradient(value)), value)
    nan = _const(x, np.nan)
    return enp.where(bad, _complex(nan, nan).astype(z.dtype), value).astype(z.dtype)


# ---------------------------------------------------------------------------------------------------------------
# Spherical harmonics Y_n^m(theta, phi) = N P_n^|m|(cos theta) e^(i |m| phi), conjugated times (-1)^m for m < 0:
# the orthonormalized associated Legendre functions (with the Condon-Shortley phase) by the recurrences in the
# degree l at fixed order m:
#   P_m^m = (-1)^m sqrt((2m + 1)!! / (4 pi (2m)!!)) sin^m theta
#   P_l^m = a_lm cos theta P_(l-1)^m - b_lm P_(l-2)^m,  a_lm = sqrt((4l^2 - 1) / (l^2 - m^2)),
#   b_lm = sqrt((2l + 1) ((l - 1)^2 - m^2) / ((2l - 3) (l^2 - m^2)))


def sph_harm_y(n: Any, m: Any, theta: Any, phi: Any, n_max: int) -> Any:
    """Y_n^m(theta, phi) for integer arrays n, m and real arrays theta, phi of one shape, n (and |m|) clipped to
    [0, n_max]; 0 where |m| > n. Each element runs its own recurrence, all in one loop of n_max steps."""
    dtype = theta.dtype
    order = enp.clip(enp.abs(m), 0, n_max).astype(dtype)
    degree = enp.clip(n, 0, n_max).astype(dtype)
    c = enp.cos(theta)
    s = enp.abs(enp.sin(theta))
    y00 = _const(theta, 0.5 / math.sqrt(math.pi))

    def diagonal(k: Any, pmm: Any) -> Any:           # P_k^k from P_(k-1)^(k-1), kept while k <= |m|
        kf = k.astype(dtype)
        step = -enp.sqrt(1 + 0.5 / kf) * s
        return enp.where(kf <= order, pmm * step, pmm)

    pmm = lax.fori_loop(1, n_max + 1, diagonal, y00 * enp.ones_like(theta))

    def upward(degree_l: Any, carry: tuple[Any, Any]) -> tuple[Any, Any]:
        p1, p2 = carry                                # P_(l-1)^m, P_(l-2)^m
        lf = degree_l.astype(dtype)
        active = (lf > order) & (lf <= degree)
        l2, m2 = lf * lf, order * order
        denom = enp.where(active, l2 - m2, _const(theta, 1.0))
        a = enp.sqrt((4 * l2 - 1) / denom)
        b2 = (2 * lf + 1) * ((lf - 1) ** 2 - m2) / (enp.where(active, 2 * lf - 3, _const(theta, 1.0)) * denom)
        b = enp.sqrt(enp.where(active & (b2 > 0), b2, _const(theta, 0.0)))
        p = a * c * p1 - b * p2
        return enp.where(active, p, p1), enp.where(active, p1, p2)

    p, _ = lax.fori_loop(1, n_max + 1, upward, (pmm, enp.zeros_like(pmm)))
    p = enp.where(enp.abs(m).astype(dtype) <= degree, p, enp.zeros_like(p))
    angle = order * phi
    y = _complex(p * enp.cos(angle), p * enp.sin(angle))
    odd = enp.remainder(order, 2) == 1
    flipped = enp.where(odd, -enp.conj(y), enp.conj(y))
    return enp.where(m < 0, flipped, y)
