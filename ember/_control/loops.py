"""Loops as higher-order primitives: while (while_loop, and fori_loop with a traced trip count) and scan (scan,
map, and fori_loop with static bounds). Both are differentiable in either mode (while_loop in reverse mode beyond
JAX, by checkpointing: docs/while_grad.md). Each carries closed sub-IRs and has every rule beside it."""
from __future__ import annotations

import inspect
import operator
from typing import Any, Callable, NamedTuple, Sequence

from ember import _prims as lax
from ember._control.cond import cond as _cond
from ember._control.common import (called_from_ember, cast_outputs, close_over, describe, int32_scalar as _i32,
                                   retyped, same_types, split_sizes as _split, unused_inputs, varying_as,
                                   vma_error_text, vma_mismatch, with_inputs, with_outputs)
from ember._core import (IR, Eqn, Primitive, ShapedArray, Tracer, Var, aval_of, eval_ir, is_python_scalar,
                         stage_flat)
from ember._core import dtypes as dt
from ember._core.config import config
from ember._core.primitive import has_effects
from ember._core.checks import normalize_axis
from ember._core.dtypes import NO_VMA, join_vma
from ember._core.pytree import keystr, tree_flatten, tree_leaves_with_path, tree_map, tree_structure, tree_unflatten
from ember._core.sharding import row_type, stacked_type
from ember._hlo import LoweringContext, compare_type, i64_array, lower_into
from ember._prims.shape import BatchDim, batch_at_front, batch_size, moveaxis, zeros
from ember._transforms.ad import active_outputs, vjp_ir
from ember._transforms.batching import batch_ir
from ember._transforms.cache import TransformCache
from ember._transforms.discharge import (body_finals, closed_body, discharge_ir, ref_values, updated,
                                        with_refs as _with_refs)
from ember._transforms.jvp import jvp_ir
from ember._transforms import key_reuse
from ember._transforms.passes import dce, dce_outputs, depends_on, split_known

def _batched_carries(body_ir: IR, const_dims: list[BatchDim], carry_dims: list[BatchDim],
                     extra_dims: list[BatchDim], size: int) -> tuple[list[bool], list[BatchDim]]:
    """Which carries of a loop are batched: those batched on entry, and those the body makes batched from batched
    values (a fixed point). Returns that, and the body's natural output dims with those carries at axis 0."""
    batched = [d is not None for d in carry_dims]
    while True:
        in_dims = const_dims + [0 if b else None for b in batched] + extra_dims
        _, out_dims = batch_ir(body_ir, in_dims, size)
        grown = [b or out_dims[j] is not None for j, b in enumerate(batched)]
        if grown == batched:
            return batched, out_dims
        batched = grown


# ---------------------------------------------------------------------------------------------------------------
# while(cond_consts..., body_consts..., carry...; cond_ir, body_ir, cond_nconsts, body_nconsts)
while_p = Primitive("while", multiple_results=True, takes_refs=True, own_vma=True)


@while_p.def_rule("abstract_eval")
def _while_abstract_eval(*avals: ShapedArray, cond_ir: IR, body_ir: IR, cond_nconsts: int, body_nconsts: int
                         ) -> list[ShapedArray]:
    cconsts, bconsts, carry = _split(avals, cond_nconsts, body_nconsts)
    if not same_types(cond_ir.in_avals, cconsts + carry):
        raise TypeError(f"while_loop: cond_fun takes {describe(cond_ir.in_avals)}, given {describe(cconsts + carry)}")
    out = cond_ir.out_avals
    if len(out) != 1 or out[0].shape != () or out[0].dtype != dt.bool_:
        raise TypeError(f"while_loop: cond_fun must return a boolean scalar, got {describe(out)}")
    if not same_types(body_ir.in_avals, bconsts + carry):
        raise TypeError(f"while_loop: body_fun takes {describe(body_ir.in_avals)}, given {describe(bconsts + carry)}")
    if not same_types(body_ir.out_avals, carry):
        raise TypeError(f"while_loop: body_fun must return the carry's types {describe(carry)}, but it returns "
                        f"{describe(body_ir.out_avals)}")
    if any(out[0].vma - a.vma for a in bconsts + carry):  # (see _while)
        raise TypeError(f"while_loop: the predicate {out[0].str_short()} varies over devices, so every carry and "
                        f"body constant must too; given {describe(bconsts + carry)}")
    return list(carry)


@while_p.def_rule("lowering")
def _while_lowering(ctx: LoweringContext, *operands: str, cond_ir: IR, body_ir: IR, cond_nconsts: int,
                    body_nconsts: int) -> list[str]:
    """stablehlo.while over every operand: the consts ride along unchanged."""
    nc, nb = cond_nconsts, body_nconsts

    def cond_block(body: Any, args: list[str]) -> list[str]:
        return lower_into(body, cond_ir, args[:nc] + args[nc + nb:])

    def body_block(body: Any, args: list[str]) -> list[str]:
        return args[:nc + nb] + lower_into(body, body_ir, args[nc:])

    regions = [ctx.region(ctx.avals_in, cond_block), ctx.region(ctx.avals_in, body_block)]
    outs = ctx.op("stablehlo.while", list(operands), ctx.avals_in, regions=regions)
    return outs[nc + nb:]


@while_p.def_rule("jvp")
def _while_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, cond_ir: IR, body_ir: IR, cond_nconsts: int,
               body_nconsts: int) -> tuple[list[Any], list[Any]]:
    """A while over (carry, tangents of the perturbed carries); the body consts' tangents ride along as consts. A
    carry is perturbed (has a tangent) when its initial value has one or the body makes it depend on a perturbed
    value, to a fixed point, as JAX's: the others' tangents stay symbolic zeros (None), also inside the body."""
    cconsts, bconsts, carry = _split(primals, cond_nconsts, body_nconsts)
    _, t_bconsts, t_carry = _split(tangents, cond_nconsts, body_nconsts)
    const_t = [t is not None and dt.is_inexact(aval_of(c).dtype) for c, t in zip(bconsts, t_bconsts)]
    carry_t = _perturbed_carries(body_ir, const_t, carry, t_carry, [])[0]
    jir = jvp_ir(body_ir, const_t + carry_t)
    nb, nk, ntc = len(bconsts), len(carry), sum(const_t)
    ins = jir.in_vars
    body = with_inputs(jir, ins[:nb] + ins[nb + nk:nb + nk + ntc] + ins[nb:nb + nk] + ins[nb + nk + ntc:])
    out_tangents = body.outs[nk:]
    body = with_outputs(body, body.outs[:nk] + [t for t, f in zip(out_tangents, carry_t) if f])
    tangent_avals = [aval_of(c).strip_weak_type() for c, f in zip(carry, carry_t) if f]
    cond = with_inputs(cond_ir, cond_ir.in_vars + unused_inputs(tangent_avals))
    given_tc = [t for t, f in zip(t_bconsts, const_t) if f]
    given_tk = [zeros(aval_of(c).strip_weak_type()) if t is None else t
                for c, t, f in zip(carry, t_carry, carry_t) if f]
    outs = while_p.bind(*cconsts, *bconsts, *given_tc, *carry, *given_tk, cond_ir=cond, body_ir=body,
                        cond_nconsts=cond_nconsts, body_nconsts=nb + ntc)
    new_tangents = iter(outs[nk:])
    return outs[:nk], [next(new_tangents) if f else None for f in carry_t]


# Reverse mode (beyond JAX, which refuses it): two-level checkpointing (docs/while_grad.md). The forward pass runs
# the loop once, counting its steps n and keeping its first K carries (all of them when n <= K); a longer loop runs
# again, keeping every s-th carry in the K slots (s = ceil(n / K): the stride is known before the second run). The
# backward pass takes the segments of s steps last to first: it runs the body forward from the segment's
# checkpoint, storing its carries in a second buffer of K slots, then pulls the cotangent back through them, last
# to first, with the body's VJP. Memory: 2K carries (K from the option while_grad_memory); work: one forward run of
# the loop (two when n > K, three with the segments' runs) and one of the body's VJP per step, while n <= K^2. A
# longer loop (segments longer than K) replays each step of a segment from the segment's checkpoint: n * s / 2 more
# body runs, exact still, never an error. The gradient is the unrolled loop's: the same body VJP at the same carries.
WHILE_SLOTS = (8, 1024)  # the least and most K


