"""ember.lax: the primitives as strict functions (operands of one dtype and shape; rank-0 operands broadcast),
like jax.lax. Python scalars take the dtype of the array operands. The `*_p` names are ember's own Primitive
objects for the operations jax.lax exports primitives of (their params are ember's, not JAX's)."""
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

from ember._prims import (  # noqa: A004 -- added jax.lax functions, types and helpers
    acos as acos, asin as asin, atan as atan, sinh as sinh, cosh as cosh, asinh as asinh, acosh as acosh,
    atanh as atanh, cbrt as cbrt, exp2 as exp2, mulhi as mulhi, reciprocal as reciprocal,
    reduce_precision as reduce_precision, bessel_i0e as bessel_i0e, bessel_i1e as bessel_i1e, betainc as betainc,
    igamma as igamma, igamma_grad_a as igamma_grad_a, igammac as igammac, random_gamma_grad as random_gamma_grad,
    zeta as zeta, argmax as argmax, argmin as argmin, reduce as reduce, reduce_and as reduce_and,
    reduce_or as reduce_or, reduce_prod as reduce_prod, reduce_xor as reduce_xor,
    ConvGeneralDilatedDimensionNumbers as ConvGeneralDilatedDimensionNumbers,
    DotDimensionNumbers as DotDimensionNumbers, Precision as Precision, PrecisionLike as PrecisionLike,
    RoundingMethod as RoundingMethod, batch_matmul as batch_matmul, broadcast_like as broadcast_like,
    broadcast_shapes as broadcast_shapes, broadcast_to_rank as broadcast_to_rank, collapse as collapse,
    conv_general_dilated_patches as conv_general_dilated_patches,
    conv_general_permutations as conv_general_permutations, conv_general_shape_tuple as conv_general_shape_tuple,
    conv_shape_tuple as conv_shape_tuple, conv_transpose_shape_tuple as conv_transpose_shape_tuple, dtype as dtype,
    empty as empty, expand_dims as expand_dims, index_in_dim as index_in_dim, index_take as index_take,
    reduce_window_shape_tuple as reduce_window_shape_tuple, scatter_sub as scatter_sub, split as split,
    squeeze as squeeze, stack as stack, tile as tile, unstack as unstack,
)
from ember._prims.shape import (  # primitives, under jax.lax's names
    broadcast_in_dim_p as broadcast_in_dim_p, convert_element_type_p as convert_element_type_p, iota_p as iota_p,
    reduce_sum_p as reduce_sum_p, reshape_p as reshape_p, transpose_p as transpose_p,
)
from ember._prims.elementwise import (  # primitives, under jax.lax's names
    abs_p as abs_p, acos_p as acos_p, acosh_p as acosh_p, add_p as add_p, and_p as and_p, asin_p as asin_p,
    asinh_p as asinh_p, atan2_p as atan2_p, atan_p as atan_p, atanh_p as atanh_p, cbrt_p as cbrt_p, ceil_p as ceil_p,
    clz_p as clz_p, cos_p as cos_p, cosh_p as cosh_p, div_p as div_p, eq_p as eq_p, exp2_p as exp2_p, exp_p as exp_p,
    expm1_p as expm1_p, floor_p as floor_p, ge_p as ge_p, gt_p as gt_p, integer_pow_p as integer_pow_p,
    is_finite_p as is_finite_p, le_p as le_p, log1p_p as log1p_p, log_p as log_p, logistic_p as logistic_p,
    lt_p as lt_p, max_p as max_p, min_p as min_p, mul_p as mul_p, mulhi_p as mulhi_p, ne_p as ne_p, neg_p as neg_p,
    nextafter_p as nextafter_p, not_p as not_p, or_p as or_p, population_count_p as population_count_p,
    pow_p as pow_p, reduce_precision_p as reduce_precision_p, rem_p as rem_p, round_p as round_p, rsqrt_p as rsqrt_p,
    shift_left_p as shift_left_p, shift_right_arithmetic_p as shift_right_arithmetic_p,
    shift_right_logical_p as shift_right_logical_p, sign_p as sign_p, sin_p as sin_p, sinh_p as sinh_p,
    sqrt_p as sqrt_p, stop_gradient_p as stop_gradient_p, sub_p as sub_p, tan_p as tan_p, tanh_p as tanh_p,
    xor_p as xor_p,
)
from ember._prims.slicing import (  # primitives, under jax.lax's names
    concatenate_p as concatenate_p, pad_p as pad_p, rev_p as rev_p, slice_p as slice_p,
)
from ember._prims.reduction import (  # primitives, under jax.lax's names
    argmax_p as argmax_p, argmin_p as argmin_p, reduce_and_p as reduce_and_p, reduce_max_p as reduce_max_p,
    reduce_min_p as reduce_min_p, reduce_or_p as reduce_or_p, reduce_p as reduce_p, reduce_prod_p as reduce_prod_p,
    reduce_xor_p as reduce_xor_p,
)
from ember._prims.dot import (  # primitives, under jax.lax's names
    dot_general_p as dot_general_p,
)
from ember._prims.indexing import (  # primitives, under jax.lax's names
    clamp_p as clamp_p, dynamic_slice_p as dynamic_slice_p, dynamic_update_slice_p as dynamic_update_slice_p,
    gather_p as gather_p, scatter_add_p as scatter_add_p, scatter_max_p as scatter_max_p,
    scatter_min_p as scatter_min_p, scatter_mul_p as scatter_mul_p, scatter_p as scatter_p,
)
from ember._prims.sorting import (  # primitives, under jax.lax's names
    sort_p as sort_p,
)
from ember._prims.conv import (  # primitives, under jax.lax's names
    conv_general_dilated_p as conv_general_dilated_p,
)
from ember._prims.windowed import (  # primitives, under jax.lax's names
    cumsum_p as cumsum_p, reduce_window_max_p as reduce_window_max_p, reduce_window_min_p as reduce_window_min_p,
    reduce_window_p as reduce_window_p, reduce_window_sum_p as reduce_window_sum_p,
    select_and_gather_add_p as select_and_gather_add_p, select_and_scatter_add_p as select_and_scatter_add_p,
)
from ember._prims.special import (  # primitives, under jax.lax's names
    bessel_i0e_p as bessel_i0e_p, bessel_i1e_p as bessel_i1e_p, digamma_p as digamma_p, erf_inv_p as erf_inv_p,
    erf_p as erf_p, erfc_p as erfc_p, igamma_grad_a_p as igamma_grad_a_p, igamma_p as igamma_p,
    igammac_p as igammac_p, lgamma_p as lgamma_p, polygamma_p as polygamma_p,
    regularized_incomplete_beta_p as regularized_incomplete_beta_p, zeta_p as zeta_p,
)
from ember._prims.bits import (  # primitives, under jax.lax's names
    bitcast_convert_type_p as bitcast_convert_type_p,
)
from ember._control.cond import (  # primitives, under jax.lax's names
    cond_p as cond_p,
)
from ember._control.loops import (  # primitives, under jax.lax's names
    scan_p as scan_p, while_p as while_p,
)
from ember._control.custom import (  # primitives, under jax.lax's names
    optimization_barrier_p as optimization_barrier_p,
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
    # added: jax.lax functions, types and helpers
    "acos", "asin", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "cbrt", "exp2", "mulhi", "reciprocal",
    "reduce_precision", "bessel_i0e", "bessel_i1e", "betainc", "igamma", "igamma_grad_a", "igammac",
    "random_gamma_grad", "zeta", "argmax", "argmin", "reduce", "reduce_and", "reduce_or", "reduce_prod",
    "reduce_xor", "ConvGeneralDilatedDimensionNumbers", "DotDimensionNumbers", "Precision", "PrecisionLike",
    "RoundingMethod", "batch_matmul", "broadcast_like", "broadcast_shapes", "broadcast_to_rank", "collapse",
    "conv_general_dilated_patches", "conv_general_permutations", "conv_general_shape_tuple", "conv_shape_tuple",
    "conv_transpose_shape_tuple", "dtype", "empty", "expand_dims", "index_in_dim", "index_take",
    "reduce_window_shape_tuple", "scatter_sub", "split", "squeeze", "stack", "tile", "unstack",
    # ember's primitives, under jax.lax's names
    "broadcast_in_dim_p", "convert_element_type_p", "iota_p", "reduce_sum_p", "reshape_p", "transpose_p", "abs_p",
    "acos_p", "acosh_p", "add_p", "and_p", "asin_p", "asinh_p", "atan2_p", "atan_p", "atanh_p", "cbrt_p", "ceil_p",
    "clz_p", "cos_p", "cosh_p", "div_p", "eq_p", "exp2_p", "exp_p", "expm1_p", "floor_p", "ge_p", "gt_p",
    "integer_pow_p", "is_finite_p", "le_p", "log1p_p", "log_p", "logistic_p", "lt_p", "max_p", "min_p", "mul_p",
    "mulhi_p", "ne_p", "neg_p", "nextafter_p", "not_p", "or_p", "population_count_p", "pow_p", "reduce_precision_p",
    "rem_p", "round_p", "rsqrt_p", "shift_left_p", "shift_right_arithmetic_p", "shift_right_logical_p", "sign_p",
    "sin_p", "sinh_p", "sqrt_p", "stop_gradient_p", "sub_p", "tan_p", "tanh_p", "xor_p", "concatenate_p", "pad_p",
    "rev_p", "slice_p", "argmax_p", "argmin_p", "reduce_and_p", "reduce_max_p", "reduce_min_p", "reduce_or_p",
    "reduce_p", "reduce_prod_p", "reduce_xor_p", "dot_general_p", "clamp_p", "dynamic_slice_p",
    "dynamic_update_slice_p", "gather_p", "scatter_add_p", "scatter_max_p", "scatter_min_p", "scatter_mul_p",
    "scatter_p", "sort_p", "conv_general_dilated_p", "cumsum_p", "reduce_window_max_p", "reduce_window_min_p",
    "reduce_window_p", "reduce_window_sum_p", "select_and_gather_add_p", "select_and_scatter_add_p", "bessel_i0e_p",
    "bessel_i1e_p", "digamma_p", "erf_inv_p", "erf_p", "erfc_p", "igamma_grad_a_p", "igamma_p", "igammac_p",
    "lgamma_p", "polygamma_p", "regularized_incomplete_beta_p", "zeta_p", "bitcast_convert_type_p", "cond_p",
    "scan_p", "while_p", "optimization_barrier_p",
]
