"""Programs partitioned over several devices by XLA's SPMD partitioner: which devices a call runs on and with
which input shardings (sharded_call_plan), and the compiled program that runs it (SpmdProgram).

A call with a sharded argument, with jit's in_shardings / out_shardings, or of a program whose IR names a mesh (a
sharding constraint, a shard_map) runs here: the IR is lowered with an `mhlo.sharding` on each argument (and on
each result whose sharding is given), compiled for the devices, and run with one argument list per device. XLA
chooses the shardings of the other results; they are read back from the compiled program."""
from __future__ import annotations

import threading
import warnings
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from ember._core import IR
from ember._core.cache import LRUCache
from ember._core.ir import sub_irs
from ember._core.sharding import (AbstractMesh, HloSharding, HloShardingSharding, Mesh, NamedSharding, PartitionSpec,
                                  Sharding, sharding_from_hlo)
from ember._hlo import lower
from ember._hlo.spmd import SpmdPlan, sharding_text as hlo_text
from ember._runtime import pjrt as _pjrt
from ember._runtime.array import Array, canonical_aval
from ember._runtime.compile_cache import compile_hlo_with_cache, compile_spmd_with_cache
from ember._runtime.dispatch import argument_text, devices_text, incompatible_devices, to_buffer
from ember._prims.sharding import inspect_sharding_p
from ember._runtime.sharded import ShardedArray, shards_for
from ember._runtime.xla_proto import fields, hlo_module_shardings


def _placement(value: Any) -> Mesh | Sharding | None:
    if isinstance(value, NamedSharding) and isinstance(value.mesh, AbstractMesh):
        return None  # (a type's sharding, over a mesh without devices: the program is placed by its caller)
    if isinstance(value, Mesh) or (isinstance(value, Sharding) and len(value._device_assignment) > 1):
        return value
    if type(value) is tuple:  # (a pjit's in_shardings / out_shardings)
        return next((p for p in map(_placement, value) if p is not None), None)
    return None


def program_placement(ir: IR) -> Mesh | Sharding | None:
    """The first mesh or multi-device sharding that an equation of ir (or of its sub-IRs) names in its parameters
    (a shard_map's mesh, a sharding constraint's sharding, a nested jit's shardings), or None: a program without
    any runs on one device. (Found once per IR: its lowering, compile and calls all ask.)"""
    found = _placements.get(ir, _UNSEEN)
    if found is _UNSEEN:
        found = _placements[ir] = _find_placement(ir)
    return found


_UNSEEN = object()
_placements: "weakref.WeakKeyDictionary[IR, Any]" = weakref.WeakKeyDictionary()  # ir -> program_placement(ir)


def _find_placement(ir: IR) -> Mesh | Sharding | None:
    eqn = _placing_eqn(ir)
    return None if eqn is None else next(p for p in map(_placement, eqn.params.values()) if p is not None)


def _inspections(ir: IR) -> list[tuple[Any, bool]]:
    """The inspect_sharding equations of ir and of its sub-IRs (ember.debug.inspect_array_sharding), each with
    whether it is inside a sub-IR (a loop body, a branch); remembered per IR."""
    found = _inspected.get(ir)
    if found is None:
        found = _inspected[ir] = []
        for eqn in ir.eqns:
            if eqn.prim is inspect_sharding_p:
                found.append((eqn, False))
            for sub in sub_irs(eqn.params):
                found += [(e, True) for e, _ in _inspections(sub)]
    return found


_inspected: "weakref.WeakKeyDictionary[IR, list[tuple[Any, bool]]]" = weakref.WeakKeyDictionary()


