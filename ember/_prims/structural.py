"""Shape primitives (broadcast_in_dim, reshape, transpose, slice, pad, concatenate, iota), reductions and
dot_general, each with its abstract evaluation, lowering and VJP rule beside its definition."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember import _dtypes as dt
from ember._core import Primitive, aval_of, is_python_scalar
from ember._dtypes import ShapedArray
from ember._ir import Literal
from ember._mlir import FunctionEmitter, i64_array, i64_list
from ember._prims import elementwise as ew
from ember._prims._rules import (check_dtype, check_same_dtypes, normalize_axis, static_int, static_ints,
                                 weak_scalar)


def _argsort(values: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(values, kind="stable"))


# ---------------------------------------------------------------------------------------------------------------
# broadcast_in_dim(x, shape, broadcast_dimensions): operand dim i becomes output dim broadcast_dimensions[i].
broadcast_in_dim_p = Primitive("broadcast_in_dim")


@broadcast_in_dim_p.def_abstract_eval
def _broadcast_in_dim_abstract_eval(x: ShapedArray, *, shape: tuple[int, ...],
                                    broadcast_dimensions: tuple[int, ...]) -> ShapedArray:
    op = "broadcast_in_dim"
    if len(broadcast_dimensions) != x.ndim:
        raise TypeError(f"{op}: broadcast_dimensions {broadcast_dimensions} must have one entry per operand "
                        f"dimension of {x.str_short()}")
    if any(not 0 <= d < len(shape) for d in broadcast_dimensions) or \
            list(broadcast_dimensions) != sorted(set(broadcast_dimensions)):
        raise TypeError(f"{op}: broadcast_dimensions {broadcast_dimensions} must be strictly increasing and "
                        f"within the output rank {len(shape)}")
    for i, d in enumerate(broadcast_dimensions):
        if x.shape[i] not in (1, shape[d]):
            raise TypeError(f"{op}: operand {x.str_short()} dimension {i} (size {x.shape[i]}) cannot broadcast "
                            f"to output dimension {d} of shape {shape}")
    return ShapedArray(shape, x.dtype, x.weak_type)


@broadcast_in_dim_p.def_lowering
def _broadcast_in_dim_lowering(ctx: FunctionEmitter, operands: list[str], in_avals: list[ShapedArray],
                               out_avals: list[ShapedArray], *, shape: tuple[int, ...],
                               broadcast_dimensions: tuple[int, ...]) -> list[str]:
    return [ctx.op("stablehlo.broadcast_in_dim", operands, out_avals[0],
                   {"broadcast_dimensions": i64_array(broadcast_dimensions)})]


@broadcast_in_dim_p.def_vjp
def _broadcast_in_dim_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                          shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...]) -> list[Any]:
    x_aval = aval_of(ins[0])
    new_dims = [d for d in range(len(shape)) if d not in broadcast_dimensions]
    stretched = [d for i, d in enumerate(broadcast_dimensions) if x_aval.shape[i] == 1 and shape[d] != 1]
    summed = reduce_sum(cts[0], tuple(sorted(new_dims + stretched))) if new_dims or stretched else cts[0]
    return [reshape(summed, x_aval.shape)]


def broadcast_in_dim(x: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Any:
    shape = static_ints("broadcast_in_dim", "shape", shape)
    dims = static_ints("broadcast_in_dim", "broadcast_dimensions", broadcast_dimensions)
    if aval_of(x).shape == shape and not is_python_scalar(x):
        return x
    return broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=dims)


def broadcast(x: Any, sizes: Sequence[int]) -> Any:
    """Add leading dimensions of the given sizes (like jax.lax.broadcast)."""
    sizes = static_ints("broadcast", "sizes", sizes)
    ndim = aval_of(x).ndim
    return broadcast_in_dim(x, sizes + aval_of(x).shape, tuple(range(len(sizes), len(sizes) + ndim)))


def full(shape: Sequence[int], fill_value: Any, dtype: Any = None) -> Any:
    """An array of the given shape filled with fill_value (a scalar, of dtype if given)."""
    shape = static_ints("full", "shape", shape)
    if dtype is not None:
        fill_value = ew.convert_element_type(fill_value, dtype) if not is_python_scalar(fill_value) \
            else weak_scalar(fill_value, dtype, weak=False)
    if aval_of(fill_value).shape != ():
        raise TypeError(f"full: fill_value must be a scalar, got {aval_of(fill_value).str_short()}")
    return broadcast_in_dim_p.bind(fill_value, shape=shape, broadcast_dimensions=())


def full_like(x: Any, fill_value: Any) -> Any:
    """fill_value (a scalar, or an array of x's shape) broadcast to x's shape, in x's dtype."""
    aval = aval_of(x)
    if is_python_scalar(fill_value):
        fill_value = weak_scalar(fill_value, aval.dtype, aval.weak_type)
    elif aval_of(fill_value).dtype != aval.dtype:
        fill_value = ew.convert_element_type(fill_value, aval.dtype, aval.weak_type)
    if aval_of(fill_value).shape == aval.shape and not isinstance(fill_value, Literal):
        return fill_value
    return broadcast_in_dim_p.bind(fill_value, shape=aval.shape, broadcast_dimensions=())


def zeros_like(x: Any) -> Any:
    return full_like(x, 0)


# ---------------------------------------------------------------------------------------------------------------
# reshape(x, new_sizes)
reshape_p = Primitive("reshape")


@reshape_p.def_abstract_eval
def _reshape_abstract_eval(x: ShapedArray, *, new_sizes: tuple[int, ...]) -> ShapedArray:
    if int(np.prod(new_sizes, dtype=np.int64)) != x.size:
        raise TypeError(f"reshape: cannot reshape {x.str_short()} ({x.size} elements) to shape {new_sizes}")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


@reshape_p.def_lowering
def _reshape_lowering(ctx: FunctionEmitter, operands: list[str], in_avals: list[ShapedArray],
                      out_avals: list[ShapedArray], *, new_sizes: tuple[int, ...]) -> list[str]:
    return [ctx.op("stablehlo.reshape", operands, out_avals[0])]


@reshape_p.def_vjp
def _reshape_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                 new_sizes: tuple[int, ...]) -> list[Any]:
    return [reshape(cts[0], aval_of(ins[0]).shape)]


