"""The rest of jax.tree_util's names in ember.tree_util (issue #48): default_registry, flatten_one_level(_with_keys),
is_tree_node, tree_broadcast, tree_reduce_associative and treedef_is_leaf, against JAX 0.10.2 on the same pytrees
as tests/test_tree.py (built-in containers, None, namedtuples, registered classes, dataclasses, Partial, nested)."""
import collections
import pickle

import jax
import jax.tree_util as jtu
import numpy as np
import pytest
from test_tree import IDS, PAIRS, Pair, Params, Point, _same_leaves

import ember
import ember.numpy as enp
import ember.random
import ember.tree as et
import ember.tree_util as tu


def _same_subtrees(ours, theirs):
    """Two lists of subtrees (ember's, JAX's) of the same structures and leaves."""
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert repr(tu.tree_structure(a)) == repr(jtu.tree_structure(b))
        _same_leaves(tu.tree_leaves(a), jtu.tree_leaves(b))


def _same_keys(ours, theirs):
    assert [(type(k).__name__, str(k)) for k in ours] == [(type(k).__name__, str(k)) for k in theirs]


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


# ---- flatten_one_level, flatten_one_level_with_keys ---------------------------------------------------------------

@pytest.mark.parametrize("tree,jtree", PAIRS, ids=IDS)
def test_flatten_one_level_matches_jax(tree, jtree):
    if not jtu.is_tree_node(type(jtree)):
        with pytest.raises(ValueError, match="can't tree-flatten type"):
            jtu.flatten_one_level(jtree)
        with pytest.raises(ValueError, match="flatten_one_level: can't tree-flatten type"):
            tu.flatten_one_level(tree)
        assert tu.default_registry.flatten_one_level(tree) is None
        return
    children, aux = tu.flatten_one_level(tree)
    jchildren, jaux = jtu.flatten_one_level(jtree)
    assert type(children) is type(jchildren)  # (JAX's containers: a dict's values in a tuple, a namedtuple's a list)
    _same_subtrees(list(children), list(jchildren))
    assert aux == jaux
    if type(tree) in (tuple, list):
        assert children is tree  # (the node itself, as JAX's)
    assert tu.default_registry.flatten_one_level(tree) == (children, aux)


@pytest.mark.parametrize("tree,jtree", PAIRS, ids=IDS)
def test_flatten_one_level_with_keys_matches_jax(tree, jtree):
    if not jtu.is_tree_node(type(jtree)):
        with pytest.raises(ValueError, match="flatten_one_level_with_keys: can't tree-flatten type"):
            tu.flatten_one_level_with_keys(tree)
        assert tu.default_registry.flatten_one_level_with_keys(tree) is None
        return
    keyed, aux = tu.flatten_one_level_with_keys(tree)
    jkeyed, jaux = jtu.flatten_one_level_with_keys(jtree)
    assert type(keyed) is type(jkeyed) and aux == jaux
    _same_subtrees([c for _, c in keyed], [c for _, c in jkeyed])
    # the keys are those of the first level of JAX's key paths
    one_level = jtu.tree_flatten_with_path(jtree, is_leaf=lambda x: x is not jtree)[0]
    _same_keys([k for k, _ in keyed], [path[0] for path, _ in one_level])
    if not _is_namedtuple(tree):
        # (jaxlib 0.10.2's flatten_one_level_with_keys names every field of a namedtuple after its first one,
        # GetAttrKey('x') twice for Point(x, y); ember's keys are its key paths', as above)
        _same_keys([k for k, _ in keyed], [k for k, _ in jkeyed])
    children, _ = tu.flatten_one_level(tree)
    assert [c for _, c in keyed] == list(children)


def test_flatten_one_level_is_one_level():
    tree = {"b": {"c": 3}, "a": [1, 2]}
    assert tu.flatten_one_level(tree) == (([1, 2], {"c": 3}), ("a", "b"))
    assert tu.flatten_one_level(None) == ((), None) == jtu.flatten_one_level(None)
    assert tu.flatten_one_level(Point(1, [2])) == ([1, [2]], Point)
    assert tu.flatten_one_level(collections.defaultdict(list, b=1, a=2)) == ([2, 1], (list, ("a", "b")))
    keyed, aux = tu.flatten_one_level_with_keys(Point(1, 2))
    assert [str(k) for k, _ in keyed] == [".x", ".y"] and aux is Point


