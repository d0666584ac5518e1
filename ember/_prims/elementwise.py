"""Elementwise primitives: arithmetic, transcendental functions, comparisons, logic and select.

Every primitive here is strict like jax.lax: operands share one dtype and one shape, except that a rank-0 operand
broadcasts. ember.numpy adds numpy-style broadcasting and dtype promotion on top. Most are made by the families
(families.py) from one derivative each: derivative(g, x, out) for unary ops, (d/dx, d/dy) for binary ones."""
from __future__ import annotations

import enum
from typing import Any, Callable, Sequence

import numpy as np

from ember._core import (NOT_DIFFERENTIABLE, ArrayMethods, Primitive, ShapedArray, aval_of, is_python_scalar,
                         scalar_literal)
from ember._core import dtypes as dt
from ember._core import NAN_CHECK
from ember._core.checks import static_int
from ember._core.pytree import tree_map
from ember._hlo import LoweringContext, backend_forms
from ember._prims.checks import (ANY, ANY_C, FLOAT, INEXACT, INTEGRAL, NUMERIC, NUMERIC_C, all_weak, check_dtype,
                                 check_same_dtypes, coerce_scalars, elementwise_shape, refuse_narrow)
from ember._prims.families import (ZERO, Lowering, binary, comparison, elementwise_batching, hlo_lowering, unary,
                                   unbroadcast)
from ember._prims.shape import convert_element_type, full_like, linear_jvp
from ember._prims import explicit


def _scalar_like(value: float, x: Any) -> Any:
    return scalar_literal(value, aval_of(x).dtype)


def kernel_or(name: str, lowering: Lowering) -> Lowering:
    """The lowering of the unary op `name`: a call of ember's transcendentals kernel where the CPU policy takes it
    (backend_forms.elementwise: float32, large arrays, on the CPU plugin), else `lowering` (XLA's ops). An equation
    asking for AccuracyMode.DEFAULT (the platform's default implementation: XLA's, whose values are JAX's; ember's
    samplers ask for it, to draw jax.random's values bit for bit) is always XLA's ops."""
    def rule(ctx: LoweringContext, x: str, *, accuracy: Any = None, **params: Any) -> list[str]:
        out = None if accuracy is AccuracyMode.DEFAULT else backend_forms.elementwise(ctx.emitter, name, x,
                                                                                       ctx.aval_out)
        return [out] if out is not None else lowering(ctx, x, **params)
    rule.reads_accuracy = True  # type: ignore[attr-defined]  (families.unary passes it the accuracy param)
    return rule


# ---------------------------------------------------------------------------------------------------------------
# Unary ops: derivative(g, x, out) is the derivative at x applied to g. The transcendental functions lower through
# kernel_or: ember's kernel for large float32 arrays on the CPU where it is faster (backend_forms.KERNEL_OPS).
neg_p = unary("neg", "negate", NUMERIC_C, lambda g, x, y: neg(g), checks=())
exp_p = unary("exp", "exponential", INEXACT, lambda g, x, y: mul(g, y),
              lowering=kernel_or("exp", hlo_lowering("exponential")), checks=NAN_CHECK)
log_p = unary("log", "log", INEXACT, lambda g, x, y: div(g, x), lowering=kernel_or("log", hlo_lowering("log")),
              checks=NAN_CHECK)


def _log1p_lowering(ctx: LoweringContext, x: str) -> list[str]:
    return [emit_log1p(ctx, x, ctx.avals_in[0])]


def emit_log1p(ctx: LoweringContext, x: str, aval: ShapedArray) -> str:
    """log(1 + x) as the XLA inside jaxlib computes it on the CPU, so values agree with JAX's bit for bit (the
    plugin's older XLA differs by an ulp in places): float32 takes log_plus_one for |x| < sqrt(2) - 1 and
    log(1 + x) outside; float16 goes through float32 (more accurate than the plugin's float16 log_plus_one);
    float64 and bfloat16 take log_plus_one as it is (already equal)."""
    if aval.dtype not in (dt.float32, dt.float16):  # (complex too)
        return ctx.op("stablehlo.log_plus_one", [x], aval)
    f32 = aval.update(dtype=dt.float32, weak_type=False)
    if aval.dtype == dt.float16:
        x = ctx.op("stablehlo.convert", [x], f32)
    small = ctx.op("stablehlo.log_plus_one", [x], f32)
    large = ctx.op("stablehlo.log", [ctx.op("stablehlo.add", [x, ctx.constant(1.0, f32)], f32)], f32)
    magnitude = ctx.op("stablehlo.abs", [x], f32)
    is_small = ctx.op("stablehlo.compare", [magnitude, ctx.constant(float(np.float32(np.sqrt(2) - 1)), f32)],
                      aval.update(dtype=dt.bool_, weak_type=False),
                      {"comparison_direction": "#stablehlo<comparison_direction LT>",
                       "compare_type": "#stablehlo<comparison_type FLOAT>"})
    out = ctx.op("stablehlo.select", [is_small, small, large], f32)
    return out if aval.dtype == dt.float32 else ctx.op("stablehlo.convert", [out], aval)


log1p_p = unary("log1p", None, INEXACT, lambda g, x, y: div(g, add(x, 1.0)),
                lowering=kernel_or("log1p", _log1p_lowering), checks=NAN_CHECK)
expm1_p = unary("expm1", "exponential_minus_one", INEXACT, lambda g, x, y: mul(g, add(y, 1.0)),
                lowering=kernel_or("expm1", hlo_lowering("exponential_minus_one")), checks=NAN_CHECK)
sin_p = unary("sin", "sine", INEXACT, lambda g, x, y: mul(g, cos(x)),
              lowering=kernel_or("sin", hlo_lowering("sine")), checks=NAN_CHECK)
cos_p = unary("cos", "cosine", INEXACT, lambda g, x, y: neg(mul(g, sin(x))),
              lowering=kernel_or("cos", hlo_lowering("cosine")), checks=NAN_CHECK)
