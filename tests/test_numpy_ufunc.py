"""ember.numpy.ufunc and frompyfunc side by side with jax.numpy's (JAX 0.10.2): which names are ufuncs, their
attributes, equality and repr, the methods (reduce, accumulate, at, reduceat, outer) of the built-in ufuncs (fast
paths) and of frompyfunc's (the generic loops): values, dtypes and errors, eagerly, under jit, vmap and grad."""
import inspect
import operator

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")

X = np.arange(6, dtype=np.int32).reshape(2, 3)
F = (np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5) / 2
B = X % 2 == 0


def _some_slow(cases, every=3):
    """cases, all but every every-th marked slow (the default run keeps a sample under its time budget)."""
    return [case if i % every == 0 else pytest.param(*(case if isinstance(case, tuple) else (case,)),
                                                     marks=pytest.mark.slow) for i, case in enumerate(cases)]


def _same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    tolerance = 2e-3 if got.dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


def _both(fn):
    """fn(namespace, convert) in ember and in JAX, compared by value and dtype; or the same exception type."""
    try:
        want = fn(jnp, jnp.asarray)
    except Exception as e:  # noqa: BLE001 (the error is what is compared)
        with pytest.raises(type(e)):
            fn(enp, enp.asarray)
        return
    got = fn(enp, enp.asarray)
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            _same(g, w)
    else:
        _same(got, want)


def test_the_ufunc_names_are_jax_s():
    theirs = sorted(n for n in dir(jnp) if isinstance(getattr(jnp, n), jnp.ufunc))
    ours = sorted(n for n in dir(enp) if isinstance(getattr(enp, n), enp.ufunc))
    assert ours == theirs
    assert "ufunc" in enp.__all__ and "frompyfunc" in enp.__all__
    for name in ours:
        e, j = getattr(enp, name), getattr(jnp, name)
        assert (e.nin, e.nout, e.nargs, e.__name__, repr(e)) == (j.nin, j.nout, j.nargs, j.__name__, repr(j))
        assert e.identity == j.identity or (np.isnan(e.identity) and np.isnan(j.identity)), name
        assert e.__doc__, name
        assert str(inspect.signature(e)) == "(*args, out=None, where=None)"


def test_equality_hash_and_read_only_attributes():
    assert enp.add == enp.add and enp.add != enp.multiply and hash(enp.add) == hash(enp.add)
    assert {enp.add: 1}[enp.add] == 1
    u = enp.frompyfunc(operator.add, 2, 1, identity=0)
    assert u == enp.frompyfunc(operator.add, 2, 1, identity=0) and u != enp.frompyfunc(operator.add, 2, 1)
    assert (u.nin, u.nout, u.nargs, u.identity, u.__name__, repr(u)) == (2, 1, 2, 0, "add", "<jnp.ufunc 'add'>")
    with pytest.raises(AttributeError):
        enp.add.nin = 3
    with pytest.raises(TypeError):
        enp.frompyfunc(operator.add, 1.5, 1)


def test_builtin_call_is_the_function_and_refuses_out_and_where():
    x = enp.asarray(F)
    _same(enp.add(x, x), F + F)
    _same(enp.negative(x), -F)
    for name in ["add", "logical_and", "logaddexp", "logaddexp2", "negative"]:
        args = (x,) * getattr(enp, name).nin
        for keyword in ("out", "where"):
            with pytest.raises(NotImplementedError, match=f"{keyword} argument of <jnp.ufunc '{name}'>"):
                getattr(enp, name)(*args, **{keyword: x})


