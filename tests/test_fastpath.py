"""The per-call hot path, in both implementations: the C extension (ember._runtime._fastpath) and its pure-Python
twin. The `impl` fixture runs each behaviour against both sets of objects directly (the C side is skipped when
the extension is not built or is disabled); the Compiled-level tests use whichever one the process selected, and
one subprocess runs with EMBER_DISABLE_C_EXTENSION=1."""
import ctypes
import gc
import importlib.util
import os
import subprocess
import sys
import textwrap
import threading
import time
import types
import weakref

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.numpy as enp
from ember._runtime import fastpath
from ember._runtime import pjrt as _pjrt
from ember._runtime.array import Array
from ember._runtime.compiler import _PyCaller
from ember._runtime.pjrt import buffer as buffer_module
from ember._runtime.pjrt import structs
from ember._runtime.pjrt.buffer import Buffer
from ember._runtime.pjrt.executable import _PyRunner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(params=["python", "c"])
def impl(request):
    if request.param == "c":
        if not fastpath.USING_C:
            pytest.skip("the C extension is not in use (not built, or EMBER_DISABLE_C_EXTENSION is set)")
        C = fastpath.C
        return types.SimpleNamespace(name="c", Runner=C.Runner, Caller=C.Caller, pin=C.pin, unpin=C.unpin,
                                     take_handle=C.take_handle, pin_all=C.pin_all, unpin_all=C.unpin_all)
    return types.SimpleNamespace(name="python", Runner=_PyRunner, Caller=_PyCaller, pin=buffer_module._py_pin,
                                 unpin=buffer_module._py_unpin, take_handle=buffer_module._py_take_handle,
                                 pin_all=buffer_module._py_pin_all, unpin_all=buffer_module._py_unpin_all)


def compile_for(fn, *args):
    return ember.jit(fn).lower(*args).compile()


def caller_of(impl, compiled, in_avals=None):
    """A Caller of this implementation (with a Runner of the same one) for a Compiled, its constants placed."""
    exe = compiled.executable
    runner = impl.Runner(exe.client, exe.handle, exe.num_outputs)
    caller = impl.Caller(runner, exe, exe._device, in_avals or compiled.in_avals, compiled.out_avals, True)
    caller.consts = tuple(compiled._consts_on(exe._device))
    return caller


def f32(*values):
    return np.asarray(values, np.float32)


def pins(x):
    return x._buffer._pins


# ---------------------------------------------------------------------------------------------------------------
# Results
def test_results_of_several_dtypes_and_outputs(impl):
    def f(a, b, c, d, s):
        return a + 1, b * 2, ~c, d * d, a.sum() + s, enp.zeros((0, 3))

    args = [f32(1, 2, 3), np.arange(4, dtype=np.int32).reshape(2, 2), np.array([True, False]),
            np.asarray([1.5, -2], ml_dtypes.bfloat16), np.float32(0.5)]
    compiled = compile_for(f, *args)
    caller = caller_of(impl, compiled)
    arrays = [ember.device_put(a) for a in args]
    for _ in range(3):
        outs = caller(arrays)
        assert isinstance(outs, list) and all(type(o) is Array for o in outs)
        expected = [f32(2, 3, 4), np.arange(4, dtype=np.int32).reshape(2, 2) * 2, np.array([False, True]),
                    np.asarray([2.25, 4], ml_dtypes.bfloat16), np.float32(6.5), np.zeros((0, 3), np.float32)]
        for out, want, aval in zip(outs, expected, compiled.out_avals):
            assert out.aval is aval and out._host is None and out._buffer.device is arrays[0].device
            assert out._buffer.shape == aval.shape and out._buffer.dtype == aval.dtype
            assert out._buffer._pins == 0 and out._buffer._doomed is None
            np.testing.assert_array_equal(np.asarray(out), want)
            assert np.asarray(out).dtype == want.dtype
    assert caller(tuple(arrays)) is not None  # a tuple or a list