def test_flatten_one_level_refuses_leaves_and_key_arrays():
    for leaf in (1, "a", np.ones(2), enp.ones(2), object()):
        with pytest.raises(ValueError, match=r"can't tree-flatten type: <class"):
            tu.flatten_one_level(leaf)
    key = ember.random.key(0)
    with pytest.raises(ValueError, match="KeyArray"):
        tu.flatten_one_level(key)  # (a leaf of the public tree functions, as JAX's key arrays)
    assert tu.default_registry.flatten_one_level_with_keys(key) is None


# ---- is_tree_node, treedef_is_leaf --------------------------------------------------------------------------------

class _DictSubclass(dict):
    pass


class _PointSubclass(Point):
    pass


@pytest.mark.parametrize("typ", [tuple, list, dict, type(None), collections.OrderedDict, collections.defaultdict,
                                 Point, _PointSubclass, Pair, Params, tu.Partial, int, float, str, np.ndarray,
                                 _DictSubclass, object, type])
def test_is_tree_node_matches_jax(typ):
    jtyp = jtu.Partial if typ is tu.Partial else typ
    assert tu.is_tree_node(typ) is jtu.is_tree_node(jtyp)
    assert tu.default_registry.is_node(typ) is jtu.default_registry.is_node(jtyp)


def test_is_tree_node_of_non_types_and_none():
    for not_a_type in (1, "a", (1, 2), [1], Point(1, 2)):
        assert tu.is_tree_node(not_a_type) is False is jtu.is_tree_node(not_a_type)
    for module in (tu, jtu):
        with pytest.raises(TypeError):
            module.is_tree_node(None)
    with pytest.raises(TypeError, match="is_tree_node: typ must be a type, got None"):
        tu.is_tree_node(None)
    assert tu.is_tree_node(type(ember.random.key(0))) is False is jtu.is_tree_node(type(jax.random.key(0)))
    assert tu.is_tree_node(type(enp.ones(2))) is False


@pytest.mark.parametrize("tree,jtree", PAIRS, ids=IDS)
def test_treedef_is_leaf_matches_jax(tree, jtree):
    assert tu.treedef_is_leaf(tu.tree_structure(tree)) is jtu.treedef_is_leaf(jtu.tree_structure(jtree))
    for child, jchild in zip(tu.treedef_children(tu.tree_structure(tree)),
                             jtu.treedef_children(jtu.tree_structure(jtree))):
        assert tu.treedef_is_leaf(child) is jtu.treedef_is_leaf(jchild)


def test_treedef_is_leaf_cases_and_errors():
    assert [tu.treedef_is_leaf(tu.tree_structure(t)) for t in (1, None, (), {}, [1], (None,))] == \
           [True, True, True, True, False, False]
    for not_a_treedef in (1, None, [1]):
        with pytest.raises(AttributeError):
            jtu.treedef_is_leaf(not_a_treedef)
        with pytest.raises(AttributeError, match="treedef_is_leaf: expected a PyTreeDef"):
            tu.treedef_is_leaf(not_a_treedef)


# ---- tree_broadcast ------------------------------------------------------------------------------------------------

def _broadcast_cases(partial_cls):
    return [
        (1, [2, (3, 4), {"a": 5}]),
        ([1, 2], [(3, 4), {"a": 5}]),
        ([1, None], [(3, 4), None]),
        ([1, 2], [[None, 5], [6, (7,)]]),  # (None in the full tree has no leaves: it stays None)
        (None, None), (1, None), ("s", ()),
        (Point(1, 2), Point([1, 2], {"a": 3})),
        ({"a": 1, "b": (2, 3)}, {"a": [1, 2, 3], "b": (Point(4, 5), None)}),
        (Pair(1, 2), Pair([1, 2], {"c": 3})),
        (Params(w=1, b=2), Params(w=[1, 2], b=(3, None))),
        ([0, Params(w=1, b=2, name="head")], [[1, 2], Params(w={"k": 1}, b=(2,), name="head")]),
        (collections.OrderedDict(b=1, a=2), collections.OrderedDict(b=[1, 2], a=3)),
        (partial_cls(max, 1), partial_cls(max, [1, 2])),
        (np.float32(2.0), {"x": [np.ones(2), np.zeros(3)]}),
    ]


@pytest.mark.parametrize("case", range(len(_broadcast_cases(tu.Partial))))
def test_tree_broadcast_matches_jax(case):
    prefix, full = _broadcast_cases(tu.Partial)[case]
    jprefix, jfull = _broadcast_cases(jtu.Partial)[case]
    ours, theirs = tu.tree_broadcast(prefix, full), jtu.tree_broadcast(jprefix, jfull)
    assert repr(tu.tree_structure(ours)) == repr(jtu.tree_structure(theirs)) == repr(jtu.tree_structure(jfull))
    _same_leaves(tu.tree_leaves(ours), jtu.tree_leaves(theirs))
    short = et.broadcast(prefix, full)
    assert tu.tree_structure(short) == tu.tree_structure(ours) and tu.tree_leaves(short) == tu.tree_leaves(ours)


