"""ember: stage Python functions out to a typed IR, transform it (grad, ...), lower it to StableHLO and run it
with XLA through PJRT.

The package is layered; imports point one way: _core -> _hlo -> _prims -> _transforms -> (_control) -> _runtime
-> _api -> _numpy -> the public faces (this module, lax, numpy, tree, tree_util). tests/test_layers.py enforces it."""
from ember import config as config, lax as lax, numpy as numpy, ops as ops, tree as tree, tree_util as tree_util
from ember import random as random
from ember import checkpoints as checkpoints, nn as nn, optim as optim, scipy as scipy, stages as stages
from ember import export as export, image as image, profiler as profiler, version as version
from ember import custom_batching as custom_batching, custom_derivatives as custom_derivatives
from ember import dtypes as dtypes, errors as errors, typing as typing
from ember import debug as debug, dlpack as dlpack, experimental as experimental, passes as passes
from ember import distributed as distributed, ffi as ffi, monitoring as monitoring
from ember._api.callbacks import pure_callback as pure_callback
from ember._runtime.callbacks import effects_barrier as effects_barrier
from ember._api import clear_caches as clear_caches, disable_jit as disable_jit
from ember._api import compile as compile, grad as grad, jit as jit, make_ir as make_ir  # noqa: A004
from ember._api import stage_out as stage_out, value_and_grad as value_and_grad, vjp as vjp
from ember._api import eval_ir_public as eval_ir
from ember._api import ShapeDtypeStruct as ShapeDtypeStruct, eval_shape as eval_shape, make_jaxpr as make_jaxpr
from ember._api.environment import (block_until_ready as block_until_ready, copy_to_host_async as copy_to_host_async,
                                    default_backend as default_backend, device_count as device_count,
                                    device_get as device_get, host_count as host_count, host_id as host_id,
                                    host_ids as host_ids, live_arrays as live_arrays,
                                    local_device_count as local_device_count, local_devices as local_devices,
                                    print_environment_info as print_environment_info, process_count as process_count,
                                    process_index as process_index, process_indices as process_indices,
                                    typeof as typeof)
from ember._core.config import State as _State
from ember._api.forward import hessian as hessian, jacfwd as jacfwd, jacobian as jacobian, jacrev as jacrev
from ember._api.forward import jvp as jvp, linearize as linearize
from ember._api.transpose import linear_transpose as linear_transpose
from ember._api.scopes import checking_leaks as checking_leaks, ensure_compile_time_eval as ensure_compile_time_eval
from ember._api.scopes import make_user_context as make_user_context, named_call as named_call
from ember._api.scopes import named_scope as named_scope
from ember._api.closures import closure_convert as closure_convert, custom_gradient as custom_gradient
from ember._api.autodiff import fwd_and_bwd as fwd_and_bwd
from ember._api.vmap import vmap as vmap
from ember._core.dtypes import float0 as float0
from ember._control import checkpoint as checkpoint, checkpoint_policies as checkpoint_policies, remat as remat
from ember._control import custom_jvp as custom_jvp, custom_vjp as custom_vjp
from ember._core import ConcretizationTypeError as ConcretizationTypeError, IR as IR, IRTypeError as IRTypeError
from ember._core import ShapedArray as ShapedArray, UnexpectedTracerError as UnexpectedTracerError
from ember._core import check_ir as check_ir
from ember._hlo import lower as lower
from ember._runtime import Array as Array, CompileError as CompileError, Compiled as Compiled, Lowered as Lowered
from ember._numpy.creation import array as array, asarray as asarray
from ember._runtime import PjrtError as PjrtError
from ember._runtime import default_device as _runtime_default_device
from ember._runtime import device_put as device_put, devices as devices
from ember._runtime import Shard as Shard
from ember._runtime.pjrt import Device as Device
from ember import sharding as sharding
from ember.sharding import NamedSharding as NamedSharding, P as P, make_mesh as make_mesh, set_mesh as set_mesh
from ember._api.sharding import make_array_from_callback as make_array_from_callback
from ember._api.sharding import make_array_from_process_local_data as make_array_from_process_local_data
from ember._api.sharding import make_array_from_single_device_arrays as make_array_from_single_device_arrays
from ember._api.sharding import reshard as reshard
from ember._control import shard_map as shard_map, smap as smap
from ember._api.pmap import pmap as pmap
from ember._transforms import dce as dce
from ember import ref as ref
from ember.ref import Ref as Ref, empty_ref as empty_ref, free_ref as free_ref, freeze as freeze, new_ref as new_ref

from ember._numpy.indexing import dslice as ds
from ember._api.autodiff import DidntWant as _DidntWant, DontWant as _DontWant, GradRef as _GradRef
from ember._api.autodiff import GradValue as _GradValue
import types as _types
from ember._core.sharding import MemorySpace as _MemorySpace

ad = _types.SimpleNamespace(DontWant=_DontWant, DidntWant=_DidntWant, GradRef=_GradRef, GradValue=_GradValue)
memory = _types.SimpleNamespace(Space=_MemorySpace)
memory.__doc__ = "JAX's jax.memory: Space, the memory-space enum (device_put(x, ember.memory.Space.Device))."
ad.__doc__ = ("JAX's jax.ad: the marks of vjp_fn.with_refs (GradValue, DontWant) and what it returns for them "
              "(GradRef, DidntWant).")

