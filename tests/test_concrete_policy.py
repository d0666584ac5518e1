"""The concrete-value fallback is per signature (ember._api.caches.fallback_per_signature): a value-dependent branch
taken for one signature moves that signature to op-by-op evaluation, while the function's other signatures stay
staged, compiled and cached. Checked for each API that sees values outside jit: grad (call_with_fallback), vjp and
linearize (plan_for), jacrev (compiled_outside_traces)."""
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._api import caches
from ember._core import ConcretizationTypeError


def make_scalar_branches():
    """A fresh function (its caches start empty), value-dependent for scalars only: vectors take a path that
    needs no values."""
    def scalar_branches(x):
        if x.ndim == 0:
            return x ** 2 if x < 3 else 3.0 * x
        return enp.sum(enp.sin(x))
    return scalar_branches


VECTOR = np.linspace(-1.0, 1.0, 3, dtype=np.float32)


def test_fallback_per_signature_marks_only_the_failing_signature():
    needs_values = caches.value_dependent_signatures()
    tried = []

    def abstract(key):
        tried.append(key)
        if key == "value-dependent":
            raise ConcretizationTypeError("a branch on a value")
        return "compiled"

    def call(key):
        return caches.fallback_per_signature(needs_values, key, lambda: abstract(key), lambda: "concrete")

    assert [call("value-dependent"), call("value-dependent"), call("plain"), call("plain")] == \
        ["concrete", "concrete", "compiled", "compiled"]
    assert tried == ["value-dependent", "plain", "plain"]  # a marked signature is not staged abstractly again
    assert list(needs_values) == ["value-dependent"]
    ember.clear_caches()
    assert call("value-dependent") == "concrete" and tried[-1] == "value-dependent"  # forgotten: tried again


def test_other_errors_are_not_a_fallback():
    needs_values = caches.value_dependent_signatures()

    def abstract():
        raise ValueError("a bug, not a value-dependent branch")
    with pytest.raises(ValueError, match="a bug"):
        caches.fallback_per_signature(needs_values, "key", abstract, lambda: "concrete")
    assert not needs_values


def test_grad_keeps_other_signatures_compiled():
    scalar_branches = make_scalar_branches()
    g = ember.grad(scalar_branches)
    cache = caches.cache_for(scalar_branches, ("grad", 0, False, False, False), "")  # (holomorphic=False)
    assert float(g(2.0)) == 4.0 and float(g(4.0)) == 3.0  # the scalar signature: op by op, both branches
    assert len(cache.needs_values) == 1 and len(cache.executables) == 0
    for shift in (0.0, 0.5):
        np.testing.assert_allclose(np.asarray(g(VECTOR + shift)), np.cos(VECTOR + shift), rtol=1e-6)
    assert len(cache.executables) == 1  # the vector signature: compiled once, reused
    assert len(cache.needs_values) == 1
    assert float(g(1.0)) == 2.0


def test_vjp_and_linearize_keep_other_signatures_planned():
    for kind in ("vjp", "linearize"):
        scalar_branches = make_scalar_branches()
        plans = caches.per_function(scalar_branches, kind, caches.PlanCache)
        if kind == "vjp":
            out, pullback = ember.vjp(scalar_branches, 4.0)
            assert float(out) == 12.0 and float(pullback(1.0)[0]) == 3.0
            out, pullback = ember.vjp(scalar_branches, VECTOR)
            np.testing.assert_allclose(np.asarray(pullback(np.float32(1.0))[0]), np.cos(VECTOR), rtol=1e-6)
        else:
            out, f_jvp = ember.linearize(scalar_branches, 1.0)
            assert float(out) == 1.0 and float(f_jvp(1.0)) == 2.0
            out, f_jvp = ember.linearize(scalar_branches, VECTOR)
            np.testing.assert_allclose(float(f_jvp(np.ones(3, np.float32))), np.cos(VECTOR).sum(), rtol=1e-6)
        assert len(plans.needs_values) == 1, kind  # the scalar signature
        assert len(plans) == 1, kind  # the vector signature's plan is cached


def test_jacrev_keeps_other_signatures_compiled():
    scalar_branches = make_scalar_branches()
    jac = ember.jacrev(scalar_branches)
    cache = caches.cache_for(scalar_branches, ("jacrev", 0, False, False), "")  # (holomorphic=False)
    assert float(jac(5.0)) == 3.0 and float(jac(1.0)) == 2.0
    np.testing.assert_allclose(np.asarray(jac(VECTOR)), np.cos(VECTOR), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(jac(2 * VECTOR)), np.cos(2 * VECTOR), rtol=1e-6)
    assert len(cache.needs_values) == 1 and len(cache.executables) == 1


def test_a_value_dependent_signature_stays_an_error_under_jit():
    scalar_branches = make_scalar_branches()
    g = ember.grad(scalar_branches)
    assert float(g(2.0)) == 4.0
    with pytest.raises(ember.ConcretizationTypeError):
        ember.jit(g)(2.0)
    np.testing.assert_allclose(np.asarray(ember.jit(g)(VECTOR)), np.cos(VECTOR), rtol=1e-6)
