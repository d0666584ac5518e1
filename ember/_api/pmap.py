"""pmap: a function mapped over the leading axis of its arguments, one member per device, as jax.pmap.

Built on shard_map: the mapped axis becomes the axis of a one-dimensional mesh over the devices (named axis_name,
so collectives over it work as under pmap), each device runs the function on its member, and the results are
stacked along out_axes, sharded over the devices. The whole mapped program is compiled once per signature (jit)."""
from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import numpy as np

from ember._api.jit import jit
from ember._api.stages import Compiled, Lowered
from ember._api.staging import as_tuple, broadcast_prefix, fun_name, wraps
from ember._control.shard_map import SpecsAfterStaging, shard_map
from ember._core import aval_of
from ember._core.cache import LRUCache
from ember._core.pytree import tree_flatten
from ember._core.sharding import Mesh, PartitionSpec
from ember._prims.lax_helpers import expand_dims
from ember._prims.shape import moveaxis, squeeze
from ember._runtime import devices as backend_devices


def pmap(fun: Callable[..., Any], axis_name: Any = None, *, in_axes: Any = 0, out_axes: Any = 0,
         static_broadcasted_argnums: int | Iterable[int] = (), devices: Sequence[Any] | None = None,
         backend: str | None = None, axis_size: int | None = None, donate_argnums: int | Iterable[int] = ()
         ) -> Callable[..., Any]:
    """Map fun over axis in_axes of its arguments, member i on device i (as jax.pmap): in_axes / out_axes as
    vmap's (ints or None, or tree prefixes), axis_name names the mapped axis for collectives (psum, all_gather,
    ppermute, axis_index, ...) inside fun, static_broadcasted_argnums are static arguments given to every member,
    devices (default: the backend's first devices) must number the mapped axis's size. The result is an array
    sharded over those devices along out_axes (None: a result the same on every device, returned once)."""
    if not callable(fun):
        raise TypeError(f"pmap: expected a function, got {type(fun).__name__}")
    name = fun_name(fun)
    statics = tuple(sorted(as_tuple(static_broadcasted_argnums)))
    donated = tuple(sorted(as_tuple(donate_argnums)))
    axis = axis_name if axis_name is not None else "_pmap"
    programs = LRUCache("program_cache_size")  # signature -> its jitted program (bounded, as jit's caches)

    def program_for(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, list[Any]]:
        """The jitted program of the arguments' signature (made once per signature), and their dynamic leaves.
        Keyword arguments are mapped over their leading axis (as JAX's: in_axes is for the positional ones)."""
        n_args = len(args)
        static_pos = {i % n_args for i in statics if -n_args <= i < n_args}
        dynamic = tuple(a for i, a in enumerate(args) if i not in static_pos)
        static_values = tuple(args[i] for i in sorted(static_pos))
        axes = _in_axes(name, in_axes, args, static_pos) + _in_axes(name, 0, (kwargs,), set())
        leaves, in_tree = tree_flatten((dynamic, kwargs))
        sizes = {aval_of(x).shape[a] for x, a in zip(leaves, axes) if a is not None}
        if axis_size is not None:
            sizes.add(axis_size)
        if len(sizes) != 1:
            raise ValueError(f"pmap({name}): the mapped axes have different sizes {sorted(sizes)}" if sizes else
                             f"pmap({name}): no argument is mapped (every in_axes entry is None): pass axis_size")
        size = sizes.pop()
        chosen = list(devices) if devices is not None else backend_devices(backend)[:size]
        if len(chosen) != size:
            raise ValueError(f"pmap({name}): the mapped axis has size {size}, but "
                             f"{'devices= gives' if devices is not None else 'the backend has'} {len(chosen)} "
                             f"device(s): {chosen}")
        key = (in_tree, tuple(axes), tuple(d.id for d in chosen), static_values)
        program = programs.lookup(key)
        if program is None:
            # the leaves of the donated positional arguments (a donated argument's buffers are given up when the
            # call takes them as they are, as JAX's: the mapped results of an earlier pmap; others are copied)
            given_up, start = [], 0
            donated_pos = {d % n_args for d in donated if -n_args <= d < n_args}
            for i, a in enumerate(args):
                if i in static_pos:
                    continue
                count = tree_flatten(a)[1].num_leaves
                if i in donated_pos:
                    given_up += range(start, start + count)
                start += count
            program = _program(fun, name, axis, Mesh(np.array(chosen, dtype=object), (axis,)), axes, out_axes,
                               in_tree, static_pos, n_args, static_values, tuple(given_up))
            programs.store(key, program)
        return program, leaves

    def mapped(*args: Any, **kwargs: Any) -> Any:
        program, leaves = program_for(args, kwargs)
        return program(*leaves)

    def lower(*args: Any, **kwargs: Any) -> Any:
        """The program for these arguments, lowered (as jax.pmap(f).lower): .compile() and call it with them."""
        program, leaves = program_for(args, kwargs)
        return _rebound(_Lowered, program.lower(*leaves), program_for)

    wraps(fun)(mapped)
    mapped.__name__ = f"pmap({name})"  # type: ignore[attr-defined]
    mapped.lower = lower  # type: ignore[attr-defined]
    return mapped


