"""Optimizers as triples of functions, as jax.example_libraries.optimizers: an optimizer maker (sgd, adam, ...)
returns `(init_fun, update_fun, get_params)`:

    opt_init, opt_update, get_params = optimizers.adam(1e-3)
    state = opt_init(params)
    state = opt_update(step, grads, state)     # step: the iteration count, 0 first
    params = get_params(state)

The functions take any pytree of arrays; the state (`OptimizerState`) is a pytree too, so it passes through jit.
A step size is a number or a schedule, a function of the step count (`exponential_decay`, `piecewise_constant`, ...).
Each maker is written for one array (`@optimizer` lifts it to pytrees), so a new one is three small functions."""
from __future__ import annotations

import builtins
import functools
from typing import Any, Callable, NamedTuple

import ember.numpy as jnp
from ember.tree_util import register_pytree_node, tree_flatten, tree_leaves, tree_map, tree_unflatten

Schedule = Callable[[Any], Any]


class OptimizerState(NamedTuple):
    """The state of an optimizer over a pytree: each leaf's state flattened (packed_state), the params' tree
    structure (tree_def) and each leaf's state structure (subtree_defs)."""
    packed_state: Any
    tree_def: Any
    subtree_defs: Any


register_pytree_node(OptimizerState,
                     lambda s: ((s.packed_state,), (s.tree_def, s.subtree_defs)),
                     lambda aux, children: OptimizerState(children[0], *aux))


class Optimizer(NamedTuple):
    """What a maker returns: (init_fn, update_fn, params_fn)."""
    init_fn: Callable[[Any], OptimizerState]
    update_fn: Callable[[Any, Any, OptimizerState], OptimizerState]
    params_fn: Callable[[OptimizerState], Any]


def optimizer(opt_maker: Callable[..., tuple[Callable, Callable, Callable]]) -> Callable[..., Optimizer]:
    """Decorator: opt_maker(*args) returns (init(x0) -> state, update(i, g, state) -> state, get_params(state))
    for one array (a state may be any pytree); the decorated maker's functions take pytrees of arrays."""
    @functools.wraps(opt_maker)
    def tree_opt_maker(*args: Any, **kwargs: Any) -> Optimizer:
        init, update, get_params = opt_maker(*args, **kwargs)

        def tree_init(x0_tree: Any) -> OptimizerState:
            leaves, tree = tree_flatten(x0_tree)
            packed, subtrees = [], []
            for x0 in leaves:
                flat, subtree = tree_flatten(init(x0))
                packed.append(flat)
                subtrees.append(subtree)
            return OptimizerState(packed, tree, subtrees)

        def tree_update(i: Any, grad_tree: Any, opt_state: OptimizerState) -> OptimizerState:
            packed, tree, subtrees = opt_state
            grads, grad_tree_def = tree_flatten(grad_tree)
            if grad_tree_def != tree:
                raise TypeError(f"optimizer update: the gradient tree {grad_tree_def} does not match the parameter "
                                f"tree {tree}")
            new_packed = []
            for g, flat, subtree in zip(grads, packed, subtrees):
                new_flat, new_subtree = tree_flatten(update(i, g, tree_unflatten(subtree, flat)))
                if new_subtree != subtree:
                    raise TypeError(f"optimizer update: the state structure changed from {subtree} to {new_subtree}")
                new_packed.append(new_flat)
            return OptimizerState(new_packed, tree, subtrees)

        def tree_get_params(opt_state: OptimizerState) -> Any:
            packed, tree, subtrees = opt_state
            return tree_unflatten(tree, [get_params(tree_unflatten(s, flat)) for flat, s in zip(packed, subtrees)])

        return Optimizer(tree_init, tree_update, tree_get_params)
    return tree_opt_maker


# ---------------------------------------------------------------------------------------------------------------
# Schedules: the step size as a function of the step count.
def constant(step_size: float) -> Schedule:
    return lambda i: step_size


def exponential_decay(step_size: float, decay_steps: float, decay_rate: float) -> Schedule:
    return lambda i: step_size * decay_rate ** (i / decay_steps)


