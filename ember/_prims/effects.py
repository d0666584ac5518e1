"""Tokens and effects: create_token and after_all (JAX's tokens: values of type Tok, ember._core.dtypes.AbstractToken,
holding no data, that order side effects: XLA's create_token and after_all), and dce_sink (a value marked as used,
so that dead-code elimination keeps what computes it).

A token lowers to !stablehlo.token; a program may take and return tokens (the runtime passes PJRT's token buffers,
which a Token value holds: ember._runtime.array.Token). Tokens carry no derivative (their primitives are marked not
differentiable: a function that makes tokens is differentiated in its other outputs) and are never batched (a
token has no batch dimension)."""
from __future__ import annotations

from typing import Any

from ember._core import Primitive, ShapedArray
from ember._core.dtypes import abstract_token, is_token
from ember._core.pytree import tree_leaves
from ember._hlo import LoweringContext
from ember._hlo.lower import CALLBACK_TARGET, EFFECT, effect_value, order_call
from ember._hlo.targets import available
from ember._prims import explicit
from ember._prims.shape import BatchDim

# ---------------------------------------------------------------------------------------------------------------
# create_token(): a fresh token, ordered after nothing (XLA's create_token).
create_token_p = Primitive("create_token", checks=())
create_token_p.def_rule("sharding_rule", lambda *avals, **params: None)
create_token_p.def_rule("abstract_eval", lambda *avals: abstract_token)
create_token_p.def_rule("lowering", lambda ctx, *operands: [ctx.op("stablehlo.create_token", [], ctx.aval_out)])
create_token_p.mark_not_differentiable()
create_token_p.def_rule("batching", lambda args, dims: ([create_token_p.bind()], [None]))


def create_token(_: Any = None) -> Any:
    """A token (Tok) ordered after nothing (like jax.lax.create_token; its argument is ignored, as JAX's, which
    keeps it for backward compatibility). Experimental in JAX too."""
    return create_token_p.bind()


# ---------------------------------------------------------------------------------------------------------------
# after_all(*tokens): a token ordered after all the given ones (XLA's after_all; with none, a fresh one).
after_all_p = Primitive("after_all", checks=())
after_all_p.def_rule("sharding_rule", lambda *avals, **params: None)


@after_all_p.def_rule("abstract_eval")
def _after_all_abstract_eval(*tokens: ShapedArray) -> ShapedArray:
    if not all(is_token(t) for t in tokens):
        raise TypeError(f"Arguments to after_all must be tokens, got {', '.join(t.str_short() for t in tokens)}")
    return abstract_token


@after_all_p.def_rule("lowering")
def _after_all_lowering(ctx: LoweringContext, *tokens: str) -> list[str]:
    return [ctx.op("stablehlo.after_all", list(tokens), ctx.aval_out)]


after_all_p.mark_not_differentiable()


@after_all_p.def_rule("batching")
def _after_all_batching(args: list[Any], dims: list[BatchDim]) -> tuple[list[Any], list[BatchDim]]:
    if any(d is not None for d in dims):  # (only an array can be batched: a token has no dimensions)
        raise TypeError("after_all: tokens cannot be batched (vmap a function of arrays; pass tokens unbatched)")
    return [after_all_p.bind(*args)], [None]


def after_all(*operands: Any) -> Any:
    """A token ordered after all the given tokens (like jax.lax.after_all, XLA's AfterAll); anything but tokens
    is a TypeError, as JAX's."""
    return after_all_p.bind(*operands)


# ---------------------------------------------------------------------------------------------------------------
# dce_sink(x; prevent_mlir_dce): x marked as used (jax.lax.dce_sink): no outputs, effectful, so that ember's dead-code
# elimination keeps x's computation; with prevent_mlir_dce, the module keeps it too (the host-callback handler's
# ordering copy, a side-effecting call that waits for x: XLA then cannot drop x either; JAX calls jaxlib's no-op
# dce_sink handler, which the plugin lacks). Eagerly it does nothing.
dce_sink_p = Primitive("dce_sink", multiple_results=True, effectful=True, checks=())
dce_sink_p.def_rule("sharding_rule", explicit.replicated_results)
dce_sink_p.def_rule("abstract_eval", lambda x, *, prevent_mlir_dce: [])
dce_sink_p.impl = lambda x, *, prevent_mlir_dce: []  # (JAX's impl: nothing to do on a concrete value)


