"""The profile formats of ember.profiler, without a protobuf library: XLA's XSpace (tsl/profiler/protobuf/xplane.proto)
read into planes, lines and events (ember.profiler.ProfileData, as jax.profiler's), written (ember's profiler writes
its trace as <host>.xplane.pb beside the Chrome trace, as JAX does) and read from the protobuf text format; and
pprof's Profile (profile.proto), written for device_memory_profile.

The messages and the fields ember reads and writes, by number:
  XSpace: planes 1, errors 2, warnings 3, hostnames 4
  XPlane: id 1, name 2, lines 3, event_metadata 4 (map int64 -> XEventMetadata), stat_metadata 5 (map int64 ->
      XStatMetadata), stats 6
  XLine: id 1, name 2, timestamp_ns 3, events 4, duration_ps 9, display_id 10, display_name 11
  XEvent: metadata_id 1, offset_ps 2, duration_ps 3, stats 4, num_occurrences 5
  XStat: metadata_id 1, double_value 2, uint64_value 3, int64_value 4, str_value 5, bytes_value 6, ref_value 7
  XEventMetadata: id 1, name 2, metadata 3, display_name 4, stats 5, child_id 6
  XStatMetadata: id 1, name 2, description 3
A file is data: anything malformed is a ValueError (ember._runtime.xla_proto's reader checks the wire format)."""
from __future__ import annotations

import dataclasses
import re
import struct
from typing import Any, Iterator

from ember._runtime.xla_proto import fields, ints, messages

# message -> field name -> (number, kind, message of a sub-message / map value)
SCHEMA: dict[str, dict[str, tuple[int, str, str | None]]] = {
    "XSpace": {"planes": (1, "message", "XPlane"), "errors": (2, "string", None), "warnings": (3, "string", None),
               "hostnames": (4, "string", None)},
    "XPlane": {"id": (1, "int64", None), "name": (2, "string", None), "lines": (3, "message", "XLine"),
               "event_metadata": (4, "map", "XEventMetadata"), "stat_metadata": (5, "map", "XStatMetadata"),
               "stats": (6, "message", "XStat")},
    "XLine": {"id": (1, "int64", None), "name": (2, "string", None), "timestamp_ns": (3, "int64", None),
              "events": (4, "message", "XEvent"), "duration_ps": (9, "int64", None),
              "display_id": (10, "int64", None), "display_name": (11, "string", None)},
    "XEvent": {"metadata_id": (1, "int64", None), "offset_ps": (2, "int64", None), "duration_ps": (3, "int64", None),
               "stats": (4, "message", "XStat"), "num_occurrences": (5, "int64", None)},
    "XStat": {"metadata_id": (1, "int64", None), "double_value": (2, "double", None),
              "uint64_value": (3, "uint64", None), "int64_value": (4, "int64", None),
              "str_value": (5, "string", None), "bytes_value": (6, "bytes", None), "ref_value": (7, "uint64", None)},
    "XEventMetadata": {"id": (1, "int64", None), "name": (2, "string", None), "metadata": (3, "bytes", None),
                       "display_name": (4, "string", None), "stats": (5, "message", "XStat"),
                       "child_id": (6, "int64", None)},
    "XStatMetadata": {"id": (1, "int64", None), "name": (2, "string", None), "description": (3, "string", None)},
}
MAX_DEPTH = 32  # (text protos nest at most this deep: XSpace's messages nest four levels)


# ---------------------------------------------------------------------------------------------------------------
# Reading
@dataclasses.dataclass(frozen=True)
class Event:
    name: str
    start_ns: float
    duration_ns: float
    stats: tuple[tuple[str, Any], ...]


@dataclasses.dataclass(frozen=True)
class Line:
    name: str
    events: tuple[Event, ...]


@dataclasses.dataclass(frozen=True)
class Plane:
    name: str
    lines: tuple[Line, ...]
    stats: tuple[tuple[str, Any], ...]


def _int(found: dict[int, list[Any]], number: int) -> int:
    values = ints(found.get(number, []))
    return values[-1] if values else 0


def _text(found: dict[int, list[Any]], number: int) -> str:
    values = [v for v in found.get(number, []) if isinstance(v, bytes)]
    return values[-1].decode("utf-8", "replace") if values else ""


def _map(found: dict[int, list[Any]], number: int, what: str) -> dict[int, dict[int, list[Any]]]:
    out = {}
    for entry in messages(found, number, what):
        item = fields(entry)
        out[_int(item, 1)] = fields(messages(item, 2, what)[-1]) if item.get(2) else {}
    return out


