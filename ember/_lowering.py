"""Lowering: IR -> a StableHLO MLIR text module whose entry function is `main`."""
from __future__ import annotations

from ember._ir import IR, Atom, Literal, Var
from ember._mlir import FunctionEmitter, module_text


class LoweringError(NotImplementedError):
    pass


def lower(ir: IR) -> str:
    """The module for ir: consts come first among main's arguments, then the inputs."""
    ctx = FunctionEmitter()
    env: dict[Var, str] = {}
    params = list(ir.const_vars) + list(ir.in_vars)
    arg_names = [ctx.declare(f"%arg{i}", v.aval) for i, v in enumerate(params)]
    env.update(zip(params, arg_names))

    def read(atom: Atom) -> str:
        if isinstance(atom, Literal):
            return ctx.constant(atom.value, atom.aval)
        return env[atom]

    for eqn in ir.eqns:
        rule = eqn.prim.lowering
        if rule is None:
            raise LoweringError(f"primitive {eqn.prim.name} has no lowering rule")
        operands = [read(a) for a in eqn.inputs]
        outs = rule(ctx, operands, [a.aval for a in eqn.inputs], [v.aval for v in eqn.outputs], **eqn.params)
        env.update(zip(eqn.outputs, outs))
    out_names = [read(a) for a in ir.outs]
    return module_text([v.aval for v in params], ir.out_avals, ctx, arg_names, out_names)
