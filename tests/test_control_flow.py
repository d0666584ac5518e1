"""Control flow and custom rules beyond the per-primitive oracle cases: nesting, clear errors, the printed IR,
DCE inside branches, checkpointing, custom rules inside other transformations, and logsumexp/logaddexp."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax

pytestmark = pytest.mark.usefixtures("ember_x64")  # float64 inputs and oracles (numpy, JAX in x64 mode)

X = np.linspace(-1.0, 1.5, 6)


def nested(lib, np_):
    """scan inside cond inside while_loop, with a data-dependent trip count."""
    def step(c):
        i, v = c
        def branch_scan(v):
            return lib.scan(lambda h, x: (h * 0.5 + np_.sin(x), h), v[0], v)[1] + v
        return i + 1, lib.cond(np_.sum(v) > 0, branch_scan, lambda v: v * 1.1, v)
    return lambda x: lib.while_loop(lambda c: (c[0] < 4) & (np_.max(np_.abs(c[1])) < 50.0), step, (0, x))[1]


def test_nested_control_flow_matches_jax():
    got = ember.jit(nested(lax, enp))(X)
    expected = nested(jax.lax, jnp)(X)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-12)
    batch = np.stack([X, -X, X * 3.0])
    np.testing.assert_allclose(np.asarray(ember.vmap(nested(lax, enp))(batch)),
                               np.asarray(jax.vmap(nested(jax.lax, jnp))(batch)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ember.jvp(nested(lax, enp), (X,), (np.ones(6),))[1]),
                               np.asarray(jax.jvp(nested(jax.lax, jnp), (X,), (np.ones(6),))[1]), rtol=1e-10)


def test_reverse_mode_through_nested_scan_and_cond():
    def f(lib, np_):
        def g(w, xs):
            def step(h, x):
                h = lib.cond(x[0] > 0, lambda h: np_.tanh(h * w + x), lambda h: h * w - x, h)
                return h, np_.sum(h)
            return np_.sum(lib.scan(step, np_.zeros_like(xs[0]), xs)[1] ** 2)
        return g
    xs = np.random.default_rng(0).normal(size=(7, 3))
    got = ember.grad(f(lax, enp), argnums=(0, 1))(np.float64(0.8), xs)
    expected = jax.grad(f(jax.lax, jnp), argnums=(0, 1))(0.8, xs)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-10)


def test_the_ir_of_a_scan_prints_its_body_nested():
    text = str(ember.make_ir(lambda xs: lax.scan(lambda c, x: (c + x, c * x), 0.0, xs))(np.ones(4)))
    assert "scan[body_ir=\n" in text and "length=4" in text and "num_carry=1" in text
    assert text.count("lambda") == 2


def test_cond_branches_shrink_to_the_outputs_used():
    def f(p, x):
        out, unused = lax.cond(p, lambda x: (enp.sin(x), enp.exp(x)), lambda x: (x, enp.cos(x)), x)
        return out
    ir = ember.dce(ember.make_ir(f)(True, X))
    cond = next(e for e in ir.eqns if e.prim.name == "cond")
    names = {e.prim.name for b in cond.params["branches"] for e in b.eqns}
    assert len(cond.outputs) == 1 and "exp" not in names and "cos" not in names


# ---------------------------------------------------------------------------------------------------------------
# Errors
def test_branches_must_agree():
    with pytest.raises(TypeError, match=r"cond: branch 1 returns \(f64\[6\]\), but branch 0 returns \(f64\[3\]\)"):
        ember.jit(lambda x: lax.cond(True, lambda x: x, lambda x: x[:3], x))(X)
    with pytest.raises(TypeError, match=r"cond: branch 1 returns a PyTreeDef\(\(\*, \*\)\), but branch 0 returns"):
        ember.jit(lambda x: lax.cond(True, lambda x: (x, x), lambda x: x, x))(X)


def test_predicates_and_indices_are_checked():
    with pytest.raises(TypeError, match=r"cond: the predicate must be a scalar, got bool\[6\]"):
        ember.jit(lambda x: lax.cond(x > 0, lambda x: x, lambda x: -x, x))(X)
    with pytest.raises(TypeError, match=r"cond: the predicate must be a boolean \(or integer\) scalar, got f64\[\]"):
        ember.jit(lambda x: lax.cond(x[0], lambda x: x, lambda x: -x, x))(X)
    with pytest.raises(TypeError, match=r"switch: the index must be an integer scalar, got f64\[\]"):  # (x64)
        lax.switch(1.0, [lambda x: x, lambda x: -x], X)
    with pytest.raises(TypeError, match=r"while_loop: cond_fun must return a boolean scalar, got \(f64\[6\]\)"):
        lax.while_loop(lambda v: v, lambda v: v, X)


def test_loop_carries_keep_their_types():
    with pytest.raises(TypeError, match=r"while_loop: body_fun must return the carry's types \(f64\[6\]\), but it "
                                        r"returns \(f64\[3\]\)"):
        lax.while_loop(lambda v: False, lambda v: v[:3], ember.asarray(X))
    with pytest.raises(TypeError, match=r"scan: f must return a carry of the input's structure"):
        lax.scan(lambda c, x: ((c, c), x), 0.0, X)
    with pytest.raises(ValueError, match=r"scan: xs leaves must share their leading axis size"):
        lax.scan(lambda c, x: (c, x), 0.0, (X, X[:3]))


def test_python_control_flow_on_traced_values_points_at_lax_cond():
    with pytest.raises(ember.ConcretizationTypeError, match=r"ember.lax.cond, lax.switch, lax.while_loop"):
        ember.jit(lambda x: x if x[0] > 0 else -x)(X)


def test_reverse_mode_of_a_fori_loop_with_traced_bounds_equals_the_static_one():
    def f(lib, np_, upper):
        return lambda x: np_.sum(lib.fori_loop(0, upper, lambda i, v: np_.sin(v) + v, x))
    expected = np.asarray(jax.grad(f(jax.lax, jnp, 3))(X))  # (JAX: static bounds, a scan)
    traced = ember.grad(lambda x, n: f(lax, enp, n)(x))(X, np.int32(3))  # an int array bound: a while_loop
    np.testing.assert_allclose(np.asarray(traced), expected, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ember.grad(f(lax, enp, 3))(X)), expected, rtol=1e-12)


# ---------------------------------------------------------------------------------------------------------------
# Custom rules and checkpointing
def test_custom_jvp_rule_is_used_by_every_transformation():
    @ember.custom_jvp
    def f(x):
        return enp.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):  # deliberately not the true derivative: it must be the one used
        (x,), (t,) = primals, tangents
        return f(x), 3.0 * t

    assert float(ember.grad(f)(0.3)) == 3.0
    assert float(ember.jvp(f, (0.3,), (1.0,))[1]) == 3.0
    np.testing.assert_allclose(np.asarray(ember.vmap(ember.grad(f))(X)), np.full(6, 3.0))
    assert float(ember.jit(ember.grad(lambda x: ember.grad(f)(x) * x))(0.3)) == 3.0
    np.testing.assert_allclose(float(f(0.3)), np.sin(0.3))  # outside any transformation: the function itself


def test_custom_vjp_nondiff_argnums_and_inside_custom_jvp():
    @ember.custom_vjp
    def clip_gradient(lo, hi, x):
        return x

    def fwd(lo, hi, x):
        return x, None

    def bwd(lo, hi, _, ct):
        return (enp.clip(ct, lo, hi),)
    clip_gradient.defvjp(fwd, bwd)
    clip_gradient.nondiff_argnums = (0, 1)
    g = ember.grad(lambda x: enp.sum(clip_gradient(-0.5, 0.5, x) * 3.0))(X)
    np.testing.assert_allclose(np.asarray(g), np.full(6, 0.5))


def test_custom_rules_reject_closures_over_traced_values():
    @ember.custom_jvp
    def scale(x):
        return x * outer[0]

    @scale.defjvp
    def scale_jvp(primals, tangents):
        return scale(*primals), tangents[0]

    outer = []

    def f(w, x):
        outer[:] = [w]
        return scale(x)
    with pytest.raises(TypeError, match="closes over a traced value"):
        ember.grad(f, argnums=1)(2.0, 1.0)


def test_checkpoint_gives_the_same_gradients_and_recomputes_behind_a_barrier():
    def net(x):
        for _ in range(3):
            x = enp.tanh(x * 1.3) + x
        return enp.sum(x ** 2)
    plain = ember.grad(net)(X)
    remat = ember.grad(ember.checkpoint(net))(X)
    np.testing.assert_allclose(np.asarray(remat), np.asarray(plain), rtol=1e-12)
    text = ember.jit(ember.value_and_grad(ember.checkpoint(net))).lower(X).as_text()
    assert "stablehlo.optimization_barrier" in text
    keep = ember.jit(ember.value_and_grad(ember.checkpoint(net, policy=ember.checkpoint_policies.everything_saveable)))
    assert "optimization_barrier" not in keep.lower(X).as_text()
    custom = ember.grad(ember.checkpoint(net, policy=lambda prim, *avals, **params: prim.name == "tanh"))(X)
    np.testing.assert_allclose(np.asarray(custom), np.asarray(plain), rtol=1e-12)  # (policies: test_checkpointing)


def test_logaddexp_and_logsumexp_are_stable():
    big = np.array([1000.0, -np.inf, 3.0])
    np.testing.assert_allclose(np.asarray(enp.logaddexp(big, big - 1.0)), np.logaddexp(big, big - 1.0))
    grad = ember.grad(lambda x: enp.sum(enp.logaddexp(x, x - 1.0)))(big)
    assert np.all(np.isfinite(np.asarray(grad)))
    a = np.array([[1000.0, 1001.0, 3.0], [-2.0, 0.0, 1.0]])
    np.testing.assert_allclose(np.asarray(enp.logsumexp(a, axis=1)), np.asarray(jax.nn.logsumexp(a, axis=1)))
    np.testing.assert_allclose(np.asarray(ember.grad(lambda a: enp.sum(enp.logsumexp(a, axis=1)))(a)),
                               np.asarray(jax.grad(lambda a: jnp.sum(jax.nn.logsumexp(a, axis=1)))(a)), rtol=1e-12)
    assert enp.logsumexp(a, axis=0, keepdims=True).shape == (1, 3)


@pytest.mark.slow  # (7 s; associative_scan by default: prims and cumulative tests)
def test_associative_scan_matches_jax():
    m = np.random.default_rng(1).normal(size=(5, 7))
    for axis in (0, 1):
        for reverse in (False, True):
            np.testing.assert_allclose(
                np.asarray(lax.associative_scan(enp.add, m, reverse=reverse, axis=axis)),
                np.asarray(jax.lax.associative_scan(jnp.add, m, reverse=reverse, axis=axis)), rtol=1e-12)
    pair = lax.associative_scan(lambda a, b: (a[0] * b[0], a[1] + b[1]), (m[0], m[1]))
    np.testing.assert_allclose(np.asarray(pair[0]), np.cumprod(m[0]), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ember.grad(lambda x: enp.sum(lax.associative_scan(enp.multiply, x)))(m[0])),
                               np.asarray(jax.grad(lambda x: jnp.sum(jax.lax.associative_scan(jnp.multiply, x)))(m[0])),
                               rtol=1e-10)


def test_custom_vjp_cotangents_must_match_each_argument():
    @ember.custom_vjp
    def f(p):
        return p["a"] * p["b"]

    def fwd(p):
        return f(p), p

    def bwd_list(p, ct):  # a list where the argument is a dict: refused, not mapped in order
        return ([ct * p["b"], ct * p["a"]],)

    f.defvjp(fwd, bwd_list)
    with pytest.raises(TypeError, match=r"bwd's cotangent 0 must have the structure of the argument"):
        ember.grad(f)({"a": 2.0, "b": 3.0})
    f.defvjp(fwd, lambda p, ct: ({"a": ct * p["b"], "b": None},))  # None: a zero cotangent
    g = ember.grad(f)({"a": 2.0, "b": 3.0})
    assert float(g["a"]) == 3.0 and float(g["b"]) == 0.0


def test_reverse_mode_differentiates_only_the_active_inputs_of_jit_cond_and_scan():
    """A constant argument of a primitive without that derivative (betainc's a) inside jit, cond or scan is not
    differentiated: the body is split for the inputs the backward pass needs (and the scan carries they reach),
    as JAX's partial evaluation does; differentiating it for real is still refused."""
    def run(lib, f):
        return float(lib.grad(f)(0.5))

    cases = {
        "jit": lambda lib, lx: lambda x: lib.jit(lx.betainc)(2.0, 3.0, x),
        "cond": lambda lib, lx: lambda x: lx.cond(x > 0, lambda a, y: lx.betainc(a, 3.0, y), lambda a, y: y, 2.0, x),
        "scan": lambda lib, lx: lambda x: lx.scan(lambda c, a: (lx.betainc(a, 3.0, c) * 0.5 + c * a, None), x,
                                               np.array([2.0, 2.5]))[0],
        # a carry the active input reaches only through another carry, on the second step
        "scan_reached": lambda lib, lx: lambda x: lx.scan(lambda c, a: ((c[1], c[0] * 2.0 + lx.betainc(a, 3.0, 0.5)),
                                                                    None), (2.0, x), np.array([2.0, 2.5]))[0][0],
    }
    for name, make in cases.items():
        with jax.enable_x64(False):
            want = run(jax, make(jax, jax.lax))
        np.testing.assert_allclose(run(ember, make(ember, lax)), want, rtol=1e-5, err_msg=name)
    with pytest.raises(TypeError, match="betainc: not differentiable with respect to a"):
        ember.grad(lambda a: ember.jit(lax.betainc)(a, 3.0, 0.5))(2.0)
