"""Oracle tests of shard_map, sharding_constraint and shard_alike (ember/_control/shard_map.py,
ember/_prims/sharding.py) on a mesh of the 2 CPU devices tests/conftest.py gives ember: values eagerly and under jit,
derivatives in both modes (through the partitioned programs), batching; the oracles are the same global functions
without sharding."""
import functools

import jax.numpy as jnp
from jax.experimental.shard_alike import shard_alike as jax_shard_alike
import numpy as np

import ember
from ember import lax
from ember.experimental.shard_alike import shard_alike
from ember.sharding import NamedSharding, PartitionSpec as P
from oracle import Case, oracle_tests

F = ["float32"]


@functools.cache
def _mesh():  # (Auto: a constraint may name only Auto axes, as in JAX)
    return ember.sharding.make_mesh((2,), ("x",), axis_types=(ember.sharding.AxisType.Auto,))


def _blockwise(x, w):
    """Each device's block of x's rows times w (replicated), its sine: a shard_map without collectives."""
    return ember.shard_map(lambda u, v: lax.sin(u) * v, mesh=_mesh(), in_specs=(P("x"), P()),
                           out_specs=P("x"))(x, w)


def _column_sums(x):
    """The sum over the rows, computed per device on its rows and then summed across devices (a psum), replicated."""
    return ember.shard_map(lambda u: lax.psum(u.sum(0), "x"), mesh=_mesh(), in_specs=P("x"), out_specs=P())(x)


def _tied(x, y):
    """x's square split over the mesh's rows, tied to y's double (XLA splits that alike): a partitioned program."""
    u, v = shard_alike(lax.with_sharding_constraint(x * x, NamedSharding(_mesh(), P("x"))), y * 2.0)
    return u, v


def _jax_tied(x, y):
    return jax_shard_alike(x * x, y * 2.0)


def _inner(x, y):
    return lax.sin(x) * y + x


_jitted = ember.jit(_inner)


@functools.cache
def _sharded_jitted():
    return ember.jit(_inner, in_shardings=(NamedSharding(_mesh(), P("x")), None),
                     out_shardings=NamedSharding(_mesh(), P(None, "x")))


CASES = [
    # a jitted function called inside the harness's jit / transformations is a pjit equation
    Case("pjit", lambda x, y: _jitted(x, y) * 2, lambda x, y: ((np.sin(x) * y + x) * 2).astype(x.dtype),
         [((4, 2), (4, 2))], F, jax=lambda x, y: (jnp.sin(x) * y + x) * 2),
    Case("pjit", lambda x, y: _sharded_jitted()(x, y), lambda x, y: (np.sin(x) * y + x).astype(x.dtype),
         [((4, 2), (4, 2))], F, jax=lambda x, y: jnp.sin(x) * y + x, name="pjit_sharded"),
    Case("shard_map", _blockwise, lambda x, w: (np.sin(x) * w).astype(x.dtype), [((4, 3), (3,))], F,
         jax=lambda x, w: jnp.sin(x) * w),
    Case("shard_map", _column_sums, lambda x: x.sum(0), [((4, 3),)], F, jax=lambda x: x.sum(0),
         name="shard_map_psum"),
    Case("sharding_constraint",
         lambda x: lax.with_sharding_constraint(x * x, NamedSharding(_mesh(), P(None, "x"))),
         lambda x: x * x, [((3, 4),)], F, jax=lambda x: x * x),
    Case("sharding_constraint",
         lambda x: lax.with_sharding_constraint(x * x, NamedSharding(_mesh(), P("x"))),
         lambda x: x * x, [((4, 3),)], ["complex64"], jax=lambda x: x * x, grad_dtype="complex128",
         name="sharding_constraint_complex"),
    # shard_alike: the identity on both values (ties only their shardings), on one device and over the mesh
    Case("shard_alike", lambda x, y: shard_alike(x * y, y), lambda x, y: [(x * y).astype(x.dtype), y],
         [((2, 3), (2, 3))], F, jax=lambda x, y: jax_shard_alike(x * y, y)),
    Case("shard_alike", _tied, lambda x, y: [(x * x).astype(x.dtype), (y * 2).astype(y.dtype)], [((4, 3), (4, 3))], F,
         jax=_jax_tied, name="shard_alike_partitioned"),
    Case("shard_alike", _tied, lambda x, y: [(x * x).astype(x.dtype), (y * 2).astype(y.dtype)], [((4, 3), (4, 3))],
         ["complex64"], jax=_jax_tied, grad_dtype="complex128", jacobians=False, name="shard_alike_complex"),
    # inspect_array_sharding: no results, so the values are the rest of the function's (its callbacks are called at
    # compile time: tests/test_sharding.py); its derivatives are its primal's, and vmap inspects the batched value
    Case("inspect_sharding", lambda x: (ember.debug.inspect_array_sharding(x, callback=lambda s: None), x * 2.0)[1],
         lambda x: x * 2.0, [((3,),)], F, jax=lambda x: x * 2.0, jacobians=False),
    Case("inspect_sharding", lambda x: (ember.debug.inspect_array_sharding(x, callback=lambda s: None), x * x)[1],
         lambda x: x * x, [((3,),)], ["complex64"], jax=lambda x: x * x, grad_dtype="complex128", jacobians=False,
         name="inspect_sharding_complex"),
]

test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)
