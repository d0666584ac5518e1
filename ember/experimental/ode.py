"""ember.experimental.ode, as jax.experimental.ode: odeint, an adaptive Dormand-Prince (RK45) integrator of
dy/dt = func(y, t, *args), with gradients by the adjoint method (docs/scipy.md, ODE integration).

The solver is JAX 0.10.2's, step for step, so that ember's values are JAX's to rounding: Hairer, Norsett and
Wanner's first step size (Solving ODEs I, II.4), the Dormand-Prince 5(4) pair with the error of the 4th-order
solution as the local error estimate, a step accepted when the RMS of that error over the per-component tolerance
`atol + rtol * max(|y_old|, |y_new|)` is at most 1, the next step scaled by 0.9 * ratio**(-1/5) within [0.2, 10]
(never shrunk after an accepted step) and capped by hmax, and each requested time read from the quartic that fits
the step containing it (its ends, their slopes and Shampine's 4th-order midpoint). mxstep bounds the attempted
steps per requested time; past it the quartic of the last accepted step is extrapolated, as JAX does (finite
values that are wrong, not an error: JAX's bound is checked in compiled code).

Reverse mode is a custom VJP that integrates the adjoint system backwards between requested times (Chen et al.
2018, "Neural ordinary differential equations", appendix C): the state, its cotangent, the cotangent of the first
time and those of args, with the same tolerances; each requested time's cotangent is the output cotangent dotted
with func there. Forward mode is refused, as JAX's (custom_vjp). The solver is a while_loop inside a scan inside a
jit, with a custom_vjp: ember's own transformations of those compose over it (vmap, jit, grad, closures over
traced values by closure_convert).

The steps of the solver are public with JAX's names and signatures (runge_kutta_step, initial_step_size,
mean_error_ratio, optimal_step_size, interp_fit_dopri, fit_4th_order_polynomial, abs2, ravel_first_arg), as
jax.experimental.ode has them, for code that builds its own loop from them.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import numpy as np

from ember import config, lax, numpy as jnp
from ember._api.closures import closure_convert
from ember._api.jit import jit
from ember._api.autodiff import vjp
from ember._api.vmap import vmap
from ember._control import custom_vjp
from ember.extend.core import valid_jaxtype
from ember.example_libraries.optimizers import safe_map, safe_zip
from ember.flatten_util import ravel_pytree
from ember.scipy._util import promote_inexact as promote_dtypes_inexact
from ember.tree_util import tree_leaves, tree_map, tree_structure

# (JAX's module has no __all__: these are the names it defines; the ones it imports are at the end of this one.)
__all__ = ["abs2", "fit_4th_order_polynomial", "initial_step_size", "interp_fit_dopri", "mean_error_ratio", "odeint",
           "optimal_step_size", "ravel_first_arg", "runge_kutta_step"]

# The Dormand-Prince 5(4) tableau. _NODES[i] is stage i+1's fraction of the step (the 0 closes the vector: stage 7
# is evaluated at the step's end, and row 7 of _COUPLING does not exist); _COUPLING[i] the weights of stages 0..i
# in stage i+1's state; _WEIGHTS5 the 5th-order solution (also _COUPLING's last row: first same as last, stage 7
# is the next step's first); _ERROR the 5th- minus the 4th-order weights.
_NODES = (1 / 5, 3 / 10, 4 / 5, 8 / 9, 1., 1., 0.)
_COUPLING = (
    (1 / 5, 0, 0, 0, 0, 0, 0),
    (3 / 40, 9 / 40, 0, 0, 0, 0, 0),
    (44 / 45, -56 / 15, 32 / 9, 0, 0, 0, 0),
    (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0, 0, 0),
    (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656, 0, 0),
    (35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0))
_WEIGHTS5 = (35 / 384, 0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84, 0)
_WEIGHTS4 = (1951 / 21600, 0, 22642 / 50085, 451 / 720, -12231 / 42400, 649 / 6300, 1 / 60)
_ERROR = tuple(w5 - w4 for w5, w4 in zip(_WEIGHTS5, _WEIGHTS4))
# Shampine's weights for the solution at the middle of a step (times the step), 4th-order accurate there.
_MIDPOINT = (6025192743 / 30085553152 / 2, 0, 51252292925 / 65400821598 / 2, -2691868925 / 45128329728 / 2,
             187940372067 / 1594534317056 / 2, -1776094331 / 19743644256 / 2, 11237099 / 235043384 / 2)


def odeint(func: Callable[..., Any], y0: Any, t: Any, *args: Any, rtol: float = 1.4e-8, atol: float = 1.4e-8,
           mxstep: float = np.inf, hmax: float = np.inf) -> Any:
    """The solution of dy/dt = func(y, t, *args), y(t[0]) = y0, at each time of t (jax.experimental.ode.odeint).

    func: returns the time derivative of y, with y0's structure, shapes and dtypes.
    y0: the initial state, an array or a pytree of arrays (floating or complex).
    t: a 1-D floating array of strictly increasing times; the solution at t[0] is y0.
    *args: further arguments of func, arrays, scalars or pytrees of them (differentiable, unlike values func
      closes over when odeint is called outside a trace).
    rtol, atol: the relative and absolute local error tolerances of each step.
    mxstep: the most steps attempted on the way to each time of t (beyond it the result is an extrapolation).
    hmax: the largest step.

    Returns y0's pytree with each leaf the solution at each time of t, stacked along a new leading axis."""
    for arg in tree_leaves(args):
        if not valid_jaxtype(arg):
            raise TypeError(f"odeint: the contents of *args must be arrays or scalars, but got {arg!r} (of type "
                            f"{type(arg).__name__}); pass other values by closing func over them")
    t_dtype = getattr(t, "dtype", None)
    if t_dtype is None or not jnp.issubdtype(t_dtype, jnp.floating):
        raise TypeError(f"odeint: t must be an array of floats, but got {t!r}")
    if np.ndim(t) != 1:
        raise ValueError(f"odeint: t must be a 1-D array of times, got shape {np.shape(t)}")
    # Traced values func closes over (of an enclosing jit, grad or vmap) become trailing arguments: custom_vjp
    # differentiates its arguments only, and the adjoint needs their cotangents too.
    converted, consts = closure_convert(func, y0, t[0], *args)
    return _odeint_on_pytrees(converted, rtol, atol, mxstep, hmax, y0, t, *args, *consts)


