"""grad, value_and_grad, vjp and fwd_and_bwd: reverse-mode differentiation of functions (and grad of a staged
IR)."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from ember._api.caches import cache_for, call_with_fallback, plan_for, run_transformed
from ember._api.jit import jit
from ember._api.running import as_arrays
from ember._api.staging import as_tuple, fun_name, leaf_avals, stage_with_aux, with_outputs, wraps
from ember._api.templates import transform_once
from ember._core import IR, ShapedArray, aval_of
from ember._core import dtypes as dt
from ember._core.refs import RefAval, RefMethods
from ember._prims.refs import addupdate
from ember._core.pytree import (Partial, PyTreeDef, leaf_def, register_pytree_node, tree_flatten, tree_map,
                                tree_structure, treedef_tuple)
from ember._transforms import ad as _ad
from ember._transforms.passes import recompute_cheap, split_known


def _grad_of_ir(ir: IR, argnums: int | Sequence[int], name: str) -> IR:
    nums = as_tuple(argnums)
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
    return with_outputs(gir, [gir.outs[order.index(i)] for i in nums],  # in the order argnums names them
                        leaf_def() if isinstance(argnums, int) else tree_structure(tuple(0 for _ in nums)))


def _check_argnums(name: str, argnums: int | Sequence[int], nargs: int) -> tuple[int, ...]:
    nums = as_tuple(argnums)
    if not nums:
        raise ValueError(f"{name}: argnums must name at least one argument")
    for i in nums:
        if not isinstance(i, int) or not -nargs <= i < nargs:
            raise ValueError(f"{name}: argnums {argnums} out of range for a call with {nargs} positional "
                             "arguments")
    return tuple(i % nargs for i in nums)


def _make_grad(fun: Callable[..., Any], argnums: int | Sequence[int], has_aux: bool, allow_int: bool,
               with_value: bool, api: str, holomorphic: bool = False) -> Callable[..., Any]:
    name = f"{api}({fun_name(fun)})"

    def build(in_tree: PyTreeDef, avals: tuple[ShapedArray, ...], nums: tuple[int, ...],
              arg_trees: tuple[PyTreeDef, ...], statics: tuple[tuple[int | str, Any], ...],
              values: Sequence[Any] | None = None) -> IR:
        ir, store = stage_with_aux(_with_statics(fun, statics), in_tree, avals, has_aux, name, values,
                                   named_like=fun)
        if store.tree.num_leaves != 1:
            raise TypeError(f"{name}: the function must return a single scalar array, got {store.tree}")
        offsets = [0]
        for tree in arg_trees:
            offsets.append(offsets[-1] + tree.num_leaves)
        wrt = [False] * len(avals)
        for i in nums:
            wrt[offsets[i]:offsets[i + 1]] = [True] * arg_trees[i].num_leaves
        _ad.check_differentiable_inputs(name, avals, wrt, allow_int, holomorphic)

        def transform(staged: IR, lifted: int) -> IR:
            """The gradient IR of staged, whose first `lifted` inputs are constants (not differentiated)."""
            gir = _ad.value_and_grad_ir(staged, [False] * lifted + wrt, with_value=with_value, name=name,
                                        values=values, holomorphic=holomorphic)
            # (structures composed, not templates: aux may hold Python values, which are nodes of its structure)
            grads_def = (treedef_tuple(arg_trees[i] for i in nums) if not isinstance(argnums, int)
                         else arg_trees[nums[0]])
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
                value_def = treedef_tuple([leaf_def(), store.aux_tree]) if has_aux else leaf_def()
                return with_outputs(gir, rest + grads, treedef_tuple([value_def, grads_def]))
            out_def = treedef_tuple([grads_def, store.aux_tree]) if has_aux else grads_def
            return with_outputs(gir, grads + rest, out_def)

        if values is not None:  # staged concretely: specialised to the values, not shared
            return transform(ir, 0)
        return transform_once((api, in_tree, nums, arg_trees, store.tree, store.aux_tree, has_aux, with_value,
                               isinstance(argnums, int), holomorphic), ir, transform)

    cache = cache_for(fun, (api, argnums if isinstance(argnums, int) else tuple(argnums), has_aux, allow_int,
                            holomorphic), name)

    @wraps(fun)
    def transformed(*args: Any, **kwargs: Any) -> Any:
        nums = _check_argnums(name, argnums, len(args))
        # non-differentiated arguments that are not arrays (functions, strings, ...) or are Python ints and bools
        # (counts, flags: a fori_loop bound stays static, as in JAX) are passed through as they are; so are such
        # keyword arguments (never differentiated: JAX passes every keyword argument through)
        statics = tuple((i, a) for i, a in enumerate(args)
                        if i not in nums and (type(a) in (int, bool) or not _is_array_tree(a))) + tuple(
            (k, kwargs[k]) for k in sorted(kwargs) if type(kwargs[k]) in (int, bool) or not _is_array_tree(kwargs[k]))
        dyn_args = tuple(None if any(i == j for j, _ in statics) else a for i, a in enumerate(args))
        dyn_kwargs = {k: v for k, v in kwargs.items() if not any(k == j for j, _ in statics)}
        leaves, in_tree = tree_flatten((dyn_args, dyn_kwargs))
        avals = leaf_avals(name, dyn_args, dyn_kwargs, leaves)
        arg_trees = tuple(tree_structure(a) for a in dyn_args)
        key = (in_tree, avals, nums, statics)
        try:
            hash(statics)
        except TypeError:  # an unhashable static argument: no caching for this call
            gir = build(in_tree, avals, nums, arg_trees, statics)
            result = gir.out_tree.unflatten(as_arrays(run_transformed(gir, leaves, name)))
        else:
            result = call_with_fallback(cache, key, leaves, build, in_tree, avals, nums, arg_trees, statics)
        if allow_int and not all(dt.is_inexact(a.dtype) for a in avals):
            result = _float0_gradients(result, args, nums, isinstance(argnums, int), with_value, has_aux)
        return result

    return transformed


def float0_where_not_float(tree: Any, like: Any) -> Any:
    """tree with float0 zeros in place of the leaves whose counterpart in like is an integer or boolean (their
    tangents and cotangents, as in JAX)."""
    def fix(value: Any, ref: Any) -> Any:
        aval = aval_of(ref)
        return value if dt.is_inexact(aval.dtype) else dt.float0_zeros(aval.shape)
    return tree_map(fix, tree, like)


def _float0_gradients(result: Any, args: tuple[Any, ...], nums: tuple[int, ...], single: bool, with_value: bool,
                      has_aux: bool) -> Any:
    """The result of grad/value_and_grad with allow_int, with float0 gradients for integer inputs."""
    if with_value:
        head, grads = result
    elif has_aux:
        grads, aux = result
    else:
        grads = result
    fixed = tuple(float0_where_not_float(g, args[i]) for g, i in zip((grads,) if single else grads, nums))
    grads = fixed[0] if single else fixed
    if with_value:
        return head, grads
    return (grads, aux) if has_aux else grads


def _is_array_tree(x: Any) -> bool:
    """Whether every leaf of x is an array or a number."""
    try:
        for leaf in tree_flatten(x)[0]:
            aval_of(leaf)
    except TypeError:
        return False
    return True


def _with_statics(fun: Callable[..., Any], statics: tuple[tuple[int | str, Any], ...]) -> Callable[..., Any]:
    """fun with the arguments passed through (by position or keyword) put back in place."""
    if not statics:
        return fun
    fixed = {i: a for i, a in statics if isinstance(i, int)}
    named = {k: a for k, a in statics if isinstance(k, str)}
    return lambda *args, **kwargs: fun(*[fixed.get(i, a) for i, a in enumerate(args)], **kwargs, **named)


def grad(fun: Any, argnums: int | Sequence[int] = 0, has_aux: bool = False, allow_int: bool = False,
         holomorphic: bool = False) -> Any:
    """Gradient of a scalar-output function with respect to the arguments in argnums.

    The output must be real-valued; complex inputs are allowed (the gradient follows JAX's convention, see
    docs/complex.md). With holomorphic=True, inputs and output are complex and the result is the complex
    derivative f'(z). Given an IR (from stage_out), returns a NEW IR computing the gradient (the seed design);
    given a function, returns a function (like jax.grad)."""
    if isinstance(fun, IR):
        return _grad_of_ir(fun, argnums, "grad")
    if not callable(fun):
        raise TypeError(f"grad: expected a function or an IR, got {type(fun).__name__}")
    return _make_grad(fun, argnums, has_aux, allow_int, with_value=False, api="grad", holomorphic=holomorphic)


def value_and_grad(fun: Callable[..., Any], argnums: int | Sequence[int] = 0, has_aux: bool = False,
                   allow_int: bool = False, holomorphic: bool = False) -> Callable[..., Any]:
    """Like grad, but the function returns (value, gradients), or ((value, aux), gradients) with has_aux."""
    if not callable(fun):
        raise TypeError(f"value_and_grad: expected a function, got {type(fun).__name__}")
    return _make_grad(fun, argnums, has_aux, allow_int, with_value=True, api="value_and_grad",
                      holomorphic=holomorphic)


# ---------------------------------------------------------------------------------------------------------------
# vjp
class _VjpPlan:
    """The forward (known) and backward (cotangent) parts of a function's VJP at one signature."""

    def __init__(self, forward: IR, backward: IR, num_outs: int, num_residuals: int, out_tree: PyTreeDef,
                 aux_tree: PyTreeDef | None, ct_avals: list[ShapedArray]):
        self.forward, self.backward = forward, backward  # forward: (outputs, aux, residuals)
        self.irs = (forward, backward)
        self.num_outs, self.num_residuals = num_outs, num_residuals
        self.out_tree, self.aux_tree, self.ct_avals = out_tree, aux_tree, ct_avals


