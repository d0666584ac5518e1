"""Which tests leave the default run for the slow tier (`-m slow`), beside the marks written at the tests themselves:
the default run has to stay under 8 minutes on CI's 2 cores (README). On this machine it took 13.6 minutes (8589
tests, 1552 s of test time on two workers) before the generic rules below; 80% of a test's time is XLA compiling
programs that are all different (about 40 ms each), so only fewer tests make the run shorter. With the rules the
default run's tests took 856 s in that run (6291 tests; estimated about 7.8 minutes).

A rule names a test function (its file under tests/ and its name) and what of it is slow:
- `Every(k, why)`: of its cases still in the default run, every k-th one (the first, the (k+1)-th, ...) stays, the
  others are slow: the same check over fewer inputs, operations or dtypes by default, all of them in the slow tier;
- `Ids(ids, why)`: the cases with these ids are slow;
- `Whole(why)`: every case is slow;
- `FirstOfEach(group, why)`: of its cases still in the default run, the first of each group (`group(case id)`)
  stays, the others are slow;
- `Primitives(names, why)`: in tests/prims, the cases of these primitives (`primitive_of(case id)`) are slow.
`why` says which default test covers the same ground. "Still in the default run" means not marked slow at the test
itself (the oracle harness already alternates dtypes, shapes and batch axes that way) nor by an earlier rule of the
same test, so a rule never takes the first of them.

Beside the rules written out in RULES, three apply to tests none names:
- a sweep (a parametrized test function outside tests/prims/ with at least 3 collected cases) keeps every
  SWEEP_EVERY-th of its default cases (`Every(SWEEP_EVERY)`), unless KEEP names it: the static and meta checks of
  the code base (every primitive has every rule, imports point one way, the API's coverage and JAX's names) and the
  crafted inputs at the trust boundaries stay whole, as the default run exists to enforce them;
- tests/prims/' forward, jvp, grad and vmap checks (PRIMITIVE_CHECKS) keep the first default case of each primitive
  (`FirstOfEach(primitive_of)`; a named variant Case, such as `svd_complex` or `scatter_add_batching_dims`, counts
  as a primitive of its own): every primitive is still computed, differentiated both ways and batched by default;
  its other dtypes, shapes and batch axes are slow (after its explicit rule, if any);
- tests/prims/' Jacobian sweeps (jacfwd == jacrev and the Hessian, second derivatives composed of the first-order
  rules that test_jvp and test_grad check) keep every JACOBIAN_EVERY-th default case (after their explicit rule).
Last, the measured heavy cases (HEAVY_SECONDS or more in the recorded default runs, tests/default_tier_durations.json)
are slow, but for the static, meta and trust-boundary checks and each file's last default case (heavy_cases, at the
end of this file); `python3 tools/default_tier_durations.py report.xml` records a default run's times.
The rules never take the last default case of a primitive's forward, jvp, grad or vmap check, except where
PRIMITIVE_EXCEPTIONS says which default test covers it (tests/test_default_tier.py checks both ways).

conftest.py applies the rules at collection (slow_cases), before `-m` selects, so `-m slow` runs exactly what the
default run leaves out; tests/test_default_tier.py checks that every rule and KEEP entry names a test that exists.
The measured times (seconds under load, 2 cores, default run of 2026-12-07) are in the comments and `why`s."""
from __future__ import annotations

import dataclasses
import functools
import json
import os
from typing import Callable, Sequence


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


@dataclasses.dataclass(frozen=True)
class FirstOfEach:
    group: Callable[[str], str]
    why: str


@dataclasses.dataclass(frozen=True)
class Primitives:
    names: tuple[str, ...]
    why: str


Rule = Every | Ids | Whole | FirstOfEach | Primitives

SWEEP_EVERY = 3
JACOBIAN_EVERY = 4
PRIMITIVE_CHECKS = ("test_forward", "test_jvp", "test_grad", "test_vmap")


def primitive_of(case_id: str) -> str:
    """The primitive a tests/prims case is about: its id starts with the Case's label, the primitive's name or the
    name of a variant Case of it (`broadcast_in_dim-(3, 4)-float32`, `scan_reverse-(4,)x(3,)`); labels have no '-'
    (tests/test_default_tier.py checks the collected ids)."""
    return case_id.split("-", 1)[0]


_SWEEP = "the same check over fewer cases"
_PRIMITIVES = ("the first case of each primitive (or variant Case) stays: every primitive computed, differentiated "
               "and batched by default; its other dtypes, shapes and batch axes in the slow tier")
_JACOBIANS = "jacfwd == jacrev and the Hessian over fewer primitives; every primitive's jvp/grad/vmap stay"
_HEAVY_JACOBIAN = "a heavy case of a Jacobian sweep; the primitive's jvp and grad checks stay"
_CACHE_LOADS = ("programs loaded from the persistent cache: tests/test_composition_matrix.py::"
                "test_under_the_persistent_cache and reliability/test_compile_cache_trust.py (in this process, its "
                "in-memory caches cleared as a new process's are)")
_NOT_REGULAR = "files that are not regular files refused"
_BUFFER_LIFETIME = ("a buffer's lifetime against the calls using it: tests/test_fastpath.py::"
                    "test_pin_unpin_delete_transitions and test_delete_from_another_thread_during_execute")
_DROP_IN = "the drop-in, in a process of its own: tests/test_as_jax.py::test_jax_and_its_modules_are_embers"
_STAX_TRAINING = ("stax models' values and gradients against JAX: test_cnn_gradients_match_jax and "
                  "test_layer_matches_jax")
_FUZZ = ("numpy functions against numpy on chosen inputs: tests/test_numpy_breadth.py::test_matches_jax_numpy and "
         "tests/test_numpy.py (inputs drawn by hypothesis: the slow tier, with test_many_examples)")
