"""Complex linear algebra (docs/linalg.md, docs/complex.md): ember.numpy.linalg and ember.scipy.linalg on complex64 /
complex128 matrices against numpy/scipy (values) and JAX (values of schur/sqrtm/rsf2csf, derivatives under JAX's
convention), eagerly, under jit and vmap; qr's mode 'raw' (real and complex); the Schur form, rsf2csf and sqrtm, and
their refusal to differentiate (as JAX). The primitives' own complex Cases are in tests/prims/test_linalg_prims.py."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import pytest
import scipy.linalg as sl

import ember
import ember.numpy as enp
from ember import scipy as escipy
from recorded import jax_result

pytestmark = pytest.mark.usefixtures("ember_x64")  # float64 inputs and oracles (numpy, JAX in x64 mode)

RNG = np.random.default_rng(7)


def _crandn(*shape, dtype=np.complex128):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def _close(x, y, tol=1e-10):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=tol, atol=tol)


A = _crandn(2, 4, 4) + 3 * np.eye(4)  # a batch of well-conditioned complex matrices
B = _crandn(2, 4, 2)
HPD = A @ np.conj(np.swapaxes(A, -1, -2)) + 4 * np.eye(4)  # Hermitian positive definite


def _numpy_functions(m, b, h, np_):
    """The factorisation-based functions of numpy.linalg on one complex matrix m, right-hand sides b and a Hermitian
    positive definite h (so that one compiled program checks them all)."""
    la = np_.linalg
    sign, logdet = la.slogdet(m)
    x, resid, _, _ = la.lstsq(m[:, :3], b) if np_ is np else la.lstsq(m[:, :3], b)
    u, s, vh = la.svd(m[:, :3])
    return dict(inv=la.inv(m), solve=la.solve(m, b), det=la.det(m), sign=sign, logdet=logdet, chol=la.cholesky(h),
                chol_upper=la.cholesky(h, upper=True) if np_ is not np else np.conj(la.cholesky(h).T),
                eigvalsh=la.eigvalsh(h), abs_eigh_vectors=np_.abs(la.eigh(h)[1]), eigvals=la.eigvals(m),
                eig_vectors=la.eig(m)[1], svdvals=la.svd(m, compute_uv=False),
                svd_product=(u[:, :3] * s[None, :]) @ vh, hermitian_svd=la.svd(h, hermitian=True)[1] if np_ is not np
                else la.svd(h, compute_uv=False), pinv=la.pinv(m[:, :3]), lstsq=x, resid=resid,
                power=la.matrix_power(m, -2), norm2=la.norm(m, 2), nuc=la.norm(m, "nuc"), fro=la.norm(m),
                cond=la.cond(m), q=la.qr(m[:, :3])[0], r=la.qr(m[:, :3])[1], tensorsolve=la.tensorsolve(m, b[:, 0]))


def test_numpy_linalg_functions_take_complex():
    """Every factorisation-based function of ember.numpy.linalg on complex128 against numpy, in one jitted program;
    complex64 keeps its dtypes (real results in float32)."""
    got = ember.jit(lambda m, b, h: _numpy_functions(m, b, h, enp))(A[0], B[0], HPD[0])
    want = _numpy_functions(A[0], B[0], HPD[0], np)
    for name in want:
        _close(got[name], want[name], tol=1e-9)
    assert np.asarray(got["logdet"]).dtype == np.float64 and np.asarray(got["sign"]).dtype == np.complex128
    assert np.asarray(enp.linalg.eigvalsh(HPD[0].astype(np.complex64))).dtype == np.float32
    _close(enp.linalg.inv(A[0].astype(np.complex64)), np.linalg.inv(A[0]), tol=1e-4)


@pytest.mark.slow
def test_numpy_linalg_functions_take_complex_eagerly_and_in_batches():
    for dtype, tol in ((np.complex128, 1e-9), (np.complex64, 1e-4)):
        got = _numpy_functions(A[1].astype(dtype), B[1].astype(dtype), HPD[1].astype(dtype), enp)
        want = _numpy_functions(A[1], B[1], HPD[1], np)
        for name in want:
            _close(got[name], want[name], tol=tol)
    L = enp.linalg
    _close(L.det(A), np.linalg.det(A))
    _close(L.eigvals(A), np.linalg.eigvals(A))
    _close(L.pinv(HPD, hermitian=True), np.linalg.pinv(HPD))
    _close(L.qr(A[0], "complete").Q, np.linalg.qr(A[0], "complete")[0])
    for ord_ in (-2, 1, np.inf):
        _close(L.norm(A[0], ord_), np.linalg.norm(A[0], ord_))
    assert int(L.matrix_rank(A[0])) == 4


def test_qr_raw_mode():
    """mode 'raw': numpy's (h, tau), h the transposed reflectors, for real and complex, stacked, under jit."""
    real = RNG.standard_normal((5, 3))
    for a in (real, A[0, :, :3], A[0, :3, :]):
        h, tau = enp.linalg.qr(a, mode="raw")
        nh, ntau = np.linalg.qr(a, mode="raw")
        _close(h, nh)
        _close(tau, ntau)
    h, tau = ember.jit(lambda m: enp.linalg.qr(m, mode="raw"))(A)
    assert np.asarray(h).shape == (2, 4, 4) and np.asarray(tau).shape == (2, 4)
    _close(h[1], np.linalg.qr(A[1], mode="raw")[0])
    _close(jax_result(lambda: jnp.linalg.qr(A[1], mode="raw")[1]), tau[1])
    with pytest.raises(ValueError, match="linalg.qr: mode must be 'reduced', 'complete', 'r' or 'raw', got 'x'"):
        enp.linalg.qr(real, mode="x")
    with pytest.raises(NotImplementedError, match="primitive 'geqrf': no derivative rules, as in JAX"):
        ember.grad(lambda m: enp.sum(enp.linalg.qr(m, mode="raw")[1]))(real)


