"""ember.experimental.sparse against jax.experimental.sparse (the oracle): each BCOO operation's data, indices,
nse, layout and dtypes, eagerly and under jit, vmap and grad; sparsify and the sparse transforms; and the errors
for bad input.

Each comparison is one function of a namespace `L` (the sparse module, numpy, jit, vmap, ... of one library), run
with ember's and with JAX's (JAX's results are recorded: tests/recorded.py)."""
import types

import numpy as np
import pytest

import jax
import jax.numpy as jjnp
from jax.experimental import sparse as js

import ember
import ember.numpy as jnp
from ember.experimental import sparse as es
from recorded import jax_result


def _namespace(lib):
    """One library's names for the comparisons (ember's or JAX's)."""
    if lib == "jax":
        return types.SimpleNamespace(sparse=js, np=jjnp, jit=jax.jit, vmap=jax.vmap, grad=jax.grad, lax=jax.lax,
                                     asarray=jjnp.asarray, is_ember=False)
    return types.SimpleNamespace(sparse=es, np=jnp, jit=ember.jit, vmap=ember.vmap, grad=ember.grad, lax=ember.lax,
                                 asarray=jnp.asarray, is_ember=True)


def _plain(value):
    """A result as plain data (a sparse array as a dict of its facts), for the records and the comparison."""
    if isinstance(value, (js.JAXSparse, es.JAXSparse)):
        fields = {"kind": type(value).__name__, "shape": tuple(value.shape), "nse": int(value.nse)}
        for name in ("data", "indices", "indptr", "row", "col"):
            if hasattr(value, name):
                fields[name] = np.asarray(getattr(value, name))
        for name in ("n_batch", "n_dense", "indices_sorted", "unique_indices", "rows_sorted", "cols_sorted"):
            if hasattr(value, name):
                fields[name] = getattr(value, name)
        return fields
    if isinstance(value, (tuple, list)):
        return tuple(_plain(v) for v in value)
    return np.asarray(value)


def _compare(got, want, exact, rtol, atol, where="result"):
    if isinstance(want, dict):
        got = _plain(got)
        assert isinstance(got, dict), f"{where}: expected a sparse array, got {type(got)}"
        assert set(got) == set(want), (where, set(got) ^ set(want))
        for key, w in want.items():
            if isinstance(w, np.ndarray):
                _compare(got[key], w, exact or key != "data", rtol, atol, f"{where}.{key}")
            else:
                assert got[key] == w, (where, key, got[key], w)
    elif isinstance(want, tuple):
        assert isinstance(got, (tuple, list)) and len(got) == len(want), (where, got)
        for i, (g, w) in enumerate(zip(got, want)):
            _compare(g, w, exact, rtol, atol, f"{where}[{i}]")
    else:
        got = np.asarray(got)
        assert got.dtype == want.dtype, (where, got.dtype, want.dtype)
        assert got.shape == want.shape, (where, got.shape, want.shape)
        if exact:
            np.testing.assert_array_equal(got, want, err_msg=where)
        else:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=where)


def check(fn, exact=False, rtol=1e-5, atol=1e-5):
    """fn(L) with ember's names equals fn(L) with JAX's: the same arrays (values, dtypes, shapes) and sparse arrays
    (kind, shape, nse, layout, flags, indices exactly, data within rtol/atol unless exact)."""
    got = fn(_namespace("ember"))
    want = jax_result(lambda: _plain(fn(_namespace("jax"))))
    _compare(got, want, exact, rtol, atol)
    return got


def _sparse_dense(shape, density=0.4, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape).astype(dtype)
    x[rng.random(shape) > density] = 0
    return x


def _dense(shape, seed=1):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


LAYOUTS = [((3, 4), 0, 0), ((3, 4), 1, 0), ((3, 4), 0, 1), ((2, 3, 4), 1, 0), ((2, 3, 4), 1, 1),
           pytest.param((2, 3, 4), 2, 0, marks=pytest.mark.slow), pytest.param((2, 3, 4), 0, 0, marks=pytest.mark.slow)]


# ---------------------------------------------------------------------------------------------------------------------
# 1. BCOO

@pytest.mark.parametrize("shape,n_batch,n_dense", LAYOUTS)
def test_fromdense_todense_extract_as_jax(shape, n_batch, n_dense):
    x = _sparse_dense(shape)
    y = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)

    def f(L):
        m = L.sparse.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
        padded = L.jit(lambda a: L.sparse.BCOO.fromdense(a, nse=m.nse + 2, n_batch=n_batch, n_dense=n_dense,
                                                         index_dtype=np.int16))(x)
        return m, m.todense(), L.jit(L.sparse.bcoo_todense)(m), L.sparse.bcoo_extract(m, L.asarray(y)), padded
    check(f, exact=True)


