"""Custom derivative rules and rematerialization as higher-order primitives: custom_jvp, custom_vjp and
checkpoint (remat), with optimization_barrier, the first-order primitive that keeps XLA from merging the
recomputation with the original computation.

A custom_jvp or custom_vjp call stages the function into a closed sub-IR (what lowering and batching use) and
keeps the user's rules as Python callables over flat lists, called when a transformation needs them. Functions
with custom rules may close over concrete arrays, not over traced values (pass those as arguments), as with
JAX's closure conversion. Each call of a rule is counted (rule_runs): outside jit a result that ran a rule is not
cached, so the rule runs again on the next call, as in JAX."""
from __future__ import annotations

import dataclasses
import functools
import inspect
import operator
import weakref
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ember._control.common import close_over, describe, same_types, split_sizes
from ember._core import (IR, Primitive, ShapedArray, Tracer, aval_of, concrete_values, eval_ir, is_tracing,
                         stage_flat)
from ember._core import dtypes as dt
from ember._core.pytree import PyTreeDef, tree_flatten, tree_map, tree_structure
from ember._hlo import LoweringContext, lower_into
from ember._prims.shape import BatchDim, batch_at_front, batch_size, linear_jvp, zeros
from ember._transforms.ad import backward_pass, vjp_ir
from ember._transforms.batching import batch_ir
from ember._transforms.cache import TransformCache
from ember._transforms.discharge import KEEPS_REFS, body_finals, ref_values, updated
from ember._transforms.jvp import jvp_ir
from ember._transforms.passes import split_known
from ember._prims import explicit

CUSTOM_VJP_NO_FORWARD_MODE = "forward-mode differentiation (jvp) of a custom_vjp function is not supported, as in JAX"


class ForwardModeOfCustomVjpError(TypeError, NotImplementedError):
    """jvp of a custom_vjp function: a TypeError, as JAX raises, and a NotImplementedError, as ember's other rules
    a primitive is marked as lacking."""


FlatRule = Callable[..., tuple[list[Any], list[Any]]]


class _RuleRuns:
    """How many times a user's custom rule (a custom_jvp's jvp, a custom_vjp's fwd or bwd) has run, process-wide."""
    count = 0  # (only compared for change: an increment lost to a race between threads still changes it)


def rule_runs() -> int:
    """A number that changes whenever a user's custom rule runs. A cache of grad, vjp, jvp, vmap, ... compares it
    around a build: a result that ran a rule depends on that Python (JAX runs it again on every call outside
    jit), so it is not kept (ember._api.caches)."""
    return _RuleRuns.count


def runs_python_each_call() -> None:
    """Mark what is being built as the result of Python that JAX runs on every call outside jit (a user's custom
    rule; a function returning Python values as its aux): a cache of grad, vjp, jvp, vmap, ... does not keep it."""
    _RuleRuns.count += 1


def _lower_inline(ctx: LoweringContext, *operands: str, fun_ir: IR, **params: Any) -> list[str]:
    return lower_into(ctx.emitter, fun_ir, operands)


def _outs_of(fun_ir: IR) -> list[ShapedArray]:
    return fun_ir.out_avals


def _at_front(args: Sequence[Any], dims: Sequence[BatchDim], size: int) -> list[Any]:
    return [batch_at_front(x, d, size) for x, d in zip(args, dims)]


def _batched_rule(rule: Callable[..., Any], size: int, label: str,
                  batched: Sequence[Sequence[bool]] | None = None) -> Callable[..., Any]:
    """rule (over flat lists of per-member values) applied to a batch: staged at the per-member avals and batched,
    every output at axis 0, an input at axis 0 where batched says so (per group; by default every input), the
    others unbatched (one value for the whole batch, as a predicate an unvmap made)."""
    def batched_call(*groups: list[Any]) -> tuple[list[Any], ...]:
        counts = [len(g) for g in groups[:-1]]
        flags = [True] * sum(len(g) for g in groups) if batched is None else [f for fs in batched for f in fs]
        values = [x for g in groups for x in g]
        flat_avals = [aval_of(x).update(shape=aval_of(x).shape[1:]) if f else aval_of(x)
                      for x, f in zip(values, flags)]
        shapes: list[int] = []

        def flat(*leaves: Any) -> list[Any]:
            results = rule(*split_sizes(leaves, *counts))
            shapes[:] = [len(r) for r in results[:-1]]
            return [x for r in results for x in r]
        ir = stage_flat(flat, flat_avals, label=label)
        bir, _ = batch_ir(ir, [0 if f else None for f in flags], size, [0] * len(ir.outs))
        return tuple(split_sizes(eval_ir(bir, values), *shapes))
    return batched_call


# ---------------------------------------------------------------------------------------------------------------
# custom_jvp_call(consts..., args...; fun_ir, num_consts, jvp)
class _RuleCallPrimitive(Primitive):
    """A call of a function with custom rules: bound again from an equation's get_bind_params, it may be given
    JAX's `subfuns` (the function and its rule as JAX's wrapped functions, see ember.extend), which its own params
    already hold."""

    def bind(self, *args: Any, subfuns: Any = None, **params: Any) -> Any:
        return super().bind(*args, **params)


custom_jvp_call_p = _RuleCallPrimitive("custom_jvp_call", multiple_results=True, eager_body="fun_ir", own_vma=True)
custom_jvp_call_p.def_rule("abstract_eval", lambda *avals, fun_ir, num_consts, jvp: _outs_of(fun_ir))
custom_jvp_call_p.def_rule("lowering", _lower_inline)
custom_jvp_call_p.none_cotangents = True  # (a zero output cotangent stays None through the rule's transpose, so a
# custom_vjp before it gets JAX's SymbolicZero for it)


def _dense(result: tuple[list[Any], list[Any]], out_avals: Sequence[ShapedArray]) -> tuple[list[Any], list[Any]]:
    """A rule's (outputs, output tangents) with each zero (None) tangent an array of zeros, to stage."""
    outs, touts = result
    return list(outs), [zeros(a.strip_weak_type()) if t is None else t for t, a in zip(touts, out_avals)]


@custom_jvp_call_p.def_rule("jvp")
def _custom_jvp_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, fun_ir: IR, num_consts: int,
                    jvp: FlatRule) -> tuple[list[Any], list[Any]]:
    return jvp(list(primals[num_consts:]), list(tangents[num_consts:]))  # (a tangent None: zero, see the rule)