def _stat(data: bytes, names: dict[int, str]) -> tuple[str, Any]:
    found = fields(data)
    name = names.get(_int(found, 1), "")
    if 2 in found:  # (fixed64: a double's bits)
        return name, struct.unpack("<d", int(found[2][-1]).to_bytes(8, "little"))[0]
    if 3 in found:
        return name, int(found[3][-1])
    if 4 in found:
        return name, _int(found, 4)
    if 5 in found or 6 in found:
        return name, _text(found, 5 if 5 in found else 6)
    if 7 in found:
        return name, names.get(int(found[7][-1]), "")
    return name, None


def read_xspace(data: bytes) -> list[Plane]:
    """The planes of a serialized XSpace: each event's name is its metadata's, its start the line's timestamp plus
    its offset (whole nanoseconds), its stats (name, value) pairs, a reference value read as the name it refers
    to (as jax.profiler.ProfileData reads them)."""
    planes = []
    for plane_data in messages(fields(data), 1, "XSpace.planes"):
        plane = fields(plane_data)
        event_names = {k: _text(v, 2) for k, v in _map(plane, 4, "XPlane.event_metadata").items()}
        stat_names = {k: _text(v, 2) for k, v in _map(plane, 5, "XPlane.stat_metadata").items()}
        lines = []
        for line_data in messages(plane, 3, "XPlane.lines"):
            line = fields(line_data)
            stamp = _int(line, 3)
            events = []
            for event_data in messages(line, 4, "XLine.events"):
                event = fields(event_data)
                start = stamp + _int(event, 2) // 1000
                stats = tuple(_stat(s, stat_names) for s in messages(event, 4, "XEvent.stats"))
                events.append(Event(event_names.get(_int(event, 1), ""), float(start), float(_int(event, 3) // 1000),
                                    stats))
            lines.append(Line(_text(line, 2), tuple(events)))
        stats = tuple(_stat(s, stat_names) for s in messages(plane, 6, "XPlane.stats"))
        planes.append(Plane(_text(plane, 2), tuple(lines), stats))
    return planes


# ---------------------------------------------------------------------------------------------------------------
# Writing: a message is a dict of field name -> value (a list for repeated fields, a dict for maps)
def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # (an int64 as its two's complement)
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, kind: str, value: Any, schema: str | None) -> bytes:
    if kind in ("int64", "uint64"):
        return _varint(number << 3) + _varint(int(value))
    if kind == "double":
        return _varint(number << 3 | 1) + struct.pack("<d", float(value))
    if kind in ("string", "bytes"):
        raw = value.encode() if isinstance(value, str) else bytes(value)
    else:
        raw = encode(schema, value)  # type: ignore[arg-type]
    return _varint(number << 3 | 2) + _varint(len(raw)) + raw


def encode(message: str, value: dict[str, Any]) -> bytes:
    """The wire form of a message of SCHEMA given as a dict (repeated fields as lists, maps as dicts)."""
    out = bytearray()
    for name, item in value.items():
        if name not in SCHEMA[message]:
            raise ValueError(f"{message} has no field {name!r}")
        number, kind, sub = SCHEMA[message][name]
        if kind == "map":
            for key, entry in item.items():
                raw = _varint(1 << 3) + _varint(int(key)) + _field(2, "message", entry, sub)
                out += _varint(number << 3 | 2) + _varint(len(raw)) + raw
            continue
        for one in item if isinstance(item, list) else [item]:
            out += _field(number, kind, one, sub)
    return bytes(out)


def trace_xspace(events: list[dict[str, Any]], start_epoch_ns: int, hostname: str, pid: int) -> bytes:
    """ember's profiler events (Chrome trace "X" events: ts and dur in microseconds from the trace's start) as an
    XSpace of one plane, /host:CPU, a line per thread (as JAX's host plane)."""
    names: dict[str, int] = {}
    stat_names: dict[str, int] = {"process_id": 1}
    lines: dict[int, list[dict[str, Any]]] = {}
    for event in events:
        if event.get("ph") != "X":
            continue
        metadata = names.setdefault(str(event["name"]), len(names) + 1)
        stats = []
        for key, text in (event.get("args") or {}).items():
            stats.append({"metadata_id": stat_names.setdefault(str(key), len(stat_names) + 1),
                          "str_value": str(text)})
        lines.setdefault(int(event["tid"]), []).append(
            {"metadata_id": metadata, "offset_ps": round(float(event["ts"]) * 1e6),
             "duration_ps": round(float(event["dur"]) * 1e6), "stats": stats})
    plane = {"id": 1, "name": "/host:CPU",
             "lines": [{"id": tid, "display_id": tid, "name": f"thread {tid}", "timestamp_ns": start_epoch_ns,
                        "events": found} for tid, found in sorted(lines.items())],
             "event_metadata": {i: {"id": i, "name": n} for n, i in names.items()},
             "stat_metadata": {i: {"id": i, "name": n} for n, i in stat_names.items()},
             "stats": [{"metadata_id": 1, "int64_value": pid}]}
    return encode("XSpace", {"planes": [plane], "hostnames": [hostname]})


