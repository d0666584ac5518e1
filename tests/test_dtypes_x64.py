"""Dtype promotion and 64-bit correctness, eagerly, under jit and under transformations.

JAX's rules: without 64-bit mode, 64-bit values and dtypes are narrowed to 32 bits where they enter ember
(tests/test_dtype_defaults.py) and promotion is JAX's 32-bit one; the IR itself is exact, so a program staged at
64-bit avals (stage_out) promotes as JAX's 64-bit mode. Python scalars are weak (and 32-bit), Python lists 32-bit.
With `ember.config.enable_x64` on, every dtype is kept, Python scalars, lists and default dtypes are 64-bit and
every promotion is JAX's 64-bit one. JAX is the oracle for dtypes (jax.eval_shape, no compiling), numpy for
values; the tests of 64-bit values run in 64-bit mode."""
import itertools
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import ShapedArray
from ember._core import dtypes as dt
from recorded import jax_result

NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bfloat16", "float16",
         "float32", "float64"]
DTYPES = [np.dtype(ml_dtypes.bfloat16) if n == "bfloat16" else np.dtype(n) for n in NAMES]
SCALAR_TYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
                ml_dtypes.bfloat16, np.float16, np.float32, np.float64]


@pytest.fixture
def x64_mode():
    """The tests of 64-bit values run in 64-bit mode (without it no value is 64-bit, as in JAX)."""
    with ember.config.override(enable_x64=True):
        yield


def is64(*dtypes):
    return any(np.dtype(d).itemsize == 8 for d in dtypes)


def ember_out(fun, *dtypes, shape=(2,)):
    """(dtype, weak_type) of fun's output, staged out (as jit does) at arrays of these dtypes."""
    ir = ember.stage_out(fun, *(ShapedArray(shape, d) for d in dtypes))
    aval = ir.outs[0].aval
    return aval.dtype, aval.weak_type


def jax_out(fun, *dtypes, wide, shape=(2,)):
    with jax.enable_x64(wide):
        out = jax.eval_shape(fun, *(jax.ShapeDtypeStruct(shape, d) for d in dtypes))
    return np.dtype(out.dtype), bool(out.weak_type)


def mismatches(cases):
    return [f"{label}: ember {ours[0]}{' weak' if ours[1] else ''}, jax {ref[0]}{' weak' if ref[1] else ''}"
            for label, ours, ref in cases if ours != ref]


# ---------------------------------------------------------------------------------------------------------------
# The promotion table, over all pairs of dtypes.
def test_array_array_pairs_match_jax():
    """Staged at these avals (64-bit ones too: the IR is exact) the sum is JAX's in the mode of its operands, as
    promote_types (the lattice's, as jax.numpy's); result_type gives the dtype a value has: narrowed."""
    cases = []
    for a, b in itertools.product(DTYPES, DTYPES):
        ref = jax_out(jnp.add, a, b, wide=is64(a, b))
        cases.append((f"{a.name} + {b.name}", ember_out(enp.add, a, b), ref))
        cases.append((f"promote_types({a.name}, {b.name})", (enp.promote_types(a, b), ref[1]), ref))
        cases.append((f"result_type({a.name}, {b.name})", (enp.result_type(a, b), ref[1]),
                      (dt.canonical_dtype(ref[0]), ref[1])))
    assert not mismatches(cases), "\n".join(mismatches(cases))


def test_array_array_pairs_match_jax_x64_with_enable_x64():
    cases = []
    with ember.config.override(enable_x64=True):
        for a, b in itertools.product(DTYPES, DTYPES):
            cases.append((f"{a.name} + {b.name}", ember_out(enp.add, a, b), jax_out(jnp.add, a, b, wide=True)))
    assert not mismatches(cases), "\n".join(mismatches(cases))


