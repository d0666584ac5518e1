"""ember.numpy where it used to differ from numpy and JAX (issue 23): the NaN-ignoring reductions with initial= and
where=, reshape/ravel in F order, every numpy quantile method, r_/c_ string directives and Array.view. Values
against numpy (and JAX where it has the feature), eagerly, under jit, under vmap (the reductions) and under grad
(the differentiable ones, against JAX)."""
import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._numpy.statistics import _METHODS
from recorded import jax_result

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")

# a column of NaNs alone, a row of NaNs alone, a row fully masked by ROW_MASK, a row whose unmasked entries are NaN
X = np.array([[1.0, np.nan, 3.0, np.nan], [np.nan, np.nan, np.nan, np.nan], [2.0, 5.0, np.nan, np.nan],
              [4.0, -1.0, 0.5, np.nan]], np.float32)
ROW_MASK = np.array([[True, False, True, True], [True, True, False, False], [False, False, False, False],
                     [True, True, False, True]])
COLUMN_MASK = np.array([True, False, True, True])
NAN_REDUCTIONS = ["nanmin", "nanmax", "nansum", "nanprod", "nanmean", "nanvar", "nanstd"]
WITH_INITIAL = {"nanmin", "nanmax", "nansum", "nanprod"}


def _close(got, want, rtol=1e-5):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=1e-6, equal_nan=True)


def _nan_cases():
    for name, axis, keepdims, initial, mask in itertools.product(
            NAN_REDUCTIONS, [None, 0, 1], [False, True], [None, 0.0, 10.0], ["none", "rows", "columns"]):
        if initial is not None and name not in WITH_INITIAL:
            continue
        if mask != "none" and initial is None and name in ("nanmin", "nanmax"):
            continue  # numpy and JAX refuse where= without initial= for reductions without an identity
        # every other (axis, mask) pair, without keepdims and initial=10; the rest of the grid runs with -m slow
        quick = not keepdims and initial != 10.0 and ([None, 0, 1].index(axis) + ["none", "rows", "columns"].index(
            mask)) % 2 == 0
        yield pytest.param(name, axis, keepdims, initial, mask, id=f"{name}-{axis}-{keepdims}-{initial}-{mask}",
                           marks=() if quick else pytest.mark.slow)


def _nan_kwargs(axis, keepdims, initial, mask):
    kwargs = {"axis": axis, "keepdims": keepdims}
    if initial is not None:
        kwargs["initial"] = initial
    if mask != "none":
        kwargs["where"] = ROW_MASK if mask == "rows" else COLUMN_MASK
    return kwargs


@pytest.mark.parametrize("name,axis,keepdims,initial,mask", list(_nan_cases()))
def test_nan_reductions_with_initial_and_where(name, axis, keepdims, initial, mask):
    kwargs = _nan_kwargs(axis, keepdims, initial, mask)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy warns on slices of NaNs alone
        want = getattr(np, name)(X, **kwargs)
    _close(getattr(enp, name)(X, **kwargs), want)
    if axis is None and mask != "none":  # JAX agrees (the oracle's oracle; once per kind of case is enough)
        _close(jax_result(lambda: getattr(jnp, name)(X, **kwargs)), want)
    _close(ember.jit(lambda x: getattr(enp, name)(x, **kwargs))(X), want)


def test_nanmin_initial_where_as_jax_documents():
    x = np.array([[np.nan, 2.0, np.nan, 4.0], [np.nan, -2.0, -3.0, -4.0], [np.nan, 6.0, 7.0, np.nan]], np.float32)
    where = np.array([[False], [True], [False]])
    _close(enp.nanmin(x, axis=0, keepdims=True, initial=0, where=where), [[0.0, -2.0, -3.0, -4.0]])
    _close(enp.nanmin(x, axis=1, keepdims=True, initial=0, where=where), [[0.0], [-4.0], [0.0]])


@pytest.mark.parametrize("name", sorted(WITH_INITIAL))
def test_nan_reductions_with_initial_under_vmap(name):
    kwargs = {"axis": 0, "initial": 1.5, "where": COLUMN_MASK}
    got = ember.vmap(lambda x: getattr(enp, name)(x, **kwargs))(X)
    want = np.stack([getattr(np, name)(row, **kwargs) for row in X])
    _close(got, want)


