"""Elementwise functions of ember.numpy (numpy's ufuncs, plus where and clip) with broadcasting and promotion."""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as _np

from ember._core import dtypes as dt
from ember._core import Literal, ShapedArray, Tracer, aval_of, concrete_values, is_python_scalar
from ember._core.dtypes import bool_
from ember import _prims as lax
from ember._core import scalar_literal
from ember._control.custom import pure_custom_jvp
from ember._runtime.eager import fast_binary, fast_path, fast_static

from ember._numpy.dtypes import float32, float64
from ember._numpy.promotion import (_as_array, _as_bool, _as_operand, _broadcast_shapes, _broadcast_to_shape,
                                    _elementwise, _is_array, _literal_aval, _promote, _to_inexact)

# Every function here that takes arrays is wrapped in an eager fast path (ember._runtime.eager): called on concrete
# Arrays (and Python scalars) outside staging, it runs one cached program per signature, skipping the Python below.
# The scalar rules of fast_binary say which literal promotion makes of a Python scalar operand.
_promoted = _literal_aval


def _promoted_inexact(typed: list[Any]) -> Any:
    return _literal_aval(typed, inexact=True)


# The functions that jax.numpy makes ufunc objects (add, multiply, ..., ember._numpy.ufunc_api wraps these) take
# numpy's out= and where= keywords and refuse them as JAX does. A call with keywords never takes the eager fast
# path, so the refusal sits in the ordinary path (slow), and a call without keywords pays nothing for it.
UFUNC_REPR = "<jnp.ufunc '{}'>"  # (JAX's repr of a ufunc, which its errors show)


def ufunc_slow(fn: Any) -> Any:
    """fn, also taking numpy's out= and where= keywords, which raise NotImplementedError unless None (as JAX's)."""
    @functools.wraps(fn)
    def slow(*args: Any, out: Any = None, where: Any = None, **kwargs: Any) -> Any:
        for keyword, value in (("out", out), ("where", where)):
            if value is not None:
                raise NotImplementedError(f"{keyword} argument of {UFUNC_REPR.format(fn.__name__)}")
        return fn(*args, **kwargs)
    return slow


def _unary_float(prim_fn: Any, name: str) -> Any:
    def fn(x: Any) -> Any:
        return prim_fn(_to_inexact(x, name))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name}; integer inputs are promoted to float."
    return fast_path(fn)


def _unary(prim_fn: Any, name: str, ufunc: bool = False) -> Any:
    def fn(x: Any) -> Any:
        x = _as_operand(x)
        if is_python_scalar(x):
            x = _promote(name, x)[0]
        return prim_fn(x)
    fn.__name__ = fn.__qualname__ = name
    return fast_path(ufunc_slow(fn) if ufunc else fn)


def _rounding(prim_fn: Any, name: str) -> Any:
    def fn(x: Any) -> Any:
        x = _as_operand(x, name, 0)
        if not dt.is_float(dt.dtype_and_weak(x)[0]):
            return _as_array(x)  # integers and booleans are whole already: kept, dtype and all (numpy 2, JAX)
        return prim_fn(x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name}; integer and boolean inputs are returned unchanged, in their own dtype."
    return fast_path(fn)


