"""ember.numpy's breadth (issue 15) against jax.numpy in ember's mode: every function of the table is compared
with jax.numpy's on the same inputs (values and dtypes), eagerly and under jit; elementwise and per-slice ones
also under vmap (the generic oracle: vmap(f)(stack) == stack(f(each))); differentiable ones' gradients against
jax.grad."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.numpy as enp
from recorded import jax_result

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")

rng = np.random.default_rng(0)
A = rng.normal(size=(3, 4)).astype(np.float32)
B = rng.normal(size=(4,)).astype(np.float32)
C = rng.normal(size=(2, 3, 4)).astype(np.float32)
P = rng.uniform(0.5, 2.0, size=(3, 4)).astype(np.float32)
U = rng.uniform(-0.9, 0.9, size=(3, 4)).astype(np.float32)
I = rng.integers(-20, 21, size=(3, 4)).astype(np.int32)
J = rng.integers(1, 13, size=(4,)).astype(np.int32)
K = rng.integers(0, 6, size=(10,)).astype(np.int32)
NANS = A.copy()
NANS[0, 1] = NANS[2, 3] = np.nan
SPECIAL = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, 1e-40, 3e38, -7.0], np.float32)
V = rng.normal(size=(7,)).astype(np.float32)
W = rng.normal(size=(3,)).astype(np.float32)
S = np.sort(rng.uniform(-2, 2, size=(6,))).astype(np.float32)
U8 = rng.integers(0, 256, size=(3, 5)).astype(np.uint8)
BOOL = rng.normal(size=(3, 4)) > 0

# (name, args, kwargs[, options]) — options: vmap (batch the first argument), rtol, nojit
CASES = [
    # classification and float manipulation
    ("isnan", (SPECIAL,), {}), ("isinf", (SPECIAL,), {}), ("isposinf", (SPECIAL,), {}),
    ("isneginf", (SPECIAL,), {}), ("signbit", (SPECIAL,), {}), ("isnan", (I,), {}), ("signbit", (I,), {}),
    ("copysign", (A, B), {}), ("copysign", (SPECIAL, -1.0), {}), ("hypot", (A, B), {}),
    ("hypot", (SPECIAL, SPECIAL[::-1].copy()), {}), ("logaddexp2", (A, B), {}), ("logaddexp2", (SPECIAL, 1.0), {}),
    ("fmax", (NANS, A.T.copy().reshape(3, 4)), {}), ("fmin", (NANS, 0.5), {}), ("fmax", (I, J), {}),
    ("heaviside", (A, 0.5), {}), ("deg2rad", (A,), {}), ("rad2deg", (I,), {}), ("radians", (A,), {}),
    ("degrees", (A,), {}), ("fabs", (I,), {}), ("sinc", (A,), {}), ("sinc", (SPECIAL[:4].copy(),), {}),
    ("frexp", (np.delete(SPECIAL, 7),), {}), ("frexp", (A * 100,), {}), ("ldexp", (A, I), {}), ("modf", (A * 3,), {}),
    ("spacing", (A,), {}), ("nextafter", (A, B), {}), ("float_power", (P, A), {}),
    ("nan_to_num", (SPECIAL,), {}), ("nan_to_num", (SPECIAL,), {"nan": 1.0, "posinf": 9.0}),
    ("gcd", (I, J), {}), ("lcm", (I, J), {}), ("left_shift", (I, 3), {}), ("right_shift", (I, 2), {}),
    ("bitwise_left_shift", (U8, np.uint8(1)), {}), ("bitwise_right_shift", (U8, np.uint8(3)), {}),
    ("bitwise_count", (I,), {}), ("bitwise_invert", (I,), {}),
    ("arcsin", (U,), {}), ("arccos", (U,), {}), ("arctan", (A,), {}), ("sinh", (A,), {}), ("cosh", (A,), {}),
    ("arcsinh", (A,), {}), ("arccosh", (P + 1,), {}), ("arctanh", (U,), {}), ("cbrt", (A,), {}),
    ("acos", (U,), {}), ("atan2", (A, P), {}), ("pow", (P, A), {}), ("i0", (A,), {}),
    ("real", (A,), {}), ("imag", (A,), {}), ("conj", (I,), {}), ("angle", (A,), {}), ("angle", (A,), {"deg": True}),
    ("iscomplex", (A,), {}), ("isreal", (A,), {}),
    # reductions
    ("prod", (P,), {}), ("prod", (I,), {"axis": 1}), ("prod", (P,), {"axis": 0, "keepdims": True}),
    ("sum", (A,), {"where": BOOL}), ("sum", (I,), {"axis": 1, "initial": 5}), ("prod", (P,), {"where": BOOL}),
    ("max", (A,), {"axis": 1, "where": BOOL, "initial": -10.0}), ("min", (I,), {"where": BOOL, "initial": 100}),
    ("mean", (A,), {"axis": 0, "where": BOOL}), ("var", (A,), {"axis": 1, "where": BOOL}),
    ("std", (A,), {"correction": 1}), ("var", (C,), {"axis": (0, 2), "ddof": 1, "keepdims": True}),
    ("all", (BOOL,), {"axis": 0, "where": BOOL}), ("any", (A,), {"where": BOOL}),
    ("nansum", (NANS,), {"axis": 1}), ("nanprod", (NANS,), {}), ("nanmax", (NANS,), {"axis": 0}),
    ("nanmin", (NANS,), {}), ("nanmean", (NANS,), {"axis": 1}), ("nanvar", (NANS,), {"axis": 0}),
    ("nanstd", (NANS,), {"ddof": 1}), ("nanargmax", (NANS,), {"axis": 1}), ("nanargmin", (NANS,), {}),
    ("count_nonzero", (I,), {"axis": 0}), ("count_nonzero", (BOOL,), {}), ("ptp", (A,), {"axis": 1}),
    ("average", (A,), {"axis": 1, "weights": B}), ("average", (A,), {"weights": P, "returned": True}),
    ("average", (C,), {"axis": (0, 2)}),
    ("median", (A,), {"axis": 1}), ("median", (C,), {}), ("median", (NANS,), {"axis": 0}),
    ("nanmedian", (NANS,), {"axis": 1}), ("quantile", (A, 0.3), {"axis": 1}),
    ("quantile", (C, np.array([0.1, 0.5, 0.9], np.float32)), {"axis": (0, 2), "keepdims": True}),
    ("percentile", (A, 75.0), {}), ("nanpercentile", (NANS, 40.0), {"axis": 1}),
    ("nanquantile", (NANS, np.array([0.2, 0.8], np.float32)), {"axis": 0}),
    *[("quantile", (V, 0.37), {"method": m}) for m in ("linear", "lower", "higher", "midpoint", "nearest")],
    ("cov", (A,), {}), ("cov", (A, P), {"rowvar": False}), ("cov", (A,), {"ddof": 0, "fweights": J[:4]}),
    ("cov", (A,), {"aweights": np.abs(B)}), ("corrcoef", (A,), {}), ("corrcoef", (V, V[::-1].copy()), {}),
    ("bincount", (K,), {"length": 8, "nojit": False}), ("bincount", (K,), {"weights": V[:1].repeat(10),
                                                                            "length": 6}),
    ("digitize", (A, S), {}), ("digitize", (A, S[::-1].copy()), {"right": True}),
    ("histogram", (V,), {"bins": 4, "range": (-2.0, 2.0)}), ("histogram", (V, S), {}),
    ("histogram", (V,), {"bins": 3, "range": (-1.0, 1.0), "density": True}),
    ("histogram_bin_edges", (V,), {"bins": 5, "range": (0.0, 1.0)}),
    ("histogram2d", (V, V[::-1].copy()), {"bins": 3, "range": [(-2, 2), (-2, 2)]}),
    # creation and grids
    ("logspace", (0.0, 2.0, 5), {}), ("logspace", (0.0, 3.0, 4), {"base": 2.0, "endpoint": False}),
    ("geomspace", (1.0, 1000.0, 4), {}), ("geomspace", (-1.0, -16.0, 5), {}),
    ("linspace", (0.0, 1.0, 5), {"retstep": True}), ("linspace", (B, B * 2, 3), {"axis": 1}),
    ("linspace", (2, 10, 5), {"dtype": np.int32}),
    ("empty", ((2, 3),), {}), ("empty_like", (I,), {}), ("copy", (A,), {}), ("zeros_like", (A,), {"shape": (2,)}),
    ("indices", ((2, 3),), {}), ("indices", ((2, 3),), {"sparse": True}),
    ("meshgrid", (B, W), {}), ("meshgrid", (B, W, V), {"indexing": "ij"}), ("meshgrid", (B, W), {"sparse": True}),
    ("tril_indices", (4,), {"k": 1}), ("triu_indices", (3, 0, 5), {}), ("tril_indices_from", (A,), {}),
    ("triu_indices_from", (A, 1), {}), ("diag_indices", (3,), {}), ("diag_indices_from", (np.eye(3),), {}),
    ("ravel_multi_index", ((np.array([1, 2, 0], np.int32), np.array([3, 0, 1], np.int32)), (3, 4)), {}),
    ("ravel_multi_index", ((np.array([1, 5], np.int32), np.array([3, -1], np.int32)), (3, 4)), {"mode": "wrap"}),
    ("unravel_index", (np.array([0, 5, 11, -1], np.int32), (3, 4)), {}),
    # manipulation
    ("atleast_3d", (B,), {}), ("atleast_3d", (A,), {}), ("column_stack", ((B, B * 2),), {}),
    ("dstack", ((A, P),), {}), ("concat", ((A, P),), {"axis": 1}), ("concat", ((A, B),), {"axis": None}),
    ("permute_dims", (C, (2, 0, 1)), {}), ("matrix_transpose", (C,), {}), ("rollaxis", (C, 2), {}),
    ("rollaxis", (C, 0, 3), {}), ("unstack", (A,), {"axis": 1}), ("broadcast_arrays", (A, B), {}),
    ("tile", (A, (2, 1)), {}), ("tile", (B, 3), {}), ("tile", (A, (2, 1, 2)), {}),
    ("repeat", (A, 2), {"axis": 1}), ("repeat", (B, np.array([1, 0, 2, 3])), {"total_repeat_length": 6}),
    ("repeat", (A, 3), {}), ("resize", (B, (3, 3)), {}),
    ("append", (A, P), {"axis": 0}), ("append", (A, B), {}), ("delete", (A, 1), {"axis": 1}),
    ("delete", (V, np.array([0, 3, -1])), {"nojit": True}), ("delete", (A, slice(0, 2)), {"axis": 0}),
    ("insert", (V, 2, 9.0), {}), ("insert", (A, 1, B), {"axis": 0}),
    ("insert", (V, np.array([1, 3, 3]), W), {"nojit": True}),
    ("insert", (A, np.array([0, 4]), 5.0), {"axis": 1, "nojit": True}),
    *[("pad", (A, ((1, 2), (2, 1))), {"mode": m}) for m in
      ("constant", "edge", "reflect", "symmetric", "wrap", "maximum", "minimum", "mean", "median")],
    ("pad", (A, 2), {"mode": "linear_ramp", "end_values": 1.0}),
    ("pad", (I, 1), {"mode": "constant", "constant_values": ((7, 8), (9, 10))}),
    ("pad", (A, ((1, 1), (2, 2))), {"mode": "reflect", "reflect_type": "odd"}),
    ("pad", (V, 3), {"mode": "mean", "stat_length": 2}),
    ("choose", (np.array([[0, 1, 2, 1]]), (A, P, A * 2)), {}),
    ("choose", (np.array([0, 3, 5, -1]), (B, B + 1)), {"mode": "clip"}),
    ("place", (V, V > 0, W), {"inplace": False}), ("put", (A, np.array([0, 5, 11]), W), {"inplace": False}),
    ("fill_diagonal", (np.zeros((4, 3), np.float32), 5.0), {"inplace": False}),
    ("diagonal", (A,), {}), ("diagonal", (A,), {"offset": 1}), ("diagonal", (C, -1, 2, 1), {}),
    ("diag", (A,), {"k": -1}), ("diag", (W,), {}), ("diag", (W,), {"k": 2}), ("diagflat", (A[:2, :2].copy(),), {}),
    ("trace", (A,), {}), ("trace", (C,), {"offset": 1, "axis1": 1, "axis2": 2}),
    ("trim_zeros", (np.array([0, 0, 1, 2, 0, 3, 0, 0], np.float32),), {"nojit": True}),
    ("trim_zeros", (np.array([0, 1, 2, 0], np.int32),), {"trim": "f", "nojit": True}),
    # sets and comparisons
    ("isin", (I, J), {}), ("isin", (I, J), {"invert": True}), ("isin", (I, J), {"method": "sort"}),
    ("union1d", (K, J), {"nojit": True}), ("intersect1d", (K, J), {"nojit": True}),
    ("intersect1d", (K, J), {"size": 5}), ("setdiff1d", (K, J), {"size": 4, "fill_value": -1}),
    ("setdiff1d", (K, J), {"nojit": True}), ("setxor1d", (K, J), {"nojit": True}),
    ("setxor1d", (K, J), {"size": 9}), ("intersect1d", (K, J), {"return_indices": True, "nojit": True}),
    ("ediff1d", (A,), {}), ("ediff1d", (V,), {"to_begin": -1.0, "to_end": np.array([7.0, 8.0], np.float32)}),
    ("isclose", (A, A + 1e-6), {}), ("isclose", (SPECIAL, SPECIAL), {"equal_nan": True}),
    ("isclose", (I, J), {"atol": 3}), ("allclose", (A, A * (1 + 1e-7)), {}), ("allclose", (NANS, NANS), {}),
    ("array_equal", (A, A), {}), ("array_equal", (A, B), {}), ("array_equal", (NANS, NANS), {"equal_nan": True}),
    ("array_equiv", (A[:1].copy(), np.tile(A[:1], (3, 1))), {}), ("array_equiv", (A, B[:3].copy()), {}),
    # signal and polynomials
    *[("convolve", (V, W), {"mode": m}) for m in ("full", "same", "valid")],
    *[("correlate", (V, W), {"mode": m}) for m in ("full", "same", "valid")],
    ("correlate", (W, V), {"mode": "full"}), ("convolve", (W, V), {"mode": "same"}),
    ("convolve", (J, K), {}),
    ("polyval", (W, A), {}), ("polyval", (J, I), {}), ("polyadd", (W, V), {}), ("polysub", (V, W), {}),
    ("polymul", (W, V), {}), ("polydiv", (V, W), {}), ("polyder", (V,), {}), ("polyder", (V, 3), {}),
    ("polydiv", (V, W), {"trim_leading_zeros": True, "nojit": True}),
    ("polyint", (W,), {}), ("polyint", (W, 2, 3.0), {}), ("poly", (W,), {}),
    ("interp", (A, S, np.cos(S)), {}), ("interp", (A, S, np.cos(S)), {"left": -5.0, "right": 5.0}),
    ("interp", (A, S, np.cos(S)), {"period": 2.5}),
    ("trapezoid", (A,), {}), ("trapezoid", (A, B), {"axis": 1}), ("trapezoid", (A,), {"dx": 0.5, "axis": 0}),
    ("gradient", (V,), {}), ("gradient", (A,), {}), ("gradient", (A, 2.0), {"axis": 1}),
    ("gradient", (V, np.cumsum(np.abs(V) + 0.1).astype(np.float32)), {}),
    ("unwrap", (np.cumsum(np.abs(V) * 2).astype(np.float32),), {}),
    ("unwrap", (np.cumsum(np.abs(A) * 3, axis=0).astype(np.float32),), {"axis": 0, "period": 4.0}),
    ("bartlett", (7,), {}), ("blackman", (6,), {}), ("hamming", (5,), {}), ("hanning", (8,), {}),
    ("kaiser", (9, 4.0), {}), ("hanning", (1,), {}),
    # linear algebra helpers and einsum
    ("kron", (A[:2, :2].copy(), P), {}), ("kron", (B, W), {}), ("cross", (C[..., :3].copy(), A[:, :3].copy()), {}),
    ("cross", (A[:, :2].copy(), P[:, :2].copy()), {}), ("cross", (C[0, :, :3].copy(), W), {}),
    ("vecdot", (A, P), {}), ("vecdot", (C, A), {"axis": -1}), ("matvec", (C, B), {}), ("vecmat", (W, A), {}),
    ("vander", (W,), {}), ("vander", (J,), {"N": 3, "increasing": True}),
    ("einsum", ("ij,jk->ik", A, P.T.copy()), {}), ("einsum", ("ii->i", A[:3, :3].copy()), {}),
    ("einsum", ("ii", A[:3, :3].copy()), {}), ("einsum", ("...ij,...jk", C, P.T.copy()), {}),
    ("einsum", ("bij,bjk,kl->bil", C, C.transpose(0, 2, 1).copy(), A), {}),
    ("einsum", ("ij,ij->", A, P), {}), ("einsum", ("i,j->ij", B, W), {}), ("einsum", ("ijk->kji", C), {}),
    ("einsum", ("ij,kj->ikj", A, P), {"optimize": False}), ("einsum", ("iij->j", np.ones((2, 2, 3), np.float32)), {}),
    ("einsum", ("bhqd,bhkd->bhqk", rng.normal(size=(2, 2, 3, 4)).astype(np.float32),
                rng.normal(size=(2, 2, 5, 4)).astype(np.float32)), {}),
    ("einsum", ("ij,j", A, B), {"optimize": "greedy"}), ("einsum", ("i,i,i->", B, B, B), {}),
    ("einsum", ("a...,...->a...", A, B), {}),
    # bits and dtypes
    ("packbits", (BOOL,), {}), ("packbits", (I > 0,), {"axis": 1, "bitorder": "little"}),
    ("unpackbits", (U8,), {}), ("unpackbits", (U8,), {"axis": 0, "count": 5}),
    ("unpackbits", (U8,), {"axis": 1, "bitorder": "little", "count": -3}),
]


def _to_np(x):
    if isinstance(x, (list, tuple)):
        return type(x)(_to_np(e) for e in x)
    if isinstance(x, dict):
        return {k: _to_np(v) for k, v in x.items()}
    if hasattr(x, "dtype") and hasattr(x, "shape"):
        return np.asarray(x)
    return x


def _compare(ours, ref, rtol, where):
    ours, ref = _to_np(ours), _to_np(ref)
    if isinstance(ref, (list, tuple)):
        assert isinstance(ours, (list, tuple)) and len(ours) == len(ref), f"{where}: {ours!r} vs {ref!r}"
        for o, r in zip(ours, ref):
            _compare(o, r, rtol, where)
        return
    ref = np.asarray(ref)
    ours = np.asarray(ours)
    assert ours.shape == ref.shape, f"{where}: shape {ours.shape} != {ref.shape}"
    assert ours.dtype == ref.dtype, f"{where}: dtype {ours.dtype} != {ref.dtype}"
    if ref.dtype.kind == "f":
        np.testing.assert_allclose(ours, ref, rtol=rtol, atol=rtol, equal_nan=True, err_msg=where)
    else:
        np.testing.assert_array_equal(ours, ref, err_msg=where)


def _ids(cases):
    seen = {}
    out = []
    for c in cases:
        n = c[0]
        seen[n] = seen.get(n, 0) + 1
        out.append(f"{n}-{seen[n]}")
    return out


def _split(kwargs):
    kwargs = dict(kwargs)
    opts = {k: kwargs.pop(k) for k in ("nojit", "rtol") if k in kwargs}
    return kwargs, opts


def _jax_args(args):
    return [jnp.asarray(a) if isinstance(a, np.ndarray) else a for a in args]


def _first_of_each_name(cases):
    """The index of each function's first case: those run by default, the others with -m slow."""
    seen = {}
    for i, c in enumerate(cases):
        seen.setdefault(c[0], i)
    return set(seen.values())


