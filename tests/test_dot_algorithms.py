"""Dot algorithms as precision= (lax.DotAlgorithm, lax.DotAlgorithmPreset: ember/_prims/dot.py) against JAX 0.10.2
on the CPU: the presets' facts, which presets the CPU runs and which it refuses (ValueError when the dot is lowered),
result dtypes and values, eagerly and under jit, grad, jvp and vmap; convolutions (which take and ignore them), the
numpy contractions, default_matmul_precision; and accuracy= (lax.AccuracyMode, lax.Tolerance) of the
transcendental functions."""
import re

import jax
import ml_dtypes
import numpy as np
import pytest
from jax import lax as jlax

import ember
import ember.numpy as enp
from ember import lax
from ember._prims.dot import algorithm_attr
from recorded import jax_result

PRESETS = [p.name for p in jlax.DotAlgorithmPreset]
CPU_RUNS = ["DEFAULT", "F16_F16_F16", "BF16_BF16_F32", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6", "F32_F32_F32",
            "F64_F64_F64"]
# (lhs shape, rhs shape, dimension numbers): matrix products of every kind but vector . vector, whose narrow forms
# jaxlib's XLA refuses to compile (see test_vector_dot_product_computes)
SHAPES = {"mm": ((3, 5), (5, 4), (((1,), (0,)), ((), ()))), "mv": ((3, 5), (5,), (((1,), (0,)), ((), ()))),
          "bmm": ((2, 3, 5), (2, 5, 4), (((2,), (1,)), ((0,), (0,)))),
          "bvv": ((2, 5), (2, 5), (((1,), (1,)), ((0,), (0,))))}


def _operands(shape_name, dtype, seed=0):
    rng = np.random.default_rng(seed)
    sa, sb, dims = SHAPES[shape_name]
    a, b = rng.normal(size=sa) * 2, rng.normal(size=sb) * 2
    return np.asarray(a).astype(dtype), np.asarray(b).astype(dtype), dims


def _outcome(thunk):
    """thunk()'s value as a numpy array, or the name of the error it raised."""
    try:
        return np.asarray(thunk())
    except (ValueError, TypeError) as err:
        return type(err).__name__


def _assert_same_outcome(got, want, rtol):
    if isinstance(want, str):
        assert got == want
        return
    assert not isinstance(got, str), got
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=rtol)


def test_preset_facts_as_jax():
    assert [p.name for p in lax.DotAlgorithmPreset] == PRESETS
    for name in PRESETS:
        ours, theirs = lax.DotAlgorithmPreset[name], jlax.DotAlgorithmPreset[name]
        assert (str(ours), repr(ours)) == (str(theirs), repr(theirs))

        def dtypes(types):
            return None if types is None else tuple(np.dtype(t) for t in types)
        assert dtypes(ours.supported_lhs_types) == dtypes(theirs.supported_lhs_types), name
        assert dtypes(ours.supported_rhs_types) == dtypes(theirs.supported_rhs_types), name
        want_acc = theirs.accumulation_type
        assert ours.accumulation_type == (None if want_acc is None else np.dtype(want_acc)), name
        for operand in (np.float16, ml_dtypes.bfloat16, np.float32):
            assert dtypes(ours.supported_output_types(operand, operand)) == \
                dtypes(theirs.supported_output_types(operand, operand)), (name, operand)
    algorithm = lax.DotAlgorithm(np.float16, np.float16, np.float32)
    assert algorithm._fields == jlax.DotAlgorithm._fields
    assert algorithm[3:] == jlax.DotAlgorithm(np.float16, np.float16, np.float32)[3:]


@pytest.mark.parametrize("preset", PRESETS)
def test_presets_on_the_cpu_as_jax(preset):
    """Each preset (by name and as a member) runs or raises as JAX's CPU backend: the same result dtype (the
    operands', which a preset does not change) and values, eagerly and under jit."""
    for shape_name, dtype in (("mm", np.float32), ("mv", np.float16), ("bmm", ml_dtypes.bfloat16)):
        a, b, dims = _operands(shape_name, dtype)
        want = jax_result(lambda: _outcome(lambda: jlax.dot_general(a, b, dims, precision=preset)))
        rtol = 1e-6 if dtype == np.float32 else 1e-2
        _assert_same_outcome(_outcome(lambda: lax.dot_general(a, b, dims, precision=preset)), want, rtol)
        member = lax.DotAlgorithmPreset[preset]
        jitted = ember.jit(lambda a, b: lax.dot_general(a, b, dims, precision=member))
        _assert_same_outcome(_outcome(lambda: jitted(a, b)), want, rtol)


