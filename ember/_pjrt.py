"""A ctypes binding to the PJRT C API: plugin, client, devices, buffers, compile, execute.

Struct layouts and the order of the function pointers in PJRT_Api follow pjrt_c_api.h (API 0.81) of the
xla-cpu-pjrt wheel. Every argument struct starts with its own size, which lets newer plugins accept it.
Every PJRT error becomes a PjrtError that names the failing call.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import threading
from struct import Struct
from typing import Any, Sequence

import ml_dtypes
import numpy as np

c_size_t, c_void_p, c_char_p, c_int, c_int64 = (ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                                ctypes.c_int64)
_POINTER_TO_VOID_P = ctypes.POINTER(c_void_p)


class PjrtError(RuntimeError):
    """An error reported by a PJRT plugin, or a misuse of this binding (a deleted buffer, a closed client).

    `call` is the PJRT function that failed (e.g. "PJRT_Client_Compile") and `code` its PJRT_Error_Code name,
    when the plugin reported the error."""

    def __init__(self, message: str, call: str | None = None, code: str | None = None):
        super().__init__(message)
        self.call = call
        self.code = code


# ---------------------------------------------------------------------------------------------------------------
# Element types: enum PJRT_Buffer_Type
_PJRT_BUFFER_TYPES: dict[np.dtype, int] = {
    np.dtype(np.bool_): 1,  # PRED
    np.dtype(np.int8): 2, np.dtype(np.int16): 3, np.dtype(np.int32): 4, np.dtype(np.int64): 5,
    np.dtype(np.uint8): 6, np.dtype(np.uint16): 7, np.dtype(np.uint32): 8, np.dtype(np.uint64): 9,
    np.dtype(np.float16): 10, np.dtype(np.float32): 11, np.dtype(np.float64): 12,
    np.dtype(ml_dtypes.bfloat16): 13,
    np.dtype(np.complex64): 14, np.dtype(np.complex128): 15,
}

# enum PJRT_Error_Code
_ERROR_CODE_NAMES = (
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
    "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
    "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
)

# enum PJRT_HostBufferSemantics: the host data is copied before PJRT_Client_BufferFromHostBuffer returns.
_IMMUTABLE_ONLY_DURING_CALL = 0

# A serialized xla.CompileOptionsProto: executable_build_options {num_replicas: 1, num_partitions: 1}.
# Empty options abort the CPU plugin: never send them. The portable variant adds compile_portable_executable:
# true, for an executable that runs on any device its call names (executing it costs a few microseconds more).
COMPILE_OPTIONS = b"\x1a\x04\x20\x01\x28\x01"
_PORTABLE_COMPILE_OPTIONS = COMPILE_OPTIONS + b"\x20\x01"


def numpy_dtype_to_pjrt(dtype: Any) -> int:
    """The PJRT_Buffer_Type of a numpy dtype."""
    try:
        dtype = np.dtype(dtype)
        return _PJRT_BUFFER_TYPES[dtype]
    except (KeyError, TypeError):
        supported = ", ".join(d.name for d in _PJRT_BUFFER_TYPES)
        raise TypeError(f"dtype {dtype!r} has no PJRT buffer type; supported dtypes: {supported}") from None


# ---------------------------------------------------------------------------------------------------------------
# Argument structs. Each begins with struct_size and extension_start; field order follows pjrt_c_api.h.
class _Args(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("extension_start", c_void_p)]


def _args_type(name: str, fields: list[tuple[str, Any]]) -> Any:
    cls = type(name, (_Args,), {"_fields_": fields})
    cls.SIZE = ctypes.sizeof(cls)
    return cls


def _new(cls: Any, **values: Any) -> Any:
    return cls(struct_size=cls.SIZE, **values)


_ApiVersion = _args_type("PJRT_Api_Version", [("major_version", c_int), ("minor_version", c_int)])
_ApiHeader = _args_type("PJRT_Api_Header", [("pjrt_api_version", _ApiVersion)])  # the function pointers follow

_ErrorMessageArgs = _args_type("PJRT_Error_Message_Args", [
    ("error", c_void_p), ("message", c_void_p), ("message_size", c_size_t)])
_ErrorGetCodeArgs = _args_type("PJRT_Error_GetCode_Args", [("error", c_void_p), ("code", c_int)])
_PluginInitializeArgs = _args_type("PJRT_Plugin_Initialize_Args", [])
_ClientCreateArgs = _args_type("PJRT_Client_Create_Args", [
    ("create_options", c_void_p), ("num_options", c_size_t),
    ("kv_get_callback", c_void_p), ("kv_get_user_arg", c_void_p),
    ("kv_put_callback", c_void_p), ("kv_put_user_arg", c_void_p),
    ("client", c_void_p),
    ("kv_try_get_callback", c_void_p), ("kv_try_get_user_arg", c_void_p)])
_ClientPlatformNameArgs = _args_type("PJRT_Client_PlatformName_Args", [
    ("client", c_void_p), ("platform_name", c_void_p), ("platform_name_size", c_size_t)])
_ClientAddressableDevicesArgs = _args_type("PJRT_Client_AddressableDevices_Args", [
    ("client", c_void_p), ("addressable_devices", _POINTER_TO_VOID_P), ("num_addressable_devices", c_size_t)])
_Program = _args_type("PJRT_Program", [
    ("code", c_char_p), ("code_size", c_size_t), ("format", c_char_p), ("format_size", c_size_t)])
_ClientCompileArgs = _args_type("PJRT_Client_Compile_Args", [
    ("client", c_void_p), ("program", ctypes.POINTER(_Program)),
    ("compile_options", c_char_p), ("compile_options_size", c_size_t), ("executable", c_void_p)])
_ClientBufferFromHostBufferArgs = _args_type("PJRT_Client_BufferFromHostBuffer_Args", [
    ("client", c_void_p), ("data", c_void_p), ("type", c_int),
    ("dims", ctypes.POINTER(c_int64)), ("num_dims", c_size_t),
    ("byte_strides", ctypes.POINTER(c_int64)), ("num_byte_strides", c_size_t),
    ("host_buffer_semantics", c_int), ("device", c_void_p), ("memory", c_void_p), ("device_layout", c_void_p),
    ("done_with_host_buffer", c_void_p), ("buffer", c_void_p)])
_DeviceGetDescriptionArgs = _args_type("PJRT_Device_GetDescription_Args", [
    ("device", c_void_p), ("device_description", c_void_p)])
_DeviceDescriptionIdArgs = _args_type("PJRT_DeviceDescription_Id_Args", [
    ("device_description", c_void_p), ("id", c_int)])
_DeviceDescriptionKindArgs = _args_type("PJRT_DeviceDescription_Kind_Args", [
    ("device_description", c_void_p), ("device_kind", c_void_p), ("device_kind_size", c_size_t)])
_LoadedExecutableGetExecutableArgs = _args_type("PJRT_LoadedExecutable_GetExecutable_Args", [
    ("loaded_executable", c_void_p), ("executable", c_void_p)])
_LoadedExecutableAddressableDevicesArgs = _args_type("PJRT_LoadedExecutable_AddressableDevices_Args", [
    ("executable", c_void_p), ("addressable_devices", _POINTER_TO_VOID_P), ("num_addressable_devices", c_size_t)])
_ExecutableNumOutputsArgs = _args_type("PJRT_Executable_NumOutputs_Args", [
    ("executable", c_void_p), ("num_outputs", c_size_t)])
_ExecuteOptions = _args_type("PJRT_ExecuteOptions", [
    ("send_callbacks", c_void_p), ("recv_callbacks", c_void_p), ("num_send_ops", c_size_t),
    ("num_recv_ops", c_size_t), ("launch_id", c_int),
    ("non_donatable_input_indices", c_void_p), ("num_non_donatable_input_indices", c_size_t),
    ("context", c_void_p), ("call_location", c_char_p),
    ("num_tasks", c_size_t), ("task_ids", c_void_p), ("incarnation_ids", c_void_p)])
_LoadedExecutableExecuteArgs = _args_type("PJRT_LoadedExecutable_Execute_Args", [
    ("executable", c_void_p), ("options", ctypes.POINTER(_ExecuteOptions)),
    ("argument_lists", ctypes.POINTER(_POINTER_TO_VOID_P)), ("num_devices", c_size_t), ("num_args", c_size_t),
    ("output_lists", ctypes.POINTER(_POINTER_TO_VOID_P)), ("device_complete_events", c_void_p),
    ("execute_device", c_void_p)])
_BufferToHostBufferArgs = _args_type("PJRT_Buffer_ToHostBuffer_Args", [
    ("src", c_void_p), ("host_layout", c_void_p), ("dst", c_void_p), ("dst_size", c_size_t), ("event", c_void_p)])
_BufferReadyEventArgs = _args_type("PJRT_Buffer_ReadyEvent_Args", [("buffer", c_void_p), ("event", c_void_p)])

# The many calls whose args are {struct_size, extension_start, one handle} and that only read them (the
# *_Destroy calls, PJRT_Event_Await) get those args packed into a bytes object, which is cheaper to build.
_HandleArgs = _args_type("PJRT_Handle_Args", [("handle", c_void_p)])
_HANDLE_ARGS = Struct("NPP")
assert _HANDLE_ARGS.size == _HandleArgs.SIZE


def _handle_args(handle: int) -> bytes:
    return _HANDLE_ARGS.pack(_HandleArgs.SIZE, 0, handle)


# The function pointers of struct PJRT_Api in header order, up to the last one this binding uses.
_API_FUNCTION_NAMES = """
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

