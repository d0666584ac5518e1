"""State discharge: an IR that reads and writes mutable array references (ember._prims.refs) turned into one that
threads their values, IR -> IR, as JAX's state discharge.

`discharge_ir(ir)` is the pure IR: each reference input (an input of type Ref, or a constant that is an
ember.Ref or a Ref of an enclosing staging) becomes an input holding its value, each reference made inside
(new_ref) becomes the value it holds, a read (ref_get) is that value, a write (ref_swap) replaces it, freeze gives
it; the final value of each reference input is an extra output. A higher-order equation whose operands include
references discharges through its primitive's "discharge" hook (a loop makes them carries, a cond extra operands
and results); one whose sub-IRs only use references of their own has those sub-IRs discharged.

Lowering and compiling use the pure IR (ember._runtime.refs reads the references before a call and writes their
final values back after). The transformations (grad, jvp, vjp, vmap) start from `hoisted(ir)`: the same program
reading each reference input when first used and writing it once at the end, pure in between, so that their rules
see only those boundary reads and writes (ember._prims.refs). The one exception is an equation of a primitive in
KEEPS_REFS (custom_vjp_call), which keeps taking the references themselves (its bwd may write them in the backward
pass): the hoisted program writes their pending values back before it and reads them again after."""
from __future__ import annotations

import weakref
from typing import Any, NamedTuple, Sequence

from ember._core import IR, Env, Eqn, Var, stage_flat
from ember._core.eval import bind_outputs, eval_ir
from ember._core.ir import sub_irs
from ember._core.primitive import TRACE_STATE, enter_source, interpreter_base
from ember._core.refs import RefAval
from ember._prims.refs import REF_PRIMITIVES, freeze_p, new_ref_p, ref_get_p, ref_swap_p
from ember._transforms.cache import TransformCache


_has_refs: "weakref.WeakKeyDictionary[IR, bool]" = weakref.WeakKeyDictionary()


def has_refs(ir: IR) -> bool:
    """Whether ir uses references: a reference input or constant, or an equation (in it or in a sub-IR) on one
    (remembered per IR: IRs are immutable once built)."""
    found = _has_refs.get(ir)
    if found is None:
        found = _has_refs[ir] = (any(type(v.aval) is RefAval for v in ir.const_vars)
                                 or any(type(v.aval) is RefAval for v in ir.in_vars)
                                 or any(e.prim in REF_PRIMITIVES or any(has_refs(sub) for sub in sub_irs(e.params))
                                        for e in ir.eqns))
    return found


class Discharged(NamedTuple):
    """A discharged IR (see discharge_ir) and, per reference it took (constants first, then inputs, in order),
    whether the program writes it (its final value may differ from its initial one)."""
    ir: IR
    written: tuple[bool, ...]


def ref_positions(ir: IR) -> tuple[list[int], list[int]]:
    """The positions of ir's reference constants and of its reference inputs."""
    return ([i for i, v in enumerate(ir.const_vars) if type(v.aval) is RefAval],
            [i for i, v in enumerate(ir.in_vars) if type(v.aval) is RefAval])


def discharge_ir(ir: IR) -> Discharged:
    """ir without references (see the module docstring): inputs (the values of its reference constants...,
    its inputs with each reference replaced by its value...) -> (its outputs..., the final value of each
    reference constant and reference input...). Its other constants stay constants. Computed once per IR."""
    return DISCHARGED.get(ir, (), lambda: _discharge(ir))


def _split_refs(ir: IR, consts: Sequence[Any], args: Sequence[Any]) -> tuple[Env, dict[Var, Any]]:
    """The values of ir's constants and inputs: those of its plain variables (an Env), and those of its reference
    variables (constants first, then inputs, in order)."""
    env, refs = Env(), {}
    for v, x in list(zip(ir.const_vars, consts)) + list(zip(ir.in_vars, args)):
        if type(v.aval) is RefAval:
            refs[v] = x
        else:
            env[v] = x
    return env, refs


def _discharge(ir: IR) -> Discharged:
    const_refs, _ = ref_positions(ir)
    written: list[bool] = []

    def fn(*args: Any) -> list[Any]:
        values = iter(args[:len(const_refs)])
        consts = [next(values) if type(v.aval) is RefAval else c for v, c in zip(ir.const_vars, ir.consts)]
        env, state = _split_refs(ir, consts, args[len(const_refs):])
        initial = dict(state)
        run_discharged(ir.eqns, env, state)
        written.extend(state[v] is not x for v, x in initial.items())
        return [env.read(a) for a in ir.outs] + [state[v] for v in initial]

    in_avals = [ir.const_vars[i].aval.inner for i in const_refs] + [
        v.aval.inner if type(v.aval) is RefAval else v.aval for v in ir.in_vars]
    return Discharged(stage_flat(fn, in_avals), tuple(written))


