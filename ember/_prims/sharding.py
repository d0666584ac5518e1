"""Sharding constraints: with_sharding_constraint(x, sharding) is x, laid out over devices as sharding says (XLA's
partitioner reshards it there); a program holding one is partitioned over the sharding's devices. And
inspect_sharding (ember.debug.inspect_array_sharding): a callback told a value's sharding."""
from __future__ import annotations

from typing import Any

from ember._core import TRACE_STATE, Primitive, ShapedArray
from ember._core.axes import current_spmd_axes
from ember._core.sharding import NamedSharding, Sharding, explicit_of
from ember._hlo.emitter import places, sharding_marker
from ember._hlo.lower import LoweringContext
from ember._hlo.spmd import sharding_text
from ember._prims.shape import BatchDim, linear_jvp
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


def check_rank(api: str, sharding: Sharding, x: ShapedArray) -> None:
    if isinstance(sharding, NamedSharding) and len(sharding.spec) > x.ndim:
        raise ValueError(f"{api}: the sharding's spec {sharding.spec} has {len(sharding.spec)} entries, more than "
                         f"the rank of the array {x.str_short()}")


__all__: list[str] = []
