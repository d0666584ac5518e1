"""ember.scipy.spatial: jax.scipy.spatial (its transform submodule: Rotation and Slerp)."""
from ember.scipy.spatial import transform as transform

__all__ = ["transform"]
