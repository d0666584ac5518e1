"""The primitives every other rule builds on: broadcast_in_dim, reshape, transpose, reduce_sum (the transpose of
broadcasting), convert_element_type and iota; the reduction family constructor; and the batching helpers that move
and materialise batch dimensions. Each primitive's block: definition, abstract eval, lowering, jvp, vjp,
batching, public function. This module imports no other primitive module."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ember._core import (PRIMITIVES, TRACE_STATE, ArrayMethods, Literal, Primitive, ShapedArray, aval_of,
                         is_python_scalar, scalar_literal)
from ember._core import dtypes as dt
from ember._core import NAN_CHECK
from ember._core.checks import normalize_axes, normalize_axis, static_dims, static_int, static_ints
from ember._core.dtypes import ordered_axes
from ember._core.shape_poly import DIM_AS_VALUE, dim_text, is_symbolic_dim
from ember._core.trace import is_tracing
from ember._core.vma import pvary_p
from ember._core.config import config
from ember._hlo import LoweringContext, backend_forms, compare_type, i64_array, row_fusion
from ember._hlo.emitter import tensor_type
from ember._prims.checks import check_dtype
from ember._prims import explicit

BatchDim = int | None


def argsort(values: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(values, kind="stable"))


def linear_jvp(prim: Primitive, linear_args: Sequence[int] | None = None) -> Callable[..., Any]:
    """The JVP of a primitive linear in the operands at linear_args (all by default): the primitive applied to
    their tangents (zeros where absent), the other operands kept at their primal values."""
    def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[list[Any], list[Any]]:
        out = prim.bind(*primals, **params)
        outs = out if prim.multiple_results else [out]
        which = range(len(primals)) if linear_args is None else linear_args
        if all(tangents[i] is None for i in which):
            return outs, [None] * len(outs)
        args = [(zeros_like(p) if t is None else t) if i in which else p
                for i, (p, t) in enumerate(zip(primals, tangents))]
        tangent = prim.bind(*args, **params)
        return outs, (tangent if prim.multiple_results else [tangent])
    return jvp


# ---------------------------------------------------------------------------------------------------------------
# Batching helpers: a batch dimension `d` of a value is an int, or None when the value is not batched.
def moveaxis(x: Any, src: int, dst: int) -> Any:
    ndim = aval_of(x).ndim
    if src == dst:
        return x
    perm = [i for i in range(ndim) if i != src]
    perm.insert(dst, src)
    return transpose(x, perm)


def batch_at_front(x: Any, d: BatchDim, size: int) -> Any:
    """x with its batch dimension first; an unbatched x is broadcast to size along a new leading dimension."""
    if d is None:
        shape = aval_of(x).shape
        return broadcast_in_dim(x, (size,) + shape, tuple(range(1, len(shape) + 1)))
    return moveaxis(x, d, 0)


def batch_size(args: Sequence[Any], dims: Sequence[BatchDim]) -> int:
    return next(aval_of(x).shape[d] for x, d in zip(args, dims) if d is not None)


def vectorized_batching(prim: Primitive) -> Callable[..., Any]:
    """The batching rule of a one-operand elementwise primitive: the batch dimension passes through."""
    def rule(args: Sequence[Any], dims: Sequence[BatchDim], **params: Any) -> tuple[list[Any], list[BatchDim]]:
        return [prim.bind(*args, **params)], [dims[0]]
    return rule


# ---------------------------------------------------------------------------------------------------------------
# broadcast_in_dim(x, shape, broadcast_dimensions): operand dim i becomes output dim broadcast_dimensions[i].
broadcast_in_dim_p = Primitive("broadcast_in_dim", moves_data=True, checks=())
broadcast_in_dim_p.def_rule("sharding_rule", explicit.broadcast_in_dim)


@broadcast_in_dim_p.def_rule("abstract_eval")
def _broadcast_in_dim_abstract_eval(x: ShapedArray, *, shape: tuple[int, ...],
                                    broadcast_dimensions: tuple[int, ...]) -> ShapedArray:
    op = "broadcast_in_dim"
    if len(broadcast_dimensions) != x.ndim:
        raise TypeError(f"{op}: broadcast_dimensions {broadcast_dimensions} must have one entry per operand "
                        f"dimension of {x.str_short()}")
    if any(not 0 <= d < len(shape) for d in broadcast_dimensions) or \
            list(broadcast_dimensions) != sorted(set(broadcast_dimensions)):
        raise TypeError(f"{op}: broadcast_dimensions {broadcast_dimensions} must be strictly increasing and "
                        f"within the output rank {len(shape)}")
    for i, d in enumerate(broadcast_dimensions):
        if x.shape[i] not in (1, shape[d]):
            raise TypeError(f"{op}: operand {x.str_short()} dimension {i} (size {x.shape[i]}) cannot broadcast "
                            f"to output dimension {d} of shape {shape}")
    return ShapedArray(shape, x.dtype, x.weak_type)


@broadcast_in_dim_p.def_rule("lowering")
def _broadcast_in_dim_lowering(ctx: LoweringContext, x: str, *, shape: tuple[int, ...],
                               broadcast_dimensions: tuple[int, ...]) -> list[str]:
    return [ctx.op("stablehlo.broadcast_in_dim", [x], ctx.aval_out,
                   {"broadcast_dimensions": i64_array(broadcast_dimensions)})]


broadcast_in_dim_p.def_rule("jvp", linear_jvp(broadcast_in_dim_p))


@broadcast_in_dim_p.def_rule("vjp")
def _broadcast_in_dim_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                          shape: tuple[int, ...], broadcast_dimensions: tuple[int, ...]) -> list[Any]:
    x_aval = aval_of(ins[0])
    new_dims = [d for d in range(len(shape)) if d not in broadcast_dimensions]
    stretched = [d for i, d in enumerate(broadcast_dimensions) if x_aval.shape[i] == 1 and shape[d] != 1]
    summed = reduce_sum(cts[0], tuple(sorted(new_dims + stretched))) if new_dims or stretched else cts[0]
    return [reshape(summed, x_aval.shape)]


@broadcast_in_dim_p.def_rule("batching")
def _broadcast_in_dim_batching(args: list[Any], dims: list[BatchDim], *, shape: tuple[int, ...],
                               broadcast_dimensions: tuple[int, ...]) -> tuple[list[Any], list[BatchDim]]:
    x = moveaxis(args[0], dims[0], 0)
    size = aval_of(x).shape[0]
    out = broadcast_in_dim_p.bind(x, shape=(size,) + shape,
                                  broadcast_dimensions=(0,) + tuple(d + 1 for d in broadcast_dimensions))
    return [out], [0]


def broadcast_in_dim(x: Any, shape: Sequence[int], broadcast_dimensions: Sequence[int]) -> Any:
    shape = static_dims("broadcast_in_dim", "shape", shape)
    dims = static_ints("broadcast_in_dim", "broadcast_dimensions", broadcast_dimensions)
    if aval_of(x).shape == shape and not is_python_scalar(x):
        return x
    return broadcast_in_dim_p.bind(x, shape=shape, broadcast_dimensions=dims)


def broadcast(x: Any, sizes: Sequence[int]) -> Any:
    """Add leading dimensions of the given sizes (like jax.lax.broadcast)."""
    sizes = static_dims("broadcast", "sizes", sizes)
    ndim = aval_of(x).ndim
    return broadcast_in_dim(x, sizes + aval_of(x).shape, tuple(range(len(sizes), len(sizes) + ndim)))


def full(shape: Sequence[int], fill_value: Any, dtype: Any = None) -> Any:
    """An array of the given shape filled with fill_value (a scalar, of dtype if given)."""
    shape = static_dims("full", "shape", shape)
    if dtype is not None:
        fill_value = convert_element_type(fill_value, dtype) if not is_python_scalar(fill_value) \
            else scalar_literal(fill_value, dt.parse_dtype(dtype), weak=False)
    if aval_of(fill_value).shape != ():
        raise TypeError(f"full: fill_value must be a scalar, got {aval_of(fill_value).str_short()}")
    return broadcast_in_dim_p.bind(fill_value, shape=shape, broadcast_dimensions=())


def full_like(x: Any, fill_value: Any, dtype: Any = None, shape: Sequence[int] | None = None) -> Any:
    """fill_value (a scalar, or an array of x's shape) broadcast to x's shape, in x's dtype (like
    jax.lax.full_like; dtype and shape, when given, replace x's: then a scalar fill_value, and the result is
    strongly typed)."""
    if dtype is not None or shape is not None:
        aval = aval_of(x)
        return full(aval.shape if shape is None else shape, fill_value,
                    aval.dtype if dtype is None else dt.check_user_dtype(dtype, "full_like"))
    aval = aval_of(x)
    if is_python_scalar(fill_value):
        fill_value = scalar_literal(fill_value, aval.dtype, aval.weak_type)
    elif aval_of(fill_value).dtype != aval.dtype:
        fill_value = convert_element_type(fill_value, aval.dtype, aval.weak_type)
    if aval_of(fill_value).shape == aval.shape and not isinstance(fill_value, Literal):
        return fill_value
    return broadcast_in_dim_p.bind(fill_value, shape=aval.shape, broadcast_dimensions=())


def zeros_like(x: Any) -> Any:
    """Zeros of x's type (a fresh token for a token: see zeros)."""
    aval = aval_of(x)
    return zeros(aval) if aval.dtype is dt.token else full_like(x, 0)


