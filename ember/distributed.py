"""Several ember processes, as jax.distributed: `initialize`, `shutdown`, `is_initialized`; and data-parallel
training on CPU over MPI (mpi4py): `allreduce_gradients` and `broadcast_parameters`.

initialize connects the processes of a run through a key-value store that process 0 serves at the coordinator
address; a PJRT plugin whose client spans processes (a CUDA plugin) gets node_id, num_nodes and that store when
its client is created. The XLA CPU plugin has no cross-process collectives (it reads neither option and never calls
the store), so on CPU the processes of a run exchange gradients through MPI between jitted steps.
docs/distributed.md has the details and a runnable example (examples/data_parallel_mpi.py)."""
from __future__ import annotations

import hashlib
import os
import secrets
import socket
import time
from multiprocessing import AuthenticationError
from typing import Any

import ml_dtypes
import numpy as np

from ember._core import Tracer
from ember._core.pytree import tree_flatten, tree_unflatten
from ember._runtime import Array, device_put
from ember._runtime import distributed as _state
from ember._runtime.array import device_put as put_on_device
from ember._runtime.distributed import MIN_KEY_BYTES, Coordinator, CoordinatorStore, Setup
from ember._runtime.guards import explicit as explicit_transfers

# The variables that MPI launchers set in the processes they start (MPICH's hydra, Open MPI, PMIx)
_MPI_LAUNCHER_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK")
_DETECTION_METHODS = (None, "mpi4py", "deactivate")


