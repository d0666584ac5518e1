"""The PJRT binding on its own: plugin, client, buffers, compile, execute, errors."""
import gc

import ml_dtypes
import numpy as np
import pytest

from ember import _pjrt

ADD = """
module {
  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>) {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
"""

TWO_OUTPUTS = """
module {
  func.func public @main(%a: tensor<f64>, %b: tensor<2x3xi32>) -> (tensor<f64>, tensor<2x3xi32>) {
    %0 = stablehlo.multiply %a, %a : tensor<f64>
    %1 = stablehlo.negate %b : tensor<2x3xi32>
    return %0, %1 : tensor<f64>, tensor<2x3xi32>
  }
}
"""


@pytest.fixture(scope="module")
def client():
    return _pjrt.Client(_pjrt.Plugin(_pjrt.default_plugin_path()))


def test_plugin_and_client(client):
    assert client.plugin.api_version[0] == 0 and client.plugin.api_version[1] >= 40
    assert client.platform_name == "cpu"
    assert client.devices and repr(client.devices[0]) == "CpuDevice(id=0)"


def test_compile_and_execute(client):
    exe = client.compile(ADD)
    assert exe.num_outputs == 1
    a = client.buffer_from_numpy(np.arange(4, dtype=np.float32))
    b = client.buffer_from_numpy(np.ones(4, np.float32))
    (out,) = exe.execute([a, b], [((4,), np.dtype(np.float32))])
    np.testing.assert_array_equal(out.to_numpy(), [1.0, 2.0, 3.0, 4.0])
    out.block_until_ready()


def test_multiple_outputs_and_scalars(client):
    exe = client.compile(TWO_OUTPUTS)
    x = client.buffer_from_numpy(np.array(3.0))
    y = client.buffer_from_numpy(np.arange(6, dtype=np.int32).reshape(2, 3))
    sq, neg = exe.execute([x, y], [((), np.dtype(np.float64)), ((2, 3), np.dtype(np.int32))])
    assert sq.to_numpy().shape == () and float(sq.to_numpy()) == 9.0
    np.testing.assert_array_equal(neg.to_numpy(), -np.arange(6).reshape(2, 3))


@pytest.mark.parametrize("value", [
    np.array([True, False]), np.arange(5, dtype=np.int32), np.linspace(0, 1, 7), np.arange(3, dtype=np.uint8),
    np.array([1.5, -2.25], dtype=ml_dtypes.bfloat16), np.zeros((0, 3), np.float32), np.array(7, np.int64),
    np.arange(12, dtype=np.float32).reshape(3, 4)[:, 1],  # not contiguous
])
def test_host_round_trip(client, value):
    buffer = client.buffer_from_numpy(value)
    back = buffer.to_numpy()
    assert back.dtype == value.dtype and back.shape == value.shape
    np.testing.assert_array_equal(back, value)


def test_compile_error_is_an_exception(client):
    with pytest.raises(_pjrt.PjrtError, match="PJRT_Client_Compile failed"):
        client.compile("module { func.func public @main() -> () { this is not mlir } }")
    client.compile(ADD)  # the process and the client survive


def test_out_spec_mismatch_and_deleted_buffers(client):
    exe = client.compile(ADD)
    a = client.buffer_from_numpy(np.ones(4, np.float32))
    with pytest.raises(ValueError, match="1 outputs"):
        exe.execute([a, a], [])
    a.delete()
    a.delete()  # idempotent
    assert a.is_deleted
    with pytest.raises(_pjrt.PjrtError, match="deleted"):
        a.to_numpy()
    with pytest.raises(_pjrt.PjrtError, match="deleted"):
        exe.execute([a, a], [((4,), np.dtype(np.float32))])


def test_objects_keep_their_client_alive():
    client = _pjrt.Client(_pjrt.Plugin(_pjrt.default_plugin_path()))
    exe = client.compile(ADD)
    a = client.buffer_from_numpy(np.ones(4, np.float32))
    del client
    gc.collect()
    (out,) = exe.execute([a, a], [((4,), np.dtype(np.float32))])
    np.testing.assert_array_equal(out.to_numpy(), [2.0] * 4)


def test_unsupported_dtype():
    with pytest.raises(TypeError, match="has no PJRT buffer type"):
        _pjrt.numpy_dtype_to_pjrt(np.dtype("U3"))
