"""Oracle tests for the primitives of ember.experimental.sparse (jax.experimental.sparse's): each has a Case below,
binding the primitive with fixed indices and differentiable data (tests/test_sparse.py tests the sparse operations
themselves, with their layouts and errors)."""
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse as js

from ember.experimental import sparse
from ember.experimental.sparse.coo import COOInfo
from ember.experimental.sparse.util import SparseInfo
from oracle import Case, oracle_tests

FI = ["float32", "float64", "int32"]
F = ["float32", "float64"]
SHAPE = (3, 4)
INFO = SparseInfo(SHAPE)
DN = (((1,), (0,)), ((), ()))
IDX = np.array([[0, 1], [2, 3], [1, 0], [2, 1]], np.int32)        # BCOO indices: unique, unsorted
DUP = np.array([[0, 1], [2, 3], [0, 1], [1, 0]], np.int32)        # a repeated index
RHS_IDX = np.array([[1, 0], [3, 1], [0, 1]], np.int32)            # of a (4, 2) matrix
ROW, COL = IDX[:, 0].copy(), IDX[:, 1].copy()                      # COO
CSR_DATA_ORDER = np.array([0, 2, 3, 1])                            # IDX's elements in row order
INDICES, INDPTR = np.array([1, 0, 1, 3], np.int32), np.array([0, 1, 2, 4], np.int32)   # CSR and BCSR


def _dense(data, idx=IDX, shape=SHAPE):
    out = np.zeros(shape, data.dtype)
    np.add.at(out, (idx[:, 0], idx[:, 1]), data)
    return out


def _csr_dense(data):
    return _dense(data, IDX[CSR_DATA_ORDER])


def _js_bcoo(data, idx=IDX, shape=SHAPE):
    return js.BCOO((data, idx), shape=shape)


def _jax_dense(data, idx=IDX, shape=SHAPE):
    """The dense matrix in JAX: the derivative oracle where JAX's own sparse primitive has none (spdot's transpose,
    the COO/CSR primitives' second derivatives) or a wrong one (coo_matvec and csr_matmat with transpose=True
    differentiate with respect to data at the untransposed positions in JAX 0.10.2)."""
    return jnp.zeros(shape, data.dtype).at[idx[:, 0], idx[:, 1]].add(data)


def _sum_dup_np(d):
    return np.stack([d[0] + d[2], d[3], d[1]])


# spsolve's square system: a diagonally dominant CSR matrix of 3 rows (the solve is scipy's, in a callback)
SQ_INDICES, SQ_INDPTR = np.array([0, 2, 0, 1, 1, 2], np.int32), np.array([0, 2, 4, 6], np.int32)
SQ_BASE = np.array([4.0, 0.5, -0.5, 3.0, 1.0, 5.0])


def _sq_dense(data):
    out = np.zeros((3, 3), data.dtype)
    out[[0, 0, 1, 1, 2, 2], SQ_INDICES] = data
    return out


def _jax_spsolve(data, b):
    """JAX's dense solve of the same system: the oracle of the derivatives too (JAX's spsolve has no second
    derivative: its JVP's transpose with respect to data is a NotImplementedError; tests/test_sparse.py compares
    first derivatives with JAX's spsolve itself)."""
    rows = np.array([0, 0, 1, 1, 2, 2])
    dense = jnp.zeros((3, 3), data.dtype).at[rows, SQ_INDICES].set(data + SQ_BASE.astype(data.dtype))
    return jnp.linalg.solve(dense, b)


def _spsolve_ref(data, b):
    """The solution with the data shifted to the dominant base (the Case's random data keeps it invertible)."""
    return np.linalg.solve(_sq_dense(data + SQ_BASE.astype(data.dtype)), b).astype(b.dtype)