tan_p = unary("tan", "tan", INEXACT, lambda g, x, y: mul(g, add(1.0, mul(y, y))),
              lowering=kernel_or("tan", hlo_lowering("tan")), checks=NAN_CHECK)
tanh_p = unary("tanh", "tanh", INEXACT, lambda g, x, y: mul(g, sub(1.0, mul(y, y))),
               lowering=kernel_or("tanh", hlo_lowering("tanh")), checks=NAN_CHECK)


def _logistic_lowering(ctx: LoweringContext, x: str, **params: Any) -> list[str]:
    """stablehlo.logistic; on the narrow floats 1 / (1 + exp(-x)), as JAX lowers it (XLA computes each of those
    ops in float32 and rounds it to the narrow type: the one logistic op rounds once, a different number)."""
    aval = ctx.aval_out
    if aval.dtype not in dt.NARROW_FLOATS:
        return hlo_lowering("logistic")(ctx, x, **params)
    one = ctx.constant(1.0, aval)
    exp = ctx.op("stablehlo.exponential", [ctx.op("stablehlo.negate", [x], aval)], aval)
    return [ctx.op("stablehlo.divide", [one, ctx.op("stablehlo.add", [one, exp], aval)], aval)]


logistic_p = unary("logistic", "logistic", INEXACT, lambda g, x, y: mul(g, mul(y, sub(1.0, y))),
                   lowering=kernel_or("logistic", _logistic_lowering), checks=NAN_CHECK)
sqrt_p = unary("sqrt", "sqrt", INEXACT, lambda g, x, y: div(g, mul(y, 2.0)), checks=NAN_CHECK)
rsqrt_p = unary("rsqrt", "rsqrt", INEXACT, lambda g, x, y: mul(g, mul(div(y, x), -0.5)), checks=NAN_CHECK)
floor_p = unary("floor", "floor", FLOAT, ZERO, checks=())
ceil_p = unary("ceil", "ceil", FLOAT, ZERO, checks=())
is_finite_p = unary("is_finite", "is_finite", FLOAT, NOT_DIFFERENTIABLE, out_dtype=dt.bool_, checks=())
not_p = unary("not", "not", INTEGRAL, NOT_DIFFERENTIABLE, checks=())
clz_p = unary("clz", "count_leading_zeros", "iu", NOT_DIFFERENTIABLE, checks=())
population_count_p = unary("population_count", "popcnt", "iu", NOT_DIFFERENTIABLE, checks=())


def _abs_lowering(ctx: LoweringContext, x: str) -> list[str]:
    if dt.is_unsigned_int(ctx.avals_in[0].dtype):
        return [x]
    return [ctx.op("stablehlo.abs", [x], ctx.aval_out)]


def _unit_conj(x: Any, out: Any) -> Any:
    """conj(x) / |x| for complex x (0 where x is 0, as JAX): the derivative of |x| is Re(conj(x)/|x| * t)."""
    safe = select(eq(out, _scalar_like(0.0, out)), _scalar_like(1.0, out), out)
    return div(conj(x), complex(safe, full_like(safe, 0.0)))


def _abs_slope(g: Any, x: Any) -> Any:
    """g times abs's slope at a real x: 1 for x >= 0 (also at 0, as JAX: grad(abs)(0.) is 1), -1 below (and at
    NaN)."""
    return select(ge(x, full_like(x, 0.0)), g, neg(g))


def _abs_derivative(g: Any, x: Any, out: Any) -> Any:
    if dt.is_complex(aval_of(x).dtype):
        return real(mul(g, _unit_conj(x, out)))
    return _abs_slope(g, x)


def _abs_transpose(ct: Any, x: Any, out: Any) -> Any:
    if dt.is_complex(aval_of(x).dtype):  # the transpose of Re(c * t): a real ct becomes ct * c
        return mul(complex(ct, full_like(ct, 0.0)), _unit_conj(x, out))
    return _abs_slope(ct, x)


# abs of a complex number is its (real) magnitude.
abs_p = unary("abs", None, NUMERIC_C, _abs_derivative, lowering=_abs_lowering, out_dtype=dt.real_dtype,
              transpose=_abs_transpose, check=lambda x: refuse_narrow("abs", x, "i"), checks=())


def _sign_lowering(ctx: LoweringContext, x: str) -> list[str]:
    aval = ctx.avals_in[0]
    if dt.is_unsigned_int(aval.dtype):  # stablehlo.sign takes signed and float operands only
        zero = ctx.constant(0, aval)
        nonzero = ctx.op("stablehlo.compare", [x, zero], aval.update(dtype=dt.bool_),
                         {"comparison_direction": "#stablehlo<comparison_direction NE>",
                          "compare_type": "#stablehlo<comparison_type UNSIGNED>"})
        return [ctx.op("stablehlo.convert", [nonzero], ctx.aval_out)]
    return [ctx.op("stablehlo.sign", [x], ctx.aval_out)]


# sign of a complex number is x / |x| (0 at 0), as numpy 2 and JAX; its derivative is taken as zero, as JAX's.
sign_p = unary("sign", None, NUMERIC_C, ZERO, lowering=_sign_lowering, checks=())

# round: rounding_method 0 rounds halves away from zero, 1 to the nearest even (as JAX).
round_p = unary("round", None, FLOAT, ZERO, lowering=lambda ctx, x, *, rounding_method: [ctx.op(
    "stablehlo.round_nearest_even" if rounding_method else "stablehlo.round_nearest_afz", [x], ctx.aval_out)],
                checks=())

# stop_gradient: the identity, with a zero derivative.
stop_gradient_p = unary("stop_gradient", None, ANY_C, ZERO, lowering=lambda ctx, x: [x], checks=())


# integer_pow: x ** y for a static Python int y, lowered to repeated squaring.
def _integer_pow_derivative(g: Any, x: Any, out: Any, *, y: int) -> Any:
    if y == 0:
        return full_like(g, 0)
    return g if y == 1 else mul(g, mul(float(y), integer_pow(x, y - 1)))


def _integer_pow_check(x: ShapedArray, *, y: int) -> None:
    if y < 0 and not dt.is_inexact(x.dtype):
        raise TypeError(f"integer_pow: negative exponent {y} needs a floating-point or complex operand, got "
                        f"{x.str_short()}")


