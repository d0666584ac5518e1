"""Gaps found running JAX's libraries (optax) on ember (issue #45), each checked against JAX 0.10.2 doing the same
call (and numpy where it is the better oracle): logsumexp with zero weights (a silent -inf), jit(inline=True),
*_like and iscomplexobj of a ShapeDtypeStruct, fori_loop(unroll=), cond(operand=), stop_gradient of a pytree,
jnp.size(x, axis), round(Array), Tracer.copy(), nn.sparse_plus, grad's keyword arguments,
Lowered.compiler_ir(), and the words of broadcasting errors."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special

import ember
import ember.numpy as enp
import ember.scipy.special
from recorded import jax_result

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")  # (dtypes compared too)


def _close(got, expected, rtol=1e-6, atol=1e-6):
    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    expected_leaves, expected_tree = jax.tree_util.tree_flatten(expected)
    assert got_tree == expected_tree
    for g, e in zip(got_leaves, expected_leaves):
        g, e = np.asarray(g), np.asarray(e)
        assert g.shape == e.shape and g.dtype == e.dtype, (g, e)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------------------------------------------
# 1. logsumexp: the shift is the max over the entries with nonzero weight
A = np.array([[50., -50., 3.], [200., -5., 1.], [-80., 90., 0.]], np.float32)
B = np.array([[0., 1., 0.], [0., 2., 1.], [1., 0., 3.]], np.float32)
W = np.array([[True, True, False], [False, True, True], [True, True, True]])

LSE_CASES = {
    "issue_1": (np.array([50., -50.], np.float32), np.array([0., 1.], np.float32), {}),
    "issue_2": (np.array([200., -5.], np.float32), np.array([0., 2.], np.float32), {}),
    "axis": (A, B, {"axis": 1}),
    "axis0_keepdims": (A, B, {"axis": 0, "keepdims": True}),
    "sign": (A, B * np.array([1., -1., 1.], np.float32), {"axis": 1, "return_sign": True}),
    "negative_total": (A, -B, {"axis": 1}),
    "where": (A, B, {"axis": 1, "where": W, "return_sign": True}),
    "where_no_b": (A, None, {"axis": 1, "where": W}),
    "all_zero_b": (A, np.zeros(3, np.float32), {"axis": 1, "return_sign": True}),
    "all_zero_b_value": (A, np.zeros(3, np.float32), {"axis": -1}),
    "broadcast_b": (A, np.array([0., 1., 1.], np.float32), {"axis": 1}),
    "ints": (np.array([1, 2, 3], np.int32), np.array([0, 1, 1], np.int32), {}),
}


@pytest.mark.parametrize("name", sorted(LSE_CASES))
@pytest.mark.parametrize("namespace", ["nn", "scipy"])
def test_logsumexp_ignores_entries_of_zero_weight(name, namespace):
    a, b, kw = LSE_CASES[name]
    lse = ember.nn.logsumexp if namespace == "nn" else ember.scipy.special.logsumexp
    got = lse(a, b=b, **kw)
    expected = jax_result(lambda: jax.nn.logsumexp(jnp.asarray(a), b=None if b is None else jnp.asarray(b), **kw))
    _close(got, expected, rtol=1e-6, atol=1e-5)
    if "where" not in kw:  # scipy's (float64) where it has the argument
        reference = scipy.special.logsumexp(a.astype(np.float64), b=b, **kw)
        _close(jax.tree_util.tree_map(lambda v: np.asarray(v, np.float64), got), reference, rtol=1e-6, atol=1e-5)


def _focal_log_one_minus_p(lib, np_, special):
    """optax's sigmoid_focal_loss core: log(1 - p_t) by a logsumexp weighted by the labels."""
    def f(logit, label):
        log_p, log_q = lib.nn.log_sigmoid(logit), lib.nn.log_sigmoid(-logit)
        return special.logsumexp(np_.stack([log_p, log_q], -1), axis=-1, b=np_.stack([1 - label, label], -1))
    return f