def initialize(coordinator_address: str | None = None, num_processes: int | None = None,
               process_id: int | None = None, local_device_ids: Any = None,
               cluster_detection_method: str | None = None, initialization_timeout: float = 300,
               shutdown_timeout_seconds: float = 300, coordinator_bind_address: str | None = None, *,
               authkey: bytes | None = None) -> None:
    """Join this process to a multi-process run, as jax.distributed.initialize: call it in every process, before
    the first computation.

    coordinator_address: "host:port" where process 0 serves the run's key-value store (every process must reach
    it); num_processes: how many processes; process_id: this one's, 0 .. num_processes - 1. Missing, they are read
    from $EMBER_COORDINATOR_ADDRESS, $EMBER_NUM_PROCESSES and $EMBER_PROCESS_ID, else (in a process started by an
    MPI launcher such as mpiexec, with mpi4py installed; or with cluster_detection_method="mpi4py") from MPI:
    rank, size, and an address and key that rank 0 picks and broadcasts (a loopback address when every rank runs
    on rank 0's host). cluster_detection_method="deactivate" turns the detection off.

    initialization_timeout: seconds that initialize waits in all (for the coordinator, the handshake, and every
    process to join: TimeoutError), and that a later put or try_get of the store waits for the coordinator's
    answer; shutdown_timeout_seconds: how long shutdown waits in all. coordinator_bind_address: where process 0
    listens (by default the coordinator address itself). authkey: the secret key (bytes) that authenticates the
    processes and every message between them and the coordinator (default $EMBER_DISTRIBUTED_AUTHKEY; required:
    there is no default key, except under MPI, where rank 0 makes one up). It must be at least MIN_KEY_BYTES (16)
    bytes, and should be random (os.urandom(16).hex(), say): the handshake crosses the network, so whoever records
    one can try guesses of the key offline, which 16 random bytes put out of reach and a short password does not.
    docs/security.md ("Distributed store") says what the store trusts. local_device_ids is not supported yet (set
    CUDA_VISIBLE_DEVICES instead)."""
    name = "ember.distributed.initialize"
    if _state.current() is not None or _state.finished():
        raise RuntimeError(f"{name} should only be called once in a process")
    if _state.started_alone():
        raise RuntimeError(f"{name} must be called before the first computation: a backend whose PJRT client could "
                           "span processes (CUDA) has already started in this process, on its own")
    if local_device_ids is not None:
        raise NotImplementedError(f"{name}: local_device_ids is not supported yet; restrict the devices a process "
                                  "sees with CUDA_VISIBLE_DEVICES instead")
    if cluster_detection_method not in _DETECTION_METHODS:
        raise ValueError(f"{name}: cluster_detection_method must be one of {_DETECTION_METHODS}, got "
                         f"{cluster_detection_method!r}")
    coordinator_address = coordinator_address or os.environ.get("EMBER_COORDINATOR_ADDRESS") or None
    num_processes = num_processes if num_processes is not None else _env_int("EMBER_NUM_PROCESSES")
    process_id = process_id if process_id is not None else _env_int("EMBER_PROCESS_ID")
    coordinator = None
    missing = None in (coordinator_address, num_processes, process_id)
    if missing and cluster_detection_method != "deactivate" and (
            cluster_detection_method == "mpi4py" or any(v in os.environ for v in _MPI_LAUNCHER_VARIABLES)):
        coordinator_address, num_processes, process_id, authkey, coordinator = _from_mpi(
            coordinator_address, num_processes, process_id, authkey)
    _check_arguments(name, coordinator_address, num_processes, process_id)
    assert coordinator_address is not None and num_processes is not None and process_id is not None
    host, port = _split_address(name, "coordinator_address", coordinator_address)
    key = _check_key(name, authkey if authkey is not None else
                     os.environ.get("EMBER_DISTRIBUTED_AUTHKEY", "").encode() or None)
    deadline = time.monotonic() + float(initialization_timeout)
    if process_id == 0 and coordinator is None:
        bind_host, bind_port = _split_address(name, "coordinator_bind_address", coordinator_bind_address
                                              or coordinator_address)
        coordinator = Coordinator(bind_host, bind_port, key)
    store = None
    try:
        store = CoordinatorStore.connect(host, port, key, float(initialization_timeout))
        store.join(process_id, num_processes, _left(deadline))
        store.barrier("initialize", num_processes, _left(deadline))
    except BaseException as err:  # (this process leaves no connection open, and process 0 no coordinator)
        if store is not None:
            store.release()
        if coordinator is not None:
            coordinator.close()
        if isinstance(err, ValueError):  # (join's: a process id twice, or different process counts)
            raise ValueError(f"{name}: {err} (process_id={process_id}, num_processes={num_processes})") from None
        if store is not None and isinstance(err, (TimeoutError, ConnectionError, AuthenticationError)):
            raise type(err)(f"{name}: {err}") from None  # (they name the coordinator and the request)
        raise
    _state.configure(Setup(process_id, num_processes, coordinator_address, store, coordinator,
                           float(shutdown_timeout_seconds)))


def is_initialized() -> bool:
    """Whether initialize has run in this process (and shutdown has not)."""
    return _state.current() is not None


def shutdown() -> None:
    """Leave the run: wait (up to initialize's shutdown_timeout_seconds in all, the coordinator's answers included)
    until every process calls shutdown; a coordinator that does not answer in time is TimeoutError, a lost one
    ConnectionError, both naming its address. The coordinator of process 0 serves until its process exits;
    initialize cannot be called again in a process."""
    setup = _state.current()
    if setup is None:
        return
    store = setup.store.namespaced(b"ember.distributed:")
    deadline = time.monotonic() + setup.shutdown_timeout_s
    try:
        store.barrier("shutdown", setup.num_processes, _left(deadline))
        # Process 0 serves the store: it leaves last, once every other process has had its barrier's answer and
        # said so (else its exit could cut off an answer still on its way).
        if setup.process_id == 0:
            for other in range(1, setup.num_processes):
                store.get(f"left/{other}".encode(), _left(deadline))
        else:
            try:
                store.put(f"left/{setup.process_id}".encode(), b"", _left(deadline))
            except OSError:  # (process 0 may leave as soon as the key arrives, before answering)
                pass
    except (TimeoutError, ConnectionError, AuthenticationError) as err:
        raise type(err)(f"ember.distributed.shutdown: {err}") from None
    finally:
        setup.store.release()
        _state.configure(None, finished=True)