# pmap's arguments (positional, keyword) -> (its program, their leaves)
ProgramFor = Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, list[Any]]]


def _rebound(cls: type, stage: Any, program_for: ProgramFor) -> Any:
    """The stage (a Lowered or Compiled of pmap's program) as cls, which takes pmap's arguments."""
    made = cls.__new__(cls)
    made.__dict__.update(stage.__dict__)
    made._program_for = program_for
    return made


class _Lowered(Lowered):
    """pmap(f).lower(*args): the program's Lowered (as_text, cost_analysis, ...; a jax.stages.Lowered), whose
    compile() gives a Compiled called with the arguments as pmap(f) is (not the program's leaves)."""
    _program_for: ProgramFor

    def compile(self, *args: Any, **kwargs: Any) -> Compiled:
        return _rebound(_Compiled, super().compile(*args, **kwargs), self._program_for)


class _Compiled(Compiled):
    """pmap(f).lower(*args).compile(): called with arguments of the signature it was lowered for."""
    _program_for: ProgramFor

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*self._program_for(args, kwargs)[1])


def _in_axes(name: str, in_axes: Any, args: tuple[Any, ...], static_pos: set[int]) -> list[int | None]:
    """in_axes per leaf of the dynamic arguments, normalised (negative axes counted from the end)."""
    dynamic = tuple(a for i, a in enumerate(args) if i not in static_pos)
    if isinstance(in_axes, (list, tuple)) and len(in_axes) == len(args) and static_pos:
        in_axes = tuple(a for i, a in enumerate(in_axes) if i not in static_pos)
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    per_leaf = broadcast_prefix(f"pmap({name})", "in_axes", in_axes, dynamic)
    leaves = tree_flatten(dynamic)[0]
    out = []
    for x, a in zip(leaves, per_leaf):
        if a is None:
            out.append(None)
            continue
        ndim = aval_of(x).ndim
        if not -ndim <= a < ndim:
            raise ValueError(f"pmap({name}): in_axes {a} is out of range for an argument of rank {ndim}")
        out.append(a % ndim)
    return out


def _program(fun: Callable[..., Any], name: str, axis: Any, mesh: Mesh, axes: list[int | None], out_axes: Any,
             in_tree: Any, static_pos: set[int], n_args: int, static_values: tuple[Any, ...],
             donated: tuple[int, ...] = ()) -> Callable[..., Any]:
    """The jitted program of one signature: the dynamic arguments' leaves -> the results (a shard_map over the
    devices' mesh, the mapped axis moved to the front and split over it); donated: the leaves given up."""
    def call_fun(members: list[Any]) -> Any:
        positional, kwargs = in_tree.unflatten(members)
        dynamic, statics = iter(positional), iter(static_values)
        return fun(*[next(statics) if i in static_pos else next(dynamic) for i in range(n_args)], **kwargs)

    def run(*leaves: Any) -> Any:
        staged: dict[str, Any] = {}  # the results' structure and their out_axes, found when fun is staged (once)

        def body(*blocks: Any) -> list[Any]:
            out_leaves, tree = tree_flatten(call_fun([b if a is None else squeeze(b, (0,))
                                                      for b, a in zip(blocks, axes)]))
            staged["tree"] = tree
            staged["per_out"] = per_out = broadcast_prefix(f"pmap({name})", "out_axes", out_axes,
                                                           tree.unflatten(range(tree.num_leaves)))
            # an unmapped result (out_axes None) is the same on every device, as pmap requires of it
            return [y if a is None else expand_dims(y, (0,)) for y, a in zip(out_leaves, per_out)]
        specs = tuple(PartitionSpec() if a is None else PartitionSpec(axis) for a in axes)
        fronted = [x if a is None else moveaxis(x, a, 0) for x, a in zip(leaves, axes)]
        out_specs = SpecsAfterStaging(lambda _: [PartitionSpec() if a is None else PartitionSpec(axis)
                                                 for a in staged["per_out"]])
        # (check_vma=False, as JAX's pmap: its values carry no varying-axes types)
        outs = shard_map(body, mesh=mesh, in_specs=specs, out_specs=out_specs, check_vma=False)(*fronted)
        tree, per_out = staged["tree"], staged["per_out"]
        for i, (y, a) in enumerate(zip(outs, per_out)):
            if a is not None and not -y.ndim <= a < y.ndim:
                raise ValueError(f"pmap({name}): out_axes {a} is out of range for result {i}, of rank {y.ndim - 1} "
                                 "per member")
        return tree.unflatten([y if a is None or a == 0 else moveaxis(y, 0, a % y.ndim)
                               for y, a in zip(outs, per_out)])
    return jit(run, donate_argnums=donated)
