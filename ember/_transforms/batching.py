"""Batching (vmap) as an IR -> IR transformation: every value carries a batch dimension (an int) or none (None,
not batched); each equation with a batched input calls its primitive's batching rule, the others run as they are,
so unbatched values stay unbatched. The result is an ordinary IR."""
from __future__ import annotations

from typing import Any, Sequence

from ember._core import IR, Eqn, ShapedArray, aval_of, stage_flat
from ember._core.eval import eval_ir, eval_ir_annotated
from ember._core.profile import profiled
from ember._prims.shape import BatchDim, batch_at_front, moveaxis
from ember._transforms.cache import TransformCache
from ember._transforms.passes import simplify


def _batching_rule(eqn: Eqn, args: list[Any], dims: list[BatchDim]) -> tuple[Sequence[Any], Sequence[BatchDim]]:
    return eqn.prim.rule("batching", "vmap")(args, dims, **eqn.params)


def batch_pass(ir: IR, args: Sequence[Any], dims: Sequence[BatchDim]) -> tuple[list[Any], list[BatchDim]]:
    """Evaluate ir in the current context on args batched along dims; returns (outputs, their batch dims)."""
    return eval_ir_annotated(ir, args, dims, _batching_rule)


def batched_aval(aval: ShapedArray, dim: BatchDim, size: int) -> ShapedArray:
    if dim is None:
        return aval
    return aval.update(shape=aval.shape[:dim] + (size,) + aval.shape[dim:])


def batch_ir(ir: IR, in_dims: Sequence[BatchDim], axis_size: int, out_dims: Sequence[BatchDim] | None = None
             ) -> tuple[IR, list[BatchDim]]:
    """ir batched along in_dims (inputs with dim None are not batched) over axis_size members. Returns the new IR
    and the batch dimension of each output: the natural one, or out_dims when given (an unbatched output asked for
    a dimension is broadcast to it). Computed once per (ir, request) (see TransformCache): the natural batching,
    then for out_dims a move of its outputs."""
    request = (tuple(in_dims), axis_size)
    natural, found = BATCHED.get(ir, request, lambda: stage_batched(ir, in_dims, axis_size))
    if out_dims is None or tuple(out_dims) == found:
        return natural, list(found)
    wanted = tuple(out_dims)
    moved = BATCHED_TO.get(ir, request + (wanted,), lambda: with_out_dims(natural, found, axis_size, wanted))
    return moved, list(wanted)


@profiled("transform", "vmap")
def stage_batched(ir: IR, in_dims: Sequence[BatchDim], axis_size: int) -> tuple[IR, tuple[BatchDim, ...]]:
    """The batching of ir itself (uncached; see batch_ir): the batched IR and its outputs' natural batch dims."""
    found: list[BatchDim] = []

    def fn(*args: Any) -> list[Any]:
        outs, dims = batch_pass(ir, args, in_dims)
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


BATCHED = TransformCache("batch_ir")  # (ir, (in_dims, axis_size)) -> (batched IR, natural out dims)
BATCHED_TO = TransformCache("batch_ir out_dims")  # (ir, (in_dims, axis_size, out_dims)) -> batched IR
