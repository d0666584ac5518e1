"""jax.interpreters.partial_eval on ember: partial evaluation of a flattened function (linear_util's WrappedFun) on
arguments some of which are known (values) and some unknown (only their types), as flax's lazy_init and nn.scan
use it. The function is staged with the known values in place, concretely (ember's staging computes every value
it can, as autodiff outside jit does): what depends on known values alone is computed then, and the outputs whose
value is known come back as known PartialVals; the others as unknown ones, typed.

Dead-code elimination of a jaxpr as JAX's (dce_jaxpr, dce_jaxpr_consts: ember's DCE pass, which also shrinks
loops, branches and jitted calls to what is used), and its rule table: `dce_rules[prim] = rule`, rule(used_outputs,
eqn) -> (used_inputs, the equation restricted to the used outputs, or None), for primitives defined with
jax.extend.core.Primitive; ember's DCE consults it wherever it runs. dce_jaxpr_call_rule and
dce_jaxpr_closed_call_rule are the rules for a call primitive whose `call_jaxpr` is an open Jaxpr (a
CallPrimitive's) or a ClosedJaxpr."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember._core import IR, Eqn, ShapedArray, Tracer, Var, aval_of, stage_flat
from ember._core.ir import Jaxpr
from ember._core.primitive import has_effects
from ember._transforms.passes import dce, dce_outputs
from ember.extend._protocol import dce_rules as dce_rules
from ember.extend.linear_util import DebugInfo, WrappedFun


class PartialVal(tuple):
    """(aval, None) for an unknown value, (None, value) for a known one (JAX's PartialVal)."""

    def __new__(cls, xs: tuple[Any, Any]) -> "PartialVal":
        return tuple.__new__(cls, xs)

    @classmethod
    def known(cls, const: Any) -> "PartialVal":
        return PartialVal((None, const))

    @classmethod
    def unknown(cls, aval: ShapedArray) -> "PartialVal":
        return PartialVal((aval, None))

    def is_known(self) -> bool:
        return self[0] is None

    def get_known(self) -> Any:
        return self[1] if self[0] is None else None

    def get_aval(self) -> ShapedArray:
        return aval_of(self[1]) if self[0] is None else self[0]


def trace_to_jaxpr_nounits(fun: WrappedFun, pvals: Sequence[PartialVal], instantiate: bool | Sequence[bool] = False
                           ) -> tuple[Any, list[PartialVal], list[Any]]:
    """(the jaxpr of fun on its unknown arguments, a PartialVal per output, its constants): an output is known
    (its value computed now) where it depends on known arguments alone, unless instantiate asks for it unknown."""
    pvals = [PartialVal(p) for p in pvals]
    unknown_avals = [p[0] for p in pvals if not p.is_known()]
    known_outs: list[Any] = []

    def staged(*unknowns: Any) -> list[Any]:
        rest = iter(unknowns)
        outs = list(fun.call_wrapped(*[p[1] if p.is_known() else next(rest) for p in pvals]))
        known_outs[:] = [o.value if isinstance(o, Tracer) else o for o in outs]
        return outs

    ir: IR = stage_flat(staged, unknown_avals, [None] * len(unknown_avals), label="partial_eval")
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * len(ir.outs)
    out_pvals = [PartialVal.unknown(v.aval) if inst or value is None else PartialVal.known(value)
                 for v, value, inst in zip(ir.outs, known_outs, instantiate)]
    return ir.jaxpr, out_pvals, list(ir.consts)


def trace_to_jaxpr_dynamic(fun: WrappedFun, in_avals: Sequence[ShapedArray], *unused: Any, **unused_kw: Any
                           ) -> tuple[Any, list[ShapedArray], list[Any]]:
    """(the jaxpr of fun at in_avals, its output types, its constants)."""
    ir = stage_flat(lambda *xs: list(fun.call_wrapped(*xs)), list(in_avals), label="trace_to_jaxpr_dynamic")
    return ir.jaxpr, ir.out_avals, list(ir.consts)


def _flags(name: str, what: str, flags: bool | Sequence[bool], count: int) -> list[bool]:
    """A bool per item (one bool for all, or a sequence of count), as dce_jaxpr's used_outputs and instantiate."""
    if isinstance(flags, (bool, np.bool_)):
        return [bool(flags)] * count
    flags = [bool(f) for f in flags]
    if len(flags) != count:
        raise ValueError(f"{name}: {what} has {len(flags)} entries for {count} items")
    return flags


def _filtered_debug_info(debug_info: Any, used_inputs: Sequence[bool], used_outputs: Sequence[bool]) -> Any:
    if not isinstance(debug_info, DebugInfo):
        return debug_info
    return debug_info._replace(arg_names=debug_info.filter_arg_names(used_inputs),
                               result_paths=debug_info.filter_result_paths(used_outputs))


def dce_jaxpr(jaxpr: Jaxpr, used_outputs: bool | Sequence[bool], instantiate: bool | Sequence[bool] = False
              ) -> tuple[Jaxpr, list[bool]]:
    """(jaxpr keeping only the outputs marked in used_outputs, the equations they need and the inputs those read,
    which inputs it keeps): ember's DCE (effectful equations stay; loops, branches and calls shrink to what is
    used; dce_rules applied). An input marked in instantiate is kept even if unread. The constvars stay."""
    if not isinstance(jaxpr, Jaxpr):
        raise TypeError(f"dce_jaxpr: expected an open Jaxpr (closed_jaxpr.jaxpr), got {type(jaxpr).__name__}")
    used_outputs = _flags("dce_jaxpr", "used_outputs", used_outputs, len(jaxpr.outvars))
    instantiate = _flags("dce_jaxpr", "instantiate", instantiate, len(jaxpr.invars))
    kept_outs = [a for a, u in zip(jaxpr.outvars, used_outputs) if u]
    pruned = dce(IR(jaxpr.constvars, [None] * len(jaxpr.constvars), jaxpr.invars, jaxpr.eqns, kept_outs))
    read = {a for eqn in pruned.eqns for a in eqn.inputs if isinstance(a, Var)}
    read.update(a for a in kept_outs if isinstance(a, Var))
    used_inputs = [v in read or inst for v, inst in zip(jaxpr.invars, instantiate)]
    return Jaxpr(jaxpr.constvars, [v for v, u in zip(jaxpr.invars, used_inputs) if u], kept_outs, pruned.eqns,
                 debug_info=_filtered_debug_info(jaxpr.debug_info, used_inputs, used_outputs)), used_inputs


def dce_jaxpr_consts(jaxpr: Jaxpr, used_outputs: bool | Sequence[bool], instantiate: bool | Sequence[bool] = False
                     ) -> tuple[Jaxpr, list[bool], list[bool]]:
    """dce_jaxpr that also drops the constvars no kept equation reads: (the jaxpr, which constvars it keeps, which
    inputs). instantiate covers the constvars, then the inputs (one bool: all of them)."""
    if not isinstance(jaxpr, Jaxpr):
        raise TypeError(f"dce_jaxpr_consts: expected an open Jaxpr, got {type(jaxpr).__name__}")
    n_consts = len(jaxpr.constvars)
    used_outputs = _flags("dce_jaxpr_consts", "used_outputs", used_outputs, len(jaxpr.outvars))
    as_inputs = Jaxpr([], [*jaxpr.constvars, *jaxpr.invars], jaxpr.outvars, jaxpr.eqns)
    pruned, used = dce_jaxpr(as_inputs, used_outputs, instantiate)
    used_consts, used_inputs = used[:n_consts], used[n_consts:]
    kept_consts = sum(used_consts)
    return (Jaxpr(pruned.invars[:kept_consts], pruned.invars[kept_consts:], pruned.outvars, pruned.eqns,
                  debug_info=_filtered_debug_info(jaxpr.debug_info, used_inputs, used_outputs)),
            used_consts, used_inputs)


def _restricted(eqn: Eqn, used_inputs: Sequence[bool], used_outputs: Sequence[bool], call_jaxpr: Any) -> Eqn:
    return Eqn(eqn.prim, [a for a, u in zip(eqn.inputs, used_inputs) if u],
               [v for v, u in zip(eqn.outputs, used_outputs) if u], {**eqn.params, "call_jaxpr": call_jaxpr},
               eqn.source)


def dce_jaxpr_call_rule(used_outputs: list[bool], eqn: Eqn) -> tuple[list[bool], Eqn | None]:
    """The DCE rule of a call primitive whose call_jaxpr is an open Jaxpr (a CallPrimitive's): its jaxpr and
    operands restricted to the used outputs (the equation dropped when nothing of it is used)."""
    if not any(used_outputs) and not has_effects(eqn.prim, eqn.params):
        return [False] * len(eqn.inputs), None
    new_jaxpr, used_inputs = dce_jaxpr(eqn.params["call_jaxpr"], used_outputs)
    if not any(used_inputs) and not any(used_outputs) and not has_effects(eqn.prim, eqn.params):
        return used_inputs, None
    return used_inputs, _restricted(eqn, used_inputs, used_outputs, new_jaxpr)


def dce_jaxpr_closed_call_rule(used_outputs: list[bool], eqn: Eqn) -> tuple[list[bool], Eqn | None]:
    """dce_jaxpr_call_rule for a call_jaxpr that is a ClosedJaxpr (an IR with its constants)."""
    if not any(used_outputs) and not has_effects(eqn.prim, eqn.params):
        return [False] * len(eqn.inputs), None
    pruned, used_inputs = dce_outputs(eqn.params["call_jaxpr"], used_outputs)
    closed = IR(pruned.const_vars, pruned.consts, [v for v, u in zip(pruned.in_vars, used_inputs) if u],
                pruned.eqns, pruned.outs)
    return used_inputs, _restricted(eqn, used_inputs, used_outputs, closed)


__all__ = ["PartialVal", "dce_jaxpr", "dce_jaxpr_call_rule", "dce_jaxpr_closed_call_rule", "dce_jaxpr_consts",
           "dce_rules", "trace_to_jaxpr_dynamic", "trace_to_jaxpr_nounits"]
