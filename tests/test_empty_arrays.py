"""Empty arrays and edge shapes (issue 24): every public function of ember.numpy, ember.numpy.linalg and ember.nn
called with 0-size arrays of shapes (0,), (3, 0) and (0, 4), along each relevant axis, against jax.numpy /
jax.nn in ember's dtype mode. Each call gives JAX's result (shape, dtype and values), or both raise: ember with
a Python exception naming the function, never a primitive's internal error. numpy is the second oracle where JAX
and ember disagree on raising: ember may give numpy's answer where JAX raises, and raise where JAX answers only if
numpy raises too.

The whole sweep (eagerly and under jit) is `-m slow`; the default run keeps the issue's named cases and the first
case of each family (the module defining the function)."""
from __future__ import annotations

import io
import warnings
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.nn as enn
import ember.numpy as enp
from test_numpy_breadth import _compare

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")

SHAPES = ((0,), (3, 0), (0, 4))


class Call(NamedTuple):
    """How to call a function with an empty array x: build(f, x), or build(f, x, axis) for each axis of x (None
    first when with_none) when along is set."""
    build: Callable[..., Any]
    dtype: Any = np.float32
    along: bool = False
    with_none: bool = True
    jit: bool = True  # False: a result whose shape depends on values, or not an array


def _calls(names: str, call: Call) -> dict[str, Call]:
    return {n: call for n in names.split()}


def _axis(f: Callable[..., Any], x: Any, a: Any) -> Any:
    return f(x, axis=a)


def _saved(save: Callable[..., Any], x: Any) -> io.BytesIO:
    """An in-memory file holding x written by save (numpy's or ember's save or savez), ready to read."""
    buffer = io.BytesIO()
    save(buffer, x)
    buffer.seek(0)
    return buffer


def _samples(x: np.ndarray) -> np.ndarray:
    """x as (samples, dimensions) for histogramdd."""
    return x if x.ndim == 2 else x[:, None]


ONE = Call(lambda f, x: f(x))
TWO = Call(lambda f, x: f(x, x))
INT_ONE = Call(lambda f, x: f(x), np.int32)
INT_TWO = Call(lambda f, x: f(x, x), np.int32)
REDUCE = Call(_axis, along=True)
ALONG = Call(_axis, along=True, with_none=False)
LIKE_SHAPE = Call(lambda f, x: f(x.shape))
NUMBER = Call(lambda f, x: f(x.shape[-1]))
HOST = Call(lambda f, x: f(x), jit=False)

