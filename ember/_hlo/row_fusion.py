"""Row regions: the part of ember's CPU lowering policy (ember._hlo.backend_forms) that hands a reduction over the
last axes, with the elementwise work around it, to ember's fused row kernel (ember/_runtime/_rows.c).

Softmax, layer norm, logsumexp, a variance, their gradients: a program reduces over the trailing axes of an array
`x[P..., R...]` and computes elementwise with the results, each value either a whole row (`[P..., R...]`) or a
scalar per row (`[P...]`, or `[P..., 1...]` with kept dims). The CPU plugin's XLA writes such a region as several
loops that each read and write the whole array (and jaxlib's fuses it into one YNNPACK kernel, which this plugin's
XLA does not have): 1.2-1.5x jaxlib's time. ember instead emits one `custom_call @ember_rows` per region, whose
operand 0 is a *row program* the kernel runs over a block of rows at a time, each value a row-sized buffer in the
cache: the array is read once and the results written once.

A *column region* is the same around reductions over the leading axes (`sum(exp(a), axis=0)`): each row is
combined into the reductions' output rows. It is used only when its outputs are those reductions (one that also
writes rows ran slower than XLA's fused loops: MIN_COLUMN_OPS).

A region is found by one walk of a body's equations in order (`plan`): it opens at an equation over a shape that a
reduction over its trailing (or leading) axes in the body reduces, takes each following equation it can run (the ops
below, on values of the region or on inputs that are whole rows, scalars per row, one row shared by all rows, or
scalars), and lets the others pass unless they use one of its values: then it closes, and is emitted before that
equation (every value it reads was defined before it closes; nothing before that reads its results). The equations
it took are not lowered one by one. Its outputs are its values that later equations or the body's results use.
`row_regions` is that plan as a pass over the IR of a body about to be lowered (ember._hlo.lower.lower_into runs
it where regions apply): each region's equations become one `row_region` equation, whose lowering is the call.

What the kernel runs: neg, exp, sqrt, rsqrt, abs, sign, add, sub, mul, div, max, min, integer_pow 1 and 2, square on
rows and scalars; log on scalars; is_finite and select on a predicate the region computed (a boolean is 0.0 or 1.0
inside the kernel and never leaves it: a region whose boolean is used outside is not used);
reduce_sum/reduce_max/reduce_min over the trailing axes (over the leading ones in a column region); broadcasts of
scalars per row, shared rows and scalars to rows; reshapes and squeezes between the forms of a scalar per row;
stop_gradient. An op the region already computes on the same operands is not computed twice (a layer norm writes `x -
mean` twice), and a sum is computed by the op producing its operand as it goes (which then stores nothing when the
sum is its only reader). Results equal XLA's to rounding: the sum adds in another order; exp is within 2 ulp with
XLA's overflow to inf and underflow to 0; a row divided by a scalar per row is multiplied by its reciprocal (within
1 ulp; an exact division costs 8x); square root is exact; max and min propagate NaN. The kernel splits the rows
among threads (one per 2^18 elements, at most the CPUs).

A region is used where backend_forms.applies (the CPU plugin, one device, the cpu_backend_forms option), the
kernel is available (the C extension is built and the CPU has AVX-512F, or AVX2 with FMA: ember/_runtime/_rows.c
has both forms, chosen at run time), its arrays have at least MIN_ELEMENTS elements and its rows min_row() to
MAX_ROW (MIN_ROW, or MIN_ROW_AVX2 for row regions where the AVX2 form runs), and it holds a reduction and at least
MIN_OPS operations on rows, or a max or min reduction (the plugin's YNNPACK reduction, which would take it, drops
NaN: see lower_extremum); elsewhere its equations are lowered as usual."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ember._core import IR, Atom, Eqn, Literal, Primitive, ShapedArray, Var
from ember._core import dtypes as dt
from ember._hlo import backend_forms, targets
from ember._hlo.emitter import Emitter, dense_text, emit_custom_call

TARGET = "ember_rows"
MIN_ELEMENTS = backend_forms.MIN_ELEMENTS  # smaller arrays: XLA's own loops are as fast
MIN_ROW, MAX_ROW = 16, 1 << 16  # shorter rows: per-row overhead; longer: the row values leave the cache
# The AVX2 kernels' shortest row of a row region or row reduction (min_row): their per-row cost (a call per op and
# row, the 8 accumulators folded) made rows of up to 256 slower than XLA's loops on an AMD EPYC (2 cores, AVX2, other
# work running; kernel vs XLA, min of 25 rounds: softmax f32[8192,16] 487 vs 299 us, layer norm f32[4096,32] 474 vs
# 215, row sums f32[2048,64] 65 vs 48, f32[512,256] 50-86 vs 27-31; softmax f32[1024,128] 180-217 vs 232-242 and
# f32[256,256] 107 vs 106-148 about even; rows of 1024 2-3x faster). Column regions keep MIN_ROW.
MIN_ROW_AVX2 = 257
# The least input of a reduce the plugin's YNNPACK reduction takes (f32[32, 1024] taken, f32[32, 1000] not).
YNN_MIN_ELEMENTS = 1 << 15
MIN_OPS = 2  # operations on rows (a reduction with its producer: one pass, and the kernel's accurate sum)


def min_row(columns: bool = False) -> int:
    """The shortest row the kernel takes: MIN_ROW, or MIN_ROW_AVX2 for rows (not columns) where the AVX2 form of
    the kernel runs (targets.variant)."""
    return MIN_ROW_AVX2 if not columns and targets.variant(TARGET) == "avx2" else MIN_ROW


# A column region: a column reduction and its producer at least, and no output but its reductions (one that also
# writes rows, as a hidden layer's bias gradient next to the weight gradient's operand, ran 1.2x slower than XLA's
# fused loops: an MLP step of batch 1024 2.6 -> 3.1 ms).
MIN_COLUMN_OPS = 2

# The kernel's opcodes and reference kinds (the enums of _rows.c; tests/test_row_fusion.py checks they agree).
OPCODES = {"neg": 0, "exp": 1, "log": 2, "sqrt": 3, "rsqrt": 4, "abs": 5, "copy": 6, "sign": 7, "is_finite": 8,
           "add": 9, "sub": 10, "mul": 11, "div": 12, "max": 13, "min": 14, "select": 15, "sum": 16,
           "reduce_max": 17, "reduce_min": 18, "column_sum": 19, "column_max": 20, "column_min": 21}
TMP, IN, OUT, SHARED, REG, ROW_IN, ROW_OUT, LIT, SCALAR_IN, COL_OUT = range(10)
NONE = 15  # no reference: a result not stored, an op summing nothing
WIDTH = 6  # words per instruction: opcode, destination, a, b, c, the scalar its row's sum also goes to

UNARY = {"neg": "neg", "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "abs": "abs", "sign": "sign",
         "is_finite": "is_finite"}
ROW_UNARY = {"neg", "exp", "sqrt", "rsqrt", "abs", "sign", "is_finite"}  # (log: scalars only; no vector log)
BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "max": "max", "min": "min"}
REDUCTIONS = {"reduce_sum": "sum", "reduce_max": "reduce_max", "reduce_min": "reduce_min"}
COLUMNS = {"reduce_sum": "column_sum", "reduce_max": "column_max", "reduce_min": "column_min"}
ALIASES = {"reshape", "squeeze", "broadcast_in_dim", "stop_gradient"}


def applies(emitter: Emitter) -> bool:
    """Whether row regions may be used in this body (the CPU forms apply and the kernel is available)."""
    return backend_forms.applies(emitter) and targets.available(TARGET)


class Value:
    """A value of a region: held as a whole row (row) or as a scalar per row; where the kernel finds it (ref: a
    kind and an index, or the input's atom or the literal's value before the call's operands are numbered; set
    when the region is emitted for a computed value); or, for a reshape, broadcast or stop_gradient of a value of
    the region, the variable whose value it reads (source)."""
    __slots__ = ("row", "ref", "source", "column")

    def __init__(self, row: bool, ref: tuple[int, Any] | None = None, source: Var | None = None,
                 column: bool = False):
        self.row, self.ref, self.source = row, ref, source
        self.column = column  # a reduction over the rows (complete after the last row: read by nothing here)


class Region:
    """A region being planned: the shape of its rows (lead: P, trail: R), its equations in order, and its values."""

    def __init__(self, lead: tuple[int, ...], trail: tuple[int, ...], constants: dict[Var, float],
                 columns: bool = False):
        self.lead, self.trail, self.constants = lead, trail, constants
        self.columns = columns  # its reductions are over the rows (the leading axes), not along them
        self.rows, self.row = math.prod(lead), math.prod(trail)
        self.eqns: list[Any] = []
        self.values: dict[Var, Value] = {}  # the values its equations define
        self.computed: dict[Any, Var] = {}  # (op, params, operands) -> the variable computing it
        self.reductions = 0
        self.extrema = 0  # reduce_max/reduce_min among them
        self.row_ops = 0

    def __repr__(self) -> str:  # (a row_region equation's param, as the IR prints it)
        ops = " ".join(eqn.prim.name for eqn in self.eqns)
        return f"<{'column' if self.columns else 'row'} region over {self.lead}x{self.trail}: {ops}>"

    def kind(self, shape: tuple[int, ...]) -> str | None:
        """'row' for a whole row's shape, 'scalar' for a scalar per row's (with or without kept dims), else None."""
        if shape == self.lead + self.trail:
            return "row"
        if shape == self.lead or shape == self.lead + (1,) * len(self.trail):
            return "scalar"
        return None

    def operand(self, atom: Atom) -> Value | None:
        """atom as an operand: a value of the region, a float32 literal, an input of a row's or a scalar per
        row's shape, or a scalar input; None if the kernel cannot read it."""
        if isinstance(atom, Literal):
            return Value(False, (LIT, float(np.float32(atom.value)))) if atom.aval.dtype == np.float32 else None
        if atom in self.constants:  # (a scalar the program made from a literal: AD's 1.0 seed)
            return Value(False, (LIT, self.constants[atom]))
        value = self.values.get(atom)
        if value is not None:
            return None if value.column else value
        if atom.aval.dtype != np.float32:
            return None
        shape = tuple(atom.aval.shape)
        if shape == ():
            return Value(False, (SCALAR_IN, atom))
        kind = self.kind(shape)
        if kind is None:
            return None
        return Value(kind == "row", (IN if kind == "row" else ROW_IN, atom))

    def admit(self, eqn: Any) -> Value | None:
        """The value eqn defines if the region can run it (not yet recorded), else None."""
        name = eqn.prim.name
        boolean = name == "is_finite"  # (a boolean value is 0.0 or 1.0 in the kernel, and never leaves it)
        if len(eqn.outputs) != 1 or eqn.outputs[0].aval.dtype != (np.dtype(bool) if boolean else np.float32):
            return None
        out_shape = tuple(eqn.outputs[0].aval.shape)
        out_kind = self.kind(out_shape)
        if name in REDUCTIONS and self.columns:
            value = self.operand(eqn.inputs[0])
            if (value is None or not value.row or tuple(sorted(eqn.params["axes"])) != tuple(range(len(self.lead)))
                    or out_shape != self.trail):
                return None
            return Value(True, column=True)
        if name in REDUCTIONS:
            value = self.operand(eqn.inputs[0])
            trailing = tuple(range(len(self.lead), len(self.lead) + len(self.trail)))
            if (value is None or not value.row or tuple(sorted(eqn.params["axes"])) != trailing
                    or out_shape != self.lead):
                return None
            return Value(False)
        if name == "select":
            pred = eqn.inputs[0]
            if not (isinstance(pred, Var) and pred in self.values):
                return None  # (a predicate the region computed: an input's booleans are not float32)
        if (name in UNARY or name in BINARY or name == "select"
                or (name == "integer_pow" and eqn.params["y"] in (1, 2)) or name == "square"):
            operands = [self.operand(a) for a in eqn.inputs]
            if out_kind is None or any(v is None for v in operands):
                return None
            if out_kind == "scalar" and not any(isinstance(a, Var) and a in self.values for a in eqn.inputs):
                return None  # (work on inputs alone that yields no row: left to XLA)
            row = any(v.row for v in operands)
            if row != (out_kind == "row") or (row and name in UNARY and name not in ROW_UNARY):
                return None
            if name in ("mul", "div") and operands[1].ref == (LIT, 1.0) or name == "mul" and operands[0].ref == (
                    LIT, 1.0):  # x * 1 and x / 1 are x, bit for bit (AD multiplies by its 1.0 seed)
                x = eqn.inputs[0] if operands[1].ref == (LIT, 1.0) else eqn.inputs[1]
                kept = self.operand(x)
                if kept.row == row:
                    return Value(row, source=x) if isinstance(x, Var) and x in self.values else Value(row, kept.ref)
            return Value(row)
        if name in ALIASES and out_kind is not None:
            return self._alias(eqn, out_shape)
        return None

    def _alias(self, eqn: Any, out_shape: tuple[int, ...]) -> Value | None:
        """A reshape, broadcast or stop_gradient the kernel needs no instruction for: its result reads what its
        operand holds (a row shared by all rows, for a broadcast of a row's trailing dims)."""
        (x,) = eqn.inputs
        if x.aval.dtype != np.float32:
            return None
        shape = tuple(x.aval.shape)
        if eqn.prim.name == "broadcast_in_dim":
            dims = tuple(eqn.params["broadcast_dimensions"])
            if (isinstance(x, Var) and x not in self.values and len(out_shape) == len(self.lead) + len(self.trail)
                    and dims == tuple(range(len(out_shape) - len(shape), len(out_shape)))
                    and shape[len(shape) - len(self.trail):] == self.trail and math.prod(shape) == self.row):
                return Value(True, (SHARED, x))  # a row shared by all rows (a scale, a bias)
            if dims != tuple(range(len(shape))) or (shape != () and self.kind(shape) != "scalar"):
                return None  # (only a scalar per row, or a scalar, broadcast along the trailing dims)
        elif shape != () and self.kind(shape) is None:
            return None
        value = self.operand(x)
        if value is None or (value.row and self.kind(out_shape) != "row"):
            return None
        if isinstance(x, Var) and x in self.values:
            return Value(value.row, source=x)
        return Value(value.row, value.ref)

    def add(self, eqn: Any, value: Value) -> None:
        """Record eqn (admitted) and the value it defines; an op the region already computes on the same operands
        becomes an alias of that value (common subexpressions: a layer norm's `x - mean` is written twice)."""
        out = eqn.outputs[0]
        self.eqns.append(eqn)
        if value.ref is None and value.source is None and not value.column:
            key = (eqn.prim.name, tuple(sorted((k, repr(v)) for k, v in eqn.params.items())),
                   tuple(("literal", np.float32(a.value).tobytes()) if isinstance(a, Literal) else
                         self.root(a) if a in self.values else a for a in eqn.inputs))
            earlier = self.computed.setdefault(key, out)
            if earlier is not out:
                self.values[out] = Value(value.row, source=earlier)
                return
        if value.ref is None and value.source is None:
            if eqn.prim.name in REDUCTIONS:
                self.reductions += 1
                self.extrema += eqn.prim.name != "reduce_sum"
            if eqn.prim.name in REDUCTIONS or value.row:
                self.row_ops += 1
        self.values[out] = value

    def root(self, var: Var) -> Var:
        """The variable whose buffer var's value is (var itself unless it is an alias)."""
        while self.values[var].source is not None:
            var = self.values[var].source
        return var


