"""ember.scipy.linalg: jax.scipy.linalg's factorisations and solvers under scipy's names and conventions (lu_factor's
pivots, cho_factor's (c, lower), trans=0/1/2/'N'/'T'/'C'), on ember's linear-algebra primitives
(ember/_prims/linalg.py), for real and complex matrices; the Schur form (schur, rsf2csf), and sqrtm and funm on it
(not differentiable, as JAX's), and solve_sylvester on it; hessenberg (LAPACK's gehrd, as JAX, differentiable
through the same Householder steps in a fori_loop), qr_multiply, eigh_tridiagonal (Sturm bisection); the special
matrices (block_diag, toeplitz, convolution_matrix, fiedler_companion, pascal, invhilbert, dft, ...; the constant
ones built on the host from exact binomials); and expm (Pade approximant with scaling and squaring, as JAX).
docs/linalg.md says what each does where it differs from JAX."""
from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ember import lax
from ember import numpy as enp
from ember._api.forward import jvp as _jvp
from ember._control.custom import pure_custom_jvp as _pure_custom_jvp
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


def qr_multiply(a: Any, c: Any, mode: str = "right", pivoting: bool = False, conjugate: bool = False,
                overwrite_a: bool = False, overwrite_c: bool = False) -> tuple[Any, Any]:
    """(c @ Q, R) (mode 'right', c (..., P, M)) or (Q @ c, R) ('left', c (..., K, P)) for a = Q R (..., M, N),
    K = min(M, N): Q's first K columns are the ones that count (the others meet zeros), so this is ember's
    economic qr and a product; conjugate uses conj(Q). A 1-D c is a row ('right') or column ('left') vector and
    the product comes back 1-D. Leading dimensions broadcast. Differentiable where qr is (M >= N), where JAX's
    (through geqrf) is not; pivoting=True (column-pivoted QR) is not supported."""
    if pivoting:
        raise NotImplementedError("scipy.linalg.qr_multiply: pivoting=True (column-pivoted QR) is not supported")
    if mode not in ("right", "left"):
        raise ValueError(f"scipy.linalg.qr_multiply: mode must be 'right' or 'left', got {mode!r}")
    a, c = _f._float_operands("qr_multiply", a, c)
    if enp.ndim(a) < 2:
        raise ValueError(f"scipy.linalg.qr_multiply: a must have at least 2 dimensions, got shape {enp.shape(a)}")
    if enp.ndim(c) == 0:
        raise ValueError("scipy.linalg.qr_multiply: c must have at least 1 dimension, got a scalar")
    vector = enp.ndim(c) == 1
    if vector:
        c = c[:, None] if mode == "left" else c[None, :]
    m, n = enp.shape(a)[-2:]
    k = min(m, n)
    inner, expected = (enp.shape(c)[-2], k) if mode == "left" else (enp.shape(c)[-1], m)
    if inner != expected:
        side = f"Q @ c needs c with {k} rows" if mode == "left" else f"c @ Q needs c with {m} columns"
        raise ValueError(f"scipy.linalg.qr_multiply: a has shape {enp.shape(a)}, so {side} (mode={mode!r}), got c "
                         f"of shape {enp.shape(c) if not vector else (inner,)}")
    q, r = _f.qr(a, "reduced")
    if conjugate:
        q = enp.conj(q)
    product = enp.matmul(q, c) if mode == "left" else enp.matmul(c, q)
    if vector:
        product = product[..., 0] if mode == "left" else product[..., 0, :]
    return product, r


def hessenberg(a: Any, *, calc_q: bool = False, overwrite_a: bool = False, check_finite: bool = True) -> Any:
    """The upper Hessenberg form H (zero below the first subdiagonal) of the square a (..., N, N), with
    a = Q H Q^H, and the unitary Q with calc_q: (H, Q). The values come from LAPACK, as JAX's (gehrd: the
    hessenberg primitive, and Q = diag(1, Q') from its reflectors by householder_product), so H and Q equal JAX's
    and scipy's entry for entry (but for scipy's shortcut of complex 2x2 matrices); unlike JAX's they also
    differentiate: the derivative is that of the same Householder steps written in ember.numpy (below)."""
    a = _f._matrix("hessenberg", a, square=True)
    n = enp.shape(a)[-1]
    if n == 0:
        return (enp.zeros_like(a), enp.zeros_like(a)) if calc_q else enp.zeros_like(a)
    return _hessenberg(a, bool(calc_q))


