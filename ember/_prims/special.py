"""Special functions: erf, erfc, erf_inv, lgamma, digamma and polygamma, each lowered to its CHLO op (XLA's own
approximations, the ones jax.lax uses, so results agree bit for bit) with its derivative beside it.
ember.random draws normals through erf_inv and gammas through lgamma and digamma."""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from ember._core import Primitive, ShapedArray, aval_of, is_python_scalar
from ember._core import dtypes as dt
from ember._core import NAN_CHECK
from ember._hlo import LoweringContext
from ember._hlo.lower import emit_function
from ember._prims.checks import FLOAT, all_weak, check_dtype, check_same_dtypes, coerce_scalars, elementwise_shape
from ember._prims.elementwise import (_bind_binary, _bind_unary, abs, add, bitwise_and, bitwise_not, bitwise_or,
                                      div, emit_log1p, eq, exp, floor, gt, kernel_or, log, log1p, lt, mul, ne, neg,
                                      select, sign, sqrt, sub)
from ember._prims.families import binary, elementwise_batching, hlo_lowering, unary, unbroadcast
from ember._prims.reduction import reduce_max
from ember._prims.shape import broadcast_in_dim, convert_element_type, full_like
from ember._prims import explicit

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_TWO = math.sqrt(math.pi) / 2.0


def _erf_derivative(g: Any, x: Any, out: Any) -> Any:
    return mul(g, mul(_TWO_OVER_SQRT_PI, exp(neg(mul(x, x)))))


def _polygamma_dm(g: Any, m: Any, x: Any, out: Any) -> Any:
    raise TypeError("polygamma: not differentiable with respect to its order m (as in JAX); "
                    "wrap m in lax.stop_gradient")


# erf_inv in float32: Giles' single-precision approximation ("Approximating the erfinv function", 2010), the
# polynomial XLA expands chlo.erf_inv into, emitted here so that its log1p is the one ember lowers (equal to
# jaxlib's; the plugin's own expansion differs by an ulp or two in 0.5% of normals). Coefficients, highest order
# first, for w = -log1p(-x^2) < 5 (in w - 2.5) and otherwise (in sqrt(w) - 3).
_ERF_INV_F32 = (
    (2.81022636e-08, -0.000200214257), (3.43273939e-07, 0.000100950558), (-3.5233877e-06, 0.00134934322),
    (-4.39150654e-06, -0.00367342844), (0.00021858087, 0.00573950773), (-0.00125372503, -0.0076224613),
    (-0.00417768164, 0.00943887047), (0.246640727, 1.00167406), (1.50140941, 2.83297682),
)


def _erf_inv_xla(ctx: LoweringContext, x: str) -> list[str]:
    aval = ctx.avals_in[0]
    if aval.dtype != dt.float32:
        return [ctx.op("chlo.erf_inv", [x], ctx.aval_out)]
    boolean = aval.update(dtype=dt.bool_, weak_type=False)

    def op(name: str, *args: str) -> str:
        return ctx.op(f"stablehlo.{name}", list(args), aval)

    def compare(a: str, b: str, direction: str) -> str:
        return ctx.op("stablehlo.compare", [a, b], boolean,
                      {"comparison_direction": f"#stablehlo<comparison_direction {direction}>",
                       "compare_type": "#stablehlo<comparison_type FLOAT>"})

    def const(value: float) -> str:
        return ctx.constant(float(np.float32(value)), aval)

    w = op("negate", emit_log1p(ctx, op("multiply", x, op("negate", x)), aval))
    central = compare(w, const(5.0), "LT")
    t = op("select", central, op("subtract", w, const(2.5)), op("subtract", op("sqrt", w), const(3.0)))
    p = None
    for near, far in _ERF_INV_F32:
        c = op("select", central, const(near), const(far))
        p = c if p is None else op("add", c, op("multiply", p, t))
    result = op("multiply", p, x)
    at_one = compare(op("abs", x), const(1.0), "EQ")
    return [op("select", at_one, op("multiply", x, const(np.inf)), result)]


erf_p = unary("erf", "chlo.erf", FLOAT, _erf_derivative, lowering=kernel_or("erf", hlo_lowering("chlo.erf")),
              checks=NAN_CHECK)
