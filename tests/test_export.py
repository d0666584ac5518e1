"""ember.export as jax.export (docs/aot.md#export): export a jitted function for argument types, serialize, and
call the deserialized function eagerly, inside jit, under vmap and (to its vjp_order) under grad, in this process
and in a fresh one; clear errors for mismatched arguments, missing VJPs, forward mode and foreign artifacts."""
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RNG = np.random.default_rng(0)
W = RNG.standard_normal((2, 3)).astype(np.float32)
X = RNG.standard_normal((4, 2)).astype(np.float32)


def model(np_, x, d):
    """A pytree in, a pytree out, a closed-over array, an integer output."""
    return {"y": np_.tanh(x @ W) * d["scale"], "positive": (x > 0).sum()}


def exported(vjp_order=1):
    fun = ember.jit(lambda x, d: model(enp, x, d))
    exp = ember.export.export(fun)(ember.ShapeDtypeStruct((4, 2), np.float32), {"scale": np.float32(2.0)})
    return ember.export.deserialize(exp.serialize(vjp_order=vjp_order))


def loss(np_, call, x):
    return np_.sum(call(x, {"scale": np.float32(2.0)})["y"] ** 2)


def test_the_exported_types_and_module():
    exp = ember.export.export(ember.jit(lambda x, d: model(enp, x, d)))(X, {"scale": np.float32(2.0)})
    assert exp.fun_name == "<lambda>" and exp.vjp_order == 0
    assert [a.str_short() for a in exp.in_avals] == ["f32[4,2]", "f32[]"]
    assert [a.str_short() for a in exp.out_avals] == ["i32[]", "f32[4,3]"]  # (dict leaves in key order)
    assert str(exp.in_tree) == "PyTreeDef(((*, {'scale': *}), {}))"
    text = exp.mlir_module()
    assert "func.func public @main(%arg0: tensor<4x2xf32>, %arg1: tensor<f32>)" in text  # W is inside the module
    assert "stablehlo.dot_general" in text


def test_calls_match_the_function_eagerly_in_jit_and_under_vmap():
    restored = exported()
    want = model(jnp, X, {"scale": np.float32(2.0)})
    got = restored.call(X, {"scale": np.float32(2.0)})
    np.testing.assert_allclose(np.asarray(got["y"]), np.asarray(want["y"]), rtol=1e-6)
    assert int(got["positive"]) == int(want["positive"])
    in_jit = ember.jit(lambda x: restored.call(x, {"scale": np.float32(2.0)})["y"] + 1.0)(X)
    np.testing.assert_allclose(np.asarray(in_jit), np.asarray(want["y"]) + 1.0, rtol=1e-6)
    xs = np.stack([X, -X, 2 * X])
    batched = ember.vmap(lambda x: restored.call(x, {"scale": np.float32(2.0)})["y"])(xs)
    expected = jax.vmap(lambda x: model(jnp, x, {"scale": np.float32(2.0)})["y"])(xs)
    np.testing.assert_allclose(np.asarray(batched), np.asarray(expected), rtol=1e-6)


def test_grad_to_the_exported_order():
    want = jax.grad(lambda x: loss(jnp, lambda a, d: model(jnp, a, d), x))(X)
    once = exported(vjp_order=1)
    np.testing.assert_allclose(np.asarray(ember.grad(lambda x: loss(enp, once.call, x))(X)), np.asarray(want),
                               rtol=2e-5, atol=1e-6)
    twice = exported(vjp_order=2)
    hvp = ember.grad(lambda x: enp.sum(ember.grad(lambda y: loss(enp, twice.call, y))(x) * X))(X)
    jhvp = jax.grad(lambda x: jnp.sum(jax.grad(lambda y: loss(jnp, lambda a, d: model(jnp, a, d), y))(x) * X))(X)
    np.testing.assert_allclose(np.asarray(hvp), np.asarray(jhvp), rtol=1e-4, atol=1e-5)
    with pytest.raises(TypeError, match=r"vjp_order=0.*serialize\(vjp_order=1\)"):
        ember.grad(lambda x: loss(enp, exported(vjp_order=0).call, x))(X)
    with pytest.raises(TypeError, match=r"vjp_order=0"):  # the second order was not exported
        ember.grad(lambda x: enp.sum(ember.grad(lambda y: loss(enp, once.call, y))(x)))(X)
    with pytest.raises(NotImplementedError, match="forward-mode differentiation of an exported function"):
        ember.jvp(lambda x: once.call(x, {"scale": np.float32(2.0)})["y"], (X,), (X,))


