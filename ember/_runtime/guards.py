"""Transfer guards, as JAX's (`ember.transfer_guard("disallow")`): each transfer between the host and a device, or
between devices, is checked against its direction's level (ember.config transfer_guard_host_to_device, ...,
falling back to transfer_guard). 'allow' lets it through; 'log' logs implicit transfers (logger 'ember', level
WARNING) and 'disallow' refuses them (JaxRuntimeError); 'log_explicit' and 'disallow_explicit' do so for explicit
ones too (device_put, device_get). Implicit: a host value given to a jitted function or an operation as an
argument, np.asarray / float() / item() of an Array, a program's constants copied to another device.

The levels are kept here as plain attributes, updated when an option changes: the hot paths test one of them."""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from ember._core.config import config
from ember._runtime.pjrt import PjrtError

DIRECTIONS = ("host_to_device", "device_to_host", "device_to_device")
_logger = logging.getLogger("ember")


class Guards:
    """The level of each direction, and whether it is guarded at all (not 'allow'): while host_to_device is, the
    compiled call's fast path (in Python and C) leaves every call to the general path, which checks host
    arguments."""
    levels: dict[str, str] = {d: "allow" for d in DIRECTIONS}
    host_to_device = device_to_host = device_to_device = False

    @classmethod
    def update(cls, _: Any = None) -> None:
        general = config.read_canonical("transfer_guard") or "allow"  # (None, JAX's default, is allow)
        for direction in DIRECTIONS:
            level = config.read_canonical(f"transfer_guard_{direction}") or general
            cls.levels[direction] = level
            setattr(cls, direction, level != "allow")


for _name in ("transfer_guard",) + tuple(f"transfer_guard_{d}" for d in DIRECTIONS):
    config.on_change(_name, Guards.update)
del _name


class _Explicit(threading.local):
    depth = 0


_explicit = _Explicit()


class explicit:  # noqa: N801  (used as a context manager, like a function)
    """Marks the transfers of the with-block explicit (device_put, device_get)."""

    def __enter__(self) -> None:
        _explicit.depth += 1

    def __exit__(self, *exc: Any) -> None:
        _explicit.depth -= 1


def check(direction: str, what: Callable[[], str], explicit_transfer: bool = False) -> None:
    """Check a transfer in direction (one of DIRECTIONS) against its level; what() describes it for the message.
    Call only when Guards.<direction> is set (the callers test it first)."""
    level = Guards.levels[direction]
    is_explicit = explicit_transfer or _explicit.depth > 0
    if level == "allow" or (is_explicit and not level.endswith("_explicit")):
        return
    text = f"{direction.replace('_', '-')} transfer: {what()}"
    if level.startswith("log"):
        _logger.warning("%s%s", "explicit " if is_explicit else "", text)
        return
    raise PjrtError(f"Disallowed {'explicit ' if is_explicit else ''}{text} (ember.config "
                    f"transfer_guard_{direction} or transfer_guard is {level!r}; device_put / device_get make a "
                    "transfer explicit)", code="INVALID_ARGUMENT")


__all__ = ["DIRECTIONS", "Guards", "check", "explicit"]
