"""ember.experimental (jax.experimental): io_callback (docs/callbacks.md), checkify (docs/checkify.md), mesh_utils,
multihost_utils (values shared between a run's processes: docs/distributed.md), jet (Taylor-mode derivatives:
docs/transformations.md), compute_on (JAX's compute types; on the CPU the host is the device), ode (odeint:
docs/scipy.md), rnn (an LSTM over cuDNN's flat weights, computed on any device: docs/nn.md), shard_map (JAX's older
home of ember.shard_map), hijax (JAX's names for high-level types: ember has none to stage; docs/as_jax.md),
compilation_cache (set_cache_dir, reset_cache), roofline (flops and bytes estimated from a function's IR:
docs/performance.md), serialize_executable (compiled functions as bytes, loaded without compiling: docs/aot.md),
random (stateful_rng: docs/random.md), key_reuse (the key-reuse checker: docs/random.md), buffer_callback (host
callbacks that fill their results in place: docs/callbacks.md), control_deps (an order between computations:
docs/control_flow.md), custom_partitioning (the function's own computation, its rules kept: docs/sharding.md),
profiler (get_profiled_instructions_proto: docs/debugging.md), shard_alike (two values given the same sharding:
docs/sharding.md), xla_metadata (set_xla_metadata: XLA frontend attributes on staged operations: docs/debugging.md),
sparse (BCOO and the other sparse formats, sparsify: docs/sparse.md), and JAX's names for extended dtypes and their
arrays (primal_tangent_dtype, EArray, cur_qdd: ember computes on none of them)."""
import importlib

from ember._api.callbacks import io_callback as io_callback
from ember.experimental import buffer_callback as buffer_callback
from ember.experimental import checkify as checkify
from ember.experimental import compilation_cache as compilation_cache
from ember.experimental import compute_on as compute_on
from ember.experimental import control_deps as control_deps
from ember.experimental import custom_partitioning as custom_partitioning
from ember.experimental import random as random
from ember.experimental._extended import EArray as EArray, cur_qdd as cur_qdd
from ember.experimental._extended import primal_tangent_dtype as primal_tangent_dtype
from ember.experimental import hijax as hijax
from ember.experimental import jet as jet
from ember.experimental import key_reuse as key_reuse
from ember.experimental import mesh_utils as mesh_utils
from ember.experimental import multihost_utils as multihost_utils
from ember.experimental import profiler as profiler
from ember.experimental import ode as ode
from ember.experimental import rnn as rnn
from ember.experimental import roofline as roofline
from ember.experimental import serialize_executable as serialize_executable
from ember.experimental import shard_alike as shard_alike
from ember.experimental import shard_map as shard_map
from ember.experimental import xla_metadata as xla_metadata

__all__ = ["EArray", "buffer_callback", "checkify", "compilation_cache", "compute_on", "control_deps", "cur_qdd",
           "custom_partitioning", "hijax", "io_callback", "jet", "key_reuse", "mesh_utils", "multihost_utils", "ode",
           "primal_tangent_dtype", "profiler", "random", "rnn", "roofline", "serialize_executable", "shard_alike",
           "shard_map", "sparse", "xla_metadata"]


def __getattr__(name: str) -> object:
    """ember.experimental.sparse, imported on first use (it builds on ember's jit and numpy, which `import ember`
    defines after this package)."""
    if name == "sparse":
        return importlib.import_module("ember.experimental.sparse")
    raise AttributeError(f"module 'ember.experimental' has no attribute {name!r}")
