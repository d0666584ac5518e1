"""Ragged dots: ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers) and ragged_dot, as jax.lax's.

lhs has one ragged dimension, cut into g consecutive groups by group_sizes; what the groups mean depends on the kind
of that dimension (JAX's three modes):
  1. non-contracting ([b, m, k], rhs [g, b, k, n] -> [b, m, n]): the rows of group j meet rhs's group j (rhs has
     one group dimension); rows past the groups' sum give 0;
  2. contracting ([b, m, k], [b, k, n] -> [g, b, m, n]): result j contracts over the k of group j only;
  3. batch ([b, m, k], [b, k, n] -> [b, m, n]): a dot_general (JAX's ignores the group sizes there too).
group_sizes is [g], or one row of g per index of lhs's prefix dimensions (the batch dimensions, and the
non-contracting (mode 1) or contracting (mode 2) dimensions before the ragged one); a group j covers the ragged
indices [sum(sizes[:j]), sum(sizes[:j + 1])), so a negative size makes groups overlap, as JAX's masks do.

How it is computed (the lowering). JAX on the CPU masks lhs once per group and contracts over (group, k): g times
the work of one dot (the dense [g, m, k] mask). Here each operand is first put in a canonical order (the modes'
[B, X, M, K] forms below, which are ragged dots themselves), and each group's rows are gathered into tiles of T
rows, padded at the group's end: every tile belongs to one group, so one batched dot of the tiles against their
group's rhs (mode 1) or of lhs's and rhs's tiles (mode 2, the per-tile products then added into their group) does
the work of one dot plus under g tiles of padding. T is the power of two near m / (2g), between 8 and 128. Group
sizes that are negative (or sum past the index type) make groups overlap, which tiles cannot hold, and in mode 1 a
weight that is inf or NaN makes JAX's NaN in every row (its zeroed rows times it): a branch of the program then
computes JAX's dense masked form instead (JAX's values, JAX's cost).

Derivatives: the JVP is bilinear (JAX's); reverse mode takes each mode's cotangents as ragged dots of the
canonical forms (mode 1's are a mode-1 and a mode-2 ragged dot, mode 2's two mode-1 ones; mode 3's are
dot_general's), so unlike JAX's transpose (which has mode 1 only) every mode is differentiable. Batching: a batched
lhs (or rhs) alone becomes one more free dimension of it; anything else (batched group sizes, or both operands) one
more batch dimension of all three, as JAX's rule (which takes only that case)."""
from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple, Sequence

import numpy as np

from ember._core import Primitive, ShapedArray, aval_of, stage_flat
from ember._core import dtypes as dt
from ember._core.checks import static_ints
from ember._core.dtypes import ShardingTypeError
from ember._hlo import LoweringContext, lower_into
from ember._prims.checks import check_same_dtypes
from ember._prims.dot import (DimensionNumbers, Precision, _dot_general_abstract_eval, canonical_precision,
                              dot_general, dot_general_p, with_precision)
from ember._prims.elementwise import (add, bitwise_and, bitwise_not, bitwise_or, div, imag, is_finite, le, lt,
                                      max as max_, min as min_, mul, real, rem, select, sub)
from ember._prims.indexing import GatherDimensionNumbers, ScatterDimensionNumbers, gather_p, scatter_add_p
from ember._prims.reduction import reduce_and, reduce_or
from ember._prims.shape import (BatchDim, argsort, batch_size, broadcast_in_dim, convert_element_type, full, iota,
                                moveaxis, reduce_sum, reshape, transpose)
from ember._prims.windowed import cumsum
from ember._prims import explicit


@dataclasses.dataclass(frozen=True)
class RaggedDotDimensionNumbers:
    """The dimensions of a ragged dot (jax.lax.RaggedDotDimensionNumbers): dot_dimension_numbers as dot_general's,
    ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)); lhs_ragged_dimensions, lhs's one ragged
    dimension; rhs_group_dimensions, rhs's group dimension (one in mode 1, none in modes 2 and 3)."""
    dot_dimension_numbers: DimensionNumbers
    lhs_ragged_dimensions: tuple[int, ...]
    rhs_group_dimensions: tuple[int, ...]

    def __init__(self, dot_dimension_numbers: Any, lhs_ragged_dimensions: Sequence[int],
                 rhs_group_dimensions: Sequence[int]):
        object.__setattr__(self, "dot_dimension_numbers",
                           tuple(tuple(tuple(int(d) for d in dims) for dims in pair) for pair in dot_dimension_numbers))
        object.__setattr__(self, "lhs_ragged_dimensions", tuple(int(d) for d in lhs_ragged_dimensions))
        object.__setattr__(self, "rhs_group_dimensions", tuple(int(d) for d in rhs_group_dimensions))