_FIRST = _first_of_each_name(CASES)
# Under jit: every case in the slow sweep; by default, the first case of every third function (each is a compile)
_JIT_FIRST = {i for k, i in enumerate(sorted(_FIRST)) if k % 3 == 0 and not CASES[i][2].get("nojit")}
# Eagerly: the first case of every function that has none under jit by default (the others in the slow sweep)
EAGER_CASES = [pytest.param(c, id=i_d, marks=() if i in _FIRST and i not in _JIT_FIRST else pytest.mark.slow)
               for i, (c, i_d) in enumerate(zip(CASES, _ids(CASES)))]


@pytest.mark.parametrize("case", EAGER_CASES)
def test_matches_jax_numpy(case):
    name, args, kwargs = case
    kwargs, opts = _split(kwargs)
    ref = jax_result(lambda: getattr(jnp, name)(*args, **kwargs))
    _compare(getattr(enp, name)(*args, **kwargs), ref, opts.get("rtol", 2e-5), f"{name} eager")


JIT_CASES = [pytest.param(c, marks=() if i in _JIT_FIRST else pytest.mark.slow, id=i_d)
             for i, (c, i_d) in enumerate(zip(CASES, _ids(CASES))) if not c[2].get("nojit")]


@pytest.mark.parametrize("case", JIT_CASES)
def test_matches_jax_numpy_under_jit(case):
    name, args, kwargs = case
    kwargs, opts = _split(kwargs)
    ref = jax_result(lambda: getattr(jnp, name)(*args, **kwargs))
    arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]

    def fn(*xs):
        full = list(args)
        for i, x in zip(arrays, xs):
            full[i] = x
        return getattr(enp, name)(*full, **kwargs)
    _compare(ember.jit(fn)(*[args[i] for i in arrays]), ref, opts.get("rtol", 2e-5), f"{name} under jit")


