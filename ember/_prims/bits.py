"""Bit-level primitives: bitcast_convert_type; the counter-based hashes under ember.random (threefry2x32,
threefry4x32, philox2x32, philox4x32); and XLA's own generators, rng_bit_generator (stateless: a key in, the next key
and random bits out) and rng_uniform (stateful).

The hashes are Random123's (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), applied
elementwise to uint32 operands (key words, then counter words); rank-0 operands broadcast, so one key hashes a whole
array of counters. threefry2x32(k1, k2, x1, x2) -> (y1, y2) is Threefry-2x32 with 20 rounds, threefry4x32 (four key
and four counter words) Threefry-4x32 with 20, philox2x32 (one key word, two counter words) and philox4x32 (two key
words, four counter words) Philox with 10. Each is lowered to plain uint32 arithmetic (adds, xors, rotations; Philox's
multiplications), which XLA fuses into one loop, and equals JAX's primitive of the same name bit for bit (and
Random123's known answers). None of these primitives is differentiable.

rng_bit_generator(key, shape, dtype, algorithm) is XLA's RngBitGenerator (stablehlo.rng_bit_generator) as jax.lax
lowers it: a uint32[4] key (bitcast to the uint64[2] state XLA takes) or a uint64[2] one, an unsigned dtype, and the
algorithm XLA names (RandomAlgorithm: DEFAULT, THREE_FRY, PHILOX; the CPU's default is Philox), so its bits are
jaxlib's on the CPU bit for bit. rng_uniform(a, b, shape) is XLA's stateful RngUniform (stablehlo.rng): numbers in
[a, b) drawn from the program's hidden state, different at each run, so its equations are effectful (never merged,
folded or dropped)."""
from __future__ import annotations

import enum
from typing import Any, Callable, Sequence

import numpy as np

from ember._core import NAN_CHECK, NO_DERIVATIVE_RULES, Primitive, ShapedArray, aval_of, is_python_scalar
from ember._core import dtypes as dt
from ember._core.checks import static_ints
from ember._hlo import LoweringContext
from ember._prims.checks import coerce_scalars, elementwise_shape
from ember._prims.elementwise import add, lt, max as max_, mul, rem, select, sub
from ember._prims.families import elementwise_batching
from ember._prims.shape import BatchDim, batch_at_front, batch_size, broadcast_in_dim, full, moveaxis, reshape
from ember._prims.slicing import concatenate, slice_in_dim
from ember._prims import explicit


# ---------------------------------------------------------------------------------------------------------------
# bitcast_convert_type(x, new_dtype): the same bits read as another dtype. Between widths the last dimension
# grows (to a narrower dtype: wide_bits // narrow_bits elements per value) or shrinks (to a wider one).
bitcast_convert_type_p = Primitive("bitcast_convert_type", checks=())
bitcast_convert_type_p.def_rule("sharding_rule", explicit.bitcast)


