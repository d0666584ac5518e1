"""Transformations outside jit compile their program up to ember.config.max_compiled_equations equations and run a
larger one primitive at a time, as JAX's transformations outside jit do: XLA's compile time grows faster than the
program (a grad over 32000 parameters compiled for three and a half minutes; it takes seconds op by op). Each API
gives the same values either way; jit compiles whatever the size."""
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp

RNG = np.random.default_rng(0)
PARAMS = {f"p{i}": RNG.standard_normal(3).astype(np.float32) for i in range(6)}
X = RNG.standard_normal(3).astype(np.float32)


def loss(np_: Any, p: dict[str, Any], x: Any) -> Any:
    total = 0.0
    for v in p.values():
        total = total + np_.sum(np_.tanh(v * x) ** 2)
    return total


def f(np_: Any, x: Any) -> Any:
    return np_.sin(x) * np_.cos(2.0 * x) + x ** 3


def calls(np_: Any, api: Any, p: dict[str, Any], x: Any) -> list[Any]:
    """Every transformation's result, as a flat list of arrays (api: ember or jax)."""
    out, pullback = api.vjp(lambda v: f(np_, v), x)
    primal, f_jvp = api.linearize(lambda v: f(np_, v), x)
    transposed = api.linear_transpose(lambda v: 2.0 * v + v[::-1], x)(np_.ones(3, np_.float32))
    results = [api.grad(lambda q: loss(np_, q, x))(p), api.value_and_grad(lambda q: loss(np_, q, x))(p),
               out, pullback(np_.ones(3, np_.float32)),
               api.jvp(lambda v: f(np_, v), (x,), (np_.ones(3, np_.float32),)),
               primal, f_jvp(np_.full(3, 0.5, np_.float32)), transposed,
               api.vmap(lambda v: f(np_, v))(np_.stack([x, 2 * x])),
               api.jacrev(lambda v: f(np_, v))(x), api.jacfwd(lambda v: f(np_, v))(x),
               api.hessian(lambda v: f(np_, v))(x)]
    return jax.tree_util.tree_leaves(results)


@pytest.mark.parametrize("limit", [1, 20000])
def test_every_transformation_matches_jax_compiled_or_op_by_op(limit, programs):
    p, x = {k: enp.asarray(v) for k, v in PARAMS.items()}, enp.asarray(X)
    with ember.config.override(max_compiled_equations=limit):
        got = calls(enp, ember, p, x)
    want = calls(jnp, jax, PARAMS, X)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=1e-6)
    if limit == 1:
        assert programs == []  # everything ran op by op
    else:
        assert any(name.startswith("grad(") for name in programs) and any("vjp(" in n for n in programs)


def test_a_large_grad_outside_jit_runs_op_by_op_and_jit_still_compiles(programs):
    p = {k: enp.asarray(v) for k, v in PARAMS.items()}
    want = jax.grad(lambda q: loss(jnp, q, X))(PARAMS)
    with ember.config.override(max_compiled_equations=10):  # the grad program has about 40
        for _ in range(2):  # (the second call reuses the staged IR, and still compiles nothing)
            got = ember.grad(lambda q: loss(enp, q, enp.asarray(X)))(p)
            for k in PARAMS:
                np.testing.assert_allclose(np.asarray(got[k]), np.asarray(want[k]), rtol=2e-5, atol=1e-6)
        assert programs == []
        jitted = ember.jit(ember.grad(lambda q: loss(enp, q, enp.asarray(X))))(p)
        assert len(programs) == 1
    for k in PARAMS:
        np.testing.assert_allclose(np.asarray(jitted[k]), np.asarray(want[k]), rtol=2e-5, atol=1e-6)


def test_the_limit_is_an_option():
    assert ember.config.max_compiled_equations == 20000
    with pytest.raises((TypeError, ValueError)):
        ember.config.update("max_compiled_equations", -1)
