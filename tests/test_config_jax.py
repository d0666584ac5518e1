"""Every configuration option of JAX 0.10.2 is accepted by ember.config (ember/_core/config_jax.py), honoured where it
means something on ember, and refused where its value would make ember compute other numbers than JAX."""
import json
import logging
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import ember
import ember.numpy as enp
import ember.random as er

jax = pytest.importorskip("jax")


def _jax_options():
    """JAX's options and their defaults, read in a fresh process (tests in this one may have changed them)."""
    code = ("import enum, json, jax\n"
            "def plain(v):\n"
            "    if isinstance(v, enum.Enum):\n"
            "        return v.value if isinstance(v.value, str) else v.name.lower()\n"
            "    return v if v is None or isinstance(v, (bool, int, float, str)) else repr(v)\n"
            "print(json.dumps({n: plain(h.value) for n, h in jax.config._value_holders.items()}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={
        k: v for k, v in os.environ.items() if not k.startswith("JAX_")})
    return dict(sorted(json.loads(result.stdout.strip().splitlines()[-1]).items()))


def test_every_jax_option_is_accepted_with_its_default():
    for name, value in _jax_options().items():
        if name == "jax_platforms":
            value = None
        if name == "jax_num_cpu_devices":  # (JAX's -1 means "not set"; the count is fixed once the backend runs)
            value = ember.config.read(name)
        with ember.config.override(**{name: value}):
            got = ember.config.read(name)
            assert got == value, (name, got, value)
        assert name in dir(ember.config) or name.removeprefix("jax_") in dir(ember.config), name


@pytest.mark.parametrize("name, bad", [("jax_use_magma", "x"), ("jax_cpu_collectives_implementation", "bogus"),
                                       ("jax_random_seed_offset", "a"), ("jax_memory_fitting_level", "O9"),
                                       ("jax_logging_level", "LOUD"), ("jax_default_prng_impl", "nope"),
                                       ("jax_default_device", 3.5)])
def test_values_jax_refuses_are_refused(name, bad):
    with pytest.raises(Exception):
        jax.config.update(name, bad)
    with pytest.raises(ValueError, match=name):
        ember.config.update(name, bad)


@pytest.mark.parametrize("name, value", [("jax_threefry_partitionable", False), ("jax_high_dynamic_range_gumbel", True),
                                         ("jax_error_checking_behavior_nan", "raise")])
def test_values_that_change_the_numbers_are_refused(name, value):
    before = ember.config.read(name)
    with pytest.raises(ValueError, match="not supported"):
        ember.config.update(name, value)
    assert ember.config.read(name) == before


def test_platform_name_cpu_is_accepted_once_the_backend_runs():
    enp.ones(1).block_until_ready()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with ember.config.override(jax_platform_name="cpu"), ember.config.override(jax_platforms="cpu"):
            assert float(enp.ones(1)[0]) == 1.0
    with pytest.warns(UserWarning, match="already started"):
        with ember.config.override(jax_platforms="cuda,cpu"):
            pass


def test_platforms_name_the_default_backend_in_a_new_process():
    code = "import ember; ember.config.update('jax_platforms', 'tpu'); ember.numpy.ones(1)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode != 0 and "tpu" in result.stderr and "jax_platforms" in result.stderr


_DEFAULT_DEVICE = textwrap.dedent("""
    import numpy as np
    import {mod} as jax, {mod}.numpy as jnp
    jax.config.update("jax_num_cpu_devices", 4)
    d = jax.devices()
    f = jax.jit(lambda a: a * 2)
    out = []
    with jax.default_device(d[2]):
        x = jnp.ones(3)
        out += [x.device.id, f(np.ones(3)).device.id, f(x).device.id]
    out += [jnp.ones(3).device.id, f(np.ones(3)).device.id]
    jax.config.update("jax_default_device", d[1])
    out += [jnp.ones(3).device.id, f(np.ones(3)).device.id]
    print(out)
""")


