"""ember.nn.initializers: jax.nn.initializers' factories. Each returns init(key, shape, dtype=float) -> array; with
the same key they give JAX's values bit for bit (ember.random draws JAX's numbers)."""
from __future__ import annotations

import math
import operator
from typing import Any, Callable, Sequence

import numpy as np

from ember import numpy as enp
from ember import random
from ember._core import dtypes as dt

Initializer = Callable[..., Any]


def _dtype(dtype: Any, takes: str = "float", name: str | None = None) -> np.dtype:
    """The initializer's dtype (float32 by default; 64-bit narrowed without x64, with a warning): takes is what
    the initializer accepts, as JAX's: "float", "float or complex" (the normal family), or "any" (zeros, ones,
    constant); name, the initializer's, where its messages give it."""
    dtype = dt.default_float_dtype() if dtype is None else dt.check_user_dtype(dtype, name or "initializer")
    ok = {"float": dt.is_float, "float or complex": dt.is_inexact, "any": lambda d: True}[takes]
    if not ok(dtype):
        where = f"ember.nn.initializers.{name}" if name else "ember.nn.initializers"
        raise TypeError(f"{where}: dtype must be a {takes} dtype, got {dtype.name}")
    return dtype


def _shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(operator.index(d) for d in shape)


def zeros(key: Any, shape: Sequence[int], dtype: Any = None) -> Any:
    """An initializer of zeros (jax.nn.initializers.zeros)."""
    return enp.zeros(_shape(shape), _dtype(dtype, "any"))


def ones(key: Any, shape: Sequence[int], dtype: Any = None) -> Any:
    """An initializer of ones (jax.nn.initializers.ones)."""
    return enp.ones(_shape(shape), _dtype(dtype, "any"))


def constant(value: Any, dtype: Any = None) -> Initializer:
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        return enp.full(_shape(shape), value, dtype=_dtype(dtype, "any"))
    return init


