"""A jitted function called inside another staging stays one equation (as JAX's pjit): `pjit(*args; body, name,
in_shardings, out_shardings)` runs its closed body. The equation keeps the function's name (its program is a
function of that name in the module) and the shardings jit was given for it (its inputs and outputs are constrained
to them). Its whole story is here: abstract eval, lowering (a func.call), JVP (a pjit of the body's JVP), reverse
mode (vjp_split: the body's VJP split into a primal part, run forward with the residuals it saves, and a linear
part, run backward: nothing is recomputed), batching and a DCE hook. A body with host callbacks is inlined instead
(their effects are ordered in the caller's body)."""
from __future__ import annotations

import weakref
from typing import Any, Callable, Sequence

from ember._control.common import same_types, with_inputs
from ember._core import IR, Eqn, Primitive, ShapedArray, aval_of, eval_ir
from ember._core import dtypes as dt
from ember._core.primitive import has_effects
from ember._transforms.discharge import body_finals, ref_values, updated
from ember._core.sharding import Sharding
from ember._hlo import LoweringContext
from ember._hlo.lower import call_function
from ember._prims.explicit import batched as batched_sharding
from ember._prims.sharding import constrain
from ember._prims.shape import BatchDim, batch_size, zeros
from ember._transforms.ad import active_outputs, vjp_ir
from ember._transforms.batching import batch_ir
from ember._transforms.cache import TransformCache
from ember._transforms.jvp import jvp_ir
from ember._transforms import key_reuse
from ember._transforms.passes import dce_outputs, depends_on, simplify, split_known

Shardings = tuple[Sharding | None, ...]

pjit_p = Primitive("pjit", multiple_results=True, takes_refs=True, own_vma=True)
pjit_p.none_cotangents = True  # (its pullback passes an input cotangent the given ones do not reach as None)


@pjit_p.def_rule("abstract_eval")
def _pjit_abstract_eval(*avals: ShapedArray, body: IR, name: str, in_shardings: Shardings,
                        out_shardings: Shardings) -> list[ShapedArray]:
    if not same_types(body.in_avals, avals):
        raise TypeError(f"pjit({name}): the body takes {', '.join(a.str_short() for a in body.in_avals)}, got "
                        f"{', '.join(a.str_short() for a in avals)}")
    return list(body.out_avals)


@pjit_p.def_rule("lowering")
def _pjit_lowering(ctx: LoweringContext, *args: str, body: IR, name: str, in_shardings: Shardings,
                   out_shardings: Shardings) -> list[str]:
    args = [constrain(ctx, x, a, s) for x, a, s in zip(args, ctx.avals_in, in_shardings)]
    outs = call_function(ctx, body, args, name)
    return [constrain(ctx, y, a, s) for y, a, s in zip(outs, ctx.avals_out, out_shardings)]


@pjit_p.def_rule("jvp")
def _pjit_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, body: IR, name: str, in_shardings: Shardings,
              out_shardings: Shardings) -> tuple[list[Any], list[Any]]:
    with_tangent = [t is not None and dt.is_inexact(aval_of(p).dtype) for p, t in zip(primals, tangents)]
    given = [t for t, w in zip(tangents, with_tangent) if w]
    tangent_shardings = tuple(s for s, w in zip(in_shardings, with_tangent) if w)
    outs = _bind([*primals, *given], jvp_ir(body, with_tangent), f"jvp_{name}", in_shardings + tangent_shardings,
                 out_shardings + out_shardings)
    n = len(body.outs)
    return outs[:n], outs[n:]


Closed = tuple[IR, list[Any]]  # a body whose first inputs are the constants listed beside it


