"""ember.export, as jax.export: a jitted function exported for given argument types, serialized to a versioned
artifact, deserialized (in another process) and called, eagerly, inside jit, under vmap and, to the order it was
exported with, under grad.

    exported = ember.export.export(ember.jit(f))(ember.ShapeDtypeStruct((3,), np.float32), ...)
    blob = exported.serialize(vjp_order=1)          # bytes
    restored = ember.export.deserialize(blob)      # in this or another process
    restored.call(x)                               # f(x), compiled from the stored StableHLO

The artifact (format 1 for one device) is the bytes b"ember-exported\\n" and a UTF-8 JSON object: "format" (1), "ember"
(the exporting version), "fun_name", "in_avals" / "out_avals" ([shape, dtype name, weak type] per flat input /
output), "in_tree" / "out_tree" (the pytree structures, of tuples, lists, dicts with str or int keys, None and
{"custom": [serialized name, base64 aux data, [children]]} for the node types registered with
register_pytree_node_serialization: other node types cannot be serialized), "platforms" (["cpu"]), "module"
(the StableHLO text of @main: flat inputs -> flat outputs) and "vjp" (null, or the same object for the VJP:
(inputs..., cotangents of the floating-point outputs...) -> (cotangents of the floating-point inputs...), nested
vjp_order deep). The module is StableHLO
text: it parses and compiles wherever the plugin takes that StableHLO version. A program exported for a mesh is
format 2: the same, with "mesh" ({"axis_names", "axis_sizes", "axis_types"}: an AbstractMesh's) and, in the object
and each VJP's, "in_specs" / "out_specs" (a PartitionSpec per flat input / output, a list of entries: null, an axis
name or a list of names; or null: any placement), the modules written for the mesh's size in partitions. Format 3
(docs/aot.md, "Shape polymorphism") is format 1 or 2 with "shape_poly" (null, or {"variables": [names],
"constraints": [strings]}) and "disabled_checks" (["platform", "custom_call:<name>"]); with symbolic shapes, an
aval's dimension may be an expression (a string: "2*b + 1") and each module is a template whose placeholders
($dim[expression]) a call fills with the values its arguments' shapes give, the result checked as a format-1
module before it compiles.

An artifact is data, not code: deserialize checks all of it before anything compiles or runs (docs/security.md,
"Exported programs"): the JSON (an object of exactly these keys and types, nested at most MAX_JSON_DEPTH deep, a
format this ember reads, platforms, avals of ember's dtypes with bounded shapes, pytrees whose leaves match the
avals, VJPs whose types follow from the function's) and the module text (ember._hlo.module_check: only the ops
ember's lowering emits, custom calls only to ember's own kernels and the XLA targets its lowering uses, each with
the operand and result types that lowering gives it, @main of the avals' types). Anything else is a ValueError
naming the function and what is wrong. serialize refuses programs that call back into Python (pure_callback,
io_callback, debug.callback and debug.print), as JAX does: a host callback is a function of the exporting
process."""
from __future__ import annotations

import base64
import collections
import json
import math
import re
import threading
from collections import OrderedDict
from typing import Any, Callable, Sequence

import numpy as np

from ember._api.autodiff import vjp as _vjp
from ember._api.jit import Jitted, jit
from ember._api.stages import ShapeDtypeStruct, struct_of
from ember._api.staging import first_mismatch
from ember._control.exported import ExportedModule, call_exported
from ember._core import ShapedArray, aval_of
from ember._core import dtypes as dt
from ember._core.ir import sub_irs
from ember._core.pytree import _REGISTRY as _PYTREE_NODES  # (the unflatten functions, as JAX reads its registry)
from ember._core.pytree import (PyTreeDef, flatten_one_level, keystr, tree_flatten, tree_flatten_with_path,
                                tree_structure)
from ember._core.shape_poly import (InconclusiveDimensionOperation, ShapeSolver, SymbolicScope, Template, evaluate,
                                    is_symbolic_dim, parse_dim, scope_from_artifact, scope_of, symbolic_shape)
from ember._core.sharding import (AbstractMesh, AxisType, HloSharding, Mesh, NamedSharding, PartitionSpec, Sharding,
                                  _named_to_hlo as named_to_hlo, explicit_sharding)
from ember._hlo import lower
from ember._prims.shape import zeros
from ember._hlo import module_check, targets
from ember._hlo.spmd import SpmdPlan
from ember._runtime.spmd import program_placement
from ember._hlo.lower import default_platform
from ember._transforms.discharge import pure_for_lowering
from ember._runtime.compile_cache import package_version

MAGIC = b"ember-exported\n"
# The artifact formats (ember's calling conventions): 1, one device; 2, a mesh; 3, either, with symbolic shapes
# ("shape_poly") or disabled safety checks ("disabled_checks"). An artifact is written in the lowest format that
# holds it, so that earlier embers still read what they can run.
FORMAT_VERSION = 3
SUPPORTED_FORMATS = (1, 2, 3)  # the artifact formats this ember reads
minimum_supported_calling_convention_version = 1  # (jax.export's names for the formats read)
maximum_supported_calling_convention_version = 3
MAX_JSON_DEPTH = 200  # objects and arrays in arrays, at most (a pytree level is two; a VJP level one)
MAX_NAME = 1000  # characters of fun_name, and of the exporting ember's version
MAX_AVALS = 100_000  # inputs or outputs of one module
MAX_PLATFORMS = 8
_KEYS = {"format", "ember", "fun_name", "in_tree", "out_tree", "platforms", "in_avals", "out_avals", "module", "vjp"}
_MODULE_KEYS = {"in_avals", "out_avals", "module", "vjp"}
_POLY_KEYS = {"variables", "constraints"}  # format 3: the artifact's "shape_poly"
MAX_VARIABLES = 64  # dimension variables of a shape-polymorphic artifact, at most
MAX_CONSTRAINTS = 64
MAX_INSTANCES = 32  # the concrete programs a shape-polymorphic Exported keeps (one per binding of its variables)
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_MESH_KEYS = {"axis_names", "axis_sizes", "axis_types"}  # format 2: the artifact's "mesh",
_SPEC_KEYS = {"in_specs", "out_specs"}  # and each module's specs
MAX_MESH_AXES = 16
MAX_DEVICES = 65536  # devices of an exported mesh, at most
_DTYPES = {d.name: d for d in dt.SUPPORTED_DTYPES}
_CALLBACKS = ("pure_callback", "io_callback", "debug_callback")  # the primitives that call back into Python


