"""ember.lax: the primitives as strict functions (operands of one dtype and shape; rank-0 operands broadcast),
like jax.lax. Python scalars take the dtype of the array operands.

Where the names come from, in this order:
- ember._prims: the first-order functions and types each module of ember/_prims declares in its `__all__`
  (shape, elementwise, slicing, reduction, dot, indexing, sorting, conv, windowed, special, bits, lax_helpers),
- ember._control: the control flow (cond, switch, while_loop, fori_loop, scan, map, associative_scan,
  optimization_barrier) and the cumulative scans, from its `__all__`,
- ember._core.PRIMITIVES: every registered primitive `p` as `{p.name}_p` (`exp_p`, `scan_p`, ...), ember's own
  Primitive objects (their params are ember's, not JAX's),
- ember.lax.linalg: the matrix factorisations of ember/_prims/linalg.py and qdwh of ember/_numpy/factorizations.py
  (their LAX_LINALG), as jax.lax.linalg.
Names jax.lax does not have are left out (NOT_IN_JAX_LAX below)."""
import functools as _functools
import sys as _sys
import types as _types

import numpy as _np

import ember._control as _control
import ember._prims as _prims
from ember._prims import linalg as _prims_linalg
from ember._numpy import factorizations as _factorizations
from ember._core import PRIMITIVES as _PRIMITIVES, dtypes as _dtypes
from ember._core.exports import reexport as _reexport
from ember._api.sharding import reshard as _reshard, takes_out_sharding as _takes_out_sharding
from ember._prims.explicit import resolve as _resolve_sharding
from ember._api.sharding import with_sharding_constraint as with_sharding_constraint

# ember's public names that jax.lax lacks: ember.random's hashes, and jax's top-level transformations (jax.checkpoint,
# jax.custom_jvp, ...) that ember._control also defines.
_FUNCTIONS_NOT_IN_JAX_LAX = frozenset({"threefry2x32", "threefry4x32", "philox2x32", "philox4x32", "checkpoint",
                                       "checkpoint_policies", "custom_jvp", "custom_vjp", "remat", "shard_map"})
# ember's registered primitives that jax.lax does not export as `{name}_p`: jax.lax has select_n_p (n cases) where
# ember's select takes a predicate, keeps the hashes' primitives (threefry2x32_p, ..., in jax._src.random) and
# random_gamma_grad_p outside jax.lax (random_gamma_p is jax.random's), and the custom rules and remat in its core.
_PRIMITIVES_NOT_IN_JAX_LAX = frozenset({"select", "threefry2x32", "threefry4x32", "philox2x32", "philox4x32",
                                        "random_gamma_grad", "random_gamma",
                                        "custom_jvp_call",
                                        "custom_vjp_call", "custom_lin", "remat", "name",  # (jax.ad_checkpoint.name_p)
                                        # mutable array references (jax.ref's, ember.ref):
                                        "new_ref", "ref_get", "ref_swap", "freeze",
                                        # host callbacks (jax.pure_callback, io_callback, debug.callback,
                                        # jax.experimental.buffer_callback):
                                        "pure_callback", "io_callback", "debug_callback", "buffer_callback",
                                        # jax.experimental.custom_partitioning's:
                                        "custom_partitioning",
                                        # jax.experimental.control_deps' (an ffi_call in JAX):
                                        "control_dep",
                                        # jax.experimental.shard_alike's (jax._src.shard_alike.shard_alike_p):
                                        "shard_alike",
                                        # the key-reuse checker's markers (ember._transforms.key_reuse):
                                        "key_wrap", "key_fresh", "key_consume", "key_unwrap",
                                        # jax.experimental.xla_metadata's (jax._src.xla_metadata):
                                        "xla_metadata_value",
                                        # jax.ffi.ffi_call's (jax._src.ffi.ffi_call_p):
                                        "ffi_call",
                                        # jax.debug.inspect_array_sharding's (jax._src.debugging.inspect_sharding_p):
                                        "inspect_sharding",
                                        # jax.lax.linalg's, not jax.lax's:
                                        "cholesky", "triangular_solve", "lu", "qr", "eigh", "svd", "eig", "schur",
                                        "geqrf", "cholesky_update", "hessenberg", "householder_product",
                                        "lu_pivots_to_permutation", "ormqr", "symmetric_product", "tridiagonal",
                                        "tridiagonal_solve",
                                        # jax.lax.psum_scatter's primitive (jax.lax does not export it):
                                        "reduce_scatter",
                                        # jax.shard_map's and jit's (jax.lax does not export them):
                                        "shard_map", "pjit",
                                        # jax.lax.ragged_dot_general's (jax.lax does not export it):
                                        "ragged_dot_general",
                                        # the cast to varying (jax.lax.pcast binds core.pvary_p) and JAX's
                                        # all_gather(to="invarying") primitive, which jax.lax does not export:
                                        "pvary", "all_gather_invariant",
                                        # jax.lax.scatter_apply binds scatter_p with an update computation:
                                        "scatter_apply",
                                        # lax.platform_dependent's index (jax._src.lax.control_flow's
                                        # platform_index_p) and lax.composite's primitive (jax._src.lax.lax's
                                        # composite_p), which jax.lax does not export:
                                        "platform_index", "composite",
                                        # a symbolic dimension as a value (jax's shape_poly.dim_as_value_p):
                                        "dim_as_value",
                                        # jax.experimental.sparse's (registered once ember.experimental.sparse
                                        # is imported; ember.experimental.sparse.todense_p, ...):
                                        "todense", "bcoo_todense", "bcoo_fromdense", "bcoo_extract",
                                        "bcoo_transpose", "bcoo_dot_general", "bcoo_spdot_general",
                                        "bcoo_dot_general_sampled", "bcoo_sort_indices", "bcoo_sum_duplicates",
                                        "coo_todense", "coo_fromdense", "coo_matvec", "coo_matmat", "csr_todense",
                                        "csr_fromdense", "csr_matvec", "csr_matmat", "bcsr_todense",
                                        "bcsr_fromdense", "bcsr_extract", "bcsr_dot_general", "spsolve"})


