"""Buffer: a device buffer of known shape and dtype, which copies back to numpy, waits until ready, and deletes.

Buffers come from Client.buffer_from_numpy and Executable.execute. A Buffer keeps its client alive and refuses
to be used once deleted or once its client is closed; the PJRT functions it calls most are looked up once, by
the client."""
from __future__ import annotations

import ctypes
import os
import threading
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ember._runtime.pjrt.errors import PjrtError
from ember._runtime.pjrt.structs import (_BufferReadyEventArgs, _BufferToHostBufferArgs, _BufferUnsafePointerArgs,
                                        _data_address, _handle_args, _new)

if TYPE_CHECKING:
    from ember._runtime.pjrt.client import Client
    from ember._runtime.pjrt.device import Device


# Buffers in use by a PJRT call are pinned: delete() from another thread then only marks them deleted, and the
# end of the last call using them destroys them. One lock guards every buffer's pin count; it is held for
# bookkeeping only, never across a PJRT call. It is reentrant: a garbage collection while it is held may run
# Buffer.__del__ -> delete(). A forked child gets a new one (a thread of the parent may have held it).
_lifetime_lock = threading.RLock()


def _new_lock_after_fork() -> None:
    global _lifetime_lock
    _lifetime_lock = threading.RLock()


os.register_at_fork(after_in_child=_new_lock_after_fork)


def destroy_doomed(buffers: Sequence[Buffer]) -> None:
    """Destroy those of buffers that were deleted while pinned and are pinned no more (each exactly once)."""
    for buffer in buffers:
        with _lifetime_lock:
            handle = buffer._doomed if not buffer._pins else None
            if handle is not None:
                buffer._doomed = None
        if handle is not None:
            buffer._destroy(handle)


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
        with _lifetime_lock:
            handle = self.handle
            if handle and self.client.handle:
                self._pins += 1
                return handle
        self._live_handle(action)  # raises the reason
        raise PjrtError(f"{action}: the buffer has been deleted")

    def _unpin(self) -> None:
        with _lifetime_lock:
            self._pins -= 1
            doomed = self._doomed is not None
        if doomed:
            destroy_doomed((self,))

    def to_numpy(self) -> np.ndarray:
        """Copy the buffer into a new numpy array."""
        handle = self._pin("to_numpy")
        try:
            out = np.empty(self.shape, self.dtype)
            args = _BufferToHostBufferArgs(_BufferToHostBufferArgs.SIZE, None, handle, None, _data_address(out),
                                           out.nbytes)
            client = self.client
            error = client._buffer_to_host_buffer(ctypes.addressof(args))
            if error:
                raise client.plugin.error("Buffer_ToHostBuffer", error)
            client.plugin.await_event("Buffer_ToHostBuffer", args.event)
        finally:
            self._unpin()
        return out

    def host_view(self) -> np.ndarray | None:
        """A read-only numpy array that shares the buffer's memory (no copy), once the buffer is ready; None where
        the memory is not the host's (a GPU plugin) or cannot be shared (empty). The view pins the buffer: a
        delete() while the view lives destroys the buffer when the view dies."""
        client = self.client
        if not client.host_memory or 0 in self.shape:
            return None
        self.block_until_ready()
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

    def block_until_ready(self) -> None:
        args = _new(_BufferReadyEventArgs, buffer=self._pin("block_until_ready"))
        try:
            plugin = self.client.plugin
            plugin.call("Buffer_ReadyEvent", args)
            plugin.await_event("Buffer_ReadyEvent", args.event)
        finally:
            self._unpin()

    def delete(self) -> None:
        """Destroy the device buffer (at once, or when the PJRT calls using it end). Idempotent."""
        with _lifetime_lock:
            handle, self.handle = self.handle, None
            if handle and self._pins:
                self._doomed, handle = handle, None
        if handle:
            self._destroy(handle)

    def _destroy(self, handle: int) -> None:
        client = self.client
        if client.handle:
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