_EAGER = ("eager operations dispatched as the ordinary path computes them: test_arrays_with_scalars and "
          "test_the_fast_path_dispatches_no_primitive")
_LINALG = ("numpy.linalg: tests/test_numpy_breadth.py::test_linalg_namespace_matches_jax, test_qr_svd_eigh_float64 "
           "and tests/prims/test_linalg_prims.py")
_SCIPY_LINALG = "scipy.linalg: tests/test_scipy_linalg_names.py"
_QUANTILES = "quantiles: test_quantile_methods, test_quantile_grad and test_quantile_methods_under_vmap"
_REFS_GRAD = ("refs under grad: test_plumbing_refs_along_for_the_ride_under_grad, "
              "test_counting_into_a_ref_beside_differentiated_carries and test_custom_vjp_stashes_gradients_into_a_ref")
_MINIMIZE = "minimize against JAX: test_float64_iterates_match_jax and test_complex_lbfgs"
_SPARSE = "the solvers against JAX: test_matches_jax_and_solves and test_grad_jit_and_vmap_match_jax"

_TRUST = "a crafted input at a trust boundary: each case is another attack the default run must refuse"

# Sweeps that stay whole: static and meta checks of the code base (one case per primitive, module or name), and the
# crafted inputs at the trust boundaries.
KEEP: dict[str, str] = {
    "test_meta.py::test_primitive_has_rule_and_test": "every primitive has every rule kind or a tested mark",
    "test_meta.py::test_differentiability_marks_agree": "every primitive's differentiability mark",
    "test_meta.py::test_case_binds_the_primitive_it_names": "every Case binds its primitive",
    "test_meta.py::test_primitive_types_explicit_shardings": "every primitive's sharding rule",
    "test_meta.py::test_primitive_says_what_checkify_checks": "every primitive's checkify declaration",
    "test_layers.py::test_imports_point_one_way": "every module's imports against the layer order",
    "test_api_coverage.py::test_coverage_does_not_fall": "each namespace's coverage floor",
    "test_complex.py::test_primitive_accepts_complex_or_refuses_clearly":
        "every primitive against the ACCEPTS_COMPLEX table (abstract evaluation only, 0.5 s in all)",
    "test_lax_linalg_names.py::test_enums_are_jaxs": "each enum's members are JAX's",
    "test_lax_linalg_names.py::test_keywords_are_jaxs": "each function's parameter names are JAX's",
    "test_config_jax.py::test_top_level_option_states_are_jax_s": "each option state's value is JAX's",
    # trust boundaries (docs/security.md): each case is another crafted input, all of them 0.6 s
    "reliability/test_compile_cache_trust.py::test_entries_are_refused_unless_regular_files_only_the_owner_can_write":
        _TRUST,
    "reliability/test_distributed_faults.py::"
    "test_a_message_that_fails_authentication_is_refused_and_its_connection_closed": _TRUST,
    "reliability/test_export_trust.py::test_a_module_ember_would_not_write_is_refused": _TRUST,
    "reliability/test_trust_boundaries.py::test_a_bad_header_is_refused_naming_the_file": _TRUST,
    "test_export_mesh.py::test_a_crafted_format_2_artifact_is_refused": _TRUST,
    "test_shape_poly.py::test_a_crafted_placeholder_is_refused_never_evaluated": _TRUST,
    "test_vmath.py::test_a_crafted_artifact_is_refused": _TRUST,
    "test_xla_proto.py::test_malformed_wire_format_is_refused": _TRUST,
    "test_xla_proto.py::test_malformed_op_sharding_is_refused": _TRUST,
    "test_row_fusion.py::test_a_malformed_program_is_an_error_not_a_crash": _TRUST,
}

# jax.experimental.sparse's primitives: each one's rules are the generic ones of a primitive defined by its
# decomposition (ember/experimental/sparse/_primitive.py: jvp_pass, backward_pass and batch_ir of the staged
# computation), so their jvp, grad and vmap checks keep representatives by default (a densification, a
# sparsification, the sparse-dense and sparse-sparse products, a CSR product, spsolve's custom_linear_solve); every
# one is computed by default (test_forward), and tests/test_sparse.py differentiates and vmaps the operations built
# on them (each primitive's other checks: -m slow; 31 s of the default run's test time).
_SPARSE_KEPT = ("bcoo_todense", "bcoo_fromdense", "bcoo_dot_general", "bcoo_spdot_general", "csr_matvec", "spsolve")
_SPARSE_TAKEN = ("todense", "bcoo_extract", "bcoo_transpose", "bcoo_dot_general_sampled", "bcoo_sort_indices",
                 "bcoo_sum_duplicates", "coo_todense", "coo_fromdense", "coo_matvec", "coo_matmat", "csr_todense",
                 "csr_fromdense", "csr_matmat", "bcsr_todense", "bcsr_fromdense", "bcsr_extract", "bcsr_dot_general")
_SPARSE_WHY = ("its rule is the generic derived one of every sparse primitive (ember/experimental/sparse/"
               "_primitive.py), checked by default on " + ", ".join(_SPARSE_KEPT) + "; tests/test_sparse.py "
               "differentiates and vmaps the operations built on it")


