"""Registering ember's own XLA FFI handlers (C functions) with PJRT plugins, through the plugin's FFI extension.

A PJRT_Api carries a chain of extensions (PJRT_Extension_Base: struct_size, type, next); the FFI extension (type 5)
holds PJRT_FFI_Register_Handler, which adds a handler to the plugin's process-wide XLA FFI registry under a
custom-call target name and a platform ("Host" for the CPU plugin). A program then calls it with
`stablehlo.custom_call @name` and `api_version = 4` (ember/_hlo/ffi.py emits those). Registration is per loaded
plugin library, not per client: `attach(plugin)` (backends calls it for every client it creates) registers every
handler added so far, and `add_handlers` registers new ones with every plugin attached so far, each name once per
library. The handler families themselves (ember/_runtime/lapack.py) install their providers in ember._hlo.ffi.

The structs are declared from xla/pjrt/c/pjrt_c_api_ffi_extension.h (the CPU plugin's extension is 48 bytes: three
functions, type_id_register, user_data_add, register_handler; see _RegisterHandlerArgs for the version trap)."""
from __future__ import annotations

import ctypes
import importlib
import threading
from typing import Any, Callable, NamedTuple

import numpy as np

from ember._core import dtypes as dt
from ember._runtime.pjrt import Plugin, PjrtError
from ember._runtime.pjrt.plugin import _load_api

_EXTENSION_TYPE_FFI = 5
_EXTENSION_BASE_SIZE = 24  # size_t struct_size; enum type (padded); PJRT_Extension_Base* next
_REGISTER_HANDLER_OFFSET = _EXTENSION_BASE_SIZE + 2 * 8  # after type_id_register and user_data_add


# ---------------------------------------------------------------------------------------------------------------
# The typed XLA FFI ABI (custom-call api_version 4) as ctypes declares it, written from xla/ffi/api/c_api.h: the
# call frame a handler receives, and the head of the runtime's function table (XLA_FFI_Api). ember's handlers in
# Python (the host callbacks, ember/_runtime/callbacks.py) read frames with these; the C ones with
# ember/_runtime/ffi_api.h, and users' handlers with ember/include/ember/ffi.h (ember.ffi.include_dir()).
class ExtensionBase(ctypes.Structure):
    pass


ExtensionBase._fields_ = [("struct_size", ctypes.c_size_t), ("type", ctypes.c_int),
                          ("next", ctypes.POINTER(ExtensionBase))]


class ApiVersion(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("major_version", ctypes.c_int), ("minor_version", ctypes.c_int)]


class ErrorCreateArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("message", ctypes.c_char_p), ("errc", ctypes.c_int)]


class ErrorGetMessageArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("error", ctypes.c_void_p), ("message", ctypes.c_char_p)]


class ErrorDestroyArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("error", ctypes.c_void_p)]


ERROR_CREATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(ErrorCreateArgs))
_ERROR_GET_MESSAGE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ErrorGetMessageArgs))
_ERROR_DESTROY = ctypes.CFUNCTYPE(None, ctypes.POINTER(ErrorDestroyArgs))


class Api(ctypes.Structure):
    """The head of XLA_FFI_Api: its first three functions make, read and destroy errors."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("api_version", ApiVersion), ("internal_api", ctypes.c_void_p), ("error_create", ctypes.c_void_p),
                ("error_get_message", ctypes.c_void_p), ("error_destroy", ctypes.c_void_p)]


class Buffer(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("data", ctypes.c_void_p), ("rank", ctypes.c_int64), ("dims", ctypes.POINTER(ctypes.c_int64))]


class Args(ctypes.Structure):
    """XLA_FFI_Args (XLA_FFI_Rets has the same layout)."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p), ("size", ctypes.c_int64),
                ("types", ctypes.POINTER(ctypes.c_int)), ("args", ctypes.POINTER(ctypes.c_void_p))]


