"""ember.experimental.sparse against jax.experimental.sparse (the oracle): each BCOO operation's data, indices,
nse, layout and dtypes, eagerly and under jit, vmap and grad; sparsify and the sparse transforms; the COO, CSR, CSC
and BCSR formats; and the errors for bad input."""
import numpy as np
import pytest

import jax
import jax.numpy as jjnp
from jax.experimental import sparse as js

import ember
import ember.numpy as jnp
from ember.experimental import sparse as es

RNG = np.random.default_rng(0)


def _sparse_dense(shape, density=0.4, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape).astype(dtype)
    x[rng.random(shape) > density] = 0
    return x


def _pair(x, **kwargs):
    """The same dense x as an ember BCOO and a JAX BCOO."""
    return es.BCOO.fromdense(x, **kwargs), js.BCOO.fromdense(jjnp.asarray(x), **kwargs)


def _same_bcoo(got, want, exact=True, rtol=1e-5, atol=1e-6):
    """got (ember) has want's (JAX) shape, layout, nse, flags, dtypes, indices and data."""
    assert isinstance(got, es.BCOO), type(got)
    assert (got.shape, got.n_batch, got.n_sparse, got.n_dense, got.nse) == \
        (want.shape, want.n_batch, want.n_sparse, want.n_dense, want.nse), (got, want)
    assert (got.indices_sorted, got.unique_indices) == (want.indices_sorted, want.unique_indices)
    assert np.dtype(got.dtype) == np.dtype(want.dtype)
    assert np.dtype(got.indices.dtype) == np.dtype(want.indices.dtype)
    assert got.indices.shape == want.indices.shape and got.data.shape == want.data.shape
    np.testing.assert_array_equal(np.asarray(got.indices), np.asarray(want.indices))
    if exact:
        np.testing.assert_array_equal(np.asarray(got.data), np.asarray(want.data))
    else:
        np.testing.assert_allclose(np.asarray(got.data), np.asarray(want.data), rtol=rtol, atol=atol)


