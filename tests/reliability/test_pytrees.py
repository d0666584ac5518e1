"""Big and deep pytrees (issue 24): a pytree nested 2000 levels deep goes through the tree utilities, jit and grad
(ember used to raise RecursionError past ~450 levels; JAX stops near 1000); a jit reading 2 leaves of a huge
pytree compiles a program of 2 parameters (every leaf used to be one: 10 s and 800 MB at 1e5 leaves); grad over
thousands of leaves finishes and matches the oracle."""
import collections
import importlib
import time

import jax
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import tree_util as tu

jit_module = importlib.import_module("ember._api.jit")  # (ember._api.jit is also the name of the function)

Pair = collections.namedtuple("Pair", ["left", "right"])


def deep_tree(depth: int, leaf: object, make_leaf=float) -> tuple[object, list[object]]:
    """A pytree `depth` nodes deep (dicts, lists, tuples and namedtuples in turn, each holding the deeper one and a
    leaf of its own), and its leaves in tree_flatten's order (the oracle, built alongside)."""
    tree, tail = leaf, [leaf]
    for level in range(depth):
        own = make_leaf(level)
        kind = level % 4
        if kind == 0:
            tree, tail = {"a": own, "b": tree}, [own] + tail  # (sorted keys: "a" first)
        elif kind == 1:
            tree, tail = [tree, own], tail + [own]
        elif kind == 2:
            tree, tail = (own, tree), [own] + tail
        else:
            tree, tail = Pair(tree, own), tail + [own]
    return tree, tail


def test_tree_utilities_at_depth_2000():
    tree, expected = deep_tree(2000, -1.0)
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == expected and treedef.num_leaves == 2001 and treedef.num_nodes == 2000 + 2001
    rebuilt = tu.tree_unflatten(treedef, leaves)
    assert tu.tree_structure(rebuilt) == treedef and hash(tu.tree_structure(rebuilt)) == hash(treedef)
    doubled = tu.tree_map(lambda x, y: x + y, tree, rebuilt)
    assert tu.tree_leaves(doubled) == [2 * x for x in expected]
    paths = tu.tree_flatten_with_path(tree)[0]
    assert [x for _, x in paths] == expected and max(len(path) for path, _ in paths) == 2000
    assert repr(treedef).count("namedtuple[Pair]") == 500
    other = tu.tree_structure(deep_tree(2000, -1.0, make_leaf=lambda level: {"a": 1.0} if level == 7 else 0.0)[0])
    assert other != treedef
    with pytest.raises(ValueError, match=r"different structures.*at (\[1\]|\.right|\['b'\]|\[0\]|\.left)+ "
                                         r"expected dict, got float"):  # (a dict where tree has a leaf)
        tu.tree_map(lambda x, y: x, tu.tree_unflatten(other, [0.0] * other.num_leaves), tree)


def test_structure_matches_jax_at_its_depth_limit():
    # (JAX's C++ flattening stops at about 1000 levels; 900 is within both)
    tree, _ = deep_tree(900, -1.0)
    leaves, treedef = tu.tree_flatten(tree)
    jax_leaves, jax_treedef = jax.tree_util.tree_flatten(tree)
    assert leaves == jax_leaves and treedef.num_nodes == jax_treedef.num_nodes
    assert [tu.keystr(p) for p, _ in tu.tree_flatten_with_path(tree)[0]] == \
        [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]
    assert str(treedef).replace("PyTreeDef(", "").count("*") == str(jax_treedef).count("*")


def test_jit_and_grad_at_depth_2000():
    # (None is a node without leaves: 2000 levels, 5 array leaves, so that compiling stays quick)
    tree, expected = deep_tree(2000, enp.full((2,), -1.0),
                               make_leaf=lambda level: enp.full((2,), float(level)) if level % 500 == 7 else None)
    expected = [x for x in expected if x is not None]
    values = [np.asarray(x) for x in expected]

    def weighted(t):
        return sum(enp.sum(x) * (i + 1) for i, x in enumerate(tu.tree_leaves(t)))

    echoed = ember.jit(lambda t: t)(tree)  # (a deep output too)
    assert tu.tree_structure(echoed) == tu.tree_structure(tree)
    for _ in range(2):  # (the second call: jit's fast path)
        np.testing.assert_allclose(ember.jit(weighted)(tree), sum(np.sum(v) * (i + 1) for i, v in enumerate(values)))
    grads = ember.grad(weighted)(tree)
    assert tu.tree_structure(grads) == tu.tree_structure(tree)
    for i, (g, v) in enumerate(zip(tu.tree_leaves(grads), values)):
        np.testing.assert_array_equal(g, np.full_like(v, i + 1))


def _compiled_inputs(monkeypatch) -> list[int]:
    """Record the number of inputs of each program that jit compiles."""
    seen: list[int] = []
    compile_staged = jit_module.compile_staged

    def spy(ir, name, *rest):
        seen.append(len(ir.in_vars))
        return compile_staged(ir, name, *rest)
    monkeypatch.setattr(jit_module, "compile_staged", spy)
    return seen


def test_jit_passes_only_the_leaves_it_reads(monkeypatch):
    seen = _compiled_inputs(monkeypatch)
    params = {f"p{i:05d}": enp.full((3,), float(i)) for i in range(20000)}

    @ember.jit
    def two(p, scale):
        unused = p["p00007"] * 3  # (dead code: its input is not read either)
        del unused
        return p["p00001"] * p["p19999"] * scale
    start = time.perf_counter()
    out = two(params, 2.0)
    first_call = time.perf_counter() - start
    assert seen == [3]  # p00001, p19999 and scale
    np.testing.assert_array_equal(out, np.full(3, 2.0 * 19999))
    params["p00001"] = enp.full((3,), 5.0)  # the fast path (same signature) passes the right leaves
    np.testing.assert_array_equal(two(params, 1.0), np.full(3, 5.0 * 19999))
    assert seen == [3]
    assert first_call < 30  # (about 1 s; every leaf a parameter took 4 s at 20000 leaves, 10 s at 100000)
    # inlined into another function, it still takes every leaf in the user's order
    np.testing.assert_array_equal(ember.jit(lambda p: two(p, 1.0) + 1)(params), np.full(3, 5.0 * 19999 + 1))


def test_jit_reading_no_argument(monkeypatch):
    seen = _compiled_inputs(monkeypatch)
    f = ember.jit(lambda x, y: enp.arange(3.0))
    np.testing.assert_array_equal(f(enp.ones(2), {"a": enp.ones(4)}), np.arange(3.0))
    np.testing.assert_array_equal(f(enp.ones(2), {"a": enp.ones(4)}), np.arange(3.0))
    assert seen == [0]


def _grad_over_many_leaves(n: int) -> None:
    params = {f"p{i:05d}": enp.full((3,), (i % 7) / 7.0) for i in range(n)}

    def loss(p):
        return sum(enp.sum(x * x) * (1 + i % 2) for i, x in enumerate(tu.tree_leaves(p)))
    grads = ember.grad(loss)(params)
    assert tu.tree_structure(grads) == tu.tree_structure(params)
    for i, (g, x) in enumerate(zip(tu.tree_leaves(grads), tu.tree_leaves(params))):
        np.testing.assert_allclose(g, 2 * np.asarray(x) * (1 + i % 2), rtol=1e-6)


def test_grad_over_many_leaves():
    _grad_over_many_leaves(300)


@pytest.mark.slow
def test_grad_over_5000_leaves():
    _grad_over_many_leaves(5000)
