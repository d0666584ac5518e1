"""ffi_call: a call of an XLA FFI handler a user registered (ember.ffi.register_ffi_target), as jax.ffi.ffi_call.

  ffi_call(args...; target_name, result_avals, has_side_effect, vmap_method, input_layouts, output_layouts,
           input_output_aliases, custom_call_api_version, legacy_backend_config, attributes) -> results

JAX's primitive and params: the equation prints as JAX's does. It lowers to `stablehlo.custom_call @target_name`
(api_version 4) with the attributes as the call's backend_config dictionary (ember._hlo.ffi.attribute_text) and
the layouts (minor-to-major) the caller asked for; XLA finds the handler by name when the program compiles (a name
nobody registered is the plugin's NOT_FOUND error then, as JAX's). Effectful only with has_side_effect (then never
dropped, merged or evaluated at trace time: Primitive.effect_param). No derivatives (JAX's ValueError: wrap the
call in ember.custom_jvp / custom_vjp); vmap by the caller's vmap_method, as JAX: sequential (a scan of calls),
sequential_unrolled, expand_dims and broadcast_all (one call on the batched operands, the unbatched broadcast with
a leading 1 or the batch size), legacy_vectorized (one call, unbatched operands left as they are); none chosen:
vmap refuses (JAX 0.10.2's NotImplementedError). Its results are replicated in explicit sharding mode."""
from __future__ import annotations

from typing import Any, Sequence

from ember._control.callbacks import VMAP_METHODS, sequential_batching
from ember._core import Primitive, ShapedArray
from ember._hlo import LoweringContext
from ember._hlo import ffi as _hlo_ffi
from ember._prims import explicit
from ember._prims.shape import BatchDim, batch_size, broadcast, moveaxis

FFI_NOT_DIFFERENTIABLE = ("an FFI call cannot be differentiated (as JAX): use ember.custom_jvp or ember.custom_vjp "
                          "to give the function calling it derivative rules")


class FfiDerivativeError(ValueError, NotImplementedError):
    """An FFI call was differentiated (JAX raises a ValueError; ember's marks raise NotImplementedErrors: both)."""


ffi_call_p = Primitive("ffi_call", multiple_results=True, effect_param="has_side_effect", checks=())
ffi_call_p.def_rule("sharding_rule", explicit.replicated_results)
ffi_call_p.mark("jvp", FFI_NOT_DIFFERENTIABLE, FfiDerivativeError)
ffi_call_p.mark("vjp", FFI_NOT_DIFFERENTIABLE, FfiDerivativeError)


@ffi_call_p.def_rule("abstract_eval")
def _ffi_call_abstract_eval(*avals: ShapedArray, result_avals: tuple[ShapedArray, ...], target_name: str,
                            input_layouts: tuple[tuple[int, ...], ...], **params: Any) -> list[ShapedArray]:
    if len(input_layouts) != len(avals):
        raise TypeError(f"ffi_call to {target_name!r}: {len(avals)} operands, but {len(input_layouts)} input "
                        "layouts")
    for i, (aval, layout) in enumerate(zip(avals, input_layouts)):
        if sorted(layout) != list(range(aval.ndim)):
            raise ValueError(f"ffi_call to {target_name!r}: the layout {layout} of operand {i} "
                             f"({aval.str_short()}) is not a permutation of its {aval.ndim} dimensions")
    return [ShapedArray(a.shape, a.dtype) for a in result_avals]


@ffi_call_p.def_rule("lowering")
def _ffi_call_lowering(ctx: LoweringContext, *args: str, target_name: str, has_side_effect: bool,
                       input_layouts: tuple[tuple[int, ...], ...], output_layouts: tuple[tuple[int, ...], ...],
                       input_output_aliases: tuple[tuple[int, int], ...], attributes: tuple[tuple[str, Any], ...],
                       **params: Any) -> list[str]:
    return _hlo_ffi.user_custom_call(ctx, target_name, args, ctx.avals_out, attributes, input_layouts,
                                     output_layouts, input_output_aliases, has_side_effect=has_side_effect)


def _with_batch_major(layout: tuple[int, ...]) -> tuple[int, ...]:
    """A minor-to-major layout with a new leading (most major) dimension 0 in front of the others."""
    return tuple(n + 1 for n in layout) + (0,)


@ffi_call_p.def_rule("batching")
def _ffi_call_batching(args: Sequence[Any], dims: Sequence[BatchDim], *, vmap_method: str | None,
                       result_avals: tuple[ShapedArray, ...], **params: Any) -> tuple[list[Any], list[BatchDim]]:
    if vmap_method in ("sequential", "sequential_unrolled"):
        return sequential_batching(ffi_call_p, args, dims, vmap_method == "sequential_unrolled",
                                   vmap_method=vmap_method, result_avals=result_avals, **params)
    if vmap_method not in VMAP_METHODS:
        raise NotImplementedError(
            "vmap is only supported for the ffi_call primitive when vmap_method is one of 'sequential', "
            "'sequential_unrolled', 'expand_dims', 'broadcast_all', or 'legacy_vectorized'. Got "
            f"vmap_method={vmap_method!r} (the FFI call to {params['target_name']!r}).")
    size = batch_size(args, dims)
    moved = [a if d is None else moveaxis(a, d, 0) for a, d in zip(args, dims)]
    inputs = params["input_layouts"]
    if vmap_method == "legacy_vectorized":  # unbatched operands stay as they are
        layouts = tuple(layout if d is None else _with_batch_major(layout) for layout, d in zip(inputs, dims))
    else:  # expand_dims: a leading 1 on the unbatched operands; broadcast_all: the whole batch
        lead = size if vmap_method == "broadcast_all" else 1
        moved = [broadcast(a, (lead,)) if d is None else a for a, d in zip(moved, dims)]
        layouts = tuple(_with_batch_major(layout) for layout in inputs)
    batched = dict(params, input_layouts=layouts,
                   output_layouts=tuple(_with_batch_major(layout) for layout in params["output_layouts"]))
    outs = ffi_call_p.bind(*moved, vmap_method=vmap_method,
                           result_avals=tuple(a.update(shape=(size, *a.shape)) for a in result_avals), **batched)
    return list(outs), [0] * len(outs)


__all__: list[str] = []