def _close(got, want, rtol=1e-5, atol=1e-5):
    assert np.dtype(got.dtype) == np.dtype(want.dtype), (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


LAYOUTS = [((3, 4), 0, 0), ((3, 4), 1, 0), ((3, 4), 0, 1), ((2, 3, 4), 1, 0), ((2, 3, 4), 1, 1), ((2, 3, 4), 2, 0),
           ((2, 3, 4), 0, 0)]


# ---------------------------------------------------------------------------------------------------------------------
# 1. BCOO

@pytest.mark.parametrize("shape,n_batch,n_dense", LAYOUTS)
def test_fromdense_todense_extract_as_jax(shape, n_batch, n_dense):
    x = _sparse_dense(shape)
    got, want = _pair(x, n_batch=n_batch, n_dense=n_dense)
    _same_bcoo(got, want)
    _close(got.todense(), want.todense())
    _close(ember.jit(es.bcoo_todense)(got), want.todense())
    y = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    _same_bcoo(es.bcoo_extract(got, y), js.bcoo_extract(want, jjnp.asarray(y)))
    # padded nse, int64-free index dtype choice, under jit
    padded = ember.jit(lambda m: es.BCOO.fromdense(m, nse=got.nse + 2, n_batch=n_batch, n_dense=n_dense,
                                                   index_dtype=np.int16))(x)
    _same_bcoo(padded, js.BCOO.fromdense(jjnp.asarray(x), nse=want.nse + 2, n_batch=n_batch, n_dense=n_dense,
                                         index_dtype=np.int16))


def test_construction_repr_and_pytree():
    x = _sparse_dense((3, 4))
    m = es.BCOO.fromdense(x)
    assert repr(m) == repr(js.BCOO.fromdense(jjnp.asarray(x)))
    assert repr(es.BCOO.fromdense(x, n_batch=1)) == "BCOO(float32[3, 4], nse=2, n_batch=1)"
    leaves, tree = ember.tree_util.tree_flatten(m)
    assert len(leaves) == 2
    back = ember.tree_util.tree_unflatten(tree, leaves)
    assert back.shape == m.shape and back.indices_sorted and back.unique_indices
    assert (m.ndim, m.size, len(m), m.dtype) == (2, 12, 3, np.float32)
    built = es.BCOO((m.data, m.indices), shape=(3, 4))
    _close(built.todense(), jnp.asarray(x))
    assert not built.indices_sorted
    with pytest.raises(ValueError, match=rf"BCOO: data of shape \({m.nse - 1},\) does not fit nse={m.nse}"):
        es.BCOO((m.data[1:], m.indices), shape=(3, 4))
    with pytest.raises(TypeError, match="BCOO: indices must be integers, got dtype float32"):
        es.BCOO((m.data, m.indices.astype(np.float32)), shape=(3, 4))
    with pytest.raises(ValueError, match=r"do not fit the array shape \(3,\)"):
        es.BCOO((m.data, m.indices), shape=(3,))


def test_fromdense_needs_nse_under_jit():
    x = _sparse_dense((3, 4))
    with pytest.raises(ember.errors.ConcretizationTypeError, match="bcoo_fromdense: nse .* pass nse"):
        ember.jit(es.BCOO.fromdense)(x)
    with pytest.raises(ValueError, match=r"bcoo_fromdense: n_batch=2 and n_dense=1 .* mat.ndim=2"):
        es.bcoo_fromdense(x, n_batch=2, n_dense=1)


def test_empty_eye_and_scipy():
    for kwargs in [dict(), dict(n_batch=1), dict(n_dense=1), dict(nse=3)]:
        _same_bcoo(es.empty((3, 4), np.float32, **kwargs), js.empty((3, 4), np.float32, **kwargs))
    for n, m, k, nb in [(3, 4, 0, 0), (4, 3, 1, 0), (4, 3, -2, 0), (3, 4, 1, 1), (3, 4, -1, 1), (3, 4, 5, 0)]:
        _same_bcoo(es.eye(n, m, k, np.float32, n_batch=nb), js.eye(n, m, k, np.float32, n_batch=nb))
    scipy_sparse = pytest.importorskip("scipy.sparse")
    s = scipy_sparse.random(4, 5, density=0.4, random_state=1, dtype=np.float32)
    _same_bcoo(es.BCOO.from_scipy_sparse(s), js.BCOO.from_scipy_sparse(s))


@pytest.mark.parametrize("shape,n_batch,n_dense", LAYOUTS)
def test_transpose_as_jax(shape, n_batch, n_dense):
    x = _sparse_dense(shape)
    got, want = _pair(x, n_batch=n_batch, n_dense=n_dense)
    if n_batch == 0 and n_dense == 0:
        _same_bcoo(got.T, want.T)
    nd = len(shape)
    n_sparse = nd - n_batch - n_dense
    perm = (*reversed(range(n_batch)), *reversed(range(n_batch, n_batch + n_sparse)),
            *range(n_batch + n_sparse, nd))
    _same_bcoo(got.transpose(perm), want.transpose(perm))
    _same_bcoo(es.bcoo_transpose(got, permutation=perm), js.bcoo_transpose(want, permutation=perm))


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
    x, y = _sparse_dense(lhs_shape), RNG.normal(size=rhs_shape).astype(np.float32)
    got, want = _pair(x, n_batch=n_batch)
    expect = js.bcoo_dot_general(want, jjnp.asarray(y), dimension_numbers=dn)
    _close(es.bcoo_dot_general(got, y, dimension_numbers=dn), expect)
    _close(ember.jit(lambda a, b: es.bcoo_dot_general(a, b, dimension_numbers=dn))(got, y), expect)
    swapped = tuple(d[::-1] for d in dn)
    _close(es.bcoo_dot_general(y, got, dimension_numbers=swapped),
           js.bcoo_dot_general(jjnp.asarray(y), want, dimension_numbers=swapped))


def test_dot_general_with_dense_dims_and_matmul():
    x = _sparse_dense((3, 4, 2))
    got, want = _pair(x, n_dense=1)
    y = RNG.normal(size=(4, 5)).astype(np.float32)
    dn = (((1,), (0,)), ((), ()))
    _close(es.bcoo_dot_general(got, y, dimension_numbers=dn), js.bcoo_dot_general(want, jjnp.asarray(y),
                                                                                   dimension_numbers=dn))
    with pytest.raises(NotImplementedError, match="bcoo_dot_general: contracting over dense dimensions"):
        es.bcoo_dot_general(got, y[:2], dimension_numbers=(((2,), (0,)), ((), ())))
    a, b = _pair(_sparse_dense((3, 4)))
    v = RNG.normal(size=(4,)).astype(np.float32)
    _close(a @ v, b @ jjnp.asarray(v))
    _close(v[:3] @ a, jjnp.asarray(v[:3]) @ b)
    with pytest.raises(TypeError, match="bcoo_dot_general: .*"):
        es.bcoo_dot_general(a, np.ones((5,), np.float32), dimension_numbers=dn)


SPDOTS = [
    ((3, 4), (4, 5), (((1,), (0,)), ((), ())), 0, 0),
    ((3, 4), (5, 4), (((1,), (1,)), ((), ())), 0, 0),
    ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,))), 1, 1),
    ((2, 3, 4), (4, 5), (((2,), (0,)), ((), ())), 1, 0),
    ((4,), (4, 3), (((0,), (0,)), ((), ())), 0, 0),
    ((3, 4), (4,), (((1,), (0,)), ((), ())), 0, 0),
]