def report_one_device_inspections(ir: IR, device: Any) -> None:
    """Call the callbacks of ir's inspect_array_sharding equations, for a program compiled for one device: the
    sharding is the whole array on that device (JAX's GSPMDSharding({replicated}) of a one-device program). Once
    per IR (a function jitted again whose staged IR is cached compiles without calling them, as in JAX), and once
    per callback and type of value (as JAX, whose lowering lowers equal equations once: every call would be told
    the same)."""
    found = _inspections(ir) if ir.eqns else ()
    if found and ir not in _reported:
        _reported.add(ir)
        told = set()
        for eqn, _ in found:
            callback, aval = eqn.params["callback"], eqn.inputs[0].aval
            if (id(callback), aval) not in told:
                told.add((id(callback), aval))
                callback(HloShardingSharding((device,), HloSharding.replicated()))


_reported: "weakref.WeakSet[IR]" = weakref.WeakSet()


def _report_inspections(ir: IR, name: str, devices: tuple[Any, ...], in_shardings: Sequence[Sharding],
                        out_shardings: Sequence[Sharding | None], mesh: Mesh | None) -> None:
    """Call the callbacks of ir's inspect_array_sharding equations, for a program partitioned over devices, with
    the sharding XLA's partitioner chose for each inspected value: read from a second compile of the program in
    which those values are also outputs whose shardings XLA chooses (as it chooses the results'; the plugin has no
    custom-partitioner hook for JAX's InspectSharding custom call). Values inside a loop or a branch cannot be
    outputs: their callbacks are not called (a warning says so)."""
    found = _inspections(ir)
    if any(nested for _, nested in found):
        warnings.warn(f"{name}: inspect_array_sharding inside a loop or a branch of a program partitioned over "
                      "several devices is not supported (ember reads the sharding XLA chose only for values of the "
                      "program's top level); its callback is not called", stacklevel=2)
    top = [eqn for eqn, nested in found if not nested]
    if not top:
        return
    values = [eqn.inputs[0] for eqn in top]
    probe = IR(ir.const_vars, ir.consts, ir.in_vars, ir.eqns, [*ir.outs, *values])
    given = [*out_shardings, *[None] * len(values)]
    executable = devices[0].client.compile_spmd(spmd_text(probe, devices, in_shardings, given), list(devices),
                                                [s is None for s in given])
    chosen = hlo_module_shardings(executable.optimized_program()[1])[1][len(ir.outs):]
    for k, eqn in enumerate(top):
        hlo = chosen[k] if k < len(chosen) else HloSharding.replicated()
        eqn.params["callback"](sharding_from_hlo(hlo, devices, eqn.inputs[0].aval.ndim, mesh))


def _written_shardings(ir: IR) -> list[Sharding]:
    """The shardings ir's top-level equations write (a shard_map's out_specs over its mesh, a sharding
    constraint's): the forms a result's sharding is given in when XLA chose the same."""
    found: list[Sharding] = []
    for eqn in ir.eqns:
        if "out_specs" in eqn.params and isinstance(eqn.params.get("mesh"), Mesh):
            found += [NamedSharding(eqn.params["mesh"], spec) for spec in eqn.params["out_specs"]]
        elif isinstance(eqn.params.get("sharding"), NamedSharding):
            found.append(eqn.params["sharding"])
    return found


def placement_devices(placement: Mesh | Sharding) -> tuple[Any, ...]:
    return placement._flat_devices if isinstance(placement, Mesh) else tuple(placement._device_assignment)


def _mesh_of(shardings: Sequence[Any]) -> Mesh | None:
    """The mesh of the first NamedSharding (or Mesh) among shardings."""
    return next((s.mesh if isinstance(s, NamedSharding) else s for s in shardings
                 if isinstance(s, (NamedSharding, Mesh))), None)


def replicated(devices: Sequence[Any], mesh: Mesh | None) -> Sharding:
    """The sharding that holds a whole copy of an array on each of devices."""
    key = (tuple(devices), mesh)
    found = _replicated.lookup(key)
    if found is None:
        if mesh is not None and mesh._flat_devices == tuple(devices):
            found = NamedSharding(mesh, PartitionSpec())
        else:
            found = NamedSharding(Mesh(np.array(devices, dtype=object), ("replicas",)), PartitionSpec())
        _replicated.store(key, found)
    return found