NUMPY_CALLS: dict[str, Call] = {
    **_calls("abs absolute around ceil cos exp exp2 expm1 fix floor isfinite log log10 log1p log2 logical_not "
             "negative positive reciprocal rint round sign sin sqrt square tan tanh trunc isnan isinf isposinf "
             "isneginf signbit deg2rad rad2deg radians degrees fabs sinc frexp modf spacing nan_to_num arcsin asin "
             "arccos acos arctan atan sinh cosh arcsinh asinh arccosh acosh arctanh atanh cbrt i0 real imag conj "
             "conjugate angle iscomplex isreal atleast_1d atleast_2d atleast_3d ravel squeeze transpose copy "
             "ones_like zeros_like empty_like asarray array ediff1d "
             "permute_dims fliplr flipud rot90 tril triu diag diagflat trace matrix_transpose vander poly "
             "polyder polyint unwrap tril_indices_from triu_indices_from diag_indices_from sort_complex", ONE),
    **_calls("bitwise_not invert bitwise_count bitwise_invert", INT_ONE),
    **_calls("add arctan2 divide divmod equal floor_divide fmod greater greater_equal less less_equal logical_and "
             "logical_or logical_xor maximum minimum mod multiply not_equal power remainder subtract true_divide "
             "copysign hypot logaddexp2 fmax fmin heaviside nextafter float_power pow atan2 logaddexp isclose "
             "allclose array_equal array_equiv broadcast_arrays isin "
             "kron outer inner vdot", TWO),
    **_calls("bitwise_and bitwise_or bitwise_xor gcd lcm left_shift right_shift bitwise_left_shift "
             "bitwise_right_shift", INT_TWO),
    **_calls("all any amax amin argmax argmin max min mean std sum var prod nansum nanprod nanmax nanmin nanmean "
             "nanvar nanstd nanargmax nanargmin count_nonzero ptp average median nanmedian logsumexp cumsum cumprod "
             "nancumsum nancumprod sort argsort flip", REDUCE),
    **_calls("cumulative_sum cumulative_prod expand_dims unstack trapezoid", ALONG),
    **_calls("zeros ones empty indices", LIKE_SHAPE),
    **_calls("arange eye identity tri tril_indices triu_indices diag_indices bartlett blackman hamming hanning",
             NUMBER),
    **_calls("ndim shape size isscalar iterable iscomplexobj isrealobj array_str", HOST),
    "frombuffer": Call(lambda f, x: f(x.tobytes(), np.float32), jit=False),
    "fromiter": Call(lambda f, x: f(iter(x.ravel().tolist()), np.float32), jit=False),
    "fromstring": Call(lambda f, x: f(" ".join(map(str, x.ravel().tolist())), np.float32, sep=" "), jit=False),
    "from_dlpack": Call(lambda f, x: f(x), jit=False),
    "load": Call(lambda f, x: f(_saved(np.save, x)), jit=False),
    "save": Call(lambda f, x: np.load(_saved(f, x)), jit=False),
    "savez": Call(lambda f, x: np.load(_saved(f, x))["arr_0"], jit=False),
    "array_repr": Call(lambda f, x: "shape=(" in f(x) or "[]" in f(x), jit=False),
    "astype": Call(lambda f, x: f(x, np.int32)),
    "broadcast_to": Call(lambda f, x: f(x, (2,) + x.shape)),
    "reshape": Call(lambda f, x: f(x, x.shape[::-1])),
    "moveaxis": Call(lambda f, x: f(x, 0, -1)),
    "swapaxes": Call(lambda f, x: f(x, 0, -1)),
    "rollaxis": Call(lambda f, x: f(x, -1)),
    "diagonal": Call(lambda f, x: f(x)),
    **_calls("concatenate concat stack append", Call(lambda f, x, a: f([x, x], axis=a), along=True)),
    **_calls("hstack vstack dstack column_stack block", Call(lambda f, x: f([x, x]))),
    "split": Call(lambda f, x, a: f(x, 1, axis=a), along=True, with_none=False),
    "array_split": Call(lambda f, x, a: f(x, 2, axis=a), along=True, with_none=False),
    **_calls("hsplit vsplit dsplit", Call(lambda f, x: f(x, 1))),
    "clip": Call(lambda f, x: f(x, 0.0, 1.0)),
    "where": Call(lambda f, x: f(x > 0, x, 1.0)),
    "select": Call(lambda f, x: f([x > 0], [x], 2.0)),
    "choose": Call(lambda f, x: f(x.astype(np.int32), [x, x + 1])),
    "piecewise": Call(lambda f, x: f(x, [x > 0], [1.0, 0.0])),
    "extract": Call(lambda f, x: f(x > 0, x), jit=False),
    "compress": Call(lambda f, x, a: f(np.zeros(x.shape[0 if a is None else a], bool), x, axis=a), along=True,
                     jit=False),
    **_calls("nonzero argwhere flatnonzero", HOST),
    "trim_zeros": Call(lambda f, x: f(x.ravel()), jit=False),
    "roots": Call(lambda f, x: f(x.ravel()), jit=False),  # (strip_zeros: values decide the shape)
    "polyfit": Call(lambda f, x: f(x.ravel(), x.ravel(), 1)),
    "histogram_bin_edges": Call(lambda f, x: f(x.ravel(), bins=3, range=(0.0, 1.0))),
    "diff": Call(lambda f, x, a: f(x, axis=a), along=True, with_none=False),
    "roll": Call(lambda f, x, a: f(x, 1, axis=a), along=True),
    "take": Call(lambda f, x, a: f(x, np.zeros(0, np.int32), axis=a), along=True),
    "take_along_axis": Call(lambda f, x, a: f(x, np.zeros(x.shape, np.int32), axis=a), along=True),
    "put_along_axis": Call(lambda f, x, a: f(x, np.zeros(x.shape, np.int32), 1.0, axis=a, inplace=False),
                           along=True),
    "apply_along_axis": Call(lambda f, x, a: f(lambda r: r * 2, a, x), along=True, with_none=False),
    "apply_over_axes": Call(lambda f, x, a: f(lambda y, ax: y.sum(axis=ax, keepdims=True), x, [a]), along=True,
                            with_none=False),
    "vectorize": Call(lambda f, x: f(lambda v: v * 2)(x)),
    "fromfunction": Call(lambda f, x: f(lambda *i: sum(i), x.shape, dtype=np.float32)),
    "full": Call(lambda f, x: f(x.shape, 2.0)),
    "full_like": Call(lambda f, x: f(x, 2.0)),
    "linspace": Call(lambda f, x: f(0.0, 1.0, x.shape[-1])),
    "logspace": Call(lambda f, x: f(0.0, 1.0, x.shape[-1])),
    "geomspace": Call(lambda f, x: f(1.0, 2.0, x.shape[-1])),
    "kaiser": Call(lambda f, x: f(x.shape[-1], 4.0)),
    "mask_indices": Call(lambda f, x: f(x.shape[-1], np.triu), jit=False),  # numpy's triu on a tracer
    "quantile": Call(lambda f, x, a: f(x, 0.5, axis=a), along=True),
    "nanquantile": Call(lambda f, x, a: f(x, 0.5, axis=a), along=True),
    "percentile": Call(lambda f, x, a: f(x, 50.0, axis=a), along=True),
    "nanpercentile": Call(lambda f, x, a: f(x, 50.0, axis=a), along=True),
    "partition": Call(lambda f, x, a: f(x, 0, axis=a), along=True, with_none=False),
    "argpartition": Call(lambda f, x, a: f(x, 0, axis=a), along=True, with_none=False),
    "lexsort": Call(lambda f, x: f((x, x))),
    "searchsorted": Call(lambda f, x: f(np.arange(3, dtype=np.float32), x)),
    "digitize": Call(lambda f, x: f(x, np.arange(3, dtype=np.float32))),
    "bincount": Call(lambda f, x: f(x.ravel().astype(np.int32), length=4)),
    "histogram": Call(lambda f, x: f(x.ravel(), bins=3, range=(0.0, 1.0))),
    "histogram2d": Call(lambda f, x: f(x.ravel(), x.ravel(), bins=2, range=[(0.0, 1.0), (0.0, 1.0)])),
    "histogramdd": Call(lambda f, x: f(_samples(x), bins=2, range=[(0.0, 1.0)] * _samples(x).shape[1])),
    "cov": ONE, "corrcoef": ONE,
    "tile": Call(lambda f, x: f(x, 2)),
    "repeat": Call(lambda f, x, a: f(x, 2, axis=a), along=True),
    "resize": Call(lambda f, x: f(x, (2,))),
    "delete": Call(lambda f, x, a: f(x, np.zeros(0, np.int32), axis=a), along=True, jit=False),
    "insert": Call(lambda f, x, a: f(x, 0, 1.0, axis=a), along=True),
    "pad": Call(lambda f, x: f(x, 1)),
    "place": Call(lambda f, x: f(x, x > 0, np.ones(1, np.float32), inplace=False)),
    "put": Call(lambda f, x: f(x, np.zeros(0, np.int32), np.zeros(0, np.float32), inplace=False)),
    "fill_diagonal": Call(lambda f, x: f(x, 1.0, inplace=False)),
    "meshgrid": Call(lambda f, x: f(x.ravel(), x.ravel())),
    "ix_": Call(lambda f, x: f(x.ravel().astype(np.int32))),
    "ravel_multi_index": Call(lambda f, x: f((x.astype(np.int32), x.astype(np.int32)), (3, 4))),
    "unravel_index": Call(lambda f, x: f(x.astype(np.int32), (3, 4))),
    **_calls("union1d intersect1d setdiff1d setxor1d", Call(lambda f, x: f(x, x), jit=False)),
    **_calls("unique unique_counts unique_inverse unique_all", Call(lambda f, x: f(x), jit=False)),
    "unique_values": Call(lambda f, x: f(x), jit=False),
    "dot": Call(lambda f, x: f(x, x.T)), "matmul": Call(lambda f, x: f(x, x.T)),
    "tensordot": Call(lambda f, x: f(x, x, axes=x.ndim)),
    "vecdot": Call(lambda f, x, a: f(x, x, axis=a), along=True, with_none=False),
    "matvec": Call(lambda f, x: f(x, x[0] if x.shape[0] else np.zeros(x.shape[-1], np.float32))),
    "vecmat": Call(lambda f, x: f(np.zeros(x.shape[0], np.float32), x)),
    "cross": Call(lambda f, x: f(x, x)),
    "einsum": Call(lambda f, x: f("i...->...", x)),
    "convolve": TWO, "correlate": TWO,
    # the polynomial functions take 1-D coefficients: x flattened
    **_calls("polyadd polysub polymul polyval", Call(lambda f, x: f(x.ravel(), x.ravel()))),
    "polydiv": Call(lambda f, x: f(np.ones(2, np.float32), x.ravel())),
    "interp": Call(lambda f, x: f(x, np.arange(3, dtype=np.float32), np.arange(3, dtype=np.float32))),
    "gradient": Call(lambda f, x: f(x)),
    "packbits": Call(lambda f, x, a: f(x > 0, axis=a), along=True),
    "unpackbits": Call(lambda f, x, a: f(x, axis=a), np.uint8, along=True),
    "broadcast_shapes": Call(lambda f, x: f(x.shape, (1,) * x.ndim), jit=False),
    "result_type": Call(lambda f, x: f(x), jit=False),
    "ldexp": Call(lambda f, x: f(x, x.astype(np.int32))),
}

