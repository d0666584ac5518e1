"""ember.experimental.shard_alike (jax.experimental.shard_alike): shard_alike(x, y) ties two values of one shape
(trees of them, leaf by leaf) so that XLA's partitioner gives them the same sharding, whichever it picks for
either; the values are unchanged. Lowered as JAX lowers it for XLA's GSPMD partitioner (a shard group of custom
calls @Sharding, `{unknown shard_as N}`); ember has no Shardy lowering (JAX's default, `sdy.sharding_group`), and
inside a shard_map body, where values are each device's own blocks, it ties nothing (docs/sharding.md)."""
from ember._api.sharding import shard_alike as shard_alike

__all__ = ["shard_alike"]
