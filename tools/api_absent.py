"""The public names of JAX 0.10.2 that ember deliberately does not have, each with its reason (read by
tools/api_docs.py; docs/api.md shows them). {jax module: {name: reason}}; the key "*" gives the reason for every
name of a module ember does not have at all. tests/test_api_coverage.py fails on a JAX name that is neither in
ember nor here, and on a name here that ember has after all (so this list only shrinks as names land).
NOT_YET lists, in the same form, names ember means to have and does not yet (docs/api.md shows them as "not yet"):
they are work, not decisions."""
from __future__ import annotations

_TPU = "TPU-only"
_PALLAS = ("Pallas and Mosaic are JAX's kernel languages for GPU and TPU (Triton, Mosaic GPU/TPU); ember's CPU "
           "kernels are C through XLA's FFI (docs/extending.md)")
_MLIR = ("JAX's lowering API over its MLIR Python bindings (jaxlib's `ir` module); ember emits StableHLO text itself "
         "and extends it through primitives and ember.extend (docs/extending.md)")
_JAXLIB = "jaxlib's internals"
_IFRT = ("multi-controller runtimes (Pathways, IFRT programs, cross-host transfer servers) that a PJRT CPU or CUDA "
         "plugin does not have; ember's multi-process runs are ember.distributed's (docs/distributed.md)")

