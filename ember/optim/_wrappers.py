"""optax's wrappers of transformations: skipping non-finite updates (apply_if_finite, zero_nans), accumulating
gradients over several steps (MultiSteps with skip_not_finite / skip_large_updates), flattening the updates into
one vector (flatten), slow and fast parameters (lookahead), and hyperparameters kept in the state or scheduled
(inject_hyperparams). States, names and arithmetic as optax's, except
that a choice between two values is a select (enp.where) where optax multiplies by 0 or 1, so a NaN in the branch
not taken never leaks out."""
from __future__ import annotations

import functools
import inspect
import math
from typing import Any, Callable, NamedTuple, Sequence

import numpy as np

from ember import numpy as enp
from ember import tree_util
from ember._core import dtypes as dt
from ember.optim._base import GradientTransformation, safe_increment
from ember.optim._transforms import _map, _zeros_like


def _select(pred: Any, on_true: Any, on_false: Any) -> Any:
    """on_true where the scalar pred holds, else on_false, leaf by leaf (each leaf keeps on_false's dtype)."""
    return _map(lambda a, b: enp.where(pred, a, b).astype(enp.asarray(b).dtype), on_true, on_false)


def _all_finite(updates: Any) -> Any:
    leaves = [enp.all(enp.isfinite(leaf)) for leaf in tree_util.tree_leaves(updates)]
    return functools.reduce(enp.logical_and, leaves, enp.asarray(True))


class ZeroNansState(NamedTuple):
    """found_nan: for each leaf, whether the last update held a NaN there."""
    found_nan: Any


def zero_nans() -> GradientTransformation:
    """Replaces NaNs in the updates by zeros; the state records which leaves had any."""
    def init(params: Any) -> ZeroNansState:
        return ZeroNansState(found_nan=_map(lambda p: enp.asarray(False), params))

    def update(updates: Any, state: ZeroNansState, params: Any = None) -> tuple[Any, ZeroNansState]:
        found = _map(lambda g: enp.any(enp.isnan(g)), updates)
        return _map(lambda g: enp.where(enp.isnan(g), enp.zeros_like(g), g), updates), ZeroNansState(found)
    return GradientTransformation(init, update)


class ApplyIfFiniteState(NamedTuple):
    """notfinite_count: consecutive non-finite updates (0 after a finite one); last_finite: whether the last update
    was finite; total_notfinite: non-finite updates since init; inner_state: the wrapped transformation's."""
    notfinite_count: Any
    last_finite: Any
    total_notfinite: Any
    inner_state: Any


def apply_if_finite(inner: GradientTransformation, max_consecutive_errors: int) -> GradientTransformation:
    """inner, except that an update holding a NaN or an Inf is skipped (zero updates, inner's state unchanged),
    unless more than max_consecutive_errors in a row were: then it is applied."""
    def init(params: Any) -> ApplyIfFiniteState:
        zero = enp.zeros([], "int32")
        return ApplyIfFiniteState(zero, enp.asarray(True), zero, inner.init(params))

    def update(updates: Any, state: ApplyIfFiniteState, params: Any = None, **extra: Any
               ) -> tuple[Any, ApplyIfFiniteState]:
        finite = _all_finite(updates)
        notfinite_count = enp.where(finite, enp.zeros([], "int32"), safe_increment(state.notfinite_count))
        accept = enp.logical_or(finite, notfinite_count > max_consecutive_errors)
        new_updates, new_inner = inner.update(updates, state.inner_state, params, **extra)
        total = enp.where(finite, state.total_notfinite, safe_increment(state.total_notfinite))
        return _select(accept, new_updates, _zeros_like(new_updates)), ApplyIfFiniteState(
            notfinite_count, finite, total, _select(accept, new_inner, state.inner_state))
    return GradientTransformation(init, update)


def skip_not_finite(updates: Any, gradient_step: Any, params: Any) -> tuple[Any, dict[str, Any]]:
    """For MultiSteps' should_skip_update_fn: skip updates holding a NaN or an Inf (and count them)."""
    del gradient_step, params
    counts = [enp.sum(enp.logical_not(enp.isfinite(leaf))) for leaf in tree_util.tree_leaves(updates)]
    num_not_finite = functools.reduce(enp.add, counts, enp.zeros([], dt.default_int_dtype()))
    should_skip = num_not_finite > 0
    return should_skip, {"should_skip": should_skip, "num_not_finite": num_not_finite}