RULES: dict[str, Rule] = {
    "prims/test_sparse_prims.py::test_grad": Primitives(_SPARSE_TAKEN, _SPARSE_WHY),
    "prims/test_sparse_prims.py::test_jvp": Primitives(_SPARSE_TAKEN, _SPARSE_WHY),
    "prims/test_sparse_prims.py::test_vmap": Primitives(_SPARSE_TAKEN, _SPARSE_WHY),
    # single heavy cases of the primitives' checks (tests/prims)
    "prims/test_lax_special.py::test_vmap": Ids(("random_gamma-(2,)x(3,)-float32-first",),
                                                "random_gamma's batching: tests/test_random.py::"
                                                "test_gamma_under_vmap_and_jit (43 s here)"),
    "prims/test_linalg_prims.py::test_jacobians": Ids(("tridiagonal_solve-(4,)x(4,)x(4,)x(4, 2)",),
                                                     _HEAVY_JACOBIAN + " (8 s)"),
    "prims/test_structural.py::test_jacobians": Ids(("dot_general_batched-(2, 3, 4)x(2, 4, 5)",),
                                                    _HEAVY_JACOBIAN + " (4 s)"),
    "prims/test_windowed.py::test_jacobians": Ids(("select_and_scatter_add_ge-(4, 3)x(4, 5)",),
                                                  _HEAVY_JACOBIAN + " (3 s)"),
    "prims/test_windowed.py::test_cumulative_scans": Every(4, _SWEEP + " (each scan's own tests in prims stay)"),
    # sweeps against oracles: a part of the cases by default
    "test_eager_dispatch.py::test_arrays_with_scalars": Every(6, _SWEEP + " (operations)"),
    "test_scipy_special.py::test_values_match_scipy": Every(4, _SWEEP),
    "test_scipy_special.py::test_gradients_under_jit_and_vmap": Every(4, _SWEEP),
    "test_scipy_special.py::test_tuple_functions_match_scipy": Every(4, _SWEEP),
    "test_scipy_stats.py::test_distribution_matches_scipy_under_jit_and_vmap": Every(4, _SWEEP),
    "test_linalg.py::test_gradients_against_jax_and_finite_differences": Every(4, _SWEEP),
    "test_linalg.py::test_vmap_matches_per_member": Every(4, _SWEEP),
    "test_reduction_accuracy.py::test_at_least_as_accurate_as_jax": Every(4, _SWEEP),
    "test_nn_functions.py::test_activation_values_and_gradients_match_jax": Every(4, _SWEEP),
    "test_complex.py::test_structural_primitives_move_complex_values": Every(4, _SWEEP),
    "test_complex.py::test_reductions_products_and_selection": Every(4, _SWEEP),
    "test_complex.py::test_unary_functions": Every(4, _SWEEP),
    "test_numpy_gaps.py::test_quantile_methods": Every(4, _SWEEP),
    "test_random.py::test_kolmogorov_smirnov": Every(6, _SWEEP + " (every sampler bit for bit with JAX: "
                                                    "test_sampler_matches_jax_bit_for_bit)"),
    "test_random.py::test_sampler_matches_jax_under_jit_and_with_raw_keys": Every(6, _SWEEP),
    "test_random.py::test_discrete_frequencies": Every(4, _SWEEP),
    "test_random.py::test_gamma_family_matches_jax_nearly_bit_for_bit": Every(6, _SWEEP),
    "test_random.py::test_gradients_match_jax": Every(4, _SWEEP),
    "test_forward.py::test_jacobians_of_pytree_functions": Every(4, _SWEEP),
    "test_shape_poly.py::test_exported_with_symbolic_shapes_as_jax": Every(4, _SWEEP),
    "test_stax.py::test_layer_matches_jax": Every(4, _SWEEP),
    "test_program_cache.py::test_fresh_closures_over_new_arrays_compile_once": Every(4, _SWEEP),
    "test_random_programs.py::test_random_program": Every(4, _SWEEP),
    "test_lax_linalg_names.py::test_eig_vector_derivatives_are_jaxs": Every(6, _SWEEP),
    "test_jax_docs_indexing.py::test_docstring_examples": Every(4, _SWEEP),
    "test_numerics.py::test_binary_float_functions_promote_before_making_inexact": Every(4, _SWEEP),
    "test_numerics.py::test_integer_power_matches_numpy": Every(4, _SWEEP),
    "test_numerics.py::test_arg_extremes_pick_the_first_nan": Every(4, _SWEEP),
    "test_numerics.py::test_half_precision_reductions_accumulate_in_float32": Every(4, _SWEEP),
    "test_scipy_optimize.py::test_float64_iterates_match_jax": Every(4, _SWEEP),
    "test_numpy_cumulative.py::test_values_and_dtypes": Every(4, _SWEEP),
    "test_backend_forms.py::test_dot_forms_match_numpy": Every(4, _SWEEP),
    "test_composition_matrix.py::test_under_the_persistent_cache": Every(4, _SWEEP),
    "test_scaled_matmul.py::test_scaled_dot_as_jax": Every(4, _SWEEP),
    "test_optim.py::test_optimizer_matches_optax": Every(4, _SWEEP),
    "test_scipy_sparse_linalg.py::test_matches_jax_and_solves": Every(4, _SWEEP),
    "test_scipy_sparse_linalg.py::test_grad_jit_and_vmap_match_jax": Every(6, _SWEEP),
    "test_scipy_cluster_interpolate.py::test_interpolator_matches_scipy_and_jax": Every(4, _SWEEP),
    "test_numpy_indexing.py::test_every_integer_index_dtype": Every(4, _SWEEP),
    "test_libraries.py::test_library_program_matches_jax": Every(4, _SWEEP + " (equinox and flax programs)"),
    # the PRNG implementations' sampler sweeps (5 implementations): one of them by default (philox2x32, the cheapest
    # to compile), the others' in the slow tier (15 samplers, 7.6 s; the gamma family's lax.map, 15 s each)
    "test_random_impls.py::test_samplers_are_jaxs_bit_for_bit": Every(5, _SWEEP + " (one implementation)"),
    "test_random_impls.py::test_gamma_family_with_each_key_drawing_alone": Every(5, _SWEEP + " (one implementation)"),
    # single tests whose ground a default test covers (these ten measured on a slower day)
    "test_as_jax.py::test_jax_scipy_program_runs_unchanged": Whole(_DROP_IN + " (45 s)"),
    "test_sort_kernel.py::test_top_k_is_jaxs_bit_for_bit": Whole(
        "top_k's order and transformations: test_top_k_transforms_as_jaxs and tests/prims/test_sorting.py (40 s)"),
    "reliability/test_runtime.py::test_multiprocessing_spawn_workers_run_ember": Whole(
        "processes: test_fork_child_gets_a_clear_error_and_parent_keeps_working (26 s)"),
    "reliability/test_runtime.py::test_fork_before_the_first_computation_is_fine": Whole(
        "fork: test_fork_child_gets_a_clear_error_and_parent_keeps_working (15 s)"),
    "reliability/test_compile_cache.py::test_a_program_partitioned_over_devices_is_loaded_by_the_next_process": Whole(
        _CACHE_LOADS + " (24 s)"),
    "test_jax_docs_training.py::test_simple_network_predictions": Whole(
        "training programs of JAX's docs: test_stateful_linear_regression and "
        "test_optax_style_training_loop_with_ember_optim (21 s)"),
    "test_dlpack.py::test_exit_with_live_exports_and_views": Whole(
        "exiting with live objects: tests/test_pjrt.py::test_objects_alive_at_interpreter_exit (21 s)"),
    "test_linalg.py::test_second_derivative_of_slogdet_and_cholesky": Whole(
        "second derivatives of linalg: tests/prims/test_linalg_prims.py's Jacobians (16 s)"),
    "test_linalg.py::test_expm_gradient_against_jax": Whole(
        "expm's derivative: test_gradients_against_jax_and_finite_differences (13 s)"),
    "test_scipy_optimize.py::test_options": Whole(_MINIMIZE + " (13 s)"),
    # single tests of 2 s or more (measured 2026-12-07) whose ground a default test covers; those that are the only
    # default test of their feature stay (Ctrl-C, out of memory, fork, options from the environment, the drop-in's
    # modules, random_gamma under vmap, exiting with live objects or a blocked callback, clear_backends, ds, smap,
    # scipy.signal, Slerp, bessel_jn, wofz, log1mexp, the DCT, the docs and layering checks)
    # - processes started to check what one process shows as well
    "reliability/test_compile_cache.py::test_a_second_process_loads_what_the_first_compiled": Whole(
        _CACHE_LOADS + " (11 s)"),
    "reliability/test_compile_cache.py::test_corrupt_truncated_and_foreign_entries_are_recompiled_with_one_warning":
        Whole("bad entries are misses: reliability/test_compile_cache_trust.py::"
              "test_an_entry_cut_after_its_magic_line_is_a_miss and "
              "test_another_programs_entry_under_this_programs_name_is_a_miss; one warning: "
              "test_warnings_are_given_once_per_kind (9 s)"),
    "reliability/test_compile_cache.py::test_the_options_take_jax_names_and_environment_variables": Whole(
        "options by JAX's names: reliability/test_config.py::test_update_and_read_with_or_without_the_jax_prefix; "
        "read from the environment: reliability/test_config.py::test_environment_variables (3 s)"),
    "reliability/test_compile_cache_trust.py::test_a_fifo_entry_does_not_hang": Whole(
        _NOT_REGULAR + ": test_entries_are_refused_unless_regular_files_only_the_owner_can_write (3 s)"),
    "reliability/test_trust_boundaries.py::test_a_fifo_is_refused_without_waiting_for_a_writer": Whole(
        _NOT_REGULAR + ": tests/test_checkpoints.py::test_a_directory_as_the_path_is_an_os_error_naming_it (3 s)"),
    "reliability/test_config.py::test_default_xla_flags_keep_the_users": Whole(
        "ember's XLA options in effect: tests/test_backend_forms.py::test_max_and_min_keep_nan (NaN-propagating "
        "max and min, the option it sets) (3 s)"),
    "reliability/test_distributed_faults.py::test_a_killed_coordinator_process_is_a_connection_error_naming_it": Whole(
        "a coordinator gone: test_a_closed_coordinator_is_a_connection_error_naming_it (4 s)"),
    "reliability/test_export_trust.py::test_the_handlers_refuse_calls_their_buffers_do_not_fit": Whole(
        "handlers refusing calls that do not fit: tests/test_sort_kernel.py::"
        "test_the_handler_refuses_buffers_that_do_not_fit and tests/test_vmath.py::"
        "test_the_handler_refuses_calls_that_do_not_fit; crafted artifacts: "
        "test_a_module_ember_would_not_write_is_refused (4 s)"),
    "reliability/test_runtime.py::test_a_buffer_finalized_while_the_lifetime_lock_is_held": Whole(
        _BUFFER_LIFETIME + " (3 s)"),
    "reliability/test_runtime.py::test_delete_racing_with_computations": Whole(_BUFFER_LIFETIME + " (4 s)"),
    "reliability/test_runtime.py::test_exiting_while_daemon_threads_execute": Whole(
        "calls pin the client and closing waits for them: tests/test_pjrt.py::"
        "test_close_waits_for_the_calls_that_pinned_the_client; exiting: tests/test_pjrt.py::"
        "test_objects_alive_at_interpreter_exit (10 s)"),
    "reliability/test_trust_boundaries.py::test_a_callback_that_ends_in_time_is_waited_for": Whole(
        "callbacks in flight at exit: test_a_callback_blocked_forever_does_not_hold_the_exit (3 s)"),
    "reliability/test_trust_boundaries.py::test_jitted_ref_updates_from_several_threads_are_atomic": Whole(
        "refs updated by jitted calls: tests/test_refs.py::test_jit_closing_over_a_ref_updates_it_each_call and "
        "test_calls_update_refs_in_place_unless_their_values_are_held (3 s)"),
    "test_config_jax.py::test_default_device_places_uncommitted_computations_as_jax": Whole(
        "where computations run: tests/test_sharding.py::test_committed_arrays_and_where_computations_run_as_jax "
        "and tests/test_jax_differences.py::test_jit_device_and_backend_place_the_program_as_jax (3 s)"),
    "test_config_jax.py::test_platforms_name_the_default_backend_in_a_new_process": Whole(
        "the platforms option: test_platform_name_cpu_is_accepted_once_the_backend_runs (2 s)"),
    "test_distributed.py::test_two_processes_initialize_share_a_store_and_shut_down": Whole(
        "the coordinator and its store: test_the_coordinator_table_joins_and_waits and "
        "reliability/test_distributed_faults.py (in this process) (5 s)"),
    "test_export.py::test_a_fresh_process_loads_and_runs_the_artifact": Whole(
        "a deserialized artifact called and differentiated: "
        "test_calls_match_the_function_eagerly_in_jit_and_under_vmap and test_grad_to_the_exported_order (3 s)"),
    "test_fastpath.py::test_disabled_by_the_environment": Whole(
        "the Python implementation: test_the_selected_implementation_is_used; EMBER_ options read from the "
        "environment: reliability/test_config.py::test_environment_variables (3 s)"),
    "test_fastpath.py::test_memory_stays_flat_over_many_calls": Whole(
        "the fast path's references: test_no_reference_leaks (5 s)"),
    "test_sharding.py::test_devices_and_environment": Whole(
        "device queries: tests/test_toplevel.py::test_device_and_process_queries_match_jax_on_the_cpu; options read "
        "from the environment: reliability/test_config.py::test_environment_variables (3 s)"),
    "test_checkpoints.py::test_failed_and_killed_saves_keep_the_old_file_and_leave_no_temporary_behind": Whole(
        "saves through a temporary file: reliability/test_trust_boundaries.py::"
        "test_a_taken_temporary_name_does_not_block_save and "
        "test_a_stale_temporary_that_cannot_be_removed_does_not_block_save (2 s)"),
    # - the drop-in (python -m ember.as_jax and `import jax` under it), each test in a process of its own
    "test_as_jax.py::test_a_jax_program_runs_unchanged_with_jaxs_numbers": Whole(_DROP_IN + " (9 s)"),
    "test_as_jax.py::test_a_missing_jax_module_is_a_clear_import_error": Whole(_DROP_IN + " (2 s)"),
    "test_as_jax.py::test_the_modules_of_this_round_import_under_the_drop_in": Whole(_DROP_IN + " (2 s)"),
    "test_as_jax.py::test_the_private_modules_libraries_import": Whole(_DROP_IN + " (3 s)"),
    "test_jax_differences.py::test_chex_asserts_variants_and_fakes_through_the_drop_in": Whole(_DROP_IN + " (4 s)"),
    # - walk-throughs of docs and examples whose functions default tests check
    "test_examples.py::test_example_runs": Whole(
        "the examples' API: tests/test_jax_docs.py (JAX's tutorials, in this process) (4 s each)"),
    "test_explicit_sharding.py::test_the_explicit_sharding_notebook_prints_what_jax_prints": Whole(
        "explicit sharding types: test_types_and_errors_as_jax (4 s)"),
    "test_sharding.py::test_the_sharded_computation_tutorial_prints_what_jax_prints": Whole(
        "sharded computations against JAX: test_jit_partitions_over_the_devices and "
        "test_shard_map_collectives_against_jax (3 s)"),
    "test_shard_map_eager.py::test_jax_and_ember_print_the_same": Whole(
        "shard_map against JAX: tests/test_sharding.py::test_shard_map_collectives_against_jax and "
        "tests/test_shard_map_vma.py (5 s)"),
    "test_callbacks.py::test_printed_output_equals_jax": Whole(
        "callbacks under every transformation: test_values_and_transformations_against_jax; ordered effects: "
        "test_effects_are_kept_and_pure_calls_may_go (6 s)"),
    "test_jax_docs.py::test_pytrees_mlp_parameters": Whole("pytrees of parameters: the other test_pytrees_* (2 s)"),
    "test_jax_docs_training.py::test_simple_network_training_loop": Whole(
        "training loops of JAX's docs: test_stateful_linear_regression and "
        "test_optax_style_training_loop_with_ember_optim (3 s)"),
    "test_stax.py::test_mnist_classifier_training_matches_jax": Whole(_STAX_TRAINING + " (2 s)"),
    "test_stax.py::test_vae_training_matches_jax": Whole(_STAX_TRAINING + " (4 s)"),
    "test_nn_layers.py::test_sequential_mlp_and_the_module_protocol": Whole(
        "modules: test_linear and test_a_training_loop_with_modules_and_optim (3 s)"),
    # - one test over many functions or cases, each of which a default test (sweep) checks
    "reliability/test_fuzz_numpy.py::test_unary": Whole(_FUZZ + " (3 s)"),
    "reliability/test_fuzz_numpy.py::test_binary": Whole(_FUZZ + " (6 s)"),
    "reliability/test_fuzz_numpy.py::test_reductions": Whole(_FUZZ + " (3 s)"),
    "reliability/test_fuzz_numpy.py::test_shape_functions": Whole(_FUZZ + " (2 s)"),
    "reliability/test_large_programs.py::test_every_transformation_matches_jax_compiled_or_op_by_op": Whole(
        "large programs op by op: test_a_large_grad_outside_jit_runs_op_by_op_and_jit_still_compiles and "
        "test_a_wide_program_runs_op_by_op (8 s)"),
    "reliability/test_pytrees.py::test_jit_passes_only_the_leaves_it_reads": Whole(
        "jit leaves unused arguments out: tests/test_jax_differences.py::"
        "test_jit_keep_unused_compiler_options_and_none_argnums; many leaves: test_grad_over_many_leaves (2 s)"),
    "reliability/test_runtime.py::test_dropped_programs_are_freed": Whole(
        "compiled programs freed: reliability/test_config.py::test_clear_caches_frees_every_compiled_program and "
        "tests/test_transform_cache.py::test_a_cache_entry_dies_with_its_ir_and_does_not_keep_it_alive (2 s)"),
    "reliability/test_scaling.py::test_reverse_mode_is_linear_in_program_length": Whole(
        "reverse mode linear in the program's length: test_the_gradient_program_grows_as_the_function_does (4 s)"),
    "test_eager_dispatch.py::test_array_pairs_of_every_dtype": Whole(_EAGER + " (4 s)"),
    "test_eager_dispatch.py::test_broadcasting": Whole(_EAGER + " (5 s)"),
    "test_eager_dispatch.py::test_unary_and_reductions": Whole(_EAGER + " (7 s)"),
    "test_dtypes_x64.py::test_numpy_scalars_in_every_binary_op_match_jax_dtypes": Whole(
        "numpy scalars' dtypes in 64-bit mode: test_array_numpy_scalar_pairs and "
        "test_numpy_scalars_eagerly_and_under_jit (7 s)"),
    "test_dtype_defaults.py::test_64_bit_dtype_parameters_give_32_bit_results_as_jax": Whole(
        "64-bit dtypes asked for: test_a_64_bit_dtype_asked_for_is_narrowed_with_a_warning_as_jax (2 s)"),
    "test_dtype_defaults.py::test_transformations_see_the_narrowed_values": Whole(
        "narrowed values under grad and jit: test_mnist_style_program_with_numpy_float64_parameters_runs_in_float32_"
        "as_jax and test_values_entering_ember_are_narrowed_as_jax (5 s)"),
    "test_linalg.py::test_cholesky_solve_inv_det_float64": Whole(_LINALG + " (2 s)"),
    "test_linalg.py::test_eig_and_eigvals": Whole(_LINALG + " (2 s)"),
    "test_linalg.py::test_float32_against_jax": Whole(_LINALG + " (5 s)"),
    "test_linalg.py::test_hermitian_svd_tensorsolve_axes_and_rectangular_lu": Whole(_LINALG + " (4 s)"),
    "test_linalg.py::test_solve_vector_and_broadcast_batches": Whole(_LINALG + " (3 s)"),
    "test_linalg.py::test_fallback_to_xla_ops_without_lapack": Whole(
        "linalg without the LAPACK kernels: tests/test_lax_linalg_names.py::test_without_the_kernels (3 s)"),
    "test_linalg.py::test_scipy_linalg_against_scipy": Whole(_SCIPY_LINALG + " (4 s)"),
    "test_linalg.py::test_scipy_linalg_special_matrices_and_polar": Whole(_SCIPY_LINALG + " (3 s)"),
    "test_numpy_breadth.py::test_linalg_functions_built_on_factorisations": Whole(
        "numpy.linalg against JAX: test_linalg_namespace_matches_jax (2 s)"),
    "test_numpy_breadth.py::test_polyfit_roots_and_poly_of_a_matrix": Whole(
        "polynomials: test_matches_jax_numpy's poly* cases; roots' eigenvalues: tests/test_linalg.py's eig (3 s)"),
    "test_numpy_gaps.py::test_quantile_weights_match_numpy_and_jax": Whole(_QUANTILES + " (6 s)"),
    "test_numpy_gaps.py::test_quantile_weights_nans_zeros_grad_and_errors": Whole(_QUANTILES + " (5 s)"),
    "test_numpy_indexing.py::test_flip_roll_rot90_tri_diff": Whole(
        "the same functions against JAX: tests/test_numpy_breadth.py::test_matches_jax_numpy (2 s)"),
    "test_numpy_indexing.py::test_nonzero_family_eager_and_with_size": Whole(
        "indices of the true elements: test_compress_extract_select and tests/test_numpy_breadth.py (4 s)"),
    "test_numpy_indexing.py::test_take_along_axis_and_put_along_axis": Whole(
        "gathers along an axis and their gradients: test_take, test_at_updates_match_jax (5 s)"),
    "test_numpy_sorting.py::test_unique": Whole(
        "unique: tests/test_complex.py's unique cases and tests/test_sort_kernel.py (5 s)"),
    "test_numpy_ufunc.py::test_under_jit_vmap_and_grad": Whole("ufunc methods: test_methods and test_reduce (3 s)"),
    "test_numerics.py::test_integer_power_examples": Whole("integer powers: test_integer_power_matches_numpy (2 s)"),
    "test_nn_functions.py::test_complex_and_integer_initializers_as_jax": Whole(
        "initializers: test_initializers_match_jax_bit_for_bit (7 s)"),
    "test_random.py::test_float64_samplers_match_jax_x64": Whole(
        "samplers in 64-bit mode: tests/test_random_more_samplers.py::test_float64_samplers_match_jax_x64 (3 s)"),
    "test_random.py::test_key_under_x64": Whole(
        "keys: test_key_and_prngkey_match_jax and test_split_matches_jax (2 s)"),
    "test_refs.py::test_grad_of_functions_using_refs": Whole(_REFS_GRAD + " (5 s)"),
    "test_refs.py::test_microbatched_gradient_accumulation_into_a_ref": Whole(_REFS_GRAD + " (3 s)"),
    "test_sort_kernel.py::test_the_family_built_on_sort_agrees_with_jax": Whole(
        "the sort kernel against XLA's sort: test_sort_is_xla_sort_bit_for_bit; the numpy functions built on sort: "
        "tests/test_numpy_sorting.py (6 s)"),
    "test_sort_kernel.py::test_vmap_sorts_batched_rows_and_gradients_are_jaxs": Whole(
        "sort's batching and derivatives: tests/prims/test_sorting.py (2 s)"),
    "test_scipy_cluster_interpolate.py::test_interpolator_shapes_dtypes_and_pytree": Whole(
        "the interpolator: test_interpolator_matches_scipy_and_jax (3 s)"),
    "test_scipy_fft_integrate_ndimage.py::test_dct_under_jit_vmap_and_grad": Whole(
        "the DCT's values: test_dct_idct_match_scipy; the FFTs it is built on under the transformations: "
        "tests/test_fft.py::test_grads_equal_jax_under_jit_and_vmap (3 s)"),
    "test_scipy_fft_integrate_ndimage.py::test_map_coordinates_matches_jax_and_scipy": Whole(
        "map_coordinates: test_map_coordinates_integer_input_jit_vmap_grad (3 s)"),
    "test_scipy_optimize.py::test_converges_where_jax_zoom_gives_up": Whole(_MINIMIZE + " (2 s)"),
    "test_scipy_optimize.py::test_float32_matches_jax": Whole(_MINIMIZE + " (2 s)"),
    "test_scipy_optimize.py::test_jit_vmap_and_args": Whole(_MINIMIZE + " (4 s)"),
    "test_scipy_sparse_linalg.py::test_complex_systems_match_jax": Whole(_SPARSE + " (2 s)"),
    "test_scipy_sparse_linalg.py::test_pytree_vectors_and_operator_forms": Whole(_SPARSE + " (3 s)"),
    "test_scipy_spatial.py::test_conversions_match_scipy": Whole(
        "rotations' conversions: test_matches_jax_including_gimbal_lock (3 s)"),
    "test_scipy_special.py::test_gradients_of_tuple_stacked_and_complex_functions": Whole(
        "derivatives: test_gradients_under_jit_and_vmap and test_eager_gradients_and_second_derivatives (2 s)"),
    "test_shape_poly.py::test_slices_that_may_be_empty_as_jax": Whole(
        "symbolic shapes against JAX: test_exported_with_symbolic_shapes_as_jax (4 s)"),
    # - transformations of a function whose transformations a default test checks
    "test_checkify.py::test_vmap_of_checkify_reports_every_failing_member": Whole(
        "checks under vmap: test_check_rules_under_every_transformation (4 s)"),
    "test_checkpointing.py::test_policies_under_jit_vmap_and_scan": Whole(
        "policies: test_policy_matches_jax; checkpoint under the transformations: tests/test_control_flow.py::"
        "test_checkpoint_gives_the_same_gradients_and_recomputes_behind_a_barrier (4 s)"),
    "test_control_flow.py::test_logaddexp_and_logsumexp_are_stable": Whole(
        "logsumexp at the extremes: tests/test_jax_library_gaps.py::"
        "test_logsumexp_derivatives_stay_finite_at_the_extremes (2 s)"),
    "test_control_flow.py::test_reverse_mode_differentiates_only_the_active_inputs_of_jit_cond_and_scan": Whole(
        "reverse mode of loops and branches asks no rule of what they leave unperturbed: tests/test_extend.py::"
        "test_reverse_mode_asks_no_rule_for_what_loops_and_branches_leave_unperturbed (2 s)"),
    "test_custom_rule_caching.py::test_embers_own_rules_keep_the_cache": Whole(
        "cached transformations of functions with custom rules: test_rules_run_each_call_but_one_program_is_compiled "
        "and test_one_jitted_function_does_not_call_its_rule_again (2 s)"),
    "test_jax_differences.py::test_structural_numpy_functions_take_typed_keys_as_jax": Whole(
        "typed keys: test_typed_keys_are_leaves_of_the_public_tree_functions and tests/test_random.py::"
        "test_typed_key_array_behaves_like_an_array_of_keys (2 s)"),
    "test_lax_linalg_names.py::test_explicit_sharding_types_as_jax": Whole(
        "explicit sharding types: tests/test_explicit_sharding.py::test_types_and_errors_as_jax (4 s)"),
    "test_lax_linalg_names.py::test_qdwh_jit_vmap_and_dtypes": Whole(
        "qdwh: test_qdwh_is_jaxs and test_qdwh_forward_mode_is_jaxs (3 s)"),
    "test_lax_ragged.py::test_second_derivatives_as_jax": Whole(
        "ragged_dot's derivatives: test_mode_1_gradients_match_jax and tests/prims/test_structural.py's "
        "ragged_dot_general checks (3 s)"),
    "test_lax_ragged.py::test_vmap_of_each_argument_and_of_all_as_jax": Whole(
        "ragged_dot's batching: tests/prims/test_structural.py::test_vmap's ragged_dot_general cases (2 s)"),
    "test_lax_solvers.py::test_custom_linear_solve_pytrees_aux_and_errors_as_jax": Whole(
        "custom_linear_solve: tests/prims/test_control.py's custom_linear_solve checks and "
        "tests/test_scipy_sparse_linalg.py (3 s)"),
    "test_loop_dce.py::test_cond_reverse_mode_matches_jax": Whole(
        "cond's reverse mode: test_cond_reverse_mode_does_not_recompute_the_branches and tests/prims/"
        "test_control.py's cond checks (5 s)"),
    "test_loop_dce.py::test_vmap_of_grad_wrt_xs_and_grad_of_grad_match_jax": Whole(
        "scan's reverse mode without the dead work: test_grad_wrt_every_input_of_an_rnn_matches_jax (3 s)"),
    "test_sharding.py::test_a_transposing_program_repeated_on_sharded_arrays_does_not_abort": Whole(
        "eager operations on sharded arrays: test_eager_operations_on_sharded_arrays (3 s)"),
    "test_shard_map_vma.py::test_loops_and_branches_in_a_body": Whole(
        "varying types through a body: test_a_varying_predicate_makes_every_result_vary and "
        "test_collectives_under_grad_jvp_and_vmap (2 s)"),
    "test_while_grad.py::test_newton_second_derivatives_and_the_exact_derivative": Whole(
        "while's reverse mode: test_gradient_equals_the_unrolled_loops (3 s)"),
}