@pytest.mark.slow
@pytest.mark.usefixtures("ember_x64")
@pytest.mark.parametrize("preset", PRESETS)
def test_presets_on_the_cpu_as_jax_every_dtype_and_shape(preset):
    for shape_name in SHAPES:
        for dtype in (np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.int32, np.complex64):
            a, b, dims = _operands(shape_name, dtype)
            want = jax_result(lambda: _outcome(lambda: jlax.dot_general(a, b, dims, precision=preset)))
            rtol = 1e-5 if dtype in (np.float32, np.float64, np.complex64) else 1e-2
            _assert_same_outcome(_outcome(lambda: lax.dot_general(a, b, dims, precision=preset)), want, rtol)


def test_a_preset_rounds_the_operands_to_its_dtypes():
    """F16_F16_F16 on float32 operands: both rounded to float16, the float16 result converted back (JAX's
    values); F64_F64_F64 on float32 ones: float64 products, one rounding at the end."""
    a = np.full((2, 3), 1.0 + 2.0 ** -12, np.float32)
    got = lax.dot(a, a.T, precision="F16_F16_F16")
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.full((2, 2), 3.0, np.float32))  # (1 + 2**-12 is 1 in float16)
    np.testing.assert_array_equal(got, jax_result(lambda: jlax.dot(a, a.T, precision="F16_F16_F16")))
    x = np.random.default_rng(3).normal(size=(4, 300)).astype(np.float32)
    exact = (x.astype(np.float64) @ x.T.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(lax.dot(x, x.T, precision="F64_F64_F64"), exact)


def test_unsupported_algorithms_raise_when_lowered_for_the_cpu():
    a = np.ones((3, 4), np.float32)

    def f(x):
        return lax.dot(x, x.T, precision="TF32_TF32_F32")
    assert "TF32_TF32_F32" in str(ember.make_jaxpr(f)(a))  # (staging takes any algorithm, as JAX's)
    with pytest.raises(ValueError, match=re.escape("dot_general: the precision 'TF32_TF32_F32' is not supported by "
                                                   "dot_general on CPU")):
        ember.jit(f).lower(a)
    with pytest.raises(ValueError, match="not supported by dot_general on CPU"):
        f(a)
    with pytest.raises(ValueError, match="not supported by dot_general on CPU"):
        ember.grad(lambda x: f(x).sum())(a)
    algorithm = lax.DotAlgorithm(np.float32, np.float32, np.float32)
    with pytest.raises(ValueError, match="not supported by dot_general on CPU"):
        lax.dot(a, a.T, precision=algorithm)
    assert jax_result(lambda: _outcome(lambda: jlax.dot(a, a.T, precision=jlax.DotAlgorithm(
        np.float32, np.float32, np.float32)))) == "ValueError"


def test_precision_arguments_as_jax():
    a = np.ones((2, 2), np.float32)
    for bad in ("f32_f32_f32", "BOGUS", 3):
        assert _outcome(lambda: lax.dot(a, a, precision=bad)) == "ValueError"
        assert jax_result(lambda: _outcome(lambda: jlax.dot(a, a, precision=bad))) == "ValueError"
    with pytest.raises(TypeError, match="a dot algorithm applies to both operands"):
        lax.dot(a, a, precision=("F32_F32_F32", "F32_F32_F32"))
    # equal algorithms are equal params, however their dtypes are spelled
    spelled = [lax.DotAlgorithm(np.float32, "float32", np.float32),
               lax.DotAlgorithm("float32", np.float32, np.dtype("float32"))]
    ir1, ir2 = (ember.make_jaxpr(lambda x, p=p: lax.dot(x, x, precision=p))(a) for p in spelled)
    assert str(ir1) == str(ir2)


def test_the_algorithm_attribute_as_jax_writes_it():
    """Off the CPU the dot carries #stablehlo.dot_algorithm<...>: its fields as JAX writes them (on the CPU ember
    writes only the conversions, the numbers JAX's CPU computes)."""
    a = np.ones((3, 4), np.float32)
    for preset in ("F16_F16_F16", "BF16_BF16_F32_X3", "BF16_BF16_F32_X6", "F32_F32_F32", "TF32_TF32_F32"):
        text = jax_result(lambda: jax.export.export(jax.jit(lambda x: jlax.dot(x, x.T, precision=preset)),
                                                    platforms=["cuda"])(a).mlir_module())
        want = re.search(r"algorithm = <([^>]*)>", text).group(1)
        got = algorithm_attr(lax.DotAlgorithmPreset[preset], np.dtype(np.float32), np.dtype(np.float32))
        assert got == f"#stablehlo.dot_algorithm<{want}>"
    assert "algorithm" not in ember.jit(lambda x: lax.dot(x, x.T, precision="F16_F16_F16")).lower(a).as_text()


def test_vector_dot_product_computes():
    """A vector . vector product with a narrow preset: jaxlib's XLA does not compile it (JaxRuntimeError: "Algorithm
    not supported by the ElementalIrEmitter"); ember writes no algorithm on the CPU, so it computes it."""
    a = np.arange(5, dtype=np.float32) / 3
    got = lax.dot(a, a, precision="F16_F16_F16")
    want = (a.astype(np.float16).astype(np.float64) ** 2).sum()
    assert got.dtype == np.float32 and abs(float(got) - want) < 1e-2


@pytest.mark.parametrize("preset", ["F16_F16_F16", "BF16_BF16_F32", "F64_F64_F64"])
def test_transformations_keep_the_algorithm_as_jax(preset):
    """grad's cotangent products, jvp's tangent products and vmap's batched product use the algorithm too (JAX's
    rule): the same values as JAX's."""
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(3, 5)).astype(np.float32), rng.normal(size=(5, 4)).astype(np.float32)
    ct = rng.normal(size=(3, 4)).astype(np.float32)
    batch = np.stack([a, 2 * a])

    def run(lib):
        def dot(x, y):
            return lib.lax.dot(x, y, precision=preset)
        grads = lib.grad(lambda x, y: (dot(x, y) * ct).sum(), (0, 1))(a, b)
        tangent = lib.jvp(lambda x: dot(x, b), (a,), (a,))[1]
        return (*grads, tangent, lib.vmap(dot, (0, None))(batch, b), lib.vmap(dot, (0, 2))(batch, np.stack([b, b], 2)))
    want = jax_result(lambda: run(jax))
    got = ember.jit(lambda: run(ember))()
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6, atol=1e-6)


