"""Collectives over named axes (jax.lax's parallel operators): psum, pmax, pmin, all_gather, psum_scatter,
all_to_all, ppermute, axis_index, and the compositions pmean, pbroadcast, pswapaxes, pshuffle, axis_size.

An axis name is bound while a function is staged, by `vmap(..., axis_name=...)` or by shard_map
(ember._core.axes): the public functions read the sizes they need there when they bind, so the sizes are params of
the equations and every rule reads them from its params. Every primitive keeps its axis names in the param `axes`
(a tuple; ember._core.axes.AXES_PARAM), which tells the batching pass which equations act over the axis it maps.

Two meanings, one per transformation that can consume a collective:
- batching: under `vmap(axis_name='i')` a collective over 'i' is computed over the batch (psum over 'i' sums the
  batch dimension); one over another name keeps its equation, batched member by member. The rules read the axis
  being batched from ember._core.axes.current_batching_axis().
- lowering: inside a shard_map body the emitter carries the mesh (Emitter.axis_context, an
  ember._hlo.spmd.AxisContext); a collective lowers to the StableHLO collective over the partition groups of its
  axes, as JAX emits it (channel handle type 1; global device ids where StableHLO takes them). Without one the
  lowering raises a LoweringError naming the unbound axis.

Inside a shard_map body with check_vma=True the mesh axes are typed (ember._core.vma): every value carries the axes it
varies over. As in JAX, psum/pmax/pmin need an operand varying over their axes (the public functions cast one that
is not, with pcast) and give a value invariant along them; all_gather, psum_scatter, ppermute and all_to_all keep
their operand varying; all_gather(to='invarying') gives an invariant value; axis_index varies over its axis. The
transposes follow from the types: psum of a varying operand transposes to pcast (its cotangent is one value every
device holds), pcast to psum. Over axes that are not typed (a vmap axis name, a body with check_vma=False) an
operand carries no such type, and psum transposes to psum, as JAX's does there.

Derivatives follow JAX: the collectives are linear (psum's transpose is psum, all_gather's is psum_scatter and back,
all_to_all's swaps its axes, ppermute's inverts its permutation, ragged_all_to_all's sends the cotangents back);
pmax and pmin share the tangent among the members that hold the extreme value (as reduce_max, what they mean under
vmap; JAX 0.10.2 has no rule for them); axis_index's integer output carries no derivative.

ragged_all_to_all (JAX's, which jaxlib's CPU cannot compile: XLA:CPU has no ragged-all-to-all) is written with
all_to_all: each member packs, per destination, what it writes into that destination's output (an output-sized
block), the blocks and the output offsets go through all_to_all, and each member takes from the blocks the rows
its slices cover."""
from __future__ import annotations

import operator
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from ember._core import Primitive, ShapedArray, Tracer, aval_of, is_python_scalar, stage_flat
from ember._core import dtypes as dt
from ember._core import NAN_CHECK
from ember._core.axes import (axes_size, axis_size as _bound_axis_size, bound_axes, current_batching_axis,
                              over_named_axes)
from ember._core.dtypes import ordered_axes
from ember._core.vma import pvary_p, typed
from ember._core.checks import normalize_axis
from ember._core.pytree import tree_map
from ember._core.sharding import block_shape, divides, repeated_axes, unknown_axes
from ember._hlo import LoweringContext, LoweringError, lower_into
from ember._prims.checks import ANY, NUMERIC_C, check_dtype
from ember._prims.elementwise import (add, bitwise_and, div, eq, ge, le, lt, max as max_, min as min_, mul, select,
                                      sub)
from ember._prims.indexing import GatherDimensionNumbers, dynamic_slice_in_dim, gather_p
from ember._prims.lax_helpers import expand_dims, index_take
from ember._prims.reduction import reduce_max, reduce_min
from ember._prims.shape import (BatchDim, batch_at_front, broadcast_in_dim, convert_element_type, full, iota,
                                linear_jvp, moveaxis, reduce_sum, reshape, squeeze, transpose, zeros, zeros_like)
from ember._prims.slicing import concatenate

AxisNames = tuple[Hashable, ...]
Groups = tuple[tuple[int, ...], ...] | None  # axis_index_groups: members of the named axes reducing together


def _axis_names(api: str, axis_name: Any) -> AxisNames:
    """A name or a tuple/list of names, as a tuple of names (each checked hashable)."""
    names = tuple(axis_name) if isinstance(axis_name, tuple | list) else (axis_name,)
    for name in names:
        try:
            hash(name)
        except TypeError:
            raise TypeError(f"{api}: axis names must be hashable, got {name!r} in axis_name={axis_name!r}") from None
    if repeated_axes(names):
        raise ValueError(f"{api}: axis_name {axis_name!r} names an axis twice")
    return names


def _index_groups(api: str, axis_index_groups: Any, size: int, equal: bool) -> Groups:
    """axis_index_groups as a tuple of tuples of member indices (along the named axes together, row-major), each
    member in exactly one group (as JAX's check); equal: the groups must be the same size (a collective whose
    result's shape depends on it)."""
    if axis_index_groups is None:
        return None
    try:
        groups = tuple(tuple(int(operator.index(i)) for i in g) for g in axis_index_groups)
    except TypeError:
        raise TypeError(f"{api}: axis_index_groups must be a sequence of sequences of ints, got "
                        f"{axis_index_groups!r}") from None
    if sorted(i for g in groups for i in g) != list(range(size)):
        raise ValueError(f"{api}: axis_index_groups must cover all indices exactly once: got {axis_index_groups!r} "
                         f"for axes of size {size}")
    if equal and len({len(g) for g in groups}) > 1:
        raise ValueError(f"{api}: axis_index_groups must all be the same size, got {axis_index_groups!r}")
    return groups


def _named_axes(api: str, axis_name: Any, axis_index_groups: Any = None) -> tuple[AxisNames, int, Groups]:
    """(the axis names as a tuple, the number of members a group of the collective has: their total size, or with
    axis_index_groups (which must be the same size) the size of one, and the groups) of a collective's axis_name
    (the names bound, or NameError)."""
    axes = _axis_names(api, axis_name)
    size = axes_size(axes)
    groups = _index_groups(api, axis_index_groups, size, equal=True)
    return axes, size if groups is None else len(groups[0]), groups


def _with_groups(groups: Groups) -> dict[str, Any]:
    """The groups param of an equation: absent for the whole axes (the printed IR shows groups only when given)."""
    return {} if groups is None else {"groups": groups}


def _no_batched_groups(groups: Groups) -> None:
    if groups is not None:
        raise NotImplementedError("axis_index_groups not supported in vmap collectives (as JAX's): vmap over the "
                                  "named axis of a collective with axis_index_groups")


def _varying(x: Any, axes: AxisNames) -> Any:
    """x cast to vary over the typed axes among axes (ember._core.vma) that it does not vary over yet, as JAX's
    collectives cast their operand (a value the same on every member is made a varying one; no data moves)."""
    missing = [a for a in typed(axes) if a not in aval_of(x).vma]
    return pvary_p.bind(x, axes=ordered_axes(missing)) if missing else x


def _one_state(api: str, x: Any, axes: AxisNames) -> None:
    """JAX's check of psum and psum_scatter: over the typed axes among axes, x must vary over all of them or over
    none (psum of a value the same on every member is size * x; over a mix of both it is JAX's ValueError)."""
    vma = aval_of(x).vma
    states = {"varying" if a in vma else "invarying" for a in typed(axes)}
    if len(states) > 1:
        raise ValueError(f"ember.lax.{api} can only accept axis_name which corresponds to one of varying, unreduced, "
                         f"reduced or invarying state of the input. Got input type: {aval_of(x)}, axes: {axes} and "
                         f"input state: {{'varying', 'invarying'}}")


def _along(ndim: int, dim: int, count: int) -> tuple[int, ...]:
    """The tiles of an array of rank ndim cut into count blocks along dimension dim (a collective's split)."""
    return tuple(count if d == dim else 1 for d in range(ndim))


def _rest(name: Hashable, axes: AxisNames) -> AxisNames:
    return tuple(a for a in axes if a != name)