def _custom_jvp_linear(ins: list[Any], needs: list[bool], fun_ir: IR, num_consts: int, jvp: FlatRule
                       ) -> Callable[[list[Any]], list[Any]]:
    """The rule's tangent map t -> jvp(args, t)[1], staged now, and its transpose (its VJP: it is linear) as a
    function of the output cotangents. Only the arguments reverse mode needs get tangents in it: the others' are
    zero (None to the rule: a SymbolicZero with symbolic_zeros=True, as JAX's linearization gives them)."""
    args = list(ins[num_consts:])
    which = [i for i, (a, need) in enumerate(zip(args, needs[num_consts:]))
             if need and dt.is_inexact(aval_of(a).dtype)]
    t_avals = [aval_of(args[i]).strip_weak_type() for i in which]
    known = concrete_values(args)  # outside jit the rule may branch on the primal values

    def tangent_map(*ts: Any) -> list[Any]:
        tangents: list[Any] = [None] * len(args)
        for i, t in zip(which, ts):
            tangents[i] = t
        return _dense(jvp(args, tangents), fun_ir.out_avals)[1]
    linear = stage_flat(tangent_map, t_avals, None if known is None else [zeros(a) for a in t_avals],
                        label="custom_jvp rule")

    def transpose(cts: list[Any]) -> list[Any]:
        _, in_cts = backward_pass(linear, [zeros(a) for a in t_avals], [True] * len(t_avals), cts, linear=True)
        result: list[Any] = [None] * len(ins)
        for i, ct in zip(which, in_cts):
            result[num_consts + i] = ct
        return result
    return transpose


@custom_jvp_call_p.def_rule("vjp_split")
def _custom_jvp_vjp_split(ins: list[Any], active: list[bool], *, fun_ir: IR, num_consts: int, jvp: FlatRule
                          ) -> tuple[list[Any], Callable[..., list[Any]]]:
    """Reverse mode runs the rule in the forward sweep, where JAX's linearization runs it: an error it raises
    (equinox's nondifferentiable) comes before those of the equations after it, as under JAX."""
    outs = custom_jvp_call_p.bind(*ins, fun_ir=fun_ir, num_consts=num_consts, jvp=jvp)
    transpose = _custom_jvp_linear(ins, active, fun_ir, num_consts, jvp)
    return outs, lambda cts, needs: [ct if need else None for ct, need in zip(transpose(cts), needs)]


@custom_jvp_call_p.def_rule("vjp")
def _custom_jvp_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, fun_ir: IR,
                    num_consts: int, jvp: FlatRule) -> list[Any]:
    return _custom_jvp_linear(ins, needs, fun_ir, num_consts, jvp)(cts)


@custom_jvp_call_p.def_rule("depends")
def _custom_jvp_depends(active: list[bool], *, fun_ir: IR, num_consts: int, jvp: FlatRule) -> list[bool]:
    """The outputs the rule gives a tangent (not None: a SymbolicZero, or an integer output's) when the active
    arguments have one. As JAX's symbolic zeros, an output the rule leaves zero is not differentiated after it.
    Only a rule registered with symbolic_zeros=True may leave a float output's tangent zero: it is staged at the
    arguments' types, once per (rule, active arguments) (one more run of it; the others do not run here). A rule
    that cannot run abstractly (Python control flow on a primal value) gives every output."""
    if not getattr(jvp, "symbolic_zeros", True):
        on = any(active[num_consts:])
        return [on and dt.is_inexact(a.dtype) for a in fun_ir.out_avals]
    key = tuple(active[num_consts:])
    known = _RULE_DEPENDS.setdefault(jvp, {})
    if key not in known:
        avals = fun_ir.in_avals[num_consts:]
        flags = [on and dt.is_inexact(a.dtype) for on, a in zip(key, avals)]
        t_avals = [a.strip_weak_type() for a, f in zip(avals, flags) if f]
        given: list[bool] = [False] * len(fun_ir.outs)

        def run(*xs: Any) -> list[Any]:
            primals, ts = list(xs[:len(avals)]), iter(xs[len(avals):])
            touts = jvp(primals, [next(ts) if f else None for f in flags])[1]
            given[:] = [t is not None for t in touts]
            return []
        if any(flags):
            try:
                stage_flat(run, list(avals) + t_avals, label="custom_jvp rule")
            except Exception:  # (see above; the rule runs again when it is differentiated, and says so there)
                given = [dt.is_inexact(a.dtype) for a in fun_ir.out_avals]
        known[key] = given
    return list(known[key]) if any(active) else [False] * len(fun_ir.outs)


_RULE_DEPENDS: "weakref.WeakKeyDictionary[Any, dict[tuple[bool, ...], list[bool]]]" = weakref.WeakKeyDictionary()


@custom_jvp_call_p.def_rule("batching")
def _custom_jvp_batching(args: list[Any], dims: list[BatchDim], *, fun_ir: IR, num_consts: int, jvp: FlatRule
                         ) -> tuple[list[Any], list[BatchDim]]:
    size = batch_size(args, dims)  # (an unbatched argument stays one, as JAX's: a predicate an unvmap made)
    batched = [d is not None for d in dims]
    args = [batch_at_front(x, d, size) if b else x for x, d, b in zip(args, dims, batched)]
    fun_b, _ = batch_ir(fun_ir, [0 if b else None for b in batched], size, [0] * len(fun_ir.outs))
    arg_batched = batched[num_consts:]  # (a tangent is batched as its primal: same type)
    jvp_flat = _batched_rule(lambda ps, ts: _dense(jvp(ps, ts), fun_ir.out_avals), size, "custom_jvp rule",
                             [arg_batched, arg_batched])

    def jvp_b(primals: list[Any], tangents: list[Any]) -> tuple[list[Any], list[Any]]:  # (zeros staged as arrays)
        outs, touts = jvp_flat(primals, [zeros(aval_of(p).strip_weak_type()) if t is None else t
                                         for p, t in zip(primals, tangents)])
        return outs, [t if dt.is_inexact(aval_of(o).dtype) else None for o, t in zip(outs, touts)]
    jvp_b.symbolic_zeros = getattr(jvp, "symbolic_zeros", True)  # type: ignore[attr-defined]
    return custom_jvp_call_p.bind(*args, fun_ir=fun_b, num_consts=num_consts, jvp=jvp_b), [0] * len(fun_ir.outs)


