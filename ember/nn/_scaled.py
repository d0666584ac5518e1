"""jax.nn's block-scaled matmuls: scaled_matmul (operands whose blocks along the contracting dimension share one
scale), and scaled_dot_general, a dot_general of operands quantized to such blocks (the mxfp8 and nvfp4 formats of
get_scaled_dot_general_config), with JAX's quantized backward pass.

JAX 0.10.2 runs these on GPUs only (its CPU build raises NotImplementedError: its one implementation is a cuDNN
kernel); ember computes what that kernel is documented to compute, on any platform: each operand times its scales
repeated over their blocks, contracted in float32, the result in preferred_element_type. The quantization is JAX's
(`quantize` in jax/_src/cudnn/scaled_matmul_stablehlo.py), written with ember's ops: per block of block_size
elements along the contracting dimension, the largest magnitude over the format's largest value is the scale
(mxfp8: a power of two, rounded up; nvfp4: float8_e4m3fn, after dividing by the global scale), the block is divided
by it, clipped to the format's range and converted to its data type (float8_e4m3fn, float4_e2m1fn: JAX's narrow
dtypes, which ember computes in)."""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Sequence

import ml_dtypes
import numpy as np

from ember import lax
from ember import numpy as enp
from ember._control.custom import custom_vjp
from ember._core import dtypes as dt


@dataclasses.dataclass(slots=True)
class BlockScaleConfig:
    """How one operand of scaled_dot_general is quantized (as JAX's BlockScaleConfig): mode "mxfp8" or "nvfp4",
    the block size along the contracting dimension, the data and scale types, nvfp4's global scale (a float32
    array of one element), and infer_only (unused, as in JAX)."""
    mode: str
    block_size: int
    data_type: Any
    scale_type: Any
    global_scale: Any
    infer_only: bool


def get_scaled_dot_general_config(mode: str, global_scale: Any = None) -> BlockScaleConfig:
    """The quantization config of scaled_dot_general for mode "mxfp8" (float8_e4m3fn data in blocks of 32, scaled
    by powers of two, float8_e8m0fnu) or "nvfp4" (float4_e2m1fn data in blocks of 16, float8_e4m3fn scales, and a
    global scale: global_scale, or ones), like jax.nn.get_scaled_dot_general_config."""
    if mode == "nvfp4":
        scale = enp.ones((1,), dtype=np.float32) if global_scale is None else global_scale
        return BlockScaleConfig("nvfp4", 16, ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e4m3fn, scale, False)
    if mode == "mxfp8":
        return BlockScaleConfig("mxfp8", 32, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu, None, False)
    raise ValueError(f"Unsupported mode: {mode}")


