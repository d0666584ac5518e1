"""IR -> IR clean-up and splitting passes: dead-code elimination, common subexpressions, constant folding and
known/unknown partitioning. The user-facing list of the passes that take an IR alone is ember.passes."""
from __future__ import annotations

from typing import Any, Callable, Hashable, Sequence

import math

import numpy as np

from ember._core import IR, Atom, Eqn, Literal, Var
from ember._core.ir import sub_irs
from ember._core.primitive import EAGER, has_effects


def dce(ir: IR) -> IR:
    """Drop equations and constants that no output depends on, except effectful ones (has_effects: a callback, or
    a loop or branch calling one), which stay with what they read. A primitive with
    a "dce" hook (one carrying a sub-IR) may also shrink itself to the outputs that are used, and so need fewer
    inputs. One sweep from the outputs back is already a fixed point: every consumer of an equation's outputs is
    settled (kept, shrunk or dropped) before the equation itself, so what a removed consumer no longer needs is
    dead when its producer is reached. (Loop hooks iterate over their carries to their own fixed point.)"""
    live: set[Var] = {a for a in ir.outs if isinstance(a, Var)}
    kept: list[Eqn] = []
    for eqn in reversed(ir.eqns):
        used = [v in live for v in eqn.outputs]
        if not any(used) and not has_effects(eqn.prim, eqn.params):
            continue
        hook = eqn.prim.rules.get("dce")
        if hook is not None:
            eqn = hook(eqn, used)  # the equation restricted to the used outputs (and the inputs they need)
            if eqn is None:  # (a hook may find the equation not needed at all: a JAX dce rule's None)
                continue
        live.update(a for a in eqn.inputs if isinstance(a, Var))
        kept.append(eqn)
    kept.reverse()
    consts = [(v, c) for v, c in zip(ir.const_vars, ir.consts) if v in live]
    return IR([v for v, _ in consts], [c for _, c in consts], ir.in_vars, kept, ir.outs, ir.out_tree)


def dce_outputs(ir: IR, used_outputs: Sequence[bool]) -> tuple[IR, list[bool]]:
    """ir restricted to the outputs marked used, dead code dropped (its inputs unchanged), and which of its inputs
    that restricted IR still reads: what a dce hook needs to know of a sub-IR."""
    pruned = dce(IR(ir.const_vars, ir.consts, ir.in_vars, ir.eqns, [a for a, u in zip(ir.outs, used_outputs) if u],
                    ir.out_tree))
    read = {a for eqn in pruned.eqns for a in eqn.inputs if isinstance(a, Var)}
    read.update(a for a in pruned.outs if isinstance(a, Var))
    return pruned, [v in read for v in pruned.in_vars]


def depends_on(ir: IR, mask: Sequence[bool]) -> list[bool]:
    """For each output of ir: whether it depends on the inputs marked in mask (through any equation, an equation's
    every output on its every input: an over-approximation, so an output it says does not depend on them never
    does)."""
    marked = {v for v, m in zip(ir.in_vars, mask) if m}
    for eqn in ir.eqns:
        if any(a in marked for a in eqn.inputs if isinstance(a, Var)):
            marked.update(eqn.outputs)
    return [isinstance(a, Var) and a in marked for a in ir.outs]


def split_known(ir: IR, unknown_inputs: Sequence[bool], num_known_outs: int,
                recompute: Callable[[Eqn], bool] | None = None) -> tuple[IR, IR, int]:
    """Partition ir into a known part, computable from the inputs not marked unknown, and an unknown part.

    The first num_known_outs outputs must be known. Returns (known, unknown, num_residuals):
    known:   (consts; known inputs) -> (first num_known_outs outputs..., residuals...)
    unknown: (residuals..., unknown inputs...) -> (the remaining outputs...)
    With recompute, a residual whose known equation satisfies it is not saved: the unknown part recomputes it from
    what it reads, which become residuals in turn (unless recomputed too; see rematerialize)."""
    unknown: set[Var] = {v for v, u in zip(ir.in_vars, unknown_inputs) if u}
    known_eqns: list[Eqn] = []
    unknown_eqns: list[Eqn] = []
    for eqn in ir.eqns:
        if any(isinstance(a, Var) and a in unknown for a in eqn.inputs):
            unknown_eqns.append(eqn)
            unknown.update(eqn.outputs)
        else:
            known_eqns.append(eqn)
    for atom in ir.outs[:num_known_outs]:
        if isinstance(atom, Var) and atom in unknown:
            raise ValueError("split_known: a leading output depends on unknown inputs")
    residuals: dict[Var, None] = {}
    used_later = [a for eqn in unknown_eqns for a in eqn.inputs] + list(ir.outs[num_known_outs:])
    for atom in used_later:
        if isinstance(atom, Var) and atom not in unknown:
            residuals[atom] = None
    res = list(residuals)
    if recompute is not None:
        recomputed, res = rematerialize(known_eqns, res, ir.outs[:num_known_outs], recompute)
        unknown_eqns = recomputed + unknown_eqns
    known_ins = [v for v, u in zip(ir.in_vars, unknown_inputs) if not u]
    unknown_ins = [v for v, u in zip(ir.in_vars, unknown_inputs) if u]
    known = IR(ir.const_vars, ir.consts, known_ins, known_eqns, list(ir.outs[:num_known_outs]) + res)
    rest = IR([], [], res + unknown_ins, unknown_eqns, ir.outs[num_known_outs:])
    return dce(known), dce(rest), len(res)


