"""Layers as Modules (pytrees whose leaves are the parameters). Explicit keys initialise them and drive dropout.

Conventions (flax's and PyTorch's): inputs are batch-first with any number of leading batch dimensions and
features last (channels-last for convolutions: (N, *spatial, C)); a layer applies to one example or to a batch
alike, and vmap works too. Stateful layers (BatchNorm) return (output, updated layer).

One dtype policy for every layer (flax's promote_dtype): a floating-point input and the layer's parameters are
computed in their common dtype, so a float16 or bfloat16 input of a float32 layer is promoted to float32 and a
float64 input promotes float32 parameters; integer, bool and complex inputs are refused with a TypeError (only
Embedding takes integer ids). Every input is checked at the layer: errors name the layer, the expected and the
given shape or dtype."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ember import lax
from ember import numpy as enp
from ember import random
from ember._core import dtypes as dt
from ember.nn import initializers as init
from ember.nn._functions import attention_weights, dot_product_attention, relu
from ember.nn._module import Module


def _dtype(dtype: Any) -> np.dtype:
    return dt.default_float_dtype() if dtype is None else dt.check_user_dtype(dtype, "ember.nn layer")


def _keys(key: Any, n: int, name: str) -> list[Any]:
    if key is None:
        raise TypeError(f"ember.nn.{name}: pass key= (an ember.random key) to initialise the parameters")
    return list(random.split(key, n))


def _check_last(name: str, x: Any, size: int, what: str = "features") -> None:
    shape = enp.shape(x)
    if not shape or shape[-1] != size:
        raise ValueError(f"ember.nn.{name}: expected input with {size} {what} in its last dimension, got shape "
                         f"{tuple(shape)}")


def _dtype_of(x: Any) -> np.dtype:
    return dt.canonicalize_dtype(x.dtype) if hasattr(x, "dtype") else enp.asarray(x).dtype


def _common_dtype(name: str, x: Any, params: Sequence[Any]) -> np.dtype:
    """The dtype a layer computes in: the common dtype of a floating-point input and the parameters."""
    given = _dtype_of(x)
    if not dt.is_float(given):
        expected = f"the layer's parameters are {params[0].dtype.name}" if params else "it computes in floating point"
        raise TypeError(f"ember.nn.{name}: expected a floating-point input ({expected}), got "
                        f"{given.name}{list(enp.shape(x))}; convert it first with .astype(...)")
    return dt.result_type(given, *(p.dtype for p in params))


def _promoted(name: str, x: Any, *params: Any) -> list[Any]:
    """[x, *params] in their common floating dtype (params that are None stay None): the layers' dtype policy."""
    common = _common_dtype(name, x, [p for p in params if p is not None])
    return [a if a is None or _dtype_of(a) == common else enp.asarray(a).astype(common) for a in (x, *params)]


def _check_trailing(name: str, x: Any, shape: tuple[int, ...]) -> None:
    if tuple(enp.shape(x)[-len(shape):]) != shape:
        raise ValueError(f"ember.nn.{name}: expected input ending in {shape}, got shape {tuple(enp.shape(x))}")


def _identity(x: Any) -> Any:
    return x


class Linear(Module):
    """y = x @ weight + bias; weight (in_features, out_features) from kernel_init (LeCun normal), bias zeros."""

    def __init__(self, in_features: int, out_features: int, use_bias: bool = True, *, key: Any,
                 kernel_init: Callable[..., Any] = init.lecun_normal(), bias_init: Callable[..., Any] = init.zeros,
                 dtype: Any = None):
        wkey, bkey = _keys(key, 2, "Linear")
        dtype = _dtype(dtype)
        self.weight = kernel_init(wkey, (in_features, out_features), dtype)
        self.bias = bias_init(bkey, (out_features,), dtype) if use_bias else None
        self.in_features, self.out_features = in_features, out_features

    def __call__(self, x: Any) -> Any:
        _check_last("Linear", x, self.in_features)
        x, weight, bias = _promoted("Linear", x, self.weight, self.bias)
        y = x @ weight
        return y if bias is None else y + bias