@pytest.mark.parametrize("logit", [50., -50., 0.3])
@pytest.mark.parametrize("label", [0., 1., 0.25])
def test_logsumexp_derivatives_stay_finite_at_the_extremes(logit, label):
    f = _focal_log_one_minus_p(ember, enp, ember.scipy.special)
    got = (f(logit, label), ember.grad(f)(logit, label), ember.hessian(f)(logit, label))
    jf = _focal_log_one_minus_p(jax, jnp, jax.scipy.special)
    expected = jax_result(lambda: (jf(logit, label), jax.grad(jf)(logit, label), jax.hessian(jf)(logit, label)))
    assert all(np.isfinite(np.asarray(v)) for v in got)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(np.asarray(g), e, rtol=1e-5, atol=1e-30)


def test_logsumexp_gradients_with_weights_match_jax():
    a, b = A[:2], B[:2]
    got = ember.grad(lambda a, b: enp.sum(ember.nn.logsumexp(a, axis=1, b=b)), argnums=(0, 1))(a, b)
    expected = jax_result(lambda: jax.grad(lambda a, b: jnp.sum(jax.nn.logsumexp(a, axis=1, b=b)),
                                           argnums=(0, 1))(a, b))
    _close(got, expected)


# ---------------------------------------------------------------------------------------------------------------
# 2. jit(inline=True)
def test_jit_inline_traces_into_the_enclosing_staging():
    inner = ember.jit(lambda x: enp.sin(x) * 2, inline=True)
    assert "jit[" not in str(ember.make_jaxpr(lambda x: inner(x) + 1)(1.0))
    text = str(ember.make_jaxpr(lambda x: ember.jit(lambda x: x * 2)(x) + 1)(1.0))
    assert "jit[" in text and "name=<lambda>" in text
    jinner = jax.jit(lambda x: jnp.sin(x) * 2, inline=True)
    got = (inner(0.5), ember.jit(lambda x: inner(x) + 1)(0.5), ember.grad(lambda x: inner(x))(0.5))
    expected = jax_result(lambda: (jinner(0.5), jax.jit(lambda x: jinner(x) + 1)(0.5),
                                   jax.grad(lambda x: jinner(x))(0.5)))
    _close([np.asarray(v, np.float32) for v in got], [np.asarray(v, np.float32) for v in expected])


# ---------------------------------------------------------------------------------------------------------------
# 3. *_like and iscomplexobj of a ShapeDtypeStruct (what eval_shape returns)
def _likes(np_, s):
    return (np_.zeros_like(s), np_.ones_like(s), np_.full_like(s, 2), np_.empty_like(s),
            np_.zeros_like(s, dtype=np.float32), np_.ones_like(s, shape=(4,)))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.complex64, np.bool_])
def test_like_functions_and_iscomplexobj_take_a_shape_dtype_struct(dtype):
    x = np.ones((2, 3), dtype)
    s = ember.eval_shape(lambda v: v, x)
    js = jax.eval_shape(lambda v: v, x)
    _close(_likes(enp, s), jax_result(lambda: _likes(jnp, jax.eval_shape(lambda v: v, x))))
    assert enp.iscomplexobj(s) == jnp.iscomplexobj(js)
    assert enp.isrealobj(s) == jnp.isrealobj(js)
    assert enp.iscomplexobj(ember.ShapeDtypeStruct((2,), dtype)) == jnp.iscomplexobj(jax.ShapeDtypeStruct((2,),
                                                                                                          dtype))


def test_asarray_refuses_a_shape_dtype_struct_as_jax_does():
    with pytest.raises(TypeError):
        jnp.asarray(jax.ShapeDtypeStruct((2,), np.float32))
    with pytest.raises(TypeError):
        enp.asarray(ember.ShapeDtypeStruct((2,), np.float32))


def test_iscomplexobj_of_values_as_jax():
    values = [1.0, 1j, [1, 2], [1j], np.ones(2, np.complex64), np.ones(2), None]
    assert [enp.iscomplexobj(v) for v in values] == [jnp.iscomplexobj(v) for v in values]
    assert enp.iscomplexobj(ember.random.key(0)) == jnp.iscomplexobj(jax.random.key(0))


