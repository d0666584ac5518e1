"""ember.experimental.sparse.linalg (jax.experimental.sparse.linalg): spsolve, a sparse direct solve.

`spsolve(data, indices, indptr, b)` solves A x = b for a square CSR matrix A (its buffers) as JAX's does on the CPU:
scipy.sparse.linalg.spsolve (SuperLU) in a host callback, tol and reorder accepted and unused (they choose cuSOLVER's
QR on a GPU). Its derivatives are the solution's (lax.custom_linear_solve: matvec the CSR product, the transposed
system solved by scipy on the transposed matrix), with respect to b and to the matrix's data, forward and reverse,
as JAX's rules give them. Where ember differs: vmap solves one system per member (JAX's refuses vmap), and the
solve runs under ember.export's refusal of host callbacks, as any callback's.

`lobpcg_standard(A, X, m=100, tol=None)` finds the k largest eigenvalues of a symmetric matrix (or a callable
applying one) by LOBPCG, as JAX's: X (n, k) the starting directions (0 < 5 k < n), at most m iterations, an eigenpair
converged when |A v - theta v| < tol * 10 * n * (theta + |A v|) (tol: the dtype's epsilon by default); returns
(theta, U, iterations). ember's is its own block iteration (Rayleigh-Ritz over an orthonormal basis of the current
vectors, the residuals and the previous directions, in a while_loop), so its eigenpairs agree with JAX's to the
tolerance, not bit for bit, and its iteration count may differ."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import lax
from ember import numpy as jnp
from ember._api.callbacks import pure_callback
from ember._api.stages import ShapeDtypeStruct
from ember._core import aval_of
from ember._core.shape_poly import is_symbolic_shape
from ember.experimental.sparse._primitive import sparse_primitive
from ember.experimental.sparse.csr import csr_matvec_p


def _scipy_solve(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, b: np.ndarray, transpose: bool
                 ) -> np.ndarray:
    import scipy.sparse.linalg  # (in the host callback: scipy is imported when a program first solves)
    a = scipy.sparse.csr_matrix((np.asarray(data), np.asarray(indices), np.asarray(indptr)), shape=(b.size,) * 2)
    return np.asarray(scipy.sparse.linalg.spsolve(a.T if transpose else a, np.asarray(b))).astype(b.dtype)


def _spsolve(data: Any, indices: Any, indptr: Any, b: Any, *, tol: float, reorder: int) -> Any:
    """spsolve_p's computation: the solution of the CSR system, differentiated as one (custom_linear_solve)."""
    n = aval_of(b).shape[0]
    rhs_type = ShapeDtypeStruct((n,), aval_of(b).dtype)

    def matvec(x: Any) -> Any:
        return csr_matvec_p.bind(data, indices, indptr, x, shape=(n, n), transpose=False)

    def solver(transpose: bool) -> Any:
        def solve(_: Any, rhs: Any) -> Any:
            return pure_callback(lambda *bufs: _scipy_solve(*bufs, transpose=transpose), rhs_type,
                                 lax.stop_gradient(data), indices, indptr, rhs, vmap_method="sequential")
        return solve
    return lax.custom_linear_solve(matvec, b, solver(False), solver(True))


# spsolve(data, indices, indptr, b; tol, reorder) -> x: JAX's primitive, its rules from its computation (above)
spsolve_p = sparse_primitive("spsolve", _spsolve)


