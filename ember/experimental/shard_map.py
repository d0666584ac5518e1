"""ember.experimental.shard_map (jax.experimental.shard_map, JAX's older home of shard_map): shard_map with its
older signature, mesh, in_specs and out_specs positional and check_rep (now check_vma)."""
from __future__ import annotations

from typing import Any, Callable

from ember._control.shard_map import shard_map as _shard_map


def shard_map(f: Callable[..., Any], mesh: Any, in_specs: Any, out_specs: Any, check_rep: bool = True,
              auto: Any = frozenset()) -> Any:
    """ember.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=check_rep)."""
    if auto:
        raise NotImplementedError("shard_map: auto= (mesh axes left to the compiler inside the body) is not "
                                  "supported; ember maps over every mesh axis")
    return _shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=check_rep)


__all__ = ["shard_map"]
