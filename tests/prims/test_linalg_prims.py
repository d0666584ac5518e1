"""Cases of the matrix factorisations (ember/_prims/linalg.py) for the oracle harness: forward values against
numpy/scipy (eagerly and under jit), derivatives against JAX and finite differences, jacobians, and vmap at the
first and last axis. Inputs are made well conditioned inside each case (a multiple of the identity added), and
outputs with a sign ambiguity (qr, eigh, svd vectors) enter through sign-free expressions (phase-free for complex:
|v|^2, u vt). The complex Cases (COMPLEX_CASES: complex64 and complex128 values, complex128 derivatives against
JAX's, jitted so that each oracle compiles once, and finite differences where cheap; tests/test_linalg_complex.py
has them for the others) follow the real ones; geqrf and schur have no derivative rules (their marks' errors are
checked)."""
import jax
import jax.lax.linalg as jlinalg
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl

from ember import numpy as enp
from ember._prims import linalg as L
from oracle import Case, check_forward, check_grad, check_jvp, check_vmap, oracle_tests

F = ["float32", "float64"]
C = ["complex64", "complex128"]


def _spd(np_, x):
    n = x.shape[-1]
    return np_.matmul(x, np_.swapaxes(x, -1, -2)) + n * np_.eye(n, dtype=x.dtype)


def _shift(np_, x):
    return x + 4 * np_.eye(x.shape[-2], x.shape[-1], dtype=x.dtype)


def _sym(np_, x):
    return x + np_.swapaxes(x, -1, -2)


def _herm(np_, x):
    """A Hermitian positive definite matrix from x."""
    n = x.shape[-1]
    return np_.matmul(x, np_.conj(np_.swapaxes(x, -1, -2))) + n * np_.eye(n, dtype=x.dtype)


def _polar(outs):
    """(s, u vt, |u|^2) of an svd's (s, u, vt): free of the singular vectors' phases."""
    s, u, vt = outs
    return [s, u @ vt, abs(u) ** 2]


def _s_u_vt(u, s, vt):
    """numpy's and JAX's (u, s, vt) in ember's order (s, u, vt)."""
    return s, u, vt


def _per_matrix(fn, x):
    """fn applied to each matrix of the stack x, results stacked."""
    flat = x.reshape((-1,) + x.shape[-2:])
    return np.stack([fn(m) for m in flat]).reshape(x.shape[:-2] + np.shape(fn(flat[0])))


def _np_lu(x):
    return np.stack([sl.lu_factor(m)[0] for m in x.reshape((-1,) + x.shape[-2:])]).reshape(x.shape).astype(x.dtype)


