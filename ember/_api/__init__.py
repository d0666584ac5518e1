"""Layer 7, api: staging helpers and caches, jit (with its stages), and the function-level autodiff APIs."""
from ember._api.autodiff import grad, value_and_grad, vjp
from ember._api.jit import Jitted, clear_caches, disable_jit, eval_shape, jit, make_ir, make_jaxpr, stage_out
from ember._api.stages import ShapeDtypeStruct
from ember._api.running import compile, eval_ir_public, run_ir

__all__ = ["Jitted", "ShapeDtypeStruct", "clear_caches", "compile", "disable_jit", "eval_ir_public", "eval_shape",
           "grad", "jit", "make_ir", "make_jaxpr", "run_ir", "stage_out", "value_and_grad", "vjp"]
