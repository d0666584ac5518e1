"""Random samplers with jax.random's signatures and, for the same key, jax.random's values bit for bit.

Each public sampler checks its arguments (clear errors naming the function and argument), then calls a jitted
implementation with the shape and dtype static, so eager calls run one compiled program. Samplers take one key;
vmap over a batch of keys gives each key's own samples, as in JAX."""
from __future__ import annotations

import math
from functools import partial
from typing import Any, Sequence

import ml_dtypes
import numpy as np

from ember import lax
from ember import numpy as enp
from ember._api import jit
from ember._api.vmap import vmap
from ember._core import Primitive, ShapedArray, aval_of, stage_flat
from ember._core import dtypes as dt
from ember._hlo import LoweringContext, lower_into
from ember._prims import explicit
from ember._prims.shape import batch_at_front, batch_size
from ember._transforms import key_reuse
from ember.random._keys import KeyArray, _split, canonical_shape, clone, keys_of, random_bits, resolve_impl
from ember.random._prng import IMPLS, threefry_prng_impl
from ember._api.sharding import reshard, takes_out_sharding
from ember._prims.explicit import resolve
from ember._numpy.promotion import _promote
from ember._prims.elementwise import AccuracyMode
from ember._prims.special import erf_inv_p


# The transcendental functions that ember's kernel computes faster than XLA (backend_forms.KERNEL_OPS), asked of
# XLA's implementation (AccuracyMode.DEFAULT: see elementwise.kernel_or), so that the samplers draw jax.random's
# values bit for bit.
def _log1p(x: Any) -> Any:
    return lax.log1p(x, accuracy=AccuracyMode.DEFAULT)


def _tan(x: Any) -> Any:
    return lax.tan(x, accuracy=AccuracyMode.DEFAULT)


def _erf_inv(x: Any) -> Any:
    return erf_inv_p.bind(x, accuracy=AccuracyMode.DEFAULT)


_DEFAULT_GUMBEL_MODE = "low"  # (JAX's, without jax_use_high_dynamic_range_gumbel)


# ---------------------------------------------------------------------------------------------------------------
# argument checks
def _float_dtype(name: str, dtype: Any) -> np.dtype:
    dtype = dt.default_float_dtype() if dtype is None else dt.check_user_dtype(dtype, f"random.{name}")
    if not dt.is_float(dtype):
        raise ValueError(f"ember.random.{name}: dtype must be a float dtype, got {dtype.name}")
    if dt.is_sub_byte(dtype):  # (JAX's samplers draw whole bytes of bits)
        raise TypeError(f"ember.random.{name}: dtype {dtype.name} is not drawn (as in JAX: the samplers take 8-, 16-, "
                        "32- and 64-bit float dtypes); draw float32 values and convert them")
    return dtype


def _int_dtype(name: str, dtype: Any) -> np.dtype:
    dtype = dt.default_int_dtype() if dtype is None else dt.check_user_dtype(dtype, f"random.{name}")
    if not dt.is_int(dtype):
        raise TypeError(f"ember.random.{name}: dtype must be an integer dtype, got {dtype.name}")
    return dtype