# ---------------------------------------------------------------------------------------------------------------
# custom_vjp_call(consts..., args...; fun_ir, num_consts, fwd, bwd)
custom_vjp_call_p = Primitive("custom_vjp_call", multiple_results=True, eager_body="fun_ir", takes_refs=True,
                              own_vma=True)
custom_vjp_call_p.none_cotangents = True  # (its bwd receives zeros, or JAX's SymbolicZero, for them)
KEEPS_REFS.add(custom_vjp_call_p)  # (a Ref it takes stays one through hoisting: bwd may write it, as JAX's stash)
custom_vjp_call_p.def_rule("abstract_eval", lambda *avals, fun_ir, num_consts, fwd, bwd: _outs_of(fun_ir))
custom_vjp_call_p.def_rule("lowering", _lower_inline)


@custom_vjp_call_p.def_rule("jvp")
def _custom_vjp_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, fun_ir: IR, num_consts: int, fwd: FlatRule,
                    bwd: FlatRule) -> tuple[list[Any], list[Any]]:
    """Forward mode of a custom_vjp call, as JAX's: the outputs are fwd's, their tangents a custom_lin of fwd's
    residuals and the arguments' tangents, which only reverse mode can compute (by transposing it: bwd). So
    linearize works, and linearize followed by vjp or linear_transpose gives bwd's cotangents; evaluating the tangents
    (jvp, the linear function linearize returns) is JAX's error then."""
    args = list(primals[num_consts:])
    perturbed = [t is not None for t in tangents[num_consts:]]
    outs, residuals = fwd(args, perturbed)
    if not any(perturbed):  # (only the consts have tangents, which bwd does not see: the outputs' are zeros)
        return list(outs), [None] * len(outs)
    ts = [zeros(aval_of(a).strip_weak_type()) if t is None else t for a, t in zip(args, tangents[num_consts:])]
    out_avals = tuple(a.strip_weak_type() for a in fun_ir.out_avals)
    touts = custom_lin_p.bind(*residuals, *ts, num_res=len(residuals), bwd=bwd, out_avals=out_avals)
    return list(outs), [t if dt.is_inexact(a.dtype) else None for t, a in zip(touts, out_avals)]


# ---------------------------------------------------------------------------------------------------------------
# custom_lin(residuals..., tangents...; num_res, bwd, out_avals): the output tangents of a custom_vjp call in
# forward mode (JAX's custom_lin): linear in the tangents, known only through its transpose, bwd at the residuals.
# Running it is forward-mode differentiation of a custom_vjp function, JAX's error (its lowering, so at run time:
# a tangent nothing reads is dropped before); reverse mode transposes it.
custom_lin_p = Primitive("custom_lin", multiple_results=True, own_sharding=True, checks=())  # (out_avals are typed)
custom_lin_p.none_cotangents = True  # (bwd receives zeros, or JAX's SymbolicZero, for them)
custom_lin_p.def_rule("abstract_eval", lambda *avals, num_res, bwd, out_avals: list(out_avals))
custom_lin_p.mark("jvp", CUSTOM_VJP_NO_FORWARD_MODE, error=ForwardModeOfCustomVjpError)


@custom_lin_p.def_rule("lowering")
def _custom_lin_lowering(ctx: LoweringContext, *operands: str, num_res: int, bwd: FlatRule,
                         out_avals: tuple[ShapedArray, ...]) -> list[str]:
    raise ForwardModeOfCustomVjpError(f"forward-mode differentiation of primitive 'custom_vjp_call': "
                                      f"{CUSTOM_VJP_NO_FORWARD_MODE} (its tangents are known only to reverse mode: "
                                      "linearize it and transpose, or use grad/vjp)")


@custom_lin_p.def_rule("vjp")
def _custom_lin_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, num_res: int,
                    bwd: FlatRule, out_avals: tuple[ShapedArray, ...]) -> list[Any]:
    if any(needs[:num_res]):
        raise NotImplementedError("reverse mode through the residuals of a custom_vjp function's linearization (a "
                                  "derivative of its bwd rule, from forward mode) is not supported")
    in_cts = bwd(list(ins[:num_res]), list(cts))
    return [None] * num_res + [c if need else None for c, need in zip(in_cts, needs[num_res:])]


@custom_lin_p.def_rule("batching")
def _custom_lin_batching(args: list[Any], dims: list[BatchDim], *, num_res: int, bwd: FlatRule,
                         out_avals: tuple[ShapedArray, ...]) -> tuple[list[Any], list[BatchDim]]:
    size = batch_size(args, dims)
    args = _at_front(args, dims, size)
    bwd_flat = _batched_rule(lambda res, cts: (bwd(res, cts),), size, "custom_vjp bwd")

    def bwd_b(res: list[Any], cts: list[Any]) -> list[Any]:
        return bwd_flat(res, [zeros(a.update(shape=(size,) + a.shape)) if c is None else c
                              for c, a in zip(cts, out_avals)])[0]
    outs = custom_lin_p.bind(*args, num_res=num_res, bwd=bwd_b,
                             out_avals=tuple(a.update(shape=(size,) + a.shape) for a in out_avals))
    return outs, [0] * len(out_avals)


@custom_vjp_call_p.def_rule("vjp")
def _custom_vjp_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, fun_ir: IR,
                    num_consts: int, fwd: FlatRule, bwd: FlatRule) -> list[Any]:
    args = list(ins[num_consts:])
    _, residuals = fwd(args, needs[num_consts:])
    in_cts = bwd(residuals, list(cts))  # (a cotangent None: zero, see the rule)
    return [None] * num_consts + [c if need else None for c, need in zip(in_cts, needs[num_consts:])]


@custom_vjp_call_p.def_rule("discharge")
def _custom_vjp_discharge(ins: list[Any], refs: list[int | None], *, fun_ir: IR, num_consts: int, fwd: FlatRule,
                          bwd: FlatRule) -> tuple[list[Any], list[Any]]:
    """Lowering a call that takes Refs (no transformation is left to use the rules): its function, inlined."""
    outs, finals = body_finals(fun_ir, ins, refs)
    return outs, updated(ref_values(ins, refs), finals)


