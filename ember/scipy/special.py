"""ember.scipy.special: jax.scipy.special's functions under the same names, with JAX's signatures and conventions
(xlogy(0, y) is 0, bernoulli's B_1 is -1/2, factorial(n) is 0 for n < 0, derivatives where JAX has them).

Arguments may be Python scalars, numpy or ember arrays; integers and booleans become the default float dtype, the
arguments of a function are promoted to one float dtype and broadcast together, and results keep that dtype
(float32 in the default mode, float64 under enable_x64; float16 and bfloat16 are computed in float32). Complex
arguments raise a ValueError naming the function and the argument, except for wofz (complex in and out) and
erfcx (w(iz) for complex z, as JAX). Every function works eagerly and under jit, vmap and grad; the numerical
kernels written for ember live in ember.scipy._special_impl (ndtri, log_ndtr, betaln, poch, zeta's derivative,
the exponential integrals, spence, hyp1f1) and ember.scipy._special_more (the Faddeeva function and erfcx,
dawsn, fresnel; sici; bessel_jn; owens_t; hyp2f1), where their algorithms are described.

Where SciPy defines a value at an edge that JAX leaves NaN (or gets wrong), ember follows SciPy: gammainc and
gammaincc at a = inf, zeta(x, inf), zeta's Riemann form (q=None, which JAX does not implement), poch at the poles
of Gamma, expn(n, 0) and expn(n, inf), rel_entr with NaN arguments, hyp1f1 for large negative x (Kummer's
transformation), the derivative of expn(0, x) and of spence, loggamma(0) = inf, bessel_jn at 0 and for large
|z|, wofz's relative accuracy for large |z| and its value at infinity, hyp2f1 for x < -1 and its terminating
cases. Where SciPy's own value is inaccurate, ember's is the exact one (fresnel beyond 36974, bessel_jn at huge
|z|, comb for large N: checked against mpmath). JAX's conventions are kept where SciPy's value is arbitrary:
hyp1f1(0, b, x) = 1 for every b, comb's 0 for N < 0 (also with repetition), boxcox's formula for tiny lmbda,
and NaN for betaln, beta and poch at infinite arguments other than the limits B(a, inf) = 0 and
poch(z, inf) = inf. loggamma takes complex arguments (scipy's principal branch) and sph_harm_y is scipy's
spherical harmonic, with JAX's signature (its n_max argument)."""
from __future__ import annotations

import operator
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from ember import lax
from ember import numpy as enp
from ember._api.jit import jit
from ember._control.custom import pure_custom_jvp
from ember._core import dtypes as dt
from ember._core import Tracer
from ember._core.trace import ConcretizationTypeError
from ember.nn import _functions as _nn
from ember.nn._functions import logsumexp as logsumexp
from ember.scipy import _special_impl as _impl
from ember.scipy import _special_more as _more


def _promote(name: str, **args: Any) -> list[Any]:
    """The arguments as arrays of their common float dtype (integers and booleans become the default float),
    after checking that each is a real number or array."""
    arrays = []
    for argname, value in args.items():
        try:
            array = enp.asarray(value)
        except Exception as err:
            raise TypeError(f"{name}: argument {argname} must be a real number or array, got "
                            f"{type(value).__name__}") from err
        if dt.is_complex(array.dtype):
            raise ValueError(f"{name}: argument {argname} is complex ({array.dtype}); {name} supports real "
                             "arguments only (as in JAX)")
        if not (dt.is_float(array.dtype) or dt.is_int(array.dtype) or dt.is_bool(array.dtype)):
            raise TypeError(f"{name}: argument {argname} must be a real number or array, got dtype {array.dtype}")
        arrays.append(array)
    dtype = enp.result_type(*arrays)
    if not dt.is_float(dtype):
        dtype = dt.default_float_dtype()
    return [a.astype(dtype) if a.dtype != dtype else a for a in arrays]


def _broadcast(*arrays: Any) -> list[Any]:
    if len({a.shape for a in arrays}) == 1:
        return list(arrays)
    return list(enp.broadcast_arrays(*arrays))


def _compute(kernel: Callable[..., Any], *arrays: Any) -> Any:
    """kernel on arrays of one float dtype and shape, in float32 at least (its result an array or a tuple)."""
    dtype = arrays[0].dtype
    if dtype.itemsize >= 4:
        return kernel(*arrays)
    out = kernel(*[a.astype(np.float32) for a in arrays])
    return tuple(o.astype(dtype) for o in out) if isinstance(out, tuple) else out.astype(dtype)


# the kernels written with several operations, compiled once per dtype and shape when called eagerly
_ndtr, _gammasgn, _gamma, _betaln, _beta, _poch, _rel_entr, _kl_div = map(jit, (
    _impl.ndtr, _impl.gammasgn, _impl.gamma, _impl.betaln, _impl.beta, _impl.poch, _impl.rel_entr, _impl.kl_div))
