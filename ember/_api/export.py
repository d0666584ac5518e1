"""ember.export, as jax.export: a jitted function exported for given argument types, serialized to a versioned
artifact, deserialized (in another process) and called, eagerly, inside jit, under vmap and, to the order it was
exported with, under grad.

    exported = ember.export.export(ember.jit(f))(ember.ShapeDtypeStruct((3,), np.float32), ...)
    blob = exported.serialize(vjp_order=1)          # bytes
    restored = ember.export.deserialize(blob)      # in this or another process
    restored.call(x)                               # f(x), compiled from the stored StableHLO

The artifact (FORMAT_VERSION 1) is the bytes b"ember-exported\\n" and a UTF-8 JSON object: "format" (1), "ember"
(the exporting version), "fun_name", "in_avals" / "out_avals" ([shape, dtype name, weak type] per flat input /
output), "in_tree" / "out_tree" (the pytree structures, of tuples, lists, dicts with str or int keys and None:
other node types cannot be serialized), "platforms" (["cpu"]), "module" (the StableHLO text of @main: flat inputs
-> flat outputs) and "vjp" (null, or the same object for the VJP: (inputs..., cotangents of the floating-point
outputs...) -> (cotangents of the floating-point inputs...), nested vjp_order deep). The module is StableHLO
text: it parses and compiles wherever the plugin takes that StableHLO version."""
from __future__ import annotations

import json
from typing import Any, Callable, Sequence

import numpy as np

from ember._api.autodiff import vjp as _vjp
from ember._api.jit import Jitted, jit
from ember._api.stages import ShapeDtypeStruct, struct_of
from ember._api.staging import first_mismatch
from ember._control.exported import ExportedModule, call_exported
from ember._core import ShapedArray
from ember._core import dtypes as dt
from ember._core.pytree import PyTreeDef, tree_flatten, tree_structure
from ember._hlo import lower
from ember._transforms.discharge import pure_for_lowering
from ember._runtime.compile_cache import package_version

MAGIC = b"ember-exported\n"
FORMAT_VERSION = 1


class Exported:
    """A function exported for fixed argument types (as jax.export.Exported): its StableHLO module and calling
    convention. `call(*args)` runs it (eagerly, inside jit, under vmap, and under grad when it carries its VJP);
    `serialize(vjp_order)` gives the artifact `deserialize` reads."""

    def __init__(self, fun_name: str, in_tree: PyTreeDef, out_tree: PyTreeDef, module: ExportedModule,
                 vjp_source: Callable[[int], ExportedModule | None] | None = None):
        self.fun_name, self.in_tree, self.out_tree, self._module = fun_name, in_tree, out_tree, module
        self._vjp_source = vjp_source  # (exported from a function: builds the VJP modules on demand)

    in_avals = property(lambda self: self._module.in_avals)
    out_avals = property(lambda self: self._module.out_avals)
    platforms = ("cpu",)
    nr_devices = 1

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
        payload = {"format": FORMAT_VERSION, "ember": package_version(), "fun_name": self.fun_name,
                   "in_tree": _tree_json(self.in_tree, "in_tree"), "out_tree": _tree_json(self.out_tree, "out_tree"),
                   "platforms": list(self.platforms), **_module_json(module)}
        return MAGIC + json.dumps(payload, separators=(",", ":")).encode()

    def _with_vjp(self, order: int) -> ExportedModule:
        if order <= self._module.vjp_order:
            return _truncated(self._module, order)
        if self._vjp_source is None:
            raise ValueError(f"Exported.serialize: {self.fun_name} was deserialized with vjp_order="
                             f"{self._module.vjp_order}; it cannot be serialized with vjp_order={order}")
        return self._vjp_source(order)

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """Run the exported function on arguments of the exported types (the same pytree structure)."""
        leaves, tree = tree_flatten((args, kwargs))
        if tree != self.in_tree:
            raise TypeError(f"Exported.call({self.fun_name}): arguments of structure {tree}, but it was exported for "
                            f"{self.in_tree}")
        mismatch = first_mismatch(args, kwargs, leaves, self.in_avals)
        if mismatch is not None:
            where, want, got = mismatch
            raise TypeError(f"Exported.call({self.fun_name}): {where} must be {want.str_short()}, got "
                            f"{got.str_short()}")
        return self.out_tree.unflatten(call_exported(leaves, self._callable()))

    def _callable(self) -> ExportedModule:
        """The module call_exported runs: as deserialized, or, exported here, with its VJP (built on first use,
        so that grad of call works as in JAX; serialize with vjp_order for more)."""
        if self._vjp_source is None:
            return self._module
        return self._with_vjp(max(self._module.vjp_order, 1))

    def __repr__(self) -> str:
        ins = ", ".join(a.str_short() for a in self.in_avals)
        return f"Exported({self.fun_name}: ({ins}), vjp_order={self.vjp_order})"


