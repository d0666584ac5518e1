"""Numerically stable log-sum-exp functions, with custom derivative rules (ember.custom_jvp) whose tangents stay
finite where the naive formulas overflow or produce nan."""
from __future__ import annotations

import functools
from typing import Any

from ember import _prims as lax
from ember._control.custom import pure_custom_jvp
from ember._core import aval_of
from ember._core.checks import normalize_axes
from ember._runtime.eager import fast_binary, fast_static
from ember._numpy.promotion import _elementwise, _literal_aval, _to_inexact
from ember._numpy.reductions import _sum_as
from ember._numpy.shape import expand_dims
from ember._numpy.ufuncs import ufunc_slow


def _finite_or_zero(x: Any) -> Any:
    return lax.select(lax.is_finite(x), x, lax.full_like(x, 0))


@pure_custom_jvp
def _logaddexp(x1: Any, x2: Any) -> Any:
    amax = lax.max(x1, x2)
    delta = lax.sub(x1, x2)
    stable = lax.add(amax, lax.log1p(lax.exp(lax.neg(lax.abs(delta)))))
    return lax.select(lax.ne(delta, delta), lax.add(x1, x2), stable)  # nan, or inf - inf: as numpy


@_logaddexp.defjvp
def _logaddexp_jvp(primals: Any, tangents: Any) -> Any:
    x1, x2 = primals
    t1, t2 = tangents
    out = _logaddexp(x1, x2)
    safe = _finite_or_zero(out)
    return out, lax.add(lax.mul(t1, lax.exp(lax.sub(x1, safe))), lax.mul(t2, lax.exp(lax.sub(x2, safe))))


@functools.partial(fast_binary, scalar_aval=functools.partial(_literal_aval, inexact=True))
@ufunc_slow
def logaddexp(x1: Any, x2: Any) -> Any:
    """log(exp(x1) + exp(x2)) without overflow, elementwise with broadcasting (like numpy.logaddexp)."""
    x1, x2 = _elementwise("logaddexp", x1, x2, inexact=True)
    return _logaddexp(x1, x2)


@functools.partial(pure_custom_jvp, nondiff_argnums=(1,))
def _logsumexp(a: Any, axes: tuple[int, ...]) -> Any:
    amax = _finite_or_zero(lax.reduce_max(a, axes))
    kept = tuple(d for d in range(aval_of(a).ndim) if d not in axes)
    shifted = lax.sub(a, lax.broadcast_in_dim(amax, aval_of(a).shape, kept))
    return lax.add(lax.log(_sum_as(lax.exp(shifted), axes, aval_of(a).dtype, aval_of(a).weak_type)), amax)


@_logsumexp.defjvp
def _logsumexp_jvp(axes: tuple[int, ...], primals: Any, tangents: Any) -> Any:
    (a,), (t,) = primals, tangents
    out = _logsumexp(a, axes)
    kept = tuple(d for d in range(aval_of(a).ndim) if d not in axes)
    weights = lax.exp(lax.sub(a, lax.broadcast_in_dim(_finite_or_zero(out), aval_of(a).shape, kept)))  # softmax
    return out, _sum_as(lax.mul(t, weights), axes, aval_of(t).dtype, aval_of(t).weak_type)



@fast_static
def logsumexp(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """log(sum(exp(a), axis)) without overflow (like jax.nn.logsumexp / scipy.special.logsumexp); its gradient
    is the softmax."""
    a = _to_inexact(a, "logsumexp")
    axes = normalize_axes("logsumexp", axis, aval_of(a).ndim)
    out = _logsumexp(a, axes)
    return expand_dims(out, axes) if keepdims and axes else out


__all__ = ["logsumexp"]