# public names that take no array (dtypes, printing options, files): why each is left out
NOT_CALLED_WITH_AN_ARRAY = {
    "finfo": "takes a dtype", "iinfo": "takes a dtype", "promote_types": "takes dtypes",
    "can_cast": "takes dtypes", "issubdtype": "takes dtypes", "isdtype": "takes dtypes",
    "get_printoptions": "no arguments", "set_printoptions": "printing options", "printoptions": "printing options",
    "fromfile": "reads a file on the host (numpy's fromfile, as load, which is swept)",
    "einsum_path": "returns a printed contraction report, not an array",
    "frompyfunc": "takes a Python function (the ufunc it makes is swept as vectorize is: tests/test_numpy_ufunc.py)",
    # jax.nn's
    "get_scaled_dot_general_config": "takes a mode",
    "scaled_matmul": "the oracle has no CPU implementation (NotImplementedError); tests/test_scaled_matmul.py checks "
                     "empty operands",
}

LINALG_CALLS: dict[str, Call] = {
    "matmul": NUMPY_CALLS["matmul"], "matrix_transpose": ONE, "outer": TWO,
    "tensordot": NUMPY_CALLS["tensordot"], "trace": ONE, "diagonal": ONE, "cross": TWO,
    "vecdot": NUMPY_CALLS["vecdot"], "vector_norm": REDUCE, "matrix_norm": ONE,
    "matrix_power": Call(lambda f, x: f(x, 2)),
    # the factorisations (ember/_numpy/factorizations.py)
    **_calls("norm cond cholesky det slogdet inv eig eigvals eigh eigvalsh svd svdvals qr pinv matrix_rank tensorinv",
             ONE),
    **_calls("solve lstsq tensorsolve", TWO),
    "multi_dot": Call(lambda f, x: f([x, x.T])),
}

