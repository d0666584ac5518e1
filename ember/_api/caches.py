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
from ember._core.cache import LRUCache, on_clear
from ember._core.ir import Var
from ember._core.config import config
from ember._core.dtypes import StagingOptions
from ember._core.sharding import placement_token
from ember._core.trace import has_tracer_consts
from ember._core.pytree import PyTreeDef, tree_flatten
from ember._runtime import Compiled
from ember._transforms.cache import paused_gc
from ember._transforms.passes import dce_outputs

T = TypeVar("T")
SIGNATURES_PER_FUNCTION = "jit_cache_size"  # the ember.config option bounding each function's caches


def signature_key(key: Hashable) -> Hashable:
    """A signature's cache key with the options that change what a function stages out to: enable_x64 gives
    Python scalars and default dtypes 64 bits, so a function traced with it off is not reused with it on; so do
    numpy_dtype_promotion and numpy_rank_promotion (see StagingOptions); and so does the mesh context (set_mesh,
    use_abstract_mesh, `with mesh:`: placement_token): a function traced under one is not reused under another."""
    mesh = placement_token()
    return (key, StagingOptions.token) if mesh is None else (key, StagingOptions.token, mesh)


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


# XLA's CPU compile time grows faster than a program's parameters and results (measured on the 2-core machine, one
# elementwise op per parameter/result pair: 1000 of each 0.27 s, 2000 0.68 s, 4000 1.8 s, 10000 6.4 s; one value
# returned 10000 times 2.6 s): a transformation outside jit compiles its program only while the parameters it
# reads and its distinct results number at most this many together (see NarrowProgram); beyond, op by op.
MAX_COMPILED_WIDTH = 4096


class NarrowProgram:
    """How a transformation outside jit runs an IR compiled: XLA sees only the inputs that the live code reads (as
    jit's programs do) and each distinct output once, which run gives back for each output naming it (the gradient
    of a sum of 100000 leaves is one value: the same Array for every leaf, as JAX's grad outside jit returns), so
    that what XLA compiles is as narrow as the computation. Made once per IR (narrow_program). It holds no
    reference to its IR (it is kept in a weak dictionary keyed by it): an IR with nothing to narrow is compiled as
    run_ir compiles it (kept on the IR)."""
    __slots__ = ("out_tree", "kept", "positions", "width", "num_eqns", "program", "compiled")

    def __init__(self, ir: IR):
        index: dict[Any, int] = {}
        distinct: list[Any] = []
        positions = []
        for atom in ir.outs:
            key = atom if isinstance(atom, Var) else id(atom)  # (a Literal: each object once)
            at = index.get(key)
            if at is None:
                at = index[key] = len(distinct)
                distinct.append(atom)
            positions.append(at)
        read = {a for eqn in ir.eqns for a in eqn.inputs if isinstance(a, Var)}
        read.update(a for a in distinct if isinstance(a, Var))
        kept = [i for i, v in enumerate(ir.in_vars) if v in read]
        self.out_tree = ir.out_tree
        self.width = len(kept) + len(distinct)
        self.compiled: Compiled | None = None
        self.program: IR | None = None  # the narrowed IR (None: ir itself is compiled)
        self.kept: list[int] | None = None
        self.positions: list[int] | None = None
        if len(kept) < len(ir.in_vars) or len(distinct) < len(ir.outs):
            live, _ = dce_outputs(IR(ir.const_vars, ir.consts, ir.in_vars, ir.eqns, distinct, None),
                                  [True] * len(distinct))
            self.program = IR(live.const_vars, live.consts, [ir.in_vars[i] for i in kept], live.eqns, live.outs,
                              None)
            self.kept, self.positions = kept, positions
        self.num_eqns = len((self.program or ir).eqns)

    def compiles(self) -> bool:
        """Whether compiling pays (see max_compiled_equations and MAX_COMPILED_WIDTH), else the IR runs op by op."""
        return (self.num_eqns <= config.read_canonical("max_compiled_equations")
                and self.width <= MAX_COMPILED_WIDTH)

    def compile(self, ir: IR, name: str) -> Any:
        """What runs ir compiled (ir: the IR this was made for): called with its inputs, it returns its outputs in
        its output structure (a Compiled, or this NarrowProgram once its program is compiled)."""
        if self.program is None:
            return compile_staged(ir, name)
        if self.compiled is None or self.compiled.name != name:
            self.compiled = compile_staged(self.program, name)
        return self

    def run(self, ir: IR, args: Sequence[Any], name: str = "main") -> list[Any]:
        """ir's outputs for args (every input), compiled (once: kept)."""
        if self.program is None:
            return run_ir(ir, args, name)
        self.compile(ir, name)
        return self.call_flat(args)

    def call_flat(self, args: Sequence[Any]) -> list[Any]:
        outs = self.compiled.call_flat([args[i] for i in self.kept])  # type: ignore[union-attr,index]
        return [outs[p] for p in self.positions]  # type: ignore[union-attr]

    def __call__(self, *args: Any) -> Any:
        """The outputs for args, in the IR's output structure (as Compiled.__call__)."""
        outs = self.call_flat(args)
        return self.out_tree.unflatten(outs) if self.out_tree is not None else outs


_narrow_programs: "weakref.WeakKeyDictionary[IR, NarrowProgram]" = weakref.WeakKeyDictionary()
on_clear(_narrow_programs.clear)


def narrow_program(ir: IR) -> NarrowProgram:
    """ir's NarrowProgram (made on first use, kept while ir lives)."""
    program = _narrow_programs.get(ir)
    if program is None:
        program = _narrow_programs[ir] = NarrowProgram(ir)
    return program


def compiles(ir: IR) -> bool:
    """Whether a transformation outside jit compiles ir, or runs it op by op (see NarrowProgram.compiles)."""
    return narrow_program(ir).compiles()


def run_transformed(ir: IR, args: Sequence[Any], name: str = "main") -> list[Any]:
    """run_ir for the IRs of transformations: inlined while staging, else compiled (narrowed: see NarrowProgram,
    kept while the IR lives), or run op by op when the program is too large for compiling to pay (see compiles)."""
    if is_tracing():
        return run_ir(ir, args, name)
    program = narrow_program(ir)
    if program.compiles():
        return program.run(ir, args, name)
    with paused_gc():
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
        with paused_gc():
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
        if self.traced_once:  # (jit's cache always compiles, the whole program)
            executable: Any = compile_staged(ir, self.name)
        else:
            with paused_gc():
                narrow = narrow_program(ir)
                if not narrow.compiles():
                    return ir.out_tree.unflatten(as_arrays(eval_ir(ir, leaves)))
            executable = narrow.compile(ir, self.name)
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
            with paused_gc():
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
