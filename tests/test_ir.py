"""The IR: printer, type checker, evaluator, passes, pytrees."""
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import ShapedArray
from ember._core import IR, Eqn, Var
from ember._prims import elementwise as ew
from ember._transforms.passes import split_known


def test_shaped_array_dtype_spellings():
    assert ShapedArray((2,), "f32") == ShapedArray((2,), "float32") == ShapedArray([2], np.float32)
    assert ShapedArray((), "bf16").dtype.name == "bfloat16"
    assert ShapedArray((2, 3), "i32").str_short() == "i32[2,3]" and str(ShapedArray((2, 3), "i32")) == "int32[2,3]"
    with pytest.raises(TypeError, match="unknown dtype 'f33'"):
        ShapedArray((1,), "f33")
    with pytest.raises(TypeError, match="shape must be a tuple of non-negative ints"):
        ShapedArray((-1,), "f32")
    with pytest.raises(TypeError, match="not supported by ember"):
        ShapedArray((1,), np.clongdouble)  # (complex64 and complex128 are ember dtypes; complex256 is not)


def test_check_ir_catches_type_errors():
    x = Var(ShapedArray((2,), "f32"))
    y = Var(ShapedArray((3,), "f32"))  # wrong: add of f32[2] gives f32[2]
    with pytest.raises(ember.IRTypeError, match=r"equation 0 \(add\): outputs typed \['f32\[3\]'\]"):
        ember.check_ir(IR([], [], [x], [Eqn(ew.add_p, [x, x], [y], {})], [y]))
    z = Var(ShapedArray((2,), "f32"))
    with pytest.raises(ember.IRTypeError, match="used before it is defined"):
        ember.check_ir(IR([], [], [x], [Eqn(ew.add_p, [x, z], [y], {})], [y]))


def test_eval_ir_matches_compile():
    ir = ember.stage_out(lambda x, y: enp.tanh(x) @ y + 1, ShapedArray((2, 3), "f32"), ShapedArray((3,), "f32"))
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 6
    y = np.ones(3, np.float32)
    np.testing.assert_allclose(np.asarray(ember.eval_ir(ir, x, y)), np.asarray(ember.compile(ir)(x, y)), rtol=1e-6)


def test_stage_out_with_pytrees_and_arrays():
    ir = ember.stage_out(lambda p: {"s": p["a"] + p["b"]}, {"a": ShapedArray((2,), "f32"), "b": np.ones(2, np.float32)})
    out = ember.compile(ir)(np.ones(2, np.float32), np.ones(2, np.float32))
    np.testing.assert_array_equal(np.asarray(out["s"]), [2.0, 2.0])


def test_dce_removes_unused_work():
    ir = ember.stage_out(lambda x: (enp.sin(x), enp.cos(x))[0], ShapedArray((2,), "f32"))
    assert [e.prim.name for e in ember.dce(ir).eqns] == ["sin"]


def test_split_known():
    ir = ember.stage_out(lambda x, y: enp.sin(x) * y, ShapedArray((2,), "f32"), ShapedArray((2,), "f32"))
    known, unknown, n_res = split_known(ir, [False, True], 0)
    assert [e.prim.name for e in known.eqns] == ["sin"] and [e.prim.name for e in unknown.eqns] == ["mul"]
    assert n_res == 1
    ember.check_ir(known)
    ember.check_ir(unknown)


def test_lowering_text_is_stablehlo():
    ir = ember.stage_out(lambda x: enp.sum(x * 2), ShapedArray((4,), "f32"))
    text = ember.lower(ir)
    assert "func.func public @main(%arg0: tensor<4xf32>) -> (tensor<f32>)" in text
    assert '"stablehlo.reduce"' in text


def test_tree_util():
    from ember import tree_util as tu
    tree = {"b": [1, (2, None)], "a": 3}
    leaves, treedef = tu.tree_flatten(tree)
    assert leaves == [3, 1, 2]
    assert tu.tree_unflatten(treedef, [4, 5, 6]) == {"a": 4, "b": [5, (6, None)]}
    assert tu.tree_map(lambda x, y: x + y, tree, tree) == {"a": 6, "b": [2, (4, None)]}
    with pytest.raises(ValueError, match="different structures"):
        tu.tree_map(lambda x, y: x, [1], (1,))


def test_cse_merges_repeated_work():
    from ember._transforms.passes import cse
    ir = ember.stage_out(lambda x: enp.sin(x) * 2.0 + enp.sin(x) * 2.0 + enp.sin(x) * 3.0, ShapedArray((2,), "f32"))
    names = [e.prim.name for e in cse(ir).eqns]
    assert names.count("sin") == 1 and names.count("mul") == 2
    x = np.array([0.5, 1.0], np.float32)
    np.testing.assert_allclose(np.asarray(ember.compile(cse(ir))(x)), np.asarray(ember.compile(ir)(x)))
