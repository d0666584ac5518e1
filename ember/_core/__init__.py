"""Layer 1, core: dtypes and avals, the IR, primitives and their rule protocol, tracing, the one evaluator loop,
pytrees and static-argument checks. It imports nothing from the layers above (hlo, prims, transforms, control,
runtime, api, numpy, public); the three places where a higher layer completes it are documented: the eager slot
(primitive.EAGER), the array methods (trace.install_array_methods) and the indexing of mutable array references
(refs.install_ref_methods)."""
from ember._core.dtypes import ShapedArray, aval_of_value, dtype_and_weak, is_python_scalar
from ember._core.eval import Env, eval_ir, eval_ir_env
from ember._core.ir import IR, Atom, Eqn, IRTypeError, Literal, Var, check_ir, python_scalar_literal, scalar_literal
from ember._core.primitive import (CHECK_KINDS, EAGER, HOOK_KINDS, NAN_CHECK, NO_DERIVATIVE_RULES, NOT_DIFFERENTIABLE,
                                   PRIMITIVES, RULE_KINDS, TRACE_STATE, Primitive)
from ember._core.trace import (ArrayMethods, Builder, ConcretizationTypeError, Tracer, UnexpectedTracerError, aval_of,
                               check_live, concrete_values, install_array_methods, is_tracing, stage_flat)

__all__ = [
    "CHECK_KINDS", "EAGER", "HOOK_KINDS", "NAN_CHECK",
    "IR", "NO_DERIVATIVE_RULES", "NOT_DIFFERENTIABLE", "PRIMITIVES", "RULE_KINDS", "TRACE_STATE", "ArrayMethods",
    "Atom", "Builder", "ConcretizationTypeError", "Env", "Eqn", "IRTypeError", "Literal", "Primitive",
    "ShapedArray", "Tracer", "UnexpectedTracerError", "Var", "aval_of", "aval_of_value", "check_ir", "check_live",
    "concrete_values",
    "dtype_and_weak", "eval_ir", "eval_ir_env", "install_array_methods", "is_python_scalar", "is_tracing",
    "python_scalar_literal", "scalar_literal", "stage_flat",
]
