"""Static slicing primitives: slice, pad, concatenate, split, rev, stack, unstack and tile (all linear; each is
another's transpose)."""
from __future__ import annotations

from typing import Any, Sequence

from ember._core import Primitive, ShapedArray, aval_of, is_python_scalar, scalar_literal
from ember._core import dtypes as dt
from ember._core import NAN_CHECK
from ember._core.checks import normalize_axis, static_dims, static_int, static_ints
from ember._core.shape_poly import is_symbolic_dim, max_dim
from ember._hlo import LoweringContext, i64_array
from ember._prims.checks import check_same_dtypes, coerce_scalars
from ember._prims.elementwise import select, sub
from ember._prims.shape import (BatchDim, batch_at_front, batch_size, broadcast_in_dim, linear_jvp, reduce_sum,
                               reshape, zeros)
from ember._prims import explicit

# ---------------------------------------------------------------------------------------------------------------
# slice(x, start_indices, limit_indices, strides)
slice_p = Primitive("slice", checks=())
slice_p.def_rule("sharding_rule", explicit.slicing)


@slice_p.def_rule("abstract_eval")
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


@slice_p.def_rule("lowering")
def _slice_lowering(ctx: LoweringContext, x: str, *, start_indices: tuple[int, ...], limit_indices: tuple[int, ...],
                    strides: tuple[int, ...]) -> list[str]:
    return [ctx.op("stablehlo.slice", [x], ctx.aval_out,
                   {"start_indices": i64_array(start_indices), "limit_indices": i64_array(limit_indices),
                    "strides": i64_array(strides)})]


slice_p.def_rule("jvp", linear_jvp(slice_p))


@slice_p.def_rule("vjp")
def _slice_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
               start_indices: tuple[int, ...], limit_indices: tuple[int, ...], strides: tuple[int, ...]
               ) -> list[Any]:
    x_shape, out_shape = aval_of(ins[0]).shape, aval_of(outs[0]).shape
    config = []
    for lo, n, st, size in zip(start_indices, out_shape, strides, x_shape):
        if is_symbolic_dim(n):  # (ember.export: a count that may be 0: high is what makes pad's own size formula
            grown = lo + n + (max_dim(n - 1, 0) * (st - 1) if st != 1 else 0)  # give the operand's size exactly)
            config.append((lo, size - grown, st - 1))
            continue
        end = lo + (n - 1) * st + 1 if n else lo
        config.append((lo, size - end, st - 1 if n else 0))
    return [pad(cts[0], 0, config)]


@slice_p.def_rule("batching")
def _slice_batching(args: list[Any], dims: list[BatchDim], *, start_indices: tuple[int, ...],
                    limit_indices: tuple[int, ...], strides: tuple[int, ...]) -> tuple[list[Any], list[BatchDim]]:
    d, size = dims[0], batch_size(args, dims)

    def insert(values: tuple[int, ...], value: int) -> tuple[int, ...]:
        return values[:d] + (value,) + values[d:]
    return [slice_p.bind(args[0], start_indices=insert(start_indices, 0), limit_indices=insert(limit_indices, size),
                         strides=insert(strides, 1))], [d]


def slice(x: Any, start_indices: Sequence[int], limit_indices: Sequence[int],  # noqa: A001
          strides: Sequence[int] | None = None) -> Any:
    start = static_dims("slice", "start_indices", start_indices)
    limit = static_dims("slice", "limit_indices", limit_indices)
    steps = (1,) * len(start) if strides is None else static_dims("slice", "strides", strides)
    if not is_python_scalar(x) and start == (0,) * len(start) and limit == aval_of(x).shape and \
            steps == (1,) * len(steps):
        return x  # the whole array
    return slice_p.bind(x, start_indices=start, limit_indices=limit, strides=steps)


def slice_in_dim(x: Any, start: int, limit: int, stride: int = 1, axis: int = 0) -> Any:
    shape = aval_of(x).shape
    axis = normalize_axis("slice_in_dim", axis, len(shape))
    starts, limits, strides = [0] * len(shape), list(shape), [1] * len(shape)
    starts[axis], limits[axis], strides[axis] = start, limit, stride
    return slice(x, starts, limits, strides)


