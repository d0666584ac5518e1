"""jax.interpreters.ad on ember: the JVP and transpose rules of primitives defined with ember.extend.core.Primitive
(primitive_jvps, primitive_transposes, and the rule makers), and JAX's symbolic zeros (Zero) and undefined primals
(UndefinedPrimal) that those rules receive. ember derives each primitive's VJP from them, as JAX does
(ember/extend/_protocol.py)."""
from ember.extend._protocol import (UndefinedPrimal, Zero, add_jaxvals, add_tangents, defbilinear, defjvp, defjvp2,
                                    deflinear, deflinear2, get_primitive_transpose, instantiate_zeros,
                                    is_undefined_primal, primitive_jvps, primitive_transposes, zeros_like_aval)

from ember._core.trace import Tracer as _Tracer


class _JVPTracerType(type):
    def __instancecheck__(cls, x: object) -> bool:
        return isinstance(x, _Tracer) and x.builder.depends_on_inputs(x.ir_var)


class JVPTracer(metaclass=_JVPTracerType):
    """For isinstance (JAX's JVPTracer: a value carrying a tangent): a tracer whose value depends on its staging's
    inputs (one computed from constants alone is a plain value in JAX's JVP trace). Its `_trace` is its staging,
    whose `main` is the staging itself (ember.extend.core.find_top_trace)."""

__all__ = ["JVPTracer", "UndefinedPrimal", "Zero", "add_jaxvals", "add_tangents", "defbilinear", "defjvp", "defjvp2",
           "deflinear", "deflinear2", "get_primitive_transpose", "instantiate_zeros", "is_undefined_primal",
           "primitive_jvps", "primitive_transposes", "zeros_like_aval"]
