"""Eager indexing with static indices (ember._runtime.eager.read_window): x[i], x[i:i+2], x[i, j], x[..., i] and
iteration outside jit run one program per index structure, the ints passed as runtime operands, not one program
per index value. The results are the ordinary path's bit for bit (dtype, weak type, shape, bytes), ints out of
bounds still raise IndexError, and under jit static indices stay static."""
import warnings

import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember import lax
from ember._runtime import eager
import test_program_cache  # tests/ is on sys.path (conftest.py)

compiles = test_program_cache.compiles  # a fixture: the number of XLA compilations so far


def _outcome(fn):
    """("ok", dtype, weak type, shape, bytes) of fn's result, or ("error", type, message)."""
    try:
        result = fn()
    except Exception as err:  # noqa: BLE001 - the outcome compared is the exception itself
        return ("error", type(err), str(err))
    assert type(result) is ember.Array, type(result)
    host = np.asarray(result)
    return ("ok", result.dtype, result.weak_type, host.shape, host.tobytes())


def _fresh(shape, dtype=np.float32, seed=0):
    values = np.random.default_rng(seed).normal(size=shape) * 100
    return values.astype(dtype), enp.asarray(values.astype(dtype))


def test_distinct_ints_share_one_program(compiles):
    """The issue: 200 distinct x[i] compiled 200 programs (3-4 s); now one, whatever the values."""
    host, x = _fresh((53, 7))  # a shape no other test reads, so its program is compiled here
    before = len(compiles)
    rows = [x[i] for i in range(50)]
    assert len(compiles) - before <= 2
    for i, row in enumerate(rows):
        np.testing.assert_array_equal(np.asarray(row), host[i])
    assert [x[-i] for i in range(1, 6)] and len(compiles) - before <= 2  # negative ints: the same program
    np.testing.assert_array_equal(np.asarray(x[-3]), host[-3])


def test_iteration_slices_and_pairs_share_programs(compiles):
    host, x = _fresh((41, 5), seed=1)
    before = len(compiles)
    np.testing.assert_array_equal(np.stack([np.asarray(r) for r in x]), host)  # __iter__
    pairs = [np.asarray(x[i:i + 2]) for i in range(40)]
    elements = [np.asarray(x[i, i % 5]) for i in range(41)]
    assert len(compiles) - before <= 4  # rows, pairs, elements (and at most one more)
    assert all(np.array_equal(p, host[i:i + 2]) for i, p in enumerate(pairs))
    assert all(np.array_equal(e, host[i, i % 5]) for i, e in enumerate(elements))


ARRAYS = [  # (the default run: the first, float32 strong and weak; the others -m slow)
    np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5,
    *[pytest.param(a, marks=pytest.mark.slow) for a in [
        np.array([[np.nan, -0.0], [np.inf, 1e-45]], np.float32),  # NaN, -0.0 and a subnormal keep their bits
        np.arange(30, dtype=np.int16).reshape(5, 6) - 11,
        np.array([[True, False, True]]),
        np.arange(6, dtype=np.uint64).reshape(3, 2) * (2 ** 62),
        np.zeros((0, 3), np.float32),
        np.array(2.5, np.float32)]],
]
INDICES = [0, 1, -1, -2, np.int64(1), np.uint8(0), slice(None), slice(1, None), slice(None, -1), slice(-2, 10),
           slice(5, 1), slice(0, 2, 1), (0, 1), (-1, slice(1, 3)), (slice(None), 0), (Ellipsis, 1), (1, Ellipsis),
           (None, 0), (0, None, slice(1, 2)), (Ellipsis, None), None, Ellipsis, (), (0, 0, 0), (-2, -3, -4),
           # out of bounds, too many indices, two ellipses: the ordinary path's errors
           2, -3, 10 ** 20, (0, 0, 0, 0), (Ellipsis, Ellipsis),
           # other indices keep their paths: strides, booleans, arrays, float bounds
           slice(None, None, 2), slice(None, None, -1), True, (0, False), np.array([1, 0]), slice(0.0, 1)]


@pytest.mark.parametrize("host", ARRAYS, ids=lambda a: f"{a.dtype}{list(a.shape)}")
def test_same_outcome_as_the_ordinary_path(host):
    """Every index on every array: the same value bits, dtype, weak type and shape, or the same error."""
    arrays = [enp.asarray(host)]
    if host.dtype == np.float32:  # a weakly typed array (as promotion with a Python scalar makes)
        arrays.append(lax.convert_element_type(arrays[0], np.float32, True))
    for x in arrays:
        for index in INDICES:
            with eager.ordinary_path():
                expected = _outcome(lambda: x[index])
            assert _outcome(lambda: x[index]) == expected, index
            assert _outcome(lambda: x[index]) == expected, index  # the cached program


def test_ints_out_of_bounds_raise_index_error_as_numpy():
    """numpy raises IndexError for a static int out of bounds; so does ember (JAX clamps it)."""
    host, x = _fresh((4, 3), seed=2)
    for index in [4, -5, (0, 3), (1, -4), 2 ** 40]:
        with pytest.raises(IndexError):
            host[index]
        with pytest.raises(IndexError, match="out of bounds"):
            x[index]


def test_under_jit_static_indices_stay_static():
    _, x = _fresh((6, 4), seed=3)
    ir = ember.make_ir(lambda v: v[2, 1:3])(x)
    assert [e.prim.name for e in ir.eqns] == ["slice", "reshape"]
    ir = ember.make_ir(lambda v: v + x[-1])(x)  # a concrete Array indexed while staging: also static, staged
    assert [e.prim.name for e in ir.eqns] == ["slice", "reshape", "broadcast_in_dim", "add"]
    np.testing.assert_array_equal(np.asarray(ember.jit(lambda v: v[2, 1:3])(x)), np.asarray(x)[2, 1:3])


def test_a_deleted_array_takes_the_ordinary_path_and_its_error():
    _, x = _fresh((3, 2), seed=4)
    x[1]  # the program exists
    x.delete()
    with pytest.raises(RuntimeError, match="deleted"):
        x[1]


def test_debug_nans_checks_the_window_too():
    x = enp.asarray(np.array([[1.0, np.nan], [2.0, 3.0]], np.float32))
    with warnings.catch_warnings(), ember.config.override(debug_nans=True):
        warnings.simplefilter("ignore")
        with pytest.raises(FloatingPointError):
            x[0]
        np.testing.assert_array_equal(np.asarray(x[1]), [2.0, 3.0])
