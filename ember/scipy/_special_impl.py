"""The numerical kernels behind ember.scipy.special: functions of float arrays of one dtype (float32 or float64)
and one shape, written with ember.numpy and ember.lax operations, with custom derivative rules where a function
is computed piecewise or by an iteration (loops are not differentiated in reverse mode). ember.scipy.special
promotes, checks and broadcasts the arguments and calls these (jitted) kernels.

Algorithms (all written for ember; no code is taken from JAX or SciPy):
  ndtri       Wichura's AS241 rational approximations (Applied Statistics 37, 1988), in three regions
  log_ndtr    log(ndtr) in the body, log1p(-ndtr(-x)) above 0, the asymptotic series of the Mills ratio in the
              far lower tail
  betaln,     Stirling's series with its correction term written out, so that log Gamma(a) - log Gamma(a + b)
  poch        loses nothing to cancellation when a is large
  zeta        XLA's Hurwitz zeta for values; the derivative in x (and Riemann's zeta on [0, 1)) from the
              Euler-Maclaurin formula; Riemann's zeta below 0 by the reflection formula
  expn, exp1  power series for x <= 1, a continued fraction (evaluated from its tail) beyond
  expi        power series for x up to 40 (float64; 24 in float32), the asymptotic series beyond
  spence      the series of Li2 in powers of -log(1 - z) (Bernoulli numbers) after mapping the argument into
              |log(1 - z)| <= log 2 by the reflection and inversion formulas
  hyp1f1      Kummer's series (after Kummer's transformation for x < 0), summed until it converges, with the
              derivatives in a and b summed alongside
"""
from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from ember import lax
from ember import numpy as enp
from ember._api.jit import jit
from ember._control.custom import pure_custom_jvp

_EULER_GAMMA = 0.57721566490153286061
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_PI2_6 = math.pi ** 2 / 6.0


def _is64(x: Any) -> bool:
    return x.dtype == np.float64


def _eps(x: Any) -> float:
    return float(enp.finfo(x.dtype).eps)


def _const(x: Any, value: float) -> Any:
    """value as an array of x's shape and dtype."""
    return enp.full_like(x, value)


def _horner(coefficients: Any, t: Any) -> Any:
    """The polynomial with the given coefficients (highest order first) at t."""
    acc = _const(t, coefficients[0])
    for c in coefficients[1:]:
        acc = acc * t + c
    return acc


def _sinpi(t: Any) -> Any:
    """sin(pi t), exactly 0 at the integers (the argument is reduced to [-1/2, 1/2] exactly first)."""
    r = t - 2.0 * enp.round(t * 0.5)           # in [-1, 1], exact
    r = enp.where(r > 0.5, 1.0 - r, enp.where(r < -0.5, -1.0 - r, r))
    return enp.sin(math.pi * r)


# ---------------------------------------------------------------------------------------------------------------
# The normal distribution: ndtr, ndtri, log_ndtr
def ndtr(x: Any) -> Any:
    return 0.5 * lax.erfc(x * -math.sqrt(0.5))


# Wichura's AS241 (PPND16) coefficients, highest order first: the central region |p - 1/2| <= 0.425 (in
# r = 0.180625 - q^2), and the tails in r = sqrt(-log(min(p, 1 - p))) - 1.6 (r <= 5) or - 5 (beyond).
_AS241_A = (2.5090809287301226727e+3, 3.3430575583588128105e+4, 6.7265770927008700853e+4, 4.5921953931549871457e+4,
            1.3731693765509461125e+4, 1.9715909503065514427e+3, 1.3314166789178437745e+2, 3.3871328727963666080e+0)
_AS241_B = (5.2264952788528545610e+3, 2.8729085735721942674e+4, 3.9307895800092710610e+4, 2.1213794301586595867e+4,
            5.3941960214247511077e+3, 6.8718700749205790830e+2, 4.2313330701600911252e+1, 1.0)
_AS241_C = (7.74545014278341407640e-4, 2.27238449892691845833e-2, 2.41780725177450611770e-1,
            1.27045825245236838258e+0, 3.64784832476320460504e+0, 5.76949722146069140550e+0,
            4.63033784615654529590e+0, 1.42343711074968357734e+0)
_AS241_D = (1.05075007164441684324e-9, 5.47593808499534494600e-4, 1.51986665636164571966e-2,
            1.48103976427480074590e-1, 6.89767334985100004550e-1, 1.67638483018380384940e+0,
            2.05319162663775882187e+0, 1.0)
_AS241_E = (2.01033439929228813265e-7, 2.71155556874348757815e-5, 1.24266094738807843860e-3,
            2.65321895265761230930e-2, 2.96560571828504891230e-1, 1.78482653991729133580e+0,
            5.46378491116411436990e+0, 6.65790464350110377720e+0)
