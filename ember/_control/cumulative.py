"""Cumulative products, extremes and log-sum-exps along an axis (cumsum is a primitive in _prims/windowed.py):
associative scans of the elementwise primitives, so their derivatives, batching and forward mode are those of
the operations they are made of."""
from __future__ import annotations

from typing import Any, Callable

from ember import _prims as lax
from ember._control.loops import associative_scan
from ember._core import aval_of
from ember._core import dtypes as dt
from ember._core.checks import normalize_axis, static_int


def _cumulative(name: str, combine: Callable[[Any, Any], Any], kinds: str) -> Callable[..., Any]:
    def fn(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
        aval = aval_of(operand)
        if aval.dtype.kind not in kinds and not (dt.is_bool(aval.dtype) and "b" in kinds):
            raise TypeError(f"{name}: unsupported dtype {aval.str_short()}")
        axis = normalize_axis(name, static_int(name, "axis", axis), aval.ndim)
        if aval.shape[axis] == 0:
            return operand
        return associative_scan(combine, operand, reverse=bool(reverse), axis=axis)
    fn.__name__ = fn.__qualname__ = name
    return fn


def _logaddexp(x: Any, y: Any) -> Any:
    """log(exp(x) + exp(y)), stable, and -inf + -inf = -inf (no NaN)."""
    hi, lo = lax.max(x, y), lax.min(x, y)
    finite = lax.is_finite(hi)
    diff = lax.select(finite, lax.sub(lo, hi), lax.full_like(hi, 0))
    return lax.select(finite, lax.add(hi, lax.log1p(lax.exp(diff))), hi)


cumprod = _cumulative("cumprod", lax.mul, "fiuc")
cummax = _cumulative("cummax", lax.max, "fiub")
cummin = _cumulative("cummin", lax.min, "fiub")
cumlogsumexp = _cumulative("cumlogsumexp", _logaddexp, "f")
cumprod.__doc__ = "The running product along axis (like jax.lax.cumprod); reverse runs from the end."
cummax.__doc__ = "The running maximum along axis (like jax.lax.cummax); reverse runs from the end."
cummin.__doc__ = "The running minimum along axis (like jax.lax.cummin); reverse runs from the end."
cumlogsumexp.__doc__ = "The running log(sum(exp)) along axis (like jax.lax.cumlogsumexp), computed stably."
