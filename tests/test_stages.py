"""Ahead-of-time stages as JAX's (docs/aot.md): jit(f).trace -> Traced, .lower() -> Lowered, .compile() ->
Compiled, ShapeDtypeStruct and eval_shape; each compared with JAX's for the same functions."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._runtime.backends import get_client

RNG = np.random.default_rng(0)
PARAMS = {"w": RNG.standard_normal((8, 16)).astype(np.float32), "b": RNG.standard_normal(16).astype(np.float32)}
X = RNG.standard_normal((4, 8)).astype(np.float32)


def layer(np_, p, x, scale):
    return np_.tanh(x @ p["w"] + p["b"]).sum(axis=0) * scale


def structs(tree):
    return jax.tree_util.tree_map(lambda s: (tuple(s.shape), np.dtype(s.dtype).name), tree)


def test_the_stages_match_jax_with_pytrees_statics_and_shape_structs():
    f = ember.jit(lambda p, x, scale: layer(enp, p, x, scale), static_argnums=2)
    g = jax.jit(lambda p, x, scale: layer(jnp, p, x, scale), static_argnums=2)
    x_struct = ember.ShapeDtypeStruct((4, 8), np.float32)
    traced = f.trace(PARAMS, x_struct, 3.0)
    jtraced = g.trace(PARAMS, jax.ShapeDtypeStruct((4, 8), np.float32), 3.0)
    assert structs(traced.out_info) == structs(jtraced.out_info)
    assert structs(traced.args_info) == structs(jtraced.args_info)
    assert isinstance(traced.jaxpr, ember.IR) and "tanh" in str(traced.jaxpr)
    ember.check_ir(traced.jaxpr)
    lowered = traced.lower()
    assert isinstance(lowered, ember.stages.Lowered) and isinstance(lowered, ember.Lowered)
    assert str(lowered.in_tree) == str(g.lower(PARAMS, X, 3.0).in_tree)
    assert structs(lowered.out_info) == structs(jtraced.out_info)
    compiled = lowered.compile()
    assert isinstance(compiled, ember.stages.Compiled)
    got = compiled(PARAMS, X)  # (the static argument left out, as in JAX)
    np.testing.assert_allclose(np.asarray(got), np.asarray(g(PARAMS, X, 3.0)), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(compiled.call({k: enp.asarray(v) for k, v in PARAMS.items()}, X)),
                               np.asarray(got), rtol=1e-6)
    assert structs(compiled.out_info) == structs(jtraced.out_info)


def test_a_compiled_function_checks_its_arguments_naming_the_leaf():
    compiled = ember.jit(lambda p, x: layer(enp, p, x, 1.0)).lower(PARAMS, X).compile()
    with pytest.raises(TypeError, match=r"argument 0\['b'\]: expected f32\[16\], got f32\[15\]"):
        compiled({"w": PARAMS["w"], "b": np.ones(15, np.float32)}, X)
    with pytest.raises(TypeError, match=r"argument 1: expected f32\[4,8\], got f16\[4,8\]"):
        compiled(PARAMS, X.astype(np.float16))
    with pytest.raises(TypeError, match=r"expected 2 arguments \(a pytree of 2 arrays, f32\[4,8\]\), got 1"):
        compiled(PARAMS)
    with pytest.raises(TypeError, match=r"expected 2 arguments .* got 3 \(static arguments are left out"):
        compiled(PARAMS, X, X)
    with pytest.raises(TypeError, match="structure"):
        compiled({"w": PARAMS["w"]}, X)
    with pytest.raises(TypeError, match=r"keyword arguments \[\], got \['z'\]"):
        compiled(PARAMS, X, z=1)


def test_keyword_arguments_are_named():
    compiled = ember.jit(lambda x, *, lr: x * lr).lower(X, lr=np.float32(0.5)).compile()
    np.testing.assert_allclose(np.asarray(compiled(X, lr=np.float32(2.0))), X * 2.0, rtol=1e-6)
    with pytest.raises(TypeError, match=r"keyword argument 'lr': expected f32\[\], got f32\[2\]"):
        compiled(X, lr=np.ones(2, np.float32))


def test_cost_and_memory_analysis():
    m, k, n = 32, 64, 16
    a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
    compiled = ember.jit(lambda a, b: a @ b).lower(a, b).compile()
    cost = compiled.cost_analysis()
    assert cost["flops"] == 2 * m * n * k
    jcost = jax.jit(lambda a, b: a @ b).lower(a, b).compile().cost_analysis()
    assert cost["flops"] == jcost["flops"] and cost["bytes accessed"] == jcost["bytes accessed"]
    assert ember.jit(lambda a, b: a @ b).lower(a, b).cost_analysis()["flops"] == 2 * m * n * k
    memory = compiled.memory_analysis()
    assert memory.argument_size_in_bytes == 4 * (m * k + k * n) and memory.output_size_in_bytes == 4 * m * n
    assert memory["peak_memory_in_bytes"] >= memory.output_size_in_bytes


def test_the_optimized_hlo_shows_xlas_fusions():
    compiled = ember.jit(lambda p, x: layer(enp, p, x, 2.0)).lower(PARAMS, X).compile()
    text = compiled.as_text()
    assert text.startswith("HloModule") and "ENTRY %" in text
    assert " fusion(" in text and "kind=kLoop" in text and "calls=%" in text
    assert "dot(" in text and "f32[4,8]{1,0}" in text  # shapes with XLA's layouts
    assert "stablehlo" not in text


def test_the_lowered_text_parses_back_and_compiles():
    lowered = ember.jit(lambda p, x: layer(enp, p, x, 2.0)).lower(PARAMS, X)
    text = lowered.as_text()
    assert text == lowered.as_text(dialect="stablehlo") and "stablehlo.tanh" in text
    executable = get_client().compile(text)  # the module text alone compiles
    assert executable.num_outputs == 1
    with pytest.raises(ValueError, match="dialect"):
        lowered.as_text(dialect="hlo")



def test_compiler_options_are_xla_options_of_one_compile():
    """As JAX's: compile(compiler_options=...) passes XLA options to this compile (an option of another platform
    is accepted, as XLA's debug options are one set); an unknown option is JAX's JaxRuntimeError."""
    lowered = ember.jit(lambda p, x: layer(enp, p, x, 2.0)).lower(PARAMS, X)
    want = np.asarray(lowered.compile()(PARAMS, X))
    for options in ({"xla_cpu_enable_fast_math": False}, {"xla_gpu_autotune_level": "0"},
                    {"xla_cpu_enable_fast_math": False, "xla_cpu_fast_math_honor_nans": True}):
        np.testing.assert_allclose(np.asarray(lowered.compile(compiler_options=options)(PARAMS, X)), want,
                                   rtol=1e-6)
    with pytest.raises(ember.errors.JaxRuntimeError, match="No such compile option"):
        lowered.compile(compiler_options={"an option that does not make sense": "bad value"})
    with pytest.raises(TypeError, match="must be a bool, int, float or str"):
        lowered.compile(compiler_options={"xla_cpu_enable_fast_math": [1]})


def test_stages_of_transformed_functions():
    loss = lambda p, x: enp.sum(layer(enp, p, x, 1.0) ** 2)  # noqa: E731
    jloss = lambda p, x: jnp.sum(layer(jnp, p, x, 1.0) ** 2)  # noqa: E731
    compiled = ember.jit(ember.grad(loss)).lower(PARAMS, ember.ShapeDtypeStruct((4, 8), np.float32)).compile()
    got, want = compiled(PARAMS, X), jax.grad(jloss)(PARAMS, X)
    for key in PARAMS:
        np.testing.assert_allclose(np.asarray(got[key]), np.asarray(want[key]), rtol=2e-5, atol=1e-6)
    batched = ember.jit(ember.vmap(lambda x: layer(enp, PARAMS, x, 1.0))).lower(np.stack([X, X])).compile()
    np.testing.assert_allclose(np.asarray(batched(np.stack([X, -X]))),
                               np.asarray(jax.vmap(lambda x: layer(jnp, PARAMS, x, 1.0))(np.stack([X, -X]))),
                               rtol=1e-5)


@pytest.mark.parametrize("fun", [
    lambda np_, x, y: (x @ y.T, np_.concatenate([x, y]).sum(0)),
    lambda np_, x, y: {"mean": np_.mean(x * 2, axis=1), "int": (x > 0).astype(np_.int32)},
    lambda np_, x, y: np_.where(x > 0, x, y)[None, ::2] + 1,
], ids=["tuple", "dict", "broadcast"])
def test_eval_shape_matches_jax_and_compiles_nothing(fun, programs):
    x = ember.ShapeDtypeStruct((3, 4), np.float32)  # (a mix: a struct and an array)
    got = ember.eval_shape(lambda a, b: fun(enp, a, b), x, np.ones((3, 4), np.float32))
    want = jax.eval_shape(lambda a, b: fun(jnp, a, b), jax.ShapeDtypeStruct((3, 4), np.float32),
                          np.ones((3, 4), np.float32))
    assert structs(got) == structs(want)
    assert programs == []


def test_shape_dtype_struct():
    s = ember.ShapeDtypeStruct([2, 3], "float32")
    assert s.shape == (2, 3) and s.dtype == np.float32 and s.ndim == 2 and s.size == 6
    assert s == ember.ShapeDtypeStruct((2, 3), np.float32) and hash(s) == hash(ember.ShapeDtypeStruct((2, 3), "f4"))
    assert repr(s) == "ShapeDtypeStruct(shape=(2, 3), dtype=float32)"
    with pytest.raises(ValueError, match="dimensions must be >= 0"):
        ember.ShapeDtypeStruct((2, -1), np.float32)
    with pytest.raises(TypeError, match="dtype is required"):
        ember.ShapeDtypeStruct((2,), None)
    # a call needs data, as in JAX
    with pytest.raises(TypeError, match=r"expected an array f32\[2,3\], got a value of type ShapeDtypeStruct"):
        ember.jit(lambda a: a)(s)
    assert ember.eval_shape(lambda a: a.astype(np.int8), s) == ember.ShapeDtypeStruct((2, 3), np.int8)


def test_args_info_holds_jax_arginfos_with_donation():
    def f(a, b, c):
        return a + 1, b["k"] * 2

    args = (np.ones(3, np.float32), {"k": np.ones(2, np.int32)}, 2.0)
    ours = ember.jit(f, donate_argnums=(0,), static_argnums=2)
    theirs = jax.jit(f, donate_argnums=(0,), static_argnums=2)
    for stage, jstage in [(ours.trace(*args), theirs.trace(*args)), (ours.lower(*args), theirs.lower(*args)),
                          (ours.lower(*args).compile(), theirs.lower(*args).compile())]:
        infos = jax.tree_util.tree_leaves(stage.args_info)
        jinfos = jax.tree_util.tree_leaves(jstage.args_info)
        assert all(isinstance(i, ember.stages.ArgInfo) for i in infos)
        assert [(i.shape, i.dtype, i.donated) for i in infos] == [(i.shape, i.dtype, i.donated) for i in jinfos]
        assert [repr(i) for i in infos] == [repr(i) for i in jinfos]
    assert ember.stages.CompilerOptions == jax.stages.CompilerOptions
    for name in ("__call__", "trace", "lower"):
        assert hasattr(ember.stages.Wrapped, name) and hasattr(ours, name)
    assert [n for n in dir(jax.stages) if not n.startswith("_") and not hasattr(ember.stages, n)] == []
