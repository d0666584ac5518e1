"""CSR and CSC: 2-D compressed sparse row and column matrices (jax.experimental.sparse.csr): data and indices (the
column of each element, in row order) and indptr (where each row starts; CSC is the transpose's CSR)."""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

import ember
import ember.numpy as jnp
from ember.experimental.sparse._base import JAXSparse, concrete_int
from ember.experimental.sparse._primitive import sparse_primitive
from ember.experimental.sparse.coo import _check_2d, _eye_coordinates, _matmul, _matvec


def _rows(indices: Any, indptr: Any) -> Any:
    """The row of each stored element of a CSR matrix (from indptr)."""
    return jnp.cumsum(jnp.zeros_like(indices).at[indptr].add(1)) - 1




def _check(api: str, mat: Any, cls: type) -> Any:
    if not isinstance(mat, cls):
        raise TypeError(f"{api}: expected a {cls.__name__} matrix, got {type(mat).__name__}")
    return mat


def _todense(data: Any, indices: Any, indptr: Any, *, shape: Sequence[int]) -> Any:
    return jnp.zeros(shape, data.dtype).at[_rows(indices, indptr), indices].add(data)


def csr_todense(mat: "CSR") -> Any:
    """The dense matrix of a CSR matrix."""
    mat = _check("csr_todense", mat, CSR)
    return csr_todense_p.bind(*mat._bufs, shape=mat.shape)


def _fromdense(mat: Any, *, nse: int, index_dtype: Any) -> tuple[Any, Any, Any]:
    m = mat.shape[0]
    row, col = jnp.nonzero(mat, size=nse)
    stored = jnp.arange(nse) < jnp.sum(mat != 0)
    data = jnp.where(stored, mat[row, col], jnp.zeros((), mat.dtype))
    row = jnp.where(stored, row, m)
    counts = jnp.bincount(row, length=m).astype(index_dtype)
    indptr = jnp.zeros(m + 1, index_dtype).at[1:].set(jnp.cumsum(counts).astype(index_dtype))
    return data, col.astype(index_dtype), indptr


def csr_fromdense(mat: Any, *, nse: int | None = None, index_dtype: Any = np.int32) -> "CSR":
    """The CSR matrix of a dense 2-D mat (nse defaults to the count of nonzeros, which needs mat's values: pass it
    inside jit, vmap or grad); padding elements sit past the last row's end."""
    mat = _check_2d("csr_fromdense", mat)
    if nse is None:
        nse = jnp.sum(mat != 0)
    nse = concrete_int("csr_fromdense", "nse", nse, "pass nse (the number of stored elements) there")
    return CSR(csr_fromdense_p.bind(mat, nse=nse, index_dtype=np.dtype(index_dtype)), shape=mat.shape)


def csr_matvec(mat: "CSR", v: Any, transpose: bool = False) -> Any:
    """mat @ v (mat.T @ v with transpose) for a CSR matrix and a dense vector."""
    mat, v = _check("csr_matvec", mat, CSR), jnp.asarray(v)
    size = mat.shape[0] if transpose else mat.shape[1]
    if v.shape != (size,):
        raise ValueError(f"csr_matvec: v must have shape ({size},) for a matrix of shape {mat.shape} "
                         f"(transpose={transpose}), got {tuple(v.shape)}")
    return csr_matvec_p.bind(*mat._bufs, v, shape=mat.shape, transpose=bool(transpose))


def csr_matmat(mat: "CSR", B: Any, *, transpose: bool = False) -> Any:
    """mat @ B (mat.T @ B with transpose) for a CSR matrix and a dense matrix."""
    mat, B = _check("csr_matmat", mat, CSR), jnp.asarray(B)
    size = mat.shape[0] if transpose else mat.shape[1]
    if B.ndim != 2 or B.shape[0] != size:
        raise ValueError(f"csr_matmat: B must have shape ({size}, n) for a matrix of shape {mat.shape} "
                         f"(transpose={transpose}), got {tuple(B.shape)}")
    return csr_matmat_p.bind(*mat._bufs, B, shape=mat.shape, transpose=bool(transpose))


def _csr_matvec(data: Any, indices: Any, indptr: Any, v: Any, *, shape: Sequence[int], transpose: bool) -> Any:
    return _matvec(data, _rows(indices, indptr), indices, v, shape=shape, transpose=transpose)


csr_todense_p = sparse_primitive("csr_todense", _todense)
csr_fromdense_p = sparse_primitive("csr_fromdense", _fromdense, True)
csr_matvec_p = sparse_primitive("csr_matvec", _csr_matvec)
csr_matmat_p = sparse_primitive("csr_matmat", _csr_matvec)