def _axis_context(ctx: LoweringContext, op: str, axes: AxisNames) -> Any:
    """The mesh of the shard_map body being lowered, with every axis of axes on it."""
    mesh = ctx.emitter.axis_context
    if mesh is None:
        raise LoweringError(f"{op}: unbound axis name {axes[0]!r}: a collective over named axes lowers only inside a "
                            "shard_map body (under vmap with that axis_name it is batched away before lowering)")
    missing = unknown_axes(axes, mesh.axis_names)
    if missing:
        raise LoweringError(f"{op}: unbound axis name {missing[0]!r}: the mesh's axes are {mesh.axis_names}")
    return mesh


def _groups_attr(groups: Sequence[Sequence[int]]) -> str:
    """A dense i64 matrix of groups, uneven ones padded with -1 (as JAX emits them)."""
    width = max(len(g) for g in groups)
    rows = ", ".join("[" + ", ".join(str(int(p)) for p in list(g) + [-1] * (width - len(g))) + "]" for g in groups)
    return f"dense<[{rows}]> : tensor<{len(groups)}x{width}xi64>"


def _partition_groups(mesh: Any, axes: AxisNames, groups: Groups) -> list[list[int]]:
    """The partitions of each group a collective over axes runs within: the mesh's groups along the axes, each cut
    into axis_index_groups when given."""
    along = mesh.groups(axes)
    return along if groups is None else [[g[i] for i in members] for g in along for members in groups]


def _collective_attrs(mesh: Any, axes: AxisNames, global_ids: bool = True, groups: Groups = None) -> dict[str, str]:
    """replica_groups (partition ids), a fresh channel (type 1: device to device) and use_global_device_ids."""
    attrs = {"replica_groups": _groups_attr(_partition_groups(mesh, axes, groups)),
             "channel_handle": f"#stablehlo.channel_handle<handle = {mesh.next_channel()}, type = 1>"}
    if global_ids:
        attrs["use_global_device_ids"] = "unit"
    return attrs


def _combiner_region(ctx: LoweringContext, dtype: np.dtype, hlo_op: str) -> str:
    scalar = ShapedArray((), dtype)
    return ctx.region([scalar, scalar], lambda body, args: [body.op(f"stablehlo.{hlo_op}", args, scalar)])


# ---------------------------------------------------------------------------------------------------------------
# psum, pmax, pmin (x, axes): the sum (max, min) of x over the members of the named axes, on every member.
def _all_reduce(name: str, kinds: str, hlo_op: Callable[[np.dtype], str],
                batch_reduce: Callable[[Any, int], Any], unbatched: Callable[[Any, int], Any], *,
                checks: Sequence[str]) -> Primitive:
    """An all-reduce primitive: batch_reduce(x, dim) reduces a batch dimension under vmap of one of its axes,
    unbatched(x, size) is its value on a value equal on every member."""
    prim = over_named_axes(Primitive(name, own_vma=True, checks=checks))

    @prim.def_rule("abstract_eval")
    def _abstract_eval(x: ShapedArray, *, axes: AxisNames, groups: Groups = None) -> ShapedArray:
        check_dtype(name, x, kinds)
        # (the same on every member of the axes; over groups, only within each: it still varies)
        return x.with_vma(x.vma - frozenset(axes)) if groups is None else x

    @prim.def_rule("lowering")
    def _lowering(ctx: LoweringContext, x: str, *, axes: AxisNames, groups: Groups = None) -> list[str]:
        mesh = _axis_context(ctx, name, axes)
        region = _combiner_region(ctx, ctx.aval_out.dtype, hlo_op(ctx.aval_out.dtype))
        return [ctx.op("stablehlo.all_reduce", [x], ctx.aval_out, _collective_attrs(mesh, axes, groups=groups),
                       [region])]

    @prim.def_rule("batching")
    def _batching(args: list[Any], dims: list[BatchDim], *, axes: AxisNames, groups: Groups = None
                  ) -> tuple[list[Any], list[BatchDim]]:
        (x,), (d,) = args, dims
        frame, size = current_batching_axis()
        if frame not in axes:
            return [prim.bind(x, axes=axes, **_with_groups(groups))], [d]
        _no_batched_groups(groups)
        y = unbatched(x, size) if d is None else batch_reduce(x, d)
        rest = _rest(frame, axes)
        return [prim.bind(y, axes=rest) if rest else y], [None]

    return prim


psum_p = _all_reduce("psum", NUMERIC_C, lambda dtype: "add",
                     lambda x, d: reduce_sum(x, (d,)), lambda x, size: mul(x, size), checks=NAN_CHECK)
pmax_p = _all_reduce("pmax", ANY, lambda dtype: "or" if dt.is_bool(dtype) else "maximum",
                     lambda x, d: reduce_max(x, (d,)), lambda x, size: x, checks=())
pmin_p = _all_reduce("pmin", ANY, lambda dtype: "and" if dt.is_bool(dtype) else "minimum",
                     lambda x, d: reduce_min(x, (d,)), lambda x, size: x, checks=())

psum_p.def_rule("jvp", linear_jvp(psum_p))


def _spread(ct: Any, x: Any, axes: AxisNames, groups: Groups = None) -> Any:
    """The cotangent of an operand x of an all-reduce over axes, from the cotangent ct of its result, before any
    share of it: along the axes x is typed varying over, the result is one value every member holds, so each member
    gets ct (pcast); along untyped axes (a vmap axis, check_vma=False) the result counts as summed by each member,
    and each member gets the sum of the members' cotangents (psum), as JAX's transposes. Over axis_index_groups the
    result varies (from group to group): each member gets the sum of its group's cotangents."""
    if groups is not None:
        return psum_p.bind(ct, axes=axes, groups=groups)
    vma = aval_of(x).vma
    over = tuple(a for a in axes if a in vma)
    rest = tuple(a for a in axes if a not in vma)
    if over:
        ct = pvary_p.bind(ct, axes=over)
    return psum_p.bind(ct, axes=rest) if rest else ct


@psum_p.def_rule("vjp")
def _psum_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, axes: AxisNames,
              groups: Groups = None) -> list[Any]:
    return [None if cts[0] is None else _spread(cts[0], ins[0], axes, groups)]


def _chooser_rules(prim: Primitive) -> None:
    """pmax/pmin's derivative: the tangent averaged over the members holding the extreme value (the members where
    x equals the result), as reduce_max's, so that it agrees with JAX's derivative of the same function under
    vmap."""
    def share(x: Any, out: Any, axes: AxisNames, groups: Groups) -> tuple[Any, Any]:
        mask = convert_element_type(eq(x, out), aval_of(x).dtype)
        return mask, psum_p.bind(mask, axes=axes, **_with_groups(groups))

    def jvp(primals: list[Any], tangents: list[Any], *, axes: AxisNames, groups: Groups = None
            ) -> tuple[list[Any], list[Any]]:
        out = prim.bind(primals[0], axes=axes, **_with_groups(groups))
        if tangents[0] is None:
            return [out], [None]
        mask, count = share(primals[0], out, axes, groups)
        return [out], [div(psum_p.bind(mul(tangents[0], mask), axes=axes, **_with_groups(groups)), count)]

    def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, axes: AxisNames,
            groups: Groups = None) -> list[Any]:
        if cts[0] is None or not needs[0]:
            return [None]
        mask, count = share(ins[0], outs[0], axes, groups)
        return [div(mul(mask, _spread(cts[0], ins[0], axes, groups)), count)]

    prim.def_rule("jvp", jvp)
    prim.def_rule("vjp", vjp)


_chooser_rules(pmax_p)
_chooser_rules(pmin_p)


def _split_positional(api: str, axis_name: Any) -> tuple[AxisNames, tuple[int, ...]]:
    """JAX's reductions take positional (int) axes among the names: (named axes, positional axes)."""
    names = _axis_names(api, axis_name)
    return (tuple(a for a in names if isinstance(a, str) or not isinstance(a, int)),
            tuple(a for a in names if isinstance(a, int) and not isinstance(a, bool)))


