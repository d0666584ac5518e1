"""Oracle tests for ember/_prims/indexing.py: gather, the scatter family, dynamic_slice, dynamic_update_slice and
clamp. Index arguments are int32 in [0, 4) (domain "int_small"); forward values against numpy where it says it
plainly, else against JAX (run in float64, cast back to the case's dtype)."""
import jax.lax as jlax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
from ember import lax
from oracle import Case, oracle_tests

FI = ["float32", "float64", "int32"]
FIB = FI + ["bool"]
I32 = "int32"

GD, JGD = lax.GatherDimensionNumbers, jlax.GatherDimensionNumbers
SD, JSD = lax.ScatterDimensionNumbers, jlax.ScatterDimensionNumbers


def _jax_oracle(fn):
    """fn on jax arrays, as a numpy forward oracle keeping the first argument's dtype."""
    return lambda *args: np.asarray(fn(*args)).astype(args[0].dtype)


def _gather(dnums, sizes, mode="clip", fill_value=None):
    e = lambda x, i: lax.gather(x, i, GD(*dnums), sizes, mode=mode, fill_value=fill_value)
    j = lambda x, i: jlax.gather(x, i, JGD(*dnums), sizes, mode=mode, fill_value=fill_value)
    return e, j


ROWS = _gather(((1,), (0,), (0,)), (1, 4))                            # x[i] for rows i
POINTS = _gather(((1,), (0, 1), (0, 1)), (1, 1, 3))                    # x[i, j, :]
WINDOWS = _gather(((1,), (), (0,)), (3,))                              # x[i:i + 3] (clamped)
BATCHED = _gather(((), (1,), (1,), (0,), (0,)), (1, 1))                # x[b, i[b, k]]
FILLED = _gather(((1,), (0,), (0,)), (1, 4), mode="fill", fill_value=0.5)  # index 3 is out of bounds


def _scatter(name, dnums, unique=False, mode=None):
    e = lambda x, i, u: getattr(lax, name)(x, i, u, SD(*dnums), unique_indices=unique, mode=mode)
    j = lambda x, i, u: getattr(jlax, name)(x, i, u, JSD(*dnums), unique_indices=unique, mode=mode)
    return e, j


SCATTER_ROWS = ((1,), (0,), (0,))
SCATTER_BATCHED = ((), (1,), (1,), (0,), (0,))
UNIQUE_ROWS = np.array([[3], [0], [2]], np.int32)


def _np_dynamic_slice(x, *starts, sizes):
    starts = [int(np.clip(s, 0, n - k)) for s, n, k in zip(starts, x.shape, sizes)]
    return x[tuple(slice(s, s + k) for s, k in zip(starts, sizes))]


def _np_dynamic_update_slice(x, u, *starts):
    starts = [int(np.clip(s, 0, n - k)) for s, n, k in zip(starts, x.shape, u.shape)]
    out = x.copy()
    out[tuple(slice(s, s + k) for s, k in zip(starts, u.shape))] = u
    return out


def _jax_clamp(lo, x, hi):  # JAX's clamp cannot differentiate scalar bounds, nor max where min > max
    return jnp.minimum(jnp.maximum(x, lo), hi)


def _mul_unique(e):
    return lambda x, u: e(x, UNIQUE_ROWS, u)


