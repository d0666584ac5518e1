"""Elementwise primitives: arithmetic, transcendental functions, comparisons, logic, select and conversion.

Every primitive here is strict like jax.lax: operands share one dtype and one shape, except that a rank-0 operand
broadcasts. ember.numpy adds numpy-style broadcasting and dtype promotion on top."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember import _dtypes as dt
from ember._core import Primitive, aval_of
from ember._dtypes import ShapedArray
from ember._mlir import FunctionEmitter, compare_type
from ember._prims import structural as st
from ember._prims._rules import (all_weak, check_dtype, check_same_dtypes, coerce_scalars, elementwise_shape,
                                 static_int, weak_scalar)

FLOAT = "f"
NUMERIC = "fiu"
SIGNED = "fi"
INTEGRAL = "iub"
ANY = "fiub"


def _unbroadcast(ct: Any, aval: ShapedArray) -> Any:
    """The cotangent of a rank-0 operand that was broadcast is the sum of the output cotangent."""
    if aval.shape == () and aval_of(ct).shape != ():
        return st.reduce_sum(ct, tuple(range(len(aval_of(ct).shape))))
    return ct


# ---------------------------------------------------------------------------------------------------------------
# Unary ops
def _unary_abstract_eval(name: str, kinds: str) -> Callable[..., ShapedArray]:
    def rule(x: ShapedArray) -> ShapedArray:
        check_dtype(name, x, kinds)
        return x
    return rule


def _hlo_unary(hlo_name: str) -> Callable[..., list[str]]:
    def rule(ctx: FunctionEmitter, operands: list[str], in_avals: list[ShapedArray], out_avals: list[ShapedArray]
             ) -> list[str]:
        return [ctx.op(f"stablehlo.{hlo_name}", operands, out_avals[0])]
    return rule


def unary(name: str, hlo_name: str | None, kinds: str,
          vjp: Callable[[Any, Any, Any], Any] | None) -> Primitive:
    """Define a unary elementwise primitive. vjp(ct, x, y) gives x's cotangent; None marks zero derivative."""
    prim = Primitive(name)
    prim.def_abstract_eval(_unary_abstract_eval(name, kinds))
    if hlo_name is not None:
        prim.def_lowering(_hlo_unary(hlo_name))
    if vjp is None:
        prim.def_vjp(lambda cts, ins, outs, needs: [None])
    else:
        prim.def_vjp(lambda cts, ins, outs, needs: [vjp(cts[0], ins[0], outs[0])])
    return prim


neg_p = unary("neg", "negate", NUMERIC, lambda ct, x, y: neg(ct))
exp_p = unary("exp", "exponential", FLOAT, lambda ct, x, y: mul(ct, y))
log_p = unary("log", "log", FLOAT, lambda ct, x, y: div(ct, x))
log1p_p = unary("log1p", "log_plus_one", FLOAT, lambda ct, x, y: div(ct, add(x, 1.0)))
expm1_p = unary("expm1", "exponential_minus_one", FLOAT, lambda ct, x, y: mul(ct, add(y, 1.0)))
sin_p = unary("sin", "sine", FLOAT, lambda ct, x, y: mul(ct, cos(x)))
cos_p = unary("cos", "cosine", FLOAT, lambda ct, x, y: neg(mul(ct, sin(x))))
tanh_p = unary("tanh", "tanh", FLOAT, lambda ct, x, y: mul(ct, sub(1.0, mul(y, y))))
logistic_p = unary("logistic", "logistic", FLOAT, lambda ct, x, y: mul(ct, mul(y, sub(1.0, y))))
sqrt_p = unary("sqrt", "sqrt", FLOAT, lambda ct, x, y: div(ct, mul(y, 2.0)))
rsqrt_p = unary("rsqrt", "rsqrt", FLOAT, lambda ct, x, y: mul(ct, mul(div(y, x), -0.5)))
abs_p = unary("abs", None, NUMERIC, lambda ct, x, y: mul(ct, sign(x)))
sign_p = unary("sign", None, NUMERIC, None)
floor_p = unary("floor", "floor", FLOAT, None)
ceil_p = unary("ceil", "ceil", FLOAT, None)
round_p = Primitive("round")  # rounding_method: 0 rounds halves away from zero, 1 to the nearest even (as JAX)
round_p.def_abstract_eval(lambda x, *, rounding_method: _unary_abstract_eval("round", FLOAT)(x))
round_p.def_lowering(lambda ctx, operands, in_avals, out_avals, *, rounding_method: [ctx.op(
    "stablehlo.round_nearest_even" if rounding_method else "stablehlo.round_nearest_afz", operands, out_avals[0])])