class _Compressed(JAXSparse):
    """What CSR and CSC share: the buffers (data, indices, indptr), a 2-D shape, the pytree."""
    data: Any
    indices: Any
    indptr: Any

    def __init__(self, args: tuple[Any, Any, Any], *, shape: Sequence[int]):
        self.data, self.indices, self.indptr = (jnp.asarray(a) for a in args)
        super().__init__(args, shape=shape)
        if len(self.shape) != 2:
            raise ValueError(f"{type(self).__name__}: shape must be 2-D, got {self.shape}")

    @property
    def _bufs(self) -> tuple[Any, Any, Any]:
        return self.data, self.indices, self.indptr

    @property
    def nse(self) -> int:
        return self.data.shape[0]

    def _with_data(self, data: Any) -> Any:
        return type(self)((data, self.indices, self.indptr), shape=self.shape)

    def tree_flatten(self) -> tuple[tuple[Any, Any, Any], dict[str, Any]]:
        return self._bufs, {"shape": self.shape}

    @classmethod
    def tree_unflatten(cls, aux_data: dict[str, Any], children: Any) -> Any:
        obj = object.__new__(cls)
        obj.data, obj.indices, obj.indptr = children
        if aux_data.keys() != {"shape"}:
            raise ValueError(f"{cls.__name__}.tree_unflatten: invalid aux_data={aux_data}")
        obj.shape = aux_data["shape"]
        return obj


def _empty_compressed(cls: type, shape: Sequence[int], dtype: Any, index_dtype: Any, rows: int) -> Any:
    shape = tuple(operator.index(s) for s in shape)
    if len(shape) != 2:
        raise ValueError(f"{cls.__name__} must have ndim=2; got shape={shape}")
    return cls((jnp.zeros((0,), dtype), jnp.zeros((0,), index_dtype), jnp.zeros(shape[rows] + 1, index_dtype)),
               shape=shape)


@ember.tree_util.register_pytree_node_class
class CSR(_Compressed):
    """A compressed-sparse-row matrix (like jax.experimental.sparse.CSR): CSR((data, indices, indptr), shape=...)."""

    @classmethod
    def fromdense(cls, mat: Any, *, nse: int | None = None, index_dtype: Any = np.int32) -> "CSR":
        """The CSR matrix of a dense one (csr_fromdense)."""
        return csr_fromdense(mat, nse=nse, index_dtype=index_dtype)

    @classmethod
    def _empty(cls, shape: Sequence[int], *, dtype: Any = None, index_dtype: Any = "int32") -> "CSR":
        return _empty_compressed(cls, shape, dtype, index_dtype, 0)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype: Any = None, index_dtype: Any = "int32") -> "CSR":
        index_dtype = np.dtype(index_dtype)
        rows, cols, size = _eye_coordinates(N, M, k, index_dtype)
        if size <= 0:
            return cls._empty((N, M), dtype=dtype, index_dtype=index_dtype)
        indptr = np.zeros(N + 1, index_dtype)
        indptr[1:] = np.cumsum(np.bincount(rows, minlength=N))
        return cls((jnp.ones(size, dtype), jnp.asarray(cols), jnp.asarray(indptr)), shape=(N, M))

    def todense(self) -> Any:
        """The dense matrix (csr_todense)."""
        return csr_todense(self)

    def transpose(self, axes: Any = None) -> "CSC":
        """The transpose, a CSC matrix with the same buffers."""
        if axes is not None:
            raise NotImplementedError("axes argument to transpose()")
        return CSC(self._bufs, shape=self.shape[::-1])

    def __matmul__(self, other: Any) -> Any:
        return _matmul(self, other, csr_matvec, csr_matmat)


@ember.tree_util.register_pytree_node_class
class CSC(_Compressed):
    """A compressed-sparse-column matrix (like jax.experimental.sparse.CSC): the CSR buffers of its transpose."""

    @classmethod
    def fromdense(cls, mat: Any, *, nse: int | None = None, index_dtype: Any = np.int32) -> "CSC":
        """The CSC matrix of a dense one."""
        return csr_fromdense(_check_2d("CSC.fromdense", mat).T, nse=nse, index_dtype=index_dtype).T

    @classmethod
    def _empty(cls, shape: Sequence[int], *, dtype: Any = None, index_dtype: Any = "int32") -> "CSC":
        return _empty_compressed(cls, shape, dtype, index_dtype, 1)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype: Any = None, index_dtype: Any = "int32") -> "CSC":
        return CSR._eye(M, N, -k, dtype=dtype, index_dtype=index_dtype).T

    def todense(self) -> Any:
        """The dense matrix."""
        return csr_todense(self.T).T

    def transpose(self, axes: Any = None) -> CSR:
        """The transpose, a CSR matrix with the same buffers."""
        if axes is not None:
            raise NotImplementedError("axes argument to transpose()")
        return CSR(self._bufs, shape=self.shape[::-1])

    def __matmul__(self, other: Any) -> Any:
        return _matmul(self, other, lambda m, v: csr_matvec(m.T, v, transpose=True),
                       lambda m, b: csr_matmat(m.T, b, transpose=True))


__all__ = ["CSC", "CSR", "csr_fromdense", "csr_fromdense_p", "csr_matmat", "csr_matmat_p", "csr_matvec",
           "csr_matvec_p", "csr_todense", "csr_todense_p"]
