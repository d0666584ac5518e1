"""Forward mode as an IR -> IR transformation: each equation's JVP rule maps (primals, tangents) to (outputs,
output tangents), with None standing for a symbolic zero tangent, so zeros cost nothing until an output needs one.
Like the backward pass, it runs while a new IR is staged out: the result is an ordinary IR."""
from __future__ import annotations

from typing import Any, Sequence

from ember._core import IR, Eqn, stage_flat
from ember._core.eval import bind_outputs, eval_ir_annotated
from ember._core import dtypes as dt
from ember._core.profile import profiled
from ember._core.refs import RefAval
from ember._transforms.ad import check_ref_writes
from ember._transforms.discharge import hoisted
from ember._prims.shape import zeros
from ember._transforms.cache import TransformCache
from ember._transforms.passes import simplify


def _jvp_rule(eqn: Eqn, primals: list[Any], tangents: list[Any]) -> tuple[Sequence[Any], Sequence[Any]]:
    if not eqn.prim.differentiable:  # outputs carry no derivative: their tangents are zero
        return bind_outputs(eqn, primals), [None] * len(eqn.outputs)
    return eqn.prim.rule("jvp", "forward-mode differentiation")(primals, tangents, **eqn.params)


def jvp_pass(ir: IR, primals: Sequence[Any], tangents: Sequence[Any | None]) -> tuple[list[Any], list[Any | None]]:
    """Evaluate ir on primals in the current context, pushing tangents (None: zero) forward. Returns (outputs,
    output tangents), a tangent None where it is zero."""
    return eval_ir_annotated(ir, primals, tangents, _jvp_rule)


def jvp_ir(ir: IR, with_tangent: Sequence[bool] | None = None, values: Sequence[Any] | None = None) -> IR:
    """IR (inputs..., tangents of the inputs marked in with_tangent...) -> (outputs..., output tangents...).

    By default the floating-point inputs get tangents. Every output gets a tangent (zeros where it does not
    depend on a tangent input, or is not a float). Computed once per (ir, with_tangent) (see TransformCache),
    except a concrete staging (values: of primals and tangents), which is specialised to its values."""
    with_tangent = ([dt.is_inexact(a.dtype) and type(a) is not RefAval for a in ir.in_avals] if with_tangent is None
                    else list(with_tangent))
    for aval, w in zip(ir.in_avals, with_tangent):
        if w and type(aval) is RefAval:
            raise TypeError(f"jvp: an input is a mutable array reference ({aval.str_short()}), which has no tangent; "
                            "pass Refs by closure or as arguments without tangents")
    if values is not None:
        return stage_jvp(ir, with_tangent, values)
    return JVPS.get(ir, tuple(with_tangent), lambda: stage_jvp(ir, with_tangent))


@profiled("transform", "jvp")
def stage_jvp(ir: IR, with_tangent: Sequence[bool], values: Sequence[Any] | None = None) -> IR:
    """The forward-mode transformation of ir itself (uncached; see jvp_ir)."""
    ir = hoisted(ir)
    check_ref_writes(ir, with_tangent)
    n = len(ir.in_vars)

    def fn(*args: Any) -> list[Any]:
        given = iter(args[n:])
        tangents = [next(given) if w else None for w in with_tangent]
        outs, touts = jvp_pass(ir, args[:n], tangents)
        return outs + [zeros(v.aval.strip_weak_type()) if t is None else t for v, t in zip(ir.outs, touts)]

    tangent_avals = [a.strip_weak_type() for a, w in zip(ir.in_avals, with_tangent) if w]
    return simplify(stage_flat(fn, ir.in_avals + tangent_avals, values))


JVPS = TransformCache("jvp_ir")  # (ir, with_tangent) -> JVP IR