CASES = [
    Case("cholesky", lambda x: L.cholesky(_spd(enp, x)), lambda x: np.linalg.cholesky(_spd(np, x)),
         [((3, 3),), ((2, 4, 4),)], F, jax=lambda x: jlinalg.cholesky(_spd(jnp, x))),
    Case("triangular_solve", lambda a, b: L.triangular_solve(_shift(enp, a), b, left_side=True, lower=True),
         lambda a, b: np.linalg.solve(np.tril(_shift(np, a)), b), [((3, 3), (3, 2)), ((2, 3, 3), (2, 3, 4))], F,
         jax=lambda a, b: jlinalg.triangular_solve(_shift(jnp, a), b, left_side=True, lower=True)),
    Case("triangular_solve", lambda a, b: L.triangular_solve(_shift(enp, a), b, left_side=False, lower=False,
                                                             transpose_a=True, unit_diagonal=True),
         lambda a, b: (b @ np.linalg.inv(np.triu(a, 1) + np.eye(3)).T).astype(b.dtype), [((3, 3), (2, 3))], F,
         jax=lambda a, b: jlinalg.triangular_solve(_shift(jnp, a), b, left_side=False, lower=False,
                                                   transpose_a=True, unit_diagonal=True), name="trsm_right_t"),
    Case("lu", lambda x: L.lu(_shift(enp, x))[0], lambda x: _np_lu(_shift(np, x)), [((3, 3),), ((2, 4, 4),)], F,
         jax=lambda x: jlinalg.lu(_shift(jnp, x))[0]),
    Case("qr", lambda x: [L.qr(_shift(enp, x), full_matrices=False)[0] ** 2,
                          L.qr(_shift(enp, x), full_matrices=False)[1] ** 2],
         lambda x: [np.linalg.qr(_shift(np, x))[0] ** 2, np.linalg.qr(_shift(np, x))[1] ** 2],
         [((4, 3),), ((2, 3, 3),)], F,
         jax=lambda x: [jlinalg.qr(_shift(jnp, x), full_matrices=False)[0] ** 2,
                        jlinalg.qr(_shift(jnp, x), full_matrices=False)[1] ** 2]),
    Case("eigh", lambda x: [L.eigh(_sym(enp, x))[1], L.eigh(_sym(enp, x))[0] ** 2],
         lambda x: [np.linalg.eigvalsh(_sym(np, x)), np.linalg.eigh(_sym(np, x))[1] ** 2],
         [((3, 3),), ((2, 4, 4),)], F,
         jax=lambda x: [jlinalg.eigh(_sym(jnp, x))[1], jlinalg.eigh(_sym(jnp, x))[0] ** 2]),
    Case("svd", lambda x: [L.svd(_shift(enp, x), full_matrices=False)[0],
                           L.svd(_shift(enp, x), full_matrices=False)[1] ** 2,
                           L.svd(_shift(enp, x), full_matrices=False)[2] ** 2],
         lambda x: [np.linalg.svd(_shift(np, x), compute_uv=False),
                    np.linalg.svd(_shift(np, x), full_matrices=False)[0] ** 2,
                    np.linalg.svd(_shift(np, x), full_matrices=False)[2] ** 2],
         [((4, 3),), ((3, 4),), ((2, 3, 3),)], F,
         jax=lambda x: [jlinalg.svd(_shift(jnp, x), full_matrices=False)[1],
                        jlinalg.svd(_shift(jnp, x), full_matrices=False)[0] ** 2,
                        jlinalg.svd(_shift(jnp, x), full_matrices=False)[2] ** 2]),
    Case("eig", lambda x: [enp.real(L.eig(x, False, False)[0]), enp.imag(L.eig(x, False, False)[0])],
         lambda x: [np.linalg.eigvals(x).real, np.linalg.eigvals(x).imag], [((4, 4),), ((2, 3, 3),)], F,
         jax=lambda x: [jnp.real(jlinalg.eig(x, compute_left_eigenvectors=False,
                                             compute_right_eigenvectors=False)[0]),
                        jnp.imag(jlinalg.eig(x, compute_left_eigenvectors=False,
                                             compute_right_eigenvectors=False)[0])], rtol=1e-6, jacobians=False),
    Case("eig", lambda x: L.eig(x, True, True)[1:], lambda x: list(sl.eig(x, left=True, right=True)[1:]),
         [((4, 4),)], F, grad=False, name="eig_vectors"),
    Case("eig", lambda x: L.eig(x, False, True, enable_eigvec_derivs=True)[1],
         lambda x: sl.eig(x)[1].astype(np.result_type(x.dtype, np.complex64)), [((3, 3),)],
         F, jax=lambda x: jlinalg.eig(x, compute_left_eigenvectors=False, enable_eigvec_derivs=True)[1],
         name="eig_vector_derivatives"),
    Case("svd", lambda x: L.svd(_shift(enp, x), compute_uv=False),
         lambda x: np.linalg.svd(_shift(np, x), compute_uv=False), [((3, 4),)], F,
         jax=lambda x: jlinalg.svd(_shift(jnp, x), compute_uv=False), name="svdvals"),
]

COMPLEX_CASES = [
    Case("cholesky", lambda x: L.cholesky(_herm(enp, x)), lambda x: np.linalg.cholesky(_herm(np, x)), [((3, 3),)], C,
         jax=jax.jit(lambda x: jlinalg.cholesky(_herm(jnp, x))), grad_dtype="complex128", name="cholesky_complex",
         finite_differences=False),
    Case("qr", lambda x: list(L.qr(_shift(enp, x), full_matrices=False)), lambda x: list(np.linalg.qr(_shift(np, x))),
         [((4, 3),), ((3, 3),)], C, jax=jax.jit(lambda x: list(jlinalg.qr(_shift(jnp, x), full_matrices=False))),
         grad_dtype="complex128", name="qr_complex"),
    Case("eigh", lambda x: [L.eigh(_herm(enp, x))[1], abs(L.eigh(_herm(enp, x))[0]) ** 2],
         lambda x: [np.linalg.eigvalsh(_herm(np, x)), abs(np.linalg.eigh(_herm(np, x))[1]) ** 2], [((3, 3),)], C,
         jax=jax.jit(lambda x: [jlinalg.eigh(_herm(jnp, x))[1], abs(jlinalg.eigh(_herm(jnp, x))[0]) ** 2]),
         grad_dtype="complex128", name="eigh_complex", finite_differences=False),
    Case("svd", lambda x: _polar(L.svd(_shift(enp, x), full_matrices=False)),
         lambda x: _polar(_s_u_vt(*np.linalg.svd(_shift(np, x), full_matrices=False))), [((4, 3),), ((3, 4),)], C,
         jax=jax.jit(lambda x: _polar(_s_u_vt(*jlinalg.svd(_shift(jnp, x), full_matrices=False)))),
         grad_dtype="complex128", name="svd_complex", finite_differences=False),
    Case("eig", lambda x: L.eig(x, False, False)[0], np.linalg.eigvals, [((3, 3),)], C,
         jax=jax.jit(lambda x: jlinalg.eig(x, compute_left_eigenvectors=False, compute_right_eigenvectors=False)[0]),
         grad_dtype="complex128", name="eigvals_complex"),
    Case("geqrf", lambda x: L.geqrf(x)[0], lambda x: _per_matrix(lambda m: np.linalg.qr(m, mode="raw")[0].T, x),
         [((4, 3),), ((2, 3, 4),)], F + C, forward=False, reverse=False),
    Case("schur", lambda x: enp.stack(L.schur(x)), lambda x: np.stack([_per_matrix(lambda m: sl.schur(m)[k], x)
                                                                       for k in (0, 1)]),
         [((4, 4),), ((2, 3, 3),)], F + C, forward=False, reverse=False),
]
CASES += COMPLEX_CASES