VMAP_CASES = [
    ("hypot", (A, P)), ("copysign", (A, P)), ("logaddexp2", (A, P)), ("fmax", (NANS, A)), ("sinc", (A,)),
    ("gcd", (I, I[::-1].copy())), ("lcm", (I, I[::-1].copy())), ("arcsinh", (A,)), ("cbrt", (A,)), ("i0", (A,)),
    ("isclose", (A, P)),
    ("ldexp", (A, I)), ("spacing", (A,)), ("signbit", (A,)), ("heaviside", (A, P)),
    ("nanmean", (NANS,)), ("median", (A,)), ("ptp", (A,)), ("trace", (C,)), ("diagonal", (C,)),
    ("kron", (A, P)), ("interp", (A, np.tile(S, (3, 1)), np.tile(np.cos(S), (3, 1)))),
    ("convolve", (A, P)), ("polyval", (A, P)), ("cross", (C[..., :3].copy(), C[..., 1:].copy())),
    ("unwrap", (A,)), ("trapezoid", (C,)), ("isin", (I, np.tile(J, (3, 1)))), ("tile", (A,)),
    ("cov", (C,)), ("vander", (A,)), ("gradient", (A,)),
]


@pytest.mark.parametrize("name,args", [pytest.param(*c, id=c[0], marks=() if i % 2 == 0 else pytest.mark.slow)
                                       for i, c in enumerate(VMAP_CASES)])
