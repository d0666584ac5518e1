"""ember.scipy: the parts of jax.scipy that model code imports (ember.scipy.special, ember.scipy.linalg,
ember.scipy.signal, ember.scipy.stats, ember.scipy.fft, ember.scipy.integrate, ember.scipy.ndimage)."""
from ember.scipy import fft as fft
from ember.scipy import integrate as integrate
from ember.scipy import linalg as linalg
from ember.scipy import ndimage as ndimage
from ember.scipy import signal as signal
from ember.scipy import special as special
from ember.scipy import stats as stats

__all__ = ["fft", "integrate", "linalg", "ndimage", "signal", "special", "stats"]