def skip_large_updates(updates: Any, gradient_step: Any, params: Any, max_squared_norm: Any
                       ) -> tuple[Any, dict[str, Any]]:
    """For MultiSteps' should_skip_update_fn (with functools.partial): skip updates whose squared global norm is
    not below max_squared_norm (a NaN norm is skipped too)."""
    del gradient_step, params
    squares = [enp.sum(enp.square(leaf)) for leaf in tree_util.tree_leaves(updates)]
    norm_squared = functools.reduce(enp.add, squares, enp.asarray(0.0))
    should_skip = enp.logical_not(norm_squared < max_squared_norm)
    return should_skip, {"should_skip": should_skip, "norm_squared": norm_squared}


class MultiStepsState(NamedTuple):
    """mini_step: steps accumulated since the last real update; gradient_step: real updates made; inner_opt_state:
    the wrapped optimizer's; acc_grads: the accumulated gradients; skip_state: should_skip_update_fn's report."""
    mini_step: Any
    gradient_step: Any
    inner_opt_state: Any
    acc_grads: Any
    skip_state: Any = ()


def _never_skip(updates: Any, gradient_step: Any, params: Any) -> tuple[Any, tuple[()]]:
    return enp.asarray(False), ()


class MultiSteps:
    """Accumulates the gradients of every_k_schedule(gradient_step) calls (an int, or a function of the number of
    real updates made) and passes their mean (or sum, use_grad_mean=False) to opt at the last one; the calls in
    between return zero updates. should_skip_update_fn(updates, gradient_step, params) -> (bool, report) drops
    a call's gradients entirely (skip_not_finite, skip_large_updates)."""

    def __init__(self, opt: GradientTransformation, every_k_schedule: int | Callable[[Any], Any],
                 use_grad_mean: bool = True, should_skip_update_fn: Callable[..., Any] | None = None,
                 accumulator_dtype: Any = "float32"):
        self._opt = opt
        self._every_k_schedule = every_k_schedule if callable(every_k_schedule) else lambda step: every_k_schedule
        self._use_grad_mean = use_grad_mean
        self._should_skip_update_fn = should_skip_update_fn or _never_skip
        self._accumulator_dtype = dt.check_user_dtype(accumulator_dtype, "MultiSteps")

    @property
    def inner_opt(self) -> GradientTransformation:
        return self._opt

    def init(self, params: Any) -> MultiStepsState:
        gradient_step = enp.zeros([], "int32")
        _, skip_state = self._should_skip_update_fn(_zeros_like(params), gradient_step, params)
        return MultiStepsState(mini_step=enp.zeros([], "int32"), gradient_step=gradient_step,
                               inner_opt_state=self._opt.init(params),
                               acc_grads=_zeros_like(params, self._accumulator_dtype), skip_state=skip_state)

    def _accumulate(self, grad: Any, acc: Any, count: Any) -> Any:
        if self._use_grad_mean:  # Welford's running mean, as optax
            return acc + (grad - acc) / (count + 1)
        return grad + acc

    def update(self, updates: Any, state: MultiStepsState, params: Any = None, **extra: Any
               ) -> tuple[Any, MultiStepsState]:
        k_steps = self._every_k_schedule(state.gradient_step)
        skip, skip_state = self._should_skip_update_fn(updates, state.gradient_step, params)
        skip = enp.asarray(skip)
        if skip.dtype != np.bool_ or skip.shape != ():
            raise ValueError(f"ember.optim.MultiSteps: should_skip_update_fn must return a boolean scalar, got "
                             f"{skip.dtype.name}{list(skip.shape)}")
        acc_grads = _map(lambda g, a: self._accumulate(g, a, state.mini_step), updates, state.acc_grads)
        inner_updates, inner_state = self._opt.update(
            _map(lambda a, g: a.astype(enp.asarray(g).dtype), acc_grads, updates), state.inner_opt_state, params,
            **extra)
        emit = state.mini_step == k_steps - 1
        done = MultiStepsState(
            mini_step=safe_increment(state.mini_step) % k_steps,
            gradient_step=enp.where(emit, safe_increment(state.gradient_step), state.gradient_step),
            inner_opt_state=_select(emit, inner_state, state.inner_opt_state),
            acc_grads=_map(lambda a: enp.where(emit, enp.zeros_like(a), a).astype(self._accumulator_dtype),
                           acc_grads),
            skip_state=skip_state)
        zeros = _zeros_like(inner_updates)
        new_updates = _select(enp.logical_and(emit, enp.logical_not(skip)), inner_updates, zeros)
        return new_updates, MultiStepsState(*(_select(skip, old, new) for old, new in zip(state[:4], done[:4])),
                                            skip_state=skip_state)

    def has_updated(self, state: MultiStepsState) -> Any:
        """Whether the last update call applied a real update."""
        return enp.logical_and(state.mini_step == 0, state.gradient_step > 0)

    def gradient_transformation(self) -> GradientTransformation:
        return GradientTransformation(self.init, self.update)