def test_vmap_matches_a_loop(name, args):
    """The generic batching oracle: vmap over the leading axis equals the function applied slice by slice."""
    fn = getattr(enp, name)
    if name == "tile":
        fn = lambda x: enp.tile(x, 2)  # noqa: E731
    batched = ember.vmap(fn)(*args)
    each = [fn(*(a[i] for a in args)) for i in range(args[0].shape[0])]
    np.testing.assert_allclose(np.asarray(batched), np.stack([np.asarray(e) for e in each]), rtol=2e-5,
                               atol=2e-5, equal_nan=True)


GRAD_CASES = [
    ("hypot", (A, B)), ("logaddexp2", (A, B)), ("copysign", (A, B)), ("fmax", (A, P)), ("sinc", (A,)),
    ("arcsin", (U,)), ("arccos", (U,)), ("arctan", (A,)), ("sinh", (A,)), ("cosh", (A,)), ("arcsinh", (A,)),
    ("arccosh", (P + 1,)), ("arctanh", (U,)), ("cbrt", (P,)), ("i0", (A,)), ("float_power", (P, A)),
    ("ldexp", (A, I)), ("deg2rad", (A,)), ("prod", (P,)), ("nansum", (NANS,)), ("nanmean", (NANS,)),
    ("nanvar", (NANS,)), ("nanmax", (NANS,)), ("median", (A,)), ("quantile", (A, 0.3)), ("average_weighted", (A, P)),
    ("cov", (A,)), ("corrcoef", (A,)), ("ptp", (A,)), ("trace", (A,)), ("diagonal", (C,)), ("kron", (A, P)),
    ("cross", (C[..., :3].copy(), C[..., 1:].copy())), ("interp", (A, S, np.cos(S))), ("convolve", (V, W)),
    ("correlate", (V, W)), ("polyval", (W, A)), ("trapezoid", (A,)), ("gradient", (A,)), ("tile", (A, 2)),
    ("repeat", (A, 2)), ("pad", (A, 2)), ("vander", (W,)), ("einsum", ("ij,jk", A, P.T.copy())),
    ("einsum", ("ii->i", A[:3, :3].copy())), ("hanning", (8,)),
]


