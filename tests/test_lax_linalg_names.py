"""jax.lax.linalg's names in ember.lax.linalg beyond the factorisations of tests/prims/test_linalg_prims.py: the enums
(EigImplementation, EighImplementation, SvdAlgorithm) and the keywords of eig, eigh and svd that take them; the
LAPACK building blocks (hessenberg, householder_product, ormqr, tridiagonal, tridiagonal_solve) in the identities
they exist for; lu_pivots_to_permutation, symmetric_product, cholesky_update; and qdwh. Against JAX 0.10.2 (values,
dtypes, iteration counts, error types; recorded), scipy and numpy, eagerly, under jit and vmap; bad input raises
JAX's exception type with a message naming the function and the shapes."""
from __future__ import annotations

import inspect

import jax
import jax.lax.linalg as J
import numpy as np
import pytest
import scipy.linalg as sl

import ember
import ember.numpy as enp
from ember.lax import linalg as L
from recorded import jax_result

pytestmark = pytest.mark.usefixtures("ember_x64")  # (float64 values, as JAX's x64 mode in the tests)

RNG = np.random.default_rng(2026)


@pytest.fixture(autouse=True)
def _reseed():
    """Each test's inputs from a fresh generator (the recorded JAX results are keyed by their inputs)."""
    global RNG
    RNG = np.random.default_rng(2026)


def _close(x, y, rtol=1e-12, atol=1e-12):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


def _normal(*shape, dtype=np.float64):
    x = RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


# ---- the names ---------------------------------------------------------------------------------------------------
def test_every_name_of_jax_lax_linalg():
    jax_names = {n for n in dir(J) if not n.startswith("_")}
    assert jax_names <= set(L.__all__), sorted(jax_names - set(L.__all__))
    assert set(L.__all__) <= jax_names


@pytest.mark.parametrize("name", ["EigImplementation", "EighImplementation", "SvdAlgorithm"])
def test_enums_are_jaxs(name):
    ours, theirs = getattr(L, name), getattr(J, name)
    assert [(m.name, m.value) for m in ours] == [(m.name, m.value) for m in theirs]


@pytest.mark.parametrize("name", ["cholesky", "cholesky_update", "eig", "eigh", "hessenberg", "householder_product",
                                  "lu", "lu_pivots_to_permutation", "ormqr", "qdwh", "qr", "schur", "svd",
                                  "symmetric_product", "triangular_solve", "tridiagonal", "tridiagonal_solve"])
def test_keywords_are_jaxs(name):
    """Each function takes JAX's parameter names (JAX makes most of them keyword-only; ember also takes them in
    that order positionally)."""
    ours = inspect.signature(getattr(L, name)).parameters
    theirs = inspect.signature(getattr(J, name)).parameters
    assert list(theirs) == [p for p in ours if p in theirs], (list(ours), list(theirs))
    for p, param in theirs.items():
        assert ours[p].default == param.default, p


# ---- errors, as JAX's --------------------------------------------------------------------------------------------
def _error_type(fn):
    try:
        fn()
    except Exception as err:  # noqa: BLE001 - the type is the result
        return type(err).__name__
    return None


