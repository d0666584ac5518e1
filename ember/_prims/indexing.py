"""Indexing primitives: gather, the scatter family (scatter, scatter_add, scatter_mul, scatter_min, scatter_max),
dynamic_slice, dynamic_update_slice and clamp.

gather and scatter follow StableHLO's dimension numbers (with batching dimensions, which make vmap of an indexing
op one more batching dimension instead of an iota), with the index vector always the last dimension of the
indices, as in jax.lax. Out-of-bounds semantics are those of StableHLO: gather clamps each start index so the slice
fits, scatter skips an update window that does not fit. The public functions build the other modes on top ("fill"
masks a gather, "clip" clamps a scatter's indices), so the primitives carry one semantics each and their rules stay
exact: gather's VJP is a scatter_add at the clamped indices, scatter_add's is a gather that reads 0 where the update
was skipped."""
from __future__ import annotations

import builtins
import enum
import math
from typing import Any, NamedTuple, Sequence

import numpy as np

from ember._core import Literal, Primitive, ShapedArray, aval_of, is_python_scalar, scalar_literal
from ember._core import dtypes as dt
from ember._core.checks import static_int, static_ints
from ember._core.trace import stage_flat
from ember._hlo import LoweringContext, i64_array
from ember._prims.checks import check_dtype, check_same_dtypes
from ember._prims.elementwise import add, bitwise_and, div, eq, ge, gt, le, lt, max, min, mul, neg, select
from ember._prims.shape import (BatchDim, batch_at_front, batch_size, broadcast_in_dim, convert_element_type, full,
                                iota, linear_jvp, moveaxis, reduce_sum, reshape, zeros_like)
from ember._prims.reduction import reduce_min
from ember._prims.slicing import concatenate, slice_in_dim
from ember._prims import explicit


class GatherDimensionNumbers(NamedTuple):
    """How a gather maps indices to slices of the operand (jax.lax.GatherDimensionNumbers): offset_dims are the
    output dimensions holding the slice's dimensions; collapsed_slice_dims are operand dimensions of slice size 1
    left out of the output; start_index_map says which operand dimension each index component indexes;
    operand_batching_dims/start_indices_batching_dims pair dimensions that are batch dimensions of both."""
    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()


class ScatterDimensionNumbers(NamedTuple):
    """The scatter twin of GatherDimensionNumbers (jax.lax.ScatterDimensionNumbers): update_window_dims are the
    updates' dimensions holding a window; inserted_window_dims are operand dimensions of window size 1 absent from
    the updates; scatter_dims_to_operand_dims maps index components to operand dimensions."""
    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    operand_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()


def _gather_dnums(dnums: Any) -> GatherDimensionNumbers:
    if not isinstance(dnums, GatherDimensionNumbers):
        raise TypeError(f"gather: dimension_numbers must be a GatherDimensionNumbers, got {type(dnums).__name__}")
    return GatherDimensionNumbers(*(static_ints("gather", f"dimension_numbers.{f}", v)
                                    for f, v in zip(dnums._fields, dnums)))


def _scatter_dnums(op: str, dnums: Any) -> ScatterDimensionNumbers:
    if not isinstance(dnums, ScatterDimensionNumbers):
        raise TypeError(f"{op}: dimension_numbers must be a ScatterDimensionNumbers, got {type(dnums).__name__}")
    return ScatterDimensionNumbers(*(static_ints(op, f"dimension_numbers.{f}", v)
                                     for f, v in zip(dnums._fields, dnums)))


def _shift(dims: tuple[int, ...], by: int = 1) -> tuple[int, ...]:
    return tuple(d + by for d in dims)


def _check_dims(op: str, what: str, dims: Sequence[int], rank: int) -> None:
    if any(not 0 <= d < rank for d in dims) or len(set(dims)) != len(dims):
        raise TypeError(f"{op}: {what} {tuple(dims)} must be distinct dimensions below rank {rank}")


def _check_indices(op: str, indices: ShapedArray, n_index: int) -> None:
    check_dtype(op, indices, "iu", "indices")
    if indices.ndim == 0 or indices.shape[-1] != n_index:
        raise TypeError(f"{op}: indices {indices.str_short()} must end in an index vector of length {n_index} "
                        "(one start index per entry of the index map)")


def _dims_attr(kind: str, fields: dict[str, tuple[int, ...]], index_vector_dim: int) -> str:
    parts = [f"{k} = [{', '.join(map(str, v))}]" for k, v in fields.items() if v]
    parts.append(f"index_vector_dim = {index_vector_dim}")
    return f"#stablehlo.{kind}<{', '.join(parts)}>"


# ---------------------------------------------------------------------------------------------------------------
# gather(operand, indices, dimension_numbers, slice_sizes, indices_are_sorted, unique_indices): clamping starts.
gather_p = Primitive("gather", checks=("oob",))
gather_p.def_rule("sharding_rule", explicit.gather)


@gather_p.def_rule("index_bounds")
def _gather_index_bounds(eqn: Any, ins: list[Any]) -> Any:
    """checkify's out-of-bounds check: each start lies in [0, dim - slice size] on the axis it indexes."""
    operand, indices = aval_of(ins[0]), ins[1]
    dnums, sizes = eqn.params["dimension_numbers"], eqn.params["slice_sizes"]
    axes = list(dnums.start_index_map)
    if not axes or not aval_of(indices).size:
        return None
    return indices, 0, [operand.shape[a] - sizes[a] for a in axes], axes


@gather_p.def_rule("abstract_eval")
def _gather_abstract_eval(operand: ShapedArray, indices: ShapedArray, *, dimension_numbers: GatherDimensionNumbers,
                          slice_sizes: tuple[int, ...], indices_are_sorted: bool, unique_indices: bool
                          ) -> ShapedArray:
    d = dimension_numbers
    _check_indices("gather", indices, len(d.start_index_map))
    if len(slice_sizes) != operand.ndim:
        raise TypeError(f"gather: slice_sizes {slice_sizes} needs one entry per dimension of {operand.str_short()}")
    for what, dims in (("collapsed_slice_dims", d.collapsed_slice_dims), ("start_index_map", d.start_index_map),
                       ("operand_batching_dims", d.operand_batching_dims)):
        _check_dims("gather", what, dims, operand.ndim)
    if set(d.collapsed_slice_dims) & set(d.operand_batching_dims):
        raise TypeError(f"gather: collapsed_slice_dims {d.collapsed_slice_dims} and operand_batching_dims "
                        f"{d.operand_batching_dims} overlap")
    _check_dims("gather", "start_indices_batching_dims", d.start_indices_batching_dims, indices.ndim - 1)
    if len(d.start_indices_batching_dims) != len(d.operand_batching_dims):
        raise TypeError("gather: operand_batching_dims and start_indices_batching_dims differ in length")
    for od, idim in zip(d.operand_batching_dims, d.start_indices_batching_dims):
        if operand.shape[od] != indices.shape[idim]:
            raise TypeError(f"gather: operand batching dimension {od} of {operand.str_short()} and indices "
                            f"dimension {idim} of {indices.str_short()} differ in size")
    for k in d.collapsed_slice_dims + d.operand_batching_dims:
        if slice_sizes[k] != 1:
            raise TypeError(f"gather: collapsed or batching dimension {k} must have slice size 1, got "
                            f"slice_sizes {slice_sizes}")
    offset_sizes = [s for k, s in enumerate(slice_sizes)
                    if k not in d.collapsed_slice_dims and k not in d.operand_batching_dims]
    batch_shape = list(indices.shape[:-1])
    rank = len(batch_shape) + len(offset_sizes)
    _check_dims("gather", "offset_dims", d.offset_dims, rank)
    if len(d.offset_dims) != len(offset_sizes) or list(d.offset_dims) != sorted(d.offset_dims):
        raise TypeError(f"gather: offset_dims {d.offset_dims} must list, in increasing order, one output dimension "
                        f"per slice dimension that is not collapsed ({len(offset_sizes)})")
    offsets, batches = iter(offset_sizes), iter(batch_shape)
    shape = [next(offsets) if k in d.offset_dims else next(batches) for k in range(rank)]
    for k, (size, bound) in enumerate(zip(slice_sizes, operand.shape)):
        # an empty result reads nothing: its slices may exceed a zero-size operand (take_along_axis of a (3, 0))
        if size < 0 or (size > bound and 0 not in shape):
            raise TypeError(f"gather: slice_sizes {slice_sizes} exceed the operand {operand.str_short()} at "
                            f"dimension {k}")
    return ShapedArray(shape, operand.dtype, operand.weak_type)


