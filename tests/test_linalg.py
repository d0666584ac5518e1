"""Linear algebra (ember/_prims/linalg.py, ember/_numpy/factorizations.py, ember.scipy.linalg) against numpy/scipy
in float64, JAX in float32, JAX and finite differences for derivatives; batching, jit, vmap, grad, jvp; singular,
non-finite and empty inputs; the fallback to XLA's own ops without the LAPACK kernels; the FFI layer."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl

import ember
import ember.numpy as enp
from ember import scipy as escipy
from ember._hlo import ffi as hlo_ffi
from ember._prims import linalg as lax_linalg
from ember._runtime import backends, ffi, lapack
from recorded import jax_result

pytestmark = pytest.mark.usefixtures("ember_x64")  # float64 inputs and oracles (numpy, JAX in x64 mode)

RNG = np.random.default_rng(0)


def _spd(n: int, batch: tuple[int, ...] = (), dtype=np.float64) -> np.ndarray:
    a = RNG.standard_normal(batch + (n, n))
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype)


def _well(m: int, n: int, batch: tuple[int, ...] = (), dtype=np.float64) -> np.ndarray:
    """A well-conditioned matrix (a random one plus a multiple of the identity on its leading square)."""
    a = RNG.standard_normal(batch + (m, n))
    k = min(m, n)
    a[..., range(k), range(k)] += 3.0
    return a.astype(dtype)


def _close(x, y, rtol=1e-10, atol=1e-10):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def _numerical_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        g[i] = (f(x + d) - f(x - d)) / (2 * eps)
    return g


# --- the FFI layer -----------------------------------------------------------------------------------------------
def test_kernels_are_registered_with_the_cpu_plugin():
    names = lapack.provide()
    assert {"ember_lapack_potrf", "ember_lapack_getrf", "ember_lapack_geqrf", "ember_lapack_orgqr",
            "ember_lapack_syevd", "ember_lapack_gesdd", "ember_lapack_trsm"} <= names
    plugin = backends.get_client().plugin
    assert ffi.ffi_extension(plugin) is not None
    assert names <= ffi.registered(plugin)
    assert hlo_ffi.available("ember_lapack_potrf") and not hlo_ffi.available("ember_lapack_nonexistent")


def test_lowering_emits_typed_ffi_custom_calls_with_column_major_layouts():
    text = ember.jit(lambda a: enp.linalg.cholesky(a)).lower(_spd(3, (2,))).as_text()
    assert 'call_target_name = "ember_lapack_potrf"' in text and "api_version = 4 : i32" in text
    assert "operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>]" in text


def test_kernels_see_transposed_and_sliced_operands_in_their_layout():
    """XLA may fold a transpose into a layout: the kernels still get the column-major layout they ask for."""
    a = _well(5, 3, (2,))
    _close(ember.jit(lambda m: enp.linalg.svdvals(enp.swapaxes(m, -1, -2)))(a), np.linalg.svd(a, compute_uv=False))
    _close(ember.jit(lambda m: enp.linalg.qr(m[:, ::-1, :]).R ** 2)(a), np.linalg.qr(a[:, ::-1, :]).R ** 2)
    s = _spd(4, (3,))
    _close(ember.jit(lambda m: enp.linalg.cholesky(enp.transpose(m, (2, 0, 1))))(np.transpose(s, (1, 2, 0))),
           np.linalg.cholesky(s))


def test_adding_a_second_handler_under_a_taken_name_is_refused():
    handlers = lapack.provide()
    name = sorted(handlers)[0]
    with pytest.raises(ValueError, match="already has another handler"):
        ffi.add_handlers({name: 12345})


def test_lax_linalg_namespace():
    import ember.lax.linalg as ember_lax_linalg
    assert set(ember_lax_linalg.__all__) <= set(dir(jax.lax.linalg))
    a = _spd(3)
    _close(ember_lax_linalg.cholesky(a), jax_result(lambda: jax.lax.linalg.cholesky(a)))
    _close(ember_lax_linalg.eigh(a)[1], jax_result(lambda: jax.lax.linalg.eigh(a)[1]))
    assert ember.lax.linalg.svd_p is lax_linalg.svd_p


# --- values against numpy / scipy in float64 ------------------------------------------------------------------
@pytest.mark.parametrize("batch", [(), (3,), pytest.param((2, 2), marks=pytest.mark.slow)])
def test_cholesky_solve_inv_det_float64(batch):
    a = _spd(5, batch)
    b = RNG.standard_normal(batch + (5, 2))
    _close(enp.linalg.cholesky(a), np.linalg.cholesky(a))
    _close(enp.linalg.cholesky(a, upper=True), np.swapaxes(np.linalg.cholesky(a), -1, -2))
    g = _well(5, 5, batch)
    _close(enp.linalg.solve(g, b), np.linalg.solve(g, b))
    _close(enp.linalg.inv(g), np.linalg.inv(g))
    _close(enp.linalg.det(g), np.linalg.det(g))
    sign, logdet = enp.linalg.slogdet(g)
    ns, nl = np.linalg.slogdet(g)
    _close(sign, ns)
    _close(logdet, nl)


def test_solve_vector_and_broadcast_batches():
    a = _well(4, 4, (3,))
    _close(enp.linalg.solve(a[0], np.arange(4.0)), np.linalg.solve(a[0], np.arange(4.0)))
    b = RNG.standard_normal((4, 2))
    _close(enp.linalg.solve(a, b), np.linalg.solve(a, b))
    with pytest.raises(ValueError, match=r"linalg.solve: a of shape \(3, 4, 4\) does not fit b of shape \(3, 4\)"):
        enp.linalg.solve(a, np.ones((3, 4)))  # (as JAX >= 0.5: a stack of vectors is b[..., None])
    _close(enp.linalg.solve(a[:, None], np.ones((2, 4, 1))), np.linalg.solve(a[:, None], np.ones((2, 4, 1))))


@pytest.mark.parametrize("shape", [(6, 4), (4, 6), (5, 5), (2, 6, 3)])
def test_qr_svd_eigh_float64(shape):
    a = _well(*shape[-2:], shape[:-2])
    for mode in ("reduced", "complete"):
        q, r = enp.linalg.qr(a, mode=mode)
        nq, nr = np.linalg.qr(a, mode=mode)
        signs = np.sign(np.diagonal(nr, axis1=-2, axis2=-1)) * np.sign(np.diagonal(np.asarray(r), axis1=-2, axis2=-1))
        k = min(shape[-2:])
        _close(np.asarray(q)[..., :k] * signs[..., None, :], nq[..., :k])
        _close(np.asarray(r)[..., :k, :] * signs[..., :, None], nr[..., :k, :])
        _close(np.asarray(q) @ np.asarray(r), a)
    _close(enp.linalg.qr(a, mode="r"), np.asarray(enp.linalg.qr(a).R))
    for full in (True, False):
        u, s, vh = enp.linalg.svd(a, full_matrices=full)
        _close(s, np.linalg.svd(a, compute_uv=False))
        k = min(shape[-2:])
        _close((np.asarray(u)[..., :k] * np.asarray(s)[..., None, :]) @ np.asarray(vh)[..., :k, :], a)
        assert np.asarray(u).shape == np.linalg.svd(a, full_matrices=full)[0].shape
    _close(enp.linalg.svdvals(a), np.linalg.svd(a, compute_uv=False))
    _close(enp.linalg.pinv(a), np.linalg.pinv(a))
    assert int(np.asarray(enp.linalg.matrix_rank(a)).ravel()[0]) == min(shape[-2:])
    if shape[-1] == shape[-2]:
        s = a + np.swapaxes(a, -1, -2)
        w, v = enp.linalg.eigh(s)
        nw, nv = np.linalg.eigh(s)
        _close(w, nw)
        _close(np.abs(np.sum(np.asarray(v) * nv, axis=-2)), np.ones(nw.shape))  # same vectors up to sign
        _close(enp.linalg.eigvalsh(s), nw)


@pytest.mark.slow  # (2.2 s)
def test_lstsq_norms_cond_matrix_power_tensor_functions():
    a, b = _well(6, 3), RNG.standard_normal(6)
    x, resid, rank, s = enp.linalg.lstsq(a, b)
    nx, nresid, nrank, ns = np.linalg.lstsq(a, b, rcond=None)
    _close(x, nx)
    _close(resid, nresid)
    assert int(rank) == nrank
    _close(s, ns)
    m = _well(4, 4)
    for order in ("nuc", 2, -2, "fro", 1, np.inf):
        _close(enp.linalg.norm(m, order), np.linalg.norm(m, order))
        _close(enp.linalg.matrix_norm(m, ord=order), np.linalg.norm(m, order))
    for p in (None, 2, -2, "fro", 1):
        _close(enp.linalg.cond(m, p), np.linalg.cond(m, p))
    _close(enp.linalg.matrix_power(m, -3), np.linalg.matrix_power(m, -3))
    t = _well(6, 6).reshape(6, 2, 3)
    _close(enp.linalg.tensorsolve(t, np.arange(6.0)), np.linalg.tensorsolve(t, np.arange(6.0)))
    t4 = _well(6, 6).reshape(2, 3, 6)
    _close(enp.linalg.tensorinv(t4, 2), np.linalg.tensorinv(t4, 2))
    chain = [RNG.standard_normal(s) for s in [(3,), (3, 10), (10, 2), (2, 5), (5,)]]
    _close(enp.linalg.multi_dot(chain), np.linalg.multi_dot(chain))


def test_hermitian_svd_tensorsolve_axes_and_rectangular_lu():
    s = _spd(4) - 6 * np.eye(4)  # symmetric, with eigenvalues of both signs
    u, sv, vh = enp.linalg.svd(s, hermitian=True)
    _close(sv, np.linalg.svd(s, compute_uv=False))
    _close((np.asarray(u) * np.asarray(sv)) @ np.asarray(vh), s)
    _close(enp.linalg.svd(s, compute_uv=False, hermitian=True), np.linalg.svd(s, compute_uv=False))
    t = np.moveaxis(_well(6, 6).reshape(2, 3, 6), 2, 0)  # (6, 2, 3): axes=(0,) moves the 6 to the end
    b = RNG.standard_normal((2, 3))
    _close(enp.linalg.tensorsolve(t, b, axes=(0,)), np.linalg.tensorsolve(t, b, axes=(0,)))
    for shape in ((5, 3), (3, 5)):
        a = RNG.standard_normal(shape)
        for ours, theirs in zip(escipy.linalg.lu(a), sl.lu(a)):
            _close(ours, theirs)
        pl, up = escipy.linalg.lu(a, permute_l=True)
        _close(np.asarray(pl) @ np.asarray(up), a)
        q, r = escipy.linalg.qr(a, mode="economic")
        _close(np.asarray(q) @ np.asarray(r), a)
        assert np.asarray(q).shape == sl.qr(a, mode="economic")[0].shape


def test_eig_and_eigvals():
    a = RNG.standard_normal((3, 5, 5))
    w, v = enp.linalg.eig(a)
    nw, nv = np.linalg.eig(a)
    _close(w, nw)
    _close(v, nv)
    _close(enp.linalg.eigvals(a), np.linalg.eigvals(a))
    assert np.asarray(w).dtype == np.complex128
    assert np.asarray(enp.linalg.eigvals(a.astype(np.float32))).dtype == np.complex64
    vl = lax_linalg.eig(a, True, False)[1]
    _close(vl, np.stack([sl.eig(m, left=True, right=False)[1] for m in a]))
    ct = RNG.standard_normal(5)

    def loss(m):
        return enp.sum(enp.real(enp.linalg.eigvals(m)) * ct + enp.imag(enp.linalg.eigvals(m)) ** 2)

    def jloss(m):
        return jnp.sum(jnp.real(jnp.linalg.eigvals(m)) * ct + jnp.imag(jnp.linalg.eigvals(m)) ** 2)
    g = ember.grad(loss)(a[0])
    _close(g, jax_result(lambda: _numerical_grad(lambda m: float(jloss(m)), a[0])), rtol=1e-6, atol=1e-7)
    # (JAX's own is 1e-7 off the finite differences)
    _close(g, jax_result(lambda: jax.grad(jloss)(a[0])), rtol=1e-5, atol=1e-6)
    _close(ember.vmap(ember.grad(loss))(a), np.stack([np.asarray(ember.grad(loss)(m)) for m in a]))
    with pytest.raises(NotImplementedError, match="eig: derivatives of the eigenvectors .* enable_eigvec_derivs"):
        ember.grad(lambda m: enp.sum(enp.real(enp.linalg.eig(m)[1])))(a[0])
    with pytest.raises(NotImplementedError, match="eig: derivatives of the eigenvectors .* enable_eigvec_derivs"):
        ember.hessian(loss)(a[0])  # (as JAX: the eigenvalues' rule needs the eigenvectors' derivatives)
    assert np.isnan(np.asarray(enp.linalg.eigvals(np.array([[1.0, np.inf], [0.0, 1.0]])))).all()


def test_complex_lu_and_triangular_solve():
    """lu and triangular_solve take complex matrices (their kernels' complex rows; eig's derivative uses them)."""
    a = RNG.standard_normal((2, 4, 4)) + 1j * RNG.standard_normal((2, 4, 4))
    b = RNG.standard_normal((2, 4, 3)) + 1j * RNG.standard_normal((2, 4, 3))
    for dtype in (np.complex128, np.complex64):
        lu, _, perm = [np.asarray(t) for t in lax_linalg.lu(a.astype(dtype))]
        low = np.tril(lu, -1) + np.eye(4)
        tol = 1e-12 if dtype == np.complex128 else 1e-5
        _close(np.take_along_axis(a, perm[..., None], 1), low @ np.triu(lu), rtol=tol, atol=tol)
        x = lax_linalg.triangular_solve(a.astype(dtype), b.astype(dtype), left_side=True, lower=True,
                                        transpose_a=True)
        assert np.asarray(x).dtype == dtype
        _close(np.swapaxes(np.tril(a), -1, -2) @ np.asarray(x), b, rtol=tol * 10, atol=tol * 10)


# --- float32 against JAX -----------------------------------------------------------------------------------------
def test_float32_against_jax():
    a = _well(5, 5, (2,), np.float32)
    spd = _spd(5, (2,), np.float32)
    b = RNG.standard_normal((2, 5, 3)).astype(np.float32)
    pairs = [(enp.linalg.cholesky(spd), jax_result(lambda: jnp.linalg.cholesky(spd))),
             (enp.linalg.solve(a, b), jax_result(lambda: jnp.linalg.solve(a, b))),
             (enp.linalg.inv(a), jax_result(lambda: jnp.linalg.inv(a))),
             (enp.linalg.det(a), jax_result(lambda: jnp.linalg.det(a))),
             (enp.linalg.svdvals(a), jax_result(lambda: jnp.linalg.svd(a, compute_uv=False))),
             (enp.linalg.eigvalsh(spd), jax_result(lambda: jnp.linalg.eigvalsh(spd))),
             (enp.linalg.pinv(a), jax_result(lambda: jnp.linalg.pinv(a)))]
    for ours, theirs in pairs:
        assert np.asarray(ours).dtype == np.float32
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=2e-4, atol=2e-4)


# --- derivatives against JAX and finite differences ------------------------------------------------------------
def _sym_rand(n):
    x = RNG.standard_normal((n, n))
    return x


GRAD_CASES = [
    ("cholesky", lambda m: enp.linalg.cholesky(m), lambda m: jnp.linalg.cholesky(m), lambda: _spd(4)),
    ("solve", lambda m: enp.linalg.solve(m, np.arange(4.0)), lambda m: jnp.linalg.solve(m, jnp.arange(4.0)),
     lambda: _well(4, 4)),
    ("inv", lambda m: enp.linalg.inv(m), lambda m: jnp.linalg.inv(m), lambda: _well(4, 4)),
    ("det", lambda m: enp.linalg.det(m), lambda m: jnp.linalg.det(m), lambda: _well(4, 4)),
    ("slogdet", lambda m: enp.linalg.slogdet(m)[1], lambda m: jnp.linalg.slogdet(m)[1], lambda: _well(4, 4)),
    ("qr", lambda m: enp.linalg.qr(m)[0] * 2 + enp.linalg.qr(m)[1], lambda m: jnp.linalg.qr(m)[0] * 2 +
     jnp.linalg.qr(m)[1], lambda: _well(4, 4)),
    ("qr_tall", lambda m: enp.linalg.qr(m)[0].sum() + enp.linalg.qr(m)[1] ** 2,
     lambda m: jnp.linalg.qr(m)[0].sum() + jnp.linalg.qr(m)[1] ** 2, lambda: _well(5, 3)),
    ("eigh", lambda m: enp.linalg.eigh(m)[0] + enp.abs(enp.linalg.eigh(m)[1]).sum(0),
     lambda m: jnp.linalg.eigh(m)[0] + jnp.abs(jnp.linalg.eigh(m)[1]).sum(0), lambda: _sym_rand(4)),
    ("svdvals", lambda m: enp.linalg.svdvals(m), lambda m: jnp.linalg.svd(m, compute_uv=False),
     lambda: _well(4, 3)),
    ("svd", lambda m: enp.abs(enp.linalg.svd(m, full_matrices=False)[0]).sum() +
     enp.abs(enp.linalg.svd(m, full_matrices=False)[2]).sum() + enp.linalg.svd(m, full_matrices=False)[1].sum(),
     lambda m: jnp.abs(jnp.linalg.svd(m, full_matrices=False)[0]).sum() +
     jnp.abs(jnp.linalg.svd(m, full_matrices=False)[2]).sum() + jnp.linalg.svd(m, full_matrices=False)[1].sum(),
     lambda: _well(5, 3)),
    ("svd_wide", lambda m: enp.abs(enp.linalg.svd(m, full_matrices=False)[0]).sum() +
     enp.abs(enp.linalg.svd(m, full_matrices=False)[2]).sum(),
     lambda m: jnp.abs(jnp.linalg.svd(m, full_matrices=False)[0]).sum() +
     jnp.abs(jnp.linalg.svd(m, full_matrices=False)[2]).sum(), lambda: _well(3, 5)),
    ("triangular_solve", lambda m: escipy.linalg.solve_triangular(m, np.ones((4, 2)), lower=True, trans=1),
     lambda m: jax.scipy.linalg.solve_triangular(m, jnp.ones((4, 2)), lower=True, trans=1), lambda: _well(4, 4)),
    ("lu", lambda m: escipy.linalg.lu_factor(m)[0], lambda m: jax.scipy.linalg.lu_factor(m)[0],
     lambda: _well(4, 4)),
]


# The factorisations' own rules are checked against JAX and finite differences by the primitive harness
# (tests/prims/test_linalg_prims.py): here, by default, the functions built on them (and the wide/tall variants).
_PRIMITIVE_GRADS = {"cholesky", "qr", "eigh", "svdvals", "svd", "triangular_solve"}


@pytest.mark.parametrize("name,f,jf,make", [pytest.param(*c, id=c[0], marks=pytest.mark.slow if c[0] in
                                                         _PRIMITIVE_GRADS else ()) for c in GRAD_CASES])
def test_gradients_against_jax_and_finite_differences(name, f, jf, make):
    x = make()
    ct = RNG.standard_normal(np.shape(jax_result(lambda: jf(x))))

    def loss(m):
        return enp.sum(f(m) * ct)

    def jloss(m):
        return jnp.sum(jf(m) * ct)
    g = np.asarray(ember.grad(loss)(x))
    jg = np.asarray(jax_result(lambda: jax.grad(jloss)(x)))
    _close(g, jg, rtol=1e-7, atol=1e-8)
    _close(g, jax_result(lambda: _numerical_grad(lambda m: float(jloss(m)), x)), rtol=1e-5, atol=1e-6)
    t = RNG.standard_normal(x.shape)
    _, tangent = ember.jvp(loss, (x,), (t,))
    _, jtangent = jax_result(lambda: jax.jvp(jloss, (x,), (t,)))
    _close(tangent, jtangent, rtol=1e-7, atol=1e-8)
    _close(ember.jit(ember.grad(loss))(x), jg, rtol=1e-7, atol=1e-8)


def test_det_gradient_at_singular_matrices_is_the_adjugate():
    rank2 = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.5]])
    for m in (np.array([[1.0, 2.0], [2.0, 4.0]]), np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]),
              rank2, np.zeros((3, 3)), np.array([[3.0]])):
        _close(ember.grad(enp.linalg.det)(m), jax_result(lambda: jax.grad(jnp.linalg.det)(m)), rtol=1e-9, atol=1e-9)
        t = RNG.standard_normal(m.shape)
        _close(ember.jvp(enp.linalg.det, (m,), (t,))[1], jax_result(lambda: jax.jvp(jnp.linalg.det, (m,), (t,))[1]),
               rtol=1e-9, atol=1e-9)
    batch = np.stack([rank2, np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])])
    _close(ember.vmap(ember.grad(enp.linalg.det))(batch), jax_result(lambda: jax.vmap(jax.grad(jnp.linalg.det))(batch)),
           rtol=1e-9, atol=1e-9)


def test_second_derivative_of_slogdet_and_cholesky():
    x = _spd(3)
    h = ember.hessian(lambda m: enp.linalg.slogdet(m)[1])(x)
    jh = jax_result(lambda: jax.hessian(lambda m: jnp.linalg.slogdet(m)[1])(x))
    _close(h, jh, rtol=1e-7, atol=1e-8)
    h = ember.hessian(lambda m: enp.sum(enp.linalg.cholesky(m)))(x)
    jh = jax_result(lambda: jax.hessian(lambda m: jnp.sum(jnp.linalg.cholesky(m)))(x))
    _close(h, jh, rtol=1e-7, atol=1e-8)


def test_not_differentiable_paths_raise_clearly():
    with pytest.raises(NotImplementedError, match="qr: derivatives need m >= n"):
        ember.grad(lambda m: enp.sum(enp.linalg.qr(m)[1]))(_well(3, 5))
    with pytest.raises(NotImplementedError, match="svd: derivatives of full_matrices=True"):
        ember.grad(lambda m: enp.sum(enp.linalg.svd(m)[0]))(_well(5, 3))
    with pytest.raises(NotImplementedError, match="lu: derivatives need a square matrix"):
        ember.grad(lambda m: enp.sum(escipy.linalg.lu_factor(m)[0]))(_well(5, 3))
    # the integer outputs of lu carry no tangent
    _, t = ember.jvp(lambda m: lax_linalg.lu(m)[2], (_well(3, 3),), (np.ones((3, 3)),))
    assert not np.asarray(t).any()


# --- batching, vmap, jit --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,f", [
    ("cholesky", lambda m: enp.linalg.cholesky(m @ m.T + 4 * enp.eye(4))),
    ("solve", lambda m: enp.linalg.solve(m, enp.ones((4, 2)))),
    ("qr", lambda m: enp.linalg.qr(m)[1]),
    ("eigh", lambda m: enp.linalg.eigvalsh(m + m.T)),
    ("svd", lambda m: enp.linalg.svdvals(m)),
    ("lu", lambda m: escipy.linalg.lu_factor(m)[0]),
    ("triangular", lambda m: escipy.linalg.solve_triangular(m, enp.ones(4), lower=True)),
])
def test_vmap_matches_per_member(name, f):
    xs = _well(4, 4, (3,))
    for axis in (0, 2):
        moved = np.moveaxis(xs, 0, axis)
        out = np.asarray(ember.vmap(f, in_axes=axis)(moved))
        _close(out, np.stack([np.asarray(f(x)) for x in xs]))
    # vmap of grad
    g = np.asarray(ember.vmap(ember.grad(lambda m: enp.sum(f(m))))(xs))
    _close(g, np.stack([np.asarray(ember.grad(lambda m: enp.sum(f(m)))(x)) for x in xs]), rtol=1e-8, atol=1e-9)


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_batched_triangular_solve_with_unbatched_matrix(left_side, axis):
    """b's batch joins its columns (left) or rows (right): one solve with a, no copy of a per member."""
    a = np.tril(_well(4, 4, (2,)))
    bs = RNG.standard_normal((5, 2, 4, 3) if left_side else (5, 2, 3, 4))
    f = ember.vmap(lambda b: lax_linalg.triangular_solve(a, b, left_side=left_side, lower=True, transpose_a=True),
                   in_axes=axis)
    out = f(np.moveaxis(bs, 0, axis))
    expected = [np.linalg.solve(np.swapaxes(a, -1, -2), b) if left_side else
                np.swapaxes(np.linalg.solve(a, np.swapaxes(b, -1, -2)), -1, -2) for b in bs]
    _close(out, np.stack(expected))
    text = ember.jit(f).lower(np.moveaxis(bs, 0, axis)).as_text()
    assert "tensor<2x4x4xf64>" in text and "tensor<5x2x4x4xf64>" not in text