RaggedDims = RaggedDotDimensionNumbers
NONCONTRACTING, CONTRACTING, BATCH = "noncontracting", "contracting", "batch"
# ragged_dot's: lhs [m, k] ragged in m, rhs [g, k, n]
_BASIC = RaggedDims((((1,), (1,)), ((), ())), (0,), (0,))
# The canonical forms the lowering and the derivatives work in: mode 1, lhs [B, X, M, K] ragged in M (X: lhs's free
# dimensions before the ragged one, each with its own group sizes), rhs [G, B, K, N], group sizes [B, X, G], result
# [B, X, M, N]; mode 2, lhs [B, X, F, K] ragged in K (X: the contracting dimensions before it, summed), rhs
# [B, X, K, N], group sizes [B, X, G], result [G, B, F, N].
CANONICAL_1 = RaggedDims((((3,), (2,)), ((0,), (1,))), (2,), (0,))
CANONICAL_2 = RaggedDims((((1, 3), (1, 2)), ((0,), (0,))), (3,), ())


def _free(ndim: int, *used: Sequence[int]) -> list[int]:
    taken = {d for dims in used for d in dims}
    return [d for d in range(ndim) if d not in taken]


def mode_and_dim(lhs_ndim: int, dims: RaggedDims) -> tuple[str, int]:
    """The mode of a ragged dot (JAX's RaggedDotMode) and lhs's ragged dimension."""
    if len(dims.lhs_ragged_dimensions) != 1:
        raise TypeError("ragged_dot_general expects exactly one lhs ragged dimension.")
    ragged = dims.lhs_ragged_dimensions[0]
    (lc, _), (lb, _) = dims.dot_dimension_numbers
    free = _free(lhs_ndim, lc, lb)
    if ragged in free:
        return NONCONTRACTING, ragged
    if ragged in lc:
        return CONTRACTING, ragged
    if ragged in lb:
        return BATCH, ragged
    raise TypeError(f"lhs_ragged_dim {ragged} not found in lhs_noncontracting {free}, lhs_contracting {list(lc)}, "
                    f"or lhs_batch {list(lb)}.")


def prefix_dims(mode: str, lhs_ndim: int, ragged: int, dims: RaggedDims) -> list[int]:
    """lhs's dimensions that group_sizes has one row of sizes per index of (JAX's _ragged_dot_prefix_dims)."""
    (lc, _), (lb, _) = dims.dot_dimension_numbers
    if mode == NONCONTRACTING:
        free = _free(lhs_ndim, lc, lb)
        return list(lb) + free[:free.index(ragged)]
    if mode == CONTRACTING:
        return list(lb) + list(lc[:lc.index(ragged)])
    return list(lb[:lb.index(ragged)])


# ---------------------------------------------------------------------------------------------------------------
# ragged_dot_general(lhs, rhs, group_sizes; ragged_dot_dimension_numbers, [precision])
ragged_dot_general_p = Primitive("ragged_dot_general", checks=())


@ragged_dot_general_p.def_rule("sharding_rule")
def _ragged_dot_sharding_rule(lhs: ShapedArray, rhs: ShapedArray, group_sizes: ShapedArray, **params: Any) -> Any:
    """Replicated operands give a replicated result; a split one is JAX's error (it has no rule for it)."""
    if any(explicit.split_dims(a) for a in (lhs, rhs, group_sizes)):
        raise ShardingTypeError("Explicit sharding inference for ragged_dot_general is not currently implemented: "
                                "reshard its operands to be replicated (ember.sharding.reshard(x, P())) or run it "
                                "in ember.sharding.auto_axes")
    return None


def _check_in_range(dim: int, rank: int, dim_name: str, arg_name: str) -> None:
    if not 0 <= dim < rank:
        raise TypeError(f"ragged_dot_general requires {dim_name} numbers to be nonnegative and less than the number "
                        f"of axes of the {arg_name} value, got {dim} for {arg_name} of rank {rank}.")


@ragged_dot_general_p.def_rule("abstract_eval")
def _ragged_dot_general_abstract_eval(lhs: ShapedArray, rhs: ShapedArray, group_sizes: ShapedArray, *,
                                      ragged_dot_dimension_numbers: RaggedDims, precision: Precision = None
                                      ) -> ShapedArray:
    dims = ragged_dot_dimension_numbers
    if len(dims.lhs_ragged_dimensions) != 1:
        raise TypeError("ragged_dot_general expects exactly one lhs ragged dimension.")
    _check_in_range(dims.lhs_ragged_dimensions[0], lhs.ndim, "lhs ragged dimension", "lhs")
    mode, ragged = mode_and_dim(lhs.ndim, dims)
    if not dt.is_int(group_sizes.dtype):
        raise TypeError("ragged_dot_general requires that group_sizes.dtype is subtype of np.integer.")
    if group_sizes.ndim == 0:
        raise TypeError("expected rank of group_sizes to be >=1.")
    if group_sizes.ndim != 1:
        expected = tuple(lhs.shape[d] for d in prefix_dims(mode, lhs.ndim, ragged, dims)) + group_sizes.shape[-1:]
        if group_sizes.shape != expected:
            raise TypeError(f"expected group_sizes to have shape {expected}, got {group_sizes.shape}.")
    groups = group_sizes.shape[-1]
    (lc, rc), (lb, rb) = dims.dot_dimension_numbers
    group_dims = dims.rhs_group_dimensions
    if mode != NONCONTRACTING:
        if group_dims:
            raise TypeError("ragged_dot_general requires zero group dimensions in the rhs when lhs ragged dimension "
                            "is contracting or batch.")
        rhs_ng, dot_dims = rhs, dims.dot_dimension_numbers
    else:
        if len(group_dims) != 1:
            raise TypeError("ragged_dot_general requires exactly one rhs group dimension when lhs ragged dimension "
                            "is noncontracting.")
        gd = group_dims[0]
        _check_in_range(gd, rhs.ndim, "rhs group dimension", "rhs")
        if gd in rb or gd in rc:
            raise TypeError("ragged_dot_general requires rhs group dimension numbers to be distinct from "
                            "contracting and batch dimensions.")
        if rhs.shape[gd] != groups:
            raise TypeError(f"expected rhs group dimension size to be {groups}, got {rhs.shape[gd]}.")
        rhs_ng = ShapedArray(rhs.shape[:gd] + rhs.shape[gd + 1:], rhs.dtype, rhs.weak_type)
        drop = lambda ds: tuple(d - (d > gd) for d in ds)  # noqa: E731
        dot_dims = ((lc, drop(rc)), (lb, drop(rb)))
    check_same_dtypes("ragged_dot_general", [lhs, rhs])
    out = _dot_general_abstract_eval(lhs, rhs_ng, dimension_numbers=dot_dims)
    if mode == CONTRACTING:
        out = out.update(shape=(groups,) + out.shape)
    return out