def ravel_first_arg(f: Callable[..., Any], unravel: Callable[[Any], Any], debug_info: Any = None
                    ) -> Callable[..., Any]:
    """f(y, *args) of a pytree y as a function of y raveled into one vector (unravel takes it back), its value
    raveled too. Its value must have y's size and dtype (or a narrower one: then the slopes stay in it, as in
    JAX), else a TypeError. debug_info (JAX's tracing metadata) is accepted and not needed."""
    def flat_f(y_flat: Any, *args: Any) -> Any:
        out, _ = ravel_pytree(f(unravel(y_flat), *args))
        if out.shape != y_flat.shape or jnp.promote_types(out.dtype, y_flat.dtype) != y_flat.dtype:
            raise TypeError(f"odeint: func must return a value of y0's sizes and dtypes ({y_flat.shape[0]} values "
                            f"of {y_flat.dtype}), got {out.shape[0]} values of {out.dtype}")
        return out
    return flat_f


@jit(static_argnums=(0, 1, 2, 3, 4))
def _odeint_on_pytrees(func: Callable[..., Any], rtol: float, atol: float, mxstep: float, hmax: float, y0: Any,
                       ts: Any, *args: Any) -> Any:
    """odeint on y0 raveled into one vector (one program per signature); the solutions unraveled back."""
    flat_y0, unravel = ravel_pytree(y0)
    if not jnp.issubdtype(flat_y0.dtype, jnp.inexact):
        raise TypeError(f"odeint: y0 must hold floating-point or complex arrays, got {flat_y0.dtype} values")
    flat_func = ravel_first_arg(func, unravel)
    with config.override(default_matmul_precision="highest"):
        ys = _odeint_flat(flat_func, rtol, atol, mxstep, hmax, flat_y0, ts, *args)
        return vmap(unravel)(ys)