def test_results_are_committed_when_an_argument_is(impl):
    """JAX's rule on the fast path: the results of a call are committed to the device when an argument was."""
    compiled = compile_for(lambda a, b: (a + b, a * b), f32(1, 2), f32(3, 4))
    caller = caller_of(impl, compiled)
    device = compiled.executable._device
    loose, placed = enp.asarray(f32(1, 2)), ember.device_put(f32(3, 4), device)
    assert not loose.committed and placed.committed
    for args, committed in [((loose, loose), False), ((loose, placed), True), ((placed, placed), True)]:
        outs = caller(args)
        assert [out.committed for out in outs] == [committed, committed] and type(outs[0]._committed) is bool


def test_many_arguments_and_outputs(impl):
    # more than the C side keeps on its stack (16)
    n = 20
    compiled = compile_for(lambda *xs: tuple(x * i for i, x in enumerate(xs)), *[f32(1, 2)] * n)
    caller = caller_of(impl, compiled)
    arrays = [ember.device_put(f32(i, -i)) for i in range(n)]
    outs = caller(arrays)
    for i, out in enumerate(outs):
        np.testing.assert_array_equal(np.asarray(out), f32(i * i, -i * i))
    assert all(pins(a) == 0 for a in arrays)


def test_constants_come_first(impl):
    k = enp.arange(3.0)
    compiled = compile_for(lambda x: x * 10 + k + np.float32(100), f32(1, 2, 3))
    assert compiled.ir.consts
    caller = caller_of(impl, compiled)
    x = ember.device_put(f32(1, 2, 3))
    np.testing.assert_array_equal(np.asarray(caller([x])[0]), f32(110, 121, 132))
    caller.consts = None  # not placed yet: the general path places them
    assert caller([x]) is None


def test_a_program_without_arguments(impl):
    compiled = compile_for(lambda: enp.arange(3))
    caller = caller_of(impl, compiled)
    np.testing.assert_array_equal(np.asarray(caller(())[0]), [0, 1, 2])
    exe = compiled.executable
    other = impl.Caller(caller.runner, exe, exe._device, [], compiled.out_avals, False)
    other.consts = ()
    assert other(()) is None  # runs on another device than the compiled one: the general path's


def test_threads_share_a_caller(impl):
    compiled = compile_for(lambda a, b: a * b + 1, f32(0, 0), f32(0, 0))
    caller = caller_of(impl, compiled)
    errors = []

    def work(k):
        try:
            a, b = ember.device_put(f32(k, 1)), ember.device_put(f32(2, k))
            for _ in range(300):
                np.testing.assert_array_equal(np.asarray(caller((a, b))[0]), f32(2 * k + 1, k + 1))
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


# ---------------------------------------------------------------------------------------------------------------
# What is not the common case: None, and the general path handles it
def test_uncommon_calls_return_none(impl):
    compiled = compile_for(lambda a, b: a + b, f32(1, 2), f32(1, 2))
    caller = caller_of(impl, compiled)
    x = ember.device_put(f32(1, 2))
    other_client = _pjrt.Client(_pjrt.Plugin(_pjrt.default_plugin_path()), {"cpu_device_count": 2})
    for device in other_client.devices:
        elsewhere = Array._from_buffer(other_client.buffer_from_numpy(f32(1, 2), device), x.aval)
        assert caller((x, elsewhere)) is None
    assert caller((x, f32(1, 2))) is None  # numpy
    assert caller((x, 1.0)) is None  # a Python scalar
    assert caller((x, ember.device_put(f32(1, 2, 3)))) is None  # shape
    assert caller((x, ember.device_put(np.int32([1, 2])))) is None  # dtype
    assert caller((x,)) is None and caller((x, x, x)) is None  # count
    assert caller((x, types.SimpleNamespace(_buffer=x._buffer, aval=x.aval))) is None  # not an Array
    with ember.config.override(debug_nans=True):
        assert caller((x, x)) is None
    assert caller((x, x)) is not None
    assert pins(x) == 0