def _broadcast_shapes(name: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise ValueError(f"ember.random.{name}: parameter shapes {', '.join(map(str, shapes))} do not "
                         "broadcast together") from None


def _broadcasts_to(shape: tuple[int, ...], *shapes: tuple[int, ...]) -> bool:
    """Whether shapes broadcast (with shape) to exactly shape."""
    try:
        return tuple(np.broadcast_shapes(shape, *shapes)) == shape
    except ValueError:
        return False


def _check_shape(name: str, shape: tuple[int, ...], *params: Any, names: Sequence[str] = ()) -> None:
    """The parameters must broadcast to exactly shape (as JAX)."""
    shapes = [tuple(np.shape(p)) for p in params]
    if not _broadcasts_to(shape, *shapes):
        described = ", ".join(f"{n} {s}" for n, s in zip(names or [f"arg{i}" for i in range(len(shapes))],
                                                         shapes))
        raise ValueError(f"ember.random.{name}: parameter shapes must broadcast to the shape argument {shape}, "
                         f"got {described}")


def _params_shape(name: str, shape: Any, params: dict[str, Any]) -> tuple[int, ...]:
    """shape, or (when None) the parameters' broadcast shape; checked against the parameters."""
    if shape is None:
        return _broadcast_shapes(name, *(tuple(np.shape(p)) for p in params.values()))
    shape = canonical_shape(name, shape)
    _check_shape(name, shape, *params.values(), names=list(params))
    return shape


def _param(value: Any, dtype: np.dtype, shape: tuple[int, ...]) -> Any:
    """A sampler's parameter as an array of its samples' dtype and shape (broadcast)."""
    return enp.broadcast_to(lax.convert_element_type(enp.asarray(value), dtype), shape)


def _key(name: str, key: Any) -> KeyArray:
    """The key a sampler draws with, as a KeyArray (a raw key: of the default implementation)."""
    return keys_of(name, key)[0]


def _finfo(dtype: np.dtype) -> Any:
    return ml_dtypes.finfo(dtype)


def _const(value: Any, dtype: np.dtype) -> Any:
    return lax.full((), value, dtype)


def _div_by_broadcast(a: Any, b: Any) -> Any:
    """a / b for a b that broadcasts against a, computed as a * (1 / b): what jaxlib's XLA makes of such a
    division (its simplifier rewrites A / broadcast(B)), so samples agree with jax.random bit for bit."""
    return a * (1 / b) if enp.shape(b) != enp.shape(a) else a / b


# ---------------------------------------------------------------------------------------------------------------
# uniform and the samplers built directly on it
def _uniform(data: Any, minval: Any, maxval: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """Floats in [minval, maxval): the top mantissa bits of random bits, as 1.0 <= f < 2.0, minus 1."""
    minval = lax.convert_element_type(enp.asarray(minval), dtype)
    maxval = lax.convert_element_type(enp.asarray(maxval), dtype)
    nbits, nmant = dtype.itemsize * 8, int(_finfo(dtype).nmant)
    rng_bits = 8 if nmant < 8 else nbits
    uint = np.dtype(f"uint{nbits}")
    bits = lax.convert_element_type(random_bits(data, rng_bits, shape), uint)
    float_bits = lax.shift_right_logical(bits, _const(rng_bits - nmant, uint))
    float_bits = lax.bitwise_or(float_bits, _const(int(np.array(1.0, dtype).view(uint)), uint))
    floats = lax.sub(lax.bitcast_convert_type(float_bits, dtype), _const(1.0, dtype))
    scaled = enp.reshape(floats * (maxval - minval) + minval, shape)
    return enp.maximum(minval, scaled)


_uniform_jit = jit(_uniform, static_argnums=(3, 4))


def uniform(key: Any, shape: Sequence[int] = (), dtype: Any = None, minval: Any = 0.0, maxval: Any = 1.0, *,
            out_sharding: Any = None) -> Any:
    """Uniform floats in [minval, maxval) (as jax.random.uniform); out_sharding splits the result (JAX's explicit
    sharding mode: the values do not depend on it)."""
    data = _key("uniform", key)
    dtype = _float_dtype("uniform", dtype)
    shape = canonical_shape("uniform", shape)
    _check_shape("uniform", shape, minval, maxval, names=("minval", "maxval"))
    return split_as(_uniform_jit(data, minval, maxval, shape, dtype), "uniform", out_sharding)


def split_as(out: Any, op: str, out_sharding: Any) -> Any:
    """A sampler's result split as out_sharding says (None: as it is)."""
    return out if out_sharding is None else reshard(out, resolve(f"random.{op}", out_sharding))


def _normal(data: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    low = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = _uniform(data, np.asarray(low, dtype), np.array(1.0, dtype), shape, dtype)
    return lax.mul(_const(math.sqrt(2), dtype), _erf_inv(u))


def _complex_normal(data: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """Standard complex normal values (E|z|^2 = 1): independent normal real and imaginary parts from the two halves
    of a split key, each scaled by 1/sqrt(2) (as jax.random.normal)."""
    keys = _split(data, (2,))
    part = dt.real_dtype(dtype)
    re, im = (_normal(keys[i], shape, part) for i in range(2))
    return lax.mul(lax.complex(re, im), _const(1 / math.sqrt(2), dtype))


_normal_jit = jit(_normal, static_argnums=(1, 2))
_complex_normal_jit = jit(_complex_normal, static_argnums=(1, 2))


def normal(key: Any, shape: Sequence[int] = (), dtype: Any = None, *, out_sharding: Any = None) -> Any:
    """Standard normal floats: sqrt(2) * erf_inv(u), u uniform in (-1, 1) (as jax.random.normal); for a complex
    dtype, standard complex normal values; out_sharding as uniform's."""
    data = _key("normal", key)
    if dtype is not None and dt.is_complex(dt.parse_dtype(dtype)):
        out = _complex_normal_jit(data, canonical_shape("normal", shape), dt.check_user_dtype(dtype, "random.normal"))
    else:
        out = _normal_jit(data, canonical_shape("normal", shape), _float_dtype("normal", dtype))
    return split_as(out, "normal", out_sharding)


@partial(jit, static_argnums=(3, 4))
def _truncated_normal(data: Any, lower: Any, upper: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    sqrt2 = _const(math.sqrt(2), dtype)
    lower = lax.convert_element_type(enp.asarray(lower), dtype)
    upper = lax.convert_element_type(enp.asarray(upper), dtype)
    a, b = enp.asarray(lax.erf(lower / sqrt2)), enp.asarray(lax.erf(upper / sqrt2))
    out = sqrt2 * _erf_inv(_uniform(data, a, b, shape, dtype))
    low = lax.nextafter(lax.stop_gradient(lower), _const(np.inf, dtype))
    high = lax.nextafter(lax.stop_gradient(upper), _const(-np.inf, dtype))
    return enp.clip(out, low, high)


@takes_out_sharding("random.truncated_normal")
def truncated_normal(key: Any, lower: Any, upper: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Normal floats truncated to (lower, upper), by inverting the CDF (as jax.random.truncated_normal)."""
    data = _key("truncated_normal", key)
    dtype = _float_dtype("truncated_normal", dtype)
    shape = _params_shape("truncated_normal", shape, {"lower": lower, "upper": upper})
    return _truncated_normal(data, lower, upper, shape, dtype)


@partial(jit, static_argnums=(2, 3))
def _bernoulli(data: Any, p: Any, shape: tuple[int, ...], mode: str) -> Any:
    dtype = aval_of(p).dtype
    if mode == "high":
        u = _uniform(data, 0.0, 1.0, (2,) + shape, dtype)
        u1, u2 = u[0], u[1] * _const(2.0 ** -int(_finfo(dtype).nmant), dtype)
        return u2 < p - u1
    return _uniform(data, 0.0, 1.0, shape, dtype) < p


@takes_out_sharding("random.bernoulli")
def bernoulli(key: Any, p: Any = 0.5, shape: Sequence[int] | None = None, mode: str = "low") -> Any:
    """Booleans, True with probability p (as jax.random.bernoulli; mode="high" resolves tiny p)."""
    data = _key("bernoulli", key)
    if mode not in ("high", "low"):
        raise ValueError(f"ember.random.bernoulli: got mode={mode!r}, expected 'high' or 'low'")
    p = enp.asarray(p)
    if not dt.is_float(p.dtype):
        raise TypeError(f"ember.random.bernoulli: probability p must have a floating dtype, got {p.dtype.name}")
    shape = _params_shape("bernoulli", shape, {"p": p})
    return _bernoulli(data, p, shape, mode)


def _unary_sampler(name: str, transform: Any, minval: Any = 0.0) -> Any:
    """A sampler of shape and dtype only: transform(u) of uniform u in [minval(finfo), 1)."""
    def impl(data: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        low = minval(_finfo(dtype)) if callable(minval) else minval
        return transform(_uniform(data, np.asarray(low, dtype), np.array(1.0, dtype), shape, dtype))
    compiled = jit(impl, static_argnums=(1, 2))

    def sampler(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
        data = _key(name, key)
        return compiled(data, canonical_shape(name, shape), _float_dtype(name, dtype))
    sampler.__name__ = sampler.__qualname__ = name
    return sampler


def _exponential_of(u: Any) -> Any:
    """Exponential(1) from uniform u in [0, 1): -log1p(-u)."""
    return lax.neg(_log1p(lax.neg(u)))


def _exponential(data: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    return _exponential_of(_uniform(data, 0.0, 1.0, shape, dtype))


exponential = _unary_sampler("exponential", _exponential_of)
exponential.__doc__ = "Exponential(1) floats: -log1p(-u) (as jax.random.exponential)."
laplace = _unary_sampler("laplace", lambda u: lax.mul(lax.sign(u), _log1p(lax.neg(lax.abs(u)))),
                         lambda info: -1.0 + float(info.epsneg))
laplace.__doc__ = "Laplace(0, 1) floats (as jax.random.laplace)."
logistic = _unary_sampler("logistic", lambda u: lax.sub(lax.log(u), _log1p(lax.neg(u))),
                          lambda info: float(info.tiny))
logistic.__doc__ = "Logistic(0, 1) floats: log(u) - log1p(-u) (as jax.random.logistic)."
cauchy = _unary_sampler("cauchy", lambda u: _tan(lax.mul(lax.full_like(u, np.pi), lax.sub(u, lax.full_like(
    u, 0.5)))), lambda info: float(info.eps))
cauchy.__doc__ = "Cauchy(0, 1) floats: tan(pi (u - 1/2)) (as jax.random.cauchy)."


# ---------------------------------------------------------------------------------------------------------------
# integers
def _convert_and_clip(val: Any, dtype: np.dtype) -> Any:
    """val (an integer array) clipped to what both its dtype and dtype hold, then converted to dtype."""
    ours, theirs = ml_dtypes.iinfo(val.dtype), ml_dtypes.iinfo(dtype)
    low, high = max(ours.min, theirs.min), min(ours.max, theirs.max)
    return lax.convert_element_type(enp.clip(val, _const(low, val.dtype), _const(high, val.dtype)), dtype)


@partial(jit, static_argnums=(3, 4))
def _randint(data: Any, minval: Any, maxval: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    minval, maxval = enp.asarray(minval), enp.asarray(maxval)
    if not dt.is_int(minval.dtype):
        minval = minval.astype(int)
    if not dt.is_int(maxval.dtype):
        maxval = maxval.astype(int)
    top = _convert_and_clip(enp.asarray(np.array(ml_dtypes.iinfo(dtype).max, dtype)), maxval.dtype)
    maxval_out_of_range = maxval > top
    minval, maxval = _convert_and_clip(minval, dtype), _convert_and_clip(maxval, dtype)
    nbits = ml_dtypes.iinfo(dtype).bits
    keys = _split(data, (2,))
    higher, lower = random_bits(keys[0], nbits, shape), random_bits(keys[1], nbits, shape)
    unsigned = np.dtype(f"uint{nbits}")
    span = lax.convert_element_type(maxval - minval, unsigned)
    span = enp.where(maxval <= minval, _const(1, unsigned), span)  # empty ranges give minval
    span = enp.where(maxval_out_of_range & (maxval > minval), span + _const(1, unsigned), span)
    # two draws of nbits, combined as (higher * 2**nbits + lower) mod span, for a nearly unbiased offset
    multiplier = enp.remainder(_const(2 ** (nbits // 2), unsigned), span)
    multiplier = enp.remainder(multiplier * multiplier, span)
    offset = enp.remainder(enp.remainder(higher, span) * multiplier + enp.remainder(lower, span), span)
    return minval + lax.convert_element_type(offset, dtype)


@takes_out_sharding("random.randint")
def randint(key: Any, shape: Sequence[int], minval: Any, maxval: Any, dtype: Any = None) -> Any:
    """Integers in [minval, maxval) (as jax.random.randint; bounds are clipped to dtype's range)."""
    data = _key("randint", key)
    dtype = _int_dtype("randint", dtype)
    shape = canonical_shape("randint", shape)
    _check_shape("randint", shape, minval, maxval, names=("minval", "maxval"))
    for name, v in (("minval", minval), ("maxval", maxval)):
        if not isinstance(v, (int, float)) and not (hasattr(v, "dtype") or isinstance(v, (list, np.ndarray))):
            raise TypeError(f"ember.random.randint: {name} must be a number or an array, got {type(v).__name__}")
    info = ml_dtypes.iinfo(dtype)
    if info.bits < 32:  # as JAX: sample in int32, with the bounds clipped to the narrow dtype
        minval = enp.clip(enp.asarray(minval).astype("int32"), int(info.min), int(info.max))
        maxval = enp.clip(enp.asarray(maxval).astype("int32"), int(info.min), int(info.max) + 1)
        return _randint(data, minval, maxval, shape, np.dtype("int32")).astype(dtype)
    return _randint(data, minval, maxval, shape, dtype)


# ---------------------------------------------------------------------------------------------------------------
# permutations and choices
def _shuffle(data: Any, x: Any, axis: int) -> Any:
    """x shuffled along axis: sorted by random 32-bit keys, in enough rounds that ties are unlikely."""
    size = math.prod(aval_of(x).shape)
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(2 ** 32 - 1)))
    for _ in range(rounds):
        keys = _split(data, (2,))
        data = keys[0]
        _, x = lax.sort_key_val(random_bits(keys[1], 32, aval_of(x).shape), x, axis)
    return x


_shuffle_jit = jit(_shuffle, static_argnums=2)


@partial(jit, static_argnums=2)
def _permute_along(data: Any, x: Any, axis: int) -> Any:
    order = _shuffle(data, enp.arange(aval_of(x).shape[axis]), 0)
    return enp.take(x, order, axis, unique_indices=True)


def _concrete_int(name: str, arg: str, x: Any) -> int:
    try:
        return int(np.asarray(x))
    except Exception:  # noqa: BLE001 - a tracer
        raise TypeError(f"ember.random.{name}: {arg} must be a concrete integer (it sets the output's shape), "
                        "got a traced value") from None


@takes_out_sharding("random.permutation")
def permutation(key: Any, x: Any, axis: int = 0, independent: bool = False) -> Any:
    """A random permutation of range(x) (x an int), or of x's entries along axis (as jax.random.permutation)."""
    data = _key("permutation", key)
    if np.ndim(x) == 0:
        if not (isinstance(x, int) or hasattr(x, "dtype") and np.dtype(x.dtype).kind in "iu"):
            raise TypeError("ember.random.permutation: x must be an integer or at least 1-dimensional, got "
                            f"{type(x).__name__}")
        return _shuffle_jit(data, enp.arange(_concrete_int("permutation", "x", x)), 0)
    x = enp.asarray(x)
    axis = _axis("permutation", axis, x.ndim)
    if independent or x.ndim == 1:
        return _shuffle_jit(data, x, axis)
    return _permute_along(data, x, axis)


def _axis(name: str, axis: int, ndim: int) -> int:
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        raise ValueError(f"ember.random.{name}: axis {axis} is out of bounds for an array of {ndim} dimensions")
    return axis % max(ndim, 1)


def choice(key: Any, a: Any, shape: Sequence[int] = (), replace: bool = True, p: Any = None, axis: int = 0,
           mode: str | None = None) -> Any:
    """Random entries of a (or of range(a), a an int) along axis, with or without replacement, with
    probabilities p (as jax.random.choice)."""
    data = _key("choice", key)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"ember.random.choice: shape must be a sequence, got {shape!r}")
    shape = canonical_shape("choice", shape)
    arr = enp.asarray(a)
    if arr.ndim == 0:
        n_inputs = _concrete_int("choice", "a", a)
    else:
        axis = _axis("choice", axis, arr.ndim)
        n_inputs = arr.shape[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return enp.zeros(shape, dtype=arr.dtype)
    if n_inputs <= 0:
        raise ValueError("ember.random.choice: a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ValueError(f"ember.random.choice: cannot take a larger sample (size {n_draws}) than the population "
                         f"(size {n_inputs}) when replace=False")
    if p is None:
        if replace:
            ind = randint(data, shape, 0, n_inputs)
            result = ind if arr.ndim == 0 else enp.take(arr, ind, axis)
        else:
            perm = permutation(data, n_inputs if arr.ndim == 0 else arr, axis)
            result = lax.slice_in_dim(perm, 0, n_draws, axis=0 if arr.ndim == 0 else axis)
    else:
        p_arr = enp.asarray(p)
        if not dt.is_float(p_arr.dtype):
            p_arr = p_arr.astype(dt.default_float_dtype())
        if p_arr.shape != (n_inputs,):
            raise ValueError(f"ember.random.choice: p must be None or a 1-D vector with the same size as "
                             f"a.shape[axis]; p has shape {p_arr.shape} and a.shape[axis] is {n_inputs}")
        ind = _choice_weighted(data, p_arr, shape, replace, mode or _DEFAULT_GUMBEL_MODE, n_draws)
        result = ind if arr.ndim == 0 else enp.take(arr, ind, axis)
    return result.reshape(shape if arr.ndim == 0 else arr.shape[:axis] + tuple(shape) + arr.shape[axis + 1:])


@partial(jit, static_argnums=(2, 3, 4, 5))
def _choice_weighted(data: Any, p: Any, shape: tuple[int, ...], replace: bool, mode: str, n_draws: int) -> Any:
    if replace:
        p_cuml = enp.cumsum(p)
        r = p_cuml[-1] * (1 - _uniform(data, 0.0, 1.0, shape, p_cuml.dtype))
        return enp.searchsorted(p_cuml, r).astype(int)
    g = _gumbel(data, (p.shape[0],), p.dtype, mode) + enp.log(p)
    return lax.top_k(g, n_draws)[1].astype(int)


# ---------------------------------------------------------------------------------------------------------------
# Gumbel and categorical
def _safe_int_to_float(bits: Any) -> Any:
    """A pair of uint32 words (hi, lo) as the float32 in [0, 1) they spell as a 64-bit fraction, normalised so
    that small values keep full precision."""
    info = _finfo(np.dtype(np.float32))
    u32 = np.dtype(np.uint32)
    hi, lo = bits[0], bits[1]
    hiclz, loclz = lax.clz(hi), lax.clz(lo)
    all_high_zero = hiclz == _const(32, u32)
    mantissa = lax.bitwise_or(lax.shift_left(hi, hiclz), enp.where(
        all_high_zero, lax.shift_left(lo, loclz), lax.shift_right_logical(lo, _const(32, u32) - hiclz)))
    mantissa = lax.shift_right_logical(mantissa, _const(32 - int(info.nmant) - 1, u32))
    mantissa = lax.bitwise_and(mantissa, _const((1 << int(info.nmant)) - 1, u32))
    exponent = _const(-int(info.minexp), u32) - enp.where(all_high_zero, _const(32, u32) + loclz, hiclz)
    exponent = lax.shift_left(exponent, _const(int(info.nmant), u32))
    exponent = lax.bitwise_and(exponent, _const((1 << 30) - (1 << (int(info.nmant) - 1)), u32))
    return lax.bitcast_convert_type(lax.bitwise_or(exponent, mantissa), np.float32)


def _gumbel(data: Any, shape: tuple[int, ...], dtype: np.dtype, mode: str) -> Any:
    info = _finfo(dtype)
    if dtype == np.float32 and mode == "highest":
        u32 = np.dtype(np.uint32)
        bits = random_bits(data, 32, (2,) + shape)
        flipped = lax.bitwise_not(bits)
        lo_bits = flipped[1]
        carry = enp.stack([(lo_bits == _const(0xFFFFFFFF, u32)).astype(u32), enp.ones_like(lo_bits)])
        flipped = flipped + carry
        flip_mask = bits[0] < _const(1 << 31, u32)
        x = _safe_int_to_float(enp.where(flip_mask, bits, flipped))
        return enp.where(flip_mask, -enp.log(-_log1p(-x)), -enp.log(-enp.log(x)))
    if mode in ("high", "highest"):
        u = _uniform(data, 0.0, 1.0, (2,) + shape, dtype)
        high, low = u[0], u[1]
        x = enp.where(high >= 0.5, high, high + _const(2.0 ** -int(info.nmant), dtype) * low
                      + _const(float(info.tiny), dtype))
        return -enp.log(-_log1p(-x))
    return -enp.log(-enp.log(_uniform(data, np.array(info.tiny, dtype), np.array(1.0, dtype), shape, dtype)))


_gumbel_jit = jit(_gumbel, static_argnums=(1, 2, 3))


def _gumbel_mode(name: str, mode: str | None) -> str:
    mode = _DEFAULT_GUMBEL_MODE if mode is None else mode
    if mode not in ("highest", "high", "low"):
        raise ValueError(f"ember.random.{name}: mode must be 'low', 'high' or 'highest', got {mode!r}")
    return mode


def gumbel(key: Any, shape: Sequence[int] = (), dtype: Any = None, mode: str | None = None) -> Any:
    """Gumbel(0, 1) floats: -log(-log(u)) (as jax.random.gumbel; mode "high"/"highest" for the far tail)."""
    data = _key("gumbel", key)
    return _gumbel_jit(data, canonical_shape("gumbel", shape), _float_dtype("gumbel", dtype),
                       _gumbel_mode("gumbel", mode))


@partial(jit, static_argnums=(2, 3, 4, 5, 6))
def _categorical(data: Any, logits: Any, shape: tuple[int, ...], batch_shape: tuple[int, ...], axis: int,
                 replace: bool, mode: str) -> Any:
    prefix = shape[:len(shape) - len(batch_shape)]
    ndim = logits.ndim
    if replace:
        axis_neg = axis - ndim if axis >= 0 else axis
        logits_shape = list(shape[len(shape) - len(batch_shape):])
        logits_shape.insert(axis_neg % ndim, logits.shape[axis_neg])
        noise = _gumbel(data, (*prefix, *logits_shape), logits.dtype, mode)
        return enp.argmax(noise + enp.expand_dims(logits, tuple(range(len(prefix)))), axis=axis_neg)
    logits = logits + _gumbel(data, logits.shape, logits.dtype, mode)
    k = math.prod(prefix)
    _, indices = lax.top_k(enp.moveaxis(logits, axis, -1), k)
    return enp.reshape(enp.moveaxis(indices, -1, 0), shape)


@takes_out_sharding("random.categorical")
def categorical(key: Any, logits: Any, axis: int = -1, shape: Sequence[int] | None = None, replace: bool = True,
                mode: str | None = None) -> Any:
    """Category indices drawn with probabilities softmax(logits) along axis (as jax.random.categorical)."""
    data = _key("categorical", key)
    logits = enp.asarray(logits)
    if not dt.is_float(logits.dtype):
        logits = logits.astype(dt.default_float_dtype())
    if logits.ndim == 0:
        raise ValueError("ember.random.categorical: logits must have at least one dimension")
    axis = _axis("categorical", axis, logits.ndim) if axis >= 0 else axis
    if not -logits.ndim <= axis < logits.ndim:
        raise ValueError(f"ember.random.categorical: axis {axis} is out of bounds for logits of shape "
                         f"{logits.shape}")
    batch_shape = tuple(np.delete(np.array(logits.shape, dtype=np.int64), axis).tolist())
    if shape is None:
        shape = batch_shape
    else:
        shape = canonical_shape("categorical", shape)
        _check_shape("categorical", shape, np.empty(batch_shape), names=("logits' batch shape",))
    if not replace:
        k = math.prod(shape[:len(shape) - len(batch_shape)])
        if k > logits.shape[axis]:
            raise ValueError(f"ember.random.categorical: the number of samples without replacement ({k}) cannot "
                             f"exceed the number of categories ({logits.shape[axis]})")
    return _categorical(data, logits, shape, batch_shape, axis, bool(replace), _gumbel_mode("categorical", mode))


def _rademacher(data: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    b = (_uniform(data, 0.0, 1.0, shape, dt.default_float_dtype()) < 0.5).astype(dtype)
    return (2 * b - 1).astype(dtype)


_rademacher_jit = jit(_rademacher, static_argnums=(1, 2))


def rademacher(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """-1 or +1 with equal probability (as jax.random.rademacher; default dtype int, or a float dtype)."""
    data = _key("rademacher", key)
    dtype = dt.default_int_dtype() if dtype is None else dt.check_user_dtype(dtype, "random.rademacher")
    if not (dt.is_int(dtype) or dt.is_float(dtype)):  # (JAX's takes float dtypes too: -1.0 or 1.0)
        raise TypeError(f"ember.random.rademacher: dtype must be an integer or floating dtype, got {dtype.name}")
    return _rademacher_jit(data, canonical_shape("rademacher", shape), dtype)


# ---------------------------------------------------------------------------------------------------------------
# gamma and its family: Marsaglia and Tsang's method per element, differentiable by implicit reparameterisation
def _gamma_one(data: Any, alpha: Any, log_space: bool) -> Any:
    """One Gamma(alpha, 1) sample (its log when log_space) for a scalar alpha."""
    dtype = aval_of(alpha).dtype
    one, zero = _const(1.0, dtype), _const(0.0, dtype)
    boost_mask = alpha >= one
    alpha_orig = alpha
    alpha = enp.where(boost_mask, alpha, alpha + one)  # alpha < 1: sample alpha + 1, then scale by u ** (1/alpha)
    d = alpha - _const(1.0 / 3.0, dtype)
    c = _const(1.0 / 3.0, dtype) / lax.sqrt(d)

    def rejected(state: Any) -> Any:
        _, x, v, u = state
        squeeze = u >= one - _const(0.0331, dtype) * (x * x)
        log_test = lax.log(u) >= x * _const(0.5, dtype) + d * ((one - v) + lax.log(v))
        return squeeze & log_test

    def draw(state: Any) -> Any:
        keys = _split(state[0], (3,))

        def next_normal(s: Any) -> Any:
            pair = _split(s[0], (2,))
            x = _normal(pair[1], (), dtype)
            return pair[0], x, one + x * c

        _, x, v = lax.while_loop(lambda s: s[2] <= zero, next_normal, (keys[1], zero, _const(-1.0, dtype)))
        return keys[0], x * x, v * v * v, _uniform(keys[2], 0.0, 1.0, (), dtype)

    keys = _split(data, (2,))
    _, _, v, _ = lax.while_loop(rejected, draw, (keys[0], zero, one, _const(2.0, dtype)))
    if log_space:
        log_samples = _log1p(lax.neg(_uniform(keys[1], 0.0, 1.0, (), dtype)))  # -exponential()
        log_boost = enp.where(boost_mask | (log_samples == zero), zero, log_samples * (one / alpha_orig))
        return lax.log(d) + lax.log(v) + log_boost
    samples = one - _uniform(keys[1], 0.0, 1.0, (), dtype)
    boost = enp.where(boost_mask, one, lax.pow(samples, one / alpha_orig))
    return d * v * boost


# random_gamma(key_data, a; log_space[, impl]): a Gamma(a, 1) sample per element of a (its log with log_space), as
# jax.random's random_gamma_p. key_data is the raw data of keys of shape batch (uint32[*batch, 2] for Threefry), a is
# float[*batch, *rest]: each key draws the samples of its block a[*batch] (split into one key per element, row-major),
# so a single key draws for the whole of a. impl is the keys' implementation (absent for threefry2x32; a name, or the
# PRNGImpl object of one defined by a user). Differentiable in a by implicit reparameterisation:
# d sample / d a = random_gamma_grad(a, sample) (JAX's rule).
class _KeyedPrimitive(Primitive):
    """A primitive whose first operand is key data and whose `impl` parameter is the keys' implementation: bind
    takes a typed key array (JAX's random_gamma_p takes one) or raw key data (of the default implementation, or of
    the `impl` given: a transformation binding it again)."""

    def bind(self, key: Any, *args: Any, **params: Any) -> Any:
        if "impl" in params and not isinstance(key, KeyArray):
            keys = KeyArray(key, resolve_impl(self.name, params["impl"]))
        else:
            keys = keys_of(self.name, key, allow_batched=True)[0]
        params["impl"] = keys._impl.name if IMPLS.get(keys._impl.name) is keys._impl else keys._impl
        return super().bind(key_reuse.consume(keys._data), *args, **params)


random_gamma_p = _KeyedPrimitive("random_gamma", checks=())
random_gamma_p.def_rule("sharding_rule", explicit.same_as(1))


@random_gamma_p.def_rule("abstract_eval")
def _random_gamma_abstract_eval(key: ShapedArray, a: ShapedArray, *, log_space: bool, impl: Any) -> ShapedArray:
    impl = resolve_impl("random_gamma", impl)
    key_shape = tuple(impl.key_shape)
    batch = key.shape[:key.ndim - len(key_shape)]
    if key.dtype != dt.uint32 or key.ndim < len(key_shape) or key.shape[len(batch):] != key_shape:
        raise TypeError(f"random_gamma: the key data must be uint32[..., {', '.join(map(str, key_shape))}] (one "
                        f"{impl.name} key per block of a), got {key.str_short()}")
    if not dt.is_float(a.dtype):
        raise TypeError(f"random_gamma: a must be a float array, got {a.str_short()}")
    if a.shape[:len(batch)] != batch:
        raise TypeError(f"random_gamma: the keys' shape {batch} must lead a's shape, got keys "
                        f"{key.str_short()} and a {a.str_short()}")
    return ShapedArray(a.shape, a.dtype, a.weak_type)


def _keyed_samples(data: Any, a: Any, log_space: bool, impl: Any) -> Any:
    """The samples of a: each key (of the leading key dimensions) split into one key per element of its block of a,
    every element drawn with its own key: all at once (vmap) with Threefry keys, one after the other (lax.map)
    with others, whose RngBitGenerator draws for a whole batch from its first key under vmap (as JAX's)."""
    impl = resolve_impl("random_gamma", impl)
    keys = KeyArray(data, impl)
    count = math.prod(aval_of(a).shape[keys.ndim:])
    keys = vmap(lambda k: _split(k, (count,)))(keys.reshape(-1)).reshape(-1)
    alphas = enp.reshape(a, (-1,))
    one = partial(_gamma_one, log_space=log_space)
    if impl is threefry_prng_impl:
        samples = vmap(one)(keys, alphas)
    else:
        samples = lax.map(lambda pair: one(*pair), (keys, alphas))
    return enp.reshape(samples, aval_of(a).shape)


@random_gamma_p.def_rule("lowering")
def _random_gamma_lowering(ctx: LoweringContext, key: str, a: str, *, log_space: bool, impl: Any) -> list[str]:
    ir = stage_flat(lambda k, x: [_keyed_samples(k, x, log_space, impl)], list(ctx.avals_in))
    return lower_into(ctx.emitter, ir, [key, a])  # (the IR's constants, the split counters, become the module's)


def _gamma_slope(a: Any, sample: Any, log_space: bool) -> Any:
    """d sample / d a at the sample (of its log, with log_space; where exp(log sample) is 0 it is taken as the
    smallest normal float, as JAX's)."""
    if not log_space:
        return lax.random_gamma_grad(a, sample)
    x = lax.exp(sample)
    x = lax.select(lax.eq(x, lax.full_like(x, 0)), lax.full_like(x, float(_finfo(aval_of(x).dtype).tiny)), x)
    return lax.random_gamma_grad(a, x) / x


@random_gamma_p.def_rule("jvp")
def _random_gamma_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, log_space: bool, impl: Any
                      ) -> tuple[list[Any], list[Any]]:
    key, a = primals
    out = random_gamma_p.bind(key, a, log_space=log_space, impl=impl)
    if tangents[1] is None:
        return [out], [None]
    return [out], [lax.mul(tangents[1], _gamma_slope(a, out, log_space))]


@random_gamma_p.def_rule("vjp")
def _random_gamma_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, log_space: bool,
                      impl: Any) -> list[Any]:
    if cts[0] is None or not needs[1]:
        return [None, None]
    return [None, lax.mul(cts[0], _gamma_slope(ins[1], outs[0], log_space))]


@random_gamma_p.def_rule("batching")
def _random_gamma_batching(args: Sequence[Any], dims: Sequence[Any], *, log_space: bool, impl: Any
                           ) -> tuple[list[Any], list[Any]]:
    """The batch dimension leads the keys and a (an unbatched one broadcast): one more key dimension."""
    size = batch_size(args, dims)
    key, a = (batch_at_front(x, d, size) for x, d in zip(args, dims))
    return [random_gamma_p.bind(key, a, log_space=log_space, impl=impl)], [0]


def _random_gamma(keys: Any, a: Any, log_space: bool) -> Any:
    return random_gamma_p.bind(keys, a, log_space=log_space)


@partial(jit, static_argnums=(2, 3, 4))
def _gamma(data: Any, a: Any, shape: tuple[int, ...], dtype: np.dtype, log_space: bool) -> Any:
    a = _param(a, dtype, shape)
    return _random_gamma(data, a, log_space)


def _gamma_args(name: str, key: Any, a: Any, shape: Any, dtype: Any) -> tuple[Any, tuple[int, ...], np.dtype]:
    data = _key(name, key)
    dtype = _float_dtype(name, dtype)
    shape = _params_shape(name, shape, {"a": a})
    return data, shape, dtype


@takes_out_sharding("random.gamma")
def gamma(key: Any, a: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Gamma(a, 1) floats, differentiable in a (as jax.random.gamma)."""
    data, shape, dtype = _gamma_args("gamma", key, a, shape, dtype)
    return _gamma(data, a, shape, dtype, False)


def loggamma(key: Any, a: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """log of Gamma(a, 1) floats, accurate for small a (as jax.random.loggamma)."""
    data, shape, dtype = _gamma_args("loggamma", key, a, shape, dtype)
    return _gamma(data, a, shape, dtype, True)


@partial(jit, static_argnums=(3, 4))
def _beta(data: Any, a: Any, b: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    keys = _split(data, (2,))
    a = _param(a, dtype, shape)
    b = _param(b, dtype, shape)
    log_a, log_b = _random_gamma(keys[0], a, True), _random_gamma(keys[1], b, True)
    log_max = enp.maximum(log_a, log_b)
    ga, gb = enp.exp(log_a - log_max), enp.exp(log_b - log_max)
    return ga / (ga + gb)


def beta(key: Any, a: Any, b: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Beta(a, b) floats, differentiable in a and b (as jax.random.beta)."""
    data = _key("beta", key)
    dtype = _float_dtype("beta", dtype)
    shape = _params_shape("beta", shape, {"a": a, "b": b})
    return _beta(data, a, b, shape, dtype)


def _softmax_last(x: Any) -> Any:
    unnormalized = enp.exp(x - lax.stop_gradient(enp.max(x, axis=-1, keepdims=True)))
    return _div_by_broadcast(unnormalized, enp.sum(unnormalized, axis=-1, keepdims=True))


@partial(jit, static_argnums=(2, 3))
def _dirichlet(data: Any, alpha: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    alpha = lax.convert_element_type(enp.asarray(alpha), dtype)
    full = shape + alpha.shape[-1:]
    return _softmax_last(_random_gamma(data, enp.broadcast_to(alpha, full), True))


def dirichlet(key: Any, alpha: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Dirichlet(alpha) vectors along the last axis (as jax.random.dirichlet)."""
    data = _key("dirichlet", key)
    dtype = _float_dtype("dirichlet", dtype)
    if np.ndim(alpha) < 1:
        raise ValueError(f"ember.random.dirichlet: alpha must have at least one dimension, got alpha.ndim == "
                         f"{np.ndim(alpha)}")
    batch = tuple(np.shape(alpha)[:-1])
    if shape is None:
        shape = batch
    else:
        shape = canonical_shape("dirichlet", shape)
        _check_shape("dirichlet", shape, np.empty(batch), names=("alpha's batch shape",))
    return _dirichlet(data, alpha, shape, dtype)


# ---------------------------------------------------------------------------------------------------------------
# Poisson: Knuth's multiplication method for small rates, Hormann's transformed rejection (PTRS) for large ones
def _poisson_knuth(data: Any, lam: Any, shape: tuple[int, ...], dtype: np.dtype, max_iters: int) -> Any:
    def body(carry: Any) -> Any:
        i, k, keys, log_prod = carry
        pair = _split(keys, (2,))
        k = enp.where(log_prod > -lam, k + 1, k)
        u = _uniform(pair[1], 0.0, 1.0, shape, np.dtype(np.float32))
        return i + 1, k, pair[0], log_prod + enp.log(u)

    def cond(carry: Any) -> Any:
        return enp.any(carry[3] > -lam) & (carry[0] < max_iters)

    init = (enp.asarray(0), enp.zeros(shape, dtype), data, enp.zeros(shape, np.float32))
    return (lax.while_loop(cond, body, init)[1] - 1).astype(dtype)


def _poisson_rejection(data: Any, lam: Any, shape: tuple[int, ...], dtype: np.dtype, max_iters: int) -> Any:
    log_lam = lax.log(lam)
    b = 0.931 + 2.53 * lax.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(carry: Any) -> Any:
        i, k_out, accepted, keys = carry
        three = _split(keys, (3,))
        u = _uniform(three[1], 0.0, 1.0, shape, lam.dtype) - 0.5
        v = _uniform(three[2], 0.0, 1.0, shape, lam.dtype)
        u_shifted = 0.5 - enp.abs(u)
        k = lax.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = lax.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        t = -lam + k * log_lam - lax.lgamma(k + 1)
        accept1 = (u_shifted >= 0.07) & (v <= v_r)
        reject = (k < 0) | (u_shifted < 0.013) & (v > u_shifted)
        accept = accept1 | ~reject & (s <= t)
        return i + 1, enp.where(accept, k, k_out), accepted | accept, three[0]

    def cond(carry: Any) -> Any:
        return enp.any(~carry[2]) & (carry[0] < max_iters)

    init = (enp.asarray(0), enp.full(shape, -1.0, lam.dtype), enp.zeros(shape, bool), data)
    return lax.while_loop(cond, body, init)[1].astype(dtype)


@partial(jit, static_argnums=(2, 3))
def _poisson(data: Any, lam: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    use_knuth = (lam != lam) | (lam < 10)
    lam_knuth = enp.where(use_knuth, lam, enp.zeros_like(lam))
    lam_rejection = enp.where(use_knuth, enp.full_like(lam, 1e5), lam)
    max_iters = int(np.iinfo(dtype).max)
    # (both methods draw from the key, and each element takes one method's draw: to the key-reuse checker, the
    # second one has a fresh copy; JAX's checker misses the reuse, reading the while loops' operands off by their
    # predicates' constants; binomial's two methods likewise)
    result = enp.where(use_knuth, _poisson_knuth(data, lam_knuth, shape, dtype, max_iters),
                       _poisson_rejection(clone(data), lam_rejection, shape, dtype, max_iters))
    return enp.where(lam == 0, enp.zeros_like(result), result)


def poisson(key: Any, lam: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Poisson(lam) integers (as jax.random.poisson)."""
    data = _key("poisson", key)
    if data._impl is not threefry_prng_impl:  # (as JAX: its Poisson sampler is written for Threefry keys only)
        raise NotImplementedError(f"ember.random.poisson is only implemented for the threefry2x32 RNG, not "
                                  f"{data._impl.name} keys (as jax.random.poisson)")
    dtype = _int_dtype("poisson", dtype)
    shape = _params_shape("poisson", shape, {"lam": lam})
    lam = lax.convert_element_type(enp.broadcast_to(enp.asarray(lam), shape), np.float32)
    return _poisson(data, lam, shape, dtype)


# ---------------------------------------------------------------------------------------------------------------
# more continuous distributions built on the ones above (as in jax.random)
@partial(jit, static_argnums=(2, 3))
def _generalized_normal(data: Any, p: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    keys = _split(data, (2,))
    g = _random_gamma(keys[0], enp.broadcast_to(lax.convert_element_type(1 / enp.asarray(p), dtype), shape), False)
    r = _rademacher(keys[1], shape, dtype)
    return r * g ** (1 / p)


def generalized_normal(key: Any, p: float, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Generalized normal floats with density proportional to exp(-|x|**p) (as jax.random.generalized_normal)."""
    data = _key("generalized_normal", key)
    return _generalized_normal(data, p, canonical_shape("generalized_normal", shape),
                               _float_dtype("generalized_normal", dtype))


@partial(jit, static_argnums=(2, 3, 4))
def _ball(data: Any, p: Any, d: int, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    keys = _split(data, (2,))
    g = _generalized_normal(keys[0], p, (*shape, d), dtype)
    e = _exponential(keys[1], shape, dtype)
    return _div_by_broadcast(g, (((enp.abs(g) ** p).sum(-1) + e) ** (1 / p))[..., None])


def ball(key: Any, d: int, p: float = 2, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Points uniform in the d-dimensional unit p-norm ball (as jax.random.ball)."""
    data = _key("ball", key)
    d = _concrete_int("ball", "d", d)
    return _ball(data, p, d, canonical_shape("ball", shape), _float_dtype("ball", dtype))


@partial(jit, static_argnums=(2, 3))
def _pareto(data: Any, b: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    b = lax.convert_element_type(enp.asarray(b), dtype)
    return lax.exp(_div_by_broadcast(_exponential(data, shape, dtype), b))


def pareto(key: Any, b: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Pareto(b) floats (as jax.random.pareto)."""
    data = _key("pareto", key)
    return _pareto(data, b, _params_shape("pareto", shape, {"b": b}), _float_dtype("pareto", dtype))


@partial(jit, static_argnums=(2, 3))
def _t(data: Any, df: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    df = lax.convert_element_type(enp.asarray(df), dtype)
    keys = _split(data, (2,))
    n = _normal(keys[0], shape, dtype)
    half_df = df / 2
    g = _random_gamma(keys[1], enp.broadcast_to(half_df, shape), False)
    return n * enp.sqrt(half_df / g)


def t(key: Any, df: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Student's t floats with df degrees of freedom (as jax.random.t)."""
    data = _key("t", key)
    return _t(data, df, _params_shape("t", shape, {"df": df}), _float_dtype("t", dtype))


@partial(jit, static_argnums=(2, 3))
def _chisquare(data: Any, df: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    half_df = lax.convert_element_type(enp.asarray(df), dtype) / 2
    return enp.exp(_random_gamma(data, enp.broadcast_to(half_df, shape), True)) * 2


def chisquare(key: Any, df: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Chi-square floats with df degrees of freedom (as jax.random.chisquare)."""
    data = _key("chisquare", key)
    return _chisquare(data, df, _params_shape("chisquare", shape, {"df": df}), _float_dtype("chisquare", dtype))


@partial(jit, static_argnums=(2, 3))
def _lognormal(data: Any, sigma: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    return lax.exp(_normal(data, shape, dtype) * lax.convert_element_type(enp.asarray(sigma), dtype))


def lognormal(key: Any, sigma: Any = np.float32(1), shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """exp(sigma * normal) floats (as jax.random.lognormal)."""
    data = _key("lognormal", key)
    return _lognormal(data, sigma, _params_shape("lognormal", shape, {"sigma": sigma}),
                      _float_dtype("lognormal", dtype))


# ---------------------------------------------------------------------------------------------------------------
# F, Maxwell, Weibull, Rayleigh, Wald, geometric, triangular, binomial and multinomial (as in jax.random)
def _check_safe_to_cast(name: str, dtype: np.dtype, params: dict[str, Any]) -> None:
    """Each parameter must convert to dtype without losing its kind or width under the promotion rules (a Python
    float always may; a float64 array may not become float32 with enable_x64), as JAX's checks: a
    TypePromotionError (a ValueError)."""
    for arg, value in params.items():
        operand = value if dt.is_python_scalar(value) or hasattr(value, "dtype") else np.asarray(value)
        if dt.result_type(operand, dtype) != dtype:
            raise dt.TypePromotionError(f"ember.random.{name}: cannot safely cast {arg} of dtype "
                                        f"{dt.dtype_and_weak(operand)[0].name} to {dtype.name}")


def _check_arraylike(name: str, params: dict[str, Any]) -> None:
    """Parameters must be arrays or scalars (not lists), as JAX's check_arraylike: a TypeError."""
    for arg, value in params.items():
        if not (hasattr(value, "dtype") or dt.is_python_scalar(value) or np.isscalar(value)):
            raise TypeError(f"ember.random.{name}: {arg} must be an array or a scalar, got {type(value).__name__}")


@partial(jit, static_argnums=(3, 4))
def _f(data: Any, dfnum: Any, dfden: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """(chisquare(dfnum) / dfnum) / (chisquare(dfden) / dfden), the first key for the denominator, as JAX's."""
    dfnum = lax.convert_element_type(enp.asarray(dfnum), dtype)
    dfden = lax.convert_element_type(enp.asarray(dfden), dtype)
    keys = _split(data, (2,))
    return (_chisquare(keys[1], dfnum, shape, dtype) / dfnum) / (_chisquare(keys[0], dfden, shape, dtype) / dfden)


def _float_sampler_args(name: str, key: Any, shape: Any, dtype: Any, params: dict[str, Any]
                        ) -> tuple[Any, tuple[int, ...], np.dtype]:
    """(the key's data, the shape, the float dtype) of a float sampler with these parameters, checked: they must
    broadcast to shape and convert to dtype safely."""
    data = _key(name, key)
    dtype = _float_dtype(name, dtype)
    shape = _params_shape(name, shape, params)
    _check_safe_to_cast(name, dtype, params)
    return data, shape, dtype


@takes_out_sharding("random.f")
def f(key: Any, dfnum: Any, dfden: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """F-distributed floats with dfnum and dfden degrees of freedom: (chisquare(dfnum) / dfnum) /
    (chisquare(dfden) / dfden) (as jax.random.f; dfnum and dfden may broadcast to shape, where JAX's accept
    scalars and arrays of the whole shape only)."""
    data, shape, dtype = _float_sampler_args("f", key, shape, dtype, {"dfnum": dfnum, "dfden": dfden})
    return _f(data, dfnum, dfden, shape, dtype)


def _maxwell(data: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """The norm of three standard normals (the last axis of a (*shape, 3) draw), as JAX's jnp.linalg.norm."""
    return enp.linalg.norm(_normal(data, (*shape, 3), dtype), axis=-1)


_maxwell_jit = jit(_maxwell, static_argnums=(1, 2))


@takes_out_sharding("random.maxwell")
def maxwell(key: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Maxwell(1) floats: the norm of three independent standard normals (as jax.random.maxwell)."""
    data = _key("maxwell", key)
    return _maxwell_jit(data, canonical_shape("maxwell", shape), _float_dtype("maxwell", dtype))


@partial(jit, static_argnums=(3, 4))
def _double_sided_maxwell(data: Any, loc: Any, scale: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    keys = _split(data, (2,))
    return _rademacher(keys[1], shape, dtype) * _maxwell(keys[0], shape, dtype) * scale + loc


def double_sided_maxwell(key: Any, loc: Any, scale: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """loc + scale * (a random sign times a Maxwell(1) float) (as jax.random.double_sided_maxwell). As JAX's, the
    result has shape shape + (the broadcast shape of loc and scale), shape defaulting to that broadcast shape."""
    name = "double_sided_maxwell"
    data = _key(name, key)
    dtype = _float_dtype(name, dtype)
    shape = canonical_shape(name, shape)
    params_shape = _broadcast_shapes(name, tuple(np.shape(loc)), tuple(np.shape(scale)))
    return _double_sided_maxwell(data, loc, scale, (shape or params_shape) + params_shape, dtype)


@partial(jit, static_argnums=(3, 4))
def _weibull_min(data: Any, scale: Any, concentration: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    u = _uniform(data, 0.0, 1.0, shape, dtype)
    return enp.power(_exponential_of(u), 1.0 / concentration) * scale  # the inverse of Weibull's CDF


def weibull_min(key: Any, scale: Any, concentration: Any, shape: Sequence[int] = (), dtype: Any = None) -> Any:
    """Weibull floats: scale * exponential ** (1 / concentration) (as jax.random.weibull_min; as JAX's, the
    parameters broadcast against shape, which does not limit them)."""
    data = _key("weibull_min", key)
    dtype = _float_dtype("weibull_min", dtype)
    shape = canonical_shape("weibull_min", shape)
    shapes = (shape, tuple(np.shape(scale)), tuple(np.shape(concentration)))
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:  # (a TypeError, as JAX's multiplication of the samples by scale raises)
        raise TypeError(f"ember.random.weibull_min: shape {shape}, scale's shape {shapes[1]} and concentration's "
                        f"shape {shapes[2]} do not broadcast together") from None
    return _weibull_min(data, scale, concentration, shape, dtype)


@partial(jit, static_argnums=(2, 3))
def _rayleigh(data: Any, scale: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    u = _uniform(data, 0.0, 1.0, shape, dtype)
    scale = _param(scale, dtype, shape)
    return scale * lax.sqrt(lax.log(u) * _const(-2.0, dtype))


@takes_out_sharding("random.rayleigh")
def rayleigh(key: Any, scale: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Rayleigh floats: scale * sqrt(-2 log u) (as jax.random.rayleigh)."""
    data, shape, dtype = _float_sampler_args("rayleigh", key, shape, dtype, {"scale": scale})
    return _rayleigh(data, scale, shape, dtype)


@partial(jit, static_argnums=(2, 3))
def _wald(data: Any, mean: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """Michael, Schucany and Haas's transformation of a chi-square(1) draw y, with a uniform z choosing between
    the two roots x and mean**2 / x."""
    keys = _split(data, (2,))
    mean = _param(mean, dtype, shape)
    v = _normal(keys[0], shape, dtype)
    z = _uniform(keys[1], 0.0, 1.0, shape, dtype)
    y = lax.integer_pow(v, 2)
    mean_sq = lax.integer_pow(mean, 2)
    root = lax.sqrt(4 * mean * y + mean_sq * lax.integer_pow(y, 2))
    x = mean + mean_sq * y / 2 - mean / 2 * root
    return lax.select(z <= mean / (mean + x), x, mean_sq / x)


@takes_out_sharding("random.wald")
def wald(key: Any, mean: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Wald (inverse Gaussian) floats with the given mean and shape parameter 1 (as jax.random.wald)."""
    data, shape, dtype = _float_sampler_args("wald", key, shape, dtype, {"mean": mean})
    return _wald(data, mean, shape, dtype)


@partial(jit, static_argnums=(2, 3))
def _geometric(data: Any, p: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    (p,) = _promote("random.geometric", p, inexact=True)
    p = enp.asarray(p)
    u = _uniform(data, 0.0, 1.0, shape, p.dtype)
    u = enp.where(u == 0, 1, u)  # (as JAX: u = 0 would give an infinite log)
    g = lax.floor(_div_by_broadcast(lax.log(u), _log1p(lax.neg(p)))) + 1
    return g.astype(dtype)


@takes_out_sharding("random.geometric")
def geometric(key: Any, p: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """The number of Bernoulli(p) trials up to and including the first success, 1, 2, ...: floor(log(u) /
    log1p(-p)) + 1 in p's floating dtype (as jax.random.geometric; default dtype int)."""
    data = _key("geometric", key)
    dtype = dt.default_int_dtype() if dtype is None else dt.check_user_dtype(dtype, "random.geometric")
    if not dt.is_int(dtype):
        raise ValueError(f"ember.random.geometric: dtype must be an integer dtype, got {dtype.name}")
    shape = _params_shape("geometric", shape, {"p": p})
    _check_arraylike("geometric", {"p": p})
    return _geometric(data, p, shape, dtype)


@partial(jit, static_argnums=(4, 5))
def _triangular(data: Any, left: Any, mode: Any, right: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    left, mode, right = (_param(v, dtype, shape) for v in (left, mode, right))
    mode_cdf = (mode - left) / (right - left)
    u = _uniform(data, 0.0, 1.0, shape, dtype)
    below = left + lax.sqrt(u * (right - left) * (mode - left))
    above = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return lax.select(u < mode_cdf, below, above)


@takes_out_sharding("random.triangular")
def triangular(key: Any, left: Any, mode: Any, right: Any, shape: Sequence[int] | None = None, dtype: Any = None
               ) -> Any:
    """Triangular floats on [left, right] with the given mode, by inverting the CDF (as jax.random.triangular)."""
    data, shape, dtype = _float_sampler_args("triangular", key, shape, dtype,
                                             {"left": left, "mode": mode, "right": right})
    return _triangular(data, left, mode, right, shape, dtype)


# binomial: the inversion algorithm (a count of geometric waiting times) where n * min(p, 1 - p) <= 10, else
# Hormann's transformed rejection with squeeze (BTRS), as JAX's (and TensorFlow's)
_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983, 0.02079067210376509,
                  0.0166446911898211, 0.0138761288230707, 0.0118967099458917, 0.0104112652619720,
                  0.00925546218271273, 0.00833056343336287)


def _stirling_tail(k: Any) -> Any:
    """log(k!) - (Stirling's approximation of it): a table for k <= 9, the series' first terms above."""
    dtype = aval_of(k).dtype
    clamped = lax.clamp(_const(0.0, dtype), k, _const(9.0, dtype))
    kp1sq = (clamped + 1) * (clamped + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (clamped + 1)
    table = enp.asarray(np.array(_STIRLING_TAIL, dtype))
    exact = enp.take(table, lax.floor(clamped).astype(np.int32), mode="clip")
    return lax.select(k <= 9, exact, approx)


def _binomial_inversion(data: Any, count: Any, prob: Any, shape: tuple[int, ...], bound: Any) -> Any:
    """1 less than the number of geometric(prob) waiting times that fit into count."""
    log_q = _log1p(lax.neg(prob))

    def body(carry: Any) -> Any:
        i, num_geom, geom_sum, keys = carry
        pair = _split(keys, (2,))
        num_geom = enp.where(geom_sum <= count, num_geom + 1, num_geom)
        u = _uniform(pair[0], 0.0, 1.0, shape, aval_of(prob).dtype)
        return i + 1, num_geom, geom_sum + lax.ceil(lax.log(u) / log_q), pair[1]

    def cond(carry: Any) -> Any:
        return enp.any(carry[2] <= count) & bound(carry[0])

    zeros = enp.zeros(shape, aval_of(prob).dtype)
    return lax.while_loop(cond, body, (enp.asarray(0), zeros, zeros, data))[1] - 1


def _btrs(data: Any, count: Any, prob: Any, shape: tuple[int, ...], bound: Any) -> Any:
    dtype = aval_of(prob).dtype
    stddev = lax.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = lax.floor((count + 1) * prob)

    def body(carry: Any) -> Any:
        i, k_out, accepted, keys = carry
        three = _split(keys, (3,))
        u = _uniform(three[1], 0.0, 1.0, shape, dtype) - 0.5
        v = _uniform(three[2], 0.0, 1.0, shape, dtype)
        us = 0.5 - enp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = lax.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        log_v = lax.log(v * alpha / (a / (us * us) + b))
        bound_k = ((m + 0.5) * lax.log((m + 1) / (r * (count - m + 1)))
                   + (count + 1) * lax.log((count - m + 1) / (count - k + 1))
                   + (k + 0.5) * lax.log(r * (count - k + 1) / (k + 1))
                   + _stirling_tail(m) + _stirling_tail(count - m) - _stirling_tail(k) - _stirling_tail(count - k))
        accept = accept1 | (~reject & (log_v <= bound_k))
        return i + 1, lax.select(accept, k, k_out), accepted | accept, three[0]

    def cond(carry: Any) -> Any:
        return enp.any(~carry[2]) & bound(carry[0])

    init = (enp.asarray(0), enp.full(shape, -1.0, dtype), enp.zeros(shape, bool), data)
    return lax.while_loop(cond, body, init)[1]


def _binomial_impl(data: Any, count: Any, prob: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    (prob,) = _promote("random.binomial", prob, inexact=True)
    prob = enp.broadcast_to(prob, shape)
    work = aval_of(prob).dtype
    count = _param(count, work, shape)
    p_lt_half = prob < 0.5
    q = lax.select(p_lt_half, prob, 1.0 - prob)
    count_nan_or_neg = (count != count) | (count < 0.0)
    count_inf = enp.isinf(count)
    q_is_nan, q_negative = q != q, q < 0.0
    q = lax.select(q_is_nan | q_negative, enp.full_like(q, 0.01), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = lax.floor(count)  # (a float count counts its whole trials, as numpy's)
    top = float(_finfo(dtype).max)  # (JAX's loops stop after finfo(dtype).max iterations)

    def bound(i: Any) -> Any:
        return lax.convert_element_type(i, dtype) < _const(top, dtype)
    inverted = _binomial_inversion(data, lax.select(use_inversion, count, enp.zeros_like(count)), q, shape, bound)
    # (each element takes one method's draw: the second draws from a clone of the key, as poisson's)
    rejected = _btrs(clone(data), lax.select(use_inversion, enp.full_like(count, 1e4), count),
                     lax.select(use_inversion, enp.full_like(q, 0.5), q), shape, bound)
    samples = lax.select(use_inversion, inverted.astype(dtype), rejected.astype(dtype))
    invalid = q_negative | q_is_nan | count_nan_or_neg  # nan for a nan or negative count or a nan or negative p
    samples = lax.select(invalid, enp.full_like(samples, np.nan), samples)
    samples = lax.select(count_inf & ~invalid, enp.full_like(samples, np.inf), samples)
    # p > 1/2 drew with 1 - p: count the failures
    return lax.select(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples, count.astype(dtype) - samples)


_binomial_jit = jit(_binomial_impl, static_argnums=(3, 4))


def binomial(key: Any, n: Any, p: Any, shape: Sequence[int] | None = None, dtype: Any = None) -> Any:
    """Binomial(n, p) counts as floats (as jax.random.binomial: inversion for n * min(p, 1 - p) <= 10, BTRS
    rejection above; nan for a nan or negative n or a nan or negative p, inf for an infinite n)."""
    data = _key("binomial", key)
    _check_arraylike("binomial", {"n": n, "p": p})
    dtype = _float_dtype("binomial", dtype)
    shape = _params_shape("binomial", shape, {"n": n, "p": p})
    return _binomial_jit(data, n, p, shape, dtype)


@partial(jit, static_argnums=(3, 4, 5))
def _multinomial(data: Any, n: Any, p: Any, shape: tuple[int, ...], dtype: np.dtype, unroll: Any) -> Any:
    n, p = _promote("random.multinomial", n, p, inexact=True)
    n = enp.broadcast_to(n, shape[:-1])
    p = enp.moveaxis(enp.broadcast_to(p, shape), -1, 0)
    remaining = lax.cumsum(p, 0, reverse=True)
    ratios = p / enp.where(remaining == 0, 1, remaining)  # each category's share of what is left
    work = aval_of(n).dtype

    def draw(left: Any, ratio_key: Any) -> Any:
        ratio, key = ratio_key
        count = _binomial_impl(key, left, enp.clip(ratio, 0, 1), shape[:-1], work)
        return left - count, count

    _, counts = lax.scan(draw, n, (ratios, _split(data, (shape[-1],))), unroll=unroll)
    return enp.moveaxis(counts, 0, -1).astype(dtype)


def multinomial(key: Any, n: Any, p: Any, *, shape: Sequence[int] | None = None, dtype: Any = None,
                unroll: int | bool = 1) -> Any:
    """Counts of n trials over the categories of p's last axis, as floats: a binomial draw per category from
    what the earlier ones left (as jax.random.multinomial; shape includes the categories' axis, n broadcasts
    against shape[:-1], and the scan over categories unrolls unroll steps)."""
    name = "multinomial"
    data = _key(name, key)
    _check_arraylike(name, {"n": n, "p": p})
    # (as JAX's, any numeric dtype: the counts are converted to it at the end)
    dtype = dt.default_float_dtype() if dtype is None else dt.check_user_dtype(dtype, f"random.{name}")
    shape = tuple(np.shape(p)) if shape is None else canonical_shape(name, shape)
    if not shape:
        raise ValueError(f"ember.random.{name}: p must have at least one dimension (the categories), or shape be "
                         "given with one")
    if not _broadcasts_to(shape[:-1], tuple(np.shape(n))):
        raise ValueError(f"ember.random.{name}: n of shape {np.shape(n)} does not broadcast to {shape[:-1]}")
    if not _broadcasts_to(shape, tuple(np.shape(p))):
        raise ValueError(f"ember.random.{name}: p of shape {np.shape(p)} does not broadcast to {shape}")
    return _multinomial(data, n, p, shape, dtype, unroll)


# ---------------------------------------------------------------------------------------------------------------
# samplers built on a matrix factorisation (ember.numpy.linalg)
_MVN_METHODS = ("cholesky", "eigh", "svd")


@partial(jit, static_argnums=(3, 4, 5))
def _multivariate_normal(data: Any, mean: Any, cov: Any, shape: tuple[int, ...], dtype: np.dtype, method: str
                         ) -> Any:
    """mean + factor @ z for standard normal z, where factor @ factor.T == cov: cov's Cholesky factor, or its
    eigenvectors (singular vectors) scaled by the square roots of its eigenvalues (singular values)."""
    if method == "svd":
        u, s, _ = enp.linalg.svd(cov)
        factor = u * enp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = enp.linalg.eigh(cov)
        factor = v * enp.sqrt(w[..., None, :])
    else:
        factor = enp.linalg.cholesky(cov)
    z = _normal(data, (*shape, aval_of(mean).shape[-1]), dtype)
    return mean + enp.einsum("...ij,...j->...i", factor, z)


def multivariate_normal(key: Any, mean: Any, cov: Any, shape: Sequence[int] | None = None, dtype: Any = None,
                        method: str = "cholesky") -> Any:
    """Normal vectors with mean (..., n) and covariance cov (..., n, n), from a Cholesky ('cholesky'), eigh or
    SVD factor of cov ('eigh' and 'svd' allow a singular cov) (as jax.random.multivariate_normal). The result has
    shape shape + (n,), shape defaulting to the broadcast batch shape of mean and cov."""
    name = "multivariate_normal"
    data = _key(name, key)
    mean, cov = enp.asarray(mean), enp.asarray(cov)
    inexact = enp.result_type(mean, cov, 0.0)
    mean, cov = mean.astype(inexact), cov.astype(inexact)
    if method not in _MVN_METHODS:
        raise ValueError(f"ember.random.{name}: method must be one of {_MVN_METHODS}, got {method!r}")
    dtype = inexact if dtype is None else dt.check_user_dtype(dtype, f"random.{name}")
    if not dt.is_float(dtype):
        raise ValueError(f"ember.random.{name}: dtype must be a float dtype, got {dtype.name}")
    if mean.ndim < 1 or cov.ndim < 2:
        raise ValueError(f"ember.random.{name}: needs mean.ndim >= 1 and cov.ndim >= 2, got mean of shape "
                         f"{mean.shape} and cov of shape {cov.shape}")
    n = mean.shape[-1]
    if cov.shape[-2:] != (n, n):
        raise ValueError(f"ember.random.{name}: cov must have shape (..., {n}, {n}) for a mean of shape "
                         f"{mean.shape}, got {cov.shape}")
    batch = _broadcast_shapes(name, mean.shape[:-1], cov.shape[:-2])
    if shape is None:
        shape = batch
    else:
        shape = canonical_shape(name, shape)
        if not _broadcasts_to(shape, batch):
            raise ValueError(f"ember.random.{name}: the batch shapes of mean {mean.shape[:-1]} and cov "
                             f"{cov.shape[:-2]} must broadcast to the shape argument {shape}")
    return _multivariate_normal(data, mean, cov, shape, dtype, method)


@partial(jit, static_argnums=(1, 2, 3, 4))
def _orthogonal(data: Any, n: int, m: int, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """Q of the QR factorisation of a normal (max(n, m), min(n, m)) matrix, its columns' signs fixed by R's
    diagonal so that Q is Haar distributed (Mezzadri 2007); transposed when n < m."""
    z_shape = (*shape, max(n, m), min(n, m))
    z = _complex_normal(data, z_shape, dtype) if dt.is_complex(dtype) else _normal(data, z_shape, dtype)
    q, r = enp.linalg.qr(z)
    x = q * enp.expand_dims(enp.sign(enp.diagonal(r, axis1=-2, axis2=-1)), -2)
    return enp.matrix_transpose(x) if n < m else x


def orthogonal(key: Any, n: int, shape: Sequence[int] = (), dtype: Any = None, m: int | None = None) -> Any:
    """A (*shape, n, m) matrix uniform (Haar) on the orthogonal group O(n), the unitary group for a complex dtype,
    or for n != m semi-orthogonal: orthonormal rows (n < m) or columns (n > m) (as jax.random.orthogonal)."""
    data = _key("orthogonal", key)
    shape = canonical_shape("orthogonal", shape)
    dtype = dt.default_float_dtype() if dtype is None else dt.check_user_dtype(dtype, "random.orthogonal")
    if not (dt.is_float(dtype) or dt.is_complex(dtype)):
        raise ValueError(f"ember.random.orthogonal: dtype must be a float or complex dtype, got {dtype.name}")
    n = _concrete_int("orthogonal", "n", n)
    m = n if m is None else _concrete_int("orthogonal", "m", m)
    if n < 0 or m < 0:
        raise ValueError(f"ember.random.orthogonal: n and m must be non-negative, got n={n}, m={m}")
    return _orthogonal(data, n, m, shape, dtype)