def zeros(aval: ShapedArray) -> Any:
    """An array of zeros of an aval's type: its shape, its dtype, and inside a shard_map body its varying axes (the
    zero cotangent or tangent of a value typed so; as JAX's zeros_like_aval). A token's is a fresh token (a
    token's tangent type is a token, as in JAX; create_token is registered by ember/_prims/effects.py)."""
    if aval.dtype is dt.token:
        return PRIMITIVES["create_token"].bind()
    out = full(aval.shape, 0, aval.dtype)
    return pvary_p.bind(out, axes=ordered_axes(aval.vma)) if aval.vma else out


# ---------------------------------------------------------------------------------------------------------------
# reshape(x, new_sizes)
reshape_p = Primitive("reshape", moves_data=True, checks=())
reshape_p.def_rule("sharding_rule", explicit.reshape)


@reshape_p.def_rule("abstract_eval")
def _reshape_abstract_eval(x: ShapedArray, *, new_sizes: tuple[int, ...], out_sharding: Any = None) -> ShapedArray:
    if math.prod(new_sizes) != x.size:  # (exact: ints, or symbolic dimensions compared as expressions)
        raise TypeError(f"reshape: cannot reshape {x.str_short()} ({x.size} elements) to shape {new_sizes}")
    return ShapedArray(new_sizes, x.dtype, x.weak_type)


