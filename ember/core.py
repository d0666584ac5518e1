"""jax.core on ember: the names of JAX's core that libraries read (JAX 0.10.2's jax.core; the rest of JAX's
extension API is ember.extend.core and ember.interpreters).

ShapedArray is ember's abstract value (AbstractValue is the same type: ember has one kind), Tracer ember's traced
value (`isinstance(x, jax.core.Tracer)` is whether x is being staged), Trace the staging that records it (ember's
Builder), Atom an IR operand (a Var or a Literal), eval_jaxpr evaluates a jaxpr in the current context."""
from __future__ import annotations

from typing import Any

from ember._api.scopes import ensure_compile_time_eval as ensure_compile_time_eval
from ember._core import Builder, ShapedArray, Tracer
from ember._core.ir import Atom as Atom
from ember.extend.core import eval_jaxpr as eval_jaxpr

AbstractValue = ShapedArray
Trace = Builder
ParamDict = dict[str, Any]
Value = Any
eval_context = ensure_compile_time_eval


def max_dim(d1: int, d2: int) -> int:
    """The larger of two dimension sizes (ember's shapes are concrete ints)."""
    return max(int(d1), int(d2))


def min_dim(d1: int, d2: int) -> int:
    return min(int(d1), int(d2))


__all__ = ["AbstractValue", "Atom", "ParamDict", "ShapedArray", "Trace", "Tracer", "Value", "ensure_compile_time_eval",
           "eval_context", "eval_jaxpr", "max_dim", "min_dim"]
