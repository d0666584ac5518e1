"""Special functions: erf, erfc, erf_inv, lgamma, digamma and polygamma, each lowered to its CHLO op (XLA's own
approximations, the ones jax.lax uses, so results agree bit for bit) with its derivative beside it.
ember.random draws normals through erf_inv and gammas through lgamma and digamma."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ember._core import dtypes as dt
from ember._hlo import LoweringContext
from ember._prims.checks import FLOAT
from ember._prims.elementwise import _bind_binary, _bind_unary, add, emit_log1p, exp, mul, neg
from ember._prims.families import binary, unary

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


def _erf_inv_lowering(ctx: LoweringContext, x: str) -> list[str]:
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


erf_p = unary("erf", "chlo.erf", FLOAT, _erf_derivative)
erfc_p = unary("erfc", "chlo.erfc", FLOAT, lambda g, x, y: neg(_erf_derivative(g, x, y)))
erf_inv_p = unary("erf_inv", None, FLOAT, lambda g, x, y: mul(g, mul(_SQRT_PI_OVER_TWO, exp(mul(y, y)))),
                  lowering=_erf_inv_lowering)
lgamma_p = unary("lgamma", "chlo.lgamma", FLOAT, lambda g, x, y: mul(g, digamma(x)))
digamma_p = unary("digamma", "chlo.digamma", FLOAT, lambda g, x, y: mul(g, polygamma(1.0, x)))
# polygamma(m, x): the m-th derivative of digamma; m is a (float) order, differentiable in x only.
polygamma_p = binary("polygamma", "chlo.polygamma", FLOAT,
                     (_polygamma_dm, lambda g, m, x, out: mul(g, polygamma(add(m, 1.0), x))))

erf, erfc, erf_inv, lgamma, digamma = map(_bind_unary, (erf_p, erfc_p, erf_inv_p, lgamma_p, digamma_p))
polygamma = _bind_binary(polygamma_p)