ABSENT: dict[str, dict[str, str]] = {
    "jax.experimental.sparse": {
        "SparseTracer": "the tracer type of JAX's sparsify trace: ember's sparsify interprets the function's staged "
                        "IR with the sparse values themselves (BCOO arrays), so there is no tracer type"},
    "jax.experimental.jet": {
        n: "JAX's Taylor-mode trace and its per-primitive rule tables (jet_rules, def_deriv, ...): ember's jet nests "
           "forward-mode derivatives of the Taylor path, so every primitive with a JVP rule has Taylor terms and "
           "there is no rule table to extend"
        for n in ("JetTrace", "JetTracer", "ZeroSeries", "ZeroTerm", "call_param_updaters", "def_comp", "def_deriv",
                  "deflinear", "defzero", "deriv_prop", "jet_rules", "linear_prop", "zero_prop", "zero_series",
                  "zero_term", "weakref_lru_cache")},
    "jax.experimental.multihost_utils": {
        n: "JAX's primitives (and their rules) for the host-local/global conversions under a trace, where its arrays "
           "may span processes; ember's conversions place arrays outside a trace and are the value itself inside one "
           "(the CPU plugin has no arrays spanning processes)"
        for n in ("global_array_to_host_local_array_impl", "global_array_to_host_local_array_p", "gtl_abstract_eval",
                  "host_local_array_to_global_array_impl", "host_local_array_to_global_array_p", "ltg_abstract_eval",
                  "ltg_batcher")},
    "jax.experimental.rnn": {
        n: "JAX's cuDNN primitives of lstm and their abstract evaluation (the reserve-space size comes from jaxlib's "
           "gpu_rnn): ember's lstm is the lax.scan computation of lstm_ref with a custom VJP, whose halves are "
           "lstm_fwd and lstm_bwd, so there is no primitive of its own"
        for n in ("rnn_abstract_eval", "rnn_bwd_abstract_eval", "rnn_bwd_p", "rnn_fwd_p")},
    "jax.cloud_tpu_init": {"*": _TPU + " (Cloud TPU VM environment set-up)"},
    "jax.lib": {"*": _JAXLIB + " (jax.lib.xla_client, xla_bridge); no public names in JAX 0.10.2"},
    "jax.tools": {"*": "command-line tools for jaxlib/TensorFlow (jax_to_ir converts to TF graphs, "
                       "pgo_nsys_converter reads NVIDIA Nsight profiles)"},
    "jax.tools.jax_to_ir": {"*": "a command-line tool that writes HLO or TensorFlow graphs through jaxlib; "
                                 "ember's `lower(...).as_text()` gives the StableHLO"},
    "jax.tools.pgo_nsys_converter": {"*": "converts NVIDIA Nsight Systems profiles for XLA's GPU PGO"},
    "jax.experimental.pallas": {"*": _PALLAS},
    "jax.experimental.mosaic": {"*": _PALLAS},
    "jax.experimental.colocated_python": {"*": _IFRT},
    "jax.experimental.transfer": {"*": _IFRT},
    "jax.extend.ifrt_programs": {"*": _IFRT},
    "jax.experimental.topologies": {"*": _TPU + " and GPU topology descriptions for compiling without devices"},
    "jax.experimental.scheduling_groups": {"*": _TPU + " (XLA TPU scheduling-group annotations)"},
    "jax.experimental.fused": {"*": "GPU/TPU fusion annotations for Pallas kernels (" + _PALLAS + ")"},
    "jax.interpreters.mlir": {"*": _MLIR},
    "jax.extend.mlir": {"dialects": "the MLIR dialect bindings of jaxlib (" + _MLIR + ")"},
    "jax.interpreters.pxla": {"*": "JAX's internal pmap/pjit executor module (kept for old imports)"},
    "jax.interpreters.xla": {"*": "JAX's legacy XLA-translation module (kept for old imports)"},
    "jax.experimental.pjit": {"*": "kept by JAX for old imports only (no public names in 0.10.2): pjit is jax.jit"},
    "jax.experimental.source_mapper": {"*": "maps the passes of JAX's MLIR pipeline back to source lines through "
                                            "MLIR's Python bindings; ember emits StableHLO text itself (its IR "
                                            "prints each equation's source line: pretty_print(source_info=True))"},
    "jax.interpreters.ad": {"JVPTrace": "JAX's forward-mode tracer class; ember's forward mode is an interpreter "
                                        "over its IR (ember.jvp), with no trace objects to subclass"},
    "jax.interpreters.partial_eval": {
        "DynamicJaxprTracer": "JAX's staging tracer class; ember's staging tracers are its own (ember.core.Tracer)",
        "JaxprTracer": "JAX's partial-evaluation tracer class; ember partially evaluates IRs, not traces",
        "custom_partial_eval_rules": "rules of JAX's partial-evaluation trace, rule(trace, *JaxprTracers, **params); "
                                     "ember partially evaluates by staging concretely (trace_to_jaxpr_nounits), with "
                                     "no tracer objects to hand a rule",
        "partial_eval_jaxpr_custom_rules": "per-primitive rules of JAX's known/staged jaxpr split (remat, scan's "
                                           "partial evaluation); ember splits an IR by dependence alone "
                                           "(passes.split_known, recompute_cheap for remat), consulting no rule"},
    "jax.extend.core": {
        "TraceTag": "an identity tag of JAX's trace objects; ember's transformations are IR interpreters",
        "set_current_trace": "swaps JAX's current trace object; ember has no trace objects to swap",
        "take_current_trace": "reads JAX's current trace object; ember has no trace objects",
        "nonempty_axis_env_DO_NOT_USE": "JAX-internal (its name says so): the axis environment of JAX's traces",
        "unsafe_am_i_under_a_jit_DO_NOT_USE": "JAX-internal (its name says so): a query of JAX's trace stack",
        "unsafe_am_i_under_a_vmap_DO_NOT_USE": "JAX-internal (its name says so): a query of JAX's trace stack",
        "unsafe_get_axis_names_DO_NOT_USE": "JAX-internal (its name says so): a query of JAX's trace stack"},
    "jax.experimental.array_serialization": {"*": "tensorstore-based checkpointing of sharded arrays (orbax's "
                                                  "backend); ember's checkpoints are ember.checkpoints "
                                                  "(safetensors files)"},
}

NOT_YET: dict[str, dict[str, str]] = {
}


# Modules ember has in part (their "*" covers the names they lack, not the module itself).
_PARTLY = {"jax.interpreters.mlir"}


def _parents(table: dict[str, dict[str, str]]) -> None:
    """A whole module listed (its "*") is also a name of its parent module, with the same reason."""
    for module, reasons in list(table.items()):
        parent, _, name = module.rpartition(".")
        if "*" in reasons and parent.startswith("jax") and module not in _PARTLY:
            table.setdefault(parent, {}).setdefault(name, reasons["*"])


_parents(ABSENT)
_parents(NOT_YET)
