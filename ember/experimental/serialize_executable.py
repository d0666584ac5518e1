"""ember.experimental.serialize_executable, as jax.experimental.serialize_executable: a compiled function
(`ember.jit(f).lower(...).compile()`) as bytes, loaded again, in this or another process, without compiling.

    payload, in_tree, out_tree = serialize(compiled)
    loaded = deserialize_and_load(payload, in_tree, out_tree)   # a Compiled: loaded(*args, **kwargs) as compiled's

As JAX's, serialize returns the pytree structures apart from the bytes (the arguments' ((args...), {kwargs}) and
the results'); deserialize_and_load takes them back, and refuses structures other than those the payload records.

Loading runs machine code: the payload holds the plugin's serialization of the executable (the persistent
compilation cache's entries are the same thing, docs/security.md), which the plugin loads into this process. Load
only payloads you made yourself, kept where only you can write them: the checks below find a damaged or foreign
payload, never a malicious one (anyone who can write a payload can write a valid digest).

The payload (ember's own format; nothing in it is unpickled or evaluated): a header of MAGIC, the format version
(one byte), the lengths of its three sections (8 bytes each, little-endian) and a SHA-256 of the header and
sections; then the sections: a UTF-8 JSON object describing the program (the ember version, the plugin, the number
of devices and the devices it runs on, its name, its StableHLO text, the types of its inputs, outputs and
constants, which inputs are donated, its pytree structures, and for a program partitioned over several devices the
shardings of its inputs and outputs), the executable, and the raw bytes of the constants the program closed over
(they are its leading parameters). deserialize_and_load checks all of it before the plugin sees the executable:
a payload that is truncated, corrupt, of another format, from another ember version, another plugin or another
number of devices, or whose pytree structures are not the ones given, is a ValueError naming
deserialize_and_load and what is wrong."""
from __future__ import annotations

import hashlib as _hashlib
import json as _json
import math as _math
from typing import Any as _Any, Sequence as _Sequence

import numpy as _np

from ember._api.export import _Invalid, _aval_from_json, _aval_json
from ember._api.stages import Compiled as _Compiled, Lowered as _Lowered
from ember._control.exported import ExportedModule as _ExportedModule, call_exported_p as _call_exported_p
from ember._core import IR as _IR, ShapedArray as _ShapedArray
from ember._core import dtypes as _dt
from ember._core.ir import Eqn as _Eqn, Var as _Var
from ember._core.pytree import PyTreeDef as _PyTreeDef
from ember._core.sharding import AxisType as _AxisType, Mesh as _Mesh, NamedSharding as _NamedSharding
from ember._core.sharding import PartitionSpec as _PartitionSpec, SingleDeviceSharding as _SingleDeviceSharding
from ember._runtime import callbacks as _callbacks, pjrt as _pjrt
from ember._runtime.backends import get_client as _get_client
from ember._runtime.spmd import SpmdProgram as _SpmdProgram, sharded_call_plan as _sharded_call_plan
from ember._runtime.compile_cache import package_version as _package_version, plugin_identity as _plugin_identity

MAGIC = b"ember-serialized-executable\n"
FORMAT = 1
_DIGEST = 32
_HEADER = len(MAGIC) + 1 + 3 * 8 + _DIGEST
_KEYS = {"ember", "plugin", "platform", "device_count", "device_ids", "name", "text", "in_avals", "out_avals",
         "const_avals", "donated", "donors", "in_tree", "out_tree", "shardings"}
_WHO = "deserialize_and_load"


