"""ember.interpreters: the rule tables of JAX's extension API (jax.interpreters.ad, batching, mlir) for primitives
defined with ember.extend.core.Primitive, and partial evaluation (partial_eval) of a function some of whose
arguments are known (docs/extending.md)."""
from ember.interpreters import ad as ad, batching as batching, mlir as mlir, partial_eval as partial_eval

__all__ = ["ad", "batching", "mlir", "partial_eval"]
