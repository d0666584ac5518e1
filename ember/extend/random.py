"""ember.extend.random, as jax.extend.random: PRNG implementations and the Threefry hash they are built on.

`threefry_prng_impl` (JAX's default), `rbg_prng_impl` and `unsafe_rbg_prng_impl` are ember's implementations, each
giving JAX's numbers bit for bit (ember.random._prng says how each works); ember.random.key(seed, impl=...) takes
them. The threefry4x32, philox2x32 and philox4x32 implementations are not exported here, as jax.extend.random does
not export them: key(seed, impl="philox4x32") names them. define_prng_impl makes one of one's own from four
functions written with ember.numpy/ember.lax (as JAX's, over one key's raw data): its keys split, fold and draw
through them in every sampler, under jit, vmap and grad. `threefry2x32_p` is the hash's primitive and
`threefry_2x32(keypair, count)` the hash of an array of counters."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember import numpy as _jnp, random as _random
from ember._api.vmap import vmap as _vmap
from ember._prims.bits import threefry2x32_p as threefry2x32_p
from ember._prims.elementwise import convert_element_type as _convert
from ember._core import aval_of as _aval_of
from ember.random._prng import (PRNGImpl as PRNGImpl, rbg_prng_impl as rbg_prng_impl,
                                threefry_prng_impl as threefry_prng_impl,
                                unsafe_rbg_prng_impl as unsafe_rbg_prng_impl)


def define_prng_impl(*, key_shape: tuple[int, ...], seed: Callable[..., Any], split: Callable[..., Any],
                     random_bits: Callable[..., Any], fold_in: Callable[..., Any], name: str = "<unnamed>",
                     tag: str = "?") -> PRNGImpl:
    """A PRNG implementation of one's own (as jax.extend.random.define_prng_impl): seed(seed) -> uint32 key data
    of key_shape, split(key, shape) -> key data of shape + key_shape, random_bits(key, bit_width, shape) ->
    unsigned integers of bit_width bits, fold_in(key, uint32 scalar) -> key data. Keys of it (ember.random.key(seed,
    impl=it)) print as key<tag>."""
    key_shape = tuple(int(d) for d in key_shape)
    for arg, fn in (("seed", seed), ("split", split), ("random_bits", random_bits), ("fold_in", fold_in)):
        if not callable(fn):
            raise TypeError(f"ember.extend.random.define_prng_impl: {arg} must be a function, got "
                            f"{type(fn).__name__}")
    return PRNGImpl(key_shape, seed, split, random_bits, fold_in, name, tag)


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
