"""Layer 3, prims: the first-order primitives, each defined with all its rules beside it. Importing this package
registers them all. Modules import one way: checks <- shape <- families <- elementwise <- slicing, reduction, dot
(<- indexing, sorting, conv, windowed, special, bits <- lax_helpers, jax.lax's compositions of primitives).
The public functions (the strict, jax.lax-like API) are re-exported here and by ember.lax."""
from ember._prims.dot import dot as dot, dot_general as dot_general
from ember._prims.elementwise import (abs as abs, add as add, atan2 as atan2, bitwise_and as bitwise_and,
                                      bitwise_not as bitwise_not, bitwise_or as bitwise_or, bitwise_xor as bitwise_xor,
                                      ceil as ceil, cos as cos, div as div, eq as eq, exp as exp, expm1 as expm1,
                                      floor as floor, ge as ge, gt as gt, integer_pow as integer_pow,
                                      is_finite as is_finite, le as le, log as log, log1p as log1p,
                                      logistic as logistic, lt as lt, max as max, min as min, mul as mul, ne as ne,
                                      neg as neg, pow as pow, rem as rem, round as round, rsqrt as rsqrt,
                                      select as select, sign as sign, sin as sin, sqrt as sqrt, square as square,
                                      stop_gradient as stop_gradient, sub as sub, tan as tan, tanh as tanh, clz as clz,
                                      population_count as population_count, shift_left as shift_left,
                                      shift_right_logical as shift_right_logical,
                                      shift_right_arithmetic as shift_right_arithmetic, nextafter as nextafter,
                                      acos as acos, asin as asin, atan as atan, sinh as sinh, cosh as cosh,
                                      asinh as asinh, acosh as acosh, atanh as atanh, cbrt as cbrt, exp2 as exp2,
                                      mulhi as mulhi, reciprocal as reciprocal, reduce_precision as reduce_precision)
from ember._prims.indexing import (GatherDimensionNumbers as GatherDimensionNumbers,
                                   GatherScatterMode as GatherScatterMode,
                                   ScatterDimensionNumbers as ScatterDimensionNumbers, clamp as clamp,
                                   dynamic_index_in_dim as dynamic_index_in_dim, dynamic_slice as dynamic_slice,
                                   dynamic_slice_in_dim as dynamic_slice_in_dim,
                                   dynamic_update_index_in_dim as dynamic_update_index_in_dim,
                                   dynamic_update_slice as dynamic_update_slice,
                                   dynamic_update_slice_in_dim as dynamic_update_slice_in_dim, gather as gather,
                                   scatter as scatter, scatter_add as scatter_add, scatter_max as scatter_max,
                                   scatter_min as scatter_min, scatter_mul as scatter_mul, select_n as select_n)
from ember._prims.sorting import sort as sort, sort_key_val as sort_key_val, top_k as top_k
from ember._prims.conv import (ConvDimensionNumbers as ConvDimensionNumbers, conv as conv,
                               conv_dimension_numbers as conv_dimension_numbers,
                               conv_general_dilated as conv_general_dilated, conv_transpose as conv_transpose,
                               conv_with_general_padding as conv_with_general_padding,
                               padtype_to_pads as padtype_to_pads)
from ember._prims.windowed import cumsum as cumsum, reduce_window as reduce_window
from ember._prims.special import (bessel_i0e as bessel_i0e, bessel_i1e as bessel_i1e, betainc as betainc,
                                  digamma as digamma, erf as erf, erf_inv as erf_inv, erfc as erfc, igamma as igamma,
                                  igamma_grad_a as igamma_grad_a, igammac as igammac, lgamma as lgamma,
                                  polygamma as polygamma, random_gamma_grad as random_gamma_grad, zeta as zeta)
from ember._prims.bits import bitcast_convert_type as bitcast_convert_type, threefry2x32 as threefry2x32
from ember._prims.reduction import (argmax as argmax, argmin as argmin, reduce as reduce, reduce_and as reduce_and,
                                    reduce_max as reduce_max, reduce_min as reduce_min, reduce_or as reduce_or,
                                    reduce_prod as reduce_prod, reduce_xor as reduce_xor)