_AS241_F = (2.04426310338993978564e-15, 1.42151175831644588870e-7, 1.84631831751005468180e-5,
            7.86869131145613259100e-4, 1.48753612908506148525e-2, 1.36929880922735805310e-1,
            5.99832206555887937690e-1, 1.0)


def _ndtri_value(p: Any) -> Any:
    q = p - 0.5
    central = enp.abs(q) <= 0.425
    r = 0.180625 - q * q
    x_central = q * _horner(_AS241_A, r) / _horner(_AS241_B, r)
    tail = enp.where(q < 0, p, 1.0 - p)                      # min(p, 1 - p); 1 - p is exact for p >= 1/2
    tail = enp.where(central | ~(tail > 0), _const(p, 0.25), tail)
    s = enp.sqrt(-enp.log(tail))
    near = _horner(_AS241_C, s - 1.6) / _horner(_AS241_D, s - 1.6)
    far = _horner(_AS241_E, s - 5.0) / _horner(_AS241_F, s - 5.0)
    x_tail = enp.where(s <= 5.0, near, far)
    x = enp.where(central, x_central, enp.where(q < 0, -x_tail, x_tail))
    x = enp.where(p == 0, _const(p, -np.inf), enp.where(p == 1, _const(p, np.inf), x))
    return enp.where((p >= 0) & (p <= 1), x, _const(p, np.nan))


@pure_custom_jvp
def _ndtri(p: Any) -> Any:
    return _ndtri_value(p)


@_ndtri.defjvp
def _ndtri_jvp(primals: Any, tangents: Any) -> Any:
    (p,), (t,) = primals, tangents
    x = _ndtri(p)
    return x, t * (_SQRT_2PI * enp.exp(0.5 * x * x))


ndtri = jit(_ndtri)


def _log_ndtr_value(x: Any, series_order: int) -> Any:
    # log(ndtr(x)) directly down to where erfc stays a normal number with room to spare; beyond, the asymptotic
    # series ndtr(x) = phi(x) / |x| * (1 - 1/x^2 + 3/x^4 - 15/x^6 + ...), truncated after series_order terms
    lower = -36.0 if _is64(x) else -12.0
    body = enp.where(x > 0, enp.log1p(-ndtr(-enp.maximum(x, 0.0))), enp.log(ndtr(enp.maximum(x, lower))))
    xt = enp.minimum(x, lower)
    inv_x2 = 1.0 / (xt * xt)
    total, term = _const(x, 1.0), _const(x, 1.0)
    for n in range(1, series_order + 1):
        term = term * (-(2 * n - 1)) * inv_x2
        total = total + term
    tail = -0.5 * xt * xt - enp.log(-xt) - _LOG_SQRT_2PI + enp.log(total)
    return enp.where(x > lower, body, tail)


@lru_cache(maxsize=None)
def _log_ndtr_fn(series_order: int) -> Any:
    @pure_custom_jvp
    def f(x: Any) -> Any:
        return _log_ndtr_value(x, series_order)

    @f.defjvp
    def f_jvp(primals: Any, tangents: Any) -> Any:
        (x,), (t,) = primals, tangents
        out = f(x)
        return out, t * enp.exp(-0.5 * x * x - _LOG_SQRT_2PI - out)
    return f


@jit(static_argnums=(1,))
def log_ndtr(x: Any, series_order: int) -> Any:
    return _log_ndtr_fn(series_order)(x)


# ---------------------------------------------------------------------------------------------------------------
# Gamma, beta and relatives
def _is_pole(x: Any) -> Any:
    return (x <= 0) & (x == enp.floor(x))


def gammasgn(x: Any) -> Any:
    floor = enp.floor(x)
    negative = x < 0
    undefined = (negative & (x == floor)) | enp.isnan(x)
    minus = (negative & (enp.fmod(floor, 2.0) != 0)) | ((x == 0) & enp.signbit(x))
    return enp.where(undefined, _const(x, np.nan), enp.where(minus, _const(x, -1.0), _const(x, 1.0)))


