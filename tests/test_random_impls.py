"""JAX's other PRNG implementations on ember: threefry4x32, philox2x32 and philox4x32 keys (Random123's hashes), rbg
and unsafe_rbg keys (XLA's RngBitGenerator), the default implementation option, and implementations of one's own
(define_prng_impl): keys, split, fold_in, bits of every width and the samplers against jax.random bit for bit, under
jit, vmap, grad and loops; the errors where JAX refuses."""
from __future__ import annotations

import jax
import jax.extend.random
import numpy as np
import pytest

import ember
import ember.extend.random as erandom
import ember.random as er

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")

IMPLS = ["philox2x32", "rbg", "threefry4x32", "unsafe_rbg", "philox4x32"]  # (the default run keeps every third: tests/default_tier.py)
HASHES = ["threefry4x32", "philox2x32", "philox4x32"]  # (counter-based: each key's draws are its own under vmap)
TAGS = {"threefry4x32": "fry4", "rbg": "rbg", "unsafe_rbg": "urbg", "philox2x32": "phx2", "philox4x32": "phx4"}
KEY_SHAPES = {"threefry4x32": (4,), "rbg": (4,), "unsafe_rbg": (4,), "philox2x32": (1,), "philox4x32": (2,)}


def _same(ours, theirs):
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def _data(keys, lib):
    return np.asarray(lib.random.key_data(keys))


@pytest.mark.parametrize("impl", IMPLS)
def test_keys_split_fold_in_and_bits_are_jaxs(impl):
    for seed in (0, 42, 2 ** 31 + 5, np.int32(-3)):
        ours, theirs = er.key(seed, impl=impl), jax.random.key(seed, impl=impl)
        _same(_data(ours, ember), _data(theirs, jax))
        _same(er.PRNGKey(seed, impl=impl), jax.random.PRNGKey(seed, impl=impl))
    k, jk = er.key(7, impl=impl), jax.random.key(7, impl=impl)
    assert str(k.dtype) == str(jk.dtype) == f"key<{TAGS[impl]}>"
    assert np.shape(_data(k, ember)) == np.shape(_data(jk, jax)) == KEY_SHAPES[impl]
    assert er.key_impl(k) == jax.random.key_impl(jk) == impl
    assert k.dtype == er.key_dtype(impl) and k.dtype != er.key_dtype() and ember.numpy.issubdtype(
        k.dtype, ember.dtypes.prng_key)
    assert repr(k) == repr(jk)
    for num in (2, 5, (2, 3)):
        _same(_data(er.split(k, num), ember), _data(jax.random.split(jk, num), jax))
    _same(_data(er.split(k, ()), ember), _data(jax.random.split(jk, ()), jax))
    for value in (0, 1, 2 ** 32 - 1, np.uint8(200)):
        _same(_data(er.fold_in(k, value), ember), _data(jax.random.fold_in(jk, value), jax))
    for dtype in (np.uint8, np.uint16, np.uint32):
        for shape in ((3, 5), (), (0,), (7,)):
            _same(er.bits(k, shape, dtype), jax.random.bits(jk, shape, dtype))
    # a raw key of the implementation's data, split through jit
    raw, jraw = er.PRNGKey(3, impl=impl), jax.random.PRNGKey(3, impl=impl)
    split = ember.jit(lambda d: er.key_data(er.split(er.wrap_key_data(d, impl=impl), 4)))
    _same(split(raw), jax.random.key_data(jax.random.split(jax.random.wrap_key_data(jraw, impl=impl), 4)))


@pytest.mark.parametrize("impl", IMPLS)
def test_64_bit_keys_and_bits_with_x64(impl, ember_x64):
    """With x64 on both sides: keys of 64-bit seeds (their high words count), uint64 bits and float64 draws."""
    with jax.enable_x64(True):
        for seed in (2 ** 40 + 3, np.int64(-5), np.uint64(2 ** 63 + 1)):
            _same(_data(er.key(seed, impl=impl), ember), _data(jax.random.key(seed, impl=impl), jax))
        k, jk = er.key(2 ** 33 + 9, impl=impl), jax.random.key(2 ** 33 + 9, impl=impl)
        for shape in ((3, 4), ()):
            _same(er.bits(k, shape, np.uint64), jax.random.bits(jk, shape, np.uint64))
        _same(er.bits(k, (5,)), jax.random.bits(jk, (5,)))  # (the default dtype: uint64)
        _same(er.uniform(k, (6,), np.float64), jax.random.uniform(jk, (6,), np.float64))
        _same(er.normal(k, (6,), np.float64), jax.random.normal(jk, (6,), np.float64))
        _same(er.randint(k, (6,), -2 ** 40, 2 ** 40, np.int64), jax.random.randint(jk, (6,), -2 ** 40, 2 ** 40,
                                                                                     np.int64))


