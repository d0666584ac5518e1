"""BCOO: batched coordinate-format sparse arrays (jax.experimental.sparse.bcoo), and the bcoo_* operations on them.

A BCOO array of shape `batch + sparse + dense` (n_batch, n_sparse, n_dense dimensions) stores, per batch member,
`nse` specified elements: `data` of shape `batch + (nse,) + dense` and `indices` of shape `batch + (nse, n_sparse)`
(integers). A batch dimension of data or indices may be stored with size 1 (broadcast). An index equal to the
dimension's size (JAX's padding: `shape[n_batch:n_batch + n_sparse]`) or beyond is out of range: its element
stands for nothing (todense drops it, extract reads 0 there). Duplicate indices add up.

Every operation is written with ember's array operations (gathers, scatter-adds, sorts), so each one runs eagerly,
under jit, and is differentiated and batched by ember's own transformations; a BCOO is a pytree (its buffers are
the leaves, its shape and index facts the static part), and ember.vmap maps it along a batch dimension (as JAX's
vmappable registration). The results' data, indices, nse and flags are JAX's (tests/test_sparse.py compares)."""
from __future__ import annotations

import functools
import inspect
import math
import operator
import warnings
from typing import Any, Sequence

import numpy as np

import ember
import ember.lax as lax
from ember._api.vmap import register_vmappable
import ember.numpy as jnp
from ember.experimental.sparse._primitive import sparse_primitive
from ember.experimental.sparse._base import (JAXSparse, SparseEfficiencyError, SparseEfficiencyWarning, SparseInfo,
                                             concrete_int, nfold_vmap)

Shape = tuple[int, ...]


# ------------------------------------------------------------------------------------------------------------------
# layout checks

class BCOOProperties(tuple):
    """(n_batch, n_sparse, n_dense, nse) of a pair of BCOO buffers."""
    __slots__ = ()

    def __new__(cls, n_batch: int, n_sparse: int, n_dense: int, nse: int) -> "BCOOProperties":
        return super().__new__(cls, (n_batch, n_sparse, n_dense, nse))

    n_batch = property(operator.itemgetter(0))
    n_sparse = property(operator.itemgetter(1))
    n_dense = property(operator.itemgetter(2))
    nse = property(operator.itemgetter(3))


def _validate_indices(api: str, indices: Any, shape: Sequence[int]) -> BCOOProperties:
    shape = tuple(shape)
    if not np.issubdtype(np.dtype(indices.dtype), np.integer):
        raise TypeError(f"{api}: indices must be integers, got dtype {np.dtype(indices.dtype)} "
                        f"(indices of shape {tuple(indices.shape)})")
    if len(indices.shape) < 2:
        raise ValueError(f"{api}: indices must have shape batch + (nse, n_sparse), got {tuple(indices.shape)}")
    nse, n_sparse = indices.shape[-2:]
    n_batch = len(indices.shape) - 2
    n_dense = len(shape) - n_batch - n_sparse
    if n_dense < 0:
        raise ValueError(f"{api}: indices of shape {tuple(indices.shape)} (n_batch={n_batch}, n_sparse={n_sparse}) "
                         f"do not fit the array shape {shape}")
    if any(s not in (1, full) for s, full in zip(indices.shape[:n_batch], shape[:n_batch])):
        raise ValueError(f"{api}: indices batch dimensions {tuple(indices.shape[:n_batch])} are not compatible "
                         f"with shape {shape}")
    return BCOOProperties(n_batch, n_sparse, n_dense, nse)


def _validate(api: str, data: Any, indices: Any, shape: Sequence[int]) -> BCOOProperties:
    """The layout of (data, indices) for an array of this shape, or a ValueError naming api and the shapes."""
    props = _validate_indices(api, indices, shape)
    n_batch, n_sparse, _, nse = props
    shape = tuple(shape)
    if any(s not in (1, full) for s, full in zip(data.shape[:n_batch], shape[:n_batch])):
        raise ValueError(f"{api}: data batch dimensions {tuple(data.shape[:n_batch])} are not compatible with "
                         f"shape {shape}")
    if tuple(data.shape[n_batch:]) != (nse,) + shape[n_batch + n_sparse:]:
        raise ValueError(f"{api}: data of shape {tuple(data.shape)} does not fit nse={nse}, n_batch={n_batch}, "
                         f"n_dense={props.n_dense} and shape {shape} (indices of shape {tuple(indices.shape)})")
    return props


def _is_bcoo(api: str, mat: Any) -> "BCOO":
    if not isinstance(mat, BCOO):
        raise TypeError(f"{api}: expected a BCOO array, got {type(mat).__name__}")
    return mat


def _sparse_limits(indices: Any, shape: Sequence[int], n_batch: int) -> Any:
    """The sparse dimensions' sizes, shaped to compare with indices (the padding index)."""
    n_sparse = indices.shape[-1]
    limits = jnp.array(tuple(shape[n_batch:n_batch + n_sparse]), dtype=indices.dtype)
    return limits.reshape((1,) * (indices.ndim - 1) + (n_sparse,))


def _in_range(indices: Any, shape: Sequence[int], n_batch: int) -> Any:
    """Whether each stored element's index is in range (batch + (nse,))."""
    return jnp.all(indices < _sparse_limits(indices, shape, n_batch), axis=-1)


def _expand_to_data(mask: Any, data: Any) -> Any:
    """mask (batch + (nse,)) with data's dense dimensions appended, to select on data."""
    return lax.expand_dims(mask, tuple(range(mask.ndim, data.ndim)))


# ------------------------------------------------------------------------------------------------------------------
# todense, fromdense, extract

def _todense(data: Any, indices: Any, shape: Shape) -> Any:
    n_batch, n_sparse, _, _ = _validate("bcoo_todense", data, indices, shape)
    member = shape[n_batch:]

    def one(d: Any, i: Any) -> Any:
        if n_sparse == 0:
            return d.sum(0, dtype=d.dtype)
        return jnp.zeros(member, d.dtype).at[tuple(i[:, k] for k in range(n_sparse))].add(d, mode="drop")
    out = nfold_vmap(one, n_batch)(data, indices)
    return jnp.broadcast_to(out, shape)


def bcoo_todense(mat: "BCOO") -> Any:
    """The dense array a BCOO array stands for (duplicates added, out-of-range elements dropped)."""
    mat = _is_bcoo("bcoo_todense", mat)
    return bcoo_todense_p.bind(mat.data, mat.indices, spinfo=mat._info)


def _extract(indices: Any, arr: Any, assume_unique: bool = True) -> Any:
    """The values of the dense arr at BCOO indices: data of shape arr's batch + (nse,) + dense (0 where an index is
    out of range; with assume_unique=False, a repeated index reads its value only at its first occurrence)."""
    n_batch, n_sparse, _, nse = _validate_indices("bcoo_extract", indices, arr.shape)

    def one(i: Any, a: Any) -> Any:
        if n_sparse == 0:
            got = jnp.broadcast_to(a[None], (nse, *a.shape))
        else:
            got = a.at[tuple(i[:, k] for k in range(n_sparse))].get(mode="fill", fill_value=0)
        if not assume_unique and n_sparse:
            first = _first_occurrences(i, arr.shape[n_batch:n_batch + n_sparse])
            got = jnp.where(_expand_to_data(first, got), got, jnp.zeros((), got.dtype))
        elif not assume_unique:
            got = jnp.where(_expand_to_data(jnp.arange(nse) == 0, got), got, jnp.zeros((), got.dtype))
        return got
    return nfold_vmap(one, n_batch)(indices, arr)


def _sort_order(indices: Any) -> tuple[list[Any], Any]:
    """The columns of (nse, n_sparse) indices sorted lexicographically (stably) and the permutation doing it."""
    nse, n_sparse = indices.shape
    *cols, perm = lax.sort((*(indices[:, k] for k in range(n_sparse)), lax.iota(np.int32, nse)),
                           num_keys=n_sparse, is_stable=True)
    return cols, perm


def _first_occurrences(indices: Any, sparse_shape: Sequence[int]) -> Any:
    """For unbatched (nse, n_sparse) indices: True at each element whose index (out-of-range ones counted as one
    index) no earlier element has."""
    nse = indices.shape[0]
    limits = jnp.array(tuple(sparse_shape), indices.dtype)[None]
    indices = jnp.where(jnp.any(indices >= limits, axis=1, keepdims=True), limits, indices)
    cols, perm = _sort_order(indices)
    stacked = jnp.stack(cols, axis=1)
    repeat = jnp.concatenate([jnp.zeros((1,), bool), jnp.all(stacked[1:] == stacked[:-1], axis=1)]) if nse else \
        jnp.zeros((0,), bool)
    return jnp.zeros((nse,), bool).at[perm].set(~repeat)


def bcoo_extract(sparr: "BCOO", arr: Any, *, assume_unique: bool | None = None) -> "BCOO":
    """A BCOO array with sparr's indices holding arr's values there (like jax.experimental.sparse.bcoo_extract).
    assume_unique (default sparr.unique_indices): when False, a repeated index gets its value at its first
    occurrence only, so that the result's todense() is arr restricted to sparr's pattern."""
    sparr = _is_bcoo("bcoo_extract", sparr)
    arr = jnp.asarray(arr)
    if tuple(arr.shape) != sparr.shape:
        raise ValueError(f"bcoo_extract: shape mismatch: the sparse array has shape {sparr.shape}, the dense array "
                         f"{tuple(arr.shape)}")
    if assume_unique is None:
        assume_unique = sparr.unique_indices
    data = bcoo_extract_p.bind(sparr.indices, arr, assume_unique=bool(assume_unique))
    return BCOO((data, sparr.indices), **sparr._info._asdict())


def _fromdense(mat: Any, nse: int, n_batch: int, n_dense: int, index_dtype: Any) -> tuple[Any, Any]:
    n_sparse = mat.ndim - n_batch - n_dense
    mask = mat != 0
    if n_dense:
        mask = jnp.any(mask, axis=tuple(range(mat.ndim - n_dense, mat.ndim)))
    sparse_shape = mat.shape[n_batch:n_batch + n_sparse]

    def nonzero(m: Any) -> Any:
        if n_sparse == 0:
            return jnp.zeros((nse, 0), index_dtype)
        found = jnp.nonzero(m, size=nse, fill_value=tuple(sparse_shape))
        return jnp.stack([f.astype(index_dtype) for f in found], axis=1)
    indices = nfold_vmap(nonzero, n_batch, broadcasted=False)(mask)
    data = _extract(indices, mat)
    true_nse = jnp.sum(mask, axis=tuple(range(n_batch, mask.ndim)))[..., None]
    stored = lax.broadcasted_iota(true_nse.dtype, (1,) * n_batch + (nse,), n_batch) < true_nse
    data = jnp.where(_expand_to_data(stored, data), data, jnp.zeros((), data.dtype))
    return data, indices