@reshape_p.def_rule("lowering")
def _reshape_lowering(ctx: LoweringContext, x: str, *, new_sizes: tuple[int, ...], out_sharding: Any = None
                      ) -> list[str]:
    return [ctx.op("stablehlo.reshape", [x], ctx.aval_out)]


reshape_p.def_rule("jvp", linear_jvp(reshape_p))


@reshape_p.def_rule("vjp")
def _reshape_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                 new_sizes: tuple[int, ...], out_sharding: Any = None) -> list[Any]:
    x = aval_of(ins[0])  # (split back as the operand is, in explicit sharding mode)
    return [reshape(cts[0], x.shape, x.explicit if out_sharding is not None else None)]


@reshape_p.def_rule("batching")
def _reshape_batching(args: list[Any], dims: list[BatchDim], *, new_sizes: tuple[int, ...], out_sharding: Any = None
                      ) -> tuple[list[Any], list[BatchDim]]:
    x = moveaxis(args[0], dims[0], 0)
    return [reshape(x, (aval_of(x).shape[0],) + new_sizes, explicit.batched(out_sharding, 0, len(new_sizes)))], [0]


def reshape(x: Any, new_sizes: Sequence[int], out_sharding: Any = None) -> Any:
    """x with new_sizes; out_sharding (JAX's explicit sharding mode: a NamedSharding or a PartitionSpec over the
    current mesh) says how the result is split where the reshape rule cannot."""
    new_sizes = static_dims("reshape", "new_sizes", new_sizes)
    out_sharding = explicit.resolve("reshape", out_sharding)
    if aval_of(x).shape == new_sizes and not is_python_scalar(x) and out_sharding is None:
        return x
    if out_sharding is not None:
        return reshape_p.bind(x, new_sizes=new_sizes, out_sharding=out_sharding)
    return reshape_p.bind(x, new_sizes=new_sizes)


