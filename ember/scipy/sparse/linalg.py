"""ember.scipy.sparse.linalg: jax.scipy.sparse.linalg's iterative solvers of A x = b: cg (conjugate gradients,
for Hermitian positive definite A), bicgstab (biconjugate gradients stabilized) and gmres (restarted GMRES).

A is a matrix (a square 2-D array), an object with `@`, or a function computing A x; b (and x0, and the
preconditioner M's input and output) is an array or any pytree of arrays, the vector being all its leaves. Each
solver is a `lax.while_loop` (so it runs under jit and vmap) inside `lax.custom_linear_solve`: its derivatives
come from implicit differentiation (another solve, with the transposed operator), not from differentiating the
iterations, as in JAX. Tolerances are scipy's non-legacy ones: iterate until norm(residual) <= max(tol * norm(b),
atol), or maxiter (default 10 * the size of b) iterations.
"""
from __future__ import annotations

import operator
from functools import partial
from typing import Any, Callable

import numpy as np

from ember import lax
from ember import numpy as enp
from ember._core import dtypes as dt
from ember.scipy.linalg import solve_triangular
from ember.tree_util import tree_leaves, tree_map, tree_structure

# ---------------------------------------------------------------------------------------------------------------
# Vectors as pytrees: the inner products sum over the leaves.


def _vdot(x: Any, y: Any) -> Any:
    """<x, y> = sum conj(x) y over every leaf."""
    return sum(enp.vdot(a, b) for a, b in zip(tree_leaves(x), tree_leaves(y)))


def _vdot_real(x: Any, y: Any) -> Any:
    """The real part of <x, y> (real even for complex vectors)."""
    total = 0
    for a, b in zip(tree_leaves(x), tree_leaves(y)):
        total = total + enp.vdot(enp.real(a), enp.real(b))
        if enp.iscomplexobj(a) or enp.iscomplexobj(b):
            total = total + enp.vdot(enp.imag(a), enp.imag(b))
    return total


def _norm(x: Any) -> Any:
    return enp.sqrt(_vdot_real(x, x))


def _scale(c: Any, x: Any) -> Any:
    return tree_map(lambda a: c * a, x)


def _add(x: Any, y: Any) -> Any:
    return tree_map(operator.add, x, y)


def _sub(x: Any, y: Any) -> Any:
    return tree_map(operator.sub, x, y)


def _select(pred: Any, x: Any, y: Any) -> Any:
    return tree_map(lambda a, b: enp.where(pred, a, b), x, y)


def _dtype(tree: Any) -> Any:
    return enp.result_type(*tree_leaves(tree))


def _identity(x: Any) -> Any:
    return x


def _operator(name: str, what: str, f: Any) -> Callable[[Any], Any]:
    """A (or M) as a function x -> A x."""
    if callable(f):
        return f
    if isinstance(f, (np.ndarray, enp.ndarray)) or hasattr(f, "__matmul__"):
        shape = getattr(f, "shape", None)
        if shape is not None and (len(shape) != 2 or shape[0] != shape[1]):
            raise ValueError(f"linear operator must be a square matrix, but has shape: {tuple(shape)} "
                             f"({name}: {what})")
        if isinstance(f, (np.ndarray, enp.ndarray)):
            matrix = enp.asarray(f)
            return lambda x: enp.dot(matrix, x, precision=lax.Precision.HIGHEST)
        return lambda x: f @ x
    raise TypeError(f"linear operator must be either a function or ndarray: {f!r:.80} ({name}: {what})")


def _prepare(name: str, A: Any, b: Any, x0: Any, M: Any, check_shapes: bool) -> tuple[Any, ...]:  # noqa: N803
    b = tree_map(enp.asarray, b)
    x0 = tree_map(enp.zeros_like, b) if x0 is None else tree_map(enp.asarray, x0)
    if tree_structure(x0) != tree_structure(b):
        raise ValueError(f"x0 and b must have matching tree structure: {tree_structure(x0)} vs "
                         f"{tree_structure(b)} ({name})")
    shapes = [enp.shape(leaf) for leaf in tree_leaves(b)]
    if check_shapes and [enp.shape(leaf) for leaf in tree_leaves(x0)] != shapes:
        raise ValueError(f"arrays in x0 and b must have matching shapes: "
                         f"{[enp.shape(leaf) for leaf in tree_leaves(x0)]} vs {shapes} ({name})")
    size = sum(int(np.prod(s)) for s in shapes)
    A = _operator(name, "A", A)  # noqa: N806
    M = _identity if M is None else _operator(name, "M", M)  # noqa: N806
    return A, b, x0, M, size