def _while_slots(carry_avals: Sequence[ShapedArray]) -> int:
    """K: as many slots as 2K carries fit in the option while_grad_memory (bytes), within WHILE_SLOTS."""
    per_carry = max(1, sum(a.size * a.dtype.itemsize for a in carry_avals))
    return max(WHILE_SLOTS[0], min(WHILE_SLOTS[1], config.read("while_grad_memory") // (2 * per_carry)))


def _differentiated(body_ir: IR, num_consts: int, num_carry: int, active: Sequence[bool]) -> list[bool]:
    """The loop body's inputs (consts, carries, scan's xs) that reverse mode gives cotangents: the floating-point
    ones the backward pass differentiates (active) and the float carries those reach through the body, to a fixed
    point. Differentiating the others too would ask a rule for a derivative it may not have (betainc's in a, of a
    constant a)."""
    inexact = [dt.is_inexact(a.dtype) for a in body_ir.in_avals]
    wrt = [bool(on) and f for on, f in zip(active, inexact)]
    reached = _loop_depends(body_ir, num_consts, num_carry, wrt)[:num_carry]  # (precisely: per carry and result
    # through the body's own loops and branches, as JAX's fixed point, so a carry no differentiated value reaches
    # gets no cotangent, and no rule is asked for its derivative)
    for k, r in enumerate(reached):
        wrt[num_consts + k] = wrt[num_consts + k] or (r and inexact[num_consts + k])
    return wrt


def _without_effects(body_ir: IR) -> IR:
    """The body for the runs that only recompute carries (count, segments, the VJP's forward): its effectful
    equations (debug.print, debug.callback) dropped, so that they act once per step, in the checkpoint run, as
    in the loop run forward; an effect whose results the body reads (an io_callback's) cannot be run again."""
    read = {a for eqn in body_ir.eqns for a in eqn.inputs if isinstance(a, Var)}
    read.update(a for a in body_ir.outs if isinstance(a, Var))
    kept = []
    for eqn in body_ir.eqns:
        if not has_effects(eqn.prim, eqn.params):
            kept.append(eqn)
        elif any(v in read for v in eqn.outputs):
            raise NotImplementedError(
                f"reverse-mode differentiation of a while_loop whose body reads the results of an effect "
                f"({eqn.prim.name}): the backward pass runs the body again, which would repeat the effect; "
                "use a pure_callback (or move the effect out of the loop)")
    if len(kept) == len(body_ir.eqns):
        return body_ir
    return IR(body_ir.const_vars, body_ir.consts, body_ir.in_vars, kept, body_ir.outs, body_ir.out_tree)


def _ceil_div(a: Any, b: Any) -> Any:
    """ceil(a / b) of non-negative int32 scalars."""
    return lax.div(lax.add(a, lax.sub(b, _i32(1))), b)


def _stack_slots(leaves: Sequence[Any], slots: int) -> list[Any]:
    return [lax.full((slots,) + aval_of(x).shape, 0, aval_of(x).dtype) for x in leaves]


def _put(buffers: list[Any], leaves: Sequence[Any], index: Any) -> list[Any]:
    return [lax.dynamic_update_index_in_dim(b, lax.expand_dims(x, (0,)), index, 0) for b, x in zip(buffers, leaves)]


def _take(buffers: Sequence[Any], index: Any) -> list[Any]:
    return [lax.dynamic_index_in_dim(b, index, 0, keepdims=False) for b in buffers]


@while_p.def_rule("vjp_split")
def _while_vjp_split(ins: list[Any], active: list[bool], *, cond_ir: IR, body_ir: IR, cond_nconsts: int,
                     body_nconsts: int) -> tuple[list[Any], Callable[..., list[Any]]]:
    cconsts, bconsts, init = _split(ins, cond_nconsts, body_nconsts)
    nb, nk = len(bconsts), len(init)
    wrt = _differentiated(body_ir, nb, nk, active[cond_nconsts:])
    on_k = wrt[nb:]  # the carries that get cotangents
    slots = _while_slots(body_ir.in_avals[nb:])
    pure = _without_effects(body_ir)
    step_vjp = vjp_ir(pure, wrt)  # (bconsts, carry, ct of each carry) -> (carry, cts of the inputs in wrt)

    def step(carry: Sequence[Any], ir: IR = pure) -> list[Any]:
        return eval_ir(ir, list(bconsts) + list(carry))

    def counted(more: Callable[[Any, list[Any]], Any], body: Callable[[Any, list[Any], Any], Any], init: Any) -> Any:
        """A while over (i, carry, extra) from i = 0, i counting the steps."""
        return while_loop(lambda c: more(c[0], c[1]), lambda c: (lax.add(c[0], _i32(1)),) + body(*c),
                          (_i32(0),) + tuple(init))

    def run(carry: Sequence[Any], steps: Any) -> list[Any]:  # (the body `steps` times)
        return counted(lambda i, _: lax.lt(i, steps), lambda i, c: (step(c),), (list(carry),))[1]

    def keep_first(i: Any, carry: list[Any], saved: list[Any]) -> tuple[list[Any], list[Any]]:
        slot = lax.min(i, _i32(slots - 1))  # (the first K carries: all of them when n <= K)
        kept = [lax.select(lax.lt(i, _i32(slots)), x, old) for x, old in zip(carry, _take(saved, slot))]
        return step(carry, body_ir), _put(saved, kept, slot)  # (the body's effects act here, once per step)

    n, outs, first = counted(lambda i, c: eval_ir(cond_ir, list(cconsts) + c)[0], keep_first,
                             (list(init), _stack_slots(init, slots)))
    stride = lax.max(_i32(1), _ceil_div(n, _i32(slots)))  # at least 1

    def keep_every_stride(i: Any, carry: list[Any], saved: list[Any]) -> tuple[list[Any], list[Any]]:
        slot = lax.div(i, stride)  # (< K: i < n <= K * stride)
        due = lax.eq(lax.rem(i, stride), _i32(0))
        kept = [lax.select(due, x, old) for x, old in zip(carry, _take(saved, slot))]
        return step(carry), _put(saved, kept, slot)

    def again(_: Any) -> list[Any]:  # n > K: the loop run again, keeping every s-th carry
        return counted(lambda i, _: lax.lt(i, n), keep_every_stride, (list(init), _stack_slots(init, slots)))[2]

    saved = _cond(lax.gt(n, _i32(slots)), again, lambda _: list(first), None)

    def pull(carry: list[Any], ct: list[Any], acc: list[Any]) -> tuple[list[Any], list[Any]]:
        """One step back: the cotangents of the carry before the step, and acc plus the body consts' ones."""
        given = iter(ct)
        step_cts = [next(given) if on else zeros(a.strip_weak_type()) for a, on in zip(body_ir.out_avals, on_k)]
        in_cts = iter(eval_ir(step_vjp, list(bconsts) + list(carry) + step_cts)[nk:])
        got = [next(in_cts) if w else None for w in wrt]
        return [c for c in got[nb:] if c is not None], [lax.add(a, c) for a, c in zip(acc, (c for c in got[:nb]
                                                                                          if c is not None))]

    def pullback(cts: list[Any], needs: list[bool]) -> list[Any]:
        def segment(c: Any) -> Any:  # segment j: steps j*s ... j*s + length - 1, pulled back last to first
            j, ct, acc, buf = c
            length = lax.min(stride, lax.sub(n, lax.mul(j, stride)))
            kept = lax.min(length, _i32(slots))  # (length > K only when n > K^2)
            def fill(c: Any) -> Any:
                t, carry, buf = c
                carry = step(carry)
                return lax.add(t, _i32(1)), carry, _put(buf, carry, t)

            base = _take(saved, j)  # the segment's carries in buf[0:kept]: its first, then kept - 1 steps
            buf = while_loop(lambda c: lax.lt(c[0], kept), fill, (_i32(1), base, _put(buf, base, _i32(0))))[2]

            def back(t: Any, ct: list[Any], acc: list[Any]) -> Any:
                t = lax.sub(t, _i32(1))  # the carry of step t: kept, or run on from the last one kept
                last_kept = lax.min(t, _i32(slots - 1))
                carry = run(_take(buf, last_kept), lax.sub(t, last_kept))
                return (t,) + pull(carry, ct, acc)

            _, ct, acc = while_loop(lambda c: lax.gt(c[0], _i32(0)), lambda c: back(*c), (length, ct, acc))
            return lax.sub(j, _i32(1)), ct, acc, buf

        last = lax.sub(_ceil_div(n, stride), _i32(1))  # the last segment
        ct = [lax.convert_element_type(c, a.dtype) for c, a, on in zip(cts, body_ir.out_avals, on_k) if on]
        acc = [zeros(a.strip_weak_type()) for a, w in zip(body_ir.in_avals[:nb], wrt[:nb]) if w]
        _, ct, acc, _ = while_loop(lambda c: lax.ge(c[0], _i32(0)), segment,
                                   (last, ct, acc, _stack_slots(init, slots)))  # (one segment buffer, reused)
        ct_it, acc_it = iter(ct), iter(acc)
        result = ([None] * cond_nconsts + [next(acc_it) if w else None for w in wrt[:nb]]
                  + [next(ct_it) if on else None for on in on_k])
        return [c if need else None for c, need in zip(result, needs)]

    return list(outs), pullback


@while_p.def_rule("vjp")
def _while_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], **params: Any) -> list[Any]:
    """Reverse mode outside the backward pass's forward sweep: the same checkpointed loops, run again."""
    return _while_vjp_split(ins, needs, **params)[1](cts, needs)


