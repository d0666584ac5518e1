"""How some operations are written for the backend that will compile them: the one place of ember's lowering
policy per backend (measured in docs/performance.md, "Reductions and the CPU backend").

StableHLO says what to compute, not how; each XLA backend turns it into code its own way, and the CPU plugin's
XLA, older than jaxlib's, does badly on some of the commonest forms in a model:

- a reduction fed by elementwise work (`sum(x * x, axis=-1)`, softmax's `sum(exp(x - m))`, the variance's
  squares) is split by XLA's tree-reduction rewrite into a separate elementwise loop that writes the whole
  intermediate array to memory, a `reduce-window` and a final reduction: 2-4x the time of jaxlib's fused code;
- a reduction over leading axes fed by elementwise work becomes an elementwise loop and a YNNPACK reduction that
  reads its output back: ~1.5-2x;
- a reduction of a whole rank-1 array runs slower in YNNPACK than the same elements viewed as a matrix;
- a product of operands with several dimensions in one role (`x[b, t, d] @ w[d, f]`: two free dimensions; its
  weight gradient: two contracting ones) runs much slower than the same product with those dimensions merged.

On the CPU plugin a float32 `reduce_sum` is therefore written as the fastest of equivalent forms, chosen by the
shape alone (the same rule whether or not an elementwise producer feeds it: where nothing is fused the forms
measured the same):

- **rows** (the reduced axes are the trailing ones): the row kernel's sums (ember._hlo.row_fusion.lower_sum: each
  row summed in 16 lanes) where it runs, else the plain reduce (a matrix-vector product with ones, `x[K, R] @
  ones[R]`, is as fast but adds a row's terms one after another: 2-3x less accurate than XLA's reduce on rows of
  1024-4096); a whole array as rows (its trailing dims, or up to 2048 elements of a rank-1 array) summed by that
  product, whose sums are then summed (as accurate as JAX's: the rounding of each row sum averages out);
- **leading axes**: stages, `x[M/k, k, K]` summed over k (a short reduction XLA fuses with the producer into
  one loop over the input), an optimization barrier (so XLA does not merge the reductions back into the slow
  form), and the remaining `[M/k, K]` summed in stages of k rows likewise, down to at most k (as accurate as a
  pairwise sum; one plain reduce of the partial sums was 12x less accurate than JAX's);
- anything else (middle axes, small arrays, other dtypes, other backends, programs partitioned over several
  devices, portable exported modules): the plain `stablehlo.reduce`.

A float32 sin, cos, tan, log1p or erf_inv of at least MIN_ELEMENTS elements is a call of ember's kernel (`custom_call
@ember_elementwise`, ember/_runtime/vmath.h: a vector at a time, within 0.5-1.05 ulp), where the plugin's XLA calls
libm per element or evaluates long expansions (KERNEL_OPS: measured), unless the equation asks for
AccuracyMode.DEFAULT (XLA's implementation: ember.random's samplers, for jax.random's values).

A `dot_general` of float32 operands with no free dimensions (every dimension a batch or a contracting one:
`einsum("ij,ij->i")`, `einsum("bi,bi->b")`, a dot product of matrices), which XLA's CPU backend runs as many tiny
matrix products, is the elementwise product summed over the contracting dimensions (by the sum forms above).

A float32 `x[m, k] @ w[n, k].T` (the right operand stored transposed, or transposed by a transpose equation) with
few rows m and a large w, which XLA's CPU backend runs 2-10x slower than the same product untransposed, is
`(w @ x.T).T`, the two small transposes behind optimization barriers (_transposed_rhs_dot).

A `dot_general` whose operands hold each role's dimensions (batch, free, contracting) as one consecutive run is
written with each run merged into one dimension, by reshapes that move no data (any dtype).

Every sum form adds the same numbers in a different order (float rounding differs at the level of any
reordering of a float sum: the tests compare with JAX at the tolerances of its own reductions).
`ember.config.cpu_backend_forms = False` turns the policy off (read when a program is lowered)."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ember._core.config import config
from ember._core.dtypes import ShapedArray
from ember._core.shape_poly import is_symbolic_shape
from ember._hlo import targets
from ember._hlo.emitter import Emitter, dot_dimension_numbers, emit_custom_call, i64_array

# ember's transcendentals kernel (_vmath.c): every function it has, by the code its attribute `op` names it with, and
# those lowered to it: the ones the kernel computes faster than the plugin's XLA (f32[2^22], AVX2 + FMA, 2 cores
# shared with other work, ms, XLA -> kernel: sin 23-51 -> 5.3-25, cos 21-51 -> 5.1-16, tan 32-96 -> 5.5-16, log1p
# 11-28 -> 2.6-12, erf_inv 13-40 -> 8.9-24) and at least as accurate (0.50-1.05 ulp against XLA's 0.56-65). An
# equation asking for AccuracyMode.DEFAULT keeps XLA's op (elementwise.kernel_or): ember.random's samplers ask for it
# where they go through tan, log1p or erf_inv, so they draw jax.random's values bit for bit (with erf_inv lowered,
# 44% of normal's 10^6 draws were 1 ulp from JAX's). tanh, exp, log, expm1, erf, logistic: 1.4-6 ms in XLA's own
# float code, 2.5-10x slower in the kernel's double precision: kept (docs/performance.md, "Transcendentals").
ELEMENTWISE_TARGET = "ember_elementwise"
ELEMENTWISE_OPS = {"sin": 0, "cos": 1, "tan": 2, "tanh": 3, "log1p": 4, "erf_inv": 5, "exp": 6, "log": 7,
                   "expm1": 8, "erf": 9, "logistic": 10}
KERNEL_OPS = frozenset({"sin", "cos", "tan", "log1p", "erf_inv"})
# Below this many elements XLA's own code is as fast (measured down to f32[256,64]): the plain reduce.
MIN_ELEMENTS = 1 << 15
# The longest row summed by a matrix-vector product: its accumulation runs along the row, so rounding grows with
# the row's length; longer rows keep XLA's tree reduction.
MAX_ROW = 1 << 16
# Batched float32 products by ember's kernel (_batched_dot): each side at least BMM_MIN_SIDE, and at least
# BMM_MIN_WORK multiply-adds in all (smaller ones: XLA's loop is as fast as starting the kernel's threads).
BMM_TARGET = "ember_rows_bmm"
BMM_MIN_SIDE = 8
BMM_MIN_WORK = 1 << 20
# Where the AVX2 form of the kernel runs (targets.variant), only products of fewer than BMM_AVX2_MAX_PRODUCT
# multiply-adds each: its 6 x 16 loop is 1.1-1.2x slower per core than the plugin's Eigen on larger ones (AMD EPYC,
# one core, kernel vs XLA: b64 128x128 . 128x64 2563 vs 2156 us, b8 256^3 4164 vs 3442, b32 64^3 296 vs 272; its two
# threads did not make that up on 2 busy cores: 2762 vs 2180, 4042 vs 3780, 424 vs 356), and faster on small ones,
# where XLA's per-product overhead dominates (b256 8x32 . 32x16 84 vs 271, b128 32^3 174 vs 236).
BMM_AVX2_MAX_PRODUCT = 1 << 16
# `x @ w.T` as `(w @ x.T).T` (_transposed_rhs_dot) where x has at most NT_MAX_ROWS rows, w at least twice as many and
# at least NT_MIN_RHS elements (measured on f32 products, 1 to 4096 rows: docs/performance.md, "Matrix products").
NT_MAX_ROWS = 256
NT_MIN_RHS = 1 << 18
# The first stage's chunk of leading rows (16 measured best among 8, 16 and 32), and the least size of what it
# leaves: XLA's YNNPACK reduction takes the second stage only from 32768 elements; a smaller one XLA fuses back
# into the first stage's loop, which runs slower than the plain reduce.
CHUNK = 16
MIN_SECOND_STAGE = 1 << 15
# A whole array's sum views its elements as rows, summed as rows (below), then the row sums (f32[1e7]: 0.73x JAX's
# time as rows of 2000, against 0.98x for one reduce and 1.13x for two stages): rows of a rank-1 array are at most
# MAX_WHOLE_ROW long (250 to 4000 measured alike), rows of a larger rank its trailing dims, at least MIN_WHOLE_ROW.
MAX_WHOLE_ROW = 2048
MIN_WHOLE_ROW = 64
# The longest row the plugin's plain reduce sums about as accurately as JAX's on every CPU measured (AVX-512: rows
# of 1024 1.3x JAX's error, of 10**5 2x, of 10**6 3.5x; AVX2, whose 8 lanes add twice as many terms each: rows of
# 256 1.2x, 512 1.5x, 1024 1.9x): longer ones are summed in float64 (wide_sum) where the row kernel does not take
# them (correctly rounded: 0.7x JAX's error).
MAX_PLAIN_ROW = 256


def row_split(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, int] | None:
    """(rows, row): a reduction over axes of an array of this shape seen as one over the rows of a matrix, where
    axes are some (not all, not none) of its trailing axes; None otherwise."""
    axes, rank = sorted(axes), len(shape)
    if not axes or len(axes) == rank or axes != list(range(rank - len(axes), rank)):
        return None
    row = math.prod(shape[rank - len(axes):])
    return math.prod(shape[:rank - len(axes)]), row


def sum_form(shape: Sequence[int], axes: Sequence[int], dtype: np.dtype) -> tuple[str, Any] | None:
    """The form of reduce_sum(x, axes) on the CPU plugin: ("rows", (K, R)), ("stages", (M, K, k)) or None (the
    plain reduce)."""
    n = math.prod(shape)
    if dtype != np.float32 or not axes or n < MIN_ELEMENTS:
        return None
    axes = sorted(axes)
    rank = len(shape)
    if len(axes) == rank:  # a whole array: rows [K, R] summed (below), then the K row sums
        if rank == 1:  # R: the longest divisor of n up to MAX_WHOLE_ROW
            row = next((r for r in range(MAX_WHOLE_ROW, MIN_WHOLE_ROW - 1, -1) if n % r == 0), None)
        else:  # R: trailing dims, as few as make MIN_WHOLE_ROW (a reshape that splits a dim, f32[1024, 1024] as
            row, d = 1, rank  # f32[512, 2048], slows XLA's fused loop 3x; merging whole dims does not)
            while d > 0 and row < MIN_WHOLE_ROW:
                d -= 1
                row *= shape[d]
        return ("rows", (n // row, row)) if row is not None and MIN_WHOLE_ROW <= row <= MAX_ROW else None
    if axes == list(range(rank - len(axes), rank)):  # trailing axes: the row kernel's sums (row_fusion.lower_sum)
        rows = math.prod(shape[rank - len(axes):])
        return ("rows", (n // rows, rows)) if 1 < rows <= MAX_ROW else None
    if axes == list(range(len(axes))):  # leading axes
        kept = math.prod(shape[len(axes):])
        return stages(n // kept, kept)
    return None


def stages(m: int, k_kept: int) -> tuple[str, Any] | None:
    if m % CHUNK or m // CHUNK < 2 or (m // CHUNK) * k_kept < MIN_SECOND_STAGE:
        return None
    return "stages", (m, k_kept, CHUNK)


def applies(emitter: Emitter) -> bool:
    """Whether the CPU forms may be used in this body: on the CPU plugin, in a one-device program, with the
    option on."""
    return (emitter.platform == "cpu" and emitter.device_assignment is None and emitter.axis_context is None
            and config.read_canonical("cpu_backend_forms"))


def elementwise(emitter: Emitter, name: str, x: str, aval: ShapedArray) -> str | None:
    """The float32 function `name` (of KERNEL_OPS) of x (of type aval, the result's too) as a call of ember's
    transcendentals kernel, where the policy takes it (on the CPU plugin, one device, the option on, at least
    MIN_ELEMENTS elements, the kernel available); None otherwise (write XLA's op)."""
    if (name not in KERNEL_OPS or aval.dtype != np.float32
            or is_symbolic_shape(aval.shape)  # (XLA's op)
            or math.prod(aval.shape) < MIN_ELEMENTS
            or not applies(emitter) or not targets.available(ELEMENTWISE_TARGET)):
        return None
    return emit_custom_call(emitter, ELEMENTWISE_TARGET, [x], [aval], {"op": ELEMENTWISE_OPS[name]},
                            has_side_effect=False)[0]


def lower_sum(emitter: Emitter, x: str, aval: ShapedArray, axes: Sequence[int]) -> str | None:
    """The sum of x (of type aval) over axes in the form the policy above picks for this body; None where it picks
    none (write the plain reduce)."""
    if not applies(emitter):
        return None
    split = row_split(aval.shape, axes)
    if aval.dtype == np.float32 and split is not None and split[1] > MAX_PLAIN_ROW:  # (long rows the row kernel
        return wide_sum(emitter, x, aval, sorted(axes))  # did not take: in float64)
    form = sum_form(aval.shape, axes, aval.dtype)
    if form is None:
        return None
    kind, dims = form
    dtype = aval.dtype
    out_shape = tuple(d for i, d in enumerate(aval.shape) if i not in axes)
    if kind == "rows" and out_shape:  # (row sums the row kernel did not take: the product with ones adds a row's
        return None  # terms one after another, 2-3x less accurate than the plain reduce on rows of 1024-4096)
    if kind == "rows":
        kept, row = dims
        matrix = reshape(emitter, x, aval, (kept, row))
        ones = emitter.constant(1, ShapedArray((row,), dtype))
        sums = ShapedArray((kept,), dtype)
        summed = emitter.op("stablehlo.dot_general", [matrix, ones], sums,
                            {"dot_dimension_numbers": dot_dimension_numbers([1], [0], [], [])})
        if not out_shape:  # a whole array: the sum of the row sums
            return wide_sum(emitter, summed, sums, (0,))
        return reshape(emitter, summed, sums, out_shape)
    return two_stages(emitter, x, aval, dims, out_shape, "add", 0)  # (leading axes: a whole array sums as rows)


def wide_sum(emitter: Emitter, x: str, aval: ShapedArray, axes: Sequence[int]) -> str:
    """The sum of float32 x (of type aval) over axes accumulated in float64 (the conversion fused into the reduce:
    one pass over x) and rounded once. For a whole array's row sums (their rounding then averages out: as accurate
    as JAX's sum), and for rows longer than MAX_PLAIN_ROW that the row kernel does not take (the plugin's float32
    reduce of a row of 4096 was 1.7x less accurate than JAX's, of 10**6 3.5x; sums in stages of 16 were no
    better)."""
    wide = ShapedArray(aval.shape, np.dtype(np.float64))
    total = emitter.reduce(emitter.op("stablehlo.convert", [x], wide), wide, tuple(axes), "add", 0)
    return emitter.op("stablehlo.convert", [total], ShapedArray(
        tuple(d for k, d in enumerate(aval.shape) if k not in axes), aval.dtype))


def zero_padded(emitter: Emitter, x: str, aval: ShapedArray, axis: int, size: int) -> str:
    """x (of type aval) padded with zeros at the end of axis to size (x itself where it has that size)."""
    if aval.shape[axis] == size:
        return x
    shape, high = list(aval.shape), [0] * aval.ndim
    shape[axis], high[axis] = size, size - aval.shape[axis]
    zeros = i64_array([0] * aval.ndim)
    return emitter.op("stablehlo.pad", [x, emitter.constant(0, ShapedArray((), aval.dtype))],
                      ShapedArray(tuple(shape), aval.dtype),
                      {"edge_padding_low": zeros, "edge_padding_high": i64_array(high), "interior_padding": zeros})


def two_stages(emitter: Emitter, x: str, aval: ShapedArray, dims: tuple[int, int, int], out_shape: Sequence[int],
               hlo_op: str, init: Any, keep_nan: bool = False) -> str:
    """The reduction of x over its leading axes (dims: stages()'s (m, kept, chunk)) in stages: x[m/chunk, chunk,
    kept] reduced over the chunk, an optimization barrier (so XLA does not merge the stages back), then over the
    m/chunk partial results; shaped out_shape. A sum reduces the partial results in stages of chunk rows too (padded
    with zeros to a multiple of chunk), until at most chunk are left: each result is then a sum of sums of chunk
    terms, log_chunk(m) levels deep, as accurate as a pairwise sum (a plain reduce of the partial results adds them
    one after another per column: f32[25088, 64] summed over its rows was 12x less accurate than JAX's)."""
    m, kept, chunk = dims
    dtype = aval.dtype
    blocks = ShapedArray((m // chunk, chunk, kept), dtype)
    value = emitter.reduce(reshape(emitter, x, aval, blocks.shape), blocks, (1,), hlo_op, init, keep_nan)
    rows = m // chunk
    value = emitter.op("stablehlo.optimization_barrier", [value], ShapedArray((rows, kept), dtype))
    while hlo_op == "add" and rows > chunk:
        padded = -(-rows // chunk) * chunk
        value = zero_padded(emitter, value, ShapedArray((rows, kept), dtype), 0, padded)
        blocks = ShapedArray((padded // chunk, chunk, kept), dtype)
        value = emitter.reduce(reshape(emitter, value, ShapedArray((padded, kept), dtype), blocks.shape), blocks,
                               (1,), hlo_op, init, keep_nan)
        rows = padded // chunk
        value = emitter.op("stablehlo.optimization_barrier", [value], ShapedArray((rows, kept), dtype))
    out = emitter.reduce(value, ShapedArray((rows, kept), dtype), (0,), hlo_op, init, keep_nan)
    return reshape(emitter, out, ShapedArray((kept,), dtype), out_shape)


def reshape(emitter: Emitter, x: str, aval: ShapedArray, shape: Sequence[int]) -> str:
    if tuple(aval.shape) == tuple(shape):
        return x
    return emitter.op("stablehlo.reshape", [x], ShapedArray(tuple(shape), aval.dtype))


def dot_general(emitter: Emitter, lhs: str, rhs: str, lhs_aval: ShapedArray, rhs_aval: ShapedArray,
                out_aval: ShapedArray, dims: Any, attrs: dict[str, str],
                product_sums: Callable[..., str | None] | None = None) -> str | None:
    """lhs . rhs (of type out_aval) with dimension numbers dims ((lc, rc), (lb, rb)) (and the dot's other
    attributes, attrs: its precision) as a product summed over the contracting dimensions, when neither operand has
    a free dimension (the CPU computes float32 products in float32 at every precision); with merged dimensions
    where they are consecutive (_merged_dot); None otherwise (write the dot_general)."""
    (lc, rc), (lb, rb) = dims
    if not applies(emitter):
        return None
    batched = _batched_dot(emitter, lhs, rhs, lhs_aval, rhs_aval, out_aval, dims)
    if batched is not None:
        return batched
    product = _transposed_rhs_dot(emitter, lhs, rhs, lhs_aval, rhs_aval, out_aval, dims, attrs)
    if product is not None:
        return product
    if lhs_aval.dtype != np.float32 or len(lc) + len(lb) != lhs_aval.ndim or len(rc) + len(rb) != rhs_aval.ndim:
        return _merged_dot(emitter, lhs, rhs, lhs_aval, rhs_aval, out_aval, dims, attrs)
    order = tuple(lb) + tuple(lc)
    lhs = _transpose(emitter, lhs, lhs_aval, order)
    rhs = _transpose(emitter, rhs, rhs_aval, tuple(rb) + tuple(rc))
    aligned = ShapedArray(tuple(lhs_aval.shape[d] for d in order), lhs_aval.dtype)
    contracted = tuple(range(len(lb), len(order)))
    if product_sums is not None:  # (the row kernel's products summed as they are made: row_fusion.product_sums)
        summed = product_sums(emitter, lhs, rhs, aligned, contracted)
        if summed is not None:
            return summed
    product = emitter.op("stablehlo.multiply", [lhs, rhs], aligned)
    summed = lower_sum(emitter, product, aligned, contracted)
    return summed if summed is not None else emitter.reduce(product, aligned, contracted, "add", 0)


def _batched_dot(emitter: Emitter, lhs: str, rhs: str, lhs_aval: ShapedArray, rhs_aval: ShapedArray,
                 out_aval: ShapedArray, dims: Any) -> str | None:
    """A float32 batched product (`bhqd,bhkd->bhqk`: batch dims leading in both operands, each role one run of
    dims) by ember's kernel (custom_call @ember_rows_bmm, ember/_runtime/_rows.c): the plugin's XLA runs the
    batch's products one after another on one thread; the kernel splits the batch among threads (attention's
    f32[64, 128, 64] products 1.2-1.7 ms -> see docs/performance.md). None where it does not apply."""
    (lc, rc), (lb, rb) = dims
    if (lhs_aval.dtype != np.float32 or rhs_aval.dtype != np.float32 or not lb
            or not targets.available(BMM_TARGET)):
        return None
    shapes = []
    for aval, contracting, batch in ((lhs_aval, lc, lb), (rhs_aval, rc, rb)):
        runs = _groups(aval.ndim, contracting, batch)
        free = [d for d in range(aval.ndim) if d not in contracting and d not in batch]
        if runs is None or not free or runs[0] != list(batch) or len(runs) != 3:
            return None
        shapes.append((math.prod(aval.shape[d] for d in batch), math.prod(aval.shape[d] for d in free),
                       math.prod(aval.shape[d] for d in contracting), runs[1] == list(contracting)))
    (b, m, k, trans_a), (_, n, _, rhs_k_first) = shapes
    if min(m, n, k) < BMM_MIN_SIDE or b * m * n * k < BMM_MIN_WORK:
        return None
    if targets.variant(BMM_TARGET) == "avx2" and m * n * k >= BMM_AVX2_MAX_PRODUCT:
        return None
    return emit_custom_call(emitter, BMM_TARGET, [lhs, rhs], [out_aval],
                            {"batch": b, "m": m, "n": n, "k": k, "trans_a": int(trans_a),
                             "trans_b": int(not rhs_k_first)}, has_side_effect=False)[0]


def _transposed_rhs_dot(emitter: Emitter, lhs: str, rhs: str, lhs_aval: ShapedArray, rhs_aval: ShapedArray,
                        out_aval: ShapedArray, dims: Any, attrs: dict[str, str]) -> str | None:
    """`x[m, k] @ w[n, k].T` (both operands' contracting dims last, no batch dims, each role one run of dims: the
    input gradient of a dense layer; or a matrix w transposed by a transpose equation) with few rows m and a large
    w, as `(w @ x.T).T`: the two small arrays transposed (each behind an optimization barrier, so XLA does not fold
    the transposes back into the dot) around a product of untransposed operands. The plugin's XLA packs a
    transposed rhs element by element (its Eigen contraction reads it with a stride), 2-10x slower than the same
    product untransposed (MNIST's f32[128, 1024] @ f32[1024, 1024].T: 3.9 -> 1.4 ms; docs/performance.md, "Matrix
    products"). None where it does not apply."""
    (lc, rc), (lb, rb) = dims
    dtype = lhs_aval.dtype
    if lb or dtype != np.float32 or rhs_aval.dtype != dtype or out_aval.dtype != dtype:
        return None
    source = emitter.fact(rhs, "transpose_of")
    if rhs_aval.ndim == 2 and tuple(rc) == (0,) and source is not None and source[1] == (1, 0):
        rhs, rhs_aval, rc = source[0], ShapedArray(rhs_aval.shape[::-1], dtype), (1,)  # `x @ w.T` written so
    sizes = []
    for aval, contracting in ((lhs_aval, lc), (rhs_aval, rc)):
        runs = _groups(aval.ndim, contracting, ())
        if runs is None or len(runs) != 2 or runs[1] != list(contracting):  # (free dims, then contracting dims)
            return None
        sizes.append((math.prod(aval.shape[d] for d in runs[0]), math.prod(aval.shape[d] for d in contracting)))
    (m, k), (n, _) = sizes
    if not (m <= NT_MAX_ROWS and n >= 2 * m and n * k >= NT_MIN_RHS):
        return None
    x = reshape(emitter, lhs, lhs_aval, (m, k))
    w = reshape(emitter, rhs, rhs_aval, (n, k))
    x_t = _barrier(emitter, _transpose(emitter, x, ShapedArray((m, k), dtype), (1, 0)), ShapedArray((k, m), dtype))
    product_t = ShapedArray((n, m), dtype)
    out_t = emitter.op("stablehlo.dot_general", [w, x_t], product_t,
                       {"dot_dimension_numbers": dot_dimension_numbers([1], [0], [], []), **attrs})
    out = _transpose(emitter, _barrier(emitter, out_t, product_t), product_t, (1, 0))
    return reshape(emitter, out, ShapedArray((m, n), dtype), out_aval.shape)


def _barrier(emitter: Emitter, x: str, aval: ShapedArray) -> str:
    return emitter.op("stablehlo.optimization_barrier", [x], aval)


def _groups(ndim: int, contracting: Sequence[int], batch: Sequence[int]) -> list[list[int]] | None:
    """An operand's dimensions as consecutive runs, one per role (batch, free, contracting, in the operand's
    order), each run in increasing order with the contracting and batch dims given in that order; None if they are
    not (merging them would move data)."""
    free = [d for d in range(ndim) if d not in contracting and d not in batch]
    runs = [list(batch), free, list(contracting)]
    for run in runs:
        if run and run != list(range(run[0], run[0] + len(run))):
            return None
    return sorted((run for run in runs if run), key=lambda run: run[0])


def _merged_dot(emitter: Emitter, lhs: str, rhs: str, lhs_aval: ShapedArray, rhs_aval: ShapedArray,
                out_aval: ShapedArray, dims: Any, attrs: dict[str, str]) -> str | None:
    """A dot_general whose operands have several consecutive dims in one role (x[16, 64, 128] @ w[128, 512]: two
    free dims; its weight gradient: two contracting ones) with each role's dims merged into one by reshapes that
    move no data: XLA's CPU backend runs x[1024, 128] @ w a good deal faster than the rank-3 form (1.8x measured
    on a layer's gradient). None when nothing merges or merging would move data."""
    (lc, rc), (lb, rb) = dims
    groups = [_groups(lhs_aval.ndim, lc, lb), _groups(rhs_aval.ndim, rc, rb)]
    if None in groups or all(len(g) == a.ndim for g, a in zip(groups, (lhs_aval, rhs_aval))):
        return None
    operands, shapes, roles = [], [], []
    for x, aval, operand_groups, (contracting, batch) in zip((lhs, rhs), (lhs_aval, rhs_aval), groups,
                                                             ((lc, lb), (rc, rb))):
        shape = tuple(math.prod(aval.shape[d] for d in run) for run in operand_groups)
        operands.append(reshape(emitter, x, aval, shape))
        shapes.append(shape)
        # each role's dims are one run, now one dim: its position among the merged dims (none for an empty role)
        roles.append([tuple(i for i, run in enumerate(operand_groups) if run[0] in role) for role in (contracting,
                                                                                                       batch)])
    (lc2, lb2), (rc2, rb2) = roles
    free = [[d for d in range(len(shape)) if d not in c and d not in b] for shape, (c, b) in zip(shapes, roles)]
    merged_out = ShapedArray(tuple(shapes[0][d] for d in lb2) + tuple(shapes[0][d] for d in free[0])
                             + tuple(shapes[1][d] for d in free[1]), out_aval.dtype)
    out = emitter.op("stablehlo.dot_general", operands, merged_out,
                     {"dot_dimension_numbers": dot_dimension_numbers(lc2, rc2, lb2, rb2), **attrs})
    return reshape(emitter, out, merged_out, out_aval.shape)


def _transpose(emitter: Emitter, x: str, aval: ShapedArray, order: tuple[int, ...]) -> str:
    if order == tuple(range(aval.ndim)):
        return x
    return emitter.op("stablehlo.transpose", [x], ShapedArray(tuple(aval.shape[d] for d in order), aval.dtype),
                      {"permutation": i64_array(order)})


__all__ = ["ELEMENTWISE_OPS", "ELEMENTWISE_TARGET", "KERNEL_OPS", "applies", "dot_general", "elementwise", "lower_sum",
           "reshape", "stages", "sum_form", "two_stages", "wide_sum", "zero_padded"]
