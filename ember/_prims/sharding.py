"""Sharding constraints: with_sharding_constraint(x, sharding) is x, laid out over devices as sharding says (XLA's
partitioner reshards it there); a program holding one is partitioned over the sharding's devices. And
inspect_sharding (ember.debug.inspect_array_sharding): a callback told a value's sharding. And shard_alike
(ember.experimental.shard_alike): two values that XLA's partitioner gives the same sharding, whichever it picks."""
from __future__ import annotations

from typing import Any

from ember._core import TRACE_STATE, Primitive, ShapedArray
from ember._core.axes import current_spmd_axes
from ember._core.sharding import NamedSharding, Sharding, explicit_of
from ember._hlo.emitter import places, quoted_text, sharding_marker
from ember._hlo.lower import LoweringContext
from ember._hlo.spmd import sharding_text
from ember._prims.shape import BatchDim, batch_at_front, batch_size, linear_jvp, moveaxis
from ember._prims import explicit

# sharding_constraint(x, sharding): the identity, x placed as sharding says.
# Its result's type carries the sharding's Explicit mesh axes (a reshard, in JAX's explicit sharding mode).
sharding_constraint_p = Primitive("sharding_constraint", own_sharding=True, checks=())


@sharding_constraint_p.def_rule("abstract_eval")
def _sharding_constraint_abstract_eval(x: ShapedArray, *, sharding: Sharding) -> ShapedArray:
    check_rank("with_sharding_constraint", sharding, x)
    return x.with_explicit(explicit_of(sharding, x.ndim))


@sharding_constraint_p.def_rule("lowering")
def _sharding_constraint_lowering(ctx: LoweringContext, x: str, *, sharding: Sharding) -> list[str]:
    return [constrain(ctx, x, ctx.aval_out, sharding)]  # (nothing in a program on one device)


sharding_constraint_p.def_rule("jvp", linear_jvp(sharding_constraint_p))
sharding_constraint_p.def_rule(
    "vjp", lambda cts, ins, outs, needs, *, sharding: [sharding_constraint_p.bind(cts[0], sharding=sharding)])


@sharding_constraint_p.def_rule("batching")
def _sharding_constraint_batching(args: list[Any], dims: list[BatchDim], *, sharding: Sharding
                                  ) -> tuple[list[Any], list[BatchDim]]:
    """The batch dimension is not split (its entry in the spec is None), or split over vmap's spmd_axis_name."""
    x, d = args[0], dims[0]
    batched = explicit.batched(sharding, d, x.ndim - 1, current_spmd_axes())
    return ([x] if batched is None else [sharding_constraint_p.bind(x, sharding=batched)]), [d]


def constrain(ctx: LoweringContext, x: str, aval: ShapedArray, sharding: Sharding | None) -> str:
    """x, constrained to sharding (a custom call @Sharding) when it spans several devices."""
    devices = ctx.emitter.device_assignment
    if sharding is None or not places(sharding, devices):
        return x
    return sharding_marker(ctx.emitter, x, aval, sharding_text(sharding, aval.ndim, devices))


# device_put(*xs; devices, srcs, copy_semantics): the values, placed on the devices (jax.lax's device_put_p, which
# ember.device_put binds on traced values put on a device or on the default one; a Sharding makes a sharding
# constraint instead). In a program on one device it is the identity and emits no op; concrete values are placed by
# the runtime (ember._runtime.sharded.device_put).
device_put_p = Primitive("device_put", multiple_results=True, moves_data=True, checks=())
device_put_p.def_rule("sharding_rule", lambda *xs, **params: [x.explicit for x in xs])
device_put_p.def_rule("abstract_eval", lambda *xs, devices, srcs, copy_semantics: list(xs))
device_put_p.def_rule("lowering", lambda ctx, *xs, devices, srcs, copy_semantics: list(xs))
device_put_p.def_rule("jvp", linear_jvp(device_put_p))


@device_put_p.def_rule("vjp")
def _device_put_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, devices: tuple[Any, ...],
                    srcs: tuple[Any, ...], copy_semantics: tuple[str, ...]) -> list[Any]:
    """Each cotangent goes back where its value came from (srcs)."""
    return device_put_p.bind(*cts, devices=srcs, srcs=devices, copy_semantics=copy_semantics)


device_put_p.def_rule("batching", lambda args, dims, **params: (device_put_p.bind(*args, **params), list(dims)))


class _InspectSharding(Primitive):
    """inspect_sharding(x; callback) -> (): callback(x's sharding). Outside staging it is called at once with the
    array's sharding; staged, the equation (effectful: no pass drops it) emits nothing, and the runtime calls the
    callback when the program is compiled (ember._runtime.spmd: report_one_device_inspections, and the sharding XLA
    chose in a program partitioned over several devices)."""

    def bind(self, *args: Any, **params: Any) -> Any:
        if TRACE_STATE.stack:
            return super().bind(*args, **params)
        sharding = getattr(args[0], "sharding", None)
        if not isinstance(sharding, Sharding):
            raise TypeError(f"inspect_array_sharding: expected ember Arrays, got a value of type "
                            f"{type(args[0]).__name__}")
        params["callback"](sharding)
        return []


