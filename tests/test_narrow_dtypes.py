"""JAX's narrow dtypes (ml_dtypes' float8_*, float4_e2m1fn, int4, uint4, int2, uint2) against JAX 0.10.2's CPU: the
values bit for bit and the result dtypes (and weak types) of its operations, eagerly and under jit; JAX's promotion
lattice for them; its refusals, which ember raises as TypeErrors naming the function and the dtype; gradients of
float8 arithmetic and vmap; the round trips numpy <-> ember (the CPU plugin packs the 4- and 2-bit types on the
device); itemsize and nbytes. The 6-bit floats and the 1-bit integers, in which JAX's CPU computes nothing, are
refused wherever they enter. Where JAX's numbers are an artifact of a type without zero (float8_e8m0fnu) or ember
computes otherwise for every dtype, the case says so (docs/numpy.md, "Narrow dtypes")."""
import warnings

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax as jlax

import ember
import ember.numpy as enp
from ember import lax as elax
from ember._core import dtypes as dt
from recorded import jax_result

# The order puts float8_e4m3fn, int4, float8_e5m2, float4_e2m1fn and uint4 among the sweeps' default cases (every
# third case stays in the default run: tests/default_tier.py); the others run in the slow tier.
NARROW = ["float8_e4m3fn", "float8_e3m4", "float8_e4m3", "int4", "float8_e4m3b11fnuz", "float8_e4m3fnuz",
          "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn", "int2", "uint2", "uint4"]
REFUSED = ["float6_e2m3fn", "float6_e3m2fn", "int1", "uint1"]
OTHERS = ["bool", "uint8", "int8", "int32", "uint32", "bfloat16", "float16", "float32", "complex64"]


def _dtype(name):
    return np.dtype(getattr(ml_dtypes, name)) if name in NARROW + REFUSED + ["bfloat16"] else np.dtype(name)


@pytest.fixture(autouse=True)
def _x32():
    """ember's default mode and JAX's in it (the suite turns JAX's 64-bit mode on)."""
    with ember.config.override(enable_x64=False), jax.enable_x64(False):
        yield


def _values(name, n=12):
    """n values of the dtype: a spread of magnitudes and signs within its range (positive for the unsigned types
    and float8_e8m0fnu), as a numpy array of it."""
    d = _dtype(name)
    if dt.is_int(d):
        info = ml_dtypes.iinfo(d)
        return (np.arange(n) % (int(info.max) - int(info.min) + 1) + int(info.min)).astype(d)[::-1].copy()
    base = np.array([0.5, 1.5, -2.0, 3.0, 0.25, -0.75, 4.0, 1.0, -1.25, 0.125, 6.0, -3.5], np.float32)[:n]
    if name == "float8_e8m0fnu":
        base = np.abs(base)
    return base.astype(d)


