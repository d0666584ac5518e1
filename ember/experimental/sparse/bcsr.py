"""BCSR: batched compressed-sparse-row arrays (jax.experimental.sparse.bcsr): batch dimensions, two sparse
dimensions (rows, columns) and dense dimensions; per batch member `data` (nse, *dense), `indices` (the columns,
(nse,)) and `indptr` (rows + 1,). Each operation converts to BCOO (the rows recovered from indptr) and back (rows
counted into indptr), as JAX's do."""
from __future__ import annotations

import operator
from typing import Any, Sequence

import numpy as np

import ember
import ember.numpy as jnp
from ember._api.vmap import register_vmappable
from ember.experimental.sparse import bcoo as _bcoo
from ember.experimental.sparse._base import JAXSparse, SparseInfo, concrete_int, nfold_vmap
from ember.experimental.sparse._primitive import sparse_primitive
from ember.experimental.sparse.bcoo import BCOO
from ember.experimental.sparse.transform import sparsify


def _validate(api: str, data: Any, indices: Any, indptr: Any, shape: Sequence[int]) -> tuple[int, int, int]:
    """(n_batch, n_dense, nse) of BCSR buffers, or a ValueError naming the shapes."""
    shape = tuple(shape)
    n_batch = indices.ndim - 1
    n_dense = len(shape) - n_batch - 2
    if n_dense < 0 or indptr.ndim != indices.ndim:
        raise ValueError(f"{api}: indices of shape {tuple(indices.shape)} and indptr of shape {tuple(indptr.shape)} "
                         f"do not fit the array shape {shape} (two sparse dimensions)")
    nse = indices.shape[-1]
    if indptr.shape[-1] != shape[n_batch] + 1:
        raise ValueError(f"{api}: indptr of shape {tuple(indptr.shape)} must have {shape[n_batch] + 1} entries per "
                         f"batch member for shape {shape}")
    if tuple(data.shape[n_batch:]) != (nse, *shape[n_batch + 2:]):
        raise ValueError(f"{api}: data of shape {tuple(data.shape)} does not fit nse={nse}, n_batch={n_batch}, "
                         f"n_dense={n_dense} and shape {shape}")
    for name, buf in (("data", data), ("indices", indices), ("indptr", indptr)):
        if any(s not in (1, full) for s, full in zip(buf.shape[:n_batch], shape[:n_batch])):
            raise ValueError(f"{api}: {name} batch dimensions {tuple(buf.shape[:n_batch])} are not compatible with "
                             f"shape {shape}")
    return n_batch, n_dense, nse


def _csr_rows(indices: Any, indptr: Any) -> Any:
    return jnp.cumsum(jnp.zeros_like(indices).at[indptr].add(1)) - 1


def _bcsr_to_bcoo(indices: Any, indptr: Any, shape: Sequence[int]) -> Any:
    """BCOO indices (batch + (nse, 2)) of BCSR (indices, indptr)."""
    n_batch = indices.ndim - 1
    rows = nfold_vmap(_csr_rows, n_batch)(indices, indptr)
    return jnp.stack([rows.astype(indices.dtype), jnp.broadcast_to(indices, rows.shape)], axis=-1)


def _bcoo_to_bcsr(indices: Any, shape: Sequence[int], index_dtype: Any) -> tuple[Any, Any]:
    """BCSR (indices, indptr) of sorted BCOO indices with two sparse dimensions."""
    n_batch = indices.ndim - 2
    if indices.shape[-1] != 2:
        raise ValueError(f"Must have 2 sparse dimensions to be converted to BCSR, got {indices.shape[-1]}.")
    rows = shape[n_batch]

    def pointers(r: Any) -> Any:
        counts = jnp.bincount(r, length=rows).astype(index_dtype)
        return jnp.zeros(rows + 1, index_dtype).at[1:].set(jnp.cumsum(counts).astype(index_dtype))
    return indices[..., 1], nfold_vmap(pointers, n_batch, broadcasted=False)(indices[..., 0])


def _check(api: str, mat: Any) -> "BCSR":
    if not isinstance(mat, BCSR):
        raise TypeError(f"{api}: expected a BCSR array, got {type(mat).__name__}")
    return mat


