"""Oracle tests for the collectives of ember/_prims/collectives.py: each runs inside a shard_map over a mesh of the
2 CPU devices that tests/conftest.py gives ember, so the harness checks the lowered collectives numerically (eagerly
and under jit), their derivatives through shard_map, and batching of a shard_map holding them (an unnamed vmap: the
collectives batched member by member). The derivative oracles are jax.numpy formulations of the same global
functions (JAX's shard_map with check_vma refuses some of these out_specs, and JAX has no rule for pmax/pmin);
their batched meanings under vmap(axis_name) are tested against jax.vmap in tests/test_collectives_vmap.py."""
import functools

import jax.numpy as jnp
import numpy as np

import ember
from ember import lax
from ember._control.shard_map import shard_map
from ember.sharding import PartitionSpec as P
from oracle import Case, oracle_tests

F = ["float32"]
N = 2  # devices on the mesh's axis "x" (ember's CPU devices in the tests)
SHIFT = [(i, (i + 1) % N) for i in range(N)]


@functools.cache
def _mesh():
    return ember.sharding.make_mesh((N,), ("x",))


def _sharded(body, in_spec=P("x"), out_spec=P(), check_vma=True):
    """x -> shard_map(body) over the mesh, x split along its first dimension."""
    return lambda x: shard_map(body, mesh=_mesh(), in_specs=in_spec, out_specs=out_spec, check_vma=check_vma)(x)


def _blocks(x, n=N):
    """numpy or jax: x's first dimension cut into the n devices' blocks, stacked first."""
    return x.reshape((n, x.shape[0] // n) + x.shape[1:])


def _a2a(x):
    """all_to_all(v, 'x', 1, 0, tiled=True) with x split in rows: device k gets column block k of every device."""
    b = _blocks(x)  # (device j, rows r, columns (k, c))
    b = b.reshape(b.shape[:2] + (N, b.shape[2] // N))
    return b.transpose(2, 0, 1, 3).reshape(-1, b.shape[3])


def _roll(x):
    return jnp.roll(_blocks(x), 1, 0).reshape(x.shape) if isinstance(x, jnp.ndarray) else \
        np.roll(_blocks(x), 1, 0).reshape(x.shape)


def _index_scaled(x):
    return x * np.repeat(np.arange(N), x.shape[0] // N).astype(x.dtype)[:, None]


# ragged_all_to_all: each device (4 operand rows, 5 output rows) sends its rows [0, 2) to device 0 and row 2 to device
# 1; each receiver stacks its senders' slices from row 0, sender by sender (the offsets depend on the device).
_SEND = np.array([2, 1], np.int32)


def _ragged_body(v, o):
    me = lax.axis_index("x")
    offsets = lax.mul(_SEND, lax.broadcast(me, (N,)))          # where device `me`'s slices go on each receiver
    received = lax.select(lax.eq(lax.broadcast(me, (N,)), np.zeros(N, np.int32)), np.full(N, 2, np.int32),
                          np.full(N, 1, np.int32))             # each sender's slice here: _SEND[me] rows
    return lax.ragged_all_to_all(v, o, np.array([0, 2], np.int32), _SEND, offsets, received, axis_name="x")


def _ragged_sharded(x, o):
    return shard_map(_ragged_body, mesh=_mesh(), in_specs=(P("x"), P("x")), out_specs=P("x"))(x, o)


def _ragged_global(x, o):
    """The same exchange on the global arrays (numpy or jax.numpy): device 0's output rows 0-3 are both senders'
    rows 0-1, device 1's rows 0-1 their rows 2; the other rows keep the output's."""
    xs, os_ = _blocks(x), _blocks(o)
    lib = jnp if isinstance(x, jnp.ndarray) else np
    first = lib.concatenate([xs[0, :2], xs[1, :2], os_[0, 4:]])
    second = lib.concatenate([xs[0, 2:3], xs[1, 2:3], os_[1, 2:]])
    return lib.concatenate([first, second])


CASES = [
    Case("psum", _sharded(lambda v: lax.psum(v, "x")), lambda x: _blocks(x).sum(0), [((2 * N, 3),)], F,
         jax=lambda x: _blocks(x).sum(0)),
    Case("pmax", _sharded(lambda v: lax.pmax(v, "x")), lambda x: _blocks(x).max(0), [((2 * N, 3),)], F,
         jax=lambda x: _blocks(x).max(0)),
    Case("pmin", _sharded(lambda v: lax.pmin(v, ("x",))), lambda x: _blocks(x).min(0), [((2 * N, 3),)], F,
         jax=lambda x: _blocks(x).min(0)),
    # (all_gather's result varies over "x" as JAX types it, so out_specs=P() asks for check_vma=False; the
    # invariant gather, to="invarying", is typed the same on every device)
    Case("all_gather", _sharded(lambda v: lax.all_gather(v, "x", axis=1), check_vma=False),
         lambda x: _blocks(x).transpose(1, 0, 2), [((2 * N, 3),)], F, jax=lambda x: _blocks(x).transpose(1, 0, 2)),
    Case("all_gather_invariant", _sharded(lambda v: lax.all_gather(v, "x", axis=1, to="invarying")),
         lambda x: _blocks(x).transpose(1, 0, 2), [((2 * N, 3),)], F, jax=lambda x: _blocks(x).transpose(1, 0, 2)),
    # a replicated input cast to varying: each device's copy, stacked; its gradient sums the copies' cotangents
    Case("pvary", _sharded(lambda v: lax.pcast(v, "x", to="varying") * 2, in_spec=P(), out_spec=P("x")),
         lambda x: np.concatenate([x * 2] * N), [((2, 3),)], F, jax=lambda x: jnp.concatenate([x * 2] * N)),
    Case("reduce_scatter", _sharded(lambda v: lax.psum_scatter(v, "x", tiled=True), out_spec=P("x")),
         lambda x: _blocks(x).sum(0), [((2 * N * N, 3),)], F, jax=lambda x: _blocks(x).sum(0)),
    Case("all_to_all", _sharded(lambda v: lax.all_to_all(v, "x", 1, 0, tiled=True), out_spec=P("x")),
         _a2a, [((2 * N, 2 * N),)], F, jax=_a2a),
    Case("ppermute", _sharded(lambda v: lax.ppermute(v, "x", SHIFT), out_spec=P("x")), _roll, [((2 * N, 3),)], F,
         jax=_roll),
    Case("axis_index", _sharded(lambda v: v * lax.convert_element_type(lax.axis_index("x"), v.dtype),
                                out_spec=P("x")), _index_scaled, [((2 * N, 3),)], F, jax=_index_scaled),
    Case("ragged_all_to_all", _ragged_sharded, _ragged_global, [((4 * N, 3), (5 * N, 3))], F, jax=_ragged_global),
]

test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)
