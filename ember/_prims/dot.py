"""dot_general: contraction with batch dimensions (bilinear: its JVP is one product per tangent); and the
precision of dots and convolutions: levels (lax.Precision's) and algorithms (lax.DotAlgorithm,
lax.DotAlgorithmPreset)."""
from __future__ import annotations

import enum
from typing import Any, NamedTuple, Sequence

import ml_dtypes
import numpy as np

from ember._core import Primitive, ShapedArray, aval_of
from ember._core import dtypes as dt
from ember._core import NAN_CHECK
from ember._core.checks import static_ints
from ember._core.config import config
from ember._core.sharding import explicit_sharding
from ember._hlo import LoweringContext, backend_forms, dot_dimension_numbers, row_fusion
from ember._prims.checks import TWO_BIT_FAILS, check_dtype, check_same_dtypes, refuse_narrow
from ember._prims.elementwise import add
from ember._prims.shape import BatchDim, argsort, convert_element_type, convert_element_type_p, transpose
from ember._prims import explicit

# ---------------------------------------------------------------------------------------------------------------
# Precision (of dot_general and conv_general_dilated): None; the level of each operand, "DEFAULT", "HIGH" or
# "HIGHEST" (lax.Precision's names), written into the StableHLO as its precision_config; or an algorithm (below).
# Accelerators use levels to choose lower-precision passes; the CPU computes in the operands' dtype at every level,
# as XLA's CPU backend does for JAX. Names of levels, as JAX's:
PRECISION_LEVELS = {"default": "DEFAULT", "fastest": "DEFAULT", "bfloat16": "DEFAULT", "high": "HIGH",
                    "bfloat16_3x": "HIGH", "tensorfloat32": "HIGH", "highest": "HIGHEST", "float32": "HIGHEST"}


class DotAlgorithm(NamedTuple):
    """How a dot product is computed (like jax.lax.DotAlgorithm), given as a dot's or einsum's precision=: the
    operands are rounded to lhs_precision_type and rhs_precision_type and the products summed in
    accumulation_type; the component counts and num_primitive_operations describe algorithms that split an operand
    into several narrower parts to emulate a wider type (1 where there is no split); allow_imprecise_accumulation
    lets some steps accumulate in less precision. It becomes StableHLO's dot_general `algorithm`. Support is the
    platform's: JAX's CPU backend runs none of them (the dot raises ValueError when it is compiled for the CPU);
    the presets of DotAlgorithmPreset are the usual way to name one."""
    lhs_precision_type: Any
    rhs_precision_type: Any
    accumulation_type: Any
    lhs_component_count: int = 1
    rhs_component_count: int = 1
    num_primitive_operations: int = 1
    allow_imprecise_accumulation: bool = False


_F8_TYPES = tuple(np.dtype(t) for t in (ml_dtypes.float8_e4m3b11fnuz, ml_dtypes.float8_e4m3fn,
                                         ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz,
                                         ml_dtypes.float8_e3m4, ml_dtypes.float8_e4m3, ml_dtypes.float8_e8m0fnu))
# the outputs an ANY_F8_..._F32 preset may give, as JAX's
_F8_F32_OUTPUTS = (dt.float32, dt.float16, dt.bfloat16) + tuple(
    np.dtype(t) for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz,
                          ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e4m3b11fnuz))


class _Spec(NamedTuple):
    """A preset's facts: the operand dtypes it computes in (None: any, as given), its accumulation dtype (None:
    the dot's result dtype), and its StableHLO algorithm (operand, operand, accumulation types and the number
    of primitive operations; None for DEFAULT, which writes none; "f8" for the presets on float8 operands)."""
    inputs: tuple[np.dtype, ...] | None
    accumulation: np.dtype | None
    algorithm: tuple[str, str, str, int] | str | None


_F16, _BF16, _F32, _F64 = dt.float16, dt.bfloat16, dt.float32, dt.float64