@pytest.mark.parametrize("lhs_shape,rhs_shape,dn,lb,rb", SPDOTS)
def test_dot_general_sparse_sparse_as_jax(lhs_shape, rhs_shape, dn, lb, rb):
    x, y = _sparse_dense(lhs_shape, seed=1), _sparse_dense(rhs_shape, seed=2)
    (ga, wa), (gb, wb) = _pair(x, n_batch=lb), _pair(y, n_batch=rb)
    want = js.bcoo_dot_general(wa, wb, dimension_numbers=dn)
    _same_bcoo(es.bcoo_dot_general(ga, gb, dimension_numbers=dn), want, exact=False)
    _same_bcoo(ember.jit(lambda a, b: es.bcoo_dot_general(a, b, dimension_numbers=dn))(ga, gb), want, exact=False)


def test_dot_general_sampled_as_jax():
    a, b = RNG.normal(size=(3, 5)).astype(np.float32), RNG.normal(size=(5, 4)).astype(np.float32)
    got, want = _pair(_sparse_dense((3, 4)))
    dn = (((1,), (0,)), ((), ()))
    _close(es.bcoo_dot_general_sampled(a, b, got.indices, dimension_numbers=dn),
           js.bcoo_dot_general_sampled(jjnp.asarray(a), jjnp.asarray(b), want.indices, dimension_numbers=dn))


@pytest.mark.parametrize("shape,n_batch,n_dense", LAYOUTS)
def test_reduce_sum_as_jax(shape, n_batch, n_dense):
    got, want = _pair(_sparse_dense(shape), n_batch=n_batch, n_dense=n_dense)
    for axes in [(0,), (len(shape) - 1,), tuple(range(len(shape)))]:
        _same_bcoo(es.bcoo_reduce_sum(got, axes=axes), js.bcoo_reduce_sum(want, axes=axes), exact=False)
    _close(got.sum(), want.sum().todense() if isinstance(want.sum(), js.BCOO) else want.sum())


