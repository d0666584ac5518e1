"""Outside jit, the autodiff APIs see concrete values, as in JAX: Python control flow on values works, without a
new compiled program per call. Inside jit and vmap the same code is a clear error."""
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._api import caches, running
from ember._runtime import eager


def piecewise(x):
    if x < 3:
        return x ** 2
    return 3.0 * x


def doubling(x):
    steps = 0
    while x < 10.0:  # the trip count depends on the value
        x = x * 2.0
        steps += 1
    return x


def test_grad_of_value_dependent_branches():
    g = ember.grad(piecewise)
    assert float(g(2.0)) == 4.0 and float(g(4.0)) == 3.0
    assert float(ember.grad(ember.grad(piecewise))(2.0)) == 2.0
    assert float(ember.value_and_grad(piecewise)(1.0)[1]) == 2.0


def test_loops_with_value_dependent_trip_counts():
    assert float(ember.grad(doubling)(1.5)) == 8.0  # 1.5 -> 12 in three doublings
    assert float(ember.grad(doubling)(6.0)) == 2.0


def test_vjp_jvp_and_jacobians_see_values():
    out, pullback = ember.vjp(piecewise, 4.0)
    assert float(out) == 12.0 and float(pullback(1.0)[0]) == 3.0
    assert float(ember.jvp(piecewise, (2.0,), (1.0,))[1]) == 4.0
    assert float(ember.jacrev(piecewise)(5.0)) == 3.0  # vjp sees values; vmap of the pullback needs none
    with pytest.raises(ember.ConcretizationTypeError, match="in jvp"):
        ember.jacfwd(piecewise)(2.0)  # as in JAX: jacfwd is vmap of jvp, and vmap is abstract
    out, f_jvp = ember.linearize(piecewise, 1.0)
    assert float(f_jvp(1.0)) == 2.0


def test_conversions_that_would_drop_a_derivative_are_refused():
    # as JAX: bool() of a known value is fine (control flow); float() or np.asarray of a float value being
    # differentiated would silently lose its derivative, so they raise even outside jit
    for convert in (lambda x: float(x.sum()), lambda x: np.asarray(x).sum(), lambda x: x.sum().item()):
        with pytest.raises(ember.ConcretizationTypeError, match="would drop its derivative"):
            ember.grad(lambda x: enp.sum(x * convert(x)))(np.ones(3))
    # integer values carry no derivative: int() and indexing with them work
    assert float(ember.grad(lambda x: x * int(enp.argmax(enp.stack([x, 2 * x]))))(1.0)) == 1.0


def test_the_fallback_compiles_no_program_per_call():
    def f(x):
        return enp.sin(x) if x.sum() > 0 else enp.cos(x)
    g = ember.grad(lambda x: enp.sum(f(x)))
    g(np.ones(3, np.float32))  # discovers the fallback
    g(-np.ones(3, np.float32))  # and the ops of the other branch
    programs, executables = len(running._compiled_irs), len(eager._eager_cache)
    for sign in (1.0, -1.0, 2.0, -3.0):
        expected = np.cos(sign) if sign > 0 else -np.sin(sign)
        np.testing.assert_allclose(np.asarray(g(np.full(3, sign, np.float32))), expected, rtol=1e-6)
    assert len(running._compiled_irs) == programs
    assert len(eager._eager_cache) == executables  # both branches' ops were already compiled, one op each


def test_functions_without_value_dependence_stay_compiled():
    g = ember.grad(lambda x: enp.sum(enp.sin(x)))
    g(np.ones(2))
    cache = caches.cache_for(g.__wrapped__, ("grad", 0, False, False, False), "")  # (holomorphic=False)
    assert not cache.needs_values and len(cache.executables) == 1


def test_under_jit_and_vmap_it_is_an_error_naming_the_value():
    with pytest.raises(ember.ConcretizationTypeError,
                       match=r"(?s)bool\(\) of a traced value bool\[\] in jit\(piecewise\) \(it depends on the "
                             r"value of argument x\).*lax.cond"):
        ember.jit(piecewise)(2.0)
    with pytest.raises(ember.ConcretizationTypeError, match=r"in vmap\(piecewise\)"):
        ember.vmap(piecewise)(np.ones(3))
    with pytest.raises(ember.ConcretizationTypeError, match=r"depends on the value of argument x"):
        ember.jit(ember.grad(piecewise))(2.0)


def test_the_error_names_pytree_leaves():
    def f(params, x):
        return x if params["scale"] > 0 else -x
    with pytest.raises(ember.ConcretizationTypeError, match=r"argument params\['scale'\]"):
        ember.jit(f)({"scale": 1.0}, 2.0)
