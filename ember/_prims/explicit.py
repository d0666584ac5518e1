"""Sharding rules: how each primitive types its results' explicit shardings (JAX's sharding in types, "explicit
sharding mode": ShapedArray.explicit). A rule gets the operands' avals (at least one with an explicit sharding)
and the equation's params, and gives each result's sharding over the same mesh, or raises ShardingTypeError with
JAX 0.10.2's words where the result's sharding would be ambiguous or illegal (an `out_sharding=` param, present only
when the user gave one, decides it instead of the rule, where JAX takes one; a rule's None is "replicated over the
operands' mesh"). The families of rules here are registered beside each
primitive (`prim.def_rule("sharding_rule", ...)`); a primitive without one computes on replicated operands only
(ember._core.primitive.Primitive._explicit_outs)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember._core.dtypes import ShapedArray, ShardingTypeError
from ember._core.sharding import (AbstractMesh, NamedSharding, PartitionSpec, Sharding, current_mesh, divides,
                                  explicit_sharding, repeated_axes, size_of_axes, spec_axes)

Rule = Callable[..., Any]


def mesh_of(avals: Sequence[ShapedArray]) -> Any:
    """The mesh of the operands' explicit shardings (the primitive checked they share one)."""
    for a in avals:
        if a.explicit is not None:
            return a.explicit.mesh
    raise AssertionError("a sharding rule runs on operands of which one has an explicit sharding")


def spec_of(aval: ShapedArray) -> tuple[Any, ...]:
    """The entries of aval's explicit sharding, one per dimension (all None when it has none)."""
    return tuple(aval.explicit.spec) if aval.explicit is not None else (None,) * aval.ndim


typed = explicit_sharding  # (the explicit sharding over mesh with these entries, one per dimension)


def _check_distinct(name: str, entries: Sequence[Any], avals: Sequence[ShapedArray], shape: Sequence[int],
                    dtype: Any) -> None:
    """JAX's error for a result (of this shape and dtype) that would be split over one mesh axis twice."""
    if repeated_axes(spec_axes(entries)):
        result = ShapedArray(shape, dtype).update(explicit=_unchecked(mesh_of(avals), entries))
        raise ShardingTypeError(f"{name} operation with inputs: {', '.join(a.str_short() for a in avals)} produces an "
                                f"illegally sharded result: {result.str_short()}")


def broadcasting(name: str) -> Rule:
    """Elementwise operands (rank-0 ones broadcast): each dimension split as the operands that split it agree."""
    def rule(*avals: ShapedArray, **params: Any) -> Any:
        mesh = mesh_of(avals)
        ndim = max(a.ndim for a in avals)
        out: list[Any] = [None] * ndim
        specs = [spec_of(a) for a in avals if a.ndim == ndim]
        for spec in specs:
            for i, entry in enumerate(spec):
                if entry is None:
                    continue
                if out[i] is None:
                    out[i] = entry
                elif out[i] != entry:
                    raise ShardingTypeError(f"{name} got incompatible shardings for broadcasting: "
                                            f"{', '.join(map(str, specs))}.")
        widest = next(a for a in avals if a.ndim == ndim)
        _check_distinct(name, out, avals, widest.shape, widest.dtype)
        return typed(mesh, out)
    return rule


def same_as(operand: int = 0) -> Rule:
    """The result is split as operand `operand` is (pad, rev, dynamic_update_slice, ...)."""
    def rule(*avals: ShapedArray, **params: Any) -> Any:
        return typed(mesh_of(avals), spec_of(avals[operand]))
    return rule


def reduction(x: ShapedArray, *, axes: Sequence[int], **params: Any) -> Any:
    """A reduction over axes: those dimensions are gone (summed across the devices splitting them, by XLA)."""
    gone = {a % max(x.ndim, 1) for a in axes}
    return typed(x.explicit.mesh, [e for i, e in enumerate(spec_of(x)) if i not in gone])


def unsplit_axis(what: str, x: ShapedArray, axis: int) -> None:
    """JAX's error for a scan along (cumsum) or a sort of a split dimension."""
    if spec_of(x)[axis] is not None:
        if what == "sort":
            raise ShardingTypeError(f"Arguments to sort must be unsharded over the sorting dimension. Got arg sharding="
                                    f"{x.sharding} and sorting dimension={axis}")
        raise ShardingTypeError(f"Input should be unsharded over the axis being reduced. Got input type="
                                f"{x} and axis={axis}")