def bcsr_fromdense(mat: Any, *, nse: int | None = None, n_batch: int = 0, n_dense: int = 0,
                   index_dtype: Any = np.int32) -> "BCSR":
    """The BCSR array of a dense one (two sparse dimensions after n_batch; like
    jax.experimental.sparse.bcsr_fromdense)."""
    mat = jnp.asarray(mat)
    if mat.ndim - n_batch - n_dense != 2:
        raise ValueError(f"bcsr_fromdense: must have 2 sparse dimensions, got shape {tuple(mat.shape)} with "
                         f"n_batch={n_batch}, n_dense={n_dense}")
    if nse is None:
        nse = _bcoo._count_nse(mat, n_batch, n_dense)
    nse = concrete_int("bcsr_fromdense", "nse", nse, "pass nse (the number of stored elements) there")
    bufs = bcsr_fromdense_p.bind(mat, nse=nse, n_batch=n_batch, n_dense=n_dense, index_dtype=np.dtype(index_dtype))
    return BCSR(bufs, shape=mat.shape)


def _fromdense(mat: Any, *, nse: int, n_batch: int, n_dense: int, index_dtype: Any) -> tuple[Any, Any, Any]:
    data, indices = _bcoo.bcoo_fromdense_p.bind(mat, nse=nse, n_batch=n_batch, n_dense=n_dense,
                                                index_dtype=index_dtype)
    return (data, *_bcoo_to_bcsr(indices, mat.shape, index_dtype))


def bcsr_todense(mat: "BCSR") -> Any:
    """The dense array of a BCSR array."""
    mat = _check("bcsr_todense", mat)
    return bcsr_todense_p.bind(*mat._bufs, spinfo=mat._info)


def bcsr_extract(indices: Any, indptr: Any, mat: Any) -> Any:
    """The data of the dense mat at BCSR (indices, indptr)."""
    return bcsr_extract_p.bind(jnp.asarray(indices), jnp.asarray(indptr), jnp.asarray(mat))


def _extract(indices: Any, indptr: Any, mat: Any) -> Any:
    return _bcoo._extract(_bcsr_to_bcoo(indices, indptr, mat.shape), mat)


def _todense(data: Any, indices: Any, indptr: Any, *, spinfo: SparseInfo) -> Any:
    return BCOO((data, _bcsr_to_bcoo(indices, indptr, spinfo.shape)), shape=spinfo.shape).todense()


def _dot_general(lhs_data: Any, lhs_indices: Any, lhs_indptr: Any, rhs: Any, *, dimension_numbers: Any,
                 preferred_element_type: Any, lhs_spinfo: SparseInfo) -> Any:
    lhs = BCOO((lhs_data, _bcsr_to_bcoo(lhs_indices, lhs_indptr, lhs_spinfo.shape)), shape=lhs_spinfo.shape)
    return _bcoo.bcoo_dot_general(lhs, rhs, dimension_numbers=dimension_numbers,
                                  preferred_element_type=preferred_element_type)


bcsr_fromdense_p = sparse_primitive("bcsr_fromdense", _fromdense, True)
bcsr_todense_p = sparse_primitive("bcsr_todense", _todense)
bcsr_extract_p = sparse_primitive("bcsr_extract", _extract)
bcsr_dot_general_p = sparse_primitive("bcsr_dot_general", _dot_general)


