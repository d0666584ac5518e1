"""ember.passes: the IR -> IR passes, listed and run one by one; each keeps the IR's values (checked by compiling
before and after) and type-checks."""
import numpy as np
import pytest

import ember
import ember.numpy as enp


def _prims(ir):
    return [e.prim.name for e in ir.eqns]


def _same_values(a, b, *args):
    for x, y in zip(ember.compile(a).call_flat(list(args)), ember.compile(b).call_flat(list(args))):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-6)


def test_passes_are_listed_and_each_keeps_the_values():
    assert ember.passes.names() == ("cse", "dce", "fold_constants", "simplify")
    c = np.linspace(0.0, 1.0, 4, dtype=np.float32)

    def f(x):
        unused = enp.exp(x) * 3.0  # noqa: F841  (dead)
        k = enp.sin(c) * 2.0       # known: folded into one constant
        s = enp.float32(2.0) * 3.0  # known scalar: a literal
        big = enp.broadcast_to(s, (4, 4))  # known, but 16x its input: stays an equation
        y = enp.cos(x) + enp.cos(x)  # the same cos twice: cse
        _, ys = ember.lax.scan(lambda carry, v: (carry, carry * v), s, k)  # a loop: stays
        return y * k + s + big.sum(0) + ys

    ir = ember.make_ir(f)(np.ones(4, np.float32))
    x = np.arange(4.0, dtype=np.float32)
    for name in ember.passes.names():
        out = ember.passes.run(ir, name)
        assert out.in_avals == ir.in_avals and out.out_avals == ir.out_avals
        _same_values(ir, out, x)
    folded = ember.passes.run(ir, "fold_constants", "dce")
    assert "sin" not in _prims(folded) and "exp" not in _prims(folded)
    assert "broadcast_in_dim" in _prims(folded) and "scan" in _prims(folded)
    assert _prims(ember.passes.run(ir, "cse")).count("cos") == 1
    assert len(ember.passes.run(ir, "simplify").eqns) < len(ir.eqns)
    once = ember.passes.run(ir, "dce")
    assert len(ember.passes.run(once, "dce").eqns) == len(once.eqns) < len(ir.eqns)  # a fixed point at once


def test_fold_constants_keeps_effects_and_derivatives():
    printed = []
    ir = ember.make_ir(lambda x: x + ember.pure_callback(lambda: np.float32(2.0), ember.ShapeDtypeStruct(
        (), np.float32)) + ember.experimental.io_callback(lambda: printed.append(1) or np.float32(1.0),
                                                          ember.ShapeDtypeStruct((), np.float32)))(1.0)
    folded = ember.passes.fold_constants(ir)
    assert "io_callback" in _prims(folded)
    assert not printed  # nothing ran while folding
    # a folded IR is still an IR every transformation takes
    g = ember.grad(ember.passes.fold_constants(ember.make_ir(lambda x: x * enp.sin(2.0))(1.0)))
    np.testing.assert_allclose(float(ember.compile(g)(np.float32(3.0))), np.sin(2.0), rtol=1e-6)


def test_run_names_a_bad_pass():
    ir = ember.make_ir(lambda x: x * 2)(1.0)
    with pytest.raises(ValueError, match="unknown pass 'nope'; the passes are cse, dce"):
        ember.passes.run(ir, "nope")
    with pytest.raises(TypeError, match="expected an IR"):
        ember.passes.run(lambda x: x, "dce")

    def breaks(ir):
        return ember.IR(ir.const_vars, ir.consts, ir.in_vars, [], ir.outs[:0] + [ember._core.Var(ir.outs[0].aval)],
                        ir.out_tree)
    with pytest.raises(TypeError, match="the pass 'breaks' produced an IR that does not type-check"):
        ember.passes.run(ir, breaks)
