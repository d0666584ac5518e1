"""cond and switch: one higher-order primitive carrying one closed sub-IR per branch.

cond(index, *operands; branches) runs branches[index] on the operands (every branch takes all operands: the
values any branch closed over come first, then the user's operands). Its whole story is here: abstract eval
(branch signatures must agree), lowering to stablehlo.case, JVP (a cond of the branches' JVPs), reverse mode
(the vjp_split hook: the forward cond also returns the residuals of the branch taken, the backward cond runs the
branches' linear parts on them, nothing is recomputed), batching (a batched index becomes a select of every
branch's result) and a DCE hook (unused outputs are dropped from every branch).

Residuals are split for every float operand, before reverse mode knows which cotangents are wanted; DCE then drops
what the wanted ones do not read. Branches share residual slots by type, so a slot stays when any branch's
backward reads it, and the other branches still fill it (with a value their own unwanted cotangents needed, or
zeros): the memory is that of the largest branch's residuals, as with JAX's merged branch residuals."""
from __future__ import annotations

import builtins
from typing import Any, Callable, Sequence

from ember._control.common import (called_from_ember, cast_outputs, close_over, describe, int32_scalar as _int32,
                                   retyped, same_types, unused_inputs, varying_as, vma_error_text, vma_mismatch,
                                   with_inputs, with_outputs)
from ember import _prims as lax
from ember._core import IR, TRACE_STATE, Eqn, Primitive, ShapedArray, aval_of, eval_ir, is_python_scalar
from ember._core import dtypes as dt
from ember._core.dtypes import join_vma
from ember._core.pytree import keystr, tree_flatten, tree_leaves_with_path
from ember._hlo import LoweringContext, lower_into
from ember._hlo.lower import default_platform
from ember._prims import broadcast_in_dim, convert_element_type, select
from ember._prims.elementwise import eq
from ember._prims.shape import BatchDim, batch_size, moveaxis, zeros
from ember._transforms.ad import active_outputs, vjp_ir
from ember._transforms.batching import batch_ir
from ember._transforms.cache import TransformCache
from ember._transforms.discharge import body_finals, closed_body, ref_values, updated, with_refs
from ember._transforms.jvp import jvp_ir
from ember._transforms import key_reuse
from ember._transforms.passes import dce_outputs, depends_on, split_known

cond_p = Primitive("cond", multiple_results=True, takes_refs=True, own_vma=True)
cond_p.none_cotangents = True  # (its pullback passes an operand cotangent the given ones do not reach as None)


@cond_p.def_rule("abstract_eval")
def _cond_abstract_eval(index: ShapedArray, *operands: ShapedArray, branches: tuple[IR, ...]) -> list[ShapedArray]:
    if index.shape != () or index.dtype != dt.int32:
        raise TypeError(f"cond: the branch index must be an int32 scalar, got {index.str_short()}")
    for i, branch in enumerate(branches):
        if not same_types(branch.in_avals, operands):
            raise TypeError(f"cond: branch {i} takes {describe(branch.in_avals)}, but the operands are "
                            f"{describe(operands)}")
        if not same_types(branch.out_avals, branches[0].out_avals):
            raise TypeError(f"cond: branch {i} returns {describe(branch.out_avals)}, but branch 0 returns "
                            f"{describe(branches[0].out_avals)}; every branch must return the same types")
    if any(index.vma - a.vma for a in branches[0].out_avals):  # (see _bind_cond)
        raise TypeError(f"cond: the branch index {index.str_short()} varies over devices, so every result must too, "
                        f"but the branches return {describe(branches[0].out_avals)}")
    return [a.update(weak_type=all(b.out_avals[j].weak_type for b in branches))
            for j, a in enumerate(branches[0].out_avals)]


def _bind_cond(index: Any, operands: Sequence[Any], branches: Sequence[IR]) -> list[Any]:
    """cond_p of the branches (functions of the operands), its results typed for a shard_map body: each result
    varies over the union of the branches' varying axes for it, and over the index's. Where the index varies over
    an axis, devices along it may take different branches, so every result may differ along it (JAX types such a
    result by the branches alone, which can claim one value on every device where there is not): the operands are
    cast to vary along it too, outside the cond, so the casts' transposes (psums, where every device must take
    part) happen outside it as well."""
    extra = aval_of(index).vma
    if extra:
        operands = varying_as(operands, [aval_of(x).vma | extra for x in operands])
        branches = [retyped(b, [aval_of(x) for x in operands]) for b in branches]
    vmas = [join_vma(outs) | extra for outs in zip(*(b.out_avals for b in branches))]
    return cond_p.bind(index, *operands, branches=tuple(cast_outputs(b, vmas) for b in branches))