def _real_dtypes(tree: Any) -> bool:
    return all(not dt.is_complex(enp.asarray(leaf).dtype) for leaf in tree_leaves(tree))


# ---------------------------------------------------------------------------------------------------------------
# Conjugate gradients (preconditioned; Hestenes and Stiefel's recurrences)


def _cg(A: Any, b: Any, *, x0: Any, tol: Any, atol: Any, maxiter: int, M: Any) -> Any:  # noqa: N803
    threshold = enp.maximum(enp.square(tol) * _vdot_real(b, b), enp.square(atol))   # |r|^2 to reach
    r = _sub(b, A(x0))
    z = M(r)
    dtype = _dtype(z)
    rz = _vdot_real(r, z).astype(dtype)

    def going(state: tuple[Any, ...]) -> Any:
        _, r, rz, _, k = state
        rr = enp.real(rz) if M is _identity else _vdot_real(r, r)
        return (rr > threshold) & (k < maxiter)

    def step(state: tuple[Any, ...]) -> tuple[Any, ...]:
        x, r, rz, p, k = state
        ap = A(p)
        alpha = rz / _vdot_real(p, ap).astype(dtype)
        x = _add(x, _scale(alpha, p))
        r = _sub(r, _scale(alpha, ap))
        z = M(r)
        rz_next = _vdot_real(r, z).astype(dtype)
        p = _add(z, _scale(rz_next / rz, p))
        return x, r, rz_next, p, k + 1

    return lax.while_loop(going, step, (x0, r, rz, z, 0))[0]


# ---------------------------------------------------------------------------------------------------------------
# BiCGSTAB (van der Vorst's, right-preconditioned)


def _bicgstab(A: Any, b: Any, *, x0: Any, tol: Any, atol: Any, maxiter: int, M: Any) -> Any:  # noqa: N803
    threshold = enp.maximum(enp.square(tol) * _vdot_real(b, b), enp.square(atol))
    r = _sub(b, A(x0))
    one = enp.ones((), _dtype(b))
    zero_vec = tree_map(enp.zeros_like, r)

    def going(state: tuple[Any, ...]) -> Any:
        _, r, *_, k = state
        return (_vdot_real(r, r) > threshold) & (k < maxiter) & (k >= 0)   # k < 0: a breakdown

    def step(state: tuple[Any, ...]) -> tuple[Any, ...]:
        x, r, shadow, alpha, omega, rho, p, v, k = state
        rho_next = _vdot(shadow, r)
        beta = (rho_next / rho) * (alpha / omega)
        p = _add(r, _scale(beta, _sub(p, _scale(omega, v))))
        p_hat = M(p)
        v = A(p_hat)
        alpha = rho_next / _vdot(shadow, v)
        s = _sub(r, _scale(alpha, v))
        done = _vdot_real(s, s) < threshold     # converged at the half step: skip the stabilizing one
        s_hat = M(s)
        t = A(s_hat)
        omega = _vdot(t, s) / _vdot(t, t)
        half = _add(x, _scale(alpha, p_hat))
        x = _select(done, half, _add(half, _scale(omega, s_hat)))
        r = _select(done, s, _sub(s, _scale(omega, t)))
        k = enp.where((omega == 0) | (alpha == 0), -11, k + 1)
        k = enp.where(rho_next == 0, -10, k)
        return x, r, shadow, alpha, omega, rho_next, p, v, k

    state = (x0, r, r, one, one, one, zero_vec, zero_vec, 0)
    return lax.while_loop(going, step, state)[0]


