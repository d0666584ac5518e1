"""Reductions over axes besides reduce_sum (shape.py):

- reduce_max and reduce_min, made by the reduction family (shape.py), with one derivative description: the
  weights that send the derivative to the positions holding the extreme value, split evenly among ties (as JAX);
- reduce_prod (family-made), its derivative the product of the other elements, computed without division (so
  zeros are exact) from exclusive prefix and suffix products;
- reduce_and, reduce_or, reduce_xor: bitwise reductions of booleans and integers, not differentiable;
- argmax and argmin: the index of the first extreme element along one axis (NaN counts as extreme, as JAX);
- reduce: a reduction of one or more operands with any staged scalar computation (as jax.lax.reduce), routed to
  the differentiable primitives when the computation is add/mul/max/min of one operand."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ember._core import Literal, Primitive, ShapedArray, Tracer, aval_of, scalar_literal
from ember._core import dtypes as dt
from ember._core import NAN_CHECK
from ember._core.checks import normalize_axis, static_int, static_ints
from ember._core.trace import stage_flat
from ember._hlo import LoweringContext, i64_array, lower_into, row_fusion
from ember._prims.checks import TWO_BIT_FAILS, check_dtype, refuse_narrow
from ember._prims.elementwise import (add, bitwise_and, bitwise_not, bitwise_or, div, eq, gt, lt, max,
                                      min, mul, ne, select)
from ember._prims.shape import (BatchDim, broadcast_in_dim, convert_element_type, kept_dims, reduce_axes,
                                reduce_sum, reduction, reshape, transpose)
from ember._prims.slicing import pad, slice
from ember._prims import explicit


def _extreme_weights(x: Any, out: Any, axes: tuple[int, ...]) -> Any:
    """1/count at the positions of x holding the reduced value (count: how many hold it), 0 elsewhere."""
    shape, dtype = aval_of(x).shape, aval_of(x).dtype
    kept = kept_dims(len(shape), axes)
    # count in float32 at least: a float16 count is inexact above 2048, a bfloat16 one above 256
    counting = np.dtype(np.float32) if dtype.itemsize < 4 else dtype
    mask = convert_element_type(eq(x, broadcast_in_dim(out, shape, kept)), counting)
    counts = broadcast_in_dim(reduce_sum(mask, axes), shape, kept)
    return convert_element_type(div(mask, counts), dtype)


def _extreme_derivative(prim: Primitive) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """JVP: the tangent's weighted sum; VJP: the cotangent broadcast back, weighted (see _extreme_weights)."""
    def jvp(primals: Sequence[Any], tangents: Sequence[Any], *, axes: tuple[int, ...]) -> tuple[list[Any], list[Any]]:
        x, t = primals[0], tangents[0]
        out = prim.bind(x, axes=axes)
        if t is None:
            return [out], [None]
        return [out], [reduce_sum(mul(t, _extreme_weights(x, out, axes)), axes)]

    def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, axes: tuple[int, ...]
            ) -> list[Any]:
        shape = aval_of(ins[0]).shape
        return [mul(broadcast_in_dim(cts[0], shape, kept_dims(len(shape), axes)),
                    _extreme_weights(ins[0], outs[0], axes))]
    return jvp, vjp


_lowest, _highest = dt.lowest, dt.highest


reduce_max_p = reduction("reduce_max", "fiub", _lowest, lambda dtype: "or" if dt.is_bool(dtype) else "maximum",
                         _extreme_derivative, lambda ctx, x, axes: row_fusion.lower_extremum(
                             ctx.emitter, x, ctx.avals_in[0], axes, "maximum", _lowest(ctx.avals_in[0].dtype)),
                             checks=())
reduce_min_p = reduction("reduce_min", "fiub", _highest, lambda dtype: "and" if dt.is_bool(dtype) else "minimum",
                         _extreme_derivative, lambda ctx, x, axes: row_fusion.lower_extremum(
                             ctx.emitter, x, ctx.avals_in[0], axes, "minimum", _highest(ctx.avals_in[0].dtype)),
                             checks=())


