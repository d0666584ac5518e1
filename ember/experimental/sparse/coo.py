"""COO: 2-D coordinate-format sparse matrices (jax.experimental.sparse.coo): data, row and col, one entry per stored
element (repeats add up); fromdense pads with zeros at (0, 0)."""
from __future__ import annotations

import operator
from typing import Any, NamedTuple, Sequence

import numpy as np

import ember
import ember.lax as lax
import ember.numpy as jnp
from ember.experimental.sparse._base import JAXSparse, concrete_int
from ember.experimental.sparse._primitive import sparse_primitive


class COOInfo(NamedTuple):
    """A COO matrix's static facts."""
    shape: tuple[int, ...]
    rows_sorted: bool = False
    cols_sorted: bool = False


def _check_coo(api: str, mat: Any) -> "COO":
    if not isinstance(mat, COO):
        raise TypeError(f"{api}: expected a COO matrix, got {type(mat).__name__}")
    return mat


def _check_2d(api: str, mat: Any) -> Any:
    mat = jnp.asarray(mat)
    if mat.ndim != 2:
        raise ValueError(f"{api}: expected a 2-D array, got shape {tuple(mat.shape)}")
    return mat


def _todense(data: Any, row: Any, col: Any, *, spinfo: COOInfo) -> Any:
    return jnp.zeros(spinfo.shape, data.dtype).at[row, col].add(data)


def coo_todense(mat: "COO") -> Any:
    """The dense matrix of a COO matrix (repeated entries added)."""
    mat = _check_coo("coo_todense", mat)
    return coo_todense_p.bind(*mat._bufs, spinfo=mat._info)


def _fromdense(mat: Any, *, nse: int, index_dtype: Any) -> tuple[Any, Any, Any]:
    row, col = jnp.nonzero(mat, size=nse)
    data = jnp.where(jnp.arange(nse) < jnp.sum(mat != 0), mat[row, col], jnp.zeros((), mat.dtype))
    return data, row.astype(index_dtype), col.astype(index_dtype)




def coo_fromdense(mat: Any, *, nse: int | None = None, index_dtype: Any = np.int32) -> "COO":
    """The COO matrix of a dense 2-D mat: its nonzeros in row-major order, nse of them (by default the count,
    which needs mat's values: pass it inside jit, vmap or grad), padded with zeros at (0, 0)."""
    mat = _check_2d("coo_fromdense", mat)
    if nse is None:
        nse = jnp.sum(mat != 0)
    nse = concrete_int("coo_fromdense", "nse", nse, "pass nse (the number of stored elements) there")
    return COO(coo_fromdense_p.bind(mat, nse=nse, index_dtype=np.dtype(index_dtype)), shape=mat.shape,
               rows_sorted=True)


def _matvec(data: Any, row: Any, col: Any, v: Any, *, shape: Sequence[int], transpose: bool) -> Any:
    """The product of the matrix (data at (row, col)) and a dense vector or matrix v."""
    row, col = (col, row) if transpose else (row, col)
    out = shape[1] if transpose else shape[0]
    product = data[:, None] * v[col] if v.ndim == 2 else data * v[col]
    return jnp.zeros((out, *v.shape[1:]), product.dtype).at[row].add(product)


def coo_matvec(mat: "COO", v: Any, transpose: bool = False) -> Any:
    """mat @ v (mat.T @ v with transpose) for a COO matrix and a dense vector."""
    mat, v = _check_coo("coo_matvec", mat), jnp.asarray(v)
    size = mat.shape[0] if transpose else mat.shape[1]
    if v.shape != (size,):
        raise ValueError(f"coo_matvec: v must have shape ({size},) for a matrix of shape {mat.shape} "
                         f"(transpose={transpose}), got {tuple(v.shape)}")
    return coo_matvec_p.bind(*mat._bufs, v, spinfo=mat._info, transpose=bool(transpose))


def coo_matmat(mat: "COO", B: Any, *, transpose: bool = False) -> Any:
    """mat @ B (mat.T @ B with transpose) for a COO matrix and a dense matrix."""
    mat, B = _check_coo("coo_matmat", mat), jnp.asarray(B)
    size = mat.shape[0] if transpose else mat.shape[1]
    if B.ndim != 2 or B.shape[0] != size:
        raise ValueError(f"coo_matmat: B must have shape ({size}, n) for a matrix of shape {mat.shape} "
                         f"(transpose={transpose}), got {tuple(B.shape)}")
    return coo_matmat_p.bind(*mat._bufs, B, spinfo=mat._info, transpose=bool(transpose))


def _matmul(mat: Any, other: Any, matvec: Any, matmat: Any) -> Any:
    """A 2-D sparse matrix times a dense vector or matrix (the dtypes promoted), as JAX's COO/CSR __matmul__."""
    if isinstance(other, JAXSparse):
        raise NotImplementedError("matmul between two sparse objects.")
    other = jnp.asarray(other)
    dtype = jnp.result_type(mat.data, other)
    promoted = mat._with_data(mat.data.astype(dtype))
    if other.ndim == 1:
        return matvec(promoted, other.astype(dtype))
    if other.ndim == 2:
        return matmat(promoted, other.astype(dtype))
    raise NotImplementedError(f"matmul with object of shape {tuple(other.shape)}")