class Conv(Module):
    """An N-d convolution of channels-last inputs (N, *spatial, in_channels) or unbatched (*spatial, in_channels);
    kernel (*kernel_size, in_channels // groups, out_channels) from kernel_init (LeCun normal)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int], strides: Any = 1,
                 padding: Any = "SAME", dilation: Any = 1, groups: int = 1, use_bias: bool = True, *, key: Any,
                 num_spatial_dims: int | None = None, kernel_init: Callable[..., Any] = init.lecun_normal(),
                 bias_init: Callable[..., Any] = init.zeros, dtype: Any = None):
        if isinstance(kernel_size, int):
            kernel_size = (kernel_size,) * (num_spatial_dims or 2)
        kernel_size = tuple(int(k) for k in kernel_size)
        n = len(kernel_size)
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"ember.nn.Conv: in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                             f"multiples of groups ({groups})")
        wkey, bkey = _keys(key, 2, "Conv")
        dtype = _dtype(dtype)
        self.kernel = kernel_init(wkey, kernel_size + (in_channels // groups, out_channels), dtype)
        self.bias = bias_init(bkey, (out_channels,), dtype) if use_bias else None
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.strides = (strides,) * n if isinstance(strides, int) else tuple(strides)
        self.dilation = (dilation,) * n if isinstance(dilation, int) else tuple(dilation)
        self.padding = padding if isinstance(padding, str) else tuple(
            (p, p) if isinstance(p, int) else tuple(p) for p in ((padding,) * n if isinstance(padding, int)
                                                                 else padding))

    def __call__(self, x: Any) -> Any:
        n, name = self.kernel.ndim - 2, type(self).__name__
        _check_last(name, x, self.in_channels, "channels")
        x, kernel, bias = _promoted(name, x, self.kernel, self.bias)
        unbatched = enp.ndim(x) == n + 1
        if unbatched:
            x = x[None]
        if enp.ndim(x) != n + 2:
            raise ValueError(f"ember.nn.{name}: a {n}-d convolution takes (N, *{n} spatial, C) or ({n} spatial, C) "
                             f"inputs, got shape {tuple(enp.shape(x))}")
        spatial = "DHW"[-n:] if n <= 3 else None
        if spatial is None:
            raise ValueError("ember.nn.Conv: 1 to 3 spatial dimensions are supported")
        dimension_numbers = (f"N{spatial}C", f"{spatial}IO", f"N{spatial}C")
        y = lax.conv_general_dilated(x, kernel, self.strides, self.padding, rhs_dilation=self.dilation,
                                     dimension_numbers=dimension_numbers, feature_group_count=self.groups)
        if bias is not None:
            y = y + bias
        return y[0] if unbatched else y


class Conv1d(Conv):
    """Conv with one spatial dimension: (N, L, C) inputs."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int], *args: Any,
                 **kwargs: Any):
        super().__init__(in_channels, out_channels, kernel_size, *args, num_spatial_dims=1, **kwargs)