class DotAlgorithmPreset(enum.Enum):
    """The named dot algorithms (like jax.lax.DotAlgorithmPreset), given as precision= (the member or its name,
    "BF16_BF16_F32"). Names read LHS_RHS_ACCUMULATION; _X3/_X6/_X9 emulate a wider type with 3, 6 or 9 products of
    narrower parts, FAST_ACCUM allows imprecise accumulation, ANY_F8 takes any float8 operands, and an ANY
    accumulation is the dot's result dtype. The operands are converted to the preset's type (kept where they
    already have one it takes), the products accumulated in its type, and the sum converted to the dot's result
    dtype, which the preset does not change. On the CPU, as JAX 0.10.2's CPU backend: DEFAULT, F16_F16_F16,
    BF16_BF16_F32, BF16_BF16_F32_X3, BF16_BF16_F32_X6, F32_F32_F32 and F64_F64_F64 run; the others raise
    ValueError when compiled."""
    DEFAULT = enum.auto()
    ANY_F8_ANY_F8_F32 = enum.auto()
    ANY_F8_ANY_F8_F32_FAST_ACCUM = enum.auto()
    ANY_F8_ANY_F8_ANY = enum.auto()
    ANY_F8_ANY_F8_ANY_FAST_ACCUM = enum.auto()
    F16_F16_F16 = enum.auto()
    F16_F16_F32 = enum.auto()
    BF16_BF16_BF16 = enum.auto()
    BF16_BF16_F32 = enum.auto()
    BF16_BF16_F32_X3 = enum.auto()
    BF16_BF16_F32_X6 = enum.auto()
    BF16_BF16_F32_X9 = enum.auto()
    TF32_TF32_F32 = enum.auto()
    TF32_TF32_F32_X3 = enum.auto()
    F32_F32_F32 = enum.auto()
    F64_F64_F64 = enum.auto()

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __str__(self) -> str:
        return self.name

    @property
    def _spec(self) -> _Spec:
        return _PRESETS[self]

    @property
    def supported_lhs_types(self) -> tuple[np.dtype, ...] | None:
        """The lhs dtypes the preset computes in (None: any); an operand of another dtype is converted to the
        first."""
        return self._spec.inputs

    @property
    def supported_rhs_types(self) -> tuple[np.dtype, ...] | None:
        """The rhs dtypes the preset computes in (as supported_lhs_types)."""
        return self._spec.inputs

    @property
    def accumulation_type(self) -> np.dtype | None:
        """The dtype the products are summed in (None: the dot's result dtype)."""
        return self._spec.accumulation

    def supported_output_types(self, lhs_dtype: Any, rhs_dtype: Any) -> tuple[np.dtype, ...] | None:
        """The dtypes the accumulation may have with operands of these (converted) dtypes: the first is used when
        the dot's result dtype is not among them (None: any)."""
        if self in (DotAlgorithmPreset.ANY_F8_ANY_F8_F32, DotAlgorithmPreset.ANY_F8_ANY_F8_F32_FAST_ACCUM):
            return _F8_F32_OUTPUTS
        narrow = {DotAlgorithmPreset.F16_F16_F32: _F16, DotAlgorithmPreset.BF16_BF16_F32: _BF16}.get(self)
        if narrow is not None:  # the narrow type's own output only from operands of it
            lhs, rhs = np.dtype(lhs_dtype), np.dtype(rhs_dtype)
            try:
                both = dt.result_type(lhs, rhs)
            except TypeError:  # (a dtype ember does not hold: its own only)
                both = lhs if lhs == rhs else None
            return (_F32, narrow) if both == narrow else (_F32,)
        acc = self._spec.accumulation
        return None if acc is None else (acc,)


