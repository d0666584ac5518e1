"""Windowed reductions (pooling): reduce_window_sum, reduce_window_max, reduce_window_min; the two linear
primitives that carry max/min pooling's derivative, select_and_gather_add (forward mode: each window's tangent at
its extreme) and select_and_scatter_add (reverse mode: each window's cotangent sent to its extreme), each the other's
transpose; and cumsum (a prefix sum, linear, its transpose the reverse prefix sum).

Window parameters follow StableHLO's reduce_window: window_dimensions, window_strides, padding ((low, high) per
dimension, filled with the reduction's identity), base_dilation (holes between operand elements, also the
identity) and window_dilation (holes between window elements)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember._core import IR, Literal, Primitive, ShapedArray, Tracer, aval_of, scalar_literal
from ember._core import dtypes as dt
from ember._core import NAN_CHECK
from ember._core.checks import normalize_axis, static_int, static_ints
from ember._core.shape_poly import dim_text, is_symbolic_dim, max_dim
from ember._core.trace import stage_flat
from ember._hlo import LoweringContext, i64_array
from ember._hlo import compare_type
from ember._prims.checks import check_dtype
from ember._prims.conv import padtype_to_pads
from ember._prims.elementwise import add, max, min
from ember._prims.shape import BatchDim, batch_at_front, batch_size, broadcast_in_dim, linear_jvp
from ember._prims.slicing import pad, slice
from ember._prims import explicit

Pairs = tuple[tuple[int, int], ...]


def _dilate(size: int, d: int) -> int:
    if is_symbolic_dim(size):  # (ember.export: a size that may be 0; JAX's dilate_dim)
        return size if d == 1 else max_dim(0, (size - 1) * d + 1)
    return 0 if size == 0 else (size - 1) * d + 1


def window_shape(op: str, shape: Sequence[int], window_dimensions: Sequence[int], window_strides: Sequence[int],
                 padding: Pairs, base_dilation: Sequence[int], window_dilation: Sequence[int]) -> tuple[int, ...]:
    """The output shape of a windowed reduction, or a TypeError naming what does not fit."""
    rank = len(shape)
    for name, v in (("window_dimensions", window_dimensions), ("window_strides", window_strides),
                    ("base_dilation", base_dilation), ("window_dilation", window_dilation)):
        if len(v) != rank or any(x < 1 for x in v):
            raise TypeError(f"{op}: {name} {tuple(v)} needs {rank} positive entries (one per operand dimension)")
    if len(padding) != rank or any(len(p) != 2 for p in padding):
        raise TypeError(f"{op}: padding {padding} needs {rank} (low, high) pairs")
    out = []
    for n, k, s, (lo, hi), bd, wd in zip(shape, window_dimensions, window_strides, padding, base_dilation,
                                         window_dilation):
        span = _dilate(n, bd) + lo + hi - _dilate(k, wd)
        if is_symbolic_dim(span):  # (ember.export: JAX's stride_dim, max(0, span // s + 1))
            out.append(max_dim(span // s + 1, 0))
            continue
        out.append(span // s + 1 if span >= 0 else 0)
    return tuple(out)


def _window_attrs(window_dimensions: Sequence[int], window_strides: Sequence[int], padding: Pairs,
                  base_dilation: Sequence[int] | None = None, window_dilation: Sequence[int] | None = None
                  ) -> dict[str, str]:
    rank = len(window_dimensions)
    attrs = {"window_dimensions": i64_array(window_dimensions), "window_strides": i64_array(window_strides)}
    if base_dilation is not None:
        attrs["base_dilations"] = i64_array(base_dilation)
    if window_dilation is not None:
        attrs["window_dilations"] = i64_array(window_dilation)
    if rank:
        pairs = ", ".join(f"[{dim_text(lo)}, {dim_text(hi)}]" for lo, hi in padding)
        attrs["padding"] = f"dense<[{pairs}]> : tensor<{rank}x2xi64>"
    return attrs


def _identity(kind: str, dtype: np.dtype) -> Any:
    if kind == "sum":
        return False if dt.is_bool(dtype) else 0
    return dt.lowest(dtype) if kind == "max" else dt.highest(dtype)


def _combiner(kind: str, dtype: np.dtype) -> str:
    if dt.is_bool(dtype):
        return {"sum": "or", "max": "or", "min": "and"}[kind]
    return {"sum": "add", "max": "maximum", "min": "minimum"}[kind]


def _batch_window(params: dict[str, Any], d: int) -> dict[str, Any]:
    """Window parameters with one more dimension, at d, of window 1 (the batch members stay apart)."""
    def ins(values: tuple[Any, ...], value: Any) -> tuple[Any, ...]:
        return values[:d] + (value,) + values[d:]
    out = dict(params, window_dimensions=ins(params["window_dimensions"], 1),
               window_strides=ins(params["window_strides"], 1), padding=ins(params["padding"], (0, 0)))
    for name in ("base_dilation", "window_dilation"):
        if name in params:
            out[name] = ins(params[name], 1)
    return out


# ---------------------------------------------------------------------------------------------------------------
# reduce_window_sum / max / min
def _reduce_window(kind: str) -> Primitive:
    name = f"reduce_window_{kind}"
    prim = Primitive(name, checks=NAN_CHECK if kind == "sum" else ())  # (a max or min makes no NaN: as JAX's)
    prim.def_rule("sharding_rule", explicit.windowed(name))

    @prim.def_rule("abstract_eval")
    def abstract_eval(x: ShapedArray, *, window_dimensions: tuple[int, ...], window_strides: tuple[int, ...],
                      padding: Pairs, base_dilation: tuple[int, ...], window_dilation: tuple[int, ...]
                      ) -> ShapedArray:
        check_dtype(name, x, "fiub" if kind != "sum" else "fiu")
        shape = window_shape(name, x.shape, window_dimensions, window_strides, padding, base_dilation,
                             window_dilation)
        return ShapedArray(shape, x.dtype, x.weak_type)

    @prim.def_rule("lowering")
    def lowering(ctx: LoweringContext, x: str, **params: Any) -> list[str]:
        dtype = ctx.avals_in[0].dtype
        scalar = ShapedArray((), dtype)
        init = ctx.constant(_identity(kind, dtype), scalar)
        region = ctx.region([scalar, scalar], lambda body, args: [body.op(f"stablehlo.{_combiner(kind, dtype)}",
                                                                          args, scalar)])
        return [ctx.op("stablehlo.reduce_window", [x, init], ctx.aval_out, _window_attrs(**params), [region])]

    @prim.def_rule("batching")
    def batching(args: list[Any], dims: list[BatchDim], **params: Any) -> tuple[list[Any], list[BatchDim]]:
        return [prim.bind(args[0], **_batch_window(params, dims[0]))], [dims[0]]
    return prim


reduce_window_sum_p = _reduce_window("sum")
reduce_window_max_p = _reduce_window("max")
reduce_window_min_p = _reduce_window("min")
reduce_window_sum_p.def_rule("jvp", linear_jvp(reduce_window_sum_p))


@reduce_window_sum_p.def_rule("vjp")
def _reduce_window_sum_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                           window_dimensions: tuple[int, ...], window_strides: tuple[int, ...], padding: Pairs,
                           base_dilation: tuple[int, ...], window_dilation: tuple[int, ...]) -> list[Any]:
    """Each operand element gets the cotangents of the windows holding it: the cotangent spread out by the strides,
    padded so a window sum over it (the window is symmetric: no flip) covers the dilated operand, which the base
    dilation then samples."""
    shape, out_shape = aval_of(ins[0]).shape, aval_of(outs[0]).shape
    config = []
    for n, k, m, s, (lo, _), bd, wd in zip(shape, window_dimensions, out_shape, window_strides, padding,
                                           base_dilation, window_dilation):
        kk, nn = _dilate(k, wd), _dilate(n, bd)
        low = kk - 1 - lo
        config.append((low, nn + kk - 1 - low - _dilate(m, s), s - 1 if m else 0))
    spread = pad(cts[0], 0, config)
    rank = len(shape)
    summed = reduce_window_sum_p.bind(spread, window_dimensions=window_dimensions, window_strides=(1,) * rank,
                                      padding=((0, 0),) * rank, base_dilation=(1,) * rank,
                                      window_dilation=window_dilation)
    return [slice(summed, (0,) * rank, aval_of(summed).shape, base_dilation)]


def _chooser_rules(prim: Primitive, select: str) -> None:
    """max/min pooling's derivative (as JAX): forward mode takes each window's tangent at its extreme
    (select_and_gather_add); reverse mode sends each window's cotangent to its first extreme
    (select_and_scatter_add), which needs undilated windows."""
    def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[list[Any], list[Any]]:
        out = prim.bind(primals[0], **params)
        if tangents[0] is None:
            return [out], [None]
        return [out], [select_and_gather_add_p.bind(tangents[0], primals[0], select=select, **params)]

    def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], **params: Any) -> list[Any]:
        _check_undilated(prim.name, params)
        return [select_and_scatter_add_p.bind(cts[0], ins[0], select=select,
                                              window_dimensions=params["window_dimensions"],
                                              window_strides=params["window_strides"], padding=params["padding"])]
    prim.def_rule("jvp", jvp)
    prim.def_rule("vjp", vjp)


def _check_undilated(op: str, params: dict[str, Any]) -> None:
    if any(d != 1 for d in params.get("base_dilation", ())) or any(d != 1 for d in params.get("window_dilation", ())):
        raise NotImplementedError(f"reverse-mode derivative of {op} with base or window dilation "
                                  f"{params.get('base_dilation')}, {params.get('window_dilation')} (as in JAX)")


_chooser_rules(reduce_window_max_p, "ge")
_chooser_rules(reduce_window_min_p, "le")


# ---------------------------------------------------------------------------------------------------------------
# select_and_gather_add(tangents, operand): per window, the tangent where operand is extreme (ge: max, le: min)
select_and_gather_add_p = Primitive("select_and_gather_add", checks=())
select_and_gather_add_p.def_rule("sharding_rule", explicit.windowed("select_and_gather_add"))


@select_and_gather_add_p.def_rule("abstract_eval")
def _select_and_gather_add_abstract_eval(tangents: ShapedArray, operand: ShapedArray, *, select: str,
                                         window_dimensions: tuple[int, ...], window_strides: tuple[int, ...],
                                         padding: Pairs, base_dilation: tuple[int, ...],
                                         window_dilation: tuple[int, ...]) -> ShapedArray:
    op = "select_and_gather_add"
    if tangents.shape != operand.shape:
        raise TypeError(f"{op}: tangents {tangents.str_short()} and operand {operand.str_short()} differ in shape")
    check_dtype(op, operand, "fiu", "operand")
    shape = window_shape(op, operand.shape, window_dimensions, window_strides, padding, base_dilation,
                         window_dilation)
    return ShapedArray(shape, tangents.dtype, tangents.weak_type)


@select_and_gather_add_p.def_rule("lowering")
def _select_and_gather_add_lowering(ctx: LoweringContext, tangents: str, operand: str, *, select: str,
                                    **params: Any) -> list[str]:
    """A reduce_window over (operand, tangent) pairs keeping the pair of the extreme operand value."""
    t_aval, x_aval = ctx.avals_in
    t_scalar, x_scalar = ShapedArray((), t_aval.dtype), ShapedArray((), x_aval.dtype)
    boolean = ShapedArray((), dt.bool_)
    x_init = ctx.constant(_identity("max" if select == "ge" else "min", x_aval.dtype), x_scalar)
    t_init = ctx.constant(0, t_scalar)
    direction = "GE" if select == "ge" else "LE"

    def body(emitter: Any, args: list[str]) -> list[str]:
        x_a, t_a, x_b, t_b = args
        keep = emitter.op("stablehlo.compare", [x_a, x_b], boolean,
                          {"comparison_direction": f"#stablehlo<comparison_direction {direction}>",
                           "compare_type": f"#stablehlo<comparison_type {compare_type(x_aval.dtype)}>"})
        return [emitter.op("stablehlo.select", [keep, x_a, x_b], x_scalar),
                emitter.op("stablehlo.select", [keep, t_a, t_b], t_scalar)]
    region = ctx.region([x_scalar, t_scalar, x_scalar, t_scalar], body)
    out_x = ShapedArray(ctx.aval_out.shape, x_aval.dtype)
    outs = ctx.op("stablehlo.reduce_window", [operand, tangents, x_init, t_init], [out_x, ctx.aval_out],
                  _window_attrs(**params), [region])
    return [outs[1]]


select_and_gather_add_p.def_rule("jvp", linear_jvp(select_and_gather_add_p, [0]))


@select_and_gather_add_p.def_rule("vjp")
def _select_and_gather_add_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, select: str,
                               **params: Any) -> list[Any]:
    _check_undilated("select_and_gather_add", params)
    return [select_and_scatter_add_p.bind(cts[0], ins[1], select=select,
                                          window_dimensions=params["window_dimensions"],
                                          window_strides=params["window_strides"], padding=params["padding"]),
            None]


def _pair_batching(prim: Primitive) -> Callable[..., Any]:
    def rule(args: list[Any], dims: list[BatchDim], **params: Any) -> tuple[list[Any], list[BatchDim]]:
        size = batch_size(args, dims)
        a, b = (batch_at_front(x, d, size) for x, d in zip(args, dims))
        return [prim.bind(a, b, **_batch_window(params, 0))], [0]
    return rule


select_and_gather_add_p.def_rule("batching", _pair_batching(select_and_gather_add_p))


# ---------------------------------------------------------------------------------------------------------------
# select_and_scatter_add(source, operand): each window's source value added where operand is extreme in it
select_and_scatter_add_p = Primitive("select_and_scatter_add", checks=())
select_and_scatter_add_p.def_rule("sharding_rule", explicit.windowed("select_and_scatter_add", layout=1))


@select_and_scatter_add_p.def_rule("abstract_eval")
def _select_and_scatter_add_abstract_eval(source: ShapedArray, operand: ShapedArray, *, select: str,
                                          window_dimensions: tuple[int, ...], window_strides: tuple[int, ...],
                                          padding: Pairs) -> ShapedArray:
    op = "select_and_scatter_add"
    rank = operand.ndim
    check_dtype(op, operand, "fiu", "operand")
    shape = window_shape(op, operand.shape, window_dimensions, window_strides, padding, (1,) * rank, (1,) * rank)
    if source.shape != shape:
        raise TypeError(f"{op}: source {source.str_short()} must have the windows' shape {shape}")
    return ShapedArray(operand.shape, source.dtype, source.weak_type)


@select_and_scatter_add_p.def_rule("lowering")
def _select_and_scatter_add_lowering(ctx: LoweringContext, source: str, operand: str, *, select: str,
                                     window_dimensions: tuple[int, ...], window_strides: tuple[int, ...],
                                     padding: Pairs) -> list[str]:
    s_aval, x_aval = ctx.avals_in
    s_scalar, x_scalar = ShapedArray((), s_aval.dtype), ShapedArray((), x_aval.dtype)
    boolean = ShapedArray((), dt.bool_)
    direction = "GE" if select == "ge" else "LE"
    select_region = ctx.region([x_scalar, x_scalar], lambda body, args: [body.op(
        "stablehlo.compare", args, boolean,
        {"comparison_direction": f"#stablehlo<comparison_direction {direction}>",
         "compare_type": f"#stablehlo<comparison_type {compare_type(x_aval.dtype)}>"})])
    scatter_region = ctx.region([s_scalar, s_scalar], lambda body, args: [body.op("stablehlo.add", args, s_scalar)])
    init = ctx.constant(0, s_scalar)
    attrs = _window_attrs(window_dimensions, window_strides, padding)
    return [ctx.op("stablehlo.select_and_scatter", [operand, source, init], ctx.aval_out, attrs,
                   [select_region, scatter_region])]


select_and_scatter_add_p.def_rule("jvp", linear_jvp(select_and_scatter_add_p, [0]))


@select_and_scatter_add_p.def_rule("vjp")
def _select_and_scatter_add_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                                select: str, window_dimensions: tuple[int, ...], window_strides: tuple[int, ...],
                                padding: Pairs) -> list[Any]:
    rank = len(window_dimensions)
    return [select_and_gather_add_p.bind(cts[0], ins[1], select=select, window_dimensions=window_dimensions,
                                         window_strides=window_strides, padding=padding,
                                         base_dilation=(1,) * rank, window_dilation=(1,) * rank), None]


select_and_scatter_add_p.def_rule("batching", _pair_batching(select_and_scatter_add_p))


# ---------------------------------------------------------------------------------------------------------------
# select_and_scatter(operand, source, init_value; select_jaxpr, scatter_jaxpr): XLA's general SelectAndScatter
# (jax.lax's select_and_scatter_p): in each window of operand the element that select (a scalar comparison, x kept over
# y when it says true) prefers receives that window's source value, combined by scatter (a scalar computation) into an
# output of operand's shape filled with init_value. Its computations are IRs lowered into the op's regions. As in JAX,
# it has no derivative (select_and_scatter_add, its differentiable case, is the reverse mode of max pooling); batching
# gives the batch dimension a window of one.
GENERAL_SELECT_AND_SCATTER_NOT_DIFFERENTIABLE = (
    "the derivative of select_and_scatter with general computations is not implemented (as in JAX, which defines "
    "none); select_and_scatter_add is the differentiable case")
select_and_scatter_p = Primitive("select_and_scatter", checks=NAN_CHECK)
select_and_scatter_p.def_rule("sharding_rule", explicit.windowed("select_and_scatter"))


@select_and_scatter_p.def_rule("abstract_eval")
def _select_and_scatter_abstract_eval(operand: ShapedArray, source: ShapedArray, init: ShapedArray, *,
                                      select_jaxpr: Any, scatter_jaxpr: Any, window_dimensions: tuple[int, ...],
                                      window_strides: tuple[int, ...], padding: Pairs) -> ShapedArray:
    op = "select_and_scatter"
    rank = operand.ndim
    shape = window_shape(op, operand.shape, window_dimensions, window_strides, padding, (1,) * rank, (1,) * rank)
    if source.shape != shape:
        raise TypeError(f"{op}: source {source.str_short()} must have the windows' shape {shape}")
    if init.shape != () or init.dtype != source.dtype:
        raise TypeError(f"{op}: init_value must be a scalar of the source's dtype {source.dtype}, got "
                        f"{init.str_short()}")
    x, s = ShapedArray((), operand.dtype), ShapedArray((), source.dtype)
    if [a.strip_weak_type() for a in select_jaxpr.in_avals] != [x, x] or \
            [a.strip_weak_type() for a in select_jaxpr.out_avals] != [ShapedArray((), dt.bool_)]:
        raise TypeError(f"{op}: select must map two {x.str_short()} scalars to one boolean")
    if [a.strip_weak_type() for a in scatter_jaxpr.in_avals] != [s, s] or \
            [a.strip_weak_type() for a in scatter_jaxpr.out_avals] != [s]:
        raise TypeError(f"{op}: scatter must map two {s.str_short()} scalars to one")
    return ShapedArray(operand.shape, source.dtype, source.weak_type and init.weak_type)


@select_and_scatter_p.def_rule("lowering")
def _select_and_scatter_lowering(ctx: LoweringContext, operand: str, source: str, init: str, *, select_jaxpr: Any,
                                 scatter_jaxpr: Any, window_dimensions: tuple[int, ...],
                                 window_strides: tuple[int, ...], padding: Pairs) -> list[str]:
    regions = [ctx.lower_region(select_jaxpr), ctx.lower_region(scatter_jaxpr)]
    return [ctx.op("stablehlo.select_and_scatter", [operand, source, init], ctx.aval_out,
                   _window_attrs(window_dimensions, window_strides, padding), regions)]


select_and_scatter_p.mark("jvp", GENERAL_SELECT_AND_SCATTER_NOT_DIFFERENTIABLE)
select_and_scatter_p.mark("vjp", GENERAL_SELECT_AND_SCATTER_NOT_DIFFERENTIABLE)


@select_and_scatter_p.def_rule("batching")
def _select_and_scatter_batching(args: list[Any], dims: list[BatchDim], **params: Any
                                 ) -> tuple[list[Any], list[BatchDim]]:
    if dims[2] is not None:
        raise NotImplementedError("vmap of select_and_scatter with a batched init_value is not supported")
    size = batch_size(args, dims)
    operand, source = (batch_at_front(x, d, size) for x, d in zip(args[:2], dims[:2]))
    return [select_and_scatter_p.bind(operand, source, args[2], **_batch_window(params, 0))], [0]


def _scalar_computation(op: str, fn: Callable[[Any, Any], Any], dtype: np.dtype) -> IR:
    """fn staged at two scalars of dtype (a select's or scatter's computation), closing over no arrays."""
    scalar = ShapedArray((), dtype)
    ir = stage_flat(lambda a, b: [fn(a, b)], [scalar, scalar])
    if ir.consts:
        raise TypeError(f"{op}: a computation must close over no arrays")
    return ir


def select_and_scatter(operand: Any, select: Callable[[Any, Any], Any], window_dimensions: Sequence[int],
                       window_strides: Sequence[int], padding: Any, source: Any, init_value: Any,
                       scatter: Callable[[Any, Any], Any]) -> Any:
    """XLA's SelectAndScatter (the `select_and_scatter` primitive, jax.lax.select_and_scatter_p; jax.lax has no
    public function for it): select(x, y) -> bool picks an element per window of operand, which receives the
    window's source value, combined by scatter into an array of operand's shape filled with init_value."""
    op = "select_and_scatter"
    x, s = aval_of(operand), aval_of(source)
    params = _window_params(op, x.shape, window_dimensions, window_strides, padding, None, None)
    init = scalar_literal(init_value, s.dtype, False) if isinstance(init_value, int | float | bool) else init_value
    return select_and_scatter_p.bind(
        operand, source, init, select_jaxpr=_scalar_computation(op, select, x.dtype),
        scatter_jaxpr=_scalar_computation(op, scatter, s.dtype), window_dimensions=params["window_dimensions"],
        window_strides=params["window_strides"], padding=params["padding"])


# ---------------------------------------------------------------------------------------------------------------
# cumsum(x, axis, reverse): prefix sums, lowered as a window sum over each prefix (XLA turns it into a scan)
cumsum_p = Primitive("cumsum", checks=NAN_CHECK)
cumsum_p.def_rule("sharding_rule", explicit.cumulative)


@cumsum_p.def_rule("abstract_eval")
def _cumsum_abstract_eval(x: ShapedArray, *, axis: int, reverse: bool) -> ShapedArray:
    check_dtype("cumsum", x, "fiuc")
    if not 0 <= axis < x.ndim:
        raise TypeError(f"cumsum: axis {axis} is out of range for {x.str_short()}")
    return x


def _prefix_window(shape: Sequence[int], axis: int, reverse: bool) -> dict[str, Any]:
    n = shape[axis]
    rank = len(shape)
    window = [1] * rank
    window[axis] = max_dim(n, 1)  # (of ints, or symbolic dimensions: ember.export)
    pads = [(0, 0)] * rank
    pads[axis] = (0, max_dim(n - 1, 0)) if reverse else (max_dim(n - 1, 0), 0)
    return dict(window_dimensions=tuple(window), window_strides=(1,) * rank, padding=tuple(pads))


def emit_prefix_reduction(ctx: LoweringContext, x: str, axis: int, reverse: bool, hlo_op: str, init: Any) -> str:
    """The running reduction of x (of type ctx.avals_in[0]) along axis by the scalar op stablehlo.<hlo_op> from
    init: a reduce_window whose window is the whole axis, padded with init before each element (after, reversed),
    as JAX lowers its cumulative reductions (XLA rewrites it into an efficient scan)."""
    scalar = ShapedArray((), ctx.avals_in[0].dtype)
    region = ctx.region([scalar, scalar], lambda body, args: [body.op(f"stablehlo.{hlo_op}", args, scalar)])
    attrs = _window_attrs(**_prefix_window(ctx.avals_in[0].shape, axis, reverse))
    return ctx.op("stablehlo.reduce_window", [x, ctx.constant(init, scalar)], ctx.aval_out, attrs, [region])


@cumsum_p.def_rule("lowering")
def _cumsum_lowering(ctx: LoweringContext, x: str, *, axis: int, reverse: bool) -> list[str]:
    return [emit_prefix_reduction(ctx, x, axis, reverse, "add", 0)]


cumsum_p.def_rule("jvp", linear_jvp(cumsum_p))
cumsum_p.def_rule("vjp", lambda cts, ins, outs, needs, *, axis, reverse: [
    cumsum_p.bind(cts[0], axis=axis, reverse=not reverse)])


@cumsum_p.def_rule("batching")
def _cumsum_batching(args: list[Any], dims: list[BatchDim], *, axis: int, reverse: bool
                     ) -> tuple[list[Any], list[BatchDim]]:
    d = dims[0]
    return [cumsum_p.bind(args[0], axis=axis + 1 if axis >= d else axis, reverse=reverse)], [d]


def cumsum(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
    """The running sum along axis (like jax.lax.cumsum); reverse sums from the end."""
    ndim = aval_of(operand).ndim
    axis = normalize_axis("cumsum", static_int("cumsum", "axis", axis), ndim)
    return cumsum_p.bind(operand, axis=axis, reverse=bool(reverse))


# ---------------------------------------------------------------------------------------------------------------
# Public windowed reductions
_REDUCERS = {"sum": reduce_window_sum_p, "max": reduce_window_max_p, "min": reduce_window_min_p}


def _window_params(op: str, shape: Sequence[int], window_dimensions: Sequence[int], window_strides: Sequence[int],
                   padding: Any, base_dilation: Sequence[int] | None, window_dilation: Sequence[int] | None
                   ) -> dict[str, Any]:
    rank = len(shape)
    dims = static_ints(op, "window_dimensions", window_dimensions)
    strides = static_ints(op, "window_strides", window_strides)
    bd = (1,) * rank if base_dilation is None else static_ints(op, "base_dilation", base_dilation)
    wd = (1,) * rank if window_dilation is None else static_ints(op, "window_dilation", window_dilation)
    if isinstance(padding, str):
        if len(dims) != rank or len(strides) != rank:
            raise TypeError(f"{op}: window_dimensions {dims} and window_strides {strides} need {rank} entries")
        pads = tuple(padtype_to_pads([_dilate(n, b) for n, b in zip(shape, bd)],
                                     [_dilate(k, w) for k, w in zip(dims, wd)], strides, padding))
    else:
        pads = tuple(tuple(static_ints(op, "padding", p)) for p in padding)
    params = dict(window_dimensions=dims, window_strides=strides, padding=pads, base_dilation=bd, window_dilation=wd)
    window_shape(op, shape, **params)  # check
    return params


def reduce_window_kind(kind: str, operand: Any, window_dimensions: Sequence[int], window_strides: Sequence[int],
                       padding: Any, base_dilation: Sequence[int] | None = None,
                       window_dilation: Sequence[int] | None = None) -> Any:
    """The windowed sum, max or min of operand (padding with the reduction's identity)."""
    params = _window_params(f"reduce_window_{kind}", aval_of(operand).shape, window_dimensions, window_strides,
                            padding, base_dilation, window_dilation)
    return _REDUCERS[kind].bind(operand, **params)


def reduce_window_with_init(kind: str, operand: Any, init_value: Any, combine: Callable[[Any, Any], Any],
                            window_dimensions: Sequence[int], window_strides: Sequence[int], padding: Any,
                            base_dilation: Sequence[int] | None, window_dilation: Sequence[int] | None) -> Any:
    """A windowed reduction whose init value is not the identity: each window's reduction of its elements (the
    padding and dilation holes contribute nothing) combined with init_value once, as XLA computes it."""
    aval = aval_of(operand)
    out = reduce_window_kind(kind, operand, window_dimensions, window_strides, padding, base_dilation,
                             window_dilation)
    value = scalar_literal(init_value, aval.dtype, aval.weak_type) if isinstance(init_value, int | float | bool) \
        else init_value
    return combine(out, broadcast_in_dim(value, aval_of(out).shape, ()))


# ---------------------------------------------------------------------------------------------------------------
# reduce_window(x, init, computation): a windowed reduction with any scalar computation (its IR lowered into the
# region), as jax.lax.reduce_window with a general computation: forward values and batching, no derivative.
GENERAL_REDUCE_WINDOW_NOT_DIFFERENTIABLE = (
    "the derivative of reduce_window with a general computation is not implemented (as in JAX); use lax.add, "
    "lax.max or lax.min, whose windowed reductions are differentiable")
reduce_window_p = Primitive("reduce_window", checks=NAN_CHECK)
reduce_window_p.def_rule("sharding_rule", explicit.windowed("reduce_window"))


@reduce_window_p.def_rule("abstract_eval")
def _reduce_window_abstract_eval(x: ShapedArray, init: ShapedArray, *, computation: Any,
                                 window_dimensions: tuple[int, ...], window_strides: tuple[int, ...],
                                 padding: Pairs, base_dilation: tuple[int, ...], window_dilation: tuple[int, ...]
                                 ) -> ShapedArray:
    op = "reduce_window"
    if init.shape != () or init.dtype != x.dtype:
        raise TypeError(f"{op}: init_value must be a scalar of the operand's dtype {x.dtype}, got {init.str_short()}")
    shape = window_shape(op, x.shape, window_dimensions, window_strides, padding, base_dilation, window_dilation)
    return ShapedArray(shape, x.dtype, x.weak_type)


@reduce_window_p.def_rule("lowering")
def _reduce_window_lowering(ctx: LoweringContext, x: str, init: str, *, computation: Any, **params: Any
                            ) -> list[str]:
    region = ctx.lower_region(computation)
    return [ctx.op("stablehlo.reduce_window", [x, init], ctx.aval_out, _window_attrs(**params), [region])]


reduce_window_p.mark("jvp", GENERAL_REDUCE_WINDOW_NOT_DIFFERENTIABLE)
reduce_window_p.mark("vjp", GENERAL_REDUCE_WINDOW_NOT_DIFFERENTIABLE)


@reduce_window_p.def_rule("batching")
def _reduce_window_batching(args: list[Any], dims: list[BatchDim], *, computation: Any, **params: Any
                            ) -> tuple[list[Any], list[BatchDim]]:
    if dims[1] is not None:
        raise NotImplementedError("vmap of reduce_window with a batched init_value is not supported; pass an "
                                  "unbatched init_value and combine it afterwards")
    d = dims[0]
    return [reduce_window_p.bind(args[0], args[1], computation=computation, **_batch_window(params, d))], [d]


def _general_reduce_window(operand: Any, init_value: Any, computation: Callable[[Any, Any], Any],
                           window_dimensions: Sequence[int], window_strides: Sequence[int], padding: Any,
                           base_dilation: Sequence[int] | None, window_dilation: Sequence[int] | None) -> Any:
    aval = aval_of(operand)
    params = _window_params("reduce_window", aval.shape, window_dimensions, window_strides, padding, base_dilation,
                            window_dilation)
    scalar = ShapedArray((), aval.dtype)
    try:
        ir = stage_flat(lambda a, b: [computation(a, b)], [scalar, scalar])
    except Exception as err:
        raise TypeError(f"reduce_window: computation {getattr(computation, '__name__', computation)!r} must map two "
                        f"scalars of dtype {aval.dtype} to one: {err}") from err
    if ir.consts or ir.out_avals != [scalar]:
        raise TypeError(f"reduce_window: computation must return one scalar of dtype {aval.dtype} and close over no "
                        f"arrays, got outputs {[a.str_short() for a in ir.out_avals]}")
    init = scalar_literal(init_value, aval.dtype, False) if isinstance(init_value, int | float | bool) else \
        init_value
    return reduce_window_p.bind(operand, init, computation=ir, **params)


def _kind_of(computation: Any) -> str | None:
    """"sum", "max" or "min" for ember's add/max/min (lax or numpy spellings), else None."""
    if computation is add:
        return "sum"
    if computation is max:
        return "max"
    if computation is min:
        return "min"
    if getattr(computation, "__module__", "").startswith("ember"):
        return {"add": "sum", "maximum": "max", "minimum": "min", "max": "max", "min": "min"}.get(
            getattr(computation, "__name__", ""))
    return None


def reduce_window(operand: Any, init_value: Any, computation: Callable[[Any, Any], Any],
                  window_dimensions: Sequence[int], window_strides: Sequence[int] | None = None,
                  padding: Any = "VALID", base_dilation: Sequence[int] | None = None,
                  window_dilation: Sequence[int] | None = None) -> Any:
    """A reduction over each window of operand (like jax.lax.reduce_window): computation is ember.lax.add, max or
    min (or ember.numpy.add/maximum/minimum), or any function of two scalars (then without derivatives, as in
    JAX); window_strides default to 1; padding is "SAME", "VALID" (the default) or (low, high) pairs. With the
    reduction's identity as init_value (0, -inf, +inf, or the integer extremes) this is one primitive; another
    init_value also fills the padding and is combined into every window, as in JAX."""
    kind = _kind_of(computation)
    if window_strides is None:
        window_strides = (1,) * len(static_ints("reduce_window", "window_dimensions", window_dimensions))
    if kind is None:  # any other scalar computation: forward values only
        return _general_reduce_window(operand, init_value, computation, window_dimensions, window_strides, padding,
                                      base_dilation, window_dilation)
    dtype = aval_of(operand).dtype
    identity = _identity(kind, dtype)
    concrete = None  # a traced init value is not known to be the identity
    if not isinstance(init_value, Tracer | Literal) and np.ndim(init_value) == 0:
        concrete = np.asarray(init_value).item()
    # (-inf and inf are the max's and min's identities of every float dtype, as JAX takes them: the 8-bit floats
    # without infinities, whose identities are their extreme finite values, included)
    if concrete is not None and (concrete == identity or
                                 dt.is_float(dtype) and concrete == _identity(kind, dt.float32)):
        return reduce_window_kind(kind, operand, window_dimensions, window_strides, padding, base_dilation,
                                  window_dilation)
    combine = {"sum": add, "max": max, "min": min}[kind]
    return reduce_window_with_init(kind, operand, init_value, combine, window_dimensions, window_strides, padding,
                                   base_dilation, window_dilation)


__all__ = ["cumsum", "reduce_window"]