# ---------------------------------------------------------------------------------------------------------------
# The text format (`planes { name: "/host:CPU" lines { ... } }`)
_TOKEN = re.compile(r'\s*(?:(#[^\n]*)|([{}<>:;,\[\]])|("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\')|'
                    r'([-+]?(?:inf|nan|[0-9.][0-9a-fA-FxX.eE+-]*))|([A-Za-z_][A-Za-z0-9_.]*))', re.S)
_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "\\": b"\\", "'": b"'", '"': b'"', "a": b"\a", "b": b"\b",
            "f": b"\f", "v": b"\v", "?": b"?"}


def _unquote(token: str) -> bytes:
    body, out, i = token[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode()
            i += 1
            continue
        nxt = body[i + 1:i + 2]
        if nxt in _ESCAPES:
            out += _ESCAPES[nxt]
            i += 2
        elif nxt in ("x", "X"):
            digits = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2:])
            if digits is None:
                raise ValueError(f"text proto: a \\x escape without hex digits in {token}")
            out.append(int(digits.group(), 16))
            i += 2 + len(digits.group())
        elif nxt.isdigit():
            digits = re.match(r"[0-7]{1,3}", body[i + 1:])
            out.append(int(digits.group(), 8) & 0xFF)  # type: ignore[union-attr]
            i += 1 + len(digits.group())  # type: ignore[union-attr]
        else:
            raise ValueError(f"text proto: unknown escape \\{nxt} in {token}")
    return bytes(out)


def _tokens(text: str) -> Iterator[tuple[str, str]]:
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            return
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"text proto: cannot read {text[pos:pos + 20]!r} (character {pos})")
        pos = match.end()
        comment, punct, string, number, ident = match.groups()
        if comment is not None:
            continue
        yield ("punct", punct) if punct else ("string", string) if string else \
            ("number", number) if number else ("ident", ident)


def _scalar(kind: str, token: tuple[str, str], field: str) -> Any:
    what, text = token
    if kind in ("string", "bytes"):
        if what != "string":
            raise ValueError(f"text proto: field {field} takes a string, got {text!r}")
        raw = _unquote(text)
        return raw.decode("utf-8", "replace") if kind == "string" else raw
    if what not in ("number", "ident"):
        raise ValueError(f"text proto: field {field} takes a number, got {text!r}")
    if kind == "double":
        lowered = text.lower().lstrip("+")
        if lowered in ("inf", "infinity", "-inf", "-infinity", "nan", "-nan"):
            return float(lowered.replace("infinity", "inf"))
        return float(text.rstrip("fF"))
    try:
        value = int(text, 0)
    except ValueError:
        raise ValueError(f"text proto: field {field} takes an integer, got {text!r}") from None
    if not -2**63 <= value < 2**64:
        raise ValueError(f"text proto: field {field}: {value} does not fit in 64 bits")
    return value


