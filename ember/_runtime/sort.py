"""ember's sort kernel (the C extension ember._runtime._sort): the provider of the custom-call target "ember_sort",
which ember/_prims/sorting.py lowers sorts to on the CPU (a radix sort, 20-80x faster than XLA's comparison sort).

The kernel is portable C; without the extension (not built) the provider offers nothing and sorts lower to XLA's
own `stablehlo.sort`. The option `ember.config.cpu_backend_forms` turns it off with the rest of the CPU forms."""
from __future__ import annotations

from ember._hlo import ffi as _hlo_ffi
from ember._prims.sorting import SORT_TARGET
from ember._runtime import ffi

provide, reason = ffi.extension_provider("ember._runtime._sort", "")
_hlo_ffi.set_provider(SORT_TARGET, provide, reason)

__all__ = ["provide", "reason"]
