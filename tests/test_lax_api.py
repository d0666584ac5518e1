"""ember.lax's jax.lax-compatible helpers (ember/_prims/lax_helpers.py) and API types, against jax.lax."""
import jax.lax as jlax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax

X = np.arange(24.0).reshape(2, 3, 4)


@pytest.mark.parametrize("name,args", [
    ("expand_dims", ((0, -1),)), ("squeeze", None), ("collapse", (1,)), ("collapse", (0, 2)),
    ("broadcast_to_rank", (5,)), ("index_in_dim", (-1, 1, False)), ("index_in_dim", (2, 2)), ("tile", ((2, 1, 3),)),
    ("unstack", (1,)), ("split", ((1, 3), 2)),
])
def test_shape_helpers_match_jax(name, args):
    x = X.reshape(2, 1, 3, 4) if name == "squeeze" else X
    args = ((1,),) if name == "squeeze" else args
    got, want = getattr(lax, name)(x, *args), getattr(jlax, name)(jnp.asarray(x), *args)
    got, want = (list(got), list(want)) if isinstance(want, (tuple, list)) else ([got], [want])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.usefixtures("ember_x64")  # (float64 inputs, rtol 1e-12)
def test_stack_batch_matmul_index_take_broadcast():
    a, b = X, X + 1
    for axis in (0, 2, -1):
        np.testing.assert_array_equal(np.asarray(lax.stack([a, b], axis)), np.asarray(jlax.stack([a, b], axis)))
    m = np.random.default_rng(0).normal(size=(2, 3, 4))
    n = np.random.default_rng(1).normal(size=(2, 4, 5))
    np.testing.assert_allclose(np.asarray(lax.batch_matmul(m, n)), np.asarray(jlax.batch_matmul(m, n)), rtol=1e-12)
    idx = (np.array([0, 1, 1]), np.array([3, 0, 2]))
    np.testing.assert_array_equal(np.asarray(lax.index_take(X, idx, (0, 2))),
                                  np.asarray(jlax.index_take(X, idx, (0, 2))))
    assert lax.broadcast_shapes((2, 1, 4), (3, 1), ()) == jlax.broadcast_shapes((2, 1, 4), (3, 1), ())
    np.testing.assert_array_equal(np.asarray(lax.broadcast_like(np.arange(4.0), X)),
                                  np.broadcast_to(np.arange(4.0), X.shape))
    g = ember.grad(lambda v: enp.sum(lax.tile(v, (2, 3)) * np.arange(24.0).reshape(4, 6)))(np.ones((2, 2)))
    import jax
    np.testing.assert_allclose(np.asarray(g), jax.grad(lambda v: jnp.sum(jlax.tile(v, (2, 3)) * jnp.arange(
        24.0).reshape(4, 6)))(jnp.ones((2, 2))))


def test_shape_helper_errors():
    with pytest.raises(ValueError, match=r"squeeze: cannot select an axis to squeeze out which has size not equal to "
                       r"one, got shape=\(2, 3\) and dimensions=\(0,\) \(operand f32\[2,3\]\)"):
        lax.squeeze(np.zeros((2, 3), np.float32), (0,))
    with pytest.raises(ValueError, match="split: sizes"):
        lax.split(X, (1, 2), 0)
    with pytest.raises(ValueError, match=r"Incompatible shapes for broadcasting: shapes=\[\(2, 3\), \(4, 3\)\]"):
        lax.broadcast_shapes((2, 3), (4, 3))
    with pytest.raises(IndexError, match="index_in_dim: index 5 is out of bounds"):
        lax.index_in_dim(X, 5, 1)


@pytest.mark.parametrize("dn", [("NCHW", "OIHW", "NCHW"), ("NHWC", "HWIO", "NHWC"), ("NHWC", "OIHW", "NCHW")])
def test_conv_shape_tuples_match_jax(dn):
    lhs, rhs = {"NCHW": (2, 3, 9, 8), "NHWC": (2, 9, 8, 3)}[dn[0]], {"OIHW": (5, 3, 3, 2), "HWIO": (3, 2, 3, 5)}[dn[1]]
    for padding in ("SAME", "VALID", ((1, 2), (0, 1))):
        assert lax.conv_general_shape_tuple(lhs, rhs, (2, 1), padding, dn) == \
            tuple(jlax.conv_general_shape_tuple(lhs, rhs, (2, 1), padding, dn))
        assert lax.conv_transpose_shape_tuple(lhs, rhs, (2, 3), padding, dn) == \
            tuple(jlax.conv_transpose_shape_tuple(lhs, rhs, (2, 3), padding, dn))
    assert lax.conv_general_permutations(dn) == tuple(tuple(p) for p in jlax.conv_general_permutations(dn))
    assert lax.conv_shape_tuple((2, 3, 9, 8), (5, 3, 3, 2), (2, 2), "SAME") == \
        tuple(jlax.conv_shape_tuple((2, 3, 9, 8), (5, 3, 3, 2), (2, 2), "SAME"))
    assert lax.reduce_window_shape_tuple((7, 8), (3, 2), (2, 1), ((1, 1), (0, 2)), (1, 2), (2, 1)) == \
        tuple(jlax.reduce_window_shape_tuple((7, 8), (3, 2), (2, 1), ((1, 1), (0, 2)), (1, 2), (2, 1)))


