"""Text of the optimized HLO module the plugin compiled, for `Compiled.as_text()`.

The CPU plugin returns the optimized program (PJRT_Executable_OptimizedProgram) as a serialized
xla.HloModuleProtoWithConfig, and ember carries no protobuf library: this module reads the protobuf wire format
itself (the few fields of xla/service/hlo.proto and xla/xla_data.proto it prints) and renders XLA's HLO text
layout: one block per computation, one line per instruction with its shape (and layout), opcode, operands, the
computations it calls (fusions, reductions' regions), a fusion's kind, dimensions and custom-call targets. It shows
what XLA made of the program (its fusions, the layouts it chose); attributes it does not read are left out."""
from __future__ import annotations

from typing import Any, Iterator

# xla.PrimitiveType
_ELEMENT_TYPES = {1: "pred", 2: "s8", 3: "s16", 4: "s32", 5: "s64", 6: "u8", 7: "u16", 8: "u32", 9: "u64",
                  10: "f16", 11: "f32", 12: "f64", 13: "tuple", 14: "opaque", 15: "c64", 16: "bf16", 17: "token",
                  18: "c128", 19: "f8e5m2", 20: "f8e4m3fn", 21: "s4", 22: "u4"}


def _fields(data: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of a protobuf message: varints as ints, length-delimited as bytes."""
    i, n = 0, len(data)

    def varint() -> int:
        nonlocal i
        shift = result = 0
        while True:
            if i >= n:
                raise ValueError("truncated protobuf varint")
            byte = data[i]
            i += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
            shift += 7

    while i < n:
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            yield number, wire, varint()
        elif wire == 1:
            yield number, wire, data[i:i + 8]
            i += 8
        elif wire == 2:
            size = varint()
            yield number, wire, data[i:i + size]
            i += size
        elif wire == 5:
            yield number, wire, data[i:i + 4]
            i += 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def _ints(value: Any) -> list[int]:
    """A repeated int64 field's entries: one varint, or a packed run of them (signed: two's complement)."""
    if isinstance(value, int):
        return [_signed(value)]
    out, shift, result = [], 0, 0
    for byte in value:
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            out.append(_signed(result))
            shift = result = 0
    return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _shape(data: bytes) -> str:
    element, dims, tuples, layout = 0, [], [], None
    for number, _, value in _fields(data):
        if number == 2:
            element = value
        elif number == 3:
            dims += _ints(value)
        elif number == 4:
            tuples.append(_shape(value))
        elif number == 5:
            layout = []
            for n, _, v in _fields(value):
                if n == 1:
                    layout += _ints(v)
    if _ELEMENT_TYPES.get(element) == "tuple":
        return "(" + ", ".join(tuples) + ")"
    text = f"{_ELEMENT_TYPES.get(element, f'type{element}')}[{','.join(map(str, dims))}]"
    if layout is not None and dims:
        text += "{" + ",".join(map(str, layout)) + "}"
    return text


def _instruction(data: bytes) -> dict[str, Any]:
    found: dict[str, Any] = {"operands": [], "calls": [], "dimensions": []}
    for number, _, value in _fields(data):
        if number == 1:
            found["name"] = value.decode()
        elif number == 2:
            found["opcode"] = value.decode()
        elif number == 3:
            found["shape"] = _shape(value)
        elif number == 9:
            found["parameter"] = value
        elif number == 11:
            found["fusion_kind"] = value.decode()
        elif number == 13:
            found["index"] = value
        elif number == 14:
            found["dimensions"] += _ints(value)
        elif number == 28:
            found["target"] = value.decode()
        elif number == 35:
            found["id"] = value
        elif number == 36:
            found["operands"] += _ints(value)
        elif number == 38:
            found["calls"] += _ints(value)
    return found


def _computation(data: bytes) -> dict[str, Any]:
    found: dict[str, Any] = {"instructions": []}
    for number, _, value in _fields(data):
        if number == 1:
            found["name"] = value.decode()
        elif number == 2:
            found["instructions"].append(_instruction(value))
        elif number == 5:
            found["id"] = value
        elif number == 6:
            found["root"] = value
    return found


def hlo_module_text(serialized: bytes) -> str:
    """HLO text of a serialized xla.HloModuleProtoWithConfig (or a bare xla.HloModuleProto)."""
    module = serialized
    for number, wire, value in _fields(serialized):
        if number == 1 and wire == 2 and any(n == 3 for n, _, _ in _fields(value)):
            module = value  # (HloModuleProtoWithConfig.hlo_module)
            break
    name, entry, computations = "module", None, []
    for number, _, value in _fields(module):
        if number == 1:
            name = value.decode()
        elif number == 3:
            computations.append(_computation(value))
        elif number == 6:
            entry = value
    names = {c.get("id"): c.get("name", "?") for c in computations}
    by_id = {ins.get("id"): ins for c in computations for ins in c["instructions"]}
    lines = [f"HloModule {name}"]
    for comp in computations:
        params = sorted((i for i in comp["instructions"] if i.get("opcode") == "parameter"),
                        key=lambda i: i.get("parameter", 0))
        signature = ", ".join(f"{p['name']}: {p.get('shape', '?')}" for p in params)
        root = by_id.get(comp.get("root"), {})
        prefix = "ENTRY " if comp.get("id") == entry else ""
        lines += ["", f"{prefix}%{comp.get('name', '?')} ({signature}) -> {root.get('shape', '?')} {{"]
        for ins in comp["instructions"]:
            lines.append("  " + ("ROOT " if ins.get("id") == comp.get("root") else "") + _line(ins, by_id, names))
        lines.append("}")
    return "\n".join(lines) + "\n"


def _line(ins: dict[str, Any], by_id: dict[Any, Any], names: dict[Any, str]) -> str:
    opcode = ins.get("opcode", "?")
    if opcode == "parameter":
        operands = str(ins.get("parameter", 0))
    else:
        operands = ", ".join(f"{by_id[o].get('shape', '?')} %{by_id[o].get('name', '?')}" if o in by_id else f"%{o}"
                             for o in ins["operands"])
    attrs = []
    if opcode == "get-tuple-element":
        attrs.append(f"index={ins.get('index', 0)}")
    if ins.get("fusion_kind"):
        attrs.append(f"kind={ins['fusion_kind']}")
    if ins["dimensions"]:
        attrs.append("dimensions={" + ",".join(map(str, ins["dimensions"])) + "}")
    if ins["calls"]:
        key = "calls" if opcode in ("fusion", "call") else "to_apply"
        attrs.append(f"{key}=" + ", ".join(f"%{names.get(c, c)}" for c in ins["calls"]))
    if ins.get("target"):
        attrs.append(f'custom_call_target="{ins["target"]}"')
    return (f"%{ins.get('name', '?')} = {ins.get('shape', '?')} {opcode}({operands})"
            + "".join(", " + a for a in attrs))


__all__ = ["hlo_module_text"]