def test_the_weak_type_is_not_compared(impl):
    compiled = compile_for(lambda a: a * 2, np.float32(3))
    caller = caller_of(impl, compiled)
    weak = enp.asarray(3.0)
    assert weak.aval.weak_type and not compiled.in_avals[0].weak_type
    assert float(caller([weak])[0]) == 6.0
    assert float(caller([ember.device_put(np.float32(4))])[0]) == 8.0  # (an equal aval, another object)


def test_compiled_errors_are_those_of_the_general_path():
    compiled = compile_for(lambda a, b: a + b, f32(1, 2), f32(1, 2))
    x = ember.device_put(f32(1, 2))
    np.testing.assert_array_equal(np.asarray(compiled(x, f32(3, 4))), f32(4, 6))
    np.testing.assert_array_equal(np.asarray(compiled.call_flat([x, x])[0]), f32(2, 4))
    with pytest.raises(TypeError, match=r"argument 1: expected f32\[2\], got f32\[3\]"):
        compiled(x, ember.device_put(f32(1, 2, 3)))
    with pytest.raises(TypeError, match=r"expected 2 arguments \(f32\[2\], f32\[2\]\), got 1"):
        compiled(x)
    with pytest.raises(ember.UnexpectedTracerError, match="got a tracer"):
        ember.jit(lambda t: compiled(t, t))(x)
    with ember.config.override(debug_nans=True):
        with pytest.raises(FloatingPointError, match="invalid value"):
            compiled(ember.device_put(f32(np.inf, 1)), ember.device_put(f32(-np.inf, 1)))
    assert pins(x) == 0


# ---------------------------------------------------------------------------------------------------------------
# Deleted arguments, and deletion racing with execution
def test_a_deleted_argument(impl):
    compiled = compile_for(lambda a, b: a + b, f32(1, 2), f32(1, 2))
    caller = caller_of(impl, compiled)
    x, y = ember.device_put(f32(1, 2)), ember.device_put(f32(3, 4))
    y.delete()
    assert caller((x, y)) is None  # nothing ran; the general path raises
    assert pins(x) == 0 and pins(y) == 0
    runner = caller.runner
    assert runner.run([x._buffer, y._buffer], [((2,), np.dtype(np.float32))], x.device, None) is None
    assert pins(x) == 0
    with pytest.raises(RuntimeError, match=r"argument 1 \(Array\(<deleted>.*\) has been deleted"):
        compiled(x, y)
    with pytest.raises(_pjrt.PjrtError, match="argument 1 is a buffer that has been deleted"):
        compiled.executable.execute([x._buffer, y._buffer], [((2,), np.float32)])
    with pytest.raises(RuntimeError, match=r"f32\[2\] has been deleted"):
        y.block_until_ready()


def test_a_deleted_constant():
    k = enp.arange(2.0)
    compiled = compile_for(lambda x: x + k, f32(1, 2))
    x = ember.device_put(f32(1, 2))
    np.testing.assert_array_equal(np.asarray(compiled(x)), f32(1, 3))
    k.delete()
    with pytest.raises(RuntimeError, match="an array it closed over has been deleted"):
        compiled(x)


def test_delete_from_another_thread_during_execute(impl):
    n = 500
    compiled = compile_for(lambda a: (a @ a @ a @ a @ a @ a).sum(), np.ones((n, n), np.float32))
    caller = caller_of(impl, compiled)
    seen_pinned = 0
    for trial in range(6):
        a = ember.device_put(np.full((n, n), 0.01, np.float32))
        buffer = a._buffer
        result = []
        thread = threading.Thread(target=lambda: result.append(caller((a,))))
        thread.start()
        deadline = time.monotonic() + 5
        while buffer._pins == 0 and thread.is_alive() and time.monotonic() < deadline:
            pass
        a.delete()
        if buffer._pins:  # deleted while the program uses it: destroyed when the call ends
            seen_pinned += 1
            assert buffer.handle is None and buffer._doomed is not None
        thread.join()
        assert buffer.handle is None and buffer._doomed is None and buffer._pins == 0
        out = result[0]
        if out is not None:  # (else it was deleted before the call pinned it)
            np.testing.assert_allclose(float(out[0]), n ** 7 * 0.01 ** 6, rtol=1e-3)
    assert seen_pinned  # the race happened at least once


