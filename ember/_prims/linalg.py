"""Matrix factorisations as primitives: cholesky, triangular_solve, lu, geqrf, qr, eigh, svd, eig, schur, and LAPACK's
building blocks hessenberg, householder_product, ormqr, tridiagonal, tridiagonal_solve, with
lu_pivots_to_permutation, symmetric_product and cholesky_update (jax.lax.linalg's; its qdwh is a composition, in
ember/_numpy/factorizations.py).

Every primitive works on the last two dimensions of its operands, the leading ones being a batch (batching moves
a vmapped dimension to the front and binds again). Lowering calls ember's LAPACK kernels (XLA FFI custom calls
`ember_lapack_<routine>`, ember/_runtime/_lapack.c) when they are available (ember._hlo.ffi.available); without
them cholesky, triangular_solve, qr and eigh lower to XLA's own ops (`stablehlo.cholesky`,
`stablehlo.triangular_solve`, the plugin's `Qr`, `ProductOfElementaryHouseholderReflectors` and `Eigh` custom
calls, and householder_product to the last of them), lu_pivots_to_permutation, symmetric_product and
cholesky_update always lower inline (stablehlo.while loops of ember ops), and the others raise a LoweringError naming
the function and what to install. Matrices are handed to the kernels column-major (operand_layouts /
result_layouts), so the kernels call LAPACK on them directly.

Derivatives follow JAX's rules (jax/_src/lax/linalg.py): each primitive's JVP, and a VJP written as the adjoint of
that JVP (derivations in the comments). Integer outputs (LU's pivots and permutation) carry no derivative. Real
(float32, float64) and complex (complex64, complex128) matrices: the rules are written with conjugate transposes
(JAX's, `mH`), and a reverse rule is the transpose of its JVP under JAX's pairing Re(ct * t) (docs/complex.md). Where
the JVP is not complex-linear (the real eigenvalues of eigh, the real singular values, qr's and svd's phase terms) the
rule computes the adjoint under Re<x, y> = Re tr(x^H y) and conjugates: transpose(ct) = conj(adjoint(conj(ct)))
(the conjugations vanish for real dtypes). geqrf, schur and the building blocks but tridiagonal_solve have no
derivative rules, as in JAX."""
from __future__ import annotations

import enum
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from ember._core import NO_DERIVATIVE_RULES, Primitive, ShapedArray, aval_of, scalar_literal
from ember._core import dtypes as dt
from ember._core.checks import static_int
from ember._hlo import LoweringContext, i64_array
from ember._hlo.emitter import scalar_text
from ember._hlo.lower import LoweringError
from ember._hlo import ffi
from ember._prims.elementwise import add, conj, div, eq, ge, le, lt, mul, neg, real, rsqrt, select, sub
from ember._prims.elementwise import abs as abs_, complex as make_complex, imag, max as max_
from ember._prims.reduction import argmax
from ember._prims.shape import (BatchDim, batch_at_front, batch_size, broadcast_in_dim, broadcasted_iota,
                                convert_element_type, full, moveaxis, reduce_sum, reshape, transpose, zeros)
from ember._prims.slicing import pad, slice
from ember._prims.indexing import clamp, dynamic_slice, dynamic_update_slice
from ember._prims.special import emit_function, emit_while
from ember._prims.lax_helpers import batch_matmul
from ember._prims import explicit

_INT32 = np.dtype(np.int32)
_REAL = (np.dtype(np.float32), np.dtype(np.float64))
_REAL_AND_COMPLEX = _REAL + (np.dtype(np.complex64), np.dtype(np.complex128))


# ---------------------------------------------------------------------------------------------------------------
# Shared helpers: checks, the kernels' calls, and the matrix algebra the derivative rules are written in.
def _check_matrix(op: str, x: ShapedArray, square: bool = False, arg: str = "operand",
                  dtypes: tuple[np.dtype, ...] = _REAL_AND_COMPLEX, square_error: type[Exception] = TypeError,
                  rank: int = 2) -> None:
    """x has at least `rank` dimensions (TypeError), one of dtypes (TypeError) and, with square, square last two
    dimensions (square_error: the newer primitives raise JAX's ValueError)."""
    if x.ndim < rank:
        what = "a matrix" if rank == 2 else "a vector"
        raise TypeError(f"{op}: {arg} must have at least {rank} dimension{'s' if rank > 1 else ''} ({what} or a "
                        f"batch of them), got {x.str_short()}")
    if square and x.shape[-1] != x.shape[-2]:
        raise square_error(f"{op}: {arg} must be a square matrix (or a batch of them), got {x.str_short()}")
    if np.dtype(x.dtype) not in dtypes:
        names = dtypes[0].name if len(dtypes) == 1 else ", ".join(d.name for d in dtypes[:-1]) + " or " + \
            dtypes[-1].name
        raise TypeError(f"{op}: {arg} must be {names}, got {x.str_short()}")


def _kernel(name: str) -> str | None:
    """The custom-call target of LAPACK routine `name` when ember's kernels can run it, else None."""
    target = "ember_lapack_" + name
    return target if ffi.available(target) else None


def _missing(op: str, routine: str) -> LoweringError:
    why = ffi.unavailable_reason("ember_lapack_" + routine)
    return LoweringError(
        f"{op}: needs ember's LAPACK kernels, which are not available{': ' + why if why else ''} (they need scipy "
        "and ember's C extension: pip install scipy; python3 setup.py build_ext --inplace; and "
        "ember.config.use_lapack on)")


def _lapack(ctx: LoweringContext, routine: str, operands: Sequence[str], results: Sequence[ShapedArray],
            matrices_in: Sequence[bool], matrices_out: Sequence[bool], **attrs: int) -> list[str]:
    """A call of kernel `routine`: operands and results flagged as matrices go column-major, the others
    row-major."""
    in_ranks = [ffi.rank_of(ctx, o) for o in operands]
    return ffi.custom_call(
        ctx, "ember_lapack_" + routine, operands, results, attrs,
        [ffi.column_major(r) if m else ffi.row_major(r) for r, m in zip(in_ranks, matrices_in)],
        [ffi.column_major(a.ndim) if m else ffi.row_major(a.ndim) for a, m in zip(results, matrices_out)])


def _info_aval(x: ShapedArray) -> ShapedArray:
    return ShapedArray(x.shape[:-2], _INT32)


def _hlo_triangle(ctx: LoweringContext, x: str, aval: ShapedArray, lower: bool) -> str:
    """x with the strict other triangle of its last two dimensions zeroed (in HLO)."""
    shape = aval.shape
    index = ShapedArray(shape, _INT32)
    rows = ctx.op("stablehlo.iota", [], index, {"iota_dimension": f"{len(shape) - 2} : i64"})
    cols = ctx.op("stablehlo.iota", [], index, {"iota_dimension": f"{len(shape) - 1} : i64"})
    keep = ctx.op("stablehlo.compare", [rows, cols], ShapedArray(shape, dt.bool_),
                  {"comparison_direction": f"#stablehlo<comparison_direction {'GE' if lower else 'LE'}>"})
    return ctx.op("stablehlo.select", [keep, x, ctx.constant(0, aval)], aval)


def mT(x: Any) -> Any:  # noqa: N802 - numpy's name
    """x with its last two dimensions swapped."""
    n = aval_of(x).ndim
    return transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def mm(a: Any, b: Any) -> Any:
    """The matrix product over the last two dimensions, batched over the leading ones."""
    return batch_matmul(a, b)


def _is_complex(x: Any) -> bool:
    return dt.is_complex(aval_of(x).dtype)


def _conj(x: Any) -> Any:
    """conj(x) of a complex x; a real x as it is (no equation)."""
    return conj(x) if _is_complex(x) else x


def mH(x: Any) -> Any:  # noqa: N802 - numpy's name
    """The conjugate transpose of the last two dimensions (the transpose of a real x)."""
    return _conj(mT(x))


def _cast_like(x: Any, like: Any) -> Any:
    """x in like's dtype (a real x becomes a complex one's real part; a complex x becomes its real part)."""
    dtype = aval_of(like).dtype
    return x if aval_of(x).dtype == dtype else convert_element_type(x, dtype)


def _real_part(x: Any) -> Any:
    """Re(x) of a complex x; a real x as it is."""
    return real(x) if _is_complex(x) else x


def _diag_part_imag(x: Any) -> Any:
    """i Im(x) on the diagonal, zero elsewhere: (I o (x - conj(x))) / 2; None for a real x (where it is zero)."""
    if not _is_complex(x):
        return None
    aval = aval_of(x)
    return mul(_eye(aval.shape, aval.dtype), mul(sub(x, conj(x)), 0.5))


def _mask(x: Any, lower: bool, k: int = 0) -> Any:
    """tril(x, k) (lower) or triu(x, k): the other entries zeroed."""
    aval = aval_of(x)
    rows = broadcasted_iota(_INT32, aval.shape, aval.ndim - 2)
    cols = broadcasted_iota(_INT32, aval.shape, aval.ndim - 1)
    keep = ge(add(rows, np.int32(k)), cols) if lower else le(add(rows, np.int32(k)), cols)
    return select(keep, x, full(aval.shape, 0, aval.dtype))


def _eye(shape: Sequence[int], dtype: Any) -> Any:
    """Identity matrices of the given (batched) shape."""
    rows = broadcasted_iota(_INT32, shape, len(shape) - 2)
    cols = broadcasted_iota(_INT32, shape, len(shape) - 1)
    return convert_element_type(eq(rows, cols), dtype)


def _diag(x: Any) -> Any:
    """The diagonal of the last two dimensions, as a vector (..., k)."""
    aval = aval_of(x)
    k = min(aval.shape[-2:])
    square = slice(x, (0,) * aval.ndim, aval.shape[:-2] + (k, k))
    from_eye = mul(square, _eye(aval.shape[:-2] + (k, k), aval.dtype))
    return reduce_sum(from_eye, (aval.ndim - 1,))


def _vector_to_diag(v: Any) -> Any:
    """Diagonal matrices (..., k, k) from vectors (..., k)."""
    aval = aval_of(v)
    shape = aval.shape + (aval.shape[-1],)
    return mul(broadcast_in_dim(v, shape, tuple(range(aval.ndim))), _eye(shape, aval.dtype))


def _row(v: Any, rows: int) -> Any:
    """Vectors (..., k) repeated as the rows of (..., rows, k) matrices: entry (i, j) is v[j]."""
    aval = aval_of(v)
    return broadcast_in_dim(v, aval.shape[:-1] + (rows, aval.shape[-1]), tuple(range(aval.ndim - 1)) + (aval.ndim,))


def _col(v: Any, cols: int) -> Any:
    """Vectors (..., k) repeated as the columns of (..., k, cols) matrices: entry (i, j) is v[i]."""
    aval = aval_of(v)
    return broadcast_in_dim(v, aval.shape + (cols,), tuple(range(aval.ndim)))


def _front_batching(prim: Primitive) -> Callable[..., Any]:
    """The batching rule of a primitive on trailing matrices: the batch dimension goes to the front."""
    def rule(args: list[Any], dims: list[BatchDim], **params: Any) -> tuple[list[Any], list[BatchDim]]:
        size = batch_size(args, dims)
        outs = prim.bind(*[batch_at_front(x, d, size) for x, d in zip(args, dims)], **params)
        outs = list(outs) if prim.multiple_results else [outs]
        return outs, [0] * len(outs)
    return rule


# ---------------------------------------------------------------------------------------------------------------
# cholesky(a): the lower-triangular L with a = L L^H (only a's lower triangle is read; the upper triangle of L is
# zero). A matrix that is not positive definite gives NaNs in the lower triangle, as JAX on CPU.
cholesky_p = Primitive("cholesky", checks=())
cholesky_p.def_rule("sharding_rule", explicit.batch_only("cholesky", 2))


@cholesky_p.def_rule("abstract_eval")
def _cholesky_abstract_eval(a: ShapedArray) -> ShapedArray:
    _check_matrix("cholesky", a, square=True)
    return a


