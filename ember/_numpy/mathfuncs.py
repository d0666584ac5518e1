"""More of numpy's elementwise functions, composed from ember's primitives: classification (isnan, isinf,
signbit, ...), float manipulation (copysign, frexp, ldexp, modf, spacing), hypot, logaddexp2, fmax/fmin,
angle conversions, integer functions (gcd, lcm, shifts, bit counts), the array API's names for them (acos,
bitwise_left_shift, pow, ...), and the complex-number functions (real, imag, conj, angle, iscomplex, ...)."""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as _np

from ember import _prims as lax
from ember._control import while_loop
from ember._core import aval_of, scalar_literal
from ember._core import dtypes as dt
from ember._core.dtypes import bool_
from ember._prims.checks import refuse_narrow
from ember._runtime.eager import fast_binary, fast_path, fast_static

from ember._numpy.promotion import _operand_array, _as_array, _elementwise, _to_inexact
from ember._numpy.ufuncs import (_promoted, _promoted_inexact, _unary_float, absolute, arctan2, invert, power,
                                 ufunc_slow)


_operand = _operand_array


def _dtype(x: Any) -> Any:
    return aval_of(x).dtype


def _zeros_bool(x: Any) -> Any:
    return lax.full(aval_of(x).shape, False, bool_)


# ---------------------------------------------------------------------------------------------------------------
# Classification
@fast_path
def isnan(x: Any) -> Any:
    x = _operand("isnan", x)
    if dt.is_complex(_dtype(x)):  # either part
        return lax.bitwise_or(isnan(lax.real(x)), isnan(lax.imag(x)))
    return lax.ne(x, x) if dt.is_float(_dtype(x)) else _zeros_bool(x)


@fast_path
def isinf(x: Any) -> Any:
    x = _operand("isinf", x)
    if dt.is_complex(_dtype(x)):  # either part
        return lax.bitwise_or(isinf(lax.real(x)), isinf(lax.imag(x)))
    return lax.eq(lax.abs(x), _np.inf) if dt.is_float(_dtype(x)) else _zeros_bool(x)


@fast_path
def isposinf(x: Any) -> Any:
    x = _operand("isposinf", x)
    return lax.eq(x, _np.inf) if dt.is_float(_dtype(x)) else _zeros_bool(x)


@fast_path
def isneginf(x: Any) -> Any:
    x = _operand("isneginf", x)
    return lax.eq(x, -_np.inf) if dt.is_float(_dtype(x)) else _zeros_bool(x)


@fast_path
def signbit(x: Any) -> Any:
    """True where the sign bit is set: negative numbers, -0.0 and NaNs with the sign bit (numpy). The narrow floats
    are refused, as JAX refuses them (with copysign and spacing, which read the sign bit)."""
    x = _operand("signbit", x)
    refuse_narrow("signbit", aval_of(x), "f")
    return _sign_bit(x)


def _sign_bit(x: Any) -> Any:
    """signbit of x, any dtype (float4_e2m1fn's read from its exact float32 value)."""
    d = _dtype(x)
    if d == dt.float4_e2m1fn:
        return _sign_bit(lax.convert_element_type(x, dt.float32))
    if dt.is_float(d):
        as_int = lax.bitcast_convert_type(x, _np.dtype(f"int{d.itemsize * 8}"))
        return lax.lt(as_int, scalar_literal(0, aval_of(as_int).dtype))
    if dt.is_signed_int(d):
        return lax.lt(x, scalar_literal(0, d))
    return _zeros_bool(x)


# ---------------------------------------------------------------------------------------------------------------
# Floating-point manipulation
@functools.partial(fast_binary, scalar_aval=_promoted_inexact)
def copysign(x1: Any, x2: Any) -> Any:
    """|x1| with the sign (bit) of x2, computed in the promoted floating-point dtype."""
    x1, x2 = _elementwise("copysign", x1, x2, inexact=True)
    refuse_narrow("signbit", aval_of(x2), "f")  # (JAX's copysign refuses them in its signbit)
    return _copysign(x1, x2)


def _copysign(x1: Any, x2: Any) -> Any:
    magnitude = lax.abs(x1)
    return lax.select(_sign_bit(x2), lax.neg(magnitude), magnitude)


