"""Varying manual axes: how values inside a shard_map body are typed by the mesh axes they vary over (as JAX's
check_vma=True typing, `typeof(x).mat.varying`).

Every aval carries a set of axis names, its vma (ShapedArray.vma): the manual mesh axes along which the value may
differ from device to device. A shard_map body's input split along an axis varies over it; one its in_spec leaves
unsplit along an axis is the same on every device along it (invariant). Operations keep the types honest:

- a primitive computing on operands varying over different axes first casts the less varying ones with pcast (no
  data moves: every device keeps its value, now typed as possibly differing), and its result varies over the
  union (Primitive.out_avals; the cast is inserted by staging, Builder.add_eqn through cast_operands);
- psum/pmean/pmax/pmin over an axis make a value invariant along it; all_gather, psum_scatter, ppermute, all_to_all
  keep it varying; axis_index varies over its axis (ember._prims.collectives);
- shard_map checks that a result varies only over the axes its out_spec names (with check_vma=True).

The types decide derivatives, which is why they exist: pcast's transpose is a psum, so the gradient of an
invariant parameter used by every device is the sum of the devices' contributions, and psum's transpose is a
pcast. This module holds what staging needs (the pcast primitive's definition and type rule, the cast of
operands, which axes are typed); pcast's other rules are registered beside psum's, in ember._prims.collectives.
Scalar literals are constants every device holds alike: they meet any operand without a cast."""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Hashable, Iterable, Iterator, Sequence

from ember._core.dtypes import ShapedArray, join_vma, ordered_axes
from ember._core.ir import Atom, Eqn, Var
from ember._core.primitive import Primitive, user_source

AxisNames = tuple[Hashable, ...]


# pvary(x; axes): x, typed as varying over axes too (JAX's pcast(x, axes, to='varying') binds its pvary, named so).
# No data moves.
pvary_p = Primitive("pvary", own_vma=True, checks=())


@pvary_p.def_rule("abstract_eval")
def _pvary_abstract_eval(x: ShapedArray, *, axes: AxisNames) -> ShapedArray:
    return x.with_vma(x.vma | frozenset(axes))


class _TypedAxes(threading.local):
    def __init__(self) -> None:
        self.stack: list[frozenset] = []  # per shard_map body being staged, its axes (if check_vma), innermost last


_TYPED = _TypedAxes()


@contextlib.contextmanager
def typed_axes(names: Iterable[Hashable]) -> Iterator[None]:
    """While a shard_map body is staged: its mesh axes are typed with check_vma=True (collectives over them make
    and need varying values; axis_index varies over them), none are (names empty) with check_vma=False."""
    _TYPED.stack.append(frozenset(names))
    try:
        yield
    finally:
        _TYPED.stack.pop()


def is_typed(name: Hashable) -> bool:
    """Whether a named axis is a manual mesh axis of the innermost shard_map body being staged, with
    check_vma=True (a vmap's axis name is not typed)."""
    stack = _TYPED.stack
    return bool(stack) and name in stack[-1]


def typed(axes: Sequence[Hashable]) -> AxisNames:
    """The axes among `axes` that are typed now (is_typed), in their order."""
    return tuple(a for a in axes if is_typed(a)) if _TYPED.stack else ()


def cast_operands(builder: Any, inputs: list[Atom], vma: frozenset) -> list[Atom]:
    """inputs with each variable varying over fewer axes than vma replaced by its pcast (an equation recorded into
    builder, a staging); literals are left as they are."""
    return [_cast(builder, atom, vma) if type(atom) is Var and atom.aval.vma != vma else atom for atom in inputs]


_LOOK_BACK = 4  # how many of the staging's last equations _cast looks through for a broadcast making its operand


def _cast(builder: Any, atom: Var, vma: frozenset) -> Var:
    """atom, cast to vary over vma. An operand the staging just broadcast (numpy's broadcasting, right before the
    operation) is cast before its broadcast instead, which is broadcast again: the cast's transpose, a psum, then
    sums the small value's cotangent, not the broadcast one's (the gradient of a bias inside a shard_map body
    all-reduces its row, not a row per example; JAX sums the broadcast value)."""
    for eqn in builder.eqns[-1:-_LOOK_BACK - 1:-1]:
        if (eqn.outputs[0] is atom and eqn.prim.moves_data and len(eqn.inputs) == 1 and type(eqn.inputs[0]) is Var
                and eqn.inputs[0].aval.size < atom.aval.size and not eqn.inputs[0].aval.vma - vma):
            small = _cast(builder, eqn.inputs[0], vma)  # the broadcast's operand varies as atom does: not over vma
            out = Var(atom.aval.with_vma(vma))
            builder.eqns.append(Eqn(eqn.prim, [small], [out], eqn.params, eqn.source))
            return out
    out = Var(atom.aval.with_vma(vma))
    builder.eqns.append(Eqn(pvary_p, [atom], [out], {"axes": ordered_axes(vma - atom.aval.vma)}, user_source()))
    return out


__all__ = ["cast_operands", "is_typed", "join_vma", "pvary_p", "typed", "typed_axes"]
