"""Client: a PJRT client of a plugin, which lists its devices, compiles programs and copies numpy arrays to buffers.

It creates the Device, Executable and Buffer objects, and looks up once the PJRT functions that its buffers
call most. close() destroys the client at once; its buffers and executables then refuse to be used."""
from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
import time
from typing import Any, Iterator

import numpy as np

from ember._runtime.pjrt import backend_compile as _backend_compile
from ember._runtime.fastpath import C
from ember._runtime.pjrt.buffer import Buffer, pin_client, take_client_handle, unpin_client
from ember._runtime.pjrt.device import Device
from ember._runtime.pjrt.errors import PjrtError
from ember._runtime.pjrt.kv_store import KeyValueStore, register as register_kv_store
from ember._runtime.pjrt.executable import Executable
from ember._runtime.pjrt.plugin import Plugin
from ember._runtime.pjrt.spmd import SpmdExecutable
from ember._runtime.pjrt.structs import (_IMMUTABLE_ONLY_DURING_CALL, _PORTABLE_COMPILE_OPTIONS, COMPILE_OPTIONS,
                                 _ClientAddressableDevicesArgs, _ClientBufferFromHostBufferArgs, _ClientCompileArgs,
                                 _ClientCreateArgs, _ClientCreateViewOfDeviceBufferArgs, _ClientPlatformNameArgs,
                                 _ExecutableDeserializeAndLoadArgs,
                                 _data_address, _handle_args, _new,
                                 _Program, _string_at, c_int64, named_int64_values,
                                 numpy_dtype_to_pjrt, one_device_compile_options, spmd_compile_options)


def _fast_api(plugin: Plugin) -> Any:
    """The C extension's Api object: the addresses of the PJRT functions it calls, and Plugin.error."""
    def address(name: str) -> int | None:
        return ctypes.cast(plugin.function(name), ctypes.c_void_p).value if plugin.has_function(name) else None
    assert C is not None
    return C.Api(address("LoadedExecutable_Execute"), address("Buffer_Destroy"), address("Buffer_ReadyEvent"),
                 address("Event_Await"), address("Event_Destroy"), plugin.error,
                 from_host=address("Client_BufferFromHostBuffer"), unsafe_pointer=address("Buffer_UnsafePointer"),
                 is_ready=address("Event_IsReady"), on_ready=address("Event_OnReady"),
                 error_destroy=address("Error_Destroy"))


# XLA logs this warning at every compile partitioned by GSPMD (the partitioner of `mhlo.sharding` annotations, which
# this plugin runs fully; its Shardy path ignores those annotations): the user cannot act on it.
# (absl's notice before its first log line is dropped with it)
_GSPMD_DEPRECATION = (b"GSPMD sharding propagation is going to be deprecated",
                      b"All log messages before absl::InitializeLog() is called")


_stderr_lock = threading.Lock()


@contextlib.contextmanager
def _without_stderr_line(texts: tuple[bytes, ...]) -> Iterator[None]:
    """While the block runs, the process's stderr (file descriptor 2, where the plugin logs) goes through a pipe
    that a thread forwards to it line by line as it comes, leaving out the lines holding one of texts. (Forwarded at
    once, so that a fatal error's message still reaches stderr when XLA aborts the process.)"""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # (no stderr to redirect)
        yield
        return
    with _stderr_lock:
        read_end, write_end = os.pipe()

        def forward() -> None:
            pending = b""
            with os.fdopen(read_end, "rb", buffering=0) as pipe:
                while chunk := pipe.read(1 << 16):
                    *lines, pending = (pending + chunk).split(b"\n")
                    kept = [line + b"\n" for line in lines if not any(t in line for t in texts)]
                    if kept:
                        os.write(saved, b"".join(kept))
            if pending and not any(t in pending for t in texts):
                os.write(saved, pending)
        thread = threading.Thread(target=forward, name="ember-stderr", daemon=True)
        thread.start()
        os.dup2(write_end, 2)
        os.close(write_end)
        try:
            yield
        finally:
            os.dup2(saved, 2)  # (the pipe's last write end closes: the thread reads to its end and stops)
            thread.join()
            os.close(saved)