# ---------------------------------------------------------------------------------------------------------------
# The canonical forms: each operand transposed and reshaped (ember primitives, so the derivatives' forms are
# ordinary values), and the way back.
class Canonical(NamedTuple):
    mode: str
    lhs: Any            # mode 1: [B, X, M, K]; mode 2: [B, X, F, K]
    rhs: Any            # mode 1: [G, B, K, N]; mode 2: [B, X, K, N]
    sizes: Any          # [B, X, G], scaled by the rows (mode 1) or columns (mode 2) each ragged index stands for
    lhs_order: tuple[int, ...]   # lhs's dimensions in the canonical order (before the reshape)
    rhs_order: tuple[int, ...]


def _size(shape: Sequence[int], dims: Sequence[int]) -> int:
    return math.prod(shape[d] for d in dims)


def full_group_sizes(group_sizes: Any, lhs_shape: Sequence[int], mode: str, ragged: int, dims: RaggedDims) -> Any:
    """group_sizes with one row per index of lhs's prefix dimensions ([g] broadcast, as JAX's)."""
    prefix = tuple(lhs_shape[d] for d in prefix_dims(mode, len(lhs_shape), ragged, dims))
    gs = aval_of(group_sizes)
    if gs.ndim == 1 and prefix:
        return broadcast_in_dim(group_sizes, prefix + gs.shape, (len(prefix),))
    return group_sizes


def canonical(lhs: Any, rhs: Any, group_sizes: Any, dims: RaggedDims) -> Canonical:
    """A ragged dot of mode 1 or 2 in its canonical form (CANONICAL_1, CANONICAL_2)."""
    ls, rs = aval_of(lhs).shape, aval_of(rhs).shape
    mode, ragged = mode_and_dim(len(ls), dims)
    (lc, rc), (lb, rb) = dims.dot_dimension_numbers
    sizes = full_group_sizes(group_sizes, ls, mode, ragged, dims)
    groups = aval_of(group_sizes).shape[-1]
    b = _size(ls, lb)
    if mode == NONCONTRACTING:
        free = _free(len(ls), lc, lb)
        outer, inner = free[:free.index(ragged)], free[free.index(ragged) + 1:]
        lhs_order = tuple(lb) + tuple(outer) + (ragged,) + tuple(inner) + tuple(lc)
        rows = _size(ls, inner)  # (each ragged index stands for this many rows)
        gd = dims.rhs_group_dimensions[0]
        rhs_order = (gd,) + tuple(rb) + tuple(rc) + tuple(_free(len(rs), rc, rb, (gd,)))
        x = _size(ls, outer)
        new_lhs = (b, x, ls[ragged] * rows, _size(ls, lc))
        new_rhs = (groups, b, _size(rs, rc), _size(rs, _free(len(rs), rc, rb, (gd,))))
    else:
        k = lc.index(ragged)
        outer, inner = lc[:k], lc[k + 1:]
        lhs_order = tuple(lb) + tuple(outer) + tuple(_free(len(ls), lc, lb)) + (ragged,) + tuple(inner)
        rows = _size(ls, inner)
        rhs_order = tuple(rb) + tuple(rc[:k]) + (rc[k],) + tuple(rc[k + 1:]) + tuple(_free(len(rs), rc, rb))
        x = _size(ls, outer)
        new_lhs = (b, x, _size(ls, _free(len(ls), lc, lb)), ls[ragged] * rows)
        new_rhs = (b, x, ls[ragged] * rows, _size(rs, _free(len(rs), rc, rb)))
    sizes = reshape(sizes, (b, x, groups))
    if rows != 1:
        sizes = mul(sizes, full((), rows, aval_of(sizes).dtype))
    return Canonical(mode, reshape(transpose(lhs, lhs_order), new_lhs), reshape(transpose(rhs, rhs_order), new_rhs),
                     sizes, lhs_order, rhs_order)


