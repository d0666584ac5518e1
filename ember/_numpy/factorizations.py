"""The factorisation-based functions of ember.numpy.linalg (and ember.scipy.linalg's building blocks), written on
the primitives of ember/_prims/linalg.py with jax.numpy.linalg's semantics: leading dimensions are a batch,
integer inputs become the default float dtype, complex inputs (complex64, complex128) are taken as they are (with
conjugate transposes where a real matrix has transposes), and the results of eigh, svd, slogdet and qr are named
tuples.
ember.numpy.linalg re-exports them (this module declares no names of ember.numpy itself)."""
from __future__ import annotations

import builtins
import math
from typing import Any, NamedTuple, Sequence

import numpy as _np

from ember._api.jit import jit
from ember._control.custom import pure_custom_jvp
from ember._control.loops import fori_loop, while_loop
from ember._core import aval_of
from ember._core import dtypes as dt
from ember._core.checks import static_int
from ember._prims import linalg as lax_linalg
from ember._prims.linalg import mH, mT
from ember._numpy.creation import asarray, eye
from ember._numpy.linalg import matmul
from ember._numpy.promotion import _promote
from ember._numpy.cumulative import cumprod
from ember._numpy.manipulation import pad
from ember._numpy.mathfuncs import conj, imag, isinf, isnan, real
from ember._numpy.reductions import any as any_, max as max_, prod, sum as sum_
from ember._numpy.selection import take_along_axis, where
from ember._numpy.shape import broadcast_to, concatenate, diagonal, expand_dims, ndim, reshape, shape, transpose
from ember._numpy.sorting import argsort
from ember._numpy.ufuncs import abs as abs_, divide, log, multiply, sign, greater, sqrt, subtract
from ember._prims.elementwise import rsqrt


class EighResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class EigResult(NamedTuple):
    eigenvalues: Any
    eigenvectors: Any


class SVDResult(NamedTuple):
    U: Any
    S: Any
    Vh: Any


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Any


class QRResult(NamedTuple):
    Q: Any
    R: Any


def _float_operands(name: str, *xs: Any) -> list[Any]:
    """The operands as arrays of their common inexact dtype (integers and booleans become the default float;
    complex64 and complex128 stay)."""
    arrays = _promote(name, *xs, inexact=True)
    dtype = aval_of(arrays[0]).dtype
    if not dt.is_inexact(dtype) or dtype == dt.float16 or dtype.name == "bfloat16":
        raise TypeError(f"linalg.{name}: needs float32, float64, complex64 or complex128 inputs, got "
                        + ", ".join(aval_of(a).str_short() for a in arrays))
    return arrays


def _matrix(name: str, x: Any, square: bool = False, arg: str = "a") -> Any:
    (x,) = _float_operands(name, x)
    s = shape(x)
    if len(s) < 2:
        raise ValueError(f"linalg.{name}: {arg} must have at least 2 dimensions, got shape {s}")
    if square and s[-1] != s[-2]:
        raise ValueError(f"linalg.{name}: {arg} must be a (stack of) square matrices, got shape {s}")
    return x


def _eps(x: Any) -> float:
    return float(_np.finfo(aval_of(x).dtype).eps)


# --- Cholesky, LU, solve, inverse, determinants --------------------------------------------------------------
def cholesky(a: Any, *, upper: bool = False, symmetrize_input: bool = True) -> Any:
    """The Cholesky factor of the (stack of) positive definite (Hermitian) a: lower (a = L L^H), or upper
    (a = U^H U); NaNs where a is not positive definite, as JAX."""
    a = _matrix("cholesky", a, square=True)
    factor = lax_linalg.cholesky(a, symmetrize_input=symmetrize_input)
    return mH(factor) if upper else factor


def lu_factor(a: Any) -> tuple[Any, Any, Any]:
    """(lu, pivots, permutation) of the (stack of) matrices a (jax.lax.linalg.lu)."""
    return lax_linalg.lu(_matrix("lu_factor", a))


