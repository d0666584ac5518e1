"""Pytrees: nested tuples, lists, dicts, namedtuples and None (plus registered node types) with array leaves.

Semantics follow jax.tree_util: dict keys are sorted, None is a node without children, namedtuples are nodes,
every other unregistered object is a leaf. This module is the bottom layer: it imports nothing from ember."""
from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, NamedTuple, Self, TypeVar

__all__ = [
    "DictKey", "FlattenedIndexKey", "GetAttrKey", "KeyEntry", "KeyPath", "Partial", "PyTreeDef", "SequenceKey",
    "all_leaves", "flatten_one_level", "flatten_one_level_with_keys", "is_tree_node", "keystr", "leaf_def",
    "register_dataclass", "register_pytree_node", "register_pytree_node_class", "register_pytree_with_keys",
    "tree_all", "tree_broadcast", "tree_flatten", "tree_flatten_with_path", "tree_leaves", "tree_leaves_with_path",
    "tree_map", "tree_map_with_path", "tree_reduce", "tree_reduce_associative", "tree_structure", "tree_transpose",
    "tree_unflatten", "treedef_children", "treedef_is_leaf",
]

T = TypeVar("T")
IsLeaf = Callable[..., bool]


# ---- key paths ------------------------------------------------------------------------------------------------

class _Key:
    """A key class: a frozen dataclass of one field, named _FIELD, shown as _FORMAT of its value."""
    _FORMAT: ClassVar[str]
    _FIELD: ClassVar[str]

    def _value(self) -> Any:
        return getattr(self, self._FIELD)

    def __str__(self) -> str:
        return self._FORMAT.format(self._value())


@dataclasses.dataclass(frozen=True)
class SequenceKey(_Key):
    """The key of a tuple's or list's child: ``[idx]``."""
    idx: int
    _FORMAT = "[{!r}]"
    _FIELD = "idx"


@dataclasses.dataclass(frozen=True)
class DictKey(_Key):
    """The key of a dict's child: ``[key]``."""
    key: Hashable
    _FORMAT = "[{!r}]"
    _FIELD = "key"


@dataclasses.dataclass(frozen=True)
class GetAttrKey(_Key):
    """The key of an attribute (namedtuple field, dataclass field): ``.name``."""
    name: str
    _FORMAT = ".{}"
    _FIELD = "name"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey(_Key):
    """The key of a registered node's child when the node has no keys of its own: its position."""
    key: int
    _FORMAT = "[<flat index {}>]"
    _FIELD = "key"


KeyEntry = Hashable
KeyPath = tuple[KeyEntry, ...]


def keystr(keys: KeyPath, *, simple: bool = False, separator: str = "") -> str:
    """A key path as a string: ``[0]['a'].b``, or with simple=True the bare keys (``0``, ``a``, ``b``) joined."""
    def bare(key: KeyEntry) -> str:
        return str(key._value() if isinstance(key, _Key) else key)
    return separator.join(map(bare if simple else str, keys))


# ---- the registry ---------------------------------------------------------------------------------------------

Flatten = Callable[[Any], tuple[Iterable[Any], Hashable]]
FlattenWithKeys = Callable[[Any], tuple[Iterable[tuple[KeyEntry, Any]], Hashable]]
Unflatten = Callable[[Hashable, Iterable[Any]], Any]


class _Node(NamedTuple):
    flatten: Flatten
    flatten_with_keys: FlattenWithKeys
    unflatten: Unflatten


_REGISTRY: dict[type, _Node] = {}


def _keys_by_position(flatten: Flatten) -> FlattenWithKeys:
    def flatten_with_keys(node: Any) -> tuple[list[tuple[KeyEntry, Any]], Hashable]:
        children, aux = flatten(node)
        return [(FlattenedIndexKey(i), c) for i, c in enumerate(children)], aux
    return flatten_with_keys


def _drop_keys(flatten_with_keys: FlattenWithKeys) -> Flatten:
    def flatten(node: Any) -> tuple[list[Any], Hashable]:
        keyed, aux = flatten_with_keys(node)
        return [c for _, c in keyed], aux
    return flatten


def register_pytree_node(nodetype: type, flatten_func: Flatten, unflatten_func: Unflatten,
                         flatten_with_keys_func: FlattenWithKeys | None = None) -> None:
    """Make nodetype a pytree node: flatten_func(node) -> (children, aux_data), unflatten_func(aux_data, children).

    aux_data must be hashable; without flatten_with_keys_func the children's keys are FlattenedIndexKeys."""
    if nodetype in _REGISTRY:
        raise ValueError(f"register_pytree_node: {nodetype.__name__} is already registered as a pytree node")
    _REGISTRY[nodetype] = _Node(flatten_func, flatten_with_keys_func or _keys_by_position(flatten_func),
                                unflatten_func)