# ---------------------------------------------------------------------------------------------------------------
# copy(x): a new array equal to x (jax.lax's copy_p, which jnp.array(x, copy=True), jnp.copy and x.copy() bind on
# traced values; a concrete Array's copy is the runtime's). Staged, it is the identity (it emits no op).
def identity_primitive(name: str, *, rebinds_cotangent: bool, **kwargs: Any) -> Primitive:
    """A primitive that is the identity on one array and emits no op (copy, stage, sparse's todense, the key-reuse
    markers), with every rule: its operand's type and sharding, a linear JVP, batching passed through; its VJP passes
    the cotangent through, or binds the primitive on it (rebinds_cotangent: copy's and todense's, as JAX's).
    kwargs: the Primitive's other options (moves_data)."""
    prim = Primitive(name, checks=(), **kwargs)
    prim.def_rule("sharding_rule", explicit.same_as(0))
    prim.def_rule("abstract_eval", lambda x: x)
    prim.def_rule("lowering", lambda ctx, x: [x])
    prim.def_rule("jvp", linear_jvp(prim))
    prim.def_rule("vjp", (lambda cts, ins, outs, needs: [prim.bind(cts[0])]) if rebinds_cotangent
                  else (lambda cts, ins, outs, needs: [cts[0]]))
    prim.def_rule("batching", vectorized_batching(prim))
    return prim


copy_p = identity_primitive("copy", rebinds_cotangent=True, moves_data=True)


# ---------------------------------------------------------------------------------------------------------------
# stage(x): x lifted into the active staging, or an array outside any (jax.lax's stage_p). lax.stage itself binds no
# equation while staging, as JAX's (the staging's lift); the primitive, bound directly, is the identity.
stage_p = identity_primitive("stage", rebinds_cotangent=False)


def stage(x: Any, /) -> Any:
    """x lifted into the active trace (like jax.lax.stage): under a transformation, the tracer of x (a constant
    the function closed over becomes one, binding nothing); outside any, an array (a number or a numpy array
    moved to the device, an array as it is)."""
    stack = TRACE_STATE.stack
    if not (isinstance(x, ArrayMethods) or is_python_scalar(x) or isinstance(x, np.ndarray | np.generic)):
        raise TypeError(f"Error interpreting argument to stage as a JAX value. The problematic value is of type "
                        f"{type(x)} and was passed to stage at position 0.")
    if stack:
        return stack[-1].lift(x)
    return x if isinstance(x, ArrayMethods) else stage_p.bind(x)


# ---------------------------------------------------------------------------------------------------------------
# xla_metadata_value(x; kvs): x, its producing op given the metadata kvs (JAX's xla_metadata_value_p, the value form
# set_xla_metadata(x, **kvs)). The identity everywhere else; its JVP applies it to the tangent, its transpose does not.
xla_metadata_value_p = Primitive("xla_metadata_value", checks=())
xla_metadata_value_p.def_rule("sharding_rule", explicit.same_as(0))
xla_metadata_value_p.def_rule("abstract_eval", lambda x, *, xla_metadata_kvs: x)
xla_metadata_value_p.def_rule("jvp", linear_jvp(xla_metadata_value_p))
xla_metadata_value_p.def_rule("vjp", lambda cts, ins, outs, needs, *, xla_metadata_kvs: [cts[0]])
xla_metadata_value_p.def_rule("batching", vectorized_batching(xla_metadata_value_p))


@xla_metadata_value_p.def_rule("lowering")
def _xla_metadata_value_lowering(ctx: LoweringContext, x: str, *, xla_metadata_kvs: tuple[tuple[str, str], ...]
                                 ) -> list[str]:
    ctx.emitter.frontend_attributes(x, xla_metadata_kvs)  # (an argument's value has no op: nothing to mark)
    return [x]


# ---------------------------------------------------------------------------------------------------------------
# squeeze(x, dimensions): x without the given dimensions, each of size 1 (a reshape; jax.lax's squeeze_p).
squeeze_p = Primitive("squeeze", moves_data=True, checks=())


def _squeezed(shape: Sequence[int], dimensions: Sequence[int]) -> tuple[int, ...]:
    return tuple(n for d, n in enumerate(shape) if d not in dimensions)


@squeeze_p.def_rule("abstract_eval")
def _squeeze_abstract_eval(x: ShapedArray, *, dimensions: tuple[int, ...]) -> ShapedArray:
    if any(not 0 <= d < x.ndim for d in dimensions) or len(set(dimensions)) != len(dimensions):
        raise ValueError(f"squeeze: dimensions {dimensions} must be distinct dimensions of {x.str_short()}")
    if any(x.shape[d] != 1 for d in dimensions):
        raise ValueError(f"squeeze: cannot select an axis to squeeze out which has size not equal to one, got "
                         f"shape={x.shape} and dimensions={dimensions} (operand {x.str_short()})")
    return ShapedArray(_squeezed(x.shape, dimensions), x.dtype, x.weak_type)