@pytest.mark.parametrize("x64", [False, True])
def test_array_python_scalar_pairs(x64):
    """Python scalars are weak: JAX's result in the mode of the array (64-bit arrays: its 64-bit mode), or in its
    64-bit mode with enable_x64."""
    cases = []
    with ember.config.override(enable_x64=x64):
        for d, scalar in itertools.product(DTYPES, [True, 3, 2.5]):
            for label, fun in [(f"{d.name} + {scalar!r}", lambda x: x + scalar),
                               (f"{scalar!r} * {d.name}", lambda x: scalar * x),
                               (f"where(., {d.name}, {scalar!r})", lambda x: enp.where(x == x, x, scalar))]:
                jfun = (lambda x: jnp.where(x == x, x, scalar)) if label.startswith("where") else fun
                cases.append((label, ember_out(fun, d), jax_out(jfun, d, wide=x64 or is64(d))))
    assert not mismatches(cases), "\n".join(mismatches(cases))


@pytest.mark.parametrize("x64", [False, True])
def test_array_numpy_scalar_pairs(x64):
    """numpy scalars are typed: an array with np.float32(2) promotes as with a float32 array; np.float64(2) is
    a float32 one without 64-bit mode (as JAX's), a float64 one with it."""
    cases = []
    with ember.config.override(enable_x64=x64):
        for d, kind in itertools.product(DTYPES, SCALAR_TYPES):
            if not x64 and is64(d):
                continue  # (no array is 64-bit without 64-bit mode)
            _numpy_scalar_cases(cases, d, kind, wide=x64)
    assert not mismatches(cases), "\n".join(mismatches(cases))


def _numpy_scalar_cases(cases, d, kind, wide):
    scalar = kind(1)
    cases.append((f"{d.name} * {kind.__name__}(1)", ember_out(lambda x: x * scalar, d),
                  jax_out(lambda x: x * scalar, d, wide=wide)))
    if not d == np.dtype(kind) == np.bool_:  # (bool - bool is refused, as in numpy and JAX)
        cases.append((f"{kind.__name__}(1) - {d.name}", ember_out(lambda x: enp.subtract(scalar, x), d),
                      jax_out(lambda x: jnp.subtract(scalar, x), d, wide=wide)))
    zero_d = np.array(1, kind)
    cases.append((f"{d.name} + 0-d {kind.__name__}", ember_out(lambda x: x + zero_d, d),
                  jax_out(lambda x: x + zero_d, d, wide=wide)))


def test_the_rule_in_words_without_x64():
    f32, f16, i32, u32 = (enp.ones(3, d) for d in ("float32", "float16", "int32", "uint32"))
    assert (f32 * np.float64(2)).dtype == np.float32            # np.float64(2) is a float32 value here
    assert (f16 * np.float64(2)).dtype == np.float32            # (typed: float16 * float32)
    assert enp.asarray(np.arange(3, dtype=np.int64)).dtype == np.int32
    assert (i32 / i32).dtype == np.float32
    assert (u32 + i32).dtype == np.int32                        # as JAX's 32-bit mode
    assert (i32 * 2.5).dtype == np.float32 and (i32 * 2.5).weak_type
    assert enp.array([1.5, 2.0]).dtype == np.float32 and enp.array([1, 2]).dtype == np.int32
    assert enp.array([np.float64(1), 2.0]).dtype == np.float32
    assert enp.array([np.float16(1), 2.0]).dtype == np.float16
    assert ember.jit(lambda x: x * np.float64(2))(f32).dtype == np.float32
    assert ember.jit(lambda x: x)(np.ones(2)).dtype == np.float32


