import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_ENABLE_X64", "1")  # JAX is an oracle here: let it compute in float64 like ember
sys.path.insert(0, os.path.dirname(__file__))