REDUCE_CASES = [
    ("add", X, {}), ("add", X, {"axis": None}), ("add", X, {"axis": 1, "keepdims": True}),
    ("add", X, {"axis": (0, 1)}), ("add", B, {}), ("add", F, {"where": F > 0, "initial": 1.0}),
    ("multiply", X + 1, {"axis": 1}), ("multiply", F, {"dtype": np.float32, "initial": 2.0}),
    ("maximum", X, {"axis": 1}), ("maximum", X, {"where": X > 1, "initial": 0}), ("maximum", B, {}),
    ("minimum", F, {"axis": None, "keepdims": True}), ("bitwise_and", X, {"axis": 1}), ("bitwise_or", X, {}),
    ("bitwise_xor", X, {"axis": None}), ("bitwise_and", B, {}), ("bitwise_or", X, {"where": X > 2}),
    ("logical_and", X, {}), ("logical_or", F, {"axis": 1}), ("logical_xor", X, {"dtype": np.int32}),
    ("logical_and", X > 1, {"initial": False}),
    ("logaddexp", F, {}), ("logaddexp", X, {"axis": 1}), ("logaddexp", F, {"where": F > 0, "initial": 1.0}),
    ("logaddexp2", F, {"axis": 1, "keepdims": True}), ("logaddexp2", F, {"initial": 0.5}),
    ("subtract", X, {"axis": 1}), ("subtract", F, {"axis": None, "keepdims": True}),
    ("subtract", X, {"where": X > 1, "initial": 100}), ("subtract", X, {"dtype": np.float32}),
]


@pytest.mark.parametrize("name,a,kwargs", _some_slow(REDUCE_CASES))
def test_reduce(name, a, kwargs):
    _both(lambda m, c: getattr(m, name).reduce(c(a), **{k: (c(v) if isinstance(v, np.ndarray) else v)
                                                        for k, v in kwargs.items()}))


@pytest.mark.parametrize("call", _some_slow([
    lambda m, c: m.subtract.reduce(c(X), where=c(X) > 1),  # no identity: needs initial
    lambda m, c: m.add.reduce(c(X), where=c(X)),  # where must be boolean
    lambda m, c: m.add.reduce([1, 2]),
    lambda m, c: m.subtract.reduce(c(X), axis=(0, 1)),
    lambda m, c: m.subtract.reduce(c(np.zeros((0, 3), np.float32))),
    lambda m, c: m.maximum.reduce(c(np.zeros((0, 3), np.float32))),
    lambda m, c: m.bitwise_and.reduce(c(F)),
    lambda m, c: m.negative.reduce(c(X)),
    lambda m, c: m.add.reduce(c(X), axis=5),
    lambda m, c: m.negative.accumulate(c(X)),
    lambda m, c: m.maximum.accumulate(c(X), axis=None),
    lambda m, c: m.negative.outer(c(X), c(X)),
    lambda m, c: m.add.outer([1, 2], 2.5),
    lambda m, c: m.add.at(c(X), 0, 1),  # inplace=True
    lambda m, c: m.add.at(c(np.arange(4)), [0, 1], 1, inplace=False),
    lambda m, c: m.add.reduceat(c(np.arange(8)), [0, 2]),
    lambda m, c: m.add.reduceat(c(np.int32(1)), c(np.array([0]))),
    lambda m, c: m.add.reduceat(c(np.arange(8)), c(np.zeros((1, 1), np.int32))),
]))
def test_errors_match(call):
    with pytest.raises(Exception) as theirs:
        call(jnp, jnp.asarray)
    with pytest.raises(theirs.type):
        call(enp, enp.asarray)


def test_error_messages_name_the_function():
    with pytest.raises(ValueError, match="reduction operation 'subtract' does not have an identity"):
        enp.subtract.reduce(enp.asarray(X), where=enp.asarray(B))
    with pytest.raises(TypeError, match=r"add.reduce requires ndarray or scalar arguments, got <class 'list'>"):
        enp.add.reduce([1, 2])
    with pytest.raises(ValueError, match="zero-size array to reduction operation subtract which has no identity"):
        enp.subtract.reduce(enp.zeros((0,)))
    with pytest.raises(NotImplementedError, match="inplace=False"):
        enp.add.at(enp.asarray(X), 0, 1)
    with pytest.raises(ValueError, match="outer only supported for binary ufuncs"):
        enp.negative.outer(enp.asarray(X), enp.asarray(X))