def _samplers(lib):
    """(name, sampler of one key): the same calls with ember.random or jax.random."""
    r = lib.random
    return [
        ("uniform", lambda k: r.uniform(k, (3, 4), minval=-1.0, maxval=2.0)),
        ("normal", lambda k: r.normal(k, (1000,))),
        ("randint", lambda k: r.randint(k, (50,), -5, 17)),
        ("bernoulli", lambda k: r.bernoulli(k, 0.3, (20,))),
        ("categorical", lambda k: r.categorical(k, np.log(np.array([0.1, 0.2, 0.7], np.float32)), shape=(30,))),
        ("permutation", lambda k: r.permutation(k, 12)),
        ("permutation of rows", lambda k: r.permutation(k, np.arange(12.0).reshape(4, 3), axis=0)),
        ("choice", lambda k: r.choice(k, 10, (4,), replace=False)),
        ("choice weighted", lambda k: r.choice(k, 5, (6,), p=np.array([.1, .2, .3, .2, .2], np.float32))),
        ("exponential", lambda k: r.exponential(k, (9,))),
        ("truncated_normal", lambda k: r.truncated_normal(k, -1.0, 2.0, (9,))),
        ("gumbel", lambda k: r.gumbel(k, (9,))),
        ("laplace", lambda k: r.laplace(k, (9,))),
        ("rademacher", lambda k: r.rademacher(k, (9,))),
        ("orthogonal", lambda k: r.orthogonal(k, 3)),
    ]


@pytest.mark.parametrize("impl", IMPLS)
def test_samplers_are_jaxs_bit_for_bit(impl):
    k, jk = er.key(11, impl=impl), jax.random.key(11, impl=impl)
    for (name, ours), (_, theirs) in zip(_samplers(ember), _samplers(jax)):
        got, want = np.asarray(ours(k)), np.asarray(theirs(jk))
        if name == "orthogonal":  # (a QR factorisation of normal draws: XLA's on both sides, to rounding)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("impl", IMPLS)
def test_gamma_family_with_each_key_drawing_alone(impl):
    """JAX draws the gamma family's elements one at a time (lax.map) with keys that are not threefry2x32's (under
    vmap RngBitGenerator would draw a whole batch from its first key; the other hashes give the same numbers either
    way)."""
    k, jk = er.key(5, impl=impl), jax.random.key(5, impl=impl)
    for ours, theirs in ((er.gamma(k, np.array([0.5, 1.0, 2.5, 9.0], np.float32)),
                          jax.random.gamma(jk, np.array([0.5, 1.0, 2.5, 9.0], np.float32))),
                         (er.beta(k, 2.0, 3.0, (5,)), jax.random.beta(jk, 2.0, 3.0, (5,))),
                         (er.dirichlet(k, np.array([1.0, 2.0, 3.0], np.float32), (2,)),
                          jax.random.dirichlet(jk, np.array([1.0, 2.0, 3.0], np.float32), (2,))),
                         (er.loggamma(k, 0.3, (4,)), jax.random.loggamma(jk, 0.3, (4,)))):
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=2e-6)
    g = ember.grad(lambda a: er.gamma(k, a, (3,)).sum())(2.0)
    jg = jax.grad(lambda a: jax.random.gamma(jk, a, (3,)).sum())(2.0)
    np.testing.assert_allclose(float(g), float(jg), rtol=1e-5)
    # the primitive itself, with a batch of typed keys
    keys, jkeys = er.split(k, 2), jax.random.split(jk, 2)
    a = np.array([[1.5, 3.0], [0.7, 2.0]], np.float32)
    np.testing.assert_allclose(np.asarray(er.random_gamma_p.bind(keys, a, log_space=False)),
                               np.asarray(jax.random.random_gamma_p.bind(jkeys, a, log_space=False)), rtol=2e-6)