def test_sum_duplicates_sort_indices_and_eliminate_zeros_as_jax():
    data = np.array([1., 2., 0., 3., 4.], np.float32)
    indices = np.array([[2, 1], [0, 3], [1, 1], [2, 1], [3, 0]], np.int32)  # a repeat, an explicit 0, out of range
    got = es.BCOO((data, indices), shape=(3, 4))
    want = js.BCOO((jjnp.asarray(data), jjnp.asarray(indices)), shape=(3, 4))
    _same_bcoo(got.sort_indices(), want.sort_indices())
    _same_bcoo(es.bcoo_sum_duplicates(got), js.bcoo_sum_duplicates(want))
    _same_bcoo(es.bcoo_sum_duplicates(got, nse=6), js.bcoo_sum_duplicates(want, nse=6))
    _same_bcoo(got.sum_duplicates(), want.sum_duplicates())
    _same_bcoo(got.sum_duplicates(remove_zeros=False), want.sum_duplicates(remove_zeros=False))
    ones = np.ones((3, 4), np.float32)
    _same_bcoo(es.bcoo_extract(got, ones, assume_unique=False), js.bcoo_extract(want, jjnp.asarray(ones),
                                                                                assume_unique=False))
    _same_bcoo(ember.jit(lambda m: es.bcoo_sum_duplicates(m, nse=2))(got), js.bcoo_sum_duplicates(want, nse=2))
    # batched, with a broadcast batch dimension of the indices
    bd = np.stack([data, 2 * data])
    bi = indices[None]
    got = es.BCOO((bd, bi), shape=(2, 3, 4))
    want = js.BCOO((jjnp.asarray(bd), jjnp.asarray(bi)), shape=(2, 3, 4))
    _same_bcoo(es.bcoo_sum_duplicates(got), js.bcoo_sum_duplicates(want))
    _same_bcoo(got.sort_indices(), want.sort_indices())
    with pytest.raises(ember.errors.ConcretizationTypeError, match="bcoo_sum_duplicates: nse .* pass nse"):
        ember.jit(es.bcoo_sum_duplicates)(got)


@pytest.mark.parametrize("shape,n_batch,n_dense", LAYOUTS)
def test_update_layout_as_jax(shape, n_batch, n_dense):
    got, want = _pair(_sparse_dense(shape), n_batch=n_batch, n_dense=n_dense)
    for nb in range(len(shape) + 1):
        for nd in range(len(shape) + 1 - nb):
            _same_bcoo(got.update_layout(n_batch=nb, n_dense=nd, on_inefficient=None),
                       want.update_layout(n_batch=nb, n_dense=nd, on_inefficient=None))
    if n_batch < len(shape) and shape[n_batch] > 1:
        with pytest.raises(es.SparseEfficiencyError, match="increasing n_batch"):
            got.update_layout(n_batch=n_batch + 1)
        with pytest.warns(es.SparseEfficiencyWarning, match="increasing n_batch"):
            got.update_layout(n_batch=n_batch + 1, on_inefficient="warn")


@pytest.mark.parametrize("shape,n_batch,n_dense", LAYOUTS)
def test_structural_ops_as_jax(shape, n_batch, n_dense):
    got, want = _pair(_sparse_dense(shape), n_batch=n_batch, n_dense=n_dense)
    nd = len(shape)
    _same_bcoo(es.bcoo_rev(got, tuple(range(nd))), js.bcoo_rev(want, tuple(range(nd))))
    start, limit = [1] + [0] * (nd - 1), list(shape)
    _same_bcoo(es.bcoo_slice(got, start_indices=start, limit_indices=limit),
               js.bcoo_slice(want, start_indices=start, limit_indices=limit))
    strides = [1] * (nd - 1) + [2]
    _same_bcoo(es.bcoo_slice(got, start_indices=[0] * nd, limit_indices=limit, strides=strides),
               js.bcoo_slice(want, start_indices=[0] * nd, limit_indices=limit, strides=strides))
    sizes = [1] + list(shape[1:-1]) + [2]
    starts = [1] + [0] * (nd - 2) + [1]
    _same_bcoo(es.bcoo_dynamic_slice(got, starts, sizes), js.bcoo_dynamic_slice(want, starts, sizes))
    _same_bcoo(ember.jit(lambda m, i: es.bcoo_dynamic_slice(m, [i] + starts[1:], sizes))(got, 1),
               js.bcoo_dynamic_slice(want, starts, sizes))
    _same_bcoo(es.bcoo_concatenate([got, got], dimension=0), js.bcoo_concatenate([want, want], dimension=0))
    squeezed = es.bcoo_slice(got, start_indices=[0] * nd, limit_indices=[1] + list(shape[1:]))
    jsq = js.bcoo_slice(want, start_indices=[0] * nd, limit_indices=[1] + list(shape[1:]))
    _same_bcoo(es.bcoo_squeeze(squeezed, dimensions=(0,)), js.bcoo_squeeze(jsq, dimensions=(0,)))
    new = (1, *shape)
    _same_bcoo(es.bcoo_broadcast_in_dim(got, shape=new, broadcast_dimensions=tuple(range(1, nd + 1))),
               js.bcoo_broadcast_in_dim(want, shape=new, broadcast_dimensions=tuple(range(1, nd + 1))))