@gather_p.def_rule("lowering")
def _gather_lowering(ctx: LoweringContext, operand: str, indices: str, *, dimension_numbers: GatherDimensionNumbers,
                     slice_sizes: tuple[int, ...], indices_are_sorted: bool, unique_indices: bool) -> list[str]:
    if 0 in ctx.aval_out.shape:  # nothing to read (its slice sizes may exceed the operand, which StableHLO refuses)
        return [ctx.constant(0, ctx.aval_out)]
    d = dimension_numbers
    attr = _dims_attr("gather", {"offset_dims": d.offset_dims, "collapsed_slice_dims": d.collapsed_slice_dims,
                                 "operand_batching_dims": d.operand_batching_dims,
                                 "start_indices_batching_dims": d.start_indices_batching_dims,
                                 "start_index_map": d.start_index_map}, ctx.avals_in[1].ndim - 1)
    return [ctx.op("stablehlo.gather", [operand, indices], ctx.aval_out,
                   {"dimension_numbers": attr, "slice_sizes": i64_array(slice_sizes),
                    "indices_are_sorted": str(bool(indices_are_sorted)).lower()})]


gather_p.def_rule("jvp", linear_jvp(gather_p, [0]))


def _to_scatter_dnums(d: GatherDimensionNumbers) -> ScatterDimensionNumbers:
    return ScatterDimensionNumbers(d.offset_dims, d.collapsed_slice_dims, d.start_index_map, d.operand_batching_dims,
                                   d.start_indices_batching_dims)


def _to_gather_dnums(d: ScatterDimensionNumbers) -> GatherDimensionNumbers:
    return GatherDimensionNumbers(d.update_window_dims, d.inserted_window_dims, d.scatter_dims_to_operand_dims,
                                  d.operand_batching_dims, d.scatter_indices_batching_dims)


@gather_p.def_rule("vjp")
def _gather_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                dimension_numbers: GatherDimensionNumbers, slice_sizes: tuple[int, ...], indices_are_sorted: bool,
                unique_indices: bool) -> list[Any]:
    operand, indices = ins
    aval = aval_of(operand)
    # the gather read the slice at the clamped start: its cotangent goes there
    clamped = clamp_indices(indices, aval.shape, dimension_numbers.start_index_map, slice_sizes)
    ct = scatter_add_p.bind(full(aval.shape, 0, aval.dtype), clamped, cts[0],
                            dimension_numbers=_to_scatter_dnums(dimension_numbers),
                            indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)
    return [ct, None]


@gather_p.def_rule("batching")
def _gather_batching(args: list[Any], dims: list[BatchDim], *, dimension_numbers: GatherDimensionNumbers,
                     slice_sizes: tuple[int, ...], indices_are_sorted: bool, unique_indices: bool
                     ) -> tuple[list[Any], list[BatchDim]]:
    operand, indices = args
    operand_dim, indices_dim = dims
    d = dimension_numbers
    size = batch_size(args, dims)
    params = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)
    if indices_dim is None:  # one more operand dimension, sliced whole: the output's first dimension
        operand = moveaxis(operand, operand_dim, 0)
        dnums = GatherDimensionNumbers((0,) + _shift(d.offset_dims), _shift(d.collapsed_slice_dims),
                                       _shift(d.start_index_map), _shift(d.operand_batching_dims),
                                       d.start_indices_batching_dims)
        out = gather_p.bind(operand, indices, dimension_numbers=dnums, slice_sizes=(size,) + slice_sizes, **params)
        return [out], [0]
    indices = moveaxis(indices, indices_dim, 0)
    if operand_dim is None:  # one more batch dimension of the indices: the output's first dimension
        dnums = GatherDimensionNumbers(_shift(d.offset_dims), d.collapsed_slice_dims, d.start_index_map,
                                       d.operand_batching_dims, _shift(d.start_indices_batching_dims))
        return [gather_p.bind(operand, indices, dimension_numbers=dnums, slice_sizes=slice_sizes, **params)], [0]
    operand = moveaxis(operand, operand_dim, 0)  # both: a pair of batching dimensions
    dnums = GatherDimensionNumbers(_shift(d.offset_dims), _shift(d.collapsed_slice_dims), _shift(d.start_index_map),
                                   (0,) + _shift(d.operand_batching_dims),
                                   (0,) + _shift(d.start_indices_batching_dims))
    return [gather_p.bind(operand, indices, dimension_numbers=dnums, slice_sizes=(1,) + slice_sizes, **params)], [0]


def clamp_indices(indices: Any, operand_shape: Sequence[int], index_map: Sequence[int],
                  slice_sizes: Sequence[int]) -> Any:
    """indices (index vector last) with each component clamped to [0, dim - slice size] of the dimension it
    indexes: the starts StableHLO's gather would use, so a scatter at them never skips."""
    aval = aval_of(indices)
    bounds = [operand_shape[k] - slice_sizes[k] for k in index_map]
    if not bounds:
        return indices
    highs = broadcast_in_dim(_const_vector(bounds, aval.dtype), aval.shape, (aval.ndim - 1,))
    return min(max(indices, full(aval.shape, 0, aval.dtype)), highs)


def in_bounds(indices: Any, operand_shape: Sequence[int], index_map: Sequence[int],
              slice_sizes: Sequence[int]) -> Any:
    """Per index vector (the last dimension reduced), whether the slice at it fits in the operand."""
    aval = aval_of(indices)
    if not index_map:
        return full(aval.shape[:-1], True, dt.bool_)
    bounds = [operand_shape[k] - slice_sizes[k] for k in index_map]
    highs = broadcast_in_dim(_const_vector(bounds, aval.dtype), aval.shape, (aval.ndim - 1,))
    ok = bitwise_and(ge(indices, full(aval.shape, 0, aval.dtype)), le(indices, highs))
    return reduce_min(ok, (aval.ndim - 1,))


def _const_vector(values: Sequence[Any], dtype: np.dtype) -> Any:
    """A small constant vector as an IR value (a concatenation of scalar literals, so no constant capture); a
    symbolic dimension among the values (ember.export) is its value."""
    parts = [broadcast_in_dim(scalar_literal(v, np.dtype(dtype), False), (1,), ()) for v in values]
    return parts[0] if len(parts) == 1 else concatenate(parts, 0)


class GatherScatterMode(enum.Enum):
    """Out-of-bounds policies of gather and scatter (like jax.lax.GatherScatterMode); strings work too."""
    CLIP = "clip"
    FILL_OR_DROP = "fill_or_drop"
    PROMISE_IN_BOUNDS = "promise_in_bounds"

    @classmethod
    def from_any(cls, s: Any) -> "GatherScatterMode":
        if isinstance(s, cls):
            return s
        if s is None:
            return cls.FILL_OR_DROP
        if s in ("fill", "drop"):
            return cls.FILL_OR_DROP
        return cls(s)


GATHER_MODES = ("clip", "fill", "promise_in_bounds")


