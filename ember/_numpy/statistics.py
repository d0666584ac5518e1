"""Statistics of ember.numpy: the NaN-ignoring reductions (nansum ... nanargmax), count_nonzero, ptp, average,
median, quantile and percentile (and their nan versions), cov, corrcoef, bincount, digitize and the histograms.
Shapes that depend on values (bincount's length, histogram's bins) must be static under jit, as in JAX."""
from __future__ import annotations

import builtins
import math
from typing import Any, Sequence

import numpy as _np

from ember import _prims as lax
from ember._core import Tracer, aval_of, is_python_scalar
from ember._core import dtypes as dt
from ember._core.checks import normalize_axes, normalize_axis, static_int

from ember._numpy.linalg import matmul
from ember._numpy.mathfuncs import isnan
from ember._numpy.promotion import _as_operand, _promote, _to_inexact
from ember._numpy.reductions import (_float_result, _no_out, _refuse_empty, argmax, argmin, max, mean, min, prod, sum,
                                    var)
from ember._numpy.reductions import all as all_
from ember._numpy.selection import take_along_axis, where
from ember._numpy.shape import concatenate, diagonal, expand_dims, moveaxis, ndim, ravel, reshape, shape, transpose
from ember._numpy.sorting import searchsorted
from ember._numpy.ufuncs import (_where, add, clip, divide, greater_equal, less, logical_and, logical_not, logical_or,
                                 multiply, remainder, sqrt, subtract)


def _array(name: str, a: Any) -> Any:
    a = _as_operand(a, name, 0)
    if is_python_scalar(a) or isinstance(a, (_np.ndarray, _np.generic)):
        a = _promote(name, a)[0] if is_python_scalar(a) else lax.convert_element_type(a, *_dtype_weak(a))
    return a


def _dtype_weak(a: Any) -> tuple[Any, bool]:
    return dt.dtype_and_weak(a)


def _is_inexact(a: Any) -> bool:
    return dt.is_inexact(aval_of(a).dtype)


# ---------------------------------------------------------------------------------------------------------------
# NaN-ignoring reductions
def _nan_filled(a: Any, fill: Any) -> Any:
    return where(isnan(a), fill, a) if _is_inexact(a) else a


def nansum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
           initial: Any = None, where: Any = None) -> Any:
    """sum, treating NaNs as zero."""
    a = _array("nansum", a)
    if dtype is None:
        dt.refuse_narrow_int_promotion("nansum", aval_of(a).dtype)
    return sum(_nan_filled(a, 0), axis, dtype, out, keepdims, initial, where)


def nanprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False,
            initial: Any = None, where: Any = None) -> Any:
    """prod, treating NaNs as one."""
    a = _array("nanprod", a)
    if dtype is None:
        dt.refuse_narrow_int_promotion("nanprod", aval_of(a).dtype)
    return prod(_nan_filled(a, 1), axis, dtype, out, keepdims, initial, where)


def _nan_extreme(name: str, reduce: Any, fill: float) -> Any:
    def fn(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False, initial: Any = None,
           where: Any = None) -> Any:
        a = _array(name, a)
        if initial is None and where is None:
            _refuse_empty(name, a, axis, name[3:])
        if not _is_inexact(a):
            return reduce(a, axis, out, keepdims, initial, where)
        result = reduce(_nan_filled(a, fill), axis, out, keepdims, initial, where)
        if initial is not None:  # a slice of NaNs alone gives initial (as numpy and JAX)
            return result
        # slices holding only NaNs give NaN (numpy warns; JAX returns NaN)
        only_nan = all_(isnan(a), axis=axis, keepdims=keepdims, where=where)
        return _where(only_nan, _np.nan, result)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name[3:]}, ignoring NaNs (NaN for slices of NaNs alone, initial if given)."
    return fn


nanmax = _nan_extreme("nanmax", max, -_np.inf)
nanmin = _nan_extreme("nanmin", min, _np.inf)


def _nan_count(name: str, a: Any, axis: Any, keepdims: bool, where: Any) -> Any:
    return sum(logical_not(isnan(a)), axis=axis, keepdims=keepdims, where=where)