erfc_p = unary("erfc", "chlo.erfc", FLOAT, lambda g, x, y: neg(_erf_derivative(g, x, y)), checks=NAN_CHECK)
erf_inv_p = unary("erf_inv", None, FLOAT, lambda g, x, y: mul(g, mul(_SQRT_PI_OVER_TWO, exp(mul(y, y)))),
                  lowering=kernel_or("erf_inv", _erf_inv_xla), checks=NAN_CHECK)
lgamma_p = unary("lgamma", "chlo.lgamma", FLOAT, lambda g, x, y: mul(g, digamma(x)), checks=NAN_CHECK)
digamma_p = unary("digamma", "chlo.digamma", FLOAT, lambda g, x, y: mul(g, polygamma(1.0, x)), checks=NAN_CHECK)
# polygamma(m, x): the m-th derivative of digamma; m is a (float) order, differentiable in x only.
polygamma_p = binary("polygamma", "chlo.polygamma", FLOAT,
                     (_polygamma_dm, lambda g, m, x, out: mul(g, polygamma(add(m, 1.0), x))), checks=NAN_CHECK)

erf, erfc, erf_inv, lgamma, digamma = map(_bind_unary, (erf_p, erfc_p, erf_inv_p, lgamma_p, digamma_p))
polygamma = _bind_binary(polygamma_p)



# ---------------------------------------------------------------------------------------------------------------
# Lowering through ember functions: special functions without a CHLO op (bessel_i0e, the incomplete gamma and beta
# functions) are written with ember's primitives, staged at the operands' avals and emitted inline, their
# iterations as stablehlo.while loops whose condition and body are staged functions too.
def emit_while(ctx: LoweringContext, cond: Callable[..., Any], body: Callable[..., Sequence[Any]],
               init: Sequence[str], avals: Sequence[ShapedArray]) -> list[str]:
    """A stablehlo.while loop over the carried values init (of avals): cond(*carry) -> a boolean scalar,
    body(*carry) -> the next carry."""
    cond_region = ctx.region(avals, lambda em, args: emit_function(em, lambda *c: [cond(*c)], avals, args)[0])
    body_region = ctx.region(avals, lambda em, args: emit_function(em, body, avals, args)[0])
    return ctx.op("stablehlo.while", list(init), list(avals), None, [cond_region, body_region])


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """float16 and bfloat16 are computed in float32."""
    return dtype if dtype.itemsize >= 4 else np.dtype(np.float32)


def _function_lowering(fn: Callable[..., Any]) -> Callable[..., list[str]]:
    """A lowering computing fn(*operands) (ember code on float arrays of the output's shape, in float32 at least)."""
    def rule(ctx: LoweringContext, *operands: str) -> list[str]:
        out = ctx.aval_out
        compute = out.update(dtype=_compute_dtype(out.dtype), weak_type=False)
        args = [ctx.broadcast(o, a, out.shape) for o, a in zip(operands, ctx.avals_in)]
        if compute.dtype != out.dtype:
            args = [ctx.op("stablehlo.convert", [a], compute) for a in args]
        result = fn(ctx, compute, *args)
        return [result if compute.dtype == out.dtype else ctx.op("stablehlo.convert", [result], out)]
    return rule


def _inline(fn: Callable[..., Any]) -> Callable[..., str]:
    """fn(*arrays) -> one array, as a _function_lowering body."""
    def body(ctx: LoweringContext, aval: ShapedArray, *args: str) -> str:
        return emit_function(ctx.emitter, lambda *xs: [fn(*xs)], [aval] * len(args), args)[0][0]
    return body


def _any(mask: Any) -> Any:
    return reduce_max(mask, tuple(range(aval_of(mask).ndim)))


def _eps(x: Any) -> float:
    return float(dt.finfo(aval_of(x).dtype).eps)


def _nan_where(bad: Any, value: Any) -> Any:
    return select(bad, full_like(value, np.nan), value)