def _integer_pow_lowering(ctx: LoweringContext, x: str, *, y: int) -> list[str]:
    aval = ctx.aval_out
    result, square, power = None, x, y if y >= 0 else -y
    while power:
        if power & 1:
            result = square if result is None else ctx.op("stablehlo.multiply", [result, square], aval)
        power >>= 1
        if power:
            square = ctx.op("stablehlo.multiply", [square, square], aval)
    if result is None:
        result = ctx.constant(1, aval)
    if y < 0:
        result = ctx.op("stablehlo.divide", [ctx.constant(1, aval), result], aval)
    return [result]


integer_pow_p = unary("integer_pow", None, NUMERIC_C, _integer_pow_derivative, lowering=_integer_pow_lowering,
                      check=_integer_pow_check, checks=NAN_CHECK)
# square(x) = x * x, one multiply (as integer_pow's y=2; its own primitive, as jax.lax's square_p)
square_p = unary("square", None, NUMERIC_C, lambda g, x, y: mul(g, mul(_scalar_like(2, x), x)),
                 lowering=lambda ctx, x: [ctx.op("stablehlo.multiply", [x, x], ctx.aval_out)], checks=NAN_CHECK)

# Inverse trigonometric and hyperbolic functions (CHLO ops, as jax.lax lowers them), cbrt and exp2.
def _one_minus_square(x: Any) -> Any:
    return sub(1.0, mul(x, x))


acos_p = unary("acos", "chlo.acos", INEXACT, lambda g, x, y: neg(mul(g, rsqrt(_one_minus_square(x)))), checks=NAN_CHECK)
asin_p = unary("asin", "chlo.asin", INEXACT, lambda g, x, y: mul(g, rsqrt(_one_minus_square(x))), checks=NAN_CHECK)
atan_p = unary("atan", "chlo.atan", INEXACT, lambda g, x, y: div(g, add(1.0, mul(x, x))), checks=NAN_CHECK)
sinh_p = unary("sinh", "chlo.sinh", INEXACT, lambda g, x, y: mul(g, cosh(x)), checks=NAN_CHECK)
cosh_p = unary("cosh", "chlo.cosh", INEXACT, lambda g, x, y: mul(g, sinh(x)), checks=NAN_CHECK)
asinh_p = unary("asinh", "chlo.asinh", INEXACT, lambda g, x, y: mul(g, rsqrt(add(mul(x, x), 1.0))),
                checks=NAN_CHECK)
acosh_p = unary("acosh", "chlo.acosh", INEXACT, lambda g, x, y: mul(g, rsqrt(mul(sub(x, 1.0), add(x, 1.0)))),
                checks=NAN_CHECK)
atanh_p = unary("atanh", "chlo.atanh", INEXACT, lambda g, x, y: div(g, _one_minus_square(x)), checks=NAN_CHECK)
# cbrt: d/dx x^(1/3) = 1 / (3 cbrt(x)^2)
cbrt_p = unary("cbrt", "cbrt", FLOAT, lambda g, x, y: div(g, mul(3.0, mul(y, y))), checks=NAN_CHECK)


def _exp2_lowering(ctx: LoweringContext, x: str) -> list[str]:
    """2**x as exp(x * log(2))."""
    ln2 = ctx.constant(float(np.log(2.0)), ctx.aval_out)
    return [ctx.op("stablehlo.exponential", [ctx.op("stablehlo.multiply", [x, ln2], ctx.aval_out)], ctx.aval_out)]


exp2_p = unary("exp2", None, INEXACT, lambda g, x, y: mul(g, mul(y, _scalar_like(float(np.log(2.0)), y))),
               lowering=_exp2_lowering, checks=NAN_CHECK)


# reduce_precision(x, exponent_bits, mantissa_bits): x rounded (to nearest even) to a float format with that many
# exponent and mantissa bits, kept in x's dtype. Its derivative rounds the tangent the same way (as JAX).
def _reduce_precision_check(x: ShapedArray, *, exponent_bits: int, mantissa_bits: int) -> None:
    if exponent_bits < 1 or mantissa_bits < 0:
        raise TypeError(f"reduce_precision: exponent_bits must be >= 1 and mantissa_bits >= 0, got "
                        f"{exponent_bits} and {mantissa_bits} for {x.str_short()}")


def _reduce_precision_lowering(ctx: LoweringContext, x: str, *, exponent_bits: int, mantissa_bits: int
                               ) -> list[str]:
    return [ctx.op("stablehlo.reduce_precision", [x], ctx.aval_out,
                   {"exponent_bits": f"{exponent_bits} : i32", "mantissa_bits": f"{mantissa_bits} : i32"})]


reduce_precision_p = unary("reduce_precision", None, FLOAT,
                           lambda g, x, y, **params: reduce_precision_p.bind(g, **params),
                           lowering=_reduce_precision_lowering, check=_reduce_precision_check, checks=())


# ---------------------------------------------------------------------------------------------------------------
# Binary ops: (d/dx, d/dy), each (g, x, y, out) -> that partial derivative applied to g.
def _identity(g: Any, x: Any, y: Any, out: Any) -> Any:
    return g


def _trunc(x: Any) -> Any:
    return mul(sign(x), floor(abs(x)))