# The Taylor coefficients c_1 .. c_26 of 1/Gamma(z) at 0 (computed for ember with mpmath at 50 digits): on [1, 2),
# Gamma(1 + z) = 1 / sum_k c_k z^(k-1), to float64's precision with all 26 (float32's with 16), exactly 1 at z = 0.
_RGAMMA = (1.0, 0.57721566490153286061, -0.65587807152025388108, -0.042002635034095235529, 0.1665386113822914895,
           -0.042197734555544336748, -0.0096219715278769735621, 0.0072189432466630995424,
           -0.0011651675918590651121, -0.00021524167411495097282, 0.00012805028238811618615,
           -0.000020134854780788238656, -1.2504934821426706573e-6, 1.1330272319816958824e-6,
           -2.0563384169776071035e-7, 6.1160951044814158179e-9, 5.0020076444692229301e-9,
           -1.1812745704870201446e-9, 1.0434267116911005105e-10, 7.782263439905071254e-12,
           -3.6968056186422057082e-12, 5.100370287454475979e-13, -2.0583260535665067832e-14,
           -5.3481225394230179824e-15, 1.2267786282382607902e-15, -1.1812593016974587695e-16)


def _gamma_value(x: Any) -> Any:
    # Gamma(y) on [1, 2) from the series of 1/Gamma, then the recurrence Gamma(y + n) = Gamma(y) y (y + 1) ...
    # (y + n - 1) up or Gamma(x) = Gamma(x + n) / (x (x + 1) ... (x + n - 1)) down: rounding errors grow with n
    # rather than with |lgamma(x)|. Beyond the range where Gamma is a normal number, sign * exp(lgamma).
    steps = 172 if _is64(x) else 36
    recur = (x > -steps + 1.0) & (x < steps)
    xr = enp.where(recur, x, 1.5)
    floor = enp.floor(xr)
    y = xr - floor + 1.0
    n = floor - 1.0

    def body(j: Any, carry: Any) -> Any:
        up, down = carry
        jf = j.astype(x.dtype)
        up = up * enp.where(jf < n, y + jf, 1.0)
        down = down * enp.where(jf < -n, xr + jf, 1.0)
        return up, down
    up, down = lax.fori_loop(0, steps, body, (enp.ones_like(x), enp.ones_like(x)))
    terms = _RGAMMA if _is64(x) else _RGAMMA[:16]
    near = up / (_horner(terms[::-1], y - 1.0) * down)
    near = enp.where(_is_pole(xr), _const(x, np.nan), near)
    near = enp.where(xr == 0, enp.where(enp.signbit(x), -np.inf, np.inf), near)
    return enp.where(recur, near, gammasgn(x) * enp.exp(lax.lgamma(x)))


@pure_custom_jvp
def gamma(x: Any) -> Any:
    return _gamma_value(x)


@gamma.defjvp
def _gamma_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    out = gamma(x)
    return out, t * out * lax.digamma(x)


# Stirling's series log Gamma(x) = (x - 1/2) log x - x + log(2 pi)/2 + omega(x), omega(x) = sum_k c_k / x^(2k-1)
# with c_k = B_2k / (2k (2k - 1)); used for x >= _STIRLING_MIN, where eight terms reach float64's precision.
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156, -3617 / 122400)
_STIRLING_MIN = 10.0


def _stirling_correction(x: Any) -> Any:
    t = 1.0 / x
    return t * _horner(_STIRLING[::-1], t * t)


def _stacked(fn: Any, *xs: Any) -> list[Any]:
    """fn applied to all of xs (arrays of one shape) at once: one copy of fn's operations in the program (XLA's
    compile time grows with their number, and lgamma, digamma and the series are long)."""
    out = fn(enp.stack(xs))
    return [out[i] for i in range(len(xs))]


def betaln(a: Any, b: Any) -> Any:
    lo, hi = enp.minimum(a, b), enp.maximum(a, b)
    # log Gamma(hi) - log Gamma(lo + hi) by Stirling's series where hi and lo + hi are large (lo may be negative):
    #   -(hi - 1/2) log1p(lo/hi) - lo log(s) + lo + omega(hi) - omega(s),  s = lo + hi,
    # plus log Gamma(lo), from lgamma, or where lo is large too from Stirling's series, its (lo - 1/2) log(lo)
    # joined with -lo log(s) as lo log(lo/s) - log(lo)/2 (no cancellation for lo ~ hi)
    stirling = (hi >= _STIRLING_MIN) & (lo + hi >= _STIRLING_MIN) & (hi < np.inf)
    both = lo >= _STIRLING_MIN
    lo_s, hi_s = enp.where(stirling, lo, 1.0), enp.where(stirling, hi, _STIRLING_MIN)
    s_s = lo_s + hi_s
    lo_b = enp.where(both, lo_s, _STIRLING_MIN)
    direct_a, direct_b = enp.where(stirling, 1.0, a), enp.where(stirling, 1.0, b)
    lg_lo, lg_a, lg_b, lg_ab = _stacked(lax.lgamma, lo_s, direct_a, direct_b, direct_a + direct_b)
    om_hi, om_s, om_lo = _stacked(_stirling_correction, hi_s, s_s, lo_b)
    log_s, log_lo, log_ratio = _stacked(enp.log, s_s, lo_b, lo_b / s_s)
    common = -(hi_s - 0.5) * enp.log1p(lo_s / hi_s) + om_hi - om_s
    mixed = lg_lo - lo_s * log_s + lo_s + common
    large = _LOG_SQRT_2PI - 0.5 * log_lo + lo_b * log_ratio + om_lo + common
    direct = lg_a + lg_b - lg_ab
    out = enp.where(both, large, enp.where(stirling, mixed, direct))
    # an infinite argument: B(a, inf) = 0 for finite a > 0; NaN otherwise (as JAX)
    infinite = enp.isinf(a) | enp.isinf(b)
    limit = (lo > 0) & (hi == np.inf) & (lo < np.inf)
    return enp.where(infinite, enp.where(limit, _const(a, -np.inf), _const(a, np.nan)), out)