@cholesky_p.def_rule("lowering")
def _cholesky_lowering(ctx: LoweringContext, a: str) -> list[str]:
    aval = ctx.aval_out
    if _kernel("potrf"):
        return _lapack(ctx, "potrf", [a], [aval, _info_aval(aval)], [True], [True, False], lower=1)[:1]
    # XLA's expander: its upper triangle is unspecified, and a failure leaves NaNs in part of the matrix only
    factor = ctx.op("stablehlo.cholesky", [a], aval, {"lower": "true"})
    boolean = ShapedArray(aval.shape, dt.bool_)
    nan = ctx.op("stablehlo.compare", [factor, factor], boolean,
                 {"comparison_direction": "#stablehlo<comparison_direction NE>"})
    batch = ShapedArray(aval.shape[:-2], dt.bool_)
    init = ctx.constant(False, ShapedArray((), dt.bool_))
    scalar = ShapedArray((), dt.bool_)
    region = ctx.region([scalar, scalar], lambda body, args: [body.op("stablehlo.or", args, scalar)])
    failed = ctx.op("stablehlo.reduce", [nan, init], batch,
                    {"dimensions": i64_array([aval.ndim - 2, aval.ndim - 1])}, [region])
    failed = ctx.broadcast(failed, batch, aval.shape, tuple(range(aval.ndim - 2)))
    factor = ctx.op("stablehlo.select", [failed, ctx.constant(float("nan"), aval), factor], aval)
    return [_hlo_triangle(ctx, factor, aval, lower=True)]


def _phi(x: Any) -> Any:
    """The lower triangle of x with its diagonal halved (the map in cholesky's derivative)."""
    aval = aval_of(x)
    return mul(_mask(x, lower=True), sub(1.0, mul(0.5, _eye(aval.shape, aval.dtype))))


@cholesky_p.def_rule("jvp")
def _cholesky_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    # dL = L phi(L^-1 dA L^-H) (complex-linear in dA)
    factor = cholesky_p.bind(primals[0])
    (da,) = tangents
    if da is None:
        return [factor], [None]
    tmp = triangular_solve(factor, da, left_side=False, lower=True, transpose_a=True, conjugate_a=True)
    inner = triangular_solve(factor, tmp, left_side=True, lower=True)
    return [factor], [mm(factor, _phi(inner))]


@cholesky_p.def_rule("vjp")
def _cholesky_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool]) -> list[Any]:
    # the transpose of the JVP (phi is its own transpose): A_bar = L^-T phi(L^T L_bar) conj(L)^-1
    (ct,), (factor,) = cts, outs
    if ct is None or not needs[0]:
        return [None]
    p = _phi(mm(mT(factor), ct))
    tmp = triangular_solve(factor, p, left_side=False, lower=True, conjugate_a=True)  # p conj(L)^-1
    return [triangular_solve(factor, tmp, left_side=True, lower=True, transpose_a=True)]  # L^-T (p L^-1)


cholesky_p.def_rule("batching", _front_batching(cholesky_p))


def cholesky(x: Any, symmetrize_input: bool = True) -> Any:
    """The lower Cholesky factor of the positive definite (Hermitian) x (..., n, n) (jax.lax.linalg.cholesky): x
    is first symmetrized, (x + x^H) / 2, unless symmetrize_input is False (then only its lower triangle is read)."""
    if symmetrize_input:
        x = symmetrize(x)
    return cholesky_p.bind(x)


def symmetrize(x: Any) -> Any:
    """(x + x^H) / 2 over the last two dimensions (x^H: the conjugate transpose)."""
    _check_matrix("symmetrize", aval_of(x), square=True, arg="x")
    return mul(add(x, mH(x)), 0.5)


# ---------------------------------------------------------------------------------------------------------------
# triangular_solve(a, b): x with op(a) x = b (left_side) or x op(a) = b, op(a) = a or a^T (transpose_a); only a's
# lower (lower) or upper triangle is read, and its diagonal taken as ones with unit_diagonal.
triangular_solve_p = Primitive("triangular_solve", checks=())
triangular_solve_p.def_rule("sharding_rule", explicit.batch_only("triangular_solve", 2))


@triangular_solve_p.def_rule("abstract_eval")
def _triangular_solve_abstract_eval(a: ShapedArray, b: ShapedArray, *, left_side: bool, lower: bool,
                                    transpose_a: bool, unit_diagonal: bool) -> ShapedArray:
    _check_matrix("triangular_solve", a, square=True, arg="a", dtypes=_REAL_AND_COMPLEX)
    _check_matrix("triangular_solve", b, arg="b", dtypes=_REAL_AND_COMPLEX)
    if a.dtype != b.dtype:
        raise TypeError(f"triangular_solve: a and b must have one dtype, got {a.str_short()} and {b.str_short()}")
    if a.shape[:-2] != b.shape[:-2]:
        raise TypeError(f"triangular_solve: a and b must have the same batch dimensions, got {a.str_short()} and "
                        f"{b.str_short()}")
    k = b.shape[-2] if left_side else b.shape[-1]
    if a.shape[-1] != k:
        raise TypeError(f"triangular_solve: a {a.str_short()} does not fit b {b.str_short()} "
                        f"(left_side={left_side})")
    return b


@triangular_solve_p.def_rule("lowering")
def _triangular_solve_lowering(ctx: LoweringContext, a: str, b: str, *, left_side: bool, lower: bool,
                               transpose_a: bool, unit_diagonal: bool) -> list[str]:
    if _kernel("trsm"):
        return _lapack(ctx, "trsm", [a, b], [ctx.aval_out], [True, True], [True], left_side=int(left_side),
                       lower=int(lower), transpose_a=int(transpose_a), unit_diagonal=int(unit_diagonal))
    return [ctx.op("stablehlo.triangular_solve", [a, b], ctx.aval_out, {
        "left_side": str(left_side).lower(), "lower": str(lower).lower(),
        "unit_diagonal": str(unit_diagonal).lower(),
        "transpose_a": f"#stablehlo<transpose {'TRANSPOSE' if transpose_a else 'NO_TRANSPOSE'}>"})]


def _triangle_of(a: Any, lower: bool, unit_diagonal: bool) -> Any:
    return _mask(a, lower, -1 if lower else 1) if unit_diagonal else _mask(a, lower)


def _op(a: Any, transpose_a: bool) -> Any:
    return mT(a) if transpose_a else a


@triangular_solve_p.def_rule("jvp")
def _triangular_solve_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, left_side: bool, lower: bool,
                          transpose_a: bool, unit_diagonal: bool) -> tuple[list[Any], list[Any]]:
    # op(a) x = b: dx = op(a)^-1 (db - op(da) x); x op(a) = b: dx = (db - x op(da)) op(a)^-1
    a, b = primals
    da, db = tangents
    params = dict(left_side=left_side, lower=lower, transpose_a=transpose_a, unit_diagonal=unit_diagonal)
    x = triangular_solve_p.bind(a, b, **params)
    if da is None and db is None:
        return [x], [None]
    rhs = db
    if da is not None:
        dop = _op(_triangle_of(da, lower, unit_diagonal), transpose_a)
        product = mm(dop, x) if left_side else mm(x, dop)
        rhs = neg(product) if rhs is None else sub(rhs, product)
    return [x], [triangular_solve_p.bind(a, rhs, **params)]


@triangular_solve_p.def_rule("vjp")
def _triangular_solve_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, left_side: bool,
                          lower: bool, transpose_a: bool, unit_diagonal: bool) -> list[Any]:
    # b_bar solves the transposed system; a_bar is minus the outer product of b_bar and x in the order the
    # system takes them, restricted to the triangle read (derived from the JVP above)
    (ct,), (a, _), (x,) = cts, ins, outs
    if ct is None:
        return [None, None]
    b_bar = triangular_solve_p.bind(a, ct, left_side=left_side, lower=lower, transpose_a=not transpose_a,
                                    unit_diagonal=unit_diagonal)
    a_bar = None
    if needs[0]:
        if left_side:
            outer = mm(x, mT(b_bar)) if transpose_a else mm(b_bar, mT(x))
        else:
            outer = mm(mT(b_bar), x) if transpose_a else mm(mT(x), b_bar)
        a_bar = neg(_triangle_of(outer, lower, unit_diagonal))
    return [a_bar, b_bar if needs[1] else None]


@triangular_solve_p.def_rule("batching")
def _triangular_solve_batching(args: list[Any], dims: list[BatchDim], *, left_side: bool, lower: bool,
                               transpose_a: bool, unit_diagonal: bool) -> tuple[list[Any], list[BatchDim]]:
    # with a unbatched, b's batch joins b's free dimension (its columns for a left-side solve, its rows for a right-
    # side one): one solve with the one matrix, instead of a copy of a per batch member (as JAX)
    a, b = args
    params = dict(left_side=left_side, lower=lower, transpose_a=transpose_a, unit_diagonal=unit_diagonal)
    if dims[0] is not None:
        return _front_batching(triangular_solve_p)(args, dims, **params)
    nd = aval_of(b).ndim  # (b's rank with its batch dimension)
    pos = nd - 2 if left_side else nd - 3  # the batch goes just before b's columns (left) or rows (right)
    moved = moveaxis(b, dims[1], pos)
    shape = aval_of(moved).shape
    merged = reshape(moved, shape[:pos] + (shape[pos] * shape[pos + 1],) + shape[pos + 2:])
    x = triangular_solve_p.bind(a, merged, **params)
    return [reshape(x, shape)], [pos]


def triangular_solve(a: Any, b: Any, left_side: bool = False, lower: bool = False, transpose_a: bool = False,
                     conjugate_a: bool = False, unit_diagonal: bool = False) -> Any:
    """x with op(a) x = b (left_side) or x op(a) = b (jax.lax.linalg.triangular_solve, same defaults); a
    (..., k, k) triangular, b (..., m, n) with a's batch dimensions (b may have fewer: they broadcast); op(a) is a,
    a^T, conj(a) or a^H by transpose_a and conjugate_a (which a real a ignores)."""
    if conjugate_a:
        a = _conj(a)
    a_aval, b_aval = aval_of(a), aval_of(b)
    if a_aval.ndim >= 2 and b_aval.ndim >= 2 and a_aval.shape[:-2] != b_aval.shape[:-2]:
        batch = np.broadcast_shapes(a_aval.shape[:-2], b_aval.shape[:-2])
        a = _broadcast_batch(a, batch)
        b = _broadcast_batch(b, batch)
    return triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                   transpose_a=bool(transpose_a), unit_diagonal=bool(unit_diagonal))


def _broadcast_batch(x: Any, batch: tuple[int, ...]) -> Any:
    aval = aval_of(x)
    shape = tuple(batch) + aval.shape[-2:]
    return broadcast_in_dim(x, shape, tuple(range(len(shape) - aval.ndim, len(shape))))


# ---------------------------------------------------------------------------------------------------------------
# lu(a): (lu, pivots, permutation) with a[permutation] = L U, L unit lower triangular (below lu's diagonal), U
# upper (on and above it); pivots are LAPACK's row swaps (zero-based), permutation their composition. A singular
# matrix factors too (a zero on U's diagonal), as in LAPACK and JAX.
lu_p = Primitive("lu", multiple_results=True, checks=())
lu_p.def_rule("sharding_rule", explicit.batch_only("lu", 2))


@lu_p.def_rule("abstract_eval")
def _lu_abstract_eval(a: ShapedArray) -> list[ShapedArray]:
    _check_matrix("lu", a, dtypes=_REAL_AND_COMPLEX)
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    return [a, ShapedArray(batch + (min(m, n),), _INT32), ShapedArray(batch + (m,), _INT32)]


@lu_p.def_rule("lowering")
def _lu_lowering(ctx: LoweringContext, a: str) -> list[str]:
    if not _kernel("getrf"):
        raise _missing("lu", "getrf")
    lu_aval, piv, perm = ctx.avals_out
    return _lapack(ctx, "getrf", [a], [lu_aval, piv, perm, _info_aval(lu_aval)], [True],
                   [True, False, False, False])[:3]


def _permutation_matrix(perm: Any, dtype: Any) -> Any:
    """P (..., m, m) with (P x)[i] = x[perm[i]]."""
    aval = aval_of(perm)
    m = aval.shape[-1]
    shape = aval.shape + (m,)
    rows = broadcast_in_dim(perm, shape, tuple(range(aval.ndim)))
    return convert_element_type(eq(rows, broadcasted_iota(_INT32, shape, aval.ndim)), dtype)