def _split(body: IR, active: Sequence[bool]) -> tuple[tuple[bool, ...], Closed, Closed, int]:
    """(which inputs get cotangents: the floating-point ones the backward pass differentiates (active), the
    primal part: inputs -> (outputs..., residuals...), the linear part: (residuals..., output cotangents...) ->
    input cotangents, the number of residuals), once per (body, those inputs). (Differentiating the others too
    would ask a rule for a derivative it may not have: betainc's in a, of a constant a.)"""
    wrt = tuple(bool(on) and dt.is_inexact(a.dtype) for a, on in zip(body.in_avals, active))

    def split() -> tuple[tuple[bool, ...], Closed, Closed, int]:
        n_in, n_out = len(body.in_vars), len(body.outs)
        known, linear, n_res = split_known(vjp_ir(body, list(wrt)), [False] * n_in + [True] * n_out, n_out)
        return wrt, _closed(known), _closed(linear), n_res
    return SPLITS.get(body, wrt, split)


SPLITS = TransformCache("pjit vjp split")  # body -> _split(body)


def _closed(ir: IR) -> Closed:
    """ir with its constants (arrays a transformation captured) as leading inputs, and those constants (one closed
    IR per IR: the transformations of a body are cached by its identity)."""
    if not ir.consts:
        return ir, []
    found = _closed_irs.get(ir)
    if found is None:
        found = _closed_irs[ir] = IR([], [], list(ir.const_vars) + list(ir.in_vars), ir.eqns, ir.outs)
    return found, list(ir.consts)


_closed_irs: "weakref.WeakKeyDictionary[IR, IR]" = weakref.WeakKeyDictionary()


def _bind(args: Sequence[Any], ir: IR, name: str, in_shardings: Shardings, out_shardings: Shardings) -> list[Any]:
    """pjit of ir (its constants, if it has any, passed as leading operands) on args."""
    body, consts = _closed(ir)
    return pjit_p.bind(*consts, *args, body=body, name=name, in_shardings=(None,) * len(consts) + in_shardings,
                       out_shardings=out_shardings)


@pjit_p.def_rule("vjp_split")
def _pjit_vjp_split(ins: list[Any], active: list[bool], *, body: IR, name: str, in_shardings: Shardings,
                    out_shardings: Shardings) -> tuple[list[Any], Callable[..., list[Any]]]:
    wrt, (known, known_consts), (linear, linear_consts), n_res = _split(body, active)
    n_out = len(body.outs)
    results = pjit_p.bind(*known_consts, *ins, body=known, name=name,
                          in_shardings=(None,) * len(known_consts) + in_shardings,
                          out_shardings=out_shardings + (None,) * n_res)
    outs, residuals = results[:n_out], results[n_out:]

    def pullback(cts: list[Any], needs: list[bool]) -> list[Any]:
        # (an input cotangent the given output cotangents do not reach is a symbolic zero, None, as JAX's: a
        # custom_vjp before the call then gets a SymbolicZero for it)
        reached = depends_on(linear, [False] * (len(linear_consts) + n_res) + [ct is not None for ct in cts])
        cts = [zeros(a.strip_weak_type()) if ct is None else ct for ct, a in zip(cts, body.out_avals)]
        results = pjit_p.bind(*linear_consts, *residuals, *cts, body=linear, name=f"transpose_{name}",
                              in_shardings=(None,) * (len(linear_consts) + n_res) + out_shardings,
                              out_shardings=tuple(s for s, w in zip(in_shardings, wrt) if w))
        in_cts = iter(ct if r else None for ct, r in zip(results, reached))
        full = [next(in_cts) if w else None for w in wrt]
        return [ct if need else None for ct, need in zip(full, needs)]
    return list(outs), pullback


@pjit_p.def_rule("vjp")
def _pjit_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, body: IR, name: str,
              in_shardings: Shardings, out_shardings: Shardings) -> list[Any]:
    return _pjit_vjp_split(ins, needs, body=body, name=name, in_shardings=in_shardings,
                           out_shardings=out_shardings)[1](cts, needs)


@pjit_p.def_rule("depends")
def _pjit_depends(active: list[bool], *, body: IR, name: str, in_shardings: Shardings, out_shardings: Shardings
                  ) -> list[bool]:
    """A result depends on the active arguments when it does in the body (per result, as JAX's)."""
    return active_outputs(body, active)


