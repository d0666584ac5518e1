"""Explained recompiles (docs/guide.md): jax_explain_cache_misses logs why a jitted function compiled again, naming
the argument and the change, with the call site; log_compiles; a function that keeps recompiling warns once with
the fix; cache_info and cache_clear."""
import logging
import re
import warnings

import numpy as np
import pytest

import ember
import ember.numpy as enp


@pytest.fixture
def misses(caplog):
    caplog.set_level(logging.WARNING, logger="ember")
    with ember.explain_cache_misses(True):
        yield lambda: [r.getMessage() for r in caplog.records if "cache miss" in r.getMessage()]


def test_each_kind_of_change_is_named(misses):
    f = ember.jit(lambda x, n, p: x * n + p["b"], static_argnums=1)
    f(enp.ones(3), 2, {"b": 1.0})
    f(enp.ones(4), 2, {"b": 1.0})                      # a shape
    f(enp.ones(4, enp.int32), 2, {"b": 1.0})           # a dtype
    f(enp.ones(4, enp.int32), 3, {"b": 1.0})           # a static value
    f(enp.ones(4, enp.int32), 3, {"b": enp.float32(1)})  # weakly typed -> strongly typed
    f(enp.ones(4, enp.int32), 3, {"b": 1.0, "c": 2.0})  # the pytree structure
    log = misses()
    assert len(log) == 6 and "first call" in log[0]
    assert "argument x: shape (3,) -> (4,) (f32[3] -> f32[4])" in log[1]  # (named as the parameter, as JAX's)
    assert "argument x: dtype float32 -> int32" in log[2]
    assert "static argument n: 2 -> 3" in log[3]
    assert "argument p['b']: weakly typed (a Python scalar) -> strongly typed (an array)" in log[4]
    assert "the pytree structure of the arguments" in log[5]
    assert all("test_recompiles.py" in line for line in log)  # the call site
    f(enp.ones(4, enp.int32), 3, {"b": 1.0, "c": 2.0})
    assert len(misses()) == 6  # a hit logs nothing
    g = ember.jit(lambda *xs: xs[1])  # (no parameter names: positions)
    g(enp.ones(2), enp.ones(2))
    g(enp.ones(2), enp.ones(3))
    assert "argument 1: shape (2,) -> (3,)" in misses()[-1]


def advice(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "ember" and r.levelno == logging.WARNING
            and "cache miss" not in r.getMessage()]


def test_a_new_function_object_each_call_is_explained_and_warned_about(misses, caplog):
    x = enp.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (advice, never a Python warning: `-W error` runs stay green)
        for i in range(5):
            ember.jit(lambda v: v + 1.0)(x)  # a new jit of a new lambda each time
    log = misses()
    assert "first call" in log[0] and "a new function object for <lambda>" in log[1] and "hoist the jit" in log[1]
    assert [m for m in advice(caplog) if "new function object" in m and "test_recompiles.py" in m]


def test_a_function_that_keeps_recompiling_warns_once_with_the_fix(caplog):
    caplog.set_level(logging.WARNING, logger="ember")
    f = ember.jit(lambda x: x.sum())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in range(1, 10):  # (warned once: after the 5th)
            f(enp.ones(n))
    found = advice(caplog)
    assert len(found) == 1 and re.search(r"compiled 5 times in a row: argument x keeps changing \(shape .*pad it",
                                         found[0]) and "test_recompiles.py" in found[0]
    g = ember.jit(lambda x, k: x * k, static_argnums=1)
    for k in range(6):
        g(enp.ones(2), k)
    assert re.search("static argument k keeps changing.*each value compiles anew", advice(caplog)[-1])


def test_hits_between_misses_do_not_warn(caplog):
    caplog.set_level(logging.WARNING, logger="ember")
    f = ember.jit(lambda x: x.sum())
    for n in range(1, 8):
        f(enp.ones(n))
        f(enp.ones(n))  # (a hit resets the streak: a few shapes used repeatedly are fine)
    assert not advice(caplog)


def test_log_compiles(caplog):
    caplog.set_level(logging.WARNING, logger="ember")
    with ember.log_compiles(True):
        f = ember.jit(lambda x, y: x @ y)
        f(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))
        f(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32))
    compiles = [r.getMessage() for r in caplog.records if "compiling for" in r.getMessage()]
    assert compiles == [compiles[0]] and "(f32[2,3], f32[3,4])" in compiles[0]


def test_cache_info_and_cache_clear():
    f = ember.jit(lambda x: x * 2)
    f(enp.ones(3))
    f(enp.ones(3))
    f(np.ones(3, np.float32))  # (numpy arguments take the general path: a hit too)
    f(enp.ones(4))
    info = f.cache_info()
    assert (info.hits, info.misses, info.currsize) == (2, 2, 2) and info.maxsize == ember.config.jit_cache_size
    f.cache_clear()
    assert f.cache_info().currsize == 0
    np.testing.assert_array_equal(np.asarray(f(enp.ones(3))), [2, 2, 2])
    assert f.cache_info().misses == 3


def test_embers_own_jitted_helpers_and_factories_of_closures_do_not_warn(caplog):
    caplog.set_level(logging.WARNING, logger="ember")

    def make(f):
        return ember.jit(lambda *args: f(*args))  # (a new closure over a different f each time: by design)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for f in [enp.sin, enp.cos, enp.tan, enp.exp, enp.tanh, enp.abs]:
            make(f)(enp.ones(3))
        for n in range(2, 9):  # (random.permutation jits a helper that compiles per size, by design)
            ember.random.permutation(ember.random.key(0), n)
    assert not advice(caplog)