# --- singular, non-finite, empty, bad input --------------------------------------------------------------------
def test_not_positive_definite_cholesky_gives_nans_under_jit():
    out = np.asarray(ember.jit(enp.linalg.cholesky)(-_spd(3, (2,))))
    negative = -_spd(3, (2,))
    expected = np.asarray(jax_result(lambda: jnp.linalg.cholesky(negative)))  # NaN in the lower triangle, zeros above
    np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
    np.testing.assert_array_equal(np.nan_to_num(out), np.nan_to_num(expected))


def test_singular_and_non_finite_inputs_match_jax():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    assert float(enp.linalg.det(singular)) == float(jax_result(lambda: jnp.linalg.det(singular))) == 0.0
    sign, logdet = enp.linalg.slogdet(singular)
    assert float(sign) == 0.0 and float(logdet) == -np.inf
    assert not np.isfinite(np.asarray(enp.linalg.inv(singular))).all()
    bad = np.array([[1.0, np.nan], [0.0, 1.0]])
    assert np.isnan(np.asarray(enp.linalg.svdvals(bad))).all()
    assert np.isnan(np.asarray(enp.linalg.eigvalsh(bad))).all()
    assert np.isnan(np.asarray(enp.linalg.svd(np.full((2, 3), np.inf))[0])).all()


