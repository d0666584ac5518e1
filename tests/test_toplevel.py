"""JAX's top-level helpers (ember's twins checked against jax): make_jaxpr, block_until_ready, device_get, typeof,
live_arrays, the device and process queries, print_environment_info, and the flags as context managers."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp


def f(np_, x, y):
    return {"s": np_.sin(x) @ y, "n": x.shape[0]}


def test_make_jaxpr_is_the_ir_and_its_shapes_match_jax():
    x, y = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    ir = ember.make_jaxpr(lambda a, b: f(enp, a, b)["s"])(x, y)
    assert isinstance(ir, ember.IR) and "sin" in str(ir) and "dot_general" in str(ir)
    ember.check_ir(ir)
    ir2, shapes = ember.make_jaxpr(lambda a, b: f(enp, a, b)["s"], return_shape=True)(x, ember.ShapeDtypeStruct(
        (3, 4), np.float32))
    _, jshapes = jax.make_jaxpr(lambda a, b: f(jnp, a, b)["s"], return_shape=True)(x, y)
    assert (shapes.shape, shapes.dtype) == (jshapes.shape, jshapes.dtype)
    static = ember.make_jaxpr(lambda a, k: a * k, static_argnums=1)(x, 3)
    assert "3" in str(static) and len(static.in_vars) == 1


def test_block_until_ready_device_get_typeof():
    tree = {"a": enp.arange(3.0), "b": [enp.ones(2), "label", 4]}
    assert ember.block_until_ready(tree) is tree
    got, want = ember.device_get(tree), jax.device_get({"a": jnp.arange(3.0), "b": [jnp.ones(2), "label", 4]})
    assert type(got["a"]) is np.ndarray and got["b"][1:] == ["label", 4]
    np.testing.assert_array_equal(got["a"], want["a"])
    for value, jvalue in [(enp.ones((2, 3), enp.int8), jnp.ones((2, 3), jnp.int8)), (True, True)]:
        ours, theirs = ember.typeof(value), jax.typeof(jvalue)
        assert (ours.shape, ours.dtype, ours.weak_type) == (theirs.shape, theirs.dtype, theirs.weak_type)
    scalar = ember.typeof(1.0)  # (JAX gives a Python float's type before canonicalization, float64)
    assert (scalar.shape, scalar.dtype, scalar.weak_type) == ((), np.float32, True) == (
        (), enp.asarray(1.0).dtype, jax.typeof(1.0).weak_type)
    assert ember.copy_to_host_async(tree) is tree


def test_live_arrays():
    x = enp.full((7, 3), 2.5)
    assert any(a is x for a in ember.live_arrays())
    x.delete()
    assert not any(a is x for a in ember.live_arrays())


def test_device_and_process_queries_match_jax_on_the_cpu():
    assert ember.default_backend() == jax.default_backend() == "cpu"
    assert ember.device_count() == len(ember.devices()) == ember.local_device_count()
    assert ember.local_devices() == ember.devices()
    assert (ember.process_count(), ember.process_index(), ember.process_indices()) == (
        jax.process_count(), jax.process_index(), jax.process_indices())
    assert (ember.host_count(), ember.host_id(), ember.host_ids()) == (1, 0, [0])


def test_print_environment_info(capsys):
    text = ember.print_environment_info(return_string=True)
    assert "ember:" in text and "numpy:" in text and "xla_cpu_pjrt" in text and "cpu" in text
    assert ember.print_environment_info() is None and capsys.readouterr().out == text


def test_flags_as_context_managers():
    assert ember.debug_nans.value is False and not ember.debug_nans
    with ember.debug_nans(True):
        assert ember.config.debug_nans is True and ember.debug_nans.value
        try:
            ember.jit(lambda x: enp.log(x))(enp.asarray(-1.0))
        except FloatingPointError as err:
            assert "log" in str(err)
        else:
            raise AssertionError("debug_nans did not raise")
    assert ember.config.debug_nans is False
    with ember.enable_x64(True):
        assert enp.asarray(1.0).dtype == np.float64
    assert enp.asarray(1.0).dtype == np.float32
    with ember.debug_infs(True), ember.log_compiles(True), ember.explain_cache_misses(True):
        assert ember.config.debug_infs and ember.config.log_compiles and ember.config.explain_cache_misses
    assert not (ember.config.debug_infs or ember.config.log_compiles or ember.config.explain_cache_misses)


def test_errors_are_jaxs_classes():
    cases = [(lambda a: 1 if a > 0 else 0, ember.errors.TracerBoolConversionError,
              jax.errors.TracerBoolConversionError),
             (lambda a: [0, 1][a], ember.errors.TracerIntegerConversionError, jax.errors.TracerIntegerConversionError),
             (lambda a: np.asarray(a), ember.errors.TracerArrayConversionError, jax.errors.TracerArrayConversionError),
             (lambda a: int(a), ember.errors.ConcretizationTypeError, jax.errors.ConcretizationTypeError)]
    for fn, ours, theirs in cases:
        with pytest.raises(ours):
            ember.jit(fn)(enp.ones((), enp.int32))
        with pytest.raises(theirs):
            jax.jit(fn)(jnp.ones((), jnp.int32))
        assert issubclass(ours, ember.errors.ConcretizationTypeError) and issubclass(theirs, TypeError)
    assert ember.errors.ConcretizationTypeError is ember.ConcretizationTypeError
    assert ember.errors.JaxRuntimeError is ember.PjrtError


def test_dtypes_and_typing_modules():
    for x in [1.0, 1, True, 1j, np.int8(1), np.ones(2, np.float16)]:
        assert ember.dtypes.scalar_type_of(x) is jax.dtypes.scalar_type_of(x)
    assert ember.dtypes.result_type(np.int8, np.float16) == jax.dtypes.result_type(np.int8, np.float16)
    assert ember.dtypes.issubdtype(ember.dtypes.bfloat16, np.floating)
    assert ember.dtypes.finfo(ember.dtypes.bfloat16).eps == jax.dtypes.finfo(jax.dtypes.bfloat16).eps
    assert ember.dtypes.iinfo(np.int16).max == 32767 and ember.dtypes.itemsize_bits(np.float16) == 16
    assert ember.dtypes.float0 == jax.dtypes.float0

    def f(x: ember.typing.ArrayLike, dtype: ember.typing.DTypeLike = None) -> ember.Array:
        return enp.asarray(x, dtype)
    assert f(3, "float32").dtype == np.float32
