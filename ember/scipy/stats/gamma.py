"""ember.scipy.stats.gamma: the gamma distribution with shape a on [loc, inf), as jax.scipy.stats.gamma."""
from ember import numpy as _enp
from ember.scipy import special as _sp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpdf(x: _ArrayLike, a: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """(a - 1) log y - y - log Γ(a) - log(scale), y = (x - loc) / scale; -inf below loc."""
    ok = x >= loc
    y = _u.safe(ok, _u.standardize(x, loc, scale))
    return _u.outside(~ok, _sp.xlogy(a - 1, y) - y - _sp.gammaln(a) - _enp.log(scale))


@_u.public
def pdf(x: _ArrayLike, a: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The density exp(logpdf)."""
    return _enp.exp(logpdf(x, a, loc, scale))


def _y(x: _Array, loc: _Array, scale: _Array) -> tuple[_Array, _Array]:
    """Whether x is above loc, and y = (x - loc) / scale there (a placeholder 1 elsewhere)."""
    y = _u.standardize(x, loc, scale)
    above = ~(y <= 0)  # NaN counts as above, to come out NaN
    return above, _u.safe(above, y)


@_u.public
def cdf(x: _ArrayLike, a: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The regularized lower incomplete gamma function P(a, y); 0 below loc."""
    above, y = _y(x, loc, scale)
    return _enp.where(above, _sp.gammainc(a, y), 0.0)


def _log_cdf_sf(x: _Array, a: _Array, loc: _Array, scale: _Array) -> tuple[_Array, _Array]:
    """(log cdf, log sf), each as log1p(-other) where it is near 0 (the other is then small and accurate)."""
    above, y = _y(x, loc, scale)
    p, q = _sp.gammainc(a, y), _sp.gammaincc(a, y)
    log_cdf = _enp.where(p < 0.5, _enp.log(p), _enp.log1p(-q))
    log_sf = _enp.where(q < 0.5, _enp.log(q), _enp.log1p(-p))
    return _u.outside(~above, log_cdf), _enp.where(above, log_sf, 0.0)


@_u.public
def logcdf(x: _ArrayLike, a: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """log cdf: log P(a, y), or log1p(-Q(a, y)) where P > 1/2; -inf below loc."""
    return _log_cdf_sf(x, a, loc, scale)[0]


@_u.public
def sf(x: _ArrayLike, a: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The regularized upper incomplete gamma function Q(a, y); 1 below loc."""
    above, y = _y(x, loc, scale)
    return _enp.where(above, _sp.gammaincc(a, y), 1.0)


@_u.public
def logsf(x: _ArrayLike, a: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """log sf: log Q(a, y), or log1p(-P(a, y)) where Q > 1/2; 0 below loc."""
    return _log_cdf_sf(x, a, loc, scale)[1]