def test_pin_unpin_delete_transitions(impl, request):
    client = ember.device_put(f32(1)).device.client
    b = client.buffer_from_numpy(f32(1, 2))
    handle = b.handle
    assert impl.pin(b) == handle and b._pins == 1
    assert impl.pin(b) == handle and b._pins == 2
    assert impl.take_handle(b) is None  # pinned: destruction deferred
    assert b.handle is None and b._doomed == handle and b.is_deleted
    assert impl.pin(b) is None and b._pins == 2  # a deleted buffer is not pinned again
    impl.unpin(b)
    assert b._pins == 1 and b._doomed == handle
    impl.unpin(b)  # the last pin: destroyed now
    assert b._pins == 0 and b._doomed is None
    assert impl.take_handle(b) is None  # idempotent

    c = client.buffer_from_numpy(f32(3))
    handle = c.handle
    assert impl.take_handle(c) == handle and c.handle is None and c._doomed is None
    c._destroy(handle)

    live, dead = client.buffer_from_numpy(f32(1)), client.buffer_from_numpy(f32(2))
    dead.delete()
    handles = (_pjrt.structs.c_void_p * 4)()
    assert impl.pin_all([live, dead], client, handles) == 1 and live._pins == 0
    assert impl.pin_all([live, "x"], client, handles) == 1 and live._pins == 0
    other = _pjrt.Client(_pjrt.Plugin(_pjrt.default_plugin_path()))
    assert impl.pin_all([live], other, handles) == 0 and live._pins == 0
    more = client.buffer_from_numpy(f32(5))
    assert impl.pin_all([live, more, live], client, handles) == -1
    assert list(handles[:3]) == [live.handle, more.handle, live.handle] and live._pins == 2 and more._pins == 1
    more.delete()
    assert more._doomed is not None
    impl.unpin_all([live, more, live])
    assert live._pins == 0 and more._pins == 0 and more._doomed is None
    np.testing.assert_array_equal(live.to_numpy(), f32(1))


# ---------------------------------------------------------------------------------------------------------------
# Errors from PJRT
def test_pjrt_errors_are_pjrt_errors(impl):
    compiled = compile_for(lambda a, b: a + b, f32(1, 2), f32(1, 2))
    exe = compiled.executable
    # a Caller told wrong input avals: Execute itself refuses the byte sizes
    caller = caller_of(impl, compiled, in_avals=[ember.ShapedArray((3,), np.float32)] * 2)
    x = ember.device_put(f32(1, 2, 3))
    for _ in range(3):
        with pytest.raises(_pjrt.PjrtError, match="PJRT_LoadedExecutable_Execute failed") as info:
            caller((x, x))
        assert info.value.call == "PJRT_LoadedExecutable_Execute" and info.value.code == "INVALID_ARGUMENT"
    assert pins(x) == 0
    runner = caller.runner
    with pytest.raises(_pjrt.PjrtError, match="expected 2"):
        runner.run([x._buffer], [((2,), np.dtype(np.float32))], x.device, None)
    assert pins(x) == 0
    counts = []
    for _ in range(3):
        for _ in range(50):
            with pytest.raises(_pjrt.PjrtError):
                caller((x, x))
        gc.collect()
        counts.append(sys.getrefcount(x._buffer))
    assert counts[0] == counts[1] == counts[2]
    assert exe.execute([ember.device_put(f32(1, 2))._buffer] * 2, [((2,), np.float32)])  # still usable