def inverse_time_decay(step_size: float, decay_steps: float, decay_rate: float, staircase: bool = False
                       ) -> Schedule:
    if staircase:
        return lambda i: step_size / (1 + decay_rate * jnp.floor(i / decay_steps))
    return lambda i: step_size / (1 + decay_rate * i / decay_steps)


def polynomial_decay(step_size: float, decay_steps: int, final_step_size: float, power: float = 1.0) -> Schedule:
    def schedule(i: Any) -> Any:
        progress = jnp.minimum(i, decay_steps) / decay_steps
        return (step_size - final_step_size) * (1 - progress) ** power + final_step_size
    return schedule


def piecewise_constant(boundaries: Any, values: Any) -> Schedule:
    """values[k] for steps in [boundaries[k-1], boundaries[k]) (values has one more entry than boundaries)."""
    boundaries, values = jnp.array(boundaries), jnp.array(values)
    if not boundaries.ndim == values.ndim == 1:
        raise ValueError("piecewise_constant: boundaries and values must be sequences")
    if not boundaries.shape[0] == values.shape[0] - 1:
        raise ValueError(f"piecewise_constant: values needs one more entry than boundaries, got "
                         f"{values.shape[0]} values and {boundaries.shape[0]} boundaries")
    return lambda i: values[jnp.sum(i > boundaries)]


def make_schedule(scalar_or_schedule: float | Schedule) -> Schedule:
    if callable(scalar_or_schedule):
        return scalar_or_schedule
    if jnp.ndim(scalar_or_schedule) == 0:
        return constant(scalar_or_schedule)
    raise TypeError(f"make_schedule: expected a number or a function of the step, got {type(scalar_or_schedule)}")


# ---------------------------------------------------------------------------------------------------------------
# Optimizers (each for one array; @optimizer lifts them to pytrees).
def _with_slots(count: int, update: Callable) -> tuple[Callable, Callable, Callable]:
    """(init, update, get_params) of an optimizer whose state for an array x0 is (x0, and count arrays of zeros
    like it: its moments)."""
    return (lambda x0: (x0,) + tuple(jnp.zeros_like(x0) for _ in range(count))), update, (lambda state: state[0])


@optimizer
def sgd(step_size: float | Schedule) -> tuple[Callable, Callable, Callable]:
    """Stochastic gradient descent: x <- x - step_size(i) * g."""
    step_size = make_schedule(step_size)
    return (lambda x0: x0), (lambda i, g, x: x - step_size(i) * g), (lambda x: x)


@optimizer
def momentum(step_size: float | Schedule, mass: float) -> tuple[Callable, Callable, Callable]:
    """Heavy-ball momentum: v <- mass * v + g, x <- x - step_size(i) * v."""
    step_size = make_schedule(step_size)

    def update(i: Any, g: Any, state: Any) -> Any:
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * velocity, velocity
    return _with_slots(1, update)


@optimizer
def nesterov(step_size: float | Schedule, mass: float) -> tuple[Callable, Callable, Callable]:
    """Nesterov momentum: v <- mass * v + g, x <- x - step_size(i) * (mass * v + g)."""
    step_size = make_schedule(step_size)

    def update(i: Any, g: Any, state: Any) -> Any:
        x, velocity = state
        velocity = mass * velocity + g
        return x - step_size(i) * (mass * velocity + g), velocity
    return _with_slots(1, update)


def _inverse_sqrt(accumulated: Any) -> Any:
    """1 / sqrt(a) where a > 0, else 0 (a coordinate with no gradient yet does not move)."""
    positive = accumulated > 0
    return jnp.where(positive, 1.0 / jnp.sqrt(jnp.where(positive, accumulated, 1.0)), 0.0)


@optimizer
def adagrad(step_size: float | Schedule, momentum: float = 0.9) -> tuple[Callable, Callable, Callable]:
    """Adagrad (Duchi et al. 2011) with momentum: the gradient scaled by the inverse root of its accumulated
    squares, averaged with weight momentum."""
    step_size = make_schedule(step_size)

    def update(i: Any, g: Any, state: Any) -> Any:
        x, g_sq, m = state
        g_sq = g_sq + jnp.square(g)
        m = (1.0 - momentum) * (g * _inverse_sqrt(g_sq)) + momentum * m
        return x - step_size(i) * m, g_sq, m
    return _with_slots(2, update)


