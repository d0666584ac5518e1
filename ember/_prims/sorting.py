"""sort: several operands sorted together along one dimension by the first num_keys of them (lexicographically),
stable or not, and the composed sort_key_val and top_k.

Floats sort in a total order, as in JAX: -0.0 and 0.0 are equal (a stable sort keeps them in place), NaNs come
last and are equal to each other. Every sort is lowered stable (ties keep their order: one of the orders an
unstable sort may give), so that the sorts a derivative rule adds order ties exactly as the sort it differentiates.
The derivative rides along: forward mode sorts the tangents by the keys; reverse
mode un-permutes the cotangents by sorting them by the permutation the keys made (sorting by a permutation inverts
it), so no scatter is needed and batching comes free.

On the CPU plugin (one device, `cpu_backend_forms` on) a sort lowers to ember's radix-sort kernel
(`custom_call @ember_sort`, ember/_runtime/_sort.c: the same order, 20-80x faster than XLA's comparison sort),
along the last axis (another axis is transposed there and back); elsewhere, or for element types the kernel does
not take, to XLA's `stablehlo.sort` with the comparator below."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember._core import Primitive, ShapedArray, aval_of
from ember._core import dtypes as dt
from ember._core.checks import normalize_axis, static_int
from ember._core.shape_poly import is_symbolic_dim
from ember._hlo import LoweringContext, backend_forms, compare_type, ffi, i64_array
from ember._hlo.lower import emit_function
from ember._prims.checks import TWO_BIT_MISSORTS, check_dtype, refuse_narrow
from ember._prims.elementwise import eq, neg, select
from ember._prims.indexing import GatherDimensionNumbers, ScatterDimensionNumbers, gather_p, scatter_add_p
from ember._prims.shape import BatchDim, batch_at_front, batch_size, broadcasted_iota, full, moveaxis, reshape
from ember._prims import explicit

SORT_TARGET = "ember_sort"
# what the kernel takes: keys of these types, other operands of these and complex
_KERNEL_KEYS = frozenset(np.dtype(d) for d in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                               np.uint32, np.uint64, np.float16, dt.bfloat16, np.float32, np.float64))
_KERNEL_VALUES = _KERNEL_KEYS | {np.dtype(np.complex64), np.dtype(np.complex128)}
_KERNEL_MIN_ROW = 16  # (shorter rows: XLA's sort, inlined, costs less than a call)

sort_p = Primitive("sort", multiple_results=True, checks=())
sort_p.def_rule("sharding_rule", explicit.sort)


@sort_p.def_rule("abstract_eval")
def _sort_abstract_eval(*operands: ShapedArray, dimension: int, is_stable: bool, num_keys: int
                        ) -> list[ShapedArray]:
    if not operands:
        raise TypeError("sort: needs at least one operand")
    first = operands[0]
    if any(o.shape != first.shape for o in operands):
        raise TypeError("sort: operands must have one shape, got " + ", ".join(o.str_short() for o in operands))
    if not 0 <= dimension < max(first.ndim, 1) or first.ndim == 0:
        raise TypeError(f"sort: dimension {dimension} is out of range for {first.str_short()}")
    if not 1 <= num_keys <= len(operands):
        raise TypeError(f"sort: num_keys {num_keys} must be between 1 and the number of operands {len(operands)}")
    for o in operands[:num_keys]:
        check_dtype("sort", o, "fiub", "keys")
        refuse_narrow("sort", o, "2", "keys", TWO_BIT_MISSORTS)
    return list(operands)


def _compare(body: Any, direction: str, a: str, b: str, dtype: np.dtype) -> str:
    return body.op("stablehlo.compare", [a, b], ShapedArray((), dt.bool_),
                   {"comparison_direction": f"#stablehlo<comparison_direction {direction}>",
                    "compare_type": f"#stablehlo<comparison_type {compare_type(dtype)}>"})


def _less_and_equal(body: Any, a: str, b: str, dtype: np.dtype) -> tuple[str, str]:
    """(a < b, a == b) in the sort's total order: for floats NaN is the largest value and equal to itself, and
    -0.0 == 0.0 (IEEE's < and == already say so)."""
    lt, eq = _compare(body, "LT", a, b, dtype), _compare(body, "EQ", a, b, dtype)
    if not dt.is_float(dtype):
        return lt, eq
    boolean = ShapedArray((), dt.bool_)
    a_nan, b_nan = _compare(body, "NE", a, a, dtype), _compare(body, "NE", b, b, dtype)
    a_num = body.op("stablehlo.not", [a_nan], boolean)
    # a < b: IEEE's <, or a number before a NaN; a == b: IEEE's ==, or both NaN
    lt = body.op("stablehlo.or", [lt, body.op("stablehlo.and", [a_num, b_nan], boolean)], boolean)
    eq = body.op("stablehlo.or", [eq, body.op("stablehlo.and", [a_nan, b_nan], boolean)], boolean)
    return lt, eq


_POSITIONS = frozenset(np.dtype(d) for d in (np.int32, np.int64, np.uint32, np.uint64))


def _kernel_sort(ctx: LoweringContext, operands: Sequence[str], dimension: int, num_keys: int) -> list[str] | None:
    """The sort as a call of ember's kernel, or None where it does not apply (another platform or a partitioned
    program, the option off, the extension missing, an element type it does not take, short rows). An operand after
    the keys that is an integer iota along the sorted dimension (argsort's) is not passed: the kernel writes the
    positions it sorts into that result (the attribute `positions`, a bit per result)."""
    avals = list(ctx.avals_in)
    shape = avals[0].shape
    if (not backend_forms.applies(ctx.emitter) or shape[dimension] < _KERNEL_MIN_ROW or len(operands) > 63
            or any(np.dtype(a.dtype) not in _KERNEL_KEYS for a in avals[:num_keys])
            or any(np.dtype(a.dtype) not in _KERNEL_VALUES for a in avals[num_keys:])
            or not ffi.available(SORT_TARGET)):
        return None
    positions = [k >= num_keys and np.dtype(a.dtype) in _POSITIONS and ctx.emitter.fact(x, "iota") == dimension
                 for k, (x, a) in enumerate(zip(operands, avals))]
    last = len(shape) - 1
    order = list(range(len(shape)))
    order[dimension], order[last] = last, dimension  # (its own inverse)
    moved = [a.update(shape=tuple(shape[d] for d in order)) for a in avals]
    if dimension != last:
        operands = [ctx.op("stablehlo.transpose", [x], m, {"permutation": i64_array(order)}) if not p else x
                    for x, m, p in zip(operands, moved, positions)]
    passed = [x for x, p in zip(operands, positions) if not p]
    outs = ffi.custom_call(ctx, SORT_TARGET, passed, moved,
                           {"num_keys": num_keys, "positions": sum(1 << k for k, p in enumerate(positions) if p)})
    if dimension != last:
        outs = [ctx.op("stablehlo.transpose", [x], a, {"permutation": i64_array(order)})
                for x, a in zip(outs, avals)]
    return outs


@sort_p.def_rule("lowering")
def _sort_lowering(ctx: LoweringContext, *operands: str, dimension: int, is_stable: bool, num_keys: int
                   ) -> list[str]:
    kernel = _kernel_sort(ctx, operands, dimension, num_keys)
    if kernel is not None:
        return kernel
    dtypes = [a.dtype for a in ctx.avals_in]
    scalars = [ShapedArray((), d) for d in dtypes for _ in (0, 1)]

    def comparator(body: Any, args: list[str]) -> list[str]:
        boolean = ShapedArray((), dt.bool_)
        result = None
        for k in reversed(range(num_keys)):  # lexicographic: key k decides unless equal, then key k + 1
            lt, eq = _less_and_equal(body, args[2 * k], args[2 * k + 1], dtypes[k])
            result = lt if result is None else body.op(
                "stablehlo.or", [lt, body.op("stablehlo.and", [eq, result], boolean)], boolean)
        return [result]
    region = ctx.region(scalars, comparator)
    outs = ctx.op("stablehlo.sort", list(operands), list(ctx.avals_out),
                  {"dimension": f"{dimension} : i64", "is_stable": "true"}, [region])
    return outs if isinstance(outs, list) else [outs]


@sort_p.def_rule("jvp")
def _sort_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, dimension: int, is_stable: bool, num_keys: int
              ) -> tuple[list[Any], list[Any]]:
    n = len(primals)
    outs = sort_p.bind(*primals, dimension=dimension, is_stable=is_stable, num_keys=num_keys)
    carried = [(k, t) for k, t in enumerate(tangents) if t is not None]
    out_tangents: list[Any] = [None] * n
    if carried:
        # the tangents sorted by the same keys: a second sort, so that batched tangents (jacfwd) leave the primal
        # outputs unbatched
        keys = list(primals[:num_keys])
        moved = sort_p.bind(*keys, *[t for _, t in carried], dimension=dimension, is_stable=is_stable,
                            num_keys=num_keys)
        for (k, _), t in zip(carried, moved[num_keys:]):
            out_tangents[k] = t
    return list(outs), out_tangents


