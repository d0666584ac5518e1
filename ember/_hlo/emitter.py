"""Writing StableHLO MLIR text: types, attributes, and an emitter for a function body or a region.

Ops are written in MLIR's generic form ("stablehlo.add"(%a, %b) : (types) -> type), which is uniform for all
ops and stable across StableHLO versions."""
from __future__ import annotations

import itertools
import math
import re
from typing import Any, Iterator, Sequence

import numpy as np

from ember._core import dtypes as dt
from ember._core.dtypes import ShapedArray
from ember._core.shape_poly import dim_text
from ember._core.ir import scope_text
from ember._core.sharding import AbstractMesh, NamedSharding, Sharding, mesh_sharding_text


def tensor_type(aval: ShapedArray) -> str:
    """The MLIR type of a value of this aval: a tensor type (!stablehlo.token for a token, dt.AbstractToken)."""
    if aval.dtype is dt.token:
        return "!stablehlo.token"
    # (a symbolic dimension is written as a placeholder holding its expression: ember.export's templates)
    dims = "".join(f"{d}x" if type(d) is int else f"{dim_text(d)}x" for d in aval.shape)
    return f"tensor<{dims}{dt.mlir_type(aval.dtype)}>"


def i64_array(values: Sequence[int]) -> str:
    return f"array<i64: {', '.join(map(dim_text, values))}>" if len(values) else "array<i64>"


def i64_list(values: Sequence[int]) -> str:
    return "[" + ", ".join(map(dim_text, values)) + "]"


def dot_dimension_numbers(lhs_contracting: Sequence[int], rhs_contracting: Sequence[int],
                          lhs_batch: Sequence[int], rhs_batch: Sequence[int]) -> str:
    """The #stablehlo.dot attribute of a dot_general (empty lists left out)."""
    fields = [(k, v) for k, v in (("lhs_batching_dimensions", lhs_batch), ("rhs_batching_dimensions", rhs_batch),
                                  ("lhs_contracting_dimensions", lhs_contracting),
                                  ("rhs_contracting_dimensions", rhs_contracting)) if v]
    return "#stablehlo.dot<" + ", ".join(f"{k} = {i64_list(v)}" for k, v in fields) + ">"


def scalar_text(value: Any, dtype: np.dtype) -> str:
    """A scalar as an MLIR dense-attribute element: decimal when finite, else its bits in hex."""
    if dtype == dt.bool_:
        return "true" if bool(value) else "false"
    if dt.is_int(dtype):
        return str(int(value))
    if dt.is_complex(dtype):  # MLIR's complex element: (real, imaginary)
        z, part = np.asarray(value).astype(dtype), dt.real_dtype(dtype)
        return f"({scalar_text(z.real, part)},{scalar_text(z.imag, part)})"
    x = np.asarray(value).astype(dtype)
    if math.isfinite(float(x)):
        text = repr(float(x))  # MLIR float literals need a '.', and repr may write 1e-05
        return text if "." in text and "e" not in text else f"{float(x):.17e}"
    bits = x.view(np.dtype(f"u{dtype.itemsize}"))
    return f"0x{int(bits):0{2 * dtype.itemsize}X}"


def dense_text(value: np.ndarray, aval: ShapedArray) -> str:
    """A dense attribute holding an array's elements (row-major): a splat when they are all equal, else the list
    of elements (MLIR's nested form)."""
    value = np.ascontiguousarray(np.asarray(value).astype(aval.dtype).reshape(aval.shape))
    flat = value.reshape(-1)
    raw = flat.tobytes()
    if flat.size and raw == raw[:flat.itemsize] * flat.size:  # (bitwise: -0.0 and NaN payloads kept)
        return f"dense<{scalar_text(flat[0], aval.dtype)}> : {tensor_type(aval)}"

    def nested(x: np.ndarray) -> str:
        if x.ndim == 0:
            return scalar_text(x[()], aval.dtype)
        return "[" + ", ".join(nested(row) for row in x) + "]"
    return f"dense<{nested(value)}> : {tensor_type(aval)}"


def compare_type(dtype: np.dtype) -> str:
    if dt.is_float(dtype) or dt.is_complex(dtype):
        return "FLOAT"
    if dt.is_signed_int(dtype):
        return "SIGNED"
    return "UNSIGNED"