def test_the_rule_in_words_with_x64():
    with ember.config.override(enable_x64=True):
        f32, i32, u32 = (enp.ones(3, d) for d in ("float32", "int32", "uint32"))
        i64 = enp.asarray(np.arange(3, dtype=np.int64))
        u64 = enp.asarray(np.arange(3, dtype=np.uint64))
        assert (f32 * np.float64(2)).dtype == np.float64          # as numpy 2
        assert (np.float64(2) * f32).dtype == np.float64
        assert (f32 * np.float32(2)).dtype == np.float32
        assert (i64 / i64).dtype == np.float64
        assert (i64 * 2.5).dtype == np.float64 and (i64 * 2.5).weak_type
        assert (i64 + u64).dtype == np.float64                     # as JAX's 64-bit mode
        assert (i32 / i32).dtype == np.float32                     # (JAX's table: int32 -> float32)
        assert (u32 + i32).dtype == np.int64                       # as JAX's 64-bit mode
        assert (u32 + i64).dtype == np.int64
        assert (i32 * 2.5).dtype == np.float64 and (i32 * 2.5).weak_type
        assert enp.array([1.5, 2.0]).dtype == np.float64 and enp.array([1, 2]).dtype == np.int64
        assert enp.array([np.float64(1), 2.0]).dtype == np.float64  # a typed numpy scalar counts
        assert enp.array([np.float16(1), 2.0]).dtype == np.float16
        assert ember.jit(lambda x: x * np.float64(2))(f32).dtype == np.float64


# ---------------------------------------------------------------------------------------------------------------
# Unary functions and reductions.
UNARY = {
    "sqrt": (enp.sqrt, jnp.sqrt), "exp": (enp.exp, jnp.exp), "sin": (enp.sin, jnp.sin), "log1p": (enp.log1p, jnp.log1p),
    "tan": (enp.tan, jnp.tan), "log2": (enp.log2, jnp.log2), "isfinite": (enp.isfinite, jnp.isfinite),
    "floor": (enp.floor, jnp.floor), "ceil": (enp.ceil, jnp.ceil), "trunc": (enp.trunc, jnp.trunc),
    "rint": (enp.rint, jnp.rint), "round": (enp.round, jnp.round), "abs": (enp.abs, jnp.abs),
    "reciprocal": (enp.reciprocal, jnp.reciprocal),
    "true_divide": (lambda x: enp.true_divide(x, x), lambda x: jnp.true_divide(x, x)),
    "divide by 2": (lambda x: x / 2, lambda x: x / 2),
    "arctan2": (lambda x: enp.arctan2(x, x), lambda x: jnp.arctan2(x, x)),
    "logaddexp": (lambda x: enp.logaddexp(x, x), lambda x: jnp.logaddexp(x, x)),
    "sum": (enp.sum, jnp.sum), "mean": (enp.mean, jnp.mean), "var": (enp.var, jnp.var), "std": (enp.std, jnp.std),
    "max": (enp.max, jnp.max), "argmax": (enp.argmax, jnp.argmax), "logsumexp": (enp.logsumexp, jax.nn.logsumexp),
}


@pytest.mark.parametrize("x64", [False, True])
def test_unary_functions_and_reductions_match_jax(x64):
    cases = []
    with ember.config.override(enable_x64=x64):
        for d in DTYPES:
            for name, (ours, theirs) in UNARY.items():
                if d == np.bool_ and name in ("round", "logsumexp"):
                    continue  # JAX refuses these on booleans
                ref = jax_out(theirs, d, wide=x64 or is64(d))
                if name == "argmax":  # indices are of the default int dtype (JAX's 64-bit mode: always int64)
                    ref = (dt.default_int_dtype(), False)
                cases.append((f"{name}({d.name})", ember_out(ours, d), ref))
    assert not mismatches(cases), "\n".join(mismatches(cases))


