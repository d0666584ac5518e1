"""ember.experimental.profiler (jax.experimental.profiler): get_profiled_instructions_proto, the measured cost of
each XLA instruction in a profile, as XLA's profile-guided latency-hiding scheduler reads it
(ProfiledInstructionsProto: `costs` of (name, cost_us)).

As JAX's (XLA's xplane_to_profile_instructions): the directory's files whose names contain "xplane.pb" are read;
on the device planes of each ("/device:GPU:" planes, else TPU, else custom devices) every event that names its
HLO instruction and module (the `hlo_op` and `hlo_module` stats, on the event or its metadata), except on the line
of asynchronous ops, is a duration of that instruction; each instruction's cost is the mean of its durations, in
microseconds. A profile of CPU devices has no device planes, so the result is empty bytes, as JAX's on the CPU. A
missing or empty directory is JAX's NOT_FOUND error; a malformed file is a ValueError naming it (the bytes are
checked before they are read). Where ember differs: JAX prefixes a name with its module's fingerprint
("fingerprint::name") when the profile's metadata plane holds the module with the `fingerprint_before_lhs`
attribute (written by XLA's GPU scheduler); ember does not read HLO modules, so its names are the instructions'
own; the costs are ordered by name (JAX's by a hash map)."""
from __future__ import annotations

import os
import struct
from typing import Any

from ember._runtime.pjrt.errors import PjrtError
from ember._runtime.xla_proto import fields, messages
from ember._runtime.xspace import _int, _map, _stat, _text, _varint

_DEVICE_PREFIXES = ("/device:GPU:", "/device:TPU:", "/device:CUSTOM:")
_ASYNC_LINE = "Async XLA Ops"


def get_profiled_instructions_proto(tensorboard_dir: str | os.PathLike) -> bytes:
    """The serialized ProfiledInstructionsProto of the profile in tensorboard_dir (a run's directory,
    `<log_dir>/plugins/profile/<run>/`): see the module's docstring."""
    path = os.fspath(tensorboard_dir)
    try:
        children = sorted(os.listdir(path))
    except OSError as err:
        raise PjrtError(f"NOT_FOUND: {path}; {err.strerror}", "get_profiled_instructions_proto", "NOT_FOUND"
                        ) from None
    if not children:
        raise PjrtError(f"NOT_FOUND: Could not find file under: {path}", "get_profiled_instructions_proto",
                        "NOT_FOUND")
    durations: dict[str, list[float]] = {}
    for child in children:
        if "xplane.pb" not in child:
            continue
        file = os.path.join(path, child)
        with open(file, "rb") as f:
            data = f.read()
        try:
            for name, microseconds in _instruction_durations(data):
                durations.setdefault(name, []).append(microseconds)
        except ValueError as err:
            raise ValueError(f"get_profiled_instructions_proto: {file} is not a valid XSpace: {err}") from None
    out = bytearray()
    for name in sorted(durations):
        times = durations[name]
        cost = _bytes_field(1, name.encode()) + _varint(2 << 3 | 1) + struct.pack("<d", sum(times) / len(times))
        out += _bytes_field(1, cost)
    return bytes(out)


def _bytes_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _instruction_durations(data: bytes) -> list[tuple[str, float]]:
    """(instruction name, duration in microseconds) of each device event of a serialized XSpace that names its HLO
    instruction and module."""
    planes = [fields(p) for p in messages(fields(data), 1, "XSpace.planes")]
    for prefix in _DEVICE_PREFIXES:  # (GPU planes; else TPU; else custom devices: never mixed in one XSpace)
        devices = [p for p in planes if _text(p, 2).startswith(prefix)]
        if devices:
            break
    found = []
    for plane in devices:
        stat_names = {k: _text(v, 2) for k, v in _map(plane, 5, "XPlane.stat_metadata").items()}
        metadata = {k: dict(_stat(s, stat_names) for s in messages(v, 5, "XEventMetadata.stats"))
                    for k, v in _map(plane, 4, "XPlane.event_metadata").items()}
        for line_data in messages(plane, 3, "XPlane.lines"):
            line = fields(line_data)
            if (_text(line, 11) or _text(line, 2)) == _ASYNC_LINE:
                continue
            for event_data in messages(line, 4, "XLine.events"):
                event = fields(event_data)
                stats: dict[str, Any] = dict(metadata.get(_int(event, 1), {}))
                stats.update(_stat(s, stat_names) for s in messages(event, 4, "XEvent.stats"))
                if stats.get("hlo_op") is not None and stats.get("hlo_module") is not None:
                    found.append((str(stats["hlo_op"]), (_int(event, 3) // 1000) / 1e3))
    return found


__all__ = ["get_profiled_instructions_proto"]
