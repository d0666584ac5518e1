"""jax.nn's functions: activations, softmax and friends, one_hot, standardize, dot_product_attention. Each is the
formula JAX uses (so values agree to rounding), with JAX's derivative conventions where they differ from the
formula's (relu and relu6 have derivative 0 at their kinks)."""
from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ember import lax
from ember import numpy as enp
from ember._control.custom import pure_custom_jvp
from ember._core import dtypes as dt


def _inexact(x: Any) -> Any:
    """x as an array of an inexact dtype: a float or complex one kept (complex values are computed on, as JAX's
    functions do; casting them to float would drop their imaginary parts), anything else the default float."""
    x = enp.asarray(x)
    if not (dt.is_float(x.dtype) or dt.is_complex(x.dtype)):
        x = x.astype(dt.default_float_dtype())
    return x


# ---------------------------------------------------------------------------------------------------------------
# activations
@pure_custom_jvp
def relu(x: Any) -> Any:
    """max(x, 0), with derivative 0 at 0 (as jax.nn.relu)."""
    return enp.maximum(x, 0)


@relu.defjvp
def _relu_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    return relu(x), enp.where(x > 0, t, enp.zeros_like(t))


@pure_custom_jvp
def relu6(x: Any) -> Any:
    """min(max(x, 0), 6), with derivative 0 at both kinks (as jax.nn.relu6)."""
    return enp.minimum(enp.maximum(x, 0), 6.0)


@relu6.defjvp
def _relu6_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    return relu6(x), enp.where((x > 0) & (x < 6), t, enp.zeros_like(t))


def sigmoid(x: Any) -> Any:
    """1 / (1 + exp(-x))."""
    return lax.logistic(_inexact(x))


def softplus(x: Any) -> Any:
    """log(1 + exp(x)), computed as logaddexp(x, 0)."""
    return enp.logaddexp(_inexact(x), 0)


def sparse_plus(x: Any) -> Any:
    """0 for x <= -1, (x + 1)^2 / 4 between, x for x >= 1: softplus's twin with exact zeros (as jax.nn); its
    derivative is sparse_sigmoid."""
    x = _inexact(x)
    return enp.where(x <= -1.0, 0.0, enp.where(x >= 1.0, x, (x + 1.0) ** 2 / 4))


def sparse_sigmoid(x: Any) -> Any:
    """0 for x <= -1, (x + 1) / 2 between, 1 for x >= 1: the derivative of sparse_plus (as jax.nn)."""
    return 0.5 * enp.clip(_inexact(x) + 1.0, 0.0, 2.0)


def log_sigmoid(x: Any) -> Any:
    """log(sigmoid(x)) = -softplus(-x)."""
    return -softplus(-_inexact(x))


def soft_sign(x: Any) -> Any:
    x = _inexact(x)
    return x / (enp.abs(x) + 1)


def silu(x: Any) -> Any:
    """x * sigmoid(x) (also called swish)."""
    x = _inexact(x)
    return x * sigmoid(x)


swish = silu


def gelu(x: Any, approximate: bool = True) -> Any:
    """The Gaussian error linear unit; approximate=True (JAX's default) is the tanh form."""
    x = _inexact(x)
    if approximate:
        sqrt_2_over_pi = np.sqrt(2 / np.pi).astype(x.dtype)
        cdf = 0.5 * (1.0 + enp.tanh(sqrt_2_over_pi * (x + 0.044715 * x ** 3)))
        return x * cdf
    sqrt_half = np.sqrt(0.5).astype(x.dtype)
    return (0.5 * x * lax.erfc(-x * sqrt_half)).astype(x.dtype)


def elu(x: Any, alpha: Any = 1.0) -> Any:
    x = _inexact(x)
    safe_x = enp.where(x > 0, 0.0, x)
    return enp.where(x > 0, x, alpha * enp.expm1(safe_x))


def leaky_relu(x: Any, negative_slope: Any = 1e-2) -> Any:
    x = _inexact(x)
    return enp.where(x >= 0, x, negative_slope * x)


def celu(x: Any, alpha: Any = 1.0) -> Any:
    x = _inexact(x)
    return enp.maximum(x, 0.0) + alpha * enp.expm1(enp.minimum(x, 0.0) / alpha)


def selu(x: Any) -> Any:
    alpha = 1.6732632423543772848170429916717
    scale = 1.0507009873554804934193349852946
    return scale * elu(x, alpha)