@pytest.mark.usefixtures("x64_mode")
@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "fix", "round", "around"])
def test_rounding_keeps_integer_dtypes(name):
    for d in ("int8", "int32", "int64", "uint8", "uint64", "bool"):
        x = np.array([0, 1, 1] if d == "bool" else [-3, 0, 7] if d[0] == "i" else [0, 7, 9], d)
        got = getattr(enp, name)(x)
        assert got.dtype == np.dtype(d), f"{name}({d}) is {got.dtype}"
        np.testing.assert_array_equal(np.asarray(got), getattr(np, name)(x))
    big = np.array([2 ** 62 + 1, -(2 ** 62) - 1], np.int64)
    np.testing.assert_array_equal(np.asarray(getattr(enp, name)(big)), big)
    floats = np.array([-2.5, -1.5, -0.4, 0.5, 1.7], np.float32)
    np.testing.assert_array_equal(np.asarray(getattr(enp, name)(floats)), getattr(np, name)(floats))


def test_rint_of_integers_is_float_as_numpy_and_jax():
    assert enp.rint(np.array([1, 2], np.int32)).dtype == np.float32
    with ember.config.override(enable_x64=True):
        assert enp.rint(np.array([2 ** 40 + 1], np.int64)).dtype == np.float64
    np.testing.assert_array_equal(np.asarray(enp.rint(np.array([-2.5, 0.5, 1.5], np.float32))), [-2.0, 0.0, 2.0])


# ---------------------------------------------------------------------------------------------------------------
# 64-bit values are exact.
I64 = np.array([2 ** 62 + 1, -(2 ** 62) - 3, 2 ** 53 + 1, 7], np.int64)
U64 = np.array([2 ** 64 - 1, 2 ** 63 + 5, 2 ** 53 + 1, 7], np.uint64)

EXACT = [
    ("int64 + python int", lambda x: x + 2 ** 61, I64),
    ("int64 - np.int64", lambda x: x - np.int64(2 ** 62), I64),
    ("int64 * 3", lambda x: x * 3, I64),
    ("int64 // 3", lambda x: x // 3, I64),
    ("int64 % 1000", lambda x: x % 1000, I64),
    ("int64 max", lambda x: enp.maximum(x, 2 ** 62), I64),
    ("int64 > 2**62", lambda x: x > 2 ** 62, I64),
    ("int64 == np.int64", lambda x: x == np.int64(2 ** 62 + 1), I64),
    ("int64 where", lambda x: enp.where(x > 0, x, np.int64(-(2 ** 62))), I64),
    ("int64 sum", lambda x: enp.sum(x[:2]), I64),
    ("int64 abs", lambda x: enp.abs(x), I64),
    ("int64 negative", lambda x: -x, I64),
    ("uint64 - 1", lambda x: x - 1, U64),
    ("uint64 + np.uint64", lambda x: x + np.uint64(0), U64),
    ("uint64 // 2", lambda x: x // 2, U64),
    ("uint64 % 10", lambda x: x % 10, U64),
    ("uint64 >= 2**64 - 1", lambda x: x >= 2 ** 64 - 1, U64),
    ("uint64 max", lambda x: enp.max(x), U64),
    ("uint64 minimum", lambda x: enp.minimum(x, np.uint64(2 ** 63 + 6)), U64),
    ("uint64 * 1", lambda x: x * 1, U64),
]


@pytest.mark.usefixtures("x64_mode")
@pytest.mark.parametrize("label,fun,x", EXACT, ids=[c[0] for c in EXACT])
def test_64_bit_integers_are_exact(label, fun, x):
    expected = fun(x)
    for how, run in [("eager", lambda: fun(enp.asarray(x))), ("jit", lambda: ember.jit(fun)(x)),
                     ("vmap", lambda: ember.vmap(fun)(x[None]))]:
        got = np.asarray(run())
        if how == "vmap":
            got = got[0]
        assert got.dtype == expected.dtype, f"{label} ({how}): dtype {got.dtype}, numpy {expected.dtype}"
        np.testing.assert_array_equal(got, expected, err_msg=f"{label} ({how})")


@pytest.mark.usefixtures("x64_mode")
def test_64_bit_integers_to_float64():
    x = np.array([2 ** 40 + 1, 2 ** 40 + 2, 3], np.int64)
    for got, expected in [(enp.mean(x[:2]), np.mean(x[:2])), (enp.asarray(x) / 3, x / 3),
                          (enp.asarray(x) * 2.5, x * 2.5), (enp.sqrt(x), np.sqrt(x)), (enp.var(x), np.var(x)),
                          (enp.std(x), np.std(x)),
                          (enp.arctan2(x, x[::-1]), np.arctan2(x, x[::-1]))]:
        assert got.dtype == np.float64
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-15)
    assert float(enp.mean(x[:2])) == 2 ** 40 + 1.5  # (float32 would say 1099511627776.0)
    u = np.array([2 ** 64 - 1, 2 ** 63], np.uint64)
    assert (enp.asarray(u) * 1.0).dtype == np.float64
    np.testing.assert_array_equal(np.asarray(enp.asarray(u) * 1.0), u.astype(np.float64))
    i = np.array([2 ** 62 + 1], np.int64)
    np.testing.assert_array_equal(np.asarray(enp.asarray(i) + np.array([2 ** 63 + 5], np.uint64)),
                                  np.array([2.0 ** 62 + 2.0 ** 63]))


@pytest.mark.usefixtures("x64_mode")
def test_64_bit_under_transformations():
    x = np.array([1.5, -2.0], np.float32)
    f = lambda v: enp.sum(v * np.float64(3.0))  # noqa: E731
    out, grad = ember.value_and_grad(f)(x)
    assert out.dtype == np.float64 and grad.dtype == np.float32
    np.testing.assert_allclose(np.asarray(grad), [3.0, 3.0])
    assert ember.jit(ember.grad(f))(x).dtype == np.float32
    assert ember.vmap(lambda v: v * np.float64(2))(x).dtype == np.float64
    _, tangent = ember.jvp(lambda v: v * np.float64(2), (x,), (np.ones(2, np.float32),))
    assert tangent.dtype == np.float64
    i = np.array([2 ** 62 + 1, 5], np.int64)
    assert ember.vmap(lambda v: v / 2)(i).dtype == np.float64
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda v: v + 2 ** 61)(i)), i + 2 ** 61)