def _outcome(thunk):
    """("ok", dtype name, weak type, shape, bytes) of thunk's array (or a tuple of arrays), or ("error", the
    exception's class name)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = thunk()
    except Exception as err:  # (the oracle's refusals are what is compared)
        return ("error", type(err).__name__)
    parts = tuple(out) if isinstance(out, tuple | list) else (out,)
    return ("ok",) + tuple((np.asarray(p).dtype.name, bool(getattr(p, "weak_type", False)), np.shape(p),
                            np.asarray(p).tobytes()) for p in parts)


def _check(name, what, ours, theirs, ember_error=None):
    """ours must be JAX's outcome: the same dtypes, weak types, shapes and bytes, or a refusal where JAX refuses
    (a TypeError, or JAX's own exception class)."""
    if theirs[0] == "error":
        assert ours[0] == "error", f"{name} {what}: JAX refuses ({theirs[1]}), ember computes {ours[1:][0][:3]}"
        assert ours[1] in ("TypeError", theirs[1]), f"{name} {what}: ember raises {ours[1]}, JAX {theirs[1]}"
        return
    assert ours == theirs, f"{name} {what}: ember {ours if ours[0] == 'error' else [o[:3] for o in ours[1:]]}, " \
                           f"JAX {[o[:3] for o in theirs[1:]]}"


# ---------------------------------------------------------------------------------------------------------------
# The dtype table, storage and transfers
def test_the_narrow_types_ember_computes_in():
    assert [d.name for d in dt.NARROW_FLOATS + dt.NARROW_INTS] == [
        "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
        "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn", "int4", "uint4", "int2", "uint2"]
    assert sorted(NARROW) == sorted(d.name for d in dt.NARROW_FLOATS + dt.NARROW_INTS)
    for name in NARROW:
        d = _dtype(name)
        assert d in dt.SUPPORTED_DTYPES and dt.is_narrow(d)
        assert dt.is_float(d) == name.startswith("float") and dt.is_int(d) == (not name.startswith("float"))
        assert ember.dtypes.itemsize_bits(d) == jax.dtypes.itemsize_bits(d)
        for kind in (enp.floating, enp.integer, enp.signedinteger, enp.unsignedinteger, enp.inexact, enp.number):
            assert enp.issubdtype(d, kind) == jnp.issubdtype(d, kind), (name, kind)
        assert ember.dtypes.scalar_type_of(d) is jax.dtypes.scalar_type_of(d)
        # the IR's name and the StableHLO element type are JAX's
        aval = jax.core.ShapedArray((2,), d)
        assert ember.ShapedArray((2,), d).str_short() == aval.str_short(short_dtypes=True)
        assert enp.dtype(getattr(enp, name)) == d


@pytest.mark.parametrize("name", NARROW)
def test_round_trips_through_the_device(name):
    """numpy -> ember -> numpy keeps the bytes: every bit pattern, odd sizes (the plugin packs 4- and 2-bit values
    two or four to a byte), rank 0, empty and strided arrays, by asarray, device_put and a jitted identity."""
    d = _dtype(name)
    patterns = np.arange(256 if dt.bit_width(d) == 8 else 1 << dt.bit_width(d), dtype=np.uint8)
    every = patterns.view(d) if dt.bit_width(d) == 8 else patterns.astype(np.int8).astype(d) \
        if dt.is_signed_int(d) else patterns.astype(d) if dt.is_int(d) else patterns.view(d)
    if name == "float4_e2m1fn":
        every = patterns.view(d)
    for value in (every, every[:7], every.reshape(-1, 2)[::2, ::-1], every[3], every[:0].reshape(0, 3),
                  np.resize(every, (3, 5, 7))):
        for move in (enp.asarray, ember.device_put, ember.jit(lambda v: v)):
            back = np.asarray(move(value))
            assert back.dtype == d and back.shape == value.shape
            assert back.tobytes() == np.ascontiguousarray(value).tobytes(), (name, move, value.shape)
    x = enp.asarray(every)
    assert x.dtype == d and x.weak_type is False
    assert x.buffer.host_view() is None if dt.is_sub_byte(d) else x.buffer.host_view() is not None
    assert str(x) == jax_result(lambda: str(jnp.asarray(every)))
    short = _values(name)[:4]  # (a repr of several lines wraps otherwise than JAX's, float32's as well)
    assert repr(enp.asarray(short)) == jax_result(lambda: repr(jnp.asarray(short)))
    assert repr(x.tolist()) == jax_result(lambda: repr(jnp.asarray(every).tolist()))


def test_itemsize_and_nbytes_are_jaxs():
    for name in NARROW:
        value = np.resize(_values(name), (3, 5))
        x = enp.asarray(value)
        assert (x.itemsize, x.nbytes, x.size) == jax_result(lambda: (lambda a: (a.itemsize, a.nbytes, a.size))(
            jnp.asarray(value))), name
        assert ember.jit(lambda v: np.float32(v.nbytes) + v.itemsize)(x) == 16.0  # (tracers too, as JAX's)


@pytest.mark.parametrize("name", REFUSED)
def test_the_types_jax_computes_nothing_in_are_refused(name):
    """JAX's CPU fails on arrays of the 6-bit floats and the 1-bit integers (no XLA buffer type, or it makes
    booleans); ember refuses them where they enter, naming the function and the dtype."""
    d = _dtype(name)
    value = np.zeros(3, d)
    assert jax_result(lambda: _outcome(lambda: jnp.asarray(value) + 0))[0] == "error"
    for where, call in (("device_put", lambda: enp.asarray(value)), ("device_put", lambda: ember.device_put(value)),
                        ("zeros", lambda: enp.zeros(3, d)), ("zeros", lambda: enp.zeros(3, name)),
                        ("astype", lambda: enp.ones(3).astype(d)), ("asarray", lambda: getattr(enp, name)(1)),
                        ("", lambda: ember.jit(lambda v: v)(value))):
        with pytest.raises(TypeError, match=rf"{where or 'jit'}.*dtype {name} is not supported by ember \(.*JAX"):
            call()
    assert getattr(enp, name).dtype == d  # (named, as in jax.numpy)


# ---------------------------------------------------------------------------------------------------------------
# Conversions, bit for bit
CONVERT_TARGETS = ["float32", "int32", "bool", "bfloat16", "float16", "uint8", "float8_e4m3fn", "float8_e5m2",
                   "int4", "uint4", "float4_e2m1fn"]


@pytest.mark.parametrize("name", NARROW)
def test_conversions_as_jax(name):
    """Every bit pattern of the dtype converted to other dtypes, and float32 values (specials, out of range,
    subnormal) and int32 values converted to it: XLA's conversions, JAX's bits (numpy's casts differ for NaN and
    out-of-range values in places)."""
    d = _dtype(name)
    width = dt.bit_width(d)
    bits = np.arange(1 << width, dtype=np.uint8)
    every = bits.view(d) if width == 8 or name == "float4_e2m1fn" else \
        bits.astype(np.int8).astype(d) if dt.is_signed_int(d) else bits.astype(d)
    rng = np.random.default_rng(7)
    floats = np.concatenate([rng.normal(size=200) * np.exp(rng.uniform(-12, 12, 200)),
                             [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 1e-40, 0.5, 1.5, 2.5, 449.0,
                              464.0, 57344.0, 61440.0]]).astype(np.float32)
    ints = np.concatenate([rng.integers(-300, 300, 100), [0, 1, -1, 7, 8, -8, -9, 15, 16, 255, 256]]).astype(np.int32)
    for target in CONVERT_TARGETS:
        t = _dtype(target)
        theirs = jax_result(lambda: _outcome(lambda: jnp.asarray(every).astype(_dtype(target))))
        _check(name, f"to {target}", _outcome(lambda: enp.asarray(every).astype(t)), theirs)
    for source in (floats, ints):
        theirs = jax_result(lambda: _outcome(lambda: jnp.asarray(source).astype(_dtype(name))))
        _check(name, f"from {source.dtype}", _outcome(lambda: enp.asarray(source).astype(d)), theirs)
        _check(name, f"from {source.dtype} (jit)", _outcome(lambda: ember.jit(lambda v: v.astype(d))(source)), theirs)


# ---------------------------------------------------------------------------------------------------------------
# Promotion
def test_promotion_lattice_as_jax():
    """jnp.promote_types over the narrow types, and with bool, the integers and the floats; result_type with Python
    scalars (weak types), in the standard and the strict mode: the dtype, or TypePromotionError where JAX has none."""
    names = NARROW + OTHERS
    for strict in ("standard", "strict"):
        with ember.config.override(numpy_dtype_promotion=strict), jax.numpy_dtype_promotion(strict):
            for a in names:
                for b in names:
                    theirs = _outcome_dtype(lambda: jnp.promote_types(_dtype(a), _dtype(b)))
                    assert _outcome_dtype(lambda: enp.promote_types(_dtype(a), _dtype(b))) == theirs, (strict, a, b)
                for scalar in (1, 1.5, True, 1j, int, float):
                    theirs = _outcome_dtype(lambda: jnp.result_type(_dtype(a), scalar))
                    assert _outcome_dtype(lambda: enp.result_type(_dtype(a), scalar)) == theirs, (strict, a, scalar)


def _outcome_dtype(thunk):
    try:
        return np.dtype(thunk()).name
    except jax.dtypes.TypePromotionError:
        return "TypePromotionError"
    except ember.dtypes.TypePromotionError as err:
        assert "no available implicit dtype promotion path" in str(err)
        return "TypePromotionError"


def test_operations_with_scalars_and_other_dtypes_promote_as_jax():
    """The result dtype and weak type of arithmetic with Python scalars and arrays of other dtypes (int8 * float8
    is float8; float8 + float32 has no promotion), and the refusal's message names the dtypes."""
    for name in ("float8_e4m3fn", "float4_e2m1fn", "int4", "uint2"):
        x = _values(name)
        for other in (1, 2.5, True, np.int8(3), np.ones(12, np.uint8), np.ones(12, bool), np.ones(12, np.float32),
                      np.ones(12, ml_dtypes.float8_e5m2)):
            theirs = jax_result(lambda: _outcome(lambda: jnp.asarray(x) * other))
            _check(name, f"* {other!r}", _outcome(lambda: enp.asarray(x) * other), theirs)
    with pytest.raises(ember.dtypes.TypePromotionError, match=r"'float32', 'float8_e4m3fn'.*narrow"):
        enp.asarray(_values("float8_e4m3fn")) + np.float32(1)


# ---------------------------------------------------------------------------------------------------------------
# Operations against JAX, eagerly and under jit
def _pair(m, x):
    return m.asarray(x), m.asarray(x[::-1].copy())


OPS = {
    "add": lambda m, lx, x, y: x + y, "sub": lambda m, lx, x, y: x - y, "mul": lambda m, lx, x, y: x * y,
    "div": lambda m, lx, x, y: x / y, "neg": lambda m, lx, x, y: -x, "maximum": lambda m, lx, x, y: m.maximum(x, y),
    "minimum": lambda m, lx, x, y: m.minimum(x, y), "lt": lambda m, lx, x, y: x < y,
    "eq": lambda m, lx, x, y: x == y, "where": lambda m, lx, x, y: m.where(x > y, x, y),
    "add_int": lambda m, lx, x, y: x + 1, "mul_float": lambda m, lx, x, y: x * 1.5,
    "sum": lambda m, lx, x, y: m.sum(x), "sum_axis": lambda m, lx, x, y: m.sum(x.reshape(3, 4), axis=1),
    "sum_no_promotion": lambda m, lx, x, y: m.sum(x, promote_integers=False),
    "sum_int32": lambda m, lx, x, y: m.sum(x, dtype=np.int32), "prod": lambda m, lx, x, y: m.prod(x[:4]),
    "max": lambda m, lx, x, y: m.max(x), "min_axis": lambda m, lx, x, y: m.min(x.reshape(3, 4), axis=0),
    "mean": lambda m, lx, x, y: m.mean(x), "argmax": lambda m, lx, x, y: m.argmax(x),
    "argmin": lambda m, lx, x, y: m.argmin(x.reshape(3, 4), axis=1), "cumsum": lambda m, lx, x, y: m.cumsum(x),
    "cumprod": lambda m, lx, x, y: m.cumprod(x[:6]), "cummax": lambda m, lx, x, y: lx.cummax(x),
    "sort": lambda m, lx, x, y: m.sort(x), "argsort": lambda m, lx, x, y: m.argsort(x, stable=True),
    "dot": lambda m, lx, x, y: m.dot(x.reshape(3, 4), y.reshape(4, 3)),
    "dot_f32": lambda m, lx, x, y: m.dot(x.reshape(3, 4), y.reshape(4, 3), preferred_element_type=np.float32),
    "matmul_f32": lambda m, lx, x, y: m.matmul(x.reshape(2, 6), y.reshape(6, 2), preferred_element_type=np.float32),
    "einsum": lambda m, lx, x, y: m.einsum("ij,jk->ik", x.reshape(3, 4), y.reshape(4, 3)),
    "exp": lambda m, lx, x, y: m.exp(x), "sqrt": lambda m, lx, x, y: m.sqrt(x), "tanh": lambda m, lx, x, y: m.tanh(x),
    "logistic": lambda m, lx, x, y: lx.logistic(x), "abs": lambda m, lx, x, y: m.abs(x),
    "lax_abs": lambda m, lx, x, y: lx.abs(x), "sign": lambda m, lx, x, y: m.sign(x),
    "floor": lambda m, lx, x, y: m.floor(x), "round": lambda m, lx, x, y: m.round(x),
    "isnan": lambda m, lx, x, y: m.isnan(x), "clip": lambda m, lx, x, y: m.clip(x, y[0], y[1]),
    "to_float32": lambda m, lx, x, y: x.astype(np.float32), "to_int32": lambda m, lx, x, y: x.astype(np.int32),
    "concatenate": lambda m, lx, x, y: m.concatenate([x, y]), "transpose": lambda m, lx, x, y: x.reshape(3, 4).T,
    "take": lambda m, lx, x, y: m.take(x, m.asarray([3, 0, 11])), "at_set": lambda m, lx, x, y: x.at[2].set(y[0]),
    "at_add": lambda m, lx, x, y: x.at[m.asarray([1, 1, 4])].add(y[:3]),
    "dynamic_slice": lambda m, lx, x, y: lx.dynamic_slice(x, (m.asarray(5),), (4,)),
    "reduce_window": lambda m, lx, x, y: lx.reduce_window(x.reshape(3, 4), -np.inf if m.issubdtype(
        x.dtype, m.floating) else np.array(m.iinfo(x.dtype).min, x.dtype), lx.max, (1, 2), (1, 1), "VALID"),
    "top_k": lambda m, lx, x, y: lx.top_k(x, 3), "bitcast": lambda m, lx, x, y: lx.bitcast_convert_type(
        x.reshape(6, 2) if m.dtype(x.dtype).name in ("int4", "uint4", "float4_e2m1fn") else x, np.uint8),
    "reduce_or": lambda m, lx, x, y: lx.reduce_or(x, (0,)), "signbit": lambda m, lx, x, y: m.signbit(x),
    "frexp": lambda m, lx, x, y: m.frexp(x), "nansum": lambda m, lx, x, y: m.nansum(x),
    "gcd": lambda m, lx, x, y: m.gcd(x, y),
}
# Where ember deliberately does otherwise than JAX: (op, dtype) -> ("refuses", why) where ember raises a TypeError
# and JAX computes, ("differs", why) where both compute other numbers.
_NO_FLOAT = ("refuses", "JAX has no float type for the 2-bit integers and computes true_divide and mean as integer "
             "divisions in them; ember refuses every function that needs floats of them")
_MISSORTS = ("refuses", "XLA's CPU orders 2-bit integers wrongly: JAX returns that order, ember refuses")
DIFFERENT: dict[tuple[str, str], tuple[str, str]] = {
    **{(op, name): _NO_FLOAT for op in ("div", "mean") for name in ("int2", "uint2")},
    **{(op, name): _MISSORTS for op in ("sort", "argsort") for name in ("int2", "uint2")},
    **{("concatenate", name): ("refuses", "XLA's CPU aborts the process (JAX's is not run)") for name in ("int2",
                                                                                                           "uint2")},
}


def _run(m, lx, name, op, jit=None):
    x, y = _pair(m, _values(name))
    return _outcome(lambda: (jit(lambda a, b: OPS[op](m, lx, a, b)) if jit else
                             (lambda a, b: OPS[op](m, lx, a, b)))(x, y))


# The default run's dtypes for the operations (one 8-bit float of each exponent width, a 4-bit integer), the slow
# tier's the others; under jit float4_e2m1fn's too (test_operations_as_jax_under_jit is cheaper).
DEFAULT_OPS = ["float8_e4m3fn", "int4", "float8_e5m2"]


def test_operations_as_jax():
    """Each operation of OPS: JAX's dtype, weak type, shape and bits, or a TypeError where JAX refuses."""
    for name in DEFAULT_OPS:
        for op in OPS:
            _compare_op(name, op)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NARROW if n not in DEFAULT_OPS])