_factorial = jit(lambda n: enp.where(n < 0, enp.zeros_like(n), _impl.gamma(enp.where(n < 0, 0.0, n) + 1.0)))
_expn = jit(lambda n, x: _impl.expn(enp.trunc(n), x))
_exp1 = jit(lambda x: _impl.expn(enp.ones_like(x), x))
_wofz, _erfcx, _dawsn, _fresnel, _sici, _owens_t = map(jit, (
    _more.wofz, _more.erfcx, _more.dawsn, _more.fresnel, _more.sici, _more.owens_t))
_hyp2f1 = jit(_more.hyp2f1)
_sph_harm_y = jit(_more.sph_harm_y, static_argnums=(4,))


def _unary(fn: Any, name: str, doc: str) -> Any:
    def f(x: Any) -> Any:
        (x,) = _promote(name, x=x)
        return fn(x)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


# ---------------------------------------------------------------------------------------------------------------
# Elementary and logistic functions
expit = _unary(lax.logistic, "expit", "The logistic sigmoid 1 / (1 + exp(-x)).")
erf = _unary(lax.erf, "erf", "The error function.")
erfc = _unary(lax.erfc, "erfc", "The complementary error function 1 - erf(x).")
erfinv = _unary(lax.erf_inv, "erfinv", "The inverse of erf.")
gammaln = _unary(lambda x: lax.lgamma(x), "gammaln", "log|Gamma(x)| (the lgamma primitive); its derivative is "
                 "digamma(x).")
digamma = _unary(lax.digamma, "digamma", "The logarithmic derivative of Gamma; its derivative is polygamma(1, x).")


def softmax(x: Any, axis: Any = None) -> Any:
    """exp(x) / sum(exp(x)) over axis (scipy's default: all axes)."""
    return _nn.softmax(x, axis=axis)


def log_softmax(x: Any, axis: Any = None) -> Any:
    """x - logsumexp(x) over axis (scipy's default: all axes)."""
    return _nn.log_softmax(x, axis=axis)


def logit(x: Any) -> Any:
    """log(x / (1 - x)), the inverse of expit."""
    (x,) = _promote("logit", x=x)
    return enp.log(x / (1 - x))


@pure_custom_jvp
def _xlogy(x: Any, y: Any) -> Any:
    return enp.where(x != 0, x * enp.log(y), enp.zeros_like(x))


@_xlogy.defjvp
def _xlogy_jvp(primals: Any, tangents: Any) -> Any:
    (x, y), (tx, ty) = primals, tangents
    return _xlogy(x, y), tx * enp.log(y) + ty * x / y


@pure_custom_jvp
def _xlog1py(x: Any, y: Any) -> Any:
    return enp.where(x != 0, x * enp.log1p(y), enp.zeros_like(x))


@_xlog1py.defjvp
def _xlog1py_jvp(primals: Any, tangents: Any) -> Any:
    (x, y), (tx, ty) = primals, tangents
    return _xlog1py(x, y), tx * enp.log1p(y) + ty * x / (1 + y)


def xlogy(x: Any, y: Any) -> Any:
    """x * log(y), taken as 0 where x == 0 (also when y == 0). Derivatives log(y) in x and x / y in y."""
    x, y = _broadcast(*_promote("xlogy", x=x, y=y))
    return _xlogy(x, y)


def xlog1py(x: Any, y: Any) -> Any:
    """x * log1p(y), taken as 0 where x == 0. Derivatives log1p(y) in x and x / (1 + y) in y."""
    x, y = _broadcast(*_promote("xlog1py", x=x, y=y))
    return _xlog1py(x, y)


def entr(x: Any) -> Any:
    """-x log(x) for x > 0, 0 at 0, -inf below."""
    (x,) = _promote("entr", x=x)
    return enp.where(x > 0, -_xlogy(x, enp.where(x > 0, x, 1)), enp.where(x == 0, 0.0, -enp.inf))


def rel_entr(p: Any, q: Any) -> Any:
    """The relative entropy p log(p / q) for p, q > 0; 0 where p == 0 and q >= 0; inf elsewhere; NaN where an
    argument is NaN (as SciPy; JAX gives inf). Derivatives log(p / q) + 1 in p and -p / q in q (0 off p, q > 0)."""
    p, q = _broadcast(*_promote("rel_entr", p=p, q=q))
    return _compute(_rel_entr, p, q)


def kl_div(p: Any, q: Any) -> Any:
    """The Kullback-Leibler divergence term p log(p / q) - p + q for p, q > 0; q where p == 0 and q >= 0; inf
    elsewhere. Derivatives log(p / q) in p and 1 - p / q in q."""
    p, q = _broadcast(*_promote("kl_div", p=p, q=q))
    return _compute(_kl_div, p, q)


# ---------------------------------------------------------------------------------------------------------------
# The normal distribution
def ndtr(x: Any) -> Any:
    """The standard normal CDF (1/sqrt(2 pi)) integral_-inf^x exp(-t^2/2) dt = erfc(-x / sqrt(2)) / 2, accurate
    in relative terms in the lower tail. Its derivative is the normal density."""
    (x,) = _promote("ndtr", x=x)
    return _compute(_ndtr, x)


