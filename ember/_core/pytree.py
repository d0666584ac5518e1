"""Pytrees: nested tuples, lists, dicts, namedtuples and None (plus registered node types) with array leaves."""
from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable

__all__ = ["PyTreeDef", "leaf_def", "register_pytree_node", "tree_flatten", "tree_unflatten", "tree_leaves", "tree_map",
           "tree_structure"]

# type -> (flatten(node) -> (children, aux), unflatten(aux, children) -> node)
_REGISTRY: dict[type, tuple[Callable[[Any], tuple[Iterable[Any], Hashable]], Callable[[Hashable, list[Any]], Any]]] = {}


def register_pytree_node(node_type: type, flatten: Callable[[Any], tuple[Iterable[Any], Hashable]],
                         unflatten: Callable[[Hashable, list[Any]], Any]) -> None:
    """Make node_type a pytree node: flatten(node) -> (children, aux_data); unflatten(aux_data, children)."""
    _REGISTRY[node_type] = (flatten, unflatten)


register_pytree_node(tuple, lambda t: (t, None), lambda _, c: tuple(c))
register_pytree_node(list, lambda t: (t, None), lambda _, c: list(c))
register_pytree_node(dict, lambda d: ([d[k] for k in sorted(d)], tuple(sorted(d))),
                     lambda keys, c: dict(zip(keys, c)))
register_pytree_node(type(None), lambda _: ((), None), lambda _, c: None)


class PyTreeDef:
    """The structure of a pytree: its node types, their aux data and where the leaves go."""
    __slots__ = ("node_type", "aux", "children", "num_leaves", "_hash")

    def __init__(self, node_type: type | None, aux: Hashable, children: tuple["PyTreeDef", ...]):
        self.node_type = node_type  # None for a leaf
        self.aux = aux
        self.children = children
        self.num_leaves = 1 if node_type is None else sum(c.num_leaves for c in children)
        self._hash = hash((node_type, aux, children))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, PyTreeDef) and self._hash == other._hash and self.node_type is other.node_type
                and self.aux == other.aux and self.children == other.children)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"PyTreeDef({self._describe()})"

    def _describe(self) -> str:
        if self.node_type is None:
            return "*"
        inner = ", ".join(c._describe() for c in self.children)
        if self.node_type is tuple:
            return f"({inner}{',' if len(self.children) == 1 else ''})"
        if self.node_type is list:
            return f"[{inner}]"
        if self.node_type is dict:
            return "{" + ", ".join(f"{k!r}: {c._describe()}" for k, c in zip(self.aux, self.children)) + "}"
        if self.node_type is type(None):
            return "None"
        return f"{self.node_type.__name__}({inner})"

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"tree_unflatten: structure {self} needs {self.num_leaves} leaves, got {len(leaves)}")
        return self._build(iter(leaves))

    def _build(self, leaves: Any) -> Any:
        if self.node_type is None:
            return next(leaves)
        children = [c._build(leaves) for c in self.children]
        return _node_unflatten(self.node_type)(self.aux, children)


_LEAF = PyTreeDef(None, None, ())


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def _node_unflatten(node_type: type) -> Callable[[Hashable, list[Any]], Any]:
    entry = _REGISTRY.get(node_type)
    if entry is not None:
        return entry[1]
    return lambda _, children: node_type(*children)  # a namedtuple


def _flatten_into(tree: Any, leaves: list[Any], is_leaf: Callable[[Any], bool] | None) -> PyTreeDef:
    if is_leaf is not None and is_leaf(tree):
        leaves.append(tree)
        return _LEAF
    node_type = type(tree)
    entry = _REGISTRY.get(node_type)
    if entry is None:
        if _is_namedtuple(tree):
            children = tuple(_flatten_into(c, leaves, is_leaf) for c in tree)
            return PyTreeDef(node_type, None, children)
        leaves.append(tree)
        return _LEAF
    items, aux = entry[0](tree)
    children = tuple(_flatten_into(c, leaves, is_leaf) for c in items)
    return PyTreeDef(node_type, aux, children)


def tree_flatten(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> tuple[list[Any], PyTreeDef]:
    leaves: list[Any] = []
    treedef = _flatten_into(tree, leaves, is_leaf)
    return leaves, treedef


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    return treedef.unflatten(leaves)


def tree_leaves(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[Any]:
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: Callable[[Any], bool] | None = None) -> PyTreeDef:
    return tree_flatten(tree, is_leaf)[1]


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: Callable[[Any], bool] | None = None) -> Any:
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = []
    for other in rest:
        other_leaves, other_def = tree_flatten(other, is_leaf)
        if other_def != treedef:
            raise ValueError(f"tree_map: trees have different structures: {treedef} and {other_def}")
        others.append(other_leaves)
    return treedef.unflatten(f(*args) for args in zip(leaves, *others))


def leaf_def() -> PyTreeDef:
    return _LEAF
