"""This process's place in a multi-process run (ember.distributed.initialize): its process id, the number of
processes, and the key-value store they share, served by process 0 at the coordinator address.

The store is a table served with Python's multiprocessing.managers (the standard library's documented service for
sharing objects between processes, across machines too: each request is pickled over a socket and authenticated
by an HMAC challenge on a shared key). Every process, process 0 included, reaches it through a proxy; a proxy
opens one connection per thread, so the plugin's threads may call it at once. A get waits on the coordinator for
its key, up to a timeout.

Backends read client_setup when they create a PJRT client: a plugin whose client spans processes (a CUDA plugin)
gets the create options node_id and num_nodes and the store (its keys prefixed with "pjrt:"). The xla-cpu-pjrt
plugin gets neither: it reads no create option but cpu_device_count and never calls the store, and newer XLA CPU
plugins reject unknown option names (docs/distributed.md)."""
from __future__ import annotations

import dataclasses
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.managers import BaseManager
from typing import Any

_CONNECT_RETRY_S = 0.05


class _Table:
    """The coordinator's table: values by key, the processes that joined, and barrier counts (process 0 only)."""

    def __init__(self) -> None:
        self._values: dict[bytes, bytes] = {}
        self._joined: dict[int, int] = {}  # process id -> the process count it was started with
        self._arrived: dict[str, int] = {}  # barrier name -> processes arrived
        self._changed = threading.Condition()

    def put(self, key: bytes, value: bytes) -> None:
        with self._changed:
            self._values[bytes(key)] = bytes(value)
            self._changed.notify_all()

    def get(self, key: bytes, timeout_s: float) -> bytes | None:
        with self._changed:
            self._changed.wait_for(lambda: key in self._values, timeout_s)
            return self._values.get(key)

    def try_get(self, key: bytes) -> bytes | None:
        with self._changed:
            return self._values.get(key)

    def join(self, process_id: int, num_processes: int) -> None:
        """Record a process; a second process with its id, or one started with another process count, is refused."""
        with self._changed:
            counts = set(self._joined.values()) | {num_processes}
            if process_id in self._joined:
                raise ValueError(f"two processes were started with process_id={process_id}")
            if len(counts) > 1:
                raise ValueError(f"the processes were started with different num_processes: {sorted(counts)}")
            self._joined[process_id] = num_processes
            self._changed.notify_all()

    def barrier(self, name: str, count: int, timeout_s: float) -> int:
        """Wait until count processes have arrived at the barrier name; returns how many have (fewer: timed out)."""
        with self._changed:
            self._arrived[name] = self._arrived.get(name, 0) + 1
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._arrived[name] >= count, timeout_s)
            return self._arrived[name]


class _Connecting(BaseManager):
    """A process's connection to the coordinator."""


_Connecting.register("table")


class Coordinator:
    """Process 0's service: the table, served on a daemon thread until the process exits."""

    def __init__(self, host: str, port: int, authkey: bytes):
        table = _Table()
        serving = type("_Serving", (BaseManager,), {})
        serving.register("table", callable=lambda: table)
        try:
            self._server = serving(address=(host, port), authkey=authkey).get_server()
        except OSError as err:
            raise OSError(f"ember.distributed.initialize: process 0 cannot serve the coordinator at {host}:{port}: "
                          f"{err}") from None
        self.port: int = self._server.address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="ember.distributed coordinator",
                                        daemon=True)
        self._thread.start()