def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False, *,
            where: Any = None) -> Any:
    """mean over the elements that are not NaN (NaN for slices of NaNs alone)."""
    _no_out("nanmean", out)
    a = _array("nanmean", a)
    if not _is_inexact(a):
        return mean(a, axis, dtype, None, keepdims, where=where)
    result_dtype, computation, weak = _float_result("nanmean", a, dtype)
    x = lax.convert_element_type(a, computation, weak)
    total = sum(_nan_filled(x, 0), axis=axis, keepdims=keepdims, where=where)
    count = lax.convert_element_type(_nan_count("nanmean", a, axis, keepdims, where), computation, False)
    return lax.convert_element_type(divide(total, count), result_dtype, weak)


def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0, keepdims: bool = False,
           *, where: Any = None, correction: Any = None) -> Any:
    """var over the elements that are not NaN."""
    _no_out("nanvar", out)
    if correction is not None:
        ddof = correction
    a = _array("nanvar", a)
    if not _is_inexact(a):
        return var(a, axis, dtype, None, ddof, keepdims, where=where)
    result_dtype, computation, weak = _float_result("nanvar", a, dtype)
    x = lax.convert_element_type(a, computation, weak)
    nan = isnan(x)
    # NaNs are replaced before any arithmetic, so that their (zero) cotangents stay zero
    centered = _where(nan, 0.0, subtract(_where(nan, 0.0, x), nanmean(x, axis, keepdims=True, where=where)))
    squares = sum(multiply(centered, centered), axis=axis, keepdims=keepdims, where=where)
    count = lax.convert_element_type(_nan_count("nanvar", a, axis, keepdims, where), computation, False)
    divisor = lax.max(lax.sub(count, lax.convert_element_type(ddof, computation, False)),
                      lax.full_like(count, 0))
    return lax.convert_element_type(divide(squares, divisor), result_dtype, weak)


def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0, keepdims: bool = False,
           *, where: Any = None, correction: Any = None) -> Any:
    """std over the elements that are not NaN."""
    return sqrt(nanvar(a, axis, dtype, out, ddof, keepdims, where=where, correction=correction))


def _nan_arg(name: str, arg: Any, fill: float) -> Any:
    def fn(a: Any, axis: int | None = None, out: Any = None, keepdims: bool | None = None) -> Any:
        a = _array(name, a)
        _refuse_empty(name, a, axis, name[3:])
        if not _is_inexact(a):
            return arg(a, axis, out, keepdims)
        found = arg(_nan_filled(a, fill), axis, out, keepdims)
        # slices of NaNs alone: -1 (as JAX; numpy raises)
        return where(all_(isnan(a), axis=axis, keepdims=bool(keepdims)), -1, found)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"{name[3:]} ignoring NaNs; -1 for slices of NaNs alone (as JAX)."
    return fn


nanargmax = _nan_arg("nanargmax", argmax, -_np.inf)
nanargmin = _nan_arg("nanargmin", argmin, _np.inf)