def register_pytree_with_keys(nodetype: type, flatten_with_keys: FlattenWithKeys, unflatten_func: Unflatten,
                              flatten_func: Flatten | None = None) -> None:
    """Like register_pytree_node, from flatten_with_keys(node) -> ([(key, child), ...], aux_data)."""
    register_pytree_node(nodetype, flatten_func or _drop_keys(flatten_with_keys), unflatten_func, flatten_with_keys)


def register_static(cls: type[T]) -> type[T]:
    """Register cls as a pytree node with no children whose instance is its own aux data (as
    jax.tree_util.register_static): a value of it is part of a tree's structure, compared and hashed with it, not a
    leaf. Returns cls (usable as a class decorator)."""
    register_pytree_node(cls, lambda x: ((), x), lambda aux, _: aux)
    return cls


def register_pytree_node_class(cls: type[T]) -> type[T]:
    """Class decorator: register cls through its ``tree_flatten`` method and ``tree_unflatten`` classmethod."""
    register_pytree_node(cls, lambda node: node.tree_flatten(), cls.tree_unflatten)  # type: ignore[attr-defined]
    return cls


def register_pytree_with_keys_class(cls: type[T]) -> type[T]:
    """Class decorator: register cls through its ``tree_flatten_with_keys`` method (and ``tree_flatten`` where it
    has one) and its ``tree_unflatten`` classmethod (as jax.tree_util.register_pytree_with_keys_class)."""
    flatten = (lambda node: node.tree_flatten()) if hasattr(cls, "tree_flatten") else None
    register_pytree_with_keys(cls, lambda node: node.tree_flatten_with_keys(),  # type: ignore[attr-defined]
                              cls.tree_unflatten, flatten)  # type: ignore[attr-defined]
    return cls


def register_dataclass(nodetype: type[T], data_fields: Sequence[str] | None = None,
                       meta_fields: Sequence[str] | None = None, drop_fields: Sequence[str] = ()) -> type[T]:
    """Register a dataclass-like type: data_fields are children (keyed by GetAttrKey), meta_fields static aux data.

    Without field lists nodetype must be a dataclass: fields with ``metadata={"static": True}`` are meta fields,
    the others data fields. Rebuilt by ``nodetype(**fields)``; usable as a class decorator."""
    if (data_fields is None) != (meta_fields is None):
        raise TypeError(f"register_dataclass: give both data_fields and meta_fields or neither; got "
                        f"data_fields={data_fields!r}, meta_fields={meta_fields!r}")
    if data_fields is None or meta_fields is None:
        if not dataclasses.is_dataclass(nodetype):
            raise TypeError(f"register_dataclass: {nodetype.__name__} is not a dataclass; give data_fields and "
                            "meta_fields")
        fields = [f for f in dataclasses.fields(nodetype) if f.name not in drop_fields]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
    data, meta = tuple(data_fields), tuple(meta_fields)
    if overlap := set(data) & set(meta):
        raise ValueError(f"register_dataclass: fields {sorted(overlap)} are both data and meta fields")
    if dataclasses.is_dataclass(nodetype):
        init = {f.name for f in dataclasses.fields(nodetype) if f.init} - set(drop_fields)
        if init != {*data, *meta}:
            raise ValueError(f"register_dataclass: data_fields and meta_fields must be exactly the init fields of "
                             f"{nodetype.__name__}; missing {sorted(init - {*data, *meta})}, unexpected "
                             f"{sorted({*data, *meta} - init)}")
    register_pytree_with_keys(
        nodetype,
        lambda x: ([(GetAttrKey(n), getattr(x, n)) for n in data], tuple(getattr(x, n) for n in meta)),
        lambda aux, children: nodetype(**dict(zip(meta, aux)), **dict(zip(data, children))),
        lambda x: ([getattr(x, n) for n in data], tuple(getattr(x, n) for n in meta)))
    return nodetype


def static(**kwargs: Any) -> Any:
    """A dataclass field that register_dataclass makes static aux data: dataclasses.field(**kwargs) with
    ``static: True`` added to its metadata (as jax.tree.static)."""
    metadata = {"static": True, **(kwargs.pop("metadata", None) or {})}
    return dataclasses.field(metadata=metadata, **kwargs)