M3, V3 = np.eye(3), np.ones(3)
ERRORS = [  # (label, call with module L or J, ember's message)
    ("hessenberg non-square", lambda m: m.hessenberg(np.ones((3, 4))), r"hessenberg: operand must be a square"),
    ("hessenberg vector", lambda m: m.hessenberg(V3), r"hessenberg: operand must have at least 2 dimensions"),
    ("hessenberg int", lambda m: m.hessenberg(np.eye(3, dtype=np.int32)), r"hessenberg: operand must be float32"),
    ("householder_product wide", lambda m: m.householder_product(np.ones((3, 4)), np.ones(2)),
     r"householder_product: a must have at least as many rows as columns, got f64\[3,4\]"),
    ("householder_product long taus", lambda m: m.householder_product(np.ones((4, 3)), np.ones(4)),
     r"householder_product: taus must not have more entries \(4\)"),
    ("householder_product dtypes", lambda m: m.householder_product(np.ones((4, 3)), np.ones(3, np.float32)),
     r"householder_product: the operands must have one dtype, got a f64\[4,3\], taus f32\[3\]"),
    ("householder_product batch", lambda m: m.householder_product(np.ones((2, 4, 3)), np.ones(3)),
     r"householder_product: the operands must have the same batch dimensions"),
    ("ormqr left rows", lambda m: m.ormqr(np.ones((4, 3)), np.ones(3), np.ones((3, 3))),
     r"ormqr: with left=True c must have as many rows as the Householder matrix a, got a f64\[4,3\] and c "
     r"f64\[3,3\]"),
    ("ormqr right columns", lambda m: m.ormqr(np.ones((4, 3)), np.ones(3), np.ones((3, 3)), left=False),
     r"ormqr: with left=False c must have as many columns"),
    ("lu_pivots_to_permutation size", lambda m: m.lu_pivots_to_permutation(np.zeros(3, np.int32), 2),
     r"lu_pivots_to_permutation: permutation_size \(2\) must be at least the number of pivots"),
    ("lu_pivots_to_permutation int64", lambda m: m.lu_pivots_to_permutation(np.zeros(3, np.int64), 5),
     r"lu_pivots_to_permutation: pivots must be int32, got i64\[3\]"),
    ("symmetric_product shapes", lambda m: m.symmetric_product(np.ones((3, 2)), np.ones((2, 2))),
     r"symmetric_product: expects a_matrix \(m, n\) and a square c_matrix \(m, m\), got f64\[3,2\] and f64\[2,2\]"),
    ("symmetric_product complex", lambda m: m.symmetric_product(np.ones((3, 2), complex), np.ones((3, 3), complex)),
     r"symmetric_product: a_matrix must be float32 or float64, got c128\[3,2\]"),
    ("tridiagonal empty", lambda m: m.tridiagonal(np.ones((0, 0))), r"tridiagonal: the input must be a non-empty"),
    ("tridiagonal non-square", lambda m: m.tridiagonal(np.ones((2, 3))), r"tridiagonal: operand must be a square"),
    ("tridiagonal_solve diagonals", lambda m: m.tridiagonal_solve(V3, V3, V3[:2], np.ones((3, 1))),
     r"tridiagonal_solve: the diagonals dl, d and du must have the same shape, got f64\[3\], f64\[3\] and f64\[2\]"),
    ("tridiagonal_solve b", lambda m: m.tridiagonal_solve(V3, V3, V3, np.ones((4, 1))),
     r"tridiagonal_solve: b's leading dimensions \(all but its last\) must be the diagonals' shape"),
    ("tridiagonal_solve vector b", lambda m: m.tridiagonal_solve(V3, V3, V3, V3),
     r"tridiagonal_solve: b must have at least 2 dimensions"),
    ("tridiagonal_solve dtypes", lambda m: m.tridiagonal_solve(V3.astype(np.float32), V3, V3, np.ones((3, 1))),
     r"tridiagonal_solve: the operands must have one dtype"),
    ("tridiagonal_solve int", lambda m: m.tridiagonal_solve(*[np.ones(3, np.int32)] * 3, np.ones((3, 1), np.int32)),
     r"tridiagonal_solve: dl must be float32"),
    ("cholesky_update sizes", lambda m: m.cholesky_update(M3, np.ones(2)),
     r"cholesky_update: takes a square matrix and a vector of its size, got f64\[3,3\] and f64\[2\]"),
    ("cholesky_update complex", lambda m: m.cholesky_update(M3.astype(complex), V3.astype(complex)),
     r"cholesky_update: r_matrix must be float32 or float64"),
    ("cholesky_update dtypes", lambda m: m.cholesky_update(M3.astype(np.float32), V3),
     r"cholesky_update: the operands must have one dtype"),
    ("qdwh wide", lambda m: m.qdwh(np.ones((2, 3))), r"qdwh: the input matrix of shape M x N must have M >= N"),
    ("qdwh int", lambda m: m.qdwh(np.eye(3, dtype=np.int32)), r"qdwh: x must be a float or complex matrix"),
    ("qdwh batch", lambda m: m.qdwh(np.ones((2, 3, 3))), r"qdwh: x must be a matrix \(M, N\)"),
    ("svd jacobi", lambda m: m.svd(M3, algorithm=m.SvdAlgorithm.JACOBI),
     r"svd: the SVD Jacobi and Polar algorithms are not implemented on CPU"),
    ("svd polar", lambda m: m.svd(M3, algorithm=m.SvdAlgorithm.POLAR), r"svd: the SVD Jacobi and Polar"),
    ("svd subset full", lambda m: m.svd(M3, subset_by_index=(0, 2)),
     r"svd: full_matrices and subset_by_index cannot both be set"),
    ("svd subset", lambda m: m.svd(M3, subset_by_index=(0, 2), full_matrices=False),
     r"svd: subset_by_index=\(0, 2\) is not supported on CPU"),
    ("eigh jacobi", lambda m: m.eigh(M3, implementation=m.EighImplementation.JACOBI),
     r"eigh: the Jacobi implementation is not supported on CPU"),
    ("eigh qdwh", lambda m: m.eigh(M3, implementation=m.EighImplementation.QDWH), r"eigh: the QDWH implementation"),
    ("eigh subset", lambda m: m.eigh(M3, subset_by_index=(1, 3)), r"eigh: subset_by_index=\(1, 3\) is not supported"),
    ("eig magma", lambda m: m.eig(M3, implementation=m.EigImplementation.MAGMA),
     r"eig: only the lapack implementation is supported on CPU"),
    ("eig cusolver", lambda m: m.eig(M3, implementation=m.EigImplementation.CUSOLVER), r"eig: only the lapack"),
]


