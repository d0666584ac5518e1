"""jax.lax's helpers that are compositions of primitives (their derivatives and batching come from those): shape
helpers (expand_dims, collapse, index_in_dim, ...), shape arithmetic for convolutions and windows,
conv_general_dilated_patches, and the small types of the API (Precision, RoundingMethod,
DotDimensionNumbers, ConvGeneralDilatedDimensionNumbers)."""
from __future__ import annotations

import enum
import math
from typing import Any, Sequence, Union

import numpy as np

from ember._core import aval_of, is_python_scalar
from ember._core import dtypes as dt
from ember._core.checks import normalize_axes, normalize_axis, static_int, static_ints
from ember._prims.conv import (ConvDimensionNumbers, _transpose_pads, conv_dimension_numbers,
                               conv_general_dilated, padtype_to_pads)
from ember._prims.dot import (PRECISION_LEVELS, DotAlgorithm, DotAlgorithmPreset, canonical_precision, dot_general,
                              is_algorithm)
from ember._prims.elementwise import mul, reduce_precision
from ember._prims.indexing import GatherDimensionNumbers, gather
from ember._prims.shape import broadcast_in_dim, convert_element_type, full, reshape, squeeze, transpose
from ember._prims.slicing import concatenate, slice_in_dim
from ember._prims.windowed import window_shape


# ---------------------------------------------------------------------------------------------------------------
# Types of the API
class Precision(enum.Enum):
    """The precision of a dot or convolution on accelerators (like jax.lax.Precision): it goes into the program's
    precision_config, and the CPU computes in the operands' dtype whatever the value. Strings name the same levels
    (ember._prims.dot.PRECISION_LEVELS)."""
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value: Any) -> "Precision | None":
        level = PRECISION_LEVELS.get(value.lower()) if isinstance(value, str) else None
        return None if level is None else cls[level]

    def __str__(self) -> str:
        return self.name


PrecisionLike = Union[None, str, Precision, tuple[str, str], tuple[Precision, Precision], DotAlgorithm,
                      DotAlgorithmPreset]


class RoundingMethod(enum.IntEnum):
    """How lax.round breaks ties (like jax.lax.RoundingMethod)."""
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


# ((lhs_contracting, rhs_contracting), (lhs_batch, rhs_batch)), as jax.lax.DotDimensionNumbers
DotDimensionNumbers = tuple[tuple[Sequence[int], Sequence[int]], tuple[Sequence[int], Sequence[int]]]
# None, a ConvDimensionNumbers, or three layout strings such as ("NHWC", "HWIO", "NHWC")
ConvGeneralDilatedDimensionNumbers = Union[None, ConvDimensionNumbers, tuple[str, str, str]]


def dtype(x: Any) -> np.dtype:
    """The dtype x has (or names) in ember: a Python scalar's default dtype, an array's dtype (like jax.lax.dtype)."""
    if is_python_scalar(x):
        return dt.parse_dtype(type(x))
    if isinstance(x, (str, type, np.dtype)):
        return dt.parse_dtype(x)
    return aval_of(x).dtype


def empty(shape: Sequence[int], dtype: Any) -> Any:
    """An array of the given shape and dtype whose values are unspecified (zeros here, as in JAX)."""
    return full(shape, 0, dtype)


# ---------------------------------------------------------------------------------------------------------------
# Shape helpers
def expand_dims(array: Any, dimensions: Sequence[int]) -> Any:
    """Insert dimensions of size 1 at the given positions of the result (like jax.lax.expand_dims)."""
    shape = aval_of(array).shape
    ndim_out = len(shape) + len(static_ints("expand_dims", "dimensions", dimensions))
    dims = normalize_axes("expand_dims", dimensions, ndim_out)
    kept = [d for d in range(ndim_out) if d not in dims]
    out_shape = [1] * ndim_out
    for d, n in zip(kept, shape):
        out_shape[d] = n
    return broadcast_in_dim(array, out_shape, kept)


def shape_as_value(shape: Sequence[int]) -> Any:
    """shape as an integer array (like jax.lax.shape_as_value): a numpy int32 array (int64 when a dimension does not
    fit int32; ember's shapes are constant, as JAX's without shape polymorphism); the empty shape gives an ember
    int32 array of shape (0,), as JAX's."""
    if isinstance(shape, int | np.integer):
        raise TypeError(f"shape_as_value: shape must be a sequence of ints, got the int {shape!r}")
    dims = static_ints("shape_as_value", "shape", shape)
    if not dims:
        return full((0,), 0, dt.int32)
    return np.asarray(dims, np.int64 if any(d > np.iinfo(np.int32).max for d in dims) else np.int32)


