"""Sharding in the API: jit's in_shardings / out_shardings (checked when jit is called, then matched to the leaves of
the arguments and results: a Sharding, or a tree prefix holding Shardings and None; PartitionSpecs under the current
mesh), with_sharding_constraint, reshard and shard_alike, and arrays assembled from per-device parts
(make_array_from_*)."""
from __future__ import annotations

import inspect
from typing import Any, Callable, Sequence

import numpy as np

from ember._api.staging import wraps
from ember._core import ShapedArray, Tracer, aval_of
from ember._core.dtypes import check_user_dtype
from ember._core.pytree import prefix_entries, tree_flatten, tree_leaves, tree_map, tree_structure
from ember._core.sharding import (AxisType, Mesh, NamedSharding, PartitionSpec, Sharding, current_abstract_mesh,
                                  current_mesh, spec_axes, swap_current_mesh)
from ember._prims.explicit import resolve
from ember._prims.sharding import check_alike_shapes, check_rank, shard_alike_p, sharding_constraint_p
from ember._runtime import Array, ShardedArray, device_put
from ember._runtime.array import canonical_aval, device_put as one_device_put


def _is_entry(x: Any) -> bool:
    return x is None or isinstance(x, (Sharding, PartitionSpec))


def _resolve(api: str, what: str, entry: Any) -> Any:
    return resolve(api, entry, what)


def check_shardings(api: str, in_shardings: Any, out_shardings: Any) -> tuple[Any, Any]:
    """in_shardings and out_shardings, checked to hold only Shardings, PartitionSpecs and None."""
    for what, tree in (("in_shardings", in_shardings), ("out_shardings", out_shardings)):
        for entry in tree_leaves(tree, is_leaf=_is_entry):
            if not _is_entry(entry):
                raise TypeError(f"{api}: {what} must hold Shardings (or PartitionSpecs under a mesh) and None, got "
                                f"{entry!r} of type {type(entry).__name__}")
    return in_shardings, out_shardings


def leaf_shardings(api: str, what: str, prefix: Any, tree: Any, count: int) -> list[Any]:
    """The entry of prefix (a Sharding or a tree prefix of tree holding them) for each of tree's count leaves."""
    if _is_entry(prefix):
        return [_resolve(api, what, prefix)] * count
    if what == "in_shardings" and isinstance(tree, tuple) and isinstance(prefix, list):
        prefix = tuple(prefix)
    try:
        entries = prefix_entries(prefix, tree, _is_entry)
    except ValueError as err:
        raise ValueError(f"{api}: {what} must be a Sharding or a tree prefix of the "
                         f"{'positional arguments' if what == 'in_shardings' else 'results'}, got {prefix!r} for "
                         f"{tree_structure(tree)}: {err}") from None
    return [_resolve(api, what, e) for e in entries]


def _shardings_for(api: str, shardings: Any, x: Any) -> list[Any]:
    leaves = tree_leaves(x)
    return leaf_shardings(api, "shardings", shardings, x, len(leaves))


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """x (an array or a pytree of them), laid out as shardings say (a Sharding, a PartitionSpec under the current
    mesh, or a tree prefix of x holding them), as jax.lax.with_sharding_constraint: inside jit, XLA's partitioner
    reshards the value there; on concrete arrays it is device_put by the sharding."""
    leaves, tree = tree_flatten(x)
    targets = _shardings_for("with_sharding_constraint", shardings, x)
    out = []
    for leaf, sharding in zip(leaves, targets):
        if sharding is None:
            out.append(leaf)
            continue
        if not isinstance(sharding, Sharding):
            raise TypeError(f"with_sharding_constraint: expected a Sharding, got {sharding!r}")
        aval = aval_of(leaf)
        check_rank("with_sharding_constraint", sharding, aval)
        if isinstance(sharding, NamedSharding):
            abstract = current_abstract_mesh()
            if abstract.axis_names and abstract.are_all_axes_explicit:
                _assert_typed_so(aval, sharding)  # (JAX's: an assert on the type, the value left as it is)
                out.append(leaf)
                continue
            _check_auto_axes(sharding)
        out.append(sharding_constraint_p.bind(leaf, sharding=sharding))
    return tree.unflatten(out)


