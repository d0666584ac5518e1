"""vmap: vectorizing a function (or a staged IR) along an axis of its arguments, as an IR -> IR batching pass.

The function is staged out once per signature at the per-member (unbatched) shapes, the batching pass turns the
IR into one over the whole batch, and the result is compiled (cached) or inlined into an enclosing trace."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from ember._api.caches import cache_for
from ember._api.staging import (broadcast_prefix, fun_name, is_array_leaf, leaf_avals, leaf_names, stage_with_aux,
                                with_outputs, wraps)
from ember._api.templates import transform_once
from ember._core import IR, ShapedArray, eval_ir, stage_flat
from ember._core.axes import axis_frame, bound_axes
from ember._core.checks import normalize_axis
from ember._core.pytree import PyTreeDef, prefix_entries, tree_flatten, tree_structure
from ember._core.sharding import without_dim
from ember._prims.shape import broadcast_in_dim, iota, moveaxis, reduce_sum, squeeze
from ember._prims.slicing import slice_in_dim
from ember._transforms.batching import batch_ir

Axis = int | None


def _check_axis_spec(api: str, what: str, spec: Any) -> None:
    for leaf in tree_flatten(spec, is_leaf=lambda x: x is None)[0]:
        if type(leaf) in SPEC_TYPES:  # (a registered container type's spec: its to_elt/from_elt reads it)
            continue
        if leaf is not None and (isinstance(leaf, bool) or not isinstance(leaf, int)):
            raise TypeError(f"{api}: {what} must contain only ints and None, got {leaf!r} in {spec!r}")


def _normalize(api: str, axis: Axis, ndim: int, where: str) -> Axis:
    return None if axis is None else normalize_axis(f"{api}: {where}", axis, ndim)


def _unbatched(aval: ShapedArray, axis: Axis) -> ShapedArray:
    if axis is None:
        return aval
    return without_dim(aval, axis)


def _batch_size(api: str, avals: Sequence[ShapedArray], axes: Sequence[Axis], names: Sequence[str],
                axis_size: int | None) -> int:
    sizes = {(name, a.str_short(), ax): a.shape[ax] for name, a, ax in zip(names, avals, axes) if ax is not None}
    distinct = set(sizes.values()) | ({axis_size} if axis_size is not None else set())
    if len(distinct) > 1:
        lines = "\n".join(f"  * {name} of type {aval} has size {size} along axis {ax}"
                          for (name, aval, ax), size in sizes.items())
        given = f"\n  * axis_size={axis_size}" if axis_size is not None else ""
        raise ValueError(f"{api}: inconsistent sizes for the mapped axes:\n{lines}{given}")
    if not distinct:
        raise ValueError(f"{api}: no argument is mapped (every in_axes entry is None): pass axis_size")
    return distinct.pop()


def _batch_summing_unmatched(ir: IR, in_dims: Sequence[Axis], size: int, out_dims: Sequence[Axis],
                             axis_name: Any, spmd: tuple[str, ...] | None = None) -> IR:
    """ir batched with its outputs along out_dims, except that an output batched where out_dims says None is
    summed over the batch (vmap's sum_match)."""
    _, natural = batch_ir(ir, in_dims, size, axis_name=axis_name, spmd=spmd)
    summed = [want is None and found is not None for want, found in zip(out_dims, natural)]
    bir, _ = batch_ir(ir, in_dims, size, [0 if s else want for s, want in zip(summed, out_dims)], axis_name, spmd)
    if not any(summed):
        return bir

    def summing(*args: Any) -> list[Any]:
        return [reduce_sum(x, (0,)) if s else x for x, s in zip(eval_ir(bir, args), summed)]
    return stage_flat(summing, bir.in_avals)


def vmap(fun: Any, in_axes: Any = 0, out_axes: Any = 0, axis_size: int | None = None, *, axis_name: Any = None,
         spmd_axis_name: Any = None, sum_match: bool = False) -> Any:
    """Vectorize fun over an axis of its arguments (like jax.vmap).

    in_axes and out_axes are ints (negative allowed), None (not mapped), or tree prefixes of the positional
    arguments (a tuple, one entry per argument) and of the outputs; keyword arguments are mapped along axis 0.
    axis_size is needed only when no argument is mapped. With sum_match, an output that is batched where out_axes
    says None is summed over the batch instead of being an error (as jax.vmap's sum_match).

    axis_name names the mapped axis (any hashable) for the collectives inside fun (ember.lax.psum, all_gather,
    axis_index, ...), as jax.vmap's: psum(x, axis_name) sums x over the batch. spmd_axis_name (a mesh axis name
    or a tuple of them, as jax.vmap's) splits the batch dimension over those mesh axes in the sharding constraints
    inside fun (with_sharding_constraint's spec gets them at the batch dimension); a shard_map inside fun is
    refused with it.

    Given a staged IR, returns a new IR whose inputs are mapped along in_axes (an int, None, or one per input) over
    axis_size members and whose outputs are batched along axis 0 (unbatched outputs are broadcast)."""
    spmd = _spmd_axes(spmd_axis_name)
    if axis_name is not None:
        try:
            hash(axis_name)
        except TypeError:
            raise TypeError(f"vmap: axis_name must be hashable, got {axis_name!r}") from None
        if isinstance(axis_name, tuple | list):
            raise TypeError(f"vmap: axis_name must be one name (a collective's axis_name tuple names several axes), "
                            f"got {axis_name!r}")
    if isinstance(fun, IR):
        return _vmap_ir(fun, in_axes, axis_size, axis_name, spmd)
    if not callable(fun):
        raise TypeError(f"vmap: expected a function or an IR, got {type(fun).__name__}")
    name = f"vmap({fun_name(fun)})"
    if isinstance(in_axes, list):  # as JAX: a list of per-argument axes means a tuple
        in_axes = tuple(in_axes)
    _check_axis_spec(name, "in_axes", in_axes)
    _check_axis_spec(name, "out_axes", out_axes)
    if axis_size is not None and (isinstance(axis_size, bool) or not isinstance(axis_size, int) or axis_size < 0):
        raise TypeError(f"{name}: axis_size must be a non-negative int, got {axis_size!r}")
    cache = cache_for(fun, ("vmap", repr(in_axes), repr(out_axes), axis_size, sum_match, axis_name, spmd), name)

    def build(in_tree: PyTreeDef, avals: tuple[ShapedArray, ...], axes: tuple[Axis, ...], size: int,
              static: tuple[tuple[int, Any], ...] = (), full_tree: PyTreeDef | None = None) -> IR:
        unbatched = [_unbatched(a, ax) for a, ax in zip(avals, axes)]
        staged, named_like = fun, None
        if static:  # (the unmapped leaves that are not arrays, passed to fun as they are)
            staged, named_like = _with_static(fun, static, full_tree), fun
        with axis_frame([(axis_name, size)] if axis_name is not None else []):
            ir, store = stage_with_aux(staged, in_tree, unbatched, False, name, named_like=named_like)
        template = store.tree.unflatten([0] * store.tree.num_leaves)
        outs = broadcast_prefix(name, "out_axes", out_axes, template)
        out_dims = [_normalize(name, ax, v.aval.ndim + 1, f"out_axes for output {i}")
                    for i, (ax, v) in enumerate(zip(outs, ir.outs))]

        def transform(staged: IR, lifted: int) -> IR:
            """staged batched, its first `lifted` inputs (constants) unbatched."""
            in_dims = (None,) * lifted + axes
            try:
                bir = (_batch_summing_unmatched(staged, in_dims, size, out_dims, axis_name, spmd) if sum_match else
                       batch_ir(staged, in_dims, size, out_dims, axis_name, spmd)[0])
            except ValueError as err:
                raise ValueError(f"{name}: {err}") from None
            return with_outputs(bir, bir.outs, store.tree)
        return transform_once(("vmap", in_tree, axes, size, tuple(out_dims), store.tree, sum_match, axis_name, spmd),
                              ir, transform)

    @wraps(fun)
    def batched(*args: Any, **kwargs: Any) -> Any:
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise ValueError(f"{name}: in_axes has {len(in_axes)} entries but the function was called with "
                             f"{len(args)} positional arguments; in_axes must be an int, None, or a tuple with "
                             "one entry per positional argument")
        if not VMAPPABLES:  # (no registered container type: arrays alone, the common path)
            return batched_leaves(*args, **kwargs)
        if any(is_vmappable(x) for x in tree_flatten((args, kwargs), is_leaf=is_vmappable)[0]):
            return _vmap_containers(name, fun, in_axes, out_axes, axis_size, axis_name, spmd_axis_name, sum_match,
                                    args, kwargs)
        out = batched_leaves(*args, **kwargs)
        if any(is_vmappable(x) for x in tree_flatten(out, is_leaf=is_vmappable)[0]):
            return _stack_made_containers(name, out, out_axes, args, kwargs, in_axes, axis_size)
        return out

    def batched_leaves(*args: Any, **kwargs: Any) -> Any:
        """vmap over arguments and results that are arrays (and other leaves), no registered container among them."""
        leaves, in_tree = tree_flatten((args, kwargs))
        axes_flat = broadcast_prefix(name, "in_axes", in_axes, args) + [0] * len(tree_flatten(kwargs)[0])
        # As JAX's, an unmapped leaf reaches fun as it is: a Python number or any other object (a function, a
        # functools.partial) is not made an array; it is part of the cache key (by value where it is hashable)
        static = tuple((i, x) for i, (x, ax) in enumerate(zip(leaves, axes_flat))
                       if ax is None and not is_array_leaf(x))
        full_tree = in_tree
        if static:
            skip = {i for i, _ in static}
            leaves = [x for i, x in enumerate(leaves) if i not in skip]
            axes_flat = [ax for i, ax in enumerate(axes_flat) if i not in skip]
            in_tree = tree_structure((tuple(leaves), {}))
            avals = leaf_avals(name, leaves, {}, leaves)
            names = [f"argument leaf {i}" for i in range(len(leaves))]
        else:
            avals = leaf_avals(name, args, kwargs, leaves)
            names = leaf_names(fun, in_tree)
        axes = tuple(_normalize(name, ax, aval.ndim, f"{where} of type {aval.str_short()}")
                     for ax, aval, where in zip(axes_flat, avals, names))
        size = _batch_size(name, avals, axes, names, axis_size)
        env = tuple(bound_axes().items())  # the enclosing axes, which fun's collectives read while it is staged
        if not static:
            return cache.call((in_tree, avals, axes, size, env), leaves, build, in_tree, avals, axes, size)
        key = (in_tree, avals, axes, size, env, full_tree, tuple((i, _StaticKey(x)) for i, x in static))
        return cache.call(key, leaves, build, in_tree, avals, axes, size, static, full_tree)

    return batched


def _stack_made_containers(name: str, out: Any, out_axes: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                           in_axes: Any, axis_size: int | None) -> Any:
    """The outputs of a vmap over arrays alone, where fun made registered containers (a sparse array built from
    its arguments): vmap batched their arrays along out_axes, and from_elt (its cont giving each array as it is)
    rebuilds each as the batched container (as JAX's vmap does for every container it returns)."""
    if axis_size is None:
        mapped = zip(tree_flatten((args, kwargs))[0],
                     broadcast_prefix(name, "in_axes", in_axes, args) + [0] * len(tree_flatten(kwargs)[0]))
        axis_size = next(np.shape(x)[ax] for x, ax in mapped if ax is not None)
    leaves, tree = tree_flatten(out, is_leaf=is_vmappable)
    specs = _specs(name, "out_axes", out_axes, tree)
    return tree.unflatten([VMAPPABLES[type(x)].from_elt(lambda size, part, axis: part, axis_size, x, spec)
                           if is_vmappable(x) else x for x, spec in zip(leaves, specs)])


class _StaticKey:
    """A leaf passed as it is, in a cache key: equal by value where it is hashable, else by identity."""
    __slots__ = ("value", "_hash")

    def __init__(self, value: Any):
        self.value = value
        try:
            self._hash = hash((type(value), value))
        except TypeError:
            self._hash = id(value)
            self.value = _Identity(value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _StaticKey) and type(self.value) is type(other.value) and self.value == other.value

    def __hash__(self) -> int:
        return self._hash


class _Identity:
    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.obj is self.obj


def _with_static(fun: Any, static: tuple[tuple[int, Any], ...], full_tree: PyTreeDef) -> Callable[..., Any]:
    """fun of the array leaves alone, the static ones put back in their places."""
    found = dict(static)

    def staged(*array_leaves: Any) -> Any:
        rest = iter(array_leaves)
        args, kwargs = full_tree.unflatten([found[i] if i in found else next(rest)
                                            for i in range(full_tree.num_leaves)])
        return fun(*args, **kwargs)
    return staged


# ---------------------------------------------------------------------------------------------------------------
# Container types vmap maps over as one value (jax.interpreters.batching.register_vmappable)
@dataclasses.dataclass(frozen=True)
class Vmappable:
    """How vmap maps over a container type (a sparse matrix of several arrays): spec_type is the type of its
    in_axes/out_axes entries, to_elt(cont, get_idx, x, spec) makes one member of x (calling cont(array, axis) for
    each of its arrays, which gives that array's member), from_elt(cont, axis_size, elt, spec) makes the batched
    container from a member's (cont(axis_size, array, axis) gives that array batched at axis); make_iota(size),
    for sizes of axis_size_type, the member indices get_idx gives (else an int32 iota)."""
    spec_type: type
    axis_size_type: type
    to_elt: Callable[..., Any]
    from_elt: Callable[..., Any]
    make_iota: Callable[[Any], Any] | None


VMAPPABLES: dict[type, Vmappable] = {}
SPEC_TYPES: set[type] = set()
MAKE_IOTA: dict[type, Callable[[Any], Any]] = {}


def register_vmappable(data_type: type, spec_type: type, axis_size_type: type, to_elt: Callable[..., Any],
                       from_elt: Callable[..., Any], make_iota: Callable[[Any], Any] | None) -> None:
    """vmap maps over values of data_type as containers (see Vmappable), as JAX's
    batching.register_vmappable."""
    VMAPPABLES[data_type] = Vmappable(spec_type, axis_size_type, to_elt, from_elt, make_iota)
    SPEC_TYPES.add(spec_type)
    if make_iota is not None:
        MAKE_IOTA[axis_size_type] = make_iota


def unregister_vmappable(data_type: type) -> None:
    """vmap no longer maps over data_type as a container (its spec type stays accepted, as JAX's)."""
    VMAPPABLES.pop(data_type, None)


def is_vmappable(x: Any) -> bool:
    return type(x) in VMAPPABLES


class _Leaf:
    """A leaf standing for one of a structure's leaves (a container counted as one)."""


def _specs(name: str, what: str, spec: Any, tree: PyTreeDef) -> list[Any]:
    """The entry of the prefix spec for each leaf of tree (a container one leaf)."""
    placeholders = tree.unflatten([_Leaf()] * tree.num_leaves)
    try:
        return prefix_entries(spec, placeholders, lambda x: x is None)
    except ValueError as err:
        raise ValueError(f"{name}: {what} must be a tree prefix of the values: {err}") from None


def _member_of(part: Any, axis: int) -> Any:
    """A stand-in for one member of part batched at axis: its first (the container code may check its shape)."""
    return squeeze(slice_in_dim(part, 0, 1, axis=axis), (axis,))


def _batched_like(size: int, part: Any, axis: int) -> Any:
    """A stand-in for part batched at axis over size members (while the function is staged: the container code may
    check its shape)."""
    shape = list(part.shape)
    dims = tuple(i if i < axis else i + 1 for i in range(len(shape)))
    return broadcast_in_dim(part, tuple(shape[:axis]) + (size,) + tuple(shape[axis:]), dims)


def _vmap_containers(name: str, fun: Any, in_axes: Any, out_axes: Any, axis_size: int | None, axis_name: Any,
                     spmd_axis_name: Any, sum_match: bool, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """vmap of fun over arguments holding registered containers: each container's arrays (to_elt's cont calls)
    become arguments of a vmap over arrays alone, whose function rebuilds the members (to_elt again) and returns
    the arrays of the output containers (from_elt's), which are then rebuilt batched (from_elt again). The
    container functions run twice per call and must call cont in the same order each time; such a vmap is traced
    at every call."""
    leaves, in_tree = tree_flatten((args, kwargs), is_leaf=is_vmappable)
    specs = _specs(name, "in_axes", (in_axes, 0), in_tree)
    parts: list[tuple[Any, Any]] = []  # (array, axis) for each argument of the vmap over arrays
    wants_index: list[bool] = []

    def record(part: Any, axis: Any) -> Any:
        axis = _normalize(name, axis, np.ndim(part), "a container's axis")
        parts.append((part, axis))
        return part if axis is None else _member_of(part, axis)

    def record_index() -> Any:
        wants_index.append(True)
        return iota(np.int32, 1)[0]

    for x, spec in zip(leaves, specs):
        if is_vmappable(x):
            VMAPPABLES[type(x)].to_elt(lambda part, axis: record(part, axis), record_index, x, spec)
        else:
            record(x, spec)
    sizes = {p.shape[a] for p, a in parts if a is not None} | ({axis_size} if axis_size is not None else set())
    if len(sizes) != 1:
        raise ValueError(f"{name}: the mapped axes of the arguments (containers' arrays included) must have one "
                         f"size, got {sorted(sizes)}" if sizes else f"{name}: no argument is mapped: pass axis_size")
    size = sizes.pop()
    index: list[Any] = []
    if wants_index:
        maker = MAKE_IOTA.get(type(size))
        index = [maker(size) if maker is not None else iota(np.int32, int(size))]
    outs_seen: dict[str, Any] = {}

    def arrays_fun(*members: Any) -> list[Any]:
        rest, idx = iter(members[:len(parts)]), members[len(parts):]
        rebuilt = []
        for x, spec in zip(leaves, specs):
            if is_vmappable(x):
                rebuilt.append(VMAPPABLES[type(x)].to_elt(lambda part, axis: next(rest), lambda: idx[0], x, spec))
            else:
                rebuilt.append(next(rest))
        f_args, f_kwargs = in_tree.unflatten(rebuilt)
        out_leaves, out_tree = tree_flatten(fun(*f_args, **f_kwargs), is_leaf=is_vmappable)
        out_specs = _specs(name, "out_axes", out_axes, out_tree)
        arrays: list[Any] = []
        out_parts: list[Any] = []  # (axis of each output array)

        def record_out(size_: Any, part: Any, axis: Any) -> Any:
            axis = _normalize(name, axis, np.ndim(part) + 1, "a container's out axis")
            arrays.append(part)
            out_parts.append(axis)
            return part if axis is None else _batched_like(size_, part, axis)

        for elt, spec in zip(out_leaves, out_specs):
            if is_vmappable(elt):
                VMAPPABLES[type(elt)].from_elt(record_out, size, elt, spec)
            else:
                record_out(size, elt, spec)
        outs_seen.update(tree=out_tree, leaves=out_leaves, specs=out_specs, axes=out_parts)
        return arrays

    flat_in_axes = tuple(a for _, a in parts) + (0,) * len(index)
    flat = vmap(arrays_fun, in_axes=flat_in_axes, out_axes=0, axis_size=size, axis_name=axis_name,
                spmd_axis_name=spmd_axis_name, sum_match=sum_match)(*[p for p, _ in parts], *index)
    finals = iter(x[0] if axis is None else moveaxis(x, 0, axis) for x, axis in zip(flat, outs_seen["axes"]))
    rebuilt_outs = []
    for elt, spec in zip(outs_seen["leaves"], outs_seen["specs"]):
        if is_vmappable(elt):
            rebuilt_outs.append(VMAPPABLES[type(elt)].from_elt(lambda size_, part, axis: next(finals), size, elt,
                                                               spec))
        else:
            rebuilt_outs.append(next(finals))
    return outs_seen["tree"].unflatten(rebuilt_outs)


def _spmd_axes(spmd_axis_name: Any) -> tuple[str, ...] | None:
    """vmap's spmd_axis_name as a tuple of mesh axis names (None: none)."""
    if spmd_axis_name is None:
        return None
    names = tuple(spmd_axis_name) if isinstance(spmd_axis_name, tuple | list) else (spmd_axis_name,)
    if not names or not all(isinstance(n, str) for n in names):
        raise TypeError(f"vmap: spmd_axis_name must be a mesh axis name or a tuple of them, got {spmd_axis_name!r}")
    return names


def _vmap_ir(ir: IR, in_axes: Any, axis_size: int | None, axis_name: Any, spmd: tuple[str, ...] | None = None
             ) -> IR:
    n = len(ir.in_vars)
    axes = [in_axes] * n if in_axes is None or isinstance(in_axes, int) else list(in_axes)
    if len(axes) != n:
        raise ValueError(f"vmap: in_axes {in_axes!r} must be an int, None, or one entry per input of the IR "
                         f"({n} inputs)")
    if axis_size is None:
        raise ValueError("vmap: batching an IR needs axis_size (the IR's inputs have their per-member shapes)")
    dims = [_normalize("vmap", ax, aval.ndim + 1, f"input {i}") for i, (ax, aval) in enumerate(zip(axes, ir.in_avals))]
    bir, _ = batch_ir(ir, dims, axis_size, [0] * len(ir.outs), axis_name, spmd)
    return with_outputs(bir, bir.outs, ir.out_tree)

