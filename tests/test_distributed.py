"""ember.distributed: the key-value store callbacks a multi-process PJRT client gets (called through C as a plugin
calls them), what the XLA CPU plugin does with distributed create options (nothing), initialize and shutdown of
two processes on loopback, and data-parallel training on CPU over MPI (two processes under mpiexec; skipped without
mpi4py and an MPI launcher). The store's faults (a frozen, lost or lying coordinator, tampered messages) are
tests/reliability/test_distributed_faults.py's."""
import ctypes
import importlib.util
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import ember
import ember.distributed as dist
from ember._runtime import distributed as state
from ember._runtime.pjrt import Plugin, cpu_plugin_path, kv_store
from ember._runtime.pjrt.structs import (_ClientAddressableDevicesArgs, _ClientCreateArgs, _DeviceDescriptionIdArgs,
                                        _DeviceGetDescriptionArgs, _handle_args, _new, named_int64_values)

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parent
KEY = b"a test key, 16 bytes or more"
CODES = {4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND", 13: "INTERNAL", 14: "UNAVAILABLE"}


class DictStore:
    """A store backed by a dict, recording every call (what the plugin asked for)."""

    def __init__(self):
        self.values, self.calls = {}, []

    def get(self, key, timeout_s):
        self.calls.append(("get", key))
        if key == b"lost":
            raise ConnectionResetError("the coordinator went away")
        if key not in self.values:
            raise TimeoutError(f"{key!r} not set within {timeout_s} s")
        return self.values[key]

    def try_get(self, key):
        self.calls.append(("try_get", key))
        return self.values.get(key)

    def put(self, key, value):
        self.calls.append(("put", key))
        self.values[key] = value


def test_kv_callbacks_answer_a_plugin_through_c():
    store = DictStore()
    fields = kv_store.register(store)
    get, try_get, put = (kv_store.KV_CALLBACK(fields[f"kv_{name}_callback"]) for name in ("get", "try_get", "put"))
    errors = []

    def make_error(code, message, size):  # the plugin's callback_error: returns a (fake) PJRT_Error*
        errors.append((CODES.get(code, code), ctypes.string_at(message, size).decode()))
        return 4096 + len(errors)
    error_function = kv_store.CALLBACK_ERROR(make_error)

    def args(cls, user_arg, key, **values):
        made = _new(cls, key=ctypes.cast(ctypes.c_char_p(key), ctypes.c_void_p), key_size=len(key),
                    callback_error=ctypes.pointer(error_function), user_arg=user_arg, **values)
        return made, key  # (the key's bytes stay alive with the caller)

    value = b"\x00topology\xff" * 3  # values are bytes, NULs included (serialized protos)
    put_args, _ = args(kv_store._KeyValuePutArgs, fields["kv_put_user_arg"], b"pjrt:node/1",
                       value=ctypes.cast(ctypes.c_char_p(value), ctypes.c_void_p), value_size=len(value))
    assert put(ctypes.addressof(put_args)) is None and store.values == {b"pjrt:node/1": value}
    held = len(kv_store._values)
    for callback, cls, extra in ((get, kv_store._KeyValueGetArgs, {"timeout_in_ms": 50}),
                                 (try_get, kv_store._KeyValueTryGetArgs, {})):
        got, _ = args(cls, fields["kv_get_user_arg"], b"pjrt:node/1", **extra)
        assert callback(ctypes.addressof(got)) is None
        assert ctypes.string_at(got.value, got.value_size) == value and len(kv_store._values) == held + 1
        got.value_deleter_callback(got.value)  # the plugin copies the value, then deletes it
        assert len(kv_store._values) == held
    failures = [(get, kv_store._KeyValueGetArgs, b"absent", {"timeout_in_ms": 10}),
                (try_get, kv_store._KeyValueTryGetArgs, b"absent", {}),
                (get, kv_store._KeyValueGetArgs, b"lost", {"timeout_in_ms": 10})]
    for callback, cls, key, extra in failures:
        failed, _ = args(cls, fields["kv_get_user_arg"], key, **extra)
        assert callback(ctypes.addressof(failed)) == 4096 + len(errors)
    assert [code for code, _ in errors] == ["DEADLINE_EXCEEDED", "NOT_FOUND", "UNAVAILABLE"]
    assert "not set within 0.01 s" in errors[0][1] and "the coordinator went away" in errors[2][1], errors
    kv_store.unregister(fields["kv_get_user_arg"])
    gone, _ = args(kv_store._KeyValueTryGetArgs, fields["kv_get_user_arg"], b"pjrt:node/1")
    assert try_get(ctypes.addressof(gone)) and errors[-1][0] == "INTERNAL" and "no longer registered" in errors[-1][1]


def test_the_cpu_plugin_takes_no_distributed_options():
    """What docs/distributed.md reports: given node_id/num_nodes of process 1 of 2 and a key-value store, the
    xla-cpu-pjrt plugin creates an ordinary one-process client: process index 0, devices 0 and 1 of process 0, the
    store never called. (If a plugin update changes this, multi-process CPU runs become possible: revisit.)"""
    plugin = Plugin(cpu_plugin_path())
    store = DictStore()
    fields = kv_store.register(store)
    values, names = named_int64_values({"cpu_device_count": 2, "node_id": 1, "num_nodes": 2})
    create = _new(_ClientCreateArgs, create_options=ctypes.addressof(values), num_options=len(names), **fields)
    plugin.call("Client_Create", create)
    try:
        class ProcessIndexArgs(ctypes.Structure):  # PJRT_Client_ProcessIndex_Args
            _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                        ("client", ctypes.c_void_p), ("process_index", ctypes.c_int)]
        index = ProcessIndexArgs(ctypes.sizeof(ProcessIndexArgs), None, create.client)
        plugin.call("Client_ProcessIndex", index)
        found = _new(_ClientAddressableDevicesArgs, client=create.client)
        plugin.call("Client_Devices", found)  # (all the client's devices: its processes' together)
        ids = []
        for i in range(found.num_addressable_devices):
            description = _new(_DeviceGetDescriptionArgs, device=found.addressable_devices[i])
            plugin.call("Device_GetDescription", description)
            device_id = _new(_DeviceDescriptionIdArgs, device_description=description.device_description)
            plugin.call("DeviceDescription_Id", device_id)
            ids.append(device_id.id)
        assert (index.process_index, ids, store.calls) == (0, [0, 1], [])
    finally:
        plugin.function("Client_Destroy")(_handle_args(create.client))
        kv_store.unregister(fields["kv_get_user_arg"])


