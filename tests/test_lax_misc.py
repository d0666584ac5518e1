"""jax.lax's small names side by side with JAX 0.10.2: dce_sink, stage, shape_as_value, psend/precv (GPU-only in JAX:
the same kind of error on the CPU), platform_dependent's errors and lowering, and the composite op."""
import subprocess
import sys

import jax
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax
from recorded import jax_result


# ---------------------------------------------------------------------------------------------------------------
# dce_sink
def test_dce_sink_in_a_loop_body_compiles_in_a_fresh_process():
    # (a loop whose body has an effect is ordered among the body's callbacks by the callback handler's copies: the
    # handler must be made known to the plugin first, which a process that never lowered a callback had not done)
    out = subprocess.run([sys.executable, "-c", (
        "import ember; from ember import lax\n"
        "f = lambda x: lax.scan(lambda c, _: (lax.dce_sink(c) or c * 2, None), x, None, length=3)[0]\n"
        "print(float(ember.jit(f)(1.0)))")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.split() == ["8.0"], out.stderr[-2000:]


def test_dce_sink_keeps_its_operand_and_returns_none_as_jax():
    x = np.arange(3.0, dtype=np.float32)
    assert lax.dce_sink(enp.asarray(x)) is None and jax.lax.dce_sink(x) is None
    ir = ember.make_jaxpr(lambda x: (lax.dce_sink({"a": x * 2, "b": x}), x)[1])(x)
    assert [e.prim.name for e in ir.eqns] == ["mul", "dce_sink", "dce_sink"]  # (one per leaf, as JAX's tree_map)
    jaxpr = jax.make_jaxpr(lambda x: (jax.lax.dce_sink({"a": x * 2, "b": x}), x)[1])(x)
    assert [e.primitive.name for e in jaxpr.eqns] == ["mul", "dce_sink", "dce_sink"]
    f = ember.jit(lambda x: (lax.dce_sink(x * 2, prevent_mlir_dce=True), x + 1)[1])
    np.testing.assert_array_equal(np.asarray(f(x)), x + 1)
    assert "stablehlo.custom_call" in f.lower(x).as_text()  # (the module keeps x * 2 too)
    assert "custom_call" not in ember.jit(lambda x: (lax.dce_sink(x * 2), x)[1]).lower(x).as_text()
    np.testing.assert_array_equal(np.asarray(ember.vmap(lambda x: (lax.dce_sink(x * 2), x + 1)[1])(x)), x + 1)


# ---------------------------------------------------------------------------------------------------------------
# composite
def _tangent(lax_):
    return lambda x, **kw: lax_.composite(lambda y, **_: lax_.sin(y) / lax_.cos(y), "my.tangent", version=2)(x, **kw)


def test_composite_values_and_module_as_jax():
    """The values of the decomposition, eagerly and under jit; the module holds one stablehlo.composite naming the
    decomposition's private function, with JAX's attributes (None left out) and version."""
    x = np.array([0.0, 0.5, 1.0], np.float32)
    want = jax_result(lambda: jax.jit(_tangent(jax.lax))(x))
    np.testing.assert_allclose(np.asarray(_tangent(lax)(x)), np.asarray(want), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ember.jit(_tangent(lax))(x)), np.asarray(want), rtol=1e-6)
    attrs = dict(a=1.5, b="s", c=np.array([1, 2], np.int32), d=True, e=None, f=(1, 2))
    text = ember.jit(lambda x: _tangent(lax)(x, **attrs)).lower(x).as_text()
    jtext = jax.jit(lambda x: _tangent(jax.lax)(x, **attrs)).lower(x).as_text()
    for needle in ('"my.tangent"', "decomposition = @my.tangent", "version = 2 : i32", "a = 1.5", 'b = "s"',
                   "c = dense<[1, 2]> : tensor<2xi32>", "d = true"):
        assert needle in text and needle in jtext, needle
    assert ", e = " not in text and ", e = " not in jtext
    ir = ember.make_jaxpr(_tangent(lax))(x)
    assert [e.prim.name for e in ir.eqns] == ["composite"] and ir.eqns[0].params["name"] == "my.tangent"
    nested = ember.jit(lambda x: lax.composite(lambda y: _tangent(lax)(y) * 2, "my.outer")(x))
    np.testing.assert_allclose(np.asarray(nested(x)), np.asarray(want) * 2, rtol=1e-6)
    assert nested.lower(x).as_text().count('"stablehlo.composite"') == 2
    # pytrees in and out; arrays it closes over become operands (as JAX's consts)
    out = lax.composite(lambda d, s: (d["x"] + np.arange(3.0, dtype=np.float32), s), "my.tree")({"x": x}, 1.0)
    np.testing.assert_allclose(np.asarray(out[0]), x + np.arange(3.0))
    assert float(out[1]) == 1.0


@pytest.mark.parametrize("lib", [lax, jax.lax], ids=["ember", "jax"])
def test_composite_errors_as_jax(lib):
    """No derivative (ValueError pointing at custom_jvp), no batching (NotImplementedError), traced attributes
    and closed-over tracers refused, an op name that is not namespaced refused when lowered."""
    jit, grad, vmap = (ember.jit, ember.grad, ember.vmap) if lib is lax else (jax.jit, jax.grad, jax.vmap)
    tangent = _tangent(lib)
    x = np.array([0.0, 0.5, 1.0], np.float32)
    with pytest.raises(ValueError, match="JVP rule for composite not implemented"):
        (ember.jvp if lib is lax else jax.jvp)(tangent, (x,), (x,))
    with pytest.raises(ValueError, match="rule for composite not implemented"):
        grad(lambda x: tangent(x).sum())(x)
    with pytest.raises(NotImplementedError, match="Batching rule for 'composite' not implemented"):
        vmap(tangent)(np.ones((2, 3), np.float32))
    error = ember.errors.UnexpectedTracerError if lib is lax else jax.errors.UnexpectedTracerError
    with pytest.raises(error, match="as an attribute in the decomposition"):
        jit(lambda x: lib.composite(lambda y, a: y + a, "my.add")(x, a=x))(x)
    with pytest.raises(error, match="as a constant in the decomposition"):
        jit(lambda x: lib.composite(lambda y: y + x, "my.add")(x))(x)
    with pytest.raises(ValueError, match="valid namespaced op name"):
        jit(lambda x: lib.composite(lambda y: y, "plain")(x))(x)


def test_composite_in_exported_artifacts():
    """An exported function with a composite serializes (module_check accepts stablehlo.composite and its
    decomposition's symbol) and runs after deserialization."""
    x = np.array([0.0, 0.5, 1.0], np.float32)
    exported = ember.export.export(ember.jit(_tangent(lax)))(x)
    assert '"stablehlo.composite"' in exported.mlir_module()
    again = ember.export.deserialize(exported.serialize())
    np.testing.assert_allclose(np.asarray(again.call(x)), np.tan(x), rtol=1e-6)
    from ember._hlo.module_check import ModuleError, check_module
    bad = exported.mlir_module().replace("decomposition = @my.tangent", "decomposition = @elsewhere")
    with pytest.raises(ModuleError, match="not a function of the module"):
        check_module(bad)


# ---------------------------------------------------------------------------------------------------------------
# stage, shape_as_value
def test_stage_lifts_into_the_trace_as_jax():
    """Outside any trace an array (a number keeps its weak type); under one the tracer of the value, binding no
    equation (a closed-over constant becomes the trace's); anything else is JAX's TypeError."""
    for value in (2, np.float64(2.0), True, np.arange(3)):
        with ember.config.override(enable_x64=False), jax.enable_x64(False):  # (both in their default mode)
            got, want = lax.stage(value), jax.lax.stage(value)
        assert isinstance(got, ember.Array)
        assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type), value
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    x = enp.ones(2)
    assert lax.stage(x) is x
    assert [e.prim.name for e in ember.make_jaxpr(lambda x: lax.stage(x) * 2)(1.0).eqns] == ["mul"]
    assert [e.primitive.name for e in jax.make_jaxpr(lambda x: jax.lax.stage(x) * 2)(1.0).eqns] == ["mul"]
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda x: lax.stage(np.arange(3.0)) * x)(2.0)), [0, 2, 4])
    assert float(ember.grad(lambda x: lax.stage(x) * 3)(1.0)) == float(jax_result(
        lambda: jax.grad(lambda x: jax.lax.stage(x) * 3)(1.0)))
    np.testing.assert_array_equal(np.asarray(ember.vmap(lambda x: lax.stage(x) + 1)(np.ones(2))), [2, 2])
    for lib in (lax, jax.lax):
        with pytest.raises(TypeError, match="Error interpreting argument to stage as a JAX value"):
            lib.stage("a")


