"""Shared machinery of the higher-order primitives: Python functions staged into closed sub-IRs (the arrays and
tracers they close over become explicit leading inputs, passed as operands of the equation), and small IR edits
the rules need."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ember._core import IR, ShapedArray, Var, scalar_literal, stage_flat
from ember._core import dtypes as dt
from ember._core.refs import check_no_refs_returned
from ember._core.pytree import PyTreeDef, tree_flatten
from ember._transforms.passes import simplify


class Closed:
    """fn staged into an IR whose inputs are (consts..., args...): consts are the values it closed over."""

    def __init__(self, ir: IR, consts: list[Any], out_tree: PyTreeDef):
        self.ir, self.consts, self.out_tree = ir, consts, out_tree


def close_over(fn: Callable[..., Any], in_tree: PyTreeDef, in_avals: Sequence[ShapedArray], label: str,
               values: Sequence[Any] | None = None) -> Closed:
    """Stage fn(*args), args having structure in_tree, into a closed IR (see Closed); concretely with values (the
    args' values: Python control flow in fn may then depend on them, as custom rules and checkpoint allow outside
    jit; loop bodies and branches are always staged abstractly, as in JAX)."""
    trees: list[PyTreeDef] = []

    def flat(*leaves: Any) -> list[Any]:
        out_leaves, out_tree = tree_flatten(fn(*in_tree.unflatten(leaves)))
        check_no_refs_returned(label, out_leaves)
        trees.append(out_tree)
        return out_leaves

    ir = stage_flat(flat, list(in_avals), values, label=label)
    closed = simplify(IR([], [], list(ir.const_vars) + list(ir.in_vars), ir.eqns, ir.outs))
    return Closed(closed, list(ir.consts), trees[0])


def split_sizes(values: Sequence[Any], *sizes: int) -> list[list[Any]]:
    """values cut into consecutive parts of the given sizes, and the rest as a last part."""
    parts, start = [], 0
    for n in sizes:
        parts.append(list(values[start:start + n]))
        start += n
    parts.append(list(values[start:]))
    return parts


def with_inputs(ir: IR, in_vars: Sequence[Var]) -> IR:
    """The IR with other input binders (reordered, or with unused ones added)."""
    return IR(ir.const_vars, ir.consts, list(in_vars), ir.eqns, ir.outs, ir.out_tree)


def with_outputs(ir: IR, outs: Sequence[Any]) -> IR:
    return IR(ir.const_vars, ir.consts, ir.in_vars, ir.eqns, list(outs), ir.out_tree)


def int32_scalar(value: int) -> Any:
    """A strongly typed int32 scalar literal (loop counters, branch indices, error codes)."""
    return scalar_literal(value, dt.int32, weak=False)


def unused_inputs(avals: Sequence[ShapedArray]) -> list[Var]:
    return [Var(a) for a in avals]


def same_types(a: Sequence[ShapedArray], b: Sequence[ShapedArray]) -> bool:
    """Equal shapes and dtypes (weak types may differ)."""
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype for x, y in zip(a, b))


def describe(avals: Sequence[ShapedArray]) -> str:
    return "(" + ", ".join(a.str_short() for a in avals) + ")"