def test_operations_as_jax_other_dtypes(name):
    for op in OPS:
        _compare_op(name, op)


def _compare_op(name, op, jit=False):
    ours = _run(enp, elax, name, op, ember.jit if jit else None)
    how, why = DIFFERENT.get((op, name), (None, None))
    if how == "refuses":
        assert ours == ("error", "TypeError"), (name, op, why)
    elif how is None:
        _check(name, f"{op}{' (jit)' if jit else ''}", ours,
               jax_result(lambda: _run(jnp, jlax, name, op, jax.jit if jit else None)))


JIT_OPS = ["add", "mul", "div", "mul_float", "sum_axis", "max", "mean", "argmax", "cumsum", "sort", "dot_f32",
           "exp", "to_float32", "concatenate", "at_add", "where", "abs", "sum"]


def test_operations_as_jax_under_jit():
    for name in DEFAULT_OPS + ["float4_e2m1fn"]:
        for op in JIT_OPS:
            _compare_op(name, op, jit=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in NARROW if n not in DEFAULT_OPS + ["float4_e2m1fn"]])
def test_operations_as_jax_under_jit_other_dtypes(name):
    for op in JIT_OPS:
        _compare_op(name, op, jit=True)


def test_refusals_name_the_function_and_the_dtype():
    """What JAX refuses on the narrow types (its refusal checked by test_operations_as_jax), and what XLA's CPU
    cannot do on the 2-bit integers, as TypeErrors that say which function, which dtype and how to go on."""
    i4, f8, f4 = (enp.asarray(_values(n)) for n in ("int4", "float8_e4m3fn", "float4_e2m1fn"))
    cases = [(lambda: enp.abs(i4), "abs does not accept dtype int4"),
             (lambda: enp.sum(i4), r"sum does not accept dtype int4 when it widens.*promote_integers=False"),
             (lambda: enp.cumulative_sum(i4), "cumulative_sum does not accept dtype int4"),
             (lambda: enp.trace(i4.reshape(3, 4)), "trace does not accept dtype int4"),
             (lambda: elax.reduce_xor(i4, (0,)), "reduce_xor does not accept dtype int4"),
             (lambda: elax.top_k(f4, 2), "top_k does not accept dtype float4_e2m1fn"),
             (lambda: enp.dot(i4[:4], i4[:4], preferred_element_type=np.int32),
              "dot_general with a preferred_element_type does not accept dtype int4"),
             (lambda: enp.signbit(f8), r"signbit does not accept dtype float8_e4m3fn.*astype\('float32'\)"),
             (lambda: enp.copysign(f8, f8), "signbit does not accept dtype float8_e4m3fn"),
             (lambda: enp.ldexp(f8, 2), "ldexp does not accept dtype float8_e4m3fn"),
             (lambda: ember.random.uniform(ember.random.key(0), (2,), ml_dtypes.float4_e2m1fn),
              "random.uniform: dtype float4_e2m1fn is not drawn"),
             (lambda: enp.concatenate([enp.asarray(_values("int2"))] * 2),
              "concatenate does not accept dtype int2.*aborts the process"),
             (lambda: enp.sort(enp.asarray(_values("uint2"))), "sort does not accept dtype uint2.*wrongly"),
             (lambda: enp.mean(enp.asarray(_values("int2"))), "mean does not accept dtype int2.*no floating-point"),
             # (JAX exports float8 through DLPack; ember's DLPack table has no narrow type: a clear refusal)
             (lambda: f8.__dlpack__(), "__dlpack__: ember exports no DLPack type for dtype float8_e4m3fn")]
    for call, message in cases:
        with pytest.raises(TypeError, match=message):
            call()