def test_empty_inputs():
    e = np.zeros((0, 0))
    assert np.asarray(enp.linalg.cholesky(e)).shape == (0, 0)
    assert float(enp.linalg.det(e)) == 1.0
    assert np.asarray(enp.linalg.inv(e)).shape == (0, 0)
    assert np.asarray(enp.linalg.svdvals(np.zeros((3, 0)))).shape == (0,)
    u, s, vh = enp.linalg.svd(np.zeros((2, 0)))
    _close(u, np.eye(2))
    assert np.asarray(enp.linalg.eigvalsh(e)).shape == (0,)
    assert np.asarray(enp.linalg.qr(np.zeros((0, 3)))[1]).shape == (0, 3)
    assert np.asarray(enp.linalg.solve(np.zeros((2, 0, 0)), np.zeros((2, 0, 1)))).shape == (2, 0, 1)


def test_bad_input_raises_clearly():
    with pytest.raises(ValueError, match=r"linalg.cholesky: a must be a \(stack of\) square matrices.*\(2, 3\)"):
        enp.linalg.cholesky(np.ones((2, 3)))
    with pytest.raises(ValueError, match="linalg.svd: a must have at least 2 dimensions"):
        enp.linalg.svd(np.ones(3))
    with pytest.raises(TypeError, match="needs float32, float64, complex64 or complex128 inputs, got f16"):
        enp.linalg.inv(np.ones((2, 2), np.float16))
    with pytest.raises(TypeError, match="triangular_solve: a .* does not fit b"):
        lax_linalg.triangular_solve(np.eye(3), np.ones((2, 2)), left_side=True)
    with pytest.raises(TypeError, match="eigh: operand must be float32, float64, complex64 or complex128, got i32"):
        lax_linalg.eigh_p.bind(np.ones((2, 2), np.int32), lower=True)


