"""ember.scipy.stats.t: Student's t distribution with df degrees of freedom, as jax.scipy.stats.t."""
import math as _math

from ember import numpy as _enp
from ember.scipy import special as _sp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpdf(x: _ArrayLike, df: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """log Γ((df+1)/2) - log Γ(df/2) - log(π df scale²)/2 - (df+1)/2 log1p(z²/df)."""
    z = _u.standardize(x, loc, scale)
    half = 0.5 * df
    norm = _sp.gammaln(half + 0.5) - _sp.gammaln(half) - 0.5 * _enp.log(df * _math.pi) - _enp.log(scale)
    return norm - (half + 0.5) * _enp.log1p(z * z / df)


@_u.public
def pdf(x: _ArrayLike, df: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The density exp(logpdf)."""
    return _enp.exp(logpdf(x, df, loc, scale))
