"""The seed design, exactly as specified: stage_out -> printable IR -> compile -> run; grad(ir) -> new IR."""
import numpy as np

import ember
from ember import ShapedArray, compile, grad, stage_out


def f(lhs, rhs):
    return (lhs + rhs) * 2


def test_seed_forward():
    ir = stage_out(f, ShapedArray((1,), "f32"), ShapedArray((1,), "f32"))
    text = str(ir)
    assert "add" in text and "mul" in text and "f32[1]" in text
    out = compile(ir)(np.array([1.0], np.float32), np.array([2.0], np.float32))
    assert isinstance(out, ember.Array)
    np.testing.assert_array_equal(np.asarray(out), np.array([6.0], np.float32))


def test_seed_grad_is_a_new_ir():
    ir = stage_out(f, ShapedArray((1,), "f32"), ShapedArray((1,), "f32"))
    before = str(ir)
    gir = grad(ir)
    assert isinstance(gir, ember.IR) and gir is not ir
    assert str(ir) == before  # the input IR is untouched
    ember.check_ir(gir)
    out = compile(grad(ir))(np.array([1.0], np.float32), np.array([2.0], np.float32))
    np.testing.assert_array_equal(np.asarray(out), np.array([2.0], np.float32))


def test_seed_grad_argnums_tuple():
    ir = stage_out(lambda x, y: x * y * y, ShapedArray((1,), "float32"), ShapedArray((1,), "float32"))
    dx, dy = compile(grad(ir, argnums=(0, 1)))(np.array([3.0], np.float32), np.array([2.0], np.float32))
    np.testing.assert_allclose(np.asarray(dx), [4.0])
    np.testing.assert_allclose(np.asarray(dy), [12.0])


def test_ir_printing_is_readable():
    ir = stage_out(f, ShapedArray((1,), "f32"), ShapedArray((1,), "f32"))
    assert str(ir) == (
        "{ lambda a:f32[1] b:f32[1] . let\n"
        "    c:f32[1] = add a b\n"
        "    d:f32[1] = mul c 2.0:f32\n"
        "  in (d) }")