from ember._prims.lax_helpers import (ConvGeneralDilatedDimensionNumbers as ConvGeneralDilatedDimensionNumbers,
                                      DotDimensionNumbers as DotDimensionNumbers, Precision as Precision,
                                      PrecisionLike as PrecisionLike, RoundingMethod as RoundingMethod,
                                      batch_matmul as batch_matmul, broadcast_like as broadcast_like,
                                      broadcast_shapes as broadcast_shapes, broadcast_to_rank as broadcast_to_rank,
                                      collapse as collapse,
                                      conv_general_dilated_patches as conv_general_dilated_patches,
                                      conv_general_permutations as conv_general_permutations,
                                      conv_general_shape_tuple as conv_general_shape_tuple,
                                      conv_shape_tuple as conv_shape_tuple,
                                      conv_transpose_shape_tuple as conv_transpose_shape_tuple, dtype as dtype,
                                      empty as empty, expand_dims as expand_dims, index_in_dim as index_in_dim,
                                      index_take as index_take, reduce_window_shape_tuple as reduce_window_shape_tuple,
                                      scatter_sub as scatter_sub, split as split, squeeze as squeeze, stack as stack,
                                      tile as tile, unstack as unstack)
from ember._prims.shape import (broadcast as broadcast, broadcast_in_dim as broadcast_in_dim,
                                broadcasted_iota as broadcasted_iota, convert_element_type as convert_element_type,
                                full as full, full_like as full_like, iota as iota, reduce_sum as reduce_sum,
                                reshape as reshape, transpose as transpose, zeros_like as zeros_like)
from ember._prims.slicing import (concatenate as concatenate, pad as pad, rev as rev, slice as slice,
                                 slice_in_dim as slice_in_dim)

__all__ = [
    "abs", "add", "atan2", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "ceil", "convert_element_type",
    "cos", "div", "eq", "exp", "expm1", "floor", "ge", "gt", "integer_pow", "is_finite", "le", "log", "log1p",
    "logistic", "lt", "max", "min", "mul", "ne", "neg", "pow", "rem", "round", "rsqrt", "select", "sign", "sin",
    "sqrt", "square", "stop_gradient", "sub", "tanh", "broadcast", "broadcast_in_dim", "broadcasted_iota",
    "concatenate", "dot", "dot_general", "full", "full_like", "iota", "pad", "reduce_max", "reduce_min",
    "reduce_sum", "reshape", "rev", "slice", "slice_in_dim", "transpose", "zeros_like",
    "GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers", "clamp", "dynamic_index_in_dim",
    "dynamic_slice",
    "dynamic_slice_in_dim", "dynamic_update_index_in_dim", "dynamic_update_slice", "dynamic_update_slice_in_dim",
    "gather", "scatter", "scatter_add", "scatter_max", "scatter_min", "scatter_mul", "select_n",
    "sort", "sort_key_val", "top_k",
    "ConvDimensionNumbers", "conv", "conv_dimension_numbers", "conv_general_dilated", "conv_transpose",
    "conv_with_general_padding", "padtype_to_pads", "cumsum", "reduce_window",
    "tan", "clz", "population_count", "shift_left", "shift_right_logical", "shift_right_arithmetic", "nextafter",
    "digamma", "erf", "erf_inv", "erfc", "lgamma", "polygamma", "bitcast_convert_type", "threefry2x32",
    "acos", "asin", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "cbrt", "exp2", "mulhi", "reciprocal",
    "reduce_precision", "bessel_i0e", "bessel_i1e", "betainc", "igamma", "igamma_grad_a", "igammac",
    "random_gamma_grad", "zeta", "argmax", "argmin", "reduce", "reduce_and", "reduce_or", "reduce_prod",
    "reduce_xor", "ConvGeneralDilatedDimensionNumbers", "DotDimensionNumbers", "Precision", "PrecisionLike",
    "RoundingMethod", "batch_matmul", "broadcast_like", "broadcast_shapes", "broadcast_to_rank", "collapse",
    "conv_general_dilated_patches", "conv_general_permutations", "conv_general_shape_tuple", "conv_shape_tuple",
    "conv_transpose_shape_tuple", "dtype", "empty", "expand_dims", "index_in_dim", "index_take",
    "reduce_window_shape_tuple", "scatter_sub", "split", "squeeze", "stack", "tile", "unstack",
]