@while_p.def_rule("batching")
def _while_batching(args: list[Any], dims: list[BatchDim], *, cond_ir: IR, body_ir: IR, cond_nconsts: int,
                    body_nconsts: int) -> tuple[list[Any], list[BatchDim]]:
    """The carries are batched (at axis 0). With an unbatched predicate the loop is the same loop over batched
    values; with a batched one it runs while any member's predicate holds, and finished members keep their
    carry (a select per step)."""
    size = batch_size(args, dims)
    cconsts, bconsts, carry = _split(args, cond_nconsts, body_nconsts)
    cdims, bdims, kdims = _split(dims, cond_nconsts, body_nconsts)
    nk = len(carry)
    batched, _ = _batched_carries(body_ir, bdims, kdims, [], size)
    cond_b, (pred_dim,) = batch_ir(cond_ir, cdims + [0 if b else None for b in batched], size)
    if pred_dim is not None:  # members finish at different steps: every carry is masked, so batched
        batched = [True] * nk
    carry_dims = [0 if b else None for b in batched]
    carry = [batch_at_front(x, d, size) if b else x for x, d, b in zip(carry, kdims, batched)]
    body_b, _ = batch_ir(body_ir, bdims + carry_dims, size, carry_dims)
    cond_b, (pred_dim,) = batch_ir(cond_ir, cdims + carry_dims, size)
    if pred_dim is None:
        return while_p.bind(*cconsts, *bconsts, *carry, cond_ir=cond_b, body_ir=body_b, cond_nconsts=len(cconsts),
                            body_nconsts=len(bconsts)), carry_dims

    def any_member(*ops: Any) -> list[Any]:
        return [lax.reduce_max(eval_ir(cond_b, ops)[0])]

    def masked_step(*ops: Any) -> list[Any]:
        bc, cc, kk = _split(ops, len(bconsts), len(cconsts))
        pred = eval_ir(cond_b, cc + kk)[0]
        new = eval_ir(body_b, bc + kk)
        return [lax.select(lax.broadcast_in_dim(pred, aval_of(n).shape, (0,)), n, o) for n, o in zip(new, kk)]

    carry_avals = [aval_of(c) for c in carry]
    cond_any = stage_flat(any_member, [aval_of(c) for c in cconsts] + carry_avals)
    body_masked = stage_flat(masked_step, [aval_of(c) for c in bconsts + cconsts] + carry_avals)
    outs = while_p.bind(*cconsts, *bconsts, *cconsts, *carry, cond_ir=cond_any, body_ir=body_masked,
                        cond_nconsts=len(cconsts), body_nconsts=len(bconsts) + len(cconsts))
    return outs, [0] * nk


def _refs_carried(body_ir: IR, ids: list[int | None], num_plain: int, value_avals: list[ShapedArray]
                  ) -> Callable[..., list[Any]]:
    """A loop body whose references (at the body inputs ids marks) become leading carries: it takes (its plain
    consts..., the references' values..., the rest of its inputs...) and returns (their final values..., its
    outputs...)."""
    n = len(value_avals)

    def body(*args: Any) -> list[Any]:
        plain, vals, rest = _split(list(args), num_plain, n)
        outs, finals = body_finals(body_ir, _with_refs(ids, plain, vals) + rest, list(ids) + [None] * len(rest))
        return [lax.convert_element_type(x, a.dtype) for x, a in zip(updated(vals, finals), value_avals)] + outs
    return body


@while_p.def_rule("discharge")
def _while_discharge(ins: list[Any], refs: list[int | None], *, cond_ir: IR, body_ir: IR, cond_nconsts: int,
                     body_nconsts: int) -> tuple[list[Any], list[Any]]:
    """The references the loop's predicate or body read or write become leading carries."""
    cond_ids, body_ids, carry_ids = _split(refs, cond_nconsts, body_nconsts)
    if any(i is not None for i in carry_ids):
        raise TypeError("while_loop: a mutable array reference cannot be a loop carry (close over it instead)")
    if any(discharge_ir(cond_ir).written):
        raise TypeError("while_loop: cond_fun writes a mutable array reference; only body_fun may write one")
    cond_consts, body_consts, carry = _split(ins, cond_nconsts, body_nconsts)
    values = ref_values(ins, refs)
    n = len(values)
    cond_plain = [x for x, i in zip(cond_consts, cond_ids) if i is None]
    body_plain = [x for x, i in zip(body_consts, body_ids) if i is None]
    value_avals = [aval_of(v).strip_weak_type() for v in values]
    carry_avals = [aval_of(c) for c in carry]

    def cond_fn(*args: Any) -> list[Any]:
        plain, vals, rest = _split(list(args), len(cond_plain), n)
        return body_finals(cond_ir, _with_refs(cond_ids, plain, vals) + rest, cond_ids + [None] * len(rest))[0]

    cond_new, cond_extra = closed_body(cond_fn, [aval_of(x) for x in cond_plain] + value_avals + carry_avals,
                                       "while_loop cond_fun")
    body_new, body_extra = closed_body(_refs_carried(body_ir, body_ids, len(body_plain), value_avals),
                                       [aval_of(x) for x in body_plain] + value_avals + carry_avals,
                                       "while_loop body_fun")
    values = [lax.convert_element_type(v, a.dtype) for v, a in zip(values, value_avals)]
    outs = while_p.bind(*cond_extra, *cond_plain, *body_extra, *body_plain, *values, *carry, cond_ir=cond_new,
                        body_ir=body_new, cond_nconsts=len(cond_extra) + len(cond_plain),
                        body_nconsts=len(body_extra) + len(body_plain))
    return outs[n:], outs[:n]


