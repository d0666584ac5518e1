"""Reverse-mode differentiation as an IR -> IR transformation (the backward pass).

The backward pass runs while a new IR is being staged out: it re-emits the forward equations, then walks them in
reverse, calling each primitive's VJP rule. The rules are written with ordinary primitives, so the gradient IR is
itself an ordinary IR: it can be printed, compiled, inlined or differentiated again."""
from __future__ import annotations

from typing import Any, Sequence

from ember._core import IR, TRACE_STATE, Env, Eqn, ShapedArray, Var, aval_of, scalar_literal, stage_flat
from ember._core.eval import bind_outputs
from ember._core import dtypes as dt
from ember._prims.elementwise import add
from ember._prims.shape import convert_element_type, full, zeros
from ember._core.profile import profiled
from ember._core.refs import RefAval
from ember._prims.refs import differentiated_write_error, ref_swap_p
from ember._prims.sharding import sharding_constraint_p
from ember._transforms.cache import TransformCache
from ember._transforms.discharge import has_refs, hoisted
from ember._transforms.passes import simplify


def is_differentiable_aval(aval: ShapedArray) -> bool:
    return dt.is_inexact(aval.dtype)


def active_vars(ir: IR, wrt: Sequence[bool], precise: bool = False) -> set[Var]:
    """Vars whose value depends differentiably on the inputs marked in wrt. Every differentiable output of an
    equation with an active input is active, except, when precise, those a primitive's "depends" hook (loops,
    cond) shows not to depend on its active inputs."""
    active = {v for v, w in zip(ir.in_vars, wrt) if w and is_differentiable_aval(v.aval)}
    for eqn in ir.eqns:
        if not eqn.prim.differentiable:
            continue
        marked = [isinstance(a, Var) and a in active for a in eqn.inputs]
        if not any(marked):
            continue
        hook = eqn.prim.rules.get("depends") if precise else None
        if hook is None:
            active.update(v for v in eqn.outputs if is_differentiable_aval(v.aval))
        else:
            active.update(v for v, on in zip(eqn.outputs, hook(marked, **eqn.params))
                          if on and is_differentiable_aval(v.aval))
    return active


def active_outputs(ir: IR, wrt: Sequence[bool]) -> list[bool]:
    """For each output of ir: whether it depends differentiably on the inputs marked in wrt (precisely: through
    loops and branches, per carry and per result). The helper of the "depends" hooks."""
    active = active_vars(ir, wrt, precise=True)
    return [isinstance(a, Var) and a in active for a in ir.outs]


def check_ref_writes(ir: IR, wrt: Sequence[bool]) -> None:
    """Forward mode's check of a hoisted program (ember._transforms.discharge.hoisted) that writes Refs it takes:
    the values written must not depend differentiably on the inputs marked in wrt (as JAX refuses; reverse mode
    checks in ref_swap's vjp_split hook)."""
    writes = [e for e in ir.eqns if e.prim is ref_swap_p] if has_refs(ir) else []
    if writes:
        active = active_vars(ir, wrt, precise=True)
        if any(isinstance(e.inputs[1], Var) and e.inputs[1] in active for e in writes):
            raise differentiated_write_error()


class RuleError(AssertionError):
    """A primitive's transformation rule returned a value of the wrong type: a bug in that rule (in ember, or in a
    rule registered on a Primitive), not in the program being transformed."""


def check_cotangent(eqn: Eqn, kind: str, index: int, ct: Any) -> None:
    """ct, which eqn's rule of this kind ("vjp" or "vjp_split") returned for input index, must have that input's
    shape and a floating-point dtype (its precision may differ: the backward pass casts it), complex only for a
    complex input (a real input's cotangent is real: JAX's convention, docs/complex.md)."""
    want, got = eqn.inputs[index].aval, aval_of(ct)
    if (got.shape != want.shape or not is_differentiable_aval(got)
            or (dt.is_complex(got.dtype) and not dt.is_complex(want.dtype))):
        raise RuleError(f"the {kind} rule of primitive {eqn.prim.name!r} returned a cotangent {got.str_short()} "
                        f"for its input {index} of type {want.str_short()}: a bug in that rule")


def backward_pass(ir: IR, args: Sequence[Any], wrt: Sequence[bool], cts_out: Sequence[Any | None],
                  linear: bool = False) -> tuple[list[Any], list[Any | None]]:
    """Evaluate ir on args in the current context and pull cts_out back to the inputs marked in wrt (see
    _backward_pass); what each equation's rules bind is attributed to that equation's user line. linear: ir is
    linear in the inputs marked in wrt (a transposition), so an equation on them is linear in them and a primitive's
    transpose hook, where it has one, replaces its vjp rule."""
    outer = TRACE_STATE.source
    try:
        return _backward_pass(ir, args, wrt, cts_out, outer, linear)
    finally:
        TRACE_STATE.source = outer