def run_discharged(eqns: Sequence[Eqn], env: Env, state: dict[Var, Any], boundary: "_Boundary | None" = None
                   ) -> None:
    """Emit eqns into the current staging with their references discharged: env holds the values of the plain
    variables, state the current value of each reference variable (both updated as the equations go). boundary
    (while hoisting, see hoisted): the reference objects of the references the program takes, for the equations
    that keep taking them (KEEPS_REFS: a custom_vjp function's rules may write them in the backward pass)."""
    tstate, outer, scope = TRACE_STATE, TRACE_STATE.source, TRACE_STATE.scope
    base, inherited = interpreter_base(), outer and outer._replace(scope=())
    try:
        for eqn in eqns:
            enter_source(eqn.source or inherited, base)
            prim = eqn.prim
            if prim is new_ref_p:
                state[eqn.outputs[0]] = env.read(eqn.inputs[0])
            elif prim is ref_get_p or prim is freeze_p:
                env[eqn.outputs[0]] = state[eqn.inputs[0]]
            elif prim is ref_swap_p:
                ref, value = eqn.inputs
                env[eqn.outputs[0]] = state[ref]
                state[ref] = env.read(value)
            elif any(isinstance(a, Var) and type(a.aval) is RefAval for a in eqn.inputs):
                if boundary is not None and prim in KEEPS_REFS:
                    boundary.call(eqn, env, state)
                else:
                    _discharge_eqn(eqn, env, state)
            elif any(has_refs(sub) for sub in sub_irs(eqn.params)):
                params = {k: _pure_param(v) for k, v in eqn.params.items()}
                outs = prim.bind(*[env.read(a) for a in eqn.inputs], **params)
                env.update(zip(eqn.outputs, outs if prim.multiple_results else [outs]))
            else:
                env.update(zip(eqn.outputs, bind_outputs(eqn, [env.read(a) for a in eqn.inputs])))
    finally:
        tstate.source, tstate.scope = outer, scope


KEEPS_REFS: set[Any] = set()  # primitives that keep their reference operands through hoisting (custom_vjp_call)


class _Boundary:
    """While hoisting: the reference objects of the references a program takes (its inputs and constants), which
    value each held when last read or written (synced), and the reads done lazily, at first use."""

    def __init__(self, refs: dict[Var, Any]):
        self.refs = refs
        self.synced: dict[Var, Any] = {}

    def read(self, var: Var) -> Any:
        value = self.synced[var] = ref_get_p.bind(self.refs[var])
        return value

    def flush(self, state: dict[Var, Any], var: Var) -> None:
        """Write var's current value back into its reference, if it changed since it was last read or written."""
        if var in state and state[var] is not self.synced.get(var):
            ref_swap_p.bind(self.refs[var], state[var])
            self.synced[var] = state[var]

    def call(self, eqn: Eqn, env: Env, state: dict[Var, Any]) -> None:
        """An equation that takes the references themselves: their values written back before it, read again when
        next used after it."""
        refs = [a for a in eqn.inputs if isinstance(a, Var) and type(a.aval) is RefAval]
        for var in refs:
            if var not in self.refs:
                raise NotImplementedError(
                    f"{eqn.prim.name}: a Ref made inside a transformed function (ember.new_ref) cannot be passed to "
                    "it; pass a Ref the function takes as an argument or closes over")
            self.flush(state, var)
        env.update(zip(eqn.outputs, bind_outputs(eqn, [self.refs[a] if a in refs else env.read(a)
                                                         for a in eqn.inputs])))
        for var in refs:
            state.pop(var, None)
            self.synced.pop(var, None)


class _LazyState(dict):
    """The current values of the boundary references, each read when first used."""

    def __init__(self, boundary: _Boundary):
        super().__init__()
        self.boundary = boundary

    def __missing__(self, var: Var) -> Any:
        if var not in self.boundary.refs:
            raise KeyError(var)
        value = self[var] = self.boundary.read(var)
        return value


def _pure_param(value: Any) -> Any:
    """A param with its sub-IRs (which use only references they make) discharged: their signature is unchanged."""
    if isinstance(value, IR):
        return discharge_ir(value).ir if has_refs(value) else value
    if isinstance(value, tuple) and any(isinstance(v, IR) for v in value):
        return tuple(_pure_param(v) for v in value)
    return value


def _discharge_eqn(eqn: Eqn, env: Env, state: dict[Var, Any]) -> None:
    """A higher-order equation with reference operands, through its primitive's discharge hook: it gets the
    operands (each reference replaced by its current value) and, per operand, the index of its reference among
    the distinct ones (None for a plain operand); it returns the outputs and each reference's final value."""
    hook = eqn.prim.rules.get("discharge")
    if hook is None:
        raise TypeError(f"{eqn.prim.name}: mutable array references (ember.Ref) cannot be passed to it (an operand "
                        "is a Ref); read the value first (ref[...])")
    distinct: list[Var] = []
    ids: list[int | None] = []
    for a in eqn.inputs:
        if isinstance(a, Var) and type(a.aval) is RefAval:
            if a not in distinct:
                distinct.append(a)
            ids.append(distinct.index(a))
        else:
            ids.append(None)
    ins = [state[a] if i is not None else env.read(a) for a, i in zip(eqn.inputs, ids)]
    outs, finals = hook(ins, ids, **eqn.params)
    env.update(zip(eqn.outputs, outs))
    state.update(zip(distinct, finals))


