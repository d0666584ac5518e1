"""A ctypes binding to the PJRT C API (struct layouts from pjrt_c_api.h, API 0.81; every struct carries its size,
so newer plugins accept it): plugin, client, devices, buffers, compile and execute, errors as PjrtError."""
from __future__ import annotations

import ctypes
import importlib.util
import os
import threading
from typing import Any, Sequence

import ml_dtypes
import numpy as np

c_size_t, c_void_p, c_char_p, c_int, c_int64 = (ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                                ctypes.c_int64)


class PjrtError(RuntimeError):
    """An error reported by the PJRT plugin."""


# ---------------------------------------------------------------------------------------------------------------
# Element types (enum PJRT_Buffer_Type)
_BUFFER_TYPES = {
    np.dtype(np.bool_): 1, np.dtype(np.int8): 2, np.dtype(np.int16): 3, np.dtype(np.int32): 4,
    np.dtype(np.int64): 5, np.dtype(np.uint8): 6, np.dtype(np.uint16): 7, np.dtype(np.uint32): 8,
    np.dtype(np.uint64): 9, np.dtype(np.float16): 10, np.dtype(np.float32): 11, np.dtype(np.float64): 12,
    np.dtype(ml_dtypes.bfloat16): 13, np.dtype(np.complex64): 14, np.dtype(np.complex128): 15,
}


def numpy_dtype_to_pjrt(dtype: Any) -> int:
    dtype = np.dtype(dtype)
    try:
        return _BUFFER_TYPES[dtype]
    except KeyError:
        raise TypeError(f"dtype {dtype.name} has no PJRT buffer type; supported: "
                        + ", ".join(d.name for d in _BUFFER_TYPES)) from None


# ---------------------------------------------------------------------------------------------------------------
# Argument structs (each begins with struct_size and extension_start)
def _struct(name: str, fields: list[tuple[str, Any]]) -> type[ctypes.Structure]:
    cls = type(name, (ctypes.Structure,), {"_fields_": [("struct_size", c_size_t), ("extension_start", c_void_p)]
                                           + fields})
    return cls


def _new(cls: type[ctypes.Structure], **values: Any) -> ctypes.Structure:
    args = cls(**values)
    args.struct_size = ctypes.sizeof(cls)
    return args


ErrorDestroy = _struct("ErrorDestroy", [("error", c_void_p)])
ErrorMessage = _struct("ErrorMessage", [("error", c_void_p), ("message", c_void_p), ("message_size", c_size_t)])
ErrorGetCode = _struct("ErrorGetCode", [("error", c_void_p), ("code", c_int)])
PluginInitialize = _struct("PluginInitialize", [])
EventDestroy = _struct("EventDestroy", [("event", c_void_p)])
EventAwait = _struct("EventAwait", [("event", c_void_p)])
ClientCreate = _struct("ClientCreate", [
    ("create_options", c_void_p), ("num_options", c_size_t), ("kv_get_callback", c_void_p),
    ("kv_get_user_arg", c_void_p), ("kv_put_callback", c_void_p), ("kv_put_user_arg", c_void_p),
    ("client", c_void_p), ("kv_try_get_callback", c_void_p), ("kv_try_get_user_arg", c_void_p)])
ClientDestroy = _struct("ClientDestroy", [("client", c_void_p)])
ClientPlatformName = _struct("ClientPlatformName", [("client", c_void_p), ("platform_name", c_void_p),
                                                    ("platform_name_size", c_size_t)])
ClientAddressableDevices = _struct("ClientAddressableDevices", [
    ("client", c_void_p), ("addressable_devices", ctypes.POINTER(c_void_p)), ("num_addressable_devices", c_size_t)])
Program = _struct("Program", [("code", c_char_p), ("code_size", c_size_t), ("format", c_char_p),
                              ("format_size", c_size_t)])
ClientCompile = _struct("ClientCompile", [
    ("client", c_void_p), ("program", ctypes.POINTER(Program)), ("compile_options", c_char_p),
    ("compile_options_size", c_size_t), ("executable", c_void_p)])
BufferFromHostBuffer = _struct("BufferFromHostBuffer", [
    ("client", c_void_p), ("data", c_void_p), ("type", c_int), ("dims", ctypes.POINTER(c_int64)),
    ("num_dims", c_size_t), ("byte_strides", ctypes.POINTER(c_int64)), ("num_byte_strides", c_size_t),
    ("host_buffer_semantics", c_int), ("device", c_void_p), ("memory", c_void_p), ("device_layout", c_void_p),
    ("done_with_host_buffer", c_void_p), ("buffer", c_void_p)])