class Exported:
    """A function exported for fixed argument types (as jax.export.Exported): its StableHLO module and calling
    convention. `call(*args)` runs it (eagerly, inside jit, under vmap, and under grad when it carries its VJP);
    `serialize(vjp_order)` gives the artifact `deserialize` reads."""

    def __init__(self, fun_name: str, in_tree: PyTreeDef, out_tree: PyTreeDef, module: ExportedModule,
                 vjp_source: Callable[[int], ExportedModule | None] | None = None,
                 platforms: Sequence[str] = ("cpu",), callbacks: Sequence[str] = (), poly: "_Poly | None" = None,
                 disabled_checks: Sequence["DisabledSafetyCheck"] = ()):
        self.fun_name, self.in_tree, self.out_tree, self._module = fun_name, in_tree, out_tree, module
        self._vjp_source = vjp_source  # (exported from a function: builds the VJP modules on demand)
        self.platforms = tuple(platforms)
        self._callbacks = tuple(callbacks)  # (the callback primitives the exported function binds)
        self._no_vjp = False  # (exported here from a function whose VJP cannot be exported)
        self._poly = poly  # (symbolic shapes: the scope, the solver of the variables, the concrete programs)
        self.disabled_safety_checks: tuple[DisabledSafetyCheck, ...] = tuple(disabled_checks)

    in_avals = property(lambda self: self._module.in_avals)
    out_avals = property(lambda self: self._module.out_avals)
    ordered_effects: tuple[Any, ...] = ()  # (ember's exported programs have no effects: host callbacks are not
    unordered_effects: tuple[Any, ...] = ()  # serialized, and in-process they are not JAX effects)

    @property
    def calling_convention_version(self) -> int:
        """The artifact format serialize writes for it (1: one device, 2: a mesh, 3: symbolic shapes or disabled
        safety checks): ember's calling convention, between minimum_ and maximum_supported_calling_convention_
        version (not JAX's numbers: an ember artifact is not a JAX one)."""
        if self._poly is not None or self.disabled_safety_checks:
            return 3
        return 1 if self._module.mesh is None else 2

    @property
    def module_kept_var_idx(self) -> tuple[int, ...]:
        """The positions of the flat inputs the module takes (all of them: ember keeps unused inputs)."""
        return tuple(range(len(self.in_avals)))

    @property
    def uses_global_constants(self) -> bool:
        """Whether the module's shapes depend on dimension variables (JAX's name: its global constants)."""
        return self._poly is not None

    @property
    def mlir_module_serialized(self) -> bytes:
        """The module's text, as bytes (JAX's field holds MLIR bytecode; ember's modules are text)."""
        return self._module.text.encode()

    def has_vjp(self) -> bool:
        """Whether the VJP can be had (exported here: unless the function has no VJP; deserialized: when it was
        serialized with vjp_order >= 1)."""
        if self._vjp_source is not None:
            return not self._no_vjp
        return self._module.vjp is not None

    def vjp(self) -> "Exported":
        """The Exported of the VJP: (inputs..., cotangents of the floating-point outputs...) -> (cotangents of
        the floating-point inputs...), flat; ValueError when none is available (as jax.export's)."""
        if not self.has_vjp():
            raise ValueError("No VJP is available")
        try:
            module = self._with_vjp(max(self._module.vjp_order, 1))
        except (NotImplementedError, TypeError, ValueError, InconclusiveDimensionOperation):
            self._no_vjp = True
            raise ValueError("No VJP is available") from None
        vjp = module.vjp
        if vjp is None:
            raise ValueError("No VJP is available")
        n = len(vjp.in_avals)
        in_tree = tree_structure(((_LEAF,) * n, {}), is_leaf=lambda x: x is _LEAF)
        out_tree = tree_structure([_LEAF] * len(vjp.out_avals), is_leaf=lambda x: x is _LEAF)
        poly = None if self._poly is None else self._poly.for_vjp(vjp)
        return Exported(f"vjp({self.fun_name})", in_tree, out_tree, vjp, platforms=self.platforms, poly=poly,
                        disabled_checks=self.disabled_safety_checks)

    @property
    def nr_devices(self) -> int:
        """How many devices the program runs on (1, or its mesh's size when exported for a mesh)."""
        return self._module.nr_devices

    @property
    def mesh(self) -> AbstractMesh | None:
        """The AbstractMesh it was exported for (None: one device)."""
        return self._module.mesh

    @property
    def in_shardings_hlo(self) -> tuple[HloSharding | None, ...]:
        """Per flat input, the HloSharding it is split by (over partition ids: the mesh's positions), or None."""
        return self._hlo(self._module.in_specs, self.in_avals)

    @property
    def out_shardings_hlo(self) -> tuple[HloSharding | None, ...]:
        return self._hlo(self._module.out_specs, self.out_avals)

    def _hlo(self, specs: Sequence[Any], avals: Sequence[ShapedArray]) -> tuple[HloSharding | None, ...]:
        mesh = self._module.mesh
        return tuple(None if spec is None or mesh is None else named_to_hlo(mesh, spec, a.ndim)
                     for spec, a in zip(specs, avals))

    def in_shardings_jax(self, mesh: Mesh) -> tuple[NamedSharding | None, ...]:
        """Per flat input, its sharding over mesh (a concrete mesh of the exported one's shape), as JAX's."""
        return self._over(mesh, self._module.in_specs)

    def out_shardings_jax(self, mesh: Mesh) -> tuple[NamedSharding | None, ...]:
        return self._over(mesh, self._module.out_specs)

    def _over(self, mesh: Mesh, specs: Sequence[Any]) -> tuple[NamedSharding | None, ...]:
        exported = self._module.mesh
        if exported is None:
            return (None,) * len(specs)
        if not isinstance(mesh, Mesh) or mesh.abstract_mesh.shape_tuple != exported.shape_tuple:
            raise ValueError(f"Exported({self.fun_name}) was exported for the mesh {exported}, not {mesh!r}")
        return tuple(None if spec is None else NamedSharding(mesh, spec) for spec in specs)

    @property
    def vjp_order(self) -> int:
        """The order of differentiation the exported function carries (deserialized: as serialized)."""
        return self._module.vjp_order

    def mlir_module(self) -> str:
        """The StableHLO module (text) of the function: flat inputs -> flat outputs."""
        return self._module.text

    def serialize(self, vjp_order: int = 0) -> bytes:
        """The artifact (see the module docstring), with the VJP modules up to vjp_order."""
        if not isinstance(vjp_order, int) or vjp_order < 0:
            raise ValueError(f"Exported.serialize: vjp_order must be a non-negative int, got {vjp_order!r}")
        module = self._with_vjp(vjp_order)
        self._check_serializable(module)
        mesh = module.mesh
        payload = {"format": self.calling_convention_version, "ember": package_version(),
                   "fun_name": self.fun_name, "in_tree": _tree_json(self.in_tree, "in_tree"),
                   "out_tree": _tree_json(self.out_tree, "out_tree"), "platforms": list(self.platforms),
                   **_module_json(module)}
        if payload["format"] == 3:
            payload["shape_poly"] = None if self._poly is None else {
                "variables": list(self._poly.solver.variables), "constraints": list(self._poly.scope.constraints)}
            payload["disabled_checks"] = [str(c) for c in self.disabled_safety_checks]
        if mesh is not None:
            payload["mesh"] = {"axis_names": list(mesh.axis_names), "axis_sizes": list(mesh.axis_sizes),
                               "axis_types": [t.name for t in mesh.axis_types]}
        return MAGIC + json.dumps(payload, separators=(",", ":")).encode()

    def _check_serializable(self, module: ExportedModule) -> None:
        """Refuse host callbacks (JAX's NotImplementedError, in its words), and a module deserialize would refuse
        (which would be a gap in ember._hlo.module_check's knowledge of ember's own lowering)."""
        level: ExportedModule | None = module
        while level is not None:
            if f'call_target_name = "{module_check.CALLBACK_TARGET}"' in level.text:
                kinds = ", ".join(self._callbacks) or "a host callback"
                raise NotImplementedError(
                    f"ember.export: serialization of host_callbacks is not yet implemented ({self.fun_name} calls "
                    f"back into Python: {kinds}). As in JAX, a host callback is a function of the process that "
                    "exported the program: call it here (Exported.call), or export the function without it")
            if self._poly is not None:  # (a template: its programs are checked below, for a sample binding)
                level = level.vjp
                continue
            try:
                module_check.check_module(level.text, level.nr_devices)
            except module_check.ModuleError as err:
                raise ValueError(f"Exported.serialize({self.fun_name}): ember.export.deserialize would refuse its "
                                 f"module ({err}), so it is not serialized") from None
            level = level.vjp
        if self._poly is not None:
            self._poly.check_sample(module, self.fun_name, "Exported.serialize")

    def _with_vjp(self, order: int) -> ExportedModule:
        if order <= self._module.vjp_order:
            return _truncated(self._module, order)
        if self._vjp_source is None:
            raise ValueError(f"Exported.serialize: {self.fun_name} was deserialized with vjp_order="
                             f"{self._module.vjp_order}; it cannot be serialized with vjp_order={order}")
        return self._vjp_source(order)

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """Run the exported function on arguments of the exported types (the same pytree structure); with symbolic
        shapes, on arguments of any shapes the specification admits (its variables bound from them)."""
        platform = default_platform() or "cpu"
        if (platform not in self.platforms and not (platform == "cpu" and "host" in self.platforms)
                and DisabledSafetyCheck.platform() not in self.disabled_safety_checks):
            raise ValueError(f"Function '{self.fun_name}' was exported for platforms '{self.platforms}' but it is "
                             f"used on '{(platform,)}'.")  # (JAX's words)
        leaves, tree = tree_flatten((args, kwargs))
        if tree != self.in_tree:
            raise TypeError(f"Exported.call({self.fun_name}): arguments of structure {tree}, but it was exported for "
                            f"{self.in_tree}")
        if self._poly is not None:
            env = self._poly.bind(leaves, self.in_avals, self.in_tree)
            module = self._poly.instance(self._callable(), env, self.fun_name)
            return self.out_tree.unflatten(call_exported(leaves, module))
        mismatch = first_mismatch(args, kwargs, leaves, self.in_avals)
        if mismatch is not None:
            where, want, got = mismatch
            raise TypeError(f"Exported.call({self.fun_name}): {where} must be {want.str_short()}, got "
                            f"{got.str_short()}")
        return self.out_tree.unflatten(call_exported(leaves, self._callable()))

    def _callable(self) -> ExportedModule:
        """The module call_exported runs: as deserialized, or, exported here, with its VJP (built on first use,
        so that grad of call works as in JAX; serialize with vjp_order for more). A function with no VJP (one
        that calls back into Python, or uses a primitive without derivative rules) runs without it."""
        if self._vjp_source is None or self._no_vjp:
            return self._module
        try:
            return self._with_vjp(max(self._module.vjp_order, 1))
        except (NotImplementedError, TypeError, ValueError, InconclusiveDimensionOperation):
            self._no_vjp = True  # (grad of call then says it was exported without its VJP)
            return self._module

    def __repr__(self) -> str:
        ins = ", ".join(a.str_short() for a in self.in_avals)
        return f"Exported({self.fun_name}: ({ins}), vjp_order={self.vjp_order})"