def shard_alike(x: Any, y: Any) -> tuple[Any, Any]:
    """(x, y) unchanged, each leaf of x tied to the same leaf of y (trees of one structure, leaves of one shape), as
    jax.experimental.shard_alike.shard_alike: inside a program partitioned over several devices, XLA's partitioner
    gives the two the same sharding, whichever it picks for either (a value left unconstrained next to a sharded
    one is sharded alike); in a program on one device it does nothing. Under grad the cotangents are tied too."""
    x_leaves, x_tree = tree_flatten(x)
    y_leaves, y_tree = tree_flatten(y)
    if x_tree != y_tree:
        raise ValueError(f"shard_alike: Trees should be equal. Got x_tree: {x_tree}, y_tree: {y_tree}")
    for a, b in zip(x_leaves, y_leaves):
        check_alike_shapes(aval_of(a).shape, aval_of(b).shape)
    pairs = [shard_alike_p.bind(a, b) for a, b in zip(x_leaves, y_leaves)]
    return x_tree.unflatten([p[0] for p in pairs]), y_tree.unflatten([p[1] for p in pairs])


def _entries(spec: Any, ndim: int) -> tuple[Any, ...]:
    """A spec's entries, one per dimension (None after the last), each axis tuple of one name as the name."""
    entries = tuple(e[0] if isinstance(e, tuple) and len(e) == 1 else e for e in spec)
    return entries + (None,) * (ndim - len(entries))


def _assert_typed_so(aval: Any, sharding: NamedSharding) -> None:
    """with_sharding_constraint under a context mesh of Explicit axes (as JAX's): the value's type must already be
    split as sharding says (UNCONSTRAINED entries match anything), else JAX's AssertionError."""
    explicit = getattr(aval, "explicit", None)
    typed = _entries(() if explicit is None else explicit.spec, aval.ndim)
    wanted = _entries(sharding.spec, aval.ndim)
    if any(w is not PartitionSpec.UNCONSTRAINED and w != t for t, w in zip(typed, wanted)):
        raise AssertionError("`with_sharding_constraint` acts as an assert when all axes of mesh are of type "
                             f"`Explicit`. The array sharding: {PartitionSpec(*typed)} did not match the sharding "
                             f"provided: {PartitionSpec(*wanted)}. Please use `ember.sharding.reshard` to shard your "
                             "input to the sharding you want.")


def _check_auto_axes(sharding: NamedSharding) -> None:
    """Outside a context mesh of Explicit axes, a constraint's spec may name only Auto axes (JAX's ValueError)."""
    mesh = sharding.mesh
    types = dict(zip(mesh.axis_names, mesh.axis_types))
    for axis in spec_axes(sharding.spec):
        if types.get(axis, AxisType.Auto) != AxisType.Auto:
            raise ValueError("The spec of NamedSharding passed to with_sharding_constraint can only refer to "
                             f"Auto axes of the mesh. Got spec={sharding.spec} and mesh="
                             f"{mesh.abstract_mesh}. You probably meant to use `reshard` API?")


def reshard(xs: Any, out_shardings: Any) -> Any:
    """xs placed by out_shardings (as jax.sharding.reshard): device_put for concrete arrays, a sharding constraint
    for traced ones."""
    leaves, tree = tree_flatten(xs)
    targets = _shardings_for("reshard", out_shardings, xs)
    return tree.unflatten([x if s is None else sharding_constraint_p.bind(x, sharding=s) if isinstance(x, Tracer)
                           else device_put(x, s) for x, s in zip(leaves, targets)])