def test_a_closed_client(impl):
    client = _pjrt.Client(_pjrt.Plugin(_pjrt.default_plugin_path()))
    exe = client.compile("""
func.func public @main(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.negate %a : tensor<2xf32>
  return %0 : tensor<2xf32>
}""")
    runner = impl.Runner(client, exe.handle, 1)
    a = client.buffer_from_numpy(f32(1, 2))
    (out,) = runner.run([a], [((2,), np.dtype(np.float32))], a.device, None)
    np.testing.assert_array_equal(out.to_numpy(), f32(-1, -2))
    del out
    client.close()
    assert runner.run([a], [((2,), np.dtype(np.float32))], a.device, None) is None
    with pytest.raises(_pjrt.PjrtError, match="client has been closed"):
        exe.execute([a], [((2,), np.float32)])


# ---------------------------------------------------------------------------------------------------------------
# No leaks
def test_no_reference_leaks(impl):
    k = enp.arange(2.0)
    compiled = compile_for(lambda a, b: (a + b + k, a * 2), f32(1, 2), f32(1, 2))
    caller = caller_of(impl, compiled)
    x, y = ember.device_put(f32(1, 2)), enp.asarray(f32(3, 4))
    args = (x, y)
    caller(args)
    watched = [x, y, x._buffer, y._buffer, x.aval, y.aval, k._buffer, caller.consts, *compiled.in_avals,
               *compiled.out_avals, compiled.executable, caller]
    gc.collect()  # (first: garbage of earlier tests holding the shared f32[2] aval would drop its count meanwhile)
    before = [sys.getrefcount(o) for o in watched]
    buffers_before = sum(type(o) is Buffer for o in gc.get_objects())
    for _ in range(2000):
        outs = caller(args)
    del outs
    assert [sys.getrefcount(o) for o in watched] == before
    gc.collect()
    assert sum(type(o) is Buffer for o in gc.get_objects()) == buffers_before

    out = caller(args)[0]
    ref, buffer_ref = weakref.ref(out), weakref.ref(out._buffer)
    del out
    assert ref() is None and buffer_ref() is None  # freed at once: no reference cycles


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_memory_stays_flat_over_many_calls(impl):
    compiled = compile_for(lambda a, b: (a + b, a * b), f32(1, 2, 3, 4), f32(1, 2, 3, 4))
    caller = caller_of(impl, compiled)
    args = (ember.device_put(f32(1, 2, 3, 4)), ember.device_put(f32(5, 6, 7, 8)))
    for _ in range(20000):
        caller(args)
    gc.collect()
    start = rss_bytes()
    for _ in range(200000):
        caller(args)
    gc.collect()
    grown = rss_bytes() - start
    # 200k calls make 400k output buffers: leaking them (or their Python objects) would take tens of MB
    assert grown < 8 * 2 ** 20, f"RSS grew by {grown / 2 ** 20:.1f} MiB"


# ---------------------------------------------------------------------------------------------------------------
# block_until_ready, the finalizer, the selection
def test_block_until_ready():
    x = enp.arange(3.0) * 2
    assert x.block_until_ready() is x
    assert x._buffer.block_until_ready() is None
    assert buffer_module._py_block_until_ready(x._buffer) is True
    if fastpath.USING_C:
        assert fastpath.C.block_until_ready(x._buffer) is True
    assert x._buffer._pins == 0
    x.delete()
    if fastpath.USING_C:
        assert fastpath.C.block_until_ready(x._buffer) is False
    with pytest.raises(RuntimeError, match=r"Array f32\[3\] has been deleted"):
        x.block_until_ready()
    with pytest.raises(_pjrt.PjrtError, match="block_until_ready: the buffer has been deleted"):
        x._buffer.block_until_ready()


def test_the_selected_implementation_is_used():
    compiled = compile_for(lambda a: a + 1, f32(1))
    if fastpath.USING_C:
        C = fastpath.C
        assert type(compiled._fast) is C.Caller and type(compiled.executable._runner) is C.Runner
        assert buffer_module.pin is C.pin and type(Buffer.__del__).__name__ == "method_descriptor"
        assert type(ember.device_put(f32(1)).device.client._fast) is C.Api
    else:
        assert type(compiled._fast) is _PyCaller and type(compiled.executable._runner) is _PyRunner
        assert buffer_module.pin is buffer_module._py_pin


