"""ember.experimental.layout, as jax.experimental.layout: the memory layout of an array (Layout: its dimensions
from most to least major) and a Format (a layout with a sharding: `x.format`).

ember's arrays are all in the default layout, row-major (`major_to_minor == (0, 1, ..., ndim - 1)`, no tiling):
`x.format.layout` says so, and `with_layout_constraint` takes that layout (the identity) and refuses any other
with an error naming it, where JAX would change the array's layout on an accelerator."""
from __future__ import annotations

from typing import Any

from ember._runtime.layout import Format as Format, Layout as Layout


def with_layout_constraint(x: Any, layout: Layout | Format) -> Any:
    """x, in layout: only the default row-major layout exists on ember (any other is a ValueError naming it)."""
    found = layout.layout if isinstance(layout, Format) else layout
    if found is not None and not found.is_default_for(len(x.shape)):
        raise ValueError(f"with_layout_constraint: ember keeps every array in the default row-major layout "
                         f"(major_to_minor {tuple(range(len(x.shape)))}), got {found} for an array of shape "
                         f"{tuple(x.shape)}")
    return x


__all__ = ["Format", "Layout", "with_layout_constraint"]
