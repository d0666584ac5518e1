"""ember.debug (jax.debug): printing and callbacks from compiled code (docs/callbacks.md), and pictures of how arrays
are laid out over devices (docs/sharding.md)."""
import builtins as _builtins
from typing import Any as _Any, Sequence as _Sequence

from ember._api.callbacks import debug_callback as callback, debug_print as print  # noqa: A004
from ember._core.pytree import tree_flatten as _tree_flatten
from ember._core.sharding import Sharding as _Sharding, visualize_sharding as _picture
from ember._prims.sharding import inspect_sharding_p as _inspect_sharding_p


def visualize_sharding(shape: _Sequence[int], sharding: _Sharding, *, use_color: bool = True, scale: float = 1.0,
                       min_width: int = 9, max_width: int = 80, color_map: _Any = None) -> None:
    """Print which device holds which part of an array of this shape laid out by sharding (1-D and 2-D shapes),
    as jax.debug.visualize_sharding draws it (in plain text: use_color and color_map are accepted and unused)."""
    _builtins.print(_picture(shape, sharding, scale=scale, min_width=min_width, max_width=max_width))


def inspect_array_sharding(value: _Any, *, callback: _Any) -> None:
    """Call callback(sharding) for each array of value (a pytree of arrays), as jax.debug.inspect_array_sharding:
    outside jit at once, with the array's own sharding (`x.sharding`; under vmap or grad outside jit, the batched or
    primal array's); inside jit when the program is compiled (`jit(f).lower(...).compile()`, or its first call;
    not again for later calls of the compiled program):

    - a program partitioned over several devices: the sharding XLA's partitioner chose for the value (a
      NamedSharding over the mesh of the program's shardings when one says the same, else an HloShardingSharding,
      JAX's GSPMDSharding). ember reads it from a second compile of the program in which the inspected values are
      also outputs (the CPU plugin has no hook for JAX's InspectSharding custom call), so a value inside a loop or
      a branch is not reported there (a warning says so);
    - a program on one device: the whole value on that device, `HloShardingSharding({replicated})` over the default
      device (JAX's GSPMDSharding({replicated})); ember compiles one program for every device a call may run on.
    """
    for leaf in _tree_flatten(value)[0]:
        _inspect_sharding_p.bind(leaf, callback=callback)


def visualize_array_sharding(arr: _Any, **kwargs: _Any) -> None:
    """Print which device holds which part of arr (see visualize_sharding); inside jit, when the program is
    compiled, with the sharding XLA chose (as inspect_array_sharding)."""
    inspect_array_sharding(arr, callback=lambda sharding: visualize_sharding(arr.shape, sharding, **kwargs))


__all__ = ["callback", "inspect_array_sharding", "print", "visualize_array_sharding", "visualize_sharding"]