def _mode(op: str, mode: Any, allowed: Sequence[str], default: str) -> str:
    if mode is None:
        return default
    name = getattr(mode, "name", mode)
    name = str(name).lower()
    if name in ("fill_or_drop", "fill", "drop"):  # (one policy, named either way, as GatherScatterMode.from_any)
        name = "fill" if "fill" in allowed else "drop"
    if name not in allowed:
        raise ValueError(f"{op}: mode must be one of {', '.join(map(repr, allowed))}, got {mode!r}")
    return name


def default_fill_value(dtype: np.dtype) -> Any:
    """What mode "fill" reads out of bounds unless told: NaN for inexact dtypes, the most negative value for
    signed integers, the largest for unsigned, True for booleans (as JAX)."""
    return (np.nan if dt.is_inexact(dtype) else True if dt.is_bool(dtype)
            else dt.lowest(dtype) if dt.is_signed_int(dtype) else dt.highest(dtype))


def gather(operand: Any, start_indices: Any, dimension_numbers: GatherDimensionNumbers,
           slice_sizes: Sequence[int], *, indices_are_sorted: bool = False, unique_indices: bool = False,
           mode: Any = None, fill_value: Any = None) -> Any:
    """Slices of operand at start_indices (like jax.lax.gather). mode "clip" and "promise_in_bounds" clamp a
    start so its slice fits; "fill" (the default, as JAX) returns fill_value (NaN for inexact dtypes, the most
    negative value for signed integers, the largest for unsigned, True for booleans) for slices out of bounds."""
    dnums = _gather_dnums(dimension_numbers)
    sizes = static_ints("gather", "slice_sizes", slice_sizes)
    mode = _mode("gather", mode, GATHER_MODES, "fill")
    out = gather_p.bind(operand, start_indices, dimension_numbers=dnums, slice_sizes=sizes,
                        indices_are_sorted=bool(indices_are_sorted), unique_indices=bool(unique_indices))
    if mode != "fill":
        return out
    if fill_value is None:
        fill_value = default_fill_value(aval_of(out).dtype)
    ok = in_bounds(start_indices, aval_of(operand).shape, dnums.start_index_map, sizes)
    return _where_batch(ok, out, dnums.offset_dims, fill_value)


def _where_batch(ok: Any, out: Any, offset_dims: Sequence[int], fill_value: Any) -> Any:
    """out where ok (one flag per index vector, broadcast over the slice's dimensions), else fill_value."""
    shape = aval_of(out).shape
    batch_dims = tuple(k for k in range(len(shape)) if k not in offset_dims)
    mask = broadcast_in_dim(ok, shape, batch_dims)
    dtype = aval_of(out).dtype
    if is_python_scalar(fill_value) or isinstance(fill_value, np.generic):
        fill = full(shape, fill_value.item() if isinstance(fill_value, np.generic) else fill_value, dtype)
    else:
        fill = full(shape, convert_element_type(reshape(fill_value, ()), dtype))
    return select(mask, out, fill)


# ---------------------------------------------------------------------------------------------------------------
# The scatter family: scatter(operand, indices, updates) combines each update window into operand at its start
# index (replace, add, multiply, min, max); windows that do not fit are skipped.
def _scatter_abstract_eval(op: str, kinds: str) -> Any:
    def rule(operand: ShapedArray, indices: ShapedArray, updates: ShapedArray, *,
             dimension_numbers: ScatterDimensionNumbers, indices_are_sorted: bool, unique_indices: bool
             ) -> ShapedArray:
        d = dimension_numbers
        check_same_dtypes(op, [operand, updates])
        check_dtype(op, operand, kinds)
        _check_indices(op, indices, len(d.scatter_dims_to_operand_dims))
        for what, dims in (("inserted_window_dims", d.inserted_window_dims),
                           ("scatter_dims_to_operand_dims", d.scatter_dims_to_operand_dims),
                           ("operand_batching_dims", d.operand_batching_dims)):
            _check_dims(op, what, dims, operand.ndim)
        _check_dims(op, "update_window_dims", d.update_window_dims, updates.ndim)
        _check_dims(op, "scatter_indices_batching_dims", d.scatter_indices_batching_dims, indices.ndim - 1)
        window_operand_dims = [k for k in range(operand.ndim)
                               if k not in d.inserted_window_dims and k not in d.operand_batching_dims]
        if len(window_operand_dims) != len(d.update_window_dims) or \
                list(d.update_window_dims) != sorted(d.update_window_dims):
            raise TypeError(f"{op}: update_window_dims {d.update_window_dims} must list, in increasing order, one "
                            f"updates dimension per operand dimension not inserted ({len(window_operand_dims)})")
        scatter_shape = [s for k, s in enumerate(updates.shape) if k not in d.update_window_dims]
        if scatter_shape != list(indices.shape[:-1]):
            raise TypeError(f"{op}: updates {updates.str_short()} must have the indices' batch shape "
                            f"{tuple(indices.shape[:-1])} in its dimensions outside update_window_dims "
                            f"{d.update_window_dims}")
        for k, u in zip(window_operand_dims, d.update_window_dims):
            if updates.shape[u] > operand.shape[k]:
                raise TypeError(f"{op}: update window dimension {u} of {updates.str_short()} is larger than "
                                f"operand dimension {k} of {operand.str_short()}")
        for od, idim in zip(d.operand_batching_dims, d.scatter_indices_batching_dims):
            if operand.shape[od] != indices.shape[idim]:
                raise TypeError(f"{op}: operand batching dimension {od} and indices dimension {idim} differ in size")
        return ShapedArray(operand.shape, operand.dtype, operand.weak_type and updates.weak_type)
    return rule


def _scatter_lowering(combine: str | None) -> Any:
    def rule(ctx: LoweringContext, operand: str, indices: str, updates: str, *,
             dimension_numbers: ScatterDimensionNumbers, indices_are_sorted: bool, unique_indices: bool) -> list[str]:
        d = dimension_numbers
        attr = _dims_attr("scatter", {"update_window_dims": d.update_window_dims,
                                      "inserted_window_dims": d.inserted_window_dims,
                                      "input_batching_dims": d.operand_batching_dims,
                                      "scatter_indices_batching_dims": d.scatter_indices_batching_dims,
                                      "scatter_dims_to_operand_dims": d.scatter_dims_to_operand_dims},
                          ctx.avals_in[1].ndim - 1)
        scalar = ShapedArray((), ctx.aval_out.dtype)
        hlo = combine
        if combine in ("maximum", "minimum") and dt.is_bool(scalar.dtype):
            hlo = {"maximum": "or", "minimum": "and"}[combine]

        def body(emitter: Any, args: list[str]) -> list[str]:
            return [args[1]] if hlo is None else [emitter.op(f"stablehlo.{hlo}", args, scalar)]
        region = ctx.region([scalar, scalar], body)
        return [ctx.op("stablehlo.scatter", [operand, indices, updates], ctx.aval_out,
                       {"scatter_dimension_numbers": attr,
                        "indices_are_sorted": str(bool(indices_are_sorted)).lower(),
                        "unique_indices": str(bool(unique_indices)).lower()}, [region])]
    return rule


def _scatter_batching(prim: Primitive) -> Any:
    def rule(args: list[Any], dims: list[BatchDim], *, dimension_numbers: ScatterDimensionNumbers,
             indices_are_sorted: bool, unique_indices: bool) -> tuple[list[Any], list[BatchDim]]:
        operand, indices, updates = args
        operand_dim, indices_dim, updates_dim = dims
        d = dimension_numbers
        size = batch_size(args, dims)
        operand = batch_at_front(operand, operand_dim, size)
        updates = batch_at_front(updates, updates_dim, size)
        params = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)
        if indices_dim is None:  # one more window dimension, covering the whole batch
            dnums = ScatterDimensionNumbers((0,) + _shift(d.update_window_dims), _shift(d.inserted_window_dims),
                                            _shift(d.scatter_dims_to_operand_dims), _shift(d.operand_batching_dims),
                                            d.scatter_indices_batching_dims)
            return [prim.bind(operand, indices, updates, dimension_numbers=dnums, **params)], [0]
        indices = moveaxis(indices, indices_dim, 0)
        dnums = ScatterDimensionNumbers(_shift(d.update_window_dims), _shift(d.inserted_window_dims),
                                        _shift(d.scatter_dims_to_operand_dims), (0,) + _shift(d.operand_batching_dims),
                                        (0,) + _shift(d.scatter_indices_batching_dims))
        return [prim.bind(operand, indices, updates, dimension_numbers=dnums, **params)], [0]
    return rule


