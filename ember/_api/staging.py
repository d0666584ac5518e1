"""Staging helpers shared by the transformations: flattening arguments to leaves and abstract values, staging a
function with auxiliary outputs, compiling an IR (once per IR), running an IR (inlined while staging, else
compiled), and the per-function caches of IRs and executables (held weakly: they die with the function)."""
from __future__ import annotations

import inspect
import types
import weakref
from typing import Any, Callable, Hashable, Sequence

import numpy as np

from ember._core import (IR, ConcretizationTypeError, Literal, ShapedArray, Tracer, aval_of, check_live,
                         concrete_values, eval_ir, is_python_scalar, is_tracing, stage_flat)
from ember._core.cache import LRUCache, on_clear
from ember._core.dtypes import x64_enabled
from ember._core.ir import NotKeyable, structural_key
from ember._core.pytree import (PyTreeDef, keystr, tree_flatten, tree_flatten_with_path, tree_leaves,
                                tree_structure)
from ember._prims import full
from ember._runtime import Compiled, compile_ir, device_put


def fun_name(fun: Any) -> str:
    return getattr(fun, "__name__", type(fun).__name__)


def leaf_avals(api: str, args: Sequence[Any], kwargs: dict[str, Any], leaves: Sequence[Any]
                ) -> tuple[ShapedArray, ...]:
    """The abstract values of a transformed function's argument leaves; a tracer leaked out of a finished staging
    is an UnexpectedTracerError here, even where the function would not use it."""
    try:
        avals = tuple(aval_of(x) for x in leaves)
    except TypeError:
        pass
    else:
        for x in leaves:
            if isinstance(x, Tracer):
                check_live(x, api)
        return avals
    for i, arg in enumerate(list(args) + list(kwargs.values())):  # find the culprit for the message
        for leaf in tree_flatten(arg)[0]:
            try:
                aval_of(leaf)
            except TypeError as err:
                where = f"argument {i}" if i < len(args) else f"keyword argument {list(kwargs)[i - len(args)]!r}"
                if isinstance(leaf, np.ndarray | np.generic | complex):  # a number of a dtype ember lacks
                    shape = f" of shape {np.shape(leaf)}" if np.ndim(leaf) else ""
                    raise TypeError(f"{api}: {where} contains a {type(leaf).__name__}{shape} that ember cannot "
                                    f"take: {err}") from None
                raise TypeError(f"{api}: {where} contains a value of type {type(leaf).__name__} ({leaf!r}), which "
                                "is not a valid ember array; pass arrays, numbers or pytrees of them, or mark the "
                                "argument static (static_argnums)") from None
    raise AssertionError("unreachable")




def compile(ir: IR, name: str = "main") -> Compiled:  # noqa: A001
    """Compile an IR with XLA; the result is called with the IR's inputs and returns its outputs."""
    if not isinstance(ir, IR):
        raise TypeError(f"compile: expected an IR (from ember.stage_out or ember.grad), got {type(ir).__name__}")
    compiled = ir.compiled  # kept on the IR (not in a global table), so it is freed with the IR
    if compiled is None or compiled.name != name:
        compiled = ir.compiled = compile_staged(ir, name)
        _compiled_irs.add(ir)
    return compiled


_compiled_irs: "weakref.WeakSet[IR]" = weakref.WeakSet()  # to forget their programs in clear_caches


def _forget_compiled_irs() -> None:
    for ir in list(_compiled_irs):
        ir.compiled = None
    _compiled_irs.clear()


on_clear(_forget_compiled_irs)


def run_ir(ir: IR, args: Sequence[Any], name: str = "main") -> list[Any]:
    """Run an IR: inline it into the current trace while staging, else compile (cached) and execute it."""
    if is_tracing():
        return eval_ir(ir, args)
    return compile(ir, name).call_flat(args)


def has_tracer_consts(ir: IR) -> bool:
    return any(isinstance(c, Tracer) for c in ir.consts)


SIGNATURES_PER_FUNCTION = "jit_cache_size"  # the ember.config option bounding each function's caches


def signature_key(key: Hashable) -> Hashable:
    """A signature's cache key with the options that change what a function stages out to: enable_x64 gives
    Python scalars and default dtypes 64 bits, so a function traced with it off is not reused with it on."""
    return key, x64_enabled()


