"""ember.scipy.stats.dirichlet: the Dirichlet distribution on the simplex, as jax.scipy.stats.dirichlet (x has
the K components of alpha, or K - 1 with the last implied, along its first axis)."""
from ember import numpy as _enp
from ember.scipy import special as _sp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public(broadcast=False)
def logpdf(x: _ArrayLike, alpha: _ArrayLike) -> _Array:
    """Σ (alpha_i - 1) log x_i + log Γ(Σ alpha_i) - Σ log Γ(alpha_i); -inf off the simplex."""
    if alpha.ndim != 1:
        raise ValueError(f"dirichlet.logpdf: alpha must be one-dimensional, got shape {alpha.shape}")
    k = alpha.shape[0]
    if x.ndim == 0 or x.shape[0] not in (k, k - 1):
        raise ValueError(f"dirichlet.logpdf: x must have {k} or {k - 1} entries along its first axis (alpha has "
                         f"{k}), got shape {x.shape}")
    if x.shape[0] == k - 1:
        x = _enp.concatenate([x, 1 - _enp.sum(x, axis=0, keepdims=True)], axis=0)
    simplex = _enp.all(x > 0, axis=0) & (_enp.abs(_enp.sum(x, axis=0) - 1) < 1e-6)
    x = _u.safe(simplex, x, 1 / k)
    alpha_col = alpha.reshape((k,) + (1,) * (x.ndim - 1))
    value = _enp.sum(_sp.xlogy(alpha_col - 1, x), axis=0) + _sp.gammaln(_enp.sum(alpha)) - _enp.sum(
        _sp.gammaln(alpha))
    return _u.outside(~simplex, value)


@_u.public(broadcast=False)
def pdf(x: _ArrayLike, alpha: _ArrayLike) -> _Array:
    """The density exp(logpdf)."""
    return _enp.exp(logpdf(x, alpha))