@dce_sink_p.def_rule("lowering")
def _dce_sink_lowering(ctx: LoweringContext, x: str, *, prevent_mlir_dce: bool) -> list[str]:
    if prevent_mlir_dce and available(CALLBACK_TARGET):  # (the handler's ordering copy waits for x: XLA keeps x)
        ctx.emitter.effect = order_call(ctx.emitter, [effect_value(ctx.emitter), x], [EFFECT])[0]
    return []


@dce_sink_p.def_rule("jvp")
def _dce_sink_jvp(primals: list[Any], tangents: list[Any], *, prevent_mlir_dce: bool
                  ) -> tuple[list[Any], list[Any]]:
    """Linear (as JAX's): the tangent is sunk too."""
    dce_sink_p.bind(primals[0], prevent_mlir_dce=prevent_mlir_dce)
    if tangents[0] is not None:
        dce_sink_p.bind(tangents[0], prevent_mlir_dce=prevent_mlir_dce)
    return [], []


dce_sink_p.def_rule("vjp", lambda cts, ins, outs, needs, *, prevent_mlir_dce: [None])


@dce_sink_p.def_rule("batching")
def _dce_sink_batching(args: list[Any], dims: list[BatchDim], *, prevent_mlir_dce: bool
                       ) -> tuple[list[Any], list[BatchDim]]:
    dce_sink_p.bind(args[0], prevent_mlir_dce=prevent_mlir_dce)
    return [], []


def dce_sink(val: Any, *, prevent_mlir_dce: bool = False) -> None:
    """Mark every array of the pytree val as used, so that dead-code elimination keeps their computation (like
    jax.lax.dce_sink); with prevent_mlir_dce the compiled module keeps it as well. Returns None."""
    for leaf in tree_leaves(val):
        dce_sink_p.bind(leaf, prevent_mlir_dce=bool(prevent_mlir_dce))


# ---------------------------------------------------------------------------------------------------------------
# control_dep(src, dst): dst's computation runs after src's (jax.experimental.control_deps.control_dep: JAX writes
# a custom call that XLA's control-dependency rewriter turns into an edge; the plugin's XLA has no such pass). No
# outputs, effectful (every pass keeps it). Lowered by ember/_hlo/lower.py's control_order: the body in an order
# with src first, and dst's equation reading its operands through an optimization barrier with src; the equation
# itself emits nothing. Eagerly both values exist: nothing to order. Under jvp and grad the primal computations are
# ordered (JAX's refuses to differentiate it: an FFI call); under vmap, the batched ones (JAX's refuses).
control_dep_p = Primitive("control_dep", multiple_results=True, effectful=True, checks=())
control_dep_p.unordered_effect = True  # (it emits no op: nothing to order among a body's callbacks at run time)
control_dep_p.def_rule("sharding_rule", explicit.replicated_results)
control_dep_p.def_rule("abstract_eval", lambda src, dst: [])
control_dep_p.impl = lambda src, dst: []
control_dep_p.def_rule("lowering", lambda ctx, src, dst: [])
control_dep_p.def_rule("vjp", lambda cts, ins, outs, needs: [None, None])


@control_dep_p.def_rule("jvp")
def _control_dep_jvp(primals: list[Any], tangents: list[Any]) -> tuple[list[Any], list[Any]]:
    control_dep_p.bind(*primals)
    return [], []


@control_dep_p.def_rule("batching")
def _control_dep_batching(args: list[Any], dims: list[BatchDim]) -> tuple[list[Any], list[BatchDim]]:
    control_dep_p.bind(*args)  # (the batched computations, ordered)
    return [], []


def control_dep(src: Any, dst: Any) -> None:
    """Order dst's computation after src's (like jax.experimental.control_deps.control_dep); src and dst are
    arrays. Returns None."""
    control_dep_p.bind(src, dst)


__all__ = ["after_all", "create_token", "dce_sink"]  # (control_dep: ember.experimental.control_deps)
