"""Forward mode and Jacobians (jvp, linearize, jacfwd, jacrev, jacobian, hessian) against JAX in float64."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp

pytestmark = pytest.mark.usefixtures("ember_x64")  # float64 inputs and oracles (numpy, JAX in x64 mode)

rng = np.random.default_rng(1)
W = rng.normal(size=(3, 4))
X = rng.normal(size=4)
B = rng.normal(size=3)


def model(np_):
    def f(params, x):
        h = np_.tanh(params["w"] @ x + params["b"])
        return {"out": h * x[:3], "sum": np_.sum(h ** 2)}
    return f


PARAMS = {"w": W, "b": B}


def assert_trees_close(got, expected, rtol=1e-9):
    got_leaves, expected_leaves = ember.tree.leaves(got), jax.tree.leaves(expected)
    assert len(got_leaves) == len(expected_leaves)
    assert ember.tree.structure(got).num_leaves == jax.tree.structure(expected).num_leaves
    for g, e in zip(got_leaves, expected_leaves):
        assert np.shape(g) == np.shape(e)
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=rtol, atol=1e-12)


def test_jvp_of_a_pytree_function():
    tangents = ({"w": np.ones_like(W), "b": np.zeros_like(B)}, np.ones_like(X))
    out, t = ember.jvp(model(enp), (PARAMS, X), tangents)
    out_j, t_j = jax.jvp(model(jnp), (PARAMS, X), tangents)
    assert_trees_close(out, out_j)
    assert_trees_close(t, t_j)


def test_jvp_has_aux():
    def f(x):
        return enp.sin(x), {"aux": x * 2}
    out, t, aux = ember.jvp(f, (X,), (np.ones_like(X),), has_aux=True)
    np.testing.assert_allclose(np.asarray(t), np.cos(X))
    np.testing.assert_allclose(np.asarray(aux["aux"]), X * 2)


def test_integer_inputs_and_outputs_take_float0_tangents():
    def f(x, n):
        return x * n, n * 2
    out, (t_float, t_int) = ember.jvp(f, (2.0, 3), (1.0, np.zeros((), ember.float0)))
    assert float(t_float) == 3.0 and t_int.dtype == ember.float0 and t_int.dtype == jax.dtypes.float0


@pytest.mark.parametrize("primal,tangent,error,match", [
    (np.float32(1), np.float64(1), TypeError, "the tangent must be float32, but it is float64"),
    (np.ones(3), np.ones(2), ValueError, "different shapes"),
    (np.int32(1), np.float32(1), TypeError, "the tangent must be float0"),
])
def test_jvp_checks_tangents(primal, tangent, error, match):
    with pytest.raises(error, match=match):
        ember.jvp(enp.sin, (primal,), (tangent,))


def test_jvp_checks_structures():
    with pytest.raises(TypeError, match="must be a tuple or a list"):
        ember.jvp(enp.sin, X, X)
    with pytest.raises(TypeError, match="same tree structure"):
        ember.jvp(lambda p: p["a"], ({"a": X},), ({"b": X},))


def test_linearize_matches_jvp_and_reuses_the_primal_work():
    out, f_jvp = ember.linearize(model(enp), PARAMS, X)
    tangents = ({"w": rng.normal(size=W.shape), "b": rng.normal(size=B.shape)}, rng.normal(size=X.shape))
    _, t_j = jax.jvp(model(jnp), (PARAMS, X), tangents)
    assert_trees_close(f_jvp(*tangents), t_j)
    out_j, f_jvp_j = jax.linearize(model(jnp), PARAMS, X)
    assert_trees_close(out, out_j)
    with pytest.raises(TypeError, match="structure of the primals"):
        f_jvp(X)


@pytest.mark.parametrize("name", ["jacfwd", "jacrev", "jacobian"])
@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1, 0)])
def test_jacobians_of_pytree_functions(name, argnums):
    got = getattr(ember, name)(model(enp), argnums=argnums)(PARAMS, X)
    expected = getattr(jax, name)(model(jnp), argnums=argnums)(PARAMS, X)
    assert_trees_close(got, expected)


def test_jacfwd_equals_jacrev():
    f = model(enp)
    assert_trees_close(ember.jacfwd(f, argnums=(0, 1))(PARAMS, X),
                       jax.jacrev(model(jnp), argnums=(0, 1))(PARAMS, X))
    assert_trees_close(ember.jacfwd(f)(PARAMS, X), ember.jacrev(f)(PARAMS, X))


@pytest.mark.parametrize("name", ["jacfwd", "jacrev"])
def test_jacobians_has_aux(name):
    def f(x):
        return enp.sin(x) * x, x.sum()
    jac, aux = getattr(ember, name)(f, has_aux=True)(X)
    jac_j, aux_j = getattr(jax, name)(lambda x: (jnp.sin(x) * x, x.sum()), has_aux=True)(X)
    np.testing.assert_allclose(np.asarray(jac), jac_j, rtol=1e-9)
    np.testing.assert_allclose(float(aux), float(aux_j))


@pytest.mark.slow  # (3.4 s; hessian by default: tests/test_jax_docs.py and the composition tests)
def test_hessian_matches_jax():
    def f(params, x, np_):
        return np_.sum(np_.tanh(params["w"] @ x + params["b"]) ** 2) * np_.sum(x ** 3)
    got = ember.hessian(lambda p, x: f(p, x, enp), argnums=(0, 1))(PARAMS, X)
    expected = jax.hessian(lambda p, x: f(p, x, jnp), argnums=(0, 1))(PARAMS, X)
    assert_trees_close(got, expected)


def test_jacobians_reject_integer_inputs():
    with pytest.raises(TypeError, match=r"jacfwd\(sin\) requires floating-point inputs, got i32\[3\]"):
        ember.jacfwd(enp.sin)(np.arange(3, dtype=np.int32))
    with pytest.raises(TypeError, match=r"jacrev\(sin\) requires floating-point inputs"):
        ember.jacrev(enp.sin)(np.arange(3, dtype=np.int32))


def test_hessian_vector_products_three_ways():
    def f(x, np_):
        return np_.sum(np_.sin(x) * x ** 2)
    v = rng.normal(size=X.shape)
    expected = jax.hessian(lambda x: f(x, jnp))(X) @ v
    fwd_over_rev = ember.jvp(ember.grad(lambda x: f(x, enp)), (X,), (v,))[1]
    rev_over_rev = ember.grad(lambda x: enp.vdot(ember.grad(lambda y: f(y, enp))(x), v))(X)
    rev_over_fwd = ember.grad(lambda x: ember.jvp(lambda y: f(y, enp), (x,), (v,))[1])(X)
    for got in (fwd_over_rev, rev_over_rev, rev_over_fwd):
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-9)


def test_jvp_of_an_ir_returns_an_ir():
    ir = ember.stage_out(lambda x, n: enp.sin(x) * n, ember.ShapedArray((3,), "f64"), ember.ShapedArray((), "i32"))
    jir = ember.jvp(ir)
    ember.check_ir(jir)
    assert [a.str_short() for a in jir.in_avals] == ["f64[3]", "i32[]", "f64[3]"]  # float inputs get tangents
    out, tangent = ember.compile(jir)(X[:3], np.int32(2), np.ones(3))
    np.testing.assert_allclose(np.asarray(tangent), 2 * np.cos(X[:3]))
    again = ember.jvp(jir)  # transformable again: second derivatives
    ember.check_ir(again)


def test_jacobians_outside_jit_compile_once_per_signature():
    from ember._api import caches

    def f(x):
        return enp.tanh(x) * x.sum()
    for _ in range(3):
        ember.jacfwd(f)(X)  # a new wrapper each time: the compiled program is kept per (function, config)
        ember.jacrev(f)(X)
    assert len(caches.cache_for(f, ("jacfwd", 0, False, False), "").executables) == 1  # (holomorphic=False)
    assert len(caches.cache_for(f, ("jacrev", 0, False, False), "").executables) == 1


def test_jacobians_take_non_array_arguments():
    def f(x, mode):
        return enp.sin(x) if mode == "sin" else enp.cos(x)
    np.testing.assert_allclose(np.asarray(ember.jacfwd(f)(X, "sin")), np.diag(np.cos(X)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ember.jacrev(f)(X, "cos")), np.diag(-np.sin(X)), rtol=1e-12)


def test_linearize_keeps_its_split_per_signature():
    from ember._api import caches

    def f(x):
        return enp.sin(x) * x
    for _ in range(3):
        out, f_jvp = ember.linearize(f, X)
        f_jvp(np.ones_like(X))
    assert len(caches.per_function(f, "linearize", dict)) == 1
