"""JAX's dtype defaults: without 64-bit mode, 64-bit values become 32-bit where they enter ember (silently) and a
64-bit dtype asked for by name gives the 32-bit one with a warning; with it, every dtype is kept. JAX (in the same
mode) is the oracle for dtypes, numpy for values."""
import os
import warnings

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import ember
import ember.lax as elax
import ember.numpy as enp
from ember import ShapedArray
from ember._core.dtypes import NarrowedDtypeWarning

WIDE = [np.float64, np.int64, np.uint64, np.complex128]
NARROW = {np.float64: np.float32, np.int64: np.int32, np.uint64: np.uint32, np.complex128: np.complex64}


@pytest.fixture(autouse=True)
def _x32():
    """These tests are about the default mode: ember's and JAX's 64-bit modes off (the suite turns JAX's on)."""
    with ember.config.override(enable_x64=False), jax.enable_x64(False):
        yield


def _host(dtype, shape=(3,)):
    return (np.arange(int(np.prod(shape))).reshape(shape) * (1.5 if np.dtype(dtype).kind in "fc" else 1)
            ).astype(dtype)


@pytest.mark.parametrize("dtype", WIDE, ids=lambda d: np.dtype(d).name)
def test_values_entering_ember_are_narrowed_as_jax(dtype):
    value, want = _host(dtype), np.dtype(NARROW[dtype])
    with warnings.catch_warnings():
        warnings.simplefilter("error", NarrowedDtypeWarning)  # (values are narrowed silently, as JAX's)
        made = {
            "asarray": enp.asarray(value), "array": enp.array(value), "device_put": ember.device_put(value),
            "eager op": enp.negative(value), "jit argument": ember.jit(lambda x: x)(value),
            "closed-over constant": ember.jit(lambda: value + 0)(), "numpy scalar": enp.asarray(value[1]),
            "jit numpy scalar": ember.jit(lambda x: x)(value[1]), "list of numpy scalars": enp.array(list(value)),
            "operand with an Array": enp.ones(3, want) + value,
        }
    for where, result in made.items():
        assert result.dtype == want, where
        assert result.dtype == jnp.asarray(value).dtype, where
        expected = value[1] if "scalar" in where and "scalars" not in where else value
        expected = expected.astype(want)
        if where == "eager op":
            expected = -expected
        if where == "operand with an Array":
            expected = expected + 1
        np.testing.assert_array_equal(np.asarray(result), expected, err_msg=where)
    # what numpy gets back is the 32-bit value (as np.asarray of a JAX array)
    assert np.asarray(enp.asarray(value)).dtype == np.asarray(jnp.asarray(value)).dtype == want


def test_int64_values_beyond_int32_wrap_as_jax():
    value = np.array([2 ** 31 + 5, -2 ** 40 - 1, 7], np.int64)
    np.testing.assert_array_equal(np.asarray(enp.asarray(value)), np.asarray(jnp.asarray(value)))
    value = np.array([2 ** 33 + 3], np.uint64)
    np.testing.assert_array_equal(np.asarray(enp.asarray(value)), np.asarray(jnp.asarray(value)))