@pytest.mark.parametrize("call", _some_slow([
    lambda m, c: m.add.accumulate(c(X), axis=1), lambda m, c: m.add.accumulate(c(B)),
    lambda m, c: m.multiply.accumulate(c(X > 2)), lambda m, c: m.multiply.accumulate(c(F), dtype=np.float32),
    lambda m, c: m.maximum.accumulate(c(X), axis=1), lambda m, c: m.subtract.accumulate(c(X), dtype=np.float32),
    lambda m, c: m.logaddexp.accumulate(c(F), axis=-1), lambda m, c: m.maximum.accumulate(c(np.zeros((0, 3)))),
    lambda m, c: m.add.at(c(X), (0, 1), 5, inplace=False),
    lambda m, c: m.add.at(c(np.arange(4)), c(np.array([0, 0, 1])), 1.0, inplace=False),
    lambda m, c: m.add.at(c(np.array([True, False])), c(np.array([1, 1])), True, inplace=False),
    lambda m, c: m.multiply.at(c(F), (c(np.array([0, 0])), c(np.array([1, 1]))), 3.0, inplace=False),
    lambda m, c: m.subtract.at(c(X), c(np.array([1, 1])), c(np.array([1, 2, 3])), inplace=False),
    lambda m, c: m.maximum.at(c(np.arange(4)), c(np.array([0, 0, 1])), 5, inplace=False),
    lambda m, c: m.maximum.at(c(X), (1,), 9, inplace=False),
    lambda m, c: m.maximum.at(c(np.arange(4)), c(np.array([0])), 5.5, inplace=False),
    lambda m, c: m.negative.at(c(X), 0, inplace=False),
    lambda m, c: m.add.reduceat(c(np.arange(8)), c(np.array([0, 2, 5]))),
    lambda m, c: m.add.reduceat(c(np.arange(8)), c(np.array([4, 2, 5]))),
    lambda m, c: m.maximum.reduceat(c(X), c(np.array([0, 1])), axis=1),
    lambda m, c: m.add.reduceat(c(np.arange(8)), c(np.array([0, 2])), dtype=np.float32),
    lambda m, c: m.add.outer(c(np.arange(3)), 2.5), lambda m, c: m.multiply.outer(c(X), c(F[0])),
    lambda m, c: m.logical_xor.outer(c(B), c(B)),
]))
def test_methods(call):
    _both(call)


def _muladd(a, b):
    return a * b + 1


@pytest.mark.parametrize("call", _some_slow([
    lambda m, c: m.frompyfunc(_muladd, 2, 1)(c(X), 2),
    lambda m, c: m.frompyfunc(_muladd, 2, 1).reduce(c(X)),
    lambda m, c: m.frompyfunc(_muladd, 2, 1).reduce(c(X), axis=1, keepdims=True),
    lambda m, c: m.frompyfunc(_muladd, 2, 1, identity=0).reduce(c(X), where=c(B)),
    lambda m, c: m.frompyfunc(_muladd, 2, 1, identity=1).reduce(c(np.zeros((0,), np.float32))),
    lambda m, c: m.frompyfunc(_muladd, 2, 1).reduce(c(np.zeros((0,), np.float32))),
    lambda m, c: m.frompyfunc(_muladd, 2, 1).reduce(c(X), axis=None, dtype=np.float32),
    lambda m, c: m.frompyfunc(_muladd, 2, 1).accumulate(c(X), axis=1),
    lambda m, c: m.frompyfunc(_muladd, 2, 1).at(c(np.arange(4)), c(np.array([1, 1])), 3, inplace=False),
    lambda m, c: m.frompyfunc(_muladd, 2, 1).at(c(X), (c(np.array([0, 1])), 2), 3, inplace=False),
    lambda m, c: m.frompyfunc(_muladd, 2, 1).outer(c(np.arange(2)), c(np.arange(3))),
    lambda m, c: m.frompyfunc(_muladd, 2, 1).reduceat(c(np.arange(6)), c(np.array([0, 3]))),
    lambda m, c: m.frompyfunc(lambda a: (a, a + 1), 1, 2)(c(X)),
    lambda m, c: m.frompyfunc(lambda a: (a, a + 1), 1, 2).reduce(c(X)),
    lambda m, c: m.frompyfunc(_muladd, 2, 1)([1], 2),
    lambda m, c: m.frompyfunc(_muladd, 2, 1)(c(X), c(X), out=c(X)),
]))
def test_frompyfunc(call):
    _both(call)


