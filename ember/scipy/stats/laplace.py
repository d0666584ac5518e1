"""ember.scipy.stats.laplace: the Laplace (double exponential) distribution, as jax.scipy.stats.laplace."""
import math as _math

from ember import numpy as _enp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """-|z| - log(2 scale)."""
    return -_enp.abs(_u.standardize(x, loc, scale)) - _enp.log(scale) - _math.log(2.0)


@_u.public
def pdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The density exp(logpdf)."""
    return _enp.exp(logpdf(x, loc, scale))


@_u.public
def cdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """exp(z)/2 for z <= 0, 1 - exp(-z)/2 above (each branch with a placeholder on the other side: no overflow)."""
    z = _u.standardize(x, loc, scale)
    left = z <= 0
    return _enp.where(left, 0.5 * _enp.exp(_u.safe(left, z, 0.0)), 1 - 0.5 * _enp.exp(-_u.safe(~left, z, 0.0)))