_PJRT_FUNCTION = ctypes.CFUNCTYPE(c_void_p, c_void_p)  # PJRT_Error* (*)(PJRT_..._Args*); releases the GIL
_SUPPORTED_API_MAJOR = 0


def _string_at(address: int | None, size: int) -> str:
    return ctypes.string_at(address, size).decode("utf-8", "replace") if address else ""


def _data_address(array: np.ndarray) -> int:
    """The address of a C-contiguous array's data (array.ctypes.data is several times slower)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):  # read-only, zero-size, or a dtype numpy cannot export (bfloat16)
        return array.__array_interface__["data"][0]


# ---------------------------------------------------------------------------------------------------------------
# Plugins
_loaded_apis: dict[str, tuple[ctypes.CDLL, int]] = {}  # real path -> (library, PJRT_Api*)
_initialized_apis: set[int] = set()  # PJRT_Plugin_Initialize runs once per plugin
_load_lock = threading.Lock()


def _load_api(path: str) -> tuple[ctypes.CDLL, int]:
    key = os.path.realpath(path)
    with _load_lock:
        loaded = _loaded_apis.get(key)
        if loaded is None:
            loaded = _loaded_apis[key] = _open_api(path)
    return loaded


def _open_api(path: str) -> tuple[ctypes.CDLL, int]:
    try:
        library = ctypes.CDLL(path, mode=os.RTLD_LOCAL | getattr(os, "RTLD_NOW", 2))
    except OSError as err:
        raise PjrtError(f"cannot load PJRT plugin {path}: {err}") from None
    try:
        get_pjrt_api = library.GetPjrtApi
    except AttributeError:
        raise PjrtError(f"{path} is not a PJRT plugin: it has no GetPjrtApi symbol") from None
    get_pjrt_api.restype = c_void_p
    get_pjrt_api.argtypes = []
    api = get_pjrt_api()
    if not api:
        raise PjrtError(f"GetPjrtApi of the PJRT plugin {path} returned NULL")
    return library, api


class Plugin:
    """A PJRT plugin: a shared library exporting GetPjrtApi, loaded and initialized once per process."""

    def __init__(self, path: str):
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise PjrtError(f"PJRT plugin not found: {path}")
        self.path = path
        self._library, api = _load_api(path)
        header = _ApiHeader.from_address(api)
        self.api_version: tuple[int, int] = (header.pjrt_api_version.major_version,
                                             header.pjrt_api_version.minor_version)
        if self.api_version[0] != _SUPPORTED_API_MAJOR:
            raise PjrtError(f"the PJRT plugin {path} implements PJRT C API {self.api_version[0]}."
                            f"{self.api_version[1]}; this binding speaks major version {_SUPPORTED_API_MAJOR}")
        self._functions = self._read_functions(api, header.struct_size)
        with _load_lock:
            if api not in _initialized_apis:
                self.call("Plugin_Initialize", _new(_PluginInitializeArgs))
                _initialized_apis.add(api)

    @staticmethod
    def _read_functions(api: int, api_size: int) -> dict[str, Any]:
        count = min(len(_API_FUNCTION_NAMES), max(0, (api_size - _ApiHeader.SIZE) // ctypes.sizeof(c_void_p)))
        addresses = (c_void_p * count).from_address(api + _ApiHeader.SIZE)
        return {name: _PJRT_FUNCTION(address) for name, address in zip(_API_FUNCTION_NAMES, addresses) if address}

    def function(self, name: str) -> Any:
        """The plugin's PJRT_<name>, callable with the address (or bytes) of its args struct."""
        try:
            return self._functions[name]
        except KeyError:
            raise PjrtError(f"the PJRT plugin {self.path} does not provide PJRT_{name}") from None

    def has_function(self, name: str) -> bool:
        return name in self._functions

    def call(self, name: str, args: ctypes.Structure) -> None:
        """Call PJRT_<name>(&args); raise its error, if any, as a PjrtError."""
        error = self.function(name)(ctypes.addressof(args))
        if error:
            raise self.error(name, error)

    def error(self, name: str, error: int) -> PjrtError:
        """Turn the PJRT_Error* returned by PJRT_<name> into a PjrtError, destroying the PJRT error."""
        functions = self._functions
        message = _new(_ErrorMessageArgs, error=error)
        functions["Error_Message"](ctypes.addressof(message))
        text = _string_at(message.message, message.message_size)
        code = _new(_ErrorGetCodeArgs, error=error)
        code_name = "UNKNOWN"
        if not functions["Error_GetCode"](ctypes.addressof(code)):
            code_name = _ERROR_CODE_NAMES[code.code] if 0 <= code.code < len(_ERROR_CODE_NAMES) else str(code.code)
        functions["Error_Destroy"](_handle_args(error))
        return PjrtError(f"PJRT_{name} failed ({code_name}): {text}", call=f"PJRT_{name}", code=code_name)

    def await_event(self, name: str, event: int | None) -> None:
        """Wait for an event returned by PJRT_<name> and destroy it; its error is raised as PJRT_<name>'s."""
        if not event:
            return
        functions = self._functions
        args = _handle_args(event)
        try:
            error = functions["Event_Await"](args)
            if error:
                raise self.error(name, error)
        finally:
            error = functions["Event_Destroy"](args)
            if error:
                self.error("Event_Destroy", error)  # destroyed, not raised: the awaited result matters

    def __repr__(self) -> str:
        return f"Plugin({self.path!r}, api_version={self.api_version})"