_bit_width = dt.bit_width


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
# The counter-based hashes of Random123 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), one
# primitive each: threefry2x32 (20 rounds), threefry4x32 (20 rounds), philox2x32 (10 rounds), philox4x32 (10 rounds).
# Each maps key words and counter words (uint32 operands of one shape, or rank-0 ones that broadcast) to its output
# words, elementwise. _counter_hash makes the primitive from the hash's rounds, written once over _Words (the uint32
# arithmetic the lowering emits, which XLA fuses into one loop); none is differentiable (a mark), and batching is
# elementwise. ember.random's PRNG implementations (ember/random/_prng.py) hash their counters with them.
class _Words:
    """uint32 arithmetic on SSA values of one shape, emitted into a lowering: what a hash's rounds are written in.
    Philox's high 32 bits of a 32x32-bit product are taken from the product in uint64, inside the lowering only
    (so with x64 off too: no 64-bit value enters or leaves the primitive)."""

    def __init__(self, ctx: LoweringContext, aval: ShapedArray):
        self.ctx, self.aval = ctx, aval
        self.wide = aval.update(dtype=np.dtype(np.uint64), weak_type=False)

    def const(self, value: int) -> str:
        return self.ctx.constant(value, self.aval)

    def _op(self, name: str, a: str, b: str, aval: ShapedArray | None = None) -> str:
        return self.ctx.op(f"stablehlo.{name}", [a, b], aval or self.aval)

    def add(self, a: str, b: str | int) -> str:
        return self._op("add", a, self.const(b) if isinstance(b, int) else b)

    def xor(self, *values: str | int) -> str:
        out = values[0]
        for v in values[1:]:
            out = self._op("xor", out, self.const(v) if isinstance(v, int) else v)
        return out

    def rotate_left(self, v: str, r: int) -> str:
        return self._op("or", self._op("shift_left", v, self.const(r)),
                        self._op("shift_right_logical", v, self.const(32 - r)))

    def mulhilo(self, m: int, v: str) -> tuple[str, str]:
        """(the low, the high) 32 bits of the 64-bit product m * v, for a constant m."""
        low = self._op("multiply", v, self.const(m))
        product = self._op("multiply", self.ctx.op("stablehlo.convert", [v], self.wide),
                           self.ctx.constant(m, self.wide), self.wide)
        high = self._op("shift_right_logical", product, self.ctx.constant(32, self.wide), self.wide)
        return low, self.ctx.op("stablehlo.convert", [high], self.aval)


def _counter_hash(name: str, operands: str, outputs: int, rounds: Callable[..., Sequence[str]]) -> Primitive:
    """The primitive of a hash: operands names its uint32 operands (key words, then counter words), rounds(words,
    *operands) emits the hash of SSA values of the output's shape and returns the output words."""
    arity = len(operands.split(", "))
    prim = Primitive(name, multiple_results=True, checks=())
    prim.def_rule("sharding_rule", lambda *avals: [explicit.broadcasting(name)(*avals)] * outputs)

    @prim.def_rule("abstract_eval")
    def abstract_eval(*avals: ShapedArray) -> list[ShapedArray]:
        if len(avals) != arity:
            raise TypeError(f"{name}: takes {arity} operands ({operands}), got {len(avals)}")
        if any(a.dtype != dt.uint32 for a in avals):
            raise TypeError(f"{name}: operands must be uint32, got " + ", ".join(a.str_short() for a in avals))
        return [ShapedArray(elementwise_shape(name, avals), dt.uint32)] * outputs

    @prim.def_rule("lowering")
    def lowering(ctx: LoweringContext, *args: str) -> list[str]:
        aval = ctx.avals_out[0]
        args = tuple(ctx.broadcast(o, a, aval.shape) for o, a in zip(args, ctx.avals_in))
        return list(rounds(_Words(ctx, aval), *args))

    prim.mark_not_differentiable()
    prim.def_rule("batching", elementwise_batching(prim))
    return prim


_THREEFRY_PARITY = 0x1BD11BDA  # Threefish's key-schedule parity: the extra key word is the key words' xor with it


def _threefry2x32_rounds(w: _Words, k1: str, k2: str, x1: str, x2: str) -> list[str]:
    """Threefry-2x32-20: five groups of four mix steps (add, rotate, xor) with Random123's rotations, the key
    schedule (k1, k2, k1 ^ k2 ^ parity) injected after each group with the group's number added."""
    rotations = ((13, 15, 26, 6), (17, 29, 16, 24))
    keys = [k1, k2, w.xor(k1, k2, _THREEFRY_PARITY)]
    v1, v2 = w.add(x1, keys[0]), w.add(x2, keys[1])
    for i in range(5):
        for r in rotations[i % 2]:
            v1 = w.add(v1, v2)
            v2 = w.xor(v1, w.rotate_left(v2, r))
        v1 = w.add(v1, keys[(i + 1) % 3])
        v2 = w.add(w.add(v2, keys[(i + 2) % 3]), i + 1)
    return [v1, v2]


