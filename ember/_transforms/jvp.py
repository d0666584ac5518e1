"""Forward mode as an IR -> IR transformation: each equation's JVP rule maps (primals, tangents) to (outputs,
output tangents), with None standing for a symbolic zero tangent, so zeros cost nothing until an output needs one.
Like the backward pass, it runs while a new IR is staged out: the result is an ordinary IR."""
from __future__ import annotations

from typing import Any, Sequence

from ember._core import IR, Env, Var, stage_flat
from ember._core import dtypes as dt
from ember._prims.shape import zeros
from ember._transforms.passes import simplify


def jvp_pass(ir: IR, primals: Sequence[Any], tangents: Sequence[Any | None]) -> tuple[list[Any], list[Any | None]]:
    """Evaluate ir on primals in the current context, pushing tangents (None: zero) forward. Returns (outputs,
    output tangents), a tangent None where it is zero."""
    env = Env(zip(ir.const_vars, ir.consts))
    env.update(zip(ir.in_vars, primals))
    tangent_of: dict[Var, Any] = {v: t for v, t in zip(ir.in_vars, tangents) if t is not None}
    for eqn in ir.eqns:
        ins = [env.read(a) for a in eqn.inputs]
        tins = [tangent_of.get(a) if isinstance(a, Var) else None for a in eqn.inputs]
        if all(t is None for t in tins) or not eqn.prim.differentiable:
            outs = eqn.prim.bind(*ins, **eqn.params)
            env.update(zip(eqn.outputs, outs if eqn.prim.multiple_results else [outs]))
            continue
        outs, touts = eqn.prim.rule("jvp", "forward-mode differentiation")(ins, tins, **eqn.params)
        env.update(zip(eqn.outputs, outs))
        tangent_of.update((v, t) for v, t in zip(eqn.outputs, touts) if t is not None)
    return ([env.read(a) for a in ir.outs],
            [tangent_of.get(a) if isinstance(a, Var) else None for a in ir.outs])


def jvp_ir(ir: IR, with_tangent: Sequence[bool] | None = None) -> IR:
    """IR (inputs..., tangents of the inputs marked in with_tangent...) -> (outputs..., output tangents...).

    By default the floating-point inputs get tangents. Every output gets a tangent (zeros where it does not
    depend on a tangent input, or is not a float)."""
    with_tangent = [dt.is_float(a.dtype) for a in ir.in_avals] if with_tangent is None else list(with_tangent)
    n = len(ir.in_vars)

    def fn(*args: Any) -> list[Any]:
        given = iter(args[n:])
        tangents = [next(given) if w else None for w in with_tangent]
        outs, touts = jvp_pass(ir, args[:n], tangents)
        return outs + [zeros(v.aval.strip_weak_type()) if t is None else t for v, t in zip(ir.outs, touts)]

    tangent_avals = [a.strip_weak_type() for a, w in zip(ir.in_avals, with_tangent) if w]
    return simplify(stage_flat(fn, ir.in_avals + tangent_avals))