# ---------------------------------------------------------------------------------------------------------------
# pad(x, padding_value, padding_config[(low, high, interior)]); negative low/high crop.
pad_p = Primitive("pad", checks=NAN_CHECK)
pad_p.def_rule("sharding_rule", explicit.same_as(0))
PaddingConfig = tuple[tuple[int, int, int], ...]


@pad_p.def_rule("abstract_eval")
def _pad_abstract_eval(x: ShapedArray, padding_value: ShapedArray, *, padding_config: PaddingConfig) -> ShapedArray:
    check_same_dtypes("pad", [x, padding_value])
    if padding_value.shape != ():
        raise TypeError(f"pad: padding_value must be a scalar, got {padding_value.str_short()}")
    if len(padding_config) != x.ndim:
        raise TypeError(f"pad: padding_config {padding_config} needs one (low, high, interior) per dimension "
                        f"of {x.str_short()}")
    shape = []
    for d, (lo, hi, interior) in enumerate(padding_config):
        n = x.shape[d]
        if is_symbolic_dim(n) or is_symbolic_dim(lo) or is_symbolic_dim(hi):  # (ember.export: n may be 0)
            size = lo + hi + n + (max_dim(n - 1, 0) * interior if interior else 0)
        else:
            size = lo + hi + n + (n - 1) * interior if n else lo + hi
        if interior < 0 or size < 0:
            raise TypeError(f"pad: invalid padding {(lo, hi, interior)} for dimension {d} of {x.str_short()}")
        shape.append(size)
    return ShapedArray(shape, x.dtype, x.weak_type)


@pad_p.def_rule("lowering")
def _pad_lowering(ctx: LoweringContext, x: str, padding_value: str, *, padding_config: PaddingConfig) -> list[str]:
    lows, highs, interiors = zip(*padding_config) if padding_config else ((), (), ())
    return [ctx.op("stablehlo.pad", [x, padding_value], ctx.aval_out,
                   {"edge_padding_low": i64_array(lows), "edge_padding_high": i64_array(highs),
                    "interior_padding": i64_array(interiors)})]


pad_p.def_rule("jvp", linear_jvp(pad_p))  # linear in (x, padding_value) jointly


@pad_p.def_rule("vjp")
def _pad_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
             padding_config: PaddingConfig) -> list[Any]:
    ct = cts[0]
    unpadded = pad(ct, 0, [(-lo, -hi, 0) for lo, hi, _ in padding_config])
    ct_x = slice(unpadded, [0] * len(padding_config), aval_of(unpadded).shape,
                 [interior + 1 for _, _, interior in padding_config])
    if not needs[1]:
        return [ct_x, None]
    all_axes = tuple(range(len(padding_config)))
    return [ct_x, sub(reduce_sum(ct, all_axes), reduce_sum(ct_x, all_axes))]


@pad_p.def_rule("batching")
def _pad_batching(args: list[Any], dims: list[BatchDim], *, padding_config: PaddingConfig
                  ) -> tuple[list[Any], list[BatchDim]]:
    x, value = args
    x_dim, value_dim = dims
    if value_dim is None:  # one padding value for every member: pad along the batch dimension by nothing
        config = padding_config[:x_dim] + ((0, 0, 0),) + padding_config[x_dim:]
        return [pad_p.bind(x, value, padding_config=config)], [x_dim]
    # a padding value per member: pad with zeros, then select each member's value where the padding is
    size = batch_size(args, dims)
    x = batch_at_front(x, x_dim, size)
    config = ((0, 0, 0),) + padding_config
    dtype = aval_of(x).dtype
    padded = pad_p.bind(x, scalar_literal(0, dtype, aval_of(x).weak_type), padding_config=config)
    out_shape = aval_of(padded).shape
    is_pad = pad_p.bind(broadcast_in_dim(scalar_literal(False, dt.bool_, False), aval_of(x).shape, ()),
                        scalar_literal(True, dt.bool_, False), padding_config=config)
    values = broadcast_in_dim(value, out_shape, (0,))
    return [select(is_pad, values, padded)], [0]