def _count_nse(mat: Any, n_batch: int, n_dense: int) -> Any:
    """The largest number of stored elements a batch member of the dense mat needs."""
    mask = mat != 0
    if n_dense:
        mask = jnp.any(mask, axis=tuple(range(mat.ndim - n_dense, mat.ndim)))
    return jnp.max(jnp.sum(mask, axis=tuple(range(n_batch, mask.ndim))), initial=0)


def bcoo_fromdense(mat: Any, *, nse: int | None = None, n_batch: int = 0, n_dense: int = 0,
                   index_dtype: Any = np.int32) -> "BCOO":
    """The BCOO array of the dense mat (like jax.experimental.sparse.bcoo_fromdense): its nonzeros in row-major
    order per batch member, padded to nse with zeros at out-of-range indices. nse defaults to the largest count of
    nonzeros of a batch member, which needs mat's values: pass it inside jit, vmap or grad."""
    mat = jnp.asarray(mat)
    n_batch, n_dense = operator.index(n_batch), operator.index(n_dense)
    if n_batch < 0 or n_dense < 0 or n_batch + n_dense > mat.ndim:
        raise ValueError(f"bcoo_fromdense: n_batch={n_batch} and n_dense={n_dense} must be non-negative and add up "
                         f"to at most mat.ndim={mat.ndim} (mat of shape {tuple(mat.shape)})")
    if nse is None:
        nse = concrete_int("bcoo_fromdense", "nse", _count_nse(mat, n_batch, n_dense),
                           "pass nse (the number of stored elements) to use bcoo_fromdense or BCOO.fromdense there")
    nse = concrete_int("bcoo_fromdense", "nse", nse, "nse must be a static integer")
    if nse < 0:
        raise ValueError(f"bcoo_fromdense: nse must be non-negative, got {nse}")
    data, indices = bcoo_fromdense_p.bind(mat, nse=nse, n_batch=n_batch, n_dense=n_dense,
                                          index_dtype=np.dtype(index_dtype))
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True, unique_indices=True)


# ------------------------------------------------------------------------------------------------------------------
# sorting and duplicates

def bcoo_sort_indices(mat: "BCOO") -> "BCOO":
    """mat with each batch member's elements in lexicographic order of their indices (duplicates kept)."""
    mat = _is_bcoo("bcoo_sort_indices", mat)
    data, indices = bcoo_sort_indices_p.bind(mat.data, mat.indices, spinfo=mat._info)
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True, unique_indices=mat.unique_indices)


def _sort_indices(mat: "BCOO") -> "BCOO":
    if mat.n_sparse == 0:
        return BCOO(mat._bufs, shape=mat.shape, indices_sorted=True, unique_indices=mat.unique_indices)

    def one(i: Any) -> tuple[Any, Any]:
        cols, perm = _sort_order(i)
        return jnp.stack(cols, axis=1), perm
    indices, perm = nfold_vmap(one, mat.n_batch, broadcasted=False)(mat.indices)
    data = nfold_vmap(lambda d, p: d[p], mat.n_batch)(mat.data, perm)
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True, unique_indices=mat.unique_indices)


def _unique_unbatched(indices: Any, sparse_shape: Sequence[int], size: int) -> tuple[Any, Any, Any]:
    """The distinct rows of (nse, n_sparse) indices, sorted, out-of-range ones made the padding index and sorted
    last; padded with the padding index to size rows. Returns (unique (size, n_sparse), each element's position
    in unique (nse,), the number of distinct in-range indices)."""
    nse, n_sparse = indices.shape
    limits = jnp.array(tuple(sparse_shape), indices.dtype)[None]
    out_of_range = jnp.any(indices >= limits, axis=1, keepdims=True)
    indices = jnp.where(out_of_range, limits, indices)
    if nse == 0:
        return (jnp.broadcast_to(limits, (size, n_sparse)), jnp.zeros((0,), np.int32),
                jnp.zeros((), np.int32))
    cols, perm = _sort_order(indices)
    stacked = jnp.stack(cols, axis=1)
    new = jnp.concatenate([jnp.ones((1,), bool), jnp.any(stacked[1:] != stacked[:-1], axis=1)])
    slot_sorted = jnp.cumsum(new.astype(np.int32)) - 1
    slot = jnp.zeros((nse,), np.int32).at[perm].set(slot_sorted)
    unique = jnp.broadcast_to(limits, (size, n_sparse)).at[slot_sorted].set(stacked, mode="drop")
    count = jnp.sum(new.astype(np.int32)) - jnp.any(out_of_range).astype(np.int32)
    return unique, slot, count


def _sum_duplicates(data: Any, indices: Any, shape: Shape, nse: int | None, api: str) -> tuple[Any, Any]:
    n_batch, n_sparse, _, old_nse = _validate(api, data, indices, shape)
    sparse_shape = shape[n_batch:n_batch + n_sparse]
    if n_sparse == 0:
        data = data.sum(n_batch, keepdims=True, dtype=data.dtype)
        out_nse = 1 if nse is None else nse
        if out_nse != 1:
            pad = [(0, 0)] * data.ndim
            pad[n_batch] = (0, out_nse - 1) if out_nse > 1 else (0, 0)
            data = jnp.pad(data, pad)[(slice(None),) * n_batch + (slice(0, out_nse),)]
        return data, jnp.zeros((*indices.shape[:n_batch], out_nse, 0), indices.dtype)
    size = max(old_nse, 1)
    if nse is None:
        nse = concrete_int(api, "nse", _distinct_count(indices, shape=shape), f"pass nse to use {api} there")
        return _sum_duplicates(data, indices, shape, nse, api)
    unique, slot, _ = nfold_vmap(lambda i: _unique_unbatched(i, sparse_shape, size), n_batch,
                                 broadcasted=False)(indices)
    if nse <= size:
        unique = unique[..., :nse, :]
    else:
        fill = jnp.broadcast_to(_sparse_limits(indices, shape, n_batch),
                                (*unique.shape[:-2], nse - size, n_sparse))
        unique = jnp.concatenate([unique, fill], axis=-2)
    batch = tuple(max(a, b) for a, b in zip(indices.shape[:n_batch], data.shape[:n_batch]))

    def scatter(d: Any, s: Any) -> Any:
        return jnp.zeros((nse, *d.shape[1:]), d.dtype).at[s].add(d, mode="drop")
    out = nfold_vmap(scatter, n_batch)(data, slot)
    return jnp.broadcast_to(out, (*batch, *out.shape[n_batch:])), unique


def _distinct_count(indices: Any, *, shape: Shape) -> Any:
    """The largest number of distinct in-range indices of a batch member (the nse sum_duplicates needs)."""
    n_batch, n_sparse = indices.ndim - 2, indices.shape[-1]
    sparse_shape = shape[n_batch:n_batch + n_sparse]
    count = nfold_vmap(lambda i: _unique_unbatched(i, sparse_shape, max(i.shape[0], 1))[2], n_batch,
                       broadcasted=False)(indices)
    return jnp.max(count, initial=0)


def bcoo_sum_duplicates(mat: "BCOO", nse: int | None = None) -> "BCOO":
    """mat with repeated indices added into one element, sorted, and out-of-range elements at the end (like
    jax.experimental.sparse.bcoo_sum_duplicates). nse (needed inside jit, vmap or grad) pads or truncates."""
    mat = _is_bcoo("bcoo_sum_duplicates", mat)
    if nse is None:
        nse = 1 if mat.n_sparse == 0 else _distinct_count(mat.indices, shape=mat.shape)
        nse = concrete_int("bcoo_sum_duplicates", "nse", nse, "pass nse to use bcoo_sum_duplicates there")
    nse = concrete_int("bcoo_sum_duplicates", "nse", nse, "nse must be a static integer")
    data, indices = bcoo_sum_duplicates_p.bind(mat.data, mat.indices, spinfo=mat._info, nse=nse)
    return BCOO((data, indices), shape=mat.shape, indices_sorted=True, unique_indices=True)


def bcoo_eliminate_zeros(mat: "BCOO", nse: int | None = None) -> "BCOO":
    """mat without its explicitly stored zeros (their indices made out of range), duplicates summed."""
    mat = _is_bcoo("bcoo_eliminate_zeros", mat)
    data, indices, shape = mat.data, mat.indices, mat.shape
    zero = jnp.all(data == 0, axis=tuple(range(mat.n_batch + 1, data.ndim)))
    broadcast = tuple(i for i, s in enumerate(indices.shape[:mat.n_batch]) if s == 1)
    zero = jnp.all(zero, axis=broadcast, keepdims=True)
    indices = jnp.where(zero[..., None], _sparse_limits(indices, shape, mat.n_batch), indices)
    return bcoo_sum_duplicates(BCOO((data, indices), shape=shape), nse=nse)


# ------------------------------------------------------------------------------------------------------------------
# layout changes

def _set_nse(mat: "BCOO", nse: int) -> "BCOO":
    """mat padded (zeros at the padding index) or truncated to nse elements per batch member."""
    if nse == mat.nse:
        return mat
    nb = mat.n_batch
    if nse < mat.nse:
        data = mat.data[(slice(None),) * nb + (slice(0, nse),)]
        indices = mat.indices[..., :nse, :]
    else:
        pad = [(0, 0)] * mat.data.ndim
        pad[nb] = (0, nse - mat.nse)
        data = jnp.pad(mat.data, pad)
        fill = jnp.broadcast_to(_sparse_limits(mat.indices, mat.shape, nb),
                                (*mat.indices.shape[:nb], nse - mat.nse, mat.n_sparse))
        indices = jnp.concatenate([mat.indices, fill], axis=nb)
    return BCOO((data, indices), shape=mat.shape, indices_sorted=mat.indices_sorted,
                unique_indices=mat.unique_indices)


def bcoo_update_layout(mat: "BCOO", *, n_batch: int | None = None, n_dense: int | None = None,
                       on_inefficient: str | None = "error") -> "BCOO":
    """The same array with n_batch batch and n_dense dense dimensions (like
    jax.experimental.sparse.bcoo_update_layout). Making sparse dimensions of size > 1 batch or dense stores every
    combination explicitly: on_inefficient says whether that raises SparseEfficiencyError ('error'), warns
    SparseEfficiencyWarning ('warn') or passes (None)."""
    mat = _is_bcoo("bcoo_update_layout", mat)
    n_batch = mat.n_batch if n_batch is None else operator.index(n_batch)
    n_dense = mat.n_dense if n_dense is None else operator.index(n_dense)
    if (n_batch, n_dense) == (mat.n_batch, mat.n_dense):
        return mat
    if on_inefficient not in ("error", "warn", None):
        raise ValueError(f"bcoo_update_layout: on_inefficient={on_inefficient!r}; expected one of "
                         "['error', 'warn', None].")
    if n_batch < 0 or n_dense < 0 or n_batch + n_dense > mat.ndim:
        raise ValueError(f"bcoo_update_layout: n_batch={n_batch} and n_dense={n_dense} must be non-negative and add "
                         f"up to at most mat.ndim={mat.ndim}")

    def inefficient(message: str) -> None:
        if on_inefficient == "error":
            raise SparseEfficiencyError(message + " To disable this error, set the on_inefficient argument of "
                                        "bcoo_update_layout to 'warn' or None.")
        if on_inefficient == "warn":
            warnings.warn(message + " To disable this warning, set the on_inefficient argument of "
                          "bcoo_update_layout to None.", SparseEfficiencyWarning, stacklevel=3)
    shape = mat.shape
    if n_dense > mat.n_dense and any(d > 1 for d in shape[mat.ndim - n_dense:mat.ndim - mat.n_dense]):
        inefficient(f"For matrix of shape {shape}, increasing n_dense from {mat.n_dense} to {n_dense} results in "
                    "inefficient storage.")
    if n_batch > mat.n_batch and any(d > 1 for d in shape[mat.n_batch:n_batch]):
        inefficient(f"For matrix of shape {shape}, increasing n_batch from {mat.n_batch} to {n_batch} results in "
                    "inefficient storage.")
    return _update_layout(mat, n_batch=n_batch, n_dense=n_dense)