def location_text(scope: Sequence[str], op_name: str, filename: str, lineno: int) -> str:
    """An MLIR location (` loc(...)`) naming an op by its named scopes (ember.named_scope) and primitive, joined
    with '/' as JAX's, around its user source line: XLA keeps the name as the instruction's metadata op_name."""
    def quoted(text: str) -> str:  # (MLIR escapes a byte as a backslash and two hex digits)
        return '"' + "".join(f"\\{b:02X}" if b in b'"\\' or not 0x20 <= b < 0x7F else chr(b)
                             for b in text.encode()) + '"'
    name = f"{scope_text(scope)}/{op_name}" if scope else op_name  # (a transformation last: 'jvp()/cos', as JAX)
    return f' loc({quoted(name)}({quoted(filename)}:{int(lineno)}:0))'


# The facts one equation's lowering may tell another's about a value it made (Emitter.tell / Emitter.fact): the one
# channel between lowerings, besides the values themselves.
FACT_KINDS = {
    # (operand, permutation): the value is stablehlo.transpose of operand (transpose's lowering tells it;
    # backend_forms.dot_general reads it to see `x @ w.T` through its transpose)
    "transpose_of",
    # dimension: the value is stablehlo.iota along that dimension (iota's lowering tells it; the sort's lowering
    # reads it to have ember's sort kernel write the positions it sorts instead of gathering an iota through them)
    "iota",
    # index: the value is the constant branch index lax.platform_dependent chose for the platform the module is
    # lowered for (platform_index's lowering tells it; cond's lowering reads it and emits that branch alone, so the
    # other platforms' branches are never lowered, as in JAX)
    "platform_index",
}