CASES = [
    Case("gather", ROWS[0], lambda x, i: x[np.clip(i[:, 0], 0, 4)], [((5, 4), (3, 1)), ((6, 4), (7, 1))], FIB,
         jax=ROWS[1], arg_dtypes=[None, I32], domain="int_small"),
    Case("gather", POINTS[0], _jax_oracle(POINTS[1]), [((4, 5, 3), (2, 2))], FI, jax=POINTS[1],
         arg_dtypes=[None, I32], domain="int_small", name="gather_points"),
    Case("gather", WINDOWS[0], _jax_oracle(WINDOWS[1]), [((5,), (4, 1))], FI, jax=WINDOWS[1],
         arg_dtypes=[None, I32], domain="int_small", name="gather_windows"),
    Case("gather", BATCHED[0], lambda x, i: np.take_along_axis(x, i[..., 0], 1), [((3, 5), (3, 2, 1))], FI,
         jax=BATCHED[1], arg_dtypes=[None, I32], domain="int_small", name="gather_batching_dims"),
    Case("gather", FILLED[0], _jax_oracle(FILLED[1]), [((3, 4), (4, 1))], ["float32", "float64"], jax=FILLED[1],
         arg_dtypes=[None, I32], domain="int_small", name="gather_fill"),
    Case("dynamic_slice", lambda x, a, b: lax.dynamic_slice(x, (a, b), (2, 3)),
         lambda x, a, b: _np_dynamic_slice(x, a, b, sizes=(2, 3)), [((5, 4), (), ())], FIB,
         jax=lambda x, a, b: jlax.dynamic_slice(x, (a, b), (2, 3)), arg_dtypes=[None, I32, I32], domain="int_small"),
    Case("dynamic_update_slice", lambda x, u, a, b: lax.dynamic_update_slice(x, u, (a, b)),
         _np_dynamic_update_slice, [((5, 4), (2, 3), (), ())], FIB,
         jax=lambda x, u, a, b: jlax.dynamic_update_slice(x, u, (a, b)), arg_dtypes=[None, None, I32, I32],
         domain="int_small"),
    Case("clamp", lambda lo, x, hi: lax.clamp(lo, x, hi), lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi),
         [((), (6,), ()), ((6,), (6,), ())], FI, jax=_jax_clamp),
]
for _name in ("scatter", "scatter_add", "scatter_sub", "scatter_min", "scatter_max", "scatter_mul"):
    _e, _j = _scatter(_name, SCATTER_ROWS)
    _eb, _jb = _scatter(_name, SCATTER_BATCHED)
    _dtypes = FIB if _name == "scatter" else FI
    # indices as an argument (repeated indices; batched under vmap); the derivative of scatter_mul with respect
    # to the updates needs unique indices, so its derivatives are checked with fixed unique ones below
    CASES.append(Case(_name, _e, _jax_oracle(_j), [((5, 4), (3, 1), (3, 4)), ((5, 4), (2, 2, 1), (2, 4, 2))],
                      _dtypes, jax=_j, arg_dtypes=[None, I32, None], domain="int_small",
                      grad=_name != "scatter_mul"))
    CASES.append(Case(_name, _eb, _jax_oracle(_jb), [((3, 5), (3, 2, 1), (3, 2))], _dtypes, jax=_jb,
                      arg_dtypes=[None, I32, None], domain="int_small", grad=_name != "scatter_mul",
                      name=f"{_name}_batching_dims"))
_e, _j = _scatter("scatter_mul", SCATTER_ROWS, unique=True)
CASES.append(Case("scatter_mul", _mul_unique(_e), _jax_oracle(_mul_unique(_j)), [((5, 4), (3, 4))], FI,
                  jax=_mul_unique(_j), name="scatter_mul_unique"))



def _scatter_apply(dnums, update_shape, mode=None):
    """scatter_apply of x -> 2 x + 1 (applied once per window that covers an element) with indices as an argument."""
    def e(x, i):
        return lax.scatter_apply(x, i, lambda v: v * 2 + 1, SD(*dnums), update_shape=update_shape, mode=mode)

    def j(x, i):
        return jlax.scatter_apply(x, i, lambda v: v * 2 + 1, JSD(*dnums), update_shape=update_shape, mode=mode)
    return e, j


# scatter_apply: forward values and batching (row 3 is hit twice, so it gets the function twice); its
# derivatives are the mark's error (not differentiable, as JAX)
REPEATED_ROWS = np.array([[3], [0], [3]], np.int32)
_e, _j = _scatter_apply(SCATTER_ROWS, (3, 4))
CASES.append(Case("scatter_apply", _e, _jax_oracle(_j), [((5, 4), (3, 1))], FI, arg_dtypes=[None, I32],
                  domain="int_small", grad=False))
CASES.append(Case("scatter_apply", lambda x, _e=_e: _e(x, REPEATED_ROWS),
                  _jax_oracle(lambda x, _j=_j: _j(x, REPEATED_ROWS)), [((5, 4),)], FI, forward=False, reverse=False,
                  name="scatter_apply_repeated"))