@squeeze_p.def_rule("sharding_rule")
def _squeeze_sharding(x: ShapedArray, *, dimensions: tuple[int, ...]) -> Any:
    return explicit.typed(x.explicit.mesh, [e for d, e in enumerate(explicit.spec_of(x)) if d not in dimensions])


@squeeze_p.def_rule("lowering")
def _squeeze_lowering(ctx: LoweringContext, x: str, *, dimensions: tuple[int, ...]) -> list[str]:
    return [ctx.op("stablehlo.reshape", [x], ctx.aval_out)]


squeeze_p.def_rule("jvp", linear_jvp(squeeze_p))


@squeeze_p.def_rule("vjp")
def _squeeze_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                 dimensions: tuple[int, ...]) -> list[Any]:
    return [reshape(cts[0], aval_of(ins[0]).shape)]


@squeeze_p.def_rule("batching")
def _squeeze_batching(args: list[Any], dims: list[BatchDim], *, dimensions: tuple[int, ...]
                      ) -> tuple[list[Any], list[BatchDim]]:
    d = dims[0]
    shifted = tuple(k if k < d else k + 1 for k in dimensions)
    return [squeeze_p.bind(args[0], dimensions=shifted)], [d - sum(1 for k in dimensions if k < d)]


def squeeze(array: Any, dimensions: Sequence[int]) -> Any:
    """array without the given dimensions, which must have size 1 (the `squeeze` primitive, as jax.lax.squeeze)."""
    ndim = aval_of(array).ndim
    dims = normalize_axes("squeeze", static_ints("squeeze", "dimensions", dimensions), ndim)
    return squeeze_p.bind(array, dimensions=dims) if dims else array


# ---------------------------------------------------------------------------------------------------------------
# transpose(x, permutation): output dim i is operand dim permutation[i].
transpose_p = Primitive("transpose", checks=())
transpose_p.def_rule("sharding_rule", explicit.transpose)


@transpose_p.def_rule("abstract_eval")
def _transpose_abstract_eval(x: ShapedArray, *, permutation: tuple[int, ...]) -> ShapedArray:
    if sorted(permutation) != list(range(x.ndim)):
        raise TypeError(f"transpose: permutation {permutation} is not a permutation of the dimensions of "
                        f"{x.str_short()}")
    return ShapedArray(tuple(x.shape[p] for p in permutation), x.dtype, x.weak_type)


@transpose_p.def_rule("lowering")
def _transpose_lowering(ctx: LoweringContext, x: str, *, permutation: tuple[int, ...]) -> list[str]:
    out = ctx.op("stablehlo.transpose", [x], ctx.aval_out, {"permutation": i64_array(permutation)})
    ctx.emitter.tell(out, "transpose_of", (x, tuple(permutation)))  # (for backend_forms.dot_general)
    return [out]


transpose_p.def_rule("jvp", linear_jvp(transpose_p))


@transpose_p.def_rule("vjp")
def _transpose_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                   permutation: tuple[int, ...]) -> list[Any]:
    return [transpose(cts[0], argsort(permutation))]


@transpose_p.def_rule("batching")
def _transpose_batching(args: list[Any], dims: list[BatchDim], *, permutation: tuple[int, ...]
                        ) -> tuple[list[Any], list[BatchDim]]:
    d = dims[0]  # the batch dimension stays in place; the permuted dims keep their order around it
    unbatched = [p if p < d else p + 1 for p in permutation]
    return [transpose(args[0], unbatched[:d] + [d] + unbatched[d:])], [d]


def transpose(x: Any, permutation: Sequence[int]) -> Any:
    permutation = static_ints("transpose", "permutation", permutation)
    if permutation == tuple(range(len(permutation))) and not is_python_scalar(x):
        return x
    return transpose_p.bind(x, permutation=permutation)


# ---------------------------------------------------------------------------------------------------------------
# convert_element_type(x, new_dtype, weak_type)
convert_element_type_p = Primitive("convert_element_type", elementwise=True, checks=())
convert_element_type_p.def_rule("sharding_rule", explicit.same_as(0))


