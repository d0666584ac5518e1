"""The eager fast paths (ember._runtime.eager): an operation on concrete Arrays and Python scalars outside staging
runs one cached program per signature. It must give exactly what the ordinary path gives (dtype, weak type, bits,
errors and warnings), under enable_x64 on and off; it must not run on tracers nor while a function is staged out;
its caches are bounded."""
import contextlib
import itertools
import types
import warnings

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax
from ember._core import EAGER, UnexpectedTracerError
from ember._runtime import eager

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bfloat16", "float16",
          "float32", "float64"]


def _values(dtype):
    kind = np.dtype(dtype).kind if dtype != "bfloat16" else "f"
    if kind == "b":
        return np.array([True, False, True])
    if kind == "u":
        return np.array([0, 1, 7])
    if kind == "i":
        return np.array([-2, 0, 7])
    return np.array([-1.5, -0.0, 2.5])


def _arrays():
    """An Array of each dtype, and weakly typed ones (as made by promotion with Python scalars)."""
    out = [enp.asarray(_values(d).astype(enp.dtype(d) if d != "bfloat16" else enp.bfloat16)) for d in DTYPES]
    out.append(lax.convert_element_type(enp.asarray(np.array([-1.5, 0.0, 2.5], np.float32)), np.float32, True))
    out.append(lax.convert_element_type(enp.asarray(np.array([-2, 0, 7], np.int32)), np.int32, True))
    out.append(enp.asarray(2.0))  # a weak rank-0 Array
    return out


SCALARS = [True, False, 0, 1, -3, 300, 2**40, 2.5, -0.0, 0.0, float("nan"), float("inf"), 1e40]
NUMPY = [np.float32(2.0), np.int64(3), np.array([1, 2, 3], np.int16)]


def _outcome(fn):
    """What calling fn gives: ("ok", dtype, weak type, shape, bytes) or ("error", type, message), and the warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn()
        except Exception as err:  # noqa: BLE001
            got = ("error", type(err), str(err))
        else:
            assert type(result) is ember.Array, type(result)
            host = np.asarray(result)
            got = ("ok", result.dtype, result.weak_type, host.shape, host.tobytes())
    return got, [(w.category, str(w.message)) for w in caught]


def _same_as_ordinary(fn):
    """fn's outcome on the fast path (first call: a miss; second: a hit) equals its outcome on the ordinary path."""
    with eager.ordinary_path():
        expected = _outcome(fn)
    assert _outcome(fn) == expected
    assert _outcome(fn) == expected


@contextlib.contextmanager
def _counting_primitive_dispatch():
    """The primitives dispatched one at a time (the ordinary path) while the with-block runs."""
    calls = []
    original = EAGER.apply

    def counting(prim, args, params):
        calls.append(prim.name)
        return original(prim, args, params)
    EAGER.apply = counting
    try:
        yield calls
    finally:
        EAGER.apply = original


@pytest.fixture(params=[False, True], ids=["x32", "x64"])
def x64(request):
    with ember.config.override(enable_x64=request.param):
        yield request.param


def x64_for(names, chosen, quick=None):
    """Parameters (name, x64) for a test with the x64 fixture: x32 for the quick names (all by default) and x64 for
    the chosen ones by default, the others in the slow tier (x64 changes what Python scalars promote to, not the
    dispatch)."""
    quick = names if quick is None else quick
    return [pytest.param(n, False, id=f"x32-{n}", marks=() if n in quick else pytest.mark.slow) for n in names] + [
        pytest.param(n, True, id=f"x64-{n}", marks=() if n in chosen else pytest.mark.slow) for n in names]


def test_array_pairs_of_every_dtype(x64):
    arrays = _arrays()
    for x, y in itertools.product(arrays, arrays):
        _same_as_ordinary(lambda: x + y)
    for x, y in itertools.product(arrays, arrays[::3]):
        _same_as_ordinary(lambda: enp.true_divide(x, y))
        _same_as_ordinary(lambda: x < y)