# ---------------------------------------------------------------------------------------------------------------
# 4. fori_loop(unroll=)
@pytest.mark.parametrize("unroll", [None, 1, 2, 3, True, False, 0])
def test_fori_loop_takes_unroll(unroll):
    def body(lib):
        return lambda i, c: c * 1.5 + i
    got = ember.lax.fori_loop(0, 5, body(ember), 1.0, unroll=unroll)
    jitted = ember.jit(lambda c: ember.lax.fori_loop(1, 4, body(ember), c, unroll=unroll))(2.0)
    expected = jax_result(lambda: (jax.lax.fori_loop(0, 5, body(jax), 1.0, unroll=unroll),
                                   jax.jit(lambda c: jax.lax.fori_loop(1, 4, body(jax), c, unroll=unroll))(2.0)))
    _close([np.asarray(got, np.float32), np.asarray(jitted, np.float32)], [np.asarray(v, np.float32)
                                                                          for v in expected])


def test_fori_loop_unroll_errors_as_jax():
    for lib in (ember, jax):
        with pytest.raises(ValueError, match="Can only use `unroll` in `fori_loop` if the loop bounds are "
                                             "statically known"):
            lib.jit(lambda n: lib.lax.fori_loop(0, n, lambda i, c: c + i, 0, unroll=2))(3)
        lib.jit(lambda n: lib.lax.fori_loop(0, n, lambda i, c: c + i, 0, unroll=1))(3)  # (1 and False: fine)
        with pytest.raises(ValueError, match="`unroll` must be a `bool` or a non-negative `int`"):
            lib.lax.fori_loop(0, 3, lambda i, c: c + i, 0, unroll=-1)


# ---------------------------------------------------------------------------------------------------------------
# 5. cond(operand=)
def test_cond_takes_operand_as_a_keyword():
    def run(lib):
        branches = (lambda x: x + 1, lambda x: x * 3)
        return (lib.lax.cond(True, *branches, operand=2.0), lib.lax.cond(False, *branches, operand=2.0),
                lib.jit(lambda p, x: lib.lax.cond(p, *branches, operand=x))(False, 4.0),
                lib.lax.cond(pred=True, true_fun=branches[0], false_fun=branches[1], operand=1.0),
                lib.lax.cond(False, 1.0, branches[0], 5.0, branches[1]))  # (the old five-argument form)
    got = [np.asarray(v, np.float32) for v in run(ember)]
    expected = jax_result(lambda: run(jax))
    _close(got, [np.asarray(v, np.float32) for v in expected])
    for lib in (ember, jax):
        with pytest.raises(TypeError, match="if 'operand' keyword is passed then no positional operands"):
            lib.lax.cond(True, lambda x: x, lambda x: x, 1.0, operand=1.0)


# ---------------------------------------------------------------------------------------------------------------
# 6. stop_gradient of a pytree
def test_stop_gradient_of_a_pytree():
    tree = {"a": np.arange(3, dtype=np.float32), "b": (np.float32(2), np.int32(4)), "c": None}
    got = ember.lax.stop_gradient(tree)
    expected = jax.lax.stop_gradient(tree)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(expected)
    _close(jax.tree_util.tree_map(np.asarray, got), jax.tree_util.tree_map(np.asarray, expected))

    def f(lib, np_):
        def loss(x):
            held = lib.lax.stop_gradient({"x": x, "y": [x * 2]})
            return np_.sum(held["x"] * x + held["y"][0] * x ** 2)
        return loss
    x = np.array([1.0, -2.0, 0.5], np.float32)
    _close(ember.grad(f(ember, enp))(x), jax_result(lambda: jax.grad(f(jax, jnp))(x)))


# ---------------------------------------------------------------------------------------------------------------
# 7. jnp.size(x, axis), round(Array), Array.copy() and Tracer.copy()
def test_size_with_axis():
    x = np.ones((2, 3, 4))
    for axis in (None, 0, 1, -1, (0, 2), [1, -1], ()):
        assert enp.size(x, axis) == jnp.size(x, axis) == enp.size(enp.asarray(x), axis=axis)
    assert enp.size([[1, 2, 3]], 1) == jnp.size(np.array([[1, 2, 3]]), 1)


@pytest.mark.parametrize("value", [2.5, 3.5, -2.5, 2.66, np.array([1.5, 2.5, -0.4]), 3])
@pytest.mark.parametrize("ndigits", [None, 0, 1])
def test_round_builtin(value, ndigits):
    x = np.asarray(value, np.float32 if isinstance(value, float) or np.ndim(value) else np.int32)
    args = () if ndigits is None else (ndigits,)
    got = round(enp.asarray(x), *args)
    traced = ember.jit(lambda v: round(v, *args))(x)
    expected = jax_result(lambda: (round(jnp.asarray(x), *args), jax.jit(lambda v: round(v, *args))(x)))
    _close([got, traced], list(expected))


