"""Plugin: a loaded PJRT plugin (a shared library exporting GetPjrtApi) and the functions of its PJRT_Api.

The order of the function pointers in PJRT_Api follows pjrt_c_api.h (API 0.81) of the xla-cpu-pjrt wheel. A
Plugin looks its functions up by name, calls them with the address of an argument struct, turns a returned
PJRT_Error into a PjrtError that names the failing call, and awaits and destroys PJRT events. A library is
loaded, and PJRT_Plugin_Initialize run, once per process, however many Plugin objects name it."""
from __future__ import annotations

import ctypes
import itertools
import os
import threading
from typing import Any

from ember._runtime.pjrt.errors import _ERROR_CODE_NAMES, PjrtError, error_for
from ember._runtime.pjrt.structs import (ON_READY_CALLBACK, _ApiHeader, _ErrorGetCodeArgs, _ErrorMessageArgs,
                                        _EventIsReadyArgs, _EventOnReadyArgs, _handle_args, _new,
                                        _PluginInitializeArgs, _string_at, c_void_p)

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
Buffer_CopyToDevice Buffer_ToHostBuffer Buffer_IsOnCpu Buffer_ReadyEvent Buffer_UnsafePointer
Buffer_IncreaseExternalReferenceCount Buffer_DecreaseExternalReferenceCount Buffer_OpaqueDeviceMemoryDataPointer
CopyToDeviceStream_Destroy CopyToDeviceStream_AddChunk CopyToDeviceStream_TotalBytes CopyToDeviceStream_GranuleSize
CopyToDeviceStream_CurrentBytes TopologyDescription_Create TopologyDescription_Destroy
TopologyDescription_PlatformName TopologyDescription_PlatformVersion TopologyDescription_GetDeviceDescriptions
TopologyDescription_Serialize TopologyDescription_Attributes Compile Executable_OutputElementTypes
Executable_OutputDimensions Buffer_CopyToMemory Client_CreateViewOfDeviceBuffer Executable_Fingerprint
Client_TopologyDescription Executable_GetCompiledMemoryStats
""".split()

_PJRT_FUNCTION = ctypes.CFUNCTYPE(c_void_p, c_void_p)  # PJRT_Error* (*)(PJRT_..._Args*); releases the GIL
_SUPPORTED_API_MAJOR = 0


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
        return error_for(f"PJRT_{name} failed ({code_name}): {text}", f"PJRT_{name}", code_name)

    def await_event(self, name: str, event: int | None, interruptible: bool = False) -> None:
        """Wait for an event returned by PJRT_<name> and destroy it; its error is raised as PJRT_<name>'s.

        An interruptible wait lets a signal's exception (KeyboardInterrupt) through at once, where PJRT_Event_Await
        would delay it to the end of the wait (a program may run for minutes). Only for events whose caller may
        leave early without freeing what PJRT still uses (a buffer's ready event; not an upload's)."""
        if not event:
            return
        functions = self._functions
        args = _handle_args(event)
        try:
            if interruptible and not self._is_ready(event):
                error = self._await_interruptibly(event)
            else:
                error = functions["Event_Await"](args)
            if error:
                raise self.error(name, error)
        finally:
            error = functions["Event_Destroy"](args)
            if error:
                self.error("Event_Destroy", error)  # destroyed, not raised: the awaited result matters

    def _is_ready(self, event: int) -> bool:
        """Whether an event has happened (True also where the plugin cannot wait on it interruptibly)."""
        if "Event_IsReady" not in self._functions or "Event_OnReady" not in self._functions:
            return True
        args = _new(_EventIsReadyArgs, event=event)
        self.call("Event_IsReady", args)
        return bool(args.is_ready)

    def _await_interruptibly(self, event: int) -> int | None:
        """Wait for an event in short steps on a lock that its PJRT_Event_OnReady callback (on a PJRT thread)
        releases: the event's PJRT_Error* (or None). A signal's exception ends the wait; the error the callback
        brings later is then destroyed."""
        waiter = _Waiter(self._functions["Error_Destroy"])
        key = next(_waiter_keys)
        with _waiters_lock:
            _waiters[key] = waiter
        args = _new(_EventOnReadyArgs, event=event, callback=_ON_EVENT_READY, user_arg=key)
        error = self._functions["Event_OnReady"](ctypes.addressof(args))
        if error:  # (the callback will not run)
            with _waiters_lock:
                del _waiters[key]
            raise self.error("Event_OnReady", error)
        try:
            while not waiter.done.acquire(timeout=_WAIT_STEP_S):
                pass
        except BaseException:
            with _waiters_lock:
                waiter.abandoned = key in _waiters  # (else the callback ran in the meantime: its error is ours)
            if not waiter.abandoned and waiter.error:
                waiter.destroy_error(_handle_args(waiter.error))
            raise
        return waiter.error

    def __repr__(self) -> str:
        return f"Plugin({self.path!r}, api_version={self.api_version})"


class _Waiter:
    """An interruptible wait for an event (Plugin._await_interruptibly), as the OnReady callback finds it."""
    __slots__ = ("done", "error", "abandoned", "destroy_error")

    def __init__(self, destroy_error: Any):
        self.done = threading.Lock()
        self.done.acquire()  # released by the callback
        self.error: int | None = None  # the event's PJRT_Error*
        self.abandoned = False  # the waiter left (a signal): the callback destroys the error
        self.destroy_error = destroy_error  # the plugin's PJRT_Error_Destroy


def _on_event_ready(error: int | None, key: int | None) -> None:
    """The PJRT_Event_OnReady callback of every interruptible wait (one ctypes function for the whole process:
    one made per wait could be freed while it runs); key finds the wait."""
    with _waiters_lock:
        waiter = _waiters.pop(key)  # type: ignore[arg-type]
        if not waiter.abandoned:
            waiter.error = error
            waiter.done.release()
            return
    if error:
        waiter.destroy_error(_handle_args(error))


_WAIT_STEP_S = 0.1  # an interruptible wait's step: at most this late where a signal reaches another thread
_ON_EVENT_READY = ON_READY_CALLBACK(_on_event_ready)
_waiters: dict[int, _Waiter] = {}  # the interruptible waits whose callback has not run, by key
_waiter_keys = itertools.count(1)
_waiters_lock = threading.Lock()