def _permute_rows(b: Any, perm: Any) -> Any:
    """b[..., perm, :] with perm's batch dimensions broadcast against b's."""
    index = expand_dims(perm, -1)
    batch = _np.broadcast_shapes(shape(index)[:-2], shape(b)[:-2])
    index = broadcast_to(index, batch + (shape(index)[-2], shape(b)[-1]))
    return take_along_axis(broadcast_to(b, batch + shape(b)[-2:]), index, axis=-2)


def lu_solve_factored(lu: Any, perm: Any, b: Any, trans: int = 0) -> Any:
    """x with a x = b (trans 0), a^T x = b (trans 1) or a^H x = b (trans 2) from a's LU factors; b (..., n, k)."""
    batch = _np.broadcast_shapes(shape(lu)[:-2], shape(b)[:-2])
    lu = broadcast_to(lu, batch + shape(lu)[-2:])
    b = broadcast_to(b, batch + shape(b)[-2:])
    perm = broadcast_to(perm, batch + shape(perm)[-1:])
    if trans == 0:
        x = _permute_rows(b, perm)
        x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
        return lax_linalg.triangular_solve(lu, x, left_side=True, lower=False)
    # a = P^T L U, a^T = U^T L^T P: solve U^T y = b, L^T z = y, then x = P^T z (x[perm] = z); a^H likewise
    conjugate = trans == 2
    x = lax_linalg.triangular_solve(lu, b, left_side=True, lower=False, transpose_a=True, conjugate_a=conjugate)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, transpose_a=True, conjugate_a=conjugate,
                                    unit_diagonal=True)
    return _permute_rows(x, argsort(perm, axis=-1).astype(_np.int32))


def solve(a: Any, b: Any) -> Any:
    """x with a x = b for the (stack of) square a; b is a vector (n,) when 1-D, else a (stack of) matrices
    (..., n, k), batch dimensions broadcast (JAX >= 0.5 and the array API: a batch of vectors is b[..., None])."""
    a, b = _float_operands("solve", a, b)
    if ndim(a) < 2 or shape(a)[-1] != shape(a)[-2]:
        raise ValueError(f"linalg.solve: a must be a (stack of) square matrices, got shape {shape(a)}")
    vector = ndim(b) == 1
    if vector:
        b = expand_dims(b, -1)
    if ndim(b) < 2 or shape(b)[-2] != shape(a)[-1]:
        raise ValueError(f"linalg.solve: a of shape {shape(a)} does not fit b of shape "
                         f"{shape(b)[:-1] if vector else shape(b)} (b is a vector (n,) or a stack of matrices "
                         "(..., n, k); for a stack of vectors use solve(a, b[..., None])[..., 0])")
    batch = _np.broadcast_shapes(shape(a)[:-2], shape(b)[:-2])
    x = _solve(broadcast_to(a, batch + shape(a)[-2:]), broadcast_to(b, batch + shape(b)[-2:]))
    return x[..., 0] if vector else x


@pure_custom_jvp
def _solve(a: Any, b: Any) -> Any:
    """x with a x = b, a (..., n, n) and b (..., n, k) of the same batch, by a's LU factorisation."""
    lu, _, perm = lax_linalg.lu(a)
    return lu_solve_factored(lu, perm, b)


@_solve.defjvp
def _solve_jvp(primals: Any, tangents: Any) -> Any:
    # dx = a^-1 (db - da x), with the factors of a computed once (JAX's custom_linear_solve does the same): the
    # derivative never goes through LU's own rule, and reverse mode transposes the solve with the same factors
    (a, b), (da, db) = primals, tangents
    lu, _, perm = lax_linalg.lu(a)
    x = lu_solve_factored(lu, perm, b)
    return x, lu_solve_factored(lu, perm, subtract(db, matmul(da, x)))