_replicated = LRUCache(64)  # (devices, mesh) -> the replicated sharding (few: one per mesh)


def sharded_call_plan(name: str, ir: IR, placement: Mesh | Sharding | None, args: Sequence[Any],
                      in_shardings: Sequence[Any] | None, out_shardings: Sequence[Any] | None,
                      describe: Callable[[int], str] | None = None, context: Mesh | None = None
                      ) -> tuple[Any, tuple[Any, ...]]:
    """(a cache key, (devices, the sharding of each input, the given sharding or None of each output, the mesh))
    of a call: the devices are those of the first given input sharding, else of the first sharded argument, else
    of the given output shardings, else of the program's own mesh, else of the context mesh (set_mesh); every
    sharded argument, given sharding and one-device argument committed to its device must name the same set of
    devices, else JAX's ValueError (describe(i) names argument i there: "argument x of f"). Uncommitted one-device
    arguments are copied to every device (replicated)."""
    n_in, n_out = len(args), len(ir.out_avals)
    given_in = list(in_shardings) if in_shardings is not None else [None] * n_in
    given_out = list(out_shardings) if out_shardings is not None else [None] * n_out
    # (a result whose type has an explicit sharding is split so: JAX's explicit sharding mode)
    given_out = [s if s is not None or a.explicit is None or not isinstance(a.explicit.mesh, Mesh) else a.explicit
                 for s, a in zip(given_out, ir.out_avals)]
    # (what, index, the sharding or mesh): the placements the call names, described only in an error
    named: list[tuple[str, int, Any]] = [("in_shardings", i, s) for i, s in enumerate(given_in) if s is not None]
    named += [("argument", i, x.sharding) for i, x in enumerate(args)
              if given_in[i] is None and type(x) is ShardedArray]
    named += [("out_shardings", i, s) for i, s in enumerate(given_out) if s is not None]
    if placement is not None:
        named.append(("a mesh inside the program", 0, placement))
    if context is not None:
        named.append(("context mesh", 0, context))
    devices_of = [placement_devices(p) for _, _, p in named]
    multi = [d for d in devices_of if len(d) > 1]
    devices = (multi or devices_of)[0]
    wanted = set(devices)
    # (one-device arguments committed to their device, as JAX checks them: they are not resharded)
    committed = [("argument", i, x.sharding) for i, x in enumerate(args)
                 if given_in[i] is None and type(x) is Array and x._committed]
    for entry, their in [*zip(named, devices_of), *((c, (c[2]._device,)) for c in committed)]:
        if (len(their) > 1 or entry[0] == "argument") and their != devices and set(their) != wanted:
            first = named[devices_of.index(devices)]
            pair = (entry, first) if entry[0] == "argument" and (first[0] != "argument" or entry[1] < first[1]) \
                else (first, entry)
            raise incompatible_devices(*(_what(e, ir, args, describe) for e in pair))
    mesh = _mesh_of(given_in + [x.sharding for x in args if type(x) is ShardedArray] + given_out +
                    [placement, context])
    ins: list[Sharding] = []
    for i, (x, s) in enumerate(zip(args, given_in)):
        if s is None:
            if type(x) is ShardedArray and set(x.sharding._device_assignment) == wanted:
                s = x.sharding
            else:
                s = replicated(devices, mesh)
        elif len(s._device_assignment) == 1 and len(devices) > 1:
            raise ValueError(f"{name}: in_shardings[{i}] ({s}) names one device, the call runs on {_ids(devices)}")
        ins.append(s)
    key = (devices, tuple(ins), tuple(given_out), mesh)  # (the mesh: the shardings XLA's choices are named over)
    return key, (tuple(devices), ins, given_out, mesh)


