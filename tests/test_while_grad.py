"""Reverse-mode differentiation through while_loop (beyond JAX, which refuses it; docs/while_grad.md).

The oracle is JAX's gradient of the same loop unrolled in Python: each loop below is written once as (cond, body)
functions of a numpy-like module; numpy counts the trip count at the given inputs, and JAX differentiates the body
applied that many times. Data-dependent trip counts (Newton's method, a bisection, an adaptive ODE integrator),
under jit and vmap (batched trip counts), nested in scan and cond, second derivatives, and the memory schedule's
three regimes (every carry kept, segments, replay)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax
from ember._control import loops

pytestmark = pytest.mark.usefixtures("ember_x64")


def unrolled(cond, body, init_fn, *args):
    """JAX's function of args: body applied as often as the loop runs at these args (counted in numpy)."""
    carry, steps = init_fn(np, *args), 0
    while cond(np, carry, *args):
        carry, steps = body(np, carry, *args), steps + 1

    def f(*a):
        c = init_fn(jnp, *a)
        for _ in range(steps):
            c = body(jnp, c, *a)
        return c
    return f, steps


def looped(cond, body, init_fn):
    return lambda *a: lax.while_loop(lambda c: cond(enp, c, *a), lambda c: body(enp, c, *a), init_fn(enp, *a))


# Newton's method for sqrt(a), to convergence: x <- (x + a / x) / 2
NEWTON = (lambda np_, x, a: np_.abs(x * x - a) > 1e-12 * a, lambda np_, x, a: 0.5 * (x + a / x),
          lambda np_, a: a * 1.0)


# bisection for the root of x^3 - a * x - 1 on [lo, hi] (the gradient is the unrolled loop's: the interval's ends)
def _bisect_body(np_, c, a):
    lo, hi = c
    mid = 0.5 * (lo + hi)
    up = mid ** 3 - a * mid - 1.0 > 0
    return np_.where(up, lo, mid), np_.where(up, mid, hi)


BISECT = (lambda np_, c, a: c[1] - c[0] > 1e-9, _bisect_body, lambda np_, a: (0.0 * a, a + 2.0))


# an adaptive Heun integrator of y' = -k y + sin(t) from 0 to 3: step size halved or grown by the error estimate
def _ode_body(np_, c, k):
    t, y, h = c
    h = np_.minimum(h, 3.0 - t)
    f0 = -k * y + np_.sin(t)
    euler = y + h * f0
    f1 = -k * euler + np_.sin(t + h)
    heun = y + 0.5 * h * (f0 + f1)
    err = np_.abs(heun - euler)
    ok = err < 1e-3
    return np_.where(ok, t + h, t), np_.where(ok, heun, y), np_.where(err < 2.5e-4, 2.0 * h, np_.where(ok, h, 0.5 * h))


ODE = (lambda np_, c, k: c[0] < 3.0, _ode_body, lambda np_, k: (0.0 * k, 1.0 + 0.0 * k, 0.5 + 0.0 * k))


def _scalar(tree):
    leaves = jax.tree_util.tree_leaves(tree)
    return sum(leaf.sum() if hasattr(leaf, "sum") else leaf for leaf in leaves)


@pytest.mark.parametrize("loop, args", [(NEWTON, (3.7,)), (NEWTON, (1e4,)), pytest.param(BISECT, (2.5,), marks=(
    pytest.mark.slow)), (ODE, (1.3,))], ids=["newton", "newton_large", "bisection", "adaptive_ode"])
def test_gradient_equals_the_unrolled_loops(loop, args):
    f_jax, steps = unrolled(*loop, *args)
    assert steps > 3
    f = looped(*loop)
    expected = jax.grad(lambda *a: _scalar(f_jax(*a)))(*args)
    loss = lambda *a: _scalar(f(*a))  # noqa: E731
    np.testing.assert_allclose(float(ember.grad(loss)(*args)), float(expected), rtol=1e-10)
    np.testing.assert_allclose(float(ember.jit(ember.grad(loss))(*args)), float(expected), rtol=1e-10)
    value, g = ember.value_and_grad(loss)(*args)
    np.testing.assert_allclose(float(value), float(_scalar(f_jax(*args))), rtol=1e-12)


