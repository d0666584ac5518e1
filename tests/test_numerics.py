"""Numerical edge cases of ember.numpy against numpy (values, signs of zeros, infinities, NaN, wrap-around) and
JAX (derivatives, result dtypes): floor division and remainders, integer powers, half-precision accumulation,
argmax/argmin with NaN. Each runs eagerly and under jit; vmap and derivatives where they mean something."""
import itertools
import warnings

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._numpy import reductions
from recorded import jax_result

bfloat16 = ml_dtypes.bfloat16
FLOATS = [np.float16, bfloat16, np.float32, np.float64]
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
MODES = {"eager": lambda f: f, "jit": ember.jit}


def int_modes(modes):
    """(dtype, mode) parameters over INTS: every other dtype eagerly and each compiled mode on half the dtypes by
    default (alternating, so every dtype is compiled once), every mode on all of them in the slow tier."""
    params = []
    for i, dtype in enumerate(INTS):
        for j, mode in enumerate(modes):
            default = i % 2 == 0 if j == 0 else (i + j) % (len(modes) - 1 or 1) == 0
            params.append(pytest.param(dtype, mode, id=f"{np.dtype(dtype).name}-{mode}",
                                       marks=() if default else pytest.mark.slow))
    return params


def jax32():
    """JAX with 32-bit defaults: ember's defaults for Python scalars (the tests enable x64 globally)."""
    return jax.enable_x64(False)


def numpy_ref(name, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return getattr(np, name)(*args)


def assert_identical(ours, ref, what):
    """Same dtype and the same values, NaN matching NaN and zeros matching in sign."""
    ours, ref = np.asarray(ours), np.asarray(ref)
    assert ours.dtype == ref.dtype, f"{what}: dtype {ours.dtype}, numpy {ref.dtype}"
    if ours.dtype.kind != "f" and ours.dtype != bfloat16:
        bad = ours != ref
    else:
        o, r = ours.astype(np.float64), ref.astype(np.float64)
        bad = ~(((o == r) & (np.signbit(o) == np.signbit(r))) | (np.isnan(o) & np.isnan(r)))
    assert not bad.any(), f"{what}: differs at {np.argwhere(bad)[:5].tolist()}: {ours[bad][:5]} vs {ref[bad][:5]}"


# ---------------------------------------------------------------------------------------------------------------
# floor_divide, remainder, fmod, divmod of floats: numpy's npy_divmod
# (XLA on CPU flushes subnormals to zero, so the values here are normal numbers in every dtype.)
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.1, -0.1, 0.3, 2.5, -2.5, 3.0, -3.0, 7.0, 5e-3, -5e-3, 1e4, -6e4, np.inf,
           -np.inf, np.nan]


def _special_pairs(dtype):
    xs, ys = (np.array(v, np.float64) for v in zip(*itertools.product(SPECIAL, SPECIAL)))
    return xs.astype(dtype), ys.astype(dtype)


@pytest.mark.usefixtures("ember_x64")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["floor_divide", "remainder", "fmod"])
def test_float_division_matches_numpy(name, dtype, mode):
    x, y = _special_pairs(dtype)
    assert_identical(MODES[mode](getattr(enp, name))(x, y), numpy_ref(name, x, y), f"{name} {mode}")


@pytest.mark.usefixtures("ember_x64")
@pytest.mark.parametrize("mode", MODES)
def test_divmod_matches_numpy(mode):
    x, y = _special_pairs(np.float64)
    quotient, rest = MODES[mode](enp.divmod)(x, y)
    ref_q, ref_r = numpy_ref("divmod", x, y)
    assert_identical(quotient, ref_q, "divmod quotient")
    assert_identical(rest, ref_r, "divmod remainder")


