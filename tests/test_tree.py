"""Pytrees (ember.tree_util, ember.tree) against jax.tree_util / jax.tree as the oracle: leaves, structures and
their equality, key paths, maps, reductions, transposes, registered classes, dataclasses, Partial, errors."""
import ast
import collections
import dataclasses
import functools
import inspect
import operator
import pathlib

import jax
import jax.tree_util as jtu
import numpy as np
import pytest

import ember
import ember.numpy as enp
import ember.tree as et
import ember.tree_util as tu
from ember._core.pytree import leaf_def

Point = collections.namedtuple("Point", "x y")


def _register_both(register, *args, **kwargs):
    """Register with JAX's registry and ember's alike (ember's returns the class for decorators)."""
    def wrap(cls):
        register(tu)(cls, *args, **kwargs)
        register(jtu)(cls, *args, **kwargs)
        return cls
    return wrap


class Pair:
    """A class registered through its tree_flatten/tree_unflatten methods (children keyed by position)."""

    def __init__(self, a, b, tag="pair"):
        self.a, self.b, self.tag = a, b, tag

    def tree_flatten(self):
        return (self.a, self.b), self.tag

    @classmethod
    def tree_unflatten(cls, tag, children):
        return cls(*children, tag=tag)


tu.register_pytree_node_class(Pair)
jtu.register_pytree_node_class(Pair)


@dataclasses.dataclass
class Params:
    w: object
    b: object
    name: str = dataclasses.field(default="layer", metadata={"static": True})


tu.register_dataclass(Params)
jtu.register_dataclass(Params)


class Explicit:
    """A class registered with register_dataclass and explicit field lists."""

    def __init__(self, x, y, mode):
        self.x, self.y, self.mode = x, y, mode


tu.register_dataclass(Explicit, data_fields=["y", "x"], meta_fields=["mode"])
jtu.register_dataclass(Explicit, data_fields=["y", "x"], meta_fields=["mode"])


class Keyed:
    """A class registered with keys of its own."""

    def __init__(self, first, second):
        self.first, self.second = first, second


def _keyed_flatten(k, keys):
    return [(keys.GetAttrKey("first"), k.first), (keys.GetAttrKey("second"), k.second)], None


tu.register_pytree_with_keys(Keyed, functools.partial(_keyed_flatten, keys=tu), lambda _, c: Keyed(*c))
jtu.register_pytree_with_keys(Keyed, functools.partial(_keyed_flatten, keys=jtu), lambda _, c: Keyed(*c))


def _add3(a, b, c=0):
    return a + b + c


def make_trees(partial_cls):
    """Trees that ember and JAX must see alike; partial_cls is ember's or JAX's Partial."""
    return [
        1, None, (), [], {}, (1,), [None], "leaf",
        [1, (2, None), {"b": 3, "a": Point(4, 5)}],
        {"z": [1, 2], "a": {"y": (3,), "x": None}, "m": Point(x=[6], y={"q": 7})},
        collections.OrderedDict([("b", 1), ("a", [2, 3])]),
        collections.defaultdict(list, {"k": 1, "j": (2,)}),
        Pair([1, 2], {"c": 3}), Pair(1, 2, tag="other"), [Pair(Pair(1, 2), None)],
        Params(w=[1, 2], b=3), Params(w=1, b=(2, 3), name="head"),
        Explicit(x=1, y=[2, 3], mode="train"),
        Keyed({"u": 1}, [2, Point(3, 4)]),
        partial_cls(_add3, 1, c=2), [partial_cls(_add3), partial_cls(_add3, (1, 2), c=[3])],
        {"arr": np.arange(3.0), "nested": [np.ones(2), (np.zeros(1),)]},
    ]


TREES = make_trees(tu.Partial)
JAX_TREES = make_trees(jtu.Partial)
PAIRS = list(zip(TREES, JAX_TREES))
IDS = [f"tree{i}" for i in range(len(TREES))]


