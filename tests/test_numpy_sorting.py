"""ember.numpy's sorting and searching against numpy (values) and JAX (dtypes, ties, NaNs, size=, gradients),
eagerly, under jit and under vmap."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from recorded import jax_result

RNG = np.random.default_rng(0)


pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")
FLOATS = np.array([3.0, np.nan, -0.0, 1.0, 0.0, -np.inf, 3.0, np.inf, np.nan, -2.5], np.float32)


def _same(got, want):
    wide = (lambda a: np.asarray(a).astype(np.float32)) if np.dtype(want.dtype).name == "bfloat16" else np.asarray
    np.testing.assert_array_equal(wide(got), wide(want))
    assert np.dtype(got.dtype) == np.dtype(want.dtype), (got.dtype, want.dtype)


@pytest.mark.parametrize("axis,dtype", [  # (each dtype along one or two of the axes by default; all with -m slow)
    pytest.param(axis, dtype, id=f"{axis}-{dtype}", marks=() if (i + j) % 2 == 0 else pytest.mark.slow)
    for j, axis in enumerate([-1, 0, None])
    for i, dtype in enumerate(["float32", "int32", "uint8", "bool", "float16", "bfloat16"])])
def test_sort_and_argsort(dtype, axis):
    x = (RNG.normal(size=(5, 6)) * 3).astype(np.float32)
    x[1, 2] = x[3, 4] = np.nan
    if dtype in ("int32", "uint8", "bool"):
        x = np.nan_to_num(x)
    x = x.astype(jnp.bfloat16 if dtype == "bfloat16" else dtype)
    for descending in (False, True):
        _same(enp.sort(x, axis=axis, descending=descending),
              jax_result(lambda: jnp.sort(jnp.asarray(x), axis=axis, descending=descending)))
        _same(enp.argsort(x, axis=axis, descending=descending),
              jax_result(lambda: jnp.argsort(jnp.asarray(x), axis=axis, descending=descending)))
    _same(ember.jit(lambda x: enp.argsort(x, axis=axis))(x), jax_result(lambda: jnp.argsort(jnp.asarray(x), axis=axis)))


def test_total_order_ties_and_methods():
    _same(enp.sort(FLOATS), jax_result(lambda: jnp.sort(FLOATS)))
    _same(enp.argsort(FLOATS), jax_result(lambda: jnp.argsort(FLOATS)))
    _same(enp.argsort(FLOATS, descending=True), jax_result(lambda: jnp.argsort(FLOATS, descending=True)))
    x = enp.asarray(np.array([[3, 1, 2], [0, 5, 4]], np.int32))
    _same(x.sort(), jax_result(lambda: jnp.sort(jnp.asarray(x))))
    _same(x.argsort(axis=0), jax_result(lambda: jnp.argsort(jnp.asarray(x), axis=0)))


def test_lexsort_partition():
    a, b = RNG.integers(0, 3, 20), RNG.integers(0, 3, 20)
    np.testing.assert_array_equal(np.asarray(enp.lexsort((a, b))), np.lexsort((a, b)))
    x = RNG.normal(size=(4, 7))
    p = np.asarray(enp.partition(x, 3, axis=1))
    assert np.all(p[:, :3] <= p[:, 3:4]) and np.all(p[:, 4:] >= p[:, 3:4])
    i = np.asarray(enp.argpartition(x, 2, axis=1))
    np.testing.assert_array_equal(np.take_along_axis(x, i, 1)[:, 2], np.sort(x, 1)[:, 2])


@pytest.mark.parametrize("side,method", [  # (each method on one side by default, alternating; both with -m slow)
    pytest.param(side, method, id=f"{side}-{method}", marks=() if (i + j) % 2 == 0 else pytest.mark.slow)
    for j, side in enumerate(["left", "right"]) for i, method in enumerate(["scan", "compare_all", "sort"])])
def test_searchsorted(side, method):
    a = np.array([1.0, 2.0, 2.0, 3.0, np.nan], np.float32)
    v = np.array([[2.0, np.nan, 0.0], [5.0, 2.5, -np.inf]], np.float32)
    _same(enp.searchsorted(a, v, side=side, method=method), jax_result(lambda: jnp.searchsorted(a, v, side=side)))
    _same(ember.jit(lambda a, v: enp.searchsorted(a, v, side=side, method=method))(a, v),
          jax_result(lambda: jnp.searchsorted(a, v, side=side)))
    ints = np.arange(0, 40, 3)
    q = RNG.integers(-5, 45, 30)
    np.testing.assert_array_equal(np.asarray(enp.searchsorted(ints, q, side=side, method=method)),
                                  np.searchsorted(ints, q, side=side))
    perm = RNG.permutation(len(ints))
    np.testing.assert_array_equal(np.asarray(enp.searchsorted(ints[perm], q, side, np.argsort(ints[perm]))),
                                  np.searchsorted(ints[perm], q, side, np.argsort(ints[perm])))
    batched = ember.vmap(lambda v: enp.searchsorted(a, v, side=side, method=method))(v)
    _same(batched, jax_result(lambda: jax.vmap(lambda v: jnp.searchsorted(a, v, side=side))(v)))


def test_unique():
    x = FLOATS
    _same(enp.unique(x), jax_result(lambda: jnp.unique(x)))
    _same(enp.unique(x, equal_nan=False), jax_result(lambda: jnp.unique(x, equal_nan=False)))
    for size, fill in [(12, None), (12, -1.0), (3, None)]:
        got = enp.unique(x, True, True, True, size=size, fill_value=fill)
        want = jax_result(lambda: jnp.unique(x, True, True, True, size=size, fill_value=fill))
        for g, w in zip(got, want):
            _same(g, w)
        if fill is None:  # the same computation under jit
            f = ember.jit(lambda x: enp.unique(x, True, True, True, size=size, fill_value=fill))
            for g, w in zip(f(x), want):
                _same(g, w)
    m = np.array([[1, 2], [1, 2], [0, 5], [1, 2]], np.int32)
    for g, w in zip(enp.unique(m, axis=0, return_inverse=True, return_counts=True),
                    jax_result(lambda: jnp.unique(m, axis=0, return_inverse=True, return_counts=True))):
        _same(g, w)
    for g, w in zip(enp.unique(m, return_inverse=True), jax_result(lambda: jnp.unique(m, return_inverse=True))):
        _same(g, w)
    _same(enp.unique_values(m), jax_result(lambda: jnp.unique_values(m)))
    for g, w in zip(enp.unique_all(m), jax_result(lambda: tuple(jnp.unique_all(m)))):
        _same(g, w)
    _same(enp.unique(np.zeros(0, np.float32)), jax_result(lambda: jnp.unique(np.zeros(0, np.float32))))
    with pytest.raises(ValueError, match=r"unique: the number of unique elements of i32\[4,2\] depends on its values"):
        ember.jit(enp.unique)(m)


def test_sort_gradients_and_vmap():
    x = RNG.normal(size=(4, 5)).astype(np.float32)
    ct = RNG.normal(size=(4, 5))
    g = ember.grad(lambda x: enp.sum(enp.sort(x, axis=0, descending=True) * ct))(x)
    np.testing.assert_allclose(np.asarray(g), jax_result(lambda: jax.grad(
        lambda x: jnp.sum(jnp.sort(x, axis=0, descending=True) * ct))(x)))
    g = ember.grad(lambda x: enp.sum(enp.take_along_axis(x, enp.argsort(x, axis=1), 1)[:, :2]))(x)
    np.testing.assert_allclose(np.asarray(g), jax_result(lambda: jax.grad(
        lambda x: jnp.sum(jnp.take_along_axis(x, jnp.argsort(x, axis=1), 1)[:, :2]))(x)))
    _same(ember.vmap(enp.argsort)(x), jax_result(lambda: jax.vmap(jnp.argsort)(x)))
    _same(ember.vmap(enp.sort, in_axes=1)(x), jax_result(lambda: jax.vmap(jnp.sort, in_axes=1)(x)))