class _Stepper(NamedTuple):
    """The integrator between requested times: the accepted state y and its slope f at time t, the next step dt,
    and the quartic (coefficients, highest power first) over the last accepted step, from last_t to t."""
    y: Any
    f: Any
    t: Any
    dt: Any
    last_t: Any
    quartic: Any


def runge_kutta_step(func: Callable[[Any, Any], Any], y0: Any, f0: Any, t0: Any, dt: Any
                     ) -> tuple[Any, Any, Any, Any]:
    """One Dormand-Prince step of func(y, t) from the vector y0 at t0, with its slope f0 there, as JAX's:
    (the 5th-order y at t0 + dt, its slope, the error estimate, the seven stage slopes as a (7, n) array). The
    stages are computed in f0's dtype, the times in dt's."""
    dtype = f0.dtype
    nodes = jnp.array(_NODES, dtype=dt.dtype)
    coupling = jnp.array(_COUPLING, dtype=dtype)
    h = dt.astype(dtype)

    def stage(i: Any, slopes: Any) -> Any:
        state = y0 + h * jnp.dot(coupling[i - 1, :], slopes)
        return slopes.at[i, :].set(func(state, t0 + dt * nodes[i - 1]))

    slopes = jnp.zeros((7, f0.shape[0]), dtype).at[0, :].set(f0)
    slopes = lax.fori_loop(1, 7, stage, slopes)
    y1 = h * jnp.dot(jnp.array(_WEIGHTS5, dtype=dtype), slopes) + y0
    error = h * jnp.dot(jnp.array(_ERROR, dtype=dtype), slopes)
    return y1, slopes[-1], error, slopes


def fit_4th_order_polynomial(y0: Any, y1: Any, y_mid: Any, dy0: Any, dy1: Any, dt: Any
                             ) -> tuple[Any, Any, Any, Any, Any]:
    """The coefficients (a, b, c, d, e) of a s^4 + b s^3 + c s^2 + d s + e, s = (t - t0) / dt, through y0 at
    s = 0, y_mid at s = 1/2 and y1 at s = 1, with the slopes dy0 and dy1 (in t) at the ends."""
    h = dt.astype(y0.dtype)
    a = -2. * h * dy0 + 2. * h * dy1 - 8. * y0 - 8. * y1 + 16. * y_mid
    b = 5. * h * dy0 - 3. * h * dy1 + 18. * y0 + 14. * y1 - 32. * y_mid
    c = -4. * h * dy0 + h * dy1 - 11. * y0 - 5. * y1 + 16. * y_mid
    return a, b, c, h * dy0, y0


def interp_fit_dopri(y0: Any, y1: Any, k: Any, dt: Any) -> Any:
    """The dense output of a Dormand-Prince step from y0 to y1 with stage slopes k (7, n): the quartic's
    coefficients as a (5, n) array, highest power first, with Shampine's 4th-order midpoint value."""
    y_mid = y0 + dt.astype(y0.dtype) * jnp.dot(jnp.array(_MIDPOINT, dtype=y0.dtype), k)
    return jnp.stack(fit_4th_order_polynomial(y0, y1, y_mid, k[0], k[-1], dt))


def _horner(coefficients: Any, s: Any) -> Any:
    """The polynomial with these coefficient rows (highest power first) at s (jnp.polyval's arithmetic)."""
    value = jnp.zeros_like(coefficients[0])
    for row in coefficients:
        value = value * s + row
    return value


def abs2(x: Any) -> Any:
    """|x|^2, for complex x without the square root."""
    return x.real ** 2 + x.imag ** 2 if jnp.iscomplexobj(x) else x ** 2


def mean_error_ratio(error_estimate: Any, rtol: Any, atol: Any, y0: Any, y1: Any) -> Any:
    """The RMS over components of a step's error estimate relative to each component's tolerance
    atol + rtol * max(|y0|, |y1|): the step is accepted when it is at most 1."""
    tolerance = atol + rtol * jnp.maximum(jnp.abs(y0), jnp.abs(y1))
    return jnp.sqrt(jnp.mean(abs2(error_estimate / tolerance.astype(error_estimate.dtype))))