DeviceDescriptionId = _struct("DeviceDescriptionId", [("device_description", c_void_p), ("id", c_int)])
DeviceDescriptionKind = _struct("DeviceDescriptionKind", [("device_description", c_void_p),
                                                          ("device_kind", c_void_p), ("device_kind_size", c_size_t)])
DeviceGetDescription = _struct("DeviceGetDescription", [("device", c_void_p), ("device_description", c_void_p)])
ExecutableNumOutputs = _struct("ExecutableNumOutputs", [("executable", c_void_p), ("num_outputs", c_size_t)])
ExecutableDestroy = _struct("ExecutableDestroy", [("executable", c_void_p)])
LoadedExecutableDestroy = _struct("LoadedExecutableDestroy", [("executable", c_void_p)])
LoadedExecutableGetExecutable = _struct("LoadedExecutableGetExecutable", [("loaded_executable", c_void_p),
                                                                          ("executable", c_void_p)])
ExecuteOptions = _struct("ExecuteOptions", [
    ("send_callbacks", c_void_p), ("recv_callbacks", c_void_p), ("num_send_ops", c_size_t),
    ("num_recv_ops", c_size_t), ("launch_id", c_int), ("non_donatable_input_indices", c_void_p),
    ("num_non_donatable_input_indices", c_size_t), ("context", c_void_p), ("call_location", c_char_p),
    ("num_tasks", c_size_t), ("task_ids", c_void_p), ("incarnation_ids", c_void_p)])
LoadedExecutableExecute = _struct("LoadedExecutableExecute", [
    ("executable", c_void_p), ("options", ctypes.POINTER(ExecuteOptions)),
    ("argument_lists", ctypes.POINTER(ctypes.POINTER(c_void_p))), ("num_devices", c_size_t),
    ("num_args", c_size_t), ("output_lists", ctypes.POINTER(ctypes.POINTER(c_void_p))),
    ("device_complete_events", c_void_p), ("execute_device", c_void_p)])
BufferDestroy = _struct("BufferDestroy", [("buffer", c_void_p)])
BufferToHostBuffer = _struct("BufferToHostBuffer", [("src", c_void_p), ("host_layout", c_void_p),
                                                    ("dst", c_void_p), ("dst_size", c_size_t), ("event", c_void_p)])
BufferReadyEvent = _struct("BufferReadyEvent", [("buffer", c_void_p), ("event", c_void_p)])

# The function pointers of struct PJRT_Api, in header order (only the prefix this binding uses).
_API_FUNCTIONS = """
Error_Destroy Error_Message Error_GetCode Plugin_Initialize Plugin_Attributes Event_Destroy Event_IsReady
Event_Error Event_Await Event_OnReady Client_Create Client_Destroy Client_PlatformName Client_ProcessIndex
Client_PlatformVersion Client_Devices Client_AddressableDevices Client_LookupDevice Client_LookupAddressableDevice
Client_AddressableMemories Client_Compile Client_DefaultDeviceAssignment Client_BufferFromHostBuffer
DeviceDescription_Id DeviceDescription_ProcessIndex DeviceDescription_Attributes DeviceDescription_Kind
DeviceDescription_DebugString DeviceDescription_ToString Device_GetDescription Device_IsAddressable
Device_LocalHardwareId Device_AddressableMemories Device_DefaultMemory Device_MemoryStats Memory_Id Memory_Kind
Memory_DebugString Memory_ToString Memory_AddressableByDevices Executable_Destroy Executable_Name
Executable_NumReplicas Executable_NumPartitions Executable_NumOutputs Executable_SizeOfGeneratedCodeInBytes
Executable_GetCostAnalysis Executable_OutputMemoryKinds Executable_OptimizedProgram Executable_Serialize
LoadedExecutable_Destroy LoadedExecutable_GetExecutable LoadedExecutable_AddressableDevices LoadedExecutable_Delete
LoadedExecutable_IsDeleted LoadedExecutable_Execute Executable_DeserializeAndLoad LoadedExecutable_Fingerprint
Buffer_Destroy Buffer_ElementType Buffer_Dimensions Buffer_UnpaddedDimensions Buffer_DynamicDimensionIndices
Buffer_GetMemoryLayout Buffer_OnDeviceSizeInBytes Buffer_Device Buffer_Memory Buffer_Delete Buffer_IsDeleted
Buffer_CopyToDevice Buffer_ToHostBuffer Buffer_IsOnCpu Buffer_ReadyEvent
""".split()