@convert_element_type_p.def_rule("abstract_eval")
def _convert_abstract_eval(x: ShapedArray, *, new_dtype: np.dtype, weak_type: bool) -> ShapedArray:
    return ShapedArray(x.shape, new_dtype, weak_type)


@convert_element_type_p.def_rule("lowering")
def _convert_lowering(ctx: LoweringContext, x: str, *, new_dtype: np.dtype, weak_type: bool) -> list[str]:
    src, out = ctx.avals_in[0], ctx.aval_out
    if src.dtype == new_dtype:
        return [x]
    if new_dtype == dt.bool_:  # numpy semantics: nonzero is True
        zero = ctx.constant(0, src.update(weak_type=False))
        return [ctx.op("stablehlo.compare", [x, zero], out,
                       {"comparison_direction": "#stablehlo<comparison_direction NE>",
                        "compare_type": f"#stablehlo<comparison_type {compare_type(src.dtype)}>"})]
    if dt.is_complex(src.dtype) and not dt.is_complex(new_dtype):  # the real part (as numpy and JAX)
        x = ctx.op("stablehlo.real", [x], src.update(dtype=dt.real_dtype(src.dtype), weak_type=False))
        src = src.update(dtype=dt.real_dtype(src.dtype), weak_type=False)
        return [x if src.dtype == new_dtype else ctx.op("stablehlo.convert", [x], out)]
    if dt.is_complex(new_dtype) and not dt.is_complex(src.dtype):  # (x, 0)
        part = out.update(dtype=dt.real_dtype(new_dtype), weak_type=False)
        re = x if src.dtype == part.dtype else ctx.op("stablehlo.convert", [x], part)
        return [ctx.op("stablehlo.complex", [re, ctx.constant(0.0, part)], out)]
    return [ctx.op("stablehlo.convert", [x], out)]


def _float_to_float(src: np.dtype, dst: np.dtype) -> bool:
    """Only conversions between floating-point and complex dtypes carry a derivative; through an integer or bool it
    is zero. complex -> real takes the real part, so its reverse rule turns a real cotangent into a complex one
    with a zero imaginary part, and real -> complex the other way: JAX's convention (docs/complex.md)."""
    return dt.is_inexact(src) and dt.is_inexact(dst)


@convert_element_type_p.def_rule("jvp")
def _convert_jvp(primals: list[Any], tangents: list[Any], *, new_dtype: np.dtype, weak_type: bool
                 ) -> tuple[list[Any], list[Any]]:
    out = convert_element_type_p.bind(primals[0], new_dtype=new_dtype, weak_type=weak_type)
    t = tangents[0]
    if t is None or not _float_to_float(aval_of(primals[0]).dtype, new_dtype):
        return [out], [None]
    return [out], [convert_element_type_p.bind(t, new_dtype=new_dtype, weak_type=weak_type)]


@convert_element_type_p.def_rule("vjp")
def _convert_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, new_dtype: np.dtype,
                 weak_type: bool) -> list[Any]:
    src = aval_of(ins[0])
    if not _float_to_float(src.dtype, new_dtype):
        return [None]
    return [convert_element_type(cts[0], src.dtype, src.weak_type)]


convert_element_type_p.def_rule("batching", vectorized_batching(convert_element_type_p))


def convert_element_type(x: Any, new_dtype: Any, weak_type: bool = False) -> Any:
    new_dtype = dt.parse_dtype(new_dtype)
    aval = aval_of(x)
    if aval.dtype == new_dtype and aval.weak_type == weak_type and not is_python_scalar(x):
        return x
    return convert_element_type_p.bind(x, new_dtype=new_dtype, weak_type=bool(weak_type))


# ---------------------------------------------------------------------------------------------------------------
# iota(dtype, shape, dimension): values 0, 1, ... along one dimension.
iota_p = Primitive("iota", checks=())


@iota_p.def_rule("abstract_eval")
def _iota_abstract_eval(*, dtype: np.dtype, shape: tuple[int, ...], dimension: int, out_sharding: Any = None
                        ) -> ShapedArray:
    check_dtype("iota", ShapedArray(shape, dtype), "fiu", "dtype")
    if not 0 <= dimension < len(shape):
        raise TypeError(f"iota: dimension {dimension} out of range for shape {shape}")
    return ShapedArray(shape, dtype)