class SignatureCache:
    """Per-signature IRs (for inlining) and executables (for eager calls) of one transformed function.

    It holds no reference to the function (build is passed per call), so caches can be kept per function in a
    weak dictionary. IRs that captured tracers of an enclosing trace are used once and not cached. Each holds at
    most SIGNATURES_PER_FUNCTION entries (least recently used dropped first)."""

    def __init__(self, name: str):
        self.name = name
        self.irs = LRUCache(SIGNATURES_PER_FUNCTION)
        self.executables = LRUCache(SIGNATURES_PER_FUNCTION)
        self.concrete = False  # set when an autodiff API needed concrete values (see call_with_fallback)

    def ir_for(self, key: Hashable, build: Callable[..., IR], *build_args: Any) -> IR:
        return self._ir_for(signature_key(key), build, *build_args)

    def executable(self, key: Hashable) -> Compiled | None:
        """The executable compiled for this signature (under the current options), if any."""
        return self.executables.get(signature_key(key))

    def _ir_for(self, key: Hashable, build: Callable[..., IR], *build_args: Any) -> IR:
        ir = self.irs.lookup(key)
        if ir is None:
            ir = build(*build_args)
            if not has_tracer_consts(ir):
                self.irs.store(key, ir)
        return ir

    def call(self, key: Hashable, leaves: Sequence[Any], build: Callable[..., IR], *build_args: Any) -> Any:
        key = signature_key(key)
        if not is_tracing():
            executable = self.executables.lookup(key)
            if executable is not None:
                return executable(*leaves)
        ir = self._ir_for(key, build, *build_args)
        if is_tracing():
            return ir.out_tree.unflatten(eval_ir(ir, leaves))
        executable = compile_staged(ir, self.name)
        if not has_tracer_consts(ir):
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


def cache_for(fun: Any, config: Hashable, name: str) -> SignatureCache:
    return per_function(fun, config, lambda: SignatureCache(name))


class _OutStore:
    """Receives the output structure found while a function is staged out."""
    tree: PyTreeDef | None = None
    aux_tree: PyTreeDef | None = None


def stage_with_aux(fun: Callable[..., Any], in_tree: PyTreeDef, avals: Sequence[ShapedArray], has_aux: bool,
                    name: str, values: Sequence[Any] | None = None, named_like: Any = None) -> tuple[IR, _OutStore]:
    """Stage fun(*args, **kwargs) out (in_tree is that of (args, kwargs)). The IR's outputs are the leaves of
    the result, then (with has_aux, when fun returns (result, aux)) the leaves of aux. With values (the leaves'
    concrete values) the staging is concrete: Python code in fun may depend on them. Error messages name the
    inputs after the parameters of named_like (by default fun)."""
    store = _OutStore()

    def flat(*leaves: Any) -> list[Any]:
        args, kwargs = in_tree.unflatten(leaves)
        result = fun(*args, **kwargs)
        aux_leaves: list[Any] = []
        if has_aux:
            if not (isinstance(result, tuple | list) and len(result) == 2):
                raise TypeError(f"{name}: with has_aux=True the function must return a pair (output, aux)")
            result, aux = result
            aux_leaves, store.aux_tree = tree_flatten(aux)
        out_leaves, store.tree = tree_flatten(result)
        return out_leaves + aux_leaves

    # a concrete staging is always an autodiff API's: the function it differentiates
    return stage_flat(flat, avals, values, name, leaf_names(named_like or fun, in_tree),
                      differentiated=values is not None), store


def leaf_names(fun: Any, in_tree: PyTreeDef) -> list[str]:
    """Names of the leaves of (args, kwargs) for error messages: the parameter names of fun, with key paths
    inside pytree arguments ("params['w']", "args[1]"). Remembered per (code, in_tree) for plain functions, whose
    parameters their code fixes (a fresh closure per call stages the same code again and again)."""
    if type(fun) is not types.FunctionType or hasattr(fun, "__wrapped__") or hasattr(fun, "__signature__"):
        return _leaf_names(fun, in_tree)
    key = (fun.__code__, in_tree)
    names = _leaf_names_seen.lookup(key)
    if names is None:
        names = _leaf_names(fun, in_tree)
        _leaf_names_seen.store(key, names)
    return names


_leaf_names_seen = LRUCache("program_cache_size")