def _update_layout(mat: "BCOO", *, n_batch: int, n_dense: int) -> "BCOO":
    shape = mat.shape
    data, indices = mat.data, mat.indices
    cur_batch, cur_dense = mat.n_batch, mat.n_dense

    if n_dense < cur_dense:  # leading dense dimensions become trailing sparse ones: one element per block entry
        k = cur_dense - n_dense

        def undense(d: Any, i: Any) -> tuple[Any, Any]:
            block = d.shape[:k]
            flat = d.reshape(math.prod(block), *d.shape[k:])
            grids = jnp.meshgrid(*(jnp.arange(s, dtype=i.dtype) for s in block), indexing="ij")
            new_i = jnp.concatenate([jnp.broadcast_to(i, (flat.shape[0], i.shape[0])),
                                     *(g.reshape(-1, 1) for g in grids)], axis=1)
            return flat, new_i
        data, indices = nfold_vmap(undense, cur_batch + 1)(data, indices)
        data = data.reshape(*data.shape[:cur_batch], -1, *data.shape[cur_batch + 2:])
        indices = indices.reshape(*indices.shape[:cur_batch], -1, indices.shape[-1])
        cur_dense = n_dense

    if n_batch < cur_batch:  # trailing batch dimensions become leading sparse ones
        k = cur_batch - n_batch

        def unbatch(d: Any, i: Any) -> tuple[Any, Any]:
            nse = i.shape[-2]
            outer = i.shape[:k]
            d = jnp.broadcast_to(d, (*outer, *d.shape[k:]))
            flat_d = d.reshape(math.prod(outer) * nse, *d.shape[k + 1:])
            grids = jnp.meshgrid(*(jnp.arange(s, dtype=i.dtype) for s in (*outer, nse)), indexing="ij")
            flat_i = i.reshape(math.prod(outer) * nse, i.shape[-1])
            return flat_d, jnp.concatenate([*(g.reshape(-1, 1) for g in grids[:-1]), flat_i], axis=1)
        if indices.shape[:cur_batch] != shape[:cur_batch]:
            indices = jnp.broadcast_to(indices, (*shape[:cur_batch], *indices.shape[cur_batch:]))
        data = jnp.broadcast_to(data, (*shape[:cur_batch], *data.shape[cur_batch:]))
        data, indices = nfold_vmap(unbatch, n_batch)(data, indices)
        cur_batch = n_batch

    if n_dense > cur_dense:  # trailing sparse dimensions become dense: each element a block with one entry
        k = n_dense - cur_dense

        def densify(d: Any, i: Any) -> tuple[Any, Any]:
            block = jnp.zeros(shape[len(shape) - n_dense:], d.dtype)
            return block.at[tuple(i[-k:])].set(d, mode="drop"), i[:-k]
        data, indices = nfold_vmap(densify, cur_batch + 1)(data, indices)
        cur_dense = n_dense

    if n_batch > cur_batch:  # leading sparse dimensions become batch: each element moved into its batch member
        k = n_batch - cur_batch

        def batch(d: Any, i: Any) -> tuple[Any, Any]:
            nse = i.shape[-2]
            where = tuple(i[:, j] for j in range(k)) + (jnp.arange(nse),)
            new_i = jnp.broadcast_to(i[:, k:], (*shape[cur_batch:n_batch], nse, i.shape[-1] - k))
            new_d = jnp.zeros((*shape[cur_batch:n_batch], nse, *d.shape[1:]), d.dtype).at[where].set(d, mode="drop")
            return new_d, new_i
        data, indices = nfold_vmap(batch, cur_batch)(data, indices)
    return BCOO((data, indices), shape=shape)


def bcoo_transpose(mat: "BCOO", *, permutation: Sequence[int]) -> "BCOO":
    """mat with its dimensions permuted (like lax.transpose); batch, sparse and dense dimensions may be permuted
    only among themselves."""
    mat = _is_bcoo("bcoo_transpose", mat)
    permutation = tuple(operator.index(p) for p in permutation)
    _validate_permutation("bcoo_transpose", mat, permutation)
    out_shape = tuple(mat.shape[p] for p in permutation)
    if permutation == tuple(range(mat.ndim)):
        return BCOO(mat._bufs, shape=out_shape, unique_indices=mat.unique_indices)
    data, indices = bcoo_transpose_p.bind(mat.data, mat.indices, permutation=permutation, spinfo=mat._info)
    return BCOO((data, indices), shape=out_shape, unique_indices=mat.unique_indices)


def _transpose(mat: "BCOO", permutation: tuple[int, ...]) -> "BCOO":
    batch_perm, sparse_perm, dense_perm = _validate_permutation("bcoo_transpose", mat, permutation)
    out_shape = tuple(mat.shape[p] for p in permutation)
    nb = mat.n_batch
    indices = mat.indices[..., jnp.array(sparse_perm, np.int32)] if sparse_perm else mat.indices
    indices = indices.transpose(*batch_perm, nb, nb + 1)
    data = mat.data.transpose(*batch_perm, nb, *(d + nb + 1 for d in dense_perm))
    return BCOO((data, indices), shape=out_shape, unique_indices=mat.unique_indices)


def _validate_permutation(api: str, mat: "BCOO", permutation: Sequence[int]) -> tuple[list[int], list[int],
                                                                                      list[int]]:
    if tuple(sorted(permutation)) != tuple(range(mat.ndim)):
        raise TypeError(f"{api}: permutation {tuple(permutation)} is not a permutation of the dimensions of an "
                        f"array of shape {mat.shape}")
    nb, ns = mat.n_batch, mat.n_sparse
    batch_perm = list(permutation[:nb])
    sparse_perm = [p - nb for p in permutation[nb:nb + ns]]
    dense_perm = [p - nb - ns for p in permutation[nb + ns:]]
    if sorted(batch_perm) != list(range(nb)):
        raise NotImplementedError(f"{api}: permutation {tuple(permutation)} cannot permute batch axes with "
                                  f"non-batch axes (n_batch={nb})")
    if sorted(dense_perm) != list(range(mat.n_dense)):
        raise NotImplementedError(f"{api}: permutation {tuple(permutation)} cannot permute dense axes with "
                                  f"non-dense axes (n_dense={mat.n_dense})")
    return batch_perm, sparse_perm, dense_perm


# ------------------------------------------------------------------------------------------------------------------
# contractions

def _index_tuple(x: Any) -> tuple[int, ...]:
    return tuple(operator.index(i) for i in (x if isinstance(x, (tuple, list)) else (x,)))


def _dimension_numbers(api: str, dimension_numbers: Any, lhs_ndim: int, rhs_ndim: int) -> tuple[Any, Any]:
    try:
        (lc, rc), (lb, rb) = dimension_numbers
        lc, rc, lb, rb = (_index_tuple(d) for d in (lc, rc, lb, rb))
    except (TypeError, ValueError):
        raise TypeError(f"{api}: dimension_numbers must be ((lhs_contracting, rhs_contracting), (lhs_batch, "
                        f"rhs_batch)), got {dimension_numbers!r}") from None
    return (lc, rc), (lb, rb)


def _dot_shape(api: str, lhs_shape: Shape, rhs_shape: Shape, dimension_numbers: Any, lhs_dtype: Any,
               rhs_dtype: Any, preferred_element_type: Any) -> Any:
    """The result's aval by dot_general's own checks (its errors name shapes and dimensions)."""
    try:
        return ember.eval_shape(lambda a, b: lax.dot_general(a, b, dimension_numbers,
                                                             preferred_element_type=preferred_element_type),
                                ember.ShapeDtypeStruct(lhs_shape, lhs_dtype),
                                ember.ShapeDtypeStruct(rhs_shape, rhs_dtype))
    except (TypeError, ValueError) as err:
        raise type(err)(f"{api}: {err}") from None