def test_promotion_with_numpy_64_bit_operands_is_jax_32_bit():
    x16, x32, i8 = enp.ones(2, enp.float16), enp.ones(2, enp.float32), enp.ones(2, enp.int8)
    cases = [(x32 * np.float64(2), jnp.ones(2, jnp.float32) * np.float64(2)),
             (x16 * np.float64(2), jnp.ones(2, jnp.float16) * np.float64(2)),
             (i8 + np.int64(3), jnp.ones(2, jnp.int8) + np.int64(3)),
             (enp.ones(2, enp.uint32) + np.int64(1), jnp.ones(2, jnp.uint32) + np.int64(1)),
             (enp.true_divide(np.arange(3), 2), jnp.true_divide(np.arange(3), 2)),
             (enp.mean(np.arange(4)), jnp.mean(np.arange(4))), (enp.sqrt(np.int64(4)), jnp.sqrt(np.int64(4)))]
    for i, (ours, theirs) in enumerate(cases):
        assert (ours.dtype, ours.weak_type) == (theirs.dtype, theirs.weak_type), i
    for args in [(np.float64,), (np.float64, np.int8), (np.int64, np.uint8), (np.complex128,), (float, np.int64)]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (JAX warns here; ember's result_type narrows silently)
            assert enp.result_type(*args) == jnp.result_type(*args), args
    # promote_types is the lattice's, as jax.numpy's (64-bit in, 64-bit out)
    assert enp.promote_types(np.float64, np.float32) == jnp.promote_types(np.float64, np.float32) == np.float64


REQUESTS = [
    ("zeros", lambda np_, d: np_.zeros(2, d)), ("ones", lambda np_, d: np_.ones((2, 2), d)),
    ("full", lambda np_, d: np_.full(2, 3, d)), ("empty", lambda np_, d: np_.empty(2, d)),
    ("zeros_like", lambda np_, d: np_.zeros_like(np_.ones(2), d)), ("full_like", lambda np_, d: np_.full_like(
        np_.ones(2), 1, d)), ("arange", lambda np_, d: np_.arange(4, dtype=d)),
    ("eye", lambda np_, d: np_.eye(2, dtype=d)), ("linspace", lambda np_, d: np_.linspace(0, 1, 3, dtype=d)),
    ("array", lambda np_, d: np_.array([1, 2], d)), ("asarray", lambda np_, d: np_.asarray(np.ones(2), d)),
    ("astype", lambda np_, d: np_.ones(2).astype(d)), ("astype function", lambda np_, d: np_.astype(np_.ones(5), d)),
    ("sum dtype", lambda np_, d: np_.sum(np_.ones(3), dtype=d)),
    ("cumsum dtype", lambda np_, d: np_.cumsum(np_.ones(3), dtype=d)),
    ("mean dtype", lambda np_, d: np_.mean(np_.ones(3), dtype=d) if np.dtype(d).kind in "fc" else np_.ones(())),
    ("tri", lambda np_, d: np_.tri(2, dtype=d)), ("scalar type", lambda np_, d: getattr(np_, np.dtype(d).name)(3)),
    ("convert_element_type", lambda np_, d: (elax if np_ is enp else jax.lax).convert_element_type(np_.ones(2), d)),
    ("iota", lambda np_, d: (elax if np_ is enp else jax.lax).iota(d, 3) if np.dtype(d).kind in "iu" else
     np_.ones(())),
]


@pytest.mark.parametrize("dtype", [  # (every other dtype by default, all with -m slow)
    pytest.param(d, id=np.dtype(d).name, marks=() if i % 2 == 0 else pytest.mark.slow) for i, d in enumerate(WIDE)])
def test_a_64_bit_dtype_asked_for_is_narrowed_with_a_warning_as_jax(dtype):
    for name, make in REQUESTS:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ours = make(enp, dtype)
        with warnings.catch_warnings(record=True) as theirs_caught:
            warnings.simplefilter("always")
            theirs = make(jnp, dtype)
        assert ours.dtype == theirs.dtype, name
        assert bool([w for w in caught if issubclass(w.category, NarrowedDtypeWarning)]) == \
            bool([w for w in theirs_caught if "not available" in str(w.message)]), name
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs), err_msg=name)
    # the warning names the function and points at the caller's line
    with pytest.warns(NarrowedDtypeWarning, match=r"zeros: dtype float64 was requested") as record:
        enp.zeros(2, np.float64)
    assert record[0].filename == os.path.abspath(__file__)


def test_python_types_and_32_bit_dtypes_give_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", NarrowedDtypeWarning)
        assert enp.zeros(2, float).dtype == np.float32 and enp.arange(3, dtype=int).dtype == np.int32
        assert enp.ones(2).astype(complex).dtype == np.complex64
        assert enp.zeros(2, enp.float32).dtype == np.float32 and enp.zeros(2, "bfloat16").dtype == enp.bfloat16


