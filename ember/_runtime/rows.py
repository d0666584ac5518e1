"""ember's CPU kernels (the C extension ember._runtime._rows): the provider of the custom-call targets "ember_rows"
(the fused row kernel, which ember/_hlo/row_fusion.py lowers row regions to: softmax, layer norm, logsumexp and
the like) and "ember_rows_bmm" (batched matrix products, chosen in ember/_hlo/backend_forms.py).

The extension offers the kernels only where the CPU has AVX-512F; without them (not built, another CPU) the provider
offers nothing, and regions and batched products lower to XLA's own ops. The option `ember.config.cpu_backend_forms`
turns them off with the rest of the CPU forms."""
from __future__ import annotations

from ember._hlo import ffi as _hlo_ffi
from ember._hlo.row_fusion import TARGET
from ember._runtime import ffi

provide, reason = ffi.extension_provider("ember._runtime._rows", "the CPU lacks AVX-512F")
_hlo_ffi.set_provider(TARGET, provide, reason)

__all__ = ["provide", "reason"]