def _sequence_keys(seq: Sequence[Any]) -> tuple[list[tuple[KeyEntry, Any]], None]:
    return [(SequenceKey(i), c) for i, c in enumerate(seq)], None


def _sorted_keys(d: dict[Any, Any]) -> tuple[Any, ...]:
    try:
        return tuple(sorted(d))
    except TypeError:
        raise ValueError(f"pytree dict keys must be sortable, got {list(d)!r}") from None


def _register_mapping(nodetype: type, keys_of: Callable[[Any], tuple[Any, ...]],
                      aux_of: Callable[[Any, tuple[Any, ...]], Hashable], unflatten: Unflatten) -> None:
    def flatten(d: Any) -> tuple[list[Any], Hashable]:
        keys = keys_of(d)
        return [d[k] for k in keys], aux_of(d, keys)

    def flatten_with_keys(d: Any) -> tuple[list[tuple[KeyEntry, Any]], Hashable]:
        keys = keys_of(d)
        return [(DictKey(k), d[k]) for k in keys], aux_of(d, keys)
    register_pytree_node(nodetype, flatten, unflatten, flatten_with_keys)


register_pytree_node(tuple, lambda t: (t, None), lambda _, c: tuple(c), _sequence_keys)
register_pytree_node(list, lambda t: (t, None), lambda _, c: list(c), _sequence_keys)
register_pytree_node(type(None), lambda _: ((), None), lambda _, c: None)
_register_mapping(dict, _sorted_keys, lambda _, keys: keys, lambda keys, c: dict(zip(keys, c)))
_register_mapping(collections.OrderedDict, tuple, lambda _, keys: keys,
                  lambda keys, c: collections.OrderedDict(zip(keys, c)))
_register_mapping(collections.defaultdict, _sorted_keys, lambda d, keys: (d.default_factory, keys),
                  lambda aux, c: collections.defaultdict(aux[0], zip(aux[1], c)))

# namedtuples are nodes without registration; their unflatten needs the type (see PyTreeDef._build). Their
# children are a plain tuple of their fields: a namedtuple may define __len__ otherwise (JAX's Rotation, whose single
# rotation has no len()), and the walks count children with len.
_NAMEDTUPLE = _Node(lambda t: (tuple(tuple.__iter__(t)), None),
                    lambda t: ([(GetAttrKey(f), c) for f, c in zip(t._fields, t)], None),
                    lambda _, c: None)


def _node_of(node_type: type) -> _Node | None:
    node = _REGISTRY.get(node_type)
    if node is None and issubclass(node_type, tuple) and hasattr(node_type, "_fields"):
        return _NAMEDTUPLE
    return node


# ---- tree definitions -----------------------------------------------------------------------------------------
# Every walk below keeps its own stack instead of recursing: a pytree may be thousands of levels deep (a linked
# list of pairs, a deep chain of modules), far past the interpreter's recursion limit.

class _Mismatch(Exception):
    """Raised inside PyTreeDef._up_to, with the key path of the subtree that does not match."""

    def __init__(self, what: str, path: list[KeyEntry]):
        super().__init__(what)
        self.what = what
        self.path = path


_NodeSpec = tuple[type, Hashable, int] | None  # a node's (type, aux data, number of children); None: a leaf
_UNHASHABLE_AUX = object()  # stands for aux data that cannot be hashed, in a PyTreeDef's hash


