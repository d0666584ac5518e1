"""ember.scipy.stats.gennorm: the generalized normal distribution with shape beta (density ∝ exp(-|x|^beta)),
as jax.scipy.stats.gennorm."""
import math as _math

from ember import numpy as _enp
from ember.scipy import special as _sp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpdf(x: _ArrayLike, beta: _ArrayLike) -> _Array:
    """log(beta / 2) - log Γ(1/beta) - |x|^beta."""
    return _enp.log(beta) - _math.log(2.0) - _sp.gammaln(1 / beta) - _u.power(_enp.abs(x), beta)


@_u.public
def pdf(x: _ArrayLike, beta: _ArrayLike) -> _Array:
    """The density exp(logpdf)."""
    return _enp.exp(logpdf(x, beta))


@_u.public
def cdf(x: _ArrayLike, beta: _ArrayLike) -> _Array:
    """(1 + sign(x) P(1/beta, |x|^beta)) / 2, computed from Q = 1 - P (the regularized upper incomplete gamma
    function) as Q/2 below 0, 1 - Q/2 above (accurate in the left tail)."""
    half_q = 0.5 * _sp.gammaincc(1 / beta, _u.power(_enp.abs(x), beta))
    return _enp.where(x < 0, half_q, 1 - half_q)