def _threefry4x32_rounds(w: _Words, k0: str, k1: str, k2: str, k3: str, x0: str, x1: str, x2: str, x3: str
                         ) -> list[str]:
    """Threefry-4x32-20: twenty rounds mixing the pairs (0, 1), (2, 3) on even rounds and (0, 3), (2, 1) on odd
    ones (Random123's rotation pair per round, repeating every 8), the five-word key schedule (k0..k3 and their xor
    with the parity) injected every four rounds, the injection's number added to the last word."""
    rotations = ((10, 26), (11, 21), (13, 27), (23, 5), (6, 20), (17, 11), (25, 10), (18, 20))
    keys = [k0, k1, k2, k3, w.xor(k0, k1, k2, k3, _THREEFRY_PARITY)]
    v = [w.add(x, k) for x, k in zip((x0, x1, x2, x3), keys)]
    for rnd in range(20):
        pairs = ((0, 1), (2, 3)) if rnd % 2 == 0 else ((0, 3), (2, 1))
        for (a, b), r in zip(pairs, rotations[rnd % 8]):
            v[a] = w.add(v[a], v[b])
            v[b] = w.xor(v[a], w.rotate_left(v[b], r))
        if rnd % 4 == 3:
            s = rnd // 4 + 1
            v = [w.add(v[j], keys[(s + j) % 5]) for j in range(4)]
            v[3] = w.add(v[3], s)
    return v


_PHILOX_WEYL = (0x9E3779B9, 0xBB67AE85)  # the key's increments between rounds (golden ratio, sqrt(3) - 1)


def _philox2x32_rounds(w: _Words, k: str, x0: str, x1: str) -> list[str]:
    """Philox-2x32-10: each round multiplies x0 by a constant, (x0, x1) <- (high ^ key ^ x1, low), the key bumped
    by a Weyl increment between rounds."""
    for rnd in range(10):
        if rnd:
            k = w.add(k, _PHILOX_WEYL[0])
        low, high = w.mulhilo(0xD256D193, x0)
        x0, x1 = w.xor(high, k, x1), low
    return [x0, x1]


def _philox4x32_rounds(w: _Words, k0: str, k1: str, x0: str, x1: str, x2: str, x3: str) -> list[str]:
    """Philox-4x32-10: each round multiplies x0 and x2 by two constants, (x0, x1, x2, x3) <- (high2 ^ k0 ^ x1,
    low2, high0 ^ k1 ^ x3, low0), the key words bumped by their Weyl increments between rounds."""
    for rnd in range(10):
        if rnd:
            k0, k1 = w.add(k0, _PHILOX_WEYL[0]), w.add(k1, _PHILOX_WEYL[1])
        low0, high0 = w.mulhilo(0xD2511F53, x0)
        low2, high2 = w.mulhilo(0xCD9E8D57, x2)
        x0, x1, x2, x3 = w.xor(high2, k0, x1), low2, w.xor(high0, k1, x3), low0
    return [x0, x1, x2, x3]


threefry2x32_p = _counter_hash("threefry2x32", "k1, k2, x1, x2", 2, _threefry2x32_rounds)
threefry4x32_p = _counter_hash("threefry4x32", "k0, k1, k2, k3, x0, x1, x2, x3", 4, _threefry4x32_rounds)
philox2x32_p = _counter_hash("philox2x32", "k, x0, x1", 2, _philox2x32_rounds)
philox4x32_p = _counter_hash("philox4x32", "k0, k1, x0, x1, x2, x3", 4, _philox4x32_rounds)


def threefry2x32(k1: Any, k2: Any, x1: Any, x2: Any) -> list[Any]:
    """The Threefry-2x32 hash (20 rounds) of the counters (x1, x2) under the key (k1, k2): uint32 arrays of one
    shape, or rank-0 ones that broadcast. Returns the two uint32 output words."""
    return threefry2x32_p.bind(k1, k2, x1, x2)