def test_integer_inputs_become_float():
    out = enp.linalg.inv(np.array([[2, 0], [0, 4]], np.int32))
    assert np.asarray(out).dtype == np.float32
    _close(out, [[0.5, 0], [0, 0.25]])


# --- the fallback without LAPACK kernels ------------------------------------------------------------------------
def test_fallback_to_xla_ops_without_lapack():
    a, b = _spd(4, (2,)), RNG.standard_normal((2, 4, 3))
    with ember.config.override(use_lapack=False):
        assert not hlo_ffi.available("ember_lapack_potrf")
        text = ember.jit(lambda m: enp.linalg.cholesky(m) + 1.0).lower(a).as_text()
        assert "stablehlo.cholesky" in text and "custom_call" not in text
        _close(ember.jit(lambda m: enp.linalg.cholesky(m) * 1.0)(a), np.linalg.cholesky(a))
        failed = np.asarray(ember.jit(lambda m: enp.linalg.cholesky(m) * 1.0)(-a))
        np.testing.assert_array_equal(np.isnan(failed), np.tril(np.ones((2, 4, 4), bool)))
        x = ember.jit(lambda m, v: escipy.linalg.solve_triangular(m, v, lower=True) * 1.0)(np.tril(a), b)
        _close(x, np.stack([sl.solve_triangular(np.tril(a[i]), b[i], lower=True) for i in range(2)]))
        with pytest.raises(NotImplementedError, match="svd: needs ember's LAPACK kernels, which are not available: "
                                                      "ember.config.use_lapack is off.*pip install scipy"):
            ember.jit(lambda m: enp.linalg.svdvals(m) * 1.0)(a)
        # qr and eigh: the plugin's Qr / ProductOfElementaryHouseholderReflectors and Eigh custom calls
        for shape in ((2, 5, 3), (3, 5), (4, 4), (3, 0), (0, 3)):
            m = _well(*shape[-2:], shape[:-2])
            for mode in ("reduced", "complete"):
                text = ember.jit(lambda x: enp.linalg.qr(x, mode=mode).Q * 1.0).lower(m).as_text()
                assert "ember_lapack" not in text
                q, r = ember.jit(lambda x: [t * 1.0 for t in enp.linalg.qr(x, mode=mode)])(m)
                nq, nr = np.linalg.qr(m, mode=mode)
                _close(q, nq)
                _close(r, nr)
        s = a + np.swapaxes(a, -1, -2)
        text = ember.jit(lambda x: enp.linalg.eigh(x).eigenvalues * 1.0).lower(s).as_text()
        assert '"Eigh"' in text and "ember_lapack" not in text
        w, v = ember.jit(lambda x: [t * 1.0 for t in enp.linalg.eigh(x)])(s)
        _close(w, np.linalg.eigvalsh(s), rtol=1e-12)
        _close(np.asarray(v) @ (np.asarray(w)[..., None] * np.swapaxes(v, -1, -2)), s, rtol=1e-7, atol=1e-7)
        assert np.asarray(ember.jit(lambda x: enp.linalg.eigvalsh(x) * 1.0)(np.zeros((0, 0)))).shape == (0,)
    assert hlo_ffi.available("ember_lapack_potrf")