round_p.def_vjp(lambda cts, ins, outs, needs, *, rounding_method: [None])
is_finite_p = Primitive("is_finite")
not_p = unary("not", "not", INTEGRAL, None)
not_p.vjp, not_p.nondifferentiable = None, True


@abs_p.def_lowering
def _abs_lowering(ctx: FunctionEmitter, operands: list[str], in_avals: list[ShapedArray],
                  out_avals: list[ShapedArray]) -> list[str]:
    if dt.is_unsigned_int(in_avals[0].dtype):
        return operands
    return [ctx.op("stablehlo.abs", operands, out_avals[0])]


@sign_p.def_lowering
def _sign_lowering(ctx: FunctionEmitter, operands: list[str], in_avals: list[ShapedArray],
                   out_avals: list[ShapedArray]) -> list[str]:
    aval = in_avals[0]
    if dt.is_unsigned_int(aval.dtype):  # stablehlo.sign takes signed and float operands only
        zero = ctx.constant(0, aval)
        nonzero = ctx.op("stablehlo.compare", [operands[0], zero], aval.update(dtype=dt.bool_),
                         {"comparison_direction": "#stablehlo<comparison_direction NE>",
                          "compare_type": "#stablehlo<comparison_type UNSIGNED>"})
        return [ctx.op("stablehlo.convert", [nonzero], out_avals[0])]
    return [ctx.op("stablehlo.sign", operands, out_avals[0])]


@is_finite_p.def_abstract_eval
def _is_finite_abstract_eval(x: ShapedArray) -> ShapedArray:
    check_dtype("is_finite", x, FLOAT)
    return ShapedArray(x.shape, dt.bool_)


is_finite_p.def_lowering(_hlo_unary("is_finite"))
is_finite_p.nondifferentiable = True


# integer_pow: x ** y for a static Python int y, lowered to repeated squaring.
integer_pow_p = Primitive("integer_pow")


@integer_pow_p.def_abstract_eval
def _integer_pow_abstract_eval(x: ShapedArray, *, y: int) -> ShapedArray:
    check_dtype("integer_pow", x, NUMERIC)
    if y < 0 and not dt.is_float(x.dtype):
        raise TypeError(f"integer_pow: negative exponent {y} needs a floating-point operand, got {x.str_short()}")
    return x


@integer_pow_p.def_lowering
def _integer_pow_lowering(ctx: FunctionEmitter, operands: list[str], in_avals: list[ShapedArray],
                          out_avals: list[ShapedArray], *, y: int) -> list[str]:
    aval = out_avals[0]
    result, square, power = None, operands[0], y if y >= 0 else -y
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


@integer_pow_p.def_vjp
def _integer_pow_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, y: int) -> list[Any]:
    x = ins[0]
    if y == 0:
        return [None]
    slope = mul(float(y), integer_pow(x, y - 1)) if y != 1 else None
    return [cts[0] if slope is None else mul(cts[0], slope)]


# ---------------------------------------------------------------------------------------------------------------
# Binary ops
def _binary_abstract_eval(name: str, kinds: str, out_dtype: np.dtype | None = None) -> Callable[..., ShapedArray]:
    def rule(x: ShapedArray, y: ShapedArray) -> ShapedArray:
        check_same_dtypes(name, [x, y])
        check_dtype(name, x, kinds, "operands")
        shape = elementwise_shape(name, [x, y])
        if out_dtype is not None:
            return ShapedArray(shape, out_dtype)
        return ShapedArray(shape, x.dtype, all_weak([x, y]))
    return rule


