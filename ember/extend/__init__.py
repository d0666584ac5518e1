"""ember.extend: JAX's extension API (jax.extend) over ember's rule protocol (docs/extending.md).

`ember.extend.core` defines primitives the JAX way (Primitive, def_impl, def_abstract_eval) and names the IR's
objects as JAX's jaxprs (Jaxpr, ClosedJaxpr, JaxprEqn, Var, Literal); their rules go into the tables of
`ember.interpreters.ad`, `batching` and `mlir`. Under ember.as_jax these are `jax.extend.core` and
`jax.interpreters.*`, so libraries that define their own primitives (equinox) run on ember.

The other submodules: backend (ember's PJRT clients as backends, clear_backends, compile options), random (PRNG
implementations, the Threefry hash), sharding (XLA's sharding form and its protobuf), lowering (a lowering rule's
context); mlir, xla and pallas name jaxlib's MLIR tools, XLA compiler passes and Pallas, which ember does not have:
their functions raise, saying so."""
from ember.extend import backend as backend, core as core, linear_util as linear_util, lowering as lowering
from ember.extend import mlir as mlir, pallas as pallas, random as random, sharding as sharding
from ember.extend import source_info_util as source_info_util, xla as xla

__all__ = ["backend", "core", "linear_util", "lowering", "mlir", "pallas", "random", "sharding", "source_info_util",
           "xla"]