def reduce_max(x: Any, axes: Sequence[int] | None = None) -> Any:
    return reduce_max_p.bind(x, axes=reduce_axes("reduce_max", x, axes))


def reduce_min(x: Any, axes: Sequence[int] | None = None) -> Any:
    return reduce_min_p.bind(x, axes=reduce_axes("reduce_min", x, axes))



# ---------------------------------------------------------------------------------------------------------------
# reduce_prod: d prod / dx_i = the product of the other elements, from exclusive prefix and suffix products along
# the reduced elements laid out as one last dimension (log-step scans of pads, slices and products, so they are
# differentiable again and exact at zeros).
def _shifted(x: Any, k: int, reverse: bool) -> Any:
    """x moved k places along its last dimension (towards the end, or the start with reverse), filled with 1."""
    shape = aval_of(x).shape
    n, rank = shape[-1], len(shape)
    config = [(0, 0, 0)] * (rank - 1) + [(0, k, 0) if reverse else (k, 0, 0)]
    padded = pad(x, 1, config)
    start = [0] * rank
    start[-1] = k if reverse else 0
    limit = list(shape)
    limit[-1] = start[-1] + n
    return slice(padded, start, limit)


def _inclusive_products(x: Any, reverse: bool) -> Any:
    n, k = aval_of(x).shape[-1], 1
    while k < n:
        x = mul(x, _shifted(x, k, reverse))
        k *= 2
    return x


def _others_product(x: Any, axes: tuple[int, ...]) -> Any:
    """For every element of x, the product of the other elements of its reduction (over axes)."""
    shape = aval_of(x).shape
    kept = kept_dims(len(shape), axes)
    perm = kept + tuple(axes)
    flat = reshape(transpose(x, perm), tuple(shape[d] for d in kept) + (math.prod(shape[a] for a in axes),))
    if aval_of(flat).shape[-1] == 0:
        return x
    before = _shifted(_inclusive_products(flat, False), 1, False)
    after = _shifted(_inclusive_products(flat, True), 1, True)
    others = reshape(mul(before, after), tuple(shape[d] for d in perm))
    return transpose(others, tuple(int(i) for i in np.argsort(perm)))


def _prod_derivative(prim: Primitive) -> tuple[Callable[..., Any], Callable[..., Any]]:
    def jvp(primals: Sequence[Any], tangents: Sequence[Any], *, axes: tuple[int, ...]) -> tuple[list[Any], list[Any]]:
        x, t = primals[0], tangents[0]
        out = prim.bind(x, axes=axes)
        if t is None:
            return [out], [None]
        return [out], [reduce_sum(mul(t, _others_product(x, axes)), axes)]

    def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, axes: tuple[int, ...]
            ) -> list[Any]:
        shape = aval_of(ins[0]).shape
        return [mul(broadcast_in_dim(cts[0], shape, kept_dims(len(shape), axes)), _others_product(ins[0], axes))]
    return jvp, vjp


reduce_prod_p = reduction("reduce_prod", "fiuc", lambda dtype: 1, lambda dtype: "multiply", _prod_derivative,
                          checks=NAN_CHECK)


def reduce_prod(x: Any, axes: Sequence[int] | None = None) -> Any:
    """The product over axes (all by default), like jax.lax.reduce_prod."""
    return reduce_prod_p.bind(x, axes=reduce_axes("reduce_prod", x, axes))


# ---------------------------------------------------------------------------------------------------------------
# reduce_and / reduce_or / reduce_xor: bitwise reductions, not differentiable.
def _all_ones(dtype: np.dtype) -> Any:
    if dt.is_bool(dtype):
        return True
    return -1 if dt.is_signed_int(dtype) else dt.highest(dtype)


