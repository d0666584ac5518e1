"""Layer 2, hlo: the StableHLO text emitter and the lowering interpreter (an IR to a module, a sub-IR to a
region). It imports only from core."""
from ember._hlo.emitter import Emitter, compare_type, dot_dimension_numbers, i64_array, i64_list, tensor_type
from ember._hlo.lower import LoweringContext, LoweringError, lower, lower_closed, lower_into

__all__ = ["Emitter", "LoweringContext", "LoweringError", "compare_type", "dot_dimension_numbers", "i64_array",
           "i64_list", "lower", "lower_closed", "lower_into", "tensor_type"]