def _restore(x: Any, shape: Sequence[int], order: Sequence[int]) -> Any:
    """The inverse of canonical's transpose-and-reshape of an operand of this shape."""
    return transpose(reshape(x, tuple(shape[d] for d in order)), argsort(order))


def _bind(lhs: Any, rhs: Any, sizes: Any, dims: RaggedDims, precision: Precision) -> Any:
    return ragged_dot_general_p.bind(lhs, rhs, sizes, **with_precision({"ragged_dot_dimension_numbers": dims},
                                                                        precision))


def _swap_last(x: Any) -> Any:
    n = aval_of(x).ndim
    return transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


# ---------------------------------------------------------------------------------------------------------------
# The lowering: the canonical forms' tiled computation, staged with ember primitives and emitted inline.
def _tile_rows(rows: int, groups: int) -> int:
    """The tile size: the power of two near rows / (2 groups), from 8 to 128 (the padding, under a tile per
    group, stays small against the rows, and each tile's dot stays large enough to run well)."""
    want = max(1, -(-rows // (2 * max(groups, 1))))
    return int(min(128, max(8, 1 << (want - 1).bit_length())))


def _i32(x: Any) -> Any:
    return convert_element_type(x, np.int32)


def _take(x: Any, index: Any, axis_is_batched: bool) -> Any:
    """x[p, index[p, ...]] (axis_is_batched: x is [P, M, ...], index [P, ...]) or x[index[...]] (x is [M, ...]):
    whole slices along x's first non-batch dimension, the indices in bounds."""
    xs, ids = aval_of(x).shape, aval_of(index).shape
    nb = 1 if axis_is_batched else 0
    rest = xs[nb + 1:]
    batching = (0,) if nb else ()
    dnums = GatherDimensionNumbers(offset_dims=tuple(range(len(ids), len(ids) + len(rest))),
                                   collapsed_slice_dims=(nb,), start_index_map=(nb,), operand_batching_dims=batching,
                                   start_indices_batching_dims=batching)
    return gather_p.bind(x, reshape(index, ids + (1,)), dimension_numbers=dnums, slice_sizes=(1,) * (nb + 1) + rest,
                         indices_are_sorted=False, unique_indices=False)


def _zero_where_not(ok: Any, x: Any) -> Any:
    shape = aval_of(x).shape
    return select(broadcast_in_dim(ok, shape, tuple(range(aval_of(ok).ndim))), x, full(shape, 0, aval_of(x).dtype))


class _Layout(NamedTuple):
    tiles: int
    tile: int
    group: Any       # [P, tiles]: each tile's group (G: a tile past the groups' tiles)
    rows: Any        # [P, tiles, T]: the ragged index each tile row holds (0 where it holds none)
    valid: Any       # [P, tiles, T]
    ends: Any        # [P, G]: each group's end, clamped to the ragged size
    starts: Any      # [P, G]
    first_tile: Any  # [P, G]: each group's first tile


def _clamped_sizes(sizes: Any, m: int) -> Any:
    """Group sizes as int32 in [0, m] (a group never covers more than the m ragged indices; negative sizes are
    the dense branch's)."""
    dtype = aval_of(sizes).dtype
    shape = aval_of(sizes).shape
    if m <= np.iinfo(dtype).max:
        sizes = min_(sizes, full(shape, m, dtype))
    sizes = _i32(sizes)
    return max_(sizes, full(shape, 0, np.int32))


def _layout(sizes: Any, m: int) -> _Layout:
    """Each group's ragged indices (of m) in tiles of T, one group per tile, for group sizes [P, G] (int32 in
    [0, m])."""
    p, g = aval_of(sizes).shape
    t = _tile_rows(m, g)
    tiles = (m + g * (t - 1)) // t  # (sum ceil(len_j / T) <= (sum len_j + g (T - 1)) / T, and sum len_j <= m)

    def const(shape: tuple[int, ...], value: int) -> Any:
        return full(shape, value, np.int32)
    ends_raw = cumsum(sizes, axis=1)
    ends = min_(ends_raw, const((p, g), m))
    starts = min_(sub(ends_raw, sizes), const((p, g), m))
    counts = div(add(sub(ends, starts), const((p, g), t - 1)), const((p, g), t))
    cum = cumsum(counts, axis=1)
    first = sub(cum, counts)
    # a tile's group: how many groups' tiles end at or before it
    tile_ids = broadcast_in_dim(iota(np.int32, tiles), (p, tiles, g), (1,))
    group = reduce_sum(convert_element_type(le(broadcast_in_dim(cum, (p, tiles, g), (0, 2)), tile_ids), np.int32),
                       (2,))
    clamped = min_(group, const((p, tiles), g - 1))

    def per_tile(v: Any) -> Any:  # [P, tiles, T]: v[p, the group of tile t]
        return broadcast_in_dim(_take(v, clamped, True), (p, tiles, t), (0, 1))
    tile_of_group = sub(broadcast_in_dim(iota(np.int32, tiles), (p, tiles, t), (1,)), per_tile(first))
    local = add(mul(tile_of_group, const((p, tiles, t), t)), broadcast_in_dim(iota(np.int32, t), (p, tiles, t), (2,)))
    valid = bitwise_and(broadcast_in_dim(lt(group, const((p, tiles), g)), (p, tiles, t), (0, 1)),
                        lt(local, sub(per_tile(ends), per_tile(starts))))
    rows = select(valid, add(per_tile(starts), local), const((p, tiles, t), 0))
    return _Layout(tiles, t, group, rows, valid, ends, starts, first)


def _tiled_1(lhs: Any, rhs: Any, sizes: Any, precision: Precision) -> Any:
    """Canonical mode 1: lhs [B, X, M, K], rhs [G, B, K, N], sizes [B, X, G] -> [B, X, M, N]."""
    b, x, m, k = aval_of(lhs).shape
    g, _, _, n = aval_of(rhs).shape
    p = b * x
    lay = _layout(_clamped_sizes(reshape(sizes, (p, g)), m), m)
    lhs = reshape(lhs, (p, m, k))
    flat = (p, lay.tiles * lay.tile)
    tiles_in = _zero_where_not(reshape(lay.valid, flat), _take(lhs, reshape(lay.rows, flat), True))
    tiles_in = reshape(tiles_in, (p, lay.tiles, lay.tile, k))
    # each tile's group's rhs: rhs[group, b(p)], with p = b * X + x
    member = div(broadcast_in_dim(iota(np.int32, p), (p, lay.tiles), (0,)), full((p, lay.tiles), x, np.int32))
    which = add(mul(min_(lay.group, full((p, lay.tiles), g - 1, np.int32)), full((p, lay.tiles), b, np.int32)), member)
    weights = _take(reshape(rhs, (g * b, k, n)), which, False)                                  # [P, tiles, K, N]
    out = dot_general(tiles_in, weights, (((3,), (2,)), ((0, 1), (0, 1))), precision)         # [P, tiles, T, N]
    # back to the rows: row i of group j sits in tile first[j] + (i - start[j]) // T at (i - start[j]) % T
    i = broadcast_in_dim(iota(np.int32, m), (p, m, g), (1,))
    group = _i32(reduce_sum(convert_element_type(le(broadcast_in_dim(lay.ends, (p, m, g), (0, 2)), i), np.int32),
                            (2,)))
    inside = lt(group, full((p, m), g, np.int32))
    clamped = min_(group, full((p, m), g - 1, np.int32))
    offset = sub(broadcast_in_dim(iota(np.int32, m), (p, m), (1,)), _take(lay.starts, clamped, True))
    tee = full((p, m), lay.tile, np.int32)
    position = add(mul(add(_take(lay.first_tile, clamped, True), div(offset, tee)), tee), rem(offset, tee))
    position = select(inside, position, full((p, m), 0, np.int32))
    rows = _zero_where_not(inside, _take(reshape(out, (p, lay.tiles * lay.tile, n)), position, True))
    return reshape(rows, (b, x, m, n))


def _tiled_2(lhs: Any, rhs: Any, sizes: Any, precision: Precision) -> Any:
    """Canonical mode 2: lhs [B, X, F, K], rhs [B, X, K, N], sizes [B, X, G] -> [G, B, F, N]."""
    b, x, f, k = aval_of(lhs).shape
    n = aval_of(rhs).shape[3]
    g = aval_of(sizes).shape[2]
    p = b * x
    lay = _layout(_clamped_sizes(reshape(sizes, (p, g)), k), k)
    flat = (p, lay.tiles * lay.tile)
    flat_rows, flat_valid = reshape(lay.rows, flat), reshape(lay.valid, flat)
    cols = _zero_where_not(flat_valid, _take(transpose(reshape(lhs, (p, f, k)), (0, 2, 1)), flat_rows, True))
    rows = _zero_where_not(flat_valid, _take(reshape(rhs, (p, k, n)), flat_rows, True))
    cols = reshape(cols, (p, lay.tiles, lay.tile, f))
    rows = reshape(rows, (p, lay.tiles, lay.tile, n))
    parts = dot_general(cols, rows, (((2,), (2,)), ((0, 1), (0, 1))), precision)               # [P, tiles, F, N]
    # each tile's product added into its group's (a tile past the groups, group G, falls outside and is dropped)
    dnums = ScatterDimensionNumbers(update_window_dims=(2, 3), inserted_window_dims=(1,),
                                    scatter_dims_to_operand_dims=(1,), operand_batching_dims=(0,),
                                    scatter_indices_batching_dims=(0,))
    dtype = aval_of(parts).dtype
    sums = scatter_add_p.bind(full((p, g, f, n), 0, dtype), reshape(lay.group, (p, lay.tiles, 1)), parts,
                              dimension_numbers=dnums, indices_are_sorted=True, unique_indices=False)
    sums = reduce_sum(reshape(sums, (b, x, g, f, n)), (1,))
    return transpose(sums, (1, 0, 2, 3))


def _dense(mode: str, lhs: Any, rhs: Any, sizes: Any, precision: Precision) -> Any:
    """JAX's form of a canonical ragged dot: lhs masked once per group along its ragged dimension (with the group
    bounds in the sizes' dtype, unclamped, so that overlapping groups count twice, as in JAX's), contracted over
    (group, k) (mode 1) or kept per group (mode 2)."""
    b, x, rows, cols = aval_of(lhs).shape
    g = aval_of(sizes).shape[2]
    ragged = rows if mode == NONCONTRACTING else cols
    ends = cumsum(sizes, axis=2)
    starts = sub(ends, sizes)
    shape = (b, x, g, ragged)
    i = broadcast_in_dim(iota(aval_of(sizes).dtype, ragged), shape, (3,))
    mask = bitwise_and(le(broadcast_in_dim(starts, shape, (0, 1, 2)), i),
                       lt(i, broadcast_in_dim(ends, shape, (0, 1, 2))))
    def masked(x: Any, mask_dims: tuple[int, ...], x_dims: tuple[int, ...], shape: tuple[int, ...]) -> Any:
        return select(broadcast_in_dim(mask, shape, mask_dims), broadcast_in_dim(x, shape, x_dims),
                      full(shape, 0, aval_of(x).dtype))
    full_shape = (b, x, g, rows, cols)
    if mode == NONCONTRACTING:  # [B, X, G, M, K] x [G, B, K, N] over (G, K), batch B -> [B, X, M, N]
        return dot_general(masked(lhs, (0, 1, 2, 3), (0, 1, 3, 4), full_shape), rhs, (((2, 4), (0, 2)), ((0,), (1,))),
                           precision)
    # mode 2, rhs masked too (as JAX's): [B, X, G, F, K] x [B, X, G, K, N] over (X, K), batch (B, G) -> [B, G, F, N]
    n = aval_of(rhs).shape[3]
    product = dot_general(masked(lhs, (0, 1, 2, 4), (0, 1, 3, 4), full_shape),
                          masked(rhs, (0, 1, 2, 3), (0, 1, 3, 4), (b, x, g, cols, n)),
                          (((1, 4), (1, 3)), ((0, 2), (0, 2))), precision)
    return transpose(product, (1, 0, 2, 3))


@ragged_dot_general_p.def_rule("lowering")
def _ragged_dot_general_lowering(ctx: LoweringContext, lhs: str, rhs: str, group_sizes: str, *,
                                 ragged_dot_dimension_numbers: RaggedDims, precision: Precision = None) -> list[str]:
    dims = ragged_dot_dimension_numbers
    avals = [ShapedArray(a.shape, a.dtype) for a in ctx.avals_in]
    out = ShapedArray(ctx.aval_out.shape, ctx.aval_out.dtype)
    operands = [lhs, rhs, group_sizes]
    mode, _ = mode_and_dim(avals[0].ndim, dims)
    if mode == BATCH:  # (the group sizes do not matter: JAX's is this dot_general too)
        ir = stage_flat(lambda a, b, s: [dot_general(a, b, dims.dot_dimension_numbers, precision)], avals)
        return lower_into(ctx.emitter, ir, operands)
    if 0 in out.shape or 0 in avals[0].shape or 0 in avals[1].shape:  # (empty, a sum over nothing, or no groups)
        return [ctx.constant(0, out)]
    # the canonical forms, then a case: the tiled computation, or JAX's dense one where it differs (dense_needed)
    ir = stage_flat(lambda a, b, s: list(canonical(a, b, s, dims)[1:4]), avals)
    forms = lower_into(ctx.emitter, ir, operands)
    form_avals = [ShapedArray(a.shape, a.dtype) for a in ir.out_avals]

    def dense_needed(w: Any, s: Any) -> list[Any]:
        """Groups that overlap (a negative size, or sums past the sizes' dtype), or, in mode 1, a weight that is
        not finite: JAX's masked contraction multiplies every group's weights by the other groups' zeroed rows, so
        an inf or NaN there makes NaN in every row (0 * inf), which JAX on the CPU gives and the tiles would not."""
        ends = cumsum(s, axis=2)
        starts = sub(ends, s)
        bad = reduce_or(bitwise_or(lt(ends, starts), lt(starts, full(aval_of(s).shape, 0, aval_of(s).dtype))),
                        (0, 1, 2))
        if mode == NONCONTRACTING and dt.is_inexact(aval_of(w).dtype):
            parts = [real(w), imag(w)] if dt.is_complex(aval_of(w).dtype) else [w]
            for part in parts:
                bad = bitwise_or(bad, bitwise_not(reduce_and(is_finite(part), (0, 1, 2, 3))))
        return [convert_element_type(bad, np.int32)]
    index = lower_into(ctx.emitter, stage_flat(dense_needed, form_avals[1:]), forms[1:])[0]
    tiled = _tiled_1 if mode == NONCONTRACTING else _tiled_2
    branches = [stage_flat(lambda a, b, s: [tiled(a, b, s, precision)], form_avals),
                stage_flat(lambda a, b, s: [_dense(mode, a, b, s, precision)], form_avals)]
    result = ctx.op("stablehlo.case", [index], [branches[0].out_avals[0]],
                    regions=[ctx.lower_region(b, captured=forms) for b in branches])[0]
    return lower_into(ctx.emitter, stage_flat(lambda y: [reshape(y, out.shape)], branches[0].out_avals), [result])


def _canonical_out_shape(mode: str, avals: Sequence[ShapedArray]) -> tuple[int, ...]:
    if mode == NONCONTRACTING:
        b, x, m, _ = avals[0].shape
        return (b, x, m, avals[1].shape[3])
    b, _, f, _ = avals[0].shape
    return (avals[2].shape[2], b, f, avals[1].shape[3])


# ---------------------------------------------------------------------------------------------------------------
# Derivatives
@ragged_dot_general_p.def_rule("jvp")
def _ragged_dot_general_jvp(primals: Sequence[Any], tangents: Sequence[Any], *,
                            ragged_dot_dimension_numbers: RaggedDims, precision: Precision = None
                            ) -> tuple[list[Any], list[Any]]:
    lhs, rhs, sizes = primals
    dims = ragged_dot_dimension_numbers
    out = _bind(lhs, rhs, sizes, dims, precision)
    parts = ([_bind(tangents[0], rhs, sizes, dims, precision)] if tangents[0] is not None else []) + \
        ([_bind(lhs, tangents[1], sizes, dims, precision)] if tangents[1] is not None else [])
    if not parts:
        return [out], [None]
    return [out], [parts[0] if len(parts) == 1 else add(*parts)]


@ragged_dot_general_p.def_rule("vjp")
def _ragged_dot_general_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                            ragged_dot_dimension_numbers: RaggedDims, precision: Precision = None) -> list[Any]:
    """Each mode's cotangents as ragged dots of the canonical forms (see the module docstring)."""
    ct = cts[0]
    lhs, rhs, sizes = ins
    dims = ragged_dot_dimension_numbers
    mode, _ = mode_and_dim(aval_of(lhs).ndim, dims)
    if ct is None or not (needs[0] or needs[1]):
        return [None, None, None]
    if mode == BATCH:
        return dot_general_p.rule("vjp")([ct], [lhs, rhs], outs, needs[:2],
                                         **with_precision({"dimension_numbers": dims.dot_dimension_numbers},
                                                          precision)) + [None]
    ls, rs = aval_of(lhs).shape, aval_of(rhs).shape
    c = canonical(lhs, rhs, sizes, dims)
    c_out = _canonical_out_shape(mode, [aval_of(c.lhs), aval_of(c.rhs), aval_of(c.sizes)])
    ct_c = reshape(ct, c_out)
    d_lhs = d_rhs = None
    if mode == NONCONTRACTING:  # out = rd1(L, W): dL = rd1(ct, W^T), dW = rd2(L^T, ct)
        if needs[0]:
            d_lhs = _bind(ct_c, _swap_last(c.rhs), c.sizes, CANONICAL_1, precision)
        if needs[1]:
            d_rhs = _bind(_swap_last(c.lhs), ct_c, c.sizes, CANONICAL_2, precision)
    else:  # out = rd2(L, R): dL = rd1(R, ct^T)^T, dR = rd1(L^T, ct)
        if needs[0]:
            d_lhs = _swap_last(_bind(c.rhs, _swap_last(ct_c), c.sizes, CANONICAL_1, precision))
        if needs[1]:
            d_rhs = _bind(_swap_last(c.lhs), ct_c, c.sizes, CANONICAL_1, precision)
    return [None if d_lhs is None else _restore(d_lhs, ls, c.lhs_order),
            None if d_rhs is None else _restore(d_rhs, rs, c.rhs_order), None]


# ---------------------------------------------------------------------------------------------------------------
# Batching
def _shifted(dims: Sequence[int], by: int = 1) -> tuple[int, ...]:
    return tuple(d + by for d in dims)


@ragged_dot_general_p.def_rule("batching")
def _ragged_dot_general_batching(args: list[Any], dims_in: list[BatchDim], *,
                                 ragged_dot_dimension_numbers: RaggedDims, precision: Precision = None
                                 ) -> tuple[list[Any], list[BatchDim]]:
    lhs, rhs, sizes = args
    dl, dr, dg = dims_in
    dims = ragged_dot_dimension_numbers
    (lc, rc), (lb, rb) = dims.dot_dimension_numbers
    ragged = dims.lhs_ragged_dimensions[0]
    groups = dims.rhs_group_dimensions
    size = batch_size(args, dims_in)
    lhs_ndim = aval_of(lhs).ndim - (dl is not None)
    mode, _ = mode_and_dim(lhs_ndim, dims)
    lead = 1 if mode == CONTRACTING else 0  # (mode 2's result starts with the groups)
    nb = len(lb)
    if dg is None and (dl is None) != (dr is None):
        if dl is not None:  # one more free dimension of lhs, its first: the result's first lhs free dimension
            new = RaggedDims(((_shifted(lc), rc), (_shifted(lb), rb)), (ragged + 1,), groups)
            lhs = moveaxis(lhs, dl, 0)
            if mode == NONCONTRACTING:  # (a free dimension before the ragged one: its own row of group sizes)
                full_sizes = full_group_sizes(sizes, aval_of(lhs).shape[1:], mode, ragged, dims)
                gs = aval_of(full_sizes)
                sizes = broadcast_in_dim(full_sizes, gs.shape[:nb] + (size,) + gs.shape[nb:],
                                         tuple(d if d < nb else d + 1 for d in range(gs.ndim)))
            return [_bind(lhs, rhs, sizes, new, precision)], [lead + nb]
        # one more free dimension of rhs, its first: the result's first rhs free dimension
        new = RaggedDims(((lc, _shifted(rc)), (lb, _shifted(rb))), (ragged,), _shifted(groups))
        lhs_free = len(_free(lhs_ndim, lc, lb))
        return [_bind(lhs, moveaxis(rhs, dr, 0), sizes, new, precision)], [lead + nb + lhs_free]
    # one more batch dimension of both operands (broadcast where unbatched) and of the group sizes
    lhs = _at_front(lhs, dl, size)
    rhs = _at_front(rhs, dr, size)
    if dg is None:
        sizes = full_group_sizes(sizes, aval_of(lhs).shape[1:], mode, ragged, dims)
        sizes = broadcast_in_dim(sizes, (size,) + aval_of(sizes).shape, tuple(range(1, aval_of(sizes).ndim + 1)))
    else:
        sizes = moveaxis(sizes, dg, 0)
        if aval_of(sizes).ndim == 2:  # (one [g] per member: broadcast over each member's prefix dimensions)
            prefix = tuple(aval_of(lhs).shape[1:][d] for d in prefix_dims(mode, lhs_ndim, ragged, dims))
            sizes = broadcast_in_dim(sizes, (size,) + prefix + aval_of(sizes).shape[1:], (0, len(prefix) + 1))
    new = RaggedDims(((_shifted(lc), _shifted(rc)), ((0,) + _shifted(lb), (0,) + _shifted(rb))), (ragged + 1,),
                     _shifted(groups))
    return [_bind(lhs, rhs, sizes, new, precision)], [lead]


def _at_front(x: Any, d: BatchDim, size: int) -> Any:
    if d is None:
        shape = aval_of(x).shape
        return broadcast_in_dim(x, (size,) + shape, tuple(range(1, len(shape) + 1)))
    return moveaxis(x, d, 0)


# ---------------------------------------------------------------------------------------------------------------
# The public functions
def _dimension_numbers(value: Any) -> RaggedDims:
    """A RaggedDotDimensionNumbers (or anything with its three fields, as JAX's) as ember's."""
    try:
        return RaggedDims(value.dot_dimension_numbers, value.lhs_ragged_dimensions, value.rhs_group_dimensions)
    except (AttributeError, TypeError, ValueError):
        raise TypeError(f"ragged_dot_general: ragged_dot_dimension_numbers must be a lax.RaggedDotDimensionNumbers, "
                        f"got {value!r}") from None


def ragged_dot_general(lhs: Any, rhs: Any, group_sizes: Any, ragged_dot_dimension_numbers: Any, precision: Any = None,
                       preferred_element_type: Any = None, group_offset: Any = None) -> Any:
    """A dot_general with one ragged dimension of lhs cut into groups (like jax.lax.ragged_dot_general; see the
    module docstring for its three modes). precision and preferred_element_type are dot_general's."""
    dims = _dimension_numbers(ragged_dot_dimension_numbers)
    for d in dims.lhs_ragged_dimensions + dims.rhs_group_dimensions:
        static_ints("ragged_dot_general", "ragged_dot_dimension_numbers", d)
    if group_offset is not None:  # (JAX 0.10.2 cannot bind one either: its param is an array, unhashable)
        raise TypeError("ragged_dot_general: group_offset is not supported (JAX 0.10.2 raises for it too: its "
                        "ragged dot computes every group)")
    precision = canonical_precision("ragged_dot_general", precision)
    if preferred_element_type is not None:
        preferred = dt.check_user_dtype(preferred_element_type, "ragged_dot_general")
        l_aval, r_aval = aval_of(lhs), aval_of(rhs)
        check_same_dtypes("ragged_dot_general", [l_aval, r_aval])
        if dt.is_bool(preferred) or (dt.is_int(preferred) and dt.is_float(l_aval.dtype)):
            raise TypeError(f"ragged_dot_general: preferred_element_type {preferred} cannot hold products of "
                            f"{l_aval.str_short()} and {r_aval.str_short()}")
        if preferred != l_aval.dtype:
            if preferred.itemsize >= l_aval.dtype.itemsize:
                return _bind(convert_element_type(lhs, preferred), convert_element_type(rhs, preferred), group_sizes,
                             dims, precision)
            return convert_element_type(_bind(lhs, rhs, group_sizes, dims, precision), preferred)
    return _bind(lhs, rhs, group_sizes, dims, precision)


def ragged_dot(lhs: Any, rhs: Any, group_sizes: Any, precision: Any = None, preferred_element_type: Any = None,
               group_offset: Any = None) -> Any:
    """lhs [m, k] times rhs [g, k, n], the rows of lhs cut into g consecutive groups of group_sizes [g], each times
    its rhs[j] (like jax.lax.ragged_dot): [m, n], rows past the groups' sum 0."""
    return ragged_dot_general(lhs, rhs, group_sizes, _BASIC, precision, preferred_element_type, group_offset)


__all__ = ["RaggedDotDimensionNumbers", "ragged_dot", "ragged_dot_general"]