def test_reshape_as_jax():
    got, want = _pair(_sparse_dense((3, 4)))
    for new in [(12,), (2, 6), (4, 3), (2, 2, 3)]:
        _same_bcoo(es.bcoo_reshape(got, new_sizes=new), js.bcoo_reshape(want, new_sizes=new))
        _same_bcoo(got.reshape(new), want.reshape(new))
    got, want = _pair(_sparse_dense((2, 3, 4)), n_batch=1)
    _same_bcoo(es.bcoo_reshape(got, new_sizes=(2, 12)), js.bcoo_reshape(want, new_sizes=(2, 12)))
    with pytest.raises(ValueError, match="bcoo_reshape: new shape cannot mix batch and sparse"):
        es.bcoo_reshape(got, new_sizes=(3, 8))


def test_concatenate_sparse_axis_and_errors():
    (ga, wa), (gb, wb) = _pair(_sparse_dense((3, 4), seed=1)), _pair(_sparse_dense((3, 2), seed=2))
    _same_bcoo(es.bcoo_concatenate([ga, gb], dimension=1), js.bcoo_concatenate([wa, wb], dimension=1))
    with pytest.raises(ValueError, match="bcoo_concatenate: expected operands to be a sequence of BCOO"):
        es.bcoo_concatenate([ga, np.zeros((3, 4))], dimension=0)
    with pytest.raises(TypeError, match="bcoo_concatenate: "):
        es.bcoo_concatenate([ga, gb], dimension=0)


def test_multiply_as_jax():
    x, y = _sparse_dense((3, 4), seed=1), _sparse_dense((3, 4), seed=2)
    (ga, wa), (gb, wb) = _pair(x), _pair(y)
    _same_bcoo(es.bcoo_multiply_sparse(ga, gb), js.bcoo_multiply_sparse(wa, wb))
    _same_bcoo(ga * gb, wa * wb)
    d = RNG.normal(size=(3, 4)).astype(np.float32)
    _close(es.bcoo_multiply_dense(ga, d), js.bcoo_multiply_dense(wa, jjnp.asarray(d)))
    _close(es.bcoo_multiply_dense(ga, d[0]), js.bcoo_multiply_dense(wa, jjnp.asarray(d[0])))
    _same_bcoo(ga * d, wa * jjnp.asarray(d))
    _same_bcoo(ga * 2.0, wa * 2.0)
    _same_bcoo(3.0 * ga, 3.0 * wa)
    gbat, wbat = _pair(_sparse_dense((2, 3, 4)), n_batch=1)
    gb2, wb2 = _pair(_sparse_dense((2, 3, 4), seed=3), n_batch=1)
    _same_bcoo(es.bcoo_multiply_sparse(gbat, gb2), js.bcoo_multiply_sparse(wbat, wb2))
    with pytest.raises(NotImplementedError, match="bcoo_multiply_dense: .* sparse shape \\(3, 4\\) and dense shape"):
        es.bcoo_multiply_dense(ga, np.ones((2, 3, 4), np.float32))


def test_gather_and_conv_as_jax():
    got, want = _pair(_sparse_dense((4, 5)))
    idx = np.array([[2], [0], [3]], np.int32)
    dnums = ember.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    jdnums = jax.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
    _same_bcoo(es.bcoo_gather(got, idx, dnums, (1, 5)), js.bcoo_gather(want, jjnp.asarray(idx), jdnums, (1, 5)))
    sig, ker = _sparse_dense((1, 1, 8), density=0.6), RNG.normal(size=(1, 1, 3)).astype(np.float32)
    (gs, ws) = _pair(sig)
    for padding in [[(0, 0)], [(1, 2)]]:
        g = es.bcoo_conv_general_dilated(gs, ker, window_strides=(1,), padding=padding)
        w = js.bcoo_conv_general_dilated(ws, jjnp.asarray(ker), window_strides=(1,), padding=padding)
        _same_bcoo(g, w, exact=False)
        _close(g.todense(), w.todense())