def test_copy_of_arrays_and_tracers():
    x = np.array([1.0, 2.0], np.float32)
    got = (enp.asarray(x).copy(), ember.jit(lambda v: v.copy() * 2)(x), ember.grad(lambda v: enp.sum(v.copy() ** 2))(x),
           ember.vmap(lambda v: v.copy() + 1)(x))
    expected = jax_result(lambda: (jnp.asarray(x).copy(), jax.jit(lambda v: v.copy() * 2)(x),
                                   jax.grad(lambda v: jnp.sum(v.copy() ** 2))(x), jax.vmap(lambda v: v.copy() + 1)(x)))
    _close(got, expected)


# ---------------------------------------------------------------------------------------------------------------
# 8. nn.sparse_plus and its derivative nn.sparse_sigmoid
def test_sparse_plus_and_its_derivative():
    x = np.array([-3., -1., -0.999, -0.5, 0., 0.5, 0.999, 1., 2.5], np.float32)
    got = (ember.nn.sparse_plus(x), ember.vmap(ember.grad(ember.nn.sparse_plus))(x), ember.nn.sparse_sigmoid(x),
           ember.vmap(ember.grad(ember.nn.sparse_sigmoid))(x), ember.nn.sparse_plus(np.arange(-2, 3)))
    expected = jax_result(lambda: (jax.nn.sparse_plus(x), jax.vmap(jax.grad(jax.nn.sparse_plus))(x),
                                   jax.nn.sparse_sigmoid(x), jax.vmap(jax.grad(jax.nn.sparse_sigmoid))(x),
                                   jax.nn.sparse_plus(jnp.arange(-2, 3))))
    _close(got, expected)
    np.testing.assert_allclose(np.asarray(got[1]), np.asarray(got[2]))  # sparse_sigmoid is sparse_plus's derivative


# ---------------------------------------------------------------------------------------------------------------
# 9. grad's keyword arguments: never differentiated; functions, strings and numbers are passed through
def _kw_loss(lib, np_):
    def loss(x, scale=1.0, fn=None, reduce="sum", n=1):
        y = (fn or np_.sin)(x) * scale
        return (np_.sum(y) if reduce == "sum" else np_.mean(y)) * n
    return loss


def test_grad_passes_keyword_arguments_through():
    x = np.array([0.5, -1.0, 2.0], np.float32)
    scale = np.float32(3.0)

    def run(lib, np_):
        loss = _kw_loss(lib, np_)
        return (lib.grad(loss)(x, fn=np_.cos), lib.grad(loss)(x, scale=scale, fn=np_.tanh, reduce="mean", n=2),
                lib.value_and_grad(loss)(x, fn=np_.cos, reduce="mean"), lib.jit(lib.grad(loss))(x, scale=scale),
                lib.jacrev(loss)(x, fn=np_.exp), lib.jacfwd(loss)(x, fn=np_.exp), lib.hessian(loss)(x, fn=np_.exp))
    _close(run(ember, enp), jax_result(lambda: run(jax, jnp)), rtol=1e-5)
    seen = []
    ember.grad(lambda x, tag=None: seen.append(tag) or x * 2)(1.0, tag="a label")
    assert seen == ["a label"]


# ---------------------------------------------------------------------------------------------------------------
# 10. Lowered.compiler_ir(): the StableHLO text, or for "hlo" XLA's HLO text with as_hlo_text() (as optax's
# numerics_test uses it)
def _hlo_entry(lib, f, x):
    """optax/_src/numerics_test.py's _get_hlo_repr."""
    text = lib.jit(f).lower(x).compiler_ir(dialect="hlo").as_hlo_text()
    text = re.search(r"ENTRY.*", text, re.DOTALL).group()
    text = re.sub("ENTRY.*?{", "ENTRY XXXX", text)
    text = re.sub("HloModule.*?\n", "", text)
    return re.sub("ROOT.*?=", "ROOT result.2 =", text)