_HEADER_SIZE = 40  # struct_size, extension_start, PJRT_Api_Version{struct_size, extension_start, major, minor}
_FUNCTION_TYPE = ctypes.CFUNCTYPE(c_void_p, c_void_p)

# serialized xla.CompileOptionsProto: executable_build_options { num_replicas: 1 num_partitions: 1 }.
# Empty options abort the CPU plugin; these are verified to work.
COMPILE_OPTIONS = b"\x1a\x04\x20\x01\x28\x01"


class Plugin:
    """A loaded PJRT plugin (shared library exposing GetPjrtApi)."""

    def __init__(self, path: str):
        if not os.path.isfile(path):
            raise PjrtError(f"PJRT plugin not found: {path}")
        try:
            self._lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL | getattr(os, "RTLD_NOW", 2))
        except OSError as err:
            raise PjrtError(f"cannot load PJRT plugin {path}: {err}") from None
        try:
            get_api = self._lib.GetPjrtApi
        except AttributeError:
            raise PjrtError(f"{path} is not a PJRT plugin: it has no GetPjrtApi symbol") from None
        get_api.restype = c_void_p
        get_api.argtypes = []
        self.path = path
        self._api = get_api()
        if not self._api:
            raise PjrtError(f"GetPjrtApi of {path} returned NULL")
        words = (c_size_t * 5).from_address(self._api)
        major_minor = (c_int * 2).from_address(self._api + 32)
        self.api_version = (int(major_minor[0]), int(major_minor[1]))
        api_size = int(words[0])
        self._fns: dict[str, Any] = {}
        for i, name in enumerate(_API_FUNCTIONS):
            offset = _HEADER_SIZE + 8 * i
            if offset + 8 > api_size:
                break
            address = c_void_p.from_address(self._api + offset).value
            if address:
                self._fns[name] = _FUNCTION_TYPE(address)
        self.call("Plugin_Initialize", _new(PluginInitialize))

    def fn(self, name: str) -> Any:
        try:
            return self._fns[name]
        except KeyError:
            raise PjrtError(f"the PJRT plugin {self.path} does not provide PJRT_{name}") from None

    def call(self, name: str, args: ctypes.Structure) -> None:
        error = self.fn(name)(ctypes.addressof(args))
        if error:
            raise self.error(name, error)

    def error(self, name: str, error: int) -> PjrtError:
        """Turn a PJRT_Error* into a PjrtError (and destroy it)."""
        msg = _new(ErrorMessage, error=error)
        self._fns["Error_Message"](ctypes.addressof(msg))
        text = ctypes.string_at(msg.message, msg.message_size).decode("utf-8", "replace") if msg.message else ""
        code = _new(ErrorGetCode, error=error)
        self._fns["Error_GetCode"](ctypes.addressof(code))
        self._fns["Error_Destroy"](ctypes.addressof(_new(ErrorDestroy, error=error)))
        return PjrtError(f"PJRT_{name} failed (code {code.code}): {text}")

    def await_event(self, name: str, event: int) -> None:
        if not event:
            return
        try:
            self.call("Event_Await", _new(EventAwait, event=event))
        finally:
            self._fns["Event_Destroy"](ctypes.addressof(_new(EventDestroy, event=event)))

    def __repr__(self) -> str:
        return f"Plugin({self.path!r}, api_version={self.api_version})"


class Device:
    """One addressable device of a client."""

    def __init__(self, client: "Client", handle: int):
        self.client = client
        self.handle = handle
        plugin = client.plugin
        desc = _new(DeviceGetDescription, device=handle)
        plugin.call("Device_GetDescription", desc)
        ident = _new(DeviceDescriptionId, device_description=desc.device_description)
        plugin.call("DeviceDescription_Id", ident)
        self.id = int(ident.id)
        kind = _new(DeviceDescriptionKind, device_description=desc.device_description)
        plugin.call("DeviceDescription_Kind", kind)
        self.kind = ctypes.string_at(kind.device_kind, kind.device_kind_size).decode() if kind.device_kind \
            else client.platform_name

    def __repr__(self) -> str:
        return f"{self.client.platform_name.capitalize()}Device(id={self.id})"