def _scatter_primitive(name: str, combine: str | None, kinds: str) -> Primitive:
    prim = Primitive(name, checks=("oob",))
    prim.def_rule("sharding_rule", explicit.scatter)
    prim.def_rule("abstract_eval", _scatter_abstract_eval(name, kinds))
    prim.def_rule("lowering", _scatter_lowering(combine))
    prim.def_rule("batching", _scatter_batching(prim))
    prim.def_rule("index_bounds", _scatter_index_bounds)
    return prim


def _scatter_index_bounds(eqn: Any, ins: list[Any]) -> Any:
    """checkify's out-of-bounds check: each start lies in [0, dim - window size] on the axis it scatters into."""
    operand, indices, updates = aval_of(ins[0]), ins[1], aval_of(ins[2])
    d = eqn.params["dimension_numbers"]
    axes = list(d.scatter_dims_to_operand_dims)
    if not axes or not aval_of(indices).size:
        return None
    window_axes = [k for k in range(operand.ndim) if k not in d.inserted_window_dims and
                   k not in d.operand_batching_dims]
    window = {a: updates.shape[w] for a, w in zip(window_axes, d.update_window_dims)}
    return indices, 0, [operand.shape[a] - window.get(a, 1) for a in axes], axes


scatter_p = _scatter_primitive("scatter", None, "fiubc")
scatter_add_p = _scatter_primitive("scatter_add", "add", "fiuc")
scatter_sub_p = _scatter_primitive("scatter_sub", "subtract", "fiuc")
scatter_mul_p = _scatter_primitive("scatter_mul", "multiply", "fiuc")
scatter_min_p = _scatter_primitive("scatter_min", "minimum", "fiub")
scatter_max_p = _scatter_primitive("scatter_max", "maximum", "fiub")


def _window_gather(x: Any, indices: Any, updates_aval: ShapedArray, d: ScatterDimensionNumbers,
                   fill: Any = 0) -> Any:
    """The windows of x a scatter with these indices touches, shaped like its updates; `fill` where the scatter
    skips a window (out of bounds)."""
    operand_shape = aval_of(x).shape
    window_sizes = iter(updates_aval.shape[k] for k in d.update_window_dims)
    sizes = tuple(1 if k in d.inserted_window_dims or k in d.operand_batching_dims else next(window_sizes)
                  for k in range(len(operand_shape)))
    gd = _to_gather_dnums(d)
    out = gather_p.bind(x, indices, dimension_numbers=gd, slice_sizes=sizes, indices_are_sorted=False,
                        unique_indices=False)
    ok = in_bounds(indices, operand_shape, d.scatter_dims_to_operand_dims, sizes)
    return _where_batch(ok, out, gd.offset_dims, fill)


# scatter_add: linear in (operand, updates) together; the transpose reads the updates' windows back.
scatter_add_p.def_rule("jvp", linear_jvp(scatter_add_p, [0, 2]))


@scatter_add_p.def_rule("vjp")
def _scatter_add_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                     dimension_numbers: ScatterDimensionNumbers, indices_are_sorted: bool, unique_indices: bool
                     ) -> list[Any]:
    ct = cts[0]
    ct_updates = _window_gather(ct, ins[1], aval_of(ins[2]), dimension_numbers) if needs[2] else None
    return [ct if needs[0] else None, None, ct_updates]


# scatter_sub: linear in (operand, updates) together (its updates enter negated); the transpose reads the updates'
# windows back, negated.
scatter_sub_p.def_rule("jvp", linear_jvp(scatter_sub_p, [0, 2]))


@scatter_sub_p.def_rule("vjp")
def _scatter_sub_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                     dimension_numbers: ScatterDimensionNumbers, indices_are_sorted: bool, unique_indices: bool
                     ) -> list[Any]:
    ct = cts[0]
    ct_updates = neg(_window_gather(ct, ins[1], aval_of(ins[2]), dimension_numbers)) if needs[2] else None
    return [ct if needs[0] else None, None, ct_updates]


# scatter (replace): linear in (operand, updates) together; an update overwritten by a later one with the same
# index gets no cotangent (found by scattering ids: the update whose id survives is the one that was written).
scatter_p.def_rule("jvp", linear_jvp(scatter_p, [0, 2]))


@scatter_p.def_rule("vjp")
def _scatter_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                 dimension_numbers: ScatterDimensionNumbers, indices_are_sorted: bool, unique_indices: bool
                 ) -> list[Any]:
    operand, indices, updates = ins
    ct, d = cts[0], dimension_numbers
    params = dict(dimension_numbers=d, indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)
    u_aval = aval_of(updates)
    ct_operand = scatter_p.bind(ct, indices, full(u_aval.shape, 0, aval_of(ct).dtype), **params) \
        if needs[0] else None
    ct_updates = None
    if needs[2]:
        ct_updates = _window_gather(ct, indices, u_aval, d)
        if not unique_indices:
            ids = _ids(u_aval.shape)
            written = scatter_p.bind(full(aval_of(operand).shape, 0, aval_of(ids).dtype), indices, ids, **params)
            won = eq(_window_gather(written, indices, u_aval, d), ids)
            ct_updates = select(won, ct_updates, full(u_aval.shape, 0, u_aval.dtype))
    return [ct_operand, None, ct_updates]


def _ids(shape: tuple[int, ...]) -> Any:
    """1, 2, ..., n in row-major order over shape (0 marks "no update"), as int32 or int64 when needed."""
    n = math.prod(shape)
    dtype = np.dtype(np.int32) if n < 2 ** 31 - 1 else np.dtype(np.int64)
    flat = add(iota(dtype, n), full((n,), 1, dtype))
    return reshape(flat, shape)


# scatter_mul: linear in the operand; the updates' derivative needs unique indices (as JAX).
def _scatter_mul_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, dimension_numbers: ScatterDimensionNumbers,
                     indices_are_sorted: bool, unique_indices: bool) -> tuple[list[Any], list[Any]]:
    operand, indices, updates = primals
    t_operand, _, t_updates = tangents
    params = dict(dimension_numbers=dimension_numbers, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices)
    out = scatter_mul_p.bind(operand, indices, updates, **params)
    tangent = None if t_operand is None else scatter_mul_p.bind(t_operand, indices, updates, **params)
    if t_updates is not None:
        _require_unique("scatter_mul", unique_indices)
        # out = operand * u at the updated positions: d out = operand * d u there (unique indices)
        spread = scatter_p.bind(full(aval_of(operand).shape, 0, aval_of(operand).dtype), indices, t_updates,
                                **params)
        term = mul(operand, spread)
        tangent = term if tangent is None else add(tangent, term)
    return [out], [tangent]


def _require_unique(op: str, unique_indices: bool) -> None:
    if not unique_indices:
        raise NotImplementedError(f"{op}: the derivative with respect to the updates is only implemented with "
                                  "unique_indices=True (as in JAX)")


@scatter_mul_p.def_rule("vjp")
def _scatter_mul_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                     dimension_numbers: ScatterDimensionNumbers, indices_are_sorted: bool, unique_indices: bool
                     ) -> list[Any]:
    operand, indices, updates = ins
    ct = cts[0]
    params = dict(dimension_numbers=dimension_numbers, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices)
    ct_operand = scatter_mul_p.bind(ct, indices, updates, **params) if needs[0] else None
    ct_updates = None
    if needs[2]:
        _require_unique("scatter_mul", unique_indices)
        ct_updates = _window_gather(mul(ct, operand), indices, aval_of(updates), dimension_numbers)
    return [ct_operand, None, ct_updates]