def test_construction_repr_and_pytree():
    x = _sparse_dense((3, 4))
    m = es.BCOO.fromdense(x)
    assert repr(m) == f"BCOO(float32[3, 4], nse={m.nse})"
    assert repr(es.BCOO.fromdense(x, n_batch=1)) == "BCOO(float32[3, 4], nse=2, n_batch=1)"
    leaves, tree = ember.tree_util.tree_flatten(m)
    assert len(leaves) == 2
    back = ember.tree_util.tree_unflatten(tree, leaves)
    assert back.shape == m.shape and back.indices_sorted and back.unique_indices
    assert (m.ndim, m.size, len(m), m.dtype) == (2, 12, 3, np.float32)
    built = es.BCOO((m.data, m.indices), shape=(3, 4))
    np.testing.assert_array_equal(np.asarray(built.todense()), x)
    assert not built.indices_sorted
    with pytest.raises(ValueError, match=rf"BCOO: data of shape \({m.nse - 1},\) does not fit nse={m.nse}"):
        es.BCOO((m.data[1:], m.indices), shape=(3, 4))
    with pytest.raises(TypeError, match="BCOO: indices must be integers, got dtype float32"):
        es.BCOO((m.data, m.indices.astype(np.float32)), shape=(3, 4))
    with pytest.raises(ValueError, match=r"do not fit the array shape \(3,\)"):
        es.BCOO((m.data, m.indices), shape=(3,))
    with pytest.raises(TypeError, match="bcoo_todense: expected a BCOO array, got ndarray"):
        es.bcoo_todense(x)


def test_fromdense_needs_nse_under_jit():
    x = _sparse_dense((3, 4))
    with pytest.raises(ember.errors.ConcretizationTypeError, match="bcoo_fromdense: nse .* pass nse"):
        ember.jit(es.BCOO.fromdense)(x)
    with pytest.raises(ValueError, match=r"bcoo_fromdense: n_batch=2 and n_dense=1 .* mat.ndim=2"):
        es.bcoo_fromdense(x, n_batch=2, n_dense=1)


def test_empty_eye_and_scipy():
    scipy_sparse = pytest.importorskip("scipy.sparse")
    s = scipy_sparse.random(4, 5, density=0.4, random_state=1, dtype=np.float32)
    cases = [dict(), dict(n_batch=1), dict(n_dense=1), dict(nse=3)]
    eyes = [(3, 4, 0, 0), (4, 3, 1, 0), (4, 3, -2, 0), (3, 4, 1, 1), (3, 4, -1, 1), (3, 4, 5, 0)]
    check(lambda L: (*(L.sparse.empty((3, 4), np.float32, **kw) for kw in cases),
                     *(L.sparse.eye(n, m, k, np.float32, n_batch=nb) for n, m, k, nb in eyes),
                     L.sparse.BCOO.from_scipy_sparse(s)), exact=True)


@pytest.mark.parametrize("shape,n_batch,n_dense", LAYOUTS)
def test_transpose_as_jax(shape, n_batch, n_dense):
    x = _sparse_dense(shape)
    nd = len(shape)
    n_sparse = nd - n_batch - n_dense
    perm = (*reversed(range(n_batch)), *reversed(range(n_batch, n_batch + n_sparse)),
            *range(n_batch + n_sparse, nd))

    def f(L):
        m = L.sparse.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
        return (m.transpose(perm), L.sparse.bcoo_transpose(m, permutation=perm),
                *((m.T,) if n_batch == n_dense == 0 else ()))
    check(f, exact=True)


def test_transpose_errors():
    m = es.BCOO.fromdense(_sparse_dense((2, 3, 4)), n_batch=1)
    with pytest.raises(NotImplementedError, match="bcoo_transpose: .* cannot permute batch axes with non-batch"):
        m.transpose((1, 0, 2))
    with pytest.raises(TypeError, match=r"bcoo_transpose: permutation \(0, 1\) is not a permutation"):
        es.bcoo_transpose(m, permutation=(0, 1))


DOTS = [  # (lhs shape, rhs shape, dimension numbers, lhs n_batch)
    ((3, 4), (4, 2), (((1,), (0,)), ((), ())), 0),
    ((3, 4), (4,), (((1,), (0,)), ((), ())), 0),
    ((3, 4), (2, 3), (((0,), (1,)), ((), ())), 0),
    ((3, 4), (4, 2), (((1,), (0,)), ((), ())), 1),
    ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,))), 1),
    ((2, 3, 4), (4, 5), (((2,), (0,)), ((), ())), 1),
    ((2, 3, 4), (2, 5), (((0,), (0,)), ((), ())), 1),
    ((2, 3, 4), (3, 4), (((1, 2), (0, 1)), ((), ())), 0),
    ((3, 4), (4, 2), (((1,), (0,)), ((), ())), 2),
]