def key_value_store() -> CoordinatorStore:
    """The run's key-value store (after initialize): put(key, value), get(key, timeout_s) which waits for the
    key, try_get(key); keys and values are bytes (a run's PJRT plugin uses the keys that start with b"pjrt:")."""
    setup = _state.current()
    if setup is None:
        raise RuntimeError("ember.distributed.key_value_store: call ember.distributed.initialize first")
    return setup.store


def _env_int(variable: str) -> int | None:
    text = os.environ.get(variable)
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"ember.distributed.initialize: ${variable} must be an integer, got {text!r}") from None


def _check_arguments(name: str, address: str | None, num_processes: Any, process_id: Any) -> None:
    if address is None:
        raise ValueError(f"{name}: coordinator_address should be defined (\"host:port\" of process 0), or "
                         "$EMBER_COORDINATOR_ADDRESS set, or the processes started by an MPI launcher")
    if num_processes is None:
        raise ValueError(f"{name}: num_processes must be defined")
    if process_id is None:
        raise ValueError(f"{name}: the process id of the current process (process_id) must be defined")
    if not isinstance(num_processes, int) or isinstance(num_processes, bool) or num_processes < 1:
        raise TypeError(f"{name}: num_processes must be a positive int, got {num_processes!r} of type "
                        f"{type(num_processes).__name__}")
    if not isinstance(process_id, int) or isinstance(process_id, bool):
        raise TypeError(f"{name}: process_id must be a nonnegative int, got {process_id!r} of type "
                        f"{type(process_id).__name__}")
    if not 0 <= process_id < num_processes:
        raise ValueError(f"{name}: process_id must be in 0 .. num_processes - 1, got process_id={process_id}, "
                         f"num_processes={num_processes}")


def _check_key(name: str, key: Any) -> bytes:
    """The shared secret, at least MIN_KEY_BYTES long (initialize's docstring says why)."""
    if key is None or key == b"":  # (the coordinator serves whoever has the key: there is no default one)
        raise ValueError(f"{name}: give every process the same secret key (authkey=..., or "
                         "$EMBER_DISTRIBUTED_AUTHKEY): process 0's coordinator serves whoever knows it, so a fixed "
                         "default would let anyone who reaches its port use the run's store. Under an MPI launcher "
                         "(mpiexec with mpi4py) rank 0 makes one up and sends it to the others.")
    if not isinstance(key, (bytes, bytearray)):
        raise TypeError(f"{name}: authkey must be bytes, got {type(key).__name__}")
    if len(key) < MIN_KEY_BYTES:
        raise ValueError(f"{name}: authkey (or $EMBER_DISTRIBUTED_AUTHKEY) must be at least {MIN_KEY_BYTES} bytes, "
                         f"got {len(key)}: a short key can be guessed from one recorded handshake. Use random "
                         "bytes, e.g. os.urandom(16).hex()")
    return bytes(key)


def _left(deadline: float) -> float:
    """Seconds until deadline (0 once past it)."""
    return max(0.0, deadline - time.monotonic())


def _split_address(name: str, argument: str, address: str) -> tuple[str, int]:
    host, _, port = str(address).rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{name}: {argument} must be \"host:port\", got {address!r}")
    return host.strip("[]"), int(port)