def beta(a: Any, b: Any) -> Any:
    return gammasgn(a) * gammasgn(b) * gammasgn(a + b) * enp.exp(betaln(a, b))


def poch(z: Any, m: Any) -> Any:
    s = z + m
    z_pole, s_pole = _is_pole(z), _is_pole(s)
    # log|Gamma(z + m) / Gamma(z)|: Stirling's series when both are large, else the lgamma difference
    stirling = (z >= _STIRLING_MIN) & (s >= _STIRLING_MIN)
    zs, ms = enp.where(stirling, z, _STIRLING_MIN), enp.where(stirling, m, 0.0)
    n, k = enp.where(z_pole, -z, 0.0), enp.where(s_pole, -s, 0.0)
    lg_s, lg_z, lg_n, lg_k = _stacked(lax.lgamma, enp.where(stirling, 1.0, s), enp.where(stirling, 1.0, z),
                                      n + 1.0, k + 1.0)
    om_z, om_s = _stacked(_stirling_correction, zs, zs + ms)
    log_stirling = (zs - 0.5) * enp.log1p(ms / zs) + ms * enp.log(zs + ms) - ms + om_s - om_z
    log_ratio = enp.where(stirling, log_stirling, lg_s - lg_z)
    regular = gammasgn(s) * gammasgn(z) * enp.exp(log_ratio)
    # the ratio of the gamma functions themselves while both are normal numbers (exact at the integers)
    g_s, g_z = _stacked(gamma, s, z)
    tiny = float(enp.finfo(z.dtype).tiny)
    usable = (enp.abs(g_s) >= tiny) & (enp.abs(g_s) < np.inf) & (enp.abs(g_z) >= tiny) & (enp.abs(g_z) < np.inf)
    regular = enp.where(usable, g_s / enp.where(usable, g_z, 1.0), regular)
    # both poles: Gamma(-k + e) / Gamma(-n + e) -> (-1)^(n - k) n! / k!  (n = -z, k = -s)
    poles = enp.exp(lg_n - lg_k)
    poles = enp.where(enp.fmod(n - k, 2.0) != 0, -poles, poles)
    out = enp.where(z_pole & s_pole, poles,
                    enp.where(z_pole, _const(z, 0.0), enp.where(s_pole, _const(z, np.inf), regular)))
    out = enp.where(enp.isinf(z) | enp.isinf(m), enp.where((z > 0) & (m == np.inf) & (z < np.inf),
                                                         _const(z, np.inf), _const(z, np.nan)), out)
    return enp.where(m == 0, _const(z, 1.0), out)


# ---------------------------------------------------------------------------------------------------------------
# zeta: Hurwitz's from XLA, its x-derivative from the Euler-Maclaurin formula
#   zeta(s, a) = sum_{k<N} (a+k)^-s + (a+N)^(1-s)/(s-1) + (a+N)^-s/2 + sum_{j=1..M} B_2j/(2j)! (s)_(2j-1) (a+N)^(1-s-2j)
@lru_cache(maxsize=None)
def _bernoulli_fractions(n: int) -> tuple[Fraction, ...]:
    """B_0 .. B_n exactly (B_1 = -1/2), by the recurrence sum_{k<=m} C(m+1, k) B_k = 0."""
    numbers = [Fraction(1)]
    for m in range(1, n + 1):
        if m > 1 and m % 2:
            numbers.append(Fraction(0))
            continue
        total = sum(math.comb(m + 1, k) * numbers[k] for k in range(m) if numbers[k])
        numbers.append(-total / (m + 1))
    return tuple(numbers)


def _em_coefficients(m: int) -> list[float]:
    b = _bernoulli_fractions(2 * m)
    return [float(b[2 * j] / math.factorial(2 * j)) for j in range(1, m + 1)]