def export(fun: Any, *, platforms: Sequence[str] | None = None,
           disabled_checks: Sequence["DisabledSafetyCheck"] = ()) -> Callable[..., Exported]:
    """export(jitted)(*args, **kwargs) -> Exported, for arguments given as arrays, numbers or ShapeDtypeStructs
    (as jax.export.export); a ShapeDtypeStruct's shape may hold symbolic dimensions (symbolic_shape): one program
    for every size they stand for. fun is a jitted function (ember.jit(f)); a plain function is jitted.
    disabled_checks: DisabledSafetyCheck.platform() lets the program be called on another platform than it was
    exported for; custom_call(...) is recorded (ember's deserialize still checks every custom call)."""
    if platforms is not None and any(p.lower() not in ("cpu", "host") for p in platforms):
        raise ValueError(f"export: ember exports for the CPU platform only, got platforms={list(platforms)}")
    disabled = tuple(disabled_checks)
    for check in disabled:
        if not isinstance(check, DisabledSafetyCheck):
            raise TypeError(f"export: disabled_checks must be DisabledSafetyCheck values (DisabledSafetyCheck."
                            f"platform(), .custom_call(name)), got {check!r}")
    jitted = fun if isinstance(fun, Jitted) else jit(fun)

    def exporter(*args: Any, **kwargs: Any) -> Exported:
        traced = jitted.trace(*args, **kwargs)
        ir = pure_for_lowering(traced.jaxpr, f"export({jitted.name})")
        _refuse_ffi_calls(ir)
        name = jitted.name[len("jit("):-1] if jitted.name.startswith("jit(") else jitted.name
        scope = _scope_of(ir.in_avals, ir.out_avals, name)
        placement = _placement(name, jitted, traced.jaxpr, traced.in_tree, args, kwargs)
        poly = None
        if scope is not None:
            if placement is not None:
                raise NotImplementedError(f"export({name}): symbolic shapes in a program exported for a mesh are "
                                          "not supported; export it for one device, or with concrete shapes")
            solver = ShapeSolver([a.shape for a in ir.in_avals], _argument_names(traced.in_tree), scope)
            text = lower(ir, inline_consts=True, platform=None)  # (portable: its forms do not depend on sizes)
            module = ExportedModule(text, ir.in_avals, ir.out_avals, None, name)
            poly = _Poly(scope, solver, trusted=True)
            poly.template(module)  # (its placeholders parse, as deserialize will parse them)
        elif placement is None:
            module = ExportedModule(lower(ir, inline_consts=True), ir.in_avals, ir.out_avals, None, name)
        else:
            mesh, devices, in_specs, out_specs = placement
            text = lower(ir, inline_consts=True, spmd=SpmdPlan(devices, [None] * len(in_specs),
                                                               [None] * len(out_specs)))
            module = ExportedModule(text, ir.in_avals, ir.out_avals, None, name, mesh, in_specs, out_specs)
        flat = _flat_function(jitted, traced.in_tree)
        cache: dict[int, ExportedModule] = {0: module}

        def vjp_source(order: int) -> ExportedModule:
            if order not in cache:
                cache[order] = _module_with_vjp(flat, module, order)
            return cache[order]
        return Exported(name, traced.in_tree, ir.out_tree, module, vjp_source, callbacks=_callback_kinds(ir),
                        poly=poly, disabled_checks=disabled)
    return exporter


class DisabledSafetyCheck:
    """A safety check to skip (as jax.export.DisabledSafetyCheck): `platform()` lets an Exported run on another
    platform than it was exported for; `custom_call(name)` is JAX's permission to serialize a custom call it does
    not know, which ember records but does not need nor honour (its deserialize checks every custom call: an
    artifact is untrusted data)."""

    def __init__(self, _impl: str):
        if not isinstance(_impl, str):
            raise TypeError(f"DisabledSafetyCheck: expected a string, got {_impl!r}")
        self._impl = _impl

    @classmethod
    def platform(cls) -> "DisabledSafetyCheck":
        """Allows the compilation platform to differ from the export platform."""
        return DisabledSafetyCheck("platform")

    @classmethod
    def custom_call(cls, target_name: str) -> "DisabledSafetyCheck":
        """Allows (in JAX) the serialization of a call target not known to be stable."""
        return DisabledSafetyCheck(f"custom_call:{target_name}")

    def is_custom_call(self) -> str | None:
        """The custom call target this directive allows, or None."""
        return self._impl[len("custom_call:"):] if self._impl.startswith("custom_call:") and \
            len(self._impl) > len("custom_call:") else None

    def __str__(self) -> str:
        return self._impl

    __repr__ = __str__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DisabledSafetyCheck) and self._impl == other._impl

    def __hash__(self) -> int:
        return hash(self._impl)


def default_export_platform() -> str:
    """The platform export lowers for by default (as jax.export's): "cpu", ember's one."""
    return default_platform() or "cpu"


def _scope_of(in_avals: Sequence[ShapedArray], out_avals: Sequence[ShapedArray], name: str) -> SymbolicScope | None:
    """The scope of the symbolic dimensions of a traced function (None: concrete shapes); every input's and
    output's from one scope, and the outputs' variables among the inputs'."""
    scope = None
    for a in list(in_avals) + list(out_avals):
        found = scope_of(a.shape)
        if found is not None:
            if scope is not None and found is not scope:
                raise ValueError(f"export({name}): its argument and result shapes use symbolic dimensions of "
                                 "different scopes; make them with one SymbolicScope (symbolic_shape(..., "
                                 "scope=...) or symbolic_args_specs)")
            scope = found
    if scope is None:
        return None
    ins = set().union(*(d.variables() for a in in_avals for d in a.shape if is_symbolic_dim(d)))
    outs = set().union(*(d.variables() for a in out_avals for d in a.shape if is_symbolic_dim(d)))
    if outs - ins:
        raise ValueError(f"export({name}): its results' shapes use dimension variables "
                         f"{sorted(outs - ins)} that no argument's shape has")
    return scope


def _argument_names(in_tree: PyTreeDef) -> list[str]:
    """Each flat input's name as JAX's shape errors write it: args[0], args[1]['w'], kwargs['x']."""
    placeholders = in_tree.unflatten(list(range(in_tree.num_leaves)))
    names = []
    for path, _ in tree_flatten_with_path(placeholders)[0]:
        if len(path) < 2:
            names.append("args")
            continue
        rest = keystr(tuple(path[2:]))
        head = f"args[{path[1].idx}]" if path[0].idx == 0 else f"kwargs[{path[1].key!r}]"
        names.append(head + rest)
    return names


class _Poly:
    """The shape polymorphism of an Exported: its scope (constraints), the solver of its dimension variables from
    a call's argument shapes, its modules' templates (parsed once), and the concrete programs of the bindings met
    so far (at most MAX_INSTANCES, least recently used dropped). A concrete program is the template filled with a
    binding's values; a deserialized one's (not trusted) is checked as deserialize checks a module
    (ember._hlo.module_check, @main's types, the VJP's types) before anything compiles it. An export of this
    process (trusted: its text is ember's lowering's, as a concrete export's is) is filled alone, so that it runs
    as a concrete export runs (its host callbacks too)."""

    def __init__(self, scope: SymbolicScope, solver: ShapeSolver, trusted: bool = False):
        self.scope, self.solver, self.trusted = scope, solver, trusted
        self.variables = set(solver.variables)
        self._templates: dict[str, Template] = {}
        self._instances: OrderedDict[Any, ExportedModule] = OrderedDict()
        self._lock = threading.Lock()
        self._names: list[str] | None = None

    def for_vjp(self, vjp: ExportedModule) -> "_Poly":
        """The polymorphism of an Exported's VJP module (its flat inputs: the function's, then cotangents)."""
        names = [f"args[{i}]" for i in range(len(vjp.in_avals))]
        return _Poly(self.scope, ShapeSolver([a.shape for a in vjp.in_avals], names, self.scope), self.trusted)

    def template(self, module: ExportedModule) -> Template:
        found = self._templates.get(module.digest)
        if found is None:
            try:
                found = Template(module.text, self.scope, self.variables)
            except ValueError as err:
                raise _Invalid(f"its module's placeholders: {err}") from None
            self._templates[module.digest] = found
        return found

    def bind(self, leaves: Sequence[Any], want: Sequence[ShapedArray], in_tree: PyTreeDef) -> dict[str, Any]:
        """The variables' values for a call's flat arguments: ranks, dtypes and constant dimensions checked
        first, then each variable solved and every dimension and constraint checked (ValueError, JAX's words)."""
        if self._names is None:
            self._names = _argument_names(in_tree) if in_tree.num_leaves == len(want) else \
                [f"args[{i}]" for i in range(len(want))]
        shapes = []
        for name, leaf, w in zip(self._names, leaves, want):
            got = aval_of(leaf)
            spec, called = str(tuple(w.shape)), str(tuple(got.shape))
            if got.dtype != w.dtype:
                raise ValueError(f"Dtype mismatch for {name}: expected {w.dtype.name} and called with "
                                 f"{got.dtype.name}")
            if got.ndim != w.ndim:
                raise ValueError(f"Rank mismatch for {name}: expected {spec} and called with {called}")
            for j, (d, g) in enumerate(zip(w.shape, got.shape)):
                if not is_symbolic_dim(d) and d != g:
                    raise ValueError(f"Shape mismatch for {name}.shape[{j}] (expected same constant): expected "
                                     f"{spec} and called with {called}")
            shapes.append(got.shape)
        return self.solver.solve(shapes)

    def instance(self, module: ExportedModule, env: dict[str, Any], name: str) -> ExportedModule:
        """The concrete program of module (with its VJPs) for the binding env, checked (cached per binding)."""
        key = (module.digest, module.vjp_order, tuple(sorted(env.items(), key=lambda kv: kv[0])))
        with self._lock:
            found = self._instances.get(key)
            if found is not None:
                self._instances.move_to_end(key)
                return found
        if self.trusted or any(is_symbolic_dim(v) for v in env.values()):
            # (exported here; or called while another function is exported with symbolic shapes: the program stays
            # a template, of that function's scope, checked when that export is filled and called)
            found = self._filled(module, env)
        else:
            binding = ", ".join(f"{k}={v}" for k, v in sorted(env.items()))
            try:
                found = _module_from_json(self._instance_json(module, env), name)
            except _Invalid as err:
                raise ValueError(f"Exported.call({name}): the program for {binding} is refused: {err}") from None
            except ValueError as err:
                raise ValueError(f"Exported.call({name}): the program for {binding} cannot be made: {err}") \
                    from None
        with self._lock:
            self._instances[key] = found
            while len(self._instances) > MAX_INSTANCES:
                self._instances.popitem(last=False)
        return found

    def _instance_json(self, module: ExportedModule, env: dict[str, Any]) -> dict[str, Any]:
        """The JSON form of module's concrete program for env (what an artifact of concrete shapes would hold)."""
        def avals(values: Sequence[ShapedArray]) -> list[Any]:
            return [[[evaluate(d, env) for d in a.shape], a.dtype.name, bool(a.weak_type)] for a in values]
        return {"in_avals": avals(module.in_avals), "out_avals": avals(module.out_avals),
                "module": self.template(module).fill(env, module_check.MAX_DIM),
                "vjp": None if module.vjp is None else self._instance_json(module.vjp, env)}

    def _filled(self, module: ExportedModule, env: dict[str, Any]) -> ExportedModule:
        def shaped(values: Sequence[ShapedArray]) -> list[ShapedArray]:
            return [a.update(shape=[evaluate(d, env) for d in a.shape]) for a in values]
        vjp = None if module.vjp is None else self._filled(module.vjp, env)
        return ExportedModule(self.template(module).fill(env, module_check.MAX_DIM), shaped(module.in_avals),
                              shaped(module.out_avals), vjp, module.name)

    def sample(self, module: ExportedModule) -> dict[str, int] | None:
        """A binding of the variables that the constraints admit and that gives every input a shape (tried among
        a few), or None."""
        names = sorted(self.variables)
        for values in ([k] * len(names) for k in (1, 2, 3, 4, 8, 16, 64)):
            env = dict(zip(names, values))
            try:
                dims = [evaluate(d, env) for a in module.in_avals for d in a.shape]
                diffs = [(op, evaluate(diff, env)) for op, _, diff in self.scope._constraints]
            except ZeroDivisionError:
                continue
            if all(0 <= d <= module_check.MAX_DIM for d in dims) and all(
                    (v == 0 if op == "==" else v >= 0) for op, v in diffs):
                return env
        return None

    def check_sample(self, module: ExportedModule, name: str, where: str) -> None:
        """Check the concrete program of a sample binding as deserialize would (serialize refuses what deserialize
        would refuse)."""
        env = self.sample(module)
        if env is None:
            return
        try:
            _module_from_json(self._instance_json(module, env), name)
        except (_Invalid, ValueError) as err:
            binding = ", ".join(f"{k}={v}" for k, v in sorted(env.items()))
            raise ValueError(f"{where}({name}): its program for {binding} is refused ({err}), so it is not "
                             "serialized") from None