def inv(a: Any) -> Any:
    """The inverse of the (stack of) square matrices a (inf/nan where singular, as JAX)."""
    a = _matrix("inv", a, square=True)
    n = shape(a)[-1]
    return solve(a, broadcast_to(eye(n, dtype=aval_of(a).dtype), shape(a)))


def _lu_det_parts(a: Any) -> tuple[Any, Any, Any]:
    """(diagonal of U, the permutation's sign, lu) of a's LU factorisation."""
    lu, pivots, _ = lax_linalg.lu(a)
    diag = diagonal(lu, 0, -2, -1)
    k = shape(pivots)[-1]
    swaps = sum_(pivots != _np.arange(k, dtype=_np.int32), axis=-1)
    parity = 1 - 2 * (swaps % 2)
    return diag, parity.astype(aval_of(a).dtype), lu


@pure_custom_jvp
def _slogdet(a: Any) -> tuple[Any, Any]:
    diag, parity, _ = _lu_det_parts(a)
    sign_ = parity * prod(sign(diag), axis=-1)
    return sign_, sum_(log(abs_(diag)), axis=-1)


@_slogdet.defjvp
def _slogdet_jvp(primals: Any, tangents: Any) -> Any:
    # with t = trace(a^-1 da): d log|det a| = Re(t); the sign is locally constant for a real a, and turns by
    # sign * i Im(t) for a complex one (JAX's rule)
    (a,), (da,) = primals, tangents
    sign_, logdet = _slogdet(a)
    t = _trace(solve(a, da))
    if dt.is_complex(aval_of(a).dtype):
        return (sign_, logdet), (sign_ * (imag(t) * 1j), real(t))
    return (sign_, logdet), (sign_ * 0, t)


def _trace(x: Any) -> Any:
    return sum_(diagonal(x, 0, -2, -1), axis=-1)


def slogdet(a: Any, *, method: str | None = None) -> SlogdetResult:
    """(sign, log|det|) of the (stack of) square matrices a (sign 0 and logabsdet -inf where singular); for a
    complex a the sign is det / |det| (complex) and log|det| real, as numpy."""
    a = _matrix("slogdet", a, square=True)
    if method not in (None, "lu"):
        raise ValueError(f"linalg.slogdet: method must be 'lu' (or None), got {method!r}")
    if shape(a)[-1] == 0:
        batch = shape(a)[:-2]
        return SlogdetResult(broadcast_to(_np.ones((), aval_of(a).dtype), batch),
                             broadcast_to(_np.zeros((), dt.real_dtype(aval_of(a).dtype)), batch))
    return SlogdetResult(*_slogdet(a))


@pure_custom_jvp
def _det(a: Any) -> Any:
    diag, parity, _ = _lu_det_parts(a)
    return parity * prod(diag, axis=-1)


@_det.defjvp
def _det_jvp(primals: Any, tangents: Any) -> Any:
    # d det a = trace(adj(a) da) = trace(det(a) a^-1 da), computed by a cofactor solve that also holds where a is
    # singular (JAX's rule)
    (a,), (da,) = primals, tangents
    d, z = _cofactor_solve(a, da)
    return d, _trace(z)