_PRESETS = {
    DotAlgorithmPreset.DEFAULT: _Spec(None, None, None),
    DotAlgorithmPreset.ANY_F8_ANY_F8_F32: _Spec(None, _F32, "f8"),
    DotAlgorithmPreset.ANY_F8_ANY_F8_F32_FAST_ACCUM: _Spec(None, _F32, "f8"),
    DotAlgorithmPreset.ANY_F8_ANY_F8_ANY: _Spec(None, None, "f8"),
    DotAlgorithmPreset.ANY_F8_ANY_F8_ANY_FAST_ACCUM: _Spec(None, None, "f8"),
    DotAlgorithmPreset.F16_F16_F16: _Spec((_F16,), _F16, ("f16", "f16", "f16", 1)),
    DotAlgorithmPreset.F16_F16_F32: _Spec((_F16,), _F32, ("f16", "f16", "f32", 1)),
    DotAlgorithmPreset.BF16_BF16_BF16: _Spec((_BF16, _F32), _BF16, ("bf16", "bf16", "bf16", 1)),
    DotAlgorithmPreset.BF16_BF16_F32: _Spec((_BF16, _F32), _F32, ("bf16", "bf16", "f32", 1)),
    DotAlgorithmPreset.BF16_BF16_F32_X3: _Spec((_F32,), _F32, ("bf16", "bf16", "f32", 3)),
    DotAlgorithmPreset.BF16_BF16_F32_X6: _Spec((_F32,), _F32, ("bf16", "bf16", "f32", 6)),
    DotAlgorithmPreset.BF16_BF16_F32_X9: _Spec((_F32,), _F32, ("bf16", "bf16", "f32", 9)),
    DotAlgorithmPreset.TF32_TF32_F32: _Spec((_F32,), _F32, ("tf32", "tf32", "f32", 1)),
    DotAlgorithmPreset.TF32_TF32_F32_X3: _Spec((_F32,), _F32, ("tf32", "tf32", "f32", 3)),
    DotAlgorithmPreset.F32_F32_F32: _Spec((_F32,), _F32, ("f32", "f32", "f32", 1)),
    DotAlgorithmPreset.F64_F64_F64: _Spec((_F64,), _F64, ("f64", "f64", "f64", 1)),
}
# What JAX 0.10.2's CPU backend runs: it ignores the algorithm of these (the dot computes in the converted
# operands' dtypes) and raises for every other algorithm, DotAlgorithm included.
CPU_PRESETS = frozenset({DotAlgorithmPreset.DEFAULT, DotAlgorithmPreset.F16_F16_F16, DotAlgorithmPreset.BF16_BF16_F32,
                         DotAlgorithmPreset.BF16_BF16_F32_X3, DotAlgorithmPreset.BF16_BF16_F32_X6,
                         DotAlgorithmPreset.F32_F32_F32, DotAlgorithmPreset.F64_F64_F64})
Algorithm = DotAlgorithm | DotAlgorithmPreset
Precision = tuple[str, str] | Algorithm | None


def is_algorithm(precision: Precision) -> bool:
    """Whether a precision param names an algorithm (a DotAlgorithm or a preset) rather than levels."""
    return isinstance(precision, DotAlgorithm | DotAlgorithmPreset)


def _precision_level(op: str, value: Any) -> str:
    name = value.name if isinstance(value, enum.Enum) else value
    if isinstance(name, str) and name.lower() in PRECISION_LEVELS:
        return PRECISION_LEVELS[name.lower()]
    raise ValueError(f"{op}: precision must be None, a lax.Precision, one of {', '.join(map(repr, PRECISION_LEVELS))}"
                     f" or a pair of them (one per operand), a lax.DotAlgorithm, or a lax.DotAlgorithmPreset or its "
                     f"name, got {value!r}")


def _canonical_algorithm(op: str, algorithm: DotAlgorithm) -> DotAlgorithm:
    """algorithm with numpy dtypes for its types (so equal algorithms key the caches alike)."""
    try:
        types = [np.dtype(t) for t in algorithm[:3]]
    except TypeError as err:
        raise TypeError(f"{op}: the types of {algorithm!r} must be dtypes: {err}") from None
    counts = algorithm[3:6]
    if any(not isinstance(c, int | np.integer) or isinstance(c, bool) or c < 1 for c in counts):
        raise ValueError(f"{op}: the component counts and num_primitive_operations of {algorithm!r} must be "
                         "positive integers")
    return DotAlgorithm(*types, *(int(c) for c in counts), bool(algorithm.allow_imprecise_accumulation))