def _permutation(keys: Sequence[Any], dimension: int, is_stable: bool) -> Any:
    """The positions the sort takes its outputs from, along dimension (an int32 iota sorted with the keys)."""
    shape = aval_of(keys[0]).shape
    n = shape[dimension]  # (a symbolic dimension is < 2**31: an exported program's dimensions are checked so)
    index_dtype = np.dtype(np.int32) if is_symbolic_dim(n) or n < 2 ** 31 else np.dtype(np.int64)
    iota = broadcasted_iota(index_dtype, shape, dimension)
    return sort_p.bind(*keys, iota, dimension=dimension, is_stable=is_stable, num_keys=len(keys))[-1]


@sort_p.def_rule("vjp")
def _sort_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, dimension: int,
              is_stable: bool, num_keys: int) -> list[Any]:
    wanted = [k for k, need in enumerate(needs) if need and cts[k] is not None]
    if not wanted:
        return [None] * len(ins)
    perm = _permutation(ins[:num_keys], dimension, is_stable)
    # sorting by the permutation puts each cotangent back where its output came from
    unsorted = sort_p.bind(perm, *[cts[k] for k in wanted], dimension=dimension, is_stable=False, num_keys=1)
    result: list[Any] = [None] * len(ins)
    for k, ct in zip(wanted, unsorted[1:]):
        result[k] = ct
    return result