def _hlo_binary(hlo_name: str, attrs: Callable[[ShapedArray], dict[str, str]] | None = None
                ) -> Callable[..., list[str]]:
    def rule(ctx: FunctionEmitter, operands: list[str], in_avals: list[ShapedArray], out_avals: list[ShapedArray]
             ) -> list[str]:
        shape = out_avals[0].shape
        args = [ctx.broadcast(o, a, shape) for o, a in zip(operands, in_avals)]
        extra = attrs(in_avals[0]) if attrs else None
        return [ctx.op(f"stablehlo.{hlo_name}", args, out_avals[0], extra)]
    return rule


def binary(name: str, hlo_name: str, kinds: str,
           vjp: Callable[[Any, Any, Any, Any, list[bool]], tuple[Any, Any]] | None) -> Primitive:
    """Define a binary elementwise primitive. vjp(ct, x, y, out, needs) -> (ct_x, ct_y), skipping unneeded ones."""
    prim = Primitive(name)
    prim.def_abstract_eval(_binary_abstract_eval(name, kinds))
    prim.def_lowering(_hlo_binary(hlo_name))
    if vjp is None:
        prim.nondifferentiable = True
    else:
        def rule(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool]) -> list[Any]:
            x, y = ins
            ct_x, ct_y = vjp(cts[0], x, y, outs[0], needs)
            return [_unbroadcast(ct_x, aval_of(x)) if needs[0] and ct_x is not None else None,
                    _unbroadcast(ct_y, aval_of(y)) if needs[1] and ct_y is not None else None]
        prim.def_vjp(rule)
    return prim


def _when(need: bool, make: Callable[[], Any]) -> Any:
    return make() if need else None


add_p = binary("add", "add", NUMERIC, lambda ct, x, y, out, needs: (ct, ct))
sub_p = binary("sub", "subtract", NUMERIC, lambda ct, x, y, out, needs: (ct, _when(needs[1], lambda: neg(ct))))
mul_p = binary("mul", "multiply", NUMERIC, lambda ct, x, y, out, needs: (
    _when(needs[0], lambda: mul(ct, y)), _when(needs[1], lambda: mul(x, ct))))
div_p = binary("div", "divide", NUMERIC, lambda ct, x, y, out, needs: (
    _when(needs[0], lambda: div(ct, y)), _when(needs[1], lambda: neg(mul(ct, div(out, y))))))
rem_p = binary("rem", "remainder", NUMERIC, lambda ct, x, y, out, needs: (
    ct, _when(needs[1], lambda: neg(mul(ct, _trunc(div(x, y)))))))
atan2_p = binary("atan2", "atan2", FLOAT, lambda ct, x, y, out, needs: (
    _when(needs[0], lambda: mul(ct, div(y, add(mul(x, x), mul(y, y))))),
    _when(needs[1], lambda: mul(ct, div(neg(x), add(mul(x, x), mul(y, y)))))))


def _minmax_vjp(pick_x: Callable[[Any, Any], Any]) -> Callable[..., tuple[Any, Any]]:
    """Cotangent goes to the selected operand; ties split it evenly, as in JAX."""
    def vjp(ct: Any, x: Any, y: Any, out: Any, needs: list[bool]) -> tuple[Any, Any]:
        def share(first: Any, second: Any) -> Any:
            one, half, zero = (weak_scalar(v, aval_of(ct).dtype) for v in (1.0, 0.5, 0.0))
            wins = select(pick_x(first, second), st.full_like(ct, one), st.full_like(ct, zero))
            ties = select(eq(first, second), st.full_like(ct, half), wins)
            return mul(ct, ties)
        return _when(needs[0], lambda: share(x, y)), _when(needs[1], lambda: share(y, x))
    return vjp


max_p = binary("max", "maximum", ANY, _minmax_vjp(lambda a, b: gt(a, b)))
min_p = binary("min", "minimum", ANY, _minmax_vjp(lambda a, b: lt(a, b)))


