"""Layer 6, runtime: the PJRT binding (pjrt/, importing nothing from ember), backends and devices, Array, moving
arguments to devices (dispatch), the compile stages (Lowered -> Compiled) and eager execution (a bounded cache;
importing this package fills the core's eager slot)."""
from ember._runtime import eager as _eager  # noqa: F401  (fills ember._core.EAGER)
from ember._runtime import lapack as _lapack  # noqa: F401  (installs the LAPACK kernels' provider in ember._hlo.ffi)
from ember._runtime import rows as _rows  # noqa: F401  (installs the row kernel's provider)
from ember._runtime import sort as _sort  # noqa: F401  (installs the sort kernel's provider)
from ember._runtime import vmath as _vmath_provider  # noqa: F401  (installs the transcendentals kernel's provider)
from ember._runtime import callbacks as _callbacks  # noqa: F401  (installs the host callbacks' provider)
from ember._runtime.array import Array, Shard, array, asarray
from ember._runtime.sharded import ShardedArray, device_put
from ember._runtime.dlpack import from_dlpack  # (also installs Array.__dlpack__)
from ember._runtime.backends import default_device, devices, get_client
from ember._runtime.compiler import CompileError, Compiled, Lowered, compile_ir, lower_ir
from ember._runtime.pjrt import PjrtError

__all__ = ["Array", "CompileError", "Compiled", "Lowered", "PjrtError", "Shard", "ShardedArray", "array", "asarray",
           "compile_ir", "default_device", "device_put", "devices", "from_dlpack", "get_client", "lower_ir"]
