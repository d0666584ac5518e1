"""PRNG implementations: how a key is seeded, split, folded with data and turned into random bits.

A PRNGImpl (JAX's jax.extend.random.PRNGImpl) holds four functions over one key's raw data (an unsigned array of
`key_shape`): `seed(seed)` -> key data from an integer scalar, `split(key, shape)` -> key data of shape
`shape + key_shape`, `fold_in(key, data)` -> key data from a uint32 scalar, `random_bits(key, bit_width, shape)` ->
unsigned integers of bit_width bits. ember has JAX's built-in ones, each giving jax.random's numbers bit for bit:

- threefry2x32 (JAX's default, `key<fry>`): ember.random._keys's Threefry-2x32 in JAX's partitionable layout;
- rbg (`key<rbg>`): four words, two Threefry half-keys: split and fold_in act on each half as Threefry does, random
  bits are XLA's RngBitGenerator of the whole key (lax.rng_bit_generator);
- unsafe_rbg (`key<urbg>`): random bits as rbg's, split takes every 10th key of an RngBitGenerator stream and fold_in
  xors the key with the last word of a stream seeded by the data: cheaper, with no guarantee of independence;
- threefry4x32 (`key<fry4>`, four words), philox2x32 (`key<phx2>`, one word), philox4x32 (`key<phx4>`, two words):
  Random123's other hashes (ember._prims.bits), seeded by hashing the seed's words; split, fold_in and random bits
  hash the index of each key or element as threefry2x32 does, each with JAX's own placement of the counter words and
  combination of the output words (below).

(RngBitGenerator's bits are what the backend's XLA makes of its default algorithm: JAX documents that they may change
across backends and versions; on the CPU plugin they are jaxlib's.) define_prng_impl (ember.extend.random) makes
implementations of one's own from functions written with ember.numpy/ember.lax: keys of them work everywhere keys
do. The functions are traced inside the samplers' jitted programs, so they are called with ember arrays (tracers)."""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np

from ember import lax
from ember import numpy as enp
from ember._core import aval_of
from ember._core import dtypes as dt
from ember._prims import philox2x32, philox4x32, threefry2x32, threefry4x32


@dataclasses.dataclass(frozen=True, eq=False)
class PRNGImpl:
    """A PRNG implementation (JAX's PRNGImpl): its key data's shape, its functions (seed, split, random_bits,
    fold_in), its name and its tag (the key dtype prints key<tag>). Compared by identity, as JAX's."""
    key_shape: tuple[int, ...]
    seed: Callable[..., Any]
    split: Callable[..., Any]
    random_bits: Callable[..., Any]
    fold_in: Callable[..., Any]
    name: str = "<unnamed>"
    tag: str = "?"

    def pprint(self) -> str:
        return f"{self.name} [{self.tag}]"

    def __str__(self) -> str:
        return self.tag

    def __hash__(self) -> int:
        return id(self)


def _check_width(impl: str, bit_width: int) -> None:
    if bit_width not in (8, 16, 32, 64):
        raise TypeError(f"ember.random: {impl} keys give 8, 16, 32 or 64 random bits, not {bit_width}")


def _combine(words: list[Any], bit_width: int) -> Any:
    """Random bits from hash words: (words[0] << 32) | words[1] for 64 bits, else their xor (truncated for 8 and
    16)."""
    if bit_width == 64:
        hi, lo = (lax.convert_element_type(w, dt.uint64) for w in words)
        return lax.bitwise_or(lax.shift_left(hi, lax.full_like(hi, 32)), lo)
    bits = words[0]
    for w in words[1:]:
        bits = lax.bitwise_xor(bits, w)
    return bits if bit_width == 32 else lax.convert_element_type(bits, np.dtype(f"uint{bit_width}"))


# ---- threefry2x32 -------------------------------------------------------------------------------------------
def threefry_seed(seed: Any) -> Any:
    """The key data of an integer seed: (high 32 bits, low 32 bits) of a 64-bit seed, (0, seed) of a narrower one."""
    if aval_of(seed).dtype.itemsize == 8:
        high = lax.convert_element_type(lax.shift_right_logical(seed, lax.full_like(seed, 32)), dt.uint32)
    else:
        high = lax.full(aval_of(seed).shape, 0, dt.uint32)
    low = lax.convert_element_type(seed, dt.uint32)
    return enp.stack([high, low], axis=-1)


def _counters(shape: tuple[int, ...]) -> tuple[Any, Any]:
    """(high, low) 32-bit words of each element's row-major index in shape."""
    size = math.prod(shape)
    if size >= 2 ** 32:
        raise ValueError(f"ember.random: {size} random values in one call is more than 2**32 - 1")
    zero = lax.full((), 0, dt.uint32)
    if not shape:
        return zero, zero
    return zero, lax.reshape(lax.iota(dt.uint32, size), shape)


