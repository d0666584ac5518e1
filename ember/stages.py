"""ember.stages: the ahead-of-time stages of a jitted function, as jax.stages: `jit(f).trace(*args)` is a Traced,
`.lower()` a Lowered, `.compile()` a Compiled (see docs/aot.md); each stage's `args_info` holds an ArgInfo per
argument (its type, whether donated); Wrapped is the protocol of what jit returns, CompilerOptions the type of
compiler_options."""
from ember._api.stages import ArgInfo as ArgInfo, CompilerOptions as CompilerOptions, Wrapped as Wrapped
from ember._api.stages import Compiled as Compiled, CompiledMemoryStats as CompiledMemoryStats
from ember._api.stages import Lowered as Lowered, Traced as Traced

__all__ = ["ArgInfo", "Compiled", "CompiledMemoryStats", "CompilerOptions", "Lowered", "Traced", "Wrapped"]