def threefry4x32(k0: Any, k1: Any, k2: Any, k3: Any, x0: Any, x1: Any, x2: Any, x3: Any) -> list[Any]:
    """The Threefry-4x32 hash (20 rounds) of the counters (x0, x1, x2, x3) under the key (k0, k1, k2, k3): uint32
    arrays of one shape, or rank-0 ones that broadcast. Returns the four uint32 output words."""
    return threefry4x32_p.bind(k0, k1, k2, k3, x0, x1, x2, x3)


def philox2x32(k: Any, x0: Any, x1: Any) -> list[Any]:
    """The Philox-2x32 hash (10 rounds) of the counters (x0, x1) under the one-word key k: uint32 arrays of one
    shape, or rank-0 ones that broadcast. Returns the two uint32 output words."""
    return philox2x32_p.bind(k, x0, x1)


def philox4x32(k0: Any, k1: Any, x0: Any, x1: Any, x2: Any, x3: Any) -> list[Any]:
    """The Philox-4x32 hash (10 rounds) of the counters (x0, x1, x2, x3) under the key (k0, k1): uint32 arrays of
    one shape, or rank-0 ones that broadcast. Returns the four uint32 output words."""
    return philox4x32_p.bind(k0, k1, x0, x1, x2, x3)


# ---------------------------------------------------------------------------------------------------------------
# rng_bit_generator(key, shape, dtype, algorithm) -> (new_key, bits): XLA's RngBitGenerator. The key is uint32[4]
# (jax.lax's form, which needs no 64-bit dtypes) or uint64[2] (XLA's own state); bits are of an unsigned dtype.
class RandomAlgorithm(enum.IntEnum):
    """The algorithm of rng_bit_generator (jax.lax.RandomAlgorithm): the platform's default (Philox on the CPU),
    Threefry-2x32 or Philox-4x32."""

    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2

    def __str__(self) -> str:
        return self.name


_RNG_ALGORITHMS = {RandomAlgorithm.RNG_DEFAULT: "DEFAULT", RandomAlgorithm.RNG_THREE_FRY: "THREE_FRY",
                   RandomAlgorithm.RNG_PHILOX: "PHILOX"}
_RNG_BITS_DTYPES = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64))

rng_bit_generator_p = Primitive("rng_bit_generator", multiple_results=True, checks=())
# (the next key is split as the key is; the bits are replicated, as JAX types them without an out_sharding)
rng_bit_generator_p.def_rule("sharding_rule", lambda key, **params: [explicit.same_as(0)(key), None])


def _check_rng_key(op: str, key: ShapedArray) -> None:
    if not ((key.shape == (4,) and key.dtype == dt.uint32) or (key.shape == (2,) and key.dtype == dt.uint64)):
        raise TypeError(f"{op}: the key must be uint32[4] or uint64[2], got {key.str_short()}")


@rng_bit_generator_p.def_rule("abstract_eval")
def _rng_bit_generator_abstract_eval(key: ShapedArray, *, shape: tuple[int, ...], dtype: np.dtype,
                                     algorithm: RandomAlgorithm) -> list[ShapedArray]:
    _check_rng_key("rng_bit_generator", key)
    if dtype not in _RNG_BITS_DTYPES:
        raise TypeError(f"rng_bit_generator: unsupported dtype {dtype}")
    return [ShapedArray(key.shape, key.dtype), ShapedArray(shape, dtype)]


@rng_bit_generator_p.def_rule("lowering")
def _rng_bit_generator_lowering(ctx: LoweringContext, key: str, *, shape: tuple[int, ...], dtype: np.dtype,
                                algorithm: RandomAlgorithm) -> list[str]:
    key_aval, bits_aval = ctx.avals_out
    state_aval = ShapedArray((2,), dt.uint64)
    pairs = ShapedArray((2, 2), dt.uint32)
    if key_aval.dtype == dt.uint32:  # (the words of each uint64 in memory order, as jax.lax's lowering)
        key = ctx.op("stablehlo.bitcast_convert", [ctx.op("stablehlo.reshape", [key], pairs)], state_aval)
    state, bits = ctx.op("stablehlo.rng_bit_generator", [key], [state_aval, bits_aval],
                         {"rng_algorithm": f"#stablehlo<rng_algorithm {_RNG_ALGORITHMS[algorithm]}>"})
    if key_aval.dtype == dt.uint32:
        state = ctx.op("stablehlo.reshape", [ctx.op("stablehlo.bitcast_convert", [state], pairs)], key_aval)
    return [state, bits]