def _cofactor_solve(a: Any, b: Any) -> tuple[Any, Any]:
    """(det a, det(a) a^-1 b) for a (..., n, n) and b (..., n, k) of one batch; the second also where a is singular
    with its zero pivot last in LU (rank n - 1), and zero where a has a lower rank. With a = P^T L U: U's last
    diagonal entry u_nn is replaced by 1 / (det(a) / u_nn), so that solving with it multiplies the last component
    by det(a) / u_nn, while the others are scaled by det(a) before the solve (no division by u_nn anywhere)."""
    lu, pivots, perm = lax_linalg.lu(a)
    n = shape(a)[-1]
    dtype = aval_of(a).dtype
    diag = diagonal(lu, 0, -2, -1)
    swaps = sum_(pivots != _np.arange(n, dtype=_np.int32), axis=-1)
    sign_ = (1 - 2 * (swaps % 2)).astype(dtype)
    if n == 1:
        return diag[..., 0] * sign_, b
    partial = cumprod(diag, axis=-1) * expand_dims(sign_, -1)  # [..., -1]: det a; [..., -2]: det a / u_nn
    corner = (_np.arange(n)[:, None] == n - 1) & (_np.arange(n)[None, :] == n - 1)
    lu = where(corner, expand_dims(divide(1.0, partial[..., -2]), (-2, -1)), lu)
    # a of rank below n - 1: an inf or nan comes out of a solve with the modified U
    probe = lax_linalg.triangular_solve(lu, broadcast_to(_np.ones((), dtype), shape(lu)[:-2] + (1, n)),
                                        left_side=False, lower=False)
    low_rank = expand_dims(any_(isnan(probe) | isinf(probe), axis=(-2, -1)), (-2, -1))
    x = where(low_rank, 0.0, b)
    x = _permute_rows(x, perm)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    x = concatenate([x[..., :-1, :] * expand_dims(partial[..., -1], (-2, -1)), x[..., -1:, :]], axis=-2)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=False)
    return partial[..., -1], where(low_rank, 0.0, x)


def det(a: Any) -> Any:
    """The determinant of the (stack of) square matrices a."""
    a = _matrix("det", a, square=True)
    if shape(a)[-1] == 0:
        return broadcast_to(_np.ones((), aval_of(a).dtype), shape(a)[:-2])
    return _det(a)


# --- QR, eigh, SVD and what is built on them -------------------------------------------------------------------
def qr(a: Any, mode: str = "reduced") -> Any:
    """The QR factorisation of the (stack of) matrices a: mode 'reduced' (q (m, k), r (k, n)), 'complete'
    (q (m, m), r (m, n)) or 'r' (r only, reduced), a QRResult; or 'raw': (h (..., n, m), tau (..., k)), LAPACK's
    geqrf reflectors transposed and their scales, as numpy (not differentiable, as JAX's)."""
    a = _matrix("qr", a)
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"linalg.qr: mode must be 'reduced', 'complete', 'r' or 'raw', got {mode!r}")
    if mode == "raw":
        h, tau = lax_linalg.geqrf(a)
        return QRResult(mT(h), tau)
    q, r = lax_linalg.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def eigh(a: Any, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:  # noqa: N803
    """(eigenvalues ascending, real; eigenvectors as columns) of the (stack of) symmetric (Hermitian) a; UPLO 'L'
    (default) or 'U' says which triangle is read when symmetrize_input is False."""
    a = _matrix("eigh", a, square=True)
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    v, w = lax_linalg.eigh(a, lower=UPLO != "U", symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eig(a: Any) -> EigResult:
    """(eigenvalues, right eigenvectors as columns) of the (stack of) square a (real or complex), complex, in
    LAPACK's order and normalisation (as numpy and JAX); only the eigenvalues are differentiable (as JAX)."""
    a = _matrix("eig", a, square=True)
    w, v = lax_linalg.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=True)
    return EigResult(w, v)


def eigvals(a: Any) -> Any:
    """The eigenvalues of the (stack of) square a (real or complex), complex (differentiable)."""
    a = _matrix("eigvals", a, square=True)
    return lax_linalg.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)[0]


def eigvalsh(a: Any, UPLO: str | None = "L") -> Any:  # noqa: N803
    """The ascending (real) eigenvalues of the (stack of) symmetric (Hermitian) a."""
    return eigh(_matrix("eigvalsh", a, square=True), UPLO).eigenvalues