def test_under_jit_vmap_and_grad():
    u = enp.frompyfunc(_muladd, 2, 1)
    ju = jnp.frompyfunc(_muladd, 2, 1)
    f = enp.asarray(F)
    _same(ember.jit(lambda v: enp.maximum.reduceat(v, enp.array([0, 1])))(f),
          jax.jit(lambda v: jnp.maximum.reduceat(v, jnp.array([0, 1])))(F))
    _same(ember.jit(lambda v: enp.add.reduce(v, axis=0) + u.reduce(v))(f),
          jax.jit(lambda v: jnp.add.reduce(v, axis=0) + ju.reduce(v))(F))
    _same(ember.vmap(lambda v: enp.multiply.accumulate(v))(f), jax.vmap(lambda v: jnp.multiply.accumulate(v))(F))
    _same(ember.vmap(lambda v: u.reduce(v))(f), jax.vmap(lambda v: ju.reduce(v))(F))
    _same(ember.vmap(lambda v: u.accumulate(v))(f), jax.vmap(lambda v: ju.accumulate(v))(F))
    _same(ember.grad(lambda v: enp.add.reduce(v * v, axis=None))(f),
          jax.grad(lambda v: jnp.add.reduce(v * v, axis=None))(F))
    _same(ember.grad(lambda v: u.reduce(v).sum())(f), jax.grad(lambda v: ju.reduce(v).sum())(F))
    _same(ember.grad(lambda v: enp.logaddexp.reduce(v, axis=None))(f),
          jax.grad(lambda v: jnp.logaddexp.reduce(v, axis=None))(F))
    _same(ember.grad(lambda v: enp.add.at(v, enp.array([0, 0]), v[1], inplace=False).sum())(f),
          jax.grad(lambda v: jnp.add.at(v, jnp.array([0, 0]), v[1], inplace=False).sum())(F))
    _same(ember.grad(lambda v: enp.maximum.outer(v[0], v[1]).sum())(f),
          jax.grad(lambda v: jnp.maximum.outer(v[0], v[1]).sum())(F))
    # a ufunc is hashable: a static argument of jit
    apply = ember.jit(lambda uf, v: uf.reduce(v), static_argnums=0)
    _same(apply(enp.multiply, f), jnp.multiply.reduce(F))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["add", "multiply", "subtract", "maximum", "minimum", "bitwise_and", "bitwise_or",
                                  "bitwise_xor", "logical_and", "logical_or", "logical_xor", "logaddexp",
                                  "logaddexp2"])
@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.int32, np.uint8, np.float16, np.float32])
def test_sweep_methods_over_dtypes(name, dtype):
    a = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
    idx = np.array([0, 2, 2])
    for call in [lambda m, c: getattr(m, name).reduce(c(a)),
                 lambda m, c: getattr(m, name).reduce(c(a), axis=1, keepdims=True),
                 lambda m, c: getattr(m, name).accumulate(c(a), axis=1),
                 lambda m, c: getattr(m, name).outer(c(a[0]), c(a[1])),
                 lambda m, c: getattr(m, name).reduceat(c(a), c(np.array([0, 2])), axis=1),
                 lambda m, c: getattr(m, name).at(c(a), c(idx), c(a[0, :3]), inplace=False)]:
        if name == "subtract" and dtype is np.bool_:  # both refuse; JAX's subtract.at with a ValueError of its
            for m in (jnp, enp):                      # scatter, ember's with the TypeError of its subtraction
                with pytest.raises((TypeError, ValueError)):
                    call(m, m.asarray)
            continue
        _both(call)
