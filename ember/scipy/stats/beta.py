"""ember.scipy.stats.beta: the beta distribution on [loc, loc + scale], as jax.scipy.stats.beta (NaN for a, b or
scale <= 0)."""
from ember import numpy as _enp
from ember.scipy import special as _sp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpdf(x: _ArrayLike, a: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """(a - 1) log y + (b - 1) log1p(-y) - log B(a, b) - log(scale), y = (x - loc) / scale; -inf outside [0, 1]."""
    y = _u.standardize(x, loc, scale)
    out = (y < 0) | (y > 1)
    y = _u.safe(~out, y, 0.5)
    value = _sp.xlogy(a - 1, y) + _sp.xlog1py(b - 1, -y) - _sp.betaln(a, b) - _enp.log(scale)
    return _u.nan_where((a <= 0) | (b <= 0) | (scale <= 0), _u.outside(out, value))


@_u.public
def pdf(x: _ArrayLike, a: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The density exp(logpdf)."""
    return _enp.exp(logpdf(x, a, b, loc, scale))


def _y(x: _Array, loc: _Array, scale: _Array) -> _Array:
    """(x - loc) / scale, clipped to [0, 1]."""
    return _enp.clip(_u.standardize(x, loc, scale), 0, 1)


@_u.public
def cdf(x: _ArrayLike, a: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The regularized incomplete beta function I_y(a, b)."""
    return _sp.betainc(a, b, _y(x, loc, scale))


@_u.public
def logcdf(x: _ArrayLike, a: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """log cdf."""
    return _enp.log(cdf(x, a, b, loc, scale))


@_u.public
def sf(x: _ArrayLike, a: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """1 - cdf, as I_{1-y}(b, a)."""
    return _sp.betainc(b, a, 1 - _y(x, loc, scale))


@_u.public
def logsf(x: _ArrayLike, a: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """log sf."""
    return _enp.log(sf(x, a, b, loc, scale))
