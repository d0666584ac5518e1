"""ember.config: JAX's option names, environment variables, cache bounds, debug_nans/debug_infs, disable_jit and
clear_caches."""
import gc
import weakref

import numpy as np
import pytest

import ember
import ember.numpy as enp
from subproc import check_python


def test_update_and_read_with_or_without_the_jax_prefix():
    assert ember.config.debug_nans is False and ember.config.jax_debug_nans is False
    with ember.config.override(jax_debug_infs=True):
        assert ember.config.debug_infs is True and ember.config.read("jax_debug_infs") is True
    assert ember.config.debug_infs is False
    ember.config.update("eager_cache_size", 100)
    try:
        assert ember.config.jax_eager_cache_size == 100
    finally:
        ember.config.update("jax_eager_cache_size", 1024)
    assert "enable_x64" in dir(ember.config) and "enable_x64" in ember.config.describe()


def test_bad_options_and_values_are_clear_errors():
    with pytest.raises(AttributeError, match="unrecognized option 'jax_no_such_thing'.*debug_nans"):
        ember.config.update("jax_no_such_thing", True)
    with pytest.raises(AttributeError, match="unrecognized option"):
        ember.config.no_such_thing
    with pytest.raises(ValueError, match="'debug_nans' takes a boolean"):
        ember.config.update("debug_nans", "maybe")
    with pytest.raises(ValueError, match="'jit_cache_size' takes a positive integer"):
        ember.config.update("jit_cache_size", 0)
    assert ember.config.debug_nans is False and ember.config.jit_cache_size == 256


def test_environment_variables():
    out = check_python("""
        import ember
        print(ember.config.enable_x64, ember.config.debug_nans, ember.config.eager_cache_size,
              ember.config.disable_jit)
    """, env={"JAX_ENABLE_X64": "1", "EMBER_DEBUG_NANS": "true", "EMBER_EAGER_CACHE_SIZE": "7",
              "JAX_DISABLE_JIT": "0"})
    assert out.split() == ["True", "True", "7", "False"]


def test_cache_bounds_follow_the_options():
    from ember._runtime.eager import _eager_cache
    with ember.config.override(eager_cache_size=8, jit_cache_size=4):
        f = ember.jit(lambda x: x * 2)
        for n in range(1, 20):
            enp.sin(np.ones(n, np.float32))
            f(np.ones(n, np.float32))
        assert len(_eager_cache) <= 8
        assert len(f._cache.executables) <= 4 and len(f._cache.irs) <= 4 and len(f._dispatch) <= 4
        assert np.allclose(f(np.ones(3, np.float32)), 2.0)  # an evicted signature compiles again
    assert len(_eager_cache) > 2
    with ember.config.override(eager_cache_size=2):  # a smaller bound trims the live caches at once
        assert len(_eager_cache) <= 2


def _f(x):
    y = enp.sin(x)
    z = enp.log(y - 0.5)  # the NaN comes from this line (for x = -1)
    return z.sum()


NAN_LINE = _f.__code__.co_firstlineno + 2


@pytest.mark.parametrize("transform", ["eager", "jit", "vmap", "jit_vmap"])
def test_debug_nans_names_the_primitive_and_line(transform):
    fn = {"eager": _f, "jit": ember.jit(_f), "vmap": ember.vmap(_f), "jit_vmap": ember.jit(ember.vmap(_f))}[transform]
    x = enp.ones((2, 3)) if "vmap" in transform else enp.ones(3)
    assert np.isnan(np.asarray(fn(-x))).all()  # off: NaN is a value like any other
    with ember.config.override(debug_nans=True):
        with pytest.raises(FloatingPointError, match=rf"invalid value \(nan\) encountered in log at .*"
                                                     rf"test_config.py:{NAN_LINE} \(_f\)"):
            fn(-x)
        assert np.isfinite(np.asarray(fn(x))).all()  # no NaN: no error


def test_debug_nans_in_a_gradient_names_the_backward_line():
    def g(x):
        return enp.sqrt(x).sum()  # d/dx sqrt at 0 is inf; at -1 the value and gradient are NaN
    with ember.config.override(debug_nans=True):
        with pytest.raises(FloatingPointError, match=r"encountered in .* at .*test_config.py.* \(g\)"):
            ember.jit(ember.grad(g))(-enp.ones(3))


