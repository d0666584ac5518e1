"""Custom calls to ember's own XLA FFI handlers: emitting them, and knowing which exist in this process.

The handlers are C functions that the runtime registers with the PJRT plugin through its FFI extension
(ember/_runtime/ffi.py). Lowering rules sit below the runtime, so a family of handlers (all targets whose name
starts with a prefix, e.g. "ember_lapack_") is made known here by a *provider* the runtime installs: a function that
loads the family (its extension module, the libraries it calls) on first use and returns the names it provides, or
an empty set when it cannot (a missing extension or library). A lowering asks `available(name)` and emits
`custom_call(...)`, or falls back to XLA's own ops. (The providers' registry is ember/_hlo/targets.py, below the
lowering interpreter, which asks it too: row regions, ember/_hlo/row_fusion.py.)"""
from __future__ import annotations

from typing import Sequence

from ember._core.dtypes import ShapedArray
from ember._hlo.emitter import emit_custom_call, row_major, value_rank
from ember._hlo.targets import available, set_provider, unavailable_reason
from ember._hlo.lower import EFFECT, LoweringContext

def column_major(rank: int) -> tuple[int, ...]:
    """The minor-to-major layout of an array whose last two dimensions are a column-major (Fortran) matrix and
    whose leading dimensions are a row-major batch of them (row-major for rank < 2)."""
    if rank < 2:
        return row_major(rank)
    return (rank - 2, rank - 1) + tuple(range(rank - 3, -1, -1))


def rank_of(ctx: LoweringContext, value: str) -> int:
    """The rank of an SSA value of the body being emitted (ember._hlo.emitter.value_rank)."""
    return value_rank(ctx.emitter, value)


def custom_call(ctx: LoweringContext, target: str, operands: Sequence[str], results: Sequence[ShapedArray],
                attrs: dict[str, int] | None = None, operand_layouts: Sequence[Sequence[int]] | None = None,
                result_layouts: Sequence[Sequence[int]] | None = None, *, has_side_effect: bool = False,
                ordered: bool = False, once: bool = False) -> list[str]:
    """Emit `stablehlo.custom_call @target` to a typed FFI handler (api_version 4): integer attrs are passed to
    the handler as int64 scalars (its call frame's attributes, sorted by name); the layouts (minor-to-major, one
    per operand/result; row-major when omitted) are the memory layouts XLA hands the handler its buffers in.

    has_side_effect: XLA keeps the call though its results are unused, and never merges two of them. ordered: the
    call also takes and returns the body's effect value (an int8 scalar, see LoweringContext.effect), so
    XLA runs the ordered calls of a body in program order; the handler is told by the attributes effect_in and
    effect_out. A call without results returns an effect value (unused unless ordered), as XLA needs a result."""
    if operand_layouts is None:
        operand_layouts = [row_major(rank_of(ctx, o)) for o in operands]
    result_layouts = [row_major(a.ndim) for a in results] if result_layouts is None else result_layouts
    effect_out = ordered or not results  # (once: see emit_custom_call)
    if ordered or effect_out:
        attrs = {**(attrs or {}), "effect_in": int(ordered), "effect_out": int(effect_out)}
    out = emit_custom_call(ctx.emitter, target, ([ctx.effect] if ordered else []) + list(operands),
                           ([EFFECT] if effect_out else []) + list(results), attrs or {}, has_side_effect,
                           ([()] if ordered else []) + list(operand_layouts),
                           ([()] if effect_out else []) + list(result_layouts), once=once)
    if ordered:
        ctx.effect = out[0]
    return out[1:] if effect_out else out


__all__ = ["available", "column_major", "custom_call", "rank_of", "row_major", "set_provider", "unavailable_reason"]
