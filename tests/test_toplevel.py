"""JAX's top-level helpers (ember's twins checked against jax): make_jaxpr, block_until_ready, device_get, typeof,
live_arrays, the device and process queries, print_environment_info, and the flags as context managers."""
import jax
import jax.numpy as jnp
import numpy as np

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
