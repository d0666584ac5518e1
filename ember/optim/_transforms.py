"""optax's gradient transformations: scaling, momentum (trace, ema), Adam and RMSProp statistics, weight decay and
clipping, with optax's state types, names and arithmetic."""
from __future__ import annotations

from typing import Any, NamedTuple

from ember import numpy as enp
from ember import tree_util
from ember._core import dtypes as dt
from ember.optim._base import (EmptyState, GradientTransformation, global_norm, identity, init_empty_state, masked,
                               safe_increment)


def _map(f: Any, *trees: Any) -> Any:
    """tree_map that passes None leaves (optax's "no update for this parameter") through."""
    return tree_util.tree_map(lambda x, *rest: None if x is None else f(x, *rest), *trees,
                              is_leaf=lambda x: x is None)


def _zeros_like(tree: Any, dtype: Any = None) -> Any:
    return _map(lambda x: enp.zeros_like(x, dtype=dtype), tree)


def _cast(tree: Any, dtype: Any) -> Any:
    return tree if dtype is None else _map(lambda x: enp.asarray(x).astype(dtype), tree)


def _canonical_dtype(dtype: Any) -> Any:
    return None if dtype is None else dt.check_user_dtype(dtype, "optimizer state dtype")


def update_moment(updates: Any, moments: Any, decay: Any, order: int) -> Any:
    """(1 - decay) * g**order + decay * moment, leaf by leaf (optax's EMA of the gradients' powers)."""
    if order == 1:
        return _map(lambda g, t: (1 - decay) * g + decay * t, updates, moments)
    return _map(lambda g, t: (1 - decay) * (g ** order) + decay * t, updates, moments)


def bias_correction(moment: Any, decay: Any, count: Any) -> Any:
    """moment / (1 - decay**count), the EMA's correction for its zero start."""
    correction = 1 - decay ** count
    return _map(lambda t: t / correction.astype(enp.asarray(t).dtype), moment)


_debias = bias_correction  # (scale_by_rms has an argument of that name)


def scale(step_size: Any) -> GradientTransformation:
    """updates * step_size."""
    return GradientTransformation(init_empty_state, lambda updates, state, params=None: (
        _map(lambda g: step_size * g, updates), state))


class ScaleByScheduleState(NamedTuple):
    count: Any


def scale_by_schedule(step_size_fn: Any) -> GradientTransformation:
    """updates * step_size_fn(step), the step counted in the state."""
    def init(params: Any) -> ScaleByScheduleState:
        return ScaleByScheduleState(count=enp.zeros([], "int32"))

    def update(updates: Any, state: ScaleByScheduleState, params: Any = None) -> tuple[Any, ScaleByScheduleState]:
        step_size = step_size_fn(state.count)
        updates = _map(lambda g: enp.asarray(step_size).astype(enp.asarray(g).dtype) * g, updates)
        return updates, ScaleByScheduleState(count=safe_increment(state.count))
    return GradientTransformation(init, update)


def scale_by_learning_rate(learning_rate: Any, *, flip_sign: bool = True) -> GradientTransformation:
    """Scales by -learning_rate (a number or a schedule of the step), as gradient descent does."""
    sign = -1 if flip_sign else 1
    if callable(learning_rate):
        return scale_by_schedule(lambda count: sign * learning_rate(count))
    return scale(sign * learning_rate)


class TraceState(NamedTuple):
    trace: Any


def trace(decay: Any, nesterov: bool = False, accumulator_dtype: Any = None) -> GradientTransformation:
    """Momentum: trace = g + decay * trace; the update is the trace (or g + decay * trace with nesterov)."""
    accumulator_dtype = _canonical_dtype(accumulator_dtype)

    def init(params: Any) -> TraceState:
        return TraceState(trace=_zeros_like(params, accumulator_dtype))

    def update(updates: Any, state: TraceState, params: Any = None) -> tuple[Any, TraceState]:
        def step(g: Any, t: Any) -> Any:
            return g + decay * t
        new_trace = _map(step, updates, state.trace)
        updates = _map(step, updates, new_trace) if nesterov else new_trace
        return updates, TraceState(trace=_cast(new_trace, accumulator_dtype))
    return GradientTransformation(init, update)


