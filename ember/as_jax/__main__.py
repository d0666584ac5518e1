"""`python -m ember.as_jax program.py args...`: run a JAX program on ember, unchanged (ember/as_jax/__init__.py)."""
import sys

from ember.as_jax import main

main(sys.argv[1:])