NN_CALLS: dict[str, Call] = {
    **_calls("celu elu gelu hard_sigmoid hard_silu hard_swish hard_tanh leaky_relu log_sigmoid mish relu relu6 "
             "selu sigmoid silu soft_sign softplus sparse_plus sparse_sigmoid squareplus swish tanh identity log1mexp",
             ONE),
    **_calls("softmax log_softmax standardize glu", ALONG),
    "logsumexp": REDUCE,
    "logmeanexp": REDUCE,
    "one_hot": Call(lambda f, x: f(x.astype(np.int32), 3)),
    # queries (1, x.shape[0], 1, 4) against keys and values (1, x.shape[-1], 1, 4): no queries, or no keys
    "dot_product_attention": Call(lambda f, x: f(np.zeros((1, x.shape[0], 1, 4), np.float32),
                                                 *[np.zeros((1, x.shape[-1], 1, 4), np.float32)] * 2)),
    # (without configs: lax.dot_general; with them JAX's CPU has no implementation)
    "scaled_dot_general": Call(lambda f, x: f(x, x, (((x.ndim - 1,), (x.ndim - 1,)), ((), ())))),
}


def _function_names(module: Any) -> list[str]:
    """The public functions of a module (its __all__ less constants, dtypes, classes and submodules)."""
    return [n for n in module.__all__ if callable(getattr(module, n)) and not isinstance(getattr(module, n), type)]


def _namespaces() -> list[tuple[Any, Any, dict[str, Call], list[str]]]:
    """(ember module, oracle module, call table, public function names) per namespace swept."""
    return [(enp, jnp, NUMPY_CALLS, _function_names(enp)), (enp.linalg, jnp.linalg, LINALG_CALLS,
                                                            _function_names(enp.linalg)),
            (enn, jax.nn, NN_CALLS, _function_names(enn))]


