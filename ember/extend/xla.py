"""ember.extend.xla, as jax.extend.xla: custom XLA compiler passes over HLO modules. The PJRT plugin ember compiles
with takes no compiler passes from outside (its C API has no such hook), so none can be registered:
register_hlo_module_transformation raises NotImplementedError, and clear_hlo_module_transformation finds nothing
to clear (False)."""
from __future__ import annotations

import enum
from typing import Callable, Sequence


class PipelineStage(enum.Enum):
    """Where in XLA's pipeline a custom pass runs (JAX's)."""
    PRE_SCHEDULER = 0
    POST_SCHEDULER = 1


def register_hlo_module_transformation(callback: Callable[[bytes], bytes | None], *, name: str,
                                       stage: PipelineStage = PipelineStage.PRE_SCHEDULER,
                                       platforms: Sequence[str] | str | None = None) -> None:
    """Register a pass over serialized HLO modules (JAX's): not on ember (NotImplementedError)."""
    if not isinstance(stage, PipelineStage):
        raise TypeError(f"register_hlo_module_transformation: stage must be a PipelineStage, got {stage!r}")
    raise NotImplementedError(f"register_hlo_module_transformation({name!r}): the PJRT plugin ember compiles with "
                              "takes no compiler passes from outside")


def clear_hlo_module_transformation(name: str, stage: PipelineStage = PipelineStage.PRE_SCHEDULER,
                                    platforms: Sequence[str] | str | None = None) -> bool:
    """Remove a registered pass: none can be registered on ember, so there is nothing to remove (False)."""
    return False


__all__ = ["PipelineStage", "clear_hlo_module_transformation", "register_hlo_module_transformation"]