class PyTreeDef:
    """The structure of a pytree: its node types, their aux data and where the leaves go."""
    __slots__ = ("_hash", "_spec_list", "aux", "children", "node_type", "num_leaves", "num_nodes")

    def __init__(self, node_type: type | None, aux: Any, children: tuple[PyTreeDef, ...]):
        self.node_type = node_type  # None for a leaf
        self.aux = aux
        self.children = children
        self.num_leaves: int = 1 if node_type is None else sum(c.num_leaves for c in children)
        self.num_nodes: int = 1 + sum(c.num_nodes for c in children)
        self._spec_list: list[_NodeSpec] | None = None  # (see _specs)
        try:  # (the children's hashes are computed already: no recursion)
            self._hash = hash((node_type, aux, children))
        except TypeError:  # unhashable aux data (a dict, as JAX allows): hashed without it, compared with ==
            self._hash = hash((node_type, _UNHASHABLE_AUX, children))

    def _specs(self) -> list[_NodeSpec]:
        """The specs of this structure's nodes in preorder: (type, aux data, number of children), None for a
        leaf (computed once; a structure made by tree_flatten has them from the start)."""
        specs = self._spec_list
        if specs is None:
            specs = []
            todo = [self]
            while todo:
                treedef = todo.pop()
                if treedef.node_type is None:
                    specs.append(None)
                else:
                    specs.append((treedef.node_type, treedef.aux, len(treedef.children)))
                    todo.extend(reversed(treedef.children))
            self._spec_list = specs
        return specs

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PyTreeDef) and (self is other or (
            self._hash == other._hash and self._specs() == other._specs()))

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"PyTreeDef({_fold(self, lambda: '*', _describe_node)})"

    def unflatten(self, leaves: Iterable[Any]) -> Any:
        """The pytree of this structure with these leaves."""
        leaves = list(leaves)
        if len(leaves) != self.num_leaves:
            raise ValueError(f"tree_unflatten: structure {self} needs {self.num_leaves} leaves, got {len(leaves)}")
        return _build(self._specs(), reversed(leaves))

    def _build(self, leaves: Iterator[Any]) -> Any:
        """The pytree of this structure, its leaves taken from the iterator leaves."""
        return _build(self._specs(), reversed([next(leaves) for _ in range(self.num_leaves)]))

    def flatten_up_to(self, tree: Any) -> list[Any]:
        """The subtrees of tree at this structure's leaves; tree must have this structure down to them."""
        return _flatten_up_to("flatten_up_to", self, tree)

    def compose(self, inner: PyTreeDef) -> PyTreeDef:
        """This structure with inner in place of each leaf."""
        return _fold(self, lambda: inner, lambda t, children: PyTreeDef(t.node_type, t.aux, tuple(children)))

    def _up_to(self, tree: Any, out: list[Any]) -> None:
        """Append the subtrees of tree at this structure's leaves to out, walking both in preorder; _Mismatch
        where tree differs."""
        todo = [tree]
        for i, spec in enumerate(self._specs()):
            subtree = todo.pop()
            if spec is None:
                out.append(subtree)
                continue
            kind, aux, n = spec
            if type(subtree) is not kind:
                raise _Mismatch(f"{kind.__name__}, got {type(subtree).__name__}", self._path_at(tree, i))
            node = _node_of(kind)
            assert node is not None
            children, tree_aux = node.flatten(subtree)
            if not isinstance(children, list | tuple):
                children = list(children)
            if len(children) != n:
                raise _Mismatch(f"{kind.__name__} with {n} children, got {len(children)}", self._path_at(tree, i))
            if tree_aux != aux:
                raise _Mismatch(f"{kind.__name__} with node data {aux!r}, got {tree_aux!r}", self._path_at(tree, i))
            todo.extend(reversed(children))

    def _path_at(self, tree: Any, stop: int) -> list[KeyEntry]:
        """The key path in tree of this structure's node number stop in preorder (tree matches it up to there)."""
        todo: list[tuple[KeyPath, Any]] = [((), tree)]
        for i, spec in enumerate(self._specs()):
            path, subtree = todo.pop()
            if i == stop:
                return list(path)
            if spec is not None:
                node = _node_of(spec[0])
                assert node is not None
                todo.extend(((*path, k), c) for k, c in reversed(list(node.flatten_with_keys(subtree)[0])))
        raise AssertionError("unreachable: stop is a node of this structure")


def _build(specs: list[_NodeSpec], leaves: Iterator[Any]) -> Any:
    """The pytree of these node specs (in preorder), taking its leaves from the right: leaves runs backwards."""
    built: list[Any] = []  # (in reverse preorder a node's children are the last ones built, its first on top)
    for spec in reversed(specs):
        if spec is None:
            built.append(next(leaves))
            continue
        kind, aux, n = spec
        children = built[:-n - 1:-1]
        del built[len(built) - n:]
        node = _node_of(kind)
        if node is None:
            raise TypeError(f"tree_unflatten: {kind.__name__} is no longer a registered pytree node")
        built.append(kind(*children) if node is _NAMEDTUPLE else node.unflatten(aux, children))
    return built[0]


def _fold(tree: PyTreeDef, leaf: Callable[[], T], node: Callable[[PyTreeDef, list[T]], T]) -> T:
    """tree's value computed bottom up: leaf() at each leaf, left to right, and node(subtree, its children's
    values) at each node."""
    values: list[T] = []
    todo: list[tuple[PyTreeDef, bool]] = [(tree, False)]
    while todo:
        treedef, children_done = todo.pop()
        if treedef.node_type is None:
            values.append(leaf())
        elif children_done:
            start = len(values) - len(treedef.children)
            values[start:] = [node(treedef, values[start:])]
        else:
            todo.append((treedef, True))
            todo.extend((c, False) for c in reversed(treedef.children))
    return values[0]