# ---------------------------------------------------------------------------------------------------------------
# Derivatives and batching
FLOAT8 = [n for n in NARROW if n.startswith("float8") and n != "float8_e8m0fnu"] + ["float4_e2m1fn"]
GRADS = {
    "mul": lambda m, x: (x * x * 3).sum(), "exp": lambda m, x: m.exp(x).sum(),
    "dot_f32": lambda m, x: m.dot(x.reshape(3, 4), x.reshape(4, 3), preferred_element_type=np.float32).sum(),
    "through_float32": lambda m, x: (x.astype(np.float32) ** 2).sum(), "max": lambda m, x: m.max(x),
}


@pytest.mark.parametrize("name", FLOAT8)
def test_gradients_of_float8_arithmetic_as_jax(name):
    """grad (eager and jitted) of float8 arithmetic: JAX's cotangents, bit for bit (float8_e8m0fnu is left out:
    JAX's cotangents are NaN there, its zeros being NaN in a type without zero)."""
    x = _values(name)
    for what, f in GRADS.items():
        theirs = jax_result(lambda: _outcome(lambda: jax.grad(lambda v: f(jnp, v))(x)))
        _check(name, f"grad {what}", _outcome(lambda: ember.grad(lambda v: f(enp, v))(x)), theirs)
    theirs = jax_result(lambda: _outcome(lambda: jax.jit(jax.grad(lambda v: GRADS["mul"](jnp, v)))(x)))
    _check(name, "jit(grad)", _outcome(lambda: ember.jit(ember.grad(lambda v: GRADS["mul"](enp, v)))(x)), theirs)
    wide = _values("float32")[:12]
    theirs = jax_result(lambda: _outcome(lambda: jax.grad(lambda v: (v.astype(_dtype(name)) * 2).astype(
        np.float32).sum())(wide)))
    _check(name, "grad of a conversion", _outcome(lambda: ember.grad(lambda v: (v.astype(_dtype(name)) * 2).astype(
        np.float32).sum())(wide)), theirs)


