"""DLPack: ember arrays shared with numpy, torch and JAX (ember._runtime.dlpack, Array.__dlpack__).

What is claimed zero-copy is checked by pointer equality with the PJRT buffer's memory; lifetimes (exporter or
consumer first, Array.delete() while exported, unconsumed capsules, interpreter exit) are checked in process and,
where a mistake would crash, in a subprocess."""
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

from ember._runtime import dlpack as D
from ember._runtime.array import Array, device_put
from ember._runtime.backends import get_client
from ember._runtime.dlpack import from_dlpack
from ember._runtime.pjrt import PjrtError
from ember._runtime.pjrt.structs import _BufferUnsafePointerArgs, _new

pytestmark = pytest.mark.usefixtures("ember_x64")  # float64 inputs and oracles (numpy, JAX in x64 mode)

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(t) for t in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                                "float16", "float32", "float64")] + [BF16]
NUMPY_DTYPES = [d for d in DTYPES if d != BF16]  # numpy has no bfloat16 in DLPack
SHAPES = [(), (0,), (5,), (2, 3, 4), (1, 7), (3, 0, 2)]
ids = str
# the dtype x shape sweeps: three shapes (rank 0, empty, 3-D) by default, all of them with -m slow
SWEEP_SHAPES = [pytest.param(s, id=str(s), marks=() if s in ((), (0,), (2, 3, 4)) else pytest.mark.slow)
                for s in SHAPES]


def sample(shape, dtype):
    values = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) % 7 - 2
    if dtype == np.bool_:
        return np.asarray(values > 0)
    if dtype.kind == "u":
        values = np.abs(values)
    return np.asarray(values.astype(dtype))


def aligned(values, offset=0):
    """A copy of values whose data starts `offset` bytes past a 64-byte boundary."""
    raw = np.empty(values.nbytes + 128, np.uint8)
    start = (-raw.__array_interface__["data"][0]) % 64 + offset
    out = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape)
    out[...] = values
    return out


def address(array):
    """The address of an ember array's PJRT buffer memory (PJRT_Buffer_UnsafePointer)."""
    args = _new(_BufferUnsafePointerArgs, buffer=array.buffer.handle)
    array.buffer.client.plugin.call("Buffer_UnsafePointer", args)
    return args.buffer_pointer


def np_address(array):
    return array.__array_interface__["data"][0]


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    np.testing.assert_array_equal(a.view(np.uint16) if a.dtype == BF16 else a,
                                  b.view(np.uint16) if b.dtype == BF16 else b)


def capsule_name(capsule):
    for name in ("dltensor_versioned", "dltensor", "used_dltensor_versioned", "used_dltensor"):
        if D._capsule_is_valid(capsule, D._NAMES[name]):
            return name
    return None


@pytest.fixture(autouse=True)
def no_leaks():
    """Every test ends with no export and no imported view left over (those it made are gone). A full collection
    runs only when some are left (those in reference cycles): on the heap of a whole test run it costs ~0.1-0.5 s."""
    yield
    if D._live_exports or D._imports:
        gc.collect()
    assert not D._live_exports and not D._imports


# ---------------------------------------------------------------------------------------------------------------
# numpy
def test_dlpack_device():
    assert device_put(np.ones(3)).__dlpack_device__() == (1, 0)


@pytest.mark.parametrize("shape", SWEEP_SHAPES)
@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=ids)
def test_export_to_numpy_is_zero_copy_and_read_only(dtype, shape):
    values = sample(shape, dtype)
    a = device_put(values)
    n = np.from_dlpack(a)
    same(n, values)
    assert not n.flags.writeable  # the versioned capsule's READ_ONLY flag
    if n.size:
        assert np_address(n) == address(a)
    with pytest.raises(ValueError):
        n[...] = 0


@pytest.mark.parametrize("shape", SWEEP_SHAPES)
@pytest.mark.parametrize("dtype", NUMPY_DTYPES, ids=ids)
def test_import_from_numpy(dtype, shape):
    values = sample(shape, dtype)
    fit = aligned(values)
    e = from_dlpack(fit)
    assert type(e) is Array and e.dtype == dtype and e.shape == shape and not e.weak_type
    same(e, values)
    if values.size:
        assert address(e) == np_address(fit)  # 64-byte aligned: a view, no copy
        misfit = aligned(values, offset=16)  # numpy's own alignment: copied
        e2 = from_dlpack(misfit)
        same(e2, values)
        assert address(e2) != np_address(misfit)
        with pytest.raises(BufferError, match="not 64-byte aligned"):
            from_dlpack(misfit, copy=False)
    same(from_dlpack(values), values)  # whatever numpy's alignment