@custom_vjp_call_p.def_rule("batching")
def _custom_vjp_batching(args: list[Any], dims: list[BatchDim], *, fun_ir: IR, num_consts: int, fwd: FlatRule,
                         bwd: FlatRule) -> tuple[list[Any], list[BatchDim]]:
    size = batch_size(args, dims)
    args = _at_front(args, dims, size)
    fun_b, _ = batch_ir(fun_ir, [0] * len(args), size, [0] * len(fun_ir.outs))
    out_avals = fun_b.out_avals

    def fwd_b(args: list[Any], perturbed: Sequence[bool] | None = None) -> tuple[list[Any], list[Any]]:
        return _batched_rule(lambda xs: fwd(xs, perturbed), size, "custom_vjp fwd")(args)

    bwd_flat = _batched_rule(lambda res, cts: (bwd(res, cts),), size, "custom_vjp bwd")

    def bwd_b(res: list[Any], cts: list[Any]) -> list[Any]:  # (a zero cotangent is batched zeros here)
        return bwd_flat(res, [zeros(a.strip_weak_type()) if c is None else c for c, a in zip(cts, out_avals)])[0]

    outs = custom_vjp_call_p.bind(*args, fun_ir=fun_b, num_consts=num_consts, fwd=fwd_b, bwd=bwd_b)
    return outs, [0] * len(fun_ir.outs)


# ---------------------------------------------------------------------------------------------------------------
# Public: custom_jvp and custom_vjp
def _split_static(name: str, nondiff_argnums: tuple[int, ...], args: tuple[Any, ...]
                  ) -> tuple[list[Any], list[Any], Callable[[Sequence[Any]], list[Any]]]:
    n = len(args)
    for i in nondiff_argnums:
        if not -n <= i < n:
            raise ValueError(f"{name}: nondiff_argnums {nondiff_argnums} out of range for {n} arguments")
    static_pos = sorted(i % n for i in nondiff_argnums)
    static = [args[i] for i in static_pos]
    diff = [a for i, a in enumerate(args) if i not in static_pos]

    def merge(diff_values: Sequence[Any]) -> list[Any]:
        merged, it = [], iter(diff_values)
        for i in range(n):
            merged.append(static[static_pos.index(i)] if i in static_pos else next(it))
        return merged
    return static, diff, merge


def _closed(name: str, fun: Callable[..., Any], merge: Callable[[Sequence[Any]], list[Any]], diff: list[Any],
            traced_consts: bool = False) -> tuple[Any, list[Any], PyTreeDef]:
    """fun of the differentiable arguments, staged (concretely when their values are known). Only checkpoint may
    close over traced values: its rules treat consts as ordinary inputs, while custom rules never see them."""
    leaves, in_tree = tree_flatten(tuple(diff))
    closed = close_over(lambda *d: fun(*merge(d)), in_tree, [aval_of(x) for x in leaves], name,
                        concrete_values(leaves))
    if not traced_consts and any(isinstance(c, Tracer) for c in closed.consts):
        raise TypeError(f"{name}: the function closes over a traced value (of an enclosing jit, grad, vmap, ...); "
                        "pass it as an argument instead (static values: nondiff_argnums)")
    return closed, leaves, in_tree


def _check_rule_outputs(name: str, what: str, tree: PyTreeDef, expected_tree: PyTreeDef,
                        got: Sequence[ShapedArray], expected: Sequence[ShapedArray]) -> None:
    if tree != expected_tree or not same_types(got, expected):
        raise TypeError(f"{name}: the {what} must match the function's output {expected_tree} "
                        f"{describe(expected)}, got {tree} {describe(got)}")


def _float0_or(values: Sequence[Any], avals: Sequence[ShapedArray], symbolic: bool = False) -> list[Any]:
    """Tangents/cotangents as the user's rules see them: float0 zeros for integer and boolean values (symbolic:
    a SymbolicZero of the float0 type)."""
    return [v if dt.is_inexact(a.dtype) else SymbolicZero(a.to_tangent_aval()) if symbolic
            else dt.float0_zeros(a.shape) for v, a in zip(values, avals)]


class TypedZero:
    """A zero tangent or cotangent that knows its type only (aval: float0 for an integer or boolean value's
    tangent). The base of JAX's two such types: SymbolicZero below, and ad.Zero (ember.extend's)."""
    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)

    @classmethod
    def from_primal_value(cls, value: Any) -> Any:
        return cls(aval_of(value).to_tangent_aval())

    def instantiate(self) -> Any:
        """The zeros it stands for (float0 zeros for an integer or boolean value's tangent)."""
        return dt.float0_zeros(self.aval.shape) if self.aval.dtype == dt.float0 else zeros(self.aval)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.aval})"


class SymbolicZero(TypedZero):
    """A zero tangent or cotangent a custom rule registered with symbolic_zeros=True receives (and may return)
    instead of an array of zeros (jax.custom_derivatives.SymbolicZero)."""
    __slots__ = ()


def _absent_as(aval: ShapedArray, symbolic: bool) -> Any:
    """What a user's rule receives for an absent (zero) tangent or cotangent of type aval: a SymbolicZero with
    symbolic_zeros=True, else zeros."""
    return SymbolicZero(aval.to_tangent_aval()) if symbolic else zeros(aval.strip_weak_type())


@dataclasses.dataclass(frozen=True)
class CustomVJPPrimal:
    """An argument as the fwd rule of a custom_vjp registered with symbolic_zeros=True receives it
    (jax.custom_derivatives.CustomVJPPrimal): its value, and whether it is perturbed (differentiated)."""
    value: Any
    perturbed: bool


def _from_float0(values: Sequence[Any], avals: Sequence[ShapedArray]) -> list[Any]:
    return [zeros(a.strip_weak_type()) if isinstance(v, np.ndarray) and v.dtype == dt.float0 else v
            for v, a in zip(values, avals)]


def _resolve_kwargs(name: str, fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
                    ) -> tuple[Any, ...]:
    """The arguments of a call of a custom_jvp/custom_vjp function as positions (its rules take positional
    arguments), as JAX's: keyword arguments bound to fun's signature, its defaults filled in; a keyword that has no
    position (a keyword-only parameter, **kwargs) is a TypeError."""
    if not kwargs:
        return args
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except TypeError as err:
        raise TypeError(f"{name}: {err}") from None
    except ValueError:  # (no signature: a builtin)
        raise TypeError(f"{name}: keyword arguments could not be resolved to positions") from None
    bound.apply_defaults()
    if bound.kwargs:
        raise TypeError(f"{name}: keyword arguments could not be resolved to positions "
                        f"({', '.join(bound.kwargs)} {'is' if len(bound.kwargs) == 1 else 'are'} keyword-only)")
    return tuple(bound.args)


