"""Elementwise functions of ember.numpy (numpy's ufuncs, plus where and clip) with broadcasting and promotion."""
from __future__ import annotations

import math
from typing import Any

from ember._core import dtypes as dt
from ember._core import aval_of, is_python_scalar
from ember._core.dtypes import bool_
from ember import _prims as lax
from ember._core import scalar_literal

from ember._numpy.dtypes import float64
from ember._numpy.promotion import (_as_array, _as_bool, _as_operand, _broadcast_shapes, _broadcast_to_shape,
                                    _elementwise, _is_array, _promote, _to_inexact)


def _unary_float(prim_fn: Any, name: str) -> Any:
    def fn(x: Any) -> Any:
        return prim_fn(_to_inexact(x, name))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name}; integer inputs are promoted to float."
    return fn


def _unary(prim_fn: Any, name: str) -> Any:
    def fn(x: Any) -> Any:
        x = _as_operand(x)
        if is_python_scalar(x):
            x = _promote(name, x)[0]
        return prim_fn(x)
    fn.__name__ = fn.__qualname__ = name
    return fn


def _rounding(prim_fn: Any, name: str) -> Any:
    def fn(x: Any) -> Any:
        x = _as_operand(x, name, 0)
        if not dt.is_float(dt.dtype_and_weak(x)[0]):
            return _as_array(x)  # integers and booleans are whole already: kept, dtype and all (numpy 2, JAX)
        return prim_fn(x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name}; integer and boolean inputs are returned unchanged, in their own dtype."
    return fn


def _binary(prim_fn: Any, name: str) -> Any:
    def fn(x: Any, y: Any) -> Any:
        return prim_fn(*_elementwise(name, x, y))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name} with numpy broadcasting and dtype promotion."
    return fn


exp = _unary_float(lax.exp, "exp")
log = _unary_float(lax.log, "log")
log1p = _unary_float(lax.log1p, "log1p")
expm1 = _unary_float(lax.expm1, "expm1")
sin = _unary_float(lax.sin, "sin")
cos = _unary_float(lax.cos, "cos")
tanh = _unary_float(lax.tanh, "tanh")
sqrt = _unary_float(lax.sqrt, "sqrt")
floor = _rounding(lax.floor, "floor")
ceil = _rounding(lax.ceil, "ceil")
trunc = fix = _rounding(lambda x: lax.select(lax.lt(x, 0), lax.ceil(x), lax.floor(x)), "trunc")
isfinite = _unary_float(lax.is_finite, "isfinite")
negative = _unary(lax.neg, "negative")
_abs = _unary(lax.abs, "absolute")


def absolute(x: Any) -> Any:
    """Elementwise absolute value; booleans and unsigned integers are returned unchanged (numpy, JAX)."""
    x = _as_operand(x, "absolute", 0)
    d = dt.dtype_and_weak(x)[0]
    return _as_array(x) if d == bool_ or dt.is_unsigned_int(d) else _abs(x)


abs = absolute  # noqa: A001
sign = _unary(lax.sign, "sign")

def _bool_as(logical: Any, arithmetic: Any) -> Any:
    """numpy's add/multiply of booleans are logical or/and."""
    def fn(x: Any, y: Any) -> Any:
        return (logical if aval_of(x).dtype == bool_ else arithmetic)(x, y)
    return fn


add = _binary(_bool_as(lax.bitwise_or, lax.add), "add")
subtract = _binary(lax.sub, "subtract")
multiply = _binary(_bool_as(lax.bitwise_and, lax.mul), "multiply")
maximum = _binary(lax.max, "maximum")
minimum = _binary(lax.min, "minimum")
equal = _binary(lax.eq, "equal")
not_equal = _binary(lax.ne, "not_equal")
less = _binary(lax.lt, "less")
less_equal = _binary(lax.le, "less_equal")
greater = _binary(lax.gt, "greater")
greater_equal = _binary(lax.ge, "greater_equal")
bitwise_and = _binary(lax.bitwise_and, "bitwise_and")
bitwise_or = _binary(lax.bitwise_or, "bitwise_or")
bitwise_xor = _binary(lax.bitwise_xor, "bitwise_xor")


def positive(x: Any) -> Any:
    return _as_operand(x)


def tan(x: Any) -> Any:
    x = _to_inexact(x)
    return lax.div(lax.sin(x), lax.cos(x))


def log2(x: Any) -> Any:
    x = _to_inexact(x)
    return lax.div(lax.log(x), math.log(2.0))


def log10(x: Any) -> Any:
    x = _to_inexact(x)
    return lax.div(lax.log(x), math.log(10.0))


def exp2(x: Any) -> Any:
    x = _to_inexact(x)
    return lax.exp(lax.mul(x, math.log(2.0)))