def collapse(operand: Any, start_dimension: int, stop_dimension: int | None = None) -> Any:
    """Merge dimensions [start_dimension, stop_dimension) into one (like jax.lax.collapse)."""
    shape = aval_of(operand).shape
    lo = normalize_axis("collapse", static_int("collapse", "start_dimension", start_dimension), len(shape))
    hi = len(shape) if stop_dimension is None else static_int("collapse", "stop_dimension", stop_dimension)
    hi = hi + len(shape) if hi < 0 else hi
    if not lo <= hi <= len(shape):
        raise ValueError(f"collapse: stop_dimension {stop_dimension} must lie in [{lo}, {len(shape)}] for shape "
                         f"{shape}")
    return reshape(operand, shape[:lo] + (math.prod(shape[lo:hi]),) + shape[hi:])


def broadcast_to_rank(x: Any, rank: int) -> Any:
    """x with leading dimensions of size 1 added up to rank (like jax.lax.broadcast_to_rank)."""
    shape = aval_of(x).shape
    rank = static_int("broadcast_to_rank", "rank", rank)
    if rank < len(shape):
        raise ValueError(f"broadcast_to_rank: rank {rank} is below the rank of shape {shape}")
    return reshape(x, (1,) * (rank - len(shape)) + shape)


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The numpy-style broadcast of shapes (like jax.lax.broadcast_shapes)."""
    shapes = tuple(static_ints("broadcast_shapes", "shapes", s) for s in shapes)
    if not shapes:
        return ()
    rank = max(len(s) for s in shapes)
    padded = [(1,) * (rank - len(s)) + s for s in shapes]
    out = []
    for sizes in zip(*padded):
        bigger = {n for n in sizes if n != 1}
        if len(bigger) > 1:
            raise ValueError(f"Incompatible shapes for broadcasting: shapes=[{', '.join(map(str, shapes))}]")
        out.append(bigger.pop() if bigger else 1)
    return tuple(out)


def broadcast_like(arr: Any, like_arr: Any) -> Any:
    """arr broadcast (numpy-style, trailing dimensions aligned) to the shape of like_arr."""
    shape, like = aval_of(arr).shape, aval_of(like_arr).shape
    if broadcast_shapes(shape, like) != like:
        raise ValueError(f"broadcast_like: shape {shape} does not broadcast to {like}")
    return broadcast_in_dim(arr, like, tuple(range(len(like) - len(shape), len(like))))


def index_in_dim(operand: Any, index: int, axis: int = 0, keepdims: bool = True) -> Any:
    """The slice at a static index along axis (like jax.lax.index_in_dim); keepdims keeps the axis (size 1)."""
    shape = aval_of(operand).shape
    axis = normalize_axis("index_in_dim", static_int("index_in_dim", "axis", axis), len(shape))
    index = static_int("index_in_dim", "index", index)
    n = shape[axis]
    if not -n <= index < n:
        raise IndexError(f"index_in_dim: index {index} is out of bounds for axis {axis} of size {n}")
    index = index + n if index < 0 else index
    out = slice_in_dim(operand, index, index + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


def index_take(src: Any, idxs: Sequence[Any], axes: Sequence[int]) -> Any:
    """src[idxs[0], idxs[1], ...] along axes (one 1-D index array per axis, all of one length N): the N selected
    slices stacked first, followed by src's other dimensions (like jax.lax.index_take)."""
    shape = aval_of(src).shape
    axes = tuple(normalize_axis("index_take", a, len(shape)) for a in static_ints("index_take", "axes", axes))
    if len(idxs) != len(axes):
        raise TypeError(f"index_take: {len(idxs)} index arrays for {len(axes)} axes")
    indices = concatenate([reshape(i, (aval_of(i).size, 1)) for i in idxs], 1)
    slice_sizes = tuple(1 if d in axes else n for d, n in enumerate(shape))
    dnums = GatherDimensionNumbers(offset_dims=tuple(range(1, len(shape) - len(axes) + 1)),
                                   collapsed_slice_dims=tuple(sorted(axes)), start_index_map=axes)
    return gather(src, indices, dnums, slice_sizes, mode="clip")