def _from_mpi(address: str | None, num_processes: int | None, process_id: int | None, authkey: bytes | None
              ) -> tuple[str, int, int, bytes, Coordinator | None]:
    """The run's parameters from MPI: rank and size, and (where not given) the address of a coordinator that rank 0
    starts on a free port of its host, and a random key, both broadcast to every rank. The coordinator listens on
    loopback when every rank runs on rank 0's host, else on every interface (the other hosts must reach it)."""
    comm = _mpi("initialize").COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    coordinator = None
    chosen: tuple[str | None, bytes | None] = (None, None)
    if address is None:
        one_host = len(set(comm.allgather(socket.gethostname()))) == 1
        if rank == 0:
            key = authkey if authkey is not None else secrets.token_bytes(32)
            coordinator = Coordinator("127.0.0.1" if one_host else "", 0, key)  # (a port the system picks)
            chosen = (f"{'127.0.0.1' if one_host else socket.gethostname()}:{coordinator.port}", key)
        address, authkey = comm.bcast(chosen, root=0)
    return (address, num_processes if num_processes is not None else size,  # type: ignore[return-value]
            process_id if process_id is not None else rank, authkey, coordinator)


# ---- data-parallel training on CPU over MPI (mpi4py) -----------------------------------------------------------

_REDUCTIONS = ("sum", "mean", "max", "min")


def allreduce_gradients(tree: Any, op: str = "mean", *, comm: Any = None) -> Any:
    """tree (a pytree of arrays: gradients) reduced elementwise over the processes of comm (mpi4py; by default
    MPI.COMM_WORLD): op "mean" (the data-parallel average), "sum", "max" or "min". Every process calls it with a
    tree of the same structure, shapes and dtypes (checked: a mismatch raises ValueError everywhere) and gets the
    same result: ember Arrays for ember Arrays (on the same device), numpy arrays for other leaves. One MPI
    reduction per dtype; float16 and bfloat16 are reduced in float32. Call it between jitted steps, on
    concrete arrays (not inside jit)."""
    name = "ember.distributed.allreduce_gradients"
    if op not in _REDUCTIONS:
        raise ValueError(f"{name}: op must be one of {_REDUCTIONS}, got {op!r}")
    mpi = _mpi("allreduce_gradients")
    comm = mpi.COMM_WORLD if comm is None else comm
    leaves, treedef, host = _host_leaves(name, tree)
    _check_same_everywhere(name, comm, treedef, host)
    reduced: list[np.ndarray | None] = [None] * len(host)
    for dtype, indices in _by_dtype(host).items():
        work = _reduction_dtype(name, dtype, op)
        buffer = np.concatenate([host[i].reshape(-1).astype(work) for i in indices]) if indices else None
        if buffer is not None and buffer.size:
            comm.Allreduce(mpi.IN_PLACE, buffer,
                           op={"sum": mpi.SUM, "mean": mpi.SUM, "max": mpi.MAX, "min": mpi.MIN}[op])
            if op == "mean":
                buffer /= comm.Get_size()
        offset = 0
        for i in indices:
            size = host[i].size
            reduced[i] = buffer[offset:offset + size].astype(dtype).reshape(host[i].shape)  # type: ignore[index]
            offset += size
    return _rebuild(treedef, leaves, reduced)


def broadcast_parameters(tree: Any, root: int = 0, *, comm: Any = None) -> Any:
    """tree (a pytree of arrays: parameters, optimizer state) as process root of comm (mpi4py; by default
    MPI.COMM_WORLD) has it, in every process: so that every replica starts from the same values. Every process
    passes a tree of the same structure, shapes and dtypes (checked); leaves come back as ember Arrays for ember
    Arrays, numpy arrays otherwise. One MPI broadcast of all the bytes."""
    name = "ember.distributed.broadcast_parameters"
    mpi = _mpi("broadcast_parameters")
    comm = mpi.COMM_WORLD if comm is None else comm
    if not isinstance(root, int) or not 0 <= root < comm.Get_size():
        raise ValueError(f"{name}: root must be a process rank in 0 .. {comm.Get_size() - 1}, got {root!r}")
    leaves, treedef, host = _host_leaves(name, tree)
    _check_same_everywhere(name, comm, treedef, host)
    sizes = [a.nbytes for a in host]
    buffer = np.concatenate([np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in host]) if host else \
        np.zeros(0, np.uint8)
    if buffer.size:
        comm.Bcast(buffer, root=root)
    values, offset = [], 0
    for array, size in zip(host, sizes):
        values.append(buffer[offset:offset + size].view(array.dtype).reshape(array.shape).copy())
        offset += size
    return _rebuild(treedef, leaves, values)


