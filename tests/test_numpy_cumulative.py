"""ember.numpy's cumulative sums and products against numpy (values) and JAX (dtypes, NaN handling, gradients),
eagerly, under jit and under vmap."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from recorded import jax_result

NAMES = ["cumsum", "cumprod", "nancumsum", "nancumprod"]


pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")


def _same(got, want, rtol=1e-6):
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64), rtol=rtol,
                               equal_nan=True)
    assert np.dtype(got.dtype) == np.dtype(want.dtype), (got.dtype, want.dtype)


# float32 (every axis) for each function by default, and every other one of int8, bool and float16 (alternating
# over the functions); int32 and uint8 and the rest with -m slow
@pytest.mark.parametrize("name,dtype", [
    pytest.param(name, dtype, id=f"{name}-{dtype}",
                 marks=() if dtype == "float32" or (dtype in ("int8", "bool", "float16") and (i + k) % 2 == 0)
                 else pytest.mark.slow)
    for k, name in enumerate(NAMES)
    for i, dtype in enumerate(["float32", "int8", "int32", "uint8", "bool", "float16"])])
def test_values_and_dtypes(name, dtype):
    x = np.array([[1.0, 2.0, np.nan, -1.0], [0.5, 3.0, 1.0, 2.0]], np.float32)
    if dtype not in ("float32", "float16"):
        x = np.nan_to_num(x)
    x = x.astype(dtype)
    e, j = getattr(enp, name), getattr(jnp, name)
    for axis in (None, 0, 1, -1) if dtype == "float32" else (None, 1):  # (the axes are dtype-blind)
        _same(e(x, axis=axis), jax_result(lambda: j(x, axis=axis)), rtol=1e-3 if dtype == "float16" else 1e-6)
    _same(ember.jit(lambda x: e(x, axis=1))(x), jax_result(lambda: j(x, axis=1)),
          rtol=1e-3 if dtype == "float16" else 1e-6)
    _same(e(x, axis=0, dtype="float32"), jax_result(lambda: j(x, axis=0, dtype="float32")), rtol=1e-3)


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
def test_array_api(name):
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int16)
    e, j = getattr(enp, name), getattr(jnp, name)
    for include_initial in (False, True):
        _same(e(x, axis=1, include_initial=include_initial),
              jax_result(lambda: j(x, axis=1, include_initial=include_initial)))
        _same(e(x[0], include_initial=include_initial), jax_result(lambda: j(x[0], include_initial=include_initial)))
    with pytest.raises(ValueError, match=f"{name}: axis is required"):
        e(x)


@pytest.mark.parametrize("name", NAMES)
def test_gradients_and_vmap(name):
    x = np.random.default_rng(0).uniform(0.5, 1.5, size=(3, 5)).astype(np.float32)
    e, j = getattr(enp, name), getattr(jnp, name)
    g = ember.grad(lambda x: enp.sum(e(x, axis=1) ** 2))(x)
    np.testing.assert_allclose(np.asarray(g), jax_result(lambda: jax.grad(lambda x: jnp.sum(j(x, axis=1) ** 2))(x)),
                               rtol=1e-5)
    np.testing.assert_allclose(np.asarray(ember.vmap(lambda r: e(r))(x)),
                               jax_result(lambda: jax.vmap(lambda r: j(r))(x)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(enp.asarray(x).cumsum(axis=0)), np.cumsum(x, axis=0), rtol=1e-6)