def _primitive_names(namespace: dict[str, object]) -> list[str]:
    """Bind each registered primitive, but those jax.lax lacks, into namespace as `{name}_p`; the names, sorted."""
    names = sorted(f"{name}_p" for name in _PRIMITIVES if name not in _PRIMITIVES_NOT_IN_JAX_LAX)
    namespace.update({name: _PRIMITIVES[name[:-2]] for name in names})
    return names


def _linalg_module() -> _types.ModuleType:
    """ember.lax.linalg, jax.lax.linalg's functions, primitives and enums that ember has (ember/_prims/linalg.py;
    qdwh, a composition with loops, from ember/_numpy/factorizations.py)."""
    sources = [(_prims_linalg, name) for name in _prims_linalg.LAX_LINALG]
    sources += [(_factorizations, name) for name in _factorizations.LAX_LINALG]
    names = sorted(name for _, name in sources)
    module = _types.ModuleType("ember.lax.linalg", "ember.lax.linalg: the matrix factorisations (jax.lax.linalg's "
                               "names): " + ", ".join(names) + ".")
    for source, name in sources:
        setattr(module, name, getattr(source, name))
    module.__all__ = names
    _sys.modules[module.__name__] = module  # (import ember.lax.linalg works too)
    return module


linalg = _linalg_module()

__all__ = (_reexport(globals(), [_prims, _control], exclude=_FUNCTIONS_NOT_IN_JAX_LAX)
           + _primitive_names(globals()) + ["linalg", "with_sharding_constraint"])


# The functions taking a dtype, as the user calls them: the dtype asked for is narrowed to 32 bits without
# enable_x64, with a warning (JAX's defaults). ember's own code calls the exact ones of ember._prims (an IR's
# float64 stays float64 when a transformation rebuilds it).
def _user_dtype(exact: _types.FunctionType, position: int) -> _types.FunctionType:
    def with_user_dtype(*args: object, **kwargs: object) -> object:
        if len(args) > position and args[position] is not None:
            args = (*args[:position], _dtypes.check_user_dtype(args[position], exact.__name__), *args[position + 1:])
        for key in ("dtype", "new_dtype"):
            if kwargs.get(key) is not None:
                kwargs[key] = _dtypes.check_user_dtype(kwargs[key], exact.__name__)
        return exact(*args, **kwargs)
    _functools.update_wrapper(with_user_dtype, exact)
    return with_user_dtype


convert_element_type = _user_dtype(_prims.convert_element_type, 1)
full = _user_dtype(_prims.full, 2)
iota = _user_dtype(_prims.iota, 0)
broadcasted_iota = _user_dtype(_prims.broadcasted_iota, 0)

# JAX's out_sharding= (explicit sharding mode) on the convolution and the ragged dots: the result resharded so.
conv_general_dilated = _takes_out_sharding("conv_general_dilated")(_prims.conv_general_dilated)
ragged_dot = _takes_out_sharding("ragged_dot")(_prims.ragged_dot)
ragged_dot_general = _takes_out_sharding("ragged_dot_general")(_prims.ragged_dot_general)


def rng_bit_generator(key, shape, dtype=_np.uint32, algorithm=_prims.RandomAlgorithm.RNG_DEFAULT, *,
                      out_sharding=None):
    """XLA's stateless RngBitGenerator (like jax.lax.rng_bit_generator): (the next key, random bits of the given
    shape and unsigned dtype) from a uint32[4] key (or uint64[2] with 64-bit dtypes); out_sharding (JAX's explicit
    sharding mode) splits the bits, whose values never depend on it. See ember._prims.bits.rng_bit_generator."""
    new_key, bits = _prims.rng_bit_generator(key, shape, dtype, algorithm)
    if out_sharding is not None:
        bits = _reshard(bits, _resolve_sharding("rng_bit_generator", out_sharding))
    return new_key, bits
