"""Which custom-call targets of ember's own exist in this process: the registry of their *providers*.

A family of FFI handlers (all targets whose name starts with a prefix, e.g. "ember_lapack_") is made known by a
provider the runtime installs (set_provider): a function that loads the family on first use and returns the names it
provides, or an empty set when it cannot. Lowerings ask `available(name)` (ember/_hlo/ffi.py emits the calls; the
lowering interpreter asks for the row kernel, ember/_hlo/row_fusion.py). It imports nothing from ember."""
from __future__ import annotations

from typing import Callable

_providers: dict[str, Callable[[], frozenset[str]]] = {}  # name prefix -> provider
_provided: dict[str, frozenset[str]] = {}  # name prefix -> what its provider returned (asked once)
_reasons: dict[str, Callable[[], str]] = {}  # name prefix -> why its targets are unavailable ("" when they are)
_variants: dict[str, Callable[[], "str | None"]] = {}  # name prefix -> which form of its kernels runs here


def set_provider(prefix: str, provider: Callable[[], frozenset[str]], reason: Callable[[], str] | None = None
                 ) -> None:
    """Install the provider of the custom-call targets whose names start with prefix (and a function saying why
    they are unavailable, for error messages); what the provider said before is forgotten."""
    _providers[prefix] = provider
    if reason is not None:
        _reasons[prefix] = reason
    _provided.pop(prefix, None)


def set_variant(prefix: str, variant: Callable[[], "str | None"]) -> None:
    """Install the function saying which form of the kernels of the targets whose names start with prefix runs in
    this process (the row kernels: the instruction set, "avx512f" or "avx2"), for lowerings whose thresholds were
    measured per form."""
    _variants[prefix] = variant


def variant(name: str) -> str | None:
    """Which form of the target `name`'s kernel runs here (see set_variant); None where it is unavailable or its
    provider does not say."""
    if not available(name):
        return None
    for prefix, which in _variants.items():
        if name.startswith(prefix):
            return which()
    return None


def unavailable_reason(name: str) -> str:
    """Why the target `name` is unavailable, as its provider tells ("" when it is available or nobody says)."""
    if available(name):
        return ""
    for prefix, reason in _reasons.items():
        if name.startswith(prefix):
            return reason()
    return ""


def available(name: str) -> bool:
    """Whether a custom call to the target `name` can run in this process (its provider loads it on first use)."""
    for prefix, provider in _providers.items():
        if name.startswith(prefix):
            names = _provided.get(prefix)
            if names is None:
                names = _provided[prefix] = frozenset(provider())
            return name in names
    return False


__all__ = ["available", "set_provider", "set_variant", "unavailable_reason", "variant"]