rng_bit_generator_p.mark_not_differentiable()


@rng_bit_generator_p.def_rule("batching")
def _rng_bit_generator_batching(args: Sequence[Any], dims: Sequence[BatchDim], **params: Any
                                ) -> tuple[list[Any], list[BatchDim]]:
    """jax.lax's rule, bit for bit: the first member's key draws the bits of every member at once (one draw of
    shape (batch, *shape)), and only that member's key advances; the other members' keys come back unchanged."""
    (keys,), (d,) = args, dims
    if d is None:
        return rng_bit_generator_p.bind(keys, **params), [None, None]
    keys = moveaxis(keys, d, 0)
    size = aval_of(keys).shape[0]
    first = reshape(slice_in_dim(keys, 0, 1), aval_of(keys).shape[1:])
    new_key, bits = rng_bit_generator_p.bind(first, **{**params, "shape": (size,) + params["shape"]})
    new_keys = concatenate([reshape(new_key, (1,) + aval_of(new_key).shape), slice_in_dim(keys, 1, size)], 0)
    return [new_keys, bits], [0, 0]


def rng_bit_generator(key: Any, shape: Sequence[int], dtype: Any = np.uint32,
                      algorithm: Any = RandomAlgorithm.RNG_DEFAULT) -> tuple[Any, Any]:
    """XLA's stateless RngBitGenerator (like jax.lax.rng_bit_generator): (the next key, random bits of the given
    shape and unsigned dtype) from a uint32[4] key (or uint64[2] with 64-bit dtypes), by the algorithm asked for;
    the CPU's bits are jaxlib's, bit for bit. Not differentiable; under vmap the first key draws for every member,
    as JAX's batching rule does."""
    shape = static_ints("rng_bit_generator", "shape", shape)
    if any(n < 0 for n in shape):
        raise TypeError(f"rng_bit_generator: shape must have non-negative sizes, got {shape}")
    dtype = dt.check_user_dtype(dtype, "rng_bit_generator")
    if dtype not in _RNG_BITS_DTYPES:
        raise TypeError(f"rng_bit_generator: unsupported dtype {dtype}")
    try:
        algorithm = RandomAlgorithm(algorithm)
    except ValueError:
        raise ValueError(f"rng_bit_generator: algorithm must be a lax.RandomAlgorithm, got {algorithm!r}") from None
    return tuple(rng_bit_generator_p.bind(key, shape=shape, dtype=dtype, algorithm=algorithm))


# ---------------------------------------------------------------------------------------------------------------
# rng_uniform(a, b, shape): XLA's stateful RngUniform, numbers in [a, b) from the program's hidden generator state.
# XLA's CPU expands it for these dtypes only (jaxlib aborts the process on the others; ember refuses them).
_RNG_UNIFORM_DTYPES = tuple(np.dtype(d) for d in (np.int32, np.uint32, np.int64, np.uint64, dt.bfloat16,
                                                  np.float16, np.float32, np.float64))
# effectful: every equation draws anew, so none is merged with an equal one, folded at trace time or dropped
# (the hidden state needs no order among a body's host callbacks)
rng_uniform_p = Primitive("rng_uniform", effectful=True, checks=NAN_CHECK)  # (in JAX's nan_primitives)
rng_uniform_p.unordered_effect = True
rng_uniform_p.def_rule("sharding_rule", lambda a, b, **params: None)  # (replicated, as JAX's)


