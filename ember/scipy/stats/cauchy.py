"""ember.scipy.stats.cauchy: the Cauchy distribution, as jax.scipy.stats.cauchy (cdf and sf by atan2, accurate in
both tails; ppf and isf are NaN outside [0, 1] and ±inf at its ends, as scipy's)."""
import math as _math

from ember import numpy as _enp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """-log(π scale) - log1p(z²)."""
    z = _u.standardize(x, loc, scale)
    return -_enp.log(_math.pi * scale) - _enp.log1p(z * z)


@_u.public
def pdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The density exp(logpdf)."""
    return _enp.exp(logpdf(x, loc, scale))


@_u.public
def cdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """1/2 + arctan(z)/π, computed as atan2(1, -z)/π."""
    return _enp.arctan2(1.0, -_u.standardize(x, loc, scale)) / _math.pi


@_u.public
def logcdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """log cdf."""
    return _enp.log(cdf(x, loc, scale))


@_u.public
def sf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """1 - cdf, computed as atan2(1, z)/π."""
    return _enp.arctan2(1.0, _u.standardize(x, loc, scale)) / _math.pi


@_u.public
def logsf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """log sf."""
    return _enp.log(sf(x, loc, scale))


def _tan_quantile(p: _Array) -> _Array:
    """tan(π (p - 1/2)) = -cot(π p), from the nearer end of [0, 1] (accurate in both tails): -inf at 0, inf at
    1, NaN outside [0, 1]."""
    upper = p > 0.5
    cot = 1 / _enp.tan(_math.pi * _enp.where(upper, 1 - p, p))
    return _u.ppf_domain(p, _enp.where(upper, cot, -cot))


@_u.public
def ppf(q: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """loc + scale tan(π (q - 1/2))."""
    return loc + scale * _tan_quantile(q)


@_u.public
def isf(q: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """loc - scale tan(π (q - 1/2)) = ppf(1 - q)."""
    return loc - scale * _tan_quantile(q)