def _reduce_leaves(api: str, prim: Primitive, positional: Callable[[Any, tuple[int, ...]], Any], x: Any,
                   axis_name: Any, axis_index_groups: Any, constant: Callable[[Any, int], Any]) -> Any:
    named, pos = _split_positional(api, axis_name)
    size = axes_size(named)  # NameError for a name not bound
    if axis_index_groups is not None and pos:
        raise ValueError(f"{api}: axis_index_groups only supported for sums over just named axes")
    groups = _index_groups(api, axis_index_groups, size, equal=False)

    def one(leaf: Any) -> Any:
        if pos:
            leaf = positional(leaf, tuple(normalize_axis(api, a, aval_of(leaf).ndim) for a in pos))
        if not named:
            return leaf
        if not isinstance(leaf, Tracer):  # a value known while staging is equal on every member, as JAX's
            if groups is not None and len({len(g) for g in groups}) > 1:
                raise ValueError(f"{api}: a constant reduced over axis_index_groups of different sizes")
            return constant(leaf, size if groups is None else len(groups[0]))
        if prim is psum_p:
            _one_state(api, leaf, named)
        return prim.bind(_varying(leaf, named), axes=named, **_with_groups(groups))
    return tree_map(one, x)


def _bool_to_int(x: Any) -> Any:
    return convert_element_type(x, np.int32) if not is_python_scalar(x) and dt.is_bool(aval_of(x).dtype) else x


def _times(x: Any, size: int) -> Any:
    return x * size if is_python_scalar(x) else mul(x, size)


def psum(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """The sum of x over the members of the named axes (a name or a tuple of names), on every member (like
    jax.lax.psum); x may be a pytree. Booleans are summed as int32. A value known while staging (a Python number)
    gives size * x, as JAX's. axis_index_groups (lists of member indices along the axes, covering each once) sums
    within each group; inside a shard_map body the result then still varies over the axes (JAX refuses groups with
    check_vma=True)."""
    x = tree_map(_bool_to_int, x)
    return _reduce_leaves("psum", psum_p, reduce_sum, x, axis_name, axis_index_groups, _times)


def pmax(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """The maximum of x over the members of the named axes, on every member (like jax.lax.pmax)."""
    return _reduce_leaves("pmax", pmax_p, reduce_max, x, axis_name, axis_index_groups, lambda v, n: v)


def pmin(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """The minimum of x over the members of the named axes, on every member (like jax.lax.pmin)."""
    return _reduce_leaves("pmin", pmin_p, reduce_min, x, axis_name, axis_index_groups, lambda v, n: v)


def pmean(x: Any, axis_name: Any, *, axis_index_groups: Any = None) -> Any:
    """The mean of x over the members of the named axes (like jax.lax.pmean); with axis_index_groups, over the
    members of each group (which must be the same size)."""
    total = psum(x, axis_name, axis_index_groups=axis_index_groups)
    n = axis_size(axis_name)
    if axis_index_groups is not None:
        n = len(_index_groups("pmean", axis_index_groups, n, equal=True)[0])
    return tree_map(lambda v: v / n, total)  # (true division, as JAX's: integers give floats)


def axis_size(axis_name: Any) -> int:
    """The number of members of the named axes together, a Python int (like jax.lax.axis_size)."""
    named, _ = _split_positional("axis_size", axis_name)
    return axes_size(named)


# ---------------------------------------------------------------------------------------------------------------
# all_gather(x, axes, axis, tiled, axis_size): every member's x, stacked along a new dimension `axis` (or
# concatenated along dimension `axis` when tiled), on every member.
all_gather_p = over_named_axes(Primitive("all_gather", own_vma=True, checks=()))


@all_gather_p.def_rule("abstract_eval")
def _all_gather_abstract_eval(x: ShapedArray, *, axes: AxisNames, axis: int, tiled: bool, axis_size: int,
                              groups: Groups = None) -> ShapedArray:
    shape = list(x.shape)
    if tiled:
        shape[axis] *= axis_size
    else:
        shape.insert(axis, axis_size)
    return x.update(shape=tuple(shape), weak_type=False)


@all_gather_p.def_rule("lowering")
def _all_gather_lowering(ctx: LoweringContext, x: str, *, axes: AxisNames, axis: int, tiled: bool,
                         axis_size: int, groups: Groups = None) -> list[str]:
    mesh = _axis_context(ctx, "all_gather", axes)
    x_aval = ctx.avals_in[0]
    if not tiled:  # a dimension of 1 where the members' values will be stacked
        shape = x_aval.shape[:axis] + (1,) + x_aval.shape[axis:]
        x = ctx.op("stablehlo.reshape", [x], x_aval.update(shape=shape))
    attrs = {"all_gather_dim": f"{axis} : i64", **_collective_attrs(mesh, axes, groups=groups)}
    return [ctx.op("stablehlo.all_gather", [x], ctx.aval_out, attrs)]


all_gather_p.def_rule("jvp", linear_jvp(all_gather_p))


@all_gather_p.def_rule("vjp")
def _all_gather_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, axes: AxisNames,
                    axis: int, tiled: bool, axis_size: int, groups: Groups = None) -> list[Any]:
    if cts[0] is None:
        return [None]
    return [reduce_scatter_p.bind(cts[0], axes=axes, scatter_dimension=axis, tiled=tiled, axis_size=axis_size,
                                  **_with_groups(groups))]


def _gather_batching(prim: Primitive, args: list[Any], dims: list[BatchDim], *, axes: AxisNames, axis: int,
                     tiled: bool, axis_size: int, groups: Groups = None) -> tuple[list[Any], list[BatchDim]]:
    (x,), (d,) = args, dims
    frame, size = current_batching_axis()
    if frame not in axes:
        if d is None:
            return [prim.bind(x, axes=axes, axis=axis, tiled=tiled, axis_size=axis_size, **_with_groups(groups))], \
                [None]
        if d <= axis:
            axis += 1
        elif not tiled:
            d += 1
        return [prim.bind(x, axes=axes, axis=axis, tiled=tiled, axis_size=axis_size, **_with_groups(groups))], [d]
    _no_batched_groups(groups)
    if len(axes) > 1:
        raise NotImplementedError(f"all_gather over the axes {axes} under vmap of one of them ({frame!r}): gather "
                                  "over one axis at a time")
    if d is None:  # every member holds x: the gathered value is x stacked size times
        shape = aval_of(x).shape
        y = broadcast_in_dim(x, shape[:axis] + (size,) + shape[axis:],
                             tuple(i for i in range(len(shape) + 1) if i != axis))
    else:
        y = moveaxis(x, d, axis)
    if tiled:
        shape = aval_of(y).shape
        y = reshape(y, shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2:])
    return [y], [None]


all_gather_p.def_rule("batching", lambda args, dims, **params: _gather_batching(all_gather_p, args, dims, **params))


def all_gather(x: Any, axis_name: Any, *, axis_index_groups: Any = None, axis: int = 0, tiled: bool = False,
               to: str = "varying") -> Any:
    """Every member's x, stacked along a new dimension at `axis` (concatenated along dimension `axis` when tiled),
    on every member (like jax.lax.all_gather); x may be a pytree. to="varying" (JAX's default) types the result as
    varying over the axes, to="invarying" as the same on every member (its transpose is a slice, not a
    psum_scatter)."""
    if to not in ("varying", "invarying", "reduced"):
        raise ValueError(f"Got unexpected `to` value for `ember.lax.all_gather`: {to!r}. Allowed `to` values are: "
                         "{'varying', 'invarying', 'reduced'}")
    if to == "reduced":
        raise NotImplementedError("all_gather(to='reduced'): ember has no reduced values; use to='varying' or "
                                  "to='invarying'")
    axes, size, groups = _named_axes("all_gather", axis_name, axis_index_groups)
    if to == "invarying" and groups is not None:
        raise NotImplementedError("all_gather(to='invarying') with axis_index_groups: the result varies from group to "
                                  "group; use to='varying'")
    prim = all_gather_p if to == "varying" else all_gather_invariant_p

    def one(leaf: Any) -> Any:
        ndim = aval_of(leaf).ndim
        where = normalize_axis("all_gather: axis", axis, ndim if tiled else ndim + 1)
        return prim.bind(_varying(leaf, axes), axes=axes, axis=where, tiled=bool(tiled), axis_size=size,
                         **_with_groups(groups))
    return tree_map(one, x)


# all_gather_invariant(x, axes, axis, tiled, axis_size): all_gather's values, typed as the same on every member of
# the axes (JAX's all_gather(to='invarying')); its transpose takes each member's block of the cotangent.
all_gather_invariant_p = over_named_axes(Primitive("all_gather_invariant", own_vma=True, checks=()))


@all_gather_invariant_p.def_rule("abstract_eval")
def _all_gather_invariant_abstract_eval(x: ShapedArray, *, axes: AxisNames, axis: int, tiled: bool,
                                        axis_size: int) -> ShapedArray:
    out = _all_gather_abstract_eval(x, axes=axes, axis=axis, tiled=tiled, axis_size=axis_size)
    return out.with_vma(x.vma - frozenset(axes))


all_gather_invariant_p.def_rule("lowering", _all_gather_lowering)
all_gather_invariant_p.def_rule("jvp", linear_jvp(all_gather_invariant_p))


@all_gather_invariant_p.def_rule("vjp")
def _all_gather_invariant_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                              axes: AxisNames, axis: int, tiled: bool, axis_size: int) -> list[Any]:
    if cts[0] is None:
        return [None]
    block = aval_of(ins[0]).shape[axis] if tiled else 1
    ct = _varying_over(cts[0], ins[0], axes)
    start = mul(_axis_index(axes, typed_axes=axes), np.int32(block))
    mine = dynamic_slice_in_dim(ct, start, block, axis)
    return [mine if tiled else squeeze(mine, (axis,))]


