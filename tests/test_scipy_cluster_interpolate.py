"""ember.scipy.cluster.vq.vq and ember.scipy.interpolate.RegularGridInterpolator against scipy (values) and JAX
(dtypes, the same conventions: nearest's ties, fill_value, extrapolation), eagerly, under jit, vmap and grad (the
interpolator is a pytree); the errors JAX raises."""
import jax
import jax.numpy as jnp
import jax.scipy.cluster.vq as jvq
import jax.scipy.interpolate as jinterp
import numpy as np
import pytest
import scipy.cluster.vq as svq
import scipy.interpolate as sinterp

import ember
import ember.numpy as enp
import ember.scipy.cluster.vq as evq
from ember.scipy.interpolate import RegularGridInterpolator
from recorded import jax_result

R = np.random.default_rng(3)


# ---------------------------------------------------------------------------------------------------------------
# vq
def test_vq_matches_scipy_and_jax():
    obs, book = R.normal(size=(20, 3)), R.normal(size=(5, 3))
    with ember.config.override(enable_x64=True):
        code, dist = evq.vq(obs, book)
        want_code, want_dist = svq.vq(obs, book)
        np.testing.assert_array_equal(np.asarray(code), want_code)
        np.testing.assert_allclose(np.asarray(dist), want_dist, rtol=1e-14)
        # 1-D: length-1 observations; integers promoted; ties to the first code
        code, dist = evq.vq(np.array([1, 2, 3, 5]), np.array([0, 2, 4]))
        np.testing.assert_array_equal(np.asarray(code), [0, 1, 1, 2])
        np.testing.assert_allclose(np.asarray(dist), [1, 0, 1, 1])
    o32, b32 = obs.astype(np.float32), book.astype(np.float32)
    code, dist = ember.jit(evq.vq)(o32, b32)
    want = jax_result(lambda: jvq.vq(o32, b32))
    assert dist.dtype == np.float32 and code.dtype == np.int32          # (JAX in 32-bit mode: the same)
    np.testing.assert_array_equal(np.asarray(code), want[0])
    np.testing.assert_allclose(np.asarray(dist), want[1], rtol=1e-6)
    codes = ember.vmap(lambda o: evq.vq(o, b32)[0])(o32.reshape(4, 5, 3))
    np.testing.assert_array_equal(np.asarray(codes).ravel(), want[0])
    g = ember.grad(lambda o: enp.sum(evq.vq(o, b32)[1]))(o32)       # d|o - c|/do = (o - c) / |o - c|
    near = b32[want[0]]
    np.testing.assert_allclose(np.asarray(g), (o32 - near) / np.linalg.norm(o32 - near, axis=1)[:, None],
                               rtol=1e-5)


def test_vq_errors():
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        evq.vq([[1.0, 2.0]], np.ones((2, 2)))
    with pytest.raises(ValueError, match="same rank"):
        evq.vq(np.ones((3, 2)), np.ones(2))
    with pytest.raises(ValueError, match="ndim different than 1 or 2"):
        evq.vq(np.ones((3, 2, 2)), np.ones((3, 2, 2)))


# ---------------------------------------------------------------------------------------------------------------
# RegularGridInterpolator
GRID = (np.array([0.0, 0.5, 1.5, 3.0]), np.array([-1.0, 0.0, 2.0]), np.array([0.0, 1.0, 2.0, 3.0, 4.0]))
VALUES = R.normal(size=(4, 3, 5))
POINTS = np.stack([R.uniform(-0.5, 3.5, 40), R.uniform(-1.5, 2.5, 40), R.uniform(-0.5, 4.5, 40)], axis=-1)


@pytest.mark.usefixtures("ember_x64")
@pytest.mark.parametrize("method", ["linear", "nearest"])
def test_interpolator_matches_scipy_and_jax(method):
    inside = np.all([(POINTS[:, i] >= g[0]) & (POINTS[:, i] <= g[-1]) for i, g in enumerate(GRID)], axis=0)
    assert 5 < inside.sum() < 40
    for fill in (np.nan, -7.0, None):
        ours = RegularGridInterpolator(GRID, VALUES, method=method, fill_value=fill)(POINTS)
        theirs = sinterp.RegularGridInterpolator(GRID, VALUES, method=method, bounds_error=False,
                                                 fill_value=fill)(POINTS)
        if fill is None and method == "nearest":     # (scipy's nearest clips; JAX's, extrapolating, too)
            np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-14)
        elif fill is None:                              # linear extrapolation, as scipy
            np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-12, atol=1e-12)
        else:
            np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-12, atol=1e-14)
        jax_fill = fill
        want = jax_result(lambda: jinterp.RegularGridInterpolator(GRID, VALUES, method=method,
                                                                  fill_value=jax_fill)(POINTS))
        np.testing.assert_allclose(np.asarray(ours), want, rtol=1e-12, atol=1e-14)


