"""dot_general: contraction with batch dimensions (bilinear: its JVP is one product per tangent); and the
precision of dots and convolutions."""
from __future__ import annotations

import enum
from typing import Any, Sequence

from ember._core import Primitive, ShapedArray, aval_of
from ember._core import dtypes as dt
from ember._core import NAN_CHECK
from ember._core.checks import static_ints
from ember._core.config import config
from ember._core.sharding import explicit_sharding
from ember._hlo import LoweringContext, backend_forms, dot_dimension_numbers, row_fusion
from ember._prims.checks import check_dtype, check_same_dtypes
from ember._prims.elementwise import add
from ember._prims.shape import BatchDim, argsort, convert_element_type, transpose
from ember._prims import explicit

# ---------------------------------------------------------------------------------------------------------------
# Precision (of dot_general and conv_general_dilated): None, or the level of each operand, "DEFAULT", "HIGH" or
# "HIGHEST" (lax.Precision's names), written into the StableHLO as its precision_config. Accelerators use it to
# choose lower-precision passes; the CPU computes in the operands' dtype at every level, as XLA's CPU backend does
# for JAX. Names of levels, as JAX's:
PRECISION_LEVELS = {"default": "DEFAULT", "fastest": "DEFAULT", "bfloat16": "DEFAULT", "high": "HIGH",
                    "bfloat16_3x": "HIGH", "tensorfloat32": "HIGH", "highest": "HIGHEST", "float32": "HIGHEST"}
Precision = tuple[str, str] | None


def _precision_level(op: str, value: Any) -> str:
    name = value.name if isinstance(value, enum.Enum) else value
    if isinstance(name, str) and name.lower() in PRECISION_LEVELS:
        return PRECISION_LEVELS[name.lower()]
    raise ValueError(f"{op}: precision must be None, a lax.Precision, one of {', '.join(map(repr, PRECISION_LEVELS))}"
                     f" or a pair of them (one per operand), got {value!r}")


def canonical_precision(op: str, precision: Any) -> Precision:
    """The precision param of a dot or convolution: precision's levels, or with None the default_matmul_precision
    option's (None where it is not set)."""
    if precision is None:
        precision = config.read_canonical("default_matmul_precision")
        if precision is None:
            return None
    if isinstance(precision, tuple | list) and len(precision) == 2:
        return (_precision_level(op, precision[0]), _precision_level(op, precision[1]))
    level = _precision_level(op, precision)
    return (level, level)


def precision_attrs(precision: Precision) -> dict[str, str]:
    """The StableHLO attribute of a precision (none for None: XLA's default)."""
    if precision is None:
        return {}
    return {"precision_config": f"[#stablehlo<precision {precision[0]}>, #stablehlo<precision {precision[1]}>]"}


def with_precision(params: dict[str, Any], precision: Precision) -> dict[str, Any]:
    """params with the precision param, present only when set (so IRs without one print and key as before)."""
    return params if precision is None else {**params, "precision": precision}


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
    value = backend_forms.dot_general(ctx.emitter, lhs, rhs, *ctx.avals_in, ctx.aval_out, dimension_numbers,
                                      precision_attrs(precision), row_fusion.product_sums)
    if value is not None:  # (a form the backend runs faster: ember._hlo.backend_forms)
        return [value]
    return [ctx.op("stablehlo.dot_general", [lhs, rhs], ctx.aval_out,
                   {"dot_dimension_numbers": dot_dimension_numbers(lc, rc, lb, rb), **precision_attrs(precision)})]


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
    """The general contraction (like jax.lax.dot_general). precision (None: the default_matmul_precision option's;
    a lax.Precision or its name, or one per operand) goes into the program (the CPU computes in the operands' dtype
    at every level). preferred_element_type is the result dtype: the operands are converted
    to it when it is at least as wide (int8 products accumulated in int32, float16 in float32: exact products,
    wide accumulation), the result when it is narrower; the conversions carry the derivatives."""
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
    if preferred == l_aval.dtype:
        return _dot(lhs, rhs, dims, precision, out_sharding)
    if dt.is_bool(preferred) or (dt.is_int(preferred) and dt.is_float(l_aval.dtype)):
        raise TypeError(f"dot_general: preferred_element_type {preferred} cannot hold products of "
                        f"{l_aval.str_short()} and {r_aval.str_short()}")
    if preferred.itemsize >= l_aval.dtype.itemsize:
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


__all__ = ["dot", "dot_general"]
