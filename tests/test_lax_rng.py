"""XLA's generators in ember.lax against JAX 0.10.2 on the CPU: rng_bit_generator's bits and next keys bit for bit
(every algorithm, every dtype JAX takes, both key forms, eagerly, under jit and under vmap, where JAX's rule draws
every member from the first key), its errors; rng_uniform's bounds, dtypes and shapes (its numbers come from XLA's
hidden state, so only those are compared), its fresh draws, batching and errors."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax
from recorded import jax_result

KEYS = [np.array([1, 2, 3, 4], np.uint32), np.array([0, 0, 0, 0], np.uint32),
        np.array([2 ** 32 - 1, 17, 2 ** 31, 5], np.uint32)]
ALGORITHMS = list(lax.RandomAlgorithm)


def _jax_algorithm(algorithm):
    return jax.lax.RandomAlgorithm(int(algorithm))


def _assert_same(ours, theirs):
    for got, want in zip(ours, theirs, strict=True):
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
        np.testing.assert_array_equal(got, want)


def test_random_algorithm_is_jaxs_enum():
    assert [(a.name, int(a)) for a in lax.RandomAlgorithm] == [(a.name, int(a)) for a in jax.lax.RandomAlgorithm]
    assert str(lax.RandomAlgorithm.RNG_PHILOX) == "RNG_PHILOX"


SHAPES = [(), (7,), (3, 5), (0, 4), (1001,)]


def _draws(lib, dtypes=(np.uint8, np.uint16, np.uint32), shapes=SHAPES):
    """Every algorithm, dtype and shape (a scalar, an empty one, odd sizes) for each key, in one program: the next
    keys and the bits."""
    def run(*keys):
        return [lib.rng_bit_generator(k, shape, dtype, algorithm) for algorithm in lib.RandomAlgorithm
                for k in keys for dtype in dtypes for shape in shapes]
    return run


def test_bits_and_next_key_are_jaxs_bit_for_bit():
    """Every algorithm and dtype under jit (one program each side: XLA takes seconds to compile these), and one call
    eagerly (every key and shape in the slow sweep)."""
    want = jax_result(lambda: jax.jit(_draws(jax.lax, shapes=[(3, 5)]))(KEYS[2]))
    got = ember.jit(_draws(lax, shapes=[(3, 5)]))(KEYS[2])
    for ours, theirs in zip(got, want, strict=True):
        _assert_same(ours, theirs)
    _assert_same(lax.rng_bit_generator(KEYS[2], (3, 5), np.uint16, lax.RandomAlgorithm.RNG_DEFAULT), want[1])
    _assert_same(lax.rng_bit_generator(KEYS[2], (0, 4)),
                 jax_result(lambda: jax.lax.rng_bit_generator(jnp.asarray(KEYS[2]), (0, 4))))


@pytest.mark.slow
def test_bits_and_next_key_are_jaxs_bit_for_bit_every_key_and_shape():
    want = jax_result(lambda: jax.jit(_draws(jax.lax))(*KEYS))
    got = ember.jit(_draws(lax))(*KEYS)
    for ours, theirs in zip(got, want, strict=True):
        _assert_same(ours, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ALGORITHMS, ids=str)
def test_bits_and_next_key_are_jaxs_bit_for_bit_call_by_call(algorithm):
    for key in KEYS:
        for dtype in (np.uint8, np.uint16, np.uint32):
            for shape in SHAPES:
                want = jax.lax.rng_bit_generator(jnp.asarray(key), shape, dtype, _jax_algorithm(algorithm))
                _assert_same(lax.rng_bit_generator(key, shape, dtype, algorithm), want)


@pytest.mark.usefixtures("ember_x64")
def test_uint64_bits_and_the_uint64_key_with_x64():
    """With 64-bit dtypes: uint64 bits from the uint32[4] key and from XLA's own uint64[2] key form (JAX takes
    both), every algorithm."""
    keys = (KEYS[0], np.array([1, 2 ** 40 + 3], np.uint64))
    with jax.enable_x64(True):
        want = jax_result(lambda: jax.jit(_draws(jax.lax, (np.uint64,), [(3, 5)]))(*keys))
        got = ember.jit(_draws(lax, (np.uint64,), [(3, 5)]))(*keys)
        for ours, theirs in zip(got, want, strict=True):
            _assert_same(ours, theirs)


def test_uint64_without_x64_is_uint32_with_a_warning_as_jax():
    with pytest.warns(UserWarning, match="uint64"):
        _, bits = lax.rng_bit_generator(KEYS[0], (4,), np.uint64)
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, want = jax.lax.rng_bit_generator(jnp.asarray(KEYS[0]), (4,), np.uint64)
    assert bits.dtype == np.uint32
    np.testing.assert_array_equal(np.asarray(bits), np.asarray(want))


@pytest.mark.parametrize("in_axis", [0, 1])
def test_vmap_over_keys_as_jaxs_rule(in_axis):
    """JAX's batching rule: the first member's key draws (batch, *shape) bits for all members and is the only key
    that advances. ember's vmap gives the same values (and under jit, and with the output batched last)."""
    keys = np.stack(KEYS, axis=in_axis)

    def f(lib):
        return lambda k: lib.rng_bit_generator(k, (2, 3), np.uint16, lib.RandomAlgorithm.RNG_THREE_FRY)
    want = jax_result(lambda: jax.vmap(f(jax.lax), in_axes=in_axis, out_axes=(0, -1))(keys))
    _assert_same(ember.vmap(f(lax), in_axes=in_axis, out_axes=(0, -1))(keys), want)
    _assert_same(ember.jit(ember.vmap(f(lax), in_axes=in_axis, out_axes=(0, -1)))(keys), want)
    # a key that is not batched gives every member the same draw
    same = ember.vmap(lambda x, k: lax.rng_bit_generator(k, (3,))[1] + x, in_axes=(0, None))(
        np.arange(2, dtype=np.uint32), KEYS[0])
    np.testing.assert_array_equal(np.asarray(same[1]) - 1, np.asarray(same[0]))