class custom_jvp:  # noqa: N801  (JAX's name)
    """A function with a custom forward-mode rule (like jax.custom_jvp): decorate it, then register the rule
    with @f.defjvp: jvp(*nondiff_args, primals, tangents) -> (primal_out, tangent_out), linear in the tangents.
    Reverse mode transposes the rule; vmap batches it."""

    pure_rules = False  # True for ember's own (pure_custom_jvp): its rule reads no Python state, not counted

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: Sequence[int] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp: Callable[..., Any] | None = None
        self.symbolic_zeros = False

    def defjvp(self, jvp: Callable[..., Any], symbolic_zeros: bool = False) -> Callable[..., Any]:
        """Register the rule. symbolic_zeros: the rule receives a SymbolicZero (not an array of zeros) for the
        tangent of an argument that has none, and may return one for a zero output tangent (as JAX's)."""
        self.jvp, self.symbolic_zeros = jvp, bool(symbolic_zeros)
        return jvp

    def defjvps(self, *jvps: Callable[..., Any] | None) -> None:
        """The rule as one function per argument (like jax.custom_jvp.defjvps): jvps[i](tangent_i, primal_out,
        *primals) is argument i's part of the output tangent, None where the output does not depend on it; the
        output tangent is the sum of the parts."""
        name = f"custom_jvp({getattr(self.fun, '__name__', 'function')})"
        if self.nondiff_argnums:
            raise TypeError(f"{name}: defjvps cannot be used with nondiff_argnums; use defjvp")

        def jvp(primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> tuple[Any, Any]:
            if len(jvps) != len(primals):
                raise TypeError(f"{name}: defjvps got {len(jvps)} rules for a call with {len(primals)} arguments")
            out = self(*primals)
            parts = [rule(t, out, *primals) for rule, t in zip(jvps, tangents) if rule is not None]
            if not parts:
                return out, tree_map(lambda o: zeros(aval_of(o).strip_weak_type()), out)
            return out, tree_map(lambda *ts: functools.reduce(operator.add, ts), *parts)
        self.defjvp(jvp)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = f"custom_jvp({getattr(self.fun, '__name__', 'function')})"
        args = _resolve_kwargs(name, self.fun, args, kwargs)
        if self.jvp is None:
            raise TypeError(f"{name}: no rule; register one with @{getattr(self.fun, '__name__', 'f')}.defjvp")
        if not is_tracing():  # nothing to transform: the function itself
            return self.fun(*args)
        static, diff, merge = _split_static(name, self.nondiff_argnums, args)
        closed, leaves, in_tree = _closed(name, self.fun, merge, diff)
        user_jvp, in_avals = self.jvp, [aval_of(x) for x in leaves]
        out_avals = closed.ir.out_avals

        pure, symbolic = self.pure_rules, self.symbolic_zeros

        def rule(primals: list[Any], tangents: list[Any]) -> tuple[list[Any], list[Any]]:
            if not pure:
                runs_python_each_call()
            tangents = [_absent_as(a, symbolic) if t is None else t for t, a in zip(tangents, in_avals)]
            tangent_tree = in_tree.unflatten(_float0_or(tangents, in_avals, symbolic))
            out, t_out = user_jvp(*static, in_tree.unflatten(primals), tangent_tree)
            out_leaves, out_tree = tree_flatten(out)
            t_leaves, t_tree = tree_flatten(t_out)
            # (a SymbolicZero, or any tangent of an integer or boolean output, is a zero: None, as JAX's Zero)
            absent = [isinstance(t, SymbolicZero) or not dt.is_inexact(a.dtype) for t, a in zip(t_leaves, out_avals)]
            t_leaves = [zeros(a.strip_weak_type()) if isinstance(t, SymbolicZero) else t
                        for t, a in zip(t_leaves, out_avals)]
            _check_rule_outputs(name, "primal output of the jvp rule", out_tree, closed.out_tree,
                                [aval_of(x) for x in out_leaves], out_avals)
            t_leaves = _from_float0(t_leaves, out_avals)
            _check_rule_outputs(name, "tangent output of the jvp rule", t_tree, closed.out_tree,
                                [aval_of(x) for x in t_leaves], out_avals)
            return out_leaves, [None if gone else t for t, gone in zip(t_leaves, absent)]
        rule.symbolic_zeros = symbolic  # type: ignore[attr-defined]  (see _custom_jvp_depends)
        rule.printed_names = (getattr(self.fun, "__name__", "function"),  # type: ignore[attr-defined]
                              getattr(user_jvp, "__name__", "jvp"))  # (as make_jaxpr prints the equation)

        outs = custom_jvp_call_p.bind(*closed.consts, *leaves, fun_ir=closed.ir, num_consts=len(closed.consts),
                                      jvp=rule)
        return closed.out_tree.unflatten(outs)


def pure_custom_jvp(fun: Callable[..., Any], nondiff_argnums: Sequence[int] = ()) -> custom_jvp:
    """A custom_jvp whose rule reads no Python state (ember's own: relu, softmax, logsumexp, ...). Its rule's runs
    are not counted (rule_runs), so the transformations outside jit keep caching what they build with it; a
    user's rule, which may read state that changes between calls, runs again on every call, as in JAX."""
    f = custom_jvp(fun, nondiff_argnums)
    f.pure_rules = True
    return f


class custom_vjp:  # noqa: N801  (JAX's name)
    """A function with a custom reverse-mode rule (like jax.custom_vjp): decorate it, then f.defvjp(fwd, bwd) with
    fwd(*args) -> (output, residuals) and bwd(*nondiff_args, residuals, output_cotangent) -> a tuple of
    cotangents, one per differentiable argument."""

    def __init__(self, fun: Callable[..., Any], nondiff_argnums: Sequence[int] = ()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd: Callable[..., Any] | None = None
        self.bwd: Callable[..., Any] | None = None
        self.symbolic_zeros = False

    def defvjp(self, fwd: Callable[..., Any], bwd: Callable[..., Any], symbolic_zeros: bool = False,
               optimize_remat: bool = False) -> None:
        """Register the rules. symbolic_zeros: fwd receives each differentiable argument's leaves as
        CustomVJPPrimal(value, perturbed), and bwd a SymbolicZero for a zero output cotangent (and may return one
        for a zero input cotangent), as JAX's. optimize_remat is JAX's memory optimisation of fwd: accepted, and
        the rules run as they are."""
        self.fwd, self.bwd, self.symbolic_zeros = fwd, bwd, bool(symbolic_zeros)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        name = f"custom_vjp({getattr(self.fun, '__name__', 'function')})"
        args = _resolve_kwargs(name, self.fun, args, kwargs)
        if self.fwd is None or self.bwd is None:
            raise TypeError(f"{name}: no rule; register one with f.defvjp(fwd, bwd)")
        if not is_tracing():
            return self.fun(*args)
        static, diff, merge = _split_static(name, self.nondiff_argnums, args)
        closed, leaves, in_tree = _closed(name, self.fun, merge, diff)
        user_fwd, user_bwd, in_avals = self.fwd, self.bwd, [aval_of(x) for x in leaves]
        out_avals = closed.ir.out_avals
        res_tree: list[PyTreeDef] = []
        arg_trees = [tree_structure(arg) for arg in diff]  # (not diff itself: bwd outlives the staging)

        symbolic = self.symbolic_zeros

        def fwd(args: list[Any], perturbed: Sequence[bool] | None = None) -> tuple[list[Any], list[Any]]:
            runs_python_each_call()
            if symbolic:  # (outside reverse mode, as in jvp of a custom_vjp refused later, nothing is perturbed)
                flags = [False] * len(args) if perturbed is None else list(perturbed)
                args = [CustomVJPPrimal(x, bool(p) and dt.is_inexact(a.dtype))
                        for x, p, a in zip(args, flags, in_avals)]
            out, res = user_fwd(*merge(in_tree.unflatten(args)))
            out_leaves, out_tree = tree_flatten(out)
            _check_rule_outputs(name, "output of fwd", out_tree, closed.out_tree, [aval_of(x) for x in out_leaves],
                                out_avals)
            res_leaves, tree = tree_flatten(res)
            res_tree[:] = [tree]
            return out_leaves, res_leaves

        def bwd(residuals: list[Any], cts: list[Any]) -> list[Any]:
            runs_python_each_call()
            cts = [_absent_as(a, symbolic) if c is None else c for c, a in zip(cts, out_avals)]
            got = user_bwd(*static, res_tree[0].unflatten(residuals), closed.out_tree.unflatten(cts))
            if not isinstance(got, tuple | list) or len(got) != len(arg_trees):
                raise TypeError(f"{name}: bwd must return a tuple with one cotangent per differentiable argument "
                                f"({len(arg_trees)}), got {type(got).__name__}")
            ct_leaves: list[Any] = []
            for i, (ct, arg_tree) in enumerate(zip(got, arg_trees)):  # None: zeros, for an argument or a leaf
                if ct is None:
                    ct_leaves += [None] * arg_tree.num_leaves
                    continue
                try:  # (None, or a SymbolicZero, at a leaf of the argument: a zero; None where it has None)
                    leaves_i = arg_tree.flatten_up_to(ct)
                except ValueError:
                    got = tree_structure(ct, is_leaf=lambda x: x is None or isinstance(x, SymbolicZero))
                    raise TypeError(f"{name}: bwd's cotangent {i} must have the structure of the argument "
                                    f"{arg_tree}, got {got}") from None
                if any(isinstance(c, list | tuple | dict) for c in leaves_i):
                    raise TypeError(f"{name}: bwd's cotangent {i} must have the structure of the argument "
                                    f"{arg_tree}, got {tree_structure(ct)}")
                ct_leaves += [None if isinstance(c, SymbolicZero) else c for c in leaves_i]
            ct_leaves = [zeros(a.strip_weak_type()) if c is None else c for c, a in zip(ct_leaves, in_avals)]
            for i, (c, a) in enumerate(zip(ct_leaves, in_avals)):  # (inside a shard_map body: JAX's check)
                if aval_of(c).vma - a.vma:
                    raise ValueError(f"{name}: Custom VJP bwd rule must produce an output with the same type as the "
                                     f"args tuple of the primal function, but at output leaf {i} the bwd rule "
                                     f"produced an output of type {aval_of(c).str_short()} corresponding to an input "
                                     f"of type {a.str_short()}, so the manual axis types do not match (psum the "
                                     "cotangent of a value every device holds alike over the axes it varies over)")
            return _from_float0(ct_leaves, in_avals)

        fwd.printed_names = (getattr(self.fun, "__name__", "function"),  # type: ignore[attr-defined]
                             getattr(user_fwd, "__name__", "fwd"), getattr(user_bwd, "__name__", "bwd"), symbolic)
        outs = custom_vjp_call_p.bind(*closed.consts, *leaves, fun_ir=closed.ir, num_consts=len(closed.consts),
                                      fwd=fwd, bwd=bwd)
        return closed.out_tree.unflatten(outs)


# ---------------------------------------------------------------------------------------------------------------
# optimization_barrier(*xs): the identity, which XLA may not optimize across (no CSE, no moving work over it).
optimization_barrier_p = Primitive("optimization_barrier", multiple_results=True, own_vma=True, checks=())
optimization_barrier_p.def_rule("abstract_eval", lambda *avals: list(avals))
optimization_barrier_p.def_rule("lowering", lambda ctx, *xs: ctx.op("stablehlo.optimization_barrier", list(xs),
                                                                     ctx.avals_out) if xs else [])
optimization_barrier_p.def_rule("jvp", linear_jvp(optimization_barrier_p))
optimization_barrier_p.def_rule("vjp", lambda cts, ins, outs, needs: list(cts))
optimization_barrier_p.def_rule("batching", lambda args, dims: (optimization_barrier_p.bind(*args), list(dims)))


def optimization_barrier(operand: Any) -> Any:
    """operand (a pytree) unchanged, with XLA kept from optimizing across it (like jax.lax.optimization_barrier)."""
    leaves, tree = tree_flatten(operand)
    return tree.unflatten(optimization_barrier_p.bind(*leaves))


# ---------------------------------------------------------------------------------------------------------------
# name(x; name): checkpoint_name's identity, which a checkpoint policy can pick out by its name. Its tangent is not
# named (as in JAX); it is kept by every pass as any other equation is (dce drops it only when unused).
name_p = Primitive("name", checks=())
name_p.def_rule("sharding_rule", explicit.same_as(0))
name_p.def_rule("abstract_eval", lambda x, *, name: x)
name_p.def_rule("lowering", lambda ctx, x, *, name: [x])
name_p.def_rule("jvp", lambda primals, tangents, *, name: ([name_p.bind(primals[0], name=name)], [tangents[0]]))
name_p.def_rule("vjp", lambda cts, ins, outs, needs, *, name: [cts[0]])
name_p.def_rule("batching", lambda args, dims, *, name: ([name_p.bind(args[0], name=name)], [dims[0]]))


def checkpoint_name(x: Any, name: str) -> Any:
    """x (a pytree) unchanged, each array named `name` for the checkpoint policies that select values by name
    (save_only_these_names, save_any_names_but_these, ...), as jax.ad_checkpoint.checkpoint_name."""
    if not isinstance(name, str):
        raise TypeError(f"checkpoint_name: name must be a str, got {name!r}")
    return tree_map(lambda leaf: name_p.bind(leaf, name=name), x)


# ---------------------------------------------------------------------------------------------------------------
# remat(args...; body_ir, policy): checkpointing. Reverse mode keeps from the forward pass only the values the
# policy saves (policy(prim, *input avals, **params) -> bool for the equation that made the value; None: nothing);
# the backward pass recomputes the others from those, behind an optimization barrier (so XLA cannot reuse the
# first computation). docs/checkpointing.md.
remat_p = Primitive("remat", multiple_results=True, eager_body="body_ir", own_vma=True)
remat_p.def_rule("abstract_eval", lambda *avals, body_ir, policy: body_ir.out_avals)
remat_p.def_rule("lowering", lambda ctx, *xs, body_ir, policy: lower_into(ctx.emitter, body_ir, xs))


@remat_p.def_rule("jvp")
def _remat_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, body_ir: IR, policy: Any
               ) -> tuple[list[Any], list[Any]]:
    with_tangent = [t is not None and dt.is_inexact(aval_of(p).dtype) for p, t in zip(primals, tangents)]
    outs = remat_p.bind(*primals, *[t for t, w in zip(tangents, with_tangent) if w],
                        body_ir=jvp_ir(body_ir, with_tangent), policy=policy)
    n = len(body_ir.outs)
    return outs[:n], outs[n:]


class RecomputeType:
    """The type of Recompute (jax.ad_checkpoint's)."""

    def __repr__(self) -> str:
        return "Recompute"


class SaveableType:
    """The type of Saveable (jax.ad_checkpoint's)."""

    def __repr__(self) -> str:
        return "Saveable"


Recompute = RecomputeType()  # a policy's verdict: recompute the value in the backward pass (as False)
Saveable = SaveableType()  # a policy's verdict: keep the value from the forward pass (as True)


class Offloadable(NamedTuple):
    """A policy's verdict: keep the value, moved from memory kind src to dst until the backward pass (host memory
    on an accelerator, as JAX's). On ember's CPU device every memory is the host's: the value is kept (as Saveable)."""
    src: Any
    dst: Any


def saves(policy: Any, eqn: Any) -> bool:
    """Whether a checkpoint policy saves the values eqn makes (None: nothing is saved). A policy answers a bool, or
    Saveable, Recompute or an Offloadable(src, dst) (kept: see Offloadable), as JAX's."""
    if policy is None:
        return False
    verdict = policy(eqn.prim, *[a.aval for a in eqn.inputs], **eqn.params)
    if isinstance(verdict, (bool, np.bool_)):
        return bool(verdict)
    if isinstance(verdict, (SaveableType, Offloadable)):
        return True
    if isinstance(verdict, RecomputeType):
        return False
    message = ("Value returned by a remat policy should be a bool or `ad_checkpoint.Recompute`, "
               "`ad_checkpoint.Saveable` or `ad_checkpoint.Offloadable(...)`. Got "
               f"{verdict} of type {type(verdict)} (from {getattr(policy, '__name__', policy)!r} for primitive "
               f"{eqn.prim.name!r}).")
    if verdict is Offloadable:
        message += " Did you return `Offloadable` instead of an instantiated `Offloadable(...)`?"
    raise TypeError(message)


def _stage_remat_split(body_ir: IR, wrt: tuple[bool, ...], policy: Any) -> tuple[IR, IR]:
    n_in, n_out = len(body_ir.in_vars), len(body_ir.outs)
    joint = vjp_ir(body_ir, wrt)  # (ins, cts) -> (outs, cotangents of the inputs in wrt)
    known, linear, _ = split_known(joint, [False] * n_in + [True] * n_out, n_out,
                                   recompute=lambda eqn: not saves(policy, eqn))
    return known, linear


REMAT_SPLITS = TransformCache("remat vjp split")  # (body_ir, (wrt, policy)) -> (known, linear)


@remat_p.def_rule("vjp_split")
def _remat_vjp_split(ins: list[Any], active: list[bool], *, body_ir: IR, policy: Any
                     ) -> tuple[list[Any], Callable[..., list[Any]]]:
    """The body's VJP split by the policy: the forward pass computes the outputs and the values the policy saves
    (the inputs are always at hand); the pullback recomputes the rest from those and pulls the cotangents back."""
    wrt = tuple(bool(a) and dt.is_inexact(v.aval.dtype) for a, v in zip(active, body_ir.in_vars))
    known, linear = REMAT_SPLITS.get(body_ir, (wrt, policy), lambda: _stage_remat_split(body_ir, wrt, policy))
    n_out = len(body_ir.outs)
    results = eval_ir(known, list(ins))
    outs, saved = results[:n_out], results[n_out:]

    def pullback(cts: list[Any], needs: list[bool]) -> list[Any]:
        cts = [zeros(aval_of(o).strip_weak_type()) if c is None else c for o, c in zip(outs, cts)]
        args = list(saved)
        if policy is not everything_saveable:  # one barrier over the saved values and the cotangents: the
            # recomputation can neither be merged with the forward pass nor start before this block's cotangents
            # exist, which bounds what is alive at once
            fenced = optimization_barrier_p.bind(*args, *cts)
            args, cts = list(fenced[:len(args)]), list(fenced[len(args):])
        in_cts = iter(eval_ir(linear, args + cts))
        full = [next(in_cts) if w else None for w in wrt]
        return [c if need else None for c, need in zip(full, needs)]

    return outs, pullback


@remat_p.def_rule("vjp")
def _remat_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, body_ir: IR, policy: Any
               ) -> list[Any]:
    """Reverse mode outside the backward pass's forward sweep: the split's forward part run again here."""
    return _remat_vjp_split(ins, needs, body_ir=body_ir, policy=policy)[1](cts, needs)