@pytest.mark.parametrize("shape", [(5,), (2, 3)])
def test_host_callbacks_carry_them_as_jax(shape):
    """pure_callback and io_callback see each narrow type's values as JAX's do (the 4- and 2-bit ones unpacked from
    the program's packed buffers) and hand back results the program reads as JAX's does (packed again)."""
    for name in NARROW:
        x = (np.arange(np.prod(shape)).reshape(shape) - 1).astype(name)
        seen = []

        def double(a):
            seen.append(np.asarray(a).astype(np.float32))
            with np.errstate(invalid="ignore"):  # (e8m0's NaN cast)
                return (np.asarray(a).astype(np.float32) * 2).astype(a.dtype)
        got = ember.jit(lambda x: ember.pure_callback(double, ember.ShapeDtypeStruct(x.shape, x.dtype), x))(x)
        io = ember.jit(lambda x: ember.experimental.io_callback(double, ember.ShapeDtypeStruct(x.shape, x.dtype),
                                                                x))(x)
        want = jax.jit(lambda x: jax.pure_callback(double, jax.ShapeDtypeStruct(x.shape, x.dtype), x))(x)
        assert got.dtype == io.dtype == want.dtype == np.dtype(name)
        np.testing.assert_array_equal(seen[0], seen[2], err_msg=name)
        np.testing.assert_array_equal(seen[1], seen[2], err_msg=name)
        for out in (got, io):
            np.testing.assert_array_equal(np.asarray(out).astype(np.float32), np.asarray(want).astype(np.float32),
                                          err_msg=name)


