"""ember.experimental (jax.experimental): io_callback (docs/callbacks.md), checkify (docs/checkify.md)."""
from ember._api.callbacks import io_callback as io_callback
from ember.experimental import checkify as checkify

__all__ = ["checkify", "io_callback"]
