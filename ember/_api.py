"""The public transformations: stage_out, compile, jit, grad, value_and_grad, vjp.

Function-level transformations stage the function out at its arguments' abstract values, transform the IR, then
either compile it (cached per signature) or, when called while another function is being staged out, inline the
transformed IR into that trace. Composition in any order falls out of this."""
from __future__ import annotations

import functools
import weakref
from typing import Any, Callable, Hashable, Sequence

from ember import _ad
from ember._array import Array
from ember._core import Tracer, aval_of, eval_ir, is_tracing, stage_flat
from ember._dtypes import ShapedArray
from ember._ir import IR
from ember._passes import dce, split_known
from ember._runtime import Compiled
from ember.tree_util import PyTreeDef, leaf_def, tree_flatten, tree_structure

# ---------------------------------------------------------------------------------------------------------------
# Helpers


def _fun_name(fun: Any) -> str:
    return getattr(fun, "__name__", type(fun).__name__)


def _leaf_avals(api: str, args: Sequence[Any], kwargs: dict[str, Any], leaves: Sequence[Any]
                ) -> tuple[ShapedArray, ...]:
    try:
        return tuple(aval_of(x) for x in leaves)
    except TypeError:
        pass
    for i, arg in enumerate(list(args) + list(kwargs.values())):  # find the culprit for the message
        for leaf in tree_flatten(arg)[0]:
            try:
                aval_of(leaf)
            except TypeError:
                where = f"argument {i}" if i < len(args) else f"keyword argument {list(kwargs)[i - len(args)]!r}"
                raise TypeError(f"{api}: {where} contains a value of type {type(leaf).__name__} ({leaf!r}), which "
                                "is not a valid ember array; pass arrays, numbers or pytrees of them, or mark the "
                                "argument static (static_argnums)") from None
    raise AssertionError("unreachable")


_compiled_irs: "weakref.WeakKeyDictionary[IR, Compiled]" = weakref.WeakKeyDictionary()


def compile(ir: IR, name: str = "main") -> Compiled:  # noqa: A001
    """Compile an IR with XLA; the result is called with the IR's inputs and returns its outputs."""
    if not isinstance(ir, IR):
        raise TypeError(f"compile: expected an IR (from ember.stage_out or ember.grad), got {type(ir).__name__}")
    compiled = _compiled_irs.get(ir)
    if compiled is None:
        compiled = _compiled_irs[ir] = Compiled(ir, name)
    return compiled


def run_ir(ir: IR, args: Sequence[Any], name: str = "main") -> list[Any]:
    """Run an IR: inline it into the current trace while staging, else compile (cached) and execute it."""
    if is_tracing():
        return eval_ir(ir, args)
    return compile(ir, name).call_flat(args)


def _has_tracer_consts(ir: IR) -> bool:
    return any(isinstance(c, Tracer) for c in ir.consts)


class _SignatureCache:
    """Per-signature IRs (for inlining) and executables (for eager calls) of one transformed function.

    It holds no reference to the function (build is passed per call), so caches can be kept per function in a
    weak dictionary. IRs that captured tracers of an enclosing trace are used once and not cached."""

    def __init__(self, name: str):
        self.name = name
        self.irs: dict[Hashable, IR] = {}
        self.executables: dict[Hashable, Compiled] = {}

    def ir_for(self, key: Hashable, build: Callable[..., IR], *build_args: Any) -> IR:
        ir = self.irs.get(key)
        if ir is None:
            ir = build(*build_args)
            if not _has_tracer_consts(ir):
                self.irs[key] = ir
        return ir

    def call(self, key: Hashable, leaves: Sequence[Any], build: Callable[..., IR], *build_args: Any) -> Any:
        if not is_tracing():
            executable = self.executables.get(key)
            if executable is not None:
                return executable(*leaves)
        ir = self.ir_for(key, build, *build_args)
        if is_tracing():
            return ir.out_tree.unflatten(eval_ir(ir, leaves))
        executable = Compiled(ir, self.name)
        if not _has_tracer_consts(ir):
            self.executables[key] = executable
        return executable(*leaves)


