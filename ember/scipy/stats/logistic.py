"""ember.scipy.stats.logistic: the logistic distribution, as jax.scipy.stats.logistic."""
from ember import numpy as _enp
from ember.scipy import special as _sp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """-2 logaddexp(z/2, -z/2) - log(scale) (stable for large |z|)."""
    half = 0.5 * _u.standardize(x, loc, scale)
    return -2 * _enp.logaddexp(half, -half) - _enp.log(scale)


@_u.public
def pdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The density exp(logpdf)."""
    return _enp.exp(logpdf(x, loc, scale))


@_u.public
def cdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """expit(z)."""
    return _sp.expit(_u.standardize(x, loc, scale))


@_u.public
def sf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """expit(-z)."""
    return _sp.expit(-_u.standardize(x, loc, scale))


@_u.public
def ppf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """loc + scale logit(x)."""
    return loc + scale * _sp.logit(x)


@_u.public
def isf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """loc - scale logit(x) = ppf(1 - x)."""
    return loc - scale * _sp.logit(x)