@cond_p.def_rule("lowering")
def _cond_lowering(ctx: LoweringContext, index: str, *operands: str, branches: tuple[IR, ...]) -> list[str]:
    chosen = ctx.emitter.fact(index, "platform_index")
    if chosen is not None:  # (lax.platform_dependent: the branch of the platform lowered for, alone)
        return lower_into(ctx.emitter, branches[chosen], list(operands))
    if not ctx.avals_out:  # (kept for a callback's effect: a dummy result orders it among the effects, see lower_into)
        flag = ShapedArray((), dt.bool_)
        regions = [ctx.region([], lambda body, _, b=branch: [*lower_into(body, b, operands), body.constant(True, flag)])
                   for branch in branches]
        ctx.op("stablehlo.case", [index], [flag], regions=regions)
        return []
    regions = [ctx.lower_region(branch, captured=operands) for branch in branches]
    return ctx.op("stablehlo.case", [index], ctx.avals_out, regions=regions)


@cond_p.def_rule("jvp")
def _cond_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, branches: tuple[IR, ...]
              ) -> tuple[list[Any], list[Any]]:
    """The outputs, and tangents for those that depend on a tangent in some branch; the others' stay symbolic
    zeros (None), as JAX's (a loop around the cond keeps its carry unperturbed)."""
    index, operands = primals[0], primals[1:]
    with_tangent = [t is not None and dt.is_inexact(aval_of(p).dtype) for p, t in zip(operands, tangents[1:])]
    given = [t for t, w in zip(tangents[1:], with_tangent) if w]
    n = len(branches[0].outs)
    perturbed = [any(column) and dt.is_inexact(v.aval.dtype)
                 for column, v in zip(zip(*(active_outputs(b, with_tangent) for b in branches)), branches[0].outs)]
    jvps = [jvp_ir(b, with_tangent) for b in branches]
    jvps = [with_outputs(j, j.outs[:n] + [t for t, p in zip(j.outs[n:], perturbed) if p]) for j in jvps]
    outs = _bind_cond(index, [*operands, *given], jvps)
    tangents_out = iter(outs[n:])
    return outs[:n], [next(tangents_out) if p else None for p in perturbed]


ResidualSource = tuple[str, int]  # ("operand", i), ("output", j) or ("slot", k): where the backward finds one


def _residual_sources(known: IR, num_outs: int, slot_avals: list[ShapedArray]) -> list[ResidualSource]:
    """Where the backward cond finds each residual of one branch's primal part (known: operands -> (outputs...,
    residuals...)): an operand or an output of the cond is read from there; any other residual gets a slot of its
    type, shared with the other branches (slot_avals grows when no free slot of that type is left)."""
    sources: list[ResidualSource] = []
    taken: set[int] = set()
    for r in known.outs[num_outs:]:
        if r in known.in_vars:
            sources.append(("operand", known.in_vars.index(r)))
        elif r in known.outs[:num_outs]:
            sources.append(("output", known.outs.index(r)))
        else:
            aval = r.aval.strip_weak_type()
            free = [k for k, a in enumerate(slot_avals) if k not in taken and a.shape == aval.shape
                    and a.dtype == aval.dtype]
            if not free:
                slot_avals.append(aval)
                free = [len(slot_avals) - 1]
            taken.add(free[0])
            sources.append(("slot", free[0]))
    return sources


_BranchSplits = tuple[tuple[bool, ...], tuple[tuple[IR, IR], ...], tuple[tuple[ResidualSource, ...], ...],
                      tuple[ShapedArray, ...]]


