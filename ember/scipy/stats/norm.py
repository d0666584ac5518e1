"""ember.scipy.stats.norm: the normal distribution N(loc, scale²), as jax.scipy.stats.norm."""
from ember import numpy as _enp
from ember.scipy import special as _sp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The log-density -z²/2 - log(scale) - log(2π)/2, z = (x - loc) / scale."""
    z = _u.standardize(x, loc, scale)
    return -0.5 * (z * z) - _enp.log(scale) - 0.5 * _u.LOG_2PI


@_u.public
def pdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The density exp(logpdf)."""
    return _enp.exp(logpdf(x, loc, scale))


@_u.public
def cdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The distribution function ndtr((x - loc) / scale)."""
    return _sp.ndtr(_u.standardize(x, loc, scale))


@_u.public
def logcdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """log cdf, by log_ndtr (accurate far in the left tail)."""
    return _sp.log_ndtr(_u.standardize(x, loc, scale))


@_u.public
def sf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The survival function 1 - cdf, as ndtr(-z) (accurate in the right tail)."""
    return _sp.ndtr(-_u.standardize(x, loc, scale))


@_u.public
def logsf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """log sf, as log_ndtr(-z)."""
    return _sp.log_ndtr(-_u.standardize(x, loc, scale))


@_u.public
def ppf(q: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The quantile function loc + scale * ndtri(q) (NaN outside [0, 1])."""
    return loc + scale * _sp.ndtri(q)


@_u.public
def isf(q: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The inverse survival function ppf(1 - q), as loc - scale * ndtri(q) (accurate for small q)."""
    return loc - scale * _sp.ndtri(q)