@functools.partial(fast_binary, scalar_aval=_promoted_inexact)
def hypot(x1: Any, x2: Any) -> Any:
    """sqrt(x1**2 + x2**2) without overflow or underflow in the squares (scaled by the larger magnitude);
    infinite if either is infinite, even against a NaN (C99)."""
    x1, x2 = _elementwise("hypot", x1, x2, inexact=True)
    a, b = lax.abs(x1), lax.abs(x2)
    big, small = lax.max(a, b), lax.min(a, b)
    safe_big = lax.select(lax.eq(big, 0.0), lax.full_like(big, 1.0), big)
    ratio = lax.div(small, safe_big)
    out = lax.mul(big, lax.sqrt(lax.add(1.0, lax.mul(ratio, ratio))))
    out = lax.select(lax.eq(big, 0.0), big, out)
    return lax.select(lax.bitwise_or(lax.eq(a, _np.inf), lax.eq(b, _np.inf)), lax.full_like(out, _np.inf), out)


@functools.partial(fast_binary, scalar_aval=_promoted_inexact)
@ufunc_slow
def logaddexp2(x1: Any, x2: Any) -> Any:
    """log2(2**x1 + 2**x2) without overflow: max + log2(1 + 2**-|x1 - x2|)."""
    x1, x2 = _elementwise("logaddexp2", x1, x2, inexact=True)
    big = lax.max(x1, x2)
    delta = lax.sub(x1, x2)
    tail = lax.div(lax.log1p(lax.pow(2.0, lax.neg(lax.abs(delta)))), math.log(2.0))
    out = lax.add(big, tail)
    # equal infinities: delta is NaN, the answer is that infinity; a NaN operand stays NaN
    return lax.select(lax.eq(x1, x2), lax.add(x1, 1.0), out)


def _nan_ignoring(name: str, pick: Any) -> Any:
    def fn(x1: Any, x2: Any) -> Any:
        x1, x2 = _elementwise(name, x1, x2)
        if not dt.is_float(_dtype(x1)):
            return pick(x1, x2)
        out = pick(x1, x2)
        out = lax.select(lax.ne(x1, x1), x2, out)
        return lax.select(lax.ne(x2, x2), x1, out)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Elementwise {name}: like {pick.__name__}, but a NaN loses against a number (numpy)."
    return fast_binary(fn, _promoted)


fmax = _nan_ignoring("fmax", lax.max)
fmin = _nan_ignoring("fmin", lax.min)


@functools.partial(fast_binary, scalar_aval=_promoted)
def heaviside(x1: Any, x2: Any) -> Any:
    """0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0 (NaN where x1 is NaN)."""
    x1, x2 = _elementwise("heaviside", x1, x2, inexact=True)
    out = lax.select(lax.lt(x1, 0.0), lax.full_like(x1, 0.0), lax.full_like(x1, 1.0))
    out = lax.select(lax.eq(x1, 0.0), x2, out)
    return lax.select(lax.ne(x1, x1), x1, out)


@fast_path
def deg2rad(x: Any) -> Any:
    return lax.mul(_to_inexact(x, "deg2rad"), math.pi / 180.0)


@fast_path
def rad2deg(x: Any) -> Any:
    return lax.mul(_to_inexact(x, "rad2deg"), 180.0 / math.pi)


radians, degrees = deg2rad, rad2deg


@fast_path
def fabs(x: Any) -> Any:
    """|x| as a float (integers are converted first, as numpy's fabs)."""
    return lax.abs(_to_inexact(x, "fabs"))


@fast_path
def sinc(x: Any) -> Any:
    """sin(pi x) / (pi x), 1 at 0 (with derivative 0 there)."""
    x = _to_inexact(x, "sinc")
    zero = lax.eq(x, 0.0)
    safe = lax.select(zero, lax.full_like(x, 1.0), x)
    pix = lax.mul(safe, math.pi)
    return lax.select(zero, lax.full_like(x, 1.0), lax.div(lax.sin(pix), pix))


def _int_of(d: Any) -> Any:
    return _np.dtype(f"int{d.itemsize * 8}")


def _float_layout(d: Any) -> tuple[int, int]:
    """(mantissa bits, exponent bias) of a float dtype."""
    info = dt.finfo(d)
    return int(info.nmant), 1 - int(info.minexp)