SCALAR_OPS = {op.__name__: op for op in [enp.add, enp.subtract, enp.multiply, enp.true_divide, enp.floor_divide,
                                         enp.remainder, enp.power, enp.maximum, enp.less, enp.equal,
                                         enp.bitwise_and, enp.arctan2, enp.logical_and, enp.logaddexp]}


@pytest.mark.parametrize("name,x64", x64_for(SCALAR_OPS, {"true_divide"}, {  # (one of each family)
    "add", "true_divide", "floor_divide", "power", "maximum", "less", "bitwise_and", "logaddexp"}),
                         indirect=["x64"])
def test_arrays_with_scalars(name, x64):
    op = SCALAR_OPS[name]
    for x in _arrays():
        for s in SCALARS + NUMPY:
            _same_as_ordinary(lambda: op(x, s))
            _same_as_ordinary(lambda: op(s, x))


@pytest.mark.parametrize("dtype,x64", x64_for(["float32", "bfloat16", "float16", "int32", "uint8", "bool"],
                                              set(), {"float32", "int32"}), indirect=["x64"])
def test_broadcasting(dtype, x64):
    """Broadcasts feeding an elementwise primitive run as one program: bit-identical to running them apart."""
    rng = np.random.default_rng(0)
    d = enp.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    def make(shape):
        values = rng.normal(size=shape) * 100 if d != np.dtype(bool) else rng.normal(size=shape) > 0
        return enp.asarray(np.asarray(values).astype(d))
    a, b, c, e = make((3, 1)), make((4,)), make((2, 3, 4)), make(())
    f32 = enp.asarray(rng.normal(size=(4,)).astype(np.float32))
    ops = [enp.add, enp.subtract, enp.multiply, enp.true_divide, enp.maximum, enp.less, enp.power, enp.arctan2,
           enp.remainder, enp.floor_divide]
    for op in ops:
        for x, y in [(a, b), (b, a), (c, a), (b, c), (c, e), (a, f32), (c, 3.5), (a, b.reshape(1, 4))]:
            _same_as_ordinary(lambda: op(x, y))
    _same_as_ordinary(lambda: enp.where(b > b.mean(), a, 0.5))
    _same_as_ordinary(lambda: enp.where(a > 0, c, b))


def test_where(x64):
    arrays = _arrays()
    for c in [arrays[0], True, 0, 2.5, float("nan"), enp.asarray(np.array([True, False]))]:
        for x in arrays[::2] + SCALARS[::3] + NUMPY[:1]:
            for y in [arrays[11], 0.0, 1, True, arrays[3]]:
                _same_as_ordinary(lambda: enp.where(c, x, y))
    _same_as_ordinary(lambda: enp.where(arrays[0])[0])
    _same_as_ordinary(lambda: enp.where(arrays[0], x=arrays[1], y=2))


# (x64 mode in the slow tier: 64-bit arrays take the fast path by default in test_array_pairs_of_every_dtype)
@pytest.mark.parametrize("x64", [pytest.param(False, id="x32"), pytest.param(True, id="x64", marks=pytest.mark.slow)],
                         indirect=True)
def test_unary_and_reductions(x64):
    ops = [enp.exp, enp.negative, enp.abs, enp.sqrt, enp.floor, enp.square, enp.invert, enp.logical_not, enp.sign,
           enp.tan, enp.log2, enp.rint, enp.positive,
           lambda x: x.sum(), lambda x: x.mean(), lambda x: x.max(), lambda x: x.argmin(), lambda x: x.all(),
           lambda x: x.var(), lambda x: x.reshape(-1, 1), lambda x: x.astype(np.float16), lambda x: x.T,
           lambda x: enp.round(x, 1)]
    for x in _arrays():
        for op in ops:
            _same_as_ordinary(lambda: op(x))