def _pow_vjp(ct: Any, x: Any, y: Any, out: Any, needs: list[bool]) -> tuple[Any, Any]:
    def for_x() -> Any:
        zero = st.full_like(ct, 0.0)
        slope = mul(y, pow(x, sub(y, 1.0)))
        return mul(ct, select(eq(st.full_like(ct, y), 0.0), zero, slope))

    def for_y() -> Any:
        x_full = st.full_like(ct, x)
        safe_x = select(eq(x_full, 0.0), st.full_like(ct, 1.0), x_full)
        return mul(ct, mul(log(safe_x), out))
    return _when(needs[0], for_x), _when(needs[1], for_y)


pow_p = binary("pow", "power", FLOAT, _pow_vjp)
and_p = binary("and", "and", INTEGRAL, None)
or_p = binary("or", "or", INTEGRAL, None)
xor_p = binary("xor", "xor", INTEGRAL, None)


def _comparison(name: str, direction: str) -> Primitive:
    prim = Primitive(name)
    prim.def_abstract_eval(_binary_abstract_eval(name, ANY, dt.bool_))
    prim.def_lowering(_hlo_binary("compare", lambda aval: {
        "comparison_direction": f"#stablehlo<comparison_direction {direction}>",
        "compare_type": f"#stablehlo<comparison_type {compare_type(aval.dtype)}>"}))
    prim.nondifferentiable = True
    return prim


eq_p = _comparison("eq", "EQ")
ne_p = _comparison("ne", "NE")
lt_p = _comparison("lt", "LT")
le_p = _comparison("le", "LE")
gt_p = _comparison("gt", "GT")
ge_p = _comparison("ge", "GE")


# ---------------------------------------------------------------------------------------------------------------
# select(pred, on_true, on_false)
select_p = Primitive("select")


@select_p.def_abstract_eval
def _select_abstract_eval(pred: ShapedArray, on_true: ShapedArray, on_false: ShapedArray) -> ShapedArray:
    if pred.dtype != dt.bool_:
        raise TypeError(f"select: pred must be boolean, got {pred.str_short()}")
    check_same_dtypes("select", [on_true, on_false])
    shape = elementwise_shape("select", [pred, on_true, on_false])
    return ShapedArray(shape, on_true.dtype, all_weak([on_true, on_false]))


@select_p.def_lowering
def _select_lowering(ctx: FunctionEmitter, operands: list[str], in_avals: list[ShapedArray],
                     out_avals: list[ShapedArray]) -> list[str]:
    shape = out_avals[0].shape
    args = [ctx.broadcast(o, a, shape) for o, a in zip(operands, in_avals)]
    return [ctx.op("stablehlo.select", args, out_avals[0])]


@select_p.def_vjp
def _select_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool]) -> list[Any]:
    pred, on_true, on_false = ins
    ct = cts[0]
    zeros = st.full_like(ct, 0)
    return [None,
            _unbroadcast(select(pred, ct, zeros), aval_of(on_true)) if needs[1] else None,
            _unbroadcast(select(pred, zeros, ct), aval_of(on_false)) if needs[2] else None]


# ---------------------------------------------------------------------------------------------------------------
# convert_element_type(x, new_dtype, weak_type)
convert_element_type_p = Primitive("convert_element_type")


@convert_element_type_p.def_abstract_eval
def _convert_abstract_eval(x: ShapedArray, *, new_dtype: np.dtype, weak_type: bool) -> ShapedArray:
    return ShapedArray(x.shape, new_dtype, weak_type)


@convert_element_type_p.def_lowering
def _convert_lowering(ctx: FunctionEmitter, operands: list[str], in_avals: list[ShapedArray],
                      out_avals: list[ShapedArray], *, new_dtype: np.dtype, weak_type: bool) -> list[str]:
    src, out = in_avals[0], out_avals[0]
    if src.dtype == new_dtype:
        return operands
    if new_dtype == dt.bool_:  # numpy semantics: nonzero is True
        zero = ctx.constant(0, src.update(weak_type=False))
        return [ctx.op("stablehlo.compare", [operands[0], zero], out,
                       {"comparison_direction": "#stablehlo<comparison_direction NE>",
                        "compare_type": f"#stablehlo<comparison_type {compare_type(src.dtype)}>"})]
    return [ctx.op("stablehlo.convert", operands, out)]