def _what(entry: tuple[str, int, Any], ir: IR, args: Sequence[Any], describe: Callable[[int], str] | None) -> str:
    """JAX's words for a placement of a call in its incompatible-devices error."""
    kind, i, placement = entry
    devices = placement_devices(placement)
    if kind == "argument":
        return argument_text(describe(i) if describe is not None else f"argument args[{i}]", args[i].aval, devices)
    if kind == "in_shardings":
        return f"explicit input sharding {devices_text(devices)}"
    if kind == "out_shardings":
        return f"explicit output sharding {devices_text(devices)}"
    if kind == "context mesh":
        return f"jit's context mesh {devices_text(devices)}"
    eqn = _placing_eqn(ir)
    where = "" if eqn is None or eqn.source is None else f" at {eqn.source.filename}:{eqn.source.lineno}"
    return f"{eqn.prim.name if eqn is not None else 'a sharding'} inside jit {devices_text(devices)}{where}"


def _ids(devices: Sequence[Any]) -> str:
    return "devices " + ", ".join(str(d.id) for d in devices)


def _placing_eqn(ir: IR) -> Any:
    """The first equation of ir (or of its sub-IRs) naming a mesh or multi-device sharding in its parameters: the one
    whose placement program_placement(ir) gives, and which an error message names."""
    for eqn in ir.eqns:
        if any(_placement(value) is not None for value in eqn.params.values()):
            return eqn
        for sub in sub_irs(eqn.params):
            found = _placing_eqn(sub)
            if found is not None:
                return found
    return None


def spmd_text(ir: IR, devices: tuple[Any, ...], in_shardings: Sequence[Sharding],
              out_shardings: Sequence[Sharding | None], donors: Sequence[bool] | None = None) -> str:
    """The StableHLO module of ir partitioned over devices, with these input shardings and the given (or, for
    None, XLA-chosen) output shardings; donors: per input, whether its buffers are given up."""
    in_avals = [v.aval for v in ir.in_vars]
    plan = SpmdPlan(devices, [hlo_text(s, a.ndim, devices) for s, a in zip(in_shardings, in_avals)],
                    [None if s is None else hlo_text(s, a.ndim, devices) for s, a in zip(out_shardings, ir.out_avals)])
    return lower(ir, donors, spmd=plan)


def _typed(sharding: Sharding, ndim: int) -> Sharding:
    """A sharding XLA chose, over a mesh of Explicit axes given one spec entry per dimension (P('x', None), not
    P('x',)): the sharding of a value's type, as JAX's results there have."""
    if isinstance(sharding, NamedSharding) and len(sharding.spec) < ndim and sharding.mesh.axis_names and \
            sharding.mesh.are_all_axes_explicit:
        spec = sharding.spec
        return sharding.update(spec=spec.update(partitions=(*spec, *[None] * (ndim - len(spec)))))
    return sharding


