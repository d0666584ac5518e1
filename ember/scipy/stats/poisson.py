"""ember.scipy.stats.poisson: the Poisson distribution with mean mu on loc, loc + 1, ..., as
jax.scipy.stats.poisson."""
import math as _math

from ember import numpy as _enp
from ember.scipy import special as _sp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpmf(k: _ArrayLike, mu: _ArrayLike, loc: _ArrayLike = 0) -> _Array:
    """y log(mu) - log(y!) - mu, y = k - loc; -inf for y < 0 and for non-integer k."""
    y = k - loc
    out = (y < 0) | (_enp.round(k) != k)
    y = _u.safe(~out, y, 0.0)
    return _u.outside(out, _sp.xlogy(y, mu) - _sp.gammaln(y + 1) - mu)


@_u.public
def pmf(k: _ArrayLike, mu: _ArrayLike, loc: _ArrayLike = 0) -> _Array:
    """The probability mass exp(logpmf)."""
    return _enp.exp(logpmf(k, mu, loc))


@_u.public
def cdf(k: _ArrayLike, mu: _ArrayLike, loc: _ArrayLike = 0) -> _Array:
    """gammaincc(floor(y) + 1, mu), y = k - loc; 0 for y < 0."""
    y = k - loc
    below = y < 0
    return _enp.where(below, 0.0, _sp.gammaincc(_enp.floor(_u.safe(~below, y, 0.0)) + 1, mu))


# mu < _SUMMED: the entropy by summing -p log p over k < _TERMS (the mass beyond is below 1e-30); above, by the
# asymptotic series 1/2 log(2πe mu) - 1/(12 mu) - 1/(24 mu²) - 19/(360 mu³) (error ~1e-10 at mu = 100).
_SUMMED, _TERMS = 100.0, 256


@_u.public
def entropy(mu: _ArrayLike, loc: _ArrayLike = 0) -> _Array:
    """The entropy -Σ_k p_k log p_k of the distribution (independent of loc), 0 at mu = 0, NaN for mu < 0."""
    positive = mu > 0
    small = _u.safe(positive & (mu < _SUMMED), mu)
    k = _enp.arange(_TERMS, dtype=mu.dtype).reshape((_TERMS,) + (1,) * mu.ndim)
    log_p = _sp.xlogy(k, small) - _sp.gammaln(k + 1) - small
    summed = -_enp.sum(_enp.exp(log_p) * log_p, axis=0)
    big = _u.safe(mu >= _SUMMED, mu, _SUMMED)
    inv = 1 / big
    series = 0.5 * _enp.log(2 * _math.pi * _math.e * big) - inv * (1 / 12 + inv * (1 / 24 + inv * (19 / 360)))
    value = _enp.where(mu < _SUMMED, summed, series)
    value = _enp.where(mu == 0, 0.0, _u.nan_where(mu < 0, value))
    return _enp.broadcast_to(value, _enp.broadcast_shapes(mu.shape, loc.shape))