# ---------------------------------------------------------------------------------------------------------------
# An elementwise special function of several float operands of one dtype (rank-0 operands broadcast), its
# derivative one partial per operand: partial(g, *operands, out) -> that partial derivative applied to g.
def _special_op(name: str, lowering: Callable[..., list[str]], partials: Sequence[Callable[..., Any]], *,
                checks: Sequence[str]) -> Primitive:
    prim = Primitive(name, checks=checks)
    prim.def_rule("sharding_rule", explicit.broadcasting(name))

    @prim.def_rule("abstract_eval")
    def abstract_eval(*avals: ShapedArray) -> ShapedArray:
        check_same_dtypes(name, avals)
        check_dtype(name, avals[0], FLOAT, "operands")
        return ShapedArray(elementwise_shape(name, avals), avals[0].dtype, all_weak(avals))

    prim.def_rule("lowering", lowering)

    @prim.def_rule("jvp")
    def jvp(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        out = prim.bind(*primals)
        shape = aval_of(out).shape
        parts = [partial(t, *primals, out) for partial, t in zip(partials, tangents) if t is not None]
        if not parts:
            return [out], [None]
        parts = [p if aval_of(p).shape == shape else broadcast_in_dim(p, shape, ()) for p in parts]
        total = parts[0]
        for p in parts[1:]:
            total = add(total, p)
        return [out], [total]

    @prim.def_rule("vjp")
    def vjp(cts: list[Any], ins: list[Any], outs: list[Any], needs: list[bool]) -> list[Any]:
        return [unbroadcast(partial(cts[0], *ins, outs[0]), aval_of(x)) if need else None
                for partial, x, need in zip(partials, ins, needs)]

    prim.def_rule("batching", elementwise_batching(prim))
    return prim


def _refuse(op: str, arg: str) -> Callable[..., Any]:
    def partial(*args: Any) -> Any:
        raise TypeError(f"{op}: not differentiable with respect to {arg} (as in JAX); wrap {arg} in "
                        "lax.stop_gradient")
    return partial


def _bind_special(prim: Primitive, names: str) -> Callable[..., Any]:
    def fn(*args: Any) -> Any:
        if any(is_python_scalar(a) for a in args):
            args = tuple(coerce_scalars(args))
        return prim.bind(*args)
    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = f"Elementwise {prim.name}({names}) of float operands of one dtype (the `{prim.name}` primitive)."
    return fn


# ---------------------------------------------------------------------------------------------------------------
# Exponentially scaled modified Bessel functions: bessel_i1e is CHLO's; bessel_i0e is a Chebyshev expansion,
# its coefficients fitted for ember (to 40-digit values of exp(-|x|) I0(|x|)): in t = |x|/4 - 1 on |x| <= 8,
# and of sqrt(|x|) i0e(|x|) in t = 16/|x| - 1 beyond.
_I0E_NEAR = (
    0.33839763720473803, -0.3046826723431984, 0.17162090152220877, -0.09490109704804764, 0.04930528423967071,
    -0.02373741480589947, 0.010546460394594998, -0.004324309995050576, 0.0016394756169413357,
    -0.0005763755745385824, 0.00018850288509584165, -5.754195010082104e-05, 1.6448448070728896e-05,
    -4.4167383584587505e-06, 1.1173875391201037e-06, -2.670793853940612e-07, 6.046995022541919e-08,
    -1.300025009986248e-08, 2.6598237246823866e-09, -5.189795601635263e-10, 9.675809035373237e-11,
    -1.726826291441556e-11, 2.95505266312964e-12, -4.856446783111929e-13, 7.676185498604936e-14,
    -1.1685332877993451e-14, 1.715391285555133e-15, -2.431279846547955e-16, 3.3307945188222384e-17,
    -4.4153416464793395e-18)
_I0E_FAR = (
    0.4022452055070544, 0.0033691164782556943, 6.889758346916825e-05, 2.8913705208347567e-06,
    2.0489185894690638e-07, 2.266668990498178e-08, 3.3962320257083865e-09, 4.94060238822497e-10,
    1.1889147107846439e-11, -3.1499165279632416e-11, -1.3215811840447713e-11, -1.7941785315068062e-12,
    7.180124451383666e-13, 3.8527783827421426e-13, 1.54008621752141e-14, -4.150569347287222e-14,
    -9.554846698828307e-15, 3.8116806693526224e-15, 1.7725601330565263e-15, -3.425485619677219e-16,
    -2.8276239805165836e-16, 3.461222867697461e-17, 4.46562142029676e-17, -4.830504485944182e-18,
    -7.233180487874754e-18, 9.921475412173699e-19, 1.193650890845982e-18)


def _chebyshev(coefficients: Sequence[float], t: Any) -> Any:
    """sum_k c_k T_k(t) by Clenshaw's recurrence."""
    b1 = b2 = full_like(t, 0.0)
    two_t = mul(t, 2.0)
    for c in reversed(coefficients[1:]):
        b1, b2 = add(sub(mul(two_t, b1), b2), c), b1
    return add(sub(mul(t, b1), b2), coefficients[0])


def _bessel_i0e_impl(x: Any) -> Any:
    ax = abs(x)
    near = lt(ax, 8.0)
    safe_far = select(near, full_like(ax, 8.0), ax)
    far = div(_chebyshev(_I0E_FAR, sub(div(16.0, safe_far), 1.0)), sqrt(safe_far))
    return select(near, _chebyshev(_I0E_NEAR, sub(div(ax, 4.0), 1.0)), far)


def _bessel_i1e_derivative(g: Any, x: Any, y: Any) -> Any:
    """i1e'(x) = i0e(x) - (sign(x) + 1/x) i1e(x), which is 1/2 at 0."""
    eps = _eps(x)
    tiny = lt(abs(x), eps)
    safe_x = select(tiny, full_like(x, eps), x)
    slope = sub(bessel_i0e(safe_x), mul(y, add(sign(safe_x), div(1.0, safe_x))))
    return mul(g, select(tiny, full_like(x, 0.5), slope))


bessel_i0e_p = unary("bessel_i0e", None, FLOAT, lambda g, x, y: mul(g, sub(bessel_i1e(x), mul(sign(x), y))),
                     lowering=_function_lowering(_inline(_bessel_i0e_impl)), checks=NAN_CHECK)
bessel_i1e_p = unary("bessel_i1e", "chlo.bessel_i1e", FLOAT, _bessel_i1e_derivative, checks=NAN_CHECK)
bessel_i0e, bessel_i1e = map(_bind_unary, (bessel_i0e_p, bessel_i1e_p))


# ---------------------------------------------------------------------------------------------------------------
# zeta(x, q): the Hurwitz zeta function sum_k (q + k)^-x (CHLO's); differentiable in q only, as in JAX.
zeta_p = _special_op("zeta", lambda ctx, x, q: [ctx.op("chlo.zeta", [ctx.broadcast(o, a, ctx.aval_out.shape)
                                                                     for o, a in zip((x, q), ctx.avals_in)],
                                                       ctx.aval_out)],
                     (_refuse("zeta", "x"), lambda g, x, q, out: mul(g, neg(mul(x, zeta(add(x, 1.0), q))))),
                     checks=NAN_CHECK)
zeta = _bind_special(zeta_p, "x, q")


# ---------------------------------------------------------------------------------------------------------------
# The regularized incomplete gamma functions igamma(a, x) = P(a, x) = gamma(a, x) / Gamma(a) and
# igammac(a, x) = Q(a, x) = 1 - P(a, x), with igamma_grad_a(a, x) = dP/da and random_gamma_grad(a, x), the
# derivative of a Gamma(a) sample x with respect to a at fixed P (implicit reparameterization: -(dP/da)/(dP/dx)).
# P comes from its power series where x <= max(1, a), Q from its continued fraction elsewhere (Cephes' split);
# both loops carry the derivative of their sum with respect to a, which gives dP/da in the same pass.
_MAX_ITERATIONS = 2000
_BIG = 4503599627370496.0  # 2**52: the continued fraction's terms are rescaled when they grow past it


def _series_start(a: Any, x: Any, active: Any) -> list[Any]:
    one, zero = full_like(a, 1.0), full_like(a, 0.0)
    return [active, a, one, one, zero, zero, _scalar_zero_int(a)]


def _scalar_zero_int(a: Any) -> Any:
    """The loop counter's start: an int32 zero scalar."""
    return convert_element_type(reduce_max(full_like(a, 0.0), tuple(range(aval_of(a).ndim))), np.int32)


def _series_step(a: Any, x: Any, enabled: Any, r: Any, c: Any, ans: Any, dc: Any, dans: Any, count: Any
                 ) -> list[Any]:
    """One term more of sum_n x^n / ((a+1)...(a+n)) (ans) and of its derivative in a (dans)."""
    r2 = add(r, 1.0)
    dc2 = sub(mul(dc, div(x, r2)), mul(c, div(x, mul(r2, r2))))
    c2 = mul(c, div(x, r2))
    ans2, dans2 = add(ans, c2), add(dans, dc2)
    eps = _eps(a)
    going = bitwise_and(enabled, bitwise_or(gt(div(c2, ans2), eps), gt(abs(dc2), mul(abs(dans2), eps))))
    keep = [select(enabled, new, old) for new, old in ((r2, r), (c2, c), (ans2, ans), (dc2, dc), (dans2, dans))]
    return [going] + keep + [add(count, 1)]


def _cf_start(a: Any, x: Any, active: Any) -> list[Any]:
    y = sub(1.0, a)
    z = add(add(x, y), 1.0)
    c = full_like(a, 0.0)
    pkm2, qkm2, pkm1, qkm1 = full_like(a, 1.0), x, add(x, 1.0), mul(z, x)
    dpkm2, dqkm2, dpkm1, dqkm1 = c, c, c, neg(x)
    ans = div(pkm1, qkm1)
    dans = div(sub(dpkm1, mul(ans, dqkm1)), qkm1)
    return [active, y, z, c, ans, dans, pkm2, qkm2, pkm1, qkm1, dpkm2, dqkm2, dpkm1, dqkm1, _scalar_zero_int(a)]


def _cf_step(a: Any, x: Any, enabled: Any, y: Any, z: Any, c: Any, ans: Any, dans: Any, pkm2: Any, qkm2: Any,
             pkm1: Any, qkm1: Any, dpkm2: Any, dqkm2: Any, dpkm1: Any, dqkm1: Any, count: Any) -> list[Any]:
    """One step of Q's continued fraction (the Cephes recurrence), with the derivatives in a of its numerators and
    denominators (y and z decrease by one with a unit increase of a; y*c by c)."""
    c2, y2, z2 = add(c, 1.0), add(y, 1.0), add(z, 2.0)
    yc = mul(y2, c2)
    pk = sub(mul(pkm1, z2), mul(pkm2, yc))
    qk = sub(mul(qkm1, z2), mul(qkm2, yc))
    dpk = add(sub(sub(mul(dpkm1, z2), pkm1), mul(dpkm2, yc)), mul(pkm2, c2))
    dqk = add(sub(sub(mul(dqkm1, z2), qkm1), mul(dqkm2, yc)), mul(qkm2, c2))
    nonzero = ne(qk, 0.0)
    safe_qk = select(nonzero, qk, full_like(qk, 1.0))
    r = div(pk, safe_qk)
    ans2 = select(nonzero, r, ans)
    dans2 = select(nonzero, div(sub(dpk, mul(r, dqk)), safe_qk), dans)
    t = select(nonzero, abs(div(sub(ans, r), r)), full_like(r, 1.0))
    big = gt(abs(pk), _BIG)

    def rescale(v: Any) -> Any:
        return select(big, mul(v, 1.0 / _BIG), v)
    new = [rescale(v) for v in (pkm1, qkm1, pk, qk, dpkm1, dqkm1, dpk, dqk)]
    eps = _eps(a)
    going = bitwise_and(enabled, bitwise_or(gt(t, eps), gt(abs(sub(dans2, dans)), mul(abs(dans2), eps))))
    old = (y, z, c, ans, dans, pkm2, qkm2, pkm1, qkm1, dpkm2, dqkm2, dpkm1, dqkm1)
    nxt = (y2, z2, c2, ans2, dans2) + tuple(new)
    return [going] + [select(enabled, n, o) for n, o in zip(nxt, old)] + [add(count, 1)]


def _loop(ctx: LoweringContext, aval: ShapedArray, a: str, x: str, start: Callable[..., list[Any]],
          step: Callable[..., list[Any]], active: Callable[[Any, Any], Any]) -> tuple[list[str], list[ShapedArray]]:
    """Run step from start(a, x, active(a, x)) while any element is enabled (at most _MAX_ITERATIONS times);
    returns the final carry (without a and x) and its avals."""
    init, avals = emit_function(ctx.emitter, lambda a, x: start(a, x, active(a, x)), [aval, aval], [a, x])
    carry_avals = [aval, aval] + avals
    outs = emit_while(ctx, lambda a, x, enabled, *rest: bitwise_and(_any(enabled), lt(rest[-1], _MAX_ITERATIONS)),
                      lambda a, x, *carry: [a, x] + step(a, x, *carry), [a, x] + init, carry_avals)
    return outs[2:], avals


def _use_cf(a: Any, x: Any) -> Any:
    return bitwise_and(gt(x, 1.0), gt(x, a))


def _invalid(a: Any, x: Any) -> Any:
    """Arguments where P is undefined: a <= 0, x < 0 or a NaN (as scipy: NaN there)."""
    return bitwise_or(bitwise_or(bitwise_not(gt(a, 0.0)), lt(x, 0.0)), ne(x, x))


def _finite_positive(a: Any, x: Any) -> Any:
    return bitwise_and(bitwise_not(_invalid(a, x)), bitwise_and(gt(x, 0.0), lt(x, np.inf)))


def _igamma_lowering(kind: str) -> Callable[..., list[str]]:
    def body(ctx: LoweringContext, aval: ShapedArray, a: str, x: str) -> str:
        series, s_avals = _loop(ctx, aval, a, x, _series_start, _series_step,
                                lambda a, x: bitwise_and(_finite_positive(a, x), bitwise_not(_use_cf(a, x))))
        cf, c_avals = _loop(ctx, aval, a, x, _cf_start, _cf_step,
                            lambda a, x: bitwise_and(_finite_positive(a, x), _use_cf(a, x)))
        n = len(s_avals)
        return emit_function(ctx.emitter, lambda a, x, *carry: [_igamma_finish(kind, a, x, carry[:n], carry[n:])],
                             [aval, aval] + s_avals + c_avals, [a, x] + series + cf)[0][0]
    return _function_lowering(body)


def _igamma_finish(kind: str, a: Any, x: Any, series: Sequence[Any], cf: Sequence[Any]) -> Any:
    _, _, _, s_ans, _, s_dans, _ = series
    c_ans, c_dans = cf[4], cf[5]
    use_cf = _use_cf(a, x)
    safe_x = select(gt(x, 0.0), x, full_like(x, 1.0))
    log_x = log(safe_x)
    log_ax = sub(sub(mul(a, log_x), safe_x), lgamma(a))
    ax = exp(log_ax)
    psi = digamma(a)
    zero, one = full_like(x, 0.0), full_like(x, 1.0)
    # where x^a e^-x / Gamma(a) underflows the loops may have overflowed (float32, x ~ 1e30): their terms vanish
    underflow = eq(ax, 0.0)

    def scaled(v: Any) -> Any:
        return select(underflow, zero, mul(v, ax))
    p_series = div(scaled(s_ans), a)
    q_cf = scaled(c_ans)
    series_da = add(s_dans, mul(s_ans, sub(sub(log_x, psi), div(1.0, a))))  # (dP/da) * a / ax
    cf_da = add(c_dans, mul(c_ans, sub(log_x, psi)))                         # (dQ/da) / ax
    at_zero, at_inf = eq(x, 0.0), eq(x, np.inf)
    if kind == "igamma":
        value = select(use_cf, sub(1.0, q_cf), p_series)
        value = select(at_zero, zero, select(at_inf, one, value))
    elif kind == "igammac":
        value = select(use_cf, q_cf, sub(1.0, p_series))
        value = select(at_zero, one, select(at_inf, zero, value))
    elif kind == "igamma_grad_a":
        value = select(use_cf, neg(scaled(cf_da)), div(scaled(series_da), a))
        value = select(bitwise_or(at_zero, at_inf), zero, value)
    else:  # random_gamma_grad: -(dP/da) / (dP/dx), dP/dx = ax / x
        value = select(use_cf, mul(x, cf_da), neg(div(mul(x, series_da), a)))
        value = select(at_zero, zero, value)
    value = _nan_where(_invalid(a, x), value)
    if kind in ("igamma", "igammac"):  # a == 0: the distribution is a point mass at 0, so P = 1 for x > 0 (as JAX)
        value = select(bitwise_and(eq(a, 0.0), gt(x, 0.0)), one if kind == "igamma" else zero, value)
    return value


def _igamma_dx(g: Any, a: Any, x: Any, out: Any) -> Any:
    """dP/dx = x^(a-1) exp(-x) / Gamma(a)."""
    return mul(g, exp(sub(sub(mul(sub(a, 1.0), log(x)), x), lgamma(a))))


def _igamma_grad_a_dx(g: Any, a: Any, x: Any, out: Any) -> Any:
    """d/dx dP/da = d/da dP/dx = dP/dx (log x - digamma(a))."""
    return mul(_igamma_dx(g, a, x, out), sub(log(x), digamma(a)))


def _random_gamma_grad_dx(g: Any, a: Any, x: Any, out: Any) -> Any:
    """With r = -P_a / P_x: dr/dx = -P_ax / P_x + P_a P_xx / P_x^2 = -(log x - digamma(a)) - r ((a - 1)/x - 1)."""
    return mul(g, neg(add(sub(log(x), digamma(a)), mul(out, sub(div(sub(a, 1.0), x), 1.0)))))


igamma_p = _special_op("igamma", _igamma_lowering("igamma"),
                       (lambda g, a, x, out: mul(g, igamma_grad_a(a, x)), _igamma_dx), checks=NAN_CHECK)
igammac_p = _special_op("igammac", _igamma_lowering("igammac"),
                        (lambda g, a, x, out: neg(mul(g, igamma_grad_a(a, x))),
                         lambda g, a, x, out: neg(_igamma_dx(g, a, x, out))), checks=NAN_CHECK)
igamma_grad_a_p = _special_op("igamma_grad_a", _igamma_lowering("igamma_grad_a"),
                              (_refuse("igamma_grad_a", "a"), _igamma_grad_a_dx), checks=NAN_CHECK)
random_gamma_grad_p = _special_op("random_gamma_grad", _igamma_lowering("random_gamma_grad"),
                                  (_refuse("random_gamma_grad", "a"), _random_gamma_grad_dx), checks=())
igamma = _bind_special(igamma_p, "a, x")
igammac = _bind_special(igammac_p, "a, x")
igamma_grad_a = _bind_special(igamma_grad_a_p, "a, x")
random_gamma_grad = _bind_special(random_gamma_grad_p, "a, x")


# ---------------------------------------------------------------------------------------------------------------
# betainc(a, b, x): the regularized incomplete beta function I_x(a, b), from its continued fraction (evaluated by
# Lentz's method) at x < (a + 1) / (a + b + 2), and through I_x(a, b) = 1 - I_{1-x}(b, a) beyond.
# Differentiable in x only, as in JAX.
_TINY = 1e-30


def _betainc_start(a: Any, b: Any, x: Any, active: Any) -> list[Any]:
    one = full_like(x, 1.0)
    return [active, one, one, full_like(x, 0.0), full_like(x, 0.0), _scalar_zero_int(x)]


def _betainc_step(a: Any, b: Any, x: Any, enabled: Any, f: Any, c: Any, d: Any, i: Any, count: Any) -> list[Any]:
    """Terms i = 0, 1, 2, ... of the fraction 1/(1 + d1/(1 + d2/(1 + ...))): d_{2m+1} = -(a+m)(a+b+m)x /
    ((a+2m)(a+2m+1)), d_{2m} = m(b-m)x / ((a+2m-1)(a+2m)), d_0 = 1."""
    m = mul(sub(i, _rem2(i)), 0.5)
    odd = eq(_rem2(i), 1.0)
    two_m = mul(m, 2.0)
    odd_term = neg(div(mul(mul(add(a, m), add(add(a, b), m)), x), mul(add(a, two_m), add(add(a, two_m), 1.0))))
    even_term = div(mul(mul(m, sub(b, m)), x), mul(sub(add(a, two_m), 1.0), add(a, two_m)))
    numerator = select(eq(i, 0.0), full_like(x, 1.0), select(odd, odd_term, even_term))

    def floor_tiny(v: Any) -> Any:
        return select(lt(abs(v), _TINY), full_like(v, _TINY), v)
    d2 = div(1.0, floor_tiny(add(1.0, mul(numerator, d))))
    c2 = floor_tiny(add(1.0, div(numerator, c)))
    cd = mul(c2, d2)
    f2 = mul(f, cd)
    going = bitwise_and(enabled, bitwise_or(eq(i, 0.0), gt(abs(sub(1.0, cd)), _eps(x))))
    return [going] + [select(enabled, n, o) for n, o in ((f2, f), (c2, c), (d2, d), (add(i, 1.0), i))] + \
        [add(count, 1)]


def _rem2(i: Any) -> Any:
    return sub(i, mul(floor(mul(i, 0.5)), 2.0))


def _betainc_swap(a: Any, b: Any, x: Any) -> Any:
    return gt(x, div(add(a, 1.0), add(add(a, b), 2.0)))


def _betainc_invalid(a: Any, b: Any, x: Any) -> Any:
    outside = bitwise_or(lt(x, 0.0), gt(x, 1.0))
    return bitwise_or(bitwise_or(bitwise_not(gt(a, 0.0)), bitwise_not(gt(b, 0.0))),
                      bitwise_or(outside, ne(x, x)))


def _betainc_args(a: Any, b: Any, x: Any) -> tuple[Any, Any, Any]:
    swap = _betainc_swap(a, b, x)
    return select(swap, b, a), select(swap, a, b), select(swap, sub(1.0, x), x)


def _betainc_body(ctx: LoweringContext, aval: ShapedArray, a: str, b: str, x: str) -> str:
    def start(a: Any, b: Any, x: Any) -> list[Any]:
        valid = bitwise_and(bitwise_not(_betainc_invalid(a, b, x)), bitwise_and(gt(x, 0.0), lt(x, 1.0)))
        return _betainc_start(*_betainc_args(a, b, x), valid)
    init, avals = emit_function(ctx.emitter, start, [aval] * 3, [a, b, x])
    carry_avals = [aval] * 3 + avals
    outs = emit_while(ctx, lambda a, b, x, enabled, *rest: bitwise_and(_any(enabled), lt(rest[-1], 300)),
                      lambda a, b, x, *carry: [a, b, x] + _betainc_step(*_betainc_args(a, b, x), *carry),
                      [a, b, x] + init, carry_avals)
    return emit_function(ctx.emitter, _betainc_finish, carry_avals, outs)[0][0]


def _log_beta(a: Any, b: Any) -> Any:
    return sub(add(lgamma(a), lgamma(b)), lgamma(add(a, b)))


def _betainc_finish(a: Any, b: Any, x: Any, enabled: Any, f: Any, *rest: Any) -> list[Any]:
    swap = _betainc_swap(a, b, x)
    aa, bb, xx = _betainc_args(a, b, x)
    safe = bitwise_and(gt(xx, 0.0), lt(xx, 1.0))
    xs = select(safe, xx, full_like(xx, 0.5))
    front = div(exp(sub(add(mul(aa, log(xs)), mul(bb, log1p(neg(xs)))), _log_beta(aa, bb))), aa)
    value = mul(front, sub(f, 1.0))
    value = select(swap, sub(1.0, value), value)
    value = select(eq(x, 0.0), full_like(x, 0.0), select(eq(x, 1.0), full_like(x, 1.0), value))
    value = _nan_where(_betainc_invalid(a, b, x), value)
    # the limits where all the mass sits at one end (as JAX and SciPy): at 0 for a == 0 or b == inf (a point mass:
    # I = 1 for x > 0), at 1 for b == 0 or a == inf (I = 0 for x < 1); a == b == 0, and a == b == inf inside (0, 1),
    # stay NaN
    inside = bitwise_and(bitwise_not(lt(x, 0.0)), bitwise_not(gt(x, 1.0)))
    inside = bitwise_and(inside, eq(x, x))
    finite_b = bitwise_and(gt(b, 0.0), lt(b, np.inf))
    finite_a = bitwise_and(gt(a, 0.0), lt(a, np.inf))
    at_zero = bitwise_and(bitwise_or(bitwise_and(eq(a, 0.0), gt(b, 0.0)), bitwise_and(eq(b, np.inf), finite_a)),
                          inside)
    at_one = bitwise_and(bitwise_or(bitwise_and(eq(b, 0.0), gt(a, 0.0)), bitwise_and(eq(a, np.inf), finite_b)),
                         inside)
    value = select(at_zero, select(gt(x, 0.0), full_like(x, 1.0), full_like(x, 0.0)), value)
    value = select(at_one, select(lt(x, 1.0), full_like(x, 0.0), full_like(x, 1.0)), value)
    return [value]


def _betainc_dx(g: Any, a: Any, b: Any, x: Any, out: Any) -> Any:
    """dI/dx = x^(a-1) (1-x)^(b-1) / B(a, b)."""
    return mul(g, exp(sub(add(mul(sub(a, 1.0), log(x)), mul(sub(b, 1.0), log1p(neg(x)))), _log_beta(a, b))))


regularized_incomplete_beta_p = _special_op("regularized_incomplete_beta", _function_lowering(_betainc_body),
                                            (_refuse("betainc", "a"), _refuse("betainc", "b"), _betainc_dx),
                                            checks=NAN_CHECK)
betainc = _bind_special(regularized_incomplete_beta_p, "a, b, x")


__all__ = ["bessel_i0e", "bessel_i1e", "betainc", "digamma", "erf", "erf_inv", "erfc", "igamma", "igamma_grad_a",
           "igammac", "lgamma", "polygamma", "random_gamma_grad", "zeta"]
