"""ember.numpy against numpy (values) and jax.numpy (result dtypes and weak types)."""
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from recorded import jax_result

import jax


def jax32():
    """JAX with 32-bit defaults: ember's defaults for Python scalars (the tests enable x64 globally)."""
    return jax.enable_x64(False)


rng = np.random.default_rng(0)
A = rng.normal(size=(3, 4)).astype(np.float32)
B = rng.normal(size=(4,)).astype(np.float32)
P = rng.uniform(0.5, 2.0, size=(3, 4)).astype(np.float32)
I = rng.integers(-5, 6, size=(3, 4)).astype(np.int32)
J = rng.integers(1, 6, size=(4,)).astype(np.int32)


@pytest.mark.parametrize("name,args", [
    ("add", (A, B)), ("subtract", (A, 2)), ("multiply", (3.0, A)), ("divide", (A, P)), ("divide", (I, J)),
    ("floor_divide", (I, J)), ("floor_divide", (A, P)), ("remainder", (I, J)), ("remainder", (-I, J)),
    ("remainder", (A, P)), ("power", (P, A)), ("power", (A, 3)), ("power", (I, 2)), ("maximum", (A, B)),
    ("minimum", (I, 0)), ("add", (A > 0, I > 0)), ("multiply", (A > 0, I > 0)), ("exp", (I,)), ("log", (P,)),
    ("sqrt", (P,)), ("tanh", (A,)), ("abs", (I,)),
    ("square", (A,)), ("negative", (I,)), ("sign", (A,)), ("floor", (A,)), ("ceil", (A,)), ("round", (A * 3,)),
    ("log2", (P,)), ("log10", (P,)), ("exp2", (A,)), ("tan", (A,)), ("arctan2", (A, P)), ("reciprocal", (P,)),
    ("equal", (I, J)), ("less", (A, B)), ("greater_equal", (I, 0)), ("logical_and", (A > 0, I > 0)),
    ("logical_not", (A > 0,)), ("where", (A > 0, A, 0.0)), ("clip", (A, -0.5, 0.5)), ("isfinite", (A,)),
])
def test_elementwise_matches_numpy_and_jax_dtypes(name, args):
    ours = getattr(enp, name)(*args)
    ref = getattr(np, name)(*args)
    with jax32():
        jref = jax_result(lambda: getattr(jnp, name)(*args))
    assert ours.dtype == jref.dtype, f"{name}: dtype {ours.dtype} but jax gives {jref.dtype}"
    np.testing.assert_allclose(np.asarray(ours), np.asarray(ref).astype(ours.dtype), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("x,y", [
    (np.float16(1), 2.0), (np.ones(2, np.float16), 2), (np.ones(2, np.int8), 3), (np.ones(2, np.uint8), np.int8(1)),
    (np.ones(2, np.int32), 2.5), (np.ones(2, np.bool_), 1), (np.ones(2, np.int32), np.ones(2, np.float16)),
    (np.ones(2, np.float32), np.ones(2, np.float64)), (np.ones(2, np.uint32), np.ones(2, np.int32)),
    (np.ones(2, np.int64), np.ones(2, np.int8)),
])
@pytest.mark.parametrize("x64", [False, True])
def test_promotion_follows_jax(x, y, x64):
    # JAX's in the same mode: without 64-bit mode a 64-bit operand is narrowed first and uint32 + int32 is int32;
    # Python scalars are weak
    with ember.config.override(enable_x64=x64), jax.enable_x64(x64):
        ours, ref = enp.add(x, y), jnp.add(x, y)
    assert ours.dtype == ref.dtype
    assert ours.weak_type == ref.weak_type


def test_python_scalars_are_weak():
    x = enp.ones(3, "bfloat16")
    assert (x * 2.0).dtype == ember._core.dtypes.bfloat16
    assert (enp.ones(3, "int8") + 100).dtype == np.int8
    with pytest.raises(OverflowError, match="Python int 200 is too large to convert to int8"):
        enp.ones(3, "int8") + 200
    assert (ember.jit(lambda: enp.asarray(1.0) + 1)()).dtype == np.float32


@pytest.mark.parametrize("name,kwargs", [
    ("sum", {}), ("sum", {"axis": 1}), ("sum", {"axis": (0, 1), "keepdims": True}), ("mean", {"axis": 0}),
    ("max", {"axis": -1}), ("min", {}), ("var", {"axis": 1}), ("std", {}), ("argmax", {"axis": 1}),
    ("argmin", {}), ("all", {"axis": 0}), ("any", {}),
])
def test_reductions(name, kwargs):
    for x in (A, I, A > 0.5):
        if name in ("var", "std", "mean") and x.dtype == np.bool_:
            continue
        ours = getattr(enp, name)(x, **kwargs)
        ref = getattr(np, name)(x, **kwargs)
        np.testing.assert_allclose(np.asarray(ours).astype(np.float64), np.asarray(ref).astype(np.float64),
                                   rtol=1e-5, atol=1e-6)
        with jax32():
            jref = jax_result(lambda: getattr(jnp, name)(x, **kwargs))
        assert ours.dtype == jref.dtype, f"{name}{kwargs} on {x.dtype}: {ours.dtype} != jax {jref.dtype}"


@pytest.mark.parametrize("a_shape,b_shape", [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)), ((5, 2, 3), (1, 3, 4)),
])
@pytest.mark.usefixtures("ember_x64")
def test_matmul_and_dot(a_shape, b_shape):
    a = rng.normal(size=a_shape)
    b = rng.normal(size=b_shape)
    np.testing.assert_allclose(np.asarray(enp.matmul(a, b)), np.matmul(a, b), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ember.asarray(a) @ b), a @ b, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(enp.dot(a, b)), np.dot(a, b), rtol=1e-12)