def count_nonzero(a: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """How many elements are not zero (the default integer dtype)."""
    a = _array("count_nonzero", a)
    nonzero = lax.ne(a, lax.full_like(a, 0)) if aval_of(a).dtype != _np.dtype(bool) else a
    return sum(nonzero, axis=axis, keepdims=keepdims, dtype=dt.default_int_dtype())


def ptp(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """Peak to peak: max - min."""
    _no_out("ptp", out)
    a = _array("ptp", a)
    _refuse_empty("ptp", a, axis, "max")
    return subtract(max(a, axis, keepdims=keepdims), min(a, axis, keepdims=keepdims))


def average(a: Any, axis: Any = None, weights: Any = None, returned: bool = False, keepdims: bool = False
            ) -> Any:
    """The (weighted) mean; with returned, also the sum of the weights. weights broadcast against a, or are 1-D
    along a single axis (numpy)."""
    a = _array("average", a)
    if weights is None:
        avg = mean(a, axis, keepdims=keepdims)
        if not returned:
            return avg
        axes = normalize_axes("average", axis, ndim(a))
        count = math.prod(shape(a)[i] for i in axes)
        return avg, lax.full(shape(avg), count, aval_of(avg).dtype)
    w = _array("average", weights)
    a, w = _promote("average", _to_inexact(a), w, inexact=True)
    if shape(w) != shape(a):
        if axis is None:
            raise ValueError(f"average: weights of shape {shape(w)} differ from a's shape {shape(a)}; pass axis")
        if ndim(w) != 1:
            raise ValueError(f"average: 1-D weights are needed when shapes differ, got weights of shape {shape(w)} "
                             f"for a of shape {shape(a)}")
        ax = normalize_axis("average", axis, ndim(a))
        if shape(w)[0] != shape(a)[ax]:
            raise ValueError(f"average: weights of length {shape(w)[0]} differ from a's axis {ax} of length "
                             f"{shape(a)[ax]}")
        w = lax.broadcast_in_dim(w, shape(a), (ax,))
    total_w = sum(w, axis, keepdims=keepdims)
    avg = divide(sum(multiply(a, w), axis, keepdims=keepdims), total_w)
    return (avg, total_w) if returned else avg


# ---------------------------------------------------------------------------------------------------------------
# Quantiles
# numpy's methods (Hyndman and Fan's nine and four more). Interpolating ones: the virtual index of the q-th
# quantile among n sorted values is n q + alpha + q (1 - alpha - beta) - 1 ("linear" is (n - 1) q).
_ALPHA_BETA = {"interpolated_inverted_cdf": (0.0, 1.0), "hazen": (0.5, 0.5), "weibull": (0.0, 0.0),
               "median_unbiased": (1 / 3, 1 / 3), "normal_unbiased": (3 / 8, 3 / 8)}
_DISCRETE = ("lower", "higher", "nearest", "inverted_cdf", "closest_observation")
_METHODS = ("linear", "midpoint", "averaged_inverted_cdf") + tuple(_ALPHA_BETA) + _DISCRETE


def _is_whole(x: Any) -> Any:
    return lax.eq(lax.floor(x), x)


def _discrete_index(method: str, n: Any, q: Any) -> Any:
    """The (0-based, unclipped) order statistic a discrete method picks as the q-th quantile of n values."""
    if method == "inverted_cdf":
        return lax.ceil(subtract(multiply(n, q), 1.0))
    if method == "closest_observation":  # the nearest one, ties to the even one counted from 1
        v = subtract(multiply(n, q), 1.5)
        below = lax.floor(v)
        return _where(lax.bitwise_and(_is_whole(v), lax.eq(remainder(below, 2.0), lax.full_like(below, 1.0))),
                      below, add(below, 1.0))
    v = multiply(subtract(n, 1.0), q)
    return {"lower": lax.floor, "higher": lax.ceil, "nearest": lambda x: lax.round(x, 1)}[method](v)


def _virtual_index(method: str, n: Any, q: Any) -> tuple[Any, Any]:
    """An interpolating method's virtual index of the q-th quantile of n values and its interpolation weight."""
    if method in ("linear", "midpoint"):
        v = multiply(subtract(n, 1.0), q)
    elif method == "averaged_inverted_cdf":
        v = subtract(multiply(n, q), 1.0)
    else:
        alpha, beta = _ALPHA_BETA[method]
        v = add(multiply(n, q), subtract(add(multiply(q, 1.0 - alpha - beta), alpha), 1.0))
    if method == "midpoint":
        return v, _where(_is_whole(v), 0.0, 0.5)
    if method == "averaged_inverted_cdf":
        return v, _where(_is_whole(v), 0.5, 1.0)
    return v, lax.sub(v, lax.floor(v))


def _lerp(a: Any, b: Any, t: Any) -> Any:
    """a + (b - a) t, from b's side for t >= 1/2 (numpy's rounding); a where t is 0 (also for infinite a = b)."""
    d = subtract(b, a)
    out = _where(lax.ge(t, lax.full_like(t, 0.5)), subtract(b, multiply(d, subtract(1.0, t))), add(a, multiply(d, t)))
    return _where(lax.eq(t, lax.full_like(t, 0.0)), a, out)


def _sorted_quantiles(ordered: Any, count: Any, q: Any, method: str) -> Any:
    """The q-th quantiles (q: (nq,)) of the first count values (lead + (1,)) of each sorted row: lead + (nq,)."""
    last = lax.max(subtract(count, 1.0), lax.full_like(count, 0.0))

    def order_statistic(index: Any) -> Any:
        i = clip(index, 0.0, last)
        return take_along_axis(ordered, lax.convert_element_type(i, dt.default_int_dtype()), axis=-1)

    if method in _DISCRETE:
        return order_statistic(_discrete_index(method, count, q))
    v, weight = _virtual_index(method, count, q)
    below = lax.floor(v)
    outside = logical_or(greater_equal(v, last), less(v, 0.0))  # both neighbours the same end
    above = _where(outside, below, add(below, 1.0))
    return _lerp(order_statistic(below), order_statistic(above), weight)


def _weighted_inverted_cdf(ordered: Any, w: Any, q: Any, ignore_nan: bool) -> Any:
    """The weighted inverted-CDF quantiles q (nq,) of the sorted rows `ordered` (lead + (n,)) with their weights
    w: the first value, of positive weight, at which the running weight reaches q times the row's total; NaN for
    a row with a negative or NaN weight (or a NaN value, unless ignore_nan: NaN values then weigh nothing)."""
    d = aval_of(ordered).dtype
    nan = isnan(ordered)
    bad = logical_or(less(w, 0.0), isnan(w))
    clean = _where(logical_or(bad, nan), lax.full_like(w, 0.0), w)
    cum = lax.cumsum(clean, ndim(clean) - 1)
    target = multiply(expand_dims(q, tuple(range(ndim(cum) - 1))), cum[..., -1:])       # lead + (nq,)
    reached = greater_equal(expand_dims(cum, -2), expand_dims(target, -1))            # lead + (nq, n)
    hit = logical_and(reached, expand_dims(lax.gt(clean, lax.full_like(clean, 0.0)), -2))
    below = sum(lax.convert_element_type(logical_not(reached), dt.default_int_dtype()), -1)
    # (numpy's choice where the first weights are 0 and q is 0: the first value of positive weight; where no
    # weight is positive, JAX's: the first value)
    index = _where(lax.reduce_max(hit, (ndim(hit) - 1,)), argmax(hit, axis=-1).astype(aval_of(below).dtype), below)
    n = shape(ordered)[-1]
    count = (sum(lax.convert_element_type(logical_not(nan), dt.default_int_dtype()), -1, keepdims=True)
             if ignore_nan else lax.full(shape(ordered)[:-1] + (1,), n, dt.default_int_dtype()))
    index = clip(index, 0, lax.max(subtract(count, 1), lax.full_like(count, 0)))
    out = take_along_axis(ordered, index, axis=-1)
    invalid = lax.reduce_max(bad, (ndim(bad) - 1,))
    invalid = logical_or(invalid, lax.eq(count[..., 0], lax.full_like(count[..., 0], 0)) if ignore_nan
                         else lax.reduce_max(nan, (ndim(nan) - 1,)))
    return where(expand_dims(invalid, -1), lax.full((), _np.nan, d), out)


def _quantile(name: str, a: Any, q: Any, axis: Any, method: str, keepdims: bool, weights: Any, ignore_nan: bool,
              scale: float = 1.0) -> Any:
    if method not in _METHODS:
        raise ValueError(f"{name}: method must be one of {', '.join(_METHODS)}, got {method!r}")
    if weights is not None and method != "inverted_cdf":
        raise NotImplementedError(f"{method} doesn't support weights. Only method 'inverted_cdf' supports weights. "
                                  f"({name})")
    if not isinstance(q, Tracer):
        qv = _np.asarray(q, dtype=float)
        if _np.any((qv < 0) | (qv > scale)):
            raise ValueError(f"{name}: quantiles must be in the range [0, {scale:g}], got {q!r:.60}")
    a = _to_inexact(_array(name, a), name)
    q = _to_inexact(_array(name, q), name)
    if weights is not None:
        weights = _array(name, weights)
        if dt.is_complex(aval_of(weights).dtype):
            raise ValueError(f"Weights cannot be complex types. ({name}: weights of dtype {aval_of(weights).dtype})")
        a, weights = _promote(name, a, weights, inexact=True)
        a, weights = _array(name, a), _array(name, weights)
        if shape(weights) != shape(a):
            if axis is None:
                raise ValueError(f"Weights shape must match 'a' shape when axis is None. ({name}: weights of shape "
                                 f"{shape(weights)}, a of shape {shape(a)})")
            axes_w = normalize_axes(name, axis, ndim(a))
            along = tuple(shape(a)[i] for i in axes_w)
            if shape(weights) != along:
                raise ValueError(f"Weights shape {shape(weights)} must match reduction axes {along} ({name}: a of "
                                 f"shape {shape(a)}, axis {axis})")
            weights = lax.broadcast_in_dim(weights, shape(a), axes_w)
    a, q = _promote(name, a, q)
    q = _array(name, q)
    if scale != 1.0:
        q = lax.div(q, lax.full_like(q, scale))
    if ndim(q) > 1:
        raise ValueError(f"{name}: q must be a scalar or 1-D, got shape {shape(q)}")
    nd = ndim(a)
    axes = normalize_axes(name, axis, nd)
    kept = [i for i in range(nd) if i not in axes]
    moved = transpose(a, kept + list(axes))
    n = math.prod(shape(a)[i] for i in axes)
    if n == 0:
        raise ValueError(f"{name}: cannot take a quantile of an empty array (shape {shape(a)}, axis {axis})")
    flat = reshape(moved, tuple(shape(a)[i] for i in kept) + (n,))
    qs = reshape(q, (-1,)) if ndim(q) else reshape(q, (1,))
    nq = shape(qs)[0]
    if weights is not None:
        w = reshape(transpose(weights, kept + list(axes)), shape(flat))
        ordered, w = lax.sort_key_val(flat, w, dimension=ndim(flat) - 1)
        out = _weighted_inverted_cdf(ordered, w, qs, ignore_nan)
        return _arrange(out, q, nq, keepdims, axes, a)
    ordered = lax.sort(flat, dimension=ndim(flat) - 1)
    d = aval_of(ordered).dtype
    nan = isnan(ordered)
    if ignore_nan:
        count = lax.reduce_sum(lax.convert_element_type(logical_not(nan), d), (ndim(flat) - 1,))
    else:
        count = lax.full(shape(ordered)[:-1], float(n), d)
    # positions: q * (count - 1), per slice and per quantile -> shape kept + q's shape
    out = _sorted_quantiles(ordered, expand_dims(count, -1), qs, method)  # lead + (nq,)
    any_nan = lax.reduce_max(nan, (ndim(flat) - 1,))
    if ignore_nan:
        invalid = lax.eq(count, lax.full_like(count, 0.0))
    else:
        invalid = any_nan
    out = where(expand_dims(invalid, -1), _np.nan, out)  # lead + (nq,)
    return _arrange(out, q, nq, keepdims, axes, a)


def _arrange(out: Any, q: Any, nq: int, keepdims: bool, axes: Sequence[int], a: Any) -> Any:
    """The quantiles (lead + (nq,)) in numpy's layout: q's axis first, the reduced axes kept as 1s with keepdims,
    no q axis for a scalar q."""
    out = moveaxis(out, -1, 0)  # (nq,) + lead
    if keepdims:
        full = tuple(1 if i in axes else shape(a)[i] for i in range(ndim(a)))
        out = reshape(out, (nq,) + full)
    if ndim(q) == 0:
        out = reshape(out, shape(out)[1:])
    return out


def quantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, *, weights: Any = None) -> Any:
    """The q-th quantiles along axis (q in [0, 1]) by any of numpy's methods (_METHODS); NaN where a slice holds a
    NaN. weights (method='inverted_cdf' only, as JAX and numpy: a's shape, or the shape of the reduced axes) weigh
    the values; a slice with a negative or NaN weight gives NaN (JAX's; numpy raises)."""
    _no_out("quantile", out)
    return _quantile("quantile", a, q, axis, method, keepdims, weights, ignore_nan=False)


def nanquantile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                method: str = "linear", keepdims: bool = False, *, weights: Any = None) -> Any:
    """quantile over the elements that are not NaN."""
    _no_out("nanquantile", out)
    return _quantile("nanquantile", a, q, axis, method, keepdims, weights, ignore_nan=True)