def _describe_node(treedef: PyTreeDef, inner: list[str]) -> str:
    kind, joined = treedef.node_type, ", ".join(inner)
    assert kind is not None
    if kind is tuple:
        return f"({joined}{',' if len(inner) == 1 else ''})"
    if kind is list:
        return f"[{joined}]"
    if kind is dict:
        return "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(treedef.aux, inner)) + "}"
    if kind is type(None):
        return "None"
    name = f"namedtuple[{kind.__name__}]" if _node_of(kind) is _NAMEDTUPLE else f"{kind.__name__}[{treedef.aux}]"
    return f"CustomNode({name}, [{joined}])"


_LEAF = PyTreeDef(None, None, ())


def leaf_def() -> PyTreeDef:
    return _LEAF


def treedef_tuple(treedefs: Iterable[PyTreeDef]) -> PyTreeDef:
    """The structure of a tuple whose elements have these structures (as jax.tree_util.treedef_tuple)."""
    return PyTreeDef(tuple, None, tuple(treedefs))


def treedef_children(treedef: PyTreeDef) -> list[PyTreeDef]:
    """The structures of the root's children (none for a leaf)."""
    return list(treedef.children)


def _flatten_up_to(fn: str, treedef: PyTreeDef, tree: Any, what: str = "trees have different structures"
                   ) -> list[Any]:
    out: list[Any] = []
    try:
        treedef._up_to(tree, out)
    except _Mismatch as e:
        where = keystr(tuple(e.path)) or "the root"
        raise ValueError(f"{fn}: {what}: {treedef} and {tree_structure(tree)}; at {where} expected "
                         f"{e.what}") from None
    return out


# ---- flattening -----------------------------------------------------------------------------------------------
# A tree is walked in preorder into a list of its nodes' specs, (type, aux data, number of children) or None for
# a leaf; the PyTreeDef is then built from that list, bottom up.

def _preorder(tree: Any, leaves: list[Any], is_leaf: IsLeaf | None) -> list[_NodeSpec]:
    """The specs of tree's nodes in preorder; its leaves appended to leaves."""
    specs: list[_NodeSpec] = []
    todo = [tree]
    registered = _REGISTRY.get
    while todo:
        x = todo.pop()
        if is_leaf is not None and is_leaf(x):
            node = None
        else:
            node = registered(type(x)) or _node_of(type(x))  # (the second look-up finds namedtuples)
        if node is None:
            leaves.append(x)
            specs.append(None)
            continue
        children, aux = node.flatten(x)
        if not isinstance(children, list | tuple):
            children = list(children)
        specs.append((type(x), aux, len(children)))
        todo.extend(reversed(children))
    return specs


def _preorder_with_path(tree: Any, leaves: list[Any], is_leaf: IsLeaf | None, is_leaf_takes_path: bool
                        ) -> list[_NodeSpec]:
    """Like _preorder, appending (key path, leaf) pairs to leaves; is_leaf(path, x) if is_leaf_takes_path."""
    specs: list[_NodeSpec] = []
    todo: list[tuple[KeyPath, Any]] = [((), tree)]
    while todo:
        path, x = todo.pop()
        if is_leaf is not None and (is_leaf(path, x) if is_leaf_takes_path else is_leaf(x)):
            node = None
        else:
            node = _node_of(type(x))
        if node is None:
            leaves.append((path, x))
            specs.append(None)
            continue
        keyed, aux = node.flatten_with_keys(x)
        keyed = list(keyed)
        specs.append((type(x), aux, len(keyed)))
        todo.extend(((*path, k), c) for k, c in reversed(keyed))
    return specs


def _treedef_of(specs: list[_NodeSpec]) -> PyTreeDef:
    """The PyTreeDef of the nodes' specs in preorder."""
    built: list[PyTreeDef] = []  # (in reverse preorder a node's children are the last ones built, first on top)
    for spec in reversed(specs):
        if spec is None:
            built.append(_LEAF)
            continue
        kind, aux, n = spec
        children = tuple(built[:-n - 1:-1])
        del built[len(built) - n:]
        built.append(PyTreeDef(kind, aux, children))
    root = built[0]
    root._spec_list = specs
    return root


def tree_flatten(tree: Any, is_leaf: IsLeaf | None = None) -> tuple[list[Any], PyTreeDef]:
    """The leaves of tree, left to right (dict keys sorted), and its structure."""
    leaves: list[Any] = []
    return leaves, _treedef_of(_preorder(tree, leaves, is_leaf))


