"""Buffer: a device buffer of known shape and dtype, which copies back to numpy, waits until ready, and deletes.

Buffers come from Client.buffer_from_numpy and Executable.execute. A Buffer keeps its client alive and refuses
to be used once deleted or once its client is closed; the PJRT functions it calls most are looked up once, by
the client."""
from __future__ import annotations

import ctypes
import math
import os
import threading
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ember._runtime.fastpath import C
from ember._runtime.pjrt.device import Device
from ember._runtime.pjrt.errors import PjrtError
from ember._runtime.pjrt.structs import (PACKED_ON_DEVICE, _BufferOpaqueDeviceMemoryDataPointerArgs,
                                        _BufferReadyEventArgs, _BufferToHostBufferArgs, _BufferUnsafePointerArgs,
                                        _data_address, _handle_args, _new, check_struct_layouts)

if TYPE_CHECKING:
    from ember._runtime.pjrt.client import Client  # (a type only: client.py imports this module)


# Buffers in use by a PJRT call are pinned: delete() from another thread then only marks them deleted, and the
# end of the last call using them destroys them. A buffer's lifetime state is its handle (None once deleted),
# _pins and _doomed (the handle of a buffer deleted while pinned), and it changes only through the transitions
# below: pin, unpin, take_handle (delete), pin_all, unpin_all. With the C extension (ember._runtime.fastpath)
# they are its functions, each atomic under the GIL (the argument is written at the top of _fastpath.c). In
# pure Python one lock guards every buffer's state; it is held for bookkeeping only, never across a PJRT call.
# It is reentrant: a garbage collection while it is held may run Buffer.__del__ -> delete(). A forked child gets
# a new one (a thread of the parent may have held it).
_lifetime_lock = threading.RLock()


def _new_lock_after_fork() -> None:
    global _lifetime_lock
    _lifetime_lock = threading.RLock()


os.register_at_fork(after_in_child=_new_lock_after_fork)


def _py_pin(buffer: Buffer) -> int | None:
    """Pin a buffer for a PJRT call (until unpin): its handle, or None when it has been deleted."""
    with _lifetime_lock:
        handle = buffer.handle
        if handle:
            buffer._pins += 1
            return handle
    return None


def _py_unpin(buffer: Buffer) -> None:
    """End a pin; a buffer deleted while pinned is destroyed by the end of its last pin (exactly once)."""
    with _lifetime_lock:
        buffer._pins -= 1
        handle = buffer._doomed if not buffer._pins else None
        if handle is not None:
            buffer._doomed = None
    if handle is not None:
        buffer._destroy(handle)


def _py_take_handle(buffer: Buffer) -> int | None:
    """Mark a buffer deleted (idempotent): the handle to destroy now, or None (already deleted, or pinned: then
    the end of its last pin destroys it)."""
    with _lifetime_lock:
        handle, buffer.handle = buffer.handle, None
        if handle and buffer._pins:
            buffer._doomed, handle = handle, None
    return handle or None


def _py_pin_all(buffers: Sequence[Buffer], client: Client, handles: Any) -> int:
    """Pin each of buffers and write its handle into handles (a ctypes array): -1, or the index of the first that
    is not a live Buffer of client (then none is left pinned)."""
    with _lifetime_lock:
        for i, buffer in enumerate(buffers):
            if type(buffer) is not Buffer or not buffer.handle or buffer.client is not client:
                for taken in buffers[:i]:
                    taken._pins -= 1
                return i
            buffer._pins += 1
            handles[i] = buffer.handle
    return -1


def _py_unpin_all(buffers: Sequence[Buffer]) -> None:
    """End a pin of each of buffers (pinned by pin_all), destroying those deleted meanwhile as unpin does."""
    doomed = False
    with _lifetime_lock:
        for buffer in buffers:
            buffer._pins -= 1
            doomed = doomed or buffer._doomed is not None
    if doomed:  # buffers deleted by another thread during the call: destroy them now
        for buffer in buffers:
            with _lifetime_lock:
                handle = buffer._doomed if not buffer._pins else None
                if handle is not None:
                    buffer._doomed = None
            if handle is not None:
                buffer._destroy(handle)


# The client is pinned too, around each PJRT call that runs without the GIL (ctypes releases it; the C extension
# around execute, uploads and awaits): close() marks it closed, then waits until no pin is left before destroying
# it (the exit handler closes clients while daemon threads may still execute). The client's pins are counted in
# client._uses here, in its Api (client._fast.uses) with the C extension.
def _py_pin_client(client: Client) -> int | None:
    """Pin a client for a PJRT call (until unpin_client): its handle, or None when it is closed."""
    with _lifetime_lock:
        handle = client.handle
        if handle:
            client._uses += 1
            return handle
    return None


def _py_unpin_client(client: Client) -> None:
    with _lifetime_lock:
        client._uses -= 1


def _pin_open_client(client: Client, action: str) -> None:
    """pin_client, raising why when the client is closed."""
    if pin_client(client) is None:
        raise PjrtError(f"{action}: the buffer's PJRT client {client.closed_reason}")


