"""jax.interpreters.ad on ember: the JVP and transpose rules of primitives defined with ember.extend.core.Primitive
(primitive_jvps, primitive_transposes, and the rule makers), and JAX's symbolic zeros (Zero) and undefined primals
(UndefinedPrimal) that those rules receive. ember derives each primitive's VJP from them, as JAX does
(ember/extend/_protocol.py)."""
from ember.extend._protocol import (UndefinedPrimal, Zero, add_jaxvals, add_tangents, defbilinear, defjvp, defjvp2,
                                    deflinear, deflinear2, get_primitive_transpose, instantiate_zeros,
                                    is_undefined_primal, primitive_jvps, primitive_transposes, zeros_like_aval)

__all__ = ["UndefinedPrimal", "Zero", "add_jaxvals", "add_tangents", "defbilinear", "defjvp", "defjvp2", "deflinear",
           "deflinear2", "get_primitive_transpose", "instantiate_zeros", "is_undefined_primal", "primitive_jvps",
           "primitive_transposes", "zeros_like_aval"]