@pytest.mark.parametrize("impl", IMPLS)
def test_under_jit_vmap_and_loops(impl):
    k, jk = er.key(9, impl=impl), jax.random.key(9, impl=impl)
    keys, jkeys = er.split(k, 3), jax.random.split(jk, 3)
    # vmap over keys: RngBitGenerator's batching rule draws for the batch from the first key (as JAX's)
    _same(ember.vmap(lambda kk: er.normal(kk, (4,)))(keys), jax.vmap(lambda kk: jax.random.normal(kk, (4,)))(jkeys))
    _same(ember.vmap(lambda kk: er.key_data(er.split(kk)))(keys),
          jax.vmap(lambda kk: jax.random.key_data(jax.random.split(kk)))(jkeys))
    _same(ember.jit(lambda kk: er.uniform(kk, (6,)))(k), jax.jit(lambda kk: jax.random.uniform(kk, (6,)))(jk))

    def loop(lib, kk):
        def body(carry, _):
            carry, sub = lib.random.split(carry)
            return carry, lib.random.normal(sub, (2,))
        return lib.lax.scan(body, kk, None, length=4)[1]

    _same(ember.jit(lambda kk: loop(ember, kk))(k), jax.jit(lambda kk: loop(jax, kk))(jk))
    out = ember.lax.fori_loop(0, 3, lambda i, kk: er.fold_in(kk, i), k)
    jout = jax.lax.fori_loop(0, 3, lambda i, kk: jax.random.fold_in(kk, i), jk)
    _same(_data(out, ember), _data(jout, jax))
    # typed keys of the implementation pass through jit as arguments and results
    assert ember.jit(lambda kk: er.split(kk)[0])(k).dtype == k.dtype
    if impl in HASHES:  # (a hash's draws under vmap are each key's own)
        _same(ember.vmap(lambda kk: er.bits(kk, (5,)))(keys), np.stack([er.bits(kk, (5,)) for kk in keys]))
        _same(ember.vmap(lambda kk, v: er.key_data(er.fold_in(kk, v)))(keys, np.arange(3, dtype=np.uint32)),
              np.stack([er.key_data(er.fold_in(kk, v)) for v, kk in enumerate(keys)]))


@pytest.fixture
def default_impl(request):
    ember.config.update("jax_default_prng_impl", request.param)
    jax.config.update("jax_default_prng_impl", request.param)
    try:
        yield request.param
    finally:
        ember.config.update("jax_default_prng_impl", "threefry2x32")
        jax.config.update("jax_default_prng_impl", "threefry2x32")


@pytest.mark.parametrize("default_impl", IMPLS, indirect=True)
def test_the_default_implementation_option(default_impl):
    k, jk = er.key(1), jax.random.key(1)
    assert str(k.dtype) == str(jk.dtype) and er.key_impl(k) == default_impl
    raw, jraw = er.PRNGKey(1), jax.random.PRNGKey(1)
    assert np.shape(raw) == KEY_SHAPES[default_impl]
    _same(raw, jraw)
    _same(er.normal(raw, (5,)), jax.random.normal(jraw, (5,)))  # a raw key is read as the default's
    _same(er.split(raw), jax.random.split(jraw))
    _same(ember.jit(lambda r: er.uniform(r, (3,)))(raw), jax.jit(lambda r: jax.random.uniform(r, (3,)))(jraw))
    size = KEY_SHAPES[default_impl][0]
    with pytest.raises(TypeError, match=rf"raw uint32 key data of shape \(\.\.\., {size}\)"):
        er.normal(np.zeros(size + 1, np.uint32), (3,))


@pytest.mark.parametrize("impl", IMPLS)
def test_poisson_takes_threefry2x32_keys_only(impl):
    with pytest.raises(NotImplementedError, match=rf"poisson is only implemented for the threefry2x32 RNG, not "
                                                  rf"{impl} keys"):
        er.poisson(er.key(0, impl=impl), 3.0)
    with pytest.raises(NotImplementedError):
        jax.random.poisson(jax.random.key(0, impl=impl), 3.0)