# ---------------------------------------------------------------------------------------------------------------
# Clients and devices
class Device:
    """An addressable device of a client."""

    def __init__(self, client: Client, handle: int):
        self.client = client
        self.handle = handle
        plugin = client.plugin
        get_description = _new(_DeviceGetDescriptionArgs, device=handle)
        plugin.call("Device_GetDescription", get_description)
        description = get_description.device_description
        device_id = _new(_DeviceDescriptionIdArgs, device_description=description)
        plugin.call("DeviceDescription_Id", device_id)
        self.id: int = device_id.id
        self.kind: str = client.platform_name
        if plugin.has_function("DeviceDescription_Kind"):
            kind = _new(_DeviceDescriptionKindArgs, device_description=description)
            plugin.call("DeviceDescription_Kind", kind)
            self.kind = _string_at(kind.device_kind, kind.device_kind_size) or client.platform_name

    def __repr__(self) -> str:
        return f"{self.client.platform_name.capitalize()}Device(id={self.id})"


class Client:
    """A PJRT client of a plugin: compiles programs and owns device buffers.

    Buffers and executables keep their client alive. close() destroys the client at once; its buffers and
    executables then refuse to be used (they are not destroyed after it, which PJRT does not allow)."""

    def __init__(self, plugin: Plugin):
        self.plugin = plugin
        self.handle: int | None = None
        create = _new(_ClientCreateArgs)
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
        self._buffer_from_host_buffer = plugin.function("Client_BufferFromHostBuffer")
        self._buffer_to_host_buffer = plugin.function("Buffer_ToHostBuffer")
        self._buffer_destroy = plugin.function("Buffer_Destroy")

    def _live_handle(self, action: str) -> int:
        if not self.handle:
            raise PjrtError(f"{action}: the {self.platform_name} PJRT client has been closed")
        return self.handle

    def compile(self, mlir_text: str) -> Executable:
        """Compile a StableHLO/MHLO module in MLIR text whose entry function is @main."""
        return self._compile(mlir_text.encode() if isinstance(mlir_text, str) else bytes(mlir_text))

    def _compile(self, code: bytes, portable: bool = False) -> Executable:
        options = _PORTABLE_COMPILE_OPTIONS if portable else COMPILE_OPTIONS
        program = _new(_Program, code=code, code_size=len(code), format=b"mlir", format_size=4)
        args = _new(_ClientCompileArgs, client=self._live_handle("compile"), program=ctypes.pointer(program),
                    compile_options=options, compile_options_size=len(options))
        self.plugin.call("Client_Compile", args)
        return Executable(self, args.executable, code, portable)

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
        dims = (c_int64 * len(shape))(*shape)
        args = _ClientBufferFromHostBufferArgs(
            _ClientBufferFromHostBufferArgs.SIZE, None, self._live_handle("buffer_from_numpy"),
            _data_address(array), numpy_dtype_to_pjrt(array.dtype), dims, len(shape), None, 0,
            _IMMUTABLE_ONLY_DURING_CALL, device.handle)
        error = self._buffer_from_host_buffer(ctypes.addressof(args))
        if error:
            raise self.plugin.error("Client_BufferFromHostBuffer", error)
        buffer = Buffer(self, device, args.buffer, shape, array.dtype)
        self.plugin.await_event("Client_BufferFromHostBuffer", args.done_with_host_buffer)
        return buffer

    def close(self) -> None:
        """Destroy the PJRT client now. Idempotent."""
        handle, self.handle = self.handle, None
        if handle:
            error = self.plugin.function("Client_Destroy")(_handle_args(handle))
            if error:
                raise self.plugin.error("Client_Destroy", error)

    def __del__(self) -> None:
        try:
            if self.handle:
                self.close()
        except Exception:  # noqa: BLE001 - a destructor never raises (module globals may be gone at shutdown)
            pass

    def __repr__(self) -> str:
        state = "" if self.handle else ", closed"
        return f"Client(platform={self.platform_name!r}, devices={len(self.devices)}{state})"


