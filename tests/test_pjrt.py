"""The PJRT binding on its own: plugin, client, devices, buffers, compile, execute, errors, lifetimes."""
import _ctypes  # a shared library that is not a PJRT plugin
import gc
import os
import subprocess
import sys
import textwrap
import threading
import weakref

import ml_dtypes
import numpy as np
import pytest

from ember._runtime import pjrt as _pjrt
from ember._runtime.pjrt.buffer import pin_client, unpin_client

F32 = np.dtype(np.float32)

ADD = """
module {
  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>) {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""
ADD_SPECS = [((4,), F32)]

SQUARE_AND_NEGATE = """
module {
  func.func public @main(%a: tensor<f64>, %b: tensor<2x3xi32>) -> (tensor<f64>, tensor<2x3xi32>) {
    %0 = stablehlo.multiply %a, %a : tensor<f64>
    %1 = stablehlo.negate %b : tensor<2x3xi32>
    return %0, %1 : tensor<f64>, tensor<2x3xi32>
  }
}
"""

# Without the module wrapper, with bf16 and bool.
BF16_SELECT = """
func.func public @main(%p: tensor<3xi1>, %a: tensor<3xbf16>, %b: tensor<3xbf16>) -> tensor<3xbf16> {
  %0 = stablehlo.multiply %a, %b : tensor<3xbf16>
  %1 = stablehlo.select %p, %0, %a : tensor<3xi1>, tensor<3xbf16>
  return %1 : tensor<3xbf16>
}
"""

CONSTANT = """
func.func public @main() -> tensor<2xi64> {
  %0 = stablehlo.constant dense<[7, -8]> : tensor<2xi64>
  return %0 : tensor<2xi64>
}
"""


def new_client() -> _pjrt.Client:
    return _pjrt.Client(_pjrt.Plugin(_pjrt.default_plugin_path()))


@pytest.fixture(scope="module")
def client():
    return new_client()


@pytest.fixture(scope="module")
def add(client):
    return client.compile(ADD)


def f32(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


# ---------------------------------------------------------------------------------------------------------------
# Plugins and clients
def test_plugin(client):
    plugin = client.plugin
    assert plugin.path == _pjrt.default_plugin_path()
    assert plugin.api_version[0] == 0 and plugin.api_version[1] >= 40
    assert "api_version" in repr(plugin)
    assert _pjrt.Plugin(plugin.path).api_version == plugin.api_version  # loading again is fine


def test_missing_and_invalid_plugins(tmp_path):
    with pytest.raises(_pjrt.PjrtError, match="not found"):
        _pjrt.Plugin(str(tmp_path / "missing.so"))
    bogus = tmp_path / "bogus.so"
    bogus.write_bytes(b"not a shared library")
    with pytest.raises(_pjrt.PjrtError, match="cannot load PJRT plugin"):
        _pjrt.Plugin(str(bogus))
    if getattr(_ctypes, "__file__", None):
        with pytest.raises(_pjrt.PjrtError, match="no GetPjrtApi symbol"):
            _pjrt.Plugin(_ctypes.__file__)


def test_default_plugin_path(monkeypatch, tmp_path):
    monkeypatch.delenv("EMBER_PJRT_PLUGIN", raising=False)
    path = _pjrt.default_plugin_path()
    assert os.path.basename(path) == "xla_cpu_pjrt.so" and os.path.isfile(path)
    monkeypatch.setenv("EMBER_PJRT_PLUGIN", path)
    assert _pjrt.default_plugin_path() == path
    monkeypatch.setenv("EMBER_PJRT_PLUGIN", str(tmp_path / "nothing.so"))
    with pytest.raises(RuntimeError, match="EMBER_PJRT_PLUGIN"):
        _pjrt.default_plugin_path()


def test_find_cuda_plugin():
    path = _pjrt.find_cuda_plugin()
    assert path is None or (os.path.isfile(path) and path.endswith(".so"))


def test_client_and_devices(client):
    assert client.platform_name == "cpu"
    assert client.devices
    assert repr(client.devices[0]) == "CpuDevice(id=0)"
    assert len({d.id for d in client.devices}) == len(client.devices)
    for device in client.devices:
        assert device.client is client
        assert isinstance(device.kind, str) and device.kind
    assert "cpu" in repr(client)


# ---------------------------------------------------------------------------------------------------------------
# Element types and host transfers
@pytest.mark.parametrize("dtype, code", [
    (np.bool_, 1), (np.int8, 2), (np.int16, 3), (np.int32, 4), (np.int64, 5), (np.uint8, 6), (np.uint16, 7),
    (np.uint32, 8), (np.uint64, 9), (np.float16, 10), (np.float32, 11), (np.float64, 12),
    (ml_dtypes.bfloat16, 13), (np.complex64, 14), (np.complex128, 15),
])
def test_numpy_dtype_to_pjrt(dtype, code):
    assert _pjrt.numpy_dtype_to_pjrt(np.dtype(dtype)) == code
    assert _pjrt.numpy_dtype_to_pjrt(dtype) == code


@pytest.mark.parametrize("dtype", [np.dtype("U3"), np.dtype(object), np.dtype("datetime64[s]"),
                                   np.dtype([("a", np.int32)])])
def test_unsupported_dtypes(dtype):
    with pytest.raises(TypeError, match="has no PJRT buffer type"):
        _pjrt.numpy_dtype_to_pjrt(dtype)


ROUND_TRIPS = {
    "bool": np.array([True, False, True]),
    "int8": np.array([-128, 0, 127], np.int8),
    "int16": np.array([-3, 4], np.int16),
    "int32": np.arange(5, dtype=np.int32),
    "int64": np.array([2 ** 40, -(2 ** 50)], np.int64),
    "uint8": np.arange(3, dtype=np.uint8),
    "uint16": np.array([65535], np.uint16),
    "uint32": np.array([2 ** 32 - 1], np.uint32),
    "uint64": np.array([2 ** 64 - 1], np.uint64),
    "float16": np.array([0.5, -1.25], np.float16),
    "bfloat16": np.array([1.5, -2.25, 3.0], dtype=ml_dtypes.bfloat16),
    "float32": np.arange(12, dtype=np.float32).reshape(3, 4),
    "float64": np.linspace(0, 1, 7),
    "complex64": np.array([1 + 2j, -3j], np.complex64),
    "complex128": np.array([[1 - 1j]], np.complex128),
    "scalar f32": np.array(2.5, np.float32),
    "scalar bool": np.array(True),
    "scalar int64": np.array(7, np.int64),
    "zero-size": np.zeros((0, 3), np.float32),
    "zero-size 1d": np.zeros((0,), np.int32),
    "non-contiguous": np.arange(12, dtype=np.float32).reshape(3, 4)[:, 1],
    "fortran order": np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)),
    "reversed": np.arange(5, dtype=np.float64)[::-1],
    "read-only": np.frombuffer(b"\x01\x00\x00\x00\x02\x00\x00\x00", np.int32),
    "bfloat16 2d": np.arange(6, dtype=ml_dtypes.bfloat16).reshape(2, 3),
}


@pytest.mark.parametrize("value", ROUND_TRIPS.values(), ids=ROUND_TRIPS.keys())
def test_host_round_trip(client, value):
    buffer = client.buffer_from_numpy(value)
    assert buffer.shape == value.shape and buffer.dtype == value.dtype
    assert buffer.device is client.devices[0] and buffer.client is client
    back = buffer.to_numpy()
    assert back.dtype == value.dtype and back.shape == value.shape
    np.testing.assert_array_equal(back, value)
    buffer.block_until_ready()


def test_buffer_from_non_arrays(client):
    np.testing.assert_array_equal(client.buffer_from_numpy(np.float32(3.5)).to_numpy(), np.float32(3.5))
    back = client.buffer_from_numpy([[1, 2], [3, 4]]).to_numpy()
    np.testing.assert_array_equal(back, [[1, 2], [3, 4]])
    big_endian = client.buffer_from_numpy(np.array([1.5, -2.0], ">f8"))
    assert big_endian.dtype == np.float64
    np.testing.assert_array_equal(big_endian.to_numpy(), [1.5, -2.0])
    with pytest.raises(TypeError, match="has no PJRT buffer type"):
        client.buffer_from_numpy(np.array(["a", "b"]))


def test_host_data_is_copied(client):
    value = f32([1, 2, 3, 4])
    buffer = client.buffer_from_numpy(value)
    value[:] = 0
    np.testing.assert_array_equal(buffer.to_numpy(), [1, 2, 3, 4])
    out = buffer.to_numpy()
    out[:] = 9
    np.testing.assert_array_equal(buffer.to_numpy(), [1, 2, 3, 4])


# ---------------------------------------------------------------------------------------------------------------
# Compile and execute
def test_compile_and_execute(client, add):
    assert add.num_outputs == 1 and add.client is client
    a = client.buffer_from_numpy(np.arange(4, dtype=np.float32))
    b = client.buffer_from_numpy(np.ones(4, np.float32))
    (out,) = add.execute([a, b], ADD_SPECS)
    assert out.shape == (4,) and out.dtype == F32 and out.device is client.devices[0] and out.client is client
    out.block_until_ready()
    np.testing.assert_array_equal(out.to_numpy(), [1.0, 2.0, 3.0, 4.0])
    (again,) = add.execute((out, out), [((4,), np.float32)])  # a tuple of args, a dtype given as a type
    assert again.dtype == F32
    np.testing.assert_array_equal(again.to_numpy(), [2.0, 4.0, 6.0, 8.0])


def test_multiple_outputs_and_scalars(client):
    exe = client.compile(SQUARE_AND_NEGATE)
    assert exe.num_outputs == 2
    x = client.buffer_from_numpy(np.array(3.0))
    y = client.buffer_from_numpy(np.arange(6, dtype=np.int32).reshape(2, 3))
    square, negated = exe.execute([x, y], [((), np.dtype(np.float64)), ((2, 3), np.dtype(np.int32))])
    assert square.shape == () and square.dtype == np.float64
    back = square.to_numpy()
    assert back.shape == () and back == 9.0
    np.testing.assert_array_equal(negated.to_numpy(), -np.arange(6).reshape(2, 3))


def test_bfloat16_and_bool_execute(client):
    exe = client.compile(BF16_SELECT)
    p = np.array([True, False, True])
    a = np.array([1.5, 2.0, -3.0], ml_dtypes.bfloat16)
    b = np.array([2.0, 4.0, 0.5], ml_dtypes.bfloat16)
    args = [client.buffer_from_numpy(v) for v in (p, a, b)]
    (out,) = exe.execute(args, [((3,), np.dtype(ml_dtypes.bfloat16))])
    np.testing.assert_array_equal(out.to_numpy(), np.where(p, a * b, a))


def test_execute_without_arguments(client):
    exe = client.compile(CONSTANT)
    (out,) = exe.execute([], [((2,), np.dtype(np.int64))])
    np.testing.assert_array_equal(out.to_numpy(), [7, -8])
    assert out.device is client.devices[0]


def test_repeated_calls_reuse_nothing_stale(client, add):
    a = client.buffer_from_numpy(f32([1, 2, 3, 4]))
    results = [add.execute([a, a], ADD_SPECS)[0] for _ in range(50)]
    for i in range(10):
        results.append(add.execute([results[i], a], ADD_SPECS)[0])
    for out in results[:50]:
        np.testing.assert_array_equal(out.to_numpy(), [2, 4, 6, 8])
    for out in results[50:]:
        np.testing.assert_array_equal(out.to_numpy(), [3, 6, 9, 12])


def test_execute_on_another_device(client, add):
    if len(client.devices) < 2:
        pytest.skip("one device only")
    device = client.devices[1]
    a = client.buffer_from_numpy(f32([1, 2, 3, 4]), device)
    assert a.device is device
    for _ in range(2):  # the second call reuses the portable executable
        (out,) = add.execute([a, a], ADD_SPECS)
        assert out.device is device
        np.testing.assert_array_equal(out.to_numpy(), [2, 4, 6, 8])
    home = client.buffer_from_numpy(f32([1, 1, 1, 1]))
    with pytest.raises(_pjrt.PjrtError, match="LoadedExecutable_Execute"):
        add.execute([a, home], ADD_SPECS)  # arguments on two devices


def test_concurrent_execute(client, add):
    errors = []

    def work(k: int) -> None:
        try:
            a = client.buffer_from_numpy(np.full(4, k, np.float32))
            for _ in range(200):
                (out,) = add.execute([a, a], ADD_SPECS)
                np.testing.assert_array_equal(out.to_numpy(), np.full(4, 2 * k, np.float32))
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# ---------------------------------------------------------------------------------------------------------------
# Errors
def test_compile_error_is_a_pjrt_error(client, add):
    with pytest.raises(_pjrt.PjrtError, match="PJRT_Client_Compile failed") as info:
        client.compile("module { func.func public @main() -> () { this is not mlir } }")
    assert "custom op 'this' is unknown" in str(info.value)
    assert info.value.call == "PJRT_Client_Compile"
    bad_types = ADD.replace("stablehlo.add %a, %b : tensor<4xf32>", "stablehlo.add %a, %b : tensor<3xf32>")
    with pytest.raises(_pjrt.PjrtError, match="expects different type"):
        client.compile(bad_types)
    # the process, the client and earlier executables survive
    a = client.buffer_from_numpy(f32([1, 2, 3, 4]))
    np.testing.assert_array_equal(add.execute([a, a], ADD_SPECS)[0].to_numpy(), [2, 4, 6, 8])
    client.compile(ADD)


def test_execute_errors_from_the_plugin(client, add):
    a = client.buffer_from_numpy(f32([1, 2, 3, 4]))
    with pytest.raises(_pjrt.PjrtError, match="PJRT_LoadedExecutable_Execute failed.*expected 2"):
        add.execute([a], ADD_SPECS)
    short = client.buffer_from_numpy(f32([1, 2, 3]))
    with pytest.raises(_pjrt.PjrtError, match="size"):
        add.execute([a, short], ADD_SPECS)
    np.testing.assert_array_equal(add.execute([a, a], ADD_SPECS)[0].to_numpy(), [2, 4, 6, 8])


def test_out_specs_must_match_the_outputs(client, add):
    a = client.buffer_from_numpy(f32([1, 2, 3, 4]))
    with pytest.raises(ValueError, match="0 output specs given for an executable with 1 outputs"):
        add.execute([a, a], [])
    with pytest.raises(ValueError, match="2 output specs"):
        add.execute([a, a], ADD_SPECS * 2)
    specs = list(ADD_SPECS)
    add.execute([a, a], specs)
    specs.append(ADD_SPECS[0])  # the same list, changed after a call, is checked again
    with pytest.raises(ValueError, match="2 output specs"):
        add.execute([a, a], specs)


def test_arguments_must_be_buffers(client, add):
    a = client.buffer_from_numpy(f32([1, 2, 3, 4]))
    with pytest.raises(TypeError, match="argument 1 is a ndarray, not a Buffer"):
        add.execute([a, f32([1, 2, 3, 4])], ADD_SPECS)
    with pytest.raises(TypeError, match="argument 0 is a int"):
        add.execute([3, a], ADD_SPECS)


def test_buffers_of_another_client(client, add):
    other = new_client()
    foreign = other.buffer_from_numpy(f32([1, 2, 3, 4]))
    with pytest.raises(_pjrt.PjrtError, match="another PJRT client"):
        add.execute([foreign, foreign], ADD_SPECS)
    # a device of another client puts the buffer on that client
    moved = client.buffer_from_numpy(f32([5, 6, 7, 8]), other.devices[0])
    assert moved.client is other and moved.device is other.devices[0]


def test_deleted_buffers(client, add):
    a = client.buffer_from_numpy(np.ones(4, np.float32))
    assert not a.is_deleted
    a.delete()
    a.delete()  # idempotent
    assert a.is_deleted and "deleted" in repr(a)
    with pytest.raises(_pjrt.PjrtError, match="to_numpy: the buffer has been deleted"):
        a.to_numpy()
    with pytest.raises(_pjrt.PjrtError, match="block_until_ready: the buffer has been deleted"):
        a.block_until_ready()
    b = client.buffer_from_numpy(np.ones(4, np.float32))
    with pytest.raises(_pjrt.PjrtError, match="argument 1 is a buffer that has been deleted"):
        add.execute([b, a], ADD_SPECS)


# ---------------------------------------------------------------------------------------------------------------
# Lifetimes
def _client_owned_objects():
    client = new_client()
    exe = client.compile(ADD)
    a = client.buffer_from_numpy(np.ones(4, np.float32))
    return exe, a, weakref.ref(client)


def test_objects_keep_their_client_alive():
    exe, a, client_ref = _client_owned_objects()
    gc.collect()
    assert client_ref() is not None
    (out,) = exe.execute([a, a], ADD_SPECS)
    np.testing.assert_array_equal(out.to_numpy(), [2.0] * 4)
    del exe, a
    gc.collect()
    assert client_ref() is not None  # out still holds it
    np.testing.assert_array_equal(out.to_numpy(), [2.0] * 4)
    del out
    gc.collect()
    assert client_ref() is None


def test_closed_client():
    client = new_client()
    exe = client.compile(ADD)
    a = client.buffer_from_numpy(np.ones(4, np.float32))
    client.close()
    client.close()  # idempotent
    assert a.is_deleted and "closed" in repr(client)
    with pytest.raises(_pjrt.PjrtError, match="closed"):
        a.to_numpy()
    with pytest.raises(_pjrt.PjrtError, match="closed"):
        exe.execute([a, a], ADD_SPECS)
    with pytest.raises(_pjrt.PjrtError, match="closed"):
        client.compile(ADD)
    with pytest.raises(_pjrt.PjrtError, match="closed"):
        client.buffer_from_numpy(np.ones(4, np.float32))
    a.delete()
    del exe, a, client
    gc.collect()


def test_close_waits_for_the_calls_that_pinned_the_client():
    """A PJRT call made without the GIL pins its client (pjrt/buffer.py's pin_client, the C extension's when in use):
    close() marks the client closed at once, so no new call starts, then destroys it only when the last pin ends."""
    client = new_client()
    exe = client.compile(ADD)
    a = client.buffer_from_numpy(np.ones(4, np.float32))
    assert pin_client(client) == client.handle
    closing = threading.Thread(target=client.close)
    closing.start()
    closing.join(0.3)
    assert closing.is_alive() and client.handle is None  # closed to new calls, waiting for the pinned one
    assert pin_client(client) is None
    with pytest.raises(_pjrt.PjrtError, match="closed"):
        exe.execute([a, a], ADD_SPECS)
    unpin_client(client)
    closing.join(10)
    assert not closing.is_alive() and client._calls_running() == 0
    del exe, a, client
    gc.collect()


def test_objects_alive_at_interpreter_exit():
    """Destructors run at shutdown, in any order, with module globals possibly gone: nothing may crash or print."""
    script = textwrap.dedent(f"""
        import numpy as np
        from ember._runtime import pjrt as _pjrt
        client = _pjrt.Client(_pjrt.Plugin(_pjrt.default_plugin_path()))
        exe = client.compile({ADD!r})
        a = client.buffer_from_numpy(np.ones(4, np.float32))
        outs = exe.execute([a, a], [((4,), np.dtype(np.float32))])
        cycle = [outs, exe]
        cycle.append(cycle)
        print("ok")
    """)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert "Exception ignored" not in done.stderr and "Traceback" not in done.stderr


def test_host_view_shares_the_buffer_memory_and_pins_it(client):
    import gc
    import ember
    import ember.numpy as enp
    x = enp.arange(6, dtype="float32").reshape(2, 3)
    y = ember.jit(lambda a: a.T * 2)(x)
    view = np.asarray(y)
    assert not view.flags.writeable and view.shape == (3, 2)
    np.testing.assert_array_equal(view, np.arange(6, dtype=np.float32).reshape(2, 3).T * 2)
    assert np.asarray(y) is view  # cached: one view per array
    buffer = y._buffer
    y.delete()  # the view still reads valid memory: the buffer is destroyed when the last view dies
    assert buffer.is_deleted and buffer._doomed is not None
    np.testing.assert_array_equal(view, np.arange(6, dtype=np.float32).reshape(2, 3).T * 2)
    del view
    gc.collect()
    assert buffer._doomed is None and buffer._pins == 0
    for dtype in ("bool", "int8", "bfloat16", "float16", "int64", "uint32"):
        z = ember.jit(lambda a: a.reshape(5, 1).T)(enp.arange(5).astype(dtype))
        np.testing.assert_array_equal(np.asarray(z), z._buffer.to_numpy(), strict=True)
    assert ember.numpy.zeros((0, 3))._buffer.host_view() is None