def pad(x: Any, padding_value: Any, padding_config: Sequence[Sequence[int]]) -> Any:
    config = tuple(static_dims("pad", "padding_config", c) for c in padding_config)
    if any(len(c) != 3 for c in config):
        raise TypeError(f"pad: padding_config entries must be (low, high, interior), got {padding_config}")
    if is_python_scalar(padding_value):
        padding_value = scalar_literal(padding_value, aval_of(x).dtype, aval_of(x).weak_type)
    return pad_p.bind(x, padding_value, padding_config=config)


# ---------------------------------------------------------------------------------------------------------------
# concatenate(*xs, dimension)
concatenate_p = Primitive("concatenate", checks=())
concatenate_p.def_rule("sharding_rule", explicit.concatenate)


@concatenate_p.def_rule("abstract_eval")
def _concatenate_abstract_eval(*xs: ShapedArray, dimension: int) -> ShapedArray:
    if not xs:
        raise TypeError("concatenate: needs at least one operand")
    check_same_dtypes("concatenate", xs)
    first = xs[0]
    if first.dtype in (dt.int2, dt.uint2) and len(xs) > 1:
        raise TypeError(f"concatenate does not accept dtype {first.dtype.name} ({first.str_short()}): XLA's CPU "
                        "aborts the process on a concatenation of 2-bit values (JAX 0.10.2's as well); convert "
                        "first, e.g. x.astype('int8')")
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


@concatenate_p.def_rule("lowering")
def _concatenate_lowering(ctx: LoweringContext, *xs: str, dimension: int) -> list[str]:
    return [ctx.op("stablehlo.concatenate", list(xs), ctx.aval_out, {"dimension": f"{dimension} : i64"})]


concatenate_p.def_rule("jvp", linear_jvp(concatenate_p))


@concatenate_p.def_rule("vjp")
def _concatenate_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                     dimension: int) -> list[Any]:
    result, offset = [], 0
    for x, need in zip(ins, needs):
        size = aval_of(x).shape[dimension]
        result.append(slice_in_dim(cts[0], offset, offset + size, axis=dimension) if need else None)
        offset += size
    return result


@concatenate_p.def_rule("batching")
def _concatenate_batching(args: list[Any], dims: list[BatchDim], *, dimension: int
                          ) -> tuple[list[Any], list[BatchDim]]:
    size = batch_size(args, dims)
    moved = [batch_at_front(x, d, size) for x, d in zip(args, dims)]
    return [concatenate_p.bind(*moved, dimension=dimension + 1)], [0]


def concatenate(operands: Sequence[Any], dimension: int) -> Any:
    operands = list(operands)
    if not operands:
        raise TypeError("concatenate: needs at least one operand")
    ndim = aval_of(operands[0]).ndim
    return concatenate_p.bind(*operands, dimension=normalize_axis("concatenate", static_int(
        "concatenate", "dimension", dimension), ndim))


# ---------------------------------------------------------------------------------------------------------------
# split(x, sizes, axis): consecutive pieces of x along axis, one output per size (linear; concatenate's transpose).
split_p = Primitive("split", multiple_results=True, checks=())
split_p.def_rule("sharding_rule", explicit.split)


@split_p.def_rule("abstract_eval")
def _split_abstract_eval(x: ShapedArray, *, sizes: tuple[int, ...], axis: int) -> list[ShapedArray]:
    if not 0 <= axis < x.ndim:
        raise TypeError(f"split: axis {axis} out of range for {x.str_short()}")
    if any(size < 0 for size in sizes) or sum(sizes) != x.shape[axis]:
        raise TypeError(f"split: sizes {sizes} must be non-negative and sum to {x.shape[axis]}, the size of axis "
                        f"{axis} of {x.str_short()}")
    return [ShapedArray(x.shape[:axis] + (size,) + x.shape[axis + 1:], x.dtype, x.weak_type) for size in sizes]


@split_p.def_rule("lowering")
def _split_lowering(ctx: LoweringContext, x: str, *, sizes: tuple[int, ...], axis: int) -> list[str]:
    shape, outs, start = ctx.avals_in[0].shape, [], 0
    for aval, size in zip(ctx.avals_out, sizes):
        starts = tuple(start if d == axis else 0 for d in range(len(shape)))
        limits = tuple(start + size if d == axis else n for d, n in enumerate(shape))
        outs.append(ctx.op("stablehlo.slice", [x], aval, {"start_indices": i64_array(starts),
                                                          "limit_indices": i64_array(limits),
                                                          "strides": i64_array((1,) * len(shape))}))
        start += size
    return outs