def _axes(rank: int, with_none: bool) -> tuple[Any, ...]:
    return ((None,) if with_none else ()) + tuple(range(rank))


def _cases() -> list[Any]:
    """One pytest param per (function, shape, axis): the first of each family in the default run."""
    params, seen_family = [], set()
    for ours, oracle, table, names in _namespaces():
        for name in names:
            if name in NOT_CALLED_WITH_AN_ARRAY:
                continue
            call = table[name]
            family = (ours.__name__, getattr(ours, name).__module__)  # the module defining it: ufuncs, ...
            for s in SHAPES:
                for axis in (_axes(len(s), call.with_none) if call.along else ("-",)):
                    default = family not in seen_family
                    seen_family.add(family)
                    prefix = "" if ours is enp else f"{ours.__name__.rsplit('.', 1)[-1]}."
                    params.append(pytest.param(ours, oracle, name, call, s, axis, id=f"{prefix}{name}-{s}-{axis}",
                                               marks=() if default else pytest.mark.slow))
    return params


def test_every_public_function_has_a_call():
    """The sweep covers every public function: a new one needs an entry in a call table (or a reason)."""
    for _, _, table, names in _namespaces():
        missing = [n for n in names if n not in table and n not in NOT_CALLED_WITH_AN_ARRAY]
        assert not missing, f"no empty-array call for {missing}"


def _run(fn: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    try:
        return fn(), None
    except Exception as e:  # the oracles raise errors of many kinds; ember's are checked by the caller
        return None, e


def _plain(x: Any) -> Any:
    """Results with named tuples (unique_all, ...) as plain lists, for _compare."""
    return [_plain(e) for e in x] if isinstance(x, (tuple, list)) else x


# functions of ember.numpy that jax.numpy lacks: their oracle elsewhere in JAX
EXTRA_ORACLES = {"logsumexp": jax.nn.logsumexp}
CLEAR_ERRORS = (TypeError, ValueError, IndexError, NotImplementedError)


def _is_clear(error: BaseException, ours: Any, name: str) -> bool:
    """A Python exception naming the function called (or, for an alias as amax, the function it is)."""
    return isinstance(error, CLEAR_ERRORS) and (name in str(error) or getattr(ours, name).__name__ in str(error))


def _numpy_outcome(ours: Any, name: str, apply: Callable[..., Any], x: np.ndarray) -> tuple[Any, Any]:
    """numpy's answer, the second oracle where JAX and ember disagree on raising (none outside ember.numpy)."""
    f = getattr(np, name, None) if ours is enp else None
    if f is None:
        return None, AttributeError(f"numpy has no {name}")
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's "mean of empty slice" and kin
        return _run(lambda: apply(f, x))


def _check(ours: Any, oracle: Any, name: str, call: Call, s: tuple[int, ...], axis: Any, jit: bool) -> None:
    x = np.zeros(s, call.dtype)

    def apply(f: Callable[..., Any], arg: Any) -> Any:
        return call.build(f, arg) if not call.along else call.build(f, arg, axis)
    ref, ref_error = _run(lambda: apply(getattr(oracle, name, None) or EXTRA_ORACLES[name], x))
    f = getattr(ours, name)
    got, error = _run(lambda: ember.jit(lambda a: apply(f, a))(x) if jit else apply(f, x))
    where = f"{name}{s} axis={axis}{' under jit' if jit else ''}"
    if error is not None:
        assert _is_clear(error, ours, name), f"{where}: not a clear error naming {name}: {error!r}"
        if ref_error is None:  # JAX answers: numpy must refuse too
            assert _numpy_outcome(ours, name, apply, x)[1] is not None, (
                f"{where}: ember raises {error!r}, JAX and numpy answer")
        return
    if ref_error is not None:  # JAX refuses; numpy may have an answer
        ref, np_error = _numpy_outcome(ours, name, apply, x)
        assert np_error is None, f"{where}: ember returns {got!r} where JAX and numpy raise ({ref_error!r})"
    _compare(_plain(got), _plain(ref), 2e-5, where)


@pytest.mark.parametrize("ours,oracle,name,call,s,axis", _cases())
def test_empty_inputs_match_jax(ours, oracle, name, call, s, axis):
    _check(ours, oracle, name, call, s, axis, jit=False)


@pytest.mark.slow
@pytest.mark.parametrize("ours,oracle,name,call,s,axis", [p for p in _cases() if p.values[3].jit])
def test_empty_inputs_match_jax_under_jit(ours, oracle, name, call, s, axis):
    _check(ours, oracle, name, call, s, axis, jit=True)


# ---------------------------------------------------------------------------------------------------------------
# The cases issue 24 names, in the default run: each raised an internal error ("gather: slice_sizes exceed the
# operand", "max: zero-size array") where numpy and JAX return empty results.
E30, E04 = np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32)
NAMED = [("median", (E30,), {"axis": 0}), ("median", (E04,), {"axis": 1}), ("nanmedian", (E30,), {"axis": 0}),
         ("quantile", (E30, 0.5), {"axis": 0}), ("percentile", (E04, 50.0), {"axis": 1}),
         ("nanquantile", (E04, np.array([0.2, 0.8], np.float32)), {"axis": 1}),
         ("take_along_axis", (E30, np.zeros((3, 0), np.int32)), {"axis": 1}),
         ("take_along_axis", (E04, np.zeros((0, 4), np.int32)), {"axis": 0}),
         ("cov", (E30,), {})]  # was -0. where numpy and JAX give NaN (no degrees of freedom)