def _lu_factors(lu: Any) -> tuple[Any, Any]:
    aval = aval_of(lu)
    n = aval.shape[-1]
    return add(_mask(lu, lower=True, k=-1), _eye(aval.shape[:-2] + (n, n), aval.dtype)), _mask(lu, lower=False)


def _check_square_derivative(op: str, aval: ShapedArray) -> None:
    if aval.shape[-1] != aval.shape[-2]:
        raise NotImplementedError(f"{op}: derivatives need a square matrix, got {aval.str_short()}")


@lu_p.def_rule("jvp")
def _lu_jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    # with P a = L U: X = L^-1 P da U^-1; d(lu) = L tril(X, -1) + triu(X) U
    outs = lu_p.bind(primals[0])
    (da,) = tangents
    if da is None:
        return list(outs), [None, None, None]
    _check_square_derivative("lu", aval_of(primals[0]))
    lu, _, perm = outs
    lower, upper = _lu_factors(lu)
    pda = mm(_permutation_matrix(perm, aval_of(lu).dtype), da)
    la = triangular_solve(lower, pda, left_side=True, lower=True, unit_diagonal=True)
    x = triangular_solve(upper, la, left_side=False, lower=False)
    return list(outs), [add(mm(lower, _mask(x, True, -1)), mm(_mask(x, False), upper)), None, None]


@lu_p.def_rule("vjp")
def _lu_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool]) -> list[Any]:
    # the adjoint of the JVP: G = tril(L^T lu_bar, -1) + triu(lu_bar U^T); a_bar = P^T L^-T G U^-T
    ct = cts[0]
    if ct is None or not needs[0]:
        return [None]
    _check_square_derivative("lu", aval_of(ins[0]))
    lu, _, perm = outs
    lower, upper = _lu_factors(lu)
    g = add(_mask(mm(mT(lower), ct), True, -1), _mask(mm(ct, mT(upper)), False))
    y = triangular_solve(lower, g, left_side=True, lower=True, transpose_a=True, unit_diagonal=True)
    y = triangular_solve(upper, y, left_side=False, lower=False, transpose_a=True)
    return [mm(mT(_permutation_matrix(perm, aval_of(lu).dtype)), y)]


lu_p.def_rule("batching", _front_batching(lu_p))


def lu(x: Any) -> tuple[Any, Any, Any]:
    """(lu, pivots, permutation) of x (..., m, n) (jax.lax.linalg.lu)."""
    lu_, pivots, perm = lu_p.bind(x)
    return lu_, pivots, perm


# ---------------------------------------------------------------------------------------------------------------
# geqrf(a): (reflectors, taus), LAPACK's geqrf as it leaves them: R on and above the diagonal, the Householder vectors
# below it (their leading 1 implied), and their scales taus (..., min(m, n)) (numpy.linalg.qr's mode 'raw', after a
# transpose). No derivative rules, as in JAX (its private jax._src.lax.linalg.geqrf).
geqrf_p = Primitive("geqrf", multiple_results=True, checks=())
geqrf_p.def_rule("sharding_rule", explicit.batch_only("geqrf", 2))


@geqrf_p.def_rule("abstract_eval")
def _geqrf_abstract_eval(a: ShapedArray) -> list[ShapedArray]:
    _check_matrix("geqrf", a)
    return [a, a.update(shape=a.shape[:-2] + (min(a.shape[-2:]),))]


@geqrf_p.def_rule("lowering")
def _geqrf_lowering(ctx: LoweringContext, a: str) -> list[str]:
    aval = ctx.avals_in[0]
    taus = ctx.avals_out[1]
    if _kernel("geqrf"):
        return _lapack(ctx, "geqrf", [a], [aval, taus, _info_aval(aval)], [True], [True, False, False])[:2]
    if 0 in aval.shape:
        return [a, ctx.constant(0, taus)]
    return list(ctx.op("stablehlo.custom_call", [a], [aval, taus],
                       {"call_target_name": '"Qr"', "api_version": "1 : i32"}))


geqrf_p.mark("jvp", NO_DERIVATIVE_RULES)
geqrf_p.mark("vjp", NO_DERIVATIVE_RULES)
geqrf_p.def_rule("batching", _front_batching(geqrf_p))


def geqrf(x: Any) -> tuple[Any, Any]:
    """(reflectors, taus) of x (..., m, n), as LAPACK's geqrf leaves them (JAX's private geqrf)."""
    reflectors, taus = geqrf_p.bind(x)
    return reflectors, taus


# ---------------------------------------------------------------------------------------------------------------
# qr(a, full_matrices): (q, r) with a = q r, q orthonormal columns, r upper triangular; LAPACK's geqrf (Householder
# reflectors) then orgqr (q from them). full_matrices: q (m, m) and r (m, n); else q (m, k), r (k, n), k = min(m, n).
qr_p = Primitive("qr", multiple_results=True, checks=())
qr_p.def_rule("sharding_rule", explicit.batch_only("qr", 2))


@qr_p.def_rule("abstract_eval")
def _qr_abstract_eval(a: ShapedArray, *, full_matrices: bool) -> list[ShapedArray]:
    _check_matrix("qr", a)
    m, n = a.shape[-2:]
    k = m if full_matrices else min(m, n)
    return [a.update(shape=a.shape[:-2] + (m, k)), a.update(shape=a.shape[:-2] + (k, n))]


@qr_p.def_rule("lowering")
def _qr_lowering(ctx: LoweringContext, a: str, *, full_matrices: bool) -> list[str]:
    aval = ctx.avals_in[0]
    q_aval, r_aval = ctx.avals_out
    batch, (m, n) = aval.shape[:-2], aval.shape[-2:]
    k = min(m, n)
    taus = ShapedArray(batch + (k,), aval.dtype)
    use_lapack = bool(_kernel("geqrf") and _kernel("orgqr"))
    if not use_lapack and 0 in aval.shape:  # (no XLA custom call for an empty matrix: q is the identity, r empty)
        return [_hlo_eye(ctx, q_aval), ctx.constant(0, r_aval)]
    if use_lapack:
        reflectors, tau, _ = _lapack(ctx, "geqrf", [a], [aval, taus, _info_aval(aval)], [True],
                                     [True, False, False])
    else:  # XLA's own QR (its qr_expander): Householder reflectors and their scales, as geqrf
        reflectors, tau = ctx.op("stablehlo.custom_call", [a], [aval, taus],
                                 {"call_target_name": '"Qr"', "api_version": "1 : i32"})
    # r: the upper triangle of the first r_aval rows of the reflectors
    r_in = ctx.op("stablehlo.slice", [reflectors], r_aval, {
        "start_indices": i64_array([0] * aval.ndim), "limit_indices": i64_array(batch + (r_aval.shape[-2], n)),
        "strides": i64_array([1] * aval.ndim)})
    r = _hlo_triangle(ctx, r_in, r_aval, lower=False)
    # q: Q's first columns from the reflectors cut (k columns) or padded (m columns for the full q of a tall matrix)
    cols = q_aval.shape[-1]
    if cols <= n:
        basis = ctx.op("stablehlo.slice", [reflectors], q_aval, {
            "start_indices": i64_array([0] * aval.ndim), "limit_indices": i64_array(batch + (m, cols)),
            "strides": i64_array([1] * aval.ndim)})
    else:
        zero = ctx.constant(0, ShapedArray((), aval.dtype))
        basis = ctx.op("stablehlo.pad", [reflectors, zero], q_aval, {
            "edge_padding_low": i64_array([0] * aval.ndim),
            "edge_padding_high": i64_array([0] * (aval.ndim - 1) + [cols - n]),
            "interior_padding": i64_array([0] * aval.ndim)})
    if use_lapack:
        q, _ = _lapack(ctx, "orgqr", [basis, tau], [q_aval, _info_aval(aval)], [True, False], [True, False])
    else:
        q = ctx.op("stablehlo.custom_call", [basis, tau], q_aval, {
            "call_target_name": '"ProductOfElementaryHouseholderReflectors"', "api_version": "1 : i32"})
    return [q, r]


def _hlo_eye(ctx: LoweringContext, aval: ShapedArray) -> str:
    """Identity matrices (ones where row == column) of aval's shape, in HLO."""
    index = ShapedArray(aval.shape, _INT32)
    rows = ctx.op("stablehlo.iota", [], index, {"iota_dimension": f"{aval.ndim - 2} : i64"})
    cols = ctx.op("stablehlo.iota", [], index, {"iota_dimension": f"{aval.ndim - 1} : i64"})
    same = ctx.op("stablehlo.compare", [rows, cols], ShapedArray(aval.shape, dt.bool_),
                  {"comparison_direction": "#stablehlo<comparison_direction EQ>"})
    return ctx.op("stablehlo.convert", [same], aval)


@qr_p.def_rule("jvp")
def _qr_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, full_matrices: bool
            ) -> tuple[list[Any], list[Any]]:
    # JAX's rule (m >= n; full q only when square): X = da R^-1, C = Q^H X, O = tril(C, -1) - tril(C, -1)^H
    # (+ i Im(diag C) for complex); dQ = Q (O - C) + X, dR = (C - O) R
    (a,), (da,) = primals, tangents
    q, r = qr_p.bind(a, full_matrices=full_matrices)
    if da is None:
        return [q, r], [None, None]
    m, n = aval_of(a).shape[-2:]
    if m < n or (full_matrices and m > n):
        raise NotImplementedError(f"qr: derivatives need m >= n (and full_matrices=False unless square), got "
                                  f"{aval_of(a).str_short()} with full_matrices={full_matrices}")
    x = triangular_solve(r, da, left_side=False, lower=False)
    c = mm(mH(q), x)
    low = _mask(c, True, -1)
    o = sub(low, mH(low))
    phase = _diag_part_imag(c)
    if phase is not None:
        o = add(o, phase)
    return [q, r], [add(mm(q, sub(o, c)), x), mm(sub(c, o), r)]


@qr_p.def_rule("vjp")
def _qr_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, full_matrices: bool
            ) -> list[Any]:
    # the adjoint of the JVP (Q_bar = conj(q_ct), R_bar = conj(r_ct)): M = R_bar R^H - Q^H Q_bar,
    # N = triu(M, 1) + triu(M, 1)^H + Re(diag M); a_bar = (Q_bar + Q N) R^-H; the cotangent is conj(a_bar)
    (q_ct, r_ct), (a,), (q, r) = cts, ins, outs
    if not needs[0] or (q_ct is None and r_ct is None):
        return [None]
    m, n = aval_of(a).shape[-2:]
    if m < n or (full_matrices and m > n):
        raise NotImplementedError(f"qr: derivatives need m >= n (and full_matrices=False unless square), got "
                                  f"{aval_of(a).str_short()} with full_matrices={full_matrices}")
    q_bar = None if q_ct is None else _conj(q_ct)
    terms = []
    if r_ct is not None:
        terms.append(mm(_conj(r_ct), mH(r)))
    if q_bar is not None:
        terms.append(neg(mm(mH(q), q_bar)))
    big_m = terms[0] if len(terms) == 1 else add(*terms)
    if _is_complex(big_m):
        upper = _mask(big_m, False, 1)
        big_n = add(add(upper, mH(upper)), sub(mul(_eye(aval_of(big_m).shape, aval_of(big_m).dtype), big_m),
                                               _diag_part_imag(big_m)))
    else:
        big_n = add(_mask(big_m, False), mT(_mask(big_m, False, 1)))
    x_bar = mm(q, big_n) if q_bar is None else add(q_bar, mm(q, big_n))
    return [_conj(triangular_solve(r, x_bar, left_side=False, lower=False, transpose_a=True, conjugate_a=True))]


qr_p.def_rule("batching", _front_batching(qr_p))


def qr(x: Any, pivoting: bool = False, full_matrices: bool = True, use_magma: bool | None = None
       ) -> tuple[Any, Any]:
    """(q, r) of x (..., m, n) (jax.lax.linalg.qr); use_magma is GPU-only and ignored, as JAX on CPU. The
    column-pivoted QR (pivoting=True, LAPACK's geqp3 in JAX) is not implemented in ember: NotImplementedError."""
    if pivoting:
        raise NotImplementedError("qr: pivoting=True (the column-pivoted QR, LAPACK's geqp3) is not implemented in "
                                  "ember")
    q, r = qr_p.bind(x, full_matrices=bool(full_matrices))
    return q, r