class Conv2d(Conv):
    """Conv with two spatial dimensions: (N, H, W, C) inputs."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int], *args: Any,
                 **kwargs: Any):
        super().__init__(in_channels, out_channels, kernel_size, *args, num_spatial_dims=2, **kwargs)


class Embedding(Module):
    """A lookup table: ids (any integer shape) -> vectors of `features`; weight from a normal(1.0)."""

    def __init__(self, num_embeddings: int, features: int, *, key: Any,
                 embedding_init: Callable[..., Any] = init.normal(1.0), dtype: Any = None):
        (wkey,) = _keys(key, 1, "Embedding")
        self.weight = embedding_init(wkey, (num_embeddings, features), _dtype(dtype))
        self.num_embeddings, self.features = num_embeddings, features

    def __call__(self, ids: Any) -> Any:
        ids = enp.asarray(ids)
        if not dt.is_int(ids.dtype):
            raise TypeError(f"ember.nn.Embedding: ids must be integers, got {ids.dtype.name}{list(ids.shape)}")
        return self.weight[ids]

    def attend(self, x: Any) -> Any:
        """x @ weight.T: logits over the vocabulary (weight tying)."""
        _check_last("Embedding.attend", x, self.features)
        x, weight = _promoted("Embedding.attend", x, self.weight)
        return x @ weight.T


class LayerNorm(Module):
    """Normalises over the last len(shape) dimensions, then scales and shifts (PyTorch's and equinox's eps)."""

    def __init__(self, shape: int | Sequence[int], eps: float = 1e-5, use_weight: bool = True, use_bias: bool = True,
                 dtype: Any = None):
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        dtype = _dtype(dtype)
        self.weight = enp.ones(self.shape, dtype) if use_weight else None
        self.bias = enp.zeros(self.shape, dtype) if use_bias else None
        self.eps = eps

    def __call__(self, x: Any) -> Any:
        _check_trailing("LayerNorm", x, self.shape)
        x, weight, bias = _promoted("LayerNorm", x, self.weight, self.bias)
        axes = tuple(range(-len(self.shape), 0))
        mean = enp.mean(x, axis=axes, keepdims=True)
        variance = enp.mean(enp.square(x - mean), axis=axes, keepdims=True)
        y = (x - mean) * lax.rsqrt(variance + self.eps)
        if weight is not None:
            y = y * weight
        return y if bias is None else y + bias


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last len(shape) dimensions."""

    def __init__(self, shape: int | Sequence[int], eps: float = 1e-6, use_weight: bool = True, dtype: Any = None):
        self.shape = (shape,) if isinstance(shape, int) else tuple(shape)
        self.weight = enp.ones(self.shape, _dtype(dtype)) if use_weight else None
        self.eps = eps

    def __call__(self, x: Any) -> Any:
        _check_trailing("RMSNorm", x, self.shape)
        x, weight = _promoted("RMSNorm", x, self.weight)
        axes = tuple(range(-len(self.shape), 0))
        y = x * lax.rsqrt(enp.mean(enp.square(x), axis=axes, keepdims=True) + self.eps)
        return y if weight is None else y * weight


class BatchNorm(Module):
    """Batch normalisation over every axis but the last (features). Training uses the batch's statistics and
    returns the layer with updated running averages: `y, bn = bn(x, training=True)`; evaluation uses the running
    averages: `y, _ = bn(x, training=False)`. running = momentum * running + (1 - momentum) * batch (flax's
    convention; PyTorch's momentum 0.1 is flax's 0.9)."""

    def __init__(self, features: int, momentum: float = 0.99, eps: float = 1e-5, use_weight: bool = True,
                 use_bias: bool = True, dtype: Any = None):
        dtype = _dtype(dtype)
        self.weight = enp.ones((features,), dtype) if use_weight else None
        self.bias = enp.zeros((features,), dtype) if use_bias else None
        self.running_mean = enp.zeros((features,), dtype)
        self.running_var = enp.ones((features,), dtype)
        self.features, self.momentum, self.eps = features, momentum, eps

    def __call__(self, x: Any, training: bool) -> tuple[Any, "BatchNorm"]:
        _check_last("BatchNorm", x, self.features)
        x, weight, bias = _promoted("BatchNorm", x, self.weight, self.bias)
        axes = tuple(range(enp.ndim(x) - 1))
        if training:
            mean = enp.mean(x, axis=axes)
            var = enp.mean(enp.square(x - mean), axis=axes)
            new = self.replace(running_mean=self._averaged(self.running_mean, mean),
                               running_var=self._averaged(self.running_var, var))
        else:
            mean, var, new = self.running_mean, self.running_var, self
        y = (x - mean) * lax.rsqrt(var + self.eps)
        if weight is not None:
            y = y * weight
        if bias is not None:
            y = y + bias
        return y, new

    def _averaged(self, running: Any, batch: Any) -> Any:
        """The new running average, in the running average's own dtype (the layer's state keeps its dtype)."""
        m = self.momentum
        return lax.stop_gradient(m * running + (1 - m) * batch).astype(running.dtype)


