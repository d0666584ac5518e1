"""ember.lax: the primitives as strict functions (operands of one dtype and shape; rank-0 operands broadcast),
like jax.lax. Python scalars take the dtype of the array operands."""
from ember._prims.elementwise import (abs, add, atan2, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, ceil,
                                      convert_element_type, cos, div, eq, exp, expm1, floor, ge, gt, integer_pow,
                                      is_finite, le, log, log1p, logistic, lt, max, min, mul, ne, neg, pow, rem,
                                      round, rsqrt, select, sign, sin, sqrt, square, stop_gradient, sub, tanh)
from ember._prims.structural import (broadcast, broadcast_in_dim, broadcasted_iota, concatenate, dot, dot_general,
                                     full, full_like, iota, pad, reduce_max, reduce_min, reduce_sum, reshape, slice,
                                     slice_in_dim, transpose, zeros_like)

__all__ = [
    "abs", "add", "atan2", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "ceil", "convert_element_type",
    "cos", "div", "eq", "exp", "expm1", "floor", "ge", "gt", "integer_pow", "is_finite", "le", "log", "log1p",
    "logistic", "lt", "max", "min", "mul", "ne", "neg", "pow", "rem", "round", "rsqrt", "select", "sign", "sin",
    "sqrt", "square", "stop_gradient", "sub", "tanh", "broadcast", "broadcast_in_dim", "broadcasted_iota",
    "concatenate", "dot", "dot_general", "full", "full_like", "iota", "pad", "reduce_max", "reduce_min",
    "reduce_sum", "reshape", "slice", "slice_in_dim", "transpose", "zeros_like",
]