def test_shape_functions():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    checks = [
        (enp.reshape(x, (4, -1)), x.reshape(4, -1)), (enp.transpose(x), x.T), (enp.transpose(x, (1, 0, 2)),
                                                                               x.transpose(1, 0, 2)),
        (enp.swapaxes(x, 0, 2), np.swapaxes(x, 0, 2)), (enp.moveaxis(x, 0, -1), np.moveaxis(x, 0, -1)),
        (enp.expand_dims(x, 1), np.expand_dims(x, 1)), (enp.squeeze(x[:1]), np.squeeze(x[:1])),
        (enp.ravel(x), x.ravel()), (enp.broadcast_to(x[0, 0], (2, 4)), np.broadcast_to(x[0, 0], (2, 4))),
        (enp.concatenate([x, x], axis=-1), np.concatenate([x, x], -1)), (enp.stack([x, x], 1), np.stack([x, x], 1)),
        (enp.split(x, 2, axis=2)[1], np.split(x, 2, axis=2)[1]),
        (enp.outer(x[0, 0], x[1, 1]), np.outer(x[0, 0], x[1, 1])),
        (enp.tensordot(x, x, axes=([1, 2], [1, 2])), np.tensordot(x, x, axes=([1, 2], [1, 2]))),
        (enp.zeros((2, 2)), np.zeros((2, 2), np.float32)), (enp.ones(3, "int32"), np.ones(3, np.int32)),
        (enp.full((2,), 7), np.full((2,), 7, np.int32)), (enp.arange(5), np.arange(5, dtype=np.int32)),
        (enp.arange(1, 10, 3), np.arange(1, 10, 3, dtype=np.int32)), (enp.arange(0.0, 1.0, 0.25),
                                                                   np.arange(0.0, 1.0, 0.25, dtype=np.float32)),
        (enp.eye(3, k=1), np.eye(3, k=1, dtype=np.float32)),
        (enp.linspace(0, 1, 5), np.linspace(0, 1, 5, dtype=np.float32)),
        (enp.zeros_like(x), np.zeros_like(x)), (enp.full_like(x, 2), np.full_like(x, 2)),
        (enp.hstack([x[0, 0], x[1, 1]]), np.hstack([x[0, 0], x[1, 1]])),
    ]
    for ours, ref in checks:
        assert np.asarray(ours).dtype == ref.dtype
        np.testing.assert_allclose(np.asarray(ours), ref)


@pytest.mark.parametrize("fn", ["split", "array_split"])
@pytest.mark.parametrize("arg", [
    2, 5, 1, [-3], [3, -3], [7, 3], [20], [-20], [3, 3], [], (), np.array([2, 5]), np.int64(2),
    np.array([-8, 4, 30]),
], ids=repr)
def test_split_matches_numpy(fn, arg):
    """Split points follow Python slicing (negative from the end, clipped, unsorted ones give empty pieces)."""
    x = np.arange(20, dtype=np.float32).reshape(2, 10)
    for axis in (1, -1):
        want = getattr(np, fn)(x, arg, axis=axis)
        for got in (getattr(enp, fn)(x, arg, axis=axis),
                    ember.jit(lambda v: getattr(enp, fn)(v, arg, axis=axis))(x)):
            assert [g.shape for g in got] == [w.shape for w in want]
            for g, w in zip(got, want):
                np.testing.assert_array_equal(np.asarray(g), w)


def test_split_sections_errors_are_clear():
    x = np.arange(10)
    for fn in (enp.split, enp.array_split):
        for sections in (0, -2):
            with pytest.raises(ValueError, match="number of sections must be larger than 0"):
                fn(x, sections)
    with pytest.raises(ValueError, match="equal division"):
        enp.split(x, 3)
    assert [p.shape for p in enp.array_split(x, 4)] == [(3,), (3,), (2,), (2,)]
    assert [p.shape for p in enp.split(np.zeros((0, 2)), 3)] == [(0, 2)] * 3


@pytest.mark.parametrize("fn,least", [("hsplit", 1), ("vsplit", 2), ("dsplit", 3)])
def test_hsplit_vsplit_dsplit_match_numpy(fn, least):
    for shape in [(), (4,), (2, 4), (2, 4, 6)]:
        x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
        for arg in (2, [1, -1]):
            if len(shape) < least:
                with pytest.raises(ValueError, match=f"{fn} only works on arrays of {least} or more dimensions"):
                    getattr(enp, fn)(x, arg)
                continue
            want, got = getattr(np, fn)(x, arg), getattr(enp, fn)(x, arg)
            assert [g.shape for g in got] == [w.shape for w in want]
            for g, w in zip(got, want):
                np.testing.assert_array_equal(np.asarray(g), w)