class Dropout(Module):
    """Zeroes each entry with probability rate and scales the rest by 1 / (1 - rate) when training (a key is then
    required); the identity otherwise."""

    def __init__(self, rate: float = 0.5):
        if not 0 <= rate < 1:
            raise ValueError(f"ember.nn.Dropout: rate must be in [0, 1), got {rate}")
        self.rate = rate

    def __call__(self, x: Any, *, key: Any = None, training: bool = True) -> Any:
        _common_dtype("Dropout", x, ())
        if not training or self.rate == 0:
            return x
        if key is None:
            raise TypeError("ember.nn.Dropout: training needs key= (an ember.random key); pass training=False to "
                            "evaluate")
        keep = random.bernoulli(key, 1 - self.rate, enp.shape(x))
        return enp.where(keep, x / (1 - self.rate), 0)


class MultiHeadAttention(Module):
    """Multi-head attention over (..., T, features) inputs: query/key/value projections, scaled dot-product
    attention per head (ember.nn.dot_product_attention), an output projection. Self-attention when key_value is
    None; mask (broadcastable to (batch, heads, T, S), True = attend) and/or is_causal=True."""

    def __init__(self, num_heads: int, features: int, qkv_features: int | None = None,
                 out_features: int | None = None, use_bias: bool = True, dropout_rate: float = 0.0, *, key: Any,
                 dtype: Any = None):
        qkv_features = features if qkv_features is None else qkv_features
        if qkv_features % num_heads:
            raise ValueError(f"ember.nn.MultiHeadAttention: qkv_features ({qkv_features}) must be a multiple of "
                             f"num_heads ({num_heads})")
        keys = _keys(key, 4, "MultiHeadAttention")
        self.query = Linear(features, qkv_features, use_bias, key=keys[0], dtype=dtype)
        self.key = Linear(features, qkv_features, use_bias, key=keys[1], dtype=dtype)
        self.value = Linear(features, qkv_features, use_bias, key=keys[2], dtype=dtype)
        self.out = Linear(qkv_features, features if out_features is None else out_features, use_bias, key=keys[3],
                          dtype=dtype)
        self.num_heads, self.features, self.dropout_rate = num_heads, features, dropout_rate

    def __call__(self, x: Any, key_value: Any = None, *, mask: Any = None, is_causal: bool = False,
                 key: Any = None, training: bool = False) -> Any:
        kv = x if key_value is None else key_value
        self._check_sequence("x", x)
        if key_value is not None:
            self._check_sequence("key_value", kv)
        batch = tuple(enp.shape(x)[:-2])
        if tuple(enp.shape(kv)[:-2]) != batch:
            raise ValueError(f"ember.nn.MultiHeadAttention: key_value's batch dimensions {tuple(enp.shape(kv)[:-2])} "
                             f"differ from x's {batch}")
        if mask is not None:
            mask = self._mask(mask, batch + (self.num_heads, enp.shape(x)[-2], enp.shape(kv)[-2]))
        q, k, v = self.query(x), self.key(kv), self.value(kv)

        def heads(t: Any) -> Any:
            t = enp.reshape(t, (-1,) + tuple(enp.shape(t)[-2:]))
            return enp.reshape(t, tuple(enp.shape(t)[:2]) + (self.num_heads, -1))
        q, k, v = heads(q), heads(k), heads(v)
        if training and self.dropout_rate > 0:  # dropout on the attention weights, as flax does
            if key is None:
                raise TypeError("ember.nn.MultiHeadAttention: training with dropout needs key=")
            logits_mask = random.bernoulli(key, 1 - self.dropout_rate, (q.shape[0], self.num_heads, q.shape[1],
                                                                        k.shape[1]))
            out = _attention_with_dropout(q, k, v, mask, is_causal, logits_mask, 1 - self.dropout_rate)
        else:
            out = dot_product_attention(q, k, v, mask=mask, is_causal=is_causal)
        out = enp.reshape(out, tuple(batch) + tuple(enp.shape(out)[1:2]) + (-1,))
        return self.out(out)

    def _check_sequence(self, what: str, t: Any) -> None:
        """t must be a floating-point (..., T, features) sequence of feature vectors."""
        if enp.ndim(t) < 2 or enp.shape(t)[-1] != self.features:
            raise ValueError(f"ember.nn.MultiHeadAttention: expected {what} of shape (..., T, {self.features}) (a "
                             f"sequence of T vectors of {self.features} features), got shape {tuple(enp.shape(t))}")
        _common_dtype("MultiHeadAttention", t, [self.query.weight])

    def _mask(self, mask: Any, full: tuple[int, ...]) -> Any:
        """The boolean mask, checked against full = (*batch, heads, T, S), with the batch dimensions flattened into
        one as the attention computes."""
        mask = enp.asarray(mask)
        if not dt.is_bool(mask.dtype):
            raise TypeError(f"ember.nn.MultiHeadAttention: mask must be boolean (True = attend), got "
                            f"{mask.dtype.name}{list(mask.shape)}")
        try:
            fits = np.broadcast_shapes(tuple(mask.shape), full) == full
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"ember.nn.MultiHeadAttention: mask of shape {tuple(mask.shape)} does not broadcast to "
                             f"(*batch, num_heads, T, S) = {full}")
        return enp.reshape(enp.broadcast_to(mask, full), (-1,) + full[-3:]) if len(full) > 4 else mask