def canonical_precision(op: str, precision: Any) -> Precision:
    """The precision param of a dot or convolution: precision's levels (a pair), its algorithm (a DotAlgorithm,
    or a DotAlgorithmPreset, also given by name), or with None the default_matmul_precision option's (None where
    it is not set)."""
    if precision is None:
        precision = config.read_canonical("default_matmul_precision")
        if precision is None:
            return None
    if isinstance(precision, DotAlgorithmPreset):
        return precision
    if isinstance(precision, DotAlgorithm):
        return _canonical_algorithm(op, precision)
    if isinstance(precision, str) and precision in DotAlgorithmPreset.__members__:
        return DotAlgorithmPreset[precision]
    if isinstance(precision, tuple | list) and len(precision) == 2:
        if any(isinstance(p, DotAlgorithm | DotAlgorithmPreset)
               or (isinstance(p, str) and p in DotAlgorithmPreset.__members__) for p in precision):
            raise TypeError(f"{op}: a dot algorithm applies to both operands: pass one DotAlgorithm or "
                            f"DotAlgorithmPreset as precision, not a pair, got {precision!r}")
        return (_precision_level(op, precision[0]), _precision_level(op, precision[1]))
    level = _precision_level(op, precision)
    return (level, level)


def precision_attrs(precision: Precision) -> dict[str, str]:
    """The StableHLO precision_config of a precision (none for None: XLA's default; DEFAULT for both operands with
    an algorithm, which dot_general writes separately and a convolution ignores, as JAX)."""
    if precision is None:
        return {}
    levels = ("DEFAULT", "DEFAULT") if is_algorithm(precision) else precision
    return {"precision_config": f"[#stablehlo<precision {levels[0]}>, #stablehlo<precision {levels[1]}>]"}


def with_precision(params: dict[str, Any], precision: Precision) -> dict[str, Any]:
    """params with the precision param, present only when set (so IRs without one print and key as before)."""
    return params if precision is None else {**params, "precision": precision}


def _convert_to(dtype: np.dtype | None, targets: tuple[np.dtype, ...] | None) -> np.dtype | None:
    """dtype where a preset takes it (or takes any), else the preset's first dtype."""
    return dtype if targets is None or dtype in targets else targets[0]


def algorithm_types(algorithm: Algorithm, lhs: np.dtype, rhs: np.dtype, out: np.dtype
                    ) -> tuple[np.dtype, np.dtype, np.dtype]:
    """The dtypes a dot with this algorithm computes in: its operands' and its accumulation's (the result of
    dtype out is converted from it)."""
    if isinstance(algorithm, DotAlgorithm):
        return algorithm.lhs_precision_type, algorithm.rhs_precision_type, algorithm.accumulation_type
    lhs, rhs = _convert_to(lhs, algorithm.supported_lhs_types), _convert_to(rhs, algorithm.supported_rhs_types)
    return lhs, rhs, _convert_to(out, algorithm.supported_output_types(lhs, rhs))


def _mlir_name(op: str, dtype: np.dtype) -> str:
    try:
        return dt.mlir_type(dtype)
    except KeyError:
        raise ValueError(f"{op}: the dot algorithm names dtype {dtype}, which ember cannot write into a program") \
            from None


def algorithm_attr(algorithm: Algorithm, lhs: np.dtype, rhs: np.dtype) -> str | None:
    """The #stablehlo.dot_algorithm attribute of an algorithm on operands of these (converted) dtypes (None for
    DEFAULT, which writes none). ANY_F8 presets need float8 operands (ValueError otherwise, as JAX)."""
    op = "dot_general"
    if isinstance(algorithm, DotAlgorithm):
        types = tuple(_mlir_name(op, t) for t in algorithm[:3])
        counts, imprecise = algorithm[3:6], algorithm.allow_imprecise_accumulation
    else:
        spec = algorithm._spec
        if spec.algorithm is None:
            return None
        if spec.algorithm == "f8":
            if lhs not in _F8_TYPES or rhs not in _F8_TYPES:
                raise ValueError(f"The dot algorithm '{algorithm}' requires both inputs to have float8 dtypes. Got "
                                 f"{lhs} and {rhs} instead.")
            types, counts = (_mlir_name(op, lhs), _mlir_name(op, rhs), "f32"), (1, 1, 1)
            # (as JAX writes it: only ANY_F8_ANY_F8_F32_FAST_ACCUM allows imprecise accumulation)
            imprecise = algorithm is DotAlgorithmPreset.ANY_F8_ANY_F8_F32_FAST_ACCUM
        else:
            *types, ops = spec.algorithm
            counts, imprecise = (1, 1, ops), False
    return (f"#stablehlo.dot_algorithm<lhs_precision_type = {types[0]}, rhs_precision_type = {types[1]}, "
            f"accumulation_type = {types[2]}, lhs_component_count = {counts[0]}, rhs_component_count = {counts[1]}, "
            f"num_primitive_operations = {counts[2]}, allow_imprecise_accumulation = {str(imprecise).lower()}>")


