"""ember.experimental.ode.odeint against JAX's jax.experimental.ode.odeint (the same Dormand-Prince solver, so the
same values to rounding: measured equal to the bit on these systems, float32 and float64), against scipy's
integrators at tight tolerances and against closed forms: decay, an oscillator with a pytree state, Lotka-Volterra
with args, a stiff system whose step count mxstep bounds; gradients (the adjoint custom VJP) with respect to y0, t
and args against JAX's and finite differences; jit, vmap and grad composed; JAX's errors."""
from __future__ import annotations

import jax
import jax.experimental.ode as jax_ode
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate as sintegrate
from jax.experimental.ode import odeint as jax_odeint

import ember
import ember.api_util
import ember.experimental.ode as ember_ode
import ember.numpy as enp
from ember.experimental.ode import odeint

# JAX's solver and ember's take the same steps in the same arithmetic; a few units in the last place is the slack
# for XLA reassociating a sum differently in one of them.
SAME = {np.dtype(np.float32): dict(rtol=4e-6, atol=1e-6), np.dtype(np.float64): dict(rtol=1e-13, atol=1e-14)}


# The systems, written once over a numpy-like module (ember.numpy, jax.numpy or numpy).
def decay(xp):
    return lambda y, t, k: -k * y


def oscillator(xp):
    """A harmonic oscillator with a dict state (position and velocity of two uncoupled springs)."""
    return lambda y, t, w: {"x": y["v"], "v": -(w ** 2) * y["x"]}


def lotka_volterra(xp):
    """Predator and prey as a tuple state; the rates as a dict argument."""
    def f(y, t, rates):
        prey, predators = y
        return (rates["a"] * prey - rates["b"] * prey * predators,
                -rates["c"] * predators + rates["d"] * prey * predators)
    return f


def stiff(xp):
    """y' = -k (y - cos t): the solution is drawn to cos t at rate k, and an explicit method needs about k / 3
    steps per unit of time to stay stable, whatever the tolerance."""
    return lambda y, t, k: -k * (y - xp.cos(t))


def both(system, y0, t, *args, **options):
    """(ember's, JAX's) solutions of system, as numpy pytrees."""
    ours = odeint(system(enp), y0, t, *args, **options)
    theirs = jax_odeint(system(jnp), jax.tree.map(jnp.asarray, y0), jnp.asarray(t), *args, **options)
    return jax.tree.map(np.asarray, ours), jax.tree.map(np.asarray, theirs)


def assert_same(ours, theirs, **tol):
    """ours and theirs have one structure, shapes and dtypes, and values equal to rounding (SAME)."""
    assert jax.tree.structure(ours) == jax.tree.structure(theirs)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
        np.testing.assert_allclose(a, b, **(tol or SAME[a.dtype]))


def test_exponential_decay_float32():
    t = np.linspace(0., 4., 9, dtype=np.float32)
    y0 = np.array([1., 2., 0.5], np.float32)
    k = np.float32(0.7)
    ours, theirs = both(decay, y0, t, k)
    assert ours.shape == (9, 3) and ours.dtype == np.float32
    assert_same(ours, theirs)
    np.testing.assert_allclose(ours, y0 * np.exp(-0.7 * t.astype(np.float64))[:, None], rtol=2e-5)


@pytest.mark.usefixtures("ember_x64")
def test_harmonic_oscillator_pytree_state_float64():
    t = np.linspace(0., 10., 21)
    y0 = {"x": np.array([1., 0.]), "v": np.array([0., 3.])}
    w = np.float64(1.5)
    ours, theirs = both(oscillator, y0, t, w, rtol=1e-11, atol=1e-11)
    assert set(ours) == {"x", "v"} and ours["x"].shape == (21, 2) and ours["x"].dtype == np.float64
    assert_same(ours, theirs)
    exact_x = np.stack([np.cos(w * t), 2 * np.sin(w * t)], 1)
    exact_v = np.stack([-w * np.sin(w * t), 3 * np.cos(w * t)], 1)
    np.testing.assert_allclose(ours["x"], exact_x, atol=1e-9)
    np.testing.assert_allclose(ours["v"], exact_v, atol=1e-9)