__version__ = version.__version__

# JAX's top-level flags: `with ember.debug_nans(True): ...`, `ember.enable_x64.value`
debug_nans, debug_infs, enable_x64 = _State("debug_nans"), _State("debug_infs"), _State("enable_x64")
log_compiles, explain_cache_misses = _State("log_compiles"), _State("explain_cache_misses")
check_tracer_leaks, enable_checks = _State("check_tracer_leaks"), _State("enable_checks")
numpy_dtype_promotion, numpy_rank_promotion = _State("numpy_dtype_promotion"), _State("numpy_rank_promotion")
transfer_guard, transfer_guard_host_to_device = _State("transfer_guard"), _State("transfer_guard_host_to_device")
transfer_guard_device_to_host = _State("transfer_guard_device_to_host")
transfer_guard_device_to_device = _State("transfer_guard_device_to_device")
no_tracing, no_execution = _State("no_tracing"), _State("no_execution")
default_matmul_precision, allow_f16_reductions = _State("default_matmul_precision"), _State("allow_f16_reductions")
# JAX's other top-level context managers of options (ember/_core/config_jax.py says what each does here)
debug_key_reuse, default_prng_impl = _State("debug_key_reuse"), _State("default_prng_impl")
legacy_prng_key, enable_custom_prng = _State("legacy_prng_key"), _State("enable_custom_prng")
threefry_partitionable, softmax_custom_jvp = _State("threefry_partitionable"), _State("softmax_custom_jvp")
thread_guard, auto_pcast = _State("thread_guard"), _State("auto_pcast")
array_garbage_collection_guard = _State("array_garbage_collection_guard")
remove_size_one_mesh_axis_from_type = _State("remove_size_one_mesh_axis_from_type")
jax2tf_associative_scan_reductions = _State("jax2tf_associative_scan_reductions")


class _DefaultDevice(_State):
    """`with ember.default_device(device):` runs the block's computations on device when no argument is committed
    to one (JAX's jax.default_device; a platform name means its first device); `ember.default_device()` is the
    device computations run on now."""

    def __call__(self, *device):  # type: ignore[override]
        if not device:
            return _runtime_default_device()
        return super().__call__(*device)


default_device = _DefaultDevice("default_device")

__all__ = [
    "Array", "array", "asarray", "block_until_ready", "check_ir", "checkpoint", "checkpoint_policies", "checkpoints",
    "clear_caches", "compile", "Compiled", "CompileError", "ConcretizationTypeError", "config", "copy_to_host_async",
    "custom_jvp", "custom_vjp", "dce", "debug", "debug_infs", "debug_nans", "default_backend", "default_device",
    "distributed", "dlpack", "effects_barrier", "passes",
    "device_count", "device_get", "device_put", "devices", "disable_jit", "dtypes", "enable_x64", "errors", "eval_ir",
    "eval_shape", "experimental", "explain_cache_misses", "export", "float0", "grad", "hessian", "host_count",
    "host_id", "host_ids",
    "IR", "IRTypeError", "jacfwd", "jacobian", "jacrev", "jit", "jvp", "lax", "linear_transpose", "linearize",
    "live_arrays", "local_device_count", "local_devices", "log_compiles", "lower", "Lowered", "make_ir", "make_jaxpr",
    "nn", "numpy", "optim", "PjrtError", "print_environment_info", "process_count", "process_index",
    "process_indices", "profiler", "pure_callback", "random", "remat", "scipy", "ShapedArray", "ShapeDtypeStruct",
    "stage_out",
    "stages", "tree", "tree_util", "typeof", "typing", "UnexpectedTracerError", "value_and_grad", "vjp", "vmap",
    "check_tracer_leaks", "checking_leaks", "closure_convert", "custom_gradient", "enable_checks",
    "ensure_compile_time_eval", "named_call", "named_scope", "numpy_dtype_promotion", "numpy_rank_promotion",
    "transfer_guard", "transfer_guard_device_to_device", "transfer_guard_device_to_host",
    "transfer_guard_host_to_device", "version", "no_execution", "no_tracing", "image", "custom_batching",
    "default_matmul_precision", "fwd_and_bwd", "allow_f16_reductions", "custom_derivatives", "make_user_context",
    "Device", "NamedSharding", "P", "Shard", "make_array_from_callback", "make_array_from_process_local_data",
    "make_array_from_single_device_arrays", "make_mesh", "pmap", "reshard", "set_mesh", "shard_map", "sharding",
    "Ref", "empty_ref", "free_ref", "freeze", "new_ref", "ref", "ffi", "ad", "ds", "memory", "smap",
    "debug_key_reuse", "default_prng_impl", "legacy_prng_key", "enable_custom_prng", "threefry_partitionable",
    "softmax_custom_jvp", "thread_guard", "auto_pcast", "array_garbage_collection_guard",
    "remove_size_one_mesh_axis_from_type", "jax2tf_associative_scan_reductions", "monitoring",
]