class ByteSpan(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class Scalar(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("value", ctypes.c_void_p)]


class Array(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("size", ctypes.c_size_t), ("data", ctypes.c_void_p)]


class Attrs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p), ("size", ctypes.c_int64),
                ("types", ctypes.POINTER(ctypes.c_int)), ("names", ctypes.POINTER(ctypes.POINTER(ByteSpan))),
                ("attrs", ctypes.POINTER(ctypes.c_void_p))]


class CallFrame(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.POINTER(ExtensionBase)),
                ("api", ctypes.POINTER(Api)), ("ctx", ctypes.c_void_p), ("stage", ctypes.c_int),
                ("args", Args), ("rets", Args), ("attrs", Attrs)]


class Metadata(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("api_version", ApiVersion), ("traits", ctypes.c_uint32)]


class MetadataExtension(ctypes.Structure):
    _fields_ = [("base", ExtensionBase), ("metadata", ctypes.POINTER(Metadata))]


EXTENSION_METADATA = 1
ATTR_ARRAY, ATTR_DICTIONARY, ATTR_SCALAR, ATTR_STRING = 1, 2, 3, 4
ARG_BUFFER = 1  # XLA_FFI_ArgType_BUFFER (XLA_FFI_RetType_BUFFER too)
STAGE_EXECUTE = 3
FFI_S64 = 5
FFI_TOKEN = 17
ERR_UNKNOWN = 2
# XLA_FFI_DataType (XLA's PrimitiveType numbers) -> numpy dtype
DTYPES: dict[int, np.dtype] = {
    1: np.dtype(np.bool_), 2: np.dtype(np.int8), 3: np.dtype(np.int16), 4: np.dtype(np.int32),
    5: np.dtype(np.int64), 6: np.dtype(np.uint8), 7: np.dtype(np.uint16), 8: np.dtype(np.uint32),
    9: np.dtype(np.uint64), 10: np.dtype(np.float16), 11: np.dtype(np.float32), 12: np.dtype(np.float64),
    15: np.dtype(np.complex64), 16: dt.bfloat16, 18: np.dtype(np.complex128),
    # JAX's narrow types (XLA's PrimitiveType numbers, as XLA_FFI_DataType has them); the 4- and 2-bit ones arrive
    # packed, two or four to a byte (dtypes.is_sub_byte)
    19: dt.float8_e5m2, 20: dt.float8_e4m3fn, 21: dt.int4, 22: dt.uint4, 23: dt.float8_e4m3b11fnuz,
    24: dt.float8_e5m2fnuz, 25: dt.float8_e4m3fnuz, 26: dt.int2, 27: dt.uint2, 28: dt.float8_e4m3, 29: dt.float8_e3m4,
    32: dt.float4_e2m1fn, 33: dt.float8_e8m0fnu,
}

HANDLER_TYPE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(CallFrame))
_METADATA_SIZE = Metadata.traits.offset + ctypes.sizeof(ctypes.c_uint32)  # (XLA's struct size: no tail padding)


class _RegisterHandlerArgs(ctypes.Structure):
    """PJRT_FFI_Register_Handler_Args as the CPU plugin (PJRT 0.81) reads it: no extension_start, and no
    api_version (a later header adds `int api_version` before handler; sending that layout to this plugin makes
    it read the handler address as the platform name's length: std::bad_alloc, the process aborts). The plugin
    takes typed FFI handlers (XLA_FFI_Handler*) only."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("target_name", ctypes.c_char_p),
                ("target_name_size", ctypes.c_size_t), ("handler", ctypes.c_void_p),
                ("platform_name", ctypes.c_char_p), ("platform_name_size", ctypes.c_size_t),
                ("traits", ctypes.c_int)]


_REGISTER_HANDLER = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(_RegisterHandlerArgs))


def ffi_extension(plugin: Plugin) -> int | None:
    """The address of the plugin's PJRT_FFI_Extension, or None when it offers none."""
    _, api = _load_api(plugin.path)
    ext = ctypes.c_void_p.from_address(api + ctypes.sizeof(ctypes.c_size_t)).value  # PJRT_Api.extension_start
    while ext:
        if ctypes.c_int.from_address(ext + ctypes.sizeof(ctypes.c_size_t)).value == _EXTENSION_TYPE_FFI:
            return ext
        ext = ctypes.c_void_p.from_address(ext + 16).value
    return None