class Emitter:
    """Emits the ops of one function body or region, naming SSA values and remembering their types. A region's
    emitter is a child of its parent's: names are unique across the whole function, and values of the enclosing
    body can be named inside the region. `scope` and `location` are those of the equation being lowered (see
    lower_into): an op is written with the location, when there is one."""

    def __init__(self, indent: str = "    ", counter: Iterator[int] | None = None,
                 types: dict[str, str] | None = None, functions: dict[str, str] | None = None,
                 called: dict[Any, str] | None = None, shard_groups: Iterator[int] | None = None) -> None:
        self.lines: list[str] = []
        self.types: dict[str, str] = {} if types is None else types
        self.indent = indent
        self._counter = itertools.count() if counter is None else counter
        # the module's other functions (name -> text), shared by every emitter of the module: a call of an
        # exported program (func.call) adds the program's functions here, and module_text writes them after @main
        self.functions: dict[str, str] = {} if functions is None else functions
        # the functions emitted for calls (lower.call_function), shared likewise: what they compute -> name
        self.called: dict[Any, str] = {} if called is None else called
        # the ids of the module's shard groups (shard_group), shared likewise: XLA joins every value of one id
        self.shard_groups: Iterator[int] = itertools.count() if shard_groups is None else shard_groups
        self.scope: tuple[str, ...] = ()
        self.location = ""
        self.ops = 0  # ops emitted into this body so far, and the results of the last one (see lower._in_effect_order)
        self.last_results: list[str] = []
        # inside a shard_map body: the mesh its named axes run over (ember._hlo.spmd.AxisContext), read by the
        # lowering of collectives; None elsewhere
        self.axis_context: Any = None
        # in a program partitioned over several devices, those devices (a partition id is an index here), read by
        # the lowering of sharding constraints; None in a one-device program
        self.device_assignment: Any = None
        # the platform the module is compiled for ("cpu", "cuda"), or None for a portable module: read by lowerings
        # that pick a backend's form (ember._hlo.backend_forms)
        self.platform: str | None = None
        # what the lowering of one equation tells the lowering of another about a value it made: (value, kind) ->
        # fact, kinds in FACT_KINDS; shared by the body's regions (see tell / fact)
        self.facts: dict[tuple[str, str], Any] = {}
        # the int8 scalar that orders this body's callbacks (ember._hlo.lower.LoweringContext.effect); made when a
        # callback first needs it, one chain per body (a region's callbacks are ordered within it)
        self.effect: str | None = None
        # the ops written into this body by their first result: (line, text before the attributes, attributes,
        # text after), so that frontend_attributes can add to an op's attributes after it is written
        self._written: dict[str, tuple[int, str, dict[str, str], str]] = {}

    def fresh(self, prefix: str = "") -> str:
        return f"%{prefix}{next(self._counter)}"

    def shard_group(self) -> int:
        """A new shard group id, unique in the module (its functions and regions included): values marked with
        the same id are given the same sharding by XLA's partitioner (shard_alike)."""
        return next(self.shard_groups)

    def child(self) -> "Emitter":
        """An emitter for a region nested in this body."""
        child = Emitter(self.indent + "    ", self._counter, self.types, self.functions, self.called,
                        self.shard_groups)
        child.scope, child.location = self.scope, self.location
        child.axis_context, child.device_assignment = self.axis_context, self.device_assignment
        child.platform = self.platform
        child.facts = self.facts
        return child

    def tell(self, value: str, kind: str, fact: Any) -> None:
        """Record a fact about value, which this body made, for the lowerings of later equations (FACT_KINDS)."""
        if kind not in FACT_KINDS:
            raise ValueError(f"unknown lowering fact {kind!r}; kinds: {sorted(FACT_KINDS)}")
        self.facts[(value, kind)] = fact

    def fact(self, value: str, kind: str) -> Any:
        """The fact of this kind told about value, or None."""
        return self.facts.get((value, kind))

    def declare(self, name: str, aval: ShapedArray) -> str:
        self.types[name] = tensor_type(aval)
        return name

    def op(self, name: str, operands: Sequence[str], results: ShapedArray | Sequence[ShapedArray],
           attrs: dict[str, str] | None = None, regions: Sequence[str] = ()) -> Any:
        """Emit one op; returns its SSA value (or the list of them when `results` is a sequence)."""
        single = isinstance(results, ShapedArray)
        result_avals = [results] if single else list(results)
        result_types = [tensor_type(a) for a in result_avals]
        base = self.fresh()
        names = [base] if len(result_avals) == 1 else [f"{base}#{i}" for i in range(len(result_avals))]
        lhs = base if len(result_avals) == 1 else f"{base}:{len(result_avals)}"
        lhs = f"{lhs} = " if result_avals else ""  # (an op without results: a case kept for a callback's effect)
        attr_text = " {" + ", ".join(f"{k} = {v}" for k, v in attrs.items()) + "}" if attrs else ""
        region_text = f" ({', '.join(regions)})" if regions else ""
        in_types = ", ".join(self.types[o] for o in operands)
        out_types = result_types[0] if len(result_types) == 1 else "(" + ", ".join(result_types) + ")"
        head = f'{self.indent}{lhs}"{name}"({", ".join(operands)}){region_text}'
        tail = f" : ({in_types}) -> {out_types}{self.location}"
        if result_avals:  # (where its attributes are, for frontend_attributes)
            self._written[base] = (len(self.lines), head, dict(attrs or {}), tail)
        self.lines.append(f"{head}{attr_text}{tail}")
        for n, t in zip(names, result_types):
            self.types[n] = t
        self.ops += 1
        self.last_results = names if result_avals else []
        return names[0] if single else names

    def frontend_attributes(self, value: str, metadata: Sequence[tuple[str, str]]) -> None:
        """Add metadata (key, value strings) to the `mhlo.frontend_attributes` of the op of this body that gives
        value, as JAX's lowering writes an equation's XLA metadata on the ops giving its results; an attribute the
        op has already keeps its value. A value no op of this body gives (an argument) is left as it is."""
        written = self._written.get(value.split("#")[0])
        if written is None or not metadata:
            return
        line, head, attrs, tail = written
        merged = dict(metadata) | dict(attrs.get("mhlo.frontend_attributes", ()))
        attrs["mhlo.frontend_attributes"] = merged
        text = ", ".join(f"{k} = {_attribute_text(v)}" for k, v in attrs.items())
        self.lines[line] = f"{head} {{{text}}}{tail}"

    def returns(self, values: Sequence[str]) -> None:
        """End a region's block with stablehlo.return."""
        types = ", ".join(self.types[v] for v in values)
        self.lines.append(f'{self.indent}"stablehlo.return"({", ".join(values)}) : ({types}) -> ()')

    def region(self, block_args: Sequence[str], body: "Emitter") -> str:
        """The text of a one-block region whose arguments were declared in `body` (a child emitter)."""
        args = ", ".join(f"{name}: {self.types[name]}" for name in block_args)
        head = f"{self.indent}  ^bb0({args}):\n" if block_args else ""
        return "{\n" + head + "\n".join(body.lines) + f"\n{self.indent}}}"

    def constant(self, value: Any, aval: ShapedArray) -> str:
        """A splat constant of the given shape."""
        attr = f"dense<{scalar_text(value, aval.dtype)}> : {tensor_type(aval)}"
        return self.op("stablehlo.constant", [], aval, {"value": attr})

    def reduce(self, operand: str, aval: ShapedArray, axes: Sequence[int], hlo_op: str, init: Any,
               keep_nan: bool = False) -> str:
        """stablehlo.reduce of operand (of type aval) over axes, combining with the scalar op stablehlo.<hlo_op>
        from init (a Python value of aval's dtype). keep_nan: the body is `a != a ? a : op(a, b)` (a NaN once
        reached is kept), which computes the same as op with NaN-propagating max/min, in a form the CPU plugin's
        YNNPACK reduction does not take (it drops NaN: ember._hlo.row_fusion.lower_extremum)."""
        scalar = ShapedArray((), aval.dtype)
        body = self.child()
        a, b = (body.declare(body.fresh("b"), scalar) for _ in range(2))
        value = body.op(f"stablehlo.{hlo_op}", [a, b], scalar)
        if keep_nan:
            value = body.op("stablehlo.select", [body.compare(a, a, scalar, "NE"), a, value], scalar)
        body.returns([value])
        region = self.region([a, b], body)
        out = ShapedArray(tuple(d for i, d in enumerate(aval.shape) if i not in axes), aval.dtype)
        return self.op("stablehlo.reduce", [operand, self.constant(init, scalar)], out,
                       {"dimensions": i64_array(tuple(axes))}, [region])

    def compare(self, lhs: str, rhs: str, aval: ShapedArray, direction: str) -> str:
        """stablehlo.compare of two values of type aval (direction: EQ, NE, LT, ...): booleans of aval's shape."""
        return self.op("stablehlo.compare", [lhs, rhs], aval.update(dtype=np.dtype(bool)),
                       {"comparison_direction": f"#stablehlo<comparison_direction {direction}>",
                        "compare_type": f"#stablehlo<comparison_type {compare_type(aval.dtype)}>"})

    def broadcast(self, operand: str, operand_aval: ShapedArray, shape: Sequence[int],
                  dims: Sequence[int] | None = None) -> str:
        """broadcast_in_dim; by default a scalar or an equal-rank operand maps to trailing dimensions."""
        if tuple(operand_aval.shape) == tuple(shape):
            return operand
        if dims is None:
            dims = tuple(range(len(shape) - operand_aval.ndim, len(shape)))
        return self.op("stablehlo.broadcast_in_dim", [operand], operand_aval.update(shape=shape),
                       {"broadcast_dimensions": i64_array(dims)})


