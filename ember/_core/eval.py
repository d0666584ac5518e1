"""The one interpreter loop over an IR, which every transformation reuses.

Each equation's primitive is bound to the values of its inputs: outside staging that executes it eagerly (the IR
evaluator); while a function is staged out it records the equation into the enclosing trace (inlining). The
transformations (reverse mode, forward mode, batching) run their rules inside a staging and call this loop, or
walk the equations themselves with an Env."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ember._core.ir import IR, Atom, Eqn, Literal, Var
from ember._core.primitive import TRACE_STATE, enter_source, interpreter_base


class Env(dict):
    """The values of an IR's variables during evaluation; literals read as themselves."""

    def read(self, atom: Atom) -> Any:
        return atom if isinstance(atom, Literal) else self[atom]


def eval_ir_env(ir: IR, args: Sequence[Any], consts: Sequence[Any] | None = None) -> Env:
    """Evaluate an IR on args, returning the value of every variable (see the module docstring)."""
    env = Env(zip(ir.const_vars, ir.consts if consts is None else consts))
    env.update(zip(ir.in_vars, args))
    state, outer, scope = TRACE_STATE, TRACE_STATE.source, TRACE_STATE.scope
    base, inherited = interpreter_base(), outer and outer._replace(scope=())
    try:
        for eqn in ir.eqns:  # what each equation binds is attributed to its user line, inside its scopes
            enter_source(eqn.source or inherited, base)
            env.update(zip(eqn.outputs, bind_outputs(eqn, [env.read(a) for a in eqn.inputs])))
    finally:
        state.source, state.scope = outer, scope
    return env


def eval_ir(ir: IR, args: Sequence[Any], consts: Sequence[Any] | None = None) -> list[Any]:
    """The outputs of an IR evaluated on args (see eval_ir_env)."""
    env = eval_ir_env(ir, args, consts)
    return [env.read(atom) for atom in ir.outs]


def bind_outputs(eqn: Eqn, ins: Sequence[Any]) -> list[Any]:
    """Apply an equation's primitive to input values; always a list of outputs."""
    outs = eqn.prim.bind(*ins, **eqn.params)
    return outs if eqn.prim.multiple_results else [outs]


Rule = Callable[[Eqn, list[Any], list[Any]], tuple[Sequence[Any], Sequence[Any]]]


def eval_ir_annotated(ir: IR, args: Sequence[Any], notes: Sequence[Any], rule: Rule,
                      always: Callable[[Eqn], bool] | None = None) -> tuple[list[Any], list[Any]]:
    """The evaluator loop of the transformations that carry a note per value (a tangent in forward mode, a batch
    dimension in batching), None meaning "nothing to carry" (a zero tangent, an unbatched value). Equations whose
    inputs carry no note are applied as they are, unless always(eqn) says otherwise (a collective over the axis
    being batched); the others go to rule(eqn, inputs, input notes) -> (outputs, output notes). Returns the
    outputs of ir and their notes."""
    env = Env(zip(ir.const_vars, ir.consts))
    env.update(zip(ir.in_vars, args))
    note_of: dict[Var, Any] = {v: n for v, n in zip(ir.in_vars, notes) if n is not None}
    state, outer, scope = TRACE_STATE, TRACE_STATE.source, TRACE_STATE.scope
    base, inherited = interpreter_base(), outer and outer._replace(scope=())
    try:
        for eqn in ir.eqns:
            enter_source(eqn.source or inherited, base)
            ins = [env.read(a) for a in eqn.inputs]
            in_notes = [note_of.get(a) if isinstance(a, Var) else None for a in eqn.inputs]
            if all(n is None for n in in_notes) and not (always is not None and always(eqn)):
                env.update(zip(eqn.outputs, bind_outputs(eqn, ins)))
                continue
            outs, out_notes = rule(eqn, ins, in_notes)
            env.update(zip(eqn.outputs, outs))
            note_of.update((v, n) for v, n in zip(eqn.outputs, out_notes) if n is not None)
    finally:
        state.source, state.scope = outer, scope
    return [env.read(a) for a in ir.outs], [note_of.get(a) if isinstance(a, Var) else None for a in ir.outs]