def gather_error(operand: ShapedArray, indices: Any) -> ShardingTypeError:
    """JAX's error for indexing a split array (indices: their type, or its text)."""
    return ShardingTypeError("Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for the gather "
                             "indexing as out sharding could not be resolved unambiguously (or would require "
                             f"collectives on inputs). Got operand=ShapedArray({operand}), "
                             f"indices=ShapedArray({indices})")


def split_dims(x: ShapedArray) -> list[int]:
    return [i for i, e in enumerate(spec_of(x)) if e is not None]


def broadcast_in_dim(x: ShapedArray, *, shape: Sequence[int], broadcast_dimensions: Sequence[int],
                     **params: Any) -> Any:
    """Operand dimension i becomes dimension broadcast_dimensions[i] (split alike where it keeps its size); the new
    dimensions are not split."""
    out: list[Any] = [None] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        if x.shape[i] == shape[d]:
            out[d] = spec_of(x)[i]
    return typed(x.explicit.mesh, out)


def transpose(x: ShapedArray, *, permutation: Sequence[int]) -> Any:
    spec = spec_of(x)
    return typed(x.explicit.mesh, [spec[p] for p in permutation])


def reshape(x: ShapedArray, *, new_sizes: Sequence[int], **params: Any) -> Any:
    """JAX's reshape rule: dimensions kept, size-1 dimensions added or removed, a dimension split into several (its
    axes go to the first, which their sizes must divide) or several merged into one (the merged dimension is split
    over their axes in order); anything else asks for `out_sharding=`."""
    spec, mesh = spec_of(x), x.explicit.mesh
    sizes = mesh.shape
    old = [(n, e) for n, e in zip(x.shape, spec) if n != 1]
    new_dims = [i for i, n in enumerate(new_sizes) if n != 1]
    out: list[Any] = [None] * len(new_sizes)
    error = ShardingTypeError(f"This reshape is not supported. Please specify the sharding of the output via the "
                              f"`out_sharding` argument of ember.lax.reshape. Got operand type: {x}, new "
                              f"sizes: {tuple(new_sizes)}")
    if any(e is not None for n, e in zip(x.shape, spec) if n == 1):
        raise error
    i = j = 0
    while i < len(old) and j < len(new_dims):
        a, b = [old[i]], [new_dims[j]]
        size_a, size_b = old[i][0], new_sizes[new_dims[j]]
        while size_a != size_b:
            if size_a < size_b:
                i += 1
                a.append(old[i])
                size_a *= old[i][0]
            else:
                j += 1
                b.append(new_dims[j])
                size_b *= new_sizes[new_dims[j]]
        i, j = i + 1, j + 1
        axes = spec_axes(e for _, e in a)
        if not axes:
            continue
        if len(a) == 1:  # one dimension split into several: its axes split the first
            if not divides(size_of_axes(sizes, axes), new_sizes[b[0]]):
                raise error
            out[b[0]] = tuple(axes)
        elif len(b) == 1:  # several merged into one
            out[b[0]] = tuple(axes)
        else:
            raise error
    return typed(mesh, out)


