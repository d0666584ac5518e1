"""ember.experimental.multihost_utils, as jax.experimental.multihost_utils: values shared between the processes of a
run (ember.distributed.initialize), and the host-local/global array conversions.

In one process (no initialize, or a run of one) these are what JAX's are there: process_allgather stacks (or, tiled,
keeps) each leaf as a numpy array, broadcast_one_to_all returns the leaves as numpy arrays, sync_global_devices and
assert_equal return None, reached_preemption_sync_point is False, and the host-local and global arrays of a mesh are
the same arrays, placed as the PartitionSpecs say.

Across processes they go through the run's key-value store (the coordinator's, authenticated by the run's key):
each call writes this process's leaves under the call's sequence number and reads the others'. As in JAX, every
process makes the same calls in the same order (a process that does not is a TimeoutError naming the call after
the store's timeout, not a hang). Bytes read from another process are numpy's .npy format, read without pickles and
checked against the tree this process passed (the number of leaves, each leaf's dtype; process_allgather and
assert_equal also its shape) before they are used: a mismatch is a ValueError naming the process and the leaf.
The XLA CPU plugin has no arrays that span processes, so the host-local/global conversions take one process only
(another count is a clear NotImplementedError), and reached_preemption_sync_point is False (ember gets no
preemption notices)."""
from __future__ import annotations

import contextlib
import io
import itertools
import zlib
from typing import Any, Iterator, Sequence

import numpy as np

from ember._core import Tracer
from ember._core.sharding import NamedSharding, PartitionSpec
from ember._core.pytree import tree_flatten, tree_map, tree_unflatten
from ember._runtime import device_put
from ember._runtime import distributed as _state
from ember.example_libraries.optimizers import safe_zip as _safe_zip

_calls = itertools.count()  # (the sequence number of this process's calls: the same on every process)


class ProcessFailureError(RuntimeError):
    """A process of the run failed (JAX's live_devices reports it; ember's runs detect none)."""


def _setup() -> Any:
    """The run's setup when there are several processes, else None (one process: the local answers)."""
    setup = _state.current()
    return setup if setup is not None and setup.num_processes > 1 else None


def _host(name: str, tree: Any) -> tuple[list[np.ndarray], Any]:
    leaves, treedef = tree_flatten(tree)
    host = []
    for leaf in leaves:
        if isinstance(leaf, Tracer):
            raise TypeError(f"multihost_utils.{name}: its values are exchanged between processes outside a trace; "
                            "call it outside jit, grad and vmap")
        host.append(np.asarray(leaf))
    return host, treedef


def _encode(arrays: Sequence[np.ndarray]) -> bytes:
    out = io.BytesIO()
    np.savez(out, *arrays)
    return out.getvalue()


def _decode(name: str, data: bytes, mine: Sequence[np.ndarray], sender: int, same_shapes: bool) -> list[np.ndarray]:
    """The leaves another process wrote, checked against this process's before they are used."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            arrays = [archive[f"arr_{i}"] for i in range(len(archive.files))]
    except Exception as err:  # noqa: BLE001 - any malformed archive: one clear error
        raise ValueError(f"multihost_utils.{name}: the values from process {sender} are not a valid archive of "
                         f"arrays ({type(err).__name__}: {err})") from None
    if len(arrays) != len(mine):
        raise ValueError(f"multihost_utils.{name}: process {sender} passed {len(arrays)} leaves, this process "
                         f"{len(mine)}: every process must pass a tree of the same structure")
    for i, (theirs, ours) in enumerate(zip(arrays, mine)):
        if theirs.dtype != ours.dtype or same_shapes and theirs.shape != ours.shape:
            raise ValueError(f"multihost_utils.{name}: leaf {i} of process {sender} is "
                             f"{theirs.dtype}{list(theirs.shape)}, this process's {ours.dtype}{list(ours.shape)}")
    return arrays


def _exchange(name: str, setup: Any, host: Sequence[np.ndarray], senders: Sequence[int], same_shapes: bool
              ) -> dict[int, list[np.ndarray]]:
    """Every process's leaves from the senders among them (this process writes its own if it is one)."""
    store = setup.store.namespaced(b"ember.multihost_utils:")
    call = next(_calls)
    if setup.process_id in senders:
        store.put(f"{call}/{setup.process_id}".encode(), _encode(host))
    out = {}
    for sender in senders:
        if sender == setup.process_id:
            out[sender] = list(host)
            continue
        try:
            data = store.get(f"{call}/{sender}".encode(), store.timeout_s)
        except TimeoutError:
            raise TimeoutError(f"multihost_utils.{name}: process {sender} did not reach call {call} of this run's "
                               f"multihost_utils within {store.timeout_s:g} s (every process must make the same "
                               "calls in the same order)") from None
        out[sender] = _decode(name, data, host, sender, same_shapes)
    return out


def process_allgather(in_tree: Any, tiled: bool = False) -> Any:
    """Each leaf of every process, as numpy arrays: stacked along a new leading axis (one row per process), or
    with tiled=True concatenated along the first axis (a scalar leaf: stacked)."""
    host, treedef = _host("process_allgather", in_tree)
    setup = _setup()
    if setup is None:
        rows = {0: host}
    else:
        rows = _exchange("process_allgather", setup, host, range(setup.num_processes), same_shapes=not tiled)
    gathered = [[rows[p][i] for p in sorted(rows)] for i in range(len(host))]
    if tiled:  # (a scalar: itself in one process, as JAX's; stacked across processes)
        leaves = [np.concatenate(parts) if parts[0].ndim else parts[0] if len(parts) == 1 else np.stack(parts)
                  for parts in gathered]
    else:
        leaves = [np.stack(parts) for parts in gathered]
    return tree_unflatten(treedef, leaves)


