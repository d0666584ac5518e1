"""ember.experimental.mesh_utils (jax.experimental.mesh_utils): device arrays to build a Mesh from. ember's devices
(the CPU plugin's, or one process's GPUs) have no physical topology to follow, so a mesh takes them in order, as
JAX does for such devices."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ember._runtime import backends

device_kind_handler_dict: dict[str, Any] = {}  # (JAX's per-device-kind topology handlers: none apply to ember's)


def _shape(api: str, shape: Any) -> tuple[int, ...]:
    try:
        return tuple(int(n) for n in shape)
    except TypeError:
        raise TypeError(f"{api}: mesh_shape must be a sequence of ints, got {shape!r}") from None


def _grid(api: str, shape: tuple[int, ...], devices: Sequence[Any] | None) -> np.ndarray:
    devices = list(backends.devices() if devices is None else devices)
    if math.prod(shape) != len(devices):
        raise ValueError(f"Number of devices {len(devices)} must equal the product of mesh_shape {shape}")
    grid = np.empty(len(devices), dtype=object)
    grid[:] = devices
    return grid.reshape(shape)


def create_device_mesh(mesh_shape: Sequence[int], devices: Sequence[Any] | None = None, *,
                       contiguous_submeshes: bool = False, allow_split_physical_axes: bool = False) -> np.ndarray:
    """The devices (default: all of the default backend's) as an array of shape mesh_shape, in order."""
    return _grid("create_device_mesh", _shape("create_device_mesh", mesh_shape), devices)


def create_hybrid_device_mesh(mesh_shape: Sequence[int], dcn_mesh_shape: Sequence[int],
                              devices: Sequence[Any] | None = None, *, process_is_granule: bool = False,
                              should_sort_granules_by_key: bool = True,
                              allow_split_physical_axes: bool = False) -> np.ndarray:
    """A mesh over processes (dcn_mesh_shape) of per-process meshes (mesh_shape), as JAX's: the result's shape is
    their product, axis by axis; ember's devices all belong to one process, so dcn_mesh_shape must be all ones."""
    inner, outer = _shape("create_hybrid_device_mesh", mesh_shape), _shape("create_hybrid_device_mesh",
                                                                            dcn_mesh_shape)
    if len(inner) != len(outer):
        raise ValueError(f"create_hybrid_device_mesh: mesh_shape {inner} and dcn_mesh_shape {outer} must have the "
                         "same length")
    if math.prod(outer) != 1:
        raise ValueError(f"create_hybrid_device_mesh: dcn_mesh_shape {outer} spans several processes; ember's "
                         "devices belong to this one")
    return _grid("create_hybrid_device_mesh", tuple(a * b for a, b in zip(inner, outer)), devices)


__all__ = ["create_device_mesh", "create_hybrid_device_mesh", "device_kind_handler_dict"]