def _vjp_plan(fun: Callable[..., Any], in_tree: PyTreeDef, avals: tuple[ShapedArray, ...], has_aux: bool,
              name: str, values: Sequence[Any] | None = None) -> _VjpPlan:
    ir, store = stage_with_aux(fun, in_tree, avals, has_aux, name, values)
    num_outs = store.tree.num_leaves

    def transform(staged: IR, lifted: int) -> IR:
        """The joint VJP IR of staged, whose first `lifted` inputs are constants (not differentiated)."""
        return _ad.vjp_ir(staged, [False] * lifted + [True] * len(avals), num_outs, values)

    # (staged concretely, the IR is specialised to the values: not shared)
    joint = transform(ir, 0) if values is not None else transform_once(("vjp", num_outs), ir, transform)
    forward, backward, num_residuals = split_known(joint, [False] * len(avals) + [True] * num_outs, len(ir.outs),
                                                   recompute_cheap)
    ct_avals = [a.strip_weak_type() for a in ir.out_avals[:num_outs]]
    return _VjpPlan(forward, backward, num_outs, num_residuals, store.tree, store.aux_tree, ct_avals)


class PlanCall:
    """The static part of a function a transformation returns as a Partial over its residuals (its leaves, as in
    JAX, so that jit can take it as an argument): the cached plan it runs, with its name, runner, the primals'
    structure and types. Two are equal when made from one cached plan for the same primal types, so jit compiles a
    function taking it once per signature."""
    __slots__ = ("name", "plan", "run", "in_tree", "avals")

    def __init__(self, name: str, plan: Any, run: Callable[..., list[Any]], in_tree: PyTreeDef,
                 avals: tuple[ShapedArray, ...]):
        self.name, self.plan, self.run, self.in_tree, self.avals = name, plan, run, in_tree, avals

    def _key(self) -> tuple[Any, ...]:
        return type(self), self.name, self.plan, self.run, self.in_tree, self.avals

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlanCall) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())