def check_algorithm_platform(op: str, precision: Precision, platform: str | None) -> None:
    """The CPU runs the algorithms of CPU_PRESETS only: ValueError for any other (as JAX raises when it lowers the
    dot for the CPU)."""
    if platform == "cpu" and is_algorithm(precision) and precision not in CPU_PRESETS:
        raise ValueError(f"{op}: the precision '{precision}' is not supported by dot_general on CPU (the CPU runs "
                         f"the presets {', '.join(sorted(p.name for p in CPU_PRESETS))})")


# dot_general(lhs, rhs, dimension_numbers=((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)), [precision])
# Output dimensions: batch dims, then lhs free dims, then rhs free dims (each in increasing order).
dot_general_p = Primitive("dot_general", checks=NAN_CHECK)
dot_general_p.def_rule("sharding_rule", explicit.dot_general)
DimensionNumbers = tuple[tuple[tuple[int, ...], tuple[int, ...]], tuple[tuple[int, ...], tuple[int, ...]]]


def _dot(lhs: Any, rhs: Any, dims: DimensionNumbers, precision: Precision, out_sharding: Any = None) -> Any:
    params = with_precision({"dimension_numbers": dims}, precision)
    if out_sharding is not None:  # (a param only when given: JAX's explicit sharding mode)
        params["out_sharding"] = out_sharding
    return dot_general_p.bind(lhs, rhs, **params)


def _free_dims(ndim: int, *used: Sequence[int]) -> tuple[int, ...]:
    taken = {d for group in used for d in group}
    return tuple(d for d in range(ndim) if d not in taken)


@dot_general_p.def_rule("abstract_eval")
def _dot_general_abstract_eval(lhs: ShapedArray, rhs: ShapedArray, *, dimension_numbers: DimensionNumbers,
                               precision: Precision = None, out_sharding: Any = None) -> ShapedArray:
    (lc, rc), (lb, rb) = dimension_numbers
    check_same_dtypes("dot_general", [lhs, rhs])
    check_dtype("dot_general", lhs, "fiuc", "operands")
    refuse_narrow("dot_general", lhs, "2", "operands", TWO_BIT_FAILS)
    if len(lc) != len(rc) or len(lb) != len(rb):
        raise TypeError(f"dot_general: dimension_numbers {dimension_numbers} pair unequal numbers of dims")
    for name, dims, aval in (("lhs", lc + lb, lhs), ("rhs", rc + rb, rhs)):
        if any(not 0 <= d < aval.ndim for d in dims) or len(set(dims)) != len(dims):
            raise TypeError(f"dot_general: {name} dims {dims} are invalid for {aval.str_short()}")
    for kind, ldims, rdims in (("contracting", lc, rc), ("batch", lb, rb)):
        if any(lhs.shape[a] != rhs.shape[b] for a, b in zip(ldims, rdims)):
            raise TypeError(f"dot_general: {kind} dimensions {ldims} of {lhs.str_short()} and {rdims} of "
                            f"{rhs.str_short()} have different sizes")
    shape = (tuple(lhs.shape[d] for d in lb) + tuple(lhs.shape[d] for d in _free_dims(lhs.ndim, lc, lb))
             + tuple(rhs.shape[d] for d in _free_dims(rhs.ndim, rc, rb)))
    return ShapedArray(shape, lhs.dtype, lhs.weak_type and rhs.weak_type)


