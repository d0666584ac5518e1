"""ember.scipy.stats.gumbel_r: the right-skewed Gumbel (extreme value, maxima) distribution, as
jax.scipy.stats.gumbel_r (NaN for scale <= 0)."""
from ember import numpy as _enp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """-z - exp(-z) - log(scale)."""
    z = _u.standardize(x, loc, scale)
    return _u.positive_scale(scale, -z - _enp.exp(-z) - _enp.log(scale))


@_u.public
def pdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The density exp(logpdf)."""
    return _enp.exp(logpdf(x, loc, scale))


@_u.public
def logcdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """-exp(-z)."""
    return _u.positive_scale(scale, -_enp.exp(-_u.standardize(x, loc, scale)))


@_u.public
def cdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """exp(-exp(-z))."""
    return _enp.exp(logcdf(x, loc, scale))


@_u.public
def logsf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """log(1 - exp(-exp(-z)))."""
    return _u.positive_scale(scale, _u.log1mexp(_enp.exp(-_u.standardize(x, loc, scale))))


@_u.public
def sf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """1 - exp(-exp(-z)), as -expm1(-exp(-z))."""
    return _u.positive_scale(scale, -_enp.expm1(-_enp.exp(-_u.standardize(x, loc, scale))))


@_u.public
def ppf(p: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """loc - scale log(-log p) (NaN outside [0, 1], ±inf at its ends)."""
    return _u.ppf_domain(p, loc - scale * _enp.log(-_enp.log(p)))