@convert_element_type_p.def_vjp
def _convert_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, new_dtype: np.dtype,
                 weak_type: bool) -> list[Any]:
    src = aval_of(ins[0])
    if not (dt.is_float(src.dtype) and dt.is_float(new_dtype)):
        return [None]
    return [convert_element_type(cts[0], src.dtype, src.weak_type)]


# stop_gradient: the identity, with a zero derivative.
stop_gradient_p = unary("stop_gradient", None, ANY, None)
stop_gradient_p.def_lowering(lambda ctx, operands, in_avals, out_avals: list(operands))


# ---------------------------------------------------------------------------------------------------------------
# Public functions (exported by ember.lax)
def _bind_unary(prim: Primitive) -> Callable[[Any], Any]:
    def fn(x: Any) -> Any:
        return prim.bind(x)
    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = f"Elementwise {prim.name} (the `{prim.name}` primitive)."
    return fn


def _bind_binary(prim: Primitive) -> Callable[[Any, Any], Any]:
    def fn(x: Any, y: Any) -> Any:
        return prim.bind(*coerce_scalars(prim.name, (x, y)))
    fn.__name__ = fn.__qualname__ = prim.name if prim.name not in ("and", "or", "not") else f"bitwise_{prim.name}"
    fn.__doc__ = f"Elementwise {prim.name} of operands of one dtype (the `{prim.name}` primitive)."
    return fn


neg, exp, log, log1p, expm1 = map(_bind_unary, (neg_p, exp_p, log_p, log1p_p, expm1_p))
sin, cos, tanh, logistic, sqrt, rsqrt = map(_bind_unary, (sin_p, cos_p, tanh_p, logistic_p, sqrt_p, rsqrt_p))
abs, sign, floor, ceil = map(_bind_unary, (abs_p, sign_p, floor_p, ceil_p))  # noqa: A001
is_finite, bitwise_not, stop_gradient = map(_bind_unary, (is_finite_p, not_p, stop_gradient_p))
add, sub, mul, div, rem, atan2 = map(_bind_binary, (add_p, sub_p, mul_p, div_p, rem_p, atan2_p))
max, min, pow = map(_bind_binary, (max_p, min_p, pow_p))  # noqa: A001
bitwise_and, bitwise_or, bitwise_xor = map(_bind_binary, (and_p, or_p, xor_p))
eq, ne, lt, le, gt, ge = map(_bind_binary, (eq_p, ne_p, lt_p, le_p, gt_p, ge_p))


def integer_pow(x: Any, y: int) -> Any:
    """x ** y for a static Python int y."""
    y = static_int("integer_pow", "y", y)
    if y == 1 and not isinstance(x, int | float | bool):
        return x
    return integer_pow_p.bind(x, y=y)


def round(x: Any, rounding_method: int = 0) -> Any:  # noqa: A001
    """Round to integral values: halves away from zero (rounding_method=0) or to even (1), as jax.lax.round."""
    return round_p.bind(x, rounding_method=int(rounding_method))


def square(x: Any) -> Any:
    return integer_pow(x, 2)


def select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """Elementwise on_true where pred else on_false (like jax.lax.select)."""
    on_true, on_false = coerce_scalars("select", (on_true, on_false))
    return select_p.bind(pred, on_true, on_false)


def convert_element_type(x: Any, new_dtype: Any, weak_type: bool = False) -> Any:
    new_dtype = dt.canonicalize_dtype(new_dtype)
    aval = aval_of(x)
    if aval.dtype == new_dtype and aval.weak_type == weak_type and not isinstance(x, int | float | bool):
        return x
    return convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=bool(weak_type))


def _trunc(x: Any) -> Any:
    return mul(sign(x), floor(abs(x)))