def _isolve(name: str, method: Any, A: Any, b: Any, x0: Any, tol: Any, atol: Any, maxiter: Any,  # noqa: N803
            M: Any, symmetric_if_real: bool) -> Any:  # noqa: N803
    A, b, x0, M, size = _prepare(name, A, b, x0, M, check_shapes=True)  # noqa: N806
    if maxiter is None:
        maxiter = 10 * size   # (scipy's default)
    solve = partial(method, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=M)
    symmetric = symmetric_if_real and _real_dtypes(b)   # a real positive definite operator is symmetric
    return lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve, symmetric=symmetric)


def cg(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0, maxiter: int | None = None,  # noqa: N803
       M: Any = None) -> tuple[Any, None]:  # noqa: N803
    """Solve A x = b by conjugate gradients, for Hermitian positive definite A; returns (x, None).

    A: a square matrix, a `@`-able object or a function x -> A x; b: an array or a pytree of arrays (x has its
    structure); x0: the initial guess (zeros by default); stop when norm(b - A x) <= max(tol * norm(b), atol) or
    after maxiter iterations (10 * size of b by default); M: a preconditioner approximating A's inverse (matrix or
    function). The values are scipy's (same recurrences, non-legacy tolerances); derivatives (jit, grad, vmap)
    solve the transposed system with cg again, as JAX's. info is None, as in JAX.
    """
    return _isolve("cg", _cg, A, b, x0, tol, atol, maxiter, M, symmetric_if_real=True), None


def bicgstab(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0,  # noqa: N803
             maxiter: int | None = None, M: Any = None) -> tuple[Any, None]:  # noqa: N803
    """Solve A x = b (any nonsingular A) by BiCGSTAB; returns (x, None).

    Arguments as cg's. Stops early, keeping the last iterate, on a breakdown (rho, alpha or omega zero).
    Derivatives solve the transposed system with bicgstab, as JAX's.
    """
    return _isolve("bicgstab", _bicgstab, A, b, x0, tol, atol, maxiter, M, symmetric_if_real=False), None


# ---------------------------------------------------------------------------------------------------------------
# GMRES: restarts of an Arnoldi process on M A (left preconditioned), the Krylov basis V kept as a pytree whose
# leaves have a trailing axis of restart + 1 vectors.


def _normalized(x: Any, floor: Any = None) -> tuple[Any, Any]:
    """x / norm(x) and norm(x); a vector whose norm is at most floor (machine epsilon by default) counts as 0."""
    norm = _norm(x)
    dtype = _dtype(x)
    if floor is None:
        floor = np.finfo(norm.dtype).eps
    big = norm > floor
    unit = tree_map(lambda a: enp.where(big, a / norm.astype(dtype), enp.zeros_like(a)), x)
    return unit, enp.where(big, norm, enp.zeros_like(norm))


def _basis_column(basis: Any, k: Any) -> Any:
    return tree_map(lambda v: lax.dynamic_index_in_dim(v, k, axis=v.ndim - 1, keepdims=False), basis)


def _project(basis: Any, x: Any) -> Any:
    """basis^H x: the overlaps of x with every basis vector."""
    return sum(enp.einsum("...n,...->n", enp.conj(v), a) for v, a in zip(tree_leaves(basis), tree_leaves(x)))


def _combine(basis: Any, y: Any) -> Any:
    """basis @ y: the combination of the basis vectors with coefficients y."""
    return tree_map(lambda v: enp.dot(v, y), basis)


def _orthogonalize(basis: Any, x: Any, x_norm: Any) -> tuple[Any, Any]:
    """x made orthogonal to the basis by classical Gram-Schmidt, repeated once where the first pass lost more
    than 1 - 1/sqrt(2) of x's norm ("twice is enough"); returns the remainder and the overlaps removed."""
    overlaps = _project(basis, x)
    q = _sub(x, _combine(basis, overlaps))
    q_norm = _norm(q)
    again = q_norm < x_norm / np.sqrt(2.0)

    def second_pass(q: Any) -> tuple[Any, Any]:
        h = _project(basis, q)
        return _sub(q, _combine(basis, h)), h

    q2, h2 = second_pass(q)
    q = _select(again, q2, q)
    overlaps = overlaps + enp.where(again, h2, enp.zeros_like(h2))
    return q, overlaps