def batch_matmul(lhs: Any, rhs: Any, precision: Any = None) -> Any:
    """Matrix products batched over all leading dimensions (like jax.lax.batch_matmul)."""
    l_aval, r_aval = aval_of(lhs), aval_of(rhs)
    if l_aval.ndim < 2 or l_aval.ndim != r_aval.ndim:
        raise ValueError(f"batch_matmul: operands need the same rank of at least 2, got {l_aval.str_short()} and "
                         f"{r_aval.str_short()}")
    n = l_aval.ndim
    batch = tuple(range(n - 2))
    return dot_general(lhs, rhs, (((n - 1,), (n - 2,)), (batch, batch)), precision=precision)


# ---------------------------------------------------------------------------------------------------------------
# Shape arithmetic of convolutions and windows
def conv_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], strides: Sequence[int], pads: Any,
                     batch_group_count: int = 1) -> tuple[int, ...]:
    """The output shape of a convolution in NCHW / OIHW layout (like jax.lax.conv_shape_tuple)."""
    lhs_shape, rhs_shape = tuple(lhs_shape), tuple(rhs_shape)
    strides = static_ints("conv_shape_tuple", "strides", strides)
    if len(lhs_shape) != len(rhs_shape) or len(strides) != len(lhs_shape) - 2:
        raise TypeError(f"conv_shape_tuple: shapes {lhs_shape}, {rhs_shape} and strides {strides} do not agree in "
                        "rank")
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"conv_shape_tuple: pads {pads} need {len(lhs_shape) - 2} (low, high) pairs")
    space = tuple(max(0, (n + lo + hi - k) // s + 1)
                  for n, k, s, (lo, hi) in zip(lhs_shape[2:], rhs_shape[2:], strides, pads))
    return (lhs_shape[0] // batch_group_count, rhs_shape[0]) + space


def conv_general_permutations(dimension_numbers: Any) -> tuple[tuple[int, ...], ...]:
    """(lhs_perm, rhs_perm, out_perm): where each role (batch/out feature, feature/in feature, spatial...) lives,
    for layout strings such as ("NHWC", "HWIO", "NHWC") (like jax.lax.conv_general_permutations)."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return tuple(dimension_numbers)
    if not (isinstance(dimension_numbers, (tuple, list)) and len(dimension_numbers) == 3
            and all(isinstance(s, str) for s in dimension_numbers)):
        raise TypeError("conv_general_permutations: dimension_numbers must be three layout strings, got "
                        f"{dimension_numbers!r}")
    rank = len(dimension_numbers[0])
    return tuple(conv_dimension_numbers((0,) * rank, (0,) * rank, tuple(dimension_numbers)))


def _conv_dnums(lhs_shape: Sequence[int], rhs_shape: Sequence[int], dimension_numbers: Any
                ) -> ConvDimensionNumbers:
    return conv_dimension_numbers(tuple(lhs_shape), tuple(rhs_shape), dimension_numbers)


def conv_general_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], window_strides: Sequence[int],
                             padding: Any, dimension_numbers: Any) -> tuple[int, ...]:
    """The output shape of conv_general_dilated without dilation (like jax.lax.conv_general_shape_tuple)."""
    dn = _conv_dnums(lhs_shape, rhs_shape, dimension_numbers)
    lhs = tuple(lhs_shape[d] for d in dn.lhs_spec)
    rhs = tuple(rhs_shape[d] for d in dn.rhs_spec)
    out = conv_shape_tuple(lhs, rhs, window_strides, padding)
    result = [0] * len(out)
    for role, d in enumerate(dn.out_spec):
        result[d] = out[role]
    return tuple(result)


def conv_transpose_shape_tuple(lhs_shape: Sequence[int], rhs_shape: Sequence[int], window_strides: Sequence[int],
                               padding: Any, dimension_numbers: Any) -> tuple[int, ...]:
    """The output shape of conv_transpose (like jax.lax.conv_transpose_shape_tuple): the input dilated by the
    strides, padded, then a stride-1 convolution: (n - 1) * s + 1 + low + high - k + 1 per spatial dimension."""
    dn = _conv_dnums(lhs_shape, rhs_shape, dimension_numbers)
    lhs = tuple(lhs_shape[d] for d in dn.lhs_spec)
    rhs = tuple(rhs_shape[d] for d in dn.rhs_spec)
    strides = static_ints("conv_transpose_shape_tuple", "window_strides", window_strides)
    if isinstance(padding, str):
        padding = [_transpose_pads(k, s, padding.upper()) for k, s in zip(rhs[2:], strides)]
    space = tuple((n - 1) * s + 2 - k + lo + hi for n, k, s, (lo, hi) in zip(lhs[2:], rhs[2:], strides, padding))
    out = (lhs[0], rhs[0]) + space
    result = [0] * len(out)
    for role, d in enumerate(dn.out_spec):
        result[d] = out[role]
    return tuple(result)


def reduce_window_shape_tuple(operand_shape: Sequence[int], window_dimensions: Sequence[int],
                              window_strides: Sequence[int], padding: Any, base_dilation: Sequence[int] | None = None,
                              window_dilation: Sequence[int] | None = None) -> tuple[int, ...]:
    """The output shape of reduce_window (like jax.lax.reduce_window_shape_tuple)."""
    op = "reduce_window_shape_tuple"
    shape = static_ints(op, "operand_shape", operand_shape)
    dims = static_ints(op, "window_dimensions", window_dimensions)
    strides = static_ints(op, "window_strides", window_strides)
    bd = (1,) * len(shape) if base_dilation is None else static_ints(op, "base_dilation", base_dilation)
    wd = (1,) * len(shape) if window_dilation is None else static_ints(op, "window_dilation", window_dilation)
    if isinstance(padding, str):
        padding = padtype_to_pads([(n - 1) * b + 1 if n else 0 for n, b in zip(shape, bd)],
                                  [(k - 1) * w + 1 for k, w in zip(dims, wd)], strides, padding)
    pads = tuple(tuple(static_ints(op, "padding", p)) for p in padding)
    return window_shape(op, shape, dims, strides, pads, bd, wd)


def conv_general_dilated_patches(lhs: Any, filter_shape: Sequence[int], window_strides: Sequence[int],
                                 padding: Any, lhs_dilation: Sequence[int] | None = None,
                                 rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                                 precision: Any = None, preferred_element_type: Any = None) -> Any:
    """The patches a convolution with a kernel of spatial shape filter_shape sees (like
    jax.lax.conv_general_dilated_patches): the output's feature dimension holds, per input channel c and kernel
    position k (in row-major order), the value at c * prod(filter_shape) + k. A grouped convolution with a one-hot
    kernel, so derivatives and batching are the convolution's."""
    aval = aval_of(lhs)
    filter_shape = static_ints("conv_general_dilated_patches", "filter_shape", filter_shape)
    if len(filter_shape) != aval.ndim - 2:
        raise TypeError(f"conv_general_dilated_patches: filter_shape {filter_shape} needs {aval.ndim - 2} spatial "
                        f"sizes for {aval.str_short()}")
    dn = conv_dimension_numbers(aval.shape, (1, 1) + filter_shape, dimension_numbers)
    channels = aval.shape[dn.lhs_spec[1]]
    k = int(np.prod(filter_shape, dtype=np.int64))
    one_hot = np.tile(np.eye(k, dtype=aval.dtype).reshape((k, 1) + filter_shape), (channels,) + (1,) * (
        len(filter_shape) + 1))  # (O = channels * k, I = 1, spatial...) in canonical order
    kernel = np.transpose(one_hot, np.argsort(dn.rhs_spec))
    return conv_general_dilated(lhs, kernel, window_strides, padding, lhs_dilation, rhs_dilation, dn,
                                feature_group_count=channels, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                               filter_shape: Sequence[int], lhs_dilation: Sequence[int] | None = None,
                               rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                               precision: Any = None) -> Any:
    """The unshared (locally connected) convolution (like jax.lax.conv_general_dilated_local): a separate kernel
    at each output position. rhs's spatial dimensions are the output's positions, and its I dimension holds an
    input channel and a receptive-window position (filter_shape, in rhs_spec's spatial order) together, the
    channel major: the patches of conv_general_dilated_patches contracted with rhs position by position (a
    dot_general batched over the output positions). precision is a level (or one per operand); an algorithm is a
    ValueError, as in JAX."""
    op = "conv_general_dilated_local"
    canonical = canonical_precision(op, precision)
    if canonical is not None and is_algorithm(canonical):
        raise ValueError(f"Unsupported precision for {op}: {precision}")
    filter_shape = static_ints(op, "filter_shape", filter_shape)
    l_aval, r_aval = aval_of(lhs), aval_of(rhs)
    if r_aval.ndim != l_aval.ndim:
        raise TypeError(f"{op}: lhs {l_aval.str_short()} and rhs {r_aval.str_short()} need the same rank")
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding, lhs_dilation, rhs_dilation,
                                           dimension_numbers, precision=None if canonical is None else canonical[0])
    _, rhs_spec, out_spec = conv_dimension_numbers(l_aval.shape, (1, 1) + filter_shape, dimension_numbers)
    # each output position of the patches (out_spec's spatial dims) meets rhs's kernel of that position
    pairs = sorted(zip(out_spec[2:], rhs_spec[2:]))
    dims = (((out_spec[1],), (rhs_spec[1],)), (tuple(p for p, _ in pairs), tuple(r for _, r in pairs)))
    out = dot_general(patches, rhs, dims, precision=precision)  # (positions..., N, O)
    rank = l_aval.ndim
    rest = iter(range(rank - 2))  # (the positions keep their order: out_spec's spatial dims, sorted)
    order = [rank - 2 if d == out_spec[0] else rank - 1 if d == out_spec[1] else next(rest) for d in range(rank)]
    return transpose(out, order)


def _check_scaled_dot(lhs: Any, rhs: Any, lhs_scale: Any, rhs_scale: Any, dims: Any) -> None:
    """scaled_dot's argument checks (TypeErrors, as JAX's): one rank for all four, matching batch and contracting
    dimensions, and each scale of its operand's shape but along the contracting dimensions, which it divides into
    blocks of at least 2."""
    (lc, rc), (lb, rb) = dims
    shapes = [aval_of(x).shape for x in (lhs, rhs, lhs_scale, rhs_scale)]
    if len({len(s) for s in shapes}) != 1:
        raise TypeError("scaled_dot: all input tensors must have the same rank, got lhs, rhs, lhs_scale and "
                        f"rhs_scale shapes {', '.join(map(str, shapes))}")
    if len(lb) != len(rb) or len(lc) != len(rc):
        raise TypeError(f"scaled_dot: lhs and rhs need as many batch dimensions and as many contracting dimensions, "
                        f"got dimension_numbers {dims}")
    for i, j in zip(lb, rb):
        sizes = {shapes[0][i], shapes[1][j], shapes[2][i], shapes[3][j]}
        if len(sizes) != 1:
            raise TypeError(f"scaled_dot: all input tensors must have the same batch dimension size for batch dims "
                            f"({i}, {j}), got shapes {', '.join(map(str, shapes))}")
    for i, j in zip(lc, rc):
        if shapes[0][i] != shapes[1][j]:
            raise TypeError(f"scaled_dot: lhs contracting dim {i} of size {shapes[0][i]} does not match rhs "
                            f"contracting dim {j} of size {shapes[1][j]}")
    for side, shape, scale, contracting in (("lhs", shapes[0], shapes[2], lc), ("rhs", shapes[1], shapes[3], rc)):
        for i, (size, blocks) in enumerate(zip(shape, scale)):
            if i not in contracting:
                if blocks != size:
                    raise TypeError(f"scaled_dot: {side} dim {i} of size {size} does not match its scale's dim size "
                                    f"{blocks}")
            elif blocks == 0 or size % blocks:
                raise TypeError(f"scaled_dot: {side} contracting dim {i} of size {size} must be divisible by its "
                                f"scale's dim size {blocks}")
            elif size // blocks < 2:
                raise TypeError(f"scaled_dot: the ratio of {side} contracting dim {i} to its scale's dim size "
                                f"({size // blocks}) must be at least 2")


def _repeat_blocks(scale: Any, shape: Sequence[int]) -> Any:
    """scale with each entry repeated over its block: along each dimension where scale is shorter than shape, every
    element k times (k = shape[i] // scale.shape[i])."""
    for i, size in enumerate(shape):
        have = aval_of(scale).shape
        if have[i] != size:
            wide = have[:i + 1] + (size // have[i],) + have[i + 1:]
            scale = broadcast_in_dim(scale, wide, tuple(d for d in range(len(wide)) if d != i + 1))
            scale = reshape(scale, have[:i] + (size,) + have[i + 1:])
    return scale


def scaled_dot(lhs: Any, rhs: Any, *, lhs_scale: Any = None, rhs_scale: Any = None, dimension_numbers: Any = None,
               preferred_element_type: Any = None) -> Any:
    """(lhs * lhs_scale) . (rhs * rhs_scale), a dot_general of block-scaled operands (like jax.lax.scaled_dot):
    each scale has its operand's shape but along the contracting dimensions, where each entry scales a block of
    at least 2 elements (a missing scale is ones). As JAX computes it on the CPU: operands and scales rounded to
    bfloat16, multiplied in bfloat16, and contracted to preferred_element_type (bfloat16 by default; float32 keeps
    a float32 result; another dtype is the bfloat16 result converted, float64's the float32 one). Without
    dimension_numbers the operands are matrices, or stacks of them with leading batch dimensions. JAX has no
    derivative for it; ember's flows through the roundings (unchanged) and the products."""
    l_aval = aval_of(lhs)
    if dimension_numbers is None:
        if l_aval.ndim < 2:
            raise TypeError("scaled_dot does not support 0-rank and 1-rank operands.")
        n = l_aval.ndim
        dimension_numbers = (((n - 1,), (n - 2,)), (tuple(range(n - 2)), tuple(range(n - 2))))
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError) as err:
        raise TypeError("scaled_dot: dimension_numbers must be ((lhs_contracting, rhs_contracting), "
                        f"(lhs_batch, rhs_batch)), got {dimension_numbers!r}") from err
    dims = tuple(tuple(static_ints("scaled_dot", "dimension_numbers", d) for d in pair)
                 for pair in ((lc, rc), (lb, rb)))
    out_dtype = dt.check_user_dtype(dt.bfloat16 if preferred_element_type is None else preferred_element_type,
                                    "scaled_dot")
    scales = []
    for x, scale, contracting in ((lhs, lhs_scale, dims[0][0]), (rhs, rhs_scale, dims[0][1])):
        if scale is None:  # (ones of one element along the contracting dimensions)
            shape = tuple(1 if i in contracting else n for i, n in enumerate(aval_of(x).shape))
            scale = full(shape, 1, dt.bfloat16)
        scales.append(scale)
    _check_scaled_dot(lhs, rhs, *scales, dims)
    scaled = [_bfloat16_product(x, _repeat_blocks(scale, aval_of(x).shape)) for x, scale in zip((lhs, rhs), scales)]
    if out_dtype == dt.float32:
        return dot_general(*scaled, dims)
    bf16 = [convert_element_type(x, dt.bfloat16) for x in scaled]  # (exact: the values are bfloat16's)
    if out_dtype == dt.bfloat16:
        return dot_general(*bf16, dims)
    if dt.is_float(out_dtype) and out_dtype.itemsize > 4:
        return convert_element_type(dot_general(*scaled, dims), out_dtype)
    return convert_element_type(dot_general(*bf16, dims), out_dtype)


def _to_bfloat16(x: Any) -> Any:
    """x rounded to bfloat16's values (nearest even), kept in float32 (float64 for float64 x): a reduce_precision,
    which XLA keeps, where the conversions to bfloat16 and back may be dropped when a program keeps excess
    precision."""
    wide = dt.float64 if aval_of(x).dtype == dt.float64 else dt.float32
    return reduce_precision(convert_element_type(x, wide), exponent_bits=8, mantissa_bits=7)


def _bfloat16_product(x: Any, scale: Any) -> Any:
    """x * scale as JAX's scaled_dot computes it on the CPU: both rounded to bfloat16, their product rounded to
    bfloat16 (in float32, where it is exact before the rounding)."""
    return _to_bfloat16(mul(_to_bfloat16(x), _to_bfloat16(scale)))


__all__ = ["ConvGeneralDilatedDimensionNumbers", "DotDimensionNumbers", "Precision", "PrecisionLike", "RoundingMethod",
           "batch_matmul", "broadcast_like", "broadcast_shapes", "broadcast_to_rank", "collapse",
           "conv_general_dilated_local", "conv_general_dilated_patches", "conv_general_permutations",
           "conv_general_shape_tuple", "conv_shape_tuple", "conv_transpose_shape_tuple", "dtype", "empty",
           "expand_dims", "index_in_dim", "index_take", "reduce_window_shape_tuple", "scaled_dot", "shape_as_value"]
