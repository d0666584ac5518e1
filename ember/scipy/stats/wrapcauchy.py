"""ember.scipy.stats.wrapcauchy: the wrapped Cauchy distribution on [0, 2π] with shape c in (0, 1), as
jax.scipy.stats.wrapcauchy (NaN for c outside (0, 1))."""
import math as _math

from ember import numpy as _enp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpdf(x: _ArrayLike, c: _ArrayLike) -> _Array:
    """log(1 - c²) - log(2π) - log(1 + c² - 2c cos x); -inf outside [0, 2π]."""
    value = _enp.log1p(-c * c) - _math.log(2 * _math.pi) - _enp.log(1 + c * c - 2 * c * _enp.cos(x))
    return _u.nan_where((c <= 0) | (c >= 1), _u.outside((x < 0) | (x > 2 * _math.pi), value))


@_u.public
def pdf(x: _ArrayLike, c: _ArrayLike) -> _Array:
    """The density exp(logpdf)."""
    return _enp.exp(logpdf(x, c))