def flatten(inner: GradientTransformation) -> GradientTransformation:
    """inner applied to all leaves concatenated into one vector (fewer, larger operations); the updates come
    back in the parameters' structure."""
    def flat(tree: Any) -> Any:
        return enp.concatenate([enp.reshape(leaf, (-1,)) for leaf in tree_util.tree_leaves(tree)])

    def unflat(like: Any, vector: Any) -> Any:
        leaves, treedef = tree_util.tree_flatten(like)
        sizes = [math.prod(enp.shape(leaf)) for leaf in leaves]
        pieces = enp.split(vector, list(np.cumsum(sizes)[:-1]))
        return tree_util.tree_unflatten(treedef, [enp.reshape(p, enp.shape(leaf)) for p, leaf in zip(pieces, leaves)])

    def init(params: Any) -> Any:
        return inner.init(flat(params))

    def update(updates: Any, state: Any, params: Any = None, **extra: Any) -> tuple[Any, Any]:
        flat_updates, state = inner.update(flat(updates), state, None if params is None else flat(params), **extra)
        return unflat(updates, flat_updates), state
    return GradientTransformation(init, update)


class LookaheadState(NamedTuple):
    """fast_state: the fast optimizer's state; steps_since_sync: fast steps since the slow parameters moved."""
    fast_state: Any
    steps_since_sync: Any


class LookaheadParams(NamedTuple):
    """The fast parameters (take gradients with these) and the slow ones (evaluate with these)."""
    fast: Any
    slow: Any

    @classmethod
    def init_synced(cls, params: Any) -> "LookaheadParams":
        return cls(fast=params, slow=params)


def lookahead(fast_optimizer: GradientTransformation, sync_period: int, slow_step_size: Any,
              reset_state: bool = False) -> GradientTransformation:
    """Lookahead (Zhang et al., 2019): fast_optimizer steps the fast parameters; every sync_period steps the slow
    parameters move slow_step_size of the way to the fast ones and the fast ones are set to them (and the fast
    optimizer's state is reset when reset_state). Parameters are LookaheadParams; gradients are the fast ones'."""
    if sync_period < 1:
        raise ValueError(f"ember.optim.lookahead: sync_period must be >= 1, got {sync_period}")

    def init(params: Any) -> LookaheadState:
        fast = params.fast if isinstance(params, LookaheadParams) else params
        return LookaheadState(fast_optimizer.init(fast), enp.zeros([], "int32"))

    def update(updates: Any, state: LookaheadState, params: Any = None) -> tuple[LookaheadParams, LookaheadState]:
        if not isinstance(params, LookaheadParams):
            raise TypeError("ember.optim.lookahead: update needs params=LookaheadParams(fast, slow) (start from "
                            "LookaheadParams.init_synced(params))")
        updates, fast_state = fast_optimizer.update(updates, state.fast_state, params.fast)
        sync = state.steps_since_sync == sync_period - 1
        difference = _map(lambda f, u, s: f + u - s, params.fast, updates, params.slow)
        slow_updates = _map(lambda d: enp.where(sync, slow_step_size * d, enp.zeros_like(d)), difference)
        fast_updates = _map(lambda u, d: u - enp.where(sync, (1 - slow_step_size) * d, enp.zeros_like(d)),
                            updates, difference)
        if reset_state:
            fast_state = _select(sync, fast_optimizer.init(params.fast), fast_state)
        return LookaheadParams(fast_updates, slow_updates), LookaheadState(
            fast_state, (state.steps_since_sync + 1) % sync_period)
    return GradientTransformation(init, update)


class WrappedScheduleState(NamedTuple):
    count: Any


class WrappedSchedule:
    """A schedule of the step count as a stateful schedule (init() -> state, update(state) -> state,
    schedule(state) -> value), the form inject_hyperparams keeps in its state."""

    def __init__(self, schedule_fn: Callable[[Any], Any]):
        self.schedule_fn = schedule_fn

    def init(self) -> WrappedScheduleState:
        return WrappedScheduleState(count=enp.zeros([], "int32"))

    def update(self, state: WrappedScheduleState, **extra: Any) -> WrappedScheduleState:
        return WrappedScheduleState(count=safe_increment(state.count))

    def __call__(self, state: WrappedScheduleState, **extra: Any) -> Any:
        return self.schedule_fn(state.count)