class SpmdProgram:
    """An IR compiled for several devices with given input shardings (and given or XLA-chosen output shardings);
    called with the IR's inputs (sharded or not: each is split as its sharding says, reusing its shards when it is
    sharded so) it returns ShardedArrays (Arrays for outputs XLA places on one device)."""

    def __init__(self, ir: IR, name: str, devices: tuple[Any, ...], in_shardings: list[Sharding],
                 out_shardings: list[Sharding | None], mesh: Mesh | None, donors: Sequence[bool] | None = None,
                 loaded: tuple[str, Any] | None = None):
        """donors: per input, whether a call gives its buffers up (a call then deletes a donated ShardedArray
        whose own shards it took; a value split for the call is a copy, kept, as JAX's). loaded: (its partitioned
        StableHLO text, its executable) of a program compiled before and loaded
        (ember.experimental.serialize_executable), used instead of partitioning and compiling ir."""
        self.ir, self.name, self.devices = ir, name, devices
        self._position = {d: i for i, d in enumerate(devices)}  # device -> its partition id
        self.in_avals = [v.aval for v in ir.in_vars]
        self.in_shardings = in_shardings
        if loaded is not None:
            self.text, self.executable = loaded
        else:
            self.text = spmd_text(ir, devices, in_shardings, out_shardings, donors)
            client = devices[0].client
            if _inspections(ir):  # (ember.debug.inspect_array_sharding: its callbacks are called at compile time)
                _report_inspections(ir, name, devices, in_shardings, out_shardings, mesh)
            self.executable = compile_spmd_with_cache(client, self.text, list(devices),
                                                      [s is None for s in out_shardings])
        optimized = self.executable.optimized_program()[1]
        # (a small program whose partitions do not communicate runs as one program per device: see _run_locally)
        self._local: bytes | list[Any] | None = _local_module(optimized) if _small(self.executable) else None
        self._calls = 0
        if any(s is None for s in out_shardings):
            _, chosen = hlo_module_shardings(optimized)
            known = [*in_shardings, *_written_shardings(ir)]
            out_shardings = [s if s is not None else _typed(sharding_from_hlo(
                chosen[i] if i < len(chosen) else HloSharding.replicated(), devices, a.ndim, mesh, preferred=known),
                a.ndim) for i, (s, a) in enumerate(zip(out_shardings, ir.out_avals))]
        self.out_shardings: list[Sharding] = out_shardings  # type: ignore[assignment]
        # per device, the (shape, dtype) of each output's part there
        indices = [s.devices_indices_map(a.shape) for s, a in zip(self.out_shardings, ir.out_avals)]
        self._out_specs = [[(_part_shape(index[d], a.shape), a.dtype) for index, a in zip(indices, ir.out_avals)]
                           for d in devices]
        self._consts: list[list[_pjrt.Buffer]] | None = None

    def _const_buffers(self) -> list[list[_pjrt.Buffer]]:
        """Per device, the IR's constants there (replicated)."""
        if self._consts is None:
            per_device = []
            for device in self.devices:
                buffers = []
                for i, (value, var) in enumerate(zip(self.ir.consts, self.ir.const_vars)):
                    if isinstance(value, Array):
                        value = value._value()
                    buffers.append(to_buffer(value, var.aval, f"{self.name}: constant {i}", device))
                per_device.append(buffers)
            self._consts = per_device
        return self._consts

    def __call__(self, args: Sequence[Any], donating: Sequence[int] = ()) -> list[Any]:
        per_device = [list(consts) for consts in self._const_buffers()]
        position = self._position
        taken = []  # (the given-up ShardedArrays whose own shards the program takes)
        for i, (x, aval, sharding) in enumerate(zip(args, self.in_avals, self.in_shardings)):
            buffers = shards_for(x, aval, sharding, f"{self.name}: argument {i}")
            if donating and i in donating and type(x) is ShardedArray and buffers is x._shards:
                taken.append(x)
            for device, buffer in zip(sharding._device_assignment, buffers):
                per_device[position[device]].append(buffer)
        outs = self._run_locally(per_device) if self._local is not None else None
        if outs is None:
            outs = self.executable.run_spmd(per_device, self._out_specs)
        for x in taken:
            x.delete()
        results: list[Any] = []
        for k, (aval, sharding) in enumerate(zip(self.ir.out_avals, self.out_shardings)):
            buffers = [outs[position[d]][k] for d in sharding._device_assignment]
            aval = canonical_aval(aval)
            if len(buffers) == 1:  # (committed, as every result of a partitioned program)
                results.append(Array._from_buffer(buffers[0], aval, self.name, True))
            else:
                results.append(ShardedArray._from_shards(buffers, aval, sharding, self.name))
        return results


    def _run_locally(self, per_device: list[list[Any]]) -> list[list[Any]] | None:
        """The outputs of a program whose partitions never communicate, each device running its partition as a
        program of its own (compiled on the program's third call, for the devices, from the partition XLA's
        partitioner made): a multi-device execute in the CPU plugin costs ~50 us, the partitions' own executes a
        few each (a tiny jitted call on arrays sharded over 2 devices: 67 us -> ~17 us; JAX's: 41-51 us; see
        _small for the programs this is for). None where a program of a device cannot run (a deleted argument:
        the SPMD path raises the error)."""
        local = self._local
        if not isinstance(local, list):
            self._calls += 1
            if self._calls < _LOCAL_AFTER_CALLS:
                return None
            with _compiling:
                if self._local is local:  # (else another thread did it)
                    try:
                        self._local = [compile_hlo_with_cache(d.client, local, d) for d in self.devices]
                    except _pjrt.PjrtError:  # (the plugin refused the partition: the program runs as compiled)
                        self._local = None
            local = self._local
            if not isinstance(local, list):
                return None
        outs = []
        for executable, device, buffers, specs in zip(local, self.devices, per_device, self._out_specs):
            found = executable._runner.run(buffers, specs, device, None)
            if found is None:
                return None
            outs.append(found)
        return outs


