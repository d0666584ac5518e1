"""The per-function caches of the transformations (IRs and executables per signature, held weakly: they die with
the function), and the one concrete-value fallback that the APIs seeing values outside jit share."""
from __future__ import annotations

import weakref
from typing import Any, Callable, Hashable, Sequence, TypeVar

from ember._api.running import as_arrays, eval_ir_named, run_ir
from ember._api.staging import stage_with_aux, with_outputs
from ember._api.templates import SharedIR, compile_staged
from ember._control.custom import rule_runs
from ember._core import IR, ConcretizationTypeError, ShapedArray, aval_of, concrete_values, eval_ir, is_tracing
from ember._core.cache import LRUCache
from ember._core.config import config
from ember._core.dtypes import StagingOptions
from ember._core.trace import has_tracer_consts
from ember._core.pytree import PyTreeDef, tree_flatten
from ember._runtime import Compiled

T = TypeVar("T")
SIGNATURES_PER_FUNCTION = "jit_cache_size"  # the ember.config option bounding each function's caches


def signature_key(key: Hashable) -> Hashable:
    """A signature's cache key with the options that change what a function stages out to: enable_x64 gives
    Python scalars and default dtypes 64 bits, so a function traced with it off is not reused with it on; so do
    numpy_dtype_promotion and numpy_rank_promotion (see StagingOptions)."""
    return key, StagingOptions.token


def value_dependent_signatures() -> LRUCache:
    """The signatures (keys from signature_key) of one function that needed concrete values (see
    fallback_per_signature)."""
    return LRUCache(SIGNATURES_PER_FUNCTION)


def fallback_per_signature(needs_values: LRUCache, key: Hashable, abstract: Callable[[], T],
                           concrete: Callable[[], T]) -> T:
    """abstract() (stage at the signature's avals, compile, cache), or concrete() (stage with the values, evaluate
    op by op) for a signature whose staging needed concrete values. Called outside any trace, by the APIs that
    see values there as in JAX (grad, value_and_grad, vjp, jvp, linearize, and the Jacobians).

    The policy is per signature (the key: argument structure, shapes, dtypes, static values, enable_x64): the
    first call of a signature tries abstract(); a ConcretizationTypeError (Python code that depends on a value)
    marks that signature in needs_values and runs concrete(), and its later calls go to concrete() at once,
    without staging abstractly again (it would fail again: the same code sees the same avals). Other signatures
    of the function are not affected: they stay compiled. needs_values holds at most SIGNATURES_PER_FUNCTION
    signatures (the least recently used forgotten, then tried abstractly again); clear_caches empties it."""
    if needs_values.lookup(key) is not None:
        return concrete()
    try:
        return abstract()
    except ConcretizationTypeError:
        needs_values.store(key, True)
        return concrete()


def keeps_result(ir: IR, rule_runs_before: int, traced_once: bool = False) -> bool:
    """Whether an IR built for a signature may serve its later calls: not when it captured tracers of an
    enclosing trace (it belongs to that trace), nor, unless the cache is jit's (traced_once), when building it ran
    a custom rule (rule_runs() is no longer rule_runs_before). Outside jit JAX runs the rules' Python on every call
    of grad, vjp, jvp, vmap, ..., so a rule reading Python state sees it change and a rule that raises raises
    again; jit keeps what its first trace computed, as JAX's jit does."""
    return not has_tracer_consts(ir) and (traced_once or rule_runs() == rule_runs_before)


def compiles(ir: IR) -> bool:
    """Whether a transformation outside jit compiles ir, or runs it op by op (see max_compiled_equations)."""
    return len(ir.eqns) <= config.read_canonical("max_compiled_equations")


def run_transformed(ir: IR, args: Sequence[Any], name: str = "main") -> list[Any]:
    """run_ir for the IRs of transformations: inlined while staging, else compiled (cached on the IR), or run op by
    op when the program is too large for compiling to pay (see compiles)."""
    if is_tracing() or compiles(ir):
        return run_ir(ir, args, name)
    return eval_ir_named(ir, args, name)


