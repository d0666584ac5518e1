"""Finding PJRT plugins on disk: $EMBER_PJRT_PLUGIN, the CPU plugin of xla-cpu-pjrt, an installed CUDA plugin.

Packages are located with importlib.util.find_spec, without importing them; nothing here loads a plugin."""
from __future__ import annotations

import importlib.util
import os


def _package_file(package: str, filename: str) -> str | None:
    """The path of a file in an installed package, found without importing the package itself."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(folder, filename)
        if os.path.isfile(path):
            return path
    return None


def default_plugin_path() -> str:
    """$EMBER_PJRT_PLUGIN if set, else the XLA CPU plugin of the xla-cpu-pjrt wheel."""
    path = os.environ.get("EMBER_PJRT_PLUGIN")
    if path:
        if not os.path.isfile(path):
            raise RuntimeError(f"EMBER_PJRT_PLUGIN is set to {path!r}, which is not a file")
        return path
    return cpu_plugin_path()


def cpu_plugin_path() -> str:
    """The XLA CPU plugin of the xla-cpu-pjrt wheel."""
    path = _package_file("xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt.so")
    if path is None:
        raise RuntimeError("no PJRT plugin found: `pip install xla-cpu-pjrt`, or set EMBER_PJRT_PLUGIN to the "
                           "path of a PJRT plugin .so")
    return path


def find_cuda_plugin() -> str | None:
    """The .so of an installed CUDA PJRT plugin (the jax-cuda13-pjrt or jax-cuda12-pjrt wheel), or None."""
    for package in ("jax_plugins.xla_cuda13", "jax_plugins.xla_cuda12"):
        path = _package_file(package, "xla_cuda_plugin.so")
        if path is not None:
            return path
    return None