def _binary(prim_fn: Any, name: str, ufunc: bool = False) -> Any:
    def fn(x: Any, y: Any) -> Any:
        return prim_fn(*_elementwise(name, x, y))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name} with numpy broadcasting and dtype promotion."
    return fast_binary(ufunc_slow(fn) if ufunc else fn, _promoted)


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
@fast_path
def isfinite(x: Any) -> Any:
    """Elementwise: finite (for complex x, both parts finite); integers and booleans are (no float needed: the 2-bit
    integers, which have no float type, included)."""
    x = _as_operand(x, "isfinite", 0)
    if dt.is_int(dt.dtype_and_weak(x)[0]) or dt.dtype_and_weak(x)[0] == bool_:
        return lax.full(() if is_python_scalar(x) else aval_of(x).shape, True, bool_)
    x = _to_inexact(x, "isfinite")
    if dt.is_complex(aval_of(x).dtype):
        return lax.bitwise_and(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
    return lax.is_finite(x)
negative = _unary(lax.neg, "negative", ufunc=True)
_abs = _unary(lax.abs, "absolute")


@fast_path
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


add = _binary(_bool_as(lax.bitwise_or, lax.add), "add", ufunc=True)
subtract = _binary(lax.sub, "subtract", ufunc=True)
multiply = _binary(_bool_as(lax.bitwise_and, lax.mul), "multiply", ufunc=True)
maximum = _binary(lax.max, "maximum", ufunc=True)
minimum = _binary(lax.min, "minimum", ufunc=True)
equal = _binary(lax.eq, "equal")
not_equal = _binary(lax.ne, "not_equal")
def _ordered(compare: Any) -> Any:
    """An order comparison; of complex operands, numpy's (and jax.numpy's) lexicographic order on (real, imag)."""
    def fn(x: Any, y: Any) -> Any:
        if not dt.is_complex(aval_of(x).dtype):
            return compare(x, y)
        rx, ry = lax.real(x), lax.real(y)
        return lax.select(lax.eq(rx, ry), compare(lax.imag(x), lax.imag(y)), compare(rx, ry))
    return fn


less = _binary(_ordered(lax.lt), "less")
less_equal = _binary(_ordered(lax.le), "less_equal")
greater = _binary(_ordered(lax.gt), "greater")
greater_equal = _binary(_ordered(lax.ge), "greater_equal")
bitwise_and = _binary(lax.bitwise_and, "bitwise_and", ufunc=True)
bitwise_or = _binary(lax.bitwise_or, "bitwise_or", ufunc=True)
bitwise_xor = _binary(lax.bitwise_xor, "bitwise_xor", ufunc=True)


@fast_path
def positive(x: Any) -> Any:
    """+x: x itself as an ember array, dtype and weak type kept (Python and numpy scalars and numpy arrays too)."""
    return _as_array(_as_operand(x, "positive", 0))


@fast_path
def tan(x: Any) -> Any:
    return lax.tan(_to_inexact(x))


@fast_path
def log2(x: Any) -> Any:
    x = _to_inexact(x)
    return lax.div(lax.log(x), math.log(2.0))


@fast_path
def log10(x: Any) -> Any:
    x = _to_inexact(x)
    return lax.div(lax.log(x), math.log(10.0))


@fast_path
def exp2(x: Any) -> Any:
    """2 ** x, as pow(2, x): exact for integral x and within an ulp elsewhere (exp(x * log(2)) is off by many
    ulps for large |x|, since the rounding error of x * log(2) is multiplied by x)."""
    x = _to_inexact(x)
    return lax.pow(2.0, x)


@fast_path
def rint(x: Any) -> Any:
    """Round to the nearest integer, halves to even; integers and booleans become floats (numpy, JAX)."""
    x = _as_operand(x, "rint", 0)
    d, weak = dt.dtype_and_weak(x)
    if not dt.is_float(d):
        return lax.convert_element_type(x, float64 if dt.is_64bit(d) else dt.default_float_dtype(), weak)
    return lax.round(x, 1)


@fast_static
def round(x: Any, decimals: int = 0) -> Any:  # noqa: A001
    x = _as_operand(x, "round", 0)
    if dt.is_complex(aval_of(x).dtype):  # each part (as numpy and JAX)
        return lax.complex(round(lax.real(x), decimals), round(lax.imag(x), decimals))
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


@fast_path
def square(x: Any) -> Any:
    """x * x; booleans square as the default integer (as JAX: square(True) is int32 1; numpy gives int8)."""
    x = _as_array(_as_operand(x, "square", 0))
    if aval_of(x).dtype == bool_:
        x = lax.convert_element_type(x, dt.default_int_dtype(), False)
    return lax.square(x)


@fast_path
def reciprocal(x: Any) -> Any:
    return divide(1.0, _to_inexact(x)) if not dt.is_inexact(aval_of(_as_operand(x)).dtype) else divide(1, x)


@fast_path
def invert(x: Any) -> Any:
    return lax.bitwise_not(_as_operand(x))


bitwise_not = invert


def _to_bool(typed: list[Any]) -> Any:
    """The literal of a Python scalar operand of a logical operation: its truth value."""
    return ShapedArray((), bool_, False)


@fast_path
def logical_not(x: Any) -> Any:
    return lax.bitwise_not(_as_bool(x))


@functools.partial(fast_binary, scalar_aval=_to_bool)
@ufunc_slow
def logical_and(x: Any, y: Any) -> Any:
    return bitwise_and(_as_bool(x), _as_bool(y))


@functools.partial(fast_binary, scalar_aval=_to_bool)
@ufunc_slow
def logical_or(x: Any, y: Any) -> Any:
    return bitwise_or(_as_bool(x), _as_bool(y))


@functools.partial(fast_binary, scalar_aval=_to_bool)
@ufunc_slow
def logical_xor(x: Any, y: Any) -> Any:
    return bitwise_xor(_as_bool(x), _as_bool(y))


@functools.partial(fast_binary, scalar_aval=_promoted_inexact)
def true_divide(x: Any, y: Any) -> Any:
    return lax.div(*_elementwise("divide", x, y, inexact=True))


divide = true_divide


# ---------------------------------------------------------------------------------------------------------------
# floor_divide, remainder, fmod, divmod. Floats follow numpy's npy_divmod; integers never divide by zero
# (numpy's results: x // 0 == x % 0 == 0) and INT_MIN // -1 wraps to INT_MIN, as in numpy.
def _division_operands(name: str, x: Any, y: Any) -> tuple[Any, Any]:
    """Promoted, broadcast operands of a division; booleans divide as default integers (as JAX)."""
    x, y = _elementwise(name, x, y)
    if aval_of(x).dtype == bool_:
        x, y = (lax.convert_element_type(v, dt.default_int_dtype()) for v in (x, y))
    if dt.is_complex(aval_of(x).dtype) and name != "power":
        raise TypeError(f"{name}: complex operands are not supported (as numpy and jax.numpy), got "
                        f"{aval_of(x).str_short()} and {aval_of(y).str_short()}")
    return x, y


def _like(value: float, x: Any) -> Any:
    return scalar_literal(value, aval_of(x).dtype, aval_of(x).weak_type)


def _int_divmod(x: Any, y: Any) -> tuple[Any, Any]:
    """Floor division and remainder (the divisor's sign) of integers: 0 and 0 where y == 0 (as numpy); x // -1 is
    -x (wrapping, so INT_MIN // -1 == INT_MIN). The division takes y as it is (checkify's division-by-zero check
    sees it, as JAX's): lax.div and lax.rem give XLA's defined values for a zero divisor and for INT_MIN / -1 and
    never trap (their lowering), and the selects below replace them."""
    by_zero = lax.eq(y, 0)
    quotient, rest = lax.div(x, y), lax.rem(x, y)  # truncating
    if dt.is_signed_int(aval_of(x).dtype):
        # round the quotient towards -inf, and give the remainder the divisor's sign, where the signs differ
        fix = lax.bitwise_and(lax.ne(rest, 0), lax.ne(lax.lt(rest, 0), lax.lt(y, 0)))
        quotient = lax.select(fix, lax.sub(quotient, _like(1, quotient)), quotient)
        rest = lax.select(fix, lax.add(rest, y), rest)
    zero = _like(0, quotient)
    return lax.select(by_zero, zero, quotient), lax.select(by_zero, zero, rest)


def _int_fmod(x: Any, y: Any) -> Any:
    """C's truncated remainder (the dividend's sign) of integers, 0 where y == 0 (as numpy; XLA's x % 0 is x)."""
    return lax.select(lax.eq(y, 0), _like(0, x), lax.rem(x, y))


def _computation_float(x: Any) -> tuple[Any, Any]:
    """float16 and bfloat16 operands computed in float32 (as numpy's half-precision loops), with the cast back."""
    d, weak = aval_of(x).dtype, aval_of(x).weak_type
    if d.itemsize >= 4:
        return lambda v: v, lambda v: v
    return (lambda v: lax.convert_element_type(v, float32, weak)), (lambda v: lax.convert_element_type(v, d, weak))


def _float_divmod(x: Any, y: Any) -> tuple[Any, Any]:
    """numpy's npy_divmod, elementwise: (floor(x / y) snapped to the exact quotient, x mod y with y's sign)."""
    up, down = _computation_float(x)
    x, y = up(x), up(y)
    zero = _like(0.0, x)
    fmod_ = lax.rem(x, y)  # C's fmod: exact, with x's sign
    quotient = lax.div(lax.sub(x, fmod_), y)  # very nearly an integer
    # give the remainder the divisor's sign: mod += y and quotient -= 1 where the signs differ
    fix = lax.bitwise_and(lax.ne(fmod_, 0.0), lax.ne(lax.lt(y, 0.0), lax.lt(fmod_, 0.0)))
    mod = lax.select(fix, lax.add(fmod_, y), fmod_)
    quotient = lax.select(fix, lax.sub(quotient, _like(1.0, quotient)), quotient)
    # a zero remainder is copysign(0, y) (y is neither 0 nor nan here: those give nan remainders)
    mod = lax.select(lax.eq(fmod_, 0.0), lax.select(lax.lt(y, 0.0), _like(-0.0, x), zero), mod)
    # snap the quotient to the nearest integer below; a zero quotient is copysign(0, x / y), x / y finite there
    floored = lax.floor(quotient)
    floored = lax.select(lax.gt(lax.sub(quotient, floored), 0.5), lax.add(floored, _like(1.0, floored)), floored)
    ratio = lax.div(x, y)
    floored = lax.select(lax.eq(quotient, 0.0), lax.mul(ratio, zero), floored)
    # division by zero: x / y (inf or nan) and fmod's nan
    by_zero = lax.eq(y, 0.0)
    floored = lax.select(by_zero, ratio, floored)
    mod = lax.select(by_zero, fmod_, mod)
    return down(floored), down(mod)


@pure_custom_jvp
def _float_remainder(x: Any, y: Any) -> Any:
    return _float_divmod(x, y)[1]


@_float_remainder.defjvp
def _float_remainder_jvp(primals: Any, tangents: Any) -> Any:
    """As JAX: d/dx (x mod y) = 1, d/dy (x mod y) = -floor_divide(x, y)."""
    (x, y), (tx, ty) = primals, tangents
    quotient, mod = _float_divmod(x, y)
    return mod, lax.sub(tx, lax.mul(ty, quotient))


@functools.partial(fast_binary, scalar_aval=_promoted)
def floor_divide(x: Any, y: Any) -> Any:
    """numpy's floor_divide: floor(x / y), exactly as numpy for floats (1.0 // 0.1 == 9.0); x // 0 == 0 for
    integers. The derivative is zero, as in JAX."""
    x, y = _division_operands("floor_divide", x, y)
    if dt.is_float(aval_of(x).dtype):
        return _float_divmod(lax.stop_gradient(x), lax.stop_gradient(y))[0]
    return _int_divmod(x, y)[0]


@functools.partial(fast_binary, scalar_aval=_promoted)
def remainder(x: Any, y: Any) -> Any:
    """numpy's remainder (mod, %): the result has the sign of the divisor; x % 0 == 0 for integers, nan for
    floats. Derivatives as JAX: 1 for x, -floor_divide(x, y) for y."""
    x, y = _division_operands("remainder", x, y)
    if dt.is_float(aval_of(x).dtype):
        return _float_remainder(x, y)
    return _int_divmod(x, y)[1]


mod = remainder


@functools.partial(fast_binary, scalar_aval=_promoted)
def fmod(x: Any, y: Any) -> Any:
    """numpy's fmod: C's truncated remainder, with the sign of the dividend; fmod(x, 0) is 0 for integers."""
    x, y = _division_operands("fmod", x, y)
    if dt.is_float(aval_of(x).dtype):
        up, down = _computation_float(x)
        return down(lax.rem(up(x), up(y)))
    return _int_fmod(x, y)


def divmod(x: Any, y: Any) -> tuple[Any, Any]:  # noqa: A001
    """numpy's divmod: (floor_divide(x, y), remainder(x, y))."""
    return floor_divide(x, y), remainder(x, y)


# ---------------------------------------------------------------------------------------------------------------
# power
def _known_value(x: Any) -> Any:
    """x's value when known at trace time (a Python or numpy scalar, a concrete array, a literal), else None."""
    if isinstance(x, Literal):
        return x.value
    if isinstance(x, Tracer):
        values = concrete_values([x])
        return None if values is None else values[0]
    return x


def _no_negative_exponents(x: Any, y: Any) -> None:
    value = _known_value(y)
    if value is not None and bool(_np.any(_np.asarray(value) < 0)):
        shown = (f"exponent {_np.asarray(value)[()]}" if aval_of(y).shape == ()
                 else f"exponent {aval_of(y).str_short()} with negative values")
        raise ValueError(f"power: integers to negative integer powers are not allowed (as numpy); got base "
                         f"{aval_of(x).str_short()} and {shown}; convert the base to a float dtype")


def _int_power(x: Any, y: Any) -> Any:
    """x ** y of integers, exact with wrap-around (as numpy), by repeated squaring over the exponent's bits: a
    fixed number of steps, so it traces, batches and compiles like any elementwise op. A negative exponent
    (only reachable with a traced exponent) gives the truncated 1 / x ** -y: 1 for x == 1, +-1 for x == -1,
    0 otherwise (also for x == 0, as integer division by zero)."""
    d = aval_of(x).dtype
    signed = dt.is_signed_int(d)
    result, base = None, x
    steps = d.itemsize * 8 - (1 if signed else 0)  # the sign bit of a negative exponent is handled below
    for i in range(steps):
        bit = lax.ne(lax.bitwise_and(y, _like(1 << i, y)), 0)
        result = (lax.select(bit, base, _like(1, x)) if result is None
                  else lax.select(bit, lax.mul(result, base), result))
        if i + 1 < steps:
            base = lax.mul(base, base)
    if signed:
        odd = lax.ne(lax.bitwise_and(y, _like(1, y)), 0)
        one, zero = _like(1, x), _like(0, x)
        inverse = lax.select(lax.eq(x, 1), one,
                             lax.select(lax.eq(x, -1), lax.select(odd, _like(-1, x), one), zero))
        result = lax.select(lax.lt(y, 0), inverse, result)
    return result


def _power(x: Any, y: Any) -> Any:
    if is_python_scalar(y) and isinstance(y, int) and not isinstance(y, bool) and _is_array(x):
        d = aval_of(x).dtype
        if dt.is_inexact(d) or (y >= 0 and d != bool_):
            return lax.integer_pow(x, y)
        if y < 0 and d != bool_:
            raise ValueError(f"power: integers to negative integer powers are not allowed (as numpy); got base "
                             f"{aval_of(x).str_short()} and exponent {y}; convert the base to a float dtype")
    x, y = _division_operands("power", x, y)
    if dt.is_inexact(aval_of(x).dtype):
        return lax.pow(x, y)
    if dt.is_signed_int(aval_of(y).dtype):
        _no_negative_exponents(x, y)
    if not _is_array(y) and aval_of(y).shape == () and _is_array(x):  # a constant scalar exponent: multiplications
        return lax.integer_pow(x, int(_known_value(y)))
    return _int_power(x, y)


def _float_power_literal(typed: list[Any]) -> Any:
    """Eager fast path of power: only where the result is a float. Integer powers check the exponent's values
    (no negative ones) on concrete operands, which a program compiled once per signature cannot."""
    literal = _literal_aval(typed)
    return literal if dt.is_inexact(literal.dtype) else None


_power_by_signature = fast_binary(_power, _float_power_literal)
_power_by_int_exponent = fast_static(_power)  # the exponent is a param of lax.integer_pow: one program per value


def power(x: Any, y: Any) -> Any:
    """numpy's power. Integer powers are exact (wrapping on overflow as numpy); integers to negative integer
    powers raise a ValueError when the exponent is known (see _int_power for a traced one). A Python int
    exponent is a short chain of multiplications (lax.integer_pow)."""
    return _power_by_int_exponent(x, y) if type(y) is int else _power_by_signature(x, y)


@functools.partial(fast_binary, scalar_aval=_promoted_inexact)
def arctan2(x: Any, y: Any) -> Any:
    return lax.atan2(*_elementwise("arctan2", x, y, inexact=True))


def _where_literals(typed: list[Any]) -> Any:
    """The literals where makes of Python scalar operands: the condition's truth value; x and y promoted together."""
    return [ShapedArray((), bool_, False)] + [_literal_aval(typed[1:])] * 2 if len(typed) == 3 else None


@functools.partial(fast_path, literal_avals=_where_literals)
def _where(condition: Any, x: Any, y: Any, /) -> Any:
    """Elementwise x where condition else y (numpy's three-operand where; ember.numpy.where, in selection.py, adds
    the one-operand form, which is nonzero)."""
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


__all__ = ["abs", "absolute", "arctan2", "around", "bitwise_not", "ceil", "clip", "cos", "divide", "divmod", "equal",
           "exp", "exp2", "expm1", "fix", "floor", "floor_divide", "fmod", "greater", "greater_equal", "invert",
           "isfinite", "less", "less_equal", "log", "log10", "log1p", "log2", "logical_not", "mod", "not_equal",
           "positive", "power", "reciprocal", "remainder", "rint", "round", "sign", "sin", "sqrt", "square", "tan",
           "tanh", "true_divide", "trunc"]