@sort_p.def_rule("batching")
def _sort_batching(args: list[Any], dims: list[BatchDim], *, dimension: int, is_stable: bool, num_keys: int
                   ) -> tuple[list[Any], list[BatchDim]]:
    size = batch_size(args, dims)
    moved = [batch_at_front(x, d, size) for x, d in zip(args, dims)]
    outs = sort_p.bind(*moved, dimension=dimension + 1, is_stable=is_stable, num_keys=num_keys)
    return list(outs), [0] * len(outs)


def sort(operand: Any, dimension: int = -1, is_stable: bool = True, num_keys: int = 1) -> Any:
    """operand sorted along dimension (like jax.lax.sort); a sequence of operands is sorted together by the first
    num_keys of them, lexicographically, and a tuple returned."""
    single = not isinstance(operand, tuple | list)
    operands = [operand] if single else list(operand)
    if not operands:
        raise TypeError("sort: needs at least one operand")
    ndim = aval_of(operands[0]).ndim
    if ndim == 0:
        raise TypeError(f"sort: operands must have at least one dimension, got {aval_of(operands[0]).str_short()}")
    dimension = normalize_axis("sort", static_int("sort", "dimension", dimension), ndim)
    num_keys = static_int("sort", "num_keys", num_keys)
    outs = sort_p.bind(*operands, dimension=dimension, is_stable=bool(is_stable), num_keys=num_keys)
    return outs[0] if single else tuple(outs)


def sort_key_val(keys: Any, values: Any, dimension: int = -1, is_stable: bool = True) -> tuple[Any, Any]:
    """keys sorted along dimension, and values permuted the same way (like jax.lax.sort_key_val)."""
    out = sort((keys, values), dimension, is_stable, 1)
    return out[0], out[1]


