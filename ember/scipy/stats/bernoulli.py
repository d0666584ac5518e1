"""ember.scipy.stats.bernoulli: the Bernoulli distribution on {loc, loc + 1}, as jax.scipy.stats.bernoulli."""
from ember import numpy as _enp
from ember.scipy import special as _sp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpmf(k: _ArrayLike, p: _ArrayLike, loc: _ArrayLike = 0) -> _Array:
    """y log p + (1 - y) log(1 - p), y = k - loc; -inf outside [0, 1]."""
    y = k - loc
    return _u.outside((y < 0) | (y > 1), _sp.xlogy(y, p) + _sp.xlog1py(1 - y, -p))


@_u.public
def pmf(k: _ArrayLike, p: _ArrayLike, loc: _ArrayLike = 0) -> _Array:
    """The probability mass exp(logpmf)."""
    return _enp.exp(logpmf(k, p, loc))


def _invalid(v: _Array, p: _Array) -> _Array:
    return _enp.isnan(v) | _enp.isnan(p) | (p < 0) | (p > 1)


@_u.public
def cdf(k: _ArrayLike, p: _ArrayLike) -> _Array:
    """0 for k < 0, 1 - p on [0, 1), 1 from 1 on; NaN for p outside [0, 1]."""
    return _u.nan_where(_invalid(k, p), _enp.where(k < 0, 0.0, _enp.where(k < 1, 1 - p, 1.0)))


@_u.public
def ppf(q: _ArrayLike, p: _ArrayLike) -> _Array:
    """0 for q <= 1 - p, else 1; NaN for q or p outside [0, 1]."""
    return _u.nan_where(_invalid(q, p) | (q < 0) | (q > 1), (q > 1 - p).astype(q.dtype))