def test_vmap_over_bcoo_as_jax():
    x = _sparse_dense((3, 4, 5))
    got, want = _pair(x, n_batch=1)
    v = RNG.normal(size=(5,)).astype(np.float32)
    _close(ember.vmap(lambda m: m @ v)(got), jax.vmap(lambda m: m @ jjnp.asarray(v))(want))
    _close(ember.vmap(lambda m: m.todense(), in_axes=0)(got), jnp.asarray(x))
    stacked = ember.vmap(lambda r: es.BCOO.fromdense(r, nse=8))(x)
    _same_bcoo(stacked, jax.vmap(lambda r: js.BCOO.fromdense(r, nse=8))(jjnp.asarray(x)))
    out = ember.vmap(lambda m: m.T, out_axes=0)(got)
    _same_bcoo(out, jax.vmap(lambda m: m.T)(want))
    with pytest.raises(ValueError, match="Cannot map in_axis=1 for BCOO array with n_batch=1"):
        ember.vmap(lambda m: m.todense(), in_axes=1)(got)


def test_grad_through_bcoo_operations_as_jax():
    x = _sparse_dense((3, 4))
    got, want = _pair(x)
    y = RNG.normal(size=(4, 2)).astype(np.float32)

    def loss(data, rhs, bcoo, sp):
        return (sp.bcoo_dot_general(bcoo(data), rhs, dimension_numbers=(((1,), (0,)), ((), ()))) ** 2).sum()
    e = ember.grad(loss, argnums=(0, 1))(got.data, y, lambda d: es.BCOO((d, got.indices), shape=(3, 4)), es)
    j = jax.grad(loss, argnums=(0, 1))(want.data, jjnp.asarray(y),
                                       lambda d: js.BCOO((d, want.indices), shape=(3, 4)), js)
    _close(e[0], j[0], rtol=1e-4)
    _close(e[1], j[1], rtol=1e-4)
    dense_grad = ember.grad(lambda m: es.BCOO.fromdense(m, nse=6).todense().sum() * 2)(x)
    _close(dense_grad, jax.grad(lambda m: js.BCOO.fromdense(m, nse=6).todense().sum() * 2)(jjnp.asarray(x)))


# ---------------------------------------------------------------------------------------------------------------------
# 2. sparsify and the sparse transforms

SPARSIFIED = [  # (name, function of (sparse matrix, dense vector), as numpy functions of both libraries' arrays)
    ("matvec", lambda np_, m, v: m @ v),
    ("vecmat", lambda np_, m, v: v[:3] @ m),
    ("elementwise", lambda np_, m, v: np_.sin(m) * 2 - np_.negative(m) * m),
    ("add_and_sum", lambda np_, m, v: (m + m).sum(0)),
    ("add_two", lambda np_, m, v: m + m.T.T),
    ("mul_dense_broadcast", lambda np_, m, v: m * v),
    ("div_and_pow", lambda np_, m, v: (m / 2.0) ** 2),
    ("transpose_reshape", lambda np_, m, v: m.T.reshape(2, 6)),
    ("sum_axis", lambda np_, m, v: m.sum(1)),
    ("full_sum", lambda np_, m, v: m.sum()),
    ("index", lambda np_, m, v: m[1:, ::2]),
    ("nested_jit", lambda np_, m, v: jax.jit(np_.abs)(m) if np_ is jjnp else ember.jit(np_.abs)(m)),
    ("astype", lambda np_, m, v: m.astype(np.float16)),
    ("dense_plus_sparse", lambda np_, m, v: m + np_.ones((3, 4), np.float32)),
    ("concatenate", lambda np_, m, v: np_.concatenate([m, m], axis=0)),
    ("stack", lambda np_, m, v: np_.stack([m, m])),
    ("expand", lambda np_, m, v: m[None]),
]


