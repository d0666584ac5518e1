"""jax.interpreters.mlir on ember: lowerings of primitives defined with ember.extend.core.Primitive.

`register_lowering(prim, lower_fun(f, multiple_results))` lowers prim as the function f of its operands (written
with jax.numpy / jax.lax), staged by ember at the operands' types; `platform=` restricts it to one platform.
ember writes StableHLO as text and has no MLIR Python bindings: a rule of (ctx, *operands) gets the module's values
as opaque objects it may pass to `emit_python_callback` (a host callback, as equinox's noinline lowers); one using
JAX's `ir` or `hlo` modules is refused with an error naming the primitive, when it would be used."""
from ember.extend._protocol import LoweredFunction, emit_python_callback, lower_fun, register_lowering

__all__ = ["LoweredFunction", "emit_python_callback", "lower_fun", "register_lowering"]
