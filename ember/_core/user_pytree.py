"""The public tree functions (ember.tree_util, ember.tree): ember._core.pytree's, where the user-leaf types
(ember.random's typed key arrays) are leaves, as in JAX. ember's own transformations flatten with
ember._core.pytree's functions, to which those types are nodes over plain arrays."""
from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable, Sequence

from ember._core import pytree as _p
from ember._core.pytree import IsLeaf, KeyEntry, KeyPath, PyTreeDef, T, users_is_leaf


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


def tree_reduce_associative(operation: Callable[[T, T], T], tree: Any, *, identity: T = _p._UNSPECIFIED,
                            is_leaf: IsLeaf | None = None) -> T:
    """The leaves of tree combined by the associative operation as a balanced binary tree (JAX's order: the first
    half of the leaves, len // 2 of them, then the rest); identity is the result for a tree without leaves."""
    return _p.tree_reduce_associative(operation, tree, identity=identity, is_leaf=users_is_leaf(is_leaf))


def tree_broadcast(prefix_tree: Any, full_tree: Any, is_leaf: IsLeaf | None = None) -> Any:
    """full_tree with each leaf replaced by the leaf of the tree prefix prefix_tree above it (is_leaf applies to
    prefix_tree); ValueError, saying where, when prefix_tree is not a prefix of full_tree."""
    return _p.tree_broadcast(prefix_tree, full_tree, users_is_leaf(is_leaf), full_is_leaf=users_is_leaf(None))


def is_tree_node(typ: type) -> bool:
    """Whether typ is a pytree node type (registered, or a namedtuple class); the typed key arrays' types are
    leaf types, as in JAX. False for an object that is not a type; TypeError for None, as JAX."""
    return _p.is_tree_node(typ) and typ not in _p.USER_LEAF_TYPES


def flatten_one_level(tree: Any) -> tuple[Iterable[Any], Hashable]:
    """(children, aux data) of the pytree node tree, one level down, in the containers JAX's registry returns (a
    tuple's or list's own object, a dict's values in a tuple, a namedtuple's fields in a list with its class as aux
    data); ValueError for a leaf."""
    return _p.flatten_one_level(tree, users_is_leaf(None))


def flatten_one_level_with_keys(tree: Any) -> tuple[Iterable[tuple[KeyEntry, Any]], Hashable]:
    """Like flatten_one_level, each child paired with its key (FlattenedIndexKey for a node registered without
    keys)."""
    return _p.flatten_one_level_with_keys(tree, users_is_leaf(None))


class PyTreeRegistry:
    """ember's pytree registry seen as JAX's jaxlib PyTreeRegistry object (jax.tree_util.default_registry): the
    registry ember's tree functions read (there is one; registering through it is register_pytree_node).
    flatten_one_level and flatten_one_level_with_keys give None for a leaf where the module-level functions raise,
    as JAX's."""

    def flatten(self, tree: Any, leaf_predicate: IsLeaf | None = None) -> tuple[list[Any], PyTreeDef]:
        """tree_flatten(tree, is_leaf=leaf_predicate)."""
        return tree_flatten(tree, leaf_predicate)

    def flatten_with_path(self, tree: Any, leaf_predicate: Callable[[KeyPath, Any], bool] | None = None
                          ) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
        """tree_flatten_with_path, leaf_predicate(path, x) (it takes the key path, as JAX's registry's)."""
        return tree_flatten_with_path(tree, leaf_predicate, is_leaf_takes_path=leaf_predicate is not None)

    def flatten_one_level(self, tree: Any) -> tuple[Iterable[Any], Hashable] | None:
        """flatten_one_level(tree), or None for a leaf."""
        return flatten_one_level(tree) if self._is_node(tree) else None

    def flatten_one_level_with_keys(self, tree: Any) -> tuple[Iterable[tuple[KeyEntry, Any]], Hashable] | None:
        """flatten_one_level_with_keys(tree), or None for a leaf."""
        return flatten_one_level_with_keys(tree) if self._is_node(tree) else None

    def is_node(self, type: type) -> bool:  # noqa: A002 - JAX's argument name
        """is_tree_node(type)."""
        return is_tree_node(type)

    def register_node(self, type: type, to_iterable: _p.Flatten, from_iterable: _p.Unflatten,  # noqa: A002
                      to_iterable_with_keys: _p.FlattenWithKeys | None = None) -> None:
        """register_pytree_node(type, to_iterable, from_iterable, to_iterable_with_keys)."""
        _p.register_pytree_node(type, to_iterable, from_iterable, to_iterable_with_keys)

    def register_dataclass_node(self, type: type, data_fields: Sequence[str], meta_fields: Sequence[str],  # noqa: A002
                                /) -> None:
        """register_dataclass(type, data_fields, meta_fields)."""
        _p.register_dataclass(type, data_fields, meta_fields)

    @staticmethod
    def _is_node(tree: Any) -> bool:
        return is_tree_node(type(tree))

    def __reduce__(self) -> str:
        return "default_registry"  # (pickled by reference, as JAX's)

    def __repr__(self) -> str:
        return "<ember.tree_util.default_registry>"


default_registry = PyTreeRegistry()


__all__ = ["PyTreeRegistry", "all_leaves", "default_registry", "flatten_one_level", "flatten_one_level_with_keys",
           "is_tree_node", "tree_all", "tree_broadcast", "tree_flatten", "tree_flatten_with_path", "tree_leaves",
           "tree_leaves_with_path", "tree_map", "tree_map_with_path", "tree_reduce", "tree_reduce_associative",
           "tree_structure"]