def test_shape_as_value_as_jax():
    for shape in ((2, 3), (2**31, 3), (5,)):
        got, want = lax.shape_as_value(shape), jax.lax.shape_as_value(shape)
        assert type(got) is np.ndarray and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    empty = lax.shape_as_value(())
    assert isinstance(empty, ember.Array) and empty.shape == (0,) and empty.dtype == jax.lax.shape_as_value(()).dtype
    for lib in (lax, jax.lax):
        with pytest.raises(TypeError):
            lib.shape_as_value(3)


# ---------------------------------------------------------------------------------------------------------------
# psend / precv: GPU-only in JAX
@pytest.mark.parametrize("lib", [lax, jax.lax], ids=["ember", "jax"])
def test_psend_and_precv_raise_on_the_cpu_as_jax(lib):
    """Outside a shard_map psend's axis is unbound (JAX's NameError); inside one, on the CPU, psend and precv are
    JAX's NotImplementedError ("only implemented on GPU"), raised when ember calls them and when JAX lowers them."""
    shard_map, P = (ember.shard_map, ember.P) if lib is lax else (jax.shard_map, jax.sharding.PartitionSpec)
    jit = ember.jit if lib is lax else jax.jit
    mesh = (ember if lib is lax else jax).make_mesh((1,), ("x",))
    x = np.arange(4.0, dtype=np.float32)
    with pytest.raises(NameError, match="unbound axis name: x"):
        lib.psend(x, "x", [(0, 0)])
    send = shard_map(lambda v: (lib.psend(v, "x", [(0, 0)]), v)[1], mesh=mesh, in_specs=P(), out_specs=P())
    with pytest.raises(NotImplementedError, match="psend is currently only implemented on GPU"):
        jit(send)(x)
    struct = (ember if lib is lax else jax).ShapeDtypeStruct((4,), np.float32)
    receive = shard_map(lambda v: lib.precv(lib.create_token(), struct, "x", [(0, 0)]), mesh=mesh, in_specs=P(),
                        out_specs=P())
    with pytest.raises(NotImplementedError, match="precv is currently only implemented on GPU"):
        jit(receive)(x)


