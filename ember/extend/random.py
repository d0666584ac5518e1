"""ember.extend.random, as jax.extend.random: PRNG implementations and the Threefry hash they are built on.

ember's random numbers are Threefry-2x32's (JAX's default), bit for bit: `threefry_prng_impl` is that
implementation (ember.random.key(seed, impl=threefry_prng_impl) takes it), `threefry2x32_p` the hash's primitive and
`threefry_2x32(keypair, count)` the hash of an array of counters, as JAX's. The RBG implementations (XLA's
RngBitGenerator) and implementations defined with define_prng_impl are described (PRNGImpl objects) but ember
draws with none of them: a key asked for with one is ember.random's error naming the implementation."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from ember import numpy as _jnp, random as _random
from ember._api.vmap import vmap as _vmap
from ember._prims.bits import threefry2x32_p as threefry2x32_p
from ember._prims.elementwise import convert_element_type as _convert
from ember._core import aval_of as _aval_of


@dataclasses.dataclass(frozen=True)
class PRNGImpl:
    """A PRNG implementation (JAX's PRNGImpl): its key shape, functions (seed, split, random_bits, fold_in), name
    and tag (the key dtype prints key<tag>)."""
    key_shape: tuple[int, ...]
    seed: Callable[..., Any] | None
    split: Callable[..., Any] | None
    random_bits: Callable[..., Any] | None
    fold_in: Callable[..., Any] | None
    name: str = "<unnamed>"
    tag: str = "?"

    def pprint(self) -> str:
        return f"{self.name} [{self.tag}]"

    def __str__(self) -> str:
        return self.tag


threefry_prng_impl = PRNGImpl((2,), None, None, None, None, "threefry2x32", "fry")
rbg_prng_impl = PRNGImpl((4,), None, None, None, None, "rbg", "rbg")
unsafe_rbg_prng_impl = PRNGImpl((4,), None, None, None, None, "unsafe_rbg", "urbg")


def define_prng_impl(*, key_shape: tuple[int, ...], seed: Callable[..., Any], split: Callable[..., Any],
                     random_bits: Callable[..., Any], fold_in: Callable[..., Any], name: str = "<unnamed>",
                     tag: str = "?") -> PRNGImpl:
    """A PRNG implementation of one's own (as jax.extend.random.define_prng_impl); ember draws only with
    Threefry-2x32, so keys of it are refused where they are asked for."""
    return PRNGImpl(tuple(key_shape), seed, split, random_bits, fold_in, name, tag)


def seed_with_impl(impl: PRNGImpl, seed: Any) -> Any:
    """A typed key of impl from an integer seed (ember.random.key(seed, impl=impl))."""
    return _random.key(seed, impl=impl)


def random_seed(seeds: Any, impl: PRNGImpl) -> Any:
    """Typed keys of impl from integer seeds (a scalar seed: one key)."""
    if np.ndim(seeds) == 0:
        return seed_with_impl(impl, seeds)
    return _vmap(lambda s: _random.key(s, impl=impl))(_jnp.asarray(seeds))


def threefry_2x32(keypair: Any, count: Any) -> Any:
    """The Threefry-2x32 hash of an array of uint32 counters under the key (k1, k2), as JAX's: the counters, in
    row-major order (padded with a zero to an even count), hashed as two halves, the result in count's shape."""
    k1, k2 = (_convert(_jnp.asarray(k), np.uint32) for k in keypair)
    count = _jnp.asarray(count)
    if np.dtype(_aval_of(count).dtype) != np.uint32:
        raise TypeError(f"threefry_2x32 requires uint32 arguments, got {np.dtype(_aval_of(count).dtype).name}")
    flat = count.reshape(-1)
    odd = flat.shape[0] % 2
    if odd:
        flat = _jnp.concatenate([flat, _jnp.zeros(1, np.uint32)])
    half = flat.shape[0] // 2
    out = _jnp.concatenate(threefry2x32_p.bind(k1, k2, flat[:half], flat[half:]))
    return (out[:-1] if odd else out).reshape(count.shape)


__all__ = ["PRNGImpl", "define_prng_impl", "random_seed", "rbg_prng_impl", "seed_with_impl", "threefry2x32_p",
           "threefry_2x32", "threefry_prng_impl", "unsafe_rbg_prng_impl"]