def svd(a: Any, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False) -> Any:
    """The singular value decomposition a = U diag(S) Vh of the (stack of) matrices a (an SVDResult), or the
    singular values alone (descending) without compute_uv."""
    a = _matrix("svd", a)
    if hermitian:  # (JAX: from eigh; the singular values are |eigenvalues|, sorted descending)
        w, v = eigh(a)
        s = abs_(w)
        idx = argsort(s, axis=-1)[..., ::-1]
        s = take_along_axis(s, idx, axis=-1)
        if not compute_uv:
            return s
        u = take_along_axis(v, broadcast_to(expand_dims(idx, -2), shape(v)), axis=-1)
        vh = mH(u * expand_dims(take_along_axis(sign(w), idx, axis=-1), -2))
        return SVDResult(u, s, vh)
    if not compute_uv:
        return lax_linalg.svd(a, full_matrices=False, compute_uv=False)
    s, u, vh = lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=True)
    return SVDResult(u, s, vh)


def svdvals(x: Any, /) -> Any:
    """The singular values of the (stack of) matrices x, descending."""
    return svd(_matrix("svdvals", x, arg="x"), compute_uv=False)


def pinv(a: Any, rtol: Any = None, hermitian: bool = False, *, rcond: Any = None) -> Any:
    """The Moore-Penrose pseudo-inverse of the (stack of) matrices a: singular values at most rtol * the largest
    are dropped (rtol defaults to 10 * max(m, n) * eps, as JAX)."""
    a = _matrix("pinv", a)
    m, n = shape(a)[-2:]
    if rcond is not None:
        rtol = rcond
    if rtol is None:
        rtol = 10 * max(m, n) * _eps(a)
    if m == 0 or n == 0:
        return mT(a)
    u, s, vh = svd(a, full_matrices=False, hermitian=hermitian)
    cutoff = multiply(_per_matrix(rtol), max_(s, axis=-1, keepdims=True))
    s_inv = where(greater(s, cutoff), divide(1.0, where(greater(s, cutoff), s, 1.0)), 0.0)
    return matmul(mH(vh) * expand_dims(s_inv, -2), mH(u))


def matrix_rank(M: Any, rtol: Any = None, *, tol: Any = None) -> Any:  # noqa: N803
    """The number of singular values above tol (absolute) or rtol * the largest (rtol defaults to
    max(m, n) * eps)."""
    (M,) = _float_operands("matrix_rank", M)
    if ndim(M) < 2:
        return (abs_(M) > 0).any().astype(_np.int32) if ndim(M) == 1 else (M != 0).astype(_np.int32)
    if 0 in shape(M)[-2:]:  # (JAX takes the maximum of no singular values: an error)
        raise ValueError(f"linalg.matrix_rank: M must not hold empty matrices, got shape {shape(M)}")
    s = svdvals(M)
    if tol is None:
        if rtol is None:
            rtol = max(shape(M)[-2:]) * _eps(M)
        tol = multiply(max_(s, axis=-1, keepdims=True, initial=0.0), _per_matrix(rtol))
    else:
        tol = _per_matrix(tol)
    return sum_(greater(s, tol), axis=-1)


def _per_matrix(x: Any) -> Any:
    """A threshold per matrix of a stack ((batch...) -> (batch..., 1)), against its singular values; a scalar as
    it is."""
    return expand_dims(x, -1) if ndim(x) else x


def lstsq(a: Any, b: Any, rcond: Any = None, *, numpy_resid: bool = False) -> tuple[Any, Any, Any, Any]:
    """(x, residuals, rank, s): the least-squares solution of a x = b by the SVD of the matrix a; singular values
    below rcond * the largest are dropped (rcond defaults to eps * max(m, n), as JAX). The residuals are the
    squared norms of b - a x per column (numpy_resid: numpy's, empty unless m > n and a has full rank)."""
    a, b = _float_operands("lstsq", a, b)
    if ndim(a) != 2:
        raise TypeError(f"linalg.lstsq: a must be 2-D, got shape {shape(a)}")
    vector = ndim(b) == 1
    if vector:
        b = expand_dims(b, -1)
    if ndim(b) != 2 or shape(b)[0] != shape(a)[0]:
        raise TypeError(f"linalg.lstsq: b must be 1-D or 2-D with {shape(a)[0]} rows, got shape {shape(b)}")
    m, n = shape(a)
    if rcond is None:
        rcond = _eps(a) * max(m, n)
    u, s, vh = svd(a, full_matrices=False)
    if builtins.min(m, n) == 0:
        mask = s > 0
    else:
        mask = s >= rcond * s[0]  # (JAX's test)
    rank = sum_(mask).astype(_np.int32)
    s_inv = where(mask, divide(1.0, where(mask, s, 1.0)), 0.0)
    x = matmul(mH(vh), expand_dims(s_inv, -1) * matmul(mH(u), b))
    resid = sum_(abs_(subtract(matmul(a, x), b)) ** 2, axis=0)
    if numpy_resid and not (m > n and int(rank) == n):
        resid = _np.zeros((0,), aval_of(a).dtype)
    if vector:
        x = x[..., 0]
    return x, resid, rank, s