def _loss(m, c1, c2, np_):
    la = np_.linalg
    sign, logdet = la.slogdet(m)
    h = m @ np_.conj(m.T) + 4 * np_.eye(4)
    return (np_.real(np_.sum(la.inv(m) * c1)) + logdet + np_.imag(sign) + np_.abs(la.det(m))
            + np_.real(np_.sum(la.solve(m, c2[:, :1]) * c2[:, 1:])) + np_.sum(np_.abs(la.pinv(m[:, :3])) ** 2)
            + np_.sum(la.svd(m, compute_uv=False)) + np_.sum(la.eigvalsh(h) ** 2)
            + np_.sum(np_.abs(la.cholesky(h) * c1)) + np_.real(np_.sum(la.eigvals(m) ** 2)))


def _vectors(m, np_):
    q, r = np_.linalg.qr(m)
    u, s, vh = np_.linalg.svd(m[:, :3], full_matrices=False)
    return q @ r, r, u @ vh, np_.abs(np_.linalg.eigh(m + np_.conj(m.T))[1])


C1, C2, T = _crandn(4, 4), _crandn(4, 2), _crandn(4, 4)


def test_complex_derivatives_of_linalg_functions_match_jax():
    """grad (JAX's convention: the conjugate of the usual gradient) of one real loss through the complex functions
    against JAX, under jit."""
    expected = jax_result(lambda: jax.jit(jax.grad(lambda m: _loss(m, C1, C2, jnp)))(A[0]))
    _close(ember.jit(ember.grad(lambda m: _loss(m, C1, C2, enp)))(A[0]), expected, tol=1e-9)


@pytest.mark.slow
def test_complex_derivatives_eagerly_and_under_vmap():
    """The same eagerly and under vmap, and a jvp through qr, svd's and eigh's vectors (phase-free expressions)."""
    got = ember.jit(lambda m, t: ember.jvp(lambda m: _vectors(m, enp), (m,), (t,))[1])(A[0], T)
    want = jax_result(lambda: jax.jit(lambda m, t: jax.jvp(lambda m: _vectors(m, jnp), (m,), (t,))[1])(A[0], T))
    for x, y in zip(got, want):
        _close(x, y, tol=1e-9)
    g = ember.grad(lambda m: _loss(m, C1, C2, enp))(A[0])
    _close(g, jax_result(lambda: jax.grad(lambda m: _loss(m, C1, C2, jnp))(A[0])), tol=1e-9)
    gs = ember.vmap(ember.grad(lambda m: _loss(m, C1, C2, enp)))(A)
    _close(gs[1], jax_result(lambda: jax.grad(lambda m: _loss(m, C1, C2, jnp))(A[1])), tol=1e-9)
    got = ember.jvp(lambda m: _vectors(m, enp), (A[1],), (T,))[1]
    for x, y in zip(got, jax_result(lambda: jax.jvp(lambda m: _vectors(m, jnp), (A[1],), (T,))[1])):
        _close(x, y, tol=1e-9)


