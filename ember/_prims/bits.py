"""Bit-level primitives: bitcast_convert_type and threefry2x32, the counter-based hash under ember.random.

threefry2x32(k1, k2, x1, x2) -> (y1, y2) is Threefry-2x32 with 20 rounds (Salmon et al., "Parallel random numbers:
as easy as 1, 2, 3", SC 2011) applied elementwise to uint32 operands; rank-0 operands broadcast, so one key hashes
a whole array of counters. It is lowered to plain uint32 arithmetic (adds, xors, rotations), which XLA fuses into
one loop; the result equals jax.random's threefry bit for bit. Neither primitive is differentiable."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ember._core import Primitive, ShapedArray, aval_of
from ember._core import dtypes as dt
from ember._hlo import LoweringContext
from ember._prims.checks import elementwise_shape
from ember._prims.families import elementwise_batching
from ember._prims.shape import BatchDim, moveaxis
from ember._prims import explicit


# ---------------------------------------------------------------------------------------------------------------
# bitcast_convert_type(x, new_dtype): the same bits read as another dtype. Between widths the last dimension
# grows (to a narrower dtype: wide_bits // narrow_bits elements per value) or shrinks (to a wider one).
bitcast_convert_type_p = Primitive("bitcast_convert_type", checks=())
bitcast_convert_type_p.def_rule("sharding_rule", explicit.bitcast)


def _bit_width(dtype: np.dtype) -> int:
    return np.dtype(dtype).itemsize * 8


@bitcast_convert_type_p.def_rule("abstract_eval")
def _bitcast_abstract_eval(x: ShapedArray, *, new_dtype: np.dtype) -> ShapedArray:
    if dt.is_bool(x.dtype) or dt.is_bool(new_dtype):
        raise TypeError(f"bitcast_convert_type: booleans have no bit layout to reinterpret, got {x.str_short()} "
                        f"to {np.dtype(new_dtype).name}")
    if dt.is_complex(x.dtype) or dt.is_complex(new_dtype):  # (as jax.lax: bitcast the real and imaginary parts)
        raise TypeError(f"bitcast_convert_type: complex dtypes are not supported, got {x.str_short()} to "
                        f"{np.dtype(new_dtype).name}")
    old, new = _bit_width(x.dtype), _bit_width(new_dtype)
    if old == new:
        return ShapedArray(x.shape, new_dtype)
    if old > new:
        return ShapedArray(x.shape + (old // new,), new_dtype)
    if not x.shape or x.shape[-1] != new // old:
        raise TypeError(f"bitcast_convert_type: to a {new}-bit dtype from {x.str_short()} needs a last dimension "
                        f"of size {new // old}")
    return ShapedArray(x.shape[:-1], new_dtype)


@bitcast_convert_type_p.def_rule("lowering")
def _bitcast_lowering(ctx: LoweringContext, x: str, *, new_dtype: np.dtype) -> list[str]:
    return [ctx.op("stablehlo.bitcast_convert", [x], ctx.aval_out)]


bitcast_convert_type_p.mark_not_differentiable()


@bitcast_convert_type_p.def_rule("batching")
def _bitcast_batching(args: Sequence[Any], dims: Sequence[BatchDim], *, new_dtype: np.dtype
                      ) -> tuple[list[Any], list[BatchDim]]:
    (x,), (d,) = args, dims
    aval = aval_of(x)
    if _bit_width(new_dtype) > _bit_width(aval.dtype) and d == aval.ndim - 1:  # the last dimension goes away
        x, d = moveaxis(x, d, 0), 0
    return [bitcast_convert_type_p.bind(x, new_dtype=new_dtype)], [d]


def bitcast_convert_type(x: Any, new_dtype: Any) -> Any:
    """x's bits as new_dtype (like jax.lax.bitcast_convert_type; a 64-bit new_dtype is its 32-bit one without
    x64, as JAX's)."""
    new_dtype = dt.check_user_dtype(new_dtype, "bitcast_convert_type")
    if aval_of(x).dtype == new_dtype:
        return x
    return bitcast_convert_type_p.bind(x, new_dtype=new_dtype)


# ---------------------------------------------------------------------------------------------------------------
threefry2x32_p = Primitive("threefry2x32", multiple_results=True, checks=())
threefry2x32_p.def_rule("sharding_rule", lambda *avals: [explicit.broadcasting("threefry2x32")(*avals)] * 2)

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA  # Threefish's key-schedule constant


@threefry2x32_p.def_rule("abstract_eval")
def _threefry_abstract_eval(k1: ShapedArray, k2: ShapedArray, x1: ShapedArray, x2: ShapedArray
                            ) -> list[ShapedArray]:
    avals = (k1, k2, x1, x2)
    if any(a.dtype != dt.uint32 for a in avals):
        raise TypeError("threefry2x32: operands must be uint32, got " + ", ".join(a.str_short() for a in avals))
    out = ShapedArray(elementwise_shape("threefry2x32", avals), dt.uint32)
    return [out, out]


@threefry2x32_p.def_rule("lowering")
def _threefry_lowering(ctx: LoweringContext, k1: str, k2: str, x1: str, x2: str) -> list[str]:
    aval = ctx.avals_out[0]
    shape = aval.shape
    k1, k2, x1, x2 = (ctx.broadcast(o, a, shape) for o, a in zip((k1, k2, x1, x2), ctx.avals_in))

    def const(value: int) -> str:
        return ctx.constant(value, aval)

    def op(name: str, a: str, b: str) -> str:
        return ctx.op(f"stablehlo.{name}", [a, b], aval)

    def rotate_left(v: str, r: int) -> str:
        return op("or", op("shift_left", v, const(r)), op("shift_right_logical", v, const(32 - r)))

    keys = [k1, k2, op("xor", op("xor", k1, k2), const(_PARITY))]
    v1, v2 = op("add", x1, keys[0]), op("add", x2, keys[1])
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            v1 = op("add", v1, v2)
            v2 = op("xor", v1, rotate_left(v2, r))
        v1 = op("add", v1, keys[(i + 1) % 3])
        v2 = op("add", v2, op("add", keys[(i + 2) % 3], const(i + 1)))
    return [v1, v2]


threefry2x32_p.mark_not_differentiable()


threefry2x32_p.def_rule("batching", elementwise_batching(threefry2x32_p))


def threefry2x32(k1: Any, k2: Any, x1: Any, x2: Any) -> list[Any]:
    """The Threefry-2x32 hash of the counters (x1, x2) under the key (k1, k2): uint32 arrays of one shape, or
    rank-0 ones that broadcast. Returns the two uint32 output words."""
    return threefry2x32_p.bind(k1, k2, x1, x2)


__all__ = ["bitcast_convert_type", "threefry2x32"]