def _hessenberg_lapack(a: Any, calc_q: bool) -> Any:
    """(H, Q) or H by LAPACK's gehrd and orgqr (the primitives)."""
    reflectors, taus = _lax_linalg.hessenberg(a)
    h = enp.triu(reflectors, -1)
    if not calc_q:
        return h
    q = _lax_linalg.householder_product(reflectors[..., 1:, :-1], taus)
    q = enp.pad(q, [(0, 0)] * (enp.ndim(q) - 2) + [(1, 0), (1, 0)])
    return h, q.at[..., 0, 0].set(1)


_hessenberg = _pure_custom_jvp(_hessenberg_lapack, nondiff_argnums=(1,))


@_hessenberg.defjvp
def _hessenberg_jvp(calc_q: bool, primals: Any, tangents: Any) -> Any:
    # the values by LAPACK; the tangents those of the same reflections written with ember.numpy (which compute the
    # same H and Q, up to rounding)
    (a,), (da,) = primals, tangents
    _, tangent = _jvp(lambda a: _hessenberg_steps(a, calc_q), (a,), (da,))
    return _hessenberg_lapack(a, calc_q), tangent


def _hessenberg_steps(a: Any, calc_q: bool) -> Any:
    """(H, Q) or H by Householder reflections with LAPACK gehrd's choices (beta = -sign(Re alpha) * norm, no
    reflection where nothing is left to zero and alpha is real), one rank-one update of H and Q per column in a
    fori_loop, written in ember.numpy: the differentiable twin of _hessenberg_lapack."""
    n = enp.shape(a)[-1]
    rows = np.arange(n)
    eye = enp.broadcast_to(enp.eye(n, dtype=a.dtype), enp.shape(a))

    def reflect(k: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:
        # G = I - tau v v^H with v[k + 1] = 1 and v[:k + 1] = 0 sends column k below its diagonal, x, to
        # (beta, 0, ...): G^H x = beta e_{k+1}; then h <- G^H h G and q <- q G
        h, q = state
        x = enp.sum(h * (rows == k), axis=-1)  # column k, (..., n)
        alpha = enp.sum(x * (rows == k + 1), axis=-1, keepdims=True)
        below = rows > k + 1
        rest = enp.sum(enp.where(below, enp.abs(x) ** 2, 0), axis=-1, keepdims=True)
        norm = enp.sqrt(enp.real(alpha) ** 2 + enp.imag(alpha) ** 2 + rest)
        beta = -enp.copysign(norm, enp.real(alpha))
        skip = (rest == 0) & (enp.imag(alpha) == 0)  # (nothing to zero and alpha real: G = I, LAPACK's tau = 0)
        safe_beta = enp.where(skip, 1, beta)
        tau = enp.where(skip, 0, (safe_beta - alpha) / safe_beta)
        v = enp.where(below, x / enp.where(skip, 1, alpha - safe_beta), (rows == k + 1).astype(a.dtype))
        v_h = enp.conj(v)
        # right: h G = h - tau (h v) v^H; left: G^H h = h - conj(tau) v (v^H h)
        h = h - enp.expand_dims(tau * enp.sum(h * v[..., None, :], axis=-1), -1) * v_h[..., None, :]
        h = h - enp.conj(tau)[..., None] * v[..., :, None] * enp.sum(v_h[..., :, None] * h, axis=-2)[..., None, :]
        q = q - enp.expand_dims(tau * enp.sum(q * v[..., None, :], axis=-1), -1) * v_h[..., None, :]
        return h, q

    h, q = lax.fori_loop(0, max(n - 1, 0), reflect, (a, eye))
    h = enp.triu(h, -1)
    return (h, q) if calc_q else h


def eigh_tridiagonal(d: Any, e: Any, *, eigvals_only: bool = False, select: str = "a", select_range: Any = None,
                     tol: float | None = None, key: Any = None) -> Any:
    """The eigenvalues (ascending) of the symmetric (Hermitian) tridiagonal matrix with diagonal d (n,) and
    off-diagonal e (n - 1,) (e above the diagonal, conj(e) below), all of them (select 'a') or those of indices
    select_range[0] ..= select_range[1] ('i'; 'v' is not supported, as JAX), and with eigvals_only=False the
    eigenvectors as columns: (w, v).

    The eigenvalues come from bisection on Sturm counts (the number of eigenvalues below x is the number of
    negative pivots of T - x I), all of them at once in a while_loop, from Gershgorin's interval down to tol
    (at least eps * ||T||) or the mantissa's bits. The eigenvectors come from ember's eigh of the dense matrix
    (O(n^3), where JAX runs inverse iteration from random vectors: key is accepted for its signature and not
    used), so they are orthonormal also for clustered eigenvalues. d and e must have one dtype, float32, float64,
    complex64 or complex128; the eigenvalues are real."""
    d, e = enp.asarray(d), enp.asarray(e)
    if d.dtype != e.dtype:
        raise TypeError(f"scipy.linalg.eigh_tridiagonal: d and e must have the same dtype, got {d.dtype} and "
                        f"{e.dtype}")
    if not dt.is_inexact(d.dtype) or d.dtype.itemsize < 4:
        raise TypeError(f"scipy.linalg.eigh_tridiagonal: d and e must be float32, float64, complex64 or "
                        f"complex128, got {d.dtype}")
    if enp.ndim(d) != 1 or enp.shape(e) != (max(enp.shape(d)[0] - 1, 0),):
        raise ValueError(f"scipy.linalg.eigh_tridiagonal: d must be a vector (n,) and e a vector (n - 1,), got "
                         f"shapes {enp.shape(d)} and {enp.shape(e)}")
    n = enp.shape(d)[0]
    if select == "v":
        raise NotImplementedError("scipy.linalg.eigh_tridiagonal: select='v' (eigenvalues in an interval: a shape "
                                  "that depends on the values) is not supported")
    if select == "a":
        first, last = 0, n - 1
    elif select == "i":
        if select_range is None:
            raise ValueError("scipy.linalg.eigh_tridiagonal: select='i' needs select_range=(first, last)")
        first, last = (operator.index(i) for i in select_range)
        if not 0 <= first <= last < n:
            raise ValueError(f"scipy.linalg.eigh_tridiagonal: select_range must be indices 0 <= first <= last < "
                             f"{n}, got {tuple(select_range)}")
    else:
        raise ValueError(f"scipy.linalg.eigh_tridiagonal: select must be 'a', 'i' or 'v', got {select!r}")
    diagonal = enp.real(d)
    if n <= 1:
        w = diagonal[first:last + 1]
        return w if eigvals_only else (w, enp.eye(n, dtype=d.dtype))
    w = _tridiagonal_bisection(diagonal, enp.real(e * enp.conj(e)), np.arange(first, last + 1), tol)
    if eigvals_only:
        return w
    dense = enp.diag(d) + enp.diag(e, 1) + enp.diag(enp.conj(e), -1)
    return w, _f.eigh(dense).eigenvectors[:, first:last + 1]


def _tridiagonal_bisection(diagonal: Any, off_squared: Any, targets: np.ndarray, tol: float | None) -> Any:
    """Eigenvalue number t (ascending) for each t in targets of the tridiagonal matrix (real diagonal, squared
    off-diagonal magnitudes): bisection keeping count(lower) <= t < count(upper), count(x) the number of
    eigenvalues below x."""
    n = enp.shape(diagonal)[0]
    info = np.finfo(diagonal.dtype)
    off = enp.sqrt(off_squared)
    radius = enp.concatenate([off[:1], off[:-1] + off[1:], off[-1:]])  # Gershgorin radii
    low, high = enp.min(diagonal - radius), enp.max(diagonal + radius)
    norm = enp.maximum(enp.abs(low), enp.abs(high))
    # the smallest pivot allowed (LAPACK's pivmin): a zero pivot is taken as -pivmin, counted negative
    pivmin = float(info.tiny) * enp.maximum(1.0, enp.max(off_squared))
    slack = 2 * n * float(info.eps) * norm + 4 * pivmin
    stop = float(info.eps) * norm if tol is None else enp.maximum(tol, float(info.eps) * norm)
    want = enp.asarray(targets, dtype=np.int32)
    lower = enp.broadcast_to(low - slack, targets.shape).astype(diagonal.dtype)
    upper = enp.broadcast_to(high + slack, targets.shape).astype(diagonal.dtype)

    def count(x: Any) -> Any:
        def pivot(i: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:
            q, below = state
            q = diagonal[i] - x - off_squared[i - 1] / q
            negative = q <= pivmin
            return enp.where(negative, enp.minimum(q, -pivmin), q), below + negative.astype(np.int32)
        q = diagonal[0] - x
        negative = q <= pivmin
        q = enp.where(negative, enp.minimum(q, -pivmin), q)
        return lax.fori_loop(1, n, pivot, (q, negative.astype(np.int32)))[1]

    def halve(state: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        i, lower, upper = state
        middle = (lower + upper) / 2
        above = count(middle) <= want  # (eigenvalue number t is at least middle)
        return i + 1, enp.where(above, middle, lower), enp.where(above, upper, middle)

    def going(state: tuple[Any, Any, Any]) -> Any:
        i, lower, upper = state
        return (i < info.nmant + 2) & (enp.max(upper - lower) > stop)

    _, lower, upper = lax.while_loop(going, halve, (0, lower, upper))
    return (lower + upper) / 2


def solve_sylvester(A: Any, B: Any, C: Any, *, method: str = "schur", tol: float = 1e-8) -> Any:  # noqa: N803
    """X with A X + X B = C, for A (..., m, m), B (..., n, n), C (..., m, n) (leading dimensions broadcast); NaN
    where some eigenvalues of A and B sum to less than tol in magnitude (no unique solution), as JAX.

    method 'schur' (Bartels and Stewart): A = U R U^H and B^H = V S V^H (complex Schur forms) turn the equation
    into R Y + Y S^H = U^H C V with R upper and S^H lower triangular, solved one column of Y at a time from the
    last (column j: (R + conj(S_jj)) y_j = f_j - sum_{l>j} y_l conj(S_jl), a triangular solve), X = U Y V^H.
    method 'eigen': A = P_a diag(a) P_a^-1, B likewise, X = P_a ((P_a^-1 C P_b) / (a_i + b_j)) P_b^-1; faster,
    less accurate for non-normal matrices. Real inputs give a real X. Not differentiable: the Schur form and eig's
    eigenvectors have no derivative rules (as in JAX)."""
    if method not in ("schur", "eigen"):
        raise ValueError(f"scipy.linalg.solve_sylvester: method must be 'schur' or 'eigen', got {method!r}")
    a, b, c = _f._float_operands("solve_sylvester", A, B, C)
    for name, x in (("A", a), ("B", b), ("C", c)):
        if enp.ndim(x) < 2:
            raise ValueError(f"scipy.linalg.solve_sylvester: {name} must have at least 2 dimensions, got shape "
                             f"{enp.shape(x)}")
    m, n = enp.shape(c)[-2:]
    if enp.shape(a)[-2:] != (m, m) or enp.shape(b)[-2:] != (n, n):
        raise ValueError(f"scipy.linalg.solve_sylvester: A must be (..., m, m), B (..., n, n) and C (..., m, n); got "
                         f"A {enp.shape(a)}, B {enp.shape(b)}, C {enp.shape(c)}")
    solve_2d = _sylvester_schur if method == "schur" else _sylvester_eigen
    x = enp.vectorize(lambda a, b, c: solve_2d(a, b, c, tol), signature="(m,m),(n,n),(m,n)->(m,n)")(a, b, c)
    return x if dt.is_complex(c.dtype) else enp.real(x)


def _sylvester_schur(a: Any, b: Any, c: Any, tol: float) -> Any:
    r, u = schur(a, output="complex")
    s, v = schur(enp.conj(b.T), output="complex")
    w = enp.conj(s.T)  # lower triangular, B's eigenvalues on its diagonal
    f = enp.matmul(enp.matmul(enp.conj(u.T), c.astype(r.dtype)), v)
    m, n = enp.shape(f)
    eye = enp.eye(m, dtype=r.dtype)

    def column(t: Any, y: Any) -> Any:
        j = n - 1 - t
        rhs = f[:, j] - enp.matmul(y, w[:, j])  # (y's columns j and left are still zero)
        yj = _lax_linalg.triangular_solve(r + w[j, j] * eye, rhs[:, None], left_side=True, lower=False)
        return y.at[:, j].set(yj[:, 0])
    y = lax.fori_loop(0, n, column, enp.zeros_like(f))
    x = enp.matmul(enp.matmul(u, y), enp.conj(v.T))
    return _nan_if_singular(x, enp.diagonal(r), enp.diagonal(w), tol)


def _sylvester_eigen(a: Any, b: Any, c: Any, tol: float) -> Any:
    ea, pa = _f.eig(a)
    eb, pb = _f.eig(b)
    f = _f.solve(pa, enp.matmul(c.astype(pa.dtype), pb))
    y = f / (ea[:, None] + eb[None, :])
    x = enp.matmul(enp.matmul(pa, y), _f.inv(pb))
    return _nan_if_singular(x, ea, eb, tol)


def _nan_if_singular(x: Any, eigenvalues_a: Any, eigenvalues_b: Any, tol: float) -> Any:
    singular = enp.any(enp.abs(eigenvalues_a[:, None] + eigenvalues_b[None, :]) < tol)
    return enp.where(singular, np.nan, x)


def _order(name: str, n: Any, arg: str = "n") -> int:
    """A matrix order: a non-negative Python integer (TypeError, ValueError otherwise, as scipy's)."""
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"scipy.linalg.{name}: {arg} must be an integer, got {n!r}") from None
    if n < 0:
        raise ValueError(f"scipy.linalg.{name}: {arg} must be non-negative, got {n}")
    return n


def _binomials(rows: int, cols: int) -> np.ndarray:
    """C(k, j) for k < rows, j < cols as float64 (0 for j > k), by Pascal's rule one row at a time: exact below
    2^53, then correctly rounded sums, inf past float64's range. The constant matrices below (their only argument
    a static order) are built from it on the host, exact where JAX's come from lgamma in the default float."""
    table = np.zeros((max(rows, 1), max(cols, 1)))
    table[0, 0] = 1.0
    with np.errstate(over="ignore"):
        for k in range(1, rows):
            table[k, 0] = 1.0
            table[k, 1:] = table[k - 1, 1:] + table[k - 1, :-1]
    return table[:rows, :cols]


def _alternating(n: int) -> np.ndarray:
    """(-1)^(i + j) for i, j < n."""
    return 1.0 - 2.0 * (np.add.outer(np.arange(n), np.arange(n)) % 2)


def _kind(name: str, kind: str | None) -> str:
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"scipy.linalg.{name}: kind must be 'symmetric', 'lower' or 'upper' (or None), got "
                         f"{kind!r}")
    return kind


def pascal(n: int, kind: str | None = None) -> Any:
    """The n x n Pascal matrix: binomial coefficients C(i + j, i) (kind 'symmetric', the default), its lower
    Cholesky factor C(i, j) ('lower') or that transposed ('upper'); float32, as JAX's (whatever enable_x64 says;
    scipy's are exact integers), here from exact binomials rounded once."""
    n, kind = _order("pascal", n), _kind("pascal", kind)
    if kind == "symmetric":
        table = _binomials(2 * n, n)
        values = table[np.add.outer(np.arange(n), np.arange(n)), np.arange(n)[:, None]] if n else table
    else:
        values = _binomials(n, n)
    return enp.asarray((values.T if kind == "upper" else values).astype(np.float32))


def invpascal(n: int, kind: str | None = None) -> Any:
    """The inverse of pascal(n, kind) in the default float dtype: (-1)^(i - j) C(i, j) for 'lower', its transpose
    for 'upper', and the product upper @ lower for 'symmetric' (entries (-1)^(i + j) sum_k C(k, i) C(k, j), all
    of one sign, so the float64 sum loses nothing to cancellation). scipy's exact=True is not offered (as JAX)."""
    n, kind = _order("invpascal", n), _kind("invpascal", kind)
    lower = _binomials(n, n)
    if kind == "symmetric":
        values = _alternating(n) * (lower.T @ lower)
    else:
        values = _alternating(n) * lower
        values = values.T if kind == "upper" else values
    return enp.asarray(values.astype(dt.default_float_dtype()))


def invhilbert(n: int) -> Any:
    """The inverse of the n x n Hilbert matrix in the default float dtype: (-1)^(i + j) (i + j + 1)
    C(n + i, n - j - 1) C(n + j, n - i - 1) C(i + j, i)^2, from exact binomials (inf where an entry passes the
    dtype's range: float32 from n = 28, float64 from n = 204). scipy's exact=True is not offered (as JAX)."""
    n = _order("invhilbert", n)
    table = _binomials(2 * n, n)
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    with np.errstate(over="ignore", invalid="ignore"):
        values = (_alternating(n) * (i + j + 1) * table[n + i, n - j - 1] * table[n + j, n - i - 1]
                  * table[i + j, np.broadcast_to(i, (n, n))] ** 2)
        return enp.asarray(values.astype(dt.default_float_dtype()))


def hadamard(n: int, dtype: Any = int) -> Any:
    """The n x n Hadamard matrix of Sylvester's construction (n a power of 2): entry (i, j) is (-1) to the number
    of bits i and j share, so H @ H.T = n I. dtype as JAX's (int: the default integer dtype)."""
    n = _order("hadamard", n)
    if n < 1 or n & (n - 1):
        raise ValueError(f"scipy.linalg.hadamard: n must be a positive power of 2, got {n}")
    dtype = dt.check_user_dtype(dtype, "scipy.linalg.hadamard")
    shared = np.bitwise_and.outer(np.arange(n), np.arange(n))
    parity = np.zeros((n, n), np.int64)
    for bit in range(n.bit_length()):
        parity ^= (shared >> bit) & 1
    return enp.asarray(1 - 2 * parity, dtype=dtype)


def dft(n: int, scale: str | None = None, *, dtype: Any = None) -> Any:
    """The n x n discrete Fourier transform matrix, exp(-2 pi i jk / n), unscaled (scale None), over sqrt(n)
    ('sqrtn', unitary) or over n ('n'); complex, the default complex dtype unless dtype (complex) says. The angles
    come from jk mod n in float64 on the host, so large orders stay accurate in complex64 too."""
    n = _order("dft", n)
    if scale not in (None, "sqrtn", "n"):
        raise ValueError(f"scipy.linalg.dft: scale must be None, 'sqrtn' or 'n', got {scale!r}")
    if dtype is None:
        dtype = dt.default_complex_dtype()
    else:
        dtype = dt.check_user_dtype(dtype, "scipy.linalg.dft")
        if not dt.is_complex(dtype):
            raise ValueError(f"scipy.linalg.dft: dtype must be a complex floating-point dtype, got {dtype.name}")
    angles = (-2 * np.pi / max(n, 1)) * (np.multiply.outer(np.arange(n), np.arange(n)) % max(n, 1))
    values = np.exp(1j * angles)
    if scale == "sqrtn":
        values = values / np.sqrt(n)
    elif scale == "n":
        values = values / n
    return enp.asarray(values.astype(dtype))


def convolution_matrix(a: Any, n: int, mode: str = "full") -> Any:
    """The Toeplitz matrix A with A @ v = convolve(a, v, mode) for every v of length n: entry (i, j) is
    a[i + offset - j] (0 outside a), offset 0 for 'full' (m + n - 1 rows), (min(m, n) - 1) // 2 for 'same' (max(m, n)
    rows) and min(m, n) - 1 for 'valid' (max(m, n) - min(m, n) + 1 rows). a (..., m) gives (..., rows, n), in a's
    dtype; a gather, so it differentiates and vmaps."""
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"scipy.linalg.convolution_matrix: n must be an integer, got {n!r}") from None
    if n <= 0:
        raise ValueError(f"scipy.linalg.convolution_matrix: n must be a positive integer, got {n}")
    a = enp.asarray(a)
    if enp.ndim(a) == 0:
        raise ValueError("scipy.linalg.convolution_matrix: a must be at least 1-dimensional, got a scalar")
    m = enp.shape(a)[-1]
    if m < 1:
        raise ValueError(f"scipy.linalg.convolution_matrix: a must have at least 1 element along its last axis, got "
                         f"shape {enp.shape(a)}")
    offsets = {"full": (m + n - 1, 0), "same": (max(m, n), (min(m, n) - 1) // 2),
               "valid": (max(m, n) - min(m, n) + 1, min(m, n) - 1)}
    if mode not in offsets:
        raise ValueError(f"scipy.linalg.convolution_matrix: mode must be 'full', 'same' or 'valid', got {mode!r}")
    rows, offset = offsets[mode]
    index = np.arange(rows)[:, None] + offset - np.arange(n)[None, :]
    inside = (index >= 0) & (index < m)
    return enp.where(inside, a[..., np.clip(index, 0, m - 1)], 0)


# fiedler_companion's pattern for order n: row i (even) holds -a[i + 1] at column max(i - 1, 0), -a[i + 2] at column
# i + 1 and 1 at column i + 2; row i (odd) holds 1 at column max(i - 2, 0) (Fiedler 2003: the product of the
# elementary factors F_1 ... F_n taken odd ones first). Index k > 0 stands for -a[k], _ONE for 1, 0 for 0.
_ONE = -1


def _fiedler_pattern(n: int) -> np.ndarray:
    pattern = np.zeros((n, n), np.int64)
    for i in range(n):
        if i % 2 == 0:
            pattern[i, max(i - 1, 0)] = i + 1
            if i + 1 < n:
                pattern[i, i + 1] = i + 2
            if i + 2 < n:
                pattern[i, i + 2] = _ONE
        else:
            pattern[i, max(i - 2, 0)] = _ONE
    return pattern


def fiedler_companion(a: Any) -> Any:
    """The Fiedler companion matrix of the polynomial with coefficients a (..., N) (highest degree first): a
    pentadiagonal (N - 1) x (N - 1) matrix whose eigenvalues are the polynomial's roots, sparser than companion's.
    Leading dimensions are a batch; N = 1 gives a 0 x 0 matrix. a[..., 0] == 0 is not checked (inf or nan
    entries, as JAX). Integers become the default float."""
    (a,) = _f._float_operands("fiedler_companion", a)
    a = enp.atleast_1d(a)
    size = enp.shape(a)[-1]
    if size == 0:
        raise ValueError(f"scipy.linalg.fiedler_companion: a must have at least one coefficient along its last "
                         f"axis, got shape {enp.shape(a)}")
    pattern = _fiedler_pattern(size - 1)
    coefficients = -(a / a[..., :1])
    return enp.where(pattern == _ONE, 1, enp.where(pattern > 0, coefficients[..., np.maximum(pattern, 0)], 0))


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


__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "companion", "convolution_matrix", "det",
           "dft", "eigh", "eigh_tridiagonal", "expm", "expm_frechet", "fiedler", "fiedler_companion", "funm",
           "hadamard", "hankel", "helmert", "hessenberg", "hilbert", "inv", "invhilbert", "invpascal", "leslie", "lu",
           "lu_factor", "lu_solve", "pascal", "polar", "qr", "qr_multiply", "rsf2csf", "schur", "solve",
           "solve_sylvester", "solve_triangular", "sqrtm", "svd", "toeplitz"]