@pytest.mark.parametrize("name", ["nanmin", "nanmax", "nansum", "nanmean"])
def test_nan_reductions_with_initial_and_where_grad(name):
    kwargs = {"axis": 1, "where": ROW_MASK, **({"initial": 10.0 if name == "nanmin" else -10.0}
                                              if name in ("nanmin", "nanmax") else {})}
    x = np.where(np.isnan(X), np.nan, X + np.arange(16, dtype=np.float32).reshape(4, 4) / 7)
    got = ember.grad(lambda a: enp.sum(getattr(enp, name)(a, **kwargs) ** 2))(x)
    want = jax_result(lambda: jax.grad(lambda a: jnp.sum(getattr(jnp, name)(a, **kwargs) ** 2))(jnp.asarray(x)))
    _close(got, want)


# ---------------------------------------------------------------------------------------------------------------
# reshape in F order
@pytest.mark.parametrize("shape", [(4, 6), (-1,), (3, 2, 4), (2, -1), (24,), (1, 24, 1)])
def test_reshape_order_f(shape):
    x = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4)
    want = np.reshape(x, shape, order="F")
    _close(enp.reshape(x, shape, order="F"), want)
    _close(enp.asarray(x).reshape(shape, order="F"), want)
    _close(ember.jit(lambda a: enp.reshape(a, shape, order="F"))(x), want)
    _close(jax_result(lambda: jnp.reshape(jnp.asarray(x), shape, order="F")), want)


def test_ravel_order_f_and_its_grad():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    _close(enp.ravel(x, order="F"), np.ravel(x, order="F"))
    weights = np.linspace(-1.0, 1.0, 12, dtype=np.float32)
    got = ember.grad(lambda a: enp.sum(enp.reshape(a, (2, 6), order="F") ** 2 * weights.reshape(2, 6)))(x)
    want = jax_result(lambda: jax.grad(lambda a: jnp.sum(jnp.reshape(a, (2, 6), order="F") ** 2 *
                                                         weights.reshape(2, 6)))(x))
    _close(got, want)
    _close(ember.vmap(lambda a: enp.reshape(a, (2, 2), order="F"))(x), [np.reshape(r, (2, 2), order="F") for r in x])


def test_reshape_orders_refused():
    with pytest.raises(NotImplementedError, match="order='A'"):
        enp.reshape(np.ones((2, 3)), (3, 2), order="A")
    with pytest.raises(ValueError, match="order must be"):
        enp.reshape(np.ones((2, 3)), (3, 2), order="K")


# ---------------------------------------------------------------------------------------------------------------
# quantile methods
def test_every_numpy_quantile_method_is_supported():
    numpy_methods = {"inverted_cdf", "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf",
                     "hazen", "weibull", "linear", "median_unbiased", "normal_unbiased", "lower", "higher",
                     "midpoint", "nearest"}
    assert set(_METHODS) == numpy_methods


@pytest.mark.parametrize("n,method", [  # (each method at one of n=1 and n=8 by default, in turn; all with -m slow)
    pytest.param(n, method, id=f"{n}-{method}", marks=() if n in (1, 8) and (i + j) % 2 == 0 else pytest.mark.slow)
    for j, n in enumerate([1, 8, 2, 5]) for i, method in enumerate(_METHODS)])
def test_quantile_methods(method, n):
    rng = np.random.default_rng(n)
    x = rng.normal(size=(3, n)).astype(np.float32)
    if n > 1:
        x[1, 1] = np.nan
    q = np.linspace(0.0, 1.0, 13).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for name in ("quantile", "nanquantile"):
            _close(getattr(enp, name)(x, q, axis=1, method=method), getattr(np, name)(x, q, axis=1, method=method))
        _close(enp.percentile(x, 100 * q, axis=1, method=method), np.percentile(x, 100 * q, axis=1, method=method))
        _close(ember.jit(lambda a: enp.nanpercentile(a, 30.0, axis=1, method=method, keepdims=True))(x),
               np.nanpercentile(x, 30.0, axis=1, method=method, keepdims=True))


@pytest.mark.parametrize("method", _METHODS)
def test_quantile_methods_under_vmap(method):
    x = np.random.default_rng(1).normal(size=(4, 7)).astype(np.float32)
    got = ember.vmap(lambda row: enp.quantile(row, np.array([0.1, 0.5, 0.85], np.float32), method=method))(x)
    _close(got, np.stack([np.quantile(row, [0.1, 0.5, 0.85], method=method) for row in x]))


