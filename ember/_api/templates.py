"""Transformed IRs shared by structure: a transformation (grad, jvp, vjp, vmap) of a staged IR is computed once per
structure of the IR, and each IR of that structure gets a view of the shared template bound to its own constants.
Templates and their views are SharedIRs, which refuse changes: the compiled program of a view is looked up by the
template's structural key, so a view changed in place would run another IR's program."""
from __future__ import annotations

import weakref
from typing import Any, Callable, Hashable, NoReturn, Sequence

from ember._core import IR
from ember._core.cache import LRUCache, on_clear
from ember._core.dtypes import x64_enabled
from ember._core.ir import Atom, Eqn, NotKeyable, Var, structural_key
from ember._runtime import Compiled, compile_ir


class ReadOnlyList(list):
    """A list that refuses changes in place: the parts of a SharedIR."""
    __slots__ = ()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("this IR is shared by ember's caches and cannot be changed in place; build a new IR "
                        "(ember._api.staging.with_outputs) instead")

    append = extend = insert = pop = remove = clear = sort = reverse = _refuse
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse  # type: ignore[assignment]


class SharedIR(IR):
    """An IR that other IRs share (a cached template, or a view of one): its parts cannot be reassigned or changed
    in place. Only `compiled`, the slot where its compiled program is kept, can be set."""
    __slots__ = ()

    def __init__(self, const_vars: Sequence[Var], consts: Sequence[Any], in_vars: Sequence[Var],
                 eqns: Sequence[Eqn], outs: Sequence[Atom], out_tree: Any = None):
        if len(const_vars) != len(consts):
            raise ValueError("IR: const_vars and consts differ in length")
        parts = {"const_vars": const_vars, "consts": consts, "in_vars": in_vars, "eqns": eqns, "outs": outs}
        for name, value in parts.items():
            object.__setattr__(self, name, ReadOnlyList(value))
        object.__setattr__(self, "out_tree", out_tree)
        object.__setattr__(self, "compiled", None)

    def __setattr__(self, name: str, value: Any) -> None:
        if name != "compiled":
            raise AttributeError(f"this IR is shared by ember's caches: its {name} cannot be reassigned; build a new "
                                 "IR (ember._api.staging.with_outputs) instead")
        object.__setattr__(self, name, value)

    @classmethod
    def of(cls, ir: IR) -> SharedIR:
        """ir itself if it is shared already, else a shared copy (sharing its equations)."""
        if isinstance(ir, SharedIR):
            return ir
        return cls(ir.const_vars, ir.consts, ir.in_vars, ir.eqns, ir.outs, ir.out_tree)


_transformed = LRUCache("program_cache_size")  # (what, structural key of a staged IR) -> transformed template


def transform_once(what: Hashable, ir: IR, transform: Callable[[IR, int], IR]) -> IR:
    """transform(ir, 0), computed once per structure of ir (process-wide, bounded by program_cache_size): a new IR
    of the same structure (the same function staged again, or a fresh closure over other arrays of the same
    shapes: each is staged anew, only this work is shared) gets a view of the cached template with its own
    constants. Template and view are SharedIRs (immutable); transform must build its result without changing ir.

    The template is transform(lifted, n): ir with its n constants lifted to leading inputs (transform must keep
    them as the leading inputs of its result, untouched), so it cannot depend on their values. `what` must name
    everything else the result depends on (the transformation and its options, output structures); enable_x64,
    which the rules' default dtypes follow, is added here."""
    try:
        key = (what, x64_enabled(), structural_key(ir))
        entry = _transformed.lookup(key)
    except (NotKeyable, TypeError):  # (an unhashable option or param: no sharing)
        return transform(ir, 0)
    if entry is None:
        lifted = IR([], [], ir.const_vars + ir.in_vars, ir.eqns, ir.outs, ir.out_tree)
        entry = _Template(SharedIR.of(transform(lifted, len(ir.consts))))
        _transformed.store(key, entry)
    view = with_consts(entry.ir, ir.consts)
    _made_from[view] = entry
    return view


class _Template:
    """A transformed IR shared by the IRs of one structure, and the structural key of the IRs made from it (one
    structure: computed once, when the first of them is compiled)."""
    __slots__ = ("ir", "lowering_key")

    def __init__(self, ir: SharedIR):
        self.ir = ir
        self.lowering_key: Hashable | None = None


_made_from: "weakref.WeakKeyDictionary[IR, _Template]" = weakref.WeakKeyDictionary()  # IRs of transform_once
on_clear(_made_from.clear)


def with_consts(template: IR, consts: Sequence[Any]) -> SharedIR:
    """The IR template with its first len(consts) inputs bound to consts (a new IR sharing its equations)."""
    n = len(consts)
    return SharedIR(template.const_vars + template.in_vars[:n], template.consts + list(consts),
                    template.in_vars[n:], template.eqns, template.outs, template.out_tree)


def compile_staged(ir: IR, name: str, deferred: bool = False, donors: Sequence[bool] | None = None) -> Compiled:
    """compile_ir, told the structural key of an IR made by transform_once (so that it is not computed anew).
    deferred: see ember._runtime.Lowered.compile; donors: see compile_ir."""
    template = _made_from.get(ir)
    if template is None:
        return compile_ir(ir, name, deferred=deferred, donors=donors)
    if template.lowering_key is None:
        try:
            template.lowering_key = structural_key(ir, sources=False)
        except NotKeyable:
            return compile_ir(ir, name, deferred=deferred, donors=donors)
    return compile_ir(ir, name, template.lowering_key, deferred, donors)
