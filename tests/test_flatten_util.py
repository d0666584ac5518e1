"""ember.flatten_util.ravel_pytree against jax.flatten_util.ravel_pytree: the vector (values, dtype, weak type), the
unravelled tree, the dtype checks of unravel, and both under jit, grad and vmap."""
import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember.flatten_util import ravel_pytree
from recorded import jax_result

jax = pytest.importorskip("jax")
pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")

TREES = {
    "python_scalar": lambda: 1.0,
    "scalars_promoted": lambda: [1.0, 2],
    "one_dtype": lambda: {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": (np.float32(3), [np.ones(2, "f4")])},
    "float64_narrowed": lambda: {"a": np.linspace(0, 1, 3)},
    "ints_and_floats": lambda: {"a": np.ones(2, np.float32), "b": np.int8(3), "c": np.arange(3, dtype=np.int32)},
    "half_precisions": lambda: [np.float16(1.5), np.array([2.5, 3.0], ml_dtypes.bfloat16)],
    "ints_signed_unsigned": lambda: [np.array([1, 2], np.int8), np.array([3], np.uint8)],
    "bools_and_ints": lambda: (np.array([True, False]), np.int32(7)),
    "complex_and_real": lambda: [np.array([1 + 2j], np.complex64), 1.5],
    "empty": lambda: {"a": [], "b": ()},
}


def _ravel_summary(ravel, tree):
    flat, unravel = ravel(tree)
    back = unravel(flat)
    return (np.asarray(flat), str(flat.dtype), bool(getattr(flat, "weak_type", False)),
            [(np.asarray(leaf), str(leaf.dtype)) for leaf in jax.tree_util.tree_leaves(back)])


@pytest.mark.parametrize("name", sorted(TREES))
def test_ravel_pytree_as_jax(name):
    from jax.flatten_util import ravel_pytree as jax_ravel
    ours = _ravel_summary(ravel_pytree, TREES[name]())
    theirs = jax_result(lambda: _ravel_summary(jax_ravel, TREES[name]()))
    assert ours[1:3] == theirs[1:3], (ours, theirs)
    np.testing.assert_array_equal(ours[0], theirs[0])
    assert [dtype for _, dtype in ours[3]] == [dtype for _, dtype in theirs[3]]
    for (a, _), (b, _) in zip(ours[3], theirs[3]):
        np.testing.assert_array_equal(a, b)


def test_unravel_keeps_one_dtype_and_checks_several():
    flat, unravel = ravel_pytree({"a": np.ones(2, np.float32)})
    assert unravel(flat.astype(np.float16))["a"].dtype == np.float16  # one dtype: any vector (JAX issue 7809)
    flat, unravel = ravel_pytree({"a": np.ones(2, np.float32), "b": np.int8(3)})
    with pytest.raises(TypeError, match="unravel function given array of dtype float16, but expected dtype float32"):
        unravel(flat.astype(np.float16))
    with pytest.raises(TypeError, match="unravel function given array of dtype float16, but expected dtype float32"):
        from jax.flatten_util import ravel_pytree as jax_ravel
        jax_flat, jax_unravel = jax_ravel({"a": np.ones(2, np.float32), "b": np.int8(3)})
        jax_unravel(jax_flat.astype(np.float16))


def test_unravel_is_hashable_by_structure():
    params = {"w": np.ones((2, 3), np.float32), "b": np.zeros(3, np.float32)}
    _, first = ravel_pytree(params)
    _, second = ravel_pytree({"w": np.full((2, 3), 5, np.float32), "b": np.ones(3, np.float32)})
    _, other = ravel_pytree({"w": np.ones((3, 2), np.float32), "b": np.zeros(3, np.float32)})
    assert first == second and hash(first) == hash(second) and first != other
    flat, _ = ravel_pytree(params)
    out = ember.jit(lambda f, unravel: unravel(f)["w"].sum(), static_argnums=1)(flat, first)
    assert float(out) == 6.0


def test_ravel_pytree_under_jit_grad_and_vmap():
    params = {"w": enp.arange(6.0).reshape(2, 3), "b": enp.array([1.0, -1.0, 0.5])}
    flat, unravel = ravel_pytree(params)
    np.testing.assert_array_equal(ember.jit(lambda p: ravel_pytree(p)[0])(params), flat)

    def loss(p):
        return enp.sum(enp.tanh(p["w"]) * p["b"])

    direct = ember.grad(loss)(params)
    through_flat = ember.grad(lambda f: loss(unravel(f)))(flat)
    np.testing.assert_allclose(through_flat, ravel_pytree(direct)[0], rtol=1e-5, atol=1e-6)
    through_ravel = ember.grad(lambda p: enp.sum(ravel_pytree(p)[0] ** 2))(params)
    np.testing.assert_allclose(ravel_pytree(through_ravel)[0], 2 * flat, rtol=1e-6)
    batch = enp.stack([flat, 2 * flat, 3 * flat])
    unbatched = ember.vmap(unravel)(batch)
    assert unbatched["w"].shape == (3, 2, 3) and unbatched["b"].shape == (3, 3)
    np.testing.assert_allclose(ember.vmap(lambda p: ravel_pytree(p)[0])(unbatched), batch)
    np.testing.assert_allclose(ember.jit(ember.vmap(unravel))(batch)["b"][2], 3 * params["b"])