@pytest.mark.parametrize("method", ["inverted_cdf", "linear", "hazen", "averaged_inverted_cdf", "midpoint"])
def test_quantile_grad(method):
    x = np.random.default_rng(2).normal(size=(9,)).astype(np.float32)
    q = np.array([0.2, 0.5, 0.75], np.float32)
    got = ember.grad(lambda a: enp.sum(enp.quantile(a, q, method=method) * np.array([1.0, 2.0, 3.0])))(x)
    if method in ("inverted_cdf", "linear", "midpoint"):  # the methods JAX has
        want = jax_result(lambda: jax.grad(lambda a: jnp.sum(jnp.quantile(a, q, method=method) *
                                                             jnp.array([1.0, 2.0, 3.0])))(x))
    else:  # finite differences (the order statistics stay put for a small step)
        eps = 1e-3
        basis = np.eye(9, dtype=np.float32)
        want = [(np.sum(np.quantile(x + eps * e, q, method=method) * [1, 2, 3]) -
                 np.sum(np.quantile(x - eps * e, q, method=method) * [1, 2, 3])) / (2 * eps) for e in basis]
    _close(got, want, rtol=1e-3)


# ---------------------------------------------------------------------------------------------------------------
# r_ and c_ directives
A, B, M = np.array([1, 2, 3]), np.array([4, 5, 6]), np.arange(6).reshape(2, 3)
CONCATENATIONS = [
    ("r_", ("0,2", A, B)), ("r_", ("1,2", A, B)), ("r_", ("1,2,0", A, B)), ("r_", ("0,2,0", A, B)),
    ("r_", ("-1,3,1", A, B)), ("r_", ("0,3,-2", A, M)), ("r_", ("0,3,0", M, M)), ("r_", ("1,3,2", A, B)),
    ("r_", ("0,2,1,7", A, B)), ("r_", ("-1", M, M)), ("r_", ("1", M, M)), ("r_", ("r", A, B)), ("r_", ("c", A, B)),
    ("r_", ("r", M, M)), ("c_", ("r", A, B)), ("c_", ("c", A, B)), ("c_", ("0,2,-1", A, B)), ("c_", (A, B)),
    ("c_", (M, M)), ("c_", (slice(0, 3), A)), ("r_", (A, 0, B)), ("r_", (slice(0, 4), A)),
    ("r_", ("0,2", slice(0, 1, 3j), A)),
]


@pytest.mark.parametrize("name,key", CONCATENATIONS, ids=[f"{n}{k[0] if isinstance(k[0], str) else ''}-{i}"
                                                          for i, (n, k) in enumerate(CONCATENATIONS)])
def test_r_and_c_directives(name, key):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)  # numpy makes a matrix for 'r' / 'c'
        want = np.asarray(getattr(np, name)[key])  # (ember the 2-D array, as JAX)
    _close(getattr(enp, name)[key], want)  # (JAX 0.10.2 agrees but for "0,3,0" with 2-D entries: numpy's rule here)
    traced = ember.jit(lambda *arrays: getattr(enp, name)[_with_arrays(key, arrays)])
    _close(traced(*[k for k in key if isinstance(k, np.ndarray)]), want)


def _with_arrays(key, arrays):
    """key with its arrays replaced, in order, by arrays."""
    given = iter(arrays)
    return tuple(next(given) if isinstance(k, np.ndarray) else k for k in key)


def test_r_directive_errors():
    with pytest.raises(ValueError, match="unknown special directive"):
        enp.r_["x,y", A]
    with pytest.raises(ValueError, match="must be the first entry"):
        enp.r_[A, "0", B]


# ---------------------------------------------------------------------------------------------------------------
# Array.view
F32 = np.array([[1.5, -2.0, 3.25, 0.0], [7.0, 8.5, -1.0, 2.0]], np.float32)
U8 = np.arange(16, dtype=np.uint8).reshape(2, 8)
BOOLS = np.array([[True, False, True, True]])
VIEWS = [(F32, "int32"), (F32, "uint8"), (F32, "int16"), (F32, "float16"), (F32, "bool"), (F32, "float32"),
         (U8, "uint16"), (U8, "float32"), (U8, "bool"), (BOOLS, "uint8"), (BOOLS, "int8"), (F32[:, :3], "float16"),
         (np.float32(3.5), "int32"), (np.arange(4, dtype=np.int16), "float32")]


@pytest.mark.parametrize("x,dtype", VIEWS, ids=[f"{np.asarray(x).dtype}{np.shape(x)}-{d}" for x, d in VIEWS])
def test_view(x, dtype):
    want = jax_result(lambda: jnp.asarray(x).view(dtype))
    np.testing.assert_array_equal(want, np.asarray(x).view(dtype).reshape(want.shape))  # JAX as numpy, bit for bit
    for got in (enp.asarray(x).view(dtype), ember.jit(lambda a: a.view(dtype))(enp.asarray(x))):
        assert np.dtype(got.dtype) == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), want)