# ---------------------------------------------------------------------------------------------------------------
# eigh(a, lower): (v, w), the eigenvectors (columns of v) and ascending eigenvalues of the symmetric (Hermitian) a,
# reading its lower (lower) or upper triangle; w is real (of a complex a too: LAPACK's heevd). No convergence, or a
# non-finite input, gives NaNs.
eigh_p = Primitive("eigh", multiple_results=True, checks=())
eigh_p.def_rule("sharding_rule", explicit.batch_only("eigh", 2))


@eigh_p.def_rule("abstract_eval")
def _eigh_abstract_eval(a: ShapedArray, *, lower: bool) -> list[ShapedArray]:
    _check_matrix("eigh", a, square=True)
    return [a, a.update(shape=a.shape[:-1], dtype=dt.real_dtype(a.dtype))]


@eigh_p.def_rule("lowering")
def _eigh_lowering(ctx: LoweringContext, a: str, *, lower: bool) -> list[str]:
    v, w = ctx.avals_out
    if _kernel("syevd"):
        return _lapack(ctx, "syevd", [a], [v, w, _info_aval(v)], [True], [True, False, False], lower=int(lower))[:2]
    if 0 in v.shape:
        return [ctx.constant(0, v), ctx.constant(0, w)]
    # XLA's own Jacobi eigensolver (its eigh_expander): backend_config "lower,sort_eigenvalues,max_iter,tol";
    # eigenvalues as accurate as LAPACK's, eigenvectors to about 1e-8 (float64) relative residual
    tol = scalar_text(np.finfo(w.dtype).eps, np.dtype(w.dtype))
    outs = ctx.op("stablehlo.custom_call", [a], [v, w], {
        "call_target_name": '"Eigh"', "api_version": "1 : i32",
        "backend_config": f'"{int(lower)},1,{_EIGH_SWEEPS},{tol}"'})
    return list(outs)


_EIGH_SWEEPS = 100  # the Jacobi sweeps XLA's Eigh may take (it stops earlier at the tolerance)


def _eigh_gaps(w: Any) -> Any:
    """F with F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it."""
    aval = aval_of(w)
    shape = aval.shape + (aval.shape[-1],)
    eye = _eye(shape, aval.dtype)
    n = aval.shape[-1]
    return sub(div(1.0, add(eye, sub(_row(w, n), _col(w, n)))), eye)


@eigh_p.def_rule("jvp")
def _eigh_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, lower: bool) -> tuple[list[Any], list[Any]]:
    # JAX's rule: C = V^H da V; dw = Re(diag(C)), dV = V (F o C)
    v, w = eigh_p.bind(primals[0], lower=lower)
    (da,) = tangents
    if da is None:
        return [v, w], [None, None]
    c = mm(mH(v), mm(da, v))
    return [v, w], [mm(v, mul(_cast_like(_eigh_gaps(w), c), c)), _real_part(_diag(c))]


@eigh_p.def_rule("vjp")
def _eigh_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, lower: bool) -> list[Any]:
    # the adjoint of the JVP (V_bar = conj(v_ct); w_bar real): a_bar = V (diag(w_bar) + F o (V^H V_bar)) V^H; the
    # cotangent is conj(a_bar)
    (v_ct, w_ct), (v, w) = cts, outs
    if not needs[0] or (v_ct is None and w_ct is None):
        return [None]
    terms = []
    if w_ct is not None:
        terms.append(_cast_like(_vector_to_diag(w_ct), v))
    if v_ct is not None:
        terms.append(mul(_cast_like(_eigh_gaps(w), v), mm(mH(v), _conj(v_ct))))
    inner = terms[0] if len(terms) == 1 else add(*terms)
    return [_conj(mm(v, mm(inner, mH(v))))]


eigh_p.def_rule("batching", _front_batching(eigh_p))


class EighImplementation(enum.Enum):
    """Implementation for symmetric/Hermitian eigendecomposition (jax.lax.linalg.EighImplementation): on the CPU
    only QR (LAPACK's syevd/heevd, the default); JACOBI and QDWH raise, as JAX."""
    QR = "qr"
    JACOBI = "jacobi"
    QDWH = "qdwh"


def eigh(x: Any, lower: bool = True, symmetrize_input: bool = True, sort_eigenvalues: bool = True,
         subset_by_index: Any = None, implementation: EighImplementation | None = None) -> tuple[Any, Any]:
    """(v, w) of the symmetric (Hermitian) x (..., n, n) (jax.lax.linalg.eigh): eigenvectors as columns, eigenvalues
    ascending (real); x is symmetrized first, (x + x^H) / 2, unless symmetrize_input is False. The eigenvalues are
    always sorted (sort_eigenvalues=False allows any order: this one), subset_by_index takes the full range only and
    implementation QR only (LAPACK's syevd), as JAX on CPU."""
    if implementation == EighImplementation.JACOBI:
        raise NotImplementedError("eigh: the Jacobi implementation is not supported on CPU, as in JAX")
    if implementation == EighImplementation.QDWH:
        raise NotImplementedError("eigh: the QDWH implementation is only supported on TPU, as in JAX")
    shape = np.shape(x) if not hasattr(x, "aval") else aval_of(x).shape
    if len(shape) >= 2:
        _subset_is_everything("eigh", subset_by_index, shape[-1])
    if symmetrize_input:
        x = symmetrize(x)
    v, w = eigh_p.bind(x, lower=bool(lower))
    return v, w


# ---------------------------------------------------------------------------------------------------------------
# svd(a, full_matrices, compute_uv): (s, u, vt) with a = u diag(s) vt, s descending and real (of a complex a too),
# or (s,) without compute_uv; LAPACK's gesdd. No convergence, or a non-finite input, gives NaNs.
svd_p = Primitive("svd", multiple_results=True, checks=())
svd_p.def_rule("sharding_rule", explicit.batch_only("svd", 2))


@svd_p.def_rule("abstract_eval")
def _svd_abstract_eval(a: ShapedArray, *, full_matrices: bool, compute_uv: bool, algorithm: Any = None
                       ) -> list[ShapedArray]:
    _check_matrix("svd", a)
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    k = min(m, n)
    s = a.update(shape=batch + (k,), dtype=dt.real_dtype(a.dtype))
    if not compute_uv:
        return [s]
    return [s, a.update(shape=batch + (m, m if full_matrices else k)),
            a.update(shape=batch + (n if full_matrices else k, n))]


@svd_p.def_rule("lowering")
def _svd_lowering(ctx: LoweringContext, a: str, *, full_matrices: bool, compute_uv: bool, algorithm: Any = None
                  ) -> list[str]:
    # SvdAlgorithm.QR runs LAPACK's gesvd (the QR algorithm, as JAX on CPU); None, DEFAULT and DIVIDE_AND_CONQUER
    # gesdd; JACOBI and POLAR are not on the CPU (JAX's NotImplementedError)
    if algorithm in (SvdAlgorithm.JACOBI, SvdAlgorithm.POLAR):
        raise LoweringError(f"svd: the SVD Jacobi and Polar algorithms are not implemented on CPU (algorithm="
                            f"{algorithm}), as in JAX; use SvdAlgorithm.DEFAULT, QR or DIVIDE_AND_CONQUER")
    routine = "gesvd" if algorithm == SvdAlgorithm.QR else "gesdd"
    if not _kernel(routine):
        raise _missing("svd", routine)
    outs = list(ctx.avals_out)
    info = _info_aval(ctx.avals_in[0])
    job = 0 if not compute_uv else 2 if full_matrices else 1
    flags = [False] + [True] * (len(outs) - 1) + [False]
    return _lapack(ctx, routine, [a], outs + [info], [True], flags, job=job)[:len(outs)]


def _svd_gaps(s: Any) -> Any:
    """F with F[i, j] = 1 / (s[j]^2 - s[i]^2) off the diagonal, 0 on it."""
    aval = aval_of(s)
    eye = _eye(aval.shape + (aval.shape[-1],), aval.dtype)
    k = aval.shape[-1]
    row, col = _row(s, k), _col(s, k)
    return sub(div(1.0, add(mul(add(row, col), sub(row, col)), eye)), eye)


def _reduced_svd(a: Any, outs: Sequence[Any], full_matrices: bool, compute_uv: bool, algorithm: Any) -> list[Any]:
    """(s, u, vt) of the reduced SVD the derivative rules work with: outs themselves when they are that, else a
    reduced SVD computed for the rule (by the same algorithm); full_matrices of a non-square matrix has no
    derivative (as in JAX)."""
    m, n = aval_of(a).shape[-2:]
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError(f"svd: derivatives of full_matrices=True need a square matrix, got "
                                  f"{aval_of(a).str_short()}")
    if not compute_uv or full_matrices:
        return svd_p.bind(a, full_matrices=False, compute_uv=True, algorithm=algorithm)
    return list(outs)


def _safe_inverse(s: Any) -> Any:
    """1 / s, with 0 where s is 0."""
    zero = convert_element_type(eq(s, full(aval_of(s).shape, 0, aval_of(s).dtype)), aval_of(s).dtype)
    return sub(div(1.0, add(s, zero)), zero)


@svd_p.def_rule("jvp")
def _svd_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, full_matrices: bool, compute_uv: bool,
             algorithm: Any = None) -> tuple[list[Any], list[Any]]:
    # JAX's rule: dS = U^H da V, ds = Re(diag(dS)); dU = U (F o (dS S + S dS^H) + (I o (dS - dS^H)) S^-1 / 2)
    # (+ the part outside U's span when m > n), dV = V (F o (S dS + dS^H S)) (+ outside V's span when n > m)
    (a,), (da,) = primals, tangents
    outs = svd_p.bind(a, full_matrices=full_matrices, compute_uv=compute_uv, algorithm=algorithm)
    if da is None:
        return list(outs), [None] * len(outs)
    m, n = aval_of(a).shape[-2:]
    s, u, vt = _reduced_svd(a, outs, full_matrices, compute_uv, algorithm)
    v = mH(vt)
    ds_mat = mm(mH(u), mm(da, v))
    ds = _real_part(_diag(ds_mat))
    if not compute_uv:
        return list(outs), [ds]
    k = min(m, n)
    f = _cast_like(_svd_gaps(s), a)
    sc = _cast_like(s, a)
    dss = mul(_row(sc, k), ds_mat)  # dS S
    sds = mul(_col(sc, k), ds_mat)  # S dS
    inner_u = mul(f, add(dss, mH(dss)))
    phase = _diag_part_imag(ds_mat)  # (I o (dS - dS^H)) / 2, complex only
    if phase is not None:
        inner_u = add(inner_u, mul(phase, _row(_cast_like(_safe_inverse(s), a), k)))
    du = mm(u, inner_u)
    dv = mm(v, mul(f, add(sds, mH(sds))))
    if m > n:
        dav = mm(da, v)
        du = add(du, div(sub(dav, mm(u, mm(mH(u), dav))), _row(sc, m)))
    if n > m:
        dau = mm(mH(da), u)
        dv = add(dv, div(sub(dau, mm(v, mm(vt, dau))), _row(sc, n)))
    return list(outs), [ds, du, mH(dv)]


