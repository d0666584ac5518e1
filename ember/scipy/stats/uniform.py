"""ember.scipy.stats.uniform: the uniform distribution on [loc, loc + scale], as jax.scipy.stats.uniform."""
from ember import numpy as _enp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """-log(scale) on [loc, loc + scale], -inf outside."""
    return _u.outside((x < loc) | (x > loc + scale), -_enp.log(scale))


@_u.public
def pdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The density exp(logpdf)."""
    return _enp.exp(logpdf(x, loc, scale))


@_u.public
def cdf(x: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """(x - loc) / scale clipped to [0, 1]."""
    return _enp.clip(_u.standardize(x, loc, scale), 0, 1)


@_u.public
def ppf(q: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """loc + scale q (NaN outside [0, 1])."""
    return _u.ppf_domain(q, loc + scale * q)
