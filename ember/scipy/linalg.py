"""ember.scipy.linalg: jax.scipy.linalg's factorisations and solvers under scipy's names and conventions (lu_factor's
pivots, cho_factor's (c, lower), trans=0/1/2/'N'/'T'/'C'), on ember's linear-algebra primitives
(ember/_prims/linalg.py), for real and complex matrices; the Schur form (schur, rsf2csf), and sqrtm and funm on it
(not differentiable, as JAX's); plus block_diag, toeplitz and expm (Pade approximant with scaling and squaring, as
JAX)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import lax
from ember import numpy as enp
from ember._core import dtypes as dt
from ember._numpy import factorizations as _f
from ember._prims import linalg as _lax_linalg


def _trans_code(name: str, trans: Any) -> int:
    """0: op(a) = a, 1: a^T, 2: a^H (a^T for a real a)."""
    codes = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}
    if trans not in codes:
        raise ValueError(f"scipy.linalg.{name}: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    return codes[trans]


def solve_triangular(a: Any, b: Any, trans: Any = 0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, debug: Any = None, check_finite: bool = True) -> Any:
    """x with op(a) x = b for the triangular a (only its lower or upper triangle is read); b a vector or a
    matrix; op(a) = a (trans 0 or 'N'), a^T (1, 'T') or a^H (2, 'C')."""
    a, b = _f._float_operands("solve_triangular", a, b)
    if enp.ndim(a) < 2 or enp.shape(a)[-1] != enp.shape(a)[-2]:
        raise ValueError(f"scipy.linalg.solve_triangular: a must be a (stack of) square matrices, got shape "
                         f"{enp.shape(a)}")
    vector = enp.ndim(b) == enp.ndim(a) - 1
    if vector:
        b = enp.expand_dims(b, -1)
    code = _trans_code("solve_triangular", trans)
    x = _lax_linalg.triangular_solve(a, b, left_side=True, lower=lower, transpose_a=code > 0,
                                     conjugate_a=code == 2, unit_diagonal=unit_diagonal)
    return x[..., 0] if vector else x


def cholesky(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The Cholesky factor of the positive definite (Hermitian) a: upper (scipy's default, a = U^H U) or lower."""
    return _f.cholesky(a, upper=not lower)


def cho_factor(a: Any, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True
               ) -> tuple[Any, bool]:
    """(c, lower) for cho_solve: c the Cholesky factor (its other triangle zero, where scipy leaves garbage)."""
    return cholesky(a, lower=lower), lower


def cho_solve(c_and_lower: tuple[Any, bool], b: Any, overwrite_b: bool = False, check_finite: bool = True) -> Any:
    """x with a x = b, from cho_factor's (c, lower)."""
    c, lower = c_and_lower
    c, b = _f._float_operands("cho_solve", c, b)
    vector = enp.ndim(b) == enp.ndim(c) - 1
    if vector:
        b = enp.expand_dims(b, -1)
    # a = L L^H: L y = b, then L^H x = y (with c = U = L^H when upper)
    y = _lax_linalg.triangular_solve(c, b, left_side=True, lower=lower, transpose_a=not lower, conjugate_a=not lower)
    x = _lax_linalg.triangular_solve(c, y, left_side=True, lower=lower, transpose_a=lower, conjugate_a=lower)
    return x[..., 0] if vector else x