@pytest.mark.parametrize("label,call,message", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_as_jax(label, call, message):
    expected = jax_result(lambda: _error_type(lambda: call(J)))
    assert expected is not None, "JAX accepts it"
    with pytest.raises(Exception, match=message) as info:
        call(L)
    assert type(info.value).__name__ == expected or expected in [c.__name__ for c in type(info.value).__mro__]


def test_derivatives_refused_as_jax():
    """JAX has no derivative rules for the building blocks but tridiagonal_solve: grad and jvp raise, naming the
    primitive (lu_pivots_to_permutation's integers carry no derivative at all)."""
    a = _normal(4, 4)
    for fn in (lambda x: L.hessenberg(x)[0], lambda x: L.tridiagonal(x)[1],
               lambda x: L.householder_product(x, x[:, 0]), lambda x: L.ormqr(x, x[:, 0], x),
               lambda x: L.symmetric_product(x, x), lambda x: L.cholesky_update(x, x[0])):
        with pytest.raises(NotImplementedError, match="no derivative rules, as in JAX"):
            ember.grad(lambda x: enp.sum(fn(x)))(a)
        with pytest.raises(NotImplementedError, match="no derivative rules, as in JAX"):
            ember.jvp(fn, (a,), (a,))


# ---- eig, eigh and svd: the enums and JAX's keywords ---------------------------------------------------------
def test_svd_algorithms():
    """QR runs LAPACK's gesvd (scipy's lapack_driver='gesvd', as JAX's to the last bits: the same LAPACK routine,
    whose blocked products round by the CPU they run on), the others gesdd; the derivative rules use the same
    algorithm."""
    a = _normal(5, 3)
    for full in (True, False):
        s, u, vt = L.svd(a, full_matrices=full, algorithm=L.SvdAlgorithm.QR)
        su, ss, svt = sl.svd(a, full_matrices=full, lapack_driver="gesvd")
        _close(s, ss)
        _close(u, su)
        _close(vt, svt)
        ju, js, jvt = jax_result(lambda: J.svd(a, full_matrices=full, algorithm=J.SvdAlgorithm.QR))
        _close(u, ju, atol=1e-15, rtol=1e-13)  # (which routine runs: the lowerings below)
        for algorithm in (None, L.SvdAlgorithm.DEFAULT, L.SvdAlgorithm.DIVIDE_AND_CONQUER):
            _close(L.svd(a, full_matrices=full, algorithm=algorithm)[1],
                   sl.svd(a, full_matrices=full, lapack_driver="gesdd")[0])
    _close(L.svd(a, compute_uv=False, algorithm=L.SvdAlgorithm.QR), np.linalg.svd(a, compute_uv=False))
    _close(ember.jit(lambda x: L.svd(x, algorithm=L.SvdAlgorithm.QR)[0])(a), np.linalg.svd(a, compute_uv=False))

    def f(x, algorithm):
        s, u, vt = L.svd(x, full_matrices=False, algorithm=algorithm)
        return enp.sum(s) + enp.sum((u @ vt) ** 2)
    _close(ember.grad(f)(a, L.SvdAlgorithm.QR), ember.grad(f)(a, None), atol=1e-10)
    assert '"ember_lapack_gesvd"' in ember.jit(lambda x: L.svd(x, algorithm=L.SvdAlgorithm.QR)).lower(a).as_text()
    assert '"ember_lapack_gesdd"' in ember.jit(lambda x: L.svd(x)).lower(a).as_text()


def test_eigh_and_eig_keywords():
    a = _normal(4, 4)
    s = a + a.T
    v, w = L.eigh(s, implementation=L.EighImplementation.QR, sort_eigenvalues=False, subset_by_index=(0, 4))
    _close(w, np.linalg.eigvalsh(s))
    _close(abs(np.asarray(v)), abs(np.linalg.eigh(s)[1]))
    w, vl, vr = L.eig(a, implementation=L.EigImplementation.LAPACK, enable_eigvec_derivs=True)
    _close(np.sort_complex(np.asarray(w)), np.sort_complex(np.linalg.eigvals(a)))
    with pytest.warns(DeprecationWarning, match="use_magma is deprecated"):
        w2, = L.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False, use_magma=False)
    _close(w2, w)
    s_, _, _ = L.svd(a, subset_by_index=(0, 4))
    _close(s_, np.linalg.svd(a, compute_uv=False))
    with pytest.raises(NotImplementedError, match="pass enable_eigvec_derivs=True to opt in"):
        ember.grad(lambda x: enp.sum(enp.abs(L.eig(x)[2]) ** 2))(a)