def _scipy_functions(a, b, h, la):
    """scipy.linalg's solvers and factorisations on a complex a, right-hand sides b and a Hermitian positive definite
    h (la: scipy.linalg or ember.scipy.linalg)."""
    upper = la.lu(a)[2]
    out = {f"triangular_{t}": la.solve_triangular(upper, b, trans=t) for t in (0, 1, 2, "C")}
    out.update({f"lu_solve_{t}": la.lu_solve(la.lu_factor(a), b, trans=t) for t in (0, 1, 2)})
    out.update(cho_upper=la.cho_solve(la.cho_factor(h), b), cho_lower=la.cho_solve(la.cho_factor(h, lower=True), b),
               cholesky=la.cholesky(h), pos=la.solve(h, b, assume_a="pos"), solve=la.solve(a, b),
               eigh=la.eigh(h, eigvals_only=True), svd=la.svd(a, compute_uv=False), det=la.det(a), inv=la.inv(a),
               q=la.qr(a)[0], expm=la.expm(a * 0.3))
    return out


def test_scipy_linalg_takes_complex():
    got = ember.jit(lambda a, b, h: _scipy_functions(a, b, h, escipy.linalg))(A[0], B[0], HPD[0])
    want = _scipy_functions(A[0], B[0], HPD[0], sl)
    for name in want:
        _close(got[name], want[name], tol=1e-9)


def test_schur_rsf2csf_and_sqrtm():
    """schur (real and complex output) and rsf2csf against scipy, sqrtm and funm against JAX and scipy (and sqrtm's
    square) under jit; no derivatives (as JAX); clear errors."""
    S = escipy.linalg
    real = RNG.standard_normal((4, 4))
    well = real + 4 * np.eye(4)  # (no eigenvalue on the negative real axis, where the root's branch is fragile)
    nt, nz = sl.schur(real)

    def program(m, w, t, z):  # (one compiled program)
        return S.schur(m), S.schur(m, output="complex"), S.rsf2csf(t, z), S.sqrtm(w), S.funm(w, enp.sin)
    (t, z), (tc, zc), (ct, cz), root, sine = ember.jit(program)(real, well, nt, nz)
    _close(t, nt)
    _close(z, nz)
    _close(tc, sl.schur(real, output="complex")[0])
    _close(np.asarray(zc) @ np.asarray(tc) @ np.conj(np.asarray(zc).T), real)
    nct, ncz = sl.rsf2csf(nt, nz)
    _close(ct, nct)
    _close(cz, ncz)
    _close(root, jax_result(lambda: jsl.sqrtm(well)))
    _close(root, sl.sqrtm(well))
    _close(np.asarray(root) @ np.asarray(root), well)
    _close(sine, jax_result(lambda: jsl.funm(well, jnp.sin)))
    _close(sine, sl.funm(well, np.sin))
    with pytest.raises(NotImplementedError, match="primitive 'schur': no derivative rules, as in JAX"):
        ember.jvp(S.sqrtm, (real,), (real,))
    with pytest.raises(NotImplementedError, match="primitive 'schur': no derivative rules"):
        ember.grad(lambda m: enp.sum(S.schur(m)[0]))(real)
    with pytest.raises(ValueError, match="scipy.linalg.schur: output must be 'real' or 'complex', got 'x'"):
        S.schur(real, output="x")
    with pytest.raises(ValueError, match=r"scipy.linalg.sqrtm: A must be a 2-D square matrix, got shape \(2, 4, 4\)"):
        S.sqrtm(A)
    with pytest.raises(NotImplementedError, match="blocksize > 1"):
        S.sqrtm(real, blocksize=2)
    with pytest.raises(TypeError, match="schur: operand must be float32, float64, complex64 or complex128, got i32"):
        ember.lax.linalg.schur(np.ones((2, 2), np.int32))


