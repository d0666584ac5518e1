"""Which implementation of the runtime's per-call hot path is in use: the C extension ember._runtime._fastpath,
or the pure-Python one.

The hot path is: a Buffer's lifetime transitions (pin, unpin, delete: pjrt/buffer.py), running an executable on
Buffers (Runner: pjrt/executable.py), a compiled program's call on Arrays (Caller: compiler.py), and
block_until_ready. Each module defines the Python implementation (the reference behaviour) and takes the C one
from here when it is in use. The C extension is used when it was built (pip builds it when a C compiler is
available) and the environment variable EMBER_DISABLE_C_EXTENSION is not set to a non-empty value other than
"0" when ember is imported. One implementation is used for the whole process: the two are never mixed.

USING_C tells which one is in use; C is the extension module, or None."""
from __future__ import annotations

import importlib
import os
from types import ModuleType

_ABI = 10  # the extension's ABI constant this Python code was written for (a stale build is not used)

DISABLED = os.environ.get("EMBER_DISABLE_C_EXTENSION", "") not in ("", "0")


def _load() -> ModuleType | None:
    if DISABLED:
        return None
    try:
        _fastpath = importlib.import_module("ember._runtime._fastpath")  # (optional: it may not be built)
    except ImportError:
        return None
    return _fastpath if getattr(_fastpath, "ABI", None) == _ABI else None


C: ModuleType | None = _load()
USING_C: bool = C is not None
