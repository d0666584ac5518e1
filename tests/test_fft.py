"""ember.numpy.fft: values against numpy.fft in complex128/float64 and against jax.numpy.fft in complex64/float32
(every function, every norm, n/s/axes), gradients against jax.grad, and the transforms under jit, vmap and jvp; the
fft primitive's rules are checked by its Cases in tests/prims/test_complex_prims.py."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
import ember.numpy.fft as efft
from ember import lax
from recorded import jax_result

RNG = np.random.default_rng(0)
X = RNG.normal(size=(4, 6, 5)) + 1j * RNG.normal(size=(4, 6, 5))
R = RNG.normal(size=(4, 6, 5))
NORMS = [None, "backward", "ortho", "forward"]
pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")  # JAX in ember's mode (32-bit unless EMBER_ENABLE_X64)

# (name, call on a numpy-like fft module, the input): n/s/axes cover cutting, padding and the default axes
CALLS = [
    ("fft", lambda f, norm: f.fft(X, norm=norm)),
    ("fft_pad", lambda f, norm: f.fft(X, n=7, axis=1, norm=norm)),
    ("fft_cut", lambda f, norm: f.fft(X, n=3, axis=0, norm=norm)),
    ("fft_real_input", lambda f, norm: f.fft(R, norm=norm)),
    ("ifft", lambda f, norm: f.ifft(X, norm=norm)),
    ("ifft_n", lambda f, norm: f.ifft(X, n=8, norm=norm)),
    ("rfft", lambda f, norm: f.rfft(R, norm=norm)),
    ("rfft_n", lambda f, norm: f.rfft(R, n=8, axis=1, norm=norm)),
    ("irfft", lambda f, norm: f.irfft(X, norm=norm)),
    ("irfft_odd", lambda f, norm: f.irfft(X, n=9, axis=0, norm=norm)),
    ("hfft", lambda f, norm: f.hfft(X, norm=norm)),
    ("hfft_n", lambda f, norm: f.hfft(X, n=7, axis=1, norm=norm)),
    ("ihfft", lambda f, norm: f.ihfft(R, norm=norm)),
    ("fft2", lambda f, norm: f.fft2(X, norm=norm)),
    ("ifft2", lambda f, norm: f.ifft2(X, s=(3, 8), norm=norm)),
    ("rfft2", lambda f, norm: f.rfft2(R, norm=norm)),
    ("irfft2", lambda f, norm: f.irfft2(X, norm=norm)),
    ("fftn", lambda f, norm: f.fftn(X, norm=norm)),
    ("fftn_axes", lambda f, norm: f.fftn(X, axes=(0, 2), norm=norm)),
    ("ifftn", lambda f, norm: f.ifftn(X, s=(2, 3, 4), axes=(0, 1, 2), norm=norm)),
    ("rfftn", lambda f, norm: f.rfftn(R, norm=norm)),
    ("rfftn_axes", lambda f, norm: f.rfftn(R, axes=(2, 0), norm=norm)),
    ("irfftn", lambda f, norm: f.irfftn(X, s=(4, 6, 7), axes=(0, 1, 2), norm=norm)),
]


@pytest.mark.parametrize("name,call,norm", [  # (each call with two of the norms by default, in turn; all with -m slow)
    pytest.param(name, call, norm, id=f"{name}-{norm}", marks=() if (i + j) % 2 == 0 else pytest.mark.slow)
    for i, (name, call) in enumerate(CALLS) for j, norm in enumerate(NORMS)])
def test_values_against_numpy_in_double_precision(name, call, norm):
    with ember.config.override(enable_x64=True):
        got = call(efft, norm)
    want = call(np.fft, norm)
    assert np.asarray(got).dtype == want.dtype and np.shape(got) == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("name,call", CALLS, ids=[c[0] for c in CALLS])
def test_values_against_jax_in_single_precision(name, call):
    global X, R
    saved = X, R
    X, R = X.astype(np.complex64), R.astype(np.float32)
    try:
        got, want = call(efft, "ortho"), jax_result(lambda: call(jnp.fft, "ortho"))
    finally:
        X, R = saved
    assert np.asarray(got).dtype == np.asarray(want).dtype and np.shape(got) == np.shape(want)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-5)


def test_frequencies_and_shifts():
    for n, d in ((7, 0.1), (8, 1.0), (1, 2.0)):
        np.testing.assert_allclose(np.asarray(efft.fftfreq(n, d)), np.fft.fftfreq(n, d), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(efft.rfftfreq(n, d)), np.fft.rfftfreq(n, d), rtol=1e-6)
    want = jax_result(lambda: jnp.fft.fftfreq(4))
    assert efft.fftfreq(4).dtype == want.dtype == ember.numpy.zeros(1).dtype  # (the default float)
    with ember.config.override(enable_x64=True):
        assert efft.fftfreq(4, dtype=np.float64).dtype == np.float64
    r32 = R.astype(np.float32)  # (R is float64: float32 in ember without 64-bit mode)
    np.testing.assert_array_equal(np.asarray(efft.fftshift(R)), np.fft.fftshift(r32))
    np.testing.assert_array_equal(np.asarray(efft.ifftshift(R, axes=1)), np.fft.ifftshift(r32, axes=1))
    np.testing.assert_array_equal(np.asarray(efft.ifftshift(efft.fftshift(X, axes=(0, 2)), axes=(0, 2))),
                                  X.astype(np.complex64))


def test_round_trips():
    with ember.config.override(enable_x64=True):
        np.testing.assert_allclose(np.asarray(efft.ifftn(efft.fftn(X))), X, atol=1e-12)
        np.testing.assert_allclose(np.asarray(efft.irfft(efft.rfft(R), n=5)), R, atol=1e-12)
        np.testing.assert_allclose(np.asarray(efft.irfftn(efft.rfftn(R), s=R.shape)), R, atol=1e-12)


# ---------------------------------------------------------------------------------------------------------------
# Derivatives and transformations
W = RNG.normal(size=(3, 6)) + 1j * RNG.normal(size=(3, 6))
X2, R2 = W[:, ::-1].copy() * 0.7, RNG.normal(size=(3, 6))
LOSSES = {
    "fft": (lambda m, f: lambda z: m.sum(m.abs(f.fft(z) * W) ** 2), X2),
    "ifft_ortho": (lambda m, f: lambda z: m.sum(m.real(f.ifft(z, norm="ortho") * W)), X2),
    "rfft": (lambda m, f: lambda z: m.sum(m.abs(f.rfft(z) * W[:, :4]) ** 2), R2),
    "rfft_odd": (lambda m, f: lambda z: m.sum(m.abs(f.rfft(z, n=5) * W[:, :3]) ** 2), R2),
    "irfft": (lambda m, f: lambda z: m.sum(f.irfft(z) * m.arange(10)), X2),
    "irfft_odd": (lambda m, f: lambda z: m.sum(f.irfft(z, n=11) ** 2), X2),
    "irfft_of_real": (lambda m, f: lambda z: m.sum(f.irfft(z * (1 + 0j), n=7) ** 2), R2),
    "fft2": (lambda m, f: lambda z: m.sum(m.abs(f.fft2(z)) ** 2 * m.arange(6)), X2),
    "rfft2_forward": (lambda m, f: lambda z: m.sum(m.abs(f.rfft2(z, norm="forward"))), R2),
    "irfft2": (lambda m, f: lambda z: m.sum(f.irfft2(z) ** 3), X2),
    "hfft": (lambda m, f: lambda z: m.sum(f.hfft(z) ** 2), X2),
    "ihfft": (lambda m, f: lambda z: m.sum(m.abs(f.ihfft(z)) ** 2), R2),
    "fftshift_fftn": (lambda m, f: lambda z: m.sum(m.abs(f.fftshift(f.fftn(z))) * m.arange(6)), X2),
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if i % 2 == 0 else pytest.mark.slow)
                                  for i, n in enumerate(LOSSES)])  # (the fft primitive's rules: tests/prims)
def test_grads_equal_jax_under_jit_and_vmap(name):
    make, arg = LOSSES[name]
    with jax.enable_x64(True):
        want = jax_result(lambda: jax.grad(make(jnp, jnp.fft))(arg))
        want_batched = jax_result(lambda: jax.vmap(jax.grad(make(jnp, jnp.fft)))(np.stack([arg, 2 * arg])))
    with ember.config.override(enable_x64=True):
        got = ember.grad(make(enp, efft))(arg)
        jitted = ember.jit(ember.grad(make(enp, efft)))(arg)
        batched = ember.vmap(ember.grad(make(enp, efft)))(np.stack([arg, 2 * arg]))
    for value, expected in ((got, want), (jitted, want), (batched, want_batched)):
        assert np.asarray(value).dtype == np.asarray(expected).dtype
        np.testing.assert_allclose(np.asarray(value), np.asarray(expected), rtol=1e-9, atol=1e-9)


def test_jvp_and_vmap_equal_jax():
    t = RNG.normal(size=R2.shape).astype(np.float32)
    r, x, w = R2.astype(np.float32), X2.astype(np.complex64), W.astype(np.complex64)
    np.testing.assert_allclose(np.asarray(ember.jvp(efft.rfft, (r,), (t,))[1]),
                               jax_result(lambda: jax.jvp(jnp.fft.rfft, (r,), (t,))[1]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(ember.jvp(efft.irfft, (x,), (w,))[1]),
                               jax_result(lambda: jax.jvp(jnp.fft.irfft, (x,), (w,))[1]), rtol=1e-5, atol=1e-5)
    cube = RNG.normal(size=(4, 5, 3)).astype(np.float32)
    for axis in (0, 1, 2):
        np.testing.assert_allclose(np.asarray(ember.vmap(efft.rfft2, in_axes=axis)(cube)),
                                   jax_result(lambda: jax.vmap(jnp.fft.rfft2, in_axes=axis)(cube)), rtol=1e-5,
                                   atol=1e-5)
        np.testing.assert_allclose(np.asarray(ember.vmap(efft.fft, in_axes=axis)(cube + 1j)),
                                   jax_result(lambda: jax.vmap(jnp.fft.fft, in_axes=axis)(cube + 1j)), rtol=1e-5,
                                   atol=1e-5)
    ir = ember.stage_out(lambda v: efft.fft(v), ember.ShapedArray((8,), np.complex64))
    assert "fft" in str(ir) and "stablehlo.fft" in ember.jit(efft.fft).lower(x).as_text()


# ---------------------------------------------------------------------------------------------------------------
# Refusals
@pytest.mark.parametrize("call,error,match", [
    (lambda: efft.rfft(X), TypeError, r"rfft: complex input is not supported"),
    (lambda: efft.fftn(np.ones((2, 2, 2, 2))), ValueError, r"fftn: at most 3 axes"),
    (lambda: efft.fft(X, norm="sideways"), ValueError, r"fft: norm must be one of"),
    (lambda: efft.fft(X, n=0), ValueError, r"fft: invalid number of FFT data points"),
    (lambda: efft.fft2(X, s=(3,)), ValueError, r"fft2: s \(3,\) and axes \(1, 2\) must have the same length"),
    (lambda: efft.fftn(X, axes=(0, 0)), ValueError, r"fftn: repeated axes"),
    (lambda: efft.fft(X, axis=3), ValueError, r"axis 3 is out of bounds"),
    (lambda: efft.irfft(np.ones((3, 1), complex)), ValueError, r"irfft: invalid number of data points 0"),
    (lambda: efft.fft(np.float32(1)), ValueError, r"fft: needs an array of at least one dimension"),
    (lambda: efft.fftfreq(0), ValueError, r"fftfreq: n must be positive"),
    (lambda: efft.fftfreq(4, dtype=np.int32), ValueError, r"fftfreq: dtype must be a floating-point dtype"),
    (lambda: lax.fft(np.ones(4, np.float32), "FFT", (4,)), TypeError, r"fft: FFT needs a complex64 or complex128 "
                                                                       r"operand, got f32\[4\]"),
    (lambda: lax.fft(np.ones(4, np.complex64), "RFFT", (4,)), TypeError, r"fft: RFFT needs a float32 or float64"),
    (lambda: lax.fft(np.ones(4, np.complex64), "IRFFT", (4,)), TypeError, r"fft: IRFFT with fft_lengths \(4,\) "
                                                                           r"needs trailing dimensions \(3,\)"),
    (lambda: lax.fft(np.ones((2, 2, 2, 2), np.complex64), "FFT", (2, 2, 2, 2)), TypeError, r"1 to 3 trailing"),
    (lambda: lax.fft(np.ones(4, np.complex64), "DCT", (4,)), ValueError, r"fft_type must be one of"),
])
def test_refusals(call, error, match):
    with pytest.raises(error, match=match):
        call()