@while_p.def_rule("key_reuse")
def _while_key_reuse(eqn: Eqn) -> key_reuse.Signature:
    """Each iteration runs the predicate and the body: neither may consume a key it closes over, nor a carried key
    the body does not replace by a fresh one, and the two may not consume the same carried key. Operands:
    (predicate constants, body constants, carries)."""
    cn, bn = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
    num_carry = len(eqn.outputs)
    body = key_reuse.looped_body(eqn.params["body_ir"], bn, num_carry, "while_loop")
    pred = key_reuse.ir_signature(eqn.params["cond_ir"], "while_loop")
    for index in pred.sinks:
        if index < cn or index - cn not in body.sources:
            raise key_reuse.KeyReuseError(
                "while_loop: key reuse (jax_debug_key_reuse): the loop predicate consumes a PRNG key "
                f"({'its constant ' + str(index) if index < cn else 'carry ' + str(index - cn)}) that no "
                "iteration replaces by a fresh one, so each test consumes it again.")
        if index - cn + bn in body.sinks:
            raise key_reuse.KeyReuseError(
                f"while_loop: key reuse (jax_debug_key_reuse): the loop predicate and body both consume carry "
                f"{index - cn}, a PRNG key.")
    sinks = {(i if i < cn else cn + bn + i - cn): m for i, m in pred.sinks.items()}
    sinks.update({cn + i: m for i, m in body.sinks.items()})
    return key_reuse.Signature(sinks, body.sources, {o: cn + i for o, i in body.forwards.items()}, body.keys)


@while_p.def_rule("dce")
def _while_dce(eqn: Eqn, used: list[bool]) -> Eqn:
    """Drop the carries that neither a used output, the predicate, nor a live carry's update needs (see
    _live_carries), then the consts no remaining body or predicate reads (the equation itself when nothing is
    dropped)."""
    nc, nb = eqn.params["cond_nconsts"], eqn.params["body_nconsts"]
    cond_ir, body_ir = eqn.params["cond_ir"], eqn.params["body_ir"]
    cond_ir, cond_reads = dce_outputs(cond_ir, [True])
    live, body_ir, body_reads = _live_carries(body_ir, nb, [u or r for u, r in zip(used, cond_reads[nc:])], [])
    keep = cond_reads[:nc] + body_reads[:nb] + live
    if all(keep):
        return eqn
    cond_ir = with_inputs(cond_ir, [v for v, k in zip(cond_ir.in_vars, cond_reads[:nc] + live) if k])
    body_ir = with_inputs(body_ir, [v for v, k in zip(body_ir.in_vars, body_reads[:nb] + live) if k])
    params = {**eqn.params, "cond_ir": cond_ir, "body_ir": body_ir, "cond_nconsts": sum(cond_reads[:nc]),
              "body_nconsts": sum(body_reads[:nb])}
    return Eqn(eqn.prim, [a for a, k in zip(eqn.inputs, keep) if k], [v for v, k in zip(eqn.outputs, live) if k],
               params, eqn.source)


def _live_carries(body_ir: IR, num_consts: int, live: list[bool], used_ys: list[bool]
                  ) -> tuple[list[bool], IR, list[bool]]:
    """The carries of a loop body ((consts, carry, x...) -> (carry, y...)) that must stay: those marked live, and
    those a live carry's update or a used y reads (a fixed point, as JAX's scan DCE). Returns them, the body
    restricted to their updates and the used ys, and which of its inputs that body reads."""
    nk = len(live)
    while True:
        body, reads = dce_outputs(body_ir, live + used_ys)
        grown = [k or r for k, r in zip(live, reads[num_consts:num_consts + nk])]
        if grown == live:
            return live, body, reads
        live = grown


def _promote_weak_carry(init: list[Any], body_outs: Sequence[ShapedArray]) -> tuple[list[Any], bool]:
    """As JAX: a weakly typed initial carry (a Python scalar) takes the dtype the body gives it, when promotion
    allows (a Python int carry may become float32; a Python float carry never becomes an integer: that stays an
    error of mismatched carry types)."""
    changed = False
    promoted = []
    for x, out in zip(init, body_outs):
        aval = aval_of(x)
        if aval.weak_type and out.dtype != aval.dtype and aval.shape == out.shape and \
                dt.promote_types((aval.dtype, True), (out.dtype, False))[0] == out.dtype:
            x, changed = lax.convert_element_type(x, out.dtype), True
        promoted.append(x)
    return promoted, changed


def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val: Any) -> Any:
    """Repeat body_fun on the carry while cond_fun(carry) is true (like jax.lax.while_loop); the carry is a
    pytree whose structure, shapes and dtypes body_fun keeps. Differentiable in forward mode, and in reverse mode
    too (JAX refuses it): the gradient of the loop unrolled, computed with checkpoints within the memory of the
    option while_grad_memory (docs/while_grad.md)."""
    return _while(cond_fun, body_fun, init_val, called_from_ember())


def _while(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init_val: Any, join: bool) -> Any:
    """while_loop. Inside a shard_map body the carry keeps its varying axes (JAX's error otherwise), unless join
    (ember's own loops): then each carry varies over those of its initial value and of the body's result; and a
    predicate varying over devices makes every carry vary (devices may stop at different steps)."""
    for name, fun in (("cond_fun", cond_fun), ("body_fun", body_fun)):
        if not callable(fun):
            raise TypeError(f"while_loop: {name} is not callable: {fun!r}")
    leaves, tree = tree_flatten(init_val)
    in_tree = tree_structure((init_val,))
    body = close_over(body_fun, in_tree, [aval_of(x) for x in leaves], "while_loop body_fun")
    leaves, changed = _promote_weak_carry(leaves, body.ir.out_avals)
    avals = [aval_of(x) for x in leaves]
    if changed:
        body = close_over(body_fun, in_tree, avals, "while_loop body_fun")
    if body.out_tree != tree:
        raise TypeError(f"while_loop: body_fun must return a carry of the input's structure {tree}, got "
                        f"{body.out_tree}")
    if not join:
        check_carry_vma("while_loop", body_fun, tree, avals, body.ir.out_avals)
    cond = close_over(cond_fun, in_tree, avals, "while_loop cond_fun")
    while True:
        varying = join_vma(cond.ir.out_avals)
        wanted = [a.vma | varying | (o.vma if join else NO_VMA) for a, o in zip(avals, body.ir.out_avals)]
        if all(w == a.vma for w, a in zip(wanted, avals)):
            break
        leaves = varying_as(leaves, wanted)
        avals = [aval_of(x) for x in leaves]
        body = close_over(body_fun, in_tree, avals, "while_loop body_fun")
        cond = close_over(cond_fun, in_tree, avals, "while_loop cond_fun")
    cconsts, bconsts, cond_ir, body_ir = cond.consts, body.consts, cond.ir, body.ir
    if varying:  # (every value in the loop varies as its step count does: the casts of what the loop closes over
        # happen outside it, so their transposes, psums, do too, where every device runs them)
        cconsts, bconsts = varying_as(cconsts, [varying] * len(cconsts)), varying_as(bconsts, [varying] * len(bconsts))
        cond_ir = retyped(cond_ir, [aval_of(c) for c in cconsts] + avals)
        body_ir = retyped(body_ir, [aval_of(c) for c in bconsts] + avals)
    body_ir = cast_outputs(body_ir, [a.vma for a in avals])
    outs = while_p.bind(*cconsts, *bconsts, *leaves, cond_ir=cond_ir, body_ir=body_ir,
                        cond_nconsts=len(cconsts), body_nconsts=len(bconsts))
    return tree.unflatten(outs)


def check_carry_vma(api: str, body_fun: Callable[..., Any], tree: Any, carry_in: Sequence[ShapedArray],
                    carry_out: Sequence[ShapedArray]) -> None:
    """JAX's error for a loop body returning a carry that varies over other mesh axes than the carry it takes
    (inside a shard_map body), or is split otherwise (explicit sharding), naming the carry by the body's first
    parameter as JAX does."""
    try:
        name = next(iter(inspect.signature(body_fun).parameters), None)
    except (TypeError, ValueError):
        name = None
    paths = []
    for path, _ in tree_leaves_with_path(tree.unflatten(list(carry_in))):
        if name:
            paths.append(f"the input carry component {name}{keystr(path)}" if path else f"the input carry {name}")
        else:
            paths.append(f"the input carry at path {keystr(path)}" if path else "the input carry")
    found = vma_mismatch("{path} has type {want} but the corresponding output carry component has type {got}", paths,
                         carry_in, carry_out, ", to the initial carry value corresponding to {path}")
    split = [(f"{path} has type {a} but the corresponding output carry component has type {b}", "")
             for path, a, b in zip(paths, carry_in, carry_out)
             if a.shape == b.shape and a.dtype == b.dtype and a.vma == b.vma and a.explicit != b.explicit]
    if split and not found:  # (JAX's explicit sharding mode: a carry's sharding is part of its type)
        raise TypeError(vma_error_text(f"{api} body function carry input and carry output must have equal types, "
                                       "but they differ:", split, "Revise the function so that all output types "
                                       "match the corresponding input types."))
    if found:
        raise TypeError(vma_error_text(f"{api} body function carry input and carry output must have equal types, "
                                       "but they differ:", found, "Revise the function so that all output types "
                                       "match the corresponding input types."))