@pytest.mark.parametrize("lhs_shape,rhs_shape,dn,n_batch", DOTS)
def test_dot_general_sparse_dense_as_jax(lhs_shape, rhs_shape, dn, n_batch):
    x, y = _sparse_dense(lhs_shape), _dense(rhs_shape)
    swapped = tuple(d[::-1] for d in dn)

    def f(L):
        m = L.sparse.BCOO.fromdense(x, n_batch=n_batch)
        dot = L.sparse.bcoo_dot_general
        return (dot(m, L.asarray(y), dimension_numbers=dn),
                L.jit(lambda a, b: dot(a, b, dimension_numbers=dn))(m, y),
                dot(L.asarray(y), m, dimension_numbers=swapped))
    check(f)


def test_dot_general_with_dense_dims_and_matmul():
    x, y, v = _sparse_dense((3, 4, 2)), _dense((4, 5)), _dense((4,))
    x2 = _sparse_dense((3, 4))
    dn = (((1,), (0,)), ((), ()))

    def f(L):
        m = L.sparse.BCOO.fromdense(x, n_dense=1)
        a = L.sparse.BCOO.fromdense(x2)
        return (L.sparse.bcoo_dot_general(m, L.asarray(y), dimension_numbers=dn), a @ L.asarray(v),
                L.asarray(v[:3]) @ a)
    want = check(f)
    np.testing.assert_array_equal(np.asarray(v[:3] @ es.BCOO.fromdense(x2)), np.asarray(want[2]))  # (numpy defers)
    m = es.BCOO.fromdense(x, n_dense=1)
    with pytest.raises(NotImplementedError, match="bcoo_dot_general: contracting over dense dimensions"):
        es.bcoo_dot_general(m, y[:2], dimension_numbers=(((2,), (0,)), ((), ())))
    with pytest.raises(TypeError, match="bcoo_dot_general: .*"):
        es.bcoo_dot_general(m, np.ones((5,), np.float32), dimension_numbers=dn)