_function_caches: "weakref.WeakKeyDictionary[Any, dict[Hashable, Any]]" = weakref.WeakKeyDictionary()


def _per_function(fun: Any, config: Hashable, make: Callable[[], Any]) -> Any:
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


def _cache_for(fun: Any, config: Hashable, name: str) -> _SignatureCache:
    return _per_function(fun, config, lambda: _SignatureCache(name))


class _OutStore:
    """Receives the output structure found while a function is staged out."""
    tree: PyTreeDef | None = None
    aux_tree: PyTreeDef | None = None


def _stage_with_aux(fun: Callable[..., Any], in_tree: PyTreeDef, avals: Sequence[ShapedArray], has_aux: bool,
                    name: str) -> tuple[IR, _OutStore]:
    """Stage fun(*args, **kwargs) out (in_tree is that of (args, kwargs)). The IR's outputs are the leaves of
    the result, then (with has_aux, when fun returns (result, aux)) the leaves of aux."""
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

    return stage_flat(flat, avals), store


# ---------------------------------------------------------------------------------------------------------------
# stage_out / make_ir
def _is_aval(x: Any) -> bool:
    return isinstance(x, ShapedArray)


def stage_out(fun: Callable[..., Any], *avals: Any) -> IR:
    """Stage fun out to an IR at the given abstract values (ShapedArrays, arrays, or pytrees of them)."""
    leaves, in_tree = tree_flatten((avals, {}), is_leaf=_is_aval)
    try:
        in_avals = [x if isinstance(x, ShapedArray) else aval_of(x) for x in leaves]
    except TypeError as err:
        raise TypeError(f"stage_out({_fun_name(fun)}): arguments must be ShapedArrays or arrays: {err}") from None
    ir, store = _stage_with_aux(fun, in_tree, in_avals, False, f"stage_out({_fun_name(fun)})")
    ir.out_tree = store.tree
    return ir


def make_ir(fun: Callable[..., Any], static_argnums: int | Sequence[int] = ()) -> Callable[..., IR]:
    """make_ir(f)(*args) is the IR of f at the arguments' shapes and dtypes (like jax.make_jaxpr)."""
    jitted = jit(fun, static_argnums=static_argnums)

    def make(*args: Any, **kwargs: Any) -> IR:
        return jitted.trace(*args, **kwargs)
    return make


# ---------------------------------------------------------------------------------------------------------------
# jit
def _as_tuple(nums: int | Sequence[int] | None) -> tuple[int, ...]:
    if nums is None:
        return ()
    return (nums,) if isinstance(nums, int) else tuple(nums)


