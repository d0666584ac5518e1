"""The key-value store callbacks of PJRT_Client_Create: how a plugin whose client spans several processes (a CUDA
plugin given the create options node_id and num_nodes) exchanges its topology and collective ids with the others.

The caller of PJRT_Client_Create passes three C callbacks (kv_get, kv_try_get, kv_put) and a user argument for
each; the plugin calls them from any of its threads, for as long as the client lives. Here they are three ctypes
functions made once for the process, which forward to a Python store registered under a number (the user
argument). A store is any object with

    get(key: bytes, timeout_s: float) -> bytes     waits for the key; raises TimeoutError after timeout_s
    try_get(key: bytes) -> bytes | None            None when the key is absent
    put(key: bytes, value: bytes) -> None

Its failures go back to the plugin as PJRT errors made by the plugin's own callback_error function: TimeoutError
as DEADLINE_EXCEEDED, an absent key as NOT_FOUND, a lost connection (OSError, EOFError) as UNAVAILABLE, anything
else as INTERNAL (an exception never crosses into C: ctypes would report success with an unset value). A value
handed to the plugin stays alive until the plugin calls the value deleter it was given.

The xla-cpu-pjrt plugin never calls these callbacks (it reads no create option but cpu_device_count); see
docs/distributed.md."""
from __future__ import annotations

import ctypes
import itertools
import threading
from typing import Any, Protocol

from ember._runtime.pjrt.structs import _args_type, c_char_p, c_int, c_size_t, c_void_p


class KeyValueStore(Protocol):
    def get(self, key: bytes, timeout_s: float) -> bytes: ...

    def try_get(self, key: bytes) -> bytes | None: ...

    def put(self, key: bytes, value: bytes) -> None: ...


# PJRT_Error* (*PJRT_CallbackError)(PJRT_Error_Code code, const char* message, size_t message_size): the plugin's
# function that makes a PJRT_Error for a callback to return (the args hold a pointer to it)
CALLBACK_ERROR = ctypes.CFUNCTYPE(c_void_p, c_int, c_char_p, c_size_t)
# PJRT_Error* (*)(PJRT_KeyValue*Callback_Args*): the three callbacks
KV_CALLBACK = ctypes.CFUNCTYPE(c_void_p, c_void_p)
# void (*)(char* value): the deleter of a value returned by kv_get / kv_try_get
VALUE_DELETER = ctypes.CFUNCTYPE(None, c_void_p)

_KeyValueGetArgs = _args_type("PJRT_KeyValueGetCallback_Args", [
    ("key", c_void_p), ("key_size", c_size_t), ("timeout_in_ms", c_int),
    ("callback_error", ctypes.POINTER(CALLBACK_ERROR)), ("user_arg", c_void_p),
    ("value", c_void_p), ("value_size", c_size_t), ("value_deleter_callback", VALUE_DELETER)])
_KeyValueTryGetArgs = _args_type("PJRT_KeyValueTryGetCallback_Args", [
    ("key", c_void_p), ("key_size", c_size_t),
    ("callback_error", ctypes.POINTER(CALLBACK_ERROR)), ("user_arg", c_void_p),
    ("value", c_void_p), ("value_size", c_size_t), ("value_deleter_callback", VALUE_DELETER)])
_KeyValuePutArgs = _args_type("PJRT_KeyValuePutCallback_Args", [
    ("key", c_void_p), ("key_size", c_size_t), ("value", c_void_p), ("value_size", c_size_t),
    ("callback_error", ctypes.POINTER(CALLBACK_ERROR)), ("user_arg", c_void_p)])

# enum PJRT_Error_Code values used here
_CANCELLED, _DEADLINE_EXCEEDED, _NOT_FOUND, _INTERNAL, _UNAVAILABLE = 1, 4, 5, 13, 14