@pytest.mark.parametrize("dn", [None, ("NHWC", "HWIO", "NHWC")])
def test_conv_general_dilated_patches_matches_jax(dn):
    x = np.random.default_rng(2).normal(size=(2, 3, 5, 6) if dn is None else (2, 5, 6, 3)).astype(np.float32)
    got = lax.conv_general_dilated_patches(x, (2, 3), (1, 2), "SAME", dimension_numbers=dn)
    want = jlax.conv_general_dilated_patches(x, (2, 3), (1, 2), "SAME", dimension_numbers=dn)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_types_precision_rounding_dtype_empty():
    assert lax.Precision("highest") is lax.Precision.HIGHEST and lax.Precision(0) is lax.Precision.DEFAULT
    assert [p.name for p in lax.Precision] == [p.name for p in jlax.Precision]
    x = np.array([0.5, 1.5, 2.5, -0.5], np.float32)
    for method in (lax.RoundingMethod.AWAY_FROM_ZERO, lax.RoundingMethod.TO_NEAREST_EVEN):
        np.testing.assert_array_equal(np.asarray(lax.round(x, method)),
                                      np.asarray(jlax.round(x, jlax.RoundingMethod(int(method)))))
    assert lax.dtype(1.0) == np.float32 and lax.dtype(np.zeros(2, np.int16)) == np.int16
    e = lax.empty((2, 3), np.int32)
    assert np.asarray(e).shape == (2, 3) and np.asarray(e).dtype == np.int32


def test_dot_general_precision_and_preferred_element_type():
    a = np.random.default_rng(3).integers(-128, 127, (3, 4)).astype(np.int8)
    b = np.random.default_rng(4).integers(-128, 127, (4, 2)).astype(np.int8)
    dims = (((1,), (0,)), ((), ()))
    got = lax.dot_general(a, b, dims, precision=lax.Precision.HIGHEST, preferred_element_type=np.int32)
    assert np.asarray(got).dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), a.astype(np.int32) @ b.astype(np.int32))
    h = np.random.default_rng(5).normal(size=(3, 4)).astype(np.float16)
    got = lax.dot(h, h.T, preferred_element_type=np.float32)
    np.testing.assert_allclose(np.asarray(got), np.asarray(jlax.dot(h, h.T, preferred_element_type=jnp.float32)),
                               rtol=1e-3)
    f = np.random.default_rng(6).normal(size=(3, 4))
    g = ember.grad(lambda v: enp.sum(lax.dot_general(v, f.T.astype(np.float32), dims,
                                                      preferred_element_type=np.float64)))(f.astype(np.float32))
    assert np.asarray(g).dtype == np.float32
    np.testing.assert_allclose(np.asarray(g), np.tile(f.T.sum(1), (3, 1)), rtol=1e-6)
    with pytest.raises(TypeError, match="dot_general: preferred_element_type int32 cannot hold"):
        lax.dot_general(f, f.T, dims, preferred_element_type=np.int32)


def test_scatter_sub_matches_jax():
    dn = lax.ScatterDimensionNumbers((), (0,), (0,))
    dnj = jlax.ScatterDimensionNumbers((), (0,), (0,))
    idx = np.array([[1], [3], [1]])
    for dtype in (np.float32, np.int32, np.uint8):
        x, u = np.full(5, 10, dtype), np.array([1, 2, 3], dtype)
        np.testing.assert_array_equal(np.asarray(lax.scatter_sub(x, idx, u, dn)),
                                      np.asarray(jlax.scatter_sub(x, idx, u, dnj)))


def test_primitive_exports_are_embers_own():
    from ember._core import PRIMITIVES, Primitive
    names = [n for n in dir(jlax) if n.endswith("_p") and hasattr(lax, n)]
    assert len(names) >= 100
    for n in names:
        prim = getattr(lax, n)
        assert isinstance(prim, Primitive) and prim.name == n[:-2] and PRIMITIVES[prim.name] is prim