def _eye_coordinates(N: int, M: int, k: int, index_dtype: Any) -> tuple[Any, Any, int]:
    size = min(N, M - k) if k > 0 else min(N + k, M)
    i = np.arange(max(size, 0))
    rows, cols = (i - k, i) if k < 0 else (i, i + k)
    return rows.astype(index_dtype), cols.astype(index_dtype), size


coo_todense_p = sparse_primitive("coo_todense", _todense)
coo_fromdense_p = sparse_primitive("coo_fromdense", _fromdense, True)
coo_matvec_p = sparse_primitive("coo_matvec", lambda data, row, col, v, *, spinfo, transpose: _matvec(
    data, row, col, v, shape=spinfo.shape, transpose=transpose))
coo_matmat_p = sparse_primitive("coo_matmat", lambda data, row, col, B, *, spinfo, transpose: _matvec(
    data, row, col, B, shape=spinfo.shape, transpose=transpose))


@ember.tree_util.register_pytree_node_class
class COO(JAXSparse):
    """A 2-D coordinate-format sparse matrix (like jax.experimental.sparse.COO): COO((data, row, col), shape=...)."""
    data: Any
    row: Any
    col: Any

    def __init__(self, args: tuple[Any, Any, Any], *, shape: Sequence[int], rows_sorted: bool = False,
                 cols_sorted: bool = False):
        self.data, self.row, self.col = (jnp.asarray(a) for a in args)
        self._rows_sorted, self._cols_sorted = bool(rows_sorted), bool(cols_sorted)
        super().__init__(args, shape=shape)
        if len(self.shape) != 2:
            raise ValueError(f"COO: shape must be 2-D, got {self.shape}")
        if not self.data.shape == self.row.shape == self.col.shape or self.data.ndim != 1:
            raise ValueError(f"COO: data, row and col must be 1-D of one length, got shapes {tuple(self.data.shape)},"
                             f" {tuple(self.row.shape)}, {tuple(self.col.shape)}")

    @property
    def _info(self) -> COOInfo:
        return COOInfo(self.shape, self._rows_sorted, self._cols_sorted)

    @property
    def _bufs(self) -> tuple[Any, Any, Any]:
        return self.data, self.row, self.col

    @property
    def nse(self) -> int:
        return self.data.shape[0]

    def _with_data(self, data: Any) -> "COO":
        return COO((data, self.row, self.col), **self._info._asdict())

    @classmethod
    def fromdense(cls, mat: Any, *, nse: int | None = None, index_dtype: Any = np.int32) -> "COO":
        """The COO matrix of a dense one (coo_fromdense)."""
        return coo_fromdense(mat, nse=nse, index_dtype=index_dtype)

    def _sort_indices(self) -> "COO":
        """The matrix with its entries sorted by row, then column (itself if its rows are known sorted)."""
        if self._rows_sorted:
            return self
        row, col, data = lax.sort((self.row, self.col, self.data), num_keys=2)
        return COO((data, row, col), shape=self.shape, rows_sorted=True)

    @classmethod
    def _empty(cls, shape: Sequence[int], *, dtype: Any = None, index_dtype: Any = "int32") -> "COO":
        shape = tuple(operator.index(s) for s in shape)
        if len(shape) != 2:
            raise ValueError(f"COO must have ndim=2; got shape={shape}")
        index = jnp.zeros((0,), index_dtype)
        return cls((jnp.zeros((0,), dtype), index, index), shape=shape, rows_sorted=True, cols_sorted=True)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype: Any = None, index_dtype: Any = "int32") -> "COO":
        rows, cols, size = _eye_coordinates(N, M, k, np.dtype(index_dtype))
        if size <= 0:
            return cls._empty((N, M), dtype=dtype, index_dtype=index_dtype)
        return cls((jnp.ones(size, dtype), jnp.asarray(rows), jnp.asarray(cols)), shape=(N, M), rows_sorted=True,
                   cols_sorted=True)

    def todense(self) -> Any:
        """The dense matrix (coo_todense)."""
        return coo_todense(self)

    def transpose(self, axes: Any = None) -> "COO":
        """The transposed matrix (row and col swapped)."""
        if axes is not None:
            raise NotImplementedError("axes argument to transpose()")
        return COO((self.data, self.col, self.row), shape=self.shape[::-1], rows_sorted=self._cols_sorted,
                   cols_sorted=self._rows_sorted)

    def __matmul__(self, other: Any) -> Any:
        return _matmul(self, other, coo_matvec, coo_matmat)

    def tree_flatten(self) -> tuple[tuple[Any, Any, Any], dict[str, Any]]:
        return self._bufs, self._info._asdict()

    @classmethod
    def tree_unflatten(cls, aux_data: dict[str, Any], children: Any) -> "COO":
        obj = object.__new__(cls)
        obj.data, obj.row, obj.col = children
        if aux_data.keys() != {"shape", "rows_sorted", "cols_sorted"}:
            raise ValueError(f"COO.tree_unflatten: invalid aux_data={aux_data}")
        obj.shape = aux_data["shape"]
        obj._rows_sorted, obj._cols_sorted = aux_data["rows_sorted"], aux_data["cols_sorted"]
        return obj


__all__ = ["COO", "COOInfo", "coo_fromdense", "coo_fromdense_p", "coo_matmat", "coo_matmat_p", "coo_matvec",
           "coo_matvec_p", "coo_todense", "coo_todense_p"]
