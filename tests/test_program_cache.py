"""Programs shared by what they compute: a fresh closure per step (grad(lambda p: loss(p, x, y)) in a training
loop) is staged anew every call, but its transformation, lowering and compilation are reused; closed-over arrays
are the program's arguments, closed-over Python numbers are part of it."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._api import templates
from ember._runtime import compiler
from ember._runtime.pjrt.client import Client


@pytest.fixture
def compiles(monkeypatch):
    """The number of XLA compilations so far (a list, one entry per compile)."""
    count = []
    compile_ = Client.compile

    def counted(self, text):
        count.append(1)
        return compile_(self, text)
    monkeypatch.setattr(Client, "compile", counted)
    return count


RNG = np.random.default_rng(0)
SIZES = [(8, 16), (16, 16), (16, 3)]
PARAMS = [(RNG.normal(size=s).astype(np.float32) * 0.3, RNG.normal(size=s[1]).astype(np.float32) * 0.1)
          for s in SIZES]
BATCHES = [(RNG.normal(size=(5, 8)).astype(np.float32), RNG.normal(size=(5, 3)).astype(np.float32))
           for _ in range(4)]


def predict(np_, params, x):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = np_.tanh(h)
    return h


def loss(np_, params, x, y):
    return np_.mean((predict(np_, params, x) - y) ** 2)


def ember_params():
    return [(ember.asarray(w), ember.asarray(b)) for w, b in PARAMS]


def check(got, expected, rtol=2e-5):
    got_leaves, expected_leaves = ember.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(expected)
    assert len(got_leaves) == len(expected_leaves)
    for g, e in zip(got_leaves, expected_leaves):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=rtol, atol=1e-6)


STEPS = {
    "grad": (lambda p, x, y: ember.grad(lambda q: loss(enp, q, x, y))(p),
             lambda p, x, y: jax.grad(lambda q: loss(jnp, q, x, y))(p)),
    "value_and_grad": (lambda p, x, y: ember.value_and_grad(lambda q: loss(enp, q, x, y))(p),
                       lambda p, x, y: jax.value_and_grad(lambda q: loss(jnp, q, x, y))(p)),
    "grad_has_aux": (lambda p, x, y: ember.grad(lambda q: (loss(enp, q, x, y), {"x": x}), has_aux=True)(p),
                     lambda p, x, y: jax.grad(lambda q: (loss(jnp, q, x, y), {"x": x}), has_aux=True)(p)),
    "vjp": (lambda p, x, y: (lambda out, pull: (out, pull(enp.asarray(y))))(
                *ember.vjp(lambda q: predict(enp, q, x), p)),
            lambda p, x, y: (lambda out, pull: (out, pull(jnp.asarray(y))))(
                *jax.vjp(lambda q: predict(jnp, q, x), p))),
    "jvp": (lambda p, x, y: ember.jvp(lambda q: predict(enp, q, x), (p,), (p,)),
            lambda p, x, y: jax.jvp(lambda q: predict(jnp, q, x), (p,), (p,))),
    "vmap": (lambda p, x, y: ember.vmap(lambda row: enp.sum((predict(enp, p, row) - y[0]) ** 2))(x),
             lambda p, x, y: jax.vmap(lambda row: jnp.sum((predict(jnp, p, row) - y[0]) ** 2))(x)),
    "linearize": (lambda p, x, y: (lambda out, f: (out, f(p)))(*ember.linearize(lambda q: predict(enp, q, x), p)),
                  lambda p, x, y: (lambda out, f: (out, f(p)))(*jax.linearize(lambda q: predict(jnp, q, x), p))),
}


@pytest.mark.parametrize("api", list(STEPS))
@pytest.mark.parametrize("kind", ["ember", "numpy"])
def test_fresh_closures_over_new_arrays_compile_once(api, kind, compiles):
    ember_step, jax_step = STEPS[api]
    params = ember_params()
    convert = ember.asarray if kind == "ember" else np.asarray
    for step in range(8):
        x, y = BATCHES[step % 4]
        if step == 2:
            after_warmup = len(compiles)
        check(ember_step(params, convert(x), convert(y)), jax_step(PARAMS, x, y))
    assert len(compiles) == after_warmup  # new closures, new values, the same programs


def test_a_closed_over_python_number_is_part_of_the_program(compiles):
    x = ember.asarray(np.arange(3, dtype=np.float32))
    for c in [2.0, 3.0, -0.0, 0.0, 2.0, 3.0, -0.0, 0.0]:
        got = ember.grad(lambda p: (p * c + x).sum())(x)
        np.testing.assert_array_equal(np.asarray(got), [c] * 3)
        assert list(np.signbit(np.asarray(got))) == [np.signbit(c)] * 3  # -0.0 is not 0.0
        if c == 0.0 and not np.signbit(c):
            seen = len(compiles)
    assert len(compiles) == seen  # the second round reused the four programs


def test_each_fresh_closure_is_traced_anew(compiles):
    """Only compilation is shared: a closure reading a global that changed stages out the new program."""
    global SCALE
    x = ember.asarray(np.ones(3, np.float32))
    for scale in ["twice", "square", "twice"]:
        SCALE = scale
        got = ember.grad(lambda p: (p * 2 if SCALE == "twice" else p * p).sum())(x * 3)
        np.testing.assert_array_equal(np.asarray(got), [2.0] * 3 if scale == "twice" else [6.0] * 3)


def test_control_flow_in_fresh_closures(compiles):
    def step(k):
        bound = ember.asarray(np.float32(k))
        return ember.grad(lambda v: ember.lax.fori_loop(0, 3, lambda i, acc: acc * v + bound, v))(
            ember.asarray(np.float32(0.5)))
    for k in range(6):
        if k == 2:
            seen = len(compiles)
        expected = jax.grad(lambda v: jax.lax.fori_loop(0, 3, lambda i, acc: acc * v + np.float32(k), v))(
            np.float32(0.5))
        np.testing.assert_allclose(float(step(k)), float(expected), rtol=1e-6)
    assert len(compiles) == seen


def test_closures_over_tracers_inside_jit():
    @ember.jit
    def outer(x, y):
        return ember.grad(lambda p: (p * y).sum() * (p * y).sum())(x)

    for y in (1.0, 2.0, 3.0):
        x = np.arange(3, dtype=np.float32)
        expected = jax.grad(lambda p: (p * y).sum() * (p * y).sum())(x)
        np.testing.assert_allclose(np.asarray(outer(x, np.full(3, y, np.float32))), expected, rtol=1e-6)


def test_functions_of_the_same_program_share_one_executable(compiles):
    x, y = ember.asarray(np.ones(4, np.float32)), ember.asarray(np.zeros(4, np.float32))
    ember.jit(lambda v: enp.sin(v) * 2)(x)
    seen = len(compiles)
    ember.jit(lambda v: enp.sin(v) * 2)(y)
    ember.jit(lambda u: enp.sin(u) * 2)(x)
    assert len(compiles) == seen
    np.testing.assert_allclose(np.asarray(ember.jit(lambda v: enp.sin(v) * 3)(x)), 3 * np.sin(1.0), rtol=1e-6)
    assert len(compiles) == seen + 1


def test_error_lines_are_those_of_each_closure():
    x = ember.asarray(np.ones(2, np.float32))
    lines = []
    with ember.config.override(debug_nans=True):
        for fun in [lambda p: enp.log(p - 2.0).sum(),
                    lambda p: enp.log(p - 2.0).sum()]:
            with pytest.raises(FloatingPointError, match=r"encountered in log at .*test_program_cache.py:(\d+)") \
                    as err:
                ember.value_and_grad(fun)(x)
            lines.append(str(err.value).split("test_program_cache.py:")[1].split()[0])
    assert lines[0] != lines[1]


def test_the_program_caches_are_bounded_and_cleared():
    caches = (compiler._executables, compiler._lowerings, templates._transformed)
    with ember.config.override(program_cache_size=3):
        for k in range(8):
            x = ember.asarray(np.ones(k + 1, np.float32))
            np.testing.assert_allclose(np.asarray(ember.grad(lambda p: (p * x).sum())(x * 2)), np.ones(k + 1))
        assert all(0 < len(cache) <= 3 for cache in caches)
    ember.clear_caches()
    assert all(len(cache) == 0 for cache in caches)


def test_closed_over_arrays_are_arguments_not_text():
    x = ember.asarray(np.ones(3, np.float32))
    texts, results = [], []
    for w in (np.arange(3, dtype=np.float32), np.full(3, 7.0, np.float32)):
        for const in (w, ember.asarray(w)):
            f = ember.jit(lambda v: v * const)
            texts.append(f.lower(x).as_text())
            results.append(np.asarray(f(x)))
    assert len(set(texts)) == 1
    np.testing.assert_array_equal(results, [[0, 1, 2]] * 2 + [[7, 7, 7]] * 2)
