"""The top-level functions of ember.scipy.stats (mode, rankdata, sem), as jax.scipy.stats's: sort-based, so they
run under jit and vmap (nan_policy 'omit' and 'raise' are refused where JAX refuses them)."""
from __future__ import annotations

from typing import Any, NamedTuple

from ember import lax
from ember import numpy as enp
from ember._api import jit
from ember._core import dtypes as dt
from ember._core.checks import normalize_axis
from ember.scipy.stats import _util as u

_NAN_POLICIES = ("propagate", "omit", "raise")


class ModeResult(NamedTuple):
    mode: Any
    count: Any


def _nan_policy(name: str, nan_policy: str, omit: bool = False) -> None:
    if nan_policy not in _NAN_POLICIES:
        raise ValueError(f"{name}: illegal nan_policy {nan_policy!r}; expected one of {_NAN_POLICIES}")
    if nan_policy == "raise" or (nan_policy == "omit" and not omit):
        raise NotImplementedError(f"{name}: nan_policy={nan_policy!r} is not supported (as in JAX: NaNs cannot be "
                                  "checked for under jit; check for them before the call)")


def _array(name: str, a: Any) -> Any:
    return enp.asarray(u.check(name, ["a"], [a])[0])


def _runs(s: Any) -> tuple[Any, Any]:
    """For s sorted along its last axis: whether each entry starts a run of equal values (NaNs equal each other),
    and the index where its run starts."""
    n = s.shape[-1]
    differs = s[..., 1:] != s[..., :-1]
    if dt.is_float(s.dtype):
        differs &= ~(enp.isnan(s[..., 1:]) & enp.isnan(s[..., :-1]))
    first = enp.concatenate([enp.ones(s.shape[:-1] + (1,), bool), differs], axis=-1)
    idx = enp.broadcast_to(enp.arange(n), s.shape)
    return first, lax.cummax(enp.where(first, idx, 0), axis=s.ndim - 1)


@jit(static_argnums=1)
def _mode(x: Any, axis: int) -> ModeResult:
    s = enp.sort(enp.moveaxis(x, axis, -1), axis=-1)
    if s.shape[-1] == 0:
        shape = s.shape[:-1]
        return ModeResult(enp.full(shape, enp.nan, dt.default_float_dtype()), enp.zeros(shape, dt.default_int_dtype()))
    run_length = enp.arange(s.shape[-1]) - _runs(s)[1] + 1
    best = enp.argmax(run_length, axis=-1)[..., None]  # the first longest run: the smallest of the modes
    return ModeResult(enp.take_along_axis(s, best, axis=-1)[..., 0], enp.max(run_length, axis=-1))


def mode(a: Any, axis: int | None = 0, nan_policy: str = "propagate", keepdims: bool = False) -> ModeResult:
    """The most frequent value along axis (all values for None) and its count; of several, the smallest."""
    _nan_policy("mode", nan_policy)
    x = enp.atleast_1d(_array("mode", a))
    shape = x.shape
    if axis is None:
        x, ax = enp.ravel(x), 0
    else:
        ax = normalize_axis("mode", axis, x.ndim)
    result = _mode(x, ax)
    if keepdims:
        out = (1,) * len(shape) if axis is None else shape[:ax] + (1,) + shape[ax + 1:]
        result = ModeResult(result.mode.reshape(out), result.count.reshape(out))
    return result


@jit(static_argnums=1)
def _rankdata(x: Any, method: str) -> Any:
    """Ranks along the last axis; all NaN in a row with a NaN."""
    out_dtype = dt.default_float_dtype()
    order = enp.argsort(x, axis=-1, stable=True)
    inverse = enp.argsort(order, axis=-1)
    n = x.shape[-1]
    if method == "ordinal":
        ranks = (inverse + 1).astype(out_dtype)
    else:
        s = enp.take_along_axis(x, order, axis=-1)
        first, start = _runs(s)
        if method == "dense":
            by_sorted = enp.cumsum(first, axis=-1).astype(out_dtype)
        else:
            last = enp.concatenate([first[..., 1:], enp.ones(s.shape[:-1] + (1,), bool)], axis=-1)
            idx = enp.broadcast_to(enp.arange(n), s.shape)
            end = lax.cummin(enp.where(last, idx, n), axis=s.ndim - 1, reverse=True)
            by_sorted = {"min": start + 1, "max": end + 1, "average": 0.5 * (start + end) + 1}[method]
        ranks = enp.take_along_axis(by_sorted.astype(out_dtype), inverse, axis=-1)
    if dt.is_float(x.dtype):
        ranks = enp.where(enp.any(enp.isnan(x), axis=-1, keepdims=True), enp.nan, ranks)
    return ranks


def rankdata(a: Any, method: str = "average", *, axis: int | None = None, nan_policy: str = "propagate") -> Any:
    """The ranks (1 to n) of the values, ties resolved by method: 'average', 'min', 'max', 'dense' or 'ordinal';
    along axis, or over the flattened array for None. NaN everywhere (along the axis) where a NaN is present."""
    _nan_policy("rankdata", nan_policy)
    if method not in ("average", "min", "max", "dense", "ordinal"):
        raise ValueError(f"rankdata: unknown method {method!r}; expected 'average', 'min', 'max', 'dense' or "
                         "'ordinal'")
    x = _array("rankdata", a)
    if axis is None:
        return _rankdata(enp.ravel(x), method)
    ax = normalize_axis("rankdata", axis, x.ndim)
    return enp.moveaxis(_rankdata(enp.moveaxis(x, ax, -1), method), -1, ax)


def sem(a: Any, axis: int | None = 0, ddof: int = 1, nan_policy: str = "propagate", *, keepdims: bool = False) -> Any:
    """The standard error of the mean, std(a, ddof) / sqrt(n), along axis (all values for None); with
    nan_policy='omit', of the non-NaN values."""
    _nan_policy("sem", nan_policy, omit=True)
    (b,) = u.promote(_array("sem", a))
    if axis is not None:
        normalize_axis("sem", axis, b.ndim)
    if nan_policy == "omit":
        count = enp.sum(~enp.isnan(b), axis=axis, keepdims=keepdims)
        return enp.nanstd(b, axis=axis, ddof=ddof, keepdims=keepdims) / enp.sqrt(count).astype(b.dtype)
    size = b.size if axis is None else b.shape[axis]
    return enp.std(b, axis=axis, ddof=ddof, keepdims=keepdims) / enp.sqrt(size).astype(b.dtype)