class InjectStatefulHyperparamsState(NamedTuple):
    """count: update calls; hyperparams: the values used at the last call (edit the unscheduled ones to change
    them); hyperparams_states: the schedules' states; inner_state: the inner transformation's."""
    count: Any
    hyperparams: dict[str, Any]
    hyperparams_states: dict[str, Any]
    inner_state: Any


def _is_stateful_schedule(value: Any) -> bool:
    return callable(value) and hasattr(value, "init") and hasattr(value, "update")


def _as_hyperparam(value: Any, dtype: Any) -> Any:
    """Floats (Python, numpy, weakly typed arrays) in dtype, other values as they are (optax's rule)."""
    if getattr(value, "weak_type", None) is False or not dt.is_float(dt.dtype_and_weak(value)[0]):
        return value
    return enp.asarray(value, dtype)


def _hyperparam_dtype(chosen: Any, params: Any) -> Any:
    """chosen, else the parameters' highest dtype (None without parameters)."""
    if chosen is not None:
        return dt.check_user_dtype(chosen, "inject_hyperparams")
    leaves = tree_util.tree_leaves(params)
    return dt.result_type(*(enp.asarray(leaf).dtype for leaf in leaves)) if leaves else None


def inject_hyperparams(inner_factory: Callable[..., GradientTransformation], static_args: str | Sequence[str] = (),
                       hyperparam_dtype: Any = None) -> Callable[..., GradientTransformation]:
    """inner_factory with its numeric hyperparameters in the state (so they can be read and changed between
    steps) and schedules (functions of the step count, or stateful schedules) accepted in their place. Callables
    named in static_args and bools are passed through; floats are cast to hyperparam_dtype (by default the
    parameters' highest dtype)."""
    static = {static_args} if isinstance(static_args, str) else set(static_args)
    signature = inspect.signature(inner_factory)
    if not static <= set(signature.parameters):
        raise ValueError(f"ember.optim.inject_hyperparams: static_args {sorted(static)} must name parameters of "
                         f"inner_factory {sorted(signature.parameters)}")

    @functools.wraps(inner_factory)
    def wrapped(*args: Any, **kwargs: Any) -> GradientTransformation:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        scheduled, numeric, other = {}, {}, {}
        for name, value in bound.arguments.items():
            if name in static or isinstance(value, bool):
                other[name] = value
            elif callable(value):
                scheduled[name] = value if _is_stateful_schedule(value) else WrappedSchedule(value)
            elif isinstance(value, (int, float, np.ndarray, np.generic)) or hasattr(value, "aval"):
                numeric[name] = value
            else:
                other[name] = value

        def values(fixed: dict[str, Any], states: dict[str, Any], dtype: Any, **extra: Any) -> dict[str, Any]:
            found = {k: _as_hyperparam(v, dtype) for k, v in fixed.items()}
            found.update({k: _as_hyperparam(f(states[k], **extra), dtype) for k, f in scheduled.items()})
            return found

        def init(params: Any) -> InjectStatefulHyperparamsState:
            dtype = _hyperparam_dtype(hyperparam_dtype, params)
            states = {k: f.init() for k, f in scheduled.items()}
            hyperparams = values({k: enp.asarray(_as_hyperparam(v, dtype)) for k, v in numeric.items()}, states,
                                 dtype)
            return InjectStatefulHyperparamsState(enp.zeros([], "int32"), hyperparams, states,
                                                  inner_factory(**other, **hyperparams).init(params))

        def update(updates: Any, state: InjectStatefulHyperparamsState, params: Any = None, **extra: Any
                   ) -> tuple[Any, InjectStatefulHyperparamsState]:
            dtype = _hyperparam_dtype(hyperparam_dtype, params)
            hyperparams = values(state.hyperparams, state.hyperparams_states, dtype, **extra)
            states = {k: f.update(state.hyperparams_states[k], **extra) for k, f in scheduled.items()}
            updates, inner_state = inner_factory(**other, **hyperparams).update(updates, state.inner_state, params,
                                                                                 **extra)
            return updates, InjectStatefulHyperparamsState(safe_increment(state.count), hyperparams, states,
                                                           inner_state)
        return GradientTransformation(init, update)
    return wrapped


__all__ = ["ApplyIfFiniteState", "InjectStatefulHyperparamsState", "LookaheadParams", "LookaheadState", "MultiSteps",
           "MultiStepsState", "WrappedSchedule", "WrappedScheduleState", "ZeroNansState", "apply_if_finite", "flatten",
           "inject_hyperparams", "lookahead", "skip_large_updates", "skip_not_finite", "zero_nans"]
