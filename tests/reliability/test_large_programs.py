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


@pytest.mark.parametrize("limit", [pytest.param(1, marks=pytest.mark.slow), 20000])  # (limit 1: 4 s, -m slow)
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


def _compiled_shapes(monkeypatch) -> list[tuple[int, int]]:
    """(parameters, results) of each program the transformations outside jit compile while the test runs."""
    import ember._api.caches as caches
    shapes: list[tuple[int, int]] = []
    original = caches.compile_staged

    def counted(ir, name, *rest):
        shapes.append((len(ir.in_vars), len(ir.outs)))
        return original(ir, name, *rest)
    monkeypatch.setattr(caches, "compile_staged", counted)
    return shapes


def test_grad_over_many_leaves_compiles_only_what_it_computes(monkeypatch):
    """The gradient of a sum of n leaves is one value: its program used to take the n leaves and return that value n
    times, and XLA's compile grows faster than a program's parameters and results (10000 leaves: 4 s, 20000: 17 s,
    100000: many minutes). The program now takes the inputs its live code reads (none) and returns each distinct
    value once (one), which every leaf's gradient is: the same Array, as JAX's grad outside jit returns."""
    shapes = _compiled_shapes(monkeypatch)
    n = 5000
    params = {str(i): np.float32(i) for i in range(n)}
    loss = lambda p: sum(p.values())  # noqa: E731
    grads = ember.grad(loss)(params)
    assert shapes == [(0, 1)]
    assert sorted(grads) == sorted(params) and all(float(g) == 1.0 for g in grads.values())
    assert grads["0"] is grads[str(n - 1)]
    again = ember.grad(loss)({k: np.float32(2 * v) for k, v in params.items()})
    assert shapes == [(0, 1)] and float(again["7"]) == 1.0  # (the cached program)
    # each output of a vjp's pullback that is a distinct value stays distinct; unread inputs are not parameters
    out, pullback = ember.vjp(lambda a, b, c: (a * 2.0, a * 2.0 + b), 1.0, 2.0, 3.0)
    cts = pullback((enp.float32(1.0), enp.float32(1.0)))
    assert [float(c) for c in cts] == [4.0, 1.0, 0.0]


def test_a_wide_program_runs_op_by_op(programs):
    """A transformation outside jit whose program reads more than MAX_COMPILED_WIDTH inputs and returns as many
    distinct outputs together runs op by op (a sum of squares over 3000 leaves: 6000), one under it compiles
    (1000 leaves: 2000); the gradients are 2x either way."""
    from ember._api.caches import MAX_COMPILED_WIDTH
    assert 2 * 1000 <= MAX_COMPILED_WIDTH < 2 * 3000
    for n, compiled in ((3000, False), (1000, True)):
        params = {str(i): np.float32(i % 7) for i in range(n)}
        grads = ember.grad(lambda p: sum(v * v for v in p.values()))(params)
        assert all(float(grads[str(i)]) == 2.0 * (i % 7) for i in range(n))
        assert bool(programs) == compiled, (n, programs)