@pytest.mark.parametrize("x", [3.0, np.array([4, 5.2]), 3.0 + 1j, np.array([4 + 1j, 5.2 + 1j])])
def test_compiler_ir_hlo_as_optax_uses_it(x):
    def same_as_abs_sq(lib, np_):
        abs_sq = lambda x: (x.conj() * x).real  # noqa: E731 (optax.numerics.abs_sq; JAX names values by argument)
        return [_hlo_entry(lib, sq, np_.asarray(x)) == _hlo_entry(lib, abs_sq, np_.asarray(x))
                for sq in (lambda x: x ** 2, lambda x: x * x, np_.square)]
    assert same_as_abs_sq(ember, enp) == same_as_abs_sq(jax, jnp)


def test_compiler_ir_text():
    lowered = ember.jit(lambda x: enp.tanh(x) * 2).lower(1.0)
    module = lowered.compiler_ir()
    assert str(module) == lowered.as_text() == lowered.compiler_ir("stablehlo") and "stablehlo.tanh" in str(module)
    assert "ENTRY" in lowered.compiler_ir(dialect="hlo").as_hlo_text()
    with pytest.raises(ValueError, match="dialect"):
        lowered.compiler_ir(dialect="tosa")


# ---------------------------------------------------------------------------------------------------------------
# 11. broadcasting errors in JAX's words (optax's tests match "Incompatible shapes for broadcasting")
BROADCAST_ERRORS = {
    "add_same_rank": lambda np_: np_.ones(3) + np_.ones(4),
    "multiply_ranks": lambda np_: np_.ones((2, 3)) * np_.ones(2),
    "maximum": lambda np_: np_.maximum(np_.ones((2, 3)), np_.ones((4, 1))),
    "broadcast_shapes": lambda np_: np_.broadcast_shapes((3,), (4,)),
    "lax_broadcast_shapes": lambda np_: (ember.lax if np_ is enp else jax.lax).broadcast_shapes((2, 3), (3, 2)),
    "broadcast_arrays": lambda np_: np_.broadcast_arrays(np_.ones(3), np_.ones(4)),
    "where": lambda np_: np_.where(np_.ones(3) > 0, np_.ones(4), np_.ones(4)),
}


@pytest.mark.parametrize("name", sorted(BROADCAST_ERRORS))
def test_broadcasting_errors_in_jax_words(name):
    with pytest.raises((TypeError, ValueError)) as theirs:
        BROADCAST_ERRORS[name](jnp)
    with pytest.raises(type(theirs.value)) as ours:
        BROADCAST_ERRORS[name](enp)
    assert type(ours.value) is type(theirs.value)
    # the same words, but for the name of the operation (ember's may come first; lax's "max" is jnp's "maximum")
    assert re.sub(r"^\w+ got", "got", str(theirs.value)) in str(ours.value)


def test_array_equiv_of_shapes_that_do_not_broadcast():
    # (numpy's answer: JAX's array_equiv raises the TypeError above for shapes of one rank that do not broadcast)
    for a, b in [(np.ones(3), np.ones(4)), (np.ones((2, 3)), np.ones(2)), (np.ones((2, 3)), np.ones(3))]:
        assert bool(enp.array_equiv(a, b)) == np.array_equiv(a, b)


