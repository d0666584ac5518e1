"""Executable: a compiled, loaded program, run with Buffer arguments on the device of its first argument.

Its Runner runs it: the C extension's (ember._runtime.fastpath), or _PyRunner, which builds the
PJRT_LoadedExecutable_Execute args once and reuses them in every call, under a lock. A call on a device other
than the one the program was compiled for runs a portable copy, compiled once, on first use."""
from __future__ import annotations

import ctypes
import threading
import weakref
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from ember._runtime.fastpath import C
from ember._runtime.pjrt import buffer as buffer_module
from ember._runtime.pjrt.buffer import Buffer
from ember._runtime.pjrt.device import Device
from ember._runtime.pjrt.errors import PjrtError
from ember._runtime.pjrt.plugin import Plugin
from ember._runtime.pjrt.structs import (_POINTER_TO_VOID_P, _ExecutableNumOutputsArgs, _ExecuteOptions, _handle_args,
                                 _LoadedExecutableAddressableDevicesArgs, _LoadedExecutableExecuteArgs,
                                 _LoadedExecutableGetExecutableArgs, _new, c_void_p, _ExecutableSerializeArgs,
                                 _ExecutableOptimizedProgramArgs, _ExecutableGetCostAnalysisArgs,
                                 _ExecutableGetCompiledMemoryStatsArgs, _Program, MEMORY_STATS)

if TYPE_CHECKING:
    from ember._runtime.pjrt.client import Client  # (a type only: client.py imports this module)


class _PyRunner:
    """Runs a loaded executable on Buffers: the pure-Python twin of ember._runtime._fastpath.Runner.

    run(buffers, specs, device, execute_device) pins the client and the buffers (all, or none: then it returns
    None, and nothing ran), executes (on execute_device, a PJRT_Device address, or None: the executable's own
    device), unpins them and returns the outputs as Buffers on device with the given (shape, dtype) specs. A PJRT
    error is raised as a PjrtError. The Execute args are built once and reused by every call, under a lock.

    interruptible: a call on the main thread runs on a helper thread while the main thread waits in short steps,
    so that Ctrl-C interrupts it at once (the C Runner hands only the execute call to a kept helper thread; here a
    thread is started per call). An interrupted call goes on in the background, holding its Executable (owner),
    and drops its results."""

    def __init__(self, client: Client, handle: int, num_outputs: int, owner: Any = None):
        self.client = client
        self.num_outputs = num_outputs
        self.interruptible = False
        self._owner = None if owner is None else weakref.ref(owner)
        self._lock = threading.Lock()
        self._options = _new(_ExecuteOptions)
        self._outputs = (c_void_p * max(num_outputs, 1))()
        self._output_lists = (_POINTER_TO_VOID_P * 1)(ctypes.cast(self._outputs, _POINTER_TO_VOID_P))
        self._call = _new(_LoadedExecutableExecuteArgs, executable=handle, options=ctypes.pointer(self._options),
                          num_devices=1, output_lists=self._output_lists)
        self._call_address = ctypes.addressof(self._call)
        self._arguments = self._allocate_arguments(8)
        self._execute = client.plugin.function("LoadedExecutable_Execute")

    def _allocate_arguments(self, capacity: int) -> Any:
        """A reused array of argument buffer handles, which the Execute args point at."""
        arguments = (c_void_p * capacity)()
        self._argument_lists = (_POINTER_TO_VOID_P * 1)(ctypes.cast(arguments, _POINTER_TO_VOID_P))
        self._call.argument_lists = self._argument_lists
        return arguments

    def run(self, args: Sequence[Buffer], specs: Sequence[tuple[tuple[int, ...], np.dtype]], device: Device,
            execute_device: int | None) -> list[Buffer] | None:
        if self.interruptible and threading.current_thread() is _MAIN_THREAD:
            owner = self._owner() if self._owner is not None else None
            return _on_helper_thread(lambda: (owner, self._run(args, specs, device, execute_device))[1])
        return self._run(args, specs, device, execute_device)

    def _run(self, args: Sequence[Buffer], specs: Sequence[tuple[tuple[int, ...], np.dtype]], device: Device,
             execute_device: int | None) -> list[Buffer] | None:
        client = self.client
        if buffer_module.pin_client(client) is None:  # (closed)
            return None
        try:
            return self._run_pinned(args, specs, device, execute_device)
        finally:
            buffer_module.unpin_client(client)

    def _run_pinned(self, args: Sequence[Buffer], specs: Sequence[tuple[tuple[int, ...], np.dtype]],
                    device: Device, execute_device: int | None) -> list[Buffer] | None:
        client = self.client
        count = len(args)
        with self._lock:
            arguments = self._arguments
            if count > len(arguments):
                arguments = self._arguments = self._allocate_arguments(count)
            # Pin the arguments while PJRT uses them (a delete() from another thread then leaves their destruction
            # to the end of this call).
            if buffer_module.pin_all(args, client, arguments) >= 0:
                return None
            try:
                call = self._call
                call.num_args = count
                call.execute_device = execute_device
                error = self._execute(self._call_address)
            finally:
                buffer_module.unpin_all(args)  # (destroys the buffers deleted meanwhile)
            if error:
                raise client.plugin.error("LoadedExecutable_Execute", error)
            handles = self._outputs[:self.num_outputs]
        return [Buffer(client, device, handle, shape, dtype) for handle, (shape, dtype) in zip(handles, specs)]


