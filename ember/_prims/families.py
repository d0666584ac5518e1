"""Family constructors for elementwise primitives. Each takes the derivative once and derives every rule from it:

- unary(name, hlo, kinds, derivative): derivative(g, x, out, **params) is the derivative applied to g, linear in g
  and elementwise, so it gives the JVP (g a tangent of x) and the VJP (g a cotangent of out) alike. ZERO marks a
  zero derivative (floor, sign, ...); NOT_DIFFERENTIABLE marks outputs that carry none (bitwise not, is_finite).
- binary(name, hlo, kinds, derivative): derivative = (dx, dy), each (g, x, y, out) -> the partial derivative with
  respect to that operand applied to g. JVP: dx(tx) + dy(ty); VJP: (dx(ct), dy(ct)), only those in `needs`, a
  rank-0 operand's cotangent summed over the broadcast.
- comparison(name, direction): boolean outputs, not differentiable.

Complex operands (the kinds include 'c'): JAX's convention pairs a cotangent c with a tangent t as Re(c * t), with
no conjugation, so a holomorphic derivative (multiplication by f'(x)) is its own transpose and one derivative still
serves both directions. A non-holomorphic op (abs of a complex number) gives its reverse rule as `transpose`.

Every family attaches the abstract eval, the lowering and the batching rule (elementwise: batched operands line up
their batch dimension; unbatched rank-0 operands stay unbatched and broadcast inside the primitive). The binary and
comparison families mark their one-op primitives Primitive.fuses_data_movement (eager dispatch)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember._core import NOT_DIFFERENTIABLE, PRIMITIVES, Primitive, ShapedArray, aval_of
from ember._core import dtypes as dt
from ember._hlo import LoweringContext, compare_type
from ember._prims.checks import ANY, all_weak, check_dtype, check_same_dtypes, elementwise_shape
from ember._prims.explicit import broadcasting
from ember._prims.shape import (BatchDim, batch_size, broadcast_in_dim, moveaxis, reduce_sum, vectorized_batching)

ZERO = "zero derivative"
Lowering = Callable[..., list[str]]


def hlo_lowering(hlo_name: str, attrs: Callable[[ShapedArray], dict[str, str]] | None = None) -> Lowering:
    """Lower to one StableHLO op of the same name (or, for a dotted name such as "chlo.erf_inv", that op), rank-0
    operands broadcast to the output shape."""
    op_name = hlo_name if "." in hlo_name else f"stablehlo.{hlo_name}"

    def rule(ctx: LoweringContext, *operands: str, **params: Any) -> list[str]:
        shape = ctx.aval_out.shape
        args = [ctx.broadcast(o, a, shape) for o, a in zip(operands, ctx.avals_in)]
        extra = attrs(ctx.avals_in[0]) if attrs else None
        return [ctx.op(op_name, args, ctx.aval_out, extra)]
    return rule


def elementwise_batching(prim: Primitive) -> Callable[..., Any]:
    """Batching of an elementwise primitive whose rank-0 operands broadcast: when every batched operand has its
    batch dimension at the same place and all other operands are unbatched scalars, nothing moves; otherwise
    batched operands move their batch dimension to the front and unbatched non-scalar operands are broadcast. Every
    output of a multiple-result primitive (threefry2x32) has the batch dimension at the same place."""
    def bind(args: Sequence[Any], params: dict[str, Any], dim: int) -> tuple[list[Any], list[BatchDim]]:
        outs = prim.bind(*args, **params)
        outs = list(outs) if prim.multiple_results else [outs]
        return outs, [dim] * len(outs)

    def rule(args: Sequence[Any], dims: Sequence[BatchDim], **params: Any) -> tuple[list[Any], list[BatchDim]]:
        avals = [aval_of(a) for a in args]
        batched = {d for d in dims if d is not None}
        unbatched_scalars = all(d is not None or a.shape == () for a, d in zip(avals, dims))
        full_rank = {a.ndim for a, d in zip(avals, dims) if d is not None}
        if len(batched) == 1 and unbatched_scalars and len(full_rank) == 1:
            return bind(args, params, batched.pop())
        size = batch_size(args, dims)
        shape = elementwise_shape(prim.name, [a if d is None else _drop(a, d) for a, d in zip(avals, dims)])
        moved = []
        for x, aval, d in zip(args, avals, dims):
            if d is None:
                moved.append(x if aval.shape == () else
                             broadcast_in_dim(x, (size,) + shape, tuple(range(1, len(shape) + 1))))
            else:
                x = moveaxis(x, d, 0)
                moved.append(broadcast_in_dim(x, (size,) + shape, (0,)) if aval.ndim == 1 and shape else x)
        return bind(moved, params, 0)
    return rule


def _drop(aval: ShapedArray, d: int) -> ShapedArray:
    return aval.update(shape=aval.shape[:d] + aval.shape[d + 1:])


def _to_shape(t: Any, shape: tuple[int, ...]) -> Any:
    """A tangent computed from rank-0 operands, broadcast to the output's shape."""
    return t if aval_of(t).shape == shape else broadcast_in_dim(t, shape, ())