def test_without_scipy_the_errors_say_what_to_install(monkeypatch):
    monkeypatch.setattr(lapack, "_loaded", frozenset())
    monkeypatch.setattr(lapack, "missing", "scipy is not installed (pip install scipy)")
    hlo_ffi.set_provider(lapack.PREFIX, lapack.provide, lapack.reason)
    try:
        with pytest.raises(NotImplementedError, match="lu: needs ember's LAPACK kernels, which are not "
                                                      "available: scipy is not installed"):
            ember.jit(lambda m: enp.linalg.solve(m, np.ones(3)) + 2.0)(_spd(3))
        spd = _spd(3)
        _close(ember.jit(lambda m: enp.linalg.cholesky(m) + 2.0)(spd), np.linalg.cholesky(spd) + 2.0)
    finally:
        monkeypatch.undo()
        hlo_ffi.set_provider(lapack.PREFIX, lapack.provide, lapack.reason)
    assert hlo_ffi.available("ember_lapack_getrf")


# --- ember.scipy.linalg -------------------------------------------------------------------------------------------
def test_scipy_linalg_against_scipy():
    a, b = _well(5, 5), RNG.standard_normal((5, 2))
    spd = _spd(5)
    for lower in (True, False):
        for trans in (0, 1, "T"):
            for unit in (False, True):
                _close(escipy.linalg.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit),
                       sl.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit))
    c = escipy.linalg.cho_factor(spd)
    _close(escipy.linalg.cho_solve(c, b), sl.cho_solve(sl.cho_factor(spd), b))
    _close(escipy.linalg.cholesky(spd), sl.cholesky(spd))
    p, low, up = escipy.linalg.lu(a)
    sp, slow, sup = sl.lu(a)
    _close(p, sp)
    _close(low, slow)
    _close(up, sup)
    lu_piv = escipy.linalg.lu_factor(a)
    slu, spiv = sl.lu_factor(a)
    _close(lu_piv[0], slu)
    np.testing.assert_array_equal(np.asarray(lu_piv[1]), spiv)
    for trans in (0, 1):
        _close(escipy.linalg.lu_solve(lu_piv, b, trans=trans), sl.lu_solve((slu, spiv), b, trans=trans))
    _close(escipy.linalg.solve(a, b), sl.solve(a, b))
    _close(escipy.linalg.solve(spd, b, assume_a="pos"), sl.solve(spd, b, assume_a="pos"))
    _close(escipy.linalg.inv(a), sl.inv(a))
    _close(escipy.linalg.det(a), sl.det(a))
    _close(np.abs(np.asarray(escipy.linalg.qr(a)[1])), np.abs(sl.qr(a)[1]))
    _close(escipy.linalg.eigh(spd, eigvals_only=True), sl.eigh(spd, eigvals_only=True))
    _close(escipy.linalg.svd(a, compute_uv=False), sl.svd(a, compute_uv=False))
    _close(escipy.linalg.block_diag(np.ones((2, 2)), 2 * np.ones((1, 3)), 3.0),
           sl.block_diag(np.ones((2, 2)), 2 * np.ones((1, 3)), 3.0))
    _close(escipy.linalg.toeplitz([1.0, 2, 3], [1.0, 4, 5, 6]), sl.toeplitz([1.0, 2, 3], [1.0, 4, 5, 6]))
    _close(escipy.linalg.toeplitz([1.0, 2, 3]), sl.toeplitz([1.0, 2, 3]))
    for scale in (0.01, 1.0, 30.0):
        m = RNG.standard_normal((4, 4)) * scale / 4
        _close(escipy.linalg.expm(m), sl.expm(m), rtol=1e-9, atol=1e-12)
    _close(escipy.linalg.expm(np.stack([a * 0.1, a * 0.2])), np.stack([sl.expm(a * 0.1), sl.expm(a * 0.2)]),
           rtol=1e-9)