def _zeta_euler_maclaurin(s: Any, a: Any, derivative: bool) -> Any:
    """zeta(s, a) (derivative False) or d zeta(s, a) / ds (True) for a > 0, s != 1."""
    n_direct, n_bernoulli = (20, 12) if _is64(s) else (10, 6)

    def direct(k: Any, acc: Any) -> Any:
        log_ak = enp.log(a + k.astype(s.dtype))
        term = enp.exp(-s * log_ak)
        return acc + (-log_ak * term if derivative else term)
    total = lax.fori_loop(0, n_direct, direct, enp.zeros_like(s))
    w = a + float(n_direct)
    log_w = enp.log(w)
    w_s = enp.exp(-s * log_w)                                    # w^-s
    sm1 = s - 1.0
    if derivative:
        total = total - w_s * w * (log_w / sm1 + 1.0 / (sm1 * sm1)) - 0.5 * log_w * w_s
    else:
        total = total + w_s * w / sm1 + 0.5 * w_s
    poch_s, dpoch_s = s, enp.ones_like(s)                        # (s)_(2j-1) and its derivative in s
    power = w_s / w                                              # w^(1 - s - 2j)
    inv_w2 = 1.0 / (w * w)
    for j, c in enumerate(_em_coefficients(n_bernoulli), start=1):
        if derivative:
            total = total + c * (dpoch_s - log_w * poch_s) * power
        else:
            total = total + c * poch_s * power
        u, v = s + float(2 * j - 1), s + float(2 * j)
        poch_s, dpoch_s = poch_s * u * v, dpoch_s * u * v + poch_s * (u + v)
        power = power * inv_w2
    return total


@pure_custom_jvp
def _hurwitz_zeta(x: Any, q: Any) -> Any:
    # as SciPy: NaN for x < 1, 0 at q = inf, inf at the poles q = 0, -1, -2, ...
    out = enp.where((q == np.inf) & (x > 1), enp.zeros_like(x), lax.zeta(x, q))
    out = enp.where(_is_pole(q) & (x > 1), _const(x, np.inf), out)
    # x beyond XLA's range (about 1e3 in float32, 1e15 in float64): the first two terms, for q > 0
    huge = (x > 1000.0) & (q > 0)
    xh, qh = enp.where(huge, x, 2000.0), enp.where(huge, q, 1.0)
    out = enp.where(huge, enp.exp(-xh * enp.log(qh)) + enp.exp(-xh * enp.log1p(qh)), out)
    return enp.where(x < 1, _const(x, np.nan), out)


@_hurwitz_zeta.defjvp
def _hurwitz_zeta_jvp(primals: Any, tangents: Any) -> Any:
    (x, q), (tx, tq) = primals, tangents
    out = _hurwitz_zeta(x, q)
    positive = q > 0
    d_x = _zeta_euler_maclaurin(x, enp.where(positive, q, 1.0), True)
    d_x = enp.where(positive, d_x, _const(x, np.nan))
    return out, tx * d_x - tq * x * _hurwitz_zeta(x + 1.0, q)


hurwitz_zeta = jit(_hurwitz_zeta)


@jit
def riemann_zeta(x: Any) -> Any:
    above = x > 1
    middle = (x >= 0) & (x < 1)
    below = x < 0
    one = enp.ones_like(x)
    v_above = _hurwitz_zeta(enp.where(above, x, 2.0), one)
    v_middle = _zeta_euler_maclaurin(enp.where(middle, x, 0.5), one, False)
    # reflection: zeta(s) = 2^s pi^(s-1) sin(pi s / 2) Gamma(1 - s) zeta(1 - s), its magnitude in logarithms
    xb = enp.where(below, x, -1.0)
    log_magnitude = (xb * math.log(2.0) + (xb - 1.0) * math.log(math.pi) + lax.lgamma(1.0 - xb)
                     + enp.log(_hurwitz_zeta(1.0 - xb, one)))
    sine = _sinpi(0.5 * xb)
    magnitude = enp.exp(log_magnitude)
    v_below = enp.where((sine == 0) & enp.isinf(magnitude), enp.zeros_like(x), sine * magnitude)
    out = enp.where(above, v_above, enp.where(middle, v_middle, enp.where(below, v_below, _const(x, np.nan))))
    big = x > 60                                                 # zeta(x) = 1 + 2^-x to rounding
    out = enp.where(big, 1.0 + enp.exp2(-enp.where(big, x, 60.0)), out)
    return enp.where(x == 1, _const(x, np.inf), out)


