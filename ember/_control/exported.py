"""call_exported: a call of an exported program (ember.export) inside any program, as a primitive.

Its parameter is an ExportedModule: the StableHLO module of a function (flat inputs -> flat outputs, entry @main),
the types of its inputs and outputs, and, when it was exported with vjp_order > 0, the module of its VJP. Its
story: abstract eval gives the exported output types; lowering copies the module's functions into the program
being lowered (@main renamed after a hash of the module, private) and emits a func.call; reverse mode calls the VJP
module (an exported function is differentiable to the order it was exported with, as JAX's); forward mode is not
available (as in JAX: an Exported carries its VJP only); batching maps the call over the batch with a scan, one
slice at a time (the module is compiled for unbatched shapes)."""
from __future__ import annotations

import hashlib
import re
from typing import Any, Sequence

from ember._control.loops import scan_flat
from ember._core import Primitive, ShapedArray, aval_of
from ember._core import dtypes as dt
from ember._core.sharding import AbstractMesh, NamedSharding, PartitionSpec, explicit_sharding
from ember._hlo import LoweringContext
from ember._hlo.emitter import sharding_marker, sharding_text
from ember._hlo.lower import DevicesNeeded
from ember._prims.shape import BatchDim, batch_at_front, zeros


class ExportedModule:
    """The program of an exported function, as call_exported runs it: text (a StableHLO module whose @main takes
    in_avals and returns out_avals), and vjp, the ExportedModule of its VJP, (inputs..., cotangents of the
    floating-point outputs...) -> (cotangents of the floating-point inputs...), or None. A program exported for
    several devices has their mesh (an AbstractMesh: names, sizes and types of its axes; None: one device) and the
    PartitionSpec (or None: any) of each input and output over it; it runs on as many devices, its inputs and
    outputs split as their specs say (partition i of the export on the i-th device of the calling program)."""
    __slots__ = ("text", "in_avals", "out_avals", "vjp", "name", "digest", "mesh", "in_specs", "out_specs")

    def __init__(self, text: str, in_avals: Sequence[ShapedArray], out_avals: Sequence[ShapedArray],
                 vjp: "ExportedModule | None", name: str, mesh: AbstractMesh | None = None,
                 in_specs: Sequence[PartitionSpec | None] | None = None,
                 out_specs: Sequence[PartitionSpec | None] | None = None):
        self.text, self.in_avals, self.out_avals = text, tuple(in_avals), tuple(out_avals)
        self.vjp, self.name, self.mesh = vjp, name, mesh
        self.in_specs = tuple(in_specs) if in_specs is not None else (None,) * len(self.in_avals)
        self.out_specs = tuple(out_specs) if out_specs is not None else (None,) * len(self.out_avals)
        self.digest = hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def nr_devices(self) -> int:
        return 1 if self.mesh is None else self.mesh.size

    @property
    def vjp_order(self) -> int:
        return 0 if self.vjp is None else 1 + self.vjp.vjp_order

    def _key(self) -> tuple[Any, ...]:
        return (self.text, self.vjp, self.in_avals, self.out_avals, self.mesh, self.in_specs, self.out_specs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExportedModule) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash((self.digest, self.in_avals, self.out_avals))

    def __repr__(self) -> str:
        return f"exported:{self.name}:{self.digest}"


call_exported_p = Primitive("call_exported", multiple_results=True, checks=())


@call_exported_p.def_rule("sharding_rule")
def _sharding_rule(*avals: ShapedArray, outs: Sequence[ShapedArray], module: ExportedModule) -> list[Any]:
    """A program exported for one device: the partitioner runs it as any other code on split operands, its results
    typed replicated (what XLA makes of them unless a later constraint splits them). One exported for a mesh: its
    results typed as exported, over the operands' mesh (else the exported AbstractMesh)."""
    if module.mesh is None:
        return [None] * len(outs)
    mesh = next((a.explicit.mesh for a in avals if a.explicit is not None), module.mesh)
    return [None if a.explicit is None else explicit_sharding(mesh, tuple(a.explicit.spec)) for a in module.out_avals]


_sharding_rule.wants_outs = True  # type: ignore[attr-defined]


def call_exported(args: Sequence[Any], module: ExportedModule) -> list[Any]:
    return call_exported_p.bind(*args, module=module)


@call_exported_p.def_rule("abstract_eval")
def _abstract_eval(*avals: ShapedArray, module: ExportedModule) -> list[ShapedArray]:
    if len(avals) != len(module.in_avals):
        raise TypeError(f"call_exported({module.name}): expected {len(module.in_avals)} arguments, got {len(avals)}")
    for i, (got, want) in enumerate(zip(avals, module.in_avals)):
        if got.shape != want.shape or got.dtype != want.dtype:
            raise TypeError(f"call_exported({module.name}): argument {i} must be {want.str_short()}, got "
                            f"{got.str_short()}")
    return [a.strip_weak_type() for a in module.out_avals]