# ---------------------------------------------------------------------------------------------------------------
# scan(consts..., carry..., xs...; body_ir, num_consts, num_carry, length, reverse)
# body_ir: (consts..., carry..., x slices...) -> (carry..., y slices...); the ys are stacked along a new axis 0.
scan_p = Primitive("scan", multiple_results=True, takes_refs=True, own_vma=True)


@scan_p.def_rule("abstract_eval")
def _scan_abstract_eval(*avals: ShapedArray, body_ir: IR, num_consts: int, num_carry: int, length: int,
                        reverse: bool) -> list[ShapedArray]:
    consts, carry, xs = _split(avals, num_consts, num_carry)
    for x in xs:
        if x.ndim == 0 or x.shape[0] != length:
            raise TypeError(f"scan: every xs must have leading dimension {length}, got {x.str_short()}")
    slices = [row_type(x) for x in xs]
    if not same_types(body_ir.in_avals, consts + carry + slices):
        raise TypeError(f"scan: the body takes {describe(body_ir.in_avals)}, given "
                        f"{describe(consts + carry + slices)}")
    carry_out, ys = body_ir.out_avals[:num_carry], body_ir.out_avals[num_carry:]
    if not same_types(carry_out, carry):
        raise TypeError(f"scan: the body must return the carry's types {describe(carry)}, but it returns "
                        f"{describe(carry_out)}")
    return list(carry) + [stacked_type(y, length) for y in ys]


@scan_p.def_rule("lowering")
def _scan_lowering(ctx: LoweringContext, *operands: str, body_ir: IR, num_consts: int, num_carry: int,
                   length: int, reverse: bool) -> list[str]:
    """A stablehlo.while over (step, consts, carry, xs, ys): each step slices x out of xs and writes y into ys."""
    nc, nk = num_consts, num_carry
    xs_avals = ctx.avals_in[nc + nk:]
    ys_avals = ctx.avals_out[nk:]
    step_aval = ShapedArray((), dt.int32)
    e = ctx.emitter
    if length == 0:  # no step: the carries as they came, empty ys (a body slicing empty xs would not verify)
        return list(operands[nc:nc + nk]) + [e.constant(0, y.update(weak_type=False)) for y in ys_avals]
    init = [e.constant(0, step_aval)] + list(operands) + [e.constant(0, y.update(weak_type=False)) for y in ys_avals]
    loop_avals = [step_aval] + list(ctx.avals_in) + list(ys_avals)

    def cond_block(body: Any, args: list[str]) -> list[str]:
        return [body.op("stablehlo.compare", [args[0], body.constant(length, step_aval)], step_aval.update(
            dtype=dt.bool_), {"comparison_direction": "#stablehlo<comparison_direction LT>",
                              "compare_type": f"#stablehlo<comparison_type {compare_type(dt.int32)}>"})]

    def body_block(body: Any, args: list[str]) -> list[str]:
        step, consts, carry, xs, ys = args[0], *_split(args[1:], nc, nk, len(xs_avals))
        index = step if not reverse else body.op(
            "stablehlo.subtract", [body.constant(length - 1, step_aval), step], step_aval)
        zero = body.constant(0, step_aval)
        slices = []
        for x, aval in zip(xs, xs_avals):
            piece = body.op("stablehlo.dynamic_slice", [x, index] + [zero] * (aval.ndim - 1),
                            aval.update(shape=(1,) + aval.shape[1:]),
                            {"slice_sizes": i64_array((1,) + aval.shape[1:])})
            slices.append(body.op("stablehlo.reshape", [piece], aval.update(shape=aval.shape[1:])))
        outs = lower_into(body, body_ir, consts + carry + slices)
        new_ys = []
        for acc, y, aval in zip(ys, outs[nk:], ys_avals):
            row = body.op("stablehlo.reshape", [y], aval.update(shape=(1,) + aval.shape[1:], weak_type=False))
            new_ys.append(body.op("stablehlo.dynamic_update_slice", [acc, row, index] + [zero] * (aval.ndim - 1),
                                  aval.update(weak_type=False)))
        next_step = body.op("stablehlo.add", [step, body.constant(1, step_aval)], step_aval)
        return [next_step] + consts + outs[:nk] + xs + new_ys

    regions = [ctx.region(loop_avals, cond_block), ctx.region(loop_avals, body_block)]
    outs = ctx.op("stablehlo.while", init, [a.update(weak_type=False) for a in loop_avals], regions=regions)
    return outs[1 + nc:1 + nc + nk] + outs[1 + len(operands):]


@scan_p.def_rule("jvp")
def _scan_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, body_ir: IR, num_consts: int, num_carry: int,
              length: int, reverse: bool) -> tuple[list[Any], list[Any]]:
    """A scan over (carry, tangents of the perturbed carries) and (xs, tangents of xs): the body's JVP. The
    perturbed carries and ys are those depending on a tangent, to a fixed point (see _while_jvp)."""
    consts, carry, xs = _split(primals, num_consts, num_carry)
    t_consts, t_carry, t_xs = _split(tangents, num_consts, num_carry)
    const_t = [t is not None and dt.is_inexact(aval_of(c).dtype) for c, t in zip(consts, t_consts)]
    xs_t = [t is not None and dt.is_inexact(aval_of(x).dtype) for x, t in zip(xs, t_xs)]
    carry_t, ys_perturbed = _perturbed_carries(body_ir, const_t, carry, t_carry, xs_t)
    jir = jvp_ir(body_ir, const_t + carry_t + xs_t)
    nc, nk, nx = len(consts), len(carry), len(xs)
    ntc, ntk = sum(const_t), sum(carry_t)
    ins = jir.in_vars
    p_c, p_k, p_x = ins[:nc], ins[nc:nc + nk], ins[nc + nk:nc + nk + nx]
    t_c, t_k, t_x = _split(ins[nc + nk + nx:], ntc, ntk)
    ny = len(body_ir.outs) - nk
    outs = jir.outs
    carry_out, ys_out, tangents_out = outs[:nk], outs[nk:nk + ny], outs[nk + ny:]
    t_carry_out = [t for t, f in zip(tangents_out[:nk], carry_t) if f]
    y_float = [dt.is_inexact(v.aval.dtype) and p for v, p in zip(body_ir.outs[nk:], ys_perturbed)]
    t_ys_out = [t for t, f in zip(tangents_out[nk:], y_float) if f]
    body = with_outputs(with_inputs(jir, p_c + t_c + p_k + t_k + p_x + t_x),
                        carry_out + t_carry_out + ys_out + t_ys_out)
    given_tk = [zeros(aval_of(c).strip_weak_type()) if t is None else t
                for c, t, f in zip(carry, t_carry, carry_t) if f]
    results = scan_p.bind(*consts, *[t for t, f in zip(t_consts, const_t) if f], *carry, *given_tk,
                          *xs, *[t for t, f in zip(t_xs, xs_t) if f], body_ir=body, num_consts=nc + ntc,
                          num_carry=nk + ntk, length=length, reverse=reverse)
    new_carry, new_tk, ys, t_ys = _split(results, nk, ntk, ny)
    tk, ty = iter(new_tk), iter(t_ys)
    return new_carry + ys, [next(tk) if f else None for f in carry_t] + [next(ty) if f else None for f in y_float]


