"""The host-callback handler: one typed XLA FFI handler, written with ctypes, that calls back into Python.

ember/_control/callbacks.py lowers pure_callback, io_callback and debug_callback to `stablehlo.custom_call
@ember_callback` with an int64 attribute `callback`: the key of the callback in that module's registry (a weak
registry: an entry lives as long as the IR equation, and so the compiled program, that holds it). This module
provides the target (ember._hlo.ffi's provider protocol, as the LAPACK kernels do) and registers the handler with
the plugin through its FFI extension (ember/_runtime/ffi.py) on first use.

The handler is a ctypes CFUNCTYPE: XLA calls it on the thread that runs the program (the caller's own thread for a
small program, else one of the plugin's threads); ctypes takes the GIL for the call. The PJRT execute call runs
without the GIL (both dispatch paths release it), so the callback can run while the caller waits. It

  * answers the metadata call made at registration (which FFI API version it speaks, no traits);
  * checks the call's buffers before touching any: the callback its attribute names must be one this process
    registered (keys are random tokens: ember._control.callbacks), its operand buffers must have the types of a
    call of it this process lowered, and its result buffers the callback's declared result types (a call that
    disagrees, as a module text spliced in from elsewhere may, is an error, never a read or write past a buffer);
  * copies each argument buffer into a numpy array (the buffers are XLA's, valid only during the call; the effect
    value that orders callbacks, attributes effect_in/effect_out, an int8 scalar, is skipped and written as 0),
    calls the Python function, and checks and copies its results into the result buffers; callback 0 is no Python
    function but the ordering copy that ember._hlo.lower.order_call emits around loops and branches that call
    back (each result buffer must have its operand's type);
  * turns any exception into an XLA_FFI_Error made through the call frame's api, whose message carries a key of
    the per-call error registry (`[ember callback error N]`); the runtime, where it raises the execute's PJRT
    error (ember._runtime.compiler), takes the exception back with `take_error` and raises the PJRT error from it,
    so the callback's traceback is shown as the cause. Nothing is allowed to escape into ctypes (which would print
    it and return NULL: success)."""
from __future__ import annotations

import ctypes
import itertools
import re
import threading
import time
import traceback
from typing import Any

import numpy as np

from ember._control import callbacks as _callbacks
from ember._core import dtypes as dt
from ember._hlo import ffi as _hlo_ffi
from ember._runtime import ffi

TARGET = _callbacks.TARGET


# The XLA FFI ABI as ctypes declares it (ember/_runtime/ffi.py)
_ErrorCreateArgs, _ERROR_CREATE, _Buffer, _Scalar = ffi.ErrorCreateArgs, ffi.ERROR_CREATE, ffi.Buffer, ffi.Scalar
_MetadataExtension, _HANDLER_TYPE = ffi.MetadataExtension, ffi.HANDLER_TYPE
_EXTENSION_METADATA, _ATTR_SCALAR, _ARG_BUFFER = ffi.EXTENSION_METADATA, ffi.ATTR_SCALAR, ffi.ARG_BUFFER
_FFI_S64, _FFI_TOKEN, _ERR_UNKNOWN, _DTYPES = ffi.FFI_S64, ffi.FFI_TOKEN, ffi.ERR_UNKNOWN, ffi.DTYPES

# The per-call error registry: key -> the exception a callback raised, until the runtime takes it back (bounded:
# the oldest entries go first, should a program's error never reach take_error).
_errors: dict[int, BaseException] = {}
_error_keys = itertools.count(1)
_errors_lock = threading.Lock()
_MAX_ERRORS = 64
_ERROR_TAG = re.compile(r"\[ember callback error (\d+)\]")


def _fail(frame: Any, message: str) -> int:
    args = _ErrorCreateArgs(ctypes.sizeof(_ErrorCreateArgs), None, message.encode("utf-8", "replace"), _ERR_UNKNOWN)
    return _ERROR_CREATE(frame.api.contents.error_create)(ctypes.byref(args)) or 0


