"""DLPack exchange, as jax.dlpack: `from_dlpack` (any object with __dlpack__ / __dlpack_device__: numpy, torch,
another ember or JAX array) and `is_supported_dtype`. ember Arrays export themselves (`x.__dlpack__()`);
docs/dlpack.md has the details (zero-copy cases, devices, streams)."""
from ember._runtime.dlpack import from_dlpack as from_dlpack, is_supported_dtype as is_supported_dtype

__all__ = ["from_dlpack", "is_supported_dtype"]