def _perturbed_carries(body_ir: IR, const_t: list[bool], carry: Sequence[Any], t_carry: Sequence[Any],
                       xs_t: list[bool]) -> tuple[list[bool], list[bool]]:
    """(the float carries whose tangents are not zero, the body's other outputs (scan's ys) that depend on a
    tangent): a carry with an initial tangent, or one the body makes depend on a perturbed const, carry or x, to a
    fixed point."""
    init = [t is not None and dt.is_inexact(aval_of(c).dtype) for c, t in zip(carry, t_carry)]
    outs = _loop_depends(body_ir, len(const_t), len(carry), const_t + init + xs_t)
    carry_t = [i or (o and dt.is_inexact(aval_of(c).dtype)) for i, o, c in zip(init, outs, carry)]
    return carry_t, outs[len(carry):]


def _loop_depends(body_ir: IR, num_consts: int, num_carry: int, active: Sequence[bool]) -> list[bool]:
    """The body's outputs (carries, then scan's ys) that depend differentiably on the active inputs (consts,
    carries, xs), the carries to a fixed point."""
    active = list(active)
    while True:
        outs = active_outputs(body_ir, active)
        grown = [a or o for a, o in zip(active[num_consts:num_consts + num_carry], outs[:num_carry])]
        if grown == active[num_consts:num_consts + num_carry]:
            return outs
        active[num_consts:num_consts + num_carry] = grown


@scan_p.def_rule("depends")
def _scan_depends(active: list[bool], *, body_ir: IR, num_consts: int, num_carry: int, length: int,
                  reverse: bool) -> list[bool]:
    return _loop_depends(body_ir, num_consts, num_carry, active)


@while_p.def_rule("depends")
def _while_depends(active: list[bool], *, cond_ir: IR, body_ir: IR, cond_nconsts: int, body_nconsts: int
                   ) -> list[bool]:
    return _loop_depends(body_ir, body_nconsts, len(body_ir.outs), active[cond_nconsts:])


class ScanBodySplit(NamedTuple):
    """A scan body's VJP split for reverse mode (see _scan_vjp_split)."""
    wrt: tuple[bool, ...]  # the body's inputs that get cotangents (the floating-point ones)
    known: IR  # (consts, carry, x) -> (carry, y, residuals...)
    linear: IR  # (residuals..., ct_carry, ct_y) -> (cotangents of the inputs in wrt...)
    per_step: tuple[bool, ...]  # which residuals depend on the carry or x (the others on the consts only)
    invariant: IR  # (consts, carry, x) -> the residuals that are not per step (reading the consts only)


def _scan_body_split(body_ir: IR, num_consts: int, num_carry: int, active: Sequence[bool]) -> ScanBodySplit:
    """The VJP split of a scan body, computed once per (body, num_consts, differentiated inputs) (see
    TransformCache), for the inputs _differentiated picks."""
    wrt = _differentiated(body_ir, num_consts, num_carry, active)
    key = (num_consts, tuple(wrt))
    return SCAN_SPLITS.get(body_ir, key, lambda: _stage_scan_body_split(body_ir, num_consts, tuple(wrt)))


def _stage_scan_body_split(body_ir: IR, num_consts: int, wrt: tuple[bool, ...]) -> ScanBodySplit:
    n_in, n_out = len(body_ir.in_vars), len(body_ir.outs)
    joint = vjp_ir(body_ir, wrt)  # (consts, carry, x, ct_carry, ct_y) -> (outputs..., cts of the float inputs)
    known, linear, _ = split_known(joint, [False] * n_in + [True] * n_out, n_out)
    per_step = depends_on(known, [False] * num_consts + [True] * (n_in - num_consts))[n_out:]
    invariant = dce(with_outputs(known, [r for r, s in zip(known.outs[n_out:], per_step) if not s]))
    return ScanBodySplit(wrt, known, linear, tuple(per_step), invariant)


SCAN_SPLITS = TransformCache("scan vjp split")  # (body_ir, num_consts) -> ScanBodySplit


@scan_p.def_rule("vjp_split")
def _scan_vjp_split(ins: list[Any], active: list[bool], *, body_ir: IR, num_consts: int, num_carry: int,
                    length: int, reverse: bool) -> tuple[list[Any], Callable[..., list[Any]]]:
    """Reverse mode of scan without recomputation: the body's VJP is split (partial evaluation) into its primal
    part, which the forward scan runs while stacking the residuals of each step, and its linear part, which the
    backward scan runs on them. Residuals that depend on the consts only are computed once, outside the loop."""
    consts, init, xs = _split(ins, num_consts, num_carry)
    nc, nk = len(consts), len(init)
    n_out = len(body_ir.outs)
    wrt, known, linear, per_step, invariant_ir = _scan_body_split(body_ir, num_consts, num_carry, active)
    invariant = iter(eval_ir(invariant_ir, list(consts) + [zeros(v.aval) for v in known.in_vars[nc:]]))

    def forward(carry: list[Any], x: list[Any]) -> tuple[list[Any], list[Any]]:
        outs = eval_ir(known, list(consts) + list(carry) + list(x))
        return outs[:nk], outs[nk:n_out] + [r for r, s in zip(outs[n_out:], per_step) if s]

    carry_out, ys_and_res = scan_flat(forward, init, xs, length, reverse)
    ys, stacked = ys_and_res[:n_out - nk], ys_and_res[n_out - nk:]
    fixed = [None if s else next(invariant) for s in per_step]
    const_avals = [aval_of(c).strip_weak_type() for c in consts]

    def pullback(cts: list[Any], needs: list[bool]) -> list[Any]:
        ct_carry, ct_ys = cts[:nk], cts[nk:]

        def backward(state: list[Any], step: list[Any]) -> tuple[list[Any], list[Any]]:
            ct_k, acc = state[:nk], state[nk:]
            stepped, ct_y = iter(step[:len(stacked)]), step[len(stacked):]
            residuals = [next(stepped) if r is None else r for r in fixed]
            cts_in = iter(eval_ir(linear, residuals + ct_k + ct_y))
            full = [next(cts_in) if w else None for w in wrt]
            c_c, c_k, c_x = _split(full, nc, nk)
            new_acc = [a if c is None else lax.add(a, c) for a, c in zip(acc, c_c)]
            new_k = [zeros(a) if c is None else c for a, c in zip(body_ir.in_avals[nc:nc + nk], c_k)]
            ct_x = [zeros(a) if c is None else c for a, c in zip(body_ir.in_avals[nc + nk:], c_x)]
            return new_k + new_acc, ct_x

        state, ct_xs = scan_flat(backward, list(ct_carry) + [zeros(a) for a in const_avals],
                                 list(stacked) + list(ct_ys), length, not reverse)
        result = state[nk:] + state[:nk] + ct_xs
        return [c if need else None for c, need in zip(result, needs)]

    return carry_out + ys, pullback


@scan_p.def_rule("vjp")
def _scan_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], **params: Any) -> list[Any]:
    """Reverse mode outside the backward pass's forward sweep (which uses vjp_split): the same split, its
    forward scan run again for the residuals."""
    return _scan_vjp_split(ins, needs, **params)[1](cts, needs)


@scan_p.def_rule("batching")
def _scan_batching(args: list[Any], dims: list[BatchDim], *, body_ir: IR, num_consts: int, num_carry: int,
                   length: int, reverse: bool) -> tuple[list[Any], list[BatchDim]]:
    """Carries batched at axis 0; batched xs carry their batch dimension at axis 1 (after the scanned axis), so
    each slice has it at axis 0; the ys come out batched at axis 1."""
    size = batch_size(args, dims)
    consts, carry, xs = _split(args, num_consts, num_carry)
    cdims, kdims, xdims = _split(dims, num_consts, num_carry)
    slice_dims = [None if d is None else 0 for d in xdims]
    batched, natural = _batched_carries(body_ir, cdims, kdims, slice_dims, size)
    carry = [batch_at_front(x, d, size) if b else x for x, d, b in zip(carry, kdims, batched)]
    xs = [x if d is None else moveaxis(x, d, 1) for x, d in zip(xs, xdims)]
    nk = len(carry)
    out_dims = [0 if b else None for b in batched] + [None if d is None else 0 for d in natural[nk:]]
    body, _ = batch_ir(body_ir, cdims + out_dims[:nk] + slice_dims, size, out_dims)
    outs = scan_p.bind(*consts, *carry, *xs, body_ir=body, num_consts=len(consts), num_carry=nk,
                       length=length, reverse=reverse)
    return outs, out_dims[:nk] + [None if d is None else 1 for d in out_dims[nk:]]