def percentile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False, *, weights: Any = None) -> Any:
    """quantile with q in percent (0 to 100)."""
    _no_out("percentile", out)
    return _quantile("percentile", a, q, axis, method, keepdims, weights, ignore_nan=False, scale=100.0)


def nanpercentile(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
                  method: str = "linear", keepdims: bool = False, *, weights: Any = None) -> Any:
    _no_out("nanpercentile", out)
    return _quantile("nanpercentile", a, q, axis, method, keepdims, weights, ignore_nan=True, scale=100.0)


def median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False, keepdims: bool = False
           ) -> Any:
    """The median along axis (the mean of the two middle values for even counts); NaN where a slice has a NaN."""
    _no_out("median", out)
    return _quantile("median", a, 0.5, axis, "linear", keepdims, None, ignore_nan=False)


def nanmedian(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False, keepdims: bool = False
              ) -> Any:
    _no_out("nanmedian", out)
    return _quantile("nanmedian", a, 0.5, axis, "linear", keepdims, None, ignore_nan=True)


# ---------------------------------------------------------------------------------------------------------------
# Covariance
def cov(m: Any, y: Any = None, rowvar: bool = True, bias: bool = False, ddof: int | None = None,
        fweights: Any = None, aweights: Any = None, dtype: Any = None) -> Any:
    """numpy's covariance matrix (rows are variables unless rowvar=False), with frequency and analytic weights."""
    x = _to_inexact(_array("cov", m), "cov")
    if ndim(x) > 2:
        raise ValueError(f"cov: m must have at most 2 dimensions, got shape {shape(x)}")
    x = reshape(x, (1, -1)) if ndim(x) < 2 else x
    if not rowvar and shape(x)[0] != 1:
        x = transpose(x)
    if y is not None:
        yy = _to_inexact(_array("cov", y), "cov")
        yy = reshape(yy, (1, -1)) if ndim(yy) < 2 else yy
        if not rowvar and shape(yy)[0] != 1:
            yy = transpose(yy)
        x, yy = _promote("cov", x, yy)
        x = concatenate([x, yy], axis=0)
    if dtype is not None:
        x = lax.convert_element_type(x, dt.check_user_dtype(dtype, "cov"), False)
    if ddof is None:
        ddof = 0 if bias else 1
    n = shape(x)[1]
    w = None
    if fweights is not None:
        fw = _array("cov", fweights)
        if ndim(fw) != 1 or shape(fw)[0] != n:
            raise ValueError(f"cov: fweights must be 1-D of length {n}, got shape {shape(fw)}")
        w = lax.convert_element_type(fw, aval_of(x).dtype, False)
    if aweights is not None:
        aw = _array("cov", aweights)
        if ndim(aw) != 1 or shape(aw)[0] != n:
            raise ValueError(f"cov: aweights must be 1-D of length {n}, got shape {shape(aw)}")
        aw = lax.convert_element_type(aw, aval_of(x).dtype, False)
        w = aw if w is None else multiply(w, aw)
    if w is None:
        avg = mean(x, axis=1)
        w_sum = float(n)
        fact = builtins.max(w_sum - ddof, 0.0)  # numpy: no more degrees of freedom than observations
    else:
        avg, w_sum = average(x, axis=1, weights=w, returned=True)
        w_sum = w_sum[0]
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = subtract(w_sum, ddof)
        else:
            fact = subtract(w_sum, divide(multiply(ddof, sum(multiply(w, aw))), w_sum))
        fact = lax.max(fact, lax.full_like(fact, 0))
    xc = subtract(x, expand_dims(avg, 1))
    xw = xc if w is None else multiply(xc, w)
    c = divide(matmul(xw, transpose(lax.conj(xc) if dt.is_complex(aval_of(xc).dtype) else xc)), fact)
    return reshape(c, ()) if shape(c) == (1, 1) else c