class EmaState(NamedTuple):
    count: Any
    ema: Any


def ema(decay: Any, debias: bool = True, accumulator_dtype: Any = None) -> GradientTransformation:
    """An exponential moving average of the updates (bias-corrected when debias)."""
    accumulator_dtype = _canonical_dtype(accumulator_dtype)

    def init(params: Any) -> EmaState:
        return EmaState(count=enp.zeros([], "int32"), ema=_zeros_like(params, accumulator_dtype))

    def update(updates: Any, state: EmaState, params: Any = None) -> tuple[Any, EmaState]:
        updates = new_ema = update_moment(updates, state.ema, decay, 1)
        count = safe_increment(state.count)
        if debias:
            updates = bias_correction(new_ema, decay, count)
        return updates, EmaState(count=count, ema=_cast(new_ema, accumulator_dtype))
    return GradientTransformation(init, update)


class ScaleByAdamState(NamedTuple):
    count: Any
    mu: Any
    nu: Any


def scale_by_adam(b1: Any = 0.9, b2: Any = 0.999, eps: Any = 1e-8, eps_root: Any = 0.0, mu_dtype: Any = None, *,
                  nesterov: bool = False) -> GradientTransformation:
    """Adam's rescaling: bias-corrected first moment over the root of the bias-corrected second moment."""
    mu_dtype = _canonical_dtype(mu_dtype)

    def init(params: Any) -> ScaleByAdamState:
        return ScaleByAdamState(count=enp.zeros([], "int32"), mu=_zeros_like(params, mu_dtype),
                                nu=_zeros_like(params))

    def update(updates: Any, state: ScaleByAdamState, params: Any = None) -> tuple[Any, ScaleByAdamState]:
        mu = update_moment(updates, state.mu, b1, 1)
        nu = update_moment(updates, state.nu, b2, 2)
        count = safe_increment(state.count)
        if nesterov:
            mu_hat = _map(lambda m, g: b1 * m + (1 - b1) * g, bias_correction(mu, b1, safe_increment(count)),
                          bias_correction(updates, b1, count))
        else:
            mu_hat = bias_correction(mu, b1, count)
        nu_hat = bias_correction(nu, b2, count)
        updates = _map(lambda m, v: m / (enp.sqrt(v + eps_root) + eps), mu_hat, nu_hat)
        nu = _map(lambda n, old: n.astype(enp.asarray(old).dtype), nu, state.nu)
        return updates, ScaleByAdamState(count=count, mu=_cast(mu, mu_dtype), nu=nu)
    return GradientTransformation(init, update)


class ScaleByRmsState(NamedTuple):
    nu: Any


class ScaleByRmsWithCountState(NamedTuple):
    count: Any
    nu: Any