def test_newton_second_derivatives_and_the_exact_derivative():
    f = looped(*NEWTON)
    f_jax, _ = unrolled(*NEWTON, 3.7)
    np.testing.assert_allclose(float(ember.grad(f)(3.7)), 0.5 / np.sqrt(3.7), rtol=1e-12)
    second = float(jax.grad(jax.grad(f_jax))(3.7))
    np.testing.assert_allclose(float(ember.grad(ember.grad(f))(3.7)), second, rtol=1e-9)  # reverse over reverse
    np.testing.assert_allclose(float(ember.jacfwd(ember.grad(f))(3.7)), second, rtol=1e-9)  # forward over reverse
    np.testing.assert_allclose(float(ember.jit(ember.hessian(f))(3.7)), second, rtol=1e-9)


def test_vmap_with_batched_trip_counts():
    f = looped(*NEWTON)
    a = np.array([0.5, 3.7, 100.0, 1e4])
    counts = [unrolled(*NEWTON, v)[1] for v in a]
    assert len(set(counts)) > 2  # (each example runs its own number of steps)
    expected = [float(jax.grad(unrolled(*NEWTON, v)[0])(v)) for v in a]
    np.testing.assert_allclose(np.asarray(ember.vmap(ember.grad(f))(a)), expected, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(ember.jit(ember.vmap(ember.grad(f)))(a)), expected, rtol=1e-10)
    np.testing.assert_allclose(np.asarray(ember.grad(lambda a: enp.sum(ember.vmap(f)(a)))(a)), expected, rtol=1e-10)


def test_nested_in_scan_and_cond_and_a_scan_inside():
    f = looped(*NEWTON)

    def scanned(lib, a, inner):
        def step(c, x):
            y = inner(c + x)
            return y, y * x
        c, ys = lib.scan(step, a, np.array([1.0, 2.0, 3.0]))
        return c + ys.sum()
    # (JAX cannot be the oracle here: it needs each inner trip count at a traced carry; central differences are)

    a = 3.7
    h = 1e-6
    fd = (float(scanned(lax, a + h, f)) - float(scanned(lax, a - h, f))) / (2 * h)
    np.testing.assert_allclose(float(ember.grad(lambda a: scanned(lax, a, f))(a)), fd, rtol=1e-6)
    np.testing.assert_allclose(float(ember.jit(ember.grad(lambda a: scanned(lax, a, f)))(a)), fd, rtol=1e-6)

    in_cond = lambda a: lax.cond(a > 1.0, f, lambda a: a * 2.0, a)  # noqa: E731
    np.testing.assert_allclose(float(ember.grad(in_cond)(3.7)), 0.5 / np.sqrt(3.7), rtol=1e-12)
    np.testing.assert_allclose(float(ember.jit(ember.grad(in_cond))(0.5)), 2.0)

    def scan_inside(w, x):  # a while whose body runs a scan
        body = lambda c: (c[0] + 1, lax.scan(lambda h, _: (enp.tanh(h * w), None), c[1], None, length=3)[0])  # noqa: E731
        return enp.sum(lax.while_loop(lambda c: c[0] < 4, body, (0, x))[1])

    def scan_inside_jax(w, x):
        for _ in range(12):
            x = jnp.tanh(x * w)
        return jnp.sum(x)
    x = np.linspace(-0.5, 1.0, 4)
    for got, want in zip(ember.grad(scan_inside, argnums=(0, 1))(1.2, x),
                         jax.grad(scan_inside_jax, argnums=(0, 1))(1.2, x)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)


@pytest.mark.parametrize("steps", [0, 1, 8, 9, 30, 64, 65, 100])
def test_every_regime_of_the_schedule(steps):
    """With the least memory (K = 8 slots): every carry kept (n <= 8), segments of s steps (n <= 64), and segments
    longer than K, each step replayed from its segment's checkpoint (n > 64)."""
    x = np.linspace(-1.0, 1.0, 5)

    def f(x, w, n):
        return enp.sum(lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, enp.tanh(c[1] * w + 0.1)), (0, x))[1]
                       ** 2)

    def g(x, w):
        for _ in range(steps):
            x = jnp.tanh(x * w + 0.1)
        return jnp.sum(x ** 2)
    with ember.config.override(while_grad_memory=1):
        assert loops._while_slots([ember.ShapedArray((5,), "f64")]) == loops.WHILE_SLOTS[0]
        got = ember.jit(ember.grad(f, argnums=(0, 1)))(x, 1.1, np.int32(steps))
    for a, b in zip(got, jax.grad(g, argnums=(0, 1))(x, 1.1)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-15)