def unbroadcast(ct: Any, aval: ShapedArray) -> Any:
    """The cotangent of a rank-0 operand that was broadcast is the sum of the output cotangent."""
    if aval.shape == () and aval_of(ct).shape != ():
        return reduce_sum(ct, tuple(range(aval_of(ct).ndim)))
    return ct


def _attach_derivative(prim: Primitive, derivative: Any, make_jvp: Callable[[], Any], make_vjp: Callable[[], Any]
                       ) -> None:
    if derivative == NOT_DIFFERENTIABLE:
        prim.mark_not_differentiable()
    else:
        prim.zero_derivative = derivative == ZERO  # (its outputs carry no derivative: see Primitive.differentiable)
        prim.def_rule("jvp", make_jvp())
        prim.def_rule("vjp", make_vjp())


# ---------------------------------------------------------------------------------------------------------------
# A transcendental function's `accuracy` param (JAX's: an AccuracyMode or Tolerance, present only when one was
# asked for: ember.lax's exp(x, accuracy=...), ...) chooses an implementation, so only a lowering that chooses among
# several reads it (elementwise.kernel_or marks its rules `reads_accuracy`); the other rules of the family never see
# it: derivatives are the same functions at every accuracy.
def _own(params: dict[str, Any]) -> dict[str, Any]:
    """params without `accuracy`."""
    return params if "accuracy" not in params else {k: v for k, v in params.items() if k != "accuracy"}


def _ignoring_accuracy(rule: Lowering) -> Lowering:
    def lower(ctx: Any, *operands: str, **params: Any) -> list[str]:
        return rule(ctx, *operands, **_own(params))
    return lower


def unary(name: str, hlo_name: str | None, kinds: str, derivative: Any, *, lowering: Lowering | None = None,
          out_dtype: np.dtype | Callable[[np.dtype], np.dtype] | None = None,
          check: Callable[..., None] | None = None, transpose: Callable[..., Any] | None = None,
          checks: Sequence[str]) -> Primitive:
    """A one-operand elementwise primitive (see the module docstring). lowering overrides the one-op lowering;
    out_dtype is the output's dtype, or a function of the operand's; check(x, **params) adds argument checks to the
    abstract evaluation; transpose(ct, x, out, **params), when given, is the reverse rule (else `derivative`);
    checks: what checkify checks of it (Primitive's `checks`: NAN_CHECK where a float output may be NaN)."""
    prim = Primitive(name, elementwise=True, checks=checks)

    @prim.def_rule("abstract_eval")
    def abstract_eval(x: ShapedArray, **params: Any) -> ShapedArray:
        check_dtype(name, x, kinds)
        if check is not None:
            check(x, **_own(params))
        if out_dtype is None:
            return x
        dtype = out_dtype(x.dtype) if callable(out_dtype) else out_dtype
        return x if dtype == x.dtype else ShapedArray(x.shape, dtype, x.weak_type and dtype != dt.bool_)

    rule = lowering or hlo_lowering(hlo_name)
    prim.def_rule("lowering", rule if getattr(rule, "reads_accuracy", False) else _ignoring_accuracy(rule))

    def make_jvp() -> Any:
        def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[list[Any], list[Any]]:
            (x,), (t,) = primals, tangents
            out = prim.bind(x, **params)
            if t is None or derivative == ZERO:
                return [out], [None]
            return [out], [derivative(t, x, out, **_own(params))]
        return jvp

    def make_vjp() -> Any:
        def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], **params: Any) -> list[Any]:
            if derivative == ZERO:
                return [None]
            return [(transpose or derivative)(cts[0], ins[0], outs[0], **_own(params))]
        return vjp

    _attach_derivative(prim, derivative, make_jvp, make_vjp)
    prim.def_rule("batching", vectorized_batching(prim))
    prim.def_rule("sharding_rule", broadcasting(name))
    return prim


