"""ember.scipy: the parts of jax.scipy that model code imports (ember.scipy.special, ember.scipy.linalg,
ember.scipy.signal, ember.scipy.stats)."""
from ember.scipy import linalg as linalg
from ember.scipy import signal as signal
from ember.scipy import special as special
from ember.scipy import stats as stats

__all__ = ["linalg", "signal", "special", "stats"]