def test_preferred_element_type_with_an_algorithm_as_jax():
    """With an algorithm JAX checks no width: an integer or narrower result is the accumulation converted."""
    a = np.array([[1.5, -2.25], [3.0, 0.5]], np.float32)
    for pet in (np.int32, np.float16, np.int8):
        want = jax_result(lambda: jlax.dot(a, a, precision="F32_F32_F32", preferred_element_type=pet))
        got = lax.dot(a, a, precision="F32_F32_F32", preferred_element_type=pet)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    h = a.astype(np.float16)
    want = jax_result(lambda: jlax.dot(h, h, precision="F16_F16_F16", preferred_element_type=np.float32))
    got = lax.dot(h, h, precision="F16_F16_F16", preferred_element_type=np.float32)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


def test_convolutions_take_and_ignore_algorithms_as_jax():
    rng = np.random.default_rng(2)
    x, w = rng.normal(size=(1, 2, 5, 5)).astype(np.float32), rng.normal(size=(3, 2, 2, 2)).astype(np.float32)
    plain = lax.conv_general_dilated(x, w, (1, 1), "VALID")
    for precision in ("F16_F16_F16", "TF32_TF32_F32", lax.DotAlgorithmPreset.ANY_F8_ANY_F8_F32,
                      lax.DotAlgorithm(np.float16, np.float16, np.float32)):
        np.testing.assert_array_equal(lax.conv_general_dilated(x, w, (1, 1), "VALID", precision=precision), plain)
    np.testing.assert_allclose(plain, jax_result(lambda: jlax.conv_general_dilated(
        x, w, (1, 1), "VALID", precision="TF32_TF32_F32")), rtol=1e-5, atol=1e-5)