class Plan:
    """Which equations of a body the regions take (skip) and where each region is emitted: before equation i
    (at[i]; at[len(eqns)] after the last one)."""

    def __init__(self) -> None:
        self.skip: set[int] = set()
        self.at: dict[int, list[tuple[Region, list[Var]]]] = {}


def plan(ir: IR) -> Plan | None:
    """The regions of ir's equations (None when it has none)."""
    eqns = ir.eqns
    # a shape some reduction over its trailing axes (rows) or its leading axes (columns) reduces -> (the number of
    # its leading dims, whether the reduction is over the columns)
    shapes: dict[tuple[int, ...], tuple[int, bool]] = {}
    for eqn in eqns:
        if eqn.prim.name in REDUCTIONS and eqn.inputs[0].aval.dtype == np.float32:
            shape, axes = tuple(eqn.inputs[0].aval.shape), tuple(sorted(eqn.params["axes"]))
            if not axes or len(axes) == len(shape) or math.prod(shape) < MIN_ELEMENTS:
                continue
            if axes == tuple(range(len(shape) - len(axes), len(shape))):
                lead, columns = len(shape) - len(axes), False
            elif axes == tuple(range(len(axes))):
                lead, columns = len(axes), True
            else:
                continue
            if min_row(columns) <= math.prod(shape[lead:]) <= MAX_ROW:
                shapes.setdefault(shape, (lead, columns))
    if not shapes:
        return None
    users: dict[Var, list[int]] = {}
    for i, eqn in enumerate(eqns):
        for a in eqn.inputs:
            if isinstance(a, Var):
                users.setdefault(a, []).append(i)
    results = {a for a in ir.outs if isinstance(a, Var)}
    constants: dict[Var, float] = {}  # float32 scalars the body makes from a literal (broadcast or reshape)
    for eqn in eqns:
        if (eqn.prim.name in ("broadcast_in_dim", "reshape") and isinstance(eqn.inputs[0], Literal)
                and eqn.outputs[0].aval.shape == () and eqn.outputs[0].aval.dtype == np.float32):
            constants[eqn.outputs[0]] = float(np.float32(eqn.inputs[0].value))
    found = Plan()
    region: Region | None = None
    members: list[int] = []

    def close(at: int) -> None:
        least = MIN_COLUMN_OPS if region is not None and region.columns else MIN_OPS
        if region is None or not region.reductions or (region.row_ops < least and not region.extrema):
            return
        taken = set(members)
        outputs = [v for v in region.values if v in results or any(u not in taken for u in users.get(v, ()))]
        if any(v.aval.dtype != np.float32 for v in outputs):
            return  # (a boolean used outside: the kernel's values are float32)
        if region.columns and not all(region.values[v].column for v in outputs):
            return  # (see MIN_COLUMN_OPS)
        found.skip.update(taken)
        found.at.setdefault(at, []).append((region, outputs))

    for i, eqn in enumerate(eqns):
        if region is not None:
            value = region.admit(eqn)
            if value is not None:
                region.add(eqn, value)
                members.append(i)
                continue
            if not any(isinstance(a, Var) and a in region.values for a in eqn.inputs):
                continue  # (an equation the region lets pass)
            close(i)
            region, members = None, []
        opened = _open(eqn, shapes, constants)
        if opened is not None:
            value = opened.admit(eqn)
            if value is not None:
                region, members = opened, [i]
                region.add(eqn, value)
    close(len(eqns))
    return found if found.at else None


