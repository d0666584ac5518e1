"""Oracle tests for the structural primitives of ember/_prims/shape.py, slicing.py, reduction.py and dot.py: each
has a Case below."""
import jax
import jax.lax as jlax
import jax.numpy as jnp
import numpy as np
import pytest

import ember
from ember import lax
from ember._transforms import key_reuse
from ember.experimental.xla_metadata import set_xla_metadata
from jax.experimental.xla_metadata import set_xla_metadata as jax_set_xla_metadata
from lax_oracles import ragged_dot_np
from oracle import Case, oracle_tests

FIB = ["float32", "float64", "int32", "bool"]
FI = ["float32", "float64", "int32"]


def _np_pad(x, config, value=0):
    out = x
    for axis, (lo, hi, interior) in enumerate(config):
        if interior:
            n = out.shape[axis]
            idx = np.repeat(np.arange(1, n), interior)
            out = np.insert(out, idx, value, axis=axis) if n > 1 else out
        pad = [(0, 0)] * out.ndim
        pad[axis] = (max(lo, 0), max(hi, 0))
        out = np.pad(out, pad, constant_values=value)
        sl = [slice(None)] * out.ndim
        sl[axis] = slice(-lo if lo < 0 else 0, out.shape[axis] + hi if hi < 0 else None)
        out = out[tuple(sl)]
    return out


def _dot(x, y, dims):
    return lax.dot_general(x, y, dims)


def _np_matmul(x, y):
    return np.matmul(x, y).astype(np.result_type(x, y))


# ragged dots: the group sizes are constants (summing to less than the ragged dimension, one group empty); the
# derivative oracle is JAX's masked formulation in jax.numpy (JAX's own ragged dot transposes mode 1 only, and its
# vmap, which jax.hessian needs, takes only all operands batched)
_GROUPS = np.array([2, 0, 4])
_RAGGED = {"noncontracting": ((((1,), (1,)), ((), ())), (0,), (0,)),
           "contracting": ((((1,), (0,)), ((), ())), (1,), ()),
           "batch": ((((2,), (1,)), ((0,), (0,))), (0,), ())}


def _ragged(kind, lib=lax):
    dims = _RAGGED[kind]
    if lib is np or lib is jnp:
        return lambda x, y: ragged_dot_np(x, y, _GROUPS, dims, lib)
    return lambda x, y: lax.ragged_dot_general(x, y, _GROUPS.astype(np.int32), lax.RaggedDotDimensionNumbers(*dims))