def reshape(x: Any, new_sizes: Sequence[int]) -> Any:
    new_sizes = static_ints("reshape", "new_sizes", new_sizes)
    if aval_of(x).shape == new_sizes and not is_python_scalar(x):
        return x
    return reshape_p.bind(x, new_sizes=new_sizes)


# ---------------------------------------------------------------------------------------------------------------
# transpose(x, permutation): output dim i is operand dim permutation[i].
transpose_p = Primitive("transpose")


@transpose_p.def_abstract_eval
def _transpose_abstract_eval(x: ShapedArray, *, permutation: tuple[int, ...]) -> ShapedArray:
    if sorted(permutation) != list(range(x.ndim)):
        raise TypeError(f"transpose: permutation {permutation} is not a permutation of the dimensions of "
                        f"{x.str_short()}")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


@transpose_p.def_lowering
def _transpose_lowering(ctx: FunctionEmitter, operands: list[str], in_avals: list[ShapedArray],
                        out_avals: list[ShapedArray], *, permutation: tuple[int, ...]) -> list[str]:
    return [ctx.op("stablehlo.transpose", operands, out_avals[0], {"permutation": i64_array(permutation)})]


@transpose_p.def_vjp
def _transpose_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                   permutation: tuple[int, ...]) -> list[Any]:
    return [transpose(cts[0], _argsort(permutation))]


def transpose(x: Any, permutation: Sequence[int]) -> Any:
    permutation = static_ints("transpose", "permutation", permutation)
    if permutation == tuple(range(len(permutation))) and not is_python_scalar(x):
        return x
    return transpose_p.bind(x, permutation=permutation)