# row_region(inputs...; region, outputs): the equations a region took, as one equation of the body being lowered
# (row_regions): its lowering is the kernel's custom call. Internal to lowering (unregistered: no transformation
# ever sees it, as row_regions runs on a body as it is lowered).
row_region_p = Primitive("row_region", multiple_results=True, register=False, checks=())


@row_region_p.def_rule("lowering")
def _row_region_lowering(ctx: Any, *operands: str, region: Region, inputs: tuple[Var, ...], outputs: tuple[Var, ...]
                         ) -> list[str]:
    names = dict(zip(inputs, operands))
    return emit(ctx.emitter, region, outputs, lambda atom: names[atom])


def row_regions(ir: IR) -> IR:
    """ir with each row region (plan) replaced by one row_region equation where the region is emitted: a pass over
    a body before it is lowered (ember._hlo.lower.lower_into runs it where row regions apply). The region's inputs
    are the variables its equations read from outside it (literals and constants the body made from literals are
    the program's own)."""
    found = plan(ir)
    if found is None:
        return ir
    eqns: list[Eqn] = []

    def regions_at(i: int) -> None:
        for region, outputs in found.at.get(i, ()):
            inputs: dict[Var, None] = {}
            for eqn in region.eqns:
                for a in eqn.inputs:
                    if isinstance(a, Var) and a not in region.values and a not in region.constants:
                        inputs[a] = None
            params = {"region": region, "inputs": tuple(inputs), "outputs": tuple(outputs)}
            eqns.append(Eqn(row_region_p, list(inputs), list(outputs), params, None))
    for i, eqn in enumerate(ir.eqns):
        regions_at(i)
        if i not in found.skip:
            eqns.append(eqn)
    regions_at(len(ir.eqns))
    return IR(ir.const_vars, ir.consts, ir.in_vars, eqns, ir.outs, ir.out_tree)