@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.float64, marks=pytest.mark.slow)])
def test_lotka_volterra_with_args(dtype):
    with ember.config.override(enable_x64=dtype == np.float64):
        t = np.linspace(0., 15., 31).astype(dtype)
        y0 = (dtype(10.), dtype(5.))
        rates = {name: dtype(v) for name, v in zip("abcd", (1.1, 0.4, 0.4, 0.1))}
        ours, theirs = both(lotka_volterra, y0, t, rates)
        assert isinstance(ours, tuple) and ours[0].shape == (31,) and ours[0].dtype == dtype
        assert_same(ours, theirs)
        # scipy's LSODA at tight tolerances: odeint's default tolerance (1.4e-8) sets the gap
        f = lotka_volterra(np)
        ref = sintegrate.odeint(lambda y, t: f(y, t, rates), np.array([10., 5.]), t.astype(np.float64),
                                rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(np.stack(ours, 1), ref, atol=(1e-4 if dtype == np.float32 else 2e-6))


@pytest.mark.usefixtures("ember_x64")
def test_stiff_system_and_the_step_bound():
    # 0.2 time units need ~70 stable steps: 40 do not get there, and the last step's quartic is extrapolated
    # (finite and wrong, as JAX's; nothing raises inside compiled code)
    t = np.linspace(0., 2., 11)
    y0 = np.array([0., 2.])
    ours, theirs = both(stiff, y0, t, np.float64(1000.), mxstep=40)
    assert_same(ours, theirs, rtol=1e-10)
    assert np.isfinite(ours).all() and np.abs(ours - solve_stiff_exactly(y0, t, 1000.)).max() > 1.


def solve_stiff_exactly(y0, t, k):
    """y' = -k (y - cos t): y = (k^2 cos t + k sin t) / (k^2 + 1) + (y0 - k^2 / (k^2 + 1)) e^{-k t}."""
    steady = (k ** 2 * np.cos(t) + k * np.sin(t)) / (k ** 2 + 1)
    return steady[:, None] + (y0 - k ** 2 / (k ** 2 + 1))[None, :] * np.exp(-k * t)[:, None]


@pytest.mark.slow
@pytest.mark.usefixtures("ember_x64")
def test_stiff_system_accuracy_edge_times_and_options():
    t = np.linspace(0., 2., 11)
    y0 = np.array([0., 2.])
    k = np.float64(1000.)
    for mxstep in (np.inf, 400):  # 400: enough for every interval
        ours, theirs = both(stiff, y0, t, k, mxstep=mxstep)
        assert_same(ours, theirs)
        np.testing.assert_allclose(ours, solve_stiff_exactly(y0, t, 1000.), atol=1e-7)
    ivp = sintegrate.solve_ivp(lambda s, y: stiff(np)(y, s, k), (0., 2.), y0, method="Radau", t_eval=t,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours, ivp.y.T, atol=1e-7)
    # hmax caps the steps: more of them, the same tolerance
    ours, theirs = both(decay, y0, t, np.float64(0.5), hmax=0.01)
    assert_same(ours, theirs)
    np.testing.assert_allclose(ours, y0 * np.exp(-0.5 * t)[:, None], rtol=1e-9, atol=1e-12)
    # looser tolerances take fewer, larger steps: less accurate, still JAX's values
    ours, theirs = both(decay, y0, t, np.float64(0.5), rtol=1e-3, atol=1e-3)
    assert_same(ours, theirs)
    assert np.abs(ours - y0 * np.exp(-0.5 * t)[:, None]).max() > 1e-6
    # one time: y0 itself; the first time repeated divides 0 by 0 in the interpolation: NaN, as JAX's
    np.testing.assert_array_equal(np.asarray(odeint(decay(enp), y0, t[:1], 0.5)), y0[None])
    ours, theirs = both(decay, y0, np.array([0., 0., 1.]), np.float64(0.5))
    assert np.isnan(ours[1]).all() and np.isnan(theirs[1]).all()
    assert_same(ours[2], theirs[2])


def _lv_loss(xp, solve):
    """A scalar of the whole trajectory, differentiable in y0, t and the rates."""
    weights = np.linspace(0.5, 1.5, 6)

    def loss(y0, t, rates):
        prey, predators = solve(lotka_volterra(xp), (y0[0], y0[1]), t, rates, rtol=1e-10, atol=1e-10)
        return xp.sum(weights * prey) + xp.sum(weights[::-1] * predators ** 2)
    return loss


@pytest.mark.usefixtures("ember_x64")
def test_gradients_wrt_y0_t_and_args_float64():
    y0 = np.array([10., 5.])
    t = np.array([0., 0.5, 1.2, 2., 2.5, 3.])
    rates = {"a": 1.1, "b": 0.4, "c": 0.4, "d": 0.1}
    ours = ember.jit(ember.grad(_lv_loss(enp, odeint), argnums=(0, 1, 2)))(y0, t, rates)
    theirs = jax.grad(_lv_loss(jnp, jax_odeint), argnums=(0, 1, 2))(jnp.asarray(y0), jnp.asarray(t),
                                                                     {k: jnp.asarray(v) for k, v in rates.items()})
    assert_same(jax.tree.map(np.asarray, ours), jax.tree.map(np.asarray, theirs), rtol=1e-11, atol=1e-11)
    # central differences of the loss on scipy's solutions (LSODA, tolerance 1e-13) in each of the 12 inputs
    f = lotka_volterra(np)

    def scipy_loss(y0, t, rates):
        ys = sintegrate.odeint(lambda y, s: np.array(f(y, s, rates)), y0, t, rtol=1e-13, atol=1e-13)
        return _lv_loss(np, lambda *_, **__: ys.T)(y0, t, rates)
    h = 1e-5
    for where, grad in (("y0", ours[0]), ("t", ours[1]), *((name, ours[2][name]) for name in rates)):
        for i in range(np.size(grad)):
            shifted = [{**dict(y0=y0.copy(), t=t.copy()), **rates} for _ in range(2)]
            for sign, inputs in zip((1, -1), shifted):
                if np.ndim(inputs[where]):
                    inputs[where][i] += sign * h
                else:
                    inputs[where] += sign * h
            plus, minus = (scipy_loss(x.pop("y0"), x.pop("t"), x) for x in shifted)
            np.testing.assert_allclose(np.ravel(grad)[i], (plus - minus) / (2 * h), rtol=1e-6, atol=1e-6,
                                       err_msg=f"{where}[{i}]")


T_LV = np.linspace(0., 3., 7, dtype=np.float32)
RATES = {name: np.float32(v) for name, v in zip("abcd", (1.1, 0.4, 0.4, 0.1))}
STARTS = np.array([[10., 5.], [8., 4.], [12., 3.]], np.float32)


def _lv_matrix(xp, solver, y0, rates):
    """Lotka-Volterra from the vector y0: the (len(T_LV), 2) solution."""
    return xp.stack(solver(lotka_volterra(xp), (y0[0], y0[1]), T_LV, rates), 1)


def test_vmap_over_y0_under_jit():
    # each row is the unbatched solution (JAX's batched while loop reorders a little arithmetic: its rows agree
    # with its unbatched solutions to float32 rounding only)
    ours = ember.jit(ember.vmap(lambda y0: _lv_matrix(enp, odeint, y0, RATES)))(STARTS)
    theirs = jax.vmap(lambda y0: _lv_matrix(jnp, jax_odeint, y0, RATES))(STARTS)
    rows = np.stack([np.asarray(_lv_matrix(enp, odeint, y0, RATES)) for y0 in STARTS])
    np.testing.assert_array_equal(np.asarray(ours), rows)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_vmap_over_args_and_grad_under_jit():
    a_values = np.array([1.0, 1.1, 1.3], np.float32)
    ours = ember.vmap(lambda a: _lv_matrix(enp, odeint, STARTS[0], {**RATES, "a": a}))(a_values)
    theirs = jax.vmap(lambda a: _lv_matrix(jnp, jax_odeint, STARTS[0], {**RATES, "a": a}))(a_values)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-5)

    # grad of a loss under jit, in y0 and in a value func closes over (closure_convert makes it an argument)
    def loss(xp, solver):
        def f(y0, scale):
            prey, predators = solver(lambda y, s, r: [scale * v for v in lotka_volterra(xp)(y, s, r)],
                                     [y0[0], y0[1]], T_LV, RATES)
            return xp.sum(prey) + 0.5 * xp.sum(predators)
        return f
    ours = ember.jit(ember.grad(loss(enp, odeint), argnums=(0, 1)))(STARTS[0], np.float32(0.9))
    theirs = jax.grad(loss(jnp, jax_odeint), argnums=(0, 1))(jnp.asarray(STARTS[0]), jnp.float32(0.9))
    for a, b in zip(ours, theirs):
        assert a.dtype == np.float32
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5)