def _parse_message(message: str, tokens: list[tuple[str, str]], pos: int, close: str | None, depth: int
                   ) -> tuple[dict[str, Any], int]:
    if depth > MAX_DEPTH:
        raise ValueError(f"text proto: messages nested deeper than {MAX_DEPTH}")
    out: dict[str, Any] = {}
    while pos < len(tokens):
        what, text = tokens[pos]
        if what == "punct" and text in (";", ","):
            pos += 1
            continue
        if close is not None and what == "punct" and text == close:
            return out, pos + 1
        if what != "ident" or text not in SCHEMA[message]:
            raise ValueError(f"text proto: {message} has no field {text!r}")
        number, kind, sub = SCHEMA[message][text]
        pos += 1
        if pos < len(tokens) and tokens[pos] == ("punct", ":"):
            pos += 1
        if pos >= len(tokens):
            raise ValueError(f"text proto: field {text} has no value")
        if kind in ("message", "map"):
            opener = tokens[pos]
            if opener not in (("punct", "{"), ("punct", "<")):
                raise ValueError(f"text proto: field {text} takes a message in braces")
            closer = "}" if opener[1] == "{" else ">"
            if kind == "map":
                entry, pos = _parse_map_entry(sub, tokens, pos + 1, closer, depth + 1)
                out.setdefault(text, {})[entry[0]] = entry[1]
                continue
            value, pos = _parse_message(sub, tokens, pos + 1, closer, depth + 1)  # type: ignore[arg-type]
        else:
            value, pos = _scalar(kind, tokens[pos], text), pos + 1
        repeated = kind == "message" or text in ("errors", "warnings", "hostnames", "child_id")
        if repeated:
            out.setdefault(text, []).append(value)
        else:
            out[text] = value
    if close is not None:
        raise ValueError(f"text proto: a message of {message} is not closed")
    return out, pos


def _parse_map_entry(value_message: str | None, tokens: list[tuple[str, str]], pos: int, close: str, depth: int
                     ) -> tuple[tuple[int, dict[str, Any]], int]:
    key, value = 0, {}
    while pos < len(tokens):
        what, text = tokens[pos]
        if what == "punct" and text == close:
            return (key, value), pos + 1
        if what == "punct" and text in (";", ","):
            pos += 1
            continue
        pos += 1
        if pos < len(tokens) and tokens[pos] == ("punct", ":"):
            pos += 1
        if text == "key":
            key, pos = _scalar("int64", tokens[pos], "key"), pos + 1
        elif text == "value":
            opener = tokens[pos]
            if opener not in (("punct", "{"), ("punct", "<")):
                raise ValueError("text proto: a map's value takes a message in braces")
            value, pos = _parse_message(value_message, tokens, pos + 1,  # type: ignore[arg-type]
                                        "}" if opener[1] == "{" else ">", depth + 1)
        else:
            raise ValueError(f"text proto: a map entry has no field {text!r}")
    raise ValueError("text proto: a map entry is not closed")


def text_to_xspace(text: str) -> bytes:
    """A serialized XSpace from its protobuf text format."""
    message, _ = _parse_message("XSpace", list(_tokens(text)), 0, None, 0)
    return encode("XSpace", message)


# ---------------------------------------------------------------------------------------------------------------
# pprof (github.com/google/pprof proto/profile.proto): Profile { sample_type 1 (ValueType: type 1, unit 2), sample 2
# (Sample: location_id 1, value 2, label 3 (Label: key 1, str 2)), location 4 (Location: id 1, line 4 (Line:
# function_id 1, line 2)), function 5 (Function: id 1, name 2, system_name 3, filename 4), string_table 6 }
def _bytes_field(number: int, raw: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(raw)) + raw


def _int_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def pprof(sample_types: list[tuple[str, str]], samples: list[tuple[list[str], list[int], dict[str, str]]]) -> bytes:
    """A serialized pprof Profile: per sample, its stack (function names, innermost first: one location each), its
    values (one per sample type, (type, unit)), and its string labels."""
    strings: dict[str, int] = {"": 0}

    def index(text: str) -> int:
        return strings.setdefault(text, len(strings))

    out = bytearray()
    for kind, unit in sample_types:
        out += _bytes_field(1, _int_field(1, index(kind)) + _int_field(2, index(unit)))
    functions: dict[str, int] = {}
    for stack, values, labels in samples:
        ids = [functions.setdefault(name, len(functions) + 1) for name in stack]
        body = _bytes_field(1, b"".join(_varint(i) for i in ids))
        body += _bytes_field(2, b"".join(_varint(v) for v in values))
        for key, text in labels.items():
            body += _bytes_field(3, _int_field(1, index(key)) + _int_field(2, index(text)))
        out += _bytes_field(2, body)
    for name, i in functions.items():  # (one location per function: no addresses, no lines)
        out += _bytes_field(4, _int_field(1, i) + _bytes_field(4, _int_field(1, i)))
    for name, i in functions.items():
        out += _bytes_field(5, _int_field(1, i) + _int_field(2, index(name)) + _int_field(3, index(name)))
    for text in strings:
        out += _bytes_field(6, text.encode())
    return bytes(out)


__all__ = ["Event", "Line", "Plane", "SCHEMA", "encode", "pprof", "read_xspace", "text_to_xspace", "trace_xspace"]
