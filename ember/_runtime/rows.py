"""ember's fused row kernel (the C extension ember._runtime._rows): the provider of the "ember_rows" custom-call
target that ember/_hlo/row_fusion.py lowers row regions to (softmax, layer norm, logsumexp and the like on the CPU
plugin).

The extension offers the kernel only where the CPU has AVX-512F; without it (not built, another CPU) the provider
offers nothing and the regions lower to XLA's own ops. The option `ember.config.cpu_backend_forms` turns the regions
off with the rest of the CPU forms."""
from __future__ import annotations

import importlib

from ember._hlo import ffi as _hlo_ffi
from ember._hlo.row_fusion import TARGET
from ember._runtime import ffi

_loaded: frozenset[str] | None = None  # the kernel's name once loaded (empty: no extension or no AVX-512F)


def provide() -> frozenset[str]:
    """{"ember_rows"} once the kernel is loaded and registered with the attached plugins; empty where it cannot
    run here."""
    global _loaded
    if _loaded is None:
        try:
            extension = importlib.import_module("ember._runtime._rows")  # (optional: it may not be built)
        except ImportError:
            _loaded = frozenset()
        else:
            handlers = extension.handlers()
            ffi.add_handlers(handlers)
            _loaded = frozenset(handlers)
    return _loaded


def reason() -> str:
    """Why the kernel is unavailable ("" when it is)."""
    if provide():
        return ""
    try:
        importlib.import_module("ember._runtime._rows")
    except ImportError:
        return "ember's C extension ember._runtime._rows is not built (python3 setup.py build_ext --inplace)"
    return "the CPU lacks AVX-512F"


_hlo_ffi.set_provider(TARGET, provide, reason)

__all__ = ["provide", "reason"]
