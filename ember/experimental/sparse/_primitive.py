"""The sparse primitives (JAX's bcoo_todense_p, csr_matvec_p, ...): each is a real ember primitive defined by its
decomposition into ember operations, as ember/_control/cumulative.py's are. Its abstract evaluation stages the
decomposition at the operands' types, its lowering emits that staged IR, and its forward, reverse and batching rules
are ember's forward mode, reverse mode and batching of the same IR, so every rule kind exists and they agree with
the computation by construction. Eagerly, bind compiles the primitive once per signature (as every primitive)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ember._core import IR, Primitive, ShapedArray, aval_of, eval_ir, stage_flat
from ember._core.cache import LRUCache
from ember._hlo import LoweringContext
from ember._hlo.lower import lower_closed
from ember._transforms.ad import backward_pass
from ember._transforms.batching import batch_ir
from ember._transforms.jvp import jvp_pass


def sparse_primitive(name: str, decomposition: Callable[..., Any], multiple_results: bool = False) -> Primitive:
    """The primitive `name` computing decomposition(*operands, **params) (arrays in; one array out, or a sequence of
    them with multiple_results). Its results are typed by the decomposition (own_sharding: replicated on an explicit
    mesh) and it has no checkify checks of its own."""
    prim = Primitive(name, multiple_results=multiple_results, checks=(), own_sharding=True)
    staged = LRUCache("program_cache_size")  # (operand types, params) -> the staged decomposition (bounded)

    def ir_of(avals: Sequence[ShapedArray], params: dict[str, Any]) -> IR:
        key = (tuple(avals), tuple(sorted(params.items())))
        ir = staged.lookup(key)
        if ir is None:
            def flat(*xs: Any) -> list[Any]:
                out = decomposition(*xs, **params)
                return list(out) if multiple_results else [out]
            ir = stage_flat(flat, [a.strip_weak_type() for a in avals], label=name)
            staged.store(key, ir)
        return ir

    def results(outs: Sequence[Any]) -> Any:
        return list(outs) if multiple_results else outs[0]

    @prim.def_rule("abstract_eval")
    def abstract_eval(*avals: ShapedArray, **params: Any) -> Any:
        return results(ir_of(avals, params).out_avals)

    @prim.def_rule("lowering")
    def lowering(ctx: LoweringContext, *args: str, **params: Any) -> list[str]:
        return lower_closed(ctx.emitter, ir_of(ctx.avals_in, params), list(args))

    @prim.def_rule("jvp")
    def jvp(primals: list[Any], tangents: list[Any], **params: Any) -> tuple[list[Any], list[Any]]:
        return jvp_pass(ir_of([_aval(p) for p in primals], params), primals, tangents)

    @prim.def_rule("vjp")
    def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], **params: Any) -> list[Any]:
        return backward_pass(ir_of([_aval(x) for x in ins], params), ins, needs, cts)[1]

    @prim.def_rule("batching")
    def batching(args: list[Any], dims: list[Any], **params: Any) -> tuple[list[Any], list[Any]]:
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        avals = [_aval(a) if d is None else _member(_aval(a), d) for a, d in zip(args, dims)]
        batched, out_dims = batch_ir(ir_of(avals, params), dims, size)
        return eval_ir(batched, args), out_dims

    return prim


def _aval(x: Any) -> ShapedArray:
    return aval_of(x).strip_weak_type()


def _member(aval: ShapedArray, dim: int) -> ShapedArray:
    return ShapedArray(aval.shape[:dim] + aval.shape[dim + 1:], aval.dtype)