def serialize(compiled: _Compiled) -> tuple[bytes, _PyTreeDef, _PyTreeDef]:
    """(payload, in_tree, out_tree) of a compiled function (jit(f).lower(...).compile()): the payload is bytes
    (see the module docstring), in_tree the structure of its arguments ((args...), {kwargs}: its args_info's), and
    out_tree its results'. A program that calls back into Python (pure_callback, io_callback, debug.print) cannot
    be serialized: its callbacks are functions of this process (a ValueError, as is anything but a Compiled)."""
    if not isinstance(compiled, _Compiled):
        raise TypeError(f"serialize: expected a Compiled (ember.jit(f).lower(...).compile()), got "
                        f"{type(compiled).__name__}")
    name, ir = compiled.name, compiled.ir
    if _callbacks.TARGET in compiled.text:
        raise ValueError(f"serialize: {name} calls back into Python (a host callback: pure_callback, io_callback, "
                         "debug.callback or debug.print), a function of this process that a loaded executable "
                         "could not reach; serialize the function without it")
    avals = [*ir.in_avals, *ir.out_avals, *(v.aval for v in ir.const_vars)]
    if any(_dt.is_token(a) for a in avals):
        raise ValueError(f"serialize: {name} takes or returns effect tokens (ordered effects), which a serialized "
                         "executable does not carry")
    client = compiled._device.client
    if compiled.executable is not None:
        executable = compiled.executable
        device_ids, shardings = [executable._device.id], None
    else:  # (partitioned over several devices: the program its calls run, compiled now if need be)
        program = compiled._partitioned()
        executable = program.executable
        device_ids = [d.id for d in program.devices]
        shardings = {"in": [_sharding_json(s, name) for s in program.in_shardings],
                     "out": [_sharding_json(s, name) for s in program.out_shardings]}
    try:
        code = executable.serialize()
    except _pjrt.PjrtError as err:
        raise ValueError(f"serialize: the plugin could not serialize {name} ({err})") from None
    consts = [_np.ascontiguousarray(_np.asarray(c, dtype=v.aval.dtype)) for c, v in zip(ir.consts, ir.const_vars)]
    donated = [bool(info.donated) for info in _leaves(compiled.args_info, compiled.in_tree)]
    meta = {"ember": _package_version(), "plugin": _plugin_identity(client), "platform": client.platform_name,
            "device_count": len(client.devices), "device_ids": device_ids, "name": name, "text": compiled.text,
            "in_avals": [_aval_json(a) for a in ir.in_avals], "out_avals": [_aval_json(a) for a in ir.out_avals],
            "const_avals": [_aval_json(v.aval) for v in ir.const_vars], "donated": donated,
            "donors": None if compiled._donors is None else list(compiled._donors),
            "in_tree": repr(compiled.in_tree), "out_tree": repr(ir.out_tree), "shardings": shardings}
    sections = [_json.dumps(meta, separators=(",", ":")).encode(), code, b"".join(c.tobytes() for c in consts)]
    head = MAGIC + bytes([FORMAT]) + b"".join(len(s).to_bytes(8, "little") for s in sections)
    digest = _hashlib.sha256(head)
    for section in sections:
        digest.update(section)
    return head + digest.digest() + b"".join(sections), compiled.in_tree, ir.out_tree


def deserialize_and_load(serialized: bytes, in_tree: _PyTreeDef, out_tree: _PyTreeDef, backend: _Any = None,
                         execution_devices: _Sequence[_Any] | None = None) -> _Compiled:
    """The Compiled that serialize(compiled) made serialized, loaded (not compiled again) onto backend (None, a
    platform name such as "cpu", or a Client): called as compiled is, with the same checks of its arguments; it
    runs on the devices it was compiled for (execution_devices, if given, must hold them).

    WARNING: loading runs machine code from the payload in this process. Load only payloads you made yourself and
    kept where no one else can write (docs/security.md): the checks find damage, not malice."""
    client = backend if isinstance(backend, _pjrt.Client) else _client_of(backend)
    meta, code, const_data = _sections(serialized)
    _check_origin(meta, client)
    _check_tree(meta, "in_tree", in_tree)
    _check_tree(meta, "out_tree", out_tree)
    try:
        in_avals = [_aval_from_json(a, f"in_avals[{i}]") for i, a in enumerate(_list(meta, "in_avals"))]
        out_avals = [_aval_from_json(a, f"out_avals[{i}]") for i, a in enumerate(_list(meta, "out_avals"))]
        const_avals = [_aval_from_json(a, f"const_avals[{i}]") for i, a in enumerate(_list(meta, "const_avals"))]
    except _Invalid as err:
        raise ValueError(f"{_WHO}: the payload's {err}") from None
    if in_tree.num_leaves != len(in_avals) or out_tree.num_leaves != len(out_avals):
        raise ValueError(f"{_WHO}: the payload's program takes {len(in_avals)} and returns {len(out_avals)} arrays, "
                         f"but in_tree has {in_tree.num_leaves} leaves and out_tree {out_tree.num_leaves}")
    donated, donors = _flags(meta, "donated", len(in_avals)), _flags(meta, "donors", len(in_avals), optional=True)
    name, text = meta["name"], meta["text"]
    if not isinstance(name, str) or not isinstance(text, str):
        raise ValueError(f"{_WHO}: the payload's name and text are not strings")
    consts = _consts(const_avals, const_data)
    devices = _devices(meta, client, execution_devices)
    ir = _program_ir(name, text, in_avals, out_avals, const_avals, consts, out_tree)
    try:
        executable = client.deserialize(code, text, devices if meta["shardings"] is not None else None)
    except _pjrt.PjrtError as err:
        raise ValueError(f"{_WHO}: the plugin could not load the executable of {name} ({err})") from None
    if meta["shardings"] is None:
        if executable._device is not devices[0]:
            raise ValueError(f"{_WHO}: the executable of {name} loaded onto device {executable._device.id}, not "
                             f"the device {devices[0].id} it was compiled for")
        lowered = _Lowered.restored(ir, name, text, in_tree, donated, donors)
        return _Compiled(lowered, executable)
    return _partitioned(meta["shardings"], ir, name, text, in_tree, donated, donors, devices, executable)