def _branch_splits(branches: tuple[IR, ...], active: Sequence[bool]) -> _BranchSplits:
    """The branches' VJP splits for _cond_vjp_split, computed once per (branches, differentiated operands) (see
    TransformCache, keyed on the first branch; the others, its siblings in one equation, and the operands are the
    request): which operands get cotangents (the floating-point ones the backward pass differentiates), each
    branch's (primal part, linear part), where each finds its residuals, and the shared slots' types."""
    wrt = tuple(bool(on) and dt.is_inexact(a.dtype) for a, on in zip(branches[0].in_avals, active))

    def split() -> _BranchSplits:
        n_in, n_out = len(branches[0].in_vars), len(branches[0].outs)
        parts = tuple(split_known(vjp_ir(b, list(wrt)), [False] * n_in + [True] * n_out, n_out)[:2]
                      for b in branches)
        slot_avals: list[ShapedArray] = []
        sources = tuple(tuple(_residual_sources(known, n_out, slot_avals)) for known, _ in parts)
        return wrt, parts, sources, tuple(slot_avals)
    return BRANCH_SPLITS.get(branches[0], (branches[1:], wrt), split)


BRANCH_SPLITS = TransformCache("cond vjp split")  # (first branch, other branches) -> _branch_splits


@cond_p.def_rule("vjp_split")
def _cond_vjp_split(ins: list[Any], active: list[bool], *, branches: tuple[IR, ...]
                    ) -> tuple[list[Any], Callable[..., list[Any]]]:
    """Reverse mode of cond without recomputing the taken branch: each branch's VJP is split (partial evaluation)
    into its primal part, which the forward cond runs, returning also the residuals the branch's linear part
    needs, and that linear part, which the backward cond runs on them (as JAX's cond partial evaluation). Branches
    share residual slots by type and fill the slots only the other branches use with zeros; residuals that are
    operands or outputs of the cond are read from there."""
    index, operands = ins[0], ins[1:]
    n_out = len(branches[0].outs)
    wrt, parts, sources, slot_avals = _branch_splits(branches, active[1:])

    def forward_branch(known: IR, where: list[ResidualSource]) -> Callable[..., list[Any]]:
        def run(*ops: Any) -> list[Any]:
            outs = eval_ir(known, list(ops))
            slots = [zeros(a) for a in slot_avals]
            for (kind, k), r in zip(where, outs[n_out:]):
                if kind == "slot":
                    slots[k] = r
            return outs[:n_out] + slots
        return run

    results = _cond(index, [forward_branch(known, where) for (known, _), where in zip(parts, sources)],
                    tuple(operands), "cond", join=True)
    outs, slots = results[:n_out], results[n_out:]

    def backward_branch(linear: IR, where: list[ResidualSource]) -> Callable[..., list[Any]]:
        def run(ops: list[Any], fwd_outs: list[Any], slots: list[Any], cts: list[Any]) -> list[Any]:
            found = {"operand": ops, "output": fwd_outs, "slot": slots}
            return eval_ir(linear, [found[kind][k] for kind, k in where] + cts)
        return run

    def pullback(cts: list[Any], needs: list[bool]) -> list[Any]:
        # (an operand cotangent no branch reaches from the given output cotangents is a symbolic zero, None, as
        # JAX's: a custom_vjp before the cond then gets a SymbolicZero for it)
        given = [ct is not None for ct in cts]
        reached = [any(r) for r in zip(*(depends_on(linear, [False] * len(where) + given)
                                         for (_, linear), where in zip(parts, sources)))]
        cts = [zeros(a.strip_weak_type()) if ct is None else ct for ct, a in zip(cts, branches[0].out_avals)]
        results = _cond(index, [backward_branch(linear, where) for (_, linear), where in zip(parts, sources)],
                        (list(operands), list(outs), list(slots), list(cts)), "cond", join=True)
        in_cts = iter(ct if r else None for ct, r in zip(results, reached))
        full = [None] + [next(in_cts) if w else None for w in wrt]
        return [ct if need else None for ct, need in zip(full, needs)]

    return list(outs), pullback


@cond_p.def_rule("vjp")
def _cond_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, branches: tuple[IR, ...]
              ) -> list[Any]:
    """Reverse mode outside the backward pass's forward sweep (which uses vjp_split): the same split, its forward
    cond run again for the residuals."""
    return _cond_vjp_split(ins, needs, branches=branches)[1](cts, needs)