def corrcoef(x: Any, y: Any = None, rowvar: bool = True, dtype: Any = None) -> Any:
    """Pearson correlation coefficients (cov normalised by the standard deviations, clipped to [-1, 1])."""
    c = cov(x, y, rowvar, dtype=dtype)
    if ndim(c) == 0:
        return divide(c, c)
    diag = diagonal(c)
    d = sqrt(lax.real(diag) if dt.is_complex(aval_of(diag).dtype) else diag)
    c = divide(divide(c, expand_dims(d, 1)), expand_dims(d, 0))
    if dt.is_complex(aval_of(c).dtype):  # each part clipped (as numpy)
        return lax.complex(clip(lax.real(c), -1.0, 1.0), clip(lax.imag(c), -1.0, 1.0))
    return clip(c, -1.0, 1.0)


# ---------------------------------------------------------------------------------------------------------------
# Counting and histograms
def bincount(x: Any, weights: Any = None, minlength: int = 0, *, length: int | None = None) -> Any:
    """Counts (or summed weights) of each non-negative integer in x; length fixes the result's length (needed
    under jit, as in JAX); values outside [0, length) are dropped."""
    x = _array("bincount", x)
    if not dt.is_int(aval_of(x).dtype) and aval_of(x).dtype != _np.dtype(bool):
        raise TypeError(f"bincount: x must be an integer array, got {aval_of(x).str_short()}")
    if ndim(x) != 1:
        raise ValueError(f"bincount: x must be 1-D, got shape {shape(x)}")
    minlength = static_int("bincount", "minlength", minlength)
    if minlength < 0:
        raise ValueError(f"bincount: minlength must be non-negative, got {minlength}")
    if length is None:
        if isinstance(x, Tracer):
            raise ValueError("bincount: under jit the result's length must be static: pass length=")
        xv = _np.asarray(x)
        if xv.size and xv.min() < 0:
            raise ValueError("bincount: x must hold non-negative integers")
        length = builtins.max(minlength, int(xv.max()) + 1 if xv.size else 0)
    length = static_int("bincount", "length", length)
    if weights is None:
        values = lax.full(shape(x), 1, dt.default_int_dtype())
    else:
        values = _array("bincount", weights)
        if shape(values) != shape(x):
            raise ValueError(f"bincount: weights of shape {shape(values)} differ from x's shape {shape(x)}")
        if aval_of(values).dtype == _np.dtype(bool):
            values = lax.convert_element_type(values, dt.default_int_dtype())
    zeros = lax.full((length,), 0, aval_of(values).dtype)
    x = where(lax.lt(x, lax.full_like(x, 0)), length, x)  # negative values: dropped, not wrapped
    return zeros.at[x].add(values, mode="drop")