def register_handler(plugin: Plugin, name: str, handler: int, platform: str = "Host") -> None:
    """Register a typed XLA FFI handler (an XLA_FFI_Handler*, as an address) under the custom-call target name."""
    ext = ffi_extension(plugin)
    if ext is None:
        raise PjrtError(f"the PJRT plugin {plugin.path} has no FFI extension: cannot register the custom-call "
                        f"handler {name!r}")
    if ctypes.c_size_t.from_address(ext).value < _REGISTER_HANDLER_OFFSET + 8:
        raise PjrtError(f"the FFI extension of the PJRT plugin {plugin.path} predates PJRT_FFI_Register_Handler")
    function = ctypes.c_void_p.from_address(ext + _REGISTER_HANDLER_OFFSET).value
    if not function:
        raise PjrtError(f"the FFI extension of the PJRT plugin {plugin.path} has no PJRT_FFI_Register_Handler")
    target, platform_bytes = name.encode(), platform.encode()
    args = _RegisterHandlerArgs(ctypes.sizeof(_RegisterHandlerArgs), target, len(target), handler,
                                platform_bytes, len(platform_bytes), 0)
    error = _REGISTER_HANDLER(function)(ctypes.byref(args))
    if error:
        raise plugin.error("FFI_Register_Handler", error)


_handlers: dict[str, int] = {}  # every handler added: target name -> handler address
_plugins: dict[int, Plugin] = {}  # the attached plugins, by PJRT_Api address
_registered: dict[int, set[str]] = {}  # PJRT_Api address -> the names registered with it
_lock = threading.Lock()


def _register_pending(api: int, plugin: Plugin) -> None:
    done = _registered.setdefault(api, set())
    for name, handler in _handlers.items():
        if name not in done:
            register_handler(plugin, name, handler)
            done.add(name)


def attach(plugin: Plugin) -> None:
    """Register every handler added so far with the plugin, and the later ones as they are added (a plugin
    without the FFI extension is left alone: a program calling one of ember's handlers fails to compile there)."""
    if ffi_extension(plugin) is None:
        return
    _, api = _load_api(plugin.path)
    with _lock:
        _plugins.setdefault(api, plugin)
        _register_pending(api, plugin)


def add_handlers(handlers: dict[str, int]) -> None:
    """Add handlers ({target name: XLA_FFI_Handler* address}) and register them with every attached plugin."""
    with _lock:
        for name, handler in handlers.items():
            if _handlers.setdefault(name, handler) != handler:
                raise ValueError(f"ffi.add_handlers: the custom-call target {name!r} already has another handler")
        for api, plugin in _plugins.items():
            _register_pending(api, plugin)


def registered(plugin: Plugin) -> frozenset[str]:
    """The names of ember's handlers registered with the plugin."""
    _, api = _load_api(plugin.path)
    with _lock:
        return frozenset(_registered.get(api, ()))


def extension_provider(module: str, unusable: str) -> tuple[Callable[[], frozenset[str]], Callable[[], str]]:
    """(provide, reason) for a family of handlers in an optional C extension `module` whose handlers() returns
    {target name: handler address}, or an empty dict where they cannot run on this machine (`unusable` says why):
    provide() imports and registers them on first use and returns their names (empty when the extension is not
    built); reason() says why they are unavailable ("" when they are)."""
    loaded: list[frozenset[str]] = []

    def provide() -> frozenset[str]:
        if not loaded:
            try:
                extension = importlib.import_module(module)  # (optional: it may not be built)
            except ImportError:
                loaded.append(frozenset())
            else:
                handlers = extension.handlers()
                add_handlers(handlers)
                loaded.append(frozenset(handlers))
        return loaded[0]

    def reason() -> str:
        if provide():
            return ""
        try:
            importlib.import_module(module)
        except ImportError:
            return f"ember's C extension {module} is not built (python3 setup.py build_ext --inplace)"
        return unusable

    return provide, reason


