"""Text of the optimized HLO module the plugin compiled, for `Compiled.as_text()`.

The CPU plugin returns the optimized program (PJRT_Executable_OptimizedProgram) as a serialized
xla.HloModuleProtoWithConfig, and ember carries no protobuf library: ember._runtime.xla_proto reads (and checks) the
wire format, this module the few fields of xla/service/hlo.proto and xla/xla_data.proto it prints, and renders XLA's
HLO text layout: one block per computation, one line per instruction with its shape (and layout), opcode, operands,
the computations it calls (fusions, reductions' regions), a fusion's kind, dimensions and custom-call targets. It
shows what XLA made of the program (its fusions, the layouts it chose); attributes it does not read are left out."""
from __future__ import annotations

from typing import Any

from ember._runtime.xla_proto import Fields, fields, ints, messages

# xla.PrimitiveType
_ELEMENT_TYPES = {1: "pred", 2: "s8", 3: "s16", 4: "s32", 5: "s64", 6: "u8", 7: "u16", 8: "u32", 9: "u64",
                  10: "f16", 11: "f32", 12: "f64", 13: "tuple", 14: "opaque", 15: "c64", 16: "bf16", 17: "token",
                  18: "c128", 19: "f8e5m2", 20: "f8e4m3fn", 21: "s4", 22: "u4"}


def _text(found: Fields, number: int) -> str | None:
    """A string field (the last one given), or None."""
    values = found.get(number)
    return None if not values else bytes(values[-1]).decode() if isinstance(values[-1], bytes) else str(values[-1])


def _int(found: Fields, number: int) -> int | None:
    """An integer field (the last one given), or None."""
    values = [v for v in found.get(number, []) if isinstance(v, int)]
    return values[-1] if values else None


def _shape(data: bytes) -> str:
    found = fields(data)
    element, dims = _int(found, 2) or 0, ints(found.get(3, []))
    layout = None
    for message in messages(found, 5, "ShapeProto"):
        layout = ints(fields(message).get(1, []))
    if _ELEMENT_TYPES.get(element) == "tuple":
        return "(" + ", ".join(_shape(t) for t in messages(found, 4, "ShapeProto")) + ")"
    text = f"{_ELEMENT_TYPES.get(element, f'type{element}')}[{','.join(map(str, dims))}]"
    if layout is not None and dims:
        text += "{" + ",".join(map(str, layout)) + "}"
    return text


# HloInstructionProto's fields that ember prints: (number, key, how it is read)
_INSTRUCTION_FIELDS = ((1, "name", _text), (2, "opcode", _text), (9, "parameter", _int), (11, "fusion_kind", _text),
                       (13, "index", _int), (28, "target", _text), (35, "id", _int))


def _instruction(data: bytes) -> dict[str, Any]:
    found = fields(data)
    out: dict[str, Any] = {"operands": ints(found.get(36, [])), "calls": ints(found.get(38, [])),
                           "dimensions": ints(found.get(14, []))}
    for number, key, read in _INSTRUCTION_FIELDS:
        value = read(found, number)
        if value is not None:
            out[key] = value
    shapes = messages(found, 3, "HloInstructionProto")
    if shapes:
        out["shape"] = _shape(shapes[-1])
    return out


def _computation(data: bytes) -> dict[str, Any]:
    found = fields(data)
    out: dict[str, Any] = {"instructions": [_instruction(i) for i in messages(found, 2, "HloComputationProto")]}
    for number, key, read in ((1, "name", _text), (5, "id", _int), (6, "root", _int)):
        value = read(found, number)
        if value is not None:
            out[key] = value
    return out


def _module(serialized: bytes) -> Fields:
    """The fields of the HloModuleProto in serialized: HloModuleProtoWithConfig's field 1 when it is a message with
    computations (field 3), else serialized itself (a bare HloModuleProto, whose field 1 is its name)."""
    found = fields(serialized)
    inner = found.get(1, [None])[0]
    if isinstance(inner, bytes):
        try:
            module = fields(inner)
        except ValueError:  # (a name, not a message)
            return found
        if 3 in module:
            return module
    return found


def hlo_module_text(serialized: bytes) -> str:
    """HLO text of a serialized xla.HloModuleProtoWithConfig (or a bare xla.HloModuleProto)."""
    module = _module(serialized)
    name, entry = _text(module, 1) or "module", _int(module, 6)
    computations = [_computation(c) for c in messages(module, 3, "HloModuleProto")]
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
