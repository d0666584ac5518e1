"""Function-level reverse mode: grad, value_and_grad, vjp, pytrees, has_aux, composition with jit, grad of grad."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp

pytestmark = pytest.mark.usefixtures("ember_x64")  # float64 inputs and oracles (numpy, JAX in x64 mode)


def mlp_loss(params, x, y):
    h = enp.tanh(x @ params["w1"] + params["b1"])
    pred = h @ params["w2"] + params["b2"]
    return enp.mean((pred - y) ** 2)


def jax_mlp_loss(params, x, y):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    pred = h @ params["w2"] + params["b2"]
    return jnp.mean((pred - y) ** 2)


def _mlp_data(dtype=np.float64):
    rng = np.random.default_rng(0)
    params = {"w1": rng.normal(size=(4, 8)), "b1": rng.normal(size=(8,)), "w2": rng.normal(size=(8, 2)),
              "b2": rng.normal(size=(2,))}
    params = {k: v.astype(dtype) for k, v in params.items()}
    return params, rng.normal(size=(5, 4)).astype(dtype), rng.normal(size=(5, 2)).astype(dtype)


def _assert_tree_close(a, b, rtol=1e-9):
    leaves_a, tree_a = ember.tree_util.tree_flatten(a)
    leaves_b = jax.tree_util.tree_leaves(b)
    assert len(leaves_a) == len(leaves_b)
    for x, y in zip(leaves_a, leaves_b):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=1e-12)


def test_grad_pytree_matches_jax():
    params, x, y = _mlp_data()
    g = ember.grad(mlp_loss)(params, x, y)
    assert set(g) == set(params)
    _assert_tree_close(g, jax.grad(jax_mlp_loss)(params, x, y))


def test_value_and_grad_argnums_tuple():
    params, x, y = _mlp_data()
    value, (gp, gx) = ember.value_and_grad(mlp_loss, argnums=(0, 1))(params, x, y)
    jvalue, (jgp, jgx) = jax.value_and_grad(jax_mlp_loss, argnums=(0, 1))(params, x, y)
    np.testing.assert_allclose(float(value), float(jvalue), rtol=1e-12)
    _assert_tree_close(gp, jgp)
    _assert_tree_close(gx, jgx)


def test_argnums_order_is_respected():
    f = lambda a, b: enp.sum(a * b * b)  # noqa: E731
    a, b = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    gb, ga = ember.grad(f, argnums=(1, 0))(a, b)
    np.testing.assert_allclose(np.asarray(ga), b * b)
    np.testing.assert_allclose(np.asarray(gb), 2 * a * b)


def test_has_aux():
    def f(x):
        return enp.sum(x ** 2), {"norm": enp.sqrt(enp.sum(x ** 2)), "n": x.shape[0]}

    x = np.array([3.0, 4.0])
    (value, aux), g = ember.value_and_grad(lambda x: (f(x)[0], f(x)[1]["norm"]), has_aux=True)(x)
    np.testing.assert_allclose(float(value), 25.0)
    np.testing.assert_allclose(float(aux), 5.0)
    np.testing.assert_allclose(np.asarray(g), 2 * x)
    g2, aux2 = ember.grad(lambda x: (enp.sum(x ** 3), x * 2), has_aux=True)(x)
    np.testing.assert_allclose(np.asarray(g2), 3 * x ** 2)
    np.testing.assert_allclose(np.asarray(aux2), 2 * x)


def test_grad_of_grad():
    f = lambda x: enp.sum(enp.sin(x) * x ** 3)  # noqa: E731
    x = np.array([0.3, -1.2, 2.0])
    hvp_diag = ember.grad(lambda x: enp.sum(ember.grad(f)(x)))(x)
    expected = jax.grad(lambda x: jnp.sum(jax.grad(lambda x: jnp.sum(jnp.sin(x) * x ** 3))(x)))(x)
    np.testing.assert_allclose(np.asarray(hvp_diag), np.asarray(expected), rtol=1e-10)


@pytest.mark.parametrize("fn,jfn", [
    (lambda x: enp.tanh(x) ** 3, lambda x: jnp.tanh(x) ** 3),
    (lambda x: enp.exp(-x * x), lambda x: jnp.exp(-x * x)),
    (lambda x: enp.log1p(x * x) / (1 + x * x), lambda x: jnp.log1p(x * x) / (1 + x * x)),
    (lambda x: enp.maximum(x, 0.0) * x, lambda x: jnp.maximum(x, 0.0) * x),
    (lambda x: 1 / (1 + enp.exp(-x)), lambda x: 1 / (1 + jnp.exp(-x))),
])
def test_second_derivatives(fn, jfn):
    x = np.array([0.3, -0.7, 1.5])
    d2 = ember.grad(lambda x: enp.sum(ember.grad(lambda x: enp.sum(fn(x)))(x)))(x)
    jd2 = jax.grad(lambda x: jnp.sum(jax.grad(lambda x: jnp.sum(jfn(x)))(x)))(x)
    np.testing.assert_allclose(np.asarray(d2), np.asarray(jd2), rtol=1e-10, atol=1e-12)
    d3 = ember.grad(lambda x: enp.sum(ember.grad(lambda x: enp.sum(ember.grad(lambda x: enp.sum(fn(x)))(x)))(x)))(x)
    jd3 = jax.grad(lambda x: jnp.sum(jax.grad(lambda x: jnp.sum(jax.grad(lambda x: jnp.sum(jfn(x)))(x)))(x)))(x)
    np.testing.assert_allclose(np.asarray(d3), np.asarray(jd3), rtol=1e-9, atol=1e-12)


def test_jit_of_grad_is_one_program():
    params, x, y = _mlp_data(np.float32)
    step = ember.jit(ember.value_and_grad(mlp_loss))
    ir = step.trace(params, x, y).jaxpr
    assert not any(eqn.prim.name == "pjit" for eqn in ir.eqns)
    text = step.lower(params, x, y).as_text()
    assert text.count("func.func") == 1 and "dot_general" in text
    value, g = step(params, x, y)
    jvalue, jg = jax.value_and_grad(jax_mlp_loss)(params, x, y)
    np.testing.assert_allclose(float(value), float(jvalue), rtol=1e-5)
    _assert_tree_close(g, jg, rtol=1e-4)


def test_grad_of_jit_and_closures():
    w = np.array([1.0, -2.0, 0.5])

    @ember.jit
    def inner(x):
        return enp.sum(enp.sin(x * w))

    g = ember.grad(lambda x: inner(x) * 2.0)(np.array([0.1, 0.2, 0.3]))
    np.testing.assert_allclose(np.asarray(g), 2.0 * w * np.cos(np.array([0.1, 0.2, 0.3]) * w))

    def outer(x):
        return ember.grad(lambda y: enp.sum(x * y * y))(x)  # closes over the outer tracer x
    np.testing.assert_allclose(np.asarray(ember.jit(outer)(np.array([1.0, 3.0]))), [2.0, 18.0])
    hess_diag = ember.grad(lambda x: enp.sum(outer(x)))(np.array([1.0, 3.0]))
    np.testing.assert_allclose(np.asarray(hess_diag), [4.0, 12.0])  # d/dx 2x^2


def test_vjp_matches_jax():
    def f(x, y):
        return {"a": enp.sin(x) * y, "b": enp.sum(x * y)}

    def jf(x, y):
        return {"a": jnp.sin(x) * y, "b": jnp.sum(x * y)}

    x, y = np.array([0.1, 0.5, -0.3]), np.array([2.0, 1.0, 3.0])
    out, vjp_fn = ember.vjp(f, x, y)
    jout, jvjp_fn = jax.vjp(jf, x, y)
    _assert_tree_close(out, jout)
    ct = {"a": np.array([1.0, -1.0, 0.5]), "b": np.array(2.0)}
    cts = vjp_fn(ct)
    assert isinstance(cts, tuple) and len(cts) == 2
    _assert_tree_close(cts, jvjp_fn(ct))
    _assert_tree_close(vjp_fn(ct), jvjp_fn(ct))  # callable again


def test_vjp_under_jit_and_has_aux():
    def f(x):
        return enp.exp(x), enp.sum(x)

    @ember.jit
    def pulled(x, ct):
        out, vjp_fn, aux = ember.vjp(f, x, has_aux=True)
        return vjp_fn(ct)[0], aux

    x = np.array([0.0, 1.0])
    g, aux = pulled(x, np.array([1.0, 2.0]))
    np.testing.assert_allclose(np.asarray(g), np.exp(x) * [1.0, 2.0])
    np.testing.assert_allclose(float(aux), 1.0)


def test_vjp_cotangent_mismatch_is_clear():
    _, vjp_fn = ember.vjp(lambda x: x * 2, np.ones(3))
    with pytest.raises(TypeError, match=r"cotangent 0 must be f64\[3\] like the output, got f64\[4\]"):
        vjp_fn(np.ones(4))


def test_non_scalar_output_is_an_error():
    with pytest.raises(TypeError, match=r"grad\(<lambda>\) requires a scalar output \(one element\), got f32\[3\]"):
        ember.grad(lambda x: x * 2)(np.ones(3, np.float32))


def test_integer_inputs():
    with pytest.raises(TypeError, match=r"requires floating-point inputs, but input 0 is i32\[3\]"):
        ember.grad(lambda x: enp.sum(x * 2.0))(np.ones(3, np.int32))
    g = ember.grad(lambda x, n: enp.sum(x * n), argnums=(0, 1), allow_int=True)(np.ones(2), np.array([2, 3]))
    np.testing.assert_allclose(np.asarray(g[0]), [2.0, 3.0])
    assert g[1].dtype == ember.float0 and g[1].shape == (2,)  # as JAX


def test_integer_intermediates_get_no_gradient():
    def f(x):
        idx = enp.argmax(x)  # integer-valued, not differentiable
        return enp.sum(x * x) + idx.astype("float64")
    np.testing.assert_allclose(np.asarray(ember.grad(f)(np.array([1.0, 3.0]))), [2.0, 6.0])


def test_python_scalar_and_one_element_inputs():
    assert float(ember.grad(lambda x: x * x)(3.0)) == 6.0
    np.testing.assert_allclose(np.asarray(ember.grad(lambda x: (x * x * 4))(np.array([2.0], np.float32))), [16.0])


def test_grad_ir_is_clean_and_printable():
    ir = ember.stage_out(lambda x, y: enp.sum(enp.sin(x) * 3.0), ember.ShapedArray((3,), "f32"),
                         ember.ShapedArray((3,), "f32"))
    gir = ember.grad(ir)
    names = [e.prim.name for e in gir.eqns]
    assert "sin" not in names  # the forward value is not needed for the gradient: dead code was removed
    assert "cos" in names
    assert str(gir).startswith("{ lambda a:f32[3] b:f32[3] . let")
    ember.check_ir(gir)


def test_gradient_cache_does_not_retrace():
    calls = []

    def f(x):
        calls.append(1)
        return enp.sum(x * x)

    g = ember.grad(f)
    g(np.ones(3))
    g(np.ones(3) * 2)
    assert len(calls) == 1
    g(np.ones(4))
    assert len(calls) == 2


def test_new_wrappers_of_the_same_function_share_the_cache():
    calls = []

    def f(x):
        calls.append(1)
        return enp.sum(enp.sin(x))

    for _ in range(3):
        ember.grad(f)(np.ones(3))
        ember.jit(f)(np.ones(3))
    assert len(calls) == 2  # one trace for grad(f), one for jit(f)
    import gc
    import weakref
    ref = weakref.ref(f)
    del f
    gc.collect()
    assert ref() is None  # the caches do not keep the function alive


@pytest.mark.parametrize("compose", ["jit(grad)", "grad(jit)", "jit(grad(jit))", "grad(grad(jit))",
                                     "jit(grad(grad))", "vjp(jit)"])
def test_compositions_agree_with_jax(compose):
    def f(x):
        return enp.sum(enp.tanh(x) * enp.exp(-x * x))

    def jf(x):
        return jnp.sum(jnp.tanh(x) * jnp.exp(-x * x))

    x = np.array([0.2, -0.4, 1.1])
    if compose == "jit(grad)":
        ours, ref = ember.jit(ember.grad(f))(x), jax.grad(jf)(x)
    elif compose == "grad(jit)":
        ours, ref = ember.grad(ember.jit(f))(x), jax.grad(jf)(x)
    elif compose == "jit(grad(jit))":
        ours, ref = ember.jit(ember.grad(ember.jit(f)))(x), jax.grad(jf)(x)
    elif compose == "grad(grad(jit))":
        g = ember.grad(lambda x: enp.sum(ember.grad(ember.jit(f))(x)))
        ours, ref = g(x), jax.grad(lambda x: jnp.sum(jax.grad(jf)(x)))(x)
    elif compose == "jit(grad(grad))":
        g = ember.jit(ember.grad(lambda x: enp.sum(ember.grad(f)(x))))
        ours, ref = g(x), jax.grad(lambda x: jnp.sum(jax.grad(jf)(x)))(x)
    else:
        ours = ember.vjp(ember.jit(f), x)[1](np.float64(1.0))[0]
        ref = jax.vjp(jf, x)[1](1.0)[0]
    np.testing.assert_allclose(np.asarray(ours), np.asarray(ref), rtol=1e-10, atol=1e-12)


def test_non_array_arguments_outside_argnums_pass_through():
    def app(f, x):
        return f(x)
    assert float(ember.grad(app, 1)(enp.sin, 0.0)) == 1.0
    value, g = ember.value_and_grad(lambda x, mode: enp.sin(x) if mode == "sin" else x)(0.0, "sin")
    assert float(g) == 1.0
    with pytest.raises(TypeError, match="not a valid ember array"):
        ember.grad(app, 0)(enp.sin, 0.0)  # a differentiated argument must be arrays


def test_abs_slope_at_zero_is_one_as_jax():
    """abs's derivative at 0 (and -0.0) is 1, below 0 (and at NaN) -1: JAX's convention (select(x >= 0, g, -g)),
    in reverse and forward mode."""
    x = np.array([0.0, -0.0, -1.5, 2.0, np.nan])
    want = jax.grad(lambda v: jnp.sum(jnp.abs(v)))(x)
    np.testing.assert_array_equal(np.asarray(ember.grad(lambda v: enp.sum(enp.abs(v)))(x)), want)
    np.testing.assert_array_equal(np.asarray(ember.jvp(enp.abs, (x,), (np.ones_like(x),))[1]),
                                  jax.jvp(jnp.abs, (x,), (np.ones_like(x),))[1])


def test_float0_cotangents_leave_jit_as_jax_returns_them():
    """grad(allow_int=True) under jit returns the integer argument's float0 cotangent, as JAX's jit does (no IR
    value can be float0: the program's output tree makes it)."""
    f = ember.jit(lambda x, n: ember.grad(lambda x, n: (x * n).sum(), argnums=(0, 1), allow_int=True)(x, n))
    gx, gn = f(np.ones(2, np.float32), np.arange(2, dtype=np.int32))
    np.testing.assert_array_equal(np.asarray(gx), [0.0, 1.0])
    assert isinstance(gn, np.ndarray) and gn.dtype == ember.dtypes.float0 and gn.shape == (2,)


def test_aux_values_that_are_not_arrays_are_returned_as_they_are():
    """As JAX's grad, value_and_grad, vjp and jvp (outside jit): aux leaves that are not arrays (a string, a Python
    number) come back as they are, and the function runs again on each call (its Python results are fresh)."""
    x = np.ones(2, np.float32)
    g, aux = ember.grad(lambda x: (x.sum(), "hi"), has_aux=True)(x)
    assert aux == "hi" and np.asarray(g).tolist() == [1.0, 1.0]
    (v, (s, n, y)), g = ember.value_and_grad(lambda x: (x.sum(), ("hi", 3, x)), has_aux=True)(x)
    assert (s, n, type(n)) == ("hi", 3, int) and float(v) == 2.0 and np.asarray(y).tolist() == [1.0, 1.0]
    assert ember.vjp(lambda x: (x, "a"), x, has_aux=True)[2] == "a"
    assert ember.jvp(lambda x: (x, "a"), (x,), (x,), has_aux=True)[2] == "a"
    calls = []

    def f(x):
        calls.append(1)
        return x.sum(), len(calls)
    h = ember.grad(f, has_aux=True)
    assert [h(x)[1] for _ in range(3)] == [1, 2, 3]
    with pytest.raises(TypeError, match="str"):  # (under jit a result must be an array, as JAX's)
        ember.jit(ember.grad(lambda x: (x.sum(), "hi"), has_aux=True))(x)