_stores: dict[int, KeyValueStore] = {}  # user argument -> store
_store_numbers = itertools.count(1)
_values: dict[int, ctypes.Array] = {}  # address -> a value the plugin has not released yet
_lock = threading.Lock()


def register(store: KeyValueStore) -> dict[str, int]:
    """The kv_* fields of PJRT_Client_Create_Args that make a plugin use store (the callbacks' addresses and
    store's number as each user argument); store stays registered until unregister(that number)."""
    with _lock:
        number = next(_store_numbers)
        _stores[number] = store
    return {"kv_get_callback": _address(_GET), "kv_get_user_arg": number,
            "kv_try_get_callback": _address(_TRY_GET), "kv_try_get_user_arg": number,
            "kv_put_callback": _address(_PUT), "kv_put_user_arg": number}


def unregister(number: int) -> None:
    """Forget a registered store (once the client that uses it is destroyed); later calls for it fail."""
    with _lock:
        _stores.pop(number, None)


def _address(function: Any) -> int:
    return ctypes.cast(function, c_void_p).value  # type: ignore[return-value]


def _error(args: Any, code: int, message: str) -> int | None:
    """A PJRT_Error made by the plugin's callback_error function."""
    text = message.encode("utf-8", "replace")
    return args.callback_error[0](code, text, len(text))


def _answer(args: Any, read: Any) -> int | None:
    """Run read(store, key) for a get-like callback: hand its value to the plugin, or return its failure."""
    try:
        key = ctypes.string_at(args.key, args.key_size)
        store = _stores.get(args.user_arg or 0)
        if store is None:
            return _error(args, _INTERNAL, "the key-value store of this PJRT client is no longer registered")
        value = read(store, key)
        if value is None:
            return _error(args, _NOT_FOUND, f"key {key!r} not found in the key-value store")
        data = bytes(value)
        buffer = ctypes.create_string_buffer(data, max(len(data), 1))
        address = ctypes.addressof(buffer)
        with _lock:
            _values[address] = buffer
        args.value, args.value_size, args.value_deleter_callback = address, len(data), _DELETE_VALUE
        return None
    except BaseException as err:  # noqa: BLE001 - nothing may cross into C (see the module docstring)
        return _failure(args, err)


def _failure(args: Any, err: BaseException) -> int | None:
    if isinstance(err, TimeoutError):
        code = _DEADLINE_EXCEEDED
    elif isinstance(err, (OSError, EOFError)):
        code = _UNAVAILABLE
    elif isinstance(err, (KeyboardInterrupt, SystemExit)):
        code = _CANCELLED
    else:
        code = _INTERNAL
    return _error(args, code, f"key-value store: {type(err).__name__}: {err}")


def _get(address: int) -> int | None:
    args = _KeyValueGetArgs.from_address(address)
    timeout_s = max(args.timeout_in_ms, 0) / 1000
    return _answer(args, lambda store, key: store.get(key, timeout_s))


def _try_get(address: int) -> int | None:
    return _answer(_KeyValueTryGetArgs.from_address(address), lambda store, key: store.try_get(key))


def _put(address: int) -> int | None:
    args = _KeyValuePutArgs.from_address(address)
    try:
        store = _stores.get(args.user_arg or 0)
        if store is None:
            return _error(args, _INTERNAL, "the key-value store of this PJRT client is no longer registered")
        store.put(ctypes.string_at(args.key, args.key_size), ctypes.string_at(args.value, args.value_size))
        return None
    except BaseException as err:  # noqa: BLE001 - nothing may cross into C
        return _failure(args, err)


def _delete_value(address: int | None) -> None:
    with _lock:
        _values.pop(address or 0, None)


# One ctypes function each for the whole process (one made per client could be freed while a plugin thread runs it)
_GET, _TRY_GET, _PUT = KV_CALLBACK(_get), KV_CALLBACK(_try_get), KV_CALLBACK(_put)
_DELETE_VALUE = VALUE_DELETER(_delete_value)
