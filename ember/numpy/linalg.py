"""ember.numpy.linalg: jax.numpy.linalg (the array API's linear-algebra extension and numpy's linalg; `__all__` at
the end lists them). The factorisations (cholesky, solve, inv, det, slogdet, qr, eigh, svd, lstsq, pinv, ...) live in
ember._numpy.factorizations, on the primitives of ember._prims.linalg (LAPACK through XLA FFI custom calls, see
docs/linalg.md); all take real (float32, float64) and complex (complex64, complex128) matrices."""
from __future__ import annotations

from typing import Any, Sequence

import ember.numpy as _enp
from ember._numpy.linalg import cross as _cross, matmul as _matmul, tensordot as _tensordot, vecdot as vecdot
from ember._numpy.manipulation import matrix_transpose as matrix_transpose
from ember._numpy.shape import diagonal as _diagonal
from ember._numpy.manipulation import trace as _trace
from ember._numpy.factorizations import (EigResult as EigResult, EighResult as EighResult, QRResult as QRResult,
                                         SlogdetResult as SlogdetResult, SVDResult as SVDResult,
                                         cholesky as cholesky, det as det, eig as eig, eigh as eigh,
                                         eigvals as eigvals, eigvalsh as eigvalsh,
                                         inv as inv, lstsq as lstsq, matrix_rank as matrix_rank,
                                         multi_dot as multi_dot, pinv as pinv, qr as qr, slogdet as slogdet,
                                         solve as solve, svd as svd, svdvals as svdvals, tensorinv as tensorinv,
                                         tensorsolve as tensorsolve)


def matmul(x1: Any, x2: Any, /) -> Any:
    """The matrix product (numpy's matmul)."""
    return _matmul(x1, x2)


def outer(x1: Any, x2: Any, /) -> Any:
    """The outer product of two 1-D arrays."""
    if _enp.ndim(x1) != 1 or _enp.ndim(x2) != 1:
        raise ValueError(f"linalg.outer: x1 and x2 must be 1-D, got shapes {_enp.shape(x1)} and {_enp.shape(x2)}")
    return _enp.outer(x1, x2)


def tensordot(x1: Any, x2: Any, /, *, axes: int | tuple[Sequence[int], Sequence[int]] = 2) -> Any:
    """The sum of products over axes (an int: the last axes of x1 with the first of x2)."""
    return _tensordot(x1, x2, axes)


def trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    """The sums along the diagonals of the last two axes."""
    if _enp.ndim(x) < 2:
        raise ValueError(f"linalg.trace: x must have at least 2 dimensions, got shape {_enp.shape(x)}")
    return _trace(x, offset, -2, -1, dtype=dtype)


def diagonal(x: Any, /, *, offset: int = 0) -> Any:
    """The diagonals of the last two axes."""
    if _enp.ndim(x) < 2:
        raise ValueError(f"linalg.diagonal: x must have at least 2 dimensions, got shape {_enp.shape(x)}")
    return _diagonal(x, offset, -2, -1)


def cross(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """The cross product of 3-vectors along axis (both of size 3 there)."""
    if _enp.shape(x1)[axis] != 3 or _enp.shape(x2)[axis] != 3:
        raise ValueError(f"linalg.cross: axis {axis} must have size 3 in both, got shapes {_enp.shape(x1)} and "
                         f"{_enp.shape(x2)}")
    return _cross(x1, x2, axis=axis)


def vector_norm(x: Any, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False,
                ord: Any = 2) -> Any:  # noqa: A002
    """The vector p-norm over axis (all axes when None): ord a positive or negative number, 0 (the count of
    nonzeros), inf or -inf."""
    x = _enp.asarray(x)
    if not _enp.issubdtype(x.dtype, _enp.inexact):
        x = _enp.astype(x, _enp.result_type(x.dtype, _enp.float32) if x.dtype.itemsize < 8 else _enp.float64)
    a = _enp.abs(x)
    if ord == 2:
        return _enp.sqrt(_enp.sum(a * a, axis=axis, keepdims=keepdims))
    if ord == 1:
        return _enp.sum(a, axis=axis, keepdims=keepdims)
    if ord == float("inf"):
        return _enp.max(a, axis=axis, keepdims=keepdims, initial=0.0) if _enp.size(a) == 0 else \
            _enp.max(a, axis=axis, keepdims=keepdims)
    if ord == -float("inf"):
        return _enp.min(a, axis=axis, keepdims=keepdims)
    if ord == 0:
        return _enp.astype(_enp.sum(a != 0, axis=axis, keepdims=keepdims), a.dtype)
    if isinstance(ord, str):
        raise ValueError(f"linalg.vector_norm: ord must be a number, inf or -inf, got {ord!r}")
    return _enp.sum(a ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)


def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: Any = "fro") -> Any:  # noqa: A002
    """The matrix norm over the last two axes: 'fro', 'nuc' (the sum of the singular values), 1, -1, inf, -inf, 2
    and -2 (the largest and smallest singular value)."""
    x = _enp.asarray(x)
    if _enp.ndim(x) < 2:
        raise ValueError(f"linalg.matrix_norm: x must have at least 2 dimensions, got shape {_enp.shape(x)}")
    if not _enp.issubdtype(x.dtype, _enp.inexact):
        x = _enp.astype(x, _enp.float32 if x.dtype.itemsize < 8 else _enp.float64)
    a = _enp.abs(x)
    if ord == "fro":
        return _enp.sqrt(_enp.sum(a * a, axis=(-2, -1), keepdims=keepdims))
    if ord in (1, -1):  # max/min column sum
        sums = _enp.sum(a, axis=-2, keepdims=True)
        out = (_enp.max if ord == 1 else _enp.min)(sums, axis=-1, keepdims=True)
    elif ord in (float("inf"), -float("inf")):  # max/min row sum
        sums = _enp.sum(a, axis=-1, keepdims=True)
        out = (_enp.max if ord > 0 else _enp.min)(sums, axis=-2, keepdims=True)
    elif ord in ("nuc", 2, -2):
        s = svdvals(x)
        out = _enp.sum(s, axis=-1) if ord == "nuc" else _enp.max(s, axis=-1) if ord == 2 else _enp.min(s, axis=-1)
        return out[..., None, None] if keepdims else out
    else:
        raise ValueError(f"linalg.matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got {ord!r}")
    return out if keepdims else _enp.squeeze(out, axis=(-2, -1))


