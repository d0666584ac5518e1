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
from typing import Callable

from ember._runtime.pjrt import Plugin, PjrtError
from ember._runtime.pjrt.plugin import _load_api

_EXTENSION_TYPE_FFI = 5
_EXTENSION_BASE_SIZE = 24  # size_t struct_size; enum type (padded); PJRT_Extension_Base* next
_REGISTER_HANDLER_OFFSET = _EXTENSION_BASE_SIZE + 2 * 8  # after type_id_register and user_data_add


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


__all__ = ["add_handlers", "attach", "extension_provider", "ffi_extension", "register_handler", "registered"]