@optimizer
def rmsprop(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8) -> tuple[Callable, Callable,
                                                                                            Callable]:
    """RMSProp: avg <- gamma * avg + (1 - gamma) * g^2, x <- x - step_size(i) * g / sqrt(avg + eps)."""
    step_size = make_schedule(step_size)

    def update(i: Any, g: Any, state: Any) -> Any:
        x, avg_sq = state
        avg_sq = avg_sq * gamma + jnp.square(g) * (1.0 - gamma)
        return x - step_size(i) * g / jnp.sqrt(avg_sq + eps), avg_sq
    return _with_slots(1, update)


@optimizer
def rmsprop_momentum(step_size: float | Schedule, gamma: float = 0.9, eps: float = 1e-8, momentum: float = 0.9
                     ) -> tuple[Callable, Callable, Callable]:
    """RMSProp with momentum: the step step_size(i) * g / sqrt(avg + eps) accumulated with weight momentum."""
    step_size = make_schedule(step_size)

    def update(i: Any, g: Any, state: Any) -> Any:
        x, avg_sq, mom = state
        avg_sq = avg_sq * gamma + jnp.square(g) * (1.0 - gamma)
        mom = momentum * mom + step_size(i) * g / jnp.sqrt(avg_sq + eps)
        return x - mom, avg_sq, mom
    return _with_slots(2, update)


@optimizer
def adam(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
         ) -> tuple[Callable, Callable, Callable]:
    """Adam (Kingma and Ba 2014): bias-corrected first and second moment estimates."""
    step_size = make_schedule(step_size)

    def update(i: Any, g: Any, state: Any) -> Any:
        x, m, v = state
        m = (1 - b1) * g + b1 * m
        v = (1 - b2) * jnp.square(g) + b2 * v
        m_hat = m / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))
        v_hat = v / (1 - jnp.asarray(b2, m.dtype) ** (i + 1))
        return x - step_size(i) * m_hat / (jnp.sqrt(v_hat) + eps), m, v
    return _with_slots(2, update)


@optimizer
def adamax(step_size: float | Schedule, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
           ) -> tuple[Callable, Callable, Callable]:
    """AdaMax (Kingma and Ba 2014, section 7): Adam with the infinity norm of past gradients."""
    step_size = make_schedule(step_size)

    def update(i: Any, g: Any, state: Any) -> Any:
        x, m, u = state
        m = (1 - b1) * g + b1 * m
        u = jnp.maximum(b2 * u, jnp.abs(g))
        return x - (step_size(i) / (1 - jnp.asarray(b1, m.dtype) ** (i + 1))) * m / (u + eps), m, u
    return _with_slots(2, update)


@optimizer
def sm3(step_size: float | Schedule, momentum: float = 0.9) -> tuple[Callable, Callable, Callable]:
    """SM3 (Anil et al. 2019, "Memory-Efficient Adaptive Optimization"): Adagrad whose accumulated squares are
    kept as one vector per dimension (their max over the other dimensions), the per-element value being the min of
    the vectors' entries; with momentum. A scalar parameter is treated as a vector of one element."""
    step_size = make_schedule(step_size)

    def init(x0: Any) -> Any:
        shape = jnp.shape(x0)
        x0 = jnp.atleast_1d(x0)
        return x0, jnp.zeros_like(x0), [jnp.zeros(n, x0.dtype) for n in x0.shape], shape

    def update(i: Any, g: Any, state: Any) -> Any:
        x, m, vs, shape = state
        g = jnp.reshape(g, x.shape)
        rank = x.ndim
        # each accumulator broadcast along the other dims; the elementwise min of them, plus the new squares
        accum = functools.reduce(jnp.minimum, [jnp.reshape(v, tuple(n if d == k else 1 for d, n in
                                                                     enumerate(x.shape)))
                                               for k, v in enumerate(vs)]) + jnp.square(g)
        m = (1.0 - momentum) * (g * _inverse_sqrt(accum)) + momentum * m
        vs = [jnp.max(accum, axis=tuple(d for d in range(rank) if d != k)) for k in range(rank)]
        return x - step_size(i) * m, m, vs, shape

    return init, update, (lambda state: jnp.reshape(state[0], state[3]))


