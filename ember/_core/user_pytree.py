"""The public tree functions (ember.tree_util, ember.tree): ember._core.pytree's, where the user-leaf types
(ember.random's typed key arrays) are leaves, as in JAX. ember's own transformations flatten with
ember._core.pytree's functions, to which those types are nodes over plain arrays."""
from __future__ import annotations

from typing import Any, Callable, Iterable

from ember._core import pytree as _p
from ember._core.pytree import IsLeaf, KeyPath, PyTreeDef, T, users_is_leaf


def tree_flatten(tree: Any, is_leaf: IsLeaf | None = None) -> tuple[list[Any], PyTreeDef]:
    """The leaves of tree, left to right (dict keys sorted), and its structure."""
    return _p.tree_flatten(tree, users_is_leaf(is_leaf))


def tree_leaves(tree: Any, is_leaf: IsLeaf | None = None) -> list[Any]:
    """The leaves of tree, left to right."""
    return _p.tree_flatten(tree, users_is_leaf(is_leaf))[0]


def tree_structure(tree: Any, is_leaf: IsLeaf | None = None) -> PyTreeDef:
    """The structure of tree."""
    return _p.tree_flatten(tree, users_is_leaf(is_leaf))[1]


def tree_flatten_with_path(tree: Any, is_leaf: IsLeaf | None = None, is_leaf_takes_path: bool = False
                           ) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """Like tree_flatten, with each leaf paired with its key path; is_leaf(path, x) if is_leaf_takes_path."""
    return _p.tree_flatten_with_path(tree, users_is_leaf(is_leaf, is_leaf_takes_path), is_leaf_takes_path)


def tree_leaves_with_path(tree: Any, is_leaf: IsLeaf | None = None, is_leaf_takes_path: bool = False
                          ) -> list[tuple[KeyPath, Any]]:
    """The (key path, leaf) pairs of tree."""
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeaf | None = None) -> Any:
    """f applied leaf-wise: f(x, *ys) for each leaf x of tree and the subtrees ys of rest at the same place.

    Each tree in rest must have tree's structure down to tree's leaves."""
    return _p.tree_map(f, tree, *rest, is_leaf=users_is_leaf(is_leaf))


def tree_map_with_path(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeaf | None = None,
                       is_leaf_takes_path: bool = False) -> Any:
    """Like tree_map, calling f(path, x, *ys) with each leaf's key path."""
    return _p.tree_map_with_path(f, tree, *rest, is_leaf=users_is_leaf(is_leaf, is_leaf_takes_path),
                                 is_leaf_takes_path=is_leaf_takes_path)


def tree_reduce(function: Callable[[T, Any], T], tree: Any, initializer: T = _p._UNSPECIFIED,
                is_leaf: IsLeaf | None = None) -> T:
    """functools.reduce(function, leaves[, initializer]) over the leaves of tree."""
    return _p.tree_reduce(function, tree, initializer, is_leaf=users_is_leaf(is_leaf))


def tree_all(tree: Any, *, is_leaf: IsLeaf | None = None) -> bool:
    """Whether all leaves of tree are truthy."""
    return _p.tree_all(tree, is_leaf=users_is_leaf(is_leaf))


def all_leaves(iterable: Iterable[Any], is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every element is a leaf (not a pytree node, or accepted by is_leaf)."""
    return _p.all_leaves(iterable, users_is_leaf(is_leaf))


__all__ = ["all_leaves", "tree_all", "tree_flatten", "tree_flatten_with_path", "tree_leaves", "tree_leaves_with_path",
           "tree_map", "tree_map_with_path", "tree_reduce", "tree_structure"]
