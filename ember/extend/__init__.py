"""ember.extend: JAX's extension API (jax.extend) over ember's rule protocol (docs/extending.md).

`ember.extend.core` defines primitives the JAX way (Primitive, def_impl, def_abstract_eval) and names the IR's
objects as JAX's jaxprs (Jaxpr, ClosedJaxpr, JaxprEqn, Var, Literal); their rules go into the tables of
`ember.interpreters.ad`, `batching` and `mlir`. Under ember.as_jax these are `jax.extend.core` and
`jax.interpreters.*`, so libraries that define their own primitives (equinox) run on ember."""
from ember.extend import core as core, linear_util as linear_util, source_info_util as source_info_util

__all__ = ["core", "linear_util", "source_info_util"]