def hash_counters(data: Any, shape: tuple[int, ...]) -> list[Any]:
    high, low = _counters(shape)
    return threefry2x32(data[0], data[1], high, low)


def threefry_split(data: Any, shape: tuple[int, ...]) -> Any:
    """split(key, shape)[i] = threefry2x32(key, (0, i)), i the row-major index into shape."""
    return enp.stack(hash_counters(data, shape), axis=-1)


def threefry_fold_in(data: Any, value: Any) -> Any:
    return enp.stack(threefry2x32(data[0], data[1], lax.full((), 0, dt.uint32), value), axis=-1)


def threefry_random_bits(data: Any, bit_width: int, shape: tuple[int, ...]) -> Any:
    """The hash of each element's counter, its two words combined: xor for 32 bits (truncated for 8 and 16),
    high << 32 | low for 64 bits."""
    _check_width("threefry2x32", bit_width)
    return _combine(hash_counters(data, shape), bit_width)


threefry_prng_impl = PRNGImpl((2,), threefry_seed, threefry_split, threefry_random_bits, threefry_fold_in,
                              "threefry2x32", "fry")


# ---- rbg and unsafe_rbg ---------------------------------------------------------------------------------------
def rbg_seed(seed: Any) -> Any:
    """Two copies of the Threefry key of the seed."""
    half = threefry_seed(seed)
    return enp.concatenate([half, half])


def rbg_split(data: Any, shape: tuple[int, ...]) -> Any:
    """Each half-key split as Threefry splits: the i-th new key is (split(half 0)[i], split(half 1)[i])."""
    halves = [threefry_split(data[2 * h:2 * h + 2], shape) for h in range(2)]
    return enp.reshape(enp.stack(halves, axis=len(shape)), shape + (4,))


def rbg_fold_in(data: Any, value: Any) -> Any:
    return enp.concatenate([threefry_fold_in(data[2 * h:2 * h + 2], value) for h in range(2)])


def rbg_random_bits(data: Any, bit_width: int, shape: tuple[int, ...]) -> Any:
    """XLA's RngBitGenerator (its default algorithm) seeded by the whole key."""
    _check_width("rbg", bit_width)
    return lax.rng_bit_generator(data, shape, dtype=np.dtype(f"uint{bit_width}"))[1]


def unsafe_rbg_split(data: Any, shape: tuple[int, ...]) -> Any:
    """Every 10th row of an RngBitGenerator stream of 10 * prod(shape) keys (ten iterations as a hash)."""
    num = math.prod(shape)
    _, stream = lax.rng_bit_generator(data, (10 * num, 4), dtype=dt.uint32)
    return enp.reshape(stream[::10], shape + (4,))


def unsafe_rbg_fold_in(data: Any, value: Any) -> Any:
    """The key xor the last row of ten RngBitGenerator rows seeded by the data's rbg key."""
    _, stream = lax.rng_bit_generator(rbg_seed(value), (10, 4), dtype=dt.uint32)
    return lax.bitwise_xor(data, stream[-1])


rbg_prng_impl = PRNGImpl((4,), rbg_seed, rbg_split, rbg_random_bits, rbg_fold_in, "rbg", "rbg")
unsafe_rbg_prng_impl = PRNGImpl((4,), rbg_seed, unsafe_rbg_split, rbg_random_bits, unsafe_rbg_fold_in,
                                "unsafe_rbg", "urbg")

# ---- threefry4x32, philox2x32 and philox4x32 ------------------------------------------------------------------
# JAX's other counter-based implementations. Each seeds by hashing the seed's (high, low) words (threefry_seed's), and
# hashes with the row-major index i of each new key or element, as the counter words (i >> 32, i & 0xffffffff) at
# the places below (which differ from one implementation to the next, as JAX's do).
_ZERO = np.uint32(0)


def threefry4x32_seed(seed: Any) -> Any:
    """threefry4x32 with the key (high, low, 0, 0) of the seed's words and a zero counter: four words."""
    high, low = (threefry_seed(seed)[i] for i in range(2))
    return enp.stack(threefry4x32(high, low, _ZERO, _ZERO, _ZERO, _ZERO, _ZERO, _ZERO), axis=-1)


def threefry4x32_split(data: Any, shape: tuple[int, ...]) -> Any:
    """split(key, shape)[i] = threefry4x32(key, (0, 0, i >> 32, i & 0xffffffff))."""
    high, low = _counters(shape)
    return enp.stack(threefry4x32(*(data[j] for j in range(4)), _ZERO, _ZERO, high, low), axis=-1)