def dot_general(lhs: ShapedArray, rhs: ShapedArray, *, dimension_numbers: Any, **params: Any) -> Any:
    """JAX's dot_general rule: batch dimensions split alike; contracting dimensions split on both sides make the
    result's sharding ambiguous (`out_sharding=` decides it; split on one side, XLA gathers or reduces as needed);
    the free dimensions keep their axes, each axis used once."""
    (lc, rc), (lb, rb) = dimension_numbers
    mesh = mesh_of([lhs, rhs])
    ls, rs = spec_of(lhs), spec_of(rhs)
    l_contract, r_contract = tuple(ls[d] for d in lc), tuple(rs[d] for d in rc)
    for a, b in zip(l_contract, r_contract):
        if a is not None and b is not None and a != b:
            raise ShardingTypeError(f"dot_general requires contracting dimensions to have consistent sharding, got "
                                    f"{l_contract} and {r_contract}.")
    if any(a is not None and b is not None for a, b in zip(l_contract, r_contract)):
        raise ShardingTypeError("Contracting dimensions are sharded and it is ambiguous how the output should be "
                                "sharded. Please specify the output sharding via the `out_sharding` parameter. Got "
                                f"lhs_contracting_spec={l_contract} and rhs_contracting_spec={r_contract}")
    batch = []
    for a, b in zip(lb, rb):
        if ls[a] is not None and rs[b] is not None and ls[a] != rs[b]:
            raise ShardingTypeError(f"dot_general requires lhs batch dimensions and rhs batch dimensions to have the "
                                    f"consistent sharding, got {tuple(ls[d] for d in lb)} and "
                                    f"{tuple(rs[d] for d in rb)}.")
        batch.append(ls[a] if ls[a] is not None else rs[b])
    l_free = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
    r_free = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    out = batch + [ls[d] for d in l_free] + [rs[d] for d in r_free]
    _check_distinct("dot_general", out, [lhs, rhs],
                    [lhs.shape[d] for d in lb] + [lhs.shape[d] for d in l_free] + [rhs.shape[d] for d in r_free],
                    lhs.dtype)
    return typed(mesh, out)


class _unchecked:  # noqa: N801 (an explicit sharding for printing an illegal type: NamedSharding would refuse it)
    def __init__(self, mesh: Any, entries: Sequence[Any]):
        self.mesh, self.spec = mesh, tuple(entries)


def concatenate(*xs: ShapedArray, dimension: int) -> Any:
    """Every operand split alike (JAX's error otherwise); the result is split as they are."""
    shardings = [x.explicit for x in xs if x.explicit is not None]  # (an operand of no mesh may be laid out so)
    if any(s != shardings[0] for s in shardings):
        raise ShardingTypeError("All operands should have the same sharding. Got shardings "
                                f"{', '.join(str(x.sharding) for x in xs if x.explicit is not None)}")
    return shardings[0]


def slicing(x: ShapedArray, *, start_indices: Sequence[int], limit_indices: Sequence[int],
            strides: Sequence[int] | None = None, **params: Any) -> Any:
    """A slice keeps the dimensions it takes whole; slicing a split dimension asks for `out_sharding=`."""
    for d in split_dims(x):
        if start_indices[d] != 0 or limit_indices[d] != x.shape[d] or (strides and strides[d] != 1):
            raise gather_error(x, "int32[1]")
    return x.explicit


def dynamic_slice(operand: ShapedArray, *starts: ShapedArray, slice_sizes: Sequence[int], **params: Any) -> Any:
    for d in split_dims(operand):
        if slice_sizes[d] != operand.shape[d]:
            raise gather_error(operand, f"int32[{len(starts)}]")
    if any(s.explicit is not None and any(e is not None for e in s.explicit.spec) for s in starts):
        raise gather_error(operand, f"int32[{len(starts)}]")
    return typed(mesh_of([operand, *starts]), spec_of(operand))


def gather(operand: ShapedArray, indices: ShapedArray, **params: Any) -> Any:
    """A gather of replicated operands is replicated; an operand or indices split anywhere asks for
    `out_sharding=` (JAX's rule for indexing)."""
    if split_dims(operand) or split_dims(indices):
        raise gather_error(operand, indices)
    return None


def split(x: ShapedArray, *, sizes: Sequence[int], axis: int) -> Any:
    if spec_of(x)[axis] is not None:
        raise ShardingTypeError(f"split on sharded dims is not allowed. Got operand type: {x} and "
                                f"axis={axis}")
    return [x.explicit] * len(sizes)


def sort(*operands: ShapedArray, dimension: int, **params: Any) -> Any:
    for x in operands:
        unsplit_axis("sort", x, dimension)
    return [typed(mesh_of(operands), spec_of(operands[0]))] * len(operands)


def top_k(x: ShapedArray, **params: Any) -> Any:
    """top_k's values and indices: as its operand, whose last axis it reads whole."""
    unsplit_axis("top_k", x, x.ndim - 1)
    return [typed(mesh_of([x]), spec_of(x))] * 2


def cumulative(x: ShapedArray, *, axis: int, **params: Any) -> Any:
    unsplit_axis("cumulative", x, axis)
    return x.explicit