@iota_p.def_rule("lowering")
def _iota_lowering(ctx: LoweringContext, *, dtype: np.dtype, shape: tuple[int, ...], dimension: int,
                   out_sharding: Any = None) -> list[str]:
    out = ctx.op("stablehlo.iota", [], ctx.aval_out, {"iota_dimension": f"{dimension} : i64"})
    ctx.emitter.tell(out, "iota", dimension)  # (for the sort kernel: argsort's positions)
    return [out]


iota_p.mark_not_differentiable()


@iota_p.def_rule("batching")
def _iota_batching(args: list[Any], dims: list[BatchDim], **params: Any) -> tuple[list[Any], list[BatchDim]]:
    return [iota_p.bind(**params)], [None]  # no operands, so never batched: its value is the same for every member


def iota(dtype: Any, size: int) -> Any:
    """0, 1, ..., size - 1 (like jax.lax.iota)."""
    return broadcasted_iota(dtype, (size,), 0)


def broadcasted_iota(dtype: Any, shape: Sequence[int], dimension: int, *, out_sharding: Any = None) -> Any:
    """Counts along one dimension of an array of the given shape (like jax.lax.broadcasted_iota); out_sharding
    (JAX's explicit sharding mode: a NamedSharding, or a PartitionSpec over the current mesh) splits it."""
    shape = static_dims("broadcasted_iota", "shape", shape)
    dimension = normalize_axis("broadcasted_iota", static_int("broadcasted_iota", "dimension", dimension),
                               len(shape))
    params: dict[str, Any] = {"dtype": dt.parse_dtype(dtype), "shape": shape, "dimension": dimension}
    if out_sharding is not None:  # (a param only when given)
        params["out_sharding"] = explicit.resolve("broadcasted_iota", out_sharding)
    return iota_p.bind(**params)


# ---------------------------------------------------------------------------------------------------------------
# dim_as_value(dim): a symbolic dimension (ember.export's shape polymorphism) as a weakly typed integer scalar, as
# JAX's dim_as_value_p: `x / x.shape[0]`, jnp.mean's count. Its lowering is a constant holding the dimension's
# placeholder, which an exported program's call replaces with the value the argument shapes give.
dim_as_value_p = Primitive("dim_as_value", checks=())


@dim_as_value_p.def_rule("abstract_eval")
def _dim_as_value_abstract_eval(*, dim: Any) -> ShapedArray:
    if not is_symbolic_dim(dim):
        raise TypeError(f"dim_as_value: dim must be a symbolic dimension, got {dim!r}")
    return ShapedArray((), dt.default_int_dtype(), True)


@dim_as_value_p.def_rule("lowering")
def _dim_as_value_lowering(ctx: LoweringContext, *, dim: Any) -> list[str]:
    aval = ctx.aval_out
    return [ctx.op("stablehlo.constant", [], aval, {"value": f"dense<{dim_text(dim)}> : {tensor_type(aval)}"})]


dim_as_value_p.mark_not_differentiable()  # (an integer)


@dim_as_value_p.def_rule("batching")
def _dim_as_value_batching(args: list[Any], dims: list[BatchDim], *, dim: Any) -> tuple[list[Any], list[BatchDim]]:
    return [dim_as_value_p.bind(dim=dim)], [None]  # no operands: the same for every member of a batch


def dim_as_value(dim: Any, dtype: Any = None, weak_type: bool = True) -> Any:
    """A dimension as an integer scalar value (JAX's core.dimension_as_value): an int is a literal, a symbolic
    dimension the dim_as_value primitive (while staging: outside ember.export's tracing it has no value)."""
    if not is_symbolic_dim(dim):
        return scalar_literal(dim, dt.default_int_dtype() if dtype is None else dt.parse_dtype(dtype), weak_type)
    if not is_tracing():
        raise TypeError(f"the symbolic dimension '{dim}' has no value outside the tracing of a function exported "
                        "with symbolic shapes (ember.export)")
    value = dim_as_value_p.bind(dim=dim)
    return value if dtype is None else convert_element_type(value, dt.parse_dtype(dtype), weak_type)


DIM_AS_VALUE.make = dim_as_value  # type: ignore[method-assign]  # (how a DimExpr computes as a value)


