"""ember.scipy.stats.multinomial: the multinomial distribution (n trials over the categories of p, the last
axis), as jax.scipy.stats.multinomial (x and n must be integers)."""
from ember import numpy as _enp
from ember._core import dtypes as _dt
from ember.scipy import special as _sp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public(broadcast=False, promoted=False)
def logpmf(x: _ArrayLike, n: _ArrayLike, p: _ArrayLike) -> _Array:
    """log n! + Σ (x_i log p_i - log x_i!) over the last axis; -inf where Σ x_i != n."""
    for name, v in (("x", x), ("n", n)):
        if not _dt.is_int(_enp.asarray(v).dtype):
            raise ValueError(f"multinomial.logpmf: {name} must be of integer type, got dtype {_enp.asarray(v).dtype}")
    (p,) = _u.promote(p)
    total = _enp.sum(x, axis=-1)
    x, n = _enp.asarray(x).astype(p.dtype), _enp.asarray(n).astype(p.dtype)
    value = _sp.gammaln(n + 1) + _enp.sum(_sp.xlogy(x, p) - _sp.gammaln(x + 1), axis=-1)
    return _u.outside(total != n, value)


@_u.public(broadcast=False, promoted=False)
def pmf(x: _ArrayLike, n: _ArrayLike, p: _ArrayLike) -> _Array:
    """The probability mass exp(logpmf)."""
    return _enp.exp(logpmf(x, n, p))
