"""ember.extend.pallas, as jax.extend.pallas: Pallas's extension points (GridMapping, register_lowering_rule). ember
has no Pallas (kernels written in Pallas lower to Triton, Mosaic or Mosaic GPU, none of which ember compiles): both
raise NotImplementedError saying so; ember's own route to custom kernels is ember.ffi (docs/extending.md#ffi)."""
from __future__ import annotations

from typing import Any

_WHY = ("ember has no Pallas (its kernels lower to Triton or Mosaic, which ember does not compile); write the "
        "kernel in C and call it with ember.ffi")


class GridMapping:
    """Pallas's canonical grid specification: not on ember (constructing one raises NotImplementedError)."""

    def __init__(self, *args: Any, **kwargs: Any):
        raise NotImplementedError(f"GridMapping: {_WHY}")


def register_lowering_rule(params_cls: Any, rule: Any, platform: str) -> Any:
    """A Pallas lowering rule for a platform: not on ember (NotImplementedError)."""
    raise NotImplementedError(f"register_lowering_rule: {_WHY}")


__all__ = ["GridMapping", "register_lowering_rule"]