def test_the_coordinator_table_joins_and_waits():
    table = state._Table()
    table.join(0, 2)
    with pytest.raises(ValueError, match="two processes were started with process_id=0"):
        table.join(0, 2)
    with pytest.raises(ValueError, match=r"different num_processes: \[2, 3\]"):
        table.join(1, 3)
    assert table.barrier("b", 2, 0.01) == 1  # (timed out: one of two)
    assert table.get(b"k", 0.01) is None
    threading.Timer(0.05, table.put, (b"k", b"v")).start()
    assert table.get(b"k", 10) == b"v" and table.try_get(b"k") == b"v" and table.try_get(b"x") is None


def test_client_setup_gives_a_cuda_plugin_its_options_and_the_cpu_plugin_none(monkeypatch):
    monkeypatch.setattr(state, "_started_alone", False)
    assert state.client_setup(cpu_plugin=True) == ({}, None) and not state.started_alone()
    assert state.client_setup(cpu_plugin=False) == ({}, None) and state.started_alone()  # (initialize: too late)
    with pytest.raises(RuntimeError, match="must be called before the first computation"):
        dist.initialize("127.0.0.1:1", 2, 0)
    monkeypatch.setattr(state, "_started_alone", False)
    coordinator = state.Coordinator("127.0.0.1", 0, KEY)
    store = state.CoordinatorStore.connect("127.0.0.1", coordinator.port, KEY, 60)
    state.configure(state.Setup(1, 4, "host:1234", store, None, 1.0))
    try:
        options, plugin_store = state.client_setup(cpu_plugin=False)
        assert options == {"node_id": 1, "num_nodes": 4}
        plugin_store.put(b"topology", b"t")
        assert store.try_get(b"pjrt:topology") == b"t" and plugin_store.get(b"topology", 1) == b"t"
        assert state.client_setup(cpu_plugin=True) == ({}, None)
        assert (ember.process_index(), ember.process_count()) == (1, 4)
    finally:
        state.configure(None)
        store.release()
        coordinator.close()
    assert (ember.process_index(), ember.process_count()) == (0, 1)


@pytest.mark.parametrize("kwargs,error,message", [
    (dict(coordinator_address="127.0.0.1", num_processes=2, process_id=0), ValueError, 'must be "host:port"'),
    (dict(coordinator_address="127.0.0.1:1", num_processes=2, process_id=2), ValueError, "process_id must be in"),
    (dict(coordinator_address="127.0.0.1:1", num_processes=2, process_id="0"), TypeError, "process_id must be"),
    (dict(coordinator_address="127.0.0.1:1", num_processes=0, process_id=0), TypeError, "num_processes must be"),
    (dict(num_processes=2, process_id=0, cluster_detection_method="deactivate"), ValueError,
     "coordinator_address should be defined"),
    (dict(cluster_detection_method="slurm"), ValueError, "cluster_detection_method must be one of"),
    (dict(local_device_ids=[0]), NotImplementedError, "CUDA_VISIBLE_DEVICES"),
    (dict(coordinator_address="127.0.0.1:1", num_processes=2, process_id=1), ValueError, "secret key"),
    (dict(coordinator_address="127.0.0.1:1", num_processes=2, process_id=1, authkey=b"fifteen bytes.."), ValueError,
     "authkey .* must be at least 16 bytes, got 15"),
    (dict(coordinator_address="127.0.0.1:1", num_processes=2, process_id=1, authkey="a str, not bytes"), TypeError,
     "authkey must be bytes"),
])
def test_initialize_checks_its_arguments(kwargs, error, message, monkeypatch):
    monkeypatch.setattr(state, "_started_alone", False)  # (as in a process whose backends are the CPU's)
    for variable in ("EMBER_COORDINATOR_ADDRESS", "EMBER_NUM_PROCESSES", "EMBER_PROCESS_ID", "PMI_SIZE",
                     "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "EMBER_DISTRIBUTED_AUTHKEY"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(error, match=message):
        dist.initialize(**kwargs)
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="call ember.distributed.initialize first"):
        dist.key_value_store()