scatter_mul_p.def_rule("jvp", _scatter_mul_jvp)


# scatter_min/max: the derivative flows from the operand and the updates holding the extreme value, split evenly
# among ties (as reduce_max and JAX).
def _extreme_weights(prim: Primitive, operand: Any, indices: Any, updates: Any, out: Any,
                     params: dict[str, Any]) -> tuple[Any, Any]:
    d = params["dimension_numbers"]
    dtype, u_aval = aval_of(operand).dtype, aval_of(updates)
    counting = np.dtype(np.float32) if dtype.itemsize < 4 else dtype
    kept = convert_element_type(eq(operand, out), counting)
    hit = convert_element_type(eq(updates, _window_gather(out, indices, u_aval, d, np.nan)), counting)
    counts = add(kept, scatter_add_p.bind(full(aval_of(operand).shape, 0, counting), indices, hit, **params))
    counts = max(counts, full(aval_of(counts).shape, 1, counting))
    w_operand = convert_element_type(div(kept, counts), dtype)
    w_updates = convert_element_type(div(hit, _window_gather(counts, indices, u_aval, d, 1)), dtype)
    return w_operand, w_updates


def _scatter_extreme_rules(prim: Primitive) -> None:
    def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[list[Any], list[Any]]:
        operand, indices, updates = primals
        t_operand, _, t_updates = tangents
        out = prim.bind(operand, indices, updates, **params)
        if t_operand is None and t_updates is None:
            return [out], [None]
        w_operand, w_updates = _extreme_weights(prim, operand, indices, updates, out, params)
        t_operand = zeros_like(operand) if t_operand is None else t_operand
        t_updates = zeros_like(updates) if t_updates is None else t_updates
        tangent = scatter_add_p.bind(mul(t_operand, w_operand), indices, mul(t_updates, w_updates), **params)
        return [out], [tangent]

    def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], **params: Any) -> list[Any]:
        operand, indices, updates = ins
        w_operand, w_updates = _extreme_weights(prim, operand, indices, updates, outs[0], params)
        ct = cts[0]
        ct_updates = mul(_window_gather(ct, indices, aval_of(updates), params["dimension_numbers"]), w_updates) \
            if needs[2] else None
        return [mul(ct, w_operand) if needs[0] else None, None, ct_updates]
    prim.def_rule("jvp", jvp)
    prim.def_rule("vjp", vjp)


_scatter_extreme_rules(scatter_min_p)
_scatter_extreme_rules(scatter_max_p)

SCATTER_MODES = ("clip", "drop", "promise_in_bounds")


def _scatter(prim: Primitive, op: str, operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: Any, *,
             indices_are_sorted: bool, unique_indices: bool, mode: Any) -> Any:
    dnums = _scatter_dnums(op, dimension_numbers)
    mode = _mode(op, mode, SCATTER_MODES, "drop")
    if is_python_scalar(updates):
        updates = scalar_literal(updates, aval_of(operand).dtype, aval_of(operand).weak_type)
    if mode == "clip":
        u_aval = aval_of(updates)
        sizes = iter(u_aval.shape[k] for k in dnums.update_window_dims)
        shape = aval_of(operand).shape
        slice_sizes = [1 if k in dnums.inserted_window_dims or k in dnums.operand_batching_dims else next(sizes)
                       for k in range(len(shape))]
        scatter_indices = clamp_indices(scatter_indices, shape, dnums.scatter_dims_to_operand_dims, slice_sizes)
    return prim.bind(operand, scatter_indices, updates, dimension_numbers=dnums,
                     indices_are_sorted=bool(indices_are_sorted), unique_indices=bool(unique_indices))


def _scatter_function(prim: Primitive, what: str) -> Any:
    def fn(operand: Any, scatter_indices: Any, updates: Any, dimension_numbers: ScatterDimensionNumbers, *,
           indices_are_sorted: bool = False, unique_indices: bool = False, mode: Any = None) -> Any:
        return _scatter(prim, prim.name, operand, scatter_indices, updates, dimension_numbers,
                        indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode)
    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = (f"operand with each update window {what} at its start index (like jax.lax.{prim.name}). mode "
                  "\"drop\" (the default) and \"promise_in_bounds\" skip windows that do not fit; \"clip\" clamps "
                  "their start index so they fit.")
    return fn


scatter = _scatter_function(scatter_p, "written")
scatter_add = _scatter_function(scatter_add_p, "added")
scatter_sub = _scatter_function(scatter_sub_p, "subtracted")
scatter_mul = _scatter_function(scatter_mul_p, "multiplied in")
scatter_min = _scatter_function(scatter_min_p, "combined by minimum")
scatter_max = _scatter_function(scatter_max_p, "combined by maximum")


# ---------------------------------------------------------------------------------------------------------------
# scatter_apply(operand, indices, func, dimension_numbers, update_shape): func applied to operand's elements under
# the update windows (of shape update_shape, as a scatter's updates): stablehlo.scatter whose combiner region is
# func of the current value (its update, zeros, is not read), so an element under k windows gets func k times.
# Forward values and batching; no derivative, as in JAX.
SCATTER_APPLY_NOT_DIFFERENTIABLE = "scatter_apply is not differentiable (as in JAX, which has no JVP for it)"
scatter_apply_p = Primitive("scatter_apply", checks=("oob",))


def _placeholder(operand: ShapedArray, update_shape: tuple[int, ...]) -> ShapedArray:
    """The aval of the updates the scatter reads no value of."""
    return ShapedArray(update_shape, operand.dtype)


@scatter_apply_p.def_rule("abstract_eval")
def _scatter_apply_abstract_eval(operand: ShapedArray, indices: ShapedArray, *, func: Any,
                                 dimension_numbers: ScatterDimensionNumbers, update_shape: tuple[int, ...],
                                 indices_are_sorted: bool, unique_indices: bool) -> ShapedArray:
    return _scatter_abstract_eval("scatter_apply", "fiubc")(
        operand, indices, _placeholder(operand, update_shape), dimension_numbers=dimension_numbers,
        indices_are_sorted=indices_are_sorted, unique_indices=unique_indices)


@scatter_apply_p.def_rule("lowering")
def _scatter_apply_lowering(ctx: LoweringContext, operand: str, indices: str, *, func: Any,
                            dimension_numbers: ScatterDimensionNumbers, update_shape: tuple[int, ...],
                            indices_are_sorted: bool, unique_indices: bool) -> list[str]:
    d = dimension_numbers
    attr = _dims_attr("scatter", {"update_window_dims": d.update_window_dims,
                                  "inserted_window_dims": d.inserted_window_dims,
                                  "input_batching_dims": d.operand_batching_dims,
                                  "scatter_indices_batching_dims": d.scatter_indices_batching_dims,
                                  "scatter_dims_to_operand_dims": d.scatter_dims_to_operand_dims},
                      ctx.avals_in[1].ndim - 1)
    updates = ctx.constant(0, _placeholder(ctx.avals_in[0], update_shape))
    return [ctx.op("stablehlo.scatter", [operand, indices, updates], ctx.aval_out,
                   {"scatter_dimension_numbers": attr, "indices_are_sorted": str(bool(indices_are_sorted)).lower(),
                    "unique_indices": str(bool(unique_indices)).lower()}, [ctx.lower_region(func)])]


scatter_apply_p.mark("jvp", SCATTER_APPLY_NOT_DIFFERENTIABLE)
scatter_apply_p.mark("vjp", SCATTER_APPLY_NOT_DIFFERENTIABLE)


