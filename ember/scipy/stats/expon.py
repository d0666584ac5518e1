"""ember.scipy.stats.expon: the exponential distribution on [loc, inf), as jax.scipy.stats.expon."""
from ember import numpy as _enp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


def _z(x: _Array, loc: _Array, scale: _Array) -> tuple[_Array, _Array]:
    """Whether x < loc, and z = (x - loc) / scale, 0 there."""
    below = x < loc
    return below, _u.safe(~below, _u.standardize(x, loc, scale), 0.0)


@_u.public
def logpdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """-z - log(scale) for x >= loc, -inf below."""
    below, z = _z(x, loc, scale)
    return _u.outside(below, -z - _enp.log(scale))


@_u.public
def pdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The density exp(logpdf)."""
    return _enp.exp(logpdf(x, loc, scale))


@_u.public
def cdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """-expm1(-z), 0 below loc."""
    return -_enp.expm1(-_z(x, loc, scale)[1])


@_u.public
def logcdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """log(-expm1(-z)) (accurate near loc), -inf below loc."""
    below, z = _z(x, loc, scale)
    return _u.outside(below, _u.log1mexp(_u.safe(~below, z)))


@_u.public
def sf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """exp(-z), 1 below loc."""
    return _enp.exp(-_z(x, loc, scale)[1])


@_u.public
def logsf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """-z, 0 below loc."""
    return -_z(x, loc, scale)[1]


@_u.public
def ppf(q: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """loc - scale log1p(-q) (NaN outside [0, 1])."""
    return _u.ppf_domain(q, loc - scale * _enp.log1p(-q))
