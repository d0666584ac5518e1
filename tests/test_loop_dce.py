"""Dead work in control flow: the dce hooks of scan and while (unused carries, ys and the inputs only they read,
to a fixed point), and cond's reverse mode saving its branches' residuals instead of recomputing them. The IRs
are inspected, evaluated before and after DCE, and compared with JAX under jit, vmap and grad."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax
from ember._control.loops import scan_p, while_p

pytestmark = pytest.mark.usefixtures("ember_x64")  # float64 inputs and oracles (numpy, JAX in x64 mode)

RNG = np.random.default_rng(0)
HIDDEN, FEATURES, STEPS = 4, 3, 6
W = RNG.normal(size=(HIDDEN, HIDDEN)) / 2
U = RNG.normal(size=(HIDDEN, FEATURES)) / 2
H0 = RNG.normal(size=(HIDDEN,))
XS = RNG.normal(size=(STEPS, FEATURES))


def rnn(lib, np_, all_states: bool = False):
    """h_{t+1} = tanh(W h_t + U x_t); the loss sums the final state (or every state)."""
    def loss(w, u, h0, xs):
        def step(h, x):
            h = np_.tanh(w @ h + u @ x)
            return h, h
        h, hs = lib.lax.scan(step, h0, xs)
        return np_.sum(hs) if all_states else np_.sum(h)
    return loss


def equations(ir: ember.IR, name: str) -> list:
    """The equations of a primitive in ir, nested sub-IRs included, outermost first."""
    found = []
    for eqn in ir.eqns:
        if eqn.prim.name == name:
            found.append(eqn)
        for value in eqn.params.values():
            for sub in value if isinstance(value, tuple) else (value,):
                if isinstance(sub, ember.IR):
                    found += equations(sub, name)
    return found


def forward_and_backward_scans(ir: ember.IR) -> tuple:
    forward, backward = equations(ir, "scan")
    assert not forward.params["reverse"] and backward.params["reverse"]
    return forward, backward


def without_hook(monkeypatch: pytest.MonkeyPatch, prim, kind: str) -> None:
    monkeypatch.delitem(prim.rules, kind)
    ember.clear_caches()


# ---------------------------------------------------------------------------------------------------------------
# scan
@pytest.mark.parametrize("all_states", [False, True])
def test_grad_wrt_xs_of_an_rnn_carries_no_weight_cotangent(all_states):
    ir = ember.make_ir(ember.grad(rnn(ember, enp, all_states), argnums=3))(W, U, H0, XS)
    ember.check_ir(ir)
    forward, backward = forward_and_backward_scans(ir)
    # backward: the state's cotangent is the only carry (no accumulators of W's or U's cotangent), and the xs'
    # cotangent the only stacked output
    assert backward.params["num_carry"] == 1
    assert [v.aval.shape for v in backward.outputs] == [(HIDDEN,), (STEPS, FEATURES)]
    # forward: the state, and one stacked residual (1 - h^2); the states, the xs and h_t (which W's cotangent
    # reads) are not stacked
    assert forward.params["num_carry"] == 1
    assert [v.aval.shape for v in forward.outputs] == [(HIDDEN,), (STEPS, HIDDEN)]
    got = ember.jit(ember.grad(rnn(ember, enp, all_states), argnums=3))(W, U, H0, XS)
    expected = jax.grad(rnn(jax, jnp, all_states), argnums=3)(W, U, H0, XS)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-10, atol=1e-12)


def test_the_dead_loop_work_is_there_without_the_hook_and_dce_removes_it(monkeypatch):
    with monkeypatch.context() as patch:
        without_hook(patch, scan_p, "dce")
        full = ember.make_ir(ember.grad(rnn(ember, enp), argnums=3))(W, U, H0, XS)
    ember.clear_caches()
    forward, backward = forward_and_backward_scans(full)
    assert backward.params["num_carry"] == 3  # the state's cotangent and the accumulators of W's and U's
    assert len(forward.outputs) > 2  # stacked states and residuals nobody reads
    pruned = ember.dce(full)
    ember.check_ir(pruned)
    forward, backward = forward_and_backward_scans(pruned)
    assert backward.params["num_carry"] == 1 and len(forward.outputs) == 2
    np.testing.assert_allclose(np.asarray(ember.eval_ir(pruned, W, U, H0, XS)),
                               np.asarray(ember.eval_ir(full, W, U, H0, XS)), rtol=1e-12)


def test_dce_is_a_fixed_point():
    ir = ember.make_ir(ember.grad(rnn(ember, enp, True), argnums=(0, 3)))(W, U, H0, XS)
    once = ember.dce(ir)
    twice = ember.dce(once)
    assert str(twice) == str(once)


def test_grad_wrt_every_input_of_an_rnn_matches_jax():
    grads = ember.jit(ember.grad(rnn(ember, enp, True), argnums=(0, 1, 2, 3)))(W, U, H0, XS)
    expected = jax.grad(rnn(jax, jnp, True), argnums=(0, 1, 2, 3))(W, U, H0, XS)
    for got, want in zip(grads, expected):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-10, atol=1e-12)


def test_vmap_of_grad_wrt_xs_and_grad_of_grad_match_jax():
    batch = RNG.normal(size=(3, STEPS, FEATURES))
    got = ember.vmap(ember.grad(rnn(ember, enp), argnums=3), in_axes=(None, None, None, 0))(W, U, H0, batch)
    expected = jax.vmap(jax.grad(rnn(jax, jnp), argnums=3), in_axes=(None, None, None, 0))(W, U, H0, batch)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-10, atol=1e-12)

    def second(lib, np_):
        first = lib.grad(rnn(lib, np_), argnums=3)
        return lambda w, u, h0, xs: np_.sum(np_.sin(first(w, u, h0, xs)))
    got = ember.jit(ember.grad(second(ember, enp), argnums=(0, 3)))(W, U, H0, XS)
    expected = jax.grad(second(jax, jnp), argnums=(0, 3))(W, U, H0, XS)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-9, atol=1e-12)


def test_nested_scans_drop_the_weight_cotangent_at_every_level():
    def loss(lib, np_):
        def f(w, u, h0, xs):  # xs: (outer steps, inner steps, features)
            def inner(h, x):
                return np_.tanh(w @ h + u @ x), None
            def outer(h, block):
                return lib.lax.scan(inner, h, block)[0] * 0.9, None
            return np_.sum(lib.lax.scan(outer, h0, xs)[0])
        return f
    blocks = XS.reshape(3, 2, FEATURES)
    ir = ember.make_ir(ember.grad(loss(ember, enp), argnums=3))(W, U, H0, blocks)
    ember.check_ir(ir)
    scans = equations(ir, "scan")
    assert len(scans) == 4  # forward and backward, outer and inner
    assert all(v.aval.shape != W.shape for eqn in scans for v in eqn.outputs)
    got = ember.jit(ember.grad(loss(ember, enp), argnums=3))(W, U, H0, blocks)
    expected = jax.grad(loss(jax, jnp), argnums=3)(W, U, H0, blocks)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-10, atol=1e-12)


def multi_carry(lib, np_):
    """Carries: a (read by the output), b (feeds a), c (feeds b), d (dead: reads a, read by nobody), n (an int
    counter nobody reads); ys: a used one and an unused one."""
    def f(xs):
        def step(carry, x):
            a, b, c, d, n = carry
            return (a * 0.5 + b, b * 0.9 + c * x, c + 0.1, d + a, n + 1), (a * x, np_.exp(x) * d)
        (a, b, c, d, n), (used, unused) = lib.lax.scan(step, (xs[0], xs[1], xs[2], xs[3], 0), xs)
        return np_.sum(a) + np_.sum(used)
    return f


multi_carry_scan = multi_carry(ember, enp)


def test_scan_dce_keeps_carries_to_a_fixed_point_and_drops_the_rest():
    ir = ember.dce(ember.make_ir(multi_carry_scan)(XS))
    (scan,) = equations(ir, "scan")
    assert scan.params["num_carry"] == 3  # a, b and c: b feeds a, c feeds b; d and n are dead
    assert len(scan.outputs) == 4  # three carries and the used ys
    assert "exp" not in {e.prim.name for e in scan.params["body_ir"].eqns}
    ember.check_ir(ir)


def test_scan_dce_keeps_values():
    ir = ember.stage_out(multi_carry_scan, ember.ShapedArray(XS.shape, XS.dtype))
    pruned = ember.dce(ir)
    assert len(equations(pruned, "scan")[0].inputs) < len(equations(ir, "scan")[0].inputs)
    for _ in range(3):
        xs = RNG.normal(size=XS.shape)
        np.testing.assert_allclose(np.asarray(ember.eval_ir(pruned, xs)), np.asarray(ember.eval_ir(ir, xs)),
                                   rtol=1e-12)
    got = ember.jit(ember.grad(multi_carry_scan))(XS)
    np.testing.assert_allclose(np.asarray(got), np.asarray(jax.grad(multi_carry(jax, jnp))(XS)), rtol=1e-10)


# ---------------------------------------------------------------------------------------------------------------
# while
def loop_with_dead_carries(lib, np_):
    """Carries: i (read by the predicate only), a (the result), b (feeds a), dead (reads a, read by nobody)."""
    def f(x):
        def body(c):
            i, a, b, dead = c
            return i + 1, a * 0.5 + np_.sin(b), b * 1.1, dead + np_.exp(a)
        return lib.lax.while_loop(lambda c: c[0] < 5, body, (0, x, x * 2.0, x))[1]
    return f


def test_while_dce_drops_a_dead_carry_and_keeps_what_the_predicate_reads():
    x = XS[0]
    ir = ember.stage_out(loop_with_dead_carries(ember, enp), ember.ShapedArray(x.shape, x.dtype))
    (loop,) = equations(ir, "while")
    assert len(loop.outputs) == 4
    pruned = ember.dce(ir)
    ember.check_ir(pruned)
    (loop,) = equations(pruned, "while")
    assert len(loop.outputs) == 3  # i, a, b
    assert "exp" not in {e.prim.name for e in loop.params["body_ir"].eqns}
    np.testing.assert_allclose(np.asarray(ember.eval_ir(pruned, x)), np.asarray(ember.eval_ir(ir, x)), rtol=1e-12)


def test_while_loop_with_dead_carries_matches_jax_under_jit_vmap_and_jvp():
    f, g = loop_with_dead_carries(ember, enp), loop_with_dead_carries(jax, jnp)
    x = XS[0]
    np.testing.assert_allclose(np.asarray(ember.jit(f)(x)), np.asarray(g(x)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ember.vmap(f)(XS)), np.asarray(jax.vmap(g)(XS)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ember.jvp(f, (x,), (np.ones_like(x),))[1]),
                               np.asarray(jax.jvp(g, (x,), (np.ones_like(x),))[1]), rtol=1e-10)


def test_while_hook_is_what_drops_the_carry(monkeypatch):
    x = XS[0]
    ir = ember.stage_out(loop_with_dead_carries(ember, enp), ember.ShapedArray(x.shape, x.dtype))
    with monkeypatch.context() as patch:
        without_hook(patch, while_p, "dce")
        assert len(equations(ember.dce(ir), "while")[0].outputs) == 4


# ---------------------------------------------------------------------------------------------------------------
# cond: reverse mode saves residuals
def branchy(lib, np_):
    def f(x, y, p):
        return lib.lax.cond(p > 0, lambda x, y: np_.sum(np_.sin(x) * y),
                            lambda x, y: np_.sum(np_.exp(y) * np_.tanh(x)), x, y)
    return f


def test_cond_reverse_mode_does_not_recompute_the_branches():
    x, y = XS[0], XS[1]
    ir = ember.make_ir(ember.grad(branchy(ember, enp), argnums=(0, 1)))(x, y, 1.0)
    ember.check_ir(ir)
    forward, backward = (e for e in ir.eqns if e.prim.name == "cond")
    backward_prims = {e.prim.name for b in backward.params["branches"] for e in b.eqns}
    assert not backward_prims & {"sin", "cos", "exp", "tanh"}, backward_prims  # only the linear part is left
    forward_prims = {e.prim.name for b in forward.params["branches"] for e in b.eqns}
    assert {"sin", "cos", "exp", "tanh"} <= forward_prims


@pytest.mark.parametrize("p", [1.0, pytest.param(-1.0, marks=pytest.mark.slow)])  # (both branches: the vmap below)
def test_cond_reverse_mode_matches_jax(p):
    x, y = XS[0], XS[1]
    f, g = branchy(ember, enp), branchy(jax, jnp)
    for argnums in ((0,), (1,), (0, 1)):
        got = ember.jit(ember.grad(f, argnums=argnums))(x, y, p)
        expected = jax.grad(g, argnums=argnums)(x, y, p)
        for a, b in zip(got, expected):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)
    ps = np.array([1.0, -1.0, 2.0])
    got = ember.vmap(ember.grad(f), in_axes=(None, None, 0))(x, y, ps)
    expected = jax.vmap(jax.grad(g), in_axes=(None, None, 0))(x, y, ps)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-10, atol=1e-12)
    hess = ember.jacfwd(ember.grad(f))(x, y, p)
    np.testing.assert_allclose(np.asarray(hess), np.asarray(jax.hessian(g)(x, y, p)), rtol=1e-9, atol=1e-12)
    got = ember.grad(lambda x: enp.sum(ember.grad(f)(x, y, p) ** 2))(x)
    expected = jax.grad(lambda x: jnp.sum(jax.grad(g)(x, y, p) ** 2))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-9, atol=1e-12)


def test_cond_residual_slots_are_shared_by_type_and_need_no_zero_outputs_for_operands():
    x = XS[0]
    # each branch needs one f64[3] residual of its own (cos x, 1 - tanh^2 x): they share one slot
    ir = ember.make_ir(ember.grad(lambda x, p: lax.cond(p > 0, lambda x: enp.sum(enp.sin(x)),
                                                         lambda x: enp.sum(enp.tanh(x)), x)))(x, 1.0)
    forward, backward = (e for e in ir.eqns if e.prim.name == "cond")
    assert [v.aval.shape for v in forward.outputs] == [(FEATURES,)]
    # x * x: the residual is the operand itself, read from the cond's operands, not returned again
    ir = ember.make_ir(ember.grad(lambda x, p: lax.cond(p > 0, lambda x: enp.sum(x * x), lambda x: enp.sum(x), x)))(
        x, 1.0)
    assert len(equations(ir, "cond")) == 1  # the forward cond has nothing left to return: DCE drops it