def test_numpy_contractions_take_algorithms_as_jax():
    rng = np.random.default_rng(4)
    a, b = (rng.normal(size=(3, 4)) * 1.001).astype(np.float32), rng.normal(size=(4, 5)).astype(np.float32)

    def products(lib, p):
        n = lib.numpy
        return (n.dot(a, b, precision=p), n.matmul(a, b, precision=p), n.einsum("ij,jk->ik", a, b, precision=p),
                n.inner(a, b.T, precision=p), n.tensordot(a, b, 1, precision=p), n.vecdot(a, a, precision=p),
                n.linalg.multi_dot([a, b, b.T], precision=p))
    want = jax_result(lambda: products(jax, "F16_F16_F16"))
    for g, w in zip(products(ember, "F16_F16_F16"), want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-6, atol=1e-6)
    p = "TF32_TF32_F32"
    for product in (lambda: enp.dot(a, b, precision=p), lambda: enp.matmul(a, b, precision=p),
                    lambda: enp.einsum("ij,jk->ik", a, b, precision=p), lambda: enp.inner(a, b.T, precision=p),
                    lambda: enp.tensordot(a, b, 1, precision=p), lambda: enp.vecdot(a, a, precision=p)):
        with pytest.raises(ValueError, match="not supported by dot_general on CPU"):
            product()


def test_default_matmul_precision_names_a_preset_as_jax():
    a = np.full((2, 3), 1.001, np.float32)
    with ember.default_matmul_precision("F16_F16_F16"):
        got = lax.dot(a, a.T)
    want = jax_result(lambda: _with_default("F16_F16_F16", lambda: jlax.dot(a, a.T)))
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(np.asarray(lax.dot(a, a.T)), want)


def _with_default(level, thunk):
    with jax.default_matmul_precision(level):
        return thunk()


def test_accuracy_of_transcendental_functions_as_jax():
    """accuracy= (an AccuracyMode or a Tolerance) changes no value on the CPU, in JAX as in ember; nor derivatives;
    anything else is NotImplementedError (JAX's, when it lowers)."""
    assert [m.name for m in lax.AccuracyMode] == [m.name for m in jlax.AccuracyMode]
    for bad in (dict(), dict(atol=-1.0), dict(rtol=0.0, ulps=-1)):
        with pytest.raises(ValueError) as ours:
            lax.Tolerance(**bad)
        with pytest.raises(ValueError) as theirs:
            jlax.Tolerance(**bad)
        assert str(ours.value) == str(theirs.value)
    x = np.linspace(0.25, 2.0, 6).astype(np.float32)
    for name in ("exp", "exp2", "expm1", "log", "log1p", "tanh", "logistic", "sin", "cos", "tan", "sqrt", "rsqrt",
                 "cbrt"):
        fn = getattr(lax, name)
        for accuracy in (lax.AccuracyMode.HIGHEST, lax.AccuracyMode.DEFAULT, lax.Tolerance(atol=1e-5, ulps=2)):
            np.testing.assert_array_equal(fn(x, accuracy=accuracy), fn(x))
        with pytest.raises(NotImplementedError, match=f"{name}: accuracy 'HIGHEST' is not supported"):
            fn(x, accuracy="HIGHEST")
    half = np.float32(0.5)
    want = jax_result(lambda: jax.grad(lambda v: jlax.sin(v, accuracy=jlax.AccuracyMode.HIGHEST))(half))
    assert float(ember.grad(lambda v: lax.sin(v, accuracy=lax.AccuracyMode.HIGHEST))(half)) == float(want)
    np.testing.assert_array_equal(ember.jit(lambda v: lax.tanh(v, accuracy=lax.Tolerance(rtol=1e-3)))(x),
                                  jax_result(lambda: jlax.tanh(x, accuracy=jlax.Tolerance(rtol=1e-3))))
