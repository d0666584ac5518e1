"""lax.ragged_all_to_all: JAX 0.10.2 defines it, but jaxlib's CPU cannot compile it (XLA:CPU has no
ragged-all-to-all: checked here), so its oracle is JAX's own definition, the pseudo-code of its docstring, in numpy.
ember's (built from all_to_all) runs inside shard_map over the 2 CPU devices the tests give ember, eagerly and under
jit, under vmap with the axis name (which JAX refuses) over more members, and with axis_index_groups; its derivatives
and its batching under another vmap are the Case's in tests/prims/test_collectives.py."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
from ember import lax
from ember._control.shard_map import shard_map
from ember.sharding import PartitionSpec as P


def _reference(operands, outputs, input_offsets, send_sizes, output_offsets, recv_sizes):
    """JAX's definition, member by member: slice i of sender s goes to member i // (K / n); receiver r writes the
    slice from sender s (its i = s * K/n + j) at all_to_all(output_offsets)[i], recv_sizes[r][i] rows of it."""
    n = len(operands)
    each = len(input_offsets[0]) // n
    results = [np.array(o) for o in outputs]
    for r in range(n):
        for i in range(n * each):
            s, j = divmod(i, each)
            start, size = input_offsets[s][r * each + j], send_sizes[s][r * each + j]
            sent = operands[s][start:start + size]
            at, count = output_offsets[s][r * each + j], recv_sizes[r][i]
            results[r][at:at + count] = sent[:count]
    return results


def _exchange(rng, n, each, rows_in, rows_out, features=(2,)):
    """Random slices (K = n * each per member) whose sizes agree (recv_sizes = all_to_all(send_sizes)), each
    receiver's slices laid end to end in sender order from a random start, the output rows past them kept."""
    operands = [rng.normal(size=(rows_in,) + features).astype(np.float32) for _ in range(n)]
    outputs = [rng.normal(size=(rows_out,) + features).astype(np.float32) for _ in range(n)]
    sizes = rng.integers(0, 3, size=(n, n * each))          # sizes[s][d * each + j]
    starts = rng.integers(0, rows_in - 2, size=(n, n * each))
    out_offsets = np.zeros((n, n * each), np.int64)
    recv = np.zeros((n, n * each), np.int64)
    for d in range(n):
        at = int(rng.integers(0, 2))
        for s in range(n):
            for j in range(each):
                out_offsets[s, d * each + j] = at
                recv[d, s * each + j] = sizes[s, d * each + j]
                at += sizes[s, d * each + j]
        assert at <= rows_out
    return [operands, outputs] + [a.astype(np.int32) for a in (starts, sizes, out_offsets, recv)]


def _mesh():
    return ember.sharding.make_mesh((2,), ("x",))


def _body(*args):
    return lax.ragged_all_to_all(*args, axis_name="x")


def test_jaxs_docstring_example():
    operand = np.array([1, 2, 2, 3, 4, 0], np.float32)
    output = np.zeros(8, np.float32)
    args = [np.array(a, np.int32) for a in ([0, 1, 0, 1], [1, 2, 1, 1], [0, 0, 1, 2], [1, 1, 2, 1])]
    f = shard_map(_body, mesh=_mesh(), in_specs=P("x"), out_specs=P("x"))
    want = [1, 3, 0, 0, 2, 2, 4, 0]
    np.testing.assert_array_equal(np.asarray(ember.jit(f)(operand, output, *args)), want)
    np.testing.assert_array_equal(np.asarray(f(operand, output, *args)), want)


def test_jaxlib_cannot_run_it_on_the_cpu():
    mesh = jax.sharding.Mesh(np.array(jax.devices()[:2]), ("x",))
    spec = jax.sharding.PartitionSpec("x")
    f = jax.shard_map(lambda *a: jax.lax.ragged_all_to_all(*a, axis_name="x"), mesh=mesh, in_specs=spec,
                      out_specs=spec)
    args = [np.zeros(6, np.float32), np.zeros(8, np.float32)] + [np.zeros(4, np.int32)] * 4
    with pytest.raises(Exception, match="ragged-all-to-all` is not supported by XLA:CPU"):
        jax.jit(f)(*args)


@pytest.mark.parametrize("each", [1, 3])
def test_random_exchanges_on_two_devices(each):
    rng = np.random.default_rng(each)
    f = ember.jit(shard_map(_body, mesh=_mesh(), in_specs=P("x"), out_specs=P("x")))
    for _ in range(3):
        per_member = _exchange(rng, 2, each, rows_in=7, rows_out=2 + 2 * 2 * each + 1)
        got = f(*[np.concatenate(a) for a in per_member])
        want = np.concatenate(_reference(*per_member))
        np.testing.assert_array_equal(np.asarray(got), want)