# ---------------------------------------------------------------------------------------------------------------
# numpy scalars are ordinary, typed operands everywhere.
BINARY = ["add", "subtract", "multiply", "true_divide", "floor_divide", "remainder", "maximum", "minimum", "equal",
          "not_equal", "less", "less_equal", "greater", "greater_equal", "arctan2", "logaddexp", "power"]
BITWISE = ["bitwise_and", "bitwise_or", "bitwise_xor"]
SAMPLE = [np.dtype(d) for d in ("bool", "int8", "int32", "int64", "uint8", "uint32", "float16", "float32", "float64")]


@pytest.mark.usefixtures("x64_mode")
@pytest.mark.parametrize("samples", [SAMPLE[::2], pytest.param(SAMPLE[1::2], marks=pytest.mark.slow)],
                         ids=["even", "odd"])
def test_numpy_scalars_in_every_binary_op_match_jax_dtypes(samples):
    """In 64-bit mode, against JAX's (half the array dtypes in the default run, the others with -m slow)."""
    cases = []
    for name, d, kind in itertools.product(BINARY + BITWISE, samples, SCALAR_TYPES):
        k = np.dtype(kind)
        if name in ("power", "subtract", "floor_divide", "remainder") and d == k == np.bool_:
            continue  # (subtract refused, as in numpy and JAX; the others of two booleans are not supported yet)
        scalar = kind(1)
        for x_first in (True, False):
            if name == "power" and x_first and not dt.is_float(k):
                continue  # JAX takes a concrete integer exponent as integer_pow (x's dtype); ember promotes (numpy)
            args = (lambda x: (x, scalar)) if x_first else (lambda x: (scalar, x))
            label = f"{name}({d.name}, {kind.__name__})" if x_first else f"{name}({kind.__name__}, {d.name})"
            ours = or_error(ember_out, lambda x: getattr(enp, name)(*args(x)), d)
            theirs = or_error(jax_out, lambda x: getattr(jnp, name)(*args(x)), d, wide=True)
            if theirs[0] == np.bool_:  # (JAX marks a comparison of operands promoted to a weak type weak)
                theirs = (theirs[0], False)
            cases.append((label, ours, theirs))
    assert not mismatches(cases), "\n".join(mismatches(cases))


