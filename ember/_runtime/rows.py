"""ember's CPU kernels (the C extension ember._runtime._rows): the provider of the custom-call targets "ember_rows"
(the fused row kernel, which ember/_hlo/row_fusion.py lowers row regions to: softmax, layer norm, logsumexp and
the like) and "ember_rows_bmm" (batched matrix products, chosen in ember/_hlo/backend_forms.py).

The extension offers the kernels only where the CPU has AVX-512F; without them (not built, another CPU) the provider
offers nothing, and regions and batched products lower to XLA's own ops. The option `ember.config.cpu_backend_forms`
turns them off with the rest of the CPU forms."""
from __future__ import annotations

import importlib

from ember._hlo import ffi as _hlo_ffi
from ember._hlo.row_fusion import TARGET
from ember._runtime import ffi

_loaded: frozenset[str] | None = None  # the kernels' names once loaded (empty: no extension or no AVX-512F)


def provide() -> frozenset[str]:
    """The kernels' target names once loaded and registered with the attached plugins; empty where they cannot
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
    """Why the kernels are unavailable ("" when they are)."""
    if provide():
        return ""
    try:
        importlib.import_module("ember._runtime._rows")
    except ImportError:
        return "ember's C extension ember._runtime._rows is not built (python3 setup.py build_ext --inplace)"
    return "the CPU lacks AVX-512F"


_hlo_ffi.set_provider(TARGET, provide, reason)

__all__ = ["provide", "reason"]