class Jitted:
    """A function compiled with XLA per argument signature (tree structure, shapes, dtypes, static values)."""

    def __init__(self, fun: Callable[..., Any], static_argnums: int | Sequence[int] = (),
                 static_argnames: str | Sequence[str] = ()):
        if not callable(fun):
            raise TypeError(f"jit: expected a function, got {type(fun).__name__}")
        self.fun = fun
        self.static_argnums = _as_tuple(static_argnums)
        self.static_argnames = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
        self.name = f"jit({_fun_name(fun)})"
        self._cache = _cache_for(fun, ("jit", self.static_argnums, self.static_argnames), self.name)
        self._by_avals: dict[tuple[ShapedArray, ...], Compiled] = {}  # fast path: positional Array arguments
        functools.update_wrapper(self, fun, updated=())  # (copying __dict__ could clobber our attributes)

    def _split(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, Any]:
        if not self.static_argnums and not self.static_argnames:
            return (), args, kwargs
        n = len(args)
        static_pos = tuple(sorted({i % n if n else i for i in self.static_argnums if -n <= i < n}))
        statics = tuple((i, args[i]) for i in static_pos) + tuple(
            (k, kwargs[k]) for k in sorted(kwargs) if k in self.static_argnames)
        for where, value in statics:
            try:
                hash(value)
            except TypeError:
                raise TypeError(f"{self.name}: static argument {where!r} must be hashable, got a "
                                f"{type(value).__name__}") from None
        dyn_args = tuple(a for i, a in enumerate(args) if i not in static_pos)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        return statics, dyn_args, dyn_kwargs

    def _rebuild(self, statics: tuple[Any, ...]) -> Callable[[Any], tuple[tuple[Any, ...], dict[str, Any]]]:
        def rebuild(dynamic: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
            args, kwargs = dynamic
            args, kwargs = list(args), dict(kwargs)
            for where, value in statics:
                if isinstance(where, int):
                    args.insert(where, value)
                else:
                    kwargs[where] = value
            return tuple(args), kwargs
        return rebuild

    def _build(self, in_tree: PyTreeDef, avals: tuple[ShapedArray, ...], statics: tuple[Any, ...]) -> IR:
        rebuild = self._rebuild(statics)

        def with_statics(*args: Any, **kwargs: Any) -> Any:
            args, kwargs = rebuild((args, kwargs))
            return self.fun(*args, **kwargs)
        ir, store = _stage_with_aux(with_statics, in_tree, avals, False, self.name)
        ir.out_tree = store.tree
        return ir

    def _signature(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, list[Any], tuple[Any, ...]]:
        statics, dyn_args, dyn_kwargs = self._split(args, kwargs)
        leaves, in_tree = tree_flatten((dyn_args, dyn_kwargs))
        avals = _leaf_avals(self.name, dyn_args, dyn_kwargs, leaves)
        return (in_tree, avals, statics), leaves, statics

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fast = not kwargs and not self.static_argnums and not is_tracing() and all(type(a) is Array for a in args)
        if fast:
            executable = self._by_avals.get(tuple(a.aval for a in args))
            if executable is not None:
                return executable(*args)
        key, leaves, statics = self._signature(args, kwargs)
        out = self._cache.call(key, leaves, self._build, key[0], key[1], statics)
        if fast and key in self._cache.executables:
            self._by_avals[key[1]] = self._cache.executables[key]
        return out

    def trace(self, *args: Any, **kwargs: Any) -> IR:
        """The IR this function stages out to for these arguments."""
        key, _, statics = self._signature(args, kwargs)
        return self._cache.ir_for(key, self._build, key[0], key[1], statics)

    def lower(self, *args: Any, **kwargs: Any) -> Compiled:
        """The compiled executable for these arguments (its .as_text() is the StableHLO module)."""
        return compile(self.trace(*args, **kwargs), self.name)

    def __repr__(self) -> str:
        return f"<{self.name}>"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)


def jit(fun: Callable[..., Any] | None = None, *, static_argnums: int | Sequence[int] = (),
        static_argnames: str | Sequence[str] = ()) -> Any:
    """Compile fun with XLA, once per argument signature. Usable as @jit or @jit(static_argnums=...)."""
    if fun is None:
        return lambda f: Jitted(f, static_argnums, static_argnames)
    return Jitted(fun, static_argnums, static_argnames)


# ---------------------------------------------------------------------------------------------------------------
# grad / value_and_grad
def _grad_of_ir(ir: IR, argnums: int | Sequence[int], name: str) -> IR:
    nums = _as_tuple(argnums)
    n = len(ir.in_vars)
    for i in nums:
        if not -n <= i < n:
            raise ValueError(f"{name}: argnums {argnums} out of range for an IR with {n} inputs")
    nums = tuple(i % n for i in nums)
    if len(ir.outs) != 1:
        raise TypeError(f"{name}: the IR must have exactly one output, got {len(ir.outs)}")
    wrt = [i in nums for i in range(n)]
    _ad.check_differentiable_inputs(name, ir.in_avals, wrt)
    gir = _ad.value_and_grad_ir(ir, wrt, with_value=False, name=name)
    order = sorted(nums)
    gir.outs = [gir.outs[order.index(i)] for i in nums]  # in the order argnums names them
    gir.out_tree = leaf_def() if isinstance(argnums, int) else tree_structure(tuple(0 for _ in nums))
    return gir