SLOW_CASES = []
_e, _j = _scatter_apply(SCATTER_BATCHED, (3, 2))
SLOW_CASES.append(Case("scatter_apply", _e, _jax_oracle(_j), [((3, 5), (3, 2, 1))], FI, arg_dtypes=[None, I32],
                       domain="int_small", grad=False, name="scatter_apply_batching_dims"))
_e, _j = _scatter_apply(((1,), (0,), (0,)), (3, 2), mode="clip")  # windows of 2 columns, clamped into the rows
SLOW_CASES.append(Case("scatter_apply", _e, _jax_oracle(_j), [((4, 3), (3, 1))], FI, arg_dtypes=[None, I32],
                       domain="int_small", grad=False, name="scatter_apply_clip_windows"))

test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)
(test_slow_forward, test_slow_grad, test_slow_jvp, test_slow_vmap,
 test_slow_jacobians) = (pytest.mark.slow(test) for test in oracle_tests(SLOW_CASES))


def test_scatter_out_of_bounds_modes():
    x = np.zeros((4, 2), np.float32)
    i = np.array([[1], [7], [-2]], np.int32)
    u = np.ones((3, 2), np.float32)
    for mode in ("drop", "clip", "promise_in_bounds"):
        got = lax.scatter_add(x, i, u, SD(*SCATTER_ROWS), mode=mode)
        want = jlax.scatter_add(x, i, u, JSD(*SCATTER_ROWS), mode="fill" if mode == "drop" else mode)
        if mode != "promise_in_bounds":  # out-of-bounds results are unspecified there
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_scatter_set_repeated_indices_gradient_goes_to_the_written_update():
    i = np.array([[1], [1], [2]], np.int32)
    x, u = np.zeros((3, 2)), np.arange(6.0).reshape(3, 2)
    out = lax.scatter(x, i, u, SD(*SCATTER_ROWS))
    g = ember.grad(lambda u: ember.numpy.sum(lax.scatter(x, i, u, SD(*SCATTER_ROWS))), )(u)
    written = np.asarray(out)[1]  # the update that won position 1 gets its cotangent, the other none
    won = 1 if np.array_equal(written, u[1]) else 0
    expected = np.ones((3, 2))
    expected[1 - won] = 0
    np.testing.assert_array_equal(np.asarray(g), expected)


def test_scatter_mul_refuses_update_derivatives_without_unique_indices():
    i = np.array([[1], [1]], np.int32)
    with pytest.raises(NotImplementedError, match="scatter_mul: .*unique_indices=True"):
        ember.grad(lambda u: ember.numpy.sum(lax.scatter_mul(np.ones((3, 2)), i, u, SD(*SCATTER_ROWS))))(
            np.ones((2, 2)))


def test_select_n():
    cases = [np.full(4, float(k)) for k in range(3)]
    which = np.array([2, 0, 1, 2], np.int32)
    np.testing.assert_array_equal(np.asarray(lax.select_n(which, *cases)), [2, 0, 1, 2])
    np.testing.assert_array_equal(np.asarray(lax.select_n(np.array([True, False]), np.zeros(2), np.ones(2))), [1, 0])
    np.testing.assert_array_equal(np.asarray(ember.vmap(lambda w: lax.select_n(w, *cases))(which[:, None]
                                                                                          .repeat(4, 1))),
                                  np.repeat(which[:, None], 4, 1))