# ---------------------------------------------------------------------------------------------------------------
# Transposes that materialize: the kernel's tiled transpose (custom_call @ember_rows_transpose, in _rows.c). The
# plugin's XLA copies f32[1024, 1024].T element by element in 3.5 ms, jaxlib in 0.5 ms; the kernel 0.4 ms. A
# transpose a matrix product or convolution reads, or of one's result, stays XLA's (XLA folds it into their
# dimension numbers or their result's layout for free: an MLP step of batch 1024 ran 1.3x slower with the kernel
# transposing its weight gradients), as do small ones and those of other element sizes.
TRANSPOSE_TARGET = "ember_rows_transpose"
MIN_TRANSPOSE = 1 << 18  # elements (smaller: XLA fuses the transpose into its readers as fast, and a call in a loop
# body costs more: the gradient of a 1000-step loop over a 256 x 256 matrix ran 2x slower)
MIN_TRANSPOSE_SIDE = 16  # the swapped groups' sizes (thinner: XLA's copy is nearly contiguous)
# Where the AVX2 form runs (8 x 8 blocks), both swapped sizes multiples of 8: the plugin's XLA copies other shapes as
# fast or faster there (AMD EPYC, kernel vs XLA: f32[4, 256, 300] (0, 2, 1) 239 vs 121 us, f32[16, 257, 300] 1290 vs
# 1022, f32[1000, 1030].T 998 vs 1014; f32[4, 264, 304] 132 vs 147, f32[1024, 1024].T 1048 vs 6203, f32[512, 512].T
# 200 vs 592, f32[2048, 256].T 427 vs 1384).
AVX2_TRANSPOSE_MULTIPLE = 8
FOLDS_TRANSPOSES = frozenset({"dot_general", "conv_general_dilated"})


