"""ember.scipy.fft (dct, idct, dctn, idctn), ember.scipy.integrate (trapezoid) and ember.scipy.ndimage
(map_coordinates) against scipy and jax.scipy: values in float32 and float64, complex inputs, n / s / axes / norm,
jit, vmap and grad (against JAX's), and the errors for what JAX does not support."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.fft as jfft
import jax.scipy.integrate as jintegrate
import jax.scipy.ndimage as jndimage
import numpy as np
import pytest
import scipy.fft as sfft
import scipy.integrate as sintegrate
import scipy.ndimage as sndimage

import ember
import ember.scipy.fft as efft
import ember.scipy.integrate as eintegrate
import ember.scipy.ndimage as endimage

R = np.random.default_rng(48)


@pytest.mark.parametrize("x64", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_dct_idct_match_scipy(x64):
    dtype = np.float64 if x64 else np.float32
    tol = dict(rtol=1e-12, atol=1e-12) if x64 else dict(rtol=2e-5, atol=2e-5)
    with ember.config.override(enable_x64=x64):
        # (odd and even lengths, a length 1, padding and truncation; one program per case)
        for shape, axis, n in (((7,), -1, None), ((4, 6), 0, 9), ((3, 5, 2), 1, 3), ((1,), 0, None), ((2, 8), -1, 5)):
            x = R.normal(size=shape).astype(dtype)
            for norm in (None, "ortho"):
                both = ember.jit(lambda v: (efft.dct(v, n=n, axis=axis, norm=norm),
                                            efft.idct(v, n=n, axis=axis, norm=norm)))(x)
                for name, got in zip(("dct", "idct"), both):
                    ref = getattr(sfft, name)(x.astype(np.float64), n=n, axis=axis, norm=norm)
                    assert got.dtype == dtype and got.shape == ref.shape
                    np.testing.assert_allclose(np.asarray(got), ref, **tol, err_msg=f"{name} {shape} {n} {norm}")
        np.testing.assert_array_equal(np.asarray(efft.dct(x, norm="backward")), np.asarray(efft.dct(x)))
        x = R.normal(size=(3, 4, 5)).astype(dtype)
        for kw in ({"axes": (0, 2)}, {"s": (6, 2)}, {"axes": [1], "s": [7], "norm": "ortho"}):
            both = ember.jit(lambda v: (efft.dctn(v, **kw), efft.idctn(v, **kw)))(x)
            for name, got in zip(("dctn", "idctn"), both):
                ref = getattr(sfft, name)(x.astype(np.float64), **kw)
                np.testing.assert_allclose(np.asarray(got), ref, **tol, err_msg=f"{name} {kw}")
        # round trips; a complex input part by part (as JAX); integers become the default float
        np.testing.assert_allclose(np.asarray(efft.idctn(efft.dctn(x, norm="ortho"), norm="ortho")), x, **tol)
        z = (x + 1j * x[::-1]).astype(np.complex128 if x64 else np.complex64)
        np.testing.assert_allclose(np.asarray(efft.dct(z)), sfft.dct(z.astype(np.complex128)), **tol)
        assert efft.dct(np.arange(4)).dtype == dtype


def test_dct_under_jit_vmap_and_grad():
    x = R.normal(size=(3, 8)).astype(np.float32)
    w = R.normal(size=8).astype(np.float32)
    got = ember.jit(ember.vmap(lambda v: efft.dct(v, norm="ortho")))(x)
    np.testing.assert_allclose(np.asarray(got), sfft.dct(x, norm="ortho", axis=-1), rtol=2e-5, atol=2e-5)
    for name in ("idct",):                 # (dct's derivative is its transpose, idct's up to scaling)
        g = ember.grad(lambda v: ember.numpy.sum(getattr(efft, name)(v, n=6) * w[:6]))(x[0])
        jg = jax.grad(lambda v: jnp.sum(getattr(jfft, name)(v, n=6) * w[:6]))(x[0])
        np.testing.assert_allclose(np.asarray(g), np.asarray(jg), rtol=1e-5, atol=1e-5, err_msg=name)


def test_dct_errors():
    with pytest.raises(NotImplementedError, match=r"dct: only DCT type 2"):
        efft.dct(np.ones(4), type=1)
    with pytest.raises(NotImplementedError, match=r"idctn: only DCT type 2"):
        efft.idctn(np.ones((2, 2)), type=3)
    with pytest.raises(ValueError, match=r"idct: norm must be None, 'backward' or 'ortho'"):
        efft.idct(np.ones(4), norm="forward")
    with pytest.raises(ValueError, match=r"dct: the transform length n must be at least 1"):
        efft.dct(np.ones(4), n=0)
    with pytest.raises(ValueError, match=r"dct: axis 2 is out of bounds"):
        efft.dct(np.ones(4), axis=2)
    with pytest.raises(ValueError, match=r"dctn: s must have at most x.ndim"):
        efft.dctn(np.ones(4), s=(2, 2))


def test_trapezoid_matches_scipy_and_jax():
    y = R.normal(size=(4, 6))
    x = np.cumsum(R.uniform(0.1, 1, 6))
    with ember.config.override(enable_x64=True):
        np.testing.assert_allclose(np.asarray(eintegrate.trapezoid(y, x)), sintegrate.trapezoid(y, x), rtol=1e-14)
        np.testing.assert_allclose(np.asarray(eintegrate.trapezoid(y, dx=0.5, axis=0)),
                                   sintegrate.trapezoid(y, dx=0.5, axis=0), rtol=1e-14)
    g = ember.grad(lambda v: eintegrate.trapezoid(v, x.astype(np.float32)))(y[0].astype(np.float32))
    jg = jax.grad(lambda v: jintegrate.trapezoid(v, x.astype(np.float32)))(y[0].astype(np.float32))
    np.testing.assert_allclose(np.asarray(g), np.asarray(jg), rtol=1e-6)


MODES = ("constant", "nearest", "wrap", "mirror", "reflect")
SCIPY_MODE = {"constant": "grid-constant", "wrap": "grid-wrap"}   # JAX's 'constant' and 'wrap' are these


@pytest.mark.parametrize("order", [pytest.param(0, marks=pytest.mark.slow), 1])
def test_map_coordinates_matches_jax_and_scipy(order):
    image = R.normal(size=(5, 7))
    coords = [R.uniform(-3, 8, 60), R.uniform(-3, 10, 60)]
    coords[0][:4] = [0.0, 4.0, 2.0, -1.0]         # exact sample positions, an integer one outside
    for mode in MODES:
        with ember.config.override(enable_x64=True):
            got = np.asarray(endimage.map_coordinates(image, coords, order, mode, cval=1.5))
        ref = sndimage.map_coordinates(image, coords, order=order, mode=SCIPY_MODE.get(mode, mode), cval=1.5)
        # (order 0 at exact halves: ember and JAX round away from zero, SciPy to even)
        halves = np.any([np.abs(c - np.floor(c) - 0.5) < 1e-12 for c in coords], axis=0) if order == 0 else False
        np.testing.assert_allclose(got[~halves], ref[~halves], rtol=1e-12, atol=1e-12, err_msg=mode)
        got32 = endimage.map_coordinates(image.astype(np.float32), [c.astype(np.float32) for c in coords], order,
                                         mode, cval=1.5)
        theirs = jndimage.map_coordinates(image.astype(np.float32), [c.astype(np.float32) for c in coords], order,
                                          mode, cval=1.5)
        assert got32.dtype == np.float32
        np.testing.assert_allclose(np.asarray(got32), np.asarray(theirs), rtol=1e-5, atol=1e-5, err_msg=mode)


def test_map_coordinates_integer_input_jit_vmap_grad():
    image = np.arange(20, dtype=np.int32).reshape(4, 5)
    coords = [np.array([0.5, 1.25, 3.0]), np.array([0.5, 2.75, -1.0])]
    got = endimage.map_coordinates(image, coords, 1, "nearest")
    ref = jndimage.map_coordinates(image, [c.astype(np.float32) for c in coords], 1, "nearest")
    assert got.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))
    f = np.asarray(R.normal(size=(6, 6)), np.float32)
    points = np.asarray(R.uniform(-1, 6, (10, 2)), np.float32)
    batched = ember.jit(ember.vmap(lambda p: endimage.map_coordinates(f, [p[0], p[1]], 1, "mirror")))(points)
    np.testing.assert_allclose(np.asarray(batched),
                               sndimage.map_coordinates(f, points.T, order=1, mode="mirror"), rtol=1e-5, atol=1e-6)
    # gradients in the input and in the coordinates, against JAX's
    g_in, g_c = ember.grad(lambda a, c: endimage.map_coordinates(a, [c, c[::-1]], 1).sum(), argnums=(0, 1))(
        f, points[:, 0])
    j_in, j_c = jax.grad(lambda a, c: jndimage.map_coordinates(a, [c, c[::-1]], 1).sum(), argnums=(0, 1))(
        f, points[:, 0])
    np.testing.assert_allclose(np.asarray(g_in), np.asarray(j_in), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(g_c), np.asarray(j_c), rtol=1e-5, atol=1e-5)


def test_map_coordinates_errors():
    with pytest.raises(ValueError, match=r"map_coordinates: coordinates must be a sequence of length input.ndim"):
        endimage.map_coordinates(np.ones((3, 3)), [np.zeros(2)], 1)
    with pytest.raises(NotImplementedError, match=r"map_coordinates: order must be 0 or 1"):
        endimage.map_coordinates(np.ones(3), [np.zeros(2)], 3)
    with pytest.raises(NotImplementedError, match=r"map_coordinates: mode 'grid-wrap' is not supported"):
        endimage.map_coordinates(np.ones(3), [np.zeros(2)], 1, mode="grid-wrap")
    with pytest.raises(TypeError, match=r"map_coordinates: coordinates must be real"):
        endimage.map_coordinates(np.ones(3), [np.zeros(2) + 1j], 1)
