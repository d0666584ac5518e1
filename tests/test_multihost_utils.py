"""ember.experimental.multihost_utils against jax.experimental.multihost_utils in one process (the same values,
types, dtypes and shardings), and across two processes of a run (ember.distributed.initialize): gathers, broadcasts,
barriers and equality checks through the run's key-value store, with the other process's bytes checked."""
import os
import subprocess
import sys
import textwrap

import jax
import jax.experimental.multihost_utils as jmh
import numpy as np
import pytest
from jax.sharding import PartitionSpec as JP
from test_distributed import _free_port  # tests/ is on sys.path (conftest.py)

import ember
import ember.numpy as enp
from ember.experimental import multihost_utils as mh
from ember.sharding import PartitionSpec as P

pytestmark = pytest.mark.usefixtures("jax_in_embers_mode")


def _described(tree, lib):
    return lib.tree.map(lambda v: (type(v).__name__, np.shape(v), str(np.asarray(v).dtype), np.asarray(v).tolist()),
                        tree)


def test_one_process_is_jaxs():
    ours = {"a": enp.arange(6.0).reshape(2, 3), "b": np.int32(3), "c": 2.5, "d": [np.array([True, False])]}
    theirs = {"a": jax.numpy.arange(6.0).reshape(2, 3), "b": np.int32(3), "c": 2.5, "d": [np.array([True, False])]}
    for tiled in (False, True):
        assert (_described(mh.process_allgather(ours, tiled=tiled), ember)
                == _described(jmh.process_allgather(theirs, tiled=tiled), jax))
    for source in (None, True, False):
        assert (_described(mh.broadcast_one_to_all(ours, is_source=source), ember)
                == _described(jmh.broadcast_one_to_all(theirs, is_source=source), jax))
    assert mh.sync_global_devices("step") is jmh.sync_global_devices("step") is None
    assert mh.assert_equal(ours, "differ") is jmh.assert_equal(theirs, "differ") is None
    assert mh.reached_preemption_sync_point(3) is jmh.reached_preemption_sync_point(3) is False
    with pytest.raises(RuntimeError, match="Distributed JAX not initialized"):
        with mh.live_devices(ember.devices()):
            pass
    with pytest.raises(TypeError, match="outside a trace"):
        ember.jit(lambda x: mh.process_allgather(x))(1.0)
    assert issubclass(mh.ProcessFailureError, Exception)


def test_host_local_and_global_arrays_of_one_process_are_jaxs():
    mesh = ember.make_mesh((2,), ("d",))
    jmesh = jax.make_mesh((2,), ("d",), devices=jax.devices()[:2])
    inputs = {"a": np.arange(4.0, dtype=np.float32), "b": np.ones((2, 2), np.float32)}
    ours = mh.host_local_array_to_global_array(inputs, mesh, {"a": P("d"), "b": P()})
    theirs = jmh.host_local_array_to_global_array(inputs, jmesh, {"a": JP("d"), "b": JP()})
    for o, t in zip(ember.tree.leaves(ours), jax.tree.leaves(theirs)):
        np.testing.assert_array_equal(np.asarray(o), np.asarray(t))
        assert o.sharding.spec == P(*t.sharding.spec) and o.dtype == t.dtype
    back = mh.global_array_to_host_local_array(ours["a"], mesh, P("d"))
    np.testing.assert_array_equal(np.asarray(back), inputs["a"])
    assert back.sharding.spec == P("d")
    one = mh.host_local_array_to_global_array(enp.arange(8.0), mesh, P("d"))  # (one spec for every leaf)
    assert one.sharding.spec == P("d") and one.shape == (8,)
    # inside a trace the value is itself (its gradient too)
    grad = ember.grad(lambda v: mh.host_local_array_to_global_array(v, mesh, P("d")).sum())(enp.arange(8.0))
    np.testing.assert_array_equal(np.asarray(grad), np.ones(8))


