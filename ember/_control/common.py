"""Shared machinery of the higher-order primitives: Python functions staged into closed sub-IRs (the arrays and
tracers they close over become explicit leading inputs, passed as operands of the equation), and small IR edits
the rules need."""
from __future__ import annotations

import sys
from typing import Any, Callable, Sequence

from ember._core import IR, ShapedArray, Var, aval_of, eval_ir, scalar_literal, stage_flat
from ember._core import dtypes as dt
from ember._core.dtypes import ordered_axes
from ember._core.primitive import EMBER_DIR
from ember._core.vma import pvary_p
from ember._core.refs import check_no_refs_returned
from ember._core.pytree import PyTreeDef, tree_flatten
from ember._transforms import key_reuse
from ember._transforms.passes import simplify


class Closed:
    """fn staged into an IR whose inputs are (consts..., args...): consts are the values it closed over."""

    def __init__(self, ir: IR, consts: list[Any], out_tree: PyTreeDef):
        self.ir, self.consts, self.out_tree = ir, consts, out_tree


def close_over(fn: Callable[..., Any], in_tree: PyTreeDef, in_avals: Sequence[ShapedArray], label: str,
               values: Sequence[Any] | None = None, evaluate: Callable[..., list[Any]] | None = None) -> Closed:
    """Stage fn(*args), args having structure in_tree, into a closed IR (see Closed); concretely with values (the
    args' values: Python control flow in fn may then depend on them, as custom rules and checkpoint allow outside
    jit; loop bodies and branches are always staged abstractly, as in JAX)."""
    trees: list[PyTreeDef] = []

    def flat(*leaves: Any) -> list[Any]:
        out_leaves, out_tree = tree_flatten(fn(*in_tree.unflatten(leaves)))
        check_no_refs_returned(label, out_leaves)
        trees.append(out_tree)
        return out_leaves

    ir = stage_flat(flat, list(in_avals), values, label=label, evaluate=evaluate)
    whole = IR([], [], list(ir.const_vars) + list(ir.in_vars), ir.eqns, ir.outs)
    closed = simplify(whole)
    if key_reuse.checking():  # (before simplify merges two equal draws, or drops an unused one)
        key_reuse.remember(closed, key_reuse.ir_signature(whole, label))
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


def same_types(a: Sequence[ShapedArray], b: Sequence[ShapedArray], varying: bool = True) -> bool:
    """Equal shapes, dtypes and (unless not varying) varying axes; weak types may differ."""
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype and (not varying or x.vma == y.vma)
                                    for x, y in zip(a, b))


def called_from_ember(depth: int = 2) -> bool:
    """Whether the function calling this one was called by ember's own code (a rule, a library function), rather
    than by the user: inside a shard_map body, ember's own loops and branches join the varying axes of their
    carries and results (sound: a value the same on every device may always be treated as varying), where a user's
    get JAX's error asking for an explicit pcast."""
    return sys._getframe(depth).f_code.co_filename.startswith(EMBER_DIR)


def cast_outputs(ir: IR, vmas: Sequence[frozenset]) -> IR:
    """ir with each output that varies over fewer axes than its entry of vmas cast (pcast) to vary over them (a
    body's result typed as its loop carry, a branch's as the joined type of the branches, a zero tangent's as its
    primal's); ir itself when nothing needs a cast."""
    if not any(v - a.vma for a, v in zip(ir.out_avals, vmas)):
        return ir
    cast = stage_flat(lambda *args: varying_as(eval_ir(ir, list(args)), vmas), ir.in_avals)
    return IR(cast.const_vars, cast.consts, cast.in_vars, cast.eqns, cast.outs, ir.out_tree)


def varying_as(values: Sequence[Any], vmas: Sequence[frozenset]) -> list[Any]:
    """values, each cast (pcast) to vary over its axes in vmas too."""
    return [x if not (v - aval_of(x).vma) else pvary_p.bind(x, axes=ordered_axes(v - aval_of(x).vma))
            for x, v in zip(values, vmas)]


def retyped(ir: IR, in_avals: Sequence[ShapedArray]) -> IR:
    """ir staged again on inputs of these types (the same shapes and dtypes, varying over more axes): every value
    is typed anew, and the casts it needed where invariant values met varying ones become no-ops; ir itself when
    the types are its own."""
    if list(in_avals) == ir.in_avals:
        return ir
    new = stage_flat(lambda *args: eval_ir(ir, list(args)), in_avals)
    return IR(new.const_vars, new.consts, new.in_vars, new.eqns, new.outs, ir.out_tree)


def vma_mismatch(what: str, paths: Sequence[str], want: Sequence[ShapedArray], got: Sequence[ShapedArray],
                 fix_want: str, fix_got: str = "") -> list[tuple[str, str]]:
    """For each position where got varies over other axes than want: (JAX's sentence saying so, the pcast that
    would fix it: fix_want names the value of want to cast when got varies over more axes, fix_got the value of got
    in the other case, each with its leading separator), what naming the values ("{path} has type {want} but the
    corresponding output carry component has type {got}")."""
    found = []
    for path, a, b in zip(paths, want, got):
        if a.vma != b.vma and a.shape == b.shape and a.dtype == b.dtype:
            more, fix = (b.vma - a.vma, fix_want) if b.vma - a.vma else (a.vma - b.vma, fix_got)
            found.append((what.format(path=path, want=a.str_short(), got=b.str_short())
                          + ", so the manual axis types do not match",
                          f"applying `ember.lax.pcast(..., {ordered_axes(more)}, to='varying')`"
                          + fix.format(path=path) if fix else ""))
    return found


def vma_error_text(head: str, found: list[tuple[str, str]], tail: str) -> str:
    """JAX's error for loop carries or branch results whose varying axes differ (see vma_mismatch)."""
    diffs = [d for d, _ in found]
    differences = (diffs[0][0].upper() + diffs[0][1:] + ".\n" if len(diffs) == 1
                   else "\n".join(f"  * {d};" for d in diffs[:-1]) + f"\n  * {diffs[-1]}.\n")
    fixes = [f for _, f in found if f]
    hint = ""
    if fixes:
        hint = (f"This might be fixed by {fixes[0]}.\n" if len(fixes) == 1 else
                "This might be fixed by:\n" + "\n".join(f"  * {f};" for f in fixes[:-1]) + f"\n  * {fixes[-1]}.\n")
        hint += "See docs/sharding.md (varying manual axes) for more information.\n\n"
    return f"{head}\n\n{differences}\n{hint}{tail}"


def describe(avals: Sequence[ShapedArray]) -> str:
    return "(" + ", ".join(a.str_short() for a in avals) + ")"
