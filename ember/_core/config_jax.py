"""The rest of JAX 0.10.2's configuration options (`jax.config.values`), so that every option a JAX program sets is
accepted: `declare(option)` adds each to ember's table with JAX's default and JAX's checks of the value, and a
docstring saying what it does in ember. The ones that mean something here are honoured where ember reads them
(named below: platforms, default_device, random_seed_offset, logging, the IR dumps, the persistent cache, the x64
and legacy-key warnings, the PRNG implementation); the others are JAX's switches for backends, runtimes or internal
re-implementations ember does not have, and are accepted with no effect, as their docstrings say. A value that
asks for different numbers than ember computes (the old threefry, the high-dynamic-range Gumbel sampler, raising
on runtime errors) is refused with a ValueError rather than ignored."""
from __future__ import annotations

import enum
from typing import Any, Callable

_ACCELERATOR = "No effect in ember: it configures JAX's GPU/TPU backends, Pallas or Mosaic."
_MULTIHOST = ("No effect in ember: it configures JAX's multi-host runtime (cross-host transfers, preemption, "
              "topology discovery); ember's multi-process runs are ember.distributed's.")
_INTERNAL = ("No effect in ember: it selects between two implementations inside JAX's tracing, jaxpr or "
             "autodiff machinery; ember has one.")
_XLA = ("No effect in ember: an XLA compile option JAX passes to accelerator compilers; ember's CPU plugin "
        "compiles with its defaults.")
_TF = "No effect in ember: it configures jax2tf (TensorFlow interop)."


def _enum(*choices: Any, none: bool = False) -> Callable[[str, Any], Any]:
    def parse(name: str, value: Any) -> Any:
        if isinstance(value, enum.Enum):
            value = value.value if isinstance(value.value, str) else value.name.lower()  # (an enum member)
        if isinstance(value, str) and value not in choices and value.lower() in choices:
            value = value.lower()
        if (value is None and none) or value in choices:
            return value
        raise ValueError(f"ember.config: option {name!r} must be {'None or ' if none else ''}one of "
                         f"{list(choices)}, got {value!r}")
    return parse


def _typed(kind: type, none: bool = True) -> Callable[[str, Any], Any]:
    def parse(name: str, value: Any) -> Any:
        if value is None and none:
            return None
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if isinstance(value, str) and kind is not str:
            try:
                value = kind(value)
            except ValueError:
                pass
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f"ember.config: option {name!r} takes {'None or ' if none else ''}a {kind.__name__}, "
                             f"got {value!r} of type {type(value).__name__}")
        return value
    return parse


def _only(allowed: Any, parse: Callable[[str, Any], Any], why: str) -> Callable[[str, Any], Any]:
    """parse, refusing any value but `allowed`: JAX's other values change the numbers, and ember has only these."""
    def checked(name: str, value: Any) -> Any:
        parsed = parse(name, value)
        if parsed not in allowed:
            raise ValueError(f"ember.config: option {name!r} = {parsed!r} is not supported: {why}")
        return parsed
    return checked


def _platforms(name: str, value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"ember.config: option {name!r} takes None or a comma-separated string of platforms, got "
                         f"{value!r} of type {type(value).__name__}")
    return value


def _device(name: str, value: Any) -> Any:
    if value is None or isinstance(value, str) or (hasattr(value, "client") and hasattr(value, "platform")):
        return value
    raise ValueError(f"ember.config: {name} must be a Device (e.g. ember.devices('cpu')[0]), a platform name "
                     f"('cpu') or None, got {value!r} of type {type(value).__name__}")


