"""ember.scipy.special: jax.scipy.special's basics under the same names and with JAX's conventions (xlogy(0, y) is 0;
derivatives as JAX defines them)."""
from __future__ import annotations

from typing import Any

from ember import lax
from ember import numpy as enp
from ember._control.custom import pure_custom_jvp
from ember._core import dtypes as dt
from ember.nn import _functions as _nn
from ember.nn._functions import logsumexp as logsumexp


def _inexact(*xs: Any) -> list[Any]:
    """The arguments as arrays of their common float dtype (integers become the default float)."""
    arrays = [enp.asarray(x) for x in xs]
    dtype = enp.result_type(*arrays)
    if not dt.is_float(dtype):
        dtype = dt.default_float_dtype()
    return [a.astype(dtype) if a.dtype != dtype else a for a in arrays]


def _unary(fn: Any, name: str, doc: str) -> Any:
    def f(x: Any) -> Any:
        (x,) = _inexact(x)
        return fn(x)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


expit = _unary(lax.logistic, "expit", "The logistic sigmoid 1 / (1 + exp(-x)).")
erf = _unary(lax.erf, "erf", "The error function.")
erfc = _unary(lax.erfc, "erfc", "The complementary error function 1 - erf(x).")
erfinv = _unary(lax.erf_inv, "erfinv", "The inverse of erf.")
gammaln = _unary(lambda x: lax.lgamma(x), "gammaln", "log|Gamma(x)|.")
digamma = _unary(lax.digamma, "digamma", "The logarithmic derivative of Gamma.")


def softmax(x: Any, axis: Any = None) -> Any:
    """exp(x) / sum(exp(x)) over axis (scipy's default: all axes)."""
    return _nn.softmax(x, axis=axis)


def log_softmax(x: Any, axis: Any = None) -> Any:
    """x - logsumexp(x) over axis (scipy's default: all axes)."""
    return _nn.log_softmax(x, axis=axis)


def logit(x: Any) -> Any:
    """log(x / (1 - x)), the inverse of expit."""
    (x,) = _inexact(x)
    return enp.log(x / (1 - x))


@pure_custom_jvp
def _xlogy(x: Any, y: Any) -> Any:
    return enp.where(x != 0, x * enp.log(y), enp.zeros_like(x))


@_xlogy.defjvp
def _xlogy_jvp(primals: Any, tangents: Any) -> Any:
    (x, y), (tx, ty) = primals, tangents
    return _xlogy(x, y), tx * enp.log(y) + ty * x / y


@pure_custom_jvp
def _xlog1py(x: Any, y: Any) -> Any:
    return enp.where(x != 0, x * enp.log1p(y), enp.zeros_like(x))


@_xlog1py.defjvp
def _xlog1py_jvp(primals: Any, tangents: Any) -> Any:
    (x, y), (tx, ty) = primals, tangents
    return _xlog1py(x, y), tx * enp.log1p(y) + ty * x / (1 + y)


def xlogy(x: Any, y: Any) -> Any:
    """x * log(y), taken as 0 where x == 0 (also when y == 0)."""
    x, y = _inexact(x, y)
    shape = enp.broadcast_shapes(x.shape, y.shape)
    return _xlogy(enp.broadcast_to(x, shape), enp.broadcast_to(y, shape))


def xlog1py(x: Any, y: Any) -> Any:
    """x * log1p(y), taken as 0 where x == 0."""
    x, y = _inexact(x, y)
    shape = enp.broadcast_shapes(x.shape, y.shape)
    return _xlog1py(enp.broadcast_to(x, shape), enp.broadcast_to(y, shape))


def entr(x: Any) -> Any:
    """-x log(x) for x > 0, 0 at 0, -inf below."""
    (x,) = _inexact(x)
    return enp.where(x > 0, -_xlogy(x, enp.where(x > 0, x, 1)), enp.where(x == 0, 0.0, -enp.inf))


__all__ = ["digamma", "entr", "erf", "erfc", "erfinv", "expit", "gammaln", "log_softmax", "logit", "logsumexp",
           "softmax", "xlog1py", "xlogy"]