def body_finals(ir: IR, ins: Sequence[Any], ids: Sequence[int | None]) -> tuple[list[Any], dict[int, Any]]:
    """Evaluate a sub-IR whose inputs include references (no reference constants), in the current staging, on ins
    (each reference input given its value; ids: per input, its reference's index among the equation's distinct
    references, or None): (its outputs, the final value of each reference it took, by index). Inputs that are one
    reference (a cond operand every branch closed over) are one in the body too. The helper of the discharge
    hooks."""
    first: dict[int, Var] = {}
    renamed: dict[Var, Var] = {}
    for v, i in zip(ir.in_vars, ids):
        if i is not None:
            renamed[v] = first.setdefault(i, v)
    if any(v is not w for v, w in renamed.items()):  # (one reference under two names: make them one)
        eqns = [Eqn(e.prim, [renamed.get(a, a) if isinstance(a, Var) else a for a in e.inputs], e.outputs, e.params,
                    e.source) for e in ir.eqns]
        ir = IR(ir.const_vars, ir.consts, ir.in_vars, eqns, ir.outs)
    outs = eval_ir(discharge_ir(ir).ir, list(ins))
    n = len(ir.outs)
    taken = [(v, i) for v, i in zip(ir.in_vars, ids) if i is not None]  # (the finals come in this order)
    return outs[:n], {i: final for (v, i), final in zip(taken, outs[n:]) if first[i] is v}


def closed_body(fn: Any, in_avals: Sequence[Any], label: str) -> tuple[IR, list[Any]]:
    """fn staged into a closed sub-IR at in_avals, as a loop body or branch is: (IR taking its constants as
    leading inputs, those constants). The helper of the discharge hooks, which build new bodies."""
    ir = stage_flat(fn, list(in_avals), label=label)
    return IR([], [], list(ir.const_vars) + list(ir.in_vars), ir.eqns, ir.outs), list(ir.consts)


def ref_values(ins: Sequence[Any], refs: Sequence[int | None]) -> list[Any]:
    """The current value of each distinct reference of a discharge hook's operands (see _discharge_eqn)."""
    values: dict[int, Any] = {}
    for x, i in zip(ins, refs):
        if i is not None:
            values.setdefault(i, x)
    return [values[i] for i in range(len(values))]


def with_refs(ids: Sequence[int | None], plain: Sequence[Any], values: Sequence[Any]) -> list[Any]:
    """Operands rebuilt from plain ones and reference values: position j gets values[ids[j]] where ids[j] is not
    None, else the next plain one."""
    rest = iter(plain)
    return [values[i] if i is not None else next(rest) for i in ids]


def updated(values: Sequence[Any], finals: dict[int, Any]) -> list[Any]:
    """The references' values (by index) after a body whose final values are finals."""
    new = list(values)
    for i, final in finals.items():
        new[i] = final
    return new


def hoisted(ir: IR) -> IR:
    """ir as the transformations take it (see the module docstring): each reference input and constant read at
    the start, the discharged program, each written reference written at the end. ir itself when it uses no
    references. Computed once per IR."""
    if not has_refs(ir):
        return ir
    return HOISTED.get(ir, (), lambda: _hoist(ir))


def _hoist(ir: IR) -> IR:
    def fn(*args: Any) -> list[Any]:
        env, refs = _split_refs(ir, ir.consts, args)
        boundary = _Boundary(refs)
        state = _LazyState(boundary)
        run_discharged(ir.eqns, env, state, boundary)
        for var in refs:
            boundary.flush(state, var)
        return [env.read(a) for a in ir.outs]

    hoist = stage_flat(fn, ir.in_avals)
    return IR(hoist.const_vars, hoist.consts, hoist.in_vars, hoist.eqns, hoist.outs, ir.out_tree)


def pure_for_lowering(ir: IR, api: str) -> IR:
    """ir for an API that lowers it as it is (jit(f).lower, export): its own references discharged (the signature
    stays); references it takes or closes over are refused (their values are read and written by ember's calls,
    which such a program would not do)."""
    if not has_refs(ir):
        return ir
    const_refs, in_refs = ref_positions(ir)
    if const_refs or in_refs:
        raise NotImplementedError(f"{api}: the function takes or closes over a mutable array reference (ember.Ref), "
                                  "which ahead-of-time lowering and export do not support; call the jitted function "
                                  "itself, or pass the Ref's value")
    pure = discharge_ir(ir).ir
    return IR(pure.const_vars, pure.consts, pure.in_vars, pure.eqns, pure.outs, ir.out_tree)


DISCHARGED = TransformCache("discharge")  # (ir, ()) -> Discharged
HOISTED = TransformCache("hoist")  # (ir, ()) -> the IR the transformations take


__all__: list[str] = []