# ---------------------------------------------------------------------------------------------------------------
# Modified Bessel functions of orders 0 and 1 (unscaled)
# exp(|x|) in two halves, so that the product overflows only where I0 and I1 do
@pure_custom_jvp
def _i0(x: Any) -> Any:
    half = enp.exp(0.5 * enp.abs(x))
    return half * lax.bessel_i0e(x) * half


@pure_custom_jvp
def _i1(x: Any) -> Any:
    half = enp.exp(0.5 * enp.abs(x))
    return half * lax.bessel_i1e(x) * half


@_i0.defjvp
def _i0_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    return _i0(x), t * _i1(x)


@_i1.defjvp
def _i1_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    zero = x == 0
    safe = enp.where(zero, 1.0, x)
    slope = enp.where(zero, _const(x, 0.5), _i0(x) - _i1(safe) / safe)
    return _i1(x), t * slope


i0, i1 = jit(_i0), jit(_i1)


# ---------------------------------------------------------------------------------------------------------------
# Relative entropy
def rel_entr(p: Any, q: Any) -> Any:
    both = (p > 0) & (q > 0)
    ps, qs = enp.where(both, p, 1.0), enp.where(both, q, 1.0)
    ratio = ps / qs
    usable = (ratio > 0) & (ratio < np.inf)                     # else the ratio over- or underflowed
    log_ratio = enp.where(usable, enp.log(enp.where(usable, ratio, 1.0)), enp.log(ps) - enp.log(qs))
    value = ps * log_ratio
    out = enp.where(both, value, enp.where((p == 0) & (q >= 0), enp.zeros_like(p), _const(p, np.inf)))
    return enp.where(enp.isnan(p) | enp.isnan(q), _const(p, np.nan), out)


def kl_div(p: Any, q: Any) -> Any:
    both = (p > 0) & (q > 0)
    value = rel_entr(enp.where(both, p, 1.0), enp.where(both, q, 1.0)) - p + q
    out = enp.where(both, value, enp.where((p == 0) & (q >= 0), q, _const(p, np.inf)))
    return enp.where(enp.isnan(p) | enp.isnan(q), _const(p, np.nan), out)


# ---------------------------------------------------------------------------------------------------------------
# Exponential integrals
def _expn_value(n: Any, x: Any) -> Any:
    """E_n(x) for integer-valued n (a float array) and x of the same shape."""
    f64 = _is64(x)
    n1 = enp.where(n >= 1, n, 1.0)
    m = n1 - 1.0
    # x <= 1: E_n(x) = (-x)^m / m! (psi(n) - log x) - sum_{k != m} (-x)^k / ((k - m) k!), psi(n) = -gamma + H_m;
    # the loop also picks out (-x)^m / m! and sums H_m (for larger m the first part is below rounding)
    xs = enp.where((x > 0) & (x <= 1), x, 0.5)

    def series(k: Any, carry: Any) -> Any:
        total, term, lead, harmonic = carry                     # term = (-x)^k / k!
        kf = k.astype(x.dtype)
        at_m = kf == m
        total = total + enp.where(at_m, 0.0, term / enp.where(at_m, 1.0, kf - m))
        lead = enp.where(at_m, term, lead)
        harmonic = harmonic + enp.where(kf < m, 1.0 / (kf + 1.0), 0.0)
        return total, term * -xs / (kf + 1.0), lead, harmonic
    zero = enp.zeros_like(x)
    total, _, lead, harmonic = lax.fori_loop(0, 32 if f64 else 18, series, (zero, enp.ones_like(x), zero, zero))
    lead = lead * (harmonic - _EULER_GAMMA - enp.log(xs))
    small = lead - total
    # x > 1: E_n(x) = e^-x / (x + n - 1 n / (x + n + 2 - 2 (n + 1) / (x + n + 4 - ...))), from a fixed depth
    xc = enp.where(x > 1, x, 2.0)
    depth = 100 if f64 else 32

    def fraction(i: Any, f: Any) -> Any:
        j = (depth - i).astype(x.dtype)
        return xc + n1 + 2.0 * (j - 1.0) - j * (n1 - 1.0 + j) / f
    f = lax.fori_loop(0, depth, fraction, xc + n1 + 2.0 * depth)
    large = enp.exp(-xc) / f
    out = enp.where(x > 1, large, small)
    out = enp.where(x == 0, enp.where(n1 >= 2, 1.0 / enp.where(n1 >= 2, m, 1.0), _const(x, np.inf)), out)
    out = enp.where(x == np.inf, enp.zeros_like(x), out)
    out = enp.where(n == 0, enp.where(x == 0, _const(x, np.inf), enp.exp(-x) / x), out)
    return enp.where((n >= 0) & (x >= 0), out, _const(x, np.nan))