@remat_p.def_rule("batching")
def _remat_batching(args: list[Any], dims: list[BatchDim], *, body_ir: IR, policy: Any
                    ) -> tuple[list[Any], list[BatchDim]]:
    body, out_dims = batch_ir(body_ir, dims, batch_size(args, dims))
    return remat_p.bind(*args, body_ir=body, policy=policy), out_dims


# ---------------------------------------------------------------------------------------------------------------
# The policies (jax.checkpoint_policies): callables policy(prim, *avals, **params) -> bool, "save the value this
# equation makes" or "recompute it". A policy of one's own compares prim.name (ember's primitives are not JAX's).
def everything_saveable(*_: Any, **__: Any) -> bool:
    """Save everything (as without checkpoint)."""
    return True


def nothing_saveable(*_: Any, **__: Any) -> bool:
    """Recompute everything but the inputs in the backward pass (checkpoint's default)."""
    return False


_DOTS = ("dot_general", "conv_general_dilated")


@dataclasses.dataclass(frozen=True)
class _DotsSaveable:
    no_batch_dims: bool

    def __call__(self, prim: Any, *_: Any, **params: Any) -> bool:
        if self.no_batch_dims:
            return prim.name == "dot_general" and not any(params["dimension_numbers"][1])
        return prim.name in _DOTS