@dot_general_p.def_rule("lowering")
def _dot_general_lowering(ctx: LoweringContext, lhs: str, rhs: str, *, dimension_numbers: DimensionNumbers,
                          precision: Precision = None, out_sharding: Any = None) -> list[str]:
    (lc, rc), (lb, rb) = dimension_numbers
    check_algorithm_platform("dot_general", precision, ctx.emitter.platform)
    if is_algorithm(precision) and precision is not DotAlgorithmPreset.DEFAULT:
        return [_algorithm_dot(ctx, lhs, rhs, dimension_numbers, precision)]
    value = backend_forms.dot_general(ctx.emitter, lhs, rhs, *ctx.avals_in, ctx.aval_out, dimension_numbers,
                                      precision_attrs(precision), row_fusion.product_sums)
    if value is not None:  # (a form the backend runs faster: ember._hlo.backend_forms)
        return [value]
    return [ctx.op("stablehlo.dot_general", [lhs, rhs], ctx.aval_out,
                   {"dot_dimension_numbers": dot_dimension_numbers(lc, rc, lb, rb), **precision_attrs(precision)})]


def _converted(ctx: LoweringContext, x: str, aval: ShapedArray, dtype: np.dtype) -> str:
    """x (of type aval) converted to dtype, as convert_element_type lowers it (a complex value's real part)."""
    if aval.dtype == dtype:
        return x
    sub = LoweringContext(ctx.emitter, [aval], [aval.update(dtype=dtype, weak_type=False)])
    return convert_element_type_p.rule("lowering")(sub, x, new_dtype=dtype, weak_type=False)[0]


def _algorithm_dot(ctx: LoweringContext, lhs: str, rhs: str, dims: DimensionNumbers, algorithm: Algorithm) -> str:
    """A dot with an algorithm, as JAX lowers it: the operands converted to the algorithm's dtypes, one
    stablehlo.dot_general with the accumulation dtype as its result, converted to the dot's result dtype (the plain
    dot_general, not a backend form, so its numbers are XLA's dot's as JAX's are). The dot carries the algorithm
    except on the CPU: the CPU runs the presets it takes by these conversions alone (JAX's CPU backend ignores the
    algorithm of those), and the plugin's XLA refuses the attribute on a matrix . vector product of narrow operands
    (and, like jaxlib's, on a vector . vector one), which JAX's CPU computes."""
    (lc, rc), (lb, rb) = dims
    l_aval, r_aval = ctx.avals_in
    out = ctx.aval_out
    l_type, r_type, acc_type = algorithm_types(algorithm, l_aval.dtype, r_aval.dtype, out.dtype)
    lhs, rhs = _converted(ctx, lhs, l_aval, l_type), _converted(ctx, rhs, r_aval, r_type)
    attrs = {"dot_dimension_numbers": dot_dimension_numbers(lc, rc, lb, rb), **precision_attrs(algorithm)}
    written = algorithm_attr(algorithm, l_type, r_type)
    if written is not None and ctx.emitter.platform != "cpu":
        attrs["algorithm"] = written
    acc = out.update(dtype=acc_type, weak_type=False)
    return _converted(ctx, ctx.op("stablehlo.dot_general", [lhs, rhs], acc, attrs), acc, out.dtype)


@dot_general_p.def_rule("jvp")
def _dot_general_jvp(primals: Sequence[Any], tangents: Sequence[Any], *, dimension_numbers: DimensionNumbers,
                     precision: Precision = None, out_sharding: Any = None) -> tuple[list[Any], list[Any]]:
    lhs, rhs = primals
    t_lhs, t_rhs = tangents
    out = _dot(lhs, rhs, dimension_numbers, precision, out_sharding)
    parts = ([_dot(t_lhs, rhs, dimension_numbers, precision, out_sharding)] if t_lhs is not None else []) + \
        ([_dot(lhs, t_rhs, dimension_numbers, precision, out_sharding)] if t_rhs is not None else [])
    if not parts:
        return [out], [None]
    return [out], [parts[0] if len(parts) == 1 else add(*parts)]