class SignatureCache:
    """Per-signature IRs (for inlining) and executables (for eager calls) of one transformed function, and its
    signatures that need concrete values (see fallback_per_signature).

    It holds no reference to the function (build is passed per call), so caches can be kept per function in a
    weak dictionary. IRs that captured tracers of an enclosing trace are used once and not cached, and so are
    those whose build ran a custom rule, unless traced_once (jit's cache; see keeps_result). Each holds at most
    SIGNATURES_PER_FUNCTION entries (least recently used dropped first)."""

    def __init__(self, name: str, traced_once: bool = False):
        self.name = name
        self.traced_once = traced_once
        self.irs = LRUCache(SIGNATURES_PER_FUNCTION)
        self.executables = LRUCache(SIGNATURES_PER_FUNCTION)
        self.needs_values = value_dependent_signatures()

    def ir_for(self, key: Hashable, build: Callable[..., IR], *build_args: Any) -> IR:
        return self._ir_for(signature_key(key), build, *build_args)[0]

    def executable(self, key: Hashable) -> Compiled | None:
        """The executable compiled for this signature (under the current options), if any."""
        return self.executables.get(signature_key(key))

    def _ir_for(self, key: Hashable, build: Callable[..., IR], *build_args: Any) -> tuple[IR, bool]:
        """(the signature's IR, whether it is kept for later calls)."""
        ir = self.irs.lookup(key)
        if ir is not None:
            return ir, True
        runs = rule_runs()
        ir = build(*build_args)
        if not keeps_result(ir, runs, self.traced_once):
            return ir, False
        ir = SharedIR.of(ir)  # (handed out again, by jit's trace too: it must not change)
        self.irs.store(key, ir)
        return ir, True

    def call(self, key: Hashable, leaves: Sequence[Any], build: Callable[..., IR], *build_args: Any) -> Any:
        key = signature_key(key)
        if not is_tracing():
            executable = self.executables.lookup(key)
            if executable is not None:
                return executable(*leaves)
        ir, kept = self._ir_for(key, build, *build_args)
        if is_tracing():
            return ir.out_tree.unflatten(eval_ir(ir, leaves))
        if not self.traced_once and not compiles(ir):  # (jit's cache always compiles)
            return ir.out_tree.unflatten(as_arrays(eval_ir(ir, leaves)))
        executable = compile_staged(ir, self.name)
        if kept:
            self.executables.store(key, executable)
        return executable(*leaves)


_function_caches: "weakref.WeakKeyDictionary[Any, dict[Hashable, Any]]" = weakref.WeakKeyDictionary()


def per_function(fun: Any, config: Hashable, make: Callable[[], Any]) -> Any:
    """The object kept for fun transformed with config (made on first use), shared by every wrapper of the same
    function (so ember.grad(f)(x) in a loop compiles once, as in JAX). Held weakly: it dies with fun."""
    try:
        per_function = _function_caches.setdefault(fun, {})
    except TypeError:  # not weak-referenceable
        return make()
    kept = per_function.get(config)
    if kept is None:
        kept = per_function[config] = make()
    return kept


def cache_for(fun: Any, config: Hashable, name: str, traced_once: bool = False) -> SignatureCache:
    """fun's SignatureCache for config (see per_function); traced_once for jit's (see keeps_result)."""
    return per_function(fun, config, lambda: SignatureCache(name, traced_once))