@svd_p.def_rule("vjp")
def _svd_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, full_matrices: bool,
             compute_uv: bool, algorithm: Any = None) -> list[Any]:
    # the adjoint of the JVP, with U_bar = conj(u_ct), V_bar = vt_ct^T, s_bar real, J = F o (U^H U_bar),
    # K = F o (V^H V_bar), E = (I o (U^H U_bar)) S^-1 (complex only):
    # a_bar = U (diag(s_bar) + (J + J^H) S + (E - E^H) / 2 + S (K + K^H)) V^H (+ (I - U U^H) U_bar S^-1 V^H when
    # m > n, + U S^-1 V_bar^H (I - V V^H) when n > m); the cotangent is conj(a_bar)
    (a,) = ins
    if not needs[0] or all(ct is None for ct in cts):
        return [None]
    m, n = aval_of(a).shape[-2:]
    s, u, vt = _reduced_svd(a, outs, full_matrices, compute_uv, algorithm)
    v = mH(vt)
    s_ct = cts[0]
    u_bar = _conj(cts[1]) if compute_uv and cts[1] is not None else None
    v_bar = mT(cts[2]) if compute_uv and cts[2] is not None else None
    k = min(m, n)
    sc = _cast_like(s, a)
    srow, scol = _row(sc, k), _col(sc, k)
    inner = _cast_like(_vector_to_diag(s_ct), a) if s_ct is not None else None

    def plus(x: Any, y: Any) -> Any:
        return y if x is None else add(x, y)
    f = _cast_like(_svd_gaps(s), a) if u_bar is not None or v_bar is not None else None
    if u_bar is not None:
        uu = mm(mH(u), u_bar)
        j = mul(f, uu)
        inner = plus(inner, mul(add(j, mH(j)), srow))
        phase = _diag_part_imag(uu)
        if phase is not None:
            inner = add(inner, mul(phase, _row(_cast_like(_safe_inverse(s), a), k)))
    if v_bar is not None:
        kk = mul(f, mm(mH(v), v_bar))
        inner = plus(inner, mul(scol, add(kk, mH(kk))))
    a_bar = None if inner is None else mm(u, mm(inner, vt))
    if u_bar is not None and m > n:
        a_bar = plus(a_bar, mm(div(sub(u_bar, mm(u, mm(mH(u), u_bar))), _row(sc, m)), vt))
    if v_bar is not None and n > m:
        a_bar = plus(a_bar, mH(mm(div(sub(v_bar, mm(v, mm(vt, v_bar))), _row(sc, n)), mH(u))))
    return [_conj(a_bar)]


svd_p.def_rule("batching", _front_batching(svd_p))


class SvdAlgorithm(enum.Enum):
    """Enum for SVD algorithm (jax.lax.linalg.SvdAlgorithm): on the CPU, DEFAULT and DIVIDE_AND_CONQUER run
    LAPACK's gesdd, QR runs gesvd (slower, more accurate for tiny singular values); JACOBI and POLAR raise, as
    JAX."""
    DEFAULT = "default"
    QR = "QR"
    JACOBI = "Jacobi"
    POLAR = "polar"
    DIVIDE_AND_CONQUER = "divide_and_conquer"


def _subset_is_everything(op: str, subset_by_index: Any, size: int) -> None:
    """subset_by_index None or (0, size): the only ranges JAX computes on the CPU (NotImplementedError else)."""
    if subset_by_index is None:
        return
    subset = tuple(subset_by_index)
    if len(subset) != 2 or not all(isinstance(i, (int, np.integer)) for i in subset):
        raise TypeError(f"{op}: subset_by_index must be None or a pair of ints (start, end), got {subset_by_index}")
    if subset != (0, size):
        raise NotImplementedError(f"{op}: subset_by_index={subset} is not supported on CPU (only the full range "
                                  f"(0, {size})), as in JAX")


def svd(x: Any, full_matrices: bool = True, compute_uv: bool = True, subset_by_index: Any = None,
        algorithm: SvdAlgorithm | None = None) -> Any:
    """(s, u, vt) of x (..., m, n) (jax.lax.linalg.svd's order: u, s, vt is numpy's), or s alone without
    compute_uv; algorithm a SvdAlgorithm (QR: LAPACK's gesvd, else gesdd); subset_by_index only the full range
    (0, min(m, n)), as JAX on CPU."""
    shape = np.shape(x) if not hasattr(x, "aval") else aval_of(x).shape
    if subset_by_index is not None and len(shape) >= 2:
        rank = min(shape[-2:])
        if full_matrices and tuple(subset_by_index) != (0, rank):
            raise ValueError("svd: full_matrices and subset_by_index cannot both be set (as in JAX)")
        _subset_is_everything("svd", subset_by_index, rank)
    if algorithm is not None and not isinstance(algorithm, SvdAlgorithm):
        raise NotImplementedError(f"svd: algorithm must be None or a jax.lax.linalg.SvdAlgorithm, got {algorithm!r} "
                                  "(JAX's CPU lowering refuses it too)")
    outs = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv), algorithm=algorithm)
    return tuple(outs) if compute_uv else outs[0]


# ---------------------------------------------------------------------------------------------------------------
# eig(a): (w, [vl], [vr]) of the square a (real or complex): its eigenvalues (complex), and its left / right
# eigenvectors as the columns of complex matrices (compute_left_eigenvectors, compute_right_eigenvectors); LAPACK's
# geev, in its order and normalisation (unit 2-norm, largest component real), as numpy and JAX. The eigenvalues
# differentiate; the eigenvectors only with enable_eigvec_derivs (JAX's opt-in: valid for distinct eigenvalues and a
# unique largest component per vector, which cannot be checked), else the rules raise. No convergence, or a
# non-finite input, gives NaNs.
eig_p = Primitive("eig", multiple_results=True, checks=())
eig_p.def_rule("sharding_rule", explicit.batch_only("eig", 2))


@eig_p.def_rule("abstract_eval")
def _eig_abstract_eval(a: ShapedArray, *, compute_left_eigenvectors: bool, compute_right_eigenvectors: bool,
                       enable_eigvec_derivs: bool = False) -> list[ShapedArray]:
    _check_matrix("eig", a, square=True)
    complex_dtype = dt.complex_dtype(a.dtype)
    w = ShapedArray(a.shape[:-1], complex_dtype)
    vectors = ShapedArray(a.shape, complex_dtype)
    return [w] + [vectors] * (int(compute_left_eigenvectors) + int(compute_right_eigenvectors))


@eig_p.def_rule("lowering")
def _eig_lowering(ctx: LoweringContext, a: str, *, compute_left_eigenvectors: bool,
                  compute_right_eigenvectors: bool, enable_eigvec_derivs: bool = False) -> list[str]:
    if not _kernel("geev"):
        raise _missing("eig", "geev")
    outs = list(ctx.avals_out)
    flags = [False] + [True] * (len(outs) - 1) + [False]
    return _lapack(ctx, "geev", [a], outs + [_info_aval(ctx.avals_in[0])], [True], flags,
                   compute_left=int(compute_left_eigenvectors), compute_right=int(compute_right_eigenvectors)
                   )[:len(outs)]


def _lu_solve_prim(a: Any, b: Any) -> Any:
    """x with a x = b by lu and two triangular solves (real or complex; rows permuted by a one-hot product)."""
    lu_, _, perm = lu_p.bind(a)
    x = mm(_permutation_matrix(perm, aval_of(a).dtype), b)
    x = triangular_solve(lu_, x, left_side=True, lower=True, unit_diagonal=True)
    return triangular_solve(lu_, x, left_side=True, lower=False)


def _check_eig_derivative(vectors: bool, enable_eigvec_derivs: bool) -> None:
    if vectors and not enable_eigvec_derivs:
        raise NotImplementedError("eig: derivatives of the eigenvectors are only valid under assumptions on the input "
                                  "that cannot be checked (distinct eigenvalues, a unique largest component per "
                                  "vector): pass enable_eigvec_derivs=True to opt in, as in JAX (or differentiate "
                                  "only the eigenvalues: compute_left_eigenvectors=False, "
                                  "compute_right_eigenvectors=False, or eigvals)")


def _eig_gaps(w: Any) -> Any:
    """F with F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it (complex w)."""
    return _eigh_gaps(w)


def _largest_component(v: Any) -> Any:
    """The one-hot mask (..., n, n) of each column's first entry of largest magnitude (LAPACK makes it real)."""
    aval = aval_of(v)
    rows = broadcasted_iota(_INT32, aval.shape, aval.ndim - 2)
    k = argmax(abs_(v), aval.ndim - 2, _INT32)
    return convert_element_type(eq(rows, broadcast_in_dim(k, aval.shape, tuple(range(aval.ndim - 2)) +
                                                          (aval.ndim - 1,))), aval.dtype)


def _columns(x: Any) -> Any:
    """The sums over the rows of x (..., n, n): one entry per column, (..., n)."""
    return reduce_sum(x, (aval_of(x).ndim - 2,))


def _eig_vectors_jvp(w: Any, v: Any, da: Any) -> tuple[Any, Any]:
    # JAX's rule (nondegenerate perturbation theory): P = V^-1 dA V, dw = diag(P), U = V (F o P); the normalisation
    # (unit 2-norm, largest component real) fixes dv_j = u_j + c_j v_j with c_j = -Re(v_j^H u_j) - i Im(u_kj) / v_kj,
    # k the row of v_j's largest component
    p = _lu_solve_prim(v, mm(da, v))
    u = mm(v, mul(_eig_gaps(w), p))
    mask = _largest_component(v)
    c = make_complex(neg(real(_columns(mul(conj(v), u)))), neg(div(imag(_columns(mul(mask, u))),
                                                               real(_columns(mul(mask, v))))))
    return _diag(p), add(u, mul(v, _row(c, aval_of(v).shape[-2])))


def _eig_vectors_adjoint(w: Any, v: Any, v_bar: Any | None, w_bar: Any | None) -> Any:
    # the adjoint of _eig_vectors_jvp under Re<x, y> = Re tr(x^H y), given V_bar (and w_bar): with g_j = (V^H V_bar)_jj,
    # U_bar = V_bar - V diag(Re g) - i M diag(Im g / Re v_kj) (M the mask of the largest components), P_bar =
    # conj(F) o (V^H U_bar) + diag(w_bar), A_bar = V^-H P_bar V^H
    n = aval_of(v).shape[-2]
    p_bar = None
    if v_bar is not None:
        mask = _largest_component(v)
        g = _columns(mul(conj(v), v_bar))
        scale = real(_columns(mul(mask, v)))
        u_bar = sub(v_bar, mul(v, _row(_cast_like(real(g), v), n)))
        u_bar = sub(u_bar, mul(mask, _row(make_complex(full(aval_of(scale).shape, 0, aval_of(scale).dtype),
                                                  div(imag(g), scale)), n)))
        p_bar = mul(conj(_eig_gaps(w)), mm(mH(v), u_bar))
    if w_bar is not None:
        p_bar = _vector_to_diag(w_bar) if p_bar is None else add(p_bar, _vector_to_diag(w_bar))
    return _lu_solve_prim(mH(v), mm(p_bar, mH(v)))


@eig_p.def_rule("jvp")
def _eig_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, compute_left_eigenvectors: bool,
             compute_right_eigenvectors: bool, enable_eigvec_derivs: bool = False) -> tuple[list[Any], list[Any]]:
    # JAX's rule: dw = diag(V^-1 da V), V the right eigenvectors; the vectors' by _eig_vectors_jvp (the left ones,
    # right eigenvectors of a^H with eigenvalues conj(w), with da^H)
    (a,), (da,) = primals, tangents
    params = dict(compute_left_eigenvectors=compute_left_eigenvectors,
                  compute_right_eigenvectors=compute_right_eigenvectors, enable_eigvec_derivs=enable_eigvec_derivs)
    outs = eig_p.bind(a, **params)
    if da is None:
        return list(outs), [None] * len(outs)
    _check_eig_derivative(compute_left_eigenvectors or compute_right_eigenvectors, enable_eigvec_derivs)
    full_outs = eig_p.bind(a, compute_left_eigenvectors=compute_left_eigenvectors, compute_right_eigenvectors=True,
                           enable_eigvec_derivs=enable_eigvec_derivs)
    w, v = full_outs[0], full_outs[-1]
    da_c = _cast_like(da, v)
    if not (compute_left_eigenvectors or compute_right_eigenvectors):
        return list(outs), [_diag(_lu_solve_prim(v, mm(da_c, v)))]
    dw, dv = _eig_vectors_jvp(w, v, da_c)
    tangents_out = [dw]
    if compute_left_eigenvectors:
        tangents_out.append(_eig_vectors_jvp(conj(w), full_outs[1], mH(da_c))[1])
    if compute_right_eigenvectors:
        tangents_out.append(dv)
    return list(outs), tangents_out