@pytest.mark.parametrize("index", [
    0, -1, (1, 2), (slice(None), 1), (Ellipsis, 0), (None, 0), (slice(1, None), slice(None, None, 2)),
    (0, Ellipsis, None), slice(0, 0),
])
def test_basic_indexing(index):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(np.asarray(ember.asarray(x)[index]), x[index])
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda v: v[index])(x)), x[index])


@pytest.mark.parametrize("index", [
    True, False, np.True_, np.False_, np.array(True), (True,), (True, 0), (0, True), (slice(None), True),
    (0, slice(None), True), (slice(None), True, 0), (slice(None), 0, True), (True, True), (True, False),
    (None, True), (0, None, True), (slice(None), 0, None, True), (Ellipsis, True), (True, Ellipsis, 0),
    (slice(None), 0, Ellipsis, True), (np.False_, 1), (slice(1, 2), True, slice(0, 3, 2)), (0, 1, 2, True),
    (0, 1, 2, False),
], ids=repr)
def test_scalar_boolean_index_adds_an_axis(index):
    """numpy: a scalar boolean is a 0-d mask (a new axis of length 1 or 0, an advanced index with the integers
    beside it), not the integer 1 or 0."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for got in (ember.asarray(x)[index], ember.jit(lambda v: v[index])(x)):
        assert got.shape == x[index].shape
        np.testing.assert_array_equal(np.asarray(got), x[index])


def test_scalar_boolean_index_of_a_scalar():
    z = np.float32(3.0)
    for index in (True, False, (None, False, Ellipsis)):
        assert ember.asarray(z)[index].shape == np.asarray(z)[index].shape


def test_indexing_errors():
    x = ember.asarray(np.ones((2, 3), np.float32))
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 1 with size 3"):
        x[0, 5]
    with pytest.raises(TypeError, match=r"index arrays must be integers or booleans, got f32\[2\]"):
        x[np.array([0.0, 1.0], np.float32)]


def test_broadcast_errors_are_clear():
    with pytest.raises(TypeError, match=r"add got incompatible shapes for broadcasting: \(3,\), \(4,\)\."):
        enp.add(np.ones(3), np.ones(4))  # (JAX's words and type: operands of one rank)
    with pytest.raises(ValueError, match=r"Incompatible shapes for broadcasting: shapes=\[\(2, 3\), \(2,\)\]"):
        enp.add(np.ones((2, 3)), np.ones(2))
    with pytest.raises(ValueError, match=r"matmul: contracted dimensions differ"):
        enp.matmul(np.ones((2, 3)), np.ones((4, 2)))


@pytest.mark.parametrize("spec,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("ij,jk", [(2, 3), (3, 4)]), ("bij,bjk->bki", [(2, 3, 4), (2, 4, 5)]),
    ("i,i->", [(3,), (3,)]), ("ij->ji", [(2, 3)]), ("ij->", [(2, 3)]), ("ijk,k->ij", [(2, 3, 4), (4,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("i,j->ij", [(3,), (2,)]), ("abc,cd->da", [(2, 3, 4), (4, 5)]),
])
@pytest.mark.usefixtures("ember_x64")
def test_einsum(spec, shapes):
    arrays = [rng.normal(size=s) for s in shapes]
    np.testing.assert_allclose(np.asarray(enp.einsum(spec, *arrays)), np.einsum(spec, *arrays), rtol=1e-12)
    g = ember.grad(lambda *xs: enp.sum(enp.einsum(spec, *xs) ** 2), argnums=tuple(range(len(arrays))))(*arrays)
    jg = jax_result(lambda: jax.grad(lambda *xs: jnp.sum(jnp.einsum(spec, *xs) ** 2),
                                     argnums=tuple(range(len(arrays))))(*arrays))
    for a, b in zip(g, jg):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10)


def test_operators_defer_to_operands_they_do_not_know():
    """As JAX's: an array operator returns NotImplemented for an operand that is not an array or a number, so
    Python asks the other operand (its __radd__, __rpow__, __eq__) and otherwise raises its TypeError."""
    class Other:
        def __radd__(self, x):
            return "radd"

        def __rpow__(self, x):
            return "rpow"

        def __rmatmul__(self, x):
            return "rmatmul"
    x = enp.ones(2)
    assert (x + Other(), x ** Other(), x @ Other()) == ("radd", "rpow", "rmatmul")
    assert (x == Other()) is False and (x != "a") is True
    with pytest.raises(TypeError, match="unsupported operand"):
        x + [1, 2]  # (JAX's too: a list is not an array)
    assert np.asarray(x + np.float32(1)).tolist() == [2, 2] and np.asarray(2 ** x).tolist() == [2, 2]
    assert float(ember.jit(lambda v: (v * 2 - 1 / v)[0])(x)) == 1.0