def test_scipy_linalg_special_matrices_and_polar():
    c, r = np.array([1.0, 2.0, 3.0]), np.array([3.0, 5.0, 6.0, 7.0])
    _close(escipy.linalg.hankel(c, r), sl.hankel(c, r))
    _close(escipy.linalg.hankel(c), sl.hankel(c))
    _close(escipy.linalg.circulant(c), sl.circulant(c))
    poly = np.array([2.0, -3.0, 1.0, 5.0])
    _close(escipy.linalg.companion(poly), sl.companion(poly))
    f, surv = np.array([0.1, 2.0, 1.0]), np.array([0.2, 0.8])
    _close(escipy.linalg.leslie(f, surv), sl.leslie(f, surv))
    _close(escipy.linalg.fiedler(c), sl.fiedler(c))
    with ember.config.override(enable_x64=True):
        _close(escipy.linalg.hilbert(4), sl.hilbert(4))
        for full in (False, True):
            _close(escipy.linalg.helmert(5, full=full), sl.helmert(5, full=full))
    a = _well(5, 3)
    for side in ("right", "left"):
        u, p = escipy.linalg.polar(a, side=side)
        su, sp = sl.polar(a, side=side)
        _close(u, su)
        _close(p, sp)
    m, e = RNG.standard_normal((3, 3)), RNG.standard_normal((3, 3))
    ours = escipy.linalg.expm_frechet(m, e)
    theirs = sl.expm_frechet(m, e)
    _close(ours[0], theirs[0], rtol=1e-9)
    _close(ours[1], theirs[1], rtol=1e-9)
    _close(escipy.linalg.expm_frechet(m, e, compute_expm=False), theirs[1], rtol=1e-9)