CASES = [
    # todense of a dense (traced) array: the identity, which sparsify makes dense where its input is sparse
    Case("todense", lambda x: sparse.todense(x) * 2, lambda x: (x * 2).astype(x.dtype), [((2, 3),), ((4,),)], FI,
         jax=lambda x: js.todense(x) * 2),
    Case("bcoo_todense", lambda d: sparse.bcoo_todense_p.bind(d, IDX, spinfo=INFO), _dense, [((4,),)], F,
         jax=lambda d: _js_bcoo(d).todense()),
    Case("bcoo_fromdense", lambda m: sparse.bcoo_fromdense_p.bind(m, nse=12, n_batch=0, n_dense=0,
                                                                  index_dtype=np.dtype(np.int32))[0],
         lambda m: m.reshape(-1), [(SHAPE,)], F, jax=lambda m: js.BCOO.fromdense(m, nse=12).data),
    Case("bcoo_extract", lambda a: sparse.bcoo_extract_p.bind(IDX, a, assume_unique=True),
         lambda a: a[IDX[:, 0], IDX[:, 1]], [(SHAPE,)], F,
         jax=lambda a: js.bcoo_extract(_js_bcoo(np.zeros(4, a.dtype)), a, assume_unique=True).data),
    Case("bcoo_transpose", lambda d: sparse.bcoo_todense(sparse.BCOO(sparse.bcoo_transpose_p.bind(
        d, IDX, permutation=(1, 0), spinfo=INFO), shape=SHAPE[::-1])), lambda d: _dense(d).T, [((4,),)], F,
         jax=lambda d: _js_bcoo(d).T.todense()),
    Case("bcoo_dot_general", lambda d, r: sparse.bcoo_dot_general_p.bind(
        d, IDX, r, dimension_numbers=DN, preferred_element_type=None, lhs_spinfo=INFO),
         lambda d, r: _dense(d) @ r, [((4,), (4, 2))], F, jax=lambda d, r: _js_bcoo(d) @ r),
    Case("bcoo_spdot_general", lambda a, b: sparse.BCOO(sparse.bcoo_spdot_general_p.bind(
        a, IDX, b, RHS_IDX, lhs_spinfo=INFO, rhs_spinfo=SparseInfo((4, 2)), dimension_numbers=DN,
        preferred_element_type=None), shape=(3, 2)).todense(),
         lambda a, b: _dense(a) @ _dense(b, RHS_IDX, (4, 2)), [((4,), (3,))], F,
         jax=lambda a, b: _jax_dense(a) @ _jax_dense(b, RHS_IDX, (4, 2))),
    Case("bcoo_dot_general_sampled", lambda a, b: sparse.bcoo_dot_general_sampled_p.bind(a, b, IDX,
                                                                                         dimension_numbers=DN),
         lambda a, b: (a @ b)[IDX[:, 0], IDX[:, 1]], [((3, 5), (5, 4))], F,
         jax=lambda a, b: js.bcoo_dot_general_sampled(a, b, IDX, dimension_numbers=DN)),
    Case("bcoo_sort_indices", lambda d: sparse.bcoo_sort_indices_p.bind(d, IDX, spinfo=INFO)[0],
         lambda d: d[CSR_DATA_ORDER], [((4,),)], F, jax=lambda d: _js_bcoo(d).sort_indices().data),
    Case("bcoo_sum_duplicates", lambda d: sparse.bcoo_sum_duplicates_p.bind(d, DUP, spinfo=INFO, nse=3)[0],
         _sum_dup_np, [((4,),)], F, jax=lambda d: js.bcoo_sum_duplicates(_js_bcoo(d, DUP), nse=3).data),
    Case("coo_todense", lambda d: sparse.coo_todense_p.bind(d, ROW, COL, spinfo=COOInfo(SHAPE)), _dense, [((4,),)],
         F, jax=_jax_dense),
    Case("coo_fromdense", lambda m: sparse.coo_fromdense_p.bind(m, nse=12, index_dtype=np.dtype(np.int32))[0],
         lambda m: m.reshape(-1), [(SHAPE,)], F, jax=lambda m: js.COO.fromdense(m, nse=12).data),
    Case("coo_matvec", lambda d, v: sparse.coo_matvec_p.bind(d, ROW, COL, v, spinfo=COOInfo(SHAPE), transpose=True),
         lambda d, v: _dense(d).T @ v, [((4,), (3,))], F,
         jax=lambda d, v: _jax_dense(d).T @ v),
    Case("coo_matmat", lambda d, b: sparse.coo_matmat_p.bind(d, ROW, COL, b, spinfo=COOInfo(SHAPE), transpose=False),
         lambda d, b: _dense(d) @ b, [((4,), (4, 2))], F,
         jax=lambda d, b: _jax_dense(d) @ b),
    Case("csr_todense", lambda d: sparse.csr_todense_p.bind(d, INDICES, INDPTR, shape=SHAPE), _csr_dense, [((4,),)],
         F, jax=lambda d: _jax_dense(d, IDX[CSR_DATA_ORDER])),
    Case("csr_fromdense", lambda m: sparse.csr_fromdense_p.bind(m, nse=12, index_dtype=np.dtype(np.int32))[0],
         lambda m: m.reshape(-1), [(SHAPE,)], F, jax=lambda m: js.CSR.fromdense(m, nse=12).data),
    Case("spsolve", lambda d, b: sparse.linalg.spsolve_p.bind(d + SQ_BASE.astype(d.dtype), SQ_INDICES, SQ_INDPTR, b,
                                                          tol=1e-6, reorder=1),
         _spsolve_ref, [((6,), (3,))], F, jax=_jax_spsolve),
    Case("csr_matvec", lambda d, v: sparse.csr_matvec_p.bind(d, INDICES, INDPTR, v, shape=SHAPE, transpose=False),
         lambda d, v: _csr_dense(d) @ v, [((4,), (4,))], F,
         jax=lambda d, v: _jax_dense(d[np.argsort(CSR_DATA_ORDER)]) @ v),
    Case("csr_matmat", lambda d, b: sparse.csr_matmat_p.bind(d, INDICES, INDPTR, b, shape=SHAPE, transpose=True),
         lambda d, b: _csr_dense(d).T @ b, [((4,), (3, 2))], F,
         jax=lambda d, b: _jax_dense(d[np.argsort(CSR_DATA_ORDER)]).T @ b),
    Case("bcsr_todense", lambda d: sparse.bcsr_todense_p.bind(d, INDICES, INDPTR, spinfo=INFO), _csr_dense,
         [((4,),)], F, jax=lambda d: js.BCSR((d, INDICES, INDPTR), shape=SHAPE).todense()),
    Case("bcsr_fromdense", lambda m: sparse.bcsr_fromdense_p.bind(m, nse=12, n_batch=0, n_dense=0,
                                                                  index_dtype=np.dtype(np.int32))[0],
         lambda m: m.reshape(-1), [(SHAPE,)], F, jax=lambda m: js.BCSR.fromdense(m, nse=12).data),
    Case("bcsr_extract", lambda a: sparse.bcsr_extract_p.bind(INDICES, INDPTR, a),
         lambda a: a[IDX[CSR_DATA_ORDER, 0], IDX[CSR_DATA_ORDER, 1]], [(SHAPE,)], F,
         jax=lambda a: js.bcsr_extract(INDICES, INDPTR, a)),
    Case("bcsr_dot_general", lambda d, r: sparse.bcsr_dot_general_p.bind(
        d, INDICES, INDPTR, r, dimension_numbers=DN, preferred_element_type=None, lhs_spinfo=INFO),
         lambda d, r: _csr_dense(d) @ r, [((4,), (4, 2))], F,
         jax=lambda d, r: js.bcsr_dot_general(js.BCSR((d, INDICES, INDPTR), shape=SHAPE), r, dimension_numbers=DN)),
]

test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)
