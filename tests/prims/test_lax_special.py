"""Oracle tests for the special functions added to ember.lax (special.py): bessel_i0e/i1e, zeta, the incomplete
gamma family (igamma, igammac, igamma_grad_a, random_gamma_grad) and betainc. Every one has a Case below; values
come from scipy (and JAX where scipy has none), derivatives from JAX and finite differences."""
import jax
import jax.lax as jlax
import jax.numpy as jnp
import jax.random as jr
import numpy as np
import pytest
import scipy.special as sps

import ember
import ember.numpy as enp
from ember import lax
from ember import random as er
from oracle import Case, oracle_tests
from recorded import jax_result
from lax_oracles import F, S1, G1, _np, _const, A_GAMMA, _gamma_grad_a_np, _random_gamma_grad_np


def _random_gamma(lib, log_space, to_numpy=False):
    """jax.random's random_gamma_p (ember.random's, or JAX's: the oracle) on key data k and a: the samples (their
    derivative in a is the implicit reparameterisation, not the derivative of the sampler's arithmetic, so finite
    differences are no oracle; second derivatives in a need random_gamma_grad's in a, which neither has)."""
    def run(k, a):
        if lib is er:
            return er.random_gamma_p.bind(k, a, log_space=log_space)
        return jr.random_gamma_p.bind(jr.wrap_key_data(jnp.asarray(k)), a, log_space=log_space)
    if to_numpy:  # (the forward oracle, recorded; jitted: JAX runs the sampler op by op eagerly)
        return lambda k, a: jax_result(lambda: jax.jit(run)(k, a))
    return run


CASES = [
    # ember/random/_samplers.py: key data (one key, or one per row of a) and a
    Case("random_gamma", _random_gamma(er, False), _random_gamma(jr, False, True), [((2,), (3,)), ((2, 2), (2, 3))],
         F, jax=_random_gamma(jr, False), arg_dtypes=["uint32", None], domain="positive", finite_differences=False,
         jacobians=False, rtol=1e-6),
    Case("random_gamma", _random_gamma(er, True), _random_gamma(jr, True, True), [((2,), (3,))], ["float32"],
         jax=_random_gamma(jr, True), arg_dtypes=["uint32", None], domain="positive", finite_differences=False,
         jacobians=False, rtol=1e-6, name="random_gamma_log"),
    # special.py
    Case("bessel_i0e", lax.bessel_i0e, _np(sps.i0e), S1, F, jax=jlax.bessel_i0e),
    Case("bessel_i1e", lax.bessel_i1e, _np(sps.i1e), S1, F, jax=jlax.bessel_i1e),
    Case("zeta", lambda q: lax.zeta(_const(q, 2.5), q), lambda q: sps.zeta(2.5, q).astype(q.dtype), S1, F,
         domain="positive"),  # (JAX does not differentiate zeta: finite differences are the oracle)
    Case("igamma", lambda x: lax.igamma(_const(x, A_GAMMA), x), lambda x: sps.gammainc(A_GAMMA, x).astype(x.dtype),
         S1, F, jax=lambda x: jlax.igamma(jnp.full_like(x, A_GAMMA), x), grad_shapes=G1, domain="positive"),
    Case("igammac", lambda x: lax.igammac(_const(x, A_GAMMA), x),
         lambda x: sps.gammaincc(A_GAMMA, x).astype(x.dtype), S1, F,
         jax=lambda x: jlax.igammac(jnp.full_like(x, A_GAMMA), x), grad_shapes=G1, domain="positive"),
    Case("igamma_grad_a", lambda x: lax.igamma_grad_a(_const(x, A_GAMMA), x), _gamma_grad_a_np, S1, ["float64"],
         grad_shapes=G1, domain="positive", rtol=1e-7),
    Case("random_gamma_grad", lambda x: lax.random_gamma_grad(_const(x, A_GAMMA), x), _random_gamma_grad_np, S1,
         ["float64"],
         grad_shapes=G1, domain="positive", rtol=1e-7),
    Case("regularized_incomplete_beta", lambda x: lax.betainc(_const(x, 2.5), _const(x, 1.5), lax.mul(x, 0.45)),
         lambda x: sps.betainc(2.5, 1.5, x * 0.45).astype(x.dtype), S1, F,
         jax=lambda x: jlax.betainc(jnp.full_like(x, 2.5), jnp.full_like(x, 1.5), x * 0.45), grad_shapes=G1,
         domain="positive"),
]


test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)