def _atan2_partial(numerator: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    return lambda g, x, y, out: mul(g, div(numerator(x, y), add(mul(x, x), mul(y, y))))


def _minmax_partial(first_is_x: bool) -> Callable[..., Any]:
    """The derivative goes to the selected operand (the one equal to the output); ties split it evenly, as in
    JAX (whose rule compares with the output too, so complex operands need no ordering here)."""
    def partial(g: Any, x: Any, y: Any, out: Any) -> Any:
        this, other = (x, y) if first_is_x else (y, x)
        one, half, zero = (_scalar_like(v, g) for v in (1.0, 0.5, 0.0))
        weight = select(eq(this, out), select(eq(other, out), half, one), zero)
        return mul(g, weight)
    return partial


def _minmax_lowering(hlo_name: str, direction: str) -> Callable[..., list[str]]:
    """maximum/minimum; of complex operands, numpy's and JAX's lexicographic order on (real, imaginary)."""
    def rule(ctx: LoweringContext, x: str, y: str) -> list[str]:
        out = ctx.aval_out
        x, y = (ctx.broadcast(o, a, out.shape) for o, a in zip((x, y), ctx.avals_in))
        if not dt.is_complex(out.dtype):
            return [ctx.op(f"stablehlo.{hlo_name}", [x, y], out)]
        part, boolean = out.update(dtype=dt.real_dtype(out.dtype), weak_type=False), out.update(dtype=dt.bool_)

        def compare(a: str, b: str, how: str) -> str:
            return ctx.op("stablehlo.compare", [a, b], boolean, {
                "comparison_direction": f"#stablehlo<comparison_direction {how}>",
                "compare_type": "#stablehlo<comparison_type FLOAT>"})
        (rx, ix), (ry, iy) = ((ctx.op("stablehlo.real", [v], part), ctx.op("stablehlo.imag", [v], part))
                              for v in (x, y))
        pick_x = ctx.op("stablehlo.select", [compare(rx, ry, "EQ"), compare(ix, iy, direction),
                                             compare(rx, ry, direction)], boolean)
        return [ctx.op("stablehlo.select", [pick_x, x, y], out)]
    return rule


def _pow_dx(g: Any, x: Any, y: Any, out: Any) -> Any:
    slope = mul(y, pow(x, sub(y, 1.0)))  # d/dx x**y, taken as 0 where y == 0 (even at x == 0)
    return mul(g, select(eq(y, 0.0), _scalar_like(0.0, g), slope))


def _pow_dy(g: Any, x: Any, y: Any, out: Any) -> Any:
    safe_x = select(eq(x, 0.0), _scalar_like(1.0, x), x)  # log(x) * x**y, taken as 0 at x == 0
    return mul(g, mul(log(safe_x), out))


def _integer_division_lowering(hlo_name: str) -> Lowering:
    """An integer division (or remainder) that never divides by zero or INT_MIN by -1 in the compiled code: XLA
    defines those results (x / 0 is -1, all bits set; x % 0 is x; INT_MIN / -1 is INT_MIN; INT_MIN % -1 is 0), but the
    plugin's XLA folds a division of constants on the host, where it traps (SIGFPE: the process aborts). The divisor
    is 1 there, and XLA's defined values are selected; floats divide as they are."""
    plain = hlo_lowering(hlo_name)

    def rule(ctx: LoweringContext, x: str, y: str) -> list[str]:
        aval = ctx.aval_out
        dtype = aval.dtype
        if not dt.is_int(dtype):
            return plain(ctx, x, y)
        x, y = (ctx.broadcast(o, a, aval.shape) for o, a in zip((x, y), ctx.avals_in))
        pred = ShapedArray(aval.shape, dt.bool_)

        def equal(a: str, value: int) -> str:
            return ctx.emitter.compare(a, ctx.constant(value, aval), aval, "EQ")
        by_zero = equal(y, 0)
        unsafe = by_zero
        if dt.is_signed_int(dtype):
            overflow = ctx.op("stablehlo.and", [equal(x, dt.lowest(dtype)), equal(y, -1)], pred)
            unsafe = ctx.op("stablehlo.or", [by_zero, overflow], pred)
        safe = ctx.op("stablehlo.select", [unsafe, ctx.constant(1, aval), y], aval)
        out = ctx.op(f"stablehlo.{hlo_name}", [x, safe], aval)
        at_zero = ctx.constant(-1 if dt.is_signed_int(dtype) else dt.highest(dtype), aval) \
            if hlo_name == "divide" else x
        return [ctx.op("stablehlo.select", [by_zero, at_zero, out], aval)]
    return rule


add_p = binary("add", "add", NUMERIC_C, (_identity, _identity), checks=NAN_CHECK)
sub_p = binary("sub", "subtract", NUMERIC_C, (_identity, lambda g, x, y, out: neg(g)), checks=NAN_CHECK)
mul_p = binary("mul", "multiply", NUMERIC_C, (lambda g, x, y, out: mul(g, y), lambda g, x, y, out: mul(x, g)),
               checks=NAN_CHECK)
div_p = binary("div", "divide", NUMERIC_C, (lambda g, x, y, out: div(g, y),
                                          lambda g, x, y, out: neg(mul(g, div(out, y)))),
               lowering=_integer_division_lowering("divide"), checks=("div", "nan"))
rem_p = binary("rem", "remainder", NUMERIC, (_identity, lambda g, x, y, out: neg(mul(g, _trunc(div(x, y))))),
               lowering=_integer_division_lowering("remainder"), checks=NAN_CHECK)
atan2_p = binary("atan2", "atan2", FLOAT, (_atan2_partial(lambda x, y: y), _atan2_partial(lambda x, y: neg(x))),
                 checks=NAN_CHECK)
max_p = binary("max", "maximum", ANY_C, (_minmax_partial(True), _minmax_partial(False)),
               lowering=_minmax_lowering("maximum", "GT"), checks=())
min_p = binary("min", "minimum", ANY_C, (_minmax_partial(True), _minmax_partial(False)),
               lowering=_minmax_lowering("minimum", "LT"), checks=())
pow_p = binary("pow", "power", INEXACT, (_pow_dx, _pow_dy), checks=NAN_CHECK)
and_p = binary("and", "and", INTEGRAL, NOT_DIFFERENTIABLE, checks=())
or_p = binary("or", "or", INTEGRAL, NOT_DIFFERENTIABLE, checks=())
xor_p = binary("xor", "xor", INTEGRAL, NOT_DIFFERENTIABLE, checks=())
# Shifts (as StableHLO and jax.lax: a shift by the bit width or more gives 0, or the sign for an arithmetic one).
shift_left_p = binary("shift_left", "shift_left", "iu", NOT_DIFFERENTIABLE, checks=())
shift_right_logical_p = binary("shift_right_logical", "shift_right_logical", "iu", NOT_DIFFERENTIABLE, checks=())
shift_right_arithmetic_p = binary("shift_right_arithmetic", "shift_right_arithmetic", "iu", NOT_DIFFERENTIABLE,
                                  checks=())
# nextafter(x, y): the next representable value after x towards y (CHLO's, as jax.lax; not differentiable there).
nextafter_p = binary("nextafter", "chlo.next_after", FLOAT, NOT_DIFFERENTIABLE, checks=())



# ---------------------------------------------------------------------------------------------------------------
# mulhi(x, y): the high half of the double-width product of two integers (signed or unsigned, as jax.lax.mulhi).
mulhi_p = Primitive("mulhi", checks=())
mulhi_p.def_rule("sharding_rule", explicit.broadcasting("mulhi"))


@mulhi_p.def_rule("abstract_eval")
def _mulhi_abstract_eval(x: ShapedArray, y: ShapedArray) -> ShapedArray:
    check_same_dtypes("mulhi", [x, y])
    check_dtype("mulhi", x, "iu", "operands")
    return ShapedArray(elementwise_shape("mulhi", [x, y]), x.dtype, all_weak([x, y]))


def _shift_const(ctx: LoweringContext, op: str, x: str, bits: int, aval: ShapedArray) -> str:
    return ctx.op(f"stablehlo.{op}", [x, ctx.constant(bits, aval)], aval)


@mulhi_p.def_rule("lowering")
def _mulhi_lowering(ctx: LoweringContext, x: str, y: str) -> list[str]:
    """Up to 32 bits: the product in the double-width type, shifted down. 64 bits: the unsigned product of the
    32-bit halves (schoolbook), corrected for signed operands by subtracting the other operand where one is
    negative (the high half of a two's complement product)."""
    out = ctx.aval_out
    x, y = (ctx.broadcast(o, a, out.shape) for o, a in zip((x, y), ctx.avals_in))
    dtype, bits = out.dtype, out.dtype.itemsize * 8
    signed = dt.is_signed_int(dtype)
    if bits <= 32:
        wide = out.update(dtype=np.dtype(f"{'int' if signed else 'uint'}{2 * bits}"), weak_type=False)
        xw, yw = (ctx.op("stablehlo.convert", [v], wide) for v in (x, y))
        product = ctx.op("stablehlo.multiply", [xw, yw], wide)
        high = _shift_const(ctx, "shift_right_arithmetic" if signed else "shift_right_logical", product, bits, wide)
        return [ctx.op("stablehlo.convert", [high], out)]
    u64 = out.update(dtype=np.dtype(np.uint64), weak_type=False)
    xu, yu = (ctx.op("stablehlo.convert", [v], u64) if signed else v for v in (x, y))
    mask = ctx.constant(0xFFFFFFFF, u64)

    def lo(v: str) -> str:
        return ctx.op("stablehlo.and", [v, mask], u64)

    def hi(v: str) -> str:
        return _shift_const(ctx, "shift_right_logical", v, 32, u64)

    def mul64(a: str, b: str) -> str:
        return ctx.op("stablehlo.multiply", [a, b], u64)

    def add64(*vs: str) -> str:
        total = vs[0]
        for v in vs[1:]:
            total = ctx.op("stablehlo.add", [total, v], u64)
        return total
    x_lo, x_hi, y_lo, y_hi = lo(xu), hi(xu), lo(yu), hi(yu)
    lo_lo, hi_lo, lo_hi, hi_hi = mul64(x_lo, y_lo), mul64(x_hi, y_lo), mul64(x_lo, y_hi), mul64(x_hi, y_hi)
    cross = add64(hi(lo_lo), lo(hi_lo), lo_hi)
    result = add64(hi_hi, hi(hi_lo), hi(cross))
    if signed:
        boolean = out.update(dtype=dt.bool_, weak_type=False)
        zero_s, zero_u = ctx.constant(0, out.update(weak_type=False)), ctx.constant(0, u64)
        for a, b in ((x, yu), (y, xu)):
            negative = ctx.op("stablehlo.compare", [a, zero_s], boolean,
                              {"comparison_direction": "#stablehlo<comparison_direction LT>",
                               "compare_type": "#stablehlo<comparison_type SIGNED>"})
            result = ctx.op("stablehlo.subtract", [result, ctx.op("stablehlo.select", [negative, b, zero_u], u64)],
                            u64)
        result = ctx.op("stablehlo.convert", [result], out)
    return [result]


mulhi_p.mark_not_differentiable()
mulhi_p.def_rule("batching", elementwise_batching(mulhi_p))

eq_p = comparison("eq", "EQ", ANY_C)
ne_p = comparison("ne", "NE", ANY_C)  # (the order comparisons refuse complex operands, as jax.lax's)
lt_p = comparison("lt", "LT")
le_p = comparison("le", "LE")
gt_p = comparison("gt", "GT")
ge_p = comparison("ge", "GE")
# In IEEE's total order (jax.lax's sort comparators bind them; XLA has no total order on complex numbers):
eq_to_p = comparison("eq_to", "EQ", ANY, total_order=True)
le_to_p = comparison("le_to", "LE", total_order=True)
lt_to_p = comparison("lt_to", "LT", total_order=True)


# ---------------------------------------------------------------------------------------------------------------
# select(pred, on_true, on_false): linear in (on_true, on_false) for a fixed pred.
select_p = Primitive("select", fuses_data_movement=True, elementwise=True, checks=())
select_p.def_rule("sharding_rule", explicit.broadcasting("select_n"))


@select_p.def_rule("abstract_eval")
def _select_abstract_eval(pred: ShapedArray, on_true: ShapedArray, on_false: ShapedArray) -> ShapedArray:
    if pred.dtype != dt.bool_:
        raise TypeError(f"select: pred must be boolean, got {pred.str_short()}")
    check_same_dtypes("select", [on_true, on_false])
    shape = elementwise_shape("select", [pred, on_true, on_false])
    return ShapedArray(shape, on_true.dtype, all_weak([on_true, on_false]))


@select_p.def_rule("lowering")
def _select_lowering(ctx: LoweringContext, pred: str, on_true: str, on_false: str) -> list[str]:
    shape = ctx.aval_out.shape
    args = [ctx.broadcast(o, a, shape) for o, a in zip((pred, on_true, on_false), ctx.avals_in)]
    return [ctx.op("stablehlo.select", args, ctx.aval_out)]


select_p.def_rule("jvp", linear_jvp(select_p, linear_args=(1, 2)))


@select_p.def_rule("vjp")
def _select_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool]) -> list[Any]:
    pred, on_true, on_false = ins
    ct = cts[0]
    zero = _scalar_like(0, ct)
    return [None,
            unbroadcast(select(pred, ct, zero), aval_of(on_true)) if needs[1] else None,
            unbroadcast(select(pred, zero, ct), aval_of(on_false)) if needs[2] else None]