def transpose_split(shape: Sequence[int], permutation: Sequence[int]) -> tuple[int, int, int] | None:
    """(batch, m, n) where transposing an array of this shape by permutation is [batch, m, n] -> [batch, n, m] (the
    dims grouped where they stay adjacent and in order); None for any other permutation."""
    groups: list[list[int]] = []  # runs of the permutation of consecutive input dims, in output order
    for d in permutation:
        if groups and groups[-1][-1] + 1 == d:
            groups[-1].append(d)
        else:
            groups.append([d])
    firsts = [g[0] for g in groups]
    size = [math.prod(shape[d] for d in g) for g in groups]
    if len(groups) == 2 and firsts[0] > firsts[1]:
        return 1, size[1], size[0]
    if len(groups) == 3 and firsts[0] == 0 and firsts[1] > firsts[2]:
        return size[0], size[2], size[1]
    return None


# The transposes the kernel runs (kernel_transposes): its lowering is the kernel's custom call. Internal to
# lowering, as row_region.
transpose_kernel_p = Primitive("transpose_kernel", register=False, checks=())


@transpose_kernel_p.def_rule("lowering")
def _transpose_kernel_lowering(ctx: Any, x: str, *, split: tuple[int, int, int]) -> list[str]:
    batch, m, n = split
    aval, out = ctx.avals_in[0], ctx.avals_out[0]
    matrix = backend_forms.reshape(ctx.emitter, x, aval, (batch, m, n))
    y = emit_custom_call(ctx.emitter, TRANSPOSE_TARGET, [matrix], [ShapedArray((batch, n, m), aval.dtype)],
                         {"batch": batch, "m": m, "n": n}, has_side_effect=False)[0]
    return [backend_forms.reshape(ctx.emitter, y, ShapedArray((batch, n, m), aval.dtype), out.shape)]


def kernel_transposes(ir: IR) -> IR:
    """ir with each transpose the kernel runs better than XLA replaced by a transpose_kernel equation: 4-byte
    elements, at least MIN_TRANSPOSE of them, a [batch, m, n] -> [batch, n, m] permutation with m and n at least
    MIN_TRANSPOSE_SIDE (multiples of AVX2_TRANSPOSE_MULTIPLE where the AVX2 form runs), neither read by a matrix
    product or convolution of the body nor transposing one's result (a pass over a body before it is lowered, beside
    row_regions; where the kernel is available)."""
    if not targets.available(TRANSPOSE_TARGET):
        return ir
    folded = {a for eqn in ir.eqns if eqn.prim.name in FOLDS_TRANSPOSES for a in eqn.inputs if isinstance(a, Var)}
    products = {v for eqn in ir.eqns if eqn.prim.name in FOLDS_TRANSPOSES for v in eqn.outputs}
    eqns, changed = [], False
    for eqn in ir.eqns:
        if eqn.prim.name == "transpose" and eqn.outputs[0] not in folded and eqn.inputs[0] not in products:
            aval = eqn.inputs[0].aval
            split = transpose_split(aval.shape, eqn.params["permutation"])
            if (split is not None and aval.dtype.itemsize == 4 and math.prod(aval.shape) >= MIN_TRANSPOSE
                    and min(split[1:]) >= MIN_TRANSPOSE_SIDE
                    and (targets.variant(TRANSPOSE_TARGET) != "avx2"
                         or not (split[1] % AVX2_TRANSPOSE_MULTIPLE or split[2] % AVX2_TRANSPOSE_MULTIPLE))):
                eqns.append(Eqn(transpose_kernel_p, list(eqn.inputs), list(eqn.outputs), {"split": split},
                                eqn.source))
                changed = True
                continue
        eqns.append(eqn)
    return IR(ir.const_vars, ir.consts, ir.in_vars, eqns, ir.outs, ir.out_tree) if changed else ir


def _open(eqn: Any, shapes: dict[tuple[int, ...], tuple[int, bool]], constants: dict[Var, float]
          ) -> Region | None:
    """The region eqn may open: over the shape of its operand (a reduction) or result (an elementwise op) when a
    reduction of the body over that shape's trailing axes (a row region) or leading axes (a column region) reduces
    it."""
    name = eqn.prim.name
    if name in REDUCTIONS:
        shape = tuple(eqn.inputs[0].aval.shape)
    elif name in UNARY or name in BINARY or name in ("integer_pow", "square"):
        shape = tuple(eqn.outputs[0].aval.shape)
    else:
        return None
    split = shapes.get(shape)
    if split is None:
        return None
    lead, columns = split
    return Region(shape[:lead], shape[lead:], constants, columns)