def test_numpy_roundtrip_and_computation():
    x = aligned(np.arange(12, dtype=np.float32).reshape(3, 4))
    e = from_dlpack(x)
    same(e * 2 + 1, x * 2 + 1)
    back = np.from_dlpack(e)
    assert np_address(back) == np_address(x)  # the same memory all the way round
    same(back, x)


def test_bfloat16_export_to_numpy_is_refused_and_released():
    a = device_put(np.ones(3, BF16))
    with pytest.raises(RuntimeError, match="Unsupported dtype"):  # numpy's own error reaches the caller
        np.from_dlpack(a)  # numpy has no bfloat16: it drops the capsule unconsumed, which releases the buffer
    assert a.buffer._pins == 0


def test_non_contiguous_numpy_is_copied():
    base = aligned(np.arange(24, dtype=np.int32).reshape(4, 6))
    for view in (base[:, ::2], base.T, base[::-1], base[1:3, 1:4]):
        same(from_dlpack(view), view)
        with pytest.raises(BufferError, match="copy=False"):
            from_dlpack(view, copy=False)
    same(from_dlpack(base[:, :1]), base[:, :1])
    column = aligned(np.arange(4, dtype=np.float64).reshape(4, 1))  # (the stride of a unit dimension is free)
    assert address(from_dlpack(column, copy=False)) == np_address(column)


def test_imported_view_keeps_the_producer_alive_until_deleted():
    x = aligned(np.arange(8, dtype=np.float32))
    alive = weakref.ref(x)
    e = from_dlpack(x)
    del x
    gc.collect()
    assert alive() is not None  # numpy's deleter not called yet: the view uses the memory
    same(e + 0, np.arange(8, dtype=np.float32))
    e.delete()  # the PJRT buffer is destroyed: on_delete calls numpy's deleter
    gc.collect()
    assert alive() is None
    y = aligned(np.arange(3.0))
    alive = weakref.ref(y)
    e = from_dlpack(y)
    del y, e
    gc.collect()
    assert alive() is None


def test_imported_view_sees_producer_writes():
    """Documented: a view shares the producer's memory, like jax.dlpack (ember assumes it is not written)."""
    x = aligned(np.zeros(4, np.float32))
    e = from_dlpack(x)
    x[0] = 5
    assert float(e[0]) == 5.0
    assert float(from_dlpack(x, copy=True)[0]) == 5.0


# ---------------------------------------------------------------------------------------------------------------
# capsules and flags
def read_capsule(capsule):
    return capsule_name(capsule), D._managed_tensor(capsule)[0]


def test_capsule_versions_and_fields():
    a = device_put(np.arange(6, dtype=np.int16).reshape(2, 3))
    for kwargs, expect in (({}, "dltensor"), ({"max_version": None}, "dltensor"),
                           ({"max_version": (0, 8)}, "dltensor"), ({"max_version": (1, 0)}, "dltensor_versioned"),
                           ({"max_version": (1, 3)}, "dltensor_versioned"),
                           ({"max_version": (2, 0)}, "dltensor_versioned")):
        capsule = a.__dlpack__(**kwargs)
        name, managed = read_capsule(capsule)
        assert name == expect
        t = managed.dl_tensor
        assert (t.device.device_type, t.device.device_id) == (1, 0)
        assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (D.kDLInt, 16, 1)
        assert t.ndim == 2 and [t.shape[0], t.shape[1]] == [2, 3] and [t.strides[0], t.strides[1]] == [3, 1]
        assert t.data == address(a) and t.byte_offset == 0
        if name == "dltensor_versioned":
            assert (managed.version.major, managed.version.minor) == (1, 0)
            assert managed.flags == D.DLPACK_FLAG_BITMASK_READ_ONLY
        assert len(D._live_exports) == 1
        del capsule, managed, t  # never consumed: its destructor releases the buffer
        gc.collect()
        assert not D._live_exports and a.buffer._pins == 0
    capsule = a.__dlpack__(max_version=(1, 0), copy=True)
    _, managed = read_capsule(capsule)
    assert managed.flags == D.DLPACK_FLAG_BITMASK_IS_COPIED and managed.dl_tensor.data != address(a)
    del capsule, managed