def _attribute_text(value: Any) -> str:
    """An attribute's text: as written, or a dictionary of strings (frontend attributes) in MLIR's form, sorted, its
    keys bare where MLIR allows."""
    if not isinstance(value, dict):
        return value
    items = (f"{k if re.fullmatch(r'[A-Za-z_][A-Za-z0-9_$.]*', k) else quoted_text(k)} = {quoted_text(v)}"
             for k, v in sorted(value.items()))
    return "{" + ", ".join(items) + "}"


def value_rank(emitter: Emitter, value: str) -> int:
    """The rank of an SSA value of the body being emitted (its tensor type's dimensions: tensor<2x3xcomplex<f32>>
    has 2)."""
    parts = emitter.types[value][len("tensor<"):-1].split("x")
    return next((i for i, part in enumerate(parts) if not part.isdigit()), len(parts))


def row_major(rank: int) -> tuple[int, ...]:
    return tuple(range(rank - 1, -1, -1))


def _layouts_text(layouts: Sequence[Sequence[int]]) -> str:
    return "[" + ", ".join(f"dense<[{', '.join(str(d) for d in lay)}]> : tensor<{len(lay)}xindex>" if lay else
                           "dense<> : tensor<0xindex>" for lay in layouts) + "]"


def emit_custom_call(emitter: Emitter, target: str, operands: Sequence[str], results: Sequence[ShapedArray],
                     attrs: dict[str, int], has_side_effect: bool,
                     operand_layouts: Sequence[Sequence[int]] | None = None,
                     result_layouts: Sequence[Sequence[int]] | None = None, once: bool = False, *,
                     config: str | None = None, aliases: Sequence[tuple[int, int]] = ()) -> list[str]:
    """`stablehlo.custom_call @target` to a typed FFI handler (api_version 4): the integer attrs reach the handler
    as int64 scalars (or `config` is the text of the whole backend_config dictionary: a user's ffi_call
    attributes); layouts are minor-to-major, one per operand/result (row-major when omitted); aliases pairs
    (operand, result) whose buffers XLA shares (output_operand_aliases). The one writer of the op:
    ember._hlo.ffi.custom_call (ember's handlers and users'), order_call in lower.py, and the CPU kernels' calls
    (row_fusion._call, backend_forms._batched_dot) use it.

    In a program partitioned over several devices a call with side effects, or one asked to run `once` (a host
    callback), is placed as JAX places its callbacks: inside a shard_map body every device calls it on its own
    block ({manual}); elsewhere it runs once, on the first device, with its operands gathered there ({maximal
    device=0}; XLA's partitioner refuses a side-effecting call without a sharding)."""
    if operand_layouts is None:
        operand_layouts = [row_major(value_rank(emitter, o)) for o in operands]
    if result_layouts is None:
        result_layouts = [row_major(a.ndim) for a in results]
    if config is None:
        config = "{" + ", ".join(f"{k} = {int(v)} : i64" for k, v in sorted(attrs.items())) + "}"
    op_attrs = {
        "call_target_name": f'"{target}"',
        "api_version": "4 : i32",
        "backend_config": config,
        "has_side_effect": "true" if has_side_effect else "false",
        "operand_layouts": _layouts_text(operand_layouts),
        "result_layouts": _layouts_text(result_layouts),
    }
    if aliases:
        tuple_index = (lambda k: f"[{k}]") if len(results) > 1 else (lambda k: "[]")
        op_attrs["output_operand_aliases"] = "[" + ", ".join(
            f"#stablehlo.output_operand_alias<output_tuple_indices = {tuple_index(o)}, operand_index = {i}, "
            "operand_tuple_indices = []>" for i, o in aliases) + "]"
    if (has_side_effect or once) and emitter.device_assignment is not None:
        one = "{manual}" if emitter.axis_context is not None else "{maximal device=0}"
        op_attrs["mhlo.sharding"] = quoted_text(one if len(results) == 1 else "{" + ", ".join([one] * len(results))
                                                + "}")
    out = emitter.op("stablehlo.custom_call", list(operands), list(results), op_attrs)
    return out if isinstance(out, list) else [out]