class OneHostComm:
    """MPI.COMM_WORLD of rank 0 of a run whose ranks all run on this host (what _from_mpi asks of it)."""

    def Get_rank(self):
        return 0

    def Get_size(self):
        return 2

    def allgather(self, value):
        return [value, value]

    def bcast(self, value, root):
        return value


def test_under_mpi_on_one_host_the_coordinator_listens_on_loopback(monkeypatch):
    """Where ember picks the address (MPI, none given) and every rank runs on rank 0's host: loopback, a random
    32-byte key."""
    monkeypatch.setattr(dist, "_mpi", lambda function: type("MPI", (), {"COMM_WORLD": OneHostComm()}))
    address, count, rank, key, coordinator = dist._from_mpi(None, None, None, None)
    try:
        assert (coordinator.host, address, count, rank, len(key)) == (
            "127.0.0.1", f"127.0.0.1:{coordinator.port}", 2, 0, 32)
    finally:
        coordinator.close()


PROCESS = textwrap.dedent("""
    import sys
    import ember, ember.distributed as dist
    port = sys.argv[1]
    if len(sys.argv) > 2:  # process 0: arguments; process 1: environment variables
        dist.initialize(f"127.0.0.1:{port}", 2, 0, initialization_timeout=60)
    else:
        dist.initialize(initialization_timeout=60)
    me = ember.process_index()
    store = dist.key_value_store()
    store.put(f"hello/{me}".encode(), f"from {me} of {ember.process_count()}".encode())
    print(me, store.get(f"hello/{1 - me}".encode(), 60).decode(), dist.is_initialized(), flush=True)
    dist.shutdown()
    print(me, "left", dist.is_initialized(), flush=True)
""")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_initialize_share_a_store_and_shut_down():
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK")}
    env["EMBER_DISTRIBUTED_AUTHKEY"] = os.urandom(16).hex()  # (the processes' shared secret)
    second = dict(env, EMBER_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", EMBER_NUM_PROCESSES="2", EMBER_PROCESS_ID="1")
    processes = [subprocess.Popen([sys.executable, "-c", PROCESS, str(port), *extra], env=environment, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for extra, environment in ((["0"], env), ([], second))]
    try:
        results = [process.communicate(timeout=120) for process in processes]
    finally:
        for process in processes:
            process.kill()
    for process, (_, err) in zip(processes, results):
        assert process.returncode == 0, err[-3000:]
    outputs = [out.splitlines() for out, _ in results]
    assert outputs == [["0 from 1 of 2 True", "0 left False"], ["1 from 0 of 2 True", "1 left False"]]


def _mpiexec():
    beside = pathlib.Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


@pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None or _mpiexec() is None,
                    reason="needs mpi4py and an MPI launcher (pip install 'ember[distributed]': mpi4py and mpich)")
def test_data_parallel_training_over_mpi():
    """tests/distributed_program.py under mpiexec -n 2: allreduce and broadcast against numpy, mismatch errors,
    and examples/data_parallel_mpi.py's check (2 processes on half batches = one process on the whole batch)."""
    # (python -m mpi4py: an exception in one process aborts both, where the other would wait in MPI forever)
    command = [_mpiexec(), "-n", "2", sys.executable, "-m", "mpi4py", str(HERE / "distributed_program.py")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=90, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("ok:")] == [
        "ok: initialize from MPI: process 0 of 2, key-value store shared",
        "ok: allreduce_gradients sum/mean/max/min over float32, float64, bfloat16, int32, bool, complex64 leaves",
        "ok: broadcast_parameters from process 1, bit for bit",
        "ok: mismatched trees and bad arguments raise in every process",
        "ok: shutdown"], result.stdout
    assert "data-parallel parameters match one process on the whole batch: True" in result.stdout
    assert np.isfinite(float(next(line for line in lines if "last loss" in line).split("last loss ")[1].split()[0]))