split_p.def_rule("jvp", linear_jvp(split_p))


@split_p.def_rule("vjp")
def _split_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, sizes: tuple[int, ...],
               axis: int) -> list[Any]:
    pieces = [zeros(aval_of(out)) if ct is None else ct for ct, out in zip(cts, outs)]
    return [concatenate(pieces, axis)]


@split_p.def_rule("batching")
def _split_batching(args: list[Any], dims: list[BatchDim], *, sizes: tuple[int, ...], axis: int
                    ) -> tuple[list[Any], list[BatchDim]]:
    d = dims[0]
    return split_p.bind(args[0], sizes=sizes, axis=axis if axis < d else axis + 1), [d] * len(sizes)


def split(operand: Any, sizes: Sequence[int], axis: int = 0) -> list[Any]:
    """Consecutive pieces of the given sizes along axis (like jax.lax.split)."""
    shape = aval_of(operand).shape
    axis = normalize_axis("split", static_int("split", "axis", axis), len(shape))
    sizes = static_ints("split", "sizes", sizes)
    if any(size < 0 for size in sizes) or sum(sizes) != shape[axis]:
        raise ValueError(f"split: sizes {sizes} must be non-negative and sum to {shape[axis]}, the size of axis "
                         f"{axis} of shape {shape}")
    return split_p.bind(operand, sizes=sizes, axis=axis)


# ---------------------------------------------------------------------------------------------------------------
# stack(*xs, axis): operands of one shape and dtype stacked along a new axis; unstack(x, axis): its transpose, the
# slices along axis (jax.lax's stack_p and unstack_p). Both lower to the reshapes, slices and concatenation they
# are.
stack_p = Primitive("stack", moves_data=True, checks=())


@stack_p.def_rule("sharding_rule")
def _stack_sharding(*xs: ShapedArray, axis: int) -> Any:
    explicit.concatenate(*xs, dimension=axis)  # (every operand split alike, as concatenate's)
    spec = next((explicit.spec_of(x) for x in xs if x.explicit is not None), explicit.spec_of(xs[0]))
    return explicit.typed(explicit.mesh_of(xs), spec[:axis] + (None,) + spec[axis:])


@stack_p.def_rule("abstract_eval")
def _stack_abstract_eval(*xs: ShapedArray, axis: int) -> ShapedArray:
    if not xs:
        raise ValueError("stack: needs at least one operand")
    check_same_dtypes("stack", xs)
    if len({x.shape for x in xs}) != 1:
        raise ValueError(f"stack: All input arrays must have the same shape. Got "
                         f"{', '.join(str(x.shape) for x in xs)}.")
    first = xs[0]
    if not 0 <= axis <= first.ndim:
        raise ValueError(f"stack: axis {axis} is out of bounds for array of dimension {first.ndim + 1}")
    return ShapedArray(first.shape[:axis] + (len(xs),) + first.shape[axis:], first.dtype,
                       all(x.weak_type for x in xs))


@stack_p.def_rule("lowering")
def _stack_lowering(ctx: LoweringContext, *xs: str, axis: int) -> list[str]:
    x = ctx.avals_in[0]
    one = x.update(shape=x.shape[:axis] + (1,) + x.shape[axis:], explicit=None)
    pieces: dict[str, str] = {}  # (an operand stacked several times is reshaped once)
    for v in xs:
        if v not in pieces:
            pieces[v] = ctx.op("stablehlo.reshape", [v], one)
    return [ctx.op("stablehlo.concatenate", [pieces[v] for v in xs], ctx.aval_out, {"dimension": f"{axis} : i64"})]


stack_p.def_rule("jvp", linear_jvp(stack_p))


@stack_p.def_rule("vjp")
def _stack_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, axis: int) -> list[Any]:
    return [ct if need else None for ct, need in zip(unstack_p.bind(cts[0], axis=axis), needs)]