@pytest.mark.parametrize("left,right", [(False, True), (True, False), (True, True)])
def test_eig_vector_derivatives_are_jaxs(left, right):
    """With enable_eigvec_derivs=True (JAX's opt-in) the eigenvectors differentiate, under LAPACK's normalisation:
    forward and reverse mode equal JAX's, for real and complex matrices, and so does the Hessian of the eigenvalues
    (their rule uses the vectors' derivatives)."""
    for dtype in (np.float64, np.complex128):
        a, t = _normal(4, 4, dtype=dtype), _normal(4, 4, dtype=dtype)

        def fn(module):
            return lambda x: module.eig(x, compute_left_eigenvectors=left, compute_right_eigenvectors=right,
                                        enable_eigvec_derivs=True)
        _, tangents = ember.jvp(fn(L), (a,), (t,))
        for got, want in zip(tangents, jax_result(lambda: jax.jvp(fn(J), (a,), (t,))[1])):
            _close(got, want, rtol=1e-10, atol=1e-12)
        cts = [_normal(*np.shape(o), dtype=np.complex128) for o in tangents]
        _, pullback = ember.vjp(fn(L), a)
        want = jax_result(lambda: jax.vjp(fn(J), a)[1](cts)[0])
        got = pullback(cts)[0]
        assert got.dtype == want.dtype
        _close(got, want, rtol=1e-10, atol=1e-12)
    if left and right:
        a = _normal(4, 4)

        def eigenvalues(module, np_):
            return lambda x: np_.sum(np_.real(module.eig(x, compute_left_eigenvectors=False,
                                                         compute_right_eigenvectors=False,
                                                         enable_eigvec_derivs=True)[0]) ** 2)
        _close(ember.hessian(eigenvalues(L, enp))(a),
               jax_result(lambda: jax.hessian(eigenvalues(J, jax.numpy))(a)), rtol=1e-9, atol=1e-12)


# ---- the LAPACK building blocks in their identities ----------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_qr_from_householder_product_and_ormqr(dtype):
    """geqrf's reflectors (numpy's qr(mode='raw'), transposed) give qr's Q by householder_product, and ormqr
    multiplies by Q (and Q^H) without forming it, from either side, batched (JAX's docstring example too)."""
    tol = 2e-5 if dtype == np.float32 else 1e-12
    a = _normal(2, 5, 3, dtype=dtype)
    h, taus = enp.linalg.qr(a, mode="raw")
    reflectors = enp.swapaxes(h, -1, -2)
    q_full = np.linalg.qr(np.asarray(a), mode="complete")[0]
    _close(L.householder_product(reflectors, taus), np.linalg.qr(np.asarray(a))[0], rtol=tol, atol=tol)
    c = _normal(2, 5, 4, dtype=dtype)
    _close(L.ormqr(reflectors, taus, c), q_full @ c, rtol=tol, atol=tol)
    _close(L.ormqr(reflectors, taus, c, transpose=True), np.conj(np.swapaxes(q_full, -1, -2)) @ c, rtol=tol,
           atol=tol)
    ct = np.swapaxes(c, -1, -2)
    _close(L.ormqr(reflectors, taus, ct, left=False), ct @ q_full, rtol=tol, atol=tol)
    _close(ember.vmap(L.ormqr, (0, 0, None))(reflectors, taus, c[0]), q_full @ c[0], rtol=tol, atol=tol)
    x = np.array([[1., 2.], [3., 4.], [5., 6.]])
    hh, tt = enp.linalg.qr(x, mode="raw")
    _close(L.ormqr(hh.mT, tt, np.eye(3)), jax_result(lambda: np.asarray(J.ormqr(
        jax.numpy.linalg.qr(x, mode="raw")[0].mT, jax.numpy.linalg.qr(x, mode="raw")[1], np.eye(3)))))