def broadcast_one_to_all(in_tree: Any, is_source: bool | None = None) -> Any:
    """The leaves of the source process (is_source; by default process 0) on every process, as numpy arrays: the
    other processes' trees give only the structure and dtypes."""
    host, treedef = _host("broadcast_one_to_all", in_tree)
    setup = _setup()
    if setup is None:
        return tree_unflatten(treedef, host)
    source = setup.process_id == 0 if is_source is None else bool(is_source)
    # (which process is the source: each says, through the store, whether it is)
    flags = _exchange("broadcast_one_to_all", setup, [np.array(source)], range(setup.num_processes), True)
    sources = [p for p in sorted(flags) if bool(flags[p][0])]
    if len(sources) != 1:
        raise ValueError(f"multihost_utils.broadcast_one_to_all: exactly one process must be the source, got "
                         f"{sources or 'none'}")
    values = _exchange("broadcast_one_to_all", setup, host, sources, same_shapes=False)
    return tree_unflatten(treedef, values[sources[0]])


def sync_global_devices(name: str) -> None:
    """Wait until every process of the run has called sync_global_devices with the same name (an AssertionError
    naming it if they disagree)."""
    if not isinstance(name, str):
        raise TypeError(f"multihost_utils.sync_global_devices: name must be a str, got {type(name).__name__}")
    setup = _setup()
    if setup is None:
        return
    digest = np.array(zlib.crc32(name.encode()), np.uint32)
    rows = _exchange("sync_global_devices", setup, [digest], range(setup.num_processes), True)
    if any(int(rows[p][0]) != int(digest) for p in rows):
        raise AssertionError(f"sync_global_devices name mismatch ('{name}')")


def assert_equal(in_tree: Any, fail_message: str = "") -> None:
    """An AssertionError (with fail_message) unless every process passed equal trees (values, dtypes, shapes)."""
    host, _ = _host("assert_equal", in_tree)
    setup = _setup()
    if setup is None:
        return
    try:
        rows = _exchange("assert_equal", setup, host, range(setup.num_processes), True)
    except ValueError as err:
        raise AssertionError(f"{fail_message} {err}") from None
    for p in sorted(rows):
        for i, (theirs, ours) in enumerate(zip(rows[p], host)):
            if not np.array_equal(theirs, ours, equal_nan=ours.dtype.kind in "fc"):
                raise AssertionError(f"{fail_message} Expected: {ours}; got: {theirs} (leaf {i}, process {p}).")


def reached_preemption_sync_point(step_id: int) -> bool:
    """Whether the run was asked to stop at this step (JAX's preemption sync manager): ember's runs get no
    preemption notices, so never."""
    return False


def _one_process(name: str) -> None:
    setup = _state.current()
    if setup is not None and setup.num_processes > 1:
        raise NotImplementedError(f"multihost_utils.{name}: arrays spanning the devices of several processes do not "
                                  "exist on ember's CPU backend (the plugin has no cross-process arrays); a run of "
                                  f"{setup.num_processes} processes exchanges values with process_allgather or "
                                  "ember.distributed's allreduce_gradients/broadcast_parameters")


def _place(name: str, inputs: Any, mesh: Any, pspecs: Any) -> Any:
    _one_process(name)

    def place(x: Any, spec: Any) -> Any:
        if isinstance(x, Tracer):  # (inside a trace: the value itself, as JAX's)
            return x
        return device_put(x, NamedSharding(mesh, PartitionSpec() if spec is None else spec))

    def is_spec(x: Any) -> bool:
        return x is None or isinstance(x, PartitionSpec)
    if is_spec(pspecs):
        return tree_map(lambda x: place(x, pspecs), inputs)
    try:
        return tree_map(lambda spec, sub: tree_map(lambda x: place(x, spec), sub), pspecs, inputs, is_leaf=is_spec)
    except ValueError as err:
        raise ValueError(f"multihost_utils.{name}: pspecs must be a PartitionSpec or a tree prefix of the inputs' "
                         f"structure ({err})") from None


def host_local_array_to_global_array(local_inputs: Any, global_mesh: Any, pspecs: Any) -> Any:
    """The global arrays whose process-local parts are local_inputs, placed over global_mesh as pspecs say (a
    PartitionSpec for all, or a tree prefix of one per leaf). In one process the local part is the whole."""
    return _place("host_local_array_to_global_array", local_inputs, global_mesh, pspecs)


def global_array_to_host_local_array(global_inputs: Any, global_mesh: Any, pspecs: Any) -> Any:
    """This process's parts of global arrays placed over global_mesh as pspecs say. In one process, the whole."""
    return _place("global_array_to_host_local_array", global_inputs, global_mesh, pspecs)


@contextlib.contextmanager
def live_devices(devices: Sequence[Any]) -> Iterator[list[Any]]:
    """The devices of live processes among devices (JAX's fault-tolerant runs): in an initialized run, all of them
    (ember detects no failed processes); without initialize, JAX's RuntimeError."""
    if _state.current() is None:
        raise RuntimeError("Distributed JAX not initialized.")
    yield list(devices)


# (JAX's module has these names too, from its imports)
P = PartitionSpec
safe_zip = _safe_zip

__all__ = ["ProcessFailureError", "assert_equal", "broadcast_one_to_all", "global_array_to_host_local_array",
           "host_local_array_to_global_array", "live_devices", "process_allgather", "reached_preemption_sync_point",
           "sync_global_devices"]