def general_reduce(*avals: ShapedArray, dimensions: Sequence[int], **params: Any) -> Any:
    """lax.reduce of n operands and their n initial values: each result as reduction's."""
    n = len(avals) // 2
    for init in avals[n:]:
        if split_dims(init):
            raise ShardingTypeError(f"reduce: the initial values must be replicated, got {init}")
    mesh = mesh_of(avals)
    gone = set(dimensions)
    return [typed(mesh, [e for i, e in enumerate(spec_of(x)) if i not in gone]) for x in avals[:n]]


def bitcast(x: ShapedArray, *, new_dtype: Any) -> Any:
    """A bitcast between dtypes of one width keeps the sharding; one that adds or drops the last dimension keeps
    the others' (the bits of one element are never split)."""
    spec = list(spec_of(x))
    old, new = x.dtype.itemsize, np.dtype(new_dtype).itemsize
    if old > new:
        spec.append(None)
    elif old < new:
        if spec[-1] is not None:
            raise ShardingTypeError(f"bitcast_convert_type: the last dimension of {x} holds the parts of "
                                    f"one element and must not be split")
        spec.pop()
    return typed(x.explicit.mesh, spec)


def windowed(name: str, layout: int = 0) -> Rule:
    """A window reduction (reduce_window_*, select_and_*): the result is split as operand `layout` is, which may stay
    split on a dimension whose window is one element with stride one and no padding or dilation; the other operands
    are replicated or split as that one is."""
    def rule(*avals: ShapedArray, window_dimensions: Sequence[int], window_strides: Sequence[int],
             padding: Sequence[Sequence[int]], **params: Any) -> Any:
        x = avals[layout]
        dilations = [params.get("base_dilation") or (1,) * x.ndim, params.get("window_dilation") or (1,) * x.ndim]
        for d in split_dims(x):
            if (window_dimensions[d], window_strides[d], tuple(padding[d]), dilations[0][d], dilations[1][d]) != \
                    (1, 1, (0, 0), 1, 1):
                raise ShardingTypeError(f"{name}: the window spans dimension {d} of {x}, which is split; "
                                        "reshard it to None there first")
        for o in avals:
            if split_dims(o) and spec_of(o) != spec_of(x):
                raise ShardingTypeError(f"{name}: operands split differently: "
                                        f"{', '.join(map(str, avals))}")
        return typed(mesh_of(avals), spec_of(x))
    return rule


def batch_only(name: str, core: int | Sequence[int]) -> Rule:
    """A primitive on the last `core` dimensions of its operands (a matrix factorization; one count per operand
    where they differ: a matrix and a vector of scale factors): the dimensions before them (a batch) keep their
    splits, the core ones must not be split; each result is split over the same batch dimensions (results get the
    outputs' avals: see Primitive._explicit_outs)."""
    def rule(*avals: ShapedArray, outs: Sequence[ShapedArray], **params: Any) -> Any:
        cores = [core] * len(avals) if isinstance(core, int) else list(core)
        first = avals[0]
        batch = list(spec_of(first))[:first.ndim - cores[0]]
        for a, k in zip(avals, cores):
            if any(e is not None for e in spec_of(a)[a.ndim - k:]):
                raise ShardingTypeError(f"{name}: the last {k} dimensions of {a} must not be split (it "
                                        "computes on them whole); reshard them to None first")
            if list(spec_of(a))[:a.ndim - k] not in (batch, [None] * (a.ndim - k)):
                raise ShardingTypeError(f"{name}: operands split differently over their batch dimensions: "
                                        f"{', '.join(map(str, avals))}")
        mesh = mesh_of(avals)
        return [typed(mesh, batch[:o.ndim] + [None] * (o.ndim - len(batch[:o.ndim]))) for o in outs]
    rule.wants_outs = True  # type: ignore[attr-defined]
    return rule


def replicated_results(*avals: ShapedArray, outs: Sequence[ShapedArray], **params: Any) -> Any:
    """Results that are the same everywhere, whatever the operands' splits (a host callback: its operands are
    gathered where it runs, its results replicated)."""
    return [None] * len(outs)


replicated_results.wants_outs = True  # type: ignore[attr-defined]