@scan_p.def_rule("key_reuse")
def _scan_key_reuse(eqn: Eqn) -> key_reuse.Signature:
    """No iteration may consume a key the body closes over, nor a carried key it does not replace by a fresh one;
    a key of xs is a new one each iteration. Operands: (constants, carries, xs), as the body's inputs."""
    return key_reuse.looped_body(eqn.params["body_ir"], eqn.params["num_consts"], eqn.params["num_carry"], "scan")


@scan_p.def_rule("dce")
def _scan_dce(eqn: Eqn, used: list[bool]) -> Eqn:
    """Drop the unused ys and the carries that neither a used output nor a live carry's update needs (see
    _live_carries), then the consts and xs the restricted body no longer reads (the equation itself when nothing
    is dropped): the forward scan of a gradient stops stacking residuals nobody reads, the backward scan stops
    accumulating cotangents nobody asked for."""
    nc, nk = eqn.params["num_consts"], eqn.params["num_carry"]
    live, body_ir, reads = _live_carries(eqn.params["body_ir"], nc, list(used[:nk]), list(used[nk:]))
    keep = reads[:nc] + live + reads[nc + nk:]
    if all(keep) and all(used[nk:]):
        return eqn
    body_ir = with_inputs(body_ir, [v for v, k in zip(body_ir.in_vars, keep) if k])
    params = {**eqn.params, "body_ir": body_ir, "num_consts": sum(reads[:nc]), "num_carry": sum(live)}
    return Eqn(eqn.prim, [a for a, k in zip(eqn.inputs, keep) if k],
               [v for v, k in zip(eqn.outputs, live + list(used[nk:])) if k], params, eqn.source)


@scan_p.def_rule("discharge")
def _scan_discharge(ins: list[Any], refs: list[int | None], *, body_ir: IR, num_consts: int, num_carry: int,
                    length: int, reverse: bool) -> tuple[list[Any], list[Any]]:
    """The references the body reads or writes become leading carries."""
    const_ids, rest_ids = refs[:num_consts], refs[num_consts:]
    if any(i is not None for i in rest_ids):
        raise TypeError("scan: a mutable array reference cannot be a carry or scanned over (close over it instead)")
    consts, carry, xs = _split(ins, num_consts, num_carry)
    values = ref_values(ins, refs)
    n = len(values)
    plain = [x for x, i in zip(consts, const_ids) if i is None]
    value_avals = [aval_of(v).strip_weak_type() for v in values]

    slice_avals = [row_type(aval_of(x)) for x in xs]
    body_new, extra = closed_body(_refs_carried(body_ir, const_ids, len(plain), value_avals),
                                  [aval_of(x) for x in plain] + value_avals + [aval_of(c) for c in carry]
                                  + slice_avals, "scan body")
    values = [lax.convert_element_type(v, a.dtype) for v, a in zip(values, value_avals)]
    outs = scan_p.bind(*extra, *plain, *values, *carry, *xs, body_ir=body_new, num_consts=len(extra) + len(plain),
                       num_carry=n + num_carry, length=length, reverse=reverse)
    return outs[n:], outs[:n]


def scan_flat(body: Callable[[list[Any], list[Any]], tuple[list[Any], list[Any]]], init: Sequence[Any],
              xs: Sequence[Any], length: int, reverse: bool = False) -> tuple[list[Any], list[Any]]:
    """scan over flat lists: body(carry list, x slice list) -> (carry list, y list)."""
    carry_avals = [aval_of(c) for c in init]
    slice_avals = [row_type(aval_of(x)) for x in xs]
    nk = len(init)

    def flat(*leaves: Any) -> list[Any]:
        new_carry, ys = body(list(leaves[:nk]), list(leaves[nk:]))
        return list(new_carry) + list(ys)

    closed = close_over(flat, tree_structure(tuple(range(nk + len(xs)))), carry_avals + slice_avals, "scan body")
    outs = scan_p.bind(*closed.consts, *init, *xs, body_ir=closed.ir, num_consts=len(closed.consts),
                       num_carry=nk, length=length, reverse=reverse)
    return outs[:nk], outs[nk:]


def scan(f: Callable[[Any, Any], tuple[Any, Any]], init: Any, xs: Any = None, length: int | None = None,
         reverse: bool = False, unroll: int | bool = 1, _split_transpose: bool = False) -> tuple[Any, Any]:
    """Loop f over the leading axis of xs, threading a carry (like jax.lax.scan): f(carry, x) -> (carry, y);
    returns (final carry, ys stacked along a new leading axis). unroll is accepted as a hint and not used: XLA
    runs the loop. _split_transpose (JAX's experimental switch of how its transpose is arranged, which flax.nnx
    passes) changes no value: accepted, as the one way ember transposes a scan."""
    _check_unroll("scan", unroll)
    return _scan(f, init, xs, length, reverse, called_from_ember())


def _check_unroll(api: str, unroll: Any) -> None:
    """unroll: a bool or a non-negative int, as JAX requires (ember's loops take it as a hint only)."""
    if isinstance(unroll, bool):
        return
    try:
        ok = operator.index(unroll) >= 0
    except TypeError:
        ok = False
    if not ok:
        raise ValueError(f"{api}: `unroll` must be a `bool` or a non-negative `int`, got {unroll!r}")


def _scan(f: Callable[[Any, Any], tuple[Any, Any]], init: Any, xs: Any, length: int | None, reverse: bool,
          join: bool) -> tuple[Any, Any]:
    """scan. Inside a shard_map body the carry keeps its varying axes (JAX's error otherwise), unless join (ember's
    own loops): then each carry varies over those of its initial value and of the body's result."""
    if not callable(f):
        raise TypeError(f"scan: f is not callable: {f!r}")
    x_leaves, x_tree = tree_flatten(xs)
    lengths = {aval_of(x).shape[0] for x in x_leaves if aval_of(x).ndim > 0}
    if any(aval_of(x).ndim == 0 for x in x_leaves):
        raise TypeError("scan: every leaf of xs needs a leading axis to scan over; got a scalar")
    if length is not None:
        length = operator.index(length)
        lengths.add(length)
    if len(lengths) != 1:
        got = ", ".join(aval_of(x).str_short() for x in x_leaves)
        raise ValueError(f"scan: xs leaves must share their leading axis size (and match length={length}), got "
                         f"{got or 'no xs'}" + ("" if x_leaves or length is not None else "; pass length"))
    length = lengths.pop()
    c_leaves, c_tree = tree_flatten(init)
    slice_avals = [row_type(aval_of(x)) for x in x_leaves]

    def stage(carry_leaves: list[Any]) -> Any:
        return close_over(lambda carry, x: f(carry, x), tree_structure((init, xs)),
                          [aval_of(c) for c in carry_leaves] + slice_avals, "scan body")
    closed = stage(c_leaves)
    nk = len(c_leaves)
    c_leaves, changed = _promote_weak_carry(c_leaves, closed.ir.out_avals[:nk])
    if changed:
        closed = stage(c_leaves)
    out_children = closed.out_tree.children if closed.out_tree.node_type in (tuple, list) else ()
    if len(out_children) != 2:
        raise TypeError(f"scan: f must return a pair (carry, y), got {closed.out_tree}")
    if out_children[0] != c_tree:
        raise TypeError(f"scan: f must return a carry of the input's structure {c_tree}, got {out_children[0]}")
    if not join:  # (inside a shard_map body: JAX's error for a carry whose varying axes change)
        check_carry_vma("scan", f, c_tree, [aval_of(c) for c in c_leaves], closed.ir.out_avals[:nk])
    while join:  # (ember's own scans: each carry varies over its initial value's axes and the body's result's)
        wanted = [aval_of(c).vma | o.vma for c, o in zip(c_leaves, closed.ir.out_avals)]
        if all(w == aval_of(c).vma for w, c in zip(wanted, c_leaves)):
            break
        c_leaves = varying_as(c_leaves, wanted)
        closed = stage(c_leaves)
    body_ir = cast_outputs(closed.ir, [aval_of(c).vma for c in c_leaves] + [a.vma for a in closed.ir.out_avals[nk:]])
    outs = scan_p.bind(*closed.consts, *c_leaves, *x_leaves, body_ir=body_ir, num_consts=len(closed.consts),
                       num_carry=len(c_leaves), length=length, reverse=bool(reverse))
    carry = tree_unflatten(c_tree, outs[:len(c_leaves)])
    return carry, tree_unflatten(out_children[1], outs[len(c_leaves):])