# ---------------------------------------------------------------------------------------------------------------
# Gradient utilities.
def l2_norm(tree: Any) -> Any:
    """The l2 norm of all the leaves of a pytree, as one vector."""
    leaves = tree_leaves(tree)
    return jnp.sqrt(sum(jnp.vdot(x, x) for x in leaves))


def clip_grads(grad_tree: Any, max_norm: float) -> Any:
    """The gradients scaled so that their l2 norm (l2_norm) is at most max_norm."""
    norm = l2_norm(grad_tree)
    factor = jnp.where(norm < max_norm, 1.0, max_norm / norm)
    return tree_map(lambda g: g * factor, grad_tree)


# ---------------------------------------------------------------------------------------------------------------
# Serialising a state: its nested structure as one pytree.
class JoinPoint:
    """Marks the boundary between two joined (nested) pytrees: a leaf of the outer tree holding one of the inner
    trees (`subtree`)."""

    def __init__(self, subtree: Any):
        self.subtree = subtree

    def __iter__(self) -> Any:
        yield self.subtree

    def __repr__(self) -> str:
        return f"JoinPoint({self.subtree!r})"


def unpack_optimizer_state(opt_state: OptimizerState) -> Any:
    """The state as the parameters' pytree whose leaves are JoinPoints holding each parameter's state (for
    serialisation: pickle it, or save its arrays)."""
    packed, tree, subtrees = opt_state
    return tree_unflatten(tree, [JoinPoint(tree_unflatten(s, flat)) for flat, s in zip(packed, subtrees)])


def pack_optimizer_state(marked_pytree: Any) -> OptimizerState:
    """The inverse of unpack_optimizer_state."""
    joins, tree = tree_flatten(marked_pytree, is_leaf=lambda x: isinstance(x, JoinPoint))
    if not all(isinstance(j, JoinPoint) for j in joins):
        raise TypeError("pack_optimizer_state: every leaf must be a JoinPoint (unpack_optimizer_state's output)")
    packed, subtrees = [], []
    for join in joins:
        flat, subtree = tree_flatten(join.subtree)
        packed.append(flat)
        subtrees.append(subtree)
    return OptimizerState(packed, tree, subtrees)


# The helpers JAX's module exposes (and uses itself: map and zip are its length-checked versions).
Step = int  # a step count, as jax.example_libraries.optimizers.Step


def unzip2(pairs: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """Two tuples from an iterable of pairs: the first items, the second items."""
    firsts, seconds = [], []
    for first, second in pairs:
        firsts.append(first)
        seconds.append(second)
    return tuple(firsts), tuple(seconds)


def safe_map(f: Callable[..., Any], *args: Any) -> list[Any]:
    """[f(*xs) for xs in zip(*args)], the arguments of equal lengths (else ValueError)."""
    args = [list(a) for a in args]
    for i, arg in enumerate(args[1:], 1):
        if len(arg) != len(args[0]):
            raise ValueError(f"safe_map() argument {i + 1} has length {len(arg)}, argument 1 has length "
                             f"{len(args[0])}")
    return [f(*xs) for xs in builtins.zip(*args)]


def safe_zip(*args: Any) -> list[tuple[Any, ...]]:
    """list(zip(*args)), the arguments of equal lengths (else ValueError)."""
    args = [list(a) for a in args]
    lengths = tuple(len(a) for a in args)
    for i, n in enumerate(lengths[1:], 1):
        if n != lengths[0]:
            raise ValueError(f"safe_zip() argument {i} has length {n} but argument 0 has length {lengths[0]}. "
                             f"All lengths: {lengths}")
    return list(builtins.zip(*args))


map = safe_map  # noqa: A001 (JAX's module shadows the builtins too)
zip = safe_zip  # noqa: A001

__all__ = ["JoinPoint", "Optimizer", "OptimizerState", "Schedule", "adagrad", "adam", "adamax", "clip_grads",
           "constant", "exponential_decay", "inverse_time_decay", "l2_norm", "make_schedule", "momentum", "nesterov",
           "optimizer", "pack_optimizer_state", "piecewise_constant", "polynomial_decay", "rmsprop",
           "rmsprop_momentum", "sgd", "sm3", "unpack_optimizer_state", "Step", "unzip2", "safe_map", "safe_zip", "map",
           "zip"]