@dataclasses.dataclass(frozen=True)
class _Names:
    names: frozenset[str]
    listed: bool  # save the names listed (True), or every name but those (False)

    def __call__(self, prim: Any, *_: Any, **params: Any) -> bool:
        return prim is name_p and (params["name"] in self.names) == self.listed


@dataclasses.dataclass(frozen=True)
class _AnyOf:
    policies: tuple[Any, ...]

    def __call__(self, prim: Any, *avals: Any, **params: Any) -> bool:
        verdicts = [policy(prim, *avals, **params) for policy in self.policies]
        if not all(isinstance(v, (bool, np.bool_)) for v in verdicts):
            raise ValueError(f"save_from_both_policies: the policies must return booleans, got {verdicts}")
        return any(verdicts)


def _names(where: str, names: Sequence[Any]) -> frozenset[str]:
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"checkpoint_policies.{where}: names must be str, got {name!r}")
    return frozenset(names)


class checkpoint_policies:  # noqa: N801  (JAX's name)
    """Which values reverse mode keeps from the forward pass of a checkpointed function (jax.checkpoint_policies).
    The offloading policies save to host memory on an accelerator; on the CPU, where device memory is host memory,
    they save (docs/checkpointing.md)."""
    everything_saveable = staticmethod(everything_saveable)
    nothing_saveable = staticmethod(nothing_saveable)
    dots_saveable = checkpoint_dots = _DotsSaveable(False)
    dots_with_no_batch_dims_saveable = checkpoint_dots_with_no_batch_dims = _DotsSaveable(True)

    @staticmethod
    def save_only_these_names(*names: str) -> Any:
        """Save only values named (checkpoint_name) with one of names."""
        return _Names(_names("save_only_these_names", names), True)

    @staticmethod
    def save_any_names_but_these(*names: str) -> Any:
        """Save only named values, but not those named with one of names."""
        return _Names(_names("save_any_names_but_these", names), False)

    @staticmethod
    def save_anything_except_these_names(*names: str) -> Any:
        """Save everything, as JAX 0.10.2's (whose policy of this name saves everything: a value not saved under
        its name is saved as its producer's output)."""
        _names("save_anything_except_these_names", names)
        return everything_saveable

    @staticmethod
    def save_from_both_policies(policy_1: Any, policy_2: Any) -> Any:
        """Save what either policy saves."""
        return _AnyOf((policy_1, policy_2))

    @staticmethod
    def offload_dot_with_no_batch_dims(offload_src: Any, offload_dst: Any) -> Any:
        """dots_with_no_batch_dims_saveable, the saved values offloaded from offload_src to offload_dst memory on
        an accelerator; on the CPU they are saved."""
        return _DotsSaveable(True)

    @staticmethod
    def save_and_offload_only_these_names(*, names_which_can_be_saved: Sequence[str],
                                          names_which_can_be_offloaded: Sequence[str], offload_src: Any,
                                          offload_dst: Any) -> Any:
        """save_only_these_names of both lists (the second offloaded on an accelerator; on the CPU, saved); the
        lists may not share a name (a ValueError, as JAX's)."""
        saved = _names("save_and_offload_only_these_names", names_which_can_be_saved)
        offloaded = _names("save_and_offload_only_these_names", names_which_can_be_offloaded)
        if saved & offloaded:
            raise ValueError("checkpoint_policies.save_and_offload_only_these_names: the names should be exclusive "
                             f"and should not intersect; both lists have {sorted(saved & offloaded)}")
        return _Names(saved | offloaded, True)


