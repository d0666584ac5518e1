"""Which tests leave the default run for the slow tier (`-m slow`), beside the marks written at the tests themselves:
the default run has to stay under 8 minutes on CI's 2 cores (README), and measured on that machine it took 18.

A rule names a test function (its file under tests/ and its name) and what of it is slow:
- `Every(k, why)`: of its parametrized cases, every k-th one (the first, the (k+1)-th, ...) stays in the default run,
  the others are slow: the same check over fewer inputs, operations or dtypes by default, all of them in the slow
  tier;
- `Ids(ids, why)`: the cases with these ids are slow;
- `Whole(why)`: every case is slow.
`why` says which default test covers the same ground. conftest.py applies the rules at collection, before `-m`
selects, so `-m slow` runs exactly what the default run leaves out; tests/test_default_tier.py checks that every
rule names a test that exists. The measured times (seconds under load, 2 cores) are in the comments.

The rules never take the last default test of a primitive: tests/prims/ keep their forward, jvp, grad and vmap
checks of every primitive; only their Jacobian sweeps (jacfwd == jacrev and the Hessian, a second derivative the
grad and jvp checks already bound) and single heavy cases are thinned."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Every:
    k: int
    why: str


@dataclasses.dataclass(frozen=True)
class Ids:
    ids: tuple[str, ...]
    why: str


@dataclasses.dataclass(frozen=True)
class Whole:
    why: str


_SWEEP = "the same check over fewer cases"
_JACOBIANS = "jacfwd == jacrev and the Hessian over fewer primitives; every primitive's jvp/grad/vmap stay"

RULES: dict[str, Every | Ids | Whole] = {
    # primitives' Jacobian sweeps and single heavy cases (tests/prims)
    "prims/test_lax_special.py::test_vmap": Ids(("random_gamma-(2,)x(3,)-float32-first",),
                                                "random_gamma's batching: tests/test_random.py::"
                                                "test_gamma_under_vmap_and_jit (43 s here)"),
    "prims/test_lax_special.py::test_jacobians": Every(2, _JACOBIANS),
    "prims/test_elementwise.py::test_jacobians": Every(2, _JACOBIANS),
    "prims/test_structural.py::test_jacobians": Every(2, _JACOBIANS),
    "prims/test_control.py::test_jacobians": Every(2, _JACOBIANS),
    "prims/test_windowed.py::test_jacobians": Every(2, _JACOBIANS),
    "prims/test_linalg_prims.py::test_jacobians": Every(2, _JACOBIANS),
    "prims/test_conv.py::test_jacobians": Every(2, _JACOBIANS),
    "prims/test_windowed.py::test_cumulative_scans": Every(2, _SWEEP + " (each scan's own tests in prims stay)"),
    # sweeps against oracles: a part of the cases by default
    "test_eager_dispatch.py::test_arrays_with_scalars": Every(3, _SWEEP + " (ops; every dtype pair: "
                                                          "test_array_pairs_of_every_dtype)"),
    "test_eager_dispatch.py::test_broadcasting": Every(2, _SWEEP),
    "test_eager_dispatch.py::test_array_pairs_of_every_dtype": Every(2, _SWEEP),
    "test_scipy_special.py::test_values_match_scipy": Every(2, _SWEEP),
    "test_scipy_special.py::test_gradients_under_jit_and_vmap": Every(2, _SWEEP),
    "test_scipy_special.py::test_tuple_functions_match_scipy": Every(2, _SWEEP),
    "test_scipy_stats.py::test_distribution_matches_scipy_under_jit_and_vmap": Every(2, _SWEEP),
    "test_linalg.py::test_gradients_against_jax_and_finite_differences": Every(2, _SWEEP),
    "test_linalg.py::test_cholesky_solve_inv_det_float64": Every(2, _SWEEP),
    "test_linalg.py::test_vmap_matches_per_member": Every(2, _SWEEP),
    "test_reduction_accuracy.py::test_at_least_as_accurate_as_jax": Every(2, _SWEEP),
    "test_nn_functions.py::test_activation_values_and_gradients_match_jax": Every(2, _SWEEP),
    "test_complex.py::test_structural_primitives_move_complex_values": Every(2, _SWEEP),
    "test_complex.py::test_reductions_products_and_selection": Every(2, _SWEEP),
    "test_complex.py::test_unary_functions": Every(2, _SWEEP),
    "test_numpy_gaps.py::test_quantile_weights_match_numpy_and_jax": Every(2, _SWEEP),
    "test_numpy_gaps.py::test_quantile_methods": Every(2, _SWEEP),
    "test_random.py::test_kolmogorov_smirnov": Every(3, _SWEEP + " (every sampler bit for bit with JAX: "
                                                    "test_sampler_matches_jax_bit_for_bit)"),
    "test_random.py::test_sampler_matches_jax_under_jit_and_with_raw_keys": Every(3, _SWEEP),
    "test_random.py::test_discrete_frequencies": Every(2, _SWEEP),
    "test_random.py::test_gamma_family_matches_jax_nearly_bit_for_bit": Every(3, _SWEEP),
    "test_random.py::test_gradients_match_jax": Every(2, _SWEEP),
    "test_forward.py::test_jacobians_of_pytree_functions": Every(2, _SWEEP),
    "test_shape_poly.py::test_exported_with_symbolic_shapes_as_jax": Every(2, _SWEEP),
    "test_examples.py::test_example_runs": Every(2, _SWEEP),
    "test_stax.py::test_layer_matches_jax": Every(2, _SWEEP),
    "test_program_cache.py::test_fresh_closures_over_new_arrays_compile_once": Every(2, _SWEEP),
    "test_random_programs.py::test_random_program": Every(2, _SWEEP),
    "test_lax_linalg_names.py::test_eig_vector_derivatives_are_jaxs": Every(3, _SWEEP),
    "test_jax_docs_indexing.py::test_docstring_examples": Every(2, _SWEEP),
    "test_numerics.py::test_binary_float_functions_promote_before_making_inexact": Every(2, _SWEEP),
    "test_numerics.py::test_integer_power_matches_numpy": Every(2, _SWEEP),
    "test_numerics.py::test_arg_extremes_pick_the_first_nan": Every(2, _SWEEP),
    "test_numerics.py::test_half_precision_reductions_accumulate_in_float32": Every(2, _SWEEP),
    "test_scipy_optimize.py::test_float64_iterates_match_jax": Every(2, _SWEEP),
    "test_fastpath.py::test_memory_stays_flat_over_many_calls": Every(2, _SWEEP),
    "test_numpy_cumulative.py::test_values_and_dtypes": Every(2, _SWEEP),
    "test_backend_forms.py::test_dot_forms_match_numpy": Every(2, _SWEEP),
    "test_composition_matrix.py::test_under_the_persistent_cache": Every(2, _SWEEP),
    "test_scaled_matmul.py::test_scaled_dot_as_jax": Every(2, _SWEEP),
    "test_optim.py::test_optimizer_matches_optax": Every(2, _SWEEP),
    "test_scipy_sparse_linalg.py::test_matches_jax_and_solves": Every(2, _SWEEP),
    "test_scipy_sparse_linalg.py::test_grad_jit_and_vmap_match_jax": Every(3, _SWEEP),
    "test_scipy_cluster_interpolate.py::test_interpolator_matches_scipy_and_jax": Every(2, _SWEEP),
    "test_numpy_indexing.py::test_every_integer_index_dtype": Every(2, _SWEEP),
    "test_libraries.py::test_library_program_matches_jax": Every(2, _SWEEP + " (equinox and flax programs)"),
    # single tests whose ground a default test covers
    "test_as_jax.py::test_jax_scipy_program_runs_unchanged": Whole(
        "a JAX program unchanged: test_as_jax.py::test_a_jax_program_runs_unchanged_with_jaxs_numbers (45 s)"),
    "test_sort_kernel.py::test_top_k_is_jaxs_bit_for_bit": Whole(
        "top_k's order and transformations: test_top_k_transforms_as_jaxs and tests/prims/test_sorting.py (40 s)"),
    "reliability/test_runtime.py::test_multiprocessing_spawn_workers_run_ember": Whole(
        "processes: test_fork_child_gets_a_clear_error_and_parent_keeps_working (26 s)"),
    "reliability/test_runtime.py::test_fork_before_the_first_computation_is_fine": Whole(
        "fork: test_fork_child_gets_a_clear_error_and_parent_keeps_working (15 s)"),
    "reliability/test_compile_cache.py::test_a_program_partitioned_over_devices_is_loaded_by_the_next_process": Whole(
        "a second process loading the cache: test_a_second_process_loads_what_the_first_compiled (24 s)"),
    "test_jax_docs_training.py::test_simple_network_predictions": Whole(
        "training programs of JAX's docs: the module's other tests (21 s)"),
    "test_dlpack.py::test_exit_with_live_exports_and_views": Whole(
        "exiting with live objects: tests/test_pjrt.py::test_objects_alive_at_interpreter_exit (21 s)"),
    "test_linalg.py::test_second_derivative_of_slogdet_and_cholesky": Whole(
        "second derivatives of linalg: tests/prims/test_linalg_prims.py's Jacobians (16 s)"),
    "test_linalg.py::test_expm_gradient_against_jax": Whole(
        "expm's derivative: test_gradients_against_jax_and_finite_differences (13 s)"),
    "test_scipy_optimize.py::test_options": Whole("minimize's options: test_jit_vmap_and_args (13 s)"),
}


def rule_for(path: str, name: str) -> Every | Ids | Whole | None:
    """The rule of the test function `name` in tests/`path` (a path relative to tests/, with '/')."""
    return RULES.get(f"{path}::{name}")
