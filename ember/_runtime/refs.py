"""Running a program that reads and writes mutable array references (ember.Ref): its discharged IR is compiled
(ember._transforms.discharge), each call reads the values of the references it takes (arguments, and Refs it
closed over) and, after the call, writes the final values of those it wrote back into them."""
from __future__ import annotations

from typing import Any, Sequence

from ember._core import IR, Eqn, Var, aval_of_value
from ember._core.cache import LRUCache
from ember._prims.refs import Ref
from ember._runtime.array import Array
from ember._runtime.sharded import ShardedArray
from ember._transforms.discharge import discharge_ir, ref_positions


def _aliasing_error(name: str, closed: bool) -> ValueError:
    if closed:
        return ValueError(f"when calling {name}, a mutable array reference was both closed over and passed as an "
                          "argument; pass it one way only (two names for one Ref are not allowed)")
    return ValueError(f"only one reference to a mutable array may be passed as an argument to a function, but "
                      f"{name} was given the same Ref twice")


class RefCompiled:
    """A compiled program of an IR that takes references: called as the IR (a Ref where it takes one), it runs
    the discharged program on the references' values and writes back the final values of those it writes.

    A call holds the locks of its Refs (ember.Ref's) from reading them to writing them back, taken in one order
    (by id), so that calls from several threads that update one Ref run one after another (none loses another's
    update, or reads a value another has donated), and calls taking several of the same Refs cannot deadlock.

    As JAX's, a call updates the Refs in place: the buffers of the values it replaces are donated to the program
    (XLA writes the final values into them), when nothing but the Ref holds those values (an Array read out of the
    Ref and kept, or viewed by numpy, is left alone: that call runs a program without donation instead)."""

    def __init__(self, ir: IR, name: str, compile_pure: Any, compile_donating: Any = None,
                 donors: Sequence[bool] | None = None):
        """compile_pure(pure IR, donors) and compile_donating(pure IR, donors): the discharged program, donating
        the arguments the caller gives up (donors: per input of ir, a Ref's never) and, for the second, also the
        values of the Refs it writes."""
        discharged = discharge_ir(ir)
        const_refs, self._in_refs = ref_positions(ir)
        self.ir, self.name = ir, name
        self._const_refs = [ir.consts[i] for i in const_refs]
        for ref in self._const_refs:
            if type(ref) is not Ref:
                raise TypeError(f"{name}: a Ref of an enclosing staging cannot be compiled on its own")
        self._written = discharged.written
        self._n_out = len(ir.outs)
        given = [False] * len(const_refs) + [bool(d) and i not in self._in_refs
                                             for i, d in enumerate(donors or [False] * len(ir.in_vars))]
        self.pure = compile_pure(discharged.ir, given if any(given) else None)
        self._discharged = discharged.ir
        self._compile_donating = compile_donating  # (pure IR, donors) -> the program donating the written values
        self._donating: Any = None
        slots = list(range(len(const_refs))) + [len(const_refs) + i for i in self._in_refs]
        self._donors = list(given)
        for slot, written in zip(slots, self._written):
            self._donors[slot] = written
        self.in_avals = [v.aval for v in ir.in_vars]
        self.out_avals = ir.out_avals
        self.text = self.pure.text

    def call_flat(self, args: Sequence[Any], sharded: tuple[Any, Any, Sequence[int]] | None = None) -> list[Any]:
        """sharded: (in_shardings, out_shardings, donating) of a call partitioned over several devices (see
        call_sharded)."""
        in_refs = self._in_refs
        refs = self._const_refs + [args[i] for i in in_refs]
        for i in in_refs:
            if type(args[i]) is not Ref:
                raise TypeError(f"{self.name}: argument {i} must be a Ref (from ember.new_ref), got "
                                f"{type(args[i]).__name__}")
        if len({id(r) for r in refs}) != len(refs):
            closed = {id(r) for r in self._const_refs}
            raise _aliasing_error(self.name, any(id(args[i]) in closed for i in in_refs))
        if len(refs) == 1:
            with refs[0]._lock:
                return self._run(refs, args, sharded)
        held: list[Ref] = []
        try:
            for ref in sorted(refs, key=id):  # (one order for every call: no deadlock)
                ref._lock.acquire()
                held.append(ref)
            return self._run(refs, args, sharded)
        finally:
            for ref in reversed(held):
                ref._lock.release()

    def _run(self, refs: list[Ref], args: Sequence[Any], sharded: tuple[Any, Any, Sequence[int]] | None = None
             ) -> list[Any]:
        """Read the Refs, run the program and write back the values it wrote (call_flat holds the Refs' locks)."""
        in_refs = self._in_refs
        values = [r.peek() for r in self._const_refs] + [a.peek() if i in in_refs else a for i, a in enumerate(args)]
        if sharded is not None:  # (partitioned: the pure program, each Ref's final value placed as its value was)
            ins, outs_given, donating = sharded
            n = len(self._const_refs)
            placed = [getattr(x, "_sharding", None) if type(x) is ShardedArray else None
                      for x in values[:n] + [values[n + i] for i in in_refs]]  # (the Refs' values, read above)
            ins = None if ins is None else [None] * n + list(ins)
            given = None if outs_given is None and not any(placed) else (
                list(outs_given or [None] * self._n_out) + placed)
            outs = self.pure.call_sharded(values, ins, given, donating=tuple(n + i for i in donating))
            for ref, final, written in zip(refs, outs[self._n_out:], self._written):
                if written:
                    ref.write(final)
            return outs[:self._n_out]
        program, giving = self.pure, []
        if self._compile_donating is not None and any(self._written):
            written_refs = [ref for ref, written in zip(refs, self._written) if written]
            giving = [ref.peek() for ref in written_refs]
            if all(ref.owns_value and type(x) is Array and not x._buffer._pins for ref, x in zip(written_refs, giving)):
                if self._donating is None:
                    self._donating = self._compile_donating(self._discharged, self._donors)
                program = self._donating
            else:
                giving = []
        outs = program.call_flat(values)
        for x in giving:  # (their buffers now hold the final values)
            x.delete()
        for ref, final, written in zip(refs, outs[self._n_out:], self._written):
            if written:
                ref.write(final, own=True)
        return outs[:self._n_out]

    def __call__(self, *args: Any) -> Any:
        outs = self.call_flat(args)
        tree = self.ir.out_tree
        if tree is not None:
            return tree.unflatten(outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def call_sharded(self, args: Sequence[Any], in_shardings: Sequence[Any] | None = None,
                     out_shardings: Sequence[Any] | None = None, donating: Sequence[int] = ()) -> list[Any]:
        """A call partitioned over several devices (as Compiled.call_sharded; in_shardings per argument, a Ref's
        entry for its value): the Refs' values are inputs placed as they are, their final values written back
        placed as those were (a ShardedArray's sharding; XLA's choice for a value on one device)."""
        return self.call_flat(args, (in_shardings, out_shardings, donating))

    def as_text(self) -> str:
        """The StableHLO module of the discharged program."""
        return self.pure.as_text()

    def __repr__(self) -> str:
        ins = ", ".join(a.str_short() for a in self.in_avals)
        outs = ", ".join(a.str_short() for a in self.out_avals)
        return f"<Compiled {self.name}: ({ins}) -> ({outs})>"


def apply_with_refs(prim: Any, args: Sequence[Any], params: dict[str, Any], compile_ir: Any) -> list[Any]:
    """A primitive applied eagerly to operands that include Refs (a loop or branch closing over an ember.Ref,
    outside jit): its one-equation program, in which the operands that are one Ref (every branch of a cond closed
    over it) are one input, compiled once per signature."""
    unique: list[Any] = []
    slots: list[int] = []
    for x in args:
        if type(x) is Ref:
            slot = next((k for k, u in enumerate(unique) if u is x), None)
            if slot is None:
                slot = len(unique)
                unique.append(x)
        else:
            slot = len(unique)
            unique.append(x)
        slots.append(slot)
    avals = tuple(aval_of_value(x) for x in unique)
    key = (prim, tuple(params.items()), avals, tuple(slots))
    compiled = _programs.lookup(key)
    if compiled is None:
        in_vars = [Var(a) for a in avals]
        inputs = [in_vars[k] for k in slots]
        out_vars = [Var(a) for a in prim.out_avals([v.aval for v in inputs], params)]
        ir = IR([], [], in_vars, [Eqn(prim, inputs, out_vars, params)], out_vars)
        compiled = RefCompiled(ir, prim.name, lambda pure, donors=None: compile_ir(pure, prim.name))
        _programs.store(key, compiled)
    return compiled.call_flat(unique)


_programs = LRUCache("eager_cache_size")  # (primitive, params, operand avals, which operands are one) -> program


__all__: list[str] = []