# Primitives whose forward/jvp/grad/vmap check has no default case, and the default test that covers it:
# {"file::function": {primitive: why}}.
PRIMITIVE_EXCEPTIONS: dict[str, dict[str, str]] = {
    "prims/test_sparse_prims.py::test_grad": dict.fromkeys(_SPARSE_TAKEN, _SPARSE_WHY),
    "prims/test_sparse_prims.py::test_jvp": dict.fromkeys(_SPARSE_TAKEN, _SPARSE_WHY),
    "prims/test_sparse_prims.py::test_vmap": dict.fromkeys(_SPARSE_TAKEN, _SPARSE_WHY),
    "prims/test_lax_special.py::test_vmap": {
        "random_gamma": "random_gamma's batching: tests/test_random.py::test_gamma_under_vmap_and_jit (43 s here)"},
}


def rules_for(path: str, name: str, count: int) -> list[Rule]:
    """The rules of the test function `name` in tests/`path` (a path relative to tests/, with '/') with `count`
    collected cases, in the order they apply: its explicit rule, then the generic one that fits it."""
    key = f"{path}::{name}"
    rules = [RULES[key]] if key in RULES else []
    if path.startswith("prims/"):
        if name in PRIMITIVE_CHECKS:
            rules.append(FirstOfEach(primitive_of, _PRIMITIVES))
        elif name == "test_jacobians":
            rules.append(Every(JACOBIAN_EVERY, _JACOBIANS))
    elif not rules and key not in KEEP and count >= 3:
        rules.append(Every(SWEEP_EVERY, _SWEEP + f" (one default case in {SWEEP_EVERY} of a sweep)"))
    return rules


