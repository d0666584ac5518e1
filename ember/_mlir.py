"""Writing StableHLO MLIR text: types, attributes and an emitter for one function body.

Ops are written in MLIR's generic form ("stablehlo.add"(%a, %b) : (types) -> type), which is uniform for all
ops and stable across StableHLO versions."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ember import _dtypes as dt
from ember._dtypes import ShapedArray

_MLIR_ELEMENT = {
    dt.bool_: "i1", dt.int8: "i8", dt.int16: "i16", dt.int32: "i32", dt.int64: "i64",
    dt.uint8: "ui8", dt.uint16: "ui16", dt.uint32: "ui32", dt.uint64: "ui64",
    dt.bfloat16: "bf16", dt.float16: "f16", dt.float32: "f32", dt.float64: "f64",
}


def element_type(dtype: np.dtype) -> str:
    return _MLIR_ELEMENT[dtype]


def tensor_type(aval: ShapedArray) -> str:
    dims = "".join(f"{d}x" for d in aval.shape)
    return f"tensor<{dims}{_MLIR_ELEMENT[aval.dtype]}>"


def i64_array(values: Sequence[int]) -> str:
    return f"array<i64: {', '.join(str(int(v)) for v in values)}>" if len(values) else "array<i64>"


def i64_list(values: Sequence[int]) -> str:
    return "[" + ", ".join(str(int(v)) for v in values) + "]"


def scalar_text(value: Any, dtype: np.dtype) -> str:
    """A scalar as an MLIR dense-attribute element: decimal when finite, else its bits in hex."""
    if dtype == dt.bool_:
        return "true" if bool(value) else "false"
    if dt.is_int(dtype):
        return str(int(value))
    x = np.asarray(value).astype(dtype)
    if math.isfinite(float(x)):
        text = repr(float(x))  # MLIR float literals need a '.', and repr may write 1e-05
        return text if "." in text and "e" not in text else f"{float(x):.17e}"
    bits = x.view(np.dtype(f"u{dtype.itemsize}"))
    return f"0x{int(bits):0{2 * dtype.itemsize}X}"


def compare_type(dtype: np.dtype) -> str:
    if dt.is_float(dtype):
        return "FLOAT"
    if dt.is_signed_int(dtype):
        return "SIGNED"
    return "UNSIGNED"


class FunctionEmitter:
    """Emits the ops of one function body, naming SSA values and remembering their types."""

    def __init__(self, indent: str = "    ") -> None:
        self.lines: list[str] = []
        self.types: dict[str, str] = {}
        self.indent = indent
        self._count = 0

    def fresh(self) -> str:
        self._count += 1
        return f"%{self._count - 1}"

    def declare(self, name: str, aval: ShapedArray) -> str:
        self.types[name] = tensor_type(aval)
        return name

    def op(self, name: str, operands: Sequence[str], results: ShapedArray | Sequence[ShapedArray],
           attrs: dict[str, str] | None = None, region: str | None = None) -> Any:
        """Emit one op; returns its SSA value (or the list of them when `results` is a sequence)."""
        single = isinstance(results, ShapedArray)
        result_avals = [results] if single else list(results)
        result_types = [tensor_type(a) for a in result_avals]
        base = self.fresh()
        names = [base] if len(result_avals) == 1 else [f"{base}#{i}" for i in range(len(result_avals))]
        lhs = base if len(result_avals) == 1 else f"{base}:{len(result_avals)}"
        attr_text = " {" + ", ".join(f"{k} = {v}" for k, v in attrs.items()) + "}" if attrs else ""
        region_text = f" ({region})" if region else ""
        in_types = ", ".join(self.types[o] for o in operands)
        out_types = result_types[0] if len(result_types) == 1 else "(" + ", ".join(result_types) + ")"
        self.lines.append(f'{self.indent}{lhs} = "{name}"({", ".join(operands)}){region_text}{attr_text} : '
                          f"({in_types}) -> {out_types}")
        for n, t in zip(names, result_types):
            self.types[n] = t
        return names[0] if single else names

    def constant(self, value: Any, aval: ShapedArray) -> str:
        """A splat constant of the given shape."""
        attr = f"dense<{scalar_text(value, aval.dtype)}> : {tensor_type(aval)}"
        return self.op("stablehlo.constant", [], aval, {"value": attr})

    def broadcast(self, operand: str, operand_aval: ShapedArray, shape: Sequence[int],
                  dims: Sequence[int] | None = None) -> str:
        """broadcast_in_dim; by default a scalar or an equal-rank operand maps to trailing dimensions."""
        if tuple(operand_aval.shape) == tuple(shape):
            return operand
        if dims is None:
            dims = tuple(range(len(shape) - operand_aval.ndim, len(shape)))
        return self.op("stablehlo.broadcast_in_dim", [operand], operand_aval.update(shape=shape),
                       {"broadcast_dimensions": i64_array(dims)})

    def reduce(self, operand: str, operand_aval: ShapedArray, init: Any, axes: Sequence[int], body_op: str,
               out_aval: ShapedArray) -> str:
        """A single-operand reduction whose body applies one binary op (add, maximum, ...)."""
        scalar = ShapedArray((), operand_aval.dtype)
        init_value = self.constant(init, scalar)
        t = tensor_type(scalar)
        region = ("{\n"
                  f"{self.indent}  ^bb0(%lhs: {t}, %rhs: {t}):\n"
                  f'{self.indent}    %r = "{body_op}"(%lhs, %rhs) : ({t}, {t}) -> {t}\n'
                  f'{self.indent}    "stablehlo.return"(%r) : ({t}) -> ()\n'
                  f"{self.indent}}}")
        return self.op("stablehlo.reduce", [operand, init_value], out_aval,
                       {"dimensions": i64_array(axes)}, region=region)


def module_text(arg_avals: Sequence[ShapedArray], out_avals: Sequence[ShapedArray], body: FunctionEmitter,
                arg_names: Sequence[str], out_names: Sequence[str]) -> str:
    args = ", ".join(f"{n}: {tensor_type(a)}" for n, a in zip(arg_names, arg_avals))
    results = ", ".join(tensor_type(a) for a in out_avals)
    ret_types = ", ".join(tensor_type(a) for a in out_avals)
    ret = f"    func.return {', '.join(out_names)} : {ret_types}" if out_names else "    func.return"
    return ("module @ember attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
            f"  func.func public @main({args}) -> ({results}) {{\n"
            + "\n".join(body.lines) + ("\n" if body.lines else "")
            + ret + "\n  }\n}\n")