@rng_uniform_p.def_rule("abstract_eval")
def _rng_uniform_abstract_eval(a: ShapedArray, b: ShapedArray, *, shape: tuple[int, ...]) -> ShapedArray:
    if a.dtype != b.dtype:
        raise ValueError(f"Arguments to rng_uniform must have identical dtypes, got {a.dtype} and {b.dtype}.")
    if a.shape != () or b.shape != ():
        raise ValueError(f"Arguments to rng_uniform must be scalars; got shapes {a.shape} and {b.shape}.")
    if a.dtype not in _RNG_UNIFORM_DTYPES:
        raise TypeError(f"rng_uniform: XLA's CPU RngUniform does not take {a.dtype} (jaxlib aborts on it); it takes "
                        + ", ".join(d.name for d in _RNG_UNIFORM_DTYPES))
    return ShapedArray(shape, a.dtype, a.weak_type and b.weak_type)


@rng_uniform_p.def_rule("lowering")
def _rng_uniform_lowering(ctx: LoweringContext, a: str, b: str, *, shape: tuple[int, ...]) -> list[str]:
    dims = ShapedArray((len(shape),), dt.int64)
    sizes = ctx.op("stablehlo.constant", [], dims, {"value": f"dense<{list(shape)}> : tensor<{len(shape)}xi64>"
                                                    if shape else "dense<> : tensor<0xi64>"})
    return [ctx.op("stablehlo.rng", [a, b, sizes], ctx.aval_out,
                   {"rng_distribution": "#stablehlo<rng_distribution UNIFORM>"})]


rng_uniform_p.mark("jvp", NO_DERIVATIVE_RULES)  # (JAX has none: "Differentiation rule for 'rng_uniform' not ...")
rng_uniform_p.mark("vjp", NO_DERIVATIVE_RULES)


@rng_uniform_p.def_rule("batching")
def _rng_uniform_batching(args: Sequence[Any], dims: Sequence[BatchDim], *, shape: tuple[int, ...]
                          ) -> tuple[list[Any], list[BatchDim]]:
    """Unbatched bounds: one draw, the same for every member (as JAX's vmap). Batched bounds (JAX has no rule):
    one draw of shape (batch, *shape) on a fixed range, mapped into each member's [a, b): a + (b - a) u for floats
    (a result rounded up to b is a), a + r mod (b - a) for integers."""
    a, b = args
    if dims[0] is None and dims[1] is None:
        return [rng_uniform_p.bind(a, b, shape=shape)], [None]
    size = batch_size(args, dims)
    out_shape = (size,) + shape
    a, b = (broadcast_in_dim(batch_at_front(x, d, size), out_shape, (0,)) for x, d in zip(args, dims))
    dtype = aval_of(a).dtype
    if dt.is_float(dtype):
        u = rng_uniform_p.bind(full((), 0, dtype), full((), 1, dtype), shape=out_shape)
        out = add(a, mul(sub(b, a), u))
        return [select(lt(out, b), out, a)], [0]
    r = rng_uniform_p.bind(full((), 0, dtype), full((), np.iinfo(dtype).max, dtype), shape=out_shape)
    return [add(a, rem(r, max_(sub(b, a), full(out_shape, 1, dtype))))], [0]


def rng_uniform(a: Any, b: Any, shape: Sequence[int]) -> Any:
    """XLA's stateful RngUniform (like jax.lax.rng_uniform): numbers in [a, b) of the given shape, drawn anew at
    every run from the program's hidden state (undefined where b <= a). a and b are scalars of one dtype: an
    integer of 32 or 64 bits or a float (XLA's CPU takes no other). Not differentiable (as JAX's)."""
    shape = static_ints("rng_uniform", "shape", shape)
    if any(n < 0 for n in shape):
        raise TypeError(f"rng_uniform: shape must have non-negative sizes, got {shape}")
    if is_python_scalar(a) and is_python_scalar(b) and type(a) is not type(b):
        a, b = (float(a), float(b)) if isinstance(a, float) or isinstance(b, float) else (a, b)
    a, b = coerce_scalars([a, b])
    return rng_uniform_p.bind(a, b, shape=shape)


__all__ = ["RandomAlgorithm", "bitcast_convert_type", "philox2x32", "philox4x32", "rng_bit_generator", "rng_uniform",
           "threefry2x32", "threefry4x32"]
