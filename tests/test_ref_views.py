"""Views of Refs (jax.experimental.hijax.TransformedRef: ref.at[idx], reshape, T, bitcast): read and written under
jit side by side with JAX where JAX's work (indexing views read and written, reshape and bitcast read), and against
numpy where JAX's fail (writes through reshape, transpose, bitcast: NotImplementedError in JAX 0.10.2); eagerly,
under grad, vmap and scan; the type of a view and the errors."""
import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax.experimental.hijax import TransformedRef as JaxTransformedRef

import ember
import ember.numpy as enp
from ember import lax
from ember.experimental.hijax import TransformedRef

X = np.arange(12, dtype=np.float32).reshape(3, 4)
SEVEN = 7


def _run(lib, np_, view, write):
    def f(x):
        r = lib.new_ref(x)
        t = view(r)
        if write:
            t[...] = np_.full(t.shape, SEVEN, t.dtype)
        return t[...], r[...]
    return [np.asarray(v) for v in lib.jit(f)(X)]


VIEWS = {
    "at slice": lambda r: r.at[1:3], "at int": lambda r: r.at[0], "at at": lambda r: r.at[1:3].at[:, 2],
    "at array": lambda r: r.at[np.array([2, 0])], "at ellipsis": lambda r: r.at[..., 1],
    "reshape": lambda r: r.reshape(4, 3), "bitcast": lambda r: r.bitcast(np.int32),
    "at reshape": lambda r: r.at[1:].reshape(2, 2, 2), "bitcast narrower": lambda r: r.bitcast(np.uint8),
    "bitcast narrower and back": lambda r: r.bitcast(np.uint16).bitcast(np.float32),
    "at bitcast narrower": lambda r: r.at[1:].bitcast(np.int8).at[3:6],
}
JAX_WRITES = {"at slice", "at int", "at at", "at array", "at ellipsis"}


@pytest.mark.parametrize("name", list(VIEWS))
def test_views_read_and_write_as_jax(name):
    for write in (False, True):
        if write and name not in JAX_WRITES:
            continue
        got, want = _run(ember, enp, VIEWS[name], write), _run(jax, jnp, VIEWS[name], write)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


def _numpy_view(base, view):
    """The numpy view of base that view(ref) shows (numpy's reshape/transpose/view of a C-contiguous array share
    its memory, so writes to it are writes to base)."""
    return view(base)


NUMPY = {
    "reshape": (lambda r: r.reshape(4, 3), lambda a: a.reshape(4, 3)),
    "T": (lambda r: r.T, lambda a: a.T),
    "transpose at": (lambda r: r.transpose((1, 0)).at[1:3], lambda a: a.transpose((1, 0))[1:3]),
    "reshape at": (lambda r: r.reshape(6, 2).at[1:5:2], lambda a: a.reshape(6, 2)[1:5:2]),
    "bitcast": (lambda r: r.bitcast(np.int32), lambda a: a.view(np.int32)),
    "at bitcast": (lambda r: r.at[1:].bitcast(np.uint32), lambda a: a[1:].view(np.uint32)),
}


@pytest.mark.parametrize("name", list(NUMPY))
def test_writes_jax_refuses_as_numpy_views(name):
    view, numpy_view = NUMPY[name]
    got_view, got_base = _run(ember, enp, view, True)
    base = X.copy()
    numpy_view(base)[...] = SEVEN
    np.testing.assert_array_equal(got_base, base)
    np.testing.assert_array_equal(got_view, numpy_view(base))
    with pytest.raises(NotImplementedError):
        _run(jax, jnp, view, True)


def test_type_eagerly_and_under_jit():
    r = ember.new_ref(enp.asarray(X))
    v = r.at[1:3].T
    assert isinstance(v, TransformedRef)
    assert (v.shape, v.dtype, v.ndim, v.size, len(v)) == ((4, 2), np.float32, 2, 8, 4)
    assert r.bitcast(np.uint8).shape == (12, 4) and r.at[1:].bitcast(np.uint16).reshape(16).shape == (16,)
    np.testing.assert_array_equal(np.asarray(v[...]), X[1:3].T)
    v[0] = enp.zeros(2)  # eagerly: written at once
    np.testing.assert_array_equal(np.asarray(r[...])[1:3, 0], [0, 0])
    seen = {}

    @ember.jit
    def f(x):
        ref = ember.new_ref(x)
        seen["ember"] = (type(ref.at[0]).__name__, ref.at[0].shape, ref.at[0].dtype)
        return x

    @jax.jit
    def g(x):
        ref = jax.new_ref(x)
        assert isinstance(ref.at[0], JaxTransformedRef)
        seen["jax"] = (type(ref.at[0]).__name__, ref.at[0].shape, ref.at[0].dtype)
        return x
    f(X), g(X)
    assert seen["ember"] == seen["jax"]


def test_composes_with_grad_vmap_and_scan():
    def loss(w):
        r = ember.new_ref(enp.zeros((2, 3)))
        r.at[1].reshape(3, 1)[...] = (w * w).reshape(3, 1)
        r.T[0] += w[0]
        return (r[...] * np.arange(6, dtype=np.float32).reshape(2, 3)).sum()
    w = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_allclose(ember.grad(loss)(w), ember.jit(ember.grad(loss))(w))
    np.testing.assert_allclose(ember.grad(loss)(w), 2 * w * np.array([3, 4, 5]) + np.array([3, 0, 0]), rtol=1e-6)
    out = ember.vmap(lambda x: (lambda r: (r.T.at[0].set(x[:2]), r[...])[1])(ember.new_ref(enp.zeros((2, 2)))))(
        np.arange(6, dtype=np.float32).reshape(3, 2))
    np.testing.assert_array_equal(np.asarray(out)[:, :, 0], np.arange(6).reshape(3, 2))

    def body(carry, i):
        r = ember.new_ref(carry)
        r.at[i].reshape(2, 2)[0] = enp.full((2,), i, np.float32)
        return r[...], None
    final = ember.jit(lambda c: lax.scan(body, c, np.arange(3))[0])(np.zeros((3, 4), np.float32))
    np.testing.assert_array_equal(np.asarray(final)[:, :2], np.repeat(np.arange(3.0)[:, None], 2, 1))


def test_errors():
    r = ember.new_ref(enp.asarray(X))
    with pytest.raises(ValueError, match="cannot reshape \\[3, 4\\] \\(12 elements\\) into \\(5, 2\\)"):
        r.reshape(5, 2)
    with pytest.raises(ValueError, match="not a permutation of the 2 axes"):
        r.transpose((0, 0))
    with pytest.raises(ValueError, match="Invalid shape for a TransformedRef write. Expected shape: \\(4,\\)"):
        r.at[0][...] = enp.zeros(3)
    with pytest.raises(ValueError, match="Invalid dtype for a TransformedRef write"):
        r.at[0][...] = enp.zeros(4, np.int32)
    with pytest.raises(NotImplementedError, match="bitcast to a dtype of another width"):
        r.bitcast(np.uint8)[...] = enp.zeros((12, 4), np.uint8)
    with pytest.raises(ValueError, match="needs at least two axes"):
        r.at[0].bitcast(np.uint8)
    with pytest.raises(ValueError, match="second-minor axis divisible by 4"):
        r.bitcast(np.uint8).at[1:].bitcast(np.float32)
    with pytest.raises(IndexError, match="TransformedRef: index 5 of f32\\[3, 4\\]"):
        r.at[5]
    with pytest.raises(TypeError, match="expected a Ref"):
        TransformedRef(enp.zeros(3), ())
