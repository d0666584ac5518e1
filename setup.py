"""Builds the optional C extensions: the runtime's hot path, ember's LAPACK kernels and its fused row kernel, sort and
vectorized transcendentals (XLA FFI handlers); the project's metadata is in pyproject.toml.

Without a C compiler the build goes on without them (optional=True): ember uses its pure-Python path, linear
algebra lowers to XLA's own ops where they exist, and row regions to XLA's ops."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("ember._runtime._fastpath", ["ember/_runtime/_fastpath.c"], optional=True),
                   Extension("ember._runtime._lapack", ["ember/_runtime/_lapack.c"],
                             depends=["ember/_runtime/ffi_api.h"], optional=True),
                   Extension("ember._runtime._rows", ["ember/_runtime/_rows.c"],
                             depends=["ember/_runtime/ffi_api.h", "ember/_runtime/pool.h"], optional=True),
                   Extension("ember._runtime._sort", ["ember/_runtime/_sort.c"],
                             depends=["ember/_runtime/ffi_api.h", "ember/_runtime/pool.h",
                                      "ember/_runtime/sort_quick.h", "ember/_runtime/sort_avx512.h",
                                      "ember/_runtime/sort_avx2.h", "ember/_runtime/sort_undef.h"], optional=True),
                   Extension("ember._runtime._vmath", ["ember/_runtime/_vmath.c"], libraries=["m"],
                             depends=["ember/_runtime/ffi_api.h", "ember/_runtime/pool.h",
                                      "ember/_runtime/vmath.h"], optional=True)])