@pytest.mark.parametrize("call,message", [
    (lambda: lax.gather(np.ones((3, 4)), np.zeros((2, 2), np.int32), GD((1,), (0,), (0,)), (1, 4)),
     r"gather: indices i32\[2,2\] must end in an index vector of length 1"),
    (lambda: lax.gather(np.ones((3, 4)), np.zeros((2, 1), np.float32), GD((1,), (0,), (0,)), (1, 4)),
     r"gather.*indices"),
    (lambda: lax.gather(np.ones((3, 4)), np.zeros((2, 1), np.int32), GD((1,), (0,), (0,)), (2, 4)),
     r"gather: collapsed or batching dimension 0 must have slice size 1"),
    (lambda: lax.gather(np.ones((3, 4)), np.zeros((2, 1), np.int32), GD((1,), (0,), (0,)), (1, 5)),
     r"gather: slice_sizes \(1, 5\) exceed the operand"),
    (lambda: lax.scatter_add(np.ones((3, 4)), np.zeros((2, 1), np.int32), np.ones((3, 4)), SD((1,), (0,), (0,))),
     r"scatter_add: updates f64\[3,4\] must have the indices' batch shape \(2,\)"),
    (lambda: lax.scatter(np.ones((3, 4)), np.zeros((2, 1), np.int32), np.ones((2, 4), np.float32),
                         SD((1,), (0,), (0,))), r"scatter"),
    (lambda: lax.dynamic_slice(np.ones((3, 4)), (0,), (1, 1)), r"dynamic_slice: needs one start index per dim"),
    (lambda: lax.dynamic_slice(np.ones((3, 4)), (0, 0), (4, 1)), r"dynamic_slice: slice_sizes \(4, 1\) do not fit"),
    (lambda: lax.dynamic_update_slice(np.ones((3, 4)), np.ones((4, 1)), (0, 0)),
     r"dynamic_update_slice: update f64\[4,1\] does not fit in f64\[3,4\]"),
    (lambda: lax.clamp(np.zeros(2), np.ones(3), 1.0), r"clamp: min f64\[2\] must be a scalar or have the shape"),
    (lambda: lax.gather(np.ones(3), np.zeros((1, 1), np.int32), GD((), (0,), (0,)), (1,), mode="wrap"),
     r"gather: mode must be one of"),
])
def test_errors(call, message):
    with ember.config.override(enable_x64=True):
        with pytest.raises((TypeError, ValueError), match=message):
            call()


def test_gather_fill_defaults():
    x = np.arange(6.0).reshape(3, 2)
    i = np.array([[1], [3], [-1]], np.int32)
    for dtype in ("float32", "int32", "uint8", "bool"):
        xs = x.astype(dtype)
        got = lax.gather(xs, i, GD((1,), (0,), (0,)), (1, 2), mode="fill")
        want = jlax.gather(xs, i, JGD((1,), (0,), (0,)), (1, 2), mode="fill")
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_dynamic_slices_wrap_negative_starts_as_jax():
    import jax
    x = np.arange(20.0).reshape(4, 5)
    for starts in [(-1, -2), (-9, 3), (2, -5)]:
        for allow in (True, (True, False)):
            if not all(a or s >= 0 for a, s in zip(allow if isinstance(allow, tuple) else (allow,) * 2, starts)):
                continue
            want = jlax.dynamic_slice(x, starts, (2, 2), allow_negative_indices=allow)
            np.testing.assert_array_equal(np.asarray(lax.dynamic_slice(x, starts, (2, 2),
                                                                       allow_negative_indices=allow)), want)
        traced = ember.jit(lambda x, a, b: lax.dynamic_slice(x, (a, b), (2, 2)))(x, *starts)
        np.testing.assert_array_equal(np.asarray(traced), np.asarray(jlax.dynamic_slice(x, starts, (2, 2))))
        upd = lax.dynamic_update_slice(x, np.ones((2, 2)), starts)
        np.testing.assert_array_equal(np.asarray(upd),
                                      np.asarray(jlax.dynamic_update_slice(x, np.ones((2, 2)), starts)))
    batched = ember.vmap(lambda i: lax.dynamic_slice(x, (i, 0), (1, 5)))(np.array([-1, 0, -4]))
    np.testing.assert_array_equal(np.asarray(batched),
                                  np.asarray(jax.vmap(lambda i: jlax.dynamic_slice(x, (i, 0), (1, 5)))(
                                      np.array([-1, 0, -4]))))
    with pytest.raises(ValueError, match="dynamic_slice: start index -2 of dimension 1 .* allow_negative_indices"):
        lax.dynamic_slice(x, (0, -2), (2, 2), allow_negative_indices=(True, False))