@pytest.mark.parametrize("dtype", [np.float64, np.complex64])
def test_hessenberg_and_tridiagonal_reconstruct(dtype):
    """a = Q H Q^H and a = Q T Q^H with Q = diag(1, Q') from the reflectors (LAPACK's orghr and orgtr), the values
    JAX's; batched and vmapped."""
    tol = 2e-5 if dtype == np.complex64 else 1e-12
    a = _normal(3, 5, 5, dtype=dtype)
    n = 5
    h, taus = L.hessenberg(a)
    q = np.zeros_like(a)
    q[:, 0, 0] = 1
    q[:, 1:, 1:] = np.asarray(L.householder_product(h[:, 1:, :-1], taus))
    hh = np.triu(np.asarray(h), -1)
    _close(q @ hh @ np.conj(np.swapaxes(q, -1, -2)), a, rtol=tol, atol=tol)
    jh, jt = jax_result(lambda: J.hessenberg(a))
    _close(h, jh, rtol=tol, atol=tol)
    _close(taus, jt, rtol=tol, atol=tol)
    _close(ember.vmap(L.hessenberg)(a)[0], h, rtol=0, atol=0)

    s = a + np.conj(np.swapaxes(a, -1, -2))
    arr, d, e, taus = L.tridiagonal(s)
    assert d.dtype == e.dtype == np.dtype(dtype).type(0).real.dtype and taus.dtype == dtype
    t = (np.apply_along_axis(np.diag, -1, np.asarray(d)) + np.apply_along_axis(lambda v: np.diag(v, -1), -1, e)
         + np.apply_along_axis(lambda v: np.diag(v, 1), -1, e)).astype(dtype)
    q = np.zeros_like(a)
    q[:, 0, 0] = 1
    q[:, 1:, 1:] = np.asarray(L.householder_product(arr[:, 1:, :-1], taus))
    _close(q @ t @ np.conj(np.swapaxes(q, -1, -2)), s, rtol=tol, atol=10 * tol)
    for lower in (True, False):
        expected = jax_result(lambda: J.tridiagonal(s, lower=lower))
        for got, want in zip(ember.jit(L.tridiagonal, static_argnames="lower")(s, lower=lower), expected):
            assert got.dtype == want.dtype
            _close(got, want, rtol=tol, atol=tol)
    assert n == q.shape[-1]


def test_tridiagonal_solve_singular_and_perturbed():
    """A singular T gives NaN (LAPACK's gtsv, as JAX); perturb_singular=True perturbs tiny pivots instead, and for
    T - lambda I at an eigenvalue lambda gives (a multiple of) its eigenvector, JAX's values bit for bit (its
    algorithm: xLAGTF/xLAGTS's pivot perturbation)."""
    n = 6
    d, e = _normal(n), _normal(n - 1)
    lam = np.linalg.eigvalsh(np.diag(d) + np.diag(e, 1) + np.diag(e, -1))[2]
    dl, du = np.concatenate([[0.0], e]), np.concatenate([e, [0.0]])
    b = np.ones((n, 1))
    x = np.asarray(L.tridiagonal_solve(dl, d - lam, du, b, perturb_singular=True))
    want = jax_result(lambda: J.tridiagonal_solve(dl, d - lam, du, b, perturb_singular=True))
    _close(x, want, rtol=1e-12, atol=0)
    v = x[:, 0] / np.linalg.norm(x)
    t = np.diag(d) + np.diag(e, 1) + np.diag(e, -1)
    _close(t @ v, lam * v, atol=1e-8)
    z = np.zeros(3)
    assert np.all(np.isnan(np.asarray(L.tridiagonal_solve(z, z, z, np.ones((3, 2))))))
    huge = np.asarray(L.tridiagonal_solve(z, z, z, np.ones((3, 2)), perturb_singular=True))
    assert np.all(np.isfinite(huge)) and np.all(huge > 1e300)
    _close(huge, jax_result(lambda: J.tridiagonal_solve(z, z, z, np.ones((3, 2)), perturb_singular=True)), rtol=0,
           atol=0)
    for dtype in (np.float32, np.complex64):  # (the float32 safe minimum: 1 / FLT_MIN)
        got = L.tridiagonal_solve(*[z.astype(dtype)] * 3, np.ones((3, 1), dtype), perturb_singular=True)
        _close(got, jax_result(lambda: J.tridiagonal_solve(*[z.astype(dtype)] * 3, np.ones((3, 1), dtype),
                                                            perturb_singular=True)), rtol=0, atol=0)


