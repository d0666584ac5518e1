"""SpmdExecutable: a program XLA's SPMD partitioner split over several devices, run with one argument list per
device (the arguments' shards there) and returning one output list per device."""
from __future__ import annotations

import ctypes
import threading
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ember._runtime.pjrt import buffer as buffer_module
from ember._runtime.pjrt.buffer import Buffer
from ember._runtime.pjrt.device import Device
from ember._runtime.pjrt.errors import PjrtError
from ember._runtime.pjrt.executable import Executable
from ember._runtime.pjrt.structs import (_POINTER_TO_VOID_P, _ExecuteOptions,
                                         _LoadedExecutableAddressableDevicesArgs, _LoadedExecutableExecuteArgs, _new,
                                         c_void_p)

if TYPE_CHECKING:
    from ember._runtime.pjrt.client import Client


class SpmdExecutable(Executable):
    """A loaded executable partitioned over `devices` (partition i runs on devices[i]). run_spmd(args) takes,
    per device, the list of argument buffers there and returns, per device, its output buffers with the given
    per-device (shape, dtype) specs."""

    def __init__(self, client: Client, handle: int, code: bytes, devices: Sequence[Device]):
        self.devices = list(devices)
        super().__init__(client, handle, code)
        ids = sorted(d.id for d in self._addressable(client, handle))
        if ids != sorted(d.id for d in self.devices):  # (a cache entry made for other devices: never run it)
            raise PjrtError(f"an SPMD executable for devices {ids} cannot run on devices "
                            f"{[d.id for d in self.devices]}")
        self._calls: dict[int, Any] = {}  # argument count -> the reused Execute args (see _call_args)
        self._call_lock = threading.Lock()
        self._execute = client.plugin.function("LoadedExecutable_Execute")

    @staticmethod
    def _addressable(client: Client, handle: int) -> list[Device]:
        """The devices the loaded executable runs on, in the plugin's order."""
        found = _new(_LoadedExecutableAddressableDevicesArgs, executable=handle)
        client.plugin.call("LoadedExecutable_AddressableDevices", found)
        by_handle = {d.handle: d for d in client.devices}
        return [by_handle[found.addressable_devices[i]] for i in range(found.num_addressable_devices)]

    @classmethod
    def _compiled_device(cls, client: Client, handle: int) -> Device:
        return cls._addressable(client, handle)[0]

    def execute(self, args: Sequence[Buffer], out_specs: Sequence[tuple[tuple[int, ...], np.dtype]]
                ) -> list[Buffer]:
        raise PjrtError("execute: an SPMD executable runs with one argument list per device (run_spmd)")

    def run_spmd(self, args: Sequence[Sequence[Buffer]],
                 out_specs: Sequence[Sequence[tuple[tuple[int, ...], np.dtype]]]) -> list[list[Buffer]]:
        """Run once on every device: args[i] are the buffers on self.devices[i], out_specs[i] the (shape, dtype)
        of each output there."""
        client, n, count = self.client, len(self.devices), len(args[0]) if args else 0
        if len(args) != n or any(len(a) != count for a in args):
            raise PjrtError(f"execute: expected {n} argument lists of equal length, one per device")
        for device, buffers in zip(self.devices, args):
            for i, b in enumerate(buffers):
                if type(b) is Buffer and b.device is not device:
                    raise PjrtError(f"execute: argument {i} for {device} lives on {b.device}")
        with self._call_lock:
            lists, outputs, call = self._call_args(count)
            if buffer_module.pin_client(client) is None:
                raise PjrtError(f"execute: the executable's PJRT client {client.closed_reason}")
            pinned: list[Sequence[Buffer]] = []
            try:
                for buffers, handles in zip(args, lists):
                    bad = buffer_module.pin_all(buffers, client, handles)
                    if bad >= 0:
                        raise self._bad_argument(bad, buffers[bad])
                    pinned.append(buffers)
                error = self._execute(ctypes.addressof(call))
            finally:
                for buffers in pinned:
                    buffer_module.unpin_all(buffers)
                buffer_module.unpin_client(client)
            handles = [list(o[:self.num_outputs]) for o in outputs]
        if error:
            raise client.plugin.error("LoadedExecutable_Execute", error)
        return [[Buffer(client, device, handles[d][k], shape, dtype) for k, (shape, dtype) in enumerate(out_specs[d])]
                for d, device in enumerate(self.devices)]

    def _call_args(self, count: int) -> tuple[list[Any], list[Any], Any]:
        """The Execute args for calls with count arguments per device (built once, reused under _call_lock): the
        per-device argument and output handle arrays, and the args struct pointing at them."""
        found = self._calls.get(count)
        if found is None:
            n = len(self.devices)
            lists = [(c_void_p * max(count, 1))() for _ in range(n)]
            outputs = [(c_void_p * max(self.num_outputs, 1))() for _ in range(n)]
            argument_lists = (_POINTER_TO_VOID_P * n)(*[ctypes.cast(a, _POINTER_TO_VOID_P) for a in lists])
            output_lists = (_POINTER_TO_VOID_P * n)(*[ctypes.cast(o, _POINTER_TO_VOID_P) for o in outputs])
            options = _new(_ExecuteOptions)
            call = _new(_LoadedExecutableExecuteArgs, executable=self.handle, options=ctypes.pointer(options),
                        argument_lists=argument_lists, num_devices=n, num_args=count, output_lists=output_lists)
            found = self._calls[count] = (lists, outputs, call, (argument_lists, output_lists, options))
        return found[0], found[1], found[2]

    def __repr__(self) -> str:
        return f"SpmdExecutable(num_outputs={self.num_outputs}, devices={self.devices})"