def _arnoldi(k: Any, A: Any, M: Any, basis: Any, hessenberg: Any) -> tuple[Any, Any, Any]:  # noqa: N803
    """Step k of the Arnoldi process: basis column k + 1 and row k of the (transposed) Hessenberg matrix; whether
    the Krylov space stopped growing (an invariant subspace: the exact solution is in it)."""
    dtype = _dtype(basis)
    w = M(A(_basis_column(basis, k)))
    w_norm = _norm(w)
    w, h = _orthogonalize(basis, w, w_norm)
    unit, norm = _normalized(w, floor=np.finfo(dt.real_dtype(dtype)).eps * w_norm)
    basis = tree_map(lambda v, u: lax.dynamic_update_index_in_dim(v, u[..., None], k + 1, v.ndim - 1), basis, unit)
    h = h.at[k + 1].set(norm.astype(dtype))
    hessenberg = lax.dynamic_update_index_in_dim(hessenberg, h[None], k, 0)
    return basis, hessenberg, norm == 0


def _new_basis(unit_residual: Any, restart: int) -> Any:
    return tree_map(lambda a: enp.concatenate([a[..., None], enp.zeros(a.shape + (restart,), a.dtype)], axis=-1),
                    unit_residual)


def _cycle_batched(A: Any, M: Any, b: Any, x: Any, unit: Any, rnorm: Any, ptol: Any, restart: int  # noqa: N803
                   ) -> tuple[Any, Any, Any]:
    """One restart: restart Arnoldi steps (fewer at a breakdown), then the least-squares problem
    min |rnorm e1 - H y| solved at once (by its normal equations)."""
    del ptol
    dtype = _dtype(b)
    basis = _new_basis(unit, restart)
    hessenberg = enp.eye(restart, restart + 1, dtype=dtype)   # (rows of a breakdown keep it nonsingular)

    def going(state: tuple[Any, ...]) -> Any:
        _, _, broke, k = state
        return (k < restart) & ~broke

    def step(state: tuple[Any, ...]) -> tuple[Any, ...]:
        basis, hessenberg, _, k = state
        basis, hessenberg, broke = _arnoldi(k, A, M, basis, hessenberg)
        return basis, hessenberg, broke, k + 1

    basis, hessenberg, _, _ = lax.while_loop(going, step, (basis, hessenberg, enp.asarray(False), 0))
    rhs = enp.zeros(restart + 1, dtype).at[0].set(rnorm.astype(dtype))
    h = hessenberg.T                                   # (restart + 1, restart)
    hh = enp.conj(h.T)
    y = enp.linalg.solve(hh @ h, hh @ rhs)
    x = _add(x, _combine(tree_map(lambda v: v[..., :-1], basis), y))
    unit, rnorm = _normalized(M(_sub(b, A(x))))
    return x, unit, rnorm


def _givens(a: Any, b: Any) -> tuple[Any, Any]:
    """(c, s) of the rotation [[conj(c), -conj(s)], [s, c]] that zeroes b in (a, b)."""
    b_zero = enp.abs(b) == 0
    swap = enp.abs(a) < enp.abs(b)
    t = -enp.where(swap, a, b) / enp.where(swap, b, a)
    r = lax.rsqrt(1 + enp.abs(t) ** 2).astype(t.dtype)
    c = enp.where(b_zero, 1, enp.where(swap, r * t, r))
    s = enp.where(b_zero, 0, enp.where(swap, r, r * t))
    return c, s


def _rotate(v: Any, i: Any, c: Any, s: Any) -> Any:
    """The rotation (c, s) applied to entries i and i + 1 of v."""
    vi, vj = v[i], v[i + 1]
    return v.at[i].set(enp.conj(c) * vi - enp.conj(s) * vj).at[i + 1].set(s * vi + c * vj)