def test_vmap_as_jax():
    for name in ("float8_e4m3fn", "float8_e5m2", "int4", "float4_e2m1fn"):
        x = _values(name).reshape(3, 4)
        for what, f in (("sum", lambda m, v: m.sum(v, promote_integers=False)), ("max", lambda m, v: m.max(v)),
                        ("dot", lambda m, v: m.dot(v, v, preferred_element_type=np.float32)),
                        ("add", lambda m, v: v + v[::-1])):
            theirs = jax_result(lambda: _outcome(lambda: jax.vmap(lambda v: f(jnp, v))(x)))
            _check(name, f"vmap {what}", _outcome(lambda: ember.vmap(lambda v: f(enp, v))(x)), theirs)


@pytest.mark.slow
def test_wide_products_and_reductions_as_jax():
    """Longer contractions and reductions than OPS's: float32 accumulation in the same order as XLA's for JAX."""
    rng = np.random.default_rng(3)
    for name in [n for n in NARROW if n.startswith("float")]:
        d = _dtype(name)
        a, b = (rng.normal(size=s).astype(np.float32) for s in ((16, 64), (64, 8)))
        if name == "float8_e8m0fnu":
            a, b = np.abs(a), np.abs(b)
        a, b = a.astype(d), b.astype(d)
        s = b.reshape(-1)
        for what, f in (("dot", lambda m: m.dot(a, b)),
                        ("dot_f32", lambda m: m.dot(a, b, preferred_element_type=np.float32)),
                        ("sum", lambda m: m.sum(s)), ("mean", lambda m: m.mean(s)), ("max", lambda m: m.max(s)),
                        ("cumsum", lambda m: m.cumsum(s))):
            theirs = jax_result(lambda: _outcome(lambda: f(jnp)))
            _check(name, what, _outcome(lambda: f(enp)), theirs)
