"""Oracle tests for ember/_prims/windowed.py: reduce_window_sum/max/min (strides, padding, base and window
dilation), the pooling derivative primitives select_and_gather_add / select_and_scatter_add (against JAX's own,
which are internal to JAX), and cumsum; plus lax.reduce_window with other init values and the cumulative scans."""
import jax
import jax.lax as jlax
import numpy as np
import pytest
from jax._src.lax import windowed_reductions as jw

import ember
from ember import lax
from ember._prims import windowed
from oracle import Case, oracle_tests

pytestmark = pytest.mark.usefixtures("ember_x64")  # float64 inputs and oracles (numpy, JAX in x64 mode)

F = ["float32", "float64"]
FI = F + ["int32"]


def _identity(init, dtype):
    """init (0 or +-inf) as a value of dtype: integers use their extremes for +-inf."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f" or np.isfinite(init):
        return np.asarray(init, dtype)
    return np.asarray(np.iinfo(dtype).min if init < 0 else np.iinfo(dtype).max, dtype)


def _rw(init, op, jop, *args):
    e = lambda x: lax.reduce_window(x, _identity(init, x.dtype), op, *args)
    j = lambda x: jlax.reduce_window(x, _identity(init, x.dtype), jop, *args)
    return e, j


def _oracle(j):
    return lambda *a: np.asarray(j(*a)).astype(a[0].dtype)


POOL = ((1, 3, 3, 1), (1, 2, 2, 1), "SAME")
PADDED = ((2, 2), (1, 2), ((1, 0), (0, 2)))
DILATED = ((2, 2), (1, 1), "VALID", (1, 2), (2, 1))
GATHER_PARAMS = dict(window_dimensions=(2, 3), window_strides=(1, 2), padding=((1, 0), (1, 1)))

CASES = []
for _kind, _init, _op, _jop in [("sum", 0.0, lax.add, jlax.add), ("max", -np.inf, lax.max, jlax.max),
                                ("min", np.inf, lax.min, jlax.min)]:
    _e, _j = _rw(_init, _op, _jop, *POOL)
    _ep, _jp = _rw(_init, _op, _jop, *PADDED)
    _ed, _jd = _rw(_init, _op, _jop, *DILATED)
    _prim = f"reduce_window_{_kind}"
    CASES += [
        Case(_prim, _e, _oracle(_j), [((2, 5, 6, 2),)], FI, jax=_j),
        Case(_prim, _ep, _oracle(_jp), [((4, 5),)], FI, jax=_jp, name=f"{_prim}_padded"),
        # dilated max/min pooling has no reverse mode (as in JAX): its forward mode is checked below
        Case(_prim, _ed, _oracle(_jd), [((5, 6),)], FI, jax=_jd, name=f"{_prim}_dilated", grad=_kind == "sum"),
    ]


def _sga(select, jselect):
    e = lambda t, x: windowed.select_and_gather_add_p.bind(t, x, select=select, base_dilation=(1, 1),
                                                           window_dilation=(1, 1), **GATHER_PARAMS)
    j = lambda t, x: jw._select_and_gather_add(t, x, jselect, GATHER_PARAMS["window_dimensions"],
                                               GATHER_PARAMS["window_strides"], GATHER_PARAMS["padding"], (1, 1),
                                               (1, 1))
    return e, j


def _sgs(select, jselect):
    e = lambda s, x: windowed.select_and_scatter_add_p.bind(s, x, select=select, **GATHER_PARAMS)
    j = lambda s, x: jw._select_and_scatter_add(s, x, jselect, GATHER_PARAMS["window_dimensions"],
                                                GATHER_PARAMS["window_strides"], GATHER_PARAMS["padding"])
    return e, j


for _sel, _jsel in [("ge", jlax.ge_p), ("le", jlax.le_p)]:
    _e, _j = _sga(_sel, _jsel)
    CASES.append(Case("select_and_gather_add", _e, _oracle(_j), [((4, 5), (4, 5))], F, jax=_j,
                      name=f"select_and_gather_add_{_sel}"))
    _e, _j = _sgs(_sel, _jsel)
    CASES.append(Case("select_and_scatter_add", _e, _oracle(_j), [((4, 3), (4, 5))], F, jax=_j,
                      name=f"select_and_scatter_add_{_sel}"))

CASES += [
    Case("cumsum", lambda x: lax.cumsum(x, -1), lambda x: np.cumsum(x, -1).astype(x.dtype), [((3, 5),), ((7,),)], FI,
         jax=lambda x: jlax.cumsum(x, x.ndim - 1)),
    Case("cumsum", lambda x: lax.cumsum(x, 0, reverse=True), lambda x: np.cumsum(x[::-1], 0)[::-1].astype(x.dtype),
         [((4, 3),)], FI, jax=lambda x: jlax.cumsum(x, 0, reverse=True), name="cumsum_reverse"),
]

# a general computation: values and batching; derivatives refused with a clear error (as in JAX)
_e, _j = _rw(1.0, lax.mul, jlax.mul, (2, 2), (1, 2), ((1, 0), (0, 1)))
CASES.append(Case("reduce_window", _e, _oracle(_j), [((4, 5),)], FI, reverse=False, forward=False))


# the cumulative scans (primitives defined by associative scans): values against numpy's accumulations, derivatives
# against JAX's
def _np_cumulative(ufunc, axis, reverse=False):
    def fn(x):
        x = np.flip(x, axis) if reverse else x
        out = ufunc.accumulate(x, axis=axis).astype(x.dtype)
        return np.flip(out, axis) if reverse else out
    return fn


CASES += [
    Case("cumprod", lambda x: lax.cumprod(x, 1), _np_cumulative(np.multiply, 1), [((3, 4),), ((2, 5, 2),)], FI,
         jax=lambda x: jlax.cumprod(x, 1)),
    Case("cumprod", lambda x: lax.cumprod(x, 0, reverse=True), _np_cumulative(np.multiply, 0, True), [((5,),)], F,
         jax=lambda x: jlax.cumprod(x, 0, reverse=True), name="cumprod_reverse"),
    Case("cummax", lambda x: lax.cummax(x, 0), _np_cumulative(np.maximum, 0), [((5, 3),), ((7,),)], FI,
         jax=lambda x: jlax.cummax(x, 0)),
    Case("cummin", lambda x: lax.cummin(x, 1, reverse=True), _np_cumulative(np.minimum, 1, True), [((3, 5),)], FI,
         jax=lambda x: jlax.cummin(x, 1, reverse=True)),
    Case("cumlogsumexp", lambda x: lax.cumlogsumexp(x, 1), _np_cumulative(np.logaddexp, 1), [((3, 4),), ((6, 1),)],
         F, jax=lambda x: jlax.cumlogsumexp(x, 1)),
]


# select_and_scatter: XLA's general SelectAndScatter (JAX's private _select_and_scatter binds it), here with a max
# selection and a multiplying scatter; values and batching; derivatives refused clearly (as in JAX: none defined)
def _general_sas(x, s):
    return windowed.select_and_scatter(x, lax.ge, (2, 2), (1, 2), ((0, 1), (1, 0)), s, 1.0, lax.mul)


def _jax_general_sas(x, s):
    return jw._select_and_scatter(x, jlax.ge, (2, 2), (1, 2), ((0, 1), (1, 0)), s, np.asarray(1, s.dtype), jlax.mul)


CASES.append(Case("select_and_scatter", _general_sas, _oracle(_jax_general_sas), [((4, 5), (4, 3))], FI,
                  reverse=False, forward=False))

test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)


@pytest.mark.parametrize("init", [1.0, -3.0])
@pytest.mark.parametrize("name", ["add", "max", "min"])
def test_reduce_window_other_init_values(name, init):
    x = np.random.default_rng(0).normal(size=(5, 6))
    args = ((2, 3), (1, 2), ((1, 1), (0, 1)))
    got = lax.reduce_window(x, init, getattr(lax, name), *args)
    np.testing.assert_allclose(np.asarray(got), np.asarray(jlax.reduce_window(x, init, getattr(jlax, name), *args)))
    g = ember.grad(lambda x: ember.numpy.sum(lax.reduce_window(x, init, getattr(lax, name), *args) ** 2))(x)
    assert np.all(np.isfinite(np.asarray(g)))


@pytest.mark.parametrize("name,reverse", [  # (each in both directions in the slow tier)
    pytest.param(n, r, id=f"{r}-{n}", marks=() if r == (i % 2 == 1) else pytest.mark.slow)
    for i, n in enumerate(["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"]) for r in (False, True)])
def test_cumulative_scans(name, reverse):
    x = np.random.default_rng(1).normal(size=(4, 6))
    e, j = getattr(lax, name), getattr(jlax, name)
    np.testing.assert_allclose(np.asarray(e(x, 1, reverse)), np.asarray(j(x, 1, reverse)), rtol=1e-12)
    g = ember.grad(lambda x: ember.numpy.sum(e(x, 1, reverse) * x))(x)
    np.testing.assert_allclose(np.asarray(g), np.asarray(jax.grad(lambda x: (j(x, 1, reverse) * x).sum())(x)),
                               rtol=1e-10)
    np.testing.assert_allclose(np.asarray(ember.vmap(lambda r: e(r, 0, reverse))(x)),
                               np.asarray(jax.vmap(lambda r: j(r, 0, reverse))(x)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(ember.jit(lambda x: e(x, 0, reverse))(x)), np.asarray(j(x, 0, reverse)),
                               rtol=1e-12)


def test_max_pool_gradient_goes_to_the_first_maximum():
    x = np.array([[1.0, 3.0, 3.0, 0.0]])
    g = ember.grad(lambda x: ember.numpy.sum(lax.reduce_window(x, -np.inf, lax.max, (1, 2), (1, 2), "VALID")))(x)
    want = jax.grad(lambda x: jlax.reduce_window(x, -np.inf, jlax.max, (1, 2), (1, 2), "VALID").sum())(x)
    np.testing.assert_array_equal(np.asarray(g), np.asarray(want))


@pytest.mark.parametrize("name", ["max", "min"])
def test_dilated_pooling_forward_mode(name):
    rng = np.random.default_rng(2)
    x, t = rng.normal(size=(5, 6)), rng.normal(size=(5, 6))
    args = ((2, 2), (1, 1), "VALID", (1, 2), (2, 1))
    init = -np.inf if name == "max" else np.inf
    got = ember.jvp(lambda x: lax.reduce_window(x, init, getattr(lax, name), *args), (x,), (t,))
    want = jax.jvp(lambda x: jlax.reduce_window(x, init, getattr(jlax, name), *args), (x,), (t,))
    for a, b in zip(got, want):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b))


def test_errors():
    with pytest.raises(TypeError, match=r"reduce_window_sum: window_dimensions \(2,\) and window_strides \(1, 1\)"):
        lax.reduce_window(np.ones((3, 3), np.float32), 0.0, lax.add, (2,), (1, 1), "VALID")
    with pytest.raises(TypeError, match="reduce_window: computation .<lambda>. must map two scalars of dtype float32"):
        lax.reduce_window(np.ones((3, 3), np.float32), 1.0, lambda a, b: (a, b), (2, 2), (1, 1), "VALID")
    with pytest.raises(NotImplementedError, match="reverse-mode derivative of reduce_window_max with base or window "
                                                  "dilation"):
        ember.grad(lambda x: ember.numpy.sum(lax.reduce_window(x, -np.inf, lax.max, (2,), (1,), "VALID", None,
                                                                (2,))))(np.ones(5))
