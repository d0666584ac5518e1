"""ember.scipy.cluster: jax.scipy.cluster (its vq submodule: vector quantization)."""
from ember.scipy.cluster import vq as vq

__all__ = ["vq"]