def bcoo_dot_general(lhs: Any, rhs: Any, *, dimension_numbers: Any, precision: Any = None,
                     preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    """lax.dot_general where lhs, rhs or both are BCOO (like jax.experimental.sparse.bcoo_dot_general): dense
    where either operand is dense, BCOO where both are sparse. A sparse operand's batch dimensions of the
    contraction must be among its BCOO batch dimensions, and its dense dimensions cannot be contracted."""
    del precision, out_sharding
    preferred = None if preferred_element_type is None else np.dtype(preferred_element_type)
    if isinstance(lhs, BCOO) or isinstance(rhs, BCOO):
        dn = _dimension_numbers("bcoo_dot_general", dimension_numbers, 0, 0)
    if isinstance(lhs, BCOO) and isinstance(rhs, BCOO):
        out = _dot_shape("bcoo_dot_general", lhs.shape, rhs.shape, dn, lhs.dtype, rhs.dtype, preferred)
        data, indices = bcoo_spdot_general_p.bind(lhs.data, lhs.indices, rhs.data, rhs.indices,
                                                  lhs_spinfo=lhs._info, rhs_spinfo=rhs._info, dimension_numbers=dn,
                                                  preferred_element_type=preferred)
        return BCOO((data, indices), shape=tuple(out.shape))
    if isinstance(lhs, BCOO):
        return bcoo_dot_general_p.bind(lhs.data, lhs.indices, jnp.asarray(rhs), dimension_numbers=dn,
                                       preferred_element_type=preferred, lhs_spinfo=lhs._info)
    if isinstance(rhs, BCOO):
        lhs = jnp.asarray(lhs)
        swapped = tuple(d[::-1] for d in dn)
        out = bcoo_dot_general_p.bind(rhs.data, rhs.indices, lhs, dimension_numbers=swapped,
                                      preferred_element_type=preferred, lhs_spinfo=rhs._info)
        n_contract, n_batch = len(dn[0][0]), len(dn[1][0])
        n_rhs_free = rhs.ndim - n_contract - n_batch
        perm = (*range(n_batch), *range(n_batch + n_rhs_free, out.ndim), *range(n_batch, n_batch + n_rhs_free))
        return lax.transpose(out, perm)
    return lax.dot_general(lhs, rhs, dimension_numbers, preferred_element_type=preferred_element_type)


def _dot_general_sparse_dense(lhs: "BCOO", rhs: Any, dimension_numbers: Any, preferred_element_type: Any) -> Any:
    api = "bcoo_dot_general"
    (lc, rc), (lb, rb) = _dimension_numbers(api, dimension_numbers, lhs.ndim, rhs.ndim)
    out = _dot_shape(api, lhs.shape, tuple(rhs.shape), ((lc, rc), (lb, rb)), lhs.dtype, rhs.dtype,
                     preferred_element_type)
    nb, ns = lhs.n_batch, lhs.n_sparse
    if any(d >= nb for d in lb):
        raise NotImplementedError(f"{api}: batch dimensions of the contraction must be among the batch dimensions "
                                  f"of the sparse representation; got lhs_batch={lb}, n_batch={nb}")
    if any(d >= nb + ns for d in lc):
        raise NotImplementedError(f"{api}: contracting over dense dimensions (lhs_contracting={lc}, "
                                  f"n_batch={nb}, n_sparse={ns}, shape {lhs.shape}) is not supported")
    # Put the contraction's batch dimensions first among lhs's batch dimensions; the other batch dimensions
    # (contracted or free) become sparse ones, so that each batch member is one sparse array.
    rest = [d for d in range(nb) if d not in lb]
    perm = (*lb, *rest, *range(nb, lhs.ndim))
    moved = bcoo_transpose(lhs, permutation=perm) if perm != tuple(range(lhs.ndim)) else lhs
    moved = bcoo_update_layout(moved, n_batch=len(lb)) if rest else moved
    position = {old: new for new, old in enumerate(perm)}
    contract = [position[d] - len(lb) for d in lc]  # among the member's sparse dimensions
    n_sparse = moved.n_sparse
    free = [k for k in range(n_sparse) if k not in contract]
    rhs_free = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
    rhs = lax.transpose(rhs, (*rb, *rc, *rhs_free))
    dtype = out.dtype
    member_shape = tuple(moved.shape[len(lb) + k] for k in free) + moved.shape[len(lb) + n_sparse:] \
        + tuple(rhs.shape[len(rb) + len(rc):])

    def one(data: Any, indices: Any, r: Any) -> Any:
        picked = r.at[tuple(indices[:, k] for k in contract)].get(mode="fill", fill_value=0) if contract \
            else jnp.broadcast_to(r[None], (indices.shape[0], *r.shape))
        prod = lax.dot_general(data, picked, (((), ()), ((0,), (0,))), preferred_element_type=dtype)
        if free:
            return jnp.zeros(member_shape, dtype).at[tuple(indices[:, k] for k in free)].add(prod, mode="drop")
        return prod.sum(0, dtype=dtype)
    result = nfold_vmap(one, len(lb))(moved.data, moved.indices, rhs)
    return result.astype(dtype)


def _spdot_general(lhs: "BCOO", rhs: "BCOO", dimension_numbers: Any, preferred_element_type: Any) -> "BCOO":
    api = "bcoo_dot_general"
    (lc, rc), (lb, rb) = _dimension_numbers(api, dimension_numbers, lhs.ndim, rhs.ndim)
    out = _dot_shape(api, lhs.shape, rhs.shape, ((lc, rc), (lb, rb)), lhs.dtype, rhs.dtype, preferred_element_type)
    if lhs.n_dense or rhs.n_dense:
        raise NotImplementedError(f"{api}: sparse-sparse contraction with dense dimensions (n_dense={lhs.n_dense} "
                                  f"and {rhs.n_dense}) is not supported")
    if (lb and max(lb) >= lhs.n_batch) or (rb and max(rb) >= rhs.n_batch):
        raise NotImplementedError(f"{api}: batch dimensions of the contraction must be batch dimensions of the "
                                  f"sparse representations; got {lb}, {rb} with n_batch={lhs.n_batch}, "
                                  f"{rhs.n_batch}")
    for c, m in ((lc, lhs), (rc, rhs)):
        if c and (min(c) < m.n_batch or max(c) >= m.n_batch + m.n_sparse):
            raise NotImplementedError(f"{api}: sparse-sparse contraction supports contracting sparse dimensions "
                                      f"only; got contracting {c} with n_batch={m.n_batch}, n_sparse={m.n_sparse}")
    if rhs.n_batch > len(rb) and lhs.n_sparse > len(lc):
        raise ValueError(f"{api}: cannot have unused batch dims on rhs with unused sparse dims on lhs.")
    out_nse = ((lhs.nse if lhs.n_sparse > len(lc) else 1) * (rhs.nse if rhs.n_sparse > len(rc) else 1))
    out_n_batch = lhs.n_batch + rhs.n_batch - len(lb)
    out_nse = min(out_nse, math.prod(out.shape[out_n_batch:]))
    out_sparse_shape = out.shape[out_n_batch:]
    lrest = [d for d in range(lhs.n_batch) if d not in lb]
    rrest = [d for d in range(rhs.n_batch) if d not in rb]
    ldata = lhs.data.transpose(*lb, *lrest, lhs.n_batch)
    lind = lhs.indices.transpose(*lb, *lrest, lhs.n_batch, lhs.n_batch + 1)
    rdata = rhs.data.transpose(*rb, *rrest, rhs.n_batch)
    rind = rhs.indices.transpose(*rb, *rrest, rhs.n_batch, rhs.n_batch + 1)
    lcon = [d - lhs.n_batch for d in lc]
    rcon = [d - rhs.n_batch for d in rc]
    lfree = [k for k in range(lhs.n_sparse) if k not in lcon]
    rfree = [k for k in range(rhs.n_sparse) if k not in rcon]
    lsizes = lhs.shape[lhs.n_batch:]
    rsizes = rhs.shape[rhs.n_batch:]
    dtype = out.dtype
    index_dtype = jnp.result_type(lhs.indices.dtype, rhs.indices.dtype)

    def one(ld: Any, li: Any, rd: Any, ri: Any) -> tuple[Any, Any]:
        lkey, rkey = li[:, jnp.array(lcon, np.int32)], ri[:, jnp.array(rcon, np.int32)]
        match = jnp.all(lkey[:, None] == rkey[None, :], axis=-1)
        lvalid = jnp.all(lkey < jnp.array([lsizes[k] for k in lcon], li.dtype), axis=-1)
        rvalid = jnp.all(rkey < jnp.array([rsizes[k] for k in rcon], ri.dtype), axis=-1)
        prod = (ld[:, None].astype(dtype) * rd[None, :].astype(dtype))
        values = jnp.where(match & lvalid[:, None] & rvalid[None, :], prod, jnp.zeros((), dtype)).reshape(-1)
        lpart = jnp.broadcast_to(li[:, None][..., jnp.array(lfree, np.int32)].astype(index_dtype),
                                 (li.shape[0], ri.shape[0], len(lfree)))
        rpart = jnp.broadcast_to(ri[None][..., jnp.array(rfree, np.int32)].astype(index_dtype),
                                 (li.shape[0], ri.shape[0], len(rfree)))
        where = jnp.concatenate([lpart, rpart], axis=-1).reshape(-1, len(lfree) + len(rfree))
        return _sum_duplicates(values, where, out_sparse_shape, out_nse, api)
    fun = nfold_vmap(one, len(rrest), in_axes=(None, None, 0, 0))
    fun = nfold_vmap(fun, len(lrest), in_axes=(0, 0, None, None))
    fun = nfold_vmap(fun, len(lb))
    data, indices = fun(ldata, lind, rdata, rind)
    return BCOO((data, indices), shape=out.shape)


def bcoo_dot_general_sampled(A: Any, B: Any, indices: Any, *, dimension_numbers: Any) -> Any:
    """The data of dot_general(A, B) at the BCOO indices (like jax.experimental.sparse.bcoo_dot_general_sampled):
    the transpose of a sparse-dense contraction with respect to the sparse operand's data."""
    A, B, indices = jnp.asarray(A), jnp.asarray(B), jnp.asarray(indices)
    dn = _dimension_numbers("bcoo_dot_general_sampled", dimension_numbers, A.ndim, B.ndim)
    return bcoo_dot_general_sampled_p.bind(A, B, indices, dimension_numbers=dn)


def _dot_general_sampled(A: Any, B: Any, indices: Any, *, dimension_numbers: Any) -> Any:
    return _extract(indices, lax.dot_general(A, B, dimension_numbers, precision=lax.Precision.HIGHEST))


# ------------------------------------------------------------------------------------------------------------------
# reductions, elementwise products

def bcoo_reduce_sum(mat: "BCOO", *, axes: Sequence[int]) -> "BCOO":
    """The sum of mat over axes, as a BCOO array (like jax.experimental.sparse.bcoo_reduce_sum): summed sparse
    dimensions drop their index column, summed batch dimensions join the elements, dense ones sum the data."""
    mat = _is_bcoo("bcoo_reduce_sum", mat)
    shape, nb, ns = mat.shape, mat.n_batch, mat.n_sparse
    axes = sorted({operator.index(a) for a in axes})
    if any(not 0 <= a < len(shape) for a in axes):
        raise ValueError(f"bcoo_reduce_sum: axes {tuple(axes)} out of range for an array of shape {shape}")
    data, indices, nse = mat.data, mat.indices, mat.nse
    dense_axes = tuple(a - ns + 1 for a in axes if a >= nb + ns)
    data = data.sum(dense_axes)
    if ns:
        data = jnp.where(_expand_to_data(_in_range(indices, shape, nb), data), data, jnp.zeros((), data.dtype))
    keep = [k for k in range(ns) if k + nb not in axes]
    indices = indices[..., jnp.array(keep, np.int32)] if keep else jnp.zeros((*indices.shape[:-1], 0),
                                                                               indices.dtype)
    batch_axes = [a for a in axes if a < nb]
    for a in batch_axes:
        if data.shape[a] == 1 and indices.shape[a] == 1:
            data = data * shape[a]
        elif data.shape[a] == 1:
            data = jnp.broadcast_to(data, data.shape[:a] + (shape[a],) + data.shape[a + 1:])
        elif indices.shape[a] == 1:
            data = data.sum(a, keepdims=True)
    kept = [d for d in range(nb) if d not in batch_axes]
    new_nse = nse * math.prod(data.shape[a] for a in batch_axes)
    order = (*kept, *batch_axes)
    data = data.transpose(*order, *range(nb, data.ndim))
    data = data.reshape(*data.shape[:len(kept)], new_nse, *data.shape[nb + 1:])
    indices = jnp.broadcast_to(indices, tuple(max(i, d) if a in batch_axes else i
                                              for a, (i, d) in enumerate(zip(indices.shape[:nb], mat.data.shape[:nb])))
                               + indices.shape[nb:]) if batch_axes else indices
    indices = indices.transpose(*order, nb, nb + 1)
    indices = indices.reshape(*indices.shape[:len(kept)], new_nse, indices.shape[-1])
    out_shape = tuple(s for i, s in enumerate(shape) if i not in axes)
    return BCOO((data, indices), shape=out_shape)


def bcoo_multiply_dense(sp_mat: "BCOO", v: Any) -> Any:
    """The data of sp_mat * v (v dense, broadcasting to sp_mat's shape): the product keeps sp_mat's indices, so
    this returns only the new data (as jax.experimental.sparse.bcoo_multiply_dense)."""
    sp_mat = _is_bcoo("bcoo_multiply_dense", sp_mat)
    v = jnp.asarray(v)
    shape = sp_mat.shape
    if v.ndim == 0:
        return sp_mat.data * v
    if tuple(v.shape) == shape:
        return sp_mat.data * _extract(sp_mat.indices, v)
    if jnp.broadcast_shapes(tuple(v.shape), shape) != shape:
        raise NotImplementedError(f"bcoo_multiply_dense: multiplication between sparse and dense is only "
                                  f"implemented where the output shape is the sparse array's; got sparse shape "
                                  f"{shape} and dense shape {tuple(v.shape)}")
    v = lax.expand_dims(v, tuple(range(len(shape) - v.ndim)))
    nb = sp_mat.n_batch
    sparse_sizes = v.shape[nb:nb + sp_mat.n_sparse]

    def one(d: Any, i: Any, w: Any) -> Any:
        where = tuple(i[:, k] if s != 1 else jnp.zeros_like(i[:, k]) for k, s in enumerate(sparse_sizes))
        return d * w[where]
    return nfold_vmap(one, nb)(sp_mat.data, sp_mat.indices, v)


def bcoo_multiply_sparse(lhs: "BCOO", rhs: "BCOO") -> "BCOO":
    """The elementwise product of two BCOO arrays of the same rank (broadcasting), a BCOO array with
    lhs.nse * rhs.nse elements per batch member (as jax.experimental.sparse.bcoo_multiply_sparse)."""
    lhs, rhs = _is_bcoo("bcoo_multiply_sparse", lhs), _is_bcoo("bcoo_multiply_sparse", rhs)
    if lhs.ndim != rhs.ndim:
        raise TypeError(f"bcoo_multiply_sparse: arrays must have same number of dimensions, got {lhs.shape}, "
                        f"{rhs.shape}")
    if lhs.n_dense != rhs.n_dense:
        raise NotImplementedError(f"bcoo_multiply_sparse: arrays with differing numbers of dense dimensions: "
                                  f"{lhs.n_dense} and {rhs.n_dense}")
    out_shape = tuple(jnp.broadcast_shapes(lhs.shape, rhs.shape))
    n_batch = min(lhs.n_batch, rhs.n_batch)
    lshape, rshape = lhs.shape[n_batch:], rhs.shape[n_batch:]

    def one(ld: Any, li: Any, rd: Any, ri: Any) -> tuple[Any, Any]:
        if li.ndim > 2:
            ld, li = bcoo_update_layout(BCOO((ld, li), shape=lshape), n_batch=0)._bufs
        elif ri.ndim > 2:
            rd, ri = bcoo_update_layout(BCOO((rd, ri), shape=rshape), n_batch=0)._bufs
        ln, rn = li.shape[0], ri.shape[0]
        ns = li.shape[-1]
        dims = [k for k in range(ns) if lshape[k] != 1 and rshape[k] != 1]
        dims_arr = jnp.array(dims, np.int32)
        match = jnp.all(li[:, None][..., dims_arr] == ri[None][..., dims_arr], axis=-1)
        il, ir = jnp.nonzero(match, size=ln * rn, fill_value=(ln, rn))
        data = (ld.at[il].get(mode="fill", fill_value=0) * rd.at[ir].get(mode="fill", fill_value=0))
        indices = jnp.maximum(li.at[il].get(mode="fill", fill_value=max(lshape, default=0)),
                              ri.at[ir].get(mode="fill", fill_value=max(rshape, default=0)))
        return data, indices
    data, indices = nfold_vmap(one, n_batch)(lhs.data, lhs.indices, rhs.data, rhs.indices)
    return BCOO((data, indices), shape=out_shape)


# ------------------------------------------------------------------------------------------------------------------
# structural operations

def bcoo_broadcast_in_dim(mat: "BCOO", *, shape: Shape, broadcast_dimensions: Sequence[int],
                          sharding: Any = None) -> "BCOO":
    """lax.broadcast_in_dim of a BCOO array: new dimensions before the sparse ones are batch dimensions, those
    after are dense; sparse dimensions keep their sizes (or are new ones of size 1)."""
    mat = _is_bcoo("bcoo_broadcast_in_dim", mat)
    shape = tuple(operator.index(s) for s in shape)
    bdims = tuple(operator.index(d) for d in broadcast_dimensions)
    if len(bdims) != mat.ndim:
        raise ValueError(f"bcoo_broadcast_in_dim: the array's shape {mat.shape} and broadcast_dimensions {bdims} "
                         "must have the same length")
    nb, ns, nd = mat.n_batch, mat.n_sparse, mat.n_dense
    batch_dims, sparse_dims, dense_dims = bdims[:nb], bdims[nb:nb + ns], bdims[nb + ns:]
    if max(batch_dims, default=0) > min(sparse_dims, default=len(shape)):
        raise ValueError("bcoo_broadcast_in_dim: Cannot mix batch and sparse dimensions during broadcast_in_dim")
    if max(sparse_dims, default=0) > min(dense_dims, default=len(shape)):
        raise ValueError("bcoo_broadcast_in_dim: Cannot mix sparse and dense dimensions during broadcast_in_dim")
    new_nb = min(bdims[nb:], default=len(shape))
    new_nd = nd and len(shape) - min(bdims[-nd:])
    new_ns = len(shape) - new_nb - new_nd
    if math.prod(mat.shape[nb:nb + ns]) != math.prod(shape[new_nb:new_nb + new_ns]):
        raise NotImplementedError("bcoo_broadcast_in_dim: adding sparse dimensions with lengths != 1")
    data, indices = mat.data, mat.indices
    if (new_nb, new_nd) != (nb, nd):
        data = lax.broadcast_in_dim(data, (*shape[:new_nb], mat.nse, *shape[new_nb + new_ns:]),
                                    (*batch_dims, new_nb, *(b + 1 - new_ns for b in dense_dims)))
        indices = lax.broadcast_in_dim(indices, (*shape[:new_nb], mat.nse, ns),
                                       (*batch_dims, new_nb, new_nb + 1))
    if new_ns != ns:
        where = jnp.array([d - new_nb for d in sparse_dims], np.int32)
        indices = jnp.zeros((*indices.shape[:-1], new_ns), indices.dtype).at[..., where].set(indices)
    return BCOO((data, indices), shape=shape)


def bcoo_concatenate(operands: Sequence["BCOO"], *, dimension: int) -> "BCOO":
    """lax.concatenate of BCOO arrays with matching layouts, along a batch or sparse dimension."""
    dimension = operator.index(dimension)
    operands = list(operands)
    if not operands or not all(isinstance(op, BCOO) for op in operands):
        raise ValueError(f"bcoo_concatenate: expected operands to be a sequence of BCOO arrays. Got "
                         f"{[type(op).__name__ for op in operands]}")
    try:
        out = ember.eval_shape(lambda *xs: lax.concatenate(xs, dimension),
                               *(ember.ShapeDtypeStruct(op.shape, op.dtype) for op in operands))
    except (TypeError, ValueError) as err:
        raise type(err)(f"bcoo_concatenate: {err}") from None
    if len({op.n_dense for op in operands}) > 1:
        raise ValueError("bcoo_concatenate requires inputs to have matching nse dimensions.")
    n_batches = {op.n_batch for op in operands}
    if len(n_batches) != 1 and max(n_batches) == 1:  # x[None] next to a batched array: align the new axis
        if all(op.shape[0] == 1 for op in operands if op.n_batch == 0):
            operands = [bcoo_update_layout(op, n_batch=1) if op.n_batch == 0 else op for op in operands]
        elif all(op.shape[0] == 1 for op in operands if op.n_batch == 1):
            operands = [bcoo_update_layout(op, n_batch=0) if op.n_batch == 1 else op for op in operands]
        n_batches = {op.n_batch for op in operands}
    if len(n_batches) != 1:
        raise ValueError("bcoo_concatenate requires inputs to have matching batch dimensions.")
    nb, ns = operands[0].n_batch, operands[0].n_sparse
    index_batches = [op.indices.shape[:nb] for op in operands]
    data_batches = [op.data.shape[:nb] for op in operands]
    if dimension < nb:
        index_batches = [s[:dimension] + s[dimension + 1:] for s in index_batches]
        data_batches = [s[:dimension] + s[dimension + 1:] for s in data_batches]
    if not len(set(index_batches)) == len(set(data_batches)) == 1:
        raise NotImplementedError("bcoo_concatenate: concatenation of arrays with broadcasted batch indices")
    if dimension < nb:
        nse = max(op.nse for op in operands)
        operands = [_set_nse(op, nse) for op in operands]
        indices = lax.concatenate([op.indices for op in operands], dimension)
        data = lax.concatenate([op.data for op in operands], dimension)
    elif dimension < nb + ns:
        offsets = np.cumsum([0] + [op.shape[dimension] for op in operands[:-1]])
        data = lax.concatenate([op.data for op in operands], nb)
        indices = lax.concatenate([op.indices.at[..., dimension - nb].add(int(off))
                                   for op, off in zip(operands, offsets)], nb)
    else:
        raise NotImplementedError("bcoo_concatenate: concatenation along dense dimensions is not supported")
    return BCOO((data, indices), shape=tuple(out.shape))


def bcoo_reshape(mat: "BCOO", *, new_sizes: Sequence[int], dimensions: Sequence[int] | None = None,
                 sharding: Any = None) -> "BCOO":
    """lax.reshape of a BCOO array: the new shape must split into batch, sparse and dense parts of the same
    sizes as the old (sparse indices are re-linearized; dimensions permutes within each part first)."""
    mat = _is_bcoo("bcoo_reshape", mat)
    new_sizes = tuple(operator.index(s) for s in new_sizes)
    if math.prod(new_sizes) != math.prod(mat.shape):
        raise TypeError(f"bcoo_reshape: cannot reshape an array of shape {mat.shape} (size {math.prod(mat.shape)}) "
                        f"to {new_sizes} (size {math.prod(new_sizes)})")
    nb, ns = mat.n_batch, mat.n_sparse
    if mat.indices.shape[:nb] != mat.data.shape[:nb] != mat.shape[:nb]:
        raise NotImplementedError("bcoo_reshape: reshape of arrays with broadcasted batch dimensions.")
    batch_perm, sparse_perm, dense_perm = _validate_permutation(
        "bcoo_reshape", mat, tuple(dimensions) if dimensions is not None else tuple(range(mat.ndim)))
    batch_size = math.prod(mat.shape[:nb])
    sparse_size = math.prod(mat.shape[nb:nb + ns])
    cumulative = np.cumprod(new_sizes) if new_sizes else np.ones((0,), int)
    if batch_size != 1 and batch_size not in cumulative:
        raise ValueError(f"bcoo_reshape: new shape cannot mix batch and sparse dimensions; got shape={mat.shape} "
                         f"new_shape={new_sizes} with n_batch={nb}")
    if sparse_size != 1 and batch_size * sparse_size not in cumulative:
        raise ValueError(f"bcoo_reshape: new shape cannot mix sparse and dense dimensions; got shape={mat.shape} "
                         f"new_shape={new_sizes} with n_dense={mat.n_dense}")
    i1 = int(cumulative.searchsorted(batch_size, side="right"))
    i2 = int(cumulative.searchsorted(batch_size * sparse_size, side="right"))
    new_batch, new_sparse, new_dense = new_sizes[:i1], new_sizes[i1:i2], new_sizes[i2:]
    data = lax.reshape(lax.transpose(mat.data, (*batch_perm, nb, *(p + nb + 1 for p in dense_perm))),
                       (*new_batch, mat.nse, *new_dense))
    indices = lax.reshape(lax.transpose(mat.indices, (*batch_perm, nb, nb + 1)), (*new_batch, mat.nse, ns))
    if not new_sparse:
        indices = jnp.zeros((*new_batch, mat.nse, 0), indices.dtype)
    elif ns:
        cols = tuple(indices[..., k] for k in sparse_perm)
        sizes = tuple(mat.shape[nb + k] for k in sparse_perm)
        flat = jnp.ravel_multi_index(cols, sizes, mode="clip")
        out_of_range = jnp.any(indices >= _sparse_limits(indices, mat.shape, nb), axis=-1, keepdims=True)
        new_cols = jnp.unravel_index(flat, new_sparse)
        indices = jnp.stack([c.astype(indices.dtype) for c in new_cols], axis=-1)
        indices = jnp.where(out_of_range, jnp.array(new_sparse, indices.dtype), indices)
    else:
        indices = jnp.zeros((*new_batch, mat.nse, len(new_sparse)), indices.dtype)
    return BCOO((data, indices), shape=new_sizes)


def bcoo_rev(operand: "BCOO", dimensions: Sequence[int]) -> "BCOO":
    """lax.rev of a BCOO array: reversed batch and dense dimensions reverse the buffers, sparse ones the indices."""
    operand = _is_bcoo("bcoo_rev", operand)
    dimensions = [operator.index(d) for d in dimensions]
    if len(set(dimensions)) != len(dimensions) or any(not 0 <= d < operand.ndim for d in dimensions):
        raise ValueError(f"bcoo_rev: dimensions {tuple(dimensions)} must be distinct dimensions of an array of "
                         f"shape {operand.shape}")
    nb, ns = operand.n_batch, operand.n_sparse
    batch = [d for d in dimensions if d < nb]
    sparse = [d - nb for d in dimensions if nb <= d < nb + ns]
    dense = [d for d in dimensions if d >= nb + ns]
    data, indices = operand.data, operand.indices
    if batch:
        indices = lax.rev(indices, batch)
    if batch or dense:
        data = lax.rev(data, batch + [d + 1 - ns for d in dense])
    if sparse:
        sizes = jnp.array(operand.shape[nb:nb + ns], indices.dtype)
        flip = jnp.zeros((ns,), bool).at[jnp.array(sparse, np.int32)].set(True)
        flipped = sizes - 1 - indices
        indices = jnp.where(flip, jnp.where(flipped < 0, sizes, flipped), indices)
    return BCOO((data, indices), shape=operand.shape)


def bcoo_squeeze(arr: "BCOO", *, dimensions: Sequence[int]) -> "BCOO":
    """lax.squeeze of a BCOO array (dimensions of size 1)."""
    arr = _is_bcoo("bcoo_squeeze", arr)
    dimensions = tuple(sorted({operator.index(d) % arr.ndim if arr.ndim else operator.index(d)
                               for d in dimensions}))
    if any(arr.shape[d] != 1 for d in dimensions):
        raise ValueError(f"bcoo_squeeze: cannot select an axis to squeeze out which has size not equal to one, got "
                         f"shape={arr.shape} and dimensions={dimensions}")
    nb, ns = arr.n_batch, arr.n_sparse
    batch = tuple(d for d in dimensions if d < nb)
    keep = [k for k in range(ns) if k + nb not in dimensions]
    dense = tuple(d - ns + 1 for d in dimensions if d >= nb + ns)
    data = lax.squeeze(arr.data, batch + dense)
    indices = lax.squeeze(arr.indices[..., jnp.array(keep, np.int32)] if keep else
                          jnp.zeros((*arr.indices.shape[:-1], 0), arr.indices.dtype), batch)
    shape = tuple(s for i, s in enumerate(arr.shape) if i not in dimensions)
    return BCOO((data, indices), shape=shape, indices_sorted=arr.indices_sorted, unique_indices=arr.unique_indices)


def bcoo_slice(mat: "BCOO", *, start_indices: Sequence[int], limit_indices: Sequence[int],
               strides: Sequence[int] | None = None) -> "BCOO":
    """lax.slice of a BCOO array: elements outside the slice get the padding index and zero data; the nse is
    capped at the slice's sparse size (summing duplicates when it shrinks)."""
    mat = _is_bcoo("bcoo_slice", mat)
    start = [operator.index(i) for i in start_indices]
    limit = [operator.index(i) for i in limit_indices]
    strides = [1] * mat.ndim if strides is None else [operator.index(i) for i in strides]
    if not len(start) == len(limit) == len(strides) == mat.ndim:
        raise ValueError(f"bcoo_slice: start_indices, limit_indices and strides must have mat.ndim={mat.ndim} "
                         f"entries, got {start}, {limit}, {strides}")
    if any(s <= 0 for s in strides):
        raise ValueError(f"bcoo_slice: strides must be a sequence of positive integers; got {strides}")
    if not all(0 <= a <= b <= n for a, b, n in zip(start, limit, mat.shape)):
        raise ValueError(f"bcoo_slice: invalid indices. Got start_indices={start}, limit_indices={limit} and "
                         f"shape={mat.shape}")
    nb, ns = mat.n_batch, mat.n_sparse
    data_slices, index_slices = [], []
    for i in range(nb):
        piece = slice(start[i], limit[i], strides[i])
        data_slices.append(slice(None) if mat.data.shape[i] != mat.shape[i] else piece)
        index_slices.append(slice(None) if mat.indices.shape[i] != mat.shape[i] else piece)
    data_slices.append(slice(None))
    index_slices += [slice(None), slice(None)]
    data_slices += [slice(a, b, s) for a, b, s in zip(start[nb + ns:], limit[nb + ns:], strides[nb + ns:])]
    data, indices = mat.data[tuple(data_slices)], mat.indices[tuple(index_slices)]
    new_shape = tuple((b - a + s - 1) // s for a, b, s in zip(start, limit, strides))
    if ns:
        lead = (1,) * (nb + 1)
        starts = jnp.array(start[nb:nb + ns], indices.dtype).reshape(lead + (ns,))
        ends = jnp.array(limit[nb:nb + ns], indices.dtype).reshape(lead + (ns,))
        steps = jnp.array(strides[nb:nb + ns], indices.dtype).reshape(lead + (ns,))
        keep = jnp.all((indices >= starts) & (indices < ends) & ((indices - starts) % steps == 0), axis=-1,
                       keepdims=True)
        indices = jnp.where(keep, (indices - starts + steps - 1) // steps, (ends - starts + steps - 1) // steps)
        data = jnp.where(_expand_to_data(keep[..., 0], data), data, jnp.zeros((), data.dtype))
        new_nse = math.prod(new_shape[nb:nb + ns])
        if mat.nse > new_nse:
            data, indices = _sum_duplicates(data, indices, new_shape, new_nse, "bcoo_slice")
    return BCOO((data, indices), shape=new_shape)


def bcoo_dynamic_slice(mat: "BCOO", start_indices: Sequence[Any], slice_sizes: Sequence[int]) -> "BCOO":
    """lax.dynamic_slice of a BCOO array (start indices may be traced; they are clamped as lax's are)."""
    mat = _is_bcoo("bcoo_dynamic_slice", mat)
    sizes = tuple(operator.index(i) for i in slice_sizes)
    starts = [jnp.asarray(i) for i in start_indices]
    if not len(starts) == len(sizes) == mat.ndim:
        raise ValueError(f"bcoo_dynamic_slice: start_indices and slice_sizes must have mat.ndim={mat.ndim} entries, "
                         f"got {len(starts)} and {len(sizes)}")
    if any(not np.issubdtype(np.dtype(i.dtype), np.integer) or i.shape != () for i in starts):
        raise TypeError("bcoo_dynamic_slice: start_indices must be integer scalars, got "
                        f"{[(tuple(i.shape), str(i.dtype)) for i in starts]}")
    if not all(0 <= s <= n for s, n in zip(sizes, mat.shape)):
        raise TypeError(f"bcoo_dynamic_slice: slice_sizes must be less than or equal to operand shape, got "
                        f"slice_sizes {sizes} for operand shape {mat.shape}")
    nb, ns = mat.n_batch, mat.n_sparse
    zero = jnp.zeros((), starts[0].dtype if starts else np.int32)
    data_start, data_sizes, index_start, index_sizes = [], [], [], []
    for i in range(nb):
        data_b, index_b = mat.data.shape[i] != mat.shape[i], mat.indices.shape[i] != mat.shape[i]
        data_start.append(zero if data_b else starts[i])
        data_sizes.append(1 if data_b else sizes[i])
        index_start.append(zero if index_b else starts[i])
        index_sizes.append(1 if index_b else sizes[i])
    data_start += [zero, *starts[nb + ns:]]
    data_sizes += [mat.nse, *sizes[nb + ns:]]
    index_start += [zero, zero]
    index_sizes += [mat.nse, ns]
    data = lax.dynamic_slice(mat.data, data_start, data_sizes)
    indices = lax.dynamic_slice(mat.indices, index_start, index_sizes)
    if ns:
        full = jnp.array(mat.shape[nb:nb + ns], indices.dtype)
        size = jnp.array(sizes[nb:nb + ns], indices.dtype)
        first = jnp.stack([s.astype(indices.dtype) for s in starts[nb:nb + ns]])
        first = jnp.clip(jnp.where(first < 0, first + full, first), 0, full - size)
        lead = (1,) * (nb + 1)
        first, size = first.reshape(lead + (ns,)), size.reshape(lead + (ns,))
        keep = jnp.all((indices >= first) & (indices < first + size), axis=-1, keepdims=True)
        indices = jnp.where(keep, indices - first, size)
        data = jnp.where(_expand_to_data(keep[..., 0], data), data, jnp.zeros((), data.dtype))
        if mat.nse > math.prod(sizes[nb:nb + ns]):
            data, indices = _sum_duplicates(data, indices, sizes, math.prod(sizes[nb:nb + ns]),
                                            "bcoo_dynamic_slice")
    return BCOO((data, indices), shape=sizes)


def bcoo_gather(operand: "BCOO", start_indices: Any, dimension_numbers: Any, slice_sizes: Shape, *,
                unique_indices: bool = False, indices_are_sorted: bool = False, mode: Any = None,
                fill_value: Any = None) -> "BCOO":
    """lax.gather of a BCOO array (mode promise_in_bounds only, as JAX's): each gathered slice is a dynamic
    slice of the operand, so the result is BCOO with the gather's shape."""
    operand = _is_bcoo("bcoo_gather", operand)
    start_indices = jnp.asarray(start_indices)
    parsed = lax.GatherScatterMode.from_any(mode) if mode is not None else lax.GatherScatterMode.PROMISE_IN_BOUNDS
    if parsed != lax.GatherScatterMode.PROMISE_IN_BOUNDS:
        raise NotImplementedError(f"bcoo_gather: mode={mode} not yet supported.")
    try:
        out = ember.eval_shape(lambda o, i: lax.gather(o, i, dimension_numbers, tuple(slice_sizes),
                                                       mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS),
                               ember.ShapeDtypeStruct(operand.shape, operand.dtype),
                               ember.ShapeDtypeStruct(start_indices.shape, start_indices.dtype))
    except (TypeError, ValueError) as err:
        raise type(err)(f"bcoo_gather: {err}") from None
    offset_dims = tuple(dimension_numbers.offset_dims)
    collapsed = tuple(dimension_numbers.collapsed_slice_dims)
    full_sizes = list(operand.shape)
    zero = jnp.zeros((), start_indices.dtype)
    flat_starts = [zero] * operand.ndim
    in_axes = [None] * operand.ndim
    for i, j in enumerate(dimension_numbers.start_index_map):
        flat_starts[j] = start_indices[..., i].reshape(-1)
        full_sizes[j] = slice_sizes[j]
        in_axes[j] = 0

    def one(starts: Any) -> "BCOO":
        return bcoo_squeeze(bcoo_dynamic_slice(operand, starts, full_sizes), dimensions=collapsed)
    result = ember.vmap(one, in_axes=(in_axes,))(flat_starts)
    result = bcoo_reshape(result, new_sizes=(*start_indices.shape[:-1], *result.shape[1:]))
    if result.shape:
        batch_dims = tuple(d for d in range(len(out.shape)) if d not in offset_dims)
        perm = np.zeros(result.ndim, int)
        perm[np.array(batch_dims + offset_dims, int)] = np.arange(result.ndim)
        if set(perm[:len(batch_dims)].tolist()) != set(range(len(batch_dims))):
            result = bcoo_update_layout(result, n_batch=0)
        result = bcoo_transpose(result, permutation=tuple(int(p) for p in perm))
    return bcoo_reshape(result, new_sizes=tuple(out.shape)).astype(out.dtype)


def bcoo_conv_general_dilated(lhs: Any, rhs: Any, *, window_strides: Any, padding: Any, lhs_dilation: Any = None,
                              rhs_dilation: Any = None, dimension_numbers: Any = None, feature_group_count: int = 1,
                              batch_group_count: int = 1, precision: Any = None, preferred_element_type: Any = None,
                              out_sharding: Any = None) -> "BCOO":
    """lax.conv_general_dilated of a 1-D BCOO signal with a BCOO or dense 1-D kernel (shapes (1, 1, n), unit
    strides and dilations: the cases JAX's supports); the result is BCOO of shape (1, 1, width)."""
    try:
        out = ember.eval_shape(
            lambda a, b: lax.conv_general_dilated(a, b, window_strides, padding, lhs_dilation, rhs_dilation,
                                                  dimension_numbers, feature_group_count, batch_group_count,
                                                  precision, preferred_element_type),
            ember.ShapeDtypeStruct(lhs.shape, lhs.dtype), ember.ShapeDtypeStruct(rhs.shape, rhs.dtype))
    except (TypeError, ValueError) as err:
        raise type(err)(f"bcoo_conv_general_dilated: {err}") from None
    if len(lhs.shape) != 3 or len(rhs.shape) != 3 or lhs.shape[:2] != (1, 1) or rhs.shape[:2] != (1, 1):
        raise NotImplementedError("bcoo_conv_general_dilated: only 1-D convolutions of shapes (1, 1, n) are "
                                  f"supported, got {lhs.shape} and {rhs.shape}")
    for name, value in (("lhs_dilation", lhs_dilation), ("rhs_dilation", rhs_dilation),
                        ("window_strides", window_strides)):
        if value is not None and tuple(value) != (1,):
            raise NotImplementedError(f"bcoo_conv_general_dilated: {name}={tuple(value)} (only unit values)")
    if feature_group_count != 1 or batch_group_count != 1:
        raise NotImplementedError("bcoo_conv_general_dilated: non-unit group counts")
    if isinstance(padding, str):
        pad = lax.padtype_to_pads(lhs.shape[2:], rhs.shape[2:], (1,), padding)[0]
    else:
        pad = tuple(padding[0])
    width = out.shape[2]
    index_dtype = lhs.indices.dtype if isinstance(lhs, BCOO) else rhs.indices.dtype if isinstance(rhs, BCOO) \
        else np.int32

    def one_d(mat: Any) -> tuple[Any, Any]:
        if isinstance(mat, BCOO):
            mat = bcoo_update_layout(mat, n_batch=2, n_dense=0)
            d, i = mat.data[0, 0], mat.indices[0, 0]
            return jnp.where(i[:, 0] < mat.shape[-1], d, jnp.zeros((), d.dtype)), i[:, 0]
        mat = jnp.asarray(mat)
        return mat[0, 0], jnp.arange(mat.shape[-1], dtype=index_dtype)
    ld, li = one_d(lhs)
    rd, ri = one_d(rhs)
    data = (ld[:, None] * rd[None, :]).reshape(-1)
    where = (li[:, None] + (int(pad[0]) - ri)[None, :]).reshape(-1).astype(index_dtype)
    negative = where < 0
    data = jnp.where(negative, jnp.zeros((), data.dtype), data)
    where = jnp.where(negative, jnp.zeros((), where.dtype), where)
    return BCOO((data[None, None], where[None, None, :, None]), shape=(1, 1, width))


# ------------------------------------------------------------------------------------------------------------------
# the BCOO class

@ember.tree_util.register_pytree_node_class
class BCOO(JAXSparse):
    """A batched-COO sparse array (like jax.experimental.sparse.BCOO): BCOO((data, indices), shape=...). See the
    module docstring for the layout; indices_sorted and unique_indices record what is known of the indices."""
    data: Any
    indices: Any
    shape: Shape
    indices_sorted: bool
    unique_indices: bool

    def __init__(self, args: tuple[Any, Any], *, shape: Sequence[int], indices_sorted: bool = False,
                 unique_indices: bool = False):
        try:
            data, indices = args
        except (TypeError, ValueError):
            raise TypeError(f"BCOO: args must be a pair (data, indices), got {type(args).__name__}") from None
        self.data, self.indices = jnp.asarray(data), jnp.asarray(indices)
        self.indices_sorted, self.unique_indices = bool(indices_sorted), bool(unique_indices)
        super().__init__(args, shape=shape)
        _validate("BCOO", self.data, self.indices, self.shape)

    @property
    def _info(self) -> SparseInfo:
        return SparseInfo(self.shape, self.indices_sorted, self.unique_indices)

    @property
    def _bufs(self) -> tuple[Any, Any]:
        return self.data, self.indices

    @property
    def nse(self) -> int:
        return self.indices.shape[-2]

    @property
    def n_batch(self) -> int:
        return self.indices.ndim - 2

    @property
    def n_sparse(self) -> int:
        return self.indices.shape[-1]

    @property
    def n_dense(self) -> int:
        return self.data.ndim - 1 - self.n_batch

    def __repr__(self) -> str:
        extra = f", nse={self.nse}"
        if self.n_batch:
            extra += f", n_batch={self.n_batch}"
        if self.n_dense:
            extra += f", n_dense={self.n_dense}"
        text = f"BCOO({self.dtype}{list(self.shape)}{extra})"
        return f"Tracer[{text}]" if isinstance(self.data, ember._core.Tracer) else text

    @classmethod
    def fromdense(cls, mat: Any, *, nse: int | None = None, index_dtype: Any = np.int32, n_dense: int = 0,
                  n_batch: int = 0) -> "BCOO":
        """The BCOO array of a dense one (bcoo_fromdense)."""
        return bcoo_fromdense(mat, nse=nse, index_dtype=index_dtype, n_dense=n_dense, n_batch=n_batch)

    @classmethod
    def from_scipy_sparse(cls, mat: Any, *, index_dtype: Any = None, n_dense: int = 0, n_batch: int = 0) -> "BCOO":
        """A BCOO array of a scipy.sparse matrix (its COO entries, in scipy's order)."""
        if n_dense != 0 or n_batch != 0:
            raise NotImplementedError("BCOO.from_scipy_sparse with nonzero n_dense/n_batch")
        mat = mat.tocoo()
        indices = np.column_stack((mat.row, mat.col)).astype(index_dtype or np.int32)
        return cls((jnp.asarray(mat.data), jnp.asarray(indices)), shape=mat.shape)

    @classmethod
    def _empty(cls, shape: Sequence[int], *, dtype: Any = None, index_dtype: Any = "int32", n_dense: int = 0,
               n_batch: int = 0, nse: int = 0) -> "BCOO":
        shape = tuple(operator.index(s) for s in shape)
        n_sparse = len(shape) - n_dense - n_batch
        if n_sparse < 0 or n_dense < 0 or n_batch < 0 or nse < 0:
            raise ValueError(f"BCOO: invalid inputs: shape={shape}, n_dense={n_dense}, n_batch={n_batch}, "
                             f"nse={nse}")
        data = jnp.zeros((*shape[:n_batch], nse, *shape[n_batch + n_sparse:]), dtype)
        indices = jnp.broadcast_to(jnp.array(shape[n_batch:n_batch + n_sparse], index_dtype),
                                   (*shape[:n_batch], nse, n_sparse))
        return cls((data, indices), shape=shape, indices_sorted=True, unique_indices=True)

    @classmethod
    def _eye(cls, N: int, M: int, k: int, *, dtype: Any = None, index_dtype: Any = "int32", n_batch: int = 0,
             n_dense: int = 0) -> "BCOO":
        n_sparse = 2 - n_batch - n_dense
        if n_sparse < 0 or n_dense < 0 or n_batch < 0:
            raise ValueError(f"BCOO: invalid inputs: shape={(N, M)}, n_dense={n_dense}, n_batch={n_batch}")
        diag = min(N, M - k) if k > 0 else min(N + k, M)
        if diag <= 0:
            return cls._empty((N, M), dtype=dtype, index_dtype=index_dtype, n_batch=n_batch, n_dense=n_dense)
        if n_dense > 0 or n_batch > 1:
            return cls.fromdense(jnp.eye(N, M, k, dtype=dtype), n_batch=n_batch, n_dense=n_dense,
                                 index_dtype=index_dtype)
        if n_batch == 0:
            i = np.arange(diag)
            rows, cols = (i - k, i) if k < 0 else (i, i + k)
            data = jnp.ones(diag, dtype)
            indices = jnp.array(np.stack([rows, cols], axis=1), index_dtype)
        else:
            cols = np.arange(N) + k
            ok = (cols >= 0) & (cols < M)
            data = jnp.array(ok.astype(np.float64)[:, None], dtype if dtype is not None else
                             ember.dtypes.canonicalize_dtype(np.float64))
            indices = jnp.array(np.where(ok, cols, M)[:, None, None], index_dtype)
        return cls((data, indices), shape=(N, M), indices_sorted=True, unique_indices=True)

    def update_layout(self, *, n_batch: int | None = None, n_dense: int | None = None,
                      on_inefficient: str | None = "error") -> "BCOO":
        """bcoo_update_layout of this array."""
        return bcoo_update_layout(self, n_batch=n_batch, n_dense=n_dense, on_inefficient=on_inefficient)

    def sum_duplicates(self, nse: int | None = None, remove_zeros: bool = True) -> "BCOO":
        """Repeated indices summed, indices sorted; with remove_zeros also the explicit zeros removed (which, as in
        JAX, cannot be differentiated)."""
        return bcoo_eliminate_zeros(self, nse=nse) if remove_zeros else bcoo_sum_duplicates(self, nse=nse)

    def sort_indices(self) -> "BCOO":
        """bcoo_sort_indices of this array."""
        return bcoo_sort_indices(self)

    def todense(self) -> Any:
        """The dense array (bcoo_todense)."""
        return bcoo_todense(self)

    def transpose(self, axes: Sequence[int] | None = None) -> "BCOO":
        """The array with its dimensions permuted (reversed by default); see bcoo_transpose."""
        perm = tuple(range(self.ndim))[::-1] if axes is None else tuple(operator.index(a) for a in axes)
        out = bcoo_transpose(self, permutation=perm)
        sparse_perm = [p - self.n_batch for p in perm[self.n_batch:self.n_batch + self.n_sparse]]
        is_sorted = self.indices_sorted and sparse_perm == list(range(self.n_sparse))
        return BCOO(out._bufs, shape=out.shape, indices_sorted=is_sorted, unique_indices=self.unique_indices)

    def astype(self, dtype: Any) -> "BCOO":
        """The array with its data converted to dtype (indices unchanged)."""
        return BCOO((self.data.astype(dtype), self.indices), shape=self.shape, indices_sorted=self.indices_sorted,
                    unique_indices=self.unique_indices)

    def tree_flatten(self) -> tuple[tuple[Any, Any], dict[str, Any]]:
        return (self.data, self.indices), self._info._asdict()

    @classmethod
    def tree_unflatten(cls, aux_data: dict[str, Any], children: Any) -> "BCOO":
        obj = object.__new__(cls)
        obj.data, obj.indices = children
        if aux_data.keys() != {"shape", "indices_sorted", "unique_indices"}:
            raise ValueError(f"BCOO.tree_unflatten: invalid aux_data={aux_data}")
        obj.__dict__.update(**aux_data)
        return obj

    def _with_shape(self, shape: Shape) -> "BCOO":
        obj = object.__new__(type(self))
        obj.__dict__.update(self.__dict__)
        obj.shape = tuple(shape)
        return obj


def _to_member(cont: Any, _: Any, mat: BCOO, axis: Any) -> BCOO:
    """The member of mat that vmap maps along axis (a batch dimension), as JAX's registration of BCOO."""
    if axis is None:
        return mat
    if not 0 <= axis < mat.n_batch:
        raise ValueError(f"Cannot map in_axis={axis} for BCOO array with n_batch={mat.n_batch}. in_axes for batched "
                         "BCOO operations must correspond to a batch dimension.")
    return BCOO((cont(mat.data, axis), cont(mat.indices, axis)), shape=mat.shape[:axis] + mat.shape[axis + 1:],
                indices_sorted=mat.indices_sorted, unique_indices=mat.unique_indices)


def _from_member(cont: Any, size: int, elt: BCOO, axis: Any) -> BCOO:
    """The BCOO array of size members elt stacked along axis (at most n_batch: batch dimensions lead)."""
    if axis is None:
        return elt
    if not 0 <= axis <= elt.n_batch:
        raise ValueError(f"BCOO: cannot add out_axis={axis} for BCOO array with n_batch={elt.n_batch}. BCOO batch "
                         "axes must be a contiguous block of leading dimensions.")
    return BCOO((cont(size, elt.data, axis), cont(size, elt.indices, axis)),
                shape=elt.shape[:axis] + (size,) + elt.shape[axis:], indices_sorted=elt.indices_sorted,
                unique_indices=elt.unique_indices)


register_vmappable(BCOO, int, int, _to_member, _from_member, None)


def _bcoo_set_nse(mat: BCOO, nse: int) -> BCOO:
    return _set_nse(mat, operator.index(nse))


# ------------------------------------------------------------------------------------------------------------------
# The primitives (JAX's names and params), each defined by its decomposition (_primitive.py)

def _bcoo(data: Any, indices: Any, spinfo: SparseInfo) -> "BCOO":
    return BCOO((data, indices), **spinfo._asdict())


bcoo_todense_p = sparse_primitive(
    "bcoo_todense", lambda data, indices, *, spinfo: _todense(data, indices, spinfo.shape))
bcoo_fromdense_p = sparse_primitive(
    "bcoo_fromdense", lambda mat, *, nse, n_batch, n_dense, index_dtype: _fromdense(mat, nse, n_batch, n_dense,
                                                                                    index_dtype), True)
bcoo_extract_p = sparse_primitive("bcoo_extract", lambda indices, arr, *, assume_unique: _extract(
    indices, arr, assume_unique=assume_unique))
bcoo_transpose_p = sparse_primitive("bcoo_transpose", lambda data, indices, *, permutation, spinfo: _transpose(
    _bcoo(data, indices, spinfo), permutation)._bufs, True)
bcoo_dot_general_p = sparse_primitive(
    "bcoo_dot_general", lambda lhs_data, lhs_indices, rhs, *, dimension_numbers, preferred_element_type,
    lhs_spinfo: _dot_general_sparse_dense(_bcoo(lhs_data, lhs_indices, lhs_spinfo), rhs, dimension_numbers,
                                          preferred_element_type))
bcoo_spdot_general_p = sparse_primitive(
    "bcoo_spdot_general", lambda lhs_data, lhs_indices, rhs_data, rhs_indices, *, lhs_spinfo, rhs_spinfo,
    dimension_numbers, preferred_element_type: _spdot_general(
        _bcoo(lhs_data, lhs_indices, lhs_spinfo), _bcoo(rhs_data, rhs_indices, rhs_spinfo), dimension_numbers,
        preferred_element_type)._bufs, True)
bcoo_dot_general_sampled_p = sparse_primitive("bcoo_dot_general_sampled", _dot_general_sampled)
bcoo_sort_indices_p = sparse_primitive("bcoo_sort_indices", lambda data, indices, *, spinfo: _sort_indices(
    _bcoo(data, indices, spinfo))._bufs, True)
bcoo_sum_duplicates_p = sparse_primitive("bcoo_sum_duplicates", lambda data, indices, *, spinfo, nse: _sum_duplicates(
    data, indices, spinfo.shape, nse, "bcoo_sum_duplicates"), True)


# ------------------------------------------------------------------------------------------------------------------
# Each operation runs as one compiled computation (its static arguments in the cache key), as JAX's primitives
# lower as a whole: eagerly that is one compilation per signature instead of one per array operation inside it.
# Under an enclosing transformation it is an ordinary nested jit.

def _hashable(value: Any) -> Any:
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, np.ndarray):
        return tuple(_hashable(v) for v in value.tolist())
    return value


def _compiled(fn: Any, *static: str) -> Any:
    signature = inspect.signature(fn)
    jitted = ember.jit(fn, static_argnames=static)
    sparse = [name for name, p in signature.parameters.items() if str(p.annotation).strip("'\"") == "BCOO"]

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"{fn.__name__}: {err}") from None
        for name in sparse:  # (checked here: under jit a wrong argument would be reported as a Tracer)
            if name in bound.arguments:
                _is_bcoo(fn.__name__, bound.arguments[name])
        named = {k: _hashable(v) if k in static else v for k, v in bound.arguments.items()}
        return jitted(**named)
    return run


_extract = _compiled(_extract, "assume_unique")
_distinct_count = _compiled(_distinct_count, "shape")
_sum_duplicates = _compiled(_sum_duplicates, "shape", "nse", "api")
_update_layout = _compiled(_update_layout, "n_batch", "n_dense")
bcoo_reduce_sum = _compiled(bcoo_reduce_sum, "axes")
bcoo_multiply_dense = _compiled(bcoo_multiply_dense)
bcoo_multiply_sparse = _compiled(bcoo_multiply_sparse)
bcoo_broadcast_in_dim = _compiled(bcoo_broadcast_in_dim, "shape", "broadcast_dimensions", "sharding")
bcoo_concatenate = _compiled(bcoo_concatenate, "dimension")
bcoo_reshape = _compiled(bcoo_reshape, "new_sizes", "dimensions", "sharding")
bcoo_rev = _compiled(bcoo_rev, "dimensions")
bcoo_squeeze = _compiled(bcoo_squeeze, "dimensions")
bcoo_slice = _compiled(bcoo_slice, "start_indices", "limit_indices", "strides")
bcoo_dynamic_slice = _compiled(bcoo_dynamic_slice, "slice_sizes")
bcoo_gather = _compiled(bcoo_gather, "dimension_numbers", "slice_sizes", "unique_indices", "indices_are_sorted",
                        "mode", "fill_value")
bcoo_conv_general_dilated = _compiled(bcoo_conv_general_dilated, "window_strides", "padding", "lhs_dilation",
                                      "rhs_dilation", "dimension_numbers", "feature_group_count",
                                      "batch_group_count", "precision", "preferred_element_type", "out_sharding")


__all__ = ["BCOO", "bcoo_broadcast_in_dim", "bcoo_concatenate", "bcoo_conv_general_dilated", "bcoo_dot_general",
           "bcoo_dot_general_sampled", "bcoo_dynamic_slice", "bcoo_eliminate_zeros", "bcoo_extract",
           "bcoo_fromdense", "bcoo_gather", "bcoo_multiply_dense", "bcoo_multiply_sparse", "bcoo_reduce_sum",
           "bcoo_reshape", "bcoo_rev", "bcoo_slice", "bcoo_sort_indices", "bcoo_squeeze", "bcoo_sum_duplicates",
           "bcoo_todense", "bcoo_transpose", "bcoo_update_layout", "bcoo_dot_general_p", "bcoo_dot_general_sampled_p",
           "bcoo_extract_p", "bcoo_fromdense_p", "bcoo_sort_indices_p", "bcoo_spdot_general_p",
           "bcoo_sum_duplicates_p", "bcoo_todense_p", "bcoo_transpose_p"]
