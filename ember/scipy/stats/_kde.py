"""gaussian_kde: kernel density estimation with Gaussian kernels, as jax.scipy.stats.gaussian_kde (a pytree, so it
passes through jit, vmap and grad; evaluate/pdf/logpdf, the integrals, resample)."""
from __future__ import annotations

import math
from typing import Any, Callable

from ember import numpy as enp
from ember import random
from ember._api import jit
from ember.scipy import linalg
from ember.scipy import special
from ember.scipy.stats import _util as u
from ember.tree_util import register_pytree_node_class

_FIELDS = ("neff", "dataset", "weights", "covariance", "inv_cov")


@jit(static_argnums=0)
def _kernel_sums(in_log: bool, dataset: Any, weights: Any, points: Any, inv_cov: Any) -> Any:
    """Σ_j w_j N(points_i; dataset_j, cov) for each point (its log with in_log); dataset (d, n), points (d, m)."""
    dataset, weights, points, inv_cov = u.promote(dataset, weights, points, inv_cov)
    d = dataset.shape[0]
    whitening = enp.linalg.cholesky(inv_cov)  # inv_cov = W Wᵀ, so the Mahalanobis distance is |Wᵀ (x - y)|
    data, pts = dataset.T @ whitening, points.T @ whitening
    log_norm = enp.sum(enp.log(enp.diagonal(whitening))) - 0.5 * d * u.LOG_2PI
    arg = log_norm - 0.5 * enp.sum(enp.square(pts[:, None, :] - data[None, :, :]), axis=-1)  # (m, n)
    if in_log:
        return special.logsumexp(arg + enp.log(weights), axis=1)
    return enp.exp(arg) @ weights


@jit
def _fit(dataset: Any, weights: Any) -> tuple[Any, Any, Any, Any]:
    """The dataset, the normalized weights (uniform for None), the effective sample size and the weighted
    covariance of the data."""
    n = dataset.shape[1]
    weights = enp.full(n, 1.0 / n, dtype=dataset.dtype) if weights is None else weights / enp.sum(weights)
    covariance = enp.atleast_2d(enp.cov(dataset, rowvar=True, bias=False, aweights=weights))
    return dataset, weights, 1 / enp.sum(weights ** 2), covariance


@jit
def _scaled(data_covariance: Any, factor: Any) -> tuple[Any, Any]:
    """The kernel's covariance (the data's times factor²) and its inverse."""
    return data_covariance * factor ** 2, enp.linalg.inv(data_covariance) / factor ** 2


@jit
def _convolve(cov: Any, target: Any, weights: Any, means: Any) -> Any:
    """Σ_j weights_j N(means_i; target_j, cov) for each column of means (the Gaussian convolution integrals)."""
    d = cov.shape[0]
    chol = linalg.cho_factor(cov, lower=True)
    norm = 1.0 / (math.sqrt(2 * math.pi) ** d * enp.prod(enp.diag(chol[0])))
    diff = target[:, :, None] - means[:, None, :]  # (d, n, m)
    alpha = linalg.cho_solve(chol, diff.reshape(d, -1)).reshape(diff.shape)
    return norm * enp.sum(enp.exp(-0.5 * enp.sum(diff * alpha, axis=0)) * weights[:, None], axis=0)


@jit
def _box_1d(dataset: Any, weights: Any, covariance: Any, low: Any, high: Any) -> Any:
    sigma = enp.sqrt(covariance[0, 0])
    lo, hi = (low - dataset[0]) / sigma, (high - dataset[0]) / sigma
    return enp.sum(weights * (special.ndtr(hi) - special.ndtr(lo)))


