"""ember.lax: the primitives as strict functions (operands of one dtype and shape; rank-0 operands broadcast),
like jax.lax. Python scalars take the dtype of the array operands."""
from ember._prims import (  # noqa: A004
    abs as abs, add as add, atan2 as atan2, bitwise_and as bitwise_and, bitwise_not as bitwise_not,
    bitwise_or as bitwise_or, bitwise_xor as bitwise_xor, broadcast as broadcast,
    broadcast_in_dim as broadcast_in_dim, broadcasted_iota as broadcasted_iota, ceil as ceil,
    concatenate as concatenate, convert_element_type as convert_element_type, cos as cos, div as div,
    dot as dot, dot_general as dot_general, eq as eq, exp as exp, expm1 as expm1, floor as floor, full as full,
    full_like as full_like, ge as ge, gt as gt, integer_pow as integer_pow, iota as iota,
    is_finite as is_finite, le as le, log as log, log1p as log1p, logistic as logistic, lt as lt, max as max,
    min as min, mul as mul, ne as ne, neg as neg, pad as pad, pow as pow, reduce_max as reduce_max,
    reduce_min as reduce_min, reduce_sum as reduce_sum, rem as rem, reshape as reshape, rev as rev, round as round,
    rsqrt as rsqrt, select as select, sign as sign, sin as sin, slice as slice, slice_in_dim as slice_in_dim,
    sqrt as sqrt, square as square, stop_gradient as stop_gradient, sub as sub, tanh as tanh,
    transpose as transpose, zeros_like as zeros_like,
)
from ember._prims import (  # indexing
    GatherDimensionNumbers as GatherDimensionNumbers, GatherScatterMode as GatherScatterMode,
    ScatterDimensionNumbers as ScatterDimensionNumbers,
    clamp as clamp, dynamic_index_in_dim as dynamic_index_in_dim, dynamic_slice as dynamic_slice,
    dynamic_slice_in_dim as dynamic_slice_in_dim, dynamic_update_index_in_dim as dynamic_update_index_in_dim,
    dynamic_update_slice as dynamic_update_slice, dynamic_update_slice_in_dim as dynamic_update_slice_in_dim,
    gather as gather, scatter as scatter, scatter_add as scatter_add, scatter_max as scatter_max,
    scatter_min as scatter_min, scatter_mul as scatter_mul, select_n as select_n,
)
from ember._prims import sort as sort, sort_key_val as sort_key_val, top_k as top_k  # sorting
from ember._prims import (  # convolution
    ConvDimensionNumbers as ConvDimensionNumbers, conv as conv, conv_dimension_numbers as conv_dimension_numbers,
    conv_general_dilated as conv_general_dilated, conv_transpose as conv_transpose,
    conv_with_general_padding as conv_with_general_padding, padtype_to_pads as padtype_to_pads,
)
from ember._prims import cumsum as cumsum, reduce_window as reduce_window  # windowed
from ember._prims import (  # bits, shifts and special functions
    bitcast_convert_type as bitcast_convert_type, clz as clz, digamma as digamma, erf as erf, erf_inv as erf_inv,
    erfc as erfc, lgamma as lgamma, nextafter as nextafter, polygamma as polygamma,
    population_count as population_count, shift_left as shift_left, shift_right_arithmetic as shift_right_arithmetic,
    shift_right_logical as shift_right_logical, tan as tan,
)
from ember._control import (  # cumulative scans
    cumlogsumexp as cumlogsumexp, cummax as cummax, cummin as cummin, cumprod as cumprod,
)
from ember._control import (  # noqa: A004
    associative_scan as associative_scan, cond as cond, fori_loop as fori_loop, map as map,
    optimization_barrier as optimization_barrier, scan as scan, switch as switch, while_loop as while_loop,
)

__all__ = [
    "associative_scan", "cond", "fori_loop", "map", "optimization_barrier", "scan", "switch", "while_loop",
    "abs", "add", "atan2", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "broadcast",
    "broadcast_in_dim", "broadcasted_iota", "ceil", "concatenate", "convert_element_type", "cos", "div", "dot",
    "dot_general", "eq", "exp", "expm1", "floor", "full", "full_like", "ge", "gt", "integer_pow", "iota",
    "is_finite", "le", "log", "log1p", "logistic", "lt", "max", "min", "mul", "ne", "neg", "pad", "pow",
    "reduce_max", "reduce_min", "reduce_sum", "rem", "reshape", "rev", "round", "rsqrt", "select", "sign", "sin",
    "slice", "slice_in_dim", "sqrt", "square", "stop_gradient", "sub", "tanh", "transpose", "zeros_like",
    "GatherDimensionNumbers", "GatherScatterMode", "ScatterDimensionNumbers", "clamp", "dynamic_index_in_dim",
    "dynamic_slice",
    "dynamic_slice_in_dim", "dynamic_update_index_in_dim", "dynamic_update_slice", "dynamic_update_slice_in_dim",
    "gather", "scatter", "scatter_add", "scatter_max", "scatter_min", "scatter_mul", "select_n",
    "sort", "sort_key_val", "top_k",
    "ConvDimensionNumbers", "conv", "conv_dimension_numbers", "conv_general_dilated", "conv_transpose",
    "conv_with_general_padding", "padtype_to_pads", "cumsum", "reduce_window",
    "cumlogsumexp", "cummax", "cummin", "cumprod",
    "bitcast_convert_type", "clz", "digamma", "erf", "erf_inv", "erfc", "lgamma", "nextafter", "polygamma",
    "population_count", "shift_left", "shift_right_arithmetic", "shift_right_logical", "tan",
]