select_p.def_rule("batching", elementwise_batching(select_p))


# ---------------------------------------------------------------------------------------------------------------
# select_n(which, *cases): cases[which] elementwise (jax.lax's n-way select): which is boolean (two cases, False picks
# the first) or an integer array (any number of cases; one out of range picks an unspecified case), of the cases'
# shape or rank 0. Linear in the cases for a fixed which. A boolean which lowers to one stablehlo.select, an integer
# one to a balanced tree of them on `which < mid` (as JAX's lowering).
# (exact: a broadcast feeding it may be fused into its program, as into select's: eager dispatch's
# fuses_data_movement, though an integer `which` takes a compare per level)
select_n_p = Primitive("select_n", fuses_data_movement=True, elementwise=True, checks=())
select_n_p.def_rule("sharding_rule", explicit.broadcasting("select_n"))


@select_n_p.def_rule("abstract_eval")
def _select_n_abstract_eval(which: ShapedArray, *cases: ShapedArray) -> ShapedArray:
    if not cases:
        raise ValueError("select_n() must have at least one case")
    if dt.is_bool(which.dtype):
        if len(cases) > 2:
            raise TypeError(f"select_n: a boolean `which` cannot have > 2 cases, got {len(cases)}")
    elif not dt.is_int(which.dtype):
        raise TypeError(f"select_n: `which` must be boolean or integer type, got {which.str_short()}")
    if len({c.shape for c in cases}) != 1:
        raise TypeError(f"select_n: cases must have the same shapes, got {[c.shape for c in cases]}")
    check_same_dtypes("select_n", cases)
    if which.shape not in ((), cases[0].shape):
        raise TypeError(f"select_n: `which` must be scalar or have the same shape as cases, got `which` shape "
                        f"{which.shape} but case shape {cases[0].shape}")
    return ShapedArray(cases[0].shape, cases[0].dtype, all_weak(cases))


