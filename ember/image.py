"""ember.image, as jax.image: resizing and resampling images (arrays of any rank) with the separable kernels of
JAX's image module (nearest, linear, cubic, Lanczos, area).

Each resampled dimension is one matrix product: the (input size, output size) matrix of kernel weights of each
output pixel's centre, mapped back into the input, over the input pixels (pixels are half-centred: pixel i spans
[i, i + 1)); the kernel widens by the inverse scale when downsampling with antialias (a low-pass filter), and the
weights of each output pixel sum to one. Everything is ember.numpy, so it works eagerly, under jit and under every
transformation (scale and translation may be traced)."""
from __future__ import annotations

import enum
import math
from typing import Any, Callable, Sequence

import numpy as np

from ember import numpy as enp
from ember._core.checks import static_ints


class ResizeMethod(enum.Enum):
    """Image resize method (as jax.image.ResizeMethod): NEAREST, LINEAR, LANCZOS3, LANCZOS5, CUBIC (Keys, a=-0.5),
    CUBIC_PYTORCH (as CUBIC with antialias; else OpenCV's a=-0.75 with the edges repeated), AREA (the average of
    the input pixels under each output pixel)."""
    NEAREST = 0
    LINEAR = 1
    LANCZOS3 = 2
    LANCZOS5 = 3
    CUBIC = 4
    CUBIC_PYTORCH = 5
    AREA = 6

    @staticmethod
    def from_string(s: str) -> "ResizeMethod":
        for method, names in _NAMES.items():
            if s in names:
                return method
        raise ValueError(f'Unknown resize method "{s}"; known: {", ".join(n for v in _NAMES.values() for n in v)}')


_NAMES = {ResizeMethod.NEAREST: ("nearest",), ResizeMethod.LINEAR: ("linear", "bilinear", "trilinear", "triangle"),
          ResizeMethod.LANCZOS3: ("lanczos3",), ResizeMethod.LANCZOS5: ("lanczos5",),
          ResizeMethod.CUBIC: ("cubic", "bicubic", "tricubic"),
          ResizeMethod.CUBIC_PYTORCH: ("cubic-pytorch", "bicubic-pytorch"), ResizeMethod.AREA: ("area",)}


def _triangle(x: Any) -> Any:
    return enp.maximum(0.0, 1.0 - x)


def _cubic(a: float) -> Callable[[Any], Any]:
    """The cubic convolution kernel with parameter a, for distances x >= 0 (zero from 2 on)."""
    def kernel(x: Any) -> Any:
        near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        far = ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
        return enp.where(x >= 2.0, 0.0, enp.where(x >= 1.0, far, near))
    return kernel


def _lanczos(radius: float) -> Callable[[Any], Any]:
    """sinc(x) sinc(x / radius) inside the radius, for distances x >= 0 (1 near 0, where it is 0 / 0)."""
    def kernel(x: Any) -> Any:
        safe = enp.where(x > 1e-3, x, 1.0)
        value = radius * enp.sin(np.pi * safe) * enp.sin(np.pi * safe / radius) / (np.pi ** 2 * safe * safe)
        return enp.where(x > radius, 0.0, enp.where(x > 1e-3, value, 1.0))
    return kernel


_KERNELS: dict[ResizeMethod, tuple[int, Callable[[Any], Any] | None]] = {
    ResizeMethod.LINEAR: (1, _triangle), ResizeMethod.LANCZOS3: (3, _lanczos(3.0)),
    ResizeMethod.LANCZOS5: (5, _lanczos(5.0)), ResizeMethod.CUBIC: (2, _cubic(-0.5)),
    ResizeMethod.CUBIC_PYTORCH: (2, _cubic(-0.75)), ResizeMethod.AREA: (1, None),
}


def _normalized(weights: Any) -> Any:
    """Each column divided by its sum; a column summing to (almost) zero becomes zeros."""
    total = enp.sum(weights, axis=0, keepdims=True)
    usable = enp.abs(total) > 1000.0 * float(np.finfo(np.float32).eps)
    return enp.where(usable, weights / enp.where(total != 0, total, 1.0), 0.0)


def _weights(n_in: int, n_out: int, scale: Any, translation: Any, method: ResizeMethod, antialias: bool) -> Any:
    """The (n_in, n_out) resampling matrix of one dimension: output pixel j samples input coordinate
    (j + 0.5 - translation) / scale - 0.5."""
    dtype = enp.result_type(scale, translation)
    inv = 1.0 / scale
    out_index = enp.arange(n_out, dtype=dtype)
    if method is ResizeMethod.AREA:  # the overlap of output pixel j's span, mapped back, with input pixel i's
        left = out_index * inv - translation * inv
        starts = enp.arange(n_in, dtype=dtype)
        overlap = (enp.minimum((left + inv)[None, :], (starts + 1.0)[:, None])
                   - enp.maximum(left[None, :], starts[:, None]))
        weights = enp.maximum(0.0, overlap)
        return _in_range(_normalized(weights), out_index, inv, translation, n_in)
    radius, kernel = _KERNELS[method]
    assert kernel is not None
    centre = (out_index + 0.5) * inv - translation * inv - 0.5
    widen = enp.maximum(inv, 1.0) if antialias else 1.0
    repeat_edges = method is ResizeMethod.CUBIC_PYTORCH and not antialias
    pad = radius if repeat_edges else 0  # (pixels beyond the edges, repeating them)
    inputs = enp.arange(-pad, n_in + pad, dtype=dtype)
    weights = kernel(enp.abs(centre[None, :] - inputs[:, None]) / widen)
    if not repeat_edges:
        return _in_range(_normalized(weights), out_index, inv, translation, n_in)
    inner = weights[pad:pad + n_in]
    inner = inner.at[0].add(enp.sum(weights[:pad], axis=0)).at[n_in - 1].add(enp.sum(weights[pad + n_in:], axis=0))
    return _normalized(inner)


