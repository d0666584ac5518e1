"""ember.scipy.signal against scipy.signal (float64 oracles) and jax.scipy.signal: convolutions (direct and by FFT,
every mode, either input the larger, complex), detrend and the spectral functions (stft, istft, csd, welch);
eagerly, under jit, with gradients and under vmap."""
import warnings

import jax
import jax.scipy.signal as jss
import numpy as np
import pytest
import scipy.signal as ss

import ember
import ember.numpy as enp
import ember.scipy.signal as es

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")

rng = np.random.default_rng(3)
X = rng.normal(size=(7, 6)).astype(np.float32)
K = rng.normal(size=(3, 4)).astype(np.float32)
XC = (X + 1j * rng.normal(size=(7, 6))).astype(np.complex64)
KC = (K + 1j * rng.normal(size=(3, 4))).astype(np.complex64)
SIG = rng.normal(size=(2, 96)).astype(np.float32) + np.sin(np.arange(96) / 3).astype(np.float32)
SIG2 = rng.normal(size=(2, 96)).astype(np.float32)


def _close(ours, expected, what, rtol=1e-4, atol=1e-4):
    ours, expected = np.asarray(ours), np.asarray(expected)
    assert ours.shape == expected.shape, (what, ours.shape, expected.shape)
    np.testing.assert_allclose(ours, expected, rtol=rtol, atol=atol, err_msg=what)


def test_convolutions_match_scipy():
    x64, k64 = X.astype(np.float64), K.astype(np.float64)
    for mode in ("full", "same", "valid"):
        for method in ("direct", "fft"):
            out = es.convolve(X, K, mode, method)
            assert out.dtype == np.float32
            _close(out, ss.convolve(x64, k64, mode, method), f"convolve {mode} {method}")
        _close(es.correlate2d(K, X, mode), ss.correlate2d(k64, x64, mode), f"correlate2d {mode} (in2 larger)")
    _close(es.correlate(XC, KC, "same"), ss.correlate(XC.astype(np.complex128), KC.astype(np.complex128), "same"),
           "complex correlate")
    _close(es.convolve2d(X, K), ss.convolve2d(x64, k64), "convolve2d")
    batch1, batch2 = rng.normal(size=(3, 10, 2)).astype(np.float32), rng.normal(size=(3, 4, 2)).astype(np.float32)
    _close(es.fftconvolve(batch1, batch2, "valid", axes=1),
           ss.fftconvolve(batch1.astype(np.float64), batch2.astype(np.float64), "valid", axes=1), "fftconvolve axes")
    _close(es.correlate(X, K, "valid", "fft"), jss.correlate(X, K, "valid", "fft"), "against JAX")
    # under jit; the gradient of sum(w * convolve(x, k)) in x is correlate(w, k, 'valid'), in k correlate(w, x,
    # 'valid'); vmap over a batch of inputs is a loop of calls
    _close(ember.jit(lambda a, b: es.convolve(a, b, "same"))(X, K), ss.convolve(x64, k64, "same"), "jit")
    w = rng.normal(size=(9, 9)).astype(np.float32)
    for method in ("direct", "fft"):
        gx, gk = ember.grad(lambda a, b: (w * es.convolve(a, b, method=method)).sum(), argnums=(0, 1))(X, K)
        _close(gx, ss.correlate(w.astype(np.float64), k64, "valid"), f"grad x {method}")
        _close(gk, ss.correlate(w.astype(np.float64), x64, "valid"), f"grad k {method}")
    xs = rng.normal(size=(3, 7, 6)).astype(np.float32)
    batched = ember.vmap(lambda a: es.convolve(a, K, "valid"))(xs)
    _close(batched, np.stack([ss.convolve(a.astype(np.float64), k64, "valid") for a in xs]), "vmap")