def _bitwise_reduction(name: str, hlo_op: str, identity: Callable[[np.dtype], Any]) -> Primitive:
    prim = Primitive(name, checks=())
    prim.def_rule("sharding_rule", explicit.reduction)

    @prim.def_rule("abstract_eval")
    def abstract_eval(x: ShapedArray, *, axes: tuple[int, ...]) -> ShapedArray:
        check_dtype(name, x, "iub")
        refuse_narrow(name, x, "i")
        if any(not 0 <= a < x.ndim for a in axes) or len(set(axes)) != len(axes):
            raise TypeError(f"{name}: axes {axes} are invalid for {x.str_short()}")
        return ShapedArray(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype, x.weak_type)

    @prim.def_rule("lowering")
    def lowering(ctx: LoweringContext, x: str, *, axes: tuple[int, ...]) -> list[str]:
        return [ctx.emitter.reduce(x, ctx.avals_in[0], axes, hlo_op, identity(ctx.avals_in[0].dtype))]

    prim.mark_not_differentiable()

    @prim.def_rule("batching")
    def batching(args: list[Any], dims: list[BatchDim], *, axes: tuple[int, ...]) -> tuple[list[Any], list[BatchDim]]:
        d = dims[0]
        return [prim.bind(args[0], axes=tuple(a if a < d else a + 1 for a in axes))], \
            [d - sum(1 for a in axes if a < d)]
    return prim


reduce_and_p = _bitwise_reduction("reduce_and", "and", _all_ones)
reduce_or_p = _bitwise_reduction("reduce_or", "or", lambda dtype: False if dt.is_bool(dtype) else 0)
reduce_xor_p = _bitwise_reduction("reduce_xor", "xor", lambda dtype: False if dt.is_bool(dtype) else 0)


def reduce_and(x: Any, axes: Sequence[int] | None = None) -> Any:
    """Bitwise (logical, for booleans) and over axes, like jax.lax.reduce_and."""
    return reduce_and_p.bind(x, axes=reduce_axes("reduce_and", x, axes))


def reduce_or(x: Any, axes: Sequence[int] | None = None) -> Any:
    """Bitwise (logical, for booleans) or over axes, like jax.lax.reduce_or."""
    return reduce_or_p.bind(x, axes=reduce_axes("reduce_or", x, axes))


def reduce_xor(x: Any, axes: Sequence[int] | None = None) -> Any:
    """Bitwise (logical, for booleans) exclusive or over axes, like jax.lax.reduce_xor."""
    return reduce_xor_p.bind(x, axes=reduce_axes("reduce_xor", x, axes))