def _same_leaves(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x is y or (isinstance(x, np.ndarray) and np.array_equal(x, y)) or x == y, (x, y)


@pytest.mark.parametrize("tree,jtree", PAIRS, ids=IDS)
def test_flatten_matches_jax(tree, jtree):
    leaves, treedef = tu.tree_flatten(tree)
    jleaves, jtreedef = jtu.tree_flatten(jtree)
    _same_leaves(leaves, jleaves)
    assert repr(treedef) == repr(jtreedef)
    assert (treedef.num_leaves, treedef.num_nodes) == (jtreedef.num_leaves, jtreedef.num_nodes)
    assert [repr(c) for c in tu.treedef_children(treedef)] == [repr(c) for c in jtu.treedef_children(jtreedef)]
    assert et.leaves(tree) == leaves and et.structure(tree) == treedef and et.flatten(tree)[1] == treedef


@pytest.mark.parametrize("tree,jtree", PAIRS, ids=IDS)
def test_unflatten_round_trip(tree, jtree):
    leaves, treedef = et.flatten(tree)
    rebuilt = et.unflatten(treedef, leaves)
    assert type(rebuilt) is type(tree)
    assert et.structure(rebuilt) == treedef
    _same_leaves(et.leaves(rebuilt), leaves)
    doubled = et.unflatten(treedef, [(x,) for x in leaves])
    _same_leaves(jax.tree.leaves(jax.tree.unflatten(jax.tree.structure(jtree), [(x,) for x in leaves])),
                 et.leaves(doubled))


def test_structure_equality_matches_jax():
    extra = [[1, 2], (1, 2), [1, 2, 3], {"a": 1}, {"b": 1}, Point(1, 2), (1, (2,)), [1, None], [None, None],
             Pair(1, 2), Pair(3, 4), Params(1, 2, name="x"), Params(1, 2, name="y"), [[1], 2],
             collections.OrderedDict(a=1), collections.OrderedDict([("b", 1), ("a", 2)])]
    trees = TREES + extra
    jtrees = JAX_TREES + extra
    defs = [tu.tree_structure(t) for t in trees]
    jdefs = [jtu.tree_structure(t) for t in jtrees]
    for i, (a, ja) in enumerate(zip(defs, jdefs)):
        for b, jb in zip(defs[i:], jdefs[i:]):
            assert (a == b) == (ja == jb), (a, b)
            if a == b:
                assert hash(a) == hash(b)
    assert tu.tree_structure({"a": 1, "b": 2}) == tu.tree_structure({"b": 5, "a": 6})
    assert tu.tree_structure([1]) != [1]


@pytest.mark.parametrize("tree,jtree", PAIRS, ids=IDS)
def test_key_paths_match_jax(tree, jtree):
    keyed, treedef = tu.tree_flatten_with_path(tree)
    jkeyed, _ = jtu.tree_flatten_with_path(jtree)
    assert [tu.keystr(p) for p, _ in keyed] == [jtu.keystr(p) for p, _ in jkeyed]
    assert ([tu.keystr(p, simple=True, separator="/") for p, _ in keyed]
            == [jtu.keystr(p, simple=True, separator="/") for p, _ in jkeyed])
    assert [[repr(k) for k in p] for p, _ in keyed] == [[repr(k) for k in p] for p, _ in jkeyed]
    _same_leaves([x for _, x in keyed], tu.tree_leaves(tree))
    assert treedef == tu.tree_structure(tree)
    assert et.leaves_with_path(tree) == keyed and et.flatten_with_path(tree)[0] == keyed


def test_key_classes():
    path = (tu.SequenceKey(0), tu.DictKey("a"), tu.GetAttrKey("b"), tu.FlattenedIndexKey(2))
    jpath = (jtu.SequenceKey(0), jtu.DictKey("a"), jtu.GetAttrKey("b"), jtu.FlattenedIndexKey(2))
    assert tu.keystr(path) == jtu.keystr(jpath) == "[0]['a'].b[<flat index 2>]"
    assert tu.keystr(path, simple=True, separator=".") == jtu.keystr(jpath, simple=True, separator=".")
    assert [str(k) for k in path] == [str(k) for k in jpath]
    assert [repr(k) for k in path] == [repr(k) for k in jpath]
    assert tu.SequenceKey(1) == tu.SequenceKey(1) and hash(tu.DictKey("a")) == hash(tu.DictKey("a"))
    assert tu.SequenceKey(1) != tu.FlattenedIndexKey(1)
    assert (path[0].idx, path[1].key, path[2].name, path[3].key) == (0, "a", "b", 2)
    assert tu.keystr(()) == jtu.keystr(()) == ""


def _compare_results(out, jout):
    _same_leaves(et.leaves(out), jax.tree.leaves(jout))
    assert repr(et.structure(out)) == repr(jax.tree.structure(jout))


@pytest.mark.parametrize("tree,jtree", PAIRS, ids=IDS)
def test_map_matches_jax(tree, jtree):
    def f(x):
        return (type(x).__name__, x)

    _compare_results(et.map(f, tree), jax.tree.map(f, jtree))
    other = et.map(lambda x: [x], tree)
    jother = jax.tree.map(lambda x: [x], jtree)
    _compare_results(et.map(lambda x, y, z: (x, y, z), tree, other, tree),
                     jax.tree.map(lambda x, y, z: (x, y, z), jtree, jother, jtree))

    def g(path, x, y):
        return tu.keystr(path), x, y

    def jg(path, x, y):
        return jtu.keystr(path), x, y

    _compare_results(et.map_with_path(g, tree, other), jax.tree.map_with_path(jg, jtree, jother))


def test_map_takes_prefix_trees_and_is_leaf():
    assert et.map(lambda x, y: (x, y), [1, 2], [(1, 2), None]) == [(1, (1, 2)), (2, None)]
    is_pair = lambda x: isinstance(x, tuple) and len(x) == 2  # noqa: E731
    tree = {"a": (1, 2), "b": [(3, 4), (5,)]}
    for f in [lambda x: x, lambda x: len(x) if is_pair(x) else -x]:
        assert et.map(f, tree, is_leaf=is_pair) == jax.tree.map(f, tree, is_leaf=is_pair)
    assert et.leaves([None, 1], is_leaf=lambda x: x is None) == [None, 1]
    assert tu.tree_flatten([1, [2]], is_leaf=lambda x: isinstance(x, list))[1] == tu.tree_structure(0)
    takes_path = dict(is_leaf=lambda path, x: len(path) == 1, is_leaf_takes_path=True)
    tree = [1, (2, 3), {"a": [4]}]
    assert ([(tu.keystr(p), x) for p, x in et.leaves_with_path(tree, **takes_path)]
            == [(jtu.keystr(p), x) for p, x in jax.tree.leaves_with_path(tree, **takes_path)])
    assert (et.map_with_path(lambda p, x: len(p), tree, **takes_path)
            == jax.tree.map_with_path(lambda p, x: len(p), tree, **takes_path))


@pytest.mark.parametrize("tree,jtree", PAIRS, ids=IDS)
def test_reduce_and_all_match_jax(tree, jtree):
    def collect(acc, x):
        return [*acc, x]

    _same_leaves(et.reduce(collect, tree, []), jax.tree.reduce(collect, jtree, []))
    if jax.tree.leaves(jtree):
        _compare_results(et.reduce(lambda a, b: (a, b), tree), jax.tree.reduce(lambda a, b: (a, b), jtree))
    truthy = et.map(lambda x: not isinstance(x, np.ndarray) and bool(x), tree)
    assert et.all(truthy) == jax.tree.all(jax.tree.map(lambda x: not isinstance(x, np.ndarray) and bool(x), jtree))
    assert tu.all_leaves(tu.tree_leaves(tree)) and tu.all_leaves([tree]) == jtu.all_leaves([jtree])


def test_reduce_examples():
    tree = {"a": [1, 2], "b": (3, None, 4)}
    assert et.reduce(operator.add, tree) == jax.tree.reduce(operator.add, tree) == 10
    assert et.reduce(operator.mul, tree, 10) == jax.tree.reduce(operator.mul, tree, 10)
    assert et.reduce(operator.add, [], 5) == 5
    with pytest.raises(TypeError):
        jax.tree.reduce(operator.add, [None])
    with pytest.raises(TypeError, match="tree_reduce: the tree has no leaves"):
        et.reduce(operator.add, [None])
    assert et.all([]) and not et.all([1, (0,)]) and et.all([True, {"a": 1}])
    assert not tu.all_leaves([1, None]) and not tu.all_leaves([1, (2,)]) and tu.all_leaves([1, "a", np.ones(1)])


@pytest.mark.parametrize("outer,inner,tree", [
    ([0, 0], (0, 0), [(1, 2), (3, 4)]),
    ([0, 0, 0], {"a": 0, "b": None, "c": [0]}, [{"a": i, "b": None, "c": [10 * i]} for i in range(3)]),
    ({"x": 0, "y": Point(0, 0)}, [0], {"x": [1], "y": Point([2], [3])}),
    (Pair(0, 0), Point(0, 0), Pair(Point(1, 2), Point(3, 4))),
    (0, (0, 0, 0), (1, 2, 3)),
    ([0, 0], (), [(), ()]),
])
def test_transpose_matches_jax(outer, inner, tree):
    outer_def, inner_def = et.structure(outer), et.structure(inner)
    expected = jax.tree.transpose(jax.tree.structure(outer), jax.tree.structure(inner), tree)
    _compare_results(et.transpose(outer_def, inner_def, tree), expected)
    if et.leaves(outer) and et.leaves(inner):
        _compare_results(tu.tree_transpose(outer_def, None, tree), expected)


def test_transpose_errors():
    outer, inner = et.structure([0, 0]), et.structure((0, 0))
    with pytest.raises(TypeError):
        jax.tree.transpose(jax.tree.structure([0, 0]), jax.tree.structure((0, 0)), [(1, 2), (3, 4, 5)])
    expected = r"tree_transpose: expected a tree of structure PyTreeDef\(\[\(\*, \*\), \(\*, \*\)\]\)"
    with pytest.raises(TypeError, match=expected):
        et.transpose(outer, inner, [(1, 2), (3, 4, 5)])
    with pytest.raises(TypeError, match="tree_transpose"):  # JAX only counts leaves here and returns a wrong tree
        et.transpose(outer, inner, [((1, 2), 3), 4])
    with pytest.raises(ValueError, match="cannot infer inner_treedef"):
        et.transpose(et.structure([]), None, [])


@pytest.mark.parametrize("a,b", [
    ([1, 2], (1, 2)), ([1, 2], [1, 2, 3]), ({"a": 1}, {"b": 1}), ((1, 2), Point(1, 2)), ([None], [1]),
    (Pair(1, 2), Pair(1, 2, tag="x")), (Params(1, 2), Params(1, 2, name="x")), ({"a": [1, (2, 3)]}, {"a": [1, (2,)]}),
    (collections.OrderedDict(a=1, b=2), {"a": 1, "b": 2}),
])
def test_map_structure_errors(a, b):
    with pytest.raises(ValueError):
        jax.tree.map(lambda x, y: x, a, b)
    with pytest.raises(ValueError, match="tree_map: trees have different structures") as info:
        et.map(lambda x, y: x, a, b)
    assert str(et.structure(a)) in str(info.value) and str(et.structure(b)) in str(info.value)
    with pytest.raises(ValueError, match="tree_map_with_path: trees have different structures"):
        et.map_with_path(lambda p, x, y: x, a, b)
    with pytest.raises(ValueError, match="flatten_up_to"):
        et.structure(a).flatten_up_to(b)


def test_error_names_the_key_path():
    with pytest.raises(ValueError, match=r"at \['a'\]\[1\] expected tuple with 2 children, got 1"):
        et.map(lambda x, y: x, {"a": [1, (2, 3)]}, {"a": [1, (2,)]})
    with pytest.raises(ValueError, match=r"at the root expected list, got tuple"):
        et.map(lambda x, y: x, [1], (1,))
    with pytest.raises(ValueError, match=r"at \.w expected .*dict with node data \('a',\), got \('b',\)"):
        et.map(lambda x, y: x, Params({"a": 1}, 2), Params({"b": 1}, 2))


def test_unflatten_errors():
    treedef = et.structure([1, (2, 3)])
    for leaves in ([1, 2], [1, 2, 3, 4]):
        with pytest.raises(ValueError):
            jax.tree.unflatten(jax.tree.structure([1, (2, 3)]), leaves)
        with pytest.raises(ValueError, match=r"tree_unflatten: structure PyTreeDef\(\[\*, \(\*, \*\)\]\) needs 3"):
            et.unflatten(treedef, leaves)


def test_treedef_methods():
    treedef, jtreedef = et.structure([1, (2, None)]), jax.tree.structure([1, (2, None)])
    inner = {"k": Point(0, 0)}
    composed = treedef.compose(et.structure(inner))
    assert composed == et.structure([inner, (inner, None)])
    assert repr(composed) == repr(jtreedef.compose(jax.tree.structure(inner)))
    prefixed = [[1], ({"a": 2}, None)]
    assert treedef.flatten_up_to(prefixed) == jtreedef.flatten_up_to(prefixed) == [[1], {"a": 2}]
    assert tu.treedef_children(et.structure(1)) == [] and leaf_def() == et.structure(1)
    assert et.structure(None).num_leaves == 0 and et.structure(None).num_nodes == 1


def test_dict_keys_must_sort():
    with pytest.raises(ValueError, match="sortable"):
        et.leaves({1: "x", "a": "y"})
    assert et.leaves({2: "x", 1: "y"}) == jax.tree.leaves({2: "x", 1: "y"}) == ["y", "x"]


def test_registration_errors():
    with pytest.raises(ValueError, match="already registered"):
        tu.register_pytree_node(Pair, lambda p: ((), None), lambda _, c: Pair(0, 0))
    with pytest.raises(TypeError):
        jtu.register_dataclass(Params, data_fields=["w"])
    with pytest.raises(TypeError, match="both data_fields and meta_fields"):
        tu.register_dataclass(Params, data_fields=["w"])
    with pytest.raises(TypeError, match="not a dataclass"):
        tu.register_dataclass(Keyed)

    @dataclasses.dataclass
    class Partly:
        a: int
        b: int

    with pytest.raises(ValueError):
        jtu.register_dataclass(Partly, data_fields=["a"], meta_fields=[])
    with pytest.raises(ValueError, match=r"missing \['b'\]"):
        tu.register_dataclass(Partly, data_fields=["a"], meta_fields=[])
    with pytest.raises(ValueError, match="both data and meta"):
        tu.register_dataclass(Partly, data_fields=["a", "b"], meta_fields=["a"])


def test_dataclass_decorator_and_drop_fields():
    @tu.register_dataclass
    @dataclasses.dataclass
    class Opt:
        lr: float
        count: int = dataclasses.field(default=0, metadata={"static": True})
        cache: object = None

    assert dataclasses.is_dataclass(Opt)  # the decorator returned the class
    leaves, treedef = et.flatten(Opt(0.1, count=3, cache=[1]))
    assert leaves == [0.1, 1] and treedef.aux == (3,)
    assert et.unflatten(treedef, [0.2, 2]) == Opt(0.2, count=3, cache=[2])

    @functools.partial(tu.register_dataclass, drop_fields=["scratch"])
    @dataclasses.dataclass
    class WithScratch:
        x: int
        scratch: list = dataclasses.field(default_factory=list)

    assert et.leaves(WithScratch(1, [5])) == [1]
    assert et.map(lambda x: x + 1, WithScratch(1, [5])) == WithScratch(2)


def test_static_field_matches_jax():
    """ember.tree.static is dataclasses.field with static metadata: register_dataclass keeps the field as aux data,
    and the other metadata and field options pass through (as jax.tree.static)."""
    def make(static, register):
        @register
        @dataclasses.dataclass
        class Op:
            x: object
            op: str = static(default="add", metadata={"doc": "the op"})
        return Op

    Op, JOp = make(et.static, tu.register_dataclass), make(jax.tree.static, jtu.register_dataclass)
    meta = {"static": True, "doc": "the op"}
    assert dataclasses.fields(Op)[1].metadata == dataclasses.fields(JOp)[1].metadata == meta
    leaves, treedef = et.flatten(Op(x=np.float32(1.0)))
    jleaves, jtreedef = jax.tree.flatten(JOp(x=np.float32(1.0)))
    assert leaves == jleaves and treedef.aux == ("add",) and treedef.num_leaves == jtreedef.num_leaves == 1
    assert et.unflatten(treedef, [2.0]) == Op(x=2.0, op="add")
    assert ember.jit(lambda o: o.x * 2 if o.op == "add" else o.x)(Op(x=np.float32(3.0), op="add")) == 6.0
    with pytest.raises(TypeError):
        et.static(bogus=1)


def test_namedtuple_with_its_own_len_is_a_node():
    """A namedtuple's children are its fields whatever its __len__ says (JAX's Rotation refuses len() for a single
    rotation), as in JAX."""
    class Single(collections.namedtuple("Single", ["a", "b"])):
        def __len__(self):
            raise TypeError("no len")

    leaves, treedef = et.flatten(Single(1, (2, 3)))
    assert leaves == jax.tree.leaves(Single(1, (2, 3))) == [1, 2, 3]
    assert et.unflatten(treedef, [4, 5, 6]) == Single(4, (5, 6))
    assert et.map(lambda x: x * 2, Single(1, 2)) == Single(2, 4)


def test_partial():
    f = tu.Partial(_add3, 1, c=10)
    assert isinstance(f, functools.partial) and f(2) == 13
    assert et.leaves(f) == [1, 10]
    assert et.structure(f) == et.structure(tu.Partial(_add3, 5, c=6)) != et.structure(tu.Partial(_add3, 5))
    g = et.map(lambda x: 2 * x, f)
    assert type(g) is tu.Partial and g.func is _add3 and g(2) == 24
    inner = functools.partial(_add3, 100)
    nested = tu.Partial(inner, 1)
    assert et.leaves(nested) == jax.tree.leaves(jtu.Partial(inner, 1)) == [1]  # the inner partial stays static
    assert nested(2) == 103 and et.map(lambda x: x + 1, nested)(2) == 104
    twice = tu.Partial(tu.Partial(_add3, 1), 2)
    assert et.leaves(twice) == jax.tree.leaves(jtu.Partial(jtu.Partial(_add3, 1), 2)) == [2] and twice(3) == 6


def test_pytrees_through_jit_and_grad():
    @ember.jit
    def apply(fn, p, x):
        return fn(p.w * x + p.b)

    p = Params(np.float32(2.0), np.float32(1.0), name="lin")
    out = apply(tu.Partial(enp.multiply, np.float32(3.0)), p, np.float32(4.0))
    np.testing.assert_allclose(float(out), 27.0)
    grads = ember.grad(lambda p, x: enp.sum((p.w * x + p.b) ** 2))(p, np.float32(4.0))
    assert type(grads) is Params and grads.name == "lin"
    np.testing.assert_allclose([float(grads.w), float(grads.b)], [72.0, 18.0])


def _public(module):
    return {name for name in dir(module) if not name.startswith("_")}


@pytest.mark.parametrize("module,jax_module", [(et, jax.tree), (tu, jtu)], ids=["tree", "tree_util"])
def test_public_faces_match_jax(module, jax_module):
    assert len(module.__all__) == len(set(module.__all__)) and set(module.__all__) == _public(module)
    for name in module.__all__:
        ours, theirs = getattr(module, name), getattr(jax_module, name)
        if inspect.isfunction(ours):
            assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters), name
    assert ember.tree is et and "tree" in ember.__all__


def test_core_pytree_imports_nothing_from_ember():
    source = pathlib.Path(tu.__file__).parent.joinpath("_core", "pytree.py").read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and not (node.module or "").startswith("ember")
        elif isinstance(node, ast.Import):
            assert not any(alias.name.startswith("ember") for alias in node.names)
