"""ember.scipy.stats.vonmises: the von Mises distribution on the circle (concentration kappa), as
jax.scipy.stats.vonmises (periodic in x; NaN for kappa <= 0)."""
import math as _math

from ember import numpy as _enp
from ember.scipy import special as _sp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpdf(x: _ArrayLike, kappa: _ArrayLike) -> _Array:
    """kappa (cos x - 1) - log(2π i0e(kappa))."""
    value = kappa * (_enp.cos(x) - 1) - _enp.log(2 * _math.pi * _sp.i0e(kappa))
    return _u.nan_where(kappa <= 0, value)


@_u.public
def pdf(x: _ArrayLike, kappa: _ArrayLike) -> _Array:
    """The density exp(logpdf)."""
    return _enp.exp(logpdf(x, kappa))
