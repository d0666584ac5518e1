"""ember.scipy.integrate: jax.scipy.integrate's trapezoid, the composite trapezoidal rule (ember.numpy's, which
jax.numpy.trapezoid and jax.scipy.integrate.trapezoid share in JAX too)."""
from __future__ import annotations

from ember.numpy import trapezoid as trapezoid

__all__ = ["trapezoid"]