# ---------------------------------------------------------------------------------------------------------------
# scaled_matmul
def _repeat_last(scales: Any, size: int, what: str) -> Any:
    """scales (..., K_s) repeated over blocks to (..., size): each entry size // K_s times."""
    blocks = scales.shape[-1]
    if blocks == 0 or size % blocks:
        raise ValueError(f"scaled_matmul: the contracting dimension {size} is not a multiple of {what}'s last "
                         f"dimension {blocks}")
    return enp.repeat(scales, size // blocks, axis=-1)


def _block_scaled_matmul(a: Any, b: Any, a_scales: Any, b_scales: Any, out_dtype: np.dtype) -> Any:
    """a (B, M, K) and b (B, N, K) times their scales, contracted over K in float32: (B, M, N) of out_dtype."""
    k = a.shape[-1]
    a = a.astype(np.float32) * _repeat_last(a_scales.astype(np.float32), k, "lhs_scales")
    b = b.astype(np.float32) * _repeat_last(b_scales.astype(np.float32), k, "rhs_scales")
    out = lax.dot_general(a, b, (((2,), (2,)), ((0,), (0,))))
    return out.astype(out_dtype)


def scaled_matmul(lhs: Any, rhs: Any, lhs_scales: Any, rhs_scales: Any, preferred_element_type: Any = np.float32
                  ) -> Any:
    """Block-scaled batched matmul (like jax.nn.scaled_matmul): lhs (B, M, K) and rhs (B, N, K), each multiplied
    by its scales (B, M, K_a) and (B, N, K_b) repeated over blocks of K // K_a and K // K_b elements, contracted over
    K in float32: (B, M, N) in preferred_element_type. The mxfp8 inputs are float8_e4m3fn or float8_e5m2 with
    float8_e8m0fnu scales in blocks of 32, nvfp4's float4_e2m1fn with float8_e4m3fn scales in blocks of 16; any
    inexact operands work. JAX 0.10.2 computes it on GPUs only (its CPU build raises NotImplementedError)."""
    a, b, a_scales, b_scales = (enp.asarray(x) for x in (lhs, rhs, lhs_scales, rhs_scales))
    if not all(x.ndim == 3 for x in (a, b, a_scales, b_scales)):
        raise ValueError("scaled_matmul requires all inputs to be 3-dimensional arrays")
    if a.shape[2] != b.shape[2] or a.shape[0] != b.shape[0]:
        raise ValueError("scaled_matmul requires inputs a and b to have matching batch (B) and contract (K) "
                         f"dimensions, but got shapes {a.shape} and {b.shape}")
    if a_scales.shape[2] != b_scales.shape[2] or a_scales.shape[0] != b_scales.shape[0]:
        raise ValueError("scaled_matmul requires scales to have matching batch (B) and contract (K) dimensions, but "
                         f"got shapes {a_scales.shape} and {b_scales.shape}")
    if a_scales.shape[1] != a.shape[1] or b_scales.shape[1] != b.shape[1]:
        raise ValueError("scaled_matmul requires scales to match non-contract dimensions of inputs, but got shapes "
                         f"a: {a.shape}, b: {b.shape}, a_scales: {a_scales.shape}, b_scales: {b_scales.shape}")
    out_dtype = dt.check_user_dtype(preferred_element_type, "scaled_matmul")
    return _block_scaled_matmul(a, b, a_scales, b_scales, out_dtype)


# ---------------------------------------------------------------------------------------------------------------
# Quantization to blocks (JAX's numbers: jax/_src/cudnn/scaled_matmul_stablehlo.py's quantize)
def _power_of_two_above(x: Any) -> Any:
    """The float8_e8m0fnu scale of x >= 0 as its biased exponent byte (uint32): 2**e >= x, rounded up unless x is
    a power of two (and kept where that would pass the largest finite exponent 254); a float32 subnormal at most
    2**-127 has byte 0 (2**-127)."""
    bits = lax.bitcast_convert_type(x.astype(np.float32), np.uint32)
    exponent, mantissa = lax.shift_right_logical(bits, np.uint32(23)), bits & np.uint32(0x7FFFFF)
    round_up = (mantissa > 0) & (exponent != 0xFE) & ~((exponent == 0) & (mantissa <= 0x400000))
    return enp.where(round_up, exponent + np.uint32(1), exponent)


def _from_exponent_byte(exponent: Any, dtype: np.dtype) -> Any:
    """2**(byte - 127) in dtype, what a block is divided by; byte 0 is the dtype's smallest scale (2**-15 in
    float16, else 2**-127)."""
    value = lax.bitcast_convert_type(lax.shift_left(exponent.astype(np.uint32), np.uint32(23)), np.float32)
    smallest = 2.0 ** -15 if dtype == np.float16 else 2.0 ** -127
    return enp.where(value == 0, np.float32(smallest), value).astype(dtype)


def _e8m0_value(exponent: Any) -> Any:
    """The float32 value of a float8_e8m0fnu scale given by its byte: 2**(byte - 127), NaN for byte 255."""
    value = lax.bitcast_convert_type(lax.shift_left(exponent.astype(np.uint32), np.uint32(23)), np.float32)
    value = enp.where(exponent == 0, np.float32(2.0 ** -127), value)
    return enp.where(exponent == 255, np.float32(np.nan), value)


def _cast(x: Any, dtype: Any) -> Any:
    """x, within the range of a format's data or scale type, converted to it: rounded to nearest even as numpy's
    and JAX's casts round (XLA's conversion, as JAX's)."""
    return x.astype(np.dtype(dtype))


def _quantize(x: Any, config: BlockScaleConfig) -> tuple[Any, Any]:
    """x (B, M, K) in config's blocks along K: its values (B, M, K) of config.data_type, and its scales (B, M,
    K / block_size) as float32 values (the config.scale_type values scaled_matmul would be given, converted)."""
    shape, size = x.shape, config.block_size
    if shape[-1] < size or shape[-1] % size:
        raise ValueError(f"scaled_dot_general: the contracting size {shape[-1]} must be a positive multiple of the "
                         f"{config.mode} block size {size}")
    blocks = x.reshape(shape[:-1] + (shape[-1] // size, size))
    top = np.asarray(ml_dtypes.finfo(config.data_type).max).astype(x.dtype)

    def scale_of(values: Any) -> Any:
        return enp.max(enp.abs(values), axis=-1, keepdims=True) / top
    if config.mode == "mxfp8":
        if config.global_scale is not None or np.dtype(config.scale_type) != np.dtype(ml_dtypes.float8_e8m0fnu):
            raise ValueError("scaled_dot_general: an mxfp8 config has float8_e8m0fnu scales and no global scale")
        exponent = _power_of_two_above(scale_of(blocks))
        divisor, scale = _from_exponent_byte(exponent, x.dtype), _e8m0_value(exponent)
    elif config.mode == "nvfp4":
        if np.dtype(config.scale_type) != np.dtype(ml_dtypes.float8_e4m3fn) or \
                enp.asarray(config.global_scale).dtype != np.float32:
            raise ValueError("scaled_dot_general: an nvfp4 config has float8_e4m3fn scales and a float32 global "
                             "scale")
        blocks = blocks / config.global_scale
        scale_top = np.asarray(ml_dtypes.finfo(config.scale_type).max).astype(x.dtype)
        stored = lax.optimization_barrier(_cast(enp.clip(scale_of(blocks), 0, scale_top), config.scale_type))
        divisor = scale = stored.astype(np.float32)
    else:
        raise ValueError(f"Unrecognized mode: {config.mode}.")
    values = _cast(enp.clip(blocks / divisor, -top, top), config.data_type).reshape(shape)
    return values, scale.reshape(scale.shape[:-1])


def _to_3d(x: Any, contracting: Sequence[int], batch: Sequence[int]) -> Any:
    """x as (B, M, K): its batch dimensions, its free ones and its contracting ones (each group in increasing
    order), each group merged into one."""
    free = [d for d in range(x.ndim) if d not in contracting and d not in batch]
    groups = [sorted(batch), free, sorted(contracting)]
    sizes = tuple(int(np.prod([x.shape[d] for d in group], dtype=int)) for group in groups)
    return enp.transpose(x, [d for group in groups for d in group]).reshape(sizes)


def _product_shape(lhs_shape: Sequence[int], rhs_shape: Sequence[int], lhs_dims: Any, rhs_dims: Any
                   ) -> tuple[int, ...]:
    """dot_general's result shape: batch, lhs free, rhs free dimensions (dims: (contracting, batch) each)."""
    (lc, lb), (rc, rb) = lhs_dims, rhs_dims
    return (tuple(n for i, n in enumerate(lhs_shape) if i in lb)
            + tuple(n for i, n in enumerate(lhs_shape) if i not in lc and i not in lb)
            + tuple(n for i, n in enumerate(rhs_shape) if i not in rc and i not in rb))


def _quantized_product(a: Any, b: Any, a_dims: Any, b_dims: Any, out_dtype: np.dtype,
                       configs: Sequence[BlockScaleConfig]) -> Any:
    """a . b (dims: (contracting, batch) of each) with both quantized to their configs' blocks: nvfp4 products
    are computed in float32 and multiplied by the global scales before the conversion to out_dtype."""
    a_q, a_scale = _quantize(_to_3d(a, *a_dims), configs[0])
    b_q, b_scale = _quantize(_to_3d(b, *b_dims), configs[1])
    nvfp4 = configs[0].mode == "nvfp4"
    out = _block_scaled_matmul(a_q, b_q, a_scale, b_scale, np.dtype(np.float32) if nvfp4 else out_dtype)
    if nvfp4:
        out = (out * (configs[0].global_scale * configs[1].global_scale)).astype(out_dtype)
    return out.reshape(_product_shape(a.shape, b.shape, a_dims, b_dims))


def _operand_cotangent(g: Any, x: Any, y: Any, dims: Any, out_dtype: np.dtype, configs: Sequence[BlockScaleConfig],
                       swap: bool) -> Any:
    """The cotangent of x in x . y (x = lhs, or rhs with swap) from the cotangent g of the product: g contracted
    with y over y's free dimensions, quantized as JAX quantizes it (g by configs[0], y by configs[1]; nvfp4's
    backward pass is an unquantized float product), put back in x's dimension order."""
    (xc, yc), (xb, yb) = dims
    y_free = [d for d in range(y.ndim) if d not in yc and d not in yb]
    x_free = [d for d in range(x.ndim) if d not in xc and d not in xb]
    nb = len(xb)
    first_y = nb if swap else nb + len(x_free)  # (g is (batch, lhs free, rhs free))
    g_y = list(range(first_y, first_y + len(y_free)))
    g_dims, y_dims = (g_y, list(range(nb))), (y_free, list(yb))
    if configs[0].mode != "nvfp4":
        out = _quantized_product(g, y, g_dims, y_dims, out_dtype, configs)
    else:
        g3, y3 = _to_3d(g, *g_dims), _to_3d(y, *y_dims)
        out = lax.dot_general(g3, y3, (((2,), (2,)), ((0,), (0,))), preferred_element_type=out_dtype)
        out = out.reshape(_product_shape(g.shape, y.shape, g_dims, y_dims))
    # out: (batch, x free, x contracting in the order of y's matching dims)
    x_contracting = [xc[list(yc).index(d)] for d in sorted(yc)]
    return enp.transpose(out, np.argsort(list(xb) + x_free + x_contracting))


def _configs(static: Any, global_scales: Any) -> list[BlockScaleConfig]:
    """The configs of scaled_dot_general's custom_vjp: their static fields, and their global scales (arguments,
    so that a scale made inside a traced function is one of its values)."""
    return [BlockScaleConfig(mode, size, data, scale, global_scale, infer_only)
            for (mode, size, data, scale, infer_only), global_scale in zip(static, global_scales)]


def _scaled_dot_general_fn(lhs: Any, rhs: Any, global_scales: Any, dims: Any, out_dtype: np.dtype, static: Any
                           ) -> Any:
    (lc, rc), (lb, rb) = dims
    return _quantized_product(lhs, rhs, (lc, lb), (rc, rb), out_dtype, _configs(static, global_scales))


def _scaled_dot_general_fwd(lhs: Any, rhs: Any, global_scales: Any, dims: Any, out_dtype: np.dtype, static: Any
                            ) -> Any:
    return _scaled_dot_general_fn(lhs, rhs, global_scales, dims, out_dtype, static), (lhs, rhs, global_scales)


def _scaled_dot_general_bwd(dims: Any, out_dtype: np.dtype, static: Any, residuals: Any, g: Any) -> Any:
    lhs, rhs, global_scales = residuals
    configs = _configs(static, global_scales)
    (lc, rc), (lb, rb) = dims
    grad_lhs = _operand_cotangent(g, lhs, rhs, dims, out_dtype, [configs[2], configs[1]], False)
    grad_rhs = _operand_cotangent(g, rhs, lhs, ((rc, lc), (rb, lb)), out_dtype, [configs[2], configs[0]], True)
    if configs[2].mode == "nvfp4":  # straight through, but zero where the forward quantization clipped
        limit = [c.global_scale * np.asarray(ml_dtypes.finfo(c.data_type).max).astype(lhs.dtype)
                 * np.asarray(ml_dtypes.finfo(c.scale_type).max).astype(lhs.dtype) for c in configs[:2]]
        grad_lhs = enp.where(enp.abs(lhs) <= limit[0], grad_lhs, 0)
        grad_rhs = enp.where(enp.abs(rhs) <= limit[1], grad_rhs, 0)
    no_scales = tuple(None if s is None else enp.zeros_like(s) for s in global_scales)  # (JAX's: no derivative)
    return grad_lhs, grad_rhs, no_scales


_scaled_dot_general_quantized = custom_vjp(_scaled_dot_general_fn, nondiff_argnums=(3, 4, 5))
_scaled_dot_general_quantized.defvjp(_scaled_dot_general_fwd, _scaled_dot_general_bwd)


def scaled_dot_general(lhs: Any, rhs: Any, dimension_numbers: Any, preferred_element_type: Any = np.float32,
                       configs: Sequence[BlockScaleConfig] | None = None, implementation: str | None = None) -> Any:
    """dot_general of block-quantized operands (like jax.nn.scaled_dot_general): with configs (lhs's, rhs's and
    the cotangent's BlockScaleConfig, from get_scaled_dot_general_config), lhs and rhs are quantized to their
    formats along the contracting dimensions and multiplied as scaled_matmul does, in preferred_element_type
    (float32, bfloat16 or float16); the backward pass quantizes the cotangent too (nvfp4's: an unquantized product
    whose cotangents are zero where the forward pass clipped). Without configs it is lax.dot_general.
    implementation is ignored (deprecated, as in JAX). JAX 0.10.2 computes the quantized product on GPUs only."""
    if implementation is not None:
        warnings.warn("Backend selector, now ignored. The system chooses the backend automatically.",
                      DeprecationWarning, stacklevel=2)
    if configs is None:
        return lax.dot_general(lhs, rhs, dimension_numbers, preferred_element_type=preferred_element_type)
    if preferred_element_type is None or np.dtype(preferred_element_type) not in (
            np.dtype(np.float32), dt.bfloat16, np.dtype(np.float16)):
        raise TypeError("scaled_dot_general: only supports preferred_element_type in (f32, bf16, f16), but got "
                        f"{preferred_element_type}")
    out_dtype = np.dtype(preferred_element_type)
    if len(configs) != 3:
        raise ValueError(f"scaled_dot_general: configs must be three BlockScaleConfigs (lhs, rhs and the "
                         f"cotangent's), got {len(configs)}")
    lhs, rhs = enp.asarray(lhs), enp.asarray(rhs)
    (lc, rc), (lb, rb) = dimension_numbers
    lc, rc, lb, rb = (tuple(int(d) for d in group) for group in (lc, rc, lb, rb))
    squeeze = not lb or not rb  # (a batch dimension of one, added last and removed from the result)
    if not lb:
        lhs, lb = enp.expand_dims(lhs, lhs.ndim), (lhs.ndim,)
    if not rb:
        rhs, rb = enp.expand_dims(rhs, rhs.ndim), (rhs.ndim,)
    static = tuple((c.mode, int(c.block_size), c.data_type, c.scale_type, c.infer_only) for c in configs)
    global_scales = tuple(None if c.global_scale is None else enp.asarray(c.global_scale) for c in configs)
    out = _scaled_dot_general_quantized(lhs, rhs, global_scales, ((lc, rc), (lb, rb)), out_dtype, static)
    return enp.squeeze(out, axis=0) if squeeze else out


__all__ = ["get_scaled_dot_general_config", "scaled_dot_general", "scaled_matmul"]