def test_not_differentiable_bits_are_constants():
    key = KEYS[1]

    def f(lib, np_):
        return lambda x: np_.sum(lib.rng_bit_generator(key, (3,))[1].astype(np_.float32) * x)
    got = ember.grad(f(lax, enp))(np.float32(2.0))
    want = jax_result(lambda: jax.grad(f(jax.lax, jnp))(np.float32(2.0)))
    np.testing.assert_allclose(float(got), float(want), rtol=1e-6)


def test_rng_bit_generator_errors():
    for dtype in ("int32", "int8", "float32", "bool"):
        with pytest.raises(TypeError, match=f"rng_bit_generator: unsupported dtype {dtype}"):
            lax.rng_bit_generator(KEYS[0], (3,), dtype)
    # (jaxlib's lowering asserts on these keys; ember says what it takes)
    for key, text in [(np.zeros(3, np.uint32), r"u32\[3\]"), (np.zeros(4, np.int32), r"i32\[4\]"),
                      (np.zeros(4, np.float32), r"f32\[4\]"), (np.zeros((2, 4), np.uint32), r"u32\[2,4\]")]:
        with pytest.raises(TypeError, match=r"rng_bit_generator: the key must be uint32\[4\] or uint64\[2\], got "
                                            + text):
            lax.rng_bit_generator(key, (3,))
    with pytest.raises(ValueError, match="rng_bit_generator: algorithm must be a lax.RandomAlgorithm, got 7"):
        lax.rng_bit_generator(KEYS[0], (3,), algorithm=7)
    with pytest.raises(TypeError, match="rng_bit_generator: shape must have non-negative sizes"):
        lax.rng_bit_generator(KEYS[0], (-1,))


def test_rng_bit_generator_out_sharding_splits_the_bits_only():
    mesh = ember.sharding.make_mesh((2,), ("x",), axis_types=(ember.sharding.AxisType.Explicit,))
    with ember.sharding.set_mesh(mesh):
        key, bits = ember.jit(lambda k: lax.rng_bit_generator(
            k, (4, 3), out_sharding=ember.sharding.PartitionSpec("x")))(KEYS[0])
        assert ember.typeof(bits).sharding.spec == ember.sharding.PartitionSpec("x", None)
    _assert_same((key, bits), jax.lax.rng_bit_generator(jnp.asarray(KEYS[0]), (4, 3)))


# ---------------------------------------------------------------------------------------------------------------
# rng_uniform: XLA's stateful generator (jaxlib runs it for 32- and 64-bit integers and floats)
UNIFORM_DTYPES = ["int32", "uint32", "float32", "float16", "bfloat16"]


@pytest.mark.parametrize("dtype", UNIFORM_DTYPES)
def test_rng_uniform_bounds_dtype_and_shape(dtype):
    lo, hi = np.array(2, dtype), np.array(9, dtype)
    for fn in (lax.rng_uniform, ember.jit(lax.rng_uniform, static_argnums=2)):
        r = fn(lo, hi, (40, 25))
        assert r.dtype == np.dtype(dtype) and r.shape == (40, 25)
        values = np.asarray(r).astype(np.float64)
        # (XLA computes the 16-bit floats' numbers in float32 and rounds them, so b itself can come out too, as in
        # JAX: float16's spacing below 9 is 2**-7, about one in a thousand draws rounds up to it)
        assert values.min() >= 2 and (values.max() < 9 or dtype in ("bfloat16", "float16") and values.max() == 9)
        assert len(np.unique(values)) > 5  # (spread over the range)
    assert lax.rng_uniform(lo, hi, (0, 3)).shape == (0, 3)


