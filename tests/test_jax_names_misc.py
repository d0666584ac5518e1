"""Small public names of JAX 0.10.2 that ember has, each compared with JAX: ShapeDtypeStruct.like, Array.committed and
jax.example_libraries.optimizers' helpers."""
import numpy as np
import pytest

import ember
import ember.example_libraries.optimizers as eopt
import ember.numpy as enp

jax = pytest.importorskip("jax")
jopt = pytest.importorskip("jax.example_libraries.optimizers")
pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")


@pytest.mark.parametrize("make", [lambda m: m.numpy.ones((2, 3)), lambda m: np.ones(3), lambda m: 3.0, lambda m: 7,
                                  lambda m: np.int8(3), lambda m: m.ShapeDtypeStruct((2,), np.int32),
                                  lambda m: m.numpy.arange(4.0).astype(m.numpy.bfloat16)])
def test_shape_dtype_struct_like(make):
    got, want = ember.ShapeDtypeStruct.like(make(ember)), jax.ShapeDtypeStruct.like(make(jax))
    assert (got.shape, got.dtype, got.weak_type) == (want.shape, want.dtype, want.weak_type)


def test_shape_dtype_struct_like_keeps_an_array_s_sharding():
    x = ember.device_put(enp.ones(4), ember.devices()[0])
    assert ember.ShapeDtypeStruct.like(x).sharding == x.sharding
    with pytest.raises(TypeError, match="ShapeDtypeStruct.like"):
        ember.ShapeDtypeStruct.like(object())


def test_committed_as_jax():
    for m in (ember, jax):
        x = m.numpy.ones(3)
        assert not x.committed and m.device_put(x, m.devices()[0]).committed
        assert not (x + 1).committed


def test_optimizers_helpers_as_jax():
    pairs = [(1, "a"), (2, "b")]
    assert eopt.unzip2(pairs) == jopt.unzip2(pairs)
    assert eopt.safe_map(lambda a, b: a * b, [1, 2], [3, 4]) == jopt.safe_map(lambda a, b: a * b, [1, 2], [3, 4])
    assert eopt.safe_zip([1, 2], "ab") == jopt.safe_zip([1, 2], "ab") == eopt.zip([1, 2], "ab")
    assert eopt.map is eopt.safe_map and eopt.Step is jopt.Step is int
    for module in (eopt, jopt):
        with pytest.raises(ValueError, match="length"):
            module.safe_zip([1], [2, 3])
        with pytest.raises(ValueError):
            module.safe_map(lambda a, b: a, [1], [2, 3])
