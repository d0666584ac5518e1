"""ember.debug (jax.debug): printing and callbacks from compiled code (docs/callbacks.md)."""
from ember._api.callbacks import debug_callback as callback, debug_print as print  # noqa: A004

__all__ = ["callback", "print"]