def module_text(arg_avals: Sequence[ShapedArray], out_avals: Sequence[ShapedArray], body: Emitter,
                arg_names: Sequence[str], out_names: Sequence[str], donors: Sequence[bool] | None = None,
                num_partitions: int = 1, arg_shardings: Sequence[str | None] | None = None,
                out_shardings: Sequence[str | None] | None = None) -> str:
    """The module whose @main takes arg_names and returns out_names; donors marks the arguments whose buffers XLA
    may reuse for outputs (`jax.buffer_donor`: the caller gives them up, as jit's donate_argnums). A program
    partitioned over num_partitions devices has an `mhlo.sharding` (XLA's HloSharding text) on each argument and
    result given one (None: XLA's sharding propagation chooses)."""
    donors = donors or [False] * len(arg_names)
    arg_shardings = arg_shardings or [None] * len(arg_names)
    out_shardings = out_shardings or [None] * len(out_names)
    # A donated argument is aliased to the first output not yet taken of its type and sharding (as JAX pairs them:
    # `tf.aliasing_output`, so XLA writes that output into the argument's buffer); one without such an output is
    # only a donor (`jax.buffer_donor`: XLA may use it)
    aliases: dict[int, int] = {}
    for k, (donor, aval, sharding) in enumerate(zip(donors, arg_avals, arg_shardings)):
        if donor:
            i = next((i for i, (o, osh) in enumerate(zip(out_avals, out_shardings)) if i not in aliases.values()
                      and o.shape == aval.shape and o.dtype == aval.dtype and osh == sharding), None)
            if i is not None:
                aliases[k] = i

    def attrs(k: int | None, donor: bool, sharding: str | None) -> str:
        found = ([f"tf.aliasing_output = {aliases[k]} : i32"] if k in aliases else
                 ["jax.buffer_donor = true"] if donor else []) + (
            [f"mhlo.sharding = {quoted_text(sharding)}"] if sharding is not None else [])
        return " {" + ", ".join(found) + "}" if found else ""
    args = ", ".join(f"{n}: {tensor_type(a)}" + attrs(k, d, sh)
                     for k, (n, a, d, sh) in enumerate(zip(arg_names, arg_avals, donors, arg_shardings)))
    results = ", ".join(tensor_type(a) + attrs(None, False, sh) for a, sh in zip(out_avals, out_shardings))
    result_types = ", ".join(tensor_type(a) for a in out_avals)
    ret = f"    func.return {', '.join(out_names)} : {result_types}" if out_names else "    func.return"
    others = "".join(body.functions[name] for name in sorted(body.functions))
    return (f"module @ember attributes {{mhlo.num_partitions = {num_partitions} : i32, "
            "mhlo.num_replicas = 1 : i32} {\n"
            f"  func.func public @main({args}) -> ({results}) {{\n"
            + "\n".join(body.lines) + ("\n" if body.lines else "")
            + ret + "\n  }\n" + others + "}\n")