def test_a_fresh_export_is_differentiable_without_serializing():
    exp = ember.export.export(ember.jit(lambda x, d: model(enp, x, d)))(X, {"scale": np.float32(2.0)})
    want = jax.grad(lambda x: loss(jnp, lambda a, d: model(jnp, a, d), x))(X)
    np.testing.assert_allclose(np.asarray(ember.grad(lambda x: loss(enp, exp.call, x))(X)), np.asarray(want),
                               rtol=2e-5, atol=1e-6)


def test_a_fresh_process_loads_and_runs_the_artifact(tmp_path):
    path = tmp_path / "model.ember"
    path.write_bytes(exported(vjp_order=1).serialize(vjp_order=1))
    code = textwrap.dedent(f"""
        import numpy as np, ember, ember.numpy as enp
        restored = ember.export.deserialize(open({str(path)!r}, "rb").read())
        x = np.asarray({X.tolist()!r}, np.float32)
        out = restored.call(x, {{"scale": np.float32(2.0)}})
        g = ember.grad(lambda v: enp.sum(restored.call(v, {{"scale": np.float32(2.0)}})["y"] ** 2))(x)
        j = ember.jit(lambda v: restored.call(v, {{"scale": np.float32(2.0)}})["y"])(x)
        print(repr(np.asarray(out["y"]).tolist()), int(out["positive"]))
        print(repr(np.asarray(g).tolist()))
        print(repr(np.asarray(j).tolist()))
    """)
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    y_line, g_line, j_line = done.stdout.strip().splitlines()
    want = model(jnp, X, {"scale": np.float32(2.0)})
    np.testing.assert_allclose(np.asarray(eval(y_line.rsplit(" ", 1)[0])), np.asarray(want["y"]), rtol=1e-6)
    assert int(y_line.rsplit(" ", 1)[1]) == int(want["positive"])
    np.testing.assert_allclose(np.asarray(eval(j_line)), np.asarray(want["y"]), rtol=1e-6)
    want_g = jax.grad(lambda x: loss(jnp, lambda a, d: model(jnp, a, d), x))(X)
    np.testing.assert_allclose(np.asarray(eval(g_line)), np.asarray(want_g), rtol=2e-5, atol=1e-6)


def test_mismatched_arguments_and_bad_artifacts_are_clear_errors():
    restored = exported()
    with pytest.raises(TypeError, match=r"must be f32\[4,2\], got f32\[4,3\]"):
        restored.call(np.ones((4, 3), np.float32), {"scale": np.float32(2.0)})
    with pytest.raises(TypeError, match="structure"):
        restored.call(X, np.float32(2.0))
    blob = exported().serialize(vjp_order=1)
    with pytest.raises(ValueError, match="not an ember exported artifact"):
        ember.export.deserialize(b"PK" + blob)
    with pytest.raises(ValueError, match="corrupt or truncated"):
        ember.export.deserialize(blob[:len(blob) // 2])
    with pytest.raises(ValueError, match="format 99 is not supported"):
        ember.export.deserialize(blob.replace(b'"format":1', b'"format":99'))
    with pytest.raises(ValueError, match="cannot be serialized with vjp_order=3"):
        restored.serialize(vjp_order=3)
    assert ember.export.deserialize(restored.serialize(vjp_order=0)).vjp_order == 0
    with pytest.raises(ValueError, match="CPU platform only"):
        ember.export.export(ember.jit(lambda x: x), platforms=["cuda"])


def test_custom_pytree_nodes_cannot_be_serialized():
    point = ember.tree_util.Partial(lambda a: a, np.ones(2, np.float32))
    exp = ember.export.export(ember.jit(lambda p: p.args[0] * 2))(point)
    with pytest.raises(TypeError, match="cannot be serialized"):
        exp.serialize()
    np.testing.assert_array_equal(np.asarray(exp.call(point)), [2, 2])  # (calling it in process works)
