"""conv_general_dilated: N-d convolution with strides, padding, input (lhs) and kernel (rhs) dilation, feature and
batch groups and any dimension layout, lowered to stablehlo.convolution; and the composed conv, conv_transpose,
conv_with_general_padding.

The rules work in the canonical layouts (lhs: batch, feature, spatial...; rhs: out feature, in feature,
spatial...; out: batch, feature, spatial...) and transpose in and out of the equation's layouts; XLA folds those
transposes into the convolution. Derivatives are convolutions:
- w.r.t. lhs: the cotangent convolved with the kernel flipped in space and with in/out features swapped (within
  each group), its stride becoming an lhs dilation and the lhs dilation a stride;
- w.r.t. rhs: lhs convolved with the cotangent, batch and feature roles exchanged: feature groups become batch
  groups and batch groups feature groups.
Batching folds the vmapped dimension into the batch dimension (lhs), the output features (rhs), or, when both are
batched, into feature groups."""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

from ember._core import Primitive, ShapedArray, aval_of
from ember._core import dtypes as dt
from ember._core import NAN_CHECK
from ember._core.checks import static_int, static_ints
from ember._core.shape_poly import dim_text
from ember._hlo import LoweringContext, i64_array
from ember._prims.checks import TWO_BIT_FAILS, check_dtype, check_same_dtypes, refuse_narrow
from ember._prims.elementwise import add
from ember._prims.dot import Precision, canonical_precision, precision_attrs, with_precision
from ember._prims.shape import BatchDim, argsort, batch_size, moveaxis, reshape, transpose
from ember._prims.slicing import concatenate, rev, slice_in_dim
from ember._prims import explicit


class ConvDimensionNumbers(NamedTuple):
    """Where each role lives (like jax.lax.ConvDimensionNumbers): lhs_spec = (batch, feature, spatial...),
    rhs_spec = (out feature, in feature, spatial...), out_spec = (batch, feature, spatial...), as dimension
    indices of each operand."""
    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


Pairs = tuple[tuple[int, int], ...]
conv_general_dilated_p = Primitive("conv_general_dilated", checks=NAN_CHECK)
conv_general_dilated_p.def_rule("sharding_rule", explicit.conv)


def _spatial(aval: ShapedArray, spec: Sequence[int]) -> list[int]:
    return [aval.shape[d] for d in spec[2:]]


def _dilate(size: int, d: int) -> int:
    return 0 if size == 0 else (size - 1) * d + 1


