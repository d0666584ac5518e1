"""ember.scipy.sparse: jax.scipy.sparse (its linalg submodule: the Krylov solvers cg, gmres and bicgstab)."""
from ember.scipy.sparse import linalg as linalg

__all__ = ["linalg"]