# ---------------------------------------------------------------------------------------------------------------
# argmax / argmin(operand, axes=(axis,), index_dtype): a two-operand stablehlo.reduce over (value, index) pairs
# keeping the extreme value's first index; NaN beats every number and ties keep the smaller index, so the result
# is the first NaN, else the first extreme value (as jax.lax).
def _argminmax(name: str, better: Callable[[Any, Any], Any]) -> Primitive:
    prim = Primitive(name, checks=())
    prim.def_rule("sharding_rule", explicit.reduction)

    @prim.def_rule("abstract_eval")
    def abstract_eval(x: ShapedArray, *, axes: tuple[int, ...], index_dtype: np.dtype) -> ShapedArray:
        check_dtype(name, x, "fiub")
        refuse_narrow(name, x, "2", "operand", TWO_BIT_FAILS)
        if not dt.is_int(index_dtype):
            raise TypeError(f"{name}: index_dtype must be an integer dtype, got {index_dtype}")
        if len(axes) != 1 or not 0 <= axes[0] < x.ndim:
            raise TypeError(f"{name}: axes {axes} must be one axis of {x.str_short()}")
        if x.shape[axes[0]] == 0:
            raise ValueError(f"{name}: axis {axes[0]} of {x.str_short()} is empty, which has no extreme element")
        return ShapedArray(tuple(d for i, d in enumerate(x.shape) if i != axes[0]), index_dtype)

    def pick(xv: Any, xi: Any, yv: Any, yi: Any) -> list[Any]:
        if dt.is_float(aval_of(xv).dtype):
            x_nan, y_nan = ne(xv, xv), ne(yv, yv)
            x_better = bitwise_or(bitwise_and(x_nan, bitwise_not(y_nan)), better(xv, yv))
            tie = bitwise_or(bitwise_and(x_nan, y_nan), eq(xv, yv))
        else:
            x_better, tie = better(xv, yv), eq(xv, yv)
        take_x = bitwise_or(x_better, bitwise_and(tie, lt(xi, yi)))
        return [select(take_x, xv, yv), select(take_x, xi, yi)]

    @prim.def_rule("lowering")
    def lowering(ctx: LoweringContext, x: str, *, axes: tuple[int, ...], index_dtype: np.dtype) -> list[str]:
        aval = ctx.avals_in[0]
        value, index = ShapedArray((), aval.dtype), ShapedArray((), index_dtype)
        indices = ctx.op("stablehlo.iota", [], aval.update(dtype=index_dtype, weak_type=False),
                         {"iota_dimension": f"{axes[0]} : i64"})
        worst = (_lowest if name == "argmax" else _highest)(aval.dtype)
        inits = [ctx.constant(worst, value), ctx.constant(0, index)]
        avals = [value, index, value, index]
        body = stage_flat(pick, avals)
        region = ctx.region(avals, lambda em, args: lower_into(em, body, args))
        outs = ctx.op("stablehlo.reduce", [x, indices] + inits, [ctx.aval_out.update(dtype=aval.dtype), ctx.aval_out],
                      {"dimensions": i64_array(axes)}, [region])
        return [outs[1]]

    prim.mark_not_differentiable()

    @prim.def_rule("batching")
    def batching(args: list[Any], dims: list[BatchDim], *, axes: tuple[int, ...], index_dtype: np.dtype
                 ) -> tuple[list[Any], list[BatchDim]]:
        d, (axis,) = dims[0], axes
        return [prim.bind(args[0], axes=(axis if axis < d else axis + 1,), index_dtype=index_dtype)], \
            [d if axis >= d else d - 1]
    return prim


def _bool_aware(compare: Callable[[Any, Any], Any], want_true: bool) -> Callable[[Any, Any], Any]:
    def better(x: Any, y: Any) -> Any:
        if dt.is_bool(aval_of(x).dtype):  # booleans do not order: True beats False for argmax
            return bitwise_and(x, bitwise_not(y)) if want_true else bitwise_and(bitwise_not(x), y)
        return compare(x, y)
    return better


argmax_p = _argminmax("argmax", _bool_aware(gt, True))
argmin_p = _argminmax("argmin", _bool_aware(lt, False))


def _arg_extreme(prim: Primitive, operand: Any, axis: int, index_dtype: Any) -> Any:
    aval = aval_of(operand)
    axis = normalize_axis(prim.name, static_int(prim.name, "axis", axis), aval.ndim)
    # (a 64-bit index_dtype is its 32-bit one without x64, as JAX's)
    return prim.bind(operand, axes=(axis,), index_dtype=dt.check_user_dtype(index_dtype, prim.name))


def argmax(operand: Any, axis: int, index_dtype: Any) -> Any:
    """The index of the first maximum along axis (the first NaN if there is one), like jax.lax.argmax."""
    return _arg_extreme(argmax_p, operand, axis, index_dtype)


def argmin(operand: Any, axis: int, index_dtype: Any) -> Any:
    """The index of the first minimum along axis (the first NaN if there is one), like jax.lax.argmin."""
    return _arg_extreme(argmin_p, operand, axis, index_dtype)