def tree_unflatten(treedef: PyTreeDef, leaves: Iterable[Any]) -> Any:
    """The pytree of structure treedef with these leaves."""
    return treedef.unflatten(leaves)


def tree_leaves(tree: Any, is_leaf: IsLeaf | None = None) -> list[Any]:
    """The leaves of tree, left to right."""
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree: Any, is_leaf: IsLeaf | None = None) -> PyTreeDef:
    """The structure of tree."""
    return tree_flatten(tree, is_leaf)[1]


def tree_flatten_with_path(tree: Any, is_leaf: IsLeaf | None = None,
                           is_leaf_takes_path: bool = False) -> tuple[list[tuple[KeyPath, Any]], PyTreeDef]:
    """Like tree_flatten, with each leaf paired with its key path; is_leaf(path, x) if is_leaf_takes_path."""
    leaves: list[Any] = []
    return leaves, _treedef_of(_preorder_with_path(tree, leaves, is_leaf, is_leaf_takes_path))


def tree_leaves_with_path(tree: Any, is_leaf: IsLeaf | None = None,
                          is_leaf_takes_path: bool = False) -> list[tuple[KeyPath, Any]]:
    """The (key path, leaf) pairs of tree, left to right."""
    return tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)[0]


def all_leaves(iterable: Iterable[Any], is_leaf: Callable[[Any], bool] | None = None) -> bool:
    """Whether every element is a leaf (not a pytree node, or accepted by is_leaf)."""
    return all((is_leaf is not None and is_leaf(x)) or _node_of(type(x)) is None for x in iterable)


# ---- one node at a time -----------------------------------------------------------------------------------------

def is_tree_node(typ: type) -> bool:
    """Whether typ is a pytree node type: registered (the built-in containers, None's type, register_* calls) or a
    namedtuple class. Exact types only, as JAX's registry: a dict subclass is a leaf type. Any other object is not
    a node type (False, as JAX); None is refused with a TypeError, as jax.tree_util.is_tree_node refuses it (the
    node type of None is type(None))."""
    if typ is None:
        raise TypeError("is_tree_node: typ must be a type, got None (None's node type is type(None))")
    return isinstance(typ, type) and _node_of(typ) is not None


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """Whether treedef has a single node: the structure of a leaf, or of a node without children (None, (), [],
    {}), as jax.tree_util.treedef_is_leaf (num_nodes == 1)."""
    num_nodes = getattr(treedef, "num_nodes", None)
    if num_nodes is None:  # (JAX's is an AttributeError too: it reads treedef.num_nodes)
        raise AttributeError(f"treedef_is_leaf: expected a PyTreeDef, got {type(treedef).__name__} {treedef!r}, "
                             "which has no num_nodes")
    return num_nodes == 1


def _one_level(fn: str, tree: Any, is_leaf: IsLeaf | None, with_keys: bool) -> tuple[Any, Hashable]:
    """(children, aux data) of the node tree, or ((key, child) pairs, aux data) with_keys, in the containers
    JAX's registry returns: a tuple's or list's own object (its pairs in a tuple, as None's), a dict's values (or
    pairs) in a tuple, a namedtuple's fields in a list with the class as aux data, a registered node's what its
    flatten function gives. ValueError for a leaf (by type, or accepted by is_leaf)."""
    node = None if is_leaf is not None and is_leaf(tree) else _node_of(type(tree))
    if node is None:
        raise ValueError(f"{fn}: can't tree-flatten type: {type(tree)!r}: a leaf, not a pytree node (the built-in "
                         "containers, None, namedtuples and registered types are)")
    if node is _NAMEDTUPLE:
        if with_keys:
            return [(GetAttrKey(f), c) for f, c in zip(tree._fields, tree)], type(tree)
        return list(tree), type(tree)
    children, aux = node.flatten_with_keys(tree) if with_keys else node.flatten(tree)
    if type(tree) is dict or (with_keys and type(tree) in (tuple, list, type(None))):
        children = tuple(children)
    return children, aux


def flatten_one_level(tree: Any, is_leaf: IsLeaf | None = None) -> tuple[Iterable[Any], Hashable]:
    """(children, aux data) of the pytree node tree, one level down (its children stay whole): what its node type's
    flatten function gives, as jax.tree_util.flatten_one_level. ValueError if tree is a leaf."""
    return _one_level("flatten_one_level", tree, is_leaf, with_keys=False)