CASES = [
    Case("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (2, 3, 4), (1, 2)),
         lambda x: np.broadcast_to(x, (2, 3, 4)), [((3, 4),), ((1, 4),)], FIB,
         jax=lambda x: jlax.broadcast_in_dim(x, (2, 3, 4), (1, 2))),
    Case("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (3, 2), (0,)),
         lambda x: np.broadcast_to(x[:, None], (3, 2)), [((3,),)], FI,
         jax=lambda x: jlax.broadcast_in_dim(x, (3, 2), (0,)), name="broadcast_in_dim_inner"),
    Case("broadcast_in_dim", lambda x: lax.broadcast_in_dim(x, (2, 3), ()), lambda x: np.broadcast_to(x, (2, 3)),
         [((),)], FI, jax=lambda x: jlax.broadcast_in_dim(x, (2, 3), ()), name="broadcast_scalar"),
    Case("reshape", lambda x: lax.reshape(x, (3, 2)), lambda x: x.reshape(3, 2), [((2, 3),), ((6,),)], FIB,
         jax=lambda x: jlax.reshape(x, (3, 2))),
    Case("transpose", lambda x: lax.transpose(x, (2, 0, 1)), lambda x: np.transpose(x, (2, 0, 1)),
         [((2, 3, 4),)], FIB, jax=lambda x: jlax.transpose(x, (2, 0, 1))),
    Case("slice", lambda x: lax.slice(x, (1, 0), (4, 3), (2, 2)), lambda x: x[1:4:2, 0:3:2], [((5, 4),)], FIB,
         jax=lambda x: jlax.slice(x, (1, 0), (4, 3), (2, 2))),
    Case("slice", lambda x: lax.slice(x, (2,), (5,)), lambda x: x[2:5], [((6,),)], FI,
         jax=lambda x: jlax.slice(x, (2,), (5,)), name="slice_unit_stride"),
    Case("pad", lambda x, v: lax.pad(x, v, ((1, 2, 1), (0, -1, 0))),
         lambda x, v: _np_pad(x, ((1, 2, 1), (0, -1, 0)), v),
         [((3, 4), ())], FI, jax=lambda x, v: jlax.pad(x, v, ((1, 2, 1), (0, -1, 0)))),
    Case("concatenate", lambda x, y: lax.concatenate([x, y, x], 1), lambda x, y: np.concatenate([x, y, x], 1),
         [((2, 3), (2, 1))], FIB, jax=lambda x, y: jlax.concatenate([x, y, x], 1)),
    Case("split", lambda x: lax.split(x, (1, 0, 2), 1), lambda x: np.split(x, [1, 1], axis=1),
         [((2, 3),), ((4, 3, 2),)], FIB, jax=lambda x: jlax.split(x, (1, 0, 2), 1)),
    Case("split", lambda x: lax.split(x, (3, 1), -1), lambda x: np.split(x, [3], axis=-1), [((2, 4),)], FI,
         jax=lambda x: jlax.split(x, (3, 1), -1), name="split_last_axis"),
    Case("squeeze", lambda x: lax.squeeze(x, (0, 2)), lambda x: x.reshape(x.shape[1], x.shape[3]),
         [((1, 3, 1, 2),), ((1, 4, 1, 1),)], FIB, jax=lambda x: jlax.squeeze(x, (0, 2))),
    Case("stack", lambda x, y: lax.stack([x, y, x], 1), lambda x, y: np.stack([x, y, x], 1),
         [((2, 3), (2, 3)), ((4,), (4,))], FIB, jax=lambda x, y: jlax.stack([x, y, x], 1)),
    Case("unstack", lambda x: lax.unstack(x, 1), lambda x: tuple(np.moveaxis(x, 1, 0)),
         [((2, 3, 2),), ((4, 1),)], FIB, jax=lambda x: jlax.unstack(x, 1)),
    Case("tile", lambda x: lax.tile(x, (2, 1, 3)), lambda x: np.tile(x, (2, 1, 3)),
         [((2, 3, 1),), ((1, 2, 2),)], FIB, jax=lambda x: jlax.tile(x, (2, 1, 3))),
    Case("copy", lambda x: ember.numpy.copy(x) * 2, lambda x: (x * 2).astype(x.dtype), [((2, 3),)], FI,
         jax=lambda x: jnp.copy(x) * 2),
    Case("device_put", lambda x, y: [2 * v for v in ember.device_put([x, y])],
         lambda x, y: [(2 * x).astype(x.dtype), (2 * y).astype(y.dtype)], [((2, 3), (4,))], FI,
         jax=lambda x, y: [2 * v for v in jax.device_put([x, y])]),
    # stage_p bound directly (lax.stage binds nothing while staging: tests/test_lax_misc.py), the identity
    Case("stage", lambda x: lax.stage_p.bind(x) * 2, lambda x: (x * 2).astype(x.dtype), [((2, 3),)], FI,
         jax=lambda x: jlax.stage(x) * 2),
    # the key-reuse checker's markers (ember._transforms.key_reuse), bound directly: the identity under every rule
    *(Case(f"key_{m}", lambda x, m=m: getattr(key_reuse, f"key_{m}_p").bind(x) * 2, lambda x: (x * 2).astype(x.dtype),
           [((2, 3),)], FI, jax=lambda x: x * 2) for m in ("wrap", "fresh", "consume", "unwrap")),
    # set_xla_metadata's value form (the identity; its lowering marks the op giving x)
    Case("xla_metadata_value", lambda x: set_xla_metadata(x * 3, tag="t") * 2, lambda x: (x * 6).astype(x.dtype),
         [((2, 3),)], FI, jax=lambda x: jax_set_xla_metadata(x * 3, tag="t") * 2),
    Case("rev", lambda x: lax.rev(x, (0, 2)), lambda x: x[::-1, :, ::-1], [((2, 3, 4),), ((5, 1, 2),)], FIB,
         jax=lambda x: jlax.rev(x, (0, 2))),
    Case("iota", lambda x: lax.add(lax.convert_element_type(lax.broadcasted_iota("int32", (2, 3), 1), x.dtype), x),
         lambda x: (np.arange(3)[None, :] + x).astype(x.dtype), [((2, 3),)], FI, grad=False),
    Case("reduce_sum", lambda x: lax.reduce_sum(x, (1,)), lambda x: x.sum(1).astype(x.dtype),
         [((3, 4),), ((2, 3, 4),)], FI, jax=lambda x: jnp.sum(x, 1)),
    Case("reduce_sum", lambda x: lax.reduce_sum(x, None), lambda x: x.sum().astype(x.dtype),
         [((3, 4),)], FI, jax=lambda x: jnp.sum(x), name="reduce_sum_all"),
    Case("reduce_max", lambda x: lax.reduce_max(x, (0,)), lambda x: x.max(0), [((3, 4),), ((5,),)], FIB,
         jax=lambda x: jnp.max(x, 0)),
    Case("reduce_min", lambda x: lax.reduce_min(x, (1,)), lambda x: x.min(1), [((3, 4),), ((2, 5),)], FIB,
         jax=lambda x: jnp.min(x, 1)),
    Case("dot_general", lambda x, y: _dot(x, y, (((1,), (0,)), ((), ()))), _np_matmul,
         [((3, 4), (4, 5)), ((1, 7), (7, 2))], FI, jax=lambda x, y: jlax.dot_general(x, y, (((1,), (0,)), ((), ())))),
    Case("dot_general", lambda x, y: _dot(x, y, (((2,), (1,)), ((0,), (0,)))), _np_matmul,
         [((2, 3, 4), (2, 4, 5))], FI, jax=lambda x, y: jlax.dot_general(x, y, (((2,), (1,)), ((0,), (0,)))),
         name="dot_general_batched"),
    Case("dot_general", lambda x, y: _dot(x, y, (((0, 2), (3, 2)), ((1,), (0,)))),
         lambda x, y: np.einsum("abc,bdca->bd", x, y).astype(np.result_type(x, y)),
         [((2, 3, 4), (3, 5, 4, 2))], FI, jax=lambda x, y: jlax.dot_general(x, y, (((0, 2), (3, 2)), ((1,), (0,)))),
         name="dot_general_permuted"),
    Case("dot_general", lambda x, y: _dot(x, y, (((0,), (0,)), ((), ()))), lambda x, y: np.dot(x, y).astype(x.dtype),
         [((4,), (4,))], FI, jax=lambda x, y: jlax.dot_general(x, y, (((0,), (0,)), ((), ()))), name="dot_vector"),
    Case("ragged_dot_general", _ragged("noncontracting"), _ragged("noncontracting", np), [((7, 3), (3, 3, 2))], FI,
         jax=_ragged("noncontracting", jnp)),
    Case("ragged_dot_general", _ragged("contracting"), _ragged("contracting", np), [((2, 7), (7, 3))], FI,
         jax=_ragged("contracting", jnp), name="ragged_dot_contracting"),
    Case("ragged_dot_general", _ragged("batch"), _ragged("batch", np), [((3, 2, 4), (3, 4, 2))], FI,
         jax=_ragged("batch", jnp), name="ragged_dot_batch"),
]