def test_bfloat16_and_bool_dtype_codes():
    for dtype, code in ((BF16, (D.kDLBfloat, 16)), (np.dtype(bool), (D.kDLBool, 8))):
        capsule = device_put(np.ones(2, dtype)).__dlpack__(max_version=(1, 0))
        t = read_capsule(capsule)[1].dl_tensor
        assert (t.dtype.code, t.dtype.bits) == code
        same(from_dlpack(capsule), np.ones(2, dtype))  # a capsule is accepted as it is
        assert capsule_name(capsule) == "used_dltensor_versioned"
        del capsule, t


def test_copy_semantics():
    values = np.arange(10, dtype=np.float32)
    a = device_put(values)
    n = np.from_dlpack(a, copy=True)
    assert np_address(n) != address(a) and n.flags.writeable
    n[0] = 99  # a copy: the array is unchanged
    assert float(a[0]) == 0.0
    assert np_address(np.from_dlpack(a, copy=False)) == address(a)
    assert np_address(np.from_dlpack(a, device="cpu")) == address(a)
    fit = aligned(values)
    assert address(from_dlpack(fit, copy=True)) != np_address(fit)
    assert address(from_dlpack(fit, copy=False)) == np_address(fit)
    same(from_dlpack(aligned(np.ones((0, 3)), 8), copy=False), np.ones((0, 3)))  # empty: nothing to copy
    assert from_dlpack(a) is a
    b = from_dlpack(a, copy=True)
    assert b is not a and address(b) != address(a)
    same(b, values)


def test_device_argument():
    devices = get_client().devices
    fit = aligned(np.arange(6.0))
    e = from_dlpack(fit, device=devices[-1])
    assert e.device is devices[-1] and address(e) == np_address(fit)
    assert from_dlpack(fit, device="cpu").device is devices[0]
    if len(devices) > 1:
        moved = from_dlpack(e, device=devices[0])
        assert moved.device is devices[0] and address(moved) != address(e)
        same(moved, fit)
        with pytest.raises(BufferError, match="copy=False"):
            from_dlpack(e, device=devices[0], copy=False)


def test_errors():
    a = device_put(np.ones(3, np.float32))
    with pytest.raises(BufferError, match="stream"):
        a.__dlpack__(stream=1)
    with pytest.raises(BufferError):
        a.__dlpack__(dl_device=(2, 0))
    with pytest.raises(BufferError, match="copy=False"):
        a.__dlpack__(dl_device=(1, 1), copy=False)
    with pytest.raises(ValueError, match="copy"):
        a.__dlpack__(copy="yes")
    with pytest.raises(TypeError, match="__dlpack__"):
        from_dlpack([1, 2, 3])
    np.testing.assert_array_equal(np.asarray(from_dlpack(np.array([1 + 2j, 3j], np.complex64))), [1 + 2j, 3j])
    with pytest.raises(TypeError, match="device"):
        from_dlpack(np.ones(3), device="gpu:0")
    capsule = np.ones(3).__dlpack__()
    from_dlpack(capsule)
    with pytest.raises(ValueError, match="consumed"):
        from_dlpack(capsule)
    a.delete()
    with pytest.raises(RuntimeError, match="deleted"):
        a.__dlpack__()
    with pytest.raises(RuntimeError, match="deleted"):
        np.from_dlpack(a)


def test_unsupported_dtype_capsule_is_not_consumed():
    torch = pytest.importorskip("torch")
    capsule = torch.ones(2, dtype=torch.complex32).__dlpack__()
    with pytest.raises(TypeError, match="complex32"):
        from_dlpack(capsule)
    assert capsule_name(capsule) == "dltensor"  # left to its destructor (torch's deleter)


# ---------------------------------------------------------------------------------------------------------------
# lifetimes
def test_exporter_deleted_before_consumer():
    a = device_put(np.arange(5.0))
    n = np.from_dlpack(a)
    del a
    gc.collect()
    same(n, np.arange(5.0))
    assert len(D._live_exports) == 1
    del n