def test_view_under_vmap_and_errors():
    got = ember.vmap(lambda row: row.view("uint16"))(U8)
    np.testing.assert_array_equal(np.asarray(got), U8.view(np.uint16))
    np.testing.assert_array_equal(np.asarray(enp.asarray(F32).view()), F32)
    with pytest.raises(ValueError, match="does not divide"):
        enp.asarray(np.ones(3, np.float16)).view("float32")
    with pytest.raises(ValueError, match="0-d"):
        enp.asarray(np.float32(1.0)).view("float16")
    with pytest.raises(NotImplementedError):
        enp.asarray(F32).view("int32", type=np.ndarray)


# ---------------------------------------------------------------------------------------------------------------
# functions rewritten when ember._numpy got its module order: fromfunction (without grids), diagonal (in shape.py,
# with slices instead of indexing), where (the one-operand form in selection.py)
@pytest.mark.parametrize("shape,dtype", [((3, 4), float), ((2, 3, 2), "int32"), ((5,), "float32")])
def test_fromfunction(shape, dtype):
    def fn(*grids):
        return sum((i + 1) * g for i, g in enumerate(grids))
    want = np.fromfunction(fn, shape, dtype=np.float32 if dtype is float else dtype)
    got = enp.fromfunction(fn, shape, dtype=dtype)
    _close(got, want)
    assert np.dtype(got.dtype) == want.dtype


def _diagonal_cases():
    """Offsets past either end, negative and positive, on each pair of axes; a quarter run by default (every offset
    sign and every axis order in it), the rest with -m slow."""
    for axes in [(0, 1), (1, 0), (2, 0), (-1, 1)]:
        for offset in [-5, -2, -1, 0, 1, 3, 4, 7]:
            quick = (axes in [(0, 1), (2, 0)] and offset in (-5, -1, 0, 4)) or (axes == (-1, 1) and offset == 1)
            yield pytest.param(offset, axes, id=f"{offset}-{axes}", marks=() if quick else pytest.mark.slow)


@pytest.mark.parametrize("offset,axes", _diagonal_cases())
def test_diagonal_offsets(offset, axes):
    x = np.arange(60.0, dtype=np.float32).reshape(3, 4, 5)
    want = np.diagonal(x, offset, *axes)
    _close(enp.diagonal(x, offset, *axes), want)
    _close(ember.jit(lambda a: enp.diagonal(a, offset, *axes))(x), want)
    weights = np.linspace(1.0, 2.0, want.size, dtype=np.float32).reshape(want.shape)
    got = ember.grad(lambda a: enp.sum(enp.diagonal(a, offset, *axes) * weights))(x)
    _close(got, jax_result(lambda: jax.grad(lambda a: jnp.sum(jnp.diagonal(a, offset, *axes) * weights))(x)))


def test_where_forms():
    x = np.array([[0.0, 1.5], [-2.0, 0.0]], np.float32)
    for got, want in zip(enp.where(x), np.where(x)):
        np.testing.assert_array_equal(np.asarray(got), want)
    _close(enp.where(x > 0, x, -1.0), np.where(x > 0, x, -1.0))
    _close(ember.jit(lambda a: enp.where(a != 0, size=3, fill_value=9)[1])(x), [1, 0, 9])
    with pytest.raises(ValueError, match="both x and y"):
        enp.where(x > 0, x)
    with pytest.raises(ValueError, match="one-argument form"):
        enp.where(x > 0, x, 0.0, size=2)


@pytest.mark.parametrize("name", ["quantile", pytest.param("nanquantile", marks=pytest.mark.slow),
                                  pytest.param("percentile", marks=pytest.mark.slow), "nanpercentile"])
