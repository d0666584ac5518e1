"""ember.scipy: jax.scipy's submodules (ember.scipy.special, ember.scipy.linalg, ember.scipy.signal,
ember.scipy.stats, ember.scipy.fft, ember.scipy.integrate, ember.scipy.ndimage, ember.scipy.optimize,
ember.scipy.sparse, ember.scipy.spatial, ember.scipy.cluster, ember.scipy.interpolate)."""
from ember.scipy import cluster as cluster
from ember.scipy import fft as fft
from ember.scipy import integrate as integrate
from ember.scipy import interpolate as interpolate
from ember.scipy import linalg as linalg
from ember.scipy import ndimage as ndimage
from ember.scipy import optimize as optimize
from ember.scipy import signal as signal
from ember.scipy import sparse as sparse
from ember.scipy import spatial as spatial
from ember.scipy import special as special
from ember.scipy import stats as stats

__all__ = ["cluster", "fft", "integrate", "interpolate", "linalg", "ndimage", "optimize", "signal", "sparse",
           "spatial", "special", "stats"]
