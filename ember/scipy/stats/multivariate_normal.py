"""ember.scipy.stats.multivariate_normal: the multivariate normal distribution, as
jax.scipy.stats.multivariate_normal (a Cholesky factorization of cov; with allow_singular=True, scipy's
pseudo-inverse and pseudo-determinant from an eigendecomposition)."""
from ember import numpy as _enp
from ember.scipy import linalg as _linalg
from ember.scipy.stats import _util as _u
from ember.typing import Array as _Array, ArrayLike as _ArrayLike


def _quadratic_and_logdet(diff: _Array, cov: _Array) -> tuple[_Array, _Array]:
    """(diff Σ^-1 diff, log det Σ) by the Cholesky factor of Σ = cov (batched as the leading axes broadcast)."""
    n = cov.shape[-1]
    chol = _enp.linalg.cholesky(cov)
    logdet = 2 * _enp.sum(_enp.log(_enp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    if cov.ndim == 2:  # one factor for all points: solve for them as the columns of one matrix
        y = _linalg.solve_triangular(chol, diff.reshape(-1, n).T, lower=True).T.reshape(diff.shape)
    else:
        batch = _enp.broadcast_shapes(cov.shape[:-2], diff.shape[:-1])
        chol, diff = _enp.broadcast_to(chol, batch + (n, n)), _enp.broadcast_to(diff, batch + (n,))
        y = _linalg.solve_triangular(chol, diff[..., None], lower=True)[..., 0]
    return _enp.sum(y * y, axis=-1), logdet


@_u.public(static=("allow_singular",), broadcast=False)
def logpdf(x: _ArrayLike, mean: _ArrayLike, cov: _ArrayLike, allow_singular: bool | None = None) -> _Array:
    """-(n log 2π + log det cov + (x - mean)ᵀ cov⁻¹ (x - mean)) / 2, the last axis of x and mean the n variables;
    cov a scalar (isotropic) or (..., n, n)."""
    if allow_singular not in (None, False, True):
        raise ValueError(f"multivariate_normal.logpdf: allow_singular must be None or a bool, got {allow_singular!r}")
    if not mean.shape:
        return -0.5 * (x - mean) ** 2 / cov - 0.5 * (_u.LOG_2PI + _enp.log(cov))
    n = mean.shape[-1]
    diff = x - mean
    if diff.shape[-1] != n:
        raise ValueError(f"multivariate_normal.logpdf: x has {diff.shape[-1]} variables, mean {n}")
    if not cov.shape:
        return -0.5 * _enp.sum(diff * diff, axis=-1) / cov - 0.5 * n * (_u.LOG_2PI + _enp.log(cov))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal.logpdf: cov must have shape (..., {n}, {n}) for mean of shape "
                         f"{mean.shape}, got {cov.shape}")
    if allow_singular:
        s, u = _enp.linalg.eigh(cov)
        eps = (1e3 if s.dtype == _enp.float32 else 1e6) * _enp.finfo(s.dtype).eps * _enp.max(
            _enp.abs(s), axis=-1, keepdims=True)
        kept = s > eps
        proj = _enp.einsum("...i,...ij->...j", diff, u)
        quadratic = _enp.sum(_enp.where(kept, proj * proj / _u.safe(kept, s), 0.0), axis=-1)
        log_pdet = _enp.sum(_enp.log(_u.safe(kept, s)), axis=-1)
        rank = _enp.sum(kept, axis=-1).astype(s.dtype)
        off_support = _enp.sqrt(_enp.sum(_enp.where(kept, 0.0, proj * proj), axis=-1)) >= 1e3 * eps[..., 0]
        return _u.outside(off_support, -0.5 * (rank * _u.LOG_2PI + log_pdet + quadratic))
    quadratic, logdet = _quadratic_and_logdet(diff, cov)
    return -0.5 * (quadratic + logdet + n * _u.LOG_2PI)


@_u.public(broadcast=False)
def pdf(x: _ArrayLike, mean: _ArrayLike, cov: _ArrayLike) -> _Array:
    """The density exp(logpdf)."""
    return _enp.exp(logpdf(x, mean, cov))