@pytest.mark.parametrize("name,fn", SPARSIFIED, ids=[s[0] for s in SPARSIFIED])
def test_sparsify_as_jax(name, fn):
    x = _sparse_dense((3, 4), seed=5)
    v = RNG.normal(size=(4,)).astype(np.float32)
    got, want = _pair(x)
    e = es.sparsify(lambda m, w: fn(jnp, m, w))(got, v)
    j = js.sparsify(lambda m, w: fn(jjnp, m, w))(want, jjnp.asarray(v))
    if isinstance(j, js.BCOO):
        _same_bcoo(e, j, exact=False)
    else:
        _close(e, j)
    jitted = ember.jit(es.sparsify(lambda m, w: fn(jnp, m, w)))(got, v)
    _close(es.todense(jitted), es.todense(e))


def test_sparsify_errors_and_operators():
    got, want = _pair(_sparse_dense((3, 4)))
    with pytest.raises(NotImplementedError, match="sparse rule for exp is not implemented because it would result "
                                                  "in dense output"):
        es.sparsify(jnp.exp)(got)
    with pytest.raises(NotImplementedError, match="sparse rule for cumsum is not implemented"):
        es.sparsify(lambda m: jnp.cumsum(m, 0))(got)
    with pytest.raises(NotImplementedError, match="Subtraction between sparse and dense array"):
        got - np.ones((3, 4), np.float32)
    with pytest.raises(NotImplementedError, match="Division by a sparse array"):
        1.0 / got
    _same_bcoo(got * got, want * want)  # (distinct arguments: the product of two patterns, as JAX)
    _same_bcoo(-got, -want)
    _same_bcoo(abs(got), abs(want))
    _same_bcoo(got[1], want[1])
    _same_bcoo(es.sparsify(lambda m: m * m)(got), js.sparsify(lambda m: m * m)(want))
    assert [r.shape for r in got] == [(4,)] * 3
    _close(es.todense(got), want.todense())
    _close(es.todense(np.ones(3, np.float32)), jjnp.ones(3, np.float32))


def test_sparse_grad_value_and_grad_and_jacobians_as_jax():
    x = _sparse_dense((3, 4), seed=3)
    got, want = _pair(x)
    v = RNG.normal(size=(4,)).astype(np.float32)
    f = lambda m, w: (jnp.sin(m @ w) ** 2).sum() if isinstance(m, es.BCOO) else (jjnp.sin(m @ w) ** 2).sum()
    _same_bcoo(es.grad(f)(got, v), js.grad(f)(want, jjnp.asarray(v)), exact=False)
    ge, gj = es.grad(f, argnums=(0, 1))(got, v), js.grad(f, argnums=(0, 1))(want, jjnp.asarray(v))
    _same_bcoo(ge[0], gj[0], exact=False)
    _close(ge[1], gj[1])
    (ve, ge), (vj, gj) = es.value_and_grad(f)(got, v), js.value_and_grad(f)(want, jjnp.asarray(v))
    _close(ve, vj)
    _same_bcoo(ge, gj, exact=False)
    g = lambda m, w: m @ w
    for ours, theirs in [(es.jacfwd, js.jacfwd), (es.jacrev, js.jacrev), (es.jacobian, js.jacobian)]:
        _same_bcoo(ours(g)(got, v), theirs(g)(want, jjnp.asarray(v)), exact=False)
    aux = es.grad(lambda m: ((m @ v).sum(), 7), has_aux=True)(got)
    assert aux[1] == 7
    _same_bcoo(aux[0], js.grad(lambda m: ((m @ jjnp.asarray(v)).sum(), 7), has_aux=True)(want)[0], exact=False)
    # under jit, and ember.grad of the data (what sparse.grad does by hand)
    _same_bcoo(ember.jit(es.grad(f))(got, v), js.grad(f)(want, jjnp.asarray(v)), exact=False)
