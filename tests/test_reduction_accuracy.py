"""Reductions at least as accurate as JAX's in every form ember lowers them to on the CPU plugin (docs of
ember/_hlo/backend_forms.py and ember/_hlo/row_fusion.py): leading axes in stages, trailing axes by the row kernel,
column regions (the kernel's column sums, in a cascade), row regions, whole arrays; the error of each against
float64, bounded by JAX's error on the same float32 inputs (with a little slack for the order of additions: a
different order is as likely to be better as worse, so the bound is 1.5x JAX's, far below the 5-20x the forms had)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._hlo import row_fusion, targets
from ember._runtime import rows

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")  # float32 in both


def _input(shape, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) + 3).astype(np.float32)


def _error(value, exact):
    value = np.asarray(value, np.float64)
    return float(np.mean(np.abs(value - exact) / np.maximum(np.abs(exact), 1e-30)))


def _softmax(np_, a):
    e = np_.exp(a - np_.max(a, axis=1, keepdims=True))
    return e / np_.sum(e, axis=1, keepdims=True)


def _layer_norm(np_, a):
    return (a - a.mean(-1, keepdims=True)) / np_.sqrt(a.var(-1, keepdims=True) + 1e-5)


CASES = {  # name -> (shape, the function in numpy style, its float64 value)
    "sum over leading axes (BatchNorm's)": ((8, 56, 56, 64), lambda np_, a: a.sum(axis=(0, 1, 2)), None),
    "mean over leading axes": ((8, 56, 56, 64), lambda np_, a: np_.mean(a, axis=(0, 1, 2)), None),
    "var over leading axes (a column region)": ((8, 56, 56, 64), lambda np_, a: np_.var(a, axis=(0, 1, 2)), None),
    "sum of 2**18 rows of 16": ((1 << 18, 16), lambda np_, a: a.sum(0), None),
    "sum(exp(a), axis=0) (a column region)": ((4096, 256), lambda np_, a: np_.sum(np_.exp(a / 4), axis=0), None),
    "row sums of 4096": ((256, 4096), lambda np_, a: a.sum(1), None),
    "row sums of 1024": ((1024, 1024), lambda np_, a: a.sum(1), None),
    "softmax rows of 10**5": ((24, 100000), lambda np_, a: _softmax(np_, a), None),
    "softmax rows of 1000 (a row region)": ((2048, 1000), lambda np_, a: _softmax(np_, a), None),
    "layer norm rows of 10**5": ((24, 100000), lambda np_, a: _layer_norm(np_, a), None),
    "layer norm rows of 1024 (a row region)": ((2048, 1024), lambda np_, a: _layer_norm(np_, a), None),
    "variance of rows of 10**5": ((24, 100000), lambda np_, a: np_.var(a, axis=1), None),
    "sum of 10**6 (a whole array)": ((10 ** 6,), lambda np_, a: a.sum(), None),
    "whole f32[1000, 1000]": ((1000, 1000), lambda np_, a: a.sum(), None),
    "whole f32[512, 2048]": ((512, 2048), lambda np_, a: a.sum(), None),
}
SCALARS = 12  # inputs whose errors are averaged where the result is one number (its error is a fraction of an ulp;
# elsewhere 3: the mean relative error of a few dozen results still varies by 1.5x from one input to the next)


@pytest.fixture(params=["kernel", "no kernel"], scope="module")  # (switched twice a module: clear_caches is slow)
def kernel(request):
    """With the row kernel (where the C extension runs: AVX-512F, or AVX2 with FMA; the lowering's own thresholds for
    the form that runs), and without it (XLA's ops: any other CPU)."""
    if request.param == "kernel":
        if not targets.available(row_fusion.TARGET):
            pytest.skip("the row kernel is not available here")
        yield
        return
    targets.set_provider(row_fusion.TARGET, lambda: frozenset())
    ember.clear_caches()
    try:
        yield
    finally:
        targets.set_provider(row_fusion.TARGET, rows.provide, rows.reason)
        ember.clear_caches()


@pytest.mark.parametrize("name", list(CASES))
def test_at_least_as_accurate_as_jax(name, kernel):
    shape, fn, _ = CASES[name]
    ours_fn, theirs_fn = ember.jit(lambda a: fn(enp, a)), jax.jit(lambda a: fn(jnp, a))
    ours, theirs = [], []
    for seed in range(SCALARS if "whole" in name or "10**6" in name else 3):
        x = _input(shape, seed)
        exact = fn(np, x.astype(np.float64))
        ours.append(_error(ours_fn(x), exact))
        theirs.append(_error(theirs_fn(x), exact))
    ours, theirs = float(np.mean(ours)), float(np.mean(theirs))
    assert ours <= 1.5 * theirs + 1e-9, f"{name}: ember's error {ours:.2e}, JAX's {theirs:.2e}"