def tensorsolve(a: Any, b: Any, axes: Sequence[int] | None = None) -> Any:
    """x with tensordot(a, x, x.ndim) = b: a taken as a square matrix (b's size by the size of the rest); axes
    are moved to the end of a first."""
    a, b = _float_operands("tensorsolve", a, b)
    if axes is not None:
        moved = [int(i) % ndim(a) for i in axes]
        a = transpose(a, [i for i in range(ndim(a)) if i not in moved] + moved)
    x_shape = shape(a)[ndim(b):]
    n = math.prod(x_shape)
    if math.prod(shape(b)) != n:
        raise ValueError(f"linalg.tensorsolve: a {shape(a)} and b {shape(b)} do not make a square system")
    return reshape(solve(reshape(a, (n, n)), reshape(b, (n,))), x_shape)


def tensorinv(a: Any, ind: int = 2) -> Any:
    """The inverse of a with respect to tensordot over its first ind dimensions."""
    (a,) = _float_operands("tensorinv", a)
    if ind <= 0:
        raise ValueError(f"linalg.tensorinv: ind must be positive, got {ind}")
    first, rest = shape(a)[:ind], shape(a)[ind:]
    n = math.prod(first)
    if math.prod(rest) != n:
        raise ValueError(f"linalg.tensorinv: the first {ind} dimensions of {shape(a)} and the rest differ in size")
    return reshape(inv(reshape(a, (n, n))), rest + first)


def multi_dot(arrays: Sequence[Any], *, precision: Any = None) -> Any:
    """The product of a chain of matrices (the first and last may be vectors), in the order of fewest flops, each
    product of this precision (as lax.dot_general's)."""
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError(f"linalg.multi_dot: needs at least 2 arrays, got {len(arrays)}")
    first_vec, last_vec = ndim(arrays[0]) == 1, ndim(arrays[-1]) == 1
    if first_vec:
        arrays[0] = reshape(arrays[0], (1, -1))
    if last_vec:
        arrays[-1] = reshape(arrays[-1], (-1, 1))
    for i, x in enumerate(arrays):
        if ndim(x) != 2:
            raise ValueError(f"linalg.multi_dot: array {i} must be 2-D (the ends may be 1-D), got shape {shape(x)}")
    dims = [shape(arrays[0])[0]] + [shape(x)[1] for x in arrays]
    order = _chain_order(dims)

    def product(i: int, j: int) -> Any:
        if i == j:
            return arrays[i]
        k = order[i][j]
        return matmul(product(i, k), product(k + 1, j), precision=precision)
    out = product(0, len(arrays) - 1)
    if first_vec:
        out = out[0]
    if last_vec:
        out = out[..., 0]
    return out