@register_pytree_node_class
class gaussian_kde:  # noqa: N801 (scipy's name)
    """A Gaussian kernel density estimate of the d-dimensional dataset (d, n) (a 1-D array is d = 1), with
    bandwidth bw_method ('scott' (default), 'silverman', a scalar factor or a callable of the kde) and optional
    weights (n,)."""
    __slots__ = _FIELDS

    def __init__(self, dataset: Any, bw_method: None | str | Any | Callable[[Any], Any] = None,
                 weights: Any = None) -> None:
        dataset = enp.atleast_2d(u.check("gaussian_kde", ["dataset"], [dataset])[0])
        if not dataset.size > 1:
            raise ValueError("gaussian_kde: dataset should have multiple elements")
        d, n = dataset.shape
        if weights is not None:
            dataset, weights = u.promote(dataset, u.check("gaussian_kde", ["weights"], [weights])[0])
            weights = enp.atleast_1d(weights)
            if weights.ndim != 1 or weights.shape[0] != n:
                raise ValueError(f"gaussian_kde: weights should be one-dimensional of length n = {n}, got shape "
                                 f"{weights.shape}")
        else:
            (dataset,) = u.promote(dataset)
        dataset, weights, neff, data_covariance = _fit(dataset, weights)
        for name, value in (("dataset", dataset), ("weights", weights), ("neff", neff)):
            self._set(name, value)
        if bw_method is None or (isinstance(bw_method, str) and bw_method == "scott"):
            factor = neff ** (-1.0 / (d + 4))
        elif isinstance(bw_method, str) and bw_method == "silverman":
            factor = (neff * (d + 2) / 4.0) ** (-1.0 / (d + 4))
        elif callable(bw_method):
            factor = bw_method(self)
        elif not isinstance(bw_method, str) and enp.ndim(bw_method) == 0:
            factor = bw_method
        else:
            raise ValueError(f"gaussian_kde: bw_method should be 'scott', 'silverman', a scalar or a callable, got "
                             f"{bw_method!r}")
        covariance, inv_cov = _scaled(data_covariance, factor)
        self._set("covariance", covariance)
        self._set("inv_cov", inv_cov)

    def _set(self, name: str, value: Any) -> Any:
        object.__setattr__(self, name, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"gaussian_kde is immutable: cannot set {name!r}")

    def tree_flatten(self) -> tuple[tuple[Any, ...], None]:
        return tuple(getattr(self, f) for f in _FIELDS), None

    @classmethod
    def tree_unflatten(cls, aux_data: Any, children: Any) -> gaussian_kde:
        kde = cls.__new__(cls)
        for f, c in zip(_FIELDS, children):
            kde._set(f, c)
        return kde

    @property
    def d(self) -> int:
        """The number of dimensions."""
        return self.dataset.shape[0]

    @property
    def n(self) -> int:
        """The number of data points."""
        return self.dataset.shape[1]

    def _points(self, name: str, points: Any) -> Any:
        points = enp.atleast_2d(u.check(f"gaussian_kde.{name}", ["points"], [points])[0])
        d, m = points.shape[0], points.shape[-1]
        if points.ndim != 2 or d != self.d:
            if points.ndim == 2 and d == 1 and m == self.d:
                return points.reshape(self.d, 1)
            raise ValueError(f"gaussian_kde.{name}: points have dimension {d} (shape {points.shape}), the dataset "
                             f"has dimension {self.d}")
        return points

    def evaluate(self, points: Any) -> Any:
        """The estimated density at points (d, m) (or (m,) for d = 1, (d,) for one point)."""
        return _kernel_sums(False, self.dataset, self.weights, self._points("evaluate", points), self.inv_cov)

    __call__ = evaluate

    def pdf(self, x: Any) -> Any:
        """The estimated density at x (evaluate)."""
        return self.evaluate(x)

    def logpdf(self, x: Any) -> Any:
        """The log of the estimated density at x, by logsumexp (finite far from the data)."""
        return _kernel_sums(True, self.dataset, self.weights, self._points("logpdf", x), self.inv_cov)

    def integrate_gaussian(self, mean: Any, cov: Any) -> Any:
        """The integral of the estimate times the Gaussian N(mean, cov)."""
        mean = enp.atleast_1d(enp.squeeze(enp.asarray(mean)))
        cov = enp.atleast_2d(enp.asarray(cov))
        if mean.shape != (self.d,):
            raise ValueError(f"gaussian_kde.integrate_gaussian: mean must have shape ({self.d},), got {mean.shape}")
        if cov.shape != (self.d, self.d):
            raise ValueError(f"gaussian_kde.integrate_gaussian: cov must have shape ({self.d}, {self.d}), got "
                             f"{cov.shape}")
        return _convolve(self.covariance + cov, self.dataset, self.weights, mean[:, None])[0]

    def integrate_box_1d(self, low: Any, high: Any) -> Any:
        """The integral of a 1-D estimate over [low, high]."""
        if self.d != 1:
            raise ValueError("gaussian_kde.integrate_box_1d: only 1-D estimates are supported")
        if enp.ndim(low) != 0 or enp.ndim(high) != 0:
            raise ValueError("gaussian_kde.integrate_box_1d: low and high must be scalars")
        return _box_1d(self.dataset, self.weights, self.covariance, low, high)

    def integrate_kde(self, other: gaussian_kde) -> Any:
        """The integral of the product of this estimate and other."""
        if other.d != self.d:
            raise ValueError(f"gaussian_kde.integrate_kde: the estimates have dimensions {self.d} and {other.d}")
        small, large = (self, other) if self.n < other.n else (other, self)
        sums = _convolve(self.covariance + other.covariance, large.dataset, large.weights, small.dataset)
        return enp.sum(sums * small.weights)

    def resample(self, key: Any, shape: tuple[int, ...] = ()) -> Any:
        """Draw points from the estimate: an array (d, *shape)."""
        return _resample(self, key, tuple(shape))

    def integrate_box(self, low_bounds: Any, high_bounds: Any, maxpts: Any = None) -> Any:
        """Not supported (as in JAX): use integrate_box_1d."""
        raise NotImplementedError("gaussian_kde.integrate_box: only 1-D box integrals are supported; use "
                                  "integrate_box_1d")

    def set_bandwidth(self, bw_method: Any = None) -> None:
        """Not supported (as in JAX): the estimate is immutable; build a new one."""
        raise NotImplementedError("gaussian_kde.set_bandwidth: changing the bandwidth is not supported; build a new "
                                  "gaussian_kde")


@jit(static_argnums=2)
def _resample(kde: gaussian_kde, key: Any, shape: tuple[int, ...]) -> Any:
    index_key, noise_key = random.split(key)
    index = random.choice(index_key, kde.n, shape=shape, p=kde.weights)
    noise = random.multivariate_normal(noise_key, enp.zeros(kde.d, kde.covariance.dtype), kde.covariance,
                                       shape=shape, dtype=kde.dataset.dtype)
    return kde.dataset[:, index] + enp.moveaxis(noise, -1, 0)
