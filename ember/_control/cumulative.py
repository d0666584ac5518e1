"""Cumulative products, extremes and log-sum-exps along an axis (cumsum is a primitive in _prims/windowed.py): the
primitives cumprod, cummax, cummin and cumlogsumexp (jax.lax's cumprod_p, ...), each defined by the associative
scan of an elementwise primitive. As JAX's CPU lowering, each lowers to that scan (emitted inline), and its forward
and reverse rules are the scan's derivatives (forward mode and reverse mode of the scan, staged at the operand's
type); batching moves the axis past the batch dimension."""
from __future__ import annotations

from typing import Any, Callable

from ember import _prims as lax
from ember._control.loops import associative_scan
from ember._core import NAN_CHECK, IR, Primitive, ShapedArray, aval_of, stage_flat
from ember._core import dtypes as dt
from ember._core.checks import normalize_axis, static_int
from ember._hlo import LoweringContext
from ember._hlo.lower import emit_function
from ember._prims import explicit
from ember._prims.checks import check_dtype
from ember._prims.shape import BatchDim
from ember._prims.windowed import emit_prefix_reduction
from ember._transforms.ad import backward_pass
from ember._transforms.jvp import jvp_pass


def _logaddexp(x: Any, y: Any) -> Any:
    """log(exp(x) + exp(y)), stable, and -inf + -inf = -inf (no NaN)."""
    hi, lo = lax.max(x, y), lax.min(x, y)
    finite = lax.is_finite(hi)
    diff = lax.select(finite, lax.sub(lo, hi), lax.full_like(hi, 0))
    return lax.select(finite, lax.add(hi, lax.log1p(lax.exp(diff))), hi)


def _cumulative(name: str, combine: Callable[[Any, Any], Any], kinds: str, checks: tuple[str, ...], doc: str,
                window: tuple[str, Callable[[Any], Any]] | None = None) -> tuple[Primitive, Callable[..., Any]]:
    """The primitive `name` (the running combine along an axis) and its public function. window: (the StableHLO op,
    its identity for a dtype) of the reduce_window that computes it on JAX's narrow types, as JAX 0.10.2 lowers it
    on every dtype (its order of products and NaN identities give other numbers than the scan in the narrow floats,
    and the scan's concatenations abort XLA's CPU on 2-bit integers)."""
    prim = Primitive(name, checks=checks)
    prim.def_rule("sharding_rule", explicit.cumulative)

    def scan(x: Any, axis: int, reverse: bool) -> Any:
        return x if aval_of(x).shape[axis] == 0 else associative_scan(combine, x, reverse=reverse, axis=axis)

    def scan_ir(aval: ShapedArray, axis: int, reverse: bool) -> IR:
        return stage_flat(lambda x: [scan(x, axis, reverse)], [aval.strip_weak_type()])

    @prim.def_rule("abstract_eval")
    def abstract_eval(x: ShapedArray, *, axis: int, reverse: bool) -> ShapedArray:
        check_dtype(name, x, kinds)
        if not 0 <= axis < x.ndim:
            raise ValueError(f"{name}: axis {axis} is out of bounds for array of dimension {x.ndim}")
        return x

    @prim.def_rule("lowering")
    def lowering(ctx: LoweringContext, x: str, *, axis: int, reverse: bool) -> list[str]:
        dtype = ctx.avals_in[0].dtype
        if window is not None and dt.is_narrow(dtype):
            return [emit_prefix_reduction(ctx, x, axis, reverse, window[0], window[1](dtype))]
        return emit_function(ctx.emitter, lambda v: [scan(v, axis, reverse)], ctx.avals_in, [x])[0]

    @prim.def_rule("jvp")
    def jvp(primals: list[Any], tangents: list[Any], *, axis: int, reverse: bool) -> tuple[list[Any], list[Any]]:
        (x,), (t,) = primals, tangents
        if t is None:
            return [prim.bind(x, axis=axis, reverse=reverse)], [None]
        return jvp_pass(scan_ir(aval_of(x), axis, reverse), [x], [t])

    @prim.def_rule("vjp")
    def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, axis: int,
            reverse: bool) -> list[Any]:
        return backward_pass(scan_ir(aval_of(ins[0]), axis, reverse), ins, [True], cts)[1]

    @prim.def_rule("batching")
    def batching(args: list[Any], dims: list[BatchDim], *, axis: int, reverse: bool
                 ) -> tuple[list[Any], list[BatchDim]]:
        d = dims[0]
        return [prim.bind(args[0], axis=axis + 1 if axis >= d else axis, reverse=reverse)], [d]

    def fn(operand: Any, axis: int = 0, reverse: bool = False) -> Any:
        ndim = aval_of(operand).ndim
        axis = normalize_axis(name, static_int(name, "axis", axis), ndim)
        return prim.bind(operand, axis=axis, reverse=bool(reverse))
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return prim, fn


cumprod_p, cumprod = _cumulative("cumprod", lax.mul, "fiuc", NAN_CHECK,
                                 "The running product along axis (like jax.lax.cumprod); reverse runs from the end.",
                                 ("multiply", lambda dtype: 1))
cummax_p, cummax = _cumulative("cummax", lax.max, "fiuc", (),
                               "The running maximum along axis (like jax.lax.cummax); reverse runs from the end.",
                               ("maximum", dt.lowest))
cummin_p, cummin = _cumulative("cummin", lax.min, "fiuc", (),
                               "The running minimum along axis (like jax.lax.cummin); reverse runs from the end.",
                               ("minimum", dt.highest))
cumlogsumexp_p, cumlogsumexp = _cumulative(
    "cumlogsumexp", _logaddexp, "f", NAN_CHECK,
    "The running log(sum(exp)) along axis (like jax.lax.cumlogsumexp), computed stably.")