def ndtri(p: Any) -> Any:
    """The inverse of ndtr (the standard normal quantile): -inf at p = 0, inf at p = 1, NaN outside [0, 1].
    Wichura's AS241 rational approximations (full float64 precision). Its derivative is
    sqrt(2 pi) exp(ndtri(p)^2 / 2)."""
    (p,) = _promote("ndtri", p=p)
    return _compute(_impl.ndtri, p)


def log_ndtr(x: Any, series_order: int = 3) -> Any:
    """log(ndtr(x)), accurate in both tails: log1p(-ndtr(-x)) above 0, and far in the lower tail (below -12 in
    float32, -36 in float64) the asymptotic series of the normal Mills ratio with series_order terms (a Python
    int in [0, 30], as in JAX). Its derivative is exp(-x^2/2) / sqrt(2 pi) / ndtr(x), computed as
    exp(log pdf - log_ndtr) so that it stays finite in the lower tail."""
    if isinstance(series_order, bool) or not isinstance(series_order, int | np.integer):
        raise TypeError(f"log_ndtr: series_order must be a Python int, got {type(series_order).__name__}")
    if not 0 <= series_order <= 30:
        raise ValueError(f"log_ndtr: series_order must be in [0, 30], got {series_order}")
    (x,) = _promote("log_ndtr", x=x)
    return _compute(lambda v: _impl.log_ndtr(v, int(series_order)), x)


# ---------------------------------------------------------------------------------------------------------------
# Incomplete gamma and beta functions
def _gamma_incomplete(out: Any, a: Any, x: Any, at_infinite_a: float) -> Any:
    """The igamma / igammac primitive's result, kept in [0, 1] (1 - P may round below 0 for tiny a), with SciPy's
    values at a == inf."""
    out = enp.where(out < 0, enp.zeros_like(out), enp.where(out > 1, enp.ones_like(out), out))
    infinite_a = (a == np.inf) & (x >= 0)
    return enp.where(infinite_a, enp.where(x < np.inf, at_infinite_a, np.nan), out)


_gammainc = jit(lambda a, x: _gamma_incomplete(lax.igamma(a, x), a, x, 0.0))
_gammaincc = jit(lambda a, x: _gamma_incomplete(lax.igammac(a, x), a, x, 1.0))


def gammainc(a: Any, x: Any) -> Any:
    """The regularized lower incomplete gamma function P(a, x) = gamma(a, x) / Gamma(a) (the igamma primitive):
    1 at a == 0 for x > 0, 0 at a == inf for finite x (as SciPy), NaN for a < 0 or x < 0. Differentiable in both
    arguments (d/da by the igamma_grad_a primitive)."""
    a, x = _broadcast(*_promote("gammainc", a=a, x=x))
    return _gammainc(a, x)