@scatter_apply_p.def_rule("batching")
def _scatter_apply_batching(args: list[Any], dims: list[BatchDim], *, func: Any,
                            dimension_numbers: ScatterDimensionNumbers, update_shape: tuple[int, ...],
                            indices_are_sorted: bool, unique_indices: bool) -> tuple[list[Any], list[BatchDim]]:
    """As the scatters' (_scatter_batching): the members are one more window dimension (indices unbatched) or an
    operand batching dimension (indices batched); either way the updates gain a leading dimension."""
    operand, indices = args
    operand_dim, indices_dim = dims
    d, size = dimension_numbers, batch_size(args, dims)
    operand = batch_at_front(operand, operand_dim, size)
    params = dict(func=func, update_shape=(size,) + update_shape, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices)
    if indices_dim is None:
        dnums = ScatterDimensionNumbers((0,) + _shift(d.update_window_dims), _shift(d.inserted_window_dims),
                                        _shift(d.scatter_dims_to_operand_dims), _shift(d.operand_batching_dims),
                                        d.scatter_indices_batching_dims)
    else:
        indices = moveaxis(indices, indices_dim, 0)
        dnums = ScatterDimensionNumbers(_shift(d.update_window_dims), _shift(d.inserted_window_dims),
                                        _shift(d.scatter_dims_to_operand_dims), (0,) + _shift(d.operand_batching_dims),
                                        (0,) + _shift(d.scatter_indices_batching_dims))
    return [scatter_apply_p.bind(operand, indices, dimension_numbers=dnums, **params)], [0]


@scatter_apply_p.def_rule("sharding_rule")
def _scatter_apply_sharding(operand: ShapedArray, indices: ShapedArray, *, update_shape: tuple[int, ...],
                            **params: Any) -> Any:
    return explicit.scatter(operand, indices, _placeholder(operand, update_shape))


@scatter_apply_p.def_rule("index_bounds")
def _scatter_apply_index_bounds(eqn: Any, ins: list[Any]) -> Any:
    """As the scatters' (each start in [0, dim - window size]), the windows of update_shape."""
    placeholder = _placeholder(aval_of(ins[0]), eqn.params["update_shape"])
    return _scatter_index_bounds(eqn, [ins[0], ins[1], placeholder])


def scatter_apply(operand: Any, scatter_indices: Any, func: Any, dimension_numbers: ScatterDimensionNumbers, *,
                  update_shape: Sequence[int] = (), indices_are_sorted: bool = False, unique_indices: bool = False,
                  mode: Any = None) -> Any:
    """operand with func applied to its elements under each update window (like jax.lax.scatter_apply): the
    windows are a scatter's, at scatter_indices, of updates of shape update_shape; an element under several
    windows gets func once per window. func maps a scalar of operand's dtype to one (staged once, it may not close
    over arrays). mode "drop" (the default, also "fill") and "promise_in_bounds" skip windows that do not fit;
    "clip" clamps their start index so they fit. Not differentiable (as JAX)."""
    op = "scatter_apply"
    dnums = _scatter_dnums(op, dimension_numbers)
    mode = _mode(op, mode, SCATTER_MODES, "drop")
    update_shape = static_ints(op, "update_shape", update_shape)
    o_aval = aval_of(operand)
    if not callable(func):
        raise TypeError(f"{op}: func must be a function of one scalar, got {func!r}")
    scalar = ShapedArray((), o_aval.dtype)
    try:
        ir = stage_flat(lambda x, _: [func(x)], [scalar, scalar])
    except Exception as err:
        raise TypeError(f"{op}: func {getattr(func, '__name__', func)!r} must map a scalar of dtype {o_aval.dtype} to "
                        f"one: {err}") from err
    outs = ir.out_avals
    if ir.consts or len(outs) != 1 or (outs[0].shape, outs[0].dtype) != ((), o_aval.dtype):
        raise TypeError(f"{op}: func must return a scalar of the operand's dtype {o_aval.dtype} and close over no "
                        f"arrays, got {[a.str_short() for a in outs]}"
                        f"{' closing over arrays' if ir.consts else ''}")
    if mode == "clip":
        sizes = iter(update_shape[k] for k in dnums.update_window_dims)
        slice_sizes = [1 if k in dnums.inserted_window_dims or k in dnums.operand_batching_dims else next(sizes)
                       for k in range(o_aval.ndim)]
        scatter_indices = clamp_indices(scatter_indices, o_aval.shape, dnums.scatter_dims_to_operand_dims,
                                        slice_sizes)
    return scatter_apply_p.bind(operand, scatter_indices, func=ir, dimension_numbers=dnums,
                                update_shape=update_shape, indices_are_sorted=bool(indices_are_sorted),
                                unique_indices=bool(unique_indices))


# ---------------------------------------------------------------------------------------------------------------
# dynamic_slice(operand, *start_indices, slice_sizes): a static-size slice at traced starts, clamped to fit.
dynamic_slice_p = Primitive("dynamic_slice", checks=("oob",))
dynamic_slice_p.def_rule("sharding_rule", explicit.dynamic_slice)


def _starts_in_bounds(starts: list[Any], window: Sequence[int], operand: ShapedArray) -> Any:
    """checkify's out-of-bounds check of traced starts: start k lies in [0, dim k - window k]."""
    if not starts or not operand.ndim:
        return None
    dtype = aval_of(starts[0]).dtype
    index = concatenate([reshape(convert_element_type(s, dtype), (1,)) for s in starts], 0)
    return index, 0, [d - w for d, w in zip(operand.shape, window)], list(range(operand.ndim))


dynamic_slice_p.def_rule("index_bounds", lambda eqn, ins: _starts_in_bounds(
    ins[1:], eqn.params["slice_sizes"], aval_of(ins[0])))


def _check_starts(op: str, operand: ShapedArray, starts: Sequence[ShapedArray]) -> None:
    if len(starts) != operand.ndim:
        raise TypeError(f"{op}: needs one start index per dimension of {operand.str_short()}, got {len(starts)}")
    for k, s in enumerate(starts):
        if s.shape != () or not dt.is_int(s.dtype):
            raise TypeError(f"{op}: start index {k} must be an integer scalar, got {s.str_short()}")


@dynamic_slice_p.def_rule("abstract_eval")
def _dynamic_slice_abstract_eval(operand: ShapedArray, *starts: ShapedArray, slice_sizes: tuple[int, ...]
                                 ) -> ShapedArray:
    _check_starts("dynamic_slice", operand, starts)
    if len(slice_sizes) != operand.ndim or any(not 0 <= s <= n for s, n in zip(slice_sizes, operand.shape)):
        raise TypeError(f"dynamic_slice: slice_sizes {slice_sizes} do not fit in {operand.str_short()}")
    return ShapedArray(slice_sizes, operand.dtype, operand.weak_type)


@dynamic_slice_p.def_rule("lowering")
def _dynamic_slice_lowering(ctx: LoweringContext, operand: str, *starts: str, slice_sizes: tuple[int, ...]
                            ) -> list[str]:
    starts = _same_index_type(ctx, starts, ctx.avals_in[1:])
    return [ctx.op("stablehlo.dynamic_slice", [operand, *starts], ctx.aval_out,
                   {"slice_sizes": i64_array(slice_sizes)})]


def _same_index_type(ctx: LoweringContext, starts: Sequence[str], avals: Sequence[ShapedArray]) -> list[str]:
    """StableHLO wants one integer type for all start indices: convert them to the widest one given."""
    dtype = builtins.max((a.dtype for a in avals), key=lambda d: (d.itemsize, dt.is_signed_int(d)), default=None)
    return [s if a.dtype == dtype else ctx.op("stablehlo.convert", [s], ShapedArray((), dtype))
            for s, a in zip(starts, avals)]


dynamic_slice_p.def_rule("jvp", linear_jvp(dynamic_slice_p, [0]))