def lu_factor(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> tuple[Any, Any]:
    """(lu, piv): L below lu's diagonal (unit diagonal), U on and above it; row i was swapped with row piv[i]."""
    lu_, pivots, _ = _f.lu_factor(a)
    return lu_, pivots


def _pivots_to_permutation(pivots: Any, m: int) -> Any:
    """The row permutation that LAPACK's successive swaps (pivots) make, for m rows."""
    batch = enp.shape(pivots)[:-1]
    perm = enp.broadcast_to(enp.arange(m, dtype=np.int32), batch + (m,))

    def swap(i: Any, perm: Any) -> Any:
        j = pivots[..., i]
        pi = enp.take_along_axis(perm, enp.expand_dims(enp.broadcast_to(i, batch), -1), axis=-1)[..., 0]
        pj = enp.take_along_axis(perm, enp.expand_dims(j, -1), axis=-1)[..., 0]
        index = enp.arange(m, dtype=np.int32)
        perm = enp.where(index == enp.expand_dims(j, -1), enp.expand_dims(pi, -1), perm)
        return enp.where(index == i, enp.expand_dims(pj, -1), perm)
    return lax.fori_loop(0, enp.shape(pivots)[-1], swap, perm)


def lu_solve(lu_and_piv: tuple[Any, Any], b: Any, trans: Any = 0, overwrite_b: bool = False,
             check_finite: bool = True) -> Any:
    """x with a x = b (trans 0), a^T x = b (trans 1) or a^H x = b (trans 2), from lu_factor's (lu, piv)."""
    lu_, pivots = lu_and_piv
    lu_, b = _f._float_operands("lu_solve", lu_, b)
    vector = enp.ndim(b) == enp.ndim(lu_) - 1
    if vector:
        b = enp.expand_dims(b, -1)
    perm = _pivots_to_permutation(enp.asarray(pivots).astype(np.int32), enp.shape(lu_)[-2])
    x = _f.lu_solve_factored(lu_, perm, b, _trans_code("lu_solve", trans))
    return x[..., 0] if vector else x


def lu(a: Any, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """(p, l, u) with a = p l u (or (p l, u) with permute_l); l (m, k) unit lower, u (k, n) upper."""
    a = _f._matrix("lu", a)
    lu_, _, perm = _f.lu_factor(a)
    m, n = enp.shape(a)[-2:]
    k = min(m, n)
    lower = enp.tril(lu_[..., :, :k], -1) + enp.eye(m, k, dtype=lu_.dtype)
    upper = enp.triu(lu_[..., :k, :])
    # a[perm] = l u, so a = p l u with p[perm[i], i] = 1
    p = (enp.expand_dims(perm, -1) == enp.arange(m, dtype=np.int32)).astype(lu_.dtype)
    p = enp.swapaxes(p, -1, -2)
    return (enp.matmul(p, lower), upper) if permute_l else (p, lower, upper)


def solve(a: Any, b: Any, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          check_finite: bool = True, assume_a: str = "gen") -> Any:
    """x with a x = b; assume_a 'gen' (LU), 'sym' (LU too) or 'pos' (Cholesky)."""
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError(f"scipy.linalg.solve: assume_a must be 'gen', 'sym', 'her' or 'pos', got {assume_a!r}")
    if assume_a == "pos":
        return cho_solve(cho_factor(a, lower=lower), b)
    return _f.solve(a, b)


def inv(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    return _f.inv(a)


def det(a: Any, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    return _f.det(a)


def qr(a: Any, overwrite_a: bool = False, lwork: Any = None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True) -> Any:
    """scipy's qr: mode 'full' (q (m, m)), 'economic' (q (m, k)) or 'r'; (q, r) or (r,)."""
    if pivoting:
        raise NotImplementedError("scipy.linalg.qr: pivoting=True is not supported")
    modes = {"full": "complete", "economic": "reduced", "r": "r"}
    if mode not in modes:
        raise ValueError(f"scipy.linalg.qr: mode must be 'full', 'economic' or 'r', got {mode!r}")
    if mode == "r":
        return (_f.qr(a, "complete").R,)
    q, r = _f.qr(a, modes[mode])
    return q, r


def eigh(a: Any, b: Any = None, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, type: int = 1, check_finite: bool = True,  # noqa: A002
         subset_by_index: Any = None, subset_by_value: Any = None, driver: Any = None) -> Any:
    """(w, v) of the symmetric (Hermitian) a (w ascending, real), or w alone; the generalized problem (b) is not
    supported."""
    if b is not None:
        raise NotImplementedError("scipy.linalg.eigh: the generalized eigenproblem (b) is not supported")
    w, v = _f.eigh(a, "L" if lower else "U")
    return w if eigvals_only else (w, v)


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd") -> Any:
    """(u, s, vh), or s alone without compute_uv."""
    out = _f.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return out if not compute_uv else tuple(out)


def schur(a: Any, output: str = "real") -> tuple[Any, Any]:
    """(t, z) with a = z t z^H, z unitary: t quasi upper triangular (output 'real': 2x2 blocks on the diagonal for
    complex eigenvalue pairs of a real a) or upper triangular ('complex', or any complex a); LAPACK's gees, the
    eigenvalues unsorted. Not differentiable (as JAX's)."""
    if output not in ("real", "complex"):
        raise ValueError(f"scipy.linalg.schur: output must be 'real' or 'complex', got {output!r}")
    a = _f._matrix("schur", a, square=True)
    if output == "complex":
        a = a.astype(dt.complex_dtype(a.dtype))
    t, z = _lax_linalg.schur(a)
    return t, z


def rsf2csf(T: Any, Z: Any, check_finite: bool = True) -> tuple[Any, Any]:  # noqa: N803
    """The complex Schur form (t, z) from a real one (T, Z) (scipy's rsf2csf: one Givens rotation per 2x2 block,
    from the bottom up); leading dimensions of T and Z broadcast."""
    t, z = _f._float_operands("rsf2csf", T, Z)
    for name, x in (("T", t), ("Z", z)):
        if enp.ndim(x) < 2 or enp.shape(x)[-1] != enp.shape(x)[-2]:
            raise ValueError(f"scipy.linalg.rsf2csf: {name} must be a (stack of) square matrices, got shape "
                             f"{enp.shape(x)}")
    if enp.shape(t)[-1] != enp.shape(z)[-1]:
        raise ValueError(f"scipy.linalg.rsf2csf: T {enp.shape(t)} and Z {enp.shape(z)} differ in size")
    complex_dtype = dt.complex_dtype(t.dtype)
    return enp.vectorize(_rsf2csf_2d, signature="(n,n),(n,n)->(n,n),(n,n)")(t.astype(complex_dtype),
                                                                           z.astype(complex_dtype))


def _rsf2csf_2d(t: Any, z: Any) -> tuple[Any, Any]:
    n = enp.shape(t)[-1]
    if n <= 1:
        return t, z
    eps = float(np.finfo(t.dtype).eps)
    index = enp.arange(n)

    def rotate(m: Any, t: Any, z: Any) -> tuple[Any, Any]:
        # G = [[conj(c), s], [-s, c]] zeroes t[m, m - 1]: rows m-1, m from column m-1 on become G rows, columns
        # m-1, m down to row m become columns times G^H, and z's columns m-1, m likewise
        block = lax.dynamic_slice(t, (m - 1, m - 1), (2, 2))
        mu = _f.eigvals(block)[0] - t[m, m]
        r = enp.sqrt(enp.abs(mu) ** 2 + enp.abs(t[m, m - 1]) ** 2).astype(t.dtype)
        c, s = mu / r, t[m, m - 1] / r
        g = enp.stack([enp.stack([enp.conj(c), s]), enp.stack([-s, c])])
        g_h = enp.conj(g.T)
        rows = lax.dynamic_slice_in_dim(t, m - 1, 2, axis=0)
        rows = enp.where(index >= m - 1, enp.matmul(g, rows), rows)
        t = lax.dynamic_update_slice_in_dim(t, rows, m - 1, axis=0)
        cols = lax.dynamic_slice_in_dim(t, m - 1, 2, axis=1)
        cols = enp.where(index[:, None] <= m, enp.matmul(cols, g_h), cols)
        t = lax.dynamic_update_slice_in_dim(t, cols, m - 1, axis=1)
        zc = enp.matmul(lax.dynamic_slice_in_dim(z, m - 1, 2, axis=1), g_h)
        return t, lax.dynamic_update_slice_in_dim(z, zc, m - 1, axis=1)

    def step(i: Any, tz: tuple[Any, Any]) -> tuple[Any, Any]:
        m = n - i
        t, z = tz
        coupled = enp.abs(t[m, m - 1]) > eps * (enp.abs(t[m - 1, m - 1]) + enp.abs(t[m, m]))
        t, z = lax.cond(coupled, rotate, lambda m, t, z: (t, z), m, t, z)
        return t.at[m, m - 1].set(0), z
    return lax.fori_loop(1, n, step, (t, z))


def sqrtm(A: Any, blocksize: int = 1) -> Any:  # noqa: N803
    """The principal square root of the square matrix A (2-D), complex: from A's complex Schur form, the upper
    triangular root column by column (Bjorck and Hammarling's recurrence; 0 where an entry's numerator and
    denominator both vanish, as JAX). Not differentiable (the Schur form has no derivative, as in JAX);
    blocksize > 1 is not supported (as JAX)."""
    if blocksize > 1:
        raise NotImplementedError("scipy.linalg.sqrtm: the blocked version (blocksize > 1) is not supported")
    a = _f._matrix("sqrtm", A, square=True, arg="A")
    if enp.ndim(a) != 2:
        raise ValueError(f"scipy.linalg.sqrtm: A must be a 2-D square matrix, got shape {enp.shape(a)}")
    t, z = schur(a, output="complex")
    return _from_schur(z, _sqrtm_triangular(t))


def _from_schur(z: Any, f_t: Any) -> Any:
    """z f(t) z^H: a function of A = z t z^H from its value on the Schur form t."""
    return enp.matmul(enp.matmul(z, f_t), enp.conj(z.T))


def _sqrtm_triangular(t: Any) -> Any:
    """The upper triangular u with u @ u = t (upper triangular), u's diagonal sqrt(diag(t))."""
    n = enp.shape(t)[-1]
    d = enp.sqrt(enp.diagonal(t))

    def entry(k: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:  # u[i, j] for i = j-1, ..., 0
        j, u = state
        i = j - 1 - k
        s = enp.sum(u[i, :] * u[:, j])  # (the entries of the sum still to come are zero)
        value = enp.where(t[i, j] == s, 0, (t[i, j] - s) / (d[i] + d[j]))
        return j, u.at[i, j].set(value)

    def column(j: Any, u: Any) -> Any:
        return lax.fori_loop(0, j, entry, (j, u))[1]
    return lax.fori_loop(0, n, column, enp.diag(d))


def funm(A: Any, func: Any, disp: bool = True) -> Any:  # noqa: N803
    """f(A) of the square matrix A (2-D), func applied to the eigenvalues (a function of an ember array, elementwise):
    from A's complex Schur form (schur, then rsf2csf) by Parlett's recurrence (Golub and Van Loan's algorithm
    11.1.1, scipy's), one superdiagonal at a time; complex, as JAX's. With disp=False, (f(A), an estimate of the
    relative error) as scipy and JAX. Not differentiable (the Schur form has no derivative, as in JAX)."""
    a = _f._matrix("funm", A, square=True, arg="A")
    if enp.ndim(a) != 2:
        raise ValueError(f"scipy.linalg.funm: A must be a 2-D square matrix, got shape {enp.shape(a)}")
    t, z = rsf2csf(*schur(a))
    f, minden = _parlett(enp.asarray(func(enp.diagonal(t))).astype(t.dtype), t)
    f = _from_schur(z, f)
    if disp:
        return f
    tol = float(np.finfo(dt.real_dtype(f.dtype)).eps)
    minden = enp.where(minden == 0, tol, minden)
    err = enp.minimum(1, enp.maximum(tol, (tol / minden) * enp.linalg.norm(enp.triu(t, 1), 1)))
    return f, enp.where(enp.any(enp.isinf(f)), np.inf, err)


def _parlett(values: Any, t: Any) -> tuple[Any, Any]:
    """(f, minden): the upper triangular f(t) of the upper triangular t from f's values on t's diagonal, and the
    smallest |t_jj - t_ii| met. For the entries (i, j) at distance p above the diagonal (all at once), with the
    nearer ones known and f_ij still 0: (t f - f t)_ij = t_ij (f_jj - f_ii) + sum_{i<k<j} (t_ik f_kj - f_ik t_kj),
    divided by t_jj - t_ii where that is not 0 (as scipy)."""
    n = enp.shape(t)[-1]
    d = enp.diagonal(t)
    rows, cols = np.indices((n, n))
    den = d[None, :] - d[:, None]

    def superdiagonal(p: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:
        f, minden = state
        on = enp.asarray(cols - rows) == p
        s = enp.matmul(t, f) - enp.matmul(f, t)
        value = enp.where(den != 0, s / enp.where(den != 0, den, 1), s)
        minden = enp.minimum(minden, enp.min(enp.where(on, enp.abs(den), np.inf)))
        return enp.where(on, value, f), minden
    return lax.fori_loop(1, n, superdiagonal, (enp.diag(values), enp.abs(d[0])))


def block_diag(*arrs: Any) -> Any:
    """The block-diagonal matrix of the given blocks (scalars and vectors are 1x1 and 1xn blocks)."""
    if not arrs:
        return enp.zeros((1, 0))
    blocks = [enp.atleast_2d(enp.asarray(a)) for a in arrs]
    for i, b in enumerate(blocks):
        if enp.ndim(b) != 2:
            raise ValueError(f"scipy.linalg.block_diag: argument {i} must have at most 2 dimensions, got shape "
                             f"{enp.shape(b)}")
    dtype = enp.result_type(*blocks)
    total = sum(enp.shape(b)[1] for b in blocks)
    rows, col = [], 0
    for b in blocks:
        r, c = enp.shape(b)
        rows.append(enp.pad(b.astype(dtype), ((0, 0), (col, total - col - c))))
        col += c
    return enp.concatenate(rows, axis=0)


def toeplitz(c: Any, r: Any = None) -> Any:
    """The Toeplitz matrix with first column c and first row r (r = c when omitted; r[0] is ignored)."""
    c = enp.ravel(enp.asarray(c))
    r = c if r is None else enp.ravel(enp.asarray(r))
    m, n = enp.shape(c)[0], enp.shape(r)[0]
    values = enp.concatenate([enp.flip(r[1:]), c])  # index n - 1 + i - j
    index = (n - 1) + np.arange(m)[:, None] - np.arange(n)[None, :]
    return values[index]


def hankel(c: Any, r: Any = None) -> Any:
    """The Hankel matrix with first column c and last row r (zeros when omitted; r[0] is ignored)."""
    c = enp.ravel(enp.asarray(c))
    r = enp.zeros_like(c) if r is None else enp.ravel(enp.asarray(r))
    m, n = enp.shape(c)[0], enp.shape(r)[0]
    values = enp.concatenate([c, r[1:]])  # index i + j
    return values[np.arange(m)[:, None] + np.arange(n)[None, :]]


def circulant(c: Any) -> Any:
    """The circulant matrix with first column c."""
    c = enp.ravel(enp.asarray(c))
    n = enp.shape(c)[0]
    return c[(np.arange(n)[:, None] - np.arange(n)[None, :]) % max(n, 1)]


def companion(a: Any) -> Any:
    """The companion matrix of the polynomial with coefficients a (highest degree first, a[0] != 0)."""
    a = enp.ravel(enp.asarray(a))
    n = enp.shape(a)[0]
    if n < 2:
        raise ValueError(f"scipy.linalg.companion: a needs at least 2 coefficients, got {n}")
    a = a.astype(enp.result_type(a.dtype, enp.float32)) if not enp.issubdtype(a.dtype, enp.inexact) else a
    first = -a[1:] / a[0]
    below = enp.eye(n - 2, n - 1, dtype=a.dtype) if n > 2 else enp.zeros((0, 1), a.dtype)
    return enp.concatenate([first[None, :], below], axis=0)


def hilbert(n: int) -> Any:
    """The n x n Hilbert matrix, 1 / (i + j + 1)."""
    i = enp.arange(n, dtype=enp.result_type(float))
    return 1.0 / (i[:, None] + i[None, :] + 1.0)


def leslie(f: Any, s: Any) -> Any:
    """The Leslie matrix of fecundity coefficients f (n,) and survival coefficients s (n - 1,)."""
    f, s = enp.ravel(enp.asarray(f)), enp.ravel(enp.asarray(s))
    n = enp.shape(f)[0]
    if enp.shape(s)[0] != n - 1:
        raise ValueError(f"scipy.linalg.leslie: s must have len(f) - 1 = {n - 1} elements, got {enp.shape(s)[0]}")
    dtype = enp.result_type(f, s)
    below = enp.concatenate([enp.diag(s.astype(dtype)), enp.zeros((n - 1, 1), dtype)], axis=1)
    return enp.concatenate([f.astype(dtype)[None, :], below], axis=0)


def fiedler(a: Any) -> Any:
    """The symmetric Fiedler matrix |a[i] - a[j]|."""
    a = enp.ravel(enp.asarray(a))
    return enp.abs(a[:, None] - a[None, :])


def helmert(n: int, full: bool = False) -> Any:
    """The Helmert matrix: row k (1 <= k < n) is k ones then -k, over sqrt(k (k + 1)); with full, a first row of
    1 / sqrt(n)."""
    k = np.arange(1, n, dtype=np.float64)[:, None]
    j = np.arange(n)[None, :]
    rows = (np.where(j < k, 1.0, 0.0) - np.where(j == k, k, 0.0)) / np.sqrt(k * (k + 1))
    if full:
        rows = np.concatenate([np.full((1, n), 1.0 / np.sqrt(n)), rows], axis=0)
    return enp.asarray(rows.astype(enp.result_type(float)))


def polar(a: Any, side: str = "right", *, method: str = "svd", eps: Any = None, max_iterations: Any = None
          ) -> tuple[Any, Any]:
    """(u, p): the polar decomposition a = u p (side 'right') or a = p u ('left'), u with orthonormal columns
    (rows), p symmetric positive semi-definite; computed from the SVD (JAX's method='svd'; 'qdwh' is not offered)."""
    if method != "svd":
        raise NotImplementedError(f"scipy.linalg.polar: only method='svd' is supported, got {method!r}")
    if side not in ("right", "left"):
        raise ValueError(f"scipy.linalg.polar: side must be 'right' or 'left', got {side!r}")
    u_, s, vh = _f.svd(a, full_matrices=False)
    unitary = enp.matmul(u_, vh)
    if side == "right":
        return unitary, enp.matmul(enp.swapaxes(vh, -1, -2) * s[..., None, :], vh)
    return unitary, enp.matmul(u_ * s[..., None, :], enp.swapaxes(u_, -1, -2))


def expm_frechet(A: Any, E: Any, *, method: str | None = None, compute_expm: bool = True) -> Any:  # noqa: N803
    """The Frechet derivative of expm at A in the direction E (and expm(A) first, with compute_expm): the upper
    right block of expm([[A, E], [0, A]])."""
    a, e = _f._float_operands("expm_frechet", A, E)
    if enp.ndim(a) != 2 or enp.shape(a) != enp.shape(e) or enp.shape(a)[0] != enp.shape(a)[1]:
        raise ValueError(f"scipy.linalg.expm_frechet: A and E must be square matrices of one shape, got "
                         f"{enp.shape(a)} and {enp.shape(e)}")
    n = enp.shape(a)[0]
    big = enp.concatenate([enp.concatenate([a, e], axis=1),
                           enp.concatenate([enp.zeros_like(a), a], axis=1)], axis=0)
    block = expm(big)
    frechet = block[:n, n:]
    return (block[:n, :n], frechet) if compute_expm else frechet


# expm: the [13/13] (float64) or [7/7] (float32) Pade approximant of exp(a / 2^s), squared s times; s from the
# 1-norm as in Higham (2005), and at most 16 squarings, each applied only where needed (jnp.where), so the function
# has a fixed shape of work and is differentiable (JAX's scheme).
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
           10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.)
_PADE7 = (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.)
_THETA = {13: 5.371920351148152, 7: 3.925724783138660}
_MAX_SQUARINGS = 16


def _pade(a: Any, coefficients: tuple[float, ...]) -> tuple[Any, Any]:
    """(p, q) of the Pade approximant: p = U + V, q = -U + V, U the odd part, V the even part."""
    n = enp.shape(a)[-1]
    ident = enp.broadcast_to(enp.eye(n, dtype=a.dtype), enp.shape(a))
    a2 = enp.matmul(a, a)
    powers = [ident, a2]
    degree = len(coefficients) - 1
    while 2 * (len(powers) - 1) < degree - 1:
        powers.append(enp.matmul(powers[-1], a2))
    odd = sum(coefficients[2 * i + 1] * powers[i] for i in range(len(powers)) if 2 * i + 1 <= degree)
    even = sum(coefficients[2 * i] * powers[i] for i in range(len(powers)) if 2 * i <= degree)
    u = enp.matmul(a, odd)
    return even + u, even - u


def expm(A: Any, *, upper_triangular: bool = False, max_squarings: int = _MAX_SQUARINGS) -> Any:  # noqa: N803
    """The matrix exponential of the (stack of) square matrices A."""
    a = _f._matrix("expm", A, square=True)
    coefficients = _PADE13 if a.dtype == np.float64 else _PADE7
    theta = _THETA[len(coefficients) - 1]
    norm = enp.max(enp.sum(enp.abs(a), axis=-2), axis=-1)
    squarings = enp.clip(enp.ceil(enp.log2(enp.maximum(norm, 1e-300) / theta)), 0, max_squarings)
    squarings = enp.where(enp.isfinite(squarings), squarings, 0)
    scaled = a / enp.expand_dims(enp.exp2(squarings), (-2, -1)).astype(a.dtype)
    p, q = _pade(scaled, coefficients)
    r = _f.solve(q, p)
    for i in range(max_squarings):
        r = enp.where(enp.expand_dims(i < squarings, (-2, -1)), enp.matmul(r, r), r)
    return r


__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "companion", "det", "eigh", "expm",
           "expm_frechet", "fiedler", "funm", "hankel", "helmert", "hilbert", "inv", "leslie", "lu", "lu_factor",
           "lu_solve", "polar", "qr", "rsf2csf", "schur", "solve", "solve_triangular", "sqrtm", "svd", "toeplitz"]