# ---------------------------------------------------------------------------------------------------------------
# reduce(operands, init_values, computation, dimensions): any scalar computation of one or more operands (its IR
# lowered into stablehlo.reduce's region). Forward values and batching; no derivative (as in JAX): a computation
# that is add, mul, max or min of one operand goes to the differentiable reductions instead.
GENERAL_REDUCE_NOT_DIFFERENTIABLE = (
    "the derivative of reduce with a general computation is not implemented (as in JAX); reduce one operand with "
    "lax.add, lax.mul, lax.max or lax.min, whose reductions are differentiable")
reduce_p = Primitive("reduce", multiple_results=True, checks=NAN_CHECK)
reduce_p.def_rule("sharding_rule", explicit.general_reduce)


@reduce_p.def_rule("abstract_eval")
def _reduce_abstract_eval(*avals: ShapedArray, computation: Any, dimensions: tuple[int, ...]
                          ) -> list[ShapedArray]:
    n = len(avals) // 2
    operands, inits = avals[:n], avals[n:]
    shapes = {a.shape for a in operands}
    if len(shapes) != 1:
        raise TypeError(f"reduce: operands must have one shape, got {', '.join(a.str_short() for a in operands)}")
    for x, init in zip(operands, inits):
        if init.shape != () or init.dtype != x.dtype:
            raise TypeError(f"reduce: each init value must be a scalar of its operand's dtype {x.dtype}, got "
                            f"{init.str_short()}")
    ndim = operands[0].ndim
    if any(not 0 <= d < ndim for d in dimensions) or len(set(dimensions)) != len(dimensions):
        raise TypeError(f"reduce: dimensions {dimensions} are invalid for {operands[0].str_short()}")
    return [ShapedArray(tuple(s for i, s in enumerate(x.shape) if i not in dimensions), x.dtype) for x in operands]


@reduce_p.def_rule("lowering")
def _reduce_lowering(ctx: LoweringContext, *args: str, computation: Any, dimensions: tuple[int, ...]) -> list[str]:
    region = ctx.lower_region(computation)
    outs = ctx.op("stablehlo.reduce", list(args), ctx.avals_out, {"dimensions": i64_array(dimensions)}, [region])
    return list(outs)


reduce_p.mark("jvp", GENERAL_REDUCE_NOT_DIFFERENTIABLE)
reduce_p.mark("vjp", GENERAL_REDUCE_NOT_DIFFERENTIABLE)


@reduce_p.def_rule("batching")
def _reduce_batching(args: list[Any], dims: list[BatchDim], *, computation: Any, dimensions: tuple[int, ...]
                     ) -> tuple[list[Any], list[BatchDim]]:
    n = len(args) // 2
    if any(d is not None for d in dims[n:]):
        raise NotImplementedError("vmap of reduce with batched init_values is not supported; pass unbatched "
                                  "init_values and combine them afterwards")
    size = next(aval_of(x).shape[d] for x, d in zip(args[:n], dims[:n]) if d is not None)
    operands = []
    for x, d in zip(args[:n], dims[:n]):  # every operand batched at the front
        if d is None:
            shape = aval_of(x).shape
            x = broadcast_in_dim(x, (size,) + shape, tuple(range(1, len(shape) + 1)))
        elif d != 0:
            perm = [d] + [i for i in range(aval_of(x).ndim) if i != d]
            x = transpose(x, perm)
        operands.append(x)
    outs = reduce_p.bind(*operands, *args[n:], computation=computation,
                         dimensions=tuple(d + 1 for d in dimensions))
    return list(outs), [0] * n


_MONOIDS: dict[str, tuple[Callable[..., Any], Callable[[np.dtype], Any]]] = {
    "add": (reduce_sum, lambda dtype: 0),
    "mul": (reduce_prod, lambda dtype: 1),
    "max": (reduce_max, _lowest),
    "min": (reduce_min, _highest),
}