def quoted_text(text: str) -> str:
    """A string attribute's text: MLIR escapes quotes and backslashes."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sharding_marker(emitter: "Emitter", x: str, aval: ShapedArray, text: str) -> str:
    """x constrained to the HloSharding text (a custom call @Sharding: XLA's partitioner places x so there)."""
    return emitter.op("stablehlo.custom_call", [x], aval, {"call_target_name": '"Sharding"',
                                                          "mhlo.sharding": quoted_text(text)})


def over_abstract_mesh(sharding: Any) -> bool:
    """A NamedSharding over an AbstractMesh (a type's, or an export's): its partition ids are the mesh's positions."""
    return isinstance(sharding, NamedSharding) and isinstance(sharding.mesh, AbstractMesh)


def places(sharding: Sharding, devices: Sequence[object] | None) -> bool:
    """Whether constraining a value to sharding places it in a program over devices (None: one device): a sharding
    naming several devices; one over an AbstractMesh, in a program over as many devices, several."""
    if over_abstract_mesh(sharding):
        return devices is not None and len(devices) == sharding.mesh.size > 1
    return len(sharding._device_assignment) > 1


def sharding_text(sharding: Sharding, ndim: int, devices: Sequence[object] | None) -> str:
    """The HloSharding text (an `mhlo.sharding` attribute) of sharding for an array of rank ndim in a program
    partitioned over devices (a partition id is a position there; None: the sharding's own device order). A
    sharding over an AbstractMesh names the mesh's positions, partition i on devices[i] (see places)."""
    if over_abstract_mesh(sharding):
        return mesh_sharding_text(sharding.mesh, sharding.spec, ndim)
    hlo = sharding._to_hlo(ndim)
    own = tuple(sharding._device_assignment)
    if devices is not None and own != tuple(devices):
        position = {d: i for i, d in enumerate(devices)}
        missing = [d for d in own if d not in position]
        if missing:
            raise ValueError(f"the sharding {sharding} names devices {[d.id for d in missing]} (of "  # type: ignore
                             f"{[getattr(d, 'id', d) for d in own]}) outside the program's devices "
                             f"{[getattr(d, 'id', d) for d in devices]}")
        hlo = hlo.relabel([position[d] for d in own])
    return hlo.text()