def test_random_and_nn_dtypes_are_narrowed():
    key = ember.random.key(0)
    with pytest.warns(NarrowedDtypeWarning, match="random.normal"):
        wide = ember.random.normal(key, (4,), dtype=np.float64)
    np.testing.assert_array_equal(np.asarray(wide), np.asarray(ember.random.normal(key, (4,), dtype=np.float32)))
    with pytest.warns(NarrowedDtypeWarning, match="random.randint"):
        assert ember.random.randint(key, (2,), 0, 5, dtype=np.int64).dtype == np.int32
    with pytest.warns(NarrowedDtypeWarning):
        assert ember.random.bits(key, (2,), dtype=np.uint64).dtype == np.uint32
    with pytest.warns(NarrowedDtypeWarning):
        assert ember.nn.initializers.glorot_normal()(key, (2, 3), np.float64).dtype == np.float32
    with pytest.warns(NarrowedDtypeWarning):
        assert ember.nn.one_hot(np.arange(3), 3, dtype=np.float64).dtype == np.float32


def test_scalar_types_are_dtypes_and_make_arrays():
    for name in ["int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "float32", "bfloat16",
                 "complex64", "bool_"]:
        t, ref = getattr(enp, name), getattr(jnp, name)
        assert np.dtype(t) == np.dtype(ref) and t == np.dtype(ref).type and hash(t) == hash(np.dtype(ref).type)
        assert {np.dtype(ref).type: 1}.get(t) == 1 and enp.zeros(2, t).dtype == np.dtype(ref)
        assert isinstance(np.dtype(ref).type(1), t) and not isinstance(enp.ones(()), enp.int8)
        value = t(1)
        assert type(value) is type(enp.ones(())) and value.shape == () and value.dtype == ref(1).dtype
        assert np.asarray(t([1, 0])).tolist() == np.asarray(ref([1, 0])).tolist()
    assert enp.issubdtype(enp.float32, enp.floating) and not enp.issubdtype(enp.int32, enp.floating)
    assert repr(enp.float32) == "<class 'ember.numpy.float32'>"
    with pytest.warns(NarrowedDtypeWarning):
        assert enp.float64(1.5).dtype == jnp.float64(1.5).dtype == np.float32
    assert enp.dtype(enp.float64) == np.float64 and enp.float64.dtype == np.float64  # (the dtype object stays)
    assert enp.bfloat16.dtype == np.dtype(ml_dtypes.bfloat16)


def test_transformations_see_the_narrowed_values():
    def loss(w, x):
        return enp.sum(enp.tanh(x @ w) ** 2)

    w, x = np.random.default_rng(0).normal(size=(3, 2)), np.random.default_rng(1).normal(size=(4, 3))

    def jloss(w, x):
        return jnp.sum(jnp.tanh(x @ w) ** 2)

    checks = [
        (ember.grad(loss)(w, x), jax.grad(jloss)(w, x)),
        (ember.jit(ember.grad(loss))(w, x), jax.jit(jax.grad(jloss))(w, x)),
        (ember.vmap(loss, (None, 0))(w, x[:, None]), jax.vmap(jloss, (None, 0))(w, x[:, None])),
        (ember.jvp(lambda w: loss(w, x), (w,), (np.ones_like(w),))[1],
         jax.jvp(lambda w: jloss(w, x), (w,), (np.ones_like(w),))[1]),
        (ember.jacfwd(lambda w: loss(w, x))(w), jax.jacfwd(lambda w: jloss(w, x))(w)),
        (ember.hessian(lambda w: loss(w, x))(w), jax.hessian(lambda w: jloss(w, x))(w)),
    ]
    for i, (ours, theirs) in enumerate(checks):
        assert ours.dtype == theirs.dtype == np.float32, i
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=2e-5, atol=1e-6, err_msg=str(i))
    primal, pullback = ember.vjp(lambda w: loss(w, x), w)
    assert primal.dtype == np.float32 and pullback(np.float64(1.0))[0].dtype == np.float32


def test_the_ir_is_exact_in_either_mode():
    """stage_out at float64 avals stages float64 without 64-bit mode, and its transformations keep it so."""
    ir = ember.stage_out(lambda x: enp.sum(enp.sin(x) * 2.0), ShapedArray((2,), "f64"))
    assert "f64" in str(ir) and "f32" not in str(ir)
    back = ember.grad(ir)
    assert back.outs[0].aval.dtype == np.float64
    np.testing.assert_allclose(np.asarray(ember.compile(back)(np.array([0.5, 1.0]))),
                               2 * np.cos([0.5, 1.0]), rtol=1e-15)


