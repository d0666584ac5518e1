"""The rule protocol (ember._core.primitive), the lowering context with region lowering, the dce hook, the
compile stages and the bounded caches."""
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import ShapedArray
from ember._core import IR, Eqn, Primitive, Var, check_ir
from ember._core.cache import LRUCache
from ember._prims.elementwise import neg_p
from ember._transforms.passes import dce

F2 = ShapedArray((2,), "f32")


def _unregistered(name="test_op"):
    prim = Primitive(name, register=False)
    prim.def_rule("abstract_eval", lambda x: x)
    return prim


def test_rules_register_once_and_by_known_kind():
    prim = _unregistered()
    with pytest.raises(ValueError, match="unknown rule kind 'transposition'"):
        prim.def_rule("transposition", lambda: None)
    with pytest.raises(ValueError, match="already has a abstract_eval rule"):
        prim.def_rule("abstract_eval", lambda x: x)
    prim.mark("vjp", "not needed here")
    with pytest.raises(ValueError, match="already has a vjp rule"):
        prim.def_rule("vjp", lambda *a: None)
    with pytest.raises(NotImplementedError, match="vmap of primitive 'test_op': not implemented"):
        prim.rule("batching", "vmap")
    with pytest.raises(NotImplementedError, match="reverse mode of primitive 'test_op': not needed here"):
        prim.rule("vjp", "reverse mode")


def test_registered_names_are_unique():
    with pytest.raises(ValueError, match="'add' is already registered"):
        Primitive("add")


def test_a_missing_rule_names_the_primitive_and_transformation():
    prim = _unregistered("opaque")
    prim.def_rule("lowering", lambda ctx, x: [x])
    x, y = Var(F2), Var(F2)
    ir = IR([], [], [x], [Eqn(prim, [x], [y], {})], [y])
    with pytest.raises(NotImplementedError, match="forward-mode differentiation of primitive 'opaque'"):
        ember._transforms.jvp_ir(ir)
    with pytest.raises(NotImplementedError, match="vmap of primitive 'opaque'"):
        ember._transforms.batch_ir(ir, [0], 3)


def test_reductions_lower_their_body_as_a_region():
    ir = ember.stage_out(lambda x: ember.lax.reduce_max(x, (0,)), ShapedArray((3, 2), "f32"))
    text = ember.lower(ir)
    assert '"stablehlo.reduce"' in text and "^bb0(" in text and '"stablehlo.maximum"' in text
    assert '"stablehlo.return"' in text
    x = np.array([[1, 5], [3, 2], [2, 4]], np.float32)
    np.testing.assert_array_equal(np.asarray(ember.compile(ir)(x)), x.max(0))


def test_region_names_do_not_clash_with_the_body():
    def f(x):
        return ember.lax.reduce_sum(x * 2.0, (0,)) + ember.lax.reduce_min(x, (0,))
    ir = ember.stage_out(f, ShapedArray((4, 3), "f32"))
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_allclose(np.asarray(ember.compile(ir)(x)), (x * 2).sum(0) + x.min(0))


def test_check_ir_recurses_into_sub_irs():
    bad_body = IR([], [], [Var(F2)], [], [Var(F2)])  # its output is never defined
    holder = _unregistered("holder")
    x, y = Var(F2), Var(F2)
    ir = IR([], [], [x], [Eqn(holder, [x], [y], {"body": bad_body})], [y])
    with pytest.raises(ember.IRTypeError, match=r"equation 0 \(holder\), in a sub-IR: outputs: variable"):
        check_ir(ir)


def test_dce_hook_shrinks_an_equation_to_its_used_outputs():
    pair = Primitive("pair", multiple_results=True, register=False)
    pair.def_rule("abstract_eval", lambda *xs: list(xs))

    def pair_dce(eqn, used):  # output i needs input i only
        keep = [i for i, u in enumerate(used) if u]
        return Eqn(eqn.prim, [eqn.inputs[i] for i in keep], [eqn.outputs[i] for i in keep], eqn.params)
    pair.def_rule("dce", pair_dce)
    a, b, c, d = (Var(F2) for _ in range(4))
    ir = IR([], [], [a], [Eqn(neg_p, [a], [b], {}),
                          Eqn(pair, [a, b], [c, d], {})], [c])
    kept = dce(ir)
    assert [e.prim.name for e in kept.eqns] == ["pair"]  # b is an input of pair only where its output d is used


def test_stages_lower_then_compile():
    f = ember.jit(lambda x: enp.sin(x) * 2.0)
    lowered = f.lower(np.zeros(3, np.float32))
    assert isinstance(lowered, ember.Lowered) and "stablehlo.sine" in lowered.as_text()
    compiled = lowered.compile()
    assert isinstance(compiled, ember.Compiled)
    np.testing.assert_allclose(np.asarray(compiled(np.ones(3, np.float32))), np.sin(np.ones(3)) * 2, rtol=1e-6)


def test_lru_cache_is_bounded():
    cache = LRUCache(2)
    cache.store("a", 1)
    cache.store("b", 2)
    assert cache.lookup("a") == 1  # a is now the most recent
    cache.store("c", 3)
    assert list(cache) == ["a", "c"]


def test_eager_cache_is_bounded(monkeypatch):
    from ember._runtime import eager
    monkeypatch.setattr(eager, "_eager_cache", LRUCache(3))
    for n in range(1, 6):
        enp.ones(n) + enp.ones(n)
    assert len(eager._eager_cache) == 3


def test_jit_signature_cache_is_bounded():
    from ember._api import caches

    def f(x):
        return x + 1
    g = ember.jit(f)
    with ember.config.override(jit_cache_size=2):
        for n in range(1, 6):
            np.testing.assert_array_equal(np.asarray(g(np.ones(n, np.float32))), np.full(n, 2, np.float32))
        cache = caches.cache_for(f, ("jit", (), ()), "jit(f)")
        # the staged IRs, the compiled programs and the fast path's entries per signature
        assert len(cache.irs) == 2 and len(g._programs) == 2 and len(g._dispatch) == 2


def test_lowerings_tell_each_other_through_the_emitter_only():
    """What one equation's lowering tells another's (a value made by a transpose, the value ordering a body's
    callbacks) lives in the emitter of the body being built, under a declared kind: no module-level table keyed by
    emitter in the lowering layer, and an undeclared kind is refused."""
    import pathlib

    from ember._hlo.emitter import FACT_KINDS, Emitter
    emitter = Emitter()
    with pytest.raises(ValueError, match="unknown lowering fact 'row_of'"):
        emitter.tell("%0", "row_of", None)
    emitter.tell("%1", "transpose_of", ("%0", (1, 0)))
    child = emitter.child()
    assert child.fact("%1", "transpose_of") == ("%0", (1, 0)) and child.effect is None
    assert "transpose_of" in FACT_KINDS
    hlo = pathlib.Path(ember.__file__).parent / "_hlo"
    for path in hlo.glob("*.py"):
        assert "WeakKeyDictionary" not in path.read_text(), path.name