class Client:
    """A PJRT client of a plugin: compiles programs and owns device buffers.

    Buffers and executables keep their client alive. close() destroys the client at once; its buffers and
    executables then refuse to be used (they are not destroyed after it, which PJRT does not allow)."""

    def __init__(self, plugin: Plugin, options: dict[str, int] | None = None, kv_store: KeyValueStore | None = None):
        """options: the plugin's int64 client-create options (the CPU plugin reads "cpu_device_count"); kv_store: the
        key-value store of a multi-process run, for a plugin whose client spans processes (pjrt/kv_store.py)."""
        self.plugin = plugin
        self.handle: int | None = None
        self.closed_reason = "has been closed"
        self._uses = 0  # PJRT calls running on it without the GIL (pjrt/buffer.py's pin_client; in C: _fast.uses)
        self._fast: Any = None
        values, names = named_int64_values(options or {})
        kv_callbacks = register_kv_store(kv_store) if kv_store is not None else {}
        create = _new(_ClientCreateArgs, create_options=ctypes.addressof(values), num_options=len(names),
                      **kv_callbacks)
        plugin.call("Client_Create", create)
        self.handle = create.client
        name = _new(_ClientPlatformNameArgs, client=self.handle)
        plugin.call("Client_PlatformName", name)
        self.platform_name: str = _string_at(name.platform_name, name.platform_name_size)
        found = _new(_ClientAddressableDevicesArgs, client=self.handle)
        plugin.call("Client_AddressableDevices", found)
        self.devices: list[Device] = [Device(self, found.addressable_devices[i])
                                      for i in range(found.num_addressable_devices)]
        if not self.devices:
            raise PjrtError(f"the {self.platform_name} PJRT client of {plugin.path} has no addressable devices")
        # The CPU plugin's buffers live in host memory, which numpy may read in place (Buffer.host_view).
        self.host_memory = self.platform_name == "cpu" and plugin.has_function("Buffer_UnsafePointer")
        self._buffer_from_host_buffer = plugin.function("Client_BufferFromHostBuffer")
        self._buffer_to_host_buffer = plugin.function("Buffer_ToHostBuffer")
        self._buffer_destroy = plugin.function("Buffer_Destroy")
        self._fast = _fast_api(plugin) if C is not None else None  # the PJRT functions the C extension calls

    def _live_handle(self, action: str) -> int:
        if not self.handle:
            raise PjrtError(f"{action}: the {self.platform_name} PJRT client {self.closed_reason}")
        return self.handle

    def compile(self, mlir_text: str, overrides: bytes = b"") -> Executable:
        """Compile a StableHLO/MHLO module in MLIR text whose entry function is @main; overrides: XLA options for
        this compile (structs.option_overrides)."""
        return self._compile(mlir_text.encode() if isinstance(mlir_text, str) else bytes(mlir_text),
                             overrides=overrides)

    def _compile(self, code: bytes, portable: bool = False, overrides: bytes = b"") -> Executable:
        options = (_PORTABLE_COMPILE_OPTIONS if portable else COMPILE_OPTIONS) + overrides
        return Executable(self, self._compiled(code, b"mlir", options), code, portable)

    @property
    def platform(self) -> str:
        """The platform's name ("cpu", "cuda"), as a JAX client's."""
        return self.platform_name

    def _compiled(self, code: bytes, program_format: bytes, options: bytes, partitioned: bool = False) -> int:
        """A compile, through the one hook every compile goes through (ember._runtime.pjrt.backend_compile)."""
        return _backend_compile.backend_compile_and_load(self, code, program_format, options, partitioned)

    def _compile_now(self, code: bytes, program_format: bytes, options: bytes, partitioned: bool = False) -> int:
        """PJRT_Client_Compile of a program (its format: b"mlir" text or bytecode, b"hlo" a serialized
        xla.HloModuleProto) with these serialized compile options: the loaded executable's handle. partitioned: XLA's
        SPMD partitioner runs, whose deprecation line is left out of stderr."""
        program = _new(_Program, code=code, code_size=len(code), format=program_format,
                       format_size=len(program_format))
        handle = pin_client(self)  # (a compile on another thread may still run when the exit handler closes us)
        if handle is None:
            self._live_handle("compile")  # (closed: raises why)
        try:
            args = _new(_ClientCompileArgs, client=handle, program=ctypes.pointer(program),
                        compile_options=options, compile_options_size=len(options))
            with _without_stderr_line(_GSPMD_DEPRECATION) if partitioned else contextlib.nullcontext():
                self.plugin.call("Client_Compile", args)
            return args.executable
        finally:
            unpin_client(self)

    def compile_hlo_for(self, module: bytes, device: Device) -> Executable:
        """Compile a serialized xla.HloModuleProto (program format "hlo", which the CPU plugin accepts as well as
        MLIR) for one device: one partition of an SPMD program, run on its own (see ember._runtime.spmd)."""
        return Executable(self, self._compiled(module, b"hlo", one_device_compile_options(device.id)), module)

    def compile_spmd(self, mlir_text: str, devices: list[Device], propagate_to_outputs: list[bool]
                     ) -> SpmdExecutable:
        """Compile a module partitioned by XLA's SPMD partitioner over devices (partition i on devices[i]; the
        module's mhlo.sharding attributes name partitions); propagate_to_outputs: per output, whether XLA
        chooses its sharding (see SpmdExecutable.optimized_program for what it chose)."""
        code = mlir_text.encode() if isinstance(mlir_text, str) else bytes(mlir_text)
        options = spmd_compile_options([d.id for d in devices], propagate_to_outputs)
        return SpmdExecutable(self, self._compiled(code, b"mlir", options, partitioned=True), code, devices)

    def deserialize(self, serialized: bytes, mlir_text: str | bytes, devices: list[Device] | None = None
                    ) -> Executable:
        """Load an executable that Executable.serialize made (PJRT_Executable_DeserializeAndLoad), compiled from
        mlir_text (kept, as compile keeps it, for a portable variant compiled on first use). devices: those of
        an SPMD executable (compile_spmd's; a PjrtError unless it was compiled for exactly those)."""
        code = mlir_text.encode() if isinstance(mlir_text, str) else bytes(mlir_text)
        handle = pin_client(self)
        if handle is None:
            self._live_handle("deserialize")  # (closed: raises why)
        try:
            args = _new(_ExecutableDeserializeAndLoadArgs, client=handle, serialized_executable=serialized,
                        serialized_executable_size=len(serialized))
            self.plugin.call("Executable_DeserializeAndLoad", args)
            if devices is not None:
                return SpmdExecutable(self, args.loaded_executable, code, devices)
            return Executable(self, args.loaded_executable, code)
        finally:
            unpin_client(self)

    def buffer_from_numpy(self, array: Any, device: Device | None = None) -> Buffer:
        """Copy a numpy array (any layout, any supported dtype) to a new buffer on a device (the first one)."""
        if device is None:
            device = self.devices[0]
        elif device.client is not self:
            return device.client.buffer_from_numpy(array, device)
        if type(array) is not np.ndarray:
            array = np.asarray(array)
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        if not array.dtype.isnative:
            array = array.astype(array.dtype.newbyteorder("="))
        shape = array.shape
        if C is not None:  # (None: the client is closed; the general path below says so)
            dtype = array.dtype
            # numpy exports standard dtypes' memory as a buffer, held by the C call; ml_dtypes' (kind "V") by address
            data = array if dtype.kind != "V" else _data_address(array)
            buffer = C.from_host(self, device, device.handle, data, numpy_dtype_to_pjrt(dtype), shape, dtype)
            if buffer is not None:
                return buffer
        dims = (c_int64 * len(shape))(*shape)
        handle = pin_client(self)
        if handle is None:
            self._live_handle("buffer_from_numpy")  # (closed: raises why)
        try:
            args = _ClientBufferFromHostBufferArgs(
                _ClientBufferFromHostBufferArgs.SIZE, None, handle, _data_address(array),
                numpy_dtype_to_pjrt(array.dtype), dims, len(shape), None, 0, _IMMUTABLE_ONLY_DURING_CALL,
                device.handle)
            error = self._buffer_from_host_buffer(ctypes.addressof(args))
            if error:
                raise self.plugin.error("Client_BufferFromHostBuffer", error)
            buffer = Buffer(self, device, args.buffer, shape, array.dtype)
            self.plugin.await_event("Client_BufferFromHostBuffer", args.done_with_host_buffer)
        finally:
            unpin_client(self)
        return buffer

    @property
    def can_view_memory(self) -> bool:
        """Whether view_of_memory can wrap host memory owned elsewhere (a CPU plugin with
        PJRT_Client_CreateViewOfDeviceBuffer)."""
        return self.host_memory and self.plugin.has_function("Client_CreateViewOfDeviceBuffer")

    def view_of_memory(self, address: int, shape: tuple[int, ...], dtype: np.dtype, device: Device | None,
                       on_delete: Any, on_delete_arg: int) -> Buffer:
        """A Buffer that is a view of memory owned elsewhere (a DLPack import), made by
        PJRT_Client_CreateViewOfDeviceBuffer: no copy. PJRT calls on_delete(address, on_delete_arg) (an
        ON_DELETE_CALLBACK that the caller keeps alive for the life of the process) once it is done with the
        memory: when the buffer is destroyed and no computation uses it any more, possibly on a PJRT thread. The
        memory must hold the dense row-major array, and stay valid and unchanged until then. The CPU plugin
        requires 64-byte alignment (a PjrtError otherwise; nothing is called back then)."""
        if device is None:
            device = self.devices[0]
        dims = (c_int64 * max(len(shape), 1))(*shape)
        args = _new(_ClientCreateViewOfDeviceBufferArgs, client=self._live_handle("view_of_memory"),
                    device_buffer_ptr=address, dims=dims, num_dims=len(shape),
                    element_type=numpy_dtype_to_pjrt(dtype), device=device.handle, on_delete_callback=on_delete,
                    on_delete_callback_arg=on_delete_arg)
        self.plugin.call("Client_CreateViewOfDeviceBuffer", args)
        return Buffer(self, device, args.buffer, tuple(shape), np.dtype(dtype))

    def close(self) -> None:
        """Destroy the PJRT client now: once the PJRT calls running on it (on other threads) end; no call starts
        on it meanwhile. Idempotent."""
        handle = take_client_handle(self)
        if handle:
            while self._calls_running():
                time.sleep(0.0005)
            error = self.plugin.function("Client_Destroy")(_handle_args(handle))
            if error:
                raise self.plugin.error("Client_Destroy", error)

    def _calls_running(self) -> int:
        """How many PJRT calls that pinned this client (pin_client) have not ended (executions interrupted by
        Ctrl-C that have ended meanwhile are ended first: see "Interruptible executions" in _fastpath.c)."""
        if self._fast is None:
            return self._uses
        C.reap_executions()  # type: ignore[union-attr]
        return self._fast.uses

    def abandon(self, reason: str) -> None:
        """Stop using the client without destroying it (in a forked child, where the parent's client cannot be
        touched: its threads did not survive the fork). Its buffers and executables then refuse to be used."""
        self.handle = None
        self.closed_reason = reason

    def __del__(self) -> None:
        try:
            if self.handle:
                self.close()
        except Exception:  # noqa: BLE001 - a destructor never raises (module globals may be gone at shutdown)
            pass

    def __repr__(self) -> str:
        state = "" if self.handle else ", closed"
        return f"Client(platform={self.platform_name!r}, devices={len(self.devices)}{state})"