@pjit_p.def_rule("batching")
def _pjit_batching(args: list[Any], dims: list[BatchDim], *, body: IR, name: str, in_shardings: Shardings,
                   out_shardings: Shardings) -> tuple[list[Any], list[BatchDim]]:
    size = batch_size(args, dims)
    batched, out_dims = batch_ir(body, dims, size)
    ins = tuple(s if d is None or s is None else batched_sharding(s, d, aval_of(x).ndim - 1)
                for x, d, s in zip(args, dims, in_shardings))
    outs = tuple(s if d is None or s is None else batched_sharding(s, d, a.ndim)
                 for s, d, a in zip(out_shardings, out_dims, body.out_avals))
    return _bind(args, batched, name, ins, outs), out_dims


@pjit_p.def_rule("discharge")
def _pjit_discharge(ins: list[Any], refs: list[int | None], *, body: IR, **params: Any) -> tuple[list[Any], list[Any]]:
    """A call given references is inlined, discharged (a jitted function's boundary changes no value)."""
    outs, finals = body_finals(body, ins, refs)
    return outs, updated(ref_values(ins, refs), finals)


@pjit_p.def_rule("key_reuse")
def _pjit_key_reuse(eqn: Eqn) -> key_reuse.Signature:
    """The body's (the signature of the IR the jitted function was staged as, where call_jitted recorded it)."""
    return key_reuse.ir_signature(eqn.params["body"], f"jit({eqn.params['name']})")


@pjit_p.def_rule("dce")
def _pjit_dce(eqn: Eqn, used: list[bool]) -> Eqn:
    """Drop the unused outputs from the body, then the inputs it no longer reads."""
    pruned, reads = dce_outputs(eqn.params["body"], used)
    if all(used) and all(reads):
        return eqn
    body = with_inputs(pruned, [v for v, r in zip(pruned.in_vars, reads) if r])
    params = {**eqn.params, "body": body,
              "in_shardings": tuple(s for s, r in zip(eqn.params["in_shardings"], reads) if r),
              "out_shardings": tuple(s for s, u in zip(eqn.params["out_shardings"], used) if u)}
    return Eqn(eqn.prim, [a for a, r in zip(eqn.inputs, reads) if r], [v for v, u in zip(eqn.outputs, used) if u],
               params, eqn.source)


_bodies: "weakref.WeakKeyDictionary[IR, IR]" = weakref.WeakKeyDictionary()  # a jitted function's IR -> its body


def call_jitted(ir: IR, leaves: Sequence[Any], name: str, in_shardings: Sequence[Any] | None,
                out_shardings: Sequence[Any] | None) -> list[Any]:
    """The outputs of a jitted function's IR called on leaves inside another staging: one pjit equation (its
    constants, e.g. arrays it closes over, become leading operands), or the IR inlined when it has effects (host
    callbacks: ordered in the caller's body)."""
    if any(has_effects(e.prim, e.params) for e in ir.eqns) or not ir.eqns:
        return eval_ir(ir, list(leaves))
    body = _bodies.get(ir)
    if body is None:
        whole = IR([], [], list(ir.const_vars) + list(ir.in_vars), ir.eqns, ir.outs)
        body = _bodies[ir] = simplify(whole)
        if key_reuse.checking():  # (every draw the function made counts, those simplify drops included)
            key_reuse.remember(body, key_reuse.ir_signature(whole, f"jit({name})"))
    n_consts = len(ir.consts)
    ins = (None,) * n_consts + (tuple(in_shardings) if in_shardings is not None else (None,) * len(leaves))
    outs = tuple(out_shardings) if out_shardings is not None else (None,) * len(ir.outs)
    return pjit_p.bind(*ir.consts, *leaves, body=body, name=name, in_shardings=ins, out_shardings=outs)


__all__: list[str] = []
