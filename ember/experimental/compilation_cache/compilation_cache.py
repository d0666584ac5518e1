"""ember.experimental.compilation_cache.compilation_cache (JAX's module of that name): set_cache_dir, the directory
of the persistent compilation cache, and reset_cache, its per-process state back to a fresh process's
(docs/compilation_cache.md)."""
from __future__ import annotations

import os

from ember._core.config import config as _config
from ember._runtime import compile_cache as _compile_cache


def set_cache_dir(path: str | os.PathLike | None) -> None:
    """Keep compiled programs in the directory path from now on, and look there before compiling (the option
    jax_compilation_cache_dir; None turns the cache off). Whoever can write the directory can run code in the
    processes that use it: keep it private (docs/security.md)."""
    _config.update("jax_compilation_cache_dir", None if path is None else os.fspath(path))


def reset_cache() -> None:
    """The cache's per-process state as in a fresh process (as JAX's): the warnings given once per directory may
    be given again, the lookup counts are zero, and the next compile using the cache is the process's first
    (its monitoring event); the directory set stays set."""
    _compile_cache.reset()


__all__ = ["reset_cache", "set_cache_dir"]
