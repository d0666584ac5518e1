"""Dispatch keys: the signature of a call (pytree structure, abstract values of the leaves, static values, weak
types) computed in one pass over the arguments, without building a PyTreeDef, for the calls whose arguments are
made of the common containers (tuple, list, dict, None) and arrays, numpy arrays or Python scalars.

A key is a flat tuple of tokens, a prefix code of the arguments: a container is its type and its size (a dict:
its keys), then its children; an ember Array is its ShapedArray; a numpy array or scalar is the pair (dtype,
shape); a Python scalar is its type (its abstract value follows from the type and enable_x64). Where two keys
agree up to a token, that token plays the same role in both, and leaf tokens of different kinds never compare
equal (a ShapedArray equals only ShapedArrays, a pair only tuples, a type only itself; a dtype, which equals its
type and its name, only appears inside a pair), so equal keys decode to equal signatures. A namedtuple or a
registered pytree node (an ember.nn Module, an optimizer state, a typed PRNG key) is its type and its flatten's
aux data, then its children. Anything else (a tracer, an unregistered subclass) makes the call take the general
path; so does an unhashable static value or aux data (hashing the key fails)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ember._core.cache import on_clear
from ember._core.pytree import _NAMEDTUPLE, PyTreeDef, _node_of
from ember._runtime import Array, ShardedArray

_SCALARS = (int, float, bool)
_sorted_keys: dict[tuple[Any, ...], tuple[Any, ...]] = {}  # a dict's keys in insertion order -> sorted


def sorted_keys(keys: tuple[Any, ...]) -> tuple[Any, ...]:
    """keys sorted (remembered: a program's calls pass dicts of the same keys again and again); TypeError when
    they cannot be sorted."""
    found = _sorted_keys.get(keys)
    if found is None:
        if len(_sorted_keys) >= 4096:  # (bounded: forget them all, they are cheap to sort again)
            _sorted_keys.clear()
        found = _sorted_keys[keys] = tuple(sorted(keys))
    return found


on_clear(_sorted_keys.clear)


class NotFast(Exception):
    """The arguments hold something only the general pytree path handles."""


MAX_DEPTH = 64  # pytrees nested deeper take the general path, which does not recurse (these functions do)


def add_tokens(x: Any, tokens: list[Any], leaves: list[Any], depth: int = 0) -> None:
    """Append the tokens of the pytree x to tokens and its leaves to leaves (in tree_flatten's order: dict keys
    sorted); NotFast (or TypeError, for dict keys that cannot be sorted) when x needs the general path, or is
    nested more than MAX_DEPTH levels deep (depth: how deep x is)."""
    if depth > MAX_DEPTH:
        raise NotFast
    kind = type(x)
    if kind is Array or kind is ShardedArray:  # (a sharded one: its program runs partitioned, see Compiled)
        tokens.append(x.aval)
        leaves.append(x)
    elif kind is tuple or kind is list:
        tokens.append(kind)
        tokens.append(len(x))
        for child in x:
            if type(child) is Array:  # (the common leaf, without a call)
                tokens.append(child.aval)
                leaves.append(child)
            else:
                add_tokens(child, tokens, leaves, depth + 1)
    elif kind is dict:
        keys = tuple(x)  # (insertion order: equal dicts built in another order are another key, no harm)
        tokens.append(dict)
        tokens.append(keys)
        for key in sorted_keys(keys):
            child = x[key]
            if type(child) is Array:
                tokens.append(child.aval)
                leaves.append(child)
            else:
                add_tokens(child, tokens, leaves, depth + 1)
    elif x is None:
        tokens.append(None)
    elif kind is np.ndarray or isinstance(x, np.generic):
        tokens.append((x.dtype, x.shape))
        leaves.append(x)
    elif kind in _SCALARS:
        tokens.append(kind)
        leaves.append(x)
    else:
        node = _node_of(kind)
        if node is None:
            raise NotFast
        children, aux = node.flatten(x)
        tokens.append(kind)
        tokens.append(aux)
        for child in children:
            if type(child) is Array:
                tokens.append(child.aval)
                leaves.append(child)
            else:
                add_tokens(child, tokens, leaves, depth + 1)


def output_builder(out_tree: PyTreeDef | None) -> Callable[[list[Any]], Any]:
    """How a program's flat outputs become its result: the pytree out_tree of them (the common shapes, a single
    array or a flat tuple, without walking the PyTreeDef), or with no out_tree the one output or a tuple."""
    if out_tree is None:
        return lambda outs: outs[0] if len(outs) == 1 else tuple(outs)
    if out_tree.node_type is None:
        return lambda outs: outs[0]
    if out_tree.node_type is tuple and all(c.node_type is None for c in out_tree.children):
        return tuple
    if _depth(out_tree) > MAX_DEPTH:
        return out_tree.unflatten
    build = _builder(out_tree)
    return lambda outs: build(iter(outs))


def _depth(tree: PyTreeDef) -> int:
    """How many levels of nodes tree has (0 for a leaf)."""
    deepest, todo = 0, [(tree, 0)]
    while todo:
        treedef, above = todo.pop()
        if treedef.node_type is not None:
            deepest = max(deepest, above + 1)
            todo.extend((c, above + 1) for c in treedef.children)
    return deepest


def _builder(tree: PyTreeDef) -> Callable[[Any], Any]:
    """A function rebuilding the pytree `tree` from an iterator of its leaves, with each node's unflatten looked
    up once (what PyTreeDef.unflatten does node by node on every call)."""
    if tree.node_type is None:
        return next
    children = [_builder(c) for c in tree.children]
    kind, aux = tree.node_type, tree.aux
    if kind is tuple:
        return lambda leaves: tuple([child(leaves) for child in children])
    if kind is list:
        return lambda leaves: [child(leaves) for child in children]
    node = _node_of(kind)
    if node is None:  # (no longer registered: the general path says so)
        return lambda leaves: tree._build(leaves)
    if node is _NAMEDTUPLE:
        return lambda leaves: kind(*[child(leaves) for child in children])
    unflatten = node.unflatten
    return lambda leaves: unflatten(aux, [child(leaves) for child in children])