def call_with_fallback(cache: SignatureCache, key: Hashable, leaves: Sequence[Any],
                       build: Callable[..., IR], *build_args: Any) -> Any:
    """cache.call for the autodiff APIs, which see concrete values outside jit as in JAX (fallback_per_signature):
    a signature needing values is staged concretely on each call (build gets values=; the IR is specialised to
    them and not cached) and its transformed IR evaluated op by op with cached eager executables: no program is
    compiled per call. Inside a concrete staging (nested autodiff) the staging is concrete too; inside an
    abstract one, errors go to the enclosing API."""
    def concrete(values: Sequence[Any]) -> Any:
        ir = build(*build_args, values=values)
        return ir.out_tree.unflatten(as_arrays(eval_ir(ir, leaves)))

    values = concrete_values(leaves)
    if values is not None:
        return concrete(values)
    if is_tracing():
        return cache.call(key, leaves, build, *build_args)
    return fallback_per_signature(cache.needs_values, signature_key(key),
                                  lambda: cache.call(key, leaves, build, *build_args),
                                  lambda: concrete(list(leaves)))


def compiled_outside_traces(fun: Any, config: Hashable, name: str, direct: Callable[..., Any]) -> Callable[..., Any]:
    """A wrapper of direct, which computes a transformation of fun by composing others (a Jacobian as vmap of
    jvp): outside any trace each signature is staged and compiled once, in a cache kept per (fun, config) like
    jit's, so repeated calls, even through new wrappers, reuse one program. direct runs as it is inside traces
    (where it is inlined anyway), for arguments that are not arrays, and for the signatures that need concrete
    values (fallback_per_signature)."""
    cache = cache_for(fun, config, name)

    def build(in_tree: PyTreeDef, avals: tuple[ShapedArray, ...]) -> IR:
        ir, store = stage_with_aux(direct, in_tree, avals, False, name, named_like=fun)
        return with_outputs(ir, ir.outs, store.tree)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if is_tracing():
            return direct(*args, **kwargs)
        leaves, in_tree = tree_flatten((args, kwargs))
        try:
            avals = tuple(aval_of(x) for x in leaves)
        except TypeError:  # non-array arguments: no signature to compile for
            return direct(*args, **kwargs)
        key = (in_tree, avals)
        return fallback_per_signature(cache.needs_values, signature_key(key),
                                      lambda: cache.call(key, leaves, build, in_tree, avals),
                                      lambda: direct(*args, **kwargs))
    return wrapper


class PlanCache(LRUCache):
    """A function's plans (pairs of IRs: what runs now, what runs later, as vjp's forward and backward parts) per
    signature, and its signatures that need concrete values (see fallback_per_signature)."""

    def __init__(self) -> None:
        super().__init__(SIGNATURES_PER_FUNCTION)
        self.needs_values = value_dependent_signatures()

    def plan(self, key: Hashable, make: Callable[[Any], Any]) -> Any:
        """The plan for a signature staged abstractly (made by make(None) on first use; not kept when its IRs
        captured tracers of an enclosing trace, or making it ran a custom rule: see keeps_result)."""
        plan = self.lookup(key)
        if plan is None:
            runs = rule_runs()
            plan = make(None)
            if all(keeps_result(ir, runs) for ir in plan.irs):
                self.store(key, plan)
        return plan


def plan_for(fun: Any, kind: str, key: Hashable, leaves: Sequence[Any], make: Callable[[Any], Any]
             ) -> tuple[Any, Callable[..., list[Any]]]:
    """(plan, run): fun's plan of this kind for a signature, made by make(values), and how to run its IRs.
    Staged abstractly (values None), a plan is cached and its IRs compiled (run_transformed); for a signature that
    needs concrete values outside jit (fallback_per_signature), make gets the values and its IRs are evaluated op by
    op, as in call_with_fallback."""
    plans = per_function(fun, kind, PlanCache)
    key = signature_key(key)
    values = concrete_values(leaves)
    if values is not None:
        return make(values), eval_ir_named
    if is_tracing():
        return plans.plan(key, make), run_transformed
    return fallback_per_signature(plans.needs_values, key, lambda: (plans.plan(key, make), run_transformed),
                                  lambda: (make(list(leaves)), eval_ir_named))