def _out_spatial(ins: Sequence[int], window: Sequence[int], strides: Sequence[int], padding: Pairs,
                 lhs_dilation: Sequence[int], rhs_dilation: Sequence[int]) -> list[int]:
    out = []
    for n, k, s, (lo, hi), dl, dr in zip(ins, window, strides, padding, lhs_dilation, rhs_dilation):
        span = _dilate(n, dl) + lo + hi - _dilate(k, dr)
        out.append(span // s + 1 if span >= 0 else 0)
    return out


@conv_general_dilated_p.def_rule("abstract_eval")
def _conv_abstract_eval(lhs: ShapedArray, rhs: ShapedArray, *, window_strides: tuple[int, ...], padding: Pairs,
                        lhs_dilation: tuple[int, ...], rhs_dilation: tuple[int, ...],
                        dimension_numbers: ConvDimensionNumbers, feature_group_count: int, batch_group_count: int,
                        precision: Precision = None) -> ShapedArray:
    op = "conv_general_dilated"
    check_same_dtypes(op, [lhs, rhs])
    check_dtype(op, lhs, "fic", "lhs")
    refuse_narrow(op, lhs, "2", "lhs", TWO_BIT_FAILS)
    ls, rs, os_ = dimension_numbers
    nd = lhs.ndim - 2
    if lhs.ndim != rhs.ndim or lhs.ndim < 2:
        raise TypeError(f"{op}: lhs {lhs.str_short()} and rhs {rhs.str_short()} need the same rank, at least 2")
    for name, spec in (("lhs_spec", ls), ("rhs_spec", rs), ("out_spec", os_)):
        if sorted(spec) != list(range(lhs.ndim)):
            raise TypeError(f"{op}: dimension_numbers.{name} {spec} must be a permutation of range({lhs.ndim})")
    for name, v in (("window_strides", window_strides), ("lhs_dilation", lhs_dilation),
                    ("rhs_dilation", rhs_dilation)):
        if len(v) != nd or any(x < 1 for x in v):
            raise TypeError(f"{op}: {name} {v} needs {nd} positive entries (one per spatial dimension)")
    if len(padding) != nd:
        raise TypeError(f"{op}: padding {padding} needs {nd} (low, high) pairs")
    g, b = feature_group_count, batch_group_count
    if g < 1 or b < 1 or (g > 1 and b > 1):
        raise ValueError(f"{op}: feature_group_count {g} and batch_group_count {b} must be positive, and at most "
                         "one of them above 1")
    n, c = lhs.shape[ls[0]], lhs.shape[ls[1]]
    o, i = rhs.shape[rs[0]], rhs.shape[rs[1]]
    if c != i * g:
        raise TypeError(f"{op}: lhs {lhs.str_short()} has {c} input features, but rhs {rhs.str_short()} has {i} "
                        f"per group x feature_group_count {g}")
    if o % g or o % b or n % b:
        raise ValueError(f"{op}: rhs output features {o} must divide by feature_group_count {g} and "
                         f"batch_group_count {b}, and the lhs batch {n} by batch_group_count {b}")
    spatial = _out_spatial(_spatial(lhs, ls), _spatial(rhs, rs), window_strides, padding, lhs_dilation,
                           rhs_dilation)
    canonical = [n // b, o] + spatial
    shape = [0] * lhs.ndim
    for k, d in enumerate(os_):
        shape[d] = canonical[k]
    return ShapedArray(shape, lhs.dtype, lhs.weak_type and rhs.weak_type)


def _conv_attr(spec: Sequence[int], roles: str) -> str:
    """One operand's layout in #stablehlo.conv syntax: each dimension's role (b/f, o/i, or its spatial index)."""
    names = [""] * len(spec)
    names[spec[0]], names[spec[1]] = roles[0], roles[1]
    for k, d in enumerate(spec[2:]):
        names[d] = str(k)
    return "[" + ", ".join(names) + "]"


@conv_general_dilated_p.def_rule("lowering")
def _conv_lowering(ctx: LoweringContext, lhs: str, rhs: str, *, window_strides: tuple[int, ...], padding: Pairs,
                   lhs_dilation: tuple[int, ...], rhs_dilation: tuple[int, ...],
                   dimension_numbers: ConvDimensionNumbers, feature_group_count: int, batch_group_count: int,
                   precision: Precision = None) -> list[str]:
    ls, rs, os_ = dimension_numbers
    dims = f"#stablehlo.conv<{_conv_attr(ls, 'bf')}x{_conv_attr(rs, 'oi')}->{_conv_attr(os_, 'bf')}>"
    nd = len(window_strides)
    flat_pad = ", ".join(f"[{dim_text(lo)}, {dim_text(hi)}]" for lo, hi in padding)
    attrs = {"dimension_numbers": dims, "window_strides": i64_array(window_strides),
             "lhs_dilation": i64_array(lhs_dilation), "rhs_dilation": i64_array(rhs_dilation),
             "feature_group_count": f"{feature_group_count} : i64", "batch_group_count": f"{batch_group_count} : i64",
             **precision_attrs(precision)}
    if nd:
        attrs["padding"] = f"dense<[{flat_pad}]> : tensor<{nd}x2xi64>"
    return [ctx.op("stablehlo.convolution", [lhs, rhs], ctx.aval_out, attrs)]


# ---------------------------------------------------------------------------------------------------------------
# Rules, in canonical layouts
def _canonical(x: Any, spec: Sequence[int]) -> Any:
    return transpose(x, tuple(spec)) if tuple(spec) != tuple(range(len(spec))) else x


def _from_canonical(x: Any, spec: Sequence[int]) -> Any:
    perm = argsort(spec)
    return transpose(x, perm) if perm != tuple(range(len(spec))) else x


def _identity(nd: int) -> ConvDimensionNumbers:
    full = tuple(range(nd + 2))
    return ConvDimensionNumbers(full, full, full)


def _conv(lhs: Any, rhs: Any, strides: Sequence[int], padding: Sequence[Sequence[int]], lhs_dilation: Sequence[int],
          rhs_dilation: Sequence[int], dnums: ConvDimensionNumbers, groups: int = 1, batch_groups: int = 1,
          precision: Precision = None) -> Any:
    return conv_general_dilated_p.bind(lhs, rhs, **with_precision(dict(
        window_strides=tuple(strides), padding=tuple((int(lo), int(hi)) for lo, hi in padding),
        lhs_dilation=tuple(lhs_dilation), rhs_dilation=tuple(rhs_dilation), dimension_numbers=dnums,
        feature_group_count=groups, batch_group_count=batch_groups), precision))


def _split(x: Any, dim: int, sizes: Sequence[int]) -> Any:
    shape = aval_of(x).shape
    return reshape(x, shape[:dim] + tuple(sizes) + shape[dim + 1:])


def _merge(x: Any, dim: int, count: int) -> Any:
    """Merge dimensions dim .. dim + count - 1 into one."""
    shape = aval_of(x).shape
    return reshape(x, shape[:dim] + (math.prod(shape[dim:dim + count]),) + shape[dim + count:])


def _swap_features(rhs_c: Any, groups: int) -> Any:
    """A canonical kernel (O, I, k...) with in and out features exchanged within each of `groups` groups, and
    flipped in space: (groups * I, O / groups, k...)."""
    nd = aval_of(rhs_c).ndim - 2
    k = _split(rhs_c, 0, (groups, aval_of(rhs_c).shape[0] // groups))       # (G, O/G, I, k...)
    k = transpose(k, (0, 2, 1) + tuple(range(3, 3 + nd)))                    # (G, I, O/G, k...)
    k = _merge(k, 0, 2)                                                        # (G*I, O/G, k...)
    return rev(k, tuple(range(2, 2 + nd))) if nd else k


def _lhs_transpose(ct_c: Any, rhs_c: Any, lhs_aval_c: ShapedArray, p: dict[str, Any]) -> Any:
    """The cotangent of a canonical lhs."""
    strides, padding, dl, dr = p["window_strides"], p["padding"], p["lhs_dilation"], p["rhs_dilation"]
    g, b = p["feature_group_count"], p["batch_group_count"]
    nd = len(strides)
    n_sp, k_sp, m_sp = lhs_aval_c.shape[2:], aval_of(rhs_c).shape[2:], aval_of(ct_c).shape[2:]
    pads = []
    for n, k, m, s, (lo, _), a, r in zip(n_sp, k_sp, m_sp, strides, padding, dl, dr):
        kk, nn = _dilate(k, r), _dilate(n, a)
        low = kk - 1 - lo
        pads.append((low, nn + kk - 1 - low - _dilate(m, s)))  # so the result has the dilated input's size
    if b == 1:
        kernel = _swap_features(rhs_c, g)
        return _conv(ct_c, kernel, dl, pads, strides, dr, _identity(nd), groups=g, precision=p.get("precision"))
    # batch groups: each group of the batch used its own slice of the kernel's outputs
    kernel = _swap_features(rhs_c, b)                                          # (B*C, O/B, k...)
    out = _conv(ct_c, kernel, dl, pads, strides, dr, _identity(nd), groups=b,
                precision=p.get("precision"))                                  # (N/B, B*C, n...)
    out = _split(out, 1, (b, lhs_aval_c.shape[1]))                             # (N/B, B, C, n...)
    out = transpose(out, (1, 0) + tuple(range(2, 3 + nd)))                    # (B, N/B, C, n...)
    return _merge(out, 0, 2)


def _rhs_transpose(ct_c: Any, lhs_c: Any, rhs_aval_c: ShapedArray, p: dict[str, Any]) -> Any:
    """The cotangent of a canonical rhs: lhs convolved with the cotangent, batch and feature roles exchanged."""
    strides, padding, dl, dr = p["window_strides"], p["padding"], p["lhs_dilation"], p["rhs_dilation"]
    g, b = p["feature_group_count"], p["batch_group_count"]
    nd = len(strides)
    n_sp, k_sp, m_sp = aval_of(lhs_c).shape[2:], rhs_aval_c.shape[2:], aval_of(ct_c).shape[2:]
    pads = []
    for n, k, m, s, (lo, _), a, r in zip(n_sp, k_sp, m_sp, strides, padding, dl, dr):
        nn, kk = _dilate(n, a), _dilate(k, r)
        pads.append((lo, kk - 1 + _dilate(m, s) - nn - lo))  # so the result has the dilated kernel's size
    swapped = tuple([1, 0] + list(range(2, 2 + nd)))
    dnums = ConvDimensionNumbers(swapped, swapped, swapped)
    # lhs: batch <- its features, features <- its batch; kernel: out <- ct's features, in <- ct's batch
    return _conv(lhs_c, ct_c, dr, pads, dl, strides, dnums, groups=b, batch_groups=g, precision=p.get("precision"))


def _conv_vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool], **p: Any) -> list[Any]:
    lhs, rhs = ins
    ls, rs, os_ = p["dimension_numbers"]
    ct_c = _canonical(cts[0], os_)
    result: list[Any] = [None, None]
    if needs[0]:
        lhs_aval_c = ShapedArray(tuple(aval_of(lhs).shape[d] for d in ls), aval_of(lhs).dtype)
        result[0] = _from_canonical(_lhs_transpose(ct_c, _canonical(rhs, rs), lhs_aval_c, p), ls)
    if needs[1]:
        rhs_aval_c = ShapedArray(tuple(aval_of(rhs).shape[d] for d in rs), aval_of(rhs).dtype)
        result[1] = _from_canonical(_rhs_transpose(ct_c, _canonical(lhs, ls), rhs_aval_c, p), rs)
    return result


conv_general_dilated_p.def_rule("vjp", _conv_vjp)


@conv_general_dilated_p.def_rule("jvp")
def _conv_jvp(primals: Sequence[Any], tangents: Sequence[Any], **p: Any) -> tuple[list[Any], list[Any]]:
    lhs, rhs = primals
    t_lhs, t_rhs = tangents
    out = conv_general_dilated_p.bind(lhs, rhs, **p)
    terms = []
    if t_lhs is not None:
        terms.append(conv_general_dilated_p.bind(t_lhs, rhs, **p))
    if t_rhs is not None:
        terms.append(conv_general_dilated_p.bind(lhs, t_rhs, **p))
    tangent = None if not terms else terms[0] if len(terms) == 1 else add(terms[0], terms[1])
    return [out], [tangent]


@conv_general_dilated_p.def_rule("batching")
def _conv_batching(args: list[Any], dims: list[BatchDim], **p: Any) -> tuple[list[Any], list[BatchDim]]:
    lhs, rhs = args
    ld, rd = dims
    ls, rs, os_ = p["dimension_numbers"]
    g, b = p["feature_group_count"], p["batch_group_count"]
    v = batch_size(args, dims)

    def canonical_batched(x: Any, d: int, spec: Sequence[int]) -> Any:  # (V, canonical dims...)
        x = moveaxis(x, d, 0)
        return transpose(x, (0,) + tuple(s + 1 for s in spec))
    params = dict(p, dimension_numbers=_identity(len(ls) - 2))
    nd = len(ls) - 2
    if rd is None:  # the batch dimension takes the members (inside each batch group)
        x = canonical_batched(lhs, ld, ls)                                       # (V, N, C, n...)
        x = _split(x, 1, (b, aval_of(x).shape[1] // b))                          # (V, B, N/B, C, n...)
        x = transpose(x, (1, 0) + tuple(range(2, 4 + nd)))                      # (B, V, N/B, C, n...)
        out = conv_general_dilated_p.bind(_merge(x, 0, 3), _canonical(rhs, rs), **params)  # (V*N/B, O, m...)
        out = _split(out, 0, (v, aval_of(out).shape[0] // v))
    elif ld is None:  # the output features take the members (inside each group)
        groups = max(g, b)
        w = canonical_batched(rhs, rd, rs)                                       # (V, O, I, k...)
        w = _split(w, 1, (groups, aval_of(w).shape[1] // groups))               # (V, G, O/G, I, k...)
        w = transpose(w, (1, 0) + tuple(range(2, 4 + nd)))                      # (G, V, O/G, I, k...)
        out = conv_general_dilated_p.bind(_canonical(lhs, ls), _merge(w, 0, 3), **params)  # (N, G*V*O/G, m...)
        o_g = aval_of(w).shape[2]
        out = _split(out, 1, (groups, v, o_g))                                   # (N, G, V, O/G, m...)
        out = transpose(out, (2, 0, 1) + tuple(range(3, 4 + nd)))               # (V, N, G, O/G, m...)
        out = _merge(out, 2, 2)
    elif b == 1:  # both: the members become feature groups
        x = canonical_batched(lhs, ld, ls)                                       # (V, N, C, n...)
        x = _merge(transpose(x, (1, 0) + tuple(range(2, 3 + nd))), 1, 2)        # (N, V*C, n...)
        w = _merge(canonical_batched(rhs, rd, rs), 0, 2)                         # (V*O, I, k...)
        out = conv_general_dilated_p.bind(x, w, **dict(params, feature_group_count=v * g))  # (N, V*O, m...)
        out = _split(out, 1, (v, aval_of(out).shape[1] // v))
        out = transpose(out, (1, 0) + tuple(range(2, 3 + nd)))                  # (V, N, O, m...)
    else:  # both batched with batch groups: one convolution per member
        x, w = canonical_batched(lhs, ld, ls), canonical_batched(rhs, rd, rs)
        members = [conv_general_dilated_p.bind(reshape(slice_in_dim(x, k, k + 1), aval_of(x).shape[1:]),
                                               reshape(slice_in_dim(w, k, k + 1), aval_of(w).shape[1:]), **params)
                   for k in range(v)]
        out = concatenate([reshape(m, (1,) + aval_of(m).shape) for m in members], 0)
    return [transpose(out, (0,) + tuple(s + 1 for s in argsort(os_)))], [0]


# ---------------------------------------------------------------------------------------------------------------
# Public functions
def _specs_from_strings(lhs_shape: Sequence[int], rhs_shape: Sequence[int], specs: Sequence[str]
                        ) -> ConvDimensionNumbers:
    lhs_s, rhs_s, out_s = specs
    if not (len(lhs_s) == len(rhs_s) == len(out_s) == len(lhs_shape)):
        raise TypeError(f"conv_general_dilated: dimension_numbers {tuple(specs)} must each have one letter per "
                        f"dimension of the operands (rank {len(lhs_shape)})")
    if set(lhs_s) != set(out_s) or "N" not in lhs_s or "C" not in lhs_s or "O" not in rhs_s or "I" not in rhs_s:
        raise TypeError(f"conv_general_dilated: invalid dimension_numbers {tuple(specs)}: lhs and out need N and C, "
                        "rhs O and I, and the same spatial letters")
    spatial = [c for c in rhs_s if c not in "OI"]
    if sorted(spatial) != sorted(c for c in lhs_s if c not in "NC"):
        raise TypeError(f"conv_general_dilated: the spatial letters of {tuple(specs)} differ between lhs and rhs")
    return ConvDimensionNumbers(
        (lhs_s.index("N"), lhs_s.index("C")) + tuple(lhs_s.index(c) for c in spatial),
        (rhs_s.index("O"), rhs_s.index("I")) + tuple(rhs_s.index(c) for c in spatial),
        (out_s.index("N"), out_s.index("C")) + tuple(out_s.index(c) for c in spatial))


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int], dimension_numbers: Any
                           ) -> ConvDimensionNumbers:
    """dimension_numbers (None, a ConvDimensionNumbers, or three layout strings like ("NHWC", "HWIO", "NHWC"))
    as a ConvDimensionNumbers (like jax.lax.conv_dimension_numbers)."""
    ndim = len(lhs_shape)
    if len(rhs_shape) != ndim:
        raise TypeError(f"conv_general_dilated: lhs shape {tuple(lhs_shape)} and rhs shape {tuple(rhs_shape)} need "
                        "the same rank")
    if dimension_numbers is None:
        full = tuple(range(ndim))
        return ConvDimensionNumbers(full, full, full)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return ConvDimensionNumbers(*(static_ints("conv_general_dilated", "dimension_numbers", s)
                                      for s in dimension_numbers))
    if len(dimension_numbers) == 3 and all(isinstance(s, str) for s in dimension_numbers):
        return _specs_from_strings(lhs_shape, rhs_shape, dimension_numbers)
    if len(dimension_numbers) == 3:
        return ConvDimensionNumbers(*(static_ints("conv_general_dilated", "dimension_numbers", s)
                                      for s in dimension_numbers))
    raise TypeError(f"conv_general_dilated: invalid dimension_numbers {dimension_numbers!r}")


def padtype_to_pads(in_shape: Sequence[int], window_shape: Sequence[int], window_strides: Sequence[int],
                    padding: str) -> list[tuple[int, int]]:
    """The (low, high) pads of "SAME" (output size ceil(in / stride), extra padding high), "SAME_LOWER" (extra
    padding low) or "VALID" (none), like jax.lax.padtype_to_pads."""
    kind = padding.upper()
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    if kind not in ("SAME", "SAME_LOWER"):
        raise ValueError(f"conv: padding must be 'SAME', 'SAME_LOWER', 'VALID' or (low, high) pairs, got {padding!r}")
    pads = []
    for n, k, s in zip(in_shape, window_shape, window_strides):
        out = -(-n // s)
        total = max((out - 1) * s + k - n, 0)
        small, large = total // 2, total - total // 2
        pads.append((small, large) if kind == "SAME" else (large, small))
    return pads


def conv_general_dilated(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                         lhs_dilation: Sequence[int] | None = None, rhs_dilation: Sequence[int] | None = None,
                         dimension_numbers: Any = None, feature_group_count: int = 1, batch_group_count: int = 1,
                         precision: Any = None, preferred_element_type: Any = None) -> Any:
    """The general convolution (like jax.lax.conv_general_dilated): padding is "SAME", "SAME_LOWER", "VALID" or
    one (low, high) pair per spatial dimension; lhs_dilation dilates the input (a transposed convolution),
    rhs_dilation the kernel (atrous convolution). precision is as dot_general's (it goes into the program; the
    CPU computes in the operand dtype); preferred_element_type may only name the operands' dtype."""
    op = "conv_general_dilated"
    l_aval, r_aval = aval_of(lhs), aval_of(rhs)
    dnums = conv_dimension_numbers(l_aval.shape, r_aval.shape, dimension_numbers)
    nd = l_aval.ndim - 2
    strides = static_ints(op, "window_strides", window_strides)
    ld = (1,) * nd if lhs_dilation is None else static_ints(op, "lhs_dilation", lhs_dilation)
    rd = (1,) * nd if rhs_dilation is None else static_ints(op, "rhs_dilation", rhs_dilation)
    if isinstance(padding, str):
        if any(d != 1 for d in ld):  # (as JAX: the pads of a transposed convolution are conv_transpose's)
            raise ValueError(f"{op}: string padding {padding!r} is not implemented for a transposed convolution "
                             f"(lhs_dilation {ld}); give the (low, high) pads or use conv_transpose")
        window = [_dilate(r_aval.shape[d], r) for d, r in zip(dnums.rhs_spec[2:], rd)]
        pads = padtype_to_pads([l_aval.shape[d] for d in dnums.lhs_spec[2:]], window, strides, padding)
    else:
        pads = [tuple(static_ints(op, "padding", p)) for p in padding]
        if any(len(p) != 2 for p in pads):
            raise TypeError(f"{op}: padding must be (low, high) pairs, got {padding}")
    if preferred_element_type is not None and dt.check_user_dtype(preferred_element_type, op) != l_aval.dtype:
        raise NotImplementedError(f"{op}: preferred_element_type {preferred_element_type} differs from the operand "
                                  f"dtype {l_aval.dtype}; convert the operands instead")
    return _conv(lhs, rhs, strides, pads, ld, rd, dnums, static_int(op, "feature_group_count", feature_group_count),
                 static_int(op, "batch_group_count", batch_group_count), canonical_precision(op, precision))


def conv(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any, precision: Any = None,
         preferred_element_type: Any = None) -> Any:
    """A convolution in NCHW / OIHW layout (like jax.lax.conv)."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs: Any, rhs: Any, window_strides: Sequence[int], padding: Any,
                              lhs_dilation: Sequence[int] | None, rhs_dilation: Sequence[int] | None,
                              precision: Any = None, preferred_element_type: Any = None) -> Any:
    """A dilated convolution in NCHW / OIHW layout (like jax.lax.conv_with_general_padding)."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                precision=precision, preferred_element_type=preferred_element_type)


def _transpose_pads(k: int, s: int, padding: str) -> tuple[int, int]:
    """The pads of a transposed convolution with a (dilated) kernel of size k and stride s: "SAME" gives an output
    s times the input, "VALID" (in - 1) * s + max(k, s)."""
    if padding == "SAME":
        total = k + s - 2
        low = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        low = k - 1
    else:
        raise ValueError(f"conv_transpose: padding must be 'SAME', 'VALID' or (low, high) pairs, got {padding!r}")
    return low, total - low


_TRANSPOSE_LAYOUTS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"), 4: ("NHWC", "HWIO", "NHWC"),
                      5: ("NHWDC", "HWDIO", "NHWDC")}


def conv_transpose(lhs: Any, rhs: Any, strides: Sequence[int], padding: Any,
                   rhs_dilation: Sequence[int] | None = None, dimension_numbers: Any = None,
                   transpose_kernel: bool = False, precision: Any = None, preferred_element_type: Any = None) -> Any:
    """The transposed ("deconvolution") convolution (like jax.lax.conv_transpose): the input dilated by strides,
    padded per "SAME"/"VALID" or pairs; default layouts NHWC / HWIO; transpose_kernel flips the kernel in space
    and swaps its in and out features (the exact gradient of a strided convolution)."""
    op = "conv_transpose"
    l_aval, r_aval = aval_of(lhs), aval_of(rhs)
    if dimension_numbers is None:
        if l_aval.ndim not in _TRANSPOSE_LAYOUTS:
            raise TypeError(f"{op}: no default layout for rank {l_aval.ndim}; pass dimension_numbers")
        dimension_numbers = _TRANSPOSE_LAYOUTS[l_aval.ndim]
    dnums = conv_dimension_numbers(l_aval.shape, r_aval.shape, dimension_numbers)
    nd = l_aval.ndim - 2
    strides = static_ints(op, "strides", strides)
    rd = (1,) * nd if rhs_dilation is None else static_ints(op, "rhs_dilation", rhs_dilation)
    if isinstance(padding, str):
        kernel = [_dilate(r_aval.shape[d], r) for d, r in zip(dnums.rhs_spec[2:], rd)]
        pads = [_transpose_pads(k, s, padding.upper()) for k, s in zip(kernel, strides)]
    else:
        pads = padding
    if transpose_kernel:
        rhs = rev(rhs, dnums.rhs_spec[2:])
        perm = list(range(r_aval.ndim))
        perm[dnums.rhs_spec[0]], perm[dnums.rhs_spec[1]] = perm[dnums.rhs_spec[1]], perm[dnums.rhs_spec[0]]
        rhs = transpose(rhs, perm)
    return conv_general_dilated(lhs, rhs, (1,) * nd, pads, strides, rd, dnums, precision=precision,
                                preferred_element_type=preferred_element_type)


__all__ = ["ConvDimensionNumbers", "conv", "conv_dimension_numbers", "conv_general_dilated", "conv_transpose",
           "conv_with_general_padding", "padtype_to_pads"]
