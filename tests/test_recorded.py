"""tests/recorded.py's fingerprint is honest: what changes JAX's computation changes the key (a wrapped function's
options, a library closure's arguments, a test class's methods, a JAX option), what it cannot see it refuses (the
thunk runs live), an ember value as JAX's result is refused, and verify tells rounding from a stale record."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import recorded


def key(thunk):
    """The thunk's record key at one call position of the test (the key also counts a test's calls)."""
    recorded._position[1] = 0
    found = recorded._key(thunk)
    return found[1] if found is not None else None


def test_what_changes_the_computation_changes_the_key():
    f = lambda x, y: x * y ** 2  # noqa: E731

    def of(fn, *args):  # (one thunk's code: only what it closes over differs)
        found = key(lambda: fn(*args))
        assert found is not None
        return found
    assert of(jax.grad(f, argnums=0), 1.0, 2.0) != of(jax.grad(f, argnums=1), 1.0, 2.0)
    ones = jnp.ones(2)
    assert of(jax.vmap(f, in_axes=(0, 0)), ones, ones) != of(jax.vmap(f, in_axes=(0, None)), ones, ones)

    class Scale:
        def __call__(self, x):
            return x * 2

    class Scale2:
        def __call__(self, x):
            return x * 3
    Scale2.__qualname__ = Scale.__qualname__
    assert of(lambda c: c()(1.0), Scale) != of(lambda c: c()(1.0), Scale2)
    dot = lambda: jnp.dot(jnp.ones(2), jnp.ones(2))  # noqa: E731
    plain = of(dot)
    with jax.numpy_rank_promotion("raise"):
        assert of(dot) != plain
    assert of(dot) == plain


def test_what_the_fingerprint_cannot_see_runs_live():
    jitted, donating = jax.jit(lambda x: x + 1), jax.jit(lambda x: x + 1, donate_argnums=0)
    assert key(lambda: jitted(1.0)) is None and key(lambda: donating(1.0)) is None
    assert key(lambda: jax.jit(lambda x: x + 1)(1.0)) is not None  # (made inside the thunk: its code is seen)


def test_an_ember_value_is_not_jaxs_result():
    with pytest.raises(TypeError, match="returned an ember value"):
        recorded.jax_result(lambda: ember.numpy.ones(2))
    with pytest.raises(TypeError, match="returned an ember value"):
        recorded.jax_result(lambda: {"a": [jnp.ones(2), ember.numpy.ones(2)]})


def test_verify_tells_rounding_from_a_stale_record():
    x = np.float32([1.0, 2.0, 3.0])
    recorded._assert_same(x, x * (1 + np.float32(2 ** -22)), "rounding")  # (a few ulps: the same result)
    with pytest.raises(AssertionError, match="beyond rounding"):
        recorded._assert_same(x, x * 1.001, "stale")
    with pytest.raises(AssertionError, match="re-record"):
        recorded._assert_same(np.int32([1, 2]), np.int32([1, 3]), "integers")
    with pytest.raises(AssertionError, match="re-record"):
        recorded._assert_same(x, x.astype(np.float64), "dtype")