def _dot_operand_cotangent(ct: Any, other: Any, dims: DimensionNumbers, this: ShapedArray, swap: bool,
                           precision: Precision) -> Any:
    """Cotangent of one dot_general operand: contract ct's dims of the other operand's free dims with them,
    then put the dimensions back in this operand's order. In explicit sharding mode the product is split as this
    operand is (as JAX's transpose: the contraction may run over split dimensions)."""
    this_ndim = this.ndim
    (lc, rc), (lb, rb) = dims
    if swap:  # the cotangent of rhs: the same computation with the roles of lhs and rhs exchanged
        lc, rc, lb, rb = rc, lc, rb, lb
    other_ndim = aval_of(other).ndim
    this_free = _free_dims(this_ndim, lc, lb)
    other_free = _free_dims(other_ndim, rc, rb)
    nb = len(lb)
    # ct's layout is (batch, lhs free, rhs free): the other operand's free dims come second when it is rhs.
    first = nb + len(this_free) if not swap else nb
    other_free_in_ct = tuple(range(first, first + len(other_free)))
    # result layout: batch, this free dims, then other's contracting dims in increasing order.
    contracted = [lc[rc.index(r)] for r in sorted(rc)]
    result_to_this = list(lb) + list(this_free) + contracted
    result = _dot(ct, other, ((other_free_in_ct, other_free), (tuple(range(nb)), rb)), precision,
                  _operand_sharding(this, result_to_this, ct, other))
    return transpose(result, argsort(result_to_this))


@dot_general_p.def_rule("vjp")
def _dot_general_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], *,
                     dimension_numbers: DimensionNumbers, precision: Precision = None, out_sharding: Any = None
                     ) -> list[Any]:
    lhs, rhs = ins
    ct = cts[0]
    ct_lhs = (_dot_operand_cotangent(ct, rhs, dimension_numbers, aval_of(lhs), False, precision)
              if needs[0] else None)
    ct_rhs = (_dot_operand_cotangent(ct, lhs, dimension_numbers, aval_of(rhs), True, precision)
              if needs[1] else None)
    return [ct_lhs, ct_rhs]


def _operand_sharding(this: ShapedArray, layout: Sequence[int], *others: Any) -> Any:
    """The out_sharding of the product giving an operand's cotangent (in layout: the product's dimension i is the
    operand's layout[i]): the operand's explicit sharding, or replicated over the mesh of the others' (None when
    nothing is explicitly sharded)."""
    source = this.explicit
    if source is None:
        source = next((aval_of(o).explicit for o in others if aval_of(o).explicit is not None), None)
        if source is None:
            return None
        entries: Sequence[Any] = [None] * this.ndim
    else:
        entries = list(source.spec)
    return explicit_sharding(source.mesh, [entries[d] for d in layout])


def _shift(dims: Sequence[int], at: int) -> tuple[int, ...]:
    """Dimension numbers after a new dimension is inserted at position `at`."""
    return tuple(d if d < at else d + 1 for d in dims)


@dot_general_p.def_rule("batching")
def _dot_general_batching(args: list[Any], dims: list[BatchDim], *, dimension_numbers: DimensionNumbers,
                          precision: Precision = None, out_sharding: Any = None) -> tuple[list[Any], list[BatchDim]]:
    """Both operands batched: the batch dimension becomes a new leading dot batch dimension. One batched: it is a
    free dimension of that operand, which lands in the output among that operand's free dimensions. No loops, no
    broadcast of the unbatched operand."""
    (lc, rc), (lb, rb) = dimension_numbers
    (lhs, rhs), (ld, rd) = args, dims
    lhs_ndim, rhs_ndim = aval_of(lhs).ndim, aval_of(rhs).ndim
    out_ndim = len(lb) + (lhs_ndim - 1 - len(lc) - len(lb)) + (rhs_ndim - 1 - len(rc) - len(rb)) + \
        (ld is None) + (rd is None)  # (the unbatched product's rank)
    if ld is not None and rd is not None:
        new = ((_shift(lc, ld), _shift(rc, rd)), ((ld,) + _shift(lb, ld), (rd,) + _shift(rb, rd)))
        return [_dot(lhs, rhs, new, precision, explicit.batched(out_sharding, 0, out_ndim))], [0]
    if ld is not None:
        new = ((_shift(lc, ld), rc), (_shift(lb, ld), rb))
        free = _free_dims(lhs_ndim, new[0][0], new[1][0])
        d = len(lb) + free.index(ld)
        return [_dot(lhs, rhs, new, precision, explicit.batched(out_sharding, d, out_ndim))], [d]
    new = ((lc, _shift(rc, rd)), (lb, _shift(rb, rd)))
    lhs_free = _free_dims(lhs_ndim, lc, lb)
    free = _free_dims(rhs_ndim, new[0][1], new[1][1])
    d = len(lb) + len(lhs_free) + free.index(rd)
    return [_dot(lhs, rhs, new, precision, explicit.batched(out_sharding, d, out_ndim))], [d]