def slow_cases(path: str, name: str, cases: Sequence[tuple[str | None, bool]]) -> list[bool]:
    """Which cases of the test function `name` in tests/`path` are slow: `cases` are its collected cases in order,
    each (its parametrization id or None, whether marks at the test make it slow already)."""
    slow = [marked for _, marked in cases]
    for rule in rules_for(path, name, len(cases)):
        default = [i for i, is_slow in enumerate(slow) if not is_slow]
        if isinstance(rule, Whole):
            taken = default
        elif isinstance(rule, Ids):
            taken = [i for i in default if cases[i][0] in rule.ids]
        elif isinstance(rule, Every):
            taken = [i for n, i in enumerate(default) if n % rule.k]
        elif isinstance(rule, Primitives):
            taken = [i for i in default if primitive_of(cases[i][0] or "") in rule.names]
        else:
            seen: set[str] = set()
            taken = []
            for i in default:
                group = rule.group(cases[i][0] or "")
                if group in seen:
                    taken.append(i)
                seen.add(group)
        for i in taken:
            slow[i] = True
    return slow


# ---------------------------------------------------------------------------------------------------------------
# Measured heavy cases: after the rules, a default case that took HEAVY_SECONDS or more in the recorded default
# runs (tests/default_tier_durations.json, written by tools/default_tier_durations.py from their JUnit reports) is
# slow too, except the KEEP tests and HEAVY_KEEP_FILES, tests/prims' primitive checks (one case per primitive
# already) and a file's last default case (a file keeps its least heavy one, so every test module still runs by
# default). On 2026-12-07 this took about 120 cases (about 380 s of the default run's 1123 s of test time) to the
# slow tier.
HEAVY_SECONDS = 1.5
# Files whose cases stay whatever they take: the static and meta checks of the code base, and the crafted inputs at
# the trust boundaries (the default run exists to enforce them).
HEAVY_KEEP_FILES: dict[str, str] = {
    "test_meta.py": "every primitive's rules", "test_layers.py": "the import layers",
    "test_api_coverage.py": "the API's coverage and its generated docs", "test_default_tier.py": "these rules",
    "reliability/test_trust_boundaries.py": _TRUST, "reliability/test_compile_cache_trust.py": _TRUST,
    "reliability/test_export_trust.py": _TRUST,
}
DURATIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "default_tier_durations.json")