def test_tridiagonal_solve_batches_and_transforms():
    """Leading batch dimensions; vmap over b alone folds the batch into b's columns (one solve), over the diagonals
    moves it to the front; the derivative with respect to every argument is JAX's, under jit and vmap."""
    dl, d, du = _normal(3, 5), _normal(3, 5) + 6, _normal(3, 5)
    b = _normal(3, 5, 2)
    dense = [np.diag(d[i]) + np.diag(dl[i, 1:], -1) + np.diag(du[i, :-1], 1) for i in range(3)]
    want = np.stack([np.linalg.solve(t, b[i]) for i, t in enumerate(dense)])
    _close(L.tridiagonal_solve(dl, d, du, b), want)
    _close(ember.vmap(L.tridiagonal_solve)(dl, d, du, b), want)
    _close(ember.vmap(L.tridiagonal_solve, (None, None, None, 0))(dl[0], d[0], du[0], b),
           np.stack([np.linalg.solve(dense[0], b[i]) for i in range(3)]))
    _close(ember.vmap(L.tridiagonal_solve, (None, None, None, 2), 2)(dl[0], d[0], du[0], b.transpose(1, 2, 0)),
           np.stack([np.linalg.solve(dense[0], b[i]) for i in range(3)]).transpose(1, 2, 0))

    def loss(fn, module):
        return lambda *args: (fn(*args) ** 2).sum()
    grads = ember.jit(ember.grad(loss(L.tridiagonal_solve, enp), argnums=(0, 1, 2, 3)))(dl, d, du, b)
    expected = jax_result(lambda: jax.grad(loss(J.tridiagonal_solve, jax.numpy), argnums=(0, 1, 2, 3))(dl, d, du, b))
    for got, want in zip(grads, expected):
        _close(got, want, rtol=1e-10, atol=1e-12)
    per_row = ember.vmap(ember.grad(lambda d, b: (L.tridiagonal_solve(dl[0], d, du[0], b) ** 2).sum()))(d, b)
    for i in range(3):
        _close(per_row[i], jax_result(lambda: jax.grad(
            lambda d_, b_: (J.tridiagonal_solve(dl[0], d_, du[0], b_) ** 2).sum())(d[i], b[i])), rtol=1e-10)


def test_lu_pivots_to_permutation():
    """lu's pivots give lu's permutation; batched, vmapped, jitted; out-of-range pivots as JAX's (negative ones
    count from the end; beyond, the swap reads the nearest row and writes nothing)."""
    a = _normal(3, 6, 4)
    _, pivots, perm = L.lu(a)
    _close(L.lu_pivots_to_permutation(pivots, 6), perm, rtol=0, atol=0)
    _close(ember.vmap(lambda p: L.lu_pivots_to_permutation(p, 6))(pivots), perm, rtol=0, atol=0)
    _close(ember.jit(L.lu_pivots_to_permutation, static_argnums=1)(pivots, 6), perm, rtol=0, atol=0)
    for p, size in (([7, -1, 3], 5), ([7, -1, 3], 8), ([-3, -1, 3], 5), ([0, 0, 0], 3)):
        p = np.array(p, np.int32)
        got = L.lu_pivots_to_permutation(p, size)
        assert got.dtype == np.int32
        _close(got, jax_result(lambda: J.lu_pivots_to_permutation(p, size)), rtol=0, atol=0)
    empty = L.lu_pivots_to_permutation(np.zeros((2, 0), np.int32), 3)
    _close(empty, np.broadcast_to(np.arange(3), (2, 3)), rtol=0, atol=0)


def test_symmetric_product():
    a, c = _normal(2, 4, 3), _normal(2, 4, 4)
    c = c + np.swapaxes(c, -1, -2)
    want = 1.5 * a @ np.swapaxes(a, -1, -2) - 2.0 * c
    _close(L.symmetric_product(a, c, alpha=1.5, beta=-2.0), want)
    _close(ember.vmap(lambda a, c: L.symmetric_product(a, c, alpha=1.5, beta=-2.0))(a, c), want)
    upper_garbage = c + np.triu(_normal(4, 4), 1)  # (symmetrize_output takes the lower triangle)
    got = L.symmetric_product(a[0], upper_garbage[0], beta=1.0, symmetrize_output=True)
    _close(got, jax_result(lambda: J.symmetric_product(a[0], upper_garbage[0], beta=1.0, symmetrize_output=True)))
    _close(got, np.swapaxes(got, -1, -2), rtol=0, atol=0)