def or_error(out, *args, **kwargs):
    """(dtype, weak) of the output, or ("refused", False) where the op refuses its operands with a TypeError."""
    try:
        return out(*args, **kwargs)
    except TypeError:
        return "refused", False


def _scalar_params():
    """(kind, how): each scalar type in one way by default, in turn under jit, eagerly, under jit, under vmap (every
    other type under jit), the other combinations in the slow tier."""
    for i, kind in enumerate(SCALAR_TYPES):
        for how in ("eager", "jit", "vmap"):
            quick = how == ("jit", "eager", "jit", "vmap")[i % 4]
            yield pytest.param(kind, how, id=f"{kind.__name__}-{how}", marks=() if quick else pytest.mark.slow)


@pytest.mark.parametrize("kind,how", _scalar_params())
def test_numpy_scalars_eagerly_and_under_jit(kind, how):
    """Values and dtypes against JAX (in its 64-bit mode for a 64-bit scalar); m is ember.numpy or jax.numpy."""
    x = np.array([1.5, -2.0, 3.0], np.float32)
    scalar = kind(2)
    ops = [lambda m, a: a * scalar, lambda m, a: scalar + a, lambda m, a: a - scalar, lambda m, a: a / scalar,
           lambda m, a: m.maximum(a, scalar), lambda m, a: a < scalar, lambda m, a: a == scalar,
           lambda m, a: m.where(a > 0, scalar, a), lambda m, a: m.where(a > 0, a, np.array(scalar)),
           lambda m, a: m.clip(a, scalar, 10), lambda m, a: m.stack([a[0], scalar])]
    for i, op in enumerate(ops):
        with jax.enable_x64(is64(np.dtype(kind))):
            ref = jax_result(lambda: op(jnp, jnp.asarray(x)))

        def ours(a, op=op):
            return op(enp, a)
        run = {"eager": lambda: ours(enp.asarray(x)), "jit": lambda: ember.jit(ours)(x),
               "vmap": lambda: ember.vmap(ours)(x[None])[0]}[how]
        with ember.config.override(enable_x64=is64(np.dtype(kind))):  # (ember in JAX's mode)
            got = run()
        assert got.dtype == ref.dtype, f"op {i} with {kind.__name__} ({how}): {got.dtype} vs jax {ref.dtype}"
        np.testing.assert_allclose(np.asarray(got).astype(np.float64), np.asarray(ref).astype(np.float64),
                                   rtol=1e-6, err_msg=f"op {i} with {kind.__name__} ({how})")


@pytest.mark.usefixtures("x64_mode")
def test_numpy_scalar_under_grad():
    for kind in (np.float16, np.float32, np.float64, np.int8, np.int64, np.uint64, np.bool_):
        grad = ember.grad(lambda v: enp.sum(v * kind(3)).astype("float32"))(np.array([1.0, 2.0], np.float32))
        assert grad.dtype == np.float32
        np.testing.assert_allclose(np.asarray(grad), [float(kind(3))] * 2)


# (complex operands and arguments, accepted since complex64/complex128 exist: tests/test_complex.py)


