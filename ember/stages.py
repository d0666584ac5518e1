"""ember.stages: the ahead-of-time stages of a jitted function, as jax.stages: `jit(f).trace(*args)` is a Traced,
`.lower()` a Lowered, `.compile()` a Compiled (see docs/aot.md)."""
from ember._api.stages import Compiled as Compiled, CompiledMemoryStats as CompiledMemoryStats
from ember._api.stages import Lowered as Lowered, Traced as Traced

__all__ = ["Compiled", "CompiledMemoryStats", "Lowered", "Traced"]