# ---------------------------------------------------------------------------------------------------------------
# top_k: the k largest entries of each row (the last axis) and their int32 positions, largest first, in the total
# order of the bits as JAX's top_k (XLA's TopK) has it: -NaN < -inf < ... < -0.0 < 0.0 < subnormals < ... < inf <
# NaN (no subnormal flushed, the zeros apart: not the sort's order; bf16 compared as f32, its subnormals flushed),
# equal values by lower position.
TOP_K_TARGET = "ember_sort_top_k"
_TOP_K_KERNEL = frozenset(d for d in _KERNEL_KEYS if d.itemsize <= 4)  # (a key above its position in 64 bits)

top_k_p = Primitive("top_k", multiple_results=True, checks=())
top_k_p.def_rule("sharding_rule", explicit.top_k)


@top_k_p.def_rule("abstract_eval")
def _top_k_abstract_eval(operand: ShapedArray, *, k: int) -> list[ShapedArray]:
    if operand.ndim == 0:
        raise TypeError(f"top_k: operand must have at least one dimension, got {operand.str_short()}")
    check_dtype("top_k", operand, "fiub", "operand")
    refuse_narrow("top_k", operand, "s")
    if not 0 <= k <= operand.shape[-1]:
        raise ValueError(f"top_k: k={k} must be between 0 and the last dimension's size {operand.shape[-1]} of "
                         f"{operand.str_short()}")
    shape = operand.shape[:-1] + (k,)
    return [ShapedArray(shape, operand.dtype), ShapedArray(shape, np.dtype(np.int32))]


def _total_order_key(ctx: LoweringContext, x: str, aval: ShapedArray) -> tuple[str, ShapedArray]:
    """An integer whose order is the total order of x's bits (floats: the bits, negatives' magnitude bits flipped,
    compared as signed integers); integers and booleans as they are."""
    if not dt.is_float(aval.dtype):
        return x, aval
    if aval.dtype == dt.float8_e8m0fnu:  # (an exponent alone, no sign bit: its bits in unsigned order, NaN's last)
        unsigned = aval.update(dtype=np.dtype(np.uint8))
        return ctx.op("stablehlo.bitcast_convert", [x], unsigned), unsigned
    ints = aval.update(dtype=np.dtype(f"int{8 * aval.dtype.itemsize}"))
    bits = ctx.op("stablehlo.bitcast_convert", [x], ints)
    if aval.dtype == dt.bfloat16:  # (XLA's TopK compares bf16 as f32 with its subnormals flushed to signed zeros)
        exponent = ctx.op("stablehlo.and", [bits, ctx.emitter.constant(0x7f80, ints)], ints)
        subnormal = ctx.emitter.compare(exponent, ctx.emitter.constant(0, ints), ints, "EQ")
        signed_zero = ctx.op("stablehlo.and", [bits, ctx.emitter.constant(-0x8000, ints)], ints)
        bits = ctx.op("stablehlo.select", [subnormal, signed_zero, bits], ints)
    width = 8 * aval.dtype.itemsize
    sign = ctx.op("stablehlo.shift_right_arithmetic", [bits, ctx.emitter.constant(width - 1, ints)], ints)
    magnitude = ctx.op("stablehlo.and", [sign, ctx.emitter.constant((1 << (width - 1)) - 1, ints)], ints)
    return ctx.op("stablehlo.xor", [bits, magnitude], ints), ints