# ---------------------------------------------------------------------------------------------------------------
# Big-endian numpy input is byte-swapped where it enters.
def test_big_endian_input_is_accepted_everywhere():
    big = np.array([1.5, -2.0, 3.25], ">f4")
    big64 = np.array([2 ** 62 + 1, -7], ">i8")
    native = big.astype("<f4")
    for how, got in [("asarray", enp.asarray(big)), ("array", enp.array(big)), ("device_put", ember.device_put(big)),
                     ("ember.array", ember.array(big)), ("array dtype", enp.array(big, dtype="float32")),
                     ("astype", enp.asarray(native).astype(np.dtype(">f4"))),
                     ("jit argument", ember.jit(lambda v: v)(big)), ("operand", enp.add(big, 0)),
                     ("operand of a method", enp.zeros(3) + big), ("lax", ember.lax.add(big, big) / 2),
                     ("closure", ember.jit(lambda v: v + big)(np.zeros(3, np.float32))),
                     ("vmap", ember.vmap(lambda v: v * 1)(big)),
                     ("grad", ember.grad(lambda v: enp.sum(v * v))(big) / 2)]:
        assert got.dtype == np.float32, f"{how}: {got.dtype}"
        np.testing.assert_array_equal(np.asarray(got), native, err_msg=how)
    zero_d = np.array(2.5, ">f8")
    assert (enp.ones(2, "float32") * zero_d).dtype == np.float32  # (float64: narrowed without 64-bit mode)
    with ember.config.override(enable_x64=True):
        for got in (enp.asarray(big64), ember.jit(lambda v: v)(big64), enp.add(big64, 0)):
            assert got.dtype == np.int64
            np.testing.assert_array_equal(np.asarray(got), [2 ** 62 + 1, -7])
        assert (enp.ones(2, "float32") * zero_d).dtype == np.float64
        assert float(ember.jit(lambda v: v * zero_d)(np.float32(2))) == 5.0
        assert enp.zeros(2, dtype=np.dtype(">f8")).dtype == np.float64


@pytest.mark.parametrize("value,named", [
    (np.array(["a", "b"]), "<U1"), (np.array([object()]), "object"),
    (np.array(["2020-01-01"], "datetime64[D]"), r"datetime64\[D\]"),
], ids=["strings", "objects", "datetimes"])
def test_unsupported_dtypes_are_named(value, named):
    for call in (lambda: enp.asarray(value), lambda: ember.device_put(value), lambda: ember.jit(lambda v: v)(value),
                 lambda: enp.ones(2) + value):
        with pytest.raises(TypeError, match=rf"dtype {named} is not supported by ember"):
            call()


# ---------------------------------------------------------------------------------------------------------------
# enable_x64.
def test_enable_x64_defaults():
    with ember.config.override(enable_x64=True):
        assert ember.config.enable_x64 and ember.config.jax_enable_x64
        for made, dtype in [(enp.zeros(2), "float64"), (enp.ones(2), "float64"), (enp.eye(2), "float64"),
                            (enp.identity(2), "float64"), (enp.linspace(0, 1, 3), "float64"),
                            (enp.arange(3), "int64"), (enp.arange(0.0, 1.0, 0.5), "float64"),
                            (enp.full(2, 1.0), "float64"), (enp.full(2, 3), "int64"), (enp.array([1, 2]), "int64"),
                            (enp.array([1.5]), "float64"), (enp.asarray(1.5), "float64"),
                            (ember.device_put(2), "int64"),
                            (enp.zeros(2, float), "float64"), (enp.zeros(2, int), "int64"),
                            (enp.sum(np.ones(2, np.int8)), "int64"), (enp.sum(np.ones(2, np.uint8)), "uint64"),
                            (enp.argmax(np.ones(2)), "int64"), (enp.sqrt(2), "float64"),
                            (enp.ones(2, "int32") * 2.5, "float64"), (enp.ones(2, "float32") * 2.5, "float32"),
                            (enp.ones(2, "uint32") + enp.ones(2, "int32"), "int64"),
                            (enp.ones(2, "int32") / enp.ones(2, "int32"), "float32")]:
            assert made.dtype == np.dtype(dtype), f"{made.dtype} != {dtype}"
        assert dt.canonicalize_dtype(float) == np.float64 and dt.canonicalize_dtype(int) == np.int64
        assert enp.result_type(np.int8, int) == np.int8 and enp.result_type(int) == np.int64
        assert (enp.ones(2, "int32") * 2.5).weak_type
        x = enp.asarray(np.array([2 ** 40 + 0.5]))
        assert float((x + 2 ** 40)[0]) == 2 ** 41 + 0.5
    assert not ember.config.enable_x64
    for made, dtype in [(enp.zeros(2), "float32"), (enp.arange(3), "int32"), (enp.linspace(0, 1, 3), "float32"),
                        (enp.array([1.5]), "float32"), (enp.sum(np.ones(2, np.int8)), "int32"),
                        (enp.argmax(np.ones(2)), "int32"), (enp.sqrt(2), "float32"),
                        (enp.arange(np.int64(3)), "int32"), (enp.arange(np.float32(3)), "float32"),
                        (enp.linspace(np.float64(0), 1, 3), "float32")]:
        assert made.dtype == np.dtype(dtype), f"{made.dtype} != {dtype}"