@dynamic_slice_p.def_rule("vjp")
def _dynamic_slice_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                       slice_sizes: tuple[int, ...]) -> list[Any]:
    aval = aval_of(ins[0])
    zeros = full(aval.shape, 0, aval.dtype)
    return [dynamic_update_slice_p.bind(zeros, cts[0], *ins[1:])] + [None] * (len(ins) - 1)


def _stacked_starts(starts: Sequence[Any], dims: Sequence[BatchDim], size: int) -> Any:
    """The start indices as one (size, n) index array (batched ones per member), in one integer dtype."""
    dtype = builtins.max((aval_of(s).dtype for s in starts), key=lambda d: (d.itemsize, dt.is_signed_int(d)))
    columns = []
    for s, d in zip(starts, dims):
        s = s if aval_of(s).dtype == dtype else convert_element_type(s, dtype)
        columns.append(broadcast_in_dim(s, (size, 1), (0,) if d is not None else ()))
    return concatenate(columns, 1) if len(columns) > 1 else columns[0]


@dynamic_slice_p.def_rule("batching")
def _dynamic_slice_batching(args: list[Any], dims: list[BatchDim], *, slice_sizes: tuple[int, ...]
                            ) -> tuple[list[Any], list[BatchDim]]:
    operand, starts = args[0], args[1:]
    if all(d is None for d in dims[1:]):  # unbatched starts: slice the batch dimension whole
        d = dims[0]
        zero = scalar_literal(0, aval_of(starts[0]).dtype, False) if starts else scalar_literal(0, dt.int32, False)
        new_starts = list(starts[:d]) + [zero] + list(starts[d:])
        sizes = slice_sizes[:d] + (aval_of(operand).shape[d],) + slice_sizes[d:]
        return [dynamic_slice_p.bind(operand, *new_starts, slice_sizes=sizes)], [d]
    size = batch_size(args, dims)
    indices = _stacked_starts(starts, dims[1:], size)
    n = len(slice_sizes)
    dnums = GatherDimensionNumbers(tuple(range(n)), (), tuple(range(n)))  # per member
    out = _gather_batching([operand, indices], [dims[0], 0], dimension_numbers=dnums, slice_sizes=slice_sizes,
                           indices_are_sorted=True, unique_indices=True)
    return out


def dynamic_slice(operand: Any, start_indices: Sequence[Any], slice_sizes: Sequence[int], *,
                  allow_negative_indices: bool | Sequence[bool] = True) -> Any:
    """The slice of operand of slice_sizes at start_indices (traced scalars allowed), each start clamped so the
    slice fits (like jax.lax.dynamic_slice); negative starts count from the end unless allow_negative_indices is
    False (for that dimension)."""
    sizes = static_ints("dynamic_slice", "slice_sizes", slice_sizes)
    starts = _start_scalars("dynamic_slice", start_indices)
    starts = _wrap_starts("dynamic_slice", starts, aval_of(operand).shape, allow_negative_indices)
    return dynamic_slice_p.bind(operand, *starts, slice_sizes=sizes)


def _wrap_starts(op: str, starts: list[Any], shape: Sequence[int], allow: bool | Sequence[bool]) -> list[Any]:
    """Negative start indices counted from the end of their dimension (once), where allowed."""
    allowed = [bool(allow)] * len(starts) if isinstance(allow, bool) else [bool(a) for a in allow]
    if len(allowed) != len(starts):
        raise ValueError(f"{op}: allow_negative_indices needs one entry per start index ({len(starts)}), got "
                         f"{len(allowed)}")
    out = []
    for d, (s, n, wrap) in enumerate(zip(starts, shape, allowed)):
        aval = aval_of(s)
        if not wrap and isinstance(s, Literal) and int(s.value) < 0:
            raise ValueError(f"{op}: start index {int(s.value)} of dimension {d} (size {n}) is negative, and "
                             "allow_negative_indices is False there")
        if not wrap or dt.is_unsigned_int(aval.dtype):
            out.append(s)
        elif isinstance(s, Literal):  # a static start: wrapped now
            value = int(s.value)
            out.append(scalar_literal(value + n, aval.dtype, False) if value < 0 else s)
        else:
            zero = scalar_literal(0, aval.dtype, False)
            out.append(select(lt(s, zero), add(s, scalar_literal(n, aval.dtype, False)), s))
    return out


def _start_scalars(op: str, start_indices: Any) -> list[Any]:
    if not is_python_scalar(start_indices) and hasattr(start_indices, "shape") and aval_of(start_indices).ndim == 1:
        n = aval_of(start_indices).shape[0]
        return [reshape(slice_in_dim(start_indices, k, k + 1), ()) for k in range(n)]
    starts = []
    for k, s in enumerate(start_indices):
        if is_python_scalar(s) or isinstance(s, np.integer):
            if isinstance(s, bool | float | np.floating):
                raise TypeError(f"{op}: start index {k} must be an integer, got {s!r}")
            s = scalar_literal(int(s), dt.int32 if -2 ** 31 <= int(s) < 2 ** 31 else dt.int64, False)
        starts.append(s)
    return starts


def dynamic_slice_in_dim(operand: Any, start_index: Any, slice_size: int, axis: int = 0) -> Any:
    shape = aval_of(operand).shape
    axis = static_int("dynamic_slice_in_dim", "axis", axis) % _rank(shape)
    starts = [0] * len(shape)
    starts[axis] = start_index
    sizes = list(shape)
    sizes[axis] = slice_size
    return dynamic_slice(operand, starts, sizes)


def _rank(shape: Sequence[int]) -> int:
    if not shape:
        raise TypeError("dynamic slicing needs an operand of rank at least 1")
    return len(shape)


def dynamic_index_in_dim(operand: Any, index: Any, axis: int = 0, keepdims: bool = True) -> Any:
    shape = aval_of(operand).shape
    axis = static_int("dynamic_index_in_dim", "axis", axis) % _rank(shape)
    out = dynamic_slice_in_dim(operand, index, 1, axis)
    return out if keepdims else reshape(out, shape[:axis] + shape[axis + 1:])


# ---------------------------------------------------------------------------------------------------------------
# dynamic_update_slice(operand, update, *start_indices): update written at traced starts, clamped to fit.
dynamic_update_slice_p = Primitive("dynamic_update_slice", checks=("oob",))
dynamic_update_slice_p.def_rule("sharding_rule", explicit.same_as(0))
dynamic_update_slice_p.def_rule("index_bounds", lambda eqn, ins: _starts_in_bounds(
    ins[2:], aval_of(ins[1]).shape, aval_of(ins[0])))


@dynamic_update_slice_p.def_rule("abstract_eval")
def _dynamic_update_slice_abstract_eval(operand: ShapedArray, update: ShapedArray, *starts: ShapedArray
                                        ) -> ShapedArray:
    check_same_dtypes("dynamic_update_slice", [operand, update])
    _check_starts("dynamic_update_slice", operand, starts)
    if update.ndim != operand.ndim or any(u > n for u, n in zip(update.shape, operand.shape)):
        raise TypeError(f"dynamic_update_slice: update {update.str_short()} does not fit in {operand.str_short()}")
    return ShapedArray(operand.shape, operand.dtype, operand.weak_type and update.weak_type)


@dynamic_update_slice_p.def_rule("lowering")
def _dynamic_update_slice_lowering(ctx: LoweringContext, operand: str, update: str, *starts: str) -> list[str]:
    starts = _same_index_type(ctx, starts, ctx.avals_in[2:])
    return [ctx.op("stablehlo.dynamic_update_slice", [operand, update, *starts], ctx.aval_out)]


dynamic_update_slice_p.def_rule("jvp", linear_jvp(dynamic_update_slice_p, [0, 1]))