# every second gradient in the default run, all with -m slow
GRAD_PARAMS = [pytest.param(*c, id=c[0], marks=() if i % 2 == 0 else pytest.mark.slow)
               for i, c in enumerate(GRAD_CASES)]


@pytest.mark.parametrize("name,args", GRAD_PARAMS)
def test_grad_matches_jax(name, args):
    """The gradient of sum(f(x) * weights) with respect to every float array argument, against jax.grad."""
    argnums = tuple(i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f")
    if not argnums:
        pytest.skip("no float array arguments")

    def loss(lib):
        def f(*xs):
            out = (lib.average(xs[0], axis=1, weights=xs[1][0]) if name == "average_weighted" else
                   getattr(lib, name)(*xs))
            out = out[0] if isinstance(out, (list, tuple)) else out
            w = lib.cos(lib.arange(out.size, dtype=out.dtype).reshape(out.shape))
            return lib.sum(out * w)
        return f
    ours = ember.grad(loss(enp), argnums=argnums)(*args)
    ref = jax_result(lambda: jax.grad(loss(jnp), argnums=argnums)(*_jax_args(args)))
    for o, r in zip(ours, ref):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=2e-4, atol=2e-4)


def test_functions_jax_numpy_lacks_or_differs_match_numpy():
    """Where jax.numpy differs (modf of infinities) or lacks an option (fill_diagonal's wrap), numpy is the
    oracle."""
    frac, whole = enp.modf(SPECIAL)
    ref_frac, ref_whole = np.modf(SPECIAL)
    np.testing.assert_array_equal(np.asarray(frac), ref_frac)
    np.testing.assert_array_equal(np.asarray(whole), ref_whole)
    np.testing.assert_array_equal(np.signbit(np.asarray(frac)), np.signbit(ref_frac))
    ref = np.zeros((6, 2), np.float32)
    np.fill_diagonal(ref, W, wrap=True)
    np.testing.assert_array_equal(np.asarray(enp.fill_diagonal(np.zeros((6, 2), np.float32), W, wrap=True,
                                                               inplace=False)), ref)
    m, e = enp.frexp(np.array([1e-45, 2e-39, -3e-42], np.float32))
    rm, re = np.frexp(np.array([1e-45, 2e-39, -3e-42], np.float32))
    np.testing.assert_array_equal(np.asarray(m), rm)
    np.testing.assert_array_equal(np.asarray(e), re)


