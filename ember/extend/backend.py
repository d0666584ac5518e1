"""ember.extend.backend, as jax.extend.backend: the PJRT clients ember runs on (its backends), their devices and
compile options, and forgetting them (clear_backends).

A backend here is ember's PJRT client (ember._runtime.pjrt.Client: `.platform_name`, `.devices()`, ...), where
JAX's is an xla_client.Client. Not on ember: register_backend_factory (a factory of jaxlib clients: ember loads
PJRT plugins itself, named by EMBER_PJRT_PLUGIN) and ifrt_proxy (jaxlib's IFRT proxy client): both raise, saying
so."""
from __future__ import annotations

import types
from typing import Any, Callable

import numpy as np

from ember._api.jit import clear_caches as _clear_caches
from ember._runtime import backends as _backends
from ember._runtime.pjrt import Client as _Client
from ember._runtime.pjrt.structs import COMPILE_OPTIONS as _ONE_DEVICE, _field as _proto_field

_registered_caches: dict[str, Any] = {}


def backends() -> dict[str, _Client]:
    """The started backends by platform ({"cpu": client}), starting the default one first (as JAX's)."""
    _backends.get_client()
    return {client.platform_name: client for client in _backends._clients.values()}


def get_backend(platform: str | _Client | None = None) -> _Client:
    """The backend (PJRT client) of a platform ("cpu", "cuda"), the default one for None; a client is itself."""
    if isinstance(platform, _Client):
        return platform
    return _backends.get_client(platform)


def get_default_device() -> Any:
    """The default device (ember.default_device())."""
    return _backends.default_device()


def backend_xla_version(platform: str | None = None) -> int | None:
    """The XLA version number of a backend, which a PJRT plugin reports through jaxlib only: None (as JAX's CPU
    backend answers)."""
    get_backend(platform)
    return None


def clear_backends() -> None:
    """Forget the backends, so that new ones start at the next computation (with the options read anew, the CPU
    device count among them); arrays of the old ones keep working. Every compiled program is forgotten too, and
    the caches registered with register_backend_cache are cleared."""
    _backends.forget_clients()
    for cache in list(_registered_caches.values()):
        cache.cache_clear()


def clear_in_memory_compilation_cache() -> None:
    """Forget the compiled programs kept in memory (ember.clear_caches())."""
    _clear_caches()


def register_backend_cache(cache: Any, for_what: str) -> None:
    """Clear cache (an object with cache_clear(), as functools.lru_cache's) whenever the backends are cleared."""
    if not callable(getattr(cache, "cache_clear", None)):
        raise TypeError(f"register_backend_cache: {for_what!r}: the cache needs a cache_clear() method, got "
                        f"{type(cache).__name__}")
    _registered_caches[for_what] = cache


class CompileOptions:
    """The compile options of a program (get_compile_options): replicas, partitions and the device assignment;
    `SerializeAsString()` is the xla.CompileOptionsProto ember sends the plugin."""

    def __init__(self, num_replicas: int, num_partitions: int, device_assignment: Any = None,
                 env_option_overrides: dict[str, Any] | None = None):
        self.num_replicas, self.num_partitions = int(num_replicas), int(num_partitions)
        self.device_assignment, self.env_option_overrides = device_assignment, dict(env_option_overrides or {})

    def SerializeAsString(self) -> bytes:  # noqa: N802 (JAX's name)
        _field = _proto_field
        if (self.num_replicas, self.num_partitions, self.device_assignment) == (1, 1, None):
            return _ONE_DEVICE
        build = _field(4, self.num_replicas) + _field(5, self.num_partitions)
        if self.num_partitions > 1:
            build += _field(6, 1)  # use_spmd_partitioning
        if self.device_assignment is not None:
            grid = np.asarray([[getattr(d, "id", d) for d in row] for row in np.asarray(
                self.device_assignment, dtype=object).reshape(self.num_replicas, self.num_partitions)])
            assignment = _field(1, self.num_replicas) + _field(2, self.num_partitions) + b"".join(
                _field(3, b"".join(_field(1, int(grid[r, c])) for r in range(self.num_replicas)))
                for c in range(self.num_partitions))
            build += _field(9, assignment)
        return _field(3, build)

    def __repr__(self) -> str:
        return (f"CompileOptions(num_replicas={self.num_replicas}, num_partitions={self.num_partitions}, "
                f"device_assignment={self.device_assignment!r})")


def get_compile_options(num_replicas: int, num_partitions: int, device_assignment: Any = None,
                        env_options_overrides: dict[str, str] | None = None, fdo_profile: bytes | None = None,
                        detailed_logging: bool = True, backend: Any = None) -> CompileOptions:
    """The compile options of a program of num_replicas x num_partitions (device_assignment: the devices, or
    their ids, replica by partition), as jax.extend.backend.get_compile_options."""
    if num_replicas < 1 or num_partitions < 1:
        raise ValueError(f"get_compile_options: num_replicas ({num_replicas}) and num_partitions ({num_partitions}) "
                         "must be positive")
    if fdo_profile is not None:
        raise NotImplementedError("get_compile_options: fdo_profile (profile-guided optimisation data) is a GPU "
                                  "compiler's input; the CPU plugin takes none")
    return CompileOptions(num_replicas, num_partitions, device_assignment, env_options_overrides)


def register_backend_factory(name: str, factory: Callable[[], Any], *, priority: int = 0, fail_quietly: bool = True,
                             experimental: bool = False, make_topology: Any = None, c_api: Any = None) -> None:
    """JAX's registry of backend factories (functions making jaxlib clients): not on ember, which loads PJRT plugins
    itself (NotImplementedError)."""
    raise NotImplementedError(f"register_backend_factory({name!r}): ember makes its backends from PJRT plugins it "
                              "loads itself, not from jaxlib client factories; point EMBER_PJRT_PLUGIN at a PJRT "
                              "plugin (.so) to run on it")


def _no_ifrt_proxy(*args: Any, **kwargs: Any) -> Any:
    raise NotImplementedError("ifrt_proxy: jaxlib's IFRT proxy (a client of a remote runtime) is not part of ember")


ifrt_proxy = types.SimpleNamespace(get_client=_no_ifrt_proxy)
"""jaxlib's IFRT proxy module, by name: its get_client raises (ember has no IFRT proxy)."""

__all__ = ["backend_xla_version", "backends", "clear_backends", "clear_in_memory_compilation_cache", "get_backend",
           "get_compile_options", "get_default_device", "ifrt_proxy", "register_backend_cache",
           "register_backend_factory"]