@dynamic_update_slice_p.def_rule("vjp")
def _dynamic_update_slice_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool]) -> list[Any]:
    update, starts, ct = ins[1], ins[2:], cts[0]
    u_aval = aval_of(update)
    ct_operand = dynamic_update_slice_p.bind(ct, full(u_aval.shape, 0, u_aval.dtype), *starts) if needs[0] else None
    ct_update = dynamic_slice_p.bind(ct, *starts, slice_sizes=u_aval.shape) if needs[1] else None
    return [ct_operand, ct_update] + [None] * len(starts)


@dynamic_update_slice_p.def_rule("batching")
def _dynamic_update_slice_batching(args: list[Any], dims: list[BatchDim]) -> tuple[list[Any], list[BatchDim]]:
    operand, update, starts = args[0], args[1], args[2:]
    size = batch_size(args, dims)
    if all(d is None for d in dims[2:]):  # unbatched starts: the update covers the batch dimension whole
        operand = batch_at_front(operand, dims[0], size)
        update = batch_at_front(update, dims[1], size)
        zero = scalar_literal(0, aval_of(starts[0]).dtype, False) if starts else scalar_literal(0, dt.int32, False)
        return [dynamic_update_slice_p.bind(operand, update, zero, *starts)], [0]
    # batched starts: a scatter at the starts clamped as dynamic_update_slice clamps them
    operand = batch_at_front(operand, dims[0], size)
    update = batch_at_front(update, dims[1], size)
    shape = aval_of(operand).shape[1:]
    n = len(shape)
    indices = clamp_indices(_stacked_starts(starts, dims[2:], size), shape, tuple(range(n)), aval_of(update).shape[1:])
    dnums = ScatterDimensionNumbers(tuple(range(n)), (), tuple(range(n)))  # per member
    return _scatter_batching(scatter_p)([operand, indices, update], [0, 0, 0], dimension_numbers=dnums,
                                        indices_are_sorted=True, unique_indices=True)


def dynamic_update_slice(operand: Any, update: Any, start_indices: Sequence[Any], *,
                         allow_negative_indices: bool | Sequence[bool] = True) -> Any:
    """operand with update written at start_indices (traced scalars allowed), each start clamped so the update
    fits (like jax.lax.dynamic_update_slice); negative starts count from the end unless allow_negative_indices is
    False (for that dimension)."""
    starts = _start_scalars("dynamic_update_slice", start_indices)
    starts = _wrap_starts("dynamic_update_slice", starts, aval_of(operand).shape, allow_negative_indices)
    return dynamic_update_slice_p.bind(operand, update, *starts)


def dynamic_update_slice_in_dim(operand: Any, update: Any, start_index: Any, axis: int) -> Any:
    shape = aval_of(operand).shape
    axis = static_int("dynamic_update_slice_in_dim", "axis", axis) % _rank(shape)
    starts: list[Any] = [0] * len(shape)
    starts[axis] = start_index
    return dynamic_update_slice(operand, update, starts)


def dynamic_update_index_in_dim(operand: Any, update: Any, index: Any, axis: int) -> Any:
    shape = aval_of(operand).shape
    axis = static_int("dynamic_update_index_in_dim", "axis", axis) % _rank(shape)
    u_shape = aval_of(update).shape
    if len(u_shape) == len(shape) - 1:
        update = reshape(update, u_shape[:axis] + (1,) + u_shape[axis:])
    return dynamic_update_slice_in_dim(operand, update, index, axis)


# ---------------------------------------------------------------------------------------------------------------
# clamp(min, x, max): x limited to [min, max]; min and max may be scalars (like jax.lax.clamp).
clamp_p = Primitive("clamp", checks=())
clamp_p.def_rule("sharding_rule", explicit.broadcasting("clamp"))


@clamp_p.def_rule("abstract_eval")
def _clamp_abstract_eval(lo: ShapedArray, x: ShapedArray, hi: ShapedArray) -> ShapedArray:
    check_same_dtypes("clamp", [lo, x, hi])
    for name, bound in (("min", lo), ("max", hi)):
        if bound.shape not in ((), x.shape):
            raise TypeError(f"clamp: {name} {bound.str_short()} must be a scalar or have the shape of x "
                            f"{x.str_short()}")
    check_dtype("clamp", x, "fiu", "x")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


@clamp_p.def_rule("lowering")
def _clamp_lowering(ctx: LoweringContext, lo: str, x: str, hi: str) -> list[str]:
    return [ctx.op("stablehlo.clamp", [lo, x, hi], ctx.aval_out)]


def _clamp_tangents(lo: Any, x: Any, hi: Any) -> tuple[Any, Any, Any]:
    """Where the derivative of min(max(x, lo), hi) goes: to x strictly inside (min, max), to min where
    min > x (and min < max), to max where max < max(x, min); nowhere at the boundaries (as JAX where min <= max;
    JAX gives max none where min > max, although the result is max there)."""
    shape = aval_of(x).shape
    lo_b = broadcast_in_dim(lo, shape, ()) if aval_of(lo).shape != shape else lo
    hi_b = broadcast_in_dim(hi, shape, ()) if aval_of(hi).shape != shape else hi
    to_x = bitwise_and(gt(x, lo_b), lt(x, hi_b))
    to_lo = bitwise_and(gt(lo_b, x), lt(lo_b, hi_b))
    to_hi = lt(hi_b, max(x, lo_b))
    return to_lo, to_x, to_hi


def _sum_to(t: Any, aval: ShapedArray) -> Any:
    return reduce_sum(t) if aval.shape == () and aval_of(t).shape != () else t


@clamp_p.def_rule("jvp")
def _clamp_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    lo, x, hi = primals
    out = clamp_p.bind(lo, x, hi)
    if all(t is None for t in tangents):
        return [out], [None]
    shape = aval_of(x).shape
    masks = _clamp_tangents(lo, x, hi)
    zero = full(shape, 0, aval_of(x).dtype)
    total = zero
    for t, mask in zip(tangents, masks):
        if t is not None:
            t = t if aval_of(t).shape == shape else broadcast_in_dim(t, shape, ())
            total = add(total, select(mask, t, zero))
    return [out], [total]


@clamp_p.def_rule("vjp")
def _clamp_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool]) -> list[Any]:
    ct = cts[0]
    zero = zeros_like(ct)
    return [_sum_to(select(mask, ct, zero), aval_of(v)) if need else None
            for v, mask, need in zip(ins, _clamp_tangents(*ins), needs)]


@clamp_p.def_rule("batching")
def _clamp_batching(args: list[Any], dims: list[BatchDim]) -> tuple[list[Any], list[BatchDim]]:
    size = batch_size(args, dims)
    x_shape = aval_of(args[1]).shape if dims[1] is None else \
        tuple(s for k, s in enumerate(aval_of(args[1]).shape) if k != dims[1])
    full_args = []
    for v, d in zip(args, dims):
        v = batch_at_front(v, d, size)
        if aval_of(v).shape != (size,) + x_shape:
            v = broadcast_in_dim(v, (size,) + x_shape, (0,) if aval_of(v).ndim == 1 else ())
        full_args.append(v)
    return [clamp_p.bind(*full_args)], [0]


def clamp(min: Any, x: Any, max: Any) -> Any:  # noqa: A002
    """x limited to [min, max] elementwise (like jax.lax.clamp); min and max may be scalars."""
    aval = aval_of(x)
    lo = scalar_literal(min, aval.dtype, aval.weak_type) if is_python_scalar(min) else min
    hi = scalar_literal(max, aval.dtype, aval.weak_type) if is_python_scalar(max) else max
    return clamp_p.bind(lo, x, hi)


__all__ = ["GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers", "clamp", "dynamic_index_in_dim",
           "dynamic_slice", "dynamic_slice_in_dim", "dynamic_update_index_in_dim", "dynamic_update_slice",
           "dynamic_update_slice_in_dim", "gather", "scatter", "scatter_add", "scatter_apply", "scatter_max",
           "scatter_min", "scatter_mul", "scatter_sub"]