# ---------------------------------------------------------------------------------------------------------------
# slice(x, start_indices, limit_indices, strides)
slice_p = Primitive("slice")


@slice_p.def_abstract_eval
def _slice_abstract_eval(x: ShapedArray, *, start_indices: tuple[int, ...], limit_indices: tuple[int, ...],
                         strides: tuple[int, ...]) -> ShapedArray:
    if not len(start_indices) == len(limit_indices) == len(strides) == x.ndim:
        raise TypeError(f"slice: start_indices {start_indices}, limit_indices {limit_indices} and strides "
                        f"{strides} must each have one entry per dimension of {x.str_short()}")
    shape = []
    for d, (lo, hi, st) in enumerate(zip(start_indices, limit_indices, strides)):
        if not (0 <= lo <= hi <= x.shape[d]) or st < 1:
            raise TypeError(f"slice: invalid bounds [{lo}:{hi}:{st}] for dimension {d} of {x.str_short()}")
        shape.append((hi - lo + st - 1) // st)
    return ShapedArray(shape, x.dtype, x.weak_type)


@slice_p.def_lowering
def _slice_lowering(ctx: FunctionEmitter, operands: list[str], in_avals: list[ShapedArray],
                    out_avals: list[ShapedArray], *, start_indices: tuple[int, ...], limit_indices: tuple[int, ...],
                    strides: tuple[int, ...]) -> list[str]:
    return [ctx.op("stablehlo.slice", operands, out_avals[0],
                   {"start_indices": i64_array(start_indices), "limit_indices": i64_array(limit_indices),
                    "strides": i64_array(strides)})]


@slice_p.def_vjp
def _slice_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
               start_indices: tuple[int, ...], limit_indices: tuple[int, ...], strides: tuple[int, ...]
               ) -> list[Any]:
    x_shape, out_shape = aval_of(ins[0]).shape, aval_of(outs[0]).shape
    config = []
    for lo, n, st, size in zip(start_indices, out_shape, strides, x_shape):
        end = lo + (n - 1) * st + 1 if n else lo
        config.append((lo, size - end, st - 1 if n else 0))
    return [pad(cts[0], 0, config)]


def slice(x: Any, start_indices: Sequence[int], limit_indices: Sequence[int],  # noqa: A001
          strides: Sequence[int] | None = None) -> Any:
    start = static_ints("slice", "start_indices", start_indices)
    limit = static_ints("slice", "limit_indices", limit_indices)
    steps = (1,) * len(start) if strides is None else static_ints("slice", "strides", strides)
    return slice_p.bind(x, start_indices=start, limit_indices=limit, strides=steps)


def slice_in_dim(x: Any, start: int, limit: int, stride: int = 1, axis: int = 0) -> Any:
    shape = aval_of(x).shape
    axis = normalize_axis("slice_in_dim", axis, len(shape))
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, limit, stride
    return slice(x, starts, limits, strides)


# ---------------------------------------------------------------------------------------------------------------
# pad(x, padding_value, padding_config[(low, high, interior)]); negative low/high crop.
pad_p = Primitive("pad")


@pad_p.def_abstract_eval
def _pad_abstract_eval(x: ShapedArray, padding_value: ShapedArray, *,
                       padding_config: tuple[tuple[int, int, int], ...]) -> ShapedArray:
    check_same_dtypes("pad", [x, padding_value])
    if padding_value.shape != ():
        raise TypeError(f"pad: padding_value must be a scalar, got {padding_value.str_short()}")
    if len(padding_config) != x.ndim:
        raise TypeError(f"pad: padding_config {padding_config} needs one (low, high, interior) per dimension "
                        f"of {x.str_short()}")
    shape = []
    for d, (lo, hi, interior) in enumerate(padding_config):
        size = lo + hi + x.shape[d] + (x.shape[d] - 1) * interior if x.shape[d] else lo + hi
        if interior < 0 or size < 0:
            raise TypeError(f"pad: invalid padding {(lo, hi, interior)} for dimension {d} of {x.str_short()}")
        shape.append(size)
    return ShapedArray(shape, x.dtype, x.weak_type)