def test_enable_x64_takes_effect_at_runtime_in_cached_functions():
    scale = ember.jit(lambda x: x * 2.5)
    inc = ember.jit(lambda s: s + 1)
    double = ember.vmap(lambda x: x * 2.5)
    slope = ember.grad(lambda s: s * 3.0)
    x = enp.ones(3, "int32")
    seen = []
    for x64 in (False, True, False, True):
        with ember.config.override(enable_x64=x64):
            seen.append((scale(x).dtype, inc(1.0).dtype, inc(1).dtype, double(x[None]).dtype, slope(2.0).dtype,
                         (x * 2.5).dtype, ember.make_ir(lambda s: s * 1.5)(x).outs[0].aval.dtype))
    narrow = (np.float32, np.float32, np.int32, np.float32, np.float32, np.float32, np.float32)
    wide = (np.float64, np.float64, np.int64, np.float64, np.float64, np.float64, np.float64)
    assert seen == [narrow, wide, narrow, wide]


@pytest.mark.slow  # (5 s of subprocesses, x64 from the environment; config.update turns it on throughout this file)
def test_enable_x64_by_name_and_environment():
    try:
        ember.config.update("jax_enable_x64", True)
        assert enp.zeros(1).dtype == np.float64
        ember.config.update("enable_x64", "0")
        assert enp.zeros(1).dtype == np.float32
    finally:
        ember.config.update("enable_x64", False)
    code = "import ember.numpy as enp; print(enp.zeros(1).dtype, (enp.ones(1, 'int32') * 2.5).dtype)"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    base = {k: v for k, v in os.environ.items() if k not in ("EMBER_ENABLE_X64", "JAX_ENABLE_X64")}
    base["PYTHONPATH"] = root + os.pathsep + base.get("PYTHONPATH", "")
    for extra, expected in [({}, "float32 float32"), ({"EMBER_ENABLE_X64": "1"}, "float64 float64"),
                            ({"JAX_ENABLE_X64": "true"}, "float64 float64"),
                            ({"JAX_ENABLE_X64": "1", "EMBER_ENABLE_X64": "0"}, "float32 float32")]:
        out = subprocess.run([sys.executable, "-c", code], env={**base, **extra}, capture_output=True, text=True,
                             timeout=120)
        assert out.stdout.split() == expected.split(), (extra, out.stderr[-2000:])


def test_round_of_integers():
    assert enp.round(3).dtype == np.int32
    with ember.config.override(enable_x64=True):
        assert enp.round(np.int64(2 ** 62 + 1)).item() == 2 ** 62 + 1
    with pytest.raises(NotImplementedError, match=r"round: integer inputs with decimals=-1 < 0 .*i32\[2\]"):
        enp.round(np.array([15, 25], np.int32), -1)
