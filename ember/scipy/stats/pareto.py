"""ember.scipy.stats.pareto: the Pareto distribution with shape b on [loc + scale, inf), as
jax.scipy.stats.pareto."""
from ember import numpy as _enp
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


def _log_y(x: _Array, b: _Array, loc: _Array, scale: _Array) -> tuple[_Array, _Array]:
    """Whether x is below the support, and log((x - loc) / scale), 0 there."""
    below = x < loc + scale
    return below, _enp.log(_u.safe(~below, _u.standardize(x, loc, scale)))


@_u.public
def logpdf(x: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """log(b / scale) - (b + 1) log y, y = (x - loc) / scale; -inf below the support."""
    below, log_y = _log_y(x, b, loc, scale)
    return _u.outside(below, _enp.log(b) - _enp.log(scale) - (b + 1) * log_y)


@_u.public
def pdf(x: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The density exp(logpdf)."""
    return _enp.exp(logpdf(x, b, loc, scale))


@_u.public
def cdf(x: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """1 - y^-b, as -expm1(-b log y); 0 below the support."""
    return -_enp.expm1(-b * _log_y(x, b, loc, scale)[1])


@_u.public
def logcdf(x: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """log(1 - y^-b); -inf below the support."""
    below, log_y = _log_y(x, b, loc, scale)
    return _u.outside(below, _u.log1mexp(b * _u.safe(~below, log_y)))


@_u.public
def sf(x: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """y^-b; 1 below the support."""
    return _enp.exp(logsf(x, b, loc, scale))


@_u.public
def logsf(x: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """-b log y; 0 below the support."""
    return -b * _log_y(x, b, loc, scale)[1]


@_u.public
def ppf(q: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """loc + scale (1 - q)^(-1/b) (NaN outside [0, 1])."""
    return _u.ppf_domain(q, loc + scale * _enp.exp(-_enp.log1p(-q) / b))