def test_expm_gradient_against_jax():
    m = RNG.standard_normal((3, 3)) * 0.5
    ct = RNG.standard_normal((3, 3))
    g = ember.grad(lambda x: enp.sum(escipy.linalg.expm(x) * ct))(m)
    jg = jax_result(lambda: jax.grad(lambda x: jnp.sum(jax.scipy.linalg.expm(x) * ct))(m))
    _close(g, jg, rtol=1e-7, atol=1e-9)


def test_norms_of_complex_arrays_match_numpy():
    """vector and matrix norms of complex input take |z| (their dtype is the real one), as numpy's."""
    rng = np.random.default_rng(3)
    z = (rng.standard_normal(5) + 1j * rng.standard_normal(5)).astype(np.complex128)
    m = (rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))).astype(np.complex128)
    for ord_ in (None, 1, 2, np.inf, -np.inf, 0, 3):
        got = enp.linalg.norm(z, ord_)
        np.testing.assert_allclose(np.asarray(got), np.linalg.norm(z, ord_), rtol=1e-6)
        assert np.asarray(got).dtype.kind == "f"
    for ord_ in ("fro", 1, -1, np.inf, -np.inf):
        np.testing.assert_allclose(np.asarray(enp.linalg.norm(m, ord_)), np.linalg.norm(m, ord_), rtol=1e-6)