@cond_p.def_rule("batching")
def _cond_batching(args: list[Any], dims: list[BatchDim], *, branches: tuple[IR, ...]
                   ) -> tuple[list[Any], list[BatchDim]]:
    size = batch_size(args, dims)
    index, index_dim = args[0], dims[0]
    operands, operand_dims = args[1:], dims[1:]
    n = len(branches[0].outs)
    if index_dim is None:  # one branch for the whole batch: a cond of the batched branches
        natural = [batch_ir(b, operand_dims, size)[1] for b in branches]
        out_dims = [0 if any(d[j] is not None for d in natural) else None for j in range(n)]
        return _bind_cond(index, operands, [batch_ir(b, operand_dims, size, out_dims)[0] for b in branches]), out_dims
    batched = tuple(batch_ir(b, operand_dims, size, [0] * n)[0] for b in branches)
    # each member picks its own branch: run every branch, then select per member
    results = [eval_ir(b, operands) for b in batched]
    index = moveaxis(index, index_dim, 0)
    chosen = list(results[0])
    for k in range(1, len(branches)):
        for j in range(n):
            shape = aval_of(chosen[j]).shape
            pick = eq(broadcast_in_dim(index, shape, (0,)), _int32(k))
            chosen[j] = select(pick, results[k][j], chosen[j])
    return chosen, [0] * n


@cond_p.def_rule("depends")
def _cond_depends(active: list[bool], *, branches: tuple[IR, ...]) -> list[bool]:
    """A result depends on the active operands when it does in any branch."""
    found = [active_outputs(b, active[1:]) for b in branches]
    return [any(column) for column in zip(*found)]


@cond_p.def_rule("discharge")
def _cond_discharge(ins: list[Any], refs: list[int | None], *, branches: tuple[IR, ...]
                    ) -> tuple[list[Any], list[Any]]:
    """The references a branch reads or writes become extra operands and results of every branch."""
    index, operands, ids = ins[0], ins[1:], refs[1:]
    values = ref_values(ins, refs)
    n = len(values)
    plain = [x for x, i in zip(operands, ids) if i is None]
    value_avals = [aval_of(v).strip_weak_type() for v in values]

    def branch_fn(branch: IR) -> Callable[..., list[Any]]:
        def fn(*args: Any) -> list[Any]:
            outs, finals = body_finals(branch, with_refs(ids, args[:len(plain)], args[len(plain):]), ids)
            new = updated(args[len(plain):], finals)
            return outs + [convert_element_type(x, a.dtype) for x, a in zip(new, value_avals)]
        return fn

    avals = [aval_of(x) for x in plain] + value_avals
    new_branches = []
    for branch in branches:
        new, extra = closed_body(branch_fn(branch), avals, "cond branch")
        if extra:
            raise AssertionError("cond: a branch discharged with constants")
        new_branches.append(new)
    values = [convert_element_type(v, a.dtype) for v, a in zip(values, value_avals)]
    outs = _bind_cond(index, [*plain, *values], new_branches)
    return outs[:len(outs) - n], outs[len(outs) - n:]


@cond_p.def_rule("key_reuse")
def _cond_key_reuse(eqn: Eqn) -> key_reuse.Signature:
    """A key either branch consumes is consumed (the index, operand 0, is no key)."""
    return key_reuse.joined_branches(eqn.params["branches"], 1, "cond")


@cond_p.def_rule("dce")
def _cond_dce(eqn: Eqn, used: list[bool]) -> Eqn:
    """Drop the unused outputs from every branch, then the operands no branch needs any more (the equation itself
    when nothing is dropped)."""
    pruned = [dce_outputs(b, used) for b in eqn.params["branches"]]
    needed = [any(reads) for reads in zip(*(reads for _, reads in pruned))]
    if all(used) and all(needed):
        return eqn
    branches = tuple(with_inputs(b, [v for v, k in zip(b.in_vars, needed) if k]) for b, _ in pruned)
    operands = [a for a, k in zip(eqn.inputs[1:], needed) if k]
    return Eqn(eqn.prim, [eqn.inputs[0], *operands], [v for v, u in zip(eqn.outputs, used) if u],
               {**eqn.params, "branches": branches}, eqn.source)


# ---------------------------------------------------------------------------------------------------------------
# Public functions (ember.lax)
def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """Apply branches[index] to operands (like jax.lax.switch); the index is clamped to the valid range."""
    branches = list(branches)
    if not branches:
        raise ValueError("switch: needs at least one branch")
    for i, b in enumerate(branches):
        if not callable(b):
            raise TypeError(f"switch: branch {i} is not callable: {b!r}")
    index_aval = aval_of(index)
    if index_aval.shape != () or not dt.is_int(index_aval.dtype) or isinstance(index, bool):
        raise TypeError(f"switch: the index must be an integer scalar, got {index_aval.str_short()}")
    if len(branches) == 1:
        return branches[0](*operands)
    last = len(branches) - 1
    if is_python_scalar(index):
        index = _int32(builtins.min(builtins.max(index, 0), last))
    else:
        index = lax.min(lax.max(convert_element_type(index, dt.int32), 0), last)
    return _cond(index, branches, operands, "switch", called_from_ember())


