"""The one interpreter loop over an IR, which every transformation reuses.

Each equation's primitive is bound to the values of its inputs: outside staging that executes it eagerly (the IR
evaluator); while a function is staged out it records the equation into the enclosing trace (inlining). The
transformations (reverse mode, forward mode, batching) run their rules inside a staging and call this loop, or
walk the equations themselves with an Env."""
from __future__ import annotations

from typing import Any, Sequence

from ember._core.ir import IR, Atom, Literal


class Env(dict):
    """The values of an IR's variables during evaluation; literals read as themselves."""

    def read(self, atom: Atom) -> Any:
        return atom if isinstance(atom, Literal) else self[atom]


def eval_ir_env(ir: IR, args: Sequence[Any], consts: Sequence[Any] | None = None) -> Env:
    """Evaluate an IR on args, returning the value of every variable (see the module docstring)."""
    env = Env(zip(ir.const_vars, ir.consts if consts is None else consts))
    env.update(zip(ir.in_vars, args))
    for eqn in ir.eqns:
        outs = eqn.prim.bind(*[env.read(a) for a in eqn.inputs], **eqn.params)
        env.update(zip(eqn.outputs, outs if eqn.prim.multiple_results else [outs]))
    return env


def eval_ir(ir: IR, args: Sequence[Any], consts: Sequence[Any] | None = None) -> list[Any]:
    """The outputs of an IR evaluated on args (see eval_ir_env)."""
    env = eval_ir_env(ir, args, consts)
    return [env.read(atom) for atom in ir.outs]