def _lapack(name, x):
    """scipy's LAPACK routine `name` (the real spelling: orgqr, ormqr, sytrd) for x's dtype (ungqr, unmqr, hetrd for
    complex)."""
    if np.iscomplexobj(x):
        name = {"orgqr": "ungqr", "ormqr": "unmqr", "sytrd": "hetrd"}.get(name, name)
    return sl.get_lapack_funcs(name, (x,))


def _each_matrix(fn):
    """fn (a matrix -> a list of arrays) applied to each matrix of a stack, each output stacked."""
    def batched(x):
        flat = x.reshape((-1,) + x.shape[-2:])
        outs = [fn(m) for m in flat]
        return [np.stack([o[k] for o in outs]).reshape(x.shape[:-2] + outs[0][k].shape) for k in range(len(outs[0]))]
    return batched


@_each_matrix
def _np_gehrd(x):
    h, tau, _ = _lapack("gehrd", x)(x)
    return [h.astype(x.dtype), tau.astype(x.dtype)]


def _np_orgqr(a, tau):
    return _lapack("orgqr", a)(a, tau)[0].astype(a.dtype)


def _np_ormqr(a, tau, c, left, transpose):
    trans = ("C" if np.iscomplexobj(a) else "T") if transpose else "N"
    a = a[:, :tau.shape[0]]  # (scipy's wrapper takes exactly the k reflectors' columns)
    return _lapack("ormqr", a)("L" if left else "R", trans, a, tau, c, max(1, 64 * c.shape[0] * c.shape[1]))[0]


def _np_sytrd(x, lower=True):
    def one(m):
        out = _lapack("sytrd", m)(m, lower=int(lower))[:4]
        return [o.astype(t) for o, t in zip(out, [m.dtype, m.real.dtype, m.real.dtype, m.dtype])]
    return _each_matrix(one)(x)


def _dominant(np_, d):
    """A diagonal that dominates the off-diagonals (drawn from the same normal distribution): a well-conditioned
    tridiagonal T."""
    return d + 6


def _np_tridiagonal_solve(dl, d, du, b):
    d = _dominant(np, d)
    t = np.diag(d) + np.diag(dl[..., 1:], -1) + np.diag(du[..., :-1], 1)
    return np.linalg.solve(t, b).astype(b.dtype)


def _np_pivots(pivots, size):
    perm = np.arange(size, dtype=np.int32)
    for i, j in enumerate(pivots):
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def _upper(np_, x):
    """An upper triangular R with a positive diagonal (a Cholesky factor)."""
    return np_.triu(x) + 4 * np_.eye(x.shape[-1], dtype=x.dtype)


def _np_cholesky_update(x, w):
    r = _upper(np, x)
    return np.linalg.cholesky(r.T @ r + np.outer(w, w)).T.astype(x.dtype)