_FUNC = re.compile(r"^  func\.func (public|private) @([\w$.-]+)\(", re.M)


def _functions(module: ExportedModule) -> tuple[str, dict[str, str]]:
    """(the name @main gets, {name: text} of the module's functions, every one private and renamed after the
    module's digest, so that they cannot clash with the functions of the module calling them)."""
    main = f"ember_exported_{module.digest}"
    text = module.text
    names = [m.group(2) for m in _FUNC.finditer(text)]
    new = {name: main if name == "main" else f"{main}_{name}" for name in names}
    text = re.sub(r"@([\w$.-]+)", lambda m: f"@{new.get(m.group(1), m.group(1))}", text)
    starts = [m.start() for m in _FUNC.finditer(text)]
    end = text.rstrip().rfind("}")  # the module's closing brace
    functions = {}
    for start, stop in zip(starts, starts[1:] + [end]):
        body = _FUNC.sub(lambda m: f"  func.func private @{m.group(2)}(", text[start:stop], count=1)
        functions[_FUNC.match(body).group(2)] = body  # type: ignore[union-attr]
    return main, functions


@call_exported_p.def_rule("lowering")
def _lowering(ctx: LoweringContext, *operands: str, module: ExportedModule) -> list[str]:
    main, functions = _functions(module)
    for name, text in functions.items():
        ctx.emitter.functions.setdefault(name, text)
    if module.mesh is None:
        return ctx.op("func.call", list(operands), list(ctx.avals_out), {"callee": f"@{main}"})
    # (exported for a mesh: the program calling it runs on as many devices, partition i of the export on its i-th,
    # and the inputs and outputs are constrained as exported, as JAX's call of an Exported constrains them)
    devices = ctx.emitter.device_assignment
    count = 1 if devices is None else len(devices)
    if count != module.mesh.size:
        raise DevicesNeeded(f"Function {module.name} was exported for {module.mesh.size} devices and is called in "
                            f"a context with {count} devices, which is not allowed.")
    def constrained(values: Sequence[str], avals: Sequence[ShapedArray], specs: Sequence[Any]) -> list[str]:
        return [x if spec is None else sharding_marker(ctx.emitter, x, a, sharding_text(
            NamedSharding(module.mesh, spec), a.ndim, devices)) for x, a, spec in zip(values, avals, specs)]
    operands = constrained(operands, ctx.avals_in, module.in_specs)
    outs = ctx.op("func.call", list(operands), list(ctx.avals_out), {"callee": f"@{main}"})
    return constrained(outs, ctx.avals_out, module.out_specs)


@call_exported_p.def_rule("vjp")
def _vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *, module: ExportedModule
         ) -> list[Any]:
    if module.vjp is None:
        raise TypeError(f"{module.name} was exported without its VJP (vjp_order=0): export it with "
                        "serialize(vjp_order=1) (or more) to differentiate the deserialized function, as in JAX")
    float_outs = [i for i, a in enumerate(module.out_avals) if dt.is_inexact(a.dtype)]
    float_ins = [i for i, a in enumerate(module.in_avals) if dt.is_inexact(a.dtype)]
    out_cts = [zeros(module.out_avals[i].strip_weak_type()) if cts[i] is None else cts[i] for i in float_outs]
    in_cts = call_exported(list(ins) + out_cts, module.vjp)
    result: list[Any] = [None] * len(ins)
    for i, ct in zip(float_ins, in_cts):
        result[i] = ct if needs[i] else None
    return result


class ForwardModeOfExportedError(TypeError, NotImplementedError):
    """jvp of an exported function: an Exported carries its VJP only (as in JAX)."""


EXPORTED_NO_FORWARD_MODE = ("forward-mode differentiation of an exported function is not available (it carries its "
                            "VJP only, as in JAX); use grad/vjp, exporting with vjp_order >= 1")
call_exported_p.mark("jvp", EXPORTED_NO_FORWARD_MODE, ForwardModeOfExportedError)


@call_exported_p.def_rule("batching")
def _batching(args: Sequence[Any], dims: Sequence[BatchDim], *, module: ExportedModule
              ) -> tuple[list[Any], list[BatchDim]]:
    size = next(aval_of(x).shape[d] for x, d in zip(args, dims) if d is not None)
    batched = [i for i, d in enumerate(dims) if d is not None]
    xs = [batch_at_front(args[i], dims[i], size) for i in batched]
    fixed = [None if d is not None else x for x, d in zip(args, dims)]

    def body(carry: list[Any], slices: list[Any]) -> tuple[list[Any], list[Any]]:
        call_args = list(fixed)
        for i, x in zip(batched, slices):
            call_args[i] = x
        return carry, call_exported(call_args, module)
    _, ys = scan_flat(body, [], xs, size)
    return ys, [0] * len(ys)


__all__ = ["EXPORTED_NO_FORWARD_MODE", "ExportedModule", "ForwardModeOfExportedError", "call_exported",
           "call_exported_p"]
