"""ember.scipy.stats.truncnorm: the normal distribution N(loc, scale²) truncated to [loc + a scale, loc + b scale],
as jax.scipy.stats.truncnorm (NaN where a >= b)."""
from ember import numpy as _enp
from ember.scipy import special as _sp
from ember.scipy.stats import norm as _norm
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


def _log_mass(lo: _Array, hi: _Array) -> _Array:
    """log(Φ(hi) - Φ(lo)) for lo < hi, in whichever form keeps it accurate: from the left tail when hi <= 0, the
    right tail when lo > 0, else log1p(-Φ(lo) - Φ(-hi)). (Callers stack several pairs into one call: its
    special functions then appear once in the program.)"""
    lo, hi = _enp.broadcast_arrays(lo, hi)
    log_lo, log_hi, log_not_lo, log_not_hi = _sp.log_ndtr(_enp.stack([lo, hi, -lo, -hi]))
    right = lo > 0
    tail = _enp.where(right, _u.log_diff_exp(log_not_lo, log_not_hi), _u.log_diff_exp(log_hi, log_lo))
    central = _enp.log1p(-_enp.exp(log_lo) - _enp.exp(log_not_hi))
    return _enp.where(right | (hi <= 0), tail, central)


def _interior(a: _Array, b: _Array) -> _Array:
    """A point strictly inside (a, b), a placeholder for the points outside."""
    finite_a, finite_b = _enp.isfinite(a), _enp.isfinite(b)
    return _enp.where(finite_a & finite_b, 0.5 * (a + b),
                      _enp.where(finite_a, a + 1, _enp.where(finite_b, b - 1, _enp.zeros_like(a))))


@_u.public
def logpdf(x: _ArrayLike, a: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """norm.logpdf(x, loc, scale) - log(Φ(b) - Φ(a)); -inf outside the truncation."""
    z = _u.standardize(x, loc, scale)
    value = _norm.logpdf(x, loc, scale) - _log_mass(a, b)
    return _u.nan_where(a >= b, _u.outside((z < a) | (z > b), value))


@_u.public
def pdf(x: _ArrayLike, a: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """The density exp(logpdf)."""
    return _enp.exp(logpdf(x, a, b, loc, scale))


def _log_cdf_sf(x: _Array, a: _Array, b: _Array, loc: _Array, scale: _Array) -> tuple[_Array, _Array]:
    """(log cdf, log sf): log((Φ(z) - Φ(a)) / (Φ(b) - Φ(a))) and log((Φ(b) - Φ(z)) / (Φ(b) - Φ(a))), each taken
    as log1p(-exp(other)) where it is near 0; NaN where a >= b."""
    z0 = _u.standardize(x, loc, scale)
    inside = (z0 > a) & (z0 < b)
    z = _enp.where(inside, z0, _interior(a, b))
    a, b, z = _enp.broadcast_arrays(a, b, z)
    mass, mass_below, mass_above = _log_mass(_enp.stack([a, a, z]), _enp.stack([b, z, b]))
    log_cdf, log_sf = mass_below - mass, mass_above - mass
    log_cdf, log_sf = (_enp.where(log_cdf > -0.1, _enp.log1p(-_enp.exp(log_sf)), log_cdf),
                       _enp.where(log_sf > -0.1, _enp.log1p(-_enp.exp(log_cdf)), log_sf))
    above = z0 >= b
    log_cdf = _enp.where(inside, log_cdf, _enp.where(above, 0.0, -_enp.inf))
    log_sf = _enp.where(inside, log_sf, _enp.where(above, -_enp.inf, 0.0))
    return _u.nan_where(a >= b, log_cdf), _u.nan_where(a >= b, log_sf)


@_u.public
def logcdf(x: _ArrayLike, a: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """log((Φ(z) - Φ(a)) / (Φ(b) - Φ(a))); 0 above b, -inf below a."""
    return _log_cdf_sf(x, a, b, loc, scale)[0]


@_u.public
def cdf(x: _ArrayLike, a: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """exp(logcdf)."""
    return _enp.exp(_log_cdf_sf(x, a, b, loc, scale)[0])


@_u.public
def logsf(x: _ArrayLike, a: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """log((Φ(b) - Φ(z)) / (Φ(b) - Φ(a))); -inf above b, 0 below a."""
    return _log_cdf_sf(x, a, b, loc, scale)[1]


@_u.public
def sf(x: _ArrayLike, a: _ArrayLike, b: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """exp(logsf)."""
    return _enp.exp(_log_cdf_sf(x, a, b, loc, scale)[1])