def optimal_step_size(last_step: Any, mean_error_ratio: Any, safety: float = 0.9, ifactor: float = 10.0,
                      dfactor: float = 0.2, order: float = 5.0) -> Any:
    """The step after one of size last_step with this error ratio: safety * ratio**(-1/order) times it, at most
    ifactor times, and at least dfactor times (after a rejected step) or 1 time (after an accepted one: never
    shrunk); ifactor times for a zero error."""
    dfactor = jnp.where(mean_error_ratio < 1, 1.0, dfactor)
    factor = jnp.minimum(ifactor, jnp.maximum(mean_error_ratio ** (-1.0 / order) * safety, dfactor))
    return jnp.where(mean_error_ratio == 0, last_step * ifactor, last_step * factor)


def initial_step_size(fun: Callable[[Any, Any], Any], t0: Any, y0: Any, order: int, rtol: Any, atol: Any,
                      f0: Any) -> Any:
    """Hairer, Norsett and Wanner's first step for a method of this order (Solving ODEs I, II.4) for fun(y, t)
    from the vector y0 at t0 with slope f0: the step of a 1% change of y from its scaled size and slope, then
    one Euler step's estimate of the second derivative, taken no larger than 100 times the first guess."""
    y0, f0 = promote_dtypes_inexact(y0, f0)
    dtype = y0.dtype
    scale = (atol + jnp.abs(y0) * rtol).astype(dtype)
    d0 = jnp.linalg.norm(y0 / scale)
    d1 = jnp.linalg.norm(f0 / scale)
    h0 = jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    f1 = fun(y0 + h0.astype(dtype) * f0, t0 + h0)
    d2 = jnp.linalg.norm((f1 - f0) / scale) / h0
    h1 = jnp.where((d1 <= 1e-15) & (d2 <= 1e-15), jnp.maximum(1e-6, h0 * 1e-3),
                   (0.01 / jnp.maximum(d1, d2)) ** (1. / (order + 1.)))
    return jnp.minimum(100. * h0, h1)


@functools.partial(custom_vjp, nondiff_argnums=(0, 1, 2, 3, 4))
def _odeint_flat(func: Callable[..., Any], rtol: float, atol: float, mxstep: float, hmax: float, y0: Any, ts: Any,
                 *args: Any) -> Any:
    """The solution at each time of ts, (len(ts), n), of y' = func(y, t, *args) for a vector y0 of n values."""
    def slope(y: Any, t: Any) -> Any:
        return func(y, t, *args)

    def advance(stepper: _Stepper, target: Any) -> tuple[_Stepper, Any]:
        """Step until the accepted steps pass target (or mxstep steps, or a zero step); interpolate there."""
        def going(state: tuple[Any, _Stepper]) -> Any:
            count, s = state
            return (s.t < target) & (count < mxstep) & (s.dt > 0)

        def attempt(state: tuple[Any, _Stepper]) -> tuple[Any, _Stepper]:
            count, s = state
            y, f, error, slopes = runge_kutta_step(slope, s.y, s.f, s.t, s.dt)
            ratio = mean_error_ratio(error, rtol, atol, s.y, y)
            dt = jnp.clip(optimal_step_size(s.dt, ratio), min=0., max=hmax)
            accepted = _Stepper(y, f, s.t + s.dt, dt, s.t, interp_fit_dopri(s.y, y, slopes, s.dt))
            rejected = s._replace(dt=dt)
            keep = ratio <= 1.
            return count + 1, _Stepper(*(jnp.where(keep, new, old) for new, old in zip(accepted, rejected)))

        _, stepper = lax.while_loop(going, attempt, (jnp.asarray(0, jnp.int32), stepper))
        fraction = (target - stepper.last_t) / (stepper.t - stepper.last_t)
        return stepper, _horner(stepper.quartic, fraction.astype(stepper.quartic.dtype))

    f0 = slope(y0, ts[0])
    dt = jnp.clip(initial_step_size(slope, ts[0], y0, 4, rtol, atol, f0), min=0., max=hmax)
    start = _Stepper(y0, f0, ts[0], dt, ts[0], jnp.stack([y0] * 5))
    _, ys = lax.scan(advance, start, ts[1:])
    return jnp.concatenate([y0[None], ys])


