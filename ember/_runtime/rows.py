"""ember's CPU kernels (the C extension ember._runtime._rows): the provider of the custom-call targets "ember_rows"
(the fused row kernel, which ember/_hlo/row_fusion.py lowers row regions to: softmax, layer norm, logsumexp and
the like), "ember_rows_bmm" (batched matrix products, chosen in ember/_hlo/backend_forms.py) and
"ember_rows_transpose" (transposes that materialize, row_fusion.kernel_transposes).

The extension offers the kernels where the CPU has AVX-512F (16-lane forms) or else AVX2 with FMA (8-lane forms,
chosen at run time; isa() says which); without either, or not built, the provider offers nothing, and regions,
batched products and transposes lower to XLA's own ops. Some of the lowering's thresholds depend on the form
(targets.variant: the AVX2 kernels lose to XLA's loops on short rows, see row_fusion.min_row). The option
`ember.config.cpu_backend_forms` turns them off with the rest of the CPU forms."""
from __future__ import annotations

import importlib
from functools import lru_cache

from ember._hlo import ffi as _hlo_ffi
from ember._hlo import targets as _targets
from ember._hlo.row_fusion import TARGET
from ember._runtime import ffi

provide, reason = ffi.extension_provider("ember._runtime._rows", "the CPU has neither AVX-512F nor AVX2 with FMA")
_hlo_ffi.set_provider(TARGET, provide, reason)


@lru_cache(maxsize=None)
def isa() -> str | None:
    """The kernels' instruction set on this CPU: "avx512f", "avx2" (with FMA), or None (none: not built, or neither)."""
    if not provide():
        return None
    return importlib.import_module("ember._runtime._rows").isa()


_targets.set_variant(TARGET, isa)

__all__ = ["isa", "provide", "reason"]