# ---------------------------------------------------------------------------------------------------------------
# platform_dependent: the branch for the platform the computation is lowered for (JAX's lax.platform_dependent).
# platform_index(; platforms) is the index, into platforms (a tuple of tuples of platform names, None for the
# default branch), of the platform the module is lowered for: a constant of the module, which cond's lowering sees
# (the "platform_index" fact) and lowers that branch alone. Eagerly the branch is picked in Python.
platform_index_p = Primitive("platform_index", checks=())
platform_index_p.def_rule("sharding_rule", lambda **params: None)
platform_index_p.def_rule("abstract_eval", lambda *, platforms: ShapedArray((), dt.int32))
platform_index_p.mark_not_differentiable()
platform_index_p.def_rule("batching", lambda args, dims, *, platforms: ([platform_index_p.bind(platforms=platforms)],
                                                                        [None]))


def _platform_choice(platforms: tuple[tuple[str, ...] | None, ...], platform: str) -> int:
    """The index of the branch for platform (an entry naming it, else the default, None), or JAX's error."""
    for i, names in enumerate(platforms):
        if names is not None and platform in names:
            return i
    for i, names in enumerate(platforms):
        if names is None:
            return i
    raise NotImplementedError(f"platform_dependent: no branch for platform {platform!r} and no default (branches "
                              f"for {[p for names in platforms if names for p in names]}; JAX: MLIR translation rule "
                              f"for primitive 'platform_index(platforms={platforms})' not found for platform "
                              f"{platform})")


@platform_index_p.def_rule("lowering")
def _platform_index_lowering(ctx: LoweringContext, *, platforms: tuple[tuple[str, ...] | None, ...]) -> list[str]:
    # (a portable module, an export, is for the CPU: ember exports for no other platform)
    chosen = _platform_choice(platforms, ctx.emitter.platform or "cpu")
    value = ctx.constant(chosen, ctx.aval_out)
    ctx.emitter.tell(value, "platform_index", chosen)
    return [value]


def platform_dependent(*args: Any, default: Callable[..., Any] | None = None,
                       **per_platform: Callable[..., Any]) -> Any:
    """per_platform[platform](*args) for the platform the computation is lowered for ("cpu"; "cuda" with ember's
    CUDA plugin), else default(*args) (like jax.lax.platform_dependent): every branch is staged (and transformed as
    lax.switch's are), and only the chosen one is lowered; eagerly, only the chosen one runs."""
    branches: list[Callable[..., Any]] = []
    names: list[list[str]] = []
    for name, branch in per_platform.items():
        if not callable(branch):
            raise TypeError(f"lax.platform_dependent: the '{name}' branch must be a callable.")
        if name == "gpu":
            raise ValueError("Use 'cuda' or 'rocm' for lax.platform_dependent.")
        for k, known in enumerate(branches):  # (identical branches join, as in JAX)
            if known == branch:
                names[k].append(name)
                break
        else:
            branches.append(branch)
            names.append([name])
    platforms: list[tuple[str, ...] | None] = [tuple(n) for n in names]
    if default is not None:
        if not callable(default):
            raise TypeError("lax.platform_dependent: the 'default' branch must be a callable.")
        branches.append(default)
        platforms.append(None)
    platforms_key = tuple(platforms)
    if not TRACE_STATE.stack:  # (eagerly: the branch of the runtime's platform, alone)
        return branches[_platform_choice(platforms_key, default_platform() or "cpu")](*args)
    index = platform_index_p.bind(platforms=platforms_key)
    return _cond(index, branches, args, "platform_dependent", called_from_ember())


_NO_OPERAND = object()


