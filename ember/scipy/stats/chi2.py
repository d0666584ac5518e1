"""ember.scipy.stats.chi2: the chi-squared distribution with df degrees of freedom, as jax.scipy.stats.chi2 (the
gamma distribution with shape df/2 and scale 2 scale)."""
from ember.scipy.stats import gamma as _gamma
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


@_u.public
def logpdf(x: _ArrayLike, df: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """gamma.logpdf(x, df/2, loc, 2 scale); -inf below loc."""
    return _gamma.logpdf(x, df / 2, loc, 2 * scale)


@_u.public
def pdf(x: _ArrayLike, df: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """gamma.pdf(x, df/2, loc, 2 scale)."""
    return _gamma.pdf(x, df / 2, loc, 2 * scale)


@_u.public
def cdf(x: _ArrayLike, df: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """gammainc(df/2, (x - loc) / (2 scale))."""
    return _gamma.cdf(x, df / 2, loc, 2 * scale)


@_u.public
def logcdf(x: _ArrayLike, df: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """log cdf."""
    return _gamma.logcdf(x, df / 2, loc, 2 * scale)


@_u.public
def sf(x: _ArrayLike, df: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """gammaincc(df/2, (x - loc) / (2 scale))."""
    return _gamma.sf(x, df / 2, loc, 2 * scale)


@_u.public
def logsf(x: _ArrayLike, df: _ArrayLike, loc: _ArrayLike = 0, scale: _ArrayLike = 1) -> _Array:
    """log sf."""
    return _gamma.logsf(x, df / 2, loc, 2 * scale)