def _rel(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    both = np.isfinite(want)
    assert np.array_equal(np.isnan(got), np.isnan(want)), (got, want)
    return np.max(np.abs(got[both] - want[both]) / np.maximum(np.abs(want[both]), 1e-300), initial=0.0)


@pytest.mark.usefixtures("ember_x64")  # (float64 inputs, against float64 references)
@pytest.mark.slow  # (the Cases above cover each function by default)
def test_incomplete_gamma_wide_range():
    rng = np.random.default_rng(0)
    a = np.concatenate([rng.uniform(0.05, 30, 60), [0.5, 2.0, 1.0, -1.0, 3.0, np.nan, 300.0]])
    x = np.concatenate([rng.uniform(0, 40, 60), [0.0, np.inf, 1e-8, 1.0, -1.0, 2.0, 310.0]])
    p, q, grad_a, sample_grad = ember.jit(lambda a, x: (lax.igamma(a, x), lax.igammac(a, x), lax.igamma_grad_a(a, x),
                                                        lax.random_gamma_grad(a, x)))(a, x)
    assert _rel(p, sps.gammainc(a, x)) < 1e-12
    assert _rel(q, sps.gammaincc(a, x)) < 1e-11
    finite = np.isfinite(x) & (x > 0) & (a > 0)
    assert _rel(np.asarray(grad_a)[finite], jlax.igamma_grad_a(a[finite], x[finite])) < 1e-10
    assert _rel(np.asarray(sample_grad)[finite], jlax.random_gamma_grad(a[finite], x[finite])) < 1e-10
    assert np.asarray(grad_a)[x == np.inf] == 0.0  # P(a, inf) = 1 for every a (JAX gives NaN)


@pytest.mark.usefixtures("ember_x64")  # (float64 inputs, against float64 references)
@pytest.mark.slow  # (the Cases above cover each function by default)
def test_betainc_wide_range_and_edges():
    rng = np.random.default_rng(1)
    a, b, x = rng.uniform(0.1, 20, 80), rng.uniform(0.1, 20, 80), rng.uniform(0, 1, 80)
    a = np.concatenate([a, [1.0, 2.0, 2.0, -1.0, 2.0]])
    b = np.concatenate([b, [1.0, 3.0, 3.0, 2.0, 2.0]])
    x = np.concatenate([x, [0.0, 1.0, 1.5, 0.5, np.nan]])
    assert _rel(lax.betainc(a, b, x), sps.betainc(a, b, x)) < 1e-11
    f32 = lax.betainc(*(v.astype(np.float32) for v in (a, b, x)))
    assert np.asarray(f32).dtype == np.float32
    assert np.nanmax(np.abs(np.asarray(f32) - sps.betainc(a, b, x))) < 1e-5


@pytest.mark.usefixtures("ember_x64")  # (float64 inputs, against float64 references)
@pytest.mark.slow  # (the Cases above cover each function by default)
def test_bessel_and_zeta_wide_range():
    x = np.linspace(-60, 60, 241)
    assert _rel(lax.bessel_i0e(x), sps.i0e(x)) < 1e-14
    assert _rel(lax.bessel_i1e(x), sps.i1e(x)) < 1e-13
    q = np.linspace(0.1, 30, 50)
    assert _rel(lax.zeta(np.full_like(q, 3.5), q), sps.zeta(3.5, q)) < 1e-12
    assert np.asarray(lax.bessel_i0e(np.float16(3.0))).dtype == np.float16


@pytest.mark.usefixtures("ember_x64")  # (float64 inputs, against float64 references)
@pytest.mark.slow
def test_igamma_derivative_in_a():
    """d/da igamma = igamma_grad_a (first order, reverse and forward), against JAX and finite differences."""
    a, x = np.array([0.7, 1.7, 3.0, 5.0]), np.array([0.4, 2.5, 1.0, 9.0])
    for fn, jfn, ref in ((lax.igamma, jlax.igamma, sps.gammainc),):  # (igammac's rule is its negation)
        got = ember.jit(ember.grad(lambda a: enp.sum(fn(a, x))))(a)
        want = np.asarray(ember.jit(lambda a: ember.jvp(lambda a: fn(a, x), (a,), (enp.ones_like(a),))[1])(a))
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
        import jax
        np.testing.assert_allclose(np.asarray(got), jax.grad(lambda a: jnp.sum(jfn(a, x)))(a), rtol=1e-9)
        h = 1e-6
        np.testing.assert_allclose(np.asarray(got), (ref(a + h, x) - ref(a - h, x)) / (2 * h), rtol=1e-6)


def test_refused_derivatives_name_the_argument():
    x = np.array([0.5, 1.5])
    with pytest.raises(TypeError, match="igamma_grad_a: not differentiable with respect to a"):
        ember.grad(lambda a: enp.sum(lax.igamma_grad_a(a, x)))(x)
    with pytest.raises(TypeError, match="igamma_grad_a: not differentiable with respect to a"):
        ember.grad(lambda a: enp.sum(ember.grad(lambda b: enp.sum(lax.igamma(b, x)))(a)))(x)
    with pytest.raises(TypeError, match="random_gamma_grad: not differentiable with respect to a"):
        ember.grad(lambda a: enp.sum(lax.random_gamma_grad(a, x)))(x)
    with pytest.raises(TypeError, match="zeta: not differentiable with respect to x"):
        ember.grad(lambda s: enp.sum(lax.zeta(s, x + 1)))(x + 2)
    with pytest.raises(TypeError, match="betainc: not differentiable with respect to b"):
        ember.grad(lambda b: enp.sum(lax.betainc(x, b, x / 2)))(x)