def test_static_arguments_are_keyed_with_their_types():
    x = enp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    for axis in [1, True, (1,), [1], 1.0, np.int64(1), (0, 1), (0, 1.0), -1, 5, None]:
        _same_as_ordinary(lambda: x.sum(axis=axis))
        _same_as_ordinary(lambda: enp.sum(x, axis))
        _same_as_ordinary(lambda: x.max(axis=axis, keepdims=True))
    for shape in [(3, 2), [3, 2], (-1,), (6, 1), (4, 2), (3.0, 2)]:
        _same_as_ordinary(lambda: x.reshape(shape))
    for exponent in [2, 3, -1, 0, True]:
        _same_as_ordinary(lambda: x ** exponent)
        _same_as_ordinary(lambda: enp.asarray(np.arange(3, dtype=np.int8)) ** exponent)


def test_scalar_values_share_device_scalars_by_value():
    x = enp.asarray(np.array([-0.0, 0.0, 1.0], np.float32))
    for s in [0.0, -0.0, 0.0, -0.0, 0, False, float("nan"), -float("nan"), 1, 1.0, True]:
        _same_as_ordinary(lambda: x + s)
        _same_as_ordinary(lambda: x * s)
        _same_as_ordinary(lambda: s - x)


def test_overflow_warns_and_raises_on_every_call():
    x = enp.asarray(np.ones(2, np.float16))
    i = enp.asarray(np.ones(2, np.int8))
    for _ in range(3):
        with pytest.warns(RuntimeWarning, match="overflow"):
            x + 1e10
        with pytest.warns(RuntimeWarning, match="overflow"):
            x + 2**20
        with pytest.raises(OverflowError, match="300"):
            i + 300


def test_the_fast_path_dispatches_no_primitive():
    x = enp.asarray(np.arange(4, dtype=np.float32))
    y = enp.asarray(np.ones((2, 1), np.int32))
    cases = [lambda: x + x, lambda: x * 2.0, lambda: 2 - x, lambda: 1 + x, lambda: enp.exp(x), lambda: x.sum(),
             lambda: x < 3, lambda: x.reshape(2, 2), lambda: x + y, lambda: x / 3, lambda: x ** 2,
             lambda: enp.maximum(x, 0.0), lambda: x.mean(axis=0), lambda: enp.asarray(2.0) * 3,
             lambda: enp.where(x > 1, x, 0.0), lambda: enp.where(x > 1, 1.0, 0)]
    for case in cases:
        case()
        with _counting_primitive_dispatch() as calls:
            case()
        assert calls == []
    with _counting_primitive_dispatch() as calls:
        x + 5.0  # a new scalar value: no new program either
        x * 7
    assert calls == []


def test_not_while_staging():
    c = enp.asarray(np.arange(3, dtype=np.float32))  # a concrete Array closed over

    def f(x):
        return x + 2.0, c * 2.0, enp.exp(c), c.sum(), x + c

    x = np.ones(3, np.float32)
    ir = ember.jit(f).trace(x).jaxpr
    assert [e.prim.name for e in ir.eqns] == ["add", "mul", "exp", "reduce_sum", "add"]
    assert len(ir.consts) == 1
    out = ember.jit(f)(x)
    np.testing.assert_allclose(np.asarray(out[1]), [0, 2, 4])
    np.testing.assert_allclose(np.asarray(out[2]), np.exp([0, 1, 2]), rtol=1e-6)


def test_grad_and_vmap_outside_jit():
    x = enp.asarray(np.array([0.5, 1.0, 2.0], np.float32))
    g = ember.grad(lambda v: (v * 2.0 + enp.exp(v) - 1).sum())(x)
    np.testing.assert_allclose(np.asarray(g), 2 + np.exp([0.5, 1.0, 2.0]), rtol=1e-6)
    v = ember.vmap(lambda row: row * 2.0 + row.sum())(enp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3)))
    np.testing.assert_allclose(np.asarray(v), [[3, 5, 7], [18, 20, 22]])


