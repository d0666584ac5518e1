"""ember.scipy.stats.betabinom: the beta-binomial distribution, as jax.scipy.stats.betabinom (NaN for n < 0,
a <= 0 or b <= 0)."""
from ember import numpy as _enp
from ember.scipy import special as _sp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpmf(k: _ArrayLike, n: _ArrayLike, a: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0) -> _Array:
    """log C(n, y) + log B(y + a, n - y + b) - log B(a, b), y = floor(k) - loc; -inf outside [0, n]."""
    y = _enp.floor(k) - loc
    out = (y < 0) | (y > n)
    y = _u.safe(~out, y, 0.0)
    n, a, b, y = _enp.broadcast_arrays(n, a, b, y)
    # the three log-beta functions from one (stacked) betaln call: one instance of it in the program
    comb, numerator, denominator = _sp.betaln(_enp.stack([n - y + 1, y + a, a]), _enp.stack([y + 1, n - y + b, b]))
    value = numerator - denominator - comb - _enp.log1p(n)
    return _u.nan_where((n < 0) | (a <= 0) | (b <= 0), _u.outside(out, value))


@_u.public
def pmf(k: _ArrayLike, n: _ArrayLike, a: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0) -> _Array:
    """The probability mass exp(logpmf)."""
    return _enp.exp(logpmf(k, n, a, b, loc))