@select_n_p.def_rule("lowering")
def _select_n_lowering(ctx: LoweringContext, which: str, *cases: str) -> list[str]:
    out = ctx.aval_out
    which_aval = ctx.avals_in[0]
    which = ctx.broadcast(which, which_aval, out.shape)
    if dt.is_bool(which_aval.dtype):
        return [ctx.op("stablehlo.select", [which, cases[1], cases[0]], out)]
    index = which_aval.update(shape=out.shape, weak_type=False)

    def tree(values: Sequence[str], first: int) -> str:
        if len(values) == 1:
            return values[0]
        mid = len(values) // 2
        below = ctx.emitter.compare(which, ctx.constant(first + mid, index), index, "LT")
        return ctx.op("stablehlo.select", [below, tree(values[:mid], first), tree(values[mid:], first + mid)], out)
    return [tree(list(cases), 0)]


@select_n_p.def_rule("jvp")
def _select_n_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    out = select_n_p.bind(*primals)
    if all(t is None for t in tangents[1:]):
        return [out], [None]
    cases = [full_like(c, 0) if t is None else t for c, t in zip(primals[1:], tangents[1:])]
    return [out], [select_n_p.bind(primals[0], *cases)]


@select_n_p.def_rule("vjp")
def _select_n_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool]) -> list[Any]:
    which, ct = ins[0], cts[0]
    zero = full_like(ct, 0)
    result: list[Any] = [None]
    for i, need in enumerate(needs[1:]):
        if not need:
            result.append(None)
        elif dt.is_bool(aval_of(which).dtype):
            result.append(select_n_p.bind(which, *((ct, zero) if i == 0 else (zero, ct))))
        else:
            picked = eq(which, scalar_literal(i, aval_of(which).dtype, False))
            result.append(select_n_p.bind(picked, zero, ct))
    return result


select_n_p.def_rule("batching", elementwise_batching(select_n_p))


# ---------------------------------------------------------------------------------------------------------------
# Complex parts: real(x), imag(x), conj(x) of complex x, and complex(re, im). All are linear over the reals; their
# reverse rules are the transposes under JAX's pairing Re(ct * t) of a cotangent with a tangent (docs/complex.md):
# real's takes ct to (ct, 0), imag's to (0, -ct), conj's to conj(ct), complex's to (Re ct, -Im ct).
def _complex_part_lowering(hlo_name: str) -> Lowering:
    return lambda ctx, x: [ctx.op(f"stablehlo.{hlo_name}", [x], ctx.aval_out)]


def _real_transpose(ct: Any, x: Any, out: Any) -> Any:
    return complex(ct, full_like(ct, 0.0))


def _imag_transpose(ct: Any, x: Any, out: Any) -> Any:
    return complex(full_like(ct, 0.0), neg(ct))


def _conj_lowering(ctx: LoweringContext, x: str) -> list[str]:
    aval = ctx.aval_out
    part = aval.update(dtype=dt.real_dtype(aval.dtype), weak_type=False)
    re, im = ctx.op("stablehlo.real", [x], part), ctx.op("stablehlo.imag", [x], part)
    return [ctx.op("stablehlo.complex", [re, ctx.op("stablehlo.negate", [im], part)], aval)]


real_p = unary("real", None, "c", lambda g, x, y: real(g), lowering=_complex_part_lowering("real"),
               out_dtype=dt.real_dtype, transpose=_real_transpose, checks=())