def declare(option: Callable[..., None], parse_bool: Callable[[str, Any], bool]) -> None:
    """Add JAX's remaining options through ember's `_option(name, default, parse, doc, env)`."""
    def flag(name: str, default: Any, doc: str, parse: Callable[[str, Any], Any] | None = None) -> None:
        option(name, default, parse or (parse_bool if isinstance(default, bool) else _typed(type(default))), doc,
               env=(f"JAX_{name.upper()}",))

    # honoured
    flag("platforms", None,
         "The platforms to use, in order, as a comma-separated string ('cpu', 'cuda,cpu'): the first is the default "
         "backend (as jax_platforms; ember's are 'cpu' and 'cuda'/'gpu' with a CUDA PJRT plugin, and asking for one "
         "this machine lacks raises JAX's RuntimeError when the backend starts). Read when the default backend "
         "starts; $EMBER_PLATFORM and $EMBER_PJRT_PLUGIN take precedence.", _platforms)
    flag("platform_name", "",
         "The default backend's platform ('cpu', 'cuda'; JAX's older name for jax_platforms with one platform). "
         "Read when the default backend starts: a later update that names another platform warns that it is too "
         "late, as the backend is running.", _typed(str, none=False))
    flag("default_device", None,
         "The device computations run on when no argument is committed to one (as jax_default_device and the "
         "`with ember.default_device(device):` block): a Device, a platform name ('cpu': its first device) or None "
         "(the default backend's first device).", _device)
    flag("default_prng_impl", "threefry2x32",
         "The PRNG implementation of new keys (ember.random.key, PRNGKey) when impl= is not given, and of raw keys "
         "given to random functions: 'threefry2x32' (JAX's default), 'threefry4x32', 'philox2x32', 'philox4x32' "
         "(Random123's counter-based hashes), 'rbg' or 'unsafe_rbg' (XLA's RngBitGenerator), each bit for bit "
         "JAX's (docs/random.md).",
         _enum("threefry2x32", "threefry4x32", "rbg", "unsafe_rbg", "philox2x32", "philox4x32"))
    flag("random_seed_offset", 0, "An integer added to every seed given to ember.random.key/PRNGKey (as JAX).",
         _typed(int, none=False))
    flag("legacy_prng_key", "allow",
         "What a raw uint32[2] key (jax.random.PRNGKey's) given to an ember.random function does: 'allow', 'warn' "
         "(a UserWarning) or 'error' (a ValueError), as jax_legacy_prng_key; typed keys (ember.random.key) are "
         "always accepted.", _enum("allow", "warn", "error"))
    flag("explicit_x64_dtypes", "warn",
         "What asking for a 64-bit dtype with enable_x64 off does (the 32-bit dtype is used): 'warn' (JAX's "
         "default, a NarrowedDtypeWarning), 'error' (a ValueError) or 'allow' (silently).",
         _enum("allow", "warn", "error"))
    flag("logging_level", "NOTSET",
         "The level of the 'ember' logger (as jax_logging_level for JAX's loggers): NOTSET leaves it to Python's "
         "logging configuration.", _enum("NOTSET", "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", none=True))
    flag("debug_log_modules", "",
         "Comma-separated module names whose loggers log at DEBUG (jax.X names mean ember.X).",
         _typed(str, none=False))
    flag("dump_ir_to", "",
         "A directory (or 'sponge', read as $TEST_UNDECLARED_OUTPUTS_DIR) into which every program ember compiles "
         "is written as it is compiled: <n>_<name>.stablehlo.mlir and, with 'jaxpr' in dump_ir_modes, "
         "<n>_<name>.ember_ir.txt (as jax_dump_ir_to). Empty: off.", _typed(str, none=False))
    flag("dump_ir_modes", "stablehlo",
         "Comma-separated kinds of dump_ir_to's files: 'stablehlo' and/or 'jaxpr' (ember's IR).",
         _typed(str, none=False))
    flag("enable_compilation_cache", True,
         "Off, the persistent compilation cache is not read or written even when compilation_cache_dir is set.")
    flag("raise_persistent_cache_errors", False,
         "On, a persistent-cache entry that cannot be read or written raises instead of warning once and "
         "compiling (as JAX).")
    flag("debug_key_reuse", False,
         "The key-reuse checker (as jax_debug_key_reuse): a typed PRNG key (ember.random.key) consumed twice "
         "(split, random bits, any sampler) raises KeyReuseError, eagerly, and when a jitted function or a loop "
         "body is staged (docs/random.md). Read when a function is staged.")
    flag("threefry_partitionable", True,
         "JAX's default (True) threefry bit generation, which ember implements bit for bit; False (JAX's older "
         "bits) is refused.", _only((True,), parse_bool, "ember implements the partitionable threefry bits only"))
    flag("high_dynamic_range_gumbel", False,
         "JAX's higher-resolution Gumbel sampler; ember has JAX's default sampler only, so True is refused.",
         _only((False,), parse_bool, "ember samples gumbel as JAX's default sampler only"))
    for kind in ("nan", "divide", "oob"):
        flag(f"error_checking_behavior_{kind}", "ignore",
             f"JAX's runtime error checking of {kind} ('ignore' or 'raise'); ember checks with ember.experimental."
             "checkify and debug_nans/debug_infs instead, so 'raise' is refused.",
             _only(("ignore",), _enum("ignore", "raise"), "use ember.experimental.checkify or debug_nans"))

    # accepted, no effect: what each configures in JAX
    for name, default in (("pallas_enable_debug_checks", False), ("pallas_poison_buffers", False),
                          ("pallas_use_mosaic_gpu", True), ("pallas_verbose_errors", False),
                          ("mosaic_allow_hlo", False), ("use_magma", "auto"), ("bcoo_cusparse_lowering", False),
                          ("cuda_visible_devices", "all"), ("rocm_visible_devices", "all"),
                          ("oneapi_visible_devices", "all"), ("mock_gpu_topology", ""), ("mock_num_gpu_processes", 0),
                          ("ragged_dot_use_gpu_pallas_triton_lowering", False),
                          ("ragged_dot_use_ragged_dot_instruction", True), ("threefry_gpu_kernel_lowering", False),
                          ("enable_pgle", False), ("pgle_profiling_runs", 3), ("pgle_aggregation_percentile", 90),
                          ("compilation_cache_expect_pgle", False), ("use_emit_pipeline_primitive", False),
                          ("persistent_cache_enable_xla_caches", "xla_gpu_per_fusion_autotune_cache_dir")):
        parse = _enum("off", "on", "auto") if name == "use_magma" else None
        flag(name, default, _ACCELERATOR, parse)
    for name, default in (("cross_host_transfer_socket_address", ""), ("cross_host_transfer_timeout_seconds", None),
                          ("cross_host_transfer_transfer_size", None), ("cross_host_transport_addresses", ""),
                          ("force_dcn_cross_host_transfers", False), ("enable_preemption_service", True),
                          ("enable_recoverability", False), ("distributed_debug", False),
                          ("cpu_get_global_topology_timeout_minutes", 5), ("cpu_get_local_topology_timeout_minutes", 2),
                          ("share_binary_between_hosts", False), ("share_binary_between_hosts_timeout_ms", 1200000),
                          ("sort_devices_by_process_index", True), ("backend_target", ""), ("xla_backend", ""),
                          ("pjrt_client_create_options", None)):
        parse = _typed(int) if name.endswith(("seconds", "size")) else (
            (lambda n, v: v) if name == "pjrt_client_create_options" else None)
        flag(name, default, _MULTIHOST, parse)
    flag("cpu_collectives_implementation", "gloo",
         "JAX's CPU cross-process collectives library; ember's multi-process CPU collectives are its own "
         "(docs/distributed.md): no effect.", _enum("gloo", "mpi", "megascale", none=True))
    for name, default in (("optimization_level", "UNKNOWN"), ("memory_fitting_level", "O2"),
                          ("exec_time_optimization_effort", 0.0), ("memory_fitting_effort", 0.0),
                          ("disable_most_optimizations", False), ("compiler_enable_remat_pass", True),
                          ("xla_profile_version", 0), ("compiler_detailed_logging_min_ops", 10)):
        parse = _enum("UNKNOWN", "O0", "O1", "O2", "O3") if name.endswith("level") else None
        flag(name, default, _XLA, parse)
    for name, default in (("use_direct_linearize", True), ("use_simplified_jaxpr_constants", False),
                          ("custom_vjp3", False), ("remat3", False), ("scan3", False), ("refs_to_pins", False),
                          ("mutable_array_checks", True), ("disable_bwd_checks", False),
                          ("eager_constant_folding", False),
                          ("check_static_indices", False), ("disable_vmap_shmap_error", False), ("auto_pcast", True),
                          ("check_vma", False), ("remove_size_one_mesh_axis_from_type", False),
                          ("disallow_mesh_context_manager", False), ("softmax_custom_jvp", False),
                          ("enable_custom_prng", False), ("thread_guard", False),
                          ("remove_custom_partitioning_ptr_from_cache_key", False),
                          ("embedded_constants_max_bytes", 32), ("captured_constants_warn_bytes", 2000000000),
                          ("captured_constants_report_frames", 0), ("log_checkpoint_residuals", False),
                          ("serialization_version", 0), ("export_calling_convention_version", 10),
                          ("export_ignore_forward_compatibility", False), ("debug_leaked_clients_on_clear_backends",
                                                                          False),
                          ("check_proxy_envs", True), ("cpu_enable_async_dispatch", True),
                          ("compilation_cache_include_metadata_in_key", False),
                          ("compilation_cache_check_contents", False),
                          ("experimental_unsafe_xla_runtime_errors", False)):
        flag(name, default, _INTERNAL)
    flag("use_shardy_partitioner", True, "No effect in ember: JAX's choice between XLA's Shardy and GSPMD "
         "partitioners; ember's SPMD lowering writes GSPMD shardings (docs/sharding.md).")
    flag("array_garbage_collection_guard", None, _INTERNAL + " (JAX's check of arrays freed by the garbage "
         "collector)", _enum("allow", "log", "fatal", none=True))
    for name, default in (("jax2tf_associative_scan_reductions", False),
                          ("jax2tf_default_native_serialization", True)):
        flag(name, default, _TF)
    for name, default, parse in (
            ("traceback_filtering", "auto", _enum("off", "tracebackhide", "remove_frames", "quiet_remove_frames",
                                                  "auto")),
            ("traceback_in_locations_limit", 100, None), ("tracer_error_num_traceback_frames", 5, None),
            ("include_full_tracebacks_in_locations", True, None), ("include_debug_info_in_dumps", True, None),
            ("hlo_source_file_canonicalization_regex", None, _typed(str)), ("source_url_schema", None, _typed(str)),
            ("send_traceback_to_runtime", "off", _enum("off", "on", "full")), ("pprint_use_color", True, None)):
        flag(name, default, "No effect in ember: how JAX filters and records tracebacks and source locations, and "
             "colours printed jaxprs; ember's errors name the user's line themselves (docs/debugging.md).", parse)