def test_debug_infs():
    f = ember.jit(lambda x: 1.0 / x)
    assert np.isinf(np.asarray(f(enp.zeros(2)))).all()
    with ember.config.override(debug_infs=True):
        with pytest.raises(FloatingPointError, match=r"invalid value \(inf\) encountered in div"):
            f(enp.zeros(2))
        with pytest.raises(FloatingPointError, match=r"\(inf\) encountered in exp"):
            enp.exp(enp.array([1000.0]))
        enp.log(enp.array([-1.0]))  # NaN is not checked by debug_infs


def test_debug_nans_when_no_single_primitive_produces_it():
    # The NaN was in the input: running op by op finds no primitive producing one from finite values.
    with ember.config.override(debug_nans=True):
        with pytest.raises(FloatingPointError, match="nan"):
            ember.jit(lambda x: x * 1.0 + 0.0)(enp.array([np.nan, 1.0]))
        # integer results are never checked
        assert int(ember.jit(lambda x: x // 2)(enp.array(3))) == 1


def test_disable_jit_runs_the_python_body():
    seen = []

    @ember.jit
    def f(x):
        seen.append(type(x).__name__)
        return x * 2
    f(enp.ones(2))
    f(enp.ones(2))
    assert seen == ["Tracer"]
    with ember.disable_jit():
        assert ember.config.disable_jit
        np.testing.assert_allclose(f(enp.ones(2)), [2.0, 2.0])
    assert seen == ["Tracer", "Array"] and not ember.config.disable_jit
    with ember.config.override(jax_disable_jit=True):
        f(enp.ones(2))
    assert seen[-1] == "Array"


def test_clear_caches_frees_every_compiled_program():
    from ember._runtime.compiler import Compiled
    f = ember.jit(lambda x: x + 1)
    f(enp.ones(3))
    ir = ember.stage_out(lambda x: x * 2.0, ember.ShapedArray((2,), "f32"))
    ember.compile(ir)(np.ones(2, np.float32))
    enp.cos(np.ones(5, np.float32))
    refs = [weakref.ref(o) for o in gc.get_objects() if isinstance(o, Compiled)]
    assert refs
    ember.clear_caches()
    gc.collect()
    assert all(r() is None for r in refs)
    np.testing.assert_allclose(f(enp.ones(3)), 2.0)  # compiles again
    np.testing.assert_allclose(ember.compile(ir)(np.ones(2, np.float32)), 2.0)


@pytest.mark.slow  # (4.5 s; device counts by default: test_sharding's)
def test_one_cpu_device_by_default_and_more_on_request():
    code = """
        import ember, sys
        print(len(ember.devices()))
        try:
            ember.config.update("jax_num_cpu_devices", 3)
        except RuntimeError as err:
            print("late:", "before the first computation" in str(err), ember.config.num_cpu_devices)
    """
    out = check_python(code, env={"EMBER_NUM_CPU_DEVICES": "1"})
    assert out.split("\n")[:2] == ["1", "late: True 1"]
    out = check_python("import ember; print(len(ember.devices()))", env={"EMBER_NUM_CPU_DEVICES": "3"})
    assert out.strip() == "3"
    out = check_python("""
        import ember
        ember.config.update("num_cpu_devices", 2)
        print(len(ember.devices()), ember.devices()[1])
    """, env={"EMBER_NUM_CPU_DEVICES": "1"})
    assert out.strip() == "2 cpu:1"  # (str of a device is JAX's: platform:id)
    with pytest.raises(ValueError, match="positive integer"):
        ember.config.update("num_cpu_devices", 0)


def test_default_xla_flags_keep_the_users():
    out = check_python("""
        import os, ember
        ember.numpy.zeros(3).block_until_ready()
        print(os.environ["XLA_FLAGS"])
    """, env={"XLA_FLAGS": "--xla_cpu_experimental_ynn_fusion_type= --xla_cpu_use_thunk_runtime=true"})
    flags = out.split()
    assert "--xla_cpu_experimental_ynn_fusion_type=" in flags and "--xla_cpu_use_thunk_runtime=true" in flags
    assert "--xla_cpu_experimental_ynn_fusion_type=reduce" not in flags
    assert "--xla_cpu_enable_fast_min_max=false" in flags