SPDOTS = [
    ((3, 4), (4, 5), (((1,), (0,)), ((), ())), 0, 0),
    ((3, 4), (5, 4), (((1,), (1,)), ((), ())), 0, 0),
    ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,))), 1, 1),
    ((2, 3, 4), (4, 5), (((2,), (0,)), ((), ())), 1, 0),
    pytest.param((4,), (4, 3), (((0,), (0,)), ((), ())), 0, 0, marks=pytest.mark.slow),
    pytest.param((3, 4), (4,), (((1,), (0,)), ((), ())), 0, 0, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("lhs_shape,rhs_shape,dn,lb,rb", SPDOTS)
def test_dot_general_sparse_sparse_as_jax(lhs_shape, rhs_shape, dn, lb, rb):
    x, y = _sparse_dense(lhs_shape, seed=1), _sparse_dense(rhs_shape, seed=2)

    def f(L):
        a, b = L.sparse.BCOO.fromdense(x, n_batch=lb), L.sparse.BCOO.fromdense(y, n_batch=rb)
        return (L.sparse.bcoo_dot_general(a, b, dimension_numbers=dn),
                L.jit(lambda p, q: L.sparse.bcoo_dot_general(p, q, dimension_numbers=dn))(a, b))
    check(f)


def test_dot_general_sampled_as_jax():
    a, b, x = _dense((3, 5)), _dense((5, 4), seed=2), _sparse_dense((3, 4))
    dn = (((1,), (0,)), ((), ()))
    check(lambda L: L.sparse.bcoo_dot_general_sampled(L.asarray(a), L.asarray(b), L.sparse.BCOO.fromdense(x).indices,
                                                      dimension_numbers=dn))


@pytest.mark.parametrize("shape,n_batch,n_dense", LAYOUTS)
def test_reduce_sum_as_jax(shape, n_batch, n_dense):
    x = _sparse_dense(shape)

    def f(L):
        m = L.sparse.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
        return (*(L.sparse.bcoo_reduce_sum(m, axes=axes)
                  for axes in [(0,), (len(shape) - 1,), tuple(range(len(shape)))]), m.sum(), m.sum(0))
    check(f)


def test_sum_duplicates_sort_indices_and_eliminate_zeros_as_jax():
    data = np.array([1., 2., 0., 3., 4.], np.float32)
    indices = np.array([[2, 1], [0, 3], [1, 1], [2, 1], [3, 0]], np.int32)  # a repeat, an explicit 0, out of range
    ones = np.ones((3, 4), np.float32)
    bdata, bindices = np.stack([data, 2 * data]), indices[None]  # batched, the indices broadcast

    def f(L):
        m = L.sparse.BCOO((L.asarray(data), L.asarray(indices)), shape=(3, 4))
        b = L.sparse.BCOO((L.asarray(bdata), L.asarray(bindices)), shape=(2, 3, 4))
        return (m.sort_indices(), L.sparse.bcoo_sum_duplicates(m), L.sparse.bcoo_sum_duplicates(m, nse=6),
                m.sum_duplicates(), m.sum_duplicates(remove_zeros=False),
                L.jit(lambda a: L.sparse.bcoo_sum_duplicates(a, nse=2))(m),
                L.sparse.bcoo_extract(m, L.asarray(ones), assume_unique=False),
                L.sparse.bcoo_sum_duplicates(b), b.sort_indices())
    check(f, exact=True)
    with pytest.raises(ember.errors.ConcretizationTypeError, match="bcoo_sum_duplicates: nse .* pass nse"):
        ember.jit(es.bcoo_sum_duplicates)(es.BCOO((data, indices), shape=(3, 4)))


@pytest.mark.parametrize("shape,n_batch,n_dense", LAYOUTS)
def test_update_layout_as_jax(shape, n_batch, n_dense):
    x = _sparse_dense(shape)
    layouts = [(nb, nd) for nb in range(len(shape) + 1) for nd in range(len(shape) + 1 - nb)]

    def f(L):
        m = L.sparse.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
        return tuple(m.update_layout(n_batch=nb, n_dense=nd, on_inefficient=None) for nb, nd in layouts)
    check(f, exact=True)
    if n_batch < len(shape) and shape[n_batch] > 1:
        m = es.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
        with pytest.raises(es.SparseEfficiencyError, match="increasing n_batch"):
            m.update_layout(n_batch=n_batch + 1)
        with pytest.warns(es.SparseEfficiencyWarning, match="increasing n_batch"):
            m.update_layout(n_batch=n_batch + 1, on_inefficient="warn")
        with pytest.warns(es.SparseEfficiencyWarning, match="increasing n_batch"):  # (again: not only when traced)
            m.update_layout(n_batch=n_batch + 1, on_inefficient="warn")


@pytest.mark.parametrize("shape,n_batch,n_dense", LAYOUTS)
def test_structural_ops_as_jax(shape, n_batch, n_dense):
    x = _sparse_dense(shape)
    nd = len(shape)
    limit = list(shape)
    strides = [1] * (nd - 1) + [2]
    sizes = [1] + list(shape[1:-1]) + [2]
    starts = [1] + [0] * (nd - 2) + [1]

    def f(L):
        S = L.sparse
        m = S.BCOO.fromdense(x, n_batch=n_batch, n_dense=n_dense)
        first = S.bcoo_slice(m, start_indices=[0] * nd, limit_indices=[1] + limit[1:])
        return (S.bcoo_rev(m, tuple(range(nd))), S.bcoo_slice(m, start_indices=[1] + [0] * (nd - 1),
                                                               limit_indices=limit),
                S.bcoo_slice(m, start_indices=[0] * nd, limit_indices=limit, strides=strides),
                S.bcoo_dynamic_slice(m, starts, sizes),
                L.jit(lambda a, i: S.bcoo_dynamic_slice(a, [i] + starts[1:], sizes))(m, 1),
                S.bcoo_concatenate([m, m], dimension=0), S.bcoo_squeeze(first, dimensions=(0,)),
                S.bcoo_broadcast_in_dim(m, shape=(1, *shape), broadcast_dimensions=tuple(range(1, nd + 1))))
    check(f)


def test_reshape_as_jax():
    x, x3 = _sparse_dense((3, 4)), _sparse_dense((2, 3, 4))

    def f(L):
        m = L.sparse.BCOO.fromdense(x)
        b = L.sparse.BCOO.fromdense(x3, n_batch=1)
        return (*(L.sparse.bcoo_reshape(m, new_sizes=new) for new in [(12,), (2, 6), (4, 3), (2, 2, 3)]),
                m.reshape((6, 2)), L.sparse.bcoo_reshape(b, new_sizes=(2, 12)))
    check(f, exact=True)
    with pytest.raises(ValueError, match="bcoo_reshape: new shape cannot mix batch and sparse"):
        es.bcoo_reshape(es.BCOO.fromdense(x3, n_batch=1), new_sizes=(3, 8))


def test_concatenate_sparse_axis_and_errors():
    x, y = _sparse_dense((3, 4), seed=1), _sparse_dense((3, 2), seed=2)
    check(lambda L: L.sparse.bcoo_concatenate([L.sparse.BCOO.fromdense(x), L.sparse.BCOO.fromdense(y)],
                                              dimension=1), exact=True)
    a, b = es.BCOO.fromdense(x), es.BCOO.fromdense(y)
    with pytest.raises(ValueError, match="bcoo_concatenate: expected operands to be a sequence of BCOO"):
        es.bcoo_concatenate([a, np.zeros((3, 4))], dimension=0)
    with pytest.raises(TypeError, match="bcoo_concatenate: "):
        es.bcoo_concatenate([a, b], dimension=0)


def test_multiply_as_jax():
    x, y, d = _sparse_dense((3, 4), seed=1), _sparse_dense((3, 4), seed=2), _dense((3, 4))
    xb, yb = _sparse_dense((2, 3, 4)), _sparse_dense((2, 3, 4), seed=3)

    def f(L):
        S = L.sparse
        a, b = S.BCOO.fromdense(x), S.BCOO.fromdense(y)
        return (S.bcoo_multiply_sparse(a, b), a * b, S.bcoo_multiply_dense(a, L.asarray(d)),
                S.bcoo_multiply_dense(a, L.asarray(d[0])), a * L.asarray(d), a * 2.0, 3.0 * a,
                S.bcoo_multiply_sparse(S.BCOO.fromdense(xb, n_batch=1), S.BCOO.fromdense(yb, n_batch=1)))
    check(f)
    with pytest.raises(NotImplementedError, match="bcoo_multiply_dense: .* sparse shape \\(3, 4\\) and dense shape"):
        es.bcoo_multiply_dense(es.BCOO.fromdense(x), np.ones((2, 3, 4), np.float32))


@pytest.mark.slow
def test_gather_and_conv_as_jax():
    x, idx = _sparse_dense((4, 5)), np.array([[2], [0], [3]], np.int32)
    sig, ker = _sparse_dense((1, 1, 8), density=0.6), _dense((1, 1, 3))

    def f(L):
        dnums = L.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
        s = L.sparse.BCOO.fromdense(sig)
        convs = [L.sparse.bcoo_conv_general_dilated(s, L.asarray(ker), window_strides=(1,), padding=padding)
                 for padding in [[(0, 0)], [(1, 2)]]]
        return (L.sparse.bcoo_gather(L.sparse.BCOO.fromdense(x), L.asarray(idx), dnums, (1, 5)),
                *convs, *(c.todense() for c in convs))
    check(f)


def test_vmap_over_bcoo_as_jax():
    x, v = _sparse_dense((3, 4, 5)), _dense((5,))

    def f(L):
        m = L.sparse.BCOO.fromdense(x, n_batch=1)
        return (L.vmap(lambda a: a @ L.asarray(v))(m), L.vmap(lambda a: a.todense())(m),
                L.vmap(lambda r: L.sparse.BCOO.fromdense(r, nse=8))(L.asarray(x)), L.vmap(lambda a: a.T)(m),
                L.vmap(lambda a, b: a * b, in_axes=(0, None))(m, L.asarray(v)))
    check(f)
    with pytest.raises(ValueError, match="Cannot map in_axis=1 for BCOO array with n_batch=1"):
        ember.vmap(lambda m: m.todense(), in_axes=1)(es.BCOO.fromdense(x, n_batch=1))


def test_grad_through_bcoo_operations_as_jax():
    x, y = _sparse_dense((3, 4)), _dense((4, 2))
    dn = (((1,), (0,)), ((), ()))

    def f(L):
        m = L.sparse.BCOO.fromdense(x)

        def loss(data, rhs):
            return (L.sparse.bcoo_dot_general(L.sparse.BCOO((data, m.indices), shape=(3, 4)), rhs,
                                              dimension_numbers=dn) ** 2).sum()
        return (*L.grad(loss, argnums=(0, 1))(m.data, L.asarray(y)),
                L.grad(lambda a: L.sparse.BCOO.fromdense(a, nse=6).todense().sum() * 2)(L.asarray(x)))
    check(f, rtol=1e-4)


# ---------------------------------------------------------------------------------------------------------------------
# 2. sparsify and the sparse transforms

SPARSIFIED = [  # (name, function of (namespace, sparse matrix, dense vector))
    ("matvec", lambda L, m, v: m @ v),
    ("vecmat", lambda L, m, v: v[:3] @ m),
    ("elementwise", lambda L, m, v: L.np.sin(m) * 2 - L.np.negative(m) * m),
    ("add_and_sum", lambda L, m, v: (m + m).sum(0)),
    ("add_two", lambda L, m, v: m + m.T.T),
    ("mul_dense_broadcast", lambda L, m, v: m * v),
    ("div_and_pow", lambda L, m, v: (m / 2.0) ** 2),
    ("transpose_reshape", lambda L, m, v: m.T.reshape(2, 6)),
    ("sum_axis", lambda L, m, v: m.sum(1)),
    ("full_sum", lambda L, m, v: m.sum()),
    ("index", lambda L, m, v: m[1:, ::2]),
    ("nested_jit", lambda L, m, v: L.jit(L.np.abs)(m)),
    ("astype", lambda L, m, v: m.astype(np.float16)),
    ("dense_plus_sparse", lambda L, m, v: m + L.np.ones((3, 4), np.float32)),
    ("concatenate", lambda L, m, v: L.np.concatenate([m, m], axis=0)),
    ("stack", lambda L, m, v: L.np.stack([m, m])),
    ("expand", lambda L, m, v: m[None]),
]


@pytest.mark.parametrize("name,fn", SPARSIFIED, ids=[s[0] for s in SPARSIFIED])
def test_sparsify_as_jax(name, fn):
    x, v = _sparse_dense((3, 4), seed=5), _dense((4,))

    def f(L):
        m = L.sparse.BCOO.fromdense(x)
        sparse_fn = L.sparse.sparsify(lambda a, w: fn(L, a, w))
        return sparse_fn(m, L.asarray(v)), L.sparse.todense(L.jit(sparse_fn)(m, L.asarray(v)))
    check(f)


def test_sparsify_errors_and_operators():
    x = _sparse_dense((3, 4))
    got = es.BCOO.fromdense(x)
    with pytest.raises(NotImplementedError, match="sparse rule for exp is not implemented because it would result "
                                                  "in dense output"):
        es.sparsify(jnp.exp)(got)
    with pytest.raises(NotImplementedError, match="sparse rule for cumsum is not implemented"):
        es.sparsify(lambda m: jnp.cumsum(m, 0))(got)
    with pytest.raises(NotImplementedError, match="Subtraction between sparse and dense array"):
        got - np.ones((3, 4), np.float32)
    with pytest.raises(NotImplementedError, match="Division by a sparse array"):
        1.0 / got
    assert [r.shape for r in got] == [(4,)] * 3

    def f(L):
        m = L.sparse.BCOO.fromdense(x)  # m * m of two arguments: two patterns multiplied (as JAX)
        return (m * m, -m, abs(m), m[1], L.sparse.sparsify(lambda a: a * a)(m), L.sparse.todense(m),
                L.sparse.todense(L.asarray(x)))
    check(f)


def test_sparse_grad_value_and_grad_and_jacobians_as_jax():
    x, v = _sparse_dense((3, 4), seed=3), _dense((4,))

    def f(L):
        m, w = L.sparse.BCOO.fromdense(x), L.asarray(v)

        def loss(a, b):
            return (L.np.sin(a @ b) ** 2).sum()

        def product(a, b):
            return a @ b
        value, grad = L.sparse.value_and_grad(loss)(m, w)
        with_aux = L.sparse.grad(lambda a: ((a @ w).sum(), 7), has_aux=True)(m)
        assert with_aux[1] == 7
        return (L.sparse.grad(loss)(m, w), *L.sparse.grad(loss, argnums=(0, 1))(m, w), value, grad,
                L.sparse.jacfwd(product)(m, w), L.sparse.jacrev(product)(m, w), L.sparse.jacobian(product)(m, w),
                with_aux[0], L.jit(L.sparse.grad(loss))(m, w))
    check(f, rtol=1e-4)


def test_random_bcoo_as_jax():
    def f(L):
        key = (ember.random.PRNGKey if L.is_ember else jax.random.PRNGKey)(3)
        return tuple(L.sparse.random_bcoo(key, (3, 4, 5), dtype=np.float32, indices_dtype=np.int32, **kw)
                     for kw in [dict(), dict(n_batch=1), dict(n_dense=1, nse=2), dict(sorted_indices=True)])
    check(f, exact=True)
    # (drawn with replacement: JAX, the oracle here in 64-bit mode, draws its integers as int64, so only the
    # properties are compared)
    m = es.random_bcoo(ember.random.PRNGKey(3), (3, 4, 5), nse=30, sorted_indices=True, unique_indices=False)
    flat = np.ravel_multi_index(tuple(np.asarray(m.indices).T), (3, 4, 5))
    assert m.indices_sorted and np.all(np.diff(flat) >= 0) and m.dtype == np.float32
    with pytest.raises(ValueError, match="random_bcoo: got nse=20, expected to be between 0 and 20"):
        es.random_bcoo(ember.random.PRNGKey(0), (4, 5), nse=20)


# ---------------------------------------------------------------------------------------------------------------------
# 3. COO, CSR, CSC and BCSR

@pytest.mark.parametrize("fmt", ["COO", "CSR", "CSC"])
def test_coo_csr_csc_as_jax(fmt):
    x, v, u, b = _sparse_dense((3, 4), seed=7), _dense((4,)), _dense((3,), seed=2), _dense((4, 2), seed=3)

    def f(L):
        cls = getattr(L.sparse, fmt)
        m = cls.fromdense(x)
        padded = cls.fromdense(x, nse=m.nse + 2)
        eyes = [L.sparse.eye(3, 4, k, np.float32, sparse_format=fmt.lower()) for k in (0, 2, -1)]
        return (m, padded, m.todense(), padded.todense(), m @ L.asarray(v), m.T @ L.asarray(u), m @ L.asarray(b),
                m.T, L.jit(lambda a, w: a @ w)(m, L.asarray(v)), *eyes,
                L.sparse.empty((3, 4), np.float32, sparse_format=fmt.lower()))
    check(f)


def test_coo_csr_functions_and_grad_as_jax():
    x, v, b = _sparse_dense((3, 4), seed=7), _dense((4,)), _dense((3, 2), seed=3)

    def f(L):
        S = L.sparse
        coo, csr = S.coo_fromdense(L.asarray(x)), S.csr_fromdense(L.asarray(x))
        grad = L.grad(lambda d: (S.csr_matvec(S.CSR((d, csr.indices, csr.indptr), shape=(3, 4)),
                                              L.asarray(v)) ** 2).sum())(csr.data)
        return (S.coo_todense(coo), S.coo_matvec(coo, L.asarray(v)), S.coo_matmat(coo, L.asarray(b), transpose=True),
                S.csr_todense(csr), S.csr_matvec(csr, L.asarray(v)), S.csr_matmat(csr, L.asarray(b), transpose=True),
                grad)
    check(f, rtol=1e-4)
    with pytest.raises(ValueError, match=r"csr_matvec: v must have shape \(4,\) for a matrix of shape \(3, 4\)"):
        es.csr_matvec(es.CSR.fromdense(x), np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"coo_fromdense: expected a 2-D array, got shape \(3,\)"):
        es.coo_fromdense(np.ones(3, np.float32))


def test_bcsr_as_jax():
    x, v = _sparse_dense((2, 3, 4), seed=4), _dense((4,))

    def f(L):
        S = L.sparse
        batched, blocked, plain = (S.BCSR.fromdense(x, n_batch=1), S.BCSR.fromdense(x, n_dense=1),
                                   S.BCSR.fromdense(x[0], nse=9))
        dn = (((1,), (0,)), ((), ()))
        return (batched, blocked, plain, batched.todense(), blocked.todense(), plain @ L.asarray(v),
                S.bcsr_dot_general(plain, L.asarray(v), dimension_numbers=dn),
                S.bcsr_concatenate([plain, plain], dimension=0), S.bcsr_extract(plain.indices, plain.indptr, x[0]),
                S.bcsr_sum_duplicates(plain), plain.to_bcoo(), S.BCSR.from_bcoo(plain.to_bcoo()),
                S.bcsr_broadcast_in_dim(plain, shape=(1, 3, 4), broadcast_dimensions=(1, 2)),
                S.empty((3, 4), np.float32, sparse_format="bcsr"), L.vmap(lambda m: m.todense())(batched))
    check(f)
    with pytest.raises(ValueError, match="bcsr_fromdense: must have 2 sparse dimensions"):
        es.bcsr_fromdense(x)


def test_todense_inside_sparsify_is_dense_as_jax():
    x = _sparse_dense((3, 4))
    check(lambda L: (L.sparse.sparsify(lambda m: L.sparse.todense(m) * 2)(L.sparse.BCOO.fromdense(x)),
                     L.sparse.sparsify(lambda m: L.np.exp(L.sparse.todense(m)))(L.sparse.BCOO.fromdense(x))))


def test_sparsify_control_flow_as_jax():
    x, v = _sparse_dense((3, 4), seed=2), _dense((4,))

    def f(L):
        m = L.sparse.BCOO.fromdense(x)
        sp = L.sparse.sparsify
        return (sp(lambda a, i: L.lax.cond(i > 0, lambda y: y * 2, lambda y: -y, a))(m, 1),
                sp(lambda a, i: L.lax.cond(i > 0, lambda y: y * 2, lambda y: -y, a))(m, 0),
                sp(lambda a: L.lax.fori_loop(0, 3, lambda j, y: y * 2, a))(m),
                sp(lambda a: L.lax.while_loop(lambda c: c[1] < 3, lambda c: (c[0] * 2, c[1] + 1), (a, 0))[0])(m))
    check(f)
    # scan over a sparse constant (JAX's sparsify fails on it): against numpy
    m = es.BCOO.fromdense(x)
    carry, ys = es.sparsify(lambda a, w: ember.lax.scan(lambda c, _: (c + a @ w, c), jnp.zeros(3, np.float32), None,
                                                        length=2))(m, v)
    np.testing.assert_allclose(np.asarray(carry), 2 * (x @ v), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(ys), np.stack([np.zeros(3), x @ v]), rtol=1e-5, atol=1e-6)
    with pytest.raises(NotImplementedError, match="sparse xs .* of scan are not supported"):
        es.sparsify(lambda a: ember.lax.scan(lambda c, r: (c, r), 0.0, a))(es.BCOO.fromdense(x))


# ---------------------------------------------------------------------------------------------------------------
# linalg.spsolve: values and first derivatives against JAX's spsolve (scipy's solve in a callback in both)
def _square_csr(n=7, seed=1):
    import scipy.sparse as ss
    a = (ss.random(n, n, density=0.35, random_state=seed, format="csr") + 4 * ss.eye(n)).tocsr().astype(np.float32)
    return a.data, a.indices.astype(np.int32), a.indptr.astype(np.int32)


def test_spsolve_as_jax():
    from jax.experimental.sparse.linalg import spsolve as jax_spsolve
    from ember.experimental.sparse.linalg import spsolve
    data, indices, indptr = _square_csr()
    b = np.random.default_rng(0).standard_normal(7).astype(np.float32)
    got, want = spsolve(data, indices, indptr, b), jax_spsolve(data, indices, indptr, b)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(ember.jit(spsolve)(data, indices, indptr, b)), np.asarray(want))
    loss = lambda lib, solve: lambda d, v: (solve(d, indices, indptr, v) ** 2).sum()  # noqa: E731
    for g, w in zip(ember.grad(loss(ember, spsolve), argnums=(0, 1))(data, b),
                    jax.grad(loss(jax, jax_spsolve), argnums=(0, 1))(data, b)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-7)
    t = np.linspace(-1, 1, data.size).astype(np.float32)
    np.testing.assert_allclose(
        np.asarray(ember.jvp(lambda d: spsolve(d, indices, indptr, b), (data,), (t,))[1]),
        np.asarray(jax.jvp(lambda d: jax_spsolve(d, indices, indptr, b), (data,), (t,))[1]), rtol=1e-5, atol=1e-7)
    # vmap: one solve per member (JAX's refuses vmap)
    bs = np.stack([b, 2 * b, -b])
    np.testing.assert_allclose(np.asarray(ember.vmap(lambda v: spsolve(data, indices, indptr, v))(bs)),
                               np.stack([np.asarray(want), 2 * np.asarray(want), -np.asarray(want)]), rtol=1e-6)