def test_interpolator_shapes_dtypes_and_pytree():
    g32 = tuple(g.astype(np.float32) for g in GRID[:2])
    vals = R.normal(size=(4, 3, 2)).astype(np.float32)          # a trailing axis, interpolated alike
    interp = RegularGridInterpolator(g32, vals)
    pts = POINTS[:6, :2].astype(np.float32)
    out = interp(pts)
    want = jax_result(lambda: jinterp.RegularGridInterpolator(g32, vals)(pts))
    assert out.shape == (6, 2) and out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-6)
    # a tuple of coordinate arrays (broadcast), a (..., N) batch, method overridden per call
    xs, ys = np.float32(1.0), np.array([-0.5, 0.5, 1.5], np.float32)
    np.testing.assert_allclose(np.asarray(interp((xs, ys))), np.asarray(interp(np.stack(
        [np.full(3, xs), ys], -1))), rtol=1e-6)
    assert interp(pts.reshape(2, 3, 2)).shape == (2, 3, 2)
    np.testing.assert_allclose(np.asarray(interp(pts, method="nearest")),
                               np.asarray(RegularGridInterpolator(g32, vals, method="nearest")(pts)))
    # 1-D grids take a 1-D array of points
    one = RegularGridInterpolator((np.array([1.0, 2.0, 3.0]),), np.array([1.0, 4.0, 9.0]))
    np.testing.assert_allclose(np.asarray(one(np.array([1.5, 2.5]))), [2.5, 6.5])
    # a pytree: the grid, the values and fill_value are its leaves
    leaves, treedef = ember.tree.flatten(interp)
    assert len(leaves) == 4 and treedef == ember.tree.structure(RegularGridInterpolator(g32, vals))
    np.testing.assert_allclose(np.asarray(ember.jit(lambda f, p: f(p))(interp, pts)), np.asarray(out), rtol=1e-6)
    batch = ember.vmap(lambda v: RegularGridInterpolator(g32, v)(pts))(np.stack([vals, 2 * vals]))
    np.testing.assert_allclose(np.asarray(batch[1]), 2 * np.asarray(out), rtol=1e-6)
    # gradients in the values and the points, as JAX's
    v2, p2 = vals[..., 0], pts[:3]

    def loss(cls, num):
        return lambda v, p: num.sum(cls(g32, v, fill_value=None)(p) * np.array([1.0, -2.0, 3.0], np.float32))

    got = ember.grad(loss(RegularGridInterpolator, enp), argnums=(0, 1))(v2, p2)
    want = jax_result(lambda: jax.grad(loss(jinterp.RegularGridInterpolator, jnp), argnums=(0, 1))(v2, p2))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-6)


def test_interpolator_errors():
    with pytest.raises(ValueError, match="method 'cubic' is not defined"):
        RegularGridInterpolator(GRID, VALUES, method="cubic")
    with pytest.raises(NotImplementedError, match="bounds_error"):
        RegularGridInterpolator(GRID, VALUES, bounds_error=True)
    with pytest.raises(ValueError, match="there are 3 point arrays, but values has 2 dimensions"):
        RegularGridInterpolator(GRID, VALUES[0])
    with pytest.raises(ValueError, match="fill_value must be either 'None' or of a type compatible with values"):
        RegularGridInterpolator(GRID, VALUES, fill_value=1j)
    with pytest.raises(TypeError, match="requires ndarray or scalar arguments"):
        RegularGridInterpolator(([0.0, 1.0],), np.ones(2))
    with pytest.raises(ValueError, match="have dimension 2, but this RegularGridInterpolator has dimension 3"):
        RegularGridInterpolator(GRID, VALUES)(np.ones((4, 2)))
    with pytest.raises(ValueError, match="method 'cubic' is not defined"):
        RegularGridInterpolator(GRID, VALUES)(POINTS, method="cubic")
