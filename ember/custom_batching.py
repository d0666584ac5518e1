"""ember.custom_batching, as jax.custom_batching: custom_vmap (a function with its own batching rule, def_vmap)
and sequential_vmap (a function batched by a loop over the batch)."""
from ember._control.custom_batching import custom_vmap as custom_vmap, sequential_vmap as sequential_vmap

__all__ = ["custom_vmap", "sequential_vmap"]