def _mesh_with(api: str, axes: Any, kind: AxisType, args_mesh: Any) -> tuple[Mesh, Mesh] | None:
    """(the mesh, the same mesh with axes (default: all) of type kind) for auto_axes / explicit_axes: the current
    mesh, else the mesh of the arguments' explicit shardings; None where there is none."""
    mesh = current_mesh() or args_mesh
    if mesh is None:
        return None
    names = mesh.axis_names if axes is None else ((axes,) if isinstance(axes, str) else tuple(axes))
    for name in names:
        if name not in mesh.axis_names:
            raise ValueError(f"{api}: axis {name!r} is not an axis of the mesh {mesh}")
    return mesh, mesh.update(axis_types=tuple(kind if n in names else t
                                             for n, t in zip(mesh.axis_names, mesh.axis_types)))


def _explicit_mesh(leaves: Sequence[Any]) -> Mesh | None:
    for x in leaves:
        explicit = aval_of(x).explicit if hasattr(x, "aval") or isinstance(x, Tracer) else None
        if explicit is not None:
            return explicit.mesh
    return None


def _respec(xs: Any, mesh: Mesh) -> Any:
    """xs resharded over mesh (the same devices, other axis types) as their types split them now: no data moves,
    the types change (an Auto axis is not in a type)."""
    leaves, tree = tree_flatten(xs)
    out = []
    for x in leaves:
        aval = aval_of(x)
        spec = aval.explicit.spec if aval.explicit is not None else PartitionSpec(*([None] * aval.ndim))
        out.append(reshard(x, NamedSharding(mesh, spec)))
    return tree.unflatten(out)


def auto_axes(fun: Callable[..., Any] | None = None, /, *, axes: Any = None, out_sharding: Any = None) -> Any:
    """fun run with the mesh's axes (all, or those named) Auto, as jax.sharding.auto_axes: its arguments' types no
    longer say how those axes split them (XLA chooses inside), and its results are split as out_sharding says (also
    a keyword of the call)."""
    if fun is None:
        return lambda f: auto_axes(f, axes=axes, out_sharding=out_sharding)

    @wraps(fun)
    def call(*args: Any, **kwargs: Any) -> Any:
        target = _required(out_sharding, kwargs, "out_sharding")
        meshes = _mesh_with("auto_axes", axes, AxisType.Auto, _explicit_mesh(tree_leaves(args)))
        if meshes is None:
            return fun(*args, **kwargs)
        mesh, auto = meshes
        return reshard(_inside(auto, fun, _respec(args, auto), kwargs), _over(mesh, target))
    return call


def explicit_axes(fun: Callable[..., Any] | None = None, /, *, axes: Any = None, in_sharding: Any = None) -> Any:
    """fun run with the mesh's axes (all, or those named) Explicit, as jax.sharding.explicit_axes: its arguments are
    split as in_sharding says (also a keyword of the call) and typed so; its results' types drop those axes again."""
    if fun is None:
        return lambda f: explicit_axes(f, axes=axes, in_sharding=in_sharding)

    @wraps(fun)
    def call(*args: Any, **kwargs: Any) -> Any:
        target = _required(in_sharding, kwargs, "in_sharding")
        meshes = _mesh_with("explicit_axes", axes, AxisType.Explicit, None)
        if meshes is None:
            raise ValueError("Context mesh cannot be empty. Please use `ember.sharding.set_mesh` API to enter into a "
                             "mesh context when using `explicit_axes` API.")
        mesh, explicit = meshes
        return _respec(_inside(explicit, fun, reshard(args, _over(explicit, target)), kwargs), mesh)
    return call


def _required(given: Any, kwargs: dict[str, Any], name: str) -> Any:
    """auto_axes' out_sharding / explicit_axes' in_sharding: given to the decorator, else a keyword of the call (taken
    out of kwargs), else JAX's TypeError."""
    found = given if given is not None else kwargs.pop(name, None)
    if found is None:
        raise TypeError(f"Missing required keyword argument: '{name}'")
    return found


def _over(mesh: Mesh, shardings: Any) -> Any:
    """shardings (a tree of them) with each PartitionSpec made a NamedSharding over mesh."""
    return tree_map(lambda s: NamedSharding(mesh, s) if isinstance(s, PartitionSpec) else s, shardings,
                    is_leaf=_is_entry)