def frexp(x: Any) -> tuple[Any, Any]:
    """(mantissa, exponent) with x == mantissa * 2**exponent and 0.5 <= |mantissa| < 1; zeros, infinities and NaNs
    give (x, 0). The exponent is int32 (as numpy's and JAX's). Computed on the bits, so subnormals are exact even
    where the CPU flushes them to zero in arithmetic."""
    x = _to_inexact(x, "frexp")
    refuse_narrow("frexp", aval_of(x), "f")
    d = _dtype(x)
    nmant, bias = _float_layout(d)
    width = d.itemsize * 8
    idt = _int_of(d)

    def c(v: int) -> Any:
        return scalar_literal(v - (1 << width) if v >= 1 << (width - 1) else v, idt)

    bits = lax.bitcast_convert_type(x, idt)
    sign = lax.bitwise_and(bits, c(1 << (width - 1)))
    magnitude = lax.bitwise_and(bits, c((1 << (width - 1)) - 1))
    mant_mask = (1 << nmant) - 1
    field = lax.shift_right_logical(magnitude, c(nmant))
    mbits = lax.bitwise_and(magnitude, c(mant_mask))
    subnormal = lax.eq(field, c(0))
    # a subnormal's leading 1 shifted up to the implicit bit's place
    shift = lax.add(lax.sub(lax.clz(mbits), c(width - 1)), c(nmant))
    shift = lax.select(subnormal, shift, lax.full_like(shift, 0))
    mbits = lax.bitwise_and(lax.shift_left(mbits, shift), c(mant_mask))
    exponent = lax.select(subnormal, lax.sub(c(2 - bias), shift), lax.sub(field, c(bias - 1)))
    new_bits = lax.bitwise_or(lax.bitwise_or(sign, c((bias - 1) << nmant)), mbits)
    mantissa = lax.bitcast_convert_type(new_bits, d)
    special = lax.bitwise_or(lax.eq(magnitude, c(0)), lax.eq(field, c((1 << (width - 1 - nmant)) - 1)))
    mantissa = lax.select(special, x, mantissa)
    exponent = lax.select(special, lax.full_like(exponent, 0), exponent)
    return mantissa, lax.convert_element_type(exponent, _np.dtype(_np.int32))


def ldexp(x1: Any, x2: Any) -> Any:
    """x1 * 2**x2 for an integer x2, in x1's floating-point dtype, without intermediate overflow (the power is
    applied in two halves)."""
    x1 = _to_inexact(_operand("ldexp", x1), "ldexp")
    x2 = _operand("ldexp", x2)
    if not (dt.is_int(_dtype(x2)) or _dtype(x2) == bool_):
        raise TypeError(f"ldexp: the exponent x2 must be an integer array, got {aval_of(x2).str_short()}")
    refuse_narrow("ldexp", aval_of(x1), "f")
    x1, x2 = _elementwise("ldexp", x1, lax.convert_element_type(x2, _dtype(x1), aval_of(x1).weak_type))
    half = lax.floor(lax.div(x2, 2.0))
    return lax.mul(lax.mul(x1, lax.pow(2.0, half)), lax.pow(2.0, lax.sub(x2, half)))


def modf(x: Any) -> tuple[Any, Any]:
    """(fractional part, integral part), both with x's sign; infinities give (+-0, +-inf)."""
    x = _to_inexact(x, "modf")
    whole = lax.select(lax.lt(x, 0.0), lax.ceil(x), lax.floor(x))
    frac = lax.select(lax.eq(whole, 0.0), x, lax.sub(x, whole))  # |x| < 1: x itself (subnormals kept)
    frac = lax.select(lax.eq(lax.abs(x), _np.inf), lax.full_like(x, 0.0), frac)
    return _copysign(frac, x), whole


@fast_path
def spacing(x: Any) -> Any:
    """The distance from x to the next float away from zero (negative for negative x), as numpy."""
    x = _to_inexact(x, "spacing")
    refuse_narrow("signbit", aval_of(x), "f")  # (as JAX's spacing, which reads the sign bit)
    toward = lax.select(_sign_bit(x), lax.full_like(x, -_np.inf), lax.full_like(x, _np.inf))
    return lax.sub(lax.nextafter(x, toward), x)


@functools.partial(fast_binary, scalar_aval=_promoted_inexact)
def nextafter(x1: Any, x2: Any) -> Any:
    return lax.nextafter(*_elementwise("nextafter", x1, x2, inexact=True))


@functools.partial(fast_binary, scalar_aval=_promoted_inexact)
def float_power(x1: Any, x2: Any) -> Any:
    """x1 ** x2 computed in the promoted floating-point dtype (as jax.numpy; numpy widens to float64)."""
    return lax.pow(*_elementwise("float_power", x1, x2, inexact=True))