# ---------------------------------------------------------------------------------------------------------------
# Buffers
class Buffer:
    """A device buffer of known shape and dtype. It keeps its client alive."""
    __slots__ = ("client", "device", "handle", "shape", "dtype", "__weakref__")

    def __init__(self, client: Client, device: Device, handle: int, shape: tuple[int, ...], dtype: np.dtype):
        self.client = client
        self.device = device
        self.handle: int | None = handle
        self.shape = shape
        self.dtype = dtype

    @property
    def is_deleted(self) -> bool:
        return not (self.handle and self.client.handle)

    def _live_handle(self, action: str) -> int:
        handle = self.handle
        if not handle:
            raise PjrtError(f"{action}: the buffer has been deleted")
        if not self.client.handle:
            raise PjrtError(f"{action}: the buffer's PJRT client has been closed")
        return handle

    def to_numpy(self) -> np.ndarray:
        """Copy the buffer into a new numpy array."""
        handle = self._live_handle("to_numpy")
        out = np.empty(self.shape, self.dtype)
        args = _BufferToHostBufferArgs(_BufferToHostBufferArgs.SIZE, None, handle, None, _data_address(out),
                                       out.nbytes)
        client = self.client
        error = client._buffer_to_host_buffer(ctypes.addressof(args))
        if error:
            raise client.plugin.error("Buffer_ToHostBuffer", error)
        client.plugin.await_event("Buffer_ToHostBuffer", args.event)
        return out

    def block_until_ready(self) -> None:
        args = _new(_BufferReadyEventArgs, buffer=self._live_handle("block_until_ready"))
        plugin = self.client.plugin
        plugin.call("Buffer_ReadyEvent", args)
        plugin.await_event("Buffer_ReadyEvent", args.event)

    def delete(self) -> None:
        """Destroy the device buffer now. Idempotent."""
        handle, self.handle = self.handle, None
        client = self.client
        if handle and client.handle:
            error = client._buffer_destroy(_handle_args(handle))
            if error:
                raise client.plugin.error("Buffer_Destroy", error)

    def __del__(self) -> None:
        try:
            if self.handle:
                self.delete()
        except Exception:  # noqa: BLE001 - a destructor never raises
            pass

    def __repr__(self) -> str:
        state = ", deleted" if self.is_deleted else ""
        return f"Buffer(shape={self.shape}, dtype={self.dtype.name}, device={self.device}{state})"


