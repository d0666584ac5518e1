"""Array layouts (jax.experimental.layout's Layout and Format, public in ember.experimental.layout): ember's arrays
are all in the default layout, row-major (`major_to_minor == (0, 1, ..., ndim - 1)`, no tiling)."""
from __future__ import annotations

import dataclasses
from typing import Any

@dataclasses.dataclass(frozen=True)
class Layout:
    """Dimensions from most to least major (row-major: 0, 1, ..., ndim - 1), tiles, and the size of a sub-byte
    element."""
    major_to_minor: tuple[int, ...]
    tiling: tuple[tuple[int, ...], ...] | None = None
    sub_byte_element_size_in_bits: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "major_to_minor", tuple(int(d) for d in self.major_to_minor))

    @classmethod
    def row_major(cls, ndim: int) -> "Layout":
        return cls(tuple(range(ndim)), ())

    def is_default_for(self, ndim: int) -> bool:
        return self.major_to_minor == tuple(range(ndim)) and not self.tiling and not self.sub_byte_element_size_in_bits


@dataclasses.dataclass(frozen=True)
class Format:
    """A layout (None: the default) and a sharding (None: unspecified)."""
    layout: Layout | None = None
    sharding: Any = None


def format_of(x: Any) -> Format:
    """x.format: the default row-major layout and x's sharding."""
    return Format(Layout.row_major(len(x.shape)), x.sharding)