# the rest of jax.lax.linalg (LAPACK's building blocks and small compositions): values against scipy's LAPACK
# routines (bit for bit where ember calls the same routine) and numpy; as JAX, tridiagonal_solve alone differentiates
# (against JAX and finite differences), the others refuse (their marks' errors), and lu_pivots_to_permutation's
# integer output is not differentiable
BUILDING_BLOCK_CASES = [
    Case("hessenberg", lambda x: L.hessenberg(x)[0], lambda x: _np_gehrd(x)[0], [((4, 4),), ((1, 1),)], F + C,
         forward=False, reverse=False),
    Case("hessenberg", lambda x: list(L.hessenberg(x)), _np_gehrd, [((3, 3),), ((2, 4, 4),)], F + C, grad=False,
         name="hessenberg_taus"),
    Case("householder_product", L.householder_product, _np_orgqr, [((5, 3), (2,)), ((4, 4), (4,))], F + C,
         forward=False, reverse=False),
    Case("ormqr", lambda a, t, c: L.ormqr(a, t, c, left=True, transpose=True),
         lambda a, t, c: _np_ormqr(a, t, c, True, True), [((5, 3), (3,), (5, 2))], F + C, forward=False,
         reverse=False),
    Case("ormqr", lambda a, t, c: L.ormqr(a, t, c, left=False), lambda a, t, c: _np_ormqr(a, t, c, False, False),
         [((4, 3), (2,), (2, 4))], F + C, grad=False, name="ormqr_right"),
    Case("tridiagonal", lambda x: L.tridiagonal(x)[1], lambda x: _np_sytrd(x)[1], [((4, 4),), ((1, 1),)], F + C,
         forward=False, reverse=False),
    Case("tridiagonal", lambda x: list(L.tridiagonal(x)), _np_sytrd, [((4, 4),), ((2, 3, 3),)], F + C, grad=False,
         name="tridiagonal_all"),
    Case("tridiagonal", lambda x: list(L.tridiagonal(x, lower=False)), lambda x: _np_sytrd(x, lower=False),
         [((3, 3),)], F + C, grad=False, name="tridiagonal_upper"),
    Case("tridiagonal_solve", lambda dl, d, du, b: L.tridiagonal_solve(dl, _dominant(enp, d), du, b),
         _np_tridiagonal_solve, [((4,), (4,), (4,), (4, 2)), ((1,), (1,), (1,), (1, 3))], F,
         jax=lambda dl, d, du, b: jlinalg.tridiagonal_solve(dl, _dominant(jnp, d), du, b)),
    Case("tridiagonal_solve", lambda dl, d, du, b: L.tridiagonal_solve(dl, _dominant(enp, d), du, b),
         _np_tridiagonal_solve, [((3,), (3,), (3,), (3, 2))], C,
         jax=jax.jit(lambda dl, d, du, b: jlinalg.tridiagonal_solve(dl, _dominant(jnp, d), du, b)),
         grad_dtype="complex128", name="tridiagonal_solve_complex"),
    Case("lu_pivots_to_permutation", lambda p: L.lu_pivots_to_permutation(p, 5), lambda p: _np_pivots(p, 5),
         [((3,),), ((5,),)], ["int32"], domain="int_small", grad=False),
    Case("symmetric_product", lambda a, c: L.symmetric_product(a, c, alpha=2.0, beta=-0.5),
         lambda a, c: (2.0 * a @ a.T - 0.5 * c).astype(a.dtype), [((3, 2), (3, 3)), ((2, 4), (2, 2))], F,
         forward=False, reverse=False),
    Case("cholesky_update", lambda x, w: L.cholesky_update(_upper(enp, x), w), _np_cholesky_update,
         [((4, 4), (4,)), ((1, 1), (1,))], F, forward=False, reverse=False),
]
CASES += BUILDING_BLOCK_CASES
# complex Cases whose rules are the real ones unchanged (holomorphic maps): in the slow sweep only (below), to keep
# the default run short
SLOW_COMPLEX_CASES = [
    Case("triangular_solve", lambda a, b: L.triangular_solve(_shift(enp, a), b, left_side=True, lower=True,
                                                             transpose_a=True, conjugate_a=True),
         lambda a, b: np.linalg.solve(np.conj(np.tril(_shift(np, a))).T, b).astype(b.dtype), [((3, 3), (3, 2))], C,
         jax=jax.jit(lambda a, b: jlinalg.triangular_solve(_shift(jnp, a), b, left_side=True, lower=True,
                                                           transpose_a=True, conjugate_a=True)),
         grad_dtype="complex128", name="trsm_complex"),
    Case("lu", lambda x: L.lu(_shift(enp, x))[0], lambda x: _np_lu(_shift(np, x)), [((3, 3),)], C,
         jax=jax.jit(lambda x: jlinalg.lu(_shift(jnp, x))[0]), grad_dtype="complex128", name="lu_complex"),
    Case("eig", lambda x: L.eig(x, True, True)[1:], lambda x: list(sl.eig(x, left=True, right=True)[1:]),
         [((3, 3),)], C, grad=False, name="eig_vectors_complex"),
]

# (jacobians_phase=1: the quick half of the second-derivative checks is the cheaper one)
test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES, jacobians_phase=1)


@pytest.mark.slow
@pytest.mark.usefixtures("ember_x64")  # (complex128 among the dtypes, as oracle_tests' own tests run them)
@pytest.mark.parametrize("case", SLOW_COMPLEX_CASES, ids=lambda case: case.label())
def test_slow_complex_cases(case):
    for dtype in case.dtypes:
        check_forward(case, case.shapes[0], dtype)
        check_vmap(case, case.shapes[0], dtype, "first")
    if case.grad:
        check_grad(case, case.shapes[0])
        check_jvp(case, case.shapes[0])