def _mpi(function: str) -> Any:
    """mpi4py's MPI module."""
    try:
        from mpi4py import MPI  # (on first use: importing it starts MPI, which `import ember` must not)
    except ImportError as err:
        raise ImportError(f"ember.distributed.{function} needs mpi4py and an MPI library: pip install "
                          f"'ember[distributed]' (mpi4py and MPICH's wheel), or mpi4py built for the system's MPI "
                          f"({err})") from None
    return MPI


def _host_leaves(name: str, tree: Any) -> tuple[list[Any], Any, list[np.ndarray]]:
    """The leaves of tree, its structure, and each leaf's value as a numpy array."""
    leaves, treedef = tree_flatten(tree)
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, Tracer):
            raise TypeError(f"{name}: leaf {i} is a tracer ({leaf.aval.str_short()}): call it between jitted "
                            "steps, on concrete arrays, not inside jit or a transformation")
    with explicit_transfers():  # (device to host, asked for: the transfer guards let it through)
        return leaves, treedef, [np.asarray(leaf) for leaf in leaves]


def _check_same_everywhere(name: str, comm: Any, treedef: Any, host: list[np.ndarray]) -> None:
    """Raise ValueError in every process unless all of them pass trees of one structure, shapes and dtypes (MPI
    itself would mix up or truncate the data, or wait forever)."""
    digest = hashlib.sha256(repr((str(treedef), [(a.shape, a.dtype.str) for a in host])).encode()).digest()
    if len(set(comm.allgather(digest))) > 1:
        description = f"{treedef} " + ", ".join(f"{a.dtype.name}{list(a.shape)}" for a in host)
        described = comm.allgather(description)
        lines = "\n".join(f"  process {rank}: {text[:300]}" for rank, text in enumerate(described))
        raise ValueError(f"{name}: the processes passed trees of different structures, shapes or dtypes:\n{lines}")


def _by_dtype(host: list[np.ndarray]) -> dict[np.dtype, list[int]]:
    groups: dict[np.dtype, list[int]] = {}
    for i, array in enumerate(host):
        groups.setdefault(array.dtype, []).append(i)
    return groups


def _reduction_dtype(name: str, dtype: np.dtype, op: str) -> np.dtype:
    """The dtype MPI reduces leaves of dtype in (MPI has no 16-bit floats; booleans reduce as uint8)."""
    if dtype in (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)):
        return np.dtype(np.float32)
    if dtype == np.bool_:
        if op in ("sum", "mean"):
            raise TypeError(f"{name}: op {op!r} of boolean leaves; use \"max\" (any) or \"min\" (all)")
        return np.dtype(np.uint8)
    if dtype.kind in "iu" and op == "mean":
        raise TypeError(f"{name}: op \"mean\" of integer leaves ({dtype.name}); use \"sum\", or floating leaves")
    if dtype.kind not in "fciu":
        raise TypeError(f"{name}: cannot reduce leaves of dtype {dtype}")
    if dtype.kind == "c" and op in ("max", "min"):
        raise TypeError(f"{name}: op {op!r} of complex leaves ({dtype.name})")
    return dtype


def _rebuild(treedef: Any, leaves: list[Any], values: list[Any]) -> Any:
    """The tree of values: an ember Array where the leaf was one (placed as it was), else the numpy array."""
    out = [put_on_device(value, leaf.device if leaf.committed else None, weak_type=leaf.aval.weak_type)
           if type(leaf) is Array else
           device_put(value, leaf.sharding) if isinstance(leaf, Array) else value
           for leaf, value in zip(leaves, values)]
    return tree_unflatten(treedef, out)


__all__ = ["allreduce_gradients", "broadcast_parameters", "initialize", "is_initialized", "key_value_store",
           "shutdown"]