@pad_p.def_lowering
def _pad_lowering(ctx: FunctionEmitter, operands: list[str], in_avals: list[ShapedArray],
                  out_avals: list[ShapedArray], *, padding_config: tuple[tuple[int, int, int], ...]) -> list[str]:
    lows, highs, interiors = zip(*padding_config) if padding_config else ((), (), ())
    return [ctx.op("stablehlo.pad", operands, out_avals[0],
                   {"edge_padding_low": i64_array(lows), "edge_padding_high": i64_array(highs),
                    "interior_padding": i64_array(interiors)})]


@pad_p.def_vjp
def _pad_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
             padding_config: tuple[tuple[int, int, int], ...]) -> list[Any]:
    ct = cts[0]
    unpadded = pad(ct, 0, [(-lo, -hi, 0) for lo, hi, _ in padding_config])
    ct_x = slice(unpadded, [0] * len(padding_config), aval_of(unpadded).shape,
                 [interior + 1 for _, _, interior in padding_config])
    if not needs[1]:
        return [ct_x, None]
    all_axes = tuple(range(len(padding_config)))
    return [ct_x, ew.sub(reduce_sum(ct, all_axes), reduce_sum(ct_x, all_axes))]


def pad(x: Any, padding_value: Any, padding_config: Sequence[Sequence[int]]) -> Any:
    config = tuple(static_ints("pad", "padding_config", c) for c in padding_config)
    if any(len(c) != 3 for c in config):
        raise TypeError(f"pad: padding_config entries must be (low, high, interior), got {padding_config}")
    if is_python_scalar(padding_value):
        padding_value = weak_scalar(padding_value, aval_of(x).dtype, aval_of(x).weak_type)
    return pad_p.bind(x, padding_value, padding_config=config)


# ---------------------------------------------------------------------------------------------------------------
# concatenate(*xs, dimension)
concatenate_p = Primitive("concatenate")


@concatenate_p.def_abstract_eval
def _concatenate_abstract_eval(*xs: ShapedArray, dimension: int) -> ShapedArray:
    if not xs:
        raise TypeError("concatenate: needs at least one operand")
    check_same_dtypes("concatenate", xs)
    first = xs[0]
    if not 0 <= dimension < first.ndim:
        raise TypeError(f"concatenate: dimension {dimension} out of range for {first.str_short()}")
    for x in xs:
        if x.ndim != first.ndim or any(a != b for i, (a, b) in enumerate(zip(x.shape, first.shape))
                                       if i != dimension):
            got = ", ".join(a.str_short() for a in xs)
            raise TypeError(f"concatenate: operands must agree on all dimensions but {dimension}, got {got}")
    shape = list(first.shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return ShapedArray(shape, first.dtype, all(x.weak_type for x in xs))


@concatenate_p.def_lowering
def _concatenate_lowering(ctx: FunctionEmitter, operands: list[str], in_avals: list[ShapedArray],
                          out_avals: list[ShapedArray], *, dimension: int) -> list[str]:
    return [ctx.op("stablehlo.concatenate", operands, out_avals[0], {"dimension": f"{dimension} : i64"})]


@concatenate_p.def_vjp
def _concatenate_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                     dimension: int) -> list[Any]:
    result, offset = [], 0
    for x, need in zip(ins, needs):
        size = aval_of(x).shape[dimension]
        result.append(slice_in_dim(cts[0], offset, offset + size, axis=dimension) if need else None)
        offset += size
    return result


def concatenate(operands: Sequence[Any], dimension: int) -> Any:
    operands = list(operands)
    if not operands:
        raise TypeError("concatenate: needs at least one operand")
    ndim = aval_of(operands[0]).ndim
    return concatenate_p.bind(*operands, dimension=normalize_axis("concatenate", static_int(
        "concatenate", "dimension", dimension), ndim))