def test_spsolve_errors_as_jax():
    from ember.experimental.sparse.linalg import spsolve
    data, indices, indptr = _square_csr()
    b = np.ones(7, np.float32)
    for args, match in [((data.astype(np.int32), indices, indptr, b), "data types do not match"),
                        ((data, indices.astype(np.float32), indptr, b), "index arrays must be integer typed"),
                        ((data, indices, indptr, b[None]), "Arrays must be one-dimensional"),
                        ((data, indices, indptr[:-1], b), "Invalid CSR buffer sizes")]:
        with pytest.raises(ValueError, match=match):
            spsolve(*args)
    with pytest.raises(ValueError, match="reorder=7 not valid"):
        spsolve(data, indices, indptr, b, reorder=7)


def _symmetric(n=60, seed=0):
    rng = np.random.default_rng(seed)
    q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    a = (q * np.linspace(1, 50, n)) @ q.T
    return ((a + a.T) / 2).astype(np.float32), rng.standard_normal((n, 3)).astype(np.float32)


def test_lobpcg_standard_as_jax():
    from jax.experimental.sparse.linalg import lobpcg_standard as jax_lobpcg
    from ember.experimental.sparse.linalg import lobpcg_standard
    a, x = _symmetric()
    want_theta, want_u, _ = jax_lobpcg(a, x)
    exact = np.sort(np.linalg.eigvalsh(a.astype(np.float64)))[::-1][:3]
    for theta, u, i in (lobpcg_standard(a, x), ember.jit(lobpcg_standard)(a, x),
                        lobpcg_standard(lambda v: jnp.asarray(a) @ v, x)):
        np.testing.assert_allclose(np.asarray(theta), np.asarray(want_theta), rtol=2e-5)
        np.testing.assert_allclose(np.asarray(theta), exact, rtol=2e-5)
        overlap = np.abs(np.asarray(u).T @ np.asarray(want_u))  # (the same eigenvectors, up to sign)
        np.testing.assert_allclose(overlap, np.eye(3), atol=2e-3)
        assert 0 < int(i) <= 100
    theta, _, i = lobpcg_standard(a, x, m=3)
    assert int(i) == 3 and np.all(np.asarray(theta) <= exact + 1e-3)


def test_lobpcg_standard_errors_as_jax():
    from jax.experimental.sparse.linalg import lobpcg_standard as jax_lobpcg
    from ember.experimental.sparse.linalg import lobpcg_standard
    a, x = _symmetric(20)
    for args, match in [((a, np.ones((20, 4), np.float32)), r"expected search dim \* 5 < matrix dim \(got 20, 20\)"),
                        ((a, np.ones((20, 0), np.float32)), "must have search dim > 0, got 0"),
                        ((a[:10], x), r"A must be \(20, 20\) matrix A")]:
        with pytest.raises(ValueError, match=match):
            lobpcg_standard(*args)
        with pytest.raises(ValueError):
            jax_lobpcg(*args)