@stack_p.def_rule("batching")
def _stack_batching(args: list[Any], dims: list[BatchDim], *, axis: int) -> tuple[list[Any], list[BatchDim]]:
    size = batch_size(args, dims)
    moved = [batch_at_front(x, d, size) for x, d in zip(args, dims)]
    return [stack_p.bind(*moved, axis=axis + 1)], [0]


def stack(operands: Sequence[Any], axis: int = 0) -> Any:
    """Arrays of one shape and dtype stacked along a new axis (the `stack` primitive, as jax.lax.stack); Python
    scalars take the arrays' dtype."""
    operands = coerce_scalars(list(operands))
    if not operands:
        raise ValueError("stack: needs at least one operand")
    ndim = aval_of(operands[0]).ndim
    return stack_p.bind(*operands, axis=normalize_axis("stack", static_int("stack", "axis", axis), ndim + 1))


unstack_p = Primitive("unstack", multiple_results=True, checks=())


@unstack_p.def_rule("sharding_rule")
def _unstack_sharding(x: ShapedArray, *, axis: int) -> Any:
    explicit.unsplit_axis("unstack", x, axis)
    spec = explicit.spec_of(x)
    return [explicit.typed(x.explicit.mesh, spec[:axis] + spec[axis + 1:])] * x.shape[axis]


@unstack_p.def_rule("abstract_eval")
def _unstack_abstract_eval(x: ShapedArray, *, axis: int) -> list[ShapedArray]:
    if not 0 <= axis < x.ndim:
        raise ValueError(f"unstack: axis {axis} is out of bounds for array of dimension {x.ndim}")
    return [ShapedArray(x.shape[:axis] + x.shape[axis + 1:], x.dtype, x.weak_type)] * x.shape[axis]


@unstack_p.def_rule("lowering")
def _unstack_lowering(ctx: LoweringContext, x: str, *, axis: int) -> list[str]:
    aval = ctx.avals_in[0]
    one = aval.update(shape=aval.shape[:axis] + (1,) + aval.shape[axis + 1:], explicit=None)
    outs = []
    for i, out in enumerate(ctx.avals_out):
        starts = tuple(i if d == axis else 0 for d in range(aval.ndim))
        limits = tuple(i + 1 if d == axis else n for d, n in enumerate(aval.shape))
        piece = ctx.op("stablehlo.slice", [x], one, {"start_indices": i64_array(starts),
                                                     "limit_indices": i64_array(limits),
                                                     "strides": i64_array((1,) * aval.ndim)})
        outs.append(ctx.op("stablehlo.reshape", [piece], out))
    return outs


unstack_p.def_rule("jvp", linear_jvp(unstack_p))


@unstack_p.def_rule("vjp")
def _unstack_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, axis: int) -> list[Any]:
    x = aval_of(ins[0])
    if x.shape[axis] == 0:
        return [zeros(x)]
    return [stack_p.bind(*[zeros(aval_of(out)) if ct is None else ct for ct, out in zip(cts, outs)], axis=axis)]


@unstack_p.def_rule("batching")
def _unstack_batching(args: list[Any], dims: list[BatchDim], *, axis: int) -> tuple[list[Any], list[BatchDim]]:
    d = dims[0]
    moved = axis if axis < d else axis + 1
    outs = unstack_p.bind(args[0], axis=moved)
    return outs, [d if d < moved else d - 1] * len(outs)


def unstack(x: Any, axis: int = 0) -> tuple[Any, ...]:
    """The slices of x along axis, that axis removed (the `unstack` primitive, as jax.lax.unstack)."""
    ndim = aval_of(x).ndim
    return tuple(unstack_p.bind(x, axis=normalize_axis("unstack", static_int("unstack", "axis", axis), ndim)))


# ---------------------------------------------------------------------------------------------------------------
# tile(x, reps): x repeated reps[i] times along dimension i (jax.lax's tile_p): a broadcast into (r0, n0, r1, n1,
# ...) and a reshape merging each pair; its transpose sums the repeats.
tile_p = Primitive("tile", moves_data=True, checks=())


@tile_p.def_rule("sharding_rule")
def _tile_sharding(x: ShapedArray, *, reps: tuple[int, ...]) -> Any:
    for d in explicit.split_dims(x):
        if reps[d] != 1:
            explicit.unsplit_axis("tile", x, d)
    return x.explicit