# ---------------------------------------------------------------------------------------------------------------
# Executables
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
        # The Execute args are built once and reused by every call, under the lock.
        self._lock = threading.Lock()
        self._options = _new(_ExecuteOptions)
        self._outputs = (c_void_p * max(self.num_outputs, 1))()
        self._output_lists = (_POINTER_TO_VOID_P * 1)(ctypes.cast(self._outputs, _POINTER_TO_VOID_P))
        self._call = _new(_LoadedExecutableExecuteArgs, executable=handle, options=ctypes.pointer(self._options),
                          num_devices=1, output_lists=self._output_lists)
        self._call_address = ctypes.addressof(self._call)
        self._arguments = self._allocate_arguments(8)
        self._execute = plugin.function("LoadedExecutable_Execute")
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

    def _allocate_arguments(self, capacity: int) -> Any:
        """A reused array of argument buffer handles, which the Execute args point at."""
        arguments = (c_void_p * capacity)()
        self._argument_lists = (_POINTER_TO_VOID_P * 1)(ctypes.cast(arguments, _POINTER_TO_VOID_P))
        self._call.argument_lists = self._argument_lists
        return arguments

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
            return self._run(args, specs, device, None)
        return self._portable_executable()._run(args, specs, device, device.handle)

    def _portable_executable(self) -> Executable:
        with self._lock:
            if self._portable_variant is None:
                self._portable_variant = self.client._compile(self._code, portable=True)
            return self._portable_variant

    def _run(self, args: Sequence[Buffer], specs: list[tuple[tuple[int, ...], np.dtype]], device: Device,
             execute_device: int | None) -> list[Buffer]:
        client = self.client
        if not (self.handle and client.handle):
            raise PjrtError("execute: the executable's PJRT client has been closed")
        count = len(args)
        with self._lock:
            arguments = self._arguments
            if count > len(arguments):
                arguments = self._arguments = self._allocate_arguments(count)
            for i, buffer in enumerate(args):
                if type(buffer) is not Buffer or not buffer.handle or buffer.client is not client:
                    raise self._bad_argument(i, buffer)
                arguments[i] = buffer.handle
            call = self._call
            call.num_args = count
            call.execute_device = execute_device
            error = self._execute(self._call_address)
            if error:
                raise client.plugin.error("LoadedExecutable_Execute", error)
            handles = self._outputs[:len(specs)]
        return [Buffer(client, device, handle, shape, dtype) for handle, (shape, dtype) in zip(handles, specs)]

    @staticmethod
    def _bad_argument(index: int, buffer: Any) -> Exception:
        if not isinstance(buffer, Buffer):
            return TypeError(f"execute: argument {index} is a {type(buffer).__name__}, not a Buffer")
        if not buffer.handle:
            return PjrtError(f"execute: argument {index} is a buffer that has been deleted")
        if not buffer.client.handle:
            return PjrtError(f"execute: argument {index} is a buffer whose PJRT client has been closed")
        return PjrtError(f"execute: argument {index} belongs to another PJRT client ({buffer.client!r})")

    def __del__(self) -> None:
        try:
            handle, self.handle = self.handle, None
            client = self.client
            if handle and client.handle:
                error = client.plugin.function("LoadedExecutable_Destroy")(_handle_args(handle))
                if error:
                    client.plugin.error("LoadedExecutable_Destroy", error)
        except Exception:  # noqa: BLE001 - a destructor never raises
            pass

    def __repr__(self) -> str:
        return f"Executable(num_outputs={self.num_outputs}, client={self.client!r})"


