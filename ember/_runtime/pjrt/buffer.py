"""Buffer: a device buffer of known shape and dtype, which copies back to numpy, waits until ready, and deletes.

Buffers come from Client.buffer_from_numpy and Executable.execute. A Buffer keeps its client alive and refuses
to be used once deleted or once its client is closed; the PJRT functions it calls most are looked up once, by
the client."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING

import numpy as np

from ember._runtime.pjrt.errors import PjrtError
from ember._runtime.pjrt.structs import (_BufferReadyEventArgs, _BufferToHostBufferArgs, _data_address, _handle_args,
                                        _new)

if TYPE_CHECKING:
    from ember._runtime.pjrt.client import Client
    from ember._runtime.pjrt.device import Device


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