all_gather_invariant_p.def_rule("batching", lambda args, dims, **params: _gather_batching(
    all_gather_invariant_p, args, dims, **params))


def _varying_over(ct: Any, x: Any, axes: AxisNames) -> Any:
    """ct cast to vary over the axes among `axes` that x varies over (the cotangent of x, one value per member)."""
    over = tuple(a for a in axes if a in aval_of(x).vma and a not in aval_of(ct).vma)
    return pvary_p.bind(ct, axes=over) if over else ct


# ---------------------------------------------------------------------------------------------------------------
# psum_scatter (primitive reduce_scatter, as JAX's) (x, axes, scatter_dimension, tiled, axis_size): psum(x), of
# which member k keeps block k along scatter_dimension (that dimension's size must equal the axis size, and is
# removed, unless tiled: then it must be divisible by it and shrinks).
reduce_scatter_p = over_named_axes(Primitive("reduce_scatter", own_vma=True, checks=()))


@reduce_scatter_p.def_rule("abstract_eval")
def _reduce_scatter_abstract_eval(x: ShapedArray, *, axes: AxisNames, scatter_dimension: int, tiled: bool,
                                  axis_size: int, groups: Groups = None) -> ShapedArray:
    check_dtype("psum_scatter", x, NUMERIC_C)
    shape = list(x.shape)
    n = shape[scatter_dimension]
    if tiled:
        shape = list(block_shape(x.shape, _along(x.ndim, scatter_dimension, axis_size), lambda *_: (
            f"psum_scatter: with tiled=True, dimension {scatter_dimension} of the operand {x.str_short()} must be "
            f"divisible by the size {axis_size} of the axes {axes}")))
    else:
        if n != axis_size:
            raise ValueError(f"psum_scatter: dimension {scatter_dimension} of the operand {x.str_short()} must equal "
                             f"the size {axis_size} of the axes {axes} (or pass tiled=True)")
        del shape[scatter_dimension]
    return x.update(shape=tuple(shape), weak_type=False)


@reduce_scatter_p.def_rule("lowering")
def _reduce_scatter_lowering(ctx: LoweringContext, x: str, *, axes: AxisNames, scatter_dimension: int, tiled: bool,
                             axis_size: int, groups: Groups = None) -> list[str]:
    mesh = _axis_context(ctx, "psum_scatter", axes)
    x_aval = ctx.avals_in[0]
    shape = list(x_aval.shape)
    shape[scatter_dimension] //= axis_size
    region = _combiner_region(ctx, x_aval.dtype, "add")
    attrs = {"scatter_dimension": f"{scatter_dimension} : i64", **_collective_attrs(mesh, axes, groups=groups)}
    out = ctx.op("stablehlo.reduce_scatter", [x], x_aval.update(shape=tuple(shape)), attrs, [region])
    return [out if tiled else ctx.op("stablehlo.reshape", [out], ctx.aval_out)]


reduce_scatter_p.def_rule("jvp", linear_jvp(reduce_scatter_p))


@reduce_scatter_p.def_rule("vjp")
def _reduce_scatter_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, axes: AxisNames,
                        scatter_dimension: int, tiled: bool, axis_size: int, groups: Groups = None) -> list[Any]:
    if cts[0] is None:
        return [None]
    return [all_gather_p.bind(cts[0], axes=axes, axis=scatter_dimension, tiled=tiled, axis_size=axis_size,
                              **_with_groups(groups))]