def rematerialize(known_eqns: Sequence[Eqn], residuals: Sequence[Var], known_outs: Sequence[Atom],
                  recompute: Callable[[Eqn], bool]) -> tuple[list[Eqn], list[Var]]:
    """Which known equations the unknown part of split_known recomputes, and the residuals it then reads.

    A residual made by an equation that satisfies recompute is recomputed (with, transitively, the equations of its
    inputs that satisfy it too), except a known output: that one is computed and kept anyway. Returns the equations
    to recompute, in program order, and the residuals: the vars those equations read that are not recomputed, and
    the residuals that were never candidates, in first-use order. Each equation is visited once: linear."""
    producer = {v: eqn for eqn in known_eqns for v in eqn.outputs}
    outs = {a for a in known_outs if isinstance(a, Var)}
    chosen: set[Eqn] = set()
    saved: dict[Var, None] = {}
    seen: set[Var] = set()
    stack = list(reversed(residuals))
    while stack:
        var = stack.pop()
        if var in seen:
            continue
        seen.add(var)
        eqn = producer.get(var)
        if eqn is None or var in outs or not recompute(eqn):
            saved[var] = None
            continue
        chosen.add(eqn)
        stack.extend(a for a in reversed(eqn.inputs) if isinstance(a, Var) and a not in seen)
    return [eqn for eqn in known_eqns if eqn in chosen], list(saved)


def recompute_cheap(eqn: Eqn) -> bool:
    """The recompute policy of `ember.vjp` outside jit: values of elementwise primitives (Primitive.elementwise) are
    recomputed in the pullback rather than saved. The forward program then outputs fewer residuals (less memory
    between the two calls), and XLA is not asked to compile a program whose outputs are every step of a long
    elementwise chain: its CPU fusion duplicates the chain into each output's fusion, quadratic in the length. The
    pullback recomputes each such value once, fused with the cotangent computation that reads it."""
    return eqn.prim.elementwise


def _literal_key(atom: Literal) -> tuple[Any, ...]:
    value = atom.value
    return ("lit", type(value), repr(value), atom.aval)


def cse(ir: IR) -> IR:
    """Common-subexpression elimination: an equation equal to an earlier one (same primitive, params and
    inputs) is dropped and its outputs renamed to the earlier outputs; effectful equations are never merged."""
    rename: dict[Var, Var] = {}
    seen: dict[Hashable, Eqn] = {}
    kept: list[Eqn] = []

    def atom(a: Atom) -> Atom:
        return rename.get(a, a) if isinstance(a, Var) else a

    for eqn in ir.eqns:
        inputs = [atom(a) for a in eqn.inputs]
        if has_effects(eqn.prim, eqn.params):
            kept.append(Eqn(eqn.prim, inputs, eqn.outputs, eqn.params, eqn.source))
            continue
        try:
            key: Hashable = (eqn.prim, tuple(_literal_key(a) if isinstance(a, Literal) else a for a in inputs),
                             tuple(sorted(eqn.params.items())))
            hash(key)
        except TypeError:
            key = None
        earlier = seen.get(key) if key is not None else None
        if earlier is not None:
            rename.update(zip(eqn.outputs, earlier.outputs))
            continue
        new = Eqn(eqn.prim, inputs, eqn.outputs, eqn.params, eqn.source)
        if key is not None:
            seen[key] = new
        kept.append(new)
    return IR(ir.const_vars, ir.consts, ir.in_vars, kept, [atom(a) for a in ir.outs], ir.out_tree)


def simplify(ir: IR) -> IR:
    """The clean-up applied to transformed IRs: CSE, then DCE."""
    return dce(cse(ir))


def fold_constants(ir: IR, max_growth: int = 1) -> IR:
    """Evaluate now every equation whose inputs are all known (literals, the IR's constants, results of equations
    folded before) and whose results are no larger than max_growth times its largest input (so that folding never
    turns a scalar into a big constant: a broadcast stays an equation); its results become constants of the IR
    (scalars: literals). Equations with effects or carrying IRs (loops, branches, custom rules) stay; so does the
    IR's interface (inputs, outputs, out_tree). The IR's constants that no equation reads any more are dropped
    (dce). XLA folds constants itself: this pass is for reading and transforming IRs, not for speed."""
    known: dict[Var, Any] = dict(zip(ir.const_vars, ir.consts))
    new_consts: dict[Var, Any] = {}
    rename: dict[Var, Atom] = {}
    kept: list[Eqn] = []

    def atom(a: Atom) -> Atom:
        return rename.get(a, a) if isinstance(a, Var) else a

    def value(a: Atom) -> Any:
        return a.value if isinstance(a, Literal) else known.get(a, _UNKNOWN)

    for eqn in ir.eqns:
        inputs = [atom(a) for a in eqn.inputs]
        values = [value(a) for a in inputs]
        size_in = max((math.prod(a.aval.shape) for a in inputs), default=1)
        foldable = (all(v is not _UNKNOWN for v in values) and not has_effects(eqn.prim, eqn.params)
                    and not sub_irs(eqn.params)
                    and all(math.prod(v.aval.shape) <= max(size_in, 1) * max_growth for v in eqn.outputs))
        if not foldable:
            kept.append(Eqn(eqn.prim, inputs, eqn.outputs, eqn.params, eqn.source))
            continue
        results = EAGER.apply(eqn.prim, values, eqn.params)
        for var, result in zip(eqn.outputs, results):
            if var.aval.shape == ():
                rename[var] = Literal(np.asarray(result)[()], var.aval)
            else:
                known[var] = new_consts[var] = result
    if not new_consts and not rename:
        return ir
    const_vars = list(ir.const_vars) + list(new_consts)
    consts = list(ir.consts) + list(new_consts.values())
    return dce(IR(const_vars, consts, ir.in_vars, kept, [atom(a) for a in ir.outs], ir.out_tree))


_UNKNOWN = object()