def test_leaked_tracers_and_deleted_arrays_raise_as_before():
    leaked = []
    ember.jit(lambda v: leaked.append(v) or v)(np.ones(3, np.float32))
    x = enp.asarray(np.ones(3, np.float32))
    _same_as_ordinary(lambda: leaked[0] + x)
    _same_as_ordinary(lambda: x * leaked[0])
    with pytest.raises(UnexpectedTracerError):
        x + leaked[0]
    dead = enp.asarray(np.ones(3, np.float32))
    x + dead
    dead.delete()
    _same_as_ordinary(lambda: x + dead)
    _same_as_ordinary(lambda: dead * 2.0)
    _same_as_ordinary(lambda: enp.exp(dead))


def test_arrays_on_another_device():
    devices = ember.devices()
    if len(devices) < 2:
        pytest.skip("one device")
    x = ember.device_put(np.arange(3, dtype=np.float32), devices[1])
    y = ember.device_put(np.ones(3, np.float32), devices[0])
    for case in [lambda: x * 2.0, lambda: 2.0 - x, lambda: x + x]:
        out = case()
        assert out.device is devices[1]
    np.testing.assert_allclose(np.asarray(x * 2.0), [0, 2, 4])
    _same_as_ordinary(lambda: x + y)


def test_debug_nans_names_the_primitive_and_the_line():
    x = enp.asarray(np.array([1.0, -1.0], np.float32))
    enp.log(x)  # compiled on the fast path
    with ember.config.override(debug_nans=True):
        with pytest.raises(FloatingPointError, match=r"log at .*test_eager_dispatch.py"):
            enp.log(x)
        # floor_divide is several primitives: the first NaN (of its fmod) is found, as it runs one at a time
        with pytest.raises(FloatingPointError, match=r"encountered in rem at .*test_eager_dispatch.py"):
            enp.floor_divide(x, enp.asarray(np.zeros(2, np.float32)))


def test_caches_are_bounded():
    with ember.config.override(eager_cache_size=8):
        for n in range(1, 20):
            enp.ones(n, np.float32) + 1.0
        x = enp.ones(3, np.float32)
        for i in range(30):
            x * float(i)
        assert len(eager._op_cache) <= 8
        assert len(eager._scalar_arrays) <= 8
        assert len(eager._eager_cache) <= 8
        np.testing.assert_allclose(np.asarray(x * 29.0), 29.0)


class _Broken(Exception):
    """Raised by a deliberately broken piece of the fast path."""


def _broken(*args, **kwargs):
    raise _Broken("the fast path is broken")


class _EveryEntryBroken(dict):
    def get(self, key, default=None):
        return types.SimpleNamespace(_fast=_broken, call_flat=_broken)


@pytest.mark.parametrize("where", ["compile", "run", "steps", "scalars"])
def test_a_broken_fast_path_fails_loudly(monkeypatch, where):
    """A bug in the fast path raises; it does not turn into a silent fall-back to the ordinary path (which would give
    the right result, slower)."""
    x = enp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    cases = {"compile": (eager, "_runner", _broken, lambda: x - x),  # staged and compiled afresh below
             "run": (eager, "_op_cache", _EveryEntryBroken(), lambda: x + x),  # every cached entry raises
             "steps": (eager._Steps, "_fast", _broken, lambda: x.mean(axis=0)),  # an entry of two primitives
             "scalars": (eager, "_new_scalar", _broken, lambda: x * 12345.0)}  # a new device scalar
    owner, name, broken, call = cases[where]
    with eager.ordinary_path():
        expected = np.asarray(call())
    eager._op_cache.reset()
    monkeypatch.setattr(owner, name, broken)
    with pytest.raises(_Broken):
        call()
    monkeypatch.undo()
    np.testing.assert_array_equal(np.asarray(call()), expected)


def test_fallbacks_are_counted_once_per_signature():
    x = np.arange(3, dtype=np.float32)  # a numpy operand: the ordinary path
    before = eager.fallbacks[("exp", "operands other than Arrays and Python scalars")]
    for _ in range(3):
        enp.exp(x)
    assert eager.fallbacks[("exp", "operands other than Arrays and Python scalars")] == before + 1