@pure_custom_jvp
def _expn(n: Any, x: Any) -> Any:
    return _expn_value(n, x)


@_expn.defjvp
def _expn_jvp(primals: Any, tangents: Any) -> Any:
    (n, x), (_, tx) = primals, tangents
    # d/dx E_n = -E_(n-1); E_0 = e^-x / x
    lower = _expn(enp.maximum(n - 1.0, 0.0), x)
    d0 = -enp.exp(-x) * (x + 1.0) / (x * x)
    return _expn(n, x), tx * enp.where(n >= 1, -lower, d0)


expn = jit(_expn)


def _expi_value(x: Any) -> Any:
    f64 = _is64(x)
    switch, iterations, order = (40.0, 110, 40) if f64 else (24.0, 60, 24)
    # 0 < x <= switch: Ei(x) = gamma + log x + sum_k x^k / (k k!)
    xs = enp.where((x > 0) & (x <= switch), x, 1.0)

    def series(k: Any, carry: Any) -> Any:
        total, term = carry                                      # term = x^k / k!
        k1 = (k + 1).astype(x.dtype)
        term = term * xs / k1
        return total + term / k1, term
    total, _ = lax.fori_loop(0, iterations, series, (enp.zeros_like(x), enp.ones_like(x)))
    small = _EULER_GAMMA + enp.log(xs) + total
    # x > switch: Ei(x) ~ e^x / x sum_{k<=order} k! / x^k
    xa = enp.where(x > switch, x, switch + 1.0)

    def asymptotic(k: Any, carry: Any) -> Any:
        total, term = carry
        term = term * (k + 1).astype(x.dtype) / xa
        return total + term, term
    total_a, _ = lax.fori_loop(0, order, asymptotic, (enp.ones_like(x), enp.ones_like(x)))
    half = enp.exp(0.5 * xa)                                     # e^x in two halves: finite up to Ei's overflow
    large = half / xa * total_a * half
    negative = -_expn_value(enp.ones_like(x), enp.where(x < 0, -x, 1.0))
    out = enp.where(x > switch, large, enp.where(x < 0, negative, small))
    out = enp.where(x == 0, _const(x, -np.inf), enp.where(x == np.inf, x, out))
    return enp.where(enp.isnan(x), x, out)


@pure_custom_jvp
def _expi(x: Any) -> Any:
    return _expi_value(x)


@_expi.defjvp
def _expi_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    return _expi(x), t * enp.exp(x) / x


expi = jit(_expi)


# ---------------------------------------------------------------------------------------------------------------
# Spence's function spence(x) = Li2(1 - x)
def _li2_of_log(u: Any) -> Any:
    """Li2(1 - e^-u) = sum_n B_n u^(n+1) / (n+1)! for |u| <= log 2."""
    count = 10 if _is64(u) else 5
    b = _bernoulli_fractions(2 * count)
    coefficients = [float(b[2 * k] / math.factorial(2 * k + 1)) for k in range(count, 0, -1)]
    u2 = u * u
    return u - 0.25 * u2 + u * u2 * _horner(coefficients, u2)


def _spence_value(x: Any) -> Any:
    middle = (x >= 0.5) & (x <= 2)
    low = (x > 0) & (x < 0.5)
    high = (x > 2) & (x < np.inf)
    v_middle = _li2_of_log(-enp.log(enp.where(middle, x, 1.0)))
    xl = enp.where(low, x, 0.25)
    log1m = enp.log1p(-xl)
    v_low = _PI2_6 - enp.log(xl) * log1m - _li2_of_log(-log1m)
    xh = enp.where(high, x, 4.0)
    log_xm1 = enp.log(xh - 1.0)
    v_high = -_PI2_6 - 0.5 * log_xm1 * log_xm1 - _li2_of_log(enp.log1p(-1.0 / xh))
    out = enp.where(middle, v_middle, enp.where(low, v_low, enp.where(high, v_high, _const(x, np.nan))))
    return enp.where(x == 0, _const(x, _PI2_6), out)


@pure_custom_jvp
def _spence(x: Any) -> Any:
    return _spence_value(x)


@_spence.defjvp
def _spence_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    at_one = x == 1
    safe = enp.where(at_one, 2.0, x)
    slope = enp.where(at_one, _const(x, -1.0), enp.log(safe) / (1.0 - safe))
    return _spence(x), t * slope


spence = jit(_spence)