def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any], *operands: Any,
         operand: Any = _NO_OPERAND) -> Any:
    """true_fun(*operands) if pred else false_fun(*operands), staged as one conditional (like jax.lax.cond):
    both branches must return the same structure, shapes and dtypes. As JAX's, it also takes the one operand as
    operand=, and the old form cond(pred, true_operand, true_fun, false_operand, false_fun)."""
    if not callable(true_fun) and callable(false_fun) and len(operands) == 2 and callable(operands[1]):
        x_true, f_true, x_false, f_false = true_fun, false_fun, *operands
        return cond(pred, lambda x, _: f_true(x), lambda _, x: f_false(x), x_true, x_false)
    if operand is not _NO_OPERAND:
        if operands:
            raise TypeError(f"if 'operand' keyword is passed then no positional operands can be passed, got "
                            f"operand={operand!r} and positional operands {operands!r}")
        operands = (operand,)
    for name, fun in (("true_fun", true_fun), ("false_fun", false_fun)):
        if not callable(fun):
            raise TypeError(f"cond: {name} is not callable: {fun!r}")
    pred_aval = aval_of(pred)
    if pred_aval.shape != ():
        raise TypeError(f"cond: the predicate must be a scalar, got {pred_aval.str_short()}")
    if not (dt.is_bool(pred_aval.dtype) or dt.is_int(pred_aval.dtype)):
        raise TypeError(f"cond: the predicate must be a boolean (or integer) scalar, got {pred_aval.str_short()}")
    index = convert_element_type(convert_element_type(pred, dt.bool_), dt.int32)
    return _cond(index, [false_fun, true_fun], operands, "cond", called_from_ember())


def _cond(index: Any, branches: list[Callable[..., Any]], operands: tuple[Any, ...], api: str,
          join: bool = False) -> Any:
    """The cond of branches (functions of operands) chosen by an int32 index. Inside a shard_map body the
    branches must return values varying over the same axes (JAX's error), unless join (a rule's own branches:
    each result is cast to the union); every result varies over the index's axes too (_bind_cond)."""
    leaves, in_tree = tree_flatten(operands)
    avals = [aval_of(x).strip_weak_type() if not is_python_scalar(x) else aval_of(x) for x in leaves]
    closed = [close_over(b, in_tree, avals, f"{api} branch {i}") for i, b in enumerate(branches)]
    for i, c in enumerate(closed):
        if c.out_tree != closed[0].out_tree:
            raise TypeError(f"{api}: branch {i} returns a {c.out_tree}, but branch 0 returns a "
                            f"{closed[0].out_tree}; every branch must return the same structure")
        if not same_types(c.ir.out_avals, closed[0].ir.out_avals):
            found = None if join else _branch_vma_error(api, closed[0], c, i)
            if found:
                raise TypeError(found)
            if join and same_types(c.ir.out_avals, closed[0].ir.out_avals, varying=False):
                continue  # (varying axes joined below)
            raise TypeError(f"{api}: branch {i} returns {describe(c.ir.out_avals)}, but branch 0 returns "
                            f"{describe(closed[0].ir.out_avals)}; every branch must return the same shapes and "
                            "dtypes")
    # every branch takes every branch's consts (its own, and unused binders for the others'), then the operands
    const_avals = [[v.aval for v in c.ir.in_vars[:len(c.consts)]] for c in closed]
    irs = []
    for i, c in enumerate(closed):
        binders = []
        for j, avals_j in enumerate(const_avals):
            binders += c.ir.in_vars[:len(c.consts)] if j == i else unused_inputs(avals_j)
        irs.append(with_inputs(c.ir, binders + c.ir.in_vars[len(c.consts):]))
    consts = [x for c in closed for x in c.consts]
    outs = _bind_cond(index, [*consts, *leaves], irs)
    return closed[0].out_tree.unflatten(outs)


def _branch_vma_error(api: str, first: Any, other: Any, i: int) -> str | None:
    """JAX's error for branches whose results vary over different axes (None when they differ otherwise)."""
    if api == "cond":  # (JAX names the true branch first)
        names, first, other = ("true_fun", "false_fun"), other, first
    else:
        names = ("branches[0]", f"branches[{i}]")
    paths = [keystr(path) for path, _ in tree_leaves_with_path(first.out_tree.unflatten(first.ir.out_avals))]
    found = vma_mismatch(f"the output of {names[0]}{{path}} has type {{want}} but the corresponding output of "
                         f"{names[1]}{{path}} has type {{got}}", paths, first.ir.out_avals, other.ir.out_avals,
                         f" to the output of {names[0]}{{path}}", f" to the output of {names[1]}{{path}}")
    if not found:
        return None
    return vma_error_text(f"{api} branches must have equal output types but they differ.", found,
                          f"Revise {names[0]} and/or {names[1]} so that all output types match.")