def test_prng_key_dtypes_and_float_rademacher_as_jax():
    """optax asks `jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)` (inject_hyperparams, its random tree
    utilities) and draws rademacher signs in a float dtype."""
    key = ember.random.key(0)
    ours = [enp.issubdtype(key.dtype, ember.dtypes.prng_key), ember.dtypes.issubdtype(key.dtype, ember.dtypes.extended),
            enp.issubdtype(np.float32, ember.dtypes.prng_key), enp.issubdtype(key.dtype, np.floating),
            enp.issubdtype(np.float32, np.floating), enp.issubdtype(ember.dtypes.prng_key, ember.dtypes.extended)]
    jkey = jax.random.key(0)
    theirs = [jnp.issubdtype(jkey.dtype, jax.dtypes.prng_key), jax.dtypes.issubdtype(jkey.dtype, jax.dtypes.extended),
              jnp.issubdtype(np.float32, jax.dtypes.prng_key), jnp.issubdtype(jkey.dtype, np.floating),
              jnp.issubdtype(np.float32, np.floating), jnp.issubdtype(jax.dtypes.prng_key, jax.dtypes.extended)]
    assert ours == theirs
    for dtype in (np.float32, np.int32):
        want = jax_result(lambda: jax.random.rademacher(jax.random.key(3), (64,), dtype=dtype))
        got = np.asarray(ember.random.rademacher(ember.random.key(3), (64,), dtype=dtype))
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "sigmoid", "silu", "gelu", "elu", "relu", "tanh"])
def test_nn_functions_compute_on_complex_values_as_jax(name):
    """A complex input was cast to float32 (its imaginary part dropped, silently); JAX computes on it."""
    x = np.array([1 + 2j, 0.5 - 1j, -1 + 0.3j], np.complex64)
    want = jax_result(lambda: getattr(jax.nn, name)(jnp.asarray(x)))
    got = np.asarray(getattr(ember.nn, name)(x))
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---- what flax.nnx reads (issue #45): jax.experimental.hijax's names, tree_util.register_static, jax.nn.identity,
# log1mexp and logmeanexp, typeof of a typed key, conv_general_dilated(out_sharding=), jit with trees of None
# shardings, scan(_split_transpose=)
def test_register_static_makes_a_value_part_of_the_structure():
    for lib in (ember, jax):
        class Tag:
            def __init__(self, name):
                self.name = name

            def __eq__(self, other):
                return isinstance(other, Tag) and other.name == self.name

            def __hash__(self):
                return hash(self.name)
        assert lib.tree_util.register_static(Tag) is Tag
        leaves, tree = lib.tree_util.tree_flatten({"a": 1.0, "t": Tag("x")})
        assert leaves == [1.0]
        assert lib.tree_util.tree_unflatten(tree, [2.0])["t"] == Tag("x")
        assert tree != lib.tree_util.tree_structure({"a": 1.0, "t": Tag("y")})
        assert lib.jit(lambda d: d["a"] * 2)({"a": 3.0, "t": Tag("x")}) == 6.0


def test_nn_identity_log1mexp_logmeanexp_match_jax():
    x = np.array([1e-3, 0.5, 0.69, 0.7, 3.0, 30.0], np.float32)
    _close(ember.nn.log1mexp(x), jax.nn.log1mexp(x), rtol=1e-6)
    _close(ember.jit(ember.vmap(ember.grad(ember.nn.log1mexp)))(x), jax.vmap(jax.grad(jax.nn.log1mexp))(x), rtol=1e-5)
    y = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    where = y > -0.3
    for kwargs in ({}, {"axis": 1}, {"axis": 0, "keepdims": True}, {"axis": 1, "where": where}):
        _close(ember.nn.logmeanexp(y, **kwargs), jax.nn.logmeanexp(y, **kwargs), rtol=1e-6)
    _close(ember.nn.identity(y), jax.nn.identity(y))


def test_typeof_a_typed_key_is_its_key_type():
    for lib in (ember, jax):
        keys = lib.random.split(lib.random.key(0), 3)
        t = lib.typeof(keys)
        assert str(t) == "key<fry>[3]" and t.shape == (3,) and str(t.dtype) == "key<fry>"
    assert str(ember.typeof(ember.random.key(0))) == str(jax.typeof(jax.random.key(0))) == "key<fry>[]"


def test_conv_out_sharding_and_jit_with_trees_of_none_shardings():
    x = np.random.default_rng(1).normal(size=(1, 1, 5, 5)).astype(np.float32)
    k = np.ones((1, 1, 3, 3), np.float32)
    got = ember.lax.conv_general_dilated(x, k, (1, 1), "SAME", out_sharding=None)
    _close(got, jax.lax.conv_general_dilated(x, k, (1, 1), "SAME", out_sharding=None), rtol=1e-5)
    f = ember.jit(lambda a, b: (a * 2, {"b": b + 1}), in_shardings=(None, None), out_shardings=(None, {"b": None}))
    out = f(np.ones(3, np.float32), np.zeros(2, np.float32))
    _close(out, jax.jit(lambda a, b: (a * 2, {"b": b + 1}), in_shardings=(None, None),
                        out_shardings=(None, {"b": None}))(np.ones(3, np.float32), np.zeros(2, np.float32)))
    carry, ys = ember.lax.scan(lambda c, x: (c + x, c), 0.0, np.arange(3.0, dtype=np.float32), _split_transpose=True)
    assert float(carry) == 3.0 and np.asarray(ys).tolist() == [0.0, 0.0, 1.0]


def test_hijax_names_and_their_eager_primitives():
    from ember.experimental import hijax
    import jax.experimental.hijax as jhijax
    for name in ("HiPrimitive", "HiType", "MutableHiType", "VJPHiPrimitive", "register_hitype", "aval_method",
                 "aval_property", "AvalQDD", "AvalMutableQDD", "control_flow_allowed_effects", "Zero",
                 "instantiate_zeros", "is_undefined_primal", "AbstractValue", "ShapedArray", "AbstractRef", "HiPspec"):
        assert hasattr(hijax, name) and hasattr(jhijax, name), name

    class Double(hijax.HiPrimitive):
        def impl(self, x):
            return x * 2
    double_p = Double("double")
    assert float(double_p.bind(enp.float32(3))) == 6.0  # (outside any staging: its impl)
    with pytest.raises(NotImplementedError, match="double: a hijax primitive"):
        ember.jit(lambda x: double_p.bind(x))(1.0)
    assert hijax.aval_property(fget=len).fget is len and hijax.aval_method(len).fun is len

    class MyEffect:
        pass
    hijax.control_flow_allowed_effects.add_type(MyEffect)
    assert hijax.control_flow_allowed_effects.contains(MyEffect())
    hijax.register_hitype(Double, lambda v: None)
    assert hijax.hitype_of(Double) is not None


def test_find_top_trace_and_jvp_tracers_as_equinox_filter_jvp_reads_them():
    """equinox's filter_jvp keeps an output as differentiable when it is a JVPTracer of the top trace: a value
    computed from the inputs, also through a jitted call, and not one made of constants alone."""
    from ember.extend.core import find_top_trace
    from ember.interpreters import ad
    import jax.extend.core as jcore
    import jax.interpreters.ad as jad

    def classify(lib, core, ad_module):
        def fn(x, c):
            main = core.find_top_trace((x,)).main
            outs = (x * 2, lib.numpy.ones(2), c * 3, lib.jit(lambda a, b: (a + 1, b * 2))(x, c))
            return tuple(isinstance(y, ad_module.JVPTracer) and y._trace.main is main
                         for y in lib.tree_util.tree_leaves(outs))
        found = []

        def run(x):
            found.append(fn(x, lib.numpy.float32(2.0)))
            return x
        lib.jvp(run, (lib.numpy.float32(1.0),), (lib.numpy.float32(1.0),))
        return found[0]
    assert classify(ember, __import__("ember.extend.core", fromlist=["x"]), ad) == \
        classify(jax, jcore, jad) == (True, False, False, True, False)
    assert find_top_trace(()).main is None  # (outside any staging: the eval trace)


def test_a_callbacks_exception_outside_jit_is_jaxs_runtime_error(tmp_path):
    """equinox's filter_pure_callback: a callback that raises, called outside jit, is JAX's JaxRuntimeError (a
    RuntimeError) caused by the callback's exception, as inside jit; jnp.load reads back the bfloat16 that numpy
    wrote as 2-byte void, and leaves an array of strings to numpy (equinox's serialisation)."""
    def bad(v):
        raise ValueError("bad thing")
    sds = ember.ShapeDtypeStruct((), np.float32)
    for call in (lambda: ember.pure_callback(bad, sds, 1.0),
                 lambda: ember.jit(lambda u: ember.pure_callback(bad, sds, u))(1.0),
                 lambda: ember.experimental.io_callback(bad, sds, 1.0)):
        with pytest.raises(ember.errors.JaxRuntimeError, match="ValueError: bad thing") as info:
            call()
        assert isinstance(info.value, RuntimeError) and isinstance(info.value.__cause__, ValueError)

    def on(np_, api):
        import ml_dtypes
        path = tmp_path / "x.npy"
        api.numpy.save(path, api.numpy.array(ml_dtypes.bfloat16(1.5)))
        loaded = api.numpy.load(path)
        np_.save(path, np_.array(["a", "b"]))
        return str(loaded.dtype), float(loaded), type(api.numpy.load(path)).__name__
    assert on(np, ember) == jax_result(lambda: on(np, jax)) == ("bfloat16", 1.5, "ndarray")