# ---------------------------------------------------------------------------------------------------------------
# Kummer's confluent hypergeometric function 1F1(a; b; x)
def _kummer_series(a: Any, b: Any, y: Any, derivatives: bool) -> tuple[Any, Any, Any]:
    """sum_k (a)_k / (b)_k y^k / k! and, if derivatives, its derivatives in a and b (else zeros); y >= 0.
    The derivatives of the terms follow their recurrence (no division by a + k, which may vanish)."""
    eps = _eps(y)
    cap = 3000 if _is64(y) else 1000
    zero, one = enp.zeros_like(y), enp.ones_like(y)

    def converged(k: Any, s: Any, t: Any, sa: Any, ta: Any, sb: Any, tb: Any) -> Any:
        kf = k.astype(y.dtype)
        ratio = enp.abs((a + kf) * y) / enp.maximum(enp.abs((b + kf) * (kf + 1.0)), 1e-30)
        settled = (ratio < 1.0) & (a + kf > 0) & (b + kf > 0)
        done = (t == 0) | (settled & (enp.abs(t) <= eps * enp.abs(s)))
        if derivatives:
            done = done & ((enp.abs(ta) <= eps * enp.abs(sa)) | (ta == 0)) & \
                ((enp.abs(tb) <= eps * enp.abs(sb)) | (tb == 0)) & (settled | ((ta == 0) & (tb == 0)))
        return done | enp.isnan(s)

    def cond(carry: Any) -> Any:
        k = carry[0]
        return (k < cap) & ~enp.all(converged(*carry))

    def body(carry: Any) -> Any:
        k, s, t, sa, ta, sb, tb = carry
        kf = k.astype(y.dtype)
        bk = enp.where(b + kf == 0, 1.0, b + kf)                 # (only reached after a polynomial has ended)
        step = y / (bk * (kf + 1.0))
        r = (a + kf) * step
        t2 = t * r
        if derivatives:
            ta2 = ta * r + t * step
            tb2 = tb * r - t2 / bk
        else:
            ta2, tb2 = ta, tb
        return k + 1, s + t2, t2, sa + ta2, ta2, sb + tb2, tb2
    start = (enp.asarray(0, dtype=np.int32), one, one, zero, zero, zero, zero)
    _, s, _, sa, _, sb, _ = lax.while_loop(cond, body, start)
    return s, sa, sb


def _hyp1f1_parts(a: Any, b: Any, x: Any, derivatives: bool) -> tuple[Any, Any, Any]:
    # b a pole: inf, unless the series ends first (a a non-positive integer with a >= b: a polynomial)
    terminating = _is_pole(a) & (a >= b)
    pole = _is_pole(b) & ~terminating
    negative = (x < 0) & ~(terminating & _is_pole(b))
    ap = enp.where(negative, b - a, a)                          # Kummer: M(a, b, x) = e^x M(b - a, b, -x)
    bad = enp.isnan(a) | enp.isnan(b) | enp.isnan(x) | pole | (a == 0)
    safe_b = enp.where(bad, 1.0, b)
    y = enp.where(bad, 0.0, enp.where(negative, -x, x))
    s, sa, sb = _kummer_series(enp.where(bad, 1.0, ap), safe_b, y, derivatives)
    scale = enp.where(negative, enp.exp(x), 1.0)
    value = scale * s
    d_a = enp.where(negative, -scale * sa, sa)
    d_b = enp.where(negative, scale * (sa + sb), sb)
    value = enp.where(pole, _const(x, np.inf), value)
    value = enp.where(a == 0, enp.ones_like(x), value)
    value = enp.where(enp.isnan(a) | enp.isnan(b) | enp.isnan(x), _const(x, np.nan), value)
    return value, d_a, d_b


@pure_custom_jvp
def _hyp1f1(a: Any, b: Any, x: Any) -> Any:
    return _hyp1f1_parts(a, b, x, False)[0]


@_hyp1f1.defjvp
def _hyp1f1_jvp(primals: Any, tangents: Any) -> Any:
    (a, b, x), (ta, tb, tx) = primals, tangents
    value, d_a, d_b = _hyp1f1_parts(a, b, x, True)
    d_x = a / b * _hyp1f1(a + 1.0, b + 1.0, x)
    return value, ta * d_a + tb * d_b + tx * d_x


hyp1f1 = jit(_hyp1f1)


# ---------------------------------------------------------------------------------------------------------------
def bernoulli_numbers(n: int) -> np.ndarray:
    """B_0 .. B_n as float64 (B_1 = -1/2); those beyond float64's range as signed infinities."""
    exact = _bernoulli_fractions(min(n, 258))
    values = [float(b) for b in exact]
    for m in range(len(values), n + 1):
        values.append(0.0 if m % 2 else (np.inf if m % 4 == 2 else -np.inf))
    return np.asarray(values, np.float64)