def test_float_floor_division_examples():
    assert float(enp.floor_divide(1.0, 0.1)) == 9.0  # floor(1.0 / 0.1) rounds up to 10: numpy snaps to 9
    assert float(enp.asarray(1.0) // enp.asarray(0.1)) == 9.0
    assert float(enp.asarray(-1.0) // np.inf) == -1.0
    assert float(enp.asarray(-1.0) % np.inf) == np.inf
    assert np.signbit(float(enp.asarray(1.0) % -1.0)) and not np.signbit(float(enp.asarray(-1.0) % 1.0))
    x = enp.asarray(np.array([5.0, -5.0], np.float32))
    for q, r in (divmod(x, 3.0), divmod(7.0, x), enp.divmod(x, 3)):
        assert q.dtype == r.dtype == np.float32
    assert_identical(divmod(7.0, x)[1], np.remainder(np.float32(7.0), np.array([5.0, -5.0], np.float32)), "rdivmod")
    assert_identical(2 % x, np.array([2.0, -3.0], np.float32), "rmod")


def test_float_division_dtypes_follow_jax():
    for name, args in [("floor_divide", (np.ones(2, np.float16), 2.0)), ("remainder", (np.ones(2, bfloat16), 3)),
                       ("fmod", (np.ones(2, np.int32), 2.5)), ("remainder", (np.ones(2, np.bool_), True)),
                       ("floor_divide", (np.ones(2, np.uint8), np.int8(2)))]:
        ours = getattr(enp, name)(*args)
        with jax32():
            ref = getattr(jnp, name)(*args)
        assert (ours.dtype, ours.weak_type) == (ref.dtype, ref.weak_type), (name, args)


POINTS = [(3.5, 1.2), (-3.5, 1.2), (3.5, -1.2), (-3.5, -1.2), (3.0, 1.5), (-3.0, 1.5), (0.5, 2.0), (-0.5, 2.0)]


@pytest.mark.parametrize("name", ["floor_divide", "remainder", "fmod"])
def test_division_derivatives_match_jax(name):
    """JAX's conventions: floor_divide has a zero derivative; remainder's are 1 and -floor_divide(x, y)."""
    ours, theirs = getattr(enp, name), getattr(jnp, name)
    for x, y in POINTS:
        ref = jax_result(lambda: jax.grad(theirs, (0, 1))(x, y))
        for grad in (ember.grad(ours, (0, 1)), ember.jit(ember.grad(ours, (0, 1)))):
            np.testing.assert_allclose(np.asarray(grad(x, y), np.float64), np.asarray(ref, np.float64),
                                       err_msg=f"grad {name} at {x, y}")
        tangent = ember.jvp(ours, (x, y), (0.7, -1.3))[1]
        np.testing.assert_allclose(float(tangent), float(jax_result(lambda: jax.jvp(theirs, (x, y), (0.7, -1.3))[1])),
                                   rtol=1e-6)
    x = np.random.default_rng(0).normal(size=(3, 5)) * 4
    y = np.random.default_rng(1).normal(size=(3, 5))
    per_row = ember.vmap(ember.grad(lambda a, b: enp.sum(ours(a, b)), (0, 1)))(x, y)
    ref = jax_result(lambda: jax.vmap(jax.grad(lambda a, b: jnp.sum(theirs(a, b)), (0, 1)))(x, y))
    for got, want in zip(per_row, ref):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want))


@pytest.mark.usefixtures("ember_x64")
def test_float_division_batches():
    x = np.random.default_rng(2).normal(size=(4, 6)) * 10
    y = np.random.default_rng(3).normal(size=(4, 6))
    for name in ["floor_divide", "remainder", "fmod"]:
        assert_identical(ember.vmap(getattr(enp, name))(x, y), numpy_ref(name, x, y), f"vmap {name}")
        assert_identical(ember.vmap(getattr(enp, name), (0, None))(x, y[0]), numpy_ref(name, x, y[0]), name)


# ---------------------------------------------------------------------------------------------------------------
# integer division: numpy's results for division by zero (0) and INT_MIN // -1 (wraps)
def _int_pairs(dtype):
    info = np.iinfo(dtype)
    values = [0, 1, 2, 3, 7, int(info.max), int(info.max) - 1, int(info.min)]
    if info.min < 0:
        values += [-1, -2, -3, -7, int(info.min) + 1]
    xs, ys = zip(*itertools.product(values, values))
    return np.array(xs, dtype), np.array(ys, dtype)