def _backward_pass(ir: IR, args: Sequence[Any], wrt: Sequence[bool], cts_out: Sequence[Any | None], outer: Any,
                   linear: bool = False) -> tuple[list[Any], list[Any | None]]:
    """Evaluate ir on args in the current context and pull cts_out back to the inputs marked in wrt.

    Returns (outputs, input cotangents); a cotangent is None where it is zero or not asked for.

    An active equation whose primitive has a "vjp_split" hook is emitted through it instead: the hook computes the
    outputs together with the residuals its pullback needs (a scan stacks them per step), and the pullback then
    replaces the VJP rule, so nothing is computed twice."""
    # (precisely, through loops and branches per carry and result, as JAX's symbolic zeros: a result of a cond or
    # loop that no differentiated input reaches gets no cotangent, so no rule after it is asked for a derivative it
    # may refuse (equinox's nondifferentiable), and a Ref write of such a value is allowed)
    active = active_vars(ir, wrt, precise=True)
    env = Env(zip(ir.const_vars, ir.consts))
    env.update(zip(ir.in_vars, args))
    pullbacks: dict[Eqn, Any] = {}
    state = TRACE_STATE
    for eqn in ir.eqns:
        state.source = eqn.source or outer
        ins = [env.read(a) for a in eqn.inputs]
        split = eqn.prim.rules.get("vjp_split")
        marked = [isinstance(a, Var) and a in active for a in eqn.inputs]
        if split is not None and any(marked):
            outs, pullbacks[eqn] = split(ins, marked, **eqn.params)
        else:
            outs = bind_outputs(eqn, ins)
        env.update(zip(eqn.outputs, outs))
    outputs = [env.read(a) for a in ir.outs]

    cts: dict[Var, Any] = {}

    def accumulate(var: Var, ct: Any) -> None:
        ct_aval = aval_of(ct)
        if ct_aval.dtype != var.aval.dtype:  # (a weakly typed or float32 rule result for a float16 value)
            ct = convert_element_type(ct, var.aval.dtype)
        if var.aval.explicit is not None and ct_aval.explicit != var.aval.explicit:
            # (a cotangent is split as its primal is, as JAX's explicit sharding mode types it)
            ct = sharding_constraint_p.bind(ct, sharding=var.aval.explicit)
        cts[var] = add(cts[var], ct) if var in cts else ct

    for atom, ct in zip(ir.outs, cts_out):
        if ct is not None and isinstance(atom, Var) and atom in active:
            accumulate(atom, ct)

    for eqn in reversed(ir.eqns):
        out_cts = [cts.pop(v, None) for v in eqn.outputs]
        if all(ct is None for ct in out_cts) or not eqn.prim.differentiable:
            continue
        needs = [isinstance(a, Var) and a in active for a in eqn.inputs]
        if not any(needs):
            continue
        state.source = eqn.source or outer
        if eqn.prim.multiple_results and not eqn.prim.none_cotangents:
            out_cts = [zeros(v.aval) if ct is None else ct for v, ct in zip(eqn.outputs, out_cts)]
        transpose = eqn.prim.rules.get("transpose") if linear else None
        if eqn in pullbacks:
            kind, in_cts = "vjp_split", pullbacks[eqn](out_cts, needs)
        elif transpose is not None:
            kind, in_cts = "transpose", transpose(out_cts, [env.read(a) for a in eqn.inputs], needs, **eqn.params)
        else:
            vjp = eqn.prim.rule("vjp", "reverse-mode differentiation")
            ins = [env.read(a) for a in eqn.inputs]
            kind, in_cts = "vjp", vjp(out_cts, ins, [env[v] for v in eqn.outputs], needs, **eqn.params)
        for i, (atom, need, ct) in enumerate(zip(eqn.inputs, needs, in_cts)):
            if need and ct is not None:
                check_cotangent(eqn, kind, i, ct)
                accumulate(atom, ct)
    return outputs, [cts.get(v) for v in ir.in_vars]