_MAIN_THREAD = threading.main_thread()
_WAIT_STEP_S = 0.05


def _on_helper_thread(fn: Callable[[], Any]) -> Any:
    """fn() run on a new (daemon) thread while this thread waits for it in short steps, so that a signal's
    exception (KeyboardInterrupt) ends the wait at once; fn then goes on in the background, its result dropped.
    (Client.close waits for the PJRT calls it pinned the client for.)"""
    done = threading.Event()
    outcome: list[Any] = []

    def work() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as err:  # noqa: BLE001 - handed to the waiting thread
            outcome.append((False, err))
        finally:
            done.set()

    threading.Thread(target=work, name="ember-execute", daemon=True).start()
    while not done.wait(_WAIT_STEP_S):
        pass
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


Runner: Any = C.Runner if C is not None else _PyRunner


class Executable:
    """A compiled, loaded program; it keeps its client alive.

    A call runs on the device of its first argument. XLA runs a program fastest on the device it was compiled
    for (the client's first device); for other devices a portable copy is compiled once, on first use."""

    def __init__(self, client: Client, handle: int, code: bytes, portable: bool = False):
        self.client = client
        self.handle: int | None = handle
        self._code = code
        self._portable = portable
        plugin = client.plugin
        self.num_outputs: int = self._count_outputs(plugin, handle)
        self._device: Device | None = None if portable else self._compiled_device(client, handle)
        self._portable_variant: Executable | None = None
        self._lock = threading.Lock()
        # (the Runner holds this Executable weakly; an interrupted execution holds it until the execution ends)
        self._runner = Runner(client, handle, self.num_outputs, owner=self)
        self._out_specs_seen: tuple[Any, ...] | None = None
        self._out_specs: list[tuple[tuple[int, ...], np.dtype]] = []

    @staticmethod
    def _count_outputs(plugin: Plugin, handle: int) -> int:
        get = _new(_LoadedExecutableGetExecutableArgs, loaded_executable=handle)
        plugin.call("LoadedExecutable_GetExecutable", get)
        count = _new(_ExecutableNumOutputsArgs, executable=get.executable)
        try:
            plugin.call("Executable_NumOutputs", count)
        finally:
            plugin.function("Executable_Destroy")(_handle_args(get.executable))
        return count.num_outputs

    @staticmethod
    def _compiled_device(client: Client, handle: int) -> Device:
        """The device a (non-portable, single-device) executable was compiled for."""
        found = _new(_LoadedExecutableAddressableDevicesArgs, executable=handle)
        client.plugin.call("LoadedExecutable_AddressableDevices", found)
        if found.num_addressable_devices != 1:
            raise PjrtError(f"compile: expected an executable for one device, got one for "
                            f"{found.num_addressable_devices}")
        handle = found.addressable_devices[0]
        for device in client.devices:
            if device.handle == handle:
                return device
        raise PjrtError("compile: the executable's device is not an addressable device of its client")

    def _normalized_out_specs(self, out_specs: Sequence[Any]) -> list[tuple[tuple[int, ...], np.dtype]]:
        """The output (shape, dtype) pairs as tuples and np.dtypes, cached while a caller passes the same ones."""
        seen = tuple(out_specs)
        if seen == self._out_specs_seen:  # identical elements compare by identity: cheap
            return self._out_specs
        if len(seen) != self.num_outputs:
            raise ValueError(f"execute: {len(seen)} output specs given for an executable with "
                             f"{self.num_outputs} outputs")
        specs = [(tuple(int(d) for d in shape), np.dtype(dtype)) for shape, dtype in seen]
        self._out_specs_seen, self._out_specs = seen, specs
        return specs

    def execute(self, args: Sequence[Buffer], out_specs: Sequence[tuple[tuple[int, ...], np.dtype]]
                ) -> list[Buffer]:
        """Run on the device of args[0] (without arguments, on the client's first device); the caller gives
        each output's (shape, dtype). Argument shapes and dtypes are not checked here."""
        specs = self._normalized_out_specs(out_specs)
        first = args[0] if args else None
        device = first.device if type(first) is Buffer else self._device
        if device is self._device:
            executable, execute_device = self, None
        else:
            executable, execute_device = self._portable_executable(), device.handle
        outs = executable._runner.run(args, specs, device, execute_device) if executable.handle else None
        if outs is None:
            raise executable._why_not_run(args)
        return outs

    def _with_executable(self, work: Any) -> Any:
        """work(the PJRT_Executable of this loaded executable), which is released afterwards."""
        plugin = self.client.plugin
        get = _new(_LoadedExecutableGetExecutableArgs, loaded_executable=self.handle)
        plugin.call("LoadedExecutable_GetExecutable", get)
        try:
            return work(get.executable)
        finally:
            plugin.function("Executable_Destroy")(_handle_args(get.executable))

    def optimized_program(self) -> tuple[str, bytes]:
        """(format, code) of the program XLA compiled (PJRT_Executable_OptimizedProgram): the CPU plugin gives
        "hlo_with_config", a serialized xla.HloModuleProtoWithConfig."""
        plugin = self.client.plugin

        def read(executable: int) -> tuple[str, bytes]:
            program = _new(_Program, code=None, code_size=0, format=None, format_size=0)
            args = _new(_ExecutableOptimizedProgramArgs, executable=executable, program=ctypes.pointer(program))
            plugin.call("Executable_OptimizedProgram", args)  # (the size)
            code = ctypes.create_string_buffer(max(program.code_size, 1))
            program.code = ctypes.cast(code, ctypes.c_char_p)
            plugin.call("Executable_OptimizedProgram", args)
            return ctypes.string_at(program.format, program.format_size).decode(), code.raw[:program.code_size]
        return self._with_executable(read)

    def cost_analysis(self) -> dict[str, float]:
        """XLA's cost analysis of the compiled program (PJRT_Executable_GetCostAnalysis): "flops",
        "transcendentals", "bytes accessed" (and per operand: "bytes accessed0{}", ...), as numbers."""
        plugin = self.client.plugin

        def read(executable: int) -> dict[str, float]:
            args = _new(_ExecutableGetCostAnalysisArgs, executable=executable)
            plugin.call("Executable_GetCostAnalysis", args)
            found = {}
            for i in range(args.num_properties):
                value = args.properties[i]
                name = ctypes.string_at(value.name, value.name_size).decode()
                kind = value.type  # enum PJRT_NamedValue_Type: 1 int64, 3 float, 4 bool
                found[name] = (float(value.value.float_value) if kind == 3 else
                               int(value.value.int64_value) if kind == 1 else
                               bool(value.value.bool_value) if kind == 4 else None)
            return found
        return self._with_executable(read)

    def memory_stats(self) -> dict[str, int]:
        """XLA's memory statistics of the compiled program (PJRT_Executable_GetCompiledMemoryStats), in bytes."""
        plugin = self.client.plugin

        def read(executable: int) -> dict[str, int]:
            args = _new(_ExecutableGetCompiledMemoryStatsArgs, executable=executable)
            plugin.call("Executable_GetCompiledMemoryStats", args)
            return {name: int(getattr(args, name)) for name in MEMORY_STATS}
        return self._with_executable(read)

    def serialize(self) -> bytes:
        """The plugin's serialization of this executable (PJRT_Executable_Serialize): loaded again by
        Client.deserialize in this or another process with the same plugin (not a stable format across plugin
        versions; the persistent compilation cache keys entries by the plugin's identity)."""
        plugin = self.client.plugin
        get = _new(_LoadedExecutableGetExecutableArgs, loaded_executable=self.handle)
        plugin.call("LoadedExecutable_GetExecutable", get)
        try:
            args = _new(_ExecutableSerializeArgs, executable=get.executable)
            plugin.call("Executable_Serialize", args)
            try:
                return ctypes.string_at(args.serialized_bytes, args.serialized_bytes_size)
            finally:
                if args.serialized_executable_deleter:
                    args.serialized_executable_deleter(args.serialized_executable)
        finally:
            plugin.function("Executable_Destroy")(_handle_args(get.executable))

    def _portable_executable(self) -> Executable:
        with self._lock:
            if self._portable_variant is None:
                self._portable_variant = self.client._compile(self._code, portable=True)
                self._portable_variant._runner.interruptible = self._runner.interruptible
            return self._portable_variant

    def _why_not_run(self, args: Sequence[Any]) -> Exception:
        """The error for a call that its Runner refused (a closed client, an argument that is not a live Buffer
        of this client)."""
        client = self.client
        if not (self.handle and client.handle):
            return PjrtError(f"execute: the executable's PJRT client {client.closed_reason}")
        for i, buffer in enumerate(args):
            if type(buffer) is not Buffer or not buffer.handle or buffer.client is not client:
                return self._bad_argument(i, buffer)
        return PjrtError("execute: an argument could not be used")  # (not reached: those states do not revert)

    @staticmethod
    def _bad_argument(index: int, buffer: Any) -> Exception:
        if not isinstance(buffer, Buffer):
            return TypeError(f"execute: argument {index} is a {type(buffer).__name__}, not a Buffer")
        if not buffer.handle:
            return PjrtError(f"execute: argument {index} is a buffer that has been deleted")
        if not buffer.client.handle:
            return PjrtError(f"execute: argument {index} is a buffer whose PJRT client {buffer.client.closed_reason}")
        return PjrtError(f"execute: argument {index} belongs to another PJRT client ({buffer.client!r})")

    def __del__(self) -> None:
        try:
            handle, self.handle = self.handle, None
            client = self.client
            if handle and buffer_module.pin_client(client) is not None:  # (not after the client is destroyed)
                try:
                    error = client.plugin.function("LoadedExecutable_Destroy")(_handle_args(handle))
                finally:
                    buffer_module.unpin_client(client)
                if error:
                    client.plugin.error("LoadedExecutable_Destroy", error)
        except Exception:  # noqa: BLE001 - a destructor never raises
            pass

    def __repr__(self) -> str:
        return f"Executable(num_outputs={self.num_outputs}, client={self.client!r})"