@pytest.mark.usefixtures("ember_x64")
def test_rng_uniform_64_bit_dtypes():
    for dtype in ("int64", "uint64", "float64"):
        r = np.asarray(lax.rng_uniform(np.array(-3 if dtype == "int64" else 1, dtype), np.array(4, dtype), (500,)))
        assert r.dtype == np.dtype(dtype) and r.min() >= (-3 if dtype == "int64" else 1) and r.max() < 4


def test_rng_uniform_weak_type_as_jax():
    assert ember.typeof(lax.rng_uniform(0.0, 1.0, (2,))).weak_type
    assert not ember.typeof(lax.rng_uniform(np.float32(0), np.float32(1), (2,))).weak_type
    assert ember.typeof(lax.rng_uniform(np.float32(0), 1.0, (2,))).dtype == np.float32


def test_rng_uniform_draws_anew():
    """Stateful: two draws in one program differ (never merged), a second run differs from the first (never folded),
    and so do the draws of a loop's iterations."""
    f = ember.jit(lambda a: (lax.rng_uniform(a, 1.0, (16,)), lax.rng_uniform(a, 1.0, (16,))))
    first, second = f(np.float32(0))
    assert not np.array_equal(np.asarray(first), np.asarray(second))
    assert not np.array_equal(np.asarray(f(np.float32(0))[0]), np.asarray(first))
    g = ember.jit(lambda: lax.rng_uniform(0.0, 1.0, (16,)))
    assert not np.array_equal(np.asarray(g()), np.asarray(g()))
    rows = ember.jit(lambda: lax.scan(lambda c, _: (c, lax.rng_uniform(0.0, 1.0, (8,))), 0.0, None, length=3)[1])()
    assert len({np.asarray(r).tobytes() for r in rows}) == 3


def test_rng_uniform_under_vmap():
    """Bounds the same for every member: one draw, the same in every member (JAX's vmap); bounds that differ (which
    JAX refuses): each member's numbers in its own [a, b)."""
    same = np.asarray(ember.vmap(lambda x: lax.rng_uniform(0.0, 1.0, (5,)) + x)(np.zeros(3, np.float32)))
    np.testing.assert_array_equal(same[0], same[1])
    for dtype in ("float32", "int32"):
        a = (np.arange(4) * 10).astype(dtype)
        r = np.asarray(ember.vmap(lambda lo: lax.rng_uniform(lo, lo + 3, (200,)))(a)).astype(np.float64)
        assert r.shape == (4, 200)
        assert np.all(r >= a[:, None]) and np.all(r < a[:, None] + 3)
        with pytest.raises(NotImplementedError, match="Batching rule for 'rng_uniform' not implemented"):
            jax.vmap(lambda lo: jax.lax.rng_uniform(lo, lo + 3, (2,)))(jnp.asarray(a))


def test_rng_uniform_errors_and_no_derivatives():
    with pytest.raises(ValueError, match="Arguments to rng_uniform must have identical dtypes, got int32 and float32"):
        lax.rng_uniform(np.int32(0), np.float32(1), (3,))
    with pytest.raises(ValueError, match=r"Arguments to rng_uniform must be scalars; got shapes \(2,\) and \(\)"):
        lax.rng_uniform(np.zeros(2, np.float32), np.float32(1), (3,))
    for dtype in ("int8", "uint16", "bool", "complex64"):  # (jaxlib's XLA aborts the process on these)
        with pytest.raises(TypeError, match=f"rng_uniform: XLA's CPU RngUniform does not take {dtype}"):
            lax.rng_uniform(np.zeros((), dtype), np.ones((), dtype), (3,))
    with pytest.raises(NotImplementedError, match="primitive 'rng_uniform': no derivative rules, as in JAX"):
        ember.grad(lambda a: enp.sum(lax.rng_uniform(a, 2.0, (3,))))(np.float32(0))
    with pytest.raises(NotImplementedError, match="Differentiation rule for 'rng_uniform' not implemented"):
        jax.grad(lambda a: jnp.sum(jax.lax.rng_uniform(a, 2.0, (3,))))(np.float32(0))


def test_rng_bit_generator_exports_and_round_trips():
    """An exported program drawing with rng_bit_generator passes deserialize's checks (its op and rng_algorithm
    attribute are ember's) and draws the same bits."""
    import ember

    def draw(key):
        return ember.lax.rng_bit_generator(key, (5,), np.uint32)[1]

    exported = ember.export.export(ember.jit(draw))(ember.ShapeDtypeStruct((4,), np.uint32))
    restored = ember.export.deserialize(exported.serialize())
    key = np.arange(4, dtype=np.uint32)
    np.testing.assert_array_equal(np.asarray(restored.call(key)), np.asarray(draw(key)))