def _check_argnums(name: str, argnums: int | Sequence[int], nargs: int) -> tuple[int, ...]:
    nums = _as_tuple(argnums)
    if not nums:
        raise ValueError(f"{name}: argnums must name at least one argument")
    for i in nums:
        if not isinstance(i, int) or not -nargs <= i < nargs:
            raise ValueError(f"{name}: argnums {argnums} out of range for a call with {nargs} positional "
                             "arguments")
    return tuple(i % nargs for i in nums)


def _make_grad(fun: Callable[..., Any], argnums: int | Sequence[int], has_aux: bool, allow_int: bool,
               with_value: bool, api: str) -> Callable[..., Any]:
    name = f"{api}({_fun_name(fun)})"

    def build(in_tree: PyTreeDef, avals: tuple[ShapedArray, ...], nums: tuple[int, ...],
              arg_trees: tuple[PyTreeDef, ...]) -> IR:
        ir, store = _stage_with_aux(fun, in_tree, avals, has_aux, name)
        if store.tree.num_leaves != 1:
            raise TypeError(f"{name}: the function must return a single scalar array, got {store.tree}")
        offsets = [0]
        for tree in arg_trees:
            offsets.append(offsets[-1] + tree.num_leaves)
        wrt = [False] * len(avals)
        for i in nums:
            wrt[offsets[i]:offsets[i + 1]] = [True] * arg_trees[i].num_leaves
        _ad.check_differentiable_inputs(name, avals, wrt, allow_int)
        gir = _ad.value_and_grad_ir(ir, wrt, with_value=with_value, name=name)
        grads_template = (tuple(arg_trees[i].unflatten([0] * arg_trees[i].num_leaves) for i in nums)
                          if not isinstance(argnums, int) else arg_trees[nums[0]].unflatten(
                              [0] * arg_trees[nums[0]].num_leaves))
        aux_template = store.aux_tree.unflatten([0] * store.aux_tree.num_leaves) if has_aux else None
        n_grads = sum(arg_trees[i].num_leaves for i in nums)
        grads = gir.outs[len(gir.outs) - n_grads:]
        rest = gir.outs[:len(gir.outs) - n_grads]
        # grads come in leaf order of the arguments; regroup them in argnums order
        by_arg, pos = {}, 0
        for i in sorted(set(nums)):
            by_arg[i] = grads[pos:pos + arg_trees[i].num_leaves]
            pos += arg_trees[i].num_leaves
        grads = [g for i in nums for g in by_arg[i]]
        if with_value:
            template = ((0, aux_template), grads_template) if has_aux else (0, grads_template)
            gir.outs = rest + grads
        else:
            template = (grads_template, aux_template) if has_aux else grads_template
            gir.outs = grads + rest
        gir.out_tree = tree_structure(template)
        return gir

    cache = _cache_for(fun, (api, argnums if isinstance(argnums, int) else tuple(argnums), has_aux, allow_int), name)

    @functools.wraps(fun, updated=())
    def transformed(*args: Any, **kwargs: Any) -> Any:
        nums = _check_argnums(name, argnums, len(args))
        leaves, in_tree = tree_flatten((args, kwargs))
        avals = _leaf_avals(name, args, kwargs, leaves)
        arg_trees = tuple(tree_structure(a) for a in args)
        key = (in_tree, avals, nums)
        return cache.call(key, leaves, build, in_tree, avals, nums, arg_trees)

    return transformed


def grad(fun: Any, argnums: int | Sequence[int] = 0, has_aux: bool = False, allow_int: bool = False) -> Any:
    """Gradient of a scalar-output function with respect to the arguments in argnums.

    Given an IR (from stage_out), returns a NEW IR computing the gradient (the seed design); given a function,
    returns a function (like jax.grad)."""
    if isinstance(fun, IR):
        return _grad_of_ir(fun, argnums, "grad")
    if not callable(fun):
        raise TypeError(f"grad: expected a function or an IR, got {type(fun).__name__}")
    return _make_grad(fun, argnums, has_aux, allow_int, with_value=False, api="grad")