# ---------------------------------------------------------------------------------------------------------------
# Reductions over axes: the family constructor (reduce_max and reduce_min are made with it in reduction.py), and
# reduce_sum, the transpose of broadcasting.
def kept_dims(ndim: int, axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(d for d in range(ndim) if d not in axes)


def reduction(name: str, kinds: str, identity: Callable[[np.dtype], Any], combine: Callable[[np.dtype], str],
              derivative: Callable[[Primitive], tuple[Callable[..., Any], Callable[..., Any]]],
              backend_form: Callable[[LoweringContext, str, tuple[int, ...]], str | None] | None = None, *,
              checks: Sequence[str]) -> Primitive:
    """A reduction over static axes: identity(dtype) is its initial value, combine(dtype) the StableHLO op of its
    body, derivative(prim) -> (jvp rule, vjp rule). backend_form(ctx, x, axes), when given, may lower it in a form
    the target backend runs faster (the value, or None for the plain stablehlo.reduce); checks: what checkify
    checks of it (NAN_CHECK for a sum or product, as JAX's)."""
    prim = Primitive(name, checks=checks)
    prim.def_rule("sharding_rule", explicit.reduction)

    @prim.def_rule("abstract_eval")
    def abstract_eval(x: ShapedArray, *, axes: tuple[int, ...]) -> ShapedArray:
        check_dtype(name, x, kinds)
        if any(not 0 <= a < x.ndim for a in axes) or len(set(axes)) != len(axes):
            raise TypeError(f"{name}: axes {axes} are invalid for {x.str_short()}")
        return ShapedArray(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype, x.weak_type)

    @prim.def_rule("lowering")
    def lowering(ctx: LoweringContext, x: str, *, axes: tuple[int, ...]) -> list[str]:
        if backend_form is not None and (value := backend_form(ctx, x, axes)) is not None:
            return [value]
        dtype = ctx.avals_in[0].dtype
        return [ctx.emitter.reduce(x, ctx.avals_in[0], axes, combine(dtype), identity(dtype))]

    jvp, vjp = derivative(prim)
    prim.def_rule("jvp", jvp)
    prim.def_rule("vjp", vjp)

    @prim.def_rule("batching")
    def batching(args: list[Any], dims: list[BatchDim], *, axes: tuple[int, ...]
                 ) -> tuple[list[Any], list[BatchDim]]:
        d = dims[0]
        moved = tuple(a if a < d else a + 1 for a in axes)
        return [prim.bind(args[0], axes=moved)], [d - sum(1 for a in axes if a < d)]

    return prim


def _reduce_sum_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                    axes: tuple[int, ...]) -> list[Any]:
    shape = aval_of(ins[0]).shape
    return [broadcast_in_dim(cts[0], shape, kept_dims(len(shape), axes))]


reduce_sum_p = reduction("reduce_sum", "fiuc", lambda dtype: 0,
                         lambda dtype: "or" if dt.is_bool(dtype) else "add",
                         lambda prim: (linear_jvp(prim), _reduce_sum_vjp),
                         lambda ctx, x, axes: row_fusion.lower_sum(ctx.emitter, x, ctx.avals_in[0], axes)
                         or backend_forms.lower_sum(ctx.emitter, x, ctx.avals_in[0], axes),
                         checks=NAN_CHECK)


def reduce_axes(name: str, x: Any, axes: Any) -> tuple[int, ...]:
    return normalize_axes(name, axes, aval_of(x).ndim)


_HALF_FLOATS = (np.dtype(np.float16), np.dtype(dt.bfloat16))


def reduce_sum(x: Any, axes: Sequence[int] | None = None) -> Any:
    """The sum over axes. With the allow_f16_reductions option off, summing float16 or bfloat16 values (over an
    axis longer than 1) raises ValueError, as JAX's (ember.numpy's sum and mean accumulate in float32)."""
    aval = aval_of(x)
    axes = normalize_axes("reduce_sum", axes, aval.ndim)
    if aval.dtype in _HALF_FLOATS and not config.read_canonical("allow_f16_reductions") and any(
            aval.shape[a] != 1 for a in axes):
        raise ValueError(f"reduce_sum on operand {aval.str_short()} (axes {axes}) is not allowed when "
                         "allow_f16_reductions is False (ember.config): convert to float32 first")
    return reduce_sum_p.bind(x, axes=axes)


__all__ = ["broadcast", "broadcast_in_dim", "broadcasted_iota", "convert_element_type", "full", "full_like", "iota",
           "squeeze", "stage",
           "reduce_sum", "reshape", "transpose", "zeros_like"]