def _partitioned(data: _Any, ir: _IR, name: str, text: str, in_tree: _PyTreeDef, donated: list[bool],
                 donors: list[bool] | None, devices: list[_Any], executable: _Any) -> _Compiled:
    """The Compiled of a program partitioned over several devices: its calls run the loaded executable with the
    shardings it was compiled for (the program ember's calls would partition and compile for them, found in its
    cache of partitioned programs)."""
    if not isinstance(data, dict) or set(data) != {"in", "out"} or not isinstance(data["in"], list) or \
            not isinstance(data["out"], list) or len(data["in"]) != len(ir.in_vars) or \
            len(data["out"]) != len(ir.outs):
        raise ValueError(f"{_WHO}: the payload's shardings are not one per input and one per output")
    ins = [_sharding_from_json(s, devices, f"in_shardings[{i}]") for i, s in enumerate(data["in"])]
    outs = [_sharding_from_json(s, devices, f"out_shardings[{i}]") for i, s in enumerate(data["out"])]
    lowered = _Lowered.restored(ir, name, text, in_tree, donated, donors, (ins, outs))
    compiled = _Compiled(lowered, None)
    key, plan = _sharded_call_plan(name, ir, None, [None] * len(ins), ins, outs, compiled.describe_arg)
    if list(plan[0]) != devices:
        raise ValueError(f"{_WHO}: the payload's shardings name the devices {[d.id for d in plan[0]]}, its "
                         f"executable runs on {[d.id for d in devices]}")
    program = _SpmdProgram(ir, name, *plan, donors=compiled._donors, loaded=(text, executable))
    compiled._spmd_programs.store(key, program)
    return compiled


def _client_of(backend: _Any) -> _pjrt.Client:
    if backend is not None and not isinstance(backend, str):
        raise TypeError(f"{_WHO}: backend must be None, a platform name or a Client, got {type(backend).__name__}")
    return _get_client(backend)


def _sections(serialized: _Any) -> tuple[dict[str, _Any], bytes, bytes]:
    """(the program's description, the executable, the constants' bytes) of a payload whose header, lengths and
    digest are checked."""
    if not isinstance(serialized, bytes | bytearray | memoryview):
        raise TypeError(f"{_WHO}: serialized must be the bytes serialize returned, got {type(serialized).__name__}")
    data = bytes(serialized)
    if not data.startswith(MAGIC[:min(len(data), len(MAGIC))]) or len(data) < len(MAGIC) + 1:
        if data.startswith(MAGIC[:len(data)]):
            raise ValueError(f"{_WHO}: the payload is truncated ({len(data)} bytes, shorter than its header)")
        raise ValueError(f"{_WHO}: not a serialized ember executable (it does not start with {MAGIC!r})")
    if data[len(MAGIC)] != FORMAT:
        raise ValueError(f"{_WHO}: the payload is of format {data[len(MAGIC)]}; this ember ({_package_version()}) "
                         f"reads format {FORMAT}")
    if len(data) < _HEADER:
        raise ValueError(f"{_WHO}: the payload is truncated ({len(data)} bytes, shorter than its header)")
    start = len(MAGIC) + 1
    lengths = [int.from_bytes(data[start + 8 * i:start + 8 * i + 8], "little") for i in range(3)]
    if _HEADER + sum(lengths) != len(data):
        what = "truncated" if _HEADER + sum(lengths) > len(data) else "longer than its header says"
        raise ValueError(f"{_WHO}: the payload is {what} ({len(data)} bytes; its header says "
                         f"{_HEADER + sum(lengths)})")
    digest = _hashlib.sha256(data[:_HEADER - _DIGEST])
    digest.update(data[_HEADER:])
    if digest.digest() != data[_HEADER - _DIGEST:_HEADER]:
        raise ValueError(f"{_WHO}: the payload is corrupt (its SHA-256 digest does not match its content)")
    ends = [_HEADER + sum(lengths[:i + 1]) for i in range(3)]
    try:
        meta = _json.loads(data[_HEADER:ends[0]].decode())
    except (UnicodeDecodeError, ValueError, RecursionError) as err:  # (RecursionError: nesting too deep)
        raise ValueError(f"{_WHO}: the payload's description is not JSON ({type(err).__name__}: {err})") from None
    if not isinstance(meta, dict) or set(meta) != _KEYS:
        raise ValueError(f"{_WHO}: the payload's description is not an object of the keys {sorted(_KEYS)}")
    return meta, data[ends[0]:ends[1]], data[ends[1]:ends[2]]