def matrix_power(x: Any, n: int, /) -> Any:
    """x multiplied by itself n times (the identity for 0), by repeated squaring; a negative n raises the inverse
    to -n."""
    x = _enp.asarray(x)
    if _enp.ndim(x) < 2 or _enp.shape(x)[-1] != _enp.shape(x)[-2]:
        raise ValueError(f"linalg.matrix_power: x must be a stack of square matrices, got shape {_enp.shape(x)}")
    if not isinstance(n, int):
        raise TypeError(f"linalg.matrix_power: n must be a Python int, got {n!r}")
    if n < 0:
        x, n = inv(x), -n
    result = _enp.broadcast_to(_enp.eye(_enp.shape(x)[-1], dtype=x.dtype), _enp.shape(x))
    base = x
    while n:
        if n & 1:
            result = _matmul(result, base)
        n >>= 1
        if n:
            base = _matmul(base, base)
    return result


def norm(x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A002
    """numpy's norm: of the whole array flattened (axis None, ord None), a vector norm over one axis, or a matrix
    norm over two ('fro', 'nuc', 1, -1, 2, -2, inf, -inf)."""
    x = _enp.asarray(x)
    if axis is None:
        if ord is None:
            return vector_norm(_enp.ravel(x), ord=2) if not keepdims else \
                _enp.reshape(vector_norm(_enp.ravel(x), ord=2), (1,) * _enp.ndim(x))
        axis = tuple(range(_enp.ndim(x)))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if len(axes) == 1:
        return vector_norm(x, axis=axes[0], keepdims=keepdims, ord=2 if ord is None else ord)
    if len(axes) != 2:
        raise ValueError(f"linalg.norm: axis must name one or two axes, got {axis!r}")
    nd = _enp.ndim(x)
    a0, a1 = (a % nd for a in axes)
    moved = _enp.moveaxis(x, (a0, a1), (-2, -1))
    out = matrix_norm(moved, ord="fro" if ord is None else ord, keepdims=False)
    if keepdims:
        out = _enp.expand_dims(out, tuple(sorted((a0, a1))))
    return out


def cond(x: Any, p: Any = None) -> Any:
    """The condition number of x in the norm p: None or 2, the ratio of the extreme singular values (-2: its
    inverse); 'fro', 'nuc', 1, -1, inf, -inf: norm(x) * norm(inv(x))."""
    x = _enp.asarray(x)
    if _enp.ndim(x) < 2 or 0 in _enp.shape(x)[-2:]:
        raise ValueError(f"linalg.cond: x must be a (stack of) non-empty matrices, got shape {_enp.shape(x)}")
    if p is None or p in (2, -2):
        s = svdvals(x)
        ratio = s[..., 0] / s[..., -1]
        return 1.0 / ratio if p == -2 else ratio
    return matrix_norm(x, ord=p) * matrix_norm(inv(x), ord=p)


__all__ = ["matmul", "matrix_transpose", "outer", "tensordot", "trace", "diagonal", "cross", "vecdot", "vector_norm",
           "matrix_norm", "matrix_power", "norm", "cond", "cholesky", "det", "eigh", "eigvalsh", "inv", "lstsq",
           "matrix_rank", "multi_dot", "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensorinv",
           "tensorsolve", "eig", "eigvals", "EigResult", "EighResult", "QRResult", "SlogdetResult", "SVDResult"]
