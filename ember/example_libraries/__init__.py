"""ember.example_libraries: the small libraries JAX ships as jax.example_libraries and that JAX's own examples and
many tutorials use: `optimizers` (optimizers as (init, update, get_params) triples of functions over pytrees) and
`stax` (neural-network layers as (init_fun, apply_fun) pairs, composed with serial, parallel, FanOut, ...).
Written from their documentation, for programs that `import jax.example_libraries` to run unchanged."""
from ember.example_libraries import optimizers as optimizers
from ember.example_libraries import stax as stax

__all__ = ["optimizers", "stax"]
