"""Run by tests/test_distributed.py under `mpiexec -n 2`: ember.distributed's MPI functions against numpy oracles
(every process can compute what every other process holds), then the data-parallel example's training check.
Prints one "ok: ..." line per check from process 0; any failure raises (and mpiexec ends the other process)."""
import pathlib
import sys

import ml_dtypes
import numpy as np
from mpi4py import MPI

import ember
import ember.distributed as dist
import ember.numpy as jnp

EXAMPLES = pathlib.Path(__file__).parent.parent / "examples"


def report(text):
    if rank == 0:
        print("ok:", text, flush=True)


def tree_of(r):
    """The tree process r passes: ember and numpy leaves of several dtypes, values depending on r."""
    base = np.arange(6, dtype=np.float32).reshape(2, 3) * (r + 1) - r
    return {"w": jnp.asarray(base), "b": (np.full(3, r, np.float64), jnp.asarray(base.astype(ml_dtypes.bfloat16))),
            "steps": np.array([r + 1, 10 * r], np.int32), "flag": np.array([r == 0, True]),
            "z": np.array([1 + 1j * r], np.complex64)}


ember.distributed.initialize()  # rank and size from MPI
rank, size = ember.process_index(), ember.process_count()
assert (rank, size) == (MPI.COMM_WORLD.Get_rank(), 2), (rank, size)
store = dist.key_value_store()
store.put(f"from/{rank}".encode(), f"process {rank}".encode())
assert store.get(f"from/{1 - rank}".encode(), 30) == f"process {1 - rank}".encode()
report(f"initialize from MPI: process {rank} of {size}, key-value store shared")

trees = [tree_of(r) for r in range(size)]
mine = trees[rank]
for op, combine in (("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min)):
    def oracle(*leaves):
        stacked = np.stack([np.asarray(leaf) for leaf in leaves])
        return combine(stacked.astype(np.complex128 if stacked.dtype.kind == "c" else np.float64), axis=0)
    candidates = {"sum": ["w", "b", "steps", "z"], "mean": ["w", "b", "z"], "max": ["w", "b", "steps", "flag"],
                  "min": ["w", "b", "steps", "flag"]}[op]
    got = dist.allreduce_gradients({k: mine[k] for k in candidates}, op=op)
    want = {k: ember.tree.map(oracle, *[t[k] for t in trees]) for k in candidates}
    for (path, value), expected, leaf in zip(ember.tree_util.tree_flatten_with_path(got)[0],
                                             ember.tree.leaves(want),
                                             ember.tree.leaves({k: mine[k] for k in candidates})):
        assert type(value) is type(leaf), (op, path, type(value), type(leaf))
        assert np.asarray(value).dtype == np.asarray(leaf).dtype, (op, path)
        tolerance = 1e-2 if np.asarray(leaf).dtype == ml_dtypes.bfloat16 else 1e-6
        np.testing.assert_allclose(np.asarray(value).astype(expected.dtype), expected, rtol=tolerance, err_msg=op)
report("allreduce_gradients sum/mean/max/min over float32, float64, bfloat16, int32, bool, complex64 leaves")

got = dist.broadcast_parameters(mine, root=1)
for value, expected, leaf in zip(ember.tree.leaves(got), ember.tree.leaves(trees[1]), ember.tree.leaves(mine)):
    assert type(value) is type(leaf) and np.asarray(value).dtype == np.asarray(leaf).dtype
    np.testing.assert_array_equal(np.asarray(value), np.asarray(expected))
report("broadcast_parameters from process 1, bit for bit")

try:
    dist.allreduce_gradients({"w": np.zeros(3 + rank, np.float32)})
except ValueError as err:
    assert "process 0: " in str(err) and "float32[3]" in str(err) and "float32[4]" in str(err), err
else:
    raise AssertionError("a tree mismatch between the processes was not detected")
for call, message in ((lambda: dist.allreduce_gradients(np.arange(3), op="mean"), "integer leaves"),
                      (lambda: dist.allreduce_gradients(np.ones(2), op="prod"), "op must be one of"),
                      (lambda: ember.jit(dist.allreduce_gradients)(jnp.ones(2)), "between jitted steps"),
                      (lambda: dist.broadcast_parameters(np.ones(2), root=2), "root must be a process rank")):
    try:
        call()
    except (TypeError, ValueError) as err:
        assert message in str(err), err
    else:
        raise AssertionError(f"no error: {message}")
report("mismatched trees and bad arguments raise in every process")

sys.path.insert(0, str(EXAMPLES))
import data_parallel_mpi  # noqa: E402

data_parallel_mpi.run(data_parallel_mpi.parse_args(["--steps", "20", "--check"]))
dist.shutdown()
report("shutdown")
