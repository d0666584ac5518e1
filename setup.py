"""Builds the optional C extension of the runtime's hot path; the project's metadata is in pyproject.toml.

Without a C compiler the build goes on without it (optional=True) and ember uses its pure-Python path."""
from setuptools import Extension, setup

setup(ext_modules=[Extension("ember._runtime._fastpath", ["ember/_runtime/_fastpath.c"], optional=True)])