imag_p = unary("imag", None, "c", lambda g, x, y: imag(g), lowering=_complex_part_lowering("imag"),
               out_dtype=dt.real_dtype, transpose=_imag_transpose, checks=())
conj_p = unary("conj", None, "c", lambda g, x, y: conj(g), lowering=_conj_lowering, checks=())

complex_p = binary("complex", "complex", FLOAT, (lambda g, x, y, out: _part_of(g, out, real),
                                                 lambda g, x, y, out: _part_of(g, out, imag)),
                   out_dtype=lambda dtype: _complex_of_parts(dtype), checks=())


def _complex_of_parts(dtype: np.dtype) -> np.dtype:
    if dtype not in (dt.float32, dt.float64):
        raise TypeError(f"complex: operands must be float32 or float64 (the parts of complex64 and complex128), "
                        f"got {dtype.name}")
    return dt.complex_dtype(dtype)


def _part_of(g: Any, out: Any, part: Callable[[Any], Any]) -> Any:
    """complex's partial derivatives: a real tangent g of re (im) is the tangent g (i g) of the output; a complex
    cotangent ct of the output is Re ct for re and -Im ct for im."""
    if dt.is_complex(aval_of(g).dtype):  # reverse mode
        return real(g) if part is real else neg(imag(g))
    zero = full_like(g, 0.0)
    return complex(g, zero) if part is real else complex(zero, g)


# ---------------------------------------------------------------------------------------------------------------
# Public functions (exported by ember.lax)
class Tolerance:
    """The accuracy asked of a transcendental function (like jax.lax.Tolerance), given as its accuracy=: an
    absolute tolerance atol, a relative one rtol and units in the last place ulps (at most two of them, at least
    one positive)."""

    def __init__(self, atol: float = 0.0, rtol: float = 0.0, ulps: int = 0):
        if atol < 0.0 or rtol < 0.0 or ulps < 0:
            raise ValueError("Tolerances must be non-negative.")
        if atol == 0.0 and rtol == 0.0 and ulps == 0:
            raise ValueError("At least one of atol, rtol, or ulps must be set.")
        self.atol, self.rtol, self.ulps = atol, rtol, ulps

    def __repr__(self) -> str:
        return f"Tolerance(atol={self.atol!r}, rtol={self.rtol!r}, ulps={self.ulps!r})"

    def __eq__(self, other: object) -> bool:  # (a param of equations: equal tolerances, equal equations)
        return type(other) is Tolerance and (self.atol, self.rtol, self.ulps) == (other.atol, other.rtol, other.ulps)

    def __hash__(self) -> int:
        return hash((Tolerance, self.atol, self.rtol, self.ulps))


class AccuracyMode(enum.Enum):
    """The implementation a transcendental function uses (like jax.lax.AccuracyMode), given as its accuracy=:
    HIGHEST, or DEFAULT (the platform's default)."""
    HIGHEST = 1
    DEFAULT = 2


def _check_accuracy(op: str, accuracy: Any) -> None:
    """accuracy= of exp, log, sin, ... : None, an AccuracyMode or a Tolerance. It selects among implementations
    where a platform has several, and is a param of the equation (printed as JAX prints it): on the CPU,
    AccuracyMode.DEFAULT is XLA's implementation (JAX's values, bit for bit), anything else (or none) lets ember
    pick its transcendentals kernel where that is faster and at least as accurate (backend_forms.KERNEL_OPS:
    within 1.05 ulp where XLA's are 0.56-65)."""
    if accuracy is not None and not isinstance(accuracy, AccuracyMode | Tolerance):
        raise NotImplementedError(f"{op}: accuracy {accuracy!r} is not supported: pass None, a lax.AccuracyMode or "
                                  "a lax.Tolerance")


def _bind_unary(prim: Primitive) -> Callable[[Any], Any]:
    def fn(x: Any) -> Any:
        return prim.bind(x)
    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = f"Elementwise {prim.name} (the `{prim.name}` primitive)."
    return fn


def _bind_with_accuracy(prim: Primitive) -> Callable[..., Any]:
    """A transcendental function taking JAX's accuracy= keyword (_check_accuracy)."""
    def fn(x: Any, *, accuracy: Tolerance | AccuracyMode | None = None) -> Any:
        if accuracy is None:
            return prim.bind(x)
        _check_accuracy(prim.name, accuracy)
        return prim.bind(x, accuracy=accuracy)
    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = (f"Elementwise {prim.name} (the `{prim.name}` primitive); accuracy: None, a lax.AccuracyMode or a "
                  "lax.Tolerance (AccuracyMode.DEFAULT: XLA's implementation, JAX's values; otherwise ember's "
                  "where faster and at least as accurate).")
    return fn


_PYTHON_SCALAR_TYPES = frozenset({bool, int, float})  # (the exact types is_python_scalar accepts)


def _bind_binary(prim: Primitive) -> Callable[[Any, Any], Any]:
    def fn(x: Any, y: Any) -> Any:
        if type(x) in _PYTHON_SCALAR_TYPES or type(y) in _PYTHON_SCALAR_TYPES:
            x, y = coerce_scalars((x, y))
        return prim.bind(x, y)
    fn.__name__ = fn.__qualname__ = prim.name if prim.name not in ("and", "or", "not") else f"bitwise_{prim.name}"
    fn.__doc__ = f"Elementwise {prim.name} of operands of one dtype (the `{prim.name}` primitive)."
    return fn


neg = _bind_unary(neg_p)
exp, log, log1p, expm1 = map(_bind_with_accuracy, (exp_p, log_p, log1p_p, expm1_p))
sin, cos, tanh, logistic, sqrt, rsqrt = map(_bind_with_accuracy, (sin_p, cos_p, tanh_p, logistic_p, sqrt_p, rsqrt_p))
tan, cbrt, exp2 = map(_bind_with_accuracy, (tan_p, cbrt_p, exp2_p))
acos, asin, atan, sinh, cosh = map(_bind_unary, (acos_p, asin_p, atan_p, sinh_p, cosh_p))
asinh, acosh, atanh = map(_bind_unary, (asinh_p, acosh_p, atanh_p))
abs, sign, floor, ceil = map(_bind_unary, (abs_p, sign_p, floor_p, ceil_p))  # noqa: A001
is_finite, bitwise_not, _stop_gradient = map(_bind_unary, (is_finite_p, not_p, stop_gradient_p))


