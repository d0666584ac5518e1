"""jax.interpreters.partial_eval on ember: partial evaluation of a flattened function (linear_util's WrappedFun) on
arguments some of which are known (values) and some unknown (only their types), as flax's lazy_init and nn.scan
use it. The function is staged with the known values in place, concretely (ember's staging computes every value
it can, as autodiff outside jit does): what depends on known values alone is computed then, and the outputs whose
value is known come back as known PartialVals; the others as unknown ones, typed."""
from __future__ import annotations

from typing import Any, Sequence

from ember._core import IR, ShapedArray, Tracer, aval_of, stage_flat
from ember.extend.linear_util import WrappedFun


class PartialVal(tuple):
    """(aval, None) for an unknown value, (None, value) for a known one (JAX's PartialVal)."""

    def __new__(cls, xs: tuple[Any, Any]) -> "PartialVal":
        return tuple.__new__(cls, xs)

    @classmethod
    def known(cls, const: Any) -> "PartialVal":
        return PartialVal((None, const))

    @classmethod
    def unknown(cls, aval: ShapedArray) -> "PartialVal":
        return PartialVal((aval, None))

    def is_known(self) -> bool:
        return self[0] is None

    def get_known(self) -> Any:
        return self[1] if self[0] is None else None

    def get_aval(self) -> ShapedArray:
        return aval_of(self[1]) if self[0] is None else self[0]


def trace_to_jaxpr_nounits(fun: WrappedFun, pvals: Sequence[PartialVal], instantiate: bool | Sequence[bool] = False
                           ) -> tuple[Any, list[PartialVal], list[Any]]:
    """(the jaxpr of fun on its unknown arguments, a PartialVal per output, its constants): an output is known
    (its value computed now) where it depends on known arguments alone, unless instantiate asks for it unknown."""
    pvals = [PartialVal(p) for p in pvals]
    unknown_avals = [p[0] for p in pvals if not p.is_known()]
    known_outs: list[Any] = []

    def staged(*unknowns: Any) -> list[Any]:
        rest = iter(unknowns)
        outs = list(fun.call_wrapped(*[p[1] if p.is_known() else next(rest) for p in pvals]))
        known_outs[:] = [o.value if isinstance(o, Tracer) else o for o in outs]
        return outs

    ir: IR = stage_flat(staged, unknown_avals, [None] * len(unknown_avals), label="partial_eval")
    if isinstance(instantiate, bool):
        instantiate = [instantiate] * len(ir.outs)
    out_pvals = [PartialVal.unknown(v.aval) if inst or value is None else PartialVal.known(value)
                 for v, value, inst in zip(ir.outs, known_outs, instantiate)]
    return ir.jaxpr, out_pvals, list(ir.consts)


def trace_to_jaxpr_dynamic(fun: WrappedFun, in_avals: Sequence[ShapedArray], *unused: Any, **unused_kw: Any
                           ) -> tuple[Any, list[ShapedArray], list[Any]]:
    """(the jaxpr of fun at in_avals, its output types, its constants)."""
    ir = stage_flat(lambda *xs: list(fun.call_wrapped(*xs)), list(in_avals), label="trace_to_jaxpr_dynamic")
    return ir.jaxpr, ir.out_avals, list(ir.consts)


__all__ = ["PartialVal", "trace_to_jaxpr_dynamic", "trace_to_jaxpr_nounits"]
