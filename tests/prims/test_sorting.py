"""Oracle tests for ember/_prims/sorting.py: sort (one operand, several, several keys), checked against numpy's
stable sort and lexsort, and its derivatives against JAX."""
import jax.lax as jlax
import numpy as np

import ember
from ember import lax
from oracle import Case, oracle_tests

FIB = ["float32", "float64", "int32", "bool"]


def _np_sort_along(x, axis, *others):
    perm = np.argsort(x, axis=axis, kind="stable")
    return tuple(np.take_along_axis(a, perm, axis) for a in (x,) + others)


def _np_lexsort2(k0, k1, v):  # sort by k0, then k1 (numpy's lexsort takes the primary key last)
    perm = np.lexsort((k1, k0), axis=0)
    return k0[perm], k1[perm], v[perm]


CASES = [
    Case("sort", lambda x: lax.sort(x, -1), lambda x: np.sort(x, -1, kind="stable"), [((3, 5),), ((7,),)], FIB,
         jax=lambda x: jlax.sort(x, x.ndim - 1)),
    Case("sort", lambda x: lax.sort(x, 0), lambda x: np.sort(x, 0, kind="stable"), [((4, 3),)], FIB,
         jax=lambda x: jlax.sort(x, 0), name="sort_dim0"),
    # several operands: the harness checks every output (the keys, and the values carried along)
    Case("sort", lambda k, v: lax.sort((k, v), 0, num_keys=1), lambda k, v: _np_sort_along(k, 0, v),
         [((6, 2), (6, 2))], ["float32", "float64"], jax=lambda k, v: jlax.sort((k, v), 0, num_keys=1),
         arg_dtypes=["int32", None], domain="int_small", name="sort_key_value"),
    Case("sort", lambda k0, k1, v: lax.sort((k0, k1, v), 0, num_keys=2), _np_lexsort2,
         [((8,), (8,), (8,))], ["float32", "float64"],
         jax=lambda k0, k1, v: jlax.sort((k0, k1, v), 0, num_keys=2),
         arg_dtypes=["int32", None, None], domain="int_small", name="sort_two_keys"),
    Case("sort", lambda k, v: lax.sort((k, v), 0, num_keys=2), lambda k, v: _np_lexsort2(k, v, v)[:2],
         [((9,), (9,))], ["float32", "float64"], jax=lambda k, v: jlax.sort((k, v), 0, num_keys=2),
         name="sort_float_keys"),
    # top_k: the values (and positions) of the k largest along the last axis, largest first, lower index on ties
    Case("top_k", lambda x: lax.top_k(x, 3), lambda x: _np_top_k(x, 3), [((4, 9),), ((20,),)], FIB,
         jax=lambda x: jlax.top_k(x, 3)),
    # approx_top_k (approx_max_k / approx_min_k bind it): exact on the CPU, as JAX's fallback
    Case("approx_top_k", lambda x: lax.approx_max_k(x, 2, 0), lambda x: _np_approx_k(x, 2, 0, True),
         [((5, 3),), ((4, 2, 3),)], ["float32", "float64"], jax=lambda x: jlax.approx_max_k(x, 2, 0)),
    Case("approx_top_k", lambda x: lax.approx_min_k(x, 3), lambda x: _np_approx_k(x, 3, -1, False),
         [((2, 6),)], ["float32", "float64"], jax=lambda x: jlax.approx_min_k(x, 3), name="approx_min_k"),
]


def _np_approx_k(x, k, axis, largest):
    """The k largest (smallest) entries along axis and their int32 positions, ties to the lower position."""
    order = np.argsort(-x if largest else x, axis=axis, kind="stable")
    index = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, index, axis), index.astype(np.int32)


def _np_top_k(x, k):
    perm = np.argsort(-x.astype(np.float64) if x.dtype != bool else ~x, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, perm, -1), perm.astype(np.int32)

test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)


def test_total_order_and_stability():
    x = np.array([3.0, np.nan, -0.0, 0.0, -np.inf, 1.0, np.nan, 0.0], np.float32)
    idx = np.arange(8, dtype=np.int32)
    keys, perm = lax.sort((x, idx), 0, num_keys=1)
    jkeys, jperm = jlax.sort((x, idx), 0, num_keys=1)
    np.testing.assert_array_equal(np.asarray(keys), np.asarray(jkeys))
    np.testing.assert_array_equal(np.asarray(perm), np.asarray(jperm))  # -0.0 and 0.0 tie: original order
    ties = np.array([1, 0, 1, 0, 1, 0, 1], np.int32)
    _, order = lax.sort((ties, np.arange(7, dtype=np.int32)), 0)
    np.testing.assert_array_equal(np.asarray(order), [1, 3, 5, 0, 2, 4, 6])


def test_top_k():
    x = np.array([[1.0, 5.0, 5.0, np.nan, -2.0], [0.0, 0.0, 0.0, 1.0, 0.0]], np.float32)
    for k in (0, 1, 3, 5):
        values, indices = lax.top_k(x, k)
        jvalues, jindices = jlax.top_k(x, k)
        np.testing.assert_array_equal(np.asarray(values), np.asarray(jvalues))
        np.testing.assert_array_equal(np.asarray(indices), np.asarray(jindices))
        assert indices.dtype == np.int32
    y = np.random.default_rng(0).normal(size=(3, 6))
    g = ember.grad(lambda y: ember.numpy.sum(lax.top_k(y, 2)[0] ** 2))(y)
    import jax
    np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(lambda y: (jlax.top_k(y, 2)[0] ** 2).sum())(y)))
    batched = ember.vmap(lambda r: lax.top_k(r, 2)[1])(y)
    np.testing.assert_array_equal(np.asarray(batched), np.asarray(jax.vmap(lambda r: jlax.top_k(r, 2)[1])(y)))


def test_errors():
    import pytest
    with pytest.raises(TypeError, match=r"sort: operands must have one shape, got f32\[3\], f32\[4\]"):
        lax.sort((np.ones(3, np.float32), np.ones(4, np.float32)))
    with pytest.raises(TypeError, match="sort: num_keys 3 must be between 1 and the number of operands 2"):
        lax.sort((np.ones(3, np.float32), np.ones(3, np.float32)), num_keys=3)
    with pytest.raises(TypeError, match=r"sort: operands must have at least one dimension"):
        lax.sort(np.float32(1.0))
    with pytest.raises(ValueError, match=r"top_k: k=4 must be between 0 and the last dimension's size 3"):
        lax.top_k(np.ones(3, np.float32), 4)