def value_and_grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   allow_int: bool = False) -> Callable[..., Any]:
    """Like grad, but the function returns (value, gradients), or ((value, aux), gradients) with has_aux."""
    if not callable(fun):
        raise TypeError(f"value_and_grad: expected a function, got {type(fun).__name__}")
    return _make_grad(fun, argnums, has_aux, allow_int, with_value=True, api="value_and_grad")


# ---------------------------------------------------------------------------------------------------------------
# vjp
class _VjpPlan:
    """The forward (known) and backward (cotangent) parts of a function's VJP at one signature."""

    def __init__(self, forward: IR, backward: IR, num_outs: int, num_residuals: int, out_tree: PyTreeDef,
                 aux_tree: PyTreeDef | None, ct_avals: list[ShapedArray]):
        self.forward, self.backward = forward, backward  # forward: (outputs, aux, residuals)
        self.num_outs, self.num_residuals = num_outs, num_residuals
        self.out_tree, self.aux_tree, self.ct_avals = out_tree, aux_tree, ct_avals


def _vjp_plan(fun: Callable[..., Any], in_tree: PyTreeDef, avals: tuple[ShapedArray, ...], has_aux: bool,
              name: str) -> _VjpPlan:
    ir, store = _stage_with_aux(fun, in_tree, avals, has_aux, name)
    num_outs = store.tree.num_leaves
    joint = _ad.vjp_ir(ir, [True] * len(avals), num_outs)
    forward, backward, num_residuals = split_known(joint, [False] * len(avals) + [True] * num_outs, len(ir.outs))
    ct_avals = [a.strip_weak_type() for a in ir.out_avals[:num_outs]]
    return _VjpPlan(forward, backward, num_outs, num_residuals, store.tree, store.aux_tree, ct_avals)


def vjp(fun: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """(outputs, vjp_fn) where vjp_fn(cotangents) returns one cotangent per primal (like jax.vjp)."""
    name = f"vjp({_fun_name(fun)})"
    leaves, in_tree = tree_flatten((primals, {}))
    avals = _leaf_avals(name, primals, {}, leaves)
    key = (in_tree, avals, has_aux)
    plans: dict[Hashable, _VjpPlan] = _per_function(fun, "vjp", dict)
    plan = plans.get(key)
    if plan is None:
        plan = _vjp_plan(fun, in_tree, avals, has_aux, name)
        if not (_has_tracer_consts(plan.forward) or _has_tracer_consts(plan.backward)):
            plans[key] = plan
    results = run_ir(plan.forward, leaves, f"{name}.forward")
    n_primal = len(results) - plan.num_residuals
    outs, aux, residuals = results[:plan.num_outs], results[plan.num_outs:n_primal], results[n_primal:]

    def vjp_fn(cotangents: Any) -> tuple[Any, ...]:
        ct_leaves, ct_tree = tree_flatten(cotangents)
        if ct_tree != plan.out_tree:
            raise TypeError(f"{name}: cotangents must have the structure of the outputs {plan.out_tree}, got "
                            f"{ct_tree}")
        for i, (ct, expected) in enumerate(zip(ct_leaves, plan.ct_avals)):
            got = aval_of(ct)
            if got.shape != expected.shape or got.dtype != expected.dtype:
                raise TypeError(f"{name}: cotangent {i} must be {expected.str_short()} like the output, got "
                                f"{got.str_short()}")
        in_cts = run_ir(plan.backward, list(residuals) + ct_leaves, f"{name}.backward")
        return in_tree.unflatten(in_cts)[0]

    out = plan.out_tree.unflatten(outs)
    if has_aux:
        return out, vjp_fn, plan.aux_tree.unflatten(aux)
    return out, vjp_fn


def eval_ir_public(ir: IR, *args: Any) -> Any:
    """Evaluate an IR primitive by primitive (eagerly, or inline while staging); returns its outputs."""
    outs = eval_ir(ir, args)
    if ir.out_tree is not None:
        return ir.out_tree.unflatten(outs)
    return outs[0] if len(outs) == 1 else tuple(outs)


__all__ = ["stage_out", "make_ir", "compile", "jit", "grad", "value_and_grad", "vjp", "dce", "eval_ir_public"]
