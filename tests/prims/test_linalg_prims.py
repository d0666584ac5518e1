"""Cases of the matrix factorisations (ember/_prims/linalg.py) for the oracle harness: forward values against
numpy/scipy (eagerly and under jit), derivatives against JAX and finite differences, jacobians, and vmap at the
first and last axis. Inputs are made well conditioned inside each case (a multiple of the identity added), and
outputs with a sign ambiguity (qr, eigh, svd vectors) enter through sign-free expressions."""
import jax.lax.linalg as jlinalg
import jax.numpy as jnp
import numpy as np
import scipy.linalg as sl

from ember import numpy as enp
from ember._prims import linalg as L
from oracle import Case, oracle_tests

F = ["float32", "float64"]


def _spd(np_, x):
    n = x.shape[-1]
    return np_.matmul(x, np_.swapaxes(x, -1, -2)) + n * np_.eye(n, dtype=x.dtype)


def _shift(np_, x):
    return x + 4 * np_.eye(x.shape[-2], x.shape[-1], dtype=x.dtype)


def _sym(np_, x):
    return x + np_.swapaxes(x, -1, -2)


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

# (jacobians_phase=1: the quick half of the second-derivative checks is the cheaper one)
test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES, jacobians_phase=1)