def _check_origin(meta: dict[str, _Any], client: _pjrt.Client) -> None:
    """The payload was made by this ember, with this plugin, for as many devices as the client has."""
    if meta["ember"] != _package_version():
        raise ValueError(f"{_WHO}: the payload was made by ember {meta['ember']!r}, this is ember "
                         f"{_package_version()!r} (an executable is loaded by the ember and plugin that made it)")
    if meta["platform"] != client.platform_name:
        raise ValueError(f"{_WHO}: the payload was compiled for the platform {meta['platform']!r}, not "
                         f"{client.platform_name!r}")
    if meta["plugin"] != _plugin_identity(client):
        raise ValueError(f"{_WHO}: the payload was made by another PJRT plugin ({meta['plugin']!r}; this process "
                         f"runs {_plugin_identity(client)!r})")
    if meta["device_count"] != len(client.devices):
        raise ValueError(f"{_WHO}: the payload was compiled where the backend had {meta['device_count']} devices; "
                         f"this one has {len(client.devices)}")


def _check_tree(meta: dict[str, _Any], key: str, tree: _Any) -> None:
    if not isinstance(tree, _PyTreeDef):
        raise TypeError(f"{_WHO}: {key} must be the PyTreeDef serialize returned, got {type(tree).__name__}")
    if repr(tree) != meta[key]:
        raise ValueError(f"{_WHO}: {key} is {tree!r}, but the payload was serialized with {meta[key]}")


def _list(meta: dict[str, _Any], key: str) -> list[_Any]:
    value = meta[key]
    if not isinstance(value, list):
        raise ValueError(f"{_WHO}: the payload's {key} is not a list")
    return value


def _flags(meta: dict[str, _Any], key: str, count: int, optional: bool = False) -> list[bool] | None:
    value = meta[key]
    if value is None and optional:
        return None
    if not isinstance(value, list) or len(value) != count or not all(type(v) is bool for v in value):
        raise ValueError(f"{_WHO}: the payload's {key} is not a list of {count} booleans")
    return value


def _consts(avals: list[_ShapedArray], data: bytes) -> list[_np.ndarray]:
    """The program's constants, read from their raw bytes (their sizes must add up to the section's)."""
    sizes = [_math.prod(a.shape) * a.dtype.itemsize for a in avals]
    if sum(sizes) != len(data):
        raise ValueError(f"{_WHO}: the payload's constants are {len(data)} bytes, but their types need {sum(sizes)}")
    consts, offset = [], 0
    for aval, size in zip(avals, sizes):
        consts.append(_np.frombuffer(data, aval.dtype, _math.prod(aval.shape), offset).reshape(aval.shape).copy())
        offset += size
    return consts