def spsolve(data: Any, indices: Any, indptr: Any, b: Any, tol: float = 1e-6, reorder: int = 1) -> Any:
    """x with A @ x == b, A the square CSR matrix (data, indices, indptr) (as
    jax.experimental.sparse.linalg.spsolve): see the module's docstring."""
    data, indices, indptr, b = (jnp.asarray(x) for x in (data, indices, indptr, b))
    d, i, p, v = (aval_of(x) for x in (data, indices, indptr, b))
    if d.dtype != v.dtype:
        raise ValueError(f"data types do not match: data.dtype={d.dtype} b.dtype={v.dtype}")
    if not (jnp.issubdtype(i.dtype, jnp.integer) and jnp.issubdtype(p.dtype, jnp.integer)):
        raise ValueError(f"index arrays must be integer typed; got indices.dtype={i.dtype} indptr.dtype={p.dtype}")
    if not d.ndim == i.ndim == p.ndim == v.ndim == 1:
        raise ValueError(f"Arrays must be one-dimensional. Got data.shape={d.shape} indices.shape={i.shape} "
                         f"indptr.shape={p.shape} b.shape={v.shape}")
    if is_symbolic_shape(v.shape) or p.shape[0] != v.shape[0] + 1 or d.shape != i.shape:
        raise ValueError(f"Invalid CSR buffer sizes: data.shape={d.shape} indices.shape={i.shape} "
                         f"indptr.shape={p.shape}")
    if reorder not in (0, 1, 2, 3):
        raise ValueError(f"reorder={reorder!r} not valid, must be one of [1, 2, 3, 4]")
    return spsolve_p.bind(data, indices, indptr, b, tol=float(tol), reorder=int(reorder))


def _orthonormal(v: Any) -> Any:
    """An orthonormal basis of v's columns (QR's Q)."""
    return jnp.linalg.qr(v)[0]


def _ritz(matvec: Any, basis: Any, k: int) -> tuple[Any, Any, Any]:
    """The k largest Ritz pairs of the operator over the orthonormal basis: (theta, vectors, A @ vectors), theta
    descending."""
    applied = matvec(basis)
    h = basis.T @ applied
    h = (h + h.T) / 2
    theta, c = jnp.linalg.eigh(h)
    theta, c = theta[::-1][:k], c[:, ::-1][:, :k]
    return theta, basis @ c, applied @ c


def lobpcg_standard(A: Any, X: Any, m: int = 100, tol: Any = None) -> tuple[Any, Any, Any]:
    """The k largest eigenvalues and eigenvectors of a symmetric A (a matrix or a callable applying it to an (n, k)
    block) from X's k starting directions (as jax.experimental.sparse.linalg.lobpcg_standard): see the module's
    docstring."""
    X = jnp.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"lobpcg_standard: X must be an (n, k) array, got shape {tuple(X.shape)}")
    n, k = X.shape
    if callable(A) and not hasattr(A, "shape"):
        matvec = A
    else:
        A = jnp.asarray(A)
        if A.shape != (n, n):
            raise ValueError(f"A must be ({n}, {n}) matrix A, got {tuple(A.shape)} (lobpcg_standard, X of shape "
                             f"({n}, {k}))")
        matvec = lambda v: A @ v  # noqa: E731  (a dtype other than X's promotes, as JAX's)
    if k == 0:
        raise ValueError(f"must have search dim > 0, got {k}")
    if 5 * k >= n:
        raise ValueError(f"expected search dim * 5 < matrix dim (got {5 * k}, {n})")
    eps = float(jnp.finfo(X.dtype).eps) if tol is None else tol

    def converged(theta: Any, x: Any, ax: Any) -> Any:
        residual = jnp.linalg.norm(ax - x * theta, axis=0)
        return jnp.all(residual < eps * 10 * n * (theta + jnp.linalg.norm(ax, axis=0)))

    theta, x, ax = _ritz(matvec, _orthonormal(X), k)
    r = ax - x * theta
    theta, x_new, ax = _ritz(matvec, _orthonormal(jnp.concatenate([x, r], axis=1)), k)
    p, x = x_new - x @ (x.T @ x_new), x_new

    def cond(state: Any) -> Any:
        i, theta, x, ax, p = state
        return (i < m) & ~converged(theta, x, ax)

    def body(state: Any) -> Any:
        i, theta, x, ax, p = state
        r = ax - x * theta
        theta, x_new, ax = _ritz(matvec, _orthonormal(jnp.concatenate([x, r, p], axis=1)), k)
        return i + 1, theta, x_new, ax, x_new - x @ (x.T @ x_new)
    i, theta, x, ax, _ = lax.while_loop(cond, body, (jnp.asarray(1, jnp.int32), theta, x, ax, p))
    return theta, x, i


__all__ = ["lobpcg_standard", "spsolve", "spsolve_p"]
