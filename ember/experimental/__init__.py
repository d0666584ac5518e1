"""ember.experimental (jax.experimental): io_callback (docs/callbacks.md), checkify (docs/checkify.md), mesh_utils,
shard_map (JAX's older home of ember.shard_map), hijax (JAX's names for high-level types: ember has none to stage;
docs/as_jax.md)."""
from ember._api.callbacks import io_callback as io_callback
from ember.experimental import checkify as checkify
from ember.experimental import hijax as hijax
from ember.experimental import mesh_utils as mesh_utils
from ember.experimental import shard_map as shard_map

__all__ = ["checkify", "hijax", "io_callback", "mesh_utils", "shard_map"]