inspect_sharding_p = _InspectSharding("inspect_sharding", multiple_results=True, effectful=True, checks=())
inspect_sharding_p.def_rule("sharding_rule", explicit.replicated_results)
inspect_sharding_p.unordered_effect = True  # (nothing to order among a body's callbacks: it emits no op)
inspect_sharding_p.def_rule("abstract_eval", lambda x, *, callback: [])
inspect_sharding_p.def_rule("lowering", lambda ctx, x, *, callback: [])  # (the runtime calls it: see above)
inspect_sharding_p.def_rule("jvp", lambda primals, tangents, **params: (inspect_sharding_p.bind(*primals, **params),
                                                                         []))
inspect_sharding_p.def_rule("vjp", lambda cts, ins, outs, needs, **params: [None])


@inspect_sharding_p.def_rule("batching")
def _inspect_sharding_batching(args: list[Any], dims: list[BatchDim], *, callback: Any
                               ) -> tuple[list[Any], list[BatchDim]]:
    """The batched value's sharding, as JAX's."""
    inspect_sharding_p.bind(args[0], callback=callback)
    return [], []


# shard_alike(x, y) -> (x, y): the identity on both, and a tie between them: in a program partitioned over several
# devices XLA's sharding propagation gives x and y the same sharding, whichever it picks for either (from x's
# producers or consumers, or y's). Lowered as JAX lowers it for XLA's GSPMD partitioner: each value through a
# custom call @Sharding whose sharding is `{unknown shard_as N}`, N the same for both and new in the module (the
# plugin's XLA honours it: a value left unspecified next to a sharded one comes out sharded alike). Each result keeps
# its operand's type (varying axes, explicit sharding), as JAX's abstract eval does.
shard_alike_p = Primitive("shard_alike", multiple_results=True, own_vma=True, checks=())


@shard_alike_p.def_rule("abstract_eval")
def _shard_alike_abstract_eval(x: ShapedArray, y: ShapedArray) -> list[ShapedArray]:
    check_alike_shapes(x.shape, y.shape)
    return [x, y]


@shard_alike_p.def_rule("lowering")
def _shard_alike_lowering(ctx: LoweringContext, x: str, y: str) -> list[str]:
    """Nothing in a program on one device; inside a shard_map body the values are each device's own blocks
    (manual), which a shard group cannot tie, so nothing there either."""
    emitter = ctx.emitter
    if emitter.device_assignment is None or emitter.axis_context is not None:
        return [x, y]
    text = quoted_text(f"{{unknown shard_as {emitter.shard_group()}}}")
    # (a side effect, as JAX's: XLA keeps the two marks apart even where x and y are one value)
    return [ctx.op("stablehlo.custom_call", [v], aval, {"call_target_name": '"Sharding"', "has_side_effect": "true",
                                                         "mhlo.sharding": text})
            for v, aval in zip((x, y), ctx.avals_out)]


shard_alike_p.def_rule("jvp", linear_jvp(shard_alike_p))  # (the tangents tied as well)


@shard_alike_p.def_rule("vjp")
def _shard_alike_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool]) -> list[Any]:
    """The cotangents tied as the values are; a zero one (None) ties nothing (as JAX's transpose)."""
    if cts[0] is None or cts[1] is None:
        return list(cts)
    return shard_alike_p.bind(*cts)


@shard_alike_p.def_rule("batching")
def _shard_alike_batching(args: list[Any], dims: list[BatchDim]) -> tuple[list[Any], list[BatchDim]]:
    """The two values batched at the same dimension, then tied: an unbatched one is broadcast along the other's
    batch dimension, and y's batch dimension moved to x's where they differ (as JAX's rule)."""
    (x, y), (dx, dy) = args, dims
    if dx is None and dy is None:
        return shard_alike_p.bind(x, y), [None, None]
    d = dx if dx is not None else dy
    size = batch_size(args, dims)
    x, y = (moveaxis(batch_at_front(v, dv, size), 0, d) if dv is None else moveaxis(v, dv, d)
            for v, dv in ((x, dx), (y, dy)))
    return shard_alike_p.bind(x, y), [d, d]


def check_alike_shapes(x_shape: tuple[int, ...], y_shape: tuple[int, ...]) -> None:
    """The ValueError of shard_alike on leaves of different shapes (JAX's words, naming the API)."""
    if tuple(x_shape) != tuple(y_shape):
        raise ValueError(f"shard_alike: The leaves shapes of `x` and `y` should match. Got `x` leaf shape: "
                         f"{tuple(x_shape)} and `y` leaf shape: {tuple(y_shape)}.")


def check_rank(api: str, sharding: Sharding, x: ShapedArray) -> None:
    if isinstance(sharding, NamedSharding) and len(sharding.spec) > x.ndim:
        raise ValueError(f"{api}: the sharding's spec {sharding.spec} has {len(sharding.spec)} entries, more than "
                         f"the rank of the array {x.str_short()}")


__all__: list[str] = []