@pytest.mark.slow
def test_schur_rsf2csf_and_sqrtm_more():
    S = escipy.linalg
    real = RNG.standard_normal((4, 4))
    nt, nz = sl.schur(real)
    _close(S.schur(A[0])[0], sl.schur(A[0])[0])
    ts, zs = ember.vmap(S.schur)(A)
    _close(ts[1], sl.schur(A[1])[0])
    t32, _ = S.schur(real.astype(np.float32))
    assert np.asarray(t32).dtype == np.float32
    _close(S.rsf2csf(np.stack([nt, nt]), np.stack([nz, nz]))[0][1], sl.rsf2csf(nt, nz)[0])
    _close(S.sqrtm(A[0]), sl.sqrtm(A[0]))
    _close(S.sqrtm(np.zeros((3, 3))), np.zeros((3, 3)))  # (0 where both sides of the recurrence vanish, as JAX)
    well = real + 4 * np.eye(4)
    root32 = S.sqrtm(well.astype(np.float32))
    assert np.asarray(root32).dtype == np.complex64
    _close(root32, sl.sqrtm(well), tol=1e-4)
    f, err = S.funm(A[0], enp.exp, disp=False)
    jf, jerr = jax_result(lambda: jsl.funm(A[0], jnp.exp, disp=False))
    _close(f, sl.expm(A[0]))
    _close(err, jerr)
    _close(S.funm(np.eye(3), enp.exp), np.e * np.eye(3))  # (repeated eigenvalues: no division by 0)
    with pytest.raises(ValueError, match=r"scipy.linalg.funm: A must be a 2-D square matrix, got shape \(2, 4, 4\)"):
        S.funm(A, enp.exp)


@pytest.mark.slow
def test_complex_fallback_to_xla_ops_without_lapack():
    """cholesky, qr (and geqrf) and eigh of complex matrices through XLA's own ops (docs/linalg.md)."""
    with ember.config.override(use_lapack=False):
        _close(enp.linalg.cholesky(HPD), np.linalg.cholesky(HPD))
        _close(enp.linalg.qr(A)[1], np.linalg.qr(A)[1])
        _close(enp.linalg.qr(A[0], mode="raw")[1], np.linalg.qr(A[0], mode="raw")[1])
        _close(enp.linalg.eigvalsh(HPD), np.linalg.eigvalsh(HPD))
        with pytest.raises(NotImplementedError, match="schur: needs ember's LAPACK kernels, which are not available"):
            escipy.linalg.schur(_crandn(5, 5))  # (a shape compiled nowhere else: programs keep their lowering)


@pytest.mark.slow
def test_complex_derivatives_against_finite_differences():
    """The derivative rules whose default-run Cases compare with JAX only (cholesky, eigh, svd, qr), against central
    finite differences of a real loss of a complex matrix (cotangent dL/da - i dL/db)."""
    c = _crandn(4, 4)

    def loss(m, np_):
        h = m @ np_.conj(m.T) + 4 * np_.eye(4)
        u, s, vh = np_.linalg.svd(m[:, :3], full_matrices=False)
        q, r = np_.linalg.qr(m[:, :3])
        return (np_.sum(np_.abs(np_.linalg.cholesky(h) * c)) + np_.sum(np_.abs(np_.linalg.eigh(h)[1][:, 1:]))
                + np_.real(np_.sum((u @ vh) * c[:, :3])) + np_.sum(s ** 3) + np_.real(np_.sum(q * c[:, :3]))
                + np_.sum(np_.abs(r)))
    a = A[0]
    g = np.asarray(ember.grad(lambda m: loss(m, enp))(a))
    f = ember.jit(lambda m: loss(m, enp))
    eps = 1e-6
    numeric = np.zeros_like(a)
    for index in np.ndindex(a.shape):
        for step, weight in ((1.0, 1.0), (1j, -1j)):
            plus, minus = a.copy(), a.copy()
            plus[index] += eps * step
            minus[index] -= eps * step
            numeric[index] += weight * (float(f(plus)) - float(f(minus))) / (2 * eps)
    np.testing.assert_allclose(g, numeric, rtol=1e-5, atol=1e-6)