def _leaf_names(fun: Any, in_tree: PyTreeDef) -> list[str]:
    try:
        params = [p.name for p in inspect.signature(fun).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = []
    for path, _ in tree_flatten_with_path(in_tree.unflatten([0] * in_tree.num_leaves))[0]:
        if path[0].idx == 1:  # a keyword argument: its key path starts with the keyword
            names.append(f"argument {path[1].key}{keystr(path[2:])}")
            continue
        position = path[1].idx
        head = params[position] if position < len(params) else f"args[{position}]"
        names.append(f"argument {head}{keystr(path[2:])}")
    return names


def broadcast_prefix(api: str, what: str, prefix: Any, tree: Any) -> list[Any]:
    """One entry of prefix per leaf of tree, where prefix is a tree prefix of tree (its leaves are ints or None,
    as vmap's in_axes and out_axes): an entry applies to every leaf of the subtree it stands at."""
    prefix_def = tree_structure(prefix, is_leaf=lambda x: x is None)
    try:
        subtrees = prefix_def.flatten_up_to(tree)
    except ValueError as err:
        raise ValueError(f"{api}: {what} specification must be a tree prefix of the corresponding value, got "
                         f"specification {prefix!r} for value tree {tree_structure(tree)}: {err}") from None
    entries = tree_leaves(prefix, is_leaf=lambda x: x is None)
    return [entry for entry, sub in zip(entries, subtrees) for _ in range(tree_structure(sub).num_leaves)]


def call_with_fallback(cache: SignatureCache, key: Hashable, leaves: Sequence[Any],
                       build: Callable[..., IR], *build_args: Any) -> Any:
    """cache.call for the autodiff APIs, which see concrete values outside jit as in JAX: when staging fails on a
    value-dependent Python branch (a ConcretizationTypeError) outside any trace, the function is remembered as
    needing concrete values, and from then on each call stages it concretely (the IR is specialised to the values
    and not cached) and evaluates the transformed IR op by op with cached eager executables: no program is
    compiled per call. Inside a concrete staging (nested autodiff) the staging is concrete too."""
    values = concrete_values(leaves)
    if values is None and is_tracing():  # inside an abstract staging: errors go to the enclosing API
        return cache.call(key, leaves, build, *build_args)
    if values is None and not cache.concrete:
        try:
            return cache.call(key, leaves, build, *build_args)
        except ConcretizationTypeError:
            cache.concrete = True
    ir = build(*build_args, values=list(leaves) if values is None else values)
    return ir.out_tree.unflatten(as_arrays(eval_ir(ir, leaves)))


def as_tuple(nums: int | Sequence[int] | None) -> tuple[int, ...]:
    if nums is None:
        return ()
    return (nums,) if isinstance(nums, int) else tuple(nums)


def as_arrays(values: list[Any]) -> list[Any]:
    """Values an IR returned, made arrays: its literal outputs (constants), and outside traces the host values
    it passed through (an output that is an input)."""
    tracing = is_tracing()
    return [full((), v) if isinstance(v, Literal) else
            device_put(v, weak_type=aval_of(v).weak_type) if not tracing and is_host_value(v) else v for v in values]


def is_host_value(x: Any) -> bool:
    return is_python_scalar(x) or isinstance(x, np.ndarray | np.generic)


def eval_ir_public(ir: IR, *args: Any) -> Any:
    """Evaluate an IR primitive by primitive (eagerly, or inline while staging); returns its outputs."""
    outs = as_arrays(eval_ir(ir, args))
    if ir.out_tree is not None:
        return ir.out_tree.unflatten(outs)
    return outs[0] if len(outs) == 1 else tuple(outs)


_transformed = LRUCache("program_cache_size")  # (what, structural key of a staged IR) -> transformed template


def transform_once(what: Hashable, ir: IR, transform: Callable[[IR, int], IR]) -> IR:
    """transform(ir, 0), computed once per structure of ir (process-wide, bounded by program_cache_size): a new IR
    of the same structure (the same function staged again, or a fresh closure over other arrays of the same
    shapes: each is staged anew, only this work is shared) gets the cached template with its own constants.

    The template is transform(lifted, n): ir with its n constants lifted to leading inputs (transform must keep
    them as the leading inputs of its result, untouched), so it cannot depend on their values. `what` must name
    everything else the result depends on (the transformation and its options, output structures); enable_x64,
    which the rules' default dtypes follow, is added here."""
    try:
        key = (what, x64_enabled(), structural_key(ir))
        entry = _transformed.lookup(key)
    except (NotKeyable, TypeError):  # (an unhashable option or param: no sharing)
        return transform(ir, 0)
    if entry is None:
        n = len(ir.consts)
        entry = _Template(transform(IR([], [], ir.const_vars + ir.in_vars, ir.eqns, ir.outs, ir.out_tree), n))
        _transformed.store(key, entry)
    view = with_consts(entry.ir, ir.consts)
    _made_from[view] = entry
    return view


class _Template:
    """A transformed IR shared by the IRs of one structure, and the structural key of the IRs made from it (one
    structure: computed once, when the first of them is compiled)."""
    __slots__ = ("ir", "lowering_key")

    def __init__(self, ir: IR):
        self.ir = ir
        self.lowering_key: Hashable | None = None


_made_from: "weakref.WeakKeyDictionary[IR, _Template]" = weakref.WeakKeyDictionary()  # IRs of transform_once
on_clear(_made_from.clear)


def compile_staged(ir: IR, name: str) -> Compiled:
    """compile_ir, told the structural key of an IR made by transform_once (so that it is not computed anew)."""
    template = _made_from.get(ir)
    if template is None:
        return compile_ir(ir, name)
    if template.lowering_key is None:
        try:
            template.lowering_key = structural_key(ir, sources=False)
        except NotKeyable:
            return compile_ir(ir, name)
    return compile_ir(ir, name, template.lowering_key)


def with_consts(template: IR, consts: Sequence[Any]) -> IR:
    """The IR template with its first len(consts) inputs bound to consts (a new IR sharing its equations)."""
    n = len(consts)
    return IR(template.const_vars + template.in_vars[:n], template.consts + list(consts), template.in_vars[n:],
              template.eqns, template.outs, template.out_tree)


def compiled_outside_traces(fun: Any, config: Hashable, name: str, direct: Callable[..., Any]) -> Callable[..., Any]:
    """A wrapper of direct, which computes a transformation of fun by composing others (a Jacobian as vmap of
    jvp): outside any trace each signature is staged and compiled once, in a cache kept per (fun, config) like
    jit's, so repeated calls, even through new wrappers, reuse one program. direct runs as it is inside traces
    (where it is inlined anyway), for arguments that are not arrays, and for functions that need concrete values
    (remembered, as in call_with_fallback)."""
    cache = cache_for(fun, config, name)

    def build(in_tree: PyTreeDef, avals: tuple[ShapedArray, ...]) -> IR:
        ir, store = stage_with_aux(direct, in_tree, avals, False, name, named_like=fun)
        ir.out_tree = store.tree
        return ir

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if is_tracing() or cache.concrete:
            return direct(*args, **kwargs)
        leaves, in_tree = tree_flatten((args, kwargs))
        try:
            avals = tuple(aval_of(x) for x in leaves)
        except TypeError:  # non-array arguments: no signature to compile for
            return direct(*args, **kwargs)
        try:
            return cache.call((in_tree, avals), leaves, build, in_tree, avals)
        except ConcretizationTypeError:
            cache.concrete = True
            return direct(*args, **kwargs)
    return wrapper


def eval_ir_named(ir: IR, args: Sequence[Any], name: str = "") -> list[Any]:
    """eval_ir with run_ir's signature: an IR evaluated op by op (or inlined while staging)."""
    return as_arrays(eval_ir(ir, args))


class PlanCache(LRUCache):
    """A function's plans (pairs of IRs: what runs now, what runs later, as vjp's forward and backward parts) per
    signature; concrete once the function needed concrete values (see call_with_fallback)."""
    concrete = False


def plan_for(fun: Any, kind: str, key: Hashable, leaves: Sequence[Any], make: Callable[[Any], Any]
             ) -> tuple[Any, Callable[..., list[Any]]]:
    """(plan, run): fun's plan of this kind for a signature, made by make(values), and how to run its IRs.
    Staged abstractly (values None), a plan is cached and its IRs compiled (run_ir); when fun needs concrete
    values outside jit, make gets the values and its IRs are evaluated op by op, as call_with_fallback does."""
    plans = per_function(fun, kind, lambda: PlanCache(SIGNATURES_PER_FUNCTION))
    key = signature_key(key)
    values = concrete_values(leaves)
    if values is None and (is_tracing() or not plans.concrete):
        try:
            plan = plans.lookup(key)
            if plan is None:
                plan = make(None)
                if not any(has_tracer_consts(ir) for ir in plan.irs):
                    plans.store(key, plan)
            return plan, run_ir
        except ConcretizationTypeError:
            if is_tracing():  # inside an abstract staging: the error goes to the enclosing API
                raise
            plans.concrete = True
    return make(list(leaves) if values is None else values), eval_ir_named