@reduce_scatter_p.def_rule("batching")
def _reduce_scatter_batching(args: list[Any], dims: list[BatchDim], *, axes: AxisNames, scatter_dimension: int,
                             tiled: bool, axis_size: int, groups: Groups = None) -> tuple[list[Any], list[BatchDim]]:
    (x,), (d,) = args, dims
    params = dict(axes=axes, tiled=tiled, axis_size=axis_size, **_with_groups(groups))
    frame, size = current_batching_axis()
    if frame not in axes:
        if d is None:
            return [reduce_scatter_p.bind(x, scatter_dimension=scatter_dimension, **params)], [None]
        if d <= scatter_dimension:
            scatter_dimension += 1
        elif not tiled:
            d -= 1
        return [reduce_scatter_p.bind(x, scatter_dimension=scatter_dimension, **params)], [d]
    _no_batched_groups(groups)
    if len(axes) > 1:
        raise NotImplementedError(f"psum_scatter over the axes {axes} under vmap of one of them ({frame!r}): "
                                  "scatter over one axis at a time")
    y = mul(x, size) if d is None else reduce_sum(x, (d,))
    if tiled:  # member k keeps the k-th block: the blocks become the batch dimension
        shape = aval_of(y).shape
        n = shape[scatter_dimension]
        y = reshape(y, shape[:scatter_dimension] + (size, n // size) + shape[scatter_dimension + 1:])
    return [y], [scatter_dimension]


def psum_scatter(x: Any, axis_name: Any, *, scatter_dimension: int = 0, axis_index_groups: Any = None,
                 tiled: bool = False) -> Any:
    """psum(x, axis_name), of which member k keeps block k along scatter_dimension (like jax.lax.psum_scatter);
    without tiled that dimension's size must equal the axis size and is removed."""
    axes, size, groups = _named_axes("psum_scatter", axis_name, axis_index_groups)

    def one(leaf: Any) -> Any:
        where = normalize_axis("psum_scatter: scatter_dimension", scatter_dimension, aval_of(leaf).ndim)
        _one_state("psum_scatter", leaf, axes)
        return reduce_scatter_p.bind(_varying(leaf, axes), axes=axes, scatter_dimension=where, tiled=bool(tiled),
                                     axis_size=size, **_with_groups(groups))
    return tree_map(one, x)


# ---------------------------------------------------------------------------------------------------------------
# all_to_all(x, axes, split_axis, concat_axis, axis_size): x's dimension split_axis cut into axis_size blocks;
# member k receives block k of every member, concatenated along concat_axis in member order. (The primitive is
# JAX's tiled form; all_to_all's untiled form adds and removes a dimension around it, as JAX's.)
all_to_all_p = over_named_axes(Primitive("all_to_all", own_vma=True, checks=()))


@all_to_all_p.def_rule("abstract_eval")
def _all_to_all_abstract_eval(x: ShapedArray, *, axes: AxisNames, split_axis: int, concat_axis: int,
                              axis_size: int, groups: Groups = None) -> ShapedArray:
    shape = list(block_shape(x.shape, _along(x.ndim, split_axis, axis_size), lambda *_: (
        f"all_to_all: dimension split_axis={split_axis} of the operand {x.str_short()} must be divisible by the size "
        f"{axis_size} of the axes {axes}")))
    shape[concat_axis] *= axis_size
    return x.update(shape=tuple(shape), weak_type=False)


@all_to_all_p.def_rule("lowering")
def _all_to_all_lowering(ctx: LoweringContext, x: str, *, axes: AxisNames, split_axis: int, concat_axis: int,
                         axis_size: int, groups: Groups = None) -> list[str]:
    mesh = _axis_context(ctx, "all_to_all", axes)
    attrs = {"split_dimension": f"{split_axis} : i64", "concat_dimension": f"{concat_axis} : i64",
             "split_count": f"{axis_size} : i64", **_collective_attrs(mesh, axes, global_ids=False, groups=groups)}
    return [ctx.op("stablehlo.all_to_all", [x], ctx.aval_out, attrs)]


all_to_all_p.def_rule("jvp", linear_jvp(all_to_all_p))


@all_to_all_p.def_rule("vjp")
def _all_to_all_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, axes: AxisNames,
                    split_axis: int, concat_axis: int, axis_size: int, groups: Groups = None) -> list[Any]:
    if cts[0] is None:
        return [None]
    return [all_to_all_p.bind(cts[0], axes=axes, split_axis=concat_axis, concat_axis=split_axis,
                              axis_size=axis_size, **_with_groups(groups))]


@all_to_all_p.def_rule("batching")
def _all_to_all_batching(args: list[Any], dims: list[BatchDim], *, axes: AxisNames, split_axis: int,
                         concat_axis: int, axis_size: int, groups: Groups = None) -> tuple[list[Any], list[BatchDim]]:
    (x,), (d,) = args, dims
    frame, size = current_batching_axis()
    if frame not in axes:
        if d is None:
            return [all_to_all_p.bind(x, axes=axes, split_axis=split_axis, concat_axis=concat_axis,
                                      axis_size=axis_size, **_with_groups(groups))], [None]
        return [all_to_all_p.bind(x, axes=axes, split_axis=split_axis + (d <= split_axis),
                                  concat_axis=concat_axis + (d <= concat_axis), axis_size=axis_size,
                                  **_with_groups(groups))], [d]
    _no_batched_groups(groups)
    if len(axes) > 1:
        raise NotImplementedError(f"all_to_all over the axes {axes} under vmap of one of them ({frame!r}): "
                                  "exchange over one axis at a time")
    # members j at the front; the split dimension cut into (k, rest); member k of the result takes block k of every
    # member j, with j major in its concat dimension
    xs = batch_at_front(x, d, size)
    member = aval_of(xs).shape[1:]
    blocks = member[:split_axis] + (size, member[split_axis] // size) + member[split_axis + 1:]
    xs = reshape(xs, (size,) + blocks)

    def position(i: int) -> int:  # where member dimension i (its rest, for split_axis) sits in xs
        return i + 1 if i < split_axis else i + 2
    order = [split_axis + 1]
    for i in range(len(member)):
        order += [0, position(i)] if i == concat_axis else [position(i)]
    out = list(member)
    out[split_axis] //= size
    out[concat_axis] *= size
    return [reshape(transpose(xs, order), (size,) + tuple(out))], [0]


def all_to_all(x: Any, axis_name: Any, split_axis: int, concat_axis: int, *, axis_index_groups: Any = None,
               tiled: bool = False) -> Any:
    """Split x's dimension split_axis into the axis size's blocks, send block k to member k, and concatenate
    (tiled) or stack (untiled: a new dimension at concat_axis, split_axis removed) the received blocks along
    concat_axis in member order (like jax.lax.all_to_all)."""
    axes, size, groups = _named_axes("all_to_all", axis_name, axis_index_groups)

    def one(leaf: Any) -> Any:
        aval = aval_of(leaf)
        split = normalize_axis("all_to_all: split_axis", split_axis, aval.ndim)
        concat = normalize_axis("all_to_all: concat_axis", concat_axis, aval.ndim)
        n = aval.shape[split]
        if tiled and not divides(size, n):
            raise ValueError(f"all_to_all: the size of split_axis ({n}) of {aval.str_short()} has to be divisible "
                             f"by the size of the named axis {axis_name} ({size})")
        if not tiled and n != size:
            raise ValueError(f"all_to_all requires the size of the mapped axis axis_name to equal "
                             f"x.shape[split_axis], but they are {size} and {n} respectively ({aval.str_short()})")
        if not tiled and split < concat:
            concat += 1
            leaf = expand_dims(leaf, (concat,))
        elif not tiled and concat < split:
            leaf = expand_dims(leaf, (concat,))
            split += 1
        out = all_to_all_p.bind(_varying(leaf, axes), axes=axes, split_axis=split, concat_axis=concat, axis_size=size,
                                **_with_groups(groups))
        return squeeze(out, (split,)) if not tiled and split != concat else out
    return tree_map(one, x)


# ---------------------------------------------------------------------------------------------------------------
# ragged_all_to_all(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes; axes, axis_size): the
# K = axis_size * s slices operand[input_offsets[i]:][:send_sizes[i]] go to member i // s, which writes them into its
# output at the offsets output_offsets[i] gave there (its own recv_sizes saying how much each is); the rest of its
# output stays. (jaxlib's CPU cannot compile JAX's: it is built here from all_to_all, see the module docstring.)
ragged_all_to_all_p = over_named_axes(Primitive("ragged_all_to_all", own_vma=True, checks=()))
_RAGGED_INDEX_ARGS = ("input_offsets", "send_sizes", "output_offsets", "recv_sizes")


@ragged_all_to_all_p.def_rule("abstract_eval")
def _ragged_all_to_all_abstract_eval(operand: ShapedArray, output: ShapedArray, *offsets_and_sizes: ShapedArray,
                                     axes: AxisNames, axis_size: int, groups: Groups = None) -> ShapedArray:
    for name, aval in zip(_RAGGED_INDEX_ARGS, offsets_and_sizes):
        if not dt.is_int(aval.dtype):
            raise ValueError(f"ragged_all_to_all {name} must be integer type.")
        if aval.ndim != 1 or aval.shape[0] < 1:
            raise ValueError(f"ragged_all_to_all {name} must be rank 1 with positive dimension size, but got shape "
                             f"{aval.shape}")
    lengths = {a.shape[0] for a in offsets_and_sizes}
    if len(lengths) > 1:
        raise ValueError("ragged_all_to_all: input_offsets, send_sizes, output_offsets and recv_sizes must have the "
                         f"same length, got {', '.join(a.str_short() for a in offsets_and_sizes)}")
    if lengths.pop() % axis_size:
        raise ValueError(f"ragged_all_to_all: the number of slices ({offsets_and_sizes[0].shape[0]}) must be a "
                         f"multiple of the size {axis_size} of the axes {axes}")
    if operand.ndim < 1 or output.ndim < 1 or operand.shape[1:] != output.shape[1:] or operand.dtype != output.dtype:
        raise TypeError(f"ragged_all_to_all: operand and output must be arrays of one dtype whose shapes differ in "
                        f"their first dimension only, got {operand.str_short()} and {output.str_short()}")
    vma = frozenset().union(operand.vma, output.vma, *(a.vma for a in offsets_and_sizes))
    return output.update(weak_type=False).with_vma(vma)


def _rows_of(x: Any, index: Any) -> Any:
    """x[p, index[p, i]] for x [P, R, ...] and int32 index [P, I] (in bounds): [P, I, ...]."""
    xs, ids = aval_of(x).shape, aval_of(index).shape
    dnums = GatherDimensionNumbers(offset_dims=tuple(range(2, len(xs))), collapsed_slice_dims=(1,),
                                   start_index_map=(1,), operand_batching_dims=(0,), start_indices_batching_dims=(0,))
    return gather_p.bind(x, reshape(index, ids + (1,)), dimension_numbers=dnums, slice_sizes=(1, 1) + xs[2:],
                         indices_are_sorted=False, unique_indices=False)


def _last_covering(starts: Any, sizes: Any, rows: int) -> Any:
    """For starts and sizes [P, J] (int32): per row r < rows the last j with starts[j] <= r < starts[j] + sizes[j],
    or -1: [P, rows]."""
    p, j = aval_of(starts).shape
    shape = (p, j, rows)
    r = broadcast_in_dim(iota(np.int32, rows), shape, (2,))
    lo = broadcast_in_dim(starts, shape, (0, 1))
    cover = bitwise_and(le(lo, r), lt(r, add(lo, broadcast_in_dim(sizes, shape, (0, 1)))))
    which = select(cover, broadcast_in_dim(iota(np.int32, j), shape, (1,)), full(shape, -1, np.int32))
    return reduce_max(which, (1,))


def _ragged_pack(operand: Any, input_offsets: Any, send_sizes: Any, output_offsets: Any, members: int, rows: int
                 ) -> Any:
    """What each sender ([P] of them: operand [P, N, ...], the offsets and sizes [P, K]) writes into each member's
    output: [P, members, rows, ...], member d's block holding at row r the last of d's slices covering r (else 0)."""
    p, n = aval_of(operand).shape[:2]
    rest = aval_of(operand).shape[2:]
    each = aval_of(input_offsets).shape[1] // members
    io, ss, oo = (reshape(convert_element_type(a, np.int32), (p * members, each))
                  for a in (input_offsets, send_sizes, output_offsets))
    last = reshape(_last_covering(oo, ss, rows), (p, members, rows))
    slot = add(broadcast_in_dim(mul(iota(np.int32, members), full((members,), each, np.int32)), (p, members, rows),
                                (1,)), max_(last, full((p, members, rows), 0, np.int32)))
    flat = (p, members * rows)
    slot = reshape(slot, flat)
    io, oo = (reshape(a, (p, members * each)) for a in (io, oo))
    row = reshape(broadcast_in_dim(iota(np.int32, rows), (p, members, rows), (2,)), flat)
    source = add(_rows_of(io, slot), sub(row, _rows_of(oo, slot)))  # (the operand row written at that row)
    ok = bitwise_and(ge(reshape(last, flat), full(flat, 0, np.int32)),
                     bitwise_and(ge(source, full(flat, 0, np.int32)), lt(source, full(flat, n, np.int32))))
    out_shape = (p, members, rows) + rest
    if n == 0:  # (nothing to send)
        return full(out_shape, 0, aval_of(operand).dtype)
    data = _rows_of(operand, min_(max_(source, full(flat, 0, np.int32)), full(flat, n - 1, np.int32)))
    data = select(broadcast_in_dim(ok, flat + rest, (0, 1)), data, full(flat + rest, 0, aval_of(operand).dtype))
    return reshape(data, out_shape)


def _ragged_unpack(output: Any, received: Any, output_offsets: Any, recv_sizes: Any) -> Any:
    """Each receiver's output ([P, M, ...]) with the rows its slices cover taken from the blocks received from their
    senders ([P, members, M, ...]; output_offsets, the senders' offsets here, and recv_sizes [P, K])."""
    p, members, rows = aval_of(received).shape[:3]
    rest = aval_of(received).shape[3:]
    each = aval_of(output_offsets).shape[1] // members
    last = _last_covering(convert_element_type(output_offsets, np.int32), convert_element_type(recv_sizes, np.int32),
                          rows)
    sender = div(max_(last, full((p, rows), 0, np.int32)), full((p, rows), each, np.int32))
    at = add(mul(sender, full((p, rows), rows, np.int32)), broadcast_in_dim(iota(np.int32, rows), (p, rows), (1,)))
    taken = _rows_of(reshape(received, (p, members * rows) + rest), at)
    written = broadcast_in_dim(ge(last, full((p, rows), 0, np.int32)), (p, rows) + rest, (0, 1))
    return select(written, taken, output)


@ragged_all_to_all_p.def_rule("lowering")
def _ragged_all_to_all_lowering(ctx: LoweringContext, operand: str, output: str, input_offsets: str, send_sizes: str,
                                output_offsets: str, recv_sizes: str, *, axes: AxisNames, axis_size: int,
                                groups: Groups = None) -> list[str]:
    mesh = _axis_context(ctx, "ragged_all_to_all", axes)
    avals = [ShapedArray(a.shape, a.dtype) for a in ctx.avals_in]
    rows = avals[1].shape[0]
    if rows == 0:  # (no row to write)
        return [output]

    def pack(x: Any, io: Any, ss: Any, oo: Any) -> list[Any]:
        one = lambda a: reshape(a, (1,) + aval_of(a).shape)  # noqa: E731
        return [reshape(_ragged_pack(one(x), one(io), one(ss), one(oo), axis_size, rows),
                        (axis_size, rows) + aval_of(x).shape[1:])]
    ir = stage_flat(pack, [avals[0], avals[2], avals[3], avals[4]])
    blocks = lower_into(ctx.emitter, ir, [operand, input_offsets, send_sizes, output_offsets])[0]

    def exchange(value: str, aval: ShapedArray) -> str:  # (the tiled all_to_all along dimension 0)
        attrs = {"split_dimension": "0 : i64", "concat_dimension": "0 : i64", "split_count": f"{axis_size} : i64",
                 **_collective_attrs(mesh, axes, global_ids=False, groups=groups)}
        return ctx.op("stablehlo.all_to_all", [value], aval, attrs)
    received = exchange(blocks, ir.out_avals[0])
    offsets_here = exchange(output_offsets, avals[4])

    def unpack(out: Any, got: Any, oo: Any, rs: Any) -> list[Any]:
        one = lambda a: reshape(a, (1,) + aval_of(a).shape)  # noqa: E731
        return [reshape(_ragged_unpack(one(out), one(got), one(oo), one(rs)), aval_of(out).shape)]
    ir = stage_flat(unpack, [avals[1], ShapedArray(ir.out_avals[0].shape, ir.out_avals[0].dtype), avals[4], avals[5]])
    return lower_into(ctx.emitter, ir, [output, received, offsets_here, recv_sizes])


def _bind_ragged(operand: Any, output: Any, *offsets_and_sizes: Any, axes: AxisNames, axis_size: int,
                 groups: Groups = None) -> Any:
    return ragged_all_to_all_p.bind(_varying(operand, axes), _varying(output, axes), *offsets_and_sizes, axes=axes,
                                    axis_size=axis_size, **_with_groups(groups))


@ragged_all_to_all_p.def_rule("jvp")
def _ragged_all_to_all_jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any
                           ) -> tuple[list[Any], list[Any]]:
    """Linear in (operand, output) together (JAX's rule): the tangents go the same way."""
    out = _bind_ragged(*primals, **params)
    t_operand, t_output = tangents[:2]
    if t_operand is None and t_output is None:
        return [out], [None]
    t_operand = zeros_like(primals[0]) if t_operand is None else t_operand
    t_output = zeros_like(primals[1]) if t_output is None else t_output
    return [out], [_bind_ragged(t_operand, t_output, *primals[2:], **params)]


@ragged_all_to_all_p.def_rule("vjp")
def _ragged_all_to_all_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, axes: AxisNames,
                           axis_size: int, groups: Groups = None) -> list[Any]:
    """JAX's transpose: the operand's cotangent comes back from the rows each slice was written to (a
    ragged_all_to_all the other way: each receiver sends the cotangents of its slices to their senders, at their
    input offsets); the output's is the cotangent where no slice was written."""
    ct = cts[0]
    operand, output, input_offsets, send_sizes, output_offsets, recv_sizes = ins
    if ct is None:
        return [None] * 6
    params = dict(axes=axes, axis_size=axis_size, groups=groups)

    def exchanged(x: Any) -> Any:
        return all_to_all_p.bind(_varying(x, axes), axes=axes, split_axis=0, concat_axis=0, axis_size=axis_size,
                                 **_with_groups(groups))
    offsets_here = exchanged(output_offsets)
    d_operand = d_output = None
    if needs[0]:
        d_operand = _bind_ragged(ct, zeros_like(operand), offsets_here, recv_sizes, exchanged(input_offsets),
                                 send_sizes, **params)
    if needs[1]:
        rows = aval_of(ct).shape[0]
        one = lambda a: reshape(convert_element_type(a, np.int32), (1,) + aval_of(a).shape)  # noqa: E731
        written = ge(reshape(_last_covering(one(offsets_here), one(recv_sizes), rows), (rows,)),
                     full((rows,), 0, np.int32))
        d_output = select(broadcast_in_dim(written, aval_of(ct).shape, (0,)), zeros_like(ct), ct)
    return [d_operand, d_output, None, None, None, None]