def checkpoint(fun: Callable[..., Any], *, prevent_cse: bool = True, policy: Callable[..., bool] | None = None,
               static_argnums: Sequence[int] = ()) -> Callable[..., Any]:
    """fun whose forward values reverse mode recomputes instead of storing (like jax.checkpoint / jax.remat), but
    for those policy(prim, *avals, **params) saves (checkpoint_policies; None: nothing_saveable). prevent_cse is
    accepted for JAX compatibility: the recomputation is always kept apart from the forward pass (an optimization
    barrier), which is what it asks for."""
    if policy is not None and not callable(policy):
        raise TypeError(f"checkpoint: policy must be a callable (ember.checkpoint_policies), got {policy!r}")
    policy = None if policy is nothing_saveable else policy
    name = f"checkpoint({getattr(fun, '__name__', 'function')})"

    @functools.wraps(fun)
    def wrapped(*args: Any) -> Any:
        if not is_tracing():
            return fun(*args)
        _, diff, merge = _split_static(name, tuple(static_argnums), args)
        closed, leaves, _ = _closed(name, fun, merge, diff, traced_consts=True)
        outs = remat_p.bind(*closed.consts, *leaves, body_ir=closed.ir, policy=policy)
        return closed.out_tree.unflatten(outs)
    return wrapped


remat = checkpoint