def test_quantile_weights_match_numpy_and_jax(name):
    """weights= (method='inverted_cdf' only, as JAX): a's shape or the reduced axes' shape; against numpy and JAX,
    eagerly and under jit, for one axis, several axes and all of them."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(3, 6, 4)).astype(np.float32)
    w = rng.uniform(0.1, 2.0, size=x.shape).astype(np.float32)
    q = np.linspace(0.0, 1.0, 7).astype(np.float32) * (100 if "percentile" in name else 1)
    efn, nfn, jfn = getattr(enp, name), getattr(np, name), getattr(jnp, name)
    cases = ((1, w[0, :, 0], np.broadcast_to(w[0, :, 0][:, None], x.shape)),
             ((0, 2), w[:, 0, :], np.broadcast_to(w[:, :1, :], x.shape)), (None, w, w), (-1, w, w))
    eager = efn(x, q, axis=1, weights=w, method="inverted_cdf")             # (eagerly once; the rest in one jit)
    _close(eager, nfn(x, q, axis=1, weights=w, method="inverted_cdf"))
    _close(eager, jax_result(lambda: jfn(x, q, axis=1, weights=w, method="inverted_cdf")))
    jitted = ember.jit(lambda a: [efn(a, q, axis=axis, weights=weights, method="inverted_cdf")
                                  for axis, weights, _ in cases])(x)
    for got, (axis, weights, full) in zip(jitted, cases):
        _close(got, nfn(x, q, axis=axis, weights=full, method="inverted_cdf"))
        _close(got, jax_result(lambda: jfn(x, q, axis=axis, weights=weights, method="inverted_cdf")))
    got = ember.jit(lambda a, v: efn(a, q[3], axis=1, weights=v, method="inverted_cdf", keepdims=True))(x, w)
    assert got.shape == (3, 1, 4)
    _close(got, nfn(x, q[3], axis=1, weights=w, method="inverted_cdf", keepdims=True))


def test_quantile_weights_nans_zeros_grad_and_errors():
    x = np.array([[3.0, 1.0, 2.0, 5.0, 4.0], [np.nan, 1.0, 2.0, 0.5, 4.0]], np.float32)
    w = np.array([0.0, 0.0, 1.0, 2.0, 0.0], np.float32)
    q = np.array([0.0, 0.2, 0.5, 1.0], np.float32)
    kw = dict(axis=1, weights=w, method="inverted_cdf")
    # leading zero weights at q = 0: the first value of positive weight (numpy's; JAX gives the first value)
    _close(enp.quantile(x[:1], q, **kw), np.quantile(x[:1], q, axis=1, weights=w[None], method="inverted_cdf"))
    # a NaN value: NaN for quantile, skipped (weighing nothing) by nanquantile, as JAX (q > 0: above)
    for name in ("quantile", "nanquantile"):
        _close(getattr(enp, name)(x, q[1:], **kw), jax_result(lambda: getattr(jnp, name)(x, q[1:], **kw)))
    # a negative or NaN weight: NaN (numpy raises; an error cannot depend on values under jit)
    bad = np.array([1.0, -1.0, 1.0, 1.0, 1.0], np.float32)
    assert np.isnan(np.asarray(enp.quantile(x[:1], 0.5, axis=1, weights=bad, method="inverted_cdf"))).all()
    # vmap, and grad (to the chosen value only, as JAX)
    ws = np.stack([w + 1.0, w[::-1] + 0.5])
    got = ember.vmap(lambda r, v: enp.quantile(r, q, weights=v, method="inverted_cdf"))(x[::-1], ws)
    _close(got, np.quantile(x[::-1], q, axis=1, weights=ws, method="inverted_cdf").T)
    v = np.array([4.0, 1.0, 3.0, 2.0], np.float32)
    ww = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    got = ember.grad(lambda a: enp.sum(enp.quantile(a, q, weights=ww, method="inverted_cdf") * np.arange(1.0, 5.0)))(v)
    _close(got, jax_result(lambda: jax.grad(lambda a: jnp.sum(jnp.quantile(a, q, weights=ww, method="inverted_cdf")
                                                               * np.arange(1.0, 5.0)))(v)))
    with pytest.raises(NotImplementedError, match="Only method 'inverted_cdf' supports weights"):
        enp.quantile(x, 0.5, axis=1, weights=w)
    with pytest.raises(ValueError, match="axis is None"):
        enp.percentile(x, 50.0, weights=w, method="inverted_cdf")
    with pytest.raises(ValueError, match="must match reduction axes"):
        enp.nanquantile(x, 0.5, axis=0, weights=w, method="inverted_cdf")
    with pytest.raises(ValueError, match="complex"):
        enp.quantile(x, 0.5, axis=1, weights=w.astype(np.complex64), method="inverted_cdf")


def test_full_of_a_python_number_is_weakly_typed_as_jax():
    """jnp.full(shape, a Python number) is weakly typed, as JAX's (so jnp.where(c, jnp.full((), nan), bf16) stays
    bfloat16: optax's schedule_free in low precision); a numpy scalar or a dtype= makes it strong."""
    for value in (np.nan, 1, 2.5, True, 1 + 2j):
        got, want = enp.full((2,), value), jnp.full((2,), value)
        assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type), value
    assert not enp.full((2,), np.float32(1)).weak_type and not enp.full((2,), 1.0, dtype=np.float32).weak_type
    assert enp.where(True, enp.full((), np.nan), enp.ones((), enp.bfloat16)).dtype == enp.bfloat16
