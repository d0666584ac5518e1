"""ember.scipy: the parts of jax.scipy that model code imports (ember.scipy.special)."""
from ember.scipy import special as special

__all__ = ["special"]