@pytest.mark.usefixtures("ember_x64")
@pytest.mark.parametrize("dtype,mode", int_modes([*MODES, "vmap"]))
def test_integer_division_matches_numpy(dtype, mode):
    x, y = _int_pairs(dtype)
    transform = ember.vmap if mode == "vmap" else MODES[mode]
    for name in ["floor_divide", "remainder", "fmod"]:
        assert_identical(transform(getattr(enp, name))(x, y), numpy_ref(name, x, y), f"{name} {mode}")
    quotient, rest = transform(enp.divmod)(x, y)
    assert_identical(quotient, numpy_ref("floor_divide", x, y), "divmod")
    assert_identical(rest, numpy_ref("remainder", x, y), "divmod")


@pytest.mark.parametrize("mode", MODES)
def test_integer_division_by_python_scalars(mode):
    x = np.array([7, -7, 0, np.iinfo(np.int32).min, np.iinfo(np.int32).max], np.int32)
    for divisor in (0, -1, 3, -3):
        for name, op in [("floor_divide", lambda a, b: a // b), ("remainder", lambda a, b: a % b),
                         ("fmod", enp.fmod)]:
            ours = MODES[mode](lambda a: op(enp.asarray(a), divisor))(x)
            assert_identical(ours, numpy_ref(name, x, np.int32(divisor)), f"{name} by {divisor}")
    assert_identical(enp.asarray(np.array([7], np.uint8)) // 0, np.array([0], np.uint8), "uint8 // 0")


# ---------------------------------------------------------------------------------------------------------------
# integer powers: exact, wrapping as numpy
@pytest.mark.usefixtures("ember_x64")
@pytest.mark.parametrize("dtype,mode", int_modes([*MODES, "vmap"]))
def test_integer_power_matches_numpy(dtype, mode):
    info = np.iinfo(dtype)
    bases = [0, 1, 2, 3, 5, 7, 10, int(info.max)] + ([-1, -2, -3, int(info.min)] if info.min < 0 else [])
    exponents = [e for e in [0, 1, 2, 3, 5, 8, 13, 20, 31, 33, 63, 64, 100, int(info.max)] if e <= info.max]
    x, y = (a.ravel() for a in np.meshgrid(np.array(bases, dtype), np.array(exponents, dtype)))
    transform = ember.vmap if mode == "vmap" else MODES[mode]
    assert_identical(transform(enp.power)(x, y), numpy_ref("power", x, y), f"power {mode}")
    for k in (0, 1, 2, 3, 7):
        assert_identical(transform(lambda a: enp.asarray(a) ** k)(x), numpy_ref("power", x, dtype(k)), f"** {k}")


def test_integer_power_examples():
    assert int(enp.power(np.int32(3), 20)) == -808182895
    assert int(enp.power(enp.asarray(np.array([3], np.int32)), enp.asarray(np.array([20], np.int32)))[0]) \
        == -808182895
    with ember.config.override(enable_x64=True):
        assert int(enp.power(np.int64(3), np.int64(39))) == 3 ** 39
        assert int(enp.power(np.int64(-7), np.int64(21))) == (-7) ** 21
    with jax32():
        for args in [(np.ones(2, np.int8), np.ones(2, np.int32)), (np.ones(2, np.bool_), np.ones(2, np.bool_)),
                     (2, np.arange(3, dtype=np.int32)), (np.arange(3, dtype=np.uint8), 2)]:
            ours, ref = enp.power(*args), jnp.power(*args)
            assert (ours.dtype, ours.weak_type) == (ref.dtype, ref.weak_type), args
            np.testing.assert_array_equal(np.asarray(ours), np.asarray(ref))


def test_python_int_exponents_are_multiplications():
    ir = ember.make_ir(lambda a: (a ** 3, a ** 2))(np.arange(3, dtype=np.int32))
    assert sorted(eqn.prim.name for eqn in ir.eqns) == ["integer_pow", "integer_pow"]


def test_integer_negative_powers():
    x = np.array([3, -3, 1, -1, 0, 2], np.int32)
    negative = np.array([1, -1, 1, 1, 1, 1], np.int32)
    with pytest.raises(ValueError, match=r"power: integers to negative integer powers are not allowed .* "
                                         r"base i32\[6\] and exponent -2"):
        enp.asarray(x) ** -2
    with pytest.raises(ValueError, match=r"base i32\[6\] and exponent -2"):
        ember.jit(lambda a: a ** -2)(x)  # a Python int exponent is known under jit too
    with pytest.raises(ValueError, match=r"exponent i32\[6\] with negative values"):
        enp.power(x, negative)
    with pytest.raises(ValueError, match="exponent -1"):
        enp.power(2, -1)
    with pytest.raises(ValueError):
        np.power(x, negative)  # the oracle agrees
    # a traced exponent cannot be checked: the truncated 1 / x ** -y (0 for x == 0), documented in the guide
    traced = ember.jit(enp.power)(x, np.array([-1, -3, -2, -3, -1, -2], np.int32))
    np.testing.assert_array_equal(np.asarray(traced), [0, 0, 1, -1, 0, 0])
    assert float(enp.power(np.float32(2), -2)) == 0.25  # float powers are unchanged


# ---------------------------------------------------------------------------------------------------------------
# half-precision sums accumulate in float32 and give their dtype back (as JAX)
@pytest.mark.parametrize("dtype,mode", [  # (each dtype in one mode by default, in both with -m slow)
    pytest.param(d, m, id=f"{np.dtype(d).name}-{m}", marks=() if (i + j) % 2 == 0 else pytest.mark.slow)
    for i, d in enumerate([np.float16, bfloat16]) for j, m in enumerate(MODES)])
def test_half_precision_reductions_accumulate_in_float32(dtype, mode):
    ones = np.ones(100000, dtype)
    for name, want in [("mean", 1.0), ("var", 0.0), ("std", 0.0)]:
        out = MODES[mode](getattr(enp, name))(ones)
        assert out.dtype == dtype and float(out) == want, (name, out)
    x = (np.random.default_rng(0).normal(size=(300, 40)) + 1.5).astype(dtype)
    exact = x.astype(np.float64)
    for name in ["sum", "mean", "var", "std"]:
        for kwargs in [{}, {"axis": 0}, {"axis": 1, "keepdims": True}]:
            out = MODES[mode](lambda a: getattr(enp, name)(a, **kwargs))(x)
            ref = getattr(np, name)(exact, **kwargs)
            assert out.dtype == dtype and out.shape == ref.shape
            np.testing.assert_allclose(np.asarray(out, np.float64), ref, rtol=ml_dtypes.finfo(dtype).eps,
                                       err_msg=f"{name}{kwargs}")
    np.testing.assert_array_equal(np.asarray(MODES[mode](enp.sum)(np.ones(3000, dtype))),
                                  np.float32(3000).astype(dtype))  # a sum in the dtype itself stalls at 256/2048


def _reduce_sum_dtypes(ir):
    """The operand dtypes of every reduce_sum in an IR and the IRs its equations carry."""
    found = []
    for eqn in ir.eqns:
        if eqn.prim.name == "reduce_sum":
            found.append(eqn.inputs[0].aval.dtype)
        for value in eqn.params.values():
            if isinstance(value, ember.IR):
                found += _reduce_sum_dtypes(value)
    return found


@pytest.mark.parametrize("dtype", [np.float16, bfloat16], ids=lambda d: np.dtype(d).name)
def test_half_precision_sums_are_staged_in_float32(dtype):
    """Whatever the backend does with a half-precision reduction, ember asks for a float32 one."""
    x = np.ones((4, 3), dtype)
    functions = [enp.sum, enp.mean, enp.var, enp.std, enp.logsumexp, lambda a: a.sum(0),
                 ember.grad(lambda a: enp.max(a).astype(np.float32)),
                 ember.grad(lambda a: enp.logsumexp(a).astype(np.float32)),
                 ember.grad(lambda a: enp.std(a).astype(np.float32))]
    for fn in functions:
        dtypes = _reduce_sum_dtypes(ember.make_ir(fn)(x))
        assert dtypes and all(d == np.float32 for d in dtypes), (fn, dtypes)


def test_reduction_dtypes_follow_jax():
    x16 = np.linspace(0, 10, 30).astype(np.float16).reshape(5, 6)
    ints = np.arange(12, dtype=np.int32).reshape(3, 4)
    cases = [("mean", ints, {}), ("var", ints, {"axis": 0}), ("std", ints, {}), ("mean", x16, {"dtype": np.float32}),
             ("sum", x16, {"dtype": np.float32}), ("var", x16, {"dtype": np.float32}),
             ("mean", ints, {"dtype": np.float16}), ("mean", np.ones(3, np.bool_), {}), ("sum", x16, {"axis": 1}),
             ("mean", ints, {"dtype": np.int32}), ("sum", ints, {"dtype": bfloat16})]
    for name, x, kwargs in cases:
        ours = getattr(enp, name)(x, **kwargs)
        with jax32():
            ref = jax_result(lambda: getattr(jnp, name)(x, **kwargs))
        assert ours.dtype == ref.dtype, (name, x.dtype, kwargs, ours.dtype, ref.dtype)
        np.testing.assert_allclose(np.asarray(ours, np.float64), np.asarray(ref, np.float64), rtol=1e-3)
    assert enp.mean(np.array([1, 2], np.int32), dtype=np.int32) == np.mean(np.array([1, 2]), dtype=np.int32)
    with pytest.raises(ValueError, match="var: the dtype argument must be a floating-point or complex dtype"):
        enp.var(ints, dtype=np.int32)
    with pytest.raises(TypeError, match="std: the out argument is not supported"):
        enp.std(ints, out=np.zeros(()))
    np.testing.assert_allclose(np.asarray(enp.var(x16, 0, np.float32, None, 1)),
                               np.var(x16.astype(np.float32), 0, ddof=1), rtol=1e-6)


def test_half_precision_reduction_derivatives():
    grad = ember.grad(lambda a: enp.mean(a))(np.ones(10, np.float16))
    assert grad.dtype == np.float16
    np.testing.assert_allclose(np.asarray(grad, np.float32), 0.1, rtol=1e-3)
    x = np.arange(4, dtype=np.float16)
    ours = ember.jit(ember.grad(lambda a: enp.var(a).astype(np.float32)))(x)
    ref = jax_result(lambda: jax.grad(lambda a: jnp.var(a).astype(np.float32))(x))
    np.testing.assert_array_equal(np.asarray(ours, np.float32), np.asarray(ref, np.float32))
    means = ember.vmap(enp.mean)(np.ones((3, 100000), bfloat16))
    np.testing.assert_array_equal(np.asarray(means, np.float32), [1.0, 1.0, 1.0])


def test_max_derivative_counts_ties_exactly():
    """The derivative of max is split evenly among ties: 1/1000 each, however many ties the dtype can count."""
    for dtype in (bfloat16, np.float16):
        grad = ember.grad(lambda a: enp.max(a).astype(np.float32))(np.ones(1000, dtype))
        ref = jax_result(lambda: jax.grad(lambda a: jnp.max(a).astype(np.float32))(np.ones(1000, dtype)))
        np.testing.assert_array_equal(np.asarray(grad, np.float32), np.asarray(ref, np.float32))
        np.testing.assert_allclose(np.asarray(grad, np.float64).sum(), 1.0, rtol=1e-2)


def test_logsumexp_accumulates_half_precision_in_float32():
    zeros = np.zeros(100000, bfloat16)
    out = enp.logsumexp(zeros)
    assert out.dtype == bfloat16
    np.testing.assert_allclose(float(out), np.log(100000.0), rtol=1e-2)  # a bfloat16 sum stalls at 256
    grad = ember.grad(lambda a: enp.logsumexp(a).astype(np.float32))(np.zeros(4000, np.float16))
    np.testing.assert_allclose(np.asarray(grad, np.float64).sum(), 1.0, rtol=1e-2)


# ---------------------------------------------------------------------------------------------------------------
# argmax/argmin: the first NaN, as numpy
NAN_ROWS = [[1.0, np.nan, 3.0], [3.0, np.nan, 1.0], [np.nan, 1.0, 2.0], [1.0, 2.0, np.nan], [np.nan, np.nan, 0.0],
            [-np.inf, np.inf, np.nan], [2.0, 2.0, 1.0], [1.0, -0.0, 0.0]]


def _nan_propagating(extreme):
    """max/min as XLA gives them with NaN propagation on: NaN for any slice holding one."""
    def fn(a, axis, keepdims=False):
        return enp.where(enp.any(a != a, axis, keepdims=keepdims), np.nan, extreme(a, axis, keepdims=keepdims))
    return fn


@pytest.mark.parametrize("propagating,mode", [(False, "eager"), (False, "jit"), (False, "vmap"), (True, "eager"),
                                              pytest.param(True, "jit", marks=pytest.mark.slow),
                                              pytest.param(True, "vmap", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_extremes_pick_the_first_nan(name, propagating, mode):
    fn = getattr(enp, name)
    if propagating:  # whatever the max of a slice with NaN is, the answer is the first NaN
        fn = reductions._arg_extreme(name, _nan_propagating(enp.max if name == "argmax" else enp.min))
    for dtype in (np.float32, np.float64, np.float16):
        m = np.array(NAN_ROWS, dtype)
        if mode == "vmap":
            assert_identical(ember.vmap(fn)(m), getattr(np, name)(m, axis=1).astype(np.int32), name)
            continue
        for axis in (0, 1, None):
            ours = MODES[mode](lambda a: fn(a, axis))(m)
            assert_identical(ours, np.asarray(getattr(np, name)(m, axis=axis)).astype(np.int32), f"{name} {axis}")
        keep = MODES[mode](lambda a: fn(a, 1, keepdims=True))(m)
        assert_identical(keep, getattr(np, name)(m, axis=1, keepdims=True).astype(np.int32), f"{name} keepdims")


# ---------------------------------------------------------------------------------------------------------------
# neighbours
@pytest.mark.parametrize("mode", MODES)
def test_neighbouring_edge_cases(mode):
    run = MODES[mode]
    int_min = np.array([np.iinfo(np.int32).min, -5, 5], np.int32)
    assert_identical(run(enp.abs)(int_min), np.abs(int_min), "abs of INT_MIN wraps")
    floats = np.array([np.nan, -np.inf, -2.0, -0.0, 0.0, 3.0, np.inf], np.float32)
    np.testing.assert_array_equal(np.asarray(run(enp.sign)(floats)), np.sign(floats))
    ints = np.array([7, -7], np.int32)
    divided = run(enp.true_divide)(ints, np.array([2, 0], np.int32))
    assert divided.dtype == np.float32  # as JAX's 32-bit mode; numpy gives float64
    np.testing.assert_array_equal(np.asarray(divided), [3.5, -np.inf])
    assert_identical(run(enp.fmod)(ints, np.array([0, 0], np.int32)), np.array([0, 0], np.int32), "fmod by 0")
    assert_identical(run(enp.fmod)(np.float32(5.0), np.float32(0.0)), numpy_ref("fmod", np.float32(5), np.float32(0)),
                     "fmod by 0.0")


@pytest.mark.usefixtures("ember_x64")
@pytest.mark.parametrize("mode", MODES)
def test_exp2_is_accurate(mode):
    """exp2 as exp(x * log(2)) was off by up to 16 ulps in float32 and inexact at integers."""
    ints = np.arange(-126, 127, dtype=np.float32)
    assert_identical(MODES[mode](enp.exp2)(ints), np.exp2(ints), "exp2 of integers")
    for dtype, tolerance in [(np.float32, 2 ** -23), (np.float64, 2 ** -51)]:
        x = np.random.default_rng(0).uniform(-60, 60, 10000).astype(dtype)
        exact = np.exp2(x.astype(np.float64))
        np.testing.assert_allclose(np.asarray(MODES[mode](enp.exp2)(x), np.float64), exact, rtol=tolerance, atol=0)
    grad = ember.grad(lambda v: enp.sum(enp.exp2(v)))(np.array([0.5, 3.0, -2.0]))
    np.testing.assert_allclose(np.asarray(grad), np.log(2) * np.exp2([0.5, 3.0, -2.0]), rtol=1e-14)


# ---------------------------------------------------------------------------------------------------------------
# Cases the fuzz of ember.numpy (tests/reliability/test_fuzz_numpy.py) found, against numpy's values and JAX's
# dtypes and weak types
def _jax_like(ours, ref):
    """ours has JAX's dtype and weak type (ref is JAX's result)."""
    assert type(ours) is ember.Array, f"returned a {type(ours).__name__}, not an Array"
    assert ours.dtype == ref.dtype and ours.shape == ref.shape, (ours, ref)
    assert ours.aval.weak_type == ref.weak_type, (ours.aval, ref.dtype, ref.weak_type)


@pytest.mark.parametrize("mode", MODES)
def test_abs_and_square_of_booleans(mode):
    """abs of booleans is the identity (bool); square of booleans is 1 where True, in JAX's dtype (the default
    integer, numpy: int8)."""
    values = [np.array([True, False]), np.bool_(True), True]
    for name in ("abs", "absolute", "square"):
        for x in values:
            ours = MODES[mode](getattr(enp, name))(x)
            with jax32():
                ref = getattr(jnp, name)(x)
            _jax_like(ours, ref)
            np.testing.assert_array_equal(np.asarray(ours), numpy_ref(name, np.asarray(x)).astype(ours.dtype))
    assert enp.square(enp.array([True, False])).dtype == np.int32
    # the derivative of square is unchanged
    assert float(ember.grad(enp.square)(3.0)) == 6.0


@pytest.mark.parametrize("name", ["positive", "round"])
def test_positive_and_round_give_arrays(name):
    """positive(x), and round(x) of a non-float, are x as an ember Array: Python scalars weakly typed (JAX)."""
    for x in (3, 2.5, np.int8(3), np.float32(2.5), np.array([1, 2], np.int16), np.array([True, False])):
        if name == "round" and np.asarray(x).dtype == bool:
            continue  # JAX refuses round of booleans
        ours = getattr(enp, name)(x)
        with jax32():
            ref = getattr(jnp, name)(x)
        _jax_like(ours, ref)
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(ref))
    assert type(ember.jit(getattr(enp, name))(3)) is ember.Array


@pytest.mark.usefixtures("ember_x64")
@pytest.mark.parametrize("mode,name", [  # (each function eagerly, every other one under jit too; all with -m slow)
    pytest.param(m, n, id=f"{m}-{n}", marks=() if m == "eager" or i % 2 == 0 else pytest.mark.slow)
    for m in MODES for i, n in enumerate(["arctan2", "logaddexp", "true_divide", "power"])])
def test_binary_float_functions_promote_before_making_inexact(name, mode):
    """Integer with float16 / bfloat16 / float64 operands: the operands are promoted together, then the common
    dtype made inexact (JAX's rule): int8 with float16 is float16, int32 with float64 keeps the int's digits."""
    fn = MODES[mode](getattr(enp, name))
    for int_dtype, float_dtype in [(np.int8, np.float16), (np.uint8, bfloat16), (np.int32, np.float64),
                                   (np.int64, np.float16)]:
        x = np.array([3, 2 ** 24 + 1 if int_dtype == np.int32 else 5], int_dtype)
        y = np.array([2, 1], float_dtype)
        for a, b in ((x, y), (y, x)):
            ours = fn(a, b)
            with jax.enable_x64(np.dtype(int_dtype).itemsize == 8 or float_dtype == np.float64):
                ref = getattr(jnp, name)(a, b)
            _jax_like(ours, ref)
            want = numpy_ref(name, a.astype(np.float64), b.astype(np.float64)).astype(ref.dtype)
            np.testing.assert_allclose(np.asarray(ours).astype(np.float64), want.astype(np.float64), rtol=4e-3)
    if name == "arctan2":  # int32 with float64: computed in float64, not in float32 first
        got = float(fn(np.array([2 ** 24 + 1], np.int32), np.array([2 ** 60], np.float64))[0])
        assert got == np.arctan2(2.0 ** 24 + 1, 2.0 ** 60)


@pytest.mark.parametrize("mode", MODES)
def test_integer_division_by_out_of_range_python_ints(mode):
    """An integer array divided by (or dividing) a Python int its dtype cannot hold divides in float, as numpy and
    JAX (uint8 / -1 is -0.0 at 0), not an OverflowError."""
    cases = [(np.array([0, 3, 255], np.uint8), -1), (np.array([-128, 3, 127], np.int8), 1000),
             (np.array([1, 3, 127], np.int8), -1000), (np.array([1, 2], np.int16), 2 ** 20)]
    for x, k in cases:
        for args in ((x, k), (k, x)):
            ours = MODES[mode](enp.true_divide)(*args)
            with jax32():
                ref = jnp.true_divide(*args)
            _jax_like(ours, ref)
            want = numpy_ref("true_divide", *(np.asarray(a, np.float64) for a in args)).astype(ref.dtype)
            assert_identical(ours, want, f"true_divide{args}")


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("mode", MODES)
def test_arg_extremes_keepdims_without_axis(name, mode):
    """axis=None with keepdims=True gives shape (1,) * ndim (numpy, JAX)."""
    for x in (np.arange(6.0).reshape(2, 3), np.arange(24).reshape(2, 3, 4)[::-1], np.float32(2), np.arange(3)):
        ours = MODES[mode](lambda a: getattr(enp, name)(a, keepdims=True))(x)
        ref = getattr(np, name)(x, keepdims=True)
        assert ours.shape == ref.shape == jax_result(lambda: getattr(jnp, name)(x, keepdims=True)).shape
        np.testing.assert_array_equal(np.asarray(ours), ref)


@pytest.mark.parametrize("mode", MODES)
def test_python_floats_beyond_the_dtype_range_become_inf(mode):
    """A weak Python float too large for the array's dtype converts to +-inf (with numpy's "overflow encountered in
    cast" warning, as JAX)."""
    x = enp.array([1.0, -2.0], enp.float16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        products = [MODES[mode](lambda a: a * 1e300)(x), MODES[mode](lambda a, b: a * b)(x, 1e300),
                    MODES[mode](lambda a: enp.add(a, -1e300))(x), x * 1e300]
    for got, want in zip(products, ([np.inf, -np.inf],) * 2 + ([-np.inf, -np.inf], [np.inf, -np.inf])):
        assert got.dtype == np.float16
        np.testing.assert_array_equal(np.asarray(got), want)


def test_array_of_python_scalars_is_weakly_typed():
    """enp.array and enp.asarray of a Python int or float are weakly typed (as jnp.array / jnp.asarray in JAX
    0.10); booleans, lists, numpy values and an explicit dtype are not."""
    for fn, jfn in ((enp.array, jnp.array), (enp.asarray, jnp.asarray)):
        for x in (1.0, 3, True, [1.0], np.float32(1)):
            with jax32():
                ref = jfn(x)
            _jax_like(fn(x), ref)
        assert not fn(1.0, dtype=np.float32).aval.weak_type
    assert (enp.array(1.0) + enp.ones(2, enp.float16)).dtype == np.float16