@eig_p.def_rule("vjp")
def _eig_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, compute_left_eigenvectors: bool,
             compute_right_eigenvectors: bool, enable_eigvec_derivs: bool = False) -> list[Any]:
    # the transpose of the JVP (not complex-linear in da: the normalisation's real and imaginary parts): the adjoint
    # under Re<x, y> of conj(cts), conjugated; the left vectors' adjoint is the conjugate transpose of theirs (their
    # JVP takes da^H); a real a takes the real part (the transpose of real -> complex)
    (a,) = ins
    if not needs[0] or all(ct is None for ct in cts):
        return [None]
    w_ct, rest = cts[0], list(cts[1:])
    vl_ct = rest.pop(0) if compute_left_eigenvectors else None
    vr_ct = rest.pop(0) if compute_right_eigenvectors else None
    _check_eig_derivative(vl_ct is not None or vr_ct is not None, enable_eigvec_derivs)
    full_outs = eig_p.bind(a, compute_left_eigenvectors=compute_left_eigenvectors, compute_right_eigenvectors=True,
                           enable_eigvec_derivs=enable_eigvec_derivs)
    w, v = full_outs[0], full_outs[-1]
    a_bar = _eig_vectors_adjoint(w, v, None if vr_ct is None else conj(vr_ct), None if w_ct is None else conj(w_ct)) \
        if (vr_ct is not None or w_ct is not None) else None
    if vl_ct is not None:
        left = mH(_eig_vectors_adjoint(conj(w), full_outs[1], conj(vl_ct), None))
        a_bar = left if a_bar is None else add(a_bar, left)
    return [_cast_like(conj(a_bar), a)]


eig_p.def_rule("batching", _front_batching(eig_p))


class EigImplementation(enum.Enum):
    """Enum for eigendecomposition algorithm (jax.lax.linalg.EigImplementation): on the CPU only LAPACK (geev);
    the GPU ones (CUSOLVER, MAGMA) raise, as JAX."""
    CUSOLVER = "cusolver"
    MAGMA = "magma"
    LAPACK = "lapack"


def eig(x: Any, compute_left_eigenvectors: bool = True, compute_right_eigenvectors: bool = True,
        enable_eigvec_derivs: bool = False, implementation: EigImplementation | None = None,
        use_magma: bool | None = None) -> list[Any]:
    """[w, vl, vr] of the square x (..., n, n), real or complex (jax.lax.linalg.eig; the vectors only where
    asked); implementation None or LAPACK (use_magma=True, its deprecated spelling of MAGMA, and the GPU
    implementations are JAX's ValueError on CPU). The eigenvectors differentiate with enable_eigvec_derivs=True
    (JAX's opt-in: valid for distinct eigenvalues and a unique largest component per vector); without it their
    derivatives raise, as JAX's."""
    if use_magma is not None:
        warnings.warn("eig: use_magma is deprecated, please use implementation=EigImplementation.MAGMA instead",
                      DeprecationWarning, stacklevel=2)
        implementation = EigImplementation.MAGMA if use_magma else EigImplementation.LAPACK
    if implementation and implementation != EigImplementation.LAPACK:
        raise ValueError(f"eig: only the lapack implementation is supported on CPU, got {implementation!r} (as in "
                         "JAX)")
    return list(eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                           compute_right_eigenvectors=bool(compute_right_eigenvectors),
                           enable_eigvec_derivs=bool(enable_eigvec_derivs)))


# ---------------------------------------------------------------------------------------------------------------
# schur(a, compute_schur_vectors): (t, [vs]) with a = vs t vs^H, vs unitary; t upper triangular for a complex a, quasi
# upper triangular (2x2 blocks on the diagonal for complex eigenvalue pairs) for a real one; LAPACK's gees, unsorted.
# No derivative rules, as in JAX (jax.lax.linalg.schur raises for them too). No convergence, or a non-finite input,
# gives NaNs.
schur_p = Primitive("schur", multiple_results=True, checks=())
schur_p.def_rule("sharding_rule", explicit.batch_only("schur", 2))


@schur_p.def_rule("abstract_eval")
def _schur_abstract_eval(a: ShapedArray, *, compute_schur_vectors: bool) -> list[ShapedArray]:
    _check_matrix("schur", a, square=True)
    return [a, a] if compute_schur_vectors else [a]


@schur_p.def_rule("lowering")
def _schur_lowering(ctx: LoweringContext, a: str, *, compute_schur_vectors: bool) -> list[str]:
    if not _kernel("gees"):
        raise _missing("schur", "gees")
    outs = list(ctx.avals_out)
    return _lapack(ctx, "gees", [a], outs + [_info_aval(ctx.avals_in[0])], [True], [True] * len(outs) + [False],
                   vectors=int(compute_schur_vectors))[:len(outs)]


schur_p.mark("jvp", NO_DERIVATIVE_RULES)
schur_p.mark("vjp", NO_DERIVATIVE_RULES)
schur_p.def_rule("batching", _front_batching(schur_p))


def schur(x: Any, compute_schur_vectors: bool = True, sort_eig_vals: bool = False,
          select_callable: Callable[..., Any] | None = None) -> tuple[Any, ...]:
    """(t, vs) of the square x (..., n, n) (jax.lax.linalg.schur), or (t,) without compute_schur_vectors; the
    eigenvalues are not sorted (sort_eig_vals and select_callable are refused)."""
    if sort_eig_vals or select_callable is not None:
        raise NotImplementedError("schur: sorting the eigenvalues (sort_eig_vals, select_callable) is not supported")
    return tuple(schur_p.bind(x, compute_schur_vectors=bool(compute_schur_vectors)))


# ---------------------------------------------------------------------------------------------------------------
# The rest of jax.lax.linalg: LAPACK's building blocks of the factorisations above (gehrd, orgqr, ormqr, sytrd,
# gtsv) and small compositions (lu_pivots_to_permutation, symmetric_product, cholesky_update) lowered inline. As in
# JAX, only tridiagonal_solve differentiates; the others carry NO_DERIVATIVE_RULES (grad and jvp raise), and the
# integer lu_pivots_to_permutation is not differentiable. Each takes leading batch dimensions (vmap moves its
# batch dimension to the front), cholesky_update too (JAX's takes one matrix and does not vmap).
def _check_same_dtype(op: str, avals: Sequence[ShapedArray], names: Sequence[str]) -> None:
    if len({a.dtype for a in avals}) > 1:
        got = ", ".join(f"{n} {a.str_short()}" for n, a in zip(names, avals))
        raise TypeError(f"{op}: the operands must have one dtype, got {got}")


def _check_batches(op: str, avals: Sequence[ShapedArray], ranks: Sequence[int], names: Sequence[str]) -> None:
    """The operands' leading (batch) dimensions, before their last `rank` ones, agree."""
    batches = [a.shape[:a.ndim - r] for a, r in zip(avals, ranks)]
    if any(b != batches[0] for b in batches[1:]):
        got = ", ".join(f"{n} {a.str_short()}" for n, a in zip(names, avals))
        raise TypeError(f"{op}: the operands must have the same batch dimensions, got {got}")


def _vector(op: str, x: ShapedArray, arg: str, dtypes: tuple[np.dtype, ...]) -> None:
    _check_matrix(op, x, arg=arg, dtypes=dtypes, rank=1)


# hessenberg(a): (h, taus) as LAPACK's gehrd leaves them: the upper Hessenberg form H = Q^H a Q on and above the
# first subdiagonal, the Householder vectors of Q = H_1 ... H_{n-1} below it (leading 1 implied), their scales taus
# (..., n - 1).
hessenberg_p = Primitive("hessenberg", multiple_results=True, checks=())
hessenberg_p.def_rule("sharding_rule", explicit.batch_only("hessenberg", 2))


@hessenberg_p.def_rule("abstract_eval")
def _hessenberg_abstract_eval(a: ShapedArray) -> list[ShapedArray]:
    _check_matrix("hessenberg", a, square=True, square_error=ValueError)
    return [a, a.update(shape=a.shape[:-2] + (max(a.shape[-1] - 1, 0),))]


@hessenberg_p.def_rule("lowering")
def _hessenberg_lowering(ctx: LoweringContext, a: str) -> list[str]:
    if not _kernel("gehrd"):
        raise _missing("hessenberg", "gehrd")
    h, taus = ctx.avals_out
    return _lapack(ctx, "gehrd", [a], [h, taus, _info_aval(h)], [True], [True, False, False])[:2]


hessenberg_p.mark("jvp", NO_DERIVATIVE_RULES)
hessenberg_p.mark("vjp", NO_DERIVATIVE_RULES)
hessenberg_p.def_rule("batching", _front_batching(hessenberg_p))


def hessenberg(a: Any) -> tuple[Any, Any]:
    """Reduces a square matrix to upper Hessenberg form (jax.lax.linalg.hessenberg): (a', taus) for a (..., n, n),
    LAPACK's gehrd output: H on and above the first subdiagonal of a', the Householder reflectors below it, and
    their scale factors taus (..., n - 1). Not differentiable, as in JAX."""
    h, taus = hessenberg_p.bind(a)
    return h, taus


# householder_product(a, taus): Q's first n columns, Q = H_1 ... H_k, H_i = I - taus_i v_i v_i^H with v_i the i-th
# column of a below its diagonal (and 1 on it): LAPACK's orgqr/ungqr, a (..., m, n) with m >= n, taus (..., k) with
# k <= n.
householder_product_p = Primitive("householder_product", checks=())
householder_product_p.def_rule("sharding_rule", explicit.batch_only("householder_product", (2, 1)))


@householder_product_p.def_rule("abstract_eval")
def _householder_product_abstract_eval(a: ShapedArray, taus: ShapedArray) -> ShapedArray:
    op = "householder_product"
    _check_matrix(op, a, arg="a")
    _vector(op, taus, "taus", _REAL_AND_COMPLEX)
    _check_same_dtype(op, [a, taus], ["a", "taus"])
    _check_batches(op, [a, taus], [2, 1], ["a", "taus"])
    m, n = a.shape[-2:]
    if m < n:
        raise ValueError(f"{op}: a must have at least as many rows as columns, got {a.str_short()}")
    if taus.shape[-1] > min(m, n):
        raise ValueError(f"{op}: taus must not have more entries ({taus.shape[-1]}) than the minimum of a's rows and "
                         f"columns, got a {a.str_short()} and taus {taus.str_short()}")
    return a


@householder_product_p.def_rule("lowering")
def _householder_product_lowering(ctx: LoweringContext, a: str, taus: str) -> list[str]:
    aval = ctx.aval_out
    if _kernel("orgqr"):
        return _lapack(ctx, "orgqr", [a, taus], [aval, _info_aval(aval)], [True, False], [True, False])[:1]
    if 0 in aval.shape:
        return [ctx.constant(0, aval)]
    return [ctx.op("stablehlo.custom_call", [a, taus], aval, {  # (XLA's own, as the fallback of qr)
        "call_target_name": '"ProductOfElementaryHouseholderReflectors"', "api_version": "1 : i32"})]


householder_product_p.mark("jvp", NO_DERIVATIVE_RULES)
householder_product_p.mark("vjp", NO_DERIVATIVE_RULES)
householder_product_p.def_rule("batching", _front_batching(householder_product_p))


def householder_product(a: Any, taus: Any) -> Any:
    """Product of elementary Householder reflectors (jax.lax.linalg.householder_product): the first n columns of
    Q = H_1 ... H_k for a (..., m, n), m >= n, holding the reflectors below its diagonal and taus (..., k), k <= n,
    their scale factors (LAPACK's orgqr/ungqr; geqrf's output gives qr's Q). Not differentiable, as in JAX."""
    return householder_product_p.bind(a, taus)


# ormqr(a, taus, c, left, transpose): Q c, Q^H c, c Q or c Q^H with Q = H_1 ... H_k of the reflectors below a's
# diagonal (a (..., r, n), taus (..., k), k <= min(r, n)), without forming Q: LAPACK's ormqr/unmqr. Q is r x r, so
# c is (..., r, q) for left=True and (..., p, r) for left=False.
ormqr_p = Primitive("ormqr", checks=())
ormqr_p.def_rule("sharding_rule", explicit.batch_only("ormqr", (2, 1, 2)))


@ormqr_p.def_rule("abstract_eval")
def _ormqr_abstract_eval(a: ShapedArray, taus: ShapedArray, c: ShapedArray, *, left: bool, transpose: bool
                         ) -> ShapedArray:
    op = "ormqr"
    _check_matrix(op, a, arg="a")
    _vector(op, taus, "taus", _REAL_AND_COMPLEX)
    _check_matrix(op, c, arg="c")
    _check_same_dtype(op, [a, taus, c], ["a", "taus", "c"])
    _check_batches(op, [a, taus, c], [2, 1, 2], ["a", "taus", "c"])
    r, n = a.shape[-2:]
    if left and c.shape[-2] != r:
        raise ValueError(f"{op}: with left=True c must have as many rows as the Householder matrix a, got a "
                         f"{a.str_short()} and c {c.str_short()}")
    if not left and c.shape[-1] != r:
        raise ValueError(f"{op}: with left=False c must have as many columns as the Householder matrix a has rows, "
                         f"got a {a.str_short()} and c {c.str_short()}")
    if taus.shape[-1] > min(r, n):
        raise ValueError(f"{op}: taus must not have more entries ({taus.shape[-1]}) than the minimum of a's rows and "
                         f"columns (LAPACK reads one reflector per column), got a {a.str_short()} and taus "
                         f"{taus.str_short()}")
    return c


