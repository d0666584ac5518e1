"""ember.debug (jax.debug): printing, logging, callbacks and breakpoints from compiled code (docs/callbacks.md), and
pictures of how arrays are laid out over devices (docs/sharding.md): sharding_picture draws one as text
(ember.sharding.visualize_sharding returns it), visualize_sharding and visualize_array_sharding print it."""
import builtins as _builtins
from typing import Any as _Any, Sequence as _Sequence

from ember._api.callbacks import debug_callback as callback, debug_print as print  # noqa: A004
from ember._api.callbacks import debug_log as log
from ember._api.debugger import breakpoint as breakpoint  # noqa: A004
from ember.extend.core import Effect as _Effect
from ember._core.pytree import tree_flatten as _tree_flatten
from ember._core.sharding import Sharding as _Sharding, checked_shape as _checked_shape
from ember._prims.sharding import inspect_sharding_p as _inspect_sharding_p


class DebugEffect(_Effect):
    """The effect of a debug callback, print or breakpoint (jax.debug.DebugEffect). ember's IR carries no effect
    types (a debug callback's primitive is effectful: never dropped, merged or reordered); the class is for code
    that names JAX's."""

    def __str__(self) -> str:
        return "Debug"


class OrderedDebugEffect(_Effect):
    """The effect of an ordered debug callback (ordered=True: kept in program order; jax.debug.OrderedDebugEffect)."""

    def __str__(self) -> str:
        return "OrderedDebug"


def sharding_picture(shape: _Sequence[int], sharding: _Sharding, *, scale: float = 1., min_width: int = 9,
                     max_width: int = 80) -> str:
    """A plain-text picture of which devices hold which block of a 1-D or 2-D array of shape, as
    jax.debug.visualize_sharding draws it: one box per block, labelled with the platform and device ids."""
    shape = _checked_shape("visualize_sharding", shape)
    if not 1 <= len(shape) <= 2:
        raise ValueError(f"visualize_sharding only works for shapes with 1 and 2 dimensions, got shape {shape}")
    indices = sharding.devices_indices_map(shape)
    platform = next(iter(indices)).platform.upper()

    def block(dim: int, s: slice) -> tuple[int, float]:
        start, stop, _ = s.indices(shape[dim])
        size = stop - start
        return (start // size if size else 0), (size / shape[dim] if shape[dim] else 1.0)

    cells: dict[tuple[int, int], set[int]] = {}
    fractions: dict[tuple[int, int], tuple[float | None, float]] = {}
    for device, index in indices.items():
        if len(shape) == 2:
            (row, height), (col, width) = block(0, index[0]), block(1, index[1])
            fractions[row, col] = (height, width)
        else:
            (col, width), row = block(0, index[0]), 0
            fractions[row, col] = (None, width)
        cells.setdefault((row, col), set()).add(device.id)
    rows, cols = max(r for r, _ in cells) + 1, max(c for _, c in cells) + 1
    base_height = int(10 * scale)
    base_width = int(base_height * (shape[1] if len(shape) == 2 else 1) / max(shape[0], 1))
    labels = {rc: f"{platform} {','.join(str(i) for i in sorted(ids))}" for rc, ids in cells.items()}
    # each cell as JAX's rich table pads it: a width (clamped) and a height from its block's share of the array,
    # the label centred in them (left and top padding the smaller half), no padding below zero
    pads: dict[tuple[int, int], tuple[int, int, int, int]] = {}
    for (r, c), label in labels.items():
        height, width = fractions[r, c]
        w = min(max(int(width * base_width * 2.5), min_width), max_width)
        h = 1 if height is None else int(height * base_height)
        left, extra = divmod(w - len(label) - 2, 2)
        top, below = divmod(h - 2, 2)
        pads[r, c] = (max(top, 0), max(top + below, 0), max(left, 0), max(left + extra, 0))
    widths = [max(len(labels[r, c]) + pads[r, c][2] + pads[r, c][3] for r in range(rows)) for c in range(cols)]
    heights = [max(1 + pads[r, c][0] + pads[r, c][1] for c in range(cols)) for r in range(rows)]

    def rule(left: str, mid: str, right: str) -> str:
        return left + mid.join("─" * w for w in widths) + right

    def cell(r: int, c: int, line: int) -> str:
        label, (top, _, left, _) = labels[r, c], pads[r, c]
        if line != top:
            return " " * widths[c]
        start = left + (widths[c] - (len(label) + pads[r, c][2] + pads[r, c][3])) // 2
        return (" " * start + label).ljust(widths[c])

    lines = [rule("┌", "┬", "┐")]
    for r in range(rows):
        for line in range(heights[r]):
            lines.append("│" + "│".join(cell(r, c, line) for c in range(cols)) + "│")
        lines.append(rule("├", "┼", "┤") if r < rows - 1 else rule("└", "┴", "┘"))
    return "\n".join(lines)


def visualize_sharding(shape: _Sequence[int], sharding: _Sharding, *, use_color: bool = True, scale: float = 1.0,
                       min_width: int = 9, max_width: int = 80, color_map: _Any = None) -> None:
    """Print which device holds which part of an array of this shape laid out by sharding (1-D and 2-D shapes),
    as jax.debug.visualize_sharding draws it (in plain text: use_color and color_map are accepted and unused)."""
    _builtins.print(sharding_picture(shape, sharding, scale=scale, min_width=min_width, max_width=max_width))


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


__all__ = ["DebugEffect", "OrderedDebugEffect", "breakpoint", "callback", "inspect_array_sharding", "log", "print",
           "visualize_array_sharding", "visualize_sharding"]