def threefry4x32_fold_in(data: Any, value: Any) -> Any:
    return enp.stack(threefry4x32(*(data[j] for j in range(4)), _ZERO, _ZERO, _ZERO, value), axis=-1)


def threefry4x32_random_bits(data: Any, bit_width: int, shape: tuple[int, ...]) -> Any:
    """The hash of the counters (i >> 32, i & 0xffffffff, 0, 0); 64 bits: (w0 ^ w2) << 32 | (w1 ^ w3), else the xor
    of the four words."""
    _check_width("threefry4x32", bit_width)
    high, low = _counters(shape)
    w = threefry4x32(*(data[j] for j in range(4)), high, low, _ZERO, _ZERO)
    if bit_width == 64:
        return _combine([lax.bitwise_xor(w[0], w[2]), lax.bitwise_xor(w[1], w[3])], 64)
    return _combine(w, bit_width)


def philox2x32_seed(seed: Any) -> Any:
    """The first word of philox2x32 with the key 0 and the counter (high, low) of the seed's words: one word."""
    high, low = (threefry_seed(seed)[i] for i in range(2))
    return enp.stack(philox2x32(_ZERO, high, low)[:1], axis=-1)


def philox2x32_split(data: Any, shape: tuple[int, ...]) -> Any:
    """split(key, shape)[i] = the first word of philox2x32(key, (i >> 32, i & 0xffffffff))."""
    return enp.stack(philox2x32(data[0], *_counters(shape))[:1], axis=-1)


def philox2x32_fold_in(data: Any, value: Any) -> Any:
    return enp.stack(philox2x32(data[0], _ZERO, value)[:1], axis=-1)


def philox2x32_random_bits(data: Any, bit_width: int, shape: tuple[int, ...]) -> Any:
    """The hash of the counters (i >> 32, i & 0xffffffff) (the split's: its first word is the i-th split key's),
    combined: w0 << 32 | w1 for 64 bits, else w0 ^ w1."""
    _check_width("philox2x32", bit_width)
    return _combine(philox2x32(data[0], *_counters(shape)), bit_width)


def philox4x32_seed(seed: Any) -> Any:
    """The first two words of philox4x32 with the key (0, 0) and the counter (high, low, 0, 0) of the seed's words."""
    high, low = (threefry_seed(seed)[i] for i in range(2))
    return enp.stack(philox4x32(_ZERO, _ZERO, high, low, _ZERO, _ZERO)[:2], axis=-1)


def philox4x32_split(data: Any, shape: tuple[int, ...]) -> Any:
    """split(key, shape)[i] = the first two words of philox4x32(key, (0, 0, i >> 32, i & 0xffffffff))."""
    return enp.stack(philox4x32(data[0], data[1], _ZERO, _ZERO, *_counters(shape))[:2], axis=-1)


def philox4x32_fold_in(data: Any, value: Any) -> Any:
    return enp.stack(philox4x32(data[0], data[1], _ZERO, _ZERO, _ZERO, value)[:2], axis=-1)


def philox4x32_random_bits(data: Any, bit_width: int, shape: tuple[int, ...]) -> Any:
    """The hash of the counters (i >> 32, i & 0xffffffff, 0, 0); 64 bits: w0 << 32 | w1 (w2 and w3 unused, as
    JAX's), else the xor of the four words."""
    _check_width("philox4x32", bit_width)
    w = philox4x32(data[0], data[1], *_counters(shape), _ZERO, _ZERO)
    return _combine(w[:2] if bit_width == 64 else w, bit_width)


threefry4x32_prng_impl = PRNGImpl((4,), threefry4x32_seed, threefry4x32_split, threefry4x32_random_bits,
                                  threefry4x32_fold_in, "threefry4x32", "fry4")
philox2x32_prng_impl = PRNGImpl((1,), philox2x32_seed, philox2x32_split, philox2x32_random_bits, philox2x32_fold_in,
                                "philox2x32", "phx2")
philox4x32_prng_impl = PRNGImpl((2,), philox4x32_seed, philox4x32_split, philox4x32_random_bits, philox4x32_fold_in,
                                "philox4x32", "phx4")

# the implementations a name selects (jax_default_prng_impl, key(seed, impl="rbg")), in JAX's order
IMPLS: dict[str, PRNGImpl] = {impl.name: impl for impl in (
    threefry_prng_impl, threefry4x32_prng_impl, rbg_prng_impl, unsafe_rbg_prng_impl, philox2x32_prng_impl,
    philox4x32_prng_impl)}