def uniform(scale: Any = 1e-2, dtype: Any = None) -> Initializer:
    """Uniform in [0, scale)."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dtype = _dtype(dtype)
        return random.uniform(key, _shape(shape), dtype) * np.asarray(scale, dtype)
    return init


def normal(stddev: Any = 1e-2, dtype: Any = None) -> Initializer:
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dtype = _dtype(dtype, "float or complex")
        return random.normal(key, _shape(shape), dtype) * np.asarray(stddev, dtype)
    return init


def truncated_normal(stddev: Any = 1e-2, dtype: Any = None, lower: Any = -2.0, upper: Any = 2.0) -> Initializer:
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dtype = _dtype(dtype)
        return random.truncated_normal(key, lower, upper, _shape(shape), dtype) * np.asarray(stddev, dtype)
    return init


def _fans(shape: tuple[int, ...], in_axis: Any, out_axis: Any, batch_axis: Any) -> tuple[float, float]:
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ValueError(f"ember.nn.initializers: cannot compute the fans of a {len(shape)}-dimensional weight "
                         "with the default in_axis; it needs at least 2 dimensions, or give in_axis")

    def size(axes: Any) -> int:
        return shape[axes] if isinstance(axes, int) else math.prod(shape[i] for i in axes)
    in_size, out_size, batch_size = size(in_axis), size(out_axis), size(batch_axis)
    receptive_field = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive_field, out_size * receptive_field


def variance_scaling(scale: Any, mode: str, distribution: str, in_axis: Any = -2, out_axis: Any = -1,
                     batch_axis: Any = (), dtype: Any = None) -> Initializer:
    """Samples with variance scale / fan (fan_in, fan_out, their mean or geometric mean), from a truncated normal,
    a normal or a uniform distribution, as jax.nn.initializers.variance_scaling."""
    if mode not in ("fan_in", "fan_out", "fan_avg", "fan_geo_avg"):
        raise ValueError(f"ember.nn.initializers.variance_scaling: invalid mode {mode!r}; expected 'fan_in', "
                         "'fan_out', 'fan_avg' or 'fan_geo_avg'")
    if distribution not in ("truncated_normal", "normal", "uniform"):
        raise ValueError(f"ember.nn.initializers.variance_scaling: invalid distribution {distribution!r}; "
                         "expected 'truncated_normal', 'normal' or 'uniform'")

    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        shape, dtype = _shape(shape), _dtype(dtype, "float or complex")
        fan_in, fan_out = _fans(shape, in_axis, out_axis, batch_axis)
        denominator = {"fan_in": fan_in, "fan_out": fan_out, "fan_avg": (fan_in + fan_out) / 2,
                       "fan_geo_avg": (fan_in * fan_out) ** 0.5}[mode]
        variance = np.asarray(scale / denominator, dtype)
        complex_ = dt.is_complex(dtype)
        if distribution == "truncated_normal":
            if complex_:  # (the modulus of a complex normal truncated at 2 has this standard deviation; the
                # complex square root computed as XLA computes it, as JAX's)
                return _complex_truncated_normal(key, 2, shape, dtype) * (
                    enp.sqrt(enp.asarray(variance)) / np.asarray(0.95311164380491208, dtype))
            stddev = np.sqrt(variance) / np.asarray(0.8796256610342398, dtype)  # the std of N(0, 1) on [-2, 2]
            return random.truncated_normal(key, -2, 2, shape, dtype) * stddev
        if distribution == "normal":
            return random.normal(key, shape, dtype) * np.sqrt(variance)
        if complex_:
            return _complex_uniform(key, shape, dtype) * np.sqrt(variance)
        return random.uniform(key, shape, dtype, -1) * np.sqrt(np.asarray(3 * variance, dtype))
    return init


def _polar(key: Any, shape: tuple[int, ...], dtype: np.dtype, modulus: Callable[[Any], Any]) -> Any:
    """Complex samples modulus(u) * e^(i theta), u and theta / 2 pi uniform on [0, 1) from two keys (JAX's)."""
    key_r, key_theta = random.split(key)
    real = dt.real_dtype(dtype)
    r = modulus(random.uniform(key_r, shape, real).astype(dtype))
    theta = 2 * np.pi * random.uniform(key_theta, shape, real).astype(dtype)
    return r * enp.exp(1j * theta)


def _complex_uniform(key: Any, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """Uniform on the unit disk (variance 1)."""
    return _polar(key, shape, dtype, lambda u: enp.sqrt(2 * u))


def _complex_truncated_normal(key: Any, upper: float, shape: tuple[int, ...], dtype: np.dtype) -> Any:
    """A standard complex normal conditioned on a modulus below upper (inverse transform of its modulus)."""
    mass = 1 - enp.exp(enp.asarray(-(upper ** 2), dtype))
    return _polar(key, shape, dtype, lambda u: enp.sqrt(-enp.log(1 - mass * u)))


def glorot_uniform(in_axis: Any = -2, out_axis: Any = -1, batch_axis: Any = (), dtype: Any = None) -> Initializer:
    return variance_scaling(1.0, "fan_avg", "uniform", in_axis, out_axis, batch_axis, dtype)


def glorot_normal(in_axis: Any = -2, out_axis: Any = -1, batch_axis: Any = (), dtype: Any = None) -> Initializer:
    return variance_scaling(1.0, "fan_avg", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


def lecun_uniform(in_axis: Any = -2, out_axis: Any = -1, batch_axis: Any = (), dtype: Any = None) -> Initializer:
    return variance_scaling(1.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def lecun_normal(in_axis: Any = -2, out_axis: Any = -1, batch_axis: Any = (), dtype: Any = None) -> Initializer:
    return variance_scaling(1.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


def he_uniform(in_axis: Any = -2, out_axis: Any = -1, batch_axis: Any = (), dtype: Any = None) -> Initializer:
    return variance_scaling(2.0, "fan_in", "uniform", in_axis, out_axis, batch_axis, dtype)


def he_normal(in_axis: Any = -2, out_axis: Any = -1, batch_axis: Any = (), dtype: Any = None) -> Initializer:
    return variance_scaling(2.0, "fan_in", "truncated_normal", in_axis, out_axis, batch_axis, dtype)


xavier_uniform, xavier_normal = glorot_uniform, glorot_normal
kaiming_uniform, kaiming_normal = he_uniform, he_normal


def orthogonal(scale: Any = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """A uniformly random orthogonal matrix (ember.random.orthogonal) of shape (prod of the other axes,
    shape[column_axis]), reshaped to shape and times scale; orthonormal columns when there are at least as many rows
    as columns, orthonormal rows otherwise (jax.nn.initializers.orthogonal)."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dtype = _dtype(dtype, "float or complex", "orthogonal")
        shape = _shape(shape)
        if len(shape) < 2:
            raise ValueError(f"ember.nn.initializers.orthogonal: needs a shape of at least 2 dimensions, got {shape}")
        if not -len(shape) <= column_axis < len(shape):
            raise ValueError(f"ember.nn.initializers.orthogonal: column_axis {column_axis} is out of bounds for "
                             f"shape {shape}")
        if 0 in shape:
            return enp.zeros(shape, dtype)
        n_cols = shape[column_axis]
        q = random.orthogonal(key, math.prod(shape) // n_cols, (), dtype, n_cols)
        q = enp.reshape(q, tuple(np.delete(shape, column_axis)) + (n_cols,))
        return enp.asarray(scale, dtype) * enp.moveaxis(q, -1, column_axis)
    return init


def delta_orthogonal(scale: Any = 1.0, column_axis: int = -1, dtype: Any = None) -> Initializer:
    """A convolution kernel (spatial dims..., in, out; 1 to 3 spatial dims) that is zero but at the centre of its
    window, where it is an orthogonal (in, out) matrix (orthogonal's, scaled): a convolution that preserves norms at
    initialisation (jax.nn.initializers.delta_orthogonal). Needs in <= out."""
    def init(key: Any, shape: Sequence[int], dtype: Any = dtype) -> Any:
        dtype = _dtype(dtype, "float or complex", "delta_orthogonal")
        shape = _shape(shape)
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"ember.nn.initializers.delta_orthogonal: needs a 3-, 4- or 5-dimensional kernel shape "
                             f"(spatial dims, in, out), got {shape}")
        if shape[-1] < shape[-2]:
            raise ValueError(f"ember.nn.initializers.delta_orthogonal: the kernel's input features ({shape[-2]}) must "
                             f"be at most its output features ({shape[-1]}), got shape {shape}")
        matrix = orthogonal(scale, column_axis, dtype)(key, shape[-2:], dtype)
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        return enp.zeros(shape, dtype).at[centre].set(matrix)
    return init


__all__ = [
    "Initializer", "constant", "delta_orthogonal", "glorot_normal", "glorot_uniform", "he_normal", "he_uniform",
    "kaiming_normal", "kaiming_uniform", "lecun_normal", "lecun_uniform", "normal", "ones", "orthogonal",
    "truncated_normal", "uniform", "variance_scaling", "xavier_normal", "xavier_uniform", "zeros",
]