def _chain_order(dims: list[int]) -> list[list[int]]:
    """The split points of the cheapest parenthesisation of a matrix chain (the textbook dynamic programme)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = -1
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] < 0 or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


# --- Polar decomposition: jax.lax.linalg.qdwh ------------------------------------------------------------------
def _halley_weights(bound: float) -> tuple[float, float, float]:
    """The dynamically weighted Halley step's (a, b, c) for the lower bound of the iterate's smallest singular
    value (its largest being at most 1): Nakatsukasa, Bai and Gygi (2010), eq. (4.5)."""
    l2 = bound * bound
    gamma = (4.0 * (1.0 - l2) / (l2 * l2)) ** (1.0 / 3.0)
    root = math.sqrt(1.0 + gamma)
    a = root + 0.5 * math.sqrt(8.0 - 4.0 * gamma + 8.0 * (2.0 - l2) / (l2 * root))
    b = (a - 1.0) ** 2 / 4.0
    return a, b, a + b - 1.0


def _qr_halley(u: Any, weights: Any) -> Any:
    """One weighted Halley step through a QR factorisation (for large c): with [sqrt(c) u; I] = [q1; q2] r,
    u <- (b / c) u + (a - b / c) / sqrt(c) q1 q2^H (no inverse)."""
    a, b, c = weights[0], weights[1], weights[2]
    rows, cols = shape(u)
    q, _ = lax_linalg.qr(concatenate([u * sqrt(c), eye(cols, dtype=u.dtype)]), full_matrices=False)
    return (b / c) * u + ((a - b / c) / sqrt(c)) * matmul(q[:rows], mH(q[rows:]))


def _cholesky_halley(u: Any, weights: Any) -> Any:
    """One weighted Halley step through a Cholesky factorisation (once c is moderate): with L L^H = I + c u^H u,
    u <- (b / c) u + (a - b / c) u L^-H L^-1."""
    a, b, c = weights[0], weights[1], weights[2]
    cols = shape(u)[-1]
    factor = lax_linalg.cholesky(c * matmul(mH(u), u) + eye(cols, dtype=u.dtype), symmetrize_input=False)
    y = lax_linalg.triangular_solve(factor, u, left_side=False, lower=True, transpose_a=True, conjugate_a=True)
    z = lax_linalg.triangular_solve(factor, y, left_side=False, lower=True)
    return (b / c) * u + (a - b / c) * z


def _frobenius(x: Any) -> Any:
    return sqrt(sum_(real(x * conj(x))))


def _polar_qdwh_steps(x: Any, max_iterations: int, eps: float) -> tuple[Any, Any, Any, Any]:
    one_norm = max_(sum_(abs_(x), axis=0))
    inf_norm = max_(sum_(abs_(x), axis=1))
    # scaled so that its 2-norm is at most 1 (||x||_2 <= sqrt(||x||_1 ||x||_inf)); a zero x stays zero
    scale = where(one_norm == 0, 1, rsqrt(one_norm) * rsqrt(inf_norm))
    u = x * scale.astype(x.dtype)
    # the weights follow from the bound l alone, so they are fixed before the loop: Halley steps from l = eps up to
    # l ~ 1, through QR while c is large (its Cholesky form would be ill-conditioned), then through Cholesky
    done = 5.0 * eps
    tolerance = done ** (1.0 / 3.0)  # on ||u_k - u_k-1||_F
    qr_weights, chol_weights, bound = [], [], eps
    while bound + done < 1 and len(qr_weights) + len(chol_weights) < max_iterations:
        a, b, c = _halley_weights(bound)
        bound = bound * (a + b * bound * bound) / (1 + c * bound * bound)
        (qr_weights if c > 100 else chol_weights).append((a, b, c))
    real_dtype = dt.real_dtype(x.dtype)
    not_converged = asarray(True)
    if qr_weights:
        table = asarray(_np.array(qr_weights, dtype=real_dtype))
        u = fori_loop(0, len(qr_weights), lambda i, u: _qr_halley(u, table[i]), u)
    if chol_weights:
        table = asarray(_np.array(chol_weights, dtype=real_dtype))

        def chol_step(i: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:
            previous, _ = state
            u = _cholesky_halley(previous, table[i])
            return u, _frobenius(u - previous) > tolerance
        u, not_converged = fori_loop(0, len(chol_weights), chol_step, (u, not_converged))

    # then plain Halley steps (a, b, c = 3, 1, 3: where the weights tend as l -> 1) until u settles
    halley = asarray(_np.array([3.0, 1.0, 3.0], dtype=real_dtype))

    def more(state: tuple[Any, Any, Any]) -> Any:
        k, _, going = state
        return going & (k < max_iterations)

    def step(state: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        k, previous, _ = state
        u = _cholesky_halley(previous, halley)
        return k + 1, u, _frobenius(u - previous) > tolerance
    iterations, u, not_converged = while_loop(more, step, (asarray(len(qr_weights) + len(chol_weights)), u,
                                                           not_converged))
    u = 1.5 * u - 0.5 * matmul(u, matmul(mH(u), u))  # a Newton-Schulz step: u's columns orthonormal to rounding
    h = matmul(mH(u), x)
    return u, (h + mH(h)) / 2, iterations, ~not_converged


# one program per shape, dtype and options (as JAX's qdwh, a jit): called eagerly it does not run op by op
_polar_qdwh = jit(_polar_qdwh_steps, static_argnums=(1, 2))


def qdwh(x: Any, *, is_hermitian: bool = False, max_iterations: int | None = None, eps: float | None = None,
         dynamic_shape: tuple[int, int] | None = None) -> tuple[Any, Any, Any, Any]:
    """The polar decomposition x = u h of a full-rank matrix x (M, N), M >= N, by the QR-based dynamically weighted
    Halley iteration (jax.lax.linalg.qdwh; Nakatsukasa, Bai and Gygi, SIAM J. Matrix Anal. Appl. 31(5), 2010):
    (u, h, num_iters, is_converged), u (M, N) with orthonormal columns, h (N, N) Hermitian positive semidefinite,
    the number of iterations and whether ||u_k - u_k-1||_F fell below (5 eps)^(1/3) within max_iterations (10 by
    default). is_hermitian is accepted and unused (as in JAX); dynamic_shape (m, n) decomposes x[:m, :n] and pads
    u and h with zeros. Written with ember's qr, cholesky and loops, so it jits, vmaps and differentiates (reverse
    mode through ember's while_loop too, which JAX refuses)."""
    x = asarray(x)
    if not dt.is_inexact(x.dtype):
        raise ValueError(f"qdwh: x must be a float or complex matrix, got dtype {x.dtype} (as JAX: not inexact)")
    (x,) = _float_operands("qdwh", x)
    if ndim(x) != 2:
        raise ValueError(f"qdwh: x must be a matrix (M, N), got shape {shape(x)}")
    rows, cols = shape(x)
    if rows < cols:
        raise ValueError(f"qdwh: the input matrix of shape M x N must have M >= N, got shape {shape(x)}")
    bool(is_hermitian)  # (static, as JAX's: a traced value raises here)
    max_iterations = 10 if max_iterations is None else static_int("qdwh", "max_iterations", max_iterations)
    eps = float(_np.finfo(dt.real_dtype(x.dtype)).eps) if eps is None else float(eps)
    if dynamic_shape is None:
        return _polar_qdwh(x, max_iterations, eps)
    m, n = (static_int("qdwh", "dynamic_shape", d) for d in dynamic_shape)
    if not (0 <= n <= m <= rows and n <= cols):
        raise ValueError(f"qdwh: dynamic_shape {(m, n)} must fit x's shape {shape(x)} with m >= n")
    u, h, iterations, converged = _polar_qdwh(x[:m, :n], max_iterations, eps)
    return (pad(u, ((0, rows - m), (0, cols - n))), pad(h, ((0, cols - n), (0, cols - n))), iterations,
            converged)


LAX_LINALG = ("qdwh",)  # the names of jax.lax.linalg this module has (ember.lax.linalg re-exports them)


__all__: list[str] = []  # (ember.numpy.linalg re-exports these; ember.numpy itself has none of them)
