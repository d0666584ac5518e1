"""Cumulative sums and products, as jax.numpy: cumsum, cumprod, nancumsum, nancumprod and the array API's
cumulative_sum / cumulative_prod. As JAX: booleans accumulate in the default integer (int32, int64 with
enable_x64), other integers keep their dtype in cumsum/cumprod/cumulative_prod, and cumulative_sum widens those
narrower than the default integer (unsigned ones to the default unsigned); axis=None flattens."""
from __future__ import annotations

from typing import Any, Callable

from ember import _prims as lax
from ember._control import cumprod as _lax_cumprod
from ember._core import aval_of, is_python_scalar
from ember._core import dtypes as dt
from ember._core.checks import normalize_axis, static_int

from ember._numpy.promotion import _as_operand, _promote
from ember._numpy.shape import ravel, shape


def _accumulated(op: str, a: Any, axis: Any, dtype: Any, promote_integers: bool) -> tuple[Any, int]:
    a = _as_operand(a, op, 0)
    if is_python_scalar(a):
        a = _promote(op, a)[0]
    if axis is None:
        a, axis = ravel(a), 0
    else:
        if not shape(a):
            raise ValueError(f"{op}: axis {axis} is out of bounds for a 0-d array")
        axis = normalize_axis(op, static_int(op, "axis", axis), len(shape(a)))
    d = aval_of(a).dtype
    if dtype is not None:
        target = dt.check_user_dtype(dtype, op)
    elif promote_integers and d in dt.NARROW_INTS:
        dt.refuse_narrow_int_promotion(op, d)
    elif dt.is_bool(d) or (promote_integers and dt.is_int(d) and d.itemsize < dt.default_int_dtype().itemsize):
        target = dt.default_uint_dtype() if dt.is_unsigned_int(d) else dt.default_int_dtype()
    else:
        target = d
    if target != d:
        a = lax.convert_element_type(a, target)
    return a, axis


def _make(op: str, scan: Callable[..., Any], nan_identity: Any = None) -> Callable[..., Any]:
    def fn(a: Any, axis: int | None = None, dtype: Any = None, out: None = None, *,
           promote_integers: bool = False) -> Any:
        if out is not None:
            raise NotImplementedError(f"{op}: out= is not supported (ember arrays are immutable)")
        a, axis = _accumulated(op, a, axis, dtype, promote_integers)
        if nan_identity is not None and dt.is_inexact(aval_of(a).dtype):
            a = lax.select(lax.ne(a, a), lax.full_like(a, nan_identity), a)  # NaNs count as the identity
        return scan(a, axis)
    fn.__name__ = fn.__qualname__ = op
    return fn


cumsum = _make("cumsum", lambda a, axis: lax.cumsum(a, axis))
cumprod = _make("cumprod", lambda a, axis: _lax_cumprod(a, axis))
nancumsum = _make("nancumsum", lambda a, axis: lax.cumsum(a, axis), 0)
nancumprod = _make("nancumprod", lambda a, axis: _lax_cumprod(a, axis), 1)
cumsum.__doc__ = "The running sum along axis (flattened when None), like numpy.cumsum."
cumprod.__doc__ = "The running product along axis (flattened when None), like numpy.cumprod."
nancumsum.__doc__ = "cumsum with NaNs counted as zero, like numpy.nancumsum."
nancumprod.__doc__ = "cumprod with NaNs counted as one, like numpy.nancumprod."


def _cumulative(op: str, fn: Callable[..., Any], identity: int, promote: bool) -> Callable[..., Any]:
    def array_api(x: Any, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Any:
        x = _as_operand(x, op, 0)
        ndim = len(shape(x))
        if axis is None:
            if ndim > 1:
                raise ValueError(f"{op}: axis is required for arrays of more than one dimension, got "
                                 f"{aval_of(x).str_short()}")
            axis = 0
        if ndim == 0:
            raise ValueError(f"{op}: x must have at least one dimension")
        if promote and dtype is None:
            dt.refuse_narrow_int_promotion(op, aval_of(x).dtype)
        out = fn(x, axis=axis, dtype=dtype, promote_integers=promote)
        if include_initial:
            axis = normalize_axis(op, axis, ndim)
            s = list(shape(out))
            s[axis] = 1
            out = lax.concatenate([lax.full(tuple(s), identity, aval_of(out).dtype), out], axis)
        return out
    array_api.__name__ = array_api.__qualname__ = op
    array_api.__doc__ = f"The array API's {op}: {fn.__name__} along axis, optionally starting with {identity}."
    return array_api


cumulative_sum = _cumulative("cumulative_sum", cumsum, 0, True)
cumulative_prod = _cumulative("cumulative_prod", cumprod, 1, False)  # as JAX: only the sum widens integers


__all__ = ["cumsum", "cumprod", "nancumsum", "nancumprod", "cumulative_sum", "cumulative_prod"]