class _Pullback(PlanCall):
    """The function vjp returns: (residuals, cotangents) -> one cotangent per primal (see PlanCall)."""
    __slots__ = ()

    def __call__(self, residuals: tuple[Any, ...], cotangents: Any) -> tuple[Any, ...]:
        plan, name = self.plan, self.name
        ct_leaves, ct_tree = tree_flatten(cotangents)
        if ct_tree != plan.out_tree:
            raise TypeError(f"{name}: cotangents must have the structure of the outputs {plan.out_tree}, got "
                            f"{ct_tree}")
        for i, (ct, expected) in enumerate(zip(ct_leaves, plan.ct_avals)):
            got = aval_of(ct)
            if got.shape != expected.shape or got.dtype != expected.dtype:
                raise TypeError(f"{name}: cotangent {i} must be {expected.str_short()} like the output, got "
                                f"{got.str_short()}")
        in_cts = self.run(plan.backward, list(residuals) + ct_leaves, f"{name}.backward")
        in_cts = [ct if dt.is_inexact(a.dtype) else dt.float0_zeros(a.shape)
                  for ct, a in zip(in_cts, self.avals)]
        return self.in_tree.unflatten(in_cts)[0]


@dataclasses.dataclass(frozen=True, slots=True)
class GradValue:
    """In `vjp_fn.with_refs(...)`, the mark of a primal whose cotangent is returned as a value (the default)."""


@dataclasses.dataclass(frozen=True, slots=True)
class GradRef:
    """What `vjp_fn.with_refs(...)` returns for a primal whose cotangent was accumulated into a Ref given for it
    (a pytree with no leaves, as JAX's)."""


@dataclasses.dataclass(frozen=True, slots=True)
class DontWant:
    """In `vjp_fn.with_refs(...)`, the mark of a primal whose cotangent is not wanted."""


@dataclasses.dataclass(frozen=True, slots=True)
class DidntWant:
    """What `vjp_fn.with_refs(...)` returns for a primal marked DontWant (a pytree with no leaves, as JAX's)."""


for _empty in (GradRef, DidntWant):
    register_pytree_node(_empty, lambda x: ((), None), lambda aux, children, cls=_empty: cls())