def _placements(mod):
    result = subprocess.run([sys.executable, "-c", _DEFAULT_DEVICE.format(mod=mod)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_default_device_places_uncommitted_computations_as_jax():
    assert _placements("ember") == "[2, 2, 2, 0, 0, 1, 1]"  # (JAX's: the next test)


@pytest.mark.slow
def test_default_device_placements_are_jax_s():
    assert _placements("jax") == "[2, 2, 2, 0, 0, 1, 1]"


def test_random_seed_offset_as_jax():
    with jax.config.update("jax_random_seed_offset", 5) or ember.config.override(jax_random_seed_offset=5):
        try:
            want = [np.asarray(jax.random.key_data(jax.random.key(3))), np.asarray(jax.random.PRNGKey(7)),
                    np.asarray(jax.random.normal(jax.random.key(11), (3,), np.float32))]
        finally:
            jax.config.update("jax_random_seed_offset", 0)
        got = [np.asarray(er.key_data(er.key(3))), np.asarray(er.PRNGKey(7)),
               np.asarray(er.normal(er.key(11), (3,), np.float32))]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(np.asarray(er.PRNGKey(7)), [0, 7])


def test_legacy_prng_key():
    raw = er.PRNGKey(0)
    with ember.config.override(jax_legacy_prng_key="warn"), pytest.warns(UserWarning, match="legacy uint32 key"):
        er.normal(raw)
    with ember.config.override(jax_legacy_prng_key="error"):
        with pytest.raises(ValueError, match="ember.random.split: legacy uint32 key"):
            er.split(raw)
        er.normal(er.key(0))  # typed keys are always accepted


def test_explicit_x64_dtypes():
    with ember.config.override(jax_explicit_x64_dtypes="error"), pytest.raises(ValueError, match="float64"):
        enp.zeros(2, enp.float64)
    with ember.config.override(jax_explicit_x64_dtypes="allow"), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert enp.zeros(2, enp.float64).dtype == np.float32
    with pytest.warns(UserWarning, match="64-bit dtypes are off"):
        enp.zeros(2, enp.float64)


def test_dump_ir_to_writes_each_compiled_program(tmp_path):
    with ember.config.override(jax_dump_ir_to=str(tmp_path), jax_dump_ir_modes="stablehlo,jaxpr"):
        ember.jit(lambda x: enp.sin(x) * 3.25)(np.ones(7, np.float32))
    names = sorted(os.listdir(tmp_path))
    assert any(n.endswith(".stablehlo.mlir") for n in names) and any(n.endswith(".ember_ir.txt") for n in names)
    text = next((tmp_path / n).read_text() for n in names if n.endswith(".mlir"))
    assert "stablehlo.sine" in text and "7xf32" in text


def test_enable_compilation_cache_off_keeps_the_cache_unused(tmp_path):
    with ember.config.override(compilation_cache_dir=str(tmp_path), persistent_cache_min_compile_time_secs=0,
                               jax_enable_compilation_cache=False):
        ember.jit(lambda x: x * 4.75 + 0.125)(np.ones(5, np.float32))
    assert os.listdir(tmp_path) == []


def test_logging_options():
    logger = logging.getLogger("ember")
    before = logger.level
    try:
        with ember.config.override(jax_logging_level="DEBUG"):
            assert logger.level == logging.DEBUG
        assert logger.level == logging.NOTSET
        ember.config.update("jax_debug_log_modules", "jax._dummy_module")
        assert logging.getLogger("ember._dummy_module").level == logging.DEBUG
    finally:
        ember.config.update("jax_debug_log_modules", "")
        logging.getLogger("ember._dummy_module").setLevel(logging.NOTSET)
        logger.setLevel(before)


@pytest.mark.parametrize("name", ["debug_key_reuse", "default_prng_impl", "legacy_prng_key", "enable_custom_prng",
                                  "threefry_partitionable", "softmax_custom_jvp", "thread_guard", "auto_pcast",
                                  "array_garbage_collection_guard", "remove_size_one_mesh_axis_from_type",
                                  "jax2tf_associative_scan_reductions", "default_device"])
def test_top_level_option_states_are_jax_s(name):
    assert getattr(jax, name).value == ember.config.read(name) or name == "legacy_prng_key"
    assert repr(getattr(ember, name)).startswith("State(")
