"""ember.scipy.stats.geom: the geometric distribution (trials up to the first success) on 1 + loc, 2 + loc, ...,
as jax.scipy.stats.geom."""
from ember import numpy as _enp
from ember.scipy import special as _sp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpmf(k: _ArrayLike, p: _ArrayLike, loc: _ArrayLike = 0) -> _Array:
    """(y - 1) log(1 - p) + log p, y = k - loc; -inf for y <= 0."""
    y = k - loc
    return _u.outside(y <= 0, _sp.xlog1py(y - 1, -p) + _enp.log(p))


@_u.public
def pmf(k: _ArrayLike, p: _ArrayLike, loc: _ArrayLike = 0) -> _Array:
    """The probability mass exp(logpmf)."""
    return _enp.exp(logpmf(k, p, loc))