# ---------------------------------------------------------------------------------------------------------------
# Finding plugins
def _package_file(package: str, filename: str) -> str | None:
    """The path of a file in an installed package, found without importing the package itself."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(folder, filename)
        if os.path.isfile(path):
            return path
    return None


def default_plugin_path() -> str:
    """$EMBER_PJRT_PLUGIN if set, else the XLA CPU plugin of the xla-cpu-pjrt wheel."""
    path = os.environ.get("EMBER_PJRT_PLUGIN")
    if path:
        if not os.path.isfile(path):
            raise RuntimeError(f"EMBER_PJRT_PLUGIN is set to {path!r}, which is not a file")
        return path
    return cpu_plugin_path()


def cpu_plugin_path() -> str:
    """The XLA CPU plugin of the xla-cpu-pjrt wheel."""
    path = _package_file("xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt.so")
    if path is None:
        raise RuntimeError("no PJRT plugin found: `pip install xla-cpu-pjrt`, or set EMBER_PJRT_PLUGIN to the "
                           "path of a PJRT plugin .so")
    return path


def find_cuda_plugin() -> str | None:
    """The .so of an installed CUDA PJRT plugin (the jax-cuda13-pjrt or jax-cuda12-pjrt wheel), or None."""
    for package in ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12"):
        path = _package_file(package, "xla_cuda_plugin.so")
        if path is not None:
            return path
    return None