# ---------------------------------------------------------------------------------------------------------------
# iota(dtype, shape, dimension): values 0, 1, ... along one dimension.
iota_p = Primitive("iota")
iota_p.nondifferentiable = True


@iota_p.def_abstract_eval
def _iota_abstract_eval(*, dtype: np.dtype, shape: tuple[int, ...], dimension: int) -> ShapedArray:
    check_dtype("iota", ShapedArray(shape, dtype), "fiu", "dtype")
    if not 0 <= dimension < len(shape):
        raise TypeError(f"iota: dimension {dimension} out of range for shape {shape}")
    return ShapedArray(shape, dtype)


@iota_p.def_lowering
def _iota_lowering(ctx: FunctionEmitter, operands: list[str], in_avals: list[ShapedArray],
                   out_avals: list[ShapedArray], *, dtype: np.dtype, shape: tuple[int, ...], dimension: int
                   ) -> list[str]:
    return [ctx.op("stablehlo.iota", [], out_avals[0], {"iota_dimension": f"{dimension} : i64"})]


def iota(dtype: Any, size: int) -> Any:
    """0, 1, ..., size - 1 (like jax.lax.iota)."""
    return broadcasted_iota(dtype, (size,), 0)


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int) -> Any:
    shape = static_ints("broadcasted_iota", "shape", shape)
    dimension = normalize_axis("broadcasted_iota", static_int("broadcasted_iota", "dimension", dimension),
                               len(shape))
    return iota_p.bind(dtype=dt.canonicalize_dtype(dtype), shape=shape, dimension=dimension)


# ---------------------------------------------------------------------------------------------------------------
# Reductions over axes
def _reduce_abstract_eval(name: str, kinds: str) -> Any:
    def rule(x: ShapedArray, *, axes: tuple[int, ...]) -> ShapedArray:
        check_dtype(name, x, kinds)
        if any(not 0 <= a < x.ndim for a in axes) or len(set(axes)) != len(axes):
            raise TypeError(f"{name}: axes {axes} are invalid for {x.str_short()}")
        return ShapedArray(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype, x.weak_type)
    return rule


def _reduce_init(name: str, dtype: np.dtype) -> Any:
    if name == "reduce_sum":
        return 0
    if dt.is_bool(dtype):
        return name == "reduce_min"
    if dt.is_float(dtype):
        return -np.inf if name == "reduce_max" else np.inf
    info = np.iinfo(dtype)
    return info.min if name == "reduce_max" else info.max


def _reduce_lowering(name: str, body: str, bool_body: str) -> Any:
    def rule(ctx: FunctionEmitter, operands: list[str], in_avals: list[ShapedArray], out_avals: list[ShapedArray],
             *, axes: tuple[int, ...]) -> list[str]:
        dtype = in_avals[0].dtype
        op = bool_body if dt.is_bool(dtype) else body
        return [ctx.reduce(operands[0], in_avals[0], _reduce_init(name, dtype), axes, op, out_avals[0])]
    return rule


def _kept_dims(ndim: int, axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in range(ndim) if d not in axes)


reduce_sum_p = Primitive("reduce_sum")
reduce_sum_p.def_abstract_eval(_reduce_abstract_eval("reduce_sum", "fiu"))
reduce_sum_p.def_lowering(_reduce_lowering("reduce_sum", "stablehlo.add", "stablehlo.or"))


@reduce_sum_p.def_vjp
def _reduce_sum_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                    axes: tuple[int, ...]) -> list[Any]:
    shape = aval_of(ins[0]).shape
    return [broadcast_in_dim(cts[0], shape, _kept_dims(len(shape), axes))]