_LOCAL_AFTER_CALLS = 3  # (the first calls of a program run it as compiled; those after, one program per device)
_compiling = threading.Lock()
# The instructions by which partitions communicate or differ (XLA's opcode names; a host callback runs on one
# device): a partition whose module names none computes its outputs from its own arguments alone.
_COMMUNICATING = (b"all-reduce", b"all-gather", b"all-to-all", b"collective-permute", b"collective-broadcast",
                  b"reduce-scatter", b"partition-id", b"replica-id", b"send", b"recv", b"ember_callback",
                  b"infeed", b"outfeed")


_LOCAL_BYTES = 4 << 20  # (measured: a partition reading and writing more runs as fast in the SPMD program)


def _small(executable: Any) -> bool:
    """Whether XLA's cost analysis says a partition of the program reads and writes at most _LOCAL_BYTES: where the
    dispatch of the multi-device execute (~50 us) outweighs running the partitions one after another (an
    elementwise f32[8,8] program on 2 devices: 52 us as one execute, 15 us one per device; f32[512,512]: 177 and
    167 us; f32[1024,1024]: 362 and 384 us)."""
    try:
        return executable.cost_analysis().get("bytes accessed", _LOCAL_BYTES + 1) <= _LOCAL_BYTES
    except _pjrt.PjrtError:
        return False


def _local_module(optimized: bytes) -> bytes | None:
    """The partition's serialized xla.HloModuleProto of an SPMD program's optimized HloModuleProtoWithConfig when
    its partitions never communicate (no instruction names a collective, the partition id, a callback), else None.
    (A name merely containing one of those words only costs the faster path.)"""
    try:
        module = fields(optimized).get(1, [None])[0]
    except ValueError:
        return None
    if not isinstance(module, bytes) or any(word in module for word in _COMMUNICATING):
        return None
    try:
        opcodes = {op for computation in fields(module).get(3, []) if isinstance(computation, bytes)
                   for instruction in fields(computation).get(2, []) if isinstance(instruction, bytes)
                   for op in fields(instruction).get(2, [])}
    except ValueError:
        return None
    # Only the instructions seen to compile again from an optimized module: XLA's CPU compiler aborts on others (a
    # fused transpose of a partition: "Check failed: output_shape.has_layout()", measured on the plugin).
    return module if opcodes <= _LOCAL_OPCODES else None


_LOCAL_OPCODES = {op.encode() for op in (
    "parameter constant fusion tuple get-tuple-element broadcast add subtract multiply divide remainder negate abs "
    "sign maximum minimum compare select convert exponential exponential-minus-one log log-plus-one sine cosine tan "
    "tanh logistic sqrt rsqrt cbrt power floor ceil round-nearest-afz round-nearest-even and or xor not clamp "
    "is-finite atan2 erf").split()}


def _part_shape(index: tuple[slice, ...], shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(len(range(*s.indices(n))) for s, n in zip(index, shape))


