"""Device: an addressable device of a client, with the id and kind that its PJRT_DeviceDescription reports."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ember._runtime.pjrt.structs import (_DeviceDescriptionIdArgs, _DeviceDescriptionKindArgs,
                                        _DeviceDescriptionProcessIndexArgs, _DeviceGetDescriptionArgs, _new,
                                        _string_at)

if TYPE_CHECKING:
    from ember._runtime.pjrt.client import Client  # (a type only: client.py imports this module)


class Device:
    """An addressable device of a client: `id` (unique across the client's processes), `platform` ("cpu",
    "cuda", ...), `device_kind`, `process_index` (of the process it is addressable from), as jax.Device."""

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
        self.process_index = 0
        if plugin.has_function("DeviceDescription_ProcessIndex"):
            index = _new(_DeviceDescriptionProcessIndexArgs, device_description=description)
            plugin.call("DeviceDescription_ProcessIndex", index)
            self.process_index = index.process_index

    @property
    def platform(self) -> str:
        return self.client.platform_name

    @property
    def device_kind(self) -> str:
        return self.kind

    def __repr__(self) -> str:
        return f"{self.client.platform_name.capitalize()}Device(id={self.id})"

    def __str__(self) -> str:
        return f"{self.client.platform_name}:{self.id}"  # (JAX's: "cpu:0")