def test_slots_follow_the_memory_option_and_show_in_the_ir():
    carry = [ember.ShapedArray((), "i32"), ember.ShapedArray((1000,), "f32")]  # (a counter and the array: 4004 B)
    assert loops._while_slots(carry) == 1024  # (64 MiB: 2 * 1024 carries of 4 kB fit)
    with ember.config.override(while_grad_memory=4004 * 2 * 100):
        assert loops._while_slots(carry) == 100
        ir = ember.make_ir(ember.grad(lambda x: enp.sum(lax.while_loop(lambda c: c[0] < 3, lambda c: (
            c[0] + 1, enp.sin(c[1])), (np.int32(0), x))[1])))(np.ones(1000, np.float32))
    text = str(ir)
    assert "f32[100,1000]" in text and "while[" in text
    ember.check_ir(ir)


def test_integer_and_constant_carries_closures_and_the_predicates_consts():
    def f(x, w, limit):
        def body(c):
            i, y, unused, z = c
            return i + 1, enp.sin(y) * w, unused * 2.0, z + y
        i, y, unused, z = lax.while_loop(lambda c: enp.sum(c[3]) < limit, body, (0, x, enp.ones(2), x * 0.0))
        return enp.sum(y) + enp.sum(z) + enp.sum(unused) + i

    def g(x, w, steps):
        y, z = x, x * 0.0
        for _ in range(steps):
            y, z = jnp.sin(y) * w, z + y
        return jnp.sum(y) + jnp.sum(z)
    x = np.array([0.4, 0.9])
    i = 0
    y, z = x.copy(), x * 0.0
    while z.sum() < 5.0:
        y, z, i = np.sin(y) * 1.3, z + y, i + 1
    got = ember.grad(f, argnums=(0, 1, 2))(x, 1.3, 5.0)
    want = jax.grad(g, argnums=(0, 1))(x, 1.3, i)
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), rtol=1e-12)
    np.testing.assert_allclose(float(got[1]), float(want[1]), rtol=1e-12)
    assert float(got[2]) == 0.0  # (the limit changes only the trip count: zero, as the unrolled loop's)
    out, pullback = ember.vjp(lambda x: lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * c[1]),
                                                       (0, x))[1], x)
    np.testing.assert_allclose(np.asarray(pullback(np.ones(2))[0]), 8 * x ** 7, rtol=1e-12)


def test_the_gradient_ir_is_an_ordinary_ir():
    ir = ember.stage_out(lambda a: looped(*NEWTON)(a), ember.ShapedArray((), "f64"))
    grad_ir = ember.grad(ir)
    ember.check_ir(grad_ir)
    assert "while[" in str(grad_ir)
    np.testing.assert_allclose(float(np.asarray(ember.compile(grad_ir)(np.float64(3.7)))), 0.5 / np.sqrt(3.7),
                               rtol=1e-12)


def test_effects_in_the_body_act_once_per_step():
    seen = []

    def f(x):
        def body(c):
            ember.debug.callback(lambda i: seen.append(int(i)), c[0])
            return c[0] + 1, enp.sin(c[1])
        return enp.sum(lax.while_loop(lambda c: c[0] < 3, body, (0, x))[1])
    for grad in (ember.grad(f), ember.jit(ember.grad(f))):
        seen.clear()
        np.testing.assert_allclose(np.asarray(grad(np.ones(2))), np.cos(np.sin(np.sin(1.0))) * np.cos(np.sin(1.0))
                                   * np.cos(1.0) * np.ones(2), rtol=1e-12)
        ember.effects_barrier()
        assert sorted(seen) == [0, 1, 2]

    def g(x):  # an effect whose result the body reads cannot be replayed: a clear error
        def body(c):
            y = ember.experimental.io_callback(lambda v: v, ember.ShapeDtypeStruct((2,), np.float64), c[1])
            return c[0] + 1, enp.sin(y)
        return enp.sum(lax.while_loop(lambda c: c[0] < 3, body, (0, x))[1])
    with pytest.raises(NotImplementedError, match="while_loop whose body reads the results of an effect"):
        ember.grad(g)(np.ones(2))
