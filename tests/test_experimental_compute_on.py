"""ember.experimental.compute_on against jax.experimental.compute_on on the CPU: the compute types and their checks,
the values computed inside (the host is the device), compute_on2's out_memory_spaces checks, as a context manager and
a decorator, under jit, grad and vmap."""
import jax
import jax.experimental.compute_on as jco
import numpy as np
import pytest

import ember
import ember.experimental.compute_on as eco

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")


@pytest.mark.parametrize("kind", ["device_host", "device", "tpu_sparsecore", "gpu_stream:1"])
def test_values_inside_are_the_same_as_jax(kind):
    x = np.linspace(0.0, 1.0, 5, dtype=np.float32)

    def f(lib, co):
        @co.compute_on(kind)
        @lib.jit
        def inner(v):
            return lib.numpy.sin(v) * 2
        return lambda v: inner(v) + 1
    np.testing.assert_array_equal(np.asarray(ember.jit(f(ember, eco))(x)), np.asarray(jax.jit(f(jax, jco))(x)))
    with eco.compute_on(kind):
        assert eco.current_compute_type() == kind
        got = ember.grad(lambda v: ember.numpy.sin(v).sum())(x)
    assert eco.current_compute_type() is None
    np.testing.assert_allclose(np.asarray(got), np.cos(x), rtol=1e-6)


def test_compute_on2_and_the_checks_as_jax():
    x = np.ones(2, np.float32)
    for ours, theirs in ((ember.memory.Space.Host, jax.memory.Space.Host),
                         ((ember.memory.Space.Device, ember.memory.Space.Host),
                          (jax.memory.Space.Device, jax.memory.Space.Host))):
        got = ember.jit(eco.compute_on2(lambda u: (u * 3, u + 1), compute_type="device_host",
                                        out_memory_spaces=ours))(x)
        want = jax.jit(jco.compute_on2(lambda u: (u * 3, u + 1), compute_type="device_host",
                                       out_memory_spaces=theirs))(x)
        for o, t in zip(got, want):
            np.testing.assert_array_equal(np.asarray(o), np.asarray(t))
    got = ember.vmap(eco.compute_on2(compute_type="device", out_memory_spaces=ember.memory.Space.Device)(
        lambda u: u * 2))(np.ones((3, 2), np.float32))
    np.testing.assert_array_equal(np.asarray(got), np.full((3, 2), 2.0))
    for module, space in ((eco, ember.memory.Space.Device), (jco, jax.memory.Space.Device)):
        with pytest.raises(ValueError, match="must be a tree prefix"):
            module.compute_on2(lambda u: (u, u), compute_type="device", out_memory_spaces=[space])(x)
        with pytest.raises(ValueError, match="Invalid compute type bogus"):
            with module.compute_on("bogus"):
                pass
        with pytest.raises(TypeError, match="compute_type argument must be a string"):
            with module.compute_on(3):
                pass