@ormqr_p.def_rule("lowering")
def _ormqr_lowering(ctx: LoweringContext, a: str, taus: str, c: str, *, left: bool, transpose: bool) -> list[str]:
    if not _kernel("ormqr"):
        raise _missing("ormqr", "ormqr")
    out = ctx.aval_out
    return _lapack(ctx, "ormqr", [a, taus, c], [out, _info_aval(out)], [True, False, True], [True, False],
                   left=int(left), transpose=int(transpose))[:1]


ormqr_p.mark("jvp", NO_DERIVATIVE_RULES)
ormqr_p.mark("vjp", NO_DERIVATIVE_RULES)
ormqr_p.def_rule("batching", _front_batching(ormqr_p))


def ormqr(a: Any, taus: Any, c: Any, left: bool = True, transpose: bool = False) -> Any:
    """Multiplies c by Q from a QR factorization without forming Q (jax.lax.linalg.ormqr): Q @ c (left=True),
    Q^T @ c (left and transpose), c @ Q (left=False) or c @ Q^T, Q^H for complex dtypes, Q = H_1 ... H_k from the
    reflectors below a's diagonal (a (..., r, n) as geqrf leaves it: numpy's qr(mode='raw')[0].mT) and taus
    (..., k); c (..., r, q) or, with left=False, (..., p, r). Not differentiable, as in JAX."""
    return ormqr_p.bind(a, taus, c, left=bool(left), transpose=bool(transpose))


# tridiagonal(a, lower): (a', d, e, taus): the reduction T = Q^H a Q of the symmetric (Hermitian) a to tridiagonal
# form, LAPACK's sytrd/hetrd reading a's lower (lower) or upper triangle: T's diagonal d and off-diagonal e (real,
# of a complex a too), Q's reflectors below (above) the off-diagonal of a' and their scales taus (..., n - 1).
tridiagonal_p = Primitive("tridiagonal", multiple_results=True, checks=())
tridiagonal_p.def_rule("sharding_rule", explicit.batch_only("tridiagonal", 2))


@tridiagonal_p.def_rule("abstract_eval")
def _tridiagonal_abstract_eval(a: ShapedArray, *, lower: bool) -> list[ShapedArray]:
    _check_matrix("tridiagonal", a, square=True, square_error=ValueError)
    n = a.shape[-1]
    if n == 0:
        raise ValueError(f"tridiagonal: the input must be a non-empty square matrix (as in JAX), got {a.str_short()}")
    batch, real_dtype = a.shape[:-2], dt.real_dtype(a.dtype)
    return [a, a.update(shape=batch + (n,), dtype=real_dtype), a.update(shape=batch + (n - 1,), dtype=real_dtype),
            a.update(shape=batch + (n - 1,))]


@tridiagonal_p.def_rule("lowering")
def _tridiagonal_lowering(ctx: LoweringContext, a: str, *, lower: bool) -> list[str]:
    if not _kernel("sytrd"):
        raise _missing("tridiagonal", "sytrd")
    outs = list(ctx.avals_out)
    return _lapack(ctx, "sytrd", [a], outs + [_info_aval(outs[0])], [True], [True, False, False, False, False],
                   lower=int(lower))[:4]


tridiagonal_p.mark("jvp", NO_DERIVATIVE_RULES)
tridiagonal_p.mark("vjp", NO_DERIVATIVE_RULES)
tridiagonal_p.def_rule("batching", _front_batching(tridiagonal_p))


def tridiagonal(a: Any, lower: bool = True) -> tuple[Any, Any, Any, Any]:
    """Reduces a symmetric/Hermitian matrix to tridiagonal form (jax.lax.linalg.tridiagonal): (a', d, e, taus) for
    a (..., n, n), n >= 1, reading its lower (lower=True) or upper triangle (LAPACK's sytrd/hetrd): d (..., n) and
    e (..., n - 1) the diagonal and off-diagonal of T = Q^H a Q (real), a' holding T and, outside it, Q's
    Householder reflectors, taus (..., n - 1) their scale factors. Not differentiable, as in JAX."""
    arr, d, e, taus = tridiagonal_p.bind(a, lower=bool(lower))
    return arr, d, e, taus


# tridiagonal_solve(dl, d, du, b): x with T x = b, T (..., m, m) tridiagonal with subdiagonal dl[1:], diagonal d and
# superdiagonal du[:-1] (dl[0] and du[m - 1] are not read); b (..., m, k). LAPACK's gtsv (partial pivoting; a
# singular T gives NaN, as JAX), or with perturb_singular a solver that perturbs tiny pivots (a finite solution of a
# singular T, for inverse iteration). Derivatives as JAX's: dx = T^-1 (db - dT x), and its transpose.
tridiagonal_solve_p = Primitive("tridiagonal_solve", checks=())
tridiagonal_solve_p.def_rule("sharding_rule", explicit.batch_only("tridiagonal_solve", (1, 1, 1, 2)))


@tridiagonal_solve_p.def_rule("abstract_eval")
def _tridiagonal_solve_abstract_eval(dl: ShapedArray, d: ShapedArray, du: ShapedArray, b: ShapedArray, *,
                                     perturb_singular: bool) -> ShapedArray:
    op, names = "tridiagonal_solve", ["dl", "d", "du", "b"]
    for x, name in zip((dl, d, du), names):
        _vector(op, x, name, _REAL_AND_COMPLEX)
    _check_matrix(op, b, arg="b")
    _check_same_dtype(op, [dl, d, du, b], names)
    if not dl.shape == d.shape == du.shape:
        raise TypeError(f"{op}: the diagonals dl, d and du must have the same shape, got {dl.str_short()}, "
                        f"{d.str_short()} and {du.str_short()}")
    if d.shape != b.shape[:-1]:
        raise TypeError(f"{op}: b's leading dimensions (all but its last) must be the diagonals' shape, got "
                        f"diagonals {d.str_short()} and b {b.str_short()}")
    return b


@tridiagonal_solve_p.def_rule("lowering")
def _tridiagonal_solve_lowering(ctx: LoweringContext, dl: str, d: str, du: str, b: str, *, perturb_singular: bool
                                ) -> list[str]:
    if not _kernel("gtsv"):
        raise _missing("tridiagonal_solve", "gtsv")
    out = ctx.aval_out
    return _lapack(ctx, "gtsv", [dl, d, du, b], [out, _info_aval(out)], [False, False, False, True], [True, False],
                   perturb=int(perturb_singular))[:1]


def _shift_down(v: Any, by: int) -> Any:
    """v[..., i - by] at i (zeros where i - by is outside), along the last dimension; by may be negative."""
    aval = aval_of(v)
    if aval.shape[-1] == 0:
        return v
    return pad(v, scalar_literal(0, aval.dtype), [(0, 0, 0)] * (aval.ndim - 1) + [(by, -by, 0)])


def _tridiagonal_product(dl: Any, d: Any, du: Any, x: Any) -> Any:
    """T x for the tridiagonal T of (dl, d, du) and x (..., m, k)."""
    def col(v: Any) -> Any:
        return _col(v, aval_of(x).shape[-1])
    below = mul(col(dl), _shift_rows(x, 1))   # dl[i] x[i - 1]
    above = mul(col(du), _shift_rows(x, -1))  # du[i] x[i + 1]
    return add(add(mul(col(d), x), below), above)


def _shift_rows(x: Any, by: int) -> Any:
    """x[..., i - by, :] at row i (zero rows where i - by is outside)."""
    aval = aval_of(x)
    if aval.shape[-2] == 0:
        return x
    nd = aval.ndim
    return pad(x, scalar_literal(0, aval.dtype), [(0, 0, 0)] * (nd - 2) + [(by, -by, 0), (0, 0, 0)])


@tridiagonal_solve_p.def_rule("jvp")
def _tridiagonal_solve_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, perturb_singular: bool
                           ) -> tuple[list[Any], list[Any]]:
    # JAX's rule: dx = T^-1 (db - dT x), dT the tridiagonal matrix of the diagonals' tangents
    dl, d, du, b = primals
    x = tridiagonal_solve_p.bind(dl, d, du, b, perturb_singular=perturb_singular)
    if all(t is None for t in tangents):
        return [x], [None]
    *diag_tangents, db = tangents
    rhs = db
    if any(t is not None for t in diag_tangents):
        ddl, dd, ddu = [zeros(aval_of(p)) if t is None else t for p, t in zip(primals, diag_tangents)]
        product = _tridiagonal_product(ddl, dd, ddu, x)
        rhs = neg(product) if rhs is None else sub(rhs, product)
    return [x], [tridiagonal_solve_p.bind(dl, d, du, rhs, perturb_singular=perturb_singular)]


@tridiagonal_solve_p.def_rule("vjp")
def _tridiagonal_solve_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                           perturb_singular: bool) -> list[Any]:
    # the transpose of the JVP: b_bar = T^-T ct (T^T's subdiagonal is du shifted down, its superdiagonal dl shifted
    # up); the diagonals' cotangents are -(b_bar x^T) on T's three diagonals: d_bar[i] = -b_bar[i] . x[i],
    # dl_bar[i] = -b_bar[i] . x[i - 1] (0 at i = 0), du_bar[i] = -b_bar[i] . x[i + 1] (0 at i = m - 1)
    (ct,), (dl, d, du, _), (x,) = cts, ins, outs
    if ct is None or not any(needs):
        return [None] * 4
    b_bar = tridiagonal_solve_p.bind(_shift_down(du, 1), d, _shift_down(dl, -1), ct,
                                     perturb_singular=perturb_singular)
    last = aval_of(x).ndim - 1

    def along(shifted: Any) -> Any:
        return neg(reduce_sum(mul(b_bar, shifted), (last,)))
    return [along(_shift_rows(x, 1)) if needs[0] else None, along(x) if needs[1] else None,
            along(_shift_rows(x, -1)) if needs[2] else None, b_bar if needs[3] else None]


@tridiagonal_solve_p.def_rule("batching")
def _tridiagonal_solve_batching(args: list[Any], dims: list[BatchDim], *, perturb_singular: bool
                                ) -> tuple[list[Any], list[BatchDim]]:
    # with the diagonals unbatched, b's batch joins its columns: one solve with more right-hand sides (as JAX)
    if any(dim is not None for dim in dims[:3]):
        return _front_batching(tridiagonal_solve_p)(args, dims, perturb_singular=perturb_singular)
    b = args[3]
    pos = aval_of(b).ndim - 2  # (b's rank with its batch dimension: the batch goes just before b's columns)
    moved = moveaxis(b, dims[3], pos)
    shape = aval_of(moved).shape
    merged = reshape(moved, shape[:pos] + (shape[pos] * shape[pos + 1],))
    x = tridiagonal_solve_p.bind(*args[:3], merged, perturb_singular=perturb_singular)
    return [reshape(x, shape)], [pos]


def tridiagonal_solve(dl: Any, d: Any, du: Any, b: Any, perturb_singular: bool = False) -> Any:
    """The solution x of the tridiagonal system T x = b (jax.lax.linalg.tridiagonal_solve): dl, d, du (..., m) T's
    lower diagonal (dl[i] = T[i, i - 1], dl[0] unused), diagonal and upper diagonal (du[i] = T[i, i + 1], du[m - 1]
    unused), b (..., m, k). LAPACK's gtsv with partial pivoting (NaN for a singular T, as JAX on CPU), or with
    perturb_singular=True tiny pivots perturbed by about eps * max |U| (a finite solution of a singular T).
    Differentiable in all four arguments, as JAX's."""
    return tridiagonal_solve_p.bind(dl, d, du, b, perturb_singular=bool(perturb_singular))