def _in_range(weights: Any, out_index: Any, inv: Any, translation: Any, n_in: int) -> Any:
    """weights with the columns of output pixels whose centre maps outside the input zeroed."""
    centre = (out_index + 0.5) * inv - translation * inv - 0.5
    inside = (centre >= -0.5) & (centre <= n_in - 0.5)
    return enp.where(inside[None, :], weights, 0.0)


def _as_method(method: str | ResizeMethod) -> ResizeMethod:
    if isinstance(method, ResizeMethod):
        return method
    if isinstance(method, str):
        return ResizeMethod.from_string(method)
    raise TypeError(f"method must be a ResizeMethod or a string, got {method!r}")


def _check_shape(op: str, image: Any, shape: Any) -> tuple[int, ...]:
    shape = tuple(static_ints(op, "shape", shape))
    if len(shape) != enp.ndim(image):
        raise ValueError(f"{op}: shape must have length equal to the number of dimensions of the image; got shape "
                         f"{shape} for an image of shape {enp.shape(image)}")
    if any(d < 0 for d in shape):
        raise ValueError(f"{op}: shape {shape} has a negative dimension")
    return shape


def _to_inexact(x: Any) -> Any:
    x = enp.asarray(x)
    return x if enp.issubdtype(x.dtype, enp.inexact) else x.astype(enp.result_type(x.dtype, enp.float32))


def _resample(image: Any, shape: tuple[int, ...], dims: Sequence[int], scales: Sequence[Any],
              translations: Sequence[Any], method: ResizeMethod, antialias: bool) -> Any:
    """image with each dimension of dims resampled to shape's size by its matrix (one product per dimension)."""
    out = image
    for d, scale, translation in zip(dims, scales, translations):
        weights = _weights(image.shape[d], shape[d], scale, translation, method, antialias).astype(image.dtype)
        out = enp.moveaxis(enp.tensordot(out, weights, axes=([d], [0])), -1, d)
    return out


def _resize_nearest(image: Any, shape: tuple[int, ...]) -> Any:
    """The input pixel under each output pixel's centre, in each resized dimension."""
    for d, (n_in, n_out) in enumerate(zip(image.shape, shape)):
        if n_in != n_out:
            centres = (np.arange(n_out, dtype=np.float32) + np.float32(0.5)) * np.float32(n_in) / np.float32(n_out)
            image = enp.take(image, np.floor(centres).astype(np.int32), axis=d)
    return image


def resize(image: Any, shape: Sequence[int], method: str | ResizeMethod, antialias: bool = True,
           precision: Any = None) -> Any:
    """image resampled to shape (as jax.image.resize), by method (a ResizeMethod or its name: "nearest",
    "linear"/"bilinear"/"trilinear"/"triangle", "cubic"/"bicubic"/"tricubic", "cubic-pytorch", "lanczos3",
    "lanczos5", "area"); the dimensions whose size changes are resampled. With antialias, downsampling filters
    (the kernel widens by the inverse scale). Integer images give floating-point results (except with
    "nearest"). precision is accepted for compatibility (the CPU computes the products in the image's dtype)."""
    shape = _check_shape("resize", image, shape)
    method = _as_method(method)
    if method is ResizeMethod.NEAREST:
        return _resize_nearest(enp.asarray(image), shape)
    image = _to_inexact(image)
    dims = [d for d in range(image.ndim) if image.shape[d] != shape[d]]
    scales = [1.0 if shape[d] == 0 else shape[d] / image.shape[d] for d in dims]
    if method is ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    return _resample(image, shape, dims, scales, [0.0] * len(dims), method, antialias)


def scale_and_translate(image: Any, shape: Sequence[int], spatial_dims: Sequence[int], scale: Any, translation: Any,
                        method: str | ResizeMethod, antialias: bool = True, precision: Any = None) -> Any:
    """image resampled to shape, the input location x of each dimension d in spatial_dims moving to
    x * scale[i] + translation[i] (as jax.image.scale_and_translate; pixels are half-centred, output pixels
    whose centre maps outside the input are zero). scale and translation may be traced (differentiable)."""
    shape = _check_shape("scale_and_translate", image, shape)
    method = _as_method(method)
    if method is ResizeMethod.NEAREST:
        raise ValueError("Nearest neighbor resampling is not currently supported for scale_and_translate.")
    image = _to_inexact(image)
    dims = [int(d) % image.ndim if -image.ndim <= int(d) < image.ndim else math.nan for d in spatial_dims]
    if any(d != d for d in dims) or len(set(dims)) != len(dims):
        raise ValueError(f"scale_and_translate: spatial_dims {tuple(spatial_dims)} must be distinct dimensions of "
                         f"an image of rank {image.ndim}")
    scale, translation = _to_inexact(scale), _to_inexact(translation)
    common = enp.result_type(scale, translation)
    scale, translation = scale.astype(common), translation.astype(common)
    if scale.shape != (len(dims),) or translation.shape != (len(dims),):
        raise ValueError(f"scale_and_translate: scale {scale.shape} and translation {translation.shape} must have "
                         f"one entry per spatial dimension ({len(dims)})")
    if method is ResizeMethod.CUBIC_PYTORCH and antialias:
        method = ResizeMethod.CUBIC
    return _resample(image, shape, dims, [scale[i] for i in range(len(dims))],
                     [translation[i] for i in range(len(dims))], method, antialias)


__all__ = ["ResizeMethod", "resize", "scale_and_translate"]