def emit(emitter: Emitter, region: Region, outputs: Sequence[Var], read: Callable[[Atom], str]) -> list[str]:
    """Emit the region's custom call; returns the values of its outputs (in outputs' order)."""
    inputs: list[Atom] = []  # the call's operands after the program
    input_index: dict[tuple[int, Any], int] = {}
    literals: list[float] = []
    out_index = {v: k for k, v in enumerate(outputs)}

    def ref_of(atom: Atom | Value) -> int:
        if isinstance(atom, Value):  # (an alias's own value: an input's reference or another variable's)
            value = atom if atom.source is None else region.values[region.root(atom.source)]
        elif isinstance(atom, Var) and atom in region.values:
            value = region.values[region.root(atom)]
        else:
            value = region.operand(atom)
        kind, what = value.ref
        if kind == LIT:
            if what not in literals:
                literals.append(what)
            return (LIT << 28) | literals.index(what)
        if kind in (IN, ROW_IN, SHARED, SCALAR_IN):
            key = (kind, what)
            if key not in input_index:
                input_index[key] = len(inputs)
                inputs.append(what)
            return (kind << 28) | input_index[key]
        return (kind << 28) | what

    # the last instruction reading each computed value, through aliases too (its row is reused once it is dead)
    roots = {v: region.root(v) for v in region.values}  # (before outputs that are aliases become roots below)
    readers: dict[Var, set[int]] = {}
    for k, eqn in enumerate(region.eqns):
        for a in eqn.inputs:
            if isinstance(a, Var) and a in roots:
                readers.setdefault(roots[a], set()).add(k)
    last_use = {root: max(ks) for root, ks in readers.items()}
    summed = _fused_sums(region, roots, readers, out_index)
    sums_done: set[Var] = set()
    free_rows: list[int] = []
    n_rows = n_regs = 0
    code: list[int] = []

    def scalar_dst(var: Var) -> tuple[int, int]:
        nonlocal n_regs
        if var in out_index:
            return ROW_OUT, out_index[var]
        n_regs += 1
        return REG, n_regs - 1

    for k, eqn in enumerate(region.eqns):
        out = eqn.outputs[0]
        value = region.values[out]
        if out in sums_done:
            continue  # (summed by the op producing its operand)
        aliased = value.source is not None or value.ref is not None
        if aliased and out not in out_index:
            continue  # (reads what its operand holds)
        for root in {roots[a] for a in eqn.inputs if isinstance(a, Var) and a in roots}:
            ref = region.values[root].ref
            if last_use[root] == k and ref[0] == TMP:  # (dead after this instruction: the result may reuse it)
                free_rows.append(ref[1])
        if value.column:  # a column reduction: into its output (a dead one is not computed)
            if out in out_index:
                code += [OPCODES[COLUMNS[eqn.prim.name]], (COL_OUT << 28) | out_index[out], ref_of(eqn.inputs[0]), 0,
                         0, NONE << 28]
            continue
        sum_var, stored = summed.get(out, (None, True))
        if out in out_index:
            dst = (OUT if region.kind(tuple(out.aval.shape)) == "row" else ROW_OUT, out_index[out])
        elif not stored:
            dst = (NONE, 0)
        elif value.row:
            dst, n_rows = ((TMP, free_rows.pop()), n_rows) if free_rows else ((TMP, n_rows), n_rows + 1)
        else:
            dst = scalar_dst(out)
        sum_dst = (NONE, 0)
        if sum_var is not None:
            sum_dst = region.values[sum_var].ref = scalar_dst(sum_var)
            sums_done.add(sum_var)
        name = eqn.prim.name
        if aliased:  # an alias that is an output: its operand copied into it
            op, args = "copy", [value]
        elif name in REDUCTIONS:
            op, args = REDUCTIONS[name], list(eqn.inputs)
        elif name == "integer_pow":
            op, args = ("copy", list(eqn.inputs)) if eqn.params["y"] == 1 else ("mul", list(eqn.inputs) * 2)
        elif name == "square":
            op, args = "mul", list(eqn.inputs) * 2
        elif name == "select":
            op, args = "select", list(eqn.inputs)
        else:
            op, args = UNARY.get(name) or BINARY[name], list(eqn.inputs)
        refs = [ref_of(a) for a in args] + [0] * (3 - len(args))
        if aliased:
            value.source, value.ref = None, dst  # (later readers read the output)
        else:
            value.ref = dst
        code += [OPCODES[op], (dst[0] << 28) | dst[1], *refs, (sum_dst[0] << 28) | sum_dst[1]]
    header = [len(code) // WIDTH, n_rows, n_regs, len(literals)]
    bits = np.asarray(literals, np.float32).view(np.uint32).tolist()
    return _call(emitter, header + bits + code, [read(a) for a in inputs], [v.aval for v in outputs], region.rows,
                 region.row)


def _call(emitter: Emitter, program: list[int], inputs: list[str], outputs: list[ShapedArray], rows: int, row: int
          ) -> list[str]:
    """The kernel's custom call running program (its words) on the input values; the output values."""
    words = np.asarray(program, np.uint32).view(np.int32)  # (a reference's kind is its top 4 bits)
    aval = ShapedArray(words.shape, np.dtype(np.int32))
    value = emitter.op("stablehlo.constant", [], aval, {"value": dense_text(words, aval)})
    return emit_custom_call(emitter, TARGET, [value] + inputs, outputs, {"rows": rows, "row": row},
                            has_side_effect=False)


def lower_extremum(emitter: Emitter, x: str, aval: ShapedArray, axes: Sequence[int], hlo_op: str, init: Any
                   ) -> str | None:
    """reduce_max/reduce_min (hlo_op "maximum"/"minimum") of floats on the CPU plugin, from YNN_MIN_ELEMENTS
    elements: written so that the plugin's YNNPACK reduction (on by ember's XLA flags, see
    ember/_runtime/backends.py) does not take it, as it drops NaN (measured: max of a row holding NaN gave the
    row's largest number; JAX and numpy give NaN). Not an optimisation: it applies with the cpu_backend_forms
    option off too: with XLA's own loops (a NaN-keeping body) or the row kernel (trailing axes, whole arrays, where
    it may run: as fast as YNNPACK was); in programs over several devices, the plain reduce and a NaN flag
    (_flagged_extremum). None: the plain reduce."""
    if emitter.platform != "cpu" or not dt.is_float(aval.dtype) or math.prod(aval.shape) < YNN_MIN_ELEMENTS:
        return None
    if emitter.device_assignment is not None or emitter.axis_context is not None:
        return _flagged_extremum(emitter, x, aval, axes, hlo_op, init)
    axes = sorted(axes)
    if len(axes) == aval.ndim and aval.ndim:  # a whole array: as rows (sum_form's rule), then over the rows
        form = backend_forms.sum_form(aval.shape, axes, np.dtype(np.float32))
        if form is not None and form[0] == "rows":
            kept, row = form[1]
            matrix = ShapedArray((kept, row), aval.dtype)
            rows = ShapedArray((kept,), aval.dtype)
            per_row = _row_extremum(emitter, x, aval, matrix.shape, hlo_op)
            if per_row is None:
                per_row = emitter.reduce(backend_forms.reshape(emitter, x, aval, matrix.shape), matrix, (1,), hlo_op,
                                         init, keep_nan=True)
                per_row = emitter.op("stablehlo.optimization_barrier", [per_row], rows)  # (XLA would merge them)
            return emitter.reduce(per_row, rows, (0,), hlo_op, init, keep_nan=True)
    if axes == list(range(len(axes))) and len(axes) < aval.ndim:  # leading axes: two stages, as the sums
        kept = math.prod(aval.shape[len(axes):])
        per_column = _row_extremum(emitter, x, aval, (math.prod(aval.shape) // kept, kept), hlo_op, columns=True)
        if per_column is not None:
            return backend_forms.reshape(emitter, per_column, ShapedArray((kept,), aval.dtype), aval.shape[len(axes):])
        stages = backend_forms.stages(math.prod(aval.shape) // kept, kept)
        if stages is not None:
            return backend_forms.two_stages(emitter, x, aval, stages[1], aval.shape[len(axes):], hlo_op, init,
                                            keep_nan=True)
    if axes == list(range(aval.ndim - len(axes), aval.ndim)):  # trailing axes: the kernel's rows
        row = math.prod(aval.shape[aval.ndim - len(axes):])
        rows = math.prod(aval.shape) // row
        per_row = _row_extremum(emitter, x, aval, (rows, row), hlo_op)
        if per_row is not None:
            return backend_forms.reshape(emitter, per_row, ShapedArray((rows,), aval.dtype),
                                         aval.shape[:aval.ndim - len(axes)])
    return emitter.reduce(x, aval, axes, hlo_op, init, keep_nan=True)


def _flagged_extremum(emitter: Emitter, x: str, aval: ShapedArray, axes: Sequence[int], hlo_op: str, init: Any
                      ) -> str:
    """The plain reduction, NaN where the reduced elements hold one (`any(x != x)`): for programs over several
    devices, whose partitioner combines the devices' results only for the plain bodies."""
    out = ShapedArray(tuple(d for i, d in enumerate(aval.shape) if i not in axes), aval.dtype)
    nan = emitter.reduce(emitter.compare(x, x, aval, "NE"), aval.update(dtype=np.dtype(bool)), axes, "or", False)
    nans = emitter.broadcast(emitter.constant(float("nan"), ShapedArray((), aval.dtype)), ShapedArray((), aval.dtype),
                             out.shape)
    return emitter.op("stablehlo.select", [nan, nans, emitter.reduce(x, aval, axes, hlo_op, init)], out)


def lower_sum(emitter: Emitter, x: str, aval: ShapedArray, axes: Sequence[int]) -> str | None:
    """reduce_sum over trailing axes in backend_forms' "rows" form, by the row kernel where it may run: each row
    summed in 16 lanes (a row of n: sums of n/16 terms, as accurate as XLA's reduce); the plugin's matrix-vector
    product with ones, that form otherwise, adds a row's terms one after another (rows of 1024 to 4096: 2-3x less
    accurate than XLA's reduce). None: backend_forms.lower_sum's form (a whole array: a product with ones, its row
    sums added in float64, as accurate and faster)."""
    dtype, split = aval.dtype, backend_forms.row_split(aval.shape, axes)
    if not applies(emitter) or dtype != np.float32:
        return None
    if split is None:
        return _column_sum(emitter, x, aval, axes)
    rows, row = split
    kept_shape = aval.shape[:aval.ndim - len(axes)]
    if row > MAX_ROW:  # rows longer than the kernel's: in pieces, then the pieces' sums
        pieces = -(-row // MAX_ROW)
        piece = -(-row // pieces)
        matrix = backend_forms.zero_padded(emitter, backend_forms.reshape(emitter, x, aval, (rows, row)),
                                           ShapedArray((rows, row), dtype), 1, pieces * piece)
        padded = ShapedArray((rows, pieces * piece), dtype)
        sums = _row_reduction(emitter, matrix, padded, (rows * pieces, piece), "reduce_sum")
        if sums is None:
            return None
        per_row = ShapedArray((rows, pieces), dtype)
        total = emitter.reduce(backend_forms.reshape(emitter, sums, ShapedArray((rows * pieces,), dtype),
                                                     per_row.shape), per_row, (1,), "add", 0)
        return backend_forms.reshape(emitter, total, ShapedArray((rows,), dtype), kept_shape)
    if backend_forms.sum_form(aval.shape, axes, dtype) is None:  # (small arrays: XLA's reduce is as fast)
        return None
    sums = _row_reduction(emitter, x, aval, (rows, row), "reduce_sum")
    if sums is None:
        return None
    return backend_forms.reshape(emitter, sums, ShapedArray((rows,), dtype), kept_shape)


def _column_sum(emitter: Emitter, x: str, aval: ShapedArray, axes: Sequence[int]) -> str | None:
    """reduce_sum over leading axes (f32[m, kept] seen so) by the row kernel's column sum: each thread adds its rows
    in a 4-level cascade (as accurate as JAX's reduce: tests/test_reduction_accuracy.py) in one pass, where the stages'
    reduce over a middle axis of 16 took 4 ms for f32[1024, 1024] (JAX: 0.6 ms). None: not leading axes, or rows the
    kernel does not take (backend_forms' stages)."""
    axes = sorted(axes)
    if not axes or len(axes) == aval.ndim or axes != list(range(len(axes))):
        return None
    if backend_forms.sum_form(aval.shape, axes, aval.dtype) is None:  # (small arrays: XLA's reduce is as fast)
        return None
    kept = math.prod(aval.shape[len(axes):])
    sums = _row_reduction(emitter, x, aval, (math.prod(aval.shape) // kept, kept), "reduce_sum", columns=True)
    if sums is None:
        return None
    return backend_forms.reshape(emitter, sums, ShapedArray((kept,), aval.dtype), aval.shape[len(axes):])


def product_sums(emitter: Emitter, lhs: str, rhs: str, aval: ShapedArray, axes: Sequence[int]) -> str | None:
    """sum(lhs * rhs) over axes (the trailing ones of their common type aval: a dot_general with no free dimension,
    `einsum("ij,ij->i")`) by the row kernel, each product summed in its 16 lanes as it is made (one pass, nothing
    stored); None where the kernel may not run it."""
    split = backend_forms.row_split(aval.shape, axes)
    if aval.dtype != np.float32 or split is None or math.prod(aval.shape) < MIN_ELEMENTS or not applies(emitter):
        return None
    rows, row = split
    if not min_row() <= row <= MAX_ROW:
        return None
    matrix = ShapedArray((rows, row), aval.dtype)
    code = [OPCODES["mul"], NONE << 28, IN << 28, (IN << 28) | 1, 0, ROW_OUT << 28]
    sums = _call(emitter, [1, 0, 0, 0] + code, [backend_forms.reshape(emitter, v, aval, matrix.shape)
                                                for v in (lhs, rhs)], [ShapedArray((rows,), aval.dtype)], rows, row)[0]
    return backend_forms.reshape(emitter, sums, ShapedArray((rows,), aval.dtype), aval.shape[:aval.ndim - len(axes)])


def _row_extremum(emitter: Emitter, x: str, aval: ShapedArray, matrix: tuple[int, int], hlo_op: str,
                  columns: bool = False) -> str | None:
    return _row_reduction(emitter, x, aval, matrix, "reduce_max" if hlo_op == "maximum" else "reduce_min", columns)


def _row_reduction(emitter: Emitter, x: str, aval: ShapedArray, matrix: tuple[int, int], name: str,
                   columns: bool = False) -> str | None:
    """The sum, max or min (name: the reduction primitive's) of each row (or, with columns, each column) of x (of
    type aval) seen as a matrix of that shape, by the row kernel (a program of one reduction), where it may run
    (float32, rows of MIN_ROW to MAX_ROW, the conditions of applies); None elsewhere."""
    rows, row = matrix
    if aval.dtype != np.float32 or not min_row(columns) <= row <= MAX_ROW or not applies(emitter):
        return None
    x = backend_forms.reshape(emitter, x, aval, matrix)
    op, dst = (OPCODES[COLUMNS[name]], COL_OUT) if columns else (OPCODES[REDUCTIONS[name]], ROW_OUT)
    code = [op, (dst << 28), (IN << 28), 0, 0, NONE << 28]
    out = ShapedArray((row if columns else rows,), aval.dtype)
    return _call(emitter, [1, 0, 0, 0] + code, [x], [out], rows, row)[0]


def _fused_sums(region: Region, roots: dict[Var, Var], readers: dict[Var, set[int]], out_index: dict[Var, int]
                ) -> dict[Var, tuple[Var, bool]]:
    """The sums the op producing their operand computes as it goes (one pass over the row fewer): {the op's
    variable: (the sum's variable, whether the op's row is stored too: not when the sum is its only reader)}."""
    producers = {eqn.outputs[0]: k for k, eqn in enumerate(region.eqns)}
    fused: dict[Var, tuple[Var, bool]] = {}
    for k, eqn in enumerate(region.eqns):
        value = region.values[eqn.outputs[0]]
        if REDUCTIONS.get(eqn.prim.name) != "sum" or value.source is not None or value.column:
            continue
        x = eqn.inputs[0]
        root = roots.get(x) if isinstance(x, Var) else None
        if root is None or root in fused or region.values[root].ref is not None:
            continue  # (an input, or a value already summed)
        producer = region.eqns[producers[root]]
        if producer.prim.name in REDUCTIONS or producer.prim.name in ALIASES or producer.prim.name == "select" \
                or not region.values[root].row:
            continue
        fused[root] = (eqn.outputs[0], root in out_index or readers[root] != {k})
    return fused
