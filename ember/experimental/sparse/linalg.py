"""ember.experimental.sparse.linalg (jax.experimental.sparse.linalg): spsolve, a sparse direct solve.

`spsolve(data, indices, indptr, b)` solves A x = b for a square CSR matrix A (its buffers) as JAX's does on the CPU:
scipy.sparse.linalg.spsolve (SuperLU) in a host callback, tol and reorder accepted and unused (they choose cuSOLVER's
QR on a GPU). Its derivatives are the solution's (lax.custom_linear_solve: matvec the CSR product, the transposed
system solved by scipy on the transposed matrix), with respect to b and to the matrix's data, forward and reverse,
as JAX's rules give them. Where ember differs: vmap solves one system per member (JAX's refuses vmap), and the
solve runs under ember.export's refusal of host callbacks, as any callback's.

lobpcg_standard is not yet here (docs/sparse.md)."""
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


__all__ = ["spsolve", "spsolve_p"]