def test_errors_where_jax_refuses():
    k = er.key(0, impl="rbg")
    with pytest.raises(ValueError, match="unknown PRNG implementation 'philox4x64'"):
        er.key(0, impl="philox4x64")
    with pytest.raises(TypeError, match="different implementations"):  # (the same key shape, another hash)
        ember.numpy.concatenate([er.split(k), er.split(er.key(0, impl="threefry4x32"))])
    with pytest.raises(TypeError, match=r"trailing dimensions \(1,\) \(philox2x32\), got uint32\[3, 2\]"):
        er.wrap_key_data(np.zeros((3, 2), np.uint32), impl="philox2x32")
    with pytest.raises(TypeError, match="different implementations"):
        ember.numpy.concatenate([er.split(k), er.split(er.key(0))])
    with pytest.raises(TypeError, match="different implementations"):
        _ = k == er.key(0)
    with pytest.raises(TypeError, match=r"trailing dimensions \(4,\) \(rbg\), got uint32\[3, 2\]"):
        er.wrap_key_data(np.zeros((3, 2), np.uint32), impl="rbg")
    with pytest.raises(ValueError, match="jax_default_prng_impl"):
        ember.config.update("jax_default_prng_impl", "philox4x64")
    with pytest.raises(Exception):
        jax.config.update("jax_default_prng_impl", "philox4x64")
    assert ember.config.read("jax_default_prng_impl") == "threefry2x32"


def _toy_impl(lib, define):
    """An implementation of one's own, written once for either library: a key of two words mixed by
    multiply-xorshift rounds (a test generator, not a good one)."""
    jnp, lax = lib.numpy, lib.lax
    u32 = np.uint32

    def mix(x, salt):
        x = x ^ jnp.asarray(salt, u32)
        x = x * jnp.asarray(0x9E3779B1, u32)
        return x ^ lax.shift_right_logical(x, jnp.asarray(15, u32))

    def seed(s):
        s = jnp.asarray(s).astype(u32)
        return jnp.stack([mix(s, 1), mix(s, 2)])

    def split(key, shape):
        n = int(np.prod(shape))
        i = jnp.arange(n, dtype=u32)
        return jnp.stack([mix(key[0] + i, 3), mix(key[1] ^ i, 4)], axis=-1).reshape(tuple(shape) + (2,))

    def fold_in(key, data):
        return jnp.stack([mix(key[0], data), mix(key[1], data + jnp.asarray(1, u32))])

    def random_bits(key, bit_width, shape):
        n = int(np.prod(shape))
        i = jnp.arange(n, dtype=u32)
        bits = mix(mix(i, key[0]) + key[1], 5).reshape(shape)
        return bits if bit_width == 32 else bits.astype(np.dtype(f"uint{bit_width}"))

    return define(key_shape=(2,), seed=seed, split=split, random_bits=random_bits, fold_in=fold_in,
                  name="toy", tag="toy")


def test_an_implementation_of_ones_own():
    mine = _toy_impl(ember, erandom.define_prng_impl)
    theirs = _toy_impl(jax, jax.extend.random.define_prng_impl)
    k, jk = er.key(4, impl=mine), jax.random.key(4, impl=theirs)
    assert str(k.dtype) == str(jk.dtype) == "key<toy>"
    _same(_data(k, ember), _data(jk, jax))
    _same(_data(er.split(k, 3), ember), _data(jax.random.split(jk, 3), jax))
    _same(_data(er.fold_in(k, 9), ember), _data(jax.random.fold_in(jk, 9), jax))
    for (name, ours), (_, want) in zip(_samplers(ember), _samplers(jax)):
        if name in ("orthogonal",):
            continue
        np.testing.assert_array_equal(np.asarray(ours(k)), np.asarray(want(jk)), err_msg=name)
    _same(ember.jit(lambda kk: er.normal(er.split(kk)[1], (3,)))(k),
          jax.jit(lambda kk: jax.random.normal(jax.random.split(kk)[1], (3,)))(jk))
    np.testing.assert_allclose(np.asarray(er.gamma(k, 2.0, (3,))), np.asarray(jax.random.gamma(jk, 2.0, (3,))),
                               rtol=2e-6)
    with pytest.raises(TypeError, match="split must be a function"):
        erandom.define_prng_impl(key_shape=(2,), seed=len, split=3, random_bits=len, fold_in=len)


@pytest.mark.parametrize("impl", ["rbg", "philox4x32"])
def test_a_stateful_generator_with_other_keys(impl):
    import jax.experimental.random as jax_stateful
    import ember.experimental.random as stateful
    ours, theirs = stateful.stateful_rng(3, impl=impl), jax_stateful.stateful_rng(3, impl=impl)
    _same(ours.normal(size=(4,)), theirs.normal(size=(4,)))
    _same(ours.uniform(-1.0, 2.0, size=(2,)), theirs.uniform(-1.0, 2.0, size=(2,)))
    _same(ours.random(size=3), theirs.random(size=3))