def _answer_metadata(frame: Any) -> bool:
    """The registration call: say which FFI API version the handler speaks (the plugin's own), with no traits."""
    if not frame.extension_start:
        return False
    ext = frame.extension_start.contents
    if ext.type != _EXTENSION_METADATA:
        return False
    metadata = ctypes.cast(frame.extension_start, ctypes.POINTER(_MetadataExtension)).contents.metadata.contents
    version = frame.api.contents.api_version
    metadata.api_version.major_version = version.major_version
    metadata.api_version.minor_version = version.minor_version
    metadata.traits = 0
    return True


def _int_attrs(frame: Any) -> dict[bytes, int]:
    attrs, found = frame.attrs, {}
    for i in range(attrs.size):
        span = attrs.names[i].contents
        if attrs.types[i] == _ATTR_SCALAR:
            scalar = ctypes.cast(attrs.attrs[i], ctypes.POINTER(_Scalar)).contents
            if scalar.dtype == _FFI_S64:
                found[ctypes.string_at(span.ptr, span.len)] = ctypes.c_int64.from_address(scalar.value).value
    return found


def _buffers(args: Any) -> list[Any]:
    """The non-token buffers of a call frame's args (or rets)."""
    out = []
    for i in range(args.size):
        if args.types[i] != _ARG_BUFFER:
            raise RuntimeError(f"{TARGET}: argument {i} is not a buffer")
        buffer = ctypes.cast(args.args[i], ctypes.POINTER(_Buffer)).contents
        if buffer.dtype != _FFI_TOKEN:
            out.append(buffer)
    return out


def _shape(buffer: Any) -> tuple[int, ...]:
    return tuple(buffer.dims[i] for i in range(buffer.rank))


def _dtype(buffer: Any) -> np.dtype:
    dtype = _DTYPES.get(buffer.dtype)
    if dtype is None:
        raise TypeError(f"{TARGET}: an argument of XLA data type {buffer.dtype} has no numpy dtype")
    return dtype


def _nbytes(buffer: Any) -> int:
    count = int(np.prod(_shape(buffer), dtype=np.int64))
    dtype = _dtype(buffer)
    return (count * dt.bit_width(dtype) + 7) // 8 if dt.is_sub_byte(dtype) else count * dtype.itemsize


def _to_numpy(buffer: Any) -> np.ndarray:
    size = _nbytes(buffer)
    raw = (ctypes.c_char * size).from_address(buffer.data) if size else b""
    dtype, shape = _dtype(buffer), _shape(buffer)
    if dt.is_sub_byte(dtype):
        return _unpacked(np.frombuffer(raw, dtype=np.uint8), dtype, shape)
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _write(buffer: Any, value: np.ndarray) -> None:
    value = np.ascontiguousarray(value)
    raw = _packed(value) if dt.is_sub_byte(value.dtype) else value.tobytes()
    if len(raw) != _nbytes(buffer):  # (call_flat checked the value's type, and _checked the buffer's)
        raise RuntimeError(f"{TARGET}: a result of {len(raw)} bytes for a buffer of {_nbytes(buffer)}")
    if raw:
        ctypes.memmove(buffer.data, raw, len(raw))