def scale_by_rms(decay: Any = 0.9, eps: Any = 1e-8, initial_scale: Any = 0.0, eps_in_sqrt: bool = True,
                 bias_correction: bool = False) -> GradientTransformation:
    """RMSProp's rescaling: updates / sqrt(EMA of squared updates)."""
    correct = bias_correction

    def init(params: Any) -> Any:
        nu = _map(lambda p: enp.full_like(p, initial_scale), params)
        return ScaleByRmsWithCountState(count=enp.zeros([], "int32"), nu=nu) if correct else ScaleByRmsState(nu=nu)

    def update(updates: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        nu = update_moment(updates, state.nu, decay, 2)
        if correct:
            count = safe_increment(state.count)
            nu_hat = _debias(nu, decay, count)
        else:
            nu_hat = nu
        if eps_in_sqrt:
            scaling = _map(lambda n: 1 / enp.sqrt(n + eps), nu_hat)
        else:
            scaling = _map(lambda n: 1 / (enp.sqrt(n) + eps), nu_hat)
        updates = _map(lambda g, s: s * g, updates, scaling)
        return updates, (ScaleByRmsWithCountState(count=count, nu=nu) if correct else ScaleByRmsState(nu=nu))
    return GradientTransformation(init, update)


class ScaleByRStdDevState(NamedTuple):
    mu: Any
    nu: Any


def scale_by_stddev(decay: Any = 0.9, eps: Any = 1e-8, initial_scale: Any = 0.0, eps_in_sqrt: bool = True
                    ) -> GradientTransformation:
    """Centered RMSProp's rescaling: updates / sqrt(E[g^2] - E[g]^2)."""
    def init(params: Any) -> ScaleByRStdDevState:
        return ScaleByRStdDevState(mu=_zeros_like(params), nu=_map(lambda p: enp.full_like(p, initial_scale), params))

    def update(updates: Any, state: ScaleByRStdDevState, params: Any = None) -> tuple[Any, ScaleByRStdDevState]:
        mu = update_moment(updates, state.mu, decay, 1)
        nu = update_moment(updates, state.nu, decay, 2)
        if eps_in_sqrt:
            scaling = _map(lambda m, n: 1 / enp.sqrt(n - enp.square(m) + eps), mu, nu)
        else:
            scaling = _map(lambda m, n: 1 / (enp.sqrt(n - enp.square(m)) + eps), mu, nu)
        return _map(lambda g, s: s * g, updates, scaling), ScaleByRStdDevState(mu=mu, nu=nu)
    return GradientTransformation(init, update)


class WeightDecayScheduleState(NamedTuple):
    count: Any


def add_decayed_weights(weight_decay: Any = 0.0, mask: Any = None) -> GradientTransformation:
    """updates + weight_decay * params (decoupled weight decay, as in AdamW); weight_decay may be a schedule; mask
    (a pytree of bools or a function of the params) limits it to some parameters."""
    def init(params: Any) -> Any:
        return WeightDecayScheduleState(count=enp.zeros([], "int32")) if callable(weight_decay) else EmptyState()

    def update(updates: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        if params is None:
            raise ValueError("ember.optim.add_decayed_weights: update needs params (call "
                             "optimizer.update(grads, state, params))")
        new_state = WeightDecayScheduleState(safe_increment(state.count)) if callable(weight_decay) else state
        if isinstance(weight_decay, (int, float)) and weight_decay == 0.0:
            return updates, new_state
        s = weight_decay(state.count) if callable(weight_decay) else weight_decay
        return _map(lambda g, p: g + s * p, updates, params), new_state
    transform = GradientTransformation(init, update)
    return masked(transform, mask) if mask is not None else transform


def clip(max_delta: Any) -> GradientTransformation:
    """Clips each update elementwise to [-max_delta, max_delta]."""
    return GradientTransformation(init_empty_state, lambda updates, state, params=None: (
        _map(lambda g: enp.clip(g, -max_delta, max_delta), updates), state))


def clip_by_global_norm(max_norm: Any) -> GradientTransformation:
    """Rescales all updates together when their global l2 norm exceeds max_norm."""
    def update(updates: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        g_norm = global_norm(updates)
        trigger = g_norm < max_norm
        return _map(lambda t: enp.where(trigger, t, (t / g_norm.astype(enp.asarray(t).dtype)) * max_norm),
                    updates), state
    return GradientTransformation(init_empty_state, update)


def scale_by_sign() -> GradientTransformation:
    return GradientTransformation(init_empty_state, lambda updates, state, params=None: (
        _map(enp.sign, updates), state))


def keep_params_nonnegative() -> GradientTransformation:
    """Modifies updates so that params + updates stays >= 0."""
    def update(updates: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        if params is None:
            raise ValueError("ember.optim.keep_params_nonnegative: update needs params")
        return _map(lambda u, p: enp.where((p + u) < 0.0, -p, u), updates, params), state
    return GradientTransformation(init_empty_state, update)


__all__ = [
    "EmaState", "ScaleByAdamState", "ScaleByRStdDevState", "ScaleByRmsState", "ScaleByRmsWithCountState",
    "ScaleByScheduleState", "TraceState", "WeightDecayScheduleState", "add_decayed_weights", "bias_correction",
    "clip", "clip_by_global_norm", "ema", "identity", "keep_params_nonnegative", "scale", "scale_by_adam",
    "scale_by_learning_rate", "scale_by_rms", "scale_by_schedule", "scale_by_sign", "scale_by_stddev", "trace",
    "update_moment",
]