X3 = rng.uniform(size=(3, 4, 4)).astype(np.float32)
LINALG_CASES = [
    ("vector_norm", (C,), {}), ("vector_norm", (A,), {"ord": 1, "axis": 1}), ("vector_norm", (A,), {"ord": np.inf}),
    ("vector_norm", (A,), {"ord": -np.inf, "axis": 0}), ("vector_norm", (A * (A > 0),), {"ord": 0}),
    ("vector_norm", (P,), {"ord": 3.5, "keepdims": True, "axis": (0, 1)}), ("matrix_norm", (X3,), {}),
    ("matrix_norm", (X3,), {"ord": 1}), ("matrix_norm", (X3,), {"ord": -np.inf, "keepdims": True}),
    ("matrix_power", (X3, 5), {}), ("matrix_power", (X3, 0), {}), ("trace", (X3,), {"offset": 1}),
    ("diagonal", (X3,), {"offset": -1}), ("cross", (C[..., :3].copy(), A[:, 1:]), {}), ("outer", (B, W), {}),
    ("tensordot", (X3, A.T.copy()), {"axes": 1}), ("vecdot", (A, P), {}), ("matrix_transpose", (C,), {}),
    ("matmul", (X3, X3), {}),
]


# (each function's first case and every other further one by default; all with -m slow)
@pytest.mark.parametrize("name,args,kwargs", [
    pytest.param(*c, id=i_d, marks=pytest.mark.slow if int(i_d.rsplit("-", 1)[1]) % 2 == 0 else ())
    for c, i_d in zip(LINALG_CASES, _ids(LINALG_CASES))])