def nan_to_num(x: Any, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Any:
    """NaN -> nan, +inf -> posinf (default: the dtype's largest value), -inf -> neginf (default: its lowest); of a
    complex x, in each part. As JAX's (not numpy's): NaN is replaced first, and an infinite nan is then replaced
    as an infinity is (nan=-inf gives the lowest finite value unless neginf=-inf)."""
    x = _operand("nan_to_num", x)
    d = _dtype(x)
    if dt.is_complex(d):
        return lax.complex(*(nan_to_num(part, copy, nan, posinf, neginf) for part in (lax.real(x), lax.imag(x))))
    if not dt.is_float(d):
        return _as_array(x)
    info = dt.finfo(d)
    hi = float(info.max) if posinf is None else posinf
    lo = float(info.min) if neginf is None else neginf
    # NaN first, then the infinities of the result (JAX's order: nan=-inf gives the lowest finite value)
    out = lax.select(lax.ne(x, x), lax.full_like(x, nan), x)
    out = lax.select(lax.eq(out, _np.inf), lax.full_like(x, hi), out)
    return lax.select(lax.eq(out, -_np.inf), lax.full_like(x, lo), out)


# ---------------------------------------------------------------------------------------------------------------
# Integer functions
def _integer_operands(name: str, x1: Any, x2: Any) -> list[Any]:
    x1, x2 = _elementwise(name, x1, x2)
    if not (dt.is_int(_dtype(x1)) or _dtype(x1) == bool_):
        raise TypeError(f"{name}: arguments must be integers, got {aval_of(x1).str_short()} and "
                        f"{aval_of(x2).str_short()}")
    return [x1, x2]


@functools.partial(fast_binary, scalar_aval=_promoted)
def gcd(x1: Any, x2: Any) -> Any:
    """The greatest common divisor of |x1| and |x2| (Euclid's algorithm, elementwise, in a while_loop)."""
    x1, x2 = _integer_operands("gcd", x1, x2)
    if _dtype(x1) == bool_:
        return lax.bitwise_or(x1, x2)
    a, b = absolute(x1), absolute(x2)  # (unsigned ones as they are: lax.abs refuses uint4, as JAX's)
    zero = scalar_literal(0, _dtype(a))

    def body(ab: Any) -> Any:
        a, b = ab
        nonzero = lax.ne(b, zero)
        safe_b = lax.select(nonzero, b, lax.full_like(b, 1))
        return lax.select(nonzero, b, a), lax.select(nonzero, lax.rem(a, safe_b), b)

    a, b = while_loop(lambda ab: lax.reduce_max(lax.ne(ab[1], zero)), body, (a, b))
    return a


@functools.partial(fast_binary, scalar_aval=_promoted)
def lcm(x1: Any, x2: Any) -> Any:
    """The least common multiple of |x1| and |x2|; 0 if either is 0."""
    x1, x2 = _integer_operands("lcm", x1, x2)
    if _dtype(x1) == bool_:
        return lax.bitwise_and(x1, x2)
    g = gcd(x1, x2)
    zero = scalar_literal(0, _dtype(g))
    safe = lax.select(lax.eq(g, zero), lax.full_like(g, 1), g)
    return absolute(lax.mul(lax.div(absolute(x1), safe), absolute(x2)))


def _shift(name: str, right: bool) -> Any:
    def fn(x1: Any, x2: Any) -> Any:
        x1, x2 = _integer_operands(name, x1, x2)
        if _dtype(x1) == bool_:
            x1, x2 = (lax.convert_element_type(v, _np.dtype(_np.int8)) for v in (x1, x2))
        if not right:
            return lax.shift_left(x1, x2)
        # numpy: a right shift of a signed integer by its width or more gives 0 or -1 (the sign), as the
        # arithmetic shift does
        return (lax.shift_right_arithmetic if dt.is_signed_int(_dtype(x1)) else lax.shift_right_logical)(x1, x2)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"Elementwise x1 {'>>' if right else '<<'} x2 on integers "
                  f"({'arithmetic for signed, logical for unsigned' if right else 'zero fill'}).")
    return fast_binary(fn, _promoted)


left_shift = bitwise_left_shift = _shift("left_shift", right=False)
right_shift = bitwise_right_shift = _shift("right_shift", right=True)


@fast_path
def bitwise_count(x: Any) -> Any:
    """The number of 1 bits in |x|, as uint8 (numpy 2)."""
    x = _operand("bitwise_count", x)
    d = _dtype(x)
    if not (dt.is_int(d) or d == bool_):
        raise TypeError(f"bitwise_count: the argument must be an integer array, got {aval_of(x).str_short()}")
    if d == bool_:
        return lax.convert_element_type(x, _np.dtype(_np.uint8))
    magnitude = lax.abs(x) if dt.is_signed_int(d) else x
    return lax.convert_element_type(lax.population_count(magnitude), _np.dtype(_np.uint8))


