"""ember.scipy.optimize: jax.scipy.optimize's minimize (BFGS, and L-BFGS as
"l-bfgs-experimental-do-not-rely-on-this") and its OptimizeResults."""
from ember.scipy.optimize._minimize import OptimizeResults as OptimizeResults, minimize as minimize

__all__ = ["OptimizeResults", "minimize"]