def stop_gradient(x: Any) -> Any:
    """x (an array or a pytree of them) as a constant to differentiation: its derivatives are zero (the
    `stop_gradient` primitive on each leaf, as jax.lax.stop_gradient)."""
    if isinstance(x, ArrayMethods) or type(x) in _PYTHON_SCALAR_TYPES:
        return stop_gradient_p.bind(x)
    return tree_map(_stop_gradient, x)


clz, population_count = map(_bind_unary, (clz_p, population_count_p))
add, sub, mul, div, rem, atan2 = map(_bind_binary, (add_p, sub_p, mul_p, div_p, rem_p, atan2_p))
max, min, pow = map(_bind_binary, (max_p, min_p, pow_p))  # noqa: A001
bitwise_and, bitwise_or, bitwise_xor = map(_bind_binary, (and_p, or_p, xor_p))
shift_left, shift_right_logical, shift_right_arithmetic = map(
    _bind_binary, (shift_left_p, shift_right_logical_p, shift_right_arithmetic_p))
nextafter = _bind_binary(nextafter_p)
mulhi = _bind_binary(mulhi_p)
eq, ne, lt, le, gt, ge = map(_bind_binary, (eq_p, ne_p, lt_p, le_p, gt_p, ge_p))


def integer_pow(x: Any, y: int) -> Any:
    """x ** y for a static Python int y."""
    y = static_int("integer_pow", "y", y)
    if y == 1 and not is_python_scalar(x):
        return x
    return integer_pow_p.bind(x, y=y)


def round(x: Any, rounding_method: int = 0) -> Any:  # noqa: A001
    """Round to integral values: halves away from zero (rounding_method=0) or to even (1), as jax.lax.round."""
    return round_p.bind(x, rounding_method=int(rounding_method))


def square(x: Any) -> Any:
    """x * x elementwise (the `square` primitive, as jax.lax.square)."""
    return square_p.bind(x)


def reciprocal(x: Any) -> Any:
    """1 / x elementwise, as integer_pow(x, -1) (like jax.lax.reciprocal)."""
    return integer_pow(x, -1)


def reduce_precision(operand: Any, exponent_bits: int, mantissa_bits: int) -> Any:
    """operand rounded to a float format with the given exponent and mantissa bits (like jax.lax.reduce_precision),
    in operand's dtype: e.g. exponent_bits=5, mantissa_bits=10 rounds to float16 values."""
    exponent_bits = static_int("reduce_precision", "exponent_bits", exponent_bits)
    mantissa_bits = static_int("reduce_precision", "mantissa_bits", mantissa_bits)
    if is_python_scalar(operand):
        operand = scalar_literal(float(operand), dt.parse_dtype(float), True)
    return reduce_precision_p.bind(operand, exponent_bits=exponent_bits, mantissa_bits=mantissa_bits)


def real(x: Any) -> Any:
    """The real part of a complex x (like jax.lax.real, which takes complex operands only)."""
    return real_p.bind(x)


def imag(x: Any) -> Any:
    """The imaginary part of a complex x (like jax.lax.imag)."""
    return imag_p.bind(x)


def conj(x: Any) -> Any:
    """The complex conjugate; a real x becomes complex first (like jax.lax.conj)."""
    aval = aval_of(x)
    if not dt.is_complex(aval.dtype):
        if not dt.is_float(aval.dtype):
            raise TypeError(f"conj: operand must be floating-point or complex, got {aval.str_short()}")
        return convert_element_type(x, dt.complex_dtype(aval.dtype), aval.weak_type)
    return conj_p.bind(x)


def complex(x: Any, y: Any) -> Any:  # noqa: A001
    """x + i y of floating-point x and y of one dtype (like jax.lax.complex): float32 parts make complex64."""
    if type(x) in _PYTHON_SCALAR_TYPES or type(y) in _PYTHON_SCALAR_TYPES:
        x, y = coerce_scalars((x, y))
    return complex_p.bind(x, y)


def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """Elementwise on_true where pred else on_false (like jax.lax.select)."""
    on_true, on_false = coerce_scalars((on_true, on_false))
    return select_p.bind(pred, on_true, on_false)


def select_n(which: Any, *cases: Any) -> Any:
    """cases[which] elementwise (the `select_n` primitive, as jax.lax.select_n): which is boolean (two cases: False
    picks the first) or an integer array (any number of cases; one out of range picks an unspecified case), of the
    cases' shape or a scalar; the cases share one shape and dtype (Python scalars take it). One case is returned as
    it is."""
    if not cases:
        raise ValueError("select_n() must have at least one case")
    if len(cases) == 1:
        return cases[0]
    if is_python_scalar(which):
        which = scalar_literal(which, dt.bool_ if isinstance(which, bool) else dt.int32, False)
    return select_n_p.bind(which, *coerce_scalars(cases))


__all__ = ["AccuracyMode", "Tolerance", "abs", "add", "atan2", "bitwise_and", "bitwise_not", "bitwise_or",
           "bitwise_xor", "ceil", "cos", "div", "eq", "exp", "expm1", "floor", "ge", "gt", "integer_pow", "is_finite",
           "le", "log", "log1p", "logistic", "lt", "max", "min", "mul", "ne", "neg", "pow", "rem", "round", "rsqrt",
           "select", "select_n", "sign", "sin", "sqrt", "square", "stop_gradient", "sub", "tan", "tanh", "clz",
           "population_count", "shift_left", "shift_right_logical", "shift_right_arithmetic", "nextafter", "acos",
           "asin", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "cbrt", "exp2", "mulhi", "reciprocal",
           "reduce_precision", "real", "imag", "conj", "complex"]
