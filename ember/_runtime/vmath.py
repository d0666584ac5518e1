"""ember's vectorized float32 transcendentals (the C extension ember._runtime._vmath, ember/_runtime/vmath.h): the
provider of the custom-call target "ember_elementwise", which ember/_hlo/backend_forms.py lowers the float32 sin
and cos of large arrays to on the CPU (the plugin's XLA calls libm per element: 2-4x slower; tan, log1p and erf_inv,
faster in the kernel too, keep XLA's values for ember.random's sake: see backend_forms.KERNEL_OPS).

The kernel runs where the CPU has AVX2 and FMA (8 lanes) or AVX-512F (16 lanes); without the extension (not built,
another CPU) the provider offers nothing and the ops lower to XLA's own. The option `ember.config.cpu_backend_forms`
turns it off with the rest of the CPU forms. `run` calls the kernel's functions on a numpy array (the tests)."""
from __future__ import annotations

import importlib

import numpy as np

from ember._hlo import ffi as _hlo_ffi
from ember._hlo.backend_forms import ELEMENTWISE_TARGET
from ember._runtime import ffi

provide, reason = ffi.extension_provider("ember._runtime._vmath", "the CPU has neither AVX2 and FMA nor AVX-512F")
_hlo_ffi.set_provider(ELEMENTWISE_TARGET, provide, reason)


def _extension():
    try:
        return importlib.import_module("ember._runtime._vmath")
    except ImportError as e:
        raise RuntimeError(f"ember._runtime.vmath.run: {reason() or e}") from e


def widths() -> tuple[int, ...]:
    """The lane counts `run` takes on this CPU: (8, 16) where the CPU has AVX2 and FMA (16: the AVX-512 build where
    the CPU has AVX-512F, else the 16-lane source built for AVX2), () where it has neither or the extension is not
    built."""
    try:
        return tuple(importlib.import_module("ember._runtime._vmath").widths())
    except ImportError:
        return ()


def run(name: str, x: np.ndarray, width: int, threaded: bool = False) -> np.ndarray:
    """name (a function of ember._hlo.backend_forms.ELEMENTWISE_OPS) of the float32 array x by the kernel's
    `width`-lane functions (8 or 16), on this thread or (threaded) split among its threads as the handler does."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty_like(x)
    _extension().run(name, int(width), x.reshape(-1), out.reshape(-1), bool(threaded))
    return out


__all__ = ["provide", "reason", "run", "widths"]
