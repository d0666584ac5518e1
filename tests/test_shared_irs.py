"""IRs shared by ember's caches (the transformed templates of ember._api.templates, their views, the IRs a
jitted function keeps per signature) are SharedIRs: reassigning or changing their parts in place is an error, so
a later call cannot change what an earlier one cached. Their compiled program can still be kept on them."""
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._api import templates
from ember._api.templates import SharedIR

RNG = np.random.default_rng(0)


def _snapshot() -> dict:
    """Each cached template's printed form and parts, by cache key."""
    return {key: (str(entry.ir), list(entry.ir.outs), list(entry.ir.eqns), entry.ir.out_tree)
            for key, entry in templates._transformed.items()}


def _loss(w):
    def loss(x):
        return enp.sum(enp.tanh(x @ w) * 2.0)
    return loss


def _expected_grad(w, x):
    return (2.0 * (1.0 - np.tanh(x @ w) ** 2)) @ w.T


def test_a_shared_template_is_not_changed_by_later_calls():
    ember.clear_caches()
    w1, w2 = (RNG.standard_normal((3, 2)).astype(np.float32) for _ in range(2))
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(ember.grad(_loss(w1))(x)), _expected_grad(w1, x), rtol=1e-5)
    before = _snapshot()
    assert before  # the gradient's template
    # later calls of the same structure (fresh closures over other arrays), and transformations built on it
    np.testing.assert_allclose(np.asarray(ember.grad(_loss(w2))(x)), _expected_grad(w2, x), rtol=1e-5)
    value, grads = ember.value_and_grad(_loss(w2))(x)
    np.testing.assert_allclose(np.asarray(grads), _expected_grad(w2, x), rtol=1e-5)
    ember.jvp(_loss(w2), (x,), (np.ones_like(x),))
    ember.vmap(ember.grad(_loss(w2)))(np.stack([x, 2 * x]))
    after = _snapshot()
    for key, parts in before.items():
        assert after[key][0] == parts[0]
        assert all(a is b for a, b in zip(after[key][1], parts[1])) and len(after[key][1]) == len(parts[1])
        assert all(a is b for a, b in zip(after[key][2], parts[2])) and len(after[key][2]) == len(parts[2])
        assert after[key][3] == parts[3]
    np.testing.assert_allclose(np.asarray(ember.grad(_loss(w1))(x)), _expected_grad(w1, x), rtol=1e-5)


def test_templates_and_their_views_refuse_changes():
    ember.clear_caches()
    w = RNG.standard_normal((3, 2)).astype(np.float32)
    ember.grad(_loss(w))(np.ones((4, 3), np.float32))
    (entry,) = templates._transformed.values()
    template = entry.ir
    view = templates.with_consts(template, template.in_vars[:0])
    for ir in (template, view):
        assert isinstance(ir, SharedIR)
        with pytest.raises(AttributeError, match="cannot be reassigned"):
            ir.outs = []
        with pytest.raises(AttributeError, match="cannot be reassigned"):
            ir.out_tree = None
        for change in (lambda: ir.outs.append(ir.outs[0]), lambda: ir.eqns.pop(),
                       lambda: ir.in_vars.__setitem__(0, ir.in_vars[0]), lambda: ir.consts.extend([1.0])):
            with pytest.raises(TypeError, match="cannot be changed in place"):
                change()
    assert len(view.in_vars) == len(template.in_vars) and view.eqns == template.eqns  # reads are a list's


def test_compiled_programs_are_still_kept_on_shared_irs():
    ir = ember.make_ir(lambda x: enp.sin(x) * 2.0)(np.ones(3, np.float32))
    assert isinstance(ir, SharedIR)  # jit keeps it per signature and hands it out again
    compiled = ember.compile(ir)
    assert ir.compiled is compiled and ember.compile(ir) is compiled
    np.testing.assert_allclose(np.asarray(compiled(np.ones(3, np.float32))), 2 * np.sin(np.ones(3)), rtol=1e-6)
    ember.clear_caches()
    assert ir.compiled is None


def test_grad_of_a_staged_ir_builds_a_new_ir():
    ir = ember.stage_out(lambda x, y: enp.sum(x * y), np.ones(3, np.float32), np.ones(3, np.float32))
    printed = str(ir)
    gir = ember.grad(ir, argnums=(1, 0))
    assert str(ir) == printed and gir is not ir
    x, y = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    gy, gx = ember.compile(gir)(x, y)
    np.testing.assert_allclose(np.asarray(gy), x)
    np.testing.assert_allclose(np.asarray(gx), y)