# ---------------------------------------------------------------------------------------------------------------
# Users' handlers (ember.ffi.register_ffi_target). XLA asks a handler, when it is registered, which FFI API version
# it was built for (the metadata query: a call frame carrying the metadata extension) and silently drops one newer
# than its own, or older than it supports: a compile calling it then fails with "No FFI handler registered". ember
# asks first and refuses such a handler with the versions in the message. The question needs the runtime's own
# XLA_FFI_Api (a handler makes its errors with it, and reads its version); no plugin exports it, so ember registers
# a probe handler of its own once per plugin, which the plugin's metadata query hands the table and its version.
MIN_HANDLER_MINOR = 1  # (measured on the CPU plugin, FFI API 0.2: it drops a handler reporting 0.0, takes 0.1, 0.2)
PROBE_TARGET = "ember_ffi_probe"


class FfiApi(NamedTuple):
    """A plugin's XLA FFI function table (its address) and the FFI API version it implements."""
    address: int
    version: tuple[int, int]


class HandlerMetadata(NamedTuple):
    """What a handler answers to the metadata query: the FFI API version it was built for, and its traits."""
    version: tuple[int, int]
    traits: int


_apis: dict[int, FfiApi] = {}  # PJRT_Api address -> its FFI table
_probes: list[Any] = []  # (the probe handlers: XLA keeps their addresses)


def plugin_ffi_api(plugin: Plugin) -> FfiApi:
    """The plugin's XLA FFI function table and version, learnt from the metadata query of a probe handler that this
    registers with it (once per plugin; the probe fails any call that executes it)."""
    _, pjrt_api = _load_api(plugin.path)
    with _lock:
        found = _apis.get(pjrt_api)
    if found is not None:
        return found
    seen: list[FfiApi] = []

    def probe(frame_pointer: Any) -> int:
        frame = frame_pointer.contents
        api = frame.api.contents
        if frame.extension_start and frame.extension_start.contents.type == EXTENSION_METADATA:
            metadata = ctypes.cast(frame.extension_start, ctypes.POINTER(MetadataExtension)).contents.metadata
            version = (api.api_version.major_version, api.api_version.minor_version)
            metadata.contents.api_version.major_version, metadata.contents.api_version.minor_version = version
            metadata.contents.traits = 0
            seen.append(FfiApi(ctypes.cast(frame.api, ctypes.c_void_p).value or 0, version))
            return 0
        message = f"{PROBE_TARGET} is ember's probe of the FFI API version, not a kernel".encode()
        args = ErrorCreateArgs(ctypes.sizeof(ErrorCreateArgs), None, message, ERR_UNKNOWN)
        return ERROR_CREATE(api.error_create)(ctypes.byref(args)) or 0

    handler = HANDLER_TYPE(probe)
    with _lock:
        if pjrt_api in _apis:
            return _apis[pjrt_api]
        _probes.append(handler)
        register_handler(plugin, PROBE_TARGET, ctypes.cast(handler, ctypes.c_void_p).value or 0)
        if not seen or not seen[-1].address:
            raise PjrtError(f"the PJRT plugin {plugin.path} did not ask its FFI handlers which API version they "
                            "speak: ember cannot check a handler against it")
        _apis[pjrt_api] = seen[-1]
        return seen[-1]