def _argextreme_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                    axes: tuple[int, ...]) -> list[Any]:
    """The cotangent goes to the positions holding the extreme value, split evenly among ties (as JAX)."""
    x = ins[0]
    shape = aval_of(x).shape
    kept = _kept_dims(len(shape), axes)
    at_extreme = ew.eq(x, broadcast_in_dim(outs[0], shape, kept))
    mask = ew.convert_element_type(at_extreme, aval_of(x).dtype)
    counts = reduce_sum(mask, axes)
    share = ew.div(cts[0], counts)
    return [ew.mul(broadcast_in_dim(share, shape, kept), mask)]


reduce_max_p = Primitive("reduce_max")
reduce_max_p.def_abstract_eval(_reduce_abstract_eval("reduce_max", "fiub"))
reduce_max_p.def_lowering(_reduce_lowering("reduce_max", "stablehlo.maximum", "stablehlo.or"))
reduce_max_p.def_vjp(_argextreme_vjp)

reduce_min_p = Primitive("reduce_min")
reduce_min_p.def_abstract_eval(_reduce_abstract_eval("reduce_min", "fiub"))
reduce_min_p.def_lowering(_reduce_lowering("reduce_min", "stablehlo.minimum", "stablehlo.and"))
reduce_min_p.def_vjp(_argextreme_vjp)


def _reduce_axes(name: str, x: Any, axes: Any) -> tuple[int, ...]:
    ndim = aval_of(x).ndim
    if axes is None:
        return tuple(range(ndim))
    return tuple(sorted(normalize_axis(name, a, ndim) for a in static_ints(name, "axes", axes)))


def reduce_sum(x: Any, axes: Sequence[int] | None = None) -> Any:
    return reduce_sum_p.bind(x, axes=_reduce_axes("reduce_sum", x, axes))


def reduce_max(x: Any, axes: Sequence[int] | None = None) -> Any:
    return reduce_max_p.bind(x, axes=_reduce_axes("reduce_max", x, axes))


def reduce_min(x: Any, axes: Sequence[int] | None = None) -> Any:
    return reduce_min_p.bind(x, axes=_reduce_axes("reduce_min", x, axes))


# ---------------------------------------------------------------------------------------------------------------
# dot_general(lhs, rhs, dimension_numbers=((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)))
# Output dimensions: batch dims, then lhs free dims, then rhs free dims (each in increasing order).
dot_general_p = Primitive("dot_general")
DimensionNumbers = tuple[tuple[tuple[int, ...], tuple[int, ...]], tuple[tuple[int, ...], tuple[int, ...]]]


def _free_dims(ndim: int, *used: Sequence[int]) -> tuple[int, ...]:
    taken = {d for group in used for d in group}
    return tuple(d for d in range(ndim) if d not in taken)


@dot_general_p.def_abstract_eval
def _dot_general_abstract_eval(lhs: ShapedArray, rhs: ShapedArray, *,
                               dimension_numbers: DimensionNumbers) -> ShapedArray:
    (lc, rc), (lb, rb) = dimension_numbers
    check_same_dtypes("dot_general", [lhs, rhs])
    check_dtype("dot_general", lhs, "fiu", "operands")
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise TypeError(f"dot_general: dimension_numbers {dimension_numbers} pair unequal numbers of dims")
    for name, dims, aval in (("lhs", lc + lb, lhs), ("rhs", rc + rb, rhs)):
        if any(not 0 <= d < aval.ndim for d in dims) or len(set(dims)) != len(dims):
            raise TypeError(f"dot_general: {name} dims {dims} are invalid for {aval.str_short()}")
    for kind, ldims, rdims in (("contracting", lc, rc), ("batch", lb, rb)):
        if any(lhs.shape[a] != rhs.shape[b] for a, b in zip(ldims, rdims)):
            raise TypeError(f"dot_general: {kind} dimensions {ldims} of {lhs.str_short()} and {rdims} of "
                            f"{rhs.str_short()} have different sizes")
    shape = (tuple(lhs.shape[d] for d in lb) + tuple(lhs.shape[d] for d in _free_dims(lhs.ndim, lc, lb))
             + tuple(rhs.shape[d] for d in _free_dims(rhs.ndim, rc, rb)))
    return ShapedArray(shape, lhs.dtype, lhs.weak_type and rhs.weak_type)


