"""jax.experimental's remaining names on ember, against JAX: the stateful generator of jax.experimental.random (the
same draws for the same seed, eagerly, under jit and vmap), compilation_cache's set_cache_dir / reset_cache, and
JAX's names for extended dtypes (primal_tangent_dtype, EArray, cur_qdd)."""
import numpy as np
import pytest

import jax
import jax.experimental
import jax.experimental.random
import jax.numpy as jnp

import ember
import ember.experimental.random as erandom
import ember.numpy as enp
from ember.experimental.compilation_cache import compilation_cache


def _draws(lib, xs, random, full):
    """A sequence of draws (JAX's oracle runs with x64 on: every dtype is given); full: every method."""
    f32, i32 = np.float32, np.int32
    rng = random.stateful_rng(42)
    out = [rng.uniform(dtype=f32), rng.uniform(dtype=f32)]
    jitted = lib.jit(lambda: rng.uniform(dtype=f32))
    out += [jitted(), jitted(), lib.random.key_data(rng.key())]
    if not full:
        return [np.asarray(v) for v in out]
    out += [rng.normal(1.0, 2.0, size=3, dtype=f32),
            rng.integers(10, size=(2,), dtype=i32), rng.integers(3, 7, size=2, dtype=i32), rng.random(2, dtype=f32),
            rng.uniform(-1.0, 1.0, size=(2, 2), dtype=f32), lib.random.key_data(rng.key((2,)))]
    out.append(lib.vmap(lambda r, x: x + r.uniform(dtype=f32))(random.stateful_rng(123).split(3),
                                                                 xs.zeros(3, f32)))
    out += [r.integers(0, 10, 2, dtype=i32) for r in random.stateful_rng(123).spawn(2)]

    @lib.jit
    def inside(x):
        r = random.stateful_rng(7)
        return x + r.normal(size=2, dtype=f32) + r.normal(size=2, dtype=f32)
    out.append(inside(xs.zeros(2, f32)))
    return [np.asarray(v) for v in out]


@pytest.mark.parametrize("full", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_stateful_rng_draws_as_jax(full):
    ours, theirs = _draws(ember, enp, erandom, full), _draws(jax, jnp, jax.experimental.random, full)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_stateful_rng_errors_as_jax():
    for lib, random in ((ember, erandom), (jax, jax.experimental.random)):
        with pytest.raises(TypeError, match="requires an explicit seed"):
            lib.jit(lambda: random.stateful_rng().uniform())()
        with pytest.raises(ValueError, match="cannot operate on split stateful generator"):
            random.stateful_rng(0).split(2).uniform()
    with pytest.raises(ValueError, match="Expected base_key to be a typed PRNG key"):
        erandom.StatefulPRNG(3, ember.new_ref(0)).uniform()
    rng = erandom.stateful_rng()  # (seeded from numpy's entropy, outside transformations)
    assert 0.0 <= float(rng.uniform()) < 1.0
    assert [n for n in dir(jax.experimental.random) if not n.startswith("_") and not hasattr(erandom, n)] == []


def test_compilation_cache_module(tmp_path):
    from ember._runtime import compile_cache
    try:
        compilation_cache.set_cache_dir(tmp_path)
        with ember.config.override(persistent_cache_min_compile_time_secs=0,
                                   persistent_cache_min_entry_size_bytes=0):
            ember.jit(lambda v: v * 11.0 - 2.0)(np.ones(3, np.float32))
        assert ember.config.read("jax_compilation_cache_dir") == str(tmp_path)
        assert any(tmp_path.iterdir()) and compile_cache.stats["misses"] >= 1
        compilation_cache.reset_cache()
        assert compile_cache.stats == {"hits": 0, "misses": 0, "stores": 0}
    finally:
        compilation_cache.set_cache_dir(None)
    assert ember.config.read("jax_compilation_cache_dir") is None
    import jax.experimental.compilation_cache.compilation_cache as theirs
    assert {n for n in dir(theirs) if not n.startswith("_") and callable(getattr(theirs, n))} <= \
        set(compilation_cache.__all__)


def test_extended_dtype_names_as_jax():
    for args in [(np.int8, np.float32), ("int8", "float32", "mine"), (np.float16, np.float64)]:
        ours = ember.experimental.primal_tangent_dtype(*args)
        theirs = jax.experimental.primal_tangent_dtype(*args)
        assert repr(ours) == repr(theirs)
        assert (ours.primal_dtype, ours.tangent_dtype) == (theirs.primal_dtype, theirs.tangent_dtype)
    assert issubclass(ember.experimental.primal_tangent_dtype(np.int8, np.float32).type, ember.dtypes.extended)
    for value in (enp.ones(2), 1.0, ember.new_ref(0)):
        with pytest.raises(AttributeError, match="has no attribute 'cur_qdd'"):
            ember.experimental.cur_qdd(value)
    e = ember.experimental.EArray(ember.ShapedArray((2, 3), np.float32), enp.ones((2, 3)))
    assert (e.shape, e.ndim, e.size, len(e)) == ((2, 3), 2, 6, 2) and repr(e).startswith("EArray(")
    with pytest.raises(TypeError, match="len"):
        len(ember.experimental.EArray(ember.ShapedArray((), np.float32), enp.ones(())))
    import types
    names = [n for n in dir(jax.experimental) if not n.startswith("_")
             and not isinstance(getattr(jax.experimental, n), types.ModuleType)]  # (its submodules: as imported)
    assert [n for n in names + ["compilation_cache", "random"] if not hasattr(ember.experimental, n)] == []
