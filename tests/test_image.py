"""ember.image against jax.image: resize by every method, up and down, with and without antialias, under jit (one
program for all of them; every combination eagerly in the slow run); scale_and_translate with its gradient in the
scale, also checked by finite differences."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.image
import ember.numpy as enp

IMAGE = np.random.default_rng(0).standard_normal((7, 5, 2)).astype(np.float32)
METHODS = ["nearest", "linear", "cubic", "lanczos3", "lanczos5", "area", "cubic-pytorch"]
SHAPES = [((12, 9, 2), True), ((3, 2, 2), True), ((3, 11, 2), False), ((7, 3, 2), False)]


QUICK = [m for m in METHODS if m != "lanczos5"]  # (lanczos3's code with another radius: in the slow run)


def resize_all(lib, x):
    return [lib.image.resize(x, *SHAPES[i % len(SHAPES)][:1], method, antialias=SHAPES[i % len(SHAPES)][1])
            for i, method in enumerate(QUICK)]


def test_resize_as_jax():
    for method, ours, theirs in zip(QUICK, ember.jit(lambda x: resize_all(ember, x))(IMAGE),
                                    jax.jit(lambda x: resize_all(jax, x))(IMAGE)):
        np.testing.assert_allclose(ours, theirs, atol=1e-5, err_msg=method)
    ints = np.arange(6, dtype=np.int32).reshape(2, 3)
    for method in ("bilinear", ember.image.ResizeMethod.NEAREST):  # (the result's type, without running it)
        theirs = jax.eval_shape(lambda x: jax.image.resize(x, (4, 6), getattr(method, "name", method).lower()), ints)
        assert ember.eval_shape(lambda x: ember.image.resize(x, (4, 6), method), ints).dtype == theirs.dtype
    with pytest.raises(ValueError, match="Unknown resize method"):
        ember.image.resize(IMAGE, (3, 3, 2), "sinc")
    with pytest.raises(ValueError, match="number of dimensions"):
        ember.image.resize(IMAGE, (3, 3), "linear")


@pytest.mark.slow
def test_resize_every_combination_eagerly_as_jax():
    for method, (shape, _), antialias in itertools.product(METHODS, SHAPES, (True, False)):
        np.testing.assert_allclose(ember.image.resize(IMAGE, shape, method, antialias=antialias),
                                   jax.image.resize(IMAGE, shape, method, antialias=antialias), atol=1e-5,
                                   err_msg=f"{method} {shape} {antialias}")


def test_scale_and_translate_and_its_gradient_as_jax():
    scale, shift = np.array([1.7, 0.55], np.float32), np.array([0.3, -0.8], np.float32)

    def f(lib, np_, s, method="linear"):
        return lib.image.scale_and_translate(IMAGE, (10, 4, 2), (0, 1), s, shift, method).sum()
    value_and_grad = ember.jit(ember.value_and_grad(lambda s: f(ember, enp, s)))
    value, grad = value_and_grad(scale)
    want = jax.jit(jax.value_and_grad(lambda s: f(jax, jnp, s)))(scale)
    np.testing.assert_allclose(value, want[0], rtol=1e-5)
    np.testing.assert_allclose(grad, want[1], rtol=1e-4)
    eps = np.float32(1e-2)
    numeric = [(value_and_grad(scale + eps * e)[0] - value_and_grad(scale - eps * e)[0]) / (2 * eps)
               for e in np.eye(2, dtype=np.float32)]
    np.testing.assert_allclose(grad, numeric, rtol=2e-2)
    with pytest.raises(ValueError, match="Nearest"):
        ember.image.scale_and_translate(IMAGE, (10, 4, 2), (0, 1), scale, shift, "nearest")
