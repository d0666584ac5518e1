"""ember.sharding (jax.sharding): meshes of devices, PartitionSpec, NamedSharding, SingleDeviceSharding, the current
mesh (set_mesh, get_mesh, `with mesh:`), make_mesh, ManualAxisType (how a value in a shard_map body varies over
the mesh's axes: `typeof(x).mat`), and JAX's explicit sharding mode (sharding in types: AbstractMesh, reshard,
auto_axes, explicit_axes, get_abstract_mesh, use_abstract_mesh, ShardingTypeError) (docs/sharding.md)."""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ember._core.sharding import AxisType as AxisType, IndivisibleError as IndivisibleError, Mesh as Mesh
from ember._core.sharding import NamedSharding as NamedSharding, P as P, PartitionSpec as PartitionSpec
from ember._core.sharding import Sharding as Sharding, SingleDeviceSharding as SingleDeviceSharding
from ember._core.sharding import AbstractDevice as AbstractDevice, AbstractMesh as AbstractMesh
from ember._core.sharding import context_mesh, current_abstract_mesh, swap_current_mesh
from ember._core.sharding import use_abstract_mesh as use_abstract_mesh
from ember._core.dtypes import ShardingTypeError as ShardingTypeError
from ember.debug import sharding_picture as visualize_sharding
from ember._core.dtypes import ManualAxisType as ManualAxisType
from ember._core.trace import is_tracing
from ember._api.sharding import auto_axes as auto_axes, explicit_axes as explicit_axes, reshard as reshard
from ember._runtime import backends

__all__ = [
    "AbstractDevice", "AbstractMesh", "AxisType", "IndivisibleError", "ManualAxisType", "Mesh", "NamedSharding", "P",
    "PartitionSpec", "Sharding", "ShardingTypeError", "SingleDeviceSharding",
    "auto_axes", "explicit_axes", "get_abstract_mesh", "get_mesh", "make_mesh", "make_single_device_sharding",
    "reshard", "set_mesh", "use_abstract_mesh", "visualize_sharding",
]

_EMPTY_MESH = Mesh(np.empty((), dtype=object), ())


def make_mesh(axis_shapes: Sequence[int], axis_names: Sequence[str], axis_types: tuple[AxisType, ...] | None = None,
              *, devices: Sequence[Any] | None = None) -> Mesh:
    """A mesh of the given shape over the first prod(axis_shapes) devices (by default the default backend's), in
    order, as jax.make_mesh; its axes are Explicit unless axis_types says otherwise (JAX 0.10.2's default)."""
    try:
        shape = tuple(int(s) for s in axis_shapes)
    except (TypeError, ValueError):
        raise ValueError("`axis_shapes` passed to `make_mesh` should be a sequence of ints. "
                         f"Got {axis_shapes}") from None
    if devices is None:
        devices = backends.devices()
    devices = list(devices)
    size = math.prod(shape)
    if size > len(devices):
        raise ValueError(f"Number of devices {len(devices)} must be >= the product of mesh_shape {shape}")
    grid = np.empty(len(devices[:size]), dtype=object)
    grid[:] = devices[:size]
    if axis_types is None:
        axis_types = (AxisType.Explicit,) * len(shape)
    return Mesh(grid.reshape(shape), axis_names, axis_types=axis_types)


class set_mesh:  # noqa: N801 (a context manager named as JAX's)
    """Make mesh (or None: no mesh) this thread's current mesh at once, as jax.set_mesh; used as a context manager,
    the previous one comes back at the end of the block."""
    __slots__ = ("previous",)

    def __init__(self, mesh: Mesh | None):
        if mesh is not None and not isinstance(mesh, Mesh):
            raise ValueError(f"Expected mesh of type `ember.sharding.Mesh`. Got {type(mesh)}")
        if is_tracing():
            raise ValueError("`set_mesh` can only be used outside of `ember.jit` (and other transformations).")
        if mesh is not None and mesh.manual_axes:
            raise ValueError(f"mesh {mesh} contains manual axes which is not allowed when using `ember.set_mesh`. "
                             "Please use `ember.shard_map` to enter into `Manual` mode instead.")
        self.previous = swap_current_mesh(mesh)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        swap_current_mesh(self.previous)


def get_mesh() -> Mesh:
    """The context mesh (set_mesh; not `with mesh:`'s, as in JAX), or an empty mesh, as jax.sharding.get_mesh."""
    if is_tracing():
        raise ValueError("`get_mesh` can only be used outside of `ember.jit` (and other transformations).")
    mesh = context_mesh()
    return _EMPTY_MESH if mesh is None else mesh


def get_abstract_mesh() -> AbstractMesh:
    """The abstract mesh programs are traced against, as jax.sharding.get_abstract_mesh: use_abstract_mesh's, else
    the current mesh's (set_mesh), else the empty AbstractMesh; usable inside jit."""
    return current_abstract_mesh()


def make_single_device_sharding(device: Any, *, memory_kind: str | None = None) -> SingleDeviceSharding:
    return SingleDeviceSharding(device, memory_kind=memory_kind)