@tile_p.def_rule("abstract_eval")
def _tile_abstract_eval(x: ShapedArray, *, reps: tuple[int, ...]) -> ShapedArray:
    if len(reps) != x.ndim:
        raise TypeError(f"tile: reps length must be equal to the ndim of x, got len(reps)={len(reps)} and "
                        f"x.ndim={x.ndim}.")
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: reps must be non-negative, got {reps}")
    return ShapedArray(tuple(r * n for r, n in zip(reps, x.shape)), x.dtype, x.weak_type)


@tile_p.def_rule("lowering")
def _tile_lowering(ctx: LoweringContext, x: str, *, reps: tuple[int, ...]) -> list[str]:
    aval = ctx.avals_in[0]
    pairs = aval.update(shape=tuple(v for r, n in zip(reps, aval.shape) for v in (r, n)), explicit=None)
    spread = ctx.op("stablehlo.broadcast_in_dim", [x], pairs,
                    {"broadcast_dimensions": i64_array(tuple(range(1, 2 * aval.ndim, 2)))})
    return [ctx.op("stablehlo.reshape", [spread], ctx.aval_out)]


tile_p.def_rule("jvp", linear_jvp(tile_p))


@tile_p.def_rule("vjp")
def _tile_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
              reps: tuple[int, ...]) -> list[Any]:
    x = aval_of(ins[0])
    pairs = reshape(cts[0], tuple(v for r, n in zip(reps, x.shape) for v in (r, n)))
    return [reduce_sum(pairs, tuple(range(0, 2 * x.ndim, 2)))]


@tile_p.def_rule("batching")
def _tile_batching(args: list[Any], dims: list[BatchDim], *, reps: tuple[int, ...]) -> tuple[list[Any], list[BatchDim]]:
    d = dims[0]
    return [tile_p.bind(args[0], reps=reps[:d] + (1,) + reps[d:])], [d]


def tile(operand: Any, reps: Sequence[int]) -> Any:
    """operand repeated reps[i] times along dimension i (the `tile` primitive, as jax.lax.tile; len(reps) ==
    operand.ndim)."""
    return tile_p.bind(operand, reps=static_ints("tile", "reps", reps))


# ---------------------------------------------------------------------------------------------------------------
# rev(x, dimensions): x reversed along the given dimensions (linear, its own transpose).
rev_p = Primitive("rev", checks=())
rev_p.def_rule("sharding_rule", explicit.same_as(0))


@rev_p.def_rule("abstract_eval")
def _rev_abstract_eval(x: ShapedArray, *, dimensions: tuple[int, ...]) -> ShapedArray:
    if any(not 0 <= d < x.ndim for d in dimensions) or len(set(dimensions)) != len(dimensions):
        raise TypeError(f"rev: dimensions {dimensions} are invalid for {x.str_short()}")
    return x


@rev_p.def_rule("lowering")
def _rev_lowering(ctx: LoweringContext, x: str, *, dimensions: tuple[int, ...]) -> list[str]:
    return [ctx.op("stablehlo.reverse", [x], ctx.aval_out, {"dimensions": i64_array(dimensions)})]


rev_p.def_rule("jvp", linear_jvp(rev_p))
rev_p.def_rule("vjp", lambda cts, ins, outs, needs, *, dimensions: [rev(cts[0], dimensions)])


@rev_p.def_rule("batching")
def _rev_batching(args: list[Any], dims: list[BatchDim], *, dimensions: tuple[int, ...]
                  ) -> tuple[list[Any], list[BatchDim]]:
    d = dims[0]
    return [rev_p.bind(args[0], dimensions=tuple(a if a < d else a + 1 for a in dimensions))], [d]


def rev(x: Any, dimensions: Sequence[int]) -> Any:
    """x reversed along dimensions (like jax.lax.rev)."""
    ndim = aval_of(x).ndim
    dims = tuple(sorted(normalize_axis("rev", d, ndim) for d in static_ints("rev", "dimensions", dimensions)))
    return rev_p.bind(x, dimensions=dims) if dims else x


__all__ = ["concatenate", "pad", "rev", "slice", "slice_in_dim", "split", "stack", "tile", "unstack"]