def hard_tanh(x: Any) -> Any:
    x = _inexact(x)
    return enp.where(x > 1, 1, enp.where(x < -1, -1, x))


def hard_sigmoid(x: Any) -> Any:
    return relu6(_inexact(x) + 3.0) / 6.0


def hard_silu(x: Any) -> Any:
    x = _inexact(x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu


def mish(x: Any) -> Any:
    x = _inexact(x)
    return x * enp.tanh(softplus(x))


def squareplus(x: Any, b: Any = 4) -> Any:
    x = _inexact(x)
    return (x + enp.sqrt(enp.square(x) + b)) / 2


def glu(x: Any, axis: int = -1) -> Any:
    """Gated linear unit: the first half of x along axis times the sigmoid of the second half."""
    x = enp.asarray(x)
    if x.shape[axis] % 2:
        raise ValueError(f"ember.nn.glu: the size of axis {axis} of x {x.shape} must be even")
    x1, x2 = enp.split(x, 2, axis)
    return x1 * sigmoid(x2)


# ---------------------------------------------------------------------------------------------------------------
# normalisation over an axis
def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    axes = tuple(range(ndim)) if axis is None else (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(a % max(ndim, 1) for a in axes)


def _masked_max(x: Any, axis: Any, where: Any) -> Any:
    if where is not None:
        x = enp.where(where, x, -np.inf)
    return enp.max(x, axis=axis, keepdims=True, initial=-np.inf)


def _masked_sum(x: Any, axis: Any, where: Any, keepdims: bool = True) -> Any:
    if where is not None:
        x = enp.where(where, x, 0)
    return enp.sum(x, axis=axis, keepdims=keepdims)


def softmax(x: Any, axis: Any = -1, where: Any = None) -> Any:
    """exp(x) / sum(exp(x)) along axis (entries outside `where` are 0), as jax.nn.softmax."""
    x = _inexact(x)
    axis = _axes(axis, x.ndim)
    if where is None:
        return _softmax_by_axis(axis)(x)
    return _softmax_where(axis)(x, enp.asarray(where))


@functools.lru_cache(maxsize=64)
def _softmax_by_axis(axis: tuple[int, ...]) -> Any:
    """softmax over axis with JAX's derivative rule (y * (t - sum(y * t))), one custom_jvp per axis tuple."""
    @pure_custom_jvp
    def f(x: Any) -> Any:
        unnormalized = enp.exp(x - lax.stop_gradient(_masked_max(x, axis, None)))
        return unnormalized / enp.sum(unnormalized, axis=axis, keepdims=True)

    @f.defjvp
    def f_jvp(primals: Any, tangents: Any) -> Any:
        (x,), (t,) = primals, tangents
        y = f(x)
        return y, y * (t - enp.sum(y * t, axis=axis, keepdims=True))
    return f


def _softmax_where(axis: tuple[int, ...]) -> Any:
    def f(x: Any, where: Any) -> Any:
        x_max = lax.stop_gradient(_masked_max(x, axis, where))
        unnormalized = enp.exp(enp.where(where, x, -np.inf) - x_max)
        return enp.where(where, unnormalized / _masked_sum(unnormalized, axis, where), 0)
    return f


def log_softmax(x: Any, axis: Any = -1, where: Any = None) -> Any:
    """x - logsumexp(x) along axis, shifted by the (non-differentiated) max for stability, as jax.nn."""
    x = _inexact(x)
    axis = _axes(axis, x.ndim)
    x_max = _masked_max(x, axis, where)
    x_safe = x if where is None else enp.where(where, x, -np.inf)
    shifted = x_safe - lax.stop_gradient(x_max)
    result = shifted - enp.log(_masked_sum(enp.exp(shifted), axis, where))
    return result if where is None else enp.where(where, result, -np.inf)


def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False, return_sign: bool = False,
              where: Any = None) -> Any:
    """log(sum(b * exp(a))) along axis, computed stably (as jax.nn.logsumexp / jax.scipy.special.logsumexp): the
    shift is the max over the entries that count (inside `where`, with b != 0), so a large a whose weight is 0
    cannot make the sum underflow."""
    if where is not None:
        a = enp.where(where, a, 0)
    a = enp.asarray(a)
    if b is None:
        a = a.astype(dt.to_inexact_dtype(a.dtype))
    else:
        b = enp.asarray(b)
        inexact = dt.to_inexact_dtype(enp.result_type(a, b))
        a, b = enp.broadcast_arrays(a.astype(inexact), b.astype(inexact))
        a = enp.where(b != 0, a, -np.inf)
    axes = _axes(axis, a.ndim)
    amax = _masked_max(enp.real(a), axes, where)
    amax = lax.stop_gradient(enp.where(enp.isfinite(amax), amax, 0))
    exp_a = enp.exp(a - amax.astype(a.dtype))
    if b is not None:
        exp_a = exp_a * b
    total = _masked_sum(exp_a, axes, where)
    sign = enp.sign(total)
    complex_out = dt.is_complex(total.dtype)
    if return_sign or not complex_out:
        total = enp.abs(total)
    out = enp.log(total) + amax.astype(total.dtype)
    if not keepdims:
        out, sign = enp.squeeze(out, axes), enp.squeeze(sign, axes)
    if return_sign:
        return out, sign
    if b is not None and not complex_out:
        out = enp.where(sign < 0, np.nan, out)
    return out


def logmeanexp(x: Any, axis: Any = None, where: Any = None, keepdims: bool = False) -> Any:
    """log(mean(exp(x))) along axis (over the entries inside `where`): logsumexp minus the log of their count, as
    jax.nn.logmeanexp."""
    total = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    ones = enp.ones(enp.shape(x), total.dtype) if where is None else enp.asarray(where).astype(total.dtype)
    count = enp.sum(enp.broadcast_to(ones, enp.shape(x)), axis=axis, keepdims=keepdims)
    return total - enp.log(count)


def identity(x: Any) -> Any:
    """x as an array, unchanged (as jax.nn.identity)."""
    return enp.asarray(x)


@pure_custom_jvp
def log1mexp(x: Any) -> Any:
    """log(1 - exp(-x)) for x >= 0, computed stably (expm1 below log 2, log1p above, as jax.nn.log1mexp); its
    derivative is 1 / expm1(x)."""
    x = _inexact(x)
    return enp.where(x < math.log(2.0), enp.log(-enp.expm1(-x)), enp.log1p(-enp.exp(-x)))


@log1mexp.defjvp
def _log1mexp_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (t,) = primals, tangents
    return log1mexp(x), t / enp.expm1(_inexact(x))


def standardize(x: Any, axis: Any = -1, mean: Any = None, variance: Any = None, epsilon: Any = 1e-5,
                where: Any = None) -> Any:
    """(x - mean) / sqrt(variance + epsilon) along axis (JAX's default "fast" variance: E[x^2] - E[x]^2)."""
    x = _inexact(x)
    axes = _axes(axis, x.ndim)
    if where is not None:
        count = _masked_sum(enp.ones_like(x), axes, where)
        mean_of = lambda v: _masked_sum(v, axes, where) / count  # noqa: E731
    else:
        mean_of = lambda v: enp.mean(v, axis=axes, keepdims=True)  # noqa: E731
    if mean is None:
        mean = mean_of(x)
    if variance is None:
        variance = enp.clip(mean_of(enp.square(x)) - enp.square(mean), 0)
    return (x - mean) * lax.rsqrt(variance + epsilon)


def one_hot(x: Any, num_classes: int, *, dtype: Any = None, axis: int = -1) -> Any:
    """x's integers as one-hot vectors along a new axis; out-of-range values give all zeros (as jax.nn)."""
    try:
        num_classes = int(num_classes)
    except Exception:  # noqa: BLE001 - a traced value
        raise TypeError("ember.nn.one_hot: num_classes must be a concrete integer (it sets the output's shape)") \
            from None
    x = enp.asarray(x)
    dtype = dt.default_float_dtype() if dtype is None else dt.check_user_dtype(dtype, "one_hot")
    out_axis = axis % (x.ndim + 1)
    shape = [1] * x.ndim
    shape.insert(out_axis, num_classes)
    classes = lax.broadcasted_iota(x.dtype, tuple(shape), out_axis)
    return (enp.expand_dims(x, out_axis) == classes).astype(dtype)


# ---------------------------------------------------------------------------------------------------------------
def _four_d(t: Any) -> Any:
    t = enp.asarray(t)
    return enp.reshape(t, (1,) * (4 - t.ndim) + t.shape) if t.ndim < 4 else t


def attention_weights(q: Any, k: Any, bias: Any = None, mask: Any = None, is_causal: bool = False,
                      scale: float | None = None) -> Any:
    """The attention probabilities (B, N, T, S) of queries (B, T, N, H) over keys (B, S, N, H): scaled logits,
    plus bias, masked (mask True = attend; is_causal hides the future) with a large negative number, softmax in
    float32, in the keys' dtype. dot_product_attention's first half, shared by layers that act on the weights
    (MultiHeadAttention's dropout)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    logits_dtype = enp.promote_types(q.dtype, np.float32)
    logits = enp.einsum("BTNH,BSNH->BNTS", q, k).astype(logits_dtype)
    logits = logits * np.asarray(scale, logits_dtype)
    if bias is not None:
        logits = (logits + _four_d(bias)).astype(logits.dtype)
    keep = None
    if mask is not None:
        mask = _four_d(mask)
        if mask.dtype != np.bool_:
            raise ValueError(f"ember.nn.dot_product_attention: mask must be boolean, got {mask.dtype}")
        keep = mask
    if is_causal:
        causal = enp.tril(enp.ones((q.shape[1], k.shape[1]), dtype=bool))[None, None]
        keep = causal if keep is None else keep & causal
    if keep is not None:
        big_negative = -0.7 * min(float(np.finfo(np.float32).max), float(enp.finfo(logits.dtype).max))
        logits = enp.where(keep, logits, np.asarray(big_negative, logits.dtype))
    return softmax(logits.astype(np.float32), axis=-1).astype(k.dtype)


def dot_product_attention(query: Any, key: Any, value: Any, bias: Any = None, mask: Any = None, *,
                          scale: float | None = None, is_causal: bool = False, query_seq_lengths: Any = None,
                          key_value_seq_lengths: Any = None, local_window_size: Any = None,
                          implementation: str | None = None) -> Any:
    """Scaled dot-product attention, as jax.nn.dot_product_attention: query (B, T, N, H), key and value
    (B, S, K, H) with N a multiple of K (grouped-query attention), or without the batch dimension; optional bias
    and boolean mask broadcastable to (B, N, T, S); is_causal masks the future. Softmax in float32."""
    if implementation not in (None, "xla"):
        raise ValueError(f"ember.nn.dot_product_attention: implementation {implementation!r} is not available; "
                         "ember has the 'xla' one")
    if query_seq_lengths is not None or key_value_seq_lengths is not None or local_window_size is not None:
        raise NotImplementedError("ember.nn.dot_product_attention: query_seq_lengths, key_value_seq_lengths and "
                                  "local_window_size are not supported yet; pass a boolean mask instead")
    query, key, value = enp.asarray(query), enp.asarray(key), enp.asarray(value)
    q, k, v = _four_d(query), _four_d(key), _four_d(value)
    if k.shape != v.shape or q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3] or q.dtype != k.dtype \
            or v.dtype != k.dtype:
        raise ValueError(f"ember.nn.dot_product_attention: query {query.shape} {query.dtype}, key {key.shape} "
                         f"{key.dtype} and value {value.shape} {value.dtype} must be (B, T, N, H), (B, S, K, H) and "
                         "(B, S, K, H) of one dtype")
    batch, _, heads, head_dim = q.shape
    kv_heads, s_len = k.shape[2], k.shape[1]
    if heads % kv_heads:
        raise ValueError(f"ember.nn.dot_product_attention: the number of query heads ({heads}) must be a multiple "
                         f"of key/value heads ({kv_heads})")
    if kv_heads != heads:  # grouped-query attention: each key/value head serves heads // kv_heads query heads
        group = (batch, s_len, kv_heads, heads // kv_heads, head_dim)
        k = enp.reshape(enp.broadcast_to(k[:, :, :, None, :], group), (batch, s_len, heads, head_dim))
        v = enp.reshape(enp.broadcast_to(v[:, :, :, None, :], group), (batch, s_len, heads, head_dim))
    probs = attention_weights(q, k, bias, mask, is_causal, scale)
    return enp.reshape(enp.einsum("BNTS,BSNH->BTNH", probs, v), query.shape)


__all__ = [
    "celu", "dot_product_attention", "elu", "gelu", "glu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh",
    "leaky_relu", "log_sigmoid", "log_softmax", "logsumexp", "mish", "one_hot", "relu", "relu6", "selu", "sigmoid",
    "silu", "soft_sign", "softmax", "softplus", "sparse_plus", "sparse_sigmoid", "squareplus", "standardize", "swish",
]