def flatten_one_level_with_keys(tree: Any, is_leaf: IsLeaf | None = None
                                ) -> tuple[Iterable[tuple[KeyEntry, Any]], Hashable]:
    """Like flatten_one_level, each child paired with its key (SequenceKey, DictKey, GetAttrKey, or
    FlattenedIndexKey for a node registered without keys)."""
    return _one_level("flatten_one_level_with_keys", tree, is_leaf, with_keys=True)


# ---- leaves to users, nodes to ember ----------------------------------------------------------------------------
# A type registered here (ember.random's typed key arrays) is a pytree node inside ember, whose transformations
# see the plain arrays underneath, and a leaf of the public tree functions (ember.tree_util, ember.tree), as JAX's
# key arrays are leaves of jax.tree_util: `tree_leaves({'k': key})` is [key].
USER_LEAF_TYPES: set[type] = set()
# Of those, the arrays over a physical array with trailing dims of their own (a typed key array of shape S holds
# uint32[*S, 2]): type -> (its physical array, the array of that type over a physical one). ember.numpy's structural
# functions (where, stack, concatenate, expand_dims, squeeze, broadcast_to) take them, as JAX's take key arrays.
PHYSICAL: dict[type, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {}


def register_user_leaf(nodetype: type, physical: tuple[Callable[[Any], Any], Callable[[Any], Any]] | None = None
                       ) -> None:
    """Make nodetype (a registered pytree node) a leaf of the public tree functions; physical: (its physical array,
    the nodetype over a physical array) for an array type whose elements are physical arrays' trailing dims."""
    USER_LEAF_TYPES.add(nodetype)
    if physical is not None:
        PHYSICAL[nodetype] = physical


def _is_user_leaf(x: Any) -> bool:
    return type(x) in USER_LEAF_TYPES


def users_is_leaf(is_leaf: Any, takes_path: bool = False) -> Any:
    """is_leaf for a public tree function: also true of the user-leaf types."""
    if not USER_LEAF_TYPES:
        return is_leaf
    if is_leaf is None:
        return (lambda path, x: type(x) in USER_LEAF_TYPES) if takes_path else _is_user_leaf
    if takes_path:
        return lambda path, x: type(x) in USER_LEAF_TYPES or is_leaf(path, x)
    return lambda x: type(x) in USER_LEAF_TYPES or is_leaf(x)


# ---- maps and reductions --------------------------------------------------------------------------------------

def _leaves_of_rest(fn: str, treedef: PyTreeDef, rest: tuple[Any, ...]) -> list[list[Any]]:
    return [_flatten_up_to(fn, treedef, other) for other in rest]


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeaf | None = None) -> Any:
    """f applied leaf-wise: f(x, *ys) for each leaf x of tree and the subtrees ys of rest at the same place.

    Each tree in rest must have tree's structure down to tree's leaves."""
    leaves, treedef = tree_flatten(tree, is_leaf)
    others = _leaves_of_rest("tree_map", treedef, rest)
    return treedef.unflatten(f(*xs) for xs in zip(leaves, *others))


def tree_map_with_path(f: Callable[..., Any], tree: Any, *rest: Any, is_leaf: IsLeaf | None = None,
                       is_leaf_takes_path: bool = False) -> Any:
    """Like tree_map, calling f(path, x, *ys) with each leaf's key path."""
    keyed, treedef = tree_flatten_with_path(tree, is_leaf, is_leaf_takes_path)
    others = _leaves_of_rest("tree_map_with_path", treedef, rest)
    return treedef.unflatten(f(path, x, *ys) for (path, x), *ys in zip(keyed, *others))


class _Unspecified:
    def __repr__(self) -> str:
        return "<unspecified>"


_UNSPECIFIED: Any = _Unspecified()


