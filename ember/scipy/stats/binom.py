"""ember.scipy.stats.binom: the binomial distribution (n trials, success probability p), as
jax.scipy.stats.binom."""
from ember import numpy as _enp
from ember.scipy import special as _sp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpmf(k: _ArrayLike, n: _ArrayLike, p: _ArrayLike, loc: _ArrayLike = 0) -> _Array:
    """log C(n, y) + y log p + (n - y) log(1 - p), y = k - loc; -inf outside [0, n]."""
    y = k - loc
    ok = (y >= 0) & (y < n + 1)
    y = _u.safe(ok, y, 0.0)
    comb = _sp.gammaln(n + 1) - _sp.gammaln(y + 1) - _sp.gammaln(n - y + 1)
    return _u.outside(~ok, comb + _sp.xlogy(y, p) + _sp.xlog1py(n - y, -p))


@_u.public
def pmf(k: _ArrayLike, n: _ArrayLike, p: _ArrayLike, loc: _ArrayLike = 0) -> _Array:
    """The probability mass exp(logpmf)."""
    return _enp.exp(logpmf(k, n, p, loc))
