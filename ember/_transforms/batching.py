"""Batching (vmap) as an IR -> IR transformation: every value carries a batch dimension (an int) or none (None,
not batched); each equation with a batched input calls its primitive's batching rule, the others run as they are,
so unbatched values stay unbatched. The result is an ordinary IR.

A vmap may name its axis (`vmap(f, axis_name='i')`): collectives over that name inside f then mean their batched
meaning (psum over 'i' sums over the batch). The pass records the name and size of the axis it batches in the axis
environment (ember._core.axes.batching_axis), where the collectives' rules read it, and sends equations acting
over that name to their rule even when no input is batched (axis_index has none). Rules of higher-order
primitives that batch their sub-IRs with batch_ir inherit the name of the pass they run in."""
from __future__ import annotations

from typing import Any, Sequence

from ember._core import IR, Eqn, ShapedArray, aval_of, stage_flat
from ember._core.axes import (NAMED_AXIS_PRIMITIVES, active_batching_axis, batching_axis, current_batching_axis,
                              current_spmd_axes, uses_axis)
from ember._core.eval import eval_ir, eval_ir_annotated
from ember._core.profile import profiled
from ember._prims.shape import BatchDim, batch_at_front, batch_size, moveaxis
from ember._transforms.cache import TransformCache
from ember._transforms.discharge import hoisted
from ember._transforms.passes import simplify


class _Inherit:
    def __repr__(self) -> str:
        return "INHERIT"


INHERIT: Any = _Inherit()  # as an axis name: the name of the batching pass running now


def axis_name_of(axis_name: Any) -> Any:
    """The axis name a batching asks for: INHERIT means the name of the pass running now (None outside one)."""
    if axis_name is not INHERIT:
        return axis_name
    active = active_batching_axis()
    return None if active is None else active[0]


def _batching_rule(eqn: Eqn, args: list[Any], dims: list[BatchDim]) -> tuple[Sequence[Any], Sequence[BatchDim]]:
    if all(d is None for d in dims) and eqn.prim not in NAMED_AXIS_PRIMITIVES:
        # a higher-order equation whose IRs act over the batched axis, no input batched: batch its first input
        if not args:
            raise NotImplementedError(f"vmap of {eqn.prim.name}: its body acts over the named axis being mapped "
                                      "but it has no operand to batch")
        size = current_batching_axis()[1]
        args, dims = [batch_at_front(args[0], None, size)] + list(args[1:]), [0] + list(dims[1:])
    return eqn.prim.rule("batching", "vmap")(args, dims, **eqn.params)


def spmd_of(spmd: Any) -> tuple[str, ...] | None:
    """The spmd_axis_name a batching asks for: INHERIT means that of the pass running now (None outside one)."""
    return current_spmd_axes() if spmd is INHERIT else spmd


def batch_pass(ir: IR, args: Sequence[Any], dims: Sequence[BatchDim], axis_name: Any = INHERIT,
               size: int | None = None, spmd: Any = INHERIT) -> tuple[list[Any], list[BatchDim]]:
    """Evaluate ir in the current context on args batched along dims (over size members, by default the size of
    a batched argument) as the axis axis_name (INHERIT: the name of the pass running now), the batch split over
    the mesh axes spmd (vmap's spmd_axis_name; INHERIT: the pass's); returns (outputs, their batch dims)."""
    name = axis_name_of(axis_name)
    spmd = spmd_of(spmd)
    if size is None:
        size = batch_size(args, dims) if any(d is not None for d in dims) else current_batching_axis()[1]
    always = None if name is None else (lambda eqn: uses_axis(eqn.prim, eqn.params, name))
    with batching_axis(name, size, spmd):
        return eval_ir_annotated(ir, args, dims, _batching_rule, always)


def batched_aval(aval: ShapedArray, dim: BatchDim, size: int) -> ShapedArray:
    if dim is None:
        return aval
    return aval.update(shape=aval.shape[:dim] + (size,) + aval.shape[dim:])


def batch_ir(ir: IR, in_dims: Sequence[BatchDim], axis_size: int, out_dims: Sequence[BatchDim] | None = None,
             axis_name: Any = INHERIT, spmd: Any = INHERIT) -> tuple[IR, list[BatchDim]]:
    """ir batched along in_dims (inputs with dim None are not batched) over axis_size members, the batch being the
    named axis axis_name (None: unnamed; INHERIT: the name of the batching pass running now, as the rules of
    higher-order primitives want for their sub-IRs). Returns the new IR and the batch dimension of each output:
    the natural one, or out_dims when given (an unbatched output asked for a dimension is broadcast to it).
    Computed once per (ir, request) (see TransformCache): the natural batching, then for out_dims a move of its
    outputs."""
    name, spmd = axis_name_of(axis_name), spmd_of(spmd)
    request = (tuple(in_dims), axis_size, name) if spmd is None else (tuple(in_dims), axis_size, name, spmd)
    natural, found = BATCHED.get(ir, request, lambda: stage_batched(ir, in_dims, axis_size, name, spmd))
    if out_dims is None or tuple(out_dims) == found:
        return natural, list(found)
    wanted = tuple(out_dims)
    moved = BATCHED_TO.get(ir, request + (wanted,), lambda: with_out_dims(natural, found, axis_size, wanted))
    return moved, list(wanted)


@profiled("transform", "vmap")
def stage_batched(ir: IR, in_dims: Sequence[BatchDim], axis_size: int, axis_name: Any = None,
                  spmd: tuple[str, ...] | None = None) -> tuple[IR, tuple[BatchDim, ...]]:
    """The batching of ir itself (uncached; see batch_ir): the batched IR and its outputs' natural batch dims."""
    ir = hoisted(ir)
    found: list[BatchDim] = []

    def fn(*args: Any) -> list[Any]:
        outs, dims = batch_pass(ir, args, in_dims, axis_name, axis_size, spmd)
        found.extend(dims)
        return outs

    avals = [batched_aval(a, d, axis_size) for a, d in zip(ir.in_avals, in_dims)]
    return simplify(stage_flat(fn, avals)), tuple(found)


def with_out_dims(batched: IR, dims: Sequence[BatchDim], axis_size: int, out_dims: Sequence[BatchDim]) -> IR:
    """batched (outputs batched along dims) with each output moved to its dimension in out_dims."""
    def fn(*args: Any) -> list[Any]:
        moved = []
        for i, (x, d, want) in enumerate(zip(eval_ir(batched, args), dims, out_dims)):
            if want is None:
                if d is not None:
                    raise ValueError(f"vmap: output {i} is batched, so its out_axes cannot be None")
                moved.append(x)
            else:
                front = batch_at_front(x, d, axis_size)
                moved.append(moveaxis(front, 0, want % aval_of(front).ndim))
        return moved

    return simplify(stage_flat(fn, batched.in_avals))


BATCHED = TransformCache("batch_ir")  # (ir, (in_dims, axis_size, axis_name)) -> (batched IR, natural out dims)
BATCHED_TO = TransformCache("batch_ir out_dims")  # (ir, (in_dims, axis_size, axis_name, out_dims)) -> batched IR