class VJP(Partial):
    """The function vjp returns (as JAX's jax._src.api.VJP): called with the output cotangents it returns one
    cotangent per primal; `with_refs(*marks)` (one mark per primal, a pytree like the primals) returns the pullback
    that accumulates cotangents into Refs: a leaf that is an ember.Ref gets its cotangent added (`ref[...] += ct`)
    and returns GradRef(), ad.DontWant() returns DidntWant(), ad.GradValue() returns the cotangent. A pytree whose
    leaves are the residuals, so jit can take it as an argument."""

    def with_refs(self, *maybe_ct_refs: Any) -> Callable[[Any], Any]:
        """The pullback that accumulates the cotangents of the primals given a Ref into that Ref (see VJP)."""
        pullback: _Pullback = self.func
        marks, marks_tree = tree_flatten(maybe_ct_refs)
        primals_tree = pullback.in_tree.children[0]
        if marks_tree != primals_tree:
            raise TypeError(f"{pullback.name}.with_refs: expected one GradValue, DontWant or Ref per primal, in the "
                            f"structure of the primals {primals_tree}, got {marks_tree}")
        for i, mark in enumerate(marks):
            if not isinstance(mark, (GradValue, DontWant, RefMethods)):
                raise TypeError(f"{pullback.name}.with_refs: argument leaf {i} must be ember.ad.GradValue(), "
                                f"ember.ad.DontWant() or an ember.Ref, got {mark!r} of type {type(mark).__name__}")

        def pullback_with_refs(cotangents: Any) -> Any:
            cts = tree_flatten(self(cotangents))[0]
            results: list[Any] = []
            for ct, mark in zip(cts, marks):
                if isinstance(mark, DontWant):
                    results.append(DidntWant())
                elif isinstance(mark, GradValue):
                    results.append(ct)
                else:
                    addupdate(mark, None, ct)
                    results.append(GradRef())
            return primals_tree.unflatten(results)

        return pullback_with_refs


register_pytree_node(VJP, lambda p: ((p.args, p.keywords), p.func),
                     lambda func, children: VJP(func, *children[0], **children[1]))


def vjp(fun: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """(outputs, vjp_fn) where vjp_fn(cotangents) returns one cotangent per primal (like jax.vjp). vjp_fn is a
    Partial, a pytree whose leaves are the residuals: jit can take it as an argument."""
    name = f"vjp({fun_name(fun)})"
    leaves, in_tree = tree_flatten((primals, {}))
    avals = leaf_avals(name, primals, {}, leaves)
    _ad.check_differentiable_inputs(name, avals, [type(a) is RefAval for a in avals], allow_int=True)
    plan, run = plan_for(fun, "vjp", (in_tree, avals, has_aux), leaves,
                         lambda values: _vjp_plan(fun, in_tree, avals, has_aux, name, values))
    results = run(plan.forward, leaves, f"{name}.forward")
    n_primal = len(results) - plan.num_residuals
    outs, aux, residuals = results[:plan.num_outs], results[plan.num_outs:n_primal], results[n_primal:]
    vjp_fn = VJP(_Pullback(name, plan, run, in_tree, avals), tuple(residuals))
    out = plan.out_tree.unflatten(outs)
    if has_aux:
        return out, vjp_fn, plan.aux_tree.unflatten(aux)
    return out, vjp_fn


def fwd_and_bwd(fun: Callable[..., Any], argnums: int | Sequence[int], has_aux: bool = False, jitted: bool = True
                ) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(fwd, bwd), the two passes of reverse mode as functions (like jax.fwd_and_bwd): fwd(*args) returns
    (output, residuals) (and aux with has_aux), as vjp of fun in the arguments at argnums; bwd(residuals,
    cotangent) returns their cotangents (one, for an int argnums). With jitted (the default) both are jitted, so a
    training loop compiles each once."""
    if not callable(fun):
        raise TypeError(f"fwd_and_bwd: expected a function, got {fun!r}")
    name = fun_name(fun)

    def fwd(*args: Any) -> Any:
        positions = _check_argnums(f"fwd_and_bwd({name})", argnums, len(args))

        def of_chosen(*chosen: Any) -> Any:
            merged = list(args)
            for i, value in zip(positions, chosen):
                merged[i] = value
            return fun(*merged)
        return vjp(of_chosen, *[args[i] for i in positions], has_aux=has_aux)

    def bwd(residuals: Any, cotangent: Any) -> Any:
        cts = residuals(cotangent)
        return cts[0] if isinstance(argnums, int) else cts

    return (jit(fwd), jit(bwd)) if jitted else (fwd, bwd)
