"""JAX's top-level option flags, each against jax where jax decides the answer: numpy_dtype_promotion,
numpy_rank_promotion, the transfer guards, default_matmul_precision, allow_f16_reductions, enable_checks,
no_tracing / no_execution, version; and the floor of ember's coverage of jax's top-level names."""
import logging
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._core import IR, Eqn, ShapedArray, Var
from ember._prims.elementwise import sin_p

# jax 0.10.2's public top-level names that ember has; raise it when names are added, never lower it
TOPLEVEL_FLOOR = 90


def outcome(lib, np_, a, b):
    try:
        return str((np_.asarray(a) + b).dtype)
    except ValueError as err:  # (jax's TypePromotionError, ember's, and rank promotion's errors)
        return type(err).__name__
    except TypeError as err:
        return type(err).__name__


def test_numpy_promotion_flags_as_jax():
    pairs = [(np.int32, 1), (np.int32, 1.0), (np.int16, np.ones(2, np.int32)), (np.float32, 2.0),
             (np.float16, 2.0), (np.float32, np.ones(2, np.float32)), (np.bool_, 1), (np.int8, np.ones(2, np.uint8)),
             (np.float32, 1j), (np.int32, np.ones(2, np.float32))]
    f = ember.jit(lambda a, b: a + b)
    f(enp.ones(2, np.int16), enp.ones(2, np.int32))  # (cached under the standard rule)
    with ember.numpy_dtype_promotion("strict"), jax.numpy_dtype_promotion("strict"):
        assert ember.numpy_dtype_promotion.value == "strict"
        for dtype, other in pairs:
            a = np.ones(2, dtype)
            assert outcome(ember, enp, a, other) == outcome(jax, jnp, a, other), (dtype, other)
        with pytest.raises(ember.dtypes.TypePromotionError, match="strict"):
            f(enp.ones(2, np.int16), enp.ones(2, np.int32))  # staged again under the strict rule
    assert f(enp.ones(2, np.int16), enp.ones(2, np.int32)).dtype == np.int32

    x, v = np.ones((2, 3), np.float32), np.ones(3, np.float32)
    g = ember.jit(lambda a, b: a * b)
    g(x, v)
    for mode in ("warn", "raise"):
        with ember.numpy_rank_promotion(mode), jax.numpy_rank_promotion(mode):
            for lib, np_ in ((ember, enp), (jax, jnp)):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    result = outcome(lib, np_, x, v)
                    assert outcome(lib, np_, x, np.float32(2)) == outcome(lib, np_, x, x) == "float32"
                assert result == ("float32" if mode == "warn" else "ValueError")
                assert [str(w.message).split(" on ")[0] for w in caught] == (
                    ["Following NumPy automatic rank promotion for add"] if mode == "warn" else [])
                if lib is ember and mode == "warn":
                    assert caught[0].filename == __file__  # (pointing at the user's line)
            if mode == "raise":
                with pytest.raises(ValueError, match="numpy_rank_promotion='raise'"):
                    g(x, v)  # staged again
    with pytest.raises(ValueError, match="numpy_rank_promotion"):
        ember.config.update("numpy_rank_promotion", "sometimes")


def test_transfer_guards(caplog):
    f = ember.jit(lambda a: a * 2)
    x, host = enp.ones(3), np.ones(3, np.float32)
    f(x), f(host)
    with ember.transfer_guard("disallow"):
        assert ember.transfer_guard_host_to_device.value is None and ember.config.transfer_guard == "disallow"
        np.testing.assert_array_equal(ember.device_get(f(x)), 2 * host)  # device arrays: no transfer
        for implicit in (lambda: f(host), lambda: f(1.0), lambda: enp.sin(host)):
            with pytest.raises(ember.errors.JaxRuntimeError, match="Disallowed host-to-device transfer"):
                implicit()
        with pytest.raises(ember.errors.JaxRuntimeError, match="Disallowed device-to-host transfer: np.asarray"):
            np.asarray(x)
        with pytest.raises(ember.errors.JaxRuntimeError, match="float"):
            float(x[0])
        explicit = ember.device_get(f(ember.device_put(host)))  # explicit transfers are allowed
        np.testing.assert_array_equal(explicit, 2 * host)
        assert "Array" in repr(x)  # (printing is not guarded)
        with ember.transfer_guard_host_to_device("allow"):  # a direction's own level wins
            np.testing.assert_array_equal(ember.device_get(f(host)), 2 * host)
    with ember.transfer_guard("disallow_explicit"):
        with pytest.raises(ember.errors.JaxRuntimeError, match="explicit host-to-device"):
            ember.device_put(host)
        with pytest.raises(ember.errors.JaxRuntimeError, match="explicit device-to-host"):
            ember.device_get(x)
    with caplog.at_level(logging.WARNING, logger="ember"), ember.transfer_guard("log"):
        np.testing.assert_array_equal(np.asarray(f(host)), 2 * host)
    assert [r.message.split(":")[0] for r in caplog.records] == ["host-to-device transfer",
                                                                 "device-to-host transfer"]
    np.testing.assert_array_equal(np.asarray(f(host)), 2 * host)  # (all back to 'allow')


def precisions(text):
    """The (lhs, rhs) precision levels of the dots and convolutions of a StableHLO text (ember's generic form or
    jax's pretty form); DEFAULT where none is written."""
    found = []
    for line in text.splitlines():
        if "dot_general" in line or "convolution" in line:
            pair = re.search(r"precision (\w+)>, #stablehlo<precision (\w+)>|precision = \[(\w+), (\w+)\]", line)
            found.append(tuple(g for g in pair.groups() if g) if pair else ("DEFAULT", "DEFAULT"))
    return found


