"""Lowering: an IR -> a StableHLO text module whose entry function is `main`, or a sub-IR -> a region.

One interpreter (lower_into) walks the equations and calls each primitive's lowering rule with a LoweringContext;
higher-order primitives lower their bodies by recursing into it through ctx.lower_region."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember._core import IR, Atom, Literal, ShapedArray, Var
from ember._core.profile import profiled
from ember._hlo.emitter import Emitter, dense_text, module_text


class LoweringError(NotImplementedError):
    pass


class LoweringContext:
    """What a lowering rule receives besides its operands: the avals of the equation's inputs and outputs, the
    emitter of the body being built (ctx.op, ctx.constant, ctx.broadcast write ops into it), and region lowering."""
    __slots__ = ("emitter", "avals_in", "avals_out")

    def __init__(self, emitter: Emitter, avals_in: Sequence[ShapedArray], avals_out: Sequence[ShapedArray]):
        self.emitter = emitter
        self.avals_in = list(avals_in)
        self.avals_out = list(avals_out)

    @property
    def aval_out(self) -> ShapedArray:
        """The aval of the only output."""
        return self.avals_out[0]

    def op(self, name: str, operands: Sequence[str], results: Any, attrs: dict[str, str] | None = None,
           regions: Sequence[str] = ()) -> Any:
        return self.emitter.op(name, operands, results, attrs, regions)

    def constant(self, value: Any, aval: ShapedArray) -> str:
        return self.emitter.constant(value, aval)

    def broadcast(self, operand: str, operand_aval: ShapedArray, shape: Sequence[int],
                  dims: Sequence[int] | None = None) -> str:
        return self.emitter.broadcast(operand, operand_aval, shape, dims)

    def region(self, block_avals: Sequence[ShapedArray], build: Callable[[Emitter, list[str]], list[str]]) -> str:
        """The text of a one-block region: build(body emitter, block arguments) emits its ops (lower_into lowers
        an IR there) and returns the values the block returns."""
        body = self.emitter.child()
        block_args = [body.declare(body.fresh("b"), a) for a in block_avals]
        body.returns(build(body, block_args))
        return self.emitter.region(block_args, body)

    def lower_region(self, ir: IR, captured: Sequence[str] | None = None) -> str:
        """A region computing ir and returning its outputs: its block arguments are ir's inputs, or, with captured
        (values of the enclosing body, as stablehlo.case's branches use), it has none and ir's inputs are bound
        to those values."""
        if ir.consts:
            raise LoweringError("a region's IR cannot capture constants; pass them as operands")
        if captured is None:
            return self.region(ir.in_avals, lambda body, args: lower_into(body, ir, args))
        return self.region([], lambda body, args: lower_into(body, ir, captured))


def lower_into(emitter: Emitter, ir: IR, args: Sequence[str]) -> list[str]:
    """Emit ir's equations into emitter, its const_vars and in_vars bound to the values named in args (in that
    order); returns the values of its outputs."""
    env: dict[Var, str] = dict(zip(list(ir.const_vars) + list(ir.in_vars), args))

    def read(atom: Atom) -> str:
        if isinstance(atom, Literal):
            return emitter.constant(atom.value, atom.aval)
        return env[atom]

    for eqn in ir.eqns:
        rule = eqn.prim.rules.get("lowering")
        if rule is None:
            raise LoweringError(f"primitive {eqn.prim.name} has no lowering rule")
        ctx = LoweringContext(emitter, [a.aval for a in eqn.inputs], [v.aval for v in eqn.outputs])
        outs = rule(ctx, *[read(a) for a in eqn.inputs], **eqn.params)
        env.update(zip(eqn.outputs, outs))
    return [read(a) for a in ir.outs]


@profiled("lower", "lower to StableHLO")
def lower(ir: IR, donors: Sequence[bool] | None = None, inline_consts: bool = False) -> str:
    """The module for ir: consts come first among main's arguments, then the inputs (donors: per input, whether
    its buffer is donated to the program; see module_text). With inline_consts the consts are constants of the
    module instead (its arguments are the inputs alone: an exported program carries its data)."""
    emitter = Emitter()
    params = list(ir.in_vars) if inline_consts else list(ir.const_vars) + list(ir.in_vars)
    arg_names = [emitter.declare(f"%arg{i}", v.aval) for i, v in enumerate(params)]
    if inline_consts:
        consts = [emitter.op("stablehlo.constant", [], v.aval, {"value": dense_text(np.asarray(c), v.aval)})
                  for v, c in zip(ir.const_vars, ir.consts)]
        out_names = lower_into(emitter, ir, consts + arg_names)
    else:
        out_names = lower_into(emitter, ir, arg_names)
    donated = None if donors is None else [False] * (len(params) - len(ir.in_vars)) + list(donors)
    return module_text([v.aval for v in params], ir.out_avals, emitter, arg_names, out_names, donated)
