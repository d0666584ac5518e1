"""ember._runtime.xla_proto: the protobuf bytes the PJRT plugin returns are checked before they are trusted. Each
malformed message is refused with a ValueError saying what is wrong (the well-formed ones, against XLA's own
protos, are in tests/test_sharding_specs.py)."""
import pytest

from ember._core.sharding import HloSharding
from ember._runtime import xla_proto


def varint(value):
    out = bytearray()
    while True:
        out.append(value & 0x7F | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not out[-1] & 0x80:
            return bytes(out)


def field(number, payload):
    """A field of a message: an int as a varint, bytes length-delimited."""
    if isinstance(payload, int):
        return varint(number << 3) + varint(payload)
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def packed(values):
    return b"".join(varint(v) for v in values)


def test_well_formed_messages_read_back():
    tiled = field(1, 3) + field(3, packed([2, 2])) + field(4, packed([0, 2, 1, 3]))
    assert xla_proto.op_sharding(tiled) == HloSharding.tiled([2, 2], [0, 2, 1, 3])
    iota = field(1, 3) + field(3, packed([2, 2])) + field(9, packed([2, 2])) + field(10, packed([1, 0]))
    assert xla_proto.op_sharding(iota) == HloSharding.tiled([2, 2], [0, 2, 1, 3])
    fixed = bytes([1 << 3 | 5]) + (7).to_bytes(4, "little") + bytes([2 << 3 | 1]) + (9).to_bytes(8, "little")
    assert xla_proto.fields(fixed) == {1: [7], 2: [9]}
    assert xla_proto.ints([varint((1 << 64) - 1), 5]) == [-1, 5]  # (int64: two's complement)
    nested = field(1, 2) + field(5, field(1, 2) + field(5, field(1, 0)))
    assert xla_proto.op_sharding(nested) == HloSharding.tuple_of([HloSharding.tuple_of([HloSharding.replicated()])])


@pytest.mark.parametrize("data, message", [
    (b"\x08\x83", "ends inside a varint"),
    (b"\x08" + b"\xff" * 10 + b"\x01", "varint longer than 10 bytes"),
    (bytes([1 << 3 | 5, 1, 2]), "field 1 runs past the end"),
    (bytes([1 << 3 | 1]) + bytes(7), "field 1 runs past the end"),
    (bytes([3 << 3 | 2, 5, 1]), "field 3 runs past the end"),
    (bytes([1 << 3 | 3]), "unsupported wire type 3"),
    (bytes([0 << 3 | 0, 1]), "field number 0"),
])
def test_malformed_wire_format_is_refused(data, message):
    with pytest.raises(ValueError, match=message):
        xla_proto.op_sharding(data)


@pytest.mark.parametrize("data, message", [
    (field(1, b""), "field 1 is length-delimited, expected an integer"),  # (the type as bytes: no type at all)
    (field(1, 2) + field(5, 7), "field 5 is an integer, expected a message"),
    (field(1, 3) + field(3, packed([2, 0])) + field(4, packed([0, 1])), r"tile_assignment_dimensions \[2, 0\]"),
    (field(1, 3) + field(3, packed([1 << 20, 1 << 20])), "a grid of at most"),  # (no array of 2**40 ids is made)
    (field(1, 3) + field(3, packed([2, 2])) + field(9, packed([2, 3])) + field(10, packed([1, 0])),
     "iota_reshape_dims"),
    (field(1, 3) + field(3, packed([2, 2])) + field(9, packed([2, 2])) + field(10, packed([0, 0])),
     "iota_transpose_perm"),
    (field(1, 3) + field(3, packed([2])) + field(4, packed([0, (1 << 64) - 1])), "distinct partition ids"),
    (field(1, 1) + field(4, packed([0, 1])), "MAXIMAL OpSharding needs one device"),
    (field(1, 6), "OpSharding type 6 is not supported"),
])
def test_malformed_op_sharding_is_refused(data, message):
    with pytest.raises(ValueError, match=message):
        xla_proto.op_sharding(data)


def test_deeply_nested_tuples_are_refused():
    data = field(1, 0)
    for _ in range(100):
        data = field(1, 2) + field(5, data)
    with pytest.raises(ValueError, match="nested more than 64 deep"):
        xla_proto.op_sharding(data)


def test_malformed_module_is_refused():
    with pytest.raises(ValueError, match="holds no HloModuleProto"):
        xla_proto.hlo_module_shardings(field(1, 3))
    with pytest.raises(ValueError, match="hlo_module_shardings: field 14 is an integer, expected a message"):
        xla_proto.hlo_module_shardings(field(1, field(14, 1)))
    with pytest.raises(ValueError, match="runs past the end"):
        xla_proto.hlo_module_shardings(field(1, field(12, b"")[:1] + b"\x05"))


def test_hlo_text_reads_through_the_checked_decoder():
    from ember._runtime.hlo_text import hlo_module_text
    parameter = field(1, b"p") + field(2, b"parameter") + field(35, 1) + field(3, field(2, 11) + field(3, packed([2])))
    computation = field(1, b"main") + field(2, parameter) + field(5, 7) + field(6, 1)
    module = field(1, b"m") + field(3, computation) + field(6, 7)
    for given in (module, field(1, module)):  # (a bare HloModuleProto, or one in an HloModuleProtoWithConfig)
        assert hlo_module_text(given) == "HloModule m\n\nENTRY %main (p: f32[2]) -> f32[2] {\n" \
                                         "  ROOT %p = f32[2] parameter(0)\n}\n"
    with pytest.raises(ValueError, match="field 3 runs past the end"):  # (a module cut short)
        hlo_module_text(module[:-3])