@pytest.mark.slow
def test_vmap_of_grad_and_grad_of_vmap():
    t = np.linspace(0., 2., 5, dtype=np.float32)
    ks = np.array([0.5, 1., 2.], np.float32)

    def loss(xp, solver):
        return lambda y0, k: xp.sum(solver(stiff(xp), y0, t, k) ** 2)
    y0 = np.array([1., -1.], np.float32)
    ours = ember.vmap(ember.grad(loss(enp, odeint), argnums=(0, 1)), in_axes=(None, 0))(y0, ks)
    theirs = jax.vmap(jax.grad(loss(jnp, jax_odeint), argnums=(0, 1)), in_axes=(None, 0))(y0, ks)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=1e-6)
    ours = ember.grad(lambda k: enp.sum(ember.vmap(lambda k: loss(enp, odeint)(y0, k))(k)))(ks)
    theirs = jax.grad(lambda k: jnp.sum(jax.vmap(lambda k: loss(jnp, jax_odeint)(y0, k))(k)))(ks)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=2e-5)


@pytest.mark.slow
def test_complex_state_and_gradients_float32():
    t = np.linspace(0., 2., 5, dtype=np.float32)
    spin = np.complex64(0.3 + 2j)
    ours, theirs = both(lambda xp: lambda y, t: -spin * y, np.array([1 + 1j, 2j], np.complex64), t)
    assert_same(ours, theirs, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours, np.array([1 + 1j, 2j]) * np.exp(-spin * t)[:, None], atol=1e-5)
    y0 = np.array([10., 5.], np.float32)
    rates = {name: np.float32(v) for name, v in zip("abcd", (1.1, 0.4, 0.4, 0.1))}
    tt = np.array([0., 0.5, 1.2, 2., 2.5, 3.], np.float32)
    ours = ember.grad(_lv_loss(enp, odeint), argnums=(0, 1, 2))(y0, tt, rates)
    theirs = jax.grad(_lv_loss(jnp, jax_odeint), argnums=(0, 1, 2))(y0, tt, rates)
    for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-4)