PROCESS = textwrap.dedent("""
    import sys
    import numpy as np
    import ember, ember.distributed as dist
    import ember.numpy as enp
    from ember.experimental import multihost_utils as mh
    from ember.sharding import PartitionSpec as P
    port, me = sys.argv[1], int(sys.argv[2])
    dist.initialize(f"127.0.0.1:{port}", 2, me, initialization_timeout=60)
    mine = {"w": enp.full((2, 3), float(me)), "n": np.array([me, 10 + me], np.int32)}
    got = mh.process_allgather(mine)
    print("gather", got["w"].shape, got["w"][:, 0, 0].tolist(), got["n"].tolist(), flush=True)
    tiled = mh.process_allgather(mine, tiled=True)
    print("tiled", tiled["w"].shape, tiled["n"].tolist(), flush=True)
    print("bcast", mh.broadcast_one_to_all(mine)["n"].tolist(), flush=True)
    print("bcast1", mh.broadcast_one_to_all(mine, is_source=me == 1)["n"].tolist(), flush=True)
    mh.sync_global_devices("step 1")
    mh.assert_equal({"same": np.arange(3)}, "equal")
    try:
        mh.assert_equal({"n": mine["n"]}, "differ:")
    except AssertionError as err:
        print("assert", str(err).split(" Expected")[0], flush=True)
    try:
        mh.process_allgather(mine["n"] if me == 0 else mine["n"].astype(np.float32))
    except ValueError as err:
        print("mismatch", "leaf 0 of process" in str(err), flush=True)
    try:
        mh.sync_global_devices(f"name {me}")
    except AssertionError as err:
        print("sync", str(err), flush=True)
    try:
        mh.host_local_array_to_global_array(np.ones(2), ember.make_mesh((1,), ("d",)), P("d"))
    except NotImplementedError:
        print("global arrays refused", flush=True)
    dist.shutdown()
""")


def test_two_processes_share_values_through_the_runs_store():
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK")}
    env["EMBER_DISTRIBUTED_AUTHKEY"] = os.urandom(16).hex()
    processes = [subprocess.Popen([sys.executable, "-c", PROCESS, str(port), str(me)], env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for me in (0, 1)]
    try:
        results = [process.communicate(timeout=180) for process in processes]
    finally:
        for process in processes:
            process.kill()
    for process, (_, err) in zip(processes, results):
        assert process.returncode == 0, err[-3000:]
    for me, (out, _) in enumerate(results):
        assert out.splitlines() == [
            "gather (2, 2, 3) [0.0, 1.0] [[0, 10], [1, 11]]",
            "tiled (4, 3) [0, 10, 1, 11]",
            "bcast [0, 10]",
            "bcast1 [1, 11]",
            "assert differ:",
            "mismatch True",
            "sync sync_global_devices name mismatch ('name " + str(me) + "')",
            "global arrays refused"], me


def test_bytes_from_another_process_are_checked():
    """What another process wrote is read without pickles and checked against this process's tree first."""
    import io
    mine = [np.zeros(3, np.float32)]
    with pytest.raises(ValueError, match="from process 1 are not a valid archive"):
        mh._decode("process_allgather", b"\x93NUMPY garbage", mine, 1, True)
    pickled = io.BytesIO()
    np.savez(pickled, np.array([{"x": 1}], dtype=object))
    with pytest.raises(ValueError, match="not a valid archive"):
        mh._decode("process_allgather", pickled.getvalue(), mine, 1, True)
    other = io.BytesIO()
    np.savez(other, np.zeros(4, np.float32))
    with pytest.raises(ValueError, match=r"leaf 0 of process 1 is float32\[4\], this process's float32\[3\]"):
        mh._decode("process_allgather", other.getvalue(), mine, 1, True)
    assert mh._decode("process_allgather", other.getvalue(), mine, 1, False)[0].shape == (4,)
    with pytest.raises(ValueError, match="process 1 passed 1 leaves, this process 2"):
        mh._decode("broadcast_one_to_all", other.getvalue(), mine * 2, 1, False)


def test_under_the_drop_in():
    script = "import jax.experimental.multihost_utils as m, ember; assert m.process_allgather is " \
             "ember.experimental.multihost_utils.process_allgather; print(m.process_allgather({'a': 1.0})['a'].shape)"
    out = subprocess.run([sys.executable, "-m", "ember.as_jax", "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "(1,)", out.stderr[-2000:]