def tree_reduce(function: Callable[[T, Any], T], tree: Any, initializer: T = _UNSPECIFIED,
                is_leaf: IsLeaf | None = None) -> T:
    """functools.reduce(function, leaves[, initializer]) over the leaves of tree."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _UNSPECIFIED:
        if not leaves:
            raise TypeError("tree_reduce: the tree has no leaves and no initializer was given")
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_reduce_associative(operation: Callable[[T, T], T], tree: Any, *, identity: T = _UNSPECIFIED,
                            is_leaf: IsLeaf | None = None) -> T:
    """The leaves of tree combined by the associative operation as a balanced binary tree: the leaves split in
    halves (the first len // 2, then the rest), each half reduced, operation(left, right); one leaf is itself. So
    operation is applied in jax.tree_util.tree_reduce_associative's order and depth log2(leaves) (a
    non-commutative operation gives JAX's result). identity is the result for a tree without leaves (only then
    used); TypeError when there are none and no identity."""
    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is _UNSPECIFIED:
            raise TypeError("tree_reduce_associative: the tree has no leaves and no identity was given")
        return identity

    def reduce(start: int, stop: int) -> T:
        if stop - start == 1:
            return leaves[start]
        middle = start + (stop - start) // 2
        return operation(reduce(start, middle), reduce(middle, stop))
    return reduce(0, len(leaves))


def tree_broadcast(prefix_tree: Any, full_tree: Any, is_leaf: IsLeaf | None = None, *,
                   full_is_leaf: IsLeaf | None = None) -> Any:
    """full_tree with each of its leaves replaced by the leaf of prefix_tree above it: prefix_tree must be a tree
    prefix of full_tree (its leaves, by is_leaf, stand where full_tree has leaves or whole subtrees), as
    jax.tree_util.tree_broadcast. is_leaf applies to prefix_tree; full_is_leaf says what full_tree's leaves are
    (ember.tree_util's: the typed key arrays). ValueError, saying where, when prefix_tree is not a prefix."""
    leaves, prefix = tree_flatten(prefix_tree, is_leaf)
    subtrees = _flatten_up_to("tree_broadcast", prefix, full_tree, "prefix_tree is not a tree prefix of full_tree")
    broadcast = [leaf for leaf, sub in zip(leaves, subtrees)
                 for _ in range(tree_structure(sub, full_is_leaf).num_leaves)]
    return tree_structure(full_tree, full_is_leaf).unflatten(broadcast)


def tree_all(tree: Any, *, is_leaf: IsLeaf | None = None) -> bool:
    """Whether all leaves of tree are truthy."""
    return all(tree_leaves(tree, is_leaf))


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None, pytree_to_transpose: Any) -> Any:
    """Turn a tree of structure outer-of-inner into one of inner-of-outer (inner inferred from the first subtree
    when None)."""
    leaves, treedef = tree_flatten(pytree_to_transpose)
    if inner_treedef is None:
        subtrees = _flatten_up_to("tree_transpose", outer_treedef, pytree_to_transpose)
        if not subtrees:
            raise ValueError(f"tree_transpose: cannot infer inner_treedef: outer structure {outer_treedef} has no "
                             "leaves")
        inner_treedef = tree_structure(subtrees[0])
    expected = outer_treedef.compose(inner_treedef)
    if treedef != expected:
        raise TypeError(f"tree_transpose: expected a tree of structure {expected} (outer {outer_treedef}, inner "
                        f"{inner_treedef}), got {treedef}")
    n_inner = inner_treedef.num_leaves
    return inner_treedef.unflatten(outer_treedef.unflatten(leaves[i::n_inner]) for i in range(n_inner))


# ---- Partial --------------------------------------------------------------------------------------------------

class _StaticPartial:
    """A functools.partial held as Partial's function, so that its bound arguments stay static aux data."""
    __slots__ = ("partial",)

    def __init__(self, partial: functools.partial[Any]):
        self.partial = partial

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.partial(*args, **kwargs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _StaticPartial) and self.partial == other.partial

    def __hash__(self) -> int:
        return hash(self.partial)

    def __repr__(self) -> str:
        return f"_StaticPartial({self.partial!r})"


class Partial(functools.partial):  # type: ignore[type-arg]
    """A functools.partial that is a pytree: the bound args and keywords are its children, the function is static
    aux data (a functools.partial given as the function stays whole, with its own arguments static)."""

    def __new__(cls, func: Callable[..., Any], /, *args: Any, **keywords: Any) -> Self:
        if isinstance(func, functools.partial):
            func = _StaticPartial(func)
        return super().__new__(cls, func, *args, **keywords)


register_pytree_node(Partial, lambda p: ((p.args, p.keywords), p.func),
                     lambda func, children: Partial(func, *children[0], **children[1]))


def prefix_entries(prefix: Any, tree: Any, is_leaf: IsLeaf) -> list[Any]:
    """One entry of prefix per leaf of tree, where prefix is a tree prefix of tree whose leaves (by is_leaf) are
    the entries (vmap's in_axes, jit's shardings, shard_map's specs): an entry applies to every leaf of the subtree
    it stands at. ValueError (saying where) when prefix is not a prefix of tree."""
    subtrees = tree_structure(prefix, is_leaf=is_leaf).flatten_up_to(tree)
    entries = tree_leaves(prefix, is_leaf=is_leaf)
    return [entry for entry, sub in zip(entries, subtrees) for _ in range(tree_structure(sub).num_leaves)]
