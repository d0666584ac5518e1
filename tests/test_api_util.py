"""ember.api_util against jax.api_util: the argument bookkeeping of jit-like wrappers (argnums_partial,
donation_vector, rebase_donate_argnums, flatten_axes) and safe_map, on the same inputs, with JAX's errors."""
import numpy as np
import pytest

import jax
import jax.api_util
import jax.extend.linear_util as jlu

import ember
import ember.api_util as api_util
import ember.extend.linear_util as lu

TREES = [((1, (2, 3)), {"k": 4, "j": 5}), ((np.ones(2), [3, {"a": 4}]), {}), ((), {"x": (1, 2)})]


def test_names_match_jax():
    assert [n for n in dir(jax.api_util) if not n.startswith("_") and not hasattr(api_util, n)] == []


def test_safe_map_as_jax():
    for mine, theirs in [(api_util.safe_map, jax.api_util.safe_map)]:
        assert mine(lambda a, b: a + b, [1, 2], (3, 4)) == theirs(lambda a, b: a + b, [1, 2], (3, 4)) == [4, 6]
        assert mine(str, range(3)) == theirs(str, range(3))
        for args in ([[1, 2], [1]], [[1], [1, 2]], [[1, 2], [1, 2], []]):
            with pytest.raises(ValueError) as ours:
                mine(lambda *a: a, *args)
            with pytest.raises(ValueError) as jaxs:
                theirs(lambda *a: a, *args)
            assert str(ours.value) == str(jaxs.value)


@pytest.mark.parametrize("tree", TREES)
def test_donation_vector_as_jax(tree):
    ours = ember.tree_util.tree_structure(tree)
    theirs = jax.tree_util.tree_structure(tree)
    for nums, names in [((0,), ("k",)), ((), ("x", "j")), ((0, 1), ()), ((), ())]:
        assert api_util.donation_vector(nums, names, ours) == jax.api_util.donation_vector(nums, names, theirs)
    args_only = ember.tree_util.tree_structure(tree[0]), jax.tree_util.tree_structure(tree[0])
    assert api_util.donation_vector((1,), (), args_only[0], kws=False) == \
        jax.api_util.donation_vector((1,), (), args_only[1], kws=False)


def test_rebase_donate_argnums_as_jax():
    for donate, static in [((3, 4), (0, 1)), ((0, 2), ()), ((), (1,)), ((5, 1, 1), (0, 3)), ((2,), (4,))]:
        assert api_util.rebase_donate_argnums(donate, static) == jax.api_util.rebase_donate_argnums(donate, static)
    with pytest.raises(ValueError, match="cannot intersect"):
        api_util.rebase_donate_argnums((1,), (1,))


def test_flatten_axes_as_jax():
    for tree, axes in [(((1, (2, 3)), {"a": 4}), (0, {"a": None})), ((1, (2, 3)), (0, 1)), ((1, (2, 3)), 0),
                       ((1, (2, 3)), (None, (1, 0))), (([1, 2], 3), ([None, 0], 1))]:
        assert api_util.flatten_axes("in_axes", ember.tree_util.tree_structure(tree), axes) == \
            jax.api_util.flatten_axes("in_axes", jax.tree_util.tree_structure(tree), axes)
    for tree, axes in [((1, (2, 3)), (0, 1, 2)), ((1, 2), {"a": 0})]:
        with pytest.raises(ValueError, match="vmap in_axes specification must be a tree prefix of the corresponding"):
            api_util.flatten_axes("vmap in_axes", ember.tree_util.tree_structure(tree), axes)
        with pytest.raises(ValueError, match="vmap in_axes specification must be a tree prefix of the corresponding"):
            jax.api_util.flatten_axes("vmap in_axes", jax.tree_util.tree_structure(tree), axes)


def test_argnums_partial_as_jax():
    def f(a, b, c, *, k=0):
        return a * 100 + b * 10 + c + k

    args = (1, 2, 3)
    for nums in [(0, 2), 1, (-1,), ()]:
        g, dyn = api_util.argnums_partial(lu.wrap_init(f), nums, args)
        jg, jdyn = jax.api_util.argnums_partial(
            jlu.wrap_init(f, debug_info=jax.api_util.debug_info("t", f, args, {})), nums, args)
        assert dyn == jdyn
        assert g.call_wrapped(*dyn) == jg.call_wrapped(*jdyn) == 123
        assert g.call_wrapped(*dyn, k=5) == 128
    with pytest.raises(ValueError, match=r"Static argument \(index 1\) of type <class 'list'> for function f is "
                                         "non-hashable"):
        api_util.argnums_partial(lu.wrap_init(f), (0, 2), (1, [2], 3))
    g, dyn = api_util.argnums_partial(lu.wrap_init(lambda a, b: a + b[0]), 0, (1, [2]),
                                      require_static_args_hashable=False)
    assert g.call_wrapped(*dyn) == 3
    with pytest.raises(ValueError, match="must have value greater than or equal to -len"):
        api_util.argnums_partial(lu.wrap_init(f), (5,), args)