def take_client_handle(client: Client) -> int | None:
    """Mark a client closed: the handle to destroy once no pin of it is left (see Client.close), or None."""
    with _lifetime_lock:
        handle, client.handle = client.handle, None
    return handle


def _py_block_until_ready(buffer: Buffer) -> bool:
    """Wait until the buffer is ready (True); raise why when it cannot be used."""
    client = buffer.client
    args = _new(_BufferReadyEventArgs, buffer=buffer._pin("block_until_ready"))
    try:
        _pin_open_client(client, "block_until_ready")
        try:
            client.plugin.call("Buffer_ReadyEvent", args)
            client.plugin.await_event("Buffer_ReadyEvent", args.event, interruptible=True)
        finally:
            unpin_client(client)
    finally:
        unpin(buffer)
    return True


class _HostMemory:
    """The memory of a pinned buffer as seen by numpy (the base of a host view): unpins the buffer when the last
    view of it dies."""
    __slots__ = ("buffer", "__array_interface__")

    def __init__(self, buffer: Buffer, address: int):
        self.buffer = buffer
        self.__array_interface__ = {"shape": buffer.shape, "typestr": buffer.dtype.str, "version": 3,
                                    "data": (address, True)}  # read-only

    def __del__(self) -> None:
        try:
            self.buffer._unpin()
        except Exception:  # noqa: BLE001 - a destructor never raises
            pass