def test_spectral_functions_match_scipy():
    s64, t64 = SIG.astype(np.float64), SIG2.astype(np.float64)
    f, t, z = es.stft(SIG, nperseg=16)
    ef, et, ez = ss.stft(s64, nperseg=16)
    assert np.asarray(z).dtype == np.complex64
    for o, e, what in [(f, ef, "stft frequencies"), (t, et, "stft times"), (z, ez, "stft")]:
        _close(o, e, what)
    _, x = es.istft(z, nperseg=16)
    _close(x, ss.istft(ez, nperseg=16)[1], "istft")
    _close(np.asarray(x)[:, :96], SIG, "istft(stft(x)) == x", atol=1e-5)
    f, p = es.welch(SIG, nperseg=32, detrend="linear")
    _close(p, ss.welch(s64, nperseg=32, detrend="linear")[1], "welch", rtol=2e-4, atol=1e-6)
    f, p = es.csd(SIG, SIG2, nperseg=32, average="median")
    _close(p, ss.csd(s64, t64, nperseg=32, average="median")[1], "csd", rtol=2e-4, atol=1e-6)
    _close(es.detrend(SIG, bp=[40]), ss.detrend(s64, bp=[40]), "detrend", atol=1e-5)
    # under jit; welch is quadratic in x, so a central difference is exact: the gradient along a direction
    psd = lambda v: es.welch(v, nperseg=32)[1].sum()  # noqa: E731
    direction = rng.normal(size=SIG.shape).astype(np.float32)
    grad = np.asarray(ember.jit(ember.grad(psd))(SIG))
    numeric = (float(psd(SIG + direction)) - float(psd(SIG - direction))) / 2
    np.testing.assert_allclose((grad * direction).sum(), numeric, rtol=1e-3)
    # vmap over signals equals the batched call
    _close(ember.vmap(lambda v: es.welch(v, nperseg=32)[1])(SIG), es.welch(SIG, nperseg=32)[1], "vmap welch",
           rtol=1e-5, atol=1e-7)


def test_errors():
    with pytest.raises(ValueError, match=r"scipy.signal.convolve: mode must be one of"):
        es.convolve(X, K, "middle")
    with pytest.raises(ValueError, match="scipy.signal.convolve: method must be 'auto', 'direct' or 'fft'"):
        es.convolve(X, K, method="winograd")
    with pytest.raises(ValueError, match=r"fftconvolve: in1 and in2 must have the same number of dimensions, got "
                                         r"shapes \(7, 6\) and \(4,\)"):
        es.fftconvolve(X, K[0])
    with pytest.raises(ValueError, match=r"convolve: one input must be at least as large as the other in every "
                                         r"dimension, got shapes \(7, 6\) and \(3, 8\)"):
        es.convolve(X, np.ones((3, 8), np.float32), "valid")
    with pytest.raises(NotImplementedError, match="convolve2d: only boundary='fill' with fillvalue=0"):
        es.convolve2d(X, K, boundary="wrap")
    with pytest.raises(ValueError, match="detrend: type must be 'linear' or 'constant'"):
        es.detrend(SIG, type="quadratic")
    with pytest.raises(ValueError, match=r"welch: noverlap \(32\) must be less than nperseg \(32\)"):
        es.welch(SIG, nperseg=32, noverlap=32)
    with pytest.raises(ValueError, match="istft: Zxx must be at least 2-D"):
        es.istft(np.ones(4, np.complex64))


