"""Gaps between ember and what JAX's documentation shows, each checked against JAX itself: pytrees whose aux data
is unhashable under jit, custom_jvp.defjvps, jvp of a custom_vjp function, the function vjp returns as a pytree
(jit takes it as an argument), linear_transpose, and vmap's sum_match."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp

LIBS = [(ember, enp), (jax, jnp)]
RNG = np.random.default_rng(0)


def _both(check):
    """check(lib, np_) for ember and for JAX: the pair of results."""
    return [check(lib, np_) for lib, np_ in LIBS]


def _assert_trees_close(got, expected, rtol=1e-6):
    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    expected_leaves, expected_tree = jax.tree_util.tree_flatten(expected)
    assert got_tree == expected_tree
    for g, e in zip(got_leaves, expected_leaves):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=rtol, atol=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# A registered pytree with unhashable (dict) aux data, as the custom-class example of JAX's "Common gotchas"
def _special_class(lib):
    class Special:
        def __init__(self, x, meta):
            self.x, self.meta = x, meta

    lib.tree_util.register_pytree_node(Special, lambda s: ((s.x,), s.meta), lambda meta, ch: Special(ch[0], meta))
    return Special


def test_jit_of_a_pytree_with_unhashable_aux_data():
    def run(lib, np_):
        Special = _special_class(lib)
        traces = []

        @lib.jit
        def scaled(s):
            traces.append(1)
            return s.x * s.meta["scale"]
        x = np.arange(3, dtype=np.float32)
        results = [scaled(Special(x, {"scale": 2.0})), scaled(Special(x + 1, {"scale": 2.0})),
                   scaled(Special(x, {"scale": 3.0}))]
        return results, len(traces)

    (got, got_traces), (expected, expected_traces) = _both(run)
    _assert_trees_close(got, expected)
    assert got_traces == expected_traces == 2  # an equal dict reuses the program; another value is a new one


def test_grad_and_vmap_of_a_pytree_with_unhashable_aux_data():
    def run(lib, np_):
        Special = _special_class(lib)
        s = Special(np.arange(1.0, 4.0, dtype=np.float32), {"scale": 2.0})
        grad = lib.grad(lambda s: np_.sum(np_.sin(s.x) * s.meta["scale"]))(s)
        batched = lib.vmap(lambda s: s.x * s.meta["scale"])(Special(np.ones((2, 3), np.float32), {"scale": 3.0}))
        return grad.x, grad.meta, batched

    (got_x, got_meta, got_batched), (expected_x, expected_meta, expected_batched) = _both(run)
    np.testing.assert_allclose(np.asarray(got_x), np.asarray(expected_x), rtol=1e-6)
    assert got_meta == expected_meta
    np.testing.assert_allclose(np.asarray(got_batched), np.asarray(expected_batched))


def test_treedefs_with_unhashable_aux_compare_by_value():
    Special = _special_class(ember)
    x = np.ones(2, np.float32)
    one = ember.tree_util.tree_structure(Special(x, {"scale": 2.0}))
    same = ember.tree_util.tree_structure(Special(x, {"scale": 2.0}))
    other = ember.tree_util.tree_structure(Special(x, {"scale": 3.0}))
    assert one == same and hash(one) == hash(same) and one != other
    assert len({one: 1, same: 2, other: 3}) == 2


# ---------------------------------------------------------------------------------------------------------------
# custom_jvp.defjvps and forward mode of a custom_vjp function
def _defjvps_function(lib, np_):
    @lib.custom_jvp
    def f(x, y):
        return np_.sin(x) * y

    f.defjvps(lambda x_dot, primal_out, x, y: np_.cos(x) * x_dot * y,
              lambda y_dot, primal_out, x, y: np_.sin(x) * y_dot * 10.0)  # (x10: the rule is used, not derived)
    return f


def test_defjvps_against_jax():
    def run(lib, np_):
        f = _defjvps_function(lib, np_)
        x, y = np.float32(0.7), np.float32(-1.3)
        return (f(x, y), lib.jvp(f, (x, y), (np.float32(1.0), np.float32(2.0))), lib.grad(f, (0, 1))(x, y),
                lib.vmap(lib.grad(f))(np.linspace(0, 1, 4, dtype=np.float32), np.ones(4, np.float32)))

    got, expected = _both(run)
    _assert_trees_close(got, expected)


def test_defjvps_with_a_missing_rule_and_nondiff_argnums():
    def run(lib, np_):
        f = lib.custom_jvp(lambda x, y: x * y)
        f.defjvps(None, lambda y_dot, out, x, y: x * y_dot)  # None: the output ignores x's tangent
        x, y = np.float32(3.0), np.float32(4.0)
        return lib.jvp(f, (x, y), (np.float32(1.0), np.float32(2.0))), lib.grad(f, (0, 1))(x, y)

    got, expected = _both(run)
    _assert_trees_close(got, expected)
    for lib, _ in LIBS:
        g = lib.custom_jvp(lambda n, x: x * n, nondiff_argnums=(0,))
        with pytest.raises(TypeError, match="nondiff_argnums"):
            g.defjvps(lambda t, out, n, x: t * n)


def test_jvp_of_a_custom_vjp_function_is_a_type_error():
    for lib, np_ in LIBS:
        f = lib.custom_vjp(lambda x: np_.sin(x))
        f.defvjp(lambda x: (np_.sin(x), x), lambda x, g: (g * np_.cos(x),))
        with pytest.raises(TypeError, match="custom_vjp"):
            lib.jvp(f, (1.0,), (1.0,))
        np.testing.assert_allclose(float(lib.grad(f)(1.0)), np.cos(1.0), rtol=1e-6)  # reverse mode is fine


def test_linearize_of_a_custom_vjp_function_as_jax():
    """JAX's linearize of a custom_vjp function works until its linear function is evaluated: transposing it applies
    bwd (so vjp through linearize, as equinox's checkpointed loops do); under vmap too; evaluating it, or jvp, is
    the error. ember's custom_lin (the tangents, known only to reverse mode) is that."""
    xs = np.array([0.5, 1.0, 2.0], np.float32)
    for lib, np_ in LIBS:
        f = lib.custom_vjp(lambda x: np_.sin(x))
        f.defvjp(lambda x: (np_.sin(x), np_.cos(x)), lambda c, g: (3.0 * g * c,))  # (bwd: 3 cos, not cos)
        y, lin = lib.linearize(f, 1.0)
        np.testing.assert_allclose(float(y), np.sin(1.0), rtol=1e-6)
        np.testing.assert_allclose(float(lib.linear_transpose(lin, 1.0)(1.0)[0]), 3 * np.cos(1.0), rtol=1e-6)
        with pytest.raises(TypeError, match="custom_vjp"):
            lin(1.0)
        batched = lib.vmap(lambda x: lib.linear_transpose(lib.linearize(f, x)[1], x)(np.float32(2))[0])(xs)
        np.testing.assert_allclose(np.asarray(batched), 6 * np.cos(xs), rtol=1e-6)
        g = lib.grad(lambda x: lib.linear_transpose(lib.linearize(f, x)[1], x)(1.0)[0])(1.0)
        np.testing.assert_allclose(float(g), -3 * np.sin(1.0), rtol=1e-6)  # (bwd at the residual, differentiated)


# ---------------------------------------------------------------------------------------------------------------
# The function vjp returns is a pytree (a Partial over the residuals): jit takes it as an argument
def test_linearize_function_is_a_pytree_jit_takes():
    """As JAX's: the linear function linearize returns is a Partial over its residuals, so a jitted function takes
    it as an argument (equinox passes it through filter_jit)."""
    x = RNG.standard_normal(3).astype(np.float32)
    for lib, np_ in LIBS:
        y, lin = lib.linearize(lambda v: np_.sin(v) * 2, x)
        t = np.ones(3, np.float32)
        np.testing.assert_allclose(np.asarray(lib.jit(lambda f, t: f(t))(lin, t)), 2 * np.cos(x), rtol=1e-6)
        assert lib.tree_util.tree_leaves(lin)  # (the residuals are its leaves)


def test_vjp_function_is_a_pytree_jit_takes():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    w = RNG.standard_normal((3, 4)).astype(np.float32)

    def run(lib, np_):
        traces = []

        @lib.jit
        def pull(f_vjp, ct):
            traces.append(1)
            return f_vjp(ct)

        def fun(x, w):
            return np_.tanh(x @ w), np_.sum(x * x)
        cts = (np.ones((2, 4), np.float32), np.float32(0.5))
        _, f_vjp = lib.vjp(fun, x, w)
        _, f_vjp_elsewhere = lib.vjp(fun, x + 1, w - 1)
        results = f_vjp(cts), pull(f_vjp, cts), pull(f_vjp_elsewhere, cts), f_vjp_elsewhere(cts)
        return results, len(traces), lib.tree_util.tree_leaves(f_vjp)

    (got, got_traces, got_leaves), (expected, _, _) = _both(run)
    _assert_trees_close(got, expected, rtol=1e-5)
    # JAX traces pull twice (the static parts of its vjp functions compare by identity); ember's vjp functions of
    # one signature have equal static parts, so jit compiles pull once
    assert got_traces == 1
    assert got_leaves and all(isinstance(leaf, ember.Array) for leaf in got_leaves)  # the residuals


def test_vjp_function_passed_through_jit_checks_its_cotangents():
    _, f_vjp = ember.vjp(lambda x: x * 2.0, np.ones(3, np.float32))
    with pytest.raises(TypeError, match="cotangent 0 must be f32\\[3\\]"):
        ember.jit(lambda f, ct: f(ct))(f_vjp, np.ones(2, np.float32))


# ---------------------------------------------------------------------------------------------------------------
# linear_transpose
class Spec:
    """A duck-typed primal: only shape and dtype (as JAX's docs allow)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, np.dtype(dtype)


def test_linear_transpose_of_the_docstring_example():
    def run(lib, np_):
        f_transpose = lib.linear_transpose(lambda x, y: 0.5 * x - 0.5 * y, Spec((), "float32"), Spec((), "float32"))
        return f_transpose(np.float32(1.0)), f_transpose(np.float32(-4.0))

    got, expected = _both(run)
    _assert_trees_close(got, expected)
    assert all(np.asarray(c).dtype == np.float32 for c in got[0])


def test_linear_transpose_of_pytrees_and_closures_equals_vjp():
    m = RNG.standard_normal((3, 2)).astype(np.float32)
    ct = {"out": RNG.standard_normal((4, 2)).astype(np.float32), "total": np.float32(1.5)}

    def run(lib, np_):
        def f(params, v):
            return {"out": params["a"] @ m + v[:, None], "total": np_.sum(params["b"]) * 2.0}
        primals = ({"a": Spec((4, 3), np.float32), "b": np.ones(5, np.float32)}, Spec((4,), np.float32))
        transposed = lib.linear_transpose(f, *primals)(ct)
        _, f_vjp = lib.vjp(f, {"a": np.zeros((4, 3), np.float32), "b": np.zeros(5, np.float32)},
                           np.zeros(4, np.float32))
        return transposed, f_vjp(ct), lib.jit(lambda c: lib.linear_transpose(f, *primals)(c))(ct)

    got, expected = _both(run)
    _assert_trees_close(got, expected, rtol=1e-5)
    _assert_trees_close(got[0], got[1], rtol=1e-5)  # the transpose of a linear function is its vjp


def test_linear_transpose_errors_as_jax():
    for lib, _ in LIBS:
        f_transpose = lib.linear_transpose(lambda x: 2.0 * x, np.float32(1.0))
        with pytest.raises(TypeError, match="cotangent tree does not match"):
            f_transpose((np.float32(1.0),))
        with pytest.raises(TypeError, match="cotangent type does not match"):
            f_transpose(np.ones(2, np.float32))
        with pytest.raises(NotImplementedError, match="reduce_axes"):
            lib.linear_transpose(lambda x: x, np.float32(1.0), reduce_axes=("i",))
    with pytest.raises(TypeError, match="floating-point"):
        ember.linear_transpose(lambda x: x, np.int32(1))  # (JAX's docs: integer dtypes are not supported)


# ---------------------------------------------------------------------------------------------------------------
# vmap(sum_match=True): an output batched where out_axes is None is summed over the batch
def test_vmap_sum_match_against_jax():
    x = RNG.standard_normal((5, 3)).astype(np.float32)

    def run(lib, np_):
        def f(x, y):
            return x * y, y + 1.0, np_.sum(x)
        summed = lib.vmap(f, in_axes=(0, None), out_axes=(None, None, 0), sum_match=True)(x, np.float32(2.0))
        unchanged = lib.vmap(f, in_axes=(0, None), out_axes=0, sum_match=True)(x, np.float32(2.0))
        return summed, unchanged

    got, expected = _both(run)
    _assert_trees_close(got, expected, rtol=1e-5)
    for lib, _ in LIBS:
        with pytest.raises(ValueError):
            lib.vmap(lambda x: x * 2.0, out_axes=None)(x)  # without sum_match: an error, as before