# ---------------------------------------------------------------------------------------------------------------
# Trigonometric, hyperbolic and other transcendental functions on lax's primitives
arcsin = asin = _unary_float(lax.asin, "arcsin")
arccos = acos = _unary_float(lax.acos, "arccos")
arctan = atan = _unary_float(lax.atan, "arctan")
sinh = _unary_float(lax.sinh, "sinh")
cosh = _unary_float(lax.cosh, "cosh")
arcsinh = asinh = _unary_float(lax.asinh, "arcsinh")
arccosh = acosh = _unary_float(lax.acosh, "arccosh")
arctanh = atanh = _unary_float(lax.atanh, "arctanh")
cbrt = _unary_float(lax.cbrt, "cbrt")


@fast_path
def i0(x: Any) -> Any:
    """The modified Bessel function of the first kind, order 0: exp(|x|) * i0e(x)."""
    x = _to_inexact(x, "i0")
    return lax.mul(lax.exp(lax.abs(x)), lax.bessel_i0e(x))


# ---------------------------------------------------------------------------------------------------------------
# Complex-number functions (on a real array: its real part is itself, its imaginary part zero)
def _is_complex(x: Any) -> bool:
    return dt.is_complex(_dtype(x))


@fast_path
def real(x: Any) -> Any:
    """The real part (x itself for a real x)."""
    x = _as_array(_operand("real", x))
    return lax.real(x) if _is_complex(x) else x


@fast_path
def imag(x: Any) -> Any:
    """The imaginary part (zeros of x's dtype for a real x)."""
    x = _operand("imag", x)
    return lax.imag(x) if _is_complex(x) else lax.full_like(x, 0)


@fast_path
def conj(x: Any) -> Any:
    """The complex conjugate (x itself for a real x, as numpy and jax.numpy)."""
    x = _as_array(_operand("conj", x))
    return lax.conj(x) if _is_complex(x) else x


conjugate = conj


@fast_static
def angle(z: Any, deg: bool = False) -> Any:
    """The argument of z, atan2(imag, real) (pi for negative reals); in degrees with deg."""
    z = _to_inexact(z, "angle")
    if _is_complex(z):
        out = lax.atan2(lax.imag(z), lax.real(z))
        return lax.mul(out, 180.0 / math.pi) if deg else out
    out = lax.select(_sign_bit(z), lax.full_like(z, 180.0 if deg else math.pi), lax.full_like(z, 0.0))
    return lax.select(lax.ne(z, z), z, out)


@fast_path
def iscomplex(x: Any) -> Any:
    """Elementwise: whether the imaginary part is nonzero (False for a real x)."""
    x = _operand("iscomplex", x)
    return lax.ne(lax.imag(x), 0.0) if _is_complex(x) else _zeros_bool(x)


@fast_path
def isreal(x: Any) -> Any:
    """Elementwise: whether the imaginary part is zero (True for a real x)."""
    x = _operand("isreal", x)
    return lax.eq(lax.imag(x), 0.0) if _is_complex(x) else lax.full(aval_of(x).shape, True, bool_)


def iscomplexobj(x: Any) -> bool:
    """Whether x's dtype is complex (of an ember array, a ShapeDtypeStruct or anything with a dtype, a numpy
    value, a Python complex, ...)."""
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return bool(_np.iscomplexobj(x))
    try:
        return _np.dtype(dtype).kind == "c"
    except TypeError:  # (a key dtype)
        return False


def isrealobj(x: Any) -> bool:
    return not iscomplexobj(x)


# ---------------------------------------------------------------------------------------------------------------
# The array API's names for numpy functions
pow = power  # noqa: A001
atan2 = arctan2
bitwise_invert = invert


__all__ = ["isnan", "isinf", "isposinf", "isneginf", "signbit", "copysign", "hypot", "fmax", "fmin", "heaviside",
           "deg2rad", "rad2deg", "radians", "degrees", "fabs", "sinc", "frexp", "ldexp", "modf", "spacing", "nextafter",
           "float_power", "nan_to_num", "gcd", "lcm", "left_shift", "right_shift", "bitwise_left_shift",
           "bitwise_right_shift", "bitwise_count", "bitwise_invert", "arcsin", "asin", "arccos", "acos", "arctan",
           "atan", "sinh", "cosh", "arcsinh", "asinh", "arccosh", "acosh", "arctanh", "atanh", "cbrt", "i0", "real",
           "imag", "conj", "conjugate", "angle", "iscomplex", "isreal", "iscomplexobj", "isrealobj", "pow", "atan2"]
