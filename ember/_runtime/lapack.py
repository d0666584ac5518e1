"""ember's LAPACK kernels (the C extension ember._runtime._lapack): the provider of the "ember_lapack_" custom-call
targets that ember/_prims/linalg.py lowers to.

The kernels call LAPACK and BLAS through scipy (the function pointers of scipy.linalg.cython_lapack and
cython_blas, whose PyCapsules the extension reads), so scipy is loaded on first use, when a program with linear
algebra is first lowered, not at `import ember`. Without the extension or scipy, or with the option
`ember.config.use_lapack` off, the provider offers nothing and linear algebra lowers to XLA's own ops where they
exist."""
from __future__ import annotations

import importlib

from ember._core.config import config
from ember._hlo import ffi as _hlo_ffi
from ember._runtime import ffi

PREFIX = "ember_lapack_"
_loaded: frozenset[str] | None = None  # the kernels' names once loaded (empty: the extension or scipy is missing)
missing: str = ""  # why the kernels are unavailable ("" when they are), for error messages


def _load() -> frozenset[str]:
    global missing
    try:
        extension = importlib.import_module("ember._runtime._lapack")  # (optional: it may not be built)
    except ImportError:
        missing = "ember's C extension ember._runtime._lapack is not built (python3 setup.py build_ext --inplace)"
        return frozenset()
    try:
        cython_lapack = importlib.import_module("scipy.linalg.cython_lapack")  # (scipy: a runtime dependency)
        cython_blas = importlib.import_module("scipy.linalg.cython_blas")
    except ImportError:
        missing = "scipy is not installed (pip install scipy)"
        return frozenset()
    extension.init(cython_lapack.__pyx_capi__, cython_blas.__pyx_capi__)
    handlers = extension.handlers()
    ffi.add_handlers(handlers)
    return frozenset(handlers)


def provide() -> frozenset[str]:
    """The kernels' target names, loading them (and registering them with the attached plugins) on first use;
    empty while the option use_lapack is off."""
    global _loaded, missing
    if not config.use_lapack:
        missing = "ember.config.use_lapack is off"
        return frozenset()
    if _loaded is None:
        _loaded = _load()
    if _loaded:
        missing = ""
    return _loaded


def reason() -> str:
    """Why the kernels are unavailable ("" when they are)."""
    return "" if provide() else missing


def _on_use_lapack_change(value: bool) -> None:
    _hlo_ffi.set_provider(PREFIX, provide, reason)  # (forgets what the provider said: asked again when lowering)


_hlo_ffi.set_provider(PREFIX, provide, reason)
config.on_change("use_lapack", _on_use_lapack_change)

__all__ = ["PREFIX", "provide", "reason"]