def _inside(mesh: Mesh, fun: Callable[..., Any], args: Any, kwargs: dict[str, Any]) -> Any:
    """fun(*args, **kwargs) with mesh the current mesh."""
    previous = swap_current_mesh(mesh)
    try:
        return fun(*args, **kwargs)
    finally:
        swap_current_mesh(previous)


def takes_out_sharding(api: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator giving a function JAX's keyword-only out_sharding= (explicit sharding mode): its result split
    as out_sharding says (a Sharding, or a PartitionSpec over the current mesh), by a reshard of what it computes
    (so its values never depend on it)."""
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @wraps(fn)
        def call(*args: Any, out_sharding: Any = None, **kwargs: Any) -> Any:
            out = fn(*args, **kwargs)
            return out if out_sharding is None else reshard(out, resolve(api, out_sharding))
        signature = inspect.signature(fn)
        call.__signature__ = signature.replace(parameters=[  # type: ignore[attr-defined]
            *signature.parameters.values(),
            inspect.Parameter("out_sharding", inspect.Parameter.KEYWORD_ONLY, default=None)])
        return call
    return wrap


def make_array_from_callback(shape: Sequence[int], sharding: Sharding, data_callback: Callable[[Any], Any],
                             dtype: Any = None) -> Array:
    """The array of the given global shape placed by sharding, each device's part made by data_callback(index)
    (its index: a tuple of slices into the whole array), as jax.make_array_from_callback."""
    shape = tuple(int(n) for n in shape)
    indices = sharding.devices_indices_map(shape)
    parts = []
    for device in sharding._device_assignment:
        value = np.asarray(data_callback(indices[device]))
        if dtype is not None:
            value = value.astype(check_user_dtype(dtype, "make_array_from_callback"))
        parts.append(one_device_put(value, device))
    return make_array_from_single_device_arrays(shape, sharding, parts)


def make_array_from_single_device_arrays(shape: Sequence[int], sharding: Sharding, arrays: Sequence[Any], *,
                                         dtype: Any = None) -> Array:
    """The array of the given global shape whose part on each device of sharding is the one-device array given for
    it (in the order of the sharding's devices, or any order: matched by device), as JAX's function of the name."""
    shape = tuple(int(n) for n in shape)
    devices = sharding._device_assignment
    by_device = {}
    for a in arrays:
        if type(a) is not Array:
            raise TypeError(f"make_array_from_single_device_arrays: expected one-device ember Arrays, got "
                            f"{type(a).__name__}")
        by_device[a.device] = a
    missing = [d for d in devices if d not in by_device]
    if missing or len(arrays) != len(devices):
        raise ValueError(f"make_array_from_single_device_arrays: the sharding has {len(devices)} devices "
                         f"({[d.id for d in devices]}); got arrays on {[a.device.id for a in arrays]}")
    indices = sharding.devices_indices_map(shape)
    first = by_device[devices[0]]
    want = check_user_dtype(dtype, "make_array_from_single_device_arrays") if dtype is not None else first.dtype
    for d in devices:
        a, part = by_device[d], tuple(len(range(*s.indices(n))) for s, n in zip(indices[d], shape))
        if a.shape != part or a.dtype != want:
            raise ValueError(f"make_array_from_single_device_arrays: the array for {d} is {a.aval.str_short()}, but "
                             f"its part of {shape} by {sharding} is {want.name}{list(part)}")
    aval = canonical_aval(ShapedArray(shape, want))
    if len(devices) == 1:
        return one_device_put(first, devices[0])  # (committed there, as JAX's)
    return ShardedArray._from_shards([by_device[d]._buffer for d in devices], aval, sharding)


def make_array_from_process_local_data(sharding: Sharding, local_data: Any, global_shape: Any = None) -> Array:
    """The global array placed by sharding from this process's data (one process: the whole array), as JAX's."""
    value = np.asarray(local_data)
    if global_shape is not None and tuple(global_shape) != value.shape:
        raise ValueError(f"make_array_from_process_local_data: global_shape {tuple(global_shape)} differs from the "
                         f"data's shape {value.shape} (ember runs one process: its data is the whole array)")
    return device_put(value, sharding)