@dot_general_p.def_lowering
def _dot_general_lowering(ctx: FunctionEmitter, operands: list[str], in_avals: list[ShapedArray],
                          out_avals: list[ShapedArray], *, dimension_numbers: DimensionNumbers) -> list[str]:
    (lc, rc), (lb, rb) = dimension_numbers
    fields = [(k, v) for k, v in (("lhs_batching_dimensions", lb), ("rhs_batching_dimensions", rb),
                                  ("lhs_contracting_dimensions", lc), ("rhs_contracting_dimensions", rc)) if v]
    attr = "#stablehlo.dot<" + ", ".join(f"{k} = {i64_list(v)}" for k, v in fields) + ">"
    return [ctx.op("stablehlo.dot_general", operands, out_avals[0], {"dot_dimension_numbers": attr})]


def _dot_operand_cotangent(ct: Any, other: Any, dims: DimensionNumbers, this_ndim: int, swap: bool) -> Any:
    """Cotangent of one dot_general operand: contract ct's dims of the other operand's free dims with them,
    then put the dimensions back in this operand's order."""
    (lc, rc), (lb, rb) = dims
    if swap:  # the cotangent of rhs: the same computation with the roles of lhs and rhs exchanged
        lc, rc, lb, rb = rc, lc, rb, lb
    other_ndim = aval_of(other).ndim
    this_free = _free_dims(this_ndim, lc, lb)
    other_free = _free_dims(other_ndim, rc, rb)
    nb = len(lb)
    # ct's layout is (batch, lhs free, rhs free): the other operand's free dims come second when it is rhs.
    first = nb + len(this_free) if not swap else nb
    other_free_in_ct = tuple(range(first, first + len(other_free)))
    result = dot_general(ct, other, ((other_free_in_ct, other_free), (tuple(range(nb)), rb)))
    # result layout: batch, this free dims, then other's contracting dims in increasing order.
    contracted = [lc[rc.index(r)] for r in sorted(rc)]
    result_to_this = list(lb) + list(this_free) + contracted
    return transpose(result, _argsort(result_to_this))


@dot_general_p.def_vjp
def _dot_general_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                     dimension_numbers: DimensionNumbers) -> list[Any]:
    lhs, rhs = ins
    ct = cts[0]
    ct_lhs = _dot_operand_cotangent(ct, rhs, dimension_numbers, aval_of(lhs).ndim, False) if needs[0] else None
    ct_rhs = _dot_operand_cotangent(ct, lhs, dimension_numbers, aval_of(rhs).ndim, True) if needs[1] else None
    return [ct_lhs, ct_rhs]


def dot_general(lhs: Any, rhs: Any, dimension_numbers: Any) -> Any:
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError) as err:
        raise TypeError("dot_general: dimension_numbers must be ((lhs_contracting, rhs_contracting), "
                        f"(lhs_batch, rhs_batch)), got {dimension_numbers!r}") from err
    dims = tuple(tuple(static_ints("dot_general", "dimension_numbers", d) for d in pair)
                 for pair in ((lc, rc), (lb, rb)))
    return dot_general_p.bind(lhs, rhs, dimension_numbers=dims)


def dot(lhs: Any, rhs: Any) -> Any:
    """Vector/matrix products contracting lhs's last and rhs's first dimension (like jax.lax.dot)."""
    lnd, rnd = aval_of(lhs).ndim, aval_of(rhs).ndim
    if not (1 <= lnd <= 2 and 1 <= rnd <= 2):
        raise TypeError(f"dot: operands must be vectors or matrices, got {aval_of(lhs).str_short()} and "
                        f"{aval_of(rhs).str_short()}")
    return dot_general(lhs, rhs, (((lnd - 1,), (0,)), ((), ())))