def test_default_matmul_precision_as_jax():
    a, k, w = np.ones((2, 2), np.float32), np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 2, 2), np.float32)

    def f(lib):
        return lambda x, y, u, v: (lib.grad(lambda x: (x @ y).sum())(x),
                                   lib.lax.conv(u, v, (1, 1), "SAME"), lib.lax.dot(x, y, precision=("highest", "high")))
    ours, theirs = ember.jit(f(ember)), jax.jit(f(jax))
    plain = precisions(ours.lower(a, a, k, w).as_text())
    assert plain == precisions(theirs.lower(a, a, k, w).as_text()) and ("HIGHEST", "HIGH") in plain
    for level in ("float32", "tensorfloat32"):
        with ember.default_matmul_precision(level), jax.default_matmul_precision(level):
            got = precisions(ours.lower(a, a, k, w).as_text())  # (staged again under the option)
            assert got == precisions(theirs.lower(a, a, k, w).as_text()) and got != plain, level
            np.testing.assert_allclose(ours(a, a, k, w)[0], theirs(a, a, k, w)[0])
    assert precisions(ours.lower(a, a, k, w).as_text()) == plain
    with pytest.raises(ValueError, match="precision must be"):
        ember.lax.dot(a, a, precision="sloppy")


def test_enable_checks_no_tracing_no_execution_version():
    half = np.ones(3, np.float16)
    ember.lax.reduce_sum(half, (0,))  # (an eager operation cached under allow_f16_reductions=True)
    with ember.allow_f16_reductions(False), jax.allow_f16_reductions(False):
        for run in (lambda lib, np_: np_.sum(half), lambda lib, np_: lib.lax.reduce_sum(half[None], (0,))):
            np.testing.assert_array_equal(run(ember, enp), run(jax, jnp))  # (sum accumulates in float32; axes of 1)
        for lib in (ember, jax):
            with pytest.raises(ValueError, match="reduce_sum on operand f16\\[3\\]"):
                lib.lax.reduce_sum(half, (0,))
    a, b = Var(ShapedArray((3,), np.float32)), Var(ShapedArray((4,), np.float32))
    bad = IR([], [], [a], [Eqn(sin_p, [a], [b], {})], [b])  # sin's output mistyped
    assert "stablehlo.sine" in ember.lower(bad)
    with ember.enable_checks(True):
        with pytest.raises(ember.IRTypeError, match=r"equation 0 \(sin\)"):
            ember.lower(bad)
        assert float(ember.jit(ember.grad(lambda x: enp.sin(x) * x))(0.0)) == 0.0

    f, x = ember.jit(lambda v: v + 1), enp.ones(2)
    f(x)
    with ember.no_tracing(True):
        np.testing.assert_array_equal(f(x), [2, 2])
        with pytest.raises(RuntimeError, match="no_tracing"):
            f(enp.ones(3))
    context = ember.make_user_context(default_value=None)
    g = ember.jit(lambda v: v * 3)
    for value in (None, 1, 2, 1):
        with context(value), ember.no_tracing(value == 1 and g.cache_info().misses == 3):
            g(x)  # traced again under each new value, not under one seen before
    assert g.cache_info().misses == 3 and context.value is None
    with ember.no_execution(True):
        for run in (lambda: f(x), lambda: enp.sin(x)):
            with pytest.raises(RuntimeError, match="no_execution"):
                run()
    np.testing.assert_array_equal(f(x), [2, 2])

    assert ember.__version__ == ember.version.__version__ and ember.version.__version_info__[0] == 0
    public = [n for n in dir(jax) if not n.startswith("_")]
    have = [n for n in public if hasattr(ember, n)]
    print(f"jax top-level names in ember: {len(have)} of {len(public)}; missing: "
          f"{' '.join(n for n in public if not hasattr(ember, n))}")
    assert len(have) >= TOPLEVEL_FLOOR


def test_absl_entry_points_read_jax_flags():
    # JAX programs call jax.config.config_with_absl() / parse_flags_with_absl() at start-up to take --jax_* flags
    for name in ("config_with_absl", "parse_flags_with_absl", "complete_absl_config"):
        assert hasattr(jax.config, name) and hasattr(ember.config, name)
    with ember.config.override(enable_x64=False, log_compiles=False, debug_nans=True):
        ember.config.parse_flags_with_absl(["prog", "--jax_enable_x64", "--out=1", "--jax_log_compiles=true",
                                            "--nojax_debug_nans", "positional"])
        assert ember.config.enable_x64 and ember.config.log_compiles and not ember.config.debug_nans
        with pytest.raises(ValueError, match="needs a value"):
            ember.config.parse_flags_with_absl(["prog", "--jax_num_cpu_devices"])
        with pytest.raises(AttributeError, match="unrecognized option"):
            ember.config.parse_flags_with_absl(["prog", "--jax_no_such_option=1"])

        class Flag:
            def __init__(self, value, present):
                self.value, self.present = value, present
        ember.config.complete_absl_config({"jax_enable_x64": Flag(False, True), "jax_debug_nans": Flag(True, False)})
        assert not ember.config.enable_x64 and not ember.config.debug_nans  # (a flag not given changes nothing)
    ember.config.config_with_absl()  # (pytest's own arguments: nothing to take)