def gammaincc(a: Any, x: Any) -> Any:
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x) (the igammac primitive, accurate where
    Q is small): 0 at a == 0 for x > 0, 1 at a == inf for finite x (as SciPy). Differentiable in both arguments."""
    a, x = _broadcast(*_promote("gammaincc", a=a, x=x))
    return _gammaincc(a, x)


def betainc(a: Any, b: Any, x: Any) -> Any:
    """The regularized incomplete beta function I_x(a, b) = B(x; a, b) / B(a, b) (the regularized_incomplete_beta
    primitive): NaN for a <= 0, b <= 0 or x outside [0, 1]. Differentiable in x only (as in JAX)."""
    a, b, x = _broadcast(*_promote("betainc", a=a, b=b, x=x))
    return lax.betainc(a, b, x)


# ---------------------------------------------------------------------------------------------------------------
# Gamma, beta and relatives
def gammasgn(x: Any) -> Any:
    """The sign of Gamma(x): 1 or -1 (-1 at -0.0), NaN at the non-positive integers, -inf and NaN. Its derivative
    is 0."""
    (x,) = _promote("gammasgn", x=x)
    return _compute(_gammasgn, x)


def gamma(x: Any) -> Any:
    """The gamma function, gammasgn(x) * exp(gammaln(x)): +-inf at +-0, NaN at the negative integers and -inf.
    Its derivative is gamma(x) digamma(x)."""
    (x,) = _promote("gamma", x=x)
    return _compute(_gamma, x)


def betaln(a: Any, b: Any) -> Any:
    """log|B(a, b)| = log|Gamma(a) Gamma(b) / Gamma(a + b)|. When the larger argument is at least 10 (and the
    smaller positive), Stirling's series is used with the large parts combined analytically, so that no precision
    is lost to cancellation (betaln(1e10, 1) = -log(1e10) to full precision). Differentiable in both arguments
    (digamma(a) - digamma(a + b) in a)."""
    a, b = _broadcast(*_promote("betaln", a=a, b=b))
    return _compute(_betaln, a, b)


def beta(a: Any, b: Any) -> Any:
    """The beta function B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b), as sign * exp(betaln(a, b)). Differentiable
    in both arguments."""
    a, b = _broadcast(*_promote("beta", a=a, b=b))
    return _compute(_beta, a, b)


def factorial(n: Any, exact: bool = False) -> Any:
    """n! = Gamma(n + 1) as a float (for non-integer n too), 0 for n < 0. exact=True is not supported (as in
    JAX). Its derivative is Gamma(n + 1) digamma(n + 1) for n >= 0."""
    if exact:
        raise NotImplementedError("factorial: exact=True is not supported (as in JAX); use exact=False")
    (n,) = _promote("factorial", n=n)
    return _compute(_factorial, n)


def poch(z: Any, m: Any) -> Any:
    """The Pochhammer symbol (z)_m = Gamma(z + m) / Gamma(z): 1 at m == 0; at the poles of Gamma the limit
    (0 where only Gamma(z) has a pole, inf where only Gamma(z + m) has one, (-1)^(n-k) n!/k! where both do, as
    SciPy). Computed as a ratio of exponentials of log-gamma differences (Stirling's series for large z, so poch(1e10,
    0.5) is exact to rounding). Differentiable in both arguments ((digamma(z + m) - digamma(z)) poch in z,
    digamma(z + m) poch in m)."""
    z, m = _broadcast(*_promote("poch", z=z, m=m))
    return _compute(_poch, z, m)


def multigammaln(a: Any, d: int) -> Any:
    """The log of the multivariate gamma function, log Gamma_d(a) = d(d-1)/4 log(pi) + sum_{j<d} gammaln(a - j/2),
    for a static non-negative integer d (SciPy's check a > (d-1)/2 is not made, as in JAX). Differentiable in a."""
    if isinstance(d, Tracer):
        raise TypeError("multigammaln: the dimension d must be a concrete integer, not a traced value")
    try:
        d = operator.index(d if not isinstance(d, np.ndarray) or d.ndim else d.item())
    except TypeError:
        raise TypeError(f"multigammaln: the dimension d must be an integer, got {d!r}") from None
    if d < 0:
        raise ValueError(f"multigammaln: the dimension d must be non-negative, got {d}")
    (a,) = _promote("multigammaln", a=a)
    return _multigammaln(a, d)


@jit(static_argnums=(1,))
def _multigammaln(a: Any, d: int) -> Any:
    offsets = enp.arange(d, dtype=a.dtype) * 0.5
    total = enp.sum(lax.lgamma(enp.expand_dims(a, -1) - offsets), axis=-1) if d else enp.zeros_like(a)
    return total + 0.25 * d * (d - 1) * float(np.log(np.pi))


def polygamma(n: Any, x: Any) -> Any:
    """The n-th derivative of digamma, psi^(n)(x), for integer n >= 0 (an integer dtype is required, as in JAX);
    the polygamma primitive. Differentiable in x (polygamma(n + 1, x))."""
    n_array = enp.asarray(n) if not isinstance(n, int | np.integer) else None
    if isinstance(n, bool) or (n_array is not None and not dt.is_int(n_array.dtype)):
        raise ValueError(f"polygamma: the order n must have an integer dtype, got "
                         f"{n_array.dtype if n_array is not None else type(n).__name__}")
    n = enp.asarray(n) if n_array is None else n_array
    (x,) = _promote("polygamma", x=x)
    n, x = _broadcast(n, x)
    return _polygamma(n, x)  # (n enters as an integer array: no tangent, even for jit's jvp)


@jit
def _polygamma(n: Any, x: Any) -> Any:
    n = n.astype(x.dtype)
    out = lax.polygamma(n, x)
    return enp.where((x == np.inf) & (n >= 0), enp.where(n == 0, x, enp.zeros_like(x)), out)


def zeta(x: Any, q: Any = None) -> Any:
    """The Hurwitz zeta function zeta(x, q) = sum_k (k + q)^-x (XLA's), 0 at q = inf for x > 1 (as SciPy);
    q=None gives Riemann's zeta function (SciPy's; JAX raises): for x < 0 by the reflection formula, on [0, 1) by
    the Euler-Maclaurin formula. Differentiable in both x and q: -x zeta(x + 1, q) in q, and in x the
    Euler-Maclaurin sum of -log(k + q) (k + q)^-x (for q > 0)."""
    if q is None:
        (x,) = _promote("zeta", x=x)
        return _compute(_impl.riemann_zeta, x)
    x, q = _broadcast(*_promote("zeta", x=x, q=q))
    return _compute(_impl.hurwitz_zeta, x, q)


# ---------------------------------------------------------------------------------------------------------------
# Modified Bessel functions
i0e = _unary(lax.bessel_i0e, "i0e", "The exponentially scaled modified Bessel function of order 0, exp(-|x|) I0(x) "
             "(the bessel_i0e primitive); its derivative is i1e(x) - sign(x) i0e(x).")
i1e = _unary(lax.bessel_i1e, "i1e", "The exponentially scaled modified Bessel function of order 1, exp(-|x|) I1(x) "
             "(the bessel_i1e primitive); its derivative is i0e(x) - (sign(x) + 1/x) i1e(x), 1/2 at 0.")


def i0(x: Any) -> Any:
    """The modified Bessel function of order 0, I0(x) = exp(|x|) i0e(x) (inf past float overflow, NaN at +-inf as
    SciPy). Its derivative is i1(x)."""
    (x,) = _promote("i0", x=x)
    return _compute(_impl.i0, x)


def i1(x: Any) -> Any:
    """The modified Bessel function of order 1, I1(x) = exp(|x|) i1e(x). Its derivative is i0(x) - i1(x) / x (1/2
    at 0)."""
    (x,) = _promote("i1", x=x)
    return _compute(_impl.i1, x)


# ---------------------------------------------------------------------------------------------------------------
# Exponential integrals, Spence's function, Kummer's function, Bernoulli numbers
def expn(n: Any, x: Any) -> Any:
    """The generalized exponential integral E_n(x) = integral_1^inf exp(-x t) / t^n dt for n >= 0 (n is truncated
    to an integer, as SciPy) and x >= 0: 1/(n-1) at x = 0 for n >= 2, inf for n <= 1; NaN for n < 0 or x < 0.
    Power series for x <= 1, a continued fraction beyond. Differentiable in x (-E_(n-1)(x)); n gets no gradient."""
    n, x = _broadcast(*_promote("expn", n=n, x=x))
    return _compute(_expn, n, x)


def exp1(x: Any) -> Any:
    """The exponential integral E_1(x) = integral_x^inf exp(-t) / t dt for x >= 0 (inf at 0, NaN below: SciPy's
    real-valued convention). Its derivative is -exp(-x) / x."""
    (x,) = _promote("exp1", x=x)
    return _compute(_exp1, x)


def expi(x: Any) -> Any:
    """The exponential integral Ei(x) = -PV integral_-x^inf exp(-t) / t dt (-E_1(-x) for x < 0, -inf at 0).
    Power series up to 40 (24 in float32), the asymptotic series beyond. Its derivative is exp(x) / x."""
    (x,) = _promote("expi", x=x)
    return _compute(_impl.expi, x)


def spence(x: Any) -> Any:
    """Spence's function spence(x) = integral_1^x log(t) / (1 - t) dt = Li2(1 - x) for x >= 0 (SciPy's
    convention; NaN for x < 0 and at inf, as SciPy and JAX). Its derivative is log(x) / (1 - x) (-1 at x = 1)."""
    (x,) = _promote("spence", x=x)
    return _compute(_impl.spence, x)


def hyp1f1(a: Any, b: Any, x: Any) -> Any:
    """Kummer's confluent hypergeometric function 1F1(a; b; x) = sum_k (a)_k / (b)_k x^k / k!: summed until it
    converges (after Kummer's transformation e^x 1F1(b - a; b; -x) for x < 0, which keeps the sum free of
    cancellation). 1 at a == 0 (JAX's convention, also at b == 0), inf where b is a non-positive integer. Large
    |x| costs many terms and overflows where the sum does (about |x| > 700 in float64, 85 in float32).
    Differentiable in a, b and x (a / b 1F1(a + 1; b + 1; x) in x; the derivatives in a and b are summed with
    the series)."""
    a, b, x = _broadcast(*_promote("hyp1f1", a=a, b=b, x=x))
    return _compute(_impl.hyp1f1, a, b, x)


def bernoulli(n: int) -> Any:
    """The Bernoulli numbers B_0 .. B_n (n + 1 of them; B_1 = -1/2, as SciPy and JAX), for a concrete integer
    n >= 0, as an array of the default float dtype (exact to rounding; signed infinities past float64's range)."""
    if isinstance(n, Tracer):
        raise TypeError("bernoulli: n must be a concrete integer, not a traced value")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"bernoulli: n must be an integer, got {type(n).__name__}") from None
    if n < 0:
        raise ValueError(f"bernoulli: n must be non-negative, got {n}")
    return enp.asarray(_impl.bernoulli_numbers(n).astype(dt.default_float_dtype()))


