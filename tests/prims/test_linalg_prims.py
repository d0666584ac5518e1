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