def digitize(x: Any, bins: Any, right: bool = False, *, method: str | None = None) -> Any:
    """The index of the bin each x falls in (bins increasing or decreasing), numpy's digitize."""
    x = _array("digitize", x)
    bins = _array("digitize", bins)
    if ndim(bins) != 1:
        raise ValueError(f"digitize: bins must be 1-D, got shape {shape(bins)}")
    side = "left" if right else "right"
    if shape(bins)[0] == 0:
        return lax.full(shape(x), 0, dt.default_int_dtype())
    increasing = lax.le(bins[0], bins[-1])
    n = shape(bins)[0]
    up = searchsorted(bins, x, side=side)
    down = n - searchsorted(bins[::-1], x, side="left" if side == "right" else "right")
    return lax.convert_element_type(where(increasing, up, down), dt.default_int_dtype())


def histogram_bin_edges(a: Any, bins: Any = 10, range: Any = None, weights: Any = None) -> Any:  # noqa: A002
    """The bin edges histogram uses: bins evenly spaced edges over range (default: a's min to max), or bins
    itself when it is an array."""
    a = _to_inexact(_array("histogram_bin_edges", a), "histogram_bin_edges")
    if not isinstance(bins, int) and not (is_python_scalar(bins) and float(bins).is_integer()):
        edges = _to_inexact(_array("histogram_bin_edges", bins))
        if ndim(edges) != 1:
            raise ValueError(f"histogram_bin_edges: bins must be an int or a 1-D array, got shape {shape(edges)}")
        return edges
    bins = static_int("histogram_bin_edges", "bins", bins)
    if bins < 1:
        raise ValueError(f"histogram_bin_edges: bins must be positive, got {bins}")
    d = aval_of(a).dtype
    if range is None:
        lo, hi = min(a), max(a)
    else:
        if len(range) != 2:
            raise ValueError(f"histogram_bin_edges: range must be (min, max), got {range!r}")
        lo, hi = (lax.convert_element_type(_array("histogram_bin_edges", r), d, False) for r in range)
    lo = lax.convert_element_type(lo, d, False)
    hi = lax.convert_element_type(hi, d, False)
    same = lax.eq(lo, hi)
    lo = where(same, subtract(lo, 0.5), lo)
    hi = where(same, add(hi, 0.5), hi)
    steps = lax.convert_element_type(lax.iota(_np.dtype(_np.int32), bins + 1), d)
    return add(lo, multiply(steps, divide(subtract(hi, lo), float(bins))))