def dot_general(lhs: Any, rhs: Any, dimension_numbers: Any, precision: Any = None,
                preferred_element_type: Any = None, out_sharding: Any = None) -> Any:
    """The general contraction (like jax.lax.dot_general). precision (None: the default_matmul_precision option's)
    is a lax.Precision or its name, or one per operand, which goes into the program (the CPU computes in the
    operands' dtype at every level); or an algorithm, a lax.DotAlgorithm or a lax.DotAlgorithmPreset (or its
    name), whose dtypes the dot computes in (DotAlgorithmPreset says which the CPU runs). preferred_element_type is
    the result dtype: the operands are converted to it when it is at least as wide (int8 products accumulated in
    int32, float16 in float32: exact products, wide accumulation), the result when it is narrower (with an
    algorithm, also when it is of another kind, as JAX allows); the conversions carry the derivatives."""
    try:
        (lc, rc), (lb, rb) = dimension_numbers
    except (TypeError, ValueError) as err:
        raise TypeError("dot_general: dimension_numbers must be ((lhs_contracting, rhs_contracting), "
                        f"(lhs_batch, rhs_batch)), got {dimension_numbers!r}") from err
    dims = tuple(tuple(static_ints("dot_general", "dimension_numbers", d) for d in pair)
                 for pair in ((lc, rc), (lb, rb)))
    precision = canonical_precision("dot_general", precision)
    out_sharding = explicit.resolve("dot_general", out_sharding)
    if preferred_element_type is None:
        return _dot(lhs, rhs, dims, precision, out_sharding)
    preferred = dt.check_user_dtype(preferred_element_type, "dot_general")  # (float64: float32 without x64, warned)
    l_aval, r_aval = aval_of(lhs), aval_of(rhs)
    if l_aval.dtype != r_aval.dtype:
        check_same_dtypes("dot_general", [l_aval, r_aval])
    if preferred != l_aval.dtype:  # (JAX's dot of them fails in XLA's CPU: a result type wider than its packing)
        refuse_narrow("dot_general with a preferred_element_type", l_aval, "s", "operands")
    if preferred == l_aval.dtype:
        return _dot(lhs, rhs, dims, precision, out_sharding)
    if is_algorithm(precision):  # any result dtype (JAX checks no width with an algorithm)
        widens = dt.result_type(l_aval.dtype, preferred) == preferred
    else:
        if dt.is_bool(preferred) or (dt.is_int(preferred) and dt.is_float(l_aval.dtype)):
            raise TypeError(f"dot_general: preferred_element_type {preferred} cannot hold products of "
                            f"{l_aval.str_short()} and {r_aval.str_short()}")
        widens = preferred.itemsize >= l_aval.dtype.itemsize
    if widens:
        return _dot(convert_element_type(lhs, preferred), convert_element_type(rhs, preferred), dims, precision,
                    out_sharding)
    return convert_element_type(_dot(lhs, rhs, dims, precision, out_sharding), preferred)


def dot(lhs: Any, rhs: Any, precision: Any = None, preferred_element_type: Any = None, out_sharding: Any = None
        ) -> Any:
    """Vector/matrix products contracting lhs's last and rhs's first dimension (like jax.lax.dot)."""
    lnd, rnd = aval_of(lhs).ndim, aval_of(rhs).ndim
    if not (1 <= lnd <= 2 and 1 <= rnd <= 2):
        raise TypeError(f"dot: operands must be vectors or matrices, got {aval_of(lhs).str_short()} and "
                        f"{aval_of(rhs).str_short()}")
    return dot_general(lhs, rhs, (((lnd - 1,), (0,)), ((), ())), precision=precision,
                       preferred_element_type=preferred_element_type, out_sharding=out_sharding)


__all__ = ["DotAlgorithm", "DotAlgorithmPreset", "dot", "dot_general"]
