"""ember: stage Python functions out to a typed IR, transform it (grad, ...), lower it to StableHLO and run it
with XLA through PJRT."""
from ember import _prims  # noqa: F401  (registers the primitives)
from ember import _runtime  # noqa: F401  (installs eager execution)
from ember._api import compile, grad, jit, make_ir, stage_out, value_and_grad, vjp  # noqa: A004
from ember._api import eval_ir_public as eval_ir
from ember._array import Array, array, asarray, device_put
from ember._core import ConcretizationTypeError, UnexpectedTracerError
from ember._dtypes import ShapedArray
from ember._ir import IR, IRTypeError, check_ir
from ember._lowering import lower
from ember._passes import dce
from ember._pjrt import PjrtError
from ember._runtime import CompileError, Compiled, default_device, devices
from ember import lax, numpy, tree_util  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "Array", "CompileError", "Compiled", "ConcretizationTypeError", "IR", "IRTypeError", "PjrtError", "ShapedArray",
    "UnexpectedTracerError", "array", "asarray", "check_ir", "compile", "dce", "default_device", "device_put",
    "devices", "eval_ir", "grad", "jit", "lax", "lower", "make_ir", "numpy", "stage_out", "tree_util",
    "value_and_grad", "vjp",
]