# ---------------------------------------------------------------------------------------------------------------
# Box-Cox transformations, binomial coefficients, log-gamma
def boxcox(x: Any, lmbda: Any) -> Any:
    """The Box-Cox transformation (x^lmbda - 1) / lmbda, log(x) at lmbda == 0, computed as expm1(lmbda log x) /
    lmbda (no cancellation for small lmbda); NaN for x < 0. Differentiable in both arguments (JAX's formula: the
    derivative in lmbda is 0 where lmbda == 0)."""
    x, lmbda = _broadcast(*_promote("boxcox", x=x, lmbda=lmbda))
    return _compute(_boxcox, x, lmbda)


def boxcox1p(x: Any, lmbda: Any) -> Any:
    """The Box-Cox transformation of 1 + x: ((1 + x)^lmbda - 1) / lmbda, log1p(x) at lmbda == 0, computed as
    expm1(lmbda log1p(x)) / lmbda; NaN for x < -1. Differentiable in both arguments."""
    x, lmbda = _broadcast(*_promote("boxcox1p", x=x, lmbda=lmbda))
    return _compute(_boxcox1p, x, lmbda)


def _box_cox(log: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    def f(x: Any, lmbda: Any) -> Any:
        zero = lmbda == 0
        safe = enp.where(zero, enp.ones_like(lmbda), lmbda)
        log_x = log(x)
        return enp.where(zero, log_x, enp.expm1(safe * log_x) / safe)
    return f


_boxcox, _boxcox1p = jit(_box_cox(enp.log)), jit(_box_cox(enp.log1p))


@jit
def _comb(n: Any, k: Any) -> Any:
    valid = (k <= n) & (n >= 0) & (k >= 0)
    ns, ks = enp.where(valid, n, 1.0), enp.where(valid, k, 0.0)
    # (N - m + 1)_m / m!, m = min(k, N - k) (poch is exact to rounding for large N); where that overflows before
    # the result does, 1 / ((N + 1) B(N - k + 1, k + 1))
    m = enp.minimum(ks, ns - ks)
    ratio = _impl.poch(ns - m + 1.0, m) / _impl.gamma(m + 1.0)
    value = enp.where(enp.isfinite(ratio), ratio, enp.exp(-enp.log1p(ns) - _impl.betaln(ns - ks + 1.0, ks + 1.0)))
    # the binomial coefficients of integers are integers: rounded while that is exact (the derivative passes)
    exact = (ns == enp.round(ns)) & (ks == enp.round(ks)) & (value < 2.0 ** (53 if value.dtype == np.float64 else 24))
    value = value + lax.stop_gradient(enp.where(exact, enp.round(value) - value, enp.zeros_like(value)))
    return enp.where(valid, value, enp.zeros_like(value))


def comb(N: Any, k: Any, *, repetition: bool = False) -> Any:  # noqa: N803  (JAX's name)
    """The number of combinations of N things taken k at a time, N! / (k! (N - k)!), as a float (for real N and
    k too): 1 / ((N + 1) B(N - k + 1, k + 1)), exact to rounding for integers (as JAX, 0 where N < 0, k < 0 or
    k > N); with repetition=True, comb(N + k - 1, k) (1 at k == 0 for N >= 0). Differentiable in N and k."""
    if not isinstance(repetition, bool | np.bool_):
        raise TypeError(f"comb: repetition must be a bool, got {type(repetition).__name__}")
    n, k = _broadcast(*_promote("comb", N=N, k=k))
    if repetition:
        return enp.where((k == 0) & (n >= 0), enp.ones_like(n), _compute(_comb, n + k - 1.0, k))
    return _compute(_comb, n, k)


@jit
def _loggamma(x: Any) -> Any:
    out = enp.where(x > 0, lax.lgamma(enp.where(x > 0, x, 1.0)), _const_like(x, np.nan))
    return enp.where(x == 0, _const_like(x, np.inf), out)


def _const_like(x: Any, value: float) -> Any:
    return enp.full_like(x, value)


_complex_loggamma = jit(_more.complex_loggamma)


def _is_complex(x: Any) -> bool:
    """Whether x (an array, a number or a nested list of numbers) is complex."""
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        try:
            dtype = np.asarray(x).dtype
        except (TypeError, ValueError):
            return False
    return dt.is_complex(dtype)


def loggamma(x: Any) -> Any:
    """The principal branch of log Gamma(x): for real x, gammaln(x) for x > 0, inf at 0 and NaN for x < 0
    (SciPy's real-argument convention; JAX gives NaN at 0); for complex x, SciPy's analytic continuation with one
    branch cut along the negative real axis (the limit from above on it, from below for a negative zero imaginary
    part: SciPy's, where JAX takes the limit from above for both), NaN at the poles 0, -1, -2, ... Its derivative
    is digamma(x), in forward and reverse mode for complex x too (JAX's complex loggamma has no reverse mode)."""
    if _is_complex(x):
        return _complex_loggamma(enp.asarray(x))
    (x,) = _promote("loggamma", x=x)
    return _compute(_loggamma, x)


def sph_harm_y(n: Any, m: Any, theta: Any, phi: Any, diff_n: int | None = None, n_max: int | None = None) -> Any:
    """The spherical harmonics Y_n^m(theta, phi) = sqrt((2n + 1) (n - m)! / (4 pi (n + m)!)) P_n^m(cos theta)
    e^(i m phi) (scipy.special.sph_harm_y's convention: theta the polar angle in [0, pi], phi the azimuth, the
    Condon-Shortley phase included, Y_n^-m = (-1)^m conj(Y_n^m)); complex.

    n (the degree, n >= 0) and m (the order, |m| <= n; 0 where |m| > n) are integer arrays; n, m, theta and phi
    broadcast together (JAX's takes 1-D n and m, and theta of their length or a scalar: the same values). n_max,
    JAX's extra argument, is the largest degree, static: by default max(n), which needs a concrete n (under jit,
    give n_max); degrees above n_max are clipped to it, as in JAX. diff_n is a NotImplementedError, as in JAX.
    Differentiable in theta and phi."""
    if diff_n is not None:
        raise NotImplementedError("The 'diff_n' argument to jax.scipy.special.sph_harm_y is not supported.")
    try:
        n, m = enp.asarray(n), enp.asarray(m)
    except TypeError as err:
        raise TypeError(f"sph_harm_y: n and m must be integer arrays: {err}") from None
    for name, value in (("n", n), ("m", m)):
        if not (dt.is_int(value.dtype) or dt.is_bool(value.dtype)):
            raise TypeError(f"sph_harm_y: argument {name} must be an integer array, got dtype {value.dtype}")
    theta, phi = _promote("sph_harm_y", theta=theta, phi=phi)
    if n_max is None:
        if isinstance(n, Tracer):
            raise ConcretizationTypeError(
                "The `n_max` argument of `jnp.scipy.special.sph_harm` must be statically specified to use "
                "`sph_harm` within JAX transformations (ember.scipy.special.sph_harm_y: n is traced; give n_max).")
        n_max = int(np.max(np.asarray(n))) if n.size else 0
    n_max = operator.index(n_max)
    n, m, theta, phi = _broadcast(n, m, theta, phi)
    if theta.dtype.itemsize < 4:   # (half floats: computed, and returned, as complex64)
        theta, phi = theta.astype(np.float32), phi.astype(np.float32)
    return _sph_harm_y(n, m, theta, phi, n_max)


# ---------------------------------------------------------------------------------------------------------------
# The error-function family: wofz, erfcx, dawsn; Fresnel and sine/cosine integrals; Owen's T
def _promote_complex(name: str, z: Any) -> Any:
    """z as an array of a complex dtype: complex64 for float32 and the half floats, complex128 for float64,
    the default complex dtype for integers and booleans."""
    try:
        array = enp.asarray(z)
    except Exception as err:
        raise TypeError(f"{name}: argument z must be a number or array, got {type(z).__name__}") from err
    if dt.is_complex(array.dtype):
        return array
    if dt.is_float(array.dtype):
        return array.astype(np.complex128 if array.dtype == np.float64 else np.complex64)
    if dt.is_int(array.dtype) or dt.is_bool(array.dtype):
        return array.astype(dt.default_complex_dtype())
    raise TypeError(f"{name}: argument z must be a number or array, got dtype {array.dtype}")


def wofz(z: Any) -> Any:
    """The Faddeeva function w(z) = exp(-z^2) erfc(-iz), complex64 or complex128 (real arguments are made
    complex): Weideman's rational approximation, Laplace's continued fraction for |z| >= 8 (relative accuracy
    where w decays, which JAX's lacks), w(z) = 2 exp(-z^2) - w(-z) below the real axis; 0 at infinity in the
    closed upper half-plane (as SciPy). Holomorphic: its derivative is 2i/sqrt(pi) - 2 z w(z)."""
    return _wofz(_promote_complex("wofz", z))


def erfcx(x: Any) -> Any:
    """The scaled complementary error function exp(x^2) erfc(x) = w(ix): about 1 / (sqrt(pi) x) for large x
    without overflow, inf below about -26.6 (float64; -9.4 in float32). A complex argument gives w(iz), as JAX.
    Its derivative is 2 x erfcx(x) - 2/sqrt(pi)."""
    array = enp.asarray(x) if not isinstance(x, str) else x
    if hasattr(array, "dtype") and dt.is_complex(array.dtype):
        return _wofz(_more._complex(-enp.imag(array), enp.real(array)))
    (x,) = _promote("erfcx", x=x)
    return _compute(_erfcx, x)


def dawsn(x: Any) -> Any:
    """Dawson's integral exp(-x^2) int_0^x exp(t^2) dt = sqrt(pi)/2 Im w(x) (its Maclaurin series near 0), odd,
    about 1 / (2x) for large x. Its derivative is 1 - 2 x dawsn(x)."""
    (x,) = _promote("dawsn", x=x)
    return _compute(_dawsn, x)


def fresnel(x: Any) -> tuple[Any, Any]:
    """The Fresnel integrals (S(x), C(x)) = (int_0^x sin(pi t^2 / 2) dt, int_0^x cos(pi t^2 / 2) dt), odd, +-1/2
    at +-inf: Maclaurin series for |x| <= 1.5, the Faddeeva function beyond, with pi x^2 / 2 reduced exactly
    (accurate for all x; JAX's, a port of Cephes, only on [-10, 10] by its own account). Derivatives
    sin(pi x^2 / 2) and cos(pi x^2 / 2)."""
    (x,) = _promote("fresnel", x=x)
    return _compute(_fresnel, x)


def sici(x: Any) -> tuple[Any, Any]:
    """The sine and cosine integrals (Si(x), Ci(x)): Si(x) = int_0^x sin t / t dt (odd, +-pi/2 at +-inf),
    Ci(x) = gamma + log|x| + int_0^|x| (cos t - 1) / t dt (even: SciPy's real part for x < 0; -inf at 0, NaN at
    -inf). Derivatives sin(x) / x and cos(x) / x."""
    (x,) = _promote("sici", x=x)
    return _compute(_sici, x)


def owens_t(h: Any, a: Any) -> Any:
    """Owen's T function T(h, a) = 1/(2 pi) int_0^a exp(-h^2 (1 + x^2) / 2) / (1 + x^2) dx: Gauss-Legendre
    quadrature for |a| <= 1 (on the part of [0, a] where the integrand is above rounding, so accurate in relative
    terms for large h too), the reflection T(h, a) = (Q(h) + Q(ah))/2 - Q(h) Q(ah) - T(ah, 1/a) beyond. Even in h,
    odd in a. Differentiable in both arguments."""
    h, a = _broadcast(*_promote("owens_t", h=h, a=a))
    return _compute(_owens_t, h, a)


def hyp2f1(a: Any, b: Any, c: Any, x: Any) -> Any:
    """The Gauss hypergeometric function 2F1(a, b; c; x) = sum_k (a)_k (b)_k / (c)_k x^k / k! for real x <= 1:
    the series (after Euler's or Pfaff's transformation), the 1 - x transformation near x = 1 and the 1/x one
    below -1 where the parameters allow, the polynomials for a or b a non-positive integer (for every x, also
    where c is a pole beyond the polynomial's degree, and x > 1: SciPy's values, where JAX's are wrong), Gauss's
    sum at x = 1 (where c - a - b <= 0 the limit from below, +-inf), inf for x > 1 otherwise and where c is a
    non-positive integer. NaN where the series does not converge within its cap (3000 terms in float64): x above
    about 0.99 with c - a - b an integer, or x below about -100 with a - b an integer. Differentiable: in x
    exactly (a b / c 2F1(a + 1, b + 1; c + 1; x)), in a, b and c by central differences of the value (about
    1e-10 relative in float64)."""
    a, b, c, x = _broadcast(*_promote("hyp2f1", a=a, b=b, c=c, x=x))
    return _compute(_hyp2f1, a, b, c, x)


# ---------------------------------------------------------------------------------------------------------------
# Bessel functions of the first kind of integer order
def _static_int(name: str, argname: str, value: Any) -> int:
    if isinstance(value, Tracer):
        raise TypeError(f"{name}: {argname} must be a concrete integer, not a traced value")
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{name}: {argname} must be an integer, got a bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name}: {argname} must be an integer, got {value!r}") from None