class _Partition:
    """Stands for the device at one position of a mesh exported without devices (an AbstractMesh): partition id."""
    __slots__ = ("id",)

    def __init__(self, position: int):
        self.id = position

    def __repr__(self) -> str:
        return f"partition {self.id}"


def _placement(name: str, jitted: Jitted, ir: Any, in_tree: PyTreeDef, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> tuple[AbstractMesh, tuple[Any, ...], list[Any], list[Any]] | None:
    """Where an exported program runs: None for one device, else (its mesh, the devices its module is lowered
    for: the concrete mesh's, or stand-ins for an AbstractMesh's positions, the PartitionSpec or None of each input
    and output). The specs come from jit's in_shardings/out_shardings, the arguments' shardings (ShapeDtypeStructs
    and arrays split over a mesh) and the types (explicit sharding); every mesh they and the program name must be
    one (the same names, sizes and types)."""
    given = jitted._leaf_shardings(ir, in_tree)
    given_ins, given_outs = given if given is not None else (None, None)
    leaves = tree_flatten(jitted._split(args, kwargs)[1:])[0]
    own = [getattr(x, "sharding", None) for x in leaves]
    ins = [g if g is not None else o for g, o in zip(given_ins or [None] * len(own), own)]
    outs = list(given_outs or [None] * len(ir.outs))
    meshes: list[Any] = []

    def spec_of(sharding: Any, aval: ShapedArray, what: str) -> PartitionSpec | None:
        if isinstance(sharding, NamedSharding) and sharding.mesh.size > 1:
            meshes.append(sharding.mesh)
            spec = sharding.spec
        elif isinstance(sharding, Sharding) and not isinstance(sharding, NamedSharding) and \
                len(sharding._device_assignment) > 1:
            raise NotImplementedError(f"export({name}): {what} is placed by {sharding}; ember exports programs "
                                      "over several devices for NamedShardings (a mesh and a PartitionSpec)")
        elif aval.explicit is not None and aval.explicit.mesh.size > 1:
            meshes.append(aval.explicit.mesh)
            spec = aval.explicit.spec
        else:
            return None
        if spec.unreduced or spec.reduced:
            raise NotImplementedError(f"export({name}): {what} has unreduced or reduced axes ({spec})")
        return spec
    in_specs = [spec_of(s, a, f"input {i}") for i, (s, a) in enumerate(zip(ins, ir.in_avals))]
    out_specs = [spec_of(s, a, f"output {i}") for i, (s, a) in enumerate(zip(outs, ir.out_avals))]
    inside = program_placement(ir)
    if inside is not None and len(inside._flat_devices if isinstance(inside, Mesh) else
                                   inside._device_assignment) > 1:
        meshes.append(inside if isinstance(inside, Mesh) else getattr(inside, "mesh", None))
        if meshes[-1] is None:
            raise NotImplementedError(f"export({name}): the program is placed by {inside}; ember exports programs "
                                      "over several devices for meshes and NamedShardings")
    if not meshes:
        return None
    abstract = [m if isinstance(m, AbstractMesh) else m.abstract_mesh for m in meshes]
    first = abstract[0]
    for other in abstract[1:]:
        if (other.axis_names, other.axis_sizes, other.axis_types) != (first.axis_names, first.axis_sizes,
                                                                       first.axis_types):
            raise ValueError(f"export({name}): its shardings name different meshes, {first} and {other}; a "
                             "program is exported for one mesh")
    concrete = next((m for m in meshes if isinstance(m, Mesh)), None)
    devices = concrete._flat_devices if concrete is not None else tuple(_Partition(i) for i in range(first.size))
    return first, tuple(devices), in_specs, out_specs


def _callback_kinds(ir: Any) -> list[str]:
    """The host-callback primitives an IR binds (its bodies' too), for serialize's error."""
    found, stack = set(), [ir]
    while stack:
        for eqn in stack.pop().eqns:
            if eqn.prim.name in _CALLBACKS:
                found.add({"debug_callback": "debug.callback/debug.print"}.get(eqn.prim.name, eqn.prim.name))
            stack.extend(sub_irs(eqn.params))
    return sorted(found)


def _refuse_ffi_calls(ir: Any) -> None:
    """A call of a user's FFI handler (ember.ffi.ffi_call) cannot be exported: JAX's ValueError (JAX exports it only
    with its custom-call safety check disabled; ember.export has no such switch, and ember.export.deserialize
    refuses an artifact naming any target but ember's own: ember._hlo.module_check)."""
    found, stack = [], [ir]
    while stack:
        for eqn in stack.pop().eqns:
            if eqn.prim.name == "ffi_call":
                found.append(eqn.params["target_name"])
            stack.extend(sub_irs(eqn.params))
    if found:
        raise ValueError("Cannot serialize code with custom calls whose targets have no compatibility guarantees. "
                         "See https://docs.jax.dev/en/latest/export/export.html#compatibility-guarantees-for-custom-"
                         f"calls. Examples are: custom_call @{', @'.join(sorted(set(found)))} (ember.ffi.ffi_call: a "
                         "handler of this process, which an exported artifact may not name)")


def _flat_function(jitted: Jitted, in_tree: PyTreeDef) -> Callable[..., list[Any]]:
    def flat(*leaves: Any) -> list[Any]:
        args, kwargs = in_tree.unflatten(list(leaves))
        return tree_flatten(jitted(*args, **kwargs))[0]
    return flat


def _module_with_vjp(flat: Callable[..., list[Any]], module: ExportedModule, order: int) -> ExportedModule:
    """module carrying its VJP modules `order` deep: the VJP of flat is exported at module's input types and the
    cotangent types of its floating-point outputs, and so on."""
    if order == 0:
        return module
    float_ins = [i for i, a in enumerate(module.in_avals) if dt.is_inexact(a.dtype)]
    float_outs = [i for i, a in enumerate(module.out_avals) if dt.is_inexact(a.dtype)]
    n = len(module.in_avals)

    def vjp_flat(*args: Any) -> list[Any]:
        primals, cts = list(args[:n]), list(args[n:])
        outs, pullback = _vjp(lambda *xs: flat(*xs), *primals)
        full_cts: list[Any] = [zeros(a.strip_weak_type()) for a in module.out_avals]  # (ignored: not float)
        for i, ct in zip(float_outs, cts):
            full_cts[i] = ct
        in_cts = pullback(full_cts)
        return [in_cts[i] for i in float_ins]
    ct_avals = [module.out_avals[i].strip_weak_type() for i in float_outs]
    specs = list(module.in_specs) + [module.out_specs[i] for i in float_outs]
    # (exported for a mesh: the VJP takes its inputs split as the function's inputs and outputs are)
    structs = [struct_of(a, None if spec is None or module.mesh is None else NamedSharding(module.mesh, spec))
               for a, spec in zip(list(module.in_avals) + ct_avals, specs)]
    inner = export(jit(vjp_flat))(*structs)
    vjp_module = _module_with_vjp(_flat_function(jit(vjp_flat), inner.in_tree), inner._module, order - 1)
    return _with_vjp_module(module, vjp_module)


def _with_vjp_module(module: ExportedModule, vjp: ExportedModule | None) -> ExportedModule:
    return ExportedModule(module.text, module.in_avals, module.out_avals, vjp, module.name, module.mesh,
                          module.in_specs, module.out_specs)


def _truncated(module: ExportedModule, order: int) -> ExportedModule:
    if module.vjp_order == order:
        return module
    return _with_vjp_module(module, None if order == 0 else _truncated(module.vjp, order - 1))  # type: ignore


def deserialize(blob: bytes | bytearray) -> Exported:
    """The Exported that serialize wrote (as jax.export.deserialize), checked before anything runs (see the module
    docstring); ValueError for anything else, naming the function and what is wrong."""
    if not isinstance(blob, bytes | bytearray | memoryview):
        raise TypeError(f"ember.export.deserialize: expected the artifact's bytes, got {type(blob).__name__}")
    data = bytes(blob)
    if not data.startswith(MAGIC):
        raise ValueError("ember.export.deserialize: not an ember exported artifact (it does not start with "
                         f"{MAGIC!r})")
    try:
        text = data[len(MAGIC):].decode()
    except UnicodeDecodeError as err:
        raise ValueError(f"ember.export.deserialize: the artifact is corrupt or truncated ({err})") from None
    too_deep = (f"ember.export.deserialize: the artifact's JSON is nested more than the {MAX_JSON_DEPTH} levels an "
                "ember artifact may have (pytrees and VJPs nested that deep are refused)")
    try:
        payload = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as err:
        raise ValueError(f"ember.export.deserialize: the artifact is corrupt or truncated ({err})") from None
    except RecursionError:  # (json's parser recurses, and stops at the interpreter's recursion limit)
        raise ValueError(too_deep) from None
    except _Invalid as err:
        raise ValueError(f"ember.export.deserialize: the artifact's JSON is malformed ({err})") from None
    if _json_depth(payload) > MAX_JSON_DEPTH:
        raise ValueError(too_deep)
    if not isinstance(payload, dict):
        raise ValueError("ember.export.deserialize: the artifact's JSON is not an object (it is "
                         f"{_json_kind(payload)})")
    _check_format(payload)
    name = payload.get("fun_name")
    if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or not name.isprintable():
        raise ValueError("ember.export.deserialize: the artifact's fun_name is not a printable string of 1 to "
                         f"{MAX_NAME} characters (got {_json_kind(name)})")
    try:
        fmt = payload["format"]
        meshed = fmt == 2 or (fmt == 3 and "mesh" in payload)
        keys, want = set(payload), _KEYS | ({"mesh"} | _SPEC_KEYS if meshed else set()) | (
            {"shape_poly", "disabled_checks"} if fmt == 3 else set())
        if keys != want:
            raise _Invalid(_keys_problem(keys, want, "the artifact"))
        if not isinstance(payload["ember"], str) or len(payload["ember"]) > MAX_NAME:
            raise _Invalid("its 'ember' (the exporting version) is not a string")
        platforms = _platforms(payload["platforms"])
        disabled = _disabled_from_json(payload.get("disabled_checks", []))
        mesh = _mesh_from_json(payload["mesh"]) if "mesh" in payload else None
        poly_data = payload.get("shape_poly")
        if poly_data is not None and mesh is not None:
            raise _Invalid("it has both a mesh and symbolic shapes, which ember does not export together")
        scope_vars = _poly_from_json(poly_data) if poly_data is not None else None
        module = _module_from_json(payload, name, mesh=mesh, poly=scope_vars)
        in_tree = _tree_from_json(payload["in_tree"], "in_tree")
        out_tree = _tree_from_json(payload["out_tree"], "out_tree")
        if _arguments_form(payload["in_tree"]) is False:
            raise _Invalid("its in_tree is not the structure of (positional arguments, keyword arguments)")
        for tree, avals, what in ((in_tree, module.in_avals, "in"), (out_tree, module.out_avals, "out")):
            if tree.num_leaves != len(avals):
                raise _Invalid(f"its {what}_tree has {tree.num_leaves} leaves for {len(avals)} {what}_avals")
        poly = None
        if scope_vars is not None:
            poly = _poly_of_artifact(scope_vars, module, in_tree, name)
    except _Invalid as err:
        raise ValueError(f"ember.export.deserialize: the artifact of the function {name!r} is refused: {err}"
                         ) from None
    return Exported(name, in_tree, out_tree, module, platforms=platforms, poly=poly, disabled_checks=disabled)


def _poly_from_json(data: Any) -> tuple[SymbolicScope, list[str]]:
    """The scope and variables of a format-3 artifact's "shape_poly", checked: at most MAX_VARIABLES distinct
    names, at most MAX_CONSTRAINTS constraints parsed strictly over them."""
    if not isinstance(data, dict) or set(data) != _POLY_KEYS:
        raise _Invalid(_keys_problem(set(data) if isinstance(data, dict) else set(), _POLY_KEYS, "its shape_poly"))
    variables, constraints = data["variables"], data["constraints"]
    if (not isinstance(variables, list) or not 0 < len(variables) <= MAX_VARIABLES
            or not all(isinstance(v, str) and _VARIABLE.fullmatch(v) and v not in ("floordiv", "mod", "max", "min",
                                                                                   "_") for v in variables)
            or len(set(variables)) != len(variables)):
        raise _Invalid(f"its shape_poly variables must be 1 to {MAX_VARIABLES} distinct names, got "
                       f"{json.dumps(variables)[:80]}")
    if not isinstance(constraints, list) or len(constraints) > MAX_CONSTRAINTS or \
            not all(isinstance(c, str) for c in constraints):
        raise _Invalid(f"its shape_poly constraints must be a list of at most {MAX_CONSTRAINTS} strings")
    try:
        scope = scope_from_artifact(constraints, set(variables))
    except (ValueError, NotImplementedError, InconclusiveDimensionOperation) as err:
        raise _Invalid(f"its shape_poly constraints: {err}") from None
    return scope, variables


def _poly_of_artifact(scope_vars: tuple[SymbolicScope, list[str]], module: ExportedModule, in_tree: PyTreeDef,
                      name: str) -> _Poly:
    """The polymorphism of a deserialized artifact: every declared variable solvable from the inputs' shapes,
    the templates parsed, and the program of a sample binding checked as a concrete artifact's module."""
    scope, variables = scope_vars
    try:
        solver = ShapeSolver([a.shape for a in module.in_avals], _argument_names(in_tree), scope)
    except ValueError as err:
        raise _Invalid(str(err)) from None
    if set(solver.variables) != set(variables):
        raise _Invalid(f"its shape_poly declares the variables {sorted(variables)}, but its inputs' shapes use "
                       f"{solver.variables}")
    poly = _Poly(scope, solver)
    level: ExportedModule | None = module
    while level is not None:
        poly.template(level)
        level = level.vjp
    env = poly.sample(module)
    if env is not None:
        _module_from_json(poly._instance_json(module, env), name)
    return poly


def _disabled_from_json(data: Any) -> tuple["DisabledSafetyCheck", ...]:
    if not isinstance(data, list) or len(data) > 64 or not all(
            isinstance(c, str) and (c == "platform" or (c.startswith("custom_call:") and 12 < len(c) <= 256
                                                        and c.isprintable())) for c in data):
        raise _Invalid(f"its disabled_checks must be a list of 'platform' or 'custom_call:<name>', got "
                       f"{json.dumps(data)[:80]}")
    return tuple(DisabledSafetyCheck(c) for c in data)


class _Invalid(ValueError):
    """What is wrong with an artifact (deserialize adds the function's name)."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _Invalid(f"the key {key!r} appears twice in one object")
        found[key] = value
    return found


def _json_depth(value: Any) -> int:
    """How deep a parsed JSON value's objects and arrays nest (walked without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            stack.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def _json_kind(value: Any) -> str:
    kinds = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return kinds.get(type(value), type(value).__name__)


def _keys_problem(keys: set[str], want: set[str], what: str) -> str:
    missing, unknown = sorted(want - keys), sorted(keys - want)
    parts = ([f"lacks {', '.join(map(repr, missing))}"] if missing else []) + (
        [f"has unknown keys {', '.join(map(repr, unknown[:5]))}"] if unknown else [])
    return f"{what} " + " and ".join(parts)


def _check_format(payload: dict[str, Any]) -> None:
    """The artifact's format (the calling convention of its modules) is one this ember reads."""
    fmt, version = payload.get("format"), payload.get("ember")
    known = isinstance(version, str) and len(version) <= MAX_NAME
    by = f"written by ember {version}" if known else "by an unknown writer"
    if type(fmt) is not int:
        raise ValueError(f"ember.export.deserialize: the artifact's format is {_json_kind(fmt)} "
                         f"({json.dumps(fmt)[:40]}), not a format number ({by}); this ember "
                         f"({package_version()}) reads formats {', '.join(map(str, SUPPORTED_FORMATS))}")
    if fmt not in SUPPORTED_FORMATS:
        newer = fmt > max(SUPPORTED_FORMATS)
        raise ValueError(f"ember.export.deserialize: artifact format {fmt} is not supported ({by}): this ember "
                         f"({package_version()}) reads formats {', '.join(map(str, SUPPORTED_FORMATS))}"
                         + ("; the artifact is newer: load it with the ember that wrote it, or a later one"
                            if newer else ""))


_PLATFORM = re.compile(r"[a-z][a-z0-9_]{0,31}")


def _platforms(value: Any) -> tuple[str, ...]:
    if (not isinstance(value, list) or not 0 < len(value) <= MAX_PLATFORMS
            or not all(isinstance(p, str) and _PLATFORM.fullmatch(p) for p in value) or len(set(value)) != len(value)):
        raise _Invalid(f"its platforms must be 1 to {MAX_PLATFORMS} distinct lowercase platform names, got "
                       f"{json.dumps(value)[:80]}")
    return tuple(value)


def _arguments_form(tree: Any) -> bool:
    """Whether an in_tree's JSON is ((positional...), {keyword...}), the form Exported.call flattens."""
    return (isinstance(tree, dict) and set(tree) == {"tuple"} and isinstance(tree["tuple"], list)
            and len(tree["tuple"]) == 2 and isinstance(tree["tuple"][0], dict) and set(tree["tuple"][0]) == {"tuple"}
            and isinstance(tree["tuple"][1], dict) and set(tree["tuple"][1]) == {"dict"})


def _module_json(module: ExportedModule) -> dict[str, Any]:
    found = {"in_avals": [_aval_json(a) for a in module.in_avals],
             "out_avals": [_aval_json(a) for a in module.out_avals], "module": module.text,
             "vjp": None if module.vjp is None else _module_json(module.vjp)}
    if module.mesh is not None:
        found["in_specs"] = [_spec_json(spec) for spec in module.in_specs]
        found["out_specs"] = [_spec_json(spec) for spec in module.out_specs]
    return found


def _spec_json(spec: PartitionSpec | None) -> Any:
    """A PartitionSpec as JSON: a list of entries (null, an axis name, or a list of names), or null for none."""
    return None if spec is None else [list(e) if isinstance(e, tuple) else e for e in spec]


def _mesh_from_json(data: Any) -> AbstractMesh:
    """The mesh of a format-2 artifact, checked: 1 to MAX_MESH_AXES distinct printable names, sizes >= 1 whose
    product is 2 to MAX_DEVICES, Explicit or Auto axes."""
    if not isinstance(data, dict) or set(data) != _MESH_KEYS:
        raise _Invalid(_keys_problem(set(data) if isinstance(data, dict) else set(), _MESH_KEYS, "its mesh"))
    names, sizes, types = data["axis_names"], data["axis_sizes"], data["axis_types"]
    if (not isinstance(names, list) or not 0 < len(names) <= MAX_MESH_AXES or len(set(map(str, names))) != len(names)
            or not all(isinstance(n, str) and 0 < len(n) <= 64 and n.isprintable() for n in names)):
        raise _Invalid(f"its mesh's axis_names must be 1 to {MAX_MESH_AXES} distinct printable names, got "
                       f"{json.dumps(names)[:80]}")
    if (not isinstance(sizes, list) or len(sizes) != len(names)
            or not all(type(n) is int and 0 < n <= MAX_DEVICES for n in sizes)
            or not 1 < math.prod(sizes) <= MAX_DEVICES):
        raise _Invalid(f"its mesh's axis_sizes must be one positive size per axis, for 2 to {MAX_DEVICES} devices, "
                       f"got {json.dumps(sizes)[:80]}")
    if not isinstance(types, list) or len(types) != len(names) or not all(t in ("Explicit", "Auto") for t in types):
        raise _Invalid(f"its mesh's axis_types must be 'Explicit' or 'Auto' per axis, got {json.dumps(types)[:80]}")
    return AbstractMesh(tuple(sizes), tuple(names), tuple(getattr(AxisType, t) for t in types))


def _spec_from_json(data: Any, mesh: AbstractMesh, aval: ShapedArray, what: str) -> PartitionSpec | None:
    """A spec of the artifact, checked against its mesh and the value's shape: at most one entry per dimension,
    each null, an axis name or a list of two or more, every axis the mesh's and named once, and each dimension a
    multiple of the devices it is split over."""
    if data is None:
        return None
    if not isinstance(data, list) or len(data) > aval.ndim:
        raise _Invalid(f"{what} is not a list of at most {aval.ndim} entries (one per dimension of "
                       f"{aval.str_short()})")
    sizes, seen, entries = dict(zip(mesh.axis_names, mesh.axis_sizes)), set(), []
    for d, entry in enumerate(data):
        axes = [] if entry is None else [entry] if isinstance(entry, str) else entry
        if not isinstance(axes, list) or (isinstance(entry, list) and len(axes) < 2) or not all(
                isinstance(a, str) and a in sizes and a not in seen and not seen.add(a) for a in axes):
            raise _Invalid(f"{what}: entry {d} ({json.dumps(entry)[:60]}) is not null, an axis of the mesh or a list "
                           "of two or more of them, each axis named once in the spec")
        if aval.shape[d] % math.prod(sizes[a] for a in axes):
            raise _Invalid(f"{what}: dimension {d} of {aval.str_short()} does not split over {axes}")
        entries.append(None if entry is None else entry if isinstance(entry, str) else tuple(entry))
    return PartitionSpec(*entries)


def _module_from_json(data: dict[str, Any], name: str, where: str = "", mesh: AbstractMesh | None = None,
                      poly: tuple[SymbolicScope, list[str]] | None = None) -> ExportedModule:
    """A module of the artifact (the function's, or its VJP's `where`), checked: avals, the module text, the VJP;
    for a mesh (format 2), the specs of its inputs and outputs, and the types they give the avals. With symbolic
    shapes (poly: the artifact's scope and variables), the avals' dimensions may be expressions and the module is
    a template: its placeholders are parsed here, and each binding's program is checked as this function checks a
    concrete module, before it compiles (_Poly.instance)."""
    what = f"its {where}" if where else "its"
    in_avals = _avals_from_json(data["in_avals"], f"{what} in_avals", poly)
    out_avals = _avals_from_json(data["out_avals"], f"{what} out_avals", poly)
    if poly is not None:
        text = data["module"]
        if not isinstance(text, str):
            raise _Invalid(f"{what} module is not text")
        try:
            Template(text, *poly[:1], set(poly[1]))
        except ValueError as err:
            raise _Invalid(f"{what} module's placeholders: {err}") from None
        vjp = None
        if data["vjp"] is not None:
            if not isinstance(data["vjp"], dict) or set(data["vjp"]) != _MODULE_KEYS:
                raise _Invalid(_keys_problem(set(data["vjp"]) if isinstance(data["vjp"], dict) else set(),
                                             _MODULE_KEYS, f"{what} vjp"))
            inner = f"vjp({where})" if where else "vjp"
            vjp = _module_from_json(data["vjp"], f"vjp({name})", inner, poly=poly)
            _check_vjp_types(in_avals, out_avals, vjp, inner)
        return ExportedModule(text, in_avals, out_avals, vjp, name)
    in_specs = out_specs = None
    if mesh is not None:
        specs = {}
        for key, avals in (("in_specs", in_avals), ("out_specs", out_avals)):
            found = data.get(key)
            if not isinstance(found, list) or len(found) != len(avals):
                raise _Invalid(f"{what} {key} is not a list of one spec (or null) per value")
            specs[key] = [_spec_from_json(spec, mesh, a, f"{what} {key}[{i}]")
                          for i, (spec, a) in enumerate(zip(found, avals))]
        in_specs, out_specs = specs["in_specs"], specs["out_specs"]
        in_avals, out_avals = _typed(in_avals, in_specs, mesh), _typed(out_avals, out_specs, mesh)
    text = data["module"]
    if not isinstance(text, str):
        raise _Invalid(f"{what} module is not text")
    try:
        facts = module_check.check_module(text, 1 if mesh is None else mesh.size)
    except module_check.ModuleError as err:
        raise _Invalid(f"{what} module: {err}") from None
    main = facts.main
    want_in = tuple(module_check.TensorType(a.shape, dt.mlir_type(a.dtype)) for a in in_avals)
    want_out = tuple(module_check.TensorType(a.shape, dt.mlir_type(a.dtype)) for a in out_avals)
    if main.args != want_in or main.results != want_out:
        raise _Invalid(f"{what} module's @main takes ({', '.join(map(str, main.args))}) and returns "
                       f"({', '.join(map(str, main.results))}), not the types of {what.split()[-1]} in_avals and "
                       "out_avals")
    for target in sorted(facts.targets & set(module_check.FFI_TARGETS)):
        if not targets.available(target):  # (loads and registers the kernel where it can run)
            why = targets.unavailable_reason(target)
            raise _Invalid(f"{what} module calls ember's kernel {target}, which cannot run in this process"
                           f"{': ' + why if why else ''}")
    vjp_data = data["vjp"]
    vjp = None
    if vjp_data is not None:
        keys = _MODULE_KEYS | (_SPEC_KEYS if mesh is not None else set())
        if not isinstance(vjp_data, dict) or set(vjp_data) != keys:
            raise _Invalid(_keys_problem(set(vjp_data) if isinstance(vjp_data, dict) else set(), keys,
                                         f"{what} vjp"))
        inner = f"vjp({where})" if where else "vjp"
        vjp = _module_from_json(vjp_data, f"vjp({name})", inner, mesh)
        _check_vjp_types(in_avals, out_avals, vjp, inner)
    return ExportedModule(text, in_avals, out_avals, vjp, name, mesh, in_specs, out_specs)


def _typed(avals: list[ShapedArray], specs: list[PartitionSpec | None], mesh: AbstractMesh) -> list[ShapedArray]:
    """The avals typed with their specs' Explicit axes (as the exporting trace typed them)."""
    out = []
    for a, spec in zip(avals, specs):
        explicit = None if spec is None else explicit_sharding(mesh, tuple(spec) + (None,) * (a.ndim - len(spec)))
        out.append(a if explicit is None else a.with_explicit(explicit))
    return out


def _check_vjp_types(in_avals: list[ShapedArray], out_avals: list[ShapedArray], vjp: ExportedModule,
                     where: str) -> None:
    """A VJP takes (inputs..., cotangents of the floating-point outputs...) and returns the cotangents of the
    floating-point inputs (as _module_with_vjp exports it)."""
    def types(avals: Sequence[ShapedArray]) -> list[tuple[tuple[int, ...], np.dtype]]:
        return [(a.shape, a.dtype) for a in avals]
    float_outs = [a for a in out_avals if dt.is_inexact(a.dtype)]
    float_ins = [a for a in in_avals if dt.is_inexact(a.dtype)]
    if types(vjp.in_avals) != types(list(in_avals) + float_outs) or types(vjp.out_avals) != types(float_ins):
        raise _Invalid(f"its {where} takes ({', '.join(a.str_short() for a in vjp.in_avals)}) and returns "
                       f"({', '.join(a.str_short() for a in vjp.out_avals)}): a VJP of the function takes its inputs "
                       "and its floating-point outputs' cotangents, and returns its floating-point inputs' "
                       "cotangents")


def _aval_json(aval: ShapedArray) -> list[Any]:
    return [[str(d) if is_symbolic_dim(d) else d for d in aval.shape], aval.dtype.name, bool(aval.weak_type)]


def _avals_from_json(data: Any, what: str, poly: tuple[SymbolicScope, list[str]] | None = None
                     ) -> list[ShapedArray]:
    if not isinstance(data, list) or len(data) > MAX_AVALS:
        raise _Invalid(f"{what} is not a list of at most {MAX_AVALS} avals")
    return [_aval_from_json(a, f"{what}[{i}]", poly) for i, a in enumerate(data)]


def _aval_from_json(data: Any, what: str, poly: tuple[SymbolicScope, list[str]] | None = None) -> ShapedArray:
    """[shape, dtype name, weak type], checked: non-negative dimensions, bounded rank and size, ember's dtypes;
    with symbolic shapes, a dimension may be an expression over the artifact's variables (a string, parsed
    strictly), known to be >= 0."""
    if not isinstance(data, list) or len(data) != 3:
        raise _Invalid(f"{what} is not [shape, dtype, weak_type]")
    shape, dtype, weak = data
    if poly is not None and isinstance(shape, list) and len(shape) <= module_check.MAX_RANK:
        shape = [_dim_from_json(d, poly, what) for d in shape]
        if any(is_symbolic_dim(d) for d in shape):
            if not isinstance(dtype, str) or dtype not in _DTYPES or type(weak) is not bool:
                raise _Invalid(f"{what}: the dtype {json.dumps(dtype)[:40]} is not one of ember's "
                               f"({', '.join(_DTYPES)}), or weak_type is not a boolean")
            try:
                return ShapedArray(tuple(shape), _DTYPES[dtype], weak)
            except (ValueError, TypeError, InconclusiveDimensionOperation) as err:
                raise _Invalid(f"{what}: {err}") from None
    if (not isinstance(shape, list) or len(shape) > module_check.MAX_RANK
            or not all(type(d) is int and 0 <= d <= module_check.MAX_DIM for d in shape)):
        raise _Invalid(f"{what}: the shape {json.dumps(shape)[:80]} is not a list of at most "
                       f"{module_check.MAX_RANK} dimensions from 0 to {module_check.MAX_DIM}")
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        raise _Invalid(f"{what}: the dtype {json.dumps(dtype)[:40]} is not one of ember's "
                       f"({', '.join(_DTYPES)})")
    if type(weak) is not bool:
        raise _Invalid(f"{what}: weak_type is not a boolean")
    if math.prod(shape) * _DTYPES[dtype].itemsize > module_check.MAX_BYTES:
        raise _Invalid(f"{what}: {dtype}{shape} is larger than {module_check.MAX_BYTES} bytes")
    return ShapedArray(tuple(shape), _DTYPES[dtype], weak)


def _dim_from_json(d: Any, poly: tuple[SymbolicScope, list[str]], what: str) -> Any:
    """A dimension of a shape-polymorphic artifact: an int as a concrete artifact's, or an expression."""
    if type(d) is int:
        if not 0 <= d <= module_check.MAX_DIM:
            raise _Invalid(f"{what}: the dimension {d} is not from 0 to {module_check.MAX_DIM}")
        return d
    if not isinstance(d, str):
        raise _Invalid(f"{what}: the dimension {json.dumps(d)[:40]} is neither an int nor an expression")
    try:
        return parse_dim(d, poly[0], set(poly[1]), what)
    except (ValueError, InconclusiveDimensionOperation) as err:
        raise _Invalid(f"{what}: {err}") from None


def _tree_json(tree: PyTreeDef, what: str) -> Any:
    """A JSON form of a pytree structure of tuples, lists, dicts (str or int keys) and None."""
    def encode(node: Any) -> Any:
        if node is _LEAF:
            return "*"
        if node is None:
            return None
        if type(node) is tuple:
            return {"tuple": [encode(c) for c in node]}
        if type(node) is list:
            return {"list": [encode(c) for c in node]}
        if type(node) is dict and all(type(k) in (str, int) for k in node):
            return {"dict": [[k, encode(v)] for k, v in node.items()]}
        registered = _SERIALIZATIONS.get(type(node))
        if registered is not None:
            serialized_name, serialize_auxdata = registered
            children, aux = flatten_one_level(node)
            data = serialize_auxdata(aux)
            if not isinstance(data, bytes | bytearray):
                raise TypeError(f"export: the serialize_auxdata of {type(node).__name__} returned "
                                f"{type(data).__name__}, not bytes")
            return {"custom": [serialized_name, base64.b64encode(bytes(data)).decode(),
                               [encode(c) for c in children]]}
        raise _NotSerializable(
            f"export: the {what} contains a {type(node).__name__} node, which cannot be serialized (only tuples, "
            "lists, dicts with str or int keys, None and the types registered with "
            "register_pytree_node_serialization or register_namedtuple_serialization can)")
    return encode(tree.unflatten([_LEAF] * tree.num_leaves))


class _NotSerializable(TypeError, ValueError):
    """A pytree node type that is not registered for serialization (JAX's ValueError; ember's TypeError before)."""


# Custom pytree node types registered for serialization (as jax.export's registries): type -> (serialized name,
# serialize_auxdata), and serialized name -> (type, deserialize_auxdata, from_children).
_SERIALIZATIONS: dict[type, tuple[str, Callable[[Any], bytes]]] = {}
_DESERIALIZATIONS: dict[str, tuple[type, Callable[[bytes], Any], Callable[[Any, Sequence[Any]], Any]]] = {}
MAX_AUXDATA = 1 << 20  # bytes of one node's serialized aux data, at most


def register_pytree_node_serialization(nodetype: type, *, serialized_name: str,
                                       serialize_auxdata: Callable[[Any], bytes],
                                       deserialize_auxdata: Callable[[bytes], Any],
                                       from_children: Callable[[Any, Sequence[Any]], Any] | None = None) -> type:
    """Register a custom pytree node type (registered with ember.tree_util.register_pytree_node first, unless
    from_children is given) for the in_tree/out_tree of serialized Exporteds, as jax.export's: its aux data is
    stored as serialize_auxdata(aux) bytes under serialized_name, and rebuilt with deserialize_auxdata and
    from_children(aux, children) (default: the type's unflatten function). Returns nodetype (a decorator)."""
    if not isinstance(nodetype, type):
        raise TypeError(f"register_pytree_node_serialization: nodetype must be a type, got {nodetype!r}")
    if not isinstance(serialized_name, str) or not 0 < len(serialized_name) <= 256 or \
            not serialized_name.isprintable():
        raise ValueError(f"register_pytree_node_serialization: serialized_name must be a printable string of 1 to "
                         f"256 characters, got {serialized_name!r}")
    if nodetype in _SERIALIZATIONS:
        raise ValueError(f"Duplicate serialization registration for type `{nodetype}`. Previous registration was "
                         f"with serialized_name `{_SERIALIZATIONS[nodetype][0]}`.")
    if serialized_name in _DESERIALIZATIONS:
        raise ValueError(f"Duplicate serialization registration for serialized_name `{serialized_name}`. Previous "
                         f"registration was for type `{_DESERIALIZATIONS[serialized_name][0]}`.")
    if from_children is None:
        unflatten = _unflatten_of(nodetype)
        if unflatten is None:
            raise ValueError("If `from_children` is not present, you must call first "
                             f"`ember.tree_util.register_pytree_node` for `{nodetype}`")
        from_children = unflatten
    _SERIALIZATIONS[nodetype] = (serialized_name, serialize_auxdata)
    _DESERIALIZATIONS[serialized_name] = (nodetype, deserialize_auxdata, from_children)
    return nodetype


def _unflatten_of(nodetype: type) -> Callable[[Any, Sequence[Any]], Any] | None:
    """The unflatten function registered for a pytree node type, or None."""
    node = _PYTREE_NODES.get(nodetype)
    return None if node is None else lambda aux, children: node.unflatten(aux, list(children))


def _is_namedtuple(nodetype: type) -> bool:
    return (isinstance(nodetype, type) and issubclass(nodetype, tuple) and isinstance(getattr(nodetype, "_fields",
                                                                                              None), tuple)
            and all(isinstance(f, str) for f in nodetype._fields))


def register_namedtuple_serialization(nodetype: type, *, serialized_name: str) -> type:
    """Register a namedtuple type for the in_tree/out_tree of serialized Exporteds (as jax.export's): its field
    names are stored, and must be the type's when deserialized. Returns nodetype (a decorator)."""
    if not _is_namedtuple(nodetype):
        raise ValueError("Use `ember.export.register_pytree_node_serialization` for types other than "
                         "`collections.namedtuple`.")

    def serialize_auxdata(aux: Any) -> bytes:
        return json.dumps(list(nodetype._fields)).encode()

    def deserialize_auxdata(data: bytes) -> Any:
        return json.loads(data.decode())

    def from_children(aux: Any, children: Sequence[Any]) -> Any:
        if not isinstance(aux, list) or list(aux) != list(nodetype._fields):
            raise ValueError(f"the namedtuple {nodetype.__name__} was serialized with the fields {aux}, but now has "
                             f"{list(nodetype._fields)}")
        return nodetype(**dict(zip(aux, children)))
    return register_pytree_node_serialization(nodetype, serialized_name=serialized_name,
                                              serialize_auxdata=serialize_auxdata,
                                              deserialize_auxdata=deserialize_auxdata, from_children=from_children)


def _ordered_dict_keys(keys: Any) -> bytes:
    if not all(isinstance(k, str) for k in keys):
        raise NotImplementedError("Serialization of collections.OrderedDict is supported only when the keys are "
                                  f"strings. Found keys: {keys}.")
    return json.dumps(list(keys)).encode()


register_pytree_node_serialization(collections.OrderedDict, serialized_name="collections.OrderedDict",
                                   serialize_auxdata=_ordered_dict_keys,
                                   deserialize_auxdata=lambda data: json.loads(data.decode()))


def _tree_from_json(data: Any, what: str) -> PyTreeDef:
    """The pytree structure _tree_json wrote, checked: "*" leaves, null, and objects of one key, "tuple" or "list"
    (of nodes) or "dict" (of [key, node] pairs, the keys strings or ints, distinct)."""
    def decode(node: Any) -> Any:
        if node == "*":
            return _LEAF
        if node is None:
            return None
        if not isinstance(node, dict) or len(node) != 1:
            raise _Invalid(f"its {what} holds {json.dumps(node)[:60]}, not a pytree node")
        (kind, children), = node.items()
        if kind in ("tuple", "list") and isinstance(children, list):
            nodes = [decode(c) for c in children]
            return tuple(nodes) if kind == "tuple" else nodes
        if kind == "dict" and isinstance(children, list):
            if not all(isinstance(c, list) and len(c) == 2 and type(c[0]) in (str, int) for c in children):
                raise _Invalid(f"its {what} has a dict node whose entries are not [str or int key, node]")
            keys = [c[0] for c in children]
            if len(set(keys)) != len(keys) or len({type(k) for k in keys}) > 1:
                raise _Invalid(f"its {what} has a dict node with repeated keys, or keys of both str and int")
            return {k: decode(v) for k, v in children}
        if kind == "custom":
            return decode_custom(children)
        raise _Invalid(f"its {what} has an unknown pytree node {kind!r}")

    def decode_custom(children: Any) -> Any:
        """A registered node type's node: [serialized name, base64 aux data, [child nodes]]; the type must be
        registered in this process (register_pytree_node_serialization), as in JAX."""
        if not (isinstance(children, list) and len(children) == 3 and isinstance(children[0], str)
                and isinstance(children[1], str) and len(children[1]) <= 2 * MAX_AUXDATA
                and isinstance(children[2], list)):
            raise _Invalid(f"its {what} has a custom node that is not [name, aux data, children]")
        name, aux_text, kids = children
        registered = _DESERIALIZATIONS.get(name)
        if registered is None:
            raise _Invalid(f"its {what} has a node of the type serialized as {name[:80]!r}, which is not "
                           "registered here (register_pytree_node_serialization or "
                           "register_namedtuple_serialization)")
        nodetype, deserialize_auxdata, from_children = registered
        try:
            data = base64.b64decode(aux_text.encode(), validate=True)
        except ValueError:
            raise _Invalid(f"its {what} has a {name!r} node whose aux data is not base64") from None
        try:
            node = from_children(deserialize_auxdata(data), [decode(c) for c in kids])
        except _Invalid:
            raise
        except Exception as err:  # (the registered functions are the user's: any failure is a refused artifact)
            raise _Invalid(f"its {what} has a {name!r} node that cannot be rebuilt: {type(err).__name__}: "
                           f"{err}") from None
        if type(node) is not nodetype:
            raise _Invalid(f"its {what}: from_children of {name!r} made a {type(node).__name__}, not a "
                           f"{nodetype.__name__}")
        return node
    try:
        return tree_structure(decode(data), is_leaf=lambda x: x is _LEAF)
    except RecursionError:
        raise _Invalid(f"its {what} is nested too deep") from None


class _Leaf:
    def __repr__(self) -> str:
        return "*"


_LEAF = _Leaf()


def symbolic_args_specs(args: Any, shapes_specs: Any, constraints: Sequence[str] = (),
                        scope: SymbolicScope | None = None) -> Any:
    """The ShapeDtypeStructs for export of a pytree of arguments (arrays or ShapeDtypeStructs), their shapes
    given by shapes_specs (as jax.export.symbolic_args_specs): None (all concrete), one specification string for
    every argument, or a pytree prefix of args holding one per subtree; "_" and "..." in a specification take the
    argument's own dimensions. constraints or scope (not both) as for symbolic_shape."""
    leaves, tree = tree_flatten(args)
    shapes_dtypes = []
    for leaf in leaves:
        if isinstance(leaf, ShapeDtypeStruct):
            shapes_dtypes.append((leaf.shape, leaf.dtype))
        else:
            aval = aval_of(leaf)
            shapes_dtypes.append((aval.shape, aval.dtype))
    if scope is None:
        scope = SymbolicScope(constraints)
    elif constraints:
        raise ValueError("Cannot use both `scope` and `constraints`")
    specs = shapes_specs
    if isinstance(args, tuple) and isinstance(specs, list):
        specs = tuple(specs)  # (JAX's backward-compatible reading of a list for a tuple of arguments)
    if specs is None or isinstance(specs, str):
        flat_specs = [specs] * len(leaves)
    else:
        flat_specs = _broadcast_prefix(specs, args)
    return tree.unflatten([ShapeDtypeStruct(symbolic_shape(spec, like=shape, scope=scope), dtype)
                           for (shape, dtype), spec in zip(shapes_dtypes, flat_specs)])


def _broadcast_prefix(prefix: Any, full: Any) -> list[Any]:
    """For each leaf of full, the entry of the pytree prefix (None and strings are leaves) above it."""
    out: list[Any] = []

    def walk(p: Any, f: Any, where: str) -> None:
        if p is None or isinstance(p, str):
            out.extend([p] * len(tree_flatten(f)[0]))
            return
        try:
            p_children, p_aux = flatten_one_level(p)
            f_children, f_aux = flatten_one_level(f)
        except ValueError:
            raise ValueError(f"export.symbolic_args_specs shapes_specs must be a pytree prefix of the arguments: at "
                             f"{where or 'the top'}, {p!r} is not a prefix of {f!r}") from None
        p_children, f_children = list(p_children), list(f_children)
        if type(p) is not type(f) or len(p_children) != len(f_children) or p_aux != f_aux:
            raise ValueError(f"export.symbolic_args_specs shapes_specs must be a pytree prefix of the arguments: at "
                             f"{where or 'the top'}, a {type(p).__name__} of {len(p_children)} children where the "
                             f"arguments have a {type(f).__name__} of {len(f_children)}")
        for i, (pc, fc) in enumerate(zip(p_children, f_children)):
            walk(pc, fc, f"{where}[{i}]")
    walk(prefix, full, "")
    return out


__all__ = ["DisabledSafetyCheck", "Exported", "FORMAT_VERSION", "ShapeDtypeStruct", "SymbolicScope",
           "default_export_platform", "deserialize", "export", "is_symbolic_dim",
           "maximum_supported_calling_convention_version", "minimum_supported_calling_convention_version",
           "register_namedtuple_serialization", "register_pytree_node_serialization", "symbolic_args_specs",
           "symbolic_shape"]