def test_the_c_extension_is_used_when_built():
    built = importlib.util.find_spec("ember._runtime._fastpath") is not None
    if not built:
        pytest.skip("the C extension is not built")
    assert fastpath.USING_C is (not fastpath.DISABLED)  # (a stale build, of another ABI, is refused)


def test_disabled_by_the_environment():
    code = textwrap.dedent("""
        import numpy as np, ember, ember.numpy as enp
        from ember._runtime import fastpath
        from ember._runtime.pjrt.buffer import Buffer
        f = ember.jit(lambda a, b: (a * b).sum())
        x = enp.arange(4.0)
        assert float(f(x, x)) == 14.0 and float(f(x, np.ones(4, np.float32))) == 6.0
        assert x.block_until_ready() is x
        y = x + 1
        y.delete()
        try:
            f(x, y)
        except RuntimeError as err:
            assert "has been deleted" in str(err), err
        print("USING_C", fastpath.USING_C, type(Buffer.__del__).__name__)
    """)
    env = dict(os.environ, EMBER_DISABLE_C_EXTENSION="1", PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "USING_C False function" in done.stdout


@pytest.mark.slow  # (6.5 s; the pure-Python path by default: the [python] params here)
def test_the_runtime_suites_pass_in_pure_python_mode():
    """The binding's and jit's own tests, run again in a process that uses the pure-Python path (this run uses the
    C extension when it is built)."""
    if not fastpath.USING_C:
        pytest.skip("this run already uses the pure-Python path")
    env = dict(os.environ, EMBER_DISABLE_C_EXTENSION="1", PYTHONPATH=ROOT)
    files = [os.path.join(ROOT, "tests", name) for name in ("test_pjrt.py", "test_jit.py")]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:xdist",
                           *files], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_the_c_struct_layouts_are_those_of_structs_py():
    """pjrt/structs.py declares the PJRT structs (ctypes); the C extension's own declarations are checked against
    it when it is loaded: here, the offsets its compiler gives (offsetof) equal the ctypes ones, and a difference
    is reported."""
    if not fastpath.USING_C:
        pytest.skip("the C extension is not in use")
    layouts = fastpath.C.struct_layouts()
    assert set(layouts) == {"PJRT_Handle_Args", "PJRT_Buffer_ReadyEvent_Args", "PJRT_ExecuteOptions",
                            "PJRT_LoadedExecutable_Execute_Args", "PJRT_Client_BufferFromHostBuffer_Args",
                            "PJRT_Buffer_UnsafePointer_Args", "PJRT_Event_IsReady_Args", "PJRT_Event_OnReady_Args"}
    for name, (size, fields) in layouts.items():
        cls = structs._STRUCTS[name]
        assert size == ctypes.sizeof(cls), name
        assert [field for field, _ in fields][:2] == ["struct_size", "extension_start"], name
        assert all(offset == getattr(cls, field).offset for field, offset in fields), name
    structs.check_struct_layouts(layouts, "the C extension")
    size, fields = layouts["PJRT_LoadedExecutable_Execute_Args"]
    moved = {**layouts, "PJRT_LoadedExecutable_Execute_Args": (size, fields[:-1] + (("execute_device", 64),))}
    with pytest.raises(RuntimeError, match=r"the test declares PJRT structs unlike pjrt/structs.py"
                                           r"(.|\n)*PJRT_LoadedExecutable_Execute_Args"):
        structs.check_struct_layouts(moved, "the test")
    with pytest.raises(RuntimeError, match="PJRT_Nothing_Args is not declared"):
        structs.check_struct_layouts({**layouts, "PJRT_Nothing_Args": (24, ())}, "the test")