def _attention_with_dropout(q: Any, k: Any, v: Any, mask: Any, is_causal: bool, keep: Any, keep_prob: float
                            ) -> Any:
    probs = attention_weights(q, k, mask=mask, is_causal=is_causal)
    return enp.einsum("BNTS,BSNH->BTNH", enp.where(keep, probs / keep_prob, 0), v)


class Lambda(Module):
    """A function as a layer (for Sequential): Lambda(ember.nn.relu)."""

    def __init__(self, fn: Callable[[Any], Any]):
        self.fn = fn

    def __call__(self, x: Any) -> Any:
        return self.fn(x)


class Sequential(Module):
    """Layers applied in order. Dropout layers get their own key from key=; training= reaches Dropout layers.
    Plain functions (ember.nn.relu) are allowed as layers."""

    def __init__(self, *layers: Any):
        self.layers = tuple(layer if isinstance(layer, Module) else Lambda(layer) for layer in layers)

    def __call__(self, x: Any, *, key: Any = None, training: bool = False) -> Any:
        dropouts = sum(isinstance(layer, Dropout) for layer in self.layers)
        keys = iter(random.split(key, dropouts) if key is not None and dropouts else [None] * dropouts)
        for layer in self.layers:
            if isinstance(layer, Dropout):
                x = layer(x, key=next(keys), training=training)
            elif isinstance(layer, BatchNorm):
                raise TypeError("ember.nn.Sequential: BatchNorm returns an updated layer; call it outside "
                                "Sequential (y, bn = bn(x, training=...))")
            else:
                x = layer(x)
        return x

    def __getitem__(self, i: int) -> Any:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)


class MLP(Module):
    """depth hidden layers of width_size with activation, then a Linear to out_size (and final_activation)."""

    def __init__(self, in_size: int, out_size: int, width_size: int, depth: int,
                 activation: Callable[[Any], Any] = relu, final_activation: Callable[[Any], Any] = _identity,
                 use_bias: bool = True, *, key: Any, dtype: Any = None):
        keys = _keys(key, depth + 1, "MLP")
        sizes = [in_size] + [width_size] * depth + [out_size]
        self.layers = tuple(Linear(a, b, use_bias, key=k, dtype=dtype) for a, b, k in zip(sizes, sizes[1:], keys))
        self.activation, self.final_activation = activation, final_activation

    def __call__(self, x: Any) -> Any:
        _check_last("MLP", x, self.layers[0].in_features)
        _common_dtype("MLP", x, [self.layers[0].weight])
        for layer in self.layers[:-1]:
            x = self.activation(layer(x))
        return self.final_activation(self.layers[-1](x))