def test_linalg_namespace_matches_jax(name, args, kwargs):
    """ember.numpy.linalg (the functions without factorisations) against jax.numpy.linalg, eagerly and, for the
    first array argument traced, under jit."""
    ref = getattr(jnp.linalg, name)(*args, **kwargs)
    _compare(getattr(enp.linalg, name)(*args, **kwargs), ref, 2e-5, f"linalg.{name}")
    jitted = ember.jit(lambda x: getattr(enp.linalg, name)(x, *args[1:], **kwargs))(args[0])
    _compare(jitted, ref, 2e-5, f"linalg.{name} under jit")


def test_linalg_functions_built_on_factorisations():
    """Negative matrix powers and the singular-value norms (tests/test_linalg.py has the rest)."""
    well = X3 + 4 * np.eye(4, dtype=np.float32)
    _compare(enp.linalg.matrix_power(well, -3), jnp.linalg.matrix_power(well, -3), 2e-5, "matrix_power(-3)")
    for order in ("nuc", 2, -2):
        _compare(enp.linalg.matrix_norm(X3, ord=order), jnp.linalg.matrix_norm(X3, ord=order), 2e-5,
                 f"matrix_norm(ord={order!r})")


# ---------------------------------------------------------------------------------------------------------------
# polynomials on linear algebra: polyfit (lstsq), roots (the companion matrix's eigenvalues), poly of a matrix
POLY_X = np.linspace(-1.0, 2.0, 9).astype(np.float32)
POLY_Y = np.stack([POLY_X ** 3 - 2 * POLY_X + 0.5 + 0.01 * np.sin(7 * POLY_X), np.cos(POLY_X)], 1).astype(np.float32)
POLY_W = np.linspace(0.5, 1.5, 9).astype(np.float32)
ROOTS_P = np.array([0.0, 0.0, 1.0, -6.0, 11.0, -6.0], np.float32)  # (x - 1)(x - 2)(x - 3), two leading zeros


def _same_roots(ours, ref, where):
    ours, ref = np.asarray(ours), np.asarray(ref)
    assert ours.dtype == ref.dtype and ours.shape == ref.shape, (where, ours.dtype, ref.dtype, ours.shape, ref.shape)
    np.testing.assert_allclose(np.sort_complex(ours), np.sort_complex(ref), rtol=1e-4, atol=1e-4, err_msg=where)


def test_polyfit_roots_and_poly_of_a_matrix():
    x, y = POLY_X, POLY_Y[:, 0]
    np.testing.assert_allclose(np.asarray(enp.polyfit(x, y, 3)), np.polyfit(x.astype(np.float64), y, 3), rtol=1e-4,
                               atol=1e-4)
    _compare(enp.polyfit(x, y, 3, w=POLY_W, cov=True), jnp.polyfit(x, y, 3, w=POLY_W, cov=True), 1e-4, "polyfit")
    fitted = ember.jit(lambda x, y: enp.polyfit(x, y, 2, full=True))(x, POLY_Y)
    expected = np.polyfit(x.astype(np.float64), POLY_Y.astype(np.float64), 2, full=True)
    for o, e, what in zip(fitted, expected, ["coefficients", "residuals", "rank", "singular values", "rcond"]):
        np.testing.assert_allclose(np.asarray(o, np.float64), e, rtol=1e-3, atol=1e-4, err_msg=what)
    _same_roots(enp.roots(ROOTS_P), jnp.roots(ROOTS_P), "roots")
    _same_roots(enp.roots(np.array([1.0, 0.0, 4.0], np.float32)), np.roots([1.0, 0.0, 4.0]).astype(np.complex64),
                "complex roots")
    no_strip = np.asarray(ember.jit(lambda p: enp.roots(p, strip_zeros=False))(ROOTS_P))
    assert no_strip.shape == (5,) and np.isnan(no_strip[3:]).all()
    _same_roots(no_strip[:3], np.array([1, 2, 3], np.complex64), "roots(strip_zeros=False) under jit")
    with pytest.raises(ValueError, match="roots: strip_zeros=True needs concrete coefficients"):
        ember.jit(enp.roots)(ROOTS_P)
    m = np.array([[2.0, 1.0, 5.0], [3.0, 4.0, 7.0], [1.0, 3.0, 5.0]], np.float32)
    ours = np.asarray(enp.poly(m))
    assert ours.dtype == np.complex64  # (as jax.numpy: complex, where numpy gives real for conjugate pairs)
    np.testing.assert_allclose(ours, np.poly(m.astype(np.float64)), rtol=1e-4, atol=1e-4)
    # gradients: polyfit is linear in y, c = pinv(V) y, so d/dy sum(c**2) = 2 pinv(V).T c; a simple root r of p
    # moves with p's coefficient of z**k by -r**k / p'(r)
    pinv = np.linalg.pinv(np.vander(x.astype(np.float64), 3))
    np.testing.assert_allclose(np.asarray(ember.grad(lambda y: (enp.polyfit(x, y, 2) ** 2).sum())(y)),
                               2 * pinv.T @ (pinv @ y), rtol=1e-3, atol=1e-4)
    p = np.array([1.0, -6.0, 11.0, -6.0], np.float32)
    r = np.array([1.0, 2.0, 3.0])
    expected = (-r[:, None] ** np.arange(3, -1, -1)[None, :] / np.polyval(np.polyder(p), r)[:, None]).sum(0)
    np.testing.assert_allclose(np.asarray(ember.grad(lambda q: enp.roots(q, strip_zeros=False).real.sum())(p)),
                               expected, rtol=1e-3, atol=1e-3)
    # vmap: a batch of data sets, each fitted on its own
    ys = POLY_Y.T.copy()
    batched = ember.vmap(lambda y: enp.polyfit(x, y, 3))(ys)
    np.testing.assert_allclose(np.asarray(batched), np.stack([np.asarray(enp.polyfit(x, y, 3)) for y in ys]),
                               rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError, match=r"polyfit: y must be 1-D or 2-D with x's length 9, got shape \(8,\)"):
        enp.polyfit(x, POLY_Y[:8, 0], 2)