def check_differentiable_inputs(name: str, avals: Sequence[ShapedArray], wrt: Sequence[bool],
                                allow_int: bool = False, holomorphic: bool = False) -> None:
    for i, (aval, w) in enumerate(zip(avals, wrt)):
        if w and type(aval) is RefAval:
            raise TypeError(f"{name}: input {i} is a mutable array reference ({aval.str_short()}), which cannot be "
                            "differentiated with respect to (its gradient would itself need a Ref); differentiate "
                            "with respect to arrays (argnums), and pass Refs as other arguments")
        if w and holomorphic and not dt.is_complex(aval.dtype):
            raise TypeError(f"{name} with holomorphic=True requires inputs with complex dtype, but input {i} is "
                            f"{aval.str_short()}")
        if w and not is_differentiable_aval(aval) and not allow_int:
            raise TypeError(f"{name} requires floating-point inputs, but input {i} is {aval.str_short()}; "
                            "differentiate with respect to float arguments only (argnums), or pass allow_int=True "
                            "to get zero gradients for integer inputs")


def check_scalar_output(name: str, aval: ShapedArray, holomorphic: bool = False) -> None:
    """grad's output: one element, real-valued (floating-point), or complex with holomorphic=True (as JAX)."""
    if aval.size != 1:
        raise TypeError(f"{name} requires a scalar output (one element), got {aval.str_short()}; "
                        "use ember.vjp for non-scalar outputs")
    if holomorphic:
        if not dt.is_complex(aval.dtype):
            raise TypeError(f"{name} with holomorphic=True requires a complex output, got {aval.str_short()}")
        return
    if dt.is_complex(aval.dtype):
        raise TypeError(f"{name} requires real-valued outputs (a floating-point dtype), but got {aval.str_short()}. "
                        "For holomorphic differentiation, pass holomorphic=True; for non-holomorphic functions "
                        "with complex outputs, use ember.vjp directly")
    if not is_differentiable_aval(aval):
        raise TypeError(f"{name} requires a floating-point output, got {aval.str_short()}")


@profiled("transform", "grad")
def value_and_grad_ir(ir: IR, wrt: Sequence[bool], with_value: bool = True, name: str = "grad",
                      values: Sequence[Any] | None = None, holomorphic: bool = False) -> IR:
    """IR (inputs) -> (outputs..., gradient of output 0 for each input in wrt).

    Output 0 must be a scalar; further outputs (auxiliary data) are passed through. Without with_value the
    outputs are (outputs[1:]..., gradients...)."""
    if not ir.outs:
        raise TypeError(f"{name}: the function has no output")
    check_scalar_output(name, ir.outs[0].aval, holomorphic)
    ir = hoisted(ir)
    out_aval = ir.outs[0].aval

    def fn(*args: Any) -> list[Any]:
        one = scalar_literal(1, out_aval.dtype, weak=False)
        seed = full(out_aval.shape, one)  # an array even for a scalar: rules (custom ones too) get arrays
        outs, in_cts = backward_pass(ir, args, wrt, [seed] + [None] * (len(ir.outs) - 1))
        grads = [zeros(v.aval) if ct is None else ct for v, ct, w in zip(ir.in_vars, in_cts, wrt) if w]
        return (outs if with_value else outs[1:]) + grads

    return simplify(stage_flat(fn, ir.in_avals, values))  # values: staged concretely (see stage_flat)


def vjp_ir(ir: IR, wrt: Sequence[bool], num_cts: int | None = None, values: Sequence[Any] | None = None) -> IR:
    """IR (inputs..., cotangents of the first num_cts outputs...) -> (outputs..., input cotangents for each
    input in wrt). Further outputs (auxiliary data) get no cotangent. Computed once per (ir, wrt, num_cts) (see
    TransformCache), except a concrete staging (values), which is specialised to its values."""
    num_cts = len(ir.outs) if num_cts is None else num_cts
    if values is not None:
        return stage_vjp(ir, wrt, num_cts, values)
    return VJPS.get(ir, (tuple(wrt), num_cts), lambda: stage_vjp(ir, wrt, num_cts))


@profiled("transform", "vjp")
def stage_vjp(ir: IR, wrt: Sequence[bool], num_cts: int, values: Sequence[Any] | None = None) -> IR:
    """The reverse-mode transformation of ir itself (uncached; see vjp_ir)."""
    ir = hoisted(ir)
    n = len(ir.in_vars)

    def fn(*args: Any) -> list[Any]:
        cts = list(args[n:]) + [None] * (len(ir.outs) - num_cts)
        outs, in_cts = backward_pass(ir, args[:n], wrt, cts)
        return outs + [zeros(v.aval) if ct is None else ct for v, ct, w in zip(ir.in_vars, in_cts, wrt) if w]

    ct_avals = [a.strip_weak_type() for a in ir.out_avals[:num_cts]]
    if values is not None:  # concrete staging: the cotangents are not known yet, so zeros stand for them
        values = list(values) + [zeros(a) for a in ct_avals]
    return simplify(stage_flat(fn, ir.in_avals + ct_avals, values))


VJPS = TransformCache("vjp_ir")  # (ir, (wrt, num_cts)) -> VJP IR
