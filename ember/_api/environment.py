"""JAX's top-level helpers about arrays, devices and the environment: block_until_ready, device_get, typeof,
live_arrays, copy_to_host_async, the device and process queries (one process; the devices of the default backend)
and print_environment_info."""
from __future__ import annotations

import gc
import platform
import sys
from typing import Any

import numpy as np

from ember._core import ShapedArray, aval_of
from ember._core.pytree import PHYSICAL, tree_leaves, tree_map
from ember._runtime import Array, ShardedArray, devices as _devices
from ember._runtime import distributed as _distributed
from ember._runtime.backends import get_client
from ember._runtime.compile_cache import package_version
from ember._runtime.guards import explicit as explicit_transfers


def block_until_ready(x: Any) -> Any:
    """Wait until every array in the pytree x is computed; returns x (as jax.block_until_ready)."""
    for leaf in _arrays(x):
        leaf.block_until_ready()
    return x


def device_get(x: Any) -> Any:
    """x with every ember Array replaced by a numpy array of its value (as jax.device_get): explicit transfers for
    the transfer guards."""
    with explicit_transfers():
        return tree_map(lambda leaf: np.asarray(leaf) if _is_concrete(leaf) else leaf, x)


def copy_to_host_async(x: Any) -> Any:
    """Start copying the arrays of x to the host (as jax.copy_to_host_async); on the CPU backend the host reads
    device memory in place, so this only waits for nothing. Returns x."""
    return x


def typeof(x: Any) -> ShapedArray:
    """The abstract value (shape, dtype, weak type) of an array, a tracer or a number (as jax.typeof); of a typed
    key array, its key type (key<fry>[3])."""
    if type(x) in PHYSICAL:
        return x.aval
    return aval_of(x)


def live_arrays(platform: str | None = None) -> list[Array]:
    """The ember Arrays alive in this process that are not deleted (as jax.live_arrays): found by the garbage
    collector's view of all objects, so it costs time in proportion to the heap (a debugging tool)."""
    wanted = None if platform is None else get_client(platform)
    return [o for o in gc.get_objects() if _is_concrete(o) and not o.is_deleted()
            and (wanted is None or next(iter(o.devices())).client is wanted)]


def default_backend() -> str:
    """The platform of the default backend ("cpu", or "cuda" with a CUDA plugin)."""
    return get_client().platform_name


def local_devices(process_index: int | None = None, backend: str | None = None) -> list[Any]:
    return _devices(backend)


def device_count(backend: str | None = None) -> int:
    return len(_devices(backend))


def local_device_count(backend: str | None = None) -> int:
    return len(_devices(backend))


def process_count(backend: str | None = None) -> int:
    """How many processes the run has: 1, or num_processes of ember.distributed.initialize."""
    return _distributed.process_count()


def process_index(backend: str | None = None) -> int:
    """This process's index in the run: 0, or process_id of ember.distributed.initialize."""
    return _distributed.process_index()


def process_indices(backend: str | None = None) -> list[int]:
    return list(range(_distributed.process_count()))


host_count, host_id, host_ids = process_count, process_index, process_indices


def print_environment_info(return_string: bool = False) -> str | None:
    """ember's version and those of Python, numpy, ml_dtypes and scipy, the PJRT plugin and the devices (as
    jax.print_environment_info)."""
    def version(name: str) -> str:
        return package_version(name, missing="not installed")
    client = get_client()
    lines = [f"ember:      {version('ember')}", f"numpy:      {np.__version__}",
             f"ml_dtypes:  {version('ml_dtypes')}", f"scipy:      {version('scipy')}",
             f"python:     {sys.version.split()[0]}", f"platform:   {platform.platform()}",
             f"plugin:     {client.plugin.path} (PJRT API {'.'.join(map(str, client.plugin.api_version))})",
             f"backend:    {client.platform_name}, {len(client.devices)} device(s): "
             f"{', '.join(map(str, client.devices))}"]
    text = "\n".join(lines) + "\n"
    if return_string:
        return text
    print(text, end="")
    return None


def _is_concrete(x: Any) -> bool:
    """Whether x is a concrete ember Array (on one device, or sharded over several)."""
    return type(x) is Array or type(x) is ShardedArray


def _arrays(x: Any) -> list[Array]:
    return [leaf for leaf in tree_leaves(x) if _is_concrete(leaf)]


__all__ = ["block_until_ready", "copy_to_host_async", "default_backend", "device_count", "device_get",
           "host_count", "host_id", "host_ids", "live_arrays", "local_device_count", "local_devices",
           "print_environment_info", "process_count", "process_index", "process_indices", "typeof"]