def histogram(a: Any, bins: Any = 10, range: Any = None, weights: Any = None,  # noqa: A002
              density: bool | None = None) -> tuple[Any, Any]:
    """(counts, bin edges), numpy's histogram: bins are half-open [e_i, e_i+1) except the last, which is
    closed; values outside the edges are not counted."""
    a = _to_inexact(_array("histogram", a), "histogram")
    edges = histogram_bin_edges(a, bins, range)
    flat = ravel(a)
    counts = _bin_counts("histogram", [flat], [edges], weights)
    counts = lax.convert_element_type(counts, aval_of(edges).dtype)
    if density:
        widths = subtract(edges[1:], edges[:-1])
        counts = divide(divide(counts, sum(counts)), widths)
    return counts, edges


def _bin_index(x: Any, edges: Any) -> Any:
    """Bin of each x in edges (n_edges - 1 bins), or -1 outside; the last bin is closed on the right."""
    nb = shape(edges)[0] - 1
    i = lax.sub(searchsorted(edges, x, side="right"), lax.full(shape(x), 1, dt.default_int_dtype()))
    i = where(lax.eq(x, edges[-1]), nb - 1, i)
    inside = lax.bitwise_and(lax.ge(i, lax.full_like(i, 0)), lax.lt(i, lax.full_like(i, nb)))
    return where(inside, i, -1)


