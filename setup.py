"""Builds the optional C extensions: the runtime's hot path and ember's LAPACK kernels (XLA FFI handlers); the
project's metadata is in pyproject.toml.

Without a C compiler the build goes on without them (optional=True): ember uses its pure-Python path, and linear
algebra lowers to XLA's own ops where they exist."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("ember._runtime._fastpath", ["ember/_runtime/_fastpath.c"], optional=True),
                   Extension("ember._runtime._lapack", ["ember/_runtime/_lapack.c"], optional=True)])
