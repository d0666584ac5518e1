"""The GradientTransformation protocol of optax (init(params) -> state, update(updates, state, params) ->
(updates, state)), chaining, masking and applying updates. States are pytrees (NamedTuples of arrays), so a whole
training step jits."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from ember import numpy as enp
from ember import tree_util

Schedule = Callable[[Any], Any]


class GradientTransformation(NamedTuple):
    """A pair of pure functions: init(params) -> state; update(updates, state, params=None) -> (updates, state)."""
    init: Callable[..., Any]
    update: Callable[..., Any]


GradientTransformationExtraArgs = GradientTransformation


class EmptyState(NamedTuple):
    """The state of a stateless transformation."""


def init_empty_state(params: Any) -> EmptyState:
    del params
    return EmptyState()


def identity() -> GradientTransformation:
    """Leaves updates unchanged."""
    return GradientTransformation(init_empty_state, lambda updates, state, params=None: (updates, state))


def set_to_zero() -> GradientTransformation:
    """Replaces updates by zeros (freezes what it is applied to)."""
    return GradientTransformation(init_empty_state, lambda updates, state, params=None: (
        tree_util.tree_map(enp.zeros_like, updates), state))


def stateless(f: Callable[[Any, Any], Any]) -> GradientTransformation:
    """A transformation from f(updates, params) -> updates."""
    return GradientTransformation(init_empty_state, lambda updates, state, params=None: (f(updates, params), state))


def chain(*transforms: GradientTransformation) -> GradientTransformation:
    """Applies transforms in order; the state is the tuple of their states."""
    def init(params: Any) -> tuple[Any, ...]:
        return tuple(t.init(params) for t in transforms)

    def update(updates: Any, state: Any, params: Any = None, **extra: Any) -> tuple[Any, tuple[Any, ...]]:
        if len(state) != len(transforms):
            raise ValueError(f"ember.optim.chain: the state has {len(state)} parts for {len(transforms)} "
                             "transformations; was it made by this chain's init?")
        new_states = []
        for t, s in zip(transforms, state):
            updates, s = t.update(updates, s, params, **extra) if extra else t.update(updates, s, params)
            new_states.append(s)
        return updates, tuple(new_states)
    return GradientTransformation(init, update)


def named_chain(*transforms: tuple[str, GradientTransformation]) -> GradientTransformation:
    """chain with a dict state keyed by the given names."""
    def init(params: Any) -> dict[str, Any]:
        return {name: t.init(params) for name, t in transforms}

    def update(updates: Any, state: Any, params: Any = None) -> tuple[Any, dict[str, Any]]:
        new_state = {}
        for name, t in transforms:
            updates, new_state[name] = t.update(updates, state[name], params)
        return updates, new_state
    return GradientTransformation(init, update)


def apply_updates(params: Any, updates: Any) -> Any:
    """params + updates, leaf by leaf, keeping each parameter's dtype (as optax.apply_updates)."""
    return tree_util.tree_map(
        lambda p, u: None if p is None else enp.asarray(p + u).astype(enp.asarray(p).dtype), params, updates,
        is_leaf=lambda x: x is None)


def global_norm(updates: Any) -> Any:
    """The l2 norm of all leaves together."""
    leaves = [leaf for leaf in tree_util.tree_leaves(updates) if leaf is not None]
    if not leaves:
        return enp.asarray(0.0)
    return enp.sqrt(sum(enp.sum(enp.square(enp.asarray(x))) for x in leaves))


def safe_increment(count: Any) -> Any:
    """count + 1, saturating at the dtype's largest value (a step counter never wraps)."""
    count = enp.asarray(count)
    info = enp.iinfo(count.dtype) if np.dtype(count.dtype).kind in "iu" else enp.finfo(count.dtype)
    top = enp.asarray(np.array(info.max, count.dtype))
    return enp.where(count < top, count + enp.asarray(np.array(1, count.dtype)), top)


class MaskedNode(NamedTuple):
    """Stands for a leaf a masked transformation does not touch (an empty pytree)."""


class MaskedState(NamedTuple):
    inner_state: Any


def _mask_tree(mask: Any, params: Any) -> Any:
    return mask(params) if callable(mask) else mask


def _select(mask: Any, tree: Any, keep: bool) -> Any:
    """tree with the leaves where mask is (not) set replaced by MaskedNode()."""
    return tree_util.tree_map(lambda m, x: x if bool(m) == keep else MaskedNode(), mask, tree,
                              is_leaf=lambda x: x is None)


def masked(inner: GradientTransformation, mask: Any) -> GradientTransformation:
    """Applies inner to the leaves where mask (a pytree of bools like the params, or a function of the params
    giving one) is True, and passes the other updates through unchanged."""
    def init(params: Any) -> MaskedState:
        m = _mask_tree(mask, params)
        return MaskedState(inner.init(_select(m, params, True)))

    def update(updates: Any, state: MaskedState, params: Any = None) -> tuple[Any, MaskedState]:
        m = _mask_tree(mask, updates if params is None else params)
        inner_updates, inner_state = inner.update(
            _select(m, updates, True), state.inner_state, None if params is None else _select(m, params, True))
        flags, treedef = tree_util.tree_flatten(m)
        new, old = treedef.flatten_up_to(inner_updates), treedef.flatten_up_to(updates)
        return tree_util.tree_unflatten(treedef, [n if f else o for f, n, o in zip(flags, new, old)]), \
            MaskedState(inner_state)
    return GradientTransformation(init, update)