class Client:
    """A PJRT client: compiles programs and owns device buffers."""

    def __init__(self, plugin: Plugin):
        self.plugin = plugin
        args = _new(ClientCreate)
        plugin.call("Client_Create", args)
        self.handle = args.client
        self._lock = threading.Lock()
        name = _new(ClientPlatformName, client=self.handle)
        plugin.call("Client_PlatformName", name)
        self.platform_name = ctypes.string_at(name.platform_name, name.platform_name_size).decode()
        devs = _new(ClientAddressableDevices, client=self.handle)
        plugin.call("Client_AddressableDevices", devs)
        self.devices = [Device(self, devs.addressable_devices[i]) for i in range(devs.num_addressable_devices)]
        if not self.devices:
            raise PjrtError(f"the {self.platform_name} PJRT client has no addressable devices")
        self._from_host = plugin.fn("Client_BufferFromHostBuffer")

    def compile(self, mlir_text: str) -> "Executable":
        code = mlir_text.encode()
        program = _new(Program, code=code, code_size=len(code), format=b"mlir", format_size=4)
        args = _new(ClientCompile, client=self.handle, program=ctypes.pointer(program),
                    compile_options=COMPILE_OPTIONS, compile_options_size=len(COMPILE_OPTIONS))
        self.plugin.call("Client_Compile", args)
        return Executable(self, args.executable)

    def buffer_from_numpy(self, array: np.ndarray, device: Device | None = None) -> "Buffer":
        array = np.require(array, requirements="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
        dims = (c_int64 * max(array.ndim, 1))(*array.shape)
        args = _new(BufferFromHostBuffer, client=self.handle, data=array.ctypes.data,
                    type=numpy_dtype_to_pjrt(array.dtype), dims=dims, num_dims=array.ndim,
                    host_buffer_semantics=0, device=(device or self.devices[0]).handle)
        error = self._from_host(ctypes.addressof(args))
        if error:
            raise self.plugin.error("Client_BufferFromHostBuffer", error)
        self.plugin.await_event("Event_Await", args.done_with_host_buffer)
        return Buffer(self, args.buffer, array.shape, array.dtype, device or self.devices[0])

    def close(self) -> None:
        """Destroy the client now (buffers and executables must be gone first)."""
        handle, self.handle = self.handle, None
        if handle:
            self.plugin.call("Client_Destroy", _new(ClientDestroy, client=handle))

    def __del__(self) -> None:
        try:
            if self.handle and ctypes is not None:
                self.close()
        except Exception:  # noqa: BLE001 - never raise from a destructor
            pass

    def __repr__(self) -> str:
        return f"Client(platform={self.platform_name!r}, devices={len(self.devices)})"


class Buffer:
    """A device buffer of known shape and dtype."""
    __slots__ = ("client", "handle", "shape", "dtype", "device", "__weakref__")

    def __init__(self, client: Client, handle: int, shape: Sequence[int], dtype: np.dtype, device: Device):
        self.client = client
        self.handle = handle
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        self.device = device

    @property
    def is_deleted(self) -> bool:
        return not self.handle

    def _live_handle(self) -> int:
        if not self.handle:
            raise PjrtError("the buffer has been deleted")
        return self.handle

    def to_numpy(self) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        args = _new(BufferToHostBuffer, src=self._live_handle(), dst=out.ctypes.data, dst_size=out.nbytes)
        self.client.plugin.call("Buffer_ToHostBuffer", args)
        self.client.plugin.await_event("Event_Await", args.event)
        return out

    def block_until_ready(self) -> None:
        args = _new(BufferReadyEvent, buffer=self._live_handle())
        self.client.plugin.call("Buffer_ReadyEvent", args)
        self.client.plugin.await_event("Event_Await", args.event)

    def delete(self) -> None:
        handle, self.handle = self.handle, None
        if handle:
            self.client.plugin.call("Buffer_Destroy", _new(BufferDestroy, buffer=handle))

    def __del__(self) -> None:
        try:
            if self.handle and ctypes is not None:
                self.delete()
        except Exception:  # noqa: BLE001
            pass

    def __repr__(self) -> str:
        return f"Buffer(shape={self.shape}, dtype={self.dtype.name}, device={self.device})"


class Executable:
    """A compiled program loaded on the client's devices."""

    def __init__(self, client: Client, handle: int):
        self.client = client
        self.handle = handle
        plugin = client.plugin
        get = _new(LoadedExecutableGetExecutable, loaded_executable=handle)
        plugin.call("LoadedExecutable_GetExecutable", get)
        num = _new(ExecutableNumOutputs, executable=get.executable)
        try:
            plugin.call("Executable_NumOutputs", num)
        finally:
            plugin.call("Executable_Destroy", _new(ExecutableDestroy, executable=get.executable))
        self.num_outputs = int(num.num_outputs)
        # Reused per call: the options, the output array and the argument struct.
        self._options = _new(ExecuteOptions)
        self._outputs = (c_void_p * max(self.num_outputs, 1))()
        self._output_lists = (ctypes.POINTER(c_void_p) * 1)(ctypes.cast(self._outputs, ctypes.POINTER(c_void_p)))
        self._args = _new(LoadedExecutableExecute, executable=handle, options=ctypes.pointer(self._options),
                          num_devices=1, output_lists=self._output_lists)
        self._args_address = ctypes.addressof(self._args)
        self._execute = plugin.fn("LoadedExecutable_Execute")
        self._slots: dict[int, Any] = {}
        self._lock = threading.Lock()

    def _argument_slots(self, count: int) -> Any:
        """The reused argument array for calls with `count` arguments (argument_lists points at it)."""
        slots = self._slots.get(count)
        if slots is None:
            handles = (c_void_p * max(count, 1))()
            lists = (ctypes.POINTER(c_void_p) * 1)(ctypes.cast(handles, ctypes.POINTER(c_void_p)))
            slots = self._slots[count] = (handles, lists)
        return slots

    def execute(self, args: Sequence[Buffer], out_specs: Sequence[tuple[tuple[int, ...], np.dtype]]
                ) -> list[Buffer]:
        if len(out_specs) != self.num_outputs:
            raise ValueError(f"execute: {len(out_specs)} output specs given for {self.num_outputs} outputs")
        for b in args:
            if not b.handle:
                raise PjrtError("execute: an argument buffer has been deleted (Array.delete was called)")
        device = self.client.devices[0]  # compiled with the default device assignment
        with self._lock:
            handles, lists = self._argument_slots(len(args))
            for i, b in enumerate(args):
                handles[i] = b.handle
            call = self._args
            call.argument_lists = lists
            call.num_args = len(args)
            error = self._execute(self._args_address)
            if error:
                raise self.client.plugin.error("LoadedExecutable_Execute", error)
            outs = self._outputs[:self.num_outputs]
        client = self.client
        return [Buffer(client, h, shape, dtype, device) for h, (shape, dtype) in zip(outs, out_specs)]

    def __del__(self) -> None:
        try:
            handle, self.handle = self.handle, None
            if handle and ctypes is not None:
                self.client.plugin.call("LoadedExecutable_Destroy", _new(LoadedExecutableDestroy, executable=handle))
        except Exception:  # noqa: BLE001
            pass


# ---------------------------------------------------------------------------------------------------------------
# Finding plugins
def default_plugin_path() -> str:
    """EMBER_PJRT_PLUGIN if set, else the XLA CPU plugin of the xla-cpu-pjrt wheel."""
    env = os.environ.get("EMBER_PJRT_PLUGIN")
    if env:
        if not os.path.isfile(env):
            raise RuntimeError(f"EMBER_PJRT_PLUGIN points at {env!r}, which does not exist")
        return env
    return cpu_plugin_path()


def cpu_plugin_path() -> str:
    """The XLA CPU plugin of the xla-cpu-pjrt wheel."""
    spec = importlib.util.find_spec("xla_plugins.xla_cpu_pjrt") if importlib.util.find_spec("xla_plugins") else None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(folder, "xla_cpu_pjrt.so")
        if os.path.isfile(path):
            return path
    raise RuntimeError("the XLA CPU PJRT plugin is not installed: `pip install xla-cpu-pjrt`, or set "
                       "EMBER_PJRT_PLUGIN to the path of a PJRT plugin .so")


def find_cuda_plugin() -> str | None:
    """The .so of an installed CUDA PJRT plugin (jax-cuda12-pjrt / jax-cuda13-pjrt), or None."""
    try:
        if importlib.util.find_spec("jax_plugins") is None:
            return None
    except (ImportError, ValueError):
        return None
    for package in ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12"):
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        for folder in (spec.submodule_search_locations or []) if spec else []:
            path = os.path.join(folder, "xla_cuda_plugin.so")
            if os.path.isfile(path):
                return path
    return None