# The 4- and 2-bit types in a program's buffers are packed, XLA's way: element i in bits (i % k) * w .. of byte
# i // k (w bits each, k = 8 / w to a byte, the last byte's unused bits undefined); numpy (ml_dtypes) holds one per
# byte. A 4-bit float is its 4-bit code; the integers are two's complement.
def _unpacked(raw: np.ndarray, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    width = dt.bit_width(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    codes = (raw[:, None] >> np.arange(0, 8, width, dtype=np.uint8)).reshape(-1)[:count] & ((1 << width) - 1)
    if dtype == dt.float4_e2m1fn:
        return codes.astype(np.uint8).view(dtype).reshape(shape)
    if dtype in (dt.int4, dt.int2):  # (sign-extended)
        codes = codes.astype(np.int8) - ((codes >> (width - 1)) << width).astype(np.int8)
    return codes.astype(dtype).reshape(shape)


def _packed(value: np.ndarray) -> bytes:
    width = dt.bit_width(value.dtype)
    per_byte = 8 // width
    if value.dtype == dt.float4_e2m1fn:
        codes = value.reshape(-1).view(np.uint8)
    else:
        codes = value.reshape(-1).astype(np.int8).view(np.uint8)
    codes = codes & np.uint8((1 << width) - 1)
    padded = np.zeros(-(-codes.size // per_byte) * per_byte, np.uint8)
    padded[:codes.size] = codes
    lanes = padded.reshape(-1, per_byte) << np.arange(0, 8, width, dtype=np.uint8)
    return np.bitwise_or.reduce(lanes, axis=1).astype(np.uint8).tobytes()


class _ThreadState(threading.local):
    """Per thread: how many programs with callbacks this thread is executing (their callbacks run on this thread
    when XLA runs the program inline), and whether this thread is one of XLA's, running a callback."""

    def __init__(self) -> None:
        self.executing = 0
        self.in_worker_callback = False


state = _ThreadState()


_inflight = 0  # programs with callbacks executing now, in every thread (effects_barrier waits for them)
_inflight_changed = threading.Condition()


def running(fn: Any) -> Any:
    """fn() (an execute of a program with callbacks, awaited), marked on this thread: a callback XLA runs inline,
    on this thread, may run ember computations (they execute before the program goes on)."""
    global _inflight
    with _inflight_changed:
        _inflight += 1
    state.executing += 1
    try:
        return fn()
    finally:
        state.executing -= 1
        with _inflight_changed:
            _inflight -= 1
            _inflight_changed.notify_all()


def effects_barrier() -> None:
    """Wait until every program with host callbacks that has started, in any thread, has finished, so that their
    side effects (prints, io_callbacks) have happened (as jax.effects_barrier). A program's own call already waits
    for it: this matters for programs running in other threads. From inside a callback it waits for the others."""
    own = state.executing + (1 if state.in_worker_callback else 0)  # (the programs waiting for this callback)
    with _inflight_changed:
        _inflight_changed.wait_for(lambda: _inflight <= own)


# At exit, the programs with host callbacks still executing get this long, in all, to end (the exit handlers of
# ember._runtime.compiler and ember._runtime.backends wait for them). A callback blocked for good (a daemon thread
# waiting on a queue nobody fills) would otherwise hold the exit forever: past the deadline the exit goes on with a
# warning, and the PJRT clients those programs run on are left to the OS instead of being destroyed under them.
EXIT_WAIT_S = 5.0
_exit_deadline: list[float] = []  # (set by the first exit handler that waits: the deadline is shared)


def blocked_at_exit() -> int:
    """At exit: wait until no program with host callbacks executes, at most until EXIT_WAIT_S seconds after the
    first call; how many still do (0: the exit may wait for the PJRT calls still running, which end)."""
    if not _exit_deadline:
        _exit_deadline.append(time.monotonic() + EXIT_WAIT_S)
    with _inflight_changed:
        _inflight_changed.wait_for(lambda: _inflight == 0, max(0.0, _exit_deadline[0] - time.monotonic()))
        return _inflight


def check_reentry(name: str) -> None:
    """Refuse to execute a program from a callback that XLA runs on one of its own threads: the device's queue
    holds the calling program until the callback returns, so waiting there for another program would deadlock."""
    if state.in_worker_callback:
        raise RuntimeError(
            f"{name}: a host callback cannot run ember computations here: XLA runs this callback on one of its "
            "threads while the calling program holds the device, so the computation would wait forever. Compute "
            "with numpy inside callbacks (docs/callbacks.md)")


def _types(buffers: list[Any]) -> tuple[tuple[tuple[int, ...], np.dtype], ...]:
    return tuple((_shape(b), _dtype(b)) for b in buffers)


def _text(types: tuple[tuple[tuple[int, ...], np.dtype], ...]) -> str:
    return "(" + ", ".join(f"{dt.short_name(d) if d in dt.SUPPORTED_DTYPES else d.name}{list(s)}"
                           for s, d in types) + ")"


def _copy(args: list[Any], rets: list[Any]) -> None:
    """Callback 0: rets[i] = args[i] (the ordering copy of ember._hlo.lower.order_call), each of its operand's type
    (operands after the results' count are only waited for)."""
    if len(rets) > len(args) or _types(args[:len(rets)]) != _types(rets):
        raise RuntimeError(f"{TARGET}: the ordering copy's operands {_text(_types(args))} and results "
                           f"{_text(_types(rets))} differ")
    for arg, ret in zip(args, rets):
        size = _nbytes(ret)
        if size:
            ctypes.memmove(ret.data, arg.data, size)


_EFFECT = ((), np.dtype(np.int8))  # the type of the effect value (ember._hlo.lower.EFFECT)


def _effect(buffers: list[Any], which: str) -> list[Any]:
    """The buffers after the effect value that comes first among them (checked: an int8 scalar)."""
    if not buffers or _types(buffers[:1])[0] != _EFFECT:
        raise RuntimeError(f"{TARGET}: the call's {which} start with no effect value (an int8 scalar)")
    return buffers[1:]


def _checked(entry: Any, args: list[Any], rets: list[Any]) -> None:
    """The call's operand and result buffers have the types this process lowered the callback's calls with."""
    got = _types(args)
    if got not in entry.operand_types:
        raise RuntimeError(f"{TARGET}: the callback {entry!r} was called with operands {_text(got)}, but this "
                           "process lowered no call of it with those types")
    want = tuple((tuple(a.shape), np.dtype(a.dtype)) for a in entry.result_avals)
    if _types(rets) != want:
        raise RuntimeError(f"{TARGET}: the callback {entry!r} declares results {_text(want)}, but the call has "
                           f"result buffers {_text(_types(rets))}")


def _call(frame: Any) -> None:
    attrs = _int_attrs(frame)
    key = attrs.get(b"callback")
    if key is None:
        raise RuntimeError(f"{TARGET}: the custom call has no int64 attribute 'callback'")
    args, rets = _buffers(frame.args), _buffers(frame.rets)
    if key == 0:
        return _copy(args, rets)
    entry = _callbacks.lookup(key)  # (before anything is written: an unknown key writes nothing)
    if attrs.get(b"effect_in"):
        args = _effect(args, "operands")
    effect = None
    if attrs.get(b"effect_out"):
        effect, rets = rets[0], _effect(rets, "results")
    _checked(entry, args, rets)
    if effect is not None:
        ctypes.c_int8.from_address(effect.data).value = 0
    values = [_to_numpy(b) for b in args]
    worker = state.executing == 0
    if worker:
        state.in_worker_callback = True
    try:
        results = entry.call_flat(values)
    finally:
        if worker:
            state.in_worker_callback = False
    if len(results) != len(rets):  # (call_flat checked the results against the expected avals)
        raise RuntimeError(f"{TARGET}: {len(results)} results for {len(rets)} result buffers")
    for buffer, value in zip(rets, results):
        _write(buffer, value)


def _remember(err: BaseException) -> int:
    with _errors_lock:
        key = next(_error_keys)
        _errors[key] = err
        while len(_errors) > _MAX_ERRORS:
            del _errors[next(iter(_errors))]
    return key


def _handler(frame_pointer: Any) -> int:
    try:
        frame = frame_pointer.contents
        if _answer_metadata(frame):
            return 0
        _call(frame)
        return 0
    except BaseException as err:  # noqa: BLE001 - every exception goes back to XLA as an FFI error
        try:
            key = _remember(err)
            summary = "".join(traceback.format_exception_only(type(err), err)).strip()
            return _fail(frame_pointer.contents, f"[ember callback error {key}] {summary}")
        except BaseException:  # noqa: BLE001 - never let an exception escape into ctypes (it would mean success)
            return _fail(frame_pointer.contents, "ember callback: the callback failed, and reporting it failed")


_HANDLER = _HANDLER_TYPE(_handler)  # (kept alive with this module: XLA holds its address)


def take_error(message: str) -> BaseException | None:
    """The exception a callback raised, for the message of the PJRT error that reported it (None when the message
    names none, or it was taken already)."""
    found = _ERROR_TAG.search(message)
    if found is None:
        return None
    with _errors_lock:
        return _errors.pop(int(found.group(1)), None)


_provided: frozenset[str] | None = None


def provide() -> frozenset[str]:
    """The callback target, registered with the attached plugins on first use."""
    global _provided
    if _provided is None:
        ffi.add_handlers({TARGET: ctypes.cast(_HANDLER, ctypes.c_void_p).value})
        _provided = frozenset([TARGET])
    return _provided


_hlo_ffi.set_provider(TARGET, provide)

__all__ = ["EXIT_WAIT_S", "TARGET", "blocked_at_exit", "check_reentry", "effects_barrier", "provide", "running",
           "state", "take_error"]