def scatter(operand: ShapedArray, indices: ShapedArray, updates: ShapedArray, **params: Any) -> Any:
    """A scatter writes into the operand as it is split; the indices and updates must be replicated (JAX asks
    for `out_sharding=` there too)."""
    if split_dims(indices) or split_dims(updates):
        raise ShardingTypeError(f"scatter: the indices {indices} and updates {updates} must "
                                "be replicated (reshard them to P()) or run it in ember.sharding.auto_axes")
    return typed(mesh_of([operand, indices, updates]), spec_of(operand))


def conv(lhs: ShapedArray, rhs: ShapedArray, *, dimension_numbers: Any, batch_group_count: int = 1,
         **params: Any) -> Any:
    """A convolution splits its result's batch dimension as lhs's batch dimension is (data parallelism); lhs's
    feature and spatial dimensions and the kernel must not be split (a windowed contraction over them)."""
    ls, _, out_spec = dimension_numbers
    lhs_spec = spec_of(lhs)
    if split_dims(rhs) or any(lhs_spec[d] is not None for d in ls[1:]) or \
            (batch_group_count > 1 and lhs_spec[ls[0]] is not None):
        raise ShardingTypeError(f"conv_general_dilated: only lhs's batch dimension may be split, got lhs "
                                f"{lhs} and rhs {rhs}; reshard the others to None or run it in "
                                "ember.sharding.auto_axes")
    out: list[Any] = [None] * len(out_spec)
    out[out_spec[0]] = lhs_spec[ls[0]]
    return typed(mesh_of([lhs, rhs]), out)


class NoMeshError(ValueError, RuntimeError):
    """A PartitionSpec given where no mesh is set: JAX's RuntimeError (a ValueError too, as ember raised it)."""


def resolve(api: str, value: Any, what: str = "out_sharding") -> Any:
    """A user's sharding argument (a Sharding, or a PartitionSpec over the current mesh; None) as a Sharding."""
    if isinstance(value, NamedSharding) and isinstance(value.mesh, AbstractMesh):
        # (a type's sharding, typeof(x).sharding: over the empty mesh it names no placement, as in JAX; else the
        # current mesh is the one it abstracts)
        if value.mesh.empty:
            return None
        mesh = current_mesh()
        if mesh is None or mesh.abstract_mesh.shape_tuple != value.mesh.shape_tuple:
            raise ValueError(f"{api}: {what} {value} is over an AbstractMesh; call inside `with "
                             "ember.sharding.set_mesh(mesh):` of a mesh of its shape, or pass NamedSharding(mesh, "
                             "spec)")
        return NamedSharding(mesh, value.spec)
    if value is None or isinstance(value, Sharding):
        return value
    if isinstance(value, PartitionSpec):
        mesh = current_mesh()
        if mesh is None:
            raise NoMeshError(f"{api} requires a non-empty mesh in context if you are passing `PartitionSpec`s to "
                              f"{what} (got {value}). You can define a context mesh via "
                              "`ember.sharding.set_mesh(mesh)`. Alternatively, provide `Sharding`s to "
                              f"{what} and then the mesh context manager is not required.")
        return NamedSharding(mesh, value)
    raise TypeError(f"{api}: {what} must be a Sharding or a PartitionSpec, got {value!r} of type "
                    f"{type(value).__name__}")


def batched(sharding: Any, d: int | None, ndim: int, spmd: tuple[str, ...] | None = None) -> Any:
    """The sharding of an array of rank ndim laid out by sharding, batched at dimension d (not split there, or split
    over the mesh axes spmd: vmap's spmd_axis_name); None when it cannot be said (a sharding that is not a
    NamedSharding), sharding itself when d is None."""
    if sharding is None or d is None:
        return sharding
    if not isinstance(sharding, NamedSharding):
        return None
    spec = tuple(sharding.spec) + (None,) * (ndim - len(sharding.spec))
    entry = None
    if spmd is not None:
        unknown = [a for a in spmd if a not in sharding.mesh.axis_names]
        used = set(spec_axes(spec)) & set(spmd)
        if unknown or used:
            raise ValueError(f"spmd_axis_name {spmd} (vmap's) must name mesh axes {sharding.mesh.axis_names} that the "
                             f"sharding {sharding.spec} inside does not use already")
        entry = spmd[0] if len(spmd) == 1 else spmd
    return NamedSharding(sharding.mesh, PartitionSpec(*spec[:d], entry, *spec[d:]))


__all__: list[str] = []