def test_64_bit_mode_keeps_every_dtype_without_warnings():
    with ember.config.override(enable_x64=True), jax.enable_x64(True), warnings.catch_warnings():
        warnings.simplefilter("error", NarrowedDtypeWarning)
        for dtype in WIDE:
            value = _host(dtype)
            assert enp.asarray(value).dtype == ember.jit(lambda x: x)(value).dtype == dtype
            assert enp.zeros(2, dtype).dtype == enp.ones(2).astype(dtype).dtype == dtype
        assert enp.float64(1.5).dtype == np.float64 and enp.ones(2, enp.float32) .dtype == np.float32
        assert (enp.ones(2, enp.float32) * np.float64(2)).dtype == np.float64
        assert ember.random.normal(ember.random.key(0), (2,), np.float64).dtype == np.float64
    # an Array made in 64-bit mode keeps its dtype afterwards (as in JAX)
    with ember.config.override(enable_x64=True):
        kept = enp.asarray(np.ones(2))
    assert kept.dtype == np.float64 and (kept + 1).dtype == np.float64


def test_checkpoints_and_dlpack_narrow_64_bit_values(tmp_path):
    path = str(tmp_path / "params.safetensors")
    with ember.config.override(enable_x64=True):
        ember.checkpoints.save(path, {"w": enp.asarray(np.arange(3.0))})
    loaded = ember.checkpoints.load(path)
    assert loaded["w"].dtype == np.float32
    target = {"w": enp.zeros(3)}
    assert ember.checkpoints.load(path, target)["w"].dtype == np.float32  # (a float32 target takes a float64 file)
    value = np.arange(4.0)
    imported = ember.dlpack.from_dlpack(value)
    assert imported.dtype == jax.dlpack.from_dlpack(value).dtype == np.float32
    np.testing.assert_array_equal(np.asarray(imported), value.astype(np.float32))
    with pytest.raises(BufferError, match="64-bit dtypes are off"):
        ember.dlpack.from_dlpack(value, copy=False)


def test_callbacks_refuse_64_bit_results_without_x64():
    with pytest.raises(ValueError, match="64-bit"):
        ember.pure_callback(lambda x: x, ember.ShapeDtypeStruct((2,), np.float64), enp.ones(2))


def test_shape_dtype_structs_are_narrowed_as_jax():
    struct = ember.ShapeDtypeStruct((2,), np.float64)
    out = ember.eval_shape(lambda x: x * 2, struct)
    assert out.dtype == jax.eval_shape(lambda x: x * 2, jax.ShapeDtypeStruct((2,), np.float64)).dtype == np.float32
    compiled = ember.jit(lambda x: x * 2).lower(struct).compile()
    assert compiled(np.ones(2)).dtype == np.float32


def test_mnist_style_program_with_numpy_float64_parameters_runs_in_float32_as_jax():
    """JAX's examples build parameters with numpy (float64) and train them: in float32 under JAX and ember."""
    rng = np.random.default_rng(0)
    params = [(rng.normal(size=(16, 8)) * 0.1, rng.normal(size=8) * 0.1), (rng.normal(size=(8, 4)) * 0.1,
                                                                            np.zeros(4))]
    images, labels = rng.normal(size=(32, 16)), np.eye(4)[rng.integers(0, 4, 32)]

    def make(np_, lib):
        def predict(params, x):
            for w, b in params[:-1]:
                x = np_.tanh(x @ w + b)
            w, b = params[-1]
            logits = x @ w + b
            return logits - lib.scipy.special.logsumexp(logits, axis=1, keepdims=True)

        def loss(params, batch):
            x, y = batch
            return -np_.mean(np_.sum(predict(params, x) * y, axis=1))

        @lib.jit
        def update(params, batch):
            grads = lib.grad(loss)(params, batch)
            return [(w - 0.5 * dw, b - 0.5 * db) for (w, b), (dw, db) in zip(params, grads)], loss(params, batch)
        return update

    ours, theirs = make(enp, ember), make(jnp, jax)
    p_ours, p_theirs = params, params
    for _ in range(5):
        p_ours, l_ours = ours(p_ours, (images, labels))
        p_theirs, l_theirs = theirs(p_theirs, (images, labels))
    assert all(leaf.dtype == np.float32 for leaf in ember.tree_util.tree_leaves(p_ours))
    assert l_ours.dtype == l_theirs.dtype == np.float32
    np.testing.assert_allclose(float(l_ours), float(l_theirs), rtol=1e-5)