# ---------------------------------------------------------------------------------------------------------------
# the full sweep against jax.scipy.signal
@pytest.mark.slow
def test_convolutions_match_jax():
    for mode in ("full", "same", "valid"):
        for name in ("convolve", "correlate"):
            for method in ("direct", "fft"):
                for a, b in [(X, K), (K, X), (XC, KC)]:
                    _close(getattr(es, name)(a, b, mode, method), getattr(jss, name)(a, b, mode, method),
                           f"{name} {mode} {method} {a.shape} {a.dtype}")
        for name in ("convolve2d", "correlate2d"):
            for a, b in [(X, K), (K, X), (XC, KC), (KC, XC), (X, X[::-1].copy())]:
                _close(getattr(es, name)(a, b, mode), getattr(jss, name)(a, b, mode), f"{name} {mode} {a.shape}")
        a, b = rng.normal(size=(4, 9, 5)).astype(np.float32), rng.normal(size=(4, 3, 5)).astype(np.float32)
        _close(es.fftconvolve(a, b, mode, axes=(1,)), jss.fftconvolve(a, b, mode, axes=(1,)), f"axes {mode}")
        _close(es.fftconvolve(a, b, mode, axes=(1, 2)), jss.fftconvolve(a, b, mode, axes=(1, 2)), f"2 axes {mode}")
        if mode != "valid":
            _close(es.fftconvolve(a[:1, :, :1], b[:, :1]), jss.fftconvolve(a[:1, :, :1], b[:, :1]), "broadcast")
    for kind in ("linear", "constant"):
        _close(es.detrend(SIG.T, axis=0, type=kind, bp=[10, 50]), jss.detrend(SIG.T, axis=0, type=kind, bp=[10, 50]),
               f"detrend {kind}")


@pytest.mark.slow
def test_spectral_functions_match_jax():
    cases = [
        ("stft", (SIG,), {"nperseg": 16}),
        ("stft", (SIG.T,), {"fs": 10.0, "nperseg": 15, "noverlap": 5, "nfft": 20, "boundary": "even",
                            "padded": False, "axis": 0, "return_onesided": False, "detrend": "linear"}),
        ("stft", (SIG,), {"nperseg": 16, "boundary": "odd", "window": ("tukey", 0.3)}),
        ("stft", (SIG,), {"nperseg": 16, "boundary": "constant", "window": np.hamming(16).astype(np.float32)}),
        ("welch", (SIG,), {"nperseg": 32}),
        ("welch", (SIG,), {"nperseg": 32, "average": "median", "scaling": "spectrum", "detrend": "linear"}),
        ("welch", ((SIG + 1j * SIG2).astype(np.complex64),), {"nperseg": 32}),
        ("csd", (SIG, SIG2[:, :80]), {"nperseg": 32}),
        ("csd", (SIG, SIG2), {"nperseg": 32, "average": "median", "nfft": 40}),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (complex input: onesided switched to twosided, in both)
        for name, args, kwargs in cases:
            for o, r in zip(getattr(es, name)(*args, **kwargs), getattr(jss, name)(*args, **kwargs)):
                assert np.asarray(o).dtype == np.asarray(r).dtype, (name, kwargs)
                _close(o, r, f"{name} {kwargs}", rtol=2e-4, atol=1e-6)
    _, _, z = jss.stft(SIG, nperseg=16)
    for kwargs in [{"nperseg": 16}, {"nperseg": 16, "noverlap": 4, "boundary": False}]:
        for o, r in zip(es.istft(np.asarray(z), **kwargs), jss.istft(z, **kwargs)):
            _close(o, r, f"istft {kwargs}", atol=1e-5)
    zt = np.asarray(z).transpose(2, 0, 1)
    for o, r in zip(es.istft(zt, nperseg=16, time_axis=0, freq_axis=-1),
                    jss.istft(zt, nperseg=16, time_axis=0, freq_axis=-1)):
        _close(o, r, "istft axes", atol=1e-5)
    grad = ember.grad(lambda v: es.welch(v, nperseg=32)[1].sum())(SIG)
    _close(grad, jax.grad(lambda v: jss.welch(v, nperseg=32)[1].sum())(SIG), "grad welch", rtol=1e-3, atol=1e-5)
    grad = ember.grad(lambda v: enp.abs(es.stft(v, nperseg=16)[2]).sum())(SIG)
    _close(grad, jax.grad(lambda v: jax.numpy.abs(jss.stft(v, nperseg=16)[2]).sum())(SIG), "grad stft",
           rtol=1e-3, atol=1e-4)