def export(fun: Any, *, platforms: Sequence[str] | None = None) -> Callable[..., Exported]:
    """export(jitted)(*args, **kwargs) -> Exported, for arguments given as arrays, numbers or ShapeDtypeStructs
    (as jax.export.export). fun is a jitted function (ember.jit(f)); a plain function is jitted."""
    if platforms is not None and any(p.lower() not in ("cpu", "host") for p in platforms):
        raise ValueError(f"export: ember exports for the CPU platform only, got platforms={list(platforms)}")
    jitted = fun if isinstance(fun, Jitted) else jit(fun)

    def exporter(*args: Any, **kwargs: Any) -> Exported:
        traced = jitted.trace(*args, **kwargs)
        ir = pure_for_lowering(traced.jaxpr, f"export({jitted.name})")
        name = jitted.name[len("jit("):-1] if jitted.name.startswith("jit(") else jitted.name
        module = ExportedModule(lower(ir, inline_consts=True), ir.in_avals, ir.out_avals, None, name)
        flat = _flat_function(jitted, traced.in_tree)
        cache: dict[int, ExportedModule] = {0: module}

        def vjp_source(order: int) -> ExportedModule:
            if order not in cache:
                cache[order] = _module_with_vjp(flat, module, order)
            return cache[order]
        return Exported(name, traced.in_tree, ir.out_tree, module, vjp_source)
    return exporter


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
        full_cts: list[Any] = [np.zeros(a.shape, a.dtype) for a in module.out_avals]  # (ignored: not float)
        for i, ct in zip(float_outs, cts):
            full_cts[i] = ct
        in_cts = pullback(full_cts)
        return [in_cts[i] for i in float_ins]
    ct_avals = [module.out_avals[i].strip_weak_type() for i in float_outs]
    structs = [struct_of(a) for a in list(module.in_avals) + ct_avals]
    inner = export(jit(vjp_flat))(*structs)
    vjp_module = _module_with_vjp(_flat_function(jit(vjp_flat), inner.in_tree), inner._module, order - 1)
    return ExportedModule(module.text, module.in_avals, module.out_avals, vjp_module, module.name)


def _truncated(module: ExportedModule, order: int) -> ExportedModule:
    if module.vjp_order == order:
        return module
    vjp = None if order == 0 else _truncated(module.vjp, order - 1)  # type: ignore[arg-type]
    return ExportedModule(module.text, module.in_avals, module.out_avals, vjp, module.name)


def deserialize(blob: bytes | bytearray) -> Exported:
    """The Exported that serialize wrote (as jax.export.deserialize); ValueError for anything else."""
    data = bytes(blob)
    if not data.startswith(MAGIC):
        raise ValueError("ember.export.deserialize: not an ember exported artifact (it does not start with "
                         f"{MAGIC!r})")
    try:
        payload = json.loads(data[len(MAGIC):].decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"ember.export.deserialize: the artifact is corrupt or truncated ({err})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT_VERSION:
        raise ValueError(f"ember.export.deserialize: artifact format {payload.get('format')!r} is not supported "
                         f"(this ember reads format {FORMAT_VERSION})")
    try:
        name = payload["fun_name"]
        module = _module_from_json(payload, name)
        return Exported(name, _tree_from_json(payload["in_tree"]), _tree_from_json(payload["out_tree"]), module)
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"ember.export.deserialize: the artifact is malformed ({type(err).__name__}: {err})"
                         ) from None


def _module_json(module: ExportedModule) -> dict[str, Any]:
    return {"in_avals": [_aval_json(a) for a in module.in_avals],
            "out_avals": [_aval_json(a) for a in module.out_avals], "module": module.text,
            "vjp": None if module.vjp is None else _module_json(module.vjp)}


def _module_from_json(data: dict[str, Any], name: str) -> ExportedModule:
    vjp = None if data["vjp"] is None else _module_from_json(data["vjp"], f"vjp({name})")
    if not isinstance(data["module"], str) or "@main" not in data["module"]:
        raise ValueError("the module is not a StableHLO text module with @main")
    return ExportedModule(data["module"], [_aval_from_json(a) for a in data["in_avals"]],
                          [_aval_from_json(a) for a in data["out_avals"]], vjp, name)


def _aval_json(aval: ShapedArray) -> list[Any]:
    return [list(aval.shape), aval.dtype.name, bool(aval.weak_type)]


def _aval_from_json(data: list[Any]) -> ShapedArray:
    shape, dtype, weak = data
    return ShapedArray(tuple(int(d) for d in shape), dt.parse_dtype(str(dtype)), bool(weak))


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
        raise TypeError(f"export: the {what} contains a {type(node).__name__} node, which cannot be serialized "
                        "(only tuples, lists, dicts with str or int keys and None can)")
    return encode(tree.unflatten([_LEAF] * tree.num_leaves))


def _tree_from_json(data: Any) -> PyTreeDef:
    def decode(node: Any) -> Any:
        if node == "*":
            return _LEAF
        if node is None:
            return None
        (kind, children), = node.items()
        if kind == "tuple":
            return tuple(decode(c) for c in children)
        if kind == "list":
            return [decode(c) for c in children]
        if kind == "dict":
            return {k: decode(v) for k, v in children}
        raise ValueError(f"unknown pytree node {kind!r}")
    return tree_structure(decode(data), is_leaf=lambda x: x is _LEAF)


class _Leaf:
    def __repr__(self) -> str:
        return "*"


_LEAF = _Leaf()


def symbolic_shape(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("ember.export.symbolic_shape: shape polymorphism is not supported; export one "
                              "Exported per batch size (or vmap the call, which maps it over the batch)")


__all__ = ["Exported", "FORMAT_VERSION", "ShapeDtypeStruct", "deserialize", "export", "symbolic_shape"]
