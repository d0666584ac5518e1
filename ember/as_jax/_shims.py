"""The JAX modules that exist only under the alias, with only the names libraries read there, where each is stable
behaviour ember has:

- jax.lib: `__version__` (jaxlib's version: JAX_VERSION; equinox's tests compare it);
- the few of JAX's private modules (jax._src.*) that libraries import at their top level: equinox imports
  jax._src.traceback_util (api_boundary, a decorator that only shortens JAX's tracebacks: here the function
  itself; register_exclusion and include_frame, by which equinox shows the user's frame in its errors),
  jax._src.dtypes (TypePromotionError: ember.dtypes) and jax._src.dispatch (wait_for_tokens:
  ember.effects_barrier); flax imports jax._src.core (ember.core), jax._src.dtypes (ExtendedDType, to subclass),
  jax._src.checkify (ember.experimental.checkify, JaxException), jax._src.state.types (AbstractRef: the type of a
  Ref, ember's RefAval) and jax._src.tree_util (_registry: the registered pytree node types).

Every other private module stays a ModuleNotFoundError (docs/as_jax.md lists what libraries reach for)."""
from __future__ import annotations

import importlib
import os
from typing import Any, Callable, TypeVar

import numpy as np

import ember
from ember._control.checkify import JaxException
from ember._core.pytree import _REGISTRY as pytree_registry
from ember._core.refs import RefAval
from ember._runtime.backends import _clients


def api_boundary(fun: Callable[..., Any] | None = None, **unused: Any) -> Any:
    """JAX's marker of an API entry point for traceback filtering: ember filters nothing, so the function itself
    (usable with keywords, as a decorator factory)."""
    return (lambda f: f) if fun is None else fun


_exclude_paths: list[str] = [os.path.dirname(os.path.abspath(ember.__file__)) + os.sep]  # (ember's own files)


def register_exclusion(path: str) -> None:
    """Exclude a library's file (or directory) from the frames include_frame reports: equinox excludes its own, to
    show a user the frame that raised."""
    _exclude_paths.append(path)


def include_frame(frame: Any) -> bool:
    """Whether a traceback frame is the user's: not in ember, nor in a path a library excluded."""
    return not frame.f_code.co_filename.startswith(tuple(_exclude_paths))  # (flax edits the list: read it each time)


JAX_VERSION = "0.10.2"
"""The JAX API ember implements (the JAX of the oracle tests and of tests/api_names/): `jax.__version__` under the
alias."""

def supports_inf(dtype: Any) -> bool:
    """Whether a dtype has infinities (the floating-point and complex ones ember has all do)."""
    return bool(np.issubdtype(np.dtype(dtype), np.inexact))


class ExtendedDType:
    """The base class of an extended dtype object a library defines (flax's fp8 meta dtype subclasses it at import);
    ember computes on no extended dtype but its own typed PRNG keys."""
    type: type
    name: str


def _submodule(package: str, name: str) -> Any:
    """A shim package's submodule read as an attribute before anything imported it (`jax._src.xla_bridge` after
    `import jax`: JAX's own package has imported it by then)."""
    if f"{package}.{name}" in SHIMS:
        return importlib.import_module(f"{package}.{name}")
    raise AttributeError(f"module {package!r} has no attribute {name!r} (JAX code run by ember: ember has no "
                         "counterpart of that private module)")


def _started_backends(name: str) -> Any:
    """jax._src.xla_bridge's `_backends` (platform -> client), read when asked: the backends started so far (chex's
    set_n_cpu_devices refuses a late device count by it)."""
    if name != "_backends":
        raise AttributeError(f"module 'jax._src.xla_bridge' has no attribute {name!r} (JAX code run by ember)")
    return {client.platform_name: client for client in _clients.values() if client.handle}


# name -> the module's attributes, or (the ember module it is, the attributes it has beside that module's), or the
# name of the ember module it is, itself (what a library sets on it reaches ember: jax._src.compiler's
# backend_compile_and_load, the function every compile goes through)
SHIMS: dict[str, str | dict[str, Any] | tuple[str, dict[str, Any]]] = {
    "jax.lib": {"__version__": JAX_VERSION},
    "jax._src": {"__getattr__": lambda name: _submodule("jax._src", name)},
    "jax._src.traceback_util": {"api_boundary": api_boundary, "register_exclusion": register_exclusion,
                                "include_frame": include_frame, "_exclude_paths": _exclude_paths},
    "jax._src.dtypes": ("ember.dtypes", {"DType": np.dtype, "ExtendedDType": ExtendedDType,
                                         "supports_inf": supports_inf}),
    "jax._src.dispatch": {"wait_for_tokens": ember.effects_barrier},
    "jax._src.core": ("ember.core", {}),
    "jax._src.checkify": ("ember.experimental.checkify", {"JaxException": JaxException, "Out": TypeVar("Out")}),
    "jax._src.state": {},
    "jax._src.state.types": {"AbstractRef": RefAval},
    "jax._src.tree_util": {"_registry": pytree_registry},
    "jax._src.compiler": "ember._runtime.pjrt.backend_compile",
    "jax._src.xla_bridge": {"__getattr__": _started_backends},
}
PACKAGES = frozenset({"jax._src", "jax._src.state"})
