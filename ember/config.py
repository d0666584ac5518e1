"""`ember.config`: global options, with JAX's names (with or without the `jax_` prefix).

    ember.config.update("jax_enable_x64", True)   # or "enable_x64"
    ember.config.enable_x64                       # -> True (also ember.config.jax_enable_x64)
    with ember.config.override(debug_nans=True): ...

Every option can also be set by an environment variable before ember is imported: `EMBER_<NAME>` (e.g.
`EMBER_DEBUG_NANS=1`), and JAX's `JAX_ENABLE_X64`, `JAX_DEBUG_NANS`, `JAX_DEBUG_INFS`, `JAX_DISABLE_JIT`.
`ember.config.describe()` lists the options."""
from __future__ import annotations

from typing import Any

from ember._core.config import OPTIONS as _OPTIONS, config as _config

update = _config.update
read = _config.read
override = _config.override
describe = _config.describe


def __getattr__(name: str) -> Any:
    return getattr(_config, name)


def __dir__() -> list[str]:
    return sorted(["update", "read", "override", "describe", *_OPTIONS, *("jax_" + name for name in _OPTIONS)])