def rint(x: Any) -> Any:
    """Round to the nearest integer, halves to even; integers and booleans become floats (numpy, JAX)."""
    x = _as_operand(x, "rint", 0)
    d, weak = dt.dtype_and_weak(x)
    if not dt.is_float(d):
        return lax.convert_element_type(x, float64 if dt.is_64bit(d) else dt.default_float_dtype(), weak)
    return lax.round(x, 1)


def round(x: Any, decimals: int = 0) -> Any:  # noqa: A001
    x = _as_operand(x, "round", 0)
    if not dt.is_float(aval_of(x).dtype):
        if decimals < 0:
            raise NotImplementedError(f"round: integer inputs with decimals={decimals} < 0 are not supported "
                                      f"(got {aval_of(x).str_short()})")
        return _as_array(x)
    if decimals == 0:
        return lax.round(x, 1)
    scale = 10.0 ** decimals
    return lax.div(lax.round(lax.mul(x, scale), 1), scale)


around = round


def square(x: Any) -> Any:
    return lax.integer_pow(_unary(lambda v: v, "square")(x), 2)


def reciprocal(x: Any) -> Any:
    return divide(1.0, _to_inexact(x)) if not dt.is_float(aval_of(_as_operand(x)).dtype) else divide(1, x)


def invert(x: Any) -> Any:
    return lax.bitwise_not(_as_operand(x))


bitwise_not = invert


def logical_not(x: Any) -> Any:
    return lax.bitwise_not(_as_bool(x))


def logical_and(x: Any, y: Any) -> Any:
    return bitwise_and(_as_bool(x), _as_bool(y))


def logical_or(x: Any, y: Any) -> Any:
    return bitwise_or(_as_bool(x), _as_bool(y))


def logical_xor(x: Any, y: Any) -> Any:
    return bitwise_xor(_as_bool(x), _as_bool(y))


def true_divide(x: Any, y: Any) -> Any:
    return lax.div(*_elementwise("divide", x, y, inexact=True))


divide = true_divide


def floor_divide(x: Any, y: Any) -> Any:
    x, y = _elementwise("floor_divide", x, y)
    if dt.is_float(aval_of(x).dtype):
        return lax.floor(lax.div(x, y))
    if dt.is_unsigned_int(aval_of(x).dtype) or aval_of(x).dtype == bool_:
        return lax.div(x, y)
    # truncating division, corrected towards -inf where the signs differ and there is a remainder
    quotient = lax.div(x, y)
    remainder = lax.rem(x, y)
    adjust = lax.bitwise_and(lax.ne(remainder, 0), lax.ne(lax.lt(x, 0), lax.lt(y, 0)))
    return lax.select(adjust, lax.sub(quotient, 1), quotient)


def remainder(x: Any, y: Any) -> Any:
    """numpy's remainder: the result has the sign of the divisor."""
    x, y = _elementwise("remainder", x, y)
    r = lax.rem(x, y)
    if dt.is_unsigned_int(aval_of(x).dtype):
        return r
    fix = lax.bitwise_and(lax.ne(r, 0), lax.ne(lax.lt(r, 0), lax.lt(y, 0)))
    return lax.select(fix, lax.add(r, y), r)


mod = remainder


def power(x: Any, y: Any) -> Any:
    if is_python_scalar(y) and isinstance(y, int) and not isinstance(y, bool) and _is_array(x):
        if y >= 0 or dt.is_float(aval_of(x).dtype):
            return lax.integer_pow(x, y)
    x, y = _elementwise("power", x, y)
    d = aval_of(x).dtype
    if dt.is_float(d):
        return lax.pow(x, y)
    # integer powers: exact through float64 for results below 2**53
    as_float = lax.pow(lax.convert_element_type(x, float64), lax.convert_element_type(y, float64))
    return lax.convert_element_type(lax.round(as_float, 1), d, aval_of(x).weak_type)


def arctan2(x: Any, y: Any) -> Any:
    return lax.atan2(*_elementwise("arctan2", x, y, inexact=True))


def where(condition: Any, x: Any = None, y: Any = None) -> Any:
    """Elementwise x where condition else y (the one-argument form is not supported: its shape is dynamic)."""
    if x is None or y is None:
        raise TypeError("where: the one-argument form returns data-dependent shapes and is not supported; "
                        "pass x and y")
    cond = _as_bool(condition)
    x, y = _promote("where", x, y)
    shape = _broadcast_shapes("where", aval_of(cond).shape, aval_of(x).shape, aval_of(y).shape)
    cond, x, y = (a if aval_of(a).shape == () else _broadcast_to_shape(a, shape) for a in (cond, x, y))
    if is_python_scalar(cond):
        cond = scalar_literal(cond, bool_, False)
    return lax.select(cond, x, y)


def clip(x: Any, min: Any = None, max: Any = None, *, a_min: Any = None, a_max: Any = None) -> Any:  # noqa: A002
    lo = min if min is not None else a_min
    hi = max if max is not None else a_max
    if lo is not None:
        x = maximum(x, lo)
    if hi is not None:
        x = minimum(x, hi)
    return x