def bcsr_dot_general(lhs: Any, rhs: Any, *, dimension_numbers: Any, precision: Any = None,
                     preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    """lax.dot_general of a BCSR lhs and a dense rhs (bcoo_dot_general's rules), dense."""
    if not isinstance(rhs, JAXSparse) and not isinstance(lhs, JAXSparse):
        return ember.lax.dot_general(lhs, rhs, dimension_numbers, preferred_element_type=preferred_element_type)
    if isinstance(lhs, BCSR) and not isinstance(rhs, JAXSparse):
        dn = _bcoo._dimension_numbers("bcsr_dot_general", dimension_numbers, 0, 0)
        preferred = None if preferred_element_type is None else np.dtype(preferred_element_type)
        return bcsr_dot_general_p.bind(*lhs._bufs, jnp.asarray(rhs), dimension_numbers=dn,
                                       preferred_element_type=preferred, lhs_spinfo=lhs._info)
    raise NotImplementedError("bcsr_dot_general currently implemented for BCSR lhs and ndarray rhs.")


def bcsr_sum_duplicates(mat: "BCSR", nse: int | None = None) -> "BCSR":
    """mat with repeated indices summed (sorted; see bcoo_sum_duplicates)."""
    return BCSR.from_bcoo(_bcoo.bcoo_sum_duplicates(_check("bcsr_sum_duplicates", mat).to_bcoo(), nse=nse))


def bcsr_eliminate_zeros(mat: "BCSR", nse: int | None = None) -> "BCSR":
    """mat without explicit zeros, duplicates summed."""
    return BCSR.from_bcoo(_bcoo.bcoo_eliminate_zeros(_check("bcsr_eliminate_zeros", mat).to_bcoo(), nse=nse))


def bcsr_broadcast_in_dim(mat: "BCSR", *, shape: Sequence[int], broadcast_dimensions: Sequence[int],
                          sharding: Any = None) -> "BCSR":
    """lax.broadcast_in_dim of a BCSR array (through bcoo_broadcast_in_dim)."""
    return BCSR.from_bcoo(_bcoo.bcoo_broadcast_in_dim(_check("bcsr_broadcast_in_dim", mat).to_bcoo(), shape=shape,
                                                      broadcast_dimensions=broadcast_dimensions))


def bcsr_concatenate(operands: Sequence["BCSR"], *, dimension: int) -> "BCSR":
    """lax.concatenate of BCSR arrays (through bcoo_concatenate)."""
    return BCSR.from_bcoo(_bcoo.bcoo_concatenate([_check("bcsr_concatenate", m).to_bcoo() for m in operands],
                                                 dimension=dimension))


@ember.tree_util.register_pytree_node_class
class BCSR(JAXSparse):
    """A batched CSR array (like jax.experimental.sparse.BCSR): BCSR((data, indices, indptr), shape=...)."""
    data: Any
    indices: Any
    indptr: Any

    def __init__(self, args: tuple[Any, Any, Any], *, shape: Sequence[int], indices_sorted: bool = False,
                 unique_indices: bool = False):
        self.data, self.indices, self.indptr = (jnp.asarray(a) for a in args)
        self.indices_sorted, self.unique_indices = bool(indices_sorted), bool(unique_indices)
        super().__init__(args, shape=shape)
        _validate("BCSR", self.data, self.indices, self.indptr, self.shape)

    @property
    def _bufs(self) -> tuple[Any, Any, Any]:
        return self.data, self.indices, self.indptr

    @property
    def _info(self) -> SparseInfo:
        return SparseInfo(self.shape, self.indices_sorted, self.unique_indices)

    @property
    def nse(self) -> int:
        return self.indices.shape[-1]

    @property
    def n_batch(self) -> int:
        return self.indices.ndim - 1

    @property
    def n_sparse(self) -> int:
        return 2

    @property
    def n_dense(self) -> int:
        return self.data.ndim - self.indices.ndim

    def __repr__(self) -> str:
        extra = f", nse={self.nse}" + (f", n_batch={self.n_batch}" if self.n_batch else "") + \
            (f", n_dense={self.n_dense}" if self.n_dense else "")
        return f"BCSR({self.dtype}{list(self.shape)}{extra})"

    def transpose(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("Transpose is not implemented.")

    def __matmul__(self, other: Any) -> Any:
        return sparsify(jnp.matmul)(self.to_bcoo(), other)

    def __rmatmul__(self, other: Any) -> Any:
        return sparsify(jnp.matmul)(other, self.to_bcoo())

    def __getitem__(self, index: Any) -> Any:
        return self.to_bcoo()[index]

    @classmethod
    def _empty(cls, shape: Sequence[int], *, dtype: Any = None, index_dtype: Any = "int32", n_dense: int = 0,
               n_batch: int = 0, nse: int = 0) -> "BCSR":
        shape = tuple(operator.index(s) for s in shape)
        if n_dense < 0 or n_batch < 0 or nse < 0:
            raise ValueError(f"BCSR: invalid inputs: shape={shape}, n_dense={n_dense}, n_batch={n_batch}, "
                             f"nse={nse}")
        if len(shape) - n_dense - n_batch != 2:
            raise ValueError("BCSR sparse.empty: must have 2 sparse dimensions.")
        batch, (rows, cols), dense = shape[:n_batch], shape[n_batch:n_batch + 2], shape[n_batch + 2:]
        data = jnp.zeros((*batch, nse, *dense), dtype)
        indices = jnp.full((*batch, nse), cols, index_dtype)
        indptr = jnp.zeros((*batch, rows + 1), index_dtype)
        return cls((data, indices, indptr), shape=shape)

    def sum_duplicates(self, nse: int | None = None, remove_zeros: bool = True) -> "BCSR":
        """Repeated indices summed (and explicit zeros removed with remove_zeros)."""
        return bcsr_eliminate_zeros(self, nse=nse) if remove_zeros else bcsr_sum_duplicates(self, nse=nse)

    @classmethod
    def fromdense(cls, mat: Any, *, nse: int | None = None, index_dtype: Any = np.int32, n_dense: int = 0,
                  n_batch: int = 0) -> "BCSR":
        """The BCSR array of a dense one (bcsr_fromdense)."""
        return bcsr_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense, n_batch=n_batch)

    def todense(self) -> Any:
        """The dense array (bcsr_todense)."""
        return bcsr_todense(self)

    def to_bcoo(self) -> BCOO:
        """The same array as BCOO (rows recovered from indptr)."""
        return BCOO((self.data, _bcsr_to_bcoo(self.indices, self.indptr, self.shape)), shape=self.shape)

    @classmethod
    def from_bcoo(cls, arr: BCOO) -> "BCSR":
        """The BCSR array of a BCOO array with two sparse dimensions (sorted first where not known sorted)."""
        if arr.n_sparse != 2:
            raise NotImplementedError(f"BCSR.from_bcoo requires n_sparse=2; got n_sparse={arr.n_sparse}")
        if not arr.indices_sorted:
            arr = arr.sort_indices()
        indices, indptr = _bcoo_to_bcsr(arr.indices, arr.shape, arr.indices.dtype)
        return cls((arr.data, indices, indptr), shape=arr.shape)

    @classmethod
    def from_scipy_sparse(cls, mat: Any, *, index_dtype: Any = None, n_dense: int = 0, n_batch: int = 0) -> "BCSR":
        """A BCSR array of a 2-D scipy.sparse matrix (its CSR buffers)."""
        if n_dense != 0 or n_batch != 0:
            raise NotImplementedError("BCSR from_scipy_sparse with nonzero n_dense/n_batch.")
        mat = mat.tocsr()
        dtype = index_dtype or np.int32
        return cls((jnp.asarray(mat.data), jnp.asarray(mat.indices.astype(dtype)),
                    jnp.asarray(mat.indptr.astype(dtype))), shape=mat.shape)

    def tree_flatten(self) -> tuple[tuple[Any, Any, Any], dict[str, Any]]:
        return self._bufs, self._info._asdict()

    @classmethod
    def tree_unflatten(cls, aux_data: dict[str, Any], children: Any) -> "BCSR":
        obj = object.__new__(cls)
        obj.data, obj.indices, obj.indptr = children
        if aux_data.keys() != {"shape", "indices_sorted", "unique_indices"}:
            raise ValueError(f"BCSR.tree_unflatten: invalid aux_data={aux_data}")
        obj.__dict__.update(**aux_data)
        return obj


def _to_member(cont: Any, _: Any, mat: BCSR, axis: Any) -> BCSR:
    """The member of mat that vmap maps along axis (a batch dimension), as JAX's registration of BCSR."""
    if axis is None:
        return mat
    if not 0 <= axis < mat.n_batch:
        raise ValueError(f"Cannot map in_axis={axis} for BCSR array with n_batch={mat.n_batch}. in_axes for batched "
                         "BCSR operations must correspond to a batched dimension.")
    return BCSR((cont(mat.data, axis), cont(mat.indices, axis), cont(mat.indptr, axis)),
                shape=mat.shape[:axis] + mat.shape[axis + 1:])


def _from_member(cont: Any, size: int, elt: BCSR, axis: Any) -> BCSR:
    """The BCSR array of size members elt stacked along axis (at most n_batch)."""
    if axis is None:
        return elt
    if not 0 <= axis <= elt.n_batch:
        raise ValueError(f"BCSR: cannot add out_axis={axis} for BCSR array with n_batch={elt.n_batch}. BCSR batch "
                         "axes must be a contiguous block of leading dimensions.")
    return BCSR((cont(size, elt.data, axis), cont(size, elt.indices, axis), cont(size, elt.indptr, axis)),
                shape=elt.shape[:axis] + (size,) + elt.shape[axis:])


register_vmappable(BCSR, int, int, _to_member, _from_member, None)


__all__ = ["BCSR", "bcsr_broadcast_in_dim", "bcsr_concatenate", "bcsr_dot_general", "bcsr_dot_general_p",
           "bcsr_eliminate_zeros", "bcsr_extract", "bcsr_extract_p", "bcsr_fromdense", "bcsr_fromdense_p",
           "bcsr_sum_duplicates", "bcsr_todense", "bcsr_todense_p"]