def _odeint_fwd(func: Callable[..., Any], rtol: float, atol: float, mxstep: float, hmax: float, y0: Any, ts: Any,
                *args: Any) -> tuple[Any, tuple[Any, Any, tuple[Any, ...]]]:
    ys = _odeint_flat(func, rtol, atol, mxstep, hmax, y0, ts, *args)
    return ys, (ys, ts, args)


def _odeint_bwd(func: Callable[..., Any], rtol: float, atol: float, mxstep: float, hmax: float,
                residuals: tuple[Any, Any, tuple[Any, ...]], ys_bar: Any) -> tuple[Any, ...]:
    """The adjoint pass: from the last requested time back to the first, integrate the state backwards together
    with its cotangent, the first time's and args' (in the reversed time s = -t, so odeint sees increasing
    times), adding each requested time's output cotangent to the state's on the way."""
    with config.override(default_matmul_precision="highest"):
        return _adjoint(func, rtol, atol, mxstep, hmax, *residuals, ys_bar)


def _adjoint(func: Callable[..., Any], rtol: float, atol: float, mxstep: float, hmax: float, ys: Any, ts: Any,
             args: tuple[Any, ...], ys_bar: Any) -> tuple[Any, ...]:
    # Only inexact args have cotangents: integer ones (counts, indices) stay out of the adjoint state.
    differentiable = [jnp.issubdtype(jnp.result_type(leaf), jnp.inexact) for leaf in tree_leaves(args)]

    def leaves_where(mask: list[bool], tree: Any) -> list[Any]:
        return [leaf for leaf, keep in zip(tree_leaves(tree), mask) if keep]

    def adjoint_dynamics(state: tuple[Any, Any, Any, list[Any]], s: Any, *args: Any) -> tuple[Any, ...]:
        y, y_bar, _, _ = state
        dy, pullback = vjp(func, y, -s, *args)
        y_cot, t_cot, *args_cot = pullback(y_bar)
        return -dy, y_cot, t_cot, leaves_where(differentiable, args_cot)

    def back(carry: tuple[Any, Any, list[Any]], x: tuple[Any, ...]) -> tuple[tuple[Any, Any, list[Any]], Any]:
        """From requested time t back to the one before it, t_before."""
        y_bar, t0_bar, args_bar = carry
        y, t, t_before, g, g_before = x
        t_bar = jnp.dot(func(y, t, *args), g).real  # how the output at t moves with t
        t0_bar = t0_bar - t_bar
        _, y_bar, t0_bar, args_bar = odeint(adjoint_dynamics, (y, y_bar, t0_bar, args_bar),
                                            jnp.stack([-t, -t_before]), *args,
                                            rtol=rtol, atol=atol, mxstep=mxstep, hmax=hmax)
        y_bar, t0_bar, args_bar = tree_map(lambda leaf: leaf[1], (y_bar, t0_bar, args_bar))
        return (y_bar + g_before, t0_bar, args_bar), t_bar

    start = (ys_bar[-1], jnp.zeros((), jnp.finfo(ys.dtype).dtype),
             [jnp.zeros_like(leaf) for leaf in leaves_where(differentiable, args)])
    (y0_bar, t0_bar, args_bar), ts_bar = lax.scan(
        back, start, (ys[1:], ts[1:], ts[:-1], ys_bar[1:], ys_bar[:-1]), reverse=True)
    ts_bar = jnp.concatenate([t0_bar[None], ts_bar]).astype(ts.dtype)
    found = iter(args_bar)  # (None: a zero cotangent, for the integer leaves)
    args_bar = tree_structure(args).unflatten([next(found) if keep else None for keep in differentiable])
    return (y0_bar, ts_bar, *args_bar)


_odeint_flat.defvjp(_odeint_fwd, _odeint_bwd)

# JAX's module has these names too (its imports): ravel_pytree, tree_leaves, tree_map, promote_dtypes_inexact above,
# and jax._src.util's length-checking map and zip, shadowing the builtins as there.
map = safe_map  # noqa: A001
zip = safe_zip  # noqa: A001