# lu_pivots_to_permutation(pivots, permutation_size): the permutation (..., m) that the row swaps pivots (..., k)
# (row i with row pivots[i], in order, zero-based, as lu gives them) make of 0..m-1; a loop of k steps lowered
# inline. Out-of-range pivots behave as JAX's (a negative one counts from the end; beyond that, the swap reads the
# nearest row and writes nothing).
lu_pivots_to_permutation_p = Primitive("lu_pivots_to_permutation", checks=())
lu_pivots_to_permutation_p.def_rule("sharding_rule", explicit.batch_only("lu_pivots_to_permutation", 1))


@lu_pivots_to_permutation_p.def_rule("abstract_eval")
def _lu_pivots_to_permutation_abstract_eval(pivots: ShapedArray, *, permutation_size: int) -> ShapedArray:
    op = "lu_pivots_to_permutation"
    _vector(op, pivots, "pivots", (_INT32,))
    if permutation_size < pivots.shape[-1]:
        raise ValueError(f"{op}: permutation_size ({permutation_size}) must be at least the number of pivots "
                         f"(their last dimension), got pivots {pivots.str_short()}")
    return pivots.update(shape=pivots.shape[:-1] + (permutation_size,))


def _pivots_step(i: Any, perm: Any, pivots: Any) -> list[Any]:
    """One row swap: rows i and pivots[..., i] of the permutations perm (..., m) exchanged."""
    m, k = aval_of(perm).shape[-1], aval_of(pivots).shape[-1]
    nd = aval_of(perm).ndim
    batch = aval_of(perm).shape[:-1]
    iota = broadcasted_iota(_INT32, aval_of(perm).shape, nd - 1)
    j = reshape(dynamic_slice(pivots, [np.int32(0)] * (nd - 1) + [i], batch + (1,)), batch + (1,))
    if k:
        j = select(lt(j, np.int32(0)), add(j, np.int32(m)), j)  # (negative: from the end, once)
    nearest = clamp(np.int32(0), j, np.int32(m - 1))
    at_i = reshape(dynamic_slice(perm, [np.int32(0)] * (nd - 1) + [i], batch + (1,)), batch + (1,))
    at_j = reduce_sum(select(eq(iota, broadcast_in_dim(nearest, aval_of(perm).shape, tuple(range(nd)))), perm,
                             full(aval_of(perm).shape, 0, _INT32)), (nd - 1,))
    perm = select(eq(iota, broadcast_in_dim(i, aval_of(perm).shape, ())),
                  broadcast_in_dim(at_j, aval_of(perm).shape, tuple(range(nd - 1))), perm)
    perm = select(eq(iota, broadcast_in_dim(j, aval_of(perm).shape, tuple(range(nd)))),
                  broadcast_in_dim(at_i, aval_of(perm).shape, tuple(range(nd))), perm)
    return [add(i, np.int32(1)), perm, pivots]


@lu_pivots_to_permutation_p.def_rule("lowering")
def _lu_pivots_to_permutation_lowering(ctx: LoweringContext, pivots: str, *, permutation_size: int) -> list[str]:
    out = ctx.aval_out
    pivots_aval = ctx.avals_in[0]
    perm = ctx.op("stablehlo.iota", [], out, {"iota_dimension": f"{out.ndim - 1} : i64"})
    k = pivots_aval.shape[-1]
    if 0 in out.shape or k == 0:
        return [perm]
    index = ShapedArray((), _INT32)
    start = ctx.constant(0, index)
    _, perm, _ = emit_while(ctx, lambda i, *_: lt(i, np.int32(k)), _pivots_step, [start, perm, pivots],
                            [index, out, pivots_aval])
    return [perm]


lu_pivots_to_permutation_p.mark_not_differentiable()
lu_pivots_to_permutation_p.def_rule("batching", _front_batching(lu_pivots_to_permutation_p))


def lu_pivots_to_permutation(pivots: Any, permutation_size: int) -> Any:
    """Converts the pivots (row swaps) returned by lu to a permutation (jax.lax.linalg.lu_pivots_to_permutation):
    pivots int32 (..., k), row i swapped with row pivots[..., i] in turn, applied to 0 .. permutation_size - 1
    (permutation_size >= k); int32 (..., permutation_size)."""
    size = static_int("lu_pivots_to_permutation", "permutation_size", permutation_size)
    return lu_pivots_to_permutation_p.bind(pivots, permutation_size=size)


# symmetric_product(a, c, alpha, beta): alpha a a^T + beta c, a (..., m, n), c (..., m, m) symmetric; float dtypes
# (as JAX). The whole matrix is computed (JAX's CPU result; only its lower triangle is promised).
symmetric_product_p = Primitive("symmetric_product", checks=())
symmetric_product_p.def_rule("sharding_rule", explicit.batch_only("symmetric_product", 2))


@symmetric_product_p.def_rule("abstract_eval")
def _symmetric_product_abstract_eval(a: ShapedArray, c: ShapedArray, *, alpha: float, beta: float) -> ShapedArray:
    op = "symmetric_product"
    _check_matrix(op, a, arg="a_matrix", dtypes=_REAL)
    _check_matrix(op, c, arg="c_matrix", dtypes=_REAL)
    _check_same_dtype(op, [a, c], ["a_matrix", "c_matrix"])
    _check_batches(op, [a, c], [2, 2], ["a_matrix", "c_matrix"])
    if c.shape[-1] != c.shape[-2] or a.shape[-2] != c.shape[-1]:
        raise ValueError(f"{op}: expects a_matrix (m, n) and a square c_matrix (m, m), got {a.str_short()} and "
                         f"{c.str_short()}")
    return c


@symmetric_product_p.def_rule("lowering")
def _symmetric_product_lowering(ctx: LoweringContext, a: str, c: str, *, alpha: float, beta: float) -> list[str]:
    def product(a: Any, c: Any) -> list[Any]:
        return [add(mul(mm(a, mT(a)), alpha), mul(c, beta))]
    return emit_function(ctx.emitter, product, list(ctx.avals_in), [a, c])[0]


symmetric_product_p.mark("jvp", NO_DERIVATIVE_RULES)
symmetric_product_p.mark("vjp", NO_DERIVATIVE_RULES)
symmetric_product_p.def_rule("batching", _front_batching(symmetric_product_p))


def symmetric_product(a_matrix: Any, c_matrix: Any, alpha: float = 1., beta: float = 0.,
                      symmetrize_output: bool = False) -> Any:
    """The symmetric product alpha A A^T + beta C (jax.lax.linalg.symmetric_product) of a_matrix (..., m, n) and
    the symmetric c_matrix (..., m, m), float32 or float64. Only its lower triangle is promised (ember computes the
    whole matrix, as JAX on CPU); symmetrize_output=True copies the lower triangle's transpose above the diagonal.
    Not differentiable, as in JAX."""
    out = symmetric_product_p.bind(a_matrix, c_matrix, alpha=float(alpha), beta=float(beta))
    if symmetrize_output:
        out = add(_mask(out, lower=True), mT(_mask(out, lower=True, k=-1)))
    return out


# cholesky_update(r, w): the upper triangular R' with R'^T R' = R^T R + w w^T for the upper triangular r (..., n, n)
# and w (..., n): n Givens rotations, row k of R against w zeroing w[k] (O(n^2)), a loop lowered inline. Float
# dtypes (as JAX).
cholesky_update_p = Primitive("cholesky_update", checks=())
cholesky_update_p.def_rule("sharding_rule", explicit.batch_only("cholesky_update", (2, 1)))


@cholesky_update_p.def_rule("abstract_eval")
def _cholesky_update_abstract_eval(r: ShapedArray, w: ShapedArray) -> ShapedArray:
    op = "cholesky_update"
    _check_matrix(op, r, arg="r_matrix", dtypes=_REAL)
    _vector(op, w, "w_vector", _REAL)
    _check_same_dtype(op, [r, w], ["r_matrix", "w_vector"])
    _check_batches(op, [r, w], [2, 1], ["r_matrix", "w_vector"])
    if r.shape[-1] != r.shape[-2] or w.shape[-1] != r.shape[-1]:
        raise ValueError(f"{op}: takes a square matrix and a vector of its size, got {r.str_short()} and "
                         f"{w.str_short()}")
    return r


def _givens_step(k: Any, r: Any, w: Any) -> list[Any]:
    """Rotation k: (c, s) from (r[k, k], w[k]) (BLAS's rotg, scaled against overflow; c = 1, s = 0 where w[k] is
    0), then row k of r <- c row - s w and w <- c w + s row (which zeroes w[k] and makes r[k, k] >= 0)."""
    aval = aval_of(r)
    nd, n, batch = aval.ndim, aval.shape[-1], aval.shape[:-2]
    zero = np.int32(0)
    row = reshape(dynamic_slice(r, [zero] * (nd - 2) + [k, zero], batch + (1, n)), batch + (n,))
    x = reshape(dynamic_slice(row, [zero] * (nd - 2) + [k], batch + (1,)), batch)
    y = reshape(dynamic_slice(w, [zero] * (nd - 2) + [k], batch + (1,)), batch)
    big = max_(abs_(x), abs_(y))
    flat = eq(y, full(batch, 0, aval.dtype))
    safe = select(flat, full(batch, 1, aval.dtype), big)
    xs, ys = div(x, safe), div(y, safe)
    inverse = rsqrt(add(mul(xs, xs), mul(ys, ys)))
    c = select(flat, full(batch, 1, aval.dtype), mul(xs, inverse))
    s = select(flat, full(batch, 0, aval.dtype), neg(mul(ys, inverse)))
    c, s = [broadcast_in_dim(v, batch + (n,), tuple(range(nd - 2))) for v in (c, s)]
    new_row = sub(mul(c, row), mul(s, w))
    w = add(mul(c, w), mul(s, row))
    r = dynamic_update_slice(r, reshape(new_row, batch + (1, n)), [zero] * (nd - 2) + [k, zero])
    return [add(k, np.int32(1)), r, w]


@cholesky_update_p.def_rule("lowering")
def _cholesky_update_lowering(ctx: LoweringContext, r: str, w: str) -> list[str]:
    r_aval, w_aval = ctx.avals_in
    n = r_aval.shape[-1]
    if 0 in r_aval.shape:
        return [r]
    index = ShapedArray((), _INT32)
    _, out, _ = emit_while(ctx, lambda k, *_: lt(k, np.int32(n)), _givens_step, [ctx.constant(0, index), r, w],
                           [index, r_aval, w_aval])
    return [out]


cholesky_update_p.mark("jvp", NO_DERIVATIVE_RULES)
cholesky_update_p.mark("vjp", NO_DERIVATIVE_RULES)
cholesky_update_p.def_rule("batching", _front_batching(cholesky_update_p))


def cholesky_update(r_matrix: Any, w_vector: Any) -> Any:
    """Cholesky rank-1 update (jax.lax.linalg.cholesky_update): for the upper triangular R (r_matrix, (..., n, n))
    with A = R^T R and w (w_vector, (..., n)), the upper triangular R' with R'^T R' = A + w w^T, in O(n^2) (n Givens
    rotations). Float dtypes; leading batch dimensions and vmap too (JAX's takes one matrix). Not differentiable,
    as in JAX."""
    return cholesky_update_p.bind(r_matrix, w_vector)


__all__: list[str] = []  # (jax.lax.linalg's names, not jax.lax's: ember.lax.linalg re-exports LAX_LINALG)
# ember.lax.linalg's names (jax.lax.linalg's that ember has), the functions and their primitives
# (geqrf is jax._src.lax.linalg's, not jax.lax.linalg's: ember.numpy.linalg.qr's mode 'raw' uses it)
LAX_LINALG = ("EigImplementation", "EighImplementation", "SvdAlgorithm", "cholesky", "cholesky_p", "cholesky_update",
              "cholesky_update_p", "eig", "eig_p", "eigh", "eigh_p", "hessenberg", "hessenberg_p",
              "householder_product", "householder_product_p", "lu", "lu_p", "lu_pivots_to_permutation",
              "lu_pivots_to_permutation_p", "ormqr", "ormqr_p", "qr", "qr_p", "schur", "schur_p", "svd", "svd_p",
              "symmetric_product", "symmetric_product_p", "triangular_solve", "triangular_solve_p", "tridiagonal",
              "tridiagonal_p", "tridiagonal_solve", "tridiagonal_solve_p")