def _cycle_incremental(A: Any, M: Any, b: Any, x: Any, unit: Any, rnorm: Any, ptol: Any,  # noqa: N803
                       restart: int) -> tuple[Any, Any, Any]:
    """One restart with the QR factorization of the Hessenberg matrix updated by Givens rotations as the Arnoldi
    process goes: the residual norm is known at every step, and the cycle stops as soon as it is below ptol."""
    dtype = _dtype(b)
    basis = _new_basis(unit, restart)
    r = enp.eye(restart, restart + 1, dtype=dtype)
    rotations = enp.zeros((restart, 2), dtype)
    g = enp.zeros(restart + 1, dtype).at[0].set(rnorm.astype(dtype))

    def going(state: tuple[Any, ...]) -> Any:
        k, err = state[:2]
        return (k < restart) & (err > ptol)

    def step(state: tuple[Any, ...]) -> tuple[Any, ...]:
        k, _, basis, r, g, rotations = state
        basis, h, _ = _arnoldi(k, A, M, basis, r)
        row = lax.fori_loop(0, k, lambda i, row: _rotate(row, i, rotations[i, 0], rotations[i, 1]), h[k])
        c, s = _givens(row[k], row[k + 1])
        rotations = rotations.at[k].set(enp.stack([c, s]))
        r = r.at[k].set(_rotate(row, k, c, s))
        g = _rotate(g, k, c, s)
        return k + 1, enp.abs(g[k + 1]), basis, r, g, rotations

    _, _, basis, r, g, _ = lax.while_loop(going, step, (0, rnorm, basis, r, g, rotations))
    y = solve_triangular(r[:, :-1].T, g[:-1])     # (R is upper triangular: back substitution)
    x = _add(x, _combine(tree_map(lambda v: v[..., :-1], basis), y))
    unit, rnorm = _normalized(M(_sub(b, A(x))))
    return x, unit, rnorm


def gmres(A: Any, b: Any, x0: Any = None, *, tol: float = 1e-5, atol: float = 0.0, restart: int = 20,  # noqa: N803
          maxiter: int | None = None, M: Any = None, solve_method: str = "batched") -> tuple[Any, Any]:  # noqa: N803
    """Solve A x = b (any nonsingular A) by restarted GMRES; returns (x, info), info 0, or -1 where x is NaN.

    A, b, x0, tol, atol, M as cg's (M preconditions on the left: the residual minimized is M (b - A x)); restart:
    the Krylov space's dimension per cycle (at most the size of b); maxiter: the number of cycles (10 * size of b
    by default). solve_method='batched' (the default) solves each cycle's least-squares problem at its end;
    'incremental' updates a QR factorization by Givens rotations and ends a cycle as soon as its residual is small
    enough. Derivatives solve the transposed system with gmres, as JAX's.
    """
    if solve_method not in ("incremental", "batched"):
        raise ValueError(f"invalid solve_method {solve_method}, must be either 'incremental' or 'batched'")
    A, b, x0, M, size = _prepare("gmres", A, b, x0, M, check_shapes=False)  # noqa: N806
    if maxiter is None:
        maxiter = 10 * size
    restart = min(int(restart), size)
    b_norm = _norm(b)
    atol = enp.maximum(tol * b_norm, atol)
    ptol = _norm(M(b)) * enp.minimum(1.0, atol / b_norm)
    cycle = _cycle_incremental if solve_method == "incremental" else _cycle_batched

    def solve(A: Any, b: Any) -> Any:  # noqa: N803
        unit, rnorm = _normalized(M(_sub(b, A(x0))))

        def going(state: tuple[Any, ...]) -> Any:
            _, k, _, rnorm = state
            return (k < maxiter) & (rnorm > atol)

        def step(state: tuple[Any, ...]) -> tuple[Any, ...]:
            x, k, unit, rnorm = state
            x, unit, rnorm = cycle(A, M, b, x, unit, rnorm, ptol, restart)
            return x, k + 1, unit, rnorm

        return lax.while_loop(going, step, (x0, 0, unit, rnorm))[0]

    x = lax.custom_linear_solve(A, b, solve=solve, transpose_solve=solve)
    info = enp.where(enp.isnan(_norm(x)), -1, 0)
    return x, info


__all__ = ["bicgstab", "cg", "gmres"]