def test_cholesky_update():
    """R'^T R' = R^T R + w w^T with R' upper triangular, JAX's values; batched and vmapped (beyond JAX, whose
    cholesky_update takes one matrix), float32 too."""
    x = _normal(5, 5)
    r = np.linalg.cholesky(x @ x.T + 5 * np.eye(5)).T
    w = _normal(5)
    got = np.asarray(L.cholesky_update(r, w))
    _close(got, jax_result(lambda: J.cholesky_update(r, w)))
    _close(got.T @ got, r.T @ r + np.outer(w, w), atol=1e-12)
    assert np.all(abs(np.tril(got, -1)) < 1e-15)  # (rounding left by the rotations, as JAX's)
    ws = _normal(3, 5)
    batched = np.asarray(ember.vmap(L.cholesky_update, (None, 0))(r, ws))
    _close(batched, np.stack([np.asarray(L.cholesky_update(r, v)) for v in ws]), rtol=1e-14, atol=1e-14)
    _close(L.cholesky_update(np.stack([r] * 3), ws), batched, rtol=1e-14, atol=1e-14)
    with ember.config.override(enable_x64=False):
        r32, w32 = r.astype(np.float32), w.astype(np.float32)
        got32 = L.cholesky_update(r32, w32)
        assert got32.dtype == np.float32
        _close(got32, got, rtol=1e-5, atol=1e-5)
    _close(L.cholesky_update(r, np.zeros(5)), r, rtol=0, atol=0)  # (w = 0: no rotation)


# ---- qdwh ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.float64, pytest.param(np.float32, marks=pytest.mark.slow), np.complex128])
def test_qdwh_is_jaxs(dtype):
    """(u, h, num_iters, is_converged) equal JAX's (the same weights, so the same number of iterations); u has
    orthonormal columns and u h = x."""
    tol = 1e-5 if dtype == np.float32 else 1e-12
    x = _normal(6, 4, dtype=dtype)
    u, h, iterations, converged = L.qdwh(x)
    ju, jh, jiterations, jconverged = jax_result(lambda: J.qdwh(x))
    assert u.dtype == h.dtype == dtype and converged.dtype == np.bool_
    assert int(iterations) == int(jiterations) and bool(converged) == bool(jconverged)
    _close(u, ju, rtol=tol, atol=tol)
    _close(h, jh, rtol=tol, atol=tol)
    _close(np.asarray(u) @ np.asarray(h), x, rtol=tol, atol=10 * tol)
    _close(np.conj(np.asarray(u).T) @ np.asarray(u), np.eye(4), atol=10 * tol)


@pytest.mark.parametrize("kwargs", [dict(max_iterations=2), dict(dynamic_shape=(4, 3)),
                                    pytest.param(dict(eps=1e-3), marks=pytest.mark.slow),
                                    pytest.param(dict(is_hermitian=True), marks=pytest.mark.slow)],
                         ids=lambda kwargs: next(iter(kwargs)))
def test_qdwh_options(kwargs):
    x = _normal(5, 4)
    got = L.qdwh(x, **kwargs)
    want = jax_result(lambda: J.qdwh(x, **kwargs))
    _close(got[0], want[0], atol=1e-12)
    _close(got[1], want[1], atol=1e-12)
    assert (int(got[2]), bool(got[3])) == (int(want[2]), bool(want[3]))


def test_qdwh_jit_vmap_and_dtypes():
    x = _normal(5, 4)
    _close(ember.jit(L.qdwh)(x)[0], L.qdwh(x)[0], atol=1e-14)
    batch = np.stack([x, _normal(5, 4)])
    us, hs, its, oks = ember.vmap(L.qdwh)(batch)
    for i in range(2):
        u, h, it, ok = L.qdwh(batch[i])
        _close(us[i], u, atol=1e-12)
        assert int(its[i]) == int(it) and bool(oks[i]) == bool(ok)
    _close(L.qdwh(np.zeros((3, 3)))[0], np.zeros((3, 3)), rtol=0, atol=0)
    with ember.config.override(enable_x64=False):  # (the iteration count: JAX's default int)
        assert L.qdwh(x.astype(np.float32))[2].dtype == np.int32


def test_qdwh_forward_mode_is_jaxs():
    x, t = _normal(5, 4), _normal(5, 4)
    _, tangent = ember.jvp(lambda x: L.qdwh(x)[0], (x,), (t,))
    _close(tangent, jax_result(lambda: jax.jvp(lambda x: J.qdwh(x)[0], (x,), (t,))[1]), rtol=1e-8, atol=1e-10)


