"""Reading the protobuf messages the PJRT plugin returns (ember carries no protobuf library): the wire format
(fields, packed ints), XLA's OpSharding as an ember._core.sharding.HloSharding, and the shardings XLA chose for an
SPMD program's parameters and outputs (from PJRT_Executable_OptimizedProgram's HloModuleProtoWithConfig).

The bytes come from another library (the plugin), so nothing in them is trusted: a varint is at most ten bytes, a
length or fixed-width field ends inside its message, a field is of the wire type its message gives it, and a
sharding's tile grid is checked before any array is made for it; anything else is a ValueError saying what."""
from __future__ import annotations

import collections
import math

import numpy as np

from ember._core.sharding import HloSharding

Fields = dict[int, list[int | bytes]]

_MAX_VARINT_BYTES = 10  # a 64-bit value in 7-bit groups
_MAX_PARTITIONS = 1 << 24  # (an OpSharding naming more partitions than this is corrupt, not a program's)
_MAX_TUPLE_DEPTH = 64  # (tuple shardings nest; a deeper nesting is corrupt, not a program's)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """(the varint starting at pos, the position after it)."""
    result = 0
    for shift in range(0, 7 * _MAX_VARINT_BYTES, 7):
        if pos >= len(data):
            raise ValueError("protobuf message ends inside a varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
    raise ValueError(f"protobuf varint longer than {_MAX_VARINT_BYTES} bytes")


def fields(data: bytes) -> Fields:
    """The fields of a serialized protobuf message by number: ints (varint and fixed wire types) and bytes
    (length-delimited: strings, sub-messages and packed repeated scalars), in their order."""
    found: Fields = collections.defaultdict(list)
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("protobuf field number 0 (not a message)")
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise ValueError(f"protobuf field {number} runs past the end of the message")
            value, pos = bytes(data[pos:pos + size]), pos + size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if pos + width > len(data):
                raise ValueError(f"protobuf field {number} runs past the end of the message")
            value, pos = int.from_bytes(data[pos:pos + width], "little"), pos + width
        else:
            raise ValueError(f"protobuf field {number} has unsupported wire type {wire}")
        found[number].append(value)
    return found


def _signed(value: int) -> int:
    """An int64 from its varint (two's complement in 64 bits)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def ints(values: list[int | bytes]) -> list[int]:
    """A repeated integer field, packed (one bytes value of varints) or not (one int per element), or both."""
    out = []
    for value in values:
        if isinstance(value, bytes):
            pos = 0
            while pos < len(value):
                item, pos = _varint(value, pos)
                out.append(_signed(item))
        else:
            out.append(_signed(value))
    return out


def _scalar(found: Fields, number: int, what: str) -> int:
    """A singular integer field (0 when absent; the last one when repeated, as protobuf reads it)."""
    values = found.get(number)
    if not values:
        return 0
    if not isinstance(values[-1], int):
        raise ValueError(f"{what}: field {number} is length-delimited, expected an integer")
    return _signed(values[-1])


def messages(found: Fields, number: int, what: str) -> list[bytes]:
    """A repeated (or singular) sub-message field's messages."""
    values = found.get(number, [])
    if not all(isinstance(v, bytes) for v in values):
        raise ValueError(f"{what}: field {number} is an integer, expected a message")
    return values  # type: ignore[return-value]


# OpSharding.Type
_REPLICATED, _MAXIMAL, _TUPLE, _OTHER, _MANUAL = 0, 1, 2, 3, 4
_SUBGROUP_KINDS = {_REPLICATED: "replicated", _MANUAL: "manual"}  # the types allowed in last_tile_dims


def op_sharding(data: bytes, _depth: int = 0) -> HloSharding:
    """The sharding a serialized xla.OpSharding describes (device lists explicit or as an iota)."""
    what = "OpSharding"
    found = fields(data)
    kind = _scalar(found, 1, what)
    if kind == _REPLICATED:
        return HloSharding.replicated()
    if kind == _MANUAL:
        return HloSharding.manual()
    if kind == _TUPLE:
        if _depth >= _MAX_TUPLE_DEPTH:
            raise ValueError(f"{what}: tuple shardings nested more than {_MAX_TUPLE_DEPTH} deep")
        return HloSharding.tuple_of([op_sharding(e, _depth + 1) for e in messages(found, 5, what)])
    dims = ints(found.get(3, []))
    devices = ints(found.get(4, []))
    if kind == _MAXIMAL:
        if len(devices) != 1:
            raise ValueError(f"{what}: a MAXIMAL OpSharding needs one device, got {devices}")
        return HloSharding.maximal(devices[0])
    if kind != _OTHER:
        raise ValueError(f"{what}: OpSharding type {kind} is not supported (only REPLICATED, MAXIMAL, TUPLE, OTHER and "
                         "MANUAL)")
    if any(d < 1 for d in dims) or math.prod(dims) > _MAX_PARTITIONS:
        raise ValueError(f"{what}: tile_assignment_dimensions {dims} are not a grid of at most {_MAX_PARTITIONS} "
                         "tiles")
    if not devices:
        devices = _iota_devices(what, dims, ints(found.get(9, [])), ints(found.get(10, [])))
    codes = ints(found.get(8, []))
    if any(c not in _SUBGROUP_KINDS for c in codes):
        raise ValueError(f"{what}: last_tile_dims {codes} holds a type other than REPLICATED (0) and MANUAL (4)")
    return HloSharding.tiled(dims, devices, replicate_on_last_tile_dim=bool(_scalar(found, 6, what)),
                             subgroups=[_SUBGROUP_KINDS[c] for c in codes])


def _key(number: int, wire: int) -> bytes:
    out, value = bytearray(), number << 3 | wire
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _packed(number: int, values: list[int]) -> bytes:
    body = b"".join(_uvarint(v) for v in values)
    return _key(number, 2) + _uvarint(len(body)) + body if values else b""


def _uvarint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def serialize_op_sharding(sharding: HloSharding) -> bytes:
    """The serialized xla.OpSharding of a sharding (op_sharding's inverse: explicit device lists; a replicated
    sharding is the empty message, as XLA writes it)."""
    if sharding.kind == "replicated":
        return b""
    if sharding.kind == "manual":
        return _key(1, 0) + _uvarint(_MANUAL)
    if sharding.kind == "maximal":
        return _key(1, 0) + _uvarint(_MAXIMAL) + _packed(3, [1]) + _packed(4, list(sharding.devices))
    if sharding.kind == "tuple":
        out = _key(1, 0) + _uvarint(_TUPLE)
        for element in sharding.elements:
            raw = serialize_op_sharding(element)
            out += _key(5, 2) + _uvarint(len(raw)) + raw
        return out
    codes = {name: code for code, name in _SUBGROUP_KINDS.items()}
    out = _key(1, 0) + _uvarint(_OTHER) + _packed(3, list(sharding.tile_dims)) + _packed(4, list(sharding.devices))
    if sharding.subgroups == ("replicated",):
        return out + _key(6, 0) + _uvarint(1)
    return out + _packed(8, [codes[g] for g in sharding.subgroups])


def _iota_devices(what: str, dims: list[int], reshape: list[int], perm: list[int]) -> list[int]:
    """The device list of an iota tile assignment: arange(prod(reshape)) reshaped, transposed by perm, flattened
    (no reshape: the devices in order)."""
    if not reshape:
        return list(range(math.prod(dims)))
    if any(d < 1 for d in reshape) or math.prod(reshape) != math.prod(dims) or sorted(perm) != list(
            range(len(reshape))):
        raise ValueError(f"{what}: iota_reshape_dims {reshape} with iota_transpose_perm {perm} do not make the "
                         f"{math.prod(dims)} devices of tile_assignment_dimensions {dims}")
    return [int(d) for d in np.arange(math.prod(reshape)).reshape(reshape).transpose(perm).reshape(-1)]


def hlo_module_shardings(data: bytes) -> tuple[list[HloSharding], list[HloSharding]]:
    """The shardings of an SPMD program's parameters and outputs, read from a serialized
    xla.HloModuleProtoWithConfig (PJRT_Executable_OptimizedProgram): HloModuleProto's spmd_parameters_shardings
    (field 14) and spmd_output_sharding (field 12, a TUPLE when the program has several outputs). A list is empty
    when the module does not say."""
    what = "hlo_module_shardings"
    module = fields(data).get(1)
    if not module or not isinstance(module[-1], bytes):
        raise ValueError(f"{what}: the data holds no HloModuleProto (field 1 of HloModuleProtoWithConfig)")
    found = fields(module[-1])
    params = [op_sharding(p) for p in messages(found, 14, what)]
    outputs: list[HloSharding] = []
    written = messages(found, 12, what)
    if written:
        output = op_sharding(written[-1])
        outputs = list(output.elements) if output.kind == "tuple" else [output]
    return params, outputs


__all__ = ["fields", "hlo_module_shardings", "ints", "messages", "op_sharding", "serialize_op_sharding"]
