"""ember.experimental (jax.experimental): io_callback (docs/callbacks.md)."""
from ember._api.callbacks import io_callback as io_callback

__all__ = ["io_callback"]
