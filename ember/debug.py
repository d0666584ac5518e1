"""ember.debug (jax.debug): printing and callbacks from compiled code (docs/callbacks.md), and pictures of how arrays
are laid out over devices (docs/sharding.md)."""
import builtins as _builtins
from typing import Any as _Any, Sequence as _Sequence

from ember._api.callbacks import debug_callback as callback, debug_print as print  # noqa: A004
from ember._core.sharding import Sharding as _Sharding, visualize_sharding as _picture


def visualize_sharding(shape: _Sequence[int], sharding: _Sharding, *, use_color: bool = True, scale: float = 1.0,
                       min_width: int = 9, max_width: int = 80, color_map: _Any = None) -> None:
    """Print which device holds which part of an array of this shape laid out by sharding (1-D and 2-D shapes),
    as jax.debug.visualize_sharding draws it (in plain text: use_color and color_map are accepted and unused)."""
    _builtins.print(_picture(shape, sharding, scale=scale, min_width=min_width, max_width=max_width))


def visualize_array_sharding(arr: _Any, **kwargs: _Any) -> None:
    """Print which device holds which part of arr (see visualize_sharding)."""
    visualize_sharding(arr.shape, arr.sharding, **kwargs)


__all__ = ["callback", "print", "visualize_array_sharding", "visualize_sharding"]