class Buffer:
    """A device buffer of known shape and dtype. It keeps its client alive. Deleting it while another thread's
    PJRT call uses it is safe: the buffer counts as deleted at once and is destroyed when that call ends."""
    __slots__ = ("client", "device", "handle", "shape", "dtype", "_pins", "_doomed", "__weakref__")

    def __init__(self, client: Client, device: Device, handle: int, shape: tuple[int, ...], dtype: np.dtype):
        self.client = client
        self.device = device
        self.handle: int | None = handle
        self.shape = shape
        self.dtype = dtype
        self._pins = 0
        self._doomed: int | None = None  # the handle of a buffer deleted while pinned

    @property
    def is_deleted(self) -> bool:
        return not (self.handle and self.client.handle)

    def _live_handle(self, action: str) -> int:
        handle = self.handle
        if not handle:
            raise PjrtError(f"{action}: the buffer has been deleted")
        if not self.client.handle:
            raise PjrtError(f"{action}: the buffer's PJRT client {self.client.closed_reason}")
        return handle

    def _pin(self, action: str) -> int:
        """Pin this buffer for a PJRT call (until _unpin) and return its handle."""
        if self.client.handle:
            handle = pin(self)
            if handle is not None:
                return handle
        self._live_handle(action)  # raises the reason
        raise PjrtError(f"{action}: the buffer has been deleted")

    def _unpin(self) -> None:
        unpin(self)

    def unsafe_pointer(self) -> int:
        """The address of the buffer's data on its device (PJRT_Buffer_UnsafePointer): valid while the buffer
        lives, compared by code that checks where data is (a donated argument's buffer reused for a result)."""
        handle = self._pin("unsafe_buffer_pointer")
        try:
            args = _new(_BufferUnsafePointerArgs, buffer=handle)
            self.client.plugin.call("Buffer_UnsafePointer", args)
            return int(args.buffer_pointer)
        finally:
            self._unpin()

    def to_numpy(self) -> np.ndarray:
        """Copy the buffer into a new numpy array."""
        handle = self._pin("to_numpy")
        client = self.client
        try:
            self.block_until_ready()  # (interruptible; the copy's wait is not: PJRT writes into `out` until it ends)
            _pin_open_client(client, "to_numpy")
            try:
                out = np.empty(self.shape, self.dtype)
                args = _BufferToHostBufferArgs(_BufferToHostBufferArgs.SIZE, None, handle, None, _data_address(out),
                                               out.nbytes)
                error = client._buffer_to_host_buffer(ctypes.addressof(args))
                if error:
                    raise client.plugin.error("Buffer_ToHostBuffer", error)
                client.plugin.await_event("Buffer_ToHostBuffer", args.event)
            finally:
                unpin_client(client)
        finally:
            self._unpin()
        return out

    def host_view(self) -> np.ndarray | None:
        """A read-only numpy array that shares the buffer's memory (no copy), once the buffer is ready; None where
        the memory is not the host's (a GPU plugin) or cannot be shared (empty, or packed: 4- and 2-bit types). The
        view pins the buffer: a delete() while the view lives destroys the buffer when the view dies."""
        client = self.client
        if not client.host_memory or 0 in self.shape or self.dtype in PACKED_ON_DEVICE:
            return None
        self.block_until_ready()
        if C is not None:
            memory = C.host_memory(self, self.dtype.itemsize * math.prod(self.shape))
            if memory is None:
                return None
            return np.frombuffer(memory, self.dtype).reshape(self.shape)
        handle = self._pin("host_view")
        try:
            args = _new(_BufferUnsafePointerArgs, buffer=handle)
            client.plugin.call("Buffer_UnsafePointer", args)
            address = args.buffer_pointer
        except BaseException:
            self._unpin()
            raise
        if not address:
            self._unpin()
            return None
        memory = _HostMemory(self, address)
        if self.dtype.kind == "V":  # ml_dtypes' types (bfloat16) have no array-interface code: view their bytes
            memory.__array_interface__.update(shape=(self.dtype.itemsize * int(np.prod(self.shape)),), typestr="|u1")
            return np.asarray(memory).view(self.dtype).reshape(self.shape)
        return np.asarray(memory)

    def share_memory(self, action: str) -> tuple[int, int, bool]:
        """Lend the buffer's memory to another framework (a DLPack export): wait until the buffer is ready, pin it
        (a delete() meanwhile leaves its destruction to unshare_memory), raise its PJRT external reference count
        (PJRT then neither frees, moves nor reuses the memory) and return (handle, address of the memory, whether
        the count was raised). Each call is ended by one unshare_memory(handle, counted). The address is the
        device's: the host's only where client.host_memory."""
        self.block_until_ready()
        handle = self._pin(action)
        plugin = self.client.plugin
        counted = False
        try:
            if plugin.has_function("Buffer_IncreaseExternalReferenceCount"):
                error = plugin.function("Buffer_IncreaseExternalReferenceCount")(_handle_args(handle))
                if error:
                    raise plugin.error("Buffer_IncreaseExternalReferenceCount", error)
                counted = True
            if counted and plugin.has_function("Buffer_OpaqueDeviceMemoryDataPointer"):
                opaque = _new(_BufferOpaqueDeviceMemoryDataPointerArgs, buffer=handle)
                plugin.call("Buffer_OpaqueDeviceMemoryDataPointer", opaque)
                address = opaque.device_memory_ptr or 0
            else:
                unsafe = _new(_BufferUnsafePointerArgs, buffer=handle)
                plugin.call("Buffer_UnsafePointer", unsafe)
                address = unsafe.buffer_pointer
        except BaseException:
            self.unshare_memory(handle, counted)
            raise
        return handle, address, counted

    def unshare_memory(self, handle: int, counted: bool) -> None:
        """End a share_memory: lower the external reference count, then unpin (destroying the buffer if it was
        deleted meanwhile). With the client closed (at interpreter exit) PJRT is not called: nothing is destroyed
        after the client. Never raises a PJRT error (it runs in DLPack deleters)."""
        client = self.client
        if counted and client.handle:
            plugin = client.plugin
            error = plugin.function("Buffer_DecreaseExternalReferenceCount")(_handle_args(handle))
            if error:
                plugin.error("Buffer_DecreaseExternalReferenceCount", error)  # destroyed, not raised
        try:
            self._unpin()
        except PjrtError:  # (a failed Buffer_Destroy of a buffer deleted meanwhile: nothing to report to)
            pass

    def block_until_ready(self) -> None:
        if not _block_until_ready(self):  # (the C one: False when the buffer cannot be used)
            _py_block_until_ready(self)  # raises why

    def delete(self) -> None:
        """Destroy the device buffer (at once, or when the PJRT calls using it end). Idempotent."""
        handle = take_handle(self)
        if handle:
            self._destroy(handle)

    def _destroy(self, handle: int) -> None:
        client = self.client
        if pin_client(client) is None:  # closed: nothing is destroyed after the client
            return
        try:
            error = client._buffer_destroy(_handle_args(handle))
        finally:
            unpin_client(client)
        if error:
            raise client.plugin.error("Buffer_Destroy", error)

    def __del__(self) -> None:
        try:
            if self.handle:
                self.delete()
        except Exception:  # noqa: BLE001 - a destructor never raises
            pass
    # (with the C extension, __del__ is replaced below by its equivalent in C)

    def __repr__(self) -> str:
        state = ", deleted" if self.is_deleted else ""
        return f"Buffer(shape={self.shape}, dtype={self.dtype.name}, device={self.device}{state})"


# The lifetime transitions and block_until_ready: the C extension's when it is in use (see fastpath.py).
if C is not None:
    check_struct_layouts(C.struct_layouts(), "the C extension ember._runtime._fastpath")
    # Its functions create Buffers without __init__ (setting every slot at its offset): __slots__ is checked.
    C.register_buffer_type(Buffer)
    pin, unpin, take_handle = C.pin, C.unpin, C.take_handle
    pin_all, unpin_all = C.pin_all, C.unpin_all
    pin_client, unpin_client = C.pin_client, C.unpin_client
    _block_until_ready = C.block_until_ready
    Buffer.__del__ = C.buffer_finalizer()  # type: ignore[method-assign]
else:
    pin, unpin, take_handle = _py_pin, _py_unpin, _py_take_handle
    pin_all, unpin_all = _py_pin_all, _py_unpin_all
    pin_client, unpin_client = _py_pin_client, _py_unpin_client
    _block_until_ready = _py_block_until_ready