def test_tree_broadcast_is_leaf_applies_to_the_prefix():
    prefix, full = [1, (2, 3)], [[4, 5], [6, 7]]
    is_tuple = lambda x: isinstance(x, tuple)  # noqa: E731
    assert tu.tree_broadcast(prefix, full, is_leaf=is_tuple) == jtu.tree_broadcast(prefix, full, is_leaf=is_tuple) \
        == [[1, 1], [(2, 3), (2, 3)]]
    assert et.broadcast(prefix, full, is_leaf=is_tuple) == jax.tree.broadcast(prefix, full, is_leaf=is_tuple)


@pytest.mark.parametrize("prefix,full,where", [
    ([1, None], [(3, 4), 5], r"at \[1\] expected NoneType, got int"),
    ([1, 2], [3], "at the root expected list with 2 children, got 1"),
    ((1, 2), [3, 4], "at the root expected tuple, got list"),
    ({"a": 1}, {"b": 2}, r"at the root expected dict with node data \('a',\), got \('b',\)"),
    ([1, 2], 5, "at the root expected list, got int"),
    (None, [1, 2], "at the root expected NoneType, got list"),
    ([None], [(1,)], r"at \[0\] expected NoneType, got tuple"),
    (Point(1, 2), (1, 2), "at the root expected Point, got tuple"),
    ({"a": [1, 2]}, {"a": [1]}, r"at \['a'\] expected list with 2 children, got 1"),
])
def test_tree_broadcast_errors_match_jax(prefix, full, where):
    with pytest.raises(ValueError):
        jtu.tree_broadcast(prefix, full)
    with pytest.raises(ValueError, match="tree_broadcast: prefix_tree is not a tree prefix of full_tree: .*" + where):
        tu.tree_broadcast(prefix, full)


def test_tree_broadcast_key_arrays_are_leaves():
    key = ember.random.key(0)
    out = tu.tree_broadcast({"k": 1, "a": 2}, {"k": key, "a": (1, 2)})
    assert out == {"k": 1, "a": (2, 2)}
    assert tu.tree_broadcast(key, [1, 2])[0] is key


def test_tree_broadcast_under_jit():
    @ember.jit
    def f(scale, tree):
        return tu.tree_map(lambda s, x: s * x, tu.tree_broadcast(scale, tree), tree)
    ones = np.ones(2, np.float32)
    out = f({"a": np.float32(2.0), "b": np.float32(3.0)}, {"a": [ones], "b": (ones[:1], ones[:1])})
    np.testing.assert_array_equal(out["a"][0], [2.0, 2.0])
    np.testing.assert_array_equal(out["b"][1], [3.0])


# ---- tree_reduce_associative ---------------------------------------------------------------------------------------

def _pairing(a, b):
    return (a, b)


@pytest.mark.parametrize("tree,jtree", PAIRS, ids=IDS)
def test_tree_reduce_associative_matches_jax(tree, jtree):
    """A non-commutative, non-associative operation (pairing) shows the order and the grouping."""
    kwargs = {"identity": "empty"}
    ours = tu.tree_reduce_associative(_pairing, tree, **kwargs)
    theirs = jtu.tree_reduce_associative(_pairing, jtree, **kwargs)
    assert repr(tu.tree_structure(ours)) == repr(jtu.tree_structure(theirs))
    _same_leaves(tu.tree_leaves(ours), jtu.tree_leaves(theirs))


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13])
def test_tree_reduce_associative_grouping(n):
    leaves = list(range(n))
    assert tu.tree_reduce_associative(_pairing, leaves) == jtu.tree_reduce_associative(_pairing, leaves)
    assert et.reduce_associative(_pairing, leaves) == jax.tree.reduce_associative(_pairing, leaves)
    assert tu.tree_reduce_associative(lambda a, b: a + b, leaves, identity=100) == sum(leaves)