@top_k_p.def_rule("lowering")
def _top_k_lowering(ctx: LoweringContext, x: str, *, k: int) -> list[str]:
    aval = ctx.avals_in[0]
    values, indices = ctx.avals_out
    if (np.dtype(aval.dtype) in _TOP_K_KERNEL and backend_forms.applies(ctx.emitter)
            and ffi.available(TOP_K_TARGET)):
        return ffi.custom_call(ctx, TOP_K_TARGET, [x], [values, indices], {"k": k})
    # XLA's sort of (key, position, value), largest key first, equal keys by lower position; the first k of each row
    key, key_aval = _total_order_key(ctx, x, aval)
    last = aval.ndim - 1
    positions = ctx.op("stablehlo.iota", [], aval.update(dtype=np.dtype(np.int32)),
                       {"iota_dimension": f"{last} : i64"})
    avals = [key_aval, aval.update(dtype=np.dtype(np.int32)), aval]

    def comparator(body: Any, args: list[str]) -> list[str]:
        boolean = ShapedArray((), dt.bool_)
        greater = _compare(body, "GT", args[0], args[1], key_aval.dtype)
        equal = _compare(body, "EQ", args[0], args[1], key_aval.dtype)
        before = _compare(body, "LT", args[2], args[3], np.dtype(np.int32))
        return [body.op("stablehlo.or", [greater, body.op("stablehlo.and", [equal, before], boolean)], boolean)]
    region = ctx.region([ShapedArray((), a.dtype) for a in avals for _ in (0, 1)], comparator)
    _, sorted_positions, sorted_values = ctx.op("stablehlo.sort", [key, positions, x], avals,
                                                {"dimension": f"{last} : i64", "is_stable": "false"}, [region])
    limits = i64_array(values.shape)
    starts, strides = i64_array([0] * aval.ndim), i64_array([1] * aval.ndim)
    return [ctx.op("stablehlo.slice", [v], a, {"start_indices": starts, "limit_indices": limits, "strides": strides})
            for v, a in ((sorted_values, values), (sorted_positions, indices))]


def _along_last(rank: int, indices: Any) -> tuple[tuple[Any, ...], Any]:
    """The dimension numbers (gather's and scatter's share their fields' order) and index array that address
    x[..., indices] row by row in an array of this rank: the leading dims batch, the last one indexed."""
    last, others = rank - 1, tuple(range(rank - 1))
    return ((), (last,), (last,), others, others), reshape(indices, aval_of(indices).shape + (1,))


def _take_last(x: Any, indices: Any) -> Any:
    """x[..., indices] row by row (take_along_axis on the last axis, indices in bounds)."""
    rank = aval_of(x).ndim
    dims, where = _along_last(rank, indices)
    return gather_p.bind(x, where, dimension_numbers=GatherDimensionNumbers(*dims), slice_sizes=(1,) * rank,
                         indices_are_sorted=False, unique_indices=True)


@top_k_p.def_rule("jvp")
def _top_k_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, k: int) -> tuple[list[Any], list[Any]]:
    values, indices = top_k_p.bind(primals[0], k=k)
    tangent = None if tangents[0] is None else _take_last(tangents[0], indices)
    return [values, indices], [tangent, None]


@top_k_p.def_rule("vjp")
def _top_k_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, k: int) -> list[Any]:
    if not needs[0] or cts[0] is None:
        return [None]
    aval = aval_of(ins[0])
    dims, where = _along_last(aval.ndim, outs[1])
    return [scatter_add_p.bind(full(aval.shape, 0, aval.dtype), where, cts[0],
                               dimension_numbers=ScatterDimensionNumbers(*dims), indices_are_sorted=False,
                               unique_indices=True)]


@top_k_p.def_rule("batching")
def _top_k_batching(args: list[Any], dims: list[BatchDim], *, k: int) -> tuple[list[Any], list[BatchDim]]:
    moved = batch_at_front(args[0], dims[0], batch_size(args, dims))
    return list(top_k_p.bind(moved, k=k)), [0, 0]


def top_k(operand: Any, k: int) -> tuple[Any, Any]:
    """The k largest entries along the last dimension and their int32 indices, largest first; ties go to the
    lower index (like jax.lax.top_k, in its total order: NaN largest, -NaN smallest, -0.0 below 0.0)."""
    values, indices = top_k_p.bind(operand, k=static_int("top_k", "k", k))  # (checked by its abstract eval)
    return values, indices