def test_the_solver_steps_are_jaxs():
    """The helpers jax.experimental.ode exposes (runge_kutta_step, initial_step_size, mean_error_ratio,
    optimal_step_size, interp_fit_dopri, fit_4th_order_polynomial, abs2, ravel_first_arg) give JAX's values."""
    rng = np.random.default_rng(0)
    y0, y1 = rng.normal(size=(2, 3)).astype(np.float32)
    error = (rng.normal(size=3) * 1e-6).astype(np.float32)

    def steps(ode, xp, api_util):
        def slope(y, t):
            return {"a": -y["a"] * xp.cos(t), "b": y["a"][:1] + y["b"]}
        f = ode.ravel_first_arg(slope, lambda v: {"a": v[:2], "b": v[2:]},
                                api_util.debug_info("odeint", slope, (y0, 0.3), {}))
        f0 = f(y0, np.float32(0.3))
        y, f1, err, k = ode.runge_kutta_step(f, y0, f0, np.float32(0.3), np.float32(0.1))
        ratio = ode.mean_error_ratio(error, 1e-5, 1e-6, y0, y1)
        return (f0, y, f1, err, k, ratio, ode.optimal_step_size(np.float32(0.1), ratio),
                ode.optimal_step_size(np.float32(0.1), np.float32(3.), safety=0.8, dfactor=0.5),
                ode.initial_step_size(f, np.float32(0.3), y0, 4, 1e-6, 1e-6, f0), ode.interp_fit_dopri(y0, y, k,
                np.float32(0.1)), *ode.fit_4th_order_polynomial(y0, y1, y0 * 0.5, f0, f1, np.float32(0.1)),
                ode.abs2(y0 + 1j * y1))
    for got, want in zip(ember.jit(lambda: steps(ember_ode, enp, ember.api_util))(),
                         jax.jit(lambda: steps(jax_ode, jnp, jax.api_util))()):
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-6, atol=1e-7)


def test_errors_as_jax():
    t = np.linspace(0., 1., 3, dtype=np.float32)
    y0 = np.float32(1.)
    for solver in (odeint, jax_odeint):  # JAX's are TypeErrors with these words too
        with pytest.raises(TypeError, match=r"\*args must be arrays or scalars, but got"):
            solver(lambda y, t, name: -y, y0, t, "decay")
        with pytest.raises(TypeError, match="t must be an array of floats"):
            solver(lambda y, t: -y, y0, np.arange(3))
    with pytest.raises(TypeError, match="y0 must hold floating-point or complex arrays, got int32"):
        odeint(lambda y, t: -y, np.int32(1), t)  # (JAX: a while_loop carry whose dtype changes)
    with pytest.raises(TypeError, match=r"func must return a value of y0's sizes and dtypes \(1 values of float32\), "
                                        r"got 2 values"):
        odeint(lambda y, t: enp.stack([y, y]), y0, t)
    with pytest.raises(ValueError, match=r"t must be a 1-D array of times, got shape \(\)"):
        odeint(lambda y, t: -y, y0, np.float32(1.))
    # forward mode: odeint is a custom_vjp function, as JAX's
    with pytest.raises(TypeError, match="custom_vjp"):
        ember.jvp(lambda y: odeint(lambda y, t: -y, y, t), (y0,), (y0,))
    with pytest.raises(TypeError, match="custom_vjp"):
        jax.jvp(lambda y: jax_odeint(lambda y, t: -y, y, t), (y0,), (y0,))
