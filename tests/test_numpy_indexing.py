"""numpy indexing and `.at` updates against numpy (values) and JAX (values, gradients, batching), eagerly, under
jit (index arrays traced) and under vmap; the selection functions (take, take_along_axis, nonzero, ...) and
ember.ops' segment reductions."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from recorded import jax_result

pytestmark = pytest.mark.usefixtures("ember_x64")  # float64 inputs and oracles (numpy, JAX in x64 mode)

X = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
I = np.array([1, 0, -1])
J = np.array([[0], [2]])

# (name, index) on X: numpy's basic and advanced forms, and their mixtures
INDEXES = [
    ("int", (0,)), ("negative_int", (-1, -2)), ("slice_neg_step", (slice(None, None, -1),)),
    ("slice_neg_step_bounds", (Ellipsis, slice(3, 0, -2))), ("empty_slice", (slice(3, 1),)),
    ("new_axes", (None, 1, slice(None), None)), ("ellipsis_new", (Ellipsis, None)),
    ("array", (I,)), ("array_second", (slice(None), I)), ("arrays_broadcast", (slice(None), I, J)),
    ("arrays_apart", (I, slice(None), J)), ("ellipsis_array", (Ellipsis, I)), ("int_array_slice", (1, I, slice(1, 3))),
    ("arrays_around_none", (I, None, J)), ("list_none_list", (slice(None), [0, 1], None, [0, 1])),
    ("array_2d", (np.array([[1, 0], [1, 1]]),)), ("int_slice_array", (slice(None), 0, slice(None), I[:2])),
    ("ints_apart_array", (1, slice(None), 2, I)), ("strided_array_reversed", (slice(None, None, 2), I,
                                                                              slice(None, None, -1), 0)),
    ("scalar_array", (np.array(1), slice(None), np.array(-2))), ("empty_array", (np.zeros(0, np.int32),)),
]
BOOL_INDEXES = [
    ("mask_1d", (X[:, 0, 0, 0] > 0,)), ("mask_2d", (X[..., 0] > 30,)), ("mask_list", ([True, False],)),
    ("mask_after_slice", (slice(None), np.array([True, False, True]))), ("true", (True,)), ("false", (False, 0)),
    ("true_ellipsis", (Ellipsis, True)),
]


def _arrays_of(index):
    return [i for i in index if isinstance(i, np.ndarray)]


def _rebuild(index, arrays):
    it = iter(arrays)
    return tuple(next(it) if isinstance(i, np.ndarray) else i for i in index)


@pytest.mark.parametrize("name,index", INDEXES + BOOL_INDEXES, ids=[n for n, _ in INDEXES + BOOL_INDEXES])
def test_getitem_eager_matches_numpy(name, index):
    got = enp.asarray(X)[index]
    np.testing.assert_array_equal(np.asarray(got), X[index])
    assert got.dtype == X.dtype


@pytest.mark.parametrize("name,index", INDEXES, ids=[n for n, _ in INDEXES])
def test_getitem_jit_traced_indices_match_numpy(name, index):
    arrays = _arrays_of(index)
    f = ember.jit(lambda x, *arrs: x[_rebuild(index, arrs)])
    np.testing.assert_array_equal(np.asarray(f(X, *arrays)), X[index])


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"])
def test_every_integer_index_dtype(dtype):
    i = np.array([2, 0, 1], dtype)
    j = np.array([[3], [0]], dtype)
    for index in [(slice(None), i), (slice(None), i, j), (1, i, slice(None, None, -1))]:
        want = X[index]
        np.testing.assert_array_equal(np.asarray(enp.asarray(X)[index]), want)
        f = ember.jit(lambda x, *arrs: x[_rebuild(index, arrs)])
        np.testing.assert_array_equal(np.asarray(f(X, *_arrays_of(index))), want)
        np.testing.assert_array_equal(np.asarray(enp.asarray(X).at[index].add(1.0)),
                                      jax_result(lambda: jnp.asarray(X).at[index].add(1.0)))


@pytest.mark.parametrize("name,index", [pytest.param(n, i, id=n, marks=() if k % 2 == 0 else pytest.mark.slow)
                                        for k, (n, i) in enumerate(INDEXES)])  # (gather's vjp: tests/prims)
def test_getitem_gradient_matches_jax(name, index):
    x = X.astype(np.float64) / 10
    ct = np.random.default_rng(0).normal(size=X[index].shape)
    arrays = _arrays_of(index)
    g = ember.grad(lambda x, *arrs: enp.sum(x[_rebuild(index, arrs)] * ct))(x, *arrays)
    jarrays = [jnp.asarray(a) for a in arrays]
    want = jax_result(lambda: jax.grad(lambda x: jnp.sum(x[_rebuild(index, jarrays)] * ct))(x))
    np.testing.assert_allclose(np.asarray(g), np.asarray(want))


def test_getitem_under_vmap_batched_array_and_indices():
    xs = np.stack([X[0], X[0] + 1, X[0] * 2])
    idx = np.array([[0, 2], [1, 1], [2, 0]])
    for f in [lambda x, i: x[i], lambda x, i: x[:, i], lambda x, i: x[i, ::-1, i], lambda x, i: x[1:, None, i]]:
        np.testing.assert_array_equal(np.asarray(ember.vmap(f)(xs, idx)), jax_result(lambda: jax.vmap(f)(xs, idx)))
        np.testing.assert_array_equal(np.asarray(ember.vmap(f, in_axes=(None, 0))(X[0], idx)),
                                      jax_result(lambda: jax.vmap(f, in_axes=(None, 0))(jnp.asarray(X[0]), idx)))
        np.testing.assert_array_equal(np.asarray(ember.vmap(f, in_axes=(0, None))(xs, idx[0])),
                                      jax_result(lambda: jax.vmap(f, in_axes=(0, None))(xs, idx[0])))


def test_traced_scalar_index_in_a_loop():
    def body(i, acc):
        return acc + x[i]
    x = enp.asarray(np.arange(12.0).reshape(4, 3))
    out = ember.lax.fori_loop(0, 4, body, np.zeros(3))
    np.testing.assert_allclose(np.asarray(out), x.sum(0))


def test_out_of_bounds():
    x = enp.asarray(np.arange(5.0))
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 5"):
        x[5]
    with pytest.raises(IndexError, match="index -6 is out of bounds"):
        x[-6]
    # .at follows JAX's modes for static integers too: an update out of bounds is dropped, a read clamps
    np.testing.assert_array_equal(np.asarray(x.at[7].set(1.0)), np.arange(5.0))
    assert float(x.at[7].get()) == 4.0
    np.testing.assert_array_equal(np.asarray(x.at[-1].set(9.0, wrap_negative_indices=False)), np.arange(5.0))
    np.testing.assert_array_equal(np.asarray(x.at[np.array([-1])].get(mode="fill", fill_value=-1.0,
                                                                     wrap_negative_indices=False)), [-1.0])
    # array (traced) indices follow JAX: reads clamp, updates drop, negative ones count from the end once
    idx = np.array([7, -8, -1])
    np.testing.assert_array_equal(np.asarray(x[idx]), np.asarray(jnp.arange(5.0)[idx]))
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda x, i: x[i])(x, idx)), [4.0, 0.0, 4.0])
    np.testing.assert_array_equal(np.asarray(x.at[idx].set(9.0)), np.asarray(jnp.arange(5.0).at[idx].set(9.0)))
    # explicit modes
    np.testing.assert_array_equal(np.asarray(x.at[idx].get(mode="fill", fill_value=-1.0)), [-1.0, -1.0, 4.0])
    assert np.isnan(np.asarray(x.at[7].get(mode="fill")))
    np.testing.assert_array_equal(np.asarray(x.at[idx].set(9.0, mode="clip")),
                                  np.asarray(jnp.arange(5.0).at[idx].set(9.0, mode="clip")))


def test_index_errors():
    x = enp.asarray(X)
    with pytest.raises(TypeError, match=r"immutable.*use x = x.at\[0\].set\(value\)"):
        x[0] = 1.0
    np.testing.assert_array_equal(np.asarray(x[enp.asarray(True)]), X[np.array(True)])
    with pytest.raises(IndexError, match="too many indices for array of shape"):
        x[0, 0, 0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., 0, ...]
    with pytest.raises(TypeError, match="index arrays must be integers or booleans"):
        x[np.array([0.5])]
    with pytest.raises(TypeError, match="invalid index 'a'"):
        x["a"]
    with pytest.raises(IndexError, match="shape mismatch: indexing arrays could not be broadcast"):
        x[np.array([0, 1]), np.array([0, 1, 2])]
    with pytest.raises(IndexError, match=r"boolean mask index of shape \(2,\) inside jit.*where.*size="):
        ember.jit(lambda x, m: x[m])(X, np.array([True, False]))
    with pytest.raises(ValueError, match=r"at\[...\].set: values of shape \(3,\) cannot be broadcast to the indexed "
                                         r"shape \(2, 3, 4, 2\)"):
        x.at[..., :2].set(np.ones(3, np.float32))


UPDATES = [
    ("int", (1,)), ("slice", (slice(1, None, 2),)), ("neg_step", (slice(None), slice(None, None, -1))),
    ("array_repeated", (np.array([1, 1, 0]),)), ("arrays", (slice(None), np.array([0, 2, 0]), np.array([[1], [3]]))),
    ("arrays_apart", (np.array([0, 1, 1]), slice(1, 3), np.array([3, 3, 0]))), ("new_axis", (None, 0, Ellipsis)),
    ("ellipsis", (Ellipsis,)), ("mixed", (1, np.array([2, 0]), slice(None, None, -2), 3)),
]


def _update_cases(methods, alternate=False):
    """Every index form with the first two methods (alternate: with one of them, in turn), and every method on the
    repeated-index form and the mixed one, by default; the rest of the product with -m slow."""
    for k, (name, index) in enumerate(UPDATES):
        for i, method in enumerate(methods):
            quick = (i < 2 and not (alternate and (i + k) % 2)) or name in ("array_repeated", "mixed")
            yield pytest.param(name, index, method, id=f"{method}-{name}", marks=() if quick else pytest.mark.slow)


@pytest.mark.parametrize("name,index,method",
                         _update_cases(["set", "add", "multiply", "min", "max", "subtract", "divide", "power"],
                                       alternate=True))
def test_at_updates_match_jax(name, index, method):
    x = X / 7 + 1
    v = np.random.default_rng(1).uniform(0.5, 2.0, size=np.asarray(X[index]).shape).astype(np.float32)
    jidx = tuple(jnp.asarray(i) if isinstance(i, np.ndarray) else i for i in index)
    want = jax_result(lambda: getattr(jnp.asarray(x).at[jidx], method)(v))
    got = getattr(enp.asarray(x).at[index], method)(v)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    f = ember.jit(lambda x, v, *arrs: getattr(x.at[_rebuild(index, arrs)], method)(v))
    np.testing.assert_allclose(np.asarray(f(x, v, *_arrays_of(index))), np.asarray(want), rtol=1e-6)


@pytest.mark.parametrize("name,index,method", [  # (every other case by default; scatter's vjps: tests/prims)
    pytest.param(*c.values, id=c.id, marks=tuple(c.marks) + (() if k % 2 == 0 else (pytest.mark.slow,)))
    for k, c in enumerate(_update_cases(["set", "add", "min", "max"]))])
def test_at_update_gradients_match_jax(name, index, method):
    x = (X / 7 + 1).astype(np.float64)
    v = np.random.default_rng(2).uniform(0.5, 9.0, size=np.asarray(X[index]).shape)
    ct = np.random.default_rng(3).normal(size=X.shape)
    jidx = tuple(jnp.asarray(i) if isinstance(i, np.ndarray) else i for i in index)
    got = ember.grad(lambda x, v: enp.sum(getattr(x.at[index], method)(v) * ct), argnums=(0, 1))(x, v)
    want = jax_result(lambda: jax.grad(lambda x, v: jnp.sum(getattr(x.at[jidx], method)(v) * ct),
                                       argnums=(0, 1))(x, v))
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-12)


def test_at_multiply_gradient_with_unique_indices():
    x, v = np.arange(1.0, 7.0), np.array([2.0, 3.0])
    got = ember.grad(lambda x, v: enp.sum(x.at[np.array([4, 1])].multiply(v, unique_indices=True) ** 2),
                     argnums=(0, 1))(x, v)
    want = jax.grad(lambda x, v: jnp.sum(x.at[jnp.array([4, 1])].multiply(v, unique_indices=True) ** 2),
                    argnums=(0, 1))(x, v)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w))


def test_at_get_apply_and_vmap():
    x = np.arange(10.0)
    idx = np.array([1, 3, 3])
    np.testing.assert_array_equal(np.asarray(enp.asarray(x).at[idx].get()), x[idx])
    np.testing.assert_array_equal(np.asarray(enp.asarray(x).at[idx].apply(enp.negative)),
                                  np.asarray(jnp.asarray(x).at[idx].apply(jnp.negative)))
    xs, idxs, vs = np.stack([x, -x]), np.array([[0, 0], [9, 2]]), np.array([[1.0, 2.0], [3.0, 4.0]])
    f = lambda x, i, v: x.at[i].add(v)
    np.testing.assert_array_equal(np.asarray(ember.vmap(f)(xs, idxs, vs)), np.asarray(jax.vmap(f)(xs, idxs, vs)))
    np.testing.assert_array_equal(np.asarray(ember.vmap(f, in_axes=(None, 0, None))(x, idxs, vs[0])),
                                  np.asarray(jax.vmap(f, in_axes=(None, 0, None))(jnp.asarray(x), idxs, vs[0])))
    # apply runs func once per occurrence of an index; with unique indices it is differentiable
    np.testing.assert_allclose(np.asarray(enp.asarray(x).at[idx].apply(enp.sin)),
                               np.asarray(jnp.asarray(x).at[idx].apply(jnp.sin)))
    g = ember.grad(lambda x: enp.sum(x.at[np.array([1, 4])].apply(enp.sin, unique_indices=True)))(x)
    np.testing.assert_allclose(np.asarray(g), np.where(np.isin(np.arange(10), [1, 4]), np.cos(x), 1.0))


def test_at_with_mask_eagerly_and_dtypes():
    x = np.arange(6).reshape(2, 3)
    got = enp.asarray(x).at[x > 2].set(0)
    np.testing.assert_array_equal(np.asarray(got), np.where(x > 2, 0, x))
    assert got.dtype == enp.asarray(x).dtype
    with pytest.warns(UserWarning, match=r"at\[...\].add: values of dtype float(32|64) are cast to the array.s dtype"):
        got = enp.asarray(x).at[0].add(1.7)
    with warnings.catch_warnings():  # JAX warns too (a FutureWarning), where its dtype rules say so
        warnings.simplefilter("ignore")
        want = jnp.asarray(x).at[0].add(1.7)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


# ---------------------------------------------------------------------------------------------------------------
# Selection functions
@pytest.mark.parametrize("mode", [None, "clip", "wrap", "fill"])
def test_take(mode):
    a = np.arange(12.0).reshape(3, 4)
    idx = np.array([[0, 5], [-1, 2]])
    for axis in (None, 0, 1, -1):
        want = jnp.take(a, idx, axis=axis, mode=mode)
        np.testing.assert_array_equal(np.asarray(enp.take(a, idx, axis=axis, mode=mode)), np.asarray(want))
        f = ember.jit(lambda a, i: enp.take(a, i, axis=axis, mode=mode))
        np.testing.assert_array_equal(np.asarray(f(a, idx)), np.asarray(want))
    g = ember.grad(lambda a: enp.sum(enp.take(a, np.array([1, 1, 2]), axis=1) ** 2))(a)
    np.testing.assert_array_equal(np.asarray(g), np.asarray(jax.grad(
        lambda a: jnp.sum(jnp.take(a, jnp.array([1, 1, 2]), axis=1) ** 2))(a)))


def test_take_along_axis_and_put_along_axis():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 4, 5))
    for axis in (0, 1, 2, -1):
        idx = np.argsort(a, axis=axis)[(slice(None),) * (axis % 3) + (slice(0, 2),)]
        np.testing.assert_array_equal(np.asarray(enp.take_along_axis(a, idx, axis)), np.take_along_axis(a, idx, axis))
        g = ember.grad(lambda a: enp.sum(enp.take_along_axis(a, idx, axis) ** 2))(a)
        np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(
            lambda a: jnp.sum(jnp.take_along_axis(a, idx, axis) ** 2))(a)))
        want = np.array(a)
        np.put_along_axis(want, idx, 7.0, axis)
        np.testing.assert_array_equal(np.asarray(enp.put_along_axis(a, idx, 7.0, axis, inplace=False)), want)
    idx = np.array([[1], [0], [3]])  # broadcast over the middle dimension
    np.testing.assert_array_equal(np.asarray(enp.take_along_axis(a[:, :, 0], idx, 1)),
                                  np.take_along_axis(a[:, :, 0], idx, 1))
    np.testing.assert_array_equal(np.asarray(enp.take_along_axis(a, np.array([[[7]]]), 2)),
                                  np.asarray(jnp.take_along_axis(a, jnp.array([[[7]]]), 2)))
    np.testing.assert_array_equal(np.asarray(enp.take_along_axis(a, np.array([3, 0]), None)),
                                  np.take_along_axis(a, np.array([3, 0]), None))
    with pytest.raises(ValueError, match="put_along_axis: ember arrays are immutable"):
        enp.put_along_axis(a, idx, 1.0, 1)
    out = ember.vmap(lambda a, i: enp.take_along_axis(a, i, 0))(a, np.zeros((3, 2, 5), np.int32))
    np.testing.assert_array_equal(np.asarray(out), np.broadcast_to(a[:, :1], (3, 2, 5)))


def test_nonzero_family_eager_and_with_size():
    a = np.array([[0, 3, 0], [1, 0, 2]])
    for got, want in zip(enp.nonzero(a), np.nonzero(a)):
        np.testing.assert_array_equal(np.asarray(got), want)
        assert got.dtype == (np.int64 if ember._core.dtypes.x64_enabled() else np.int32)  # as JAX
    f = ember.jit(lambda a: enp.nonzero(a, size=5, fill_value=-1))
    for got, want in zip(f(a), jnp.nonzero(a, size=5, fill_value=-1)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    for got, want in zip(ember.jit(lambda a: enp.nonzero(a, size=2))(a), jnp.nonzero(a, size=2)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(enp.argwhere(a)), np.argwhere(a))
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda a: enp.argwhere(a, size=4))(a)),
                                  np.asarray(jnp.argwhere(a, size=4)))
    np.testing.assert_array_equal(np.asarray(enp.flatnonzero(a)), np.flatnonzero(a))
    np.testing.assert_array_equal(np.asarray(enp.where(a > 0)[1]), np.where(a > 0)[1])
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda a: enp.where(a > 0, size=4)[0])(a)),
                                  np.asarray(jnp.where(a > 0, size=4)[0]))
    assert np.asarray(enp.argwhere(np.array(3))).shape == np.argwhere(np.array(3)).shape
    with pytest.raises(ValueError, match=r"nonzero: the number of nonzero elements of i32\[2,3\] depends on its "
                                         r"values.*size="):
        ember.jit(enp.nonzero)(a.astype(np.int32))
    batched = ember.vmap(lambda r: enp.nonzero(r, size=2)[0])(a)
    np.testing.assert_array_equal(np.asarray(batched), np.asarray(jax.vmap(lambda r: jnp.nonzero(r, size=2)[0])(a)))


def test_compress_extract_select():
    a = np.arange(12.0).reshape(3, 4)
    cond = np.array([True, False, True])
    np.testing.assert_array_equal(np.asarray(enp.compress(cond, a, axis=0)), np.compress(cond, a, axis=0))
    np.testing.assert_array_equal(np.asarray(enp.compress(cond, a)), np.compress(cond, a))
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda c, a: enp.compress(c, a, axis=0, size=3))(cond, a)),
                                  np.asarray(jnp.compress(cond, a, axis=0, size=3)))
    np.testing.assert_array_equal(np.asarray(enp.extract(a > 4, a)), np.extract(a > 4, a))
    conds, choices = [a < 3, a > 8], [a, -a]
    np.testing.assert_array_equal(np.asarray(enp.select(conds, choices, 0.5)), np.select(conds, choices, 0.5))


def test_flip_roll_rot90_tri_diff():
    a = np.arange(24.0).reshape(2, 3, 4)
    for axis in (None, 0, (1, 2), -1):
        np.testing.assert_array_equal(np.asarray(enp.flip(a, axis)), np.flip(a, axis))
    np.testing.assert_array_equal(np.asarray(enp.fliplr(a)), np.fliplr(a))
    np.testing.assert_array_equal(np.asarray(enp.flipud(a)), np.flipud(a))
    for shift, axis in [(1, None), (-5, 2), (7, 1), ((1, 2), (0, 2))]:
        np.testing.assert_array_equal(np.asarray(enp.roll(a, shift, axis)), np.roll(a, shift, axis))
    traced = ember.jit(lambda a, s: enp.roll(a, s, 2))
    for s in (-5, 0, 3, 9):
        np.testing.assert_array_equal(np.asarray(traced(a, s)), np.roll(a, s, 2))
    for k in range(-1, 5):
        np.testing.assert_array_equal(np.asarray(enp.rot90(a, k, (1, 2))), np.rot90(a, k, (1, 2)))
    for k in (-1, 0, 2):
        np.testing.assert_array_equal(np.asarray(enp.tril(a, k)), np.tril(a, k))
        np.testing.assert_array_equal(np.asarray(enp.triu(a, k)), np.triu(a, k))
        np.testing.assert_array_equal(np.asarray(enp.tri(3, 5, k)), np.tri(3, 5, k, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(enp.diff(a)), np.diff(a))
    np.testing.assert_array_equal(np.asarray(enp.diff(a, 2, axis=1)), np.diff(a, 2, axis=1))
    np.testing.assert_array_equal(np.asarray(enp.diff(a, prepend=0.0, append=a[..., :1])),
                                  np.diff(a, prepend=0.0, append=a[..., :1]))
    np.testing.assert_array_equal(np.asarray(enp.diff(np.array([True, False, False]))),
                                  np.diff(np.array([True, False, False])))
    g = ember.grad(lambda a: enp.sum(enp.roll(enp.tril(a[0]), 1, 1) ** 2))(a)
    np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(
        lambda a: jnp.sum(jnp.roll(jnp.tril(a[0]), 1, 1) ** 2))(a)))


@pytest.mark.parametrize("name", ["segment_sum", "segment_max", "segment_min", "segment_prod"])
def test_segment_reductions(name):
    rng = np.random.default_rng(0)
    data = rng.normal(size=(7, 3))
    ids = np.array([0, 2, 2, 5, 0, -1, 9])
    fn, jfn = getattr(ember.ops, name), getattr(jax.ops, name)
    np.testing.assert_allclose(np.asarray(fn(data, ids, 6)), np.asarray(jfn(data, ids, 6)))
    np.testing.assert_allclose(np.asarray(ember.jit(lambda d, i: fn(d, i, num_segments=6))(data, ids)),
                               np.asarray(jfn(data, ids, 6)))
    np.testing.assert_allclose(np.asarray(fn(data, np.array([0, 2, 2, 1, 0, 1, 1]))),
                               np.asarray(jfn(data, jnp.array([0, 2, 2, 1, 0, 1, 1]))))
    if name != "segment_prod":
        got = ember.grad(lambda d: enp.sum(fn(d, ids, 6) ** 2 * (1 if name == "segment_sum" else 1)))(data)
        want = jax.grad(lambda d: jnp.sum(jnp.where(jnp.isfinite(jfn(d, ids, 6)), jfn(d, ids, 6), 0) ** 2))(data)
        if name == "segment_sum":
            np.testing.assert_allclose(np.asarray(got), np.asarray(want))
    with pytest.raises(ValueError, match=f"{name}: num_segments is needed inside jit"):
        ember.jit(lambda d, i: fn(d, i))(data, ids)


def test_empty_arrays_and_indices():
    z = np.zeros((0, 3), np.float32)
    for index in [(np.zeros(0, np.int32),), (slice(None), [0, 2]), (slice(None, None, -1),), (Ellipsis, 1)]:
        assert enp.asarray(z)[index].shape == z[index].shape
        assert enp.asarray(z).at[index].set(1.0).shape == z.shape
    assert enp.asarray(np.arange(3.0))[np.zeros(0, np.int32)].shape == (0,)
    with pytest.raises(IndexError, match="index is out of bounds for axis 0 with size 0"):
        enp.asarray(z)[np.array([0])]


def test_traced_updates_inside_scan_match_jax():
    def make(lib, np_):
        def body(c, i):
            c = c.at[i].add(c[(i + 1) % 4] * 2.0)
            return c, c[i]
        return lambda x: lib.lax.scan(body, x, np_.arange(4))
    x = np.arange(1.0, 5.0)
    ours, theirs = make(ember, enp), make(jax, jnp)
    np.testing.assert_allclose(np.asarray(ours(x)[0]), np.asarray(theirs(x)[0]))
    g = ember.grad(lambda x: enp.sum(ours(x)[1] ** 2))(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(lambda x: jnp.sum(theirs(x)[1] ** 2))(x)))