@pytest.mark.slow
def test_qdwh_reverse_mode():
    """Reverse mode (JAX refuses it: its while loop) matches finite differences."""
    x, t, weights = _normal(5, 4), _normal(5, 4), _normal(5, 4)
    f = ember.jit(lambda x: enp.sum(L.qdwh(x)[0] * weights))
    g = np.asarray(ember.grad(lambda x: enp.sum(L.qdwh(x)[0] * weights))(x))
    numeric = (float(f(x + 1e-6 * t)) - float(f(x - 1e-6 * t))) / 2e-6
    np.testing.assert_allclose(np.sum(g * t), numeric, rtol=1e-6)


# ---- without ember's LAPACK kernels ------------------------------------------------------------------------------
def test_without_the_kernels():
    """With use_lapack off, the inline compositions still run and householder_product falls back to XLA's own
    op; the others name what is missing."""
    a = _normal(5, 3)
    h, taus = L.hessenberg(_normal(4, 4))
    reflectors, tau = np.asarray(enp.linalg.qr(a, mode="raw")[0]).T, np.asarray(enp.linalg.qr(a, mode="raw")[1])
    with_kernels = np.asarray(L.householder_product(reflectors, tau))
    with ember.config.override(use_lapack=False):
        _close(ember.jit(L.householder_product)(reflectors, tau), with_kernels, atol=1e-12)
        _close(ember.jit(lambda p: L.lu_pivots_to_permutation(p, 4))(np.array([3, 3], np.int32)), [3, 0, 2, 1],
               rtol=0, atol=0)
        _close(ember.jit(L.symmetric_product)(a, np.eye(5)), a @ a.T)
        _close(ember.jit(L.cholesky_update)(np.eye(2), np.ones(2)), np.linalg.cholesky(np.eye(2) + 1).T)
        for fn, args in ((L.hessenberg, (np.eye(3),)), (L.tridiagonal, (np.eye(3),)),
                         (L.ormqr, (reflectors, tau, np.eye(5))),
                         (L.tridiagonal_solve, (np.ones(3), np.ones(3), np.ones(3), np.ones((3, 1))))):
            with pytest.raises(NotImplementedError, match=f"{fn.__name__}: needs ember's LAPACK kernels"):
                ember.jit(fn)(*args)


# ---- explicit sharding ---------------------------------------------------------------------------------------
SHARDING_PROGRAM = """
import json
import numpy as np, ember
from ember import P
from ember.lax import linalg as L
mesh = ember.make_mesh((2, 2), ("X", "Y"))
rng = np.random.default_rng(0)
types = {}
with ember.sharding.set_mesh(mesh):
    d = ember.device_put(rng.standard_normal((4, 6)).astype(np.float32) + 4, P("X"))
    b = ember.device_put(rng.standard_normal((4, 6, 2)).astype(np.float32), P("X"))
    types["tridiagonal_solve"] = ember.typeof(L.tridiagonal_solve(d, d, d, b)).str_short()
    a = ember.device_put(rng.standard_normal((4, 5, 3)).astype(np.float32), P("X"))
    t = ember.device_put(rng.standard_normal((4, 3)).astype(np.float32), P("X"))
    types["householder_product"] = ember.typeof(L.householder_product(a, t)).str_short()
    s = ember.device_put(rng.standard_normal((4, 3, 3)).astype(np.float32), P("X"))
    types["tridiagonal"] = ember.typeof(L.tridiagonal(s)[1]).str_short()
    types["hessenberg"] = ember.typeof(L.hessenberg(s)[1]).str_short()
    p = ember.device_put(np.zeros((4, 3), np.int32), P("X"))
    types["lu_pivots_to_permutation"] = ember.typeof(L.lu_pivots_to_permutation(p, 5)).str_short()
    try:
        L.tridiagonal_solve(d, d, d, ember.device_put(np.asarray(b), P("X", "Y")))
    except ember.sharding.ShardingTypeError as err:
        types["split matrix"] = "!" + str(err)
print("RESULT" + json.dumps(types))
"""


def test_explicit_sharding_types_as_jax():
    """On a 2x2 mesh of explicit axes the batch split carries to the results (JAX 0.10.2's types, recorded on the
    same mesh); a split inside the matrices is a ShardingTypeError."""
    from reliability.subproc import program_result
    got = program_result(SHARDING_PROGRAM, 4)
    assert got["tridiagonal_solve"] == "f32[4@X,6,2]"
    assert got["householder_product"] == "f32[4@X,5,3]"
    assert got["tridiagonal"] == "f32[4@X,3]"
    assert got["hessenberg"] == "f32[4@X,2]"
    assert got["lu_pivots_to_permutation"] == "i32[4@X,5]"
    assert got["split matrix"].startswith("!tridiagonal_solve: the last 2 dimensions of")