def _dtype_parameters(api):
    """The dtype-like parameters of lax, numpy, random and nn functions, each given a 64-bit dtype."""
    lax, jnp_, f64, i64 = api.lax, api.numpy, np.float64, np.int64
    x = jnp_.ones((2, 2), np.float32)
    return {
        "lax.dot preferred_element_type": lambda: lax.dot(x, x, preferred_element_type=f64),
        "lax.dot_general preferred_element_type": lambda: lax.dot_general(
            x, x, (((1,), (0,)), ((), ())), preferred_element_type=f64),
        "lax.conv preferred_element_type": lambda: lax.conv(jnp_.ones((1, 1, 3, 3)), jnp_.ones((1, 1, 2, 2)), (1, 1),
                                                            "VALID", preferred_element_type=f64),
        "lax.argmax index_dtype": lambda: lax.argmax(jnp_.ones(3), 0, i64),
        "lax.argmin index_dtype": lambda: lax.argmin(jnp_.ones(3), 0, i64),
        "lax.bitcast_convert_type new_dtype": lambda: lax.bitcast_convert_type(jnp_.ones(2, np.float32), i64),
        "lax.convert_element_type new_dtype": lambda: lax.convert_element_type(x, f64),
        "lax.full dtype": lambda: lax.full((2,), 1.0, f64),
        "lax.full_like dtype": lambda: lax.full_like(x, 1, f64),
        "lax.iota dtype": lambda: lax.iota(i64, 3),
        "lax.broadcasted_iota dtype": lambda: lax.broadcasted_iota(i64, (2, 2), 0),
        "jnp.matmul preferred_element_type": lambda: jnp_.matmul(x, x, preferred_element_type=f64),
        "jnp.tensordot preferred_element_type": lambda: jnp_.tensordot(x, x, preferred_element_type=f64),
        "jnp.vdot preferred_element_type": lambda: jnp_.vdot(x, x, preferred_element_type=f64),
        "jnp.einsum preferred_element_type": lambda: jnp_.einsum("ij,jk", x, x, preferred_element_type=f64),
        "jnp.sum dtype": lambda: jnp_.sum(x, dtype=f64),
        "jnp.cumsum dtype": lambda: jnp_.cumsum(x, dtype=f64),
        "jnp.mean dtype": lambda: jnp_.mean(x, dtype=f64),
        "jnp.arange dtype": lambda: jnp_.arange(3, dtype=i64),
        "jnp.eye dtype": lambda: jnp_.eye(2, dtype=f64),
        "jnp.linspace dtype": lambda: jnp_.linspace(0, 1, 3, dtype=f64),
        "random.uniform dtype": lambda: api.random.uniform(api.random.key(0), (2,), f64),
        "random.randint dtype": lambda: api.random.randint(api.random.key(0), (2,), 0, 5, i64),
        "nn.one_hot dtype": lambda: api.nn.one_hot(jnp_.arange(2), 3, dtype=f64),
    }


def test_64_bit_dtype_parameters_give_32_bit_results_as_jax():
    """Without x64 every dtype-like parameter asking for a 64-bit type gives the 32-bit one, as JAX's (the
    preferred_element_type of the dot family, argmax's index_dtype and bitcast_convert_type's new_dtype gave 64-bit
    results)."""
    def dtypes(api):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return {name: str(make().dtype) for name, make in _dtype_parameters(api).items()}
    assert dtypes(ember) == dtypes(jax)
    assert not any("64" in d for d in dtypes(ember).values())