def _monoid_of(computation: Any) -> str | None:
    """"add", "mul", "max" or "min" for ember's lax/numpy functions of those names, else None."""
    known = {add: "add", mul: "mul", max: "max", min: "min"}
    if computation in known:
        return known[computation]
    if getattr(computation, "__module__", "").startswith("ember"):
        return {"add": "add", "mul": "mul", "multiply": "mul", "maximum": "max", "minimum": "min", "max": "max",
                "min": "min"}.get(getattr(computation, "__name__", ""))
    return None


def reduce(operands: Any, init_values: Any, computation: Callable[[Any, Any], Any], dimensions: Sequence[int]
           ) -> Any:
    """Reduce operands over dimensions with computation, like jax.lax.reduce: one array and a scalar init value,
    computation(a, b) of two scalars; or a tuple/list of arrays of one shape and as many init values, computation
    taking two tuples of scalars and returning a tuple. add/mul/max/min (lax or numpy) of one operand are the
    differentiable reduce_sum/prod/max/min (a non-identity init value combined once with the result); any other
    computation gives forward values only."""
    single = not isinstance(operands, (tuple, list))
    xs = [operands] if single else list(operands)
    inits = [init_values] if single else list(init_values) if isinstance(init_values, (tuple, list)) else None
    if inits is None or len(inits) != len(xs):
        raise TypeError(f"reduce: init_values must match operands: {len(xs)} operand(s), got {init_values!r}")
    if not xs:
        raise TypeError("reduce: needs at least one operand")
    avals = [aval_of(x) for x in xs]
    dims = static_ints("reduce", "dimensions", dimensions)
    dims = tuple(normalize_axis("reduce", d, avals[0].ndim) for d in dims)
    inits = [scalar_literal(v, a.dtype, False) if isinstance(v, (bool, int, float)) else v
             for v, a in zip(inits, avals)]
    kind = _monoid_of(computation) if single else None
    if kind is not None and dt.is_bool(avals[0].dtype) and kind in ("add", "mul"):
        kind = None
    if kind is not None:
        reducer, identity = _MONOIDS[kind]
        out = reducer(xs[0], dims)
        init = inits[0]
        if not isinstance(init, Tracer | Literal) and np.ndim(init) == 0 and \
                np.asarray(init).item() == identity(avals[0].dtype):
            return out
        if isinstance(init, Literal) and np.asarray(init.value).item() == identity(avals[0].dtype):
            return out
        return computation(out, broadcast_in_dim(convert_element_type(init, avals[0].dtype),
                                                 aval_of(out).shape, ()))
    scalars = [ShapedArray((), a.dtype) for a in avals]
    n = len(xs)

    def flat(*args: Any) -> list[Any]:
        if single:
            return [computation(args[0], args[1])]
        result = computation(tuple(args[:n]), tuple(args[n:]))
        return list(result) if isinstance(result, (tuple, list)) else [result]
    try:
        ir = stage_flat(flat, scalars + scalars)
    except Exception as err:
        raise TypeError(f"reduce: computation {getattr(computation, '__name__', computation)!r} must map two "
                        f"{'scalars' if single else 'tuples of scalars'} of dtypes "
                        f"{[str(a.dtype) for a in avals]} to one: {err}") from err
    if ir.consts or ir.out_avals != scalars:
        raise TypeError(f"reduce: computation must return {'a scalar' if single else f'{n} scalars'} of dtypes "
                        f"{[str(a.dtype) for a in avals]} and close over no arrays, got "
                        f"{[a.str_short() for a in ir.out_avals]}")
    outs = reduce_p.bind(*xs, *inits, computation=ir, dimensions=dims)
    return outs[0] if single else type(operands)(outs) if isinstance(operands, tuple) else list(outs)


__all__ = ["argmax", "argmin", "reduce", "reduce_and", "reduce_max", "reduce_min", "reduce_or", "reduce_prod",
           "reduce_xor"]
