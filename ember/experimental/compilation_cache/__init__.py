"""ember.experimental.compilation_cache, as jax.experimental.compilation_cache: its module compilation_cache holds
set_cache_dir and reset_cache, for the persistent compilation cache (docs/compilation_cache.md)."""
from ember.experimental.compilation_cache import compilation_cache as compilation_cache

__all__ = ["compilation_cache"]
