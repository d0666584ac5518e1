"""ember.scipy.stats.nbinom: the negative binomial distribution (failures before the n-th success), as
jax.scipy.stats.nbinom."""
from ember import numpy as _enp
from ember.scipy import special as _sp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpmf(k: _ArrayLike, n: _ArrayLike, p: _ArrayLike, loc: _ArrayLike = 0) -> _Array:
    """log Γ(y + n) - log Γ(n) - log y! + n log p + y log(1 - p), y = k - loc; -inf for y < 0."""
    y = k - loc
    below = y < 0
    y = _u.safe(~below, y, 0.0)
    comb = _sp.gammaln(y + n) - _sp.gammaln(n) - _sp.gammaln(y + 1)
    return _u.outside(below, comb + _sp.xlogy(n, p) + _sp.xlog1py(y, -p))


@_u.public
def pmf(k: _ArrayLike, n: _ArrayLike, p: _ArrayLike, loc: _ArrayLike = 0) -> _Array:
    """The probability mass exp(logpmf)."""
    return _enp.exp(logpmf(k, n, p, loc))