def _devices(meta: dict[str, _Any], client: _pjrt.Client, execution_devices: _Sequence[_Any] | None
             ) -> list[_Any]:
    """The client's devices the program was compiled for (execution_devices, when given, must be the client's and
    hold them)."""
    ids = meta["device_ids"]
    by_id = {d.id: d for d in client.devices}
    if not isinstance(ids, list) or not ids or not all(type(i) is int and i in by_id for i in ids):
        raise ValueError(f"{_WHO}: the payload's device_ids {ids!r} are not devices of the backend "
                         f"({sorted(by_id)})")
    if execution_devices is not None:
        given = list(execution_devices)
        if any(getattr(d, "client", None) is not client for d in given):
            raise ValueError(f"{_WHO}: execution_devices must be devices of the backend's client ({client})")
        missing = [i for i in ids if by_id[i] not in given]
        if missing:
            raise ValueError(f"{_WHO}: the executable runs on the devices {ids} it was compiled for; "
                             f"execution_devices {[d.id for d in given]} lack {missing}")
    return [by_id[i] for i in ids]


def _program_ir(name: str, text: str, in_avals: list[_ShapedArray], out_avals: list[_ShapedArray],
                const_avals: list[_ShapedArray], consts: list[_np.ndarray], out_tree: _PyTreeDef) -> _IR:
    """An IR that stands for the loaded program: its constants and inputs, one call_exported of its StableHLO
    text (its @main takes the constants first), its outputs. The Compiled reads its types and constants from it; it
    is lowered only where the program must be compiled anew (a call with arguments sharded otherwise)."""
    const_vars, in_vars = [_Var(a) for a in const_avals], [_Var(a) for a in in_avals]
    outs = [_Var(a) for a in out_avals]
    module = _ExportedModule(text, [*const_avals, *in_avals], out_avals, None, name)
    eqn = _Eqn(_call_exported_p, [*const_vars, *in_vars], outs, {"module": module}, None)
    return _IR(const_vars, consts, in_vars, [eqn], outs, out_tree)


def _leaves(tree: _Any, treedef: _PyTreeDef) -> list[_Any]:
    return treedef.flatten_up_to(tree)


def _sharding_json(sharding: _Any, name: str) -> dict[str, _Any]:
    """A NamedSharding as JSON: its mesh (the devices' ids in the mesh's shape, its axes' names and types) and
    its PartitionSpec (an entry per dimension: null, an axis name or a list of names); a SingleDeviceSharding as
    its device's id."""
    if isinstance(sharding, _SingleDeviceSharding):
        return {"device": sharding._device.id}
    if not isinstance(sharding, _NamedSharding) or not all(isinstance(n, str) for n in sharding.mesh.axis_names):
        raise ValueError(f"serialize: {name} is partitioned with a {type(sharding).__name__} ({sharding}); only "
                         "NamedShardings over meshes with str axis names and SingleDeviceShardings are serialized")
    mesh = sharding.mesh
    ids = _np.vectorize(lambda d: d.id, otypes=[int])(mesh.devices).tolist()
    spec = [list(e) if isinstance(e, tuple) else e for e in sharding.spec]
    return {"mesh": {"device_ids": ids, "axis_names": list(mesh.axis_names),
                     "axis_types": [t.name for t in mesh.axis_types]}, "spec": spec}


def _sharding_from_json(data: _Any, devices: list[_Any], what: str) -> _Any:
    """The sharding _sharding_json wrote, over the program's devices (a ValueError naming what is malformed)."""
    by_id = {d.id: d for d in devices}
    problem = ValueError(f"{_WHO}: the payload's {what} is not a sharding over the program's devices "
                         f"{sorted(by_id)}")
    if not isinstance(data, dict):
        raise problem
    if set(data) == {"device"}:
        if data["device"] not in by_id:
            raise problem
        return _SingleDeviceSharding(by_id[data["device"]])
    if set(data) != {"mesh", "spec"} or not isinstance(data["mesh"], dict) or \
            set(data["mesh"]) != {"device_ids", "axis_names", "axis_types"}:
        raise problem
    mesh = data["mesh"]
    try:
        grid = _np.array(mesh["device_ids"], dtype=object)
        if not all(type(i) is int and i in by_id for i in grid.flat):
            raise problem
        types = tuple(_AxisType[t] for t in mesh["axis_types"])
        spec = _PartitionSpec(*(tuple(e) if isinstance(e, list) else e for e in data["spec"]))
        devices_grid = _np.vectorize(lambda i: by_id[i], otypes=[object])(grid)
        return _NamedSharding(_Mesh(devices_grid, tuple(mesh["axis_names"]), types), spec)
    except (KeyError, TypeError, ValueError) as err:
        if err is problem:
            raise
        raise ValueError(f"{_WHO}: the payload's {what} is not a valid sharding ({err})") from None


__all__ = ["deserialize_and_load", "serialize"]