@ragged_all_to_all_p.def_rule("batching")
def _ragged_all_to_all_batching(args: list[Any], dims: list[BatchDim], *, axes: AxisNames, axis_size: int,
                                groups: Groups = None) -> tuple[list[Any], list[BatchDim]]:
    """Under a vmap of another axis (JAX's rule): the members' operands and outputs laid end to end, their offsets
    moved along by their positions there, one exchange. Under vmap of the named axis itself (which JAX refuses):
    the exchange computed over the batch, each member's blocks for the others transposed into theirs."""
    frame, size = current_batching_axis()
    operand, output = (batch_at_front(x, d, size) for x, d in zip(args[:2], dims[:2]))
    index_args = [batch_at_front(x, d, size) for x, d in zip(args[2:], dims[2:])]  # [B, K] each
    if frame in axes:
        _no_batched_groups(groups)
        if len(axes) > 1:
            raise NotImplementedError(f"ragged_all_to_all over the axes {axes} under vmap of one of them "
                                      f"({frame!r}): exchange over one axis at a time")
        io, ss, oo, rs = index_args
        rows = aval_of(output).shape[1]
        blocks = _ragged_pack(operand, io, ss, oo, size, rows)                     # [sender, receiver, M, ...]
        order = (1, 0) + tuple(range(2, aval_of(blocks).ndim))
        k = aval_of(oo).shape[1]
        offsets_here = reshape(transpose(reshape(oo, (size, size, k // size)), (1, 0, 2)), (size, k))
        return [_ragged_unpack(output, transpose(blocks, order), offsets_here, rs)], [0]
    if all(d is None for d in dims):
        return [_bind_ragged(*args, axes=axes, axis_size=axis_size, groups=groups)], [None]
    n, m = aval_of(operand).shape[1], aval_of(output).shape[1]
    k = aval_of(index_args[0]).shape[1]

    def moved(x: Any, stride: int) -> Any:  # [B, K] -> [K * B], member b's offsets moved by b * stride
        x = transpose(x, (1, 0))
        if stride:
            dtype = aval_of(x).dtype
            x = add(x, broadcast_in_dim(mul(iota(dtype, size), full((size,), stride, dtype)), (k, size), (1,)))
        return reshape(x, (k * size,))
    io, ss, oo, rs = (moved(x, stride) for x, stride in zip(index_args, (n, 0, m, 0)))
    merged = _bind_ragged(reshape(operand, (size * n,) + aval_of(operand).shape[2:]),
                          reshape(output, (size * m,) + aval_of(output).shape[2:]), io, ss, oo, rs, axes=axes,
                          axis_size=axis_size, groups=groups)
    return [reshape(merged, aval_of(output).shape)], [0]


def ragged_all_to_all(operand: Any, output: Any, input_offsets: Any, send_sizes: Any, output_offsets: Any,
                      recv_sizes: Any, *, axis_name: Any, axis_index_groups: Any = None) -> Any:
    """The ragged all_to_all (like jax.lax.ragged_all_to_all): the slices operand[input_offsets[i]:][:send_sizes[i]]
    go to member i // (K / axis size), which writes them into a copy of its output at output_offsets[i] (recv_sizes
    rows each, its own sizes of what it receives); returns that copy. Works on the CPU, where jaxlib's cannot
    compile (XLA:CPU has no ragged-all-to-all): ember's is built from all_to_all."""
    if not bound_axes():  # (JAX's error outside any mapped context; an unbound name inside one is a NameError)
        raise RuntimeError("ragged_all_to_all must be used within a mapped context like vmap or shard_map.")
    axes, size, groups = _named_axes("ragged_all_to_all", axis_name, axis_index_groups)
    return _bind_ragged(operand, output, input_offsets, send_sizes, output_offsets, recv_sizes, axes=axes,
                        axis_size=size, groups=groups)


def pswapaxes(x: Any, axis_name: Any, axis: int, *, axis_index_groups: Any = None) -> Any:
    """all_to_all(x, axis_name, axis, axis): swap the named axis with x's dimension axis (like jax.lax.pswapaxes)."""
    return all_to_all(x, axis_name, axis, axis, axis_index_groups=axis_index_groups)


# ---------------------------------------------------------------------------------------------------------------
# ppermute(x, axes, perm): member dst receives the x of member src for each pair (src, dst) of perm (indices along
# the axes); members no pair sends to receive zeros.
ppermute_p = over_named_axes(Primitive("ppermute", own_vma=True, checks=()))


@ppermute_p.def_rule("abstract_eval")
def _ppermute_abstract_eval(x: ShapedArray, *, axes: AxisNames, perm: tuple[tuple[int, int], ...]) -> ShapedArray:
    return x


@ppermute_p.def_rule("lowering")
def _ppermute_lowering(ctx: LoweringContext, x: str, *, axes: AxisNames,
                       perm: tuple[tuple[int, int], ...]) -> list[str]:
    mesh = _axis_context(ctx, "ppermute", axes)
    groups = mesh.groups(axes)
    n = len(groups[0])
    for src, dst in perm:
        if not (0 <= src < n and 0 <= dst < n):
            raise LoweringError(f"ppermute: the pair {(src, dst)} of perm is out of range for the axes {axes} of size "
                                f"{n}")
    pairs = [[group[src], group[dst]] for group in groups for src, dst in perm]
    if not pairs:  # nothing is sent: every member receives zeros
        return [ctx.constant(0, ctx.aval_out)]
    attrs = {"source_target_pairs": _groups_attr(pairs),
             "channel_handle": f"#stablehlo.channel_handle<handle = {mesh.next_channel()}, type = 1>"}
    return [ctx.op("stablehlo.collective_permute", [x], ctx.aval_out, attrs)]


ppermute_p.def_rule("jvp", linear_jvp(ppermute_p))


@ppermute_p.def_rule("vjp")
def _ppermute_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, axes: AxisNames,
                  perm: tuple[tuple[int, int], ...]) -> list[Any]:
    if cts[0] is None:
        return [None]
    return [ppermute_p.bind(cts[0], axes=axes, perm=tuple((dst, src) for src, dst in perm))]


@ppermute_p.def_rule("batching")
def _ppermute_batching(args: list[Any], dims: list[BatchDim], *, axes: AxisNames,
                       perm: tuple[tuple[int, int], ...]) -> tuple[list[Any], list[BatchDim]]:
    (x,), (d,) = args, dims
    frame, size = current_batching_axis()
    if frame not in axes:
        return [ppermute_p.bind(x, axes=axes, perm=perm)], [d]
    if len(axes) > 1:
        raise NotImplementedError(f"ppermute over the axes {axes} under vmap of one of them ({frame!r}): permute "
                                  "over one axis at a time")
    sources = dict((dst, src) for src, dst in perm)
    if d is None and len(sources) == size:  # every member receives the same value
        return [x], [None]
    xs = batch_at_front(x, d, size)
    if len(sources) < size:  # the members no pair sends to read a row of zeros
        aval = aval_of(xs)
        xs = concatenate([xs, zeros(aval.update(shape=(1,) + aval.shape[1:]))], 0)
    index = np.array([sources.get(k, size) for k in range(size)], np.int32)
    return [index_take(xs, [index], [0])], [0]


def ppermute(x: Any, axis_name: Any, perm: Sequence[tuple[int, int]]) -> Any:
    """Member dst receives member src's x for each pair (src, dst) in perm, indices along the named axes; members no
    pair sends to receive zeros (like jax.lax.ppermute); x may be a pytree."""
    axes, size, _ = _named_axes("ppermute", axis_name)
    try:
        pairs = tuple((int(src), int(dst)) for src, dst in perm)
    except (TypeError, ValueError):
        raise TypeError(f"ppermute: perm must be a sequence of (source, destination) index pairs, got {perm!r}") \
            from None
    for src, dst in pairs:
        if not (0 <= src < size and 0 <= dst < size):
            raise ValueError(f"ppermute: the pair {(src, dst)} of perm is out of range for the axes {axes} of size "
                             f"{size}")
    srcs, dsts = [p[0] for p in pairs], [p[1] for p in pairs]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        raise ValueError(f"ppermute sources and destinations must be unique, got {perm}")
    return tree_map(lambda leaf: ppermute_p.bind(_varying(leaf, axes), axes=axes, perm=pairs), x)


def pshuffle(x: Any, axis_name: Any, perm: Sequence[int]) -> Any:
    """Member i receives member perm[i]'s x (like jax.lax.pshuffle): ppermute with the pairs (perm[i], i)."""
    if sorted(perm) != list(range(len(perm))):
        raise ValueError(f"pshuffle: perm must be a permutation of range({len(perm)}), got {perm}")
    return ppermute(x, axis_name, [(src, dst) for dst, src in enumerate(perm)])


# ---------------------------------------------------------------------------------------------------------------
# psend / precv: one-sided send and receive along a named axis (JAX's Send and Recv HLO, with a token ordering them),
# which JAX implements on GPUs only: on the CPU its lowering raises NotImplementedError. ember raises the same, when
# called (after JAX's check of the axis name): use ppermute, which sends and receives at once.
_P2P_ON_GPU_ONLY = ("is currently only implemented on GPU (JAX lowers it to XLA's Send/Recv for GPUs only, and "
                    "ember does not implement it); use lax.ppermute, which sends and receives in one collective")


def psend(x: Any, axis_name: Any, perm: Sequence[tuple[int, int]]) -> Any:
    """JAX's one-sided send along a named axis (jax.lax.psend), GPU-only in JAX: NotImplementedError (a
    NameError, as JAX's, outside a shard_map binding the axis)."""
    axes = _axis_names("psend", axis_name)
    for name in axes:
        if name not in bound_axes():
            raise NameError(f"Found an unbound axis name: {name}. To fix this, please call psend under "
                            "`ember.shard_map`.")
    raise NotImplementedError(f"psend {_P2P_ON_GPU_ONLY}")


def precv(token: Any, out_shape: Any, axis_name: Any, perm: Sequence[tuple[int, int]]) -> Any:
    """JAX's one-sided receive along a named axis (jax.lax.precv), GPU-only in JAX: NotImplementedError."""
    _axis_names("precv", axis_name)
    raise NotImplementedError(f"precv {_P2P_ON_GPU_ONLY}")


# ---------------------------------------------------------------------------------------------------------------
# axis_index(axes=(name,), typed): this member's index along the named axis, an int32 scalar; typed: the axis is a
# typed mesh axis (ember._core.vma), along which the index varies (an operation without operands cannot tell).
axis_index_p = over_named_axes(Primitive("axis_index", own_vma=True, checks=()))


@axis_index_p.def_rule("abstract_eval")
def _axis_index_abstract_eval(*, axes: AxisNames, typed: bool) -> ShapedArray:
    return ShapedArray((), np.dtype(np.int32), vma=frozenset(axes) if typed else frozenset())


@axis_index_p.def_rule("lowering")
def _axis_index_lowering(ctx: LoweringContext, *, axes: AxisNames, typed: bool) -> list[str]:
    # partition_id, then a constant table: partition id -> the position of its partition along the axis
    mesh = _axis_context(ctx, "axis_index", axes)
    groups = mesh.groups(axes)
    table = np.zeros(int(np.max(mesh.partition_ids)) + 1, np.int32)
    for group in groups:
        for k, pid in enumerate(group):
            table[pid] = k
    n = len(table)
    u32, i32 = ShapedArray((), np.dtype(np.uint32)), ShapedArray((), np.dtype(np.int32))
    pid = ctx.op("stablehlo.partition_id", [], u32)
    start = ctx.op("stablehlo.convert", [pid], i32)
    values = ctx.op("stablehlo.constant", [], ShapedArray((n,), np.dtype(np.int32)),
                    {"value": f"dense<[{', '.join(str(int(v)) for v in table)}]> : tensor<{n}xi32>"})
    one = ShapedArray((1,), np.dtype(np.int32))
    picked = ctx.op("stablehlo.dynamic_slice", [values, start], one, {"slice_sizes": "array<i64: 1>"})
    return [ctx.op("stablehlo.reshape", [picked], i32)]


# An integer with no operands: its output carries no derivative. Said with rules giving a zero tangent (rather than
# the NOT_DIFFERENTIABLE mark, whose harness check lowers the equation alone, outside any mesh).
axis_index_p.def_rule("jvp", lambda primals, tangents, **params: ([axis_index_p.bind(**params)], [None]))
axis_index_p.def_rule("vjp", lambda cts, ins, outs, needs, **params: [])


@axis_index_p.def_rule("batching")
def _axis_index_batching(args: list[Any], dims: list[BatchDim], *, axes: AxisNames, typed: bool
                         ) -> tuple[list[Any], list[BatchDim]]:
    frame, size = current_batching_axis()
    if frame not in axes:
        return [axis_index_p.bind(axes=axes, typed=typed)], [None]
    return [iota(np.int32, size)], [0]


def _axis_index(axes: AxisNames, typed_axes: AxisNames) -> Any:
    """The index along axes (row-major, the first slowest), typed as varying over those of typed_axes."""
    index: Any = None
    inner = 1
    for name in reversed(axes):
        size = _bound_axis_size(name)
        term = axis_index_p.bind(axes=(name,), typed=name in typed_axes)
        term = term if inner == 1 else mul(term, np.int32(inner))
        index = term if index is None else add(index, term)
        inner *= size
    return index if index is not None else np.int32(0)


def axis_index(axis_name: Any) -> Any:
    """This member's index along the named axis, an int32 scalar; over several names, the index in their
    row-major product, the first name slowest (like jax.lax.axis_index). Inside a shard_map body it varies over
    the axes (typeof(i).vma)."""
    axes = _axis_names("axis_index", axis_name)
    return _axis_index(axes, typed(axes))


def pbroadcast(x: Any, axis_name: Any, source: int) -> Any:
    """Every member receives member `source`'s x (like jax.lax.pbroadcast): psum of x kept only at the source."""
    axes, size, _ = _named_axes("pbroadcast", axis_name)
    if isinstance(source, bool) or not isinstance(source, int | np.integer) or not 0 <= source < size:
        raise ValueError(f"pbroadcast: source must be an int in [0, {size}) for the axes {axes}, got {source!r}")
    at_source = eq(axis_index(axes), np.int32(source))

    def one(leaf: Any) -> Any:
        kept = select(broadcast_in_dim(at_source, aval_of(leaf).shape, ()), leaf, zeros_like(leaf))
        return _varying(psum(kept, axes), axes)  # (typed as varying, as JAX's pbroadcast)
    return tree_map(one, x)


def pcast(x: Any, axis_name: Any, *, to: str) -> Any:
    """x typed as varying over the named axes (to='varying'; like jax.lax.pcast): inside a shard_map body, a value
    the same on every device along them becomes one that may differ, which no data movement changes; its transpose
    is a psum (so the gradient of a value used by every device sums their contributions). x may be a pytree. Inside
    a body with check_vma=False (and over a vmap axis) there are no such types and x is returned as it is."""
    if isinstance(axis_name, set | frozenset):
        raise TypeError(f"axis_name={axis_name!r} must be a tuple or a str. Got {axis_name}")
    if to not in ("varying", "unreduced", "reduced"):
        raise ValueError("Got unexpected `to` value. Allowed `to` values are: {'unreduced', 'reduced', 'varying'}")
    axes = _axis_names("pcast", axis_name)
    if not axes:
        return x
    axes_size(axes)  # (NameError for an unbound name)
    if to != "varying":
        raise NotImplementedError(f"pcast(to={to!r}): ember has no {to} values; pcast casts to 'varying'")

    def one(leaf: Any) -> Any:
        vma = aval_of(leaf).vma
        if any(a in vma for a in axes):
            raise ValueError(f"Unsupported pcast from=varying, to='varying': {aval_of(leaf).str_short()} already "
                             f"varies over {[a for a in axes if a in vma]}")
        over = typed(axes)
        return pvary_p.bind(leaf, axes=ordered_axes(over)) if over else leaf
    return tree_map(one, x)


# pcast's rules (the primitive itself is ember._core.vma's: staging inserts it): no data moves; linear; its
# transpose sums the cotangents of the devices along the axes (psum), the gradient of a value every device used.
pvary_p.def_rule("lowering", lambda ctx, x, *, axes: [x])
pvary_p.def_rule("jvp", linear_jvp(pvary_p))


@pvary_p.def_rule("vjp")
def _pcast_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, axes: AxisNames) -> list[Any]:
    # (over the axes the operand did vary over already, the cast is the identity, and so is its transpose: a
    # program typed again on more varying inputs keeps its casts, ember._control.common.retyped)
    summed = tuple(a for a in axes if a not in aval_of(ins[0]).vma)
    return [None if cts[0] is None else psum_p.bind(cts[0], axes=summed) if summed else cts[0]]



pvary_p.def_rule("batching", lambda args, dims, *, axes: ([pvary_p.bind(args[0], axes=axes)], list(dims)))


__all__ = ["all_gather", "all_to_all", "axis_index", "axis_size", "pbroadcast", "pcast", "pmax", "pmean", "pmin",
           "ppermute", "precv", "psend", "pshuffle", "psum", "psum_scatter", "pswapaxes", "ragged_all_to_all"]