def binary(name: str, hlo_name: str, kinds: str, derivative: Any, *, lowering: Lowering | None = None,
           out_dtype: Callable[[np.dtype], np.dtype] | None = None, checks: Sequence[str]) -> Primitive:
    """A two-operand elementwise primitive (see the module docstring); lowering overrides the one-op lowering;
    out_dtype(operand dtype) is the output's dtype where it differs (complex: float32 parts make complex64);
    checks: what checkify checks of it (as unary's)."""
    # one StableHLO op (not a chlo op, which expands into many): eager dispatch may fuse a broadcast into it
    prim = Primitive(name, fuses_data_movement="." not in hlo_name, elementwise=True, checks=checks)

    @prim.def_rule("abstract_eval")
    def abstract_eval(x: ShapedArray, y: ShapedArray) -> ShapedArray:
        check_same_dtypes(name, [x, y])
        check_dtype(name, x, kinds, "operands")
        dtype = x.dtype if out_dtype is None else out_dtype(x.dtype)
        return ShapedArray(elementwise_shape(name, [x, y]), dtype, all_weak([x, y]))

    prim.def_rule("lowering", lowering or hlo_lowering(hlo_name))

    def make_jvp() -> Any:
        def jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list[Any], list[Any]]:
            x, y = primals
            out = prim.bind(x, y)
            parts = [partial(t, x, y, out) for partial, t in zip(derivative, tangents) if t is not None]
            if not parts:
                return [out], [None]
            tangent = parts[0] if len(parts) == 1 else PRIMITIVES["add"].bind(*_same_shapes(parts))
            return [out], [_to_shape(tangent, aval_of(out).shape)]
        return jvp

    def make_vjp() -> Any:
        def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool]) -> list[Any]:
            return [unbroadcast(partial(cts[0], ins[0], ins[1], outs[0]), aval_of(x)) if need else None
                    for partial, x, need in zip(derivative, ins, needs)]
        return vjp

    _attach_derivative(prim, derivative, make_jvp, make_vjp)
    prim.def_rule("batching", elementwise_batching(prim))
    prim.def_rule("sharding_rule", broadcasting(name))
    return prim


def _same_shapes(parts: list[Any]) -> list[Any]:
    shapes = [aval_of(p).shape for p in parts]
    widest = max(shapes, key=len)
    return [_to_shape(p, widest) for p in parts]


def comparison(name: str, direction: str, kinds: str = ANY, total_order: bool = False) -> Primitive:
    """A comparison: boolean outputs (nothing for checkify to check), not differentiable. total_order: floats
    compare in IEEE's total order (StableHLO's TOTALORDER: -NaN < -inf < ... < -0.0 < 0.0 < ... < inf < NaN, a NaN
    equal to itself), as jax.lax's eq_to, le_to and lt_to (its sort comparators)."""
    prim = Primitive(name, fuses_data_movement=True, elementwise=True, checks=())

    @prim.def_rule("abstract_eval")
    def abstract_eval(x: ShapedArray, y: ShapedArray) -> ShapedArray:
        check_same_dtypes(name, [x, y])
        check_dtype(name, x, kinds, "operands")
        return ShapedArray(elementwise_shape(name, [x, y]), dt.bool_)

    def kind(aval: ShapedArray) -> str:
        return "TOTALORDER" if total_order and dt.is_float(aval.dtype) else compare_type(aval.dtype)

    prim.def_rule("lowering", hlo_lowering("compare", lambda aval: {
        "comparison_direction": f"#stablehlo<comparison_direction {direction}>",
        "compare_type": f"#stablehlo<comparison_type {kind(aval)}>"}))
    prim.mark_not_differentiable()
    prim.def_rule("batching", elementwise_batching(prim))
    prim.def_rule("sharding_rule", broadcasting(name))
    return prim