# ---------------------------------------------------------------------------------------------------------------
# platform_dependent (its values under every transformation: the platform_index Case of tests/prims/test_control.py)
@pytest.mark.parametrize("lib", [lax, jax.lax], ids=["ember", "jax"])
def test_platform_dependent_errors_as_jax(lib):
    jit = ember.jit if lib is lax else jax.jit
    x = np.ones(3, np.float32)
    with pytest.raises(NotImplementedError, match=r"platform_index\(platforms=\(\('tpu',\),\)\)"):
        lib.platform_dependent(x, tpu=lambda x: x + 1)
    with pytest.raises(NotImplementedError, match=r"platform_index\(platforms=\(\('tpu',\),\)\)"):
        jit(lambda x: lib.platform_dependent(x, tpu=lambda x: x + 1))(x)
    with pytest.raises(ValueError, match="Use 'cuda' or 'rocm' for lax.platform_dependent"):
        lib.platform_dependent(x, gpu=lambda x: x)
    with pytest.raises(TypeError, match="the 'cpu' branch must be a callable"):
        lib.platform_dependent(x, cpu=3)
    with pytest.raises(TypeError, match="the 'default' branch must be a callable"):
        lib.platform_dependent(x, cpu=lambda x: x, default=3)
    np.testing.assert_array_equal(np.asarray(lib.platform_dependent(x, cuda=lambda x: x + 1, default=lambda x: x - 1)),
                                  x - 1)
    assert lib.platform_dependent(cpu=lambda: 1, default=lambda: 2) == 1


def test_platform_dependent_lowers_the_chosen_branch_alone():
    """As JAX: every branch is staged (the IR holds platform_index and a cond of all of them), but the module
    holds the CPU's branch alone, with no conditional; identical branches are joined into one."""
    x = np.ones(3, np.float32)
    f = lambda x: lax.platform_dependent(x, cpu=lambda x: x + 1, tpu=lambda x: x * 2, default=lambda x: x - 1)  # noqa
    ir = ember.make_jaxpr(f)(x)
    assert [e.prim.name for e in ir.eqns] == ["platform_index", "cond"]
    assert ir.eqns[0].params["platforms"] == (("cpu",), ("tpu",), None) and len(ir.eqns[1].params["branches"]) == 3
    text = ember.jit(f).lower(x).as_text()
    assert "stablehlo.case" not in text and "stablehlo.add" in text and "stablehlo.multiply" not in text
    same = lambda x: x + 1  # noqa: E731
    ir = ember.make_jaxpr(lambda x: lax.platform_dependent(x, cpu=same, cuda=same))(x)
    assert ir.eqns[0].params["platforms"] == (("cpu", "cuda"),)
    jaxpr = jax.make_jaxpr(lambda x: jax.lax.platform_dependent(x, cpu=same, cuda=same))(x)
    assert jaxpr.eqns[0].params["platforms"] == (("cpu", "cuda"),)
