import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# JAX is an oracle here: let it compute in float64 like ember. Set through jax.config, not JAX_ENABLE_X64, which
# ember honours too (it would turn on ember's own 64-bit mode for the whole run).
os.environ.pop("JAX_ENABLE_X64", None)
os.environ.pop("EMBER_ENABLE_X64", None)
try:
    import jax
    jax.config.update("jax_enable_x64", True)
except ImportError:  # the tests that use JAX skip without it
    pass
sys.path.insert(0, os.path.dirname(__file__))
