"""ember.experimental.jet against jax.experimental.jet: the derivatives of a function along a truncated Taylor path
of its inputs (and jet2's normalized coefficients), for elementwise functions, products, a network, pytrees in and
out, orders 0 to 4, float32 and float64; under jit, vmap and grad; the errors."""
import jax
import jax.experimental.jet as jjet
import numpy as np
import pytest

import ember
import ember.experimental.jet as ejet

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")


def _functions(lib):
    np_, lax = lib.numpy, lib.lax
    w = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
    return {
        "cube": lambda x: x ** 3,
        "sin_exp": lambda x: np_.sin(x) * np_.exp(-x),
        "tanh_log1p": lambda x: np_.tanh(x) + np_.log1p(x * x),
        "log1pexp_cumsum": lambda x: np_.cumsum(np_.log(1.0 + np_.exp(x))),
        "network": lambda x: np_.tanh(w @ np_.tanh(x)).sum(),
        "rsqrt_div": lambda x: lax.rsqrt(1.0 + x * x) / (2.0 + np_.cos(x)),
        "where_max": lambda x: np_.where(x > 0.1, x ** 2, np_.maximum(x, -0.2)),
    }


NAMES = list(_functions(ember))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("order", [1, 3])
def test_derivatives_are_jaxs(name, order):
    x = np.linspace(0.2, 0.9, 4, dtype=np.float32)
    terms = [np.cos(np.arange(4, dtype=np.float32) + k).astype(np.float32) for k in range(order)]
    ours = ejet.jet(_functions(ember)[name], (x,), (terms,))
    theirs = jjet.jet(_functions(jax)[name], (x,), (terms,))
    np.testing.assert_allclose(np.asarray(ours[0]), np.asarray(theirs[0]), rtol=1e-6, atol=1e-6)
    assert len(ours[1]) == len(theirs[1]) == order
    for k, (o, t) in enumerate(zip(ours[1], theirs[1])):
        assert np.asarray(o).dtype == np.asarray(t).dtype and np.shape(o) == np.shape(t)
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=2e-5 * 10 ** k, atol=1e-5 * 10 ** k,
                                   err_msg=f"{name} order {k + 1}")


def test_functions_with_custom_derivatives_where_jax_has_no_rule():
    """JAX's jet stops at a custom_jvp function (softplus: UnexpectedTracerError in JAX 0.10.2); ember's
    differentiates through its JVP rule: the same numbers as JAX's jet of the formula written out."""
    x = np.linspace(-1.0, 1.0, 5, dtype=np.float32)
    terms = [np.ones(5, np.float32), np.full(5, 0.5, np.float32), np.full(5, -1.0, np.float32)]
    ours = ejet.jet(ember.nn.softplus, (x,), (terms,))
    theirs = jjet.jet(lambda v: jax.numpy.log1p(jax.numpy.exp(v)), (x,), (terms,))
    for o, t in zip(ember.tree.leaves(ours), jax.tree.leaves(theirs)):
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=2e-5, atol=2e-6)


def test_several_arguments_pytrees_jet2_and_order_zero():
    """Pytree outputs (as JAX) and pytree primals (JAX takes arrays only: its jet of the same function of the leaves
    is the oracle)."""
    def f(lib):
        return lambda x, p: {"a": x * p["s"], "b": (lib.numpy.sin(x) + p["s"] ** 2,)}
    primals = (np.float32(1.0), {"s": np.float32(2.0)})
    series = ([np.float32(1.0), np.float32(0.5), np.float32(-1.0)],
              [{"s": np.float32(0.0)}, {"s": np.float32(1.0)}, {"s": np.float32(0.25)}])
    leaf_primals = (primals[0], primals[1]["s"])
    leaf_series = (series[0], [term["s"] for term in series[1]])

    def g(x, s):
        return f(jax)(x, {"s": s})
    for ours, theirs in ((ejet.jet(f(ember), primals, series), jjet.jet(g, leaf_primals, leaf_series)),
                         (ejet.jet2(f(ember), primals, series), jjet.jet2(g, leaf_primals, leaf_series)),
                         (ejet.jet(f(ember), primals, series, factorial_scaled=False),
                          jjet.jet(g, leaf_primals, leaf_series, factorial_scaled=False))):
        assert ember.tree.structure(ours) == ember.tree.structure(theirs)
        for o, t in zip(ember.tree.leaves(ours), jax.tree.leaves(theirs)):
            np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-5)
    out, terms = ejet.jet(ember.numpy.sin, (np.float32(1.0),), ([],))
    assert terms == [] and np.isclose(float(out), np.sin(1.0))
    assert ejet.fact(5) == 120.0


def test_float64_under_jit_vmap_and_grad(ember_x64):
    x = np.linspace(-0.5, 0.7, 3)
    terms = [np.ones(3), np.full(3, 0.5), np.zeros(3), np.full(3, -2.0)]
    f = lambda lib: (lambda v: lib.numpy.exp(lib.numpy.sin(v)) * v)  # noqa: E731
    with jax.enable_x64(True):
        want = jjet.jet(f(jax), (x,), (terms,))
        want_grad = jax.grad(lambda v: jjet.jet(f(jax), (v,), (terms,))[1][-1].sum())(x)
        want_vmap = jax.vmap(lambda v: jjet.jet(f(jax), (v,), ([t[0] for t in terms],))[1][2])(x)
    got = ember.jit(lambda v: ejet.jet(f(ember), (v,), (terms,)))(x)
    for o, t in zip(ember.tree.leaves(got), jax.tree.leaves(want)):
        assert np.asarray(o).dtype == np.float64
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-12, atol=1e-12)
    got_grad = ember.grad(lambda v: ejet.jet(f(ember), (v,), (terms,))[1][-1].sum())(x)
    np.testing.assert_allclose(np.asarray(got_grad), np.asarray(want_grad), rtol=1e-11)
    got_vmap = ember.vmap(lambda v: ejet.jet(f(ember), (v,), ([t[0] for t in terms],))[1][2])(x)
    np.testing.assert_allclose(np.asarray(got_vmap), np.asarray(want_vmap), rtol=1e-12)


def test_errors():
    with pytest.raises(ValueError, match="inconsistent lengths"):
        ejet.jet(lambda x, y: x, (1.0, 2.0), ([1.0], [1.0, 2.0]))
    with pytest.raises(ValueError, match=r"term 1 of primal 0 has shape \(3,\), the primal \(2,\)"):
        ejet.jet(lambda x: x, (np.ones(2, np.float32),), ([np.ones(3, np.float32)],))
    with pytest.raises(TypeError, match=r"primal 0 must be a floating-point or complex array, got i32\[\]"):
        ejet.jet(lambda x: x, (np.int32(1),), ([np.int32(1)],))
    with pytest.raises(ValueError, match="2 primals but series for 1 arguments"):
        ejet.jet(lambda x, y: x, (1.0, 2.0), ([1.0],))
    with pytest.raises(TypeError, match="tuples or lists"):
        ejet.jet(lambda x: x, 1.0, ([1.0],))