# approx_top_k (jax.lax's approx_top_k_p, which approx_max_k and approx_min_k bind): on the CPU, JAX's ApproxTopK runs
# its exact fallback (a sort with the comparator `a > b` (`a < b` for min), stable): IEEE's order, -0.0 equal to 0.0,
# ties to the lower index. So its lowering emits: top_k along the reduction dimension moved last, of keys with -0.0
# made 0.0 (negated for min), the values read from the operand at the indices (a -0.0 stays one). recall_target only
# tunes the TPU's approximation. NaNs, which that comparator leaves wherever the sort puts them, come first for max
# (top_k's total order: NaN largest, -NaN smallest; for min its mirror). The derivatives are top_k's: the tangent
# read at the indices, the cotangent added back there.
_APPROX_TILING = {True: 1024, False: 128}  # rows of rank 1 / higher: XLA's tiling, below which nothing is reduced
approx_top_k_p = Primitive("approx_top_k", multiple_results=True, checks=())


def _approx_dim(x: ShapedArray, reduction_dimension: int) -> int:
    if not -x.ndim <= reduction_dimension < x.ndim:
        raise IndexError(f"approx_top_k: reduction_dimension {reduction_dimension} is out of range for "
                         f"{x.str_short()} (JAX: list index out of range)")
    return reduction_dimension % x.ndim


@approx_top_k_p.def_rule("abstract_eval")
def _approx_top_k_abstract_eval(x: ShapedArray, *, k: int, reduction_dimension: int, recall_target: float,
                                is_max_k: bool, reduction_input_size_override: int, aggregate_to_topk: bool
                                ) -> list[ShapedArray]:
    if k <= 0:
        raise ValueError(f"approx_top_k: k must be positive, got {k}")
    if x.ndim == 0:
        raise TypeError(f"approx_top_k operand must have >= 1 dimension, got {x.shape}")
    dim = _approx_dim(x, reduction_dimension)
    size = x.shape[dim]
    if size < k:
        raise ValueError(f"approx_top_k: k must be smaller than the size of reduction_dim {size}, got {k}")
    if dt.is_complex(x.dtype):  # (JAX says ValueError for every non-float dtype; ember refuses complex as a type)
        raise TypeError(f"approx_top_k: operand must be a floating type, got {x.str_short()} (complex dtypes are "
                        "not ordered)")
    if not dt.is_float(x.dtype):
        raise ValueError(f"approx_top_k: operand must be a floating type, got {x.str_short()}")
    if not aggregate_to_topk:  # every element, sorted, where XLA does not reduce (rows up to its tiling)
        if size > _APPROX_TILING[x.ndim == 1]:
            raise NotImplementedError(f"approx_top_k: aggregate_to_topk=False for a reduction dimension longer than "
                                      f"{_APPROX_TILING[x.ndim == 1]} (its output size is XLA's "
                                      "ApproxTopKReductionOutputSize, which ember does not reproduce)")
        k = size
    shape = x.shape[:dim] + (k,) + x.shape[dim + 1:]
    return [ShapedArray(shape, x.dtype, x.weak_type), ShapedArray(shape, np.dtype(np.int32))]


@approx_top_k_p.def_rule("sharding_rule")
def _approx_top_k_sharding(x: ShapedArray, *, reduction_dimension: int, **params: Any) -> Any:
    explicit.unsplit_axis("sort", x, _approx_dim(x, reduction_dimension))
    return [x.explicit] * 2


def _approx_top_k_values(x: Any, dim: int, k: int, is_max_k: bool) -> list[Any]:
    """The composition the lowering emits: the k extreme entries of x along dim and their indices."""
    aval = aval_of(x)
    moved = moveaxis(x, dim, aval.ndim - 1)
    key = select(eq(moved, full((), 0, aval.dtype)), full(aval_of(moved).shape, 0, aval.dtype), moved)
    _, indices = top_k(key if is_max_k else neg(key), k)
    return [moveaxis(_take_last(moved, indices), aval.ndim - 1, dim), moveaxis(indices, aval.ndim - 1, dim)]


@approx_top_k_p.def_rule("lowering")
def _approx_top_k_lowering(ctx: LoweringContext, x: str, *, reduction_dimension: int, is_max_k: bool,
                           **params: Any) -> list[str]:
    aval = ctx.avals_in[0]
    dim = _approx_dim(aval, reduction_dimension)
    k = ctx.avals_out[0].shape[dim]
    return emit_function(ctx.emitter, lambda v: _approx_top_k_values(v, dim, k, is_max_k), [aval], [x])[0]


