"""ember.scipy: the parts of jax.scipy that model code imports (ember.scipy.special, ember.scipy.linalg,
ember.scipy.signal)."""
from ember.scipy import linalg as linalg
from ember.scipy import signal as signal
from ember.scipy import special as special

__all__ = ["linalg", "signal", "special"]