def test_under_vmap_of_the_axis_name_which_jax_refuses():
    """vmap(axis_name) computes the exchange among the batch's members (here 4 of them, 2 slices each)."""
    rng = np.random.default_rng(7)
    per_member = _exchange(rng, 4, 2, rows_in=6, rows_out=20, features=(3, 2))
    got = ember.jit(ember.vmap(_body, axis_name="x"))(*[np.stack(a) for a in per_member])
    np.testing.assert_array_equal(np.asarray(got), np.stack(_reference(*per_member)))
    with pytest.raises(NotImplementedError):
        jax.vmap(lambda *a: jax.lax.ragged_all_to_all(*a, axis_name="x"), axis_name="x")(
            *[np.stack(a) for a in per_member])


def test_gradient_under_vmap_of_the_axis_name_equals_shard_maps():
    """Reverse mode sends the cotangents back (JAX's transpose): the same under vmap(axis_name) as through
    shard_map over the devices."""
    rng = np.random.default_rng(3)
    per_member = _exchange(rng, 2, 2, rows_in=6, rows_out=12)
    operands, outputs = np.stack(per_member[0]), np.stack(per_member[1])
    index_args = [np.stack(a) for a in per_member[2:]]
    w = rng.normal(size=(2, 12, 2)).astype(np.float32)

    def over_vmap(o, u):
        return ember.numpy.sum(ember.vmap(_body, axis_name="x")(o, u, *index_args) * w)

    def over_devices(o, u):
        f = shard_map(_body, mesh=_mesh(), in_specs=P("x"), out_specs=P("x"))
        out = f(o.reshape(-1, 2), u.reshape(-1, 2), *[a.reshape(-1) for a in index_args])
        return ember.numpy.sum(out.reshape(2, 12, 2) * w)
    got = ember.grad(over_vmap, (0, 1))(operands, outputs)
    want = ember.grad(over_devices, (0, 1))(operands, outputs)
    for g, e in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=1e-6)
    assert np.any(np.asarray(got[0]) != 0) and np.any(np.asarray(got[1]) == 0)  # (sent rows; overwritten rows)


def test_axis_index_groups():
    """Groups of one device each: every member exchanges with itself alone."""
    rng = np.random.default_rng(8)
    members = [_exchange(rng, 1, 2, rows_in=5, rows_out=8) for _ in range(2)]
    f = ember.jit(shard_map(lambda *a: lax.ragged_all_to_all(*a, axis_name="x", axis_index_groups=[[0], [1]]),
                            mesh=_mesh(), in_specs=P("x"), out_specs=P("x")))
    got = f(*[np.concatenate([m[k][0] for m in members]) for k in range(6)])
    want = np.concatenate([_reference(*m)[0] for m in members])
    np.testing.assert_array_equal(np.asarray(got), want)


def test_errors_as_jax():
    good = [np.zeros(6, np.float32), np.zeros(8, np.float32)] + [np.zeros(4, np.int32)] * 4

    def run(*args, axis_name="x"):
        return shard_map(lambda *a: lax.ragged_all_to_all(*a, axis_name=axis_name), mesh=_mesh(), in_specs=P("x"),
                         out_specs=P("x"))(*args)
    for k, name in enumerate(("input_offsets", "send_sizes", "output_offsets", "recv_sizes")):
        bad = list(good)
        bad[2 + k] = np.zeros(4, np.float32)
        with pytest.raises(ValueError, match=f"ragged_all_to_all {name} must be integer type"):
            run(*bad)
    bad = list(good)
    bad[2] = np.zeros((4, 2), np.int32)
    with pytest.raises(ValueError, match=r"ragged_all_to_all input_offsets must be rank 1 with positive dimension"):
        shard_map(lambda o, out, io, *rest: lax.ragged_all_to_all(o, out, io, *rest, axis_name="x"), mesh=_mesh(),
                  in_specs=(P("x"), P("x"), P(), P("x"), P("x"), P("x")), out_specs=P("x"))(*bad)
    with pytest.raises(ValueError, match="must be a multiple of the size 2"):
        run(good[0], good[1], *[np.zeros(6, np.int32)] * 4)
    with pytest.raises(TypeError, match="operand and output must be arrays of one dtype"):
        run(good[0], good[1].astype(np.int32), *good[2:])
    with pytest.raises(NameError, match="y"):
        run(*good, axis_name="y")
    with pytest.raises(RuntimeError, match="ragged_all_to_all must be used within a mapped context"):
        lax.ragged_all_to_all(*good, axis_name="x")
    with pytest.raises(RuntimeError, match="ragged_all_to_all must be used within a mapped context"):
        jax.lax.ragged_all_to_all(*[jnp.asarray(a) for a in good], axis_name="x")