@pytest.mark.parametrize("name,args,kwargs", [
    pytest.param(*c, id=f"{c[0]}-{i}", marks=() if c[0] in ("median", "take_along_axis", "cov") and
                 c[1][0] is E30 else pytest.mark.slow) for i, c in enumerate(NAMED)])
def test_issue_cases_match_jax(name, args, kwargs):
    ref = getattr(jnp, name)(*args, **kwargs)
    _compare(getattr(enp, name)(*args, **kwargs), ref, 2e-5, name)


def test_take_along_axis_and_median_of_empty_arrays_under_jit():
    indices = np.zeros((0, 4), np.int32)
    got = ember.jit(lambda a, i: enp.take_along_axis(a, i, axis=0))(E04, indices)
    _compare(got, jnp.take_along_axis(E04, indices, axis=0), 0, "take_along_axis under jit")
    _compare(ember.jit(lambda a: enp.median(a, axis=0))(E30), jnp.median(E30, axis=0), 0, "median under jit")


@pytest.mark.parametrize("shape_", [(3, 0), pytest.param((0, 4), marks=pytest.mark.slow)])
def test_softmax_of_empty_arrays(shape_):
    x = np.zeros(shape_, np.float32)
    ref = jax.nn.softmax(x)
    _compare(enn.softmax(x), ref, 0, "softmax")
    _compare(ember.jit(enn.softmax)(x), ref, 0, "softmax under jit")


def test_quantile_over_an_empty_axis_is_a_clear_error():
    """numpy returns NaN (with a warning), JAX fails inside its gather; ember says what is wrong."""
    for name, args in (("median", (E30,)), ("quantile", (E04, 0.5)), ("nanmedian", (E30,))):
        with pytest.raises(ValueError, match=f"{name}: cannot take a quantile of an empty array"):
            getattr(enp, name)(*args, axis=None if name != "quantile" else 0)


def test_take_along_an_empty_axis_with_indices():
    """Every index is out of bounds of an empty axis: mode "fill" fills (as take), the others raise IndexError
    (numpy raises; JAX returns zeros whatever the mode)."""
    indices = np.zeros((3, 2), np.int32)
    np.testing.assert_array_equal(np.asarray(enp.take_along_axis(E30, indices, axis=1)), np.full((3, 2), np.nan))
    np.testing.assert_array_equal(np.asarray(enp.take(E30, indices[0], axis=1)), np.full((3, 2), np.nan))
    with pytest.raises(IndexError, match="take_along_axis"):
        enp.take_along_axis(E30, indices, axis=1, mode="clip")


def test_gather_of_a_zero_size_operand_under_transformations():
    """The gather primitive reads nothing for an empty result, also in its derivative and batching rules."""
    indices = np.zeros((3, 0), np.int32)

    def loss(lib):
        return lambda a: lib.sum(lib.take_along_axis(a * 2.0, indices, axis=1))
    _compare(ember.grad(loss(enp))(E30), jax.grad(loss(jnp))(E30), 0, "grad")
    batched = ember.vmap(lambda a: enp.take_along_axis(a, np.zeros((0,), np.int32), axis=0))(E30)
    _compare(batched, jax.vmap(lambda a: jnp.take_along_axis(a, np.zeros((0,), np.int32), axis=0))(E30), 0, "vmap")