def _bin_counts(name: str, samples: Sequence[Any], edges: Sequence[Any], weights: Any) -> Any:
    sizes = [shape(e)[0] - 1 for e in edges]
    index = None
    valid = None
    for x, e, n in zip(samples, edges, sizes):
        i = _bin_index(lax.convert_element_type(x, aval_of(e).dtype), e)
        ok = lax.ge(i, lax.full_like(i, 0))
        index = i if index is None else add(multiply(index, n), i)
        valid = ok if valid is None else lax.bitwise_and(valid, ok)
    total = int(_np.prod(sizes))
    index = where(valid, index, total)  # out of range: dropped
    if weights is None:  # integer counts (as jax.numpy's histogramdd; histogram's are floats)
        values = lax.full(shape(index), 1, dt.default_int_dtype())
    else:
        values = ravel(_to_inexact(_array(name, weights)))
        if shape(values) != shape(index):
            raise ValueError(f"{name}: weights of shape {shape(weights)} differ from the sample's")
    counts = lax.full((total,), 0, aval_of(values).dtype).at[index].add(values, mode="drop")
    return reshape(counts, tuple(sizes))


def histogram2d(x: Any, y: Any, bins: Any = 10, range: Any = None, weights: Any = None,  # noqa: A002
                density: bool | None = None) -> tuple[Any, Any, Any]:
    """(counts, x edges, y edges) of a 2-D histogram."""
    counts, (ex, ey) = histogramdd((x, y), bins, range, weights, density)
    return counts, ex, ey


def histogramdd(sample: Any, bins: Any = 10, range: Any = None, weights: Any = None,  # noqa: A002
                density: bool | None = None) -> tuple[Any, list[Any]]:
    """(counts, [edges per dimension]) of a D-dimensional histogram; sample is (N, D) or a sequence of D arrays."""
    if isinstance(sample, (list, tuple)):
        columns = [ravel(_to_inexact(_array("histogramdd", s))) for s in sample]
    else:
        s = _to_inexact(_array("histogramdd", sample))
        if ndim(s) != 2:
            raise ValueError(f"histogramdd: sample must be (N, D), got shape {shape(s)}")
        columns = [s[:, i] for i in builtins.range(shape(s)[1])]
    dims = len(columns)
    if not dims:
        raise ValueError("histogramdd: sample needs at least one dimension (D >= 1)")
    bins_list = list(bins) if isinstance(bins, (list, tuple)) else [bins] * dims
    range_list = list(range) if range is not None else [None] * dims
    if len(bins_list) != dims or len(range_list) != dims:
        raise ValueError(f"histogramdd: bins and range need one entry per dimension ({dims})")
    edges = [histogram_bin_edges(c, b, r) for c, b, r in zip(columns, bins_list, range_list)]
    counts = _bin_counts("histogramdd", columns, edges, weights)
    if density:
        counts = divide(counts, sum(counts))
        for i, e in enumerate(edges):
            widths = subtract(e[1:], e[:-1])
            shape_ = [1] * dims
            shape_[i] = shape(widths)[0]
            counts = divide(counts, reshape(widths, tuple(shape_)))
    return counts, edges


__all__ = ["nansum", "nanprod", "nanmax", "nanmin", "nanmean", "nanvar", "nanstd", "nanargmax", "nanargmin",
           "count_nonzero", "ptp", "average", "quantile", "nanquantile", "percentile", "nanpercentile", "median",
           "nanmedian", "cov", "corrcoef", "bincount", "digitize", "histogram_bin_edges", "histogram", "histogram2d",
           "histogramdd"]