def test_array_delete_while_exported():
    a = device_put(np.arange(5, dtype=np.int32))
    buffer = a.buffer
    n = np.from_dlpack(a)
    a.delete()
    assert a.is_deleted() and buffer.handle is None and buffer._doomed  # destroyed when the consumer lets go
    same(n, np.arange(5, dtype=np.int32))
    del n
    gc.collect()
    assert buffer._doomed is None and buffer._pins == 0


def test_external_reference_count_returns_to_zero():
    a = device_put(np.arange(4.0))
    handle, plugin = a.buffer.handle, a.buffer.client.plugin
    ns = [np.from_dlpack(a) for _ in range(3)]
    plugin.call("Buffer_IncreaseExternalReferenceCount", _new_ref_args(handle))
    plugin.call("Buffer_DecreaseExternalReferenceCount", _new_ref_args(handle))
    del ns
    gc.collect()
    with pytest.raises(PjrtError, match="zero reference count"):
        plugin.call("Buffer_DecreaseExternalReferenceCount", _new_ref_args(handle))
    assert a.buffer._pins == 0


def _new_ref_args(handle):
    from ember._runtime.pjrt.structs import _BufferExternalReferenceArgs
    return _new(_BufferExternalReferenceArgs, buffer=handle)


def test_consumers_freed_on_other_threads():
    a = device_put(np.arange(4.0))
    consumers = [np.from_dlpack(a) for _ in range(8)]
    torch = pytest.importorskip("torch")
    consumers += [torch.from_dlpack(a) for _ in range(8)]
    threads = [threading.Thread(target=consumers.pop) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    gc.collect()
    assert a.buffer._pins == 0 and not consumers


def test_cycles_are_collected():
    """A numpy consumer of an export and an imported view, reachable only from a reference cycle, stay alive until
    the cycle is collected; then the exported buffer is unpinned and the producer's memory released."""
    a = device_put(np.arange(3.0))
    fit = aligned(np.arange(3.0))
    producer = weakref.ref(fit)
    was_enabled = gc.isenabled()
    gc.disable()  # no automatic collection between dropping the last outside reference and the check below
    try:
        holder = {"consumer": np.from_dlpack(a), "view": from_dlpack(fit)}
        holder["self"] = holder
        del holder, fit
        assert a.buffer._pins == 1 and len(D._imports) == 1 and producer() is not None  # the cycle holds them
    finally:
        if was_enabled:
            gc.enable()
    gc.collect()
    assert a.buffer._pins == 0 and not D._live_exports and not D._imports
    assert producer() is None


def test_from_dlpack_of_a_foreign_wrapper_of_an_ember_array():
    class Wrapper:  # not an Array: the general path, through a capsule
        def __init__(self, array):
            self.array = array

        def __dlpack__(self, **kwargs):
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    a = device_put(np.arange(6, dtype=np.uint8))
    e = from_dlpack(Wrapper(a))
    assert address(e) == address(a)  # a view of the same PJRT memory
    a.delete()
    same(e, np.arange(6, dtype=np.uint8))
    del e


# ---------------------------------------------------------------------------------------------------------------
# torch
@pytest.mark.parametrize("shape", SHAPES, ids=ids)
def test_torch_roundtrips_all_dtypes(shape):
    torch = pytest.importorskip("torch")
    for dtype in DTYPES:
        values = sample(shape, dtype)
        a = device_put(values)
        t = torch.from_dlpack(a)
        assert tuple(t.shape) == shape
        if t.numel():
            assert t.data_ptr() == address(a)
        back = t.view(torch.int16).numpy().view(BF16) if dtype == BF16 else t.numpy()
        same(back, values)
        source = torch.from_numpy(values.view(np.int16)).view(torch.bfloat16) if dtype == BF16 else \
            torch.from_numpy(values)
        source = source.clone()  # torch's allocator: 64-byte aligned
        e = from_dlpack(source)
        same(e, values)
        if source.numel():
            assert address(e) == source.data_ptr()


def test_torch_non_contiguous_and_lifetimes():
    torch = pytest.importorskip("torch")
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    for view in (base.T, base[:, ::2], base[1:]):
        same(from_dlpack(view), view.numpy())
    with pytest.raises(BufferError):
        from_dlpack(base.T, copy=False)
    a = device_put(np.arange(4, dtype=np.float32))
    t = torch.from_dlpack(a)
    a.delete()
    assert t.sum().item() == 6.0
    del t
    e = from_dlpack(base)
    del base
    gc.collect()
    same(e * 2, np.arange(12, dtype=np.float32).reshape(3, 4) * 2)
    via_capsule = from_dlpack(torch.utils.dlpack.to_dlpack(torch.ones(3)))
    same(via_capsule, np.ones(3, np.float32))


# ---------------------------------------------------------------------------------------------------------------
# JAX
def test_jax_interop():
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    for dtype in (np.float32, np.int32, np.float64, np.uint8, np.bool_, BF16):
        values = sample((2, 3), np.dtype(dtype))
        a = device_put(values)
        shared = jax.dlpack.from_dlpack(a)
        same(np.asarray(shared), values)
        assert shared.unsafe_buffer_pointer() == address(a)  # JAX wraps ember's memory too
        same(np.asarray(jnp.from_dlpack(a)), values)
        j = jnp.asarray(values)
        e = from_dlpack(j)
        same(e, values)
        assert address(e) == j.unsafe_buffer_pointer()  # JAX's CPU buffers are 64-byte aligned: a view
    j = jnp.arange(8.0)
    e = from_dlpack(j)
    del j
    gc.collect()
    same(e + 1, np.arange(8.0) + 1)


# ---------------------------------------------------------------------------------------------------------------
# Process-level: nothing crashes at exit, or when a view in use by a running computation is deleted.
LIFETIME_SCRIPT = textwrap.dedent("""
    import atexit, gc, sys
    import numpy as np
    late = {}

    def read_after_ember_closed_its_clients():  # registered first: runs after ember's handler
        print("late", late["n"].sum(), late["m"].sum(), flush=True)  # (numpy's reads: ember's client is closed)
    atexit.register(read_after_ember_closed_its_clients)

    import ember.numpy as enp
    from ember._runtime.dlpack import from_dlpack
    import ember
    try:
        import torch
    except ImportError:
        torch = None

    def aligned(values):
        raw = np.empty(values.nbytes + 64, np.uint8)
        start = (-raw.__array_interface__["data"][0]) % 64
        out = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape)
        out[...] = values
        return out

    a = enp.arange(1000.0)
    late["n"] = np.from_dlpack(a)             # a consumer that outlives ember's clients
    deleted = enp.arange(10.0) + 1
    kept = np.from_dlpack(deleted)
    deleted.delete()                           # deleted while exported
    unconsumed = (enp.ones(3)).__dlpack__(max_version=(1, 0))
    late["view"] = from_dlpack(aligned(np.arange(5.0)))  # an ember view of numpy's memory, alive at exit
    late["m"] = np.from_dlpack(late["view"])  # numpy -> ember -> numpy: the same memory
    chain = np.from_dlpack(from_dlpack(aligned(np.ones((4, 4), np.float32))))
    if torch is not None:
        t = torch.from_dlpack(enp.arange(6.0) * 2)
        tv = from_dlpack(torch.arange(6.0))
    f = ember.jit(lambda x: (x @ x.T).sum())
    for i in range(30):  # views deleted while a computation reads them: PJRT calls on_delete on its own thread
        x = from_dlpack(aligned(np.full((128, 128), i, np.float32)))
        y = f(x)
        x.delete()
        del x
        assert float(y) == 128 * 128 * 128 * i * i, (i, float(y))
    print("body", kept.sum(), chain.sum(), flush=True)
""")


def test_exit_with_live_exports_and_views():
    """With the C extension and with the pure-Python runtime (two processes at once): exports and views alive at
    exit, a consumer read after ember closed its PJRT clients, views deleted under running computations."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runs = []
    for disable in ("", "1"):
        env = dict(os.environ, EMBER_DISABLE_C_EXTENSION=disable)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        runs.append(subprocess.Popen([sys.executable, "-c", LIFETIME_SCRIPT], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True))
    for run in runs:
        stdout, stderr = run.communicate(timeout=120)
        assert run.returncode == 0, stderr[-3000:]
        assert "body 55.0 16.0" in stdout and "late 499500.0 10.0" in stdout, (stdout, stderr)
        assert "Exception ignored" not in stderr and "Traceback" not in stderr, stderr