def test_tree_reduce_associative_identity_is_leaf_and_errors():
    for tree in ([], None, {}, [None, ()]):
        assert tu.tree_reduce_associative(_pairing, tree, identity=0) == 0
        assert tu.tree_reduce_associative(_pairing, tree, identity=None) is None  # (None is an identity too)
        with pytest.raises(TypeError):
            jtu.tree_reduce_associative(_pairing, tree)
        with pytest.raises(TypeError, match="tree_reduce_associative: the tree has no leaves and no identity"):
            tu.tree_reduce_associative(_pairing, tree)
    with pytest.raises(TypeError):
        tu.tree_reduce_associative(_pairing, [1, 2], 0)  # (identity is keyword-only, as JAX's)
    is_tuple = lambda x: isinstance(x, tuple)  # noqa: E731
    tree = [(1, 2), [(3, 4), 5]]
    assert tu.tree_reduce_associative(_pairing, tree, is_leaf=is_tuple) == \
        jtu.tree_reduce_associative(_pairing, tree, is_leaf=is_tuple) == ((1, 2), ((3, 4), 5))
    key = ember.random.key(1)
    assert tu.tree_reduce_associative(_pairing, [key, 1]) == (key, 1)


def test_tree_reduce_associative_on_arrays_under_jit():
    tree = {"a": np.arange(3.0, dtype=np.float32), "b": [np.ones(3, np.float32), np.full(3, 2.0, np.float32)]}
    out = ember.jit(lambda t: tu.tree_reduce_associative(enp.add, t))(tree)
    np.testing.assert_allclose(out, jtu.tree_reduce_associative(jax.numpy.add, tree))


# ---- default_registry ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tree,jtree", PAIRS, ids=IDS)
def test_default_registry_flatten_matches_jax(tree, jtree):
    leaves, treedef = tu.default_registry.flatten(tree)
    jleaves, jtreedef = jtu.default_registry.flatten(jtree)
    _same_leaves(leaves, jleaves)
    assert repr(treedef) == repr(jtreedef) and treedef == tu.tree_structure(tree)
    keyed, treedef = tu.default_registry.flatten_with_path(tree)
    jkeyed, _ = jtu.default_registry.flatten_with_path(jtree)
    assert [tu.keystr(p) for p, _ in keyed] == [jtu.keystr(p) for p, _ in jkeyed]


def test_default_registry_leaf_predicates():
    tree = [1, None, (2,), {"a": None, "b": (1,)}]
    is_tuple = lambda x: isinstance(x, tuple)  # noqa: E731
    leaves, treedef = tu.default_registry.flatten(tree, is_tuple)
    jleaves, jtreedef = jtu.default_registry.flatten(tree, is_tuple)
    assert leaves == jleaves and repr(treedef) == repr(jtreedef)
    first_level = lambda path, x: len(path) == 1  # noqa: E731  (flatten_with_path's predicate takes the path)
    keyed, treedef = tu.default_registry.flatten_with_path(tree, first_level)
    jkeyed, jtreedef = jtu.default_registry.flatten_with_path(tree, first_level)
    assert [(tu.keystr(p), x) for p, x in keyed] == [(jtu.keystr(p), x) for p, x in jkeyed]
    assert repr(treedef) == repr(jtreedef)


def test_default_registry_registers_in_the_one_registry():
    class Node:
        def __init__(self, a):
            self.a = a

    for registry in (tu.default_registry, jtu.default_registry):
        registry.register_node(Node, lambda n: ((n.a,), "tag"), lambda tag, c: Node(*c))
    assert tu.is_tree_node(Node) and tu.tree_leaves([Node(1), Node((2, 3))]) == [1, 2, 3]
    assert repr(tu.tree_structure(Node(1))) == repr(jtu.tree_structure(Node(1)))
    for registry, module in ((tu.default_registry, tu), (jtu.default_registry, jtu)):
        with pytest.raises(ValueError):
            registry.register_node(Node, lambda n: ((), None), lambda _, c: Node(0))
        with pytest.raises(ValueError):
            module.register_pytree_node(Node, lambda n: ((), None), lambda _, c: Node(0))

    class Record:
        def __init__(self, p, q):
            self.p, self.q = p, q

    for registry in (tu.default_registry, jtu.default_registry):
        registry.register_dataclass_node(Record, ["p"], ["q"])
    assert tu.flatten_one_level(Record(1, 2)) == jtu.flatten_one_level(Record(1, 2)) == ([1], (2,))
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path(Record([1], 2))] == [".p[0]"]
    with pytest.raises(TypeError):
        tu.default_registry.register_dataclass_node(Record, data_fields=["p"], meta_fields=["q"])  # (positional)


def test_default_registry_pickles_by_reference_and_key_arrays_are_leaves():
    assert pickle.loads(pickle.dumps(tu.default_registry)) is tu.default_registry
    key = ember.random.key(0)
    leaves, treedef = tu.default_registry.flatten({"k": key})
    assert leaves[0] is key and treedef.num_leaves == 1
    assert tu.default_registry.is_node(type(key)) is False
    assert repr(tu.default_registry) == "<ember.tree_util.default_registry>"