def bessel_jn(z: Any, *, v: int, n_iter: int = 50) -> Any:
    """The Bessel functions of the first kind J_0(z) .. J_v(z) of a real argument, stacked: shape
    (v + 1, *z.shape). Miller's backward recurrence from order max(n_iter, N), where N is chosen from v and the
    dtype so that the result is accurate (n_iter is JAX's start order; a too small one makes JAX's values wrong,
    here it only adds steps), Hankel's expansion and the forward recurrence for |z| > max(25, v) (JAX gives
    NaN at z = 0 and wrong values for large |z|; these are SciPy's). 0 at +-inf. Differentiable in z
    (J_n' = (J_(n-1) - J_(n+1)) / 2)."""
    v = _static_int("bessel_jn", "v", v)
    n_iter = _static_int("bessel_jn", "n_iter", n_iter)
    if v < 0:
        raise ValueError(f"bessel_jn: the order v must be non-negative, got {v}")
    if n_iter < 0:
        raise ValueError(f"bessel_jn: n_iter must be non-negative, got {n_iter}")
    (z,) = _promote("bessel_jn", z=z)
    return _compute(lambda a: _bessel_jn(a, v, n_iter), z)


@lru_cache(maxsize=None)
def _bessel_jn_fn(v: int, n_iter: int) -> Any:
    @pure_custom_jvp
    def f(z: Any) -> Any:
        return _more.bessel_jn_orders(z, v, n_iter)

    @f.defjvp
    def f_jvp(primals: Any, tangents: Any) -> Any:
        (z,), (t,) = primals, tangents
        orders = _more.bessel_jn_orders(z, v + 1, n_iter)
        # J_0' = -J_1, J_n' = (J_(n-1) - J_(n+1)) / 2
        slope = enp.concatenate([-orders[1:2], 0.5 * (orders[:v] - orders[2:v + 2])])
        return orders[:v + 1], t * slope
    return f


@jit(static_argnums=(1, 2))
def _bessel_jn(z: Any, v: int, n_iter: int) -> Any:
    return _bessel_jn_fn(v, n_iter)(z)


__all__ = ["bernoulli", "bessel_jn", "beta", "betainc", "betaln", "boxcox", "boxcox1p", "comb", "dawsn", "digamma",
           "entr", "erf", "erfc", "erfcx", "erfinv", "exp1", "expi", "expit", "expn", "factorial", "fresnel",
           "gamma", "gammainc", "gammaincc", "gammaln", "gammasgn", "hyp1f1", "hyp2f1", "i0", "i0e", "i1", "i1e",
           "kl_div", "log_ndtr", "log_softmax", "loggamma", "logit", "logsumexp", "multigammaln", "ndtr", "ndtri",
           "owens_t", "poch", "polygamma", "rel_entr", "sici", "softmax", "spence", "sph_harm_y", "wofz", "xlog1py",
           "xlogy", "zeta"]