class CoordinatorStore:
    """A process's view of the coordinator's table, as PJRT's key-value store wants it (get waits, try_get does
    not, put), plus the barriers of initialize and shutdown. Keys and values are bytes; keys are prefixed with
    this view's namespace."""

    def __init__(self, table: Any, namespace: bytes = b""):
        self._table = table
        self._namespace = namespace

    @classmethod
    def connect(cls, host: str, port: int, authkey: bytes, timeout_s: float) -> CoordinatorStore:
        """Connect to the coordinator, retrying until it listens (process 0 may start later) or timeout_s passes."""
        deadline = time.monotonic() + timeout_s
        while True:
            manager = _Connecting(address=(host, port), authkey=authkey)
            try:
                manager.connect()
                return cls(manager.table())  # type: ignore[attr-defined]
            except AuthenticationError:
                raise AuthenticationError(
                    f"ember.distributed.initialize: the coordinator at {host}:{port} refused this process's "
                    "authentication key: give every process the same key ($EMBER_DISTRIBUTED_AUTHKEY)") from None
            except OSError as err:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"ember.distributed.initialize: no coordinator answered at {host}:{port} within "
                        f"{timeout_s:g} s (process 0 serves it; is it running, and is the address reachable?): "
                        f"{err}") from None
            time.sleep(_CONNECT_RETRY_S)

    def release(self) -> None:
        """Stop using the table without telling the coordinator. A proxy tells it when the process exits (the
        manager's reference count): where process 0 has already stopped serving then (its interpreter is
        finishing, e.g. waiting in MPI_Finalize for this very process), that message would wait forever."""
        finalizer = getattr(self._table, "_close", None)  # (the proxy's exit-time decref: multiprocessing.util's)
        if finalizer is not None:
            finalizer.cancel()

    def namespaced(self, prefix: bytes) -> CoordinatorStore:
        """The same table, with every key prefixed with prefix (PJRT asks each user of a store to avoid collisions)."""
        return CoordinatorStore(self._table, self._namespace + prefix)

    def get(self, key: bytes, timeout_s: float) -> bytes:
        value = self._table.get(self._namespace + bytes(key), float(timeout_s))
        if value is None:
            raise TimeoutError(f"key {bytes(key)!r} was not set within {timeout_s:g} s")
        return value

    def try_get(self, key: bytes) -> bytes | None:
        return self._table.try_get(self._namespace + bytes(key))

    def put(self, key: bytes, value: bytes) -> None:
        self._table.put(self._namespace + bytes(key), bytes(value))

    def join(self, process_id: int, num_processes: int) -> None:
        self._table.join(process_id, num_processes)

    def barrier(self, name: str, count: int, timeout_s: float) -> None:
        arrived = self._table.barrier(name, count, float(timeout_s))
        if arrived < count:
            raise TimeoutError(f"only {arrived} of {count} processes reached the barrier {name!r} within "
                               f"{timeout_s:g} s")


@dataclasses.dataclass(frozen=True)
class Setup:
    """This process's place in a multi-process run."""
    process_id: int
    num_processes: int
    coordinator_address: str
    store: CoordinatorStore
    coordinator: Coordinator | None  # (process 0's service; None elsewhere)
    shutdown_timeout_s: float


_setup: Setup | None = None
_finished = False  # a run ended in this process (shutdown): there is no second one
_started_alone = False  # a client of a plugin that could span processes started before initialize


def configure(setup: Setup | None, finished: bool = False) -> None:
    """Record this process's multi-process set-up; with None, forget it (finished: at the end of the run)."""
    global _setup, _finished
    _setup = setup
    _finished = _finished or finished


def current() -> Setup | None:
    return _setup


def finished() -> bool:
    """Whether this process has left a run (shutdown): process 0's coordinator still holds the address."""
    return _finished


def started_alone() -> bool:
    """Whether a client of a plugin that could span processes (not the CPU plugin) started outside a run: too early
    for initialize, whose options it did not get."""
    return _started_alone


def process_index() -> int:
    return _setup.process_id if _setup is not None else 0


def process_count() -> int:
    return _setup.num_processes if _setup is not None else 1


def client_setup(cpu_plugin: bool) -> tuple[dict[str, int], CoordinatorStore | None]:
    """The create options and key-value store for a new PJRT client of a plugin: node_id, num_nodes and the store
    for a plugin that takes them (a CUDA plugin) once initialize has run; nothing for the xla-cpu-pjrt plugin,
    which has no cross-process collectives (see the module docstring)."""
    global _started_alone
    if _setup is None or cpu_plugin:
        _started_alone = _started_alone or not cpu_plugin
        return {}, None
    return {"node_id": _setup.process_id, "num_nodes": _setup.num_processes}, _setup.store.namespaced(b"pjrt:")