def _vmapped(f: Callable[[Any], Any], xs: Any) -> Any:
    """f applied to every slice of xs along its leading axis at once (batching f's IR)."""
    leaves, tree = tree_flatten(xs)
    size = aval_of(leaves[0]).shape[0]
    closed = close_over(f, tree_structure((xs,)), [row_type(aval_of(x)) for x in leaves],
                        "map f")
    batched, _ = batch_ir(closed.ir, [None] * len(closed.consts) + [0] * len(leaves), size,
                          [0] * len(closed.ir.outs))
    return closed.out_tree.unflatten(eval_ir(batched, list(closed.consts) + leaves))


def map(f: Callable[[Any], Any], xs: Any, *, batch_size: int | None = None) -> Any:  # noqa: A001
    """f applied to each slice of xs along its leading axis, stacked (like jax.lax.map): a scan, one slice at a
    time, or with batch_size, batch_size slices at a time (vectorized), the remainder in one last batch."""
    join = called_from_ember()
    if batch_size is None:
        return _scan(lambda carry, x: (carry, f(x)), (), xs, None, False, join)[1]
    batch_size = operator.index(batch_size)
    leaves, tree = tree_flatten(xs)
    n = aval_of(leaves[0]).shape[0]
    if batch_size < 1:
        raise ValueError(f"map: batch_size must be positive, got {batch_size}")
    full, rest = divmod(n, batch_size)
    parts = []
    if full:
        blocks = tree.unflatten([lax.reshape(lax.slice_in_dim(x, 0, full * batch_size), (full, batch_size)
                                             + aval_of(x).shape[1:]) for x in leaves])
        ys = _scan(lambda carry, block: (carry, _vmapped(f, block)), (), blocks, None, False, join)[1]
        parts.append(tree_map(lambda y: lax.reshape(y, (full * batch_size,) + aval_of(y).shape[2:]), ys))
    if rest:
        parts.append(_vmapped(f, tree.unflatten([lax.slice_in_dim(x, full * batch_size, n) for x in leaves])))
    if len(parts) == 1:
        return parts[0]
    first, first_tree = tree_flatten(parts[0])
    return first_tree.unflatten([lax.concatenate([a, b], 0) for a, b in zip(first, tree_flatten(parts[1])[0])])



def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any, Any], Any], init_val: Any, *,
              unroll: int | bool | None = None) -> Any:
    """body_fun(i, val) for i in range(lower, upper) (like jax.lax.fori_loop). With static (Python int) bounds it
    is a scan; with traced bounds, a while_loop (differentiable in reverse mode too: docs/while_grad.md). unroll
    (an int or bool, a hint as scan's) needs bounds that are not traced, as in JAX."""
    if unroll is not None:
        _check_unroll("fori_loop", unroll)
        if unroll is not False and unroll != 1 and (isinstance(lower, Tracer) or isinstance(upper, Tracer)):
            raise ValueError("Can only use `unroll` in `fori_loop` if the loop bounds are statically known.")
    for name, bound in (("lower", lower), ("upper", upper)):
        if not dt.is_int(dt.dtype_and_weak(bound)[0]):
            raise TypeError(f"fori_loop: {name} must be an integer, got {bound!r} of dtype "
                            f"{dt.dtype_and_weak(bound)[0].name}")
    join = called_from_ember()
    if is_python_scalar(lower) and is_python_scalar(upper):
        trip = max(0, int(upper) - int(lower))

        def step(carry: Any, _: Any) -> tuple[Any, None]:
            i, val = carry
            return (lax.add(i, 1), body_fun(i, val)), None
        (_, result), _ = _scan(step, (_i32(int(lower)), init_val), None, trip, False, join)
        return result
    lower = lax.convert_element_type(lower, dt.int32) if not is_python_scalar(lower) else _i32(int(lower))
    upper = lax.convert_element_type(upper, dt.int32) if not is_python_scalar(upper) else _i32(int(upper))
    _, _, result = _while(lambda c: lax.lt(c[0], c[1]), lambda c: (lax.add(c[0], 1), c[1], body_fun(c[0], c[2])),
                          (lower, upper, init_val), join)
    return result


def associative_scan(fn: Callable[[Any, Any], Any], elems: Any, reverse: bool = False, axis: int = 0) -> Any:
    """The prefix scan of an associative fn along an axis of elems (a pytree of arrays), in O(log n) parallel steps
    (like jax.lax.associative_scan): fn combines two pytrees of equally shaped slices elementwise."""
    leaves, tree = tree_flatten(elems)
    if not leaves:
        raise ValueError("associative_scan: elems has no arrays")
    ndim = aval_of(leaves[0]).ndim
    axis = normalize_axis("associative_scan", axis, ndim)
    sizes = {aval_of(x).shape[axis] if aval_of(x).ndim > axis else None for x in leaves}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(f"associative_scan: every array of elems needs the same size along axis {axis}, got "
                         + ", ".join(aval_of(x).str_short() for x in leaves))
    if reverse:
        leaves = [lax.rev(x, (axis,)) for x in leaves]

    def combine(a: list[Any], b: list[Any]) -> list[Any]:
        out_leaves, out_tree = tree_flatten(fn(tree.unflatten(a), tree.unflatten(b)))
        if out_tree != tree:
            raise TypeError(f"associative_scan: fn must return the structure of elems {tree}, got {out_tree}")
        return out_leaves

    def part(xs: list[Any], start: int, stop: int | None = None, step: int = 1) -> list[Any]:
        return [lax.slice_in_dim(x, start, aval_of(x).shape[axis] if stop is None else stop, step, axis) for x in xs]

    def interleave(evens: Any, odds: Any, n: int) -> Any:
        """evens at positions 0, 2, 4, ... and odds at 1, 3, ... of an axis of length n."""
        config = [(0, 0, 0)] * aval_of(evens).ndim
        config_even, config_odd = list(config), list(config)
        config_even[axis] = (0, 1 if n % 2 == 0 else 0, 1)
        config_odd[axis] = (1, 1 if n % 2 == 1 else 0, 1)
        spread_even, spread_odd = lax.pad(evens, 0, config_even), lax.pad(odds, 0, config_odd)
        if dt.is_bool(aval_of(evens).dtype):
            return lax.bitwise_or(spread_even, spread_odd)
        return lax.add(spread_even, spread_odd)

    def scan_along(xs: list[Any]) -> list[Any]:
        n = aval_of(xs[0]).shape[axis]
        if n < 2:
            return xs
        odds = scan_along(combine(part(xs, 0, n - 1, 2), part(xs, 1, None, 2)))
        if n % 2 == 0:
            evens = combine(part(odds, 0, aval_of(odds[0]).shape[axis] - 1), part(xs, 2, None, 2))
        else:
            evens = combine(odds, part(xs, 2, None, 2))
        evens = [lax.concatenate([lax.slice_in_dim(x, 0, 1, 1, axis), e], axis) for x, e in zip(xs, evens)]
        return [interleave(e, o, n) for e, o in zip(evens, odds)]

    out = scan_along(leaves)
    if reverse:
        out = [lax.rev(x, (axis,)) for x in out]
    return tree.unflatten(out)