test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)


def test_reductions_keep_ties_split_evenly():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]])
    g = ember.grad(lambda x: ember.numpy.sum(lax.reduce_max(x, (1,))))(x)
    np.testing.assert_allclose(np.asarray(g), [[0, 0.5, 0.5], [0.5, 0, 0.5]])


def test_zero_size_arrays():
    x = np.zeros((0, 3), np.float32)
    np.testing.assert_array_equal(np.asarray(lax.reduce_sum(ember.asarray(x), (0,))), np.zeros(3, np.float32))
    np.testing.assert_array_equal(np.asarray(lax.concatenate([x, x], 0)), np.zeros((0, 3), np.float32))


@pytest.mark.parametrize("call,message", [
    (lambda: lax.reshape(np.ones((2, 3), np.float32), (4, 2)), r"reshape: cannot reshape f32\[2,3\] \(6 elements\)"),
    (lambda: lax.transpose(np.ones((2, 3), np.float32), (0, 0)), r"transpose: permutation \(0, 0\)"),
    (lambda: lax.slice(np.ones((4,), np.float32), (1,), (6,)), r"slice: invalid bounds \[1:6:1\]"),
    (lambda: lax.dot_general(np.ones((2, 3), np.float32), np.ones((4, 5), np.float32), (((1,), (0,)), ((), ()))),
     r"dot_general: contracting dimensions \(1,\) of f32\[2,3\] and \(0,\) of f32\[4,5\] have different sizes"),
    (lambda: lax.concatenate([np.ones((2, 3), np.float32), np.ones((3, 3), np.float32)], 1),
     r"concatenate: operands must agree on all dimensions but 1"),
    (lambda: lax.broadcast_in_dim(np.ones((3,), np.float32), (2, 4), (1,)), r"broadcast_in_dim: operand f32\[3\]"),
    (lambda: lax.reduce_sum(np.ones((3,), np.float32), (1,)), r"reduce_sum: axis 1 is out of bounds"),
])
def test_shape_errors_are_clear(call, message):
    with pytest.raises((TypeError, ValueError), match=message):
        call()


def test_split_vjp_fills_unused_pieces_with_zeros():
    """A piece without a cotangent (unused by the function) pulls back zeros, as in JAX."""
    x = np.arange(12.0).reshape(3, 4)
    grad = ember.grad(lambda v: (lax.split(v, (1, 2, 1), 1)[1] ** 2).sum())(x)
    expected = jax.grad(lambda v: (jlax.split(v, (1, 2, 1), 1)[1] ** 2).sum())(x)
    np.testing.assert_array_equal(np.asarray(grad), np.asarray(expected))