def _take_along(x: Any, indices: Any, dim: int) -> Any:
    """x's entries at indices along dim (take_along_axis, indices in bounds)."""
    last = aval_of(x).ndim - 1
    return moveaxis(_take_last(moveaxis(x, dim, last), moveaxis(indices, dim, last)), last, dim)


@approx_top_k_p.def_rule("jvp")
def _approx_top_k_jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[list[Any], list[Any]]:
    values, indices = approx_top_k_p.bind(primals[0], **params)
    dim = _approx_dim(aval_of(primals[0]), params["reduction_dimension"])
    tangent = None if tangents[0] is None else _take_along(tangents[0], indices, dim)
    return [values, indices], [tangent, None]


@approx_top_k_p.def_rule("vjp")
def _approx_top_k_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                      reduction_dimension: int, **params: Any) -> list[Any]:
    if not needs[0] or cts[0] is None:
        return [None]
    aval = aval_of(ins[0])
    dim, last = _approx_dim(aval, reduction_dimension), aval.ndim - 1
    moved = aval.update(shape=aval_of(moveaxis(ins[0], dim, last)).shape, explicit=None)
    dims, where = _along_last(aval.ndim, moveaxis(outs[1], dim, last))
    ct = scatter_add_p.bind(full(moved.shape, 0, aval.dtype), where, moveaxis(cts[0], dim, last),
                            dimension_numbers=ScatterDimensionNumbers(*dims), indices_are_sorted=False,
                            unique_indices=True)
    return [moveaxis(ct, last, dim)]


@approx_top_k_p.def_rule("batching")
def _approx_top_k_batching(args: list[Any], dims: list[BatchDim], *, reduction_dimension: int, **params: Any
                           ) -> tuple[list[Any], list[BatchDim]]:
    d = dims[0]
    dim = reduction_dimension % (aval_of(args[0]).ndim - 1)
    outs = approx_top_k_p.bind(args[0], reduction_dimension=dim + 1 if d <= dim else dim, **params)
    return list(outs), [d, d]


def _approx_top_k(name: str, operand: Any, k: Any, reduction_dimension: Any, recall_target: float,
                  reduction_input_size_override: int, aggregate_to_topk: bool, is_max_k: bool) -> tuple[Any, Any]:
    k = int(k) if isinstance(k, float) and k.is_integer() else static_int(name, "k", k)
    values, indices = approx_top_k_p.bind(
        operand, k=k, reduction_dimension=static_int(name, "reduction_dimension", reduction_dimension),
        recall_target=float(recall_target), is_max_k=is_max_k,
        reduction_input_size_override=static_int(name, "reduction_input_size_override", reduction_input_size_override),
        aggregate_to_topk=bool(aggregate_to_topk))
    return values, indices


def approx_max_k(operand: Any, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True) -> tuple[Any, Any]:
    """The k largest entries of a float operand along reduction_dimension and their int32 indices, largest first,
    ties to the lower index (the `approx_top_k` primitive, like jax.lax.approx_max_k on the CPU, which is exact;
    see above). With aggregate_to_topk=False, every entry, sorted (rows up to 128 long; 1024 for a vector)."""
    return _approx_top_k("approx_max_k", operand, k, reduction_dimension, recall_target,
                         reduction_input_size_override, aggregate_to_topk, True)


def approx_min_k(operand: Any, k: int, reduction_dimension: int = -1, recall_target: float = 0.95,
                 reduction_input_size_override: int = -1, aggregate_to_topk: bool = True) -> tuple[Any, Any]:
    """The k smallest entries of a float operand along reduction_dimension and their int32 indices, smallest first,
    ties to the lower index (the `approx_top_k` primitive, like jax.lax.approx_min_k on the CPU; see
    approx_max_k)."""
    return _approx_top_k("approx_min_k", operand, k, reduction_dimension, recall_target,
                         reduction_input_size_override, aggregate_to_topk, False)


__all__ = ["SORT_TARGET", "TOP_K_TARGET", "approx_max_k", "approx_min_k", "sort", "sort_key_val", "top_k"]