@pytest.mark.slow
def test_polyfit_roots_and_poly_match_jax():
    for kwargs in [{}, {"w": POLY_W}, {"full": True}, {"cov": True}, {"cov": "unscaled"}, {"rcond": 1e-3}]:
        for y in (POLY_Y[:, 0], POLY_Y):
            _compare(enp.polyfit(POLY_X, y, 3, **kwargs), jnp.polyfit(POLY_X, y, 3, **kwargs), 1e-4,
                     f"polyfit {kwargs} {y.shape}")
    for p in (ROOTS_P, np.zeros(3, np.float32), np.array([1.0, 0.0, 4.0], np.float32), np.array([2.0], np.float32)):
        _same_roots(enp.roots(p), jnp.roots(p), f"roots({p})")
        ours, ref = np.asarray(enp.roots(p, strip_zeros=False)), np.asarray(jnp.roots(p, strip_zeros=False))
        assert ours.shape == ref.shape and (np.isnan(ours) == np.isnan(ref)).all()
    m = np.array([[2.0, 1.0, 5.0], [3.0, 4.0, 7.0], [1.0, 3.0, 5.0]], np.float32)
    np.testing.assert_allclose(np.asarray(enp.poly(m)), np.asarray(jnp.poly(m)), rtol=1e-4, atol=1e-4)
    ours = ember.grad(lambda x, y: (enp.polyfit(x, y, 2) ** 2).sum(), argnums=(0, 1))(POLY_X, POLY_Y[:, 1])
    ref = jax.grad(lambda x, y: (jnp.polyfit(x, y, 2) ** 2).sum(), argnums=(0, 1))(POLY_X, POLY_Y[:, 1])
    for o, r in zip(ours, ref):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=2e-3, atol=2e-3)


_PRODUCT_CASES = [
    ("dot", ((3, 4), (4, 2)), "int8", dict(preferred_element_type="int32")),
    ("matmul", ((2, 3, 4), (4, 5)), "int8", dict(preferred_element_type="int32")),
    ("dot", ((2, 3, 4), (4, 5)), "float32", dict(precision="highest")),
    ("matmul", ((2, 3, 4), (4, 5)), "float32", dict(precision=("highest", "default"))),
    ("tensordot", ((2, 3, 4), (4, 5)), "float32", dict(axes=1, precision="high", preferred_element_type="float32")),
    ("inner", ((2, 3, 4), (5, 4)), "float32", dict(precision="highest")),
    ("vdot", ((5,), (5,)), "complex64", dict(precision="highest")),
    ("dot", ((), (4, 5)), "int8", dict(preferred_element_type="int32")),    # a scalar operand
    ("inner", ((4,), (4,)), "float16", dict(preferred_element_type="float32")),
]


@pytest.mark.parametrize("name, shapes, dtype, kwargs", _PRODUCT_CASES, ids=lambda v: str(v))
def test_products_take_precision_and_preferred_element_type(name, shapes, dtype, kwargs):
    # jax.numpy's dot, matmul, tensordot, inner and vdot take them as keyword arguments (JAX programs pass them)
    rng = np.random.default_rng(0)

    def make(shape):
        if dtype == "int8":
            return rng.integers(-5, 5, shape).astype(np.int8)
        x = rng.normal(size=shape)
        return (x + 1j * rng.normal(size=shape) if dtype == "complex64" else x).astype(dtype)
    a, b = (make(s) for s in shapes)
    got = getattr(enp, name)(a, b, **kwargs)
    jitted = ember.jit(lambda x, y: getattr(enp, name)(x, y, **kwargs))(a, b)
    want = jax_result(lambda: np.asarray(getattr(jnp, name)(a, b, **kwargs)))
    for value in (got, jitted):
        assert np.asarray(value).dtype == want.dtype and np.asarray(value).shape == want.shape
        np.testing.assert_allclose(np.asarray(value), want, rtol=2e-3 if dtype == "float16" else 1e-5, atol=1e-5)
