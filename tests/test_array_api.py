"""Details of the Python array API standard that its conformance suite checks (the suite is not a test dependency:
tools/array_api_conformance.py runs it, docs/conformance.md has the results), each against numpy or jax.numpy."""
import inspect

import jax.numpy as jnp
import numpy as np
import pytest

import ember.numpy as enp

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")


def test_namespace_info_and_signatures_match_jax_numpy():
    assert enp.__array_namespace_info__().default_dtypes() == jnp.__array_namespace_info__().default_dtypes()
    assert list(inspect.signature(enp.reshape).parameters)[:3] == ["a", "shape", "order"]
    x = np.arange(6.0, dtype=np.float32)
    assert enp.reshape(x, (2, 3)).shape == enp.reshape(x, shape=(2, 3)).shape == (2, 3)
    assert enp.reshape(x, newshape=(3, 2)).shape == (3, 2)  # (numpy 1's name, still taken)


def test_matrix_rank_with_one_rtol_per_matrix():
    m = np.random.default_rng(0).normal(size=(3, 4, 4)).astype(np.float32)
    m[1, :, 0] = m[1, :, 1]
    m[2, :2] = 0
    rtol = np.array([1e-6, 0.5, 1e-6], np.float32)
    np.testing.assert_array_equal(np.asarray(enp.linalg.matrix_rank(m, rtol=rtol)),
                                  np.linalg.matrix_rank(m, rtol=rtol))