def _error_message(api: FfiApi, error: int) -> str:
    """The message of an XLA_FFI_Error a handler returned, which this destroys."""
    table = Api.from_address(api.address)
    got = ErrorGetMessageArgs(ctypes.sizeof(ErrorGetMessageArgs), None, error, None)
    _ERROR_GET_MESSAGE(table.error_get_message)(ctypes.byref(got))
    message = (got.message or b"").decode("utf-8", "replace")
    gone = ErrorDestroyArgs(ctypes.sizeof(ErrorDestroyArgs), None, error)
    _ERROR_DESTROY(table.error_destroy)(ctypes.byref(gone))
    return message


def handler_metadata(api: FfiApi, handler: int) -> HandlerMetadata:
    """Ask a handler (an XLA_FFI_Handler* address) the metadata query XLA asks at registration: a call frame of no
    operands, results or attributes whose extension is the metadata one, with the plugin's own function table.
    A handler that returns an error is a ValueError with its message; one that does not answer reports 0.0."""
    room = (ctypes.c_char * 64)()  # (more than XLA_FFI_Metadata: a handler built for a later API may write more)
    metadata = Metadata.from_buffer(room)
    metadata.struct_size = _METADATA_SIZE
    extension = MetadataExtension(ExtensionBase(ctypes.sizeof(MetadataExtension), EXTENSION_METADATA, None),
                                  ctypes.pointer(metadata))
    empty = Args(ctypes.sizeof(Args), None, 0, None, None)
    frame = CallFrame(ctypes.sizeof(CallFrame), ctypes.cast(ctypes.pointer(extension), ctypes.POINTER(ExtensionBase)),
                      ctypes.cast(api.address, ctypes.POINTER(Api)), None, STAGE_EXECUTE, empty,
                      Args(ctypes.sizeof(Args), None, 0, None, None),
                      Attrs(ctypes.sizeof(Attrs), None, 0, None, None, None))
    error = HANDLER_TYPE(handler)(ctypes.byref(frame))
    if error:
        raise ValueError(f"the FFI handler returned an error to the metadata query XLA makes when it registers a "
                         f"handler: {_error_message(api, error)}")
    version = metadata.api_version
    return HandlerMetadata((version.major_version, version.minor_version), int(metadata.traits))


def check_handler_version(api: FfiApi, found: HandlerMetadata, name: str) -> None:
    """Refuse (ValueError) a handler whose FFI API version the plugin would drop: another major version, a minor
    one above the plugin's own, or below MIN_HANDLER_MINOR (0.0: the handler did not answer the query)."""
    major, minor = api.version
    got = found.version
    if got[0] == major and MIN_HANDLER_MINOR <= got[1] <= minor:
        return
    accepts = f"{major}.{MIN_HANDLER_MINOR} to {major}.{minor}"
    if got == (0, 0):
        why = ("it did not answer the metadata query (a handler must set the API version it was built for when its "
               "call frame carries the metadata extension: ember_ffi_answer_metadata in ember/ffi.h)")
    elif got[0] == major and got[1] > minor:
        why = (f"it was built for XLA FFI API {got[0]}.{got[1]}, newer than the plugin's (XLA's headers of a later "
               "jaxlib); rebuild it with ember's header, ember.ffi.include_dir()'s ember/ffi.h, or XLA FFI headers "
               f"of API {major}.{minor} at most")
    else:
        why = f"it reports XLA FFI API {got[0]}.{got[1]}"
    raise ValueError(f"register_ffi_target: the handler of {name!r} cannot be registered with this PJRT plugin, "
                     f"which accepts handlers of XLA FFI API {accepts}: {why}")


__all__ = ["Api", "ApiVersion", "Args", "Array", "Attrs", "Buffer", "ByteSpan", "CallFrame", "DTYPES", "ERROR_CREATE",
           "ErrorCreateArgs", "ExtensionBase", "FfiApi", "HANDLER_TYPE", "HandlerMetadata", "MIN_HANDLER_MINOR",
           "Metadata", "MetadataExtension", "PROBE_TARGET", "Scalar", "add_handlers", "attach", "check_handler_version",
           "extension_provider", "ffi_extension", "handler_metadata", "plugin_ffi_api", "register_handler",
           "registered"]