@functools.lru_cache(maxsize=1)
def measured() -> dict[str, float]:
    """The recorded seconds of the default run's heavier cases, keyed 'path::name[id]' (path under tests/)."""
    with open(DURATIONS) as f:
        return json.load(f)["seconds"]


def heavy_cases(path: str, cases: Sequence[tuple[str, bool]]) -> list[bool]:
    """Which cases of the file tests/`path` are slow once the measured heavy ones are: `cases` are all its
    collected cases in order, each (its name with the id, whether the rules or its marks make it slow)."""
    times = measured()
    slow = [is_slow for _, is_slow in cases]
    heavy = []
    for i, (name, is_slow) in enumerate(cases):
        function = name.split("[", 1)[0]
        exempt = (f"{path}::{function}" in KEEP or path in HEAVY_KEEP_FILES or path in SHARED_SETUP
                  or (path.startswith("prims/") and function in PRIMITIVE_CHECKS))
        if not is_slow and not exempt and times.get(f"{path}::{name}", 0.0) >= HEAVY_SECONDS:
            heavy.append(i)
    if heavy and len(heavy) == slow.count(False):  # (every default case is heavy: the least heavy one stays)
        heavy.remove(min(heavy, key=lambda i: times[f"{path}::{cases[i][0]}"]))
    for i in heavy:
        slow[i] = True
    return slow


# Files whose tests share a costly module fixture (a subprocess computing every case's result, a C library built):
# their tests run on one worker of the default run (an xdist_group; tests/conftest.py sets --dist loadgroup), so the
# fixture runs once rather than once per worker (each is 3-9 s). Their cases are not measured heavy: the first one
# run pays the fixture, whichever it is.
SHARED_SETUP: dict[str, str] = {
    "test_context_mesh.py": "a subprocess with four CPU devices computes every case",
    "test_explicit_sharding.py": "a subprocess with four CPU devices computes every case",
    "test_export_mesh.py": "a subprocess with four CPU devices computes every case",
    "test_ffi.py": "the handlers' C library is compiled",
    "test_libraries.py": "subprocesses run every library program on ember and on JAX",
    "test_printed_forms.py": "two subprocesses print every program, with and without the drop-in",
}

